/** The extension's entry point: wires the daemon client, the step executor and the `vscode` API together — settings, status bar, output channel, commands and window events. */

import * as vscode from "vscode";

import { CATALOG_COMMANDS } from "./catalog.generated";
import { ConnectionState, DaemonClient } from "./client";
import { createDrive } from "./controller";
import { locateSocket, processDiscoveryInput, SocketLocation } from "./discovery";
import { ChatReadinessReporter, languageModelsFor } from "./chatReadiness";
import {
  acceptanceWindowFor,
  DEFAULT_ACCEPTANCE_WINDOW_MS,
  DEFAULT_FIRST_REQUEST_ACCEPTANCE_WINDOW_MS,
  DEFAULT_OUTCOME_TIMEOUT_MS,
  FirstChatRequest,
  supportsBlockOnResponse,
} from "./chatEvidence";
import { ActiveTab, ACTIVE_TAB_CHECK, executeSteps, ExecuteOptions, Host } from "./executor";
import { buildHello, capabilitiesFor, localFolderPaths, UriFacts } from "./hello";
import { detectProduct } from "./product";
import type { DriveRequest } from "./protocol/types.generated";
import { TerminalBridge } from "./terminals";
import { terminalSizeOf, xtermMirror } from "./terminalScreen";

/** Shell integration's execution events (VS Code 1.93+), which this extension's minimum API (1.85) does not declare. */
interface ShellExecutionEvents {
  onDidStartTerminalShellExecution: vscode.Event<{
    terminal: vscode.Terminal;
    execution: { read(): AsyncIterable<string> };
  }>;
}

/** The shell-execution API when this VS Code has it: without it no terminal's screen can be mirrored. */
function shellExecutionEvents(): ShellExecutionEvents | undefined {
  const window = vscode.window as unknown as Partial<ShellExecutionEvents>;
  return typeof window.onDidStartTerminalShellExecution === "function" ? (window as ShellExecutionEvents) : undefined;
}

let client: DaemonClient | undefined;

/** The user's settings under `koru.*`. */
function settings() {
  const config = vscode.workspace.getConfiguration("koru");
  return {
    socketPath: config.get<string>("socketPath", ""),
    allowedCommands: config.get<string[]>("allowedCommands", []).filter((c) => typeof c === "string" && c.trim()),
    chatEvidence: config.get<boolean>("chatEvidence", true),
    acceptanceWindowMs: positive(config.get<number>("acceptanceWindowMs"), DEFAULT_ACCEPTANCE_WINDOW_MS),
    firstRequestAcceptanceWindowMs: positive(config.get<number>("firstRequestAcceptanceWindowMs"), DEFAULT_FIRST_REQUEST_ACCEPTANCE_WINDOW_MS),
    outcomeTimeoutMs: positive(config.get<number>("outcomeTimeoutMs"), DEFAULT_OUTCOME_TIMEOUT_MS),
  };
}

/** A setting's number when it is a positive finite number, else the default. */
function positive(value: number | undefined, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}

function socketLocation(): SocketLocation {
  return locateSocket(processDiscoveryInput(settings().socketPath));
}

/** The commands this window may run for the daemon: the catalog's chat commands plus the user's. */
function allowList(): Set<string> {
  return new Set([...CATALOG_COMMANDS, ...settings().allowedCommands]);
}

function uriFacts(uri: vscode.Uri): UriFacts {
  return { scheme: uri.scheme, fsPath: uri.fsPath, uri: uri.toString() };
}

/** Every workspace folder of the window, local or not. */
function workspaceFolders(): UriFacts[] {
  return (vscode.workspace.workspaceFolders ?? []).map((folder) => uriFacts(folder.uri));
}

/** The window's active editor tab, as the tab check sees it. */
function activeTab(): ActiveTab | undefined {
  const tab = vscode.window.tabGroups.activeTabGroup.activeTab;
  if (!tab) return undefined;
  return {
    label: tab.label,
    webviewViewType: tab.input instanceof vscode.TabInputWebview ? tab.input.viewType : undefined,
    windowFocused: vscode.window.state.focused,
  };
}

/** VS Code's commands, clipboard and tabs, as the executor sees them. */
const vscodeHost: Host = {
  executeCommand: (command, args) => Promise.resolve(vscode.commands.executeCommand(command, ...args)),
  readClipboard: () => Promise.resolve(vscode.env.clipboard.readText()),
  writeClipboard: (text) => Promise.resolve(vscode.env.clipboard.writeText(text)),
  activeTab,
};

/** When, after connecting, the extension looks again for commands that other extensions registered late (activated after this one). */
const CAPABILITY_RECHECKS_MS = [3_000, 15_000, 60_000];

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel("Koru", { log: true });
  const extensionVersion: string = context.extension.packageJSON.version ?? "0.0.0";
  const status = vscode.window.createStatusBarItem("koru.status", vscode.StatusBarAlignment.Left, 0);
  status.name = "Koru";
  status.command = "koru.showStatus";
  let activeDrive: string | undefined;
  let drivesRun = 0;
  const host = { appName: vscode.env.appName, uriScheme: vscode.env.uriScheme, appHost: vscode.env.appHost };
  const readiness = new ChatReadinessReporter(languageModelsFor(vscode, detectProduct(host)), (ready) =>
    client ? client.sendEvent({ kind: "chat_readiness", ready: ready.ready, reason: ready.reason }) : false,
  );
  const blockOnResponse = supportsBlockOnResponse(vscode.version);
  // The window's terminals for the daemon. Shell pids are processes on the daemon's machine only
  // when this extension host runs where the terminals do.
  const shellEvents = shellExecutionEvents();
  const terminals = shellEvents
    ? new TerminalBridge<vscode.Terminal>({
        makeMirror: xtermMirror,
        sizeOf: terminalSizeOf,
        report: (list) => void client?.sendTerminals(list),
        pidsAreLocal: !vscode.env.remoteName || context.extension.extensionKind === vscode.ExtensionKind.Workspace,
      })
    : undefined;
  // This extension host's chat has not run a request yet: its first gets the longer window.
  const firstChatRequest = new FirstChatRequest();

  /** The chat-evidence options of a drive, when this IDE and the settings allow them. */
  const chatEvidence = (driveId: string): ExecuteOptions["chatEvidence"] => {
    const current = settings();
    if (!blockOnResponse || !current.chatEvidence) return undefined;
    return {
      timing: {
        acceptanceWindowMs: current.acceptanceWindowMs,
        firstRequestAcceptanceWindowMs: current.firstRequestAcceptanceWindowMs,
        outcomeTimeoutMs: current.outcomeTimeoutMs,
      },
      firstRequest: firstChatRequest,
      reportOutcome: (outcome) => {
        log.info(`drive ${driveId}: the chat's outcome: ${JSON.stringify(outcome)}`);
        client?.sendEvent({ kind: "chat_outcome", drive_id: driveId, outcome });
      },
    };
  };

  const render = (state: ConnectionState) => {
    switch (state.kind) {
      case "connected":
        status.text = activeDrive ? "$(sync~spin) Koru: drive running" : "$(plug) Koru";
        status.tooltip = activeDrive
          ? `Koru: running drive ${activeDrive}`
          : `Koru: connected to the daemon at ${state.socket.path} (session ${state.sessionId})`;
        status.backgroundColor = undefined;
        break;
      case "connecting":
        status.text = "$(sync~spin) Koru";
        status.tooltip = `Koru: connecting to ${state.socket.path}`;
        break;
      case "no_daemon":
        status.text = "$(debug-disconnect) Koru: no daemon";
        status.tooltip = `Koru: ${state.reason}. Retrying by itself; start the daemon with \`koru daemon\`.`;
        status.backgroundColor = new vscode.ThemeColor("statusBarItem.warningBackground");
        break;
      case "refused":
        status.text = "$(error) Koru: refused";
        status.tooltip = `Koru: the daemon refused this window: ${state.code}: ${state.message}`;
        status.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
        break;
      case "stopped":
        status.text = "$(circle-slash) Koru";
        status.tooltip = "Koru: not connected";
        break;
    }
    status.show();
  };

  // The capabilities the daemon has now (the hello's, or the last `capabilities` report).
  let reportedCapabilities: string | undefined;
  const interestingCommands = () => [...CATALOG_COMMANDS, ...settings().allowedCommands];
  /** Reports the capabilities again when the IDE's commands changed (an extension activated late: the Claude Code panel's commands). */
  const recheckCapabilities = async () => {
    if (!client?.session) return;
    const available = new Set(await vscode.commands.getCommands(true));
    const now = capabilitiesFor({ availableCommands: available, interestingCommands: interestingCommands(), terminalIo: terminals !== undefined, clipboardIo: true });
    const text = JSON.stringify(now);
    if (text === reportedCapabilities) return;
    if (client.sendCapabilities(now)) {
      reportedCapabilities = text;
      log.info(`capabilities changed; reported ${now.length}`);
    }
  };
  let recheckTimers: ReturnType<typeof setTimeout>[] = [];
  const scheduleCapabilityRechecks = () => {
    for (const timer of recheckTimers) clearTimeout(timer);
    recheckTimers = CAPABILITY_RECHECKS_MS.map((ms) => setTimeout(() => void recheckCapabilities(), ms));
  };
  context.subscriptions.push({ dispose: () => recheckTimers.forEach((timer) => clearTimeout(timer)) });

  client = new DaemonClient({
    locate: socketLocation,
    log,
    hello: async () => {
      const available = new Set(await vscode.commands.getCommands(true));
      reportedCapabilities = JSON.stringify(
        capabilitiesFor({ availableCommands: available, interestingCommands: interestingCommands(), terminalIo: terminals !== undefined, clipboardIo: true }),
      );
      return buildHello({
        ...host,
        ideVersion: vscode.version,
        extensionVersion,
        workspaceFolders: workspaceFolders(),
        remoteName: vscode.env.remoteName,
        storageUri: context.storageUri ? uriFacts(context.storageUri) : undefined,
        globalStorageUri: uriFacts(context.globalStorageUri),
        chat: await readiness.forHello(),
        pid: process.pid,
        parentPid: process.ppid,
        focused: vscode.window.state.focused,
        availableCommands: available,
        interestingCommands: interestingCommands(),
        terminalIo: terminals !== undefined,
        clipboardIo: true,
      });
    },
    runDrive: (drive: DriveRequest, ack, signal) =>
      executeSteps(drive.steps ?? [], drive.prompt, vscodeHost, allowList(), ack, {
        submit: drive.options.submit ?? true,
        signal,
        chatEvidence: chatEvidence(drive.drive_id),
      }),
    terminalIo: terminals ? (order) => terminals.handle(order) : undefined,
    // The system clipboard, for OS injection that has none of its own (the desktop portal
    // without a Clipboard interface): the daemon reads it, puts the prompt there, pastes
    // with a key chord into this window, and puts the previous text back.
    clipboard: {
      read: async () => {
        const text = await vscode.env.clipboard.readText();
        return text === "" ? undefined : text;
      },
      write: (text) => Promise.resolve(vscode.env.clipboard.writeText(text)),
    },
    onState: (state) => {
      // Readiness may have changed between the hello and the welcome.
      if (state.kind === "connected") void readiness.recheck();
      if (state.kind === "connected") terminals?.send();
      if (state.kind === "connected") scheduleCapabilityRechecks();
      render(state);
    },
    onDrive: (driveId) => {
      activeDrive = driveId;
      if (driveId) drivesRun += 1;
      render(client!.state);
    },
  });

  readiness.start();
  if (terminals && shellEvents) {
    for (const terminal of vscode.window.terminals) terminals.opened(terminal);
    context.subscriptions.push(
      { dispose: () => terminals.dispose() },
      vscode.window.onDidOpenTerminal((terminal) => terminals.opened(terminal)),
      vscode.window.onDidCloseTerminal((terminal) => terminals.closed(terminal)),
      shellEvents.onDidStartTerminalShellExecution((event) => {
        // Read at once: the stream holds only what is written after the first read.
        terminals.mirror(event.terminal, event.execution.read()).catch((error) => {
          log.warn(`terminal "${event.terminal.name}": its output stopped being mirrored: ${String(error)}`);
        });
      }),
    );
  }
  context.subscriptions.push(
    log,
    status,
    { dispose: () => readiness.dispose() },
    // An extension installed, enabled or removed while the window runs.
    vscode.extensions.onDidChange(() => {
      void recheckCapabilities();
      scheduleCapabilityRechecks();
    }),
    // Koru's own tab check, as an IDE command too: it is listed among the window's commands
    // (the capability routes that use it require), and tells what the check would see.
    vscode.commands.registerCommand(ACTIVE_TAB_CHECK, () => activeTab()),
    vscode.window.onDidChangeWindowState((state) => {
      client?.sendEvent({ kind: "focus", focused: state.focused });
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      client?.sendEvent({ kind: "workspace_changed", workspace_folders: localFolderPaths(workspaceFolders()) });
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("koru.socketPath") || event.affectsConfiguration("koru.allowedCommands")) {
        log.info("settings changed; reconnecting with the new socket path and capabilities");
        client?.reconnectNow();
      }
    }),
    vscode.commands.registerCommand("koru.showStatus", async () => {
      const state = client?.state ?? { kind: "stopped" };
      const product = detectProduct({
        appName: vscode.env.appName,
        uriScheme: vscode.env.uriScheme,
        appHost: vscode.env.appHost,
      });
      const lines = [
        `Socket: ${socketLocation().path} (${socketLocation().source})`,
        `IDE: ${product} ${vscode.version} (appName "${vscode.env.appName}", uriScheme "${vscode.env.uriScheme}", appHost "${vscode.env.appHost}"${vscode.env.remoteName ? `, remote "${vscode.env.remoteName}"` : ""})`,
        `Submit evidence: ${
          !blockOnResponse
            ? `the command returned only (VS Code ${vscode.version} < 1.104 has no blockOnResponse)`
            : settings().chatEvidence
              ? `the chat's own response (acceptance window ${settings().acceptanceWindowMs} ms; ${
                  firstChatRequest.taken
                    ? "this window's chat has run a request"
                    : `${acceptanceWindowFor(settings(), true)} ms for this window's first chat request, not sent yet`
                })`
              : "the command returned only (setting koru.chatEvidence is off)"
        }`,
        `Extension host pid ${process.pid}, parent ${process.ppid}`,
        `Drives run in this window: ${drivesRun}${activeDrive ? `; running ${activeDrive}` : ""}`,
        `Allowed commands: ${[...allowList()].join(", ")}`,
      ];
      let headline: string;
      switch (state.kind) {
        case "connected":
          headline = `Koru: connected to koru ${state.daemonVersion} as session ${state.sessionId}`;
          break;
        case "no_daemon":
          headline = `Koru: no daemon — ${state.reason}`;
          break;
        case "refused":
          headline = `Koru: refused by the daemon — ${state.code}: ${state.message}`;
          break;
        default:
          headline = `Koru: ${state.kind}`;
      }
      log.info([headline, ...lines].join("\n  "));
      const choice = await vscode.window.showInformationMessage(
        headline,
        { modal: false, detail: lines.join("\n") },
        "Show Log",
        "Reconnect",
      );
      if (choice === "Show Log") log.show(true);
      if (choice === "Reconnect") client?.reconnectNow();
    }),
    vscode.commands.registerCommand("koru.reconnect", () => {
      log.info("reconnecting (Koru: Reconnect)");
      client?.reconnectNow();
    }),
    vscode.commands.registerCommand("koru.sendSelection", async () => {
      const editor = vscode.window.activeTextEditor;
      let prompt = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : "";
      if (!prompt) {
        prompt =
          (await vscode.window.showInputBox({
            title: "Koru: Send to Chat",
            prompt: "Nothing is selected: type the prompt to send to this window's chat",
          })) ?? "";
      }
      if (!prompt) return;
      const session = client?.session;
      if (!session) {
        void vscode.window.showErrorMessage(
          "Koru: not connected to the daemon, so nothing was sent. Start it with `koru daemon`; this window connects by itself.",
        );
        return;
      }
      try {
        const drive = await createDrive(socketLocation().path, { session }, prompt, extensionVersion);
        log.info(`Send Selection: drive ${drive.drive_id} ${drive.state} (${prompt.length} chars)`);
        vscode.window.setStatusBarMessage(`Koru: drive ${drive.drive_id} ${drive.state}`, 5000);
      } catch (error) {
        void vscode.window.showErrorMessage(`Koru: the daemon did not take the prompt: ${(error as Error).message}`);
      }
    }),
  );

  render({ kind: "connecting", socket: socketLocation() });
  client.start();
}

export async function deactivate(): Promise<void> {
  await client?.stop("extension deactivated");
  client = undefined;
}

/** The daemon client against the real `koru` daemon on a temp socket: hello accepted and listed, heartbeats answered, drives run and acked, bye on stop, reconnect after a restart, and a drive in flight when the daemon dies is never re-run. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import * as net from "node:net";

import { FirstChatRequest } from "../src/chatEvidence";
import { ChatReadinessReporter, LanguageModelsApi } from "../src/chatReadiness";
import { ConnectionState, DaemonClient, Logger } from "../src/client";
import { ActiveTab, executeSteps, ExecuteOptions, Host, PASTE_COMMAND } from "../src/executor";
import { buildHello, capabilitiesFor, UriFacts, WindowFacts } from "../src/hello";
import { CATALOG_COMMANDS } from "../src/catalog.generated";
import type { DriveRequest } from "../src/protocol/types.generated";

/** The koru binary: $KORU_BIN, else the workspace's debug then release build. Missing fails the test. */
function koruBinary(): string {
  const root = path.resolve(__dirname, "..", "..", "..");
  const candidates = [process.env.KORU_BIN, path.join(root, "target", "debug", "koru"), path.join(root, "target", "release", "koru")];
  const found = candidates.find((candidate) => candidate && fs.existsSync(candidate));
  if (!found) {
    throw new Error("no koru binary: run `cargo build --bin koru` first (or set KORU_BIN)");
  }
  return found;
}

const silent: Logger = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

class Daemon {
  process: ChildProcess | undefined;
  constructor(
    readonly socket: string,
    readonly args: string[] = [],
  ) {}

  /** The daemon's own state and cache folders beside its socket: its drive journal is this test's alone. */
  private env(): NodeJS.ProcessEnv {
    const dir = path.dirname(this.socket);
    return { ...process.env, XDG_STATE_HOME: path.join(dir, "state"), XDG_CACHE_HOME: path.join(dir, "cache") };
  }

  async start(): Promise<void> {
    this.process = spawn(koruBinary(), ["daemon", "--socket", this.socket, ...this.args], {
      stdio: ["ignore", "ignore", "pipe"],
      env: this.env(),
    });
    let stderr = "";
    this.process.stderr!.on("data", (chunk) => (stderr += chunk));
    await waitFor(() => fs.existsSync(this.socket), 10_000, () => `the daemon's socket (stderr: ${stderr})`);
  }

  async stop(): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  }

  cli(...args: string[]): Promise<string> {
    return new Promise((resolve, reject) =>
      execFile(koruBinary(), [...args, "--socket", this.socket], { env: this.env() }, (error, stdout, stderr) =>
        error && (error as { code?: number }).code !== 1 ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
      ),
    );
  }

  async sessions(): Promise<Array<Record<string, any>>> {
    return JSON.parse(await this.cli("sessions", "--json")).sessions ?? JSON.parse(await this.cli("sessions", "--json"));
  }
}

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A fake IDE for the executor: records commands and keeps a clipboard; `chatAnswer` is what its `chat.open` resolves with (VS Code ≥ 1.104 with blockOnResponse). */
class RecordingIde implements Host {
  calls: Array<[string, unknown[]]> = [];
  clipboard = "before";
  block: Promise<void> | undefined;
  chatAnswer: () => Promise<unknown> = async () => undefined;
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    this.calls.push([command, args]);
    if (this.block) await this.block;
    return command === "workbench.action.chat.open" ? this.chatAnswer() : undefined;
  }
  async readClipboard() {
    return this.clipboard;
  }
  async writeClipboard(text: string) {
    this.clipboard = text;
  }
  /** The Claude Code extension's command opens its tab in front (a stand-in: its webview is not here). */
  activeTab(): ActiveTab | undefined {
    return this.calls.some(([command]) => command === "claude-vscode.primaryEditor.open")
      ? { label: "Claude Code", webviewViewType: "mainThreadWebview-claudeVSCodePanel", windowFocused: true }
      : { label: "main.rs", windowFocused: true };
  }
  async sleep(_ms: number) {}
}

const fileUri = (fsPath: string): UriFacts => ({ scheme: "file", fsPath, uri: `file://${fsPath}` });

/** What a test changes in the extension's wiring: hello facts, the chat's evidence, a readiness reporter, a logger. */
interface Wiring {
  facts?: Partial<WindowFacts>;
  /** Native sends block on the chat's response (as on VS Code ≥ 1.104). */
  chatEvidence?: boolean;
  /** `vscode.lm` as the window has it. */
  lm?: LanguageModelsApi;
  log?: Logger;
}

function setUp(args: string[] = [], wiring: Wiring = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-client-"));
  fs.chmodSync(dir, 0o700);
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "koru-ws-"));
  const daemon = new Daemon(path.join(dir, "koru.sock"), args);
  const ide = new RecordingIde();
  const states: ConnectionState[] = [];
  const runs: string[] = [];
  // As extension.ts wires them: readiness in the hello and as events, outcomes as events.
  const readiness = new ChatReadinessReporter(wiring.lm, (ready) => client.sendEvent({ kind: "chat_readiness", ...ready }));
  // One per window, as in extension.ts: the window's first chat request gets the longer window.
  const firstRequest = new FirstChatRequest();
  const chatEvidence = (driveId: string): ExecuteOptions["chatEvidence"] =>
    wiring.chatEvidence
      ? {
          timing: { acceptanceWindowMs: 200, firstRequestAcceptanceWindowMs: 1_000, outcomeTimeoutMs: 5_000 },
          firstRequest,
          reportOutcome: (outcome) => client.sendEvent({ kind: "chat_outcome", drive_id: driveId, outcome }),
        }
      : undefined;
  const client: DaemonClient = new DaemonClient({
    locate: () => ({ path: daemon.socket, source: "setting koru.socketPath" }),
    log: wiring.log ?? silent,
    backoff: { initialMs: 50, maxMs: 200 },
    hello: async () =>
      buildHello({
        appName: "code-server",
        uriScheme: "code-oss",
        appHost: "server-distro",
        ideVersion: "1.139.1",
        extensionVersion: "0.1.0",
        workspaceFolders: [fileUri(workspace)],
        pid: process.pid,
        parentPid: process.ppid,
        focused: false,
        availableCommands: new Set(CATALOG_COMMANDS),
        interestingCommands: CATALOG_COMMANDS,
        chat: await readiness.forHello(),
        ...wiring.facts,
      }),
    runDrive: (drive: DriveRequest, ack, signal) => {
      runs.push(drive.drive_id);
      return executeSteps(drive.steps ?? [], drive.prompt, ide, new Set(CATALOG_COMMANDS), ack, {
        submit: drive.options.submit ?? true,
        signal,
        chatEvidence: chatEvidence(drive.drive_id),
      });
    },
    onState: (state) => {
      states.push(state);
      if (state.kind === "connected") void readiness.recheck();
    },
  });
  readiness.start();
  return { daemon, client, ide, states, runs, workspace, readiness };
}

test("connects, is listed with its product and folder, answers heartbeats, runs a native drive, and says bye", async () => {
  const { daemon, client, ide, workspace } = setUp(["--heartbeat-ms", "100"]);
  await daemon.start();
  try {
    client.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => `connected (state ${client.state.kind})`);
    const [session] = await daemon.sessions();
    assert.equal(session.ide.product, "code-server");
    assert.equal(session.ide.uri_scheme, "code-oss");
    assert.deepEqual(session.window.workspace_folders, [workspace]);
    assert.equal(session.window.pid, process.pid);
    assert.ok(session.capabilities.some((c: { id?: string }) => c.id === "workbench.action.chat.open"));

    // Six heartbeat intervals: a silent plugin would be dropped after four.
    await new Promise((resolve) => setTimeout(resolve, 600));
    const [still] = await daemon.sessions();
    assert.equal(still.session_id, session.session_id);
    assert.equal(still.health, "active");

    const prompt = "line one\nzweite Zeile — ü ✓ 日本語";
    const out = await daemon.cli("send", "--workspace", workspace, "--wait", "--json", prompt);
    const drive = JSON.parse(out);
    assert.equal(drive.state, "done", out);
    assert.equal(drive.route, "native_send");
    assert.equal(drive.submit_evidence, "command_returned", "without the chat's evidence only the command returned");
    assert.deepEqual(ide.calls, [["workbench.action.chat.open", [{ query: prompt, isPartialQuery: false }]]]);

    // Events: focus and workspace folder changes update what the daemon lists.
    const other = fs.mkdtempSync(path.join(os.tmpdir(), "koru-ws2-"));
    assert.ok(client.sendEvent({ kind: "focus", focused: true }));
    assert.ok(client.sendEvent({ kind: "workspace_changed", workspace_folders: [workspace, other] }));
    await waitFor(
      async () => {
        const [listed] = await daemon.sessions();
        return listed.window.focused === true && listed.window.workspace_folders.length === 2;
      },
      2000,
      () => "the focus and workspace events to show in koru sessions",
    );

    await client.stop();
    await waitFor(async () => (await daemon.sessions()).length === 0, 2000, () => "the session to end after bye");
    assert.equal(client.state.kind, "stopped");
  } finally {
    await client.stop();
    await daemon.stop();
  }
});

test("an operator's reconnect_plugin brings the window back at once as a new session", async () => {
  // A backoff far longer than the test: only the immediate reconnect can pass.
  const { daemon, client } = setUp();
  (client as unknown as { options: { backoff: unknown } }).options.backoff = { initialMs: 60_000, maxMs: 60_000 };
  await daemon.start();
  try {
    client.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "connected");
    const first = client.session!;
    const out = await daemon.cli("recover", "reconnect_plugin", "--session", first);
    assert.match(out, /reconnect/);
    await waitFor(
      () => client.state.kind === "connected" && client.session !== first,
      3000,
      () => `a new session (state ${client.state.kind})`,
    );
    const sessions = await daemon.sessions();
    assert.deepEqual(
      sessions.map((s) => s.session_id),
      [client.session],
    );
  } finally {
    await client.stop();
    await daemon.stop();
  }
});

test("says there is no daemon, then connects when it appears and again after it restarts", async () => {
  const { daemon, client, states } = setUp();
  try {
    client.start();
    await waitFor(() => client.state.kind === "no_daemon", 2000, () => "no_daemon");
    const noDaemon = client.state as Extract<ConnectionState, { kind: "no_daemon" }>;
    assert.match(noDaemon.reason, /no daemon at .*koru\.sock.*koru daemon/);
    await daemon.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "connected after the daemon started");
    const first = client.session;

    await daemon.stop();
    await waitFor(() => client.state.kind !== "connected", 2000, () => "the connection to drop");
    await daemon.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "reconnected after a restart");
    assert.notEqual(client.session, first);
    const [session] = await daemon.sessions();
    assert.equal(session.session_id, client.session);
    assert.ok(states.filter((s) => s.kind === "connected").length >= 2);
  } finally {
    await client.stop();
    await daemon.stop();
  }
});

test("a drive in flight when the daemon dies is reported failed by the daemon and never re-run", async () => {
  const { daemon, client, ide, runs, workspace } = setUp();
  await daemon.start();
  try {
    let release!: () => void;
    ide.block = new Promise((resolve) => (release = resolve));
    client.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "connected");
    const send = daemon.cli("send", "--workspace", workspace, "--wait", "--json", "hang");
    await waitFor(() => ide.calls.length === 1, 5000, () => "the drive's first step");
    const result = JSON.parse(await daemon.cli("drives", "--json"));
    const drives = result.drives ?? result;
    assert.equal(drives.length, 1);
    await daemon.stop();
    await send.catch(() => undefined);
    await daemon.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "reconnected");
    release();
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(runs.length, 1, "the drive ran once");
    assert.equal(ide.calls.length, 1, "no step ran after the connection dropped");
    assert.equal(ide.clipboard, "before");
  } finally {
    await client.stop();
    await daemon.stop();
  }
});

test("plugin drive with submit=false pastes through the clipboard, restores it, and ends done at pasted", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-reg-"));
  const registry = path.join(dir, "registry.yaml");
  fs.writeFileSync(registry, "policy:\n  route_order: [plugin_drive, native_send]\n  allow_os_injection: false\n");
  const { daemon, client, ide, workspace } = setUp(["--registry", registry]);
  await daemon.start();
  try {
    client.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "connected");
    const out = await daemon.cli("send", "--workspace", workspace, "--wait", "--json", "--no-submit", "unsent ✓");
    const drive = JSON.parse(out);
    assert.equal(drive.state, "done", out);
    assert.equal(drive.route, "plugin_drive");
    assert.deepEqual(
      ide.calls.map(([command]) => command),
      ["workbench.action.chat.focusInput", PASTE_COMMAND],
    );
    assert.equal(ide.clipboard, "before");
  } finally {
    await client.stop();
    await daemon.stop();
  }
});

/** Starts the daemon, connects the client, runs `body`, and stops both whatever happens. */
async function whileConnected(setup: ReturnType<typeof setUp>, body: () => Promise<void>): Promise<void> {
  await setup.daemon.start();
  try {
    setup.client.start();
    await waitFor(() => setup.client.state.kind === "connected", 5000, () => `connected (state ${setup.client.state.kind})`);
    await body();
  } finally {
    await setup.client.stop();
    await setup.daemon.stop();
  }
}

test("the hello carries an id and the daemon's welcome carries it back", async () => {
  const lines: string[] = [];
  const log: Logger = { ...silent, trace: (line) => lines.push(line) };
  const setup = setUp([], { log });
  await whileConnected(setup, async () => {
    const hello = JSON.parse(lines.find((l) => l.startsWith("→ ") && l.includes('"hello"'))!.slice(2));
    const welcome = JSON.parse(lines.find((l) => l.startsWith("← ") && l.includes('"welcome"'))!.slice(2));
    assert.equal(typeof hello.id, "string");
    assert.equal(welcome.id, hello.id);
  });
});

test("a welcome that answers another hello (a fake daemon with a wrong id) is not taken as this window's session", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-fake-daemon-"));
  const socketPath = path.join(dir, "koru.sock");
  // A fake daemon: answers every hello with a welcome whose id is not the hello's.
  const fake = net.createServer((conn) =>
    conn.once("data", () =>
      conn.write(
        JSON.stringify({ v: 1, id: "someone-else", type: "welcome", protocol: 1, session_id: "s_fake", daemon: { name: "koru", version: "0" }, heartbeat_ms: 10_000, max_line_bytes: 1 << 20 }) + "\n",
      ),
    ),
  );
  await new Promise<void>((resolve) => fake.listen(socketPath, resolve));
  const { client } = setUp();
  (client as unknown as { options: { locate: () => unknown } }).options.locate = () => ({ path: socketPath, source: "setting koru.socketPath" });
  try {
    client.start();
    await waitFor(() => client.state.kind === "no_daemon", 3000, () => `no_daemon (state ${client.state.kind})`);
    assert.match((client.state as { reason: string }).reason, /welcome carries id "someone-else", not this hello's hello-\d+/);
    assert.equal(client.session, undefined);
  } finally {
    await client.stop();
    fake.close();
  }
});

/** A fake `vscode.lm`: a list of models the test changes, and the change event. */
class FakeLanguageModels implements LanguageModelsApi {
  models: unknown[] = [];
  private listeners: Array<() => unknown> = [];
  async selectChatModels() {
    return this.models;
  }
  onDidChangeChatModels = (listener: () => unknown) => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  change(models: unknown[]) {
    this.models = models;
    for (const listener of this.listeners) listener();
  }
}

test("a chat with no model is reported not ready: the daemon holds the drive until the models change", async () => {
  const lm = new FakeLanguageModels();
  const setup = setUp([], { lm });
  const { daemon, ide, workspace } = setup;
  await whileConnected(setup, async () => {
    const [session] = await daemon.sessions();
    assert.deepEqual(session.chat_readiness, {
      ready: false,
      reason: "no language model is available to the chat: sign in or pick a model in the chat view",
    });
    const created = JSON.parse(await daemon.cli("send", "--workspace", workspace, "--json", "held ✓"));
    await waitFor(
      async () => JSON.parse(await daemon.cli("drives", "--json")).find((d: { drive_id: string }) => d.drive_id === created.drive_id)?.waiting?.code === "chat_not_ready",
      3000,
      () => "the drive to wait with chat_not_ready",
    );
    assert.deepEqual(ide.calls, [], "nothing is sent into a chat that is not ready");
    lm.change([{ id: "a-model" }]);
    await waitFor(
      async () => JSON.parse(await daemon.cli("drives", "--json")).find((d: { drive_id: string }) => d.drive_id === created.drive_id)?.state === "done",
      5000,
      () => "the held drive to run once the chat is ready",
    );
    assert.equal(ide.calls.length, 1);
    assert.deepEqual((await daemon.sessions())[0].chat_readiness, { ready: true });
  });
});

test("native send with the chat's evidence: submit_evidence on the drive, the reply through the plugin for --wait-reply, a refusal is chat_refused", async () => {
  const setup = setUp(["--no-observe"], { chatEvidence: true });
  const { daemon, ide, workspace } = setup;
  await whileConnected(setup, async () => {
    ide.chatAnswer = async () => ({ timings: { firstProgress: 3, totalElapsed: 7 } });
    const replied = JSON.parse(await daemon.cli("send", "--workspace", workspace, "--wait-reply", "--json", "answer me"));
    assert.equal(replied.state, "done");
    assert.equal(replied.submit_evidence, "chat_responded");
    assert.equal(replied.observation?.stage, "replied", JSON.stringify(replied));
    assert.equal(replied.observation?.store, "plugin");
    assert.deepEqual(ide.calls.at(-1), ["workbench.action.chat.open", [{ query: "answer me", isPartialQuery: false, blockOnResponse: true }]]);

    ide.chatAnswer = async () => ({ errorDetails: { message: "You have reached your monthly chat messages quota", isQuotaExceeded: true } });
    const refused = JSON.parse(await daemon.cli("send", "--workspace", workspace, "--wait", "--json", "refuse me"));
    assert.equal(refused.state, "failed");
    assert.equal(refused.blocker?.code, "chat_refused");
    assert.match(refused.blocker?.detail, /monthly chat messages quota \(quota exceeded\)/);
    assert.deepEqual(
      refused.attempts.filter((a: { outcome: string }) => a.outcome !== "not_tried").map((a: { route: string }) => a.route),
      ["native_send"],
      "no other route is tried after a refusal",
    );

    // A chat with no usable model yet refuses the first two sends; the daemon sends the
    // same prompt again on the same route until the chat takes it.
    let refusals = 2;
    ide.chatAnswer = async () =>
      refusals-- > 0 ? { errorDetails: { message: "Language model unavailable", responseIsIncomplete: true } } : { timings: { firstProgress: 3, totalElapsed: 7 } };
    const sendsBefore = ide.calls.filter(([command]) => command === "workbench.action.chat.open").length;
    const resent = JSON.parse(await daemon.cli("send", "--workspace", workspace, "--wait", "--json", "wait for my model"));
    assert.equal(resent.state, "done", JSON.stringify(resent));
    assert.equal(resent.submit_evidence, "chat_responded");
    assert.deepEqual(
      resent.attempts.map((a: { route: string; outcome: string; blocker?: { code: string } }) => [a.route, a.outcome, a.blocker?.code]),
      [
        ["native_send", "failed", "chat_refused"],
        ["native_send", "failed", "chat_refused"],
        ["native_send", "succeeded", undefined],
      ],
      "every attempt is in the drive's history",
    );
    assert.equal(ide.calls.filter(([command]) => command === "workbench.action.chat.open").length - sendsBefore, 3, "sent three times, taken once");

    // Still answering after the acceptance window: chat_running, then the pause arrives as needs_input.
    let pause!: (value: unknown) => void;
    ide.chatAnswer = () => new Promise((resolve) => (pause = resolve));
    const waiting = daemon.cli("send", "--workspace", workspace, "--wait-reply", "--json", "ask me first");
    await waitFor(
      async () => JSON.parse(await daemon.cli("drives", "--json")).some((d: { submit_evidence?: string }) => d.submit_evidence === "chat_running"),
      5000,
      () => "a drive submitted with chat_running",
    );
    pause({ type: "confirmation", kind: "toolInvocation", toolId: "runInTerminal" });
    const paused = JSON.parse(await waiting);
    assert.equal(paused.submit_evidence, "chat_running");
    assert.equal(paused.observation?.stage, "needs_input");
    assert.match(paused.observation?.detail ?? "", /approve tool runInTerminal/);
  });
});

test("a remote window's folders as URIs, its remote name and its storage folders reach koru sessions", async () => {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-user-"));
  const storage = path.join(userDir, "User", "workspaceStorage", "0123abcd");
  const setup = setUp([], {
    facts: {
      workspaceFolders: [{ scheme: "vscode-remote", fsPath: "/home/me/repo", uri: "vscode-remote://ssh-remote%2Bbox/home/me/repo" }],
      remoteName: "ssh-remote",
      storageUri: { scheme: "file", fsPath: path.join(storage, "koru.koru-vscode") },
      globalStorageUri: { scheme: "file", fsPath: path.join(userDir, "User", "globalStorage", "koru.koru-vscode") },
    },
  });
  await whileConnected(setup, async () => {
    const [session] = await setup.daemon.sessions();
    assert.deepEqual(session.window.workspace_folders, [], "a remote folder is not a local path");
    assert.deepEqual(session.window.workspace_uris, ["vscode-remote://ssh-remote%2Bbox/home/me/repo"]);
    assert.equal(session.window.remote_name, "ssh-remote");
    assert.deepEqual(session.window.storage, { workspace_storage: storage, global_storage: path.join(userDir, "User", "globalStorage") });
  });
});

test("the Claude Code panel's commands reported after the hello make `koru send --agent claude-code` reach it; with no key press possible the drive ends needs_user, never done", async () => {
  const panel = ["claude-vscode.primaryEditor.open", "koru.expectActiveTab"];
  const withoutPanel = CATALOG_COMMANDS.filter((id) => !panel.includes(id));
  const { daemon, client, ide, workspace } = setUp([], { facts: { availableCommands: new Set(withoutPanel) } });
  await daemon.start();
  try {
    client.start();
    await waitFor(() => client.state.kind === "connected", 5000, () => "connected");
    const before = await daemon.cli("send", "--agent", "claude-code", "--workspace", workspace, "--wait", "Fix it");
    assert.equal(ide.calls.length, 0, before);

    // The extension activated after the hello: its commands are reported now.
    assert.ok(client.sendCapabilities(capabilitiesFor({ availableCommands: new Set(CATALOG_COMMANDS), interestingCommands: CATALOG_COMMANDS })));
    await waitFor(
      async () => (await daemon.sessions())[0].capabilities.some((c: { id?: string }) => c.id === "claude-vscode.primaryEditor.open"),
      3000,
      () => "the new capabilities in koru sessions",
    );
    const prompt = "Fix it ✓\nplease";
    const drive = JSON.parse(await daemon.cli("send", "--agent", "claude-code", "--workspace", workspace, "--wait", "--json", prompt));
    assert.deepEqual(ide.calls, [["claude-vscode.primaryEditor.open", [null, prompt]]]);
    assert.equal(drive.state, "failed");
    assert.equal(drive.blocker.code, "needs_user");
    assert.match(drive.blocker.detail, /the prompt is in the Claude Code tab's input, unsent/);
    assert.deepEqual(
      drive.history.map((r: { state: string }) => r.state),
      ["queued", "sent", "received", "focused", "pasted", "failed"],
    );
  } finally {
    await client.stop();
    await daemon.stop();
  }
});

test("clipboard orders (a scripted daemon standing in for a portal drive): the text read, the prompt written, an empty clipboard said as no text, a failure answered with its error", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-fake-daemon-"));
  const socketPath = path.join(dir, "koru.sock");
  const answers: Array<Record<string, unknown>> = [];
  const orders = [
    { kind: "read" },
    { kind: "write", text: "the prompt ✓\nline two" },
    { kind: "read" },
    { kind: "write", text: "" },
    { kind: "read" },
    { kind: "write", text: "refused" },
  ];
  // A scripted daemon: welcomes the hello with its own id, then sends the orders one by one.
  const fake = net.createServer((conn) => {
    let buffered = "";
    conn.on("data", (chunk) => {
      buffered += chunk.toString("utf8");
      let newline;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = JSON.parse(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
        if (line.type === "hello") {
          conn.write(JSON.stringify({ v: 1, id: line.id, type: "welcome", protocol: 1, session_id: "s_fake", daemon: { name: "koru", version: "0" }, heartbeat_ms: 10_000, max_line_bytes: 1 << 20 }) + "\n");
        } else if (line.type === "clipboard.result") {
          answers.push(line);
        } else {
          continue;
        }
        const next = orders[answers.length];
        if (next) conn.write(JSON.stringify({ v: 1, type: "clipboard", order_id: `o_${answers.length + 1}`, action: next }) + "\n");
      }
    });
  });
  await new Promise<void>((resolve) => fake.listen(socketPath, resolve));
  let system: string | undefined = "the user's clipboard";
  const { client } = setUp();
  const options = (client as unknown as { options: Record<string, unknown> }).options;
  options.locate = () => ({ path: socketPath, source: "setting koru.socketPath" });
  options.clipboard = {
    read: async () => system,
    write: async (text: string) => {
      if (text === "refused") throw new Error("the clipboard is locked");
      system = text === "" ? undefined : text;
    },
  };
  try {
    client.start();
    await waitFor(() => answers.length === orders.length, 5000, () => `the answers (${JSON.stringify(answers)})`);
    const plain = answers.map(({ order_id, text, error }) => ({ order_id, text, error }));
    assert.deepEqual(plain, [
      { order_id: "o_1", text: "the user's clipboard", error: undefined },
      { order_id: "o_2", text: undefined, error: undefined },
      { order_id: "o_3", text: "the prompt ✓\nline two", error: undefined },
      { order_id: "o_4", text: undefined, error: undefined },
      { order_id: "o_5", text: undefined, error: undefined },
      { order_id: "o_6", text: undefined, error: "the extension failed: Error: the clipboard is locked" },
    ]);
    assert.equal(system, undefined);
  } finally {
    await client.stop();
    fake.close();
  }
});

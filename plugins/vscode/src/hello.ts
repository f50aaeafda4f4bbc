/** Builds the `hello` this extension sends: product (detected and raw), versions, the window's folders (paths and URIs), remote, storage folders, pids and focus, chat readiness, and the capabilities — which catalog commands this IDE has. */

import * as path from "node:path";

import { PROTOCOL_VERSION } from "./protocol/codec";
import type { Capability, ChatReadiness, Envelope, Hello, WindowInfo, WindowStorage } from "./protocol/types.generated";
import { detectProduct, HostFacts } from "./product";

/** A `vscode.Uri` as the hello needs it. */
export interface UriFacts {
  /** `uri.scheme`: `file`, `vscode-remote`, `vscode-userdata`, `vscode-vfs`, … */
  scheme: string;
  /** `uri.fsPath`: a local path, meaningful only for `file`. */
  fsPath: string;
  /** `uri.toString()`. */
  uri: string;
}

/** What the extension knows about its window when it connects. */
export interface WindowFacts extends HostFacts {
  ideVersion: string;
  extensionVersion: string;
  /** Every workspace folder's URI. */
  workspaceFolders: readonly UriFacts[];
  /** `vscode.env.remoteName` (`ssh-remote`, `wsl`, …), undefined in a local window. */
  remoteName?: string;
  /** `ExtensionContext.storageUri`: undefined in a window without a folder. */
  storageUri?: Omit<UriFacts, "uri">;
  /** `ExtensionContext.globalStorageUri`. */
  globalStorageUri?: Omit<UriFacts, "uri">;
  /** Whether the chat can take a request now; undefined when unknown. */
  chat?: ChatReadiness;
  pid: number;
  parentPid: number;
  focused: boolean;
  /** Every command this IDE has (`vscode.commands.getCommands(true)`). */
  availableCommands: ReadonlySet<string>;
  /** The commands worth reporting: the catalog's plus the user's allowed ones. */
  interestingCommands: readonly string[];
  /** Whether this window reports its terminals and reads and writes them (VS Code's shell-integration API is there). */
  terminalIo?: boolean;
  /** Whether this window lends the system clipboard to the daemon (`clipboard` orders). */
  clipboardIo?: boolean;
}

/** The client name the daemon shows in `koru sessions`. */
export const CLIENT_NAME = "koru-vscode";

/** Capabilities: the generic kinds this extension implements, then each interesting command the IDE has. */
export function capabilitiesFor(
  facts: Pick<WindowFacts, "availableCommands" | "interestingCommands" | "terminalIo" | "clipboardIo">,
): Capability[] {
  const capabilities: Capability[] = [
    { kind: "drive_steps" },
    { kind: "native_send" },
    { kind: "plugin_drive" },
    { kind: "clipboard" },
  ];
  if (facts.terminalIo) capabilities.push({ kind: "terminal_io" });
  if (facts.clipboardIo) capabilities.push({ kind: "clipboard_io" });
  const seen = new Set<string>();
  for (const id of facts.interestingCommands) {
    if (facts.availableCommands.has(id) && !seen.has(id)) {
      seen.add(id);
      capabilities.push({ kind: "command", id });
    }
  }
  return capabilities;
}

/** The folders that are local paths (`file` URIs), for `workspace_folders` and `workspace_changed`. */
export function localFolderPaths(folders: readonly UriFacts[]): string[] {
  return folders.filter((folder) => folder.scheme === "file").map((folder) => folder.fsPath);
}

/**
 * Where this window's storage is on this machine: the parent of `storageUri`
 * (`…/User/workspaceStorage/<id>`, whose `chatSessions/` the chat writes) and of
 * `globalStorageUri` (`…/User/globalStorage`). Only `file` URIs are paths; a window
 * without a folder has no workspace storage.
 */
export function windowStorage(facts: Pick<WindowFacts, "storageUri" | "globalStorageUri">): WindowStorage | undefined {
  const parent = (uri: Omit<UriFacts, "uri"> | undefined) => (uri?.scheme === "file" && uri.fsPath ? path.dirname(uri.fsPath) : undefined);
  const storage: WindowStorage = {};
  const workspace = parent(facts.storageUri);
  const global = parent(facts.globalStorageUri);
  if (workspace) storage.workspace_storage = workspace;
  if (global) storage.global_storage = global;
  return workspace || global ? storage : undefined;
}

export function buildHello(facts: WindowFacts): Envelope {
  const hello: Hello = {
    role: "plugin",
    protocol: { min: PROTOCOL_VERSION, max: PROTOCOL_VERSION },
    client: { name: CLIENT_NAME, version: facts.extensionVersion },
    ide: {
      product: detectProduct(facts),
      version: facts.ideVersion,
      app_name: facts.appName,
      uri_scheme: facts.uriScheme,
      app_host: facts.appHost,
    },
    window: windowInfo(facts),
    capabilities: capabilitiesFor(facts),
  };
  if (facts.chat) hello.chat = facts.chat;
  return { v: PROTOCOL_VERSION, type: "hello", ...hello } as Envelope;
}

function windowInfo(facts: WindowFacts): WindowInfo {
  const window: WindowInfo = {
    pid: facts.pid,
    parent_pid: facts.parentPid,
    focused: facts.focused,
    workspace_folders: localFolderPaths(facts.workspaceFolders),
    workspace_uris: facts.workspaceFolders.map((folder) => folder.uri),
  };
  if (facts.remoteName) window.remote_name = facts.remoteName;
  const storage = windowStorage(facts);
  if (storage) window.storage = storage;
  return window;
}

/** The `hello` this extension sends: product detected and raw, pids, focus, folders as paths and URIs (local, remote, virtual), remote name, storage folders, chat readiness, and only the catalog commands this IDE has as capabilities. */

import { test } from "node:test";
import assert from "node:assert/strict";

import { buildHello, localFolderPaths, windowStorage, WindowFacts } from "../src/hello";
import { languageModelsFor, NO_MODEL_REASON, readChatReadiness, sameReadiness } from "../src/chatReadiness";
import { CATALOG_COMMANDS } from "../src/catalog.generated";

const codeServer: WindowFacts = {
  appName: "code-server",
  uriScheme: "code-oss",
  appHost: "server-distro",
  ideVersion: "1.139.1",
  extensionVersion: "0.1.0",
  workspaceFolders: [{ scheme: "file", fsPath: "/home/me/project", uri: "file:///home/me/project" }],
  pid: 4242,
  parentPid: 4200,
  focused: true,
  availableCommands: new Set(["workbench.action.chat.open", "workbench.action.chat.submit", "editor.action.clipboardPasteAction", "git.commit"]),
  interestingCommands: [...CATALOG_COMMANDS, "my.extra.command", "workbench.action.chat.open"],
};

test("hello carries the detected product, the raw host facts, versions, pids, focus and folders", () => {
  const hello = buildHello(codeServer) as Record<string, unknown>;
  assert.equal(hello.type, "hello");
  assert.equal(hello.role, "plugin");
  assert.deepEqual(hello.protocol, { min: 1, max: 1 });
  assert.deepEqual(hello.client, { name: "koru-vscode", version: "0.1.0" });
  assert.deepEqual(hello.ide, {
    product: "code-server",
    version: "1.139.1",
    app_name: "code-server",
    uri_scheme: "code-oss",
    app_host: "server-distro",
  });
  assert.deepEqual(hello.window, {
    pid: 4242,
    parent_pid: 4200,
    focused: true,
    workspace_folders: ["/home/me/project"],
    workspace_uris: ["file:///home/me/project"],
  });
  assert.equal(hello.chat, undefined, "readiness unknown: no chat field");
});

test("folders: file URIs are local paths; remote and virtual folders are only URIs", () => {
  // As VS Code's Uri.toString() writes them (the authority's `+` is percent-encoded).
  const folders = [
    { scheme: "file", fsPath: "/home/me/project", uri: "file:///home/me/project" },
    { scheme: "vscode-remote", fsPath: "/home/me/repo", uri: "vscode-remote://ssh-remote%2Bbox/home/me/repo" },
    { scheme: "vscode-remote", fsPath: "/home/me/wsl", uri: "vscode-remote://wsl%2Bubuntu/home/me/wsl" },
    { scheme: "vscode-remote", fsPath: "/workspaces/app", uri: "vscode-remote://dev-container%2B7b22/workspaces/app" },
    { scheme: "vscode-vfs", fsPath: "/owner/repo", uri: "vscode-vfs://github/owner/repo" },
    { scheme: "file", fsPath: "C:\\Users\\me\\proj", uri: "file:///c%3A/Users/me/proj" },
  ];
  const hello = buildHello({ ...codeServer, workspaceFolders: folders, remoteName: "ssh-remote" }) as unknown as { window: Record<string, unknown> };
  assert.deepEqual(hello.window.workspace_folders, ["/home/me/project", "C:\\Users\\me\\proj"]);
  assert.deepEqual(hello.window.workspace_uris, folders.map((f) => f.uri));
  assert.equal(hello.window.remote_name, "ssh-remote");
  assert.deepEqual(localFolderPaths([]), []);
  const local = buildHello({ ...codeServer, remoteName: undefined }) as unknown as { window: Record<string, unknown> };
  assert.equal("remote_name" in local.window, false, "a local window has no remote name");
});

test("storage: the parents of the extension's storage URIs when they are files, nothing otherwise", () => {
  assert.deepEqual(
    windowStorage({
      storageUri: { scheme: "file", fsPath: "/home/me/.local/share/code-server/User/workspaceStorage/5f1e/koru.koru-vscode" },
      globalStorageUri: { scheme: "file", fsPath: "/home/me/.local/share/code-server/User/globalStorage/koru.koru-vscode" },
    }),
    {
      workspace_storage: "/home/me/.local/share/code-server/User/workspaceStorage/5f1e",
      global_storage: "/home/me/.local/share/code-server/User/globalStorage",
    },
  );
  // An empty window has no storageUri; a web host keeps storage in `vscode-userdata:` (not a local path).
  assert.deepEqual(windowStorage({ globalStorageUri: { scheme: "file", fsPath: "/u/User/globalStorage/koru.koru-vscode" } }), { global_storage: "/u/User/globalStorage" });
  assert.equal(
    windowStorage({
      storageUri: { scheme: "vscode-userdata", fsPath: "/User/workspaceStorage/5f1e/koru.koru-vscode" },
      globalStorageUri: { scheme: "vscode-userdata", fsPath: "/User/globalStorage/koru.koru-vscode" },
    }),
    undefined,
  );
  const hello = buildHello({ ...codeServer, storageUri: { scheme: "file", fsPath: "/ws/abc/koru.koru-vscode" } }) as unknown as { window: Record<string, unknown> };
  assert.deepEqual(hello.window.storage, { workspace_storage: "/ws/abc" });
});

test("chat readiness: ready with a model, not ready with the reason without one, unknown without vscode.lm or outside VS Code's own chat", async () => {
  const lm = (models: unknown[]) => ({ selectChatModels: async () => models });
  assert.deepEqual(await readChatReadiness(lm([{ id: "gpt" }])), { ready: true });
  assert.deepEqual(await readChatReadiness(lm([])), { ready: false, reason: NO_MODEL_REASON });
  assert.equal(await readChatReadiness(undefined), undefined);
  assert.equal(await readChatReadiness({ selectChatModels: async () => Promise.reject(new Error("no")) }), undefined);
  assert.ok(languageModelsFor({ lm: lm([]) }, "code-server"));
  assert.ok(languageModelsFor({ lm: lm([]) }, "vscode"));
  assert.equal(languageModelsFor({}, "vscode"), undefined, "VS Code before vscode.lm");
  assert.equal(languageModelsFor({ lm: lm([]) }, "cursor"), undefined, "Cursor's agent does not use vscode.lm");
  assert.equal(languageModelsFor({ lm: lm([]) }, "windsurf"), undefined);
  assert.ok(sameReadiness({ ready: true }, { ready: true, reason: null }));
  assert.ok(!sameReadiness({ ready: true }, undefined));
  const hello = buildHello({ ...codeServer, chat: { ready: false, reason: NO_MODEL_REASON } }) as Record<string, unknown>;
  assert.deepEqual(hello.chat, { ready: false, reason: NO_MODEL_REASON });
});

test("capabilities: the kinds the extension implements, then each catalog or allowed command the IDE has, once", () => {
  const hello = buildHello({ ...codeServer, availableCommands: new Set([...codeServer.availableCommands, "my.extra.command"]) }) as {
    capabilities: Array<{ kind: string; id?: string }>;
  };
  assert.deepEqual(hello.capabilities, [
    { kind: "drive_steps" },
    { kind: "native_send" },
    { kind: "plugin_drive" },
    { kind: "clipboard" },
    { kind: "command", id: "editor.action.clipboardPasteAction" },
    { kind: "command", id: "workbench.action.chat.open" },
    { kind: "command", id: "workbench.action.chat.submit" },
    { kind: "command", id: "my.extra.command" },
  ]);
});

test("capabilities: terminal_io only where the window can mirror its terminals (VS Code's shell-integration API)", () => {
  const kinds = (facts: typeof codeServer) =>
    (buildHello(facts) as unknown as { capabilities: Array<{ kind: string }> }).capabilities.map((c) => c.kind);
  assert.ok(!kinds(codeServer).includes("terminal_io"));
  assert.deepEqual(kinds({ ...codeServer, terminalIo: true }).slice(0, 5), [
    "drive_steps",
    "native_send",
    "plugin_drive",
    "clipboard",
    "terminal_io",
  ]);
});

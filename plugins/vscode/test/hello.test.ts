/** The `hello` this extension sends: product detected and raw, pids, focus, folders, and only the catalog commands this IDE has as capabilities. */

import { test } from "node:test";
import assert from "node:assert/strict";

import { buildHello, WindowFacts } from "../src/hello";
import { CATALOG_COMMANDS } from "../src/catalog.generated";

const codeServer: WindowFacts = {
  appName: "code-server",
  uriScheme: "code-oss",
  appHost: "server-distro",
  ideVersion: "1.139.1",
  extensionVersion: "0.1.0",
  workspaceFolders: ["/home/me/project"],
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
  assert.deepEqual(hello.window, { pid: 4242, parent_pid: 4200, focused: true, workspace_folders: ["/home/me/project"] });
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

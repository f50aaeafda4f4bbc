/** Product detection from what VS Code reports about its host, as a table; and the reconnect schedule. */

import { test } from "node:test";
import assert from "node:assert/strict";

import { detectProduct } from "../src/product";
import { reconnectDelay } from "../src/backoff";

test("detects every product of the VS Code family", () => {
  const table: Array<[string, string, string, string]> = [
    ["Visual Studio Code", "vscode", "desktop", "vscode"],
    ["Visual Studio Code - Insiders", "vscode-insiders", "desktop", "vscode-insiders"],
    ["VSCodium", "vscodium", "desktop", "vscodium"],
    ["Cursor", "cursor", "desktop", "cursor"],
    ["Windsurf", "windsurf", "desktop", "windsurf"],
    ["Antigravity", "antigravity", "desktop", "antigravity"],
    // Seen in code-server 4.139: appName, uriScheme, appHost.
    ["code-server", "code-oss", "server-distro", "code-server"],
    ["Some Fork", "somefork", "desktop", "other"],
  ];
  for (const [appName, uriScheme, appHost, expected] of table) {
    assert.equal(detectProduct({ appName, uriScheme, appHost }), expected, appName);
  }
});

test("reconnect delays grow, are capped, and are jittered", () => {
  const options = { initialMs: 100, maxMs: 1_000 };
  assert.deepEqual(
    [0, 1, 2, 3, 4, 10].map((attempt) => reconnectDelay(attempt, options, () => 0)),
    [50, 100, 200, 400, 500, 500],
  );
  assert.deepEqual(
    [0, 1, 2, 3, 4, 10].map((attempt) => reconnectDelay(attempt, options, () => 0.999999)),
    [100, 200, 400, 800, 1000, 1000],
  );
});

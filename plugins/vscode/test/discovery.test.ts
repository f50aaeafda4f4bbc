/** Socket discovery follows the daemon's rules in order, with the setting first. */

import { test } from "node:test";
import assert from "node:assert/strict";
import * as os from "node:os";

import { locateSocket } from "../src/discovery";

const env = { KORU_SOCKET: "/run/custom.sock", XDG_RUNTIME_DIR: "/run/user/1000" };

test("the setting wins, with ~ expanded", () => {
  assert.deepEqual(locateSocket({ setting: "~/k.sock", env, uid: 1000 }), {
    path: `${os.homedir()}/k.sock`,
    source: "setting koru.socketPath",
  });
});

test("then KORU_SOCKET, then XDG_RUNTIME_DIR, then /tmp/koru-$UID", () => {
  assert.deepEqual(locateSocket({ setting: "  ", env, uid: 1000 }), { path: "/run/custom.sock", source: "KORU_SOCKET" });
  assert.deepEqual(locateSocket({ env: { XDG_RUNTIME_DIR: "/run/user/1000" }, uid: 1000 }), {
    path: "/run/user/1000/koru/koru.sock",
    source: "XDG_RUNTIME_DIR",
  });
  assert.deepEqual(locateSocket({ env: { KORU_SOCKET: "" }, uid: 1234 }), {
    path: "/tmp/koru-1234/koru.sock",
    source: "default",
  });
});

/** Where the daemon's socket is, by the daemon's own rules: the setting `koru.socketPath`, then `KORU_SOCKET`, then `$XDG_RUNTIME_DIR/koru/koru.sock`, then `/tmp/koru-$UID/koru.sock`. */

import * as os from "node:os";
import * as path from "node:path";

/** The socket path and which rule chose it (shown in the status and the log). */
export interface SocketLocation {
  path: string;
  source: "setting koru.socketPath" | "KORU_SOCKET" | "XDG_RUNTIME_DIR" | "default";
}

/** What discovery reads; injectable for tests. */
export interface DiscoveryInput {
  setting?: string;
  env: Record<string, string | undefined>;
  uid: number;
}

/** Expands a leading `~` the way a person writing the setting means it. */
function expandHome(value: string): string {
  if (value === "~") return os.homedir();
  if (value.startsWith("~/")) return path.join(os.homedir(), value.slice(2));
  return value;
}

export function locateSocket(input: DiscoveryInput): SocketLocation {
  const setting = input.setting?.trim();
  if (setting) return { path: expandHome(setting), source: "setting koru.socketPath" };
  const explicit = input.env.KORU_SOCKET;
  if (explicit) return { path: explicit, source: "KORU_SOCKET" };
  const runtime = input.env.XDG_RUNTIME_DIR;
  if (runtime) return { path: path.join(runtime, "koru", "koru.sock"), source: "XDG_RUNTIME_DIR" };
  return { path: `/tmp/koru-${input.uid}/koru.sock`, source: "default" };
}

/** The running process's discovery input. */
export function processDiscoveryInput(setting: string | undefined): DiscoveryInput {
  return { setting, env: process.env, uid: process.getuid?.() ?? 0 };
}

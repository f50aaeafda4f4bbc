/** The real parts behind the terminal bridge: a screen mirror on `@xterm/headless` and a terminal's size read from its tty with `stty`. */

import { execFile } from "node:child_process";
import { readlink } from "node:fs/promises";

import { Terminal } from "@xterm/headless";

import type { ScreenMirror, TerminalSize } from "./terminals";

/** A headless xterm of the terminal's size, without scrollback (only the screen is read). */
export function xtermMirror(size: TerminalSize): ScreenMirror {
  const terminal = new Terminal({ cols: size.columns, rows: size.rows, scrollback: 0, allowProposedApi: true });
  return {
    write: (data) => new Promise<void>((resolve) => terminal.write(data, resolve)),
    resize: (columns, rows) => terminal.resize(columns, rows),
    get columns() {
      return terminal.cols;
    },
    get rows() {
      return terminal.rows;
    },
    screen: () => {
      const buffer = terminal.buffer.active;
      const lines: string[] = [];
      for (let row = 0; row < terminal.rows; row += 1) {
        lines.push(buffer.getLine(buffer.viewportY + row)?.translateToString(true) ?? "");
      }
      return lines.join("\n");
    },
    dispose: () => terminal.dispose(),
  };
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(command, args, { timeout: 2000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
  );
}

/** The tty of process `pid`: its stdin on Linux (`/proc`), else what `ps` says. */
async function ttyOf(pid: number): Promise<string | undefined> {
  if (process.platform === "linux") {
    const target = await readlink(`/proc/${pid}/fd/0`).catch(() => undefined);
    if (target?.startsWith("/dev/")) return target;
  }
  const name = (await run("ps", ["-o", "tty=", "-p", String(pid)]).catch(() => "")).trim();
  return name && name !== "?" && name !== "??" ? `/dev/${name}` : undefined;
}

/** The size of the terminal whose shell is `pid` (`stty size` on its tty: rows, then columns). */
export async function terminalSizeOf(pid: number): Promise<TerminalSize | undefined> {
  const tty = await ttyOf(pid);
  if (!tty) return undefined;
  const flag = process.platform === "linux" ? "-F" : "-f";
  const answer = await run("stty", [flag, tty, "size"]).catch(() => "");
  const match = /^(\d+) (\d+)/.exec(answer.trim());
  if (!match) return undefined;
  const rows = Number(match[1]);
  const columns = Number(match[2]);
  return rows > 0 && columns > 0 ? { columns, rows } : undefined;
}

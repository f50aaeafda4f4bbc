/** The window's terminals for the daemon: ids and shell pids reported as terminals open, get their process and close; writes passed on unchanged; the screen rebuilt by a real headless xterm from a program's output (Ink-style redraws, a resize); and, against the real daemon, an agent found under a reported shell, its screen read and the bracketed paste and Enter written through this client. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { DaemonClient, Logger } from "../src/client";
import { buildHello } from "../src/hello";
import { SCREEN_UNKNOWN, TerminalBridge, TerminalHandle, TerminalSize } from "../src/terminals";
import { terminalSizeOf, xtermMirror } from "../src/terminalScreen";
import type { IdeTerminal, TerminalIo } from "../src/protocol/types.generated";

/**
 * A stand-in for a `vscode.Terminal` (named as such): its name, its shell's pid as VS Code
 * resolves it later, and what `sendText` was given — with VS Code's rewrite of every `\r?\n`
 * to `\r` applied, as the real one does before the bytes reach the pty.
 */
class StandInTerminal implements TerminalHandle {
  written: string[] = [];
  /** VS Code renames a terminal after the program running in it. */
  name: string;
  private resolvePid!: (pid: number | undefined) => void;
  readonly processId: Promise<number | undefined>;
  constructor(name: string) {
    this.name = name;
    this.processId = new Promise((resolve) => (this.resolvePid = resolve));
  }
  started(pid: number | undefined): void {
    this.resolvePid(pid);
  }
  sendText(text: string, addNewLine?: boolean): void {
    this.written.push(text.replace(/\r?\n/g, "\r") + (addNewLine === false ? "" : "\r"));
  }
}

/** A program's output as shell integration's `execution.read()` gives it: chunks, then the end. */
class OutputStream implements AsyncIterable<string> {
  private chunks: string[] = [];
  private ended = false;
  private wake: (() => void) | undefined;
  push(data: string): void {
    this.chunks.push(data);
    this.wake?.();
  }
  end(): void {
    this.ended = true;
    this.wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<string> {
    for (;;) {
      while (this.chunks.length > 0) yield this.chunks.shift()!;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

function bridge(options: { sizes?: Map<number, TerminalSize>; pidsAreLocal?: boolean; nameRefreshMs?: number } = {}) {
  const reports: IdeTerminal[][] = [];
  const sizes = options.sizes ?? new Map<number, TerminalSize>();
  const made: TerminalSize[] = [];
  const terminals = new TerminalBridge<StandInTerminal>({
    makeMirror: (size) => {
      made.push(size);
      return xtermMirror(size);
    },
    // Named fake for `stty size` on the shell's tty: the sizes this test sets.
    sizeOf: async (pid) => sizes.get(pid),
    report: (list) => reports.push(list),
    pidsAreLocal: options.pidsAreLocal ?? true,
    sizeCheckMs: 0,
    nameRefreshMs: options.nameRefreshMs ?? 0,
  });
  return { terminals, reports, sizes, made };
}

test("terminals are reported as they open, get their shell and close; a remote window's pids are left out", async () => {
  const { terminals, reports } = bridge();
  const bash = new StandInTerminal("bash");
  const claude = new StandInTerminal("claude");
  terminals.opened(bash);
  terminals.opened(claude);
  terminals.opened(bash); // known already: no new id, no report
  assert.deepEqual(reports.at(-1), [
    { terminal_id: "term-1", name: "bash" },
    { terminal_id: "term-2", name: "claude" },
  ]);
  assert.equal(reports.length, 2);
  claude.started(4321);
  await tick();
  assert.deepEqual(reports.at(-1), [
    { terminal_id: "term-1", name: "bash" },
    { terminal_id: "term-2", name: "claude", shell_pid: 4321 },
  ]);
  terminals.closed(bash);
  assert.deepEqual(reports.at(-1), [{ terminal_id: "term-2", name: "claude", shell_pid: 4321 }]);
  const gone = await terminals.handle({ order_id: "o_1", terminal_id: "term-1", action: { kind: "read" } });
  assert.match(gone.error ?? "", /no terminal term-1/);

  const remote = bridge({ pidsAreLocal: false });
  const far = new StandInTerminal("ssh");
  remote.terminals.opened(far);
  far.started(99);
  await tick();
  assert.deepEqual(remote.reports.at(-1), [{ terminal_id: "term-1", name: "ssh" }]);
});

test("a terminal renamed after the program it runs is reported again, once, when it starts and when it ends", async () => {
  const { terminals, reports } = bridge({ nameRefreshMs: 5 });
  const terminal = new StandInTerminal("bash");
  terminals.opened(terminal);
  const before = reports.length;
  const output = new OutputStream();
  const mirrored = terminals.mirror(terminal, output);
  terminal.name = "claude";
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(reports.length, before + 1);
  assert.equal(reports.at(-1)?.[0].name, "claude");
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(reports.length, before + 1, "nothing changed: nothing sent");
  terminal.name = "bash";
  output.end();
  await mirrored;
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(reports.at(-1)?.[0].name, "bash");
  assert.equal(reports.length, before + 2);
});

test("a write reaches the terminal unchanged but for VS Code's own newline rewrite, nothing added", async () => {
  const { terminals } = bridge();
  const terminal = new StandInTerminal("claude");
  terminals.opened(terminal);
  const data = "\u001b[200~line one\nline two äöü ✓\u001b[201~";
  const result = await terminals.handle({ order_id: "o_1", terminal_id: "term-1", action: { kind: "write", data } });
  assert.deepEqual(result, { order_id: "o_1" });
  await terminals.handle({ order_id: "o_2", terminal_id: "term-1", action: { kind: "write", data: "\r" } });
  assert.deepEqual(terminal.written, ["\u001b[200~line one\rline two äöü ✓\u001b[201~", "\r"]);
});

test("the screen is rebuilt from the program's output at the terminal's size, redraws and resizes included", async () => {
  const { terminals, sizes, made } = bridge();
  const terminal = new StandInTerminal("claude");
  terminals.opened(terminal);
  terminal.started(777);
  const unknown = await terminals.handle({ order_id: "o_1", terminal_id: "term-1", action: { kind: "read" } });
  assert.equal(unknown.error, SCREEN_UNKNOWN);

  sizes.set(777, { columns: 40, rows: 6 });
  const output = new OutputStream();
  const mirrored = terminals.mirror(terminal, output);
  // An input box drawn, then redrawn Ink-style (cursor up, erase line) with a draft in it.
  output.push("╭──────╮\r\n│ ❯\u00a0Try \"hi\" │\r\n╰──────╯\r\n");
  output.push("\u001b[2A\u001b[2K│ ❯\u00a0half a draft │\r\n");
  await tick();
  const read = await terminals.handle({ order_id: "o_2", terminal_id: "term-1", action: { kind: "read" } });
  assert.equal(read.error, undefined);
  assert.deepEqual(read.screen?.split("\n"), ["╭──────╮", "│ ❯\u00a0half a draft │", "╰──────╯", "", "", ""]);
  assert.deepEqual(made, [{ columns: 40, rows: 6 }]);

  // The terminal got narrower: a read fits the mirror to it.
  sizes.set(777, { columns: 20, rows: 3 });
  const narrow = await terminals.handle({ order_id: "o_3", terminal_id: "term-1", action: { kind: "read" } });
  assert.equal(narrow.screen?.split("\n").length, 3);
  output.push("\u001b[2J\u001b[Hredrawn at 20 columns, wrapping here");
  output.end();
  await mirrored;
  const after = await terminals.handle({ order_id: "o_4", terminal_id: "term-1", action: { kind: "read" } });
  assert.deepEqual(after.screen?.split("\n"), ["redrawn at 20 column", "s, wrapping here", ""]);
});

test("a terminal's size is read from its tty with stty", async (t) => {
  if (process.platform !== "linux" || !fs.existsSync("/usr/bin/script")) {
    t.skip("needs Linux and util-linux's script for a pty");
    return;
  }
  // A shell on a real pty of a known size (`script` gives it one; stty sets the size).
  const shell = spawn("script", ["-qfec", "stty cols 91 rows 27; sleep 30", "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
  try {
    let size: TerminalSize | undefined;
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
      const child = childOf(shell.pid!);
      size = child ? await terminalSizeOf(child) : undefined;
      if (size?.columns === 91) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(size, { columns: 91, rows: 27 });
    assert.equal(await terminalSizeOf(2 ** 22 + 7), undefined, "no such process");
  } finally {
    shell.kill("SIGKILL");
  }
});

/** The first child of `pid` (the shell `script` started on its pty). */
function childOf(pid: number): number | undefined {
  try {
    const children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/);
    return children[0] ? Number(children[0]) : undefined;
  } catch {
    return undefined;
  }
}

/** The koru binary: $KORU_BIN, else the workspace's debug then release build. */
function koruBinary(): string {
  const root = path.resolve(__dirname, "..", "..", "..");
  const candidates = [process.env.KORU_BIN, path.join(root, "target", "debug", "koru"), path.join(root, "target", "release", "koru")];
  const found = candidates.find((candidate) => candidate && fs.existsSync(candidate));
  if (!found) throw new Error("no koru binary: run `cargo build --bin koru` first (or set KORU_BIN)");
  return found;
}

const silent: Logger = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

async function waitFor<T>(probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

test("against the real daemon: an agent under a reported shell is found, its screen read and the prompt written through this window", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-terms-"));
  fs.chmodSync(dir, 0o700);
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "koru-ws-"));
  const socket = path.join(dir, "koru.sock");
  const env = { ...process.env, XDG_STATE_HOME: path.join(dir, "state"), XDG_CACHE_HOME: path.join(dir, "cache"), HOME: dir };
  // The "agent": a copy of sleep named claude (nothing here runs the real Claude Code; the
  // Rust system tests do), started by a shell whose pid is the terminal's process.
  const claude = path.join(dir, "bin", "claude");
  fs.mkdirSync(path.dirname(claude));
  fs.copyFileSync("/bin/sleep", claude);
  fs.chmodSync(claude, 0o755);
  const shell: ChildProcess = spawn("sh", ["-c", `"${claude}" 60; true`], { cwd: workspace, stdio: "ignore" });
  const daemon = spawn(koruBinary(), ["daemon", "--socket", socket, "--no-observe"], { stdio: "ignore", env });
  const terminal = new StandInTerminal("claude");
  const terminals = new TerminalBridge<StandInTerminal>({
    makeMirror: xtermMirror,
    sizeOf: async () => ({ columns: 60, rows: 5 }), // named fake: no pty here
    report: (list) => void client.sendTerminals(list),
    pidsAreLocal: true,
  });
  const client: DaemonClient = new DaemonClient({
    locate: () => ({ path: socket, source: "setting koru.socketPath" }),
    log: silent,
    backoff: { initialMs: 50, maxMs: 200 },
    hello: async () =>
      buildHello({
        appName: "code-server",
        uriScheme: "code-oss",
        appHost: "server-distro",
        ideVersion: "1.139.1",
        extensionVersion: "0.1.0",
        workspaceFolders: [{ scheme: "file", fsPath: workspace, uri: `file://${workspace}` }],
        pid: process.pid,
        parentPid: process.ppid,
        focused: false,
        availableCommands: new Set(),
        interestingCommands: [],
        terminalIo: true,
      }),
    runDrive: async () => undefined,
    terminalIo: (order: TerminalIo) => terminals.handle(order),
    onState: (state) => {
      if (state.kind === "connected") terminals.send();
    },
  });
  const cli = (...args: string[]) =>
    new Promise<string>((resolve) =>
      execFile(koruBinary(), [...args, "--socket", socket], { env }, (_error, stdout, stderr) => resolve(stdout + stderr)),
    );
  try {
    await waitFor(() => (fs.existsSync(socket) ? true : undefined), 10_000, "the daemon's socket");
    client.start();
    terminals.opened(terminal);
    terminal.started(shell.pid);
    // Claude Code's input box, empty, as its output draws it.
    const output = new OutputStream();
    const mirrored = terminals.mirror(terminal, output);
    output.push('────────────\r\n❯\u00a0Try "fix lint errors"\r\n────────────\r\n');

    const listed = await waitFor(
      async () => {
        const json = JSON.parse(await cli("sessions", "--json"));
        const sessions: Array<Record<string, any>> = json.sessions ?? json;
        const agent = sessions.find((s) => s.kind === "terminal_agent" && s.product === "claude-code");
        return agent;
      },
      10_000,
      "the agent in koru sessions",
    );
    assert.equal(listed.terminal.kind, "ide_terminal");
    assert.equal(listed.terminal.terminal_id, "term-1");
    assert.equal(listed.workspace, workspace);

    const sent = await cli("send", "--wait", "--agent", "claude-code", "--workspace", workspace, "first line\nsecond ✓");
    // The paste with Koru's markers, then the Enter, each written once through this window;
    // a sleeping stand-in records no prompt, so the daemon says it was not submitted (the
    // input box it reads shows no prompt left to press Enter for again).
    assert.deepEqual(terminal.written, ["\u001b[200~first line\rsecond ✓\u001b[201~", "\r"], sent);
    assert.match(sent, /not_submitted/);
    output.end();
    await mirrored;
  } finally {
    await client.stop("test over");
    daemon.kill("SIGTERM");
    shell.kill("SIGKILL");
    spawn("pkill", ["-f", claude]);
  }
});

/** The daemon client against the real `koru` daemon on a temp socket: hello accepted and listed, heartbeats answered, drives run and acked, bye on stop, reconnect after a restart, and a drive in flight when the daemon dies is never re-run. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { ConnectionState, DaemonClient, Logger } from "../src/client";
import { executeSteps, Host, PASTE_COMMAND } from "../src/executor";
import { buildHello } from "../src/hello";
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

  async start(): Promise<void> {
    this.process = spawn(koruBinary(), ["daemon", "--socket", this.socket, ...this.args], {
      stdio: ["ignore", "ignore", "pipe"],
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
      execFile(koruBinary(), [...args, "--socket", this.socket], (error, stdout, stderr) =>
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

/** A fake IDE for the executor: records commands and keeps a clipboard. */
class RecordingIde implements Host {
  calls: Array<[string, unknown[]]> = [];
  clipboard = "before";
  block: Promise<void> | undefined;
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    this.calls.push([command, args]);
    if (this.block) await this.block;
    return undefined;
  }
  async readClipboard() {
    return this.clipboard;
  }
  async writeClipboard(text: string) {
    this.clipboard = text;
  }
}

function setUp(args: string[] = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "koru-client-"));
  fs.chmodSync(dir, 0o700);
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "koru-ws-"));
  const daemon = new Daemon(path.join(dir, "koru.sock"), args);
  const ide = new RecordingIde();
  const states: ConnectionState[] = [];
  const runs: string[] = [];
  const client = new DaemonClient({
    locate: () => ({ path: daemon.socket, source: "setting koru.socketPath" }),
    log: silent,
    backoff: { initialMs: 50, maxMs: 200 },
    hello: async () =>
      buildHello({
        appName: "code-server",
        uriScheme: "code-oss",
        appHost: "server-distro",
        ideVersion: "1.139.1",
        extensionVersion: "0.1.0",
        workspaceFolders: [workspace],
        pid: process.pid,
        parentPid: process.ppid,
        focused: false,
        availableCommands: new Set(CATALOG_COMMANDS),
        interestingCommands: CATALOG_COMMANDS,
      }),
    runDrive: (drive: DriveRequest, ack, signal) => {
      runs.push(drive.drive_id);
      return executeSteps(drive.steps ?? [], drive.prompt, ide, new Set(CATALOG_COMMANDS), ack, {
        submit: drive.options.submit ?? true,
        signal,
      });
    },
    onState: (state) => states.push(state),
  });
  return { daemon, client, ide, states, runs, workspace };
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

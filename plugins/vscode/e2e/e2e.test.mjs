// End-to-end: the Koru extension inside a real VS Code build (code-server) driven by headless Chromium, against the real `koru` daemon; the recorder fixture's chat participant proves what reached the chat.
// Run (after setup.sh and `npm run package` in plugins/vscode):  . ~/.cache/koru-e2e/env.sh && node --test plugins/vscode/e2e/e2e.test.mjs
// KORU_E2E_FIGURES=N also measures N native drives against N fake-plugin drives in the same daemon and writes e2e/out/figures.json.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { E2E_DIR, CHAT_INPUT_SELECTOR, openWorkbench, packageVsix, readJsonLines, startCodeServer, waitFor } from './harness.mjs';

const PLUGIN_DIR = path.resolve(E2E_DIR, '..');
const ROOT = path.resolve(PLUGIN_DIR, '..', '..');
const OUT = path.join(E2E_DIR, 'out');
const KORU = process.env.KORU_BIN || path.join(ROOT, 'target', 'debug', 'koru');
const VERSION = JSON.parse(fs.readFileSync(path.join(PLUGIN_DIR, 'package.json'), 'utf8')).version;
const KORU_VSIX = process.env.KORU_VSIX || path.join(PLUGIN_DIR, `koru-vscode-${VERSION}.vsix`);
const RECORDER_ID = 'koru-e2e.koru-e2e-recorder';
// code-server keeps an extension host for its reconnection grace time after the page goes
// (3 h by default); the tests shorten it so closing the page ends the window's session.
const GRACE_SECONDS = 10;

for (const [what, file, fix] of [
  ['the koru binary', KORU, 'cargo build --bin koru (or set KORU_BIN)'],
  ['the extension package', KORU_VSIX, '(cd plugins/vscode && npm run package)'],
]) {
  if (!fs.existsSync(file)) throw new Error(`e2e: ${what} is missing at ${file}; run ${fix}`);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'koru-e2e-'));
const runDir = path.join(tmp, 'run');
fs.mkdirSync(runDir, { mode: 0o700 });
const socket = path.join(runDir, 'koru.sock');
const folder = path.join(tmp, 'workspace');
fs.mkdirSync(folder);
fs.writeFileSync(path.join(folder, 'README.md'), '# a workspace for the Koru e2e tests\n');
const recordFile = path.join(tmp, 'chat-requests.jsonl');
const readyFile = path.join(tmp, 'recorder-ready.json');

const state = { daemon: undefined, daemonLog: path.join(tmp, 'daemon.log'), cs: undefined, wb: undefined };
const figures = {};

/** Runs the koru CLI against the test daemon; resolves {code, stdout, stderr}. */
function koru(...args) {
  return new Promise((resolve) => {
    execFile(KORU, [...args, '--socket', socket], { timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function sessions() {
  const { code, stdout, stderr } = await koru('sessions', '--json');
  if (code !== 0) throw new Error(`koru sessions failed: ${stderr}`);
  const parsed = JSON.parse(stdout);
  return (parsed.sessions ?? parsed).filter((s) => s.role === 'plugin');
}

/** Writes a registry layer and starts the daemon with it (replacing a running one). */
async function startDaemon(registryYaml = '# the built-in registry only\n') {
  const registry = path.join(tmp, `registry-${Date.now()}.yaml`);
  fs.writeFileSync(registry, registryYaml);
  const log = fs.openSync(state.daemonLog, 'a');
  const child = spawn(KORU, ['daemon', '--socket', socket, '--registry', registry], { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  state.daemon = child;
  await waitFor(async () => (await koru('status')).code === 0, 10_000, `the daemon to answer (log ${state.daemonLog})`);
  return child;
}

async function stopDaemon(signal = 'SIGTERM') {
  const child = state.daemon;
  state.daemon = undefined;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

/** Waits until the window's session is listed and returns it. */
async function windowSession(timeoutMs = 30_000) {
  return waitFor(
    async () => (await sessions()).find((s) => s.ide?.product === 'code-server' && s.health === 'active'),
    timeoutMs,
    'the code-server window in `koru sessions`',
    50,
  );
}

/** `koru send … --wait --json`: the finished drive. */
async function send(prompt, ...flags) {
  const { code, stdout, stderr } = await koru('send', '--workspace', folder, '--wait', '--json', ...flags, prompt);
  let drive;
  try {
    drive = JSON.parse(stdout);
  } catch {
    throw new Error(`koru send printed no drive (exit ${code}): ${stdout}\n${stderr}`);
  }
  return { code, drive, stderr };
}

const requests = () => readJsonLines(recordFile);

async function waitForRequest(count, what) {
  return waitFor(() => requests().length >= count && requests()[count - 1], 20_000, what, 50);
}

async function clearChatInput() {
  const input = state.wb.page.locator(CHAT_INPUT_SELECTOR).first();
  await input.click();
  await state.wb.page.keyboard.press('Control+A');
  await state.wb.page.keyboard.press('Delete');
}

async function screenshot(name) {
  fs.mkdirSync(OUT, { recursive: true });
  await state.wb?.page.screenshot({ path: path.join(OUT, `${name}.png`) }).catch(() => {});
}

before(async () => {
  const recorderVsix = packageVsix(path.join(PLUGIN_DIR, 'test-fixtures', 'koru-e2e-recorder'), path.join(OUT, 'koru-e2e-recorder.vsix'));
  await startDaemon();
  state.cs = await startCodeServer({
    folder,
    vsixPaths: [KORU_VSIX, recorderVsix],
    env: { KORU_SOCKET: socket, KORU_E2E_RECORD_FILE: recordFile, KORU_E2E_RECORDER_READY_FILE: readyFile },
    extraArgs: ['--reconnection-grace-time', String(GRACE_SECONDS), '--enable-proposed-api', RECORDER_ID],
    userSettings: { 'koru.allowedCommands': [] },
  });
  state.wb = await openWorkbench(state.cs.url, folder);
});

after(async () => {
  if (process.exitCode) await screenshot('failure');
  await state.wb?.close();
  await state.cs?.stop();
  await stopDaemon();
  if (Object.keys(figures).length > 0) {
    fs.mkdirSync(OUT, { recursive: true });
    fs.writeFileSync(path.join(OUT, 'figures.json'), JSON.stringify(figures, null, 2) + '\n');
    console.log(`figures: ${JSON.stringify(figures)}`);
  }
});

test('1. the window appears in `koru sessions` as code-server with its version and folder', async () => {
  const session = await windowSession(60_000);
  figures.window_load_to_session_ms = Date.now() - state.wb.loadStartMs;
  assert.equal(session.ide.product, 'code-server');
  assert.equal(session.ide.app_name, 'code-server');
  assert.equal(session.ide.app_host, 'server-distro');
  assert.match(session.ide.version, /^1\.\d+\.\d+$/);
  assert.deepEqual(session.window.workspace_folders, [folder]);
  assert.equal(session.client.name, 'koru-vscode');
  assert.equal(session.client.version, VERSION);
  const commands = session.capabilities.filter((c) => c.kind === 'command').map((c) => c.id);
  for (const id of ['workbench.action.chat.open', 'workbench.action.chat.focusInput', 'workbench.action.chat.submit']) {
    assert.ok(commands.includes(id), `capability command:${id} in ${commands}`);
  }
  const ready = await waitFor(() => fs.existsSync(readyFile) && JSON.parse(fs.readFileSync(readyFile, 'utf8')), 60_000, 'the recorder fixture');
  assert.equal(ready.error, undefined, `recorder: ${ready.error}`);
  assert.equal(session.window.pid, ready.pid, 'the session names the extension host pid');
  assert.equal(session.window.parent_pid, ready.ppid);
});

test('2. a multi-line Unicode prompt goes by the native route into the chat, byte-exact, and ends submitted', async () => {
  const prompt = 'Refactor the parser:\n  – keep the API «stable» ✓\n\tthen add tests für ü, 日本語 and emoji 🦀\nend';
  const { code, drive, stderr } = await send(prompt);
  assert.equal(code, 0, stderr);
  assert.equal(drive.state, 'done');
  assert.equal(drive.route, 'native_send');
  assert.deepEqual(drive.history.map((h) => h.state).filter((s) => ['received', 'submitted', 'done'].includes(s)), ['received', 'submitted', 'done']);
  const request = await waitForRequest(1, 'the chat participant to receive the native prompt');
  assert.equal(request.prompt, prompt);
});

test('4. --no-submit leaves the prompt in the chat input: the participant receives nothing', async () => {
  const before = requests().length;
  const token = `unsent-${Date.now()}`;
  const { code, drive, stderr } = await send(`${token} please wait`, '--no-submit');
  assert.equal(code, 0, stderr);
  assert.equal(drive.state, 'done');
  assert.equal(drive.history.map((h) => h.state).includes('submitted'), false);
  assert.ok(drive.history.some((h) => h.state === 'pasted'));
  const input = state.wb.page.locator(CHAT_INPUT_SELECTOR).first();
  await waitFor(async () => (await input.innerText()).includes(token), 10_000, 'the unsent prompt in the chat input');
  await new Promise((resolve) => setTimeout(resolve, 3000));
  assert.equal(requests().length, before, 'nothing was submitted');
  await clearChatInput();
});

test('5. a command outside the allow-list is refused with command_not_allowed', async () => {
  await stopDaemon();
  await startDaemon(
    [
      'interfaces:',
      '  - id: vscode_native_chat_open',
      '    steps:',
      '      - {command: workbench.action.terminal.new, proves: submitted}',
      '  - id: vscode_plugin_drive',
      '    enabled: false',
      'policy:',
      '  allow_os_injection: false',
      '',
    ].join('\n'),
  );
  await windowSession();
  const before = requests().length;
  const { code, drive } = await send('this must not run');
  assert.notEqual(code, 0);
  assert.equal(drive.state, 'failed');
  assert.equal(drive.blocker?.code, 'command_not_allowed', JSON.stringify(drive.blocker));
  assert.match(drive.blocker.detail, /workbench\.action\.terminal\.new/);
  assert.equal(requests().length, before);
});

test('3. the plugin-drive route pastes through the clipboard, submits, and restores the clipboard', async () => {
  await stopDaemon();
  await startDaemon(['interfaces:', '  - id: vscode_native_chat_open', '    enabled: false', 'policy:', '  allow_os_injection: false', ''].join('\n'));
  await windowSession();
  const previous = `the user's clipboard ✂ ${Date.now()}`;
  await state.wb.page.evaluate((text) => navigator.clipboard.writeText(text), previous);
  const before = requests().length;
  const prompt = 'Plugin drive: ½ «quotes» "double" `code`\n    indented four\nlast line ✓';
  const { code, drive, stderr } = await send(prompt);
  assert.equal(code, 0, stderr);
  assert.equal(drive.state, 'done');
  assert.equal(drive.route, 'plugin_drive');
  const stages = drive.history.map((h) => h.state);
  for (const stage of ['received', 'focused', 'pasted', 'submitted']) assert.ok(stages.includes(stage), `${stage} in ${stages}`);
  const request = await waitForRequest(before + 1, 'the chat participant to receive the pasted prompt');
  assert.equal(request.prompt, prompt);
  assert.equal(await state.wb.page.evaluate(() => navigator.clipboard.readText()), previous);
});

test('6. after the daemon is killed and restarted, the extension reconnects by itself and the next drive succeeds', async () => {
  const old = (await windowSession()).session_id;
  const statusItem = state.wb.page.locator('.statusbar-item', { hasText: 'Koru' }).first();
  assert.doesNotMatch(await statusItem.innerText(), /no daemon/);
  await stopDaemon('SIGKILL');
  const killedAt = Date.now();
  await waitFor(async () => /no daemon/.test(await statusItem.innerText()), 15_000, 'the status bar to say "no daemon"');
  await startDaemon();
  const session = await windowSession(30_000);
  figures.reconnect_after_restart_ms = Date.now() - killedAt;
  assert.notEqual(session.session_id, old);
  const before = requests().length;
  const { code, drive, stderr } = await send('after the restart ✓');
  assert.equal(code, 0, stderr);
  assert.equal(drive.state, 'done');
  assert.equal((await waitForRequest(before + 1, 'the prompt after the restart')).prompt, 'after the restart ✓');
});

const FIGURE_DRIVES = Number(process.env.KORU_E2E_FIGURES || 0);

test('figures: native-route drive latency against the fake plugin in the same daemon', { skip: FIGURE_DRIVES === 0 && 'set KORU_E2E_FIGURES=N to measure' }, async () => {
  const fakeFolder = fs.mkdtempSync(path.join(tmp, 'fake-'));
  const fake = spawn(KORU, ['dev', 'fake-plugin', '--socket', socket, '--workspace', fakeFolder, '--behaviour', 'ack'], { stdio: 'ignore' });
  try {
    const window = await windowSession();
    const fakeSession = await waitFor(async () => (await sessions()).find((s) => s.window?.workspace_folders?.includes(fakeFolder)), 10_000, 'the fake plugin');
    const controller = await Controller.connect(socket);
    try {
      // Warm-up, then alternate so both see the same machine state.
      await controller.drive(window.session_id, 'warm-up');
      await controller.drive(fakeSession.session_id, 'warm-up');
      const native = [];
      const fakeTimes = [];
      for (let i = 0; i < FIGURE_DRIVES; i++) {
        native.push(await controller.drive(window.session_id, `figure drive ${i}`));
        fakeTimes.push(await controller.drive(fakeSession.session_id, `figure drive ${i}`));
      }
      figures.drives = FIGURE_DRIVES;
      figures.native_route_ms = summary(native);
      figures.fake_plugin_ms = summary(fakeTimes);
    } finally {
      controller.close();
    }
  } finally {
    fake.kill('SIGTERM');
  }
});

test('Koru: Send Selection to Chat goes through the daemon and shows in `koru drives`', async () => {
  await windowSession();
  const before = requests().length;
  const prompt = `sent from the command palette ✓ ${Date.now()}`;
  const page = state.wb.page;
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  await page.keyboard.insertText('Koru: Send Selection to Chat');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Send Selection to Chat' }).first().waitFor({ timeout: 10_000 });
  await page.keyboard.press('Enter');
  // Nothing is selected: the command asks for the prompt.
  await page.locator('.quick-input-widget', { hasText: 'Nothing is selected' }).first().waitFor({ timeout: 10_000 });
  await page.keyboard.insertText(prompt);
  await page.keyboard.press('Enter');
  assert.equal((await waitForRequest(before + 1, 'the prompt sent from the command')).prompt, prompt);
  const listed = JSON.parse((await koru('drives', '--json')).stdout);
  const drive = (listed.drives ?? listed).find((d) => d.prompt_excerpt && prompt.startsWith(d.prompt_excerpt.replace(/…$/, '')));
  assert.ok(drive, `a drive for the prompt in koru drives: ${JSON.stringify(listed)}`);
  await waitFor(async () => {
    const again = JSON.parse((await koru('drives', '--json')).stdout);
    return (again.drives ?? again).find((d) => d.drive_id === drive.drive_id)?.state === 'done';
  }, 10_000, 'the command\'s drive to end done');
});

test('7. closing the browser page ends the session', async () => {
  await windowSession();
  await state.wb.close();
  const closedAt = Date.now();
  await waitFor(async () => !(await sessions()).some((s) => s.ide?.product === 'code-server'), (GRACE_SECONDS + 20) * 1000, 'the session to end after the page closed');
  figures.page_close_to_session_end_ms = Date.now() - closedAt;
});

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  return { p50: round(at(0.5)), p99: round(at(0.99)), min: round(sorted[0]), max: round(sorted[sorted.length - 1]) };
}
const round = (ms) => Math.round(ms * 100) / 100;

/** A controller connection that creates drives and waits for their end on the event stream (for the figures). */
class Controller {
  static connect(socketPath) {
    return new Promise((resolve, reject) => {
      const conn = net.createConnection({ path: socketPath });
      const controller = new Controller(conn);
      conn.once('error', reject);
      conn.once('connect', () => {
        controller.write({ v: 1, type: 'hello', role: 'controller', protocol: { min: 1, max: 1 }, client: { name: 'koru-e2e', version: '1' } });
        controller.write({ v: 1, id: 'sub', type: 'events.subscribe' });
      });
      controller.waiters.push((m) => m.type === 'events.subscribed' && (resolve(controller), true));
    });
  }

  constructor(conn) {
    this.conn = conn;
    this.buffer = '';
    this.waiters = [];
    this.nextId = 1;
    conn.setEncoding('utf8');
    conn.on('data', (chunk) => {
      this.buffer += chunk;
      let newline;
      while ((newline = this.buffer.indexOf('\n')) >= 0) {
        const message = JSON.parse(this.buffer.slice(0, newline));
        this.buffer = this.buffer.slice(newline + 1);
        this.waiters = this.waiters.filter((waiter) => !waiter(message));
      }
    });
  }

  write(message) {
    this.conn.write(JSON.stringify(message) + '\n');
  }

  /** Milliseconds from writing drive.create to the drive's terminal state on the stream. */
  drive(sessionId, prompt) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      let driveId;
      const started = process.hrtime.bigint();
      this.waiters.push((m) => {
        if (m.type === 'drive.result' && m.id === id) {
          driveId = m.drive.drive_id;
          return true;
        }
        if (m.type === 'error' && m.ref === id) {
          reject(new Error(m.message));
          return true;
        }
        return false;
      });
      this.waiters.push((m) => {
        const drive = m.type === 'stream' && m.event.kind === 'drive_updated' ? m.event.drive : undefined;
        if (!drive || drive.prompt_excerpt === undefined || (driveId && drive.drive_id !== driveId)) return false;
        if (!driveId && !drive.drive_id) return false;
        if (!['done', 'failed', 'cancelled', 'timed_out'].includes(drive.state)) return false;
        if (driveId === undefined) return false;
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        if (drive.state === 'done') resolve(ms);
        else reject(new Error(`drive ${drive.drive_id} ended ${drive.state}: ${JSON.stringify(drive.blocker)}`));
        return true;
      });
      this.write({ v: 1, id, type: 'drive.create', target: { session: sessionId }, prompt });
    });
  }

  close() {
    this.conn.destroy();
  }
}

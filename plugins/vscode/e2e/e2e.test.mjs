// End-to-end: the Koru extension inside a real VS Code build (code-server) driven by headless Chromium, against the real `koru` daemon started with --no-observe (so every reply Koru reports came through the plugin); the recorder fixture's chat participant proves what reached the chat.
// Run (after setup.sh and `npm run package` in plugins/vscode):  . ~/.cache/koru-e2e/env.sh && node --test plugins/vscode/e2e/e2e.test.mjs
// KORU_E2E_FIGURES=N also measures N native drives against N fake-plugin drives in the same daemon, and N drives → submitted / → reply_completed with and without the chat's evidence, and writes e2e/out/figures.json.
// KORU_E2E_RACE_RUNS=N (default 10) sets how many fresh windows the first-prompt race uses.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { E2E_DIR, CODE_SERVER_ENTRY, CHAT_INPUT_SELECTOR, freePort, openWorkbench, packageVsix, readJsonLines, startCodeServer, waitFor } from './harness.mjs';

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
// What the CLI and MCP printed, for the report (written with the figures).
const notes = {};
// How long the fixture keeps a confirmation waiting for the user.
const CONFIRM_HOLD_MS = 4000;

/** Runs the koru CLI against the test daemon; resolves {code, stdout, stderr}. */
function koru(...args) {
  return new Promise((resolve) => {
    execFile(KORU, [...args, '--socket', socket], { timeout: 120_000 }, (error, stdout, stderr) =>
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
  // No chat-store observers: a reply can only reach Koru through the plugin.
  // Its drive journal and index in this run's temp folder, not the user's state.
  const env = { ...process.env, XDG_STATE_HOME: path.join(tmp, 'state'), XDG_CACHE_HOME: path.join(tmp, 'cache') };
  const child = spawn(KORU, ['daemon', '--socket', socket, '--registry', registry, '--no-observe'], { stdio: ['ignore', log, log], env });
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

/** `koru send … --wait --json` to the main window: the finished drive. */
function send(prompt, ...flags) {
  return sendTo(folder, prompt, ...flags);
}

/** `koru send --workspace <workspace> --wait --json` (or `--wait-reply` among the flags): the finished drive. */
async function sendTo(workspace, prompt, ...flags) {
  const wait = flags.includes('--wait-reply') ? [] : ['--wait'];
  const { code, stdout, stderr } = await koru('send', '--workspace', workspace, ...wait, '--json', ...flags, prompt);
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

let recorderVsix;
const CODE_SERVER_ARGS = ['--reconnection-grace-time', String(GRACE_SECONDS), '--enable-proposed-api', RECORDER_ID];

before(async () => {
  recorderVsix = packageVsix(path.join(PLUGIN_DIR, 'test-fixtures', 'koru-e2e-recorder'), path.join(OUT, 'koru-e2e-recorder.vsix'));
  await startDaemon();
  state.cs = await startCodeServer({
    folder,
    vsixPaths: [KORU_VSIX, recorderVsix],
    env: { KORU_SOCKET: socket, KORU_E2E_RECORD_FILE: recordFile, KORU_E2E_RECORDER_READY_FILE: readyFile },
    extraArgs: CODE_SERVER_ARGS,
    // bash: the shell whose integration VS Code injects (a root CI user may have no $SHELL, and sh has none).
    userSettings: { 'koru.allowedCommands': [], 'terminal.integrated.defaultProfile.linux': 'bash' },
  });
  state.wb = await openWorkbench(state.cs.url, folder);
});

/**
 * Another window on its own fresh code-server profile (so no chat model is selected yet) and
 * folder, with its own recorder file; `extensionsDir` reuses installed extensions.
 */
async function openExtraWindow(name, env = {}, { extensionsDir, userSettings = {}, moreVsix = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(tmp, `${name}-`));
  const extraFolder = path.join(dir, 'workspace');
  fs.mkdirSync(extraFolder);
  const extraRecordFile = path.join(dir, 'chat-requests.jsonl');
  const cs = await startCodeServer({
    folder: extraFolder,
    vsixPaths: extensionsDir ? [] : [KORU_VSIX, recorderVsix, ...moreVsix],
    extensionsDir,
    env: { KORU_SOCKET: socket, KORU_E2E_RECORD_FILE: extraRecordFile, ...env },
    extraArgs: CODE_SERVER_ARGS,
    userSettings,
  });
  let wb;
  try {
    wb = await openWorkbench(cs.url, extraFolder);
  } catch (error) {
    await cs.stop();
    throw error;
  }
  return {
    folder: extraFolder,
    recordFile: extraRecordFile,
    cs,
    wb,
    async close() {
      await wb.close();
      await cs.stop();
    },
  };
}

/** The session of the window that has `dir` open, once listed. */
function sessionFor(dir, timeoutMs = 60_000, intervalMs = 50) {
  return waitFor(async () => (await sessions()).find((s) => s.window?.workspace_folders?.includes(dir)), timeoutMs, `the window of ${dir} in koru sessions`, intervalMs);
}

after(async () => {
  if (process.exitCode) await screenshot('failure');
  await state.wb?.close();
  await state.cs?.stop();
  await stopDaemon();
  if (Object.keys(notes).length > 0) figures.notes = notes;
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
  // The folder as a URI too; code-server's extension host is a remote-style host whose remote name is its authority.
  assert.deepEqual(session.window.workspace_uris, [pathToFileURL(folder).href]);
  assert.equal(typeof session.window.remote_name, 'string', JSON.stringify(session.window));
  // Where this window's storage is: the window's own workspaceStorage/<id> folder, and globalStorage.
  const storage = session.window.storage;
  assert.equal(path.dirname(storage.workspace_storage), path.join(state.cs.userDir, 'User', 'workspaceStorage'), JSON.stringify(storage));
  assert.ok(fs.statSync(storage.workspace_storage).isDirectory());
  assert.equal(storage.global_storage, path.join(state.cs.userDir, 'User', 'globalStorage'));
  // The fake model is registered: the chat has a language model.
  const withModel = await waitFor(async () => (await windowSession()).chat_readiness?.ready === true && (await windowSession()), 20_000, 'chat readiness true');
  assert.deepEqual(withModel.chat_readiness, { ready: true });
});

test('2. a multi-line Unicode prompt goes by the native route into the chat, byte-exact, and ends submitted', async () => {
  const prompt = 'Refactor the parser:\n  – keep the API «stable» ✓\n\tthen add tests für ü, 日本語 and emoji 🦀\nend';
  const { code, drive, stderr } = await send(prompt);
  assert.equal(code, 0, stderr);
  assert.equal(drive.state, 'done');
  assert.equal(drive.route, 'native_send');
  assert.deepEqual(drive.history.map((h) => h.state).filter((s) => ['received', 'submitted', 'done'].includes(s)), ['received', 'submitted', 'done']);
  // The chat's own response ended before the ack: the participant had the prompt.
  assert.equal(drive.submit_evidence, 'chat_responded');
  const request = await waitForRequest(1, 'the chat participant to receive the native prompt');
  assert.equal(request.prompt, prompt);
  const submittedAt = drive.history.find((h) => h.state === 'submitted').at_ms;
  assert.ok(request.at_ms <= submittedAt, `the prompt arrived (${request.at_ms}) before submitted (${submittedAt})`);
  const listed = JSON.parse((await koru('drives', '--json')).stdout);
  assert.equal((listed.drives ?? listed).find((d) => d.drive_id === drive.drive_id)?.submit_evidence, 'chat_responded');
});

test('4. --no-submit leaves the prompt in the chat input: the participant receives nothing', async () => {
  const before = requests().length;
  const token = `unsent-${Date.now()}`;
  const { code, drive, stderr } = await send(`${token} please wait`, '--no-submit');
  assert.equal(code, 0, stderr);
  assert.equal(drive.state, 'done');
  assert.equal(drive.history.map((h) => h.state).includes('submitted'), false);
  assert.equal(drive.submit_evidence ?? null, null, 'an unsent prompt has no submit evidence');
  assert.ok(drive.history.some((h) => h.state === 'pasted'));
  const input = state.wb.page.locator(CHAT_INPUT_SELECTOR).first();
  await waitFor(async () => (await input.innerText()).includes(token), 10_000, 'the unsent prompt in the chat input');
  await new Promise((resolve) => setTimeout(resolve, 3000));
  assert.equal(requests().length, before, 'nothing was submitted');
  await clearChatInput();
});

test('8. reply completion, a cancel and a confirmation-waiting result reach `koru send --wait-reply` and MCP `wait_for_reply` through the plugin, with no file observer', async () => {
  await windowSession();
  const before = requests().length;
  // An answer at once: the ack waited for the chat's response, and the reply came with it.
  const quick = await koru('send', '--workspace', folder, '--wait-reply', 'Reply at once ✓');
  assert.equal(quick.code, 0, quick.stderr);
  const quickId = /^(d_[0-9a-f]+) /.exec(quick.stdout)?.[1];
  assert.ok(quickId, quick.stdout);
  // The chat gives no text with its result: the CLI must not pretend it saw an empty reply.
  assert.match(quick.stdout, new RegExp(`${quickId} replied`), quick.stdout);
  assert.doesNotMatch(quick.stdout, /\(0 chars\)/, 'a reply whose text is unknown is not a reply of 0 chars');
  notes.wait_reply_stdout = quick.stdout.trim().split('\n').at(-1);

  // An answer after 6 s: still running at the end of the 3 s acceptance window (this window's
  // chat has run requests already; its first would get the 10 s first-request window), the reply follows.
  const slowPrompt = '[koru-e2e:slow=6000] a slow answer ✓';
  const slow = await send(slowPrompt, '--wait-reply');
  assert.equal(slow.code, 0, slow.stderr);
  assert.equal(slow.drive.state, 'done');
  assert.equal(slow.drive.submit_evidence, 'chat_running');
  assert.equal(slow.drive.observation?.stage, 'replied', JSON.stringify(slow.drive.observation));
  assert.equal(slow.drive.observation.store, 'plugin');
  const slowSubmitted = slow.drive.history.find((h) => h.state === 'submitted').at_ms;
  assert.ok(slow.drive.observation.at_ms - slowSubmitted >= 2000, 'the reply came after the ack, when the participant answered');

  // A request the user stops (Chat: Cancel, Ctrl+Escape in the chat input) after the ack:
  // the chat's result is `{}`, reported as cancelled.
  const cancelPrompt = '[koru-e2e:slow=20000] stop me ✓';
  const cancelling = send(cancelPrompt, '--wait-reply');
  await waitFor(async () => {
    const listed = JSON.parse((await koru('drives', '--json')).stdout);
    return (listed.drives ?? listed).some((d) => d.prompt_excerpt?.startsWith('[koru-e2e:slow=20000]') && d.submit_evidence === 'chat_running');
  }, 20_000, 'the request to be submitted with chat_running');
  await state.wb.page.locator(CHAT_INPUT_SELECTOR).first().click();
  await state.wb.page.keyboard.press('Control+Escape');
  const cancelled = await cancelling;
  assert.notEqual(cancelled.code, 0, 'a cancelled request is not a reply');
  assert.equal(cancelled.drive.observation?.stage, 'cancelled', JSON.stringify(cancelled.drive.observation));
  assert.equal(cancelled.drive.observation.store, 'plugin');

  const mcp = await McpClient.start(socket);
  try {
    const sent = await mcp.call('send_prompt', { target: folder, prompt: 'through MCP ✓', wait: 'submitted' });
    assert.ok(!sent.isError, sent.text);
    const mcpDrive = /d_[0-9a-f]+/.exec(sent.text)?.[0];
    assert.ok(mcpDrive, sent.text);
    const reply = await mcp.call('wait_for_reply', { drive_id: mcpDrive, timeout_s: 30 });
    assert.ok(!reply.isError, reply.text);
    assert.match(reply.text, /^reply finished in the window's chat \(through its plugin\)/);
    assert.doesNotMatch(reply.text, /\(0 chars\)/, 'a reply whose text is unknown is not a reply of 0 chars');
    notes.mcp_wait_for_reply = reply.text;

    // A response that waits for the user's confirmation.
    const confirmPrompt = `[koru-e2e:confirm=${CONFIRM_HOLD_MS}] ask me first ✓`;
    const confirmStarted = Date.now();
    const confirm = await koru('send', '--workspace', folder, '--wait-reply', confirmPrompt);
    assert.notEqual(confirm.code, 0, 'waiting for the user is not a reply');
    assert.match(confirm.stderr, /needs_input in the window's chat \(as its plugin reports\): the chat waits for the user: Koru e2e: go on\?/, confirm.stderr);
    const confirmDrive = /^(d_[0-9a-f]+) /.exec(confirm.stdout)?.[1];
    assert.ok(confirmDrive, confirm.stdout);
    const waited = await mcp.call('wait_for_reply', { drive_id: confirmDrive, timeout_s: 10 });
    assert.ok(waited.isError, waited.text);
    assert.match(waited.text, /needs_input/);
    assert.match(waited.text, /Koru e2e: go on\?/);
    notes.mcp_needs_input = waited.text;
    const listed = JSON.parse((await koru('drives', '--json')).stdout);
    const confirmed = (listed.drives ?? listed).find((d) => d.drive_id === confirmDrive);
    assert.equal(confirmed.state, 'done');
    assert.equal(confirmed.submit_evidence, 'chat_responded');
    assert.equal(confirmed.observation.stage, 'needs_input');

    assert.deepEqual(
      requests().slice(before).map((r) => r.prompt),
      ['Reply at once ✓', slowPrompt, cancelPrompt, 'through MCP ✓', confirmPrompt],
      'each prompt reached the participant byte-exact',
    );
    // The daemon now holds this window's drives (its chat waits for the user, and the plugin
    // cannot see the user answer), and the participant holds its response: start clean.
    await stopDaemon();
    await startDaemon();
    await windowSession();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, CONFIRM_HOLD_MS + 500 - (Date.now() - confirmStarted))));
  } finally {
    mcp.close();
  }
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
  // chat.submit has no blockOnResponse: only the command returned, and the drive says so.
  assert.equal(drive.submit_evidence, 'command_returned');
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

test("9. a window whose chat has no usable model: the prompt is sent again a few times, then `koru send --wait` fails with chat_refused and the chat's message, and no drive is done", async () => {
  const window = await openExtraWindow('no-model', { KORU_E2E_RECORDER_SELECT_MODEL: '0' });
  try {
    const session = await sessionFor(window.folder);
    const result = await koru('send', '--workspace', window.folder, '--wait', '--timeout', '30', 'nobody will read this ✓');
    assert.notEqual(result.code, 0, result.stdout);
    // The chat's own words, through the plugin: its model is registered but not selected.
    assert.match(result.stderr, /failed: chat_refused: Language model unavailable/, result.stderr);
    const listed = JSON.parse((await koru('drives', '--json')).stdout);
    const drives = (listed.drives ?? listed).filter((d) => d.session_id === session.session_id);
    assert.equal(drives.length, 1);
    assert.equal(drives[0].state, 'failed');
    assert.equal(drives[0].blocker.code, 'chat_refused');
    assert.equal(drives[0].submit_evidence ?? null, null, 'never submitted');
    // The chat refused as not ready each time: the daemon sent it again, on the same route, and gave up.
    const sends = drives[0].attempts.filter((a) => a.outcome === 'failed');
    assert.ok(sends.length >= 2 && sends.every((a) => a.route === 'native_send' && a.blocker?.code === 'chat_refused'), JSON.stringify(drives[0].attempts));
    assert.match(drives[0].blocker.detail, /refused the prompt \d+ times/, drives[0].blocker.detail);
    assert.deepEqual(readJsonLines(window.recordFile), [], 'the participant never saw it');
    notes.no_model_stderr = result.stderr.trim().split('\n').at(-1);
  } finally {
    await window.close();
  }
});

const RACE_RUNS = Number(process.env.KORU_E2E_RACE_RUNS || 10);
// How much later each run's recorder selects its model: run 0 at once (usually before the
// first prompt comes), later runs after the prompt (measured: from about 1.5 s on).
const RACE_SELECT_DELAY_STEP_MS = 500;

test(`10. the first prompt, sent the moment the session appears while the chat's model is not yet selected, on ${RACE_RUNS} fresh windows: refused as not ready, it is sent again and reaches the participant byte-exact, once`, async () => {
  let extensionsDir;
  const runs = [];
  for (let i = 0; i < RACE_RUNS; i++) {
    // A fresh profile, whose recorder selects its model only after a delay (a chat still
    // starting): spread over the runs, so the first prompt meets the chat before and after.
    const readyFile = path.join(tmp, `race-${i}-ready.json`);
    const selectDelayMs = i * RACE_SELECT_DELAY_STEP_MS;
    const window = await openExtraWindow(`race-${i}`, { KORU_E2E_RECORDER_SELECT_DELAY_MS: String(selectDelayMs), KORU_E2E_RECORDER_READY_FILE: readyFile }, { extensionsDir });
    extensionsDir ??= window.cs.extDir;
    try {
      const session = await sessionFor(window.folder, 60_000, 10);
      const prompt = `first prompt ${i} ✓\n  «two» \t日本語`;
      const { code, drive, stderr } = await sendTo(window.folder, prompt, '--timeout', '30');
      const received = drive.history.find((h) => h.state === 'received')?.at_ms;
      const run = {
        state: drive.state,
        evidence: drive.submit_evidence ?? null,
        blocker: drive.blocker?.code ?? null,
        detail: drive.blocker?.detail ?? null,
        readiness_at_hello: session.chat_readiness ?? null,
        to_received_ms: received ? received - drive.created_at_ms : null,
        // Sends the chat refused as not ready before the one it took.
        refused_sends: drive.attempts.filter((a) => a.outcome === 'failed' && a.blocker?.code === 'chat_refused').length,
        created_to_done_ms: drive.finished_at_ms ? drive.finished_at_ms - drive.created_at_ms : null,
        settled_after_received_ms: received && drive.finished_at_ms ? drive.finished_at_ms - received : null,
      };
      if (drive.state === 'done') {
        run.exit_code = code;
        const arrived = await waitFor(() => readJsonLines(window.recordFile).find((r) => r.prompt === prompt), 15_000, `run ${i}: the done prompt at the participant`).catch(() => undefined);
        run.arrived = Boolean(arrived);
        run.arrivals = readJsonLines(window.recordFile).filter((r) => r.prompt === prompt).length;
        if (arrived) run.arrived_after_received_ms = arrived.at_ms - received;
        // What the plugin reported after submitted, if anything.
        const listed = JSON.parse((await koru('drives', '--json')).stdout);
        const observation = (listed.drives ?? listed).find((d) => d.drive_id === drive.drive_id)?.observation;
        if (observation) run.outcome = { stage: observation.stage, detail: observation.detail ?? null, after_received_ms: observation.at_ms - received };
      } else {
        run.exit_code = code;
        run.arrived = readJsonLines(window.recordFile).some((r) => r.prompt === prompt);
      }
      const selected = await waitFor(() => fs.existsSync(readyFile) && JSON.parse(fs.readFileSync(readyFile, 'utf8')), 30_000, 'the recorder to select its model');
      run.model_selected_before_prompt = selected.at_ms < drive.created_at_ms;
      runs.push(run);
    } finally {
      await window.close();
    }
  }
  figures.first_prompt_race = runs;
  console.log(`first-prompt race: ${JSON.stringify(runs)}`);
  for (const [i, run] of runs.entries()) {
    // Every model is selected within 4.5 s of start, well inside the drive's 30 s: each first prompt gets in.
    assert.equal(run.state, 'done', `run ${i}: the first prompt did not get in: ${JSON.stringify(run)}`);
    assert.equal(run.exit_code, 0);
    assert.ok(run.arrived, `run ${i}: done without arrival: ${JSON.stringify(run)}`);
    assert.equal(run.arrivals, 1, `run ${i}: the participant got the prompt more than once: ${JSON.stringify(run)}`);
  }
  assert.ok(runs.some((r) => !r.model_selected_before_prompt), 'at least one first prompt met a chat whose model was not selected yet');
  assert.ok(runs.some((r) => r.refused_sends > 0), 'at least one first prompt was refused as not ready and sent again');
});

const FIGURE_DRIVES = Number(process.env.KORU_E2E_FIGURES || 0);

test("11. with the chat-store observers on, the window's announced chatSessions/ folder is watched: `koru chats` lists its chat with the last prompt, and the drive's observation is set from the store as well, each fact published once", async () => {
  // A daemon of its own with the observers on, in a HOME with no chat stores: whatever it
  // sees, it sees through the folders the window announces.
  const dir = fs.mkdtempSync(path.join(tmp, 'observed-'));
  const observedRun = path.join(dir, 'run');
  fs.mkdirSync(observedRun, { mode: 0o700 });
  const observedSocket = path.join(observedRun, 'koru.sock');
  const home = path.join(dir, 'home');
  fs.mkdirSync(home);
  const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'), XDG_DATA_HOME: path.join(home, '.local/share'), XDG_STATE_HOME: path.join(home, '.local/state') };
  delete env.CLAUDE_CONFIG_DIR;
  delete env.CODEX_HOME;
  const logFile = path.join(dir, 'daemon.log');
  const log = fs.openSync(logFile, 'a');
  const daemon = spawn(KORU, ['daemon', '--socket', observedSocket], { env, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const at = (...args) =>
    new Promise((resolve) => {
      execFile(KORU, [...args, '--socket', observedSocket], { env, timeout: 120_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr }),
      );
    });
  const json = async (...args) => {
    const { code, stdout, stderr } = await at(...args, '--json');
    if (code !== 0) throw new Error(`koru ${args.join(' ')} failed (log ${logFile}): ${stderr}`);
    return JSON.parse(stdout);
  };
  let window;
  let controller;
  try {
    await waitFor(async () => (await at('status')).code === 0, 10_000, `the observing daemon to answer (log ${logFile})`);
    const readyFile = path.join(dir, 'recorder-ready.json');
    window = await openExtraWindow('observed', { KORU_SOCKET: observedSocket, KORU_E2E_RECORDER_READY_FILE: readyFile }, { extensionsDir: state.cs.extDir });
    const session = await waitFor(
      async () => (await json('sessions')).find?.((s) => s.role === 'plugin' && s.window?.workspace_folders?.includes(window.folder)),
      60_000,
      'the window in the observing daemon',
    );
    await waitFor(() => fs.existsSync(readyFile), 30_000, 'the recorder to select its model');
    // The window's own chatSessions/ (code-server's profile: no registry location names it).
    const announced = await waitFor(
      async () => (await json('status')).observers?.find((o) => o.announced && o.root.endsWith('/chatSessions')),
      10_000,
      'the announced chatSessions/ folder in `koru status`',
    );
    assert.deepEqual(announced.announced_by, [session.session_id]);
    assert.equal(announced.store, 'chat_history_copilot_json');
    assert.ok(announced.root.startsWith(window.cs.userDir), `${announced.root} is in the window's profile ${window.cs.userDir}`);

    controller = await Controller.connect(observedSocket);
    const stream = [];
    controller.waiters.push((m) => {
      if (m.type === 'stream') stream.push(m.event);
      return false;
    });
    const prompt = `observed through the window's own store ✓ ${Date.now()}`;
    const sent = await at('send', '--workspace', window.folder, '--wait', '--json', prompt);
    assert.equal(sent.code, 0, sent.stderr);
    const drive = JSON.parse(sent.stdout);
    assert.equal(drive.state, 'done');
    assert.equal(drive.submit_evidence, 'chat_responded');
    assert.equal(readJsonLines(window.recordFile).at(-1)?.prompt, prompt);

    const chat = await waitFor(
      async () => (await json('chats')).find((c) => c.store === 'chat_history_copilot_json' && c.last_prompt === prompt),
      20_000,
      'the chat with the last prompt in `koru chats`',
    );
    assert.equal(chat.workspace, window.folder, 'the chat belongs to the window that announced the folder');
    const observed = await waitFor(
      async () => {
        const listed = await json('drives');
        const found = (listed.drives ?? listed).find((d) => d.drive_id === drive.drive_id);
        return found?.observation?.store === 'chat_history_copilot_json' && found;
      },
      20_000,
      "the drive's observation from the store",
    );
    assert.equal(observed.observation.stage, 'replied');
    assert.equal(observed.observation.chat_id, chat.chat_id);
    // The workbench rewrites the session file on every storage flush (every 5 s in a
    // browser): wait for another one, then count what was published.
    await new Promise((r) => setTimeout(r, 7000));
    // Each drive_updated carries the whole drive: its state may move while the observation
    // stays (the store can see the prompt before the plugin's ack), and the chat's own
    // records of the drive (`evidence`, read back from the store) come in an update of their own.
    const published = stream.filter((e) => e.kind === 'drive_updated' && e.drive.drive_id === drive.drive_id).map((e) => ({ state: e.drive.state, observation: e.drive.observation, evidence: e.drive.evidence }));
    const evidence = published.map((u) => u.evidence).filter(Boolean).at(-1);
    console.log(`the chat's records of the drive (Copilot's store in code-server): ${JSON.stringify(evidence ?? null)}`);
    const updates = published.map((u) => u.observation).filter(Boolean);
    const replied = updates.filter((o, i) => o.stage === 'replied' && updates[i - 1]?.stage !== 'replied');
    assert.equal(replied.length, 1, `the drive is reported replied once: ${JSON.stringify(updates)}`);
    for (let i = 1; i < published.length; i++) {
      assert.notDeepEqual(published[i], published[i - 1], `every drive update says something new: ${JSON.stringify(published)}`);
    }
    const storeEvents = stream.filter((e) => e.kind === 'observed' && e.observation.chat_id === chat.chat_id).map((e) => e.observation.kind);
    for (const kind of ['prompt_seen', 'reply_completed']) {
      assert.equal(storeEvents.filter((k) => k === kind).length, 1, `the store's ${kind} is published once: ${JSON.stringify(storeEvents)}`);
    }
    notes.observed_store_events = storeEvents;
    notes.observed_drive_updates = updates.map((o) => `${o.store}:${o.stage}`);
  } finally {
    controller?.close();
    await window?.close();
    daemon.kill('SIGTERM');
  }
});

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

/** One native drive to the window of `workspace`: ms from drive.create to submitted, to the participant (its recorder file), and to reply_completed (when reported). */
async function timeDrive(workspace, recorded, prompt, { waitReply }) {
  const { code, drive, stderr } = await sendTo(workspace, prompt, ...(waitReply ? ['--wait-reply'] : []));
  assert.equal(code, 0, stderr);
  const request = await waitFor(() => readJsonLines(recorded).find((r) => r.prompt === prompt), 20_000, `${prompt} at the participant`, 20);
  return {
    evidence: drive.submit_evidence,
    submitted: drive.history.find((h) => h.state === 'submitted').at_ms - drive.created_at_ms,
    arrival: request.at_ms - drive.created_at_ms,
    replied: drive.observation?.stage === 'replied' ? drive.observation.at_ms - drive.created_at_ms : undefined,
  };
}

function figuresOf(times) {
  const replied = times.map((t) => t.replied).filter((ms) => ms !== undefined);
  return {
    evidence: [...new Set(times.map((t) => t.evidence))],
    submitted_ms: summary(times.map((t) => t.submitted)),
    at_participant_ms: summary(times.map((t) => t.arrival)),
    reply_completed_ms: replied.length === times.length ? summary(replied) : `reported for ${replied.length} of ${times.length}`,
  };
}

test("figures: → submitted and → reply_completed with the chat's evidence, and before it (command_returned)", { skip: FIGURE_DRIVES === 0 && 'set KORU_E2E_FIGURES=N to measure' }, async () => {
  await windowSession();
  // Before: a second window whose extension has the chat's evidence switched off, i.e. today's
  // path. Drives alternate between the two windows, so both see the same machine.
  const readyFile = path.join(tmp, 'before-ready.json');
  const window = await openExtraWindow('before', { KORU_E2E_RECORDER_READY_FILE: readyFile }, { userSettings: { 'koru.chatEvidence': false } });
  try {
    await sessionFor(window.folder);
    await waitFor(() => fs.existsSync(readyFile), 30_000, 'the recorder to select its model');
    await timeDrive(folder, recordFile, 'warm-up after ✓', { waitReply: true });
    await timeDrive(window.folder, window.recordFile, 'warm-up before ✓', { waitReply: false });
    const after = [];
    const before = [];
    for (let i = 0; i < FIGURE_DRIVES; i++) {
      after.push(await timeDrive(folder, recordFile, `with evidence ${i} ✓`, { waitReply: true }));
      before.push(await timeDrive(window.folder, window.recordFile, `command only ${i} ✓`, { waitReply: false }));
    }
    const afterFigures = figuresOf(after);
    const beforeFigures = figuresOf(before);
    assert.deepEqual(afterFigures.evidence, ['chat_responded']);
    assert.deepEqual(beforeFigures.evidence, ['command_returned']);
    figures.submit_evidence = {
      drives: FIGURE_DRIVES,
      after: afterFigures,
      before: beforeFigures,
      submitted_p50_added_ms: round(afterFigures.submitted_ms.p50 - beforeFigures.submitted_ms.p50),
      submitted_p50_after_participant_ms: round(afterFigures.submitted_ms.p50 - afterFigures.at_participant_ms.p50),
    };
  } finally {
    await window.close();
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

test('12. `koru setup --only ide` installs the extension through code-server\'s own launcher: listed by `--list-extensions`, a window on those extensions connects, twice changes nothing, and `--undo` uninstalls it', async () => {
  const dir = fs.mkdtempSync(path.join(tmp, 'setup-'));
  const home = path.join(dir, 'home');
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(home);
  fs.mkdirSync(bin);
  // code-server as its npm package installs it: a `code-server` launcher on PATH.
  const launcher = path.join(bin, 'code-server');
  fs.writeFileSync(launcher, `#!/bin/sh\nexec '${process.execPath}' '${CODE_SERVER_ENTRY}' "$@"\n`, { mode: 0o755 });
  const env = { HOME: home, PATH: `${bin}:/usr/bin:/bin` };
  const setup = (...args) => spawnSync(KORU, ['setup', ...args], { env, encoding: 'utf8', timeout: 180_000 });
  const listed = () => spawnSync(launcher, ['--list-extensions', '--show-versions'], { env, encoding: 'utf8', timeout: 120_000 }).stdout;

  const first = setup('--yes', '--only', 'ide', '--vsix', KORU_VSIX);
  assert.equal(first.status, 0, first.stdout + first.stderr);
  assert.match(first.stdout, new RegExp(`code-server \\(code-server\\) — done: install koru\\.koru-vscode@${VERSION.replaceAll('.', '\\.')}`), first.stdout);
  assert.match(listed(), new RegExp(`^koru\\.koru-vscode@${VERSION.replaceAll('.', '\\.')}$`, 'm'));
  const again = setup('--yes', '--only', 'ide', '--vsix', KORU_VSIX);
  assert.equal(again.status, 0, again.stdout + again.stderr);
  assert.match(again.stdout, /code-server \(code-server\) — already wired: koru\.koru-vscode@/);
  assert.match(again.stdout, /\nNothing to change\.\n/);

  // A window on the extensions folder code-server itself installed into (its default, under HOME).
  const setupFolder = path.join(dir, 'workspace');
  fs.mkdirSync(setupFolder);
  const cs = await startCodeServer({
    folder: setupFolder,
    extensionsDir: path.join(home, '.local/share/code-server/extensions'),
    env: { KORU_SOCKET: socket },
    extraArgs: CODE_SERVER_ARGS,
  });
  try {
    const wb = await openWorkbench(cs.url, setupFolder);
    try {
      const session = await sessionFor(setupFolder);
      assert.equal(session.client.name, 'koru-vscode');
      assert.equal(session.client.version, VERSION);
    } finally {
      await wb.close();
    }
  } finally {
    await cs.stop();
  }

  const undone = setup('--undo', '--yes');
  assert.equal(undone.status, 0, undone.stdout + undone.stderr);
  assert.match(undone.stdout, /code-server \(code-server\) — undone: ran .*--uninstall-extension koru\.koru-vscode/);
  assert.doesNotMatch(listed(), /koru\.koru-vscode/);
});

/** The terminal agents `koru sessions` lists. */
async function terminalAgents() {
  const { stdout } = await koru('sessions', '--json');
  const parsed = JSON.parse(stdout);
  return (parsed.sessions ?? parsed).filter((s) => s.kind === 'terminal_agent');
}

/** Opens a new integrated terminal in the window and types `command` into it once its shell is reported. */
async function runInNewTerminal(command) {
  const page = state.wb.page;
  const shells = new Set(((await windowSession()).terminals ?? []).map((t) => t.shell_pid));
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  await page.keyboard.insertText('Terminal: Create New Terminal');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Create New Terminal' }).first().waitFor({ timeout: 10_000 });
  await page.keyboard.press('Enter');
  // The extension reports it with its shell's pid.
  await waitFor(
    async () => (await windowSession()).terminals?.some((t) => t.shell_pid && !shells.has(t.shell_pid)),
    30_000,
    "the new terminal in the window's session, with its shell",
  );
  await page.locator('.terminal-wrapper.active .xterm').first().waitFor({ timeout: 10_000 });
  // Give bash's shell integration a moment to set up before the command line goes in.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await page.keyboard.type(command);
  await page.keyboard.press('Enter');
}

/** The launch script of a real agent (tests/agents, pinned) for `folder`, with Koru's hooks, against the fake model at `modelUrl`. */
function agentLaunchScript(agent, agentRoot, modelUrl) {
  const launch = spawnSync('bash', [path.join(ROOT, 'tests/agents/start-agent.sh'), agent, folder], {
    env: { ...process.env, LAUNCH_ONLY: '1', AGENT_ROOT: agentRoot, FAKE_MODEL_URL: modelUrl, KORU_SOCKET: socket, KORU_HOOK_BIN: KORU },
    encoding: 'utf8',
  });
  assert.equal(launch.status, 0, launch.stderr);
  return launch.stdout.trim();
}

test("13. Claude Code, Codex CLI and Gemini CLI started in three integrated terminals of the window are found through the extension, typed into through it and told apart, proven by their own hooks: each prompt reaches the model byte-exact, once; a permission dialog on screen refuses the next prompt", async () => {
  const session = await windowSession();
  assert.ok(
    session.capabilities.some((c) => c.kind === 'terminal_io'),
    `code-server ${session.ide.version} has shell integration's execution API: ${JSON.stringify(session.capabilities)}`,
  );
  // The real Claude Code (tests/agents, pinned) against the local fake model server, with Koru's hooks.
  const port = await freePort();
  const modelUrl = `http://127.0.0.1:${port}`;
  const model = spawn('python3', [path.join(ROOT, 'tests/corpus/recorder/fake_model_server.py'), '--port', String(port), '--log', path.join(tmp, 'fake-model.log')], { stdio: 'ignore' });
  const roots = { 'claude-code': path.join(tmp, 'agent-claude'), codex: path.join(tmp, 'agent-codex'), 'gemini-cli': path.join(tmp, 'agent-gemini') };
  const prompts = async () => {
    const answer = await fetch(`${modelUrl}/koru/prompts`).then((r) => r.json()).catch(() => undefined);
    return answer?.map((p) => ({ prompt: p.prompt, api: p.api }));
  };
  const sendAgent = async (agent, prompt, timeout = '120') => {
    const { code, stdout, stderr } = await koru('send', '--agent', agent, '--workspace', folder, '--wait', '--json', '--timeout', timeout, prompt);
    return { code, drive: JSON.parse(stdout || '{}'), out: `${stdout}\n${stderr}` };
  };
  try {
    await waitFor(prompts, 15_000, 'the fake model server');
    await runInNewTerminal(`sh ${agentLaunchScript('claude-code', roots['claude-code'], modelUrl)}`);
    const claude = await waitFor(
      async () => (await terminalAgents()).find((a) => a.product === 'claude-code' && a.terminal?.kind === 'ide_terminal'),
      60_000,
      'Claude Code in the IDE terminal in `koru sessions`',
      250,
    );
    assert.equal(claude.terminal.session_id, session.session_id);
    assert.equal(claude.workspace, folder);
    await runInNewTerminal(`sh ${agentLaunchScript('codex', roots.codex, modelUrl)}`);
    const codex = await waitFor(
      async () => (await terminalAgents()).find((a) => a.product === 'codex' && a.terminal?.kind === 'ide_terminal'),
      60_000,
      'Codex in the second IDE terminal in `koru sessions`',
      250,
    );
    assert.notEqual(codex.terminal.terminal_id, claude.terminal.terminal_id);
    await runInNewTerminal(`sh ${agentLaunchScript('gemini-cli', roots['gemini-cli'], modelUrl)}`);
    const gemini = await waitFor(
      async () => (await terminalAgents()).find((a) => a.product === 'gemini-cli' && a.terminal?.kind === 'ide_terminal'),
      60_000,
      'Gemini CLI in the third IDE terminal in `koru sessions`',
      250,
    );
    assert.equal(new Set([claude, codex, gemini].map((a) => a.terminal.terminal_id)).size, 3);

    // Each prompt to the agent it names: Claude Code asks the model by Anthropic's API, Codex by OpenAI's.
    const stamp = Date.now();
    const sent = [
      ['claude-code', `into Claude Code in the IDE terminal ✓ ${stamp}`, 'anthropic-messages'],
      ['codex', `into Codex in the other terminal ✓ ${stamp}`, 'openai-responses'],
      ['claude-code', 'two lines for Claude\nsecond: äöü 日本語 "quoted" $HOME', 'anthropic-messages'],
      ['codex', 'two lines for Codex\nsecond: ✓ 日本語 `tick`', 'openai-responses'],
      ['gemini-cli', `into Gemini CLI in the third terminal ✓ ${stamp}`, 'gemini'],
      ['gemini-cli', 'two lines for Gemini\nsecond: äöü 日本語 "quoted"', 'gemini'],
    ];
    for (const [agent, prompt, api] of sent) {
      // The first to each waits for its input box (the agent may still be starting).
      const { code, drive, out } = await sendAgent(agent, prompt);
      assert.equal(code, 0, out);
      assert.equal(drive.state, 'done', out);
      assert.equal(drive.route, 'terminal_input', out);
      assert.equal(drive.submit_evidence, 'agent_hook', out);
      const arrived = await waitFor(async () => (await prompts())?.find((p) => p.prompt === prompt), 60_000, `the prompt to ${agent} at the model`);
      assert.equal(arrived.api, api, `${agent}'s prompt came by its own API`);
    }
    // As a person would run it (README, "A Claude Code in a VS Code terminal"): the listing and a send, printed.
    notes.ideTerminalSessions = (await koru('sessions')).stdout;
    const readme = await koru('send', '--agent', 'claude-code', '--workspace', folder, '--wait', 'Summarise README.md in one sentence.');
    assert.equal(readme.code, 0, `${readme.stdout}\n${readme.stderr}`);
    notes.ideTerminalSend = `${readme.stdout}${readme.stderr}`;
    const atModel = await prompts();
    for (const [, prompt] of sent) assert.equal(atModel.filter((p) => p.prompt === prompt).length, 1, `once: ${JSON.stringify(atModel)}`);

    // A permission dialog in Claude Code's terminal: the next prompt is refused and nothing answers it.
    const asks = 'This needs permission: create the probe file.';
    const asked = await sendAgent('claude-code', asks);
    assert.equal(asked.drive.state, 'done', asked.out);
    await waitFor(async () => (await prompts())?.some((p) => p.prompt === asks), 30_000, 'the permission prompt at the model');
    const refused = await sendAgent('claude-code', 'Are you there?', '30');
    assert.notEqual(refused.code, 0, refused.out);
    assert.equal(refused.drive.blocker?.code, 'needs_input', refused.out);
    assert.ok(!fs.existsSync(path.join(folder, 'koru-permission-probe')), 'the dialog was not answered');
    assert.ok(!(await prompts()).some((p) => p.prompt === 'Are you there?'));
  } catch (error) {
    await screenshot('ide-terminal');
    throw error;
  } finally {
    model.kill();
    for (const root of Object.values(roots)) spawnSync('pkill', ['-KILL', '-f', root]);
  }
});

test("14. with no terminal running Claude Code, `koru send --agent claude-code` goes to the Claude Code panel of the folder's window (a named stand-in extension): its command, registered after the extension's hello, is reported as a capability; the tab opens with the prompt and Koru's tab check passes on VS Code's real tab API; nothing here can press Return, so the drive ends needs_user, never done; the person's Enter in the tab sends the prompt byte-exact, once", async () => {
  const panelVsix = packageVsix(path.join(PLUGIN_DIR, 'test-fixtures', 'koru-e2e-claude-panel'), path.join(OUT, 'koru-e2e-claude-panel.vsix'));
  const panelFile = path.join(tmp, 'claude-panel.jsonl');
  const extra = await openExtraWindow('claude-panel', { KORU_E2E_PANEL_FILE: panelFile }, { moreVsix: [panelVsix] });
  const events = () => readJsonLines(panelFile);
  try {
    const session = await sessionFor(extra.folder);
    // Registered a few seconds after start-up: it reaches the daemon by a `capabilities` report.
    await waitFor(() => events().find((e) => e.registered), 30_000, 'the stand-in to register its command');
    const started = Date.now();
    await waitFor(
      async () => (await sessions()).find((s) => s.session_id === session.session_id)?.capabilities.some((c) => c.id === 'claude-vscode.primaryEditor.open'),
      30_000,
      "the panel's command among the session's capabilities",
      250,
    );
    figures.lateCapabilityReportedMs = Date.now() - started;

    const prompt = `Panel prompt ✓ ${Date.now()}\nsecond line: äöü 日本語 "quoted" $HOME`;
    const { code, stdout, stderr } = await koru('send', '--agent', 'claude-code', '--workspace', extra.folder, '--wait', '--json', '--timeout', '60', prompt);
    const drive = JSON.parse(stdout || '{}');
    const out = `${stdout}\n${stderr}`;
    assert.notEqual(code, 0, out);
    assert.equal(drive.session_id, session.session_id, out);
    assert.equal(drive.state, 'failed', out);
    assert.equal(drive.blocker?.code, 'needs_user', out);
    assert.match(drive.blocker.detail, /the prompt is in the Claude Code tab's input, unsent/, out);
    assert.deepEqual(drive.history.map((r) => r.state), ['queued', 'sent', 'received', 'focused', 'pasted', 'failed'], out);
    assert.deepEqual(drive.attempts.map((a) => `${a.interface} ${a.outcome}`), ['claude_code_panel_drive failed'], out);
    notes.claudePanelNeedsUser = out;

    const opened = events().find((e) => e.opened);
    assert.deepEqual(opened.opened, { session: null, prompt }, 'a new tab with the prompt, byte-exact');
    const tab = await waitFor(() => events().find((e) => e.active_tab !== undefined), 10_000, "VS Code's word on the active tab");
    // VS Code's tab API names the panel's view type with its internal prefix; Koru's check takes both forms.
    notes.claudePanelActiveTab = tab.active_tab;
    assert.equal(tab.active_tab?.label, 'Claude Code');
    assert.match(tab.active_tab?.view_type ?? '', /(^|-)claudeVSCodePanel$/);
    const loaded = await waitFor(() => events().find((e) => e.loaded !== undefined), 10_000, 'the tab to load');
    assert.equal(loaded.loaded, prompt, 'the prompt waits in the tab input');
    assert.ok(!events().some((e) => e.submitted !== undefined), 'nothing was sent');

    // The person presses Enter in the tab's input: the prompt goes, once.
    const input = extra.wb.page.frameLocator('iframe.webview.ready').frameLocator('#active-frame').locator('#input');
    await input.press('Enter');
    const submitted = await waitFor(() => events().find((e) => e.submitted !== undefined), 10_000, 'the Enter in the tab');
    assert.equal(submitted.submitted, prompt);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(events().filter((e) => e.submitted !== undefined).length, 1);
  } catch (error) {
    await extra.wb.page.screenshot({ path: path.join(OUT, 'claude-panel.png') }).catch(() => {});
    throw error;
  } finally {
    await extra.close();
  }
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

/** `koru mcp` over stdio with a minimal JSON-RPC client: initialize, then tools/call. */
class McpClient {
  static async start(socketPath) {
    const child = spawn(KORU, ['mcp', '--socket', socketPath], { stdio: ['pipe', 'pipe', 'pipe'] });
    const client = new McpClient(child);
    await client.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'koru-e2e', version: '1' } });
    client.notify('notifications/initialized', {});
    return client;
  }

  constructor(child) {
    this.child = child;
    this.nextId = 1;
    this.pending = new Map();
    this.stderr = '';
    let buffer = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      let newline;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (!line) continue;
        const message = JSON.parse(line);
        const waiter = message.id !== undefined && this.pending.get(message.id);
        if (waiter) {
          this.pending.delete(message.id);
          waiter(message);
        }
      }
    });
    child.stderr.on('data', (chunk) => (this.stderr += chunk));
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`koru mcp: no answer to ${method} (stderr: ${this.stderr})`)), 90_000);
      this.pending.set(id, (message) => {
        clearTimeout(timer);
        if (message.error) reject(new Error(`koru mcp: ${method}: ${JSON.stringify(message.error)}`));
        else resolve(message.result);
      });
      this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }

  notify(method, params) {
    this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method, params }) + '\n');
  }

  /** tools/call: {isError, text}. */
  async call(name, args) {
    const result = await this.request('tools/call', { name, arguments: args });
    return { isError: result.isError === true, text: (result.content ?? []).map((c) => c.text ?? '').join('\n') };
  }

  close() {
    this.child.stdin.end();
    this.child.kill('SIGTERM');
  }
}

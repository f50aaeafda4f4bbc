// Helpers for the dashboard's browser tests: a sandboxed `koru daemon --http`, `koru dev fake-plugin` IDEs, the dashboard login, and system Chromium through playwright-core.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, '../..');
export const ARTIFACTS = path.join(HERE, 'artifacts');
export const CHROMIUM = process.env.KORU_CHROMIUM || '/usr/bin/chromium';
export const KORU = process.env.KORU_BIN || path.join(ROOT, 'target/debug/koru');

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `predicate` until it returns a truthy value, which is returned; throws naming `what` on timeout. */
export async function waitFor(predicate, timeoutMs, what, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      const why = lastError ? ` (last error: ${lastError.message ?? lastError})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(intervalMs);
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// Every process a test started, killed by pid when the test process exits whatever happened.
const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {}
  }
});

function track(child) {
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}

async function stopChild(child, timeoutMs = 5000) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await exited;
  clearTimeout(timer);
}

export function requireTools() {
  if (!fs.existsSync(KORU)) throw new Error(`no koru binary at ${KORU}: run tests/browser/run.sh (or set KORU_BIN)`);
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (run.sh does)`);
}

/**
 * A sandbox (temp HOME, XDG dirs, socket) with `koru daemon --http 127.0.0.1:<free port>` running in it
 * (`env` is added to its environment and to every `koru(...)` command's).
 * Returns {root, env, port, base, token, pid, koru(args), api(method, path, body), plugin(opts), dashboardUrl(), stop()}.
 */
export async function startDaemon({ args = [], claudeProjects = false, env: extraEnv = {} } = {}) {
  requireTools();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'koru-dash-'));
  for (const sub of ['run', 'home', 'config', 'state', 'ws']) fs.mkdirSync(path.join(root, sub), { recursive: true });
  fs.chmodSync(path.join(root, 'run'), 0o700);
  if (claudeProjects) fs.mkdirSync(path.join(root, 'home/.claude/projects'), { recursive: true });
  const env = {
    PATH: process.env.PATH,
    HOME: path.join(root, 'home'),
    XDG_RUNTIME_DIR: path.join(root, 'run'),
    XDG_CONFIG_HOME: path.join(root, 'config'),
    XDG_STATE_HOME: path.join(root, 'state'),
    KORU_SOCKET: path.join(root, 'run/koru/koru.sock'),
    RUST_LOG: process.env.RUST_LOG || 'info',
    ...extraEnv,
  };
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logFile = path.join(root, 'daemon.log');
  const log = fs.openSync(logFile, 'a');
  const child = track(spawn(KORU, ['daemon', '--http', `127.0.0.1:${port}`, ...args], { env, stdio: ['ignore', log, log] }));
  fs.closeSync(log);
  const daemonLog = () => fs.readFileSync(logFile, 'utf8');
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`koru daemon exited (${child.exitCode}):\n${daemonLog()}`);
      const res = await fetch(`${base}/api/v1/health`);
      return res.ok;
    },
    15_000,
    `koru daemon to answer on ${base}/api/v1/health`,
  ).catch((e) => {
    throw new Error(`${e.message}\n--- daemon log ---\n${daemonLog()}`);
  });
  const tokenFile = path.join(env.XDG_STATE_HOME, 'koru/http-token');
  const token = await waitFor(() => fs.existsSync(tokenFile) && fs.readFileSync(tokenFile, 'utf8').trim(), 5000, tokenFile);
  const plugins = [];

  const daemon = {
    root,
    env,
    port,
    base,
    token,
    pid: child.pid,
    log: daemonLog,
    /** Runs a koru client command to completion (`env` over the sandbox's); returns {status, stdout, stderr}. */
    koru(cmdArgs, { timeoutMs = 20_000, env: override = {} } = {}) {
      const r = spawnSync(KORU, cmdArgs, { env: { ...env, ...override }, encoding: 'utf8', timeout: timeoutMs, stdio: ['ignore', 'pipe', 'pipe'] });
      return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    },
    /** A bearer-token API call; returns {status, body}. */
    async api(method, apiPath, body, headers = {}) {
      const init = { method, headers: { Authorization: `Bearer ${token}`, ...headers } };
      if (body !== undefined) {
        init.headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      const res = await fetch(`${base}/api/v1${apiPath}`, init);
      const text = await res.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {}
      return { status: res.status, body: json, text };
    },
    async sessions() {
      const { status, body } = await daemon.api('GET', '/sessions');
      if (status !== 200) throw new Error(`GET /sessions: ${status}`);
      return body.sessions;
    },
    async drives() {
      const { status, body } = await daemon.api('GET', '/drives');
      if (status !== 200) throw new Error(`GET /drives: ${status}`);
      return body.drives;
    },
    /** A workspace folder in the sandbox (created); returns its real path. */
    workspace(name) {
      const dir = path.join(root, 'ws', name);
      fs.mkdirSync(dir, { recursive: true });
      return fs.realpathSync(dir);
    },
    /**
     * Starts `koru dev fake-plugin` for a new workspace folder `name` and waits until its session is listed.
     * Returns {sessionId, workspace, record (the file of received drives), drivesReceived(), stop()}.
     */
    async plugin({ name, product = 'vscode', behaviour = 'ack', extra = [], wait = true, claudeStore = false } = {}) {
      const workspace = daemon.workspace(name);
      const record = path.join(root, `record-${name}.jsonl`);
      const pluginArgs = ['dev', 'fake-plugin', '--product', product, '--workspace', workspace, '--behaviour', behaviour, '--record', record, ...extra];
      if (claudeStore) {
        const store = path.join(env.HOME, '.claude/projects', workspace.replace(/\//g, '-'));
        fs.mkdirSync(store, { recursive: true });
        pluginArgs.push('--claude-store', store);
      }
      const before = new Set((await daemon.sessions()).map((s) => s.session_id));
      const pluginLog = path.join(root, `plugin-${name}.log`);
      const fd = fs.openSync(pluginLog, 'a');
      const proc = track(spawn(KORU, pluginArgs, { env, stdio: ['ignore', fd, fd] }));
      fs.closeSync(fd);
      const plugin = {
        workspace,
        record,
        proc,
        log: () => fs.readFileSync(pluginLog, 'utf8'),
        drivesReceived: () =>
          fs.existsSync(record)
            ? fs.readFileSync(record, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
            : [],
        stop: () => stopChild(proc),
      };
      plugins.push(plugin);
      if (wait) {
        const session = await waitFor(
          async () => {
            if (proc.exitCode !== null) throw new Error(`fake plugin exited (${proc.exitCode}): ${plugin.log()}`);
            return (await daemon.sessions()).find((s) => !before.has(s.session_id) && s.window?.workspace_folders?.includes(workspace));
          },
          10_000,
          `the fake plugin for ${name} to connect`,
        );
        plugin.sessionId = session.session_id;
      }
      return plugin;
    },
    /** The one-time login URL `koru dashboard --no-open` prints. */
    dashboardUrl() {
      const r = daemon.koru(['dashboard', '--no-open']);
      const url = `${r.stdout}\n${r.stderr}`.match(/http:\/\/\S+\/login\?code=\S+/)?.[0];
      if (!url) throw new Error(`koru dashboard printed no login URL (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
      return url;
    },
    async stop() {
      for (const p of plugins) await p.stop();
      await stopChild(child);
      if (!process.env.KORU_KEEP_SANDBOX) fs.rmSync(root, { recursive: true, force: true });
    },
  };
  return daemon;
}

/** Runs `body(daemon)` with a fresh daemon, stopping it (and its plugins) whatever happens; a failure carries the daemon log's tail. */
export async function withDaemon(opts, body) {
  const daemon = await startDaemon(opts);
  try {
    await body(daemon);
  } catch (e) {
    e.message += `\n--- daemon log (tail) ---\n${daemon.log().split('\n').slice(-40).join('\n')}`;
    throw e;
  } finally {
    await daemon.stop();
  }
}

let browserPromise = null;
/** One Chromium for the whole test file. */
export function browser() {
  browserPromise ??= chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  return browserPromise;
}

export async function closeBrowser() {
  if (browserPromise) await (await browserPromise).close();
  browserPromise = null;
}

/**
 * A fresh browser context logged in to the daemon's dashboard, on the dashboard page.
 * Returns {context, page, problems} where problems collects page errors, console errors and CSP violations.
 */
export async function openDashboard(daemon, { width = 1280, height = 800, colorScheme = 'light' } = {}) {
  const b = await browser();
  const context = await b.newContext({ viewport: { width, height }, colorScheme, reducedMotion: 'reduce' });
  if (process.env.KORU_DASHBOARD_ASSETS) await serveAssetsFrom(context, process.env.KORU_DASHBOARD_ASSETS);
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[39]|status of 50[03]/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  const response = await page.goto(daemon.dashboardUrl());
  if (!response?.ok()) throw new Error(`the login URL led to HTTP ${response?.status()}`);
  if (new URL(page.url()).pathname !== '/') throw new Error(`login did not land on / but ${page.url()}`);
  // The redirect after /login is not routed: load the page again for the override's files.
  if (process.env.KORU_DASHBOARD_ASSETS) {
    await page.goto(page.url());
    problems.length = 0;
  }
  return { context, page, problems };
}

/**
 * Development aid: answer `/` and `/assets/*` with the files in `dir` (the daemon's answer's
 * status and headers kept, so its auth and CSP still apply) instead of the ones embedded in
 * the binary, to try page changes without rebuilding koru. Off unless KORU_DASHBOARD_ASSETS is set.
 */
async function serveAssetsFrom(context, dir) {
  await context.route(/\/(assets\/[a-z.]+)?(\?.*)?$/, async (route) => {
    const url = new URL(route.request().url());
    const name = url.pathname === '/' ? 'index.html' : url.pathname.replace('/assets/', '');
    const response = await route.fetch();
    const file = path.join(dir, name);
    if (!response.ok() || !fs.existsSync(file)) return route.fulfill({ response });
    return route.fulfill({ response, body: fs.readFileSync(file) });
  });
}

/** Saves a screenshot under tests/browser/artifacts/ and returns its path. */
export async function shot(page, name, opts = {}) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, ...opts });
  return file;
}

/** One raw HTTP/1.1 request to 127.0.0.1:port with exactly these headers (Host, Origin, Cookie included); returns {status, body}. */
export function rawRequest(port, { method = 'GET', path: reqPath, headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: reqPath, headers: { Host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, body: text, headers: res.headers }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** A tiny HTTP server on another port (another origin) serving `html` at /; returns {origin, close()}. */
export async function foreignSite(html) {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(html);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => {
      server.close(r);
      server.closeAllConnections();
    }) };
}

/**
 * Opens the self-verifying page `file` (a journal export or an audit ledger's) in a fresh offline browser context and waits for the verdict.
 * Returns {page, context, verdict: {state, badSeq, entries, head, text}, problems, requests}.
 */
export async function openExport(file) {
  const context = await (await browser()).newContext({ offline: true, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  const requests = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(pathToFileURL(file).href);
  const verdict = await readVerdict(page);
  return { page, context, verdict, problems, requests };
}

export async function readVerdict(page) {
  await page.waitForFunction(() => document.getElementById('verdict').dataset.verdict !== 'checking', null, { timeout: 10_000 });
  return page.$eval('#verdict', (v) => ({ state: v.dataset.verdict, badSeq: v.dataset.badSeq ?? null, entries: v.dataset.entries, head: v.dataset.head, text: v.textContent }));
}

/** A copy of the self-verifying page (journal export or audit ledger) at `file` with one digit of entry `seq`'s at_ms changed; returns its path. */
export function withOneDigitChanged(file, seq) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const index = lines.findIndex((l) => l.startsWith('"{\\"at_ms\\":') && new RegExp(`\\\\"seq\\\\":${seq}[,}]`).test(l));
  assert.ok(index > 0, `entry ${seq} in the data block`);
  const line = lines[index];
  const at = line.indexOf('\\"at_ms\\":') + '\\"at_ms\\":'.length + 9; // a digit in the middle of the number
  assert.match(line[at], /[0-9]/);
  lines[index] = line.slice(0, at) + String((Number(line[at]) + 1) % 10) + line.slice(at + 1);
  const copy = file.replace(/\.html$/, `-seq${seq}-changed.html`);
  fs.writeFileSync(copy, lines.join('\n'));
  assert.equal(fs.readFileSync(copy).length, fs.readFileSync(file).length, 'one byte changed, none added');
  return copy;
}

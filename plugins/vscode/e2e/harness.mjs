// Helpers for Koru's VS Code e2e tests: run code-server (a real VS Code build) and drive its workbench in headless Chromium.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const E2E_DIR = path.dirname(fileURLToPath(import.meta.url));
export const CODE_SERVER_ENTRY =
  process.env.KORU_E2E_CODE_SERVER || path.join(E2E_DIR, 'node_modules/code-server/out/node/entry.js');
export const CHROMIUM = process.env.KORU_E2E_CHROMIUM || '/usr/bin/chromium';
export const VSCE = path.join(E2E_DIR, 'node_modules/@vscode/vsce/vsce');

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

// The chat view's input editor (VS Code 1.139).
export const CHAT_INPUT_SELECTOR = '.interactive-input-part .monaco-editor';

// Settings every e2e profile gets; a test's userSettings are merged over them.
export const DEFAULT_USER_SETTINGS = {
  'security.workspace.trust.enabled': false,
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoUpdate': false,
  'extensions.autoCheckUpdates': false,
  'extensions.ignoreRecommendations': true,
};

function requireNode24() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major !== 24) {
    throw new Error(
      `harness: code-server 4.139 needs Node 24, this is Node ${process.versions.node}; ` +
        'run plugins/vscode/e2e/setup.sh and source the env.sh it writes',
    );
  }
  if (!fs.existsSync(CODE_SERVER_ENTRY)) {
    throw new Error(`harness: code-server not installed at ${CODE_SERVER_ENTRY}; run plugins/vscode/e2e/setup.sh`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `predicate` (sync or async) until it returns a truthy value, which is returned; throws naming `what` on timeout. */
export async function waitFor(predicate, timeoutMs, what, intervalMs = 100) {
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

/** Reads a JSON-lines file (e.g. the recorder's KORU_E2E_RECORD_FILE); [] if it does not exist yet. */
export function readJsonLines(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT') return [];
    throw e;
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}

/** Packages an extension folder into a .vsix with @vscode/vsce; returns the .vsix path. */
export function packageVsix(extensionDir, outPath) {
  fs.mkdirSync(path.dirname(outPath), { recursive: true });
  const r = spawnSync(process.execPath, [VSCE, 'package', '--no-dependencies', '-o', outPath], {
    cwd: extensionDir,
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    throw new Error(`vsce package failed in ${extensionDir} (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return outPath;
}

const liveGroups = new Set();
process.on('exit', () => {
  for (const pid of liveGroups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }
});

function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts code-server on a free loopback port with an isolated profile, HOME and extensions dir.
 * vsixPaths are installed first (`--install-extension`). env is added to code-server's environment,
 * which its extension host inherits. extensionsDir reuses another instance's installed extensions
 * (with a fresh profile), so a test that needs many fresh windows installs them once.
 * Returns {url, port, pid, workDir, logFile, userDir, extDir, home, stop()}.
 */
export async function startCodeServer({
  folder,
  vsixPaths = [],
  env = {},
  userSettings = {},
  extraArgs = [],
  workDir,
  extensionsDir,
  startTimeoutMs = 60_000,
} = {}) {
  requireNode24();
  if (!folder || !fs.existsSync(folder)) throw new Error(`startCodeServer: folder ${folder} does not exist`);
  workDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'koru-e2e-cs-'));
  const userDir = path.join(workDir, 'user');
  const extDir = extensionsDir ?? path.join(workDir, 'extensions');
  const home = path.join(workDir, 'home');
  for (const d of [path.join(userDir, 'User'), extDir, home]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(
    path.join(userDir, 'User', 'settings.json'),
    JSON.stringify({ ...DEFAULT_USER_SETTINGS, ...userSettings }, null, 2),
  );
  const childEnv = { ...process.env, HOME: home, ...env };
  const common = ['--extensions-dir', extDir, '--user-data-dir', userDir];

  if (vsixPaths.length > 0) {
    for (const v of vsixPaths) if (!fs.existsSync(v)) throw new Error(`startCodeServer: no such vsix ${v}`);
    const args = [CODE_SERVER_ENTRY, ...common, ...vsixPaths.flatMap((v) => ['--install-extension', v])];
    const r = spawnSync(process.execPath, args, { env: childEnv, encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0) {
      throw new Error(`code-server --install-extension failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
    }
  }

  const port = await freePort();
  const logFile = path.join(workDir, 'code-server.log');
  const log = fs.openSync(logFile, 'a');
  const child = spawn(
    process.execPath,
    [
      CODE_SERVER_ENTRY,
      '--bind-addr', `127.0.0.1:${port}`,
      '--auth', 'none',
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      ...common,
      ...extraArgs,
      folder,
    ],
    { env: childEnv, detached: true, stdio: ['ignore', log, log] },
  );
  fs.closeSync(log);
  const pid = child.pid;
  liveGroups.add(pid);
  let exited = null;
  child.on('exit', (code, signal) => {
    exited = { code, signal };
  });

  const url = `http://127.0.0.1:${port}`;
  async function stop() {
    if (!liveGroups.has(pid)) return;
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {}
    const deadline = Date.now() + 5000;
    while (groupAlive(pid) && Date.now() < deadline) await sleep(100);
    if (groupAlive(pid)) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {}
    }
    liveGroups.delete(pid);
  }

  try {
    await waitFor(
      async () => {
        if (exited) {
          throw Object.assign(new Error(`code-server exited early (${JSON.stringify(exited)}); see ${logFile}`), {
            fatal: true,
          });
        }
        const res = await fetch(`${url}/healthz`).catch(() => null);
        return res?.ok;
      },
      startTimeoutMs,
      `code-server /healthz on ${url} (log: ${logFile})`,
      200,
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return { url, port, pid, workDir, logFile, userDir, extDir, home, stop };
}

/**
 * Opens the workbench for `folder` in headless Chromium (playwright-core, system Chromium) with
 * clipboard permissions granted for code-server's origin (unless grantClipboard is false); waits
 * until the workbench is shown. Returns {page, context, loadStartMs, close()}.
 */
export async function openWorkbench(
  url,
  folder,
  { timeoutMs = 60_000, viewport = { width: 1400, height: 900 }, grantClipboard = true } = {},
) {
  const { chromium } = await import('playwright-core');
  if (!fs.existsSync(CHROMIUM)) throw new Error(`openWorkbench: Chromium not found at ${CHROMIUM}; run setup.sh`);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'koru-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport,
  });
  const origin = new URL(url).origin;
  if (grantClipboard) await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const page = context.pages()[0] ?? (await context.newPage());
  const loadStartMs = Date.now();
  let closed = false;
  async function close() {
    if (closed) return;
    closed = true;
    await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
  try {
    await page.goto(`${origin}/?folder=${encodeURIComponent(folder)}`, { timeout: timeoutMs });
    await page.locator('.monaco-workbench').first().waitFor({ timeout: timeoutMs });
  } catch (e) {
    await close();
    throw e;
  }
  return { page, context, loadStartMs, close };
}

// Benchmark: how long a drive stage takes to reach the dashboard's DOM (daemon `at_ms` → MutationObserver in the page), and the daemon's RSS with the dashboard open and 100 fake-plugin sessions.
//
// Usage: KORU_BIN=target/release/koru node tests/browser/bench-latency.mjs [--drives 60] [--sessions 100]
// (tests/browser/run.sh's set-up first: npm ci here, system Chromium). Prints Markdown; writes artifacts/bench.json.
import fs from 'node:fs';
import path from 'node:path';
import { ARTIFACTS, KORU, closeBrowser, openDashboard, sleep, startDaemon, waitFor } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const DRIVES = arg('drives', 60);
const SESSIONS = arg('sessions', 100);

const rssKb = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m)[1]);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const stats = (xs) => ({ n: xs.length, p50: pct(xs, 50), p95: pct(xs, 95), max: Math.max(...xs), min: Math.min(...xs) });
const ms = (v) => `${v.toFixed(1)} ms`;

const daemon = await startDaemon({ args: ['--heartbeat-ms', '60000'] });
const out = { koru: KORU, drives: DRIVES, sessions: SESSIONS };
try {
  out.rss_idle_kb = rssKb(daemon.pid);
  const plugin = await daemon.plugin({ name: 'bench-proj' });
  const { page, context } = await openDashboard(daemon);
  await page.locator(`#session-${plugin.sessionId}`).waitFor();
  await waitFor(async () => (await page.textContent('#stream')).includes('live'), 10_000, 'the live stream');
  await page.locator('.verdict').waitFor({ timeout: 30_000 });
  out.rss_dashboard_kb = rssKb(daemon.pid);

  // In the page: the wall-clock time each stage element first appears in the DOM.
  await page.evaluate(() => {
    window.__marks = [];
    const seen = new Set();
    new MutationObserver(() => {
      const now = performance.timeOrigin + performance.now();
      for (const el of document.querySelectorAll('article.drive .timeline [data-stage]')) {
        const key = `${el.closest('article').dataset.driveId}:${el.dataset.stage}:${el.dataset.at}`;
        if (seen.has(key)) continue;
        seen.add(key);
        window.__marks.push({ drive: el.closest('article').dataset.driveId, stage: el.dataset.stage, at: Number(el.dataset.at), seen: now });
      }
    }).observe(document.getElementById('drives-body'), { childList: true, subtree: true });
  });
  for (let i = 0; i < DRIVES; i++) {
    const { status, body } = await daemon.api('POST', '/drives', { target: { session: plugin.sessionId }, prompt: `bench drive ${i}: ${'x'.repeat(150)}` });
    if (status !== 201) throw new Error(`POST /drives: ${status} ${JSON.stringify(body)}`);
    const id = body.drive.drive_id;
    await waitFor(() => page.evaluate((id) => window.__marks.some((m) => m.drive === id && m.stage === 'done'), id), 10_000, `drive ${id} done in the page`, 5);
    await sleep(20);
  }
  const marks = await page.evaluate(() => window.__marks);
  // `queued` also arrives in the POST answer; the later stages come only over the event stream.
  const live = marks.filter((m) => m.stage !== 'queued');
  const all = live.map((m) => m.seen - m.at);
  const done = live.filter((m) => m.stage === 'done').map((m) => m.seen - m.at);
  out.latency_all_stages_ms = stats(all);
  out.latency_done_ms = stats(done);
  out.rss_after_drives_kb = rssKb(daemon.pid);

  // 100 sessions with the dashboard open.
  const t0 = Date.now();
  const more = [];
  for (let i = 1; i < SESSIONS; i++) more.push(daemon.plugin({ name: `bench-${i}`, wait: false }));
  await Promise.all(more);
  await waitFor(async () => (await daemon.sessions()).length >= SESSIONS, 120_000, `${SESSIONS} sessions`, 200);
  await waitFor(async () => (await page.locator('#sessions-body article.session').count()) >= SESSIONS, 30_000, `${SESSIONS} session cards`, 100);
  out.sessions_on_page_after_ms = Date.now() - t0;
  await sleep(2000);
  out.rss_sessions_dashboard_kb = rssKb(daemon.pid);
  out.page_js_heap_mb = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize / 1048576 : null));
  await context.close();
} finally {
  await closeBrowser();
  await daemon.stop();
}

fs.mkdirSync(ARTIFACTS, { recursive: true });
fs.writeFileSync(path.join(ARTIFACTS, 'bench.json'), `${JSON.stringify(out, null, 2)}\n`);
const a = out.latency_all_stages_ms;
const d = out.latency_done_ms;
console.log(`| measure | value |
|---|---|
| stage → DOM, every stage after \`queued\` (n=${a.n}) | p50 ${ms(a.p50)}, p95 ${ms(a.p95)}, max ${ms(a.max)} |
| stage → DOM, \`done\` only (n=${d.n}) | p50 ${ms(d.p50)}, p95 ${ms(d.p95)}, max ${ms(d.max)} |
| daemon RSS, idle, no client | ${(out.rss_idle_kb / 1024).toFixed(1)} MB |
| daemon RSS, 1 session, dashboard open | ${(out.rss_dashboard_kb / 1024).toFixed(1)} MB |
| daemon RSS, after ${DRIVES} drives | ${(out.rss_after_drives_kb / 1024).toFixed(1)} MB |
| daemon RSS, ${SESSIONS} sessions, dashboard open | ${(out.rss_sessions_dashboard_kb / 1024).toFixed(1)} MB |
| ${SESSIONS} sessions connecting → all on the page | ${out.sessions_on_page_after_ms} ms |
| page JS heap with ${SESSIONS} sessions | ${out.page_js_heap_mb?.toFixed(1) ?? 'n/a'} MB |`);

// The dashboard in a real browser against the real daemon: live sessions, sends and their timelines, blockers with hints and retries, Origin checks, narrow and dark layouts; saves screenshots to artifacts/.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ARTIFACTS, ROOT, closeBrowser, freePort, rawRequest, foreignSite, openDashboard, shot, sleep, waitFor, withDaemon } from './harness.mjs';

after(closeBrowser);

function noProblems(problems) {
  assert.deepEqual(problems, [], 'the page logged errors (CSP violations, exceptions)');
}

/** Fills the send box for `plugin` and clicks Send. */
async function sendFromPage(page, plugin, prompt, { submit = true } = {}) {
  await page.selectOption('#send-session', plugin.sessionId);
  await page.fill('#send-prompt', prompt);
  if (!submit) await page.uncheck('#send-submit');
  await page.click('#send-button');
}

/** Waits for the newest drive card whose excerpt is `excerpt`; returns its drive id. */
async function driveIdFor(page, excerpt) {
  const card = page.locator('article.drive', { has: page.locator('h3.excerpt', { hasText: excerpt }) }).first();
  await card.waitFor({ timeout: 10_000 });
  return card.getAttribute('data-drive-id');
}

test('the page is served with the strict CSP and no inline script or style', async () => {
  await withDaemon({}, async (daemon) => {
    const res = await fetch(`${daemon.base}/`);
    const csp = res.headers.get('content-security-policy') || '';
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /style-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, 'inline <script>');
    assert.doesNotMatch(html, /<style|style=/i, 'inline style');
    const js = fs.readFileSync(path.join(ROOT, 'daemon/assets/dashboard/app.js'), 'utf8');
    assert.doesNotMatch(js, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\.style\b|cssText/, 'app.js must build DOM safely and set no inline style');
  });
});

test('a fake plugin connects and its session appears without a reload; reconnect and focus answer', async () => {
  await withDaemon({}, async (daemon) => {
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator('#sessions-body', { hasText: 'No IDE is connected' }).waitFor();
    await waitFor(async () => (await page.textContent('#stream')).includes('live'), 10_000, 'the live stream');
    await page.evaluate(() => {
      window.__sameDocument = true;
    });
    const plugin = await daemon.plugin({ name: 'alpha-proj', product: 'cursor' });
    const card = page.locator(`#session-${plugin.sessionId}`);
    await card.waitFor({ timeout: 5000 });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was not reloaded');
    const text = await card.textContent();
    assert.match(text, /alpha-proj/);
    assert.match(text, /cursor/);
    assert.match(text, new RegExp(plugin.workspace.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.match(await page.textContent('#counts'), /1\s*sessions/);
    assert.equal(await page.locator('#send-session option').count(), 1);

    // Focus window has no display here: the refusal is shown, not hidden.
    await card.getByRole('button', { name: 'Focus window' }).click();
    await page.locator('.toast', { hasText: 'focus_window:' }).first().waitFor({ timeout: 10_000 });

    // Reconnect: the daemon says bye to the plugin, which connects again as a new session;
    // the page follows both live.
    await card.getByRole('button', { name: 'Reconnect plugin' }).click();
    await page.locator('.toast', { hasText: 'reconnect_plugin:' }).first().waitFor({ timeout: 10_000 });
    await card.waitFor({ state: 'detached', timeout: 10_000 });
    await page.locator('article.session', { hasText: 'alpha-proj' }).waitFor({ timeout: 10_000 });
    assert.notEqual(await page.locator('article.session').first().getAttribute('data-session-id'), plugin.sessionId);
    noProblems(problems);
    await context.close();
  });
});

test('a send from the page reaches the plugin and its timeline fills live', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'beta-proj', behaviour: 'slow', extra: ['--delay-ms', '300'] });
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#session-${plugin.sessionId}`).waitFor();
    // Record every state the page shows for drive cards, as it shows them.
    await page.evaluate(() => {
      window.__seen = [];
      new MutationObserver(() => {
        for (const el of document.querySelectorAll('article.drive')) {
          const key = `${el.dataset.driveId}:${el.dataset.state}`;
          if (!window.__seen.includes(key)) window.__seen.push(key);
        }
      }).observe(document.getElementById('drives-body'), { childList: true, subtree: true });
    });
    const prompt = `Explain the stage timeline ✓ ${Date.now()}`;
    await sendFromPage(page, plugin, prompt);
    const id = await driveIdFor(page, 'Explain the stage timeline');
    const card = page.locator(`#drive-${id}`);
    await card.locator('[data-stage=done]').waitFor({ timeout: 15_000 });
    const got = await waitFor(() => plugin.drivesReceived().find((d) => d.drive_id === id), 5000, 'the plugin to record the drive');
    assert.equal(got.prompt, prompt);
    assert.equal(got.submit, true);
    const stages = await card.locator('.timeline [data-stage]').evaluateAll((els) => els.map((e) => e.dataset.stage));
    // The route the planner chose acks its own stages (native send: received, submitted; plugin drive: received, focused, pasted, submitted).
    for (const s of ['queued', 'sent', 'received', 'submitted', 'done']) assert.ok(stages.includes(s), `stage ${s} in ${stages}`);
    const seen = (await page.evaluate(() => window.__seen)).filter((k) => k.startsWith(`${id}:`)).map((k) => k.split(':')[1]);
    assert.ok(seen.length >= 4, `the card went through its stages live (saw ${seen.join(' → ')})`);
    assert.ok(seen.includes('received') && seen.indexOf('received') < seen.indexOf('done'), `intermediate stages shown live: ${seen}`);
    assert.equal(await page.locator('#send-prompt').inputValue(), '', 'the prompt box is cleared after a send');

    // Leave it unsubmitted: the option reaches the plugin.
    await sendFromPage(page, plugin, 'Only paste this one', { submit: false });
    const id2 = await driveIdFor(page, 'Only paste this one');
    await page.locator(`#drive-${id2}`).locator('[data-stage=done]').waitFor({ timeout: 15_000 });
    assert.equal(plugin.drivesReceived().find((d) => d.drive_id === id2)?.submit, false);

    // An empty prompt is refused by the page; a refused drive shows the daemon's message.
    await page.check('#send-submit');
    await page.fill('#send-prompt', '   ');
    await page.click('#send-button');
    assert.match(await page.locator('#send-error').textContent(), /prompt/i);
    await plugin.stop();
    await page.locator(`#session-${plugin.sessionId}`).waitFor({ state: 'detached', timeout: 10_000 });
    assert.ok(await page.locator('#send-button').isDisabled(), 'no session, no send');
    noProblems(problems);
    await context.close();
  });
});

test('a window whose chat is not ready shows why, its drive waits visibly, then goes with its proof', async () => {
  await withDaemon({}, async (daemon) => {
    // The fake plugin says its chat is not ready, then (as a chat whose model got selected) ready after 10 s:
    // long enough for a loaded machine to open the page and send while it still waits.
    const plugin = await daemon.plugin({ name: 'ready-proj', extra: ['--chat-not-ready', 'no language model is available to the chat', '--ready-after-ms', '10000'] });
    const { page, context, problems } = await openDashboard(daemon);
    const card = page.locator(`#session-${plugin.sessionId}`);
    await card.locator('.chat-not-ready', { hasText: 'not ready: no language model is available to the chat' }).waitFor({ timeout: 5000 });
    await sendFromPage(page, plugin, 'Wait for the model');
    const id = await driveIdFor(page, 'Wait for the model');
    const drive = page.locator(`#drive-${id}`);
    await drive.locator('.waiting', { hasText: 'chat_not_ready' }).waitFor({ timeout: 5000 });
    assert.equal(plugin.drivesReceived().length, 0, 'nothing is sent while the chat is not ready');
    await card.locator('.chat-ready').waitFor({ timeout: 20_000 });
    await drive.locator('[data-stage=done]').waitFor({ timeout: 10_000 });
    assert.equal(await drive.locator('.waiting').count(), 0, 'the wait is gone once sent');
    // The fake plugin has no chat to ask: its submit proves only that the command returned, and the card says so.
    const evidence = drive.locator('.evidence');
    assert.match(await evidence.textContent(), /proof: command returned/);
    assert.match(await evidence.getAttribute('title'), /only the IDE command returned/);
    noProblems(problems);
    await context.close();
  });
});

test('a drive that fails with a blocker shows the registry hint, and Retry makes a new drive linked by retry_of', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'gamma-proj', product: 'vscode', behaviour: 'nack' });
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#session-${plugin.sessionId}`).waitFor();
    await sendFromPage(page, plugin, 'This one will be refused');
    const id = await driveIdFor(page, 'This one will be refused');
    const card = page.locator(`#drive-${id}`);
    await card.locator('.badge.state-failed').waitFor({ timeout: 20_000 });
    const { body } = await daemon.api('GET', `/drives/${id}`);
    const drive = body.drive;
    assert.equal(drive.state, 'failed');
    const withHint = drive.attempts.filter((a) => a.hint);
    assert.ok(withHint.length > 0, `the daemon gave a registry hint: ${JSON.stringify(drive.attempts)}`);
    const cardText = await card.textContent();
    for (const a of withHint) assert.ok(cardText.includes(a.hint), `hint "${a.hint}" shown`);
    assert.ok(cardText.includes('capability_missing'), 'the blocker code is shown');
    await page.evaluate(() => {
      for (const t of document.querySelectorAll('.toast')) t.remove();
      window.scrollTo(0, 0);
    });
    await shot(page, 'failed-drive-with-hint');
    await card.screenshot({ path: path.join(ARTIFACTS, 'failed-drive-card.png') });

    await card.getByRole('button', { name: "Retry (planner's choice)" }).click();
    const retry = page.locator('article.drive', { has: page.locator(`.retry-of a[href="#drive-${id}"]`) });
    await retry.first().waitFor({ timeout: 10_000 });
    const retryId = await retry.first().getAttribute('data-drive-id');
    assert.notEqual(retryId, id);
    const again = await daemon.api('GET', `/drives/${retryId}`);
    assert.equal(again.body.drive.retry_of, id);
    await page.locator(`#drive-${id} .action-result`).waitFor();
    assert.match(await page.locator(`#drive-${id}`).textContent(), new RegExp(`retried as\\s*${retryId}`));
    assert.ok(plugin.drivesReceived().length >= 2, 'the retry reached the plugin');

    // A retry on a given route.
    await page.locator(`#drive-${retryId} .badge.state-failed`).waitFor({ timeout: 20_000 });
    await page.locator(`#drive-${retryId}`).getByRole('button', { name: 'Retry via plugin_drive' }).click();
    await page.locator('article.drive', { has: page.locator(`.retry-of a[href="#drive-${retryId}"]`) }).first().waitFor({ timeout: 10_000 });
    noProblems(problems);
    await context.close();
  });
});

test('a retry the daemon refuses (the prompt may already be in the chat) shows its message', async () => {
  await withDaemon({ args: ['--step-timeout-ms', '1000', '--drive-timeout-ms', '3000'] }, async (daemon) => {
    // Cursor's paste route: the plugin pastes, and nothing here can press Return (no
    // display; the fake plugin's window has no focus either), so the drive fails at
    // pasted. This Cursor lacks composer.createNew, so no new chat stands in for the key.
    const plugin = await daemon.plugin({ name: 'delta-proj', product: 'cursor', extra: ['--without-command', 'composer.createNew'] });
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#session-${plugin.sessionId}`).waitFor();
    await sendFromPage(page, plugin, 'Pasted then silence');
    const id = await driveIdFor(page, 'Pasted then silence');
    const card = page.locator(`#drive-${id}`);
    await card.locator('[data-stage=pasted]').waitFor({ timeout: 10_000 });
    await waitFor(async () => /failed|timed_out/.test(await card.getAttribute('data-state')), 15_000, 'the drive to end');
    await card.getByRole('button', { name: "Retry (planner's choice)" }).click();
    const result = page.locator(`#drive-${id} .action-result.bad`);
    await result.waitFor({ timeout: 10_000 });
    assert.match(await result.textContent(), /not_retryable|already/i);
    assert.equal(plugin.drivesReceived().length, 1, 'the refused retry sent nothing');
    noProblems(problems);
    await context.close();
  });
});

test("a Cursor drive where nothing can press Return goes to a new chat, and its card says so", async () => {
  await withDaemon({}, async (daemon) => {
    // No display here: no OS injector could press Return after a paste, so Cursor's own
    // new-chat command sends the prompt (policy new_chat_when_key_unpressable, on by default).
    const plugin = await daemon.plugin({ name: 'zeta-proj', product: 'cursor' });
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#session-${plugin.sessionId}`).waitFor();
    await sendFromPage(page, plugin, 'Into a new chat');
    const id = await driveIdFor(page, 'Into a new chat');
    const card = page.locator(`#drive-${id}`);
    await card.locator('.badge.state-done').waitFor({ timeout: 20_000 });
    const note = card.locator('li.attempt[data-outcome=succeeded] .note');
    await note.waitFor({ timeout: 10_000 });
    assert.match(await note.textContent(), /^opened a new chat: nothing here can press Return in the current one \(/);
    const received = plugin.drivesReceived();
    assert.equal(received.length, 1);
    assert.deepEqual(received[0].steps, ['composer.createNew']);
    noProblems(problems);
    await context.close();
  });
});

test('a request from another Origin is refused, with or without the cookie', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'epsilon-proj' });
    const { page, context } = await openDashboard(daemon);
    const cookies = await context.cookies(daemon.base);
    const session = cookies.find((c) => c.name === 'koru_session');
    assert.ok(session, `the login set koru_session: ${JSON.stringify(cookies)}`);
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    const cookie = `koru_session=${session.value}`;
    const body = JSON.stringify({ target: { session: plugin.sessionId }, prompt: 'from evil' });
    const post = (headers) => rawRequest(daemon.port, { method: 'POST', path: '/api/v1/drives', headers: { 'Content-Type': 'application/json', Cookie: cookie, ...headers }, body });
    const host = `127.0.0.1:${daemon.port}`;

    // The cookie with this server's Origin works (what the page does)…
    assert.equal((await rawRequest(daemon.port, { path: '/api/v1/sessions', headers: { Cookie: cookie, Origin: `http://${host}` } })).status, 200);
    // …a foreign Origin does not, even with the cookie; nor a foreign Host; nor a cookie POST without Origin.
    assert.equal((await post({ Origin: 'http://evil.example' })).status, 403);
    assert.equal((await rawRequest(daemon.port, { path: '/api/v1/sessions', headers: { Cookie: cookie, Origin: 'http://evil.example' } })).status, 403);
    assert.equal((await post({ Origin: `http://127.0.0.1:${daemon.port + 1}` })).status, 403);
    assert.equal((await post({ Host: 'evil.example', Origin: 'http://evil.example' })).status, 403);
    assert.equal((await rawRequest(daemon.port, { path: '/api/v1/sessions', headers: { Cookie: cookie, Host: `evil.example:${daemon.port}` } })).status, 403);
    assert.ok([401, 403].includes((await post({})).status), 'a cookie POST without Origin is refused');
    assert.equal((await daemon.drives()).length, 0, 'none of these made a drive');

    // A real page on another origin (same site: 127.0.0.1, another port) tries too; the
    // browser sends the SameSite=Strict cookie to the same site, so the daemon's Origin
    // check is what stops it.
    const evil = await foreignSite('<!doctype html><title>evil</title><p>evil</p>');
    try {
      const evilPage = await context.newPage();
      await evilPage.goto(evil.origin);
      const outcome = await evilPage.evaluate(
        async ({ base, body }) => {
          const out = {};
          try {
            const r = await fetch(`${base}/api/v1/drives`, { method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json' }, body });
            out.json = r.status;
          } catch (e) {
            out.json = `blocked: ${e.message}`;
          }
          try {
            const r = await fetch(`${base}/api/v1/drives`, { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body });
            out.simple = r.type;
          } catch (e) {
            out.simple = `blocked: ${e.message}`;
          }
          return out;
        },
        { base: daemon.base, body },
      );
      assert.match(String(outcome.json), /blocked|403/, `JSON POST from another origin: ${outcome.json}`);
      await sleep(500);
      assert.equal((await daemon.drives()).length, 0, 'no drive was made from the other origin');
      assert.equal(plugin.drivesReceived().length, 0);
      await evilPage.close();
    } finally {
      await evil.close();
    }
    assert.ok(page);
    await context.close();
  });
});

test('the page at 400 px width still shows sessions, and it is usable', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'narrow-proj', product: 'vscodium' });
    const { page, context, problems } = await openDashboard(daemon, { width: 400, height: 860 });
    const card = page.locator(`#session-${plugin.sessionId}`);
    await card.waitFor();
    assert.ok(await card.isVisible());
    // Live updates re-render the card; measure the one on the page now.
    const box = await waitFor(() => card.boundingBox(), 5000, "the session card's box");
    assert.ok(box.x >= 0 && box.x + box.width <= 400, `the card fits: ${JSON.stringify(box)}`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 1, `no horizontal scrolling (${overflow} px too wide)`);
    await sendFromPage(page, plugin, 'From a narrow window');
    const id = await driveIdFor(page, 'From a narrow window');
    await page.locator(`#drive-${id} [data-stage=done]`).waitFor({ timeout: 15_000 });
    await page.locator('.verdict').waitFor({ timeout: 20_000 });
    await shot(page, 'narrow-400');
    noProblems(problems);
    await context.close();
  });
});

test('dark mode renders readable colours', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'dark-proj' });
    const { page, context, problems } = await openDashboard(daemon, { colorScheme: 'dark' });
    await page.locator(`#session-${plugin.sessionId}`).waitFor();
    await page.locator('.verdict').waitFor({ timeout: 20_000 });
    const colours = await page.evaluate(() => {
      const lum = (c) => {
        const [r, g, b] = c.match(/\d+(\.\d+)?/g).map(Number).map((v) => v / 255).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const body = getComputedStyle(document.body);
      const panel = getComputedStyle(document.querySelector('.panel'));
      return { bg: lum(body.backgroundColor), fg: lum(body.color), panel: lum(panel.backgroundColor) };
    });
    assert.ok(colours.bg < 0.05 && colours.panel < 0.05, `dark backgrounds: ${JSON.stringify(colours)}`);
    const contrast = (colours.fg + 0.05) / (colours.panel + 0.05);
    assert.ok(contrast >= 7, `text contrast ${contrast.toFixed(1)} ≥ 7`);
    await shot(page, 'dark-overview');
    noProblems(problems);
    await context.close();
  });
});

test('doctor shows interfaces by family with status text, and Re-check / Reload registry run', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'doctor-proj' });
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#session-${plugin.sessionId}`).waitFor();
    await page.locator('.verdict').waitFor({ timeout: 20_000 });
    const { body: report } = await daemon.api('GET', '/doctor');
    assert.equal(await page.locator('.verdict strong').textContent(), report.summary.verdict);
    const families = new Set(report.interfaces.filter((i) => i.status !== 'not_applicable').map((i) => i.family));
    assert.equal(await page.locator('.doctor-table tbody[data-family]').count(), families.size);
    // Status is said in words, not colour alone.
    for (const i of report.interfaces.filter((x) => x.status !== 'not_applicable').slice(0, 10)) {
      const words = { ok: 'ok', degraded: 'degraded', unavailable: 'unavailable' }[i.status];
      assert.match(await page.locator(`tr[data-interface="${i.id}"] .badge`).textContent(), new RegExp(words));
    }
    await page.check('#doctor-na');
    assert.equal(await page.locator('.doctor-table tr[data-interface]').count(), report.interfaces.length);
    await page.uncheck('#doctor-na');
    const unavailable = report.interfaces.find((i) => i.status === 'unavailable' && i.recovery.length);
    if (unavailable) {
      const row = page.locator(`tr[data-interface="${unavailable.id}"]`);
      assert.ok((await row.textContent()).includes(unavailable.recovery[0].does));
      assert.ok((await row.locator('button').count()) >= 1, 'a hint has a button (its action, or Re-check)');
    }
    await page.evaluate(() => document.getElementById('doctor').scrollIntoView());
    await shot(page, 'doctor');

    await page.click('#doctor-recheck');
    await page.locator('.toast', { hasText: 'reprobe:' }).first().waitFor({ timeout: 20_000 });
    await page.click('#registry-reload');
    await page.locator('.toast', { hasText: /reload_registry|Registry reloaded/ }).first().waitFor({ timeout: 10_000 });
    noProblems(problems);
    await context.close();
  });
});

test('overview: several IDEs, drives done and failed, observed chats (screenshots)', async () => {
  await withDaemon({ claudeProjects: true }, async (daemon) => {
    const koru = await daemon.plugin({ name: 'koru', product: 'vscode', claudeStore: true, extra: ['--reply-delay-ms', '100'] });
    const shop = await daemon.plugin({ name: 'webshop', product: 'cursor', behaviour: 'nack' });
    await daemon.plugin({ name: 'ml-notebooks', product: 'jetbrains-pycharm' });
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#session-${shop.sessionId}`).waitFor();
    await sendFromPage(page, koru, 'Add a --json flag to `koru drives` and document it');
    await page.locator('article.drive.drive-done').first().waitFor({ timeout: 15_000 });
    await sendFromPage(page, shop, 'Fix the checkout rounding bug');
    await page.locator('article.drive .badge.state-failed').first().waitFor({ timeout: 20_000 });
    await page.locator('#chats-body table').waitFor({ timeout: 15_000 });
    assert.match(await page.textContent('#chats-body'), /koru/);
    await page.locator('.verdict').waitFor({ timeout: 20_000 });
    await page.evaluate(() => {
      for (const t of document.querySelectorAll('.toast')) t.remove();
      window.scrollTo(0, 0);
    });
    await sleep(300);
    const file = await shot(page, 'overview');
    await shot(page, 'overview-full', { fullPage: true });
    if (process.env.KORU_UPDATE_SCREENSHOT) fs.copyFileSync(file, path.join(ROOT, 'docs/images/dashboard.png'));
    noProblems(problems);
    await context.close();
  });
});

test('the drive list pages back through the journal, and the journal is named and verified from the page', async () => {
  await withDaemon({}, async (daemon) => {
    const plugin = await daemon.plugin({ name: 'history-proj', product: 'vscode' });
    const ids = [];
    for (let i = 0; i < 105; i++) {
      const { status, body } = await daemon.api('POST', '/drives', { target: { session: plugin.sessionId }, prompt: `history drive ${i}` });
      assert.equal(status, 201, JSON.stringify(body));
      ids.push(body.drive.drive_id);
    }
    await waitFor(async () => (await daemon.api('GET', `/drives/${ids.at(-1)}`)).body.drive.state === 'done', 30_000, 'the last drive done');
    const { page, context, problems } = await openDashboard(daemon);
    await page.locator(`#drive-${ids.at(-1)}`).waitFor();
    assert.equal(await page.locator('article.drive').count(), 100, 'the newest 100 first');
    assert.equal(await page.locator(`#drive-${ids[0]}`).count(), 0);
    const older = page.getByRole('button', { name: 'Load older drives' });
    await older.click();
    await page.locator(`#drive-${ids[0]}`).waitFor();
    assert.equal(await page.locator('article.drive').count(), 105);
    const lastThree = await page.$$eval('article.drive h3.excerpt', (els) => els.slice(-3).map((e) => e.textContent));
    assert.deepEqual(lastThree, ['history drive 2', 'history drive 1', 'history drive 0'], 'older drives go at the end, newest first');
    await page.waitForFunction(() => document.getElementById('drives-older').hidden);

    const status = (await daemon.api('GET', '/status')).body;
    const note = await page.locator('#journal-note').textContent();
    assert.ok(note.includes(status.journal.dir), note);
    assert.ok(note.includes('koru verify'), note);
    await page.getByRole('button', { name: 'Verify journal' }).click();
    await page.locator('#journal-result', { hasText: 'journal intact' }).waitFor({ timeout: 10_000 });
    assert.match(await page.locator('#journal-result').textContent(), /^✓ journal intact — \d+ entries, head sha256:[0-9a-f]{64}$/);
    await page.locator('#journal-note').scrollIntoViewIfNeeded();
    await shot(page, 'journal-note');
    noProblems(problems);
    await context.close();
  });
});

test("a chat's turns are read back from its store: prompt, the agent's step, the whole reply", async () => {
  await withDaemon({ claudeProjects: true }, async (daemon) => {
    const replyFile = path.join(daemon.root, 'reply.txt');
    const reply = ['All 12 tests pass now ✓', '', '<script>alert(1)</script> stays text', ...Array.from({ length: 80 }, (_, i) => `line ${i} — 日本語 🦀`)].join('\n');
    fs.writeFileSync(replyFile, reply);
    const agent = await daemon.plugin({
      name: 'agent',
      product: 'vscode',
      claudeStore: true,
      extra: ['--reply-delay-ms', '50', '--reply-file', replyFile, '--tool-call', 'exit 3'],
    });
    const { page, context, problems } = await openDashboard(daemon);
    await sendFromPage(page, agent, 'Run the tests and fix what fails');
    await page.locator('article.drive.drive-done').first().waitFor({ timeout: 15_000 });
    const show = page.getByRole('button', { name: 'Show turns' }).first();
    await show.waitFor({ timeout: 15_000 });
    await show.click();
    const turn = page.locator('#chat-view article.turn').first();
    await turn.waitFor({ timeout: 10_000 });
    // The reply may still be in progress when the view first opens; it is read again as the chat changes.
    await waitFor(async () => (await turn.locator('pre.reply').textContent()) === reply, 15_000, 'the whole reply in the chat view');
    assert.equal(await turn.locator('blockquote.prompt').textContent(), 'Run the tests and fix what fails');
    assert.equal(await turn.locator('ol.steps li').first().textContent(), 'Bash exit 3 → exit 3');
    assert.match(await turn.locator('ol.steps li').first().getAttribute('class'), /step-error/);
    assert.equal(await page.locator('#chat-view script').count(), 0, 'a reply never becomes markup');
    await shot(page, 'chat-view', { fullPage: true });
    await page.getByRole('button', { name: 'Hide turns' }).first().click();
    assert.equal(await page.locator('#chat-view').isHidden(), true);
    noProblems(problems);
    await context.close();
  });
});

test('a terminal agent in a tmux pane is listed, and a prompt sent to it from the page goes in, proven by its own transcript', async () => {
  // The real Claude Code (tests/agents, pinned) in a real tmux pane, against the local fake
  // model server; `npm ci --prefix tests/agents` installs it (scripts/test-all.sh does).
  const agentBin = path.join(ROOT, 'tests/agents/node_modules/.bin/claude');
  assert.ok(fs.existsSync(agentBin), `no Claude Code at ${agentBin}: run npm ci --prefix tests/agents`);
  const tmuxTmp = fs.mkdtempSync(path.join(os.tmpdir(), 'koru-dash-tmux-'));
  const tmuxDir = path.join(tmuxTmp, `tmux-${process.getuid()}`);
  fs.mkdirSync(tmuxDir, { mode: 0o700 });
  const socket = path.join(tmuxDir, 'default');
  const modelPort = await freePort();
  const model = spawn('python3', [path.join(ROOT, 'tests/corpus/recorder/fake_model_server.py'), '--port', String(modelPort), '--log', path.join(tmuxTmp, 'model.log')], { stdio: 'ignore' });
  const modelUrl = `http://127.0.0.1:${modelPort}`;
  try {
    await waitFor(async () => (await fetch(`${modelUrl}/koru/prompts`)).ok, 10_000, 'the fake model server');
    await withDaemon({ claudeProjects: true, env: { TMUX_TMPDIR: tmuxTmp } }, async (daemon) => {
      const folder = path.join(daemon.root, 'ws', 'gamma-repo');
      fs.mkdirSync(folder, { recursive: true });
      // The agent's HOME is the daemon's, so the daemon reads its transcript.
      const started = spawnSync('bash', [path.join(ROOT, 'tests/agents/start-agent.sh'), 'claude-code', folder], {
        env: { ...process.env, TMUX_SOCKET: socket, AGENT_ROOT: daemon.root, FAKE_MODEL_URL: modelUrl, READY_TIMEOUT: '90' },
        encoding: 'utf8',
      });
      assert.equal(started.status, 0, `start-agent.sh: ${started.stderr}`);
      const { page, context, problems } = await openDashboard(daemon);
      const card = page.locator('article.agent', { hasText: 'gamma-repo' });
      await card.waitFor({ timeout: 15_000 });
      assert.match(await card.textContent(), /claude-code/);
      assert.match(await card.textContent(), /tmux /);
      const agentId = await card.getAttribute('data-agent-id');
      assert.match(agentId, /^t_[0-9a-f]{12}$/);

      const prompt = `Which folder is this? ✓ ${Date.now()}`;
      await page.selectOption('#send-session', agentId);
      await page.fill('#send-prompt', prompt);
      await page.click('#send-button');
      const id = await driveIdFor(page, 'Which folder is this?');
      await page.locator(`#drive-${id}`).locator('[data-stage=done]').waitFor({ timeout: 30_000 });
      const { body: { drive } } = await daemon.api('GET', `/drives/${id}`);
      assert.equal(drive.session_id, agentId);
      assert.equal(drive.route, 'terminal_input');
      assert.equal(drive.submit_evidence, 'agent_transcript');
      const prompts = await (await fetch(`${modelUrl}/koru/prompts`)).json();
      assert.deepEqual(prompts.map((p) => p.prompt), [prompt], 'the model got it once, byte-exact');
      // The agent's chat is known once its transcript is read; the card shows it.
      await page.locator('#agents-look').click();
      await card.locator('code', { hasText: drive.observation.chat_id }).waitFor({ timeout: 10_000 });
      await shot(page, 'terminal-agent');
      noProblems(problems);
      await context.close();
    });
  } finally {
    spawnSync('tmux', ['-S', socket, 'kill-server']);
    model.kill();
    fs.rmSync(tmuxTmp, { recursive: true, force: true });
  }
});

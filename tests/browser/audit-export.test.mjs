// `koru audit --html` against the real daemon, opened in headless Chromium from file:// with no network: the ledger's page says it is an audit ledger of the chat, verifies with the head and entry count `koru audit` printed, shows each chat_item (its item kind, turn and source line), the page's own tamper check names an edited chat_item at its seq, and a keyed ledger's page asks for the key.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { ROOT, closeBrowser, openExport, readVerdict, shot, waitFor, withDaemon, withOneDigitChanged } from './harness.mjs';

after(closeBrowser);

const CLAUDE = 'chat_history_claude_code_jsonl';
const CHAT = 'd6e0bada-1959-4eec-a9d2-0bfade768d8f'; // tool_heavy.jsonl's sessionId: Claude Code names its transcript after it
const TRANSCRIPT = path.join(ROOT, 'tests/corpus/claude_code/tool_heavy.jsonl');
const EXPECTED = JSON.parse(fs.readFileSync(`${TRANSCRIPT}.items.json`, 'utf8'));

function koruOk(daemon, args, opts) {
  const r = daemon.koru(args, opts);
  assert.equal(r.status, 0, `koru ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}


test("a chat audited through the daemon: its ledger's page verifies in Chromium, shows its items, and names an edited chat_item", async () => {
  await withDaemon({ claudeProjects: true }, async (daemon) => {
    const project = path.join(daemon.env.HOME, '.claude/projects/-w');
    fs.mkdirSync(project, { recursive: true });
    fs.copyFileSync(TRANSCRIPT, path.join(project, `${CHAT}.jsonl`));
    await waitFor(() => daemon.koru(['chats', '--json']).stdout.includes(CHAT), 20_000, 'the daemon lists the chat');

    const out = path.join(daemon.root, 'ledger.html');
    const result = JSON.parse(koruOk(daemon, ['audit', '--json', '--html', out, CHAT, '--store', CLAUDE]));
    assert.equal(result.opened, true);
    assert.equal(result.items_total, EXPECTED.length);
    assert.equal(result.html, out);
    // Ledger: ledger_opened, the items, audit_run.
    assert.equal(result.last_seq, EXPECTED.length + 2);
    assert.equal(fs.statSync(out).mode & 0o777, 0o600, 'the page is written 0600');

    const { page, context, verdict, problems, requests } = await openExport(out);
    await shot(page, 'audit-export-intact', { fullPage: true });
    assert.equal(verdict.state, 'intact', verdict.text);
    assert.equal(verdict.text, `Intact — ${result.last_seq} entries, head ${result.head}`);
    assert.equal(verdict.head, result.head);
    assert.equal(await page.textContent('h1'), 'Koru audit ledger of a chat');
    assert.match(await page.textContent('#about'), new RegExp(`${CHAT}.*${CLAUDE}.*${EXPECTED.length} items`, 's'));
    assert.equal(await page.locator('#entries-body tr', { hasText: 'chat_item' }).count(), EXPECTED.length);
    for (let seq = 1; seq <= result.last_seq; seq++) assert.equal(await page.locator(`#entry-${seq}`).getAttribute('data-status'), 'ok', `entry ${seq}`);
    // Each chat_item row: its index and turn, its kind (and tool), its source line.
    const first = EXPECTED[0];
    const row = page.locator('#entry-2');
    assert.equal(await row.locator('td.drive').textContent(), `item 0 · turn ${first.turn}`);
    assert.match(await row.locator('td.state').textContent(), new RegExp(`^${first.kind}`));
    assert.equal(await row.locator('td.who').textContent(), `line ${first.source.line}`);
    const call = EXPECTED.findIndex((i) => i.kind === 'tool_call' && i.tool);
    assert.match(await page.locator(`#entry-${call + 2} td.state`).textContent(), new RegExp(`tool_call · ${EXPECTED[call].tool}`));
    assert.match(await page.textContent('#cross-check'), /sed -n Lp .* \| head -c -1 \| sha256sum/);
    assert.deepEqual(problems, []);
    assert.deepEqual(requests.filter((u) => !u.startsWith('file:')), [], 'the page asked the network for something');
    await context.close();

    // One digit of one chat_item's at_ms changed in a copy: the page's own check names it.
    const badSeq = 5;
    const tampered = await openExport(withOneDigitChanged(out, badSeq));
    await shot(tampered.page, 'audit-export-tampered', { fullPage: true });
    assert.equal(tampered.verdict.state, 'tampered', tampered.verdict.text);
    assert.equal(tampered.verdict.badSeq, String(badSeq));
    assert.match(tampered.verdict.text, new RegExp(`^NOT intact — first bad entry seq ${badSeq}: edited — the entry \\(kind "chat_item"\\) does not match its entry_hash`));
    assert.equal(await tampered.page.locator(`#entry-${badSeq}`).getAttribute('class'), 'bad');
    assert.equal(await tampered.page.locator(`#entry-${badSeq + 1}`).getAttribute('data-status'), 'unchecked');
    assert.deepEqual(tampered.problems, []);
    await tampered.context.close();

    // koru verify agrees with the page about the ledger itself.
    const verified = koruOk(daemon, ['verify', result.dir]);
    assert.match(verified, new RegExp(`^✓ audit ledger intact — ${result.last_seq} entries, head ${result.head}`));
  });
});

test("a keyed ledger audited offline: its page asks for the key and verifies with it", async () => {
  await withDaemon({}, async (daemon) => {
    const key = 'ledger key ✓';
    const dir = path.join(daemon.root, 'keyed');
    const out = path.join(daemon.root, 'keyed.html');
    const result = JSON.parse(
      koruOk(daemon, ['audit', '--json', '--source', TRANSCRIPT, '--store', CLAUDE, '--out', dir, '--html', out], { env: { KORU_JOURNAL_HMAC_KEY: key } }),
    );
    assert.equal(result.keyed, true);
    assert.match(result.head, /^hmac-sha256:/);

    const { page, context, verdict, problems } = await openExport(out);
    assert.equal(verdict.state, 'needs-key', verdict.text);
    assert.equal(await page.isVisible('#key-box'), true);
    await page.fill('#hmac-key', 'not the key');
    await page.click('#key-check');
    const wrong = await readVerdict(page);
    assert.equal(wrong.state, 'tampered');
    assert.equal(wrong.badSeq, '1');
    await page.fill('#hmac-key', key);
    await page.press('#hmac-key', 'Enter');
    const right = await readVerdict(page);
    assert.equal(right.state, 'intact', right.text);
    assert.equal(right.text, `Intact — ${result.last_seq} entries, head ${result.head}`);
    assert.deepEqual(problems, []);
    await context.close();

    // Without the key, neither koru verify nor a second audit goes on.
    const refused = daemon.koru(['verify', dir]);
    assert.equal(refused.status, 2, refused.stdout);
    const again = daemon.koru(['audit', '--source', TRANSCRIPT, '--store', CLAUDE, '--out', dir]);
    assert.notEqual(again.status, 0);
    assert.match(again.stderr, /KORU_JOURNAL_HMAC_KEY|does not verify/);
  });
});

// `koru journal export --html` against the real daemon, opened in headless Chromium from file:// with no network: the page's verdict, head and entry count match `koru status`, one changed byte is caught at its entry, a drive's export shows its prompt, and a keyed journal's page asks for the key.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ROOT, closeBrowser, openExport, readVerdict, shot, withDaemon, withOneDigitChanged } from './harness.mjs';

after(closeBrowser);

/** Runs `koru args`, asserting it exits 0; returns its stdout. */
function koruOk(daemon, args, opts) {
  const r = daemon.koru(args, opts);
  assert.equal(r.status, 0, `koru ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** A fake VS Code window, and three prompts sent to it with `koru send --wait`; returns their drive ids. */
async function threeDrives(daemon, prompts) {
  const plugin = await daemon.plugin({ name: 'export-ws' });
  const ids = [];
  for (const prompt of prompts) {
    const drive = JSON.parse(koruOk(daemon, ['send', '--wait', '--json', '--workspace', plugin.workspace, prompt]));
    assert.equal(drive.state, 'done', `drive for ${JSON.stringify(prompt)}`);
    ids.push(drive.drive_id);
  }
  return ids;
}

function journalStatus(daemon) {
  const journal = JSON.parse(koruOk(daemon, ['status', '--json'])).journal;
  assert.ok(journal?.head, 'koru status --json has journal.head');
  return journal;
}


test("the whole journal's export verifies in Chromium from file:// and agrees with koru status; one changed byte is caught at its entry", async () => {
  await withDaemon({}, async (daemon) => {
    await threeDrives(daemon, ['first prompt', 'second prompt', 'third prompt']);
    const journal = journalStatus(daemon);
    const out = path.join(daemon.root, 'journal.html');
    const summary = koruOk(daemon, ['journal', 'export', '--html', out]);
    assert.equal(summary.trim(), `wrote ${out}: ${journal.last_seq} entries (seq 1–${journal.last_seq}), head ${journal.head}, verifies in any browser`);
    assert.equal(fs.statSync(out).mode & 0o777, 0o600, 'the export is written 0600');
    assert.equal(journalStatus(daemon).head, journal.head, 'nothing was written while exporting');

    const { page, context, verdict, problems, requests } = await openExport(out);
    await shot(page, 'journal-export-intact', { fullPage: true });
    assert.equal(verdict.state, 'intact', verdict.text);
    assert.equal(verdict.text, `Intact — ${journal.last_seq} entries, head ${journal.head}`);
    assert.equal(verdict.head, journal.head);
    assert.equal(Number(verdict.entries), journal.last_seq);
    assert.equal(await page.locator('#entries-body tr').count(), journal.last_seq);
    for (let seq = 1; seq <= journal.last_seq; seq++) assert.equal(await page.locator(`#entry-${seq}`).getAttribute('data-status'), 'ok', `entry ${seq}`);
    // Three drives: each accepted, and ended done.
    assert.equal(await page.locator('#entries-body tr', { hasText: 'drive_accepted' }).count(), 3);
    assert.equal(await page.locator('#entries-body tr', { hasText: 'drive_ended' }).count(), 3);
    assert.match(await page.textContent('#entries-body'), /cli · koru-cli · pid \d+/);
    assert.match(await page.textContent('#cross-check'), new RegExp(`koru verify.*${journal.head}`, 's'));
    assert.deepEqual(problems, []);
    assert.deepEqual(requests.filter((u) => !u.startsWith('file:')), [], 'the page asked the network for something');

    // The page's own SHA-256 and HMAC-SHA256 against node's, across the padding boundaries, and RFC 4231's long-key case.
    const sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000];
    const inputs = sizes.map((n) => [...crypto.randomBytes(n)]);
    const ours = await page.evaluate((all) => all.map((bytes) => [koruJournalExport.sha256Hex(new Uint8Array(bytes)), koruJournalExport.hmacSha256Hex(new Uint8Array(bytes), new Uint8Array(bytes).reverse())]), inputs);
    inputs.forEach((bytes, i) => {
      const buffer = Buffer.from(bytes);
      assert.equal(ours[i][0], crypto.createHash('sha256').update(buffer).digest('hex'), `sha256 of ${sizes[i]} bytes`);
      assert.equal(ours[i][1], crypto.createHmac('sha256', buffer).update(Buffer.from(bytes).reverse()).digest('hex'), `hmac with a ${sizes[i]}-byte key`);
    });
    const rfc4231 = await page.evaluate(() => koruJournalExport.hmacSha256Hex(new Uint8Array(131).fill(0xaa), 'Test Using Larger Than Block-Size Key - Hash Key First'));
    assert.equal(rfc4231, '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54');
    // The page's JSON reader and canonical writer on the vectors the Rust test checks against serde_json.
    const { vectors } = JSON.parse(fs.readFileSync(path.join(ROOT, 'daemon/assets/journal_export/canonical-vectors.json'), 'utf8'));
    const written = await page.evaluate(
      (all) =>
        all.map((v) => {
          try {
            return { canonical: koruJournalExport.canonical(v.input) };
          } catch (e) {
            return { error: e.message };
          }
        }),
      vectors,
    );
    vectors.forEach((v, i) => {
      if (v.error) assert.ok(written[i].error, `${JSON.stringify(v.input)} should not read, got ${written[i].canonical}`);
      else assert.equal(written[i].canonical, v.canonical, `${JSON.stringify(v.input)}${written[i].error ? `: ${written[i].error}` : ''}`);
    });
    await context.close();

    // One digit of one entry's at_ms changed in a copy: that entry is named and its row marked.
    const badSeq = 5;
    const changed = withOneDigitChanged(out, badSeq);
    const tampered = await openExport(changed);
    await shot(tampered.page, 'journal-export-tampered', { fullPage: true });
    assert.equal(tampered.verdict.state, 'tampered', tampered.verdict.text);
    assert.equal(tampered.verdict.badSeq, String(badSeq));
    assert.match(tampered.verdict.text, new RegExp(`^NOT intact — first bad entry seq ${badSeq}: edited — the entry \\(kind "\\w+"\\) does not match its entry_hash`));
    const row = tampered.page.locator(`#entry-${badSeq}`);
    assert.equal(await row.getAttribute('class'), 'bad');
    assert.match(await row.locator('td.check').textContent(), /✗ edited/);
    assert.equal(await tampered.page.locator(`#entry-${badSeq - 1}`).getAttribute('data-status'), 'ok');
    assert.equal(await tampered.page.locator(`#entry-${badSeq + 1}`).getAttribute('data-status'), 'unchecked');
    assert.equal(await tampered.page.locator('#entries-body tr.bad').count(), 1);
    assert.deepEqual(tampered.problems, []);
    await tampered.context.close();

    // The original is untouched by all this and still verifies.
    const again = await openExport(out);
    assert.equal(again.verdict.state, 'intact');
    await again.context.close();
  });
});

test("a drive's export holds its stretch and its prompt, checked against the recorded digest", async () => {
  await withDaemon({}, async (daemon) => {
    const prompts = ['first prompt', 'second prompt: </script><script>document.title="owned"</script> <!-- é 😀', 'third prompt'];
    const ids = await threeDrives(daemon, prompts);
    const out = path.join(daemon.root, 'drive.html');
    const summary = koruOk(daemon, ['journal', 'export', '--html', out, '--drive', ids[1]]);
    // The drive's stretch: its drive_accepted, the drive_state entries of its running
    // stages (none when it ended within the daemon's tick: they fold into drive_ended),
    // its drive_ended.
    const stretch = summary.match(/: (\d+) entries \(seq \d+–\d+\), head sha256:[0-9a-f]{64}, verifies in any browser, the drive's prompt included$/m);
    assert.ok(stretch, summary);
    const count = Number(stretch[1]);
    assert.ok(count >= 2, summary);

    const { page, context, verdict, problems } = await openExport(out);
    await shot(page, 'journal-export-drive', { fullPage: true });
    assert.equal(verdict.state, 'intact', verdict.text);
    assert.equal(verdict.entries, String(count));
    assert.equal(await page.textContent('#prompt-text'), prompts[1]);
    assert.equal(await page.getAttribute('#prompt-status', 'data-matches'), 'true');
    assert.match(await page.textContent('#prompt-status'), new RegExp(`sha256 ${crypto.createHash('sha256').update(prompts[1]).digest('hex')}`));
    assert.equal(await page.title(), 'Koru journal export', 'the prompt ran as script');
    const kinds = await page.$$eval('#entries-body td.kind summary', (s) => s.map((e) => e.textContent));
    assert.deepEqual(kinds, ['drive_accepted', ...Array(count - 2).fill('drive_state'), 'drive_ended']);
    const drives = await page.$$eval('#entries-body td.drive', (cells) => cells.map((c) => c.textContent));
    assert.deepEqual(drives, Array(count).fill(ids[1]));
    assert.doesNotMatch(await page.content(), /first prompt|third prompt/, "another drive's prompt is in the page");
    assert.deepEqual(problems, []);
    await context.close();

    // The prompt text edited in a copy: its drive_accepted entry is named.
    const html = fs.readFileSync(out, 'utf8');
    const edited = out.replace('.html', '-prompt-edited.html');
    fs.writeFileSync(edited, html.replace('second prompt:', 'second prompt;'));
    const bad = await openExport(edited);
    assert.equal(bad.verdict.state, 'tampered', bad.verdict.text);
    assert.match(bad.verdict.text, /: blob_mismatch — the prompt text in this file/);
    const acceptedSeq = await bad.page.$eval('#entries-body tr', (tr) => tr.querySelector('td.seq').textContent);
    assert.equal(bad.verdict.badSeq, acceptedSeq);
    await bad.context.close();

    const unknown = daemon.koru(['journal', 'export', '--html', path.join(daemon.root, 'none.html'), '--drive', 'd_not_a_drive']);
    assert.notEqual(unknown.status, 0);
    assert.match(unknown.stderr, /drive d_not_a_drive is not in the journal/);
    assert.equal(fs.existsSync(path.join(daemon.root, 'none.html')), false);
  });
});

test("a drive's export goes on past drive_ended to the chat's own records of it, and checks the reply against them", async () => {
  await withDaemon({}, async (daemon) => {
    const reply = 'Both tests pass now ✓\n\n```\nok 2\n```';
    const replyFile = path.join(daemon.root, 'reply.txt');
    fs.writeFileSync(replyFile, reply);
    const plugin = await daemon.plugin({ name: 'evidence-ws', claudeStore: true, extra: ['--reply-delay-ms', '50', '--reply-file', replyFile] });
    const prompt = 'Fix the two failing tests';
    const sent = JSON.parse(koruOk(daemon, ['send', '--wait-reply', '--json', '--timeout', '20', '--workspace', plugin.workspace, prompt]));
    assert.equal(sent.state, 'done');
    const id = sent.drive_id;
    // The outcome's evidence is read from the chat's file after the reply settles.
    let drive = null;
    for (let i = 0; i < 150 && !drive?.evidence?.outcome; i++) {
      drive = JSON.parse(koruOk(daemon, ['drives', '--json'])).find((d) => d.drive_id === id);
      if (!drive?.evidence?.outcome) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(drive?.evidence?.outcome, JSON.stringify(drive));
    const out = path.join(daemon.root, 'evidence.html');
    koruOk(daemon, ['journal', 'export', '--html', out, '--drive', id]);

    const { page, context, verdict, problems } = await openExport(out);
    await shot(page, 'journal-export-drive-evidence', { fullPage: true });
    assert.equal(verdict.state, 'intact', verdict.text);
    const kinds = await page.$$eval('#entries-body td.kind summary', (s) => s.map((e) => e.textContent));
    assert.equal(kinds[0], 'drive_accepted');
    assert.ok(kinds.includes('drive_ended'), kinds.join(' '));
    // Past drive_ended, to the drive's last entry: the chat's record of the outcome (or the
    // drive_state with the reply observed, journaled at the next tick).
    assert.ok(kinds.indexOf('drive_outcome_recorded') > kinds.indexOf('drive_ended'), kinds.join(' '));
    assert.ok(['drive_outcome_recorded', 'drive_state'].includes(kinds.at(-1)), kinds.join(' '));
    const drives = await page.$$eval('#entries-body td.drive', (cells) => cells.map((c) => c.textContent));
    assert.equal(drives.at(-1), id);
    assert.ok(kinds.indexOf('drive_prompt_recorded') > 0, kinds.join(' '));
    const promptRecord = drive.evidence.prompt.record;
    assert.match(
      await page.textContent('#evidence-prompt'),
      new RegExp(`chat ${drive.evidence.prompt.chat_id}, .*line ${promptRecord.line} \\(offset ${promptRecord.offset}, ${promptRecord.bytes} bytes\\), sha256 ${promptRecord.sha256}$`),
    );
    assert.match(await page.textContent('#evidence-outcome'), /^The turn replied \(seq \d+\), the store's record of it: .*line \d+/);
    const digest = crypto.createHash('sha256').update(reply).digest('hex');
    assert.match(await page.textContent('#evidence-reply'), new RegExp(`sha256 ${digest}$`));
    assert.equal(await page.textContent('#reply-text'), reply);
    assert.equal(await page.getAttribute('#reply-status', 'data-matches'), 'true');
    assert.deepEqual(problems, []);
    await context.close();

    // The reply edited in a copy: its drive_outcome_recorded entry is named.
    const html = fs.readFileSync(out, 'utf8');
    const edited = out.replace('.html', '-reply-edited.html');
    fs.writeFileSync(edited, html.replace('Both tests pass now', 'Both tests passed now'));
    const bad = await openExport(edited);
    assert.equal(bad.verdict.state, 'tampered', bad.verdict.text);
    assert.match(bad.verdict.text, /: blob_mismatch — the reply text in this file/);
    const outcomeSeq = await bad.page.$$eval('#entries-body tr', (rows) => rows.find((r) => r.querySelector('td.kind summary').textContent === 'drive_outcome_recorded').querySelector('td.seq').textContent);
    assert.equal(bad.verdict.badSeq, outcomeSeq);
    await bad.context.close();
  });
});

test("a keyed journal's page needs the key, names a wrong one, and verifies with the right one", async () => {
  const key = 'correct horse battery staple';
  await withDaemon({ env: { KORU_JOURNAL_HMAC_KEY: key } }, async (daemon) => {
    await threeDrives(daemon, ['first prompt', 'second prompt', 'third prompt']);
    const journal = journalStatus(daemon);
    assert.equal(journal.keyed, true);
    assert.match(journal.head, /^hmac-sha256:[0-9a-f]{64}$/);

    const out = path.join(daemon.root, 'keyed.html');
    const refused = daemon.koru(['journal', 'export', '--html', out], { env: { KORU_JOURNAL_HMAC_KEY: '' } });
    assert.notEqual(refused.status, 0, 'a keyed journal was exported without its key');
    assert.match(refused.stderr, /KORU_JOURNAL_HMAC_KEY/);
    const summary = koruOk(daemon, ['journal', 'export', '--html', out]);
    assert.match(summary, new RegExp(`${journal.last_seq} entries .*head ${journal.head}, HMAC-sealed: verifies in any browser given the key`));
    assert.equal(fs.readFileSync(out, 'utf8').includes(key), false, 'the key is in the page');

    const { page, context, verdict, problems } = await openExport(out);
    assert.equal(verdict.state, 'needs-key', verdict.text);
    assert.match(verdict.text, /^Needs the key — \d+ entries are sealed with HMAC-SHA256/);
    assert.equal(await page.isVisible('#key-box'), true);
    assert.equal(await page.locator('#entry-1 td.check').textContent(), 'needs the key');
    await shot(page, 'journal-export-needs-key', { fullPage: true });

    await page.fill('#hmac-key', 'not the key');
    await page.click('#key-check');
    const wrong = await readVerdict(page);
    assert.equal(wrong.state, 'tampered');
    assert.equal(wrong.badSeq, '1');
    assert.match(wrong.text, /first bad entry seq 1: wrong_key — the first entry's HMAC does not match/);

    await page.fill('#hmac-key', key);
    await page.press('#hmac-key', 'Enter');
    const right = await readVerdict(page);
    assert.equal(right.state, 'intact', right.text);
    assert.equal(right.text, `Intact — ${journal.last_seq} entries, head ${journal.head}`);
    assert.equal(await page.locator('#entries-body tr[data-status="ok"]').count(), journal.last_seq);
    assert.deepEqual(problems, []);
    await context.close();
  });
});

test("a pruned journal's export starts at retention's checkpoint, and --since starts at the first entry at or after it", async () => {
  // A first daemon writes small segments and keeps them all; a second one, started on the
  // same journal with a small budget, prunes the oldest at start and leaves a checkpoint.
  // (Retention at start, not at rotation: see the report on the rotation-time checkpoint.)
  const journalDir = fs.mkdtempSync(path.join(os.tmpdir(), 'koru-export-journal-'));
  try {
    const drives = [];
    await withDaemon({ args: ['--journal', journalDir, '--journal-segment-bytes', '1000', '--journal-retain', 'forever'] }, async (daemon) => {
      const plugin = await daemon.plugin({ name: 'pruned-ws' });
      for (let i = 1; i <= 4; i++) drives.push(JSON.parse(koruOk(daemon, ['send', '--wait', '--json', '--workspace', plugin.workspace, `prompt ${i}`])));
    });
    await withDaemon({ args: ['--journal', journalDir, '--journal-retain', '5KiB'] }, async (daemon) => {
      const journal = journalStatus(daemon);
      assert.equal(journal.dir, journalDir);
      const verified = koruOk(daemon, ['verify']);
      const pruned = Number(verified.match(/; 1–(\d+) pruned by retention/)?.[1]);
      assert.ok(pruned > 0, `retention pruned nothing:\n${verified}`);

      const all = path.join(daemon.root, 'pruned.html');
      assert.match(koruOk(daemon, ['journal', 'export', '--html', all]), new RegExp(`: ${journal.last_seq - pruned} entries \\(seq ${pruned + 1}–${journal.last_seq}\\), head ${journal.head}`));
      const whole = await openExport(all);
      assert.equal(whole.verdict.state, 'intact', whole.verdict.text);
      assert.equal(whole.verdict.head, journal.head);
      assert.equal(Number(whole.verdict.entries), journal.last_seq - pruned);
      assert.match(await whole.page.textContent('#about'), new RegExp(`seq 1–${pruned} were removed by retention; the checkpoint entry vouches for where this chain starts`));
      assert.equal(await whole.page.$eval('#entries-body tr', (tr) => tr.id), `entry-${pruned + 1}`);
      assert.equal(await whole.page.locator('#entries-body tr', { hasText: 'journal_pruned' }).count(), 1);
      assert.deepEqual(whole.problems, []);
      await whole.context.close();

      // From the last drive's acceptance on, to the millisecond.
      const last = drives[3];
      const since = new Date(last.created_at_ms).toISOString();
      const out = path.join(daemon.root, 'since.html');
      koruOk(daemon, ['journal', 'export', '--html', out, '--since', since]);
      const { page, context, verdict, problems } = await openExport(out);
      assert.equal(verdict.state, 'intact', verdict.text);
      assert.equal(verdict.head, journal.head);
      const first = await page.$eval('#entries-body tr', (tr) => ['td.time', 'td.kind summary', 'td.drive'].map((cell) => tr.querySelector(cell).textContent));
      assert.deepEqual([first[1], first[2]], ['drive_accepted', last.drive_id]);
      assert.ok(first[0].startsWith(since.replace('T', ' ').replace('Z', '')), `${first[1]} is not ${since}`);
      assert.match(await page.textContent('#about'), new RegExp(`entries from ${since.replace(/[.]/g, '\\.')} on`));
      assert.match(await page.textContent('#about'), /Starts after.*seq \d+, whose entry_hash is sha256:[0-9a-f]{64}/s);
      assert.deepEqual(problems, []);
      await context.close();
    });
  } finally {
    fs.rmSync(journalDir, { recursive: true, force: true });
  }
});

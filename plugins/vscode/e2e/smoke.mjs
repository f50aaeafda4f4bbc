// Self-test of the e2e harness: code-server + Chromium + the recorder fixture; a chat request typed in the UI must be recorded.
// Run (after setup.sh):  . "${KORU_E2E_CACHE:-$HOME/.cache/koru-e2e}/env.sh" && node plugins/vscode/e2e/smoke.mjs
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  E2E_DIR,
  CHAT_INPUT_SELECTOR,
  openWorkbench,
  packageVsix,
  readJsonLines,
  startCodeServer,
  waitFor,
} from './harness.mjs';

const RECORDER_DIR = path.join(E2E_DIR, '../test-fixtures/koru-e2e-recorder');
const outDir = path.join(E2E_DIR, 'out');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'koru-e2e-smoke-'));
const folder = path.join(tmp, 'workspace');
fs.mkdirSync(folder);
fs.writeFileSync(path.join(folder, 'README.txt'), 'koru e2e smoke workspace\n');
const recordFile = path.join(tmp, 'record.jsonl');
const readyFile = path.join(tmp, 'recorder-ready.json');

const prompt = 'smoke line one — ü ✓';
let cs;
let wb;
let failed = false;
try {
  const vsix = packageVsix(RECORDER_DIR, path.join(outDir, 'koru-e2e-recorder.vsix'));
  const t0 = Date.now();
  cs = await startCodeServer({
    folder,
    vsixPaths: [vsix],
    env: { KORU_E2E_RECORD_FILE: recordFile, KORU_E2E_RECORDER_READY_FILE: readyFile },
  });
  const tHealthy = Date.now();
  wb = await openWorkbench(cs.url, folder);
  const tShown = Date.now();
  const ready = await waitFor(
    () => fs.existsSync(readyFile) && JSON.parse(fs.readFileSync(readyFile, 'utf8')),
    60_000,
    'the recorder extension to activate and select its fake model',
  );
  if (ready.error) throw new Error(`recorder not ready: ${ready.error}`);

  // Type into the chat input as a person would, then press Enter.
  const input = wb.page.locator(CHAT_INPUT_SELECTOR).first();
  await input.click();
  await wb.page.keyboard.insertText(`@recorder ${prompt}`);
  const tSend = Date.now();
  await wb.page.keyboard.press('Enter');
  const [rec] = await waitFor(() => readJsonLines(recordFile).length && readJsonLines(recordFile), 20_000, 'the recorded request');
  fs.mkdirSync(outDir, { recursive: true });
  await wb.page.screenshot({ path: path.join(outDir, 'smoke.png') });

  if (rec.prompt !== prompt) throw new Error(`recorded prompt ${JSON.stringify(rec.prompt)} != ${JSON.stringify(prompt)}`);
  if (rec.command !== null) throw new Error(`recorded command ${JSON.stringify(rec.command)} != null`);
  console.log(
    `smoke: code-server healthy ${tHealthy - t0} ms; workbench shown ${tShown - wb.loadStartMs} ms after load;` +
      ` recorder ready ${ready.at_ms - wb.loadStartMs} ms after load (ext host pid ${ready.pid}, ppid ${ready.ppid});` +
      ` request recorded ${rec.at_ms - tSend} ms after Enter`,
  );
} catch (e) {
  failed = true;
  console.error(`smoke: FAILED: ${e.stack ?? e}`);
  if (cs) console.error(`smoke: code-server log: ${cs.logFile}`);
  if (wb) await wb.page.screenshot({ path: path.join(outDir, 'smoke-failure.png') }).catch(() => {});
} finally {
  await wb?.close();
  await cs?.stop();
}
console.log(failed ? '0 passed, 1 failed' : '1 passed, 0 failed');
process.exit(failed ? 1 : 0);

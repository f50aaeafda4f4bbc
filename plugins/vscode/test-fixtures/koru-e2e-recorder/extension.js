// Test-only extension: a fake language model and a chat participant that appends each request as JSON to $KORU_E2E_RECORD_FILE, then answers, answers slowly, or pauses for a confirmation, as markers in the prompt ask.
'use strict';
const fs = require('fs');
const vscode = require('vscode');

const VENDOR = 'koru-e2e';
const PARTICIPANT_ID = 'koru-e2e.recorder';
const MODEL_REPLY = 'koru-e2e fake model reply';
const PARTICIPANT_REPLY = 'koru-e2e recorder: received';
const CONFIRMATION_TITLE = 'Koru e2e: go on?';

// Waits `ms`, or less when the request is cancelled.
function sleep(ms, token) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    token.onCancellationRequested(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function record(entry) {
  const file = process.env.KORU_E2E_RECORD_FILE;
  if (!file) {
    console.warn('[koru-e2e-recorder] KORU_E2E_RECORD_FILE not set; request not recorded');
    return;
  }
  fs.appendFileSync(file, JSON.stringify(entry) + '\n');
}

// A fresh profile has no chat model selected, and without Copilot the model picker offers only
// "Sign in", so a request fails with "Language model unavailable". Opening the chat with a
// modelSelector selects the fake model; the choice persists for later (also new) chats.
// KORU_E2E_RECORDER_SELECT_DELAY_MS delays it, as a chat that is still starting would be.
async function selectFakeModel() {
  if (process.env.KORU_E2E_RECORDER_SELECT_MODEL === '0') return;
  const delay = Number(process.env.KORU_E2E_RECORDER_SELECT_DELAY_MS || 0);
  if (delay > 0) await new Promise((r) => setTimeout(r, delay));
  const deadline = Date.now() + 15000;
  while ((await vscode.lm.selectChatModels({ vendor: VENDOR })).length === 0) {
    if (Date.now() > deadline) throw new Error('fake model never became available');
    await new Promise((r) => setTimeout(r, 100));
  }
  await vscode.commands.executeCommand('workbench.action.chat.open', { modelSelector: { vendor: VENDOR } });
}

// Tells a test the recorder is ready: writes {"pid","ppid","at_ms"} to $KORU_E2E_RECORDER_READY_FILE.
function writeReady(error) {
  const file = process.env.KORU_E2E_RECORDER_READY_FILE;
  if (!file) return;
  const entry = { pid: process.pid, ppid: process.ppid, at_ms: Date.now() };
  if (error) entry.error = String(error && error.message ? error.message : error);
  fs.writeFileSync(file, JSON.stringify(entry) + '\n');
}

function activate(context) {
  const model = {
    id: 'koru-e2e-fake',
    name: 'Koru E2E Fake',
    family: 'koru-e2e',
    version: '1.0.0',
    maxInputTokens: 100000,
    maxOutputTokens: 1000,
    capabilities: {},
    // Shown in the model picker, so a fresh profile can select it without a modelSelector.
    isUserSelectable: true,
  };
  context.subscriptions.push(
    vscode.lm.registerLanguageModelChatProvider(VENDOR, {
      provideLanguageModelChatInformation() {
        return [model];
      },
      async provideLanguageModelChatResponse(_model, _messages, _options, progress) {
        progress.report(new vscode.LanguageModelTextPart(MODEL_REPLY));
      },
      async provideTokenCount(_model, text) {
        const s = typeof text === 'string' ? text : JSON.stringify(text);
        return Math.ceil(s.length / 4);
      },
    }),
  );

  // Markers in the prompt choose the response, like a real agent's would vary:
  //   [koru-e2e:slow=MS]     answer after MS ms (the request is still running meanwhile);
  //   [koru-e2e:confirm=MS]  stream a confirmation and keep the response waiting for the
  //                          user for MS ms (as an agent waits for a tool approval), then end;
  //   otherwise              answer at once.
  const participant = vscode.chat.createChatParticipant(PARTICIPANT_ID, async (request, _ctx, stream, token) => {
    record({ prompt: request.prompt, command: request.command ?? null, at_ms: Date.now() });
    const confirm = /\[koru-e2e:confirm=(\d+)\]/.exec(request.prompt);
    if (confirm) {
      stream.confirmation(CONFIRMATION_TITLE, 'The Koru e2e recorder waits for you before it answers.', { koru: 'e2e' });
      await sleep(Number(confirm[1]), token);
      return {};
    }
    const slow = /\[koru-e2e:slow=(\d+)\]/.exec(request.prompt);
    if (slow) await sleep(Number(slow[1]), token);
    stream.markdown(PARTICIPANT_REPLY);
    return {};
  });
  context.subscriptions.push(participant);

  selectFakeModel().then(
    () => writeReady(),
    (e) => {
      console.error('[koru-e2e-recorder] could not select the fake model:', e);
      writeReady(e);
    },
  );
}

function deactivate() {}

module.exports = { activate, deactivate };

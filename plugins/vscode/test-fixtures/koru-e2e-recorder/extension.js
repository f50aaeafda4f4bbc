// Test-only extension: a fake language model and a chat participant that appends each request as JSON to $KORU_E2E_RECORD_FILE.
'use strict';
const fs = require('fs');
const vscode = require('vscode');

const VENDOR = 'koru-e2e';
const PARTICIPANT_ID = 'koru-e2e.recorder';
const MODEL_REPLY = 'koru-e2e fake model reply';
const PARTICIPANT_REPLY = 'koru-e2e recorder: received';

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
async function selectFakeModel() {
  if (process.env.KORU_E2E_RECORDER_SELECT_MODEL === '0') return;
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

  const participant = vscode.chat.createChatParticipant(PARTICIPANT_ID, async (request, _ctx, stream) => {
    record({ prompt: request.prompt, command: request.command ?? null, at_ms: Date.now() });
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

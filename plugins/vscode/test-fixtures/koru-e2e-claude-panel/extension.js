// Test-only stand-in for the Claude Code extension's panel (not Claude Code): `claude-vscode.primaryEditor.open(session, prompt)` opens a `claudeVSCodePanel` webview tab with the prompt in its input, unsent; Enter in that input "sends" it. Each event is a JSON line in $KORU_E2E_PANEL_FILE.
const fs = require('node:fs');
const vscode = require('vscode');

/** How long after start-up the command appears: later than Koru's hello, as a slow extension's would. */
const REGISTER_AFTER_MS = Number(process.env.KORU_E2E_PANEL_DELAY_MS ?? 4000);

function record(event) {
  const file = process.env.KORU_E2E_PANEL_FILE;
  if (file) fs.appendFileSync(file, JSON.stringify({ at_ms: Date.now(), ...event }) + '\n');
}

function page(prompt) {
  // The prompt goes in as JSON inside the script (no HTML escaping games); a nonce-less CSP
  // that allows only this inline script.
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline';">
</head><body>
<textarea id="input" rows="6" cols="60"></textarea>
<script>
  const vscode = acquireVsCodeApi();
  const input = document.getElementById('input');
  input.value = ${JSON.stringify(prompt ?? '')};
  input.focus();
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      vscode.postMessage({ submitted: input.value });
      input.value = '';
    }
  });
  vscode.postMessage({ loaded: input.value });
</script>
</body></html>`;
}

function activate(context) {
  const timer = setTimeout(() => {
    context.subscriptions.push(
      vscode.commands.registerCommand('claude-vscode.primaryEditor.open', (session, prompt) => {
        const panel = vscode.window.createWebviewPanel('claudeVSCodePanel', 'Claude Code', vscode.ViewColumn.Active, {
          enableScripts: true,
        });
        panel.webview.onDidReceiveMessage((message) => record({ tab: panel.title, ...message }));
        panel.webview.html = page(prompt);
        record({ opened: { session: session ?? null, prompt: prompt ?? null } });
        // What VS Code's tab API says of the new tab once it is in front (it is not at once):
        // the form Koru's tab check must accept.
        setTimeout(() => {
          const active = vscode.window.tabGroups.activeTabGroup.activeTab;
          record({
            active_tab: active ? { label: active.label, view_type: active.input instanceof vscode.TabInputWebview ? active.input.viewType : null } : null,
          });
        }, 500);
      }),
    );
    record({ registered: 'claude-vscode.primaryEditor.open' });
  }, REGISTER_AFTER_MS);
  context.subscriptions.push({ dispose: () => clearTimeout(timer) });
}

module.exports = { activate, deactivate() {} };

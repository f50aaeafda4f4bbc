/** The step executor with a fake IDE: run order, acks per stage, stop at the first failure, clipboard restored even when a step throws, allow-list. */

import { test } from "node:test";
import assert from "node:assert/strict";

import { FirstChatRequest } from "../src/chatEvidence";
import { ActiveTab, ACTIVE_TAB_CHECK, executeSteps, Host, isPanelOf, PASTE_COMMAND, StageAck } from "../src/executor";
import type { DriveStep } from "../src/protocol/types.generated";

class FakeIde implements Host {
  calls: Array<[string, unknown[]]> = [];
  clipboard = "the user's clipboard";
  pasted: string[] = [];
  failing = new Set<string>();

  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    this.calls.push([command, args]);
    if (this.failing.has(command)) throw new Error(`command '${command}' not found`);
    if (command === PASTE_COMMAND) this.pasted.push(this.clipboard);
    return undefined;
  }
  async readClipboard(): Promise<string> {
    return this.clipboard;
  }
  async writeClipboard(text: string): Promise<void> {
    this.clipboard = text;
  }
}

const pluginDrive: DriveStep[] = [
  { command: "workbench.action.chat.focusInput", proves: "focused" },
  { command: PASTE_COMMAND, proves: "pasted" },
  { command: "workbench.action.chat.submit", proves: "submitted" },
];
const allowed = new Set(pluginDrive.map((s) => s.command).concat("workbench.action.chat.open"));

async function run(steps: DriveStep[], ide: FakeIde, prompt = "héllo\nwörld ✓") {
  const acks: StageAck[] = [];
  await executeSteps(steps, prompt, ide, allowed, (ack) => acks.push(ack));
  return acks;
}

test("runs the steps in order, acks each stage, pastes the prompt and restores the clipboard", async () => {
  const ide = new FakeIde();
  const acks = await run(pluginDrive, ide);
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "pasted", "submitted"]);
  assert.deepEqual(ide.calls.map((c) => c[0]), pluginDrive.map((s) => s.command));
  assert.deepEqual(ide.pasted, ["héllo\nwörld ✓"]);
  assert.equal(ide.clipboard, "the user's clipboard");
});

test("substitutes $prompt in native-send arguments", async () => {
  const ide = new FakeIde();
  const native: DriveStep[] = [
    { command: "workbench.action.chat.open", args: [{ query: "$prompt", isPartialQuery: false }], proves: "submitted" },
  ];
  const acks = await run(native, ide, "do it");
  assert.deepEqual(ide.calls, [["workbench.action.chat.open", [{ query: "do it", isPartialQuery: false }]]]);
  assert.deepEqual(acks.map((a) => a.stage), ["received", "submitted"]);
});

test("stops at the first failing step, classifies it, and still restores the clipboard", async () => {
  const ide = new FakeIde();
  ide.failing.add(PASTE_COMMAND);
  const acks = await run(pluginDrive, ide);
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "failed"]);
  assert.equal(acks[2].blocker?.code, "capability_missing");
  assert.match(acks[2].blocker?.detail ?? "", /editor.action.clipboardPasteAction failed/);
  assert.ok(!ide.calls.some((c) => c[0] === "workbench.action.chat.submit"), "nothing after the failure");
  assert.equal(ide.clipboard, "the user's clipboard");
});

test("refuses a command outside the allow-list before running anything", async () => {
  const ide = new FakeIde();
  const acks = await run([{ command: "workbench.action.terminal.sendSequence", proves: "submitted" }], ide);
  assert.deepEqual(acks, [
    {
      stage: "failed",
      blocker: {
        code: "command_not_allowed",
        detail: "workbench.action.terminal.sendSequence is not on this extension's allow-list (setting koru.allowedCommands)",
      },
    },
  ]);
  assert.deepEqual(ide.calls, []);
});

test("a drive that must submit but whose steps stop at pasted fails with capability_missing after pasting", async () => {
  const ide = new FakeIde();
  const acks = await run(pluginDrive.slice(0, 2), ide);
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "pasted", "failed"]);
  assert.equal(acks[3].blocker?.code, "capability_missing");
  assert.match(acks[3].blocker?.detail ?? "", /stop at `pasted`.*unsent/);
  assert.equal(ide.clipboard, "the user's clipboard");
});

test("a drive that must not submit ends at pasted without a failure", async () => {
  const ide = new FakeIde();
  const acks: StageAck[] = [];
  await executeSteps(pluginDrive.slice(0, 2), "p", ide, allowed, (a) => acks.push(a), { submit: false });
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "pasted"]);
});

test("a drive with no steps fails at once and runs nothing", async () => {
  const ide = new FakeIde();
  const acks = await run([], ide);
  assert.deepEqual(acks.map((a) => a.stage), ["failed"]);
  assert.equal(acks[0].blocker?.code, "capability_missing");
  assert.deepEqual(ide.calls, []);
});

test("a cancelled drive starts no further step, sends no more acks, and still restores the clipboard", async () => {
  const ide = new FakeIde();
  const controller = new AbortController();
  const acks: StageAck[] = [];
  const original = ide.executeCommand.bind(ide);
  ide.executeCommand = async (command, args) => {
    const result = await original(command, args);
    if (command === PASTE_COMMAND) controller.abort();
    return result;
  };
  await executeSteps(pluginDrive, "p", ide, allowed, (a) => acks.push(a), {
    submit: true,
    signal: controller.signal,
  });
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "pasted"]);
  assert.deepEqual(ide.calls.map(([c]) => c), ["workbench.action.chat.focusInput", PASTE_COMMAND]);
  assert.equal(ide.clipboard, "the user's clipboard");
});

/** A fake VS Code chat for the native route: `chat.open` answers as the real one does with blockOnResponse — at once, later (the test settles it), or by throwing. */
class FakeChat extends FakeIde {
  answer: () => Promise<unknown> = async () => ({ timings: { totalElapsed: 5 } });
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    await super.executeCommand(command, args);
    return command === "workbench.action.chat.open" ? this.answer() : undefined;
  }
}

const nativeSend: DriveStep[] = [
  { command: "workbench.action.chat.open", args: [{ query: "$prompt", isPartialQuery: false }], proves: "submitted" },
];

/** A window whose chat has run a request already: sends get the usual acceptance window. */
function warmChat(): FirstChatRequest {
  const marker = new FirstChatRequest();
  marker.take();
  return marker;
}

async function runWithEvidence(
  steps: DriveStep[],
  ide: FakeIde,
  windowMs = 40,
  signal?: AbortSignal,
  { firstRequest = warmChat(), firstWindowMs = 400 }: { firstRequest?: FirstChatRequest; firstWindowMs?: number } = {},
) {
  const acks: StageAck[] = [];
  const outcomes: unknown[] = [];
  await executeSteps(steps, "do it ✓", ide, allowed, (a) => acks.push(a), {
    submit: true,
    signal,
    chatEvidence: {
      timing: { acceptanceWindowMs: windowMs, firstRequestAcceptanceWindowMs: firstWindowMs, outcomeTimeoutMs: 5_000 },
      firstRequest,
      reportOutcome: (o) => outcomes.push(o),
    },
  });
  return { acks, outcomes };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("native send with the chat's evidence: blockOnResponse is asked, submitted says chat_responded, the outcome follows the ack", async () => {
  const ide = new FakeChat();
  const { acks, outcomes } = await runWithEvidence(nativeSend, ide);
  assert.deepEqual(ide.calls, [["workbench.action.chat.open", [{ query: "do it ✓", isPartialQuery: false, blockOnResponse: true }]]]);
  assert.deepEqual(acks, [{ stage: "received" }, { stage: "submitted", evidence: "chat_responded" }]);
  await tick();
  assert.deepEqual(outcomes, [{ kind: "reply_completed" }]);
});

test("native send the chat refuses: failed with chat_refused and its message, no outcome", async () => {
  const ide = new FakeChat();
  ide.answer = async () => ({ errorDetails: { message: "Language model unavailable", responseIsIncomplete: true } });
  const { acks, outcomes } = await runWithEvidence(nativeSend, ide);
  // No usable model yet: the ack says so, and the daemon sends the prompt again.
  assert.deepEqual(acks, [{ stage: "received" }, { stage: "failed", blocker: { code: "chat_refused", detail: "Language model unavailable" }, refusal: "not_ready" }]);
  await tick();
  assert.deepEqual(outcomes, []);
});

test("native send still running after the window: submitted with chat_running, the outcome when the chat pauses", async () => {
  const ide = new FakeChat();
  let settle!: (value: unknown) => void;
  ide.answer = () => new Promise((resolve) => (settle = resolve));
  const { acks, outcomes } = await runWithEvidence(nativeSend, ide, 20);
  assert.deepEqual(acks.map((a) => [a.stage, a.evidence]), [["received", undefined], ["submitted", "chat_running"]]);
  assert.deepEqual(outcomes, []);
  settle({ type: "confirmation", kind: "toolInvocation", toolId: "runTests" });
  await tick();
  assert.deepEqual(outcomes, [{ kind: "needs_input", input: "permission", detail: "the chat waits for the user to approve tool runTests" }]);
});

test("the window's first chat request gets the longer window: a refusal after the usual window but within the first's is chat_refused, not chat_running", async () => {
  // The chat refuses every request 120 ms after the command, as a fresh window's chat does
  // later than a warm one's (docs/planner.md, "The acceptance window").
  const ide = new FakeChat();
  ide.answer = () => new Promise((resolve) => setTimeout(() => resolve({ errorDetails: { message: "Language model unavailable", responseIsIncomplete: true } }), 120));
  const window = new FirstChatRequest();
  const started = Date.now();
  const first = await runWithEvidence(nativeSend, ide, 40, undefined, { firstRequest: window, firstWindowMs: 400 });
  assert.deepEqual(first.acks, [{ stage: "received" }, { stage: "failed", blocker: { code: "chat_refused", detail: "Language model unavailable" }, refusal: "not_ready" }]);
  assert.ok(Date.now() - started < 400, "decided at the refusal, not at the end of the first-request window");
  assert.equal(window.taken, true);
  // The same window's next request gets the usual 40 ms: the same late refusal now comes after it.
  const second = await runWithEvidence(nativeSend, ide, 40, undefined, { firstRequest: window, firstWindowMs: 400 });
  assert.deepEqual(second.acks.map((a) => [a.stage, a.evidence]), [["received", undefined], ["submitted", "chat_running"]]);
  await sleep(150);
  assert.deepEqual(second.outcomes, [{ kind: "failed", detail: "Language model unavailable" }]);
});

test("a first request still running after the first-request window is chat_running, acked no sooner than that window", async () => {
  const ide = new FakeChat();
  let settle!: (value: unknown) => void;
  ide.answer = () => new Promise((resolve) => (settle = resolve));
  const started = Date.now();
  const { acks, outcomes } = await runWithEvidence(nativeSend, ide, 20, undefined, { firstRequest: new FirstChatRequest(), firstWindowMs: 150 });
  assert.ok(Date.now() - started >= 145, `acked after the first-request window, not the usual one (${Date.now() - started} ms)`);
  assert.deepEqual(acks.map((a) => [a.stage, a.evidence]), [["received", undefined], ["submitted", "chat_running"]]);
  settle({ timings: { firstProgress: 3, totalElapsed: 4000 } });
  await tick();
  assert.deepEqual(outcomes, [{ kind: "reply_completed" }]);
});

test("the first request is the window's first send whatever became of it; other steps do not count", async () => {
  const window = new FirstChatRequest();
  // The plugin drive (chat.submit) and a partial query never block on a response: not a first request.
  await runWithEvidence(pluginDrive, new FakeChat(), 20, undefined, { firstRequest: window });
  await runWithEvidence([{ command: "workbench.action.chat.open", args: [{ query: "$prompt", isPartialQuery: true }], proves: "pasted" }], new FakeChat(), 20, undefined, { firstRequest: window });
  assert.equal(window.taken, false);
  // A first send cancelled by the daemon still ran a request in the chat.
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 10);
  const silent = new FakeChat();
  silent.answer = () => new Promise(() => {});
  await runWithEvidence(nativeSend, silent, 20, controller.signal, { firstRequest: window, firstWindowMs: 2_000 });
  assert.equal(window.taken, true);
  const started = Date.now();
  const next = await runWithEvidence(nativeSend, silent, 20, undefined, { firstRequest: window, firstWindowMs: 2_000 });
  assert.ok(Date.now() - started < 1_000, "the next send gets the usual window");
  assert.deepEqual(next.acks.at(-1), { stage: "submitted", evidence: "chat_running" });
});

test("a drive cancelled while the chat decides sends no ack and no outcome", async () => {
  const ide = new FakeChat();
  ide.answer = () => new Promise(() => {});
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 10);
  const { acks, outcomes } = await runWithEvidence(nativeSend, ide, 2_000, controller.signal);
  assert.deepEqual(acks.map((a) => a.stage), ["received"]);
  assert.deepEqual(outcomes, []);
});

test("without the chat's evidence (older VS Code, another command) submitted says command_returned, and args are unchanged", async () => {
  const ide = new FakeChat();
  const plain = await run(nativeSend, ide, "do it");
  assert.deepEqual(plain.at(-1), { stage: "submitted", evidence: "command_returned" });
  assert.deepEqual(ide.calls[0][1], [{ query: "do it", isPartialQuery: false }]);
  // The plugin drive ends in chat.submit, which has no blockOnResponse: even with evidence on, only the command returned.
  const drive = new FakeChat();
  const { acks, outcomes } = await runWithEvidence(pluginDrive, drive);
  assert.deepEqual(acks.at(-1), { stage: "submitted", evidence: "command_returned" });
  assert.equal(drive.clipboard, "the user's clipboard");
  assert.deepEqual(outcomes, []);
  // A partial query leaves the prompt unsent: it never blocks on a response.
  const partial = new FakeChat();
  const unsent = await runWithEvidence([{ command: "workbench.action.chat.open", args: [{ query: "$prompt", isPartialQuery: true }], proves: "pasted" }], partial);
  assert.deepEqual(partial.calls[0][1], [{ query: "do it ✓", isPartialQuery: true }]);
  assert.deepEqual(unsent.acks.map((a) => a.stage), ["received", "pasted", "failed"]);
});

/** A fake IDE where opening the Claude Code panel puts a tab in front after `opensAfterPolls` polls (a webview that takes a moment). */
class PanelIde extends FakeIde {
  tab: ActiveTab | undefined = { label: "main.rs", windowFocused: true };
  slept: number[] = [];
  polls = 0;
  opensAfterPolls = 0;
  panelViewType = "mainThreadWebview-claudeVSCodePanel";
  loseFocusWhileSettling = false;
  private opened = false;

  override async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    await super.executeCommand(command, args);
    if (command === "claude-vscode.primaryEditor.open") this.opened = true;
    return undefined;
  }
  activeTab(): ActiveTab | undefined {
    if (this.opened && this.polls++ >= this.opensAfterPolls) {
      this.tab = { label: "Claude Code", webviewViewType: this.panelViewType, windowFocused: true };
    }
    return this.tab;
  }
  async sleep(ms: number): Promise<void> {
    this.slept.push(ms);
    if (ms > 100 && this.loseFocusWhileSettling) {
      this.opened = false;
      this.tab = { label: "main.rs", windowFocused: true };
    }
  }
}

const panelDrive: DriveStep[] = [
  { command: "claude-vscode.primaryEditor.open", args: [null, "$prompt"], proves: "focused" },
  { command: ACTIVE_TAB_CHECK, args: [{ view_type: "claudeVSCodePanel", within_ms: 1000, settle_ms: 1500 }], proves: "pasted" },
];
const panelAllowed = new Set(["claude-vscode.primaryEditor.open"]);

async function runPanel(ide: PanelIde) {
  const acks: StageAck[] = [];
  await executeSteps(panelDrive, "Fix it ✓\nplease", ide, panelAllowed, (ack) => acks.push(ack), { submit: false });
  return acks;
}

test("the Claude Code panel route opens the tab with the prompt, waits for it to come to the front, settles, and acks pasted", async () => {
  const ide = new PanelIde();
  ide.opensAfterPolls = 3;
  const acks = await runPanel(ide);
  assert.deepEqual(acks, [{ stage: "received" }, { stage: "focused" }, { stage: "pasted" }]);
  assert.deepEqual(ide.calls, [["claude-vscode.primaryEditor.open", [null, "Fix it ✓\nplease"]]], "the tab check runs no IDE command");
  assert.deepEqual(ide.slept, [100, 100, 100, 1500], "three polls, then the settle time");
  assert.equal(ide.clipboard, "the user's clipboard", "the clipboard is not touched");
});

test("the tab check accepts the view type as VS Code may report it, with or without its prefix", () => {
  for (const viewType of ["claudeVSCodePanel", "mainThreadWebview-claudeVSCodePanel"]) {
    assert.ok(isPanelOf({ label: "Claude Code", webviewViewType: viewType, windowFocused: true }, "claudeVSCodePanel"));
  }
  assert.ok(!isPanelOf({ label: "Claude Code", webviewViewType: "mainThreadWebview-otherclaudeVSCodePanelX", windowFocused: true }, "claudeVSCodePanel"));
  assert.ok(!isPanelOf({ label: "Claude Code", windowFocused: true }, "claudeVSCodePanel"));
  assert.ok(!isPanelOf(undefined, "claudeVSCodePanel"));
});

test("a panel that never comes to the front fails the drive with focus_mismatch, naming the tab in front", async () => {
  const ide = new PanelIde();
  ide.opensAfterPolls = 1_000;
  const acks = await runPanel(ide);
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "failed"]);
  assert.equal(acks[2].blocker?.code, "focus_mismatch");
  assert.match(acks[2].blocker?.detail ?? "", /expected a claudeVSCodePanel tab in front of a focused window within 1000 ms; the active tab is "main.rs"/);
});

test("a panel that loses the front while it settles fails with focus_mismatch", async () => {
  const ide = new PanelIde();
  ide.loseFocusWhileSettling = true;
  const acks = await runPanel(ide);
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "failed"]);
  assert.match(acks[2].blocker?.detail ?? "", /lost the front while it settled/);
});

test("an unfocused window fails the tab check even with the panel in front", async () => {
  const ide = new PanelIde();
  ide.panelViewType = "claudeVSCodePanel";
  const original = ide.activeTab.bind(ide);
  ide.activeTab = () => {
    const tab = original();
    return tab && { ...tab, windowFocused: false };
  };
  const acks = await runPanel(ide);
  assert.equal(acks[2].blocker?.code, "focus_mismatch");
  assert.match(acks[2].blocker?.detail ?? "", /the window does not have focus/);
});

test("a host that cannot see tabs fails the check with capability_missing", async () => {
  const ide = new FakeIde();
  const acks: StageAck[] = [];
  await executeSteps(panelDrive, "x", ide, panelAllowed, (ack) => acks.push(ack), { submit: false });
  assert.deepEqual(acks.map((a) => a.stage), ["received", "focused", "failed"]);
  assert.equal(acks[2].blocker?.code, "capability_missing");
});

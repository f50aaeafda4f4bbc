/** The evidence a native chat send gives: version gate, which steps block on the response, how VS Code's results read (1.104–1.108 and 1.110+ shapes), and the acceptance-window decision — with a fake chat whose `chat.open` settles when the test says. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import {
  acceptanceWindowFor,
  decideChatSend,
  DEFAULT_ACCEPTANCE_WINDOW_MS,
  DEFAULT_FIRST_REQUEST_ACCEPTANCE_WINDOW_MS,
  describeErrorDetails,
  FirstChatRequest,
  formatDuration,
  NOT_TAKEN_DETAIL,
  saysModelNotReady,
  outcomeOf,
  readChatResult,
  sendsChatQuery,
  supportsBlockOnResponse,
  versionAtLeast,
  withBlockOnResponse,
} from "../src/chatEvidence";
import type { ChatOutcome } from "../src/protocol/types.generated";

/** A promise the test settles by hand, standing for the pending `chat.open` of a real workbench. */
function deferred<T = unknown>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const fast = { acceptanceWindowMs: 40, outcomeTimeoutMs: 5_000 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("blockOnResponse is used from VS Code 1.104.0 on, by API level, whatever the suffix", () => {
  assert.equal(supportsBlockOnResponse("1.103.2"), false);
  assert.equal(supportsBlockOnResponse("1.99.3"), false);
  assert.equal(supportsBlockOnResponse("1.104.0"), true);
  assert.equal(supportsBlockOnResponse("1.105.0-insider"), true);
  assert.equal(supportsBlockOnResponse("1.139.1"), true);
  assert.equal(supportsBlockOnResponse("2.0"), true);
  assert.equal(supportsBlockOnResponse("unknown"), false);
  assert.equal(supportsBlockOnResponse(""), false);
  assert.equal(versionAtLeast("1.110.0", "1.110.0"), true);
  assert.equal(versionAtLeast("1.109.9", "1.110.0"), false);
});

test("only chat.open with a non-empty query and no isPartialQuery sends to the chat", () => {
  assert.equal(sendsChatQuery("workbench.action.chat.open", [{ query: "hi", isPartialQuery: false }]), true);
  assert.equal(sendsChatQuery("workbench.action.chat.open", [{ query: "hi" }]), true);
  assert.equal(sendsChatQuery("workbench.action.chat.open", [{ query: "hi", isPartialQuery: true }]), false);
  assert.equal(sendsChatQuery("workbench.action.chat.open", [{ query: "" }]), false);
  assert.equal(sendsChatQuery("workbench.action.chat.open", ["hi"]), false);
  assert.equal(sendsChatQuery("workbench.action.chat.open", []), false);
  assert.equal(sendsChatQuery("workbench.action.chat.submit", [{ query: "hi" }]), false);
  assert.deepEqual(withBlockOnResponse([{ query: "q", isPartialQuery: false }, "rest"]), [
    { query: "q", isPartialQuery: false, blockOnResponse: true },
    "rest",
  ]);
});

test("VS Code's results read as completed, paused (with and without kind), failed, no result, or not taken", () => {
  // 1.139: a complete response passes the agent's result on (timings always set by the extension host).
  assert.deepEqual(readChatResult({ timings: { firstProgress: 12, totalElapsed: 30 }, metadata: {} }), { kind: "completed" });
  // 1.104–1.108: a pause is only `type: "confirmation"`.
  assert.deepEqual(readChatResult({ type: "confirmation" }), { kind: "needs_input", input: "other" });
  // 1.110+: the kind of the pause.
  assert.deepEqual(readChatResult({ type: "confirmation", kind: "toolInvocation", toolId: "runInTerminal" }), {
    kind: "needs_input",
    input: "permission",
    detail: "the chat waits for the user to approve tool runInTerminal",
  });
  assert.equal((readChatResult({ type: "confirmation", kind: "toolPostApproval", toolId: "t" }) as { input: string }).input, "permission");
  assert.deepEqual(readChatResult({ type: "confirmation", kind: "questionCarousel", questions: [{}] }), { kind: "needs_input", input: "question" });
  assert.deepEqual(readChatResult({ type: "confirmation", kind: "elicitation", title: "Which branch?" }), {
    kind: "needs_input",
    input: "question",
    detail: "the chat waits for the user: Which branch?",
  });
  assert.deepEqual(readChatResult({ type: "confirmation", kind: "confirmation", title: "Apply?", data: { x: 1 } }), {
    kind: "needs_input",
    input: "other",
    detail: "the chat waits for the user: Apply?",
  });
  assert.deepEqual(readChatResult({ type: "confirmation", kind: "somethingNew" }), { kind: "needs_input", input: "other" });
  // The extension host's shape for a thrown agent error: no timings, responseIsIncomplete forced.
  assert.deepEqual(
    readChatResult({ errorDetails: { message: "Language model unavailable", responseIsIncomplete: true, isQuotaExceeded: false, isRateLimited: false, isExpectedError: false } }),
    { kind: "error", detail: "Language model unavailable", started: false, cancelled: false },
  );
  assert.deepEqual(readChatResult({ errorDetails: { message: "boom", responseIsIncomplete: true }, timings: { firstProgress: 5, totalElapsed: 9 } }), {
    kind: "error",
    detail: "boom",
    started: true,
    cancelled: false,
  });
  assert.equal((readChatResult({ errorDetails: { message: "x", code: "canceled" } }) as { cancelled: boolean }).cancelled, true);
  assert.deepEqual(readChatResult({}), { kind: "no_result" });
  assert.deepEqual(readChatResult(undefined), { kind: "not_taken" });
  assert.deepEqual(readChatResult(null), { kind: "not_taken" });
});

test("an error's detail is the chat's message with the flags VS Code set", () => {
  assert.equal(describeErrorDetails({ message: "You have exceeded your quota", isQuotaExceeded: true, code: "quota" }), "You have exceeded your quota (quota exceeded, code quota)");
  assert.equal(describeErrorDetails({ message: "slow down", isRateLimited: true, isQuotaExceeded: false }), "slow down (rate limited)");
  assert.equal(describeErrorDetails({ message: "  " }), "the chat reported an error without a message");
});

test("outcomes in the observers' vocabulary", () => {
  assert.deepEqual(outcomeOf({ kind: "completed" }), { kind: "reply_completed" });
  assert.deepEqual(outcomeOf({ kind: "no_result" }), { kind: "cancelled" });
  assert.deepEqual(outcomeOf({ kind: "error", detail: "d", started: true, cancelled: false }), { kind: "failed", detail: "d" });
  assert.deepEqual(outcomeOf({ kind: "error", detail: "d", started: false, cancelled: true }), { kind: "cancelled" });
  assert.deepEqual(outcomeOf({ kind: "not_taken" }), { kind: "failed", detail: NOT_TAKEN_DETAIL });
  assert.equal(formatDuration(600_000), "10 min");
  assert.equal(formatDuration(1500), "1.5 s");
  assert.equal(formatDuration(250), "250 ms");
});

test("a reply that completes within the window is submitted with chat_responded and reply_completed", async () => {
  const decision = await decideChatSend(Promise.resolve({ timings: { totalElapsed: 8 } }), fast);
  assert.deepEqual(decision, { stage: "submitted", evidence: "chat_responded", outcome: { kind: "reply_completed" } });
});

test("a response that pauses for the user within the window is submitted with chat_responded and needs_input", async () => {
  const decision = await decideChatSend(Promise.resolve({ type: "confirmation", kind: "confirmation", title: "Go on?" }), fast);
  assert.deepEqual(decision, {
    stage: "submitted",
    evidence: "chat_responded",
    outcome: { kind: "needs_input", input: "other", detail: "the chat waits for the user: Go on?" },
  });
});

test("an error before any progress, no response, or a throwing command is chat_refused with the chat's message", async () => {
  // No usable model yet: a refusal of a chat that is not ready, which the daemon sends again.
  assert.deepEqual(await decideChatSend(Promise.resolve({ errorDetails: { message: "Language model unavailable", responseIsIncomplete: true } }), fast), {
    stage: "failed",
    blocker: { code: "chat_refused", detail: "Language model unavailable" },
    refusal: "not_ready",
  });
  // Other refusals are final.
  assert.deepEqual(await decideChatSend(Promise.resolve({ errorDetails: { message: "You have exceeded your premium request allowance", isQuotaExceeded: true } }), fast), {
    stage: "failed",
    blocker: { code: "chat_refused", detail: "You have exceeded your premium request allowance (quota exceeded)" },
  });
  assert.deepEqual(await decideChatSend(Promise.resolve(undefined), fast), {
    stage: "failed",
    blocker: { code: "chat_refused", detail: NOT_TAKEN_DETAIL },
  });
  // Not taken on the window's first request: the chat's default agent is not there yet.
  assert.deepEqual(await decideChatSend(Promise.resolve(undefined), { ...fast, firstRequest: true }), {
    stage: "failed",
    blocker: { code: "chat_refused", detail: NOT_TAKEN_DETAIL },
    refusal: "not_ready",
  });
  assert.deepEqual(await decideChatSend(Promise.reject(new Error("Timed out waiting for default agent")), fast), {
    stage: "failed",
    blocker: { code: "chat_refused", detail: "workbench.action.chat.open failed: Timed out waiting for default agent" },
  });
});

test("saysModelNotReady knows the chat's no-model messages and nothing else", () => {
  for (const yes of ["Language model unavailable", "language model is unavailable.", "No model available", "no language model selected"]) assert.equal(saysModelNotReady(yes), true, yes);
  for (const no of ["boom", "Canceled", "rate limited", "The model returned an error", "quota exceeded for this language model"]) assert.equal(saysModelNotReady(no), false, no);
});

test("an error after the response showed progress, or a cancel, means the chat had taken the request", async () => {
  assert.deepEqual(await decideChatSend(Promise.resolve({ errorDetails: { message: "tool crashed" }, timings: { firstProgress: 3, totalElapsed: 9 } }), fast), {
    stage: "submitted",
    evidence: "chat_responded",
    outcome: { kind: "failed", detail: "tool crashed" },
  });
  assert.deepEqual(await decideChatSend(Promise.resolve({}), fast), { stage: "submitted", evidence: "chat_responded", outcome: { kind: "cancelled" } });
});

test("a request still running when the window ends is chat_running, and its outcome follows when the chat settles", async () => {
  const chat = deferred();
  const started = Date.now();
  const decision = await decideChatSend(chat.promise, fast);
  assert.ok(Date.now() - started >= fast.acceptanceWindowMs - 5, "waited for the window");
  assert.equal(decision?.stage, "submitted");
  assert.equal(decision?.stage === "submitted" && decision.evidence, "chat_running");
  let outcome: ChatOutcome | undefined;
  void Promise.resolve(decision?.stage === "submitted" ? decision.outcome : undefined).then((o) => (outcome = o));
  await sleep(20);
  assert.equal(outcome, undefined, "no outcome before the chat settles");
  chat.resolve({ type: "confirmation", kind: "questionCarousel", questions: [] });
  await sleep(5);
  assert.deepEqual(outcome, { kind: "needs_input", input: "question" });
});

test("after chat_running: a later error, a later refusal and a later throw are failed outcomes", async () => {
  for (const [settle, expected] of [
    [(d: ReturnType<typeof deferred>) => d.resolve({ errorDetails: { message: "Rate limited", isRateLimited: true } }), { kind: "failed", detail: "Rate limited (rate limited)" }],
    [(d: ReturnType<typeof deferred>) => d.resolve(undefined), { kind: "failed", detail: NOT_TAKEN_DETAIL }],
    [(d: ReturnType<typeof deferred>) => d.reject(new Error("Timed out waiting for default agent")), { kind: "failed", detail: "workbench.action.chat.open failed: Timed out waiting for default agent" }],
    [(d: ReturnType<typeof deferred>) => d.resolve({}), { kind: "cancelled" }],
    [(d: ReturnType<typeof deferred>) => d.resolve({ timings: { totalElapsed: 4000 } }), { kind: "reply_completed" }],
  ] as const) {
    const chat = deferred();
    const decision = await decideChatSend(chat.promise, fast);
    assert.ok(decision?.stage === "submitted" && decision.evidence === "chat_running");
    settle(chat);
    assert.deepEqual(await decision.outcome, expected);
  }
});

test("a chat that never settles ends in a failed outcome after the outcome timeout", async () => {
  const decision = await decideChatSend(new Promise(() => {}), { acceptanceWindowMs: 10, outcomeTimeoutMs: 60 });
  assert.ok(decision?.stage === "submitted" && decision.evidence === "chat_running");
  assert.deepEqual(await decision.outcome, {
    kind: "failed",
    detail: "no outcome from the chat within 60 ms (setting koru.outcomeTimeoutMs); look at the chat view",
  });
});

test("a drive cancelled during the window decides nothing", async () => {
  const controller = new AbortController();
  const pending = decideChatSend(new Promise(() => {}), { acceptanceWindowMs: 5_000, outcomeTimeoutMs: 5_000 }, controller.signal);
  setTimeout(() => controller.abort(), 10);
  const started = Date.now();
  assert.equal(await pending, undefined);
  assert.ok(Date.now() - started < 1000, "returned at the cancel, not at the window's end");
  const already = new AbortController();
  already.abort();
  assert.equal(await decideChatSend(new Promise(() => {}), fast, already.signal), undefined);
});

test("a window's first chat request gets the first-request window, every later one the usual window, and never less than the usual", () => {
  const windows = { acceptanceWindowMs: 3_000, firstRequestAcceptanceWindowMs: 10_000 };
  const window = new FirstChatRequest();
  assert.equal(window.taken, false);
  assert.equal(acceptanceWindowFor(windows, window.take()), 10_000);
  assert.equal(window.taken, true);
  assert.equal(acceptanceWindowFor(windows, window.take()), 3_000);
  assert.equal(acceptanceWindowFor(windows, window.take()), 3_000);
  // Each extension host (window) has its own marker.
  assert.equal(new FirstChatRequest().take(), true);
  // A user who lengthens the usual window past the first's gets the longer one for the first too.
  assert.equal(acceptanceWindowFor({ acceptanceWindowMs: 12_000, firstRequestAcceptanceWindowMs: 10_000 }, true), 12_000);
  // The defaults: the first-request window stays under the daemon's 15 s step timeout.
  assert.equal(DEFAULT_ACCEPTANCE_WINDOW_MS, 3_000);
  assert.equal(DEFAULT_FIRST_REQUEST_ACCEPTANCE_WINDOW_MS, 10_000);
});

test("package.json contributes the windows' settings with the code's defaults", () => {
  // dist-test/ sits next to package.json.
  const manifest = JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8"));
  const properties = manifest.contributes.configuration.properties;
  assert.equal(properties["koru.acceptanceWindowMs"].default, DEFAULT_ACCEPTANCE_WINDOW_MS);
  assert.equal(properties["koru.firstRequestAcceptanceWindowMs"].default, DEFAULT_FIRST_REQUEST_ACCEPTANCE_WINDOW_MS);
  assert.equal(properties["koru.firstRequestAcceptanceWindowMs"].scope, properties["koru.acceptanceWindowMs"].scope);
});

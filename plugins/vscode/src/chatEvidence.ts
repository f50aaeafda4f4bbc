/** What a native chat send proves: runs `workbench.action.chat.open {query, blockOnResponse}` and decides, from the chat's own result and an acceptance window, whether the chat took the prompt (`submitted` with evidence), refused it (`chat_refused`), and how it ended (`chat_outcome`) — no `vscode` API, so it is tested with fakes. */

import type { Blocker, ChatOutcome, NeedsInputKind, Refusal, SubmitEvidence } from "./protocol/types.generated";

/** The command that opens VS Code's chat and, given a query, sends it. */
export const CHAT_OPEN_COMMAND = "workbench.action.chat.open";

/** The first VS Code release whose `chat.open` honours `blockOnResponse` (microsoft/vscode PR #262370). */
export const BLOCK_ON_RESPONSE_SINCE = "1.104.0";

/** Parses `major.minor.patch` at the start of a version string (`1.105.0-insider` → [1, 105, 0]). */
export function parseVersion(version: string): [number, number, number] | undefined {
  const match = /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(version.trim());
  if (!match) return undefined;
  return [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
}

/** Whether `version` is at least `minimum` (both `major.minor.patch`); an unparsable version is not. */
export function versionAtLeast(version: string, minimum: string): boolean {
  const have = parseVersion(version);
  const want = parseVersion(minimum)!;
  if (!have) return false;
  for (let i = 0; i < 3; i++) {
    if (have[i] !== want[i]) return have[i] > want[i];
  }
  return true;
}

/**
 * Whether this IDE's `chat.open` can block on the response. Forks report their VS Code
 * base as `vscode.version` (Cursor, Windsurf), so the API level decides, not the name.
 */
export function supportsBlockOnResponse(ideVersion: string): boolean {
  return versionAtLeast(ideVersion, BLOCK_ON_RESPONSE_SINCE);
}

/** A step that sends a query to VS Code's chat: `chat.open` with a non-empty `query` and no `isPartialQuery`. */
export function sendsChatQuery(command: string, args: readonly unknown[]): boolean {
  if (command !== CHAT_OPEN_COMMAND) return false;
  const options = args[0];
  if (options === null || typeof options !== "object" || Array.isArray(options)) return false;
  const { query, isPartialQuery } = options as { query?: unknown; isPartialQuery?: unknown };
  return typeof query === "string" && query.length > 0 && isPartialQuery !== true;
}

/** The same arguments with `blockOnResponse: true` added to the options object. */
export function withBlockOnResponse(args: readonly unknown[]): unknown[] {
  const [options, ...rest] = args;
  return [{ ...(options as Record<string, unknown>), blockOnResponse: true }, ...rest];
}

/** `IChatResponseErrorDetails` as far as Koru reads it (VS Code's chatService.ts). */
interface ErrorDetails {
  message?: unknown;
  code?: unknown;
  responseIsFiltered?: unknown;
  responseIsRedacted?: unknown;
  isQuotaExceeded?: unknown;
  isRateLimited?: unknown;
  level?: unknown;
}

/** What the chat's result says, read from the value `chat.open {blockOnResponse}` resolved with. */
export type ChatResult =
  /** A result without `errorDetails`: the response ended normally. */
  | { kind: "completed" }
  /** `type: "confirmation"`: the response paused for the user. */
  | { kind: "needs_input"; input: NeedsInputKind; detail?: string }
  /** `errorDetails`: the chat (or its agent) failed; `started` when the response had shown progress. */
  | { kind: "error"; detail: string; started: boolean; cancelled: boolean }
  /** `{}`: a response ended with no result at all (cancelled before the agent returned). */
  | { kind: "no_result" }
  /** `undefined`: the chat never created a response for the request. */
  | { kind: "not_taken" };

/** The confirmation kinds of VS Code ≥ 1.110 (`IChatPendingConfirmationInfo`) in the observers' vocabulary. */
const CONFIRMATION_INPUT: Record<string, NeedsInputKind> = {
  toolInvocation: "permission",
  toolPostApproval: "permission",
  questionCarousel: "question",
  elicitation: "question",
  confirmation: "other",
};

/** The `errorDetails` message with the flags VS Code sets on it, for a person. */
export function describeErrorDetails(details: ErrorDetails): string {
  const message = typeof details.message === "string" && details.message.trim() ? details.message.trim() : "the chat reported an error without a message";
  const flags: string[] = [];
  if (details.isQuotaExceeded === true) flags.push("quota exceeded");
  if (details.isRateLimited === true) flags.push("rate limited");
  if (details.responseIsFiltered === true) flags.push("response filtered");
  if (details.responseIsRedacted === true) flags.push("response redacted");
  if (typeof details.code === "string" && details.code) flags.push(`code ${details.code}`);
  return flags.length > 0 ? `${message} (${flags.join(", ")})` : message;
}

/**
 * Reads the chat's result. VS Code forces `responseIsIncomplete` on every error an agent
 * returns or throws, so it says nothing about cancellation; a cancelled response either
 * has no result (`{}`) or, from agents that say so, `errorDetails.code: "canceled"`.
 */
export function readChatResult(value: unknown): ChatResult {
  if (value === undefined || value === null) return { kind: "not_taken" };
  if (typeof value !== "object" || Array.isArray(value)) return { kind: "completed" };
  const result = value as {
    type?: unknown;
    kind?: unknown;
    toolId?: unknown;
    title?: unknown;
    errorDetails?: unknown;
    timings?: { firstProgress?: unknown };
  };
  if (result.type === "confirmation") {
    const input = typeof result.kind === "string" ? (CONFIRMATION_INPUT[result.kind] ?? "other") : "other";
    const what = typeof result.title === "string" && result.title ? result.title : typeof result.toolId === "string" && result.toolId ? `tool ${result.toolId}` : undefined;
    const detail =
      result.kind === "toolInvocation" || result.kind === "toolPostApproval"
        ? `the chat waits for the user to approve ${what ?? "a tool"}`
        : what
          ? `the chat waits for the user: ${what}`
          : undefined;
    return detail ? { kind: "needs_input", input, detail } : { kind: "needs_input", input };
  }
  if (result.errorDetails !== undefined && result.errorDetails !== null && typeof result.errorDetails === "object") {
    const details = result.errorDetails as ErrorDetails;
    const cancelled = details.code === "canceled" || details.code === "cancelled" || details.message === "Canceled";
    const started = typeof result.timings?.firstProgress === "number";
    return { kind: "error", detail: describeErrorDetails(details), started, cancelled };
  }
  if (Object.keys(result).length === 0) return { kind: "no_result" };
  return { kind: "completed" };
}

/** Why the chat did not take a request when `chat.open` resolved with nothing (VS Code's `acceptInput` reasons). */
export const NOT_TAKEN_DETAIL =
  "the chat did not take the request: workbench.action.chat.open returned no response (an empty message, no default agent for the chat, a request already in progress, or an IDE that ignores blockOnResponse)";

/** The outcome to report once the chat's result is known after `submitted`. */
export function outcomeOf(result: ChatResult): ChatOutcome {
  switch (result.kind) {
    case "completed":
      // The result carries no reply text; the plugin reports none rather than guess.
      return { kind: "reply_completed" };
    case "needs_input":
      return result.detail ? { kind: "needs_input", input: result.input, detail: result.detail } : { kind: "needs_input", input: result.input };
    case "error":
      return result.cancelled ? { kind: "cancelled" } : { kind: "failed", detail: result.detail };
    case "no_result":
      return { kind: "cancelled" };
    case "not_taken":
      return { kind: "failed", detail: NOT_TAKEN_DETAIL };
  }
}

/** What a native chat send ends with: the ack to send now, and the outcome (now or later). */
export type SendDecision =
  | { stage: "submitted"; evidence: SubmitEvidence; outcome: Promise<ChatOutcome> | ChatOutcome }
  | { stage: "failed"; blocker: Blocker; refusal?: Refusal };

/** Timers, so tests can use short windows; the extension passes Node's. */
export interface EvidenceTiming {
  /** How long the chat has to refuse before a still-running request counts as taken. */
  acceptanceWindowMs: number;
  /** After `chat_running`: how long to wait for the chat's result before reporting that none came. */
  outcomeTimeoutMs: number;
  /** Whether this is the window's first chat request (a chat that takes none then is still starting). */
  firstRequest?: boolean;
}

/** `koru.acceptanceWindowMs`'s default: a chat refused the requests after its first within 0.2–2.1 s on the 2-core e2e machine, idle or loaded (docs/planner.md, "The acceptance window"). */
export const DEFAULT_ACCEPTANCE_WINDOW_MS = 3000;
/**
 * `koru.firstRequestAcceptanceWindowMs`'s default: a window's first chat request pays the
 * chat's one-time costs (and, right after start-up, a busy workbench), and its refusal came
 * 0.9–4.3 s after the command on the e2e machine, idle or loaded, and 3.1 s after the
 * drive's `received` on a slower CI machine — past the 3 s window. 10 s keeps a wide margin
 * and stays under the daemon's step timeout (15 s), which a `submitted` ack must beat.
 */
export const DEFAULT_FIRST_REQUEST_ACCEPTANCE_WINDOW_MS = 10_000;
/** `koru.outcomeTimeoutMs`'s default: the workbench can stop reporting a response, so the wait is bounded. */
export const DEFAULT_OUTCOME_TIMEOUT_MS = 10 * 60 * 1000;

/** The acceptance windows of the settings: a window's first chat request gets its own, longer one. */
export interface AcceptanceWindows {
  /** Every request after the window's first (`koru.acceptanceWindowMs`). */
  acceptanceWindowMs: number;
  /** The window's first request (`koru.firstRequestAcceptanceWindowMs`); never shorter than the other. */
  firstRequestAcceptanceWindowMs: number;
}

/** The acceptance window of a send: the longer one for the window's first chat request, the usual one after. */
export function acceptanceWindowFor(windows: AcceptanceWindows, firstRequest: boolean): number {
  return firstRequest ? Math.max(windows.firstRequestAcceptanceWindowMs, windows.acceptanceWindowMs) : windows.acceptanceWindowMs;
}

/**
 * Whether a send is this window's first chat request. One per extension host, which lives as
 * long as the window (a reload starts a new one, with a cold chat again). Every send counts,
 * whatever became of it — refused, cancelled or answered, the chat has run a request.
 */
export class FirstChatRequest {
  private sent = false;

  /** True for the first send only; marks the chat as having run a request. */
  take(): boolean {
    const first = !this.sent;
    this.sent = true;
    return first;
  }

  /** Whether a request has been sent (for the status). */
  get taken(): boolean {
    return this.sent;
  }
}

/**
 * The messages of a chat that refuses because it has no usable language model yet: VS Code's
 * chat fails a request whose model it cannot resolve with "Language model unavailable"
 * before any participant runs (seen in code-server 4.139 for a fresh profile whose model was
 * registered but not selected yet, plugins/vscode/e2e/README.md).
 */
const NOT_READY_MESSAGES: readonly RegExp[] = [/\blanguage model (is )?unavailable\b/i, /\bno (language )?model (is )?(available|selected)\b/i];

/** Whether a refusal's message says the chat has no usable model yet. */
export function saysModelNotReady(detail: string): boolean {
  return NOT_READY_MESSAGES.some((pattern) => pattern.test(detail));
}

/**
 * The `chat_refused` decision for a detail. `notReady` marks a refusal the chat gave before
 * taking the request because it is not ready yet: the daemon then sends the prompt again
 * (nothing was submitted, so nothing can be submitted twice).
 */
function refused(detail: string, notReady = false): SendDecision {
  const blocker: Blocker = { code: "chat_refused", detail };
  return notReady ? { stage: "failed", blocker, refusal: "not_ready" } : { stage: "failed", blocker };
}

/** What the command's promise settled as. */
type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Decides a native chat send from `sent` (the pending `chat.open {blockOnResponse}`):
 * - it settles within the acceptance window: a completed or paused response is
 *   `submitted` with `chat_responded` and its outcome; an error before the response showed
 *   any progress, no response at all, or a thrown command is `failed` with `chat_refused`
 *   and the chat's own message;
 * - it is still pending when the window ends: `submitted` with `chat_running`, and the
 *   outcome follows when it settles, or a `failed` outcome after `outcomeTimeoutMs`.
 * Resolves `undefined` when `signal` aborts first (the daemon cancelled the drive).
 */
export async function decideChatSend(sent: Promise<unknown>, timing: EvidenceTiming, signal?: AbortSignal): Promise<SendDecision | undefined> {
  const settled: Promise<Settled> = sent.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  let windowTimer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const windowEnded = new Promise<"window">((resolve) => {
    windowTimer = setTimeout(() => resolve("window"), timing.acceptanceWindowMs);
  });
  const aborted = new Promise<"aborted">((resolve) => {
    if (signal?.aborted) resolve("aborted");
    onAbort = () => resolve("aborted");
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  const first = await Promise.race([settled, windowEnded, aborted]);
  clearTimeout(windowTimer);
  if (onAbort) signal?.removeEventListener("abort", onAbort);
  if (first === "aborted") return undefined;
  if (first === "window") {
    return { stage: "submitted", evidence: "chat_running", outcome: laterOutcome(settled, timing.outcomeTimeoutMs) };
  }
  if (!first.ok) return refused(`${CHAT_OPEN_COMMAND} failed: ${errorMessage(first.error)}`);
  const result = readChatResult(first.value);
  switch (result.kind) {
    case "not_taken":
      // On the window's first request: the chat has no default agent yet (it registers as
      // its extension activates), so it is not ready rather than refusing for good.
      return refused(NOT_TAKEN_DETAIL, timing.firstRequest === true);
    case "error":
      // Cancelled or already answering: the chat had taken the request.
      if (!result.started && !result.cancelled) return refused(result.detail, saysModelNotReady(result.detail));
      return { stage: "submitted", evidence: "chat_responded", outcome: outcomeOf(result) };
    default:
      return { stage: "submitted", evidence: "chat_responded", outcome: outcomeOf(result) };
  }
}

/** The outcome of a request that was still running at the end of the acceptance window. */
async function laterOutcome(settled: Promise<Settled>, timeoutMs: number): Promise<ChatOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const end = await Promise.race([settled, timedOut]);
  clearTimeout(timer);
  if (end === "timeout") {
    return {
      kind: "failed",
      detail: `no outcome from the chat within ${formatDuration(timeoutMs)} (setting koru.outcomeTimeoutMs); look at the chat view`,
    };
  }
  if (!end.ok) return { kind: "failed", detail: `${CHAT_OPEN_COMMAND} failed: ${errorMessage(end.error)}` };
  return outcomeOf(readChatResult(end.value));
}

/** `600000` → `10 min`, `1500` → `1.5 s`. */
export function formatDuration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 1000) return `${Math.round(ms / 100) / 10} s`;
  return `${ms} ms`;
}

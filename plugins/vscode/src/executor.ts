/** Runs the steps of a `drive` in order — the daemon decides, the extension executes — acking each proven stage (and for `submitted`, what proves it), stopping at the first failure with a classified blocker, restoring the clipboard whatever happens, and refusing commands outside the allow-list. */

import { AcceptanceWindows, acceptanceWindowFor, decideChatSend, EvidenceTiming, FirstChatRequest, sendsChatQuery, withBlockOnResponse } from "./chatEvidence";
import type { AckStage, Blocker, ChatOutcome, DriveStep, Refusal, SubmitEvidence } from "./protocol/types.generated";

/** The side effects the executor needs, so tests can use fakes (the extension wires VS Code's). */
export interface Host {
  /** Runs an IDE command; rejects when it fails or does not exist. */
  executeCommand(command: string, args: unknown[]): Promise<unknown>;
  readClipboard(): Promise<string>;
  writeClipboard(text: string): Promise<void>;
  /** The window's active editor tab, for the tab check step (absent: no check possible). */
  activeTab?(): ActiveTab | undefined;
  /** Waits `ms` (the tab check's polls and settle time). */
  sleep?(ms: number): Promise<void>;
}

/** What the tab check sees of the active editor tab. */
export interface ActiveTab {
  label: string;
  /** For a webview panel: its view type as VS Code reports it (it may carry a `mainThreadWebview-` prefix). */
  webviewViewType?: string;
  /** Whether the window has focus. */
  windowFocused: boolean;
}

/** Koru's own step (not an IDE command): checks that the window's active tab is a webview panel of a given view type — the panel a previous step opened — then waits for it to settle. */
export const ACTIVE_TAB_CHECK = "koru.expectActiveTab";

/** The tab check's arguments (`{view_type, within_ms, settle_ms}` in the registry). */
export interface ActiveTabExpectation {
  view_type: string;
  within_ms?: number;
  settle_ms?: number;
}

/** Whether `tab` is a webview panel of `viewType` (VS Code may report it as `mainThreadWebview-<viewType>`). */
export function isPanelOf(tab: ActiveTab | undefined, viewType: string): boolean {
  const seen = tab?.webviewViewType;
  return seen !== undefined && (seen === viewType || seen.endsWith(`-${viewType}`));
}

function describeTab(tab: ActiveTab | undefined): string {
  if (!tab) return "no tab is active";
  return tab.webviewViewType ? `the active tab is "${tab.label}" (webview ${tab.webviewViewType})` : `the active tab is "${tab.label}"`;
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs the tab check: polls every 100 ms until the active tab is a `view_type` panel and the
 * window has focus (at most `within_ms`), then waits `settle_ms`; returns the blocker when it
 * never is (`focus_mismatch`), or when the host cannot see tabs (`capability_missing`).
 */
export async function checkActiveTab(args: unknown[], host: Host, signal?: AbortSignal): Promise<Blocker | undefined> {
  const wanted = args[0] as Partial<ActiveTabExpectation> | undefined;
  if (!wanted || typeof wanted.view_type !== "string" || !wanted.view_type) {
    return { code: "capability_missing", detail: `${ACTIVE_TAB_CHECK} needs {view_type} as its argument` };
  }
  if (!host.activeTab) {
    return { code: "capability_missing", detail: "this IDE does not let the extension see its tabs" };
  }
  const sleep = (ms: number) => (host.sleep ? host.sleep(ms) : sleepFor(ms));
  const within = Math.max(0, wanted.within_ms ?? 0);
  let waited = 0;
  for (;;) {
    const tab = host.activeTab();
    if (isPanelOf(tab, wanted.view_type) && tab!.windowFocused) break;
    if (waited >= within || signal?.aborted) {
      const why = isPanelOf(tab, wanted.view_type) ? "the window does not have focus" : describeTab(tab);
      return {
        code: "focus_mismatch",
        detail: `expected a ${wanted.view_type} tab in front of a focused window within ${within} ms; ${why}`,
      };
    }
    await sleep(100);
    waited += 100;
  }
  if (wanted.settle_ms && wanted.settle_ms > 0) await sleep(wanted.settle_ms);
  const after = host.activeTab();
  if (!isPanelOf(after, wanted.view_type) || !after!.windowFocused) {
    return {
      code: "focus_mismatch",
      detail: `the ${wanted.view_type} tab lost the front while it settled; ${after && isPanelOf(after, wanted.view_type) ? "the window does not have focus" : describeTab(after)}`,
    };
  }
  return undefined;
}

/** One `ack` to send. */
export interface StageAck {
  stage: AckStage;
  blocker?: Blocker;
  /** With `submitted`: what proves it. */
  evidence?: SubmitEvidence;
  /** With `failed` and `chat_refused`: the chat was not ready yet (the daemon sends again). */
  refusal?: Refusal;
}

/** The paste step's command: the executor puts the prompt in the clipboard around it. */
export const PASTE_COMMAND = "editor.action.clipboardPasteAction";

/** Replaces every string `"$prompt"` inside step arguments with the prompt. */
export function substitutePrompt(value: unknown, prompt: string): unknown {
  if (value === "$prompt") return prompt;
  if (Array.isArray(value)) return value.map((v) => substitutePrompt(v, prompt));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, substitutePrompt(v, prompt)]),
    );
  }
  return value;
}

/** What else a drive asks besides its steps. */
export interface ExecuteOptions {
  /** The drive's `submit` option: when true, the steps must prove `submitted`. */
  submit: boolean;
  /** Aborted when the daemon cancels the drive: no step starts after that, no ack is sent. */
  signal?: AbortSignal;
  /**
   * Set when this IDE's `workbench.action.chat.open` can block on the response (VS Code ≥
   * 1.104): a step that sends a query then waits for the chat's own evidence (see
   * chatEvidence.ts) and reports the chat's outcome after `submitted` through
   * `reportOutcome`. Unset: `submitted` means only that the step's command returned.
   */
  chatEvidence?: {
    /** The acceptance windows and the outcome timeout. */
    timing: AcceptanceWindows & Pick<EvidenceTiming, "outcomeTimeoutMs">;
    /** The window's first-request marker (one per extension host): its first send gets the longer window. */
    firstRequest: FirstChatRequest;
    reportOutcome: (outcome: ChatOutcome) => void;
  };
}

/**
 * Runs a native chat send with `blockOnResponse` and acks what the chat's result proves,
 * within the first-request acceptance window for the window's first chat request and the
 * usual one after; returns false when the drive ends here (refused, or cancelled by the daemon).
 */
async function sendWithEvidence(
  command: string,
  args: unknown[],
  host: Host,
  ack: (stage: StageAck) => void,
  chatEvidence: NonNullable<ExecuteOptions["chatEvidence"]>,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  // The window's first chat request is slower to be refused (docs/planner.md, "The acceptance window").
  const firstRequest = chatEvidence.firstRequest.take();
  const timing: EvidenceTiming = {
    acceptanceWindowMs: acceptanceWindowFor(chatEvidence.timing, firstRequest),
    outcomeTimeoutMs: chatEvidence.timing.outcomeTimeoutMs,
    firstRequest,
  };
  // A command that throws at once is a refusal like one that rejects.
  const sent = Promise.resolve().then(() => host.executeCommand(command, withBlockOnResponse(args)));
  const decision = await decideChatSend(sent, timing, signal);
  if (!decision || signal?.aborted) return false;
  if (decision.stage === "failed") {
    ack(decision.refusal ? { stage: "failed", blocker: decision.blocker, refusal: decision.refusal } : { stage: "failed", blocker: decision.blocker });
    return false;
  }
  ack({ stage: "submitted", evidence: decision.evidence });
  void Promise.resolve(decision.outcome).then((outcome) => {
    if (!signal?.aborted) chatEvidence.reportOutcome(outcome);
  });
  return true;
}

/**
 * Executes `steps` for `prompt`, calling `ack` for `received`, each step's proven stage,
 * and `failed` with a blocker on the first failure (nothing runs after it). Commands not
 * in `allowed` are refused with `command_not_allowed` before anything runs. A drive that
 * must submit but whose steps stop short of `submitted` fails with `capability_missing`
 * (the prompt is then in the chat input, unsent), so no drive is left hanging.
 */
export async function executeSteps(
  steps: DriveStep[],
  prompt: string,
  host: Host,
  allowed: ReadonlySet<string>,
  ack: (stage: StageAck) => void,
  options: ExecuteOptions = { submit: true },
): Promise<void> {
  // Koru's own tab check runs no IDE command: it is always allowed.
  const refused = steps.find((step) => step.command !== ACTIVE_TAB_CHECK && !allowed.has(step.command));
  if (refused) {
    ack({
      stage: "failed",
      blocker: {
        code: "command_not_allowed",
        detail: `${refused.command} is not on this extension's allow-list (setting koru.allowedCommands)`,
      },
    });
    return;
  }
  if (steps.length === 0) {
    ack({
      stage: "failed",
      blocker: { code: "capability_missing", detail: "the drive names no steps to run" },
    });
    return;
  }
  ack({ stage: "received" });
  let previousClipboard: string | undefined;
  try {
    for (const step of steps) {
      if (options.signal?.aborted) return;
      const args = (step.args ?? []).map((arg) => substitutePrompt(arg, prompt));
      if (options.chatEvidence && step.proves === "submitted" && sendsChatQuery(step.command, args)) {
        if (!(await sendWithEvidence(step.command, args, host, ack, options.chatEvidence, options.signal))) return;
        continue;
      }
      if (step.command === ACTIVE_TAB_CHECK) {
        const blocker = await checkActiveTab(args, host, options.signal);
        if (options.signal?.aborted) return;
        if (blocker) {
          ack({ stage: "failed", blocker });
          return;
        }
        ack({ stage: step.proves });
        continue;
      }
      try {
        if (step.command === PASTE_COMMAND) {
          previousClipboard ??= await host.readClipboard();
          await host.writeClipboard(prompt);
        }
        await host.executeCommand(step.command, args);
      } catch (error) {
        ack({
          stage: "failed",
          blocker: {
            code: "capability_missing",
            detail: `${step.command} failed: ${error instanceof Error ? error.message : String(error)}`,
          },
        });
        return;
      }
      // Without the chat's word, a submit step proves only that its command returned.
      ack(step.proves === "submitted" ? { stage: "submitted", evidence: "command_returned" } : { stage: step.proves });
    }
    const last = steps[steps.length - 1].proves;
    if (options.submit && last !== "submitted" && !options.signal?.aborted) {
      ack({
        stage: "failed",
        blocker: {
          code: "capability_missing",
          detail: `the route's steps stop at \`${last}\` and none submits: the prompt is in the chat input, unsent`,
        },
      });
    }
  } finally {
    if (previousClipboard !== undefined) {
      await host.writeClipboard(previousClipboard);
    }
  }
}

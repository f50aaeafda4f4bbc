/** Whether the window's VS Code chat can take a request now: at least one language model (`vscode.lm.selectChatModels()`), re-read when the models change — through a narrow typed shim, since `@types/vscode` is pinned at 1.85 and `vscode.lm` may be missing. */

import type { ChatReadiness } from "./protocol/types.generated";
import type { VsCodeFamilyProduct } from "./product";

/** Why a chat without models is not ready, and what to do (sent to the daemon as the reason). */
export const NO_MODEL_REASON = "no language model is available to the chat: sign in or pick a model in the chat view";

/** The part of `vscode.lm` readiness needs (VS Code ≥ 1.90; the event since 1.90 too). */
export interface LanguageModelsApi {
  selectChatModels(selector?: Record<string, unknown>): PromiseLike<readonly unknown[]>;
  onDidChangeChatModels?: (listener: () => unknown) => { dispose(): unknown };
}

/**
 * The products whose chat is VS Code's own (the registry's `vscode_native_chat_open`
 * applies to them): their requests go through a language model, so no model means the
 * chat refuses. Cursor, Windsurf and Antigravity drive their own agents, which do not
 * register with `vscode.lm`: for them readiness stays unknown.
 */
const PRODUCTS_WITH_VSCODE_CHAT: ReadonlySet<VsCodeFamilyProduct> = new Set(["vscode", "vscode-insiders", "vscodium", "code-server"]);

/** `vscode.lm` when this IDE has it and its chat is VS Code's own; otherwise `undefined` (readiness unknown). */
export function languageModelsFor(vscodeApi: unknown, product: VsCodeFamilyProduct): LanguageModelsApi | undefined {
  if (!PRODUCTS_WITH_VSCODE_CHAT.has(product)) return undefined;
  const lm = (vscodeApi as { lm?: Partial<LanguageModelsApi> } | undefined)?.lm;
  if (!lm || typeof lm.selectChatModels !== "function") return undefined;
  return lm as LanguageModelsApi;
}

/** Reads readiness now; `undefined` when it cannot be known (no `vscode.lm`, or listing failed). */
export async function readChatReadiness(lm: LanguageModelsApi | undefined): Promise<ChatReadiness | undefined> {
  if (!lm) return undefined;
  let models: readonly unknown[];
  try {
    models = await lm.selectChatModels();
  } catch {
    return undefined;
  }
  return models.length > 0 ? { ready: true } : { ready: false, reason: NO_MODEL_REASON };
}

/** Same readiness (both unknown, or same `ready` and `reason`). */
export function sameReadiness(a: ChatReadiness | undefined, b: ChatReadiness | undefined): boolean {
  return a?.ready === b?.ready && (a?.reason ?? undefined) === (b?.reason ?? undefined);
}

/**
 * Keeps the last readiness the daemon was told and tells it again when it changes: on
 * `onDidChangeChatModels`, and after each (re)connection in case it changed between the
 * hello and the welcome.
 */
export class ChatReadinessReporter {
  private told: ChatReadiness | undefined;
  private reads = 0;
  private subscription: { dispose(): unknown } | undefined;

  constructor(
    private readonly lm: LanguageModelsApi | undefined,
    /** Sends a `chat_readiness` event; returns whether it was sent (connected). */
    private readonly send: (readiness: ChatReadiness) => boolean,
  ) {}

  /** Starts listening for model changes. */
  start(): void {
    this.subscription = this.lm?.onDidChangeChatModels?.(() => void this.recheck());
  }

  dispose(): void {
    this.subscription?.dispose();
    this.subscription = undefined;
  }

  /** Readiness for a hello: read now and remembered as what the daemon was told. */
  async forHello(): Promise<ChatReadiness | undefined> {
    const readiness = await readChatReadiness(this.lm);
    this.told = readiness;
    return readiness;
  }

  /** Reads readiness and sends an event when it differs from what the daemon was told. */
  async recheck(): Promise<void> {
    const read = ++this.reads;
    const readiness = await readChatReadiness(this.lm);
    // A later read started meanwhile: it wins.
    if (read !== this.reads || readiness === undefined || sameReadiness(readiness, this.told)) return;
    if (this.send(readiness)) this.told = readiness;
  }
}

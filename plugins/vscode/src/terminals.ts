/** The window's integrated terminals for the daemon: an id per terminal, its shell's pid, a mirror of its screen fed from shell integration, and the `terminal.io` orders (read the screen, write bytes unchanged). */

import type { IdeTerminal, TerminalIo, TerminalIoResult } from "./protocol/types.generated";

/** What this module needs of a `vscode.Terminal`. */
export interface TerminalHandle {
  readonly name: string;
  /** The shell's pid, once known (`Terminal.processId`). */
  readonly processId: Thenable<number | undefined>;
  /** `Terminal.sendText`: VS Code turns every `\r?\n` into `\r` and adds nothing when `addNewLine` is false. */
  sendText(text: string, addNewLine?: boolean): void;
}

/** A terminal's screen rebuilt from what was written to it. */
export interface ScreenMirror {
  write(data: string): Promise<void>;
  resize(columns: number, rows: number): void;
  readonly columns: number;
  readonly rows: number;
  /** The visible rows, one line each, trailing blanks cut. */
  screen(): string;
  dispose(): void;
}

/** A terminal's size in character cells. */
export interface TerminalSize {
  columns: number;
  rows: number;
}

export interface TerminalBridgeOptions {
  /** A mirror of the given size (the extension: `@xterm/headless`). */
  makeMirror: (size: TerminalSize) => ScreenMirror;
  /** The size of the terminal whose shell is `pid`, or undefined when it cannot be told. */
  sizeOf: (pid: number) => Promise<TerminalSize | undefined>;
  /** Sends a `terminals` report; called whenever the list changes. */
  report: (terminals: IdeTerminal[]) => void;
  /** Whether shell pids mean processes on the daemon's machine (false in a remote window whose terminals run elsewhere). */
  pidsAreLocal: boolean;
  /** How often a mirror re-checks its terminal's size while output flows. */
  sizeCheckMs?: number;
  /** How long after a command starts or ends the names are looked at again (VS Code renames a terminal after its process). */
  nameRefreshMs?: number;
  now?: () => number;
}

interface Known<T> {
  terminal: T;
  id: string;
  pid?: number;
  mirror?: ScreenMirror;
  /** Chains writes into the mirror in the order the output came. */
  feeding: Promise<void>;
  sizeCheckedAt: number;
  closed: boolean;
}

/** Why a screen cannot be read: the plugin saw none of what the running program drew. */
export const SCREEN_UNKNOWN =
  "Koru's plugin has not seen this terminal's output: it sees only commands started while it runs, with VS Code's shell integration on; quit the agent and start it again in this terminal";

/** Keeps the window's terminals and carries out the daemon's orders on them. */
export class TerminalBridge<T extends TerminalHandle> {
  private readonly known = new Map<T, Known<T>>();
  private readonly byId = new Map<string, T>();
  private next = 0;
  private readonly sizeCheckMs: number;
  private readonly nameRefreshMs: number;
  private readonly now: () => number;
  /** The last list sent, to send a name change only once. */
  private lastSent = "";

  constructor(private readonly options: TerminalBridgeOptions) {
    this.sizeCheckMs = options.sizeCheckMs ?? 250;
    this.nameRefreshMs = options.nameRefreshMs ?? 1000;
    this.now = options.now ?? Date.now;
  }

  /** A terminal opened (or existed when the extension started). */
  opened(terminal: T): void {
    if (this.known.has(terminal)) return;
    this.next += 1;
    const known: Known<T> = { terminal, id: `term-${this.next}`, feeding: Promise.resolve(), sizeCheckedAt: 0, closed: false };
    this.known.set(terminal, known);
    this.byId.set(known.id, terminal);
    this.send();
    Promise.resolve(terminal.processId).then(
      (pid) => {
        if (known.closed || pid === undefined || !this.options.pidsAreLocal) return;
        known.pid = pid;
        this.send();
      },
      () => undefined,
    );
  }

  /** A terminal closed. */
  closed(terminal: T): void {
    const known = this.known.get(terminal);
    if (!known) return;
    known.closed = true;
    known.mirror?.dispose();
    this.known.delete(terminal);
    this.byId.delete(known.id);
    this.send();
  }

  /** The list as the daemon gets it. */
  list(): IdeTerminal[] {
    return [...this.known.values()].map((known) => ({
      terminal_id: known.id,
      name: known.terminal.name,
      ...(known.pid !== undefined ? { shell_pid: known.pid } : {}),
    }));
  }

  /** Sends the list again (after a reconnect). */
  send(): void {
    const list = this.list();
    this.lastSent = JSON.stringify(list);
    this.options.report(list);
  }

  /** Sends the list when a name changed since the last one sent. */
  private sendIfChanged(): void {
    if (JSON.stringify(this.list()) !== this.lastSent) this.send();
  }

  /**
   * A command started in `terminal` (shell integration's `onDidStartTerminalShellExecution`):
   * everything it writes, read at once from `output` (`execution.read()`), goes into the
   * terminal's mirror. Resolves when the output ends.
   */
  async mirror(terminal: T, output: AsyncIterable<string>): Promise<void> {
    if (!this.known.has(terminal)) this.opened(terminal);
    const known = this.known.get(terminal)!;
    // VS Code names a terminal after the program running in it (`bash` → `claude`), a moment after it starts.
    setTimeout(() => this.sendIfChanged(), this.nameRefreshMs).unref?.();
    for await (const data of output) {
      if (known.closed) return;
      known.feeding = known.feeding.then(async () => {
        if (known.closed) return;
        await this.checkSize(known);
        await known.mirror?.write(data);
      });
    }
    await known.feeding;
    // The program ended: the terminal takes its shell's name again.
    setTimeout(() => this.sendIfChanged(), this.nameRefreshMs).unref?.();
  }

  /** Makes the mirror (or fits it to the terminal's size), at most every `sizeCheckMs`. */
  private async checkSize(known: Known<T>, force = false): Promise<void> {
    if (!force && known.mirror && this.now() - known.sizeCheckedAt < this.sizeCheckMs) return;
    known.sizeCheckedAt = this.now();
    const pid =
      known.pid ?? (this.options.pidsAreLocal ? await Promise.resolve(known.terminal.processId).catch(() => undefined) : undefined);
    const size = pid !== undefined ? await this.options.sizeOf(pid).catch(() => undefined) : undefined;
    if (!known.mirror) {
      if (!size) return;
      known.mirror = this.options.makeMirror(size);
    } else if (size && (size.columns !== known.mirror.columns || size.rows !== known.mirror.rows)) {
      known.mirror.resize(size.columns, size.rows);
    }
  }

  /** Carries out one `terminal.io` order. */
  async handle(order: Pick<TerminalIo, "order_id" | "terminal_id" | "action">): Promise<TerminalIoResult> {
    const terminal = this.byId.get(order.terminal_id);
    const known = terminal ? this.known.get(terminal) : undefined;
    if (!terminal || !known) {
      return { order_id: order.order_id, error: `no terminal ${order.terminal_id} in this window (it was closed)` };
    }
    switch (order.action.kind) {
      case "write":
        // `addNewLine: false`: nothing added. VS Code still turns each `\n` into `\r`, which inside
        // the bracketed paste the daemon writes the agents read as a newline of the prompt.
        terminal.sendText(order.action.data, false);
        return { order_id: order.order_id };
      case "read": {
        await known.feeding;
        if (!known.mirror) return { order_id: order.order_id, error: SCREEN_UNKNOWN };
        await this.checkSize(known, true);
        return { order_id: order.order_id, screen: known.mirror.screen() };
      }
      default:
        return {
          order_id: order.order_id,
          error: `this plugin does not know terminal action ${JSON.stringify((order.action as { kind?: unknown }).kind)}`,
        };
    }
  }

  dispose(): void {
    for (const known of this.known.values()) {
      known.closed = true;
      known.mirror?.dispose();
    }
    this.known.clear();
    this.byId.clear();
  }
}

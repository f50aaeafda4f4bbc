/** The plugin's connection to the daemon: connect, `hello`, answer heartbeats, run drives one at a time and ack them, send events, and reconnect with capped jittered backoff — Node's `net` only, no `vscode` API, so it is tested against real sockets. */

import * as net from "node:net";

import { BackoffOptions, DEFAULT_BACKOFF, reconnectDelay } from "./backoff";

/** The `bye` reason with which the daemon asks a plugin to connect again (recovery action `reconnect_plugin`). */
export const RECONNECT_REQUESTED = "reconnect_requested";
import { SocketLocation } from "./discovery";
import { StageAck } from "./executor";
import {
  DEFAULT_MAX_LINE_BYTES,
  decodeLine,
  encodeLine,
  isDecodeError,
  LineSplitter,
  LineTooLong,
  PROTOCOL_VERSION,
} from "./protocol/codec";
import type { Capability, ClipboardOrder, ClipboardResult, DriveRequest, Envelope, IdeTerminal, PluginEventKind, TerminalIo, TerminalIoResult } from "./protocol/types.generated";

/** Where the connection stands, for the status bar and `Koru: Show Status`. */
export type ConnectionState =
  | { kind: "connecting"; socket: SocketLocation }
  | { kind: "connected"; socket: SocketLocation; sessionId: string; daemonVersion: string }
  | { kind: "no_daemon"; socket: SocketLocation; reason: string; retryInMs: number }
  | { kind: "refused"; socket: SocketLocation; code: string; message: string; retryInMs: number }
  | { kind: "stopped" };

/** The levels the protocol log uses (VS Code's LogOutputChannel has them all). */
export interface Logger {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Runs one drive, calling `ack` per stage; `signal` aborts when the daemon cancels it or the connection drops. */
export type DriveRunner = (drive: DriveRequest, ack: (ack: StageAck) => void, signal: AbortSignal) => Promise<void>;

export interface ClientOptions {
  locate: () => SocketLocation;
  /** The `hello` to send; called for every connection so it carries fresh facts. */
  hello: () => Promise<Envelope>;
  runDrive: DriveRunner;
  log: Logger;
  onState?: (state: ConnectionState) => void;
  /** Carries out a `terminal.io` order (absent: every order is answered with an error). */
  terminalIo?: (order: TerminalIo) => Promise<TerminalIoResult>;
  /** Reads (`undefined`: no text) or writes the system clipboard for a `clipboard` order (absent: every order is answered with an error). */
  clipboard?: { read(): Promise<string | undefined>; write(text: string): Promise<void> };
  /** Called when a drive starts (`drive_id`) and ends (`undefined`). */
  onDrive?: (driveId: string | undefined) => void;
  backoff?: BackoffOptions;
  random?: () => number;
  /** How long to wait for `welcome` after `hello` (the daemon's own limit is 5 s). */
  handshakeTimeoutMs?: number;
}

/** One queued or running drive. */
interface DriveJob {
  drive: DriveRequest;
  abort: AbortController;
}

/** Node socket errors that mean "no daemon there (yet)". */
const NO_DAEMON_ERRORS = new Set(["ENOENT", "ECONNREFUSED", "ENOTDIR", "EACCES", "ENOTSOCK"]);

export class DaemonClient {
  private socket: net.Socket | undefined;
  private location: SocketLocation | undefined;
  private sessionId: string | undefined;
  private welcomed = false;
  private stopped = true;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private handshakeTimer: NodeJS.Timeout | undefined;
  private jobs: DriveJob[] = [];
  private running: DriveJob | undefined;
  private current: ConnectionState = { kind: "stopped" };
  private announcedNoDaemon = false;
  private refusal: { code: string; message: string } | undefined;
  private reconnectImmediately = false;
  /** Hellos sent, for their request ids. */
  private hellosSent = 0;
  /** The id of the hello on the current connection, which its welcome must carry back. */
  private helloId: string | undefined;
  /** Why the handshake on the current connection was given up, when the daemon's answer was wrong. */
  private handshakeFailure: string | undefined;

  constructor(private readonly options: ClientOptions) {}

  get state(): ConnectionState {
    return this.current;
  }

  /** Starts connecting (and keeps reconnecting until `stop`). */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  /** Drops the connection (if any) and connects again at once. */
  reconnectNow(): void {
    this.stopped = false;
    this.attempt = 0;
    this.announcedNoDaemon = false;
    this.clearRetry();
    if (this.socket) {
      this.reconnectImmediately = true;
      this.socket.destroy();
    } else {
      this.connect();
    }
  }

  /** Says `bye` (when connected), closes, and stops reconnecting. */
  async stop(reason = "extension deactivated"): Promise<void> {
    this.stopped = true;
    this.clearRetry();
    const socket = this.socket;
    if (!socket) {
      this.setState({ kind: "stopped" });
      return;
    }
    if (this.welcomed && socket.writable) {
      await new Promise<void>((resolve) => {
        socket.end(encodeLine({ v: PROTOCOL_VERSION, type: "bye", reason } as Envelope), () => resolve());
        setTimeout(resolve, 500).unref();
      });
    }
    socket.destroy();
  }

  /** Sends an event when connected; returns whether it was sent. */
  sendEvent(event: PluginEventKind): boolean {
    return this.write({ v: PROTOCOL_VERSION, type: "event", event } as Envelope);
  }

  /** Sends the window's terminals when connected; returns whether it was sent. */
  sendTerminals(terminals: IdeTerminal[]): boolean {
    return this.write({ v: PROTOCOL_VERSION, type: "terminals", terminals } as Envelope);
  }

  /** Reports the window's capabilities now (they replace the hello's); false when not connected. */
  sendCapabilities(capabilities: Capability[]): boolean {
    return this.write({ v: PROTOCOL_VERSION, type: "capabilities", capabilities } as Envelope);
  }

  /** The session id the daemon gave this window, when connected. */
  get session(): string | undefined {
    return this.welcomed ? this.sessionId : undefined;
  }

  private connect(): void {
    if (this.stopped) return;
    const location = this.options.locate();
    this.location = location;
    this.welcomed = false;
    this.refusal = undefined;
    this.handshakeFailure = undefined;
    this.setState({ kind: "connecting", socket: location });
    this.options.log.debug(`connecting to ${location.path} (${location.source})`);
    const socket = net.createConnection({ path: location.path });
    this.socket = socket;
    const splitter = new LineSplitter(DEFAULT_MAX_LINE_BYTES);
    let failure: string | undefined;

    socket.on("connect", () => {
      this.options
        .hello()
        .then((hello) => {
          if (this.socket !== socket) return;
          this.helloId = `hello-${++this.hellosSent}`;
          this.write({ ...hello, id: this.helloId }, true);
          this.handshakeTimer = setTimeout(() => {
            failure = `no welcome within ${this.options.handshakeTimeoutMs ?? 5000} ms`;
            socket.destroy();
          }, this.options.handshakeTimeoutMs ?? 5000);
        })
        .catch((error: unknown) => {
          failure = `could not build hello: ${String(error)}`;
          socket.destroy();
        });
    });
    socket.on("data", (chunk: Buffer) => {
      let lines: Buffer[];
      try {
        lines = splitter.push(chunk);
      } catch (error) {
        if (error instanceof LineTooLong) {
          failure = `the daemon sent a line longer than ${error.limit} bytes`;
          this.options.log.error(failure);
          socket.destroy();
          return;
        }
        throw error;
      }
      for (const line of lines) {
        if (this.socket !== socket) return;
        this.handleLine(line);
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      failure = NO_DAEMON_ERRORS.has(error.code ?? "")
        ? `no daemon at ${location.path} (${error.code}); start one with \`koru daemon\``
        : `${error.code ?? "error"}: ${error.message}`;
    });
    socket.on("close", () => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
      const wasWelcomed = this.welcomed;
      this.welcomed = false;
      this.sessionId = undefined;
      this.abandonDrives();
      if (this.stopped) {
        this.setState({ kind: "stopped" });
        return;
      }
      if (wasWelcomed) {
        this.attempt = 0;
        this.options.log.info("the daemon closed the connection; reconnecting");
      }
      const retryInMs = this.reconnectImmediately
        ? 0
        : reconnectDelay(this.attempt, this.options.backoff ?? DEFAULT_BACKOFF, this.options.random);
      this.reconnectImmediately = false;
      this.attempt += 1;
      if (this.refusal) {
        this.options.log.error(`the daemon refused this window: ${this.refusal.code}: ${this.refusal.message}`);
        this.setState({ kind: "refused", socket: location, ...this.refusal, retryInMs });
      } else {
        const reason = failure ?? this.handshakeFailure ?? (wasWelcomed ? "the connection closed" : "the daemon closed the connection before welcome");
        // Said once until a connection succeeds; later retries log at debug level.
        if (!this.announcedNoDaemon) {
          this.options.log.warn(`${reason}; retrying`);
          this.announcedNoDaemon = true;
        } else {
          this.options.log.debug(`${reason}; retrying in ${retryInMs} ms`);
        }
        this.setState({ kind: "no_daemon", socket: location, reason, retryInMs });
      }
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.connect();
      }, retryInMs);
    });
  }

  private handleLine(line: Buffer): void {
    const decoded = decodeLine(line);
    if (isDecodeError(decoded)) {
      this.options.log.warn(`ignoring a line from the daemon: ${decoded.code}: ${decoded.message}`);
      return;
    }
    this.options.log.trace(`← ${line.toString("utf8")}`);
    const message = decoded as Envelope & Record<string, unknown>;
    if (!this.welcomed) {
      if (message.type === "welcome") {
        // A daemon older than the id echo sends none; one that sends another id answers someone else.
        if (message.id !== undefined && message.id !== null && message.id !== this.helloId) {
          this.handshakeFailure = `the daemon's welcome carries id ${JSON.stringify(message.id)}, not this hello's ${this.helloId}`;
          this.socket?.destroy();
          return;
        }
        if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
        this.welcomed = true;
        this.attempt = 0;
        this.announcedNoDaemon = false;
        const welcome = message as Extract<Envelope, { type: "welcome" }>;
        this.sessionId = welcome.session_id;
        this.options.log.info(
          `connected to koru ${welcome.daemon.version} at ${this.location?.path} as session ${welcome.session_id} (protocol ${welcome.protocol})`,
        );
        this.setState({
          kind: "connected",
          socket: this.location!,
          sessionId: welcome.session_id,
          daemonVersion: welcome.daemon.version,
        });
      } else if (message.type === "error") {
        const error = message as Extract<Envelope, { type: "error" }>;
        this.refusal = { code: error.code, message: error.message };
      } else {
        this.options.log.warn(`expected welcome, got ${message.type}`);
      }
      return;
    }
    switch (message.type) {
      case "ping":
        this.write({ v: PROTOCOL_VERSION, id: message.id, type: "pong" } as Envelope);
        break;
      case "drive":
        this.enqueue(message as unknown as DriveRequest);
        break;
      case "terminal.io":
        void this.answerTerminalIo(message as unknown as TerminalIo);
        break;
      case "clipboard":
        void this.answerClipboard(message as unknown as ClipboardOrder);
        break;
      case "cancel": {
        const cancel = message as Extract<Envelope, { type: "cancel" }>;
        this.cancel(cancel.drive_id, cancel.reason);
        break;
      }
      case "bye": {
        const reason = (message as { reason?: string }).reason ?? "";
        this.options.log.info(`the daemon says bye: ${reason}`);
        // An operator's recovery action: come back at once, not after a backoff.
        if (reason === RECONNECT_REQUESTED) this.reconnectImmediately = true;
        break;
      }
      case "error": {
        const error = message as Extract<Envelope, { type: "error" }>;
        this.options.log.warn(`the daemon reports ${error.code}: ${error.message}`);
        break;
      }
      default:
        this.options.log.debug(`ignoring ${message.type}`);
    }
  }

  /** Answers one `terminal.io`; an order that throws is answered with the error. */
  private async answerTerminalIo(order: TerminalIo): Promise<void> {
    let result: TerminalIoResult;
    try {
      result = this.options.terminalIo
        ? await this.options.terminalIo(order)
        : { order_id: order.order_id, error: "this window does not reach its terminals" };
    } catch (error) {
      result = { order_id: order.order_id, error: `the extension failed: ${String(error)}` };
    }
    this.options.log.debug(
      `terminal ${order.terminal_id}: ${order.action.kind}${result.error ? ` failed: ${result.error}` : ""}`,
    );
    this.write({ v: PROTOCOL_VERSION, type: "terminal.io.result", ...result } as Envelope);
  }

  /** Answers one `clipboard` order: the text read, or the write done; a failure is answered with its error. */
  private async answerClipboard(order: ClipboardOrder): Promise<void> {
    let result: ClipboardResult = { order_id: order.order_id };
    const clipboard = this.options.clipboard;
    try {
      if (!clipboard) {
        result.error = "this window does not lend its clipboard";
      } else if (order.action.kind === "read") {
        const text = await clipboard.read();
        if (text !== undefined) result.text = text;
      } else if (order.action.kind === "write") {
        await clipboard.write(order.action.text);
      } else {
        result.error = `unknown clipboard action ${JSON.stringify((order.action as { kind?: unknown }).kind)}`;
      }
    } catch (error) {
      result = { order_id: order.order_id, error: `the extension failed: ${String(error)}` };
    }
    this.options.log.debug(`clipboard: ${order.action.kind}${result.error ? ` failed: ${result.error}` : ""}`);
    this.write({ v: PROTOCOL_VERSION, type: "clipboard.result", ...result } as Envelope);
  }

  private enqueue(drive: DriveRequest): void {
    this.jobs.push({ drive, abort: new AbortController() });
    if (!this.running) void this.runNext();
  }

  private async runNext(): Promise<void> {
    const job = this.jobs.shift();
    if (!job) return;
    this.running = job;
    const { drive } = job;
    this.options.onDrive?.(drive.drive_id);
    this.options.log.info(`drive ${drive.drive_id}: route ${drive.route}, ${drive.steps?.length ?? 0} steps, ${drive.prompt.length} chars`);
    const ack = (stage: StageAck) => {
      if (job.abort.signal.aborted) return;
      this.options.log.info(
        `drive ${drive.drive_id}: ${stage.stage}${stage.blocker ? ` (${stage.blocker.code}: ${stage.blocker.detail ?? ""})` : ""}`,
      );
      this.write({ v: PROTOCOL_VERSION, type: "ack", drive_id: drive.drive_id, ...stage } as Envelope);
    };
    try {
      await this.options.runDrive(drive, ack, job.abort.signal);
    } catch (error) {
      ack({ stage: "failed", blocker: { code: "capability_missing", detail: `the extension failed: ${String(error)}` } });
    } finally {
      this.running = undefined;
      this.options.onDrive?.(undefined);
      if (this.jobs.length > 0) void this.runNext();
    }
  }

  private cancel(driveId: string, reason: string): void {
    this.options.log.info(`drive ${driveId}: cancelled by the daemon (${reason})`);
    if (this.running?.drive.drive_id === driveId) this.running.abort.abort();
    this.jobs = this.jobs.filter((job) => job.drive.drive_id !== driveId);
  }

  /** A dropped connection: the daemon fails what was in flight; the extension never re-runs it. */
  private abandonDrives(): void {
    this.running?.abort.abort();
    for (const job of this.jobs) job.abort.abort();
    this.jobs = [];
  }

  private write(envelope: Envelope, beforeWelcome = false): boolean {
    const socket = this.socket;
    if (!socket || !socket.writable || (!this.welcomed && !beforeWelcome)) return false;
    const line = encodeLine(envelope);
    this.options.log.trace(`→ ${line.toString("utf8").trimEnd()}`);
    socket.write(line);
    return true;
  }

  private clearRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private setState(state: ConnectionState): void {
    this.current = state;
    this.options.onState?.(state);
  }
}

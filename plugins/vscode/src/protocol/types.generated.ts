/** Mirrors protocol/src/ (Rust): generated from docs/protocol.schema.json by scripts/generate-types.mjs — do not edit; run `npm run generate-types`. */

/**
 * One protocol line.
 */
export type Envelope = {
  /**
   * Present on requests; a reply carries the id of the request it answers.
   */
  id?: RequestId | null;
  /**
   * The protocol version this line is written in.
   */
  v: number;
} & (
  | (Hello & {
      type: "hello";
    })
  | (Welcome & {
      type: "welcome";
    })
  | (ErrorMessage & {
      type: "error";
    })
  | {
      type: "ping";
    }
  | {
      type: "pong";
    }
  | (Bye & {
      type: "bye";
    })
  | (DriveRequest & {
      type: "drive";
    })
  | (DriveCancelNotice & {
      type: "cancel";
    })
  | (Ack & {
      type: "ack";
    })
  | (PluginEvent & {
      type: "event";
    })
  | (TerminalsReport & {
      type: "terminals";
    })
  | (CapabilitiesReport & {
      type: "capabilities";
    })
  | (ClipboardOrder & {
      type: "clipboard";
    })
  | (ClipboardResult & {
      type: "clipboard.result";
    })
  | (TerminalIo & {
      type: "terminal.io";
    })
  | (TerminalIoResult & {
      type: "terminal.io.result";
    })
  | {
      type: "status";
    }
  | (StatusInfo & {
      type: "status.result";
    })
  | (SessionsList & {
      type: "sessions.list";
    })
  | (SessionsListResult & {
      type: "sessions.list.result";
    })
  | (DrivesList & {
      type: "drives.list";
    })
  | (DrivesListResult & {
      type: "drives.list.result";
    })
  | (DriveCreate & {
      type: "drive.create";
    })
  | (DriveRef & {
      type: "drive.get";
    })
  | (DriveRef & {
      type: "drive.cancel";
    })
  | (DriveResult & {
      type: "drive.result";
    })
  | {
      type: "events.subscribe";
    }
  | {
      type: "events.subscribed";
    }
  | (StreamItem & {
      type: "stream";
    })
  | (ChatsList & {
      type: "chats.list";
    })
  | (ChatsListResult & {
      type: "chats.list.result";
    })
  | (ObserveReport & {
      type: "observe.report";
    })
  | (ObserveReported & {
      type: "observe.reported";
    })
  | (RecoveryRun & {
      type: "recovery.run";
    })
  | (RecoveryResult & {
      type: "recovery.result";
    })
  | (JournalVerify & {
      type: "journal.verify";
    })
  | (JournalVerifyResult & {
      type: "journal.verify.result";
    })
  | (ChatRead & {
      type: "chat.read";
    })
  | (ChatReadResult & {
      type: "chat.read.result";
    })
  | (ChatAudit & {
      type: "chat.audit";
    })
  | (ChatAuditResult & {
      type: "chat.audit.result";
    })
);
/**
 * A request id chosen by the sender: an integer or a string. Replies carry it back.
 */
export type RequestId = number | string;
/**
 * A plugin capability tagged by `kind`. Receivers must accept kinds they do not know (kept as unknown) so that newer plugins never break older daemons.
 */
export type Capability =
  | KnownCapability
  | {
      kind: string;
    };
/**
 * The known shapes, as serde sees them.
 */
export type KnownCapability =
  | {
      kind: "native_send";
    }
  | {
      kind: "plugin_drive";
    }
  | {
      kind: "drive_steps";
    }
  | {
      kind: "chat_events";
    }
  | {
      kind: "clipboard";
    }
  | {
      kind: "terminal_io";
    }
  | {
      kind: "clipboard_io";
    }
  | {
      id: string;
      kind: "command";
    }
  | {
      id: string;
      kind: "tool_window";
    };
/**
 * IDE product: vscode, vscode-insiders, vscodium, cursor, windsurf, antigravity, code-server, jetbrains-<product code>, or other. Unknown names are accepted and kept verbatim.
 */
export type IdeProduct = string;
/**
 * Who is on the other end of a connection.
 */
export type Role = "plugin" | "controller";
/**
 * What a controller's connection may do (`hello.scope`).
 */
export type AccessScope = "observe" | "drive";
/**
 * Why a line or request was refused.
 */
export type ErrorCode =
  | "hello_required"
  | "version_mismatch"
  | "invalid_hello"
  | "malformed"
  | "line_too_long"
  | "unknown_type"
  | "invalid_message"
  | "wrong_role"
  | "already_greeted"
  | "no_target"
  | "ambiguous_target"
  | "unknown_drive"
  | "drive_finished"
  | "not_retryable"
  | "peer_refused"
  | "handshake_timeout"
  | "slow_reader"
  | "shutting_down"
  | "internal"
  | "journal_unavailable"
  | "queue_full"
  | "forbidden_role"
  | "unknown_chat"
  | "not_observable"
  | "chat_unreadable"
  | "audit_failed"
  | "unknown";
/**
 * What to do when the target chat is busy (replying or waiting for input).
 */
export type BusyPolicy = "queue" | "fail";
/**
 * Which way a prompt is delivered.
 */
export type Route = "native_send" | "plugin_drive" | "os_injection" | "terminal_input";
/**
 * What proves a plugin's `submitted` ack: how far the chat itself confirmed that it took
 * the prompt. Sent by the plugin with the `submitted` ack and kept in the drive record.
 */
export type SubmitEvidence =
  | "chat_responded"
  | "chat_running"
  | "command_returned"
  | "key_pressed"
  | "agent_hook"
  | "agent_transcript";
/**
 * What kind of refusal a `chat_refused` ack reports.
 */
export type Refusal = "not_ready";
/**
 * A stage a plugin reports for a drive.
 */
export type AckStage = "received" | "focused" | "pasted" | "submitted" | "failed";
/**
 * The things a plugin reports, tagged by `kind`; unknown kinds are accepted and ignored.
 */
export type PluginEventKind =
  | {
      kind: "chat_busy";
    }
  | {
      kind: "chat_idle";
    }
  | {
      focused: boolean;
      kind: "focus";
    }
  | {
      kind: "workspace_changed";
      workspace_folders: string[];
    }
  | {
      kind: "window_closing";
    }
  | {
      kind: "chat_readiness";
      ready: boolean;
      reason?: string | null;
    }
  | {
      drive_id: string;
      kind: "chat_outcome";
      outcome: ChatOutcome;
    }
  | {
      kind: "unknown";
    };
/**
 * What the chat did with a drive's request after accepting it, in the observers' vocabulary.
 */
export type ChatOutcome =
  | {
      excerpt?: string | null;
      kind: "reply_completed";
      length?: number | null;
    }
  | {
      detail?: string | null;
      input: NeedsInputKind;
      kind: "needs_input";
    }
  | {
      detail: string;
      kind: "failed";
    }
  | {
      kind: "cancelled";
    }
  | {
      kind: "unknown";
    };
/**
 * What the agent waits for when it needs the user.
 */
export type NeedsInputKind = "question" | "permission" | "tool_approval" | "other";
/**
 * What a `clipboard` order asks.
 */
export type ClipboardAction =
  | {
      kind: "read";
    }
  | {
      kind: "write";
      text: string;
    };
/**
 * What `terminal.io` asks.
 */
export type TerminalAction =
  | {
      kind: "read";
    }
  | {
      data: string;
      kind: "write";
    };
/**
 * How the daemon follows a chat-store root.
 */
export type ObserverMode = "watched" | "waiting" | "polled";
/**
 * Where the desktop's consent to Koru's remote input stands, in the running daemon.
 */
export type PortalConsent = "none" | "asking" | "agreed" | "refused" | "unavailable";
/**
 * What a terminal agent is doing, from its chat.
 */
export type AgentState = ("idle" | "replying" | "needs_input") | "unknown";
/**
 * Where a terminal agent runs.
 */
export type TerminalPlace =
  | {
      kind: "tmux";
      pane_id: string;
      place: string;
      socket: string;
    }
  | {
      kind: "kitty";
      listen_on: string;
      place: string;
      window_id: number;
    }
  | {
      kind: "wezterm";
      pane_id: number;
      place: string;
      socket: string;
    }
  | {
      kind: "ide_terminal";
      place: string;
      session_id: string;
      terminal_id: string;
    };
/**
 * What the plugin last said about its chat.
 */
export type ChatState = "unknown" | "idle" | "busy";
/**
 * Whether a session answers its heartbeats.
 */
export type SessionHealth = "active" | "stale";
/**
 * What happened to one route the planner considered.
 */
export type AttemptOutcome = ("running" | "succeeded" | "failed") | "skipped" | "not_tried";
/**
 * Where a drive is in its life. The last four are terminal.
 */
export type DriveState =
  | ("received" | "focused" | "pasted" | "submitted" | "failed" | "cancelled" | "timed_out")
  | "queued"
  | "sent"
  | "done";
/**
 * How the text of a prompt reached the chat input.
 */
export type TextDelivery = "pasted" | "typed";
/**
 * Where a record's bytes are in a chat's store, and their SHA-256 (lowercase hex), tagged
 * by `kind`.
 */
export type StoreRecord =
  | {
      bytes: number;
      kind: "line";
      /**
       * 1-based.
       */
      line: number;
      offset: number;
      /**
       * The element of the line's JSON meant (RFC 6901), when the line holds several.
       */
      pointer?: string | null;
      sha256: string;
    }
  | {
      bytes: number;
      /**
       * The file, when it is not the chat's own.
       */
      file?: string | null;
      kind: "element";
      offset: number;
      /**
       * Where it is in the document (RFC 6901).
       */
      pointer: string;
      sha256: string;
    }
  | {
      bytes: number;
      /**
       * The database, when it is not the chat's own.
       */
      file?: string | null;
      kind: "row";
      pointer?: string | null;
      row: string;
      sha256: string;
      table: string;
    };
/**
 * How far to trust an observation.
 */
export type ObservationBasis = "explicit" | "inferred";
/**
 * How far a drive's prompt has got in the chat's own history.
 */
export type ObservedStage =
  ("replying" | "needs_input" | "cancelled" | "failed") | "observed" | "replied" | "ambiguous";
/**
 * Which session (or, without a plugin, which window) a drive is for.
 *
 * On the wire: `{"session": "s_…"}`, `{"workspace": "/abs/path"}`, `{"product": "cursor"}`,
 * the string `"focused"` (the plugin session whose window has focus), or
 * `{"window": {"pid": 4242}}` / `{"window": {"title": "regex"}}` for an IDE window
 * without a plugin, driven by OS injection alone. Terminal agents: `{"session": "t_…"}`
 * (an id from `sessions_list` with `agents`), `{"agent": {"product": "claude-code",
 * "workspace": "/abs/path"}}`, or `{"chat": "<chat id>"}` (the running agent or window
 * that holds that chat).
 */
export type Target =
  | "focused"
  | {
      session: string;
    }
  | {
      workspace: string;
    }
  | {
      product: IdeProduct;
    }
  | {
      window: WindowTarget;
    }
  | {
      agent: AgentTarget;
    }
  | {
      chat: string;
    };
/**
 * How far a drive's result can be trusted.
 */
export type Verification = "none" | "acked" | "unverified" | "agent_recorded";
/**
 * One item of the daemon's event stream (`stream` lines after `events.subscribe`), tagged by `kind`.
 */
export type StreamEvent =
  | {
      kind: "session_connected";
      session: SessionInfo;
    }
  | {
      kind: "session_updated";
      session: SessionInfo;
    }
  | {
      kind: "session_disconnected";
      reason: string;
      session_id: string;
    }
  | {
      drive: DriveInfo;
      kind: "drive_updated";
    }
  | {
      applied: boolean;
      diagnostics: string[];
      interfaces: number;
      kind: "registry_reloaded";
    }
  | {
      kind: "observed";
      observation: ObservedEvent;
    }
  | {
      action: string;
      by: string;
      kind: "recovery_performed";
      ok: boolean;
      summary: string;
    }
  | {
      kind: "unknown";
    };
/**
 * One observation.
 */
export type ObservedEvent = {
  basis: ObservationBasis;
  /**
   * The chat (session, conversation, task) id within the store.
   */
  chat_id: string;
  /**
   * Where the chat's agent runs, when a terminal agent's own hook reported it.
   */
  process?: AgentProcess | null;
  /**
   * When Koru saw it (Unix ms).
   */
  seen_at_ms: number;
  /**
   * The store, by its registry interface id (`chat_history_claude_code_jsonl`, …).
   */
  store: string;
  /**
   * The store's own timestamp of the record (Unix ms), when it has one.
   */
  store_ts_ms?: number | null;
  /**
   * The workspace folder the chat belongs to, when the store says.
   */
  workspace?: string | null;
} & ObservedEvent1;
export type ObservedEvent1 =
  | {
      kind: "chat_seen";
    }
  | {
      /**
       * `sha256:` of the prompt with whitespace runs collapsed and ends trimmed.
       */
      digest: string;
      /**
       * The first characters, on one line.
       */
      excerpt: string;
      kind: "prompt_seen";
      /**
       * Its length in characters.
       */
      length: number;
    }
  | {
      kind: "reply_started";
    }
  | {
      /**
       * The start of the final reply text, on one line.
       */
      excerpt: string;
      kind: "reply_completed";
      /**
       * The final reply's length in characters.
       */
      length: number;
    }
  | {
      kind: "reply_resumed";
    }
  | {
      input: NeedsInputKind;
      kind: "needs_input";
    }
  | {
      kind: "cancelled";
    }
  | {
      kind: "failed";
      reason: string;
    }
  | {
      kind: "activity";
    }
  | {
      kind: "unknown";
    };
/**
 * A chat's state as observed.
 */
export type ObservedChatState = "idle" | "replying" | "needs_input";
/**
 * `recovery.run` (controller → daemon).
 */
export type RecoveryRun =
  | {
      action: "reprobe";
      params: {};
    }
  | {
      action: "reload_registry";
      params: {};
    }
  | {
      action: "retry_drive";
      params: {
        drive_id: string;
        route?: Route | null;
      };
    }
  | {
      action: "cancel_drive";
      params: {
        drive_id: string;
      };
    }
  | {
      action: "reconnect_plugin";
      params: {
        session_id: string;
      };
    }
  | {
      action: "focus_window";
      params: {
        session_id: string;
      };
    };
/**
 * What is wrong.
 */
export type VerifyProblemKind =
  | "edited"
  | "deleted"
  | "reordered"
  | "spliced"
  | "truncated"
  | "wrong_key"
  | "blob_mismatch"
  | "malformed"
  | "unusable";
/**
 * Where a turn stands.
 */
export type TurnState =
  ("cancelled" | "failed") | "complete" | "in_progress" | "needs_input" | "unknown";
/**
 * What a step was, by what it did (the store's own tool name is in `tool`).
 */
export type StepKind =
  "command" | "edit" | "write" | "read" | "search" | "web" | "agent" | "tool" | "unknown";
/**
 * How a step ended.
 */
export type StepOutcome = "ok" | "error" | "rejected" | "unknown";
/**
 * What changed.
 */
export type AuditFindingKind = "source_rewritten" | "source_compacted" | "unknown";

/**
 * `hello`: the first line every client sends.
 */
export interface Hello {
  capabilities?: Capability[];
  /**
   * Plugins: whether the window's chat can take a request now. Absent: unknown (the
   * daemon sends drives as before).
   */
  chat?: ChatReadiness | null;
  client: ClientInfo;
  /**
   * Required for plugins, absent for controllers.
   */
  ide?: IdeInfo | null;
  protocol: VersionRange;
  role: Role;
  /**
   * Controllers: what this connection may do. `observe` limits it to reading; the
   * daemon refuses its acting requests (`drive.create`, `drive.cancel`,
   * `recovery.run`, `observe.report`) with `forbidden_role`. Absent: `drive` (everything
   * the daemon's user may do). A client can only narrow its own rights with it:
   * `koru mcp --role observe`, or `koru dial-stdio --role observe` as an SSH forced command.
   */
  scope?: AccessScope | null;
  /**
   * Required for plugins, absent for controllers.
   */
  window?: WindowInfo | null;
}
/**
 * Whether a plugin's chat can take a request now (a usable language model, a default
 * agent), as the plugin knows it.
 */
export interface ChatReadiness {
  ready: boolean;
  /**
   * Why not, for a person (and what to do), when `ready` is false.
   */
  reason?: string | null;
}
/**
 * The name and version of the program that connects.
 */
export interface ClientInfo {
  name: string;
  version: string;
}
/**
 * The IDE a plugin runs in.
 */
export interface IdeInfo {
  /**
   * Where the IDE runs as it reports it (`vscode.env.appHost`: `desktop`, `web`, `server-distro`…).
   */
  app_host?: string | null;
  /**
   * The IDE's display name as it reports it (`vscode.env.appName`, `ApplicationInfo`).
   */
  app_name?: string;
  product: IdeProduct;
  /**
   * The IDE's URI scheme as it reports it (`vscode.env.uriScheme`), when it has one.
   */
  uri_scheme?: string | null;
  /**
   * The IDE's own version string.
   */
  version: string;
}
/**
 * An inclusive range of protocol versions.
 */
export interface VersionRange {
  max: number;
  min: number;
}
/**
 * The IDE window a plugin lives in.
 */
export interface WindowInfo {
  /**
   * Whether the window has focus right now, if known.
   */
  focused?: boolean | null;
  /**
   * The parent of `pid`, when the plugin knows it (helps find the window for OS injection).
   */
  parent_pid?: number | null;
  /**
   * A process id that belongs to the window (the extension host or the IDE itself).
   */
  pid?: number | null;
  /**
   * The remote the window is connected to (VS Code `env.remoteName`: `ssh-remote`,
   * `wsl`, `dev-container`, `codespaces`, …); absent for a local window.
   */
  remote_name?: string | null;
  /**
   * Where the IDE keeps this window's storage, so that the daemon can observe exactly
   * the chat stores the window writes.
   */
  storage?: WindowStorage | null;
  title?: string | null;
  /**
   * A window identifier meaningful to the plugin (X11 id, IDE frame id), if any.
   */
  window_id?: string | null;
  /**
   * Absolute paths of the folders open in this window.
   */
  workspace_folders?: string[];
  /**
   * Every folder of the window as a URI (`file:///home/me/repo`,
   * `vscode-remote://ssh-remote+box/home/me/repo`). For a remote window the folders live
   * on another machine: they are here and not in `workspace_folders`.
   */
  workspace_uris?: string[];
}
/**
 * Where an IDE window keeps its extensions' data (absolute local paths).
 */
export interface WindowStorage {
  /**
   * The IDE's global storage folder (VS Code: `…/User/globalStorage`, the parent of
   * `ExtensionContext.globalStorageUri`), where Cline-family extensions keep their tasks.
   */
  global_storage?: string | null;
  /**
   * This window's workspace storage folder (VS Code: `…/User/workspaceStorage/<id>`,
   * the parent of `ExtensionContext.storageUri`); the chat writes its sessions to
   * `chatSessions/` inside it.
   */
  workspace_storage?: string | null;
}
/**
 * `welcome`: the daemon's answer to an acceptable `hello`.
 */
export interface Welcome {
  daemon: DaemonInfo;
  /**
   * The daemon pings plugins at this interval; a plugin that stays silent for two
   * intervals is marked stale, for four it is dropped.
   */
  heartbeat_ms: number;
  /**
   * The longest line the daemon accepts, newline excluded.
   */
  max_line_bytes: number;
  /**
   * The protocol version both sides will speak: the highest both support.
   */
  protocol: number;
  /**
   * The scope the daemon holds this connection to, when the hello declared one: a
   * client that narrowed itself checks it is echoed (a daemon that predates scopes
   * would not enforce it).
   */
  scope?: AccessScope | null;
  /**
   * This connection's session id (plugins are listed under it).
   */
  session_id: string;
}
/**
 * Facts about the daemon a client talks to.
 */
export interface DaemonInfo {
  version: string;
}
/**
 * `error`: a refusal, in answer to the request whose `id` is in `ref` when there is one.
 */
export interface ErrorMessage {
  code: ErrorCode;
  location?: Location | null;
  /**
   * One human-readable sentence saying what was wrong and what to do.
   */
  message: string;
  /**
   * The `id` of the request this answers, if the line had one.
   */
  ref?: RequestId | null;
  /**
   * The daemon's supported protocol range (with `version_mismatch`).
   */
  supported?: VersionRange1 | null;
}
/**
 * Where in the input an error was found.
 */
export interface Location {
  /**
   * The 1-based column (JSON syntax errors) or byte offset (UTF-8 errors) inside the line.
   */
  column?: number | null;
  /**
   * The JSON field at fault, when known (`prompt`, `protocol.min`, …).
   */
  field?: string | null;
  /**
   * The 1-based number of the offending line on this connection.
   */
  line?: number | null;
}
/**
 * An inclusive range of protocol versions.
 */
export interface VersionRange1 {
  max: number;
  min: number;
}
/**
 * `bye`: the sender is about to close the connection.
 */
export interface Bye {
  reason?: string | null;
}
/**
 * `drive` (daemon → plugin): deliver this prompt, ack every stage.
 */
export interface DriveRequest {
  drive_id: string;
  options: DriveOptions;
  prompt: string;
  route: Route;
  /**
   * The steps to run, in order. Empty: the plugin uses its own steps for `route`.
   */
  steps?: DriveStep[];
}
/**
 * What the sender wants done with the prompt.
 */
export interface DriveOptions {
  /**
   * For a terminal agent: a prompt that starts with a character the agent reads as a
   * mode switch (`/` a slash command, `!` a shell command, `#` a memory note) is typed
   * as it is, for the agent to run as such. Without it, such a prompt is refused.
   */
  agent_command?: boolean;
  /**
   * What to do while the chat is busy.
   */
  busy?: BusyPolicy & string;
  /**
   * Start a new chat before sending.
   */
  new_chat?: boolean;
  /**
   * Submit the prompt (true) or leave it in the chat input, unsent (false).
   */
  submit?: boolean;
  /**
   * How long the whole drive may take before it ends `timed_out` (daemon default if absent).
   */
  timeout_ms?: number | null;
}
/**
 * One step the plugin runs for a drive: an IDE command with arguments, and the stage it proves.
 */
export interface DriveStep {
  /**
   * Arguments for the command; the string `"$prompt"` anywhere in them stands for the prompt.
   */
  args?: unknown[];
  /**
   * The IDE command or action id to run.
   */
  command: string;
  /**
   * A stage a plugin reports for a drive.
   */
  proves: "received" | "focused" | "pasted" | "submitted" | "failed";
}
/**
 * `cancel` (daemon → plugin): stop working on this drive; it has ended on the daemon's side.
 */
export interface DriveCancelNotice {
  drive_id: string;
  reason: string;
}
/**
 * `ack` (plugin → daemon): the drive reached a stage, or failed with a blocker.
 */
export interface Ack {
  /**
   * Required in spirit with `stage: failed`; the daemon substitutes `plugin_failed` if absent.
   */
  blocker?: Blocker | null;
  drive_id: string;
  /**
   * With `stage: submitted`: what proves it (absent: `command_returned`).
   */
  evidence?: SubmitEvidence | null;
  /**
   * With `stage: failed` and blocker `chat_refused`: what kind of refusal it was. A
   * `not_ready` refusal came before the chat took the prompt, from a chat still getting
   * ready (no usable model yet): the daemon holds the drive and sends it again.
   */
  refusal?: Refusal | null;
  stage: AckStage;
}
/**
 * Why a drive (or one step of it) could not go on, and in what situation.
 */
export interface Blocker {
  /**
   * A classified code such as `plugin_disconnected`, `timeout`, `focus_mismatch` (see `blocker`).
   */
  code: string;
  /**
   * What exactly happened, for a person.
   */
  detail?: string;
}
/**
 * `event` (plugin → daemon): something changed in the IDE.
 */
export interface PluginEvent {
  event: PluginEventKind;
}
/**
 * `terminals` (plugin → daemon, no reply): every integrated terminal of the plugin's
 * window, sent after the welcome and again whenever one opens, closes or gets its
 * process. Each report replaces the previous one. The daemon looks under each terminal's
 * shell for a terminal agent (Claude Code, Codex CLI, Gemini CLI, opencode) and types into
 * it through `terminal.io`.
 */
export interface TerminalsReport {
  terminals: IdeTerminal[];
}
/**
 * One integrated terminal of an IDE window.
 */
export interface IdeTerminal {
  /**
   * Where the IDE gives no pid: the value of `KORU_TERMINAL_ID` the plugin put into the
   * environment the IDE started the terminal's shell with. The daemon takes as the shell
   * the topmost process whose environment carries it.
   */
  env_tag?: string | null;
  /**
   * Its name as the IDE shows it.
   */
  name: string;
  /**
   * The terminal's first process (its shell), once the IDE knows it.
   */
  shell_pid?: number | null;
  /**
   * The plugin's id for it: unique in the window, stable for the terminal's life (the
   * VS Code extension also gives it to the terminal's processes as `KORU_TERMINAL_ID`
   * where the IDE lets it).
   */
  terminal_id: string;
}
/**
 * `capabilities` (plugin → daemon, no reply): the plugin's capabilities now, replacing
 * those of its `hello`. Sent when they change while the window runs: an extension
 * installed, enabled or activated after the hello registers the commands a route needs
 * (the Claude Code extension's, for one).
 */
export interface CapabilitiesReport {
  capabilities: Capability[];
}
/**
 * `clipboard` (daemon → plugin): read the system clipboard's text, or make `text` its
 * content, as the plugin's IDE sees it (the clipboard a paste chord in its window pastes
 * from). The plugin answers `clipboard.result` with the same `order_id`.
 */
export interface ClipboardOrder {
  action: ClipboardAction;
  order_id: string;
}
/**
 * `clipboard.result` (plugin → daemon): the text read (absent when the clipboard holds
 * none), or why the order could not be done.
 */
export interface ClipboardResult {
  error?: string | null;
  order_id: string;
  text?: string | null;
}
/**
 * `terminal.io` (daemon → plugin): read one terminal's screen, or write bytes to it. The
 * plugin answers `terminal.io.result` with the same `order_id`.
 */
export interface TerminalIo {
  action: TerminalAction;
  order_id: string;
  terminal_id: string;
}
/**
 * `terminal.io.result` (plugin → daemon): how a `terminal.io` went.
 */
export interface TerminalIoResult {
  /**
   * Why it could not be done (the terminal is gone; its screen is not known to the
   * plugin). Nothing was written when this is set.
   */
  error?: string | null;
  order_id: string;
  /**
   * For `read`: the screen.
   */
  screen?: string | null;
}
/**
 * `status` (controller → daemon) has no fields; its reply `status.result` is this.
 */
export interface StatusInfo {
  controllers: number;
  drives_active: number;
  drives_total: number;
  /**
   * The HTTP endpoint (`koru daemon --http`), when the daemon serves one.
   */
  http?: HttpStatus | null;
  /**
   * The drive journal (absent with `koru daemon --no-journal`).
   */
  journal?: JournalStatus | null;
  /**
   * The chat-store roots the daemon observes and their problems (empty when
   * observing is off).
   */
  observers?: ObserverStatus[];
  /**
   * Whether the daemon observes the chat-history stores (`koru daemon --no-observe`
   * turns it off), so that doctor can tell observing off from nothing to observe.
   */
  observing?: boolean;
  pid: number;
  plugins: number;
  /**
   * The desktop portal's remote-input session as this daemon holds it (absent where the
   * daemon has no portal injector), so that doctor can tell what the desktop said.
   */
  portal?: PortalStatus | null;
  protocol: VersionRange1;
  /**
   * The most recent refused handshakes (newest last), so that doctor can explain a
   * plugin that could not connect.
   */
  refused_handshakes?: RefusedHandshake[];
  /**
   * The registry the daemon routes with.
   */
  registry?: RegistryStatus & {
    [k: string]: unknown | undefined;
  };
  socket: string;
  started_at_ms: number;
  version: string;
}
/**
 * Where the daemon serves HTTP and how to authenticate there. Shown only to peers of the
 * daemon's own user (the socket is 0600 and the peer uid is checked).
 */
export interface HttpStatus {
  /**
   * The MCP streamable HTTP endpoint, e.g. `http://127.0.0.1:8765/mcp`.
   */
  mcp_url: string;
  /**
   * The bearer token every request must carry (`Authorization: Bearer <token>`).
   */
  token: string;
  /**
   * The file the token is kept in (mode 0600).
   */
  token_file: string;
}
/**
 * The journal as `status` shows it.
 */
export interface JournalStatus {
  /**
   * The journal's folder.
   */
  dir: string;
  /**
   * Set when the journal could not be written (the daemon goes on; this says why).
   */
  error?: string | null;
  /**
   * Longest time between a write and its `fdatasync`.
   */
  fsync_ms: number;
  /**
   * `entry_hash` of the last entry written: write it down elsewhere to prove later that
   * nothing before it changed.
   */
  head: string;
  /**
   * Whether entries are keyed with HMAC-SHA256 (`KORU_JOURNAL_HMAC_KEY`).
   */
  keyed: boolean;
  /**
   * `seq` of the last entry written.
   */
  last_seq: number;
  /**
   * `full` (prompt texts kept in `blobs/`) or `digest` (no prompt text on disk).
   */
  prompts: string;
}
/**
 * How one chat-store root is being observed, for `status` and doctor.
 */
export interface ObserverStatus {
  /**
   * True for a root observed only because sessions announced it (no registry location
   * covers it): it is dropped when the last session in `announced_by` ends.
   */
  announced?: boolean;
  /**
   * The plugin sessions whose windows announced this root in `window.storage`, or a
   * folder inside it that this root already covers (so it is not watched twice).
   */
  announced_by?: string[];
  /**
   * Whether the directory exists now.
   */
  exists: boolean;
  /**
   * Session files being followed.
   */
  files: number;
  /**
   * How the daemon follows it now (absent from daemons before this field).
   */
  mode?: ObserverMode | null;
  /**
   * While it is polled (`mode: polled`): how often and what a pass costs. Passes are
   * spaced so that polling takes at most a thousandth of a core (absent otherwise).
   */
  poll?: PollCost | null;
  /**
   * Files that cannot be read or hold something that is not the store's format (the
   * first few; never data).
   */
  problems?: StoreProblem[];
  /**
   * The directory watched: a registry `locations` entry, expanded, or a folder a
   * plugin session announced in its hello's `window.storage` (see `announced`).
   */
  root: string;
  /**
   * The registry interface id of the store.
   */
  store: string;
  /**
   * While it does not exist: the nearest existing folder above it, watched so that the
   * root is read the moment it appears.
   */
  waiting_on?: string | null;
  /**
   * Why it is not watched, when it is not.
   */
  watch_error?: string | null;
  /**
   * Whether change notifications arrive for it (false: inotify refused a watch, e.g.
   * `fs.inotify.max_user_watches` reached; the periodic rescan still reads it).
   */
  watched: boolean;
  /**
   * When the inotify watch limit refused it: the folders it needs watches for (one
   * each), to size `fs.inotify.max_user_watches`.
   */
  watches_needed?: number | null;
}
/**
 * What polling a root that cannot be watched costs.
 */
export interface PollCost {
  /**
   * Time between two passes, in ms (at least 2,000; longer when a pass is slow).
   */
  every_ms: number;
  /**
   * Files looked at in the last pass.
   */
  files: number;
  /**
   * How long the last pass took (listing the folders, a `stat` per file, reading
   * what changed), in µs.
   */
  last_pass_us: number;
}
/**
 * A store file Koru cannot use.
 */
export interface StoreProblem {
  detail: string;
  /**
   * `unreadable`, `malformed` or `busy`.
   */
  kind: "unreadable" | "malformed" | "busy";
  path: string;
}
/**
 * The daemon's portal session (`status.result.portal`).
 */
export interface PortalStatus {
  clipboard?: boolean | null;
  consent: PortalConsent;
  /**
   * What the desktop or the portal said, for people.
   */
  detail?: string | null;
  /**
   * With `agreed`: whether the desktop gave a restore token, kept so that the next daemon
   * start is not asked again. GNOME 43's portal gives none for remote input: it asks at
   * each daemon start.
   */
  remembered?: boolean | null;
  /**
   * What the portal offers, once asked: its RemoteDesktop version and whether it has a
   * Clipboard interface (without one, only what can be typed goes through it).
   */
  remote_desktop_version?: number | null;
  /**
   * When it came to stand so (Unix ms); absent for `none`.
   */
  since_ms?: number | null;
}
/**
 * A connection whose hello the daemon refused.
 */
export interface RefusedHandshake {
  at_ms: number;
  client?: ClientInfo | null;
  code: ErrorCode;
  message: string;
  peer_pid?: number | null;
  product?: IdeProduct | null;
  protocol?: VersionRange1 | null;
}
/**
 * The daemon's registry in a few facts.
 */
export interface RegistryStatus {
  /**
   * Problems found in the layer files at the last (re)load. When the last reload had
   * problems the daemon kept the registry it had before.
   */
  diagnostics: string[];
  /**
   * How many interfaces the registry in use defines.
   */
  interfaces: number;
  /**
   * The layers in use, e.g. `built-in`, `user: /home/me/.config/koru/registry.yaml`.
   */
  layers: string[];
}
/**
 * `sessions.list` (controller → daemon): optional filters.
 */
export interface SessionsList {
  /**
   * Also look for terminal agents (Claude Code, Codex CLI, Gemini CLI, opencode) in the
   * user's tmux panes and list them in `agents` (a look on demand: one `tmux
   * list-panes` per server and one read of the process table).
   */
  agents?: boolean;
  product?: IdeProduct | null;
  workspace?: string | null;
}
/**
 * `sessions.list.result`: the plugin sessions, oldest first, and, when asked, the terminal
 * agents found.
 */
export interface SessionsListResult {
  agents?: TerminalAgentInfo[];
  sessions: SessionInfo[];
}
/**
 * A terminal agent running in a terminal the daemon can see.
 */
export interface TerminalAgentInfo {
  /**
   * `t_` and 12 hex digits, stable while the agent's process runs in the same pane.
   */
  agent_id: string;
  /**
   * The agent's chat, from its history store, when the observers know one for the folder.
   */
  chat?: AgentChat | null;
  /**
   * The agent's process.
   */
  pid: number;
  /**
   * `claude-code`, `codex`, `gemini-cli` or `opencode`.
   */
  product: string;
  state: AgentState;
  terminal: TerminalPlace;
  /**
   * The folder it runs in (the pane's current folder).
   */
  workspace: string;
}
/**
 * A terminal agent's chat in its history store.
 */
export interface AgentChat {
  chat_id: string;
  store: string;
}
/**
 * One connected plugin, as `sessions.list` reports it.
 */
export interface SessionInfo {
  /**
   * The drive the session is working on, if any.
   */
  active_drive?: string | null;
  capabilities?: Capability[];
  chat: ChatState;
  /**
   * Whether the window's chat can take a request now, as its plugin last said (absent:
   * the plugin does not say).
   */
  chat_readiness?: ChatReadiness | null;
  client: ClientInfo;
  connected_at_ms: number;
  health: SessionHealth;
  ide?: IdeInfo | null;
  last_seen_ms: number;
  /**
   * The plugin's process as the kernel reports it (SO_PEERCRED).
   */
  peer_pid?: number | null;
  /**
   * The negotiated protocol version.
   */
  protocol: number;
  /**
   * How many drives wait for this session.
   */
  queued_drives?: number;
  role: Role;
  session_id: string;
  /**
   * The window's integrated terminals, as its plugin last reported them (`terminals`;
   * absent when it reported none).
   */
  terminals?: IdeTerminal[];
  window?: WindowInfo & {
    [k: string]: unknown | undefined;
  };
}
/**
 * `drives.list` (controller → daemon): drives, newest last. Without `history`, the ones
 * the daemon keeps in memory (running, and the last 1,000 ended); with it, every drive in
 * the journal, a page at a time.
 */
export interface DrivesList {
  /**
   * Only drives that have not ended.
   */
  active_only?: boolean;
  /**
   * Only drives accepted before this one (the oldest drive of the previous page).
   */
  before?: string | null;
  /**
   * Also drives from the journal (older ones, and ones from before a restart).
   */
  history?: boolean;
  /**
   * At most this many (the newest of the matches); with `history` 100 when absent, and
   * never more than 1,000.
   */
  limit?: number | null;
  /**
   * Only drives whose session is this one.
   */
  session_id?: string | null;
  /**
   * Only drives created at or after this time (Unix ms).
   */
  since_ms?: number | null;
}
/**
 * `drives.list.result`.
 */
export interface DrivesListResult {
  drives: DriveInfo[];
  /**
   * Older matches exist beyond this page (ask again with `before` = the first drive's id).
   */
  more?: boolean;
}
/**
 * The public record of a drive, as controllers see it.
 */
export interface DriveInfo {
  /**
   * Every route the planner considered, in order, with what happened.
   */
  attempts?: RouteAttempt[];
  /**
   * Set when the drive failed, timed out or was cancelled.
   */
  blocker?: Blocker | null;
  created_at_ms: number;
  drive_id: string;
  /**
   * The chat's own record of the prompt and of how its turn ended (store, file, place,
   * digests), once the daemon has read them back from the chat's store.
   */
  evidence?: DriveEvidence | null;
  finished_at_ms?: number | null;
  /**
   * Every state the drive went through, in order, with its time.
   */
  history: StageRecord[];
  /**
   * What the chat's own history showed (docs/observers.md), once the observers matched
   * the prompt to this drive.
   */
  observation?: DriveObservation | null;
  options: DriveOptions;
  /**
   * The prompt's length in characters.
   */
  prompt_chars: number;
  /**
   * The first characters of the prompt, for listings.
   */
  prompt_excerpt: string;
  /**
   * The drive this one retries (recovery action `retry_drive`).
   */
  retry_of?: string | null;
  route: Route;
  /**
   * The session the target resolved to (empty for a window target without a plugin).
   */
  session_id: string;
  state: DriveState;
  /**
   * For a drive submitted by a plugin: what proves `submitted` (the plugin's evidence;
   * `command_returned` when it gave none). Absent for OS injection (see `verification`).
   */
  submit_evidence?: SubmitEvidence | null;
  target: Target;
  verification?: Verification & string;
  /**
   * Why a drive that has not been sent yet is waiting (`chat_not_ready`, `chat_busy`,
   * another drive running), while it waits.
   */
  waiting?: Blocker | null;
}
/**
 * One route the planner considered for a drive, in order.
 */
export interface RouteAttempt {
  blocker?: Blocker | null;
  finished_at_ms?: number | null;
  /**
   * What an operator can do about the blocker (from the registry).
   */
  hint?: string | null;
  /**
   * The registry interface.
   */
  interface: string;
  /**
   * Why the route ran other than the drive asked, when it did: a drive sent in a new
   * chat because nothing here can press the submit key of the route that would have
   * used the current one (`opened a new chat: …`).
   */
  note?: string | null;
  outcome: AttemptOutcome;
  /**
   * The last stage this route reached.
   */
  reached?: DriveState | null;
  route: Route;
  started_at_ms?: number | null;
  /**
   * How an OS-injection route put the prompt into the chat input, when it did: pasted
   * through a clipboard, or typed key by key (no clipboard to paste through). The
   * stage is `pasted` either way (the text is in the input).
   */
  text?: TextDelivery | null;
}
/**
 * The chat's own record of a drive (docs/journal.md, "Evidence"): where the chat's store
 * holds the drive's prompt and how its turn ended, with the SHA-256 of those records'
 * bytes as they are in the store, so that anyone holding the chat's file can check them.
 * The daemon reads it back from the store when the observers match the prompt and when
 * the turn settles, and journals each part (`drive_prompt_recorded`,
 * `drive_outcome_recorded`).
 */
export interface DriveEvidence {
  /**
   * How the turn ended (the latest stage recorded: a turn that asked for input and then
   * replied shows the reply).
   */
  outcome?: OutcomeEvidence | null;
  /**
   * The record of the prompt.
   */
  prompt?: ChatRecordRef | null;
}
/**
 * How a drive's turn ended, as the chat's store records it.
 */
export interface OutcomeEvidence {
  /**
   * `explicit`: `record` is the store's own record of the end (or of the question);
   * `inferred`: the store writes no such record, and `record` is the reply's last text.
   */
  basis: "explicit" | "inferred";
  /**
   * The record, when the store has one for this stage.
   */
  record?: ChatRecordRef | null;
  /**
   * The reply (the agent's last text of the turn), when it wrote one.
   */
  reply?: TextDigest | null;
  /**
   * `replied`, `needs_input`, `cancelled` or `failed`.
   */
  stage:
    ("replying" | "needs_input" | "cancelled" | "failed") | "observed" | "replied" | "ambiguous";
}
/**
 * One record of a chat in its store.
 */
export interface ChatRecordRef {
  chat_id: string;
  /**
   * The chat's file (or database) the record was read from.
   */
  file: string;
  record: StoreRecord;
  /**
   * The store (registry interface id) and the chat.
   */
  store: string;
  /**
   * The store's own time for it, when it records one.
   */
  store_at_ms?: number | null;
  /**
   * The turn it belongs to (0 is the chat's first).
   */
  turn: number;
}
/**
 * A text by its SHA-256 (of its UTF-8 bytes, lowercase hex) and length.
 */
export interface TextDigest {
  bytes: number;
  chars: number;
  sha256: string;
}
/**
 * When a drive entered a state.
 */
export interface StageRecord {
  /**
   * Unix time in milliseconds.
   */
  at_ms: number;
  state: DriveState;
}
/**
 * What the chat-store observers proved about a drive.
 */
export interface DriveObservation {
  /**
   * When the stage was observed (the store's time when it has one).
   */
  at_ms: number;
  basis: ObservationBasis;
  chat_id: string;
  /**
   * Why it failed, or which drives made it ambiguous.
   */
  detail?: string | null;
  reply_excerpt?: string | null;
  reply_length?: number | null;
  stage: ObservedStage;
  store: string;
}
/**
 * An IDE window without a plugin: by process id (its whole process family counts) and/or
 * a title regular expression.
 */
export interface WindowTarget {
  pid?: number | null;
  title?: string | null;
}
/**
 * A terminal agent by what it is and where it runs: the agent of `product`
 * (`claude-code`, `codex`, `gemini-cli`, `opencode`) whose folder is `workspace` or inside
 * it (absent: any folder).
 */
export interface AgentTarget {
  product: string;
  workspace?: string | null;
}
/**
 * `drive.create` (controller → daemon): push a prompt into a chat.
 */
export interface DriveCreate {
  options?: DriveOptions & {
    [k: string]: unknown | undefined;
  };
  prompt: string;
  target: Target;
}
/**
 * `drive.get` / `drive.cancel` (controller → daemon): which drive.
 */
export interface DriveRef {
  drive_id: string;
}
/**
 * The reply to `drive.create`, `drive.get` and `drive.cancel`.
 */
export interface DriveResult {
  drive: DriveInfo;
}
/**
 * One item on a subscribed controller's event stream.
 */
export interface StreamItem {
  event: StreamEvent;
  /**
   * Increases by one for every event the daemon publishes.
   */
  seq: number;
}
/**
 * Where a terminal agent runs, as its hook saw it: the agent's process (the hook's nearest
 * ancestor that is an agent) and, inside tmux, the server's socket and the pane
 * (`$TMUX`, `$TMUX_PANE`).
 */
export interface AgentProcess {
  pid?: number | null;
  tmux_pane?: string | null;
  tmux_socket?: string | null;
}
/**
 * `chats.list` (controller → daemon): the chats the observers know, optionally filtered.
 */
export interface ChatsList {
  /**
   * Only this store (interface id).
   */
  store?: string | null;
  /**
   * Only chats of this workspace (or a folder inside it).
   */
  workspace?: string | null;
}
/**
 * `chats.list.result`.
 */
export interface ChatsListResult {
  chats: ChatInfo[];
}
/**
 * A chat Koru knows from a store.
 */
export interface ChatInfo {
  chat_id: string;
  /**
   * The last observation's time (Unix ms, the store's when it has one).
   */
  last_activity_ms: number;
  /**
   * The last prompt's excerpt, if one was seen.
   */
  last_prompt?: string | null;
  state: ObservedChatState;
  store: string;
  workspace?: string | null;
}
/**
 * `observe.report` (controller → daemon): observations from outside the stores — e.g.
 * Claude Code's hooks (`koru hook claude-code`) for what its transcript never records.
 */
export interface ObserveReport {
  observations: ObservedEvent[];
}
/**
 * `observe.reported`: how many observations were applied.
 */
export interface ObserveReported {
  applied: number;
}
/**
 * `recovery.result`: what the action did.
 */
export interface RecoveryResult {
  /**
   * The action's wire name.
   */
  action: string;
  blocker?: Blocker | null;
  /**
   * The drive the action made or changed (`retry_drive`, `cancel_drive`).
   */
  drive?: DriveInfo | null;
  /**
   * True when the action did what it says; false with `blocker` when it could not.
   */
  ok: boolean;
  /**
   * What happened, for a person.
   */
  summary: string;
}
/**
 * `journal.verify` (controller → daemon): check the daemon's journal now.
 */
export interface JournalVerify {}
/**
 * `journal.verify.result`.
 */
export interface JournalVerifyResult {
  report: VerifyReport;
}
/**
 * What checking a journal found.
 */
export interface VerifyReport {
  blobs: BlobCounts;
  /**
   * The folder checked.
   */
  dir: string;
  /**
   * Entries read and checked.
   */
  entries: number;
  first_seq?: number | null;
  /**
   * `entry_hash` of the last entry that checked out.
   */
  head?: string | null;
  /**
   * Whether the entries are keyed (HMAC-SHA256).
   */
  keyed: boolean;
  last_seq?: number | null;
  /**
   * Set when the folder is a chat's audit ledger (its first entry is `ledger_opened`).
   */
  ledger?: LedgerInfo | null;
  /**
   * The first thing that is wrong (checking stops there).
   */
  problem?: VerifyProblem | null;
  /**
   * Entries before this `seq` were pruned by retention; a checkpoint entry vouches for
   * where the remaining chain starts.
   */
  pruned_through?: number | null;
  /**
   * Segment files read.
   */
  segments: number;
  /**
   * `intact`, `tampered` (see `problem`) or `unusable` (see `problem`: no journal there,
   * unreadable, keyed without a key).
   */
  verdict: "intact" | "tampered" | "unusable";
}
/**
 * Prompt blobs the chain refers to, and what became of them.
 */
export interface BlobCounts {
  /**
   * Not there: purged for privacy, or never kept (`--journal-prompts digest`). Not
   * tampering: the chain holds each prompt's digest and length either way.
   */
  absent: number;
  /**
   * Present and matching their digest.
   */
  present: number;
  /**
   * Distinct prompt digests the entries name.
   */
  referenced: number;
}
/**
 * What `koru verify` says of a folder whose first entry is `ledger_opened`: an audit
 * ledger of one chat.
 */
export interface LedgerInfo {
  chat_id: string;
  /**
   * `chat_item` entries checked.
   */
  items: number;
  /**
   * The chat's file when the ledger was opened.
   */
  source: string;
  store: string;
}
/**
 * One thing wrong with a journal, where it is.
 */
export interface VerifyProblem {
  kind: VerifyProblemKind;
  /**
   * 1-based line in that segment.
   */
  line?: number | null;
  message: string;
  /**
   * The segment file, relative to the journal folder.
   */
  segment?: string | null;
  /**
   * The `seq` of the first bad entry (the one expected there when it is missing).
   */
  seq?: number | null;
}
/**
 * `chat.read` (controller → daemon): turns of one chat, read back from the chat's own
 * store when asked. Name the chat (`chat_id`, with `store` when two stores have a chat of
 * that id) or a drive (`drive_id`: the turn its prompt started, in the chat the observers
 * matched it to).
 */
export interface ChatRead {
  chat_id?: string | null;
  /**
   * The drive whose turn to read (instead of `chat_id`).
   */
  drive_id?: string | null;
  /**
   * The most characters of each reply and prompt to return (default and maximum
   * 100,000).
   */
  max_chars?: number | null;
  /**
   * Where the reply text starts, in characters (paging a long reply; default 0).
   */
  reply_offset?: number | null;
  /**
   * The store (registry interface id) of `chat_id`.
   */
  store?: string | null;
  /**
   * One turn by its index (0 is the chat's first), e.g. to page through its reply.
   */
  turn?: number | null;
  /**
   * The last N turns (default 1, at most 50). Ignored with `drive_id` or `turn`.
   */
  turns?: number | null;
}
/**
 * `chat.read.result`: the turns asked for, oldest first.
 */
export interface ChatReadResult {
  chat_id: string;
  /**
   * The drive asked about, when the read named one.
   */
  drive_id?: string | null;
  /**
   * What this store does not record (so its absence in a turn says nothing): any of
   * `timestamps`, `model`, `usage`, `step_outcomes`, `exit_status`, `file_paths`,
   * `steps`.
   */
  not_recorded?: string[];
  /**
   * The file (or database) the turns were read from.
   */
  source?: string | null;
  store: string;
  turns: ChatTurn[];
  /**
   * How many turns the chat has in its store.
   */
  turns_total: number;
  workspace?: string | null;
}
/**
 * One prompt and what the agent did with it.
 */
export interface ChatTurn {
  /**
   * The turn's last record's time (Unix ms), when the store has it.
   */
  ended_ms?: number | null;
  /**
   * Why the turn failed, when it did.
   */
  error?: string | null;
  /**
   * The turn's position in the chat (0 is the first).
   */
  index: number;
  /**
   * The model that answered, as the store names it.
   */
  model?: string | null;
  /**
   * The user's prompt (absent for a turn the agent started by itself, e.g. after a
   * background task's notice); cut at `max_chars` when `prompt_chars` is larger.
   */
  prompt?: string | null;
  /**
   * The prompt's whole length in characters.
   */
  prompt_chars?: number;
  /**
   * The final reply text, from `reply_offset`, at most `max_chars` characters.
   */
  reply?: string | null;
  /**
   * The whole reply's length in characters.
   */
  reply_chars?: number;
  /**
   * Set when more of the reply follows `reply`: the `reply_offset` to ask for next.
   */
  reply_next_offset?: number | null;
  /**
   * Where `reply` starts in the whole reply, in characters.
   */
  reply_offset?: number;
  /**
   * The prompt's time (Unix ms), when the store has it.
   */
  started_ms?: number | null;
  state: TurnState;
  /**
   * The agent's steps in order (tool calls and their outcomes).
   */
  steps?: TurnStep[];
  usage?: TurnUsage | null;
}
/**
 * One step of the agent.
 */
export interface TurnStep {
  at_ms?: number | null;
  /**
   * The command line, for a command.
   */
  command?: string | null;
  /**
   * The start of the error, when it failed.
   */
  error?: string | null;
  exit_code?: number | null;
  kind: StepKind;
  outcome: StepOutcome;
  /**
   * The files or folders it touched, as the store names them.
   */
  paths?: string[];
  /**
   * Its arguments in short, on one line.
   */
  summary: string;
  /**
   * The tool's name as the store records it (`Bash`, `exec_command`, `replace_in_file`, …).
   */
  tool: string;
}
/**
 * Tokens the turn used, as far as the store says.
 */
export interface TurnUsage {
  cache_read_tokens?: number | null;
  cache_write_tokens?: number | null;
  input_tokens?: number | null;
  output_tokens?: number | null;
  reasoning_tokens?: number | null;
}
/**
 * `chat.audit` (controller → daemon): audit one chat the observers know into its ledger.
 * Without `chat_id` the most recently active chat is audited. The daemon writes the
 * ledger (sealed with its own `KORU_JOURNAL_HMAC_KEY`, when set) and answers
 * `chat.audit.result` once it is on disk.
 */
export interface ChatAudit {
  /**
   * A chat id as `chats.list` gives it.
   */
  chat_id?: string | null;
  /**
   * Also write the ledger's self-verifying HTML page to this file: an absolute path, or
   * a file name alone for a page in the ledger's folder.
   */
  html?: string | null;
  /**
   * The ledger's folder (absolute); default `$XDG_STATE_HOME/koru/audits/<store>/<chat>/`.
   */
  out?: string | null;
  /**
   * The store (registry interface id) of `chat_id`, when two stores have a chat of that
   * id; without `chat_id`, the most recent chat of this store.
   */
  store?: string | null;
}
/**
 * `chat.audit.result`: what the audit did. A `finding` of kind `source_rewritten` means
 * that nothing new was imported (`koru audit` exits 1).
 */
export interface ChatAuditResult {
  chat_id: string;
  /**
   * The ledger's folder.
   */
  dir: string;
  /**
   * What the audit found changed in the part of the source imported before, when
   * anything did (recorded in the ledger as an entry of this kind).
   */
  finding?: AuditFinding | null;
  head: string;
  /**
   * The HTML page written, when one was asked for.
   */
  html?: string | null;
  /**
   * Items this run imported.
   */
  items_added: number;
  /**
   * Items the ledger holds now.
   */
  items_total: number;
  /**
   * Whether the ledger's entries are keyed (HMAC-SHA256).
   */
  keyed: boolean;
  /**
   * The ledger's last `seq` and `entry_hash` after this run.
   */
  last_seq: number;
  /**
   * Whether this audit opened the ledger (its first run).
   */
  opened: boolean;
  /**
   * The chat's file (or database) the items were read from.
   */
  source: string;
  store: string;
}
/**
 * A change found in the part of a source already imported.
 */
export interface AuditFinding {
  /**
   * The first imported item that differs (its `index` in the ledger), when one does.
   */
  item?: number | null;
  kind: AuditFindingKind;
  message: string;
}

/** Every message type of this protocol version, as the schema lists them. */
export const MESSAGE_TYPES: readonly string[] = [
  "hello",
  "welcome",
  "error",
  "ping",
  "pong",
  "bye",
  "drive",
  "cancel",
  "ack",
  "event",
  "terminals",
  "capabilities",
  "clipboard",
  "clipboard.result",
  "terminal.io",
  "terminal.io.result",
  "status",
  "status.result",
  "sessions.list",
  "sessions.list.result",
  "drives.list",
  "drives.list.result",
  "drive.create",
  "drive.get",
  "drive.cancel",
  "drive.result",
  "events.subscribe",
  "events.subscribed",
  "stream",
  "chats.list",
  "chats.list.result",
  "observe.report",
  "observe.reported",
  "recovery.run",
  "recovery.result",
  "journal.verify",
  "journal.verify.result",
  "chat.read",
  "chat.read.result",
  "chat.audit",
  "chat.audit.result",
];

//! Sessions and controller requests: the plugin session record, plugin events, the daemon's event stream, and the request/reply bodies of `status`, `sessions.list`, `drives.list`, `drive.*`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Capability, ClientInfo, DriveInfo, DriveOptions, IdeInfo, IdeProduct, Role, Target, WindowInfo,
};

/// Whether a session answers its heartbeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionHealth {
    Active,
    /// Silent for more than two heartbeat intervals; dropped after four.
    Stale,
}

/// What the plugin last said about its chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChatState {
    Unknown,
    Idle,
    Busy,
}

/// One connected plugin, as `sessions.list` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    pub session_id: String,
    pub role: Role,
    pub client: ClientInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ide: Option<IdeInfo>,
    #[serde(default)]
    pub window: WindowInfo,
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// The negotiated protocol version.
    pub protocol: u32,
    /// The plugin's process as the kernel reports it (SO_PEERCRED).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_pid: Option<u32>,
    pub connected_at_ms: u64,
    pub last_seen_ms: u64,
    pub health: SessionHealth,
    pub chat: ChatState,
    /// The drive the session is working on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_drive: Option<String>,
    /// How many drives wait for this session.
    #[serde(default)]
    pub queued_drives: usize,
    /// Whether the window's chat can take a request now, as its plugin last said (absent:
    /// the plugin does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_readiness: Option<crate::ChatReadiness>,
    /// The window's integrated terminals, as its plugin last reported them (`terminals`;
    /// absent when it reported none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terminals: Vec<IdeTerminal>,
}

/// `event` (plugin → daemon): something changed in the IDE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginEvent {
    pub event: PluginEventKind,
}

/// The things a plugin reports, tagged by `kind`; unknown kinds are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PluginEventKind {
    /// The chat is replying or waiting for input.
    ChatBusy,
    /// The chat is ready for a prompt.
    ChatIdle,
    /// The window gained or lost focus.
    Focus { focused: bool },
    /// The workspace folders changed.
    WorkspaceChanged { workspace_folders: Vec<String> },
    /// The window is about to close.
    WindowClosing,
    /// Whether the chat can take a request now changed (a model became usable, the user
    /// signed out, …).
    ChatReadiness {
        ready: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// What became of a drive's request in the chat after `submitted`, as the chat itself
    /// reported it to the plugin (the outcome of VS Code's `blockOnResponse`).
    ChatOutcome {
        drive_id: String,
        outcome: ChatOutcome,
    },
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// What the chat did with a drive's request after accepting it, in the observers' vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChatOutcome {
    /// The chat finished its reply. The chat does not hand its reply text to plugins, so
    /// `excerpt` and `length` are given only when the plugin has them.
    ReplyCompleted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        excerpt: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        length: Option<usize>,
    },
    /// The chat waits for the user: a tool to approve (`permission`), a question to answer
    /// (`question`), or something else (`other`); `detail` says what, when known.
    NeedsInput {
        input: crate::NeedsInputKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The chat's response failed after it accepted the request; `detail` is its message.
    Failed { detail: String },
    /// The response was cancelled.
    Cancelled,
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// `status` (controller → daemon) has no fields; its reply `status.result` is this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatusInfo {
    pub version: String,
    pub pid: u32,
    pub socket: String,
    pub protocol: crate::VersionRange,
    pub started_at_ms: u64,
    pub plugins: usize,
    pub controllers: usize,
    pub drives_active: usize,
    pub drives_total: usize,
    /// The registry the daemon routes with.
    #[serde(default)]
    pub registry: RegistryStatus,
    /// The most recent refused handshakes (newest last), so that doctor can explain a
    /// plugin that could not connect.
    #[serde(default)]
    pub refused_handshakes: Vec<RefusedHandshake>,
    /// The HTTP endpoint (`koru daemon --http`), when the daemon serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpStatus>,
    /// The chat-store roots the daemon observes and their problems (empty when
    /// observing is off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<crate::ObserverStatus>,
    /// Whether the daemon observes the chat-history stores (`koru daemon --no-observe`
    /// turns it off), so that doctor can tell observing off from nothing to observe.
    #[serde(default)]
    pub observing: bool,
    /// The drive journal (absent with `koru daemon --no-journal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<crate::JournalStatus>,
    /// The desktop portal's remote-input session as this daemon holds it (absent where the
    /// daemon has no portal injector), so that doctor can tell what the desktop said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portal: Option<PortalStatus>,
}

/// Where the desktop's consent to Koru's remote input stands, in the running daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PortalConsent {
    /// No drive has used the portal since the daemon started: nothing asked yet.
    None,
    /// The desktop's consent dialog is up (a drive waits for it).
    Asking,
    /// The desktop agreed: the daemon holds a remote-input session.
    Agreed,
    /// The desktop refused, the dialog was not answered in time, or the person ended the
    /// session; the next drive asks again.
    Refused,
    /// The portal could not be used (missing, no remote input, the bus failing).
    Unavailable,
}

/// The daemon's portal session (`status.result.portal`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PortalStatus {
    pub consent: PortalConsent,
    /// When it came to stand so (Unix ms); absent for `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// With `agreed`: whether the desktop gave a restore token, kept so that the next daemon
    /// start is not asked again. GNOME 43's portal gives none for remote input: it asks at
    /// each daemon start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remembered: Option<bool>,
    /// What the portal offers, once asked: its RemoteDesktop version and whether it has a
    /// Clipboard interface (without one, only what can be typed goes through it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_desktop_version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clipboard: Option<bool>,
    /// What the desktop or the portal said, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where the daemon serves HTTP and how to authenticate there. Shown only to peers of the
/// daemon's own user (the socket is 0600 and the peer uid is checked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HttpStatus {
    /// The MCP streamable HTTP endpoint, e.g. `http://127.0.0.1:8765/mcp`.
    pub mcp_url: String,
    /// The bearer token every request must carry (`Authorization: Bearer <token>`).
    pub token: String,
    /// The file the token is kept in (mode 0600).
    pub token_file: String,
}

/// The daemon's registry in a few facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RegistryStatus {
    /// How many interfaces the registry in use defines.
    pub interfaces: usize,
    /// The layers in use, e.g. `built-in`, `user: /home/me/.config/koru/registry.yaml`.
    pub layers: Vec<String>,
    /// Problems found in the layer files at the last (re)load. When the last reload had
    /// problems the daemon kept the registry it had before.
    pub diagnostics: Vec<String>,
}

/// A connection whose hello the daemon refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RefusedHandshake {
    pub at_ms: u64,
    pub code: crate::ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<IdeProduct>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<crate::VersionRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_pid: Option<u32>,
}

/// `sessions.list` (controller → daemon): optional filters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionsList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<IdeProduct>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Also look for terminal agents (Claude Code, Codex CLI, Gemini CLI, opencode) in the
    /// user's tmux panes and list them in `agents` (a look on demand: one `tmux
    /// list-panes` per server and one read of the process table).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agents: bool,
}

/// `sessions.list.result`: the plugin sessions, oldest first, and, when asked, the terminal
/// agents found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionsListResult {
    pub sessions: Vec<SessionInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<TerminalAgentInfo>,
}

/// A terminal agent running in a terminal the daemon can see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalAgentInfo {
    /// `t_` and 12 hex digits, stable while the agent's process runs in the same pane.
    pub agent_id: String,
    /// `claude-code`, `codex`, `gemini-cli` or `opencode`.
    pub product: String,
    /// The folder it runs in (the pane's current folder).
    pub workspace: String,
    /// The agent's process.
    pub pid: u32,
    pub terminal: TerminalPlace,
    /// The agent's chat, from its history store, when the observers know one for the folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<AgentChat>,
    pub state: AgentState,
}

impl TerminalAgentInfo {
    /// One line for people: id, product, where it runs, folder, chat and state.
    pub fn line(&self) -> String {
        let state = match self.state {
            AgentState::Idle => "idle",
            AgentState::Replying => "replying",
            AgentState::NeedsInput => "needs_input",
            AgentState::Unknown => "state unknown",
        };
        let chat = self
            .chat
            .as_ref()
            .map(|c| format!(" chat {}", c.chat_id))
            .unwrap_or_default();
        format!(
            "{} {} in {} {}{chat} {state}",
            self.agent_id,
            self.product,
            self.terminal.describe(),
            self.workspace
        )
    }
}

/// Where a terminal agent runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TerminalPlace {
    /// A tmux pane: its server's socket, its `%N` id and `session:window.pane` for people.
    Tmux {
        socket: String,
        pane_id: String,
        place: String,
    },
    /// A kitty window: its instance's remote-control address (`KITTY_LISTEN_ON`, e.g.
    /// `unix:/tmp/kitty-1234`), its `KITTY_WINDOW_ID` and where it is for people.
    Kitty {
        listen_on: String,
        window_id: u64,
        place: String,
    },
    /// A WezTerm pane: the socket of its GUI or mux server (`WEZTERM_UNIX_SOCKET`), its
    /// `WEZTERM_PANE` and where it is for people.
    Wezterm {
        socket: String,
        pane_id: u64,
        place: String,
    },
    /// An IDE window's integrated terminal, reached through that window's plugin
    /// (`terminal.io`): the plugin session, the plugin's id for the terminal, and where it
    /// is for people (product, folder, terminal name).
    IdeTerminal {
        session_id: String,
        terminal_id: String,
        place: String,
    },
}

impl TerminalPlace {
    /// Where it is, for people: `tmux w:0.0 (%3)`, `kitty os window 1, tab "x" (window 2)`.
    pub fn describe(&self) -> String {
        match self {
            TerminalPlace::Tmux { pane_id, place, .. } => format!("tmux {place} ({pane_id})"),
            TerminalPlace::Kitty {
                window_id, place, ..
            } => format!("kitty {place} (window {window_id})"),
            TerminalPlace::Wezterm { pane_id, place, .. } => {
                format!("WezTerm {place} (pane {pane_id})")
            }
            TerminalPlace::IdeTerminal { place, .. } => place.clone(),
        }
    }
}

/// A terminal agent's chat in its history store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentChat {
    pub store: String,
    pub chat_id: String,
}

/// What a terminal agent is doing, from its chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    Idle,
    Replying,
    NeedsInput,
    /// No chat of its is known yet.
    Unknown,
}

/// `drives.list` (controller → daemon): drives, newest last. Without `history`, the ones
/// the daemon keeps in memory (running, and the last 1,000 ended); with it, every drive in
/// the journal, a page at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DrivesList {
    /// Only drives whose session is this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only drives that have not ended.
    #[serde(default)]
    pub active_only: bool,
    /// Also drives from the journal (older ones, and ones from before a restart).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history: bool,
    /// Only drives accepted before this one (the oldest drive of the previous page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Only drives created at or after this time (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// At most this many (the newest of the matches); with `history` 100 when absent, and
    /// never more than 1,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `drives.list.result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DrivesListResult {
    pub drives: Vec<DriveInfo>,
    /// Older matches exist beyond this page (ask again with `before` = the first drive's id).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

/// `drive.create` (controller → daemon): push a prompt into a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveCreate {
    pub target: Target,
    pub prompt: String,
    #[serde(default)]
    pub options: DriveOptions,
}

/// `drive.get` / `drive.cancel` (controller → daemon): which drive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriveRef {
    pub drive_id: String,
}

/// One item of the daemon's event stream (`stream` lines after `events.subscribe`), tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StreamEvent {
    SessionConnected {
        session: SessionInfo,
    },
    SessionUpdated {
        session: SessionInfo,
    },
    SessionDisconnected {
        session_id: String,
        reason: String,
    },
    DriveUpdated {
        drive: DriveInfo,
    },
    /// The registry files were read again; `applied` is false when they had problems and
    /// the daemon kept the registry it had.
    RegistryReloaded {
        applied: bool,
        interfaces: usize,
        diagnostics: Vec<String>,
    },
    /// Something happened in an agent's chat-history store.
    Observed {
        observation: crate::ObservedEvent,
    },
    /// An operator ran a recovery action (`recovery.run`); `by` names the controller that asked.
    RecoveryPerformed {
        action: String,
        by: String,
        ok: bool,
        summary: String,
    },
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// `capabilities` (plugin → daemon, no reply): the plugin's capabilities now, replacing
/// those of its `hello`. Sent when they change while the window runs: an extension
/// installed, enabled or activated after the hello registers the commands a route needs
/// (the Claude Code extension's, for one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CapabilitiesReport {
    pub capabilities: Vec<Capability>,
}

/// `terminals` (plugin → daemon, no reply): every integrated terminal of the plugin's
/// window, sent after the welcome and again whenever one opens, closes or gets its
/// process. Each report replaces the previous one. The daemon looks under each terminal's
/// shell for a terminal agent (Claude Code, Codex CLI, Gemini CLI, opencode) and types into
/// it through `terminal.io`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalsReport {
    pub terminals: Vec<IdeTerminal>,
}

/// One integrated terminal of an IDE window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IdeTerminal {
    /// The plugin's id for it: unique in the window, stable for the terminal's life (the
    /// VS Code extension also gives it to the terminal's processes as `KORU_TERMINAL_ID`
    /// where the IDE lets it).
    pub terminal_id: String,
    /// Its name as the IDE shows it.
    pub name: String,
    /// The terminal's first process (its shell), once the IDE knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_pid: Option<u32>,
    /// Where the IDE gives no pid: the value of `KORU_TERMINAL_ID` the plugin put into the
    /// environment the IDE started the terminal's shell with. The daemon takes as the shell
    /// the topmost process whose environment carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_tag: Option<String>,
}

/// `clipboard` (daemon → plugin): read the system clipboard's text, or make `text` its
/// content, as the plugin's IDE sees it (the clipboard a paste chord in its window pastes
/// from). The plugin answers `clipboard.result` with the same `order_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClipboardOrder {
    pub order_id: String,
    pub action: ClipboardAction,
}

/// What a `clipboard` order asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClipboardAction {
    /// The clipboard's text now.
    Read,
    /// Make `text` the clipboard's content (an empty `text` empties it).
    Write { text: String },
}

/// `clipboard.result` (plugin → daemon): the text read (absent when the clipboard holds
/// none), or why the order could not be done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClipboardResult {
    pub order_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `terminal.io` (daemon → plugin): read one terminal's screen, or write bytes to it. The
/// plugin answers `terminal.io.result` with the same `order_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalIo {
    pub order_id: String,
    pub terminal_id: String,
    pub action: TerminalAction,
}

/// What `terminal.io` asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TerminalAction {
    /// The terminal's visible screen, one line per row, trailing blanks cut.
    Read,
    /// Write `data` to the terminal's input as it is: no newline rewritten, nothing added
    /// (the daemon writes bracketed-paste markers and the submit key itself).
    Write { data: String },
}

/// `terminal.io.result` (plugin → daemon): how a `terminal.io` went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalIoResult {
    pub order_id: String,
    /// For `read`: the screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// Why it could not be done (the terminal is gone; its screen is not known to the
    /// plugin). Nothing was written when this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

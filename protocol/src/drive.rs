//! Drives: a prompt pushed into one IDE chat — the daemon's `drive` order to a plugin, the plugin's staged `ack`s, and the drive's public record.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::IdeProduct;

/// Well-known blocker codes. Blocker codes are open strings on the wire so that a plugin
/// can report a situation this daemon does not know yet; these are the ones Koru itself
/// produces or interprets.
pub mod blocker {
    /// The plugin's connection ended while the drive was in flight.
    pub const PLUGIN_DISCONNECTED: &str = "plugin_disconnected";
    /// No ack arrived before the drive's deadline.
    pub const TIMEOUT: &str = "timeout";
    /// The daemon stopped while the drive was not finished.
    pub const DAEMON_SHUTDOWN: &str = "daemon_shutdown";
    /// The daemon stopped (crashed, was killed) while the drive was not finished; found
    /// in the journal at the next start. The prompt is never sent again: it may have been
    /// submitted.
    pub const DAEMON_RESTARTED: &str = "daemon_restarted";
    /// The plugin failed without saying why.
    pub const PLUGIN_FAILED: &str = "plugin_failed";
    /// The plugin was dropped because it stopped answering heartbeats.
    pub const HEARTBEAT_LOST: &str = "heartbeat_lost";
    /// The IDE lacks a command or feature the route needs.
    pub const CAPABILITY_MISSING: &str = "capability_missing";
    /// The chat is busy replying or waiting for input.
    pub const CHAT_BUSY: &str = "chat_busy";
    /// The focused window is not the verified target.
    pub const FOCUS_MISMATCH: &str = "focus_mismatch";
    /// The plugin refused a command outside its allow-list.
    pub const COMMAND_NOT_ALLOWED: &str = "command_not_allowed";
    /// The registry policy forbids the route.
    pub const POLICY_FORBIDDEN: &str = "policy_forbidden";
    /// No route could be tried at all.
    pub const NO_ROUTE: &str = "no_route";
    /// No display server for OS injection.
    pub const NO_DISPLAY: &str = "no_display";
    /// The injector program is missing.
    pub const INJECTOR_MISSING: &str = "injector_missing";
    /// The prompt must be pasted (long, several lines, or beyond ASCII) and no clipboard
    /// can carry it: nothing was typed.
    pub const CLIPBOARD_UNAVAILABLE: &str = "clipboard_unavailable";
    /// The chat refused the request before accepting it (no usable model, signed out,
    /// out of quota, still starting); the detail is the chat's own message.
    pub const CHAT_REFUSED: &str = "chat_refused";
    /// The plugin said its chat cannot take a request now, and the drive's deadline passed
    /// while it waited for the chat to become ready.
    pub const CHAT_NOT_READY: &str = "chat_not_ready";
    /// A terminal agent shows a dialog (a permission, trust or question prompt): typing
    /// would answer it, so nothing was typed; the detail carries the dialog's text.
    pub const NEEDS_INPUT: &str = "needs_input";
    /// Someone's unsent text is in the terminal agent's input box: typing would merge
    /// with it, so nothing was typed; the detail carries the draft.
    pub const USER_TYPING: &str = "user_typing";
    /// The prompt was typed and the submit key pressed (and pressed again as the route
    /// allows), but the agent recorded no such prompt in time; the detail says what the
    /// screen shows.
    pub const NOT_SUBMITTED: &str = "not_submitted";
    /// The terminal agent (or its pane) is gone.
    pub const AGENT_EXITED: &str = "agent_exited";
    /// tmux could not be run, or refused a command; or a terminal agent's own server
    /// (opencode's) refused or failed a call.
    pub const TERMINAL_FAILED: &str = "terminal_failed";
    /// A terminal agent whose prompts go to its own server (opencode) serves none that
    /// Koru can find (started without `--port`).
    pub const AGENT_SERVER_MISSING: &str = "agent_server_missing";
    /// The terminal the agent runs in has its remote control off (kitty without
    /// `allow_remote_control` and `listen_on`): nothing can be typed into it.
    pub const REMOTE_CONTROL_OFF: &str = "remote_control_off";
    /// The prompt is where the person can see it, unsent, and only they can submit it:
    /// nothing could press the submit key, or the chat recorded no prompt after the key
    /// was pressed (the Claude Code panel in VS Code). The detail says where the prompt is.
    pub const NEEDS_USER: &str = "needs_user";
}

/// What proves a plugin's `submitted` ack: how far the chat itself confirmed that it took
/// the prompt. Sent by the plugin with the `submitted` ack and kept in the drive record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubmitEvidence {
    /// The chat's own response to the request ended, or paused to ask the user, before the
    /// ack (VS Code's `workbench.action.chat.open` with `blockOnResponse`): the chat ran it.
    ChatResponded,
    /// The chat was still answering the request, with no refusal, when the plugin's
    /// acceptance window ran out (the response outlived the time in which the chat refuses
    /// requests it cannot take); a later failure arrives as the drive's `observation`.
    ChatRunning,
    /// Only the IDE command (or key press) returned without error: nothing from the chat
    /// confirmed it took the prompt (an IDE without `blockOnResponse`, a route ending in a
    /// submit command). Also what a plugin that sends no evidence has proven.
    CommandReturned,
    /// The daemon pressed the submit key once into the window and chat input whose focus
    /// was verified just before; nothing from the chat confirmed it (an observer may, in
    /// the drive's `observation`).
    KeyPressed,
    /// A terminal agent's own prompt-submit hook (Claude Code and Codex
    /// `UserPromptSubmit`, Gemini CLI `BeforeAgent`) reported this prompt's text.
    AgentHook,
    /// A terminal agent's own transcript (or prompt history) recorded this prompt.
    AgentTranscript,
}

impl SubmitEvidence {
    pub fn as_str(self) -> &'static str {
        match self {
            SubmitEvidence::ChatResponded => "chat_responded",
            SubmitEvidence::ChatRunning => "chat_running",
            SubmitEvidence::CommandReturned => "command_returned",
            SubmitEvidence::KeyPressed => "key_pressed",
            SubmitEvidence::AgentHook => "agent_hook",
            SubmitEvidence::AgentTranscript => "agent_transcript",
        }
    }
}

/// Which way a prompt is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// The plugin runs the product's native "send to chat" command with the prompt.
    NativeSend,
    /// The plugin focuses the chat input, pastes the prompt, submits — acking each stage.
    PluginDrive,
    /// The daemon focuses the IDE window and injects keys (never sent to a plugin).
    OsInjection,
    /// The daemon types into the terminal a terminal agent runs in (a tmux pane): a
    /// bracketed paste, then the submit key, proven by the agent's own hook or transcript.
    TerminalInput,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::NativeSend => "native_send",
            Route::PluginDrive => "plugin_drive",
            Route::OsInjection => "os_injection",
            Route::TerminalInput => "terminal_input",
        }
    }
}

/// What to do when the target chat is busy (replying or waiting for input).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BusyPolicy {
    /// Wait until the chat is idle (bounded by the drive's timeout).
    #[default]
    Queue,
    /// End at once as failed with blocker `chat_busy`.
    Fail,
}

/// One step the plugin runs for a drive: an IDE command with arguments, and the stage it proves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveStep {
    /// The IDE command or action id to run.
    pub command: String,
    /// Arguments for the command; the string `"$prompt"` anywhere in them stands for the prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<serde_json::Value>,
    /// The stage the plugin acks once this step succeeded.
    pub proves: AckStage,
}

/// What the sender wants done with the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriveOptions {
    /// Submit the prompt (true) or leave it in the chat input, unsent (false).
    #[serde(default = "default_true")]
    pub submit: bool,
    /// Start a new chat before sending.
    #[serde(default)]
    pub new_chat: bool,
    /// How long the whole drive may take before it ends `timed_out` (daemon default if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What to do while the chat is busy.
    #[serde(default)]
    pub busy: BusyPolicy,
    /// For a terminal agent: a prompt that starts with a character the agent reads as a
    /// mode switch (`/` a slash command, `!` a shell command, `#` a memory note) is typed
    /// as it is, for the agent to run as such. Without it, such a prompt is refused.
    #[serde(default, skip_serializing_if = "is_false")]
    pub agent_command: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn default_true() -> bool {
    true
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            submit: true,
            new_chat: false,
            timeout_ms: None,
            busy: BusyPolicy::Queue,
            agent_command: false,
        }
    }
}

/// `drive` (daemon → plugin): deliver this prompt, ack every stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveRequest {
    pub drive_id: String,
    pub prompt: String,
    pub options: DriveOptions,
    pub route: Route,
    /// The steps to run, in order. Empty: the plugin uses its own steps for `route`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<DriveStep>,
}

/// `cancel` (daemon → plugin): stop working on this drive; it has ended on the daemon's side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriveCancelNotice {
    pub drive_id: String,
    pub reason: String,
}

/// A stage a plugin reports for a drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AckStage {
    Received,
    Focused,
    Pasted,
    Submitted,
    Failed,
}

/// Why a drive (or one step of it) could not go on, and in what situation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Blocker {
    /// A classified code such as `plugin_disconnected`, `timeout`, `focus_mismatch` (see `blocker`).
    pub code: String,
    /// What exactly happened, for a person.
    #[serde(default)]
    pub detail: String,
}

impl Blocker {
    pub fn new(code: &str, detail: impl Into<String>) -> Self {
        Blocker {
            code: code.to_string(),
            detail: detail.into(),
        }
    }
}

/// `ack` (plugin → daemon): the drive reached a stage, or failed with a blocker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ack {
    pub drive_id: String,
    pub stage: AckStage,
    /// Required in spirit with `stage: failed`; the daemon substitutes `plugin_failed` if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<Blocker>,
    /// With `stage: submitted`: what proves it (absent: `command_returned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<SubmitEvidence>,
    /// With `stage: failed` and blocker `chat_refused`: what kind of refusal it was. A
    /// `not_ready` refusal came before the chat took the prompt, from a chat still getting
    /// ready (no usable model yet): the daemon holds the drive and sends it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
}

/// What kind of refusal a `chat_refused` ack reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The chat refused before it took the prompt because it is not ready yet (a window
    /// whose chat has no usable model a moment after start): nothing was submitted, and
    /// the same prompt may be sent again once the chat is ready.
    NotReady,
}

/// Which session (or, without a plugin, which window) a drive is for.
///
/// On the wire: `{"session": "s_…"}`, `{"workspace": "/abs/path"}`, `{"product": "cursor"}`,
/// the string `"focused"` (the plugin session whose window has focus), or
/// `{"window": {"pid": 4242}}` / `{"window": {"title": "regex"}}` for an IDE window
/// without a plugin, driven by OS injection alone. Terminal agents: `{"session": "t_…"}`
/// (an id from `sessions_list` with `agents`), `{"agent": {"product": "claude-code",
/// "workspace": "/abs/path"}}`, or `{"chat": "<chat id>"}` (the running agent or window
/// that holds that chat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Session(String),
    Workspace(String),
    Product(IdeProduct),
    Focused,
    Window(WindowTarget),
    Agent(AgentTarget),
    Chat(String),
}

/// A terminal agent by what it is and where it runs: the agent of `product`
/// (`claude-code`, `codex`, `gemini-cli`, `opencode`) whose folder is `workspace` or inside
/// it (absent: any folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentTarget {
    pub product: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

impl Target {
    /// Whether the target can only mean a terminal agent.
    pub fn is_terminal_agent(&self) -> bool {
        match self {
            Target::Session(id) => id.starts_with("t_"),
            Target::Agent(_) => true,
            _ => false,
        }
    }
}

/// An IDE window without a plugin: by process id (its whole process family counts) and/or
/// a title regular expression.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WindowTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Session(id) => write!(f, "session {id}"),
            Target::Workspace(path) => write!(f, "workspace {path}"),
            Target::Product(product) => write!(f, "product {product}"),
            Target::Focused => f.write_str("the focused window"),
            Target::Window(window) => match (window.pid, &window.title) {
                (Some(pid), Some(title)) => write!(f, "window pid {pid} titled /{title}/"),
                (Some(pid), None) => write!(f, "window pid {pid}"),
                (None, Some(title)) => write!(f, "window titled /{title}/"),
                (None, None) => f.write_str("an unspecified window"),
            },
            Target::Agent(agent) => match &agent.workspace {
                Some(folder) => write!(f, "{} in {folder}", agent.product),
                None => write!(f, "{}", agent.product),
            },
            Target::Chat(id) => write!(f, "chat {id}"),
        }
    }
}

/// Where a drive is in its life. The last four are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriveState {
    /// Accepted; waiting for its session to be free.
    Queued,
    /// Sent to the plugin; no ack yet.
    Sent,
    Received,
    Focused,
    Pasted,
    Submitted,
    /// Finished: the prompt was delivered as asked (submitted, or pasted with `submit: false`).
    Done,
    Failed,
    Cancelled,
    TimedOut,
}

impl DriveState {
    /// How far along the delivery a state is (terminal states rank last).
    pub fn rank(self) -> u8 {
        match self {
            DriveState::Queued => 0,
            DriveState::Sent => 1,
            DriveState::Received => 2,
            DriveState::Focused => 3,
            DriveState::Pasted => 4,
            DriveState::Submitted => 5,
            DriveState::Done
            | DriveState::Failed
            | DriveState::Cancelled
            | DriveState::TimedOut => 6,
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            DriveState::Done | DriveState::Failed | DriveState::Cancelled | DriveState::TimedOut
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DriveState::Queued => "queued",
            DriveState::Sent => "sent",
            DriveState::Received => "received",
            DriveState::Focused => "focused",
            DriveState::Pasted => "pasted",
            DriveState::Submitted => "submitted",
            DriveState::Done => "done",
            DriveState::Failed => "failed",
            DriveState::Cancelled => "cancelled",
            DriveState::TimedOut => "timed_out",
        }
    }
}

impl std::fmt::Display for DriveState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a drive entered a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StageRecord {
    pub state: DriveState,
    /// Unix time in milliseconds.
    pub at_ms: u64,
}

/// How far a drive's result can be trusted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verification {
    /// Not delivered (yet).
    #[default]
    None,
    /// The plugin acked every stage.
    Acked,
    /// Delivered by OS injection with focus checked before and after (by the window system,
    /// or on Wayland by the window's own plugin's report), but nothing inside
    /// the IDE confirmed it: unverified until an observer sees the prompt.
    Unverified,
    /// Typed into a terminal agent, and the agent itself recorded the prompt (its
    /// prompt-submit hook or its transcript: `submit_evidence` says which).
    AgentRecorded,
}

/// What happened to one route the planner considered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Not tried: not usable now (the blocker says why).
    Skipped,
    Running,
    Succeeded,
    Failed,
    /// Not tried because an earlier route may already have delivered the prompt.
    NotTried,
}

/// One route the planner considered for a drive, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RouteAttempt {
    pub route: Route,
    /// The registry interface.
    pub interface: String,
    pub outcome: AttemptOutcome,
    /// The last stage this route reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached: Option<DriveState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<Blocker>,
    /// What an operator can do about the blocker (from the registry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Why the route ran other than the drive asked, when it did: a drive sent in a new
    /// chat because nothing here can press the submit key of the route that would have
    /// used the current one (`opened a new chat: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How an OS-injection route put the prompt into the chat input, when it did: pasted
    /// through a clipboard, or typed key by key (no clipboard to paste through). The
    /// stage is `pasted` either way (the text is in the input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextDelivery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
}

/// How the text of a prompt reached the chat input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TextDelivery {
    /// Through a clipboard and the paste chord.
    Pasted,
    /// Key by key.
    Typed,
}

/// The public record of a drive, as controllers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveInfo {
    pub drive_id: String,
    pub target: Target,
    /// The session the target resolved to (empty for a window target without a plugin).
    pub session_id: String,
    pub route: Route,
    pub options: DriveOptions,
    pub state: DriveState,
    /// Every state the drive went through, in order, with its time.
    pub history: Vec<StageRecord>,
    /// Set when the drive failed, timed out or was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<Blocker>,
    /// The prompt's length in characters.
    pub prompt_chars: usize,
    /// The first characters of the prompt, for listings.
    pub prompt_excerpt: String,
    pub created_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    /// Every route the planner considered, in order, with what happened.
    #[serde(default)]
    pub attempts: Vec<RouteAttempt>,
    #[serde(default)]
    pub verification: Verification,
    /// What the chat's own history showed (docs/observers.md), once the observers matched
    /// the prompt to this drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<crate::DriveObservation>,
    /// The drive this one retries (recovery action `retry_drive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<String>,
    /// For a drive submitted by a plugin: what proves `submitted` (the plugin's evidence;
    /// `command_returned` when it gave none). Absent for OS injection (see `verification`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_evidence: Option<SubmitEvidence>,
    /// Why a drive that has not been sent yet is waiting (`chat_not_ready`, `chat_busy`,
    /// another drive running), while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Blocker>,
    /// The chat's own record of the prompt and of how its turn ended (store, file, place,
    /// digests), once the daemon has read them back from the chat's store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<crate::DriveEvidence>>,
}

impl DriveInfo {
    /// Whether the chat's history (or the plugin) has said how the drive's turn ended, or
    /// that it cannot tell: where `koru send --wait-reply` and MCP `wait_for_reply` stop.
    pub fn reply_settled(&self) -> bool {
        self.observation
            .as_ref()
            .is_some_and(|o| o.stage.is_settled())
    }

    /// Whether the reply's text can be read back from a chat store: settled, and a reply
    /// ended in a store that recorded it (a reply only the window's plugin reported has no
    /// text until the chat's store is written). Where waiting for the whole reply stops
    /// when the daemon observes stores.
    pub fn reply_text_known(&self) -> bool {
        self.observation.as_ref().is_some_and(|o| {
            o.stage.is_settled()
                && (o.stage != crate::ObservedStage::Replied
                    || (!o.is_from_plugin() && o.reply_length.is_some()))
        })
    }
}

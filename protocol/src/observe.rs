//! What Koru observes in the AI agents' own chat-history stores: one event vocabulary for every store (`observed` stream events) and the chats it knows (`chats.list`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How far to trust an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservationBasis {
    /// A record in the store says so.
    Explicit,
    /// A documented fallback concluded it (e.g. a quiet period after a complete reply).
    Inferred,
}

/// What the agent waits for when it needs the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NeedsInputKind {
    Question,
    Permission,
    ToolApproval,
    Other,
}

/// What happened in a chat, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ObservedKind {
    /// A chat Koru had not seen before.
    ChatSeen,
    /// A user prompt was recorded.
    PromptSeen {
        /// The first characters, on one line.
        excerpt: String,
        /// Its length in characters.
        length: usize,
        /// `sha256:` of the prompt with whitespace runs collapsed and ends trimmed.
        digest: String,
    },
    /// The agent started answering.
    ReplyStarted,
    /// The agent finished its turn.
    ReplyCompleted {
        /// The start of the final reply text, on one line.
        excerpt: String,
        /// The final reply's length in characters.
        length: usize,
    },
    /// The agent went on with a turn whose end Koru had inferred (a `reply_completed` or
    /// `cancelled` with basis `inferred`, which the store never confirmed): that end is
    /// taken back, the turn is open again, and it gets its end once more when it really
    /// ends. The one way an inferred end is corrected (docs/observers.md).
    ReplyResumed,
    /// The agent waits for the user.
    NeedsInput { input: NeedsInputKind },
    /// The turn was interrupted.
    Cancelled,
    /// The turn failed.
    Failed { reason: String },
    /// The chat changed in a way the store does not let Koru read (an encrypted store):
    /// activity, without content or turn state.
    Activity,
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// One observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedEvent {
    /// The store, by its registry interface id (`chat_history_claude_code_jsonl`, …).
    pub store: String,
    /// The chat (session, conversation, task) id within the store.
    pub chat_id: String,
    /// The workspace folder the chat belongs to, when the store says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The store's own timestamp of the record (Unix ms), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_ts_ms: Option<u64>,
    /// When Koru saw it (Unix ms).
    pub seen_at_ms: u64,
    pub basis: ObservationBasis,
    /// Where the chat's agent runs, when a terminal agent's own hook reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<AgentProcess>,
    #[serde(flatten)]
    pub event: ObservedKind,
}

/// Where a terminal agent runs, as its hook saw it: the agent's process (the hook's nearest
/// ancestor that is an agent) and, inside tmux, the server's socket and the pane
/// (`$TMUX`, `$TMUX_PANE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentProcess {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux_socket: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux_pane: Option<String>,
}

/// A chat's state as observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservedChatState {
    Idle,
    Replying,
    NeedsInput,
}

/// A chat Koru knows from a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatInfo {
    pub store: String,
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub state: ObservedChatState,
    /// The last observation's time (Unix ms, the store's when it has one).
    pub last_activity_ms: u64,
    /// The last prompt's excerpt, if one was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_prompt: Option<String>,
}

/// `chats.list` (controller → daemon): the chats the observers know, optionally filtered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatsList {
    /// Only this store (interface id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Only chats of this workspace (or a folder inside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// `chats.list.result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatsListResult {
    pub chats: Vec<ChatInfo>,
}

/// How far a drive's prompt has got in the chat's own history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservedStage {
    /// The chat recorded the prompt: delivery proven.
    Observed,
    Replying,
    /// The agent finished its turn; `reply_excerpt` has the start of the reply.
    Replied,
    NeedsInput,
    Cancelled,
    Failed,
    /// The prompt was seen, but more than one drive could be it: none is claimed.
    Ambiguous,
}

impl ObservedStage {
    /// The wire spelling (`replied`, `needs_input`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ObservedStage::Observed => "observed",
            ObservedStage::Replying => "replying",
            ObservedStage::Replied => "replied",
            ObservedStage::NeedsInput => "needs_input",
            ObservedStage::Cancelled => "cancelled",
            ObservedStage::Failed => "failed",
            ObservedStage::Ambiguous => "ambiguous",
        }
    }

    /// Whether this stage says how the turn ended, or that the chat cannot tell (the
    /// ones after which waiting for a reply stops): an exhaustive match, so a new stage
    /// must be placed on one side.
    pub fn is_settled(self) -> bool {
        match self {
            ObservedStage::Observed | ObservedStage::Replying => false,
            ObservedStage::Replied
            | ObservedStage::NeedsInput
            | ObservedStage::Cancelled
            | ObservedStage::Failed
            | ObservedStage::Ambiguous => true,
        }
    }
}

/// The `store` of a drive observation that came from the window's plugin (the chat told
/// it), not from a chat-history store.
pub const PLUGIN_OBSERVATION_STORE: &str = "plugin";

/// What the chat-store observers proved about a drive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriveObservation {
    pub store: String,
    pub chat_id: String,
    pub stage: ObservedStage,
    pub basis: ObservationBasis,
    /// When the stage was observed (the store's time when it has one).
    pub at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_excerpt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_length: Option<usize>,
    /// Why it failed, or which drives made it ambiguous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl DriveObservation {
    /// Whether the window's plugin told this (not a chat-history store).
    pub fn is_from_plugin(&self) -> bool {
        self.store == PLUGIN_OBSERVATION_STORE
    }
}

/// The chat's own record of a drive (docs/journal.md, "Evidence"): where the chat's store
/// holds the drive's prompt and how its turn ended, with the SHA-256 of those records'
/// bytes as they are in the store, so that anyone holding the chat's file can check them.
/// The daemon reads it back from the store when the observers match the prompt and when
/// the turn settles, and journals each part (`drive_prompt_recorded`,
/// `drive_outcome_recorded`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriveEvidence {
    /// The record of the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<ChatRecordRef>,
    /// How the turn ended (the latest stage recorded: a turn that asked for input and then
    /// replied shows the reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeEvidence>,
}

/// One record of a chat in its store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatRecordRef {
    /// The store (registry interface id) and the chat.
    pub store: String,
    pub chat_id: String,
    /// The chat's file (or database) the record was read from.
    pub file: String,
    /// The turn it belongs to (0 is the chat's first).
    pub turn: u64,
    /// The store's own time for it, when it records one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_at_ms: Option<u64>,
    pub record: StoreRecord,
}

/// Where a record's bytes are in a chat's store, and their SHA-256 (lowercase hex), tagged
/// by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoreRecord {
    /// One line of a JSONL file: `bytes` from `offset` (where the line starts), the line
    /// without its `\n`.
    Line {
        /// 1-based.
        line: u64,
        offset: u64,
        bytes: u64,
        sha256: String,
        /// The element of the line's JSON meant (RFC 6901), when the line holds several.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pointer: Option<String>,
    },
    /// One JSON element of a document file: `offset..offset + bytes` of the file exactly.
    Element {
        offset: u64,
        bytes: u64,
        sha256: String,
        /// Where it is in the document (RFC 6901).
        pointer: String,
        /// The file, when it is not the chat's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
    },
    /// One row of a SQLite store: its table and key, and the value's bytes as stored.
    Row {
        table: String,
        row: String,
        bytes: u64,
        sha256: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pointer: Option<String>,
        /// The database, when it is not the chat's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
    },
}

impl StoreRecord {
    /// The SHA-256 of the record's bytes.
    pub fn sha256(&self) -> &str {
        match self {
            StoreRecord::Line { sha256, .. }
            | StoreRecord::Element { sha256, .. }
            | StoreRecord::Row { sha256, .. } => sha256,
        }
    }
}

/// How a drive's turn ended, as the chat's store records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutcomeEvidence {
    /// `replied`, `needs_input`, `cancelled` or `failed`.
    pub stage: ObservedStage,
    /// `explicit`: `record` is the store's own record of the end (or of the question);
    /// `inferred`: the store writes no such record, and `record` is the reply's last text.
    pub basis: ObservationBasis,
    /// The record, when the store has one for this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<ChatRecordRef>,
    /// The reply (the agent's last text of the turn), when it wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<TextDigest>,
}

/// A text by its SHA-256 (of its UTF-8 bytes, lowercase hex) and length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TextDigest {
    pub sha256: String,
    pub bytes: u64,
    pub chars: u64,
}

/// `observe.report` (controller → daemon): observations from outside the stores — e.g.
/// Claude Code's hooks (`koru hook claude-code`) for what its transcript never records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObserveReport {
    pub observations: Vec<ObservedEvent>,
}

/// `observe.reported`: how many observations were applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObserveReported {
    pub applied: usize,
}

/// How one chat-store root is being observed, for `status` and doctor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObserverStatus {
    /// The registry interface id of the store.
    pub store: String,
    /// The directory watched: a registry `locations` entry, expanded, or a folder a
    /// plugin session announced in its hello's `window.storage` (see `announced`).
    pub root: String,
    /// Whether the directory exists now.
    pub exists: bool,
    /// Whether change notifications arrive for it (false: inotify refused a watch, e.g.
    /// `fs.inotify.max_user_watches` reached; the periodic rescan still reads it).
    pub watched: bool,
    /// How the daemon follows it now (absent from daemons before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ObserverMode>,
    /// While it does not exist: the nearest existing folder above it, watched so that the
    /// root is read the moment it appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<String>,
    /// Why it is not watched, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_error: Option<String>,
    /// When the inotify watch limit refused it: the folders it needs watches for (one
    /// each), to size `fs.inotify.max_user_watches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watches_needed: Option<u64>,
    /// Session files being followed.
    pub files: usize,
    /// Files that cannot be read or hold something that is not the store's format (the
    /// first few; never data).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<StoreProblem>,
    /// The plugin sessions whose windows announced this root in `window.storage`, or a
    /// folder inside it that this root already covers (so it is not watched twice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub announced_by: Vec<String>,
    /// True for a root observed only because sessions announced it (no registry location
    /// covers it): it is dropped when the last session in `announced_by` ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub announced: bool,
    /// While it is polled (`mode: polled`): how often and what a pass costs. Passes are
    /// spaced so that polling takes at most a thousandth of a core (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<PollCost>,
}

/// How the daemon follows a chat-store root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObserverMode {
    /// Change notifications arrive for it: changes are read as they happen.
    Watched,
    /// It does not exist yet: the daemon waits for it to appear (through a watch on
    /// `waiting_on`, and a check every second) and then reads it from the start.
    Waiting,
    /// It exists but cannot be watched (`watch_error` says why): it is re-read every
    /// few seconds instead.
    Polled,
}

/// What polling a root that cannot be watched costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PollCost {
    /// Time between two passes, in ms (at least 2,000; longer when a pass is slow).
    pub every_ms: u64,
    /// How long the last pass took (listing the folders, a `stat` per file, reading
    /// what changed), in µs.
    pub last_pass_us: u64,
    /// Files looked at in the last pass.
    pub files: usize,
}

/// A store file Koru cannot use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StoreProblem {
    pub path: String,
    /// `unreadable`, `malformed` or `busy`.
    pub kind: StoreProblemKind,
    pub detail: String,
}

/// What is wrong with a store file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoreProblemKind {
    /// Permissions or I/O: the file cannot be read.
    Unreadable,
    /// The content is not the store's format (skipped, never data).
    Malformed,
    /// A locked database: read again later.
    Busy,
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_STAGE: [ObservedStage; 7] = [
        ObservedStage::Observed,
        ObservedStage::Replying,
        ObservedStage::Replied,
        ObservedStage::NeedsInput,
        ObservedStage::Cancelled,
        ObservedStage::Failed,
        ObservedStage::Ambiguous,
    ];

    #[test]
    fn waiting_for_a_reply_stops_at_an_ending_or_an_unknowable_stage() {
        let settled: Vec<ObservedStage> = EVERY_STAGE
            .into_iter()
            .filter(|stage| stage.is_settled())
            .collect();
        assert_eq!(
            settled,
            [
                ObservedStage::Replied,
                ObservedStage::NeedsInput,
                ObservedStage::Cancelled,
                ObservedStage::Failed,
                ObservedStage::Ambiguous
            ]
        );
    }

    #[test]
    fn a_stage_is_spelled_as_on_the_wire() {
        for stage in EVERY_STAGE {
            assert_eq!(serde_json::to_value(stage).unwrap(), stage.as_str());
        }
    }
}

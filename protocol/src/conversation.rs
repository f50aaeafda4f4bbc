//! A chat read back from its store as turns (`chat.read`): the prompt, the whole final reply (paged), the agent's steps with their outcomes, times, model and usage — one model for every store Koru observes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most reply (and prompt) characters one `chat.read` answer carries per text; a
/// longer text is paged with `reply_offset`.
pub const MAX_CHAT_READ_CHARS: u64 = 100_000;

/// The most turns one `chat.read` answer carries.
pub const MAX_CHAT_READ_TURNS: u32 = 50;

/// `chat.read` (controller → daemon): turns of one chat, read back from the chat's own
/// store when asked. Name the chat (`chat_id`, with `store` when two stores have a chat of
/// that id) or a drive (`drive_id`: the turn its prompt started, in the chat the observers
/// matched it to).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatRead {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The store (registry interface id) of `chat_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// The drive whose turn to read (instead of `chat_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_id: Option<String>,
    /// The last N turns (default 1, at most 50). Ignored with `drive_id` or `turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// One turn by its index (0 is the chat's first), e.g. to page through its reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// Where the reply text starts, in characters (paging a long reply; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_offset: Option<u64>,
    /// The most characters of each reply and prompt to return (default and maximum
    /// 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u64>,
}

/// `chat.read.result`: the turns asked for, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatReadResult {
    pub store: String,
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The file (or database) the turns were read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The drive asked about, when the read named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_id: Option<String>,
    /// How many turns the chat has in its store.
    pub turns_total: u64,
    pub turns: Vec<ChatTurn>,
    /// What this store does not record (so its absence in a turn says nothing): any of
    /// `timestamps`, `model`, `usage`, `step_outcomes`, `exit_status`, `file_paths`,
    /// `steps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_recorded: Vec<String>,
}

/// Where a turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// The agent finished its answer.
    Complete,
    /// The agent is still working on it (or its store has not recorded the end yet).
    InProgress,
    /// The agent waits for the user (a question, a tool approval).
    NeedsInput,
    Cancelled,
    Failed,
    /// A state this build does not know.
    #[serde(other)]
    Unknown,
}

impl TurnState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Complete => "complete",
            TurnState::InProgress => "in_progress",
            TurnState::NeedsInput => "needs_input",
            TurnState::Cancelled => "cancelled",
            TurnState::Failed => "failed",
            TurnState::Unknown => "unknown",
        }
    }
}

/// One prompt and what the agent did with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatTurn {
    /// The turn's position in the chat (0 is the first).
    pub index: u64,
    pub state: TurnState,
    /// The user's prompt (absent for a turn the agent started by itself, e.g. after a
    /// background task's notice); cut at `max_chars` when `prompt_chars` is larger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The prompt's whole length in characters.
    #[serde(default)]
    pub prompt_chars: u64,
    /// The final reply text, from `reply_offset`, at most `max_chars` characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The whole reply's length in characters.
    #[serde(default)]
    pub reply_chars: u64,
    /// Where `reply` starts in the whole reply, in characters.
    #[serde(default)]
    pub reply_offset: u64,
    /// Set when more of the reply follows `reply`: the `reply_offset` to ask for next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_next_offset: Option<u64>,
    /// The agent's steps in order (tool calls and their outcomes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<TurnStep>,
    /// Why the turn failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The prompt's time (Unix ms), when the store has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// The turn's last record's time (Unix ms), when the store has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// The model that answered, as the store names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TurnUsage>,
}

/// What a step was, by what it did (the store's own tool name is in `tool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A shell command (`command`, `exit_code`).
    Command,
    /// An existing file changed (`paths`).
    Edit,
    /// A file written whole or created (`paths`).
    Write,
    /// A file or folder read or listed (`paths`).
    Read,
    /// A search in the workspace (grep, glob, code search).
    Search,
    /// A web fetch or search.
    Web,
    /// A sub-agent or task started.
    Agent,
    /// Any other tool call (MCP tools, plans, todo lists, …).
    Tool,
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Ok,
    /// The tool reported an error, or the command exited non-zero.
    Error,
    /// The user declined it, or the turn was interrupted before it finished.
    Rejected,
    /// No result recorded (yet, or the store does not record one).
    Unknown,
}

/// One step of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnStep {
    pub kind: StepKind,
    /// The tool's name as the store records it (`Bash`, `exec_command`, `replace_in_file`, …).
    pub tool: String,
    /// Its arguments in short, on one line.
    pub summary: String,
    /// The files or folders it touched, as the store names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The command line, for a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub outcome: StepOutcome,
    /// The start of the error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
}

/// Tokens the turn used, as far as the store says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnUsage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_round_trips_and_leaves_out_what_it_does_not_have() {
        let turn = ChatTurn {
            index: 2,
            state: TurnState::Complete,
            prompt: Some("fix it".into()),
            prompt_chars: 6,
            reply: Some("done".into()),
            reply_chars: 4,
            reply_offset: 0,
            reply_next_offset: None,
            steps: vec![TurnStep {
                kind: StepKind::Command,
                tool: "Bash".into(),
                summary: "cargo test".into(),
                paths: vec![],
                command: Some("cargo test".into()),
                exit_code: Some(101),
                outcome: StepOutcome::Error,
                error: Some("test failed".into()),
                at_ms: None,
            }],
            error: None,
            started_ms: None,
            ended_ms: None,
            model: None,
            usage: None,
        };
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["steps"][0]["kind"], "command");
        assert_eq!(json["steps"][0]["outcome"], "error");
        assert!(json.get("usage").is_none());
        assert_eq!(serde_json::from_value::<ChatTurn>(json).unwrap(), turn);
        let newer: TurnState = serde_json::from_str("\"thinking_hard\"").unwrap();
        assert_eq!(newer, TurnState::Unknown);
    }
}

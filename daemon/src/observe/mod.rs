//! Chat-store observers: read the AI agents' own history stores, strictly read-only and incrementally, and turn them into one event vocabulary (`ObservedEvent`) for the daemon's stream, `koru observe` and `koru chats`. Parsers are pure (line parsers for JSONL stores, snapshot readers diffed by `snapshot` for the rest); following a file (`follow`, `tail`), the seven formats (`stores/`), shared text helpers (`text`), knowing where stores keep their files (`locations`), the folders plugin sessions announce (`announced`) and watching (`watcher`) are separate.

pub mod announced;
pub mod follow;
pub mod locations;
pub mod snapshot;
pub mod stores;
pub mod summary_cache;
pub mod tail;
pub mod text;
pub mod watcher;

/// A map keyed by file path as the path's bytes, with a hasher cheaper than the standard
/// one (the keys are the user's own file names, read from their own folders). Not keyed
/// by `PathBuf`: std hashes and compares a `Path` component by component, which was 7 %
/// of a restart over 10,000 files. The observers spell a file's path one way only (a root
/// joined with names its listings or notifications gave), so bytes name it as well.
pub type PathMap<V> = std::collections::HashMap<std::ffi::OsString, V, foldhash::fast::RandomState>;

/// A set of file paths, as [`PathMap`]'s keys.
pub type PathSet = std::collections::HashSet<std::ffi::OsString, foldhash::fast::RandomState>;

use koru_protocol::{ObservationBasis, ObservedKind};
use sha2::{Digest, Sha256};

/// Why a line or a document of a chat store is not a record Koru reads: a diagnostic
/// (the file is reported `malformed` and read again on its next change), never data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not JSON, or JSON cut short (often a file caught half-written).
    #[error("{0}")]
    NotJson(String),
    /// JSON, but not the record or document the store writes.
    #[error("{0}")]
    Shape(String),
    /// A mutation-log entry (Copilot's `.jsonl` sessions) that does not apply to the
    /// document built so far.
    #[error("{0}")]
    Mutation(String),
}

impl ParseError {
    /// What was wrong, for a person.
    pub fn message(&self) -> &str {
        match self {
            ParseError::NotJson(message)
            | ParseError::Shape(message)
            | ParseError::Mutation(message) => message,
        }
    }
}

/// Characters kept in an excerpt.
pub const EXCERPT_CHARS: usize = 80;

/// One observation from a parser, before the watcher stamps the store and the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub chat_id: String,
    pub workspace: Option<String>,
    pub store_ts_ms: Option<u64>,
    pub basis: ObservationBasis,
    pub event: ObservedKind,
}

/// How long a turn may stay open with nothing written before it is taken as over: a
/// chat whose store never recorded the end of its last turn (the agent was killed, the
/// window closed, a version that writes no end record) is not `replying` for ever. The
/// end is inferred (`reply_completed` when the last record was reply text asking for no
/// tool, else `cancelled`), and taken back (`reply_resumed`) if the turn goes on after
/// all (a permission prompt answered hours later).
pub const STALE_TURN_MS: u64 = 60 * 60 * 1000;

/// A store's pure parser: one complete line in, observations out; and the quiet-period
/// inference for stores that do not always record the end of a turn.
pub trait LineParser: std::fmt::Debug + Send + Sync {
    /// Parses one line; `Err` for a line that is not a record (a diagnostic, never data).
    fn feed_line(&mut self, line: &[u8]) -> Result<Vec<Observation>, ParseError>;
    /// The file has been quiet since `last_change_ms` (when the daemon saw it change).
    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation>;
    /// Everything read so far was history (written before the daemon followed the file,
    /// last at `written_ms`): what its turns came to is concluded from the records' own
    /// times, at once.
    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.on_quiet(now_ms, written_ms, quiet_ms)
    }
    /// Whether a turn is open: something may still be inferred from the passing of time.
    fn turn_open(&self) -> bool {
        true
    }
    /// The parser's state, to resume from the same place after a restart (the summary
    /// cache); `None` for a parser that cannot be resumed (its file is read again).
    fn checkpoint(&self) -> Option<serde_json::Value> {
        None
    }
    /// Resumes from a `checkpoint`; false, leaving the parser as it was, when it does not
    /// fit (the file is read again).
    fn restore(&mut self, _state: &serde_json::value::RawValue) -> bool {
        false
    }
}

/// Replaces `parser` by the one `state` (its `checkpoint`) describes; false, leaving it
/// as it was, when `state` is not one.
pub fn restore_from_checkpoint<T: serde::de::DeserializeOwned>(
    parser: &mut T,
    state: &serde_json::value::RawValue,
) -> bool {
    match serde_json::from_str(state.get()) {
        Ok(restored) => {
            *parser = restored;
            true
        }
        Err(_) => false,
    }
}

/// Where a chat's turn stands, as far as a parser knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Turn {
    /// No prompt yet, or the last turn ended.
    Idle,
    /// A prompt was seen; the agent has not answered yet.
    Prompted,
    /// The agent is answering.
    Replying,
}

/// The turn bookkeeping every store's parser shares: which chat, where, how far the turn
/// got, and the observations that follow from it (including the inferred end of a turn).
/// What it keeps is small and does not grow with the chat: the reply's excerpt and length,
/// never its text (docs/observers.md, "Memory").
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ChatTurns {
    pub chat_id: String,
    pub workspace: Option<String>,
    pub turn: Turn,
    /// The latest reply text's excerpt and length in characters.
    reply: (String, usize),
    /// The latest reply text is not blank.
    reply_nonblank: bool,
    /// The last record's store timestamp.
    pub last_ts_ms: Option<u64>,
    /// The agent's last record carried reply text and asked for no tool, and nothing of
    /// the turn came after it. Only then may an end be inferred: after a tool call, a tool
    /// result or a thinking-only record the turn is still going, and an older text is not
    /// the reply.
    pub reply_ready: bool,
    /// The store records the end of every turn of this chat (its version writes end
    /// records): an end is never inferred, however quiet, nor when the next prompt comes.
    pub ends_recorded: bool,
    seen: bool,
    /// The last turn's end was inferred and no prompt came since: a later record of that
    /// turn takes the end back (`reply_resumed`).
    #[serde(default)]
    end_inferred: bool,
}

impl ChatTurns {
    pub fn new(chat_id: &str) -> Self {
        ChatTurns {
            chat_id: chat_id.to_string(),
            workspace: None,
            turn: Turn::Idle,
            reply: (String::new(), 0),
            reply_nonblank: false,
            last_ts_ms: None,
            reply_ready: false,
            ends_recorded: false,
            seen: false,
            end_inferred: false,
        }
    }

    /// Whether `chat_seen` was emitted.
    pub fn seen(&self) -> bool {
        self.seen
    }

    /// The latest reply text (kept as its excerpt and length).
    pub fn set_reply(&mut self, text: &str) {
        self.reply = excerpt_and_length(text);
        self.reply_nonblank = !text.trim().is_empty();
    }

    pub fn emit(&self, out: &mut Vec<Observation>, basis: ObservationBasis, event: ObservedKind) {
        out.push(Observation {
            chat_id: self.chat_id.clone(),
            workspace: self.workspace.clone(),
            store_ts_ms: self.last_ts_ms,
            basis,
            event,
        });
    }

    /// Takes the record's ISO-8601 `timestamp`, when it has one, as the store's time.
    pub fn stamp(&mut self, record: &serde_json::Map<String, serde_json::Value>) {
        if let Some(ts) = record
            .get("timestamp")
            .and_then(serde_json::Value::as_str)
            .and_then(text::parse_ts)
        {
            self.last_ts_ms = Some(ts);
        }
    }

    /// `chat_seen`, once.
    pub fn see(&mut self, out: &mut Vec<Observation>) {
        if !self.seen {
            self.seen = true;
            self.emit(out, ObservationBasis::Explicit, ObservedKind::ChatSeen);
        }
    }

    /// Whether the open turn may be taken as ended without an end record: the store does
    /// not write them, and the agent's last record was reply text asking for no tool.
    fn end_inferable(&self) -> bool {
        self.turn == Turn::Replying
            && !self.ends_recorded
            && self.reply_ready
            && self.reply_nonblank
    }

    /// A user prompt. A reply still open that may be inferred as ended is ended first
    /// (`inferred`: the store wrote no end record).
    pub fn prompt(&mut self, out: &mut Vec<Observation>, text: &str) {
        if self.end_inferable() {
            self.complete(out, ObservationBasis::Inferred);
        }
        let (excerpt, length) = excerpt_and_length(text);
        self.emit(
            out,
            ObservationBasis::Explicit,
            ObservedKind::PromptSeen {
                excerpt,
                length,
                digest: prompt_digest(text),
            },
        );
        self.turn = Turn::Prompted;
        self.reply = (String::new(), 0);
        self.reply_nonblank = false;
        self.reply_ready = false;
        self.end_inferred = false;
    }

    /// The agent answers: `reply_started` when the turn was waiting for it (or, with
    /// `from_idle`, also when it was idle). After an end Koru inferred, the agent writing
    /// more of the same turn takes that end back: `reply_resumed`, and the turn is open
    /// again (it gets its end when it really ends).
    pub fn answering(&mut self, out: &mut Vec<Observation>, from_idle: bool) {
        if self.turn == Turn::Idle && self.end_inferred {
            self.end_inferred = false;
            self.emit(out, ObservationBasis::Explicit, ObservedKind::ReplyResumed);
            self.turn = Turn::Replying;
            return;
        }
        if self.turn == Turn::Prompted || (from_idle && self.turn == Turn::Idle) {
            self.emit(out, ObservationBasis::Explicit, ObservedKind::ReplyStarted);
        }
        if self.turn == Turn::Prompted || from_idle {
            self.turn = Turn::Replying;
        }
    }

    /// The turn ended with the last reply text.
    pub fn complete(&mut self, out: &mut Vec<Observation>, basis: ObservationBasis) {
        let (excerpt, length) = self.reply.clone();
        self.emit(out, basis, ObservedKind::ReplyCompleted { excerpt, length });
        self.turn = Turn::Idle;
        self.reply_ready = false;
        self.end_inferred = basis == ObservationBasis::Inferred;
    }

    /// The turn was interrupted (reported only if one was open).
    pub fn cancel(&mut self, out: &mut Vec<Observation>) {
        if self.turn != Turn::Idle {
            self.emit(out, ObservationBasis::Explicit, ObservedKind::Cancelled);
        }
        self.turn = Turn::Idle;
        self.reply_ready = false;
        self.end_inferred = false;
    }

    /// The turn failed.
    pub fn fail(&mut self, out: &mut Vec<Observation>, reason: &str) {
        let reason = excerpt_and_length(reason).0;
        self.emit(
            out,
            ObservationBasis::Explicit,
            ObservedKind::Failed { reason },
        );
        self.turn = Turn::Idle;
        self.reply_ready = false;
        self.end_inferred = false;
    }

    /// A turn open with nothing written for `STALE_TURN_MS`: over. Complete with its
    /// reply when the last record was reply text asking for no tool, else cancelled (the
    /// agent stopped before answering, or with a tool call or its thinking pending); both
    /// `inferred`, and taken back if the turn goes on.
    fn conclude_stale(&mut self, out: &mut Vec<Observation>) {
        if self.reply_ready && self.reply_nonblank && self.turn == Turn::Replying {
            self.complete(out, ObservationBasis::Inferred);
        } else {
            self.emit(out, ObservationBasis::Inferred, ObservedKind::Cancelled);
            self.turn = Turn::Idle;
            self.reply_ready = false;
            self.end_inferred = true;
        }
    }

    /// Quiet since `last_change_ms`: an open reply that may be inferred as ended
    /// (`end_inferable`) is taken as complete after `quiet_ms`, and any turn still open
    /// after `STALE_TURN_MS` is over (both `inferred`).
    pub fn on_quiet(
        &mut self,
        now_ms: u64,
        last_change_ms: u64,
        quiet_ms: u64,
    ) -> Vec<Observation> {
        let mut out = Vec::new();
        let quiet_for = now_ms.saturating_sub(last_change_ms);
        if self.end_inferable() && quiet_for >= quiet_ms {
            self.complete(&mut out, ObservationBasis::Inferred);
        } else if self.turn != Turn::Idle && quiet_for >= STALE_TURN_MS {
            self.conclude_stale(&mut out);
        }
        out
    }

    /// History read at once: concluded from the last record's own time (the file's
    /// `written_ms` when its records carry none). A copied or restored file keeps its
    /// records' times, not the copy's.
    pub fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        let last = self.last_ts_ms.map_or(written_ms, |ts| ts.min(written_ms));
        self.on_quiet(now_ms, last, quiet_ms)
    }

    /// Whether a turn is open (something may still be inferred).
    pub fn turn_open(&self) -> bool {
        self.turn != Turn::Idle
    }
}

/// The chats table's row for the chat of `observation`, before it is applied.
pub fn new_chat_row(observation: &koru_protocol::ObservedEvent) -> koru_protocol::ChatInfo {
    koru_protocol::ChatInfo {
        store: observation.store.clone(),
        chat_id: observation.chat_id.clone(),
        workspace: observation.workspace.clone(),
        state: koru_protocol::ObservedChatState::Idle,
        last_activity_ms: observation.store_ts_ms.unwrap_or(observation.seen_at_ms),
        last_prompt: None,
    }
}

/// Applies one observation to its chat's row: what the chats table (and the summary
/// cache, which keeps each file's rows) know of a chat.
pub fn apply_to_chat_row(
    chat: &mut koru_protocol::ChatInfo,
    observation: &koru_protocol::ObservedEvent,
) {
    use koru_protocol::ObservedChatState;
    if chat.workspace.is_none() {
        chat.workspace = observation.workspace.clone();
    }
    let at = observation.store_ts_ms.unwrap_or(observation.seen_at_ms);
    chat.last_activity_ms = chat.last_activity_ms.max(at);
    match &observation.event {
        ObservedKind::PromptSeen { excerpt, .. } => {
            chat.last_prompt = Some(excerpt.clone());
            chat.state = ObservedChatState::Replying;
        }
        ObservedKind::ReplyStarted | ObservedKind::ReplyResumed => {
            chat.state = ObservedChatState::Replying
        }
        ObservedKind::NeedsInput { .. } => chat.state = ObservedChatState::NeedsInput,
        ObservedKind::ReplyCompleted { .. }
        | ObservedKind::Cancelled
        | ObservedKind::Failed { .. } => chat.state = ObservedChatState::Idle,
        ObservedKind::ChatSeen | ObservedKind::Activity | ObservedKind::Unknown => {}
    }
}

/// One JSONL line as a JSON object; `Err` (a diagnostic, never data) for anything else.
pub fn json_record(line: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>, ParseError> {
    match serde_json::from_slice(line)
        .map_err(|error| ParseError::NotJson(format!("not JSON: {error}")))?
    {
        serde_json::Value::Object(record) => Ok(record),
        _ => Err(ParseError::Shape("a line that is not a JSON object".into())),
    }
}

/// A one-line excerpt of `text` and its length in characters.
pub fn excerpt_and_length(text: &str) -> (String, usize) {
    let length = text.chars().count();
    let flat: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(EXCERPT_CHARS + 1)
        .collect();
    if flat.chars().count() > EXCERPT_CHARS {
        let mut cut: String = flat.chars().take(EXCERPT_CHARS - 1).collect();
        cut.push('…');
        (cut, length)
    } else {
        (flat, length)
    }
}

/// The prompt with whitespace runs collapsed and ends trimmed — how a drive's prompt and
/// the prompt a store recorded are compared (IDEs and agents re-wrap whitespace).
pub fn normalize_prompt(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `sha256:<hex>` of the normalized prompt.
pub fn prompt_digest(text: &str) -> String {
    let digest = Sha256::digest(normalize_prompt(text).as_bytes());
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

/// Test helper: the events of one whole turn, from a chat's first record to its end.
#[cfg(test)]
pub const A_WHOLE_TURN: [&str; 4] = [
    "chat_seen",
    "prompt_seen",
    "reply_started",
    "reply_completed",
];

/// Test helper: each observation as `kind` or `kind (inferred)`.
#[cfg(test)]
pub fn kinds(events: &[Observation]) -> Vec<String> {
    events
        .iter()
        .map(|o| {
            let name = serde_json::to_value(&o.event).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string();
            match o.basis {
                ObservationBasis::Explicit => name,
                ObservationBasis::Inferred => format!("{name} (inferred)"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_one_line_and_bounded_and_digests_ignore_whitespace_wrapping() {
        assert_eq!(excerpt_and_length("a\n  b"), ("a b".to_string(), 5));
        let (long, length) = excerpt_and_length(&"é".repeat(200));
        assert_eq!(long.chars().count(), EXCERPT_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(length, 200);
        assert_eq!(
            prompt_digest("fix\n the  tests "),
            prompt_digest("fix the tests")
        );
        assert_ne!(
            prompt_digest("fix the tests"),
            prompt_digest("fix the test")
        );
        assert!(prompt_digest("x").starts_with("sha256:"));
    }
}

//! Reading one chat back from its store file when asked: the file is streamed line by line (JSONL stores) or read whole (documents, bounded), the store's pure reader builds the turns, a `TurnCollector` keeps only those asked for, and nothing is kept afterwards. `ChatReader` runs reads off the event loop (on tokio's blocking pool, two at a time) and reports `ChatReadFinished`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

use super::items::{ConversationItem, SourceRecord};
use super::model::{Keep, Turn, TurnCollector};
use super::stores::{self, LineTurns};
use crate::observe::follow::MAX_DOCUMENT_BYTES;
use crate::observe::ParseError;

/// What to read: a chat of a store, from the file the observers last saw it in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// The store's registry interface id.
    pub store: String,
    pub chat_id: String,
    /// The chat's file (or database).
    pub source: PathBuf,
    pub keep: Keep,
    /// The turn is known to have ended with a reply (its agent's hook said so): a turn
    /// read without one is read again for a little while, as the agent may not have written
    /// its store yet (Claude Code runs its Stop hook before the transcript has the reply).
    pub expect_reply: bool,
    /// Also find where the store holds each kept turn's prompt, reply and end
    /// (`ChatTurns::records`): a drive's evidence. Every record's bytes are hashed.
    pub records: bool,
    /// Start at this prompt's line instead of the file's start (a JSONL store whose reader
    /// needs nothing before a prompt: Claude Code's), when the line is still there.
    pub from: Option<ReadFrom>,
}

/// A prompt's line where a read may start: only the turns from that one on are read (their
/// indexes and line numbers as in the whole file). The line must still hash to `sha256`,
/// else the whole file is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFrom {
    /// 1-based.
    pub line: u64,
    pub offset: u64,
    pub sha256: String,
    /// The turn the prompt opens (0 is the chat's first).
    pub turn: u64,
}

/// How long a read that expects a reply waits for the store to have it, and how often it
/// reads again meanwhile.
const REPLY_CATCH_UP: Duration = Duration::from_secs(3);
const REPLY_READ_AGAIN: Duration = Duration::from_millis(100);

/// Whether a read found the turn it kept without a reply.
fn reply_missing(result: &Result<ChatTurns, ReadError>) -> bool {
    matches!(result, Ok(found) if found.turns.last().is_some_and(|(_, turn)| turn.reply.as_deref().is_none_or(str::is_empty)))
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTurns {
    /// How many turns the chat has.
    pub total: u64,
    /// The turns kept, with their indexes, oldest first.
    pub turns: Vec<(u64, Turn)>,
    /// What the store does not record.
    pub not_recorded: &'static [&'static str],
    /// With `ReadRequest::records`: the store records of each kept turn, in the order of
    /// `turns`; else empty.
    pub records: Vec<TurnRecords>,
}

/// Where the store holds a turn's prompt, its last text and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnRecords {
    /// The prompt's record.
    pub prompt: Option<RecordAt>,
    /// The record of the agent's last text of the turn (the reply).
    pub reply: Option<RecordAt>,
    /// The last record saying how the turn ended, or that it waits for the user
    /// (`ItemKind::TurnEnd` or `ItemKind::NeedsInput`).
    pub end: Option<RecordAt>,
}

/// One record of a turn: what it is, its place and digest, and the store's time for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordAt {
    pub kind: super::items::ItemKind,
    pub source: SourceRecord,
    pub at_ms: Option<u64>,
}

impl TurnRecords {
    /// Notes an item of its turn.
    pub fn note(&mut self, item: ConversationItem) {
        use super::items::ItemKind;
        let at = RecordAt {
            kind: item.kind,
            source: item.source,
            at_ms: item.at_ms,
        };
        match item.kind {
            // A prompt split over records (a pasted image beside the text) is its first.
            ItemKind::Prompt => {
                self.prompt.get_or_insert(at);
            }
            ItemKind::AssistantText => self.reply = Some(at),
            ItemKind::TurnEnd | ItemKind::NeedsInput => self.end = Some(at),
            ItemKind::ToolCall | ItemKind::ToolResult => {}
        }
    }
}

/// Why a chat could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file is gone or cannot be opened or read.
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
    /// The file holds no chat Koru can read in this store's format.
    #[error("{path} is not a {store} chat Koru can read: {detail}")]
    Malformed {
        path: String,
        store: String,
        detail: String,
    },
    /// A store whose content Koru cannot read (Antigravity's encrypted conversations), or
    /// one this build does not know.
    #[error("the store {store} does not let Koru read its chats' content")]
    NotReadable { store: String },
    /// The file (a database of many chats) has no chat of that id.
    #[error("{path} holds no chat {chat_id}")]
    NoSuchChat { path: String, chat_id: String },
    /// The file is larger than any chat document (`MAX_DOCUMENT_BYTES`).
    #[error("{path} is {bytes} bytes, more than a chat document may be ({MAX_DOCUMENT_BYTES})")]
    TooLarge { path: String, bytes: u64 },
}

/// Reads the chat `request` names (blocking I/O: call it off the event loop).
pub fn read_chat(request: &ReadRequest) -> Result<ChatTurns, ReadError> {
    if request.records {
        return read_chat_with_records(request);
    }
    let mut out = TurnCollector::new(request.keep.clone());
    let not_recorded = stores::read_store(request, &mut out)?;
    let total = out.total();
    Ok(ChatTurns {
        total,
        turns: out.into_turns(),
        not_recorded,
        records: Vec::new(),
    })
}

/// [`read_chat`] that also notes every turn's records (a few per turn, however long the
/// turn), and keeps those of the turns kept.
fn read_chat_with_records(request: &ReadRequest) -> Result<ChatTurns, ReadError> {
    let mut noted: Vec<TurnRecords> = Vec::new();
    let mut out = TurnCollector::with_items(request.keep.clone(), |item| {
        let turn = item.turn as usize;
        if noted.len() <= turn {
            noted.resize_with(turn + 1, TurnRecords::default);
        }
        noted[turn].note(item);
    });
    let not_recorded = stores::read_store(request, &mut out)?;
    let total = out.total();
    let turns = out.into_turns();
    let records = turns
        .iter()
        .map(|(index, _)| {
            noted
                .get_mut(*index as usize)
                .map(std::mem::take)
                .unwrap_or_default()
        })
        .collect();
    Ok(ChatTurns {
        total,
        turns,
        not_recorded,
        records,
    })
}

/// What reading a chat's items found, besides the items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemsSummary {
    /// How many turns the chat has.
    pub turns: u64,
    /// How many items were handed to the sink.
    pub items: u64,
    /// What the store does not record.
    pub not_recorded: &'static [&'static str],
}

/// Reads the chat `chat_id` of the store `store` (a registry interface id) from `source`,
/// handing every item of the conversation to `sink` in order, with its source record;
/// keeps nothing (a JSONL file is streamed line by line, a document read whole within
/// `MAX_DOCUMENT_BYTES`, a database through its read-only readers). Blocking I/O: call it
/// off the event loop.
pub fn read_items(
    store: &str,
    source: &Path,
    chat_id: &str,
    mut sink: impl FnMut(ConversationItem),
) -> Result<ItemsSummary, ReadError> {
    let request = ReadRequest {
        store: store.to_string(),
        chat_id: chat_id.to_string(),
        source: source.to_path_buf(),
        keep: Keep::Last(0),
        expect_reply: false,
        records: false,
        from: None,
    };
    let mut items = 0u64;
    let mut out = TurnCollector::with_items(Keep::Last(0), |item| {
        items += 1;
        sink(item);
    });
    let not_recorded = stores::read_store(&request, &mut out)?;
    let turns = out.total();
    drop(out);
    Ok(ItemsSummary {
        turns,
        items,
        not_recorded,
    })
}

/// `path` as text, for errors.
pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// An I/O error on `path` as a read error.
pub(crate) fn unreadable(path: &Path, error: std::io::Error) -> ReadError {
    ReadError::Unreadable {
        path: shown(path),
        reason: error.to_string(),
    }
}

/// Feeds every complete line of `reader` to `turns` (a cut last line, still being
/// written, is left out), then finishes. Lines that are not records are skipped; a file
/// where no line is one is `Malformed`.
pub(crate) fn feed_lines(
    path: &Path,
    store: &str,
    reader: impl Read,
    turns: &mut dyn LineTurns,
    out: &mut TurnCollector,
) -> Result<(), ReadError> {
    feed_lines_from(path, store, reader, (0, 0), turns, out)
}

/// [`feed_lines`] of a reader placed at a line of the file: `start` is (the lines before
/// it, its byte offset), so that sources name the file's own lines.
pub(crate) fn feed_lines_from(
    path: &Path,
    store: &str,
    reader: impl Read,
    start: (u64, u64),
    turns: &mut dyn LineTurns,
    out: &mut TurnCollector,
) -> Result<(), ReadError> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut records = 0u64;
    let mut first_problem: Option<ParseError> = None;
    // Where the next line starts (1-based number, byte offset): blank and skipped lines
    // count too, so an item's source names the file's own line.
    let (mut number, mut offset) = start;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| unreadable(path, e))?;
        if read == 0 || line.last() != Some(&b'\n') {
            break;
        }
        number += 1;
        let start = offset;
        offset += read as u64;
        let body = line.trim_ascii();
        if body.is_empty() {
            continue;
        }
        out.set_source_with(|| SourceRecord::line(number, start, &line[..line.len() - 1]));
        match turns.feed_line(body, out) {
            Ok(()) => records += 1,
            Err(problem) => {
                first_problem.get_or_insert(problem);
            }
        }
        // A long history's lines are not kept: a line that was large leaves no large
        // buffer behind.
        if line.capacity() > 1024 * 1024 {
            line = Vec::new();
        }
    }
    if records == 0 {
        if let Some(problem) = first_problem {
            return Err(ReadError::Malformed {
                path: shown(path),
                store: store.to_string(),
                detail: problem.message().to_string(),
            });
        }
    }
    turns.finish(out);
    Ok(())
}

/// The whole file at `path`, refused past `MAX_DOCUMENT_BYTES`.
pub(crate) fn read_document(path: &Path) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::File::open(path).map_err(|e| unreadable(path, e))?;
    let bytes = file.metadata().map_err(|e| unreadable(path, e))?.len();
    if bytes > MAX_DOCUMENT_BYTES {
        return Err(ReadError::TooLarge {
            path: shown(path),
            bytes,
        });
    }
    let mut content = Vec::with_capacity(bytes as usize);
    file.take(MAX_DOCUMENT_BYTES)
        .read_to_end(&mut content)
        .map_err(|e| unreadable(path, e))?;
    Ok(content)
}

/// A document that did not parse as the store's, as a read error.
pub(crate) fn malformed(path: &Path, store: &str, problem: ParseError) -> ReadError {
    ReadError::Malformed {
        path: shown(path),
        store: store.to_string(),
        detail: problem.message().to_string(),
    }
}

/// A finished read, for the daemon loop (which turns it into its own event).
#[derive(Debug)]
pub struct ChatReadFinished {
    /// The number `ChatReader::start` was given.
    pub ticket: u64,
    pub result: Result<ChatTurns, ReadError>,
}

/// Runs reads off the event loop; each one's result comes back as a `ChatReadFinished`.
pub trait ChatReader: Send + Sync {
    fn start(&self, ticket: u64, request: ReadRequest);
}

/// Reads at most this many chats at once (each holds one chat's kept turns).
const READS_AT_ONCE: usize = 2;

/// Reads for drives' evidence (`ReadRequest::records`) at most this many at once, on a queue
/// of their own: a controller's read never waits behind them.
const RECORD_READS_AT_ONCE: usize = 1;

/// Reads for real, on tokio's blocking pool.
pub struct SystemChatReader<E> {
    events: mpsc::Sender<E>,
    reads: Arc<Semaphore>,
    record_reads: Arc<Semaphore>,
    /// Secrets-looking values in tool arguments are replaced (`redact::redact_turn`).
    redact: bool,
}

impl<E> SystemChatReader<E> {
    pub fn new(events: mpsc::Sender<E>, redact: bool) -> Self {
        SystemChatReader {
            events,
            reads: Arc::new(Semaphore::new(READS_AT_ONCE)),
            record_reads: Arc::new(Semaphore::new(RECORD_READS_AT_ONCE)),
            redact,
        }
    }
}

impl<E: From<ChatReadFinished> + Send + 'static> ChatReader for SystemChatReader<E> {
    fn start(&self, ticket: u64, request: ReadRequest) {
        let events = self.events.clone();
        let reads = if request.records {
            self.record_reads.clone()
        } else {
            self.reads.clone()
        };
        let redact = self.redact;
        tokio::spawn(async move {
            let _permit = reads.acquire_owned().await;
            let store = request.store.clone();
            let result = tokio::task::spawn_blocking(move || {
                let mut result = read_chat(&request);
                let deadline = std::time::Instant::now() + REPLY_CATCH_UP;
                while request.expect_reply
                    && reply_missing(&result)
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(REPLY_READ_AGAIN);
                    result = read_chat(&request);
                }
                if let (true, Ok(found)) = (redact, &mut result) {
                    for (_, turn) in &mut found.turns {
                        super::redact::redact_turn(turn);
                    }
                }
                // What the read allocated goes back to the system, not into the
                // daemon's resident memory.
                crate::memory::return_freed_heap_pages();
                result
            })
            .await
            .unwrap_or_else(|error| {
                tracing::error!(%error, store, "reading a chat panicked");
                Err(ReadError::NotReadable { store })
            });
            let _ = events
                .send(E::from(ChatReadFinished { ticket, result }))
                .await;
        });
    }
}

/// Records the reads it is asked for instead of running them (unit tests).
#[derive(Clone, Default)]
pub struct RecordingChatReader {
    pub started: Arc<std::sync::Mutex<Vec<(u64, ReadRequest)>>>,
}

impl ChatReader for RecordingChatReader {
    fn start(&self, ticket: u64, request: ReadRequest) {
        if let Ok(mut started) = self.started.lock() {
            started.push((ticket, request));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::items::{ItemKind, SourceRecord};
    use crate::conversation::stores::claude_code::ClaudeCodeTurns;

    const PROMPT: &str = r#"{"type":"user","timestamp":"2026-02-11T10:00:00.000Z","message":{"role":"user","content":"hello"}}"#;
    const ANSWER: &str = r#"{"type":"assistant","timestamp":"2026-02-11T10:00:01.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Two calls."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/w/a"}}]}}"#;

    /// The items `feed_lines` reports for `file`, read as Claude Code's.
    fn items_of(file: &[u8]) -> (Vec<ConversationItem>, Vec<(u64, Turn)>) {
        let mut items = Vec::new();
        let mut out = TurnCollector::with_items(Keep::Last(usize::MAX), |item| items.push(item));
        feed_lines(
            Path::new("f"),
            "s",
            file,
            &mut ClaudeCodeTurns::new(),
            &mut out,
        )
        .unwrap();
        let turns = out.into_turns();
        (items, turns)
    }

    fn line_of(item: &ConversationItem) -> (u64, u64, u64, &str) {
        match &item.source {
            SourceRecord::Line {
                line,
                offset,
                bytes,
                sha256,
                ..
            } => (*line, *offset, *bytes, sha256),
            other => panic!("not a line: {other:?}"),
        }
    }

    #[test]
    fn line_sources_count_every_line_and_keep_a_carriage_return() {
        let first = format!("{PROMPT}\r\n");
        let file = format!("{first}\n  \nnot json\n{ANSWER}\n{PROMPT}");
        let (items, turns) = items_of(file.as_bytes());
        assert_eq!(turns.len(), 1, "the cut last line is not read");
        let kinds: Vec<(ItemKind, u32)> = items.iter().map(|i| (i.kind, i.part)).collect();
        assert_eq!(
            kinds,
            [
                (ItemKind::Prompt, 0),
                (ItemKind::AssistantText, 0),
                (ItemKind::ToolCall, 1),
                (ItemKind::ToolCall, 2),
            ]
        );
        let prompt_bytes = format!("{PROMPT}\r");
        assert_eq!(
            line_of(&items[0]),
            (
                1,
                0,
                prompt_bytes.len() as u64,
                crate::journal::canonical::sha256_hex(prompt_bytes.as_bytes()).as_str()
            ),
            "the \\r is part of the line's bytes"
        );
        // Line 2 is empty, 3 blank, 4 not JSON: the answer is line 5.
        let answer_at = (first.len() + 1 + 3 + "not json\n".len()) as u64;
        let (line, offset, bytes, sha256) = line_of(&items[1]);
        assert_eq!((line, offset, bytes), (5, answer_at, ANSWER.len() as u64));
        let range = offset as usize..(offset + bytes) as usize;
        assert_eq!(
            sha256,
            crate::journal::canonical::sha256_hex(&file.as_bytes()[range])
        );
        assert!(items[1..].iter().all(|item| item.source == items[1].source));
        assert_eq!(items[2].tool.as_deref(), Some("Bash"));
        assert_eq!(items[3].call_id.as_deref(), Some("t2"));
        assert_eq!(
            items[0].text_sha256.as_deref(),
            Some(crate::journal::canonical::sha256_hex(b"hello").as_str())
        );
    }

    #[test]
    fn a_read_with_items_keeps_the_same_turns_as_one_without() {
        let file = format!("{PROMPT}\n{ANSWER}\n");
        let (_, with_items) = items_of(file.as_bytes());
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        feed_lines(
            Path::new("f"),
            "s",
            file.as_bytes(),
            &mut ClaudeCodeTurns::new(),
            &mut out,
        )
        .unwrap();
        assert!(!out.wants_items());
        assert_eq!(out.into_turns(), with_items);
    }
}

//! Reading one chat back from its store file when asked: the file is streamed line by line (JSONL stores) or read whole (documents, bounded), the store's pure reader builds the turns, a `TurnCollector` keeps only those asked for, and nothing is kept afterwards. `ChatReader` runs reads off the event loop (on tokio's blocking pool, two at a time) and reports `ChatReadFinished`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

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
    let mut out = TurnCollector::new(request.keep.clone());
    let not_recorded = stores::read_store(request, &mut out)?;
    let total = out.total();
    Ok(ChatTurns {
        total,
        turns: out.into_turns(),
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
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut records = 0u64;
    let mut first_problem: Option<ParseError> = None;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| unreadable(path, e))?;
        if read == 0 || line.last() != Some(&b'\n') {
            break;
        }
        let body = line.trim_ascii();
        if body.is_empty() {
            continue;
        }
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

/// Reads for real, on tokio's blocking pool.
pub struct SystemChatReader<E> {
    events: mpsc::Sender<E>,
    reads: Arc<Semaphore>,
    /// Secrets-looking values in tool arguments are replaced (`redact::redact_turn`).
    redact: bool,
}

impl<E> SystemChatReader<E> {
    pub fn new(events: mpsc::Sender<E>, redact: bool) -> Self {
        SystemChatReader {
            events,
            reads: Arc::new(Semaphore::new(READS_AT_ONCE)),
            redact,
        }
    }
}

impl<E: From<ChatReadFinished> + Send + 'static> ChatReader for SystemChatReader<E> {
    fn start(&self, ticket: u64, request: ReadRequest) {
        let events = self.events.clone();
        let reads = self.reads.clone();
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

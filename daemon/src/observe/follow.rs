//! How one store file is followed: append-only logs line by line (`LinesFollower`), logs replayed into a document (`LogFollower`), files rewritten whole re-read only when their size or mtime changed (`DocumentFollower`), opaque files as activity only (`ActivityFollower`). Each turns what it read into observations; the watcher decides when to read.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use koru_protocol::{ObservationBasis, ObservedKind};

use super::snapshot::{ChatSnapshot, SnapshotDiffer};
use super::tail::{JsonlTail, TailItem};
use super::{LineParser, Observation};
use crate::observe::ParseError;
use serde_json::value::RawValue;

/// Whole documents larger than this are not read (no chat session file is this large;
/// reading one would cost the daemon its memory).
pub const MAX_DOCUMENT_BYTES: u64 = 256 * 1024 * 1024;

/// Why a read produced nothing usable.
#[derive(Debug)]
pub enum ReadProblem {
    /// The file is gone.
    Gone,
    /// The file cannot be read (permissions, I/O).
    Unreadable(std::io::Error),
    /// The content is not what the store writes (or half-written: read again on the next
    /// change). Never data.
    Malformed(String),
    /// The store is busy (a locked database): read again later.
    Busy(String),
}

impl ReadProblem {
    fn from_io(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::NotFound {
            ReadProblem::Gone
        } else {
            ReadProblem::Unreadable(error)
        }
    }
}

impl std::fmt::Display for ReadProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadProblem::Gone => write!(f, "the file is gone"),
            ReadProblem::Unreadable(error) => write!(f, "cannot read it: {error}"),
            ReadProblem::Malformed(problem) => write!(f, "malformed: {problem}"),
            ReadProblem::Busy(problem) => write!(f, "busy: {problem}"),
        }
    }
}

/// What one read found.
#[derive(Debug, Default)]
pub struct FollowRead {
    pub observations: Vec<Observation>,
    /// The file changed (resets the quiet period).
    pub changed: bool,
    /// Records of the current file skipped as malformed so far (they are not data), in a
    /// few words; `None` when every record was usable.
    pub malformed: Option<String>,
}

/// One followed store file.
pub trait Follower: Send {
    /// Reads what changed since the last call.
    fn read(&mut self) -> Result<FollowRead, ReadProblem>;
    /// The file has been quiet since `last_change_ms`.
    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation>;
    /// Everything read so far is history, last written at `written_ms`: what its turns
    /// came to is concluded at once from the records' own times.
    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.on_quiet(now_ms, written_ms, quiet_ms)
    }
    /// Whether a turn is open, so that the passing of time may still conclude something
    /// (the watcher checks only such files when time passes).
    fn turn_open(&self) -> bool {
        true
    }
    /// Where the follower stands (read position, the parser's state), for the summary
    /// cache; `None` when it cannot be resumed (the file is read again at the next start).
    fn checkpoint(&self) -> Option<serde_json::Value> {
        None
    }
    /// Resumes from a `checkpoint` of the same file (its JSON text); false when it does
    /// not fit.
    fn restore(&mut self, _state: &str) -> bool {
        false
    }
}

/// A checkpoint read back as `T`, or `None` when it is not one.
fn checkpoint_as<'a, T: serde::Deserialize<'a>>(state: &'a str) -> Option<T> {
    serde_json::from_str(state).ok()
}

/// A [`LinesFollower`]'s checkpoint, its parser's part left to the parser.
#[derive(serde::Deserialize)]
struct LinesCheckpoint<'a> {
    position: u64,
    inode: u64,
    malformed: MalformedCount,
    #[serde(borrow)]
    parser: &'a RawValue,
}

/// A [`CompressedLinesFollower`]'s checkpoint, its parser's part left to the parser.
#[derive(serde::Deserialize)]
struct CompressedCheckpoint<'a> {
    stamp: FileStamp,
    lines_fed: usize,
    malformed: MalformedCount,
    #[serde(borrow)]
    parser: &'a RawValue,
}

/// A [`DocumentFollower`]'s checkpoint.
#[derive(serde::Deserialize)]
struct DocumentCheckpoint {
    stamp: (FileStamp, Option<FileStamp>),
    differ: SnapshotDiffer,
}

/// An [`ActivityFollower`]'s checkpoint.
#[derive(serde::Deserialize)]
struct ActivityCheckpoint {
    stamp: FileStamp,
}

/// An append-only JSONL store (Claude Code, Codex): complete lines to a `LineParser`.
pub struct LinesFollower {
    tail: JsonlTail,
    parser: Box<dyn LineParser>,
    make: Box<dyn Fn() -> Box<dyn LineParser> + Send>,
    malformed: MalformedCount,
}

/// Malformed records of the current version of a file (reset when it is replaced).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct MalformedCount {
    count: u64,
    first: Option<String>,
}

impl MalformedCount {
    fn add(&mut self, problem: ParseError) {
        self.count += 1;
        self.first.get_or_insert_with(|| problem.to_string());
    }

    fn summary(&self) -> Option<String> {
        self.first.as_ref().map(|first| {
            format!(
                "{} record(s) skipped as malformed, the first: {first}",
                self.count
            )
        })
    }
}

impl LinesFollower {
    pub fn new(path: &Path, make: Box<dyn Fn() -> Box<dyn LineParser> + Send>) -> Self {
        LinesFollower {
            tail: JsonlTail::new(path),
            parser: make(),
            make,
            malformed: MalformedCount::default(),
        }
    }
}

impl Follower for LinesFollower {
    fn read(&mut self) -> Result<FollowRead, ReadProblem> {
        let mut out = FollowRead::default();
        let (parser, malformed, make) = (&mut self.parser, &mut self.malformed, &self.make);
        self.tail
            .read_each(|item| match item {
                TailItem::Restarted => {
                    *parser = make();
                    *malformed = MalformedCount::default();
                    out.changed = true;
                }
                TailItem::Line(line) => {
                    out.changed = true;
                    match parser.feed_line(line) {
                        Ok(found) => out.observations.extend(found),
                        Err(problem) => malformed.add(problem),
                    }
                }
            })
            .map_err(ReadProblem::from_io)?;
        out.malformed = self.malformed.summary();
        Ok(out)
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.parser.on_quiet(now_ms, last_change_ms, quiet_ms)
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.parser.on_history(now_ms, written_ms, quiet_ms)
    }

    fn turn_open(&self) -> bool {
        self.parser.turn_open()
    }

    fn checkpoint(&self) -> Option<serde_json::Value> {
        let (position, inode) = self.tail.position()?;
        Some(serde_json::json!({
            "position": position,
            "inode": inode,
            "parser": self.parser.checkpoint()?,
            "malformed": self.malformed,
        }))
    }

    fn restore(&mut self, state: &str) -> bool {
        let Some(state) = checkpoint_as::<LinesCheckpoint>(state) else {
            return false;
        };
        // A parser's `restore` leaves it as it was when the checkpoint does not fit.
        if !self.parser.restore(state.parser) {
            return false;
        }
        self.malformed = state.malformed;
        self.tail.resume_at(state.position, state.inode);
        true
    }
}

/// A finished JSONL log kept zstd-compressed (Codex's `.jsonl.zst` rollouts): read whole
/// when its size, mtime or inode changed, decompressed (at most `MAX_DOCUMENT_BYTES`),
/// and only the lines after those already fed go to the parser.
pub struct CompressedLinesFollower {
    path: PathBuf,
    parser: Box<dyn LineParser>,
    make: Box<dyn Fn() -> Box<dyn LineParser> + Send>,
    read_stamp: Option<FileStamp>,
    lines_fed: usize,
    malformed: MalformedCount,
}

impl CompressedLinesFollower {
    pub fn new(path: &Path, make: Box<dyn Fn() -> Box<dyn LineParser> + Send>) -> Self {
        CompressedLinesFollower {
            path: path.to_path_buf(),
            parser: make(),
            make,
            read_stamp: None,
            lines_fed: 0,
            malformed: MalformedCount::default(),
        }
    }
}

impl Follower for CompressedLinesFollower {
    fn read(&mut self) -> Result<FollowRead, ReadProblem> {
        let file = File::open(&self.path).map_err(ReadProblem::from_io)?;
        let meta = file.metadata().map_err(ReadProblem::from_io)?;
        let now = stamp(&meta);
        if self.read_stamp == Some(now) {
            return Ok(FollowRead {
                malformed: self.malformed.summary(),
                ..FollowRead::default()
            });
        }
        let mut bytes = Vec::new();
        let decoder = zstd::stream::read::Decoder::new(file)
            .map_err(|e| ReadProblem::Malformed(format!("not zstd: {e}")))?;
        decoder
            .take(MAX_DOCUMENT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ReadProblem::Malformed(format!("cannot decompress: {e}")))?;
        if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
            self.read_stamp = Some(now);
            return Err(ReadProblem::Malformed(format!(
                "more than {MAX_DOCUMENT_BYTES} bytes once decompressed"
            )));
        }
        self.read_stamp = Some(now);
        // Complete lines only: a last line without its newline is not a record yet.
        let complete = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(end) => &bytes[..=end],
            None => &bytes[..0],
        };
        let lines: Vec<&[u8]> = complete
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .collect();
        let restarted = lines.len() < self.lines_fed;
        if restarted {
            self.parser = (self.make)();
            self.malformed = MalformedCount::default();
            self.lines_fed = 0;
        }
        let mut out = FollowRead {
            changed: lines.len() > self.lines_fed || restarted,
            ..FollowRead::default()
        };
        for line in &lines[self.lines_fed..] {
            match self.parser.feed_line(line) {
                Ok(found) => out.observations.extend(found),
                Err(problem) => self.malformed.add(problem),
            }
        }
        self.lines_fed = lines.len();
        out.malformed = self.malformed.summary();
        Ok(out)
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.parser.on_quiet(now_ms, last_change_ms, quiet_ms)
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.parser.on_history(now_ms, written_ms, quiet_ms)
    }

    fn turn_open(&self) -> bool {
        self.parser.turn_open()
    }

    fn checkpoint(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({
            "stamp": self.read_stamp?,
            "lines_fed": self.lines_fed,
            "parser": self.parser.checkpoint()?,
            "malformed": self.malformed,
        }))
    }

    fn restore(&mut self, state: &str) -> bool {
        let Some(state) = checkpoint_as::<CompressedCheckpoint>(state) else {
            return false;
        };
        if !self.parser.restore(state.parser) {
            return false;
        }
        self.read_stamp = Some(state.stamp);
        self.lines_fed = state.lines_fed;
        self.malformed = state.malformed;
        true
    }
}

/// A store that logs changes to one document (Copilot's mutation log, Gemini CLI's JSONL):
/// lines are applied in order and the document is read as a snapshot.
pub trait DocumentLog: Send {
    fn reset(&mut self);
    fn apply_line(&mut self, line: &[u8]) -> Result<(), ParseError>;
    /// The chat as it stands; `fallback_chat_id` when the log names none.
    fn snapshot(&self, fallback_chat_id: &str, workspace: Option<&str>) -> Option<ChatSnapshot>;
}

/// A `DocumentLog` followed incrementally: appended lines are applied, truncation or
/// replacement (a compaction) replays from the start.
pub struct LogFollower {
    tail: JsonlTail,
    log: Box<dyn DocumentLog>,
    chat_id: String,
    workspace: Option<String>,
    differ: SnapshotDiffer,
    malformed: MalformedCount,
}

impl LogFollower {
    pub fn new(
        path: &Path,
        log: Box<dyn DocumentLog>,
        chat_id: String,
        workspace: Option<String>,
    ) -> Self {
        LogFollower {
            tail: JsonlTail::new(path),
            log,
            chat_id,
            workspace,
            differ: SnapshotDiffer::new(),
            malformed: MalformedCount::default(),
        }
    }
}

impl Follower for LogFollower {
    fn read(&mut self) -> Result<FollowRead, ReadProblem> {
        let mut out = FollowRead::default();
        let (log, malformed) = (&mut self.log, &mut self.malformed);
        self.tail
            .read_each(|item| match item {
                TailItem::Restarted => {
                    log.reset();
                    *malformed = MalformedCount::default();
                    out.changed = true;
                }
                TailItem::Line(line) => {
                    out.changed = true;
                    if let Err(problem) = log.apply_line(line) {
                        malformed.add(problem);
                    }
                }
            })
            .map_err(ReadProblem::from_io)?;
        out.malformed = self.malformed.summary();
        if out.changed {
            if let Some(snapshot) = self.log.snapshot(&self.chat_id, self.workspace.as_deref()) {
                out.observations = self.differ.update(&snapshot);
            }
        }
        Ok(out)
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.differ.on_quiet(now_ms, last_change_ms, quiet_ms)
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.differ.on_history(now_ms, written_ms, quiet_ms)
    }

    fn turn_open(&self) -> bool {
        self.differ.turn_open()
    }
    // No checkpoint: the document a log builds can be megabytes; a log is read again
    // from its start at the next daemon start (docs/observers.md, "Restarts").
}

/// Identifies a version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FileStamp {
    len: u64,
    mtime_ns: i64,
    inode: u64,
}

fn stamp(meta: &std::fs::Metadata) -> FileStamp {
    FileStamp {
        len: meta.len(),
        mtime_ns: meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        inode: meta.ino(),
    }
}

/// A pure reader from a whole file's bytes to a snapshot.
pub type ParseDocument = Box<dyn Fn(&[u8]) -> Result<ChatSnapshot, ParseError> + Send>;

/// A pure reader from a main file's bytes and its companion's (when it exists).
pub type ParseDocumentPair =
    Box<dyn Fn(&[u8], Option<&[u8]>) -> Result<ChatSnapshot, ParseError> + Send>;

/// A file rewritten whole (Copilot `.json`, Cline's `ui_messages.json`, Gemini CLI's
/// `.json`), possibly with a companion file read with it (Cline SDK's manifest and
/// messages): parsed again only when the size, mtime or inode of either changed. A parse
/// error (a half-written file) is reported as malformed and read again on the next
/// change or rescan — never taken as data.
pub struct DocumentFollower {
    path: PathBuf,
    companion: Option<PathBuf>,
    parse: ParseDocumentPair,
    read_stamp: Option<(FileStamp, Option<FileStamp>)>,
    differ: SnapshotDiffer,
}

impl DocumentFollower {
    pub fn new(path: &Path, parse: ParseDocument) -> Self {
        DocumentFollower {
            path: path.to_path_buf(),
            companion: None,
            parse: Box::new(move |bytes, _| parse(bytes)),
            read_stamp: None,
            differ: SnapshotDiffer::new(),
        }
    }

    /// `path` read together with `companion` (which may not exist yet).
    pub fn with_companion(path: &Path, companion: &Path, parse: ParseDocumentPair) -> Self {
        DocumentFollower {
            path: path.to_path_buf(),
            companion: Some(companion.to_path_buf()),
            parse,
            read_stamp: None,
            differ: SnapshotDiffer::new(),
        }
    }
}

/// Reads a whole document, refusing one larger than `MAX_DOCUMENT_BYTES`.
fn read_document(file: File, stamp: FileStamp) -> Result<Vec<u8>, ReadProblem> {
    if stamp.len > MAX_DOCUMENT_BYTES {
        return Err(ReadProblem::Malformed(format!(
            "{} bytes, more than the {MAX_DOCUMENT_BYTES} a chat document may have",
            stamp.len
        )));
    }
    let mut bytes = Vec::with_capacity(stamp.len as usize);
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadProblem::Unreadable)?;
    Ok(bytes)
}

impl Follower for DocumentFollower {
    fn read(&mut self) -> Result<FollowRead, ReadProblem> {
        let file = File::open(&self.path).map_err(ReadProblem::from_io)?;
        let main_stamp = stamp(&file.metadata().map_err(ReadProblem::from_io)?);
        let companion = match &self.companion {
            Some(path) => match File::open(path) {
                Ok(file) => {
                    let meta = file.metadata().map_err(ReadProblem::Unreadable)?;
                    Some((file, stamp(&meta)))
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(ReadProblem::Unreadable(error)),
            },
            None => None,
        };
        let now = (main_stamp, companion.as_ref().map(|(_, s)| *s));
        if self.read_stamp == Some(now) {
            return Ok(FollowRead::default());
        }
        let bytes = read_document(file, main_stamp)?;
        let companion_bytes = match companion {
            Some((file, stamp)) => Some(read_document(file, stamp)?),
            None => None,
        };
        match (self.parse)(&bytes, companion_bytes.as_deref()) {
            Ok(snapshot) => {
                self.read_stamp = Some(now);
                Ok(FollowRead {
                    observations: self.differ.update(&snapshot),
                    changed: true,
                    malformed: None,
                })
            }
            // Not remembered as read: the writer may be half-way through a rewrite.
            Err(problem) => Err(ReadProblem::Malformed(problem.to_string())),
        }
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.differ.on_quiet(now_ms, last_change_ms, quiet_ms)
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.differ.on_history(now_ms, written_ms, quiet_ms)
    }

    fn turn_open(&self) -> bool {
        self.differ.turn_open()
    }

    fn checkpoint(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({
            "stamp": self.read_stamp?,
            "differ": self.differ,
        }))
    }

    fn restore(&mut self, state: &str) -> bool {
        let Some(state) = checkpoint_as::<DocumentCheckpoint>(state) else {
            return false;
        };
        self.read_stamp = Some(state.stamp);
        self.differ = state.differ;
        true
    }
}

/// A file whose content cannot be read (Antigravity's encrypted conversations): its
/// appearance is `chat_seen`, each later change `activity` (both `explicit`: the file
/// itself changed), never content.
pub struct ActivityFollower {
    path: PathBuf,
    chat_id: String,
    workspace: Option<String>,
    read_stamp: Option<FileStamp>,
}

impl ActivityFollower {
    pub fn new(path: &Path, chat_id: &str, workspace: Option<String>) -> Self {
        ActivityFollower {
            path: path.to_path_buf(),
            chat_id: chat_id.to_string(),
            workspace,
            read_stamp: None,
        }
    }
}

impl Follower for ActivityFollower {
    fn read(&mut self) -> Result<FollowRead, ReadProblem> {
        // Metadata only: the file is never opened.
        let meta = std::fs::metadata(&self.path).map_err(ReadProblem::from_io)?;
        let now = stamp(&meta);
        if self.read_stamp == Some(now) {
            return Ok(FollowRead::default());
        }
        let event = if self.read_stamp.is_none() {
            ObservedKind::ChatSeen
        } else {
            ObservedKind::Activity
        };
        self.read_stamp = Some(now);
        let store_ts_ms = u64::try_from(now.mtime_ns / 1_000_000).ok();
        Ok(FollowRead {
            observations: vec![Observation {
                chat_id: self.chat_id.clone(),
                workspace: self.workspace.clone(),
                store_ts_ms,
                basis: ObservationBasis::Explicit,
                event,
            }],
            changed: true,
            malformed: None,
        })
    }

    fn on_quiet(&mut self, _: u64, _: u64, _: u64) -> Vec<Observation> {
        Vec::new()
    }

    fn turn_open(&self) -> bool {
        false
    }

    fn checkpoint(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({ "stamp": self.read_stamp? }))
    }

    fn restore(&mut self, state: &str) -> bool {
        match checkpoint_as::<ActivityCheckpoint>(state) {
            Some(state) => {
                self.read_stamp = Some(state.stamp);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;
    use crate::observe::snapshot::{TurnSnapshot, TurnState};

    fn parse_lines(bytes: &[u8]) -> Result<ChatSnapshot, ParseError> {
        let text = std::str::from_utf8(bytes).map_err(|e| ParseError::NotJson(e.to_string()))?;
        if !text.ends_with("END\n") {
            return Err(ParseError::Shape("half-written".into()));
        }
        let turns = text
            .lines()
            .filter(|l| *l != "END")
            .enumerate()
            .map(|(i, prompt)| TurnSnapshot {
                id: i.to_string(),
                prompt: Some(prompt.to_string()),
                reply: String::new(),
                state: TurnState::Waiting,
                ts_ms: None,
            })
            .collect();
        Ok(ChatSnapshot {
            chat_id: "doc".into(),
            workspace: None,
            turns,
            updated_ms: None,
        })
    }

    #[test]
    fn a_document_is_read_again_only_when_it_changed_and_a_half_written_one_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chat.json");
        std::fs::write(&path, "one\nEND\n").unwrap();
        let mut follower = DocumentFollower::new(&path, Box::new(parse_lines));
        let first = follower.read().unwrap();
        assert_eq!(kinds(&first.observations), ["chat_seen", "prompt_seen"]);
        let again = follower.read().unwrap();
        assert!(!again.changed && again.observations.is_empty());
        std::fs::write(&path, "one\ntwo\n").unwrap();
        assert!(matches!(follower.read(), Err(ReadProblem::Malformed(_))));
        std::fs::write(&path, "one\ntwo\nEND\n").unwrap();
        assert_eq!(
            kinds(&follower.read().unwrap().observations),
            ["prompt_seen"]
        );
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(follower.read(), Err(ReadProblem::Gone)));
    }

    #[test]
    fn a_compressed_log_is_fed_once_and_only_new_lines_after_it_grows() {
        use crate::observe::stores::codex::CodexParser;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollout-x.jsonl.zst");
        let meta = r#"{"type":"session_meta","payload":{"id":"t1","cwd":"/w"}}"#;
        let user = r#"{"type":"event_msg","payload":{"type":"user_message","message":"hi"}}"#;
        let write = |text: &str| {
            std::fs::write(&path, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        };
        write(&format!("{meta}\n{user}\n"));
        let mut follower = CompressedLinesFollower::new(
            &path,
            Box::new(|| Box::new(CodexParser::new("rollout-x"))),
        );
        let first = follower.read().unwrap();
        assert_eq!(kinds(&first.observations), ["chat_seen", "prompt_seen"]);
        assert!(follower.read().unwrap().observations.is_empty());
        write(&format!("{meta}\n{user}\n{user}\nnot json\n"));
        let grown = follower.read().unwrap();
        assert_eq!(kinds(&grown.observations), ["prompt_seen"]);
        assert!(grown.malformed.is_some());
        std::fs::write(&path, b"plain text, not zstd").unwrap();
        assert!(matches!(follower.read(), Err(ReadProblem::Malformed(_))));
    }

    #[test]
    fn an_opaque_file_is_seen_then_active_and_never_opened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1.pb");
        std::fs::write(&path, b"\x00secret").unwrap();
        // Unreadable content does not matter: only metadata is used.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        let mut follower = ActivityFollower::new(&path, "c1", None);
        assert_eq!(kinds(&follower.read().unwrap().observations), ["chat_seen"]);
        assert!(follower.read().unwrap().observations.is_empty());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, b"\x00secret and more").unwrap();
        assert_eq!(kinds(&follower.read().unwrap().observations), ["activity"]);
    }

    #[test]
    fn a_followed_log_resumes_from_its_checkpoint_and_reads_only_what_was_appended() {
        use crate::observe::stores::claude_code::ClaudeCodeParser;
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s-1.jsonl");
        let prompt = r#"{"type":"user","sessionId":"s-1","cwd":"/w","message":{"role":"user","content":"hi"},"timestamp":"2025-07-14T10:00:00Z"}"#;
        let answer = r#"{"type":"assistant","sessionId":"s-1","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]},"timestamp":"2025-07-14T10:00:01Z"}"#;
        let end = r#"{"type":"system","subtype":"turn_duration","sessionId":"s-1","timestamp":"2025-07-14T10:00:02Z"}"#;
        // A partial last line (being written) is read again after the restart.
        std::fs::write(&path, format!("{prompt}\n{}", &answer[..20])).unwrap();
        let make = || -> Box<dyn Fn() -> Box<dyn LineParser> + Send> {
            Box::new(|| Box::new(ClaudeCodeParser::new("s-1")))
        };
        let mut first = LinesFollower::new(&path, make());
        assert_eq!(
            kinds(&first.read().unwrap().observations),
            ["chat_seen", "prompt_seen"]
        );
        let state = first.checkpoint().unwrap();
        assert_eq!(state["position"], prompt.len() + 1);
        let state = state.to_string();

        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(file, "{}\n{end}\n", &answer[20..]).unwrap();
        let mut resumed = LinesFollower::new(&path, make());
        assert!(resumed.restore(&state));
        assert_eq!(
            kinds(&resumed.read().unwrap().observations),
            ["reply_started", "reply_completed"]
        );

        // Replaced since (another inode): read from the start, as a new file.
        let other = dir.path().join("new.jsonl");
        std::fs::write(&other, format!("{prompt}\n")).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let mut replaced = LinesFollower::new(&path, make());
        assert!(replaced.restore(&state));
        let read = replaced.read().unwrap();
        assert_eq!(kinds(&read.observations), ["chat_seen", "prompt_seen"]);
    }
}

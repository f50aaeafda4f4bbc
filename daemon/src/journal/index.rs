//! The drive index: a SQLite file in the cache folder with each journaled drive's latest `DriveInfo`, so that `drive.get` and history listings answer from disk in the same time for the first drive as for the millionth; a cache, rebuilt from the journal whenever it is missing or does not match it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use koru_protocol::{DriveInfo, DriveState, StageRecord};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::canonical::sha256_hex;
use super::{
    JournalError, KIND_DRIVE_ACCEPTED, KIND_DRIVE_ENDED, KIND_DRIVE_OUTCOME_RECORDED,
    KIND_DRIVE_PROMPT_RECORDED, KIND_DRIVE_STATE, KIND_PRUNED,
};

/// How many characters of a prompt listings show.
const EXCERPT_CHARS: usize = 60;

/// The first characters of a prompt on one line, for listings.
pub fn prompt_excerpt(prompt: &str) -> String {
    let flat: String = prompt
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(EXCERPT_CHARS + 1)
        .collect();
    if flat.chars().count() > EXCERPT_CHARS {
        let mut cut: String = flat.chars().take(EXCERPT_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        flat
    }
}

/// `$XDG_CACHE_HOME/koru/journal-index/<digest of the journal folder>.sqlite3` (else under
/// `~/.cache`).
pub fn default_index_path(journal_dir: &Path) -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into())).join(".cache")
        });
    let absolute = std::path::absolute(journal_dir).unwrap_or_else(|_| journal_dir.to_path_buf());
    let key = sha256_hex(absolute.as_os_str().as_encoded_bytes());
    cache
        .join("koru")
        .join("journal-index")
        .join(format!("{}.sqlite3", &key[..16]))
}

/// Where the last applied entry is, to check the index against the journal at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub seq: u64,
    pub hash: String,
    /// The segment it is in (its first seq) and the byte offset of its line.
    pub segment: u64,
    pub offset: u64,
}

/// One journal entry for the index, with where it sits and, for an accepted drive whose
/// text is known, its excerpt.
#[derive(Debug, Clone)]
pub struct IndexedEntry {
    pub entry: Map<String, Value>,
    pub segment: u64,
    pub offset: u64,
    pub excerpt: Option<String>,
}

/// An entry as written, waiting for the index thread, which parses it there rather than
/// on the event loop (and only the drives' entries). The event loop queues where the line is (`segment`, `offset`, `len`), not the
/// line: the index thread reads the lines of a batch back from the segment with one read
/// ([`read_lines`]). Memory the event loop allocated and another thread freed slowed the
/// loop's own allocations down by a fifth (docs/benchmarks.md, "The journal's entries
/// without their lines in the index's queue").
#[derive(Debug, Clone)]
pub struct QueuedEntry {
    /// The line without its newline: empty until [`read_lines`] has read it (entries
    /// written at start-up carry theirs).
    pub line: Vec<u8>,
    /// The line's length in the segment, without the newline.
    pub len: usize,
    pub seq: u64,
    pub at_ms: u64,
    pub kind: QueuedKind,
    /// The drive the entry is about, when the writer said so (else read from the line).
    pub drive_id: Option<ShortId>,
    pub segment: u64,
    pub offset: u64,
    pub excerpt: Option<String>,
}

/// A drive id kept inline (no allocation to hand from the event loop to the index thread);
/// a longer one is not kept and the index reads it from the line.
#[derive(Clone, Copy)]
pub struct ShortId {
    len: u8,
    bytes: [u8; ShortId::CAPACITY],
}

impl ShortId {
    const CAPACITY: usize = 47;

    pub fn new(id: &str) -> Option<ShortId> {
        let len = id.len();
        if len > ShortId::CAPACITY {
            return None;
        }
        let mut bytes = [0; ShortId::CAPACITY];
        bytes[..len].copy_from_slice(id.as_bytes());
        Some(ShortId {
            len: len as u8,
            bytes,
        })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)])
            .expect("a ShortId holds the bytes of a str")
    }
}

impl std::fmt::Debug for ShortId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Reads the lines of queued entries back from their segments in `dir` (in the order they
/// were written: one read per segment the entries span). An entry whose line cannot be
/// read (its segment gone) keeps an empty line, which the index skips.
pub fn read_lines(dir: &Path, entries: &mut [QueuedEntry]) -> Result<(), JournalError> {
    use std::os::unix::fs::FileExt;
    let mut first = 0;
    let mut result = Ok(());
    while first < entries.len() {
        let segment = entries[first].segment;
        let mut end = first;
        while end < entries.len() && entries[end].segment == segment {
            end += 1;
        }
        let wanted: Vec<usize> = (first..end)
            .filter(|&i| entries[i].line.is_empty() && entries[i].len > 0)
            .collect();
        if let (Some(&lo), Some(&hi)) = (wanted.first(), wanted.last()) {
            let from = entries[lo].offset;
            let to = entries[hi].offset + entries[hi].len as u64;
            let path = dir.join(super::segments::segment_name(segment));
            let mut bytes = vec![0; (to - from) as usize];
            let read = std::fs::File::open(&path)
                .and_then(|file| file.read_exact_at(&mut bytes, from))
                .map_err(JournalError::io("read back", &path));
            match read {
                Ok(()) => {
                    for i in wanted {
                        let at = (entries[i].offset - from) as usize;
                        entries[i].line = bytes[at..at + entries[i].len].to_vec();
                    }
                }
                Err(error) => result = Err(error),
            }
        }
        first = end;
    }
    result
}

/// What the index does with an entry, from its `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueuedKind {
    Accepted,
    State,
    Ended,
    /// `drive_prompt_recorded`, `drive_outcome_recorded`: the chat's own evidence.
    Evidence,
    Pruned,
    /// Nothing: sessions, recoveries, reloads, the daemon's own entries.
    Other,
}

impl QueuedKind {
    pub fn of(kind: &str) -> QueuedKind {
        match kind {
            KIND_DRIVE_ACCEPTED => QueuedKind::Accepted,
            KIND_DRIVE_STATE => QueuedKind::State,
            KIND_DRIVE_ENDED => QueuedKind::Ended,
            KIND_DRIVE_PROMPT_RECORDED | KIND_DRIVE_OUTCOME_RECORDED => QueuedKind::Evidence,
            KIND_PRUNED => QueuedKind::Pruned,
            _ => QueuedKind::Other,
        }
    }
}

/// A drive the live batch being applied names: its entries of the batch folded in memory
/// onto it, written once at the batch's end.
struct BatchDrive {
    /// Where its `drive_accepted` is, when that is in this batch (its row is inserted; else
    /// the row read at its first entry of the batch is updated).
    accepted: Option<AcceptedAt>,
    /// `None`: the index cannot have it (an unreadable `drive_accepted`, or no row).
    info: Option<DriveInfo>,
}

/// Where a drive's `drive_accepted` entry is, for its row.
struct AcceptedAt {
    seq: u64,
    segment: u64,
    offset: u64,
    at_ms: u64,
}

impl QueuedEntry {
    pub fn parse(self) -> Option<IndexedEntry> {
        match serde_json::from_slice::<Value>(&self.line) {
            Ok(Value::Object(entry)) => Some(IndexedEntry {
                entry,
                segment: self.segment,
                offset: self.offset,
                excerpt: self.excerpt,
            }),
            _ => None,
        }
    }
}

/// What history listings ask for.
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    pub session_id: Option<String>,
    pub active_only: bool,
    pub before: Option<String>,
    pub since_ms: Option<u64>,
    pub limit: usize,
}

/// The index's layout version (`PRAGMA user_version`); another one is dropped and rebuilt.
const SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS drives (
    drive_id TEXT PRIMARY KEY,
    accepted_seq INTEGER NOT NULL UNIQUE,
    accepted_segment INTEGER NOT NULL,
    accepted_offset INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    ended INTEGER NOT NULL DEFAULT 0,
    info TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS drives_created ON drives (created_at_ms);
";

/// Each connection's page cache, in KiB (SQLite's default is 2 MiB, which a busy index
/// fills and keeps): the lookups go by key, and the kernel caches the file besides.
const CACHE_KIB: i64 = 1024;

/// The index's writing side (the start-up catch-up, then the index thread).
pub struct IndexWriter {
    conn: Connection,
    path: PathBuf,
}

fn index_error(path: &Path) -> impl FnOnce(rusqlite::Error) -> JournalError + '_ {
    move |source| JournalError::Index {
        path: path.to_path_buf(),
        source,
    }
}

impl IndexWriter {
    /// Opens (creating) the index; a file that is not a usable index is replaced.
    pub fn open(path: &Path) -> Result<IndexWriter, JournalError> {
        if let Some(parent) = path.parent() {
            crate::journal::writer::create_private_dir(parent)?;
        }
        let open = || -> rusqlite::Result<Connection> {
            let conn = Connection::open(path)?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
            let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version != SCHEMA_VERSION {
                conn.execute_batch("DROP TABLE IF EXISTS drives; DROP TABLE IF EXISTS meta;")?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            conn.execute_batch(SCHEMA)?;
            Ok(conn)
        };
        let conn = match open() {
            Ok(conn) => conn,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "the drive index is unusable; rebuilding it");
                for suffix in ["", "-wal", "-shm"] {
                    let mut name = path.as_os_str().to_owned();
                    name.push(suffix);
                    let _ = std::fs::remove_file(PathBuf::from(name));
                }
                open().map_err(index_error(path))?
            }
        };
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        Ok(IndexWriter {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last entry applied.
    pub fn applied(&self) -> Result<Applied, JournalError> {
        let get = |key: &str| -> rusqlite::Result<Option<String>> {
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
        };
        let number = |key: &str| -> Result<u64, JournalError> {
            Ok(get(key)
                .map_err(index_error(&self.path))?
                .and_then(|v| v.parse().ok())
                .unwrap_or(0))
        };
        Ok(Applied {
            seq: number("applied_seq")?,
            hash: get("applied_hash")
                .map_err(index_error(&self.path))?
                .unwrap_or_default(),
            segment: number("applied_segment")?,
            offset: number("applied_offset")?,
        })
    }

    /// Forgets everything (the journal is read again from its start).
    pub fn reset(&mut self) -> Result<(), JournalError> {
        self.conn
            .execute_batch("DELETE FROM drives; DELETE FROM meta;")
            .map_err(index_error(&self.path))
    }

    /// Applies entries in one transaction (reading the journal back: every entry). Each
    /// entry is dropped once applied: a caller that parses them as they are drawn holds
    /// one entry's tree of values at a time, not the batch's.
    pub fn apply(
        &mut self,
        entries: impl IntoIterator<Item = IndexedEntry>,
    ) -> Result<(), JournalError> {
        self.apply_entries(entries)
    }

    /// Applies entries as the daemon writes them, in one transaction: the entries of each
    /// drive the batch names are folded in memory onto it (from its `drive_accepted` when
    /// that is in the batch, else from its row) and the drive is written once, at the
    /// batch's end — a drive accepted and ended within the batch is one `INSERT`. Once
    /// committed, every entry up to the batch's last is in the index, so a start after a
    /// crash goes on from there ([`IndexWriter::applied`]): a lean `drive_ended` needs the
    /// steps before it. `open` tracks which drives run (accepted, not ended): their rows are
    /// written `ended = 0`.
    pub fn apply_live(
        &mut self,
        entries: Vec<QueuedEntry>,
        open: &mut HashSet<String>,
    ) -> Result<(), JournalError> {
        let Some(last) = entries.last() else {
            return Ok(());
        };
        let last_hash = serde_json::from_slice::<Value>(&last.line)
            .ok()
            .and_then(|v| {
                v.get("entry_hash")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .unwrap_or_default();
        let applied = Applied {
            seq: last.seq,
            hash: last_hash,
            segment: last.segment,
            offset: last.offset,
        };
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(index_error(&path))?;
        // The drives the batch names, in the order it first names them.
        let mut drives: Vec<BatchDrive> = Vec::new();
        let mut drive_at: HashMap<String, usize> = HashMap::new();
        for queued in entries {
            match queued.kind {
                QueuedKind::Other => continue,
                QueuedKind::Pruned => {
                    // In order: what the batch did before the checkpoint first.
                    store_batch(&tx, drives.drain(..), open).map_err(index_error(&path))?;
                    drive_at.clear();
                    if let Some(indexed) = queued.parse() {
                        apply_one(&tx, &indexed).map_err(index_error(&path))?;
                    }
                    continue;
                }
                QueuedKind::Accepted
                | QueuedKind::State
                | QueuedKind::Ended
                | QueuedKind::Evidence => {}
            }
            // Read straight into what the index needs (no tree of values), the drive's id
            // from the queue (a long id, which it does not hold, from the line).
            let drive_id = match queued.drive_id {
                Some(id) => id.as_str().to_string(),
                None => match parse_object(&queued.line)
                    .and_then(|e| e.get("drive_id").and_then(Value::as_str).map(String::from))
                {
                    Some(id) => id,
                    None => continue,
                },
            };
            if queued.kind == QueuedKind::Accepted {
                let info = accepted_info_of_line(&queued.line, queued.at_ms, queued.excerpt);
                if info.is_none() {
                    tracing::warn!(
                        drive_id,
                        "a drive_accepted entry the index cannot read; skipped"
                    );
                }
                open.insert(drive_id.clone());
                drive_at.insert(drive_id, drives.len());
                drives.push(BatchDrive {
                    accepted: Some(AcceptedAt {
                        seq: queued.seq,
                        segment: queued.segment,
                        offset: queued.offset,
                        at_ms: queued.at_ms,
                    }),
                    info,
                });
                continue;
            }
            if queued.kind == QueuedKind::Ended {
                open.remove(&drive_id);
            }
            let at = match drive_at.get(&drive_id) {
                Some(&at) => at,
                None => {
                    let info = load_info(&tx, &drive_id).map_err(index_error(&path))?;
                    drive_at.insert(drive_id, drives.len());
                    drives.push(BatchDrive {
                        accepted: None,
                        info,
                    });
                    drives.len() - 1
                }
            };
            if queued.kind == QueuedKind::Evidence {
                if let (Some(info), Some(entry)) =
                    (drives[at].info.as_mut(), parse_object(&queued.line))
                {
                    apply_evidence(info, &entry);
                }
                continue;
            }
            let change = DriveChangeRead::parse(&queued.line).or_else(|| {
                parse_object(&queued.line).map(|entry| DriveChangeRead::from_entry(&entry))
            });
            if let (Some(info), Some(change)) = (drives[at].info.as_mut(), change) {
                change.apply(info, queued.at_ms, queued.kind == QueuedKind::Ended);
            }
        }
        store_batch(&tx, drives, open).map_err(index_error(&path))?;
        store_applied(&tx, &applied).map_err(index_error(&path))?;
        tx.commit().map_err(index_error(&path))
    }

    fn apply_entries(
        &mut self,
        entries: impl IntoIterator<Item = IndexedEntry>,
    ) -> Result<(), JournalError> {
        let mut entries = entries.into_iter().peekable();
        if entries.peek().is_none() {
            return Ok(());
        }
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(index_error(&path))?;
        let mut last = None;
        for indexed in entries {
            apply_one(&tx, &indexed).map_err(index_error(&path))?;
            last = Some(indexed);
        }
        let last = last.expect("the first entry was peeked");
        let applied = Applied {
            seq: last.entry.get("seq").and_then(Value::as_u64).unwrap_or(0),
            hash: last
                .entry
                .get("entry_hash")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            segment: last.segment,
            offset: last.offset,
        };
        store_applied(&tx, &applied).map_err(index_error(&path))?;
        tx.commit().map_err(index_error(&path))
    }

    /// Drives accepted and not ended, with where their `drive_accepted` line is
    /// (segment, offset).
    pub fn open_drive_starts(&self) -> Result<Vec<(String, u64, u64)>, JournalError> {
        let mut statement = self
            .conn
            .prepare("SELECT drive_id, accepted_segment, accepted_offset FROM drives WHERE ended = 0 ORDER BY accepted_seq")
            .map_err(index_error(&self.path))?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                ))
            })
            .map_err(index_error(&self.path))?;
        Ok(rows.filter_map(Result::ok).collect())
    }

    /// Replaces drives' info in one transaction (the steps of open drives read back at
    /// start).
    pub fn store_all<'a>(
        &mut self,
        infos: impl IntoIterator<Item = &'a DriveInfo>,
    ) -> Result<(), JournalError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(index_error(&path))?;
        for info in infos {
            tx.execute(
                "UPDATE drives SET info = ?2 WHERE drive_id = ?1",
                params![
                    info.drive_id,
                    serde_json::to_string(info).expect("DriveInfo serializes")
                ],
            )
            .map_err(index_error(&path))?;
        }
        tx.commit().map_err(index_error(&path))
    }

    /// Drives accepted and not ended.
    pub fn open_drives(&self) -> Result<Vec<DriveInfo>, JournalError> {
        let mut statement = self
            .conn
            .prepare("SELECT info FROM drives WHERE ended = 0 ORDER BY accepted_seq")
            .map_err(index_error(&self.path))?;
        let rows = statement
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(index_error(&self.path))?;
        Ok(rows
            .filter_map(Result::ok)
            .filter_map(|info| serde_json::from_str(&info).ok())
            .collect())
    }
}

/// Records where the index is in the journal.
fn store_applied(tx: &rusqlite::Transaction, applied: &Applied) -> rusqlite::Result<()> {
    for (key, value) in [
        ("applied_seq", applied.seq.to_string()),
        ("applied_hash", applied.hash.clone()),
        ("applied_segment", applied.segment.to_string()),
        ("applied_offset", applied.offset.to_string()),
    ] {
        tx.prepare_cached(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![key, value])?;
    }
    Ok(())
}

/// Writes the drives a live batch named, as they were folded: a drive accepted in the batch
/// as a new row, another over its row; `ended` unless `open` holds it.
fn store_batch(
    tx: &rusqlite::Transaction,
    drives: impl IntoIterator<Item = BatchDrive>,
    open: &HashSet<String>,
) -> rusqlite::Result<()> {
    for drive in drives {
        let Some(info) = drive.info else {
            continue;
        };
        let ended = !open.contains(&info.drive_id);
        let Some(accepted) = drive.accepted else {
            store_info(tx, &info, ended)?;
            continue;
        };
        tx.prepare_cached(
            "INSERT OR REPLACE INTO drives (drive_id, accepted_seq, accepted_segment, accepted_offset, created_at_ms, session_id, ended, info) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            info.drive_id,
            accepted.seq as i64,
            accepted.segment as i64,
            accepted.offset as i64,
            accepted.at_ms as i64,
            info.session_id,
            ended,
            serde_json::to_string(&info).expect("DriveInfo serializes"),
        ])?;
    }
    Ok(())
}

/// A line's JSON object.
fn parse_object(line: &[u8]) -> Option<Map<String, Value>> {
    serde_json::from_slice(line).ok()
}

/// A drive's row.
fn load_info(tx: &rusqlite::Transaction, drive_id: &str) -> rusqlite::Result<Option<DriveInfo>> {
    Ok(tx
        .prepare_cached("SELECT info FROM drives WHERE drive_id = ?1")?
        .query_row([drive_id], |r| r.get::<_, String>(0))
        .optional()?
        .and_then(|info| serde_json::from_str(&info).ok()))
}

/// Replaces a drive's row.
fn store_info(tx: &rusqlite::Transaction, info: &DriveInfo, ended: bool) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE drives SET info = ?2, ended = ?3 WHERE drive_id = ?1")?
        .execute(params![
            info.drive_id,
            serde_json::to_string(info).expect("DriveInfo serializes"),
            ended
        ])
        .map(|_| ())
}

/// A field of an entry as a `T`, when it is one.
fn read<T: DeserializeOwned>(value: &Value) -> Option<T> {
    T::deserialize(value).ok()
}

/// What the index reads of a `drive_accepted` entry.
#[derive(serde::Deserialize)]
struct AcceptedRead {
    drive_id: String,
    target: koru_protocol::Target,
    session_id: String,
    route: koru_protocol::Route,
    options: koru_protocol::DriveOptions,
    #[serde(default)]
    prompt: PromptLength,
    #[serde(default)]
    retry_of: Option<String>,
}

/// Of a `drive_accepted` entry's `prompt`, its length.
#[derive(Default, serde::Deserialize)]
struct PromptLength {
    #[serde(default)]
    chars: usize,
}

/// The drive a `drive_accepted` entry (written at `at_ms`) starts: `queued`, its one
/// history record at `at_ms`. `None` when a field the drive needs cannot be read.
fn accepted_info(
    entry: &Map<String, Value>,
    at_ms: u64,
    excerpt: Option<String>,
) -> Option<DriveInfo> {
    let accepted = serde_json::from_value(Value::Object(entry.clone())).ok()?;
    Some(accepted_drive(accepted, at_ms, excerpt))
}

/// [`accepted_info`] from the entry's line.
fn accepted_info_of_line(line: &[u8], at_ms: u64, excerpt: Option<String>) -> Option<DriveInfo> {
    let accepted = serde_json::from_slice(line).ok()?;
    Some(accepted_drive(accepted, at_ms, excerpt))
}

fn accepted_drive(accepted: AcceptedRead, at_ms: u64, excerpt: Option<String>) -> DriveInfo {
    DriveInfo {
        drive_id: accepted.drive_id,
        target: accepted.target,
        session_id: accepted.session_id,
        route: accepted.route,
        options: accepted.options,
        state: DriveState::Queued,
        history: vec![StageRecord {
            state: DriveState::Queued,
            at_ms,
        }],
        blocker: None,
        prompt_chars: accepted.prompt.chars,
        prompt_excerpt: excerpt.unwrap_or_default(),
        created_at_ms: at_ms,
        finished_at_ms: None,
        attempts: Vec::new(),
        verification: Default::default(),
        observation: None,
        retry_of: accepted.retry_of,
        submit_evidence: None,
        waiting: None,
        evidence: None,
    }
}

/// Applies a `drive_state` or `drive_ended` entry (written at `at_ms`) to a drive. A
/// `drive_ended` written before the entries were lean carries the whole drive (`drive`,
/// without its prompt excerpt): that replaces the drive, its excerpt kept.
fn apply_change(info: &mut DriveInfo, entry: &Map<String, Value>, at_ms: u64) {
    let ended = entry.get("kind").and_then(Value::as_str) == Some(KIND_DRIVE_ENDED);
    DriveChangeRead::from_entry(entry).apply(info, at_ms, ended);
}

fn apply_one(tx: &rusqlite::Transaction, indexed: &IndexedEntry) -> rusqlite::Result<()> {
    let entry = &indexed.entry;
    let kind = entry.get("kind").and_then(Value::as_str).unwrap_or("");
    let at_ms = entry.get("at_ms").and_then(Value::as_u64).unwrap_or(0);
    let drive_id = entry.get("drive_id").and_then(Value::as_str).unwrap_or("");
    match kind {
        KIND_DRIVE_ACCEPTED => {
            let Some(info) = accepted_info(entry, at_ms, indexed.excerpt.clone()) else {
                tracing::warn!(
                    drive_id,
                    "a drive_accepted entry the index cannot read; skipped"
                );
                return Ok(());
            };
            tx.prepare_cached(
                "INSERT OR REPLACE INTO drives (drive_id, accepted_seq, accepted_segment, accepted_offset, created_at_ms, session_id, ended, info) VALUES (?1, ?2, ?6, ?7, ?3, ?4, 0, ?5)",
            )?
            .execute(params![
                    drive_id,
                    entry.get("seq").and_then(Value::as_u64).unwrap_or(0) as i64,
                    at_ms as i64,
                    info.session_id,
                    serde_json::to_string(&info).expect("DriveInfo serializes"),
                    indexed.segment as i64,
                    indexed.offset as i64,
                ],
            )?;
        }
        KIND_DRIVE_STATE | KIND_DRIVE_ENDED => {
            let Some(mut info) = load_info(tx, drive_id)? else {
                return Ok(());
            };
            apply_change(&mut info, entry, at_ms);
            let ended = kind == KIND_DRIVE_ENDED || info.state.is_terminal();
            store_info(tx, &info, ended)?;
        }
        KIND_DRIVE_PROMPT_RECORDED | KIND_DRIVE_OUTCOME_RECORDED => {
            let Some(mut info) = load_info(tx, drive_id)? else {
                return Ok(());
            };
            apply_evidence(&mut info, entry);
            let ended = info.state.is_terminal();
            store_info(tx, &info, ended)?;
        }
        KIND_PRUNED => {
            if let Some(through) = entry.get("through_seq").and_then(Value::as_u64) {
                tx.execute(
                    "DELETE FROM drives WHERE accepted_seq <= ?1",
                    [through as i64],
                )?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Puts what an evidence entry (`drive_prompt_recorded`, `drive_outcome_recorded`) says
/// on its drive; an entry that does not read as one is skipped.
fn apply_evidence(info: &mut DriveInfo, entry: &Map<String, Value>) {
    let kind = entry.get("kind").and_then(Value::as_str).unwrap_or("");
    let object = Value::Object(entry.clone());
    let evidence = info.evidence.get_or_insert_with(Default::default);
    match kind {
        KIND_DRIVE_PROMPT_RECORDED => match read(&object) {
            Some(prompt) => evidence.prompt = Some(prompt),
            None => tracing::warn!("a drive_prompt_recorded entry the index cannot read; skipped"),
        },
        KIND_DRIVE_OUTCOME_RECORDED => match read(&object) {
            Some(outcome) => evidence.outcome = Some(outcome),
            None => tracing::warn!("a drive_outcome_recorded entry the index cannot read; skipped"),
        },
        _ => {}
    }
}

/// What a `drive_state` or `drive_ended` entry says of a drive, read straight from its
/// line ([`DriveChangeRead::parse`], what the index thread does with the entries it is
/// handed) or field by field from a parsed entry ([`DriveChangeRead::from_entry`], which
/// skips a field it cannot read). `None`: the entry does not say it; `Some(None)`: `null`,
/// cleared.
#[derive(Debug, Default, serde::Deserialize)]
pub struct DriveChangeRead {
    #[serde(default)]
    state: Option<DriveState>,
    #[serde(default)]
    route: Option<koru_protocol::Route>,
    #[serde(default, deserialize_with = "said")]
    blocker: Option<Option<koru_protocol::Blocker>>,
    #[serde(default, deserialize_with = "said")]
    waiting: Option<Option<koru_protocol::Blocker>>,
    #[serde(default)]
    verification: Option<koru_protocol::Verification>,
    #[serde(default, deserialize_with = "said")]
    observation: Option<Option<koru_protocol::DriveObservation>>,
    #[serde(default, deserialize_with = "said")]
    submit_evidence: Option<Option<koru_protocol::SubmitEvidence>>,
    #[serde(default)]
    stages: Vec<StageRecord>,
    #[serde(default)]
    attempts: Vec<IndexedAttemptRead>,
    /// The whole drive, in a `drive_ended` an older daemon wrote.
    #[serde(default)]
    drive: Option<DriveInfo>,
}

/// One of an entry's `attempts`: the attempt at `index`.
#[derive(Debug, serde::Deserialize)]
struct IndexedAttemptRead {
    #[serde(default)]
    index: usize,
    #[serde(flatten)]
    attempt: koru_protocol::RouteAttempt,
}

/// A field that is present: its value, `null` included (`Some(None)`).
fn said<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer).map(Some)
}

impl DriveChangeRead {
    /// The entry's line read into what the index needs of it (`None`: a field is not what
    /// it should be; [`DriveChangeRead::from_entry`] then reads what it can).
    pub fn parse(line: &[u8]) -> Option<DriveChangeRead> {
        serde_json::from_slice(line).ok()
    }

    /// A parsed entry, read field by field: a field that cannot be read is left out (a
    /// clearable one is cleared, as its `null` would).
    pub fn from_entry(entry: &Map<String, Value>) -> DriveChangeRead {
        fn clearable<T: DeserializeOwned>(
            entry: &Map<String, Value>,
            name: &str,
        ) -> Option<Option<T>> {
            entry.get(name).map(read)
        }
        DriveChangeRead {
            state: entry.get("state").and_then(read),
            route: entry.get("route").and_then(read),
            blocker: clearable(entry, "blocker"),
            waiting: clearable(entry, "waiting"),
            verification: entry.get("verification").and_then(read),
            observation: clearable(entry, "observation"),
            submit_evidence: clearable(entry, "submit_evidence"),
            stages: entry.get("stages").and_then(read).unwrap_or_default(),
            attempts: entry
                .get("attempts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|item| {
                    Some(IndexedAttemptRead {
                        index: item.get("index").and_then(Value::as_u64).unwrap_or(0) as usize,
                        // The attempt's own fields; its `index` is not one of them.
                        attempt: read(item)?,
                    })
                })
                .collect(),
            drive: entry.get("drive").and_then(read),
        }
    }

    /// Applies the change (an entry written at `at_ms`; `ended`: a `drive_ended`) to a
    /// drive. A whole `drive` (older `drive_ended`) replaces it, its excerpt kept. Else:
    /// `state` and `route` as they are; `blocker`, `waiting`, `verification`,
    /// `observation` and `submit_evidence` when present (`null`: cleared); each of
    /// `attempts` at its `index`; `stages` appended to the history. An entry without
    /// `stages` (written before they were) adds one history record at `at_ms` when its
    /// state differs from the drive's. A drive that reaches a terminal state finishes at
    /// that stage's time.
    pub fn apply(self, info: &mut DriveInfo, at_ms: u64, ended: bool) {
        if let Some(whole) = self.drive.filter(|_| ended) {
            let excerpt = std::mem::take(&mut info.prompt_excerpt);
            *info = whole;
            info.prompt_excerpt = excerpt;
            return;
        }
        if self.stages.is_empty() {
            if let Some(state) = self.state.filter(|&state| state != info.state) {
                info.history.push(StageRecord { state, at_ms });
            }
        }
        for stage in self.stages {
            if stage.state.is_terminal() && info.finished_at_ms.is_none() {
                info.finished_at_ms = Some(stage.at_ms);
            }
            info.state = stage.state;
            info.history.push(stage);
        }
        if let Some(state) = self.state {
            info.state = state;
            if state.is_terminal() && info.finished_at_ms.is_none() {
                info.finished_at_ms = Some(at_ms);
            }
        }
        if let Some(route) = self.route {
            info.route = route;
        }
        if let Some(blocker) = self.blocker {
            info.blocker = blocker;
        }
        if let Some(waiting) = self.waiting {
            info.waiting = waiting;
        }
        if let Some(verification) = self.verification {
            info.verification = verification;
        }
        if let Some(observation) = self.observation {
            info.observation = observation;
        }
        if let Some(evidence) = self.submit_evidence {
            info.submit_evidence = evidence;
        }
        for IndexedAttemptRead { index, attempt } in self.attempts {
            if index < info.attempts.len() {
                info.attempts[index] = attempt;
            } else if index == info.attempts.len() {
                info.attempts.push(attempt);
            }
        }
    }
}

/// [`DriveChangeRead::apply`] of a parsed `drive_state` entry.
pub fn apply_state(info: &mut DriveInfo, entry: &Map<String, Value>, at_ms: u64) {
    DriveChangeRead::from_entry(entry).apply(info, at_ms, false);
}

/// The index's reading side, used by the state machine (WAL: reads do not wait for the
/// index thread's writes).
pub struct IndexReader {
    conn: Connection,
}

impl IndexReader {
    pub fn open(path: &Path) -> Result<IndexReader, JournalError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(index_error(path))?;
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(index_error(path))?;
        Ok(IndexReader { conn })
    }

    /// A drive by id.
    pub fn get(&self, drive_id: &str) -> Option<DriveInfo> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT info FROM drives WHERE drive_id = ?1")
            .ok()?;
        statement
            .query_row([drive_id], |r| r.get::<_, String>(0))
            .optional()
            .ok()
            .flatten()
            .and_then(|info| serde_json::from_str(&info).ok())
    }

    /// A page of drives, newest last, and whether older matches exist.
    pub fn list(&self, query: &HistoryQuery) -> (Vec<DriveInfo>, bool) {
        let before_seq: Option<i64> = match &query.before {
            Some(before) => match self
                .conn
                .query_row(
                    "SELECT accepted_seq FROM drives WHERE drive_id = ?1",
                    [before],
                    |r| r.get(0),
                )
                .optional()
            {
                Ok(Some(seq)) => Some(seq),
                _ => return (Vec::new(), false),
            },
            None => None,
        };
        // `accepted_seq < ?1` on its own (not `?1 IS NULL OR …`), so that SQLite seeks to
        // the page in the index instead of scanning down from the newest drive: the oldest
        // page of a long history costs what the newest does.
        let sql = "SELECT info FROM drives
             WHERE accepted_seq < ?1
               AND (?2 IS NULL OR created_at_ms >= ?2)
               AND (?3 IS NULL OR session_id = ?3)
               AND (?4 = 0 OR ended = 0)
             ORDER BY accepted_seq DESC LIMIT ?5";
        let Ok(mut statement) = self.conn.prepare_cached(sql) else {
            return (Vec::new(), false);
        };
        let rows = statement.query_map(
            params![
                before_seq.unwrap_or(i64::MAX),
                query.since_ms.map(|s| s as i64),
                query.session_id,
                query.active_only,
                (query.limit + 1) as i64
            ],
            |r| r.get::<_, String>(0),
        );
        let Ok(rows) = rows else {
            return (Vec::new(), false);
        };
        let mut drives: Vec<DriveInfo> = rows
            .filter_map(Result::ok)
            .filter_map(|info| serde_json::from_str(&info).ok())
            .collect();
        let more = drives.len() > query.limit;
        drives.truncate(query.limit);
        drives.reverse();
        (drives, more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lean `drive_ended` as the daemon writes it: stages, a changed and a new attempt,
    /// `waiting` cleared.
    const ENDED: &str = r#"{"at_ms":1000005,"attempts":[{"finished_at_ms":1000003,"index":0,"interface":"vscode_native_chat_open","outcome":"failed","route":"native_send","started_at_ms":1000000},{"index":1,"interface":"vscode_plugin_drive","outcome":"succeeded","reached":"submitted","route":"plugin_drive","started_at_ms":1000003,"finished_at_ms":1000005}],"drive_id":"d_1","kind":"drive_ended","route":"plugin_drive","seq":4,"stages":[{"at_ms":1000002,"state":"received"},{"at_ms":1000005,"state":"submitted"},{"at_ms":1000005,"state":"done"}],"state":"done","submit_evidence":"chat_responded","verification":"acked","waiting":null}"#;

    fn accepted() -> DriveInfo {
        let line = r#"{"at_ms":1000000,"drive_id":"d_1","kind":"drive_accepted","options":{},"prompt":{"bytes":5,"chars":5,"sha256":"00"},"route":"native_send","seq":3,"session_id":"s_1","target":{"session":"s_1"}}"#;
        let mut drive = accepted_info_of_line(line.as_bytes(), 1_000_000, None).unwrap();
        drive.waiting = Some(koru_protocol::Blocker::new(
            "chat_busy",
            "a reply is running",
        ));
        drive.attempts.push(koru_protocol::RouteAttempt {
            route: koru_protocol::Route::NativeSend,
            interface: "vscode_native_chat_open".into(),
            outcome: koru_protocol::AttemptOutcome::Running,
            reached: None,
            blocker: None,
            hint: None,
            note: None,
            text: None,
            started_at_ms: Some(1_000_000),
            finished_at_ms: None,
        });
        drive
    }

    #[test]
    fn a_lean_end_read_from_its_line_folds_as_the_parsed_entry_does() {
        let typed = DriveChangeRead::parse(ENDED.as_bytes()).expect("the line reads typed");
        let mut from_line = accepted();
        typed.apply(&mut from_line, 1_000_005, true);
        let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(ENDED) else {
            panic!("an object");
        };
        let mut from_entry = accepted();
        apply_change(&mut from_entry, &entry, 1_000_005);
        assert_eq!(from_line, from_entry);
        assert_eq!(from_line.state, DriveState::Done);
        assert_eq!(from_line.finished_at_ms, Some(1_000_005));
        assert_eq!(from_line.waiting, None, "`null` clears");
        assert_eq!(from_line.attempts.len(), 2);
        assert_eq!(
            from_line.attempts[0].outcome,
            koru_protocol::AttemptOutcome::Failed
        );
        let states: Vec<DriveState> = from_line.history.iter().map(|r| r.state).collect();
        assert_eq!(
            states,
            [
                DriveState::Queued,
                DriveState::Received,
                DriveState::Submitted,
                DriveState::Done
            ]
        );
    }

    #[test]
    fn a_line_with_a_field_the_typed_read_cannot_take_is_read_field_by_field() {
        let odd = ENDED.replace(r#""verification":"acked""#, r#""verification":42"#);
        assert!(DriveChangeRead::parse(odd.as_bytes()).is_none());
        let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(&odd) else {
            panic!("an object");
        };
        let mut drive = accepted();
        DriveChangeRead::from_entry(&entry).apply(&mut drive, 1_000_005, true);
        assert_eq!(drive.state, DriveState::Done, "the rest still applies");
        assert_eq!(drive.verification, Default::default());
    }
}

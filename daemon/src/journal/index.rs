//! The drive index: a SQLite file in the cache folder with each journaled drive's latest `DriveInfo`, so that `drive.get` and history listings answer from disk in the same time for the first drive as for the millionth; a cache, rebuilt from the journal whenever it is missing or does not match it.

use std::path::{Path, PathBuf};

use koru_protocol::{DriveInfo, DriveState, StageRecord};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde_json::{Map, Value};

use super::canonical::sha256_hex;
use super::{JournalError, KIND_DRIVE_ACCEPTED, KIND_DRIVE_ENDED, KIND_DRIVE_STATE, KIND_PRUNED};

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
/// on the event loop (and only when it needs to: a running drive's steps are not parsed
/// at all). The event loop queues where the line is (`segment`, `offset`, `len`), not the
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
            KIND_PRUNED => QueuedKind::Pruned,
            _ => QueuedKind::Other,
        }
    }
}

/// The part of a `drive_ended` line the index keeps: the drive as it ended.
#[derive(serde::Deserialize)]
struct EndedDrive {
    drive: DriveInfo,
}

/// A drive accepted in the batch being applied: written once, at the batch's end, with
/// how it ended when that is in the same batch.
struct NewDrive {
    accepted: QueuedEntry,
    ended: Option<DriveInfo>,
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
const SCHEMA_VERSION: i64 = 2;

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

    /// Applies entries as the daemon writes them, in one transaction: the steps of a drive
    /// still running are left out (the daemon has that drive in memory; a restart reads
    /// them back, see [`IndexWriter::open_drive_starts`]), and a drive accepted and ended
    /// within the batch is written once, from its `drive_ended` (its `drive_accepted` line
    /// is not even parsed). `open` tracks which drives run.
    pub fn apply_live(
        &mut self,
        entries: Vec<QueuedEntry>,
        open: &mut std::collections::HashSet<String>,
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
        let mut new: Vec<Option<NewDrive>> = Vec::new();
        let mut new_at: std::collections::HashMap<String, usize> = Default::default();
        for queued in entries {
            if queued.kind == QueuedKind::Other {
                continue;
            }
            let drive_id = match queued.drive_id {
                Some(id) => id.as_str().to_string(),
                None => match queued.kind {
                    QueuedKind::Pruned => String::new(),
                    _ => serde_json::from_slice::<Value>(&queued.line)
                        .ok()
                        .and_then(|v| v.get("drive_id").and_then(Value::as_str).map(String::from))
                        .unwrap_or_default(),
                },
            };
            match queued.kind {
                QueuedKind::Accepted => {
                    open.insert(drive_id.clone());
                    new_at.insert(drive_id, new.len());
                    new.push(Some(NewDrive {
                        accepted: queued,
                        ended: None,
                    }));
                    continue;
                }
                QueuedKind::State if open.contains(&drive_id) => continue,
                QueuedKind::Ended => {
                    open.remove(&drive_id);
                    if let Some(&at) = new_at.get(&drive_id) {
                        if let Ok(ended) = serde_json::from_slice::<EndedDrive>(&queued.line) {
                            if let Some(drive) = new[at].as_mut() {
                                drive.ended = Some(ended.drive);
                                continue;
                            }
                        }
                        // An end without the whole drive: the drive's row first, then
                        // the end applied to it.
                        store_new(&tx, [new[at].take()]).map_err(index_error(&path))?;
                    }
                }
                _ => {}
            }
            if queued.kind == QueuedKind::Pruned {
                // In order: the drives accepted before the checkpoint first.
                store_new(&tx, std::mem::take(&mut new)).map_err(index_error(&path))?;
                new_at.clear();
            }
            if let Some(indexed) = queued.parse() {
                apply_one(&tx, &indexed).map_err(index_error(&path))?;
            }
        }
        store_new(&tx, new).map_err(index_error(&path))?;
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

/// Writes the drives a live batch accepted: ended ones from their `drive_ended`, running
/// ones from their `drive_accepted`.
fn store_new(
    tx: &rusqlite::Transaction,
    new: impl IntoIterator<Item = Option<NewDrive>>,
) -> rusqlite::Result<()> {
    for drive in new.into_iter().flatten() {
        let accepted = drive.accepted;
        let Some(mut ended) = drive.ended else {
            if let Some(indexed) = accepted.parse() {
                apply_one(tx, &indexed)?;
            }
            continue;
        };
        ended.prompt_excerpt = accepted.excerpt.unwrap_or_default();
        tx.prepare_cached(
            "INSERT OR REPLACE INTO drives (drive_id, accepted_seq, accepted_segment, accepted_offset, created_at_ms, session_id, ended, info) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)",
        )?
        .execute(params![
            ended.drive_id,
            accepted.seq as i64,
            accepted.segment as i64,
            accepted.offset as i64,
            accepted.at_ms as i64,
            ended.session_id,
            serde_json::to_string(&ended).expect("DriveInfo serializes"),
        ])?;
    }
    Ok(())
}

fn apply_one(tx: &rusqlite::Transaction, indexed: &IndexedEntry) -> rusqlite::Result<()> {
    let entry = &indexed.entry;
    let kind = entry.get("kind").and_then(Value::as_str).unwrap_or("");
    let at_ms = entry.get("at_ms").and_then(Value::as_u64).unwrap_or(0);
    let drive_id = entry.get("drive_id").and_then(Value::as_str).unwrap_or("");
    let load = |drive_id: &str| -> rusqlite::Result<Option<DriveInfo>> {
        Ok(tx
            .prepare_cached("SELECT info FROM drives WHERE drive_id = ?1")?
            .query_row([drive_id], |r| r.get::<_, String>(0))
            .optional()?
            .and_then(|info| serde_json::from_str(&info).ok()))
    };
    let store = |info: &DriveInfo, ended: bool| -> rusqlite::Result<()> {
        tx.prepare_cached("UPDATE drives SET info = ?2, ended = ?3 WHERE drive_id = ?1")?
            .execute(params![
                info.drive_id,
                serde_json::to_string(info).expect("DriveInfo serializes"),
                ended
            ])
            .map(|_| ())
    };
    match kind {
        KIND_DRIVE_ACCEPTED => {
            let field = |name: &str| entry.get(name).cloned().unwrap_or(Value::Null);
            let prompt = entry.get("prompt");
            let info = serde_json::json!({
                "drive_id": drive_id,
                "target": field("target"),
                "session_id": field("session_id"),
                "route": field("route"),
                "options": field("options"),
                "state": "queued",
                "history": [{"state": "queued", "at_ms": at_ms}],
                "prompt_chars": prompt.and_then(|p| p.get("chars")).cloned().unwrap_or(Value::from(0)),
                "prompt_excerpt": indexed.excerpt.clone().unwrap_or_default(),
                "created_at_ms": at_ms,
                "retry_of": field("retry_of"),
            });
            let Ok(info) = serde_json::from_value::<DriveInfo>(info) else {
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
        KIND_DRIVE_STATE => {
            let Some(mut info) = load(drive_id)? else {
                return Ok(());
            };
            apply_state(&mut info, entry, at_ms);
            let ended = info.state.is_terminal();
            store(&info, ended)?;
        }
        KIND_DRIVE_ENDED => {
            let Some(known) = load(drive_id)? else {
                return Ok(());
            };
            let mut info = entry
                .get("drive")
                .cloned()
                .and_then(|d| serde_json::from_value::<DriveInfo>(d).ok())
                .unwrap_or_else(|| {
                    let mut info = known.clone();
                    apply_state(&mut info, entry, at_ms);
                    info
                });
            info.prompt_excerpt = known.prompt_excerpt;
            store(&info, true)?;
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

/// Applies a `drive_state` entry (the fields that changed) to a drive.
pub fn apply_state(info: &mut DriveInfo, entry: &Map<String, Value>, at_ms: u64) {
    fn read<T: serde::de::DeserializeOwned>(value: &Value) -> Option<T> {
        serde_json::from_value(value.clone()).ok()
    }
    if let Some(state) = entry.get("state").and_then(read::<DriveState>) {
        if state != info.state {
            info.state = state;
            info.history.push(StageRecord { state, at_ms });
        }
        if state.is_terminal() && info.finished_at_ms.is_none() {
            info.finished_at_ms = Some(at_ms);
        }
    }
    if let Some(route) = entry.get("route").and_then(read) {
        info.route = route;
    }
    if let Some(blocker) = entry.get("blocker") {
        info.blocker = read(blocker);
    }
    if let Some(waiting) = entry.get("waiting") {
        info.waiting = read(waiting);
    }
    if let Some(verification) = entry.get("verification").and_then(read) {
        info.verification = verification;
    }
    if let Some(observation) = entry.get("observation") {
        info.observation = read(observation);
    }
    if let Some(evidence) = entry.get("submit_evidence") {
        info.submit_evidence = read(evidence);
    }
    for attempt in entry
        .get("attempts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let index = attempt.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        let mut value = attempt.clone();
        if let Value::Object(map) = &mut value {
            map.remove("index");
        }
        if let Some(attempt) = read(&value) {
            if index < info.attempts.len() {
                info.attempts[index] = attempt;
            } else if index == info.attempts.len() {
                info.attempts.push(attempt);
            }
        }
    }
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

//! Read-only SQLite access to Cursor's `state.vscdb`: opening each read without writing a byte (the way in chosen from what is on disk), the row queries, and typed errors; the rows' meaning is `mod.rs`'s.
//!
//! # Reading without writing

//!
//! SQLite's own read-only mode is not enough to leave the files alone. Found by reading
//! the bundled SQLite (3.54) source and checked by the tests below:
//! - `mode=ro` on a WAL database whose `-wal`/`-shm` are gone (Cursor closed it cleanly,
//!   which deletes both) *creates* both files and leaves them behind: the WAL file is
//!   always opened with `O_CREAT`, and so is the `-shm` unless `readonly_shm=1`.
//! - `mode=ro` on an existing `-shm` that no process holds truncates and rebuilds it, and
//!   a reader normally writes its read mark into the `-shm` even when another process
//!   holds it.
//!
//! So each read picks its way in from what is on disk (`ReadPlan`), and opens a fresh
//! connection for that one read (no lock is held between reads, and the right way in can
//! change between reads):
//! - a `-wal` with content and its `-shm`: `mode=ro&readonly_shm=1`. SQLite maps the index
//!   read-only; if no writer holds it (Cursor crashed) it reads the WAL into private
//!   memory instead. Nothing is written.
//! - a `-wal` with content but no `-shm`: SQLite could only read it by creating the index,
//!   so the read fails with `WalWithoutIndex` (retryable: Cursor rebuilds the index the
//!   next time it opens the database).
//! - no `-wal` (or an empty one) on a WAL database: every committed page is in the main
//!   file, which only a checkpoint — and so only a writer with a WAL — changes. It is read
//!   with `immutable=1` (no locks, no side files), and the files' sizes and mtimes are
//!   compared before and after: any change fails the read with `ChangedDuringRead`
//!   (retryable), so a torn read is not returned. (File mtimes tick at the kernel's
//!   coarse clock, a few ms; a checkpoint would also have to start within that tick of
//!   the read's start, on a database whose WAL was empty when the read began.)
//! - a rollback-journal database with no `-wal`: plain `mode=ro`, with SQLite's locks, so
//!   a writer's lock is `Busy` after a short busy timeout (retryable).
//!
//! One race remains: if Cursor exits (deleting `-wal` and `-shm`) in the microseconds
//! between the check for `-wal` and SQLite taking its shared lock, SQLite opens the
//! database as if no WAL existed and creates an empty `-wal` before failing on the missing
//! `-shm`. SQLite treats an empty `-wal` as absent.
//!
//! # Cost
//!
//! Every read fetches the `composerData` rows (one range scan) and keeps the length and a
//! hash of each; only composers whose row changed have their listed bubbles fetched and
//! mapped. A composer that is generating (or lists a bubble whose row is not written yet)
//! and has changed in the last `RECHECK_WINDOW` also has its bubbles fetched again at the
//! next read, because Cursor streams the reply into the bubble row without necessarily
//! touching the composer row; so does a composer once more after any change, in case the
//! bubble rows land after the status. Those re-reads are returned only when the snapshot
//! differs.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use rusqlite::types::ValueRef;
use rusqlite::{ffi, Connection, ErrorCode, OpenFlags, OptionalExtension};
use serde_json::Value;

use crate::observe::snapshot::ChatSnapshot;

use super::{
    inline_composer_snapshots, legacy_chat_snapshots, read_composer, INLINE_COMPOSERS_KEY,
    LEGACY_CHAT_KEY,
};

/// How long a read waits for a writer's lock before reporting `Busy`.
pub const BUSY_TIMEOUT: Duration = Duration::from_millis(100);

/// How long after its last change a composer that is still generating keeps having its
/// bubbles re-read at every read (a composer left `generating` by a crash is not re-read
/// forever).
pub const RECHECK_WINDOW: Duration = Duration::from_secs(600);

/// One composer's `composerData` JSON and its bubble rows by bubble id
/// (`CursorDb::composer_rows`).
pub type ComposerRows = (Value, HashMap<String, Value>);

/// The value bytes of a composer's rows as stored (`CursorDb::composer_rows_as_stored`):
/// what a digest of them is computed from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredRows {
    /// The `composerData:<id>` row.
    pub composer: StoredRow,
    /// The `bubbleId:<id>:<bubble>` rows, by bubble id (the rows read: those the composer
    /// lists that hold JSON).
    pub bubbles: HashMap<String, StoredRow>,
}

/// One `cursorDiskKV` row: its key and its value's bytes as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredRow {
    pub key: String,
    pub value: Vec<u8>,
}

/// A row value's length and hash.
type RowDigest = (usize, u64);

/// Why a `state.vscdb` could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    /// The file cannot be opened or inspected.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Another program holds a lock on the database: retry later.
    #[error("{} is locked by a writer; retry later", path.display())]
    Busy { path: PathBuf },
    /// The file is not an SQLite database.
    #[error("{} is not an SQLite database: {reason}", path.display())]
    NotSqlite { path: PathBuf, reason: String },
    /// An SQLite database with neither a `cursorDiskKV` nor an `ItemTable` table.
    #[error("{} has no cursorDiskKV or ItemTable table, so it is not Cursor's state.vscdb", path.display())]
    NotCursor { path: PathBuf },
    /// The database, read without locks because it had no write-ahead log, changed during
    /// the read: retry.
    #[error("{} changed while it was read without locks; retry", path.display())]
    ChangedDuringRead { path: PathBuf },
    /// The write-ahead log has content but its index (`-shm`) is missing; reading it would
    /// create the index. Retry once Cursor has opened the database again.
    #[error("{}-wal has content but {}-shm is missing; it can be read once Cursor opens the database again (reading it now would create the -shm file)", path.display(), path.display())]
    WalWithoutIndex { path: PathBuf },
    /// A writer was interrupted and its work must be recovered or rolled back, which a
    /// read-only reader cannot do: retry once Cursor has opened the database.
    #[error("{} needs recovery by a writer (an interrupted transaction); retry once Cursor has opened it: {source}", path.display())]
    NeedsRecovery {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// Any other failure of a query.
    #[error("cannot read {}: {source}", path.display())]
    Query {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

impl CursorError {
    /// Whether the same read may succeed later without anyone fixing anything (a lock, a
    /// concurrent change, a state only Cursor itself clears).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            CursorError::Busy { .. }
                | CursorError::ChangedDuringRead { .. }
                | CursorError::WalWithoutIndex { .. }
                | CursorError::NeedsRecovery { .. }
        )
    }
}

/// A read-only view of one state.vscdb.
#[derive(Debug)]
pub struct CursorDb {
    path: PathBuf,
    /// What the previous read saw of each composer, by `composerData:` key.
    composers: HashMap<String, ComposerSeen>,
    /// No read has succeeded yet (every composer is new).
    first_read: bool,
    /// The legacy chat panel's `ItemTable` value as last read (its length and hash).
    legacy_digest: Option<RowDigest>,
    /// The `ItemTable` composer list (`composer.composerData`) as last read.
    inline_digest: Option<RowDigest>,
    /// The workspace of a per-workspace database (from its `workspace.json`).
    workspace: Option<String>,
    /// Cursor's global database, for a per-workspace one: a composer it holds as a
    /// `composerData:` row is that database's chat, not listed again from this one.
    global: Option<PathBuf>,
}

impl CursorDb {
    /// Opens with a `file:` URI and `mode=ro` (never writes, never checkpoints, never
    /// creates files; no journal-mode change); a short busy timeout. Checks that the file
    /// is Cursor's (a `cursorDiskKV` table); each `changed_chats` opens its own connection.
    pub fn open(path: &Path) -> Result<Self, CursorError> {
        let db = CursorDb::unread(path);
        db.read(|_| Ok(()))?;
        Ok(db)
    }

    /// The view of `path` before any read.
    fn unread(path: &Path) -> Self {
        CursorDb {
            path: path.to_path_buf(),
            composers: HashMap::new(),
            first_read: true,
            legacy_digest: None,
            inline_digest: None,
            workspace: None,
            global: None,
        }
    }

    /// The composers whose data changed since the previous call (all of them on the first
    /// call), as snapshots. On error nothing is remembered, so the next call reports the
    /// same changes.
    pub fn changed_chats(&mut self) -> Result<Vec<ChatSnapshot>, CursorError> {
        let now = Instant::now();
        let first_read = self.first_read;
        let previous = &self.composers;
        let digests_before = (self.legacy_digest, self.inline_digest);
        let workspace = self.workspace.as_deref();
        let ((mut changed, composers), items) = self.read(|connection| {
            let composers = if has_table(connection, "cursorDiskKV")? {
                collect_changes(connection, previous, first_read, now)?
            } else {
                (Vec::new(), HashMap::new())
            };
            let items = if has_table(connection, "ItemTable")? {
                Some(read_item_table_chats(
                    connection,
                    digests_before,
                    workspace,
                )?)
            } else {
                None
            };
            Ok((composers, items))
        })?;
        let items = match items {
            Some(mut items) => {
                if let Some(global) = &self.global {
                    let ids: Vec<&str> = items.inline.iter().map(|c| c.chat_id.as_str()).collect();
                    let held = global_composer_ids(global, &ids)?;
                    items.inline.retain(|chat| !held.contains(&chat.chat_id));
                }
                items
            }
            None => ItemTableChats::default(),
        };
        self.composers = composers;
        self.first_read = false;
        self.legacy_digest = items.legacy_digest;
        self.inline_digest = items.inline_digest;
        changed.extend(items.legacy);
        changed.extend(items.inline);
        Ok(changed)
    }

    /// One composer's rows, for reading its conversation back: the `composerData:<id>` JSON
    /// (with `composerId` filled in from the key, as the observer reads it) and the
    /// `bubbleId:<id>:<bubble>` rows its `fullConversationHeadersOnly` lists, by bubble id.
    /// `None` when the database has no such row (or no `cursorDiskKV` table) or the row is
    /// not JSON. Read the same read-only way as every read (`ReadPlan`), in one read
    /// transaction.
    pub fn composer_rows(&self, composer_id: &str) -> Result<Option<ComposerRows>, CursorError> {
        self.read_composer_rows(composer_id, None)
    }

    /// `composer_rows`, with the rows' value bytes as stored, read in the same transaction
    /// (for the digests of a chat's items).
    pub fn composer_rows_as_stored(
        &self,
        composer_id: &str,
    ) -> Result<Option<(ComposerRows, StoredRows)>, CursorError> {
        let mut stored = StoredRows::default();
        let rows = self.read_composer_rows(composer_id, Some(&mut stored))?;
        Ok(rows.map(|rows| (rows, stored)))
    }

    /// `composer_rows`, keeping the value bytes in `stored` when given.
    fn read_composer_rows(
        &self,
        composer_id: &str,
        mut stored: Option<&mut StoredRows>,
    ) -> Result<Option<ComposerRows>, CursorError> {
        let key = format!("composerData:{composer_id}");
        self.read(|connection| {
            if !has_table(connection, "cursorDiskKV")? {
                return Ok(None);
            }
            let bytes: Option<Vec<u8>> = connection
                .query_row(
                    "SELECT value FROM cursorDiskKV WHERE key = ?1",
                    [&key],
                    |row| Ok(bytes_of(row.get_ref(0)?).map(<[u8]>::to_vec)),
                )
                .optional()?
                .flatten();
            let Some(bytes) = bytes else {
                return Ok(None);
            };
            let Some(composer) = composer_value(&key, &bytes) else {
                return Ok(None);
            };
            let bubbles = fetch_bubbles(
                connection,
                &composer,
                stored.as_deref_mut().map(|stored| &mut stored.bubbles),
            )?;
            if let Some(stored) = stored {
                stored.composer = StoredRow { key, value: bytes };
            }
            Ok(Some((composer, bubbles)))
        })
    }

    /// One `ItemTable` value as JSON (the per-workspace databases' `composer.composerData`
    /// and legacy chat panel): `None` when the key (or the table) is absent or the value is
    /// not JSON. Read the same read-only way as every read.
    pub fn item_value(&self, key: &str) -> Result<Option<Value>, CursorError> {
        Ok(self
            .item_bytes(key)?
            .and_then(|bytes| serde_json::from_slice(&bytes).ok()))
    }

    /// One `ItemTable` value's bytes as stored: `None` when the key (or the table) is
    /// absent or the value is neither text nor a blob. Read the same read-only way as every
    /// read.
    pub fn item_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, CursorError> {
        self.read(|connection| {
            if !has_table(connection, "ItemTable")? {
                return Ok(None);
            }
            Ok(connection
                .query_row("SELECT value FROM ItemTable WHERE key = ?1", [key], |row| {
                    Ok(bytes_of(row.get_ref(0)?).map(<[u8]>::to_vec))
                })
                .optional()?
                .flatten())
        })
    }

    /// The workspace the database belongs to (a per-workspace `state.vscdb`), given to the
    /// legacy chats that carry none of their own.
    pub fn with_workspace(mut self, workspace: Option<String>) -> Self {
        self.workspace = workspace;
        self
    }

    /// Cursor's global database (`globalStorage/state.vscdb`), for a per-workspace one: the
    /// composers it holds are not listed again from this one.
    pub fn with_global(mut self, global: Option<PathBuf>) -> Self {
        self.global = global;
        self
    }

    /// One read: opens a connection the way `ReadPlan` says, runs `body` inside one read
    /// transaction, and checks a lock-free read was not overtaken by a writer.
    fn read<T>(
        &self,
        body: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, CursorError> {
        let path = &self.path;
        let plan = ReadPlan::for_files(path)?;
        let before = plan.lock_free().then(|| Fingerprint::of(path));
        let result = run_read(path, &plan, body);
        if let Some(before) = before {
            if Fingerprint::of(path) != before {
                return Err(CursorError::ChangedDuringRead { path: path.clone() });
            }
        }
        result
    }
}

/// What one read saw of a composer row.
#[derive(Debug, Clone)]
struct ComposerSeen {
    /// The row's length and hash.
    digest: (usize, u64),
    /// When the row last changed (as seen by the reads).
    changed_at: Instant,
    /// Re-read the bubbles at the next read even if the row did not change; the snapshot
    /// last returned, so that only a different one is returned.
    recheck: Option<ChatSnapshot>,
}

/// The row digests, snapshots of changed composers, and what to remember for next time.
fn collect_changes(
    connection: &Connection,
    previous: &HashMap<String, ComposerSeen>,
    first_read: bool,
    now: Instant,
) -> Result<(Vec<ChatSnapshot>, HashMap<String, ComposerSeen>), rusqlite::Error> {
    let mut changed = Vec::new();
    let mut seen = HashMap::new();
    let mut statement =
        connection.prepare("SELECT key, value FROM cursorDiskKV WHERE key >= ?1 AND key < ?2")?;
    let mut rows = statement.query(["composerData:", "composerData;"])?;
    while let Some(row) = rows.next()? {
        let Some(key) = text_of(row.get_ref(0)?) else {
            continue;
        };
        let Some(bytes) = bytes_of(row.get_ref(1)?) else {
            continue;
        };
        let digest = digest_of(bytes);
        let earlier = previous.get(&key);
        let row_changed = earlier.is_none_or(|earlier| earlier.digest != digest);
        let recheck = earlier.and_then(|earlier| {
            earlier
                .recheck
                .as_ref()
                .filter(|_| now.duration_since(earlier.changed_at) < RECHECK_WINDOW)
        });
        let changed_at = match earlier {
            Some(earlier) if !row_changed => earlier.changed_at,
            _ => now,
        };
        if !row_changed && recheck.is_none() {
            seen.insert(
                key,
                ComposerSeen {
                    digest,
                    changed_at,
                    recheck: None,
                },
            );
            continue;
        }
        let mut recheck_next = None;
        if let Some(composer) = composer_value(&key, bytes) {
            let bubbles = fetch_bubbles(connection, &composer, None)?;
            if let Some(reading) = read_composer(&composer, &bubbles, None) {
                let report = row_changed || recheck != Some(&reading.snapshot);
                if (row_changed && !first_read) || reading.in_flight {
                    recheck_next = Some(reading.snapshot.clone());
                }
                if report {
                    changed.push(reading.snapshot);
                }
            }
        }
        seen.insert(
            key,
            ComposerSeen {
                digest,
                changed_at,
                recheck: recheck_next,
            },
        );
    }
    Ok((changed, seen))
}

/// The composer row's JSON, with `composerId` taken from the key when the value has none.
fn composer_value(key: &str, bytes: &[u8]) -> Option<Value> {
    let mut composer: Value = serde_json::from_slice(bytes).ok()?;
    let id = key.strip_prefix("composerData:")?;
    if let Value::Object(fields) = &mut composer {
        if !fields.get("composerId").is_some_and(Value::is_string) && !id.is_empty() {
            fields.insert("composerId".into(), Value::String(id.to_string()));
        }
    }
    Some(composer)
}

/// The bubble rows a composer lists in `fullConversationHeadersOnly`, by bubble id; rows
/// not written yet, and values that are not JSON, are left out. With `stored`, the values'
/// bytes of the rows kept are put there too, by bubble id.
fn fetch_bubbles(
    connection: &Connection,
    composer: &Value,
    mut stored: Option<&mut HashMap<String, StoredRow>>,
) -> Result<HashMap<String, Value>, rusqlite::Error> {
    let mut bubbles = HashMap::new();
    let Some(composer_id) = composer.get("composerId").and_then(Value::as_str) else {
        return Ok(bubbles);
    };
    let Some(headers) = composer
        .get("fullConversationHeadersOnly")
        .and_then(Value::as_array)
    else {
        return Ok(bubbles);
    };
    let mut statement =
        connection.prepare_cached("SELECT value FROM cursorDiskKV WHERE key = ?1")?;
    for header in headers {
        let Some(bubble_id) = header.get("bubbleId").and_then(Value::as_str) else {
            continue;
        };
        if bubbles.contains_key(bubble_id) {
            continue;
        }
        let key = format!("bubbleId:{composer_id}:{bubble_id}");
        let keep = stored.is_some();
        let bubble = statement
            .query_row([&key], |row| {
                Ok(bytes_of(row.get_ref(0)?).and_then(|bytes| {
                    let bubble: Value = serde_json::from_slice(bytes).ok()?;
                    Some((bubble, keep.then(|| bytes.to_vec())))
                }))
            })
            .optional()?
            .flatten();
        if let Some((bubble, bytes)) = bubble {
            if let (Some(stored), Some(value)) = (stored.as_deref_mut(), bytes) {
                stored.insert(bubble_id.to_string(), StoredRow { key, value });
            }
            bubbles.insert(bubble_id.to_string(), bubble);
        }
    }
    Ok(bubbles)
}

/// A column's bytes when it holds text or a blob.
fn bytes_of(value: ValueRef<'_>) -> Option<&[u8]> {
    match value {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Some(bytes),
        _ => None,
    }
}

fn text_of(value: ValueRef<'_>) -> Option<String> {
    bytes_of(value).and_then(|bytes| String::from_utf8(bytes.to_vec()).ok())
}

/// The length and a hash of a row's value: enough to tell whether it changed.
pub(super) fn digest_of(bytes: &[u8]) -> (usize, u64) {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    (bytes.len(), hasher.finish())
}

/// How one read gets into the database without writing (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadPlan {
    /// A write-ahead log with content and its index: `readonly_shm=1`.
    SharedIndex,
    /// No write-ahead log content: `immutable=1`, checked by fingerprints.
    Immutable,
    /// A rollback-journal database: plain `mode=ro` with SQLite's locks.
    Locked,
}

impl ReadPlan {
    fn for_files(path: &Path) -> Result<ReadPlan, CursorError> {
        let header = read_header(path)?;
        let wal_len = std::fs::metadata(side_file(path, "-wal"))
            .ok()
            .map(|meta| meta.len());
        let shm_exists = side_file(path, "-shm").exists();
        // Bytes 18 and 19 of the header: file format write/read versions, 2 for WAL.
        let wal_mode = header[18] == 2 || header[19] == 2;
        Ok(match wal_len {
            Some(len) if len > 0 => {
                if shm_exists {
                    ReadPlan::SharedIndex
                } else {
                    return Err(CursorError::WalWithoutIndex {
                        path: path.to_path_buf(),
                    });
                }
            }
            Some(_) => ReadPlan::Immutable,
            None if wal_mode => ReadPlan::Immutable,
            None => ReadPlan::Locked,
        })
    }

    fn lock_free(self) -> bool {
        self == ReadPlan::Immutable
    }

    fn uri_parameters(self) -> &'static str {
        match self {
            ReadPlan::SharedIndex => "mode=ro&readonly_shm=1",
            ReadPlan::Immutable => "mode=ro&immutable=1",
            ReadPlan::Locked => "mode=ro",
        }
    }
}

/// The 100-byte SQLite header, read with a plain read-only file handle.
fn read_header(path: &Path) -> Result<[u8; 100], CursorError> {
    let open_error = |source: std::io::Error| CursorError::Open {
        path: path.to_path_buf(),
        source: Box::new(source),
    };
    let mut file = std::fs::File::open(path).map_err(open_error)?;
    let mut header = [0u8; 100];
    let mut filled = 0;
    while filled < header.len() {
        match file.read(&mut header[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(open_error(error)),
        }
    }
    let not_sqlite = |reason: &str| CursorError::NotSqlite {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    if filled == 0 {
        return Err(not_sqlite("the file is empty"));
    }
    if filled < header.len() || &header[..16] != b"SQLite format 3\0" {
        return Err(not_sqlite("no SQLite header"));
    }
    Ok(header)
}

/// `<path><suffix>`, e.g. `state.vscdb-wal`.
pub(super) fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// The sizes and mtimes of the database, its write-ahead log and its rollback journal, to
/// notice a writer. (Not the `-shm`: readers write their read marks there, and it does not
/// change what a lock-free read of the main file sees.)
#[derive(Debug, PartialEq, Eq)]
struct Fingerprint(Vec<Option<(u64, Option<SystemTime>)>>);

impl Fingerprint {
    fn of(path: &Path) -> Fingerprint {
        let files = [
            path.to_path_buf(),
            side_file(path, "-wal"),
            side_file(path, "-journal"),
        ];
        Fingerprint(
            files
                .iter()
                .map(|file| {
                    std::fs::metadata(file)
                        .ok()
                        .map(|meta| (meta.len(), meta.modified().ok()))
                })
                .collect(),
        )
    }
}

/// Opens a connection as `plan` says, checks the table, and runs `body` in one read
/// transaction.
fn run_read<T>(
    path: &Path,
    plan: &ReadPlan,
    body: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
) -> Result<T, CursorError> {
    let uri = format!("{}?{}", file_uri(path), plan.uri_parameters());
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection =
        Connection::open_with_flags(&uri, flags).map_err(|error| match classify(path, error) {
            CursorError::Query { path, source } => CursorError::Open {
                path,
                source: Box::new(source),
            },
            other => other,
        })?;
    let classify = |error| classify(path, error);
    connection.busy_timeout(BUSY_TIMEOUT).map_err(classify)?;
    let transaction = connection.unchecked_transaction().map_err(classify)?;
    let is_cursor = has_table(&transaction, "cursorDiskKV").map_err(classify)?
        || has_table(&transaction, "ItemTable").map_err(classify)?;
    if !is_cursor {
        return Err(CursorError::NotCursor {
            path: path.to_path_buf(),
        });
    }
    let result = body(&transaction).map_err(classify)?;
    // Ending a read transaction writes nothing; the connection closes when dropped.
    transaction.rollback().map_err(classify)?;
    Ok(result)
}

/// Whether the database has the table `name`.
fn has_table(connection: &Connection, name: &str) -> Result<bool, rusqlite::Error> {
    connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [name],
        |row| row.get(0),
    )
}

/// What one read found in `ItemTable`: each value's digest (`None` when the key is absent)
/// and the chats of the values that changed.
#[derive(Debug, Default)]
struct ItemTableChats {
    legacy_digest: Option<RowDigest>,
    legacy: Vec<ChatSnapshot>,
    inline_digest: Option<RowDigest>,
    inline: Vec<ChatSnapshot>,
}

/// The legacy chat panel's tabs and the inline composers, each when its value changed
/// since `(legacy, inline)` digests. Inline composers this database also holds as
/// `composerData:` rows are left to those rows.
fn read_item_table_chats(
    connection: &Connection,
    (legacy_before, inline_before): (Option<RowDigest>, Option<RowDigest>),
    workspace: Option<&str>,
) -> Result<ItemTableChats, rusqlite::Error> {
    let (legacy_digest, legacy) = read_item_if_changed(connection, LEGACY_CHAT_KEY, legacy_before)?;
    let (inline_digest, inline) =
        read_item_if_changed(connection, INLINE_COMPOSERS_KEY, inline_before)?;
    let mut inline = inline
        .map(|value| inline_composer_snapshots(&value, workspace))
        .unwrap_or_default();
    if !inline.is_empty() && has_table(connection, "cursorDiskKV")? {
        let ids: Vec<&str> = inline.iter().map(|chat| chat.chat_id.as_str()).collect();
        let held = composer_rows_present(connection, &ids)?;
        inline.retain(|chat| !held.contains(&chat.chat_id));
    }
    Ok(ItemTableChats {
        legacy_digest,
        legacy: legacy
            .map(|value| legacy_chat_snapshots(&value, workspace))
            .unwrap_or_default(),
        inline_digest,
        inline,
    })
}

/// An `ItemTable` value's digest (`None` when the key is absent) and, when it changed
/// since `before`, its JSON (`None` when it is not JSON text).
fn read_item_if_changed(
    connection: &Connection,
    key: &str,
    before: Option<RowDigest>,
) -> Result<(Option<RowDigest>, Option<Value>), rusqlite::Error> {
    let mut statement = connection.prepare_cached("SELECT value FROM ItemTable WHERE key = ?1")?;
    let mut rows = statement.query([key])?;
    let Some(row) = rows.next()? else {
        return Ok((None, None));
    };
    let Some(bytes) = bytes_of(row.get_ref(0)?) else {
        return Ok((before, None));
    };
    let digest = digest_of(bytes);
    if before == Some(digest) {
        return Ok((before, None));
    }
    Ok((Some(digest), serde_json::from_slice::<Value>(bytes).ok()))
}

/// Which of `ids` have a `composerData:<id>` row in this database's `cursorDiskKV`.
fn composer_rows_present(
    connection: &Connection,
    ids: &[&str],
) -> Result<std::collections::HashSet<String>, rusqlite::Error> {
    let mut statement =
        connection.prepare_cached("SELECT EXISTS (SELECT 1 FROM cursorDiskKV WHERE key = ?1)")?;
    let mut present = std::collections::HashSet::new();
    for id in ids {
        if statement.query_row([format!("composerData:{id}")], |row| row.get::<_, bool>(0))? {
            present.insert(id.to_string());
        }
    }
    Ok(present)
}

/// Which of `ids` Cursor's global database holds as `composerData:` rows, read the same
/// read-only way. A global database that does not exist or is not Cursor's holds none; one
/// that cannot be read now (locked, changing) fails the read, to be retried.
fn global_composer_ids(
    global: &Path,
    ids: &[&str],
) -> Result<std::collections::HashSet<String>, CursorError> {
    if ids.is_empty() || !global.exists() {
        return Ok(Default::default());
    }
    let result = CursorDb::unread(global).read(|connection| {
        if has_table(connection, "cursorDiskKV")? {
            composer_rows_present(connection, ids)
        } else {
            Ok(Default::default())
        }
    });
    match result {
        Err(error) if !error.is_retryable() => Ok(Default::default()),
        other => other,
    }
}

/// The error for a failed SQLite call.
fn classify(path: &Path, error: rusqlite::Error) -> CursorError {
    let path = path.to_path_buf();
    let Some(sqlite) = error.sqlite_error() else {
        return CursorError::Query {
            path,
            source: error,
        };
    };
    match sqlite.code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => CursorError::Busy { path },
        ErrorCode::NotADatabase => CursorError::NotSqlite {
            path,
            reason: "SQLite rejects it".into(),
        },
        _ if matches!(
            sqlite.extended_code,
            ffi::SQLITE_READONLY_ROLLBACK
                | ffi::SQLITE_READONLY_RECOVERY
                | ffi::SQLITE_READONLY_CANTINIT
        ) =>
        {
            CursorError::NeedsRecovery {
                path,
                source: error,
            }
        }
        _ => CursorError::Query {
            path,
            source: error,
        },
    }
}

/// An SQLite `file:` URI for `path`: every byte but unreserved ones and `/` is
/// percent-encoded (SQLite decodes `%HH`, and `?` and `#` would end the path).
pub(super) fn file_uri(path: &Path) -> String {
    let raw = path.as_os_str().as_encoded_bytes();
    let mut text: Vec<u8> = raw
        .iter()
        .map(|&byte| {
            if cfg!(windows) && byte == b'\\' {
                b'/'
            } else {
                byte
            }
        })
        .collect();
    // A Windows drive path (`C:/…`) becomes `/C:/…`, as SQLite expects after `file://`.
    if text.len() >= 2 && text[1] == b':' && text[0].is_ascii_alphabetic() {
        text.insert(0, b'/');
    }
    let mut uri = String::from(if text.first() == Some(&b'/') {
        "file://"
    } else {
        "file:"
    });
    for (index, &byte) in text.iter().enumerate() {
        let drive_colon = index == 2 && byte == b':' && text[0] == b'/';
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/')
            || drive_colon
        {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

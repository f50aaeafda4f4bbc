//! The journal the state machine appends to: one line per entry in the current segment (written before the daemon answers), prompt blobs, group commit by a sync thread (`fdatasync` at most every `fsync` interval), rotation by size, retention with a checkpoint, and on start the recovery of a crashed run (a cut last line removed, drives left open ended `daemon_restarted`).

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use koru_protocol::{blocker, Blocker, DriveInfo, DriveState, JournalStatus, StageRecord};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::canonical::{sealed_envelope_into, sha256_hex, Envelope, SealScratch, Sealer, GENESIS};
use super::index::{
    prompt_excerpt, read_lines, Applied, IndexReader, IndexWriter, IndexedEntry, QueuedEntry,
    QueuedKind, ShortId,
};
use super::mapped::{AppendMode, MappedAppender};
use super::segments::{self, segment_name, Lines};
use super::{
    blob_path, Asker, JournalConfig, JournalError, PromptsMode, KIND_DAEMON_STARTED,
    KIND_DRIVE_ENDED, KIND_PRUNED, KIND_REPAIRED,
};

/// Creates `dir` (and its parents) and makes it 0700.
pub fn create_private_dir(dir: &Path) -> Result<(), JournalError> {
    fs::create_dir_all(dir).map_err(JournalError::io("create", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(JournalError::io("set the mode of", dir))
}

/// Opens `path` for reading and writing, creating it (mode 0600) if it is not there.
fn open_private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
}

/// Opens the segment at `path` (creating it) for appends after its first `len` bytes, its
/// data; returns the appender and a handle on the same file for the sync thread's
/// `fdatasync`.
fn open_segment(path: &Path, len: u64) -> Result<(MappedAppender, Arc<File>), JournalError> {
    let file = open_private_file(path).map_err(JournalError::io("open", path))?;
    let for_sync = file.try_clone().map_err(JournalError::io("open", path))?;
    let appender = MappedAppender::open(file, len).map_err(JournalError::io("open", path))?;
    if let AppendMode::Written(why) = appender.mode() {
        tracing::debug!(segment = %path.display(), why, "journal segment written with write(2), not mapped");
    }
    Ok((appender, Arc::new(for_sync)))
}

/// Opens (creating it, 0600) the `.lock` file of the chain in `dir`.
pub(super) fn open_lock_file(dir: &Path) -> Result<File, JournalError> {
    let path = dir.join(".lock");
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(JournalError::io("open", &path))
}

/// Takes the journal's lock, waiting up to `config.lock_wait` while another process holds
/// it (polling: `flock` has no timeout of its own).
fn lock_journal(
    file: File,
    config: &JournalConfig,
) -> Result<nix::fcntl::Flock<File>, JournalError> {
    let started = std::time::Instant::now();
    let mut file = file;
    let mut told = false;
    loop {
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((returned, nix::errno::Errno::EWOULDBLOCK))
                if started.elapsed() < config.lock_wait =>
            {
                if !told {
                    tracing::info!(
                        dir = %config.dir.display(),
                        wait_ms = config.lock_wait.as_millis() as u64,
                        "another process holds the journal (a daemon that is still exiting?); waiting for it"
                    );
                    told = true;
                }
                file = returned;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((_, errno)) => {
                return Err(JournalError::Unreadable {
                    dir: config.dir.clone(),
                    why: format!("another koru daemon is writing it ({errno})"),
                })
            }
        }
    }
}

/// How many new blobs the sync thread may hold open until its next `fdatasync`.
const BLOB_FILES_KEPT_OPEN: usize = 256;
/// From this many new files in one group commit, one `syncfs(2)` flushes them all.
const SYNCFS_FROM_FILES: usize = 16;

/// What the sync thread writes and flushes.
struct SyncState {
    file: Arc<File>,
    dirty: bool,
    /// New files (blobs, segments) and the folders whose listing changed.
    files: Vec<(PathBuf, Option<File>)>,
    dirs: Vec<PathBuf>,
    stop: bool,
    last_error: Option<String>,
}

struct SyncShared {
    state: Mutex<SyncState>,
    wake: Condvar,
    /// Set by each write (no lock on the hot path); the sync thread turns it into `dirty`.
    written: std::sync::atomic::AtomicBool,
    /// Prompt texts accepted since the last group commit, already in a pending-text log.
    texts: Mutex<PendingTexts>,
    /// The journal folder (the pending-text logs are in its `blobs/`).
    dir: PathBuf,
}

/// Prompt texts on their way to their blob files. The event loop appends each text to the
/// current pending-text log (`blobs/pending-<generation>`, one copy into its map, no thread woken:
/// the text is in a file the moment its drive is accepted) and queues it here; at each
/// group commit the sync thread writes the queued texts to `blobs/sha256/<hex>`, flushes
/// them with the segment, and removes the logs of the generations before the current one
/// (all their texts were queued before the loop moved to a new log, which it does when the
/// sync thread asks: `rotate`).
///
/// The loop creates no file for this: at each commit that asks it to move on, the sync
/// thread makes the next generation's log ready (created, its space allocated, mapped and
/// faulted in) and the loop takes it; the log the loop lets go is cut to its data by the
/// sync thread.
#[derive(Default)]
struct PendingTexts {
    /// `(digest hex, text)`: the blob's path is made off the loop.
    queued: Vec<(String, String)>,
    generation: u64,
    rotate: bool,
    /// The log of generation `generation + 1`, ready for the loop.
    ready: Option<(u64, MappedAppender)>,
    /// Logs the loop has moved on from.
    retired: Vec<MappedAppender>,
    /// The journal is closing: no log is made ready any more.
    closed: bool,
}

/// Opens (creating it) the pending-text log of `generation`, appending after its data.
fn open_pending_log(dir: &Path, generation: u64) -> std::io::Result<MappedAppender> {
    let file = open_private_file(&super::pending::log_path(dir, generation))?;
    let len = file.metadata()?.len();
    Ok(MappedAppender::open(file, len)?.faulting_in_the_first_window())
}

/// Asks the loop to move to the next pending-text log, which is made ready for it first
/// (so that the loop never opens a log the sync thread is still making): from then on the
/// texts go to a log that is removed only after a later commit.
fn move_loop_to_next_log(shared: &SyncShared, generation: u64) {
    let next = generation + 1;
    let log = open_pending_log(&shared.dir, next).and_then(|mut log| {
        log.map_ahead()?;
        Ok(log)
    });
    let log = match log {
        Ok(log) => Some(log),
        Err(error) => {
            // The loop opens the log itself when it moves on.
            tracing::warn!(%error, "the next pending-text log could not be made ready");
            None
        }
    };
    let mut pending = shared.texts.lock().unwrap_or_else(|e| e.into_inner());
    if pending.closed {
        // Closing: no more texts. The log was made here and nobody else has it.
        drop(pending);
        if let Some(log) = log {
            drop(log);
            let _ = fs::remove_file(super::pending::log_path(&shared.dir, next));
        }
        return;
    }
    pending.ready = log.map(|log| (next, log));
    pending.rotate = true;
}

/// Writes prompt texts to their blob files (one file per distinct text): each created
/// under its digest's name and written with one `write(2)`, returned open for its
/// `fdatasync`. A daemon stopped between the two leaves an empty blob, which readers count
/// as absent, never as a different text (docs/journal.md); the pending-text log still holds
/// the text, and the next start writes it.
fn write_blob_files(blobs: Vec<(PathBuf, String)>) -> (Vec<(PathBuf, File)>, Option<String>) {
    let mut written: Vec<(PathBuf, File)> = Vec::new();
    let mut error = None;
    for (path, text) in blobs {
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path);
        match created {
            Ok(mut file) => match file.write_all(text.as_bytes()) {
                Ok(()) => written.push((path, file)),
                Err(e) => {
                    drop(file);
                    let _ = fs::remove_file(&path);
                    error = Some(format!("write {}: {e}", path.display()));
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // The same text again: one blob. Its time is refreshed so that retention
                // keeps it as long as the newest entry naming it; an empty one (left by a
                // stop mid-write) is written now.
                let refreshed = File::options().append(true).open(&path).and_then(|mut f| {
                    let filled = f.metadata()?.len() == 0 && !text.is_empty();
                    if filled {
                        f.write_all(text.as_bytes())?;
                    }
                    f.set_modified(std::time::SystemTime::now())?;
                    Ok(filled.then_some(f))
                });
                match refreshed {
                    Ok(Some(file)) => written.push((path, file)),
                    Ok(None) => {}
                    Err(e) => error = Some(format!("refresh {}: {e}", path.display())),
                }
            }
            Err(e) => error = Some(format!("create {}: {e}", path.display())),
        }
    }
    if let Some(error) = &error {
        tracing::error!(%error, "a prompt blob could not be written");
    }
    (written, error)
}

/// [`write_blob_files`], the files handed to the group commit.
fn write_blobs(shared: &SyncShared, blobs: Vec<(PathBuf, String)>) {
    if blobs.is_empty() {
        return;
    }
    let (written, error) = write_blob_files(blobs);
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(parent) = written.first().and_then(|(p, _)| p.parent()) {
        state.dirs.push(parent.to_path_buf());
    }
    for (path, file) in written {
        // Kept open for the `fdatasync` while few wait; past that the sync thread opens
        // them again (a flood must not take the daemon's file descriptors).
        let keep = state.files.len() < BLOB_FILES_KEPT_OPEN;
        state.files.push((path, keep.then_some(file)));
    }
    state.dirty = true;
    if error.is_some() {
        state.last_error = error;
    }
}

/// The group commit: the queued prompt texts to their blob files, then every new file,
/// the current segment and the folders whose listing changed to the disk; then the
/// pending-text logs whose texts are all on the disk now are removed.
fn sync_everything(shared: &SyncShared) {
    // Taken first: a write after this point sets it again and so is seen by the next
    // commit (the thread sleeps without a timer; a flag cleared after the texts were taken
    // could lose a text queued in between until the next write).
    let written = shared
        .written
        .swap(false, std::sync::atomic::Ordering::AcqRel);
    let (texts, generation, retired, move_on) = {
        let mut pending = shared.texts.lock().unwrap_or_else(|e| e.into_inner());
        let texts = std::mem::take(&mut pending.queued);
        // The loop moves to a new log after each commit that took texts (unless it has
        // been asked to already and has not appended since).
        let move_on = !texts.is_empty() && !pending.rotate && !pending.closed;
        (
            texts,
            pending.generation,
            std::mem::take(&mut pending.retired),
            move_on,
        )
    };
    // Cut to their data (they are removed below once their texts are on the disk).
    drop(retired);
    if move_on {
        move_loop_to_next_log(shared, generation);
    }
    let texts = texts
        .into_iter()
        .map(|(digest, text)| (blob_path(&shared.dir, &digest), text))
        .collect();
    write_blobs(shared, texts);
    let (file, files, dirs) = {
        let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if !state.dirty && !written {
            return;
        }
        state.dirty = false;
        (
            state.file.clone(),
            std::mem::take(&mut state.files),
            std::mem::take(&mut state.dirs),
        )
    };
    let mut error = None;
    if files.len() >= SYNCFS_FROM_FILES {
        // A flood of new blobs: one flush of the file system (the blobs, the segment and
        // the folders with everything else waiting on it) instead of one per file, each
        // of which is a disk cache flush of its own.
        drop(files);
        drop(dirs);
        if let Err(e) = nix::unistd::syncfs(&*file) {
            error = Some(format!("syncfs of the journal's file system: {e}"));
        }
        finish_group_commit(shared, generation, error);
        return;
    }
    for (path, file) in files {
        let synced = match file {
            Some(file) => file.sync_data(),
            None => File::open(&path).and_then(|f| f.sync_data()),
        };
        if let Err(e) = synced {
            error = Some(format!("fdatasync {}: {e}", path.display()));
        }
    }
    if let Err(e) = file.sync_data() {
        error = Some(format!("fdatasync of the current segment: {e}"));
    }
    let mut seen = std::collections::HashSet::new();
    for dir in dirs {
        if seen.insert(dir.clone()) {
            if let Err(e) = File::open(&dir).and_then(|f| f.sync_all()) {
                error = Some(format!("fsync {}: {e}", dir.display()));
            }
        }
    }
    finish_group_commit(shared, generation, error);
}

/// The end of a group commit: the pending-text logs behind `generation` removed when
/// everything reached the disk, the error (or none) recorded for `status`.
fn finish_group_commit(shared: &SyncShared, generation: u64, error: Option<String>) {
    if let Some(error) = &error {
        tracing::error!(%error, "the journal could not reach the disk");
    } else {
        remove_pending_logs(&shared.dir, generation);
    }
    shared
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .last_error = error;
}

/// Removes the pending-text logs of the generations before `generation` (their texts are
/// in their blob files, on the disk).
fn remove_pending_logs(dir: &Path, generation: u64) {
    for (older, path) in super::pending::logs(dir) {
        if older < generation {
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(log = %path.display(), %error, "a pending-text log could not be removed");
            }
        }
    }
}

/// At start, before anything reads the blobs: the texts a stopped run left in its
/// pending-text logs are written to their blob files and flushed, and the logs removed.
fn recover_pending_texts(dir: &Path) -> Result<(), JournalError> {
    let logs = super::pending::logs(dir);
    if logs.is_empty() {
        return Ok(());
    }
    let texts: Vec<(PathBuf, String)> = super::pending::texts_of(&logs)
        .into_iter()
        .map(|(digest, text)| (blob_path(dir, &digest), text))
        .collect();
    let count = texts.len();
    create_private_dir(&dir.join("blobs").join("sha256"))?;
    let (written, error) = write_blob_files(texts);
    for (path, file) in written {
        file.sync_data()
            .map_err(JournalError::io("fdatasync", &path))?;
    }
    let folder = dir.join("blobs").join("sha256");
    File::open(&folder)
        .and_then(|f| f.sync_all())
        .map_err(JournalError::io("fsync", &folder))?;
    if let Some(why) = error {
        return Err(JournalError::Unreadable {
            dir: dir.to_path_buf(),
            why: format!("a prompt text of the last run could not be kept: {why}"),
        });
    }
    for (_, path) in logs {
        fs::remove_file(&path).map_err(JournalError::io("remove", &path))?;
    }
    tracing::info!(
        texts = count,
        "prompt texts the last run had not put in their blob files yet are there now"
    );
    Ok(())
}

/// Entries waiting for the index thread, which takes them in batches (every 50 ms, or
/// sooner when asked or when many wait): no wake-up per entry.
#[derive(Default)]
struct IndexQueueState {
    entries: Vec<QueuedEntry>,
    flushes: Vec<mpsc::Sender<()>>,
    stop: bool,
}

#[derive(Default)]
struct IndexQueue {
    state: Mutex<IndexQueueState>,
    wake: Condvar,
}

/// How many entries may wait before the index thread is woken early.
const INDEX_BACKLOG: usize = 20_000;
/// Entries the index thread applies in one transaction (each parsed as it is applied).
const INDEX_BATCH: usize = 5_000;
/// Entries read back from the segments that the index catch-up holds, parsed, before it
/// applies them: 500 drive entries are a few MB of values.
const CATCH_UP_BATCH: usize = 500;
/// How long entries may wait for the index thread.
const INDEX_EVERY: Duration = Duration::from_millis(50);

/// The journal of one daemon run.
pub struct Journal {
    config: JournalConfig,
    /// The current segment (written through a map where the file system allows).
    segment: MappedAppender,
    segment_first_seq: u64,
    segment_bytes: u64,
    last_seq: u64,
    head: String,
    sync: Arc<SyncShared>,
    sync_thread: Option<JoinHandle<()>>,
    /// The current pending-text log and its generation (full prompts only), written
    /// through a map as the segment is.
    pending_log: Option<(u64, MappedAppender)>,
    /// One record of it, reused.
    pending_record: Vec<u8>,
    index_queue: Arc<IndexQueue>,
    index_thread: Option<JoinHandle<()>>,
    reader: IndexReader,
    error: Option<String>,
    /// Lines written since the last flush (one `write(2)` per event of the state machine,
    /// see [`Journal::flush`]), and their entries for the index.
    buffer: Vec<u8>,
    /// Where an entry's canonical body is built before it is sealed into `buffer`.
    scratch: SealScratch,
    unflushed: Vec<QueuedEntry>,
    /// `(last_seq, head, segment_bytes)` as of the last flush, to undo a failed one.
    flushed: (u64, String, u64),
    /// `.lock` in the journal folder, held while this journal is open: one writer at a time.
    _lock: nix::fcntl::Flock<File>,
}

/// A journal opened at start, and what it found from the run before.
pub struct Reopened {
    pub journal: Journal,
    /// Drives the last run accepted and never ended: now ended `failed` with blocker
    /// `daemon_restarted` (never sent again).
    pub ended_at_restart: Vec<String>,
    /// Bytes of a cut last line that were removed.
    pub repaired_bytes: Option<u64>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.config.dir)
            .field("last_seq", &self.last_seq)
            .finish_non_exhaustive()
    }
}

/// The tail of the existing journal (or of another chain in the journal's format): the
/// last entry's seq and hash, and the segment to go on in.
pub(super) struct Tail {
    pub(super) last_seq: u64,
    pub(super) head: String,
    pub(super) segment_first_seq: u64,
    pub(super) segment_len: u64,
    pub(super) repaired_bytes: Option<u64>,
}

/// Cuts the segment at `path` to its first `end` bytes; returns it open for writing.
fn cut_segment(path: &Path, end: u64) -> Result<File, JournalError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(JournalError::io("open", path))?;
    file.set_len(end)
        .map_err(JournalError::io("truncate", path))?;
    Ok(file)
}

/// Reads the tail of the chain in `dir`, cutting off a last line a crash left unfinished.
pub(super) fn read_tail(dir: &Path) -> Result<Tail, JournalError> {
    let segments = segments::list(dir).map_err(JournalError::io("list", dir))?;
    let Some(current) = segments.last() else {
        return Ok(Tail {
            last_seq: 0,
            head: GENESIS.to_string(),
            segment_first_seq: 1,
            segment_len: 0,
            repaired_bytes: None,
        });
    };
    let unreadable = |why: String| JournalError::Unreadable {
        dir: dir.to_path_buf(),
        why,
    };
    let mut repaired_bytes = None;
    // The last complete line, looking back through empty segments.
    for (position, segment) in segments.iter().enumerate().rev() {
        let found = segments::segment_end(&segment.path)
            .map_err(JournalError::io("read", &segment.path))?;
        let (line, end) = (found.last_line, found.end);
        let len = fs::metadata(&segment.path)
            .map_err(JournalError::io("read", &segment.path))?
            .len();
        if found.data_end == end && len > end && position + 1 < segments.len() {
            // The reserve of a segment a crash left before it was cut to its data: only
            // NUL bytes, no entry lost; cut off (the current segment's is written over).
            cut_segment(&segment.path, end)?;
        } else if found.data_end > end && position == segments.len() - 1 {
            // A line cut by a crash (power loss) in the middle of its write: the daemon never
            // answered for it. Removed, and said so in the journal.
            cut_segment(&segment.path, end)?
                .sync_all()
                .map_err(JournalError::io("fsync", &segment.path))?;
            repaired_bytes = Some(found.data_end - end);
        } else if found.data_end > end {
            return Err(unreadable(format!(
                "{} ends in a cut line but is not the last segment (run `koru verify`)",
                segment.name()
            )));
        }
        if let Some(line) = line {
            let value: Value = serde_json::from_slice(&line).map_err(|e| {
                unreadable(format!(
                    "the last line of {} is not JSON ({e}); run `koru verify`, and move the folder aside to start a new journal",
                    segment.name()
                ))
            })?;
            let seq = value.get("seq").and_then(Value::as_u64);
            let hash = value.get("entry_hash").and_then(Value::as_str);
            let (Some(seq), Some(hash)) = (seq, hash) else {
                return Err(unreadable(format!(
                    "the last line of {} is not a journal entry",
                    segment.name()
                )));
            };
            return Ok(Tail {
                last_seq: seq,
                head: hash.to_string(),
                segment_first_seq: current.first_seq,
                // Where the data ends, before any reserve (a cut line is gone by now).
                segment_len: if position + 1 == segments.len() {
                    end
                } else {
                    segments::segment_end(&current.path)
                        .map_err(JournalError::io("read", &current.path))?
                        .end
                },
                repaired_bytes,
            });
        }
    }
    // Segments exist but hold no entry: start over in the first one.
    Ok(Tail {
        last_seq: segments[0].first_seq.saturating_sub(1),
        head: GENESIS.to_string(),
        segment_first_seq: current.first_seq,
        segment_len: 0,
        repaired_bytes,
    })
}

/// Reads the journal's entries after `applied` (all of them when the index does not match)
/// into the index.
/// Calls `visit` with each complete entry of `segments` (its segment, offset and object),
/// from `from` (a segment's first seq and an offset in it) or from the start; a line that
/// is not a JSON object is skipped, a cut last line ends the walk.
fn each_entry_from(
    segments: &[segments::Segment],
    from: Option<(u64, u64)>,
    mut visit: impl FnMut(u64, u64, Map<String, Value>) -> Result<(), JournalError>,
) -> Result<(), JournalError> {
    for segment in segments
        .iter()
        .filter(|s| from.is_none_or(|(first, _)| s.first_seq >= first))
    {
        let lines = match from {
            Some((first, offset)) if segment.first_seq == first => {
                Lines::open_at(&segment.path, offset, 0)
            }
            _ => Lines::open(&segment.path),
        }
        .map_err(JournalError::io("read", &segment.path))?;
        for line in lines {
            let line = line.map_err(JournalError::io("read", &segment.path))?;
            if !line.complete {
                break;
            }
            let Ok(Value::Object(entry)) = serde_json::from_slice::<Value>(&line.bytes) else {
                continue;
            };
            visit(segment.first_seq, line.offset, entry)?;
        }
    }
    Ok(())
}

fn catch_up(
    dir: &Path,
    index: &mut IndexWriter,
    prompts: PromptsMode,
) -> Result<u64, JournalError> {
    let segments = segments::list(dir).map_err(JournalError::io("list", dir))?;
    let applied = index.applied()?;
    // Does the index's last entry still sit where it says, with the same hash?
    let matches = applied.seq == 0
        || segments
            .iter()
            .find(|s| s.first_seq == applied.segment)
            .and_then(|s| Lines::open_at(&s.path, applied.offset, 0).ok())
            .and_then(|mut lines| lines.next())
            .and_then(|line| line.ok())
            .and_then(|line| serde_json::from_slice::<Value>(&line.bytes).ok())
            .is_some_and(|v| {
                v.get("seq").and_then(Value::as_u64) == Some(applied.seq)
                    && v.get("entry_hash").and_then(Value::as_str) == Some(applied.hash.as_str())
            });
    let start = if matches {
        applied.clone()
    } else {
        tracing::info!(index = %index.path().display(), "the drive index does not match the journal; rebuilding it");
        index.reset()?;
        Applied::default()
    };
    let mut batch = Vec::new();
    let mut applied_count = 0u64;
    let from = (start.seq != 0).then_some((start.segment, start.offset));
    each_entry_from(&segments, from, |segment, offset, entry| {
        if entry.get("seq").and_then(Value::as_u64).unwrap_or(0) <= start.seq {
            return Ok(());
        }
        let excerpt = match (prompts, entry.get("prompt")) {
            (PromptsMode::Full, Some(prompt)) => prompt
                .get("sha256")
                .and_then(Value::as_str)
                .and_then(|d| fs::read_to_string(blob_path(dir, d)).ok())
                .map(|text| prompt_excerpt(&text)),
            _ => None,
        };
        batch.push(IndexedEntry {
            entry,
            segment,
            offset,
            excerpt,
        });
        if batch.len() >= CATCH_UP_BATCH {
            applied_count += batch.len() as u64;
            index.apply(batch.drain(..))?;
        }
        Ok(())
    })?;
    applied_count += batch.len() as u64;
    index.apply(batch)?;
    Ok(applied_count)
}

/// Reads back the steps of the drives the index has as still running: one pass from the
/// oldest one's `drive_accepted`. The index thread writes every batch's steps, but an
/// index an older daemon wrote left a running drive's steps out until the drive ended.
fn refresh_open_drives(dir: &Path, index: &mut IndexWriter) -> Result<(), JournalError> {
    let starts = index.open_drive_starts()?;
    let Some(&(_, first_segment, first_offset)) = starts.iter().min_by_key(|(_, s, o)| (*s, *o))
    else {
        return Ok(());
    };
    let mut open: std::collections::HashMap<String, DriveInfo> = index
        .open_drives()?
        .into_iter()
        .map(|d| (d.drive_id.clone(), d))
        .collect();
    let segments = segments::list(dir).map_err(JournalError::io("list", dir))?;
    each_entry_from(
        &segments,
        Some((first_segment, first_offset)),
        |_, _, entry| {
            let kind = entry.get("kind").and_then(Value::as_str);
            let id = entry.get("drive_id").and_then(Value::as_str).unwrap_or("");
            let Some(info) = open.get_mut(id) else {
                return Ok(());
            };
            let at = entry.get("at_ms").and_then(Value::as_u64).unwrap_or(0);
            if kind == Some(super::KIND_DRIVE_ACCEPTED) {
                // From the start: the steps below may have been applied once already.
                info.state = DriveState::Queued;
                info.history = vec![StageRecord {
                    state: DriveState::Queued,
                    at_ms: at,
                }];
                info.attempts.clear();
                info.blocker = None;
                info.waiting = None;
                info.observation = None;
                info.submit_evidence = None;
                info.verification = Default::default();
            } else if kind == Some(super::KIND_DRIVE_STATE) {
                super::index::apply_state(info, &entry, at);
            }
            Ok(())
        },
    )?;
    index.store_all(open.values())
}

impl Journal {
    /// Opens the journal in `config.dir` (creating it), recovers what a crash left, ends
    /// the drives the last run left open, and writes `daemon_started`.
    pub fn open(
        config: JournalConfig,
        now_ms: u64,
        daemon: &Asker,
        started: Map<String, Value>,
    ) -> Result<Reopened, JournalError> {
        create_private_dir(&config.dir)?;
        let lock = lock_journal(open_lock_file(&config.dir)?, &config)?;
        if config.prompts == PromptsMode::Full {
            create_private_dir(&config.dir.join("blobs"))?;
            create_private_dir(&config.dir.join("blobs").join("sha256"))?;
        }
        recover_pending_texts(&config.dir)?;
        let tail = read_tail(&config.dir)?;
        let segment_path = config.dir.join(segment_name(tail.segment_first_seq));
        let (segment, file) = open_segment(&segment_path, tail.segment_len)?;
        let mut index = IndexWriter::open(&config.index_path)?;
        let caught_up = catch_up(&config.dir, &mut index, config.prompts)?;
        if caught_up > 0 {
            tracing::info!(
                entries = caught_up,
                "drive index caught up with the journal"
            );
        }
        refresh_open_drives(&config.dir, &mut index)?;
        let open_drives = index.open_drives()?;
        let reader = IndexReader::open(&config.index_path)?;
        let sync = Arc::new(SyncShared {
            state: Mutex::new(SyncState {
                file: file.clone(),
                dirty: true,
                files: Vec::new(),
                dirs: vec![config.dir.clone()],
                stop: false,
                last_error: None,
            }),
            wake: Condvar::new(),
            written: std::sync::atomic::AtomicBool::new(false),
            texts: Mutex::new(PendingTexts::default()),
            dir: config.dir.clone(),
        });
        let mut journal = Journal {
            segment,
            segment_first_seq: tail.segment_first_seq,
            segment_bytes: tail.segment_len,
            last_seq: tail.last_seq,
            head: tail.head.clone(),
            sync,
            sync_thread: None,
            pending_log: None,
            pending_record: Vec::new(),
            index_queue: Arc::new(IndexQueue::default()),
            index_thread: None,
            reader,
            error: None,
            buffer: Vec::with_capacity(16 * 1024),
            scratch: SealScratch::default(),
            unflushed: Vec::new(),
            flushed: (tail.last_seq, tail.head.clone(), tail.segment_len),
            _lock: lock,
            config,
        };
        // Entries written now are indexed here, before anyone can ask.
        let mut pending = Vec::new();
        if let Some(bytes) = tail.repaired_bytes {
            let mut fields = Map::new();
            fields.insert("torn_bytes".into(), json!(bytes));
            pending.push(journal.write(now_ms, KIND_REPAIRED, &fields, Some(daemon), None)?);
        }
        let mut ended = Vec::new();
        for drive in open_drives {
            let blocker = Blocker::new(
                blocker::DAEMON_RESTARTED,
                "the daemon stopped (crash, kill, power loss) before the drive finished; it was not sent again, as it may have been submitted",
            );
            // Lean, as the state machine writes a drive's end: the one stage it adds
            // (`failed`, now), the blocker, and its wait (if it was waiting) cleared.
            let stages = [StageRecord {
                state: DriveState::Failed,
                at_ms: now_ms,
            }];
            let fields = super::DriveChange {
                drive_id: &drive.drive_id,
                state: DriveState::Failed,
                route: drive.route,
                blocker: Some(Some(&blocker)),
                waiting: drive.waiting.is_some().then_some(None),
                verification: None,
                observation: None,
                submit_evidence: None,
                attempts: Vec::new(),
                stages: super::Stages(&stages),
            };
            ended.push(drive.drive_id.clone());
            pending.push(journal.write(now_ms, KIND_DRIVE_ENDED, &fields, Some(daemon), None)?);
        }
        pending.push(journal.write(now_ms, KIND_DAEMON_STARTED, &started, Some(daemon), None)?);
        journal.flush()?;
        index.apply(pending.into_iter().filter_map(QueuedEntry::parse))?;
        journal.apply_retention(now_ms, daemon)?;
        journal.flush()?;
        journal.start_threads(index, HashSet::new());
        Ok(Reopened {
            journal,
            ended_at_restart: ended,
            repaired_bytes: tail.repaired_bytes,
        })
    }

    fn start_threads(&mut self, mut index: IndexWriter, open: HashSet<String>) {
        let queue = self.index_queue.clone();
        let dir = self.config.dir.clone();
        self.index_thread = Some(
            std::thread::Builder::new()
                .name("koru-journal-index".into())
                .spawn(move || {
                    let mut open = open;
                    loop {
                        let (entries, flushes, stop) = {
                            let state = queue.state.lock().unwrap_or_else(|e| e.into_inner());
                            // Asleep until there is something to index (no timer: an idle
                            // daemon does not wake this thread), then up to `INDEX_EVERY`
                            // more so that what follows goes in the same transaction.
                            let state = queue
                                .wake
                                .wait_while(state, |s| {
                                    !s.stop && s.flushes.is_empty() && s.entries.is_empty()
                                })
                                .unwrap_or_else(|e| e.into_inner());
                            let (mut state, _) = queue
                                .wake
                                .wait_timeout_while(state, INDEX_EVERY, |s| {
                                    !s.stop
                                        && s.flushes.is_empty()
                                        && s.entries.len() < INDEX_BACKLOG
                                })
                                .unwrap_or_else(|e| e.into_inner());
                            (
                                std::mem::take(&mut state.entries),
                                std::mem::take(&mut state.flushes),
                                state.stop,
                            )
                        };
                        // Applied a batch at a time, only the drives' entries parsed: a backlog
                        // (the index fell behind a flood of drives) parsed at once held
                        // every entry as a tree of values, 60 MB for 20,000 entries, which
                        // this thread's malloc arena kept afterwards.
                        let mut queued = entries.into_iter().peekable();
                        while queued.peek().is_some() {
                            let mut batch: Vec<QueuedEntry> =
                                queued.by_ref().take(INDEX_BATCH).collect();
                            if let Err(error) = read_lines(&dir, &mut batch) {
                                tracing::error!(%error, "the drive index could not read entries back; they are left out of it");
                            }
                            if let Err(error) = index.apply_live(batch, &mut open) {
                                tracing::error!(%error, "the drive index could not be written");
                            }
                        }
                        for done in flushes {
                            let _ = done.send(());
                        }
                        if stop {
                            break;
                        }
                    }
                })
                .expect("a thread can be started"),
        );
        let shared = self.sync.clone();
        let every = self.config.fsync;
        self.sync_thread = Some(
            std::thread::Builder::new()
                .name("koru-journal-sync".into())
                .spawn(move || loop {
                    let stop = {
                        let state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                        // Asleep until something was written (no timer: an idle daemon
                        // does not wake this thread), then the `fsync` interval, so that
                        // what is written meanwhile goes to the disk in the same commit.
                        let state = shared
                            .wake
                            .wait_while(state, |s| {
                                !s.stop
                                    && !s.dirty
                                    && !shared.written.load(std::sync::atomic::Ordering::Acquire)
                            })
                            .unwrap_or_else(|e| e.into_inner());
                        let (state, _) = shared
                            .wake
                            .wait_timeout_while(state, every, |s| !s.stop)
                            .unwrap_or_else(|e| e.into_inner());
                        state.stop
                    };
                    sync_everything(&shared);
                    if stop {
                        break;
                    }
                })
                .expect("a thread can be started"),
        );
    }

    /// Writes one entry (sealed and linked) and returns it for the index, its line with it
    /// (start-up indexes these entries itself). `fields` is the entry's own part (an
    /// object): the envelope (`seq`, `at_ms`, `kind`, `prev_hash`, `by`) is added around it.
    fn write<F: Serialize + ?Sized>(
        &mut self,
        at_ms: u64,
        kind: &str,
        fields: &F,
        by: Option<&Asker>,
        excerpt: Option<String>,
    ) -> Result<QueuedEntry, JournalError> {
        self.write_entry(at_ms, kind, None, fields, by, excerpt, true)
    }

    /// [`Journal::write`] of an entry about `drive_id` (when it is about a drive), with a
    /// copy of the line in the returned entry only when `keep_line`: otherwise the line
    /// goes straight into the buffer and the index thread reads it back from the segment
    /// (no allocation of the event loop's is handed to another thread).
    #[allow(clippy::too_many_arguments)]
    fn write_entry<F: Serialize + ?Sized>(
        &mut self,
        at_ms: u64,
        kind: &str,
        drive_id: Option<&str>,
        fields: &F,
        by: Option<&Asker>,
        excerpt: Option<String>,
        keep_line: bool,
    ) -> Result<QueuedEntry, JournalError> {
        let seq = self.last_seq + 1;
        let envelope = Envelope {
            seq,
            at_ms,
            kind,
            prev_hash: &self.head,
            by,
        };
        let start = self.buffer.len();
        let hash = sealed_envelope_into(
            &envelope,
            fields,
            &self.config.sealer,
            &mut self.scratch,
            &mut self.buffer,
        )
        .map_err(|error| JournalError::Entry {
            kind: kind.to_string(),
            error: error.to_string(),
        })?;
        let len = self.buffer.len() - start;
        self.buffer.push(b'\n');
        let offset = self.segment_bytes;
        self.segment_bytes += len as u64 + 1;
        self.last_seq = seq;
        self.head = hash;
        let queued = QueuedEntry {
            line: if keep_line {
                self.buffer[start..start + len].to_vec()
            } else {
                Vec::new()
            },
            len,
            seq,
            at_ms,
            kind: QueuedKind::of(kind),
            drive_id: drive_id.and_then(ShortId::new),
            segment: self.segment_first_seq,
            offset,
            excerpt,
        };
        if self.segment_bytes >= self.config.segment_bytes {
            // Full: the next entry starts a new segment (and retention may prune old ones,
            // writing its checkpoint there).
            self.rotate(seq + 1)?;
        }
        Ok(queued)
    }

    /// Appends an entry; it is in the file (the page cache) when this returns, and on the
    /// disk within the `fsync` interval.
    pub fn append<F: Serialize + ?Sized>(
        &mut self,
        at_ms: u64,
        kind: &str,
        fields: &F,
        by: Option<&Asker>,
        excerpt: Option<String>,
    ) -> Result<u64, JournalError> {
        self.append_for(at_ms, kind, None, fields, by, excerpt)
    }

    /// [`Journal::append`] of an entry about `drive_id` (the index then need not read the
    /// line to learn which drive it is about).
    pub fn append_for<F: Serialize + ?Sized>(
        &mut self,
        at_ms: u64,
        kind: &str,
        drive_id: Option<&str>,
        fields: &F,
        by: Option<&Asker>,
        excerpt: Option<String>,
    ) -> Result<u64, JournalError> {
        let result = self.write_entry(at_ms, kind, drive_id, fields, by, excerpt, false);
        match result {
            Ok(queued) => {
                self.unflushed.push(queued);
                Ok(self.last_seq)
            }
            Err(error) => {
                tracing::error!(%error, "journal write failed");
                self.error = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// [`Journal::append_for`], then [`Journal::flush`]: the entry is in the file when
    /// this returns `Ok` (what a `drive.create` waits for before it is answered).
    pub fn append_durable<F: Serialize + ?Sized>(
        &mut self,
        at_ms: u64,
        kind: &str,
        drive_id: Option<&str>,
        fields: &F,
        by: Option<&Asker>,
        excerpt: Option<String>,
    ) -> Result<u64, JournalError> {
        let seq = self.append_for(at_ms, kind, drive_id, fields, by, excerpt)?;
        self.flush()?;
        Ok(seq)
    }

    /// Writes the lines appended since the last flush with one `write(2)`. The state
    /// machine calls it after each run of events it handles, before anything they queued
    /// for a peer can reach the socket (one thread runs both). A failed write is undone:
    /// the file is cut back to the last flushed line and the chain goes on from there.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        match self.segment.append(&self.buffer) {
            Ok(()) => {
                self.buffer.clear();
                self.error = None;
                self.flushed = (self.last_seq, self.head.clone(), self.segment_bytes);
                if !self
                    .sync
                    .written
                    .swap(true, std::sync::atomic::Ordering::AcqRel)
                {
                    // The first write since the last group commit wakes the sync thread,
                    // under its lock so that the wake cannot fall between its look at
                    // `written` and its wait.
                    let _state = self.sync.state.lock().unwrap_or_else(|e| e.into_inner());
                    self.sync.wake.notify_one();
                }
                let mut queue = self
                    .index_queue
                    .state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let was_empty = queue.entries.is_empty();
                queue.entries.append(&mut self.unflushed);
                // The index thread sleeps while its queue is empty: the first entries wake
                // it, and a backlog wakes it early from its batching wait.
                if (was_empty && !queue.entries.is_empty()) || queue.entries.len() >= INDEX_BACKLOG
                {
                    self.index_queue.wake.notify_one();
                }
                Ok(())
            }
            Err(source) => {
                let path = self.config.dir.join(segment_name(self.segment_first_seq));
                let (seq, head, bytes) = self.flushed.clone();
                let _ = self.segment.cut_to(bytes);
                self.last_seq = seq;
                self.head = head;
                self.segment_bytes = bytes;
                self.buffer.clear();
                self.unflushed.clear();
                let error = JournalError::Io {
                    action: "write",
                    path,
                    source,
                };
                tracing::error!(%error, "journal write failed; the entries since the last good write are dropped");
                self.error = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// Keeps a prompt's text (in `full` mode) and returns what the chain records of it:
    /// `{"sha256", "bytes", "chars"}`.
    pub fn store_prompt(&mut self, text: &str) -> Result<Value, JournalError> {
        Ok(json!(self.store_prompt_record(text)))
    }

    /// [`Journal::store_prompt`], typed.
    pub fn store_prompt_record(&mut self, text: &str) -> PromptRecord {
        let digest = sha256_hex(text.as_bytes());
        if self.config.prompts == PromptsMode::Full {
            self.keep_text(&digest, text);
        }
        PromptRecord {
            sha256: digest,
            bytes: text.len(),
            chars: text.chars().count(),
        }
    }

    /// Puts a prompt's text in the current pending-text log (a new one when the sync thread
    /// asked) and queues it for its blob file at the next group commit.
    fn keep_text(&mut self, digest: &str, text: &str) {
        let (generation, ready) = {
            let mut pending = self.sync.texts.lock().unwrap_or_else(|e| e.into_inner());
            if pending.rotate {
                pending.rotate = false;
                pending.generation += 1;
            }
            pending.queued.push((digest.to_string(), text.to_string()));
            let generation = pending.generation;
            let mut ready = None;
            if self.pending_log.as_ref().map(|(g, _)| *g) != Some(generation) {
                if let Some((_, old)) = self.pending_log.take() {
                    pending.retired.push(old);
                }
                ready = pending.ready.take_if(|(g, _)| *g == generation);
            }
            (generation, ready)
        };
        if self.pending_log.is_none() {
            // Made ready by the sync thread; else (the first log of a run, or the sync
            // thread could not) opened here.
            match ready.map_or_else(
                || open_pending_log(&self.config.dir, generation),
                |(_, log)| Ok(log),
            ) {
                Ok(log) => self.pending_log = Some((generation, log)),
                Err(error) => {
                    // The text still reaches its blob file at the next group commit; only
                    // a crash before it would lose it.
                    let path = super::pending::log_path(&self.config.dir, generation);
                    tracing::error!(log = %path.display(), %error, "the pending-text log could not be opened");
                    return;
                }
            }
        }
        self.pending_record.clear();
        super::pending::encode_record(&mut self.pending_record, digest, text);
        if let Some((_, log)) = &mut self.pending_log {
            if let Err(error) = log.append(&self.pending_record) {
                tracing::error!(%error, "a prompt text could not be added to the pending-text log");
            }
        }
    }

    /// Closes the current segment and starts one at `seq`.
    fn rotate(&mut self, seq: u64) -> Result<(), JournalError> {
        self.flush()?;
        let old = self.config.dir.join(segment_name(self.segment_first_seq));
        // Closed: cut to its data (no reserve left after its last line), then on the disk.
        self.segment
            .finish()
            .map_err(JournalError::io("truncate", &old))?;
        self.segment
            .file()
            .sync_data()
            .map_err(JournalError::io("fdatasync", &old))?;
        let path = self.config.dir.join(segment_name(seq));
        let (segment, file) = open_segment(&path, 0)?;
        {
            let mut state = self.sync.state.lock().unwrap_or_else(|e| e.into_inner());
            state.file = file.clone();
            state.dirs.push(self.config.dir.clone());
            state.dirty = true;
            self.sync.wake.notify_one();
        }
        self.segment = segment;
        self.segment_first_seq = seq;
        self.segment_bytes = 0;
        tracing::info!(segment = %path.display(), "journal segment started");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let daemon = Asker {
            door: "daemon".into(),
            client: "koru".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            pid: Some(std::process::id()),
            uid: nix::unistd::getuid().as_raw(),
        };
        // The new segment is not pruned (it is the current one), so the entry written
        // here lands in it.
        self.prune(now, &daemon)
    }

    fn apply_retention(&mut self, now_ms: u64, daemon: &Asker) -> Result<(), JournalError> {
        let pruned = self.prune_segments(now_ms)?;
        if let Some(entry) = pruned {
            self.append(now_ms, KIND_PRUNED, &entry, Some(daemon), None)?;
        }
        Ok(())
    }

    fn prune(&mut self, now_ms: u64, daemon: &Asker) -> Result<(), JournalError> {
        if let Some(entry) = self.prune_segments(now_ms)? {
            self.append(now_ms, KIND_PRUNED, &entry, Some(daemon), None)?;
        }
        Ok(())
    }

    /// Removes whole old segments as retention says; returns the checkpoint entry's fields.
    fn prune_segments(&mut self, now_ms: u64) -> Result<Option<Map<String, Value>>, JournalError> {
        let retain = self.config.retain;
        if retain.max_age.is_none() && retain.max_bytes.is_none() {
            return Ok(None);
        }
        let dir = self.config.dir.clone();
        let segments = segments::list(&dir).map_err(JournalError::io("list", &dir))?;
        // Data, not file sizes: the current segment's file holds its reserve too.
        let sizes: Vec<u64> = segments
            .iter()
            .map(|s| {
                if s.first_seq == self.segment_first_seq {
                    self.segment.len()
                } else {
                    fs::metadata(&s.path).map(|m| m.len()).unwrap_or(0)
                }
            })
            .collect();
        let mut total: u64 = sizes.iter().sum();
        let mut removed = Vec::new();
        let mut through: Option<(u64, String)> = None;
        for (i, segment) in segments.iter().enumerate() {
            if segment.first_seq >= self.segment_first_seq {
                break; // never the current segment
            }
            let (last_line, _) = segments::last_complete_line(&segment.path)
                .map_err(JournalError::io("read", &segment.path))?;
            let last: Option<Value> = last_line.and_then(|l| serde_json::from_slice(&l).ok());
            let last_at = last
                .as_ref()
                .and_then(|v| v.get("at_ms").and_then(Value::as_u64))
                .unwrap_or(0);
            let too_old = retain
                .max_age
                .is_some_and(|age| now_ms.saturating_sub(last_at) > age.as_millis() as u64);
            let too_big = retain.max_bytes.is_some_and(|max| total > max);
            if !(too_old || too_big) {
                break;
            }
            if let Some(last) = &last {
                if let (Some(seq), Some(hash)) = (
                    last.get("seq").and_then(Value::as_u64),
                    last.get("entry_hash").and_then(Value::as_str),
                ) {
                    through = Some((seq, hash.to_string()));
                }
            }
            fs::remove_file(&segment.path).map_err(JournalError::io("remove", &segment.path))?;
            total -= sizes[i];
            removed.push(segment.name());
        }
        let Some((through_seq, through_hash)) = through else {
            return Ok(None);
        };
        // Blobs no remaining entry can name: older than the oldest entry left.
        let oldest_left = segments::list(&dir)
            .ok()
            .and_then(|s| s.first().map(|s| s.path.clone()))
            .and_then(|p| Lines::open(&p).ok())
            .and_then(|mut lines| lines.next())
            .and_then(|l| l.ok())
            .and_then(|l| serde_json::from_slice::<Value>(&l.bytes).ok())
            .and_then(|v| v.get("at_ms").and_then(Value::as_u64));
        let mut blobs_removed = 0u64;
        if let (Some(oldest), Ok(entries)) =
            (oldest_left, fs::read_dir(dir.join("blobs").join("sha256")))
        {
            for entry in entries.flatten() {
                let modified = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as u64);
                if modified.is_some_and(|m| m + 1_000 < oldest)
                    && fs::remove_file(entry.path()).is_ok()
                {
                    blobs_removed += 1;
                }
            }
        }
        tracing::info!(
            through_seq,
            segments = removed.len(),
            blobs_removed,
            "journal retention pruned old segments"
        );
        let mut fields = Map::new();
        fields.insert("through_seq".into(), json!(through_seq));
        fields.insert("through_hash".into(), json!(through_hash));
        fields.insert("segments_removed".into(), json!(removed));
        fields.insert("blobs_removed".into(), json!(blobs_removed));
        Ok(Some(fields))
    }

    /// The journal as `status` shows it.
    pub fn status(&self) -> JournalStatus {
        let sync_error = self
            .sync
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_error
            .clone();
        JournalStatus {
            dir: self.config.dir.display().to_string(),
            head: self.head.clone(),
            last_seq: self.last_seq,
            prompts: self.config.prompts.as_str().to_string(),
            keyed: self.config.sealer.is_keyed(),
            fsync_ms: self.config.fsync.as_millis() as u64,
            error: self.error.clone().or(sync_error),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.config.dir
    }

    pub fn prompts(&self) -> PromptsMode {
        self.config.prompts
    }

    /// The sealer (for `journal.verify` with the daemon's own key).
    pub fn sealer(&self) -> &Sealer {
        &self.config.sealer
    }

    /// The drives on disk.
    pub fn index(&self) -> &IndexReader {
        &self.reader
    }

    /// Waits until the index has every entry written so far (tests, listings that must
    /// include the newest drives).
    pub fn flush_index(&mut self) {
        let _ = self.flush();
        if self.index_thread.is_none() {
            return;
        }
        let (done_tx, done_rx) = mpsc::channel();
        self.index_queue
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .flushes
            .push(done_tx);
        self.index_queue.wake.notify_one();
        let _ = done_rx.recv_timeout(Duration::from_secs(5));
    }

    /// Flushes everything to the disk and stops the journal's threads.
    pub fn close(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let _ = self.flush();
        // The segment cut to its data before the last group commit flushes it.
        if let Err(error) = self.segment.finish() {
            tracing::warn!(%error, "the journal segment's reserve could not be cut off; the next start does it");
        }
        // No text is added any more: the last group commit writes every queued one to its
        // blob file and removes every pending-text log (a log made ready and never used
        // is removed here).
        self.pending_log = None;
        let ready = {
            let mut pending = self.sync.texts.lock().unwrap_or_else(|e| e.into_inner());
            pending.generation += 1;
            pending.closed = true;
            pending.ready.take()
        };
        if let Some((generation, log)) = ready {
            drop(log);
            let _ = fs::remove_file(super::pending::log_path(&self.config.dir, generation));
        }
        {
            let mut state = self.sync.state.lock().unwrap_or_else(|e| e.into_inner());
            state.stop = true;
            state.dirty = true;
        }
        self.sync.wake.notify_all();
        if let Some(thread) = self.sync_thread.take() {
            let _ = thread.join();
        } else {
            sync_everything(&self.sync);
        }
        self.index_queue
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .stop = true;
        self.index_queue.wake.notify_one();
        if let Some(thread) = self.index_thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if self.sync_thread.is_some() || self.index_thread.is_some() {
            self.shut_down();
        }
    }
}

/// What the chain records of a prompt: its digest, its length in bytes and characters.
#[derive(Debug, Clone, Serialize)]
pub struct PromptRecord {
    pub bytes: usize,
    pub chars: usize,
    pub sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::index::HistoryQuery;
    use crate::journal::verify::verify;
    use crate::journal::Retention;
    use koru_protocol::VerifyVerdict;

    use crate::journal::test_daemon as daemon;

    fn config(root: &Path) -> JournalConfig {
        config_for(
            &root.join("journal"),
            &root.join("cache").join("index.sqlite3"),
        )
    }

    /// The test configuration for a journal in `dir` with its drive index at `index`.
    fn config_for(dir: &Path, index: &Path) -> JournalConfig {
        let mut config = JournalConfig::new(dir.to_path_buf());
        config.index_path = index.to_path_buf();
        config.sealer = Sealer::Sha256;
        config
    }

    /// Waits up to 5 s for `done`.
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{what} never happened");
    }

    /// Accepts a drive the way the state machine does: blob, then `drive_accepted`.
    fn accept(journal: &mut Journal, id: &str, text: &str, at: u64) {
        let prompt = journal.store_prompt(text).unwrap();
        let mut fields = Map::new();
        fields.insert("drive_id".into(), json!(id));
        fields.insert("target".into(), json!("focused"));
        fields.insert("session_id".into(), json!("s_1"));
        fields.insert("route".into(), json!("plugin_drive"));
        fields.insert("options".into(), json!({}));
        fields.insert("prompt".into(), prompt);
        journal
            .append(
                at,
                crate::journal::KIND_DRIVE_ACCEPTED,
                &fields,
                Some(&daemon()),
                Some(prompt_excerpt(text)),
            )
            .unwrap();
    }

    /// A step, then the end, as the state machine writes them.
    fn end(journal: &mut Journal, id: &str, at: u64) {
        let mut fields = Map::new();
        fields.insert("drive_id".into(), json!(id));
        fields.insert("state".into(), json!("sent"));
        journal
            .append(
                at,
                crate::journal::KIND_DRIVE_STATE,
                &fields.clone(),
                None,
                None,
            )
            .unwrap();
        fields.insert("state".into(), json!("done"));
        journal
            .append(at, crate::journal::KIND_DRIVE_ENDED, &fields, None, None)
            .unwrap();
    }

    #[test]
    fn a_restart_ends_the_drives_left_open_and_keeps_every_drive_answerable() {
        let tmp = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(config(tmp.path()), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        accept(&mut journal, "d_done", "first", 11);
        end(&mut journal, "d_done", 12);
        accept(&mut journal, "d_open", "second", 13);
        let mut step = Map::new();
        step.insert("drive_id".into(), json!("d_open"));
        step.insert("state".into(), json!("sent"));
        journal
            .append(14, crate::journal::KIND_DRIVE_STATE, &step, None, None)
            .unwrap();
        // A crash: nothing more is written (no daemon_stopped) and the threads just stop.
        journal.close();
        // The index is a cache: losing it changes nothing.
        std::fs::remove_dir_all(tmp.path().join("cache")).unwrap();
        let reopened = Journal::open(config(tmp.path()), 20, &daemon(), Map::new()).unwrap();
        assert_eq!(reopened.ended_at_restart, ["d_open"]);
        let journal = reopened.journal;
        let open = journal.index().get("d_open").unwrap();
        assert_eq!(open.state, DriveState::Failed);
        assert_eq!(open.blocker.unwrap().code, blocker::DAEMON_RESTARTED);
        assert_eq!(open.prompt_excerpt, "second");
        assert_eq!(
            open.history,
            [
                StageRecord {
                    state: DriveState::Queued,
                    at_ms: 13
                },
                StageRecord {
                    state: DriveState::Sent,
                    at_ms: 14
                },
                StageRecord {
                    state: DriveState::Failed,
                    at_ms: 20
                },
            ],
            "the steps of the drive the crash left open are read back once"
        );
        assert_eq!(open.finished_at_ms, Some(20));
        // Its end is lean: the stage it adds and the blocker, not the whole drive.
        let segment = &segments::list(&tmp.path().join("journal")).unwrap()[0].path;
        let ended: Value = std::fs::read_to_string(segment)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|entry| entry["kind"] == "drive_ended" && entry["drive_id"] == "d_open")
            .unwrap();
        assert_eq!(ended["stages"], json!([{"state": "failed", "at_ms": 20}]));
        assert_eq!(ended["blocker"]["code"], blocker::DAEMON_RESTARTED);
        assert!(ended.get("drive").is_none(), "{ended}");
        assert_eq!(
            journal.index().get("d_done").unwrap().state,
            DriveState::Done
        );
        // A second start finds nothing open.
        journal.close();
        let again = Journal::open(config(tmp.path()), 30, &daemon(), Map::new()).unwrap();
        assert!(again.ended_at_restart.is_empty());
        again.journal.close();
        assert_eq!(
            verify(&tmp.path().join("journal"), None).verdict,
            VerifyVerdict::Intact
        );
    }

    #[test]
    fn a_segment_left_with_its_reserve_by_a_crash_goes_on_after_its_data() {
        let tmp = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(config(tmp.path()), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        for (i, id) in ["d_1", "d_2", "d_3"].iter().enumerate() {
            accept(&mut journal, id, "a prompt", 11 + i as u64);
        }
        journal.flush().unwrap();
        // What a `kill -9` leaves: the folder as it is while the daemon runs.
        let live = tmp.path().join("journal");
        let crashed = tmp.path().join("crashed");
        copy_dir(&live, &crashed.join("journal"));
        let segment = segments::list(&crashed.join("journal")).unwrap()[0]
            .path
            .clone();
        let bytes = std::fs::read(&segment).unwrap();
        let (data, damaged) = super::super::mapped::data_end(&bytes);
        assert!(!damaged);
        if bytes.len() > data {
            assert!(bytes[data..].iter().all(|&b| b == 0), "the reserve is NUL");
        }
        // The live journal verifies, reserve and all.
        assert_eq!(verify_problem(&live), None);
        assert_eq!(verify_problem(&crashed.join("journal")), None);

        // A start after the crash repairs nothing (no line was cut) and appends after the
        // data; closed, the segment is its lines and nothing after them.
        let reopened = Journal::open(config(&crashed), 20, &daemon(), Map::new()).unwrap();
        assert_eq!(reopened.repaired_bytes, None);
        assert_eq!(reopened.ended_at_restart.len(), 3);
        reopened.journal.close();
        let text = std::fs::read(&segment).unwrap();
        assert!(!text.contains(&0u8));
        assert!(text.ends_with(b"\n"));
        assert_eq!(verify_problem(&crashed.join("journal")), None);

        // A line cut in the middle of its copy, then the reserve: removed and recorded.
        journal.close();
        let again = tmp.path().join("again");
        copy_dir(&live, &again.join("journal"));
        let segment = segments::list(&again.join("journal")).unwrap()[0]
            .path
            .clone();
        let data = std::fs::read(&segment).unwrap();
        let file = OpenOptions::new().write(true).open(&segment).unwrap();
        file.set_len(data.len() as u64 + 4096).unwrap();
        use std::os::unix::fs::FileExt;
        file.write_all_at(br#"{"at_ms":12,"dri"#, data.len() as u64)
            .unwrap();
        drop(file);
        let reopened = Journal::open(config(&again), 30, &daemon(), Map::new()).unwrap();
        assert_eq!(reopened.repaired_bytes, Some(16));
        reopened.journal.close();
        assert_eq!(verify_problem(&again.join("journal")), None);

        // Entries hidden behind NUL bytes are not a reserve: `verify` reads them and fails.
        let hidden = tmp.path().join("hidden");
        copy_dir(&live, &hidden.join("journal"));
        let segment = segments::list(&hidden.join("journal")).unwrap()[0]
            .path
            .clone();
        let bytes = std::fs::read(&segment).unwrap();
        let second_line = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        let mut nulled = bytes.clone();
        nulled[second_line..second_line + 8].fill(0);
        std::fs::write(&segment, &nulled).unwrap();
        assert!(verify_problem(&hidden.join("journal")).is_some());
    }

    #[test]
    fn a_line_cut_by_a_crash_is_removed_and_the_repair_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(config(tmp.path()), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        accept(&mut journal, "d_1", "one", 11);
        journal.close();
        let segment = segments::list(&tmp.path().join("journal")).unwrap()[0]
            .path
            .clone();
        let mut file = OpenOptions::new().append(true).open(&segment).unwrap();
        file.write_all(br#"{"at_ms":12,"drive_id":"d_2","ki"#)
            .unwrap();
        drop(file);
        let reopened = Journal::open(config(tmp.path()), 20, &daemon(), Map::new()).unwrap();
        assert_eq!(reopened.repaired_bytes, Some(32));
        reopened.journal.close();
        let text = std::fs::read_to_string(&segment).unwrap();
        assert!(
            text.contains(r#""kind":"journal_repaired""#) && text.contains(r#""torn_bytes":32"#)
        );
        assert_eq!(
            verify(&tmp.path().join("journal"), None).verdict,
            VerifyVerdict::Intact
        );
    }

    /// The drive the helpers below write, as `drive.get` answers for it: accepted at `at`
    /// (by [`accept`], with the prompt "prompt N" for the drive `d_N`), sent and received at
    /// `at + 1`, submitted and done at `at + 2`, its chat's reply observed at `at + 3`.
    fn finished_drive(id: &str, at: u64) -> DriveInfo {
        serde_json::from_value(json!({
            "drive_id": id, "target": "focused", "session_id": "s_1", "route": "plugin_drive",
            "options": {}, "state": "done", "prompt_chars": 8,
            "prompt_excerpt": format!("prompt {}", id.trim_start_matches("d_")),
            "created_at_ms": at, "finished_at_ms": at + 2,
            "history": [
                {"state": "queued", "at_ms": at},
                {"state": "sent", "at_ms": at + 1},
                {"state": "received", "at_ms": at + 1},
                {"state": "submitted", "at_ms": at + 2},
                {"state": "done", "at_ms": at + 2},
            ],
            "attempts": [{"route": "plugin_drive", "interface": "vscode", "outcome": "succeeded",
                          "reached": "submitted", "started_at_ms": at + 1, "finished_at_ms": at + 2}],
            "verification": "acked",
            "submit_evidence": "chat_responded",
            "observation": {"store": "copilot", "chat_id": "c_1", "stage": "replied",
                            "basis": "explicit", "at_ms": at + 3, "reply_excerpt": "ok"},
        }))
        .unwrap()
    }

    fn append_drive_entry(journal: &mut Journal, id: &str, at: u64, kind: &str, fields: Value) {
        journal
            .append_for(at, kind, Some(id), &fields, None, None)
            .unwrap();
    }

    /// The `drive_state` of [`finished_drive`]'s first tick: sent and received.
    fn step(journal: &mut Journal, id: &str, at: u64) {
        let fields = json!({
            "drive_id": id, "state": "received", "route": "plugin_drive",
            "stages": [{"state": "sent", "at_ms": at + 1}, {"state": "received", "at_ms": at + 1}],
            "attempts": [{"index": 0, "route": "plugin_drive", "interface": "vscode",
                          "outcome": "running", "started_at_ms": at + 1}],
        });
        append_drive_entry(
            journal,
            id,
            at + 1,
            crate::journal::KIND_DRIVE_STATE,
            fields,
        );
    }

    /// [`finished_drive`]'s lean `drive_ended`, as the state machine writes it: what changed
    /// since [`step`] (all of it when `stepped` is false), no whole drive.
    fn end_lean(journal: &mut Journal, id: &str, at: u64, stepped: bool) {
        let mut stages = Vec::new();
        if !stepped {
            stages.extend([
                json!({"state": "sent", "at_ms": at + 1}),
                json!({"state": "received", "at_ms": at + 1}),
            ]);
        }
        stages.extend([
            json!({"state": "submitted", "at_ms": at + 2}),
            json!({"state": "done", "at_ms": at + 2}),
        ]);
        let fields = json!({
            "drive_id": id, "state": "done", "route": "plugin_drive", "stages": stages,
            "attempts": [{"index": 0, "route": "plugin_drive", "interface": "vscode",
                          "outcome": "succeeded", "reached": "submitted",
                          "started_at_ms": at + 1, "finished_at_ms": at + 2}],
            "verification": "acked", "submit_evidence": "chat_responded",
        });
        append_drive_entry(
            journal,
            id,
            at + 2,
            crate::journal::KIND_DRIVE_ENDED,
            fields,
        );
    }

    /// [`finished_drive`]'s `drive_ended` as daemons wrote it before the entries were lean:
    /// with the whole drive (without its excerpt and the later observation).
    fn end_whole(journal: &mut Journal, id: &str, at: u64) {
        let mut drive = finished_drive(id, at);
        drive.prompt_excerpt = String::new();
        drive.observation = None;
        let fields = json!({"drive_id": id, "state": "done", "drive": drive});
        append_drive_entry(
            journal,
            id,
            at + 2,
            crate::journal::KIND_DRIVE_ENDED,
            fields,
        );
    }

    /// The chat's reply, observed after [`finished_drive`] ended.
    fn observe(journal: &mut Journal, id: &str, at: u64) {
        let observation = finished_drive(id, at).observation;
        let fields = json!({
            "drive_id": id, "state": "done", "route": "plugin_drive", "observation": observation,
        });
        append_drive_entry(
            journal,
            id,
            at + 3,
            crate::journal::KIND_DRIVE_STATE,
            fields,
        );
    }

    /// Writes what was appended and waits until the index has it.
    fn settle(journal: &mut Journal) {
        journal.flush().unwrap();
        journal.flush_index();
    }

    #[test]
    fn the_index_folds_lean_entries_into_the_whole_drive_within_a_batch_across_batches_and_from_the_journal(
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(config(tmp.path()), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        // Accepted and ended within one tick, in one batch of the index thread: every
        // stage in its drive_ended; the chat's reply observed after the end.
        accept(&mut journal, "d_1", "prompt 1", 100);
        end_lean(&mut journal, "d_1", 100, false);
        observe(&mut journal, "d_1", 100);
        // Accepted in one batch, a step in the next while it runs, ended in a third.
        accept(&mut journal, "d_2", "prompt 2", 200);
        settle(&mut journal);
        assert_eq!(
            journal.index().get("d_2").unwrap().state,
            DriveState::Queued
        );
        step(&mut journal, "d_2", 200);
        settle(&mut journal);
        end_lean(&mut journal, "d_2", 200, true);
        observe(&mut journal, "d_2", 200);
        // Accepted, a step and the end in one batch.
        accept(&mut journal, "d_3", "prompt 3", 300);
        step(&mut journal, "d_3", 300);
        end_lean(&mut journal, "d_3", 300, true);
        observe(&mut journal, "d_3", 300);
        // Still running at the end of the batch.
        accept(&mut journal, "d_4", "prompt 4", 400);
        step(&mut journal, "d_4", 400);
        settle(&mut journal);
        for (id, at) in [("d_1", 100), ("d_2", 200), ("d_3", 300)] {
            assert_eq!(
                journal.index().get(id).unwrap(),
                finished_drive(id, at),
                "{id}"
            );
        }
        // A running drive's row is as far as its entries go.
        let running = journal.index().get("d_4").unwrap();
        assert_eq!(running.state, DriveState::Received);
        assert_eq!(running.history, finished_drive("d_4", 400).history[..3]);
        let (listed, _) = journal.index().list(&HistoryQuery {
            limit: 10,
            ..HistoryQuery::default()
        });
        let ids: Vec<&str> = listed.iter().map(|d| d.drive_id.as_str()).collect();
        assert_eq!(ids, ["d_1", "d_2", "d_3", "d_4"], "in acceptance order");
        journal.close();
        // A start reading the journal back (the index deleted) agrees, and ends the drive
        // left running after its recorded steps.
        std::fs::remove_file(tmp.path().join("cache").join("index.sqlite3")).unwrap();
        let reopened = Journal::open(config(tmp.path()), 500, &daemon(), Map::new()).unwrap();
        assert_eq!(reopened.ended_at_restart, ["d_4"]);
        let index = reopened.journal.index();
        for (id, at) in [("d_1", 100), ("d_2", 200), ("d_3", 300)] {
            assert_eq!(index.get(id).unwrap(), finished_drive(id, at), "{id}");
        }
        let restarted = index.get("d_4").unwrap();
        let mut expected = finished_drive("d_4", 400);
        expected.state = DriveState::Failed;
        expected.history.truncate(3);
        expected.history.push(StageRecord {
            state: DriveState::Failed,
            at_ms: 500,
        });
        expected.finished_at_ms = Some(500);
        expected.attempts[0].outcome = koru_protocol::AttemptOutcome::Running;
        expected.attempts[0].reached = None;
        expected.attempts[0].finished_at_ms = None;
        expected.verification = Default::default();
        expected.submit_evidence = None;
        expected.observation = None;
        expected.blocker = restarted.blocker.clone();
        assert_eq!(restarted, expected);
        assert_eq!(restarted.blocker.unwrap().code, blocker::DAEMON_RESTARTED);
        reopened.journal.close();
        assert_eq!(
            verify(&tmp.path().join("journal"), None).verdict,
            VerifyVerdict::Intact
        );
    }

    #[test]
    fn a_drive_whose_end_the_index_had_not_applied_before_a_crash_keeps_its_earlier_steps() {
        let tmp = tempfile::tempdir().unwrap();
        let index = tmp.path().join("cache").join("index.sqlite3");
        let saved = tmp.path().join("saved");
        std::fs::create_dir_all(&saved).unwrap();
        let mut journal = Journal::open(config(tmp.path()), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        accept(&mut journal, "d_1", "prompt 1", 100);
        settle(&mut journal);
        step(&mut journal, "d_1", 100);
        settle(&mut journal);
        // The index as a crash right now would leave it: through the step, not the end.
        for suffix in ["", "-wal"] {
            let name = format!("index.sqlite3{suffix}");
            let from = index.with_file_name(&name);
            if from.exists() {
                std::fs::copy(&from, saved.join(&name)).unwrap();
            }
        }
        end_lean(&mut journal, "d_1", 100, true);
        observe(&mut journal, "d_1", 100);
        journal.close();
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(index.with_file_name(format!("index.sqlite3{suffix}")));
        }
        for suffix in ["", "-wal"] {
            let name = format!("index.sqlite3{suffix}");
            if saved.join(&name).exists() {
                std::fs::copy(saved.join(&name), index.with_file_name(&name)).unwrap();
            }
        }
        // The start catches the index up from the step: the end lands on a row that has it.
        let reopened = Journal::open(config(tmp.path()), 300, &daemon(), Map::new()).unwrap();
        assert!(reopened.ended_at_restart.is_empty());
        assert_eq!(
            reopened.journal.index().get("d_1").unwrap(),
            finished_drive("d_1", 100)
        );
        reopened.journal.close();
    }

    #[test]
    fn a_drive_ended_with_the_whole_drive_by_an_older_daemon_is_still_indexed() {
        let tmp = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(config(tmp.path()), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        // Accepted and ended in one batch.
        accept(&mut journal, "d_1", "prompt 1", 100);
        end_whole(&mut journal, "d_1", 100);
        observe(&mut journal, "d_1", 100);
        // Accepted in one batch, a step (without `stages`, as they were) in the next,
        // ended in a third.
        accept(&mut journal, "d_2", "prompt 2", 200);
        settle(&mut journal);
        let mut sent = Map::new();
        sent.insert("drive_id".into(), json!("d_2"));
        sent.insert("state".into(), json!("sent"));
        journal
            .append(201, crate::journal::KIND_DRIVE_STATE, &sent, None, None)
            .unwrap();
        settle(&mut journal);
        end_whole(&mut journal, "d_2", 200);
        observe(&mut journal, "d_2", 200);
        settle(&mut journal);
        for (id, at) in [("d_1", 100), ("d_2", 200)] {
            assert_eq!(
                journal.index().get(id).unwrap(),
                finished_drive(id, at),
                "{id}"
            );
        }
        journal.close();
        std::fs::remove_file(tmp.path().join("cache").join("index.sqlite3")).unwrap();
        let reopened = Journal::open(config(tmp.path()), 300, &daemon(), Map::new()).unwrap();
        assert!(reopened.ended_at_restart.is_empty());
        for (id, at) in [("d_1", 100), ("d_2", 200)] {
            assert_eq!(
                reopened.journal.index().get(id).unwrap(),
                finished_drive(id, at),
                "{id}"
            );
        }
        reopened.journal.close();
    }

    #[test]
    fn segments_rotate_link_and_retention_leaves_a_provable_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = config(tmp.path());
        config.segment_bytes = 4 * 1024;
        config.retain = Retention {
            max_age: None,
            max_bytes: Some(12 * 1024),
        };
        let mut journal = Journal::open(config.clone(), 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        for i in 0..60 {
            accept(
                &mut journal,
                &format!("d_{i}"),
                &format!("prompt {i}"),
                100 + i,
            );
            end(&mut journal, &format!("d_{i}"), 100 + i);
        }
        journal.flush_index();
        let dir = tmp.path().join("journal");
        let segments = segments::list(&dir).unwrap();
        // The data of each (the current segment's file holds its reserve too).
        let total: u64 = segments
            .iter()
            .map(|s| {
                let bytes = std::fs::read(&s.path).unwrap();
                super::super::mapped::data_end(&bytes).0 as u64
            })
            .sum();
        assert!(segments.len() >= 3, "{segments:?}");
        assert!(total <= 12 * 1024 + 4 * 1024, "{total}");
        assert!(segments[0].first_seq > 1, "old segments were pruned");
        // Pruned drives are gone from the index; recent ones answer.
        assert!(journal.index().get("d_0").is_none());
        assert_eq!(journal.index().get("d_59").unwrap().state, DriveState::Done);
        journal.close();
        let report = verify(&dir, None);
        assert_eq!(report.verdict, VerifyVerdict::Intact, "{report:?}");
        assert_eq!(report.pruned_through, Some(segments[0].first_seq - 1));
        // Deleting the oldest remaining segment is not covered by any checkpoint.
        std::fs::remove_file(&segments[0].path).unwrap();
        let report = verify(&dir, None);
        assert_eq!(report.verdict, VerifyVerdict::Tampered, "{report:?}");
    }

    #[test]
    fn digest_mode_keeps_no_prompt_text_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = config(tmp.path());
        config.prompts = PromptsMode::Digest;
        let mut journal = Journal::open(config, 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        let prompt = journal.store_prompt("a very private prompt 7781").unwrap();
        let mut fields = Map::new();
        fields.insert("drive_id".into(), json!("d_1"));
        fields.insert("prompt".into(), prompt);
        journal
            .append(11, crate::journal::KIND_DRIVE_ACCEPTED, &fields, None, None)
            .unwrap();
        journal.close();
        for entry in walk(tmp.path()) {
            let bytes = std::fs::read(&entry).unwrap();
            assert!(
                !bytes.windows(10).any(|w| w == b"very priva"),
                "{} holds the prompt",
                entry.display()
            );
        }
        let report = verify(&tmp.path().join("journal"), None);
        assert_eq!(report.verdict, VerifyVerdict::Intact);
        assert_eq!((report.blobs.referenced, report.blobs.absent), (1, 1));
    }

    #[test]
    fn a_prompt_text_is_in_a_file_at_once_and_reaches_its_blob_at_the_group_commit_or_the_next_start(
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = config(tmp.path());
        // No group commit during the test: what a `kill -9` right after the flush leaves.
        config.fsync = Duration::from_secs(3600);
        let dir = config.dir.clone();
        let mut journal = Journal::open(config, 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        accept(&mut journal, "d_1", "first prompt ✓", 11);
        accept(&mut journal, "d_2", "second\nprompt", 12);
        journal.flush().unwrap();
        let first = blob_path(&dir, &sha256_hex("first prompt ✓".as_bytes()));
        assert!(!first.exists(), "blob files wait for the group commit");
        let logs = super::super::pending::logs(&dir);
        assert_eq!(logs.len(), 1, "both texts in one pending-text log");
        assert_eq!(
            std::fs::metadata(&logs[0].1).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // The folder as a crash would leave it: verify finds both texts, intact.
        let crashed = tmp.path().join("crashed");
        copy_dir(&dir, &crashed);
        let report = verify(&crashed, None);
        assert_eq!(report.verdict, VerifyVerdict::Intact, "{report:?}");
        assert_eq!((report.blobs.referenced, report.blobs.present), (2, 2));
        // The next start writes them to their blob files and removes the log.
        let mut reopened = config_for(&crashed, &tmp.path().join("cache/crashed-index.sqlite3"));
        reopened.fsync = Duration::from_secs(3600);
        Journal::open(reopened, 20, &daemon(), Map::new())
            .unwrap()
            .journal
            .close();
        assert_eq!(
            std::fs::read_to_string(blob_path(&crashed, &sha256_hex(b"second\nprompt"))).unwrap(),
            "second\nprompt"
        );
        assert!(super::super::pending::logs(&crashed).is_empty());
        // The running journal's close is a last group commit: blobs written, logs gone.
        journal.close();
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "first prompt ✓");
        assert!(super::super::pending::logs(&dir).is_empty());
        let report = verify(&dir, None);
        assert_eq!((report.blobs.referenced, report.blobs.present), (2, 2));
    }

    #[test]
    fn the_group_commit_writes_the_texts_and_removes_the_logs_behind_the_current_one() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = config(tmp.path());
        config.fsync = Duration::from_millis(20);
        let dir = config.dir.clone();
        let mut journal = Journal::open(config, 10, &daemon(), Map::new())
            .unwrap()
            .journal;
        let wait_for = |path: &Path| wait_until(&path.display().to_string(), || path.exists());
        accept(&mut journal, "d_1", "one", 11);
        journal.flush().unwrap();
        wait_for(&blob_path(&dir, &sha256_hex(b"one")));
        // The next text goes to a new log; the commit after it removes the first one.
        accept(&mut journal, "d_2", "two", 12);
        journal.flush().unwrap();
        wait_for(&blob_path(&dir, &sha256_hex(b"two")));
        let generations = || -> Vec<u64> {
            super::super::pending::logs(&dir)
                .into_iter()
                .map(|(generation, _)| generation)
                .collect()
        };
        // The commit that took "two" made the next log ready (the loop creates none).
        wait_until("the first log's removal and the next one made", || {
            generations() == [1, 2]
        });
        use std::os::unix::fs::MetadataExt;
        let made = super::super::pending::log_path(&dir, 2);
        let made_inode = std::fs::metadata(&made).unwrap().ino();
        assert!(
            std::fs::metadata(&made).unwrap().len() > 0,
            "its space allocated ahead"
        );
        accept(&mut journal, "d_3", "three", 13);
        journal.flush().unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().ino(), made_inode);
        assert_eq!(
            super::super::pending::texts_of(&[(2, made.clone())])[&sha256_hex(b"three")],
            "three",
            "the loop wrote into the log made for it"
        );
        wait_for(&blob_path(&dir, &sha256_hex(b"three")));
        wait_until("the second log's removal", || generations() == [2, 3]);
        // A flood (more new files than SYNCFS_FROM_FILES in one commit): one syncfs.
        let flood: Vec<String> = (0..SYNCFS_FROM_FILES * 2)
            .map(|i| format!("flood {i}"))
            .collect();
        for (i, text) in flood.iter().enumerate() {
            accept(&mut journal, &format!("d_f{i}"), text, 20 + i as u64);
        }
        journal.flush().unwrap();
        for text in &flood {
            wait_for(&blob_path(&dir, &sha256_hex(text.as_bytes())));
        }
        journal.close();
        assert!(super::super::pending::logs(&dir).is_empty());
        assert_eq!(
            verify_problem(&dir),
            None,
            "every text in its blob, the chain intact"
        );
    }

    /// What `koru verify` finds wrong with the folder, if anything (a blob missing too).
    fn verify_problem(dir: &Path) -> Option<String> {
        let report = verify(dir, None);
        (report.verdict != VerifyVerdict::Intact || report.blobs.absent > 0)
            .then(|| format!("{report:?}"))
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap().flatten() {
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else if entry.file_name() != ".lock" {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }

    #[test]
    fn one_writer_at_a_time_and_private_files() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let first = Journal::open(config(tmp.path()), 10, &daemon(), Map::new()).unwrap();
        let mut impatient = config(tmp.path());
        impatient.lock_wait = Duration::from_millis(200);
        let asked = std::time::Instant::now();
        let second = Journal::open(impatient, 10, &daemon(), Map::new());
        assert!(matches!(second, Err(JournalError::Unreadable { .. })));
        assert!(asked.elapsed() >= Duration::from_millis(200));
        let dir = tmp.path().join("journal");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("blobs")), 0o700);
        assert_eq!(mode(&segments::list(&dir).unwrap()[0].path), 0o600);
        first.journal.close();
    }

    #[test]
    fn a_journal_still_held_by_an_exiting_daemon_is_opened_once_it_lets_go() {
        let tmp = tempfile::tempdir().unwrap();
        let first = Journal::open(config(tmp.path()), 10, &daemon(), Map::new()).unwrap();
        // The predecessor lets go 300 ms from now (as a killed daemon does once its last
        // thread has left the kernel).
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            first.journal.close();
        });
        let asked = std::time::Instant::now();
        let second = Journal::open(config(tmp.path()), 20, &daemon(), Map::new())
            .expect("the journal opens once the previous writer has let go");
        assert!(asked.elapsed() >= Duration::from_millis(250));
        letting_go.join().unwrap();
        assert!(second.ended_at_restart.is_empty());
        second.journal.close();
    }
}

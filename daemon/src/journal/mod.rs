//! The drive journal: an append-only, hash-linked record of every prompt pushed, who asked and how it ended, kept under `$XDG_STATE_HOME/koru/journal/` so that it survives restarts and can be proven intact (docs/journal.md is the format).
//!
//! Rooms: `canonical.rs` (canonical JSON and the seal), `segments.rs` (segment files and
//! their lines), `chain.rs` (the same chain in a folder of its own, written by one
//! short-lived process: a chat's audit ledger), `writer.rs` (the [`Journal`] the state machine appends to: blobs, group
//! commit, rotation, retention, restart recovery), `index.rs` (the SQLite index of drives
//! that answers `drive.get` and history listings from disk), `verify.rs` (`koru verify`),
//! `export.rs` (the self-verifying HTML export).

pub mod canonical;
pub mod canonical_serializer;
pub mod chain;
pub mod export;
pub mod index;
pub mod mapped;
pub mod pending;
pub mod segments;
pub mod verify;
pub mod writer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use koru_protocol::{
    Blocker, DriveObservation, DriveState, Route, RouteAttempt, StageRecord, SubmitEvidence,
    Verification,
};
use serde::Serialize;

pub use writer::{Journal, Reopened};

/// Entry kinds.
pub const KIND_DAEMON_STARTED: &str = "daemon_started";
pub const KIND_DAEMON_STOPPED: &str = "daemon_stopped";
pub const KIND_DRIVE_ACCEPTED: &str = "drive_accepted";
pub const KIND_DRIVE_STATE: &str = "drive_state";
pub const KIND_DRIVE_ENDED: &str = "drive_ended";
/// The chat's own record of a drive's prompt (docs/journal.md, "Evidence").
pub const KIND_DRIVE_PROMPT_RECORDED: &str = "drive_prompt_recorded";
/// The chat's own record of how a drive's turn ended, with the reply's digest.
pub const KIND_DRIVE_OUTCOME_RECORDED: &str = "drive_outcome_recorded";
pub const KIND_RECOVERY: &str = "recovery_performed";
pub const KIND_SESSION_CONNECTED: &str = "session_connected";
pub const KIND_SESSION_DISCONNECTED: &str = "session_disconnected";
pub const KIND_REGISTRY_RELOADED: &str = "registry_reloaded";
/// The HTTP or MCP face refused a request with `forbidden_role`.
pub const KIND_ACCESS_REFUSED: &str = "access_refused";
/// A checkpoint: segments up to `through_seq` were pruned by retention.
pub const KIND_PRUNED: &str = "journal_pruned";
/// A cut last line (a crash in the middle of a write) was removed at start.
pub const KIND_REPAIRED: &str = "journal_repaired";
/// The first entry of a chat's audit ledger (docs/journal.md, "Ledgers"): which chat, from
/// which file, in which format.
pub const KIND_LEDGER_OPENED: &str = "ledger_opened";
/// One item of the audited conversation, with its source record's digest.
pub const KIND_CHAT_ITEM: &str = "chat_item";
/// The `format` of a ledger's `ledger_opened` entry and of its HTML page.
pub const LEDGER_FORMAT: &str = "koru-audit-ledger/1";

/// Where a prompt's text is kept: `blobs/sha256/<hex>` in the journal folder.
pub fn blob_path(dir: &Path, digest_hex: &str) -> PathBuf {
    dir.join("blobs").join("sha256").join(digest_hex)
}

/// The journal folder when none is given: `$XDG_STATE_HOME/koru/journal`, else
/// `~/.local/state/koru/journal`.
pub fn default_dir() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into()))
                .join(".local")
                .join("state")
        });
    state.join("koru").join("journal")
}

/// The file in the default journal folder naming the socket of the daemon that keeps it.
pub const OWNER_FILE: &str = ".socket";

/// The journal folder of the daemon serving `socket` when none is given: the default folder
/// ([`default_dir`]) unless its [`OWNER_FILE`] names another socket — a second daemon of the
/// same user (another runtime dir, a test sandbox) — then `journals/<id>` beside it, one per
/// socket path (`<id>`: the first 16 hex digits of the path's SHA-256), so two daemons never
/// share one chain and each always finds its own again. Only looks.
pub fn default_dir_for(socket: &Path) -> PathBuf {
    let shared = default_dir();
    let socket = absolute(socket);
    match std::fs::read(shared.join(OWNER_FILE)) {
        Ok(owner) if owner.trim_ascii_end() != socket.as_os_str().as_encoded_bytes() => {
            own_dir(&shared, &socket)
        }
        _ => shared,
    }
}

/// [`default_dir_for`] for the daemon about to open it: when the default folder names no
/// socket yet, it is claimed for `socket` first (created with its [`OWNER_FILE`] at once,
/// `O_EXCL`), so two daemons starting together never both take it.
pub fn claim_default_dir_for(socket: &Path) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let shared = default_dir();
    let socket = absolute(socket);
    std::fs::create_dir_all(&shared)?;
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700))?;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(shared.join(OWNER_FILE))
    {
        Ok(mut file) => {
            file.write_all(socket.as_os_str().as_encoded_bytes())?;
            file.write_all(b"\n")?;
            Ok(shared)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let owner = std::fs::read(shared.join(OWNER_FILE))?;
            Ok(
                if owner.trim_ascii_end() == socket.as_os_str().as_encoded_bytes()
                    || owner.trim_ascii_end().is_empty()
                {
                    shared
                } else {
                    own_dir(&shared, &socket)
                },
            )
        }
        Err(e) => Err(e),
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn own_dir(shared: &Path, socket: &Path) -> PathBuf {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(socket.as_os_str().as_encoded_bytes());
    let id: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    shared.with_file_name("journals").join(id)
}

/// Whether prompt texts are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PromptsMode {
    /// Each prompt's text in `blobs/sha256/<hex>`, its digest and length in the chain.
    Full,
    /// Only the digest and length: no prompt text anywhere on disk.
    Digest,
}

impl PromptsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PromptsMode::Full => "full",
            PromptsMode::Digest => "digest",
        }
    }
}

/// How much history is kept: whole segments go, oldest first, once they are older than
/// `max_age` or the journal is larger than `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub max_age: Option<Duration>,
    pub max_bytes: Option<u64>,
}

impl Default for Retention {
    /// 1 GiB, any age.
    fn default() -> Self {
        Retention {
            max_age: None,
            max_bytes: Some(1 << 30),
        }
    }
}

impl std::str::FromStr for Retention {
    type Err = String;

    /// `forever`, or a comma-separated age and/or size: `90d`, `12h`, `500MiB`, `2GiB`,
    /// `90d,2GiB`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text == "forever" {
            return Ok(Retention {
                max_age: None,
                max_bytes: None,
            });
        }
        let mut retention = Retention {
            max_age: None,
            max_bytes: None,
        };
        for part in text.split(',').map(str::trim) {
            let split = part
                .find(|c: char| !c.is_ascii_digit())
                .ok_or_else(|| format!("{part:?} has no unit (d, h, m, KiB, MiB, GiB)"))?;
            let (number, unit) = part.split_at(split);
            let number: u64 = number
                .parse()
                .map_err(|_| format!("{part:?} does not start with a number"))?;
            let seconds = |s: u64| Some(Duration::from_secs(number.saturating_mul(s)));
            match unit {
                "d" => retention.max_age = seconds(86_400),
                "h" => retention.max_age = seconds(3_600),
                "m" => retention.max_age = seconds(60),
                "KiB" => retention.max_bytes = Some(number << 10),
                "MiB" => retention.max_bytes = Some(number << 20),
                "GiB" => retention.max_bytes = Some(number << 30),
                other => {
                    return Err(format!(
                        "unknown unit {other:?} in {part:?} (d, h, m, KiB, MiB, GiB, or `forever`)"
                    ))
                }
            }
        }
        Ok(retention)
    }
}

/// Everything the journal can be told.
#[derive(Debug, Clone)]
pub struct JournalConfig {
    pub dir: PathBuf,
    pub prompts: PromptsMode,
    /// Longest time between a write and its `fdatasync`.
    pub fsync: Duration,
    /// A segment is closed and a new one started once it is this large.
    pub segment_bytes: u64,
    pub retain: Retention,
    pub sealer: canonical::Sealer,
    /// The SQLite index of drives (a cache, rebuilt from the journal when it is missing or
    /// does not match).
    pub index_path: PathBuf,
    /// How long opening waits for the journal's lock while another process holds it: a
    /// daemon killed a moment ago keeps its lock until it has fully exited (a thread of it
    /// may still be in `fdatasync`), and its successor — already the owner of the socket —
    /// must not fail on that.
    pub lock_wait: Duration,
}

impl JournalConfig {
    /// The defaults for `dir`: full prompts, 100 ms group commit, 16 MiB segments, 1 GiB,
    /// sealed as `KORU_JOURNAL_HMAC_KEY` says, the index in the cache folder.
    pub fn new(dir: PathBuf) -> JournalConfig {
        let index_path = index::default_index_path(&dir);
        JournalConfig {
            dir,
            prompts: PromptsMode::Full,
            fsync: Duration::from_millis(100),
            segment_bytes: 16 << 20,
            retain: Retention::default(),
            sealer: canonical::Sealer::from_env(),
            index_path,
            lock_wait: Duration::from_secs(5),
        }
    }
}

/// Who asked for something: the client as it named itself in `hello`, the peer process as
/// the kernel reported it (`SO_PEERCRED`), and the door it came through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
///
/// Fields in canonical (alphabetical) order, as in every struct the journal writes: the
/// canonical serializer then writes them where they come, with nothing to reorder.
pub struct Asker {
    pub client: String,
    /// `socket`, `cli`, `mcp_stdio`, `mcp_http`, `http_api`, `dashboard`, `hook`,
    /// `notification` (a desktop notification's button), or `daemon` (the daemon itself,
    /// e.g. restart recovery).
    pub door: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub uid: u32,
    pub version: String,
}

/// The own fields of `drive_state` and `drive_ended` (docs/journal.md): the drive's state
/// and route, and of the rest only what changed since the drive's last entry (`Some(None)`
/// is written `null`: cleared), with the history records added since then (`stages`), so
/// that a reader folding a drive's entries in order rebuilds its `history` exactly.
#[derive(Debug, Serialize)]
pub struct DriveChange<'a> {
    /// The route attempts that changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<IndexedAttempt<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocker: Option<Option<&'a Blocker>>,
    pub drive_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation: Option<Option<&'a DriveObservation>>,
    pub route: Route,
    /// The drive's history records since its last entry, in order.
    #[serde(skip_serializing_if = "Stages::is_empty")]
    pub stages: Stages<'a>,
    pub state: DriveState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_evidence: Option<Option<SubmitEvidence>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Option<&'a Blocker>>,
}

/// A drive's history records as the journal writes them: `{"at_ms", "state"}` each, the
/// keys in canonical order.
#[derive(Debug, Clone, Copy)]
pub struct Stages<'a>(pub &'a [StageRecord]);

impl Stages<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Stages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct Stage<'r>(&'r StageRecord);
        impl Serialize for Stage<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut record = serializer.serialize_struct("StageRecord", 2)?;
                record.serialize_field("at_ms", &self.0.at_ms)?;
                record.serialize_field("state", &self.0.state)?;
                record.end()
            }
        }
        let mut records = serializer.serialize_seq(Some(self.0.len()))?;
        for record in self.0 {
            records.serialize_element(&Stage(record))?;
        }
        records.end()
    }
}

/// A route attempt that changed, with its place in the drive's list: the attempt's
/// members and `index`, in canonical order.
#[derive(Debug)]
pub struct IndexedAttempt<'a> {
    pub index: usize,
    pub attempt: &'a RouteAttempt,
}

impl Serialize for IndexedAttempt<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let RouteAttempt {
            route,
            interface,
            outcome,
            reached,
            blocker,
            hint,
            note,
            text,
            started_at_ms,
            finished_at_ms,
        } = self.attempt;
        let mut out = serializer.serialize_struct("RouteAttempt", 11)?;
        if let Some(blocker) = blocker {
            out.serialize_field("blocker", blocker)?;
        }
        if let Some(at) = finished_at_ms {
            out.serialize_field("finished_at_ms", at)?;
        }
        if let Some(hint) = hint {
            out.serialize_field("hint", hint)?;
        }
        out.serialize_field("index", &self.index)?;
        out.serialize_field("interface", interface)?;
        if let Some(note) = note {
            out.serialize_field("note", note)?;
        }
        out.serialize_field("outcome", outcome)?;
        if let Some(reached) = reached {
            out.serialize_field("reached", reached)?;
        }
        out.serialize_field("route", route)?;
        if let Some(at) = started_at_ms {
            out.serialize_field("started_at_ms", at)?;
        }
        if let Some(text) = text {
            out.serialize_field("text", text)?;
        }
        out.end()
    }
}

/// Errors writing or opening the journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the journal in {dir} cannot be continued: {why}")]
    Unreadable { dir: PathBuf, why: String },
    #[error("the drive index {path}: {source}")]
    Index {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("a {kind} entry has no canonical JSON: {error}")]
    Entry { kind: String, error: String },
    #[error(transparent)]
    Export(#[from] export::ExportError),
}

impl JournalError {
    pub fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> JournalError {
        let path = path.to_path_buf();
        move |source| JournalError::Io {
            action,
            path,
            source,
        }
    }
}

/// The daemon as the asker of its own entries, for tests.
#[cfg(test)]
pub fn test_daemon() -> Asker {
    Asker {
        door: "daemon".into(),
        client: "koru".into(),
        version: "test".into(),
        pid: Some(1),
        uid: 1000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-ordered writers say what serde's own would: the attempt's members with
    /// `index` beside them, each stage record as the protocol writes it.
    #[test]
    fn attempts_and_stages_are_written_as_their_protocol_json_is() {
        use koru_protocol::AttemptOutcome;
        let full = RouteAttempt {
            route: Route::PluginDrive,
            interface: "vscode_plugin_drive".into(),
            outcome: AttemptOutcome::Failed,
            reached: Some(DriveState::Received),
            blocker: Some(Blocker::new("timeout", "no ack")),
            hint: Some("reload the window".into()),
            note: Some("opened a new chat".into()),
            text: None,
            started_at_ms: Some(5),
            finished_at_ms: Some(9),
        };
        let bare = RouteAttempt {
            reached: None,
            blocker: None,
            hint: None,
            note: None,
            started_at_ms: None,
            finished_at_ms: None,
            ..full.clone()
        };
        for attempt in [&full, &bare] {
            let mut expected = serde_json::to_value(attempt).unwrap();
            expected["index"] = 3.into();
            let written = serde_json::to_value(IndexedAttempt { index: 3, attempt }).unwrap();
            assert_eq!(written, expected);
        }
        let history = [
            StageRecord {
                state: DriveState::Received,
                at_ms: 1,
            },
            StageRecord {
                state: DriveState::Done,
                at_ms: 2,
            },
        ];
        assert_eq!(
            serde_json::to_value(Stages(&history)).unwrap(),
            serde_json::to_value(history).unwrap()
        );
    }

    #[test]
    fn retention_reads_ages_sizes_and_forever() {
        let r: Retention = "90d,2GiB".parse().unwrap();
        assert_eq!(r.max_age, Some(Duration::from_secs(90 * 86_400)));
        assert_eq!(r.max_bytes, Some(2 << 30));
        let r: Retention = "500MiB".parse().unwrap();
        assert_eq!((r.max_age, r.max_bytes), (None, Some(500 << 20)));
        let r: Retention = "forever".parse().unwrap();
        assert_eq!((r.max_age, r.max_bytes), (None, None));
        assert!("90".parse::<Retention>().unwrap_err().contains("unit"));
        assert!("9y"
            .parse::<Retention>()
            .unwrap_err()
            .contains("unknown unit"));
    }
}

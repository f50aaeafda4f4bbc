//! The drive journal on the wire: its state in `status`, and `journal.verify` with the report `koru verify` prints (docs/journal.md has the file format).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The journal as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JournalStatus {
    /// The journal's folder.
    pub dir: String,
    /// `entry_hash` of the last entry written: write it down elsewhere to prove later that
    /// nothing before it changed.
    pub head: String,
    /// `seq` of the last entry written.
    pub last_seq: u64,
    /// `full` (prompt texts kept in `blobs/`) or `digest` (no prompt text on disk).
    pub prompts: String,
    /// Whether entries are keyed with HMAC-SHA256 (`KORU_JOURNAL_HMAC_KEY`).
    pub keyed: bool,
    /// Longest time between a write and its `fdatasync`.
    pub fsync_ms: u64,
    /// Set when the journal could not be written (the daemon goes on; this says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `journal.verify` (controller → daemon): check the daemon's journal now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JournalVerify {}

/// `journal.verify.result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JournalVerifyResult {
    pub report: VerifyReport,
}

/// What checking a journal found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VerifyReport {
    /// The folder checked.
    pub dir: String,
    /// `intact`, `tampered` (see `problem`) or `unusable` (see `problem`: no journal there,
    /// unreadable, keyed without a key).
    pub verdict: VerifyVerdict,
    /// Entries read and checked.
    pub entries: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// `entry_hash` of the last entry that checked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Segment files read.
    pub segments: u64,
    /// Whether the entries are keyed (HMAC-SHA256).
    pub keyed: bool,
    /// Entries before this `seq` were pruned by retention; a checkpoint entry vouches for
    /// where the remaining chain starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned_through: Option<u64>,
    /// The first thing that is wrong (checking stops there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<VerifyProblem>,
    /// Prompt blobs the chain refers to, and what became of them.
    pub blobs: BlobCounts,
    /// Set when the folder is a chat's audit ledger (its first entry is `ledger_opened`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::LedgerInfo>,
}

/// The three outcomes of `koru verify` (exit 0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerifyVerdict {
    Intact,
    Tampered,
    Unusable,
}

/// One thing wrong with a journal, where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VerifyProblem {
    pub kind: VerifyProblemKind,
    /// The `seq` of the first bad entry (the one expected there when it is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The segment file, relative to the journal folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<String>,
    /// 1-based line in that segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub message: String,
}

/// What is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerifyProblemKind {
    /// The entry's content no longer matches its `entry_hash`.
    Edited,
    /// Entries are missing: the next `seq` is further on than the chain expects.
    Deleted,
    /// Entries are out of order.
    Reordered,
    /// An entry that checks out on its own does not continue this chain (it comes from
    /// another journal, or was put in between).
    Spliced,
    /// A line stops in the middle (a cut file).
    Truncated,
    /// A keyed journal checked with a key that is not the one it was written with.
    WrongKey,
    /// A prompt blob whose content does not match its digest.
    BlobMismatch,
    /// Not a journal line at all (not JSON, or not an entry).
    Malformed,
    /// The folder holds no journal, or cannot be read.
    Unusable,
}

/// Prompt blobs (`blobs/sha256/<hex>`) the chain names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlobCounts {
    /// Distinct prompt digests the entries name.
    pub referenced: u64,
    /// Present and matching their digest.
    pub present: u64,
    /// Not there: purged for privacy, or never kept (`--journal-prompts digest`). Not
    /// tampering: the chain holds each prompt's digest and length either way.
    pub absent: u64,
}

//! `chat.audit` on the wire: import a chat Koru reads into a standalone, hash-chained ledger (the journal's format, a folder of its own), or extend the ledger already there; docs/journal.md "Ledgers" has the entries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `chat.audit` (controller → daemon): audit one chat the observers know into its ledger.
/// Without `chat_id` the most recently active chat is audited. The daemon writes the
/// ledger (sealed with its own `KORU_JOURNAL_HMAC_KEY`, when set) and answers
/// `chat.audit.result` once it is on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatAudit {
    /// A chat id as `chats.list` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The store (registry interface id) of `chat_id`, when two stores have a chat of that
    /// id; without `chat_id`, the most recent chat of this store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// The ledger's folder (absolute); default `$XDG_STATE_HOME/koru/audits/<store>/<chat>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
    /// Also write the ledger's self-verifying HTML page to this file: an absolute path, or
    /// a file name alone for a page in the ledger's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
}

/// `chat.audit.result`: what the audit did. A `finding` of kind `source_rewritten` means
/// that nothing new was imported (`koru audit` exits 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatAuditResult {
    pub store: String,
    pub chat_id: String,
    /// The chat's file (or database) the items were read from.
    pub source: String,
    /// The ledger's folder.
    pub dir: String,
    /// Whether this audit opened the ledger (its first run).
    pub opened: bool,
    /// Items this run imported.
    pub items_added: u64,
    /// Items the ledger holds now.
    pub items_total: u64,
    /// The ledger's last `seq` and `entry_hash` after this run.
    pub last_seq: u64,
    pub head: String,
    /// Whether the ledger's entries are keyed (HMAC-SHA256).
    pub keyed: bool,
    /// The HTML page written, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// What the audit found changed in the part of the source imported before, when
    /// anything did (recorded in the ledger as an entry of this kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<AuditFinding>,
}

/// A change found in the part of a source already imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AuditFinding {
    pub kind: AuditFindingKind,
    /// The first imported item that differs (its `index` in the ledger), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u64>,
    pub message: String,
}

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditFindingKind {
    /// Bytes already imported changed (an item edited, removed or reordered): history was
    /// rewritten after the fact. Nothing new was imported.
    SourceRewritten,
    /// The store rewrote its file whole (a Copilot log compacted into a new snapshot) and
    /// every item imported is still there with the same content: recorded, then the new
    /// items imported.
    SourceCompacted,
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// What `koru verify` says of a folder whose first entry is `ledger_opened`: an audit
/// ledger of one chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LedgerInfo {
    pub store: String,
    pub chat_id: String,
    /// The chat's file when the ledger was opened.
    pub source: String,
    /// `chat_item` entries checked.
    pub items: u64,
}

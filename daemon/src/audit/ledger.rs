//! What a ledger already holds, read back from its segments: the chat it is of (`ledger_opened`), each imported item's index, content and source record, and where the last `audit_run` stopped — what the next audit compares the source with.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::journal::segments::{self, Lines};
use crate::journal::{KIND_CHAT_ITEM, KIND_LEDGER_OPENED};

/// The entry kinds of a ledger besides `ledger_opened` and `chat_item`.
pub const KIND_AUDIT_RUN: &str = "audit_run";
pub const KIND_SOURCE_REWRITTEN: &str = "source_rewritten";
pub const KIND_SOURCE_COMPACTED: &str = "source_compacted";

/// The chat a ledger is of.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Opened {
    pub store: String,
    pub chat_id: String,
}

/// What an item's entry recorded of it, for comparing with the source read again.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ImportedItem {
    pub index: u64,
    pub turn: u64,
    pub item: String,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub call_id: Option<String>,
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub text: Option<TextDigest>,
    pub source: Value,
}

/// A text's digest and length, as an entry records it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct TextDigest {
    pub sha256: String,
    pub chars: u64,
}

impl ImportedItem {
    /// The SHA-256 of the item's source bytes, as recorded.
    pub fn source_sha256(&self) -> &str {
        self.source
            .get("sha256")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// A Line source's place: (offset, bytes).
    pub fn line_range(&self) -> Option<(u64, u64)> {
        if self.source.get("kind").and_then(Value::as_str) != Some("line") {
            return None;
        }
        Some((
            self.source.get("offset")?.as_u64()?,
            self.source.get("bytes")?.as_u64()?,
        ))
    }
}

/// Where an audit run stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Through {
    /// Items imported up to here.
    pub items: u64,
    /// The byte offset of the source imported up to (a file read as lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The last line imported (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// The last `audit_run`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastRun {
    pub through: Through,
    pub prefix_sha256: Option<String>,
}

/// What a ledger holds.
#[derive(Debug, Default)]
pub struct LedgerState {
    pub opened: Option<Opened>,
    pub items: Vec<ImportedItem>,
    pub last_run: Option<LastRun>,
    /// `audit_run` entries so far.
    pub runs: u64,
}

#[derive(Deserialize)]
struct RunFields {
    through: Through,
    #[serde(default)]
    prefix_sha256: Option<String>,
}

/// Reads the ledger in `dir` (which `koru verify` found intact, or which has no entries).
pub fn read(dir: &Path) -> Result<LedgerState, String> {
    let mut state = LedgerState::default();
    let listed = segments::list(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for segment in listed {
        let lines = Lines::open(&segment.path)
            .map_err(|e| format!("cannot read {}: {e}", segment.path.display()))?;
        for line in lines {
            let line = line.map_err(|e| format!("cannot read {}: {e}", segment.path.display()))?;
            if !line.complete {
                continue;
            }
            let where_ = || format!("{} line {}", segment.name(), line.number);
            let entry: Value = serde_json::from_slice(&line.bytes)
                .map_err(|e| format!("{}: not an entry: {e}", where_()))?;
            let kind = entry.get("kind").and_then(Value::as_str).unwrap_or("");
            let parse_err = |e: serde_json::Error| format!("{}: a {kind} entry: {e}", where_());
            match kind {
                KIND_LEDGER_OPENED => {
                    state.opened = Some(Opened::deserialize(&entry).map_err(parse_err)?);
                }
                KIND_CHAT_ITEM => {
                    state
                        .items
                        .push(ImportedItem::deserialize(&entry).map_err(parse_err)?);
                }
                KIND_AUDIT_RUN => {
                    let run = RunFields::deserialize(&entry).map_err(parse_err)?;
                    state.runs += 1;
                    state.last_run = Some(LastRun {
                        through: run.through,
                        prefix_sha256: run.prefix_sha256,
                    });
                }
                _ => {}
            }
        }
    }
    Ok(state)
}

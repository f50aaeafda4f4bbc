//! `koru audit`: a chat Koru reads turned into a standalone, verifiable ledger — the journal's format and rules (`journal::chain::ChainWriter`) in a folder of its own, one `chat_item` entry per item of the conversation with its source record's digest — and extended, not rebuilt, each time the chat grows; a source rewritten before the point already imported is recorded and nothing new is imported (docs/journal.md, "Ledgers").
//!
//! `ledger.rs` reads what a ledger already holds, `run.rs` is one audit (blocking I/O),
//! `runner.rs` runs audits off the daemon's event loop for `chat.audit`.

pub mod ledger;
pub mod run;
pub mod runner;

use std::path::PathBuf;

pub use run::{audit, AuditError, AuditOutcome, AuditRequest};
pub use runner::{AuditFinished, AuditRunner, SystemAuditRunner};

/// The page's file name in the ledger's folder when a face that names no paths (the MCP
/// tool) asks for one.
pub const PAGE_NAME: &str = "ledger.html";

/// The ledger folder of a chat when none is given:
/// `$XDG_STATE_HOME/koru/audits/<store>/<chat>/` (`~/.local/state/…` by default), each
/// name made safe as one path component.
pub fn default_dir(store: &str, chat_id: &str) -> PathBuf {
    let journal = crate::journal::default_dir();
    let koru = journal.parent().map(PathBuf::from).unwrap_or(journal);
    koru.join("audits")
        .join(component(store))
        .join(component(chat_id))
}

/// `name` as one safe path component: `/` and NUL replaced, never empty, `.` or `..`.
fn component(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    match safe.as_str() {
        "" => "_".to_string(),
        "." | ".." => safe.replace('.', "_"),
        _ => safe,
    }
}

/// An audit's outcome as `koru audit` prints it (and the MCP tool `audit_chat` answers).
pub fn render(result: &koru_protocol::ChatAuditResult) -> String {
    let mut out = String::new();
    match &result.finding {
        Some(finding) if finding.kind == koru_protocol::AuditFindingKind::SourceRewritten => {
            out.push_str(&format!(
                "✗ the source was rewritten after it was audited{}: {}\n  recorded in the ledger as source_rewritten; nothing new was imported\n",
                finding
                    .item
                    .map(|i| format!(" (item {i})"))
                    .unwrap_or_default(),
                finding.message
            ));
        }
        finding => {
            if let Some(finding) = finding {
                out.push_str(&format!("! {}\n", finding.message));
            }
            out.push_str(&format!(
                "✓ {} chat {} ({}): {} item(s) imported, {} in the ledger\n",
                if result.opened {
                    "audited"
                } else {
                    "audited again"
                },
                result.chat_id,
                result.store,
                result.items_added,
                result.items_total
            ));
        }
    }
    out.push_str(&format!(
        "  ledger: {} (seq 1–{}, head {}{})\n  source: {}\n",
        result.dir,
        result.last_seq,
        result.head,
        if result.keyed { ", HMAC-SHA256" } else { "" },
        result.source
    ));
    if let Some(html) = &result.html {
        out.push_str(&format!("  page: {html} (verifies itself in a browser)\n"));
    }
    out.push_str(&format!("  check it: koru verify {}\n", result.dir));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids_become_one_safe_component() {
        assert_eq!(component("a/b"), "a_b");
        assert_eq!(component(".."), "__");
        assert_eq!(component(""), "_");
        assert_eq!(component("ses_1"), "ses_1");
    }
}

//! `koru journal export --html`: one self-contained HTML file holding a stretch of the journal and the code that re-verifies it in the recipient's browser.

use std::path::Path;

use super::JournalError;

/// Which entries an export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every entry.
    All,
    /// The stretch from this drive's `drive_accepted` to its `drive_ended` (and its prompt).
    Drive(String),
    /// Entries at or after this time (Unix ms).
    Since(u64),
}

/// Writes the export of `dir` to `out`; returns a one-line summary.
pub fn export_html(
    dir: &Path,
    selection: &Selection,
    key: Option<&[u8]>,
    out: &Path,
) -> Result<String, JournalError> {
    let _ = (dir, selection, key, out);
    Err(JournalError::Unreadable {
        dir: dir.to_path_buf(),
        why: "HTML export is not built yet".into(),
    })
}

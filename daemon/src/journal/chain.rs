//! A hash-chained log written by one short-lived process with plain `write(2)` (a chat's audit ledger, issue 43): the journal's segment files, canonical sealed entries and chain rules, without its drive index, prompt blobs, group commit or retention, so that `koru verify` and the HTML export check it exactly as they check the journal.
//!
//! Opening one takes its folder's `.lock` (one writer at a time), removes a line a crash
//! cut short (as the journal does: [`ChainWriter::repaired_bytes`] says how many bytes) and
//! goes on from the last entry's `seq` and hash. Entries are buffered by
//! [`ChainWriter::append`] and reach the disk at [`ChainWriter::finish`] (written, then
//! `fdatasync`, and the folder flushed when a segment was created), or earlier when a
//! segment fills: it is written, flushed and closed, and the next entry starts a new one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::canonical::{sealed_envelope_into, Envelope, SealScratch, Sealer};
use super::segments::segment_name;
use super::writer::{create_private_dir, open_lock_file, read_tail};
use super::{Asker, JournalError};

/// Segments of a ledger close past this many bytes (as the journal's do by default).
pub const LEDGER_SEGMENT_BYTES: u64 = 16 * 1024 * 1024;

/// A chain of sealed entries in a folder of its own, open for appending.
pub struct ChainWriter {
    dir: PathBuf,
    sealer: Sealer,
    last_seq: u64,
    head: String,
    segment_first_seq: u64,
    /// Bytes in the current segment, the buffered lines included.
    segment_bytes: u64,
    segment_limit: u64,
    /// The current segment, opened for appending (created at the first write).
    segment: Option<File>,
    /// A segment was created since the folder was last flushed.
    listing_changed: bool,
    buffer: Vec<u8>,
    scratch: SealScratch,
    repaired_bytes: Option<u64>,
    _lock: nix::fcntl::Flock<File>,
}

impl std::fmt::Debug for ChainWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainWriter")
            .field("dir", &self.dir)
            .field("last_seq", &self.last_seq)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

impl ChainWriter {
    /// Opens the chain in `dir` (created 0700 when missing), sealing new entries with
    /// `sealer`; segments close past `segment_limit` bytes. Fails when another process
    /// holds the folder, or when its last entry cannot be read.
    pub fn open(dir: &Path, sealer: Sealer, segment_limit: u64) -> Result<Self, JournalError> {
        create_private_dir(dir)?;
        let lock_file = open_lock_file(dir)?;
        let lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| JournalError::Unreadable {
                dir: dir.to_path_buf(),
                why: format!("another process is writing it ({errno})"),
            })?;
        let tail = read_tail(dir)?;
        Ok(ChainWriter {
            dir: dir.to_path_buf(),
            sealer,
            last_seq: tail.last_seq,
            head: tail.head,
            segment_first_seq: tail.segment_first_seq,
            segment_bytes: tail.segment_len,
            segment_limit: segment_limit.max(1),
            segment: None,
            listing_changed: false,
            buffer: Vec::new(),
            scratch: SealScratch::default(),
            repaired_bytes: tail.repaired_bytes,
            _lock: lock,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `seq` of the last entry (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The last entry's hash (the chain's head; the genesis value before the first).
    pub fn head(&self) -> &str {
        &self.head
    }

    /// Bytes of a cut last line that opening removed, if any.
    pub fn repaired_bytes(&self) -> Option<u64> {
        self.repaired_bytes
    }

    /// Seals `fields` (an object whose keys are none of the envelope's) as the next entry
    /// of kind `kind` and buffers its line; returns its `seq`. The entry is on the disk
    /// after [`ChainWriter::finish`].
    pub fn append<F: Serialize + ?Sized>(
        &mut self,
        at_ms: u64,
        kind: &str,
        fields: &F,
        by: Option<&Asker>,
    ) -> Result<u64, JournalError> {
        if self.segment_bytes >= self.segment_limit {
            self.close_segment()?;
        }
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
            &self.sealer,
            &mut self.scratch,
            &mut self.buffer,
        )
        .map_err(|error| {
            self.buffer.truncate(start);
            JournalError::Entry {
                kind: kind.to_string(),
                error: error.to_string(),
            }
        })?;
        self.buffer.push(b'\n');
        self.segment_bytes += (self.buffer.len() - start) as u64;
        self.last_seq = seq;
        self.head = hash;
        Ok(seq)
    }

    /// Writes the buffered entries and flushes them (and the folder, when a segment was
    /// created) to the disk.
    pub fn finish(&mut self) -> Result<(), JournalError> {
        self.write_buffer()?;
        if let Some(segment) = &self.segment {
            segment
                .sync_data()
                .map_err(JournalError::io("fdatasync", &self.segment_path()))?;
        }
        self.sync_listing()
    }

    fn segment_path(&self) -> PathBuf {
        self.dir.join(segment_name(self.segment_first_seq))
    }

    fn write_buffer(&mut self) -> Result<(), JournalError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let path = self.segment_path();
        if self.segment.is_none() {
            let existed = path.exists();
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
                .map_err(JournalError::io("open", &path))?;
            self.listing_changed |= !existed;
            self.segment = Some(file);
        }
        let segment = self.segment.as_mut().expect("opened above");
        segment
            .write_all(&self.buffer)
            .map_err(JournalError::io("write", &path))?;
        self.buffer.clear();
        Ok(())
    }

    /// The current segment written, flushed and closed; the next entry starts the next.
    fn close_segment(&mut self) -> Result<(), JournalError> {
        self.finish()?;
        self.segment = None;
        self.segment_first_seq = self.last_seq + 1;
        self.segment_bytes = 0;
        Ok(())
    }

    fn sync_listing(&mut self) -> Result<(), JournalError> {
        if std::mem::take(&mut self.listing_changed) {
            File::open(&self.dir)
                .and_then(|dir| dir.sync_all())
                .map_err(JournalError::io("fsync", &self.dir))?;
        }
        Ok(())
    }
}

impl Drop for ChainWriter {
    fn drop(&mut self) {
        // Entries appended and never finished are written still (not flushed): a process
        // that stops on an error keeps what it had sealed.
        if !self.buffer.is_empty() {
            if let Err(error) = self.write_buffer() {
                tracing::warn!(dir = %self.dir.display(), %error, "entries of a chain could not be written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::segments;
    use crate::journal::verify::verify;
    use koru_protocol::VerifyVerdict;
    use serde_json::json;

    fn item(n: u64) -> serde_json::Value {
        json!({"index": n, "item": "user_prompt", "text": {"sha256": format!("{n:064x}"), "bytes": n}})
    }

    /// `verify` finds the chain in `dir` intact with `entries` entries; its report.
    fn assert_intact(dir: &Path, entries: u64) -> koru_protocol::VerifyReport {
        let report = verify(dir, None);
        assert_eq!(
            report.verdict,
            VerifyVerdict::Intact,
            "{:?}",
            report.problem
        );
        assert_eq!(report.entries, entries);
        report
    }

    fn write(dir: &Path, sealer: Sealer, from: u64, to: u64, limit: u64) -> (u64, String) {
        let mut chain = ChainWriter::open(dir, sealer, limit).unwrap();
        for n in from..=to {
            chain
                .append(1_000 + n, "chat_item", &item(n), None)
                .unwrap();
        }
        chain.finish().unwrap();
        (chain.last_seq(), chain.head().to_string())
    }

    #[test]
    fn a_chain_written_in_two_runs_verifies_as_the_journal_does() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ledger");
        let (seq, head) = write(&dir, Sealer::Sha256, 1, 3, LEDGER_SEGMENT_BYTES);
        assert_eq!(seq, 3);
        // A second run goes on from the head: one chain, not two.
        let (seq, head2) = write(&dir, Sealer::Sha256, 4, 5, LEDGER_SEGMENT_BYTES);
        assert_eq!(seq, 5);
        assert_ne!(head, head2);
        let report = assert_intact(&dir, 5);
        assert_eq!(report.head.as_deref(), Some(head2.as_str()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_keyed_chain_verifies_with_its_key_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ledger");
        write(
            &dir,
            Sealer::Hmac(b"secret".to_vec()),
            1,
            2,
            LEDGER_SEGMENT_BYTES,
        );
        assert_eq!(verify(&dir, Some(b"secret")).verdict, VerifyVerdict::Intact);
        assert_ne!(verify(&dir, Some(b"other")).verdict, VerifyVerdict::Intact);
    }

    #[test]
    fn full_segments_close_and_the_chain_runs_across_them() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ledger");
        write(&dir, Sealer::Sha256, 1, 40, 2_000);
        write(&dir, Sealer::Sha256, 41, 60, 2_000);
        let listed = segments::list(&dir).unwrap();
        assert!(listed.len() > 2, "{} segments", listed.len());
        assert_intact(&dir, 60);
    }

    #[test]
    fn a_line_cut_by_a_crash_is_removed_and_the_chain_goes_on_from_the_entry_before() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ledger");
        let (_, head) = write(&dir, Sealer::Sha256, 1, 2, LEDGER_SEGMENT_BYTES);
        let segment = dir.join(segment_name(1));
        let mut file = OpenOptions::new().append(true).open(&segment).unwrap();
        file.write_all(br#"{"at_ms":1,"kind":"chat_it"#).unwrap();
        drop(file);
        let mut chain = ChainWriter::open(&dir, Sealer::Sha256, LEDGER_SEGMENT_BYTES).unwrap();
        assert_eq!(chain.repaired_bytes(), Some(26));
        assert_eq!((chain.last_seq(), chain.head()), (2, head.as_str()));
        chain.append(9, "chat_item", &item(3), None).unwrap();
        chain.finish().unwrap();
        drop(chain);
        assert_intact(&dir, 3);
    }

    #[test]
    fn one_writer_at_a_time() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ledger");
        let _first = ChainWriter::open(&dir, Sealer::Sha256, LEDGER_SEGMENT_BYTES).unwrap();
        let second = ChainWriter::open(&dir, Sealer::Sha256, LEDGER_SEGMENT_BYTES).unwrap_err();
        assert!(
            second.to_string().contains("another process is writing it"),
            "{second}"
        );
    }

    #[test]
    fn fields_that_clash_with_the_envelope_are_refused_and_nothing_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ledger");
        let mut chain = ChainWriter::open(&dir, Sealer::Sha256, LEDGER_SEGMENT_BYTES).unwrap();
        chain.append(1, "chat_item", &item(1), None).unwrap();
        let refused = chain.append(2, "chat_item", &json!({"seq": 7}), None);
        assert!(
            matches!(refused, Err(JournalError::Entry { .. })),
            "{refused:?}"
        );
        chain.append(3, "chat_item", &item(2), None).unwrap();
        chain.finish().unwrap();
        assert_eq!(chain.last_seq(), 2);
        drop(chain);
        assert_intact(&dir, 2);
    }
}

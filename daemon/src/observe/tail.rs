//! Incremental reading of an append-only JSONL file: from the last offset, a partial last line kept until its newline arrives, truncation and replacement (shorter file, new inode) detected and read again from the start. Opened read-only, never written.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Lines longer than this are skipped (a store record is never this long in practice).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What one read found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TailRead {
    /// Complete lines, without their newline.
    pub lines: Vec<Vec<u8>>,
    /// The file was truncated or replaced: the lines start again from its beginning.
    pub restarted: bool,
}

/// The read position in one file.
#[derive(Debug)]
pub struct JsonlTail {
    path: PathBuf,
    offset: u64,
    inode: Option<u64>,
    partial: Vec<u8>,
    skipping_long_line: bool,
}

impl JsonlTail {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonlTail {
            path: path.into(),
            offset: 0,
            inode: None,
            partial: Vec::new(),
            skipping_long_line: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes consumed so far (complete lines and the buffered partial line).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Where complete lines end and the file's inode, when something was read: what the
    /// summary cache keeps to resume here after a restart (a partial last line is read
    /// again then).
    pub fn position(&self) -> Option<(u64, u64)> {
        let inode = self.inode?;
        if self.skipping_long_line {
            return None;
        }
        Some((self.offset - self.partial.len() as u64, inode))
    }

    /// Resumes at `position` of the file with `inode` (from [`JsonlTail::position`]):
    /// the next read starts there, or from the beginning if the file was replaced or
    /// shrank since.
    pub fn resume_at(&mut self, position: u64, inode: u64) {
        self.offset = position;
        self.inode = Some(inode);
        self.partial.clear();
        self.skipping_long_line = false;
    }

    /// Reads what was appended since the last call. The cost is proportional to the new
    /// bytes, not to the file's size.
    pub fn read_new(&mut self) -> std::io::Result<TailRead> {
        let mut read = TailRead::default();
        self.read_each(|item| match item {
            TailItem::Restarted => read.restarted = true,
            TailItem::Line(line) => read.lines.push(line.to_vec()),
        })?;
        Ok(read)
    }

    /// Reads what was appended since the last call, handing each complete line to `each`
    /// as it is read (after `Restarted` when the file was truncated or replaced): memory
    /// stays bounded by `READ_CHUNK_BYTES` and the longest line, whatever was appended.
    pub fn read_each(&mut self, mut each: impl FnMut(TailItem<'_>)) -> std::io::Result<()> {
        let mut file = File::open(&self.path)?;
        let meta = file.metadata()?;
        let replaced = self.inode.is_some_and(|inode| inode != meta.ino());
        if replaced || meta.len() < self.offset {
            self.offset = 0;
            self.partial.clear();
            self.skipping_long_line = false;
            if self.inode.is_some() {
                each(TailItem::Restarted);
            }
        }
        self.inode = Some(meta.ino());
        if meta.len() == self.offset {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut left = meta.len() - self.offset;
        let mut chunk = vec![0u8; (left.min(READ_CHUNK_BYTES as u64)) as usize];
        while left > 0 {
            let want = (left.min(chunk.len() as u64)) as usize;
            let got = file.read(&mut chunk[..want])?;
            if got == 0 {
                break;
            }
            left -= got as u64;
            self.offset += got as u64;
            let mut rest: &[u8] = &chunk[..got];
            while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
                let (line, after) = rest.split_at(newline);
                rest = &after[1..];
                if self.skipping_long_line {
                    self.skipping_long_line = false;
                    self.partial.clear();
                    continue;
                }
                let whole: &[u8] = if self.partial.is_empty() {
                    line
                } else {
                    self.partial.extend_from_slice(line);
                    &self.partial
                };
                let whole = whole.strip_suffix(b"\r").unwrap_or(whole);
                if !whole.iter().all(u8::is_ascii_whitespace) {
                    each(TailItem::Line(whole));
                }
                self.partial.clear();
            }
            if !self.skipping_long_line {
                self.partial.extend_from_slice(rest);
                if self.partial.len() > MAX_LINE_BYTES {
                    self.partial = Vec::new();
                    self.skipping_long_line = true;
                }
            }
        }
        // A followed file keeps no buffer between reads beyond its partial last line: a
        // long line that passed through gives its memory back (thousands of files each
        // keeping their longest line's capacity would make memory grow with history).
        if self.partial.is_empty() {
            self.partial = Vec::new();
        } else {
            self.partial.shrink_to_fit();
        }
        Ok(())
    }
}

/// How much of a file is read at a time.
pub const READ_CHUNK_BYTES: usize = 256 * 1024;

/// One item of [`JsonlTail::read_each`].
#[derive(Debug)]
pub enum TailItem<'a> {
    /// The file was truncated or replaced: what follows starts again from its beginning.
    Restarted,
    /// A complete line, without its newline (and without a `\r` before it).
    Line(&'a [u8]),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(path: &Path, bytes: &[u8]) {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        file.write_all(bytes).unwrap();
    }

    fn lines(read: &TailRead) -> Vec<&str> {
        read.lines
            .iter()
            .map(|l| std::str::from_utf8(l).unwrap())
            .collect()
    }

    #[test]
    fn appends_are_read_once_and_a_partial_line_waits_for_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        append(&path, b"{\"a\":1}\n{\"b\":");
        let mut tail = JsonlTail::new(&path);
        assert_eq!(lines(&tail.read_new().unwrap()), ["{\"a\":1}"]);
        assert!(tail.read_new().unwrap().lines.is_empty());
        append(&path, b"2}\r\n\n{\"c\":3}\n");
        assert_eq!(lines(&tail.read_new().unwrap()), ["{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn truncation_and_replacement_start_again_from_the_beginning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        append(&path, b"{\"a\":1}\n{\"b\":2}\n");
        let mut tail = JsonlTail::new(&path);
        assert_eq!(tail.read_new().unwrap().lines.len(), 2);
        std::fs::write(&path, b"{\"x\":1}\n").unwrap();
        let read = tail.read_new().unwrap();
        assert!(read.restarted);
        assert_eq!(lines(&read), ["{\"x\":1}"]);
        // Replaced by a new file of the same length (new inode).
        let other = dir.path().join("new.jsonl");
        std::fs::write(&other, b"{\"y\":1}\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let read = tail.read_new().unwrap();
        assert!(read.restarted);
        assert_eq!(lines(&read), ["{\"y\":1}"]);
    }

    #[test]
    fn a_deleted_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let mut tail = JsonlTail::new(dir.path().join("gone.jsonl"));
        assert_eq!(
            tail.read_new().unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}

#[cfg(test)]
mod fuzz {
    //! Any split of a file's bytes into appends yields the same complete lines as reading it whole.
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn appends_in_any_chunks_give_the_same_lines(bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), Just(b'\r'), any::<u8>()], 0..400), cuts in proptest::collection::vec(0usize..400, 0..8)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f.jsonl");
            std::fs::write(&path, b"").unwrap();
            let mut tail = JsonlTail::new(&path);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.push(bytes.len());
            cuts.sort();
            let mut chunked = Vec::new();
            let mut start = 0;
            for cut in cuts {
                let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
                file.write_all(&bytes[start..cut]).unwrap();
                start = cut;
                chunked.extend(tail.read_new().unwrap().lines);
            }
            let mut whole_tail = JsonlTail::new(&path);
            let whole = whole_tail.read_new().unwrap().lines;
            prop_assert_eq!(chunked, whole);
        }
    }
}

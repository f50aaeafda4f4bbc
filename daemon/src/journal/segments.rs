//! Segment files: `seg-<first seq, 16 digits>.ndjson` in the journal folder, one canonical entry a line; listing them in order and reading a segment's lines with their line numbers and whether the last one was cut.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A segment file and the `seq` its name says it starts at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub path: PathBuf,
    pub first_seq: u64,
}

impl Segment {
    /// The file name relative to the journal folder.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The file name of the segment starting at `first_seq`.
pub fn segment_name(first_seq: u64) -> String {
    format!("seg-{first_seq:016}.ndjson")
}

/// The `seq` a segment file name says, if it is one.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".ndjson")?;
    (digits.len() == 16 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The segments in `dir`, oldest first.
pub fn list(dir: &Path) -> io::Result<Vec<Segment>> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if let Some(first_seq) = name.to_str().and_then(parse_segment_name) {
            segments.push(Segment {
                path: entry.path(),
                first_seq,
            });
        }
    }
    segments.sort_by_key(|s| s.first_seq);
    Ok(segments)
}

/// One line of a segment.
#[derive(Debug)]
pub struct Line {
    /// 1-based.
    pub number: u64,
    /// Byte offset of the line's start in the file.
    pub offset: u64,
    /// Without the newline.
    pub bytes: Vec<u8>,
    /// Whether a newline ended it (false only for a cut last line).
    pub complete: bool,
}

/// Reads a segment's lines one at a time, up to the end of its data: the file's end, or
/// its first NUL byte when only NUL bytes follow it (the reserve of a segment written
/// through a map, docs/journal.md). Bytes other than NUL after a NUL are read as lines, so
/// that a verifier finds them.
pub struct Lines {
    reader: BufReader<fs::File>,
    number: u64,
    offset: u64,
    ended: bool,
}

/// Whether the file holds only NUL bytes from `from` to its end.
fn only_nul_from(file: &fs::File, from: u64) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut at = from;
    loop {
        let n = file.read_at(&mut chunk, at)?;
        if n == 0 {
            return Ok(true);
        }
        if chunk[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
}

impl Lines {
    pub fn open(path: &Path) -> io::Result<Lines> {
        Ok(Lines {
            reader: BufReader::with_capacity(256 * 1024, fs::File::open(path)?),
            number: 0,
            offset: 0,
            ended: false,
        })
    }

    /// Starts reading at byte `offset` (the start of a line), counting lines from `number`.
    pub fn open_at(path: &Path, offset: u64, number: u64) -> io::Result<Lines> {
        let mut file = fs::File::open(path)?;
        file.seek(SeekFrom::Start(offset))?;
        Ok(Lines {
            reader: BufReader::with_capacity(256 * 1024, file),
            number,
            offset,
            ended: false,
        })
    }
}

impl Iterator for Lines {
    type Item = io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        let mut bytes = Vec::new();
        match self.reader.read_until(b'\n', &mut bytes) {
            Ok(0) => None,
            Ok(n) => {
                let offset = self.offset;
                if let Some(nul) = bytes.iter().position(|&b| b == 0) {
                    match only_nul_from(self.reader.get_ref(), offset + nul as u64) {
                        Ok(true) => {
                            // The reserve: the data ended here (a line before it was cut).
                            self.ended = true;
                            if nul == 0 {
                                return None;
                            }
                            self.number += 1;
                            bytes.truncate(nul);
                            return Some(Ok(Line {
                                number: self.number,
                                offset,
                                bytes,
                                complete: false,
                            }));
                        }
                        Ok(false) => {}
                        Err(error) => return Some(Err(error)),
                    }
                }
                self.number += 1;
                self.offset += n as u64;
                let complete = bytes.last() == Some(&b'\n');
                if complete {
                    bytes.pop();
                }
                Some(Ok(Line {
                    number: self.number,
                    offset,
                    bytes,
                    complete,
                }))
            }
            Err(error) => Some(Err(error)),
        }
    }
}

/// The end of a segment: its last complete line, where that line ends (where the file
/// should end), and where its data ends (after its last byte that is not NUL: a segment
/// being written through a map ends in a NUL reserve, docs/journal.md). `end < data_end`
/// means the last line was cut.
#[derive(Debug, PartialEq, Eq)]
pub struct SegmentEnd {
    pub last_line: Option<Vec<u8>>,
    pub end: u64,
    pub data_end: u64,
}

/// The last complete line of a file and where the file should end: after that line.
/// `None` for the line when the file holds no complete line.
pub fn last_complete_line(path: &Path) -> io::Result<(Option<Vec<u8>>, u64)> {
    let found = segment_end(path)?;
    Ok((found.last_line, found.end))
}

/// [`SegmentEnd`] of the segment at `path`.
pub fn segment_end(path: &Path) -> io::Result<SegmentEnd> {
    let mut file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut window = 64 * 1024u64;
    let mut data_end = None;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buffer = Vec::with_capacity((len - start) as usize);
        file.by_ref().take(len - start).read_to_end(&mut buffer)?;
        // The reserve after the data: NUL bytes only.
        let data = match (data_end, buffer.iter().rposition(|&b| b != 0)) {
            (Some(end), _) => end,
            (None, Some(last)) => start + last as u64 + 1,
            (None, None) if start == 0 => 0,
            (None, None) => {
                window *= 4;
                continue;
            }
        };
        data_end = Some(data);
        buffer.truncate((data - start) as usize);
        // Where complete lines end: after the last newline.
        let Some(last_newline) = buffer.iter().rposition(|&b| b == b'\n') else {
            if start == 0 {
                return Ok(SegmentEnd {
                    last_line: None,
                    end: 0,
                    data_end: data,
                });
            }
            window *= 4;
            continue;
        };
        let end = start + last_newline as u64 + 1;
        let line_start = buffer[..last_newline]
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|i| i + 1);
        let line = match line_start {
            Some(i) => buffer[i..last_newline].to_vec(),
            None if start == 0 => buffer[..last_newline].to_vec(),
            None => {
                window *= 4;
                continue;
            }
        };
        return Ok(SegmentEnd {
            last_line: Some(line),
            end,
            data_end: data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        assert_eq!(segment_name(42), "seg-0000000000000042.ndjson");
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        assert_eq!(parse_segment_name("seg-42.ndjson"), None);
        assert_eq!(parse_segment_name("seg-00000000000000x2.ndjson"), None);
        let dir = tempfile::tempdir().unwrap();
        for name in [segment_name(9), segment_name(1), "notes.txt".into()] {
            fs::write(dir.path().join(name), "").unwrap();
        }
        let listed: Vec<u64> = list(dir.path())
            .unwrap()
            .iter()
            .map(|s| s.first_seq)
            .collect();
        assert_eq!(listed, [1, 9]);
    }

    #[test]
    fn a_nul_reserve_ends_the_data_and_bytes_after_a_nul_are_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let read = |path: &Path| -> Vec<(Vec<u8>, bool)> {
            Lines::open(path)
                .unwrap()
                .map(|l| l.unwrap())
                .map(|l| (l.bytes, l.complete))
                .collect()
        };
        let reserve = vec![0u8; 200_000];
        fs::write(&path, [b"one\ntwo\n".as_slice(), &reserve].concat()).unwrap();
        assert_eq!(
            read(&path),
            [(b"one".to_vec(), true), (b"two".to_vec(), true)]
        );
        assert_eq!(
            segment_end(&path).unwrap(),
            SegmentEnd {
                last_line: Some(b"two".to_vec()),
                end: 8,
                data_end: 8
            }
        );
        // A line cut by a crash, then the reserve.
        fs::write(&path, [b"one\ntw".as_slice(), &reserve].concat()).unwrap();
        assert_eq!(
            read(&path),
            [(b"one".to_vec(), true), (b"tw".to_vec(), false)]
        );
        assert_eq!(
            segment_end(&path).unwrap(),
            SegmentEnd {
                last_line: Some(b"one".to_vec()),
                end: 4,
                data_end: 6
            }
        );
        // Nothing but the reserve.
        fs::write(&path, &reserve).unwrap();
        assert!(read(&path).is_empty());
        assert_eq!(
            segment_end(&path).unwrap(),
            SegmentEnd {
                last_line: None,
                end: 0,
                data_end: 0
            }
        );
        // Data after NUL bytes is not a reserve: it is read, NUL bytes and all.
        fs::write(&path, b"one\n\0\0two\n").unwrap();
        assert_eq!(
            read(&path),
            [(b"one".to_vec(), true), (b"\0\0two".to_vec(), true)]
        );
    }

    #[test]
    fn the_last_complete_line_ignores_a_cut_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        fs::write(&path, "one\ntwo\nthr").unwrap();
        assert_eq!(
            last_complete_line(&path).unwrap(),
            (Some(b"two".to_vec()), 8)
        );
        fs::write(&path, "only\n").unwrap();
        assert_eq!(
            last_complete_line(&path).unwrap(),
            (Some(b"only".to_vec()), 5)
        );
        fs::write(&path, "cut").unwrap();
        assert_eq!(last_complete_line(&path).unwrap(), (None, 0));
        let long = "x".repeat(200_000);
        fs::write(&path, format!("{long}\n{long}")).unwrap();
        assert_eq!(
            last_complete_line(&path).unwrap(),
            (Some(long.clone().into_bytes()), 200_001)
        );
        let lines: Vec<(u64, bool)> = Lines::open(&path)
            .unwrap()
            .map(|l| l.unwrap())
            .map(|l| (l.number, l.complete))
            .collect();
        assert_eq!(lines, [(1, true), (2, false)]);
    }
}

//! The pending-text log: prompt texts appended (through a shared map, as the segment is: a copy each, no thread woken) to `blobs/pending-<n>` as drives are accepted, so that a text is in a file from that moment, until the sync thread has turned them into `blobs/sha256/<hex>` files on the disk and removes the log; read back at start (recovery) and by `koru verify` and the export.
//!
//! A record is a header line `<sha256 hex> <bytes>\n`, then the text's bytes, then `\n`.
//! A record cut by a crash (the last one) is ignored: it is the text of a drive whose entry
//! was never written (the text goes to the log before its entry goes to the segment). A log
//! being written, or left by a crash, ends in NUL bytes (the map's reserve): no record
//! header, so reading stops there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::canonical::sha256_hex;

/// File name prefix of pending-text logs in `blobs/`.
const PREFIX: &str = "pending-";

/// The pending-text log of generation `generation` in the journal folder `dir`.
pub fn log_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join("blobs").join(format!("{PREFIX}{generation}"))
}

/// Appends one record for `text` to `out`.
pub fn encode_record(out: &mut Vec<u8>, digest_hex: &str, text: &str) {
    out.extend_from_slice(digest_hex.as_bytes());
    out.push(b' ');
    out.extend_from_slice(itoa::Buffer::new().format(text.len()).as_bytes());
    out.push(b'\n');
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
}

/// The records of one log's bytes, in order, as `(digest, text)`; a record whose text
/// does not match its digest is left out (a verifier finds no text for it, as if it were
/// absent), and reading stops at the first record that is cut or malformed.
pub fn decode_records(bytes: &[u8]) -> Vec<(String, String)> {
    let mut records = Vec::new();
    let mut rest = bytes;
    while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
        let Ok(header) = std::str::from_utf8(&rest[..newline]) else {
            break;
        };
        let Some((digest, length)) = header.split_once(' ') else {
            break;
        };
        let Ok(length) = length.parse::<usize>() else {
            break;
        };
        let body = &rest[newline + 1..];
        if digest.len() != 64 || body.len() < length + 1 || body[length] != b'\n' {
            break;
        }
        if let Ok(text) = std::str::from_utf8(&body[..length]) {
            if sha256_hex(text.as_bytes()) == digest {
                records.push((digest.to_string(), text.to_string()));
            }
        }
        rest = &body[length + 1..];
    }
    records
}

/// The pending-text logs in the journal folder `dir`, oldest generation first.
pub fn logs(dir: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir.join("blobs")) else {
        return Vec::new();
    };
    let mut found: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let generation = name.to_str()?.strip_prefix(PREFIX)?.parse().ok()?;
            Some((generation, entry.path()))
        })
        .collect();
    found.sort();
    found
}

/// Every text in the pending-text logs of `dir`, by digest (what a verifier reads when a
/// blob file is absent or empty: the daemon had not turned it into its file yet).
pub fn texts(dir: &Path) -> HashMap<String, String> {
    texts_of(&logs(dir))
}

/// Every text in the given logs (as [`logs`] lists them), by digest.
pub fn texts_of(logs: &[(u64, PathBuf)]) -> HashMap<String, String> {
    logs.iter()
        .filter_map(|(_, path)| std::fs::read(path).ok())
        .flat_map(|bytes| decode_records(&bytes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_cut_or_forged_one_is_not_read() {
        let texts = ["Fix the bug ✓", "two\nlines\n", "", "emoji 🦀 and CJK 漢字"];
        let mut log = Vec::new();
        for text in texts {
            encode_record(&mut log, &sha256_hex(text.as_bytes()), text);
        }
        let read: Vec<String> = decode_records(&log).into_iter().map(|(_, t)| t).collect();
        assert_eq!(read, texts);

        // A crash cut the last record: the ones before it stand.
        for cut in 1..12 {
            let read = decode_records(&log[..log.len() - cut]);
            assert_eq!(read.len(), 3, "cut {cut}");
        }
        // A record whose text does not match its digest gives no text; the rest still read.
        let mut forged = Vec::new();
        encode_record(&mut forged, &sha256_hex(b"the real one"), "an edited one");
        encode_record(&mut forged, &sha256_hex(b"next"), "next");
        let read = decode_records(&forged);
        assert_eq!(read, [(sha256_hex(b"next"), "next".to_string())]);
        // A log being written (or left by a crash) ends in its map's NUL reserve, also
        // in the middle of a record the crash cut.
        let mut live = log.clone();
        live.resize(log.len() + 4096, 0);
        assert_eq!(decode_records(&live).len(), 4);
        let mut cut = log[..log.len() - 3].to_vec();
        cut.resize(cut.len() + 4096, 0);
        assert_eq!(decode_records(&cut).len(), 3);
        // Garbage is not a record.
        assert!(decode_records(b"not a header\n").is_empty());
        assert!(decode_records(b"").is_empty());
    }

    #[test]
    fn logs_are_listed_by_generation_and_read_together() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("blobs/sha256")).unwrap();
        for (generation, text) in [(10u64, "ten"), (2, "two")] {
            let mut log = Vec::new();
            encode_record(&mut log, &sha256_hex(text.as_bytes()), text);
            std::fs::write(log_path(dir.path(), generation), log).unwrap();
        }
        std::fs::write(dir.path().join("blobs/pending-x"), "ignored").unwrap();
        let listed: Vec<u64> = logs(dir.path()).into_iter().map(|(g, _)| g).collect();
        assert_eq!(listed, [2, 10]);
        let all = texts(dir.path());
        assert_eq!(all[&sha256_hex(b"two")], "two");
        assert_eq!(all[&sha256_hex(b"ten")], "ten");
    }
}

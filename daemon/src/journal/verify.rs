//! Checking a journal folder (`koru verify`, `journal.verify`): every entry's seal, the `seq` order, the `prev_hash` links across segments, checkpoints left by retention, and the text blobs (prompts, replies) the chain names; stops at the first bad entry and says what is wrong with it.

use std::collections::BTreeMap;
use std::path::Path;

use koru_protocol::{BlobCounts, VerifyProblem, VerifyProblemKind, VerifyReport, VerifyVerdict};
use serde_json::Value;

use super::canonical::{canonical, sha256_hex, Sealer, GENESIS};
use super::segments::{self, Lines, Segment};
use super::{blob_path, KIND_CHAT_ITEM, KIND_LEDGER_OPENED, KIND_PRUNED};

/// The fields every entry has, read from one line.
struct Parsed {
    seq: u64,
    prev_hash: String,
    entry_hash: String,
    object: serde_json::Map<String, Value>,
}

/// Where in the files a problem is.
struct Place<'a> {
    segment: &'a Segment,
    line: u64,
}

fn problem(
    kind: VerifyProblemKind,
    seq: Option<u64>,
    place: Option<&Place>,
    message: String,
) -> VerifyProblem {
    VerifyProblem {
        kind,
        seq,
        segment: place.map(|p| p.segment.name()),
        line: place.map(|p| p.line),
        message,
    }
}

/// Checks the journal in `dir`. `key` is the HMAC key for a keyed journal (`None`: the
/// journal must not be keyed, or the report says it needs one).
pub fn verify(dir: &Path, key: Option<&[u8]>) -> VerifyReport {
    let mut report = VerifyReport {
        dir: dir.display().to_string(),
        verdict: VerifyVerdict::Intact,
        entries: 0,
        first_seq: None,
        last_seq: None,
        head: None,
        segments: 0,
        keyed: false,
        pruned_through: None,
        problem: None,
        blobs: BlobCounts::default(),
        ledger: None,
    };
    let unusable = |mut report: VerifyReport, message: String| {
        report.verdict = VerifyVerdict::Unusable;
        report.problem = Some(problem(VerifyProblemKind::Unusable, None, None, message));
        report
    };
    if !dir.is_dir() {
        return unusable(report, format!("{} is not a folder", dir.display()));
    }
    let segments = match segments::list(dir) {
        Ok(segments) => segments,
        Err(error) => return unusable(report, format!("cannot list {}: {error}", dir.display())),
    };
    if segments.is_empty() {
        return unusable(
            report,
            format!("no journal segments (seg-*.ndjson) in {}", dir.display()),
        );
    }
    report.segments = segments.len() as u64;

    let mut chain = Chain::default();
    let mut prompts: BTreeMap<String, (u64, u64)> = BTreeMap::new(); // digest -> (bytes, first seq)
    'segments: for (index, segment) in segments.iter().enumerate() {
        let lines = match Lines::open(&segment.path) {
            Ok(lines) => lines,
            Err(error) => {
                return unusable(
                    report,
                    format!("cannot read {}: {error}", segment.path.display()),
                )
            }
        };
        for line in lines {
            let line = match line {
                Ok(line) => line,
                Err(error) => {
                    return unusable(
                        report,
                        format!("cannot read {}: {error}", segment.path.display()),
                    )
                }
            };
            let place = Place {
                segment,
                line: line.number,
            };
            match chain.check(&line.bytes, line.complete, &place, key, &segments[index..]) {
                Ok(parsed) => {
                    note_ledger(&mut report, &parsed);
                    // A drive's prompt, and a reply its chat recorded (`drive_outcome_recorded`).
                    for text in ["prompt", "reply"].map(|key| parsed.object.get(key)) {
                        if let Some((Some(digest), Some(bytes))) = text.map(|text| {
                            (
                                text.get("sha256").and_then(Value::as_str),
                                text.get("bytes").and_then(Value::as_u64),
                            )
                        }) {
                            prompts
                                .entry(digest.to_string())
                                .or_insert((bytes, parsed.seq));
                        }
                    }
                }
                Err(Stop::Problem(found)) => {
                    let last = index + 1 == segments.len();
                    if found.kind == VerifyProblemKind::Truncated
                        && last
                        && still_being_written(&segment.path, line.offset + line.bytes.len() as u64)
                    {
                        // A live journal: the daemon is writing this line right now. The
                        // check covers what was complete when it was read.
                        break 'segments;
                    }
                    report.problem = Some(found);
                    break 'segments;
                }
                Err(Stop::Unusable(message)) => {
                    report.keyed = chain.keyed.unwrap_or(false);
                    return unusable(report, message);
                }
            }
        }
    }
    report.entries = chain.entries;
    report.first_seq = chain.first_seq;
    report.last_seq = chain.expected_seq.map(|s| s - 1);
    report.head = chain.expected_prev.clone();
    report.keyed = chain.keyed.unwrap_or(false);
    if report.problem.is_none() {
        if let Some((through, hash)) = &chain.anchor {
            match chain.checkpoints.iter().find(|(seq, _)| seq == through) {
                Some((_, vouched)) if vouched == hash => report.pruned_through = Some(*through),
                Some(_) => {
                    report.problem = Some(problem(
                        VerifyProblemKind::Spliced,
                        chain.first_seq,
                        None,
                        format!(
                            "the first entry (seq {}) does not continue the chain its checkpoint vouches for",
                            through + 1
                        ),
                    ))
                }
                None => {
                    report.problem = Some(problem(
                        VerifyProblemKind::Deleted,
                        Some(1),
                        None,
                        format!(
                            "entries 1–{through} are missing and no checkpoint says they were pruned"
                        ),
                    ))
                }
            }
        }
    }
    if report.entries == 0 && report.problem.is_none() {
        return unusable(
            report,
            format!("the journal in {} has no entries", dir.display()),
        );
    }
    // The prompts the chain names.
    report.blobs.referenced = prompts.len() as u64;
    // Texts a running (or stopped) daemon has not put in their blob files yet: read only
    // when a blob is missing, and checked against their digest as they are read.
    let mut pending: Option<std::collections::HashMap<String, String>> = None;
    for (digest, (bytes, seq)) in &prompts {
        let read = match std::fs::read(blob_path(dir, digest)) {
            Ok(content) if !content.is_empty() || *bytes == 0 => Ok(content),
            _ => pending
                .get_or_insert_with(|| super::pending::texts(dir))
                .get(digest)
                .map(|text| text.clone().into_bytes())
                .ok_or(()),
        };
        match read {
            Ok(content) => {
                if content.len() as u64 == *bytes && sha256_hex(&content) == *digest {
                    report.blobs.present += 1;
                } else if report.problem.is_none() {
                    report.problem = Some(problem(
                        VerifyProblemKind::BlobMismatch,
                        Some(*seq),
                        None,
                        format!(
                            "the text blob blobs/sha256/{digest} ({} bytes) does not match the digest and length ({bytes} bytes) the entry records",
                            content.len()
                        ),
                    ));
                }
            }
            // Deleted (privacy), never written (digest mode), or created and not written
            // yet with no pending text (the daemon stopped in between): no text.
            Err(()) => report.blobs.absent += 1,
        }
    }
    if report.problem.is_some() {
        report.verdict = VerifyVerdict::Tampered;
    }
    report
}

enum Stop {
    Problem(VerifyProblem),
    Unusable(String),
}

/// Where the chain is while reading it.
#[derive(Default)]
struct Chain {
    entries: u64,
    first_seq: Option<u64>,
    expected_seq: Option<u64>,
    expected_prev: Option<String>,
    keyed: Option<bool>,
    /// Where a pruned journal starts: (seq before the first entry, the first entry's prev_hash).
    anchor: Option<(u64, String)>,
    /// `journal_pruned` entries: (through_seq, through_hash).
    checkpoints: Vec<(u64, String)>,
    /// The last entries' hashes by seq, to tell a foreign entry repeating a seq from a
    /// reordered one.
    recent: std::collections::VecDeque<(u64, String)>,
}

/// How many recent entries [`Chain::recent`] keeps.
const RECENT: usize = 1024;

impl Chain {
    fn check(
        &mut self,
        bytes: &[u8],
        complete: bool,
        place: &Place,
        key: Option<&[u8]>,
        rest: &[Segment],
    ) -> Result<Parsed, Stop> {
        let expected = self.expected_seq;
        let fail = |kind, message: String| {
            Err(Stop::Problem(problem(kind, expected, Some(place), message)))
        };
        if !complete {
            return fail(
                VerifyProblemKind::Truncated,
                format!(
                    "the file ends in the middle of a line ({} bytes without a newline)",
                    bytes.len()
                ),
            );
        }
        let parsed = match parse(bytes) {
            Ok(parsed) => parsed,
            Err(why) => {
                return fail(
                    VerifyProblemKind::Malformed,
                    format!("not a journal entry: {why}"),
                )
            }
        };
        let seq = parsed.seq;
        let at = |kind, message: String| {
            Err(Stop::Problem(problem(
                kind,
                Some(seq),
                Some(place),
                message,
            )))
        };
        // The seal.
        let keyed = parsed.entry_hash.starts_with("hmac-sha256:");
        if !keyed && !parsed.entry_hash.starts_with("sha256:") {
            return at(
                VerifyProblemKind::Malformed,
                format!(
                    "entry_hash {:?} names no known algorithm",
                    parsed.entry_hash
                ),
            );
        }
        match self.keyed {
            None => self.keyed = Some(keyed),
            Some(was) if was != keyed => {
                return at(
                    VerifyProblemKind::Spliced,
                    "this entry is sealed differently (keyed / not keyed) from the ones before it"
                        .into(),
                )
            }
            Some(_) => {}
        }
        let sealer = if keyed {
            match key {
                Some(key) => Sealer::Hmac(key.to_vec()),
                None => {
                    return Err(Stop::Unusable(
                        "the journal is keyed (HMAC-SHA256): set KORU_JOURNAL_HMAC_KEY to the key it was written with".into(),
                    ))
                }
            }
        } else {
            Sealer::Sha256
        };
        let mut unsealed = parsed.object.clone();
        unsealed.remove("entry_hash");
        let body = canonical(&Value::Object(unsealed));
        if sealer.seal(&body) != parsed.entry_hash {
            if keyed && self.entries == 0 {
                return at(
                    VerifyProblemKind::WrongKey,
                    "the first entry's HMAC does not match: the key is not the one the journal was written with (or this entry was edited)".into(),
                );
            }
            return at(
                VerifyProblemKind::Edited,
                format!(
                    "the entry (kind {:?}) does not match its entry_hash: its content was changed",
                    kind_of(&parsed)
                ),
            );
        }
        if canonical(&Value::Object(parsed.object.clone())) != bytes {
            return at(
                VerifyProblemKind::Edited,
                "the line is not in canonical form (bytes were changed without changing the values)".into(),
            );
        }
        // Its place in the chain.
        match expected {
            None => {
                if seq == 1 {
                    if parsed.prev_hash != GENESIS {
                        return at(
                            VerifyProblemKind::Spliced,
                            "the first entry does not start a chain (its prev_hash is not the genesis value)".into(),
                        );
                    }
                } else {
                    self.anchor = Some((seq - 1, parsed.prev_hash.clone()));
                }
                self.first_seq = Some(seq);
            }
            Some(expected) if seq == expected => {
                if Some(&parsed.prev_hash) != self.expected_prev.as_ref() {
                    return at(
                        VerifyProblemKind::Spliced,
                        format!("entry {seq} does not link to entry {} (prev_hash differs): it comes from another chain", seq - 1),
                    );
                }
            }
            Some(expected)
                if seq < expected
                    && self
                        .recent
                        .iter()
                        .any(|(s, hash)| *s == seq && *hash != parsed.entry_hash) =>
            {
                return Err(Stop::Problem(problem(
                    VerifyProblemKind::Spliced,
                    Some(expected),
                    Some(place),
                    format!("an entry {seq} that is not this chain's entry {seq} was put in where entry {expected} should be"),
                )));
            }
            Some(expected) => {
                let later = appears_later(rest, place, expected);
                let (kind, message) = match (seq > expected, later) {
                    (_, true) => (
                        VerifyProblemKind::Reordered,
                        format!("entry {seq} comes where entry {expected} should; entry {expected} is further on"),
                    ),
                    (true, false) => (
                        VerifyProblemKind::Deleted,
                        if seq == expected + 1 {
                            format!("entry {expected} is missing")
                        } else {
                            format!("entries {expected}–{} are missing", seq - 1)
                        },
                    ),
                    (false, false) => (
                        VerifyProblemKind::Spliced,
                        format!("entry {seq} appears again where entry {expected} should be: it comes from elsewhere"),
                    ),
                };
                return Err(Stop::Problem(problem(
                    kind,
                    Some(expected),
                    Some(place),
                    message,
                )));
            }
        }
        if kind_of(&parsed) == KIND_PRUNED {
            if let (Some(through), Some(hash)) = (
                parsed.object.get("through_seq").and_then(Value::as_u64),
                parsed.object.get("through_hash").and_then(Value::as_str),
            ) {
                self.checkpoints.push((through, hash.to_string()));
            }
        }
        self.entries += 1;
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((seq, parsed.entry_hash.clone()));
        self.expected_seq = Some(seq + 1);
        self.expected_prev = Some(parsed.entry_hash.clone());
        Ok(parsed)
    }
}

/// A ledger is a chain whose seq 1 is `ledger_opened`: the report says whose, and counts
/// its `chat_item` entries.
fn note_ledger(report: &mut VerifyReport, parsed: &Parsed) {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_string();
    match kind_of(parsed) {
        KIND_LEDGER_OPENED if parsed.seq == 1 => {
            let source = parsed.object.get("source");
            report.ledger = Some(koru_protocol::LedgerInfo {
                store: text(parsed.object.get("store")),
                chat_id: text(parsed.object.get("chat_id")),
                source: text(source.and_then(|s| s.get("file")).or(source)),
                items: 0,
            });
        }
        KIND_CHAT_ITEM => {
            if let Some(ledger) = &mut report.ledger {
                ledger.items += 1;
            }
        }
        _ => {}
    }
}

fn kind_of(parsed: &Parsed) -> &str {
    parsed
        .object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let Value::Object(object) = value else {
        return Err("not a JSON object".into());
    };
    let seq = object.get("seq").and_then(Value::as_u64).ok_or("no seq")?;
    let text = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(format!("no {name}"))
    };
    let prev_hash = text("prev_hash")?;
    let entry_hash = text("entry_hash")?;
    text("kind")?;
    Ok(Parsed {
        seq,
        prev_hash,
        entry_hash,
        object,
    })
}

/// Whether the file grows past `seen` within a moment: a line being written, not a cut one.
fn still_being_written(path: &Path, seen: u64) -> bool {
    use std::os::unix::fs::FileExt;
    // More data after what was read: a byte at `seen` that is not NUL (a segment written
    // through a map ends in a NUL reserve, so the file's size alone says nothing).
    let grew = || {
        let mut byte = [0u8];
        std::fs::File::open(path)
            .and_then(|file| file.read_at(&mut byte, seen))
            .is_ok_and(|n| n == 1 && byte[0] != 0)
    };
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if grew() {
            return true;
        }
    }
    false
}

/// Whether an entry with `seq` comes after `place` (same segment, later line, or a later
/// segment).
fn appears_later(rest: &[Segment], place: &Place, seq: u64) -> bool {
    for (i, segment) in rest.iter().enumerate() {
        let Ok(lines) = Lines::open(&segment.path) else {
            continue;
        };
        for line in lines.flatten() {
            if i == 0 && line.number <= place.line {
                continue;
            }
            if seq_of(&line.bytes) == Some(seq) {
                return true;
            }
        }
    }
    false
}

/// The `seq` of a line, if it parses.
fn seq_of(bytes: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_slice::<Seq>(bytes).ok().map(|s| s.seq)
}

/// The report as `koru verify` prints it.
pub fn render(report: &VerifyReport) -> String {
    let mut out = String::new();
    let what = if report.ledger.is_some() {
        "audit ledger"
    } else {
        "journal"
    };
    match report.verdict {
        VerifyVerdict::Intact => {
            out.push_str(&format!(
                "✓ {what} intact — {} entries, head {}\n",
                report.entries,
                report.head.as_deref().unwrap_or("-")
            ));
        }
        VerifyVerdict::Tampered => {
            let problem = report.problem.as_ref();
            let kind = problem
                .map(|p| serde_json::to_value(p.kind).unwrap_or_default())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let seq = problem
                .and_then(|p| p.seq)
                .map(|s| format!("seq {s}"))
                .unwrap_or_else(|| "an entry".into());
            let place = problem
                .and_then(|p| Some(format!(" ({}, line {})", p.segment.as_ref()?, p.line?)))
                .unwrap_or_default();
            out.push_str(&format!(
                "✗ {what} NOT intact — first bad entry: {seq}{place}: {kind}\n  {}\n",
                problem.map(|p| p.message.as_str()).unwrap_or("")
            ));
            if report.entries > 0 {
                out.push_str(&format!(
                    "  the {} entries before it check out (last good head {})\n",
                    report.entries,
                    report.head.as_deref().unwrap_or("-")
                ));
            }
        }
        VerifyVerdict::Unusable => {
            out.push_str(&format!(
                "✗ cannot verify {}: {}\n",
                report.dir,
                report
                    .problem
                    .as_ref()
                    .map(|p| p.message.as_str())
                    .unwrap_or("unusable")
            ));
            return out;
        }
    }
    out.push_str(&format!("  folder: {}\n", report.dir));
    if let (Some(first), Some(last)) = (report.first_seq, report.last_seq) {
        out.push_str(&format!(
            "  entries: seq {first}–{last} in {} segment(s){}{}\n",
            report.segments,
            if report.keyed {
                ", HMAC-SHA256 keyed"
            } else {
                ", SHA-256"
            },
            report
                .pruned_through
                .map(|p| format!("; 1–{p} pruned by retention (checkpoint verified)"))
                .unwrap_or_default()
        ));
    }
    if let Some(ledger) = &report.ledger {
        out.push_str(&format!(
            "  an audit ledger of chat {} ({}), read from {}: {} chat items checked\n",
            ledger.chat_id, ledger.store, ledger.source, ledger.items
        ));
        return out;
    }
    out.push_str(&format!(
        "  texts (prompts, replies): {} named, {} kept and matching, {} absent (purged, or --journal-prompts digest; not tampering)\n",
        report.blobs.referenced, report.blobs.present, report.blobs.absent
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::writer::Journal;
    use crate::journal::{JournalConfig, Retention};
    use serde_json::{json, Map};
    use std::path::PathBuf;

    use crate::journal::test_daemon as daemon;

    /// A journal of `drives` accepted-and-ended drives (plus daemon_started), written by the
    /// real writer into `dir`.
    fn write_journal(dir: &Path, sealer: Sealer, drives: usize) -> PathBuf {
        write_journal_at(dir, sealer, drives, 2_000)
    }

    fn write_journal_at(dir: &Path, sealer: Sealer, drives: usize, start_ms: u64) -> PathBuf {
        let mut config = JournalConfig::new(dir.join("journal"));
        config.index_path = dir.join("index.sqlite3");
        config.sealer = sealer;
        config.retain = Retention {
            max_age: None,
            max_bytes: None,
        };
        let mut journal = Journal::open(config, 1_000, &daemon(), Map::new())
            .unwrap()
            .journal;
        for i in 0..drives {
            let prompt = journal.store_prompt(&format!("prompt {i}")).unwrap();
            let mut fields = Map::new();
            fields.insert("drive_id".into(), json!(format!("d_{i}")));
            fields.insert("prompt".into(), prompt);
            journal
                .append(
                    start_ms + i as u64,
                    "drive_accepted",
                    &fields,
                    Some(&daemon()),
                    None,
                )
                .unwrap();
            let mut fields = Map::new();
            fields.insert("drive_id".into(), json!(format!("d_{i}")));
            fields.insert("state".into(), json!("done"));
            journal
                .append(start_ms + 1 + i as u64, "drive_state", &fields, None, None)
                .unwrap();
        }
        journal.close();
        dir.join("journal")
    }

    fn segment(dir: &Path) -> PathBuf {
        segments::list(dir).unwrap().pop().unwrap().path
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn write_lines(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    fn found(report: &VerifyReport) -> (VerifyVerdict, Option<VerifyProblemKind>, Option<u64>) {
        (
            report.verdict,
            report.problem.as_ref().map(|p| p.kind),
            report.problem.as_ref().and_then(|p| p.seq),
        )
    }

    #[test]
    fn an_untouched_journal_is_intact_with_its_head_and_blobs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_journal(tmp.path(), Sealer::Sha256, 5);
        let report = verify(&dir, None);
        assert_eq!(found(&report), (VerifyVerdict::Intact, None, None));
        assert_eq!(report.entries, 11);
        assert_eq!((report.first_seq, report.last_seq), (Some(1), Some(11)));
        let last: Value = serde_json::from_str(lines(&segment(&dir)).last().unwrap()).unwrap();
        assert_eq!(report.head.as_deref(), last["entry_hash"].as_str());
        assert_eq!((report.blobs.referenced, report.blobs.present), (5, 5));
    }

    #[test]
    fn each_kind_of_tampering_is_named_at_its_seq() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_journal(tmp.path(), Sealer::Sha256, 5);
        let path = segment(&dir);
        let original = lines(&path);
        let check = |name: &str, tampered: Vec<String>, expected: (VerifyProblemKind, u64)| {
            write_lines(&path, &tampered);
            let report = verify(&dir, None);
            assert_eq!(
                found(&report),
                (VerifyVerdict::Tampered, Some(expected.0), Some(expected.1)),
                "{name}: {report:?}"
            );
            write_lines(&path, &original);
        };
        // An edited field (seq 4 is d_1's acceptance).
        let mut edited = original.clone();
        edited[3] = edited[3].replace("d_1", "d_9");
        check("edited", edited, (VerifyProblemKind::Edited, 4));
        // A value changed without changing what it parses to is still an edit.
        let mut spaced = original.clone();
        spaced[3] = spaced[3].replacen("{", "{ ", 1);
        check("spaced", spaced, (VerifyProblemKind::Edited, 4));
        // A deleted line.
        let mut deleted = original.clone();
        deleted.remove(5);
        check("deleted", deleted, (VerifyProblemKind::Deleted, 6));
        // Two lines swapped.
        let mut swapped = original.clone();
        swapped.swap(6, 7);
        check("swapped", swapped, (VerifyProblemKind::Reordered, 7));
        // Lines from another journal put in place of this one's.
        let other = tempfile::tempdir().unwrap();
        let other_dir = write_journal_at(other.path(), Sealer::Sha256, 5, 7_000);
        let foreign = lines(&segment(&other_dir));
        let mut spliced = original.clone();
        spliced[8] = foreign[8].clone();
        check("spliced", spliced, (VerifyProblemKind::Spliced, 9));
        // Another journal's line added in between.
        let mut inserted = original.clone();
        inserted.insert(9, foreign[8].clone());
        check("inserted", inserted, (VerifyProblemKind::Spliced, 10));
        // A file cut in the middle of its last line.
        let text = original.join("\n") + "\n";
        std::fs::write(&path, &text[..text.len() - 40]).unwrap();
        let report = verify(&dir, None);
        assert_eq!(
            found(&report),
            (
                VerifyVerdict::Tampered,
                Some(VerifyProblemKind::Truncated),
                Some(11)
            )
        );
        assert_eq!(report.entries, 10, "the entries before the cut check out");
    }

    #[test]
    fn a_keyed_journal_needs_its_key() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_journal(tmp.path(), Sealer::Hmac(b"right key".to_vec()), 3);
        let report = verify(&dir, Some(b"right key"));
        assert_eq!(found(&report), (VerifyVerdict::Intact, None, None));
        assert!(report.keyed);
        let report = verify(&dir, Some(b"wrong key"));
        assert_eq!(
            found(&report),
            (
                VerifyVerdict::Tampered,
                Some(VerifyProblemKind::WrongKey),
                Some(1)
            )
        );
        let report = verify(&dir, None);
        assert_eq!(report.verdict, VerifyVerdict::Unusable);
        assert!(report
            .problem
            .unwrap()
            .message
            .contains("KORU_JOURNAL_HMAC_KEY"));
        // Re-sealing an edit with plain SHA-256 does not pass for a keyed journal.
        let path = segment(&dir);
        let mut edited = lines(&path);
        let mut entry: Value = serde_json::from_str(&edited[2]).unwrap();
        entry["drive_id"] = json!("d_forged");
        entry.as_object_mut().unwrap().remove("entry_hash");
        let hash = Sealer::Sha256.seal(&canonical(&entry));
        entry["entry_hash"] = json!(hash);
        edited[2] = String::from_utf8(canonical(&entry)).unwrap();
        write_lines(&path, &edited);
        let report = verify(&dir, Some(b"right key"));
        assert_eq!(
            found(&report),
            (
                VerifyVerdict::Tampered,
                Some(VerifyProblemKind::Spliced),
                Some(3)
            )
        );
    }

    #[test]
    fn a_purged_prompt_is_absent_not_tampering_and_a_changed_one_is() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_journal(tmp.path(), Sealer::Sha256, 3);
        let blob = blob_path(&dir, &sha256_hex(b"prompt 1"));
        std::fs::remove_file(&blob).unwrap();
        let report = verify(&dir, None);
        assert_eq!(found(&report), (VerifyVerdict::Intact, None, None));
        assert_eq!((report.blobs.present, report.blobs.absent), (2, 1));
        // Created and never written (the daemon stopped in between): absent too.
        std::fs::write(&blob, "").unwrap();
        let report = verify(&dir, None);
        assert_eq!(found(&report), (VerifyVerdict::Intact, None, None));
        assert_eq!((report.blobs.present, report.blobs.absent), (2, 1));
        // Cut short is a different text.
        std::fs::write(&blob, "prompt").unwrap();
        let report = verify(&dir, None);
        assert_eq!(report.verdict, VerifyVerdict::Tampered);
        std::fs::remove_file(&blob).unwrap();
        std::fs::write(blob_path(&dir, &sha256_hex(b"prompt 2")), "prompt X").unwrap();
        let report = verify(&dir, None);
        assert_eq!(
            found(&report),
            (
                VerifyVerdict::Tampered,
                Some(VerifyProblemKind::BlobMismatch),
                Some(6)
            )
        );
    }

    #[test]
    fn nothing_to_check_is_unusable() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            verify(&tmp.path().join("missing"), None).verdict,
            VerifyVerdict::Unusable
        );
        assert_eq!(verify(tmp.path(), None).verdict, VerifyVerdict::Unusable);
    }
}

//! Checking a journal folder (`koru verify`, `journal.verify`): every entry's seal, the `seq` order, the `prev_hash` links across segments, checkpoints left by retention, and the prompt blobs the chain names; stops at the first bad entry and says what is wrong with it.

use std::collections::BTreeMap;
use std::path::Path;

use koru_protocol::{BlobCounts, VerifyProblem, VerifyProblemKind, VerifyReport, VerifyVerdict};
use serde_json::Value;

use super::canonical::{canonical, sha256_hex, Sealer, GENESIS};
use super::segments::{self, Lines, Segment};
use super::{blob_path, KIND_PRUNED};

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
                    if let Some(prompt) = parsed.object.get("prompt") {
                        if let (Some(digest), Some(bytes)) = (
                            prompt.get("sha256").and_then(Value::as_str),
                            prompt.get("bytes").and_then(Value::as_u64),
                        ) {
                            prompts
                                .entry(digest.to_string())
                                .or_insert((bytes, parsed.seq));
                        }
                    }
                }
                Err(Stop::Problem(found)) => {
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
    for (digest, (bytes, seq)) in &prompts {
        match std::fs::read(blob_path(dir, digest)) {
            Ok(content) => {
                if content.len() as u64 == *bytes && sha256_hex(&content) == *digest {
                    report.blobs.present += 1;
                } else if report.problem.is_none() {
                    report.problem = Some(problem(
                        VerifyProblemKind::BlobMismatch,
                        Some(*seq),
                        None,
                        format!(
                            "the prompt blob blobs/sha256/{digest} ({} bytes) does not match the digest and length ({bytes} bytes) the entry records",
                            content.len()
                        ),
                    ));
                }
            }
            Err(_) => report.blobs.absent += 1,
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
}

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
        self.expected_seq = Some(seq + 1);
        self.expected_prev = Some(parsed.entry_hash.clone());
        Ok(parsed)
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

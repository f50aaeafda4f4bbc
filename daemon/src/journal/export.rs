//! `koru journal export --html`: one self-contained HTML file holding a stretch of the journal and the code that re-verifies it in the recipient's browser.
//!
//! The journal is verified first (`verify.rs`); one that does not verify is not exported.
//! The entries go into the page as their exact lines, inside a JSON block whose every `<`
//! is written `\u003c`, so no entry content can end the block. The page's script
//! (`assets/journal_export/verify.js`) checks them again with the same rules.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use koru_protocol::VerifyVerdict;
use serde::Deserialize;
use serde_json::{json, Value};

use super::canonical::{sha256_hex, GENESIS};
use super::segments::{self, Lines};
use super::{blob_path, verify, JournalError, KIND_DRIVE_ACCEPTED, KIND_DRIVE_OUTCOME_RECORDED};

/// The page's shell, look and checker.
const PAGE: &str = include_str!("../../assets/journal_export/page.html");
const STYLE: &str = include_str!("../../assets/journal_export/page.css");
const SCRIPT: &str = include_str!("../../assets/journal_export/verify.js");

/// What the page says of a drive's prompt whose blob is gone.
const PROMPT_NOT_KEPT: &str =
    "the journal does not keep its text (purged by retention, or --journal-prompts digest)";

/// The `format` the page's data block carries.
pub const FORMAT: &str = "koru-journal-export/1";

/// Which entries an export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every entry.
    All,
    /// The stretch from this drive's `drive_accepted` to its last entry — its `drive_ended`,
    /// or the chat's evidence after it — with its prompt and the reply its chat recorded.
    Drive(String),
    /// Entries at or after this time (Unix ms).
    Since(u64),
}

/// Why an export was not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    #[error("the journal in {dir} does not verify, so it is not exported as proof: first bad entry {at}: {kind} — {message} (`koru verify` says more)")]
    NotIntact {
        dir: PathBuf,
        at: String,
        kind: String,
        message: String,
    },
    #[error("cannot verify the journal in {dir}: {why}")]
    Unverifiable { dir: PathBuf, why: String },
    #[error("drive {drive_id} is not in the journal in {dir}: no drive_accepted entry names it (a wrong id, another journal, or pruned by retention)")]
    UnknownDrive { drive_id: String, dir: PathBuf },
    #[error("no entry of the journal in {dir} is at or after {since}")]
    NothingSince { dir: PathBuf, since: String },
    #[error("the journal in {dir} changed while it was exported ({why}); export again")]
    Changed { dir: PathBuf, why: String },
}

/// Writes the export of `dir` to `out`; returns a one-line summary.
pub fn export_html(
    dir: &Path,
    selection: &Selection,
    key: Option<&[u8]>,
    out: &Path,
) -> Result<String, JournalError> {
    let report = verify::verify(dir, key);
    let problem = report.problem.as_ref();
    match report.verdict {
        VerifyVerdict::Intact => {}
        VerifyVerdict::Tampered => {
            return Err(ExportError::NotIntact {
                dir: dir.to_path_buf(),
                at: problem
                    .and_then(|p| p.seq)
                    .map(|seq| format!("seq {seq}"))
                    .unwrap_or_else(|| "(no seq)".into()),
                kind: problem
                    .and_then(|p| serde_json::to_value(p.kind).ok())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                message: problem.map(|p| p.message.clone()).unwrap_or_default(),
            }
            .into())
        }
        VerifyVerdict::Unusable => {
            return Err(ExportError::Unverifiable {
                dir: dir.to_path_buf(),
                why: problem
                    .map(|p| p.message.clone())
                    .unwrap_or_else(|| "unusable".into()),
            }
            .into())
        }
    }
    // Entries written after the check (the daemon goes on) are left out: the export holds
    // only what was verified.
    let (Some(through_seq), Some(through_head)) = (report.last_seq, report.head.clone()) else {
        return Err(ExportError::Unverifiable {
            dir: dir.to_path_buf(),
            why: "the check found no entries".into(),
        }
        .into());
    };
    let stretch = select(dir, selection, through_seq, &through_head)?;
    let prompt = match selection {
        Selection::Drive(drive_id) => Some(prompt_of(dir, drive_id, &stretch)?),
        _ => None,
    };
    // The reply the drive's chat recorded, when its evidence is in the stretch.
    let reply = match (selection, &stretch.reply) {
        (Selection::Drive(drive_id), Some(reply)) => {
            Some(text_of(dir, drive_id, Some(reply), "reply")?)
        }
        _ => None,
    };
    let exported_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    // A chat's audit ledger (seq 1 is `ledger_opened`) says so, and whose it is.
    let (format, ledger) = match &report.ledger {
        Some(ledger) => (super::LEDGER_FORMAT, serde_json::to_value(ledger).ok()),
        None => (FORMAT, None),
    };
    let meta = json!({
        "format": format,
        "ledger": ledger,
        "koru_version": env!("CARGO_PKG_VERSION"),
        "exported_at_ms": exported_at_ms,
        "journal_dir": std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()).display().to_string(),
        "selection": match selection {
            Selection::All => json!({"kind": "all"}),
            Selection::Since(since_ms) => json!({"kind": "since", "since_ms": since_ms}),
            Selection::Drive(drive_id) => json!({"kind": "drive", "drive_id": drive_id}),
        },
        "anchor": {
            "prev_hash": stretch.first_prev_hash,
            "genesis": stretch.first_seq == 1 && stretch.first_prev_hash == GENESIS,
            "after_seq": stretch.first_seq - 1,
        },
        "entries": stretch.lines.len(),
        "first_seq": stretch.first_seq,
        "last_seq": stretch.last_seq,
        "head": stretch.head,
        "keyed": report.keyed,
        "journal": {
            "last_seq": through_seq,
            "head": through_head,
            "pruned_through": report.pruned_through,
        },
        "prompt": prompt,
        "reply": reply,
    });
    write_private(out, &page(&meta, &stretch.lines))?;
    Ok(format!(
        "wrote {}: {}{} entries (seq {}–{}), head {}, {}{}",
        out.display(),
        if report.ledger.is_some() {
            "the audit ledger's "
        } else {
            ""
        },
        stretch.lines.len(),
        stretch.first_seq,
        stretch.last_seq,
        stretch.head,
        if report.keyed {
            "HMAC-sealed: verifies in any browser given the key"
        } else {
            "verifies in any browser"
        },
        match &prompt {
            Some(p) if p["text"].is_string() => ", the drive's prompt included".to_string(),
            Some(p) => format!(
                ", the drive's prompt not included ({})",
                p["absent"].as_str().unwrap_or("not kept")
            ),
            None => String::new(),
        }
    ))
}

/// The selected entries, as their lines.
#[derive(Debug)]
struct Stretch {
    lines: Vec<String>,
    first_seq: u64,
    first_prev_hash: String,
    last_seq: u64,
    head: String,
    /// The selected drive's `drive_accepted` prompt record: `{sha256, bytes, chars}`.
    prompt: Option<Value>,
    /// The selected drive's last `drive_outcome_recorded` reply: `{sha256, bytes, chars}`.
    reply: Option<Value>,
}

/// Where a drive's stretch ends: its last entry read so far (the evidence of its chat may
/// come after its `drive_ended`).
#[derive(Debug, Clone)]
struct DriveEnd {
    lines: usize,
    last_seq: u64,
    head: String,
}

/// What selection needs of an entry.
#[derive(Deserialize)]
struct EntryFields {
    seq: u64,
    at_ms: u64,
    kind: String,
    prev_hash: String,
    entry_hash: String,
    #[serde(default)]
    drive_id: Option<Value>,
    #[serde(default)]
    prompt: Option<Value>,
    #[serde(default)]
    reply: Option<Value>,
}

/// Reads the lines `selection` names, up to `through_seq` (whose hash must be `through_head`).
fn select(
    dir: &Path,
    selection: &Selection,
    through_seq: u64,
    through_head: &str,
) -> Result<Stretch, JournalError> {
    let changed = |why: String| ExportError::Changed {
        dir: dir.to_path_buf(),
        why,
    };
    let mut stretch: Option<Stretch> = None;
    let mut drive_end: Option<DriveEnd> = None;
    'segments: for segment in segments::list(dir).map_err(JournalError::io("list", dir))? {
        for line in Lines::open(&segment.path).map_err(JournalError::io("read", &segment.path))? {
            let line = line.map_err(JournalError::io("read", &segment.path))?;
            if !line.complete {
                break 'segments;
            }
            let fields: EntryFields = serde_json::from_slice(&line.bytes).map_err(|e| {
                changed(format!(
                    "{} line {} is not an entry: {e}",
                    segment.name(),
                    line.number
                ))
            })?;
            if fields.seq > through_seq {
                break 'segments;
            }
            let of_drive = |id: &str| fields.drive_id.as_ref().and_then(Value::as_str) == Some(id);
            let text = String::from_utf8(line.bytes)
                .map_err(|_| changed(format!("{} line {}", segment.name(), line.number)))?;
            match stretch.as_mut() {
                None => {
                    let starts = match selection {
                        Selection::All => true,
                        Selection::Since(since_ms) => fields.at_ms >= *since_ms,
                        Selection::Drive(id) => fields.kind == KIND_DRIVE_ACCEPTED && of_drive(id),
                    };
                    if starts {
                        stretch = Some(Stretch {
                            lines: vec![text],
                            first_seq: fields.seq,
                            first_prev_hash: fields.prev_hash.clone(),
                            last_seq: fields.seq,
                            head: fields.entry_hash.clone(),
                            prompt: fields.prompt.clone(),
                            reply: None,
                        });
                    }
                }
                Some(stretch) => {
                    // The file was checked a moment ago; a line that does not follow means
                    // it was changed since.
                    if fields.seq != stretch.last_seq + 1 || fields.prev_hash != stretch.head {
                        return Err(changed(format!(
                            "seq {} does not follow seq {}",
                            fields.seq, stretch.last_seq
                        ))
                        .into());
                    }
                    stretch.lines.push(text);
                    stretch.last_seq = fields.seq;
                    stretch.head = fields.entry_hash.clone();
                }
            }
            if let (Selection::Drive(id), Some(stretch)) = (selection, stretch.as_mut()) {
                if of_drive(id) {
                    if fields.kind == KIND_DRIVE_OUTCOME_RECORDED {
                        stretch.reply = fields.reply.clone();
                    }
                    drive_end = Some(DriveEnd {
                        lines: stretch.lines.len(),
                        last_seq: stretch.last_seq,
                        head: stretch.head.clone(),
                    });
                }
            }
        }
    }
    // A drive's stretch ends at its last entry: its `drive_ended`, or the chat's evidence
    // after it.
    if let (Some(stretch), Some(end)) = (stretch.as_mut(), drive_end) {
        stretch.lines.truncate(end.lines);
        stretch.last_seq = end.last_seq;
        stretch.head = end.head;
    }
    let Some(stretch) = stretch else {
        return Err(match selection {
            Selection::Drive(drive_id) => ExportError::UnknownDrive {
                drive_id: drive_id.clone(),
                dir: dir.to_path_buf(),
            },
            Selection::Since(since_ms) => ExportError::NothingSince {
                dir: dir.to_path_buf(),
                since: chrono::DateTime::from_timestamp_millis(*since_ms as i64)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                    .unwrap_or_else(|| format!("{since_ms} ms")),
            },
            Selection::All => changed("no entries left".into()),
        }
        .into());
    };
    if stretch.last_seq == through_seq && stretch.head != through_head {
        return Err(changed(format!(
            "seq {through_seq} is not the entry that was checked"
        ))
        .into());
    }
    Ok(stretch)
}

/// The selected drive's prompt as the page shows it: its text when its blob is kept and
/// matches the recorded digest, else why not.
fn prompt_of(dir: &Path, drive_id: &str, stretch: &Stretch) -> Result<Value, JournalError> {
    text_of(dir, drive_id, stretch.prompt.as_ref(), "prompt")
}

/// A text the chain records by `{sha256, bytes}` (a drive's prompt, the chat's reply), as
/// the page shows it: its text when its blob is kept and matches, else why not.
fn text_of(
    dir: &Path,
    drive_id: &str,
    record: Option<&Value>,
    what: &str,
) -> Result<Value, JournalError> {
    let digest = record
        .and_then(|p| p.get("sha256"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let bytes = record.and_then(|p| p.get("bytes")).and_then(Value::as_u64);
    let mut prompt = json!({
        "drive_id": drive_id,
        "sha256": digest,
        "bytes": bytes,
        "text": null,
        "absent": null,
    });
    let kept = (!digest.is_empty())
        .then(|| fs::read(blob_path(dir, digest)).ok())
        .flatten()
        // An empty blob was created and never written (the daemon stopped): no text.
        .filter(|content| !content.is_empty() || bytes == Some(0))
        // A text the daemon has not put in its blob file yet is in a pending-text log.
        .or_else(|| {
            (!digest.is_empty())
                .then(|| super::pending::texts(dir).remove(digest))
                .flatten()
                .map(String::into_bytes)
        });
    match kept {
        Some(content)
            if content.len() as u64 == bytes.unwrap_or(0) && sha256_hex(&content) == digest =>
        {
            prompt["text"] = match String::from_utf8(content) {
                Ok(text) => json!(text),
                Err(_) => {
                    return Err(ExportError::Changed {
                        dir: dir.to_path_buf(),
                        why: format!("the {what} blob blobs/sha256/{digest} is not UTF-8"),
                    }
                    .into())
                }
            }
        }
        Some(_) => {
            return Err(ExportError::Changed {
                dir: dir.to_path_buf(),
                why: format!("the {what} blob blobs/sha256/{digest} no longer matches its entry"),
            }
            .into())
        }
        None => prompt["absent"] = json!(PROMPT_NOT_KEPT),
    }
    Ok(prompt)
}

/// The page: the shell with its style, the data block and the checker.
fn page(meta: &Value, lines: &[String]) -> String {
    let mut data = String::with_capacity(lines.iter().map(|l| l.len() + 8).sum::<usize>() + 2048);
    data.push_str("{\"export\":");
    data.push_str(&meta.to_string());
    data.push_str(",\n\"lines\":[\n");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            data.push_str(",\n");
        }
        data.push_str(&Value::String(line.clone()).to_string());
    }
    data.push_str("\n]}");
    // `<` only occurs inside JSON strings, where `\u003c` means the same: nothing in the
    // block can close it (`</script>`) or open a comment.
    let data = data.replace('<', "\\u003c");
    PAGE.replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", SCRIPT)
        .replace("{{DATA}}", &data)
}

/// Writes `content` to `path` as a new 0600 file (through a temporary file beside it, so a
/// reader never sees half a page and an old file's mode is not kept).
fn write_private(path: &Path, content: &str) -> Result<(), JournalError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export.html".into());
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temporary = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(JournalError::io("create", &temporary))?;
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(JournalError::io("set the mode of", &temporary))?;
        file.write_all(content.as_bytes())
            .map_err(JournalError::io("write", &temporary))?;
        file.sync_all()
            .map_err(JournalError::io("fsync", &temporary))?;
        fs::rename(&temporary, path).map_err(JournalError::io("write", path))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::canonical::Sealer;
    use crate::journal::{Asker, Journal, JournalConfig, KIND_DRIVE_ENDED, KIND_SESSION_CONNECTED};
    use serde_json::Map;

    const FIRST_PROMPT: &str = "first prompt </script><script>alert(1)</script> é 😀";
    const SECOND_PROMPT: &str = "second prompt";

    fn daemon() -> Asker {
        Asker {
            door: "daemon".into(),
            client: "koru".into(),
            version: "test".into(),
            pid: Some(1),
            uid: 0,
        }
    }

    fn fields(pairs: Value) -> Map<String, Value> {
        pairs.as_object().expect("an object").clone()
    }

    /// A journal in `root/journal`: drives d_a and d_b overlapping, d_c accepted and never
    /// ended. Seq: 1 daemon_started (1000), 2 d_a accepted (2000), 3 d_b accepted (3000),
    /// 4 d_a sent (3500), 5 d_a ended (4000), 6 d_b sent (4500), 7 d_b ended (5000),
    /// 8 session_connected (6000), 9 d_c accepted (7000).
    fn write_journal(root: &Path, sealer: Sealer) -> PathBuf {
        let dir = root.join("journal");
        let mut config = JournalConfig::new(dir.clone());
        config.sealer = sealer;
        config.index_path = root.join("index.sqlite");
        let mut journal = Journal::open(config, 1_000, &daemon(), Map::new())
            .expect("the journal opens")
            .journal;
        let cli = Asker {
            door: "cli".into(),
            client: "koru-cli".into(),
            version: "test".into(),
            pid: Some(42),
            uid: 1000,
        };
        let accept = |journal: &mut Journal, at: u64, drive: &str, prompt: &str| {
            let record = journal.store_prompt(prompt).expect("the prompt is kept");
            journal
                .append(
                    at,
                    KIND_DRIVE_ACCEPTED,
                    &fields(json!({"drive_id": drive, "prompt": record})),
                    Some(&cli),
                    None,
                )
                .expect("appended");
        };
        let append = |journal: &mut Journal, at: u64, kind: &str, body: Value| {
            journal
                .append(at, kind, &fields(body), None, None)
                .expect("appended");
        };
        accept(&mut journal, 2_000, "d_a", FIRST_PROMPT);
        accept(&mut journal, 3_000, "d_b", SECOND_PROMPT);
        append(
            &mut journal,
            3_500,
            "drive_state",
            json!({"drive_id": "d_a", "state": "sent"}),
        );
        append(
            &mut journal,
            4_000,
            KIND_DRIVE_ENDED,
            json!({"drive_id": "d_a", "state": "failed",
                   "blocker": {"code": "x", "message": "</script><!-- a blocker that tries to end the page"}}),
        );
        append(
            &mut journal,
            4_500,
            "drive_state",
            json!({"drive_id": "d_b", "state": "sent"}),
        );
        append(
            &mut journal,
            5_000,
            KIND_DRIVE_ENDED,
            json!({"drive_id": "d_b", "state": "done"}),
        );
        append(
            &mut journal,
            6_000,
            KIND_SESSION_CONNECTED,
            json!({"session_id": "s_1"}),
        );
        accept(&mut journal, 7_000, "d_c", "third, still open");
        journal.close();
        dir
    }

    fn segment_lines(dir: &Path) -> Vec<String> {
        let mut lines = Vec::new();
        for segment in segments::list(dir).unwrap() {
            let text = fs::read_to_string(&segment.path).unwrap();
            lines.extend(text.lines().map(str::to_string));
        }
        lines
    }

    /// The data block of a written page, parsed.
    fn data_of(html: &str) -> Value {
        let open = r#"<script type="application/json" id="journal-data">"#;
        let start = html.find(open).expect("the data block") + open.len();
        let end = start + html[start..].find("</script>").expect("its end");
        serde_json::from_str(&html[start..end]).expect("the data block is JSON")
    }

    fn export(dir: &Path, selection: Selection, key: Option<&[u8]>) -> (String, String, Value) {
        let out = dir.parent().unwrap().join("export.html");
        let summary = export_html(dir, &selection, key, &out).expect("exported");
        let html = fs::read_to_string(&out).unwrap();
        let data = data_of(&html);
        (summary, html, data)
    }

    fn seqs(data: &Value) -> Vec<u64> {
        data["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|line| {
                serde_json::from_str::<Value>(line.as_str().unwrap()).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    fn hash_of(lines: &[String], seq: usize) -> String {
        serde_json::from_str::<Value>(&lines[seq - 1]).unwrap()["entry_hash"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn all_embeds_every_line_byte_for_byte_in_a_private_file() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        let (summary, html, data) = export(&dir, Selection::All, None);
        let lines = segment_lines(&dir);
        assert_eq!(lines.len(), 9);
        let embedded: Vec<&str> = data["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(embedded, lines);
        let head = hash_of(&lines, 9);
        assert_eq!(
            summary,
            format!(
                "wrote {}: 9 entries (seq 1–9), head {head}, verifies in any browser",
                root.path().join("export.html").display()
            )
        );
        let meta = &data["export"];
        assert_eq!(meta["format"], FORMAT);
        assert_eq!(
            meta["anchor"],
            json!({"prev_hash": GENESIS, "genesis": true, "after_seq": 0})
        );
        assert_eq!(
            (&meta["entries"], &meta["first_seq"], &meta["last_seq"]),
            (&json!(9), &json!(1), &json!(9))
        );
        assert_eq!(meta["head"], head);
        assert_eq!(meta["journal"]["head"], head);
        assert_eq!(meta["journal_dir"], dir.display().to_string());
        assert_eq!(meta["selection"], json!({"kind": "all"}));
        assert_eq!(meta["keyed"], false);
        assert!(meta["prompt"].is_null());
        assert!(meta["exported_at_ms"].as_u64().unwrap() > 1_700_000_000_000);
        let mode = fs::metadata(root.path().join("export.html"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // No prompt text in an export that is not of one drive.
        assert!(!html.contains("first prompt"));
    }

    #[test]
    fn nothing_in_an_entry_can_end_the_data_block() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        let (_, html, data) = export(&dir, Selection::Drive("d_a".into()), None);
        let open = r#"<script type="application/json" id="journal-data">"#;
        let start = html.find(open).unwrap() + open.len();
        let end = start + html[start..].find("</script>").unwrap();
        assert!(!html[start..end].contains('<'), "a raw < in the data block");
        // The blocker's `</script><!--` and the prompt's `</script><script>` are in the data,
        // escaped, and come back intact.
        assert!(data["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("</script><!-- a blocker")));
        assert_eq!(data["export"]["prompt"]["text"], FIRST_PROMPT);
        // Exactly the page's own two script blocks, and the checker and style are in.
        assert_eq!(html.matches("</script>").count(), 2);
        assert!(html.contains("function hmacSha256"));
        assert!(html.contains(".verdict[data-verdict=\"tampered\"]"));
        assert!(!html.contains("{{"), "a placeholder left in the page");
    }

    #[test]
    fn the_page_template_has_each_placeholder_once_and_the_script_cannot_close_itself() {
        for placeholder in ["{{STYLE}}", "{{SCRIPT}}", "{{DATA}}"] {
            assert_eq!(PAGE.matches(placeholder).count(), 1, "{placeholder}");
        }
        for (name, text) in [("verify.js", SCRIPT), ("page.css", STYLE)] {
            let lower = text.to_lowercase();
            assert!(
                !lower.contains("</script")
                    && !lower.contains("</style")
                    && !lower.contains("<!--"),
                "{name}"
            );
            assert!(!text.contains("{{"), "{name} holds a placeholder");
        }
        // No network: the page names nothing outside itself.
        for text in [PAGE, SCRIPT, STYLE] {
            assert!(!text.contains("http://") && !text.contains("https://"));
            for call in ["crypto.subtle.", "fetch(", "XMLHttpRequest", "import("] {
                assert!(!text.contains(call), "{call}");
            }
        }
    }

    /// The vectors the browser test also runs through the page's own parser and writer.
    #[test]
    fn the_shared_canonical_vectors_hold_for_serde_json() {
        let file: Value = serde_json::from_str(include_str!(
            "../../assets/journal_export/canonical-vectors.json"
        ))
        .unwrap();
        let vectors = file["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 10);
        for vector in vectors {
            let input = vector["input"].as_str().unwrap();
            let read = serde_json::from_str::<Value>(input);
            match vector["canonical"].as_str() {
                Some(expected) => assert_eq!(
                    String::from_utf8(crate::journal::canonical::canonical(&read.unwrap()))
                        .unwrap(),
                    expected,
                    "{input}"
                ),
                None => assert!(read.is_err(), "{input} should not read"),
            }
        }
    }

    #[test]
    fn a_drive_is_the_stretch_from_its_acceptance_to_its_end_with_only_its_prompt() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        let lines = segment_lines(&dir);

        let (summary, html, data) = export(&dir, Selection::Drive("d_a".into()), None);
        // d_b's acceptance (seq 3) sits inside d_a's stretch: the chain needs it.
        assert_eq!(seqs(&data), [2, 3, 4, 5]);
        assert_eq!(
            data["export"]["anchor"],
            json!({"prev_hash": hash_of(&lines, 1), "genesis": false, "after_seq": 1})
        );
        assert_eq!(data["export"]["head"], hash_of(&lines, 5));
        assert_eq!(
            data["export"]["selection"],
            json!({"kind": "drive", "drive_id": "d_a"})
        );
        let prompt = &data["export"]["prompt"];
        assert_eq!(prompt["drive_id"], "d_a");
        assert_eq!(prompt["text"], FIRST_PROMPT);
        assert_eq!(prompt["sha256"], sha256_hex(FIRST_PROMPT.as_bytes()));
        assert_eq!(prompt["bytes"], FIRST_PROMPT.len());
        assert!(!html.contains(SECOND_PROMPT), "another drive's prompt");
        assert!(summary.contains("4 entries (seq 2–5)"), "{summary}");
        assert!(
            summary.ends_with(", the drive's prompt included"),
            "{summary}"
        );

        let (_, _, data) = export(&dir, Selection::Drive("d_b".into()), None);
        assert_eq!(seqs(&data), [3, 4, 5, 6, 7]);
        assert_eq!(data["export"]["prompt"]["text"], SECOND_PROMPT);

        // Not ended: to the end of the journal.
        let (_, _, data) = export(&dir, Selection::Drive("d_c".into()), None);
        assert_eq!(seqs(&data), [9]);
    }

    #[test]
    fn a_purged_prompt_is_said_to_be_absent() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        fs::remove_file(blob_path(&dir, &sha256_hex(SECOND_PROMPT.as_bytes()))).unwrap();
        let (summary, _, data) = export(&dir, Selection::Drive("d_b".into()), None);
        let prompt = &data["export"]["prompt"];
        assert!(prompt["text"].is_null());
        assert_eq!(prompt["sha256"], sha256_hex(SECOND_PROMPT.as_bytes()));
        assert!(prompt["absent"].as_str().unwrap().contains("purged"));
        assert!(summary.contains("prompt not included"), "{summary}");
    }

    #[test]
    fn since_is_the_stretch_from_the_first_entry_at_or_after_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        let lines = segment_lines(&dir);
        let (_, _, data) = export(&dir, Selection::Since(3_500), None);
        assert_eq!(seqs(&data), [4, 5, 6, 7, 8, 9]);
        assert_eq!(data["export"]["anchor"]["prev_hash"], hash_of(&lines, 3));
        assert_eq!(
            data["export"]["selection"],
            json!({"kind": "since", "since_ms": 3_500})
        );
        let (_, _, data) = export(&dir, Selection::Since(3_001), None);
        assert_eq!(seqs(&data)[0], 4);
        let (_, _, data) = export(&dir, Selection::Since(0), None);
        assert_eq!(seqs(&data), (1..=9).collect::<Vec<u64>>());
    }

    #[test]
    fn nothing_selected_is_an_error_that_says_what_was_asked() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        let out = root.path().join("none.html");
        let error = export_html(&dir, &Selection::Drive("d_nope".into()), None, &out)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("drive d_nope is not in the journal"),
            "{error}"
        );
        let error = export_html(&dir, &Selection::Since(7_001), None, &out)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no entry of the journal") && error.contains("1970-01-01T00:00:07.001Z"),
            "{error}"
        );
        assert!(!out.exists());
    }

    #[test]
    fn a_journal_that_does_not_verify_is_not_exported() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Sha256);
        let segment = &segments::list(&dir).unwrap()[0].path;
        let text = fs::read_to_string(segment).unwrap();
        fs::write(
            segment,
            text.replacen("\"at_ms\":3500", "\"at_ms\":3501", 1),
        )
        .unwrap();
        let out = root.path().join("bad.html");
        let error = export_html(&dir, &Selection::Drive("d_b".into()), None, &out)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("does not verify") && error.contains("seq 4: edited"),
            "{error}"
        );
        assert!(!out.exists());
        let error = export_html(&root.path().join("missing"), &Selection::All, None, &out)
            .unwrap_err()
            .to_string();
        assert!(error.contains("cannot verify"), "{error}");
    }

    #[test]
    fn a_pruned_journal_is_exported_from_its_checkpoint() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("journal");
        let config = |segment_bytes: u64, max_bytes: Option<u64>| {
            let mut config = JournalConfig::new(dir.clone());
            config.sealer = Sealer::Sha256;
            config.index_path = root.path().join("index.sqlite");
            config.segment_bytes = segment_bytes;
            config.retain = crate::journal::Retention {
                max_age: None,
                max_bytes,
            };
            config
        };
        // Small segments, all kept; then reopened with a budget: pruned at start.
        let mut journal = Journal::open(config(300, None), 1_000, &daemon(), Map::new())
            .unwrap()
            .journal;
        for at in 2..12u64 {
            journal
                .append(
                    at * 1_000,
                    KIND_SESSION_CONNECTED,
                    &fields(json!({"session_id": format!("s_{at}")})),
                    None,
                    None,
                )
                .unwrap();
        }
        journal.close();
        let journal = Journal::open(config(1 << 20, Some(1_200)), 20_000, &daemon(), Map::new())
            .unwrap()
            .journal;
        journal.close();
        let (summary, _, data) = export(&dir, Selection::All, None);
        let pruned = data["export"]["journal"]["pruned_through"]
            .as_u64()
            .expect("pruned");
        let seqs = seqs(&data);
        assert_eq!(seqs[0], pruned + 1);
        assert_eq!(data["export"]["anchor"]["genesis"], false);
        assert_eq!(data["export"]["anchor"]["after_seq"], pruned);
        assert!(
            summary.contains(&format!("(seq {}–", pruned + 1)),
            "{summary}"
        );
    }

    #[test]
    fn a_keyed_journal_is_exported_only_with_its_key() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_journal(root.path(), Sealer::Hmac(b"secret key".to_vec()));
        let out = root.path().join("keyed.html");
        let error = export_html(&dir, &Selection::All, None, &out)
            .unwrap_err()
            .to_string();
        assert!(error.contains("KORU_JOURNAL_HMAC_KEY"), "{error}");
        let error = export_html(&dir, &Selection::All, Some(b"other key"), &out)
            .unwrap_err()
            .to_string();
        assert!(error.contains("wrong_key"), "{error}");
        let (summary, html, data) = export(&dir, Selection::All, Some(b"secret key"));
        assert_eq!(data["export"]["keyed"], true);
        assert!(data["export"]["head"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:"));
        assert!(summary.contains("given the key"), "{summary}");
        assert!(!html.contains("secret key"), "the key is in the page");
    }
}

//! One audit of one chat (blocking I/O): the ledger opened (or continued after checking that it verifies and is this chat's), the chat's items read from its source, the part imported before compared with the source as it is now — by the digest of its bytes for a file read as lines, item by item for documents and databases — then either the new items and an `audit_run` appended, or a `source_rewritten` entry naming the first item that differs and nothing imported.

use std::io::Read;
use std::path::{Path, PathBuf};

use koru_protocol::{AuditFinding, AuditFindingKind, ChatAuditResult, VerifyVerdict};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::ledger::{
    self, ImportedItem, LedgerState, TextDigest, Through, KIND_AUDIT_RUN, KIND_SOURCE_COMPACTED,
    KIND_SOURCE_REWRITTEN,
};
use crate::conversation::{read_items, ConversationItem, ReadError, SourceRecord};
use crate::journal::canonical::{hex, Sealer};
use crate::journal::chain::{ChainWriter, LEDGER_SEGMENT_BYTES};
use crate::journal::{JournalError, KIND_CHAT_ITEM, KIND_LEDGER_OPENED, LEDGER_FORMAT};

/// What to audit, and where the ledger goes.
#[derive(Debug, Clone)]
pub struct AuditRequest {
    /// The store's registry interface id.
    pub store: String,
    pub chat_id: String,
    /// The chat's file (or database).
    pub source: PathBuf,
    /// The ledger's folder.
    pub dir: PathBuf,
    /// How new entries are sealed (`KORU_JOURNAL_HMAC_KEY`, as for the journal).
    pub sealer: Sealer,
    /// Also write the ledger's self-verifying page here.
    pub html: Option<PathBuf>,
}

/// What an audit did: `chat.audit`'s answer (`koru_protocol::ChatAuditResult`), paths as
/// text.
pub type AuditOutcome = ChatAuditResult;

/// Why an audit wrote nothing (or stopped).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The chat could not be read from its source.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The folder holds a ledger of another chat.
    #[error("{dir} holds the ledger of chat {chat_id} of {store}, not of this chat; give another folder (--out)")]
    OtherChat {
        dir: PathBuf,
        store: String,
        chat_id: String,
    },
    /// The folder's entries do not verify (or cannot be checked): nothing is appended to
    /// a chain that is not intact.
    #[error("the ledger in {dir} does not verify ({why}); `koru verify {dir}` says more — nothing was appended")]
    NotIntact { dir: PathBuf, why: String },
    /// The ledger is keyed and the audit is not, or the other way round.
    #[error("the ledger in {dir} is {held}, and this audit would seal its entries {would}: set KORU_JOURNAL_HMAC_KEY as it was when the ledger was opened")]
    KeyMismatch {
        dir: PathBuf,
        held: &'static str,
        would: &'static str,
    },
    /// The folder holds something that is not a ledger (a journal, say).
    #[error("{dir} holds entries but no ledger_opened entry: it is not a chat's ledger")]
    NotALedger { dir: PathBuf },
    /// The ledger's entries could not be read back or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("cannot read {path}: {why}")]
    Unreadable { path: PathBuf, why: String },
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How the part imported before is compared with the source now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    /// A file the store only appends to, read line by line: the bytes up to where the last
    /// run stopped must be the same (`prefix_sha256`).
    Prefix,
    /// A document or a database the store rewrites whole: each item imported must still be
    /// there with the same source digest.
    Items,
}

fn compare_of(source: &Path) -> Compare {
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.ends_with(".jsonl") {
        Compare::Prefix
    } else {
        Compare::Items
    }
}

/// Audits the chat `request` names into its ledger.
pub fn audit(request: &AuditRequest) -> Result<AuditOutcome, AuditError> {
    let mut chain = ChainWriter::open(&request.dir, request.sealer.clone(), LEDGER_SEGMENT_BYTES)?;
    let key = match &request.sealer {
        Sealer::Hmac(key) => Some(key.as_slice()),
        Sealer::Sha256 => None,
    };
    let state = if chain.last_seq() == 0 {
        LedgerState::default()
    } else {
        existing(request, key)?
    };
    let source = std::path::absolute(&request.source).unwrap_or_else(|_| request.source.clone());

    let mut fresh: Vec<ConversationItem> = Vec::new();
    let summary = read_items(&request.store, &source, &request.chat_id, |item| {
        fresh.push(item)
    })?;
    let compare = compare_of(&source);
    let imported = state.items.len();

    let mut opened = false;
    let mut finding = None;
    if state.opened.is_none() {
        chain.append(
            now_ms(),
            KIND_LEDGER_OPENED,
            &json!({
                "format": LEDGER_FORMAT,
                "store": request.store,
                "chat_id": request.chat_id,
                "source": {"file": source.display().to_string(), "read": match compare {
                    Compare::Prefix => "lines",
                    Compare::Items => "whole",
                }},
                "koru_version": env!("CARGO_PKG_VERSION"),
            }),
            None,
        )?;
        opened = true;
    } else {
        match check_prefix(request, &source, compare, &state, &fresh)? {
            Check::Same => {}
            Check::Compacted(fields) => {
                chain.append(now_ms(), KIND_SOURCE_COMPACTED, &fields, None)?;
                finding = Some(AuditFinding {
                    kind: AuditFindingKind::SourceCompacted,
                    item: None,
                    message: fields["message"].as_str().unwrap_or("").to_string(),
                });
            }
            Check::Rewritten { item, fields } => {
                chain.append(now_ms(), KIND_SOURCE_REWRITTEN, &fields, None)?;
                chain.finish()?;
                let finding = AuditFinding {
                    kind: AuditFindingKind::SourceRewritten,
                    item,
                    message: fields["message"].as_str().unwrap_or("").to_string(),
                };
                return finish(
                    request,
                    chain,
                    &source,
                    false,
                    0,
                    imported as u64,
                    Some(finding),
                );
            }
        }
    }

    let file_name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A document or database rewrites the records of a turn still being written: those
    // wait for a later audit, so that what is imported is what stays.
    let importable = match compare {
        Compare::Prefix => fresh.len(),
        Compare::Items => settled_len(&fresh, &source),
    };
    let mut added = 0u64;
    for (index, item) in fresh.iter().enumerate().take(importable).skip(imported) {
        chain.append(
            now_ms(),
            KIND_CHAT_ITEM,
            &item_fields(index as u64, item, &file_name),
            None,
        )?;
        added += 1;
    }
    let total = imported.max(importable) as u64;
    let mut run = Map::new();
    run.insert("run".into(), json!(state.runs + 1));
    run.insert("items_added".into(), json!(added));
    run.insert("turns".into(), json!(summary.turns));
    if importable < fresh.len() {
        run.insert("held_back".into(), json!(fresh.len() - importable));
    }
    if !summary.not_recorded.is_empty() {
        run.insert("not_recorded".into(), json!(summary.not_recorded));
    }
    let mut through = Through {
        items: total,
        offset: None,
        line: None,
    };
    if compare == Compare::Prefix {
        // A compacted log starts over: where the last run stopped is in bytes gone now.
        let carried = match &finding {
            Some(_) => None,
            None => state.last_run.as_ref().map(|r| &r.through),
        };
        let (offset, line) = line_end(&fresh, carried);
        through.offset = Some(offset);
        through.line = Some(line);
        run.insert(
            "prefix_sha256".into(),
            json!(prefix_sha256(&source, offset)?),
        );
    }
    run.insert(
        "through".into(),
        serde_json::to_value(&through).unwrap_or_default(),
    );
    chain.append(now_ms(), KIND_AUDIT_RUN, &run, None)?;
    chain.finish()?;
    finish(request, chain, &source, opened, added, total, finding)
}

/// The outcome, with the page written when one was asked for.
fn finish(
    request: &AuditRequest,
    chain: ChainWriter,
    source: &Path,
    opened: bool,
    items_added: u64,
    items_total: u64,
    finding: Option<AuditFinding>,
) -> Result<AuditOutcome, AuditError> {
    let (last_seq, head) = (chain.last_seq(), chain.head().to_string());
    // The page is written from the ledger as it is on disk, by the export, which verifies
    // it first; the lock is let go before.
    drop(chain);
    if let Some(html) = &request.html {
        let key = match &request.sealer {
            Sealer::Hmac(key) => Some(key.as_slice()),
            Sealer::Sha256 => None,
        };
        crate::journal::export::export_html(
            &request.dir,
            &crate::journal::export::Selection::All,
            key,
            html,
        )?;
    }
    Ok(ChatAuditResult {
        store: request.store.clone(),
        chat_id: request.chat_id.clone(),
        source: source.display().to_string(),
        dir: request.dir.display().to_string(),
        opened,
        items_added,
        items_total,
        last_seq,
        head,
        keyed: request.sealer.is_keyed(),
        html: request.html.as_ref().map(|h| h.display().to_string()),
        finding,
    })
}

/// The ledger already in the folder: verified, this chat's, sealed as this audit seals.
fn existing(request: &AuditRequest, key: Option<&[u8]>) -> Result<LedgerState, AuditError> {
    let dir = &request.dir;
    let report = crate::journal::verify::verify(dir, key);
    if report.verdict != VerifyVerdict::Intact {
        let why = report
            .problem
            .map(|p| match (p.seq, p.segment, p.line) {
                (Some(seq), Some(segment), Some(line)) => {
                    format!("seq {seq}, {segment} line {line}: {}", p.message)
                }
                _ => p.message,
            })
            .unwrap_or_else(|| "not intact".into());
        return Err(AuditError::NotIntact {
            dir: dir.clone(),
            why,
        });
    }
    if report.keyed != request.sealer.is_keyed() {
        let name = |keyed| {
            if keyed {
                "keyed (HMAC-SHA256)"
            } else {
                "not keyed (SHA-256)"
            }
        };
        return Err(AuditError::KeyMismatch {
            dir: dir.clone(),
            held: name(report.keyed),
            would: name(request.sealer.is_keyed()),
        });
    }
    let state = ledger::read(dir).map_err(|why| AuditError::Unreadable {
        path: dir.clone(),
        why,
    })?;
    match &state.opened {
        None => Err(AuditError::NotALedger { dir: dir.clone() }),
        Some(opened) if opened.store != request.store || opened.chat_id != request.chat_id => {
            Err(AuditError::OtherChat {
                dir: dir.clone(),
                store: opened.store.clone(),
                chat_id: opened.chat_id.clone(),
            })
        }
        Some(_) => Ok(state),
    }
}

/// What comparing the part imported before with the source found.
enum Check {
    Same,
    /// The store rewrote its file whole and every imported item is still there, the same:
    /// the entry to record.
    Compacted(Value),
    /// Imported bytes changed: the first item that differs, and the entry to record.
    Rewritten {
        item: Option<u64>,
        fields: Value,
    },
}

fn check_prefix(
    request: &AuditRequest,
    source: &Path,
    compare: Compare,
    state: &LedgerState,
    fresh: &[ConversationItem],
) -> Result<Check, AuditError> {
    let imported = &state.items;
    match compare {
        Compare::Items => {
            let differs = imported.iter().find(|old| {
                fresh
                    .get(old.index as usize)
                    .is_none_or(|new| new.source.sha256() != old.source_sha256())
            });
            Ok(match differs {
                None => Check::Same,
                Some(old) => rewritten(old, fresh.get(old.index as usize), None),
            })
        }
        Compare::Prefix => {
            let Some(last) = &state.last_run else {
                return Ok(Check::Same);
            };
            let (Some(offset), Some(recorded)) = (last.through.offset, &last.prefix_sha256) else {
                return Ok(Check::Same);
            };
            let now = prefix_sha256(source, offset)?;
            if &now == recorded {
                // The bytes imported are the same; the items they hold are then the same,
                // unless fewer are read now (a reader that changed).
                return Ok(match imported.get(fresh.len()) {
                    Some(old) if fresh.len() < imported.len() => rewritten(old, None, None),
                    _ => Check::Same,
                });
            }
            let prefix = Some((offset, recorded.as_str(), now.as_str()));
            if request.store == crate::observe::stores::copilot::STORE {
                // Copilot compacts its mutation log into a new first snapshot: every item is
                // elsewhere now, so the items are compared by what they say.
                if let Some(old) = first_content_change(imported, fresh) {
                    return Ok(rewritten(old, fresh.get(old.index as usize), prefix));
                }
                return Ok(Check::Compacted(json!({
                    "items": imported.len(),
                    "before": {"through": last.through, "prefix_sha256": recorded},
                    "prefix_sha256_now": prefix_sha256(source, offset)?,
                    "message": format!(
                        "the store rewrote {} whole (a compacted log): its first {offset} bytes changed, and each of the {} items imported before is still there, saying the same",
                        source.display(), imported.len()
                    ),
                })));
            }
            let old = first_moved_line(source, imported)?;
            Ok(match old {
                Some(old) => rewritten(old, fresh.get(old.index as usize), prefix),
                None => Check::Rewritten {
                    item: None,
                    fields: json!({
                        "item": null,
                        "through": last.through,
                        "prefix_sha256": recorded,
                        "prefix_sha256_now": now,
                        "message": format!(
                            "the first {offset} bytes of {} imported before changed (prefix sha256 {recorded}, now {now}), in a line that holds no item; nothing new was imported",
                            source.display()
                        ),
                    }),
                },
            })
        }
    }
}

/// The `source_rewritten` finding for the imported item `old`, which the source now holds
/// as `new` (or no longer holds).
fn rewritten(
    old: &ImportedItem,
    new: Option<&ConversationItem>,
    prefix: Option<(u64, &str, &str)>,
) -> Check {
    let new_sha = new.map(|n| n.source.sha256().to_string());
    let place = describe_source(&old.source);
    let message = match &new_sha {
        Some(now) => format!(
            "item {} ({} of turn {}, {place}) was rewritten after it was imported: its source sha256 was {}, it is {now} now; nothing new was imported",
            old.index, old.item, old.turn, old.source_sha256()
        ),
        None => format!(
            "item {} ({} of turn {}, {place}) is no longer in the source; nothing new was imported",
            old.index, old.item, old.turn
        ),
    };
    let mut fields = json!({
        "item": {"index": old.index, "turn": old.turn, "item": old.item, "source": old.source},
        "old_sha256": old.source_sha256(),
        "new_sha256": new_sha,
        "new_source": new.map(|n| serde_json::to_value(&n.source).unwrap_or_default()),
        "message": message,
    });
    if let Some((offset, before, now)) = prefix {
        fields["through_offset"] = json!(offset);
        fields["prefix_sha256"] = json!(before);
        fields["prefix_sha256_now"] = json!(now);
    }
    Check::Rewritten {
        item: Some(old.index),
        fields,
    }
}

/// A source record as a reader says where it is.
fn describe_source(source: &Value) -> String {
    let num = |key: &str| source.get(key).and_then(Value::as_u64);
    let text = |key: &str| source.get(key).and_then(Value::as_str);
    match text("kind") {
        Some("line") => format!(
            "line {} at byte {}",
            num("line").unwrap_or(0),
            num("offset").unwrap_or(0)
        ),
        Some("element") => format!(
            "element {} at bytes {}+{}",
            text("pointer").unwrap_or(""),
            num("offset").unwrap_or(0),
            num("bytes").unwrap_or(0)
        ),
        Some("row") => format!(
            "row {} of {}",
            text("row").unwrap_or(""),
            text("table").unwrap_or("")
        ),
        _ => "its source".into(),
    }
}

/// The first imported item whose recorded line bytes are no longer at their place in the
/// file (by their digest).
fn first_moved_line<'i>(
    source: &Path,
    imported: &'i [ImportedItem],
) -> Result<Option<&'i ImportedItem>, AuditError> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(source).map_err(|e| unreadable(source, e))?;
    let mut last: Option<((u64, u64), bool)> = None;
    for item in imported {
        let Some(range) = item.line_range() else {
            continue;
        };
        let same = match last {
            Some((seen, same)) if seen == range => same,
            _ => {
                let mut bytes = vec![0u8; range.1 as usize];
                let same = match file.read_exact_at(&mut bytes, range.0) {
                    Ok(()) => crate::journal::canonical::sha256_hex(&bytes) == item.source_sha256(),
                    Err(_) => false,
                };
                last = Some((range, same));
                same
            }
        };
        if !same {
            return Ok(Some(item));
        }
    }
    Ok(None)
}

/// The first imported item the source no longer holds with the same content (kind, turn,
/// text, tool, call and outcome), wherever its bytes are now.
fn first_content_change<'i>(
    imported: &'i [ImportedItem],
    fresh: &[ConversationItem],
) -> Option<&'i ImportedItem> {
    imported.iter().find(|old| {
        let Some(new) = fresh.get(old.index as usize) else {
            return true;
        };
        let fields = item_fields(old.index, new, "");
        let text: Option<TextDigest> = fields
            .get("text")
            .and_then(|t| serde_json::from_value(t.clone()).ok());
        new.turn != old.turn
            || fields["item"].as_str() != Some(old.item.as_str())
            || text != old.text
            || new.tool != old.tool
            || new.call_id != old.call_id
            || fields.get("outcome").and_then(Value::as_str) != old.outcome.as_deref()
    })
}

/// How long after its last write a document or database whose last turn has no end is
/// taken to be still being written.
pub const SETTLING: std::time::Duration = std::time::Duration::from_secs(120);

/// How many of `fresh` (a document's or database's items) to import now: all, unless the
/// last turn has neither an end nor a question for the user and its files were written
/// within [`SETTLING`] — then the items before that turn (a chat answering now; a turn
/// left without an end long ago, as Cursor's old chats are, is imported as it is).
fn settled_len(fresh: &[ConversationItem], source: &Path) -> usize {
    use crate::conversation::ItemKind;
    let Some(last_turn) = fresh.last().map(|item| item.turn) else {
        return 0;
    };
    let first_of_last = fresh
        .iter()
        .position(|item| item.turn == last_turn)
        .unwrap_or(fresh.len());
    let ended = fresh[first_of_last..]
        .iter()
        .any(|item| matches!(item.kind, ItemKind::TurnEnd | ItemKind::NeedsInput));
    if ended || !written_within(fresh, source, SETTLING) {
        return fresh.len();
    }
    first_of_last
}

/// Whether `source`, or a file its items name (beside it, or by its own path), was
/// modified within `span` of now.
fn written_within(fresh: &[ConversationItem], source: &Path, span: std::time::Duration) -> bool {
    let mut files = vec![source.to_path_buf()];
    for item in fresh {
        if let SourceRecord::Element {
            file: Some(file), ..
        }
        | SourceRecord::Row {
            file: Some(file), ..
        } = &item.source
        {
            let path = source
                .parent()
                .map_or_else(|| PathBuf::from(file), |dir| dir.join(file));
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    let now = std::time::SystemTime::now();
    files.iter().any(|file| {
        std::fs::metadata(file)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| now.duration_since(modified).unwrap_or_default() < span)
    })
}

/// Where the lines imported end: just after the last line any item is on (or where the
/// last run stopped, when that is further).
fn line_end(fresh: &[ConversationItem], before: Option<&Through>) -> (u64, u64) {
    let mut end = before
        .map(|t| (t.offset.unwrap_or(0), t.line.unwrap_or(0)))
        .unwrap_or((0, 0));
    for item in fresh {
        if let SourceRecord::Line {
            line,
            offset,
            bytes,
            ..
        } = &item.source
        {
            // The line's bytes and its `\n`.
            let after = offset + bytes + 1;
            if after > end.0 {
                end = (after, *line);
            }
        }
    }
    end
}

/// The SHA-256 of the first `bytes` bytes of `path` (lowercase hex).
fn prefix_sha256(path: &Path, bytes: u64) -> Result<String, AuditError> {
    let file = std::fs::File::open(path).map_err(|e| unreadable(path, e))?;
    let mut reader = file.take(bytes);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 256 * 1024];
    let mut read = 0u64;
    loop {
        let n = reader.read(&mut buffer).map_err(|e| unreadable(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        read += n as u64;
    }
    if read < bytes {
        // A file cut shorter than the part imported: its digest cannot be the one recorded.
        hasher.update(format!("(cut at {read} of {bytes} bytes)").as_bytes());
    }
    Ok(hex(&hasher.finalize()))
}

fn unreadable(path: &Path, error: std::io::Error) -> AuditError {
    AuditError::Unreadable {
        path: path.to_path_buf(),
        why: error.to_string(),
    }
}

/// A `chat_item` entry's fields: where the item is in the source and the digest of its
/// bytes, the digest and length of its text, its tool, call and outcome — never the text.
fn item_fields(index: u64, item: &ConversationItem, file_name: &str) -> Value {
    let mut fields = Map::new();
    fields.insert("index".into(), json!(index));
    fields.insert("turn".into(), json!(item.turn));
    fields.insert("part".into(), json!(item.part));
    fields.insert(
        "item".into(),
        serde_json::to_value(item.kind).unwrap_or_default(),
    );
    let mut source = serde_json::to_value(&item.source).unwrap_or_default();
    if source.get("file").is_none() && !file_name.is_empty() {
        source["file"] = json!(file_name);
    }
    fields.insert("source".into(), source);
    if let (Some(sha256), Some(chars)) = (&item.text_sha256, item.text_chars) {
        fields.insert("text".into(), json!({"sha256": sha256, "chars": chars}));
    }
    if let Some(at_ms) = item.at_ms {
        fields.insert("store_at_ms".into(), json!(at_ms));
    }
    if let Some(tool) = &item.tool {
        fields.insert("tool".into(), json!(tool));
    }
    if let Some(call_id) = &item.call_id {
        fields.insert("call_id".into(), json!(call_id));
    }
    if let Some(outcome) = item.outcome {
        fields.insert(
            "outcome".into(),
            serde_json::to_value(outcome).unwrap_or_default(),
        );
    }
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = r#"{"type":"user","timestamp":"2026-02-11T10:00:00.000Z","message":{"role":"user","content":"hello"}}"#;
    const ANSWER: &str = r#"{"type":"assistant","timestamp":"2026-02-11T10:00:01.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Two calls."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#;
    const STORE: &str = crate::observe::stores::claude_code::STORE;

    fn request(source: &Path, dir: &Path) -> AuditRequest {
        AuditRequest {
            store: STORE.into(),
            chat_id: "c1".into(),
            source: source.to_path_buf(),
            dir: dir.to_path_buf(),
            sealer: Sealer::Sha256,
            html: None,
        }
    }

    fn kinds(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for segment in crate::journal::segments::list(dir).unwrap() {
            for line in crate::journal::segments::Lines::open(&segment.path).unwrap() {
                let entry: Value = serde_json::from_slice(&line.unwrap().bytes).unwrap();
                out.push(entry["kind"].as_str().unwrap().to_string());
            }
        }
        out
    }

    #[test]
    fn a_grown_chat_extends_its_ledger_and_an_edited_line_is_named_not_imported() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("c1.jsonl");
        let dir = tmp.path().join("ledger");
        std::fs::write(&source, format!("{PROMPT}\n{ANSWER}\n")).unwrap();
        let first = audit(&request(&source, &dir)).unwrap();
        assert!(first.opened);
        assert_eq!((first.items_added, first.items_total), (3, 3));
        assert_eq!(
            kinds(&dir),
            [
                "ledger_opened",
                "chat_item",
                "chat_item",
                "chat_item",
                "audit_run"
            ]
        );
        // Nothing new: a run with nothing added.
        let again = audit(&request(&source, &dir)).unwrap();
        assert_eq!((again.items_added, again.finding), (0, None));
        // Grown: only the new items.
        std::fs::write(&source, format!("{PROMPT}\n{ANSWER}\n{PROMPT}\n")).unwrap();
        let grown = audit(&request(&source, &dir)).unwrap();
        assert_eq!((grown.items_added, grown.items_total), (1, 4));
        let report = crate::journal::verify::verify(&dir, None);
        assert_eq!(report.verdict, VerifyVerdict::Intact);
        assert_eq!(report.ledger.as_ref().unwrap().items, 4);
        // The answer's line edited: named, nothing imported.
        let edited = ANSWER.replace("Two calls.", "One call.!");
        std::fs::write(&source, format!("{PROMPT}\n{edited}\n{PROMPT}\n{PROMPT}\n")).unwrap();
        let found = audit(&request(&source, &dir)).unwrap();
        let finding = found.finding.unwrap();
        assert_eq!(finding.kind, AuditFindingKind::SourceRewritten);
        assert_eq!(finding.item, Some(1), "{}", finding.message);
        assert!(finding.message.contains("line 2"), "{}", finding.message);
        assert_eq!(found.items_added, 0);
        assert_eq!(kinds(&dir).last().unwrap(), "source_rewritten");
        assert_eq!(
            crate::journal::verify::verify(&dir, None).verdict,
            VerifyVerdict::Intact
        );
    }

    #[test]
    fn another_chats_ledger_and_a_keyed_one_without_its_key_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("c1.jsonl");
        let dir = tmp.path().join("ledger");
        std::fs::write(&source, format!("{PROMPT}\n")).unwrap();
        audit(&request(&source, &dir)).unwrap();
        let mut other = request(&source, &dir);
        other.chat_id = "c2".into();
        assert!(matches!(audit(&other), Err(AuditError::OtherChat { .. })));
        let mut keyed = request(&source, &dir);
        keyed.sealer = Sealer::Hmac(b"k".to_vec());
        let refused = audit(&keyed).unwrap_err();
        assert!(
            matches!(refused, AuditError::KeyMismatch { .. }),
            "{refused}"
        );
    }

    #[test]
    fn a_compacted_copilot_log_saying_the_same_is_recorded_and_one_saying_otherwise_is_a_rewrite() {
        let tmp = tempfile::tempdir().unwrap();
        let name = "8b0378ec-9689-4fed-a671-2a9baeff8d26.jsonl";
        let log = std::fs::read(crate::conversation::model::corpus::folder("copilot").join(name))
            .unwrap();
        let source = tmp.path().join(name);
        std::fs::write(&source, &log).unwrap();
        let dir = tmp.path().join("ledger");
        let mut asked = request(&source, &dir);
        asked.store = crate::observe::stores::copilot::STORE.into();
        let first = audit(&asked).unwrap();
        assert!(first.items_total > 2, "{first:?}");
        // The editor compacts the log: one snapshot line holding the whole session.
        let document = crate::conversation::stores::copilot::document_from_log(&log).unwrap();
        let compacted = format!("{}\n", json!({"kind": 0, "v": document}));
        std::fs::write(&source, &compacted).unwrap();
        let again = audit(&asked).unwrap();
        let finding = again.finding.clone().unwrap();
        assert_eq!(
            finding.kind,
            AuditFindingKind::SourceCompacted,
            "{finding:?}"
        );
        assert_eq!(again.items_total, first.items_total);
        assert!(kinds(&dir).contains(&"source_compacted".to_string()));
        // Later runs compare with the compacted log's bytes.
        let entries = ledger::read(&dir).unwrap();
        let through = entries.last_run.unwrap().through;
        assert_eq!(through.offset, Some(compacted.len() as u64));
        assert_eq!(through.line, Some(1));
        let quiet = audit(&asked).unwrap();
        assert_eq!((quiet.finding, quiet.items_added), (None, 0));
        // A compaction that changed what the first prompt says is a rewrite.
        let mut changed = document.clone();
        let text = &mut changed["requests"][0]["message"]["text"];
        *text = json!(format!("{} (edited)", text.as_str().unwrap_or("")));
        std::fs::write(&source, format!("{}\n", json!({"kind": 0, "v": changed}))).unwrap();
        let rewritten = audit(&asked).unwrap();
        let finding = rewritten.finding.unwrap();
        assert_eq!(
            finding.kind,
            AuditFindingKind::SourceRewritten,
            "{finding:?}"
        );
        assert_eq!(finding.item, Some(0), "{}", finding.message);
        assert_eq!(
            crate::journal::verify::verify(&dir, None).verdict,
            VerifyVerdict::Intact
        );
    }

    #[test]
    fn a_document_turn_still_being_written_waits_and_an_old_one_is_imported() {
        let tmp = tempfile::tempdir().unwrap();
        let document: Value = serde_json::from_slice(
            &std::fs::read(
                crate::conversation::model::corpus::folder("cline_tasks")
                    .join("1795620714110.ui_messages.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let messages = document.as_array().unwrap();
        let task = tmp.path().join("1795620714110");
        std::fs::create_dir_all(&task).unwrap();
        let source = task.join("ui_messages.json");
        let dir = tmp.path().join("ledger");
        let mut asked = request(&source, &dir);
        asked.store = crate::observe::stores::cline::STORE.into();
        // The task up to its text, before its completion_result (message 3): the turn is
        // open, and the file was just written.
        assert_eq!(messages[3]["say"], "completion_result");
        let open = &messages[..3];
        std::fs::write(&source, serde_json::to_vec(open).unwrap()).unwrap();
        let first = audit(&asked).unwrap();
        let mut all = Vec::new();
        read_items(&asked.store, &source, "", |item| all.push(item)).unwrap();
        assert!(!all.is_empty());
        assert_eq!(first.items_total, 0, "the only turn is still being written");
        // Left so for longer than SETTLING: imported as it is.
        let old = std::time::SystemTime::now() - SETTLING * 2;
        std::fs::File::options()
            .write(true)
            .open(&source)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let second = audit(&asked).unwrap();
        assert_eq!(second.items_total, all.len() as u64);
        assert_eq!(second.finding, None);
    }
}

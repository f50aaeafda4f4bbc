//! One pure turn reader per store format (bytes in, turns out, no I/O): the line stores (Claude Code, Codex, Gemini CLI's `.jsonl`) feed a `TurnCollector` line by line as each turn closes; the document stores (Copilot, Cline/Roo/Kilo tasks, Cline 4 sessions, Gemini CLI's `.json`, Cursor's rows) build a whole chat's turns at once. Each module also says what its store does not record (`NOT_RECORDED`).

use super::items::SourceRecord;
use super::model::TurnCollector;
use super::read::{
    feed_lines, feed_lines_from, malformed, read_document, ReadError, ReadFrom, ReadRequest,
};
use crate::observe::ParseError;

pub mod claude_code;
pub mod cline;
pub mod cline_sdk;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod opencode;

/// A reader for a store written one JSON record per line: fed every complete line of one
/// chat's file in order, it pushes each turn into the collector once the turn is closed
/// (the next prompt came), and the last one at `finish`.
pub trait LineTurns {
    /// One complete line; `Err` for a line that is not a record (skipped, never data).
    fn feed_line(&mut self, line: &[u8], out: &mut TurnCollector) -> Result<(), ParseError>;
    /// The file's end: the open turn is pushed as it stands.
    fn finish(&mut self, out: &mut TurnCollector);
}

/// The stores whose chats [`read_store`] reads (registry interface ids).
pub const READABLE_STORES: &[&str] = &[
    crate::observe::stores::claude_code::STORE,
    crate::observe::stores::codex::STORE,
    crate::observe::stores::gemini::STORE,
    crate::observe::stores::copilot::STORE,
    crate::observe::stores::cline::STORE,
    crate::observe::stores::cline_sdk::STORE,
    crate::observe::stores::cursor::STORE,
    crate::observe::stores::cursor::LEGACY_STORE,
    crate::observe::stores::opencode::STORE,
];

/// Reads the chat `request` names with its store's reader into `out`; returns what the
/// store does not record.
pub fn read_store(
    request: &ReadRequest,
    out: &mut TurnCollector,
) -> Result<&'static [&'static str], ReadError> {
    use crate::observe::stores as observed;
    let path = request.source.as_path();
    let store = request.store.as_str();
    match store {
        observed::claude_code::STORE => {
            let mut file = open(path)?;
            let mut turns = claude_code::ClaudeCodeTurns::new();
            match request
                .from
                .as_ref()
                .filter(|from| at_line(&mut file, from))
            {
                // Nothing before a prompt's line changes how Claude Code's reader reads
                // the turns from it on.
                Some(from) => {
                    out.start_at_turn(from.turn);
                    let start = (from.line.saturating_sub(1), from.offset);
                    feed_lines_from(path, store, file, start, &mut turns, out)?;
                }
                None => feed_lines(path, store, file, &mut turns, out)?,
            }
            Ok(claude_code::NOT_RECORDED)
        }
        observed::codex::STORE => {
            let file = open(path)?;
            let mut turns = codex::CodexTurns::new();
            if path.extension().is_some_and(|e| e == "zst") {
                // The newest builds compress a finished rollout; read through the decoder.
                let decoder = zstd::stream::read::Decoder::new(file)
                    .map_err(|e| super::read::unreadable(path, e))?;
                feed_lines(path, store, decoder, &mut turns, out)?;
            } else {
                feed_lines(path, store, file, &mut turns, out)?;
            }
            Ok(codex::NOT_RECORDED)
        }
        observed::gemini::STORE => {
            if path.extension().is_some_and(|e| e == "jsonl") {
                let file = open(path)?;
                feed_lines(path, store, file, &mut gemini::GeminiTurns::new(), out)?;
            } else {
                let bytes = read_document(path)?;
                gemini::turns_from_document(&bytes, out).map_err(|e| malformed(path, store, e))?;
            }
            Ok(gemini::NOT_RECORDED)
        }
        observed::copilot::STORE => {
            let bytes = read_document(path)?;
            let log = path.extension().is_some_and(|e| e == "jsonl");
            copilot::read_session_file(&bytes, log, out).map_err(|e| malformed(path, store, e))?;
            Ok(copilot::NOT_RECORDED)
        }
        observed::cline::STORE => {
            let bytes = read_document(path)?;
            cline::turns_from_task(&bytes, out).map_err(|e| malformed(path, store, e))?;
            Ok(cline::NOT_RECORDED)
        }
        observed::cline_sdk::STORE => {
            // `<id>.json` (the manifest) with `<id>.messages.json` beside it, once written.
            let manifest = read_document(path)?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let messages_path = path.with_file_name(format!("{stem}.messages.json"));
            let messages = match read_document(&messages_path) {
                Ok(bytes) => Some(bytes),
                Err(ReadError::Unreadable { .. }) if !messages_path.exists() => None,
                Err(error) => return Err(error),
            };
            let messages_name = format!("{stem}.messages.json");
            cline_sdk::read_sdk_session(
                &manifest,
                messages
                    .as_deref()
                    .map(|bytes| (messages_name.as_str(), bytes)),
                out,
            )
            .map_err(|e| malformed(path, store, e))?;
            Ok(cline_sdk::NOT_RECORDED)
        }
        observed::cursor::STORE | observed::cursor::LEGACY_STORE => {
            read_cursor(path, store, &request.chat_id, out)
        }
        crate::observe::stores::opencode::STORE => {
            let rows = if out.wants_items() {
                opencode::read_rows_as_stored(path, &request.chat_id)
            } else {
                opencode::read_rows(path, &request.chat_id)
            };
            let (messages, parts) = rows.map_err(|error| ReadError::Unreadable {
                path: super::read::shown(path),
                reason: error.to_string(),
            })?;
            if messages.is_empty() {
                return Err(ReadError::NoSuchChat {
                    path: super::read::shown(path),
                    chat_id: request.chat_id.clone(),
                });
            }
            opencode::turns_from_rows(&messages, &parts, out)
                .map_err(|e| malformed(path, store, e))?;
            Ok(opencode::NOT_RECORDED)
        }
        _ => Err(ReadError::NotReadable {
            store: store.to_string(),
        }),
    }
}

/// A Cursor chat from the database the observers read it from: a composer of the global
/// database (its `composerData` and bubble rows), else — in a per-workspace database — a
/// composer kept inline in the 2024 composer list, a tab of the legacy chat panel, or a
/// composer whose rows are in the global database beside it. With items, the rows' value
/// bytes as stored are their sources.
fn read_cursor(
    path: &std::path::Path,
    store: &str,
    chat_id: &str,
    out: &mut TurnCollector,
) -> Result<&'static [&'static str], ReadError> {
    use crate::observe::stores::cursor as rows;
    let unreadable = |path: &std::path::Path, error: rows::CursorError| ReadError::Unreadable {
        path: super::read::shown(path),
        reason: error.to_string(),
    };
    let db = rows::CursorDb::open(path).map_err(|e| unreadable(path, e))?;
    let wants_items = out.wants_items();
    if read_cursor_composer(&db, path, None, store, chat_id, out)? {
        return Ok(cursor::NOT_RECORDED);
    }
    // An `ItemTable` value that holds this chat: its JSON, and its row as a source.
    let item_value =
        |key: &str| -> Result<Option<(serde_json::Value, Option<SourceRecord>)>, ReadError> {
            let Some(bytes) = db.item_bytes(key).map_err(|e| unreadable(path, e))? else {
                return Ok(None);
            };
            let Ok(value) = serde_json::from_slice(&bytes) else {
                return Ok(None);
            };
            let record = wants_items.then(|| SourceRecord::row(cursor::ITEM_TABLE, key, &bytes));
            Ok(Some((value, record)))
        };
    if let Some((composers, record)) = item_value(rows::INLINE_COMPOSERS_KEY)? {
        let mut found = TurnCollector::new(super::model::Keep::Last(0));
        if cursor::turns_from_inline_composer(&composers, chat_id, &mut found).is_ok() {
            cursor::read_inline_composer(&composers, chat_id, record, out)
                .map_err(|e| malformed(path, store, e))?;
            return Ok(cursor::NOT_RECORDED);
        }
    }
    if let Some((chatdata, record)) = item_value(rows::LEGACY_CHAT_KEY)? {
        let mut found = TurnCollector::new(super::model::Keep::Last(0));
        if cursor::turns_from_legacy_tab(&chatdata, chat_id, &mut found).is_ok() {
            cursor::read_legacy_tab(&chatdata, chat_id, record, out)
                .map_err(|e| malformed(path, store, e))?;
            return Ok(cursor::LEGACY_NOT_RECORDED);
        }
    }
    // A per-workspace database's composer whose rows Cursor keeps in the global database:
    // <User>/workspaceStorage/<hash>/state.vscdb → <User>/globalStorage/state.vscdb.
    if store == rows::LEGACY_STORE {
        if let Some(global) = path
            .ancestors()
            .nth(3)
            .map(|user| user.join("globalStorage").join("state.vscdb"))
            .filter(|global| global.is_file())
        {
            let db = rows::CursorDb::open(&global).map_err(|e| unreadable(&global, e))?;
            if read_cursor_composer(&db, &global, Some(&global), store, chat_id, out)? {
                return Ok(cursor::NOT_RECORDED);
            }
        }
    }
    Err(ReadError::NoSuchChat {
        path: super::read::shown(path),
        chat_id: chat_id.to_string(),
    })
}

/// The composer `chat_id` from its rows in `db` (at `path`; `file`: the database, when it
/// is not the chat's own source file), when it has them.
fn read_cursor_composer(
    db: &crate::observe::stores::cursor::CursorDb,
    path: &std::path::Path,
    file: Option<&std::path::Path>,
    store: &str,
    chat_id: &str,
    out: &mut TurnCollector,
) -> Result<bool, ReadError> {
    let unreadable = |error: crate::observe::stores::cursor::CursorError| ReadError::Unreadable {
        path: super::read::shown(path),
        reason: error.to_string(),
    };
    let (composer, bubbles, sources) = if out.wants_items() {
        let Some(((composer, bubbles), stored)) =
            db.composer_rows_as_stored(chat_id).map_err(unreadable)?
        else {
            return Ok(false);
        };
        let mut sources = cursor::ComposerSources::of_rows(&stored);
        if let Some(file) = file {
            sources = sources.in_file(&super::read::shown(file));
        }
        (composer, bubbles, sources)
    } else {
        let Some((composer, bubbles)) = db.composer_rows(chat_id).map_err(unreadable)? else {
            return Ok(false);
        };
        (composer, bubbles, cursor::ComposerSources::default())
    };
    cursor::read_composer(&composer, &bubbles, &sources, out)
        .map_err(|e| malformed(path, store, e))?;
    Ok(true)
}

fn open(path: &std::path::Path) -> Result<std::fs::File, ReadError> {
    std::fs::File::open(path).map_err(|e| super::read::unreadable(path, e))
}

/// Whether the line `from` names is still at its offset in `file` (its bytes, without the
/// `\n`, hash to its digest); `file` is left there when it is, else at its start.
fn at_line(file: &mut std::fs::File, from: &ReadFrom) -> bool {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    let found = (|| {
        file.seek(SeekFrom::Start(from.offset)).ok()?;
        let mut line = Vec::new();
        BufReader::new(&mut *file)
            .read_until(b'\n', &mut line)
            .ok()?;
        let line = line.strip_suffix(b"\n")?;
        Some(crate::journal::canonical::sha256_hex(line) == from.sha256)
    })()
    .unwrap_or(false);
    if found && file.seek(SeekFrom::Start(from.offset)).is_ok() {
        return true;
    }
    let _ = file.seek(SeekFrom::Start(0));
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::model::Keep;

    #[test]
    fn every_readable_store_has_a_reader_and_no_other_does() {
        let read = |store: &str| {
            let request = ReadRequest {
                store: store.to_string(),
                chat_id: "c".into(),
                source: "/nonexistent/chat.jsonl".into(),
                keep: Keep::Last(1),
                expect_reply: false,
                records: false,
                from: None,
            };
            read_store(&request, &mut TurnCollector::new(Keep::Last(1)))
        };
        for store in READABLE_STORES {
            assert!(
                !matches!(read(store), Err(ReadError::NotReadable { .. })),
                "{store} has no reader"
            );
        }
        assert!(matches!(
            read("chat_history_antigravity"),
            Err(ReadError::NotReadable { .. })
        ));
    }
}

//! One pure turn reader per store format (bytes in, turns out, no I/O): the line stores (Claude Code, Codex, Gemini CLI's `.jsonl`) feed a `TurnCollector` line by line as each turn closes; the document stores (Copilot, Cline/Roo/Kilo tasks, Cline 4 sessions, Gemini CLI's `.json`, Cursor's rows) build a whole chat's turns at once. Each module also says what its store does not record (`NOT_RECORDED`).

use super::model::TurnCollector;
use super::read::{feed_lines, malformed, read_document, ReadError, ReadRequest};
use crate::observe::ParseError;

pub mod claude_code;
pub mod codex;
pub mod gemini;

/// A reader for a store written one JSON record per line: fed every complete line of one
/// chat's file in order, it pushes each turn into the collector once the turn is closed
/// (the next prompt came), and the last one at `finish`.
pub trait LineTurns {
    /// One complete line; `Err` for a line that is not a record (skipped, never data).
    fn feed_line(&mut self, line: &[u8], out: &mut TurnCollector) -> Result<(), ParseError>;
    /// The file's end: the open turn is pushed as it stands.
    fn finish(&mut self, out: &mut TurnCollector);
}

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
            let file = open(path)?;
            feed_lines(
                path,
                store,
                file,
                &mut claude_code::ClaudeCodeTurns::new(),
                out,
            )?;
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
        _ => Err(ReadError::NotReadable {
            store: store.to_string(),
        }),
    }
}

fn open(path: &std::path::Path) -> Result<std::fs::File, ReadError> {
    std::fs::File::open(path).map_err(|e| super::read::unreadable(path, e))
}

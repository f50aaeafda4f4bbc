//! A read's turns as the `chat.read.result` answer: each text cut to the characters asked for, the reply paged from an offset (with the offset to ask for next), the steps as recorded; a drive's evidence (the chat's records of it) in lines for the faces. Pure: turns in, wire types out.

use koru_protocol::{ChatTurn, MAX_CHAT_READ_CHARS};

use super::model::Turn;

/// How the texts of an answer are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// The most characters of each reply and prompt (at most `MAX_CHAT_READ_CHARS`).
    pub max_chars: u64,
    /// Where each reply starts, in characters.
    pub reply_offset: u64,
}

impl Paging {
    /// The paging asked for, with the defaults and the ceiling applied.
    pub fn new(max_chars: Option<u64>, reply_offset: Option<u64>) -> Self {
        Paging {
            max_chars: max_chars
                .unwrap_or(MAX_CHAT_READ_CHARS)
                .clamp(1, MAX_CHAT_READ_CHARS),
            reply_offset: reply_offset.unwrap_or(0),
        }
    }
}

/// `text`'s characters from `offset`, at most `max`, with the whole length and, when more
/// follows, the offset of the rest.
pub fn page(text: &str, offset: u64, max: u64) -> (String, u64, Option<u64>) {
    let total = text.chars().count() as u64;
    let start = offset.min(total);
    let piece: String = text
        .chars()
        .skip(start as usize)
        .take(max as usize)
        .collect();
    let end = start + piece.chars().count() as u64;
    (piece, total, (end < total).then_some(end))
}

/// One turn on the wire.
pub fn wire_turn(index: u64, turn: Turn, paging: Paging) -> ChatTurn {
    let (prompt, prompt_chars) = match turn.prompt {
        Some(prompt) => {
            let (piece, total, _) = page(&prompt, 0, paging.max_chars);
            (Some(piece), total)
        }
        None => (None, 0),
    };
    let (reply, reply_chars, reply_offset, reply_next_offset) = match turn.reply {
        Some(reply) => {
            let (piece, total, next) = page(&reply, paging.reply_offset, paging.max_chars);
            (Some(piece), total, paging.reply_offset.min(total), next)
        }
        None => (None, 0, 0, None),
    };
    ChatTurn {
        index,
        state: turn.state,
        prompt,
        prompt_chars,
        reply,
        reply_chars,
        reply_offset,
        reply_next_offset,
        steps: turn.steps,
        error: turn.error,
        started_ms: turn.started_ms,
        ended_ms: turn.ended_ms,
        model: turn.model,
        usage: turn.usage,
    }
}

/// One step on one line, for a person or an LLM: the tool, its arguments in short, how it
/// ended (`→ exit 101`, `→ error: …`).
pub fn step_line(step: &koru_protocol::TurnStep) -> String {
    use koru_protocol::StepOutcome;
    let outcome = match (step.outcome, step.exit_code) {
        (_, Some(code)) => format!(" → exit {code}"),
        (StepOutcome::Ok, None) => " → ok".into(),
        (StepOutcome::Error, None) => " → error".into(),
        (StepOutcome::Rejected, None) => " → rejected".into(),
        (StepOutcome::Unknown, None) => String::new(),
    };
    let error = step
        .error
        .as_deref()
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    format!("{} {}{outcome}{error}", step.tool, step.summary)
}

/// Where a record is in its file, for a person: `line 3 (offset 120, 512 bytes)`, an
/// element's pointer, or a row's table and key.
pub fn record_place(record: &koru_protocol::StoreRecord) -> String {
    use koru_protocol::StoreRecord;
    let inner = |pointer: &Option<String>| {
        pointer
            .as_deref()
            .map(|p| format!(" at {p}"))
            .unwrap_or_default()
    };
    let elsewhere = |file: &Option<String>| {
        file.as_deref()
            .map(|f| format!(" of {f}"))
            .unwrap_or_default()
    };
    match record {
        StoreRecord::Line {
            line,
            offset,
            bytes,
            pointer,
            ..
        } => format!(
            "line {line}{} (offset {offset}, {bytes} bytes)",
            inner(pointer)
        ),
        StoreRecord::Element {
            offset,
            bytes,
            pointer,
            file,
            ..
        } => format!(
            "element {pointer}{} (offset {offset}, {bytes} bytes)",
            elsewhere(file)
        ),
        StoreRecord::Row {
            table,
            row,
            bytes,
            pointer,
            file,
            ..
        } => format!(
            "row {table}/{row}{}{} ({bytes} bytes)",
            inner(pointer),
            elsewhere(file)
        ),
    }
}

/// A drive's evidence from its chat's store, a line per record: where the prompt is, and
/// how the turn ended with the reply's digest.
pub fn evidence_lines(evidence: &koru_protocol::DriveEvidence) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(prompt) = &evidence.prompt {
        lines.push(format!(
            "prompt on record: {} chat {}, {} {} sha256 {}",
            prompt.store,
            prompt.chat_id,
            prompt.file,
            record_place(&prompt.record),
            prompt.record.sha256()
        ));
    }
    if let Some(outcome) = &evidence.outcome {
        let mut line = format!("{} on record", outcome.stage.as_str());
        match &outcome.record {
            Some(found) => line.push_str(&format!(
                " ({}): {} sha256 {}",
                match outcome.basis {
                    koru_protocol::ObservationBasis::Explicit => "the store's end record",
                    koru_protocol::ObservationBasis::Inferred => "no end record; the reply's",
                },
                record_place(&found.record),
                found.record.sha256()
            )),
            None => line.push_str(" (the store has no record of it)"),
        }
        if let Some(reply) = &outcome.reply {
            line.push_str(&format!(
                "; reply {} chars, sha256 {}",
                reply.chars, reply.sha256
            ));
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_through_a_reply_returns_every_character_once() {
        let reply: String = (0..2_500)
            .map(|i| ['a', 'é', '界', '\n', '🦀'][i % 5])
            .collect();
        let mut offset = 0;
        let mut joined = String::new();
        let mut pages = 0;
        loop {
            let (piece, total, next) = page(&reply, offset, 700);
            assert_eq!(total, 2_500);
            assert!(piece.chars().count() <= 700);
            joined.push_str(&piece);
            pages += 1;
            match next {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(joined, reply);
        assert_eq!(pages, 4);
        let (piece, _, next) = page(&reply, 10_000, 700);
        assert_eq!((piece.as_str(), next), ("", None), "past the end: nothing");
    }

    #[test]
    fn the_answer_cuts_prompt_and_reply_and_says_where_the_rest_starts() {
        let mut turn = Turn::new(Some("p".repeat(30)), Some(5));
        turn.reply = Some("r".repeat(25));
        let wire = wire_turn(3, turn, Paging::new(Some(10), Some(20)));
        assert_eq!(wire.index, 3);
        assert_eq!(wire.prompt.as_deref(), Some("pppppppppp"));
        assert_eq!(wire.prompt_chars, 30);
        assert_eq!(wire.reply.as_deref(), Some("rrrrr"));
        assert_eq!((wire.reply_chars, wire.reply_offset), (25, 20));
        assert_eq!(wire.reply_next_offset, None);
        assert_eq!(
            Paging::new(Some(10_000_000), None).max_chars,
            MAX_CHAT_READ_CHARS
        );
        assert_eq!(Paging::new(Some(0), None).max_chars, 1);
    }
}

//! Claude Code's session logs (`~/.claude/projects/<cwd with / as ->/<session>.jsonl`): a pure parser from JSONL records to observations — bytes in, events out, no I/O.
//!
//! Format facts (docs/observers.md): one JSON record per line, chained by `uuid` /
//! `parentUuid`, with `type` `user` | `assistant` | `system` | `summary`, `sessionId`,
//! `cwd`, an ISO-8601 `timestamp` and `message {role, content}` where `content` is a string
//! or a list of blocks (`text`, `tool_use`, `tool_result`, `thinking`). A turn ends on a
//! `system` record with `subtype` `turn_duration` or `stop_hook_summary` where the version
//! writes one — never on `stop_reason`, which is null on final replies in several
//! versions. A user record `[Request interrupted by user…]` ends the turn as cancelled.
//!
//! One API message is written as several records, one per content block (`thinking`,
//! `text`, `tool_use`), each when its block is complete: a text record can be followed
//! a minute later by the `tool_use` of the same message (real 2.1.39 transcripts; 1.0.17,
//! 1.0.111 and 2.0.69 ones do the same, tests/corpus/claude_code). Nothing in a text
//! record says whether more blocks follow, so a version that writes end records (2.1 on,
//! or any file that has shown one) never gets an inferred end from quiet. Older versions
//! get one when the last assistant record has text and no `tool_use`, nothing of the turn
//! came after it (a tool result or a thinking-only record means it goes on), and then
//! `SPLIT_BLOCKS_QUIET_FACTOR` quiet periods pass or the next prompt comes; a text record
//! of the message that comes after all takes that end back (`reply_resumed`). A turn
//! open with nothing written for an hour is over, whatever the version
//! (`STALE_TURN_MS`); history is concluded from the records' own times.

use koru_protocol::ObservationBasis;
use serde_json::Value;

use crate::observe::ParseError;
use crate::observe::{json_record, ChatTurns, LineParser, Observation, Turn};

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_claude_code_jsonl";

/// How many quiet periods pass before an end is inferred (30 s at the default 5 s): in
/// 1.0.x and 2.0.x transcripts a message's text block was followed by its tool call up to
/// 10.2 s later (tests/corpus/claude_code, PROVENANCE.md), which a 5 s quiet period took
/// for the end of the turn.
pub const SPLIT_BLOCKS_QUIET_FACTOR: u64 = 6;

/// The parser for one session file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ClaudeCodeParser {
    chat: ChatTurns,
    /// The API message (`message.id`) whose `end_turn` ended the last turn: its later
    /// blocks' records belong to that ended turn.
    ended_message: Option<String>,
}

impl ClaudeCodeParser {
    /// A parser for the session file whose name (without `.jsonl`) is `file_stem`.
    pub fn new(file_stem: &str) -> Self {
        ClaudeCodeParser {
            chat: ChatTurns::new(file_stem),
            ended_message: None,
        }
    }

    pub fn chat_id(&self) -> &str {
        &self.chat.chat_id
    }

    pub fn workspace(&self) -> Option<&str> {
        self.chat.workspace.as_deref()
    }
}

impl LineParser for ClaudeCodeParser {
    /// Parses one complete line. A line that is not a JSON object is skipped (it is
    /// reported by the caller as a diagnostic, never as data).
    fn feed_line(&mut self, line: &[u8]) -> Result<Vec<Observation>, ParseError> {
        let record = json_record(line)?;
        let mut out = Vec::new();
        let chat = &mut self.chat;
        chat.stamp(&record);
        if chat.workspace.is_none() {
            if let Some(cwd) = record.get("cwd").and_then(Value::as_str) {
                chat.workspace = Some(cwd.to_string());
            }
        }
        if !chat.ends_recorded
            && record
                .get("version")
                .and_then(Value::as_str)
                .is_some_and(writes_end_records)
        {
            chat.ends_recorded = true;
        }
        if let Some(session) = record.get("sessionId").and_then(Value::as_str) {
            if !chat.seen() {
                chat.chat_id = session.to_string();
            }
        }
        let kind = record.get("type").and_then(Value::as_str).unwrap_or("");
        if matches!(kind, "user" | "assistant" | "system") {
            chat.see(&mut out);
        }
        // Side chains are sub-agents' conversations, not the chat's own turns.
        if record.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            return Ok(out);
        }
        let flag = |name: &str| record.get(name).and_then(Value::as_bool) == Some(true);
        let content = record.get("message").and_then(|m| m.get("content"));
        match kind {
            "user" => match user_record(&record) {
                UserRecord::NotAPrompt => {}
                UserRecord::ToolResults => {
                    // The result of a tool the assistant asked for: the turn goes on.
                    chat.reply_ready = false;
                }
                UserRecord::Interrupted => chat.cancel(&mut out),
                UserRecord::Prompt(text) => chat.prompt(&mut out, &text),
            },
            "assistant" => {
                if flag("isApiErrorMessage") {
                    chat.fail(&mut out, &Blocks::of(content).text);
                    return Ok(out);
                }
                let message = record.get("message");
                let message_id = message.and_then(|m| m.get("id")).and_then(Value::as_str);
                if message_id.is_some() && message_id == self.ended_message.as_deref() {
                    // A later block of the message that already ended the turn.
                    return Ok(out);
                }
                chat.answering(&mut out, true);
                let blocks = Blocks::of(content);
                let has_text = !blocks.text.trim().is_empty();
                if has_text {
                    chat.set_reply(&blocks.text);
                }
                // Only a record of text asking for no tool may be the turn's last; a
                // thinking-only or tool-use record means the turn goes on.
                chat.reply_ready = has_text && blocks.tool_uses == 0;
                let stop_reason = message
                    .and_then(|m| m.get("stop_reason"))
                    .and_then(Value::as_str);
                if chat.reply_ready && stop_reason == Some("end_turn") {
                    // The model ended its turn with this text and asked for no tool: an
                    // explicit end, written by versions with no end record (`claude -p`
                    // without Stop hooks in 2.1.197, tests/corpus/claude_code).
                    chat.complete(&mut out, ObservationBasis::Explicit);
                    self.ended_message = message_id.map(str::to_string);
                }
            }
            "system" => {
                let subtype = record.get("subtype").and_then(Value::as_str).unwrap_or("");
                if matches!(subtype, "turn_duration" | "stop_hook_summary") {
                    chat.ends_recorded = true;
                    if chat.turn != Turn::Idle {
                        chat.complete(&mut out, ObservationBasis::Explicit);
                    }
                }
            }
            _ => {}
        }
        Ok(out)
    }

    /// Versions without end records write a message's blocks as separate records too, so
    /// the text that looks like a turn's last may be followed by the same message's tool
    /// call: the quiet period before an end is inferred is `SPLIT_BLOCKS_QUIET_FACTOR`
    /// times the usual one.
    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.chat.on_quiet(
            now_ms,
            last_change_ms,
            quiet_ms.saturating_mul(SPLIT_BLOCKS_QUIET_FACTOR),
        )
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.chat.on_history(
            now_ms,
            written_ms,
            quiet_ms.saturating_mul(SPLIT_BLOCKS_QUIET_FACTOR),
        )
    }

    fn turn_open(&self) -> bool {
        self.chat.turn_open()
    }

    fn checkpoint(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self).ok()
    }

    fn restore(&mut self, state: &serde_json::value::RawValue) -> bool {
        crate::observe::restore_from_checkpoint(self, state)
    }
}

/// What a `user` record is to the turn (the rules the turn reader in
/// `conversation::stores::claude_code` shares, so both agree on which records are prompts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserRecord {
    /// Not part of the chat's own turns: side chains (sub-agents), `isMeta` records, slash
    /// commands and their output, reminders, background-task notices, compaction summaries
    /// and blank text.
    NotAPrompt,
    /// Only results of tools the assistant asked for: the turn goes on.
    ToolResults,
    /// `[Request interrupted by user…]`: the turn was cancelled.
    Interrupted,
    /// A prompt a person typed, as its text blocks joined.
    Prompt(String),
}

/// Classifies a record of `type` `user`.
pub fn user_record(record: &serde_json::Map<String, Value>) -> UserRecord {
    let flag = |name: &str| record.get(name).and_then(Value::as_bool) == Some(true);
    if flag("isSidechain") || flag("isMeta") {
        return UserRecord::NotAPrompt;
    }
    let blocks = Blocks::of(record.get("message").and_then(|m| m.get("content")));
    if blocks.tool_results > 0 && blocks.text.is_empty() {
        return UserRecord::ToolResults;
    }
    if blocks.text.starts_with("[Request interrupted by user") {
        return UserRecord::Interrupted;
    }
    let injected = [
        "<command-name>",
        "<command-message>",
        "<local-command-stdout>",
        "<system-reminder>",
        "<task-notification>",
    ]
    .iter()
    .any(|tag| blocks.text.trim_start().starts_with(tag));
    if blocks.text.trim().is_empty() || injected || flag("isCompactSummary") {
        // Slash commands, their output, reminders, background-task notices and
        // compaction summaries are not prompts a person typed.
        return UserRecord::NotAPrompt;
    }
    UserRecord::Prompt(blocks.text)
}

/// The text and block counts of a `message.content`.
struct Blocks {
    text: String,
    tool_uses: usize,
    tool_results: usize,
}

impl Blocks {
    fn of(content: Option<&Value>) -> Blocks {
        let mut blocks = Blocks {
            text: String::new(),
            tool_uses: 0,
            tool_results: 0,
        };
        match content {
            Some(Value::String(text)) => blocks.text = text.clone(),
            Some(Value::Array(items)) => {
                let mut texts = Vec::new();
                for item in items {
                    match item.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(text) = item.get("text").and_then(Value::as_str) {
                                texts.push(text);
                            }
                        }
                        Some("tool_use") => blocks.tool_uses += 1,
                        Some("tool_result") => blocks.tool_results += 1,
                        _ => {}
                    }
                }
                blocks.text = texts.join("\n");
            }
            _ => {}
        }
        blocks
    }
}

/// Whether Claude Code `version` ("2.1.39") writes end-of-turn records: 2.1 and later.
/// They were absent from the 2.0.x transcripts examined and are present in 2.1.x ones
/// (docs/research/chat-store-formats.md §1; tests/corpus/claude_code).
fn writes_end_records(version: &str) -> bool {
    let mut parts = version.split('.').map(|part| part.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 1),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{kinds, prompt_digest};
    use koru_protocol::ObservedKind;

    fn feed(parser: &mut ClaudeCodeParser, lines: &[&str]) -> Vec<Observation> {
        lines
            .iter()
            .flat_map(|line| parser.feed_line(line.as_bytes()).unwrap())
            .collect()
    }

    const PROMPT: &str = r#"{"parentUuid":null,"isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","version":"1.0.51","type":"user","message":{"role":"user","content":"Fix the failing test"},"uuid":"u1","timestamp":"2025-07-14T10:00:00.000Z"}"#;
    const TOOL_USE: &str = r#"{"parentUuid":"u1","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test"}}],"stop_reason":null},"uuid":"a1","timestamp":"2025-07-14T10:00:01.000Z"}"#;
    const TOOL_RESULT: &str = r#"{"parentUuid":"a1","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"1 failed"}]},"uuid":"u2","timestamp":"2025-07-14T10:00:02.000Z"}"#;
    const FINAL: &str = r#"{"parentUuid":"u2","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Fixed: the test expected UTC."}],"stop_reason":null},"uuid":"a2","timestamp":"2025-07-14T10:00:03.000Z"}"#;
    const TURN_END: &str = r#"{"parentUuid":"a2","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"system","subtype":"turn_duration","durationMs":3000,"uuid":"y1","timestamp":"2025-07-14T10:00:03.100Z"}"#;

    #[test]
    fn a_turn_with_a_tool_call_ends_on_the_turn_duration_record() {
        let mut parser = ClaudeCodeParser::new("file-stem");
        let events = feed(
            &mut parser,
            &[PROMPT, TOOL_USE, TOOL_RESULT, FINAL, TURN_END],
        );
        assert_eq!(kinds(&events), crate::observe::A_WHOLE_TURN);
        assert_eq!(parser.chat_id(), "s-1");
        assert_eq!(parser.workspace(), Some("/home/me/repo"));
        let ObservedKind::ReplyCompleted { excerpt, length } = &events[3].event else {
            panic!()
        };
        assert_eq!(excerpt, "Fixed: the test expected UTC.");
        assert_eq!(*length, 29);
        assert_eq!(events[3].store_ts_ms, Some(1_752_487_203_100));
        let ObservedKind::PromptSeen { digest, length, .. } = &events[1].event else {
            panic!()
        };
        assert_eq!(*length, 20);
        assert_eq!(digest, &prompt_digest("  Fix the   failing\ntest "));
    }

    #[test]
    fn without_an_end_record_completion_is_inferred_after_quiet_or_at_the_next_prompt() {
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, TOOL_USE]);
        // A pending tool use is never taken as the end, however quiet.
        assert!(parser.on_quiet(10_000, 0, 1_000).is_empty());
        feed(&mut parser, &[TOOL_RESULT, FINAL]);
        assert!(
            parser.on_quiet(5_900, 0, 1_000).is_empty(),
            "not quiet long enough: six quiet periods for a version that splits blocks"
        );
        assert_eq!(
            kinds(&parser.on_quiet(6_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        assert!(parser.on_quiet(9_000, 0, 1_000).is_empty(), "only once");

        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, FINAL]);
        assert_eq!(
            kinds(&feed(&mut parser, &[PROMPT])),
            ["reply_completed (inferred)", "prompt_seen"]
        );
    }

    /// `line` with its `"version"` replaced (the constants above are 1.0.51).
    fn at_version(line: &str, version: &str) -> String {
        let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
        record["version"] = serde_json::json!(version);
        record.to_string()
    }

    const THINKING: &str = r#"{"parentUuid":"u2","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Now the fix.","signature":"x"}],"stop_reason":null},"uuid":"a3","timestamp":"2025-07-14T10:00:04.000Z"}"#;
    const TEXT_FIRST: &str = r#"{"parentUuid":"u1","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Let me write the fix."}],"stop_reason":null},"uuid":"a1","timestamp":"2025-07-14T10:00:01.000Z"}"#;

    #[test]
    fn a_version_that_writes_end_records_is_never_inferred() {
        // 2.1 writes a message's blocks as separate records: the text record comes first
        // and its tool_use can follow a minute later. Quiet means nothing there.
        let mut parser = ClaudeCodeParser::new("s-1");
        let lines = [
            at_version(PROMPT, "2.1.39"),
            at_version(TEXT_FIRST, "2.1.39"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        assert_eq!(
            kinds(&feed(&mut parser, &lines)),
            ["chat_seen", "prompt_seen", "reply_started"]
        );
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty());
        // A prompt typed meanwhile (queued) does not end it either.
        assert_eq!(
            kinds(&feed(&mut parser, &[&at_version(PROMPT, "2.1.39")])),
            ["prompt_seen"]
        );
        let events = feed(&mut parser, &[FINAL, TURN_END]);
        assert_eq!(kinds(&events), ["reply_started", "reply_completed"]);
        assert_eq!(
            events[1].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Fixed: the test expected UTC.".into(),
                length: 29
            }
        );

        // A file with no version that has shown an end record: later turns wait for
        // theirs too.
        let mut parser = ClaudeCodeParser::new("s-1");
        let unversioned = |line: &str| {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            record.as_object_mut().unwrap().remove("version");
            record.to_string()
        };
        let lines: Vec<String> = [PROMPT, FINAL, TURN_END, PROMPT, FINAL]
            .iter()
            .map(|line| unversioned(line))
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        feed(&mut parser, &lines);
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty());
    }

    /// An assistant record of 2.1.197 as `claude -p` writes it: one block, and the
    /// message's real `stop_reason`.
    fn block_record(message_id: &str, block: serde_json::Value, stop_reason: &str) -> String {
        serde_json::json!({"type": "assistant", "sessionId": "s-1", "version": "2.1.197",
            "cwd": "/home/me/repo", "timestamp": "2026-11-25T13:17:07.004Z",
            "message": {"id": message_id, "role": "assistant", "content": [block],
                        "stop_reason": stop_reason}})
        .to_string()
    }

    #[test]
    fn a_text_record_whose_message_ended_the_turn_ends_it_explicitly() {
        // `claude -p` 2.1.197 without Stop hooks writes no end record; each block record
        // carries its message's stop_reason (tests/corpus/claude_code/f49780b5-….jsonl).
        let text = |text: &str| serde_json::json!({"type": "text", "text": text});
        let preamble = block_record("msg_1", text("I'll run `ls`."), "tool_use");
        let call = block_record(
            "msg_1",
            serde_json::json!({"type": "tool_use", "id": "t1", "name": "Bash",
                               "input": {"command": "ls"}}),
            "tool_use",
        );
        let thinking = block_record(
            "msg_2",
            serde_json::json!({"type": "thinking", "thinking": "Done.", "signature": "x"}),
            "end_turn",
        );
        let answer = block_record("msg_2", text("`ls` printed: a, b."), "end_turn");
        let late_block = block_record("msg_2", text("And one more block."), "end_turn");
        let last_prompt = r#"{"type":"last-prompt","lastPrompt":"Fix the failing test","leafUuid":"a2","sessionId":"s-1"}"#;
        let stop_hook = at_version(
            &TURN_END.replace("turn_duration", "stop_hook_summary"),
            "2.1.197",
        );
        let mut parser = ClaudeCodeParser::new("s-1");
        let prompt = at_version(PROMPT, "2.1.197");
        let start = [prompt.as_str(), &preamble, &call, TOOL_RESULT, &thinking];
        assert_eq!(
            kinds(&feed(&mut parser, &start)),
            ["chat_seen", "prompt_seen", "reply_started"],
            "`tool_use`, and `end_turn` on a thinking block, do not end the turn"
        );
        let events = feed(&mut parser, &[&answer]);
        assert_eq!(kinds(&events), ["reply_completed"]);
        assert_eq!(events[0].basis, ObservationBasis::Explicit);
        assert_eq!(
            events[0].event,
            ObservedKind::ReplyCompleted {
                excerpt: "`ls` printed: a, b.".into(),
                length: 19
            }
        );
        // A later block of the same message, the bookkeeping after it and an end record
        // (with Stop hooks) add no second end.
        assert!(feed(&mut parser, &[&late_block, last_prompt, &stop_hook]).is_empty());
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty());

        // A null stop_reason (2.1.39 and older) says nothing.
        let mut parser = ClaudeCodeParser::new("s-1");
        let lines = [at_version(PROMPT, "2.1.39"), at_version(FINAL, "2.1.39")];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        assert_eq!(
            kinds(&feed(&mut parser, &lines)),
            ["chat_seen", "prompt_seen", "reply_started"]
        );
    }

    #[test]
    fn an_inferred_end_needs_a_last_record_of_text_without_tool_use() {
        // After a tool result the turn goes on, whatever text came before.
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, TOOL_USE, TOOL_RESULT]);
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty(), "tool result");
        // A thinking-only record after a text: the older text is not the reply.
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, TEXT_FIRST, THINKING]);
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty(), "thinking");
        assert_eq!(
            kinds(&feed(&mut parser, &[PROMPT])),
            ["prompt_seen"],
            "nor at the next prompt"
        );
        // A whitespace-only text record is not reply text.
        let blank = TEXT_FIRST.replace("Let me write the fix.", "  ");
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, &blank]);
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty(), "blank");
        // Text with nothing after it: complete after quiet, with that text.
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(
            &mut parser,
            &[PROMPT, TOOL_USE, TOOL_RESULT, THINKING, FINAL],
        );
        let events = parser.on_quiet(600_000, 0, 1_000);
        assert_eq!(
            events[0].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Fixed: the test expected UTC.".into(),
                length: 29
            }
        );
    }

    /// `line` with its `"timestamp"` replaced.
    fn at_time(line: &str, ts: &str) -> String {
        let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
        record["timestamp"] = serde_json::json!(ts);
        record.to_string()
    }

    #[test]
    fn a_later_block_of_a_turn_takes_an_inferred_end_back_once() {
        // 1.0.x: the text block of a message, quiet for long enough, then its tool call.
        let text = TEXT_FIRST.replace("\"version\"", "\"v\"");
        let call = r#"{"parentUuid":"a1","isSidechain":false,"cwd":"/home/me/repo","sessionId":"s-1","type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Write","input":{}}],"stop_reason":null},"uuid":"a1b","timestamp":"2025-07-14T10:00:12.000Z"}"#;
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, &text]);
        assert_eq!(
            kinds(&parser.on_quiet(60_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        assert_eq!(
            kinds(&feed(&mut parser, &[call, TOOL_RESULT])),
            ["reply_resumed"],
            "no second reply_started: the end is taken back"
        );
        assert!(
            parser.on_quiet(600_000, 0, 1_000).is_empty(),
            "a tool result pending"
        );
        feed(&mut parser, &[FINAL]);
        assert_eq!(
            kinds(&parser.on_quiet(660_000, 600_000, 1_000)),
            ["reply_completed (inferred)"]
        );
        assert!(
            parser.on_quiet(9_000_000, 600_000, 1_000).is_empty(),
            "one end"
        );
        // The next prompt starts a new turn: no resumption of the old one.
        assert_eq!(
            kinds(&feed(&mut parser, &[PROMPT, FINAL])),
            ["prompt_seen", "reply_started"]
        );
    }

    #[test]
    fn a_turn_left_open_is_over_after_an_hour_and_history_goes_by_the_records_own_time() {
        let hour = crate::observe::STALE_TURN_MS;
        let record_ms = 1_752_487_204_000; // THINKING's timestamp
                                           // 2.0.x: the last record a text after a thinking record, no end record, in a
                                           // version that writes them — never complete by quiet alone…
        let lines = [
            at_version(PROMPT, "2.1.5"),
            at_version(TEXT_FIRST, "2.1.5"),
            at_version(THINKING, "2.1.5"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &lines);
        assert!(parser.on_quiet(hour - 1, 0, 1_000).is_empty());
        // …but not replying for ever: a thinking block pending is no reply, so cancelled.
        let events = parser.on_quiet(hour, 0, 1_000);
        assert_eq!(kinds(&events), ["cancelled (inferred)"]);

        // History: a file copied yesterday (its mtime recent) whose records are a year
        // old is concluded by the records' time.
        let mut parser = ClaudeCodeParser::new("s-1");
        feed(&mut parser, &[PROMPT, FINAL]);
        let now = record_ms + 365 * 24 * hour;
        let events = parser.on_history(now, now - 1_000, 1_000);
        assert_eq!(kinds(&events), ["reply_completed (inferred)"]);
        // A file still being written (its last record a minute old) stays open.
        let mut parser = ClaudeCodeParser::new("s-1");
        let lines = [
            PROMPT.to_string(),
            at_time(TOOL_USE, "2025-07-14T10:00:01.000Z"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        feed(&mut parser, &lines);
        assert!(parser
            .on_history(record_ms + 60_000, record_ms, 1_000)
            .is_empty());
        assert!(parser.turn_open());
        // A turn concluded stale that goes on after all is resumed.
        let events = parser.on_quiet(record_ms + 2 * hour, record_ms, 1_000);
        assert_eq!(kinds(&events), ["cancelled (inferred)"]);
        assert_eq!(
            kinds(&feed(&mut parser, &[TOOL_RESULT, FINAL])),
            ["reply_resumed"]
        );
    }

    #[test]
    fn a_checkpoint_resumes_the_parser_where_it_stood() {
        let mut whole = ClaudeCodeParser::new("f");
        let all = feed(
            &mut whole,
            &[PROMPT, TOOL_USE, TOOL_RESULT, FINAL, TURN_END],
        );
        let mut first = ClaudeCodeParser::new("f");
        let mut seen = feed(&mut first, &[PROMPT, TOOL_USE]);
        let state = serde_json::value::to_raw_value(&first.checkpoint().unwrap()).unwrap();
        let mut resumed = ClaudeCodeParser::new("other");
        assert!(resumed.restore(&state));
        seen.extend(feed(&mut resumed, &[TOOL_RESULT, FINAL, TURN_END]));
        assert_eq!(seen, all);
        let not_one = serde_json::value::to_raw_value(&serde_json::json!({"chat": 3})).unwrap();
        assert!(!resumed.restore(&not_one));
    }

    #[test]
    fn a_background_task_notice_is_not_a_prompt() {
        let mut parser = ClaudeCodeParser::new("s-1");
        let notice = r#"{"type":"user","sessionId":"s-1","version":"2.1.39","message":{"role":"user","content":"<task-notification>\n<task-id>b7636e2</task-id>\n<status>completed</status>\n</task-notification>"},"timestamp":"2026-02-12T21:03:25.950Z"}"#;
        let end = r#"{"type":"system","subtype":"stop_hook_summary","sessionId":"s-1","version":"2.1.39","timestamp":"2026-02-12T21:03:34.206Z"}"#;
        let lines = [PROMPT, FINAL, TURN_END, notice, FINAL, end];
        assert_eq!(
            kinds(&feed(&mut parser, &lines)),
            [
                "chat_seen",
                "prompt_seen",
                "reply_started",
                "reply_completed",
                "reply_started",
                "reply_completed"
            ]
        );
    }

    #[test]
    fn an_interrupted_turn_is_cancelled_and_an_api_error_failed() {
        let mut parser = ClaudeCodeParser::new("s-1");
        let interrupted = r#"{"type":"user","sessionId":"s-1","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},"timestamp":"2025-07-14T10:00:05Z"}"#;
        assert_eq!(
            kinds(&feed(&mut parser, &[PROMPT, TOOL_USE, interrupted])),
            ["chat_seen", "prompt_seen", "reply_started", "cancelled"]
        );
        let api_error = r#"{"type":"assistant","sessionId":"s-1","isApiErrorMessage":true,"message":{"role":"assistant","content":[{"type":"text","text":"API Error: 529 overloaded"}]},"timestamp":"2025-07-14T10:00:06Z"}"#;
        let events = feed(&mut parser, &[PROMPT, api_error]);
        assert_eq!(kinds(&events), ["prompt_seen", "failed"]);
        assert_eq!(
            events[1].event,
            ObservedKind::Failed {
                reason: "API Error: 529 overloaded".into()
            }
        );
    }

    #[test]
    fn meta_sidechain_summary_and_garbage_lines_are_not_turns() {
        let mut parser = ClaudeCodeParser::new("s-1");
        let meta = r#"{"type":"user","isMeta":true,"sessionId":"s-1","message":{"role":"user","content":"<local-command-caveat>"}}"#;
        let side = r#"{"type":"user","isSidechain":true,"sessionId":"s-1","message":{"role":"user","content":"sub-agent task"}}"#;
        let summary = r#"{"type":"summary","summary":"Fixing tests","leafUuid":"a2"}"#;
        assert_eq!(
            kinds(&feed(&mut parser, &[meta, side, summary])),
            ["chat_seen"]
        );
        assert!(parser.feed_line(b"{\"type\":\"user\",").is_err());
        assert!(parser.feed_line(b"[1,2]").is_err());
    }
}

#[cfg(test)]
mod fuzz {
    //! Property tests over arbitrary input: the parser never panics, whatever the bytes.
    use super::*;
    use proptest::prelude::*;

    /// JSON-ish lines: real record shapes with arbitrary values, and plain garbage.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let kinds = prop_oneof![
            Just("user"),
            Just("assistant"),
            Just("system"),
            Just("summary"),
            Just("x")
        ];
        let content = prop_oneof![
            any::<String>().prop_map(serde_json::Value::String),
            Just(serde_json::json!([{"type": "tool_use", "id": "t"}])),
            Just(serde_json::json!([{"type": "tool_result"}])),
            any::<String>().prop_map(|t| serde_json::json!([{"type": "text", "text": t}])),
            Just(serde_json::json!(null)),
            Just(serde_json::json!(7)),
        ];
        let record = (
            kinds,
            content,
            any::<bool>(),
            any::<String>(),
            any::<String>(),
        )
            .prop_map(|(kind, content, flag, subtype, ts)| {
                serde_json::json!({"type": kind, "sessionId": "s", "cwd": "/w", "timestamp": ts,
                    "isMeta": flag, "isApiErrorMessage": !flag, "subtype": subtype,
                    "message": {"role": kind, "content": content}})
                .to_string()
                .into_bytes()
            });
        prop_oneof![record, proptest::collection::vec(any::<u8>(), 0..200)]
    }

    proptest! {
        #[test]
        fn any_sequence_of_lines_never_panics(lines in proptest::collection::vec(line(), 0..40), quiet in any::<u64>()) {
            let mut parser = ClaudeCodeParser::new("f");
            for line in &lines {
                let _ = parser.feed_line(line);
            }
            let _ = parser.on_quiet(quiet, quiet / 2, 1);
        }
    }
}

//! Claude Code's session logs (`~/.claude/projects/<cwd with / as ->/<session>.jsonl`): a pure parser from JSONL records to observations — bytes in, events out, no I/O.
//!
//! Format facts (docs/observers.md): one JSON record per line, chained by `uuid` /
//! `parentUuid`, with `type` `user` | `assistant` | `system` | `summary`, `sessionId`,
//! `cwd`, an ISO-8601 `timestamp` and `message {role, content}` where `content` is a string
//! or a list of blocks (`text`, `tool_use`, `tool_result`, `thinking`). A turn ends on a
//! `system` record with `subtype` `turn_duration` or `stop_hook_summary` where the version
//! writes one — never on `stop_reason`, which is null on final replies in several
//! versions. Without such a record completion is inferred: the last assistant record has
//! text and no pending tool use, and then a quiet period passes or the next prompt comes.
//! A user record `[Request interrupted by user…]` ends the turn as cancelled.

use koru_protocol::ObservationBasis;
use serde_json::Value;

use super::{json_record, ChatTurns, LineParser, Observation, Turn};

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_claude_code_jsonl";

/// The parser for one session file.
#[derive(Debug)]
pub struct ClaudeCodeParser {
    chat: ChatTurns,
}

impl ClaudeCodeParser {
    /// A parser for the session file whose name (without `.jsonl`) is `file_stem`.
    pub fn new(file_stem: &str) -> Self {
        ClaudeCodeParser {
            chat: ChatTurns::new(file_stem),
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
    fn feed_line(&mut self, line: &[u8]) -> Result<Vec<Observation>, String> {
        let record = json_record(line)?;
        let mut out = Vec::new();
        let chat = &mut self.chat;
        chat.stamp(&record);
        if chat.workspace.is_none() {
            if let Some(cwd) = record.get("cwd").and_then(Value::as_str) {
                chat.workspace = Some(cwd.to_string());
            }
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
            "user" => {
                if flag("isMeta") {
                    return Ok(out);
                }
                let blocks = Blocks::of(content);
                if blocks.tool_results > 0 && blocks.text.is_empty() {
                    // The result of a tool the assistant asked for: the turn goes on.
                    chat.tool_pending = false;
                    return Ok(out);
                }
                if blocks.text.starts_with("[Request interrupted by user") {
                    chat.cancel(&mut out);
                    return Ok(out);
                }
                let injected = [
                    "<command-name>",
                    "<command-message>",
                    "<local-command-stdout>",
                    "<system-reminder>",
                ]
                .iter()
                .any(|tag| blocks.text.trim_start().starts_with(tag));
                if blocks.text.is_empty() || injected || flag("isCompactSummary") {
                    // Slash commands, their output, reminders and compaction summaries are
                    // not prompts a person typed.
                    return Ok(out);
                }
                chat.prompt(&mut out, &blocks.text);
            }
            "assistant" => {
                if flag("isApiErrorMessage") {
                    chat.fail(&mut out, &Blocks::of(content).text);
                    return Ok(out);
                }
                chat.answering(&mut out, true);
                let blocks = Blocks::of(content);
                if !blocks.text.is_empty() {
                    chat.last_text = blocks.text;
                }
                chat.tool_pending = blocks.tool_uses > 0;
            }
            "system" => {
                let subtype = record.get("subtype").and_then(Value::as_str).unwrap_or("");
                if matches!(subtype, "turn_duration" | "stop_hook_summary")
                    && chat.turn != Turn::Idle
                {
                    chat.complete(&mut out, ObservationBasis::Explicit);
                }
            }
            _ => {}
        }
        Ok(out)
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.chat.on_quiet(now_ms, last_change_ms, quiet_ms)
    }
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

/// An RFC 3339 timestamp as Unix milliseconds.
pub fn parse_ts(text: &str) -> Option<u64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
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
            parser.on_quiet(500, 0, 1_000).is_empty(),
            "not quiet long enough"
        );
        assert_eq!(
            kinds(&parser.on_quiet(1_500, 0, 1_000)),
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

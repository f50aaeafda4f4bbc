//! OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): a pure parser from rollout lines to observations — bytes in, events out, no I/O.
//!
//! Format facts (docs/research/chat-store-formats.md §2): every line is
//! `{timestamp, type, payload}`. `session_meta.payload` has the thread `id` and the `cwd`.
//! `event_msg` payloads carry the turn: `user_message {message}`, `agent_message {message,
//! phase?}`, `task_started`, `task_complete {last_agent_message, error?}` and `turn_aborted
//! {reason}`. Approval requests are never written to rollouts.
//!
//! `task_started` and `task_complete` are persisted together (both were left out of
//! rollouts by openai/codex `rollout/policy.rs` until early 2026). A rollout that has
//! either records the end of every turn, so its ends are never inferred: a turn with
//! `task_started` and no `task_complete` is still running, however long it is quiet and
//! whatever it runs. Only older rollouts, with no task events, get the inferred end
//! (quiet period or next prompt), and only after an agent message that is not
//! commentary, with no reasoning or tool call after it.

use koru_protocol::ObservationBasis;
use serde_json::Value;

use crate::observe::ParseError;
use crate::observe::{json_record, ChatTurns, LineParser, Observation, Turn};

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_codex_jsonl";

/// The parser for one rollout file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct CodexParser {
    chat: ChatTurns,
}

impl CodexParser {
    /// A parser for the rollout whose file name (without `.jsonl`) is `file_stem`; the
    /// thread id from `session_meta` replaces it.
    pub fn new(file_stem: &str) -> Self {
        CodexParser {
            chat: ChatTurns::new(file_stem),
        }
    }
}

impl LineParser for CodexParser {
    /// Parses one complete line; a line that is not a JSON object is an error (reported
    /// by the caller, never data).
    fn feed_line(&mut self, line: &[u8]) -> Result<Vec<Observation>, ParseError> {
        let record = json_record(line)?;
        let mut out = Vec::new();
        let chat = &mut self.chat;
        chat.stamp(&record);
        let payload = record.get("payload").cloned().unwrap_or(Value::Null);
        let text = |key: &str| {
            payload
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match record.get("type").and_then(Value::as_str).unwrap_or("") {
            "session_meta" => {
                if !chat.seen() {
                    if let Some(id) = payload.get("id").and_then(Value::as_str) {
                        chat.chat_id = id.to_string();
                    }
                }
                if let Some(cwd) = payload.get("cwd").and_then(Value::as_str) {
                    chat.workspace = Some(cwd.to_string());
                }
                chat.see(&mut out);
            }
            "event_msg" => {
                chat.see(&mut out);
                match payload.get("type").and_then(Value::as_str).unwrap_or("") {
                    "user_message" => {
                        let prompt = text("message");
                        if !prompt.trim().is_empty() {
                            chat.prompt(&mut out, &prompt);
                        }
                    }
                    "task_started" => chat.ends_recorded = true,
                    "agent_reasoning" => {
                        chat.answering(&mut out, false);
                        chat.reply_ready = false;
                    }
                    "item_completed" => {
                        let item = payload.get("item").unwrap_or(&Value::Null);
                        let item_text = || item_text(item);
                        match item.get("type").and_then(Value::as_str).unwrap_or("") {
                            "UserMessage" => {
                                let prompt = item_text();
                                if !prompt.trim().is_empty() {
                                    chat.prompt(&mut out, &prompt);
                                }
                            }
                            "AgentMessage" => {
                                chat.answering(&mut out, false);
                                agent_text(chat, item_text(), item.get("phase"));
                            }
                            "Reasoning" => {
                                chat.answering(&mut out, false);
                                chat.reply_ready = false;
                            }
                            _ => {}
                        }
                    }
                    "agent_message" => {
                        chat.answering(&mut out, false);
                        agent_text(chat, text("message"), payload.get("phase"));
                    }
                    "task_complete" => {
                        chat.ends_recorded = true;
                        if chat.turn != Turn::Idle {
                            task_complete(chat, &payload, &mut out);
                        }
                    }
                    "turn_aborted" => chat.cancel(&mut out),
                    _ => {}
                }
            }
            // The agent's tool calls and their output: the turn goes on.
            "response_item"
                if matches!(
                    payload.get("type").and_then(Value::as_str),
                    Some(
                        "function_call"
                            | "function_call_output"
                            | "custom_tool_call"
                            | "custom_tool_call_output"
                            | "local_shell_call"
                            | "web_search_call"
                            | "reasoning"
                    )
                ) =>
            {
                chat.reply_ready = false;
            }
            _ => {}
        }
        Ok(out)
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.chat.on_quiet(now_ms, last_change_ms, quiet_ms)
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.chat.on_history(now_ms, written_ms, quiet_ms)
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

/// The turn ended on `task_complete`: failed when it carries an error, else complete with
/// its `last_agent_message` (or the last agent message read).
fn task_complete(chat: &mut ChatTurns, payload: &Value, out: &mut Vec<Observation>) {
    if let Some(last) = payload.get("last_agent_message").and_then(Value::as_str) {
        chat.set_reply(last);
    }
    match payload.get("error").filter(|e| !e.is_null()) {
        Some(error) => {
            let reason = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the turn failed");
            chat.fail(out, reason);
        }
        None => chat.complete(out, ObservationBasis::Explicit),
    }
}

/// An agent message: the reply so far. Commentary (`phase: commentary`, said while the
/// agent keeps working) is never the end of a turn.
fn agent_text(chat: &mut ChatTurns, message: String, phase: Option<&Value>) {
    if message.is_empty() {
        return;
    }
    chat.set_reply(&message);
    chat.reply_ready = phase.and_then(Value::as_str) != Some("commentary");
}

/// The text of a paginated-mode item: its `content` parts' `text`, joined, or its own
/// `text`.
pub fn item_text(item: &Value) -> String {
    match item.get("content").and_then(Value::as_array) {
        Some(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        None => item
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;
    use koru_protocol::ObservedKind;

    fn feed(parser: &mut CodexParser, lines: &[&str]) -> Vec<Observation> {
        lines
            .iter()
            .flat_map(|l| parser.feed_line(l.as_bytes()).unwrap())
            .collect()
    }

    const META: &str = r#"{"timestamp":"2026-03-01T10:00:00.100Z","type":"session_meta","payload":{"id":"0198c4cf-8587","timestamp":"2026-03-01T10:00:00.050Z","cwd":"/home/u/proj","originator":"codex_cli_rs","cli_version":"0.110.0","source":"cli"}}"#;
    const STARTED: &str = r#"{"timestamp":"2026-03-01T10:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#;
    const USER: &str = r#"{"timestamp":"2026-03-01T10:00:01.010Z","type":"event_msg","payload":{"type":"user_message","message":"fix the failing test","images":[]}}"#;
    const ITEM: &str = r#"{"timestamp":"2026-03-01T10:00:20.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}}"#;
    const AGENT: &str = r#"{"timestamp":"2026-03-01T10:00:20.001Z","type":"event_msg","payload":{"type":"agent_message","message":"Fixed: off-by-one in parse().","phase":"final_answer"}}"#;
    const COMPLETE: &str = r#"{"timestamp":"2026-03-01T10:00:20.050Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1","last_agent_message":"Fixed: off-by-one in parse().","duration_ms":19050}}"#;

    #[test]
    fn a_turn_ends_on_task_complete_with_the_last_agent_message() {
        let mut parser = CodexParser::new("rollout-x");
        let events = feed(&mut parser, &[META, STARTED, USER, ITEM, AGENT, COMPLETE]);
        assert_eq!(kinds(&events), crate::observe::A_WHOLE_TURN);
        assert_eq!(events[0].chat_id, "0198c4cf-8587");
        assert_eq!(events[1].workspace.as_deref(), Some("/home/u/proj"));
        assert_eq!(
            events[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Fixed: off-by-one in parse().".into(),
                length: 29
            }
        );
        assert_eq!(events[3].store_ts_ms, Some(1_772_359_220_050));
    }

    const COMMENTARY: &str = r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"event_msg","payload":{"type":"agent_message","message":"Running the test suite now.","phase":"commentary"}}"#;
    const CALL: &str = r#"{"timestamp":"2026-03-01T10:00:05.100Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cargo test\"}","call_id":"call_1"}}"#;

    #[test]
    fn a_rollout_with_task_events_is_never_inferred_and_its_real_end_is_kept() {
        let mut parser = CodexParser::new("rollout-x");
        let events = feed(&mut parser, &[META, STARTED, USER, COMMENTARY, CALL]);
        assert_eq!(
            kinds(&events),
            ["chat_seen", "prompt_seen", "reply_started"]
        );
        // A command runs for ten minutes: still replying.
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty());
        // Even an agent message that is not commentary is not the end without
        // task_complete.
        feed(&mut parser, &[AGENT]);
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty());
        let events = feed(&mut parser, &[COMPLETE]);
        assert_eq!(kinds(&events), ["reply_completed"]);
        assert_eq!(events[0].basis, ObservationBasis::Explicit);
        assert_eq!(
            events[0].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Fixed: off-by-one in parse().".into(),
                length: 29
            }
        );
        // A prompt steered into a running turn does not end it.
        let mut parser = CodexParser::new("rollout-x");
        feed(&mut parser, &[META, STARTED, USER, AGENT]);
        assert_eq!(kinds(&feed(&mut parser, &[USER])), ["prompt_seen"]);
    }

    #[test]
    fn without_task_events_commentary_and_tool_calls_are_not_an_end() {
        let mut parser = CodexParser::new("r");
        feed(&mut parser, &[META, USER, COMMENTARY]);
        assert!(parser.on_quiet(600_000, 0, 1_000).is_empty(), "commentary");
        feed(&mut parser, &[AGENT, CALL]);
        assert!(
            parser.on_quiet(600_000, 0, 1_000).is_empty(),
            "a tool call after it"
        );
        feed(&mut parser, &[AGENT]);
        assert_eq!(
            kinds(&parser.on_quiet(600_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
    }

    #[test]
    fn older_rollouts_without_task_events_are_inferred_and_aborts_and_errors_classified() {
        let mut parser = CodexParser::new("r");
        feed(&mut parser, &[META, USER, AGENT]);
        assert_eq!(
            kinds(&parser.on_quiet(2_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        let aborted = r#"{"timestamp":"2026-03-01T10:05:00.000Z","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#;
        assert_eq!(
            kinds(&feed(&mut parser, &[USER, AGENT, aborted])),
            ["prompt_seen", "reply_started", "cancelled"]
        );
        let failed = r#"{"timestamp":"2026-03-01T10:06:00.000Z","type":"event_msg","payload":{"type":"task_complete","last_agent_message":null,"error":{"message":"stream disconnected"}}}"#;
        let events = feed(&mut parser, &[USER, failed]);
        assert_eq!(kinds(&events), ["prompt_seen", "failed"]);
        assert_eq!(
            events[1].event,
            ObservedKind::Failed {
                reason: "stream disconnected".into()
            }
        );
        assert!(parser.feed_line(b"not json").is_err());
    }

    #[test]
    fn paginated_rollouts_carry_the_messages_as_completed_items() {
        let mut parser = CodexParser::new("r");
        let user = r#"{"timestamp":"2026-09-07T10:00:01.000Z","type":"event_msg","payload":{"type":"item_completed","turn_id":"t1","item":{"type":"UserMessage","id":"i1","content":[{"type":"text","text":"rename the crate"}]}}}"#;
        let reasoning = r#"{"timestamp":"2026-09-07T10:00:02.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"Reasoning","id":"i2","summary_text":[]}}}"#;
        let agent = r#"{"timestamp":"2026-09-07T10:00:09.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"AgentMessage","id":"i3","content":[{"type":"Text","text":"Renamed to koru-core."}]}}}"#;
        let complete = r#"{"timestamp":"2026-09-07T10:00:09.500Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1","last_agent_message":null}}"#;
        let events = feed(&mut parser, &[META, user, reasoning, agent, complete]);
        assert_eq!(kinds(&events), crate::observe::A_WHOLE_TURN);
        assert_eq!(
            events[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Renamed to koru-core.".into(),
                length: 21
            }
        );
    }
}

#[cfg(test)]
mod fuzz {
    //! The parser never panics, whatever the lines.
    use super::*;
    use proptest::prelude::*;

    fn line() -> impl Strategy<Value = Vec<u8>> {
        let kinds = prop_oneof![
            Just("user_message"),
            Just("agent_message"),
            Just("task_complete"),
            Just("turn_aborted"),
            Just("task_started"),
            Just("other")
        ];
        let record = (kinds, any::<String>(), any::<bool>(), any::<String>()).prop_map(
            |(kind, text, meta, ts)| {
                if meta {
                    serde_json::json!({"timestamp": ts, "type": "session_meta", "payload": {"id": text, "cwd": 5}})
                } else {
                    serde_json::json!({"timestamp": ts, "type": "event_msg", "payload": {"type": kind,
                        "message": text, "last_agent_message": null, "error": {"message": 3}}})
                }
                .to_string()
                .into_bytes()
            },
        );
        prop_oneof![record, proptest::collection::vec(any::<u8>(), 0..200)]
    }

    proptest! {
        #[test]
        fn any_sequence_of_lines_never_panics(lines in proptest::collection::vec(line(), 0..40), quiet in any::<u64>()) {
            let mut parser = CodexParser::new("f");
            for line in &lines {
                let _ = parser.feed_line(line);
            }
            let _ = parser.on_quiet(quiet, quiet / 2, 1);
        }
    }
}

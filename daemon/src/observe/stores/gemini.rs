//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.json` and, since 0.39, `*.jsonl`): pure readers from bytes to `ChatSnapshot`.
//!
//! Format facts (docs/research/chat-store-formats.md §6, checked against
//! google-gemini/gemini-cli `chatRecordingService.ts` @5411f113): before 0.39 a session is
//! one JSON file `{sessionId, projectHash, startTime, lastUpdated, messages[]}` rewritten
//! whole; since 0.39 it is a JSONL log read as the CLI's own loader reads it — a record
//! with a string `$rewindTo` drops that message and every later one (all of them when the
//! id is unknown), one with a string `id` is a message (the same id again replaces it in
//! place), `{"$set":{…}}` merges metadata (a `messages` array there replaces them all),
//! and one with `sessionId` and `projectHash` is the metadata line. A message is
//! `{id, timestamp, type, content, displayContent?}`: `user` (a prompt when it has text
//! and is not a command — the CLI's `isIgnoredUserContent`; tool results are `user`
//! messages with `functionResponse` parts), `gemini` (reply text, `toolCalls[]` recorded
//! once they complete, `thoughts`), `info` ("Request cancelled." on a user cancel),
//! `error`, `warning`. Gemini records no turn end: a reply with no pending tool is `Open`
//! and the differ infers completion after a quiet period. The reply is the turn's last
//! `gemini` message with text, as for the other stores' final reply text.

use std::collections::HashMap;

use koru_protocol::NeedsInputKind;
use serde_json::Value;

use crate::observe::snapshot::{ChatSnapshot, TurnSnapshot, TurnState};
use crate::observe::text::parse_ts;
use crate::observe::ParseError;

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_gemini_cli";

/// What the CLI writes to the chat when the user cancels a request.
pub const CANCELLED_NOTICE: &str = "Request cancelled.";

/// Reads a pre-0.39 session file (one JSON object) into a snapshot. `Err` when the bytes
/// are not a complete session object (a file caught mid-rewrite: read it again).
pub fn parse_session_json(
    bytes: &[u8],
    fallback_chat_id: &str,
    workspace: Option<&str>,
) -> Result<ChatSnapshot, ParseError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ParseError::NotJson(format!("session file is not complete JSON: {error}"))
    })?;
    let Value::Object(session) = value else {
        return Err(ParseError::Shape(
            "session file is not a JSON object".into(),
        ));
    };
    let Some(Value::Array(messages)) = session.get("messages") else {
        return Err(ParseError::Shape(
            "session file has no `messages` array".into(),
        ));
    };
    let chat_id = session
        .get("sessionId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .unwrap_or(fallback_chat_id);
    Ok(ChatSnapshot {
        chat_id: chat_id.to_string(),
        workspace: workspace.map(str::to_string),
        turns: turns_of(messages),
        updated_ms: session_time(&session),
    })
}

/// A session's own time: `lastUpdated`, else `startTime`.
fn session_time(metadata: &serde_json::Map<String, Value>) -> Option<u64> {
    ["lastUpdated", "startTime"].iter().find_map(|key| {
        metadata
            .get(*key)
            .and_then(Value::as_str)
            .and_then(parse_ts)
    })
}

/// A 0.39+ JSONL session log, applied line by line.
#[derive(Debug, Default)]
pub struct GeminiLog {
    session_id: Option<String>,
    /// A metadata line (or `$set`) was read.
    has_metadata: bool,
    /// The session's own time: its metadata's latest `lastUpdated` (else `startTime`).
    updated_ms: Option<u64>,
    /// The live messages, in the order they were first written.
    messages: Vec<Value>,
    /// Message id → its place in `messages`.
    positions: HashMap<String, usize>,
}

impl GeminiLog {
    pub fn new() -> Self {
        GeminiLog::default()
    }

    /// Forgets everything read (the file was replaced or truncated: read it again).
    pub fn reset(&mut self) {
        *self = GeminiLog::default();
    }

    /// Applies one complete line. `Err` for a line that is not a JSON object (a
    /// diagnostic, never data); blank lines and records of unknown shape are skipped, as
    /// the CLI's loader skips them.
    pub fn apply_line(&mut self, line: &[u8]) -> Result<(), ParseError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let record: Value = serde_json::from_slice(line)
            .map_err(|error| ParseError::NotJson(format!("not JSON: {error}")))?;
        let Value::Object(record) = record else {
            return Err(ParseError::Shape("a line that is not a JSON object".into()));
        };
        if let Some(Value::String(message_id)) = record.get("$rewindTo") {
            self.rewind_to(message_id);
        } else if matches!(record.get("id"), Some(Value::String(_))) {
            self.upsert(Value::Object(record));
        } else if let Some(Value::Object(set)) = record.get("$set") {
            self.has_metadata = true;
            if let Some(Value::Array(messages)) = set.get("messages") {
                // A checkpoint: the messages are exactly these.
                self.messages.clear();
                self.positions.clear();
                for message in messages {
                    self.upsert(message.clone());
                }
            }
            if let Some(Value::String(session_id)) = set.get("sessionId") {
                self.session_id = Some(session_id.clone());
            }
            self.note_time(set);
        } else if let (Some(Value::String(session_id)), Some(Value::String(_))) =
            (record.get("sessionId"), record.get("projectHash"))
        {
            self.has_metadata = true;
            self.session_id = Some(session_id.clone());
            self.note_time(&record);
            // A legacy record written on one line carries its messages too.
            if let Some(Value::Array(messages)) = record.get("messages") {
                for message in messages {
                    self.upsert(message.clone());
                }
            }
        }
        Ok(())
    }

    /// The chat as the lines read so far show it; `None` before any metadata or message.
    pub fn snapshot(
        &self,
        fallback_chat_id: &str,
        workspace: Option<&str>,
    ) -> Option<ChatSnapshot> {
        if !self.has_metadata && self.messages.is_empty() {
            return None;
        }
        let chat_id = self
            .session_id
            .as_deref()
            .filter(|id| !id.is_empty())
            .unwrap_or(fallback_chat_id);
        Some(ChatSnapshot {
            chat_id: chat_id.to_string(),
            workspace: workspace.map(str::to_string),
            turns: turns_of(&self.messages),
            updated_ms: self.updated_ms,
        })
    }

    /// The session's time from a metadata record (`lastUpdated`, else `startTime`): a
    /// chat seen before its first message is dated by it, never by when Koru read it.
    fn note_time(&mut self, metadata: &serde_json::Map<String, Value>) {
        if let Some(ms) = session_time(metadata) {
            self.updated_ms = Some(self.updated_ms.map_or(ms, |before| before.max(ms)));
        }
    }

    /// A message, or a newer version of one already read (it keeps its place).
    fn upsert(&mut self, message: Value) {
        let Some(id) = message
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        match self.positions.get(&id) {
            Some(&position) => {
                if let Some(slot) = self.messages.get_mut(position) {
                    *slot = message;
                }
            }
            None => {
                self.positions.insert(id, self.messages.len());
                self.messages.push(message);
            }
        }
    }

    /// The live messages as the lines read so far leave them, in the order they were first
    /// written (what the turn reader in `conversation::stores::gemini` builds turns from).
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// Drops `message_id` and everything after it; everything when it is unknown (as the
    /// CLI's loader does).
    fn rewind_to(&mut self, message_id: &str) {
        let keep = self.positions.get(message_id).copied().unwrap_or(0);
        for dropped in self.messages.drain(keep..) {
            if let Some(id) = dropped.get("id").and_then(Value::as_str) {
                self.positions.remove(id);
            }
        }
    }
}

/// The project root of a chats folder's parent: the `.project_root` marker's contents (trimmed), given its bytes.
pub fn workspace_from_project_root(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The text of a `PartListUnion` (a string, a part, or a list of either): its `text`
/// parts, thoughts left out.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().map(text_of).collect(),
        Value::Object(part) if part.get("thought").and_then(Value::as_bool) != Some(true) => part
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// Whether the content carries a tool result (the CLI's synthetic `user` messages).
pub fn has_function_response(content: &Value) -> bool {
    match content {
        Value::Array(parts) => parts.iter().any(has_function_response),
        Value::Object(part) => part.contains_key("functionResponse"),
        _ => false,
    }
}

/// The CLI's `isIgnoredUserContent`: empty input, slash and `?` commands, and the context
/// it injects itself are not prompts.
pub fn is_ignored_prompt(trimmed: &str) -> bool {
    trimmed.is_empty()
        || trimmed.starts_with('/')
        || trimmed.starts_with('?')
        || trimmed.starts_with("<session_context>")
        || trimmed.starts_with("<hook_context>")
}

/// What a `gemini` message's tool calls leave the turn doing. Calls are recorded once
/// complete; a status outside the finished ones means a call still runs.
fn tool_state(message: &Value) -> TurnState {
    let statuses = message
        .get("toolCalls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|call| call.get("status")?.as_str());
    let mut tool_pending = false;
    for status in statuses {
        match status {
            "success" | "error" | "cancelled" | "canceled" | "completed" => {}
            "awaiting_approval" => return TurnState::NeedsInput(NeedsInputKind::ToolApproval),
            _ => tool_pending = true,
        }
    }
    TurnState::Open { tool_pending }
}

fn ended(state: &TurnState) -> bool {
    matches!(state, TurnState::Cancelled | TurnState::Failed(_))
}

/// The prompt a user message stands for, when it is one: what the user typed
/// (`displayContent` when the sent content differs, as with expanded `@file` references);
/// `None` for the notices the CLI writes as user messages. The message is a user message
/// without a function response.
pub fn typed_prompt(message: &Value) -> Option<String> {
    let text = text_of(message.get("content").unwrap_or(&Value::Null));
    if is_ignored_prompt(text.trim()) {
        return None;
    }
    Some(
        message
            .get("displayContent")
            .map(text_of)
            .filter(|typed| !typed.trim().is_empty())
            .unwrap_or(text),
    )
}

/// The turns of a session's messages, oldest first.
fn turns_of(messages: &[Value]) -> Vec<TurnSnapshot> {
    let mut turns: Vec<TurnSnapshot> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let content = message.get("content").unwrap_or(&Value::Null);
        let ts_ms = message
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_ts);
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "user" && !has_function_response(content) {
            let Some(typed) = typed_prompt(message) else {
                continue;
            };
            let mut id = match message.get("id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => id.to_string(),
                _ => format!("#{index}"),
            };
            if turns.iter().any(|turn| turn.id == id) {
                id = format!("{id}#{index}");
            }
            turns.push(TurnSnapshot {
                id,
                prompt: Some(typed),
                reply: String::new(),
                state: TurnState::Waiting,
                ts_ms,
            });
            continue;
        }
        let Some(turn) = turns.last_mut() else {
            // Notices before the first prompt belong to no turn.
            continue;
        };
        let was_ended = ended(&turn.state);
        match kind {
            // A tool result: the agent carries on with it.
            "user" if !was_ended => turn.state = TurnState::Replying,
            "gemini" => {
                let text = text_of(content);
                // Only new text reopens a cancelled or failed turn; tool calls recorded
                // after a cancel (as `cancelled`) do not. The reply is the turn's latest
                // message with text (the final answer), not every message joined: the
                // ones before it are what the agent said while it worked.
                if !text.trim().is_empty() {
                    turn.reply = text;
                } else if was_ended {
                    turn.ts_ms = ts_ms.or(turn.ts_ms);
                    continue;
                }
                turn.state = match tool_state(message) {
                    // Working on it, with no text yet.
                    TurnState::Open { .. } if turn.reply.is_empty() => TurnState::Replying,
                    state => state,
                };
            }
            "info" if !was_ended && text_of(content).trim() == CANCELLED_NOTICE => {
                turn.state = TurnState::Cancelled;
            }
            "error" if !was_ended => {
                let reason = text_of(content);
                let reason = reason.trim();
                let reason = if reason.is_empty() { "error" } else { reason };
                turn.state = TurnState::Failed(reason.to_string());
            }
            // Other notices and unknown types change nothing but the time.
            _ => {}
        }
        if ts_ms.is_some() {
            turn.ts_ms = ts_ms;
        }
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;
    use crate::observe::snapshot::SnapshotDiffer;
    use koru_protocol::ObservedKind;

    const META: &str = r#"{"sessionId":"9f8e7d6c-1111-4222-8333-444455556666","projectHash":"e3b0c442","startTime":"2026-05-01T09:00:00.000Z","lastUpdated":"2026-05-01T09:00:00.000Z","kind":"main"}"#;
    const PROMPT: &str = r#"{"id":"m1","timestamp":"2026-05-01T09:00:05.000Z","type":"user","content":[{"text":"list the TODOs in src/"}]}"#;
    const SET: &str = r#"{"$set":{"lastUpdated":"2026-05-01T09:00:05.001Z"}}"#;
    const CALLING: &str = r#"{"id":"m2","timestamp":"2026-05-01T09:00:08.000Z","type":"gemini","content":"Searching.","thoughts":[{"subject":"Plan","description":"grep","timestamp":"2026-05-01T09:00:07.000Z"}],"model":"gemini-2.5-pro"}"#;
    const CALLED: &str = r#"{"id":"m2","timestamp":"2026-05-01T09:00:08.000Z","type":"gemini","content":"Searching.","toolCalls":[{"id":"c1","name":"grep","args":{},"status":"success","timestamp":"2026-05-01T09:00:09.000Z"}],"model":"gemini-2.5-pro"}"#;
    const RESULT: &str = r#"{"id":"m3","timestamp":"2026-05-01T09:00:09.500Z","type":"user","content":[{"functionResponse":{"id":"c1","name":"grep","response":{"output":"3 hits"}}}]}"#;
    const ANSWER: &str = r#"{"id":"m4","timestamp":"2026-05-01T09:00:12.000Z","type":"gemini","content":"There are 3 TODOs.","toolCalls":[],"tokens":{"input":900,"output":120,"cached":0,"total":1020}}"#;
    const PROMPT2: &str =
        r#"{"id":"m5","timestamp":"2026-05-01T09:01:00.000Z","type":"user","content":"fix them"}"#;
    const CANCEL: &str = r#"{"id":"m6","timestamp":"2026-05-01T09:01:02.000Z","type":"info","content":"Request cancelled."}"#;

    fn log_of(lines: &[&str]) -> GeminiLog {
        let mut log = GeminiLog::new();
        for line in lines {
            log.apply_line(line.as_bytes()).unwrap();
        }
        log
    }

    fn states(log: &GeminiLog) -> Vec<(String, TurnState)> {
        log.snapshot("fallback", None)
            .unwrap()
            .turns
            .into_iter()
            .map(|turn| (turn.id, turn.state))
            .collect()
    }

    #[test]
    fn a_log_grown_line_by_line_gives_events_in_order() {
        let mut log = GeminiLog::new();
        let mut differ = SnapshotDiffer::new();
        let step = |log: &mut GeminiLog, differ: &mut SnapshotDiffer, line: &str| {
            log.apply_line(line.as_bytes()).unwrap();
            let snapshot = log.snapshot("session-x", Some("/home/u/proj")).unwrap();
            kinds(&differ.update(&snapshot))
        };
        let mut events: Vec<Vec<String>> = [META, PROMPT, SET, CALLING, CALLED, RESULT, ANSWER]
            .iter()
            .map(|line| step(&mut log, &mut differ, line))
            .collect();
        events.push(kinds(&differ.on_quiet(2_000, 0, 1_000)));
        for line in [PROMPT2, CANCEL] {
            events.push(step(&mut log, &mut differ, line));
        }
        let expected: [&[&str]; 10] = [
            &["chat_seen"],
            &["prompt_seen"],
            &[],
            &["reply_started"],
            &[], // an update of the same message
            &[], // a tool result is not a prompt
            &[],
            &["reply_completed (inferred)"],
            &["prompt_seen"],
            &["cancelled"],
        ];
        assert_eq!(events, expected);

        let snapshot = log.snapshot("session-x", None).unwrap();
        assert_eq!(snapshot.chat_id, "9f8e7d6c-1111-4222-8333-444455556666");
        assert_eq!(
            snapshot.turns[0],
            TurnSnapshot {
                id: "m1".into(),
                prompt: Some("list the TODOs in src/".into()),
                reply: "There are 3 TODOs.".into(),
                state: TurnState::Open {
                    tool_pending: false
                },
                ts_ms: Some(1_777_626_012_000),
            }
        );
    }

    #[test]
    fn a_chat_seen_before_its_first_message_is_dated_by_its_metadata() {
        // A log read when only its metadata line is written (Gemini CLI 0.61 writes it
        // first, tests/corpus/gemini): the chat's time is the session's, not the read's.
        let mut differ = SnapshotDiffer::new();
        let log = log_of(&[META]);
        let snapshot = log.snapshot("session-x", None).unwrap();
        assert_eq!(snapshot.updated_ms, parse_ts("2026-05-01T09:00:00.000Z"));
        let seen = differ.update(&snapshot);
        assert_eq!(kinds(&seen), ["chat_seen"]);
        assert_eq!(seen[0].store_ts_ms, parse_ts("2026-05-01T09:00:00.000Z"));
        // `$set` moves it on; an older time never moves it back.
        let log = log_of(&[
            META,
            SET,
            r#"{"$set":{"lastUpdated":"2020-01-01T00:00:00Z"}}"#,
        ]);
        assert_eq!(
            log.snapshot("session-x", None).unwrap().updated_ms,
            parse_ts("2026-05-01T09:00:05.001Z")
        );
        // The whole-file format carries it too.
        let whole = r#"{"sessionId":"s","projectHash":"p","startTime":"2026-05-01T09:00:00.000Z","lastUpdated":"2026-05-01T09:03:00.000Z","messages":[]}"#;
        assert_eq!(
            parse_session_json(whole.as_bytes(), "s", None)
                .unwrap()
                .updated_ms,
            parse_ts("2026-05-01T09:03:00.000Z")
        );
    }

    #[test]
    fn the_reply_is_the_turns_final_message() {
        let mut differ = SnapshotDiffer::new();
        let log = log_of(&[META, PROMPT, CALLED, RESULT, ANSWER]);
        differ.update(&log.snapshot("f", None).unwrap());
        let events = differ.on_quiet(10_000, 0, 1_000);
        assert_eq!(
            events[0].event,
            ObservedKind::ReplyCompleted {
                excerpt: "There are 3 TODOs.".into(),
                length: 18
            }
        );
        // A later message of the turn without text (a tool call) keeps the last text.
        let calling = r#"{"id":"m9","timestamp":"2026-05-01T09:00:13.000Z","type":"gemini","content":"","toolCalls":[{"id":"c2","name":"grep","status":"success"}]}"#;
        let log = log_of(&[META, PROMPT, CALLED, RESULT, ANSWER, calling]);
        assert_eq!(
            log.snapshot("f", None).unwrap().turns[0].reply,
            "There are 3 TODOs."
        );
    }

    #[test]
    fn the_same_id_again_replaces_the_message_in_place() {
        let pending = r#"{"id":"m2","timestamp":"2026-05-01T09:00:08.000Z","type":"gemini","content":"Running tests.","toolCalls":[{"id":"c1","name":"run_shell_command","status":"executing"}]}"#;
        let log = log_of(&[META, PROMPT, pending]);
        assert_eq!(
            states(&log),
            [("m1".into(), TurnState::Open { tool_pending: true })]
        );
        let log = log_of(&[META, PROMPT, pending, CALLED]);
        let snapshot = log.snapshot("f", None).unwrap();
        assert_eq!(snapshot.turns[0].reply, "Searching.", "last version wins");
        assert_eq!(
            snapshot.turns[0].state,
            TurnState::Open {
                tool_pending: false
            }
        );
    }

    #[test]
    fn rewind_drops_the_message_and_everything_after_it() {
        let rewind = r#"{"$rewindTo":"m5"}"#;
        let retyped = r#"{"id":"m7","timestamp":"2026-05-01T09:02:00.000Z","type":"user","content":"fix only the first"}"#;
        let log = log_of(&[META, PROMPT, ANSWER, PROMPT2, CANCEL, rewind, retyped]);
        let snapshot = log.snapshot("f", None).unwrap();
        let prompts: Vec<_> = snapshot
            .turns
            .iter()
            .map(|turn| turn.prompt.as_deref())
            .collect();
        assert_eq!(
            prompts,
            [Some("list the TODOs in src/"), Some("fix only the first")]
        );
        assert_eq!(snapshot.turns[1].state, TurnState::Waiting);
        // An unknown id drops everything, as the CLI's loader does.
        let log = log_of(&[META, PROMPT, r#"{"$rewindTo":"nope"}"#]);
        assert!(log.snapshot("f", None).unwrap().turns.is_empty());
        // A checkpoint in `$set` replaces the messages.
        let checkpoint = format!(r#"{{"$set":{{"messages":[{PROMPT2}]}}}}"#);
        let log = log_of(&[META, PROMPT, ANSWER, &checkpoint]);
        assert_eq!(states(&log), [("m5".into(), TurnState::Waiting)]);
    }

    #[test]
    fn messages_map_to_turn_states() {
        let error = r#"{"id":"e1","timestamp":"2026-05-01T09:01:03.000Z","type":"error","content":"[API Error: quota exceeded]"}"#;
        let slash = r#"{"id":"s1","timestamp":"2026-05-01T09:01:04.000Z","type":"user","content":"/stats"}"#;
        let warning = r#"{"id":"w1","timestamp":"2026-05-01T09:01:05.000Z","type":"warning","content":"low disk","extra":{"x":1}}"#;
        let unknown =
            r#"{"id":"u1","timestamp":"2026-05-01T09:01:06.000Z","type":"hologram","content":7}"#;
        let approval = r#"{"id":"a1","timestamp":"2026-05-01T09:01:07.000Z","type":"gemini","content":"","toolCalls":[{"id":"c","name":"write_file","status":"awaiting_approval"}]}"#;
        let cancelled_calls = r#"{"id":"a2","timestamp":"2026-05-01T09:01:08.000Z","type":"gemini","content":"","toolCalls":[{"id":"c","status":"cancelled"}]}"#;
        let thinking = r#"{"id":"t1","timestamp":"2026-05-01T09:01:09.000Z","type":"gemini","content":[{"text":"secret plan","thought":true}]}"#;
        let cases: &[(&str, &[&str], TurnState)] = &[
            ("waiting", &[PROMPT], TurnState::Waiting),
            (
                "working on a tool result",
                &[PROMPT, CALLED, RESULT],
                TurnState::Replying,
            ),
            ("thoughts only", &[PROMPT, thinking], TurnState::Replying),
            (
                "failed",
                &[PROMPT, error],
                TurnState::Failed("[API Error: quota exceeded]".into()),
            ),
            (
                "cancelled",
                &[PROMPT, CALLING, CANCEL],
                TurnState::Cancelled,
            ),
            (
                "calls recorded after a cancel do not reopen it",
                &[PROMPT, CANCEL, cancelled_calls],
                TurnState::Cancelled,
            ),
            (
                "a tool waiting for approval",
                &[PROMPT, approval],
                TurnState::NeedsInput(NeedsInputKind::ToolApproval),
            ),
            (
                "commands, notices and unknown types are tolerated",
                &[
                    PROMPT,
                    ANSWER,
                    slash,
                    warning,
                    unknown,
                    r#"{"what":"ever"}"#,
                ],
                TurnState::Open {
                    tool_pending: false,
                },
            ),
        ];
        for (name, lines, expected) in cases {
            let mut all = vec![META];
            all.extend_from_slice(lines);
            let log = log_of(&all);
            let snapshot = log.snapshot("f", None).unwrap();
            assert_eq!(snapshot.turns.len(), 1, "{name}");
            assert_eq!(&snapshot.turns[0].state, expected, "{name}");
            // The same messages as a pre-0.39 whole file give the same turns.
            let messages: Vec<Value> = lines
                .iter()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|record| record.get("id").is_some())
                .collect();
            let file = serde_json::json!({"sessionId": "s", "projectHash": "h",
                "startTime": "2026-05-01T09:00:00.000Z", "lastUpdated": "x", "messages": messages});
            let whole = parse_session_json(file.to_string().as_bytes(), "f", None).unwrap();
            assert_eq!(whole.turns, snapshot.turns, "{name} (json)");
        }
    }

    #[test]
    fn a_whole_session_file_reads_like_the_log() {
        let file = format!(
            r#"{{"sessionId":"abc","projectHash":"h","startTime":"2026-05-01T09:00:00.000Z","lastUpdated":"2026-05-01T09:00:12.000Z","messages":[{PROMPT},{ANSWER}],"summary":"todos"}}"#
        );
        let snapshot = parse_session_json(file.as_bytes(), "session-2026", Some("/w")).unwrap();
        assert_eq!(snapshot.chat_id, "abc");
        assert_eq!(snapshot.workspace.as_deref(), Some("/w"));
        let mut differ = SnapshotDiffer::new();
        let events = differ.update(&snapshot);
        assert_eq!(
            kinds(&events),
            ["chat_seen", "prompt_seen", "reply_started"]
        );
        assert_eq!(
            kinds(&differ.on_quiet(10_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        let untitled = br#"{"messages":[]}"#;
        assert_eq!(
            parse_session_json(untitled, "session-2026", None)
                .unwrap()
                .chat_id,
            "session-2026"
        );
        let typed = r#"{"id":"p","timestamp":"t","type":"user","content":[{"text":"explain @a.rs\n--- a.rs ---\nfn main(){}"}],"displayContent":[{"text":"explain @a.rs"}]}"#;
        let file = format!(r#"{{"sessionId":"abc","projectHash":"h","messages":[{typed}]}}"#);
        let snapshot = parse_session_json(file.as_bytes(), "f", None).unwrap();
        assert_eq!(snapshot.turns[0].prompt.as_deref(), Some("explain @a.rs"));
        assert_eq!(snapshot.turns[0].ts_ms, None, "an unreadable timestamp");
        let events = SnapshotDiffer::new().update(&snapshot);
        assert!(matches!(
            events[1].event,
            ObservedKind::PromptSeen { length: 13, .. }
        ));
    }

    #[test]
    fn bad_input_is_rejected_with_a_reason() {
        let whole = format!(r#"{{"sessionId":"abc","projectHash":"h","messages":[{PROMPT}]}}"#);
        let half = &whole.as_bytes()[..whole.len() / 2];
        let error = parse_session_json(half, "f", None).unwrap_err();
        assert!(
            matches!(&error, ParseError::NotJson(message) if message.starts_with("session file is not complete JSON")),
            "{error}"
        );
        assert_eq!(
            parse_session_json(b"[]", "f", None).unwrap_err(),
            ParseError::Shape("session file is not a JSON object".into())
        );
        assert_eq!(
            parse_session_json(br#"{"sessionId":"a"}"#, "f", None).unwrap_err(),
            ParseError::Shape("session file has no `messages` array".into())
        );
        let mut log = GeminiLog::new();
        assert!(log.snapshot("f", None).is_none(), "nothing read yet");
        assert!(log
            .apply_line(b"{\"id\":\"m1\",")
            .unwrap_err()
            .message()
            .starts_with("not JSON"));
        assert_eq!(
            log.apply_line(b"[1]").unwrap_err(),
            ParseError::Shape("a line that is not a JSON object".into())
        );
        assert!(log.apply_line(b"  \r").is_ok(), "a blank line");
        log.apply_line(META.as_bytes()).unwrap();
        log.apply_line(PROMPT.as_bytes()).unwrap();
        log.reset();
        assert!(log.snapshot("f", None).is_none(), "reset forgets");
    }

    #[test]
    fn the_project_root_marker_names_the_workspace() {
        assert_eq!(
            workspace_from_project_root(b"/home/u/proj\n").as_deref(),
            Some("/home/u/proj")
        );
        assert_eq!(workspace_from_project_root(b"  \n"), None);
        assert_eq!(workspace_from_project_root(&[0xff, 0xfe]), None);
    }
}

#[cfg(test)]
mod fuzz {
    //! The readers never panic, whatever the bytes or the shape of the records.
    use super::*;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = Vec<u8>> {
        let types = prop_oneof![
            Just("user"),
            Just("gemini"),
            Just("info"),
            Just("error"),
            Just("x")
        ];
        let content = prop_oneof![
            any::<String>().prop_map(Value::String),
            any::<String>().prop_map(|text| serde_json::json!([{"text": text}])),
            Just(serde_json::json!([{"functionResponse": {}}])),
            Just(serde_json::json!({"text": 5, "thought": "yes"})),
            Just(serde_json::json!("Request cancelled.")),
            Just(Value::Null),
        ];
        let ids = prop_oneof![Just("m1"), Just("m2"), Just("m3")];
        let message = (
            types,
            content,
            ids.clone(),
            any::<String>(),
            any::<String>(),
        )
            .prop_map(|(kind, content, id, ts, status)| {
                serde_json::json!({"id": id, "timestamp": ts, "type": kind, "content": content,
                    "displayContent": 3, "toolCalls": [{"status": status}, 7]})
            });
        let other = prop_oneof![
            ids.prop_map(|id| serde_json::json!({"$rewindTo": id})),
            Just(serde_json::json!({"$set": {"messages": [1, {"id": 2}], "sessionId": 4}})),
            Just(serde_json::json!({"sessionId": "s", "projectHash": "h", "messages": "no"})),
        ];
        prop_oneof![
            message.prop_map(|value| value.to_string().into_bytes()),
            other.prop_map(|value| value.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..200),
        ]
    }

    proptest! {
        #[test]
        fn any_sequence_of_lines_never_panics(lines in proptest::collection::vec(record(), 0..40)) {
            let mut log = GeminiLog::new();
            let mut differ = crate::observe::snapshot::SnapshotDiffer::new();
            for line in &lines {
                let _ = log.apply_line(line);
                if let Some(snapshot) = log.snapshot("f", None) {
                    let _ = differ.update(&snapshot);
                }
            }
            let whole = format!("{{\"messages\":[{}]}}", lines
                .iter()
                .map(|line| String::from_utf8_lossy(line).into_owned())
                .collect::<Vec<_>>()
                .join(","));
            let _ = parse_session_json(whole.as_bytes(), "f", None);
        }

        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_session_json(&bytes, "f", None);
            let _ = workspace_from_project_root(&bytes);
        }
    }
}

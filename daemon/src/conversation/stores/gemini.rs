//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.jsonl`, and the whole-document `.json` before 0.39) read back as turns: the prompt, the turn's last answer whole, every tool call with its status, times, model and token usage.
//!
//! Format facts (docs/observers.md, docs/research/chat-store-formats.md §6,
//! tests/corpus/gemini): the `.jsonl` log is replayed as the CLI's loader replays it
//! (`observe::stores::gemini::GeminiLog`: the same message `id` again replaces the message,
//! `$rewindTo` drops messages, a `$set` of `messages` replaces them all — `--resume` writes
//! the whole conversation again that way, without the old answers' `model` and `tokens`),
//! so no turn is known until the file's end: this reader keeps the log's live messages (the
//! chat as the file has it), not only the open turn. Which `user` messages are prompts is
//! the observer's rule (`is_ignored_prompt`, tool results as `functionResponse` parts,
//! `displayContent` for what was typed). A `gemini` message carries the reply text, its
//! `toolCalls[]` (`name`, `args`, `status` `success`/`error`/`cancelled`/
//! `awaiting_approval`, `result[].functionResponse.response` `{output}` or `{error}`,
//! `timestamp`), `model` and `tokens {input, output, cached, thoughts}`. The reply is the
//! turn's last `gemini` message with text. `info` "Request cancelled." cancels a turn, an
//! `error` message fails it. Gemini records no end of turn: the last turn stays
//! `in_progress` (`needs_input` while a call awaits approval). `run_shell_command` writes
//! `Exit Code: N` into its output only when N is not 0 (a non-zero exit is still status
//! `success`): that is the only exit status recorded.

use std::collections::HashMap;

use koru_protocol::{StepKind, StepOutcome, TurnState, TurnStep, TurnUsage};
use serde_json::Value;

use super::LineTurns;
use crate::conversation::items::{array_elements, Item, ItemOutcome, SourceRecord};
use crate::conversation::model::{step, step_error, summarize_arguments, Turn, TurnCollector};
use crate::observe::stores::gemini::{
    has_function_response, text_of, typed_prompt, GeminiLog, CANCELLED_NOTICE,
};
use crate::observe::text::parse_ts;
use crate::observe::ParseError;

/// What Gemini CLI does not record: a command's exit status when it is 0.
pub const NOT_RECORDED: &[&str] = &["exit_status"];

/// The turn reader for a `.jsonl` session log.
#[derive(Debug, Default)]
pub struct GeminiTurns {
    log: GeminiLog,
    /// When items are wanted: the record that last wrote each message, by message id (a
    /// message written again, or by a `$set` of them all, comes from its latest line).
    sources: HashMap<String, SourceRecord>,
}

impl GeminiTurns {
    pub fn new() -> Self {
        GeminiTurns::default()
    }
}

impl LineTurns for GeminiTurns {
    fn feed_line(&mut self, line: &[u8], out: &mut TurnCollector) -> Result<(), ParseError> {
        self.log.apply_line(line)?;
        if let Some(source) = out.source() {
            note_sources(line, source, &mut self.sources);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut TurnCollector) {
        let sources: Vec<Option<SourceRecord>> = if out.wants_items() {
            self.log
                .messages()
                .iter()
                .map(|message| {
                    let id = message.get("id").and_then(Value::as_str)?;
                    self.sources.get(id).cloned()
                })
                .collect()
        } else {
            Vec::new()
        };
        turns_from_messages(self.log.messages(), &sources, out);
        self.log.reset();
        self.sources.clear();
    }
}

/// The messages a log line (from `source`) writes, noted as coming from it: a message
/// record, or each message of a `$set` of them all (or of a legacy session record).
fn note_sources(line: &[u8], source: &SourceRecord, sources: &mut HashMap<String, SourceRecord>) {
    let Ok(Value::Object(record)) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    if let Some(Value::String(id)) = record.get("id") {
        sources.insert(id.clone(), source.clone());
        return;
    }
    let (messages, path) = match record.get("$set").and_then(|set| set.get("messages")) {
        Some(messages) => (messages, "/$set/messages"),
        None => match record.get("messages") {
            Some(messages) => (messages, "/messages"),
            None => return,
        },
    };
    if path == "/$set/messages" {
        // A checkpoint: the messages are exactly these.
        sources.clear();
    }
    for (index, message) in messages.as_array().into_iter().flatten().enumerate() {
        if let Some(id) = message.get("id").and_then(Value::as_str) {
            sources.insert(id.to_string(), source.clone().at(format!("{path}/{index}")));
        }
    }
}

/// The turns of a pre-0.39 session file (one JSON object with `messages`). `Err` when the
/// bytes are not a whole session object (a file caught mid-rewrite).
pub fn turns_from_document(bytes: &[u8], out: &mut TurnCollector) -> Result<(), ParseError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ParseError::NotJson(format!("session file is not complete JSON: {error}"))
    })?;
    let Some(messages) = value.get("messages").and_then(Value::as_array) else {
        return Err(ParseError::Shape(
            "session file is not an object with a `messages` array".into(),
        ));
    };
    let sources = if out.wants_items() {
        array_elements(bytes, Some("messages"))
            .into_iter()
            .map(Some)
            .collect()
    } else {
        Vec::new()
    };
    turns_from_messages(messages, &sources, out);
    Ok(())
}

/// Pushes the turns of a session's messages, oldest first (the observer's `turns_of`
/// rules, with the whole texts and the steps), and their items, each message's from its
/// record in `sources` (by position; empty when no items are wanted).
fn turns_from_messages(
    messages: &[Value],
    sources: &[Option<SourceRecord>],
    out: &mut TurnCollector,
) {
    let mut open: Option<Turn> = None;
    for (position, message) in messages.iter().enumerate() {
        if let Some(Some(source)) = sources.get(position) {
            out.set_source(source.clone());
        }
        let content = message.get("content").unwrap_or(&Value::Null);
        let at_ms = message
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_ts);
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "user" && !has_function_response(content) {
            let Some(typed) = typed_prompt(message) else {
                continue;
            };
            if let Some(mut previous) = open.take() {
                previous.supersede();
                out.push(previous);
            }
            out.item(Item::prompt(&typed, at_ms));
            open = Some(Turn::new(Some(typed), at_ms));
            continue;
        }
        // Notices before the first prompt belong to no turn.
        let Some(turn) = open.as_mut() else {
            continue;
        };
        let ended = matches!(turn.state, TurnState::Cancelled | TurnState::Failed);
        match kind {
            "gemini" => {
                let text = text_of(content);
                if !text.trim().is_empty() {
                    out.item(Item::assistant_text(&text, at_ms));
                    // New text reopens a cancelled or failed turn (the observer's rule).
                    turn.reply = Some(text);
                    if ended {
                        turn.state = TurnState::InProgress;
                        turn.error = None;
                    }
                }
                add_message(turn, message, out);
                if !matches!(turn.state, TurnState::Cancelled | TurnState::Failed) {
                    turn.state = if awaiting_approval(message) {
                        TurnState::NeedsInput
                    } else {
                        TurnState::InProgress
                    };
                }
            }
            "info" if !ended && text_of(content).trim() == CANCELLED_NOTICE => {
                turn.cancel();
                out.item(Item::turn_end(ItemOutcome::Cancelled, None, at_ms));
            }
            "error" if !ended => {
                turn.fail(&text_of(content), "error");
                out.item(Item::turn_end(
                    ItemOutcome::Failed,
                    turn.error.as_deref(),
                    at_ms,
                ));
            }
            _ => {}
        }
        turn.touch(at_ms);
    }
    if let Some(last) = open {
        out.push(last);
    }
}

/// A `gemini` message's model, tokens and tool calls, added to its turn (each call an item,
/// with its result when it has one, and the chat's wait when it awaits approval).
fn add_message(turn: &mut Turn, message: &Value, out: &mut TurnCollector) {
    if let Some(model) = message.get("model").and_then(Value::as_str) {
        if !model.is_empty() {
            turn.model = Some(model.to_string());
        }
    }
    if let Some(tokens) = message.get("tokens").filter(|tokens| tokens.is_object()) {
        let field = |key: &str| tokens.get(key).and_then(Value::as_u64);
        turn.add_usage(&TurnUsage {
            input_tokens: field("input"),
            output_tokens: field("output"),
            cache_read_tokens: field("cached"),
            cache_write_tokens: None,
            reasoning_tokens: field("thoughts"),
        });
    }
    for call in message
        .get("toolCalls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let step = tool_step(call);
        let call_id = call.get("id").and_then(Value::as_str);
        out.item(Item::tool_call(&step, call_id));
        if out.wants_items() {
            if let Some(text) = result_text(call) {
                out.item(Item::step_result(&step, call_id, Some(&text), step.at_ms));
            }
            if call.get("status").and_then(Value::as_str) == Some("awaiting_approval") {
                let what = format!("approve {}: {}", step.tool, step.summary);
                out.item(Item::needs_input(&what, step.at_ms));
            }
        }
        turn.steps.push(step);
    }
}

/// A tool call's `result[].functionResponse.response` objects.
fn responses(call: &Value) -> Vec<&Value> {
    call.get("result")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| part.get("functionResponse")?.get("response"))
        .collect()
}

/// What a tool call gave back (its responses' `output` or `error` texts); `None` before it
/// has a result.
fn result_text(call: &Value) -> Option<String> {
    let responses = responses(call);
    if responses.is_empty() {
        return None;
    }
    let texts: Vec<&str> = responses
        .iter()
        .filter_map(|response| {
            response
                .get("output")
                .or_else(|| response.get("error"))
                .and_then(Value::as_str)
        })
        .collect();
    Some(texts.join("\n"))
}

fn awaiting_approval(message: &Value) -> bool {
    message
        .get("toolCalls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|call| call.get("status").and_then(Value::as_str) == Some("awaiting_approval"))
}

/// What a tool's name says it does.
fn kind_of(tool: &str) -> StepKind {
    match tool {
        "run_shell_command" => StepKind::Command,
        "replace" => StepKind::Edit,
        "write_file" => StepKind::Write,
        "read_file" | "read_many_files" | "list_directory" => StepKind::Read,
        "glob" | "grep_search" | "search_file_content" => StepKind::Search,
        "google_web_search" | "web_fetch" => StepKind::Web,
        "codebase_investigator" => StepKind::Agent,
        _ => StepKind::Tool,
    }
}

/// One `toolCalls[]` entry as a step.
fn tool_step(call: &Value) -> TurnStep {
    let name = call.get("name").and_then(Value::as_str).unwrap_or("");
    let args = call.get("args").unwrap_or(&Value::Null);
    let kind = kind_of(name);
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let mut result = match kind {
        StepKind::Command => {
            let mut result = step(kind, name, text("command").unwrap_or(""));
            result.command = text("command").map(str::to_string);
            result
        }
        StepKind::Edit | StepKind::Write | StepKind::Read => {
            let mut paths: Vec<String> = ["file_path", "absolute_path", "dir_path", "path"]
                .iter()
                .find_map(|key| text(key))
                .map(str::to_string)
                .into_iter()
                .collect();
            if let Some(many) = args
                .get("paths")
                .or_else(|| args.get("include"))
                .and_then(Value::as_array)
            {
                paths.extend(many.iter().filter_map(Value::as_str).map(str::to_string));
            }
            let summary = if paths.is_empty() {
                summarize_arguments(args)
            } else {
                paths.join(", ")
            };
            let mut result = step(kind, name, &summary);
            result.paths = paths;
            result
        }
        _ => step(kind, name, &summarize_arguments(args)),
    };
    result.at_ms = call
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(parse_ts);
    let responses = responses(call);
    let response_text = |key: &str| {
        responses
            .iter()
            .filter_map(|response| response.get(key).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let display = call
        .get("resultDisplay")
        .and_then(Value::as_str)
        .unwrap_or("");
    match call.get("status").and_then(Value::as_str).unwrap_or("") {
        "success" | "completed" => {
            result.outcome = StepOutcome::Ok;
            if kind == StepKind::Command {
                let output = response_text("output");
                result.exit_code = exit_code(&output);
                if result.exit_code.is_some_and(|code| code != 0) {
                    result.outcome = StepOutcome::Error;
                    result.error = step_error(display).or_else(|| step_error(&output));
                }
            }
        }
        "error" => {
            result.outcome = StepOutcome::Error;
            let error = response_text("error");
            result.error = step_error(&error).or_else(|| step_error(display));
        }
        "cancelled" | "canceled" => result.outcome = StepOutcome::Rejected,
        _ => {}
    }
    result
}

/// `Exit Code: N` among the lines the shell tool writes after the output (`Error:`,
/// `Exit Code:`, `Signal:`, `Background PIDs:`, `Process Group PGID:`), read from the end
/// so the command's own output is never taken for it.
fn exit_code(output: &str) -> Option<i64> {
    for line in output.lines().rev() {
        let line = line.trim();
        if line.is_empty() || line == "</untrusted_context>" {
            continue;
        }
        if let Some(code) = line.strip_prefix("Exit Code: ") {
            return code.trim().parse().ok();
        }
        if !["Signal: ", "Background PIDs: ", "Process Group PGID: "]
            .iter()
            .any(|prefix| line.starts_with(prefix))
        {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::items::ItemKind;
    use crate::conversation::model::{corpus, Keep};

    fn read_log(lines: &[&str]) -> (u64, Vec<Turn>) {
        let mut reader = GeminiTurns::new();
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        for line in lines {
            reader.feed_line(line.as_bytes(), &mut out).unwrap();
        }
        assert_eq!(out.total(), 0, "nothing is known before the end");
        reader.finish(&mut out);
        let total = out.total();
        (
            total,
            out.into_turns().into_iter().map(|(_, t)| t).collect(),
        )
    }

    const META: &str = r#"{"sessionId":"s1","projectHash":"h","startTime":"2026-05-01T09:00:00.000Z","lastUpdated":"2026-05-01T09:00:00.000Z","kind":"main"}"#;
    const PROMPT: &str = r#"{"id":"m1","timestamp":"2026-05-01T09:00:05.000Z","type":"user","content":[{"text":"fix the build"}]}"#;

    fn gemini(id: &str, ts: &str, content: &str, calls: serde_json::Value) -> String {
        serde_json::json!({"id": id, "timestamp": ts, "type": "gemini", "content": content, "toolCalls": calls,
            "model": "gemini-2.5-pro", "tokens": {"input": 100, "output": 10, "cached": 50, "thoughts": 5, "tool": 0, "total": 165}})
        .to_string()
    }

    fn call(
        name: &str,
        args: serde_json::Value,
        status: &str,
        response: serde_json::Value,
    ) -> serde_json::Value {
        serde_json::json!({"id": format!("{name}-1"), "name": name, "args": args, "status": status,
            "timestamp": "2026-05-01T09:00:07.000Z",
            "result": [{"functionResponse": {"id": format!("{name}-1"), "name": name, "response": response}}],
            "resultDisplay": "shown"})
    }

    #[test]
    fn tool_calls_exit_codes_usage_and_the_final_answer() {
        let calls = serde_json::json!([
            call(
                "run_shell_command",
                serde_json::json!({"command": "make"}),
                "success",
                serde_json::json!({"output": "Output: Exit Code: 0 printed by make\nError: (none)\nExit Code: 2\nProcess Group PGID: 7"})
            ),
            call(
                "replace",
                serde_json::json!({"file_path": "/w/Makefile", "old_string": "a", "new_string": "b"}),
                "success",
                serde_json::json!({"output": "ok"})
            ),
            call(
                "read_file",
                serde_json::json!({"file_path": "/w/missing"}),
                "error",
                serde_json::json!({"error": "File not found: /w/missing"})
            ),
            call(
                "write_file",
                serde_json::json!({"file_path": "/w/x"}),
                "cancelled",
                serde_json::json!({})
            ),
            call(
                "google_web_search",
                serde_json::json!({"query": "make error 2"}),
                "success",
                serde_json::json!({"output": "…"})
            ),
        ]);
        let lines = [
            META.to_string(),
            PROMPT.to_string(),
            gemini("m2", "2026-05-01T09:00:06.000Z", "Building.", serde_json::json!([])),
            // The same id again, with its calls once they finished.
            gemini("m2", "2026-05-01T09:00:06.000Z", "Building.", calls),
            r#"{"id":"m3","timestamp":"2026-05-01T09:00:08.000Z","type":"user","content":[{"functionResponse":{"id":"x","name":"run_shell_command","response":{"output":"…"}}}]}"#.to_string(),
            gemini("m4", "2026-05-01T09:00:09.000Z", "The build fails at line 3.", serde_json::json!([])),
            r#"{"$set":{"lastUpdated":"2026-05-01T09:00:09.000Z"}}"#.to_string(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (total, turns) = read_log(&lines);
        assert_eq!(total, 1);
        let turn = &turns[0];
        assert_eq!(turn.reply.as_deref(), Some("The build fails at line 3."));
        assert_eq!(turn.state, TurnState::InProgress, "Gemini records no end");
        assert_eq!(turn.model.as_deref(), Some("gemini-2.5-pro"));
        assert_eq!(
            turn.usage,
            Some(TurnUsage {
                input_tokens: Some(200),
                output_tokens: Some(20),
                cache_read_tokens: Some(100),
                cache_write_tokens: None,
                reasoning_tokens: Some(10)
            })
        );
        assert_eq!(turn.ended_ms, parse_ts("2026-05-01T09:00:09.000Z"));
        let outcomes: Vec<(StepKind, StepOutcome, Option<i64>)> = turn
            .steps
            .iter()
            .map(|s| (s.kind, s.outcome, s.exit_code))
            .collect();
        assert_eq!(
            outcomes,
            [
                (StepKind::Command, StepOutcome::Error, Some(2)),
                (StepKind::Edit, StepOutcome::Ok, None),
                (StepKind::Read, StepOutcome::Error, None),
                (StepKind::Write, StepOutcome::Rejected, None),
                (StepKind::Web, StepOutcome::Ok, None),
            ]
        );
        assert_eq!(turn.steps[0].command.as_deref(), Some("make"));
        assert_eq!(turn.steps[1].paths, ["/w/Makefile"]);
        assert_eq!(
            turn.steps[2].error.as_deref(),
            Some("File not found: /w/missing")
        );
    }

    #[test]
    fn cancelled_failed_awaiting_and_commands_are_not_turns() {
        let cancel = r#"{"id":"c1","timestamp":"2026-05-01T09:00:07.000Z","type":"info","content":"Request cancelled."}"#;
        let error = r#"{"id":"e1","timestamp":"2026-05-01T09:01:03.000Z","type":"error","content":"[API Error: quota exceeded]"}"#;
        let slash = r#"{"id":"s1","timestamp":"2026-05-01T09:01:04.000Z","type":"user","content":"/stats"}"#;
        let second = r#"{"id":"p2","timestamp":"2026-05-01T09:01:00.000Z","type":"user","content":"try again"}"#;
        let third = r#"{"id":"p3","timestamp":"2026-05-01T09:02:00.000Z","type":"user","content":[{"text":"explain @a.rs\n--- a.rs ---\nfn main(){}"}],"displayContent":[{"text":"explain @a.rs"}]}"#;
        let pending = gemini(
            "g3",
            "2026-05-01T09:02:01.000Z",
            "",
            serde_json::json!([{"id": "w", "name": "write_file", "args": {"file_path": "/w/a"}, "status": "awaiting_approval"}]),
        );
        let running = gemini(
            "g1",
            "2026-05-01T09:00:06.000Z",
            "",
            serde_json::json!([{"id": "r", "name": "run_shell_command", "args": {"command": "sleep 9"}, "status": "executing"}]),
        );
        let lines = [
            META, PROMPT, &running, cancel, second, error, slash, third, &pending,
        ];
        let (total, turns) = read_log(&lines);
        assert_eq!(total, 3);
        assert_eq!(turns[0].state, TurnState::Cancelled);
        assert_eq!(turns[0].steps[0].outcome, StepOutcome::Rejected);
        assert_eq!(turns[1].state, TurnState::Failed);
        assert_eq!(
            turns[1].error.as_deref(),
            Some("[API Error: quota exceeded]")
        );
        assert_eq!(turns[2].prompt.as_deref(), Some("explain @a.rs"));
        assert_eq!(turns[2].state, TurnState::NeedsInput);
    }

    #[test]
    fn a_whole_session_file_reads_like_the_log() {
        let answer = gemini(
            "m2",
            "2026-05-01T09:00:06.000Z",
            "Done.",
            serde_json::json!([]),
        );
        let document =
            format!(r#"{{"sessionId":"s1","projectHash":"h","messages":[{PROMPT},{answer}]}}"#);
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        turns_from_document(document.as_bytes(), &mut out).unwrap();
        let from_document = out.into_turns();
        let (_, from_log) = read_log(&[META, PROMPT, &answer]);
        assert_eq!(from_document.len(), 1);
        assert_eq!(from_document[0].1, from_log[0]);
        let mut out = TurnCollector::new(Keep::Last(1));
        assert!(turns_from_document(&document.as_bytes()[..20], &mut out).is_err());
        assert!(turns_from_document(b"[]", &mut out).is_err());
        assert!(turns_from_document(br#"{"messages":{}}"#, &mut out).is_err());
        assert_eq!(out.total(), 0);
    }

    #[test]
    fn a_session_documents_items_are_its_messages_bytes() {
        let answer = gemini(
            "m2",
            "2026-05-01T09:00:06.000Z",
            "Reading.",
            serde_json::json!([call(
                "read_file",
                serde_json::json!({"file_path": "/w/a"}),
                "success",
                serde_json::json!({"output": "fn main() {}"})
            )]),
        );
        let document =
            format!("{{\"sessionId\": \"s1\",\r\n \"messages\": [\n  {PROMPT},\n  {answer}\n]}}");
        let mut items = Vec::new();
        let mut out = TurnCollector::with_items(Keep::Last(0), |item| items.push(item));
        turns_from_document(document.as_bytes(), &mut out).unwrap();
        drop(out);
        let kinds: Vec<(ItemKind, u32)> = items.iter().map(|item| (item.kind, item.part)).collect();
        assert_eq!(
            kinds,
            [
                (ItemKind::Prompt, 0),
                (ItemKind::AssistantText, 0),
                (ItemKind::ToolCall, 1),
                (ItemKind::ToolResult, 2)
            ]
        );
        let whole: Value = serde_json::from_str(&document).unwrap();
        for item in &items {
            let SourceRecord::Element {
                offset,
                bytes,
                sha256,
                pointer,
                ..
            } = &item.source
            else {
                panic!("{item:?}");
            };
            let range = *offset as usize..(*offset + *bytes) as usize;
            let element = &document.as_bytes()[range];
            assert_eq!(sha256, &crate::journal::canonical::sha256_hex(element));
            let parsed: Value = serde_json::from_slice(element).unwrap();
            assert_eq!(Some(&parsed), whole.pointer(pointer), "{pointer}");
        }
        assert_eq!(
            items[0].source.sha256(),
            crate::journal::canonical::sha256_hex(PROMPT.as_bytes())
        );
    }

    #[test]
    fn the_turn_boundaries_are_the_observers_prompts() {
        for entry in std::fs::read_dir(corpus::folder("gemini"))
            .unwrap()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".jsonl") {
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            let mut log = GeminiLog::new();
            let mut reader = GeminiTurns::new();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                log.apply_line(line).unwrap();
                reader.feed_line(line, &mut out).unwrap();
            }
            reader.finish(&mut out);
            let observed: Vec<Option<String>> = log
                .snapshot("f", None)
                .unwrap()
                .turns
                .into_iter()
                .map(|turn| turn.prompt)
                .collect();
            let read: Vec<Option<String>> = out
                .into_turns()
                .into_iter()
                .map(|(_, turn)| turn.prompt)
                .collect();
            assert_eq!(read, observed, "{name}");
        }
    }

    #[test]
    fn the_corpus_reads_as_its_expectations() {
        corpus::check("gemini", &[".jsonl", ".json"], |name, bytes, out| {
            if name.ends_with(".json") {
                turns_from_document(bytes, out).unwrap();
                return;
            }
            corpus::feed_all(&mut GeminiTurns::new(), bytes, out);
        });
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        corpus::check_file_items("gemini", &[".jsonl"], crate::observe::stores::gemini::STORE);
    }

    #[test]
    fn cut_and_garbled_lines_never_panic() {
        corpus::each_mangled("gemini", ".jsonl", 0x006e_3141, |lines| {
            let mut out = TurnCollector::new(Keep::Last(2));
            corpus::feed_lossy(&mut GeminiTurns::new(), lines, &mut out);
            let _ = turns_from_document(&lines.concat(), &mut out);
        });
        let odd = [
            r#"{"id":"a","type":"user","content":"hi"}"#,
            r#"{"id":"b","type":"gemini","content":7,"toolCalls":[5,{"args":[1],"result":"x","status":9}],"tokens":{"input":"x"}}"#,
            r#"{"id":"c","type":"gemini","toolCalls":{"status":"awaiting_approval"},"model":3}"#,
            r#"{"id":"d","type":"error","content":null}"#,
            r#"{"$rewindTo":"zz"}"#,
        ];
        let mut out = TurnCollector::new(Keep::Last(1));
        corpus::feed_lossy(&mut GeminiTurns::new(), &odd, &mut out);
        let _ = turns_from_document(
            br#"{"messages":[1,"x",null,{"type":"user","content":{"thought":true}}]}"#,
            &mut out,
        );
    }
}

//! Claude Code session logs (`~/.claude/projects/<cwd>/<session>.jsonl`) read back as turns: the prompt, the final message's text whole, every tool call with its result, times, model and token usage.
//!
//! Format facts (docs/observers.md, tests/corpus/claude_code): one JSON record per line.
//! Which `user` records are prompts is decided by the observer's own rules
//! (`observe::stores::claude_code::user_record`), so a drive's prompt digest finds its
//! turn. Since 2.1 one API message is written as several `assistant` records, one per
//! content block, sharing `message.id` and each carrying the message's `usage` (its
//! `output_tokens` growing block by block, e.g. 11, 11, 121 in the 2.1.39 corpus file):
//! usage counts each message id once, with its latest record's numbers, and the reply is the
//! text blocks of the last message that had text, joined. Blocks of one message can be
//! separated by tool results (`tool_heavy.jsonl`: two `tool_use` records of one message
//! around a `tool_result`).
//!
//! A turn ends on a `system` record `turn_duration` / `stop_hook_summary`, or on a text
//! record asking for no tool whose `stop_reason` is `end_turn` (2.1.197); later blocks of
//! that message still belong to it. `[Request interrupted by user…]` cancels it (its steps
//! with no result were cut off); an `isApiErrorMessage` record fails it. Assistant records
//! after a turn ended (the answer to a background task's notice, a Stop hook's
//! continuation) start a turn with no prompt. Tool results: `is_error` is an error, a
//! refusal (`The user doesn't want to proceed with this tool use…`, `toolUseResult` "User
//! rejected tool use", "Permission to use … has been denied") or an interrupted command
//! (`toolUseResult.interrupted`) is `Rejected`. Claude Code records a command's exit code
//! only when it fails, as the result's first line `Exit code N`: a succeeding command has
//! none.

use std::collections::HashMap;

use koru_protocol::{StepKind, StepOutcome, TurnState, TurnStep, TurnUsage};
use serde_json::{Map, Value};

use super::LineTurns;
use crate::conversation::items::{Item, ItemOutcome};
use crate::conversation::model::{step, step_error, summarize_arguments, Turn, TurnCollector};
use crate::observe::stores::claude_code::{user_record, UserRecord};
use crate::observe::text::parse_ts;
use crate::observe::{json_record, ParseError};

/// What Claude Code's logs do not record: a command's exit status unless it failed.
pub const NOT_RECORDED: &[&str] = &["exit_status"];

/// The turn reader for one session file.
#[derive(Debug, Default)]
pub struct ClaudeCodeTurns {
    open: Option<OpenTurn>,
}

/// The turn being read, with what is needed to finish it.
#[derive(Debug)]
struct OpenTurn {
    turn: Turn,
    /// `tool_use` id → its step's index, until its result comes.
    pending: HashMap<String, usize>,
    /// Usage by API message id (the latest record's numbers), counted once at the end.
    usage_by_message: HashMap<String, TurnUsage>,
    /// The message whose text is the reply so far (more of its text blocks add to it).
    reply_message: Option<String>,
    /// The message whose `end_turn` ended the turn: its later blocks belong to it.
    ended_message: Option<String>,
}

impl OpenTurn {
    fn new(prompt: Option<String>, at_ms: Option<u64>) -> Self {
        OpenTurn {
            turn: Turn::new(prompt, at_ms),
            pending: HashMap::new(),
            usage_by_message: HashMap::new(),
            reply_message: None,
            ended_message: None,
        }
    }

    fn ended(&self) -> bool {
        self.turn.state != TurnState::InProgress
    }

    /// The turn as read, its usage counted.
    fn close(mut self) -> Turn {
        let mut usages: Vec<(String, TurnUsage)> = self.usage_by_message.drain().collect();
        usages.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, usage) in usages {
            self.turn.add_usage(&usage);
        }
        self.turn
    }
}

impl ClaudeCodeTurns {
    pub fn new() -> Self {
        ClaudeCodeTurns::default()
    }

    /// Pushes the open turn (if any) and opens `next`.
    fn start(&mut self, next: OpenTurn, out: &mut TurnCollector) {
        if let Some(mut open) = self.open.take() {
            open.turn.supersede();
            out.push(open.close());
        }
        self.open = Some(next);
    }

    /// The open turn for an assistant record: a new one with no prompt when none is open or
    /// the open one has ended.
    fn answering(&mut self, at_ms: Option<u64>, out: &mut TurnCollector) -> &mut OpenTurn {
        if self.open.as_ref().is_none_or(OpenTurn::ended) {
            self.start(OpenTurn::new(None, at_ms), out);
        }
        self.open.get_or_insert_with(|| OpenTurn::new(None, at_ms))
    }

    fn assistant(
        &mut self,
        record: &Map<String, Value>,
        at_ms: Option<u64>,
        out: &mut TurnCollector,
    ) {
        let message = record.get("message").unwrap_or(&Value::Null);
        let content = message.get("content");
        if record.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
            let open = self.answering(at_ms, out);
            open.turn.fail(&texts(content).join("\n"), "API error");
            open.turn.touch(at_ms);
            out.item(Item::turn_end(
                ItemOutcome::Failed,
                open.turn.error.as_deref(),
                at_ms,
            ));
            return;
        }
        let message_id = message.get("id").and_then(Value::as_str);
        let later_block = self.open.as_ref().is_some_and(|open| {
            message_id.is_some() && open.ended_message.as_deref() == message_id
        });
        let open = if later_block {
            match self.open.as_mut() {
                Some(open) => open,
                None => return,
            }
        } else {
            self.answering(at_ms, out)
        };
        open.turn.touch(at_ms);
        if let Some(model) = message.get("model").and_then(Value::as_str) {
            if model != "<synthetic>" && !model.is_empty() {
                open.turn.model = Some(model.to_string());
            }
        }
        if let Some(usage) = message.get("usage").filter(|u| u.is_object()) {
            let usage = TurnUsage {
                input_tokens: usage.get("input_tokens").and_then(Value::as_u64),
                output_tokens: usage.get("output_tokens").and_then(Value::as_u64),
                cache_read_tokens: usage.get("cache_read_input_tokens").and_then(Value::as_u64),
                cache_write_tokens: usage
                    .get("cache_creation_input_tokens")
                    .and_then(Value::as_u64),
                reasoning_tokens: None,
            };
            match message_id {
                Some(id) => {
                    open.usage_by_message.insert(id.to_string(), usage);
                }
                None => open.turn.add_usage(&usage),
            }
        }
        let text = texts(content).join("\n");
        let has_text = !text.trim().is_empty();
        if has_text {
            out.item(Item::assistant_text(&text, at_ms));
            let same_message = message_id.is_some() && open.reply_message.as_deref() == message_id;
            match (&mut open.turn.reply, same_message) {
                (Some(reply), true) => {
                    reply.push('\n');
                    reply.push_str(&text);
                }
                (reply, _) => *reply = Some(text),
            }
            open.reply_message = message_id.map(str::to_string);
        }
        let mut tool_uses = 0;
        for block in content.and_then(Value::as_array).into_iter().flatten() {
            if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                continue;
            }
            tool_uses += 1;
            let name = block.get("name").and_then(Value::as_str).unwrap_or("");
            let mut call = tool_step(name, block.get("input").unwrap_or(&Value::Null));
            call.at_ms = at_ms;
            let call_id = block.get("id").and_then(Value::as_str);
            out.item(Item::tool_call(&call, call_id));
            if let Some(id) = call_id {
                open.pending.insert(id.to_string(), open.turn.steps.len());
            }
            open.turn.steps.push(call);
        }
        let stop_reason = message.get("stop_reason").and_then(Value::as_str);
        if !later_block && has_text && tool_uses == 0 && stop_reason == Some("end_turn") {
            // The model ended its turn with this text (observer: `ended_message`).
            open.turn.state = TurnState::Complete;
            open.ended_message = message_id.map(str::to_string);
            out.item(Item::turn_end(ItemOutcome::Complete, None, at_ms));
        }
    }

    fn tool_results(
        &mut self,
        record: &Map<String, Value>,
        at_ms: Option<u64>,
        out: &mut TurnCollector,
    ) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let blocks: Vec<&Value> = record
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .collect();
        // `toolUseResult` describes the record's result when it has only one.
        let tool_use_result = record.get("toolUseResult").filter(|_| blocks.len() == 1);
        for block in blocks {
            let Some(index) = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .and_then(|id| open.pending.remove(id))
            else {
                continue;
            };
            if let Some(call) = open.turn.steps.get_mut(index) {
                apply_result(call, block, tool_use_result);
                let text = out.wants_items().then(|| result_text(block));
                out.item(Item::step_result(
                    call,
                    block.get("tool_use_id").and_then(Value::as_str),
                    text.as_deref(),
                    at_ms,
                ));
            }
        }
        if !open.ended() {
            open.turn.touch(at_ms);
        }
    }
}

impl LineTurns for ClaudeCodeTurns {
    fn feed_line(&mut self, line: &[u8], out: &mut TurnCollector) -> Result<(), ParseError> {
        let record = json_record(line)?;
        // Side chains are sub-agents' conversations, not the chat's own turns.
        if record.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        let at_ms = record
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_ts);
        match record.get("type").and_then(Value::as_str).unwrap_or("") {
            "user" => match user_record(&record) {
                UserRecord::Prompt(text) => {
                    self.start(OpenTurn::new(Some(text), at_ms), out);
                    if let Some(prompt) = self.open.as_ref().and_then(|o| o.turn.prompt.as_deref())
                    {
                        out.item(Item::prompt(prompt, at_ms));
                    }
                }
                UserRecord::ToolResults => self.tool_results(&record, at_ms, out),
                UserRecord::Interrupted => {
                    if let Some(open) = self.open.as_mut().filter(|open| !open.ended()) {
                        open.turn.cancel();
                        open.turn.touch(at_ms);
                        out.item(Item::turn_end(ItemOutcome::Cancelled, None, at_ms));
                    }
                }
                UserRecord::NotAPrompt => {}
            },
            "assistant" => self.assistant(&record, at_ms, out),
            "system" => {
                let subtype = record.get("subtype").and_then(Value::as_str);
                if matches!(subtype, Some("turn_duration" | "stop_hook_summary")) {
                    if let Some(open) = self.open.as_mut() {
                        if open.turn.state == TurnState::InProgress {
                            open.turn.state = TurnState::Complete;
                            out.item(Item::turn_end(ItemOutcome::Complete, None, at_ms));
                        }
                        // The end record (after an `end_turn` text too) is the turn's last.
                        open.turn.touch(at_ms);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut TurnCollector) {
        if let Some(open) = self.open.take() {
            out.push(open.close());
        }
    }
}

/// The `text` blocks of a `message.content` (a string is one block).
fn texts(content: Option<&Value>) -> Vec<&str> {
    match content {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// What a tool's name says it does.
fn kind_of(tool: &str) -> StepKind {
    match tool {
        "Bash" | "PowerShell" => StepKind::Command,
        "Edit" | "MultiEdit" | "NotebookEdit" => StepKind::Edit,
        "Write" => StepKind::Write,
        "Read" | "LS" | "NotebookRead" => StepKind::Read,
        "Glob" | "Grep" => StepKind::Search,
        "WebFetch" | "WebSearch" => StepKind::Web,
        "Task" | "Agent" => StepKind::Agent,
        _ => StepKind::Tool,
    }
}

/// A `tool_use` block as a step (no result yet).
fn tool_step(name: &str, input: &Value) -> TurnStep {
    let kind = kind_of(name);
    let text = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match kind {
        StepKind::Command => {
            let command = text("command").unwrap_or("");
            let mut call = step(kind, name, command);
            call.command = text("command").map(str::to_string);
            call
        }
        StepKind::Edit | StepKind::Write | StepKind::Read => {
            let path = text("file_path").or(text("notebook_path")).or(text("path"));
            let mut call = match path {
                Some(path) => step(kind, name, path),
                None => step(kind, name, &summarize_arguments(input)),
            };
            call.paths = path.map(str::to_string).into_iter().collect();
            call
        }
        _ => step(kind, name, &summarize_arguments(input)),
    }
}

/// The text of a `tool_result` block's `content` (a string, or text blocks).
fn result_text(block: &Value) -> String {
    texts(block.get("content")).join("\n")
}

/// Sets a step's outcome from its `tool_result` block (and the record's `toolUseResult`).
fn apply_result(call: &mut TurnStep, block: &Value, tool_use_result: Option<&Value>) {
    let text = result_text(block);
    let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
    let refused = text.starts_with("The user doesn't want to proceed with this tool use")
        || tool_use_result.and_then(Value::as_str) == Some("User rejected tool use")
        || (text
            .trim_start_matches("Error: ")
            .starts_with("Permission to use ")
            && text.contains("has been denied"));
    let interrupted = tool_use_result
        .and_then(|result| result.get("interrupted"))
        .and_then(Value::as_bool)
        == Some(true);
    if call.kind == StepKind::Command {
        call.exit_code = exit_code(&text).filter(|_| is_error);
    }
    call.outcome = if refused || interrupted {
        StepOutcome::Rejected
    } else if is_error {
        StepOutcome::Error
    } else {
        StepOutcome::Ok
    };
    if is_error || refused {
        let mut text = text
            .trim()
            .trim_start_matches("<tool_use_error>")
            .trim_end_matches("</tool_use_error>");
        if call.exit_code.is_some() {
            // The exit status is said by `exit_code`; the error is what the command wrote,
            // when it wrote anything.
            text = text.split_once('\n').map_or("", |(_, rest)| rest);
        }
        call.error = step_error(text);
    }
}

/// The exit code of a failed command's result, when its first line is `Exit code N`.
fn exit_code(text: &str) -> Option<i64> {
    text.lines()
        .next()?
        .trim()
        .strip_prefix("Exit code ")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::model::corpus;
    use crate::conversation::model::Keep;

    fn read(lines: &[&str]) -> (u64, Vec<Turn>) {
        let mut reader = ClaudeCodeTurns::new();
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        for line in lines {
            reader.feed_line(line.as_bytes(), &mut out).unwrap();
        }
        reader.finish(&mut out);
        let total = out.total();
        (
            total,
            out.into_turns().into_iter().map(|(_, t)| t).collect(),
        )
    }

    fn user(content: serde_json::Value, extra: serde_json::Value, ts: &str) -> String {
        let mut record = serde_json::json!({"type": "user", "sessionId": "s", "version": "2.1.39",
            "timestamp": ts, "message": {"role": "user", "content": content}});
        for (key, value) in extra.as_object().into_iter().flatten() {
            record[key] = value.clone();
        }
        record.to_string()
    }

    fn assistant(id: &str, blocks: serde_json::Value, stop: Option<&str>, ts: &str) -> String {
        serde_json::json!({"type": "assistant", "sessionId": "s", "version": "2.1.39", "timestamp": ts,
            "message": {"id": id, "model": "claude-opus-4-6", "role": "assistant", "content": blocks,
                "stop_reason": stop,
                "usage": {"input_tokens": 3, "output_tokens": 10, "cache_read_input_tokens": 100,
                          "cache_creation_input_tokens": 7}}})
        .to_string()
    }

    fn text(t: &str) -> serde_json::Value {
        serde_json::json!([{"type": "text", "text": t}])
    }

    fn tool_use(id: &str, name: &str, input: serde_json::Value) -> serde_json::Value {
        serde_json::json!([{"type": "tool_use", "id": id, "name": name, "input": input}])
    }

    fn result(id: &str, content: &str, is_error: bool) -> serde_json::Value {
        serde_json::json!([{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}])
    }

    const END: &str = r#"{"type":"system","subtype":"stop_hook_summary","sessionId":"s","timestamp":"2026-02-11T10:00:09.000Z"}"#;

    #[test]
    fn a_multi_block_message_is_one_reply_and_one_usage() {
        let none = serde_json::json!({});
        let lines = [
            user(
                serde_json::json!("Fix the test"),
                none.clone(),
                "2026-02-11T10:00:00.000Z",
            ),
            assistant("m1", text("\n\n"), None, "2026-02-11T10:00:01.000Z"),
            assistant(
                "m1",
                serde_json::json!([{"type": "thinking", "thinking": "hm"}]),
                None,
                "2026-02-11T10:00:01.500Z",
            ),
            assistant(
                "m1",
                text("Let me run it."),
                None,
                "2026-02-11T10:00:02.000Z",
            ),
            assistant(
                "m1",
                tool_use("t1", "Bash", serde_json::json!({"command": "cargo test"})),
                None,
                "2026-02-11T10:00:03.000Z",
            ),
            user(
                result("t1", "Exit code 101\ntest failed", true),
                none.clone(),
                "2026-02-11T10:00:04.000Z",
            ),
            assistant("m2", text("Fixed:"), None, "2026-02-11T10:00:05.000Z"),
            assistant(
                "m2",
                text("the clock was UTC."),
                None,
                "2026-02-11T10:00:06.000Z",
            ),
            END.to_string(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (total, turns) = read(&lines);
        assert_eq!(total, 1);
        let turn = &turns[0];
        assert_eq!(turn.state, TurnState::Complete);
        assert_eq!(turn.reply.as_deref(), Some("Fixed:\nthe clock was UTC."));
        assert_eq!(
            turn.usage,
            Some(TurnUsage {
                input_tokens: Some(6),
                output_tokens: Some(20),
                cache_read_tokens: Some(200),
                cache_write_tokens: Some(14),
                reasoning_tokens: None
            }),
            "two messages, each counted once"
        );
        assert_eq!(turn.steps.len(), 1);
        let call = &turn.steps[0];
        assert_eq!(call.kind, StepKind::Command);
        assert_eq!(call.command.as_deref(), Some("cargo test"));
        assert_eq!(call.exit_code, Some(101));
        assert_eq!(call.outcome, StepOutcome::Error);
        assert_eq!(call.error.as_deref(), Some("test failed"));
        assert_eq!(turn.started_ms, parse_ts("2026-02-11T10:00:00.000Z"));
        assert_eq!(turn.ended_ms, parse_ts("2026-02-11T10:00:09.000Z"));
        assert_eq!(turn.model.as_deref(), Some("claude-opus-4-6"));
    }

    #[test]
    fn an_interrupted_turn_is_cancelled_and_its_unfinished_steps_rejected() {
        let none = serde_json::json!({});
        let lines = [
            user(serde_json::json!("start the server"), none.clone(), "2026-02-11T10:00:00.000Z"),
            assistant("m1", tool_use("t1", "Edit", serde_json::json!({"file_path": "/w/a.rs", "old_string": "a"})), None, "2026-02-11T10:00:01.000Z"),
            assistant("m1", tool_use("t2", "Bash", serde_json::json!({"command": "mix phx.server"})), None, "2026-02-11T10:00:01.500Z"),
            user(result("t1", "The user doesn't want to proceed with this tool use. The tool use was rejected.", true),
                 serde_json::json!({"toolUseResult": "User rejected tool use"}), "2026-02-11T10:00:02.000Z"),
            user(text("[Request interrupted by user for tool use]"), none.clone(), "2026-02-11T10:00:03.000Z"),
            // A slash command after it is not part of the turn.
            user(serde_json::json!("<command-name>/mcp</command-name>"), none.clone(), "2026-02-11T10:00:09.000Z"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (total, turns) = read(&lines);
        assert_eq!(total, 1);
        let turn = &turns[0];
        assert_eq!(turn.state, TurnState::Cancelled);
        assert_eq!(turn.reply, None);
        assert_eq!(turn.ended_ms, parse_ts("2026-02-11T10:00:03.000Z"));
        assert_eq!(turn.steps[0].kind, StepKind::Edit);
        assert_eq!(turn.steps[0].paths, ["/w/a.rs"]);
        assert_eq!(turn.steps[0].outcome, StepOutcome::Rejected);
        assert_eq!(turn.steps[1].outcome, StepOutcome::Rejected, "cut off");
        assert_eq!(turn.steps[1].exit_code, None);
    }

    #[test]
    fn an_api_error_fails_the_turn_and_a_tool_error_is_an_error() {
        let none = serde_json::json!({});
        let api_error = r#"{"type":"assistant","isApiErrorMessage":true,"timestamp":"2026-02-11T10:00:05.000Z","message":{"id":"e1","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 529 overloaded"}]}}"#;
        let lines = [
            user(
                serde_json::json!("read it"),
                none.clone(),
                "2026-02-11T10:00:00.000Z",
            ),
            assistant(
                "m1",
                tool_use("t1", "Read", serde_json::json!({"file_path": "/w/x"})),
                None,
                "2026-02-11T10:00:01.000Z",
            ),
            user(
                result(
                    "t1",
                    "<tool_use_error>File does not exist.</tool_use_error>",
                    true,
                ),
                none.clone(),
                "2026-02-11T10:00:02.000Z",
            ),
            api_error.to_string(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_, turns) = read(&lines);
        let turn = &turns[0];
        assert_eq!(turn.state, TurnState::Failed);
        assert_eq!(turn.error.as_deref(), Some("API Error: 529 overloaded"));
        assert_eq!(
            turn.model.as_deref(),
            Some("claude-opus-4-6"),
            "not <synthetic>"
        );
        assert_eq!(turn.steps[0].outcome, StepOutcome::Error);
        assert_eq!(turn.steps[0].error.as_deref(), Some("File does not exist."));
        assert_eq!(turn.steps[0].kind, StepKind::Read);
    }

    #[test]
    fn records_that_are_not_prompts_open_no_turn() {
        let none = serde_json::json!({});
        let lines = [
            user(
                serde_json::json!("hello"),
                none.clone(),
                "2026-02-11T10:00:00.000Z",
            ),
            assistant(
                "m1",
                text("Hi."),
                Some("end_turn"),
                "2026-02-11T10:00:01.000Z",
            ),
            // A later block of the message that ended the turn still belongs to it.
            assistant(
                "m1",
                text("More."),
                Some("end_turn"),
                "2026-02-11T10:00:01.100Z",
            ),
            user(
                serde_json::json!("<local-command-caveat>x"),
                serde_json::json!({"isMeta": true}),
                "2026-02-11T10:00:02.000Z",
            ),
            user(
                serde_json::json!("sub task"),
                serde_json::json!({"isSidechain": true}),
                "2026-02-11T10:00:03.000Z",
            ),
            user(
                serde_json::json!("summary of before"),
                serde_json::json!({"isCompactSummary": true}),
                "2026-02-11T10:00:04.000Z",
            ),
            user(
                serde_json::json!(
                    "<task-notification>\n<status>completed</status>\n</task-notification>"
                ),
                none.clone(),
                "2026-02-11T10:00:05.000Z",
            ),
            // The answer to the notice: a turn with no prompt.
            assistant(
                "m2",
                text("The task finished."),
                Some("end_turn"),
                "2026-02-11T10:00:06.000Z",
            ),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (total, turns) = read(&lines);
        assert_eq!(total, 2);
        assert_eq!(turns[0].prompt.as_deref(), Some("hello"));
        assert_eq!(turns[0].reply.as_deref(), Some("Hi.\nMore."));
        assert_eq!(turns[0].state, TurnState::Complete);
        assert_eq!(turns[0].usage.as_ref().unwrap().output_tokens, Some(10));
        assert_eq!(turns[1].prompt, None);
        assert_eq!(turns[1].reply.as_deref(), Some("The task finished."));
        assert_eq!(turns[1].started_ms, parse_ts("2026-02-11T10:00:06.000Z"));
    }

    #[test]
    fn without_an_end_the_last_turn_is_in_progress_and_an_earlier_one_superseded() {
        let none = serde_json::json!({});
        let lines = [
            user(
                serde_json::json!("one"),
                none.clone(),
                "2026-02-11T10:00:00.000Z",
            ),
            assistant("m1", text("Answer one."), None, "2026-02-11T10:00:01.000Z"),
            user(
                serde_json::json!("two"),
                none.clone(),
                "2026-02-11T10:00:02.000Z",
            ),
            user(
                serde_json::json!("three"),
                none.clone(),
                "2026-02-11T10:00:03.000Z",
            ),
            assistant("m2", text("Working."), None, "2026-02-11T10:00:04.000Z"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_, turns) = read(&lines);
        let states: Vec<TurnState> = turns.iter().map(|t| t.state).collect();
        assert_eq!(
            states,
            [
                TurnState::Complete,
                TurnState::Unknown,
                TurnState::InProgress
            ]
        );
    }

    #[test]
    fn the_turn_boundaries_are_the_observers_prompts() {
        // Every prompt the observer reports opens a turn with the same text.
        for name in [
            "short.jsonl",
            "tool_heavy.jsonl",
            "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        ] {
            let bytes = std::fs::read(corpus::folder("claude_code").join(name)).unwrap();
            let mut parser = crate::observe::stores::claude_code::ClaudeCodeParser::new("x");
            let mut reader = ClaudeCodeTurns::new();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            let mut digests = Vec::new();
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                use crate::observe::LineParser;
                for observation in parser.feed_line(line).unwrap() {
                    if let koru_protocol::ObservedKind::PromptSeen { digest, .. } =
                        observation.event
                    {
                        digests.push(digest);
                    }
                }
                reader.feed_line(line, &mut out).unwrap();
            }
            reader.finish(&mut out);
            let read: Vec<String> = out
                .into_turns()
                .into_iter()
                .filter_map(|(_, turn)| turn.prompt)
                .map(|prompt| crate::observe::prompt_digest(&prompt))
                .collect();
            assert_eq!(read, digests, "{name}");
        }
    }

    #[test]
    fn the_corpus_reads_as_its_expectations() {
        corpus::check("claude_code", &[".jsonl"], |_, bytes, out| {
            corpus::feed_all(&mut ClaudeCodeTurns::new(), bytes, out);
        });
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        corpus::check_file_items(
            "claude_code",
            &[".jsonl"],
            crate::observe::stores::claude_code::STORE,
        );
    }

    /// A read that starts at a turn's prompt line (a drive's, once its evidence names the
    /// line) finds that turn and the later ones exactly as a read of the whole file does,
    /// records and indexes included; a line that changed since means the whole file.
    #[test]
    fn a_read_from_a_prompts_line_finds_what_the_whole_read_finds_from_there() {
        use crate::conversation::read::{read_chat, ReadFrom, ReadRequest};
        use crate::conversation::{Keep, SourceRecord};
        let mut checked = 0;
        for name in corpus::transcripts("claude_code", &[".jsonl"]) {
            let request = ReadRequest {
                store: crate::observe::stores::claude_code::STORE.into(),
                chat_id: String::new(),
                source: corpus::folder("claude_code").join(&name),
                keep: Keep::Last(usize::MAX),
                expect_reply: false,
                records: true,
                from: None,
            };
            let whole = read_chat(&request).unwrap();
            for (at, records) in whole.records.iter().enumerate() {
                let Some(SourceRecord::Line {
                    line,
                    offset,
                    sha256,
                    pointer: None,
                    ..
                }) = records.prompt.as_ref().map(|p| &p.source)
                else {
                    continue;
                };
                let from = ReadFrom {
                    line: *line,
                    offset: *offset,
                    sha256: sha256.clone(),
                    turn: whole.turns[at].0,
                };
                let part = read_chat(&ReadRequest {
                    from: Some(from.clone()),
                    ..request.clone()
                })
                .unwrap();
                assert_eq!(part.turns, whole.turns[at..], "{name} from line {line}");
                assert_eq!(part.records, whole.records[at..], "{name} from line {line}");
                assert_eq!(part.total, whole.total, "{name}");
                // The line is not what it was: the whole file is read.
                let moved = read_chat(&ReadRequest {
                    from: Some(ReadFrom {
                        sha256: "0".repeat(64),
                        ..from
                    }),
                    ..request.clone()
                })
                .unwrap();
                assert_eq!(moved, whole, "{name}");
                checked += 1;
            }
        }
        assert!(checked >= 15, "only {checked} prompts were read from");
    }

    #[test]
    fn cut_and_garbled_lines_never_panic() {
        corpus::each_mangled("claude_code", ".jsonl", 0x00c1_a0de, |lines| {
            corpus::feed_lossy(
                &mut ClaudeCodeTurns::new(),
                lines,
                &mut TurnCollector::new(Keep::Last(3)),
            );
        });
        let odd = [
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use"}],"usage":7}}"#,
            r#"{"type":"assistant","message":{"id":5,"content":"text","usage":{"input_tokens":-1}}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":[1,{"type":"text"}]}]},"toolUseResult":[]}"#,
            r#"{"type":"system","subtype":"turn_duration"}"#,
            r#"{"type":"user","message":"x"}"#,
            r#"[1]"#,
            "",
        ];
        let mut out = TurnCollector::new(Keep::Last(1));
        corpus::feed_lossy(&mut ClaudeCodeTurns::new(), &odd, &mut out);
    }
}

//! OpenAI Codex CLI rollouts (`~/.codex/sessions/…/rollout-*.jsonl`) read back as turns: the prompt, the final answer whole, every tool call with its result and exit code, times, model and token usage.
//!
//! Format facts (docs/observers.md, docs/research/chat-store-formats.md §2,
//! tests/corpus/codex): every line is `{timestamp, type, payload}`. A prompt is what the
//! observer takes for one — `event_msg` `user_message`, or (`history_mode: paginated`,
//! 0.169) `item_completed` with a `UserMessage` item — so a drive's prompt digest finds its
//! turn. The agent's messages are `agent_message` events or `AgentMessage` items; the reply
//! is `task_complete.last_agent_message` when it has one, else the last agent message.
//! `task_complete` ends a turn (failed when it carries `error`), `turn_aborted` cancels it;
//! `task_started` and `turn_context` (which names the `model`) come before the turn's
//! prompt. Tool calls are `response_item`s: `function_call` (`exec_command {cmd}`,
//! `shell {command: [...]}`, `shell_command {command}`, MCP tools…), `custom_tool_call`
//! (`apply_patch` with the patch as `input`), `local_shell_call`, `web_search_call`; their
//! results are `function_call_output` / `custom_tool_call_output` by `call_id` (older
//! builds: JSON `{output, metadata: {exit_code}}`; newer: a text header `Exit code: N` or
//! `Process exited with code N`), and the structured `exec_command_end` /
//! `patch_apply_end` events or `CommandExecution` / `FileChange` items (`status`,
//! `exit_code`), which win over the text.
//!
//! Usage: a turn's `token_usage_record.turn_token_usage` (0.169) when written, else the
//! difference between the `token_count` events' running `total_token_usage` at the turn's
//! last event and before its prompt (summing `last_token_usage` would count an event
//! repeated for rate-limit updates twice). `input_tokens` is Codex's (cached included),
//! `cache_read_tokens` its `cached_input_tokens`, `reasoning_tokens` its
//! `reasoning_output_tokens`.

use std::collections::HashMap;

use koru_protocol::{StepKind, StepOutcome, TurnState, TurnStep, TurnUsage};
use serde_json::Value;

use super::LineTurns;
use crate::conversation::items::{Item, ItemOutcome};
use crate::conversation::model::{step, step_error, summarize_arguments, Turn, TurnCollector};
use crate::observe::stores::codex::item_text;
use crate::observe::text::parse_ts;
use crate::observe::{json_record, ParseError};

/// What Codex rollouts do not record: nothing of the turn model.
pub const NOT_RECORDED: &[&str] = &[];

/// The turn reader for one rollout.
#[derive(Debug, Default)]
pub struct CodexTurns {
    open: Option<OpenTurn>,
    /// The model the latest `turn_context` named.
    model: Option<String>,
    /// The latest `token_count` running total.
    total: Option<TurnUsage>,
    /// The `turn_id` of the latest `task_started`.
    task_turn_id: Option<String>,
}

#[derive(Debug)]
struct OpenTurn {
    turn: Turn,
    /// `call_id` → its step's index.
    calls: HashMap<String, usize>,
    /// The running total before the turn's prompt.
    baseline: Option<TurnUsage>,
    /// A `token_usage_record` gave the turn's own usage.
    usage_recorded: bool,
    /// Codex's id of the turn (from its prompt or the `task_started` before it).
    turn_id: Option<String>,
}

impl OpenTurn {
    fn ended(&self) -> bool {
        self.turn.state != TurnState::InProgress
    }
}

impl CodexTurns {
    pub fn new() -> Self {
        CodexTurns::default()
    }

    /// Pushes the open turn (if any) and opens the next one.
    fn start(
        &mut self,
        prompt: Option<String>,
        at_ms: Option<u64>,
        turn_id: Option<String>,
        out: &mut TurnCollector,
    ) -> &mut OpenTurn {
        if let Some(mut open) = self.open.take() {
            open.turn.supersede();
            out.push(open.turn);
        }
        let mut turn = Turn::new(prompt, at_ms);
        turn.model.clone_from(&self.model);
        let turn_id = turn_id.or_else(|| self.task_turn_id.clone());
        self.open.insert(OpenTurn {
            turn,
            calls: HashMap::new(),
            baseline: self.total.clone(),
            usage_recorded: false,
            turn_id,
        })
    }

    /// The open turn, for the agent's own activity: a new one with no prompt when none is
    /// open or the open one ended.
    fn active(&mut self, at_ms: Option<u64>, out: &mut TurnCollector) -> &mut OpenTurn {
        let open = match self.open.take() {
            Some(open) if !open.ended() => self.open.insert(open),
            previous => {
                self.open = previous;
                self.start(None, at_ms, None, out)
            }
        };
        open.turn.touch(at_ms);
        open
    }

    /// The open turn, if it has not ended.
    fn running(&mut self) -> Option<&mut OpenTurn> {
        self.open.as_mut().filter(|open| !open.ended())
    }

    /// The open turn's step for `call_id` (results may come after the turn ended).
    fn call(&mut self, call_id: Option<&str>) -> Option<&mut TurnStep> {
        let open = self.open.as_mut()?;
        let index = *open.calls.get(call_id?)?;
        open.turn.steps.get_mut(index)
    }

    fn agent_text(&mut self, text: String, at_ms: Option<u64>, out: &mut TurnCollector) {
        let open = self.active(at_ms, out);
        if !text.is_empty() {
            out.item(Item::assistant_text(&text, at_ms));
            open.turn.reply = Some(text);
        }
    }

    /// A prompt: the open turn is pushed, the prompt's opens.
    fn prompt(
        &mut self,
        prompt: String,
        at_ms: Option<u64>,
        turn_id: Option<String>,
        out: &mut TurnCollector,
    ) {
        let open = self.start(Some(prompt), at_ms, turn_id, out);
        if let Some(prompt) = open.turn.prompt.as_deref() {
            out.item(Item::prompt(prompt, at_ms));
        }
    }

    fn add_step(&mut self, call: TurnStep, call_id: Option<&str>, out: &mut TurnCollector) {
        let open = self.active(call.at_ms, out);
        out.item(Item::tool_call(&call, call_id));
        if let Some(id) = call_id {
            open.calls.insert(id.to_string(), open.turn.steps.len());
        }
        open.turn.steps.push(call);
    }

    fn event(&mut self, payload: &Value, at_ms: Option<u64>, out: &mut TurnCollector) {
        let text = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or("");
        match text("type") {
            "user_message" => {
                let prompt = text("message");
                if !prompt.trim().is_empty() {
                    let turn_id = payload
                        .get("turn_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    self.prompt(prompt.to_string(), at_ms, turn_id, out);
                }
            }
            "item_completed" => {
                let item = payload.get("item").unwrap_or(&Value::Null);
                match item.get("type").and_then(Value::as_str).unwrap_or("") {
                    "UserMessage" => {
                        let prompt = item_text(item);
                        if !prompt.trim().is_empty() {
                            let turn_id = payload
                                .get("turn_id")
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            self.prompt(prompt, at_ms, turn_id, out);
                        }
                    }
                    "AgentMessage" => self.agent_text(item_text(item), at_ms, out),
                    "Reasoning" => {
                        self.active(at_ms, out);
                    }
                    _ => {
                        // A command, file change or tool call item: its result.
                        let id = item.get("id").and_then(Value::as_str);
                        if let Some(call) = self.call(id) {
                            structured_result(call, item);
                        }
                        self.touch(at_ms);
                    }
                }
            }
            "agent_message" => self.agent_text(text("message").to_string(), at_ms, out),
            "agent_reasoning" => {
                self.active(at_ms, out);
            }
            "task_started" => {
                self.task_turn_id = payload
                    .get("turn_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            "task_complete" => {
                if let Some(open) = self.running() {
                    if let Some(last) = payload
                        .get("last_agent_message")
                        .and_then(Value::as_str)
                        .filter(|last| !last.is_empty())
                    {
                        open.turn.reply = Some(last.to_string());
                    }
                    match payload.get("error").filter(|error| !error.is_null()) {
                        Some(error) => {
                            let message =
                                error.get("message").and_then(Value::as_str).unwrap_or("");
                            open.turn.fail(message, "the turn failed");
                            out.item(Item::turn_end(
                                ItemOutcome::Failed,
                                open.turn.error.as_deref(),
                                at_ms,
                            ));
                        }
                        None => {
                            open.turn.state = TurnState::Complete;
                            out.item(Item::turn_end(ItemOutcome::Complete, None, at_ms));
                        }
                    }
                    open.turn.touch(at_ms);
                }
            }
            "turn_aborted" => {
                if let Some(open) = self.running() {
                    open.turn.cancel();
                    open.turn.touch(at_ms);
                    out.item(Item::turn_end(ItemOutcome::Cancelled, None, at_ms));
                }
            }
            "token_count" => {
                let Some(total) = payload
                    .get("info")
                    .and_then(|info| info.get("total_token_usage"))
                    .and_then(usage_of)
                else {
                    return;
                };
                self.total = Some(total.clone());
                if let Some(open) = self.running() {
                    if !open.usage_recorded {
                        open.turn.usage = Some(difference(&total, open.baseline.as_ref()));
                    }
                    open.turn.touch(at_ms);
                }
            }
            "exec_command_end" | "patch_apply_end" | "mcp_tool_call_end" => {
                let id = payload.get("call_id").and_then(Value::as_str);
                if let Some(call) = self.call(id) {
                    structured_result(call, payload);
                }
                self.touch(at_ms);
            }
            _ => self.touch(at_ms),
        }
    }

    fn touch(&mut self, at_ms: Option<u64>) {
        if let Some(open) = self.running() {
            open.turn.touch(at_ms);
        }
    }

    fn response_item(&mut self, payload: &Value, at_ms: Option<u64>, out: &mut TurnCollector) {
        let call_id = payload.get("call_id").and_then(Value::as_str);
        let name = payload.get("name").and_then(Value::as_str).unwrap_or("");
        match payload.get("type").and_then(Value::as_str).unwrap_or("") {
            "function_call" => {
                // `arguments` is a JSON text.
                let arguments = payload
                    .get("arguments")
                    .and_then(Value::as_str)
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
                    .unwrap_or(Value::Null);
                let mut call = tool_step(name, &arguments);
                call.at_ms = at_ms;
                self.add_step(call, call_id, out);
            }
            "custom_tool_call" => {
                let input = payload.get("input").unwrap_or(&Value::Null);
                let mut call = match input.as_str() {
                    Some(patch) if name == "apply_patch" => patch_step(name, patch),
                    _ => step(StepKind::Tool, name, &summarize_arguments(input)),
                };
                call.kind = if name == "apply_patch" {
                    StepKind::Edit
                } else {
                    kind_of(name)
                };
                call.at_ms = at_ms;
                self.add_step(call, call_id, out);
            }
            "local_shell_call" => {
                let action = payload.get("action").unwrap_or(&Value::Null);
                let arguments = serde_json::json!({"command": action.get("command")});
                let mut call = tool_step("local_shell_call", &arguments);
                call.at_ms = at_ms;
                if let Some(outcome) = status_outcome(payload.get("status")) {
                    call.outcome = outcome;
                }
                self.add_step(call, call_id, out);
            }
            "web_search_call" => {
                let action = payload.get("action").unwrap_or(&Value::Null);
                let mut call = step(
                    StepKind::Web,
                    "web_search_call",
                    &summarize_arguments(action),
                );
                call.at_ms = at_ms;
                call.outcome =
                    status_outcome(payload.get("status")).unwrap_or(StepOutcome::Unknown);
                self.add_step(call, call_id, out);
            }
            "function_call_output" | "custom_tool_call_output" => {
                if let Some(call) = self.call(call_id) {
                    let text = output_result(call, payload.get("output").unwrap_or(&Value::Null));
                    out.item(Item::step_result(call, call_id, Some(&text), at_ms));
                }
                self.touch(at_ms);
            }
            _ => self.touch(at_ms),
        }
    }
}

impl LineTurns for CodexTurns {
    fn feed_line(&mut self, line: &[u8], out: &mut TurnCollector) -> Result<(), ParseError> {
        let record = json_record(line)?;
        let at_ms = record
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_ts);
        let payload = record.get("payload").unwrap_or(&Value::Null);
        match record.get("type").and_then(Value::as_str).unwrap_or("") {
            "session_meta" => {
                if let Some(model) = payload.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
            }
            "turn_context" => {
                let Some(model) = payload.get("model").and_then(Value::as_str) else {
                    return Ok(());
                };
                self.model = Some(model.to_string());
                let turn_id = payload.get("turn_id").and_then(Value::as_str);
                if let Some(open) = self.running() {
                    // A context for the open turn (not the next one's, written before its
                    // prompt).
                    if turn_id.is_none()
                        || open.turn_id.is_none()
                        || open.turn_id.as_deref() == turn_id
                    {
                        open.turn.model = Some(model.to_string());
                    }
                }
            }
            "event_msg" => self.event(payload, at_ms, out),
            "response_item" => self.response_item(payload, at_ms, out),
            "token_usage_record" => {
                if let Some(usage) = payload.get("turn_token_usage").and_then(usage_of) {
                    if let Some(open) = self.running() {
                        open.turn.usage = Some(usage);
                        open.usage_recorded = true;
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
            out.push(open.turn);
        }
    }
}

/// A Codex usage object (`input_tokens`, `cached_input_tokens`, …).
fn usage_of(value: &Value) -> Option<TurnUsage> {
    if !value.is_object() {
        return None;
    }
    let field = |key: &str| value.get(key).and_then(Value::as_u64);
    Some(TurnUsage {
        input_tokens: field("input_tokens"),
        output_tokens: field("output_tokens"),
        cache_read_tokens: field("cached_input_tokens"),
        cache_write_tokens: field("cache_write_input_tokens"),
        reasoning_tokens: field("reasoning_output_tokens"),
    })
}

/// `total` less `baseline`, field by field; `total` itself when a counter went back (a
/// restarted count).
fn difference(total: &TurnUsage, baseline: Option<&TurnUsage>) -> TurnUsage {
    let Some(base) = baseline else {
        return total.clone();
    };
    let pairs = [
        (total.input_tokens, base.input_tokens),
        (total.output_tokens, base.output_tokens),
        (total.cache_read_tokens, base.cache_read_tokens),
        (total.cache_write_tokens, base.cache_write_tokens),
        (total.reasoning_tokens, base.reasoning_tokens),
    ];
    if pairs.iter().any(|(t, b)| t.unwrap_or(0) < b.unwrap_or(0)) {
        return total.clone();
    }
    let minus = |(t, b): (Option<u64>, Option<u64>)| t.map(|t| t - b.unwrap_or(0));
    TurnUsage {
        input_tokens: minus(pairs[0]),
        output_tokens: minus(pairs[1]),
        cache_read_tokens: minus(pairs[2]),
        cache_write_tokens: minus(pairs[3]),
        reasoning_tokens: minus(pairs[4]),
    }
}

/// What a tool's name says it does.
fn kind_of(tool: &str) -> StepKind {
    match tool {
        "exec_command" | "shell" | "shell_command" | "local_shell_call" | "container.exec" => {
            StepKind::Command
        }
        "apply_patch" => StepKind::Edit,
        "view_image" => StepKind::Read,
        "web_search" | "web_search_call" => StepKind::Web,
        "spawn_agent" => StepKind::Agent,
        _ => StepKind::Tool,
    }
}

/// A command line from `cmd`/`command` arguments: a string, or an argv whose
/// `sh -c`/`bash -lc` script is the command.
fn command_line(arguments: &Value) -> Option<(String, Vec<String>)> {
    let value = arguments.get("cmd").or_else(|| arguments.get("command"))?;
    match value {
        Value::String(command) => Some((command.clone(), vec![command.clone()])),
        Value::Array(parts) => {
            let argv: Vec<String> = parts
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            let script = match argv.as_slice() {
                [shell, flag, script]
                    if shell.ends_with("sh") && matches!(flag.as_str(), "-c" | "-lc") =>
                {
                    script.clone()
                }
                _ => argv.join(" "),
            };
            Some((script, argv))
        }
        _ => None,
    }
}

/// A `function_call` (or `local_shell_call`) as a step.
fn tool_step(name: &str, arguments: &Value) -> TurnStep {
    let kind = kind_of(name);
    match kind {
        StepKind::Command => match command_line(arguments) {
            // Models of older builds call `apply_patch` through the shell.
            Some((_, argv)) if argv.first().map(String::as_str) == Some("apply_patch") => {
                let mut call = patch_step(name, argv.get(1).map_or("", String::as_str));
                call.kind = StepKind::Edit;
                call
            }
            Some((command, _)) => {
                let mut call = step(kind, name, &command);
                call.command = Some(command);
                call
            }
            None => step(kind, name, &summarize_arguments(arguments)),
        },
        StepKind::Edit => {
            let patch = arguments
                .get("input")
                .or_else(|| arguments.get("patch"))
                .and_then(Value::as_str)
                .unwrap_or("");
            patch_step(name, patch)
        }
        StepKind::Read => {
            let path = arguments.get("path").and_then(Value::as_str);
            let mut call = step(
                kind,
                name,
                &path.map_or_else(|| summarize_arguments(arguments), str::to_string),
            );
            call.paths = path.map(str::to_string).into_iter().collect();
            call
        }
        _ => step(kind, name, &summarize_arguments(arguments)),
    }
}

/// An `apply_patch` call: the files its patch names.
fn patch_step(name: &str, patch: &str) -> TurnStep {
    let paths: Vec<String> = patch
        .lines()
        .filter_map(|line| {
            [
                "*** Update File: ",
                "*** Add File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|marker| line.strip_prefix(marker))
        })
        .map(|path| path.trim().to_string())
        .filter(|path| !path.is_empty())
        .collect();
    let mut call = step(StepKind::Edit, name, &paths.join(", "));
    call.paths = paths;
    call
}

/// A `status` as an outcome (`completed`, `failed`, `declined`…), when it says one.
fn status_outcome(status: Option<&Value>) -> Option<StepOutcome> {
    match status?.as_str()? {
        "completed" | "success" => Some(StepOutcome::Ok),
        "failed" | "error" => Some(StepOutcome::Error),
        "declined" | "rejected" | "aborted" | "cancelled" => Some(StepOutcome::Rejected),
        _ => None,
    }
}

/// A structured result (`exec_command_end`, `patch_apply_end`, `mcp_tool_call_end`, or a
/// completed `CommandExecution` / `FileChange` / tool item): wins over the text output.
fn structured_result(call: &mut TurnStep, result: &Value) {
    let exit_code = result.get("exit_code").and_then(Value::as_i64);
    if call.kind == StepKind::Command {
        if let Some(code) = exit_code {
            call.exit_code = Some(code);
        }
    }
    let failure_text = || {
        ["stderr", "aggregated_output", "error"]
            .iter()
            .filter_map(|key| result.get(*key))
            .find_map(|value| match value {
                Value::String(text) if !text.trim().is_empty() => Some(text.clone()),
                Value::Object(error) => error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                _ => None,
            })
            .unwrap_or_default()
    };
    let outcome = match status_outcome(result.get("status")) {
        Some(StepOutcome::Ok) | None if exit_code.is_some_and(|code| code != 0) => {
            StepOutcome::Error
        }
        Some(outcome) => outcome,
        None => match result.get("success").and_then(Value::as_bool) {
            Some(true) => StepOutcome::Ok,
            Some(false) => StepOutcome::Error,
            None if exit_code == Some(0) => StepOutcome::Ok,
            // `mcp_tool_call_end`: `result` is `{"Ok": …}` or `{"Err": …}`.
            None => match result.get("result") {
                Some(result) if result.get("Err").is_some() => StepOutcome::Error,
                Some(result) if result.get("Ok").is_some() => StepOutcome::Ok,
                _ => return,
            },
        },
    };
    call.outcome = outcome;
    call.error = match outcome {
        StepOutcome::Error | StepOutcome::Rejected => step_error(&failure_text()),
        _ => None,
    };
}

/// A `function_call_output` / `custom_tool_call_output`: its text, and the exit code it
/// records (JSON `metadata.exit_code`, or an `Exit code: N` / `Process exited with code N`
/// header line). A structured result read before keeps its outcome.
fn output_result(call: &mut TurnStep, output: &Value) -> String {
    let (text, success) = match output {
        Value::String(text) => (text.clone(), None),
        Value::Array(items) => (
            items
                .iter()
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            None,
        ),
        Value::Object(object) => (
            object
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            object.get("success").and_then(Value::as_bool),
        ),
        _ => (String::new(), None),
    };
    let (text, exit_code) = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(json)) if json.contains_key("output") => (
            json.get("output")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            json.get("metadata")
                .and_then(|metadata| metadata.get("exit_code"))
                .and_then(Value::as_i64),
        ),
        _ => {
            let code = header_exit_code(&text);
            (text, code)
        }
    };
    if call.kind == StepKind::Command && call.exit_code.is_none() {
        call.exit_code = exit_code;
    }
    if call.outcome != StepOutcome::Unknown {
        return text;
    }
    let trimmed = text.trim();
    let refused = trimmed == "aborted" || trimmed.contains("rejected by user");
    call.outcome = if refused {
        StepOutcome::Rejected
    } else if exit_code.is_some_and(|code| code != 0) || success == Some(false) {
        StepOutcome::Error
    } else {
        StepOutcome::Ok
    };
    if call.outcome != StepOutcome::Ok {
        call.error = step_error(&text);
    }
    text
}

/// The exit code in a command output's header (the lines before `Output:`).
fn header_exit_code(text: &str) -> Option<i64> {
    text.lines()
        .take_while(|line| !line.starts_with("Output:"))
        .take(8)
        .find_map(|line| {
            line.strip_prefix("Exit code: ")
                .or_else(|| line.strip_prefix("Process exited with code "))
                .and_then(|code| code.trim().parse().ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::model::{corpus, Keep};

    fn read(lines: &[&str]) -> (u64, Vec<Turn>) {
        let mut reader = CodexTurns::new();
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

    fn event(ts: &str, payload: serde_json::Value) -> String {
        serde_json::json!({"timestamp": ts, "type": "event_msg", "payload": payload}).to_string()
    }

    fn item(ts: &str, payload: serde_json::Value) -> String {
        serde_json::json!({"timestamp": ts, "type": "response_item", "payload": payload})
            .to_string()
    }

    fn total(input: u64, cached: u64, output: u64) -> serde_json::Value {
        serde_json::json!({"type": "token_count", "info": {"total_token_usage": {"input_tokens": input,
            "cached_input_tokens": cached, "output_tokens": output, "reasoning_output_tokens": 0, "total_tokens": input + output},
            "last_token_usage": {"input_tokens": 1}}})
    }

    const CONTEXT: &str = r#"{"timestamp":"2026-03-01T10:00:00.500Z","type":"turn_context","payload":{"turn_id":"t1","cwd":"/w","model":"gpt-5.4-codex"}}"#;

    #[test]
    fn a_legacy_rollout_turn_with_commands_a_patch_and_usage() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: src/b.rs\n+x\n*** End Patch";
        let lines = [
            CONTEXT.to_string(),
            event("2026-03-01T10:00:00.600Z", total(1000, 0, 50)),
            event(
                "2026-03-01T10:00:01.000Z",
                serde_json::json!({"type": "task_started", "turn_id": "t1"}),
            ),
            event(
                "2026-03-01T10:00:01.010Z",
                serde_json::json!({"type": "user_message", "message": "fix the test", "images": []}),
            ),
            event(
                "2026-03-01T10:00:02.000Z",
                serde_json::json!({"type": "agent_message", "message": "Running the tests.", "phase": "commentary"}),
            ),
            item(
                "2026-03-01T10:00:03.000Z",
                serde_json::json!({"type": "function_call", "name": "shell", "call_id": "c1",
                "arguments": "{\"command\":[\"bash\",\"-lc\",\"cargo test\"],\"workdir\":\"/w\"}"}),
            ),
            event(
                "2026-03-01T10:00:04.000Z",
                serde_json::json!({"type": "exec_command_end", "call_id": "c1", "exit_code": 101,
                "stderr": "test parse ... FAILED", "aggregated_output": "x"}),
            ),
            item(
                "2026-03-01T10:00:04.100Z",
                serde_json::json!({"type": "function_call_output", "call_id": "c1",
                "output": "{\"output\":\"test parse ... FAILED\",\"metadata\":{\"exit_code\":101,\"duration_seconds\":1.2}}"}),
            ),
            item(
                "2026-03-01T10:00:05.000Z",
                serde_json::json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "c2", "input": patch}),
            ),
            item(
                "2026-03-01T10:00:05.100Z",
                serde_json::json!({"type": "custom_tool_call_output", "call_id": "c2",
                "output": "{\"output\":\"Success. Updated the following files:\\nM src/a.rs\\nA src/b.rs\\n\",\"metadata\":{\"exit_code\":0}}"}),
            ),
            item(
                "2026-03-01T10:00:06.000Z",
                serde_json::json!({"type": "function_call", "name": "exec_command", "call_id": "c3",
                "arguments": "{\"cmd\":\"cargo test\"}"}),
            ),
            item(
                "2026-03-01T10:00:07.000Z",
                serde_json::json!({"type": "function_call_output", "call_id": "c3",
                "output": "Exit code: 0\nWall time: 1.1 seconds\nOutput:\nok"}),
            ),
            item(
                "2026-03-01T10:00:07.500Z",
                serde_json::json!({"type": "web_search_call", "status": "completed",
                "action": {"type": "search", "query": "rust chrono"}}),
            ),
            event(
                "2026-03-01T10:00:08.000Z",
                serde_json::json!({"type": "agent_message", "message": "Fixed.", "phase": "final_answer"}),
            ),
            event("2026-03-01T10:00:08.100Z", total(3000, 1500, 250)),
            event("2026-03-01T10:00:08.200Z", total(3000, 1500, 250)),
            event(
                "2026-03-01T10:00:09.000Z",
                serde_json::json!({"type": "task_complete", "turn_id": "t1",
                "last_agent_message": "Fixed: the parser was off by one."}),
            ),
            // Trailing records after the end do not move it.
            event(
                "2026-03-01T10:00:30.000Z",
                serde_json::json!({"type": "thread_settings_applied"}),
            ),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (total_turns, turns) = read(&lines);
        assert_eq!(total_turns, 1);
        let turn = &turns[0];
        assert_eq!(turn.prompt.as_deref(), Some("fix the test"));
        assert_eq!(
            turn.reply.as_deref(),
            Some("Fixed: the parser was off by one.")
        );
        assert_eq!(turn.state, TurnState::Complete);
        assert_eq!(turn.model.as_deref(), Some("gpt-5.4-codex"));
        assert_eq!(turn.started_ms, parse_ts("2026-03-01T10:00:01.010Z"));
        assert_eq!(turn.ended_ms, parse_ts("2026-03-01T10:00:09.000Z"));
        assert_eq!(
            turn.usage,
            Some(TurnUsage {
                input_tokens: Some(2000),
                output_tokens: Some(200),
                cache_read_tokens: Some(1500),
                cache_write_tokens: None,
                reasoning_tokens: Some(0)
            }),
            "the difference of the totals, a repeated event counted once"
        );
        let [shell, patch, exec, web] = turn.steps.as_slice() else {
            panic!("{:?}", turn.steps)
        };
        assert_eq!(shell.command.as_deref(), Some("cargo test"));
        assert_eq!(
            (shell.exit_code, shell.outcome),
            (Some(101), StepOutcome::Error)
        );
        assert_eq!(shell.error.as_deref(), Some("test parse ... FAILED"));
        assert_eq!(patch.kind, StepKind::Edit);
        assert_eq!(patch.paths, ["src/a.rs", "src/b.rs"]);
        assert_eq!((patch.exit_code, patch.outcome), (None, StepOutcome::Ok));
        assert_eq!((exec.exit_code, exec.outcome), (Some(0), StepOutcome::Ok));
        assert_eq!((web.kind, web.outcome), (StepKind::Web, StepOutcome::Ok));
    }

    #[test]
    fn aborted_failed_and_steered_turns() {
        let lines = [
            event(
                "2026-03-01T10:00:01.000Z",
                serde_json::json!({"type": "user_message", "message": "first"}),
            ),
            item(
                "2026-03-01T10:00:02.000Z",
                serde_json::json!({"type": "function_call", "name": "exec_command", "call_id": "c1",
                "arguments": "{\"cmd\":\"sleep 100\"}"}),
            ),
            event(
                "2026-03-01T10:00:03.000Z",
                serde_json::json!({"type": "turn_aborted", "reason": "interrupted"}),
            ),
            item(
                "2026-03-01T10:00:03.100Z",
                serde_json::json!({"type": "function_call_output", "call_id": "c1", "output": "aborted"}),
            ),
            event(
                "2026-03-01T10:00:04.000Z",
                serde_json::json!({"type": "user_message", "message": "second"}),
            ),
            event(
                "2026-03-01T10:00:05.000Z",
                serde_json::json!({"type": "task_complete", "last_agent_message": null,
                "error": {"message": "stream disconnected before completion"}}),
            ),
            event(
                "2026-03-01T10:00:06.000Z",
                serde_json::json!({"type": "user_message", "message": "third"}),
            ),
            event(
                "2026-03-01T10:00:07.000Z",
                serde_json::json!({"type": "agent_message", "message": "On it."}),
            ),
            // A prompt steered into the running turn starts the next one.
            event(
                "2026-03-01T10:00:08.000Z",
                serde_json::json!({"type": "user_message", "message": "fourth"}),
            ),
            event(
                "2026-03-01T10:00:09.000Z",
                serde_json::json!({"type": "user_message", "message": "   "}),
            ),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (total, turns) = read(&lines);
        assert_eq!(total, 4);
        assert_eq!(turns[0].state, TurnState::Cancelled);
        assert_eq!(turns[0].steps[0].outcome, StepOutcome::Rejected);
        assert_eq!(turns[0].ended_ms, parse_ts("2026-03-01T10:00:03.000Z"));
        assert_eq!(turns[1].state, TurnState::Failed);
        assert_eq!(
            turns[1].error.as_deref(),
            Some("stream disconnected before completion")
        );
        assert_eq!(
            turns[2].state,
            TurnState::Complete,
            "the next prompt came after a reply"
        );
        assert_eq!(turns[3].state, TurnState::InProgress);
        assert_eq!(turns[3].prompt.as_deref(), Some("fourth"));
    }

    #[test]
    fn paginated_items_and_the_usage_record() {
        let lines = [
            r#"{"timestamp":"2026-09-07T10:00:00.000Z","type":"turn_context","payload":{"turn_id":"t1","model":"gpt-6"}}"#.to_string(),
            event("2026-09-07T10:00:01.000Z", serde_json::json!({"type": "item_completed", "turn_id": "t1",
                "item": {"type": "UserMessage", "id": "i1", "content": [{"type": "text", "text": "rename the crate"}]}})),
            item("2026-09-07T10:00:02.000Z", serde_json::json!({"type": "function_call", "name": "exec_command", "call_id": "c1",
                "arguments": "{\"cmd\":\"git mv a b\"}"})),
            event("2026-09-07T10:00:03.000Z", serde_json::json!({"type": "item_completed", "item": {"type": "CommandExecution",
                "id": "c1", "status": "declined", "exit_code": null}})),
            item("2026-09-07T10:00:03.100Z", serde_json::json!({"type": "function_call_output", "call_id": "c1",
                "output": "exec command rejected by user"})),
            serde_json::json!({"timestamp": "2026-09-07T10:00:04.000Z", "type": "token_usage_record", "payload": {"turn_id": "t1",
                "turn_token_usage": {"input_tokens": 70, "cached_input_tokens": 10, "output_tokens": 7}}}).to_string(),
            event("2026-09-07T10:00:05.000Z", total(999, 0, 99)),
            event("2026-09-07T10:00:06.000Z", serde_json::json!({"type": "item_completed",
                "item": {"type": "AgentMessage", "id": "i3", "content": [{"type": "Text", "text": "I was not allowed to."}]}})),
            // The next turn's context, written before its prompt, does not rename the model.
            r#"{"timestamp":"2026-09-07T10:00:07.000Z","type":"turn_context","payload":{"turn_id":"t2","model":"gpt-7"}}"#.to_string(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_, turns) = read(&lines);
        let turn = &turns[0];
        assert_eq!(turn.steps[0].outcome, StepOutcome::Rejected);
        assert_eq!(turn.usage.as_ref().unwrap().input_tokens, Some(70));
        assert_eq!(turn.reply.as_deref(), Some("I was not allowed to."));
        assert_eq!(turn.model.as_deref(), Some("gpt-6"));
        assert_eq!(turn.state, TurnState::InProgress);
    }

    #[test]
    fn the_turn_boundaries_are_the_observers_prompts() {
        for entry in std::fs::read_dir(corpus::folder("codex"))
            .unwrap()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".jsonl") {
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            let mut parser = crate::observe::stores::codex::CodexParser::new("x");
            let mut reader = CodexTurns::new();
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
        corpus::check("codex", &[".jsonl"], |_, bytes, out| {
            corpus::feed_all(&mut CodexTurns::new(), bytes, out);
        });
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        corpus::check_file_items("codex", &[".jsonl"], crate::observe::stores::codex::STORE);
    }

    #[test]
    fn cut_and_garbled_lines_never_panic() {
        corpus::each_mangled("codex", ".jsonl", 0x00c0_dec5, |lines| {
            corpus::feed_lossy(
                &mut CodexTurns::new(),
                lines,
                &mut TurnCollector::new(Keep::Last(2)),
            );
        });
        let odd = [
            r#"{"type":"response_item","payload":{"type":"function_call","arguments":"{\"command\":[1,null]}","call_id":7}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"apply_patch\"]}","call_id":"a"}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"a","output":{"content":5}}}"#,
            r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":-5}}}}"#,
            r#"{"type":"event_msg","payload":{"type":"exec_command_end","call_id":"a","exit_code":"x","status":3}}"#,
            r#"{"type":"event_msg","payload":{"type":"task_complete","error":"boom"}}"#,
            r#"{"type":"event_msg","payload":"x"}"#,
            "null",
        ];
        let mut out = TurnCollector::new(Keep::Last(1));
        corpus::feed_lossy(&mut CodexTurns::new(), &odd, &mut out);
    }
}

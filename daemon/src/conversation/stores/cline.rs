//! Cline, Roo Code and Kilo Code task folders (`tasks/<task>/ui_messages.json`) read back as turns: the prompt, the final answer whole, every command and file tool with the result the next API request reports, times, model and token usage.
//!
//! Format facts (docs/observers.md "Cline, Roo Code, Kilo Code", research notes §5;
//! tests/corpus/cline_tasks, written by Cline CLI 2.18.0 / core 3.82.0): `ui_messages.json`
//! is one JSON array of `{ts, type: "say"|"ask", say?, ask?, text?, partial?, modelInfo?}`.
//! Where turns begin is the observer's own rule (`observe::stores::cline::task_turns`: a
//! `say: task` / `user_feedback`, Roo's first `say: text`, or work the user let a reopened
//! task carry on with), and so is each turn's state, so a drive's prompt digest finds its
//! turn and a read agrees with the events.
//!
//! - Reply: the turn's last `say: completion_result` (without the `HAS_CHANGES` flag Cline
//!   appends), else its last non-empty `say: text`, else what the observer shows (the
//!   question of a `followup` ask).
//! - Steps: `say`/`ask` `command` (the command line, `REQ_APP` appended when it asks
//!   approval; corpus: `say: command` "ls" then `ask: command_output`), `tool` (JSON
//!   `{tool: editedExistingFile | newFileCreated | readFile | listFilesTopLevel |
//!   searchFiles | …, path, regex?}`), `use_mcp_server` (JSON `{serverName, toolName,
//!   arguments}`), browser actions and sub-agents. Partial (still streaming) messages are not
//!   steps yet.
//! - Outcomes: the next `api_req_started` carries the tool results Cline sent back, its
//!   `request` text starting with `[<tool> for '<what>'] Result:` then the result (corpus:
//!   `[execute_command for 'ls'] Result:\nCommand executed successfully (exit code 0).`).
//!   `The user denied this operation.` is `Rejected`, `The tool execution failed with the
//!   following error:\n<error>…</error>` an `Error`, an `exit code N` in the result's first
//!   lines the command's exit code. A step with no result yet has no outcome.
//! - Usage: each `api_req_started` JSON's `tokensIn`, `tokensOut`, `cacheReads`,
//!   `cacheWrites`, summed over the turn. Model: the messages' `modelInfo.modelId` (Cline;
//!   Roo and Kilo do not write it). Times: the messages' `ts`; the `resume_task` asks Cline
//!   writes when a task is stopped or reopened do not extend a turn.

use koru_protocol::{StepKind, StepOutcome, TurnStep, TurnUsage};
use serde_json::{Map, Value};

use crate::conversation::items::{array_elements, Item, ItemOutcome, SourceRecord};
use crate::conversation::model::{
    set_state_from_snapshot, step, step_error, summarize_arguments, time_ms, Turn, TurnCollector,
};
use crate::observe::snapshot::TurnSnapshot;
use crate::observe::stores::cline::task_turns;
use crate::observe::ParseError;

/// What task folders do not record: the model in Roo's and Kilo's messages, and a command's
/// exit status beyond what the core's result text says.
pub const NOT_RECORDED: &[&str] = &["model", "exit_status"];

/// A task's `ui_messages.json` → its turns, oldest first. `Err` for bytes that are not a
/// complete JSON array (a file caught mid-rewrite: read it again).
pub fn turns_from_task(ui_messages: &[u8], out: &mut TurnCollector) -> Result<(), ParseError> {
    let value: Value = serde_json::from_slice(ui_messages).map_err(|error| {
        ParseError::NotJson(format!("ui_messages.json is not complete JSON: {error}"))
    })?;
    let Value::Array(messages) = value else {
        return Err(ParseError::Shape(
            "ui_messages.json is not a JSON array".into(),
        ));
    };
    let sources = if out.wants_items() {
        array_elements(ui_messages, None)
    } else {
        Vec::new()
    };
    let turns = task_turns(&messages);
    for (position, (start, observed)) in turns.iter().enumerate() {
        let end = turns
            .get(position + 1)
            .map_or(messages.len(), |(next, _)| *next);
        let range = *start..end.max(*start);
        let slice = messages.get(range.clone()).unwrap_or_default();
        let turn = read_turn(slice, sources.get(range).unwrap_or_default(), observed, out);
        out.push(turn);
    }
    Ok(())
}

/// The fields of one message this reader uses.
struct Message<'a> {
    kind: &'a str,
    name: &'a str,
    text: &'a str,
    partial: bool,
    ts: Option<u64>,
    fields: &'a Map<String, Value>,
}

impl<'a> Message<'a> {
    fn read(fields: &'a Map<String, Value>) -> Self {
        let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
        let name = match kind {
            "say" | "ask" => fields.get(kind).and_then(Value::as_str).unwrap_or(""),
            _ => "",
        };
        Message {
            kind,
            name,
            text: fields.get("text").and_then(Value::as_str).unwrap_or(""),
            partial: fields.get("partial").and_then(Value::as_bool) == Some(true),
            ts: fields.get("ts").and_then(time_ms),
            fields,
        }
    }
}

/// One turn's messages (the first opens it) → the turn, its items reported from `sources`
/// (the messages' elements; empty when no items are wanted).
fn read_turn(
    messages: &[Value],
    sources: &[SourceRecord],
    observed: &TurnSnapshot,
    out: &mut TurnCollector,
) -> Turn {
    let objects: Vec<(Option<&SourceRecord>, Message)> = messages
        .iter()
        .enumerate()
        .filter_map(|(index, message)| {
            Some((sources.get(index), Message::read(message.as_object()?)))
        })
        .collect();
    let started = objects.first().and_then(|(_, message)| message.ts);
    let mut turn = Turn::new(observed.prompt.clone(), started);
    // The prompt's own message is not the agent's (Roo writes it as `say: text`).
    let skip = usize::from(observed.prompt.is_some());
    if let (Some(prompt), Some((source, first))) = (&observed.prompt, objects.first()) {
        if let Some(source) = source {
            out.set_source((*source).clone());
        }
        out.item(Item::prompt(prompt, first.ts));
    }
    let mut result: Option<String> = None;
    let mut last_text: Option<String> = None;
    // Steps from here on have not had their results reported by an API request yet.
    let mut awaiting = 0;
    for (_, message) in objects.iter() {
        let resume = message.kind == "ask"
            && matches!(message.name, "resume_task" | "resume_completed_task");
        if !resume {
            turn.touch(message.ts);
        }
        if let Some(model) = message
            .fields
            .get("modelInfo")
            .and_then(|info| info.get("modelId"))
            .and_then(Value::as_str)
            .filter(|model| !model.trim().is_empty())
        {
            turn.model = Some(model.to_string());
        }
    }
    for (source, message) in objects.iter().skip(skip) {
        if let Some(source) = source {
            out.set_source((*source).clone());
        }
        match (message.kind, message.name) {
            ("say", "api_req_started") => {
                let Ok(info) = serde_json::from_str::<Value>(message.text) else {
                    continue;
                };
                if let Some(usage) = api_usage(&info) {
                    turn.add_usage(&usage);
                }
                if let Some(request) = info.get("request").and_then(Value::as_str) {
                    let results = tool_results(request);
                    if !results.is_empty() {
                        let pending = turn.steps.get_mut(awaiting..).unwrap_or_default();
                        for (call, result) in pending.iter_mut().zip(results) {
                            apply_result(call, &result);
                            out.item(Item::step_result(call, None, Some(&result), message.ts));
                        }
                    }
                }
                match info.get("cancelReason").and_then(Value::as_str) {
                    Some("user_cancelled") => {
                        out.item(Item::turn_end(ItemOutcome::Cancelled, None, message.ts));
                    }
                    Some(reason) => {
                        let why = info
                            .get("streamingFailedMessage")
                            .and_then(Value::as_str)
                            .unwrap_or(reason);
                        out.item(Item::turn_end(ItemOutcome::Failed, Some(why), message.ts));
                    }
                    None => {}
                }
                awaiting = turn.steps.len();
            }
            ("say", "completion_result") => {
                let text = message
                    .text
                    .strip_suffix("HAS_CHANGES")
                    .unwrap_or(message.text);
                if !message.partial && !text.trim().is_empty() {
                    out.item(Item::assistant_text(text, message.ts));
                    out.item(Item::turn_end(ItemOutcome::Complete, None, message.ts));
                    result = Some(text.to_string());
                }
            }
            ("say", "text") if !message.text.trim().is_empty() => {
                if !message.partial {
                    out.item(Item::assistant_text(message.text, message.ts));
                }
                last_text = Some(message.text.to_string());
            }
            (_, _) if message.partial => {}
            ("say" | "ask", name) => {
                if let Some(mut call) = tool_step(name, message.text) {
                    call.at_ms = message.ts;
                    out.item(Item::tool_call(&call, None));
                    turn.steps.push(call);
                }
                if message.kind == "ask" {
                    ask_item(name, message, out);
                }
            }
            _ => {}
        }
    }
    turn.reply = result
        .or(last_text)
        .or_else(|| Some(observed.reply.clone()).filter(|reply| !reply.trim().is_empty()));
    set_state_from_snapshot(&mut turn, &observed.state);
    turn
}

/// The item a blocking ask is: the turn's failure, or the chat waiting for the user (a
/// question, an approval, a spent budget); the observer's reading of the same asks
/// (`observe::stores::cline`). Its `completion_result` ask follows the `say` that ended the
/// turn (which is the end's item); the CLI writes no such ask.
fn ask_item(ask: &str, message: &Message, out: &mut TurnCollector) {
    match ask {
        "api_req_failed" | "mistake_limit_reached" => {
            let why = if message.text.trim().is_empty() {
                ask
            } else {
                message.text
            };
            out.item(Item::turn_end(ItemOutcome::Failed, Some(why), message.ts));
        }
        "followup" | "plan_mode_respond" => {
            let asked: Option<String> =
                serde_json::from_str::<Value>(message.text)
                    .ok()
                    .and_then(|info| {
                        let text = info.get("question").or_else(|| info.get("response"))?;
                        text.as_str().map(str::to_string)
                    });
            out.item(Item::needs_input(
                asked.as_deref().unwrap_or(message.text),
                message.ts,
            ));
        }
        "command"
        | "tool"
        | "use_mcp_server"
        | "browser_action_launch"
        | "use_subagents"
        | "new_task"
        | "condense"
        | "summarize_task"
        | "report_bug"
        | "auto_approval_max_req_reached" => {
            let what = format!("approve {ask}");
            out.item(Item::needs_input(&what, message.ts));
        }
        _ => {}
    }
}

/// An `api_req_started` JSON's token counts; `None` when it has none yet.
fn api_usage(info: &Value) -> Option<TurnUsage> {
    let count = |key: &str| info.get(key).and_then(Value::as_u64);
    let usage = TurnUsage {
        input_tokens: count("tokensIn"),
        output_tokens: count("tokensOut"),
        cache_read_tokens: count("cacheReads"),
        cache_write_tokens: count("cacheWrites"),
        reasoning_tokens: None,
    };
    (usage != TurnUsage::default()).then_some(usage)
}

/// A `say`/`ask` message that is a tool call → its step; `None` for every other message.
fn tool_step(name: &str, text: &str) -> Option<TurnStep> {
    match name {
        "command" => {
            let command = text
                .trim_end()
                .strip_suffix("REQ_APP")
                .unwrap_or(text)
                .trim();
            let mut call = step(StepKind::Command, "execute_command", command);
            call.command = Some(command.to_string()).filter(|c| !c.is_empty());
            Some(call)
        }
        "tool" => {
            let info: Value = serde_json::from_str(text).ok()?;
            Some(file_tool_step(&info))
        }
        "use_mcp_server" => {
            let info: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            let text_of = |key: &str| info.get(key).and_then(Value::as_str).unwrap_or("");
            let tool = [text_of("toolName"), text_of("uri")]
                .into_iter()
                .find(|name| !name.is_empty())
                .unwrap_or("use_mcp_server");
            let arguments = match info.get("arguments") {
                Some(Value::String(json)) => {
                    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.clone()))
                }
                Some(other) => other.clone(),
                None => Value::Null,
            };
            let summary = format!(
                "{}: {}",
                text_of("serverName"),
                summarize_arguments(&arguments)
            );
            Some(step(StepKind::Tool, tool, &summary))
        }
        "browser_action_launch" => Some(step(StepKind::Web, name, text)),
        "browser_action" => {
            let info: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            let action = info.get("action").and_then(Value::as_str).unwrap_or("");
            let what = info.get("text").and_then(Value::as_str).unwrap_or("");
            Some(step(StepKind::Web, name, format!("{action} {what}").trim()))
        }
        "use_subagents" | "new_task" => Some(step(StepKind::Agent, name, text)),
        _ => None,
    }
}

/// A `tool` message's JSON (`ClineSayTool`) → its step, by its `tool` field.
fn file_tool_step(info: &Value) -> TurnStep {
    let tool = info
        .get("tool")
        .and_then(Value::as_str)
        .filter(|tool| !tool.is_empty())
        .unwrap_or("tool");
    let text_of = |key: &str| info.get(key).and_then(Value::as_str).unwrap_or("");
    let path = text_of("path");
    let kind = match tool {
        "editedExistingFile" | "appliedDiff" | "insertContent" | "searchAndReplace"
        | "fileDeleted" => StepKind::Edit,
        "newFileCreated" => StepKind::Write,
        "readFile" | "listFilesTopLevel" | "listFilesRecursive" | "listCodeDefinitionNames" => {
            StepKind::Read
        }
        "searchFiles" | "codebaseSearch" => StepKind::Search,
        "webFetch" | "webSearch" => StepKind::Web,
        "newTask" => StepKind::Agent,
        _ => StepKind::Tool,
    };
    let summary = match kind {
        StepKind::Search => {
            let pattern = [text_of("regex"), text_of("query")]
                .into_iter()
                .find(|pattern| !pattern.is_empty())
                .unwrap_or("");
            match (pattern, path) {
                (pattern, "") => pattern.to_string(),
                ("", path) => path.to_string(),
                (pattern, path) => format!("{pattern} in {path}"),
            }
        }
        _ if !path.is_empty() => path.to_string(),
        _ => {
            // Everything but the bulky fields (file contents, diffs).
            let mut rest = info.as_object().cloned().unwrap_or_default();
            for bulky in ["tool", "content", "diff"] {
                rest.remove(bulky);
            }
            summarize_arguments(&Value::Object(rest))
        }
    };
    let mut call = step(kind, tool, &summary);
    if !path.is_empty() {
        call.paths.push(path.to_string());
    }
    // Roo reads several files in one call.
    for file in info
        .get("batchFiles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(file) = file.get("path").and_then(Value::as_str) {
            if !file.is_empty() && !call.paths.iter().any(|p| p == file) {
                call.paths.push(file.to_string());
            }
        }
    }
    call
}

/// The tool results an API request's text starts with: each `[<tool> for '…'] Result:`
/// header line and the text under it, in order.
fn tool_results(request: &str) -> Vec<String> {
    let mut results: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in request.lines() {
        let header = line.starts_with('[') && line.trim_end().ends_with("] Result:");
        if header {
            if let Some(done) = current.take() {
                results.push(done);
            }
            current = Some(String::new());
        } else if let Some(body) = current.as_mut() {
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(line);
        }
    }
    results.extend(current);
    results
}

/// What a tool's result says about how the call went.
fn apply_result(call: &mut TurnStep, result: &str) {
    let body = result.trim_start();
    if body.starts_with("The user denied this operation") {
        call.outcome = StepOutcome::Rejected;
        return;
    }
    if let Some(rest) = body.strip_prefix("The tool execution failed with the following error:") {
        let error = rest
            .split("<error>")
            .nth(1)
            .and_then(|inner| inner.split("</error>").next())
            .unwrap_or(rest);
        call.outcome = StepOutcome::Error;
        call.error = step_error(error);
        return;
    }
    if call.kind == StepKind::Command {
        call.exit_code = body.lines().take(2).find_map(exit_code);
    }
    match call.exit_code {
        Some(code) if code != 0 => {
            call.outcome = StepOutcome::Error;
            call.error = Some(format!("exit code {code}"));
        }
        _ => call.outcome = StepOutcome::Ok,
    }
}

/// `exit code N` (or `Exit code: N`) in a line of a command's result.
fn exit_code(line: &str) -> Option<i64> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find("exit code")?;
    let rest = lower[at + "exit code".len()..].trim_start_matches([':', ' ']);
    let end = rest
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && *c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::model::corpus;
    use crate::conversation::Keep;
    use koru_protocol::TurnState;

    fn read(messages: &str) -> (u64, Vec<Turn>) {
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        turns_from_task(messages.as_bytes(), &mut out).unwrap();
        let total = out.total();
        (
            total,
            out.into_turns().into_iter().map(|(_, t)| t).collect(),
        )
    }

    fn api(tokens_in: u64, request: &str) -> String {
        serde_json::json!({"request": request, "tokensIn": tokens_in, "tokensOut": 10,
                           "cacheWrites": 5, "cacheReads": 1, "cost": 0.01})
        .to_string()
    }

    fn message(ts: u64, kind: &str, name: &str, text: &str) -> Value {
        serde_json::json!({"ts": ts, "type": kind, kind: name, "text": text,
                           "modelInfo": {"providerId": "anthropic", "modelId": "claude-sonnet-4-5", "mode": "act"}})
    }

    /// A Cline task: one turn that reads, searches, edits (one edit denied, one failing),
    /// runs a command that fails, and completes; then a second turn waiting on approval.
    fn task() -> String {
        let tool = |json: Value| json.to_string();
        let messages = vec![
            message(1000, "say", "task", "fix the failing test"),
            message(1100, "say", "api_req_started", &api(1200, "<task>\nfix the failing test\n</task>")),
            message(1200, "say", "text", "Let me look at the test."),
            message(1300, "say", "tool", &tool(serde_json::json!({"tool": "readFile", "path": "src/lib.rs", "content": "/w/src/lib.rs"}))),
            message(1400, "say", "api_req_started", &api(1300, "[read_file for 'src/lib.rs'] Result:\nfn main() {}\n\n<environment_details>\n</environment_details>")),
            message(1500, "say", "tool", &tool(serde_json::json!({"tool": "searchFiles", "path": "src", "regex": "todo!", "content": "…"}))),
            message(1600, "say", "api_req_started", &api(1400, "[search_files for 'todo!'] Result:\nFound 1 result.")),
            message(1700, "ask", "tool", &tool(serde_json::json!({"tool": "editedExistingFile", "path": "src/lib.rs", "diff": "- a\n+ b"}))),
            message(1800, "say", "api_req_started", &api(1500, "[replace_in_file for 'src/lib.rs'] Result:\nThe user denied this operation.\n<feedback>not like that</feedback>")),
            message(1900, "ask", "tool", &tool(serde_json::json!({"tool": "newFileCreated", "path": "src/new.rs", "content": "x"}))),
            message(2000, "say", "error", "Error writing file"),
            message(2100, "say", "api_req_started", &api(1600, "[write_to_file for 'src/new.rs'] Result:\nThe tool execution failed with the following error:\n<error>\nEACCES: permission denied\n</error>")),
            message(2200, "ask", "command", "cargo testREQ_APP"),
            message(2300, "ask", "command_output", "test result: FAILED"),
            message(2400, "say", "api_req_started", &api(1700, "[execute_command for 'cargo test'] Result:\nCommand failed with exit code 101.\nOutput:\ntest result: FAILED")),
            message(2500, "say", "completion_result", "Fixed the test.HAS_CHANGES"),
            message(2600, "ask", "completion_result", ""),
            message(3000, "say", "user_feedback", "also delete the logs"),
            message(3100, "say", "api_req_started", &api(1800, "<feedback>also delete the logs</feedback>")),
            message(3200, "say", "text", "I will delete them."),
            message(3300, "ask", "command", "rm -rf logsREQ_APP"),
        ];
        Value::Array(messages).to_string()
    }

    #[test]
    fn a_task_turn_has_its_tools_with_their_results_usage_model_and_answer() {
        let (total, turns) = read(&task());
        assert_eq!(total, 2);
        let first = &turns[0];
        assert_eq!(first.prompt.as_deref(), Some("fix the failing test"));
        assert_eq!(first.reply.as_deref(), Some("Fixed the test."));
        assert_eq!(first.state, TurnState::Complete);
        assert_eq!(first.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!((first.started_ms, first.ended_ms), (Some(1000), Some(2600)));
        assert_eq!(
            first.usage,
            Some(TurnUsage {
                input_tokens: Some(1200 + 1300 + 1400 + 1500 + 1600 + 1700),
                output_tokens: Some(60),
                cache_read_tokens: Some(6),
                cache_write_tokens: Some(30),
                reasoning_tokens: None,
            })
        );
        let steps: Vec<(StepKind, &str, &str, StepOutcome)> = first
            .steps
            .iter()
            .map(|s| (s.kind, s.tool.as_str(), s.summary.as_str(), s.outcome))
            .collect();
        assert_eq!(
            steps,
            [
                (StepKind::Read, "readFile", "src/lib.rs", StepOutcome::Ok),
                (
                    StepKind::Search,
                    "searchFiles",
                    "todo! in src",
                    StepOutcome::Ok
                ),
                (
                    StepKind::Edit,
                    "editedExistingFile",
                    "src/lib.rs",
                    StepOutcome::Rejected
                ),
                (
                    StepKind::Write,
                    "newFileCreated",
                    "src/new.rs",
                    StepOutcome::Error
                ),
                (
                    StepKind::Command,
                    "execute_command",
                    "cargo test",
                    StepOutcome::Error
                ),
            ]
        );
        assert_eq!(first.steps[0].paths, ["src/lib.rs"]);
        assert_eq!(
            first.steps[3].error.as_deref(),
            Some("EACCES: permission denied")
        );
        assert_eq!(first.steps[4].command.as_deref(), Some("cargo test"));
        assert_eq!(first.steps[4].exit_code, Some(101));
        assert_eq!(first.steps[4].at_ms, Some(2200));
    }

    #[test]
    fn a_tool_awaiting_approval_leaves_the_turn_waiting() {
        let (_, turns) = read(&task());
        let second = &turns[1];
        assert_eq!(second.prompt.as_deref(), Some("also delete the logs"));
        assert_eq!(second.state, TurnState::NeedsInput);
        assert_eq!(second.reply.as_deref(), Some("I will delete them."));
        assert_eq!(second.steps.len(), 1);
        assert_eq!(second.steps[0].command.as_deref(), Some("rm -rf logs"));
        assert_eq!(second.steps[0].outcome, StepOutcome::Unknown);
    }

    #[test]
    fn cancelled_and_failed_tasks() {
        let cancelled = Value::Array(vec![
            message(1000, "say", "text", "add a health endpoint"),
            message(1100, "say", "api_req_started", &api(100, "<task>add a health endpoint</task>")),
            message(1200, "ask", "tool", r#"{"tool":"editedExistingFile","path":"src/server.ts"}"#),
            message(1300, "say", "api_req_started", &serde_json::json!({"request": "[apply_diff for 'src/server.ts'] Result:\nok", "cancelReason": "user_cancelled"}).to_string()),
            message(1400, "say", "tool", r#"{"tool":"readFile","path":"src/app.ts"}"#),
            message(1500, "ask", "resume_task", ""),
        ])
        .to_string();
        let (_, turns) = read(&cancelled);
        assert_eq!(turns.len(), 1, "Roo's first say:text is the prompt");
        let turn = &turns[0];
        assert_eq!(turn.prompt.as_deref(), Some("add a health endpoint"));
        assert_eq!(turn.reply, None);
        assert_eq!(turn.state, TurnState::Cancelled);
        assert_eq!(
            turn.ended_ms,
            Some(1400),
            "resume_task does not extend the turn"
        );
        assert_eq!(turn.steps[0].outcome, StepOutcome::Ok);
        assert_eq!(turn.steps[1].outcome, StepOutcome::Rejected, "cut off");

        let failed = Value::Array(vec![
            message(1000, "say", "task", "summarize the repo"),
            message(
                1100,
                "say",
                "api_req_started",
                &serde_json::json!({"request": "<task>"}).to_string(),
            ),
            message(1200, "ask", "api_req_failed", "429 Too Many Requests"),
        ])
        .to_string();
        let (_, turns) = read(&failed);
        assert_eq!(turns[0].state, TurnState::Failed);
        assert_eq!(turns[0].error.as_deref(), Some("429 Too Many Requests"));
        assert_eq!(
            turns[0].usage, None,
            "a request in flight has no tokens yet"
        );
    }

    #[test]
    fn exit_codes_are_read_from_the_result_text() {
        assert_eq!(
            exit_code("Command executed successfully (exit code 0)."),
            Some(0)
        );
        assert_eq!(exit_code("Command failed with exit code 101."), Some(101));
        assert_eq!(exit_code("Exit code: -1"), Some(-1));
        assert_eq!(exit_code("exit code"), None);
        assert_eq!(exit_code("Output:"), None);
    }

    #[test]
    fn the_corpus_reads_as_its_expectations() {
        corpus::check("cline_tasks", &[".ui_messages.json"], |name, bytes, out| {
            turns_from_task(bytes, out).unwrap_or_else(|e| panic!("{name}: {e}"));
        });
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        corpus::check_file_items(
            "cline_tasks",
            &[".ui_messages.json"],
            crate::observe::stores::cline::STORE,
        );
    }

    #[test]
    fn turn_boundaries_and_prompts_agree_with_the_observer() {
        let dir = corpus::folder("cline_tasks");
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".ui_messages.json"))
            .map(|name| (name.clone(), std::fs::read(dir.join(&name)).unwrap()))
            .collect();
        // Every state the rewrites folders kept, too.
        for (name, _) in files.clone() {
            let rewrites = dir.join(name.replace(".json", ".rewrites"));
            for entry in std::fs::read_dir(rewrites).unwrap().filter_map(Result::ok) {
                files.push((
                    format!("{name}/{:?}", entry.file_name()),
                    std::fs::read(entry.path()).unwrap(),
                ));
            }
        }
        files.push(("fixture".into(), task().into_bytes()));
        for (name, bytes) in files {
            let observed =
                crate::observe::stores::cline::parse_ui_messages(&bytes, "t", None).unwrap();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            turns_from_task(&bytes, &mut out).unwrap();
            let prompts: Vec<Option<String>> = out
                .into_turns()
                .into_iter()
                .map(|(_, t)| t.prompt)
                .collect();
            let observed: Vec<Option<String>> =
                observed.turns.into_iter().map(|t| t.prompt).collect();
            assert_eq!(prompts, observed, "{name}");
        }
    }

    #[test]
    fn mangled_tasks_never_panic() {
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&task()).unwrap()).unwrap();
        let lines: Vec<Vec<u8>> = pretty.lines().map(|l| l.as_bytes().to_vec()).collect();
        let mut noise = corpus::Noise::new(11);
        for _ in 0..300 {
            let bytes = noise.mangle(&lines).join(&b'\n');
            let mut out = TurnCollector::new(Keep::Last(2));
            let _ = turns_from_task(&bytes, &mut out);
        }
        for odd in [
            r#"[{"type":"say","say":"api_req_started","text":"{\"request\":\"[x] Result:\"}"}]"#,
            r#"[1, {"type":"say","say":"task"}, {"type":"ask","ask":"tool","text":"[]"}, {"type":"say","say":"tool","text":"{\"tool\":3,\"batchFiles\":[1]}"}]"#,
            r#"[{"type":"say","say":"task","ts":-5},{"type":"ask","ask":"use_mcp_server","text":"{\"arguments\":\"{\"}"}]"#,
            "{}",
        ] {
            let mut out = TurnCollector::new(Keep::Last(2));
            let _ = turns_from_task(odd.as_bytes(), &mut out);
        }
    }
}

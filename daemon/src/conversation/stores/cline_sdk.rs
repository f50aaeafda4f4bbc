//! Cline 4 SDK sessions (`sessions/<id>/<id>.json` manifest and `<id>.messages.json`) read back as turns: the prompt without its `<user_input>` wrapper, the final answer whole, every tool call with its result, times, model and token usage.
//!
//! Format facts (docs/observers.md "Cline 4 SDK sessions", cline/cline `sdk/packages/…`;
//! tests/corpus/cline_sessions, written by Cline CLI 3.0.65 / `@cline/core` 0.0.86): the
//! messages file is `{version, updated_at, messages: [{id, role, content, ts, modelInfo?,
//! metrics?}]}` with Anthropic-style blocks. Which user messages open a turn, the prompt
//! text, the reply (the last assistant message with text, or a completion tool's summary)
//! and the state (the manifest's `status` for the last turn) are the observer's own rules
//! (`observe::stores::cline_sdk::read_session`), so a drive's prompt digest finds its turn.
//!
//! - Steps: assistant `tool_use` blocks `{id, name, input}`, answered by a later user
//!   message's `tool_result` block `{tool_use_id, content, is_error?}`. The default tools
//!   (`core/src/extensions/tools/schemas.ts`): `run_commands {commands: [string | {command,
//!   args}]}`, `read_files {files: [{path}] | paths | file_paths}`, `search_codebase
//!   {queries}`, `fetch_web_content {requests: [{url}]}`, `editor {path, old_text?, new_text,
//!   insert_line?}` (no `old_text` and no `insert_line`: a file written whole), `apply_patch
//!   {input}` (`*** Add File:` / `*** Update File:` / `*** Delete File:` lines), `skills`,
//!   `ask_question`, `submit_and_exit`. A result's content is the tool's
//!   `ToolOperationResult[]` `{query, result, error?, success}` (corpus: `[{"query": "ls",
//!   "result": "hello.py\nnotes.txt\n", "success": true}]`): `is_error` or an operation with
//!   `success: false` is an `Error`. No exit code is recorded.
//! - Usage: each assistant message's `metrics` `{inputTokens, outputTokens,
//!   cacheReadTokens, cacheWriteTokens}`, summed over the turn. Model: the assistant
//!   messages' `modelInfo.id`, else the manifest's `model`. Times: the messages' `ts` (ms); a
//!   turn only the manifest's `prompt` shows starts at `started_at`.

use std::collections::HashMap;

use koru_protocol::{StepKind, StepOutcome, TurnStep, TurnUsage};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::conversation::items::{array_elements, Item, ItemOutcome, SourceRecord};
use crate::conversation::model::{
    set_state_from_snapshot, step, step_error, summarize_arguments, time_ms, Turn, TurnCollector,
};
use crate::observe::snapshot::TurnSnapshot;
use crate::observe::stores::cline_sdk::read_session;
use crate::observe::ParseError;

/// What SDK sessions do not record: a command's exit status (only whether it succeeded).
pub const NOT_RECORDED: &[&str] = &["exit_status"];

/// A session's manifest bytes and its messages file's bytes (`None` before Cline wrote it)
/// → its turns, oldest first. `Err` for a manifest that is not a complete manifest or a
/// messages file that is not complete JSON (a file caught half-written: read it again).
pub fn turns_from_sdk_session(
    manifest: &[u8],
    messages: Option<&[u8]>,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    read_sdk_session(manifest, messages.map(|bytes| ("", bytes)), out)
}

/// `turns_from_sdk_session`, with the messages file's name (the items' sources name it: it
/// is not the manifest, the chat's own file).
pub fn read_sdk_session(
    manifest_bytes: &[u8],
    messages: Option<(&str, &[u8])>,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    let session = read_session(manifest_bytes, messages.map(|(_, bytes)| bytes), "")?;
    let sources = match messages {
        Some((name, bytes)) if out.wants_items() => array_elements(bytes, Some("messages"))
            .into_iter()
            .map(|source| source.in_file(name.to_string()))
            .collect(),
        _ => Vec::new(),
    };
    let manifest: Value = serde_json::from_slice(manifest_bytes).unwrap_or(Value::Null);
    let manifest_model = manifest
        .get("model")
        .and_then(Value::as_str)
        .filter(|model| !model.trim().is_empty());
    let started_at = manifest.get("started_at").and_then(time_ms);
    let starts = &session.starts;
    for (position, observed) in session.snapshot.turns.iter().enumerate() {
        let last = position + 1 == session.snapshot.turns.len();
        let Some(start) = starts.get(position).copied().flatten() else {
            // Only the manifest's prompt shows this turn yet.
            let mut turn = Turn::new(observed.prompt.clone(), started_at);
            turn.model = manifest_model.map(str::to_string);
            set_state_from_snapshot(&mut turn, &observed.state);
            if let Some(prompt) = observed.prompt.as_deref() {
                out.set_source_with(|| manifest_field(manifest_bytes, "prompt"));
                out.item(Item::prompt(prompt, started_at));
            }
            if last {
                status_item(manifest_bytes, &observed.state, out);
            }
            out.push(turn);
            continue;
        };
        let end = starts
            .get(position + 1)
            .copied()
            .flatten()
            .unwrap_or(session.messages.len());
        let slice = session
            .messages
            .get(start..end.max(start))
            .unwrap_or_default();
        let slice_sources = sources.get(start..end.max(start)).unwrap_or_default();
        let mut turn = read_turn(slice, slice_sources, observed, out);
        if turn.model.is_none() {
            turn.model = manifest_model.map(str::to_string);
        }
        if last {
            status_item(manifest_bytes, &observed.state, out);
        }
        out.push(turn);
    }
    Ok(())
}

/// The manifest's field `key` as a source (the whole manifest when it has none).
fn manifest_field(manifest: &[u8], key: &str) -> SourceRecord {
    let fields: HashMap<&str, &RawValue> = serde_json::from_slice(manifest).unwrap_or_default();
    match fields.get(key) {
        Some(raw) => SourceRecord::element(manifest, raw.get().as_bytes(), format!("/{key}")),
        None => SourceRecord::element(manifest, manifest, String::new()),
    }
}

/// The last turn's end or wait as the manifest's `status` records it.
fn status_item(
    manifest: &[u8],
    state: &crate::observe::snapshot::TurnState,
    out: &mut TurnCollector,
) {
    use crate::observe::snapshot::TurnState as Observed;
    let item = match state {
        Observed::Completed => Item::turn_end(ItemOutcome::Complete, None, None),
        Observed::Cancelled => Item::turn_end(ItemOutcome::Cancelled, None, None),
        Observed::Failed(why) => Item::turn_end(ItemOutcome::Failed, Some(why), None),
        Observed::NeedsInput(_) => Item::needs_input("the session waits for the user", None),
        _ => return,
    };
    out.set_source_with(|| manifest_field(manifest, "status"));
    out.item(item);
}

/// One turn's messages (the first opens it) → the turn, its items reported from `sources`
/// (the messages' elements; empty when no items are wanted).
fn read_turn(
    messages: &[Value],
    sources: &[SourceRecord],
    observed: &TurnSnapshot,
    out: &mut TurnCollector,
) -> Turn {
    let started = messages.first().and_then(|m| m.get("ts")).and_then(time_ms);
    let mut turn = Turn::new(observed.prompt.clone(), started);
    turn.reply = Some(observed.reply.clone()).filter(|reply| !reply.trim().is_empty());
    // `tool_use` id → its step's index, until its result comes.
    let mut pending: HashMap<String, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        let at_ms = message.get("ts").and_then(time_ms);
        if let Some(source) = sources.get(index) {
            out.set_source(source.clone());
        }
        if index == 0 {
            if let Some(prompt) = observed.prompt.as_deref() {
                out.item(Item::prompt(prompt, at_ms));
            }
        }
        turn.touch(at_ms);
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                if let Some(model) = message
                    .get("modelInfo")
                    .and_then(|info| info.get("id"))
                    .and_then(Value::as_str)
                    .filter(|model| !model.trim().is_empty())
                {
                    turn.model = Some(model.to_string());
                }
                if let Some(usage) = message.get("metrics").and_then(metrics_usage) {
                    turn.add_usage(&usage);
                }
                if out.wants_items() {
                    // The message's text: a string, or its `text` blocks.
                    let text = match message.get("content") {
                        Some(Value::String(text)) => text.clone(),
                        _ => blocks
                            .iter()
                            .filter(|block| {
                                block.get("type").and_then(Value::as_str) == Some("text")
                            })
                            .filter_map(|block| block.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    };
                    if !text.trim().is_empty() {
                        out.item(Item::assistant_text(&text, at_ms));
                    }
                }
                for block in blocks {
                    if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                        continue;
                    }
                    let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                    let mut call = tool_step(name, block.get("input").unwrap_or(&Value::Null));
                    call.at_ms = at_ms;
                    out.item(Item::tool_call(
                        &call,
                        block.get("id").and_then(Value::as_str),
                    ));
                    if let Some(id) = block.get("id").and_then(Value::as_str) {
                        pending.insert(id.to_string(), turn.steps.len());
                    }
                    turn.steps.push(call);
                }
            }
            Some("user") => {
                for block in blocks {
                    if !matches!(
                        block.get("type").and_then(Value::as_str),
                        Some("tool_result" | "tool-result")
                    ) {
                        continue;
                    }
                    let index = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .and_then(|id| pending.remove(id));
                    if let Some(call) = index.and_then(|index| turn.steps.get_mut(index)) {
                        apply_result(call, block);
                        let text = out
                            .wants_items()
                            .then(|| content_text(block.get("content")));
                        out.item(Item::step_result(
                            call,
                            block.get("tool_use_id").and_then(Value::as_str),
                            text.as_deref(),
                            at_ms,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    set_state_from_snapshot(&mut turn, &observed.state);
    turn
}

/// An assistant message's `metrics` as usage; `None` when it counts nothing.
fn metrics_usage(metrics: &Value) -> Option<TurnUsage> {
    let count = |key: &str| metrics.get(key).and_then(Value::as_u64);
    let usage = TurnUsage {
        input_tokens: count("inputTokens"),
        output_tokens: count("outputTokens"),
        cache_read_tokens: count("cacheReadTokens"),
        cache_write_tokens: count("cacheWriteTokens"),
        reasoning_tokens: None,
    };
    (usage != TurnUsage::default()).then_some(usage)
}

/// The strings of a value that is a string, an array of strings, or an array of objects
/// with `key` (or any of these as `{key: …}`).
fn strings(value: Option<&Value>, key: &str) -> Vec<String> {
    match value {
        Some(Value::String(text)) if !text.is_empty() => vec![text.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .flat_map(|item| strings(Some(item), key))
            .collect(),
        Some(Value::Object(fields)) => strings(fields.get(key), key),
        _ => Vec::new(),
    }
}

/// A `run_commands` entry as a command line (`{command, args}` joined by spaces).
fn command_line(entry: &Value) -> Option<String> {
    match entry {
        Value::String(command) => Some(command.clone()),
        Value::Object(fields) => {
            let mut line = fields.get("command")?.as_str()?.to_string();
            for arg in fields
                .get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                line.push(' ');
                line.push_str(arg);
            }
            Some(line)
        }
        _ => None,
    }
}

/// A tool call → its step, by the tool's name and input.
fn tool_step(name: &str, input: &Value) -> TurnStep {
    let tool = if name.is_empty() { "tool" } else { name };
    match name {
        "run_commands" => {
            let entries: Vec<&Value> = match input {
                Value::Object(fields) => ["commands", "command", "cmd"]
                    .iter()
                    .find_map(|key| fields.get(*key))
                    .map(|value| match value {
                        Value::Array(items) => items.iter().collect(),
                        other => vec![other],
                    })
                    .unwrap_or_else(|| vec![input]),
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            let command = entries
                .into_iter()
                .filter_map(command_line)
                .collect::<Vec<_>>()
                .join("\n");
            let mut call = step(StepKind::Command, tool, &command);
            call.command = Some(command).filter(|command| !command.is_empty());
            call
        }
        "read_files" => {
            let paths = match input {
                Value::Object(fields) => ["files", "paths", "file_paths", "path"]
                    .iter()
                    .find_map(|key| fields.get(*key))
                    .map(|value| strings(Some(value), "path"))
                    .unwrap_or_default(),
                other => strings(Some(other), "path"),
            };
            let mut call = step(StepKind::Read, tool, &paths.join(", "));
            call.paths = paths;
            call
        }
        "search_codebase" => {
            let queries = strings(input.get("queries").or(Some(input)), "queries");
            step(StepKind::Search, tool, &queries.join(", "))
        }
        "fetch_web_content" => {
            let urls = strings(input.get("requests"), "url");
            step(StepKind::Web, tool, &urls.join(", "))
        }
        "editor" => {
            let path = input.get("path").and_then(Value::as_str).unwrap_or("");
            let absent = |key: &str| input.get(key).is_none_or(Value::is_null);
            let kind = if absent("old_text") && absent("insert_line") {
                StepKind::Write
            } else {
                StepKind::Edit
            };
            let mut call = step(kind, tool, path);
            call.paths = (!path.is_empty())
                .then(|| path.to_string())
                .into_iter()
                .collect();
            call
        }
        "apply_patch" => {
            let patch = input
                .get("input")
                .and_then(Value::as_str)
                .or_else(|| input.as_str())
                .unwrap_or("");
            let mut paths: Vec<String> = Vec::new();
            let mut only_added = true;
            for line in patch.lines() {
                let (added, path) = if let Some(path) = line.strip_prefix("*** Add File:") {
                    (true, path)
                } else if let Some(path) = ["*** Update File:", "*** Delete File:", "*** Move to:"]
                    .iter()
                    .find_map(|marker| line.strip_prefix(marker))
                {
                    (false, path)
                } else {
                    continue;
                };
                only_added &= added;
                let path = path.trim().to_string();
                if !path.is_empty() && !paths.contains(&path) {
                    paths.push(path);
                }
            }
            let kind = if only_added && !paths.is_empty() {
                StepKind::Write
            } else {
                StepKind::Edit
            };
            let mut call = step(kind, tool, &paths.join(", "));
            call.paths = paths;
            call
        }
        _ => {
            let lower = name.to_ascii_lowercase();
            let kind = if ["spawn", "agent", "teammate", "delegate"]
                .iter()
                .any(|word| lower.contains(word))
            {
                StepKind::Agent
            } else {
                StepKind::Tool
            };
            let summary = ["question", "summary", "skill"]
                .iter()
                .find_map(|key| input.get(*key).and_then(Value::as_str))
                .map(str::to_string)
                .unwrap_or_else(|| summarize_arguments(input));
            step(kind, tool, &summary)
        }
    }
}

/// The text of a tool result's content: a string, text blocks, or the operations' errors
/// and results.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(text.clone()),
                Value::Object(fields) => ["text", "error", "result"]
                    .iter()
                    .find_map(|key| fields.get(*key).and_then(Value::as_str))
                    .map(str::to_string),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A `tool_result` block → the call's outcome.
fn apply_result(call: &mut TurnStep, block: &Value) {
    let content = block.get("content");
    if block.get("is_error").and_then(Value::as_bool) == Some(true) {
        call.outcome = StepOutcome::Error;
        call.error = step_error(&content_text(content));
        return;
    }
    let failed = content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|operation| operation.get("success").and_then(Value::as_bool) == Some(false));
    match failed {
        Some(operation) => {
            call.outcome = StepOutcome::Error;
            let error = ["error", "result"]
                .iter()
                .find_map(|key| operation.get(*key).and_then(Value::as_str))
                .unwrap_or("");
            call.error = step_error(error);
        }
        None => call.outcome = StepOutcome::Ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::model::corpus;
    use crate::conversation::Keep;
    use koru_protocol::TurnState;

    fn manifest(status: &str, extra: &str) -> String {
        format!(
            r#"{{"version": 1, "session_id": "1767000000000_ab12c", "source": "vscode", "pid": 4242,
  "started_at": "2026-07-01T09:00:00.000Z", "status": "{status}", "interactive": true,
  "provider": "anthropic", "model": "claude-sonnet-4-5", "cwd": "/home/u/app",
  "workspace_root": "/home/u/app", "prompt": "add a health endpoint"{extra}}}"#
        )
    }

    fn messages(list: &[&str]) -> String {
        format!(
            r#"{{"version": 1, "updated_at": "2026-07-01T09:00:30.000Z", "agent": "lead",
  "sessionId": "1767000000000_ab12c", "messages": [{}]}}"#,
            list.join(",\n")
        )
    }

    const PROMPT: &str = r#"{"id":"u1","role":"user","content":[{"type":"text","text":"<user_input mode=\"act\">add a health endpoint</user_input>"}],"ts":1782896401000}"#;
    const CALLS: &str = r#"{"id":"a1","role":"assistant","content":[{"type":"text","text":"Reading first."},
      {"type":"tool_use","id":"t1","name":"read_files","input":{"files":[{"path":"/w/src/server.ts"},{"path":"/w/src/app.ts","start_line":1,"end_line":20}]}},
      {"type":"tool_use","id":"t2","name":"search_codebase","input":{"queries":["app.get\\("]}},
      {"type":"tool_use","id":"t3","name":"run_commands","input":{"commands":["npm test",{"command":"git","args":["status","-s"]}]}}],
      "ts":1782896405000,"modelInfo":{"id":"claude-opus-4","provider":"anthropic"},"metrics":{"inputTokens":1200,"outputTokens":80,"cacheReadTokens":10,"cacheWriteTokens":5}}"#;
    const RESULTS: &str = r#"{"id":"u2","role":"user","content":[
      {"type":"tool_result","tool_use_id":"t1","name":"read_files","content":[{"query":"/w/src/server.ts","result":"export {}","success":true}]},
      {"type":"tool_result","tool_use_id":"t2","name":"search_codebase","content":"ripgrep not found","is_error":true},
      {"type":"tool_result","tool_use_id":"t3","name":"run_commands","content":[{"query":"npm test","result":"","error":"Command exited with code 1","success":false},{"query":"git status -s","result":"","success":true}]}],
      "ts":1782896406000}"#;
    const EDITS: &str = r#"{"id":"a2","role":"assistant","content":[
      {"type":"tool_use","id":"t4","name":"editor","input":{"path":"/w/src/health.ts","new_text":"export const h = 1"}},
      {"type":"tool_use","id":"t5","name":"apply_patch","input":{"input":"*** Begin Patch\n*** Update File: src/server.ts\n@@\n-a\n+b\n*** End Patch"}}],
      "ts":1782896410000,"metrics":{"inputTokens":1300,"outputTokens":90}}"#;
    const EDIT_RESULTS: &str = r#"{"id":"u3","role":"user","content":[
      {"type":"tool_result","tool_use_id":"t4","content":[{"query":"/w/src/health.ts","result":"created","success":true}]}],"ts":1782896411000}"#;
    const ANSWER: &str = r#"{"id":"a3","role":"assistant","content":[{"type":"text","text":"Added GET /health."}],"ts":1782896420000,"metrics":{"inputTokens":1400,"outputTokens":30}}"#;
    const SECOND: &str = r#"{"id":"u4","role":"user","content":"<user_input mode=\"act\">now deploy it</user_input>","ts":1782896500000}"#;
    const DEPLOY: &str = r#"{"id":"a4","role":"assistant","content":[{"type":"tool_use","id":"t6","name":"run_commands","input":{"commands":["./deploy.sh"]}}],"ts":1782896505000}"#;

    fn read(status: &str, extra: &str, list: &[&str]) -> Vec<Turn> {
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        turns_from_sdk_session(
            manifest(status, extra).as_bytes(),
            Some(messages(list).as_bytes()),
            &mut out,
        )
        .unwrap();
        out.into_turns().into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn a_session_turn_has_its_tool_calls_results_usage_and_answer() {
        let turns = read(
            "idle",
            "",
            &[PROMPT, CALLS, RESULTS, EDITS, EDIT_RESULTS, ANSWER],
        );
        assert_eq!(turns.len(), 1);
        let turn = &turns[0];
        assert_eq!(turn.prompt.as_deref(), Some("add a health endpoint"));
        assert_eq!(turn.reply.as_deref(), Some("Added GET /health."));
        assert_eq!(turn.state, TurnState::Complete);
        assert_eq!(turn.model.as_deref(), Some("claude-opus-4"));
        assert_eq!(
            (turn.started_ms, turn.ended_ms),
            (Some(1_782_896_401_000), Some(1_782_896_420_000))
        );
        assert_eq!(
            turn.usage,
            Some(TurnUsage {
                input_tokens: Some(3900),
                output_tokens: Some(200),
                cache_read_tokens: Some(10),
                cache_write_tokens: Some(5),
                reasoning_tokens: None,
            })
        );
        let steps: Vec<(StepKind, &str, &str, StepOutcome)> = turn
            .steps
            .iter()
            .map(|s| (s.kind, s.tool.as_str(), s.summary.as_str(), s.outcome))
            .collect();
        assert_eq!(
            steps,
            [
                (
                    StepKind::Read,
                    "read_files",
                    "/w/src/server.ts, /w/src/app.ts",
                    StepOutcome::Ok
                ),
                (
                    StepKind::Search,
                    "search_codebase",
                    "app.get\\(",
                    StepOutcome::Error
                ),
                (
                    StepKind::Command,
                    "run_commands",
                    "npm test git status -s",
                    StepOutcome::Error
                ),
                (
                    StepKind::Write,
                    "editor",
                    "/w/src/health.ts",
                    StepOutcome::Ok
                ),
                (
                    StepKind::Edit,
                    "apply_patch",
                    "src/server.ts",
                    StepOutcome::Unknown
                ),
            ]
        );
        assert_eq!(turn.steps[0].paths, ["/w/src/server.ts", "/w/src/app.ts"]);
        assert_eq!(turn.steps[1].error.as_deref(), Some("ripgrep not found"));
        assert_eq!(
            turn.steps[2].command.as_deref(),
            Some("npm test\ngit status -s")
        );
        assert_eq!(
            turn.steps[2].error.as_deref(),
            Some("Command exited with code 1")
        );
        assert_eq!(turn.steps[2].exit_code, None, "not recorded");
        assert_eq!(turn.steps[4].paths, ["src/server.ts"]);
        assert_eq!(turn.steps[0].at_ms, Some(1_782_896_405_000));
    }

    #[test]
    fn a_tool_awaiting_approval_cancelled_and_failed_sessions() {
        let list = [PROMPT, CALLS, RESULTS, ANSWER, SECOND, DEPLOY];
        let pending = read("pending", "", &list);
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[0].state, TurnState::Complete);
        assert_eq!(pending[1].prompt.as_deref(), Some("now deploy it"));
        assert_eq!(pending[1].state, TurnState::NeedsInput);
        assert_eq!(pending[1].steps[0].outcome, StepOutcome::Unknown);
        assert_eq!(
            pending[1].model.as_deref(),
            Some("claude-sonnet-4-5"),
            "the manifest's"
        );
        assert_eq!(pending[1].usage, None);

        let cancelled = read(
            "cancelled",
            r#", "ended_at": "2026-07-01T09:10:00.000Z", "exit_code": 130"#,
            &list,
        );
        assert_eq!(cancelled[1].state, TurnState::Cancelled);
        assert_eq!(
            cancelled[1].steps[0].outcome,
            StepOutcome::Rejected,
            "cut off"
        );
        assert_eq!(
            cancelled[1].ended_ms,
            Some(1_782_896_505_000),
            "its last message"
        );

        let failed = read(
            "failed",
            r#", "exit_code": 1, "metadata": {"terminal_marker": "process exited unexpectedly"}"#,
            &list,
        );
        assert_eq!(failed[1].state, TurnState::Failed);
        assert_eq!(
            failed[1].error.as_deref(),
            Some("process exited unexpectedly")
        );
    }

    #[test]
    fn a_session_with_only_its_manifest_has_the_prompt_turn() {
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        turns_from_sdk_session(manifest("running", "").as_bytes(), None, &mut out).unwrap();
        let turns = out.into_turns();
        assert_eq!(turns.len(), 1);
        let turn = &turns[0].1;
        assert_eq!(turn.prompt.as_deref(), Some("add a health endpoint"));
        assert_eq!(turn.state, TurnState::InProgress);
        assert_eq!(turn.started_ms, Some(1_782_896_400_000));
        assert_eq!(turn.model.as_deref(), Some("claude-sonnet-4-5"));
        let mut out = TurnCollector::new(Keep::Last(1));
        assert!(turns_from_sdk_session(b"{\"status\":", None, &mut out).is_err());
        assert!(turns_from_sdk_session(
            manifest("idle", "").as_bytes(),
            Some(b"{\"messages\":"),
            &mut out
        )
        .is_err());
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        let names: Vec<String> = corpus::transcripts("cline_sessions", &[".json"])
            .into_iter()
            .filter(|name| !name.ends_with(".messages.json"))
            .collect();
        let chats: Vec<(&str, &str)> = names.iter().map(|name| (name.as_str(), "")).collect();
        corpus::check_items(
            "cline_sessions",
            crate::observe::stores::cline_sdk::STORE,
            &chats,
        );
    }

    /// The corpus files are `<id>.json` (the manifest) beside `<id>.messages.json`; each
    /// manifest's expectations are `<id>.json.turns.json`.
    #[test]
    fn the_corpus_reads_as_its_expectations() {
        let dir = corpus::folder("cline_sessions");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| {
                name.ends_with(".json")
                    && !name.ends_with(".messages.json")
                    && !corpus::is_expectation(name)
            })
            .collect();
        names.sort();
        assert_eq!(names.len(), 3);
        let mut differences = Vec::new();
        for name in &names {
            let manifest = std::fs::read(dir.join(name)).unwrap();
            let messages = std::fs::read(dir.join(name.replace(".json", ".messages.json"))).ok();
            let expected: Value = serde_json::from_slice(
                &std::fs::read(dir.join(format!("{name}.turns.json"))).unwrap(),
            )
            .unwrap();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            turns_from_sdk_session(&manifest, messages.as_deref(), &mut out).unwrap();
            let total = out.total();
            let turns = out.into_turns();
            differences.extend(
                corpus::compare(&expected, total, &turns)
                    .into_iter()
                    .map(|difference| format!("{name}: {difference}")),
            );
            // The turns begin where the observer's do.
            let observed = crate::observe::stores::cline_sdk::parse_session(
                &manifest,
                messages.as_deref(),
                "x",
            )
            .unwrap();
            let prompts: Vec<Option<String>> = turns.into_iter().map(|(_, t)| t.prompt).collect();
            let observed: Vec<Option<String>> =
                observed.turns.into_iter().map(|t| t.prompt).collect();
            assert_eq!(prompts, observed, "{name}");
        }
        assert!(differences.is_empty(), "{}", differences.join("\n"));
    }

    #[test]
    fn mangled_sessions_never_panic() {
        let text = messages(&[
            PROMPT,
            CALLS,
            RESULTS,
            EDITS,
            EDIT_RESULTS,
            ANSWER,
            SECOND,
            DEPLOY,
        ]);
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&text).unwrap()).unwrap();
        let lines: Vec<Vec<u8>> = pretty.lines().map(|l| l.as_bytes().to_vec()).collect();
        let mut noise = corpus::Noise::new(5);
        let manifest = manifest("running", "");
        for _ in 0..300 {
            let bytes = noise.mangle(&lines).join(&b'\n');
            let mut out = TurnCollector::new(Keep::Last(2));
            let _ = turns_from_sdk_session(manifest.as_bytes(), Some(&bytes), &mut out);
        }
        for odd in [
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","name":"run_commands","input":3},{"type":"tool_use","id":"x","name":"read_files","input":[[1]]}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":{"a":1}}]}]"#,
            r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"apply_patch","input":"*** Add File:"}],"metrics":{"inputTokens":-1}}]}"#,
        ] {
            let mut out = TurnCollector::new(Keep::Last(2));
            let _ = turns_from_sdk_session(manifest.as_bytes(), Some(odd.as_bytes()), &mut out);
        }
    }
}

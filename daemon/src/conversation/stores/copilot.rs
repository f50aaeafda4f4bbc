//! GitHub Copilot Chat sessions (VS Code's `chatSessions/<session>.json`, and the `.jsonl` mutation log replayed into the same document) read back as turns: the prompt, the whole markdown reply, every tool invocation and edit group, times, model and how the request ended.
//!
//! Format facts (docs/observers.md "GitHub Copilot Chat", research notes §3, VS Code's
//! `chatService.ts`; tests/corpus/copilot): each `requests[i]` is one turn, read with the
//! observer's own rule (`observe::stores::copilot::request_turn`: prompt `message.text`,
//! reply the markdown parts of `response[]` joined, state from `modelState.value` 0..4 or the
//! older `isCanceled` / `result.errorDetails`), so a drive's prompt digest finds its turn.
//! The request's `timestamp` starts the turn and `modelState.completedAt` ends it (else
//! `timestamp + elapsedMs`, which equals `completedAt` in the corpus); `modelId` names the
//! model (`koru-e2e/koru-e2e-fake` in the corpus).
//!
//! Steps are the `response[]` parts that act:
//! - `toolInvocationSerialized` (`IChatToolInvocationSerialized`): `toolId` is the tool,
//!   `invocationMessage` / `pastTenseMessage` (text or `{value}` markdown) the summary,
//!   `toolSpecificData` `{kind: "terminal", commandLine: {original, userEdited?, toolEdited?},
//!   terminalCommandState: {exitCode?}}` (or the legacy `{kind: "terminal", command}`) the
//!   command and its exit code, `resultDetails` (URIs / locations, or `{input, output,
//!   isError?}`) the paths read and an error. `isConfirmed` is `false` or `{type: 0}`
//!   (denied) / `{type: 5}` (skipped) for a call the user declined; `isComplete` a call that
//!   ran. A call neither complete nor declined has no outcome yet (the request waits for its
//!   approval, `modelState` 4).
//! - `textEditGroup` (`{uri, edits, done?}`): an edit of the file `uri`, done when `done`.
//!
//! Steps carry no time of their own. VS Code records no token usage in the session.
//!
//! Items (`conversation::items`): a request's prompt, each run of markdown parts between
//! other parts (one assistant text), each tool invocation (a call; its `resultDetails`, when
//! written, as its result), each edit group (a call), each part that asks the user
//! (`confirmation`, `questionCarousel`, `elicitationSerialized`, or a tool invocation still
//! awaiting approval in a request that waits for input) and the request's end from its
//! state. Their source is the request: in a `.json` file its element `/requests/<i>`; in a
//! `.jsonl` log the last line that touched `requests[i]` (its push, a set of one of its
//! fields, the snapshot that holds it), with the request's place in the line as `pointer`
//! when the line holds the request whole (`/v/<j>` of a push, `/v` of a set of the request,
//! `/v/requests/<i>` of a snapshot).

use koru_protocol::{StepKind, StepOutcome, TurnStep};
use serde_json::Value;

use crate::conversation::items::{array_elements, Item, ItemOutcome, SourceRecord};
use crate::conversation::model::{
    set_state_from_snapshot, step, step_error, time_ms, uri_path, Turn, TurnCollector,
};
use crate::observe::snapshot::TurnState as Observed;
use crate::observe::stores::copilot::{markdown_of, request_turn, MutationLog};
use crate::observe::ParseError;

/// What Copilot sessions do not record: token usage, and a command's exit status outside
/// VS Code's newer terminal tool data.
pub const NOT_RECORDED: &[&str] = &["usage", "exit_status"];

/// A `.json` session file (format A) → its session document. `Err` for bytes that are not a
/// JSON object with a `requests` array (a file caught half-written: read it again).
pub fn document_from_json(bytes: &[u8]) -> Result<Value, ParseError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let document: Value = serde_json::from_slice(bytes)
        .map_err(|error| ParseError::NotJson(format!("not JSON: {error}")))?;
    if !document.get("requests").is_some_and(Value::is_array) {
        return Err(ParseError::Shape(
            "a session file that is not a JSON object with a `requests` array".into(),
        ));
    }
    Ok(document)
}

/// A `.jsonl` mutation log (format B) → the session document it replays to, with the
/// observer's `MutationLog`. Lines that are not entries (a line cut short by a write in
/// progress, an entry that does not apply) are skipped, as the observer skips them. `Err`
/// when no line is the log's snapshot entry.
pub fn document_from_log(bytes: &[u8]) -> Result<Value, ParseError> {
    replay_log(bytes, false).map(|(document, _)| document)
}

/// A session file's bytes (`log`: a `.jsonl` mutation log, else a `.json` session) → its
/// turns, and its items when `out` wants them.
pub fn read_session_file(
    bytes: &[u8],
    log: bool,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    let (document, sources) = if log {
        replay_log(bytes, out.wants_items())?
    } else {
        let document = document_from_json(bytes)?;
        let sources = if out.wants_items() {
            request_elements(bytes).into_iter().map(Some).collect()
        } else {
            Vec::new()
        };
        (document, sources)
    };
    read_session(&document, &sources, out)
}

/// A session document (`document_from_json` / `document_from_log`) → its turns, one per
/// request, oldest first. `Err` for a document without a `requests` array.
pub fn turns_from_session(document: &Value, out: &mut TurnCollector) -> Result<(), ParseError> {
    read_session(document, &[], out)
}

/// `turns_from_session`, each request's items reported from `sources[i]` (by position in
/// `requests`; empty when no items are wanted).
fn read_session(
    document: &Value,
    sources: &[Option<SourceRecord>],
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    let Some(requests) = document.get("requests").and_then(Value::as_array) else {
        return Err(ParseError::Shape(
            "a session document without a `requests` array".into(),
        ));
    };
    // The observer's rule, position for position: objects only, named by their index.
    for (position, request) in requests
        .iter()
        .enumerate()
        .filter(|(_, request)| request.is_object())
    {
        if let Some(Some(source)) = sources.get(position) {
            out.set_source(source.clone());
        }
        let turn = request_turn_read(position, request, out);
        out.push(turn);
    }
    Ok(())
}

/// Each request's element (`/requests/<i>`) in a `.json` session file, at its offset in the
/// file as written (after a byte order mark, when there is one).
fn request_elements(bytes: &[u8]) -> Vec<SourceRecord> {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let skipped = (bytes.len() - body.len()) as u64;
    array_elements(body, Some("requests"))
        .into_iter()
        .map(|mut source| {
            if let SourceRecord::Element { offset, .. } = &mut source {
                *offset += skipped;
            }
            source
        })
        .collect()
}

/// Replays a mutation log (`document_from_log`) and, with `sources`, notes for each request
/// the last line that touched it: the source of its items.
fn replay_log(
    bytes: &[u8],
    sources: bool,
) -> Result<(Value, Vec<Option<SourceRecord>>), ParseError> {
    let mut log = MutationLog::new();
    let mut touched: Vec<Option<SourceRecord>> = Vec::new();
    let mut offset = 0u64;
    // Lines as `feed_lines` counts them: 1-based, blank ones too, a `\r` kept in the bytes.
    for (index, raw) in bytes.split(|&byte| byte == b'\n').enumerate() {
        let start = offset;
        offset += raw.len() as u64 + 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if log.apply_line(line).is_err() || !sources {
            continue;
        }
        let requests = log
            .document()
            .and_then(|document| document.get("requests"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let record = SourceRecord::line(index as u64 + 1, start, raw);
        note_touches(line, record, requests, &mut touched);
    }
    let document = log
        .document()
        .cloned()
        .ok_or_else(|| ParseError::Shape("a session log without a snapshot entry".into()))?;
    Ok((document, touched))
}

/// The requests an applied log line (from `record`) touched, noted in `touched` (by
/// position); `requests` is how many the document has after it.
fn note_touches(
    line: &[u8],
    record: SourceRecord,
    requests: usize,
    touched: &mut Vec<Option<SourceRecord>>,
) {
    #[derive(serde::Deserialize)]
    struct Entry {
        kind: u64,
        #[serde(default)]
        k: Vec<Value>,
        #[serde(default)]
        i: Option<usize>,
    }
    let Ok(entry) = serde_json::from_slice::<Entry>(line) else {
        return;
    };
    let index = |segment: &Value| match segment {
        Value::Number(number) => number.as_u64().and_then(|n| usize::try_from(n).ok()),
        Value::String(text) => text.parse().ok(),
        _ => None,
    };
    let all = |prefix: &str| -> Vec<Option<SourceRecord>> {
        (0..requests)
            .map(|position| Some(record.clone().at(format!("{prefix}/{position}"))))
            .collect()
    };
    match (entry.kind, entry.k.as_slice()) {
        // The whole document: a snapshot, or a set of the root.
        (0, _) | (1, []) => *touched = all("/v/requests"),
        (_, [key, rest @ ..]) if key == "requests" => match (entry.kind, rest) {
            (1, []) => *touched = all("/v"),
            (2, []) => {
                let kept = entry.i.unwrap_or(touched.len()).min(touched.len());
                touched.truncate(kept);
                let base = touched.len();
                touched
                    .extend((base..requests).map(|position| {
                        Some(record.clone().at(format!("/v/{}", position - base)))
                    }));
            }
            (_, []) => touched.clear(),
            (kind, [position, inner @ ..]) => {
                if let Some(position) = index(position).filter(|p| *p < requests) {
                    if touched.len() <= position {
                        touched.resize(position + 1, None);
                    }
                    touched[position] = Some(if kind == 1 && inner.is_empty() {
                        record.at("/v".into())
                    } else {
                        record
                    });
                }
            }
        },
        _ => {}
    }
    touched.resize(requests, None);
}

/// One request → one turn, its items reported from the source `out` has.
fn request_turn_read(position: usize, request: &Value, out: &mut TurnCollector) -> Turn {
    let observed = request_turn(position, request);
    let started = request.get("timestamp").and_then(time_ms);
    let mut turn = Turn::new(observed.prompt.clone(), started);
    turn.reply = Some(observed.reply.clone()).filter(|reply| !reply.is_empty());
    turn.model = request
        .get("modelId")
        .and_then(Value::as_str)
        .filter(|model| !model.trim().is_empty())
        .map(str::to_string);
    let model_state = request.get("modelState");
    let completed = model_state
        .and_then(|state| state.get("completedAt"))
        .and_then(time_ms)
        .or_else(|| {
            let elapsed = request.get("elapsedMs").and_then(Value::as_u64)?;
            started.map(|started| started.saturating_add(elapsed))
        });
    turn.touch(completed);
    if let Some(prompt) = observed.prompt.as_deref() {
        out.item(Item::prompt(prompt, started));
    }
    let waits = matches!(observed.state, Observed::NeedsInput(_));
    // Whether a part that asks the user was reported (the request's own wait is then not).
    let mut asked = false;
    // The markdown parts since the last other part: one assistant text.
    let mut text = String::new();
    for part in request
        .get("response")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if out.wants_items() {
            if let Some(markdown) = markdown_of(part) {
                text.push_str(markdown);
                continue;
            }
            text_item(&mut text, out);
        }
        match part.get("kind").and_then(Value::as_str) {
            Some("toolInvocationSerialized" | "toolInvocation") => {
                let call = tool_step(part);
                let call_id = part.get("toolCallId").and_then(Value::as_str);
                out.item(Item::tool_call(&call, call_id));
                if let Some(details) = part.get("resultDetails").filter(|d| !d.is_null()) {
                    let output = details.get("output").and_then(error_text);
                    out.item(Item::step_result(&call, call_id, output.as_deref(), None));
                }
                if waits && call.outcome == StepOutcome::Unknown && awaits_approval(part) {
                    asked = true;
                    let what = format!("approve {}: {}", call.tool, call.summary);
                    out.item(Item::needs_input(&what, None));
                }
                turn.steps.push(call);
            }
            Some("textEditGroup" | "notebookEditGroup") => {
                if let Some(edit) = edit_step(part) {
                    out.item(Item::tool_call(&edit, None));
                    turn.steps.push(edit);
                }
            }
            Some(kind @ ("confirmation" | "questionCarousel" | "elicitationSerialized")) => {
                asked = true;
                if out.wants_items() {
                    let what = question(part).unwrap_or_else(|| kind.to_string());
                    out.item(Item::needs_input(&what, None));
                }
            }
            _ => {}
        }
    }
    text_item(&mut text, out);
    match &observed.state {
        Observed::Completed => out.item(Item::turn_end(ItemOutcome::Complete, None, completed)),
        Observed::Cancelled => out.item(Item::turn_end(ItemOutcome::Cancelled, None, completed)),
        Observed::Failed(why) => {
            out.item(Item::turn_end(ItemOutcome::Failed, Some(why), completed));
        }
        Observed::NeedsInput(_) if !asked => {
            out.item(Item::needs_input("the request waits for the user", None));
        }
        _ => {}
    }
    set_state_from_snapshot(&mut turn, &observed.state);
    turn
}

/// The markdown parts gathered in `text`, as one assistant text (when not blank); emptied.
fn text_item(text: &mut String, out: &mut TurnCollector) {
    if !text.trim().is_empty() {
        out.item(Item::assistant_text(text, None));
    }
    text.clear();
}

/// Whether a tool invocation has not been confirmed or declined yet.
fn awaits_approval(part: &Value) -> bool {
    part.get("isConfirmed").is_none_or(Value::is_null)
        && part.get("isComplete").and_then(Value::as_bool) != Some(true)
}

/// What a part that asks the user says: its title and message, or its questions' titles.
fn question(part: &Value) -> Option<String> {
    let mut texts: Vec<String> = ["title", "message"]
        .iter()
        .filter_map(|key| markdown(part.get(*key)))
        .map(plain)
        .collect();
    for asked in part
        .get("questions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(title) = markdown(asked.get("title")) {
            texts.push(plain(title));
        }
    }
    (!texts.is_empty()).then(|| texts.join(": "))
}

/// A markdown string as VS Code serializes it: plain text, or `{value}`.
fn markdown(value: Option<&Value>) -> Option<&str> {
    let value = value?;
    value
        .as_str()
        .or_else(|| value.get("value").and_then(Value::as_str))
        .filter(|text| !text.trim().is_empty())
}

/// Markdown links `[label](target)` as their label, or, without one, the path a `file:`
/// target names (`Read [](file:///w/a.rs)` → `Read /w/a.rs`).
fn plain(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else {
            break;
        };
        let target_and_rest = &after[close + 2..];
        let Some(end) = target_and_rest.find(')') else {
            break;
        };
        let label = &after[..close];
        let target = &target_and_rest[..end];
        out.push_str(&rest[..open]);
        if label.trim().is_empty() {
            out.push_str(&link_path(target).unwrap_or_else(|| target.to_string()));
        } else {
            out.push_str(label);
        }
        rest = &target_and_rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The local path of a markdown link's target, when it is a `file:` URI (a `#L3` line
/// anchor dropped).
fn link_path(target: &str) -> Option<String> {
    let target = target.split_whitespace().next()?;
    target
        .starts_with("file:")
        .then(|| crate::observe::text::local_path(target))
        .flatten()
}

/// The `file:` paths the links of a markdown text name.
fn linked_paths(markdown: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = markdown;
    while let Some(at) = rest.find("](") {
        let target = &rest[at + 2..];
        let end = target.find(')').unwrap_or(target.len());
        if let Some(path) = link_path(&target[..end]) {
            paths.push(path);
        }
        rest = &target[end..];
    }
    paths
}

/// What a tool does, from its id (VS Code's and Copilot's built-in tools; anything else,
/// MCP tools included, is a `Tool`).
fn tool_kind(tool_id: &str) -> StepKind {
    let id = tool_id.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| id.contains(word));
    if has(&["terminal", "runcommand", "run_command"]) {
        StepKind::Command
    } else if has(&["subagent", "runtask", "delegate"]) {
        StepKind::Agent
    } else if has(&["createfile", "create_file", "createdirectory", "newfile"]) {
        StepKind::Write
    } else if has(&[
        "replacestring",
        "replace_string",
        "multireplace",
        "insertedit",
        "insert_edit",
        "applypatch",
        "apply_patch",
        "editfile",
        "edit_file",
        "editnotebook",
    ]) {
        StepKind::Edit
    } else if has(&[
        "readfile",
        "read_file",
        "listdirectory",
        "list_dir",
        "readnotebook",
        "getnotebooksummary",
        "geterrors",
        "get_errors",
    ]) {
        StepKind::Read
    } else if has(&[
        "search",
        "findfiles",
        "find_files",
        "findtext",
        "grep",
        "usages",
    ]) {
        StepKind::Search
    } else if has(&["fetch", "webpage", "web_"]) {
        StepKind::Web
    } else {
        StepKind::Tool
    }
}

/// A `toolInvocationSerialized` part → its step.
fn tool_step(part: &Value) -> TurnStep {
    let tool = part
        .get("toolId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .unwrap_or("tool");
    let data = part.get("toolSpecificData");
    let data_kind = data.and_then(|d| d.get("kind")).and_then(Value::as_str);
    let mut kind = match data_kind {
        Some("terminal") => StepKind::Command,
        Some("subagent") => StepKind::Agent,
        _ => tool_kind(tool),
    };
    let complete = part.get("isComplete").and_then(Value::as_bool) == Some(true);
    let invocation = markdown(part.get("invocationMessage"));
    let past = markdown(part.get("pastTenseMessage"));
    let command = (data_kind == Some("terminal"))
        .then(|| terminal_command(data?))
        .flatten();
    let exit_code = data
        .and_then(|d| d.get("terminalCommandState"))
        .and_then(|state| state.get("exitCode"))
        .and_then(Value::as_i64);
    if command.is_some() {
        kind = StepKind::Command;
    }
    let summary = match (&command, complete, past, invocation) {
        (Some(command), ..) => command.clone(),
        (None, true, Some(past), _) => plain(past),
        (None, _, _, Some(invocation)) => plain(invocation),
        (None, _, Some(past), None) => plain(past),
        (None, _, None, None) => String::new(),
    };
    let mut call = step(kind, tool, &summary);
    call.command = command;
    call.exit_code = exit_code;
    call.paths = tool_paths(part);
    let declined = match part.get("isConfirmed") {
        Some(Value::Bool(false)) => true,
        // `ToolConfirmKind.Denied` (0) and `Skipped` (5).
        Some(reason @ Value::Object(_)) => {
            matches!(reason.get("type").and_then(Value::as_u64), Some(0 | 5))
        }
        _ => false,
    };
    let details = part.get("resultDetails");
    let failed = details
        .and_then(|d| d.get("isError"))
        .and_then(Value::as_bool)
        == Some(true);
    call.outcome = if declined {
        StepOutcome::Rejected
    } else if failed || exit_code.is_some_and(|code| code != 0) {
        StepOutcome::Error
    } else if complete {
        StepOutcome::Ok
    } else {
        StepOutcome::Unknown
    };
    if failed {
        call.error = details
            .and_then(|d| d.get("output"))
            .and_then(error_text)
            .and_then(|text| step_error(&text));
    } else if let Some(code) = exit_code.filter(|code| *code != 0) {
        call.error = Some(format!("exit code {code}"));
    }
    call
}

/// The command line of terminal tool data: the edited one when the user or the tool
/// changed it, else the original (`commandLine`), or the legacy `command`.
fn terminal_command(data: &Value) -> Option<String> {
    let line = data.get("commandLine");
    ["userEdited", "toolEdited", "original"]
        .iter()
        .find_map(|key| line?.get(*key)?.as_str())
        .or_else(|| data.get("command").and_then(Value::as_str))
        .filter(|command| !command.trim().is_empty())
        .map(str::to_string)
}

/// The text of a tool's error output (`resultDetails.output`: text, or parts with `value`).
fn error_text(output: &Value) -> Option<String> {
    match output {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.get("value").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        other => other
            .get("value")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// The files a tool call names: its `resultDetails` URIs and locations, else the `file:`
/// links of its messages, else a path in its raw input.
fn tool_paths(part: &Value) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let mut add = |path: String| {
        if !paths.contains(&path) {
            paths.push(path);
        }
    };
    if let Some(details) = part.get("resultDetails").and_then(Value::as_array) {
        for detail in details {
            // A `Location` is `{uri, range}`; a `URI` is itself.
            if let Some(path) = uri_path(detail.get("uri").unwrap_or(detail)) {
                add(path);
            }
        }
    }
    for key in ["pastTenseMessage", "invocationMessage"] {
        let message = part.get(key);
        if let Some(text) = markdown(message) {
            linked_paths(text).into_iter().for_each(&mut add);
        }
    }
    let raw = part
        .get("toolSpecificData")
        .filter(|data| data.get("kind").and_then(Value::as_str) == Some("input"))
        .and_then(|data| data.get("rawInput"));
    for key in ["filePath", "path", "file"] {
        if let Some(path) = raw.and_then(|raw| raw.get(key)).and_then(Value::as_str) {
            if !path.is_empty() {
                add(path.to_string());
            }
        }
    }
    paths
}

/// A `textEditGroup` (or `notebookEditGroup`) part → an edit of its file.
fn edit_step(part: &Value) -> Option<TurnStep> {
    let kind = part.get("kind").and_then(Value::as_str)?;
    let path = part.get("uri").and_then(uri_path);
    let mut edit = step(StepKind::Edit, kind, path.as_deref().unwrap_or(""));
    edit.paths = path.into_iter().collect();
    if part.get("done").and_then(Value::as_bool) == Some(true) {
        edit.outcome = StepOutcome::Ok;
    }
    Some(edit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::items::{ConversationItem, ItemKind};
    use crate::conversation::model::corpus;
    use crate::conversation::Keep;
    use koru_protocol::TurnState;

    fn read(document: &str) -> (u64, Vec<Turn>) {
        let document = document_from_json(document.as_bytes()).unwrap();
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        turns_from_session(&document, &mut out).unwrap();
        let total = out.total();
        (
            total,
            out.into_turns().into_iter().map(|(_, t)| t).collect(),
        )
    }

    /// A session with a turn in each state, tool calls and edits in VS Code 1.10x's shapes.
    const SESSION: &str = r#"{
      "version": 3, "sessionId": "s1", "creationDate": 1763727100000, "requests": [
        {"requestId": "r1", "timestamp": 1763727101000, "modelId": "copilot/gpt-5",
         "message": {"text": "fix the build", "parts": []},
         "response": [
           {"value": "Let me look."},
           {"kind": "toolInvocationSerialized", "toolId": "copilot_readFile", "toolCallId": "t1",
            "invocationMessage": {"value": "Reading [](file:///home/u/app/src/main.rs)", "uris": {}},
            "pastTenseMessage": {"value": "Read [](file:///home/u/app/src/main.rs)", "uris": {}},
            "isConfirmed": {"type": 1}, "isComplete": true, "source": {"type": "internal"}},
           {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolCallId": "t2",
            "invocationMessage": "Running `cargo build`",
            "toolSpecificData": {"kind": "terminal", "language": "sh",
              "commandLine": {"original": "cargo build"},
              "terminalCommandState": {"exitCode": 101, "timestamp": 1763727103000}},
            "isConfirmed": {"type": 4}, "isComplete": true},
           {"kind": "textEditGroup", "uri": {"$mid": 1, "fsPath": "/home/u/app/src/main.rs",
             "external": "file:///home/u/app/src/main.rs", "path": "/home/u/app/src/main.rs",
             "scheme": "file"}, "edits": [[]], "done": true},
           {"kind": "toolInvocationSerialized", "toolId": "copilot_createFile", "toolCallId": "t3",
            "invocationMessage": "Creating [](file:///home/u/app/NOTES.md)",
            "isConfirmed": {"type": 0}, "isComplete": true},
           {"kind": "markdownContent", "content": {"value": "Fixed the missing `use`."}}
         ],
         "result": {"timings": {"totalElapsed": 8000}},
         "modelState": {"value": 1, "completedAt": 1763727109000}},
        {"requestId": "r2", "timestamp": 1763727110000,
         "message": {"text": "now run the tests", "parts": []},
         "response": [
           {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolCallId": "t4",
            "invocationMessage": "Running `cargo test`",
            "toolSpecificData": {"kind": "terminal", "language": "sh",
              "commandLine": {"original": "cargo test"}},
            "isComplete": false}
         ],
         "modelState": {"value": 2, "completedAt": 1763727112000}},
        {"requestId": "r3", "timestamp": 1763727120000,
         "message": {"text": "try again", "parts": []}, "response": [],
         "result": {"errorDetails": {"message": "Rate limit exceeded"}},
         "modelState": {"value": 3, "completedAt": 1763727121000}},
        "not a request",
        {"requestId": "r4", "timestamp": 1763727130000,
         "message": {"text": "delete the logs", "parts": []},
         "response": [
           {"value": "I will remove them."},
           {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolCallId": "t5",
            "invocationMessage": "Run `rm -rf logs`?",
            "toolSpecificData": {"kind": "terminal", "command": "rm -rf logs", "language": "sh"},
            "isComplete": false}
         ],
         "modelState": {"value": 4}},
        {"requestId": "r5", "timestamp": 1763727140000,
         "message": {"text": "search for TODOs", "parts": []},
         "response": [
           {"kind": "toolInvocationSerialized", "toolId": "copilot_findTextInFiles", "toolCallId": "t6",
            "invocationMessage": "Searching for `TODO`", "isComplete": true,
            "resultDetails": {"input": "{}", "output": [{"type": "embed", "value": "ripgrep crashed"}], "isError": true}}
         ],
         "modelState": {"value": 0}}
      ]}"#;

    #[test]
    fn a_request_is_a_turn_with_its_tools_edits_times_and_model() {
        let (total, turns) = read(SESSION);
        assert_eq!(total, 5, "the string in `requests` is no request");
        let first = &turns[0];
        assert_eq!(first.prompt.as_deref(), Some("fix the build"));
        assert_eq!(
            first.reply.as_deref(),
            Some("Let me look.\n\nFixed the missing `use`.")
        );
        assert_eq!(first.state, TurnState::Complete);
        assert_eq!(first.model.as_deref(), Some("copilot/gpt-5"));
        assert_eq!(first.started_ms, Some(1_763_727_101_000));
        assert_eq!(first.ended_ms, Some(1_763_727_109_000));
        assert_eq!(first.usage, None);
        let steps: Vec<(StepKind, &str, &str, StepOutcome)> = first
            .steps
            .iter()
            .map(|s| (s.kind, s.tool.as_str(), s.summary.as_str(), s.outcome))
            .collect();
        assert_eq!(
            steps,
            [
                (
                    StepKind::Read,
                    "copilot_readFile",
                    "Read /home/u/app/src/main.rs",
                    StepOutcome::Ok
                ),
                (
                    StepKind::Command,
                    "run_in_terminal",
                    "cargo build",
                    StepOutcome::Error
                ),
                (
                    StepKind::Edit,
                    "textEditGroup",
                    "/home/u/app/src/main.rs",
                    StepOutcome::Ok
                ),
                (
                    StepKind::Write,
                    "copilot_createFile",
                    "Creating /home/u/app/NOTES.md",
                    StepOutcome::Rejected
                ),
            ]
        );
        assert_eq!(first.steps[0].paths, ["/home/u/app/src/main.rs"]);
        assert_eq!(first.steps[1].command.as_deref(), Some("cargo build"));
        assert_eq!(first.steps[1].exit_code, Some(101));
        assert_eq!(first.steps[1].error.as_deref(), Some("exit code 101"));
        assert_eq!(first.steps[2].paths, ["/home/u/app/src/main.rs"]);
        assert_eq!(first.steps[3].paths, ["/home/u/app/NOTES.md"]);
        assert!(first.steps.iter().all(|s| s.at_ms.is_none()));
    }

    #[test]
    fn cancelled_failed_waiting_and_erring_requests() {
        let (_, turns) = read(SESSION);
        let cancelled = &turns[1];
        assert_eq!(cancelled.state, TurnState::Cancelled);
        assert_eq!(cancelled.reply, None);
        assert_eq!(cancelled.ended_ms, Some(1_763_727_112_000));
        assert_eq!(cancelled.steps[0].outcome, StepOutcome::Rejected, "cut off");
        assert_eq!(cancelled.steps[0].command.as_deref(), Some("cargo test"));
        let failed = &turns[2];
        assert_eq!(failed.state, TurnState::Failed);
        assert_eq!(failed.error.as_deref(), Some("Rate limit exceeded"));
        let waiting = &turns[3];
        assert_eq!(waiting.prompt.as_deref(), Some("delete the logs"));
        assert_eq!(waiting.state, TurnState::NeedsInput);
        assert_eq!(
            waiting.steps[0].outcome,
            StepOutcome::Unknown,
            "awaits approval"
        );
        assert_eq!(
            waiting.steps[0].command.as_deref(),
            Some("rm -rf logs"),
            "legacy shape"
        );
        assert_eq!(waiting.ended_ms, Some(1_763_727_130_000), "no end yet");
        let erring = &turns[4];
        assert_eq!(erring.state, TurnState::InProgress);
        assert_eq!(erring.steps[0].kind, StepKind::Search);
        assert_eq!(erring.steps[0].outcome, StepOutcome::Error);
        assert_eq!(erring.steps[0].error.as_deref(), Some("ripgrep crashed"));
    }

    #[test]
    fn the_log_replays_to_the_same_turns_as_the_whole_file() {
        let log = concat!(
            r#"{"kind":0,"v":{"version":3,"sessionId":"s2","creationDate":1763727100000,"requests":[]}}"#,
            "\n",
            r#"{"kind":2,"k":["requests"],"v":[{"requestId":"r1","timestamp":1763727101000,"modelId":"copilot/gpt-5","message":{"text":"explain main.rs","parts":[]},"response":[],"modelState":{"value":0}}]}"#,
            "\n",
            r#"{"kind":2,"k":["requests",0,"response"],"v":[{"value":"It parses args."}]}"#,
            "\n",
            r#"{"kind":1,"k":["requests",7,"modelState"],"v":{"value":1}}"#,
            "\n",
            r#"{"kind":1,"k":["requests",0,"modelState"],"v":{"value":1,"completedAt":1763727109000}}"#,
            "\n",
            r#"{"kind":1,"k":["requests",0,"result"],"v":{"#,
        );
        let document = document_from_log(log.as_bytes()).unwrap();
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        turns_from_session(&document, &mut out).unwrap();
        let turns = out.into_turns();
        assert_eq!(turns.len(), 1);
        let turn = &turns[0].1;
        assert_eq!(turn.reply.as_deref(), Some("It parses args."));
        assert_eq!(turn.state, TurnState::Complete);
        assert_eq!(turn.ended_ms, Some(1_763_727_109_000));
        assert!(document_from_log(b"{\"kind\":1,\"k\":[\"x\"],\"v\":1}\n").is_err());
        assert!(document_from_json(b"[1]").is_err());
        assert!(document_from_json(b"{\"requests\":").is_err());
    }

    #[test]
    fn the_corpus_reads_as_its_expectations() {
        corpus::check("copilot", &[".jsonl"], |name, bytes, out| {
            let document = document_from_log(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            turns_from_session(&document, out).unwrap_or_else(|e| panic!("{name}: {e}"));
        });
    }

    /// The items of a session file's bytes (`log`: a mutation log).
    fn items_of(bytes: &[u8], log: bool) -> Vec<ConversationItem> {
        let mut items = Vec::new();
        let mut out = TurnCollector::with_items(Keep::Last(0), |item| items.push(item));
        read_session_file(bytes, log, &mut out).unwrap();
        drop(out);
        items
    }

    #[test]
    fn a_session_files_items_are_its_requests_bytes() {
        let bytes = [b"\xEF\xBB\xBF".as_slice(), SESSION.as_bytes()].concat();
        let items = items_of(&bytes, false);
        let first: Vec<(ItemKind, &str, u32)> = items
            .iter()
            .filter(|item| item.turn == 0)
            .map(|item| (item.kind, item.summary.as_str(), item.part))
            .collect();
        assert_eq!(
            first,
            [
                (ItemKind::Prompt, "fix the build", 0),
                (ItemKind::AssistantText, "Let me look.", 1),
                (ItemKind::ToolCall, "Read /home/u/app/src/main.rs", 2),
                (ItemKind::ToolCall, "cargo build", 3),
                (ItemKind::ToolCall, "/home/u/app/src/main.rs", 4),
                (ItemKind::ToolCall, "Creating /home/u/app/NOTES.md", 5),
                (ItemKind::AssistantText, "Fixed the missing `use`.", 6),
                (ItemKind::TurnEnd, "complete", 7),
            ]
        );
        assert_eq!(items[3].outcome, Some(ItemOutcome::Error), "exit code 101");
        assert_eq!(items[3].call_id.as_deref(), Some("t2"));
        let ends: Vec<(u64, ItemKind, &str)> = items
            .iter()
            .filter(|item| matches!(item.kind, ItemKind::TurnEnd | ItemKind::NeedsInput))
            .map(|item| (item.turn, item.kind, item.summary.as_str()))
            .collect();
        assert_eq!(
            ends,
            [
                (0, ItemKind::TurnEnd, "complete"),
                (1, ItemKind::TurnEnd, "cancelled"),
                (2, ItemKind::TurnEnd, "Rate limit exceeded"),
                (
                    3,
                    ItemKind::NeedsInput,
                    "approve run_in_terminal: rm -rf logs"
                ),
            ]
        );
        let result = items
            .iter()
            .find(|item| item.kind == ItemKind::ToolResult)
            .unwrap();
        assert_eq!((result.turn, result.outcome), (4, Some(ItemOutcome::Error)));
        assert_eq!(
            result.text_sha256.as_deref(),
            Some(crate::journal::canonical::sha256_hex(b"ripgrep crashed").as_str())
        );
        let whole: Value = serde_json::from_slice(&bytes[3..]).unwrap();
        for item in &items {
            let SourceRecord::Element {
                offset,
                bytes: length,
                sha256,
                pointer,
                ..
            } = &item.source
            else {
                panic!("{item:?}");
            };
            let element = &bytes[*offset as usize..(*offset + *length) as usize];
            assert_eq!(sha256, &crate::journal::canonical::sha256_hex(element));
            let parsed: Value = serde_json::from_slice(element).unwrap();
            assert_eq!(Some(&parsed), whole.pointer(pointer), "{pointer}");
        }
        // The string in `requests` is position 3: the fourth turn is `/requests/4`.
        let waiting = items.iter().find(|item| item.turn == 3).unwrap();
        assert!(
            matches!(&waiting.source, SourceRecord::Element { pointer, .. } if pointer == "/requests/4")
        );
    }

    #[test]
    fn a_logs_items_come_from_the_last_line_that_touched_their_request() {
        let lines = [
            r#"{"kind":0,"v":{"version":3,"sessionId":"s2","requests":[{"requestId":"r0","message":{"text":"old"},"response":[],"modelState":{"value":1}}]}}"#,
            r#"{"kind":2,"k":["requests"],"v":[{"requestId":"r1","timestamp":5,"message":{"text":"one"},"response":[],"modelState":{"value":0}},{"requestId":"r2","message":{"text":"two"},"response":[],"modelState":{"value":0}}]}"#,
            "",
            r#"{"kind":1,"k":["requests",1,"modelState"],"v":{"value":1,"completedAt":9}}"#,
            r#"{"kind":1,"k":["requests",9,"modelState"],"v":{"value":1}}"#,
            r#"{"kind":1,"k":["requests",2],"v":{"requestId":"r2","message":{"text":"two again"},"response":[{"value":"ok"}],"modelState":{"value":1}}}"#,
            r#"{"kind":1,"k":["inputState"],"v":{}}"#,
        ];
        let log = format!("{}\r\n{}\n", lines[0], lines[1..].join("\n"));
        let items = items_of(log.as_bytes(), true);
        let sources: Vec<(u64, ItemKind, u64, Option<&str>)> = items
            .iter()
            .map(|item| match &item.source {
                SourceRecord::Line { line, pointer, .. } => {
                    (item.turn, item.kind, *line, pointer.as_deref())
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            sources,
            [
                (0, ItemKind::Prompt, 1, Some("/v/requests/0")),
                (0, ItemKind::TurnEnd, 1, Some("/v/requests/0")),
                (1, ItemKind::Prompt, 4, None),
                (1, ItemKind::TurnEnd, 4, None),
                (2, ItemKind::Prompt, 6, Some("/v")),
                (2, ItemKind::AssistantText, 6, Some("/v")),
                (2, ItemKind::TurnEnd, 6, Some("/v")),
            ]
        );
        let mut offset = 0;
        for (number, line) in log.split('\n').enumerate() {
            for item in &items {
                if let SourceRecord::Line {
                    line: at,
                    offset: from,
                    bytes,
                    sha256,
                    ..
                } = &item.source
                {
                    if *at == number as u64 + 1 {
                        assert_eq!((*from, *bytes), (offset, line.len() as u64));
                        assert_eq!(
                            sha256,
                            &crate::journal::canonical::sha256_hex(line.as_bytes())
                        );
                    }
                }
            }
            offset += line.len() as u64 + 1;
        }
        assert!(
            log.split('\n').next().unwrap().ends_with('\r'),
            "kept in the bytes"
        );
        // A push that truncates: the requests from its index come from it.
        let truncated = format!(
            "{log}{}\n",
            r#"{"kind":2,"k":["requests"],"i":1,"v":[{"requestId":"r3","message":{"text":"three"},"response":[]}]}"#
        );
        let items = items_of(truncated.as_bytes(), true);
        let last: Vec<(u64, u64, Option<&str>)> = items
            .iter()
            .filter(|item| item.kind == ItemKind::Prompt)
            .map(|item| match &item.source {
                SourceRecord::Line { line, pointer, .. } => (item.turn, *line, pointer.as_deref()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(last, [(0, 1, Some("/v/requests/0")), (1, 8, Some("/v/0"))]);
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        corpus::check_file_items(
            "copilot",
            &[".jsonl"],
            crate::observe::stores::copilot::STORE,
        );
    }

    #[test]
    fn turn_boundaries_and_prompts_agree_with_the_observer() {
        let dir = corpus::folder("copilot");
        for name in [
            "8b0378ec-9689-4fed-a671-2a9baeff8d26.jsonl",
            "c20037d8-6987-4d25-ace3-ac3ccd694708.jsonl",
        ] {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let mut log = MutationLog::new();
            for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                log.apply_line(line).unwrap();
            }
            let snapshot = log.snapshot(name, None).unwrap();
            let document = document_from_log(&bytes).unwrap();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            turns_from_session(&document, &mut out).unwrap();
            let prompts: Vec<Option<String>> = out
                .into_turns()
                .into_iter()
                .map(|(_, t)| t.prompt)
                .collect();
            let observed: Vec<Option<String>> =
                snapshot.turns.into_iter().map(|t| t.prompt).collect();
            assert_eq!(prompts, observed, "{name}");
        }
    }

    #[test]
    fn mangled_sessions_never_panic() {
        let lines: Vec<Vec<u8>> = SESSION.lines().map(|l| l.as_bytes().to_vec()).collect();
        let mut noise = corpus::Noise::new(7);
        for _ in 0..300 {
            let bytes = noise.mangle(&lines).join(&b'\n');
            if let Ok(document) = document_from_json(&bytes) {
                let mut out = TurnCollector::new(Keep::Last(3));
                let _ = turns_from_session(&document, &mut out);
            }
            let _ = document_from_log(&bytes);
            for log in [false, true] {
                let mut out = TurnCollector::with_items(Keep::Last(3), |_| {});
                let _ = read_session_file(&bytes, log, &mut out);
            }
        }
        corpus::each_mangled("copilot", ".jsonl", 0x0c0f_1107, |lines| {
            let mut out = TurnCollector::with_items(Keep::Last(3), |_| {});
            let _ = read_session_file(&lines.join(&b'\n'), true, &mut out);
        });
        let mut out = TurnCollector::new(Keep::Last(3));
        for document in [
            serde_json::json!({"requests": [{"response": 3, "modelState": "x", "timestamp": -1}]}),
            serde_json::json!({"requests": [{"response": [{"kind": "toolInvocationSerialized", "toolSpecificData": 1, "resultDetails": [1, {"uri": 2}], "isConfirmed": {"type": "x"}}, {"kind": "textEditGroup"}]}]}),
            serde_json::json!({"requests": 1}),
        ] {
            let _ = turns_from_session(&document, &mut out);
        }
    }
}

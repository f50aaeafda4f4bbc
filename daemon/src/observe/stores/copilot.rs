//! GitHub Copilot Chat sessions in the VS Code family's workspaceStorage (`chatSessions/*.json` whole files and `*.jsonl` mutation logs): pure readers from bytes to `ChatSnapshot`.
//!
//! Format facts (docs/research/chat-store-formats.md §3; the store belongs to core VS Code,
//! `chatSessionStore.ts`, `objectMutationLog.ts`, `chatSessionOperationLog.ts`):
//! - Format A, `<session>.json`: one `ISerializableChatData` v3 object, rewritten whole.
//! - Format B, `<session>.jsonl`: a log of mutations of that same object, one entry a line:
//!   `{"kind":0,"v":session}` (the whole document; the first line, and again when VS Code
//!   compacts the file by rewriting it), `{"kind":1,"k":path,"v":value}` (set),
//!   `{"kind":2,"k":path,"v":[items]?,"i":index?}` (truncate the array to `i`, then
//!   append `v`) and `{"kind":3,"k":path}` (delete). Paths mix object keys and array
//!   indices, e.g. `["requests",3,"modelState"]`.
//! - Each `requests[i]` is one turn: `requestId`, `timestamp`, `message.text` (the prompt),
//!   `response[]` (parts: markdown strings `{value}` or `{kind:"markdownContent",
//!   content:{value}}`, and parts with other `kind`s: tools, thinking, confirmations …),
//!   `result{errorDetails?}`, `modelState{value, completedAt?}` (0 pending, 1 complete,
//!   2 cancelled, 3 failed, 4 needs input) and, in older files, `isCanceled`.
//!
//! Both formats end in one mapping, `session_snapshot`, from the session document to the
//! chat's turns and their states; the `SnapshotDiffer` turns successive snapshots into
//! events.

use koru_protocol::NeedsInputKind;
use serde_json::{Map, Value};

use crate::observe::snapshot::{ChatSnapshot, TurnSnapshot, TurnState};
use crate::observe::ParseError;

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_copilot_json";

/// The longest mutation path accepted. Real paths have a handful of segments
/// (`["requests",3,"response",2]`); the bound also bounds how deep the replayed document
/// can nest (a path must exist, and a parsed value nests at most 128 levels), so no later
/// recursive walk over it can exhaust the stack.
const MAX_PATH_SEGMENTS: usize = 64;

/// Format A: a whole session file → snapshot. `Err` (a specific message) for bytes that
/// are not a session object; a half-written file fails here and is retried by the caller.
pub fn parse_session_json(
    bytes: &[u8],
    fallback_chat_id: &str,
    workspace: Option<&str>,
) -> Result<ChatSnapshot, ParseError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let session: Value = serde_json::from_slice(bytes)
        .map_err(|error| ParseError::NotJson(format!("not JSON: {error}")))?;
    let Value::Object(fields) = &session else {
        return Err(ParseError::Shape(
            "a session file that is not a JSON object".into(),
        ));
    };
    if !fields.get("requests").is_some_and(Value::is_array) {
        return Err(ParseError::Shape(
            "a JSON object without a `requests` array is not a chat session".into(),
        ));
    }
    Ok(session_snapshot(&session, fallback_chat_id, workspace))
}

/// Format B: the mutation log, applied line by line (incremental: the caller tails the
/// file and feeds complete lines; after truncation or replacement it calls `reset()`).
#[derive(Debug, Default)]
pub struct MutationLog {
    /// The replayed session document; `None` before the first snapshot entry.
    document: Option<Value>,
}

impl MutationLog {
    pub fn new() -> Self {
        MutationLog::default()
    }

    /// Forgets the document (the file was truncated or replaced and is read again from
    /// its first line).
    pub fn reset(&mut self) {
        self.document = None;
    }

    /// Applies one line. `Err` for a line that is not a valid entry (bad JSON, unknown
    /// kind, a path that does not exist, set/push before a snapshot); the document then
    /// stays as it was.
    pub fn apply_line(&mut self, line: &[u8]) -> Result<(), ParseError> {
        let entry: Value = serde_json::from_slice(line)
            .map_err(|error| ParseError::NotJson(format!("not JSON: {error}")))?;
        let Value::Object(mut entry) = entry else {
            return Err(ParseError::Shape(
                "a log entry that is not a JSON object".into(),
            ));
        };
        let kind = match entry.get("kind") {
            None => return Err(ParseError::Shape("a log entry without a `kind`".into())),
            Some(kind) => kind.as_u64().ok_or_else(|| {
                ParseError::Shape(format!("a log entry whose kind {kind} is not 0, 1, 2 or 3"))
            })?,
        };
        match kind {
            0 => {
                // VS Code writes the whole document as the first line, and rewrites the
                // file with a single new one when it compacts the log: either way this
                // line is the session as it now stands.
                match entry.remove("v") {
                    Some(session @ Value::Object(_)) => {
                        self.document = Some(session);
                        Ok(())
                    }
                    Some(_) => Err(ParseError::Shape(
                        "a snapshot entry whose `v` is not an object".into(),
                    )),
                    None => Err(ParseError::Shape("a snapshot entry without `v`".into())),
                }
            }
            1..=3 => {
                let path = entry_path(&entry)?;
                let Some(document) = self.document.as_mut() else {
                    return Err(ParseError::Shape(format!(
                        "a kind {kind} entry at {} before the log's snapshot entry",
                        show_path(&path)
                    )));
                };
                match kind {
                    1 => match entry.remove("v") {
                        // JSON has no `undefined`: VS Code's set of an undefined value
                        // loses its `v` and means delete.
                        None => delete_at(document, &path),
                        Some(value) => set_at(document, &path, value),
                    },
                    2 => {
                        let items = match entry.remove("v") {
                            None | Some(Value::Null) => Vec::new(),
                            Some(Value::Array(items)) => items,
                            Some(_) => {
                                return Err(ParseError::Shape(format!(
                                    "a push at {} whose `v` is not an array",
                                    show_path(&path)
                                )))
                            }
                        };
                        let truncate_to = match entry.get("i") {
                            None | Some(Value::Null) => None,
                            Some(index) => Some(index_of(index).ok_or_else(|| {
                                ParseError::Mutation(format!(
                                    "a push at {} whose truncate index {index} is not an index",
                                    show_path(&path)
                                ))
                            })?),
                        };
                        push_at(document, &path, truncate_to, items)
                    }
                    _ => delete_at(document, &path),
                }
            }
            other => Err(ParseError::Shape(format!(
                "a log entry whose kind {other} is not 0, 1, 2 or 3"
            ))),
        }
    }

    /// The replayed session document as it stands (`None` before the first snapshot entry).
    pub fn document(&self) -> Option<&Value> {
        self.document.as_ref()
    }

    /// The session as it stands (`None` before the first snapshot entry).
    pub fn snapshot(
        &self,
        fallback_chat_id: &str,
        workspace: Option<&str>,
    ) -> Option<ChatSnapshot> {
        self.document
            .as_ref()
            .map(|session| session_snapshot(session, fallback_chat_id, workspace))
    }
}

/// The workspace folder of `workspaceStorage/<hash>/workspace.json` (`{"folder": uri}`, or
/// `{"workspace": uri}` of a multi-root window's `.code-workspace` file): `file://` URIs
/// become percent-decoded local paths (a malformed one names no workspace); other URIs
/// (`vscode-remote://…`) are returned as they are.
pub fn workspace_from_json(bytes: &[u8]) -> Option<String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let record: Value = serde_json::from_slice(bytes).ok()?;
    let uri = ["folder", "workspace"]
        .iter()
        .find_map(|key| record.get(key).and_then(Value::as_str))
        .filter(|uri| !uri.is_empty())?;
    let is_file = uri
        .split_once(':')
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("file"));
    if is_file {
        crate::observe::text::local_path(uri)
    } else {
        Some(uri.to_string())
    }
}

/// One segment of a mutation path: an object key or an array index.
#[derive(Debug, Clone)]
enum Segment {
    Key(String),
    Index(usize),
}

impl Segment {
    /// The segment as an array index (JavaScript also indexes arrays with numeric strings).
    fn as_index(&self) -> Option<usize> {
        match self {
            Segment::Index(index) => Some(*index),
            Segment::Key(key) => key.parse().ok(),
        }
    }

    /// The segment as an object key (JavaScript turns numbers into keys).
    fn as_key(&self) -> String {
        match self {
            Segment::Index(index) => index.to_string(),
            Segment::Key(key) => key.clone(),
        }
    }
}

/// The entry's `k`: an array of keys and indices.
fn entry_path(entry: &Map<String, Value>) -> Result<Vec<Segment>, ParseError> {
    let Some(Value::Array(raw)) = entry.get("k") else {
        return Err(ParseError::Mutation(
            "a log entry without a `k` path array".into(),
        ));
    };
    if raw.len() > MAX_PATH_SEGMENTS {
        return Err(ParseError::Mutation(format!(
            "a path of {} segments (more than {MAX_PATH_SEGMENTS})",
            raw.len()
        )));
    }
    raw.iter()
        .map(|segment| match segment {
            Value::String(key) => Ok(Segment::Key(key.clone())),
            number @ Value::Number(_) => index_of(number).map(Segment::Index).ok_or_else(|| {
                ParseError::Mutation(format!(
                    "a path segment {number} that is not an array index"
                ))
            }),
            other => Err(ParseError::Mutation(format!(
                "a path segment {other} that is neither a key nor an index"
            ))),
        })
        .collect()
}

fn index_of(value: &Value) -> Option<usize> {
    value.as_u64().and_then(|index| usize::try_from(index).ok())
}

/// `requests[3].modelState`, for messages.
fn show_path(path: &[Segment]) -> String {
    if path.is_empty() {
        return "the document root".into();
    }
    let mut shown = String::new();
    for segment in path {
        match segment {
            Segment::Index(index) => shown.push_str(&format!("[{index}]")),
            Segment::Key(key) => {
                if !shown.is_empty() {
                    shown.push('.');
                }
                shown.push_str(key);
            }
        }
    }
    shown
}

/// The value at `path`, which must exist all the way.
fn value_at_mut<'a>(
    document: &'a mut Value,
    path: &[Segment],
) -> Result<&'a mut Value, ParseError> {
    let mut current = document;
    for (depth, segment) in path.iter().enumerate() {
        let next = match current {
            Value::Object(fields) => fields.get_mut(&segment.as_key()),
            Value::Array(items) => segment.as_index().and_then(|index| items.get_mut(index)),
            _ => None,
        };
        current = next.ok_or_else(|| {
            ParseError::Mutation(format!(
                "the path {} does not exist",
                show_path(&path[..=depth])
            ))
        })?;
    }
    Ok(current)
}

/// Kind 1: replaces (or adds) the value at `path`; its parent must exist. An empty path
/// replaces the whole document (VS Code writes it when a key of the root changes).
fn set_at(document: &mut Value, path: &[Segment], value: Value) -> Result<(), ParseError> {
    let Some((last, parents)) = path.split_last() else {
        if !value.is_object() {
            return Err(ParseError::Mutation(
                "a set of the document root to a value that is not an object".into(),
            ));
        }
        *document = value;
        return Ok(());
    };
    match value_at_mut(document, parents)? {
        Value::Object(fields) => {
            fields.insert(last.as_key(), value);
            Ok(())
        }
        Value::Array(items) => match last.as_index() {
            Some(index) if index < items.len() => {
                items[index] = value;
                Ok(())
            }
            Some(index) if index == items.len() => {
                items.push(value);
                Ok(())
            }
            _ => Err(ParseError::Mutation(format!(
                "the path {} does not exist",
                show_path(path)
            ))),
        },
        _ => Err(ParseError::Mutation(format!(
            "a set at {} inside a value that is neither an object nor an array",
            show_path(path)
        ))),
    }
}

/// Kind 3 (and a set without a value): removes the value at `path`. Deleting a key that is
/// already absent changes nothing; an array element becomes `null`, as JavaScript's
/// `undefined` is written.
fn delete_at(document: &mut Value, path: &[Segment]) -> Result<(), ParseError> {
    let Some((last, parents)) = path.split_last() else {
        return Err(ParseError::Mutation("a delete of the document root".into()));
    };
    match value_at_mut(document, parents)? {
        Value::Object(fields) => {
            fields.remove(&last.as_key());
            Ok(())
        }
        Value::Array(items) => {
            if let Some(item) = last.as_index().and_then(|index| items.get_mut(index)) {
                *item = Value::Null;
            }
            Ok(())
        }
        _ => Err(ParseError::Mutation(format!(
            "a delete at {} inside a value that is neither an object nor an array",
            show_path(path)
        ))),
    }
}

/// Kind 2: truncates the array at `path` to `truncate_to` elements (when given), then
/// appends `items`. A missing or null array in an object starts empty, as in VS Code.
fn push_at(
    document: &mut Value,
    path: &[Segment],
    truncate_to: Option<usize>,
    items: Vec<Value>,
) -> Result<(), ParseError> {
    let Some((last, parents)) = path.split_last() else {
        return Err(ParseError::Mutation(
            "a push onto the document root, which is not an array".into(),
        ));
    };
    let target = match value_at_mut(document, parents)? {
        Value::Object(fields) => {
            let key = last.as_key();
            let absent = fields.get(&key).is_none_or(Value::is_null);
            // Checked before the field is created: a refused entry leaves the document as it was.
            if absent && truncate_to.is_some_and(|length| length > 0) {
                return Err(ParseError::Mutation(format!(
                    "a push at {} truncating an absent array",
                    show_path(path)
                )));
            }
            let slot = fields.entry(key).or_insert(Value::Null);
            if slot.is_null() {
                *slot = Value::Array(Vec::new());
            }
            slot
        }
        Value::Array(parent) => last
            .as_index()
            .and_then(|index| parent.get_mut(index))
            .ok_or_else(|| {
                ParseError::Mutation(format!("the path {} does not exist", show_path(path)))
            })?,
        _ => {
            return Err(ParseError::Mutation(format!(
                "a push at {} inside a value that is neither an object nor an array",
                show_path(path)
            )))
        }
    };
    let Value::Array(array) = target else {
        return Err(ParseError::Mutation(format!(
            "a push at {}, which is not an array",
            show_path(path)
        )));
    };
    if let Some(length) = truncate_to {
        if length > array.len() {
            return Err(ParseError::Mutation(format!(
                "a push at {} truncating to {length} an array of {}",
                show_path(path),
                array.len()
            )));
        }
        array.truncate(length);
    }
    array.extend(items);
    Ok(())
}

/// The one mapping both formats share: a session document → the chat's turns.
fn session_snapshot(
    session: &Value,
    fallback_chat_id: &str,
    workspace: Option<&str>,
) -> ChatSnapshot {
    let chat_id = session
        .get("sessionId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .unwrap_or(fallback_chat_id)
        .to_string();
    let turns = session
        .get("requests")
        .and_then(Value::as_array)
        .map(|requests| {
            requests
                .iter()
                .enumerate()
                .filter(|(_, request)| request.is_object())
                .map(|(position, request)| request_turn(position, request))
                .collect()
        })
        .unwrap_or_default();
    // The session's own time, for a chat with no request yet: VS Code writes the empty
    // session (`creationDate`) before the first request, and `.json` files keep the last
    // message's time too.
    let updated_ms = ["lastMessageDate", "creationDate"]
        .iter()
        .filter_map(|key| session.get(*key).and_then(epoch_ms))
        .max();
    ChatSnapshot {
        chat_id,
        workspace: workspace.map(str::to_string),
        turns,
        updated_ms,
    }
}

/// `ResponseModelState` in VS Code's `chatService.ts`.
const MODEL_PENDING: u64 = 0;
const MODEL_COMPLETE: u64 = 1;
const MODEL_CANCELLED: u64 = 2;
const MODEL_FAILED: u64 = 3;
const MODEL_NEEDS_INPUT: u64 = 4;

/// One request (a prompt and its response) → one turn: the one rule for a request's prompt,
/// reply and state, shared with the conversation reader (`conversation::stores::copilot`).
/// `position` names a request without a `requestId`.
pub fn request_turn(position: usize, request: &Value) -> TurnSnapshot {
    let id = request
        .get("requestId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("request-{position}"));
    // `message` is `{text, parts}`; some older files keep the prompt as a plain string.
    let prompt = match request.get("message") {
        Some(Value::String(text)) => Some(text.clone()),
        Some(message) => message
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_string),
        None => None,
    };
    let parts: &[Value] = request
        .get("response")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let reply = reply_text(parts);
    // `modelState` is `{value, completedAt?}`; tolerate a bare number.
    let model_state = request.get("modelState");
    let model_value = model_state
        .and_then(|state| state.get("value").or(Some(state)))
        .and_then(Value::as_u64);
    let completed_at = model_state
        .and_then(|state| state.get("completedAt"))
        .and_then(epoch_ms);
    let ts_ms = completed_at.or_else(|| request.get("timestamp").and_then(epoch_ms));
    let answering = !reply.is_empty() || parts.iter().any(shows_progress);
    let in_progress = if answering {
        TurnState::Replying
    } else {
        TurnState::Waiting
    };
    let state = match model_value {
        Some(MODEL_PENDING) => in_progress,
        Some(MODEL_COMPLETE) => TurnState::Completed,
        Some(MODEL_CANCELLED) => TurnState::Cancelled,
        Some(MODEL_FAILED) => TurnState::Failed(failure_reason(request)),
        Some(MODEL_NEEDS_INPUT) => TurnState::NeedsInput(pending_input_kind(parts)),
        // Older files have no modelState (and a newer value is unknown here): read the
        // state from the fields that predate it.
        _ => {
            let result = request.get("result").filter(|result| !result.is_null());
            if request.get("isCanceled").and_then(Value::as_bool) == Some(true) {
                TurnState::Cancelled
            } else if result
                .and_then(|result| result.get("errorDetails"))
                .is_some_and(|details| !details.is_null())
            {
                TurnState::Failed(failure_reason(request))
            } else if result.is_some() {
                TurnState::Completed
            } else {
                in_progress
            }
        }
    };
    TurnSnapshot {
        id,
        prompt,
        reply,
        state,
        ts_ms,
    }
}

/// The markdown text of a response part: a plain MarkdownString `{value}` (how the log
/// writes `markdownContent`), or `{kind:"markdownContent"|"markdownVuln", content:{value}}`.
/// `None` for every other part (the one rule for what the reply is made of, shared with the
/// conversation reader).
pub fn markdown_of(part: &Value) -> Option<&str> {
    match part.get("kind") {
        None | Some(Value::Null) => part.get("value").and_then(Value::as_str),
        Some(Value::String(kind)) if kind == "markdownContent" || kind == "markdownVuln" => {
            let content = part.get("content").or_else(|| part.get("value"))?;
            content
                .as_str()
                .or_else(|| content.get("value").and_then(Value::as_str))
        }
        _ => None,
    }
}

/// The reply: the markdown parts in order. VS Code merges streamed markdown into one part,
/// so markdown parts separated by other parts (a tool call) are separate paragraphs.
fn reply_text(parts: &[Value]) -> String {
    let mut reply = String::new();
    let mut separated = false;
    for part in parts {
        match markdown_of(part) {
            Some(text) => {
                if separated && !reply.is_empty() && !text.is_empty() {
                    reply.push_str("\n\n");
                }
                reply.push_str(text);
                separated = false;
            }
            None => separated = true,
        }
    }
    reply
}

/// Whether a part shows the agent at work: any part but an empty markdown string.
fn shows_progress(part: &Value) -> bool {
    match markdown_of(part) {
        Some(text) => !text.is_empty(),
        None => part.get("kind").and_then(Value::as_str).is_some(),
    }
}

/// What a turn in state NeedsInput waits for: the latest part still waiting for the user.
fn pending_input_kind(parts: &[Value]) -> NeedsInputKind {
    let is_true = |part: &Value, key: &str| part.get(key).and_then(Value::as_bool) == Some(true);
    for part in parts.iter().rev() {
        let kind = part.get("kind").and_then(Value::as_str).unwrap_or("");
        let pending = match kind {
            // Undecided (`isConfirmed` not yet written) and not complete.
            "toolInvocationSerialized" => {
                part.get("isConfirmed").is_none_or(Value::is_null) && !is_true(part, "isComplete")
            }
            "confirmation" | "questionCarousel" => !is_true(part, "isUsed"),
            "elicitationSerialized" => !matches!(
                part.get("state").and_then(Value::as_str),
                Some("accepted" | "rejected")
            ),
            _ => false,
        };
        if pending {
            return match kind {
                "toolInvocationSerialized" | "confirmation" => NeedsInputKind::ToolApproval,
                _ => NeedsInputKind::Question,
            };
        }
    }
    NeedsInputKind::Other
}

fn failure_reason(request: &Value) -> String {
    request
        .get("result")
        .and_then(|result| result.get("errorDetails"))
        .and_then(|details| details.get("message"))
        .and_then(Value::as_str)
        .filter(|message| !message.trim().is_empty())
        .unwrap_or("request failed")
        .to_string()
}

/// A timestamp in ms since the epoch (JavaScript writes `Date.now()`, an integer; accept a
/// non-negative finite float too).
fn epoch_ms(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < u64::MAX as f64)
            .map(|ms| ms as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;
    use crate::observe::snapshot::SnapshotDiffer;
    use koru_protocol::ObservedKind;

    /// A `.json` session (Format A) with one request in each state, unknown fields and an
    /// unknown part kind.
    const SESSION_JSON: &str = r#"{
      "version": 3,
      "sessionId": "3b7e1f1b-0000-4000-8000-000000000001",
      "creationDate": 1763727100000,
      "lastMessageDate": 1763727190000,
      "initialLocation": "panel",
      "requesterUsername": "u",
      "responderUsername": "GitHub Copilot",
      "someFutureField": {"x": 1},
      "requests": [
        {"requestId": "request_1", "timestamp": 1763727101000,
         "message": {"text": "explain main.rs", "parts": []},
         "modelId": "copilot/gpt-5", "agent": {"id": "github.copilot.editsAgent"},
         "response": [
           {"value": "`main.rs` parses args", "supportThemeIcons": false},
           {"kind": "toolInvocationSerialized", "toolId": "read_file", "toolCallId": "t1",
            "invocationMessage": "Reading", "isConfirmed": {"type": 1}, "isComplete": true},
           {"kind": "markdownContent", "content": {"value": "and runs."}},
           {"kind": "brandNewPart", "value": "not reply text"}
         ],
         "result": {"timings": {"firstProgress": 900, "totalElapsed": 8000}, "metadata": {}},
         "modelState": {"value": 1, "completedAt": 1763727109000},
         "followups": [], "isCanceled": false, "contentReferences": []},
        {"requestId": "request_2", "timestamp": 1763727110000,
         "message": {"text": "now refactor it", "parts": []},
         "response": [{"value": "Sure, first"}],
         "modelState": {"value": 2, "completedAt": 1763727112000}},
        {"requestId": "request_3", "timestamp": 1763727120000,
         "message": {"text": "try again", "parts": []},
         "response": [],
         "result": {"errorDetails": {"message": "Rate limit exceeded", "responseIsFiltered": false}},
         "modelState": {"value": 3, "completedAt": 1763727121000}},
        {"requestId": "request_4", "timestamp": 1763727130000,
         "message": {"text": "run the tests", "parts": []},
         "response": [
           {"value": "Running the tests."},
           {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolCallId": "t2",
            "invocationMessage": {"value": "Run `cargo test`"}, "isComplete": false}
         ],
         "modelState": {"value": 4}},
        {"requestId": "request_5", "timestamp": 1763727140000,
         "message": {"text": "set up CI", "parts": []},
         "response": [
           {"kind": "questionCarousel", "questions": [{"id": "q1", "title": "Which provider?"}],
            "allowSkip": true}
         ],
         "modelState": {"value": 4}},
        {"requestId": "request_6", "timestamp": 1763727150000,
         "message": {"text": "find the bug", "parts": []},
         "response": [{"kind": "progressMessage", "content": {"value": "Searching…"}}],
         "modelState": {"value": 0}},
        {"timestamp": 1763727160000,
         "message": {"text": "and this?", "parts": []},
         "response": [],
         "modelState": {"value": 0}}
      ]
    }"#;

    fn states(snapshot: &ChatSnapshot) -> Vec<(String, TurnState)> {
        snapshot
            .turns
            .iter()
            .map(|turn| (turn.id.clone(), turn.state.clone()))
            .collect()
    }

    #[test]
    fn a_session_file_maps_each_request_to_a_turn_in_its_state() {
        let snapshot =
            parse_session_json(SESSION_JSON.as_bytes(), "file-stem", Some("/home/u/proj")).unwrap();
        assert_eq!(snapshot.chat_id, "3b7e1f1b-0000-4000-8000-000000000001");
        assert_eq!(snapshot.workspace.as_deref(), Some("/home/u/proj"));
        assert_eq!(
            states(&snapshot),
            [
                ("request_1".to_string(), TurnState::Completed),
                ("request_2".to_string(), TurnState::Cancelled),
                (
                    "request_3".to_string(),
                    TurnState::Failed("Rate limit exceeded".into())
                ),
                (
                    "request_4".to_string(),
                    TurnState::NeedsInput(NeedsInputKind::ToolApproval)
                ),
                (
                    "request_5".to_string(),
                    TurnState::NeedsInput(NeedsInputKind::Question)
                ),
                ("request_6".to_string(), TurnState::Replying),
                ("request-6".to_string(), TurnState::Waiting),
            ]
        );
        let first = &snapshot.turns[0];
        assert_eq!(first.prompt.as_deref(), Some("explain main.rs"));
        assert_eq!(first.reply, "`main.rs` parses args\n\nand runs.");
        assert_eq!(first.ts_ms, Some(1_763_727_109_000), "completedAt");
        assert_eq!(
            snapshot.turns[6].ts_ms,
            Some(1_763_727_160_000),
            "timestamp"
        );
        assert_eq!(snapshot.turns[5].reply, "", "progress is not reply text");

        let mut differ = SnapshotDiffer::new();
        assert_eq!(
            kinds(&differ.update(&snapshot)),
            [
                "chat_seen",
                "prompt_seen",
                "reply_started",
                "reply_completed",
                "prompt_seen",
                "reply_started",
                "cancelled",
                "prompt_seen",
                "failed",
                "prompt_seen",
                "reply_started",
                "needs_input",
                "prompt_seen",
                "reply_started",
                "needs_input",
                "prompt_seen",
                "reply_started",
                "prompt_seen",
            ]
        );
    }

    #[test]
    fn older_files_without_model_state_read_the_legacy_fields() {
        let legacy = r#"{"version": 2, "requests": [
          {"requestId": "a", "message": {"text": "one"}, "response": [{"value": "done"}],
           "result": {"metadata": {}}},
          {"requestId": "b", "message": {"text": "two"}, "response": [{"value": "half"}],
           "isCanceled": true},
          {"requestId": "c", "message": "three as a string", "response": [],
           "result": {"errorDetails": {"code": "x"}}},
          {"requestId": "d", "message": {"text": "four"}, "response": [{"value": "stream"}]},
          {"requestId": "e", "message": {"text": "five"}, "response": [], "result": null},
          {"requestId": "f", "message": {"text": "six"}, "modelState": {"value": 99},
           "result": {}}
        ]}"#;
        let snapshot = parse_session_json(legacy.as_bytes(), "stem", None).unwrap();
        assert_eq!(snapshot.chat_id, "stem", "no sessionId: the fallback");
        assert_eq!(
            states(&snapshot),
            [
                ("a".to_string(), TurnState::Completed),
                ("b".to_string(), TurnState::Cancelled),
                ("c".to_string(), TurnState::Failed("request failed".into())),
                ("d".to_string(), TurnState::Replying),
                ("e".to_string(), TurnState::Waiting),
                ("f".to_string(), TurnState::Completed),
            ]
        );
        assert_eq!(
            snapshot.turns[2].prompt.as_deref(),
            Some("three as a string")
        );
    }

    #[test]
    fn bytes_that_are_not_a_session_are_rejected_with_a_reason() {
        let half_written = &SESSION_JSON.as_bytes()[..SESSION_JSON.len() / 2];
        let reject = |bytes: &[u8]| parse_session_json(bytes, "f", None).unwrap_err();
        assert!(
            matches!(reject(half_written), ParseError::NotJson(message) if message.starts_with("not JSON"))
        );
        assert!(
            matches!(reject(b""), ParseError::NotJson(message) if message.starts_with("not JSON"))
        );
        assert_eq!(
            reject(b"[1, 2]"),
            ParseError::Shape("a session file that is not a JSON object".into())
        );
        assert!(reject(br#"{"version": 3, "requests": {}}"#)
            .message()
            .contains("`requests` array"));
        assert!(parse_session_json(b"\xEF\xBB\xBF{\"requests\": []}", "f", None).is_ok());
    }

    /// Applies `line` and returns the events the differ reports for the resulting snapshot.
    fn step(log: &mut MutationLog, differ: &mut SnapshotDiffer, line: &str) -> Vec<String> {
        step_batch(log, differ, &[line])
    }

    /// Applies the lines of one write (VS Code appends all of a change's entries at once;
    /// the watcher snapshots after each read) and returns the differ's events.
    fn step_batch(
        log: &mut MutationLog,
        differ: &mut SnapshotDiffer,
        lines: &[&str],
    ) -> Vec<String> {
        for line in lines {
            log.apply_line(line.as_bytes()).unwrap();
        }
        let snapshot = log.snapshot("stem", Some("/w")).unwrap();
        kinds(&differ.update(&snapshot))
    }

    const LOG_SNAPSHOT: &str = r#"{"kind":0,"v":{"version":3,"sessionId":"3b7e1f1b-0000-4000-8000-000000000002","creationDate":1763727100000,"initialLocation":"panel","responderUsername":"GitHub Copilot","requests":[],"inputState":{"inputText":""}}}"#;
    const LOG_PUSH_REQUEST: &str = r#"{"kind":2,"k":["requests"],"v":[{"requestId":"request_1","timestamp":1763727101000,"message":{"text":"run the tests","parts":[]},"modelId":"copilot/gpt-5","response":[],"modelState":{"value":0}}]}"#;

    #[test]
    fn a_growing_log_reports_each_step_of_the_turn_in_order() {
        let mut log = MutationLog::new();
        let mut differ = SnapshotDiffer::new();
        assert!(
            log.snapshot("stem", None).is_none(),
            "nothing before kind 0"
        );
        assert_eq!(step(&mut log, &mut differ, LOG_SNAPSHOT), ["chat_seen"]);
        assert_eq!(
            step(&mut log, &mut differ, LOG_PUSH_REQUEST),
            ["prompt_seen"]
        );
        assert!(step(
            &mut log,
            &mut differ,
            r#"{"kind":1,"k":["inputState","inputText"],"v":"unrelated typing"}"#
        )
        .is_empty());
        assert_eq!(
            step(
                &mut log,
                &mut differ,
                r#"{"kind":2,"k":["requests",0,"response"],"v":[{"value":"Running"}]}"#
            ),
            ["reply_started"]
        );
        // Streaming: VS Code rewrites the changed tail of the parts with a truncate index.
        assert!(step(
            &mut log,
            &mut differ,
            r#"{"kind":2,"k":["requests",0,"response"],"v":[{"value":"Running the tests."},{"kind":"toolInvocationSerialized","toolId":"run_in_terminal","toolCallId":"t1","invocationMessage":"Run cargo test","isComplete":false}],"i":0}"#
        )
        .is_empty());
        assert_eq!(
            step(
                &mut log,
                &mut differ,
                r#"{"kind":1,"k":["requests",0,"modelState"],"v":{"value":4}}"#
            ),
            ["needs_input"]
        );
        let snapshot = log.snapshot("stem", None).unwrap();
        assert_eq!(
            snapshot.turns[0].state,
            TurnState::NeedsInput(NeedsInputKind::ToolApproval)
        );
        // Approved: the tool part and the state change in one write.
        assert!(step_batch(
            &mut log,
            &mut differ,
            &[
                r#"{"kind":2,"k":["requests",0,"response"],"v":[{"kind":"toolInvocationSerialized","toolId":"run_in_terminal","toolCallId":"t1","invocationMessage":"Run cargo test","isConfirmed":{"type":1},"isComplete":true},{"value":"All 12 tests pass."}],"i":1}"#,
                r#"{"kind":1,"k":["requests",0,"modelState"],"v":{"value":0}}"#
            ]
        )
        .is_empty());
        assert_eq!(
            step(
                &mut log,
                &mut differ,
                r#"{"kind":1,"k":["requests",0,"modelState"],"v":{"value":1,"completedAt":1763727109000}}"#
            ),
            ["reply_completed"]
        );
        let snapshot = log.snapshot("stem", None).unwrap();
        assert_eq!(snapshot.chat_id, "3b7e1f1b-0000-4000-8000-000000000002");
        assert_eq!(
            snapshot.turns[0].reply,
            "Running the tests.\n\nAll 12 tests pass."
        );
        assert_eq!(snapshot.turns[0].ts_ms, Some(1_763_727_109_000));
        let events = differ.update(&snapshot);
        assert!(events.is_empty(), "no change, no news");
    }

    #[test]
    fn a_session_with_no_request_yet_is_dated_by_its_own_creation_date() {
        // VS Code 1.139 writes the empty session as the first line before any request
        // (tests/corpus/copilot): a reader that sees only that line must date the chat
        // by the store, not by when it read it.
        let mut log = MutationLog::new();
        log.apply_line(LOG_SNAPSHOT.as_bytes()).unwrap();
        let snapshot = log.snapshot("stem", None).unwrap();
        assert!(snapshot.turns.is_empty());
        assert_eq!(snapshot.updated_ms, Some(1_763_727_100_000));
        let mut differ = SnapshotDiffer::new();
        let events = differ.update(&snapshot);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event, ObservedKind::ChatSeen);
        assert_eq!(events[0].store_ts_ms, Some(1_763_727_100_000));
        // A `.json` session is dated by its last message.
        let whole = parse_session_json(SESSION_JSON.as_bytes(), "f", None).unwrap();
        assert_eq!(whole.updated_ms, Some(1_763_727_190_000));
    }

    #[test]
    fn the_real_vs_code_1_139_log_replays_to_its_final_state() {
        // A whole session written by VS Code 1.139 (code-server 4.139.1) in the e2e suite.
        let bytes: &[u8] = include_bytes!(
            "../../../../tests/corpus/copilot/8b0378ec-9689-4fed-a671-2a9baeff8d26.jsonl"
        );
        let lines: Vec<&[u8]> = bytes
            .split(|byte| *byte == b'\n')
            .filter(|line| !line.is_empty())
            .collect();
        assert_eq!(lines.len(), 23);
        let mut log = MutationLog::new();
        let mut states_after = Vec::new();
        for line in &lines {
            log.apply_line(line).unwrap();
            states_after.push(log.snapshot("stem", None).unwrap());
        }
        // The confirmation request is pushed waiting for the user (line 11)…
        assert_eq!(
            states_after[10].turns[3].state,
            TurnState::NeedsInput(NeedsInputKind::ToolApproval)
        );
        // …and the slow request's batch marks it complete (line 8) before it pushes its
        // markdown (line 10): only the whole batch has the reply.
        assert_eq!(states_after[7].turns[1].state, TurnState::Completed);
        assert_eq!(states_after[7].turns[1].reply, "");
        assert_eq!(
            states_after[9].turns[1].reply,
            "koru-e2e recorder: received"
        );
        let last = states_after.last().unwrap();
        assert_eq!(last.chat_id, "8b0378ec-9689-4fed-a671-2a9baeff8d26");
        assert_eq!(last.turns.len(), 55);
        assert!(last
            .turns
            .iter()
            .all(|turn| turn.state == TurnState::Completed));
        assert_eq!(
            last.turns[3].reply, "",
            "the confirmation wrote no markdown"
        );
        assert_eq!(last.turns[54].prompt.as_deref(), Some("with evidence 49 ✓"));
        assert_eq!(last.turns[54].ts_ms, Some(1_795_603_378_635));
    }

    #[test]
    fn a_compacted_log_replaces_the_document_without_repeating_old_news() {
        let mut log = MutationLog::new();
        let mut differ = SnapshotDiffer::new();
        step(&mut log, &mut differ, LOG_SNAPSHOT);
        step(&mut log, &mut differ, LOG_PUSH_REQUEST);
        step(
            &mut log,
            &mut differ,
            r#"{"kind":2,"k":["requests",0,"response"],"v":[{"value":"Done."}]}"#,
        );
        let done = step(
            &mut log,
            &mut differ,
            r#"{"kind":1,"k":["requests",0,"modelState"],"v":{"value":1,"completedAt":1763727109000}}"#,
        );
        assert_eq!(done, ["reply_completed"]);
        // VS Code rewrote the file with one kind-0 line; the caller either resets and
        // replays, or keeps feeding: both end with the new document.
        let compacted = r#"{"kind":0,"v":{"version":3,"sessionId":"3b7e1f1b-0000-4000-8000-000000000002","requests":[{"requestId":"request_1","timestamp":1763727101000,"message":{"text":"run the tests","parts":[]},"response":[{"value":"Done."}],"modelState":{"value":1,"completedAt":1763727109000}},{"requestId":"request_2","timestamp":1763727200000,"message":{"text":"and lint","parts":[]},"response":[],"modelState":{"value":0}}]}}"#;
        assert_eq!(step(&mut log, &mut differ, compacted), ["prompt_seen"]);
        log.reset();
        assert!(log.snapshot("stem", None).is_none());
        assert_eq!(
            step(&mut log, &mut differ, compacted),
            Vec::<String>::new(),
            "a replay after reset reports nothing already seen"
        );
        assert_eq!(log.snapshot("stem", None).unwrap().turns.len(), 2);
    }

    #[test]
    fn truncating_pushes_and_deletes_edit_the_document() {
        let mut log = MutationLog::new();
        log.apply_line(LOG_SNAPSHOT.as_bytes()).unwrap();
        log.apply_line(LOG_PUSH_REQUEST.as_bytes()).unwrap();
        log.apply_line(
            br#"{"kind":2,"k":["requests"],"v":[{"requestId":"request_2","message":{"text":"second"}}]}"#,
        )
        .unwrap();
        let ids = |log: &MutationLog| -> Vec<String> {
            let snapshot = log.snapshot("stem", None).unwrap();
            snapshot.turns.into_iter().map(|turn| turn.id).collect()
        };
        assert_eq!(ids(&log), ["request_1", "request_2"]);
        // A request removed (VS Code's "undo request"): truncate without new items.
        log.apply_line(br#"{"kind":2,"k":["requests"],"i":1}"#)
            .unwrap();
        assert_eq!(ids(&log), ["request_1"]);
        // A replaced request (key changed at index 0): truncate and push.
        log.apply_line(
            br#"{"kind":2,"k":["requests"],"v":[{"requestId":"request_9","message":{"text":"again"}}],"i":0}"#,
        )
        .unwrap();
        assert_eq!(ids(&log), ["request_9"]);
        // Push onto an absent array starts it.
        log.apply_line(br#"{"kind":2,"k":["requests",0,"response"],"v":[{"value":"ok"}]}"#)
            .unwrap();
        assert_eq!(log.snapshot("s", None).unwrap().turns[0].reply, "ok");
        // Delete (kind 3), and a set whose undefined value left no `v`.
        log.apply_line(
            br#"{"kind":1,"k":["requests",0,"result"],"v":{"errorDetails":{"message":"boom"}}}"#,
        )
        .unwrap();
        assert_eq!(
            log.snapshot("s", None).unwrap().turns[0].state,
            TurnState::Failed("boom".into())
        );
        log.apply_line(br#"{"kind":3,"k":["requests",0,"result"]}"#)
            .unwrap();
        assert_eq!(
            log.snapshot("s", None).unwrap().turns[0].state,
            TurnState::Replying
        );
        log.apply_line(br#"{"kind":1,"k":["customTitle"],"v":"Tests"}"#)
            .unwrap();
        log.apply_line(br#"{"kind":1,"k":["customTitle"]}"#)
            .unwrap();
        assert!(log.document.as_ref().unwrap().get("customTitle").is_none());
        log.apply_line(br#"{"kind":3,"k":["notThere"]}"#).unwrap();
    }

    #[test]
    fn bad_lines_are_rejected_and_leave_the_document_unchanged() {
        let mut log = MutationLog::new();
        assert!(log
            .apply_line(br#"{"kind":1,"k":["requests"],"v":[]}"#)
            .unwrap_err()
            .message()
            .contains("before the log's snapshot entry"));
        log.apply_line(LOG_SNAPSHOT.as_bytes()).unwrap();
        log.apply_line(LOG_PUSH_REQUEST.as_bytes()).unwrap();
        let before = log.document.clone();
        let cases: &[(&str, &str)] = &[
            ("{\"kind\":1,", "not JSON"),
            ("[0]", "not a JSON object"),
            (r#"{"k":["requests"]}"#, "without a `kind`"),
            (r#"{"kind":7,"k":["requests"]}"#, "kind 7 is not"),
            (r#"{"kind":"set","k":["requests"]}"#, "is not 0, 1, 2 or 3"),
            (r#"{"kind":0,"v":[1]}"#, "`v` is not an object"),
            (r#"{"kind":0}"#, "without `v`"),
            (r#"{"kind":1,"v":1}"#, "without a `k` path"),
            (
                r#"{"kind":1,"k":["requests",5,"modelState"],"v":{"value":1}}"#,
                "the path requests[5] does not exist",
            ),
            (
                r#"{"kind":1,"k":["requests",0,"message","text","x"],"v":1}"#,
                "neither an object nor an array",
            ),
            (
                r#"{"kind":1,"k":["requests",true],"v":1}"#,
                "neither a key nor an index",
            ),
            (
                r#"{"kind":1,"k":["requests",-1],"v":1}"#,
                "not an array index",
            ),
            (r#"{"kind":1,"k":[],"v":"root"}"#, "not an object"),
            (
                r#"{"kind":2,"k":["sessionId"],"v":[1]}"#,
                "which is not an array",
            ),
            (
                r#"{"kind":2,"k":["requests"],"v":{"a":1}}"#,
                "`v` is not an array",
            ),
            (
                r#"{"kind":2,"k":["requests"],"v":[],"i":5}"#,
                "truncating to 5",
            ),
            (
                r#"{"kind":2,"k":["requests"],"v":[],"i":-2}"#,
                "not an index",
            ),
            (r#"{"kind":2,"k":[],"v":[]}"#, "document root"),
            (r#"{"kind":3,"k":[]}"#, "delete of the document root"),
        ];
        for (line, expected) in cases {
            let error = log.apply_line(line.as_bytes()).unwrap_err();
            assert!(
                error.message().contains(expected),
                "{line}: {error:?} should contain {expected:?}"
            );
            assert_eq!(log.document, before, "{line} changed the document");
        }
        let deep = format!(
            r#"{{"kind":1,"k":[{}],"v":1}}"#,
            vec!["\"a\""; MAX_PATH_SEGMENTS + 1].join(",")
        );
        assert!(log
            .apply_line(deep.as_bytes())
            .unwrap_err()
            .message()
            .contains("segments"));
    }

    #[test]
    fn workspace_json_names_a_folder_or_a_workspace_file() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"folder":"file:///home/u/proj"}"#, Some("/home/u/proj")),
            (
                r#"{"folder":"file:///home/u/my%20proj%23%E2%9C%93"}"#,
                Some("/home/u/my proj#✓"),
            ),
            (
                r#"{"workspace":"file:///home/u/all.code-workspace"}"#,
                Some("/home/u/all.code-workspace"),
            ),
            (
                r#"{"folder":"file:///c%3A/Users/u/proj"}"#,
                Some("c:/Users/u/proj"),
            ),
            (
                r#"{"folder":"file://server/share/proj"}"#,
                Some("//server/share/proj"),
            ),
            (
                r#"{"folder":"vscode-remote://ssh-remote%2Bbox/home/u/proj"}"#,
                Some("vscode-remote://ssh-remote%2Bbox/home/u/proj"),
            ),
            // A malformed file URI names no workspace (never a wrong path).
            (r#"{"folder":"file:///tmp/100%zz"}"#, None),
            (r#"{"folder":""}"#, None),
            (r#"{"configuration":"x"}"#, None),
            (r#"{"folder":3}"#, None),
            ("not json", None),
        ];
        for (json, expected) in cases {
            assert_eq!(
                workspace_from_json(json.as_bytes()).as_deref(),
                *expected,
                "{json}"
            );
        }
    }

    #[test]
    fn needs_input_names_what_the_turn_waits_for() {
        let kind_of = |parts: &str| {
            pending_input_kind(
                serde_json::from_str::<Vec<Value>>(parts)
                    .unwrap()
                    .as_slice(),
            )
        };
        assert_eq!(
            kind_of(r#"[{"kind":"confirmation","title":"Continue?","buttons":["Yes","No"]}]"#),
            NeedsInputKind::ToolApproval
        );
        assert_eq!(
            kind_of(
                r#"[{"kind":"confirmation","isUsed":true},{"kind":"elicitationSerialized","state":"pending"}]"#
            ),
            NeedsInputKind::Question
        );
        assert_eq!(
            kind_of(
                r#"[{"kind":"elicitationSerialized","state":"accepted"},{"kind":"toolInvocationSerialized","isConfirmed":true,"isComplete":false}]"#
            ),
            NeedsInputKind::Other
        );
        assert_eq!(kind_of("[]"), NeedsInputKind::Other);
    }

    #[test]
    fn a_failed_turn_carries_the_stores_reason() {
        let snapshot = parse_session_json(SESSION_JSON.as_bytes(), "f", None).unwrap();
        let mut differ = SnapshotDiffer::new();
        let events = differ.update(&snapshot);
        let failed = events
            .iter()
            .find(|event| matches!(event.event, ObservedKind::Failed { .. }))
            .unwrap();
        assert_eq!(
            failed.event,
            ObservedKind::Failed {
                reason: "Rate limit exceeded".into()
            }
        );
        assert_eq!(failed.store_ts_ms, Some(1_763_727_121_000));
    }
}

#[cfg(test)]
mod fuzz {
    //! The readers never panic, whatever the bytes or the entries.
    use super::*;
    use proptest::prelude::*;

    /// Keys a session document really uses, so random documents reach the mapping.
    const KEYS: &[&str] = &[
        "requests",
        "response",
        "modelState",
        "value",
        "kind",
        "message",
        "text",
        "result",
        "errorDetails",
        "isCanceled",
        "completedAt",
        "timestamp",
        "requestId",
        "sessionId",
        "content",
        "isUsed",
        "isComplete",
        "isConfirmed",
        "state",
    ];

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(KEYS).prop_map(str::to_string),
            any::<String>()
        ]
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0u64..6).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            proptest::sample::select(
                &[
                    "markdownContent",
                    "toolInvocationSerialized",
                    "confirmation",
                    "questionCarousel",
                    "elicitationSerialized",
                    "pending",
                    "x"
                ][..]
            )
            .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map(key(), inner, 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    fn segment() -> impl Strategy<Value = Value> {
        prop_oneof![
            key().prop_map(Value::from),
            (0u64..4).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            Just(Value::Bool(true)),
            Just(Value::from(1.5)),
        ]
    }

    fn entry() -> impl Strategy<Value = Vec<u8>> {
        let structured = (
            0u64..5,
            proptest::collection::vec(segment(), 0..5),
            json(),
            proptest::option::of(json()),
        )
            .prop_map(|(kind, path, value, index)| {
                let mut entry = serde_json::json!({"kind": kind, "k": path, "v": value});
                if let Some(index) = index {
                    entry["i"] = index;
                }
                if kind == 0 && !entry["v"].is_object() {
                    entry["v"] = serde_json::json!({"requests": [value]});
                }
                entry.to_string().into_bytes()
            });
        prop_oneof![
            4 => structured,
            1 => proptest::collection::vec(any::<u8>(), 0..120),
        ]
    }

    proptest! {
        #[test]
        fn any_session_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_session_json(&bytes, "f", None);
            let _ = workspace_from_json(&bytes);
        }

        #[test]
        fn any_session_document_never_panics(document in json()) {
            let bytes = serde_json::json!({"requests": [document.clone()], "x": document}).to_string();
            let _ = parse_session_json(bytes.as_bytes(), "f", Some("/w"));
        }

        #[test]
        fn any_sequence_of_entries_never_panics(lines in proptest::collection::vec(entry(), 0..30)) {
            let mut log = MutationLog::new();
            for line in &lines {
                let before = log.document.clone();
                if log.apply_line(line).is_err() {
                    prop_assert_eq!(&log.document, &before);
                }
                let _ = log.snapshot("f", None);
            }
        }

        #[test]
        fn any_uri_never_panics(uri in any::<String>()) {
            let _ = workspace_from_json(serde_json::json!({"folder": uri}).to_string().as_bytes());
        }
    }
}

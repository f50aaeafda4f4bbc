//! Cline 4 SDK sessions (`~/.cline/data/sessions/<id>/<id>.json` manifest and `<id>.messages.json`): a pure reader from the two files' bytes to a `ChatSnapshot`.
//!
//! Format facts (cline/cline @21cb8d25, `sdk/packages/…`; docs/research/chat-store-formats.md
//! §5 "Version breaks"):
//! - The manifest (`core/src/session/models/session-manifest.ts`) is
//!   `{version:1, session_id, source, pid, started_at, ended_at?, exit_code?, status,
//!   interactive, provider, model, cwd, workspace_root, prompt?, metadata?, messages_path?, …}`,
//!   rewritten whole with `writeFileSync` (not atomically), so a half-written manifest is an
//!   error the caller retries. `prompt` is the session's first prompt only.
//! - `status` (`shared/src/session/records.ts`) moves as the runtime host
//!   (`core/src/runtime/host/local-runtime-host.ts`) drives it: `running` while a turn runs;
//!   `pending` while a tool call waits for the user's approval (`markTurnPending` around
//!   `requestToolApproval`), back to `running` after; `idle` when an interactive session's
//!   turn is over, whatever its finish reason (`completeInteractiveTurn`), and for a session
//!   opened without a prompt; `completed` / `failed` / `cancelled` when the session ends
//!   (`ended_at` and `exit_code` are set then). A session whose process died is marked
//!   `failed` with `exit_code: 1` and `metadata.terminal_marker` (the reconciler's reason).
//! - The messages file (`core/src/services/session-data.ts`) is `{version:1, updated_at,
//!   agent, sessionId, origin, messages[], system_prompt?}` (a bare array is read too, as
//!   Cline's own reader does). It is rewritten after each assistant message and at the end
//!   of each model iteration, so a turn's prompt reaches it only with its first answer.
//! - A message (`shared/src/llms/messages.ts` `MessageWithMetadata`) is `{id?, role:
//!   "user"|"assistant", content: string | blocks, ts? (ms), metadata?, modelInfo?,
//!   metrics?}`; blocks are `text`, `thinking`, `redacted_thinking`, `image`, `file`,
//!   `media`, `tool_use {id, name, input}` and `tool_result {tool_use_id, name, content,
//!   is_error?}`. Tool results travel as `user` messages.
//! - Which user messages are prompts (`core/src/session/user-run-messages.ts`): a user
//!   message counts `metadata.userRunSpan` runs when set; otherwise compaction summaries
//!   (`metadata.kind` `compaction_summary`) count 1, runtime notices (`auto_compaction`,
//!   `completion_reminder`, …) and tool results count 0, as do `[TASK RESUMPTION]` texts.
//!   Prompt text is wrapped in `<user_input mode="…">…</user_input>` (or `<user_command
//!   slash="…">`) and may carry `<mode_notice>` elements (`shared/src/prompt/format.ts`).
//! - `ask_question` is a tool the model calls to ask the user; the answer is its result.
//!
//! Turn ids are the run's absolute number (`run-<n>`), counted the way Cline counts runs
//! (compaction summaries keep the count), so a turn keeps its id from the moment the
//! manifest's `prompt` shows it to the moment its messages are written, and after
//! compaction.

use koru_protocol::NeedsInputKind;
use serde_json::{Map, Value};

use crate::observe::snapshot::{ChatSnapshot, TurnSnapshot, TurnState};
use crate::observe::text::parse_ts;
use crate::observe::ParseError;

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_cline_sessions";

/// The manifest's and the messages file's bytes (the messages file may not exist yet:
/// `None`) → snapshot. `Err` with a specific message for a manifest that is not complete
/// JSON / not a manifest, or a messages file that is not complete JSON (the caller retries
/// a half-written file).
pub fn parse_session(
    manifest: &[u8],
    messages: Option<&[u8]>,
    fallback_chat_id: &str,
) -> Result<ChatSnapshot, ParseError> {
    read_session(manifest, messages, fallback_chat_id).map(|session| session.snapshot)
}

/// A session read for its turns (`read_session`).
#[derive(Debug)]
pub struct SessionTurns {
    pub snapshot: ChatSnapshot,
    /// For each of `snapshot.turns`, the index in `messages` of the message that opened it
    /// (`None` for a turn only the manifest's `prompt` shows yet).
    pub starts: Vec<Option<usize>>,
    /// The messages file's `messages` (empty when it has none yet).
    pub messages: Vec<Value>,
}

/// `parse_session`, keeping where each turn starts and the messages: the one rule for where
/// turns begin, shared with the conversation reader (`conversation::stores::cline_sdk`).
pub fn read_session(
    manifest: &[u8],
    messages: Option<&[u8]>,
    fallback_chat_id: &str,
) -> Result<SessionTurns, ParseError> {
    let manifest = Manifest::read(manifest)?;
    let messages = match messages {
        // `writeFileSync` truncates before it writes: an empty file holds no messages yet.
        Some(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => read_messages(bytes)?,
        _ => MessagesFile::default(),
    };
    let mut turns = RunTurns::default();
    for (index, message) in messages.messages.iter().enumerate() {
        if let Some(message) = message.as_object() {
            turns.feed(index, message);
        }
    }
    let mut built = turns.finish();
    if built.is_empty() {
        if let Some(prompt) = manifest.prompt.as_deref().map(display_prompt) {
            if !prompt.is_empty() {
                built.push(TurnBuilder::new(1, Some(prompt)));
            }
        }
    }
    let count = built.len();
    let starts = built.iter().map(|builder| builder.start).collect();
    let turns = built
        .into_iter()
        .enumerate()
        .map(|(position, builder)| {
            if position + 1 == count {
                builder.into_last_turn(&manifest, messages.updated_at)
            } else {
                builder.into_earlier_turn()
            }
        })
        .collect();
    Ok(SessionTurns {
        snapshot: ChatSnapshot {
            chat_id: manifest
                .session_id
                .unwrap_or_else(|| fallback_chat_id.to_string()),
            workspace: manifest.cwd.or(manifest.workspace_root),
            turns,
            updated_ms: None,
        },
        starts,
        messages: messages.messages,
    })
}

/// The fields of the manifest this reader uses.
struct Manifest {
    session_id: Option<String>,
    status: String,
    prompt: Option<String>,
    cwd: Option<String>,
    workspace_root: Option<String>,
    started_at: Option<u64>,
    ended_at: Option<u64>,
    exit_code: Option<i64>,
    /// `metadata.terminal_marker`: why the reconciler failed a session whose process died.
    terminal_marker: Option<String>,
}

impl Manifest {
    fn read(bytes: &[u8]) -> Result<Self, ParseError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|error| {
            ParseError::NotJson(format!("session manifest is not complete JSON: {error}"))
        })?;
        let Value::Object(manifest) = value else {
            return Err(ParseError::Shape(
                "session manifest is not a JSON object".into(),
            ));
        };
        let Some(status) = manifest.get("status").and_then(Value::as_str) else {
            return Err(ParseError::Shape("session manifest has no status".into()));
        };
        let text = |key: &str| {
            manifest
                .get(key)
                .and_then(Value::as_str)
                .and_then(non_empty)
        };
        let terminal_marker = manifest
            .get("metadata")
            .and_then(|metadata| metadata.get("terminal_marker"))
            .and_then(Value::as_str)
            .and_then(non_empty);
        Ok(Manifest {
            session_id: text("session_id"),
            status: status.trim().to_ascii_lowercase(),
            prompt: text("prompt"),
            cwd: text("cwd"),
            workspace_root: text("workspace_root"),
            started_at: manifest.get("started_at").and_then(time_ms),
            ended_at: manifest.get("ended_at").and_then(time_ms),
            exit_code: manifest.get("exit_code").and_then(Value::as_i64),
            terminal_marker,
        })
    }

    /// Why a `failed` session failed, as far as the manifest says.
    fn failure_reason(&self) -> String {
        match (&self.terminal_marker, self.exit_code) {
            (Some(marker), _) => marker.clone(),
            (None, Some(code)) => format!("exit code {code}"),
            (None, None) => "failed".to_string(),
        }
    }
}

/// The messages file's fields this reader uses.
#[derive(Default)]
struct MessagesFile {
    updated_at: Option<u64>,
    messages: Vec<Value>,
}

fn read_messages(bytes: &[u8]) -> Result<MessagesFile, ParseError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ParseError::NotJson(format!(
            "session messages file is not complete JSON: {error}"
        ))
    })?;
    match value {
        Value::Array(messages) => Ok(MessagesFile {
            updated_at: None,
            messages,
        }),
        Value::Object(mut file) => {
            let Some(Value::Array(messages)) = file.remove("messages") else {
                return Err(ParseError::Shape(
                    "session messages file has no messages array".into(),
                ));
            };
            Ok(MessagesFile {
                updated_at: file.get("updated_at").and_then(time_ms),
                messages,
            })
        }
        _ => Err(ParseError::Shape(
            "session messages file is not a JSON object or array".into(),
        )),
    }
}

fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// A time written as ISO-8601 text or as milliseconds since the epoch.
fn time_ms(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => parse_ts(text.trim()),
        Value::Number(_) => value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < u64::MAX as f64)
                .map(|ms| ms as u64)
        }),
        _ => None,
    }
}

/// `metadata.kind` values of user-role messages the runtime writes itself.
const RUNTIME_NOTICE_KINDS: [&str; 7] = [
    "auto_compaction",
    "compaction_budget_emergency",
    "completion_reminder",
    "loop_detection_notice",
    "manual_compaction",
    "mistake_stop_notice",
    "recovery_notice",
];

/// Tools through which the model asks the user a question.
const QUESTION_TOOLS: [&str; 2] = ["ask_question", "ask_followup_question"];

/// Tools whose input carries the final answer (`attempt_completion` is the old name).
const COMPLETION_TOOLS: [&str; 2] = ["submit_and_exit", "attempt_completion"];

/// What a user message means for the turns.
enum UserMessage {
    /// `runs` user runs (prompts) end here; `prompt` is the visible text when the message
    /// is a prompt the user wrote (not a compaction summary).
    Runs { runs: u64, prompt: Option<String> },
    /// Tool results and runtime notices: not a prompt.
    Other,
}

/// Reads a user message the way Cline counts its runs.
fn read_user_message(message: &Map<String, Value>) -> UserMessage {
    let metadata = message.get("metadata").and_then(Value::as_object);
    let kind = metadata
        .and_then(|metadata| metadata.get("kind"))
        .and_then(Value::as_str);
    let stored_span = metadata
        .and_then(|metadata| metadata.get("userRunSpan"))
        .and_then(Value::as_u64);
    if matches!(kind, Some("compaction" | "compaction_summary")) {
        return UserMessage::Runs {
            runs: stored_span.unwrap_or(1),
            prompt: None,
        };
    }
    let content = UserContent::read(message.get("content"));
    let prompt = display_prompt(&content.text);
    let attachment_only = content.has_attachment && !content.has_tool_result;
    let runs = match stored_span {
        Some(span) => span,
        None if kind.is_some_and(|kind| RUNTIME_NOTICE_KINDS.contains(&kind)) => 0,
        None if prompt.is_empty() && !attachment_only => 0,
        None if is_continuation(&prompt) => 0,
        None => 1,
    };
    if runs == 0 {
        UserMessage::Other
    } else {
        UserMessage::Runs {
            runs,
            prompt: Some(prompt),
        }
    }
}

/// The prompts the runtime sends itself to carry a task on.
fn is_continuation(prompt: &str) -> bool {
    prompt.starts_with("[TASK RESUMPTION]")
        || prompt == "The user approved switching to act mode. Continue with the approved plan now."
}

/// The parts of a user message's content that decide whether it is a prompt.
#[derive(Default)]
struct UserContent {
    text: String,
    has_attachment: bool,
    has_tool_result: bool,
    /// The tool calls this message answers.
    answered: Vec<String>,
}

impl UserContent {
    fn read(content: Option<&Value>) -> Self {
        let mut read = UserContent::default();
        match content {
            Some(Value::String(text)) => read.text = text.clone(),
            Some(Value::Array(blocks)) => {
                let mut texts = Vec::new();
                for block in blocks.iter().filter_map(Value::as_object) {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(text) = block.get("text").and_then(Value::as_str) {
                                texts.push(text);
                            }
                        }
                        Some("tool_result" | "tool-result") => {
                            read.has_tool_result = true;
                            if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                                read.answered.push(id.to_string());
                            }
                        }
                        Some("file" | "image") => read.has_attachment = true,
                        _ => {}
                    }
                }
                read.text = texts.join("\n");
            }
            _ => {}
        }
        read
    }
}

/// The prompt as the user typed it: without the runtime's `<user_input>` /
/// `<user_command>` wrappers and `<mode_notice>` elements.
fn display_prompt(text: &str) -> String {
    let mut text = remove_elements(text, "<mode_notice>", "</mode_notice>");
    for tag in ["user_input", "user_command"] {
        text = remove_tags(&text, tag);
    }
    text.trim().to_string()
}

/// `text` without each `open…close` element (content included); an unclosed one stays.
fn remove_elements(text: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let after_open = &rest[start + open.len()..];
        let Some(end) = after_open.find(close) else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &after_open[end + close.len()..];
    }
    out.push_str(rest);
    out
}

/// `text` without `<tag …>` and `</tag>` (their content kept).
fn remove_tags(text: &str, tag: &str) -> String {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let text = text.replace(&close, "");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        // `<user_inputs>` is not the tag: only `>` or whitespace may follow the name.
        let is_tag = after.starts_with('>') || after.starts_with(char::is_whitespace);
        match after.find('>') {
            Some(end) if is_tag => {
                out.push_str(&rest[..start]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(&rest[..start + open.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// One assistant message's contribution to its turn.
struct AssistantMessage {
    text: String,
    /// Tool calls (id, name) it makes.
    tool_calls: Vec<(String, String)>,
}

impl AssistantMessage {
    fn read(message: &Map<String, Value>) -> Self {
        let mut texts: Vec<&str> = Vec::new();
        let mut completion: Option<&str> = None;
        let mut tool_calls = Vec::new();
        match message.get("content") {
            Some(Value::String(text)) => texts.push(text),
            Some(Value::Array(blocks)) => {
                for block in blocks.iter().filter_map(Value::as_object) {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(text) = block.get("text").and_then(Value::as_str) {
                                texts.push(text);
                            }
                        }
                        Some("tool_use") => {
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                            if COMPLETION_TOOLS.contains(&name) {
                                let input = block.get("input");
                                completion = ["summary", "result"].iter().find_map(|key| {
                                    input?.get(*key)?.as_str().filter(|t| !t.trim().is_empty())
                                });
                            }
                            if let Some(id) = block.get("id").and_then(Value::as_str) {
                                tool_calls.push((id.to_string(), name.to_string()));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        let mut text = texts
            .iter()
            .map(|text| text.trim())
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if text.is_empty() {
            text = completion.map(str::trim).unwrap_or("").to_string();
        }
        AssistantMessage { text, tool_calls }
    }
}

/// A turn being assembled from the messages.
struct TurnBuilder {
    run: u64,
    /// The index of the message that opened the turn (`None`: the manifest's prompt).
    start: Option<usize>,
    prompt: Option<String>,
    /// The latest assistant message's text (each message is one model iteration; the
    /// last one with text is the answer so far).
    reply: String,
    answered: bool,
    /// Tool calls (id, name) without a result yet, in call order.
    pending_tools: Vec<(String, String)>,
    ts_ms: Option<u64>,
}

impl TurnBuilder {
    fn new(run: u64, prompt: Option<String>) -> Self {
        TurnBuilder {
            run,
            start: None,
            prompt,
            reply: String::new(),
            answered: false,
            pending_tools: Vec::new(),
            ts_ms: None,
        }
    }

    fn snapshot(self, state: TurnState, ts_ms: Option<u64>) -> TurnSnapshot {
        TurnSnapshot {
            id: format!("run-{}", self.run),
            prompt: self.prompt,
            reply: self.reply,
            state,
            ts_ms,
        }
    }

    /// A turn followed by another is over.
    fn into_earlier_turn(self) -> TurnSnapshot {
        let ts_ms = self.ts_ms;
        self.snapshot(TurnState::Completed, ts_ms)
    }

    /// The last turn's state is the session's status.
    fn into_last_turn(self, manifest: &Manifest, updated_at: Option<u64>) -> TurnSnapshot {
        let asks_question = self
            .pending_tools
            .last()
            .is_some_and(|(_, name)| QUESTION_TOOLS.contains(&name.as_str()));
        let state = match manifest.status.as_str() {
            "running" if asks_question => TurnState::NeedsInput(NeedsInputKind::Question),
            "running" if self.answered => TurnState::Replying,
            "running" => TurnState::Waiting,
            "pending" => TurnState::NeedsInput(NeedsInputKind::ToolApproval),
            // The interactive turn is over (completed, stopped or errored: the manifest
            // does not say which).
            "idle" if self.answered => TurnState::Completed,
            "idle" => TurnState::Waiting,
            "completed" => TurnState::Completed,
            "failed" => TurnState::Failed(manifest.failure_reason()),
            "cancelled" => TurnState::Cancelled,
            // A status this reader does not know: go by the messages alone.
            _ if self.answered => TurnState::Open {
                tool_pending: !self.pending_tools.is_empty(),
            },
            _ => TurnState::Waiting,
        };
        let ended = matches!(
            state,
            TurnState::Completed | TurnState::Cancelled | TurnState::Failed(_)
        );
        let ts_ms = manifest
            .ended_at
            .filter(|_| ended)
            .or(self.ts_ms)
            .or(updated_at)
            .or(manifest.started_at);
        self.snapshot(state, ts_ms)
    }
}

/// The session's turns, assembled message by message.
#[derive(Default)]
struct RunTurns {
    /// Runs counted so far (the absolute number of the latest run).
    runs: u64,
    turns: Vec<TurnBuilder>,
}

impl RunTurns {
    fn feed(&mut self, index: usize, message: &Map<String, Value>) {
        let ts = message.get("ts").and_then(time_ms);
        match message.get("role").and_then(Value::as_str) {
            Some("user") => match read_user_message(message) {
                UserMessage::Runs { runs, prompt } => {
                    self.runs = self.runs.saturating_add(runs);
                    let mut turn = TurnBuilder::new(self.runs, prompt);
                    turn.start = Some(index);
                    turn.ts_ms = ts;
                    self.turns.push(turn);
                }
                UserMessage::Other => {
                    let content = UserContent::read(message.get("content"));
                    if let Some(turn) = self.turns.last_mut() {
                        turn.pending_tools
                            .retain(|(id, _)| !content.answered.contains(id));
                        turn.ts_ms = ts.or(turn.ts_ms);
                    }
                }
            },
            Some("assistant") => {
                // Anything before the first prompt (a seeded history without one) is no turn.
                let Some(turn) = self.turns.last_mut() else {
                    return;
                };
                let assistant = AssistantMessage::read(message);
                turn.answered = true;
                if !assistant.text.is_empty() {
                    turn.reply = assistant.text;
                }
                turn.pending_tools.extend(assistant.tool_calls);
                turn.ts_ms = ts.or(turn.ts_ms);
            }
            _ => {}
        }
    }

    /// The turns, oldest first. A compaction summary stands for runs whose prompts are
    /// gone: it only becomes a (prompt-less) turn if work follows it.
    fn finish(self) -> Vec<TurnBuilder> {
        self.turns
            .into_iter()
            .filter(|turn| turn.prompt.is_some() || turn.answered)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;
    use crate::observe::snapshot::SnapshotDiffer;
    use koru_protocol::ObservedKind;

    /// A manifest as `writeSessionManifest` writes it, with `status` and extra fields.
    fn manifest(status: &str, extra: &str) -> String {
        format!(
            r#"{{
  "version": 1,
  "session_id": "1767000000000_ab12c",
  "source": "vscode",
  "pid": 4242,
  "started_at": "2026-07-01T09:00:00.000Z",
  "status": "{status}",
  "interactive": true,
  "provider": "anthropic",
  "model": "claude-sonnet-4-5",
  "cwd": "/home/u/app",
  "workspace_root": "/home/u/app",
  "enable_tools": true,
  "enable_spawn": false,
  "enable_teams": false,
  "prompt": "add a health endpoint",
  "metadata": {{ "title": "add a health endpoint" }},
  "messages_path": "/home/u/.cline/data/sessions/1767000000000_ab12c/1767000000000_ab12c.messages.json"{extra}
}}
"#
        )
    }

    /// A messages file as `buildMessagesFilePayload` writes it.
    fn messages(list: &[&str]) -> String {
        format!(
            r#"{{
  "version": 1,
  "updated_at": "2026-07-01T09:00:30.000Z",
  "agent": "lead",
  "sessionId": "1767000000000_ab12c",
  "origin": {{ "source": "vscode", "mode": "user", "sessionId": "1767000000000_ab12c" }},
  "messages": [{}],
  "system_prompt": "You are Cline."
}}
"#,
            list.join(",\n")
        )
    }

    const PROMPT: &str = r#"{"id":"msg_u1","role":"user","content":[{"type":"text","text":"<user_input mode=\"act\">add a health endpoint</user_input>"}],"ts":1782896401000}"#;
    const TOOL_CALL: &str = r#"{"id":"msg_a1","role":"assistant","content":[{"type":"thinking","thinking":"look at server.ts"},{"type":"text","text":"I'll read server.ts first."},{"type":"tool_use","id":"toolu_1","name":"read_files","input":{"paths":["src/server.ts"]}}],"ts":1782896405000,"modelInfo":{"id":"claude-sonnet-4-5","provider":"anthropic"},"metrics":{"inputTokens":1200,"outputTokens":80}}"#;
    const TOOL_RESULT: &str = r#"{"id":"msg_t1","role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","name":"read_files","content":"export const app = express();"}],"ts":1782896406000}"#;
    const ANSWER: &str = r#"{"id":"msg_a2","role":"assistant","content":[{"type":"text","text":"Added GET /health returning 200."}],"ts":1782896420000}"#;
    const SECOND_PROMPT: &str = r#"{"id":"msg_u2","role":"user","content":"<user_input mode=\"plan\">now add a test<mode_notice>Plan mode is on.</mode_notice></user_input>","ts":1782896500000}"#;
    const QUESTION: &str = r#"{"id":"msg_a3","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"ask_question","input":{"question":"Jest or Vitest?","options":["Jest","Vitest"]}}],"ts":1782896505000}"#;

    fn parse(status: &str, list: &[&str]) -> ChatSnapshot {
        parse_session(
            manifest(status, "").as_bytes(),
            Some(messages(list).as_bytes()),
            "fallback",
        )
        .unwrap()
    }

    fn last(snapshot: &ChatSnapshot) -> (String, Option<String>, String, TurnState) {
        let turn = snapshot.turns.last().cloned().expect("a turn");
        (turn.id, turn.prompt, turn.reply, turn.state)
    }

    fn expect(
        id: &str,
        prompt: &str,
        reply: &str,
        state: TurnState,
    ) -> (String, Option<String>, String, TurnState) {
        (id.into(), Some(prompt.into()), reply.into(), state)
    }

    #[test]
    fn the_last_turn_takes_the_session_status() {
        use TurnState::*;
        let cases: Vec<(&str, Vec<&str>, TurnState, &str)> = vec![
            ("running", vec![PROMPT], Waiting, ""),
            (
                "running",
                vec![PROMPT, TOOL_CALL],
                Replying,
                "I'll read server.ts first.",
            ),
            (
                "pending",
                vec![PROMPT, TOOL_CALL],
                NeedsInput(NeedsInputKind::ToolApproval),
                "I'll read server.ts first.",
            ),
            (
                "running",
                vec![PROMPT, TOOL_CALL, TOOL_RESULT, ANSWER],
                Replying,
                "Added GET /health returning 200.",
            ),
            (
                "idle",
                vec![PROMPT, TOOL_CALL, TOOL_RESULT, ANSWER],
                Completed,
                "Added GET /health returning 200.",
            ),
            ("idle", vec![PROMPT], Waiting, ""),
            (
                "completed",
                vec![PROMPT, TOOL_CALL, TOOL_RESULT, ANSWER],
                Completed,
                "Added GET /health returning 200.",
            ),
            (
                "cancelled",
                vec![PROMPT, TOOL_CALL],
                Cancelled,
                "I'll read server.ts first.",
            ),
            (
                "failed",
                vec![PROMPT, TOOL_CALL],
                Failed("failed".into()),
                "I'll read server.ts first.",
            ),
            (
                "archived",
                vec![PROMPT, TOOL_CALL],
                Open { tool_pending: true },
                "I'll read server.ts first.",
            ),
            (
                "archived",
                vec![PROMPT, TOOL_CALL, TOOL_RESULT, ANSWER],
                Open {
                    tool_pending: false,
                },
                "Added GET /health returning 200.",
            ),
        ];
        for (status, list, state, reply) in cases {
            let snapshot = parse(status, &list);
            assert_eq!(snapshot.chat_id, "1767000000000_ab12c");
            assert_eq!(snapshot.workspace.as_deref(), Some("/home/u/app"));
            assert_eq!(snapshot.turns.len(), 1, "{status} {list:?}");
            assert_eq!(
                last(&snapshot),
                expect("run-1", "add a health endpoint", reply, state),
                "{status} {list:?}"
            );
        }
    }

    #[test]
    fn a_question_asked_through_ask_question_needs_input_until_answered() {
        let list = [
            PROMPT,
            TOOL_CALL,
            TOOL_RESULT,
            ANSWER,
            SECOND_PROMPT,
            QUESTION,
        ];
        let snapshot = parse("running", &list);
        assert_eq!(snapshot.turns.len(), 2);
        assert_eq!(snapshot.turns[0].state, TurnState::Completed);
        assert_eq!(snapshot.turns[0].ts_ms, Some(1782896420000));
        assert_eq!(
            last(&snapshot),
            expect(
                "run-2",
                "now add a test",
                "",
                TurnState::NeedsInput(NeedsInputKind::Question)
            )
        );
        let answered = r#"{"id":"msg_t2","role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","name":"ask_question","content":"Vitest"}],"ts":1782896530000}"#;
        let mut list = list.to_vec();
        list.push(answered);
        let snapshot = parse("running", &list);
        assert_eq!(snapshot.turns[1].state, TurnState::Replying);
        assert_eq!(snapshot.turns[1].ts_ms, Some(1782896530000));
    }

    #[test]
    fn the_manifest_prompt_shows_the_first_turn_before_its_messages_are_written() {
        let early = parse_session(manifest("running", "").as_bytes(), None, "x").unwrap();
        assert_eq!(
            last(&early),
            expect("run-1", "add a health endpoint", "", TurnState::Waiting)
        );
        assert_eq!(early.turns[0].ts_ms, Some(1782896400000), "started_at");
        // The file created at start holds no messages; an empty read is a file mid-write.
        for bytes in [messages(&[]), String::new(), "\n".into()] {
            let snapshot = parse_session(
                manifest("running", "").as_bytes(),
                Some(bytes.as_bytes()),
                "x",
            )
            .unwrap();
            assert_eq!(last(&snapshot), last(&early));
        }
        // The same turn, once the messages carry it.
        let later = parse("running", &[PROMPT, TOOL_CALL]);
        assert_eq!(later.turns[0].id, early.turns[0].id);
        // A session opened without a prompt has no turn.
        let idle = manifest("idle", "").replace("\"prompt\": \"add a health endpoint\",", "");
        let snapshot = parse_session(idle.as_bytes(), None, "x").unwrap();
        assert!(snapshot.turns.is_empty());
    }

    #[test]
    fn an_ended_session_reports_its_end_time_and_failure_reason() {
        let failed = manifest(
            "failed",
            r#", "ended_at": "2026-07-01T09:05:00.000Z", "exit_code": 1"#,
        );
        let snapshot = parse_session(
            failed.as_bytes(),
            Some(messages(&[PROMPT, TOOL_CALL]).as_bytes()),
            "x",
        )
        .unwrap();
        assert_eq!(
            snapshot.turns[0].state,
            TurnState::Failed("exit code 1".into())
        );
        assert_eq!(snapshot.turns[0].ts_ms, Some(1782896700000));
        let stale = manifest("failed", r#", "exit_code": 1"#).replace(
            r#""title": "add a health endpoint""#,
            r#""title": "t", "terminal_marker": "failed_external_process_exit""#,
        );
        let snapshot = parse_session(stale.as_bytes(), None, "x").unwrap();
        assert_eq!(
            snapshot.turns[0].state,
            TurnState::Failed("failed_external_process_exit".into())
        );
    }

    #[test]
    fn runtime_messages_are_not_prompts_and_compaction_keeps_the_run_count() {
        let notice = r#"{"id":"msg_n","role":"user","content":[{"type":"text","text":"Remember to finish."}],"metadata":{"kind":"completion_reminder"}}"#;
        let hook = r#"{"id":"msg_h","role":"user","content":[{"type":"text","text":"hook context"}],"metadata":{"userRunSpan":0,"displayRole":"system"}}"#;
        let resume = r#"{"id":"msg_r","role":"user","content":"[TASK RESUMPTION] carry on"}"#;
        let snapshot = parse(
            "running",
            &[PROMPT, TOOL_CALL, notice, hook, resume, ANSWER],
        );
        assert_eq!(snapshot.turns.len(), 1);
        assert_eq!(snapshot.turns[0].reply, "Added GET /health returning 200.");

        let summary = r#"{"id":"msg_s","role":"user","content":[{"type":"text","text":"Context summary:\n\nAdded /health."}],"metadata":{"kind":"compaction_summary","displayRole":"system","userRunSpan":1,"summary":"Added /health.","tokensBefore":90000,"generatedAt":1782896450000}}"#;
        // Compacted mid-turn: the work after the summary continues run 1.
        let snapshot = parse("running", &[summary, ANSWER]);
        assert_eq!(snapshot.turns.len(), 1);
        assert_eq!(snapshot.turns[0].id, "run-1");
        assert_eq!(snapshot.turns[0].prompt, None);
        assert_eq!(snapshot.turns[0].state, TurnState::Replying);
        // Compacted between turns: the next prompt is still run 2.
        let snapshot = parse("running", &[summary, SECOND_PROMPT]);
        assert_eq!(
            last(&snapshot),
            expect("run-2", "now add a test", "", TurnState::Waiting)
        );
        assert_eq!(snapshot.turns.len(), 1, "no empty turn for the summary");
    }

    #[test]
    fn the_final_answer_of_submit_and_exit_is_the_reply() {
        let submit = r#"{"id":"msg_a9","role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"submit_and_exit","input":{"summary":"Health endpoint added and tested.","verified":true}}],"ts":1782896600000}"#;
        let snapshot = parse("completed", &[PROMPT, TOOL_CALL, TOOL_RESULT, submit]);
        assert_eq!(snapshot.turns[0].reply, "Health endpoint added and tested.");
        assert_eq!(snapshot.turns[0].state, TurnState::Completed);
    }

    #[test]
    fn unknown_fields_kinds_and_a_bare_array_are_tolerated() {
        let odd = [
            r#"{"role":"system","content":"?"}"#,
            r#"7"#,
            r#"{"id":"u","role":"user","content":[{"type":"media","media":{}},{"type":"text","text":"hello"}],"ts":"2026-07-01T09:00:01Z","extra":true}"#,
            r#"{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"brand_new","x":1},{"type":"text","text":5},{"type":"text","text":"hi there"}]}"#,
            r#"{"role":"assistant","content":{"not":"blocks"}}"#,
        ];
        let extra = r#", "team_name": "t", "compaction_path": "/x", "future": {"a": [1]}"#;
        let bare = format!("[{}]", odd.join(","));
        let snapshot = parse_session(
            manifest("idle", extra).as_bytes(),
            Some(bare.as_bytes()),
            "x",
        )
        .unwrap();
        assert_eq!(
            last(&snapshot),
            expect("run-1", "hello", "hi there", TurnState::Completed)
        );
        assert_eq!(snapshot.turns[0].ts_ms, Some(1782896401000));
        // No session id: the caller's id; no cwd: the workspace root.
        let anonymous = manifest("idle", "")
            .replace(r#""session_id": "1767000000000_ab12c","#, "")
            .replace(r#""cwd": "/home/u/app","#, r#""cwd": "","#)
            .replace(
                r#""workspace_root": "/home/u/app""#,
                r#""workspace_root": "/home/u""#,
            );
        let snapshot = parse_session(anonymous.as_bytes(), None, "from-dir").unwrap();
        assert_eq!(snapshot.chat_id, "from-dir");
        assert_eq!(snapshot.workspace.as_deref(), Some("/home/u"));
        // An attachment alone is a prompt.
        let image =
            r#"{"role":"user","content":[{"type":"image","data":"AA==","mediaType":"image/png"}]}"#;
        let snapshot = parse("running", &[image]);
        assert_eq!(last(&snapshot), expect("run-1", "", "", TurnState::Waiting));
    }

    #[test]
    fn prompts_lose_the_runtime_wrappers() {
        assert_eq!(
            display_prompt(r#"<user_input mode="act">fix it</user_input>"#),
            "fix it"
        );
        assert_eq!(
            display_prompt(r#"<user_command slash="team">build</user_command>"#),
            "build"
        );
        assert_eq!(
            display_prompt("a<mode_notice>n</mode_notice>b<mode_notice>open"),
            "ab<mode_notice>open"
        );
        assert_eq!(display_prompt("<user_inputs> stay"), "<user_inputs> stay");
        assert_eq!(
            display_prompt("<user_input unclosed"),
            "<user_input unclosed"
        );
    }

    #[test]
    fn half_written_and_wrong_files_are_errors() {
        let whole = manifest("running", "");
        let half = &whole.as_bytes()[..whole.len() / 2];
        let error = parse_session(half, None, "x").unwrap_err();
        assert!(
            matches!(&error, ParseError::NotJson(message) if message.starts_with("session manifest is not complete JSON")),
            "{error}"
        );
        assert!(parse_session(b"", None, "x").is_err());
        assert_eq!(
            parse_session(b"[1]", None, "x").unwrap_err(),
            ParseError::Shape("session manifest is not a JSON object".into())
        );
        assert_eq!(
            parse_session(br#"{"session_id":"s"}"#, None, "x").unwrap_err(),
            ParseError::Shape("session manifest has no status".into())
        );
        let list = messages(&[PROMPT, ANSWER]);
        let error = parse_session(
            whole.as_bytes(),
            Some(&list.as_bytes()[..list.len() - 20]),
            "x",
        )
        .unwrap_err();
        assert!(
            matches!(&error, ParseError::NotJson(message) if message.starts_with("session messages file is not complete JSON")),
            "{error}"
        );
        assert_eq!(
            parse_session(whole.as_bytes(), Some(br#"{"version":1}"#), "x").unwrap_err(),
            ParseError::Shape("session messages file has no messages array".into())
        );
        assert_eq!(
            parse_session(whole.as_bytes(), Some(b"3"), "x").unwrap_err(),
            ParseError::Shape("session messages file is not a JSON object or array".into())
        );
    }

    #[test]
    fn successive_files_give_each_event_once_in_order() {
        let mut differ = SnapshotDiffer::new();
        let mut step = |status: &str, list: Option<&[&str]>| {
            let list = list.map(messages);
            let snapshot = parse_session(
                manifest(status, "").as_bytes(),
                list.as_deref().map(str::as_bytes),
                "x",
            )
            .unwrap();
            differ.update(&snapshot)
        };
        let first = step("running", None);
        assert_eq!(kinds(&first), ["chat_seen", "prompt_seen"]);
        assert_eq!(
            first[1].event,
            ObservedKind::PromptSeen {
                excerpt: "add a health endpoint".into(),
                length: 21,
                digest: crate::observe::prompt_digest("add a health endpoint"),
            }
        );
        assert!(step("running", Some(&[])).is_empty());
        assert_eq!(
            kinds(&step("running", Some(&[PROMPT, TOOL_CALL]))),
            ["reply_started"]
        );
        assert_eq!(
            kinds(&step("pending", Some(&[PROMPT, TOOL_CALL]))),
            ["needs_input"]
        );
        assert!(step("running", Some(&[PROMPT, TOOL_CALL, TOOL_RESULT])).is_empty());
        let done = [PROMPT, TOOL_CALL, TOOL_RESULT, ANSWER];
        let events = step("idle", Some(&done));
        assert_eq!(kinds(&events), ["reply_completed"]);
        assert_eq!(
            events[0].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Added GET /health returning 200.".into(),
                length: 32
            }
        );
        // The next prompt runs before its messages are written: nothing new yet.
        assert!(step("running", Some(&done)).is_empty());
        let asking = [
            PROMPT,
            TOOL_CALL,
            TOOL_RESULT,
            ANSWER,
            SECOND_PROMPT,
            QUESTION,
        ];
        assert_eq!(
            kinds(&step("running", Some(&asking))),
            ["prompt_seen", "reply_started", "needs_input"]
        );
        assert_eq!(kinds(&step("cancelled", Some(&asking))), ["cancelled"]);
        assert!(step("cancelled", Some(&asking)).is_empty());
    }
}

#[cfg(test)]
mod fuzz {
    //! The reader never panics, whatever the bytes or the shape of the files.
    use super::*;
    use proptest::prelude::*;

    fn block() -> impl Strategy<Value = Value> {
        let kinds = prop_oneof![
            Just("text"),
            Just("tool_use"),
            Just("tool_result"),
            Just("thinking"),
            Just("image"),
            Just("file"),
            Just("other"),
        ];
        let ids = prop_oneof![Just("t1"), Just("t2")];
        let names = prop_oneof![
            Just("ask_question"),
            Just("submit_and_exit"),
            Just("read_files")
        ];
        (kinds, ids, names, any::<String>()).prop_map(|(kind, id, name, text)| {
            serde_json::json!({"type": kind, "text": text, "id": id, "tool_use_id": id,
                "name": name, "input": {"summary": text}})
        })
    }

    fn message() -> impl Strategy<Value = Value> {
        let roles = prop_oneof![Just("user"), Just("assistant"), Just("tool")];
        let content = prop_oneof![
            any::<String>().prop_map(Value::from),
            proptest::collection::vec(block(), 0..4).prop_map(Value::Array),
            Just(Value::Null),
        ];
        let metadata = prop_oneof![
            Just(Value::Null),
            Just(serde_json::json!({"kind": "compaction_summary", "userRunSpan": 3})),
            Just(serde_json::json!({"kind": "compaction", "userRunSpan": u64::MAX})),
            Just(serde_json::json!({"userRunSpan": -1})),
            Just(serde_json::json!({"kind": "completion_reminder"})),
        ];
        let ts = prop_oneof![
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        (roles, content, metadata, ts).prop_map(|(role, content, metadata, ts)| {
            serde_json::json!({"role": role, "content": content, "metadata": metadata, "ts": ts})
        })
    }

    fn status() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just("running"),
            Just("pending"),
            Just("idle"),
            Just("completed"),
            Just("failed"),
            Just("cancelled"),
            Just("?"),
        ]
        .prop_map(Value::from)
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(
            manifest in proptest::collection::vec(any::<u8>(), 0..200),
            messages in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let _ = parse_session(&manifest, Some(&messages), "x");
            let _ = parse_session(&manifest, None, "x");
            let _ = parse_session(br#"{"status":"running"}"#, Some(&messages), "x");
        }

        #[test]
        fn any_messages_never_panic(
            status in status(),
            prompt in any::<String>(),
            exit_code in any::<i64>(),
            messages in proptest::collection::vec(message(), 0..20),
        ) {
            let manifest = serde_json::json!({"session_id": "s", "status": status,
                "prompt": prompt, "exit_code": exit_code, "ended_at": 5,
                "metadata": {"terminal_marker": 1}});
            let file = serde_json::json!({"version": 1, "updated_at": "x", "messages": messages});
            let snapshot = parse_session(
                manifest.to_string().as_bytes(),
                Some(file.to_string().as_bytes()),
                "x",
            )
            .unwrap();
            let mut differ = crate::observe::snapshot::SnapshotDiffer::new();
            let _ = differ.update(&snapshot);
        }
    }
}

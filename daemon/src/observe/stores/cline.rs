//! Cline, Roo Code and Kilo Code task histories (`tasks/<task>/ui_messages.json`, rewritten whole): a pure reader from bytes to `ChatSnapshot`.
//!
//! Format facts (docs/research/chat-store-formats.md §5): `ui_messages.json` is a JSON array
//! of `{ts, type: "ask"|"say", ask?, say?, text?, partial?, …}`, rewritten whole, so a
//! half-written file is an error the caller retries, never data. A task opens with Cline's
//! `say:"task"` or, in Roo and Kilo, a first `say:"text"`; each `say:"user_feedback"` is a
//! new prompt. Assistant text is `say:"text"` / `say:"completion_result"` (streamed with
//! `partial:true`). Each API call is a `say:"api_req_started"` whose `text` is JSON that
//! gains `cancelReason` (`user_cancelled` | `streaming_failed`) when the call is cut short;
//! the message keeps its place in the array when it is updated, so a cancel stays in force
//! over the streamed messages of the same call. Blocking asks say what the task waits for
//! (`completion_result` = done, `followup` = a question, `tool`/`command`/… = approval,
//! `api_req_failed`/`mistake_limit_reached` = failure). `resume_task` is written when an
//! interrupted task is reopened (or, in Cline 4, cancelled, and by the Cline CLI 2.x when it
//! stops a task, `-y` runs right after their final `say:"completion_result"`: a task
//! stopped after its result completed); what the task does after it,
//! unless the user types (`user_feedback`), continues the work without a prompt and is
//! reported as a turn of its own. Neither file carries the working directory: Roo keeps it
//! in `tasks/<id>/history_item.json` (`workspace`), Cline in `state/taskHistory.json`
//! (`cwdOnTaskInitialization`).

use std::collections::HashSet;

use koru_protocol::NeedsInputKind;
use serde_json::{Map, Value};

use crate::observe::snapshot::{ChatSnapshot, TurnSnapshot, TurnState};
use crate::observe::ParseError;

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_cline_tasks";

/// Reads a task's `ui_messages.json` into a snapshot of its turns. `Err` when the bytes
/// are not a complete JSON array (a file caught mid-rewrite: read it again).
pub fn parse_ui_messages(
    bytes: &[u8],
    task_id: &str,
    workspace: Option<&str>,
) -> Result<ChatSnapshot, ParseError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|error| {
        ParseError::NotJson(format!("ui_messages.json is not complete JSON: {error}"))
    })?;
    let Value::Array(messages) = value else {
        return Err(ParseError::Shape(
            "ui_messages.json is not a JSON array".into(),
        ));
    };
    Ok(ChatSnapshot {
        chat_id: task_id.to_string(),
        workspace: workspace.map(str::to_string),
        turns: task_turns(&messages)
            .into_iter()
            .map(|(_, turn)| turn)
            .collect(),
        updated_ms: None,
    })
}

/// The task's turns from its `ui_messages.json` array, each with the index of the message
/// that opened it (its prompt, or the first work after a `resume_task` the user let carry
/// on): the one rule for where turns begin, shared with the conversation reader
/// (`conversation::stores::cline`). Messages before the first prompt belong to no turn.
pub fn task_turns(messages: &[Value]) -> Vec<(usize, TurnSnapshot)> {
    let mut turns = TaskTurns::default();
    let mut first = true;
    for (index, message) in messages.iter().enumerate() {
        let Some(message) = message.as_object() else {
            continue;
        };
        let message = UiMessage::read(message);
        turns.feed(index, &message, classify(&message, first));
        first = false;
    }
    turns.finish()
}

/// Roo's tasks/<id>/history_item.json → its `workspace`.
pub fn workspace_from_history_item(bytes: &[u8]) -> Option<String> {
    let item: Value = serde_json::from_slice(bytes).ok()?;
    non_empty(item.get("workspace")?.as_str()?)
}

/// Cline's <globalStorage>/saoudrizwan.claude-dev/state/taskHistory.json (array of HistoryItem) → `cwdOnTaskInitialization` of the item whose `id` is task_id.
pub fn workspace_from_task_history(bytes: &[u8], task_id: &str) -> Option<String> {
    let history: Value = serde_json::from_slice(bytes).ok()?;
    history
        .as_array()?
        .iter()
        .find(|item| match item.get("id") {
            Some(Value::String(id)) => id == task_id,
            // Older ids were `Date.now()`; accept one stored as a number too.
            Some(Value::Number(id)) => id.to_string() == task_id,
            _ => false,
        })
        .and_then(|item| item.get("cwdOnTaskInitialization")?.as_str())
        .and_then(non_empty)
}

fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The fields of one `ui_messages.json` element this reader uses.
struct UiMessage<'a> {
    ts: Option<u64>,
    /// `say` or `ask` (or empty), from `type`.
    kind: &'a str,
    /// The `say` or `ask` value.
    name: &'a str,
    text: &'a str,
    partial: bool,
}

impl<'a> UiMessage<'a> {
    fn read(message: &'a Map<String, Value>) -> Self {
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        let name = match kind {
            "say" | "ask" => message.get(kind).and_then(Value::as_str).unwrap_or(""),
            _ => "",
        };
        UiMessage {
            ts: message.get("ts").and_then(timestamp_ms),
            kind,
            name,
            text: message.get("text").and_then(Value::as_str).unwrap_or(""),
            partial: message.get("partial").and_then(Value::as_bool) == Some(true),
        }
    }
}

/// `ts` is a millisecond count; tolerate one written as a float.
fn timestamp_ms(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < u64::MAX as f64)
            .map(|ms| ms as u64)
    })
}

/// What one message means for the task's turns.
#[derive(Debug, Clone, PartialEq)]
enum Effect {
    /// The user's prompt: a new turn.
    Prompt,
    /// A task reopened after it stopped: `resume_completed_task` (it had completed) or
    /// `resume_task` (interrupted).
    Resume { completed: bool },
    /// An API call: in flight or finished (`None`), or cut short (`Some` end state).
    ApiRequest(Option<TurnState>),
    /// Streamed work: text, reasoning, tool output, non-blocking asks. `reply` is the
    /// text when it is assistant text; `complete` when it is final (not partial) text;
    /// `result` when it is the task's result, a final `say:"completion_result"`.
    Work {
        reply: Option<String>,
        complete: bool,
        result: bool,
    },
    /// A blocking ask: what the task now waits for, with the text to show as the answer.
    Ask(TurnState, Option<String>),
    /// Changes nothing but the time (`say:"error"` is followed by a retry or an ask).
    Neutral,
}

fn classify(message: &UiMessage, first: bool) -> Effect {
    match (message.kind, message.name) {
        ("say", "task" | "user_feedback") => Effect::Prompt,
        // Roo and Kilo open a task with the prompt as `say:"text"`.
        ("say", "text") if first => Effect::Prompt,
        ("say", "text" | "completion_result") => Effect::Work {
            reply: Some(message.text.to_string()),
            complete: !message.partial,
            result: message.name == "completion_result" && !message.partial,
        },
        ("say", "api_req_started") => Effect::ApiRequest(api_request_end(message.text)),
        ("say", "error") => Effect::Neutral,
        ("say", _) => Effect::Work {
            reply: None,
            complete: false,
            result: false,
        },
        // A partial ask is still being streamed: the task is working, not waiting.
        ("ask", _) if message.partial => Effect::Work {
            reply: None,
            complete: false,
            result: false,
        },
        ("ask", "resume_task") => Effect::Resume { completed: false },
        ("ask", "resume_completed_task") => Effect::Resume { completed: true },
        ("ask", ask) => match ask_state(ask, message.text) {
            Some(state) => Effect::Ask(state, ask_reply(ask, message.text)),
            None => Effect::Work {
                reply: None,
                complete: false,
                result: false,
            },
        },
        _ => Effect::Neutral,
    }
}

/// The state a blocking ask puts the turn in; `None` for non-blocking and unknown asks.
fn ask_state(ask: &str, text: &str) -> Option<TurnState> {
    let state = match ask {
        "completion_result" => TurnState::Completed,
        "followup" => TurnState::NeedsInput(NeedsInputKind::Question),
        "command"
        | "tool"
        | "use_mcp_server"
        | "browser_action_launch"
        | "use_subagents"
        | "new_task" => TurnState::NeedsInput(NeedsInputKind::ToolApproval),
        "plan_mode_respond" | "condense" | "summarize_task" | "report_bug" => {
            TurnState::NeedsInput(NeedsInputKind::Other)
        }
        // Roo and older Cline: the auto-approval budget is spent; the user must allow more.
        "auto_approval_max_req_reached" => TurnState::NeedsInput(NeedsInputKind::Permission),
        "api_req_failed" | "mistake_limit_reached" => {
            let reason = if text.trim().is_empty() { ask } else { text };
            TurnState::Failed(reason.to_string())
        }
        // `command_output` and `act_mode_respond` do not block; unknown asks are taken as
        // work rather than raise a false alarm.
        _ => return None,
    };
    Some(state)
}

/// The question a `followup` asks, or the plan a `plan_mode_respond` offers (both JSON).
fn ask_reply(ask: &str, text: &str) -> Option<String> {
    let key = match ask {
        "followup" => "question",
        "plan_mode_respond" => "response",
        _ => return None,
    };
    let value: Value = serde_json::from_str(text).ok()?;
    value.get(key)?.as_str().map(str::to_string)
}

/// How an `api_req_started` call ended, from its JSON text: `None` while in flight or
/// when it finished normally.
fn api_request_end(text: &str) -> Option<TurnState> {
    let info: Value = serde_json::from_str(text).ok()?;
    match info.get("cancelReason")?.as_str()? {
        "streaming_failed" => {
            let reason = info
                .get("streamingFailedMessage")
                .and_then(Value::as_str)
                .filter(|reason| !reason.trim().is_empty())
                .unwrap_or("streaming failed");
            Some(TurnState::Failed(reason.to_string()))
        }
        // `user_cancelled`, and any newer reason: the call did not finish.
        _ => Some(TurnState::Cancelled),
    }
}

fn ended(state: &TurnState) -> bool {
    matches!(
        state,
        TurnState::Completed | TurnState::Cancelled | TurnState::Failed(_)
    )
}

/// A turn being assembled from the messages.
struct TurnBuilder {
    turn: TurnSnapshot,
    /// The index of the message that opened the turn.
    start: usize,
    /// The latest API call was cut short: its streamed messages do not reopen the turn.
    request_cut_short: bool,
    /// The task's result (a final `say:"completion_result"`) is the turn's latest answer:
    /// no API call, ask or text came after it. A `resume_task` then stopped a task that
    /// had finished its work (the CLI's `-y` runs end this way, without the
    /// `ask:"completion_result"`), so the turn completed rather than being cancelled.
    result_delivered: bool,
}

/// The task's turns, assembled message by message.
#[derive(Default)]
struct TaskTurns {
    turns: Vec<TurnBuilder>,
    ids: HashSet<String>,
    /// The previous message reopened the task (`resume_task` / `resume_completed_task`).
    after_resume: bool,
}

impl TaskTurns {
    fn start(&mut self, index: usize, message: &UiMessage, prompt: Option<String>) {
        let mut id = match message.ts {
            Some(ts) => ts.to_string(),
            None => format!("#{index}"),
        };
        if !self.ids.insert(id.clone()) {
            id = format!("{id}#{index}");
            self.ids.insert(id.clone());
        }
        self.turns.push(TurnBuilder {
            turn: TurnSnapshot {
                id,
                prompt,
                reply: String::new(),
                state: TurnState::Waiting,
                ts_ms: message.ts,
            },
            start: index,
            request_cut_short: false,
            result_delivered: false,
        });
    }

    fn feed(&mut self, index: usize, message: &UiMessage, effect: Effect) {
        if effect == Effect::Prompt {
            self.after_resume = false;
            self.start(index, message, Some(message.text.to_string()));
            return;
        }
        if self.turns.is_empty() {
            // Nothing before the first prompt belongs to a turn.
            return;
        }
        let continues_after_resume = self.after_resume
            && matches!(
                effect,
                Effect::ApiRequest(_) | Effect::Work { .. } | Effect::Ask(..)
            );
        if continues_after_resume {
            // The user let the reopened task carry on without typing: new work, no prompt.
            self.start(index, message, None);
        }
        if effect != Effect::Neutral {
            self.after_resume = matches!(effect, Effect::Resume { .. });
        }
        let Some(builder) = self.turns.last_mut() else {
            return;
        };
        let turn = &mut builder.turn;
        if message.ts.is_some() {
            turn.ts_ms = message.ts;
        }
        match effect {
            Effect::Prompt | Effect::Neutral => {}
            Effect::Resume { completed } => {
                if !ended(&turn.state) {
                    turn.state = if completed || builder.result_delivered {
                        TurnState::Completed
                    } else {
                        TurnState::Cancelled
                    };
                }
            }
            Effect::ApiRequest(end) => {
                builder.result_delivered = false;
                builder.request_cut_short = end.is_some();
                turn.state = end.unwrap_or(TurnState::Replying);
            }
            Effect::Work {
                reply,
                complete,
                result,
            } => {
                let reply = reply.filter(|text| !text.trim().is_empty());
                let has_reply = reply.is_some();
                // Work without text after the result (a hook's status, a checkpoint)
                // leaves it delivered; new text or a new result decides anew.
                if has_reply || result {
                    builder.result_delivered = result && has_reply;
                }
                if let Some(text) = reply {
                    turn.reply = text;
                }
                if !builder.request_cut_short {
                    turn.state = if complete && has_reply {
                        // Final text and nothing says the turn ended: the differ infers
                        // the end after a quiet period.
                        TurnState::Open {
                            tool_pending: false,
                        }
                    } else {
                        TurnState::Replying
                    };
                }
            }
            Effect::Ask(state, reply) => {
                if let Some(text) = reply.filter(|text| !text.trim().is_empty()) {
                    turn.reply = text;
                }
                builder.request_cut_short = false;
                builder.result_delivered = false;
                turn.state = state;
            }
        }
    }

    /// The turns, oldest first, with the index of the message that opened each. A turn
    /// followed by another is over: completed, unless it was cancelled or failed.
    fn finish(self) -> Vec<(usize, TurnSnapshot)> {
        let count = self.turns.len();
        self.turns
            .into_iter()
            .enumerate()
            .map(|(position, builder)| {
                let mut turn = builder.turn;
                if position + 1 < count
                    && !matches!(turn.state, TurnState::Cancelled | TurnState::Failed(_))
                {
                    turn.state = TurnState::Completed;
                }
                (builder.start, turn)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;
    use crate::observe::snapshot::SnapshotDiffer;
    use koru_protocol::ObservedKind;

    /// The last turn's (id, prompt, reply, state) of `messages` read as a Roo task.
    fn last_turn(messages: &str) -> TurnSnapshot {
        let snapshot = parse_ui_messages(messages.as_bytes(), "task", None).unwrap();
        snapshot.turns.last().cloned().expect("a turn")
    }

    const ROO_COMPLETED: &str = r#"[
 {"ts":1767000000000,"type":"say","say":"text","text":"add a health endpoint"},
 {"ts":1767000000100,"type":"say","say":"api_req_started","text":"{\"request\":\"…\",\"tokensIn\":1200,\"tokensOut\":300,\"cost\":0.004}"},
 {"ts":1767000005000,"type":"say","say":"text","text":"I'll add GET /health in server.ts."},
 {"ts":1767000006000,"type":"ask","ask":"tool","text":"{\"tool\":\"editedExistingFile\",\"path\":\"src/server.ts\"}"},
 {"ts":1767000020000,"type":"say","say":"completion_result","text":"Added GET /health returning 200."},
 {"ts":1767000020100,"type":"ask","ask":"completion_result","text":""}]"#;

    #[test]
    fn a_roo_task_completes_on_the_completion_result_ask() {
        let snapshot =
            parse_ui_messages(ROO_COMPLETED.as_bytes(), "0199-task", Some("/home/u/app")).unwrap();
        assert_eq!(snapshot.chat_id, "0199-task");
        assert_eq!(snapshot.workspace.as_deref(), Some("/home/u/app"));
        assert_eq!(
            snapshot.turns,
            [TurnSnapshot {
                id: "1767000000000".into(),
                prompt: Some("add a health endpoint".into()),
                reply: "Added GET /health returning 200.".into(),
                state: TurnState::Completed,
                ts_ms: Some(1_767_000_020_100),
            }]
        );
    }

    /// Each case: the messages of a Cline task (after its `say:"task"`), and the state of
    /// its last turn.
    #[test]
    fn the_last_message_says_what_the_turn_is_doing() {
        let cases: &[(&str, &str, TurnState)] = &[
            (
                "in flight",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{\"request\":\"fix\"}"}"#,
                TurnState::Replying,
            ),
            (
                "streaming text",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{}"},
                   {"ts":3,"type":"say","say":"text","text":"Looking","partial":true}"#,
                TurnState::Replying,
            ),
            (
                "final text, no end recorded",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{}"},
                   {"ts":3,"type":"say","say":"text","text":"Done, I think."}"#,
                TurnState::Open {
                    tool_pending: false,
                },
            ),
            (
                "a question",
                r#"{"ts":2,"type":"ask","ask":"followup","text":"{\"question\":\"Which port?\",\"suggest\":[]}"}"#,
                TurnState::NeedsInput(NeedsInputKind::Question),
            ),
            (
                "a command to approve",
                r#"{"ts":2,"type":"ask","ask":"command","text":"npm test"}"#,
                TurnState::NeedsInput(NeedsInputKind::ToolApproval),
            ),
            (
                "a tool being streamed is not yet an approval",
                r#"{"ts":2,"type":"ask","ask":"tool","text":"{}","partial":true}"#,
                TurnState::Replying,
            ),
            (
                "a plan",
                r#"{"ts":2,"type":"ask","ask":"plan_mode_respond","text":"{\"response\":\"Plan: …\"}"}"#,
                TurnState::NeedsInput(NeedsInputKind::Other),
            ),
            (
                "command output does not block",
                r#"{"ts":2,"type":"ask","ask":"command","text":"npm test"},
                   {"ts":3,"type":"ask","ask":"command_output","text":"PASS"}"#,
                TurnState::Replying,
            ),
            (
                "api failure",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{}"},
                   {"ts":3,"type":"say","say":"error","text":"429"},
                   {"ts":4,"type":"ask","ask":"api_req_failed","text":"429 Too Many Requests"}"#,
                TurnState::Failed("429 Too Many Requests".into()),
            ),
            (
                "a retry after a failure reopens the turn",
                r#"{"ts":4,"type":"ask","ask":"api_req_failed","text":"429"},
                   {"ts":5,"type":"say","say":"api_req_retried"}"#,
                TurnState::Replying,
            ),
            (
                "mistake limit, no text",
                r#"{"ts":2,"type":"ask","ask":"mistake_limit_reached"}"#,
                TurnState::Failed("mistake_limit_reached".into()),
            ),
            (
                "an error alone does not end the turn",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{}"},
                   {"ts":3,"type":"say","say":"error","text":"diff failed"}"#,
                TurnState::Replying,
            ),
            (
                "user cancel, text streamed after the call started",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{\"cancelReason\":\"user_cancelled\"}"},
                   {"ts":3,"type":"say","say":"text","text":"Let me","partial":true},
                   {"ts":4,"type":"ask","ask":"resume_task"}"#,
                TurnState::Cancelled,
            ),
            (
                "streaming failure",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{\"cancelReason\":\"streaming_failed\",\"streamingFailedMessage\":\"socket hang up\"}"}"#,
                TurnState::Failed("socket hang up".into()),
            ),
            (
                "reopened while waiting for approval",
                r#"{"ts":2,"type":"ask","ask":"tool","text":"{}"},
                   {"ts":3,"type":"ask","ask":"resume_task"}"#,
                TurnState::Cancelled,
            ),
            (
                "reopened after it completed",
                r#"{"ts":2,"type":"ask","ask":"completion_result"},
                   {"ts":3,"type":"ask","ask":"resume_completed_task"}"#,
                TurnState::Completed,
            ),
            (
                "stopped right after its result (the CLI's -y runs)",
                r#"{"ts":2,"type":"say","say":"api_req_started","text":"{\"cost\":0}"},
                   {"ts":3,"type":"say","say":"text","text":"","partial":true},
                   {"ts":4,"type":"say","say":"completion_result","text":"Paris."},
                   {"ts":5,"type":"ask","ask":"resume_task"}"#,
                TurnState::Completed,
            ),
            (
                "stopped after its result and a hook's status",
                r#"{"ts":4,"type":"say","say":"completion_result","text":"Paris."},
                   {"ts":5,"type":"say","say":"hook_status","text":"{}"},
                   {"ts":6,"type":"ask","ask":"resume_task"}"#,
                TurnState::Completed,
            ),
            (
                "stopped while its result is still streamed",
                r#"{"ts":4,"type":"say","say":"completion_result","text":"Par","partial":true},
                   {"ts":5,"type":"ask","ask":"resume_task"}"#,
                TurnState::Cancelled,
            ),
            (
                "stopped after final text that is not the result",
                r#"{"ts":4,"type":"say","say":"text","text":"I'll run ls."},
                   {"ts":5,"type":"ask","ask":"resume_task"}"#,
                TurnState::Cancelled,
            ),
            (
                "stopped while the result's command waits for approval",
                r#"{"ts":4,"type":"say","say":"completion_result","text":"Built it."},
                   {"ts":5,"type":"ask","ask":"command","text":"open index.html"},
                   {"ts":6,"type":"ask","ask":"resume_task"}"#,
                TurnState::Cancelled,
            ),
            (
                "reopened after a failure stays failed",
                r#"{"ts":2,"type":"ask","ask":"api_req_failed","text":"quota"},
                   {"ts":3,"type":"ask","ask":"resume_task"}"#,
                TurnState::Failed("quota".into()),
            ),
            (
                "unknown kinds and fields are tolerated",
                r#"{"ts":2,"type":"say","say":"hologram","text":"?","sparkle":true},
                   {"ts":3,"type":"whisper","text":"?"},
                   7,
                   {"ts":4,"type":"ask","ask":"brand_new_ask","text":"?"}"#,
                TurnState::Replying,
            ),
        ];
        for (name, messages, expected) in cases {
            let task =
                format!(r#"[{{"ts":1,"type":"say","say":"task","text":"fix it"}},{messages}]"#);
            let turn = last_turn(&task);
            assert_eq!(&turn.state, expected, "{name}");
            assert_eq!(turn.id, "1", "{name}: one turn");
        }
    }

    #[test]
    fn feedback_starts_a_turn_and_earlier_turns_are_over() {
        let task = r#"[
 {"ts":10,"type":"say","say":"task","text":"rename foo"},
 {"ts":11,"type":"say","say":"text","text":"Which foo?"},
 {"ts":12,"type":"ask","ask":"followup","text":"{\"question\":\"Which foo, the struct or the fn?\"}"},
 {"ts":20,"type":"say","say":"user_feedback","text":"the struct"},
 {"ts":21,"type":"say","say":"api_req_started","text":"{\"cancelReason\":\"user_cancelled\"}"},
 {"ts":22,"type":"ask","ask":"resume_task"},
 {"ts":30,"type":"say","say":"user_feedback","text":"go on"},
 {"ts":31,"type":"say","say":"text","text":"Renamed","partial":true}]"#;
        let snapshot = parse_ui_messages(task.as_bytes(), "1700", None).unwrap();
        let summary: Vec<_> = snapshot
            .turns
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.prompt.as_deref(),
                    t.reply.as_str(),
                    &t.state,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "10",
                    Some("rename foo"),
                    "Which foo, the struct or the fn?",
                    &TurnState::Completed
                ),
                ("20", Some("the struct"), "", &TurnState::Cancelled),
                ("30", Some("go on"), "Renamed", &TurnState::Replying),
            ]
        );
        assert_eq!(snapshot.turns[2].ts_ms, Some(31));
    }

    #[test]
    fn work_resumed_without_a_prompt_is_a_turn_of_its_own() {
        let task = r#"[
 {"ts":1,"type":"say","say":"task","text":"migrate the db"},
 {"ts":2,"type":"say","say":"api_req_started","text":"{\"cost\":0.1}"},
 {"ts":3,"type":"ask","ask":"resume_task"},
 {"ts":4,"type":"say","say":"api_req_started","text":"{}"},
 {"ts":5,"type":"say","say":"completion_result","text":"Migrated."},
 {"ts":6,"type":"ask","ask":"completion_result"}]"#;
        let snapshot = parse_ui_messages(task.as_bytes(), "t", None).unwrap();
        assert_eq!(snapshot.turns.len(), 2);
        assert_eq!(snapshot.turns[0].state, TurnState::Cancelled);
        assert_eq!(snapshot.turns[1].id, "4");
        assert_eq!(snapshot.turns[1].prompt, None);
        assert_eq!(snapshot.turns[1].reply, "Migrated.");
        assert_eq!(snapshot.turns[1].state, TurnState::Completed);
    }

    #[test]
    fn successive_rewrites_give_events_in_order() {
        let versions = [
            r#"[{"ts":1,"type":"say","say":"task","text":"add a test"}]"#,
            r#"[{"ts":1,"type":"say","say":"task","text":"add a test"},
                {"ts":2,"type":"say","say":"api_req_started","text":"{}"},
                {"ts":3,"type":"say","say":"text","text":"Adding","partial":true}]"#,
            r#"[{"ts":1,"type":"say","say":"task","text":"add a test"},
                {"ts":2,"type":"say","say":"api_req_started","text":"{\"cost\":0.01}"},
                {"ts":3,"type":"say","say":"text","text":"Adding a test."},
                {"ts":4,"type":"ask","ask":"tool","text":"{\"tool\":\"newFileCreated\"}"}]"#,
            r#"[{"ts":1,"type":"say","say":"task","text":"add a test"},
                {"ts":2,"type":"say","say":"api_req_started","text":"{\"cost\":0.01}"},
                {"ts":3,"type":"say","say":"text","text":"Adding a test."},
                {"ts":4,"type":"ask","ask":"tool","text":"{\"tool\":\"newFileCreated\"}"},
                {"ts":5,"type":"say","say":"completion_result","text":"Added tests/health.rs."},
                {"ts":6,"type":"ask","ask":"completion_result","text":""},
                {"ts":7,"type":"say","say":"user_feedback","text":"now run it"},
                {"ts":8,"type":"say","say":"api_req_started","text":"{\"cancelReason\":\"user_cancelled\"}"}]"#,
        ];
        let mut differ = SnapshotDiffer::new();
        let events: Vec<Vec<String>> = versions
            .iter()
            .map(|bytes| {
                let snapshot = parse_ui_messages(bytes.as_bytes(), "t", Some("/w")).unwrap();
                kinds(&differ.update(&snapshot))
            })
            .collect();
        assert_eq!(
            events,
            [
                vec!["chat_seen", "prompt_seen"],
                vec!["reply_started"],
                vec!["needs_input"],
                vec!["reply_completed", "prompt_seen", "cancelled"],
            ]
        );
        let last = parse_ui_messages(versions[3].as_bytes(), "t", None).unwrap();
        let mut fresh = SnapshotDiffer::new();
        let replay = fresh.update(&last);
        assert_eq!(
            replay[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Added tests/health.rs.".into(),
                length: 22
            }
        );
    }

    #[test]
    fn half_written_and_wrong_files_are_errors() {
        let half = &ROO_COMPLETED.as_bytes()[..ROO_COMPLETED.len() / 2];
        let error = parse_ui_messages(half, "t", None).unwrap_err();
        assert!(
            matches!(&error, ParseError::NotJson(message) if message.starts_with("ui_messages.json is not complete JSON")),
            "{error}"
        );
        assert!(parse_ui_messages(b"", "t", None).is_err());
        assert_eq!(
            parse_ui_messages(br#"{"ts":1}"#, "t", None).unwrap_err(),
            ParseError::Shape("ui_messages.json is not a JSON array".into())
        );
        let empty = parse_ui_messages(b"[]", "t", None).unwrap();
        assert!(empty.turns.is_empty());
    }

    #[test]
    fn workspaces_come_from_the_history_items() {
        let roo = br#"{"id":"0199","number":1,"ts":1,"task":"x","workspace":"/home/u/roo","mode":"code","status":"active"}"#;
        assert_eq!(
            workspace_from_history_item(roo).as_deref(),
            Some("/home/u/roo")
        );
        assert_eq!(workspace_from_history_item(br#"{"workspace":""}"#), None);
        assert_eq!(workspace_from_history_item(b"{\"workspace\":"), None);
        let cline = br#"[{"id":"1767000000000","ts":1,"task":"a","cwdOnTaskInitialization":"/home/u/a"},
                         {"id":1767000000001,"ts":2,"task":"b","cwdOnTaskInitialization":"/home/u/b"},
                         {"id":"1767000000002","ts":3,"task":"c"}]"#;
        assert_eq!(
            workspace_from_task_history(cline, "1767000000000").as_deref(),
            Some("/home/u/a")
        );
        assert_eq!(
            workspace_from_task_history(cline, "1767000000001").as_deref(),
            Some("/home/u/b")
        );
        assert_eq!(workspace_from_task_history(cline, "1767000000002"), None);
        assert_eq!(workspace_from_task_history(cline, "nope"), None);
        assert_eq!(workspace_from_task_history(b"{}", "x"), None);
    }
}

#[cfg(test)]
mod fuzz {
    //! The reader never panics, whatever the bytes or the shape of the messages.
    use super::*;
    use proptest::prelude::*;

    fn message() -> impl Strategy<Value = Value> {
        let names = prop_oneof![
            Just("task"),
            Just("text"),
            Just("user_feedback"),
            Just("api_req_started"),
            Just("completion_result"),
            Just("followup"),
            Just("tool"),
            Just("resume_task"),
            Just("resume_completed_task"),
            Just("api_req_failed"),
            Just("error"),
            Just("other"),
        ];
        let text = prop_oneof![
            any::<String>(),
            Just(r#"{"cancelReason":"user_cancelled"}"#.to_string()),
            Just(r#"{"cancelReason":"streaming_failed","streamingFailedMessage":5}"#.to_string()),
            Just(r#"{"question":7}"#.to_string()),
        ];
        let ts = prop_oneof![
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            Just(Value::Null),
        ];
        (names, text, ts, any::<bool>(), any::<bool>()).prop_map(
            |(name, text, ts, say, partial)| {
                let kind = if say { "say" } else { "ask" };
                serde_json::json!({"ts": ts, "type": kind, kind: name, "text": text, "partial": partial})
            },
        )
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_ui_messages(&bytes, "t", None);
            let _ = workspace_from_history_item(&bytes);
            let _ = workspace_from_task_history(&bytes, "t");
        }

        #[test]
        fn any_messages_never_panic(messages in proptest::collection::vec(message(), 0..30)) {
            let bytes = Value::Array(messages).to_string().into_bytes();
            let snapshot = parse_ui_messages(&bytes, "t", None).unwrap();
            let mut differ = crate::observe::snapshot::SnapshotDiffer::new();
            let _ = differ.update(&snapshot);
        }
    }
}

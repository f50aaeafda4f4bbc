//! opencode's sessions as turns, from its database (`opencode.db`, tables `message` and `part`, each row's `data` JSON, 1.18.33): a user message opens a turn (its text parts are the prompt), the assistant messages after it give the steps (tool parts) and the reply (the last assistant message's text), its `time.completed`, `finish`, `error`, model and tokens the end and the usage.

use koru_protocol::{StepKind, StepOutcome, TurnStep, TurnUsage};
use serde_json::Value;

use crate::conversation::model::{step, step_error, Turn, TurnCollector};
use crate::observe::ParseError;

/// What opencode's database does not record per turn.
pub const NOT_RECORDED: &[&str] = &[];

/// One row of `message`: its id, creation time and `data`.
#[derive(Debug, Clone)]
pub struct MessageRow {
    pub id: String,
    pub created_ms: u64,
    pub data: Value,
}

/// One row of `part`: the message it belongs to and its `data`.
#[derive(Debug, Clone)]
pub struct PartRow {
    pub message_id: String,
    pub data: Value,
}

/// A session's rows → its turns, oldest first. Rows come ordered by creation time.
pub fn turns_from_rows(
    messages: &[MessageRow],
    parts: &[PartRow],
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    let mut open: Option<Turn> = None;
    for message in messages {
        let own_parts = parts.iter().filter(|p| p.message_id == message.id);
        let created = Some(message.created_ms);
        match message.data["role"].as_str() {
            Some("user") => {
                if let Some(mut turn) = open.take() {
                    turn.supersede();
                    out.push(turn);
                }
                let prompt: Vec<&str> = own_parts
                    .filter(|p| p.data["type"] == "text" && p.data["synthetic"] != true)
                    .filter_map(|p| p.data["text"].as_str())
                    .collect();
                open = Some(Turn::new(Some(prompt.join("\n")), created));
            }
            Some("assistant") => {
                let turn = open.get_or_insert_with(|| Turn::new(None, created));
                assistant_message(turn, &message.data, own_parts);
            }
            Some(other) => {
                return Err(ParseError::Shape(format!(
                    "message {} has role {other:?}",
                    message.id
                )))
            }
            None => {
                return Err(ParseError::Shape(format!(
                    "message {} has no role",
                    message.id
                )))
            }
        }
    }
    if let Some(turn) = open {
        out.push(turn);
    }
    Ok(())
}

fn assistant_message<'a>(turn: &mut Turn, data: &Value, parts: impl Iterator<Item = &'a PartRow>) {
    let mut text = Vec::new();
    for part in parts {
        match part.data["type"].as_str() {
            Some("text") if part.data["synthetic"] != true => {
                if let Some(t) = part.data["text"].as_str().filter(|t| !t.is_empty()) {
                    text.push(t.to_string());
                }
            }
            Some("tool") => turn.steps.push(tool_step(&part.data)),
            _ => {}
        }
    }
    if !text.is_empty() {
        turn.reply = Some(text.join("\n"));
    }
    if let (Some(provider), Some(model)) = (data["providerID"].as_str(), data["modelID"].as_str()) {
        turn.model = Some(format!("{provider}/{model}"));
    }
    let tokens = &data["tokens"];
    if tokens.is_object() {
        turn.add_usage(&TurnUsage {
            input_tokens: tokens["input"].as_u64(),
            output_tokens: tokens["output"].as_u64(),
            cache_read_tokens: tokens["cache"]["read"].as_u64(),
            cache_write_tokens: tokens["cache"]["write"].as_u64(),
            reasoning_tokens: tokens["reasoning"].as_u64(),
        });
    }
    turn.touch(
        data["time"]["completed"]
            .as_u64()
            .or(data["time"]["created"].as_u64()),
    );
    let error = &data["error"];
    if error.is_object() {
        if error["name"] == "MessageAbortedError" {
            turn.cancel();
        } else {
            let message = error["data"]["message"].as_str().unwrap_or("");
            turn.fail(
                message,
                error["name"]
                    .as_str()
                    .unwrap_or("opencode reported an error"),
            );
        }
        return;
    }
    // A message that ended asking for tools is followed by the next one of the same turn.
    let completed = data["time"]["completed"].is_u64();
    let finish = data["finish"].as_str().unwrap_or("");
    turn.state = if completed && finish != "tool-calls" && finish != "unknown" {
        koru_protocol::TurnState::Complete
    } else {
        koru_protocol::TurnState::InProgress
    };
}

/// A tool part (`{"tool", "state": {"status", "input", "output", "metadata", "error"}}`) as a step.
fn tool_step(part: &Value) -> TurnStep {
    let name = part["tool"].as_str().unwrap_or("tool");
    let state = &part["state"];
    let input = &state["input"];
    let path = input["filePath"]
        .as_str()
        .or_else(|| input["path"].as_str())
        .map(str::to_string);
    let kind = match name {
        "bash" => StepKind::Command,
        "edit" | "patch" | "multiedit" | "apply_patch" => StepKind::Edit,
        "write" => StepKind::Write,
        "read" | "list" | "ls" => StepKind::Read,
        "grep" | "glob" | "codesearch" => StepKind::Search,
        "webfetch" | "websearch" => StepKind::Web,
        "task" => StepKind::Agent,
        _ => StepKind::Tool,
    };
    let summary = match kind {
        StepKind::Command => input["command"].as_str().unwrap_or("").to_string(),
        StepKind::Search => input["pattern"].as_str().unwrap_or("").to_string(),
        StepKind::Web => input["url"]
            .as_str()
            .or(input["query"].as_str())
            .unwrap_or("")
            .to_string(),
        StepKind::Agent => input["description"].as_str().unwrap_or("").to_string(),
        _ => path
            .clone()
            .unwrap_or_else(|| crate::conversation::model::summarize_arguments(input)),
    };
    let mut step = step(kind, name, &summary);
    if kind == StepKind::Command {
        step.command = input["command"].as_str().map(str::to_string);
        step.exit_code = state["metadata"]["exit"].as_i64();
    }
    if let Some(path) = path {
        step.paths.push(path);
    }
    step.at_ms = state["time"]["start"].as_u64();
    step.outcome = match state["status"].as_str() {
        Some("completed") if step.exit_code.is_some_and(|code| code != 0) => StepOutcome::Error,
        Some("completed") => StepOutcome::Ok,
        Some("error") => {
            let error = state["error"].as_str().unwrap_or("");
            step.error = step_error(error);
            if error.contains("rejected") {
                StepOutcome::Rejected
            } else {
                StepOutcome::Error
            }
        }
        _ => StepOutcome::Unknown,
    };
    step
}

/// Reads session `session`'s rows from opencode's database at `path`, read-only.
pub fn read_rows(
    path: &std::path::Path,
    session: &str,
) -> Result<(Vec<MessageRow>, Vec<PartRow>), rusqlite::Error> {
    use rusqlite::OpenFlags;
    let db = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.busy_timeout(std::time::Duration::from_millis(500))?;
    let json = |text: String| serde_json::from_str(&text).unwrap_or(Value::Null);
    let messages = db
        .prepare("SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")?
        .query_map([session], |row| {
            Ok(MessageRow {
                id: row.get(0)?,
                created_ms: row.get::<_, i64>(1)?.max(0) as u64,
                data: json(row.get(2)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let parts = db
        .prepare(
            "SELECT message_id, data FROM part WHERE session_id = ?1 ORDER BY time_created, id",
        )?
        .query_map([session], |row| {
            Ok(PartRow {
                message_id: row.get(0)?,
                data: json(row.get(1)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((messages, parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::model::Keep;
    use serde_json::json;

    /// A real opencode 1.18.33 database layout, written by SQLite here with rows as
    /// opencode wrote them for a prompt, a reply, and a turn whose command needed
    /// permission (then ran).
    fn database(dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("opencode.db");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
             CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);",
        )
        .unwrap();
        let message = |id: &str, at: i64, data: Value| {
            db.execute(
                "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3)",
                rusqlite::params![id, at, data.to_string()],
            )
            .unwrap();
        };
        let part = |id: &str, message: &str, at: i64, data: Value| {
            db.execute(
                "INSERT INTO part VALUES (?1, ?2, 'ses_1', ?3, ?3, ?4)",
                rusqlite::params![id, message, at, data.to_string()],
            )
            .unwrap();
        };
        message(
            "msg_1",
            100,
            json!({"role": "user", "time": {"created": 100}}),
        );
        part(
            "prt_1",
            "msg_1",
            101,
            json!({"type": "text", "text": "hello\nthere"}),
        );
        message(
            "msg_2",
            110,
            json!({"role": "assistant", "providerID": "fake", "modelID": "fake-model", "tokens": {"input": 100, "output": 20, "reasoning": 0, "cache": {"read": 0, "write": 0}}, "time": {"created": 110, "completed": 150}, "finish": "stop"}),
        );
        part("prt_2", "msg_2", 111, json!({"type": "step-start"}));
        part(
            "prt_3",
            "msg_2",
            112,
            json!({"type": "text", "text": "You asked: hello. This is the fake model's answer."}),
        );
        message(
            "msg_3",
            200,
            json!({"role": "user", "time": {"created": 200}}),
        );
        part(
            "prt_4",
            "msg_3",
            201,
            json!({"type": "text", "text": "This needs permission"}),
        );
        message(
            "msg_4",
            210,
            json!({"role": "assistant", "providerID": "fake", "modelID": "fake-model", "time": {"created": 210, "completed": 230}, "finish": "tool-calls"}),
        );
        part(
            "prt_5",
            "msg_4",
            211,
            json!({"type": "text", "text": "I'll run `touch koru-permission-probe`."}),
        );
        part(
            "prt_6",
            "msg_4",
            212,
            json!({"type": "tool", "tool": "bash", "callID": "call_1", "state": {"status": "completed", "input": {"command": "touch koru-permission-probe", "description": "Create a probe file"}, "metadata": {"exit": 0}, "time": {"start": 220}}}),
        );
        message(
            "msg_5",
            240,
            json!({"role": "assistant", "providerID": "fake", "modelID": "fake-model", "time": {"created": 240}}),
        );
        path
    }

    #[test]
    fn a_sessions_rows_read_as_whole_turns_with_steps() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(dir.path());
        let (messages, parts) = read_rows(&path, "ses_1").unwrap();
        let mut out = TurnCollector::new(Keep::Last(10));
        turns_from_rows(&messages, &parts, &mut out).unwrap();
        let turns: Vec<Turn> = out.into_turns().into_iter().map(|(_, t)| t).collect();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].prompt.as_deref(), Some("hello\nthere"));
        assert_eq!(
            turns[0].reply.as_deref(),
            Some("You asked: hello. This is the fake model's answer.")
        );
        assert_eq!(turns[0].state, koru_protocol::TurnState::Complete);
        assert_eq!(turns[0].model.as_deref(), Some("fake/fake-model"));
        assert_eq!(turns[0].usage.as_ref().unwrap().input_tokens, Some(100));
        assert_eq!(
            (turns[0].started_ms, turns[0].ended_ms),
            (Some(100), Some(150))
        );
        let step = &turns[1].steps[0];
        assert_eq!(step.kind, StepKind::Command);
        assert_eq!(step.command.as_deref(), Some("touch koru-permission-probe"));
        assert_eq!((step.exit_code, step.outcome), (Some(0), StepOutcome::Ok));
        assert_eq!(
            turns[1].state,
            koru_protocol::TurnState::InProgress,
            "its last message is still open"
        );
        assert!(read_rows(&path, "ses_other").unwrap().0.is_empty());
    }
}

//! opencode's sessions as turns, from its database (`opencode.db`, tables `message` and `part`, each row's `data` JSON, 1.18.33): a user message opens a turn (its text parts are the prompt), the assistant messages after it give the steps (tool parts) and the reply (the last assistant message's text), its `time.completed`, `finish`, `error`, model and tokens the end and the usage.
//!
//! Items (`conversation::items`): the prompt (from its first text part's row; its text is
//! the whole prompt), each assistant text part, each tool part (a call, and its result once
//! its `state.status` is `completed` or `error`, from the same row), and an assistant
//! message's end (`time.completed` with a `finish` other than `tool-calls`, or its `error`)
//! from the message's row. Their source is the row: `{table: "message" | "part", row: <id>}`
//! and the SHA-256 of its `data` column's bytes as stored.

use koru_protocol::{StepKind, StepOutcome, TurnStep, TurnUsage};
use serde_json::Value;

use crate::conversation::items::{Item, ItemOutcome, SourceRecord};
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
    /// The row as an item's source (`read_rows_as_stored`; `None` otherwise).
    pub source: Option<SourceRecord>,
}

/// One row of `part`: its id, the message it belongs to and its `data`.
#[derive(Debug, Clone)]
pub struct PartRow {
    pub id: String,
    pub message_id: String,
    pub data: Value,
    /// The row as an item's source (`read_rows_as_stored`; `None` otherwise).
    pub source: Option<SourceRecord>,
}

/// A session's rows → its turns, oldest first, and their items from the rows' sources.
/// Rows come ordered by creation time.
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
                let texts: Vec<&PartRow> = own_parts
                    .filter(|p| p.data["type"] == "text" && p.data["synthetic"] != true)
                    .filter(|p| p.data["text"].is_string())
                    .collect();
                let prompt = texts
                    .iter()
                    .filter_map(|p| p.data["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                if let Some(source) = texts
                    .first()
                    .and_then(|p| p.source.as_ref())
                    .or(message.source.as_ref())
                {
                    out.set_source(source.clone());
                }
                out.item(Item::prompt(&prompt, created));
                open = Some(Turn::new(Some(prompt), created));
            }
            Some("assistant") => {
                let turn = open.get_or_insert_with(|| Turn::new(None, created));
                assistant_message(turn, message, own_parts, out);
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

fn assistant_message<'a>(
    turn: &mut Turn,
    message: &MessageRow,
    parts: impl Iterator<Item = &'a PartRow>,
    out: &mut TurnCollector,
) {
    let data = &message.data;
    let at_ms = data["time"]["created"].as_u64();
    let mut text = Vec::new();
    for part in parts {
        if let Some(source) = &part.source {
            out.set_source(source.clone());
        }
        match part.data["type"].as_str() {
            Some("text") if part.data["synthetic"] != true => {
                if let Some(t) = part.data["text"].as_str().filter(|t| !t.is_empty()) {
                    let started = part.data["time"]["start"].as_u64().or(at_ms);
                    out.item(Item::assistant_text(t, started));
                    text.push(t.to_string());
                }
            }
            Some("tool") => {
                let call = tool_step(&part.data);
                let call_id = part.data["callID"].as_str();
                out.item(Item::tool_call(&call, call_id));
                let state = &part.data["state"];
                if matches!(state["status"].as_str(), Some("completed" | "error")) {
                    let result = state["output"].as_str().or(state["error"].as_str());
                    let ended = state["time"]["end"].as_u64();
                    out.item(Item::step_result(&call, call_id, result, ended));
                }
                turn.steps.push(call);
            }
            _ => {}
        }
    }
    if let Some(source) = &message.source {
        out.set_source(source.clone());
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
    let ended = data["time"]["completed"].as_u64();
    if error.is_object() {
        if error["name"] == "MessageAbortedError" {
            turn.cancel();
            out.item(Item::turn_end(ItemOutcome::Cancelled, None, ended));
        } else {
            let message = error["data"]["message"].as_str().unwrap_or("");
            turn.fail(
                message,
                error["name"]
                    .as_str()
                    .unwrap_or("opencode reported an error"),
            );
            out.item(Item::turn_end(
                ItemOutcome::Failed,
                turn.error.as_deref(),
                ended,
            ));
        }
        return;
    }
    // A message that ended asking for tools is followed by the next one of the same turn.
    let finish = data["finish"].as_str().unwrap_or("");
    turn.state = if ended.is_some() && finish != "tool-calls" && finish != "unknown" {
        out.item(Item::turn_end(ItemOutcome::Complete, None, ended));
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
    read_session_rows(path, session, false)
}

/// `read_rows`, each row with its source: its table and id, and the SHA-256 of its `data`
/// as stored (for the items' digests).
pub fn read_rows_as_stored(
    path: &std::path::Path,
    session: &str,
) -> Result<(Vec<MessageRow>, Vec<PartRow>), rusqlite::Error> {
    read_session_rows(path, session, true)
}

fn read_session_rows(
    path: &std::path::Path,
    session: &str,
    sources: bool,
) -> Result<(Vec<MessageRow>, Vec<PartRow>), rusqlite::Error> {
    use rusqlite::types::ValueRef;
    use rusqlite::OpenFlags;
    let db = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.busy_timeout(std::time::Duration::from_millis(500))?;
    // The message and part rows of one snapshot of the database.
    let read = db.unchecked_transaction()?;
    // A `data` column's JSON and, with `sources`, the row as a source.
    let data = |table: &str, id: &str, value: ValueRef<'_>| {
        let bytes = match value {
            ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes,
            _ => b"",
        };
        let json = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        (json, sources.then(|| SourceRecord::row(table, id, bytes)))
    };
    let messages = read
        .prepare("SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")?
        .query_map([session], |row| {
            let id: String = row.get(0)?;
            let (data, source) = data("message", &id, row.get_ref(2)?);
            Ok(MessageRow {
                created_ms: row.get::<_, i64>(1)?.max(0) as u64,
                data,
                source,
                id,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let parts = read
        .prepare(
            "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY time_created, id",
        )?
        .query_map([session], |row| {
            let id: String = row.get(0)?;
            let (data, source) = data("part", &id, row.get_ref(2)?);
            Ok(PartRow {
                message_id: row.get(1)?,
                data,
                source,
                id,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    drop(read);
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

    /// The session opencode 1.18.33 recorded in `tests/corpus/opencode/opencode.db`
    /// (PROVENANCE.md): a text answer, then a turn that ran `ls`.
    const CORPUS_SESSION: &str = "ses_daf089fc7ffebgMQewxN9P5YPj";

    #[test]
    fn the_corpus_database_reads_as_two_whole_turns() {
        let path = crate::conversation::model::corpus::folder("opencode").join("opencode.db");
        let (messages, parts) = read_rows(&path, CORPUS_SESSION).unwrap();
        let mut out = TurnCollector::new(Keep::Last(10));
        turns_from_rows(&messages, &parts, &mut out).unwrap();
        let turns: Vec<Turn> = out.into_turns().into_iter().map(|(_, t)| t).collect();
        assert_eq!(turns.len(), 2);
        assert_eq!(
            turns[0].prompt.as_deref(),
            Some("\"hello from the corpus ✓\""),
            "as `opencode run` stored it"
        );
        assert_eq!(turns[0].state, koru_protocol::TurnState::Complete);
        assert_eq!(turns[1].reply.as_deref(), Some("`ls` printed: notes.txt."));
        assert_eq!(turns[1].state, koru_protocol::TurnState::Complete);
        let step = &turns[1].steps[0];
        assert_eq!(
            (step.command.as_deref(), step.exit_code, step.outcome),
            (Some("ls"), Some(0), StepOutcome::Ok)
        );
        assert_eq!(turns[1].model.as_deref(), Some("fake/fake-model"));
    }

    #[test]
    fn the_corpus_items_are_as_expected() {
        crate::conversation::model::corpus::check_items(
            "opencode",
            crate::observe::stores::opencode::STORE,
            &[("opencode.db", CORPUS_SESSION)],
        );
        let folder = crate::conversation::model::corpus::folder("opencode");
        for side in ["opencode.db-journal", "opencode.db-wal", "opencode.db-shm"] {
            assert!(!folder.join(side).exists(), "a read wrote {side}");
        }
    }

    #[test]
    fn a_sessions_items_are_its_rows_data_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(dir.path());
        {
            // A turn the user interrupted, in a session of its own, its data as opencode
            // might space it (bytes as stored are not what re-serializing gives).
            let db = rusqlite::Connection::open(&path).unwrap();
            db.execute_batch(
                r#"INSERT INTO message VALUES ('msg_6', 'ses_2', 300, 300, '{"role": "user", "time": {"created": 300}}');
                   INSERT INTO part VALUES ('prt_7', 'msg_6', 'ses_2', 301, 301, '{"type": "text", "text": "stop me"}');
                   INSERT INTO message VALUES ('msg_7', 'ses_2', 310, 310, '{"role": "assistant", "time": {"created": 310, "completed": 320}, "error": {"name": "MessageAbortedError", "data": {"message": "aborted"}}}');
                   INSERT INTO part VALUES ('prt_8', 'msg_7', 'ses_2', 311, 311, '{"type": "tool", "tool": "bash", "callID": "call_2", "state": {"status": "error", "input": {"command": "sleep 100"}, "error": "Tool execution aborted", "time": {"start": 312, "end": 319}}}');"#,
            )
            .unwrap();
        }
        let stored = |table: &str, id: &str| -> Vec<u8> {
            let db = rusqlite::Connection::open(&path).unwrap();
            db.query_row(
                &format!("SELECT CAST(data AS BLOB) FROM {table} WHERE id = ?1"),
                [id],
                |row| row.get(0),
            )
            .unwrap()
        };
        let items_of = |session: &str| {
            let mut items = Vec::new();
            crate::conversation::read::read_items(
                crate::observe::stores::opencode::STORE,
                &path,
                session,
                |item| items.push(item),
            )
            .unwrap();
            items
        };
        let mut read = Vec::new();
        for session in ["ses_1", "ses_2"] {
            for item in items_of(session) {
                let SourceRecord::Row {
                    table,
                    row,
                    bytes,
                    sha256,
                    pointer: None,
                    file: None,
                } = &item.source
                else {
                    panic!("{item:?}");
                };
                let value = stored(table, row);
                assert_eq!(bytes, &(value.len() as u64));
                assert_eq!(sha256, &crate::journal::canonical::sha256_hex(&value));
                read.push((
                    item.turn,
                    item.kind,
                    format!("{table}/{row}"),
                    item.outcome,
                    item.part,
                ));
            }
        }
        use crate::conversation::items::ItemKind::*;
        let rows = |s: &str| s.to_string();
        assert_eq!(
            read,
            [
                (0, Prompt, rows("part/prt_1"), None, 0),
                (0, AssistantText, rows("part/prt_3"), None, 0),
                (
                    0,
                    TurnEnd,
                    rows("message/msg_2"),
                    Some(ItemOutcome::Complete),
                    0
                ),
                (1, Prompt, rows("part/prt_4"), None, 0),
                (1, AssistantText, rows("part/prt_5"), None, 0),
                (1, ToolCall, rows("part/prt_6"), Some(ItemOutcome::Ok), 0),
                (1, ToolResult, rows("part/prt_6"), Some(ItemOutcome::Ok), 1),
                (0, Prompt, rows("part/prt_7"), None, 0),
                (0, ToolCall, rows("part/prt_8"), Some(ItemOutcome::Error), 0),
                (
                    0,
                    ToolResult,
                    rows("part/prt_8"),
                    Some(ItemOutcome::Error),
                    1
                ),
                (
                    0,
                    TurnEnd,
                    rows("message/msg_7"),
                    Some(ItemOutcome::Cancelled),
                    0
                ),
            ]
        );
        let items = items_of("ses_2");
        assert_eq!(
            items[0].text_sha256.as_deref(),
            Some(crate::journal::canonical::sha256_hex(b"stop me").as_str())
        );
        assert_eq!(items[1].call_id.as_deref(), Some("call_2"));
        assert_eq!((items[2].at_ms, items[3].at_ms), (Some(319), Some(320)));
        assert_eq!(
            items[2].text_sha256.as_deref(),
            Some(crate::journal::canonical::sha256_hex(b"Tool execution aborted").as_str())
        );
    }
}

//! Cursor's chats read back as turns from the JSON of its SQLite rows: a composer (`composerData:<id>` and its `bubbleId:<id>:<bubble>` rows, or a 2024 per-workspace composer with its bubbles inline) or a tab of the legacy chat panel, with the prompt, the final answer whole, the agent's tool calls and proposed edits, times, model and token counts where Cursor keeps them.
//!
//! The rows are fetched by `observe::stores::cursor::CursorDb` (`composer_rows`,
//! `item_value`, and with their bytes as stored `composer_rows_as_stored`, `item_bytes`),
//! read-only the careful way; these functions are pure. Where turns begin,
//! the prompt, the reply (the last assistant bubble with text) and the state (the composer's
//! `status` for the last turn) are the observer's own rules (`composer_turns`,
//! `legacy_tab_turns` in `observe::stores::cursor`), so a drive's prompt digest finds its
//! turn.
//!
//! Format facts (docs/observers.md "Cursor", research notes §4; tests/corpus/cursor, a real
//! per-workspace database of November 2024):
//! - 2024 inline composers (`ItemTable` `composer.composerData`, `allComposers[]`): bubbles
//!   `{type: 1 | 2, bubbleId, text, codeBlocks?}` with no time of their own; an assistant
//!   bubble's `codeBlocks: [{uri, version, codeBlockIdx}]` are the file edits the composer
//!   proposed, and the composer's `codeBlockData[<uri.external>][]` `{version, status}` says
//!   what became of each: `accepted`, `rejected`, `cancelled`, `completed` (generated, not
//!   decided), `outdated` (superseded). The composer has `createdAt` and, once named,
//!   `lastUpdatedAt`; no model, no token counts.
//! - Global composers (Cursor 2025 on, third-party reports): assistant bubbles carry
//!   `toolFormerData {name, rawArgs | params (JSON text), status, userDecision?, result?}`,
//!   `tokenCount {inputTokens, outputTokens}` (rarely filled) and `createdAt` (often
//!   missing); the composer's `modelConfig.modelName` names the model.
//! - The legacy panel (`workbench.panel.aichat.view.aichat.chatdata`): tabs of `{type: user
//!   | ai, text, modelType}` bubbles (`modelType` `claude-3.5-sonnet` in the corpus), dated
//!   only by the tab's `lastSendTime`, with no tools.
//!
//! A turn's times are its bubbles' `createdAt`; when none has one, the last turn of a
//! composer ends at its `lastUpdatedAt`, and the last turn of a legacy tab starts at its
//! `lastSendTime`. Earlier turns are then undated rather than dated wrongly.
//!
//! Items (`conversation::items`): a turn's prompt bubble, each assistant bubble's text, its
//! tool call (`toolFormerData`, with its `result` as the call's result when written) or
//! proposed edits (`codeBlocks`), and the last turn's end from the composer's `status`
//! (`completed`, `error`, `aborted`). Each comes from the row that holds it, its digest that
//! of the row's value bytes as stored: a `bubbleId:<id>:<bubble>` row of `cursorDiskKV`, or
//! the `composerData:<id>` row (its `status`, bubbles it keeps inline) with the element as
//! `pointer`; for the per-workspace chats, the `ItemTable` row of the composer list
//! (`/allComposers/<i>/conversation/<j>`) or of the legacy panel (`/tabs/<t>/bubbles/<j>`).

use std::collections::HashMap;

use koru_protocol::{StepKind, StepOutcome, TurnStep, TurnUsage};
use serde_json::Value;

use crate::conversation::items::{pointer, Item, ItemOutcome, SourceRecord};
use crate::conversation::model::{
    set_state_from_snapshot, step, step_error, summarize_arguments, time_ms, uri_path, Turn,
    TurnCollector,
};
use crate::observe::snapshot::TurnState as Observed;
use crate::observe::stores::cursor::{composer_turns, legacy_tab_turns, StoredRows};
use crate::observe::ParseError;

/// The table of the global database's composer and bubble rows.
pub const ROWS_TABLE: &str = "cursorDiskKV";

/// The table of the per-workspace databases' values (the composer list, the legacy panel).
pub const ITEM_TABLE: &str = "ItemTable";

/// Where a composer's records are, for its items (empty for a read without items).
#[derive(Debug, Clone, Default)]
pub struct ComposerSources {
    /// The record that holds the composer: its own `composerData:<id>` row, or the
    /// per-workspace composer list's row.
    pub record: Option<SourceRecord>,
    /// The composer's place in that record's value (RFC 6901): empty for a row of its own,
    /// `/allComposers/<i>` in the list.
    pub at: String,
    /// Its bubble rows, by bubble id.
    pub bubbles: HashMap<String, SourceRecord>,
}

impl ComposerSources {
    /// A composer's own rows (`CursorDb::composer_rows_as_stored`), from their bytes as
    /// stored.
    pub fn of_rows(stored: &StoredRows) -> Self {
        let row = |stored: &crate::observe::stores::cursor::StoredRow| {
            SourceRecord::row(ROWS_TABLE, &stored.key, &stored.value)
        };
        ComposerSources {
            record: Some(row(&stored.composer)),
            at: String::new(),
            bubbles: stored
                .bubbles
                .iter()
                .map(|(id, stored)| (id.clone(), row(stored)))
                .collect(),
        }
    }

    /// The same rows, in the database `file` (not the chat's own source file).
    pub fn in_file(mut self, file: &str) -> Self {
        self.record = self.record.map(|record| record.in_file(file.to_string()));
        for record in self.bubbles.values_mut() {
            *record = record.clone().in_file(file.to_string());
        }
        self
    }

    /// The composer's record, at `inner` below the composer.
    fn composer_at(&self, inner: &str) -> Option<SourceRecord> {
        let at = &self.at;
        self.record
            .clone()
            .map(|record| record.at(format!("{at}{inner}")))
    }

    /// Each bubble's record, by the bubble's address in `composer` or `bubbles` (the values
    /// the observer's `composer_turns` groups by turn).
    fn of_bubbles(
        &self,
        composer: &Value,
        bubbles: &HashMap<String, Value>,
    ) -> HashMap<*const Value, SourceRecord> {
        let mut found = HashMap::new();
        for (id, bubble) in bubbles {
            if let Some(record) = self.bubbles.get(id) {
                found.insert(bubble as *const Value, record.clone());
            }
        }
        for (index, bubble) in composer
            .get("conversation")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(record) = self.composer_at(&format!("/conversation/{index}")) {
                found.insert(bubble as *const Value, record);
            }
        }
        for (id, bubble) in composer
            .get("conversationMap")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(record) = self.composer_at(&pointer(&["conversationMap", id])) {
                found.insert(bubble as *const Value, record);
            }
        }
        found
    }
}

/// Sets `bubble`'s record (from `records`) as the source of the next items.
fn bubble_source(
    records: &HashMap<*const Value, SourceRecord>,
    bubble: &Value,
    out: &mut TurnCollector,
) {
    if let Some(record) = records.get(&(bubble as *const Value)) {
        out.set_source(record.clone());
    }
}

/// What Cursor's composers do not record reliably: times (2024 bubbles have none, later
/// ones often miss them), the model (2024), token counts (rarely filled) and exit statuses.
pub const NOT_RECORDED: &[&str] = &["timestamps", "model", "usage", "exit_status"];

/// What the legacy chat panel does not record: it is a chat without tools, dated once per
/// tab, with no token counts.
pub const LEGACY_NOT_RECORDED: &[&str] = &[
    "timestamps",
    "usage",
    "steps",
    "step_outcomes",
    "exit_status",
    "file_paths",
];

/// One composer — its `composerData` JSON and its bubble rows by bubble id, as
/// `CursorDb::composer_rows` returns them (an inline composer needs none) — → its turns,
/// oldest first. `Err` for a value that is not a composer (no `composerId`), or an empty
/// draft (no conversation, no name, status `none`), which is not a chat.
pub fn turns_from_composer(
    composer: &Value,
    bubbles: &HashMap<String, Value>,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    read_composer(composer, bubbles, &ComposerSources::default(), out)
}

/// `turns_from_composer`, its items reported from `sources`.
pub fn read_composer(
    composer: &Value,
    bubbles: &HashMap<String, Value>,
    sources: &ComposerSources,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    let Some((snapshot, groups)) = composer_turns(composer, bubbles) else {
        return Err(ParseError::Shape(
            "not a composer with a conversation (no composerId, or an empty draft)".into(),
        ));
    };
    let model = composer
        .get("modelConfig")
        .and_then(|config| config.get("modelName"))
        .and_then(Value::as_str)
        .filter(|model| !model.trim().is_empty())
        .map(str::to_string);
    let updated_ms = composer.get("lastUpdatedAt").and_then(time_ms);
    let created = created_files(composer);
    let count = snapshot.turns.len();
    let records = if out.wants_items() {
        sources.of_bubbles(composer, bubbles)
    } else {
        HashMap::new()
    };
    for (position, (observed, group)) in snapshot.turns.iter().zip(groups).enumerate() {
        let mut turn = Turn::new(observed.prompt.clone(), None);
        let (prompt_bubble, answers) = match observed.prompt {
            Some(_) => (group.first().copied(), group.get(1..).unwrap_or_default()),
            None => (None, group.as_slice()),
        };
        turn.started_ms = prompt_bubble
            .and_then(|bubble| bubble.get("createdAt"))
            .and_then(time_ms);
        turn.ended_ms = group
            .iter()
            .filter_map(|bubble| bubble.get("createdAt").and_then(time_ms))
            .max()
            .or(turn.started_ms);
        if turn.ended_ms.is_none() && position + 1 == count {
            turn.ended_ms = updated_ms;
        }
        turn.reply = Some(observed.reply.clone()).filter(|reply| !reply.trim().is_empty());
        turn.model = model.clone();
        if let (Some(bubble), Some(prompt)) = (prompt_bubble, observed.prompt.as_deref()) {
            bubble_source(&records, bubble, out);
            out.item(Item::prompt(prompt, turn.started_ms));
        }
        for bubble in answers {
            let at_ms = bubble.get("createdAt").and_then(time_ms);
            bubble_source(&records, bubble, out);
            if let Some(text) = bubble
                .get("text")
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
            {
                out.item(Item::assistant_text(text, at_ms));
            }
            if let Some(usage) = bubble.get("tokenCount").and_then(token_usage) {
                turn.add_usage(&usage);
            }
            if let Some(data) = bubble.get("toolFormerData").filter(|data| data.is_object()) {
                let mut call = tool_step(data);
                call.at_ms = at_ms;
                let call_id = data.get("toolCallId").and_then(Value::as_str);
                out.item(Item::tool_call(&call, call_id));
                if out.wants_items() {
                    if let Some(result) = tool_result(data) {
                        out.item(Item::step_result(&call, call_id, Some(&result), at_ms));
                    }
                }
                turn.steps.push(call);
                continue;
            }
            for block in bubble
                .get("codeBlocks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(mut edit) = code_block_step(composer, block, &created) {
                    edit.at_ms = at_ms;
                    out.item(Item::tool_call(&edit, None));
                    turn.steps.push(edit);
                }
            }
        }
        if position + 1 == count && out.wants_items() {
            if let (Some(end), Some(record)) = (
                composer_end(composer, &observed.state),
                sources.composer_at("/status"),
            ) {
                out.set_source(record);
                out.item(end);
            }
        }
        set_state_from_snapshot(&mut turn, &observed.state);
        out.push(turn);
    }
    Ok(())
}

/// The last turn's end as the composer's `status` records it (only a status that says so,
/// not an end the observer infers).
fn composer_end<'a>(composer: &Value, state: &'a Observed) -> Option<Item<'a>> {
    let status = composer.get("status").and_then(Value::as_str)?;
    match (status, state) {
        ("completed", Observed::Completed) => {
            Some(Item::turn_end(ItemOutcome::Complete, None, None))
        }
        ("error", Observed::Failed(why)) => {
            Some(Item::turn_end(ItemOutcome::Failed, Some(why), None))
        }
        ("aborted" | "cancelled" | "canceled", Observed::Cancelled) => {
            Some(Item::turn_end(ItemOutcome::Cancelled, None, None))
        }
        _ => None,
    }
}

/// What a tool call gave back (`toolFormerData.result`: JSON text, or a value); `None`
/// before it has one.
fn tool_result(data: &Value) -> Option<String> {
    match data.get("result")? {
        Value::Null => None,
        Value::String(text) if text.is_empty() => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// The per-workspace composer list (`ItemTable` `composer.composerData`, Cursor 2024) → the
/// turns of the composer `composer_id`, whose bubbles it keeps inline. `Err` when it keeps
/// no such composer (a 2025 header's chat is the global database's).
pub fn turns_from_inline_composer(
    composers: &Value,
    composer_id: &str,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    read_inline_composer(composers, composer_id, None, out)
}

/// `turns_from_inline_composer`, its items reported from `record` (the composer list's row,
/// when items are wanted).
pub fn read_inline_composer(
    composers: &Value,
    composer_id: &str,
    record: Option<SourceRecord>,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    // The observer lists the first composer of an id that has a `conversation` array.
    let (index, composer) = composers
        .get("allComposers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, composer)| composer.get("conversation").is_some_and(Value::is_array))
        .find(|(_, composer)| {
            composer.get("composerId").and_then(Value::as_str) == Some(composer_id)
        })
        .ok_or_else(|| {
            ParseError::Shape(format!(
                "no composer {composer_id} with an inline conversation"
            ))
        })?;
    let sources = ComposerSources {
        record,
        at: format!("/allComposers/{index}"),
        bubbles: HashMap::new(),
    };
    read_composer(composer, &HashMap::new(), &sources, out)
}

/// The legacy chat panel (`ItemTable` `workbench.panel.aichat.view.aichat.chatdata`) → the
/// turns of its tab `tab_id`. `Err` when the panel has no such tab.
pub fn turns_from_legacy_tab(
    chatdata: &Value,
    tab_id: &str,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    read_legacy_tab(chatdata, tab_id, None, out)
}

/// `turns_from_legacy_tab`, its items reported from `record` (the panel's row, when items
/// are wanted): each turn's prompt bubble and the texts of its `ai` bubbles.
pub fn read_legacy_tab(
    chatdata: &Value,
    tab_id: &str,
    record: Option<SourceRecord>,
    out: &mut TurnCollector,
) -> Result<(), ParseError> {
    let (index, tab) = chatdata
        .get("tabs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .find(|(_, tab)| tab.get("tabId").and_then(Value::as_str) == Some(tab_id))
        .ok_or_else(|| ParseError::Shape(format!("no chat panel tab {tab_id}")))?;
    let (snapshot, groups) = legacy_tab_turns(tab, None)
        .ok_or_else(|| ParseError::Shape(format!("chat panel tab {tab_id} has no tabId")))?;
    let records: HashMap<*const Value, SourceRecord> = match (&record, out.wants_items()) {
        (Some(record), true) => tab
            .get("bubbles")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(at, bubble)| {
                let inner = format!("/tabs/{index}/bubbles/{at}");
                (bubble as *const Value, record.clone().at(inner))
            })
            .collect(),
        _ => HashMap::new(),
    };
    let sent_ms = tab.get("lastSendTime").and_then(time_ms);
    let count = snapshot.turns.len();
    for (position, (observed, group)) in snapshot.turns.iter().zip(groups).enumerate() {
        let last = position + 1 == count;
        let mut turn = Turn::new(observed.prompt.clone(), if last { sent_ms } else { None });
        turn.reply = Some(observed.reply.clone()).filter(|reply| !reply.trim().is_empty());
        for (at, bubble) in group.iter().enumerate() {
            bubble_source(&records, bubble, out);
            let text = bubble.get("text").and_then(Value::as_str).unwrap_or("");
            match (at, observed.prompt.as_deref()) {
                (0, Some(prompt)) => out.item(Item::prompt(prompt, turn.started_ms)),
                _ if !text.trim().is_empty() => out.item(Item::assistant_text(text, None)),
                _ => {}
            }
        }
        turn.model = group
            .iter()
            .filter_map(|bubble| bubble.get("modelType").and_then(Value::as_str))
            .rfind(|model| !model.trim().is_empty())
            .map(str::to_string);
        set_state_from_snapshot(&mut turn, &observed.state);
        out.push(turn);
    }
    Ok(())
}

/// A bubble's `tokenCount`; `None` when it counts nothing (most bubbles hold zeros).
fn token_usage(count: &Value) -> Option<TurnUsage> {
    let tokens = |key: &str| count.get(key).and_then(Value::as_u64).filter(|n| *n > 0);
    let usage = TurnUsage {
        input_tokens: tokens("inputTokens"),
        output_tokens: tokens("outputTokens"),
        ..TurnUsage::default()
    };
    (usage != TurnUsage::default()).then_some(usage)
}

/// The files the composer created (`newlyCreatedFiles`: URIs, or `{uri}`), as paths.
fn created_files(composer: &Value) -> Vec<String> {
    composer
        .get("newlyCreatedFiles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|file| uri_path(file.get("uri").unwrap_or(file)))
        .collect()
}

/// A proposed edit (an assistant bubble's `codeBlocks[]` entry with a `uri`) → its step,
/// its outcome from the composer's `codeBlockData`.
fn code_block_step(composer: &Value, block: &Value, created: &[String]) -> Option<TurnStep> {
    let uri = block.get("uri")?;
    let path = uri_path(uri)?;
    let kind = if created.contains(&path) {
        StepKind::Write
    } else {
        StepKind::Edit
    };
    let mut edit = step(kind, "codeBlock", &path);
    edit.paths.push(path);
    let version = block.get("version").and_then(Value::as_u64);
    let status = uri
        .get("external")
        .and_then(Value::as_str)
        .and_then(|key| composer.get("codeBlockData")?.get(key))
        .and_then(Value::as_array)
        .and_then(|versions| {
            versions
                .iter()
                .find(|entry| entry.get("version").and_then(Value::as_u64) == version)
        })
        .and_then(|entry| entry.get("status"))
        .and_then(Value::as_str);
    edit.outcome = match status {
        Some("accepted") => StepOutcome::Ok,
        Some("rejected" | "cancelled" | "canceled") => StepOutcome::Rejected,
        _ => StepOutcome::Unknown,
    };
    Some(edit)
}

/// JSON that Cursor may store as text.
fn json_of(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(text)) => serde_json::from_str(text).unwrap_or(Value::Null),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// A `toolFormerData` → its step.
fn tool_step(data: &Value) -> TurnStep {
    let name = ["name", "tool"]
        .iter()
        .find_map(|key| data.get(*key).and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .unwrap_or("tool");
    let mut args = json_of(data.get("rawArgs"));
    if !args.is_object() {
        args = json_of(data.get("params"));
    }
    let text_of = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let lower = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| lower.contains(word));
    let kind = if has(&["terminal", "shell", "run_command"]) {
        StepKind::Command
    } else if has(&["create_file", "write"]) {
        StepKind::Write
    } else if has(&["edit", "replace", "patch", "delete_file"]) {
        StepKind::Edit
    } else if has(&["read", "list_dir"]) {
        StepKind::Read
    } else if has(&["search", "grep", "glob"]) && !has(&["web"]) {
        StepKind::Search
    } else if has(&["web", "fetch"]) {
        StepKind::Web
    } else if has(&["task", "agent"]) {
        StepKind::Agent
    } else {
        StepKind::Tool
    };
    let path = [
        "target_file",
        "targetFile",
        "file_path",
        "path",
        "relative_workspace_path",
        "target_directory",
        "targetDirectory",
    ]
    .iter()
    .find_map(|key| text_of(key));
    let command = (kind == StepKind::Command)
        .then(|| text_of("command"))
        .flatten();
    let summary = command
        .or(path)
        .or_else(|| {
            [
                "query",
                "search_term",
                "pattern",
                "glob_pattern",
                "url",
                "description",
            ]
            .iter()
            .find_map(|key| text_of(key))
        })
        .map_or_else(|| summarize_arguments(&args), str::to_string);
    let mut call = step(kind, name, &summary);
    call.command = command.map(str::to_string);
    call.paths = path.map(str::to_string).into_iter().collect();
    let status = data.get("status").and_then(Value::as_str);
    let declined = data.get("userDecision").and_then(Value::as_str) == Some("rejected");
    call.outcome = match status {
        _ if declined => StepOutcome::Rejected,
        Some("completed" | "success" | "done") => StepOutcome::Ok,
        Some("error" | "failed") => StepOutcome::Error,
        Some("cancelled" | "canceled" | "aborted" | "rejected") => StepOutcome::Rejected,
        _ => StepOutcome::Unknown,
    };
    if call.outcome == StepOutcome::Error {
        let result = json_of(data.get("result"));
        call.error = data
            .get("error")
            .and_then(Value::as_str)
            .or_else(|| result.get("error").and_then(Value::as_str))
            .and_then(step_error);
    }
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::items::{ConversationItem, ItemKind};
    use crate::conversation::model::corpus;
    use crate::conversation::Keep;
    use crate::observe::stores::cursor::{CursorDb, INLINE_COMPOSERS_KEY, LEGACY_CHAT_KEY};
    use koru_protocol::TurnState;
    use serde_json::json;

    fn collect(read: impl FnOnce(&mut TurnCollector) -> Result<(), ParseError>) -> Vec<Turn> {
        let mut out = TurnCollector::new(Keep::Last(usize::MAX));
        read(&mut out).unwrap();
        out.into_turns().into_iter().map(|(_, t)| t).collect()
    }

    /// A global composer as Cursor 2025 writes it: headers in the composer row, bubbles in
    /// rows of their own, tool calls in `toolFormerData`.
    fn global_composer(status: &str) -> (Value, HashMap<String, Value>) {
        let composer = json!({
            "_v": 10, "composerId": "c1", "name": "Fix login", "status": status,
            "createdAt": 1766700000000u64, "lastUpdatedAt": 1766700090000u64,
            "modelConfig": {"modelName": "claude-4-sonnet", "maxMode": false},
            "fullConversationHeadersOnly": [
                {"bubbleId": "u1", "type": 1}, {"bubbleId": "a1", "type": 2},
                {"bubbleId": "a2", "type": 2}, {"bubbleId": "a3", "type": 2},
                {"bubbleId": "a4", "type": 2}, {"bubbleId": "u2", "type": 1},
                {"bubbleId": "a5", "type": 2}
            ]
        });
        let bubbles = [
            json!({"type": 1, "bubbleId": "u1", "text": "why does login 500?", "createdAt": "2025-12-26T10:00:00.000Z"}),
            json!({"type": 2, "bubbleId": "a1", "text": "", "createdAt": "2025-12-26T10:00:05.000Z",
                   "toolFormerData": {"tool": 15, "name": "run_terminal_cmd", "status": "completed",
                                      "rawArgs": "{\"command\":\"npm test\",\"is_background\":false}"},
                   "tokenCount": {"inputTokens": 0, "outputTokens": 0}}),
            json!({"type": 2, "bubbleId": "a2", "text": "", "createdAt": "2025-12-26T10:00:10.000Z",
                   "toolFormerData": {"name": "read_file", "status": "completed",
                                      "params": "{\"target_file\":\"src/login.ts\"}"}}),
            json!({"type": 2, "bubbleId": "a3", "text": "", "createdAt": "2025-12-26T10:00:20.000Z",
                   "toolFormerData": {"name": "edit_file", "status": "error",
                                      "rawArgs": "{\"target_file\":\"src/login.ts\",\"instructions\":\"set the cookie\"}",
                                      "result": "{\"error\":\"file is read-only\"}"}}),
            json!({"type": 2, "bubbleId": "a4", "text": "The session cookie is unset.", "createdAt": "2025-12-26T10:00:40.000Z",
                   "tokenCount": {"inputTokens": 1900, "outputTokens": 268}}),
            json!({"type": 1, "bubbleId": "u2", "text": "delete the old sessions", "createdAt": "2025-12-26T10:01:00.000Z"}),
            json!({"type": 2, "bubbleId": "a5", "text": "Deleting them.", "createdAt": "2025-12-26T10:01:05.000Z",
                   "toolFormerData": {"name": "run_terminal_cmd", "status": "loading",
                                      "rawArgs": "{\"command\":\"rm -rf sessions\"}"}}),
        ];
        let bubbles = bubbles
            .into_iter()
            .map(|b| (b["bubbleId"].as_str().unwrap().to_string(), b))
            .collect();
        (composer, bubbles)
    }

    #[test]
    fn a_global_composer_has_its_tool_calls_times_model_and_tokens() {
        let (composer, bubbles) = global_composer("completed");
        let turns = collect(|out| turns_from_composer(&composer, &bubbles, out));
        assert_eq!(turns.len(), 2);
        let first = &turns[0];
        assert_eq!(first.prompt.as_deref(), Some("why does login 500?"));
        assert_eq!(first.reply.as_deref(), Some("The session cookie is unset."));
        assert_eq!(first.state, TurnState::Complete);
        assert_eq!(first.model.as_deref(), Some("claude-4-sonnet"));
        assert_eq!(first.started_ms, Some(1_766_743_200_000));
        assert_eq!(first.ended_ms, Some(1_766_743_240_000));
        assert_eq!(
            first.usage,
            Some(TurnUsage {
                input_tokens: Some(1900),
                output_tokens: Some(268),
                ..TurnUsage::default()
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
                (
                    StepKind::Command,
                    "run_terminal_cmd",
                    "npm test",
                    StepOutcome::Ok
                ),
                (StepKind::Read, "read_file", "src/login.ts", StepOutcome::Ok),
                (
                    StepKind::Edit,
                    "edit_file",
                    "src/login.ts",
                    StepOutcome::Error
                ),
            ]
        );
        assert_eq!(first.steps[0].command.as_deref(), Some("npm test"));
        assert_eq!(first.steps[2].paths, ["src/login.ts"]);
        assert_eq!(first.steps[2].error.as_deref(), Some("file is read-only"));
        assert_eq!(first.steps[1].at_ms, Some(1_766_743_210_000));
        // The composer completed: the last turn's running command is left without outcome.
        assert_eq!(turns[1].state, TurnState::Complete);
        assert_eq!(turns[1].steps[0].outcome, StepOutcome::Unknown);
    }

    #[test]
    fn generating_errored_and_aborted_composers() {
        let (composer, bubbles) = global_composer("generating");
        let turns = collect(|out| turns_from_composer(&composer, &bubbles, out));
        assert_eq!(turns[1].state, TurnState::InProgress);
        assert_eq!(turns[0].state, TurnState::Complete);

        let (mut composer, bubbles) = global_composer("error");
        composer["error"] = json!({"message": "model overloaded"});
        let turns = collect(|out| turns_from_composer(&composer, &bubbles, out));
        assert_eq!(turns[1].state, TurnState::Failed);
        assert_eq!(turns[1].error.as_deref(), Some("model overloaded"));

        let (composer, bubbles) = global_composer("aborted");
        let turns = collect(|out| turns_from_composer(&composer, &bubbles, out));
        assert_eq!(turns[1].state, TurnState::Cancelled);
        assert_eq!(turns[1].steps[0].outcome, StepOutcome::Rejected, "cut off");

        let declined = json!({"name": "run_terminal_cmd", "status": "completed", "userDecision": "rejected",
                              "rawArgs": "{\"command\":\"rm -rf /\"}"});
        assert_eq!(tool_step(&declined).outcome, StepOutcome::Rejected);
        let mut out = TurnCollector::new(Keep::Last(1));
        assert!(
            turns_from_composer(&json!({"status": "none"}), &HashMap::new(), &mut out).is_err()
        );
        assert!(turns_from_composer(
            &json!({"composerId": "d", "status": "none"}),
            &HashMap::new(),
            &mut out
        )
        .is_err());
    }

    #[test]
    fn inline_composers_propose_edits_whose_fate_the_composer_records() {
        let uri = |name: &str| {
            json!({"$mid": 1, "fsPath": format!("c:\\w\\{name}"), "external": format!("file:///c%3A/w/{name}"),
                   "path": format!("/c:/w/{name}"), "scheme": "file"})
        };
        let composers = json!({"allComposers": [
            {"composerId": "h", "type": "head", "name": "a 2025 header"},
            {"composerId": "c2", "status": "completed", "createdAt": 1731797537671u64, "lastUpdatedAt": 1731797581874u64,
             "newlyCreatedFiles": [{"uri": uri("b.ts")}],
             "codeBlockData": {
                "file:///c%3A/w/a.ts": [{"uri": uri("a.ts"), "version": 0, "status": "outdated"},
                                        {"uri": uri("a.ts"), "version": 1, "status": "accepted"}],
                "file:///c%3A/w/b.ts": [{"uri": uri("b.ts"), "version": 0, "status": "rejected"}]},
             "conversation": [
                {"type": 1, "bubbleId": "u1", "text": "add a page"},
                {"type": 2, "bubbleId": "a1", "text": "Here it is.",
                 "codeBlocks": [{"uri": uri("a.ts"), "version": 1, "codeBlockIdx": 0},
                                {"uri": uri("b.ts"), "version": 0, "codeBlockIdx": 1},
                                {"codeBlockIdx": 2}]}]}
        ]});
        let turns = collect(|out| turns_from_inline_composer(&composers, "c2", out));
        assert_eq!(turns.len(), 1);
        let turn = &turns[0];
        assert_eq!(
            (turn.started_ms, turn.ended_ms),
            (None, Some(1_731_797_581_874))
        );
        let steps: Vec<(StepKind, &str, StepOutcome)> = turn
            .steps
            .iter()
            .map(|s| (s.kind, s.paths[0].as_str(), s.outcome))
            .collect();
        assert_eq!(
            steps,
            [
                (StepKind::Edit, "c:\\w\\a.ts", StepOutcome::Ok),
                (StepKind::Write, "c:\\w\\b.ts", StepOutcome::Rejected),
            ]
        );
        let mut out = TurnCollector::new(Keep::Last(1));
        assert!(
            turns_from_inline_composer(&composers, "h", &mut out).is_err(),
            "a header"
        );
        assert!(turns_from_legacy_tab(&json!({"tabs": 3}), "t", &mut out).is_err());
    }

    #[test]
    fn composer_rows_are_read_from_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        {
            let db = rusqlite::Connection::open(&path).unwrap();
            db.execute_batch(
                "CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)",
            )
            .unwrap();
            let (mut composer, bubbles) = global_composer("completed");
            composer.as_object_mut().unwrap().remove("composerId");
            let mut insert = db
                .prepare("INSERT INTO cursorDiskKV VALUES (?1, ?2)")
                .unwrap();
            insert
                .execute(["composerData:c1".to_string(), composer.to_string()])
                .unwrap();
            for (id, bubble) in &bubbles {
                insert
                    .execute([format!("bubbleId:c1:{id}"), bubble.to_string()])
                    .unwrap();
            }
            insert
                .execute(["bubbleId:c1:unlisted".to_string(), "{}".to_string()])
                .unwrap();
        }
        let db = CursorDb::open(&path).unwrap();
        assert!(db.composer_rows("nope").unwrap().is_none());
        assert!(
            db.item_value(LEGACY_CHAT_KEY).unwrap().is_none(),
            "no ItemTable"
        );
        let (composer, bubbles) = db.composer_rows("c1").unwrap().unwrap();
        assert_eq!(composer["composerId"], "c1", "taken from the key");
        assert_eq!(bubbles.len(), 7, "the listed bubbles only");
        let turns = collect(|out| turns_from_composer(&composer, &bubbles, out));
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].steps.len(), 3);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["state.vscdb"], "nothing written beside it");
    }

    /// Writes `global_composer(status)` as Cursor 2025 does into a new database at `path`
    /// (the composer's `toolFormerData` results filled in); returns each row's value bytes
    /// by key.
    fn write_global_database(path: &std::path::Path, status: &str) -> HashMap<String, Vec<u8>> {
        let db = rusqlite::Connection::open(path).unwrap();
        db.execute_batch(
            "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
             CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)",
        )
        .unwrap();
        let (composer, mut bubbles) = global_composer(status);
        bubbles.get_mut("a1").unwrap()["toolFormerData"]["result"] =
            json!("{\"output\":\"12 passed\"}");
        bubbles.get_mut("a1").unwrap()["toolFormerData"]["toolCallId"] = json!("toolu_1");
        let mut rows = vec![("composerData:c1".to_string(), composer.to_string())];
        for (id, bubble) in &bubbles {
            // Pretty-printed, so the bytes as stored are not what re-serializing gives.
            rows.push((
                format!("bubbleId:c1:{id}"),
                serde_json::to_string_pretty(bubble).unwrap(),
            ));
        }
        let mut insert = db
            .prepare("INSERT INTO cursorDiskKV VALUES (?1, ?2)")
            .unwrap();
        for (key, value) in &rows {
            // Bubbles as BLOBs, the composer as TEXT: Cursor writes both.
            if key.starts_with("bubbleId:") {
                insert
                    .execute(rusqlite::params![key, value.as_bytes()])
                    .unwrap();
            } else {
                insert.execute(rusqlite::params![key, value]).unwrap();
            }
        }
        rows.into_iter()
            .map(|(key, value)| (key, value.into_bytes()))
            .collect()
    }

    /// The items `read_items` reports for `chat` of `path` as the store `store`.
    fn read_items_of(store: &str, path: &std::path::Path, chat: &str) -> Vec<ConversationItem> {
        let mut items = Vec::new();
        crate::conversation::read::read_items(store, path, chat, |item| items.push(item)).unwrap();
        items
    }

    #[test]
    fn a_global_composers_items_are_its_rows_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        let values = write_global_database(&path, "error");
        let items = read_items_of(crate::observe::stores::cursor::STORE, &path, "c1");
        let digest = crate::journal::canonical::sha256_hex;
        let read: Vec<(u64, ItemKind, &str, Option<&str>)> = items
            .iter()
            .map(|item| match &item.source {
                SourceRecord::Row {
                    table,
                    row,
                    bytes,
                    sha256,
                    pointer,
                    file,
                } => {
                    assert_eq!(table, ROWS_TABLE);
                    assert_eq!(file, &None);
                    let value = &values[row];
                    assert_eq!((*bytes, sha256), (value.len() as u64, &digest(value)));
                    (item.turn, item.kind, row.as_str(), pointer.as_deref())
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            read,
            [
                (0, ItemKind::Prompt, "bubbleId:c1:u1", None),
                (0, ItemKind::ToolCall, "bubbleId:c1:a1", None),
                (0, ItemKind::ToolResult, "bubbleId:c1:a1", None),
                (0, ItemKind::ToolCall, "bubbleId:c1:a2", None),
                (0, ItemKind::ToolCall, "bubbleId:c1:a3", None),
                (0, ItemKind::ToolResult, "bubbleId:c1:a3", None),
                (0, ItemKind::AssistantText, "bubbleId:c1:a4", None),
                (1, ItemKind::Prompt, "bubbleId:c1:u2", None),
                (1, ItemKind::AssistantText, "bubbleId:c1:a5", None),
                (1, ItemKind::ToolCall, "bubbleId:c1:a5", None),
                (1, ItemKind::TurnEnd, "composerData:c1", Some("/status")),
            ]
        );
        assert_eq!(items[1].call_id.as_deref(), Some("toolu_1"));
        assert_eq!(items[2].outcome, Some(ItemOutcome::Ok));
        assert_eq!(
            items[2].text_sha256.as_deref(),
            Some(digest(b"{\"output\":\"12 passed\"}").as_str())
        );
        assert_eq!(items[4].outcome, Some(ItemOutcome::Error));
        assert_eq!(
            items[5].text_sha256.as_deref(),
            Some(digest(b"{\"error\":\"file is read-only\"}").as_str())
        );
        assert_eq!(items[9].part, 1, "the text and the call of one bubble");
        assert_eq!(items[10].outcome, Some(ItemOutcome::Failed));
        assert_eq!(items[0].at_ms, Some(1_766_743_200_000));

        // A composer still generating records no end.
        let path = dir.path().join("generating.vscdb");
        write_global_database(&path, "generating");
        let items = read_items_of(crate::observe::stores::cursor::STORE, &path, "c1");
        assert_eq!(items.last().unwrap().kind, ItemKind::ToolCall);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "nothing written beside them: {names:?}");
    }

    #[test]
    fn a_workspace_composer_in_the_global_database_names_that_file() {
        let user = tempfile::tempdir().unwrap();
        let workspace = user.path().join("workspaceStorage").join("h1");
        let global = user.path().join("globalStorage");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&global).unwrap();
        let global = global.join("state.vscdb");
        write_global_database(&global, "completed");
        let local = workspace.join("state.vscdb");
        rusqlite::Connection::open(&local)
            .unwrap()
            .execute_batch(
                "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)",
            )
            .unwrap();
        let items = read_items_of(crate::observe::stores::cursor::LEGACY_STORE, &local, "c1");
        assert_eq!(items.len(), 11);
        let shown = global.display().to_string();
        assert!(items.iter().all(|item| matches!(&item.source,
            SourceRecord::Row { file: Some(file), .. } if *file == shown)));
    }

    /// `state.vscdb.turns.json` lists every chat of the corpus database by id — the inline
    /// composers of `composer.composerData` and the tabs of the legacy chat panel — as
    /// `{"chats": {"<chat id>": {"turns_total": N, "turns": {"<index>": {…}}}}}`, each chat's
    /// value in the format of `model::corpus` (chosen turns, the fields listed compared).
    #[test]
    fn the_corpus_database_reads_as_its_expectations() {
        let dir = corpus::folder("cursor");
        let scratch = tempfile::tempdir().unwrap();
        let copy = scratch.path().join("state.vscdb");
        std::fs::copy(dir.join("state.vscdb"), &copy).unwrap();
        let db = CursorDb::open(&copy).unwrap();
        let composers = db.item_value(INLINE_COMPOSERS_KEY).unwrap().unwrap();
        let chatdata = db.item_value(LEGACY_CHAT_KEY).unwrap().unwrap();
        let expected: Value =
            serde_json::from_slice(&std::fs::read(dir.join("state.vscdb.turns.json")).unwrap())
                .unwrap();
        let expected = expected["chats"].as_object().unwrap();
        let mut differences = Vec::new();
        let mut read = Vec::new();
        for composer in composers["allComposers"].as_array().unwrap() {
            let id = composer["composerId"].as_str().unwrap().to_string();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            turns_from_inline_composer(&composers, &id, &mut out).unwrap();
            read.push((id, out));
        }
        for tab in chatdata["tabs"].as_array().unwrap() {
            let id = tab["tabId"].as_str().unwrap().to_string();
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            turns_from_legacy_tab(&chatdata, &id, &mut out).unwrap();
            read.push((id, out));
        }
        let mut ids: Vec<&str> = read.iter().map(|(id, _)| id.as_str()).collect();
        ids.sort_unstable();
        let mut listed: Vec<&str> = expected.keys().map(String::as_str).collect();
        listed.sort_unstable();
        assert_eq!(ids, listed, "the chats of the database");
        for (id, out) in read {
            let total = out.total();
            let turns = out.into_turns();
            differences.extend(
                corpus::compare(&expected[&id], total, &turns)
                    .into_iter()
                    .map(|difference| format!("{id}: {difference}")),
            );
        }
        assert!(differences.is_empty(), "{}", differences.join("\n"));
        let names: Vec<String> = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["state.vscdb"], "read without writing");
    }

    /// The items of every chat of the corpus database (`state.vscdb.turns.json` lists them),
    /// as the per-workspace store reads them: rows of `ItemTable` with the element as pointer.
    #[test]
    fn the_corpus_items_are_as_expected() {
        let dir = corpus::folder("cursor");
        let expected: Value =
            serde_json::from_slice(&std::fs::read(dir.join("state.vscdb.turns.json")).unwrap())
                .unwrap();
        let chats: Vec<(&str, &str)> = expected["chats"]
            .as_object()
            .unwrap()
            .keys()
            .map(|id| ("state.vscdb", id.as_str()))
            .collect();
        corpus::check_items(
            "cursor",
            crate::observe::stores::cursor::LEGACY_STORE,
            &chats,
        );
    }

    #[test]
    fn mangled_composers_never_panic() {
        let (composer, bubbles) = global_composer("completed");
        let pretty = serde_json::to_string_pretty(&json!({"c": composer, "b": bubbles})).unwrap();
        let lines: Vec<Vec<u8>> = pretty.lines().map(|l| l.as_bytes().to_vec()).collect();
        let mut noise = corpus::Noise::new(3);
        for _ in 0..300 {
            let bytes = noise.mangle(&lines).join(&b'\n');
            let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            let bubbles: HashMap<String, Value> = value["b"]
                .as_object()
                .map(|b| b.clone().into_iter().collect())
                .unwrap_or_default();
            let mut out = TurnCollector::new(Keep::Last(2));
            let _ = turns_from_composer(&value["c"], &bubbles, &mut out);
            let sources = ComposerSources {
                record: Some(SourceRecord::row(ROWS_TABLE, "composerData:c1", &bytes)),
                ..ComposerSources::default()
            };
            let mut out = TurnCollector::with_items(Keep::Last(2), |_| {});
            let _ = read_composer(&value["c"], &bubbles, &sources, &mut out);
        }
        let odd = json!({"composerId": "x", "status": "completed", "codeBlockData": 1, "newlyCreatedFiles": [1],
            "conversation": [{"type": 2, "codeBlocks": [{"uri": 1}, {"uri": {"external": 2}}], "toolFormerData": {"rawArgs": "[", "params": 3}},
                             {"type": "user", "text": 5}, {"type": 1, "createdAt": -4}]});
        let mut out = TurnCollector::new(Keep::Last(2));
        let _ = turns_from_composer(&odd, &HashMap::new(), &mut out);
        let _ = turns_from_legacy_tab(
            &json!({"tabs": [{"tabId": "t", "bubbles": [{"type": "ai"}, {"type": "user", "modelType": 1}]}]}),
            "t",
            &mut out,
        );
    }
}

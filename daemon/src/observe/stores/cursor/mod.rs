//! Cursor's composer chats in `state.vscdb` (SQLite, WAL): read-only access and a pure mapping from composer and bubble rows to `ChatSnapshot`.
//!
//! Format facts (docs/research/chat-store-formats.md §4, all reverse-engineered by third
//! parties): the table `cursorDiskKV(key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)`
//! holds JSON text, stored as TEXT or as BLOB. `composerData:<composerId>` is one chat:
//! `composerId`, `status` (`none` | `generating` | `completed` | `error`; `aborted` is
//! reported by users), `generatingBubbleIds[]`, `lastUpdatedAt` (ms) and the message
//! order, `fullConversationHeadersOnly: [{bubbleId, type}]` — the only order there is: a
//! bubble row that no header lists is not part of the conversation. Older composers keep
//! the bubbles inline in `conversation[]` (or look them up in `conversationMap{}`).
//! `bubbleId:<composerId>:<bubbleId>` is one message: `type` 1 (user) or 2 (assistant),
//! `text`, `createdAt` (ISO string, often missing), and on user bubbles `workspaceUris[]`.
//! Nothing is written per turn: only the composer's `status` says how the last turn
//! stands, so every earlier turn is complete.
//!
//! A per-workspace database (`workspaceStorage/<hash>/state.vscdb`, table `ItemTable`)
//! holds the chats of Cursor 2024 (docs/observers.md, "Per-workspace databases"): the
//! composer list `composer.composerData` with each composer's bubbles inline in
//! `conversation[]` (from 2025 on only headers, `type: "head"`, which are not chats here),
//! and the older chat panel `workbench.panel.aichat.view.aichat.chatdata`. An inline
//! composer that a `composerData:` row also holds (in this database or the global one) is
//! that row's chat and is not listed again.
//!
//!
//! `sqlite.rs` holds the read-only access (how each read opens the files without writing
//! them, the row queries); this file maps rows to `ChatSnapshot`s, purely.

mod sqlite;

use std::collections::HashMap;

use serde_json::Value;

use crate::observe::snapshot::{ChatSnapshot, TurnSnapshot, TurnState};
use crate::observe::text::parse_ts;

pub use sqlite::{
    ComposerRows, CursorDb, CursorError, StoredRow, StoredRows, BUSY_TIMEOUT, RECHECK_WINDOW,
};

/// The registry interface id of this store.
pub const STORE: &str = "chat_history_cursor_sqlite";

/// The registry interface id of the per-workspace databases' legacy chat panel.
pub const LEGACY_STORE: &str = "chat_history_cursor_legacy_sqlite";

/// The reason given when a composer reports an error without saying which.
const UNSPECIFIED_ERROR: &str = "the composer reported an error";

/// Pure: one composer's JSON and its bubbles (by bubble id) → snapshot; None when the
/// value is not a composer (not an object, or no `composerId`).
pub fn composer_snapshot(
    composer: &Value,
    bubbles: &HashMap<String, Value>,
    workspace: Option<&str>,
) -> Option<ChatSnapshot> {
    read_composer(composer, bubbles, workspace).map(|reading| reading.snapshot)
}

/// Pure: one composer read as `composer_snapshot` reads it, with each turn's bubbles in
/// conversation order (the prompt's bubble first, when the turn has one): the one rule for
/// where turns begin, shared with the conversation reader (`conversation::stores::cursor`).
/// `bubbles` are the bubble rows by id (empty for an inline `conversation[]`).
pub fn composer_turns<'a>(
    composer: &'a Value,
    bubbles: &'a HashMap<String, Value>,
) -> Option<(ChatSnapshot, Vec<Vec<&'a Value>>)> {
    read_composer(composer, bubbles, None).map(|reading| (reading.snapshot, reading.turn_bubbles))
}

/// The `ItemTable` key of the chat panel Cursor had before composers.
pub const LEGACY_CHAT_KEY: &str = "workbench.panel.aichat.view.aichat.chatdata";

/// The `ItemTable` key of the per-workspace composer list: composers with their bubbles
/// inline (2024), or only their headers (2025 on, the bubbles in the global database).
pub const INLINE_COMPOSERS_KEY: &str = "composer.composerData";

/// Pure: the per-workspace composer list (`{allComposers: [...], selectedComposerId,
/// composerDataVersion}`) → one snapshot per composer that keeps its bubbles inline
/// (`conversation[]`, Cursor 2024). A composer without `conversation` is a header
/// (`type: "head"`, Cursor 2025 on) whose chat lives in the global database, and is not
/// a chat here.
pub fn inline_composer_snapshots(composers: &Value, workspace: Option<&str>) -> Vec<ChatSnapshot> {
    let no_rows = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    composers
        .get("allComposers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|composer| composer.get("conversation").is_some_and(Value::is_array))
        .filter_map(|composer| read_composer(composer, &no_rows, workspace))
        .map(|reading| reading.snapshot)
        .filter(|chat| seen.insert(chat.chat_id.clone()))
        .collect()
}

/// Pure: the legacy chat panel's value (`{tabs: [{tabId, chatTitle, lastSendTime,
/// bubbles: [{type: "user" | "ai", text, id?}]}]}`) → one snapshot per tab. A user bubble
/// starts a turn, and the last `ai` bubble with text after it is the reply. The panel
/// keeps its input box as
/// a last user bubble with no text (the real panels in the corpus all end with one): that
/// is a draft, not a prompt. The panel records no state: every turn but the last is
/// complete, and the last one, once answered, is completed by inference after the quiet
/// period. Its only time is the tab's `lastSendTime` (ms), which dates every turn.
pub fn legacy_chat_snapshots(chatdata: &Value, workspace: Option<&str>) -> Vec<ChatSnapshot> {
    let Some(tabs) = chatdata.get("tabs").and_then(Value::as_array) else {
        return Vec::new();
    };
    tabs.iter()
        .filter_map(|tab| legacy_tab_turns(tab, workspace).map(|(snapshot, _)| snapshot))
        .collect()
}

/// Pure: one tab of the legacy chat panel (an element of `tabs`) read as
/// `legacy_chat_snapshots` reads it, with each turn's bubbles in order (the prompt's bubble
/// first): the one rule for where turns begin, shared with the conversation reader
/// (`conversation::stores::cursor`). `None` for a tab without a `tabId`.
pub fn legacy_tab_turns<'a>(
    tab: &'a Value,
    workspace: Option<&str>,
) -> Option<(ChatSnapshot, Vec<Vec<&'a Value>>)> {
    let chat_id = tab.get("tabId").and_then(Value::as_str)?.to_string();
    let sent_ms = tab.get("lastSendTime").and_then(ms_of);
    let mut bubbles = tab
        .get("bubbles")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    while let Some((last, earlier)) = bubbles.split_last() {
        let is_user = last.get("type").and_then(Value::as_str) == Some("user");
        let text = last.get("text").and_then(Value::as_str).unwrap_or("");
        if !(is_user && text.trim().is_empty()) {
            break;
        }
        bubbles = earlier;
    }
    let mut turns: Vec<TurnSnapshot> = Vec::new();
    let mut turn_bubbles: Vec<Vec<&Value>> = Vec::new();
    for (index, bubble) in bubbles.iter().enumerate() {
        let text = bubble.get("text").and_then(Value::as_str).unwrap_or("");
        match bubble.get("type").and_then(Value::as_str) {
            Some("user") => {
                turns.push(TurnSnapshot {
                    id: bubble
                        .get("id")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{chat_id}#{index}")),
                    prompt: Some(text.to_string()),
                    reply: String::new(),
                    state: TurnState::Completed,
                    ts_ms: sent_ms,
                });
                turn_bubbles.push(vec![bubble]);
            }
            Some("ai") => {
                // The reply is the turn's final message, as for the other stores.
                if let Some(turn) = turns.last_mut() {
                    if !text.trim().is_empty() {
                        turn.reply = text.to_string();
                    }
                }
                if let Some(group) = turn_bubbles.last_mut() {
                    group.push(bubble);
                }
            }
            _ => {}
        }
    }
    if let Some(last) = turns.last_mut() {
        last.state = if last.reply.is_empty() {
            TurnState::Waiting
        } else {
            TurnState::Open {
                tool_pending: false,
            }
        };
    }
    Some((
        ChatSnapshot {
            chat_id,
            workspace: workspace.map(str::to_string),
            turns,
            updated_ms: sent_ms,
        },
        turn_bubbles,
    ))
}

/// A composer mapped to a snapshot, and whether it is still moving.
#[derive(Debug)]
struct ComposerReading<'a> {
    snapshot: ChatSnapshot,
    /// Each turn's bubbles in conversation order (the prompt's first, when it has one).
    turn_bubbles: Vec<Vec<&'a Value>>,
    /// Generating, or a listed bubble has no row yet: its bubble rows may change without
    /// the composer row changing.
    in_flight: bool,
}

/// Who wrote a bubble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
    Other,
}

fn role_of(kind: Option<&Value>) -> Role {
    match kind {
        Some(Value::Number(number)) => match number.as_u64() {
            Some(1) => Role::User,
            Some(2) => Role::Assistant,
            _ => Role::Other,
        },
        Some(Value::String(text)) => match text.as_str() {
            "user" | "human" | "HUMAN" => Role::User,
            "ai" | "assistant" | "AI" => Role::Assistant,
            _ => Role::Other,
        },
        _ => Role::Other,
    }
}

/// One conversation entry: a bubble id, its header's type, and the bubble when readable.
struct Entry<'a> {
    bubble_id: String,
    header_kind: Option<&'a Value>,
    bubble: Option<&'a Value>,
}

/// The conversation in order: `fullConversationHeadersOnly` when it lists anything (bubbles
/// from `bubbles`, else from an inline `conversationMap`), else the legacy inline
/// `conversation[]`.
fn entries<'a>(
    composer: &'a Value,
    composer_id: &str,
    bubbles: &'a HashMap<String, Value>,
) -> Vec<Entry<'a>> {
    let headers = composer
        .get("fullConversationHeadersOnly")
        .and_then(Value::as_array)
        .filter(|headers| !headers.is_empty());
    if let Some(headers) = headers {
        let inline = composer.get("conversationMap").and_then(Value::as_object);
        return headers
            .iter()
            .filter_map(|header| {
                let bubble_id = header.get("bubbleId").and_then(Value::as_str)?;
                let bubble = bubbles
                    .get(bubble_id)
                    .or_else(|| inline.and_then(|inline| inline.get(bubble_id)))
                    .filter(|bubble| bubble.is_object());
                Some(Entry {
                    bubble_id: bubble_id.to_string(),
                    header_kind: header.get("type"),
                    bubble,
                })
            })
            .collect();
    }
    composer
        .get("conversation")
        .and_then(Value::as_array)
        .map(|conversation| {
            conversation
                .iter()
                .enumerate()
                .filter(|(_, bubble)| bubble.is_object())
                .map(|(index, bubble)| Entry {
                    bubble_id: bubble
                        .get("bubbleId")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{composer_id}#{index}")),
                    header_kind: None,
                    bubble: Some(bubble),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A turn being assembled, with whether an assistant bubble answered it, and its bubbles.
struct TurnInProgress<'a> {
    turn: TurnSnapshot,
    answered: bool,
    bubbles: Vec<&'a Value>,
}

fn read_composer<'a>(
    composer: &'a Value,
    bubbles: &'a HashMap<String, Value>,
    workspace: Option<&str>,
) -> Option<ComposerReading<'a>> {
    let composer_id = composer
        .get("composerId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())?;
    let updated_ms = composer
        .get("lastUpdatedAt")
        .and_then(ms_of)
        .or_else(|| composer.get("createdAt").and_then(ms_of));
    let entries = entries(composer, composer_id, bubbles);
    if entries.is_empty() && is_empty_draft(composer) {
        return None;
    }
    let mut turns: Vec<TurnInProgress> = Vec::new();
    let mut bubble_workspace = None;
    let mut missing = false;
    let mut truncated = false;
    let mut seen_ids = std::collections::HashSet::new();
    for entry in entries {
        if !seen_ids.insert(entry.bubble_id.clone()) {
            continue;
        }
        let Some(bubble) = entry.bubble else {
            missing = true;
            // Without the prompt, what follows would be taken for the previous turn's
            // answer: the readable conversation ends here until the row is written.
            if role_of(entry.header_kind) == Role::User {
                truncated = true;
                break;
            }
            continue;
        };
        let role = match role_of(bubble.get("type")) {
            Role::Other => role_of(entry.header_kind),
            role => role,
        };
        let text = bubble.get("text").and_then(Value::as_str).unwrap_or("");
        let ts_ms = bubble.get("createdAt").and_then(ms_of);
        match role {
            Role::User => {
                if bubble_workspace.is_none() {
                    bubble_workspace = workspace_of(bubble);
                }
                turns.push(TurnInProgress {
                    turn: TurnSnapshot {
                        id: entry.bubble_id,
                        prompt: Some(text.to_string()),
                        reply: String::new(),
                        state: TurnState::Completed,
                        ts_ms,
                    },
                    answered: false,
                    bubbles: vec![bubble],
                });
            }
            Role::Assistant => {
                if turns.is_empty() {
                    // An answer with no prompt before it: a turn of its own.
                    turns.push(TurnInProgress {
                        turn: TurnSnapshot {
                            id: entry.bubble_id,
                            prompt: None,
                            reply: String::new(),
                            state: TurnState::Completed,
                            ts_ms: None,
                        },
                        answered: false,
                        bubbles: Vec::new(),
                    });
                }
                if let Some(current) = turns.last_mut() {
                    current.answered = true;
                    current.bubbles.push(bubble);
                    // The reply is the turn's final message (as for the other stores), not
                    // the commentary bubbles before it.
                    if !text.trim().is_empty() {
                        current.turn.reply = text.to_string();
                    }
                    current.turn.ts_ms = current.turn.ts_ms.max(ts_ms);
                }
            }
            Role::Other => {}
        }
    }
    let generating = composer.get("status").and_then(Value::as_str) == Some("generating")
        || composer
            .get("generatingBubbleIds")
            .and_then(Value::as_array)
            .is_some_and(|ids| !ids.is_empty());
    let mut last_in_flight = false;
    if let Some(last) = turns.last_mut() {
        // When the conversation was cut short, a later turn exists: the last one read is
        // complete.
        if !truncated {
            last.turn.state = last_turn_state(composer, generating, last);
            last_in_flight = matches!(last.turn.state, TurnState::Waiting | TurnState::Replying);
        }
    }
    let mut turn_bubbles = Vec::with_capacity(turns.len());
    let turns = turns
        .into_iter()
        .map(|mut progress| {
            progress.turn.ts_ms = progress.turn.ts_ms.or(updated_ms);
            turn_bubbles.push(progress.bubbles);
            progress.turn
        })
        .collect();
    Some(ComposerReading {
        turn_bubbles,
        snapshot: ChatSnapshot {
            chat_id: composer_id.to_string(),
            workspace: bubble_workspace.or_else(|| workspace.map(str::to_string)),
            turns,
            updated_ms,
        },
        in_flight: (generating && last_in_flight) || missing,
    })
}

/// A composer Cursor creates for an empty chat tab: no name, and a `status` of `none` (or
/// none at all). With no conversation either, it is a draft, not a chat.
fn is_empty_draft(composer: &Value) -> bool {
    let unnamed = composer
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(|name| name.trim().is_empty());
    let idle = matches!(
        composer.get("status").and_then(Value::as_str),
        None | Some("none")
    );
    unnamed && idle
}

/// The last turn's state from the composer's `status` and `generatingBubbleIds`.
fn last_turn_state(composer: &Value, generating: bool, last: &TurnInProgress) -> TurnState {
    let has_reply = !last.turn.reply.is_empty();
    if generating {
        return if has_reply {
            TurnState::Replying
        } else {
            TurnState::Waiting
        };
    }
    match composer.get("status").and_then(Value::as_str) {
        // A `completed` composer whose last prompt has no answer bubble at all is taken to
        // describe the previous turn (the new prompt is written before the status flips).
        Some("completed") if last.answered || last.turn.prompt.is_none() => TurnState::Completed,
        Some("completed") => TurnState::Waiting,
        Some("error") => TurnState::Failed(error_text(composer)),
        Some("aborted" | "cancelled" | "canceled") => TurnState::Cancelled,
        // `none`, missing, or a status this reader does not know.
        _ if has_reply => TurnState::Open {
            tool_pending: false,
        },
        _ => TurnState::Waiting,
    }
}

/// The composer's error text (best effort: `error` as a string or `{message}`, or
/// `errorMessage`), else a generic one.
fn error_text(composer: &Value) -> String {
    let error = composer.get("error");
    error
        .and_then(Value::as_str)
        .or_else(|| error.and_then(|e| e.get("message")).and_then(Value::as_str))
        .or_else(|| composer.get("errorMessage").and_then(Value::as_str))
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .unwrap_or(UNSPECIFIED_ERROR)
        .to_string()
}

/// Milliseconds since the epoch from an ISO-8601 string or a number of ms.
fn ms_of(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => parse_ts(text),
        Value::Number(number) => number.as_u64().or_else(|| {
            number
                .as_f64()
                .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < u64::MAX as f64)
                .map(|ms| ms as u64)
        }),
        _ => None,
    }
}

/// The user bubble's first workspace folder as a path: `workspaceUris[0]` as a `file://`
/// URI (or a VS Code URI object with `fsPath`).
fn workspace_of(bubble: &Value) -> Option<String> {
    let first = bubble.get("workspaceUris")?.as_array()?.first()?;
    match first {
        Value::String(uri) => crate::observe::text::local_path(uri),
        Value::Object(uri) => uri
            .get("fsPath")
            .and_then(Value::as_str)
            .filter(|path| !path.is_empty())
            .map(str::to_string)
            .or_else(|| {
                uri.get("external")
                    .and_then(Value::as_str)
                    .and_then(crate::observe::text::local_path)
            }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant, SystemTime};

    use rusqlite::Connection;

    use super::sqlite::{digest_of, file_uri, side_file};
    use super::*;
    use crate::observe::kinds;
    use crate::observe::snapshot::SnapshotDiffer;
    use koru_protocol::ObservedKind;
    use serde_json::json;
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

    #[test]
    fn a_bubbles_workspace_is_its_first_file_uri_and_databases_open_by_uri() {
        let string = json!({"workspaceUris": ["file:///home/u/my%20proj", "file:///other"]});
        assert_eq!(workspace_of(&string).as_deref(), Some("/home/u/my proj"));
        let object =
            json!({"workspaceUris": [{"$mid": 1, "fsPath": "/home/u/p", "scheme": "file"}]});
        assert_eq!(workspace_of(&object).as_deref(), Some("/home/u/p"));
        let remote = json!({"workspaceUris": ["vscode-remote://ssh-remote+h/home/u"]});
        assert_eq!(workspace_of(&remote), None);
        assert_eq!(
            file_uri(Path::new("/tmp/a b?#%.db")),
            "file:///tmp/a%20b%3F%23%25.db"
        );
        assert_eq!(file_uri(Path::new("rel/x.db")), "file:rel/x.db");
    }

    // Fixtures follow the documented shapes (§4), with fields this reader ignores.

    fn composer(id: &str, status: &str, headers: &[(&str, u8)]) -> Value {
        let headers: Vec<Value> = headers
            .iter()
            .map(|(bubble_id, kind)| json!({"bubbleId": bubble_id, "type": kind, "serverBubbleId": format!("s-{bubble_id}")}))
            .collect();
        json!({
            "_v": 10, "composerId": id, "name": "Fix login bug", "status": status,
            "createdAt": 1_766_700_000_000u64, "lastUpdatedAt": 1_766_700_090_000u64,
            "unifiedMode": "agent", "isAgentic": true, "modelConfig": {"modelName": "x", "maxMode": false},
            "generatingBubbleIds": [], "text": "", "richText": "", "someFutureField": {"a": [1, 2]},
            "fullConversationHeadersOnly": headers,
        })
    }

    fn user(bubble_id: &str, text: &str, at: &str) -> Value {
        json!({"_v": 3, "type": 1, "bubbleId": bubble_id, "text": text, "createdAt": at,
            "richText": "{\"root\":{}}", "requestId": "r1", "modelInfo": {"modelName": "x"},
            "workspaceUris": ["file:///home/u/my%20proj"]})
    }

    fn assistant(bubble_id: &str, text: &str, at: &str) -> Value {
        json!({"_v": 3, "type": 2, "bubbleId": bubble_id, "text": text, "createdAt": at,
            "codeBlocks": [], "thinking": {"text": "hmm"}, "toolResults": [], "capabilityType": 15})
    }

    fn bubbles(list: &[Value]) -> HashMap<String, Value> {
        list.iter()
            .map(|bubble| {
                (
                    bubble["bubbleId"].as_str().unwrap().to_string(),
                    bubble.clone(),
                )
            })
            .collect()
    }

    fn turn(
        id: &str,
        prompt: Option<&str>,
        reply: &str,
        state: TurnState,
        ts_ms: u64,
    ) -> TurnSnapshot {
        TurnSnapshot {
            id: id.into(),
            prompt: prompt.map(str::to_string),
            reply: reply.into(),
            state,
            ts_ms: Some(ts_ms),
        }
    }

    const T0: &str = "2025-12-26T10:00:00.000Z";
    const T1: &str = "2025-12-26T10:00:40.000Z";
    const T2: &str = "2025-12-26T10:01:00.000Z";
    const T0_MS: u64 = 1_766_743_200_000;

    #[test]
    fn bubbles_map_to_turns_in_header_order_with_the_last_state_from_the_status() {
        let value = composer(
            "c1",
            "completed",
            &[
                ("b1", 1),
                ("b2", 2),
                ("b3", 2),
                ("b4", 1),
                ("b5", 2),
                ("b6", 2),
            ],
        );
        let rows = bubbles(&[
            user("b1", "why does login 500?", T0),
            assistant("b2", "Looking at the handler.", T0),
            assistant("b3", "The session cookie is unset.", T1),
            user("b4", "fix it", T1),
            assistant("b5", "", T2),
            assistant("b6", "Fixed.", T2),
            json!({"type": 2, "bubbleId": "stray", "text": "not in the headers"}),
        ]);
        let snapshot = composer_snapshot(&value, &rows, Some("/fallback")).unwrap();
        assert_eq!(
            snapshot,
            ChatSnapshot {
                chat_id: "c1".into(),
                workspace: Some("/home/u/my proj".into()),
                turns: vec![
                    turn(
                        "b1",
                        Some("why does login 500?"),
                        "The session cookie is unset.",
                        TurnState::Completed,
                        T0_MS + 40_000
                    ),
                    turn(
                        "b4",
                        Some("fix it"),
                        "Fixed.",
                        TurnState::Completed,
                        T0_MS + 60_000
                    ),
                ],
                updated_ms: Some(1_766_700_090_000),
            }
        );
    }

    /// `status` (None: absent), `generatingBubbleIds`, the assistant's text (None: no
    /// assistant bubble), and the last turn's expected state.
    type StatusCase = (
        Option<&'static str>,
        &'static [&'static str],
        Option<&'static str>,
        TurnState,
    );

    #[test]
    fn the_last_turn_state_follows_status_and_generating_bubble_ids() {
        let error = TurnState::Failed(UNSPECIFIED_ERROR.into());
        let open = TurnState::Open {
            tool_pending: false,
        };
        let cases: &[StatusCase] = &[
            (
                Some("generating"),
                &["b2"],
                Some("Work"),
                TurnState::Replying,
            ),
            (Some("generating"), &[], Some(""), TurnState::Waiting),
            (Some("generating"), &[], None, TurnState::Waiting),
            (Some("none"), &["b2"], Some("Work"), TurnState::Replying),
            (Some("completed"), &[], Some("Done."), TurnState::Completed),
            (Some("completed"), &[], Some(""), TurnState::Completed),
            (Some("completed"), &[], None, TurnState::Waiting),
            (Some("error"), &[], Some("Partial"), error.clone()),
            (Some("error"), &[], None, error),
            (Some("aborted"), &[], Some("Part"), TurnState::Cancelled),
            (Some("cancelled"), &[], None, TurnState::Cancelled),
            (Some("none"), &[], Some("Answer"), open.clone()),
            (None, &[], Some("Answer"), open.clone()),
            (Some("active"), &[], Some("Answer"), open),
            (Some("none"), &[], None, TurnState::Waiting),
            (None, &[], Some(""), TurnState::Waiting),
        ];
        for (status, generating, reply, expected) in cases {
            let mut headers = vec![("b1", 1)];
            let mut rows = vec![user("b1", "go", T0)];
            if let Some(reply) = reply {
                headers.push(("b2", 2));
                rows.push(assistant("b2", reply, T1));
            }
            let mut value = composer("c", status.unwrap_or(""), &headers);
            match status {
                Some(_) => {}
                None => {
                    value.as_object_mut().unwrap().remove("status");
                }
            }
            value["generatingBubbleIds"] = json!(generating);
            let snapshot = composer_snapshot(&value, &bubbles(&rows), None).unwrap();
            assert_eq!(
                &snapshot.turns[0].state, expected,
                "{status:?} {generating:?} {reply:?}"
            );
        }
        let mut failed = composer("c", "error", &[("b1", 1)]);
        failed["error"] = json!({"message": "Rate limit exceeded", "code": 429});
        let snapshot = composer_snapshot(&failed, &bubbles(&[user("b1", "go", T0)]), None).unwrap();
        assert_eq!(
            snapshot.turns[0].state,
            TurnState::Failed("Rate limit exceeded".into())
        );
    }

    #[test]
    fn missing_rows_are_skipped_and_a_missing_prompt_ends_the_readable_conversation() {
        let value = composer(
            "c",
            "generating",
            &[("b1", 1), ("gone", 2), ("b2", 2), ("b3", 1), ("b4", 2)],
        );
        // `b3` (a prompt) has no row yet: `b4` must not be read as the first turn's answer.
        let rows = bubbles(&[
            user("b1", "go", T0),
            assistant("b2", "Done.", T1),
            assistant("b4", "Second answer", T2),
        ]);
        let reading = read_composer(&value, &rows, None).unwrap();
        assert_eq!(
            reading.snapshot.turns,
            [turn(
                "b1",
                Some("go"),
                "Done.",
                TurnState::Completed,
                T0_MS + 40_000
            )]
        );
        assert!(
            reading.in_flight,
            "the rows still to come must be read again"
        );
        // A header without a row and without a type is skipped too.
        let value = composer("c", "completed", &[("b1", 1), ("b2", 2)]);
        let mut value = value;
        value["fullConversationHeadersOnly"][1] = json!({"bubbleId": "b2"});
        let snapshot = composer_snapshot(&value, &bubbles(&[user("b1", "go", T0)]), None).unwrap();
        assert_eq!(snapshot.turns.len(), 1);
        assert_eq!(snapshot.turns[0].state, TurnState::Waiting);
    }

    #[test]
    fn legacy_inline_conversations_and_conversation_maps_are_read() {
        let legacy = json!({"_v": 2, "composerId": "old", "status": "completed", "lastUpdatedAt": 1_700_000_000_000u64,
        "conversation": [
            {"type": 1, "bubbleId": "u1", "text": "rename foo", "relevantFiles": []},
            {"type": 2, "bubbleId": "a1", "text": "Renamed.", "createdAt": 1_700_000_000_500u64},
            {"type": 2, "text": "Also updated the tests."},
            "not a bubble"
        ]});
        let snapshot = composer_snapshot(&legacy, &HashMap::new(), Some("/w")).unwrap();
        assert_eq!(snapshot.workspace.as_deref(), Some("/w"));
        assert_eq!(
            snapshot.turns,
            [turn(
                "u1",
                Some("rename foo"),
                "Also updated the tests.",
                TurnState::Completed,
                1_700_000_000_500
            )]
        );
        let mut mapped = composer("m", "completed", &[("u1", 1), ("a1", 2)]);
        mapped["conversationMap"] =
            json!({"u1": user("u1", "hi", T0), "a1": assistant("a1", "Hello.", T1)});
        let snapshot = composer_snapshot(&mapped, &HashMap::new(), None).unwrap();
        assert_eq!(snapshot.turns[0].reply, "Hello.");
        // Without any timestamp on the bubbles, the composer's `lastUpdatedAt` is used.
        let mut undated = composer("u", "completed", &[("u1", 1)]);
        undated["conversationMap"] = json!({"u1": {"type": 1, "bubbleId": "u1", "text": "hi"}});
        let snapshot = composer_snapshot(&undated, &HashMap::new(), None).unwrap();
        assert_eq!(snapshot.turns[0].ts_ms, Some(1_766_700_090_000));
    }

    #[test]
    fn values_that_are_not_composers_are_none() {
        for value in [
            json!([1, 2]),
            json!("composerData"),
            json!(null),
            json!({"name": "x"}),
            json!({"composerId": 7}),
            json!({"composerId": ""}),
        ] {
            assert_eq!(
                composer_snapshot(&value, &HashMap::new(), None),
                None,
                "{value}"
            );
        }
        let empty = composer_snapshot(
            &json!({"composerId": "c", "name": "c", "status": 3, "fullConversationHeadersOnly": "x"}),
            &HashMap::new(),
            None,
        )
        .unwrap();
        assert!(empty.turns.is_empty());
    }

    #[test]
    fn an_empty_draft_is_not_a_chat_and_a_chat_is_dated_by_the_store() {
        // What Cursor writes for a new, empty chat tab.
        let draft = json!({"_v": 10, "composerId": "d1", "richText": "", "text": "",
            "fullConversationHeadersOnly": [], "conversationMap": {}, "status": "none",
            "context": {}, "createdAt": 1_766_700_000_000u64, "hasLoaded": true});
        assert_eq!(composer_snapshot(&draft, &HashMap::new(), None), None);
        let mut unset = draft.clone();
        unset.as_object_mut().unwrap().remove("status");
        assert_eq!(composer_snapshot(&unset, &HashMap::new(), None), None);
        // A named composer is a chat even before its first message, dated by the store:
        // its `lastUpdatedAt`, else its `createdAt` — never the time it was read.
        let mut named = draft.clone();
        named["name"] = json!("Plan the migration");
        let snapshot = composer_snapshot(&named, &HashMap::new(), None).unwrap();
        assert!(snapshot.turns.is_empty());
        assert_eq!(snapshot.updated_ms, Some(1_766_700_000_000));
        let events = crate::observe::snapshot::SnapshotDiffer::new().update(&snapshot);
        assert_eq!(events[0].store_ts_ms, Some(1_766_700_000_000));
        named["lastUpdatedAt"] = json!(1_766_700_050_000u64);
        let snapshot = composer_snapshot(&named, &HashMap::new(), None).unwrap();
        assert_eq!(snapshot.updated_ms, Some(1_766_700_050_000));
        // A draft that is generating has had its prompt sent: it is a chat.
        let mut sent = draft;
        sent["status"] = json!("generating");
        assert!(composer_snapshot(&sent, &HashMap::new(), None).is_some());
    }

    #[test]
    fn successive_snapshots_give_prompt_reply_and_end_events() {
        let mut differ = SnapshotDiffer::new();
        let mut value = composer("c", "generating", &[("b1", 1)]);
        let mut rows = vec![user("b1", "fix it", T0)];
        let mut events = differ.update(&composer_snapshot(&value, &bubbles(&rows), None).unwrap());
        value = composer("c", "generating", &[("b1", 1), ("b2", 2)]);
        rows.push(assistant("b2", "Working", T1));
        events.extend(differ.update(&composer_snapshot(&value, &bubbles(&rows), None).unwrap()));
        value["status"] = json!("completed");
        rows[1] = assistant("b2", "Fixed it.", T1);
        events.extend(differ.update(&composer_snapshot(&value, &bubbles(&rows), None).unwrap()));
        value = composer("c", "generating", &[("b1", 1), ("b2", 2), ("b3", 1)]);
        rows.push(user("b3", "again", T2));
        events.extend(differ.update(&composer_snapshot(&value, &bubbles(&rows), None).unwrap()));
        value["status"] = json!("error");
        events.extend(differ.update(&composer_snapshot(&value, &bubbles(&rows), None).unwrap()));
        value = composer(
            "c",
            "aborted",
            &[("b1", 1), ("b2", 2), ("b3", 1), ("b4", 1)],
        );
        rows.push(user("b4", "once more", T2));
        events.extend(differ.update(&composer_snapshot(&value, &bubbles(&rows), None).unwrap()));
        assert_eq!(
            kinds(&events),
            [
                "chat_seen",
                "prompt_seen",
                "reply_started",
                "reply_completed",
                "prompt_seen",
                "failed",
                "prompt_seen",
                "cancelled"
            ]
        );
        assert_eq!(
            events[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Fixed it.".into(),
                length: 9
            }
        );
        assert_eq!(events[1].workspace.as_deref(), Some("/home/u/my proj"));
    }

    // --- The database: a writer in another process, as Cursor is. ---

    const WRITER_ENV: &str = "KORU_CURSOR_TEST_WRITER_DB";
    const WRITER_MARK: &str = "koru-cursor-writer:";
    const SCHEMA: &str = "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB); CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);";

    /// Not a test of its own: the body of the writer process the database tests start. It
    /// does nothing unless started by them (with the database path in `WRITER_ENV`); then
    /// it runs one SQL batch per stdin line until `close`.
    #[test]
    fn writer_process() {
        let Some(db) = std::env::var_os(WRITER_ENV) else {
            return;
        };
        let connection = Connection::open(db).unwrap();
        for line in std::io::stdin().lines() {
            let line = line.unwrap();
            if line == "close" {
                break;
            }
            match connection.execute_batch(&line) {
                Ok(()) => println!("{WRITER_MARK}ok"),
                Err(error) => println!("{WRITER_MARK}err {error}"),
            }
        }
        drop(connection);
        println!("{WRITER_MARK}closed");
    }

    /// Drives a `writer_process` child.
    struct Writer {
        child: Child,
        stdin: Option<ChildStdin>,
        stdout: BufReader<ChildStdout>,
    }

    impl Writer {
        fn start(db: &Path) -> Writer {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "observe::stores::cursor::tests::writer_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WRITER_ENV, db)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take();
            let stdout = BufReader::new(child.stdout.take().unwrap());
            Writer {
                child,
                stdin,
                stdout,
            }
        }

        fn send(&mut self, line: &str) -> String {
            let stdin = self.stdin.as_mut().unwrap();
            writeln!(stdin, "{line}").unwrap();
            stdin.flush().unwrap();
            loop {
                let mut reply = String::new();
                assert!(
                    self.stdout.read_line(&mut reply).unwrap() > 0,
                    "the writer process ended"
                );
                // libtest may print `test … ... ` before the first reply on the same line.
                if let Some(at) = reply.find(WRITER_MARK) {
                    return reply[at + WRITER_MARK.len()..].trim_end().to_string();
                }
            }
        }

        fn sql(&mut self, sql: &str) {
            assert_eq!(self.send(sql), "ok", "{sql}");
        }

        fn put(&mut self, key: &str, value: &Value) {
            let text = value.to_string().replace('\'', "''");
            self.sql(&format!(
                "INSERT INTO cursorDiskKV VALUES ('{key}', '{text}')"
            ));
        }

        fn put_blob(&mut self, key: &str, value: &Value) {
            let hex: String = value
                .to_string()
                .bytes()
                .map(|b| format!("{b:02X}"))
                .collect();
            self.sql(&format!(
                "INSERT INTO cursorDiskKV VALUES ('{key}', X'{hex}')"
            ));
        }

        /// Closes the connection as Cursor does on exit.
        fn close(mut self) {
            assert_eq!(self.send("close"), "closed");
            self.stdin = None;
            assert!(self.child.wait().unwrap().success());
        }

        /// Ends the process with its connection open, as a crash does.
        fn crash(mut self) {
            self.child.kill().unwrap();
            self.child.wait().unwrap();
        }
    }

    impl Drop for Writer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A fresh `state.vscdb` in WAL mode, with the writer still connected.
    fn wal_db(dir: &Path) -> (PathBuf, Writer) {
        let path = dir.join("state.vscdb");
        let mut writer = Writer::start(&path);
        writer.sql(&format!("PRAGMA journal_mode=WAL; {SCHEMA}"));
        writer.put("ItemTable-is-not-read", &json!(1));
        (path, writer)
    }

    fn chat<'a>(snapshots: &'a [ChatSnapshot], id: &str) -> &'a ChatSnapshot {
        snapshots
            .iter()
            .find(|snapshot| snapshot.chat_id == id)
            .unwrap()
    }

    #[test]
    fn the_first_read_reports_every_composer_then_only_the_changed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut writer) = wal_db(dir.path());
        writer.put("composerData:a", &composer("a", "generating", &[("a1", 1)]));
        writer.put("bubbleId:a:a1", &user("a1", "fix it", T0));
        writer.put_blob(
            "composerData:b",
            &composer("b", "completed", &[("b1", 1), ("b2", 2)]),
        );
        writer.put_blob("bubbleId:b:b1", &user("b1", "explain", T0));
        writer.put("bubbleId:b:b2", &assistant("b2", "It parses.", T1));
        writer.put("bubbleId:b:stray", &assistant("stray", "not listed", T1));
        writer.put("composerData:c", &composer("c", "error", &[("c1", 1)]));
        writer.put("bubbleId:c:c1", &user("c1", "deploy", T0));
        writer.sql("INSERT INTO cursorDiskKV VALUES ('composerData:broken', 'not json {')");
        writer.put("composerData:not-a-composer", &json!(["a list"]));
        writer.put("checkpointId:a:x", &json!({"ignored": true}));

        let mut db = CursorDb::open(&path).unwrap();
        let first = db.changed_chats().unwrap();
        let mut ids: Vec<&str> = first.iter().map(|s| s.chat_id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(
            chat(&first, "b").turns[0].reply,
            "It parses.",
            "BLOB values and stray bubbles"
        );
        assert_eq!(
            chat(&first, "c").turns[0].state,
            TurnState::Failed(UNSPECIFIED_ERROR.into())
        );
        let mut differ = SnapshotDiffer::new();
        let mut events = differ.update(chat(&first, "a"));
        assert!(db.changed_chats().unwrap().is_empty(), "nothing changed");

        // Cursor lists the answer bubble, then streams text into its row alone.
        writer.put(
            "composerData:a",
            &composer("a", "generating", &[("a1", 1), ("a2", 2)]),
        );
        writer.put("bubbleId:a:a2", &assistant("a2", "", T1));
        let changed = db.changed_chats().unwrap();
        assert_eq!(changed.len(), 1);
        events.extend(differ.update(&changed[0]));
        writer.put("bubbleId:a:a2", &assistant("a2", "Working on", T1));
        let changed = db.changed_chats().unwrap();
        assert_eq!(
            changed.len(),
            1,
            "a generating composer's bubbles are read again"
        );
        assert_eq!(changed[0].turns[0].state, TurnState::Replying);
        events.extend(differ.update(&changed[0]));
        writer.put(
            "bubbleId:a:a2",
            &assistant("a2", "Fixed: the cookie path.", T1),
        );
        writer.put(
            "composerData:a",
            &composer("a", "completed", &[("a1", 1), ("a2", 2)]),
        );
        let changed = db.changed_chats().unwrap();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].chat_id, "a");
        events.extend(differ.update(&changed[0]));
        assert_eq!(
            kinds(&events),
            [
                "chat_seen",
                "prompt_seen",
                "reply_started",
                "reply_completed"
            ]
        );
        assert_eq!(
            events[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: "Fixed: the cookie path.".into(),
                length: 23
            }
        );
        // The settling re-read after a change reports nothing when nothing moved.
        assert!(db.changed_chats().unwrap().is_empty());
        assert!(db.changed_chats().unwrap().is_empty());
        writer.close();
    }

    /// A file's length, content hash and mtime; None when it does not exist.
    type FileState = Option<(usize, u64, SystemTime)>;

    /// Each file's state, by suffix.
    fn files_state(path: &Path) -> Vec<(String, FileState)> {
        ["", "-wal", "-shm", "-journal"]
            .iter()
            .map(|suffix| {
                let file = side_file(path, suffix);
                let state = std::fs::read(&file).ok().map(|bytes| {
                    let (len, hash) = digest_of(&bytes);
                    (
                        len,
                        hash,
                        std::fs::metadata(&file).unwrap().modified().unwrap(),
                    )
                });
                (suffix.to_string(), state)
            })
            .collect()
    }

    fn exists(path: &Path, suffix: &str) -> bool {
        side_file(path, suffix).exists()
    }

    #[test]
    fn reads_leave_every_file_untouched_whether_cursor_runs_has_closed_or_crashed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut writer) = wal_db(dir.path());
        writer.put("composerData:a", &composer("a", "completed", &[("a1", 1)]));
        writer.put("bubbleId:a:a1", &user("a1", "hi", T0));

        // Cursor running: the -wal and -shm exist and the writer holds the index.
        assert!(exists(&path, "-wal") && exists(&path, "-shm"));
        let before = files_state(&path);
        let mut db = CursorDb::open(&path).unwrap();
        assert_eq!(db.changed_chats().unwrap().len(), 1);
        writer.put("composerData:b", &composer("b", "completed", &[]));
        let before_second = files_state(&path);
        assert_ne!(before, before_second, "the writer wrote");
        assert_eq!(db.changed_chats().unwrap().len(), 1);
        assert_eq!(files_state(&path), before_second);

        // Cursor closed: the last connection checkpoints and deletes -wal and -shm.
        writer.close();
        assert!(!exists(&path, "-wal") && !exists(&path, "-shm"));
        let before = files_state(&path);
        assert!(db.changed_chats().unwrap().is_empty());
        let mut fresh = CursorDb::open(&path).unwrap();
        assert_eq!(fresh.changed_chats().unwrap().len(), 2);
        assert_eq!(files_state(&path), before, "no -wal or -shm created");

        // Cursor crashed: -wal (with commits) and -shm are left and nobody holds them.
        let mut writer = Writer::start(&path);
        writer.put("composerData:c", &composer("c", "completed", &[]));
        writer.crash();
        assert!(std::fs::metadata(side_file(&path, "-wal")).unwrap().len() > 0);
        let before = files_state(&path);
        let changed = db.changed_chats().unwrap();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].chat_id, "c", "commits only in the WAL are read");
        assert_eq!(
            CursorDb::open(&path)
                .unwrap()
                .changed_chats()
                .unwrap()
                .len(),
            3
        );
        assert_eq!(files_state(&path), before);

        // A -wal with content but no -shm cannot be read without creating the index.
        std::fs::remove_file(side_file(&path, "-shm")).unwrap();
        let before = files_state(&path);
        let error = db.changed_chats().unwrap_err();
        assert!(
            matches!(error, CursorError::WalWithoutIndex { .. }),
            "{error}"
        );
        assert!(error.is_retryable());
        assert!(CursorDb::open(&path).unwrap_err().is_retryable());
        assert_eq!(files_state(&path), before);
    }

    #[test]
    fn a_writer_lock_is_busy_and_retryable_within_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        let mut writer = Writer::start(&path);
        writer.sql(&format!("PRAGMA journal_mode=DELETE; {SCHEMA}"));
        writer.put("composerData:a", &composer("a", "completed", &[]));
        let mut db = CursorDb::open(&path).unwrap();
        assert_eq!(db.changed_chats().unwrap().len(), 1);
        writer.sql("BEGIN EXCLUSIVE; INSERT INTO cursorDiskKV VALUES ('composerData:b', '{\"composerId\":\"b\",\"name\":\"b\"}')");
        let started = Instant::now();
        let error = db.changed_chats().unwrap_err();
        assert!(
            started.elapsed() < Duration::from_millis(700),
            "{:?}",
            started.elapsed()
        );
        assert!(matches!(error, CursorError::Busy { .. }), "{error}");
        assert!(error.is_retryable());
        assert!(error.to_string().contains("locked"), "{error}");
        writer.sql("COMMIT");
        let changed = db.changed_chats().unwrap();
        assert_eq!(changed.len(), 1, "the failed read remembered nothing");
        assert_eq!(changed[0].chat_id, "b");
        writer.close();
    }

    #[test]
    fn the_legacy_chat_panel_of_a_workspace_database_is_read_as_chats() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
            )
            .unwrap();
        let put = |value: serde_json::Value| {
            writer
                .execute(
                    "INSERT INTO ItemTable (key, value) VALUES (?1, ?2)",
                    (LEGACY_CHAT_KEY, value.to_string()),
                )
                .unwrap();
        };
        put(
            serde_json::json!({"tabs": [{"tabId": "t1", "chatTitle": "login", "bubbles": [
            {"type": "user", "id": "u1", "text": "why does login 500?"},
            {"type": "ai", "id": "a1", "text": "The cookie is unset."},
            {"type": "user", "id": "u2", "text": "fix it"}]}]}),
        );
        let mut db = CursorDb::open(&path)
            .unwrap()
            .with_workspace(Some("/home/u/app".into()));
        let chats = db.changed_chats().unwrap();
        assert_eq!(chats.len(), 1);
        let chat = &chats[0];
        assert_eq!(chat.chat_id, "t1");
        assert_eq!(chat.workspace.as_deref(), Some("/home/u/app"));
        assert_eq!(chat.turns.len(), 2);
        assert_eq!(chat.turns[0].state, TurnState::Completed);
        assert_eq!(chat.turns[0].reply, "The cookie is unset.");
        assert_eq!(chat.turns[1].state, TurnState::Waiting);
        assert!(
            db.changed_chats().unwrap().is_empty(),
            "unchanged value, no news"
        );
        put(serde_json::json!({"tabs": [{"tabId": "t1", "bubbles": [
            {"type": "user", "id": "u1", "text": "why does login 500?"},
            {"type": "ai", "id": "a1", "text": "The cookie is unset."},
            {"type": "user", "id": "u2", "text": "fix it"},
            {"type": "ai", "id": "a2", "text": "Done."}]}]}));
        let mut differ = SnapshotDiffer::new();
        differ.update(chat);
        let again = db.changed_chats().unwrap();
        assert_eq!(kinds(&differ.update(&again[0])), ["reply_started"]);
        assert_eq!(
            kinds(&differ.on_quiet(10_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        assert!(legacy_chat_snapshots(&serde_json::json!({"tabs": 3}), None).is_empty());
        assert!(legacy_chat_snapshots(&serde_json::json!([1, {"tabs": [{}]}]), None).is_empty());
    }

    #[test]
    fn a_legacy_panel_tab_ends_before_its_empty_input_bubble_and_is_dated_by_its_last_send() {
        // The shape of the corpus file's tabs: the input box is a last user bubble with
        // no text, and the tab's only time is `lastSendTime`.
        let chatdata = json!({"tabs": [{"tabId": "t1", "lastSendTime": 1_731_814_419_726u64,
            "bubbles": [
                {"type": "user", "id": "u1", "text": "how to run a server?"},
                {"type": "ai", "id": "a1", "text": "   "},
                {"type": "ai", "id": "a2", "text": "Use python -m http.server."},
                {"type": "user", "id": "u2", "text": ""}]}], "chatDataVersion": 0});
        let chats = legacy_chat_snapshots(&chatdata, Some("/w"));
        assert_eq!(chats.len(), 1);
        assert_eq!(chats[0].updated_ms, Some(1_731_814_419_726));
        assert_eq!(
            chats[0].turns,
            [turn(
                "u1",
                Some("how to run a server?"),
                "Use python -m http.server.",
                TurnState::Open {
                    tool_pending: false
                },
                1_731_814_419_726
            )]
        );
    }

    /// A per-workspace composer list of Cursor 2024: composers with inline bubbles.
    fn inline_composers(ids: &[&str]) -> Value {
        let composers: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"composerId": id, "status": "completed", "createdAt": 1_731_797_537_671u64,
                "lastUpdatedAt": 1_731_797_581_874u64, "name": "copilot page", "text": "",
                "conversation": [
                    {"type": 1, "bubbleId": format!("{id}-u1"), "text": "create a page", "relevantFiles": []},
                    {"type": 2, "bubbleId": format!("{id}-a1"), "text": "Created it.", "codeBlocks": []}]})
            })
            .collect();
        json!({"allComposers": composers, "selectedComposerId": ids[0], "composerDataVersion": 0})
    }

    #[test]
    fn inline_composers_are_chats_and_composer_headers_are_not() {
        let chats = inline_composer_snapshots(&inline_composers(&["c1", "c2", "c1"]), Some("/w"));
        let ids: Vec<&str> = chats.iter().map(|chat| chat.chat_id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"], "each composer once");
        assert_eq!(chats[0].workspace.as_deref(), Some("/w"));
        assert_eq!(chats[0].updated_ms, Some(1_731_797_581_874));
        assert_eq!(
            chats[0].turns,
            [turn(
                "c1-u1",
                Some("create a page"),
                "Created it.",
                TurnState::Completed,
                1_731_797_581_874
            )]
        );
        // Cursor 2025 on: only headers here, the chats are in the global database.
        let headers = json!({"allComposers": [
            {"type": "head", "composerId": "h1", "name": "Sent to Chat", "createdAt": 1_748_179_228_678u64,
             "lastUpdatedAt": 1_748_188_503_239u64, "unifiedMode": "agent", "forceMode": "edit"}],
            "selectedComposerIds": ["h1"], "hasMigratedComposerData": true,
            "hasMigratedMultipleComposers": true});
        assert!(inline_composer_snapshots(&headers, Some("/w")).is_empty());
        for not_a_list in [
            json!({}),
            json!({"allComposers": 3}),
            json!([1]),
            json!("x"),
        ] {
            assert!(inline_composer_snapshots(&not_a_list, None).is_empty());
        }
    }

    /// A rollback-journal database with `ItemTable` (and `cursorDiskKV` when `rows` is
    /// some): Cursor's per-workspace layout, and its global one.
    fn item_table_db(path: &Path, items: &[(&str, Value)], rows: Option<&[&str]>) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let writer = Connection::open(path).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
            )
            .unwrap();
        for (key, value) in items {
            writer
                .execute(
                    "INSERT INTO ItemTable (key, value) VALUES (?1, ?2)",
                    (key, value.to_string()),
                )
                .unwrap();
        }
        if let Some(rows) = rows {
            writer
                .execute_batch(
                    "CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
                )
                .unwrap();
            for id in rows {
                writer
                    .execute(
                        "INSERT INTO cursorDiskKV (key, value) VALUES (?1, ?2)",
                        (
                            format!("composerData:{id}"),
                            composer(id, "completed", &[]).to_string(),
                        ),
                    )
                    .unwrap();
            }
        }
    }

    fn chat_ids(chats: &[ChatSnapshot]) -> Vec<&str> {
        let mut ids: Vec<&str> = chats.iter().map(|chat| chat.chat_id.as_str()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn an_inline_composer_the_global_database_holds_is_listed_only_from_there() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("Cursor/User");
        let workspace_db = user.join("workspaceStorage/9f2c/state.vscdb");
        let global_db = user.join("globalStorage/state.vscdb");
        let composers = inline_composers(&["only-here", "in-global", "in-this-kv"]);
        item_table_db(
            &workspace_db,
            &[(INLINE_COMPOSERS_KEY, composers.clone())],
            Some(&["in-this-kv"]),
        );
        // No global database yet: every inline composer but the one this database holds
        // as a row.
        let mut db = CursorDb::open(&workspace_db)
            .unwrap()
            .with_global(Some(global_db.clone()));
        let chats = db.changed_chats().unwrap();
        assert_eq!(
            chat_ids(&chats),
            ["in-global", "in-this-kv", "only-here"],
            "the row of this database is read as a composer of its own"
        );
        item_table_db(&global_db, &[], Some(&["in-global"]));
        let mut fresh = CursorDb::open(&workspace_db)
            .unwrap()
            .with_global(Some(global_db.clone()));
        let chats = fresh.changed_chats().unwrap();
        assert_eq!(
            chat_ids(&chats),
            ["in-this-kv", "only-here"],
            "the global database's composer is its chat, not this one's"
        );
        let inline: Vec<&ChatSnapshot> =
            chats.iter().filter(|chat| !chat.turns.is_empty()).collect();
        assert_eq!(
            inline
                .iter()
                .map(|chat| chat.chat_id.as_str())
                .collect::<Vec<_>>(),
            ["only-here"],
            "only the composer no composerData row holds is read from the inline list"
        );
        assert!(fresh.changed_chats().unwrap().is_empty(), "no news");
        // A global database that is not Cursor's holds nothing.
        std::fs::remove_file(&global_db).unwrap();
        std::fs::write(&global_db, "not a database").unwrap();
        let mut other = CursorDb::open(&workspace_db)
            .unwrap()
            .with_global(Some(global_db));
        assert_eq!(
            other
                .changed_chats()
                .unwrap()
                .iter()
                .filter(|chat| !chat.turns.is_empty())
                .count(),
            2
        );
    }

    #[test]
    fn files_that_are_not_cursor_databases_are_rejected_specifically() {
        let dir = tempfile::tempdir().unwrap();
        let missing = CursorDb::open(&dir.path().join("nope.vscdb")).unwrap_err();
        assert!(matches!(missing, CursorError::Open { .. }), "{missing}");
        let text = dir.path().join("text.vscdb");
        std::fs::write(&text, "this is a text file, long enough to hold an SQLite header if it were one, but it is not.").unwrap();
        let error = CursorDb::open(&text).unwrap_err();
        assert!(matches!(error, CursorError::NotSqlite { .. }), "{error}");
        let empty = dir.path().join("empty.vscdb");
        std::fs::write(&empty, "").unwrap();
        let error = CursorDb::open(&empty).unwrap_err();
        assert!(error.to_string().contains("is empty"), "{error}");
        let other = dir.path().join("other.vscdb");
        let mut writer = Writer::start(&other);
        writer.sql("PRAGMA journal_mode=WAL; CREATE TABLE notes (key TEXT, value BLOB)");
        writer.close();
        let error = CursorDb::open(&other).unwrap_err();
        assert!(matches!(error, CursorError::NotCursor { .. }), "{error}");
        assert!(
            error
                .to_string()
                .contains("no cursorDiskKV or ItemTable table"),
            "{error}"
        );
        for error in [missing, error] {
            assert!(!error.is_retryable());
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["empty.vscdb", "other.vscdb", "text.vscdb"],
            "nothing created"
        );
    }
}

#[cfg(test)]
mod fuzz {
    //! `composer_snapshot` never panics, whatever the JSON.
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            prop_oneof![
                Just("1"),
                Just("b1"),
                Just("file:///x%2"),
                Just("generating"),
                Just("error")
            ]
            .prop_map(|text| Value::String(text.into())),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::hash_map(
                    prop_oneof![
                        Just("type".to_string()),
                        Just("bubbleId".to_string()),
                        Just("text".to_string()),
                        Just("createdAt".to_string()),
                        Just("workspaceUris".to_string()),
                        any::<String>()
                    ],
                    inner,
                    0..6
                )
                .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    fn composer() -> impl Strategy<Value = Value> {
        (any_json(), any_json(), any_json(), any_json(), any_json()).prop_map(
            |(status, headers, conversation, generating, updated)| {
                json!({"composerId": "c", "status": status, "fullConversationHeadersOnly": headers,
                    "conversation": conversation, "conversationMap": {"b1": conversation},
                    "generatingBubbleIds": generating, "lastUpdatedAt": updated, "error": status})
            },
        )
    }

    proptest! {
        #[test]
        fn any_composer_and_bubbles_never_panic(
            composer in prop_oneof![composer(), any_json()],
            bubbles in proptest::collection::hash_map(prop_oneof![Just("b1".to_string()), any::<String>()], any_json(), 0..4),
        ) {
            let _ = composer_snapshot(&composer, &bubbles, Some("/w"));
        }

        #[test]
        fn any_uri_never_panics(uri in any::<String>()) {
            let _ = crate::observe::text::local_path(&uri);
            let _ = crate::observe::text::local_path(&format!("file://{uri}"));
        }
    }
}

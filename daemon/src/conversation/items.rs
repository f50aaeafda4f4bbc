//! The items of a conversation as its store records them — prompt, assistant text, tool call, tool result, end of turn, needs-input — each with the place of its bytes in the store and their SHA-256, so anyone holding the chat's file can check them (issue 43's `koru audit` builds on these). Pure types: the readers in `stores/` report items through `TurnCollector::item` as they recognize them.

use serde::Serialize;

use super::model::{one_line, SUMMARY_CHARS};

/// What an item of the conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// The user's prompt (it opens a turn).
    Prompt,
    /// Text the agent wrote (not only the final reply: every text record).
    AssistantText,
    /// A tool the agent called.
    ToolCall,
    /// What a tool call gave back.
    ToolResult,
    /// The store's record that the turn ended (`outcome`: how).
    TurnEnd,
    /// The store's record that the chat waits for the user (an approval, a question).
    NeedsInput,
}

/// How a tool call or a turn ended, as the store records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemOutcome {
    /// A tool call that succeeded.
    Ok,
    /// A tool call that failed.
    Error,
    /// A tool call the user declined, or one cut off.
    Rejected,
    /// A turn the agent ended.
    Complete,
    /// A turn that failed.
    Failed,
    /// A turn the user interrupted.
    Cancelled,
}

impl ItemOutcome {
    /// A step's outcome as an item's; `None` while it is not known.
    pub fn of_step(outcome: koru_protocol::StepOutcome) -> Option<Self> {
        use koru_protocol::StepOutcome;
        match outcome {
            StepOutcome::Ok => Some(ItemOutcome::Ok),
            StepOutcome::Error => Some(ItemOutcome::Error),
            StepOutcome::Rejected => Some(ItemOutcome::Rejected),
            _ => None,
        }
    }
}

/// Where an item's bytes are in the store, and their SHA-256 (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceRecord {
    /// One line of a JSONL file: `bytes` from `offset` (where the line starts), the line
    /// without its `\n` (a `\r` before it is kept), so `sed -n '<line>p' FILE | head -c -1 |
    /// sha256sum` rechecks it (for a last line with its `\n`).
    Line {
        /// 1-based.
        line: u64,
        offset: u64,
        bytes: u64,
        sha256: String,
        /// The element of the line's JSON the item is (RFC 6901), when the line holds a
        /// list of them (a Gemini log's `$set` of every message).
        #[serde(skip_serializing_if = "Option::is_none")]
        pointer: Option<String>,
    },
    /// One JSON element of a document file: its bytes, `offset..offset + bytes` of the file
    /// exactly, and where it is in the document (RFC 6901).
    Element {
        offset: u64,
        bytes: u64,
        sha256: String,
        pointer: String,
        /// The file, when it is not the chat's own source file (a Cline 4 session's
        /// `<id>.messages.json` beside its manifest).
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
    },
    /// One row of a SQLite store: its table and key, and the value's bytes as stored.
    Row {
        table: String,
        row: String,
        bytes: u64,
        sha256: String,
        /// The element of the value's JSON the item is (RFC 6901), when the value holds a
        /// whole chat (Cursor's 2024 inline composers, the legacy chat panel).
        #[serde(skip_serializing_if = "Option::is_none")]
        pointer: Option<String>,
        /// The database, when it is not the chat's own source file (a per-workspace
        /// composer whose rows are in Cursor's global database).
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
    },
}

impl SourceRecord {
    /// A JSONL line (its bytes without the `\n`) starting at `offset`.
    pub fn line(line: u64, offset: u64, bytes: &[u8]) -> Self {
        SourceRecord::Line {
            line,
            offset,
            bytes: bytes.len() as u64,
            sha256: sha256_hex(bytes),
            pointer: None,
        }
    }

    /// The element `element` (a slice of `document`) at `pointer`.
    pub fn element(document: &[u8], element: &[u8], pointer: String) -> Self {
        SourceRecord::Element {
            offset: offset_in(document, element),
            bytes: element.len() as u64,
            sha256: sha256_hex(element),
            pointer,
            file: None,
        }
    }

    /// A row of `table` keyed `row` whose value is `value`.
    pub fn row(table: &str, row: &str, value: &[u8]) -> Self {
        SourceRecord::Row {
            table: table.to_string(),
            row: row.to_string(),
            bytes: value.len() as u64,
            sha256: sha256_hex(value),
            pointer: None,
            file: None,
        }
    }

    /// The same record, naming `pointer` inside it.
    pub fn at(mut self, inner: String) -> Self {
        match &mut self {
            SourceRecord::Line { pointer, .. } | SourceRecord::Row { pointer, .. } => {
                *pointer = Some(inner);
            }
            SourceRecord::Element { pointer, .. } => *pointer = inner,
        }
        self
    }

    /// The same record in the file `name` (not the chat's own source file).
    pub fn in_file(mut self, name: String) -> Self {
        match &mut self {
            SourceRecord::Element { file, .. } | SourceRecord::Row { file, .. } => {
                *file = Some(name);
            }
            SourceRecord::Line { .. } => {}
        }
        self
    }

    /// The SHA-256 of the record's bytes.
    pub fn sha256(&self) -> &str {
        match self {
            SourceRecord::Line { sha256, .. }
            | SourceRecord::Element { sha256, .. }
            | SourceRecord::Row { sha256, .. } => sha256,
        }
    }
}

/// One item of a conversation, as the readers report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConversationItem {
    /// The turn it belongs to (0 is the chat's first, as `TurnCollector` counts).
    pub turn: u64,
    pub kind: ItemKind,
    /// The store's own time for it, when it records one.
    pub at_ms: Option<u64>,
    /// The SHA-256 of a text (prompt, assistant text, tool result) as UTF-8, and its length
    /// in characters.
    pub text_sha256: Option<String>,
    pub text_chars: Option<u64>,
    /// What it says, on one line, at most `SUMMARY_CHARS` characters.
    pub summary: String,
    /// The tool, for a tool call or result.
    pub tool: Option<String>,
    /// The store's id of the call, for a tool call or result.
    pub call_id: Option<String>,
    /// How a tool call or turn ended.
    pub outcome: Option<ItemOutcome>,
    pub source: SourceRecord,
    /// Its place among the items of the same source record (0 for the first).
    pub part: u32,
}

/// What a reader knows of an item when it recognizes it (borrowed, so a read without a
/// sink pays nothing for it); `TurnCollector::item` makes the `ConversationItem`.
#[derive(Debug, Clone, Copy)]
pub struct Item<'t> {
    pub kind: ItemKind,
    pub at_ms: Option<u64>,
    pub text: Option<&'t str>,
    /// The summary; `None` for the text's first line.
    pub summary: Option<&'t str>,
    pub tool: Option<&'t str>,
    pub call_id: Option<&'t str>,
    pub outcome: Option<ItemOutcome>,
}

impl<'t> Item<'t> {
    fn new(kind: ItemKind, at_ms: Option<u64>) -> Self {
        Item {
            kind,
            at_ms,
            text: None,
            summary: None,
            tool: None,
            call_id: None,
            outcome: None,
        }
    }

    pub fn prompt(text: &'t str, at_ms: Option<u64>) -> Self {
        Item {
            text: Some(text),
            ..Item::new(ItemKind::Prompt, at_ms)
        }
    }

    pub fn assistant_text(text: &'t str, at_ms: Option<u64>) -> Self {
        Item {
            text: Some(text),
            ..Item::new(ItemKind::AssistantText, at_ms)
        }
    }

    /// A tool call, summarized as its step is.
    pub fn tool_call(step: &'t koru_protocol::TurnStep, call_id: Option<&'t str>) -> Self {
        Item {
            summary: Some(&step.summary),
            tool: Some(&step.tool),
            call_id,
            outcome: ItemOutcome::of_step(step.outcome),
            ..Item::new(ItemKind::ToolCall, step.at_ms)
        }
    }

    /// A tool call's result (`text` what the tool gave back, when the store keeps it).
    pub fn tool_result(
        tool: Option<&'t str>,
        call_id: Option<&'t str>,
        text: Option<&'t str>,
        outcome: Option<ItemOutcome>,
        at_ms: Option<u64>,
    ) -> Self {
        Item {
            text,
            tool,
            call_id,
            outcome,
            ..Item::new(ItemKind::ToolResult, at_ms)
        }
    }

    /// The result of the call `step` (its tool and outcome), `text` what it gave back.
    pub fn step_result(
        step: &'t koru_protocol::TurnStep,
        call_id: Option<&'t str>,
        text: Option<&'t str>,
        at_ms: Option<u64>,
    ) -> Self {
        Item::tool_result(
            Some(&step.tool),
            call_id,
            text,
            ItemOutcome::of_step(step.outcome),
            at_ms,
        )
    }

    /// The turn's end (`why`: the error of a failed turn, when recorded).
    pub fn turn_end(outcome: ItemOutcome, why: Option<&'t str>, at_ms: Option<u64>) -> Self {
        Item {
            summary: why,
            outcome: Some(outcome),
            ..Item::new(ItemKind::TurnEnd, at_ms)
        }
    }

    /// The chat waits for the user (`what`: the question or the call awaiting approval).
    pub fn needs_input(what: &'t str, at_ms: Option<u64>) -> Self {
        Item {
            summary: Some(what),
            ..Item::new(ItemKind::NeedsInput, at_ms)
        }
    }

    /// The item of turn `turn` from `source`, `part`-th of it.
    pub fn into_item(self, turn: u64, source: SourceRecord, part: u32) -> ConversationItem {
        let summary = match (self.summary, self.text, self.outcome) {
            (Some(summary), ..) => one_line(summary, SUMMARY_CHARS),
            (None, Some(text), _) => one_line(text, SUMMARY_CHARS),
            (None, None, Some(outcome)) if self.kind == ItemKind::TurnEnd => {
                format!("{outcome:?}").to_lowercase()
            }
            _ => String::new(),
        };
        ConversationItem {
            turn,
            kind: self.kind,
            at_ms: self.at_ms,
            text_sha256: self.text.map(|text| sha256_hex(text.as_bytes())),
            text_chars: self.text.map(|text| text.chars().count() as u64),
            summary,
            tool: self.tool.map(str::to_string),
            call_id: self.call_id.map(str::to_string),
            outcome: self.outcome,
            source,
            part,
        }
    }
}

/// The byte offset of `inner` (a slice of `outer`) in `outer`: pointer arithmetic, as a
/// borrowed `RawValue`'s text is a slice of the input it was parsed from. `inner` not
/// within `outer` is a bug of the caller; it gives the end of `outer`.
pub fn offset_in(outer: &[u8], inner: &[u8]) -> u64 {
    let start = outer.as_ptr() as usize;
    let at = inner.as_ptr() as usize;
    let offset = at.wrapping_sub(start);
    debug_assert!(
        offset + inner.len() <= outer.len(),
        "not a slice of the document"
    );
    offset.min(outer.len()) as u64
}

/// The elements of the JSON array in `document` — the document itself (`key` `None`), or
/// its top-level field `key` — as sources (`/<i>` or `/<key>/<i>`); empty when the document
/// has no such array.
pub fn array_elements(document: &[u8], key: Option<&str>) -> Vec<SourceRecord> {
    use serde_json::value::RawValue;
    let array: &[u8] = match key {
        None => document,
        Some(key) => {
            let fields: std::collections::HashMap<&str, &RawValue> =
                serde_json::from_slice(document).unwrap_or_default();
            match fields.get(key) {
                Some(raw) => raw.get().as_bytes(),
                None => return Vec::new(),
            }
        }
    };
    let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(array) else {
        return Vec::new();
    };
    let prefix = key.map(|key| pointer(&[key])).unwrap_or_default();
    elements
        .iter()
        .enumerate()
        .map(|(index, raw)| {
            SourceRecord::element(document, raw.get().as_bytes(), format!("{prefix}/{index}"))
        })
        .collect()
}

/// An RFC 6901 pointer to `path` (object keys and array indexes).
pub fn pointer<S: std::fmt::Display>(path: &[S]) -> String {
    let mut out = String::new();
    for token in path {
        out.push('/');
        out.push_str(&token.to_string().replace('~', "~0").replace('/', "~1"));
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::journal::canonical::sha256_hex(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_tildes_and_slashes() {
        assert_eq!(pointer(&["messages", "3", "a/b~c"]), "/messages/3/a~1b~0c");
        assert_eq!(pointer::<&str>(&[]), "");
    }

    #[test]
    fn an_element_is_found_by_its_place_in_the_document() {
        let document = br#"{"a": [1, {"b": "x"}]}"#;
        let parsed: std::collections::HashMap<&str, Vec<&serde_json::value::RawValue>> =
            serde_json::from_slice(document).unwrap();
        let element = parsed["a"][1].get().as_bytes();
        let SourceRecord::Element {
            offset,
            bytes,
            sha256,
            ..
        } = SourceRecord::element(document, element, pointer(&["a", "1"]))
        else {
            panic!()
        };
        let range = offset as usize..(offset + bytes) as usize;
        assert_eq!(&document[range.clone()], br#"{"b": "x"}"#);
        assert_eq!(sha256, sha256_hex(&document[range]));
    }

    #[test]
    fn items_serialize_flat() {
        let step =
            crate::conversation::model::step(koru_protocol::StepKind::Command, "Bash", "ls -l");
        let item =
            Item::tool_call(&step, Some("t1")).into_item(2, SourceRecord::line(5, 100, b"{}\r"), 1);
        let json = serde_json::to_value(&item).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"turn": 2, "kind": "tool_call", "at_ms": null, "text_sha256": null,
                "text_chars": null, "summary": "ls -l", "tool": "Bash", "call_id": "t1", "outcome": null,
                "source": {"kind": "line", "line": 5, "offset": 100, "bytes": 3,
                           "sha256": sha256_hex(b"{}\r")}, "part": 1})
        );
        let end = Item::turn_end(ItemOutcome::Cancelled, None, Some(7)).into_item(
            0,
            SourceRecord::row("t", "k", b"v"),
            0,
        );
        assert_eq!(end.summary, "cancelled");
    }
}

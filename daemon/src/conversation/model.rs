//! The turn model every store's reader builds (a prompt, the whole final reply, the agent's steps with their outcomes, times, model, usage) and the collector that keeps only the turns a read asked for, so reading a long history never holds all of it.

use std::collections::VecDeque;

use koru_protocol::{StepKind, StepOutcome, TurnState, TurnStep, TurnUsage};

use super::items::{ConversationItem, Item, SourceRecord};

/// One turn as its store recorded it, texts whole (paging is the answer's business).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The user's prompt; `None` for a turn the agent started by itself.
    pub prompt: Option<String>,
    /// The final reply text: the agent's last message of the turn, whole.
    pub reply: Option<String>,
    /// The agent's steps in order.
    pub steps: Vec<TurnStep>,
    pub state: TurnState,
    /// Why the turn failed, when it did.
    pub error: Option<String>,
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    pub model: Option<String>,
    pub usage: Option<TurnUsage>,
}

impl Turn {
    /// A turn opened by `prompt` (or by the agent, with `None`), in progress.
    pub fn new(prompt: Option<String>, started_ms: Option<u64>) -> Self {
        Turn {
            prompt,
            reply: None,
            steps: Vec::new(),
            state: TurnState::InProgress,
            error: None,
            started_ms,
            ended_ms: started_ms,
            model: None,
            usage: None,
        }
    }

    /// Moves `ended_ms` to `at_ms` when that is later (records are not always in order).
    pub fn touch(&mut self, at_ms: Option<u64>) {
        if let Some(at) = at_ms {
            self.ended_ms = Some(self.ended_ms.map_or(at, |e| e.max(at)));
            if self.started_ms.is_none() {
                self.started_ms = Some(at);
            }
        }
    }

    /// The next prompt began while this turn had no recorded end: it is `Complete` when
    /// the agent had replied, and `Unknown` when it had not (a store that shows neither an
    /// end nor a reply says nothing of how the turn went).
    pub fn supersede(&mut self) {
        if matches!(self.state, TurnState::InProgress | TurnState::NeedsInput) {
            self.state = if self.reply.is_some() {
                TurnState::Complete
            } else {
                TurnState::Unknown
            };
        }
    }

    /// The turn was interrupted: its steps with no result were cut off (`Rejected`).
    pub fn cancel(&mut self) {
        self.state = TurnState::Cancelled;
        for step in &mut self.steps {
            if step.outcome == StepOutcome::Unknown {
                step.outcome = StepOutcome::Rejected;
            }
        }
    }

    /// The turn failed with `error` (its trimmed text, or `fallback` when blank).
    pub fn fail(&mut self, error: &str, fallback: &str) {
        let error = error.trim();
        self.state = TurnState::Failed;
        self.error = Some(if error.is_empty() { fallback } else { error }.to_string());
    }

    /// Adds what one record says the turn used to what earlier records said.
    pub fn add_usage(&mut self, usage: &TurnUsage) {
        let total = self.usage.get_or_insert_with(TurnUsage::default);
        fn add(into: &mut Option<u64>, more: Option<u64>) {
            if let Some(more) = more {
                *into = Some(into.unwrap_or(0) + more);
            }
        }
        add(&mut total.input_tokens, usage.input_tokens);
        add(&mut total.output_tokens, usage.output_tokens);
        add(&mut total.cache_read_tokens, usage.cache_read_tokens);
        add(&mut total.cache_write_tokens, usage.cache_write_tokens);
        add(&mut total.reasoning_tokens, usage.reasoning_tokens);
    }
}

/// Which turns a read keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// The last N turns.
    Last(usize),
    /// The turn at this index (0 is the chat's first).
    Index(u64),
    /// The last turn whose prompt has this digest (`observe::prompt_digest`): a drive's.
    PromptDigest(String),
}

/// Receives a chat's turns in order as a reader closes them and keeps only those `Keep`
/// asks for (with their indexes), counting all; with a sink (`with_items`), also the
/// conversation's items as the reader recognizes them, each from the source record the
/// reader set last (`set_source`).
pub struct TurnCollector<'sink> {
    keep: Keep,
    total: u64,
    kept: VecDeque<(u64, Turn)>,
    items: Option<ItemSink<'sink>>,
}

/// Where a read's items go, and the record they come from.
struct ItemSink<'sink> {
    sink: Box<dyn FnMut(ConversationItem) + 'sink>,
    source: Option<SourceRecord>,
    /// The next item's place in `source`.
    part: u32,
}

impl std::fmt::Debug for TurnCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnCollector")
            .field("keep", &self.keep)
            .field("total", &self.total)
            .field("kept", &self.kept.len())
            .field("items", &self.items.is_some())
            .finish()
    }
}

impl<'sink> TurnCollector<'sink> {
    pub fn new(keep: Keep) -> Self {
        TurnCollector {
            keep,
            total: 0,
            kept: VecDeque::new(),
            items: None,
        }
    }

    /// A collector that also hands every item of the conversation to `sink`, in the
    /// order the reader recognizes them (keeping none of them).
    pub fn with_items(keep: Keep, sink: impl FnMut(ConversationItem) + 'sink) -> Self {
        TurnCollector {
            items: Some(ItemSink {
                sink: Box::new(sink),
                source: None,
                part: 0,
            }),
            ..TurnCollector::new(keep)
        }
    }

    /// Whether the read reports items: a reader computes a record's source (digests)
    /// only then.
    pub fn wants_items(&self) -> bool {
        self.items.is_some()
    }

    /// The record the next items come from (their `part`s counted from 0).
    pub fn set_source(&mut self, source: SourceRecord) {
        if let Some(items) = &mut self.items {
            items.source = Some(source);
            items.part = 0;
        }
    }

    /// The record items come from now, when items are wanted.
    pub fn source(&self) -> Option<&SourceRecord> {
        self.items.as_ref()?.source.as_ref()
    }

    /// `set_source` with a record made only when items are wanted.
    pub fn set_source_with(&mut self, source: impl FnOnce() -> SourceRecord) {
        if self.items.is_some() {
            self.set_source(source());
        }
    }

    /// One item of the turn being read (the next one `push` gets), from the current
    /// source record; nothing without a sink or before a source is set.
    pub fn item(&mut self, item: Item<'_>) {
        let turn = self.total;
        if let Some(items) = &mut self.items {
            if let Some(source) = &items.source {
                let part = items.part;
                items.part += 1;
                (items.sink)(item.into_item(turn, source.clone(), part));
            }
        }
    }

    /// The next turn of the chat.
    pub fn push(&mut self, turn: Turn) {
        let index = self.total;
        self.total += 1;
        match &self.keep {
            Keep::Last(n) => {
                if *n == 0 {
                    return;
                }
                if self.kept.len() == *n {
                    self.kept.pop_front();
                }
                self.kept.push_back((index, turn));
            }
            Keep::Index(wanted) => {
                if *wanted == index {
                    self.kept.push_back((index, turn));
                }
            }
            Keep::PromptDigest(digest) => {
                if turn
                    .prompt
                    .as_deref()
                    .is_some_and(|p| &crate::observe::prompt_digest(p) == digest)
                {
                    self.kept.clear();
                    self.kept.push_back((index, turn));
                }
            }
        }
    }

    /// The next turn pushed is the chat's turn `index` (a read that starts at a prompt's
    /// line, `ReadFrom`).
    pub fn start_at_turn(&mut self, index: u64) {
        self.total = index;
    }

    /// How many turns were pushed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept turns with their indexes, oldest first.
    pub fn into_turns(self) -> Vec<(u64, Turn)> {
        self.kept.into()
    }
}

/// Characters kept in a step's `summary`.
pub const SUMMARY_CHARS: usize = 160;

/// Characters kept in a step's `error`.
pub const STEP_ERROR_CHARS: usize = 300;

/// `text` on one line (whitespace runs collapsed), at most `max` characters (an ellipsis
/// ends a cut text).
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for word in text.split_whitespace() {
        let needed = word.chars().count() + usize::from(!out.is_empty());
        if count + needed > max {
            let room = max.saturating_sub(count + usize::from(!out.is_empty()) + 1);
            if !out.is_empty() && room > 0 {
                out.push(' ');
            }
            out.extend(word.chars().take(room));
            out.push('…');
            return out;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        count += needed;
    }
    out
}

/// A step's `error`: `text` on one line, at most `STEP_ERROR_CHARS`; `None` when blank.
pub fn step_error(text: &str) -> Option<String> {
    let line = one_line(text, STEP_ERROR_CHARS);
    (!line.is_empty()).then_some(line)
}

/// A step with nothing known of its outcome yet.
pub fn step(kind: StepKind, tool: &str, summary: &str) -> TurnStep {
    TurnStep {
        kind,
        tool: tool.to_string(),
        summary: one_line(summary, SUMMARY_CHARS),
        paths: Vec::new(),
        command: None,
        exit_code: None,
        outcome: StepOutcome::Unknown,
        error: None,
        at_ms: None,
    }
}

/// A compact one-line summary of a tool call's JSON arguments, for tools Koru does not
/// know: `key=value` pairs, strings unquoted, nested values as compact JSON, cut to
/// `SUMMARY_CHARS`.
pub fn summarize_arguments(arguments: &serde_json::Value) -> String {
    use serde_json::Value;
    let text = match arguments {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(s) => format!("{key}={s}"),
                other => format!("{key}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    one_line(&text, SUMMARY_CHARS)
}

/// Sets `turn`'s state from the observer's reading of the same turn, so a chat read back
/// and the events the observer reported agree (the document stores, whose observers decide
/// the state from the whole chat): waiting, replying and an answer not marked ended are
/// `InProgress`; a cancel cuts off the steps with no result (`Turn::cancel`); a failure
/// carries the observer's reason.
pub fn set_state_from_snapshot(turn: &mut Turn, state: &crate::observe::snapshot::TurnState) {
    use crate::observe::snapshot::TurnState as Observed;
    match state {
        Observed::Waiting | Observed::Replying | Observed::Open { .. } => {
            turn.state = TurnState::InProgress;
        }
        Observed::NeedsInput(_) => turn.state = TurnState::NeedsInput,
        Observed::Completed => turn.state = TurnState::Complete,
        Observed::Cancelled => turn.cancel(),
        Observed::Failed(reason) => turn.fail(reason, "failed"),
    }
}

/// A time in a store's JSON: milliseconds since the epoch (an integer, or a finite
/// non-negative float) or RFC 3339 text. `None` for anything else.
pub fn time_ms(value: &serde_json::Value) -> Option<u64> {
    match value {
        serde_json::Value::String(text) => crate::observe::text::parse_ts(text.trim()),
        serde_json::Value::Number(number) => number.as_u64().or_else(|| {
            number
                .as_f64()
                .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < u64::MAX as f64)
                .map(|ms| ms as u64)
        }),
        _ => None,
    }
}

/// The path a VS Code URI names, as the store wrote it: a serialized `URI` object's
/// `fsPath` (else its `file:` `external` decoded, else its `path`), or a URI string (a
/// `file:` URI decoded to a local path, any other text as it is). `None` for anything else.
pub fn uri_path(uri: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let non_empty = |text: &str| (!text.is_empty()).then(|| text.to_string());
    match uri {
        Value::String(text) if text.starts_with("file:") => crate::observe::text::local_path(text),
        Value::String(text) => non_empty(text),
        Value::Object(fields) => fields
            .get("fsPath")
            .and_then(Value::as_str)
            .and_then(non_empty)
            .or_else(|| {
                fields
                    .get("external")
                    .and_then(Value::as_str)
                    .and_then(crate::observe::text::local_path)
            })
            .or_else(|| {
                fields
                    .get("path")
                    .and_then(Value::as_str)
                    .and_then(non_empty)
            }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(prompt: &str) -> Turn {
        Turn::new(Some(prompt.to_string()), None)
    }

    #[test]
    fn the_collector_keeps_what_was_asked_and_counts_everything() {
        let mut last = TurnCollector::new(Keep::Last(2));
        let mut one = TurnCollector::new(Keep::Index(1));
        let mut drive = TurnCollector::new(Keep::PromptDigest(crate::observe::prompt_digest(
            "fix  the tests",
        )));
        for prompt in ["a", "fix the tests", "b", "fix\nthe tests", "c"] {
            last.push(turn(prompt));
            one.push(turn(prompt));
            drive.push(turn(prompt));
        }
        assert_eq!(last.total(), 5);
        let kept: Vec<u64> = last.into_turns().into_iter().map(|(i, _)| i).collect();
        assert_eq!(kept, [3, 4]);
        let kept = one.into_turns();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].1.prompt.as_deref(), Some("fix the tests"));
        let kept = drive.into_turns();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].0, 3, "the last turn with the drive's prompt");
    }

    #[test]
    fn summaries_are_one_bounded_line() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        let cut = one_line(&"word ".repeat(100), 20);
        assert!(cut.chars().count() <= 20, "{cut}");
        assert!(cut.ends_with('…'));
        assert_eq!(one_line(&"x".repeat(50), 10).chars().count(), 10);
        assert_eq!(
            summarize_arguments(&serde_json::json!({"path": "src/a.rs", "line": 3})),
            "line=3 path=src/a.rs"
        );
    }
}

/// Test helper: a store's corpus files checked against their hand-written expectations.
///
/// Beside each corpus file `F` (under `tests/corpus/<folder>/`) is `F.turns.json`, written by
/// reading `F` itself:
///
/// ```json
/// {"turns_total": 2,
///  "turns": {"0": {"prompt": "…", "reply": "…", "state": "complete", "error": null,
///                  "started": "2026-11-25T13:17:04.598Z", "ended": "…", "model": "…",
///                  "usage": {"input_tokens": 100, "output_tokens": 20},
///                  "steps": [{"tool": "Bash", "kind": "command", "paths": [],
///                             "command": "ls", "exit_code": null, "outcome": "ok"}]}}}
/// ```
///
/// `turns` names turns by index (all of them, or a chosen few of a long transcript); only
/// the fields a turn lists are compared (`started`/`ended` as RFC 3339 with milliseconds,
/// `usage` whole, `null` for absent). A turn that lists `steps` must list every step, each
/// compared on the fields it lists (`tool`, `kind`, `summary`, `paths`, `command`,
/// `exit_code`, `outcome`, `error`, `at`).
#[cfg(test)]
pub mod corpus {
    use super::{Keep, Turn, TurnCollector};
    use serde_json::{json, Value};
    use std::path::PathBuf;

    /// Whether a corpus file is an expectation file beside a transcript (`.expect.json`,
    /// `.turns.json`, `.items.json`), not a transcript.
    pub fn is_expectation(name: &str) -> bool {
        [".expect.json", ".turns.json", ".items.json"]
            .iter()
            .any(|ending| name.ends_with(ending))
    }

    /// The corpus folder `tests/corpus/<folder>`.
    pub fn folder(folder: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/corpus")
            .join(folder)
    }

    /// Reads every file of `tests/corpus/<folder>` whose name ends with one of `endings`
    /// (expectation files left out) with `read` (`Keep::Last(usize::MAX)`) and compares it with its `.turns.json`;
    /// panics listing every difference, or a file without expectations.
    pub fn check(
        folder_name: &str,
        endings: &[&str],
        read: impl Fn(&str, &[u8], &mut TurnCollector),
    ) {
        let dir = folder(folder_name);
        let names = transcripts(folder_name, endings);
        let mut differences = Vec::new();
        for name in &names {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let expected_path = dir.join(format!("{name}.turns.json"));
            let Ok(expected) = std::fs::read(&expected_path) else {
                differences.push(format!("{name}: no {name}.turns.json"));
                continue;
            };
            let expected: Value = serde_json::from_slice(&expected)
                .unwrap_or_else(|error| panic!("{}: {error}", expected_path.display()));
            let mut out = TurnCollector::new(Keep::Last(usize::MAX));
            read(name, &bytes, &mut out);
            let total = out.total();
            let turns = out.into_turns();
            differences.extend(
                compare(&expected, total, &turns)
                    .into_iter()
                    .map(|difference| format!("{name}: {difference}")),
            );
        }
        assert_none(
            &differences,
            &format!("corpus {folder_name} differs from its expectations"),
        );
    }

    /// The transcripts of `tests/corpus/<folder>` whose names end with one of `endings`
    /// (expectation files left out), sorted; panics when there is none.
    pub fn transcripts(folder_name: &str, endings: &[&str]) -> Vec<String> {
        let dir = folder(folder_name);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| endings.iter().any(|ending| name.ends_with(ending)))
            .filter(|name| !is_expectation(name))
            .collect();
        names.sort();
        assert!(!names.is_empty(), "no corpus files in {}", dir.display());
        names
    }

    /// `check_items` for every transcript of `folder` ending with one of `endings`, each a
    /// chat of its own.
    pub fn check_file_items(folder_name: &str, endings: &[&str], store: &str) {
        let names = transcripts(folder_name, endings);
        let chats: Vec<(&str, &str)> = names.iter().map(|name| (name.as_str(), "")).collect();
        check_items(folder_name, store, &chats);
    }

    /// Reads the chats `chats` names — (corpus file, chat id) pairs of `tests/corpus/<folder>`
    /// — with `read::read_items` as the store `store`, and compares their items with
    /// `<file>.items.json` (an array of items; an object of arrays by chat id for a file of
    /// several chats). With `UPDATE_ITEMS=1` it writes those files instead (review the diff
    /// against the transcript). Panics listing every difference.
    pub fn check_items(folder_name: &str, store: &str, chats: &[(&str, &str)]) {
        let dir = folder(folder_name);
        let update = std::env::var_os("UPDATE_ITEMS").is_some_and(|v| v == "1");
        let mut files: Vec<&str> = chats.iter().map(|(file, _)| *file).collect();
        files.dedup();
        assert!(!files.is_empty(), "no corpus chats for {folder_name}");
        let mut differences = Vec::new();
        for file in files {
            let ids: Vec<&str> = chats
                .iter()
                .filter(|(f, _)| *f == file)
                .map(|(_, id)| *id)
                .collect();
            let mut read = serde_json::Map::new();
            for id in &ids {
                let mut items = Vec::new();
                let mut by_turn: Vec<crate::conversation::read::TurnRecords> = Vec::new();
                crate::conversation::read::read_items(store, &dir.join(file), id, |item| {
                    items.push(serde_json::to_value(&item).unwrap());
                    let turn = item.turn as usize;
                    if by_turn.len() <= turn {
                        by_turn.resize_with(turn + 1, Default::default);
                    }
                    by_turn[turn].note(item);
                })
                .unwrap_or_else(|error| panic!("{file} {id}: {error}"));
                read.insert((*id).to_string(), Value::Array(items));
                // A drive's evidence read (`records`) finds each turn's prompt, reply and end
                // records where its items are.
                let request = crate::conversation::read::ReadRequest {
                    store: store.to_string(),
                    chat_id: (*id).to_string(),
                    source: dir.join(file),
                    keep: Keep::Last(usize::MAX),
                    expect_reply: false,
                    records: true,
                    from: None,
                };
                let found = crate::conversation::read::read_chat(&request)
                    .unwrap_or_else(|error| panic!("{file} {id}: {error}"));
                by_turn.resize_with(found.turns.len(), Default::default);
                if found.records != by_turn {
                    differences.push(format!(
                        "{file} {id}: the turns' records are not where their items are"
                    ));
                }
                if found.records.iter().all(|r| r.prompt.is_none()) && !found.turns.is_empty() {
                    differences.push(format!("{file} {id}: no turn has a prompt record"));
                }
                // Reporting items changes nothing of the turns.
                let request = crate::conversation::read::ReadRequest {
                    records: false,
                    ..request
                };
                let mut plain = TurnCollector::new(Keep::Last(usize::MAX));
                let mut with_items = TurnCollector::with_items(Keep::Last(usize::MAX), |_| {});
                crate::conversation::stores::read_store(&request, &mut plain).unwrap();
                crate::conversation::stores::read_store(&request, &mut with_items).unwrap();
                if plain.into_turns() != with_items.into_turns() {
                    differences.push(format!(
                        "{file} {id}: the turns differ when read with items"
                    ));
                }
            }
            let read = match ids.as_slice() {
                [id] => read.remove(*id).unwrap_or_default(),
                _ => Value::Object(read),
            };
            let expected_path = dir.join(format!("{file}.items.json"));
            if update {
                std::fs::write(&expected_path, items_file(&read)).unwrap();
                continue;
            }
            let Ok(expected) = std::fs::read(&expected_path) else {
                differences.push(format!("{file}: no {file}.items.json"));
                continue;
            };
            let expected: Value = serde_json::from_slice(&expected)
                .unwrap_or_else(|error| panic!("{}: {error}", expected_path.display()));
            differences.extend(
                compare_items(&expected, &read, "")
                    .into_iter()
                    .map(|difference| format!("{file}: {difference}")),
            );
        }
        assert_none(
            &differences,
            &format!("corpus {folder_name} items differ from their expectations (UPDATE_ITEMS=1 rewrites them)"),
        );
    }

    /// Panics with `heading` and every difference, when there is any.
    fn assert_none(differences: &[String], heading: &str) {
        assert!(
            differences.is_empty(),
            "{heading}:\n{}",
            differences.join("\n")
        );
    }

    /// An items file: one item per line, so a diff shows the items that changed.
    fn items_file(items: &Value) -> String {
        let array = |items: &[Value], indent: &str| -> String {
            let lines: Vec<String> = items
                .iter()
                .map(|item| format!("{indent}  {item}"))
                .collect();
            format!("[\n{}\n{indent}]", lines.join(",\n"))
        };
        match items {
            Value::Array(items) => format!("{}\n", array(items, "")),
            Value::Object(chats) => {
                let chats: Vec<String> = chats
                    .iter()
                    .map(|(id, items)| {
                        let items = items.as_array().map(Vec::as_slice).unwrap_or_default();
                        format!("  {}: {}", json!(id), array(items, "  "))
                    })
                    .collect();
                format!("{{\n{}\n}}\n", chats.join(",\n"))
            }
            other => format!("{other}\n"),
        }
    }

    /// The differences between expected and read items, item by item.
    fn compare_items(expected: &Value, read: &Value, chat: &str) -> Vec<String> {
        match (expected, read) {
            (Value::Object(want), Value::Object(got)) => {
                let mut differences = Vec::new();
                for id in want
                    .keys()
                    .chain(got.keys().filter(|id| !want.contains_key(*id)))
                {
                    differences.extend(compare_items(
                        want.get(id).unwrap_or(&Value::Null),
                        got.get(id).unwrap_or(&Value::Null),
                        &format!("chat {id} "),
                    ));
                }
                differences
            }
            (Value::Array(want), Value::Array(got)) => {
                let mut differences: Vec<String> = want
                    .iter()
                    .zip(got)
                    .enumerate()
                    .filter(|(_, (want, got))| want != got)
                    .map(|(n, (want, got))| format!("{chat}item {n}: expected {want}, read {got}"))
                    .collect();
                if want.len() != got.len() {
                    differences.push(format!(
                        "{chat}expected {} items, read {}",
                        want.len(),
                        got.len()
                    ));
                }
                differences
            }
            (want, got) => vec![format!("{chat}expected {want}, read {got}")],
        }
    }

    fn time(ms: Option<u64>) -> Value {
        ms.and_then(|ms| chrono::DateTime::from_timestamp_millis(i64::try_from(ms).ok()?))
            .map_or(Value::Null, |t| {
                json!(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            })
    }

    /// A turn as the expectation files spell it.
    pub fn turn_json(turn: &Turn) -> Value {
        let steps: Vec<Value> = turn
            .steps
            .iter()
            .map(|step| {
                json!({"tool": step.tool, "kind": step.kind, "summary": step.summary,
                       "paths": step.paths, "command": step.command, "exit_code": step.exit_code,
                       "outcome": step.outcome, "error": step.error, "at": time(step.at_ms)})
            })
            .collect();
        json!({"prompt": turn.prompt, "reply": turn.reply, "state": turn.state.as_str(),
               "error": turn.error, "started": time(turn.started_ms), "ended": time(turn.ended_ms),
               "model": turn.model, "usage": turn.usage, "steps": steps})
    }

    /// The differences between an expectation and what a reader read.
    pub fn compare(expected: &Value, total: u64, turns: &[(u64, Turn)]) -> Vec<String> {
        let mut differences = Vec::new();
        if let Some(want) = expected.get("turns_total") {
            if want != &json!(total) {
                differences.push(format!("turns_total: expected {want}, read {total}"));
            }
        }
        let Some(wanted) = expected.get("turns").and_then(Value::as_object) else {
            differences.push("the expectation has no `turns` object".into());
            return differences;
        };
        for (index, want) in wanted {
            let Some((_, turn)) = turns.iter().find(|(i, _)| &i.to_string() == index) else {
                differences.push(format!("turn {index}: not read"));
                continue;
            };
            let got = turn_json(turn);
            for (key, want_value) in want.as_object().into_iter().flatten() {
                let got_value = got.get(key).unwrap_or(&Value::Null);
                if key != "steps" {
                    if want_value != got_value {
                        differences.push(format!(
                            "turn {index} {key}: expected {want_value}, read {got_value}"
                        ));
                    }
                    continue;
                }
                let want_steps = want_value.as_array().cloned().unwrap_or_default();
                let got_steps = got_value.as_array().cloned().unwrap_or_default();
                if want_steps.len() != got_steps.len() {
                    differences.push(format!(
                        "turn {index} steps: expected {} steps, read {}: {}",
                        want_steps.len(),
                        got_steps.len(),
                        Value::Array(got_steps.clone())
                    ));
                    continue;
                }
                for (n, (want_step, got_step)) in want_steps.iter().zip(&got_steps).enumerate() {
                    for (field, want_field) in want_step.as_object().into_iter().flatten() {
                        let got_field = got_step.get(field).unwrap_or(&Value::Null);
                        if want_field != got_field {
                            differences.push(format!(
                                "turn {index} step {n} {field}: expected {want_field}, read {got_field}"
                            ));
                        }
                    }
                }
            }
        }
        differences
    }

    /// Feeds every non-empty line of `bytes` to `reader` (each must be a record), then
    /// finishes.
    pub fn feed_all(
        reader: &mut dyn crate::conversation::stores::LineTurns,
        bytes: &[u8],
        out: &mut TurnCollector,
    ) {
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            reader.feed_line(line, out).unwrap();
        }
        reader.finish(out);
    }

    /// Feeds `lines` to `reader` whatever they are (errors ignored), then finishes: what a
    /// never-panics test asks of a reader.
    pub fn feed_lossy<L: AsRef<[u8]>>(
        reader: &mut dyn crate::conversation::stores::LineTurns,
        lines: &[L],
        out: &mut TurnCollector,
    ) {
        for line in lines {
            let _ = reader.feed_line(line.as_ref(), out);
        }
        reader.finish(out);
    }

    /// Calls `run` with 20 mangled copies (`Noise::mangle`) of the lines of every corpus
    /// file of `folder_name` whose name ends with `ending`.
    pub fn each_mangled(
        folder_name: &str,
        ending: &str,
        seed: u64,
        mut run: impl FnMut(&[Vec<u8>]),
    ) {
        let mut noise = Noise::new(seed);
        for entry in std::fs::read_dir(folder(folder_name)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(ending) || is_expectation(&name) {
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            let lines: Vec<Vec<u8>> = bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            for _ in 0..20 {
                run(&noise.mangle(&lines));
            }
        }
    }

    /// A tiny deterministic generator (xorshift) for the never-panics tests.
    pub struct Noise(u64);

    impl Noise {
        pub fn new(seed: u64) -> Self {
            Noise(seed | 1)
        }

        pub fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            usize::try_from(self.0 % (below.max(1) as u64)).unwrap_or(0)
        }

        /// `lines` mangled: some cut short, some with bytes overwritten, some repeated or
        /// dropped, shuffled a little.
        pub fn mangle(&mut self, lines: &[Vec<u8>]) -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            for line in lines {
                let mut line = line.clone();
                match self.next(6) {
                    0 => line.truncate(self.next(line.len() + 1)),
                    1 => {
                        for _ in 0..3 {
                            if !line.is_empty() {
                                let at = self.next(line.len());
                                line[at] = u8::try_from(self.next(256)).unwrap_or(0);
                            }
                        }
                    }
                    2 => out.push(line.clone()),
                    3 => continue,
                    _ => {}
                }
                out.push(line);
            }
            for _ in 0..out.len() / 4 {
                let (a, b) = (self.next(out.len()), self.next(out.len()));
                out.swap(a, b);
            }
            out
        }
    }
}

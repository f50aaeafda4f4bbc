//! Format-preserving edits of the config files `koru setup` writes into: one value read, set or removed at a key path in JSON (strict, or with comments) or TOML, every other byte of the file kept — never a parse and re-serialise.

use jsonc_parser::cst::{CstInputValue, CstNode, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;
use serde_json::Value;

/// How a config file is written, as the program that reads it accepts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Strict JSON: no comments, no trailing commas (Claude Code's `~/.claude.json`).
    Json,
    /// JSON with comments and trailing commas (VS Code's `mcp.json`, opencode's `opencode.jsonc`).
    Jsonc,
    /// JSON with comments but no trailing commas (Gemini CLI's `settings.json`: it refuses them).
    JsoncNoTrailingCommas,
    /// TOML (Codex CLI's `config.toml`).
    Toml,
}

impl Format {
    fn json_options(self) -> ParseOptions {
        let mut options = ParseOptions::default();
        match self {
            Format::Jsonc | Format::Toml => {}
            Format::JsoncNoTrailingCommas => {
                options.allow_trailing_commas = false;
                options.allow_missing_commas = false;
            }
            Format::Json => {
                options = ParseOptions {
                    allow_comments: false,
                    allow_loose_object_property_names: false,
                    allow_trailing_commas: false,
                    allow_missing_commas: false,
                    allow_single_quoted_strings: false,
                    allow_hexadecimal_numbers: false,
                    allow_unary_plus_numbers: false,
                    allow_bare_decimal_point_numbers: false,
                    allow_non_finite_numbers: false,
                    allow_extended_string_escapes: false,
                };
            }
        }
        options
    }

    /// What the reading program accepts, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Json => "strict JSON (no comments, no trailing commas)",
            Format::Jsonc => "JSON with comments",
            Format::JsoncNoTrailingCommas => "JSON with comments but no trailing commas",
            Format::Toml => "TOML",
        }
    }
}

/// Why a file could not be edited; the file is then left as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The text does not parse as its program reads it.
    #[error("not valid {format}: {message}")]
    Parse {
        format: &'static str,
        message: String,
    },
    /// A key on the way to Koru's entry holds something other than a table/object.
    #[error("`{key}` is not {expected}: Koru will not change it")]
    Shape { key: String, expected: &'static str },
}

fn parse_error(format: Format, message: impl ToString) -> EditError {
    EditError::Parse {
        format: format.describe(),
        message: message.to_string(),
    }
}

/// The value at `keys` (`None`: not there).
pub fn read_at(text: &str, format: Format, keys: &[&str]) -> Result<Option<Value>, EditError> {
    match format {
        Format::Toml => toml_read(text, keys),
        Format::Json => strict_read(text, keys),
        _ => json_read(text, format, keys),
    }
}

/// Strict JSON read by streaming: only the value at `keys` is kept, everything else is
/// skipped as it is parsed (Claude Code's `~/.claude.json` can hold tens of megabytes of
/// history; `koru doctor` reads it on every run).
fn strict_read(text: &str, keys: &[&str]) -> Result<Option<Value>, EditError> {
    use serde::de::DeserializeSeed;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let found = Walk { keys, depth: 0 }
        .deserialize(&mut deserializer)
        .and_then(|found| deserializer.end().map(|()| found));
    found.map_err(|error| {
        let message = error.to_string();
        match message
            .split_once("expected an object at `")
            .and_then(|(_, rest)| rest.split_once('`'))
        {
            Some((key, _)) => EditError::Shape {
                key: key.to_string(),
                expected: "an object",
            },
            None => parse_error(Format::Json, message),
        }
    })
}

/// Walks `keys` through nested objects, skipping every other value unparsed into memory.
struct Walk<'a> {
    keys: &'a [&'a str],
    depth: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        if self.depth == self.keys.len() {
            return <Value as serde::Deserialize>::deserialize(deserializer).map(Some);
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if self.depth == 0 {
            write!(f, "an object at `(the file)`")
        } else {
            write!(f, "an object at `{}`", self.keys[..self.depth].join("."))
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.keys[self.depth] {
                found = map.next_value_seed(Walk {
                    keys: self.keys,
                    depth: self.depth + 1,
                })?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The text with `value` at `keys` (made, with any missing parents, or replaced), and how
/// many of the parents did not exist before (the ones an undo may take away again when
/// they are left empty).
pub fn set_at(
    text: &str,
    format: Format,
    keys: &[&str],
    value: &Value,
) -> Result<(String, usize), EditError> {
    match format {
        Format::Toml => toml_set(text, keys, value),
        _ => json_set(text, format, keys, value),
    }
}

/// The text without the value at `keys`, and without those of its `prune` nearest parents
/// that are left empty (unchanged text when the value is not there).
pub fn remove_at(
    text: &str,
    format: Format,
    keys: &[&str],
    prune: usize,
) -> Result<String, EditError> {
    match format {
        Format::Toml => toml_remove(text, keys, prune),
        _ => json_remove(text, format, keys, prune),
    }
}

// ── JSON ──

fn json_parse(text: &str, format: Format) -> Result<CstRootNode, EditError> {
    let text = if text.trim().is_empty() { "{}\n" } else { text };
    let options = format.json_options();
    // The syntax tree keeps comments as tokens whatever the options say: check them first.
    jsonc_parser::parse_to_ast(text, &jsonc_parser::CollectOptions::default(), &options)
        .map_err(|e| parse_error(format, e))?;
    CstRootNode::parse(text, &options).map_err(|e| parse_error(format, e))
}

/// The order clients write an entry's keys in (serde_json's maps are sorted by key).
fn key_rank(key: &str) -> usize {
    ["type", "command", "args", "env"]
        .iter()
        .position(|k| *k == key)
        .unwrap_or(usize::MAX)
}

fn ordered(map: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by_key(|(key, _)| key_rank(key));
    entries
}

fn json_root(root: &CstRootNode) -> Result<CstObject, EditError> {
    match root.value() {
        None => Ok(root.object_value_or_set()),
        Some(node) => node.as_object().ok_or_else(|| EditError::Shape {
            key: "(the file)".into(),
            expected: "an object",
        }),
    }
}

/// The object at `keys` below `object` (`None`: some key is missing).
fn json_walk(object: CstObject, keys: &[&str]) -> Result<Option<CstObject>, EditError> {
    let mut here = object;
    for (depth, key) in keys.iter().enumerate() {
        let Some(prop) = here.get(key) else {
            return Ok(None);
        };
        here = prop
            .value()
            .as_ref()
            .and_then(CstNode::as_object)
            .ok_or_else(|| EditError::Shape {
                key: keys[..=depth].join("."),
                expected: "an object",
            })?;
    }
    Ok(Some(here))
}

fn json_read(text: &str, format: Format, keys: &[&str]) -> Result<Option<Value>, EditError> {
    let root = json_parse(text, format)?;
    let (last, parents) = keys.split_last().expect("a key path");
    let Some(parent) = json_walk(json_root(&root)?, parents)? else {
        return Ok(None);
    };
    let Some(node) = parent.get(last).and_then(|prop| prop.value()) else {
        return Ok(None);
    };
    let source = node.to_string();
    jsonc_parser::parse_to_serde_value::<Value>(&source, &ParseOptions::default())
        .map(Some)
        .map_err(|e| parse_error(format, e))
}

fn input_of(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input_of).collect()),
        Value::Object(map) => CstInputValue::Object(
            ordered(map)
                .into_iter()
                .map(|(key, value)| (key.clone(), input_of(value)))
                .collect(),
        ),
    }
}

fn json_set(
    text: &str,
    format: Format,
    keys: &[&str],
    value: &Value,
) -> Result<(String, usize), EditError> {
    let root = json_parse(text, format)?;
    let (last, parents) = keys.split_last().expect("a key path");
    let mut here = json_root(&root)?;
    let mut made = 0;
    for (depth, key) in parents.iter().enumerate() {
        here = match here.get(key) {
            Some(prop) => prop
                .value()
                .as_ref()
                .and_then(CstNode::as_object)
                .ok_or_else(|| EditError::Shape {
                    key: keys[..=depth].join("."),
                    expected: "an object",
                })?,
            None => {
                made += 1;
                here.object_value_or_set(key)
            }
        };
    }
    match here.get(last) {
        Some(prop) => prop.set_value(input_of(value)),
        None => {
            here.append(last, input_of(value));
        }
    }
    let mut edited = root.to_string();
    if text.trim().is_empty() && !edited.ends_with('\n') {
        edited.push('\n');
    }
    Ok((edited, made))
}

fn json_remove(
    text: &str,
    format: Format,
    keys: &[&str],
    prune: usize,
) -> Result<String, EditError> {
    let root = json_parse(text, format)?;
    let top = json_root(&root)?;
    let (last, parents) = keys.split_last().expect("a key path");
    let Some(parent) = json_walk(top.clone(), parents)? else {
        return Ok(text.to_string());
    };
    let Some(prop) = parent.get(last) else {
        return Ok(text.to_string());
    };
    prop.remove();
    // Parents Koru made, nearest first, while they are empty.
    for depth in (parents.len().saturating_sub(prune)..parents.len()).rev() {
        let Some(object) = json_walk(top.clone(), &parents[..=depth])? else {
            break;
        };
        if !object.properties().is_empty() {
            break;
        }
        let holder = json_walk(top.clone(), &parents[..depth])?.expect("walked above");
        if let Some(prop) = holder.get(parents[depth]) {
            prop.remove();
        }
    }
    Ok(root.to_string())
}

// ── TOML ──

fn toml_parse(text: &str) -> Result<toml_edit::DocumentMut, EditError> {
    text.parse::<toml_edit::DocumentMut>()
        .map_err(|e| parse_error(Format::Toml, e.to_string().trim_end()))
}

fn toml_value_to_json(value: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match value {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => serde_json::Number::from_f64(*f.value())
            .map(Value::Number)
            .unwrap_or(Value::Null),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(items) => Value::Array(items.iter().map(toml_value_to_json).collect()),
        T::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| (key.to_string(), toml_value_to_json(value)))
                .collect(),
        ),
    }
}

fn toml_item_to_json(item: &toml_edit::Item) -> Option<Value> {
    match item {
        toml_edit::Item::None => None,
        toml_edit::Item::Value(value) => Some(toml_value_to_json(value)),
        toml_edit::Item::Table(table) => Some(Value::Object(
            table
                .iter()
                .filter_map(|(key, item)| Some((key.to_string(), toml_item_to_json(item)?)))
                .collect(),
        )),
        toml_edit::Item::ArrayOfTables(tables) => Some(Value::Array(
            tables
                .iter()
                .map(|table| toml_item_to_json(&toml_edit::Item::Table(table.clone())))
                .map(|value| value.unwrap_or(Value::Null))
                .collect(),
        )),
    }
}

fn json_to_toml_value(value: &Value) -> toml_edit::Value {
    match value {
        Value::Null => toml_edit::Value::from(""),
        Value::Bool(b) => toml_edit::Value::from(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml_edit::Value::from(i),
            None => toml_edit::Value::from(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => toml_edit::Value::from(s.as_str()),
        Value::Array(items) => {
            toml_edit::Value::Array(items.iter().map(json_to_toml_value).collect())
        }
        Value::Object(map) => {
            let mut table = toml_edit::InlineTable::new();
            for (key, value) in ordered(map) {
                table.insert(key, json_to_toml_value(value));
            }
            toml_edit::Value::InlineTable(table)
        }
    }
}

/// An entry as a `[table]` of its own (objects inside it inline).
fn json_to_toml_table(value: &Value) -> toml_edit::Item {
    let Value::Object(map) = value else {
        return toml_edit::Item::Value(json_to_toml_value(value));
    };
    let mut table = toml_edit::Table::new();
    for (key, value) in ordered(map) {
        table.insert(key, toml_edit::Item::Value(json_to_toml_value(value)));
    }
    toml_edit::Item::Table(table)
}

fn toml_shape(keys: &[&str], depth: usize) -> EditError {
    EditError::Shape {
        key: keys[..=depth].join("."),
        expected: "a table",
    }
}

fn toml_read(text: &str, keys: &[&str]) -> Result<Option<Value>, EditError> {
    let doc = toml_parse(text)?;
    let mut here: &dyn toml_edit::TableLike = doc.as_table();
    let (last, parents) = keys.split_last().expect("a key path");
    for (depth, key) in parents.iter().enumerate() {
        let Some(item) = here.get(key) else {
            return Ok(None);
        };
        here = item
            .as_table_like()
            .ok_or_else(|| toml_shape(keys, depth))?;
    }
    Ok(here.get(last).and_then(toml_item_to_json))
}

fn toml_set(text: &str, keys: &[&str], value: &Value) -> Result<(String, usize), EditError> {
    let mut doc = toml_parse(text)?;
    let (last, parents) = keys.split_last().expect("a key path");
    let mut made = 0;
    let mut here: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut inline = false;
    for (depth, key) in parents.iter().enumerate() {
        if here.get(key).is_none() {
            made += 1;
            let item = if inline {
                toml_edit::Item::Value(toml_edit::Value::InlineTable(toml_edit::InlineTable::new()))
            } else {
                // A parent of tables only: no `[parent]` header of its own.
                let mut table = toml_edit::Table::new();
                table.set_implicit(true);
                toml_edit::Item::Table(table)
            };
            here.insert(key, item);
        }
        let item = here.get_mut(key).expect("inserted above");
        inline |= item.is_inline_table();
        here = item
            .as_table_like_mut()
            .ok_or_else(|| toml_shape(keys, depth))?;
    }
    let entry = if inline {
        toml_edit::Item::Value(json_to_toml_value(value))
    } else {
        json_to_toml_table(value)
    };
    match here.get_mut(last) {
        Some(existing) if existing.is_table() == entry.is_table() => {
            // Replace in place: the old entry's position and header comment stay.
            let decor = existing.as_table().map(|t| t.decor().clone());
            *existing = entry;
            if let (Some(decor), Some(table)) = (decor, existing.as_table_mut()) {
                *table.decor_mut() = decor;
            }
        }
        _ => {
            here.insert(last, entry);
        }
    }
    Ok((doc.to_string(), made))
}

fn toml_remove(text: &str, keys: &[&str], prune: usize) -> Result<String, EditError> {
    let mut doc = toml_parse(text)?;
    let (last, parents) = keys.split_last().expect("a key path");
    {
        let mut here: &mut dyn toml_edit::TableLike = doc.as_table_mut();
        for (depth, key) in parents.iter().enumerate() {
            let Some(item) = here.get_mut(key) else {
                return Ok(text.to_string());
            };
            here = item
                .as_table_like_mut()
                .ok_or_else(|| toml_shape(keys, depth))?;
        }
        if here.remove(last).is_none() {
            return Ok(text.to_string());
        }
    }
    for depth in (parents.len().saturating_sub(prune)..parents.len()).rev() {
        let mut holder: &mut dyn toml_edit::TableLike = doc.as_table_mut();
        for key in &parents[..depth] {
            holder = holder
                .get_mut(key)
                .and_then(toml_edit::Item::as_table_like_mut)
                .expect("walked above");
        }
        let empty = holder
            .get(parents[depth])
            .and_then(toml_edit::Item::as_table_like)
            .is_some_and(|table| table.is_empty());
        if !empty {
            break;
        }
        holder.remove(parents[depth]);
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn koru() -> Value {
        json!({"command": "/opt/koru/bin/koru", "args": ["mcp"]})
    }

    #[test]
    fn json_with_comments_keeps_every_byte_outside_the_entry() {
        let mine = "{\n  // my servers\n  \"servers\": {\n    \"github\": {\"type\": \"http\", \"url\": \"https://x\"}, // work\n  },\n  \"inputs\": [],\n}\n";
        let (added, made) = set_at(mine, Format::Jsonc, &["servers", "koru"], &koru()).unwrap();
        assert_eq!(made, 0);
        let value = read_at(&added, Format::Jsonc, &["servers", "koru"]).unwrap();
        assert_eq!(value, Some(koru()));
        assert!(added.starts_with("{\n  // my servers\n  \"servers\": {\n    \"github\": {\"type\": \"http\", \"url\": \"https://x\"}, // work\n"), "{added}");
        assert!(added.ends_with("  },\n  \"inputs\": [],\n}\n"), "{added}");
        let removed = remove_at(&added, Format::Jsonc, &["servers", "koru"], 0).unwrap();
        assert_eq!(
            read_at(&removed, Format::Jsonc, &["servers", "github", "url"]).unwrap(),
            Some(json!("https://x"))
        );
        assert_eq!(
            read_at(&removed, Format::Jsonc, &["servers", "koru"]).unwrap(),
            None
        );
    }

    #[test]
    fn parents_koru_made_go_again_when_empty_and_others_stay() {
        let mine = "{\n  \"theme\": \"dark\"\n}\n";
        let (added, made) = set_at(mine, Format::Json, &["mcpServers", "koru"], &koru()).unwrap();
        assert_eq!(made, 1);
        let removed = remove_at(&added, Format::Json, &["mcpServers", "koru"], made).unwrap();
        assert_eq!(removed, mine);
        // With a server of the user's added later, the parent stays.
        let (with_other, _) = set_at(
            &added,
            Format::Json,
            &["mcpServers", "other"],
            &json!({"command": "x"}),
        )
        .unwrap();
        let removed = remove_at(&with_other, Format::Json, &["mcpServers", "koru"], made).unwrap();
        assert_eq!(
            read_at(&removed, Format::Json, &["mcpServers", "other", "command"]).unwrap(),
            Some(json!("x"))
        );
    }

    #[test]
    fn strict_json_is_read_by_streaming_with_the_same_answers() {
        let text = r#"{"projects": {"/a": {"history": [1, 2]}}, "mcpServers": {"other": {"command": "o"}, "koru": {"command": "k", "args": ["mcp"]}}}"#;
        assert_eq!(
            read_at(text, Format::Json, &["mcpServers", "koru"]).unwrap(),
            Some(json!({"command": "k", "args": ["mcp"]}))
        );
        assert_eq!(
            read_at(text, Format::Json, &["mcpServers", "none"]).unwrap(),
            None
        );
        assert_eq!(
            read_at("", Format::Json, &["mcpServers", "koru"]).unwrap(),
            None
        );
        assert_eq!(
            read_at(
                "{\"mcpServers\": [1]}",
                Format::Json,
                &["mcpServers", "koru"]
            )
            .unwrap_err(),
            EditError::Shape {
                key: "mcpServers".into(),
                expected: "an object"
            }
        );
        assert_eq!(
            read_at("[]", Format::Json, &["mcpServers", "koru"]).unwrap_err(),
            EditError::Shape {
                key: "(the file)".into(),
                expected: "an object"
            }
        );
        assert!(matches!(
            read_at("{\"a\": 1} x", Format::Json, &["a"]),
            Err(EditError::Parse { .. })
        ));
    }

    #[test]
    fn each_format_refuses_what_its_program_refuses() {
        let comment = "{\n  // mine\n  \"a\": 1\n}\n";
        let trailing = "{\n  \"a\": 1,\n}\n";
        assert!(matches!(
            read_at(comment, Format::Json, &["a"]),
            Err(EditError::Parse { .. })
        ));
        assert!(read_at(comment, Format::JsoncNoTrailingCommas, &["a"]).is_ok());
        assert!(matches!(
            read_at(trailing, Format::JsoncNoTrailingCommas, &["a"]),
            Err(EditError::Parse { .. })
        ));
        assert!(read_at(trailing, Format::Jsonc, &["a"]).is_ok());
        let error = set_at(
            "{\"mcpServers\": []}",
            Format::Json,
            &["mcpServers", "koru"],
            &koru(),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`mcpServers` is not an object: Koru will not change it"
        );
        let error = set_at(
            "[mcp_servers\n",
            Format::Toml,
            &["mcp_servers", "koru"],
            &koru(),
        )
        .unwrap_err();
        assert!(error.to_string().starts_with("not valid TOML: "), "{error}");
    }

    #[test]
    fn toml_gets_a_table_of_its_own_and_keeps_comments_around_it() {
        let mine = "# my codex\nmodel = \"o3\" # fast\n\n[mcp_servers.other]\n# the other one\ncommand = \"other\"\nargs = []\n\n[profiles.x]\nmodel = \"y\"\n";
        let (added, made) = set_at(mine, Format::Toml, &["mcp_servers", "koru"], &koru()).unwrap();
        assert_eq!(made, 0);
        assert!(added.starts_with("# my codex\nmodel = \"o3\" # fast\n\n[mcp_servers.other]\n# the other one\ncommand = \"other\"\nargs = []\n"), "{added}");
        assert!(
            added.contains(
                "[mcp_servers.koru]\ncommand = \"/opt/koru/bin/koru\"\nargs = [\"mcp\"]\n"
            ),
            "{added}"
        );
        assert!(added.contains("[profiles.x]\nmodel = \"y\"\n"), "{added}");
        assert_eq!(
            read_at(&added, Format::Toml, &["mcp_servers", "koru"]).unwrap(),
            Some(koru())
        );
        // The same again changes nothing.
        let (again, _) = set_at(&added, Format::Toml, &["mcp_servers", "koru"], &koru()).unwrap();
        assert_eq!(again, added);
        assert_eq!(
            remove_at(&added, Format::Toml, &["mcp_servers", "koru"], 0).unwrap(),
            mine
        );
    }

    #[test]
    fn toml_without_servers_gets_no_empty_parent_header_and_loses_it_again() {
        let mine = "model = \"o3\"\n";
        let (added, made) = set_at(mine, Format::Toml, &["mcp_servers", "koru"], &koru()).unwrap();
        assert_eq!(made, 1);
        assert!(!added.contains("[mcp_servers]\n"), "{added}");
        assert_eq!(
            remove_at(&added, Format::Toml, &["mcp_servers", "koru"], 1).unwrap(),
            mine
        );
        let (from_nothing, _) =
            set_at("", Format::Toml, &["mcp_servers", "koru"], &koru()).unwrap();
        assert_eq!(
            from_nothing,
            "[mcp_servers.koru]\ncommand = \"/opt/koru/bin/koru\"\nargs = [\"mcp\"]\n"
        );
    }

    #[test]
    fn an_inline_parent_gets_an_inline_entry() {
        let mine = "mcp_servers = { other = { command = \"o\" } }\n";
        let (added, _) = set_at(mine, Format::Toml, &["mcp_servers", "koru"], &koru()).unwrap();
        assert_eq!(
            read_at(&added, Format::Toml, &["mcp_servers", "koru"]).unwrap(),
            Some(koru())
        );
        assert_eq!(
            read_at(&added, Format::Toml, &["mcp_servers", "other", "command"]).unwrap(),
            Some(json!("o"))
        );
    }
}

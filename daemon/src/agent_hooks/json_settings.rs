//! Koru's hook entries in an agent's JSON settings file (Claude Code's and Gemini CLI's `settings.json`): added under `hooks.<Event>` after the user's own, found again by their command and removed exactly, with every comment, key order and indentation of the file kept (edited as a JSONC concrete syntax tree, never re-serialised).

use jsonc_parser::cst::{CstArray, CstInputValue, CstNode, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;

/// One command hook Koru adds for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEntry {
    /// The agent's event name (`UserPromptSubmit`, `BeforeAgent`, …).
    pub event: &'static str,
    /// The group's `matcher`, for events that take one (tool events); `None`: no matcher key.
    pub matcher: Option<&'static str>,
    /// The shell command the agent runs.
    pub command: String,
    /// Seconds the agent gives the command.
    pub timeout_s: u32,
    /// A `name` for the hook, for agents that show one (Gemini CLI).
    pub name: Option<&'static str>,
}

/// Why a settings text could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The text is not JSON (with comments).
    #[error("not valid JSON: {0}")]
    Parse(String),
    /// The text is JSON, but a key Koru must write under holds something else.
    #[error("`{key}` is {found}, not {expected}: Koru will not change it")]
    Shape {
        key: String,
        found: &'static str,
        expected: &'static str,
    },
}

/// Whether a hook command is one of Koru's: its program is a file named `koru` and its first
/// argument is `hook` (whatever the path, so entries written by another build still count).
pub fn is_koru_command(command: &str) -> bool {
    let command = command.trim_start();
    // The program: a quoted word (a path with spaces) or the first word.
    let (program, rest) = match command.chars().next() {
        Some(quote @ ('\'' | '"')) => match command[1..].find(quote) {
            Some(end) => (&command[1..=end], &command[end + 2..]),
            None => return false,
        },
        _ => command
            .split_once(char::is_whitespace)
            .unwrap_or((command, "")),
    };
    let name = program.rsplit('/').next().unwrap_or("");
    name == "koru" && rest.split_whitespace().next() == Some("hook")
}

fn parse(text: &str) -> Result<CstRootNode, SettingsError> {
    let text = if text.trim().is_empty() { "{}\n" } else { text };
    CstRootNode::parse(text, &ParseOptions::default())
        .map_err(|error| SettingsError::Parse(error.to_string()))
}

fn kind_of(node: &CstNode) -> &'static str {
    if node.as_object().is_some() {
        "an object"
    } else if node.as_array().is_some() {
        "an array"
    } else if node.as_string_lit().is_some() {
        "a string"
    } else {
        "a value of another kind"
    }
}

fn shape(key: &str, node: Option<CstNode>, expected: &'static str) -> SettingsError {
    SettingsError::Shape {
        key: key.to_string(),
        found: node.as_ref().map_or("missing", kind_of),
        expected,
    }
}

/// The root object (an empty file becomes `{}`).
fn root_object(root: &CstRootNode) -> Result<CstObject, SettingsError> {
    match root.value() {
        None => Ok(root.object_value_or_set()),
        Some(node) => node
            .as_object()
            .ok_or_else(|| shape("(the file)", Some(node), "an object")),
    }
}

/// `object[key]` as an object, made when missing.
fn object_at(object: &CstObject, key: &str, path: &str) -> Result<CstObject, SettingsError> {
    match object.get(key) {
        None => Ok(object.object_value_or_set(key)),
        Some(prop) => {
            let value = prop.value();
            value
                .as_ref()
                .and_then(CstNode::as_object)
                .ok_or_else(|| shape(path, value, "an object"))
        }
    }
}

/// `object[key]` as an array, made when missing.
fn array_at(object: &CstObject, key: &str, path: &str) -> Result<CstArray, SettingsError> {
    match object.get(key) {
        None => Ok(object.array_value_or_set(key)),
        Some(prop) => {
            let value = prop.value();
            value
                .as_ref()
                .and_then(CstNode::as_array)
                .ok_or_else(|| shape(path, value, "an array"))
        }
    }
}

fn string_of(object: &CstObject, key: &str) -> Option<String> {
    object
        .get(key)?
        .value()?
        .as_string_lit()?
        .decoded_value()
        .ok()
}

/// The hook objects (`{type, command}`) of one matcher group.
fn hooks_of(group: &CstObject) -> Vec<CstObject> {
    group
        .array_value("hooks")
        .map(|hooks| {
            hooks
                .elements()
                .iter()
                .filter_map(CstNode::as_object)
                .collect()
        })
        .unwrap_or_default()
}

fn entry_value(entry: &HookEntry) -> CstInputValue {
    let mut hook = vec![
        ("type".to_string(), CstInputValue::from("command")),
        (
            "command".to_string(),
            CstInputValue::from(entry.command.as_str()),
        ),
        ("timeout".to_string(), CstInputValue::from(entry.timeout_s)),
    ];
    if let Some(name) = entry.name {
        hook.insert(0, ("name".to_string(), CstInputValue::from(name)));
    }
    let mut group = Vec::new();
    if let Some(matcher) = entry.matcher {
        group.push(("matcher".to_string(), CstInputValue::from(matcher)));
    }
    group.push((
        "hooks".to_string(),
        CstInputValue::Array(vec![CstInputValue::Object(hook)]),
    ));
    CstInputValue::Object(group)
}

/// What an edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The file's new text (equal to the old one when nothing changed).
    pub text: String,
    /// The events whose Koru entry was added, updated or removed.
    pub events: Vec<String>,
}

/// Adds (or brings up to date) Koru's entry for each event: a group of its own appended after
/// the user's groups, or, when a Koru entry is already there, its command and timeout set
/// again. Nothing of the user's is moved, changed or dropped. `settings` are further keys to
/// set (a dotted path and its value, such as an agent's switch that enables hooks); each is
/// set only where it is missing.
pub fn install(
    text: &str,
    entries: &[HookEntry],
    settings: &[(&str, CstInputValue)],
) -> Result<Edited, SettingsError> {
    let root = parse(text)?;
    let top = root_object(&root)?;
    let hooks = object_at(&top, "hooks", "hooks")?;
    let mut events = Vec::new();
    for entry in entries {
        let path = format!("hooks.{}", entry.event);
        let groups = array_at(&hooks, entry.event, &path)?;
        let ours = groups
            .elements()
            .iter()
            .filter_map(CstNode::as_object)
            .flat_map(|group| hooks_of(&group))
            .find(|hook| string_of(hook, "command").is_some_and(|c| is_koru_command(&c)));
        match ours {
            Some(hook) => {
                let same = string_of(&hook, "command").as_deref() == Some(entry.command.as_str())
                    && hook
                        .get("timeout")
                        .and_then(|p| p.value())
                        .is_some_and(|v| v.to_string() == entry.timeout_s.to_string());
                if !same {
                    if let Some(prop) = hook.get("command") {
                        prop.set_value(CstInputValue::from(entry.command.as_str()));
                    }
                    match hook.get("timeout") {
                        Some(prop) => prop.set_value(CstInputValue::from(entry.timeout_s)),
                        None => {
                            hook.append("timeout", CstInputValue::from(entry.timeout_s));
                        }
                    }
                    events.push(entry.event.to_string());
                }
            }
            None => {
                groups.append(entry_value(entry));
                events.push(entry.event.to_string());
            }
        }
    }
    for (path, value) in settings {
        let mut keys: Vec<&str> = path.split('.').collect();
        let last = keys.pop().unwrap_or_default();
        let mut object = top.clone();
        let mut walked = String::new();
        for key in keys {
            walked = if walked.is_empty() {
                key.to_string()
            } else {
                format!("{walked}.{key}")
            };
            object = object_at(&object, key, &walked)?;
        }
        if object.get(last).is_none() {
            object.append(last, value.clone());
            events.push(path.to_string());
        }
    }
    Ok(Edited {
        text: root.to_string(),
        events,
    })
}

/// Removes every Koru entry (`is_koru_command`), then each group, event list and the `hooks`
/// object that held a Koru entry and is empty without it. The user's entries, and containers
/// that held none of Koru's, stay as they are. `settings` are dotted keys Koru set at install
/// time and removes again (the caller passes only those it added), with the objects on their
/// path that are left empty.
pub fn uninstall(text: &str, settings: &[&str]) -> Result<Edited, SettingsError> {
    let root = parse(text)?;
    let top = root_object(&root)?;
    let mut events = Vec::new();
    if let Some(hooks) = top.get("hooks").and_then(|p| p.value()?.as_object()) {
        for event in hooks.properties() {
            let Some(groups) = event.value().and_then(|v| v.as_array()) else {
                continue;
            };
            let name = event.decoded_name().unwrap_or_default();
            let mut removed_here = false;
            for group in groups.elements().iter().filter_map(CstNode::as_object) {
                let mut removed_in_group = false;
                for hook in hooks_of(&group) {
                    if string_of(&hook, "command").is_some_and(|c| is_koru_command(&c)) {
                        hook.remove();
                        removed_in_group = true;
                    }
                }
                if removed_in_group && hooks_of(&group).is_empty() {
                    let nothing_else = group
                        .array_value("hooks")
                        .is_none_or(|h| h.elements().is_empty());
                    if nothing_else {
                        group.remove();
                    }
                }
                removed_here |= removed_in_group;
            }
            if removed_here {
                events.push(name);
                if groups.elements().is_empty() {
                    event.remove();
                }
            }
        }
        if !events.is_empty() && hooks.properties().is_empty() {
            if let Some(prop) = top.get("hooks") {
                prop.remove();
            }
        }
    }
    for path in settings {
        let keys: Vec<&str> = path.split('.').collect();
        // The objects on the way, outermost first.
        let mut chain = vec![top.clone()];
        for key in &keys[..keys.len() - 1] {
            match chain.last().and_then(|o| o.get(key)?.value()?.as_object()) {
                Some(inner) => chain.push(inner),
                None => break,
            }
        }
        if chain.len() != keys.len() {
            continue;
        }
        let Some(prop) = chain.last().and_then(|o| o.get(keys[keys.len() - 1])) else {
            continue;
        };
        prop.remove();
        events.push(path.to_string());
        // Objects left empty on the way were Koru's to make: they go too.
        for depth in (1..chain.len()).rev() {
            if !chain[depth].properties().is_empty() {
                break;
            }
            if let Some(prop) = chain[depth - 1].get(keys[depth - 1]) {
                prop.remove();
            }
        }
    }
    Ok(Edited {
        text: root.to_string(),
        events,
    })
}

/// The Koru hook commands in a settings text, by event (for `doctor` and `hook status`).
pub fn installed(text: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let root = parse(text)?;
    let Some(top) = root.value().and_then(|v| v.as_object()) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    if let Some(hooks) = top.get("hooks").and_then(|p| p.value()?.as_object()) {
        for event in hooks.properties() {
            let name = event.decoded_name().unwrap_or_default();
            let groups = event.value().and_then(|v| v.as_array());
            for group in groups
                .iter()
                .flat_map(|g| g.elements())
                .filter_map(|g| g.as_object())
            {
                for hook in hooks_of(&group) {
                    if let Some(command) =
                        string_of(&hook, "command").filter(|c| is_koru_command(c))
                    {
                        found.push((name.clone(), command));
                    }
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(event: &'static str) -> HookEntry {
        HookEntry {
            event,
            matcher: None,
            command: "/opt/koru/bin/koru hook claude-code".into(),
            timeout_s: 10,
            name: None,
        }
    }

    const USERS: &str = r#"{
  // my settings
  "model": "opus",
  "hooks": {
    "Stop": [
      {
        "hooks": [
          { "type": "command", "command": "notify-send done" }
        ]
      }
    ],
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [{ "type": "command", "command": "~/bin/guard" }] }
    ]
  },
  "permissions": { "allow": ["Bash(ls)"] }
}
"#;

    #[test]
    fn koru_commands_are_known_by_program_and_first_argument() {
        assert!(is_koru_command("/usr/local/bin/koru hook claude-code"));
        assert!(is_koru_command("koru hook gemini-cli --event BeforeAgent"));
        assert!(is_koru_command("'/home/me/my tools/koru' hook codex"));
        assert!(is_koru_command("\"/home/me/my tools/koru\" hook codex"));
        assert!(!is_koru_command("'/home/me/koru hook"));
        assert!(!is_koru_command("koru status"));
        assert!(!is_koru_command("/usr/bin/notify-send koru hook"));
        assert!(!is_koru_command("korus hook x"));
    }

    #[test]
    fn install_appends_after_the_users_entries_and_keeps_comments_and_order() {
        let edited = install(USERS, &[entry("Stop"), entry("UserPromptSubmit")], &[]).unwrap();
        assert_eq!(edited.events, ["Stop", "UserPromptSubmit"]);
        let text = &edited.text;
        assert!(
            text.starts_with("{\n  // my settings\n  \"model\": \"opus\",\n"),
            "{text}"
        );
        // The user's Stop hook stays first; Koru's group comes after it.
        let user = text.find("notify-send done").unwrap();
        let ours = text.find("/opt/koru/bin/koru hook claude-code").unwrap();
        assert!(user < ours, "{text}");
        assert!(
            text.contains("\"permissions\": { \"allow\": [\"Bash(ls)\"] }"),
            "{text}"
        );
        let value = value(text);
        assert_eq!(value["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(
            value["hooks"]["UserPromptSubmit"][0]["hooks"][0],
            serde_json::json!({"type": "command", "command": "/opt/koru/bin/koru hook claude-code", "timeout": 10})
        );
        assert_eq!(value["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    }

    #[test]
    fn install_twice_changes_nothing_and_a_moved_binary_is_updated_in_place() {
        let once = install(USERS, &[entry("Stop")], &[]).unwrap();
        let twice = install(&once.text, &[entry("Stop")], &[]).unwrap();
        assert_eq!(twice.text, once.text);
        assert!(twice.events.is_empty());
        let mut moved = entry("Stop");
        moved.command = "/usr/bin/koru hook claude-code".into();
        let updated = install(&once.text, &[moved], &[]).unwrap();
        assert_eq!(updated.events, ["Stop"]);
        assert!(updated.text.contains("/usr/bin/koru hook claude-code"));
        assert!(!updated.text.contains("/opt/koru/bin/koru"));
        assert_eq!(updated.text.matches("koru hook").count(), 1);
    }

    #[test]
    fn uninstall_removes_exactly_what_install_added() {
        let settings = [("tools.enableHooks", CstInputValue::from(true))];
        // The user's file comes back byte for byte.
        let added = install(USERS, &[entry("Stop"), entry("SessionStart")], &settings).unwrap();
        assert!(
            added.text.contains("\"enableHooks\": true"),
            "{}",
            added.text
        );
        let removed = uninstall(&added.text, &["tools.enableHooks"]).unwrap();
        assert_eq!(removed.text, USERS);
        assert_eq!(
            removed.events,
            ["Stop", "SessionStart", "tools.enableHooks"]
        );
        // A file Koru made, or an empty one, is left with nothing of Koru's.
        for original in ["", "{}\n"] {
            let added = install(original, &[entry("Stop")], &settings).unwrap();
            let removed = uninstall(&added.text, &["tools.enableHooks"]).unwrap();
            assert_eq!(value(&removed.text), serde_json::json!({}), "{original:?}");
        }
        // An empty event list the user had, filled by Koru, goes when Koru's entry goes.
        let added = install("{\"hooks\": {\"Stop\": []}}", &[entry("Stop")], &[]).unwrap();
        assert_eq!(
            value(&uninstall(&added.text, &[]).unwrap().text),
            serde_json::json!({})
        );
        // Nothing of Koru's: nothing changes.
        assert_eq!(uninstall(USERS, &[]).unwrap().text, USERS);
        assert!(uninstall(USERS, &[]).unwrap().events.is_empty());
    }

    #[test]
    fn a_file_that_does_not_parse_or_has_the_wrong_shape_is_refused() {
        assert!(matches!(
            install("{ \"hooks\": ", &[entry("Stop")], &[]),
            Err(SettingsError::Parse(_))
        ));
        let error = install("{ \"hooks\": [] }", &[entry("Stop")], &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`hooks` is an array, not an object: Koru will not change it"
        );
        let error = install("{ \"hooks\": { \"Stop\": {} } }", &[entry("Stop")], &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`hooks.Stop` is an object, not an array: Koru will not change it"
        );
        assert!(install("[1]", &[entry("Stop")], &[]).is_err());
    }

    #[test]
    fn installed_lists_koru_entries_only() {
        let added = install(USERS, &[entry("Stop"), entry("Notification")], &[]).unwrap();
        assert_eq!(
            installed(&added.text).unwrap(),
            [
                (
                    "Stop".to_string(),
                    "/opt/koru/bin/koru hook claude-code".to_string()
                ),
                (
                    "Notification".to_string(),
                    "/opt/koru/bin/koru hook claude-code".to_string()
                ),
            ]
        );
        assert!(installed(USERS).unwrap().is_empty());
    }

    /// The value of a settings text (its `//` comment lines left out).
    fn value(text: &str) -> serde_json::Value {
        let json: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        serde_json::from_str(&json.join("\n")).expect("still JSON")
    }
}

//! Replays every golden conversation in protocol/vectors/*.ndjson against the real daemon (the same files the TypeScript and Java clients replay).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use koru_system_tests::{Raw, Sandbox};
use serde_json::Value;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .join("protocol")
        .join("vectors")
}

/// Replaces `"$NAME"` strings with remembered values, recursively.
fn substitute(value: &Value, vars: &HashMap<String, Value>) -> Value {
    match value {
        Value::String(text) => match text.strip_prefix('$') {
            Some(name) if vars.contains_key(name) => vars[name].clone(),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Checks `actual` against `pattern`, capturing `$capture:NAME` values (`$absent`: the
/// field must not be there); returns the path of the first mismatch.
fn matches(
    pattern: &Value,
    actual: Option<&Value>,
    vars: &mut HashMap<String, Value>,
    path: &str,
) -> Result<(), String> {
    if let Value::String(text) = pattern {
        if text == "$absent" {
            return match actual {
                None => Ok(()),
                Some(value) => Err(format!("{path}: expected no such field, got {value}")),
            };
        }
        if text == "$any" {
            return actual.map(|_| ()).ok_or_else(|| format!("{path}: missing"));
        }
        if let Some(name) = text.strip_prefix("$capture:") {
            let value = actual.ok_or_else(|| format!("{path}: missing"))?;
            vars.insert(name.to_string(), value.clone());
            return Ok(());
        }
    }
    let pattern = substitute(pattern, vars);
    let actual = actual.ok_or_else(|| format!("{path}: missing, expected {pattern}"))?;
    match (&pattern, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, want_value) in want {
                matches(want_value, have.get(key), vars, &format!("{path}.{key}"))?;
            }
            Ok(())
        }
        (Value::Array(want), Value::Array(have)) => {
            if want.len() != have.len() {
                return Err(format!(
                    "{path}: expected {} items, got {}: {actual}",
                    want.len(),
                    have.len()
                ));
            }
            for (index, (w, h)) in want.iter().zip(have).enumerate() {
                matches(w, Some(h), vars, &format!("{path}[{index}]"))?;
            }
            Ok(())
        }
        (want, have) if want == have => Ok(()),
        (want, have) => Err(format!("{path}: expected {want}, got {have}")),
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("valid hex in vector"))
        .collect()
}

fn replay(file: &Path) {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let sandbox = Sandbox::new();
    let text = std::fs::read_to_string(file).expect("read vector file");
    // The first line may carry the daemon's arguments for this conversation.
    let daemon_args: Vec<String> = text
        .lines()
        .next()
        .and_then(|first| serde_json::from_str::<Value>(first).ok())
        .and_then(|first| first.get("daemon_args").cloned())
        .map(|args| serde_json::from_value(args).expect("daemon_args is a list of strings"))
        .unwrap_or_default();
    let daemon_args: Vec<&str> = daemon_args.iter().map(String::as_str).collect();
    // The first line may name folders that exist before the daemon starts (`$HOME/…`), such
    // as a chat store's root, so that what a later `write_file` puts there is news.
    let dirs: Vec<String> = text
        .lines()
        .next()
        .and_then(|first| serde_json::from_str::<Value>(first).ok())
        .and_then(|first| first.get("dirs").cloned())
        .map(|dirs| serde_json::from_value(dirs).expect("dirs is a list of strings"))
        .unwrap_or_default();
    for dir in &dirs {
        let relative = dir
            .strip_prefix("$HOME/")
            .unwrap_or_else(|| panic!("{name}: dirs are under $HOME/, not {dir}"));
        std::fs::create_dir_all(sandbox.home().join(relative)).unwrap();
    }
    let daemon = sandbox.start_daemon(&daemon_args);
    let mut vars = HashMap::new();
    vars.insert(
        "WORKSPACE".to_string(),
        Value::String(sandbox.workspace("vectors").to_string_lossy().into_owned()),
    );
    let mut conns: HashMap<String, Raw> = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", index + 1);
        if line.trim().is_empty() {
            continue;
        }
        let step: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: {e}"));
        if step.get("comment").is_some() || (index == 0 && step.get("dirs").is_some()) {
            continue;
        }
        if let Some(write) = step.get("write_file") {
            // A file a tool writes (a chat store's), under the sandbox's home; the clients'
            // replayers, which run no daemon, skip this step.
            let relative = write["path"]
                .as_str()
                .and_then(|p| p.strip_prefix("$HOME/"))
                .unwrap_or_else(|| panic!("{at}: write_file needs a path under $HOME/"));
            let path = sandbox.home().join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let lines: Vec<String> = write["lines"]
                .as_array()
                .unwrap_or_else(|| panic!("{at}: write_file needs lines"))
                .iter()
                .map(|line| substitute(line, &vars).to_string() + "\n")
                .collect();
            std::fs::write(&path, lines.concat()).unwrap();
            continue;
        }
        let conn_name = step["conn"]
            .as_str()
            .unwrap_or_else(|| panic!("{at}: step without conn"))
            .to_string();
        let conn = conns
            .entry(conn_name.clone())
            .or_insert_with(|| Raw::connect(&daemon.socket));
        if let Some(value) = step.get("send") {
            conn.send(&substitute(value, &vars));
        } else if let Some(raw) = step.get("send_raw").and_then(Value::as_str) {
            conn.send_bytes(format!("{raw}\n").as_bytes())
                .expect("send raw");
        } else if let Some(hex) = step.get("send_hex").and_then(Value::as_str) {
            let mut bytes = hex_bytes(hex);
            bytes.push(b'\n');
            conn.send_bytes(&bytes).expect("send hex");
        } else if let Some(repeat) = step.get("send_repeat") {
            let mut bytes = repeat["prefix"].as_str().unwrap_or("").as_bytes().to_vec();
            let unit = repeat["text"].as_str().unwrap_or("a");
            for _ in 0..repeat["times"].as_u64().unwrap_or(0) {
                bytes.extend_from_slice(unit.as_bytes());
            }
            bytes.extend_from_slice(repeat["suffix"].as_str().unwrap_or("").as_bytes());
            bytes.push(b'\n');
            // The daemon may close before reading everything: that is the point.
            let _ = conn.send_bytes(&bytes);
        } else if let Some(pattern) = step.get("expect") {
            let actual = conn
                .recv()
                .unwrap_or_else(|| panic!("{at}: connection {conn_name} ended or timed out waiting for {pattern}\ndaemon log:\n{}", daemon.log_text()));
            if let Err(mismatch) = matches(pattern, Some(&actual), &mut vars, "$") {
                panic!("{at}: {mismatch}\n  pattern: {pattern}\n  actual:  {actual}");
            }
        } else if step.get("expect_close").is_some() {
            assert!(
                conn.closed(),
                "{at}: expected the daemon to close {conn_name}"
            );
        } else if step.get("close").is_some() {
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            conns.remove(&conn_name);
        } else {
            panic!("{at}: unknown step {step}");
        }
    }
}

#[test]
fn every_golden_vector_replays_against_the_real_daemon() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("protocol/vectors exists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "ndjson"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "expected the golden vector files, found {files:?}"
    );
    for file in &files {
        replay(file);
    }
}

#[test]
fn every_message_type_appears_in_the_vectors() {
    let mut all = String::new();
    for entry in std::fs::read_dir(vectors_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "ndjson") {
            all.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    for type_name in koru_protocol::KNOWN_MESSAGE_TYPES {
        let needle = format!("\"type\": \"{type_name}\"");
        assert!(
            all.contains(&needle),
            "no vector uses message type {type_name}"
        );
    }
    for code in [
        "hello_required",
        "version_mismatch",
        "invalid_hello",
        "malformed",
        "line_too_long",
        "unknown_type",
        "invalid_message",
        "wrong_role",
        "already_greeted",
        "no_target",
        "unknown_drive",
        "drive_finished",
        "not_retryable",
    ] {
        assert!(
            all.contains(&format!("\"code\": \"{code}\"")),
            "no vector covers error {code}"
        );
    }
    // What a plugin may say about its chat and what proves `submitted`.
    for needle in [
        "\"evidence\": \"chat_responded\"",
        "\"evidence\": \"chat_running\"",
        "\"submit_evidence\": \"command_returned\"",
        "\"kind\": \"chat_readiness\"",
        "\"kind\": \"chat_outcome\"",
        "\"kind\": \"reply_completed\"",
        "\"kind\": \"needs_input\"",
        "\"code\": \"chat_refused\"",
        "\"code\": \"chat_not_ready\"",
        "\"chat_readiness\": {\"ready\": false",
        "\"workspace_uris\"",
        "\"remote_name\"",
        "\"storage\"",
    ] {
        assert!(all.contains(needle), "no vector has {needle}");
    }
}

//! The rooms of `daemon/src` and their order (docs/architecture.md, "Rooms and what they may import"): every `crate::…` path in a room names the room itself or a room below it, faces never name each other, and every room has a place in the order.

use std::collections::BTreeSet;
use std::path::Path;

/// From the bottom up; a room may import rooms of lower levels only (and, on the base
/// level, each other: they are leaves).
const LEVELS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "clock",
            "codec",
            "log_lines",
            "paths",
            "table",
            "workspace_ref",
            "recovery",
            "desktop",
            "appear_watch",
            "access",
            "memory",
            "sse",
        ],
    ),
    (
        "domain",
        &["registry", "observe", "drive", "journal", "terminal"],
    ),
    ("agents' hooks", &["agent_hooks"]),
    ("read-back", &["conversation"]),
    ("audit", &["audit"]),
    ("control", &["control"]),
    ("doctor", &["doctor"]),
    ("setup", &["setup"]),
    ("state machine", &["app"]),
    ("socket server", &["server"]),
    ("reference plugin", &["dev"]),
    ("faces", &["cli", "http", "mcp", "notify"]),
    ("main loop", &["main_loop"]),
    ("entry", &["entry"]),
];

fn level_of(room: &str) -> Option<usize> {
    LEVELS.iter().position(|(_, rooms)| rooms.contains(&room))
}

/// The rooms a source file names through `crate::` (plain paths and `use crate::{a, b}`).
fn named_rooms(source: &str) -> BTreeSet<String> {
    let mut rooms = BTreeSet::new();
    for (at, _) in source.match_indices("crate::") {
        let rest = &source[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    rooms.insert(name);
                }
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if !name.is_empty() {
            rooms.insert(name);
        }
    }
    rooms
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_room_imports_a_room_above_it_and_no_face_another_face() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let room = first.to_str().unwrap().trim_end_matches(".rs").to_string();
        if room == "lib" || room == "main" {
            continue;
        }
        let Some(level) = level_of(&room) else {
            problems.push(format!(
                "{}: room `{room}` has no place in the order (add it to LEVELS and docs/architecture.md)",
                relative.display()
            ));
            continue;
        };
        let source = std::fs::read_to_string(file).unwrap();
        for named in named_rooms(&source) {
            if named == room {
                continue;
            }
            let Some(named_level) = level_of(&named) else {
                problems.push(format!(
                    "{}: names `crate::{named}`, which is no room",
                    relative.display()
                ));
                continue;
            };
            let leaves = LEVELS[level].0 == "base";
            if named_level > level || (named_level == level && !leaves) {
                problems.push(format!(
                    "{}: room `{room}` ({}) imports `{named}` ({})",
                    relative.display(),
                    LEVELS[level].0,
                    LEVELS[named_level].0
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_plain_paths_and_groups() {
    let named = named_rooms(
        "use crate::control::{Client, Controller};\nuse crate::{app, http::api};\nlet x = crate::mcp::format::sessions(&s);",
    );
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        ["app", "control", "http", "mcp"]
    );
}

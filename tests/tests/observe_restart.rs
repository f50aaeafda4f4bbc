//! The observers at restart and at rest, on the real daemon over real Claude Code session files: a restart over unchanged history opens none of them (the summary cache vouches for them) and lists the same chats; a file appended to while the daemon was down is read from where it stopped; a replaced file, or a damaged cache, is read again; an idle daemon opens nothing; old chats without end records are never `replying`. Opens are seen through inotify on the store's folders, as the kernel reports them.

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use koru_system_tests::{append_line, Sandbox};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use serde_json::{json, Value};

/// Projects and sessions per project.
const PROJECTS: usize = 3;
const SESSIONS: usize = 8;

/// One session file: a finished turn (2.1.x, with its end record), then, for every
/// third session, a 2.0.x turn left open a year ago (its last record a text after a
/// thinking record, no end record).
fn write_session(path: &Path, session: &str, cwd: &str, index: usize) {
    let ts = |s: u32| {
        format!(
            "2025-11-0{}T10:{:02}:{:02}.000Z",
            1 + index % 9,
            s / 60,
            s % 60
        )
    };
    let version = if index.is_multiple_of(3) {
        "2.0.14"
    } else {
        "2.1.39"
    };
    let record = |kind: &str, s: u32, extra: Value| {
        let mut r = json!({"type": kind, "sessionId": session, "cwd": cwd, "version": version,
            "uuid": format!("{session}-{s}"), "timestamp": ts(s), "isSidechain": false});
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        r
    };
    let lines = [
        record(
            "user",
            0,
            json!({"message": {"role": "user", "content": format!("prompt {index}: fix the build")}}),
        ),
        record(
            "assistant",
            5,
            json!({"message": {"id": format!("m{index}a"), "role": "assistant",
            "content": [{"type": "text", "text": format!("Fixed build {index}.")}], "stop_reason": null}}),
        ),
        record(
            "system",
            6,
            json!({"subtype": "turn_duration", "durationMs": 6000}),
        ),
    ];
    for line in &lines[..if index.is_multiple_of(3) { 2 } else { 3 }] {
        append_line(path, line);
    }
    if index.is_multiple_of(3) {
        append_line(
            path,
            &record(
                "user",
                60,
                json!({"message": {"role": "user", "content": "and the tests?"}}),
            ),
        );
        append_line(
            path,
            &record(
                "assistant",
                65,
                json!({"message": {"id": "m2", "role": "assistant",
            "content": [{"type": "thinking", "thinking": "…", "signature": "x"}], "stop_reason": null}}),
            ),
        );
        append_line(
            path,
            &record(
                "assistant",
                70,
                json!({"message": {"id": "m2", "role": "assistant",
            "content": [{"type": "text", "text": "The tests pass."}], "stop_reason": null}}),
            ),
        );
    }
}

/// Every session file, and their folders.
fn corpus(sandbox: &Sandbox) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let projects = sandbox.path().join("home/.claude/projects");
    let (mut files, mut folders) = (Vec::new(), Vec::new());
    for p in 0..PROJECTS {
        let cwd = format!("/home/user/proj-{p}");
        let folder = projects.join(cwd.replace('/', "-"));
        std::fs::create_dir_all(&folder).unwrap();
        for s in 0..SESSIONS {
            let index = p * SESSIONS + s;
            let session = format!("00000000-0000-4000-8000-{index:012}");
            let path = folder.join(format!("{session}.jsonl"));
            write_session(&path, &session, &cwd, index);
            files.push(path);
        }
        folders.push(folder);
    }
    (files, folders)
}

/// The session files the kernel saw opened under `folders` since the watch was set.
struct Opens {
    inotify: Inotify,
}

impl Opens {
    fn watch(folders: &[PathBuf]) -> Opens {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
        for folder in folders {
            inotify.add_watch(folder, AddWatchFlags::IN_OPEN).unwrap();
        }
        Opens { inotify }
    }

    fn names(&self) -> BTreeSet<String> {
        let _ = self.inotify.as_fd();
        let mut names = BTreeSet::new();
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            for event in events {
                if let Some(name) = event.name {
                    names.insert(name.to_string_lossy().into_owned());
                }
            }
        }
        names
    }
}

/// Waits until the daemon lists `count` chats, and returns them by chat id.
fn listed(sandbox: &Sandbox, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut chats = sandbox.chats();
        if chats.len() == count {
            chats.sort_by(|a, b| a["chat_id"].as_str().cmp(&b["chat_id"].as_str()));
            return chats;
        }
        assert!(
            Instant::now() < deadline,
            "{} chats listed, not {count}",
            chats.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn chat<'a>(chats: &'a [Value], id: &str) -> &'a Value {
    chats
        .iter()
        .find(|c| c["chat_id"] == id)
        .expect("the chat is listed")
}

#[test]
fn a_restart_over_unchanged_history_opens_no_session_file_and_lists_the_same_chats() {
    let sandbox = Sandbox::new();
    let (files, folders) = corpus(&sandbox);
    let total = files.len();

    // First start: everything is read once.
    let opens = Opens::watch(&folders);
    let mut daemon = sandbox.start_daemon(&[]);
    let first = listed(&sandbox, total);
    assert!(
        first.iter().all(|c| c["state"] == "idle"),
        "chats written long ago are idle, those without an end record too: {first:#?}"
    );
    assert_eq!(
        chat(&first, "00000000-0000-4000-8000-000000000003")["last_prompt"],
        "and the tests?"
    );
    assert_eq!(
        opens.names().len(),
        total,
        "each file read at the first start"
    );

    // At rest: nothing is opened (the old safety-net rescan opened every file every 10 s).
    std::thread::sleep(Duration::from_secs(11));
    assert_eq!(
        opens.names(),
        BTreeSet::new(),
        "an idle daemon opens no session file"
    );
    assert!(daemon.terminate(Duration::from_secs(10)).is_some());

    // Restart over unchanged history: no file opened, the same chats.
    let opens = Opens::watch(&folders);
    let mut daemon = sandbox.start_daemon(&[]);
    assert_eq!(listed(&sandbox, total), first);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        opens.names(),
        BTreeSet::new(),
        "a restart over unchanged history reads nothing"
    );
    assert!(
        daemon.log_text().contains(&format!(
            "{total} files ({total} from the summary cache, 0 read)"
        )),
        "{}",
        daemon.log_text()
    );
    assert!(daemon.terminate(Duration::from_secs(10)).is_some());

    // While the daemon is down: a prompt appended to one file, another replaced by a file
    // of the same size.
    let grown = &files[1];
    append_line(
        grown,
        &json!({"type": "user", "sessionId": "00000000-0000-4000-8000-000000000001", "cwd": "/home/user/proj-0",
            "version": "2.1.39", "timestamp": "2025-11-02T11:00:00.000Z",
            "message": {"role": "user", "content": "one more thing"}}),
    );
    let replaced = &files[2];
    let text = std::fs::read_to_string(replaced).unwrap();
    let swapped = text.replace("Fixed build 2.", "Broke build 2.");
    assert_eq!(swapped.len(), text.len());
    let temporary = replaced.with_extension("tmp");
    std::fs::write(&temporary, swapped).unwrap();
    std::fs::rename(&temporary, replaced).unwrap();

    let opens = Opens::watch(&folders);
    let daemon = sandbox.start_daemon(&[]);
    let after = listed(&sandbox, total);
    std::thread::sleep(Duration::from_millis(300));
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(opens.names(), BTreeSet::from([name(grown), name(replaced)]));
    let grown_chat = chat(&after, "00000000-0000-4000-8000-000000000001");
    assert_eq!(grown_chat["last_prompt"], "one more thing");
    assert_eq!(
        grown_chat["state"], "idle",
        "a prompt of a year ago left unanswered"
    );
    for chat in &after {
        if chat["chat_id"] != "00000000-0000-4000-8000-000000000001" {
            assert!(first.contains(chat), "unchanged: {chat}");
        }
    }
    drop(daemon);

    // A damaged cache is not trusted: everything is read again, the chats are right.
    let cache = std::fs::read_dir(sandbox.path().join("cache/koru/observers"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&cache).unwrap();
    let at = bytes.len() - 40;
    bytes[at] ^= 0x20;
    std::fs::write(&cache, bytes).unwrap();
    let opens = Opens::watch(&folders);
    let daemon = sandbox.start_daemon(&[]);
    assert_eq!(listed(&sandbox, total), after);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(opens.names().len(), total);
    assert!(
        daemon.log_text().contains("damaged"),
        "{}",
        daemon.log_text()
    );
}

#[test]
fn a_file_the_cache_vouched_for_is_followed_from_where_it_stopped_when_it_changes_later() {
    let sandbox = Sandbox::new();
    let (files, folders) = corpus(&sandbox);
    let total = files.len();
    let mut daemon = sandbox.start_daemon(&[]);
    let first = listed(&sandbox, total);
    assert!(daemon.terminate(Duration::from_secs(10)).is_some());

    // Restarted over unchanged history: the files' followers wait for a change (nothing
    // opened), then one file gets a new prompt while the daemon runs.
    let opens = Opens::watch(&folders);
    let daemon = sandbox.start_daemon(&[]);
    assert_eq!(listed(&sandbox, total), first);
    let id = "00000000-0000-4000-8000-000000000004";
    let now = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    append_line(
        &files[4],
        &json!({"type": "user", "sessionId": id, "cwd": "/home/user/proj-0",
            "version": "2.1.39", "timestamp": now,
            "message": {"role": "user", "content": "and now the docs"}}),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let seen = loop {
        let chats = listed(&sandbox, total);
        let seen = chat(&chats, id).clone();
        if seen["last_prompt"] == "and now the docs" {
            break seen;
        }
        assert!(
            Instant::now() < deadline,
            "the new prompt is not listed: {seen}\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        seen["state"], "replying",
        "a prompt written now is news: the chat works on it"
    );
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        opens.names(),
        BTreeSet::from([name(&files[4])]),
        "only the file that changed is opened"
    );
    // Read from where it stopped: the rest of the chat is as it was.
    let before = chat(&first, id);
    assert_eq!(seen["workspace"], before["workspace"]);
    for other in listed(&sandbox, total) {
        if other["chat_id"] != id {
            assert!(first.contains(&other), "unchanged: {other}");
        }
    }
}

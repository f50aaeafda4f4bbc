//! Chat-store roots that change under a running daemon: every store family whose folder is created only after the daemon started is observed at once (its first prompt and reply within 2 s), a root deleted and re-created or reached through a symbolic link that is re-pointed is followed again by itself, a folder moved into place is history while a folder created inside a root is read the moment it appears, only the folders that lead to session files are watched (one inotify watch each, never an agent's own sub-folders) and a folder deleted and made again is followed again, old transcripts on disk are history (their state from their own time, nothing published), and a root the kernel's inotify watch limit refuses is polled, with the number of watches it needs in `status`, while the other roots stay live.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use koru_system_tests::{append_line, stdout_json, Observer, Sandbox};
use serde_json::{json, Value};

const CLAUDE: &str = "chat_history_claude_code_jsonl";
const CODEX: &str = "chat_history_codex_jsonl";

/// The observers' entry for `root` in `koru status --json`.
fn root_status(sandbox: &Sandbox, root: &Path) -> Value {
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    status["observers"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|o| o["root"] == root.to_str().unwrap())
                .cloned()
        })
        .unwrap_or(Value::Null)
}

fn mode_until(sandbox: &Sandbox, root: &Path, mode: &str) -> Value {
    sandbox.status_until(&format!("{} {mode}", root.display()), |s| {
        s["observers"].as_array().is_some_and(|all| {
            all.iter()
                .any(|o| o["root"] == root.to_str().unwrap() && o["mode"] == mode)
        })
    });
    root_status(sandbox, root)
}

/// Waits for an observation of `store` of `kind`, skipping others; returns it and how long
/// it took.
fn next_of(observer: &Observer, store: &str, kind: &str, within: Duration) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let left = within
            .checked_sub(started.elapsed())
            .unwrap_or_else(|| panic!("no {kind} from {store} within {within:?}"));
        let event = observer.next(left);
        if event["store"] == store && event["kind"] == kind {
            return (event, started.elapsed());
        }
    }
}

/// A Claude Code session with one finished turn (the version writes `turn_duration`).
fn claude_turn(file: &Path, session: &str, cwd: &Path, prompt: &str, reply: &str) {
    append_line(
        file,
        &json!({"type": "user", "cwd": cwd, "sessionId": session, "version": "2.0.14",
            "uuid": format!("{session}-u"), "timestamp": "2026-11-25T10:00:00.000Z",
            "message": {"role": "user", "content": prompt}}),
    );
    append_line(
        file,
        &json!({"type": "assistant", "cwd": cwd, "sessionId": session, "version": "2.0.14",
            "uuid": format!("{session}-a"), "timestamp": "2026-11-25T10:00:01.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn"}}),
    );
    append_line(
        file,
        &json!({"type": "system", "subtype": "turn_duration", "durationMs": 1000, "cwd": cwd,
            "sessionId": session, "uuid": format!("{session}-d"), "timestamp": "2026-11-25T10:00:01.100Z"}),
    );
}

/// A Codex rollout with one finished turn.
fn codex_turn(file: &Path, id: &str, cwd: &Path, prompt: &str, reply: &str) {
    for record in [
        json!({"timestamp": "2026-11-25T10:00:00.100Z", "type": "session_meta",
            "payload": {"id": id, "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.110.0"}}),
        json!({"timestamp": "2026-11-25T10:00:01.000Z", "type": "event_msg",
            "payload": {"type": "task_started", "turn_id": "t1"}}),
        json!({"timestamp": "2026-11-25T10:00:01.010Z", "type": "event_msg",
            "payload": {"type": "user_message", "message": prompt, "images": []}}),
        json!({"timestamp": "2026-11-25T10:00:05.000Z", "type": "event_msg",
            "payload": {"type": "agent_message", "message": reply, "phase": "final_answer"}}),
        json!({"timestamp": "2026-11-25T10:00:05.050Z", "type": "event_msg",
            "payload": {"type": "task_complete", "turn_id": "t1", "last_agent_message": reply}}),
    ] {
        append_line(file, &record);
    }
}

/// Sets a file's modification time (a transcript written long ago).
fn age_file(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

/// How one store family's first chat lands on a machine where its folders do not exist.
struct Family {
    store: &'static str,
    /// The registry root, relative to the sandbox (HOME is its `home/`, XDG_CONFIG_HOME
    /// its `config/`).
    root: &'static str,
    /// Creates every folder down to the session file and writes a prompt and its reply.
    write: fn(sandbox: &Path, workspace: &Path),
}

fn families() -> Vec<Family> {
    vec![
        Family {
            store: CLAUDE,
            root: "home/.claude/projects",
            write: |sandbox, ws| {
                let dir = sandbox.join("home/.claude/projects/-ws-late");
                std::fs::create_dir_all(&dir).unwrap();
                claude_turn(
                    &dir.join("5b1d.jsonl"),
                    "5b1d",
                    ws,
                    "first claude prompt",
                    "Done.",
                );
            },
        },
        Family {
            store: CODEX,
            root: "home/.codex/sessions",
            write: |sandbox, ws| {
                let day = sandbox.join("home/.codex/sessions/2026/11/25");
                std::fs::create_dir_all(&day).unwrap();
                codex_turn(
                    &day.join("rollout-2026-11-25T10-00-00-0199aa.jsonl"),
                    "0199aa",
                    ws,
                    "first codex prompt",
                    "Fixed.",
                );
            },
        },
        Family {
            store: "chat_history_copilot_json",
            root: "config/Code/User/workspaceStorage",
            write: |sandbox, ws| {
                let storage = sandbox.join("config/Code/User/workspaceStorage/77ab");
                std::fs::create_dir_all(storage.join("chatSessions")).unwrap();
                std::fs::write(
                    storage.join("workspace.json"),
                    json!({"folder": format!("file://{}", ws.display())}).to_string(),
                )
                .unwrap();
                let log = storage.join("chatSessions/9c0d.jsonl");
                append_line(
                    &log,
                    &json!({"kind": 0, "v": {"version": 3, "sessionId": "9c0d", "creationDate": 1763727100000u64,
                        "initialLocation": "panel", "responderUsername": "GitHub Copilot", "requests": []}}),
                );
                append_line(
                    &log,
                    &json!({"kind": 2, "k": ["requests"], "v": [{"requestId": "request_1", "timestamp": 1763727101000u64,
                        "message": {"text": "first copilot prompt", "parts": []}, "response": [], "modelState": {"value": 0}}]}),
                );
                append_line(
                    &log,
                    &json!({"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Explained."}]}),
                );
                append_line(
                    &log,
                    &json!({"kind": 1, "k": ["requests", 0, "modelState"], "v": {"value": 1, "completedAt": 1763727102000u64}}),
                );
            },
        },
        Family {
            store: "chat_history_cline_tasks",
            root: "config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks",
            write: |sandbox, _ws| {
                let task = sandbox.join(
                    "config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks/1767000000000",
                );
                std::fs::create_dir_all(&task).unwrap();
                std::fs::write(
                    task.join("ui_messages.json"),
                    json!([{"ts": 1767000000000u64, "type": "say", "say": "text", "text": "first cline prompt"},
                        {"ts": 1767000001000u64, "type": "say", "say": "api_req_started", "text": "{}"},
                        {"ts": 1767000020000u64, "type": "say", "say": "completion_result", "text": "Added."},
                        {"ts": 1767000020100u64, "type": "ask", "ask": "completion_result", "text": ""}])
                    .to_string(),
                )
                .unwrap();
            },
        },
        Family {
            store: "chat_history_cline_sessions",
            root: "home/.cline/data/sessions",
            write: |sandbox, ws| {
                let id = "1767000000000_late1";
                let dir = sandbox.join("home/.cline/data/sessions").join(id);
                std::fs::create_dir_all(&dir).unwrap();
                let messages_path = dir.join(format!("{id}.messages.json"));
                std::fs::write(
                    &messages_path,
                    json!({"version": 1, "updated_at": "2026-11-25T10:00:30.000Z", "agent": "lead",
                        "sessionId": id, "origin": {"source": "cli"}, "messages": [
                        {"id": "msg_1", "role": "user", "ts": 1782896400000u64,
                         "content": [{"type": "text", "text": "first cline 4 prompt"}]},
                        {"id": "msg_2", "role": "assistant", "ts": 1782896420000u64,
                         "content": [{"type": "text", "text": "Done."}]}]})
                    .to_string(),
                )
                .unwrap();
                std::fs::write(
                    dir.join(format!("{id}.json")),
                    json!({"version": 1, "session_id": id, "source": "cli", "pid": 4242,
                        "started_at": "2026-11-25T10:00:00.000Z", "status": "idle", "interactive": true,
                        "provider": "anthropic", "model": "claude-sonnet-4-5", "cwd": ws,
                        "workspace_root": ws, "prompt": "first cline 4 prompt",
                        "messages_path": messages_path})
                    .to_string(),
                )
                .unwrap();
            },
        },
        Family {
            store: "chat_history_gemini_cli",
            root: "home/.gemini/tmp",
            write: |sandbox, ws| {
                let project = sandbox.join("home/.gemini/tmp/late");
                std::fs::create_dir_all(project.join("chats")).unwrap();
                std::fs::write(project.join(".project_root"), ws.to_str().unwrap()).unwrap();
                let log = project.join("chats/session-2026-11-25T10-00-4d5e.jsonl");
                append_line(
                    &log,
                    &json!({"sessionId": "4d5e", "projectHash": "e3b0", "startTime": "2026-11-25T10:00:00.000Z",
                        "lastUpdated": "2026-11-25T10:00:00.000Z", "kind": "main"}),
                );
                append_line(
                    &log,
                    &json!({"id": "m1", "timestamp": "2026-11-25T10:00:05.000Z", "type": "user", "content": [{"text": "first gemini prompt"}]}),
                );
                append_line(
                    &log,
                    &json!({"id": "m2", "timestamp": "2026-11-25T10:00:06.000Z", "type": "gemini",
                        "content": "Listed.", "toolCalls": [], "thoughts": [], "model": "gemini-2.5-pro"}),
                );
            },
        },
        Family {
            store: "chat_history_cursor_sqlite",
            root: "config/Cursor/User/globalStorage",
            write: |sandbox, ws| {
                let global = sandbox.join("config/Cursor/User/globalStorage");
                std::fs::create_dir_all(&global).unwrap();
                let db = rusqlite::Connection::open(global.join("state.vscdb")).unwrap();
                db.execute_batch(
                    "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
                     CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
                )
                .unwrap();
                let put = |key: &str, value: Value| {
                    db.execute(
                        "INSERT INTO cursorDiskKV (key, value) VALUES (?1, ?2)",
                        (key, value.to_string()),
                    )
                    .unwrap();
                };
                put(
                    "bubbleId:c9:b1",
                    json!({"_v": 3, "type": 1, "bubbleId": "b1", "text": "first cursor prompt",
                        "createdAt": "2026-11-25T10:00:00.000Z", "workspaceUris": [format!("file://{}", ws.display())]}),
                );
                put(
                    "bubbleId:c9:b2",
                    json!({"_v": 3, "type": 2, "bubbleId": "b2", "text": "Answered."}),
                );
                put(
                    "composerData:c9",
                    json!({"_v": 10, "composerId": "c9", "status": "completed", "createdAt": 1766700000000u64,
                        "lastUpdatedAt": 1766700090000u64,
                        "fullConversationHeadersOnly": [{"bubbleId": "b1", "type": 1}, {"bubbleId": "b2", "type": 2}]}),
                );
            },
        },
    ]
}

#[test]
fn every_store_family_whose_folder_appears_after_the_daemon_started_is_observed_at_once() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("late");
    // The daemon starts at login, before any of the tools has ever run.
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "400"]);
    let observer = Observer::start(&sandbox);
    let mut took = Vec::new();
    for family in families() {
        let root = sandbox.path().join(family.root);
        let waiting = root_status(&sandbox, &root);
        assert_eq!(waiting["mode"], "waiting", "{waiting:#}");
        assert_eq!(waiting["exists"], false);
        assert!(
            waiting["waiting_on"]
                .as_str()
                .is_some_and(|a| root.starts_with(a)),
            "{waiting:#}"
        );
        (family.write)(sandbox.path(), &workspace);
        let (prompt, to_prompt) = next_of(
            &observer,
            family.store,
            "prompt_seen",
            Duration::from_secs(2),
        );
        let (_, to_reply) = next_of(
            &observer,
            family.store,
            "reply_completed",
            Duration::from_secs(2),
        );
        assert!(
            prompt["excerpt"]
                .as_str()
                .is_some_and(|e| e.starts_with("first ")),
            "{prompt:#}"
        );
        took.push((family.store, to_prompt, to_reply));
        let watched = mode_until(&sandbox, &root, "watched");
        assert_eq!(watched["exists"], true);
        assert_eq!(watched["files"], 1, "{watched:#}");
    }
    eprintln!("root created → prompt_seen / → reply_completed: {took:?}");
}

#[test]
fn a_root_deleted_and_re_created_is_followed_again() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("again");
    let projects = sandbox.path().join("home/.claude/projects");
    let project = projects.join("-ws-again");
    std::fs::create_dir_all(&project).unwrap();
    claude_turn(
        &project.join("a1.jsonl"),
        "a1",
        &workspace,
        "before",
        "Yes.",
    );
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start_with(&sandbox, &["--store", CLAUDE]);
    mode_until(&sandbox, &projects, "watched");

    std::fs::remove_dir_all(&projects).unwrap();
    let gone = mode_until(&sandbox, &projects, "waiting");
    assert_eq!(
        gone["files"], 0,
        "the deleted files are forgotten: {gone:#}"
    );

    std::fs::create_dir_all(&project).unwrap();
    claude_turn(
        &project.join("a2.jsonl"),
        "a2",
        &workspace,
        "after",
        "Again.",
    );
    let (seen, took) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2));
    assert_eq!(seen["chat_id"], "a2");
    assert_eq!(seen["excerpt"], "after");
    eprintln!("re-created root → prompt_seen: {took:?}");
    next_of(&observer, CLAUDE, "reply_completed", Duration::from_secs(2));
    mode_until(&sandbox, &projects, "watched");
    // Still live after the re-creation.
    claude_turn(
        &project.join("a3.jsonl"),
        "a3",
        &workspace,
        "later",
        "Still.",
    );
    let (seen, _) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2));
    assert_eq!(seen["chat_id"], "a3");
}

/// The inotify watches the daemon holds, over all its inotify instances (the kernel lists
/// each one as an `inotify wd:` line of the instance's fdinfo).
fn inotify_watches(pid: u64) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}

/// Waits for the daemon to hold `count` inotify watches.
fn watches_until(pid: u64, count: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while inotify_watches(pid) != count {
        assert!(
            Instant::now() < deadline,
            "{what}: {} inotify watches, not {count}",
            inotify_watches(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn only_the_folders_that_lead_to_session_files_are_watched_and_a_folder_made_again_is_followed() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("depth");
    let projects = sandbox.path().join("home/.claude/projects");
    // Claude Code keeps its sub-agents' transcripts in a folder per session, below the
    // project folder: no session of the root's, and no watch of the observers'.
    for project in ["-ws-a", "-ws-b"] {
        std::fs::create_dir_all(projects.join(project).join("s1/subagents/deeper")).unwrap();
    }
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start_with(&sandbox, &["--store", CLAUDE]);
    mode_until(&sandbox, &projects, "watched");
    let pid = stdout_json(&sandbox.run(&["status", "--json"]))["pid"]
        .as_u64()
        .unwrap();
    let at_start = inotify_watches(pid);

    // A project folder made after the start: one watch more, its session read at once.
    let project = projects.join("-ws-c");
    std::fs::create_dir_all(project.join("s2/subagents/deeper")).unwrap();
    claude_turn(&project.join("c1.jsonl"), "c1", &workspace, "first", "One.");
    let (seen, _) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2));
    assert_eq!(seen["chat_id"], "c1");
    watches_until(pid, at_start + 1, "after a project folder was made");
    // More folders below a session's: still none watched.
    std::fs::create_dir_all(project.join("s2/subagents/other/more")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        inotify_watches(pid),
        at_start + 1,
        "deeper folders are not watched"
    );

    // Deleted: its watch goes with it. Made again: watched and read again.
    std::fs::remove_dir_all(&project).unwrap();
    watches_until(pid, at_start, "after the project folder was deleted");
    std::fs::create_dir_all(&project).unwrap();
    claude_turn(
        &project.join("c2.jsonl"),
        "c2",
        &workspace,
        "second",
        "Two.",
    );
    let (seen, _) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2));
    assert_eq!(seen["chat_id"], "c2");
    watches_until(pid, at_start + 1, "after the project folder was made again");
    // And followed as it grows.
    claude_turn(
        &project.join("c2.jsonl"),
        "c2",
        &workspace,
        "third",
        "Three.",
    );
    let (seen, _) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2));
    assert_eq!(seen["excerpt"], "third");
}

#[test]
fn a_root_reached_through_a_symbolic_link_that_is_re_pointed_is_followed_again() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("linked");
    let old_target = sandbox.path().join("disk-a/claude");
    let new_target = sandbox.path().join("disk-b/claude");
    for target in [&old_target, &new_target] {
        std::fs::create_dir_all(target.join("projects/-ws-linked")).unwrap();
    }
    let link = sandbox.path().join("home/.claude");
    std::os::unix::fs::symlink(&old_target, &link).unwrap();
    let projects = link.join("projects");
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start_with(&sandbox, &["--store", CLAUDE]);
    mode_until(&sandbox, &projects, "watched");
    claude_turn(
        &old_target.join("projects/-ws-linked/l1.jsonl"),
        "l1",
        &workspace,
        "on disk a",
        "A.",
    );
    assert_eq!(
        next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2)).0["chat_id"],
        "l1"
    );

    // Re-pointed the way `ln -sfn` does it: a new link renamed over the old one.
    let fresh = sandbox.path().join("home/.claude.new");
    std::os::unix::fs::symlink(&new_target, &fresh).unwrap();
    std::fs::rename(&fresh, &link).unwrap();
    sandbox.status_until("the re-pointed root is followed again", |s| {
        s["observers"].as_array().is_some_and(|all| {
            all.iter().any(|o| {
                o["root"] == projects.to_str().unwrap() && o["mode"] == "watched" && o["files"] == 0
            })
        })
    });
    claude_turn(
        &new_target.join("projects/-ws-linked/l2.jsonl"),
        "l2",
        &workspace,
        "on disk b",
        "B.",
    );
    let (seen, took) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(3));
    assert_eq!(seen["chat_id"], "l2");
    eprintln!("write after re-pointing → prompt_seen: {took:?}");
    // The old target is no longer the store.
    claude_turn(
        &old_target.join("projects/-ws-linked/l3.jsonl"),
        "l3",
        &workspace,
        "left behind",
        "C.",
    );
    next_of(&observer, CLAUDE, "reply_completed", Duration::from_secs(2));
    assert!(observer.nothing_within(Duration::from_millis(1500)));
}

#[test]
fn a_folder_moved_into_place_is_history_and_a_folder_created_inside_a_root_is_read_at_once() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("moved");
    let sessions = sandbox.path().join("home/.codex/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start_with(&sandbox, &["--store", CODEX]);
    mode_until(&sandbox, &sessions, "watched");

    // Last month's folder restored from a backup: its chats are listed, nothing is news.
    let backup = sandbox.path().join("backup/2026/10/02");
    std::fs::create_dir_all(&backup).unwrap();
    let old = backup.join("rollout-2026-10-02T09-00-00-01aa.jsonl");
    codex_turn(
        &old,
        "01aa",
        &workspace,
        "an old question",
        "An old answer.",
    );
    age_file(&old, Duration::from_secs(50 * 24 * 3600));
    std::fs::rename(sandbox.path().join("backup/2026"), sessions.join("2026")).unwrap();
    sandbox.status_until("the moved-in chat is listed", |_| {
        sandbox.chats().iter().any(|c| c["chat_id"] == "01aa")
    });
    let listed = sandbox.chats();
    let chat = listed.iter().find(|c| c["chat_id"] == "01aa").unwrap();
    assert_eq!(chat["last_prompt"], "an old question");
    assert_eq!(chat["state"], "idle");
    assert!(observer.nothing_within(Duration::from_millis(800)));

    // A new day folder, its rollout written the moment the folder exists.
    let day = sessions.join("2026/11/25");
    std::fs::create_dir_all(&day).unwrap();
    codex_turn(
        &day.join("rollout-2026-11-25T10-00-00-02bb.jsonl"),
        "02bb",
        &workspace,
        "a new question",
        "A new answer.",
    );
    let (seen, took) = next_of(&observer, CODEX, "prompt_seen", Duration::from_secs(2));
    assert_eq!(seen["chat_id"], "02bb");
    eprintln!("new day folder → prompt_seen: {took:?}");
    let (done, _) = next_of(&observer, CODEX, "reply_completed", Duration::from_secs(2));
    assert_eq!(done["excerpt"], "A new answer.");
}

#[test]
fn a_transcript_last_written_long_ago_is_history_whose_state_comes_from_its_own_time() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("old");
    let project = sandbox.path().join("home/.gemini/tmp/old");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(project.join(".project_root"), workspace.to_str().unwrap()).unwrap();
    // Gemini CLI writes no end of turn: the end of this one, months ago, is inferred.
    let log = project.join("chats/session-2026-06-01T09-00-0ld1.jsonl");
    for record in [
        json!({"sessionId": "0ld1", "projectHash": "e3b0", "startTime": "2026-06-01T09:00:00.000Z",
            "lastUpdated": "2026-06-01T09:00:00.000Z", "kind": "main"}),
        json!({"id": "m1", "timestamp": "2026-06-01T09:00:05.000Z", "type": "user", "content": [{"text": "an old prompt"}]}),
        json!({"id": "m2", "timestamp": "2026-06-01T09:00:09.000Z", "type": "gemini",
            "content": "An old reply.", "toolCalls": [], "thoughts": [], "model": "gemini-2.5-pro"}),
    ] {
        append_line(&log, &record);
    }
    age_file(&log, Duration::from_secs(170 * 24 * 3600));
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "400"]);
    let observer = Observer::start(&sandbox);
    // At once: idle, not "replying" until a quiet period counted from start-up passes.
    let chats = sandbox.chats();
    assert_eq!(chats.len(), 1, "{chats:#?}");
    assert_eq!(chats[0]["state"], "idle", "{chats:#?}");
    assert_eq!(chats[0]["last_prompt"], "an old prompt");
    // And its inferred end is history, not a live event.
    assert!(observer.nothing_within(Duration::from_millis(1500)));
}

#[test]
fn a_root_the_inotify_watch_limit_refuses_is_polled_and_says_what_it_needs() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("limit");
    let home = sandbox.path().join("home");
    let projects = home.join(".claude/projects");
    std::fs::create_dir_all(projects.join("-ws-limit")).unwrap();
    // 28 day folders: the Codex root needs 31 watches (itself, 2026, 11, the days).
    let sessions = home.join(".codex/sessions");
    for day in 1..=28 {
        std::fs::create_dir_all(sessions.join(format!("2026/11/{day:02}"))).unwrap();
    }
    let _daemon = sandbox.start_daemon_with_watch_limit(&["--observe-quiet-ms", "600000"], 12);
    let observer = Observer::start(&sandbox);
    let polled = mode_until(&sandbox, &sessions, "polled");
    assert_eq!(polled["watched"], false);
    assert_eq!(polled["watches_needed"], 31, "{polled:#}");
    let error = polled["watch_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("fs.inotify.max_user_watches") && error.contains("31"),
        "{error}"
    );
    // Every other root stays live.
    assert_eq!(root_status(&sandbox, &projects)["mode"], "watched");
    claude_turn(
        &projects.join("-ws-limit/c1.jsonl"),
        "c1",
        &workspace,
        "still live",
        "Yes.",
    );
    let (_, live) = next_of(&observer, CLAUDE, "prompt_seen", Duration::from_secs(2));
    // The refused root is read every 2 s.
    codex_turn(
        &sessions.join("2026/11/25/rollout-2026-11-25T10-00-00-03cc.jsonl"),
        "03cc",
        &workspace,
        "polled",
        "Read.",
    );
    let (seen, polled_after) = next_of(&observer, CODEX, "prompt_seen", Duration::from_secs(5));
    assert_eq!(seen["excerpt"], "polled");
    eprintln!("watched root → prompt_seen {live:?}; polled root → prompt_seen {polled_after:?}");
    // Doctor says the same, with the sysctl.
    let doctor = sandbox.run(&["doctor", "--json"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("needs 31 watch(es)")
            && report.contains("sysctl fs.inotify.max_user_watches"),
        "{report}"
    );
}

//! The snapshot stores end to end (Cline-family tasks, Copilot Chat mutation logs, Cursor's SQLite database, Gemini CLI logs, Antigravity's opaque files): the real daemon watches files the test writes in each store's real format; `koru observe --json` must show the shared vocabulary in order, the store files must be left untouched, and files Koru cannot use must show up in `status` and `koru doctor` — never as data, never as a crash.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use koru_system_tests::{append_line, roo_task_folder, set_mode, Observer, Sandbox};
use serde_json::{json, Value};

fn fingerprint(paths: &[&Path]) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    paths
        .iter()
        .map(|p| {
            (
                p.to_path_buf(),
                std::fs::read(p).unwrap(),
                std::fs::metadata(p).unwrap().modified().unwrap(),
            )
        })
        .collect()
}

/// Writes `value` as the whole file the way the extensions do (a temp file renamed over).
fn rewrite(path: &Path, value: &Value) {
    let temp = path.with_extension("tmp-write");
    std::fs::write(&temp, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

#[test]
fn cline_tasks_rewritten_whole_are_diffed_into_turns_and_a_half_written_file_is_retried() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("cline");
    let extension = sandbox
        .xdg_config_home()
        .join("Code/User/globalStorage/rooveterinaryinc.roo-cline");
    let task_dir = extension.join("tasks/0198c4cf-task");
    roo_task_folder(&task_dir, "add a health endpoint", &workspace, "active");
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let observer = Observer::start(&sandbox);
    let messages = task_dir.join("ui_messages.json");
    let mut ui = vec![
        json!({"ts": 1767000000000u64, "type": "say", "say": "text", "text": "add a health endpoint"}),
    ];
    rewrite(&messages, &Value::Array(ui.clone()));
    assert_eq!(observer.kinds(2), ["chat_seen", "prompt_seen"]);
    ui.push(
        json!({"ts": 1767000000100u64, "type": "say", "say": "api_req_started",
        "text": "{\"request\":\"add a health endpoint\"}"}),
    );
    ui.push(json!({"ts": 1767000005000u64, "type": "say", "say": "text",
        "text": "I'll add GET /health", "partial": true}));
    rewrite(&messages, &Value::Array(ui.clone()));
    assert_eq!(observer.kinds(1), ["reply_started"]);
    // The extension asks before editing a file: the chat waits for the user.
    ui.pop();
    ui.push(json!({"ts": 1767000005000u64, "type": "say", "say": "text", "text": "I'll add GET /health in server.ts."}));
    ui.push(json!({"ts": 1767000006000u64, "type": "ask", "ask": "tool",
        "text": "{\"tool\":\"editedExistingFile\",\"path\":\"src/server.ts\"}"}));
    rewrite(&messages, &Value::Array(ui.clone()));
    let asked = observer.next(Duration::from_secs(5));
    assert_eq!(asked["kind"], "needs_input");
    assert_eq!(asked["input"], "tool_approval");
    assert_eq!(asked["workspace"], workspace.to_str().unwrap());
    let listed = sandbox.chats();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["state"], "needs_input");

    // A writer caught half-way through an in-place rewrite: never data, retried.
    let full = serde_json::to_vec(&Value::Array({
        let mut done = ui.clone();
        done.push(json!({"ts": 1767000020000u64, "type": "say", "say": "completion_result", "text": "Added GET /health returning 200."}));
        done.push(json!({"ts": 1767000020100u64, "type": "ask", "ask": "completion_result", "text": ""}));
        done
    }))
    .unwrap();
    std::fs::write(&messages, &full[..full.len() / 2]).unwrap();
    let status = sandbox.status_until("the half-written file is a problem", |s| {
        s["observers"].as_array().is_some_and(|roots| {
            roots.iter().any(|r| {
                r["problems"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p["kind"] == "malformed"))
            })
        })
    });
    assert!(
        status.to_string().contains("ui_messages.json"),
        "{status:#}"
    );
    assert!(observer.nothing_within(Duration::from_millis(300)));
    std::fs::write(&messages, &full).unwrap();
    let done = observer.next(Duration::from_secs(5));
    assert_eq!(done["kind"], "reply_completed");
    assert_eq!(done["basis"], "explicit");
    assert_eq!(done["excerpt"], "Added GET /health returning 200.");
    sandbox.status_until("the problem is gone once the file is whole", |s| {
        s["observers"].as_array().is_some_and(|roots| {
            roots
                .iter()
                .all(|r| r["problems"].as_array().is_none_or(|p| p.is_empty()))
        })
    });
    assert_eq!(sandbox.chats()[0]["state"], "idle");
    let files = [messages.clone(), task_dir.join("history_item.json")];
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let before = fingerprint(&paths);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(before, fingerprint(&paths));
}

#[test]
fn copilot_mutation_logs_are_replayed_line_by_line_including_a_compaction() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("copilot");
    let storage = sandbox
        .xdg_config_home()
        .join("Code/User/workspaceStorage/5f1c9e");
    std::fs::create_dir_all(storage.join("chatSessions")).unwrap();
    std::fs::write(
        storage.join("workspace.json"),
        json!({"folder": format!("file://{}", workspace.display())}).to_string(),
    )
    .unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start(&sandbox);
    let log = storage.join("chatSessions/3b7e1f1b.jsonl");
    append_line(
        &log,
        &json!({"kind": 0, "v": {"version": 3, "sessionId": "3b7e1f1b", "creationDate": 1763727100000u64,
            "initialLocation": "panel", "responderUsername": "GitHub Copilot", "requests": []}}),
    );
    append_line(
        &log,
        &json!({"kind": 2, "k": ["requests"], "v": [{"requestId": "request_1", "timestamp": 1763727101000u64,
            "message": {"text": "explain main.rs", "parts": []}, "response": [], "modelState": {"value": 0}}]}),
    );
    let first = observer.next(Duration::from_secs(5));
    assert_eq!(first["kind"], "chat_seen");
    assert_eq!(first["store"], "chat_history_copilot_json");
    assert_eq!(first["chat_id"], "3b7e1f1b");
    let prompt = observer.next(Duration::from_secs(5));
    assert_eq!(prompt["kind"], "prompt_seen");
    assert_eq!(prompt["excerpt"], "explain main.rs");
    assert_eq!(prompt["workspace"], workspace.to_str().unwrap());
    append_line(
        &log,
        &json!({"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "`main.rs` parses args"}]}),
    );
    assert_eq!(observer.kinds(1), ["reply_started"]);
    append_line(
        &log,
        &json!({"kind": 1, "k": ["requests", 0, "modelState"], "v": {"value": 1, "completedAt": 1763727109000u64}}),
    );
    let done = observer.next(Duration::from_secs(5));
    assert_eq!(done["kind"], "reply_completed");
    assert_eq!(done["excerpt"], "`main.rs` parses args");
    assert_eq!(done["store_ts_ms"], 1763727109000u64);

    // VS Code compacts the log into one new snapshot: nothing already seen is news.
    let compacted = json!({"kind": 0, "v": {"version": 3, "sessionId": "3b7e1f1b", "requests": [
        {"requestId": "request_1", "message": {"text": "explain main.rs"}, "response": [{"value": "`main.rs` parses args"}],
         "modelState": {"value": 1, "completedAt": 1763727109000u64}},
        {"requestId": "request_2", "message": {"text": "and lib.rs?"}, "response": [], "modelState": {"value": 0}}]}});
    let temp = log.with_extension("compact");
    std::fs::write(&temp, format!("{compacted}\n")).unwrap();
    std::fs::rename(&temp, &log).unwrap();
    let next = observer.next(Duration::from_secs(5));
    assert_eq!(next["kind"], "prompt_seen");
    assert_eq!(next["excerpt"], "and lib.rs?");
    append_line(
        &log,
        &json!({"kind": 1, "k": ["requests", 1, "modelState"], "v": {"value": 2, "completedAt": 1763727200000u64}}),
    );
    assert_eq!(observer.kinds(1), ["cancelled"]);

    // Read-only: after the daemon has read every change, the log and workspace.json are as
    // the test left them.
    let files = [log.clone(), storage.join("workspace.json")];
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let before = fingerprint(&paths);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(before, fingerprint(&paths));
    // A deleted session is dropped without a fuss.
    std::fs::remove_file(&log).unwrap();
    sandbox.status_until("the deleted log is no longer followed", |s| {
        s["observers"].as_array().is_some_and(|roots| {
            roots
                .iter()
                .filter(|r| r["store"] == "chat_history_copilot_json")
                .all(|r| r["files"] == 0)
        })
    });
}

#[test]
fn gemini_cli_logs_and_antigravity_activity_are_observed_and_left_untouched() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("gemini");
    let project = sandbox.path().join("home/.gemini/tmp/gemini");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(project.join(".project_root"), workspace.to_str().unwrap()).unwrap();
    let conversations = sandbox
        .path()
        .join("home/.gemini/antigravity/conversations");
    std::fs::create_dir_all(&conversations).unwrap();
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "400"]);
    let observer = Observer::start(&sandbox);

    let log = project.join("chats/session-2026-05-01T09-00-9f8e7d6c.jsonl");
    append_line(
        &log,
        &json!({"sessionId": "9f8e7d6c-1111", "projectHash": "e3b0c442", "startTime": "2026-05-01T09:00:00.000Z",
            "lastUpdated": "2026-05-01T09:00:00.000Z", "kind": "main"}),
    );
    append_line(
        &log,
        &json!({"id": "m1", "timestamp": "2026-05-01T09:00:05.000Z", "type": "user", "content": [{"text": "list the TODOs in src/"}]}),
    );
    let seen = observer.next(Duration::from_secs(5));
    assert_eq!(seen["kind"], "chat_seen");
    assert_eq!(seen["store"], "chat_history_gemini_cli");
    assert_eq!(seen["chat_id"], "9f8e7d6c-1111");
    let prompt = observer.next(Duration::from_secs(5));
    assert_eq!(prompt["kind"], "prompt_seen");
    assert_eq!(prompt["workspace"], workspace.to_str().unwrap());
    append_line(
        &log,
        &json!({"$set": {"lastUpdated": "2026-05-01T09:00:05.001Z"}}),
    );
    append_line(
        &log,
        &json!({"id": "m2", "timestamp": "2026-05-01T09:00:12.000Z", "type": "gemini",
            "content": "There are 3 TODOs.", "toolCalls": [], "thoughts": [], "model": "gemini-2.5-pro"}),
    );
    // Gemini CLI records no end of turn: it is inferred after the quiet period.
    assert_eq!(
        observer.kinds(2),
        ["reply_started", "reply_completed (inferred)"]
    );

    // Antigravity: encrypted, so a file appearing or changing is all Koru reports.
    let conversation = conversations.join("0a1b2c3d.pb");
    std::fs::write(&conversation, b"\x0a\x10opaque-bytes").unwrap();
    let appeared = observer.next(Duration::from_secs(5));
    assert_eq!(appeared["kind"], "chat_seen");
    assert_eq!(appeared["store"], "chat_history_antigravity_pb_readonly");
    assert_eq!(appeared["chat_id"], "0a1b2c3d");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&conversation)
        .unwrap()
        .write_all(b"more")
        .unwrap();
    assert_eq!(observer.kinds(1), ["activity"]);

    // A full observation cycle (start-up replay, rescan) leaves every byte and mtime as it was.
    let before = fingerprint(&[&log, &conversation, &project.join(".project_root")]);
    drop(observer);
    let output = sandbox.run(&["chats", "--json"]);
    assert!(output.status.success());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        before,
        fingerprint(&[&log, &conversation, &project.join(".project_root")])
    );
}

#[test]
fn cursor_composers_are_read_from_the_live_sqlite_database_without_writing_it() {
    use rusqlite::Connection;
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("cursor");
    let global = sandbox.xdg_config_home().join("Cursor/User/globalStorage");
    std::fs::create_dir_all(&global).unwrap();
    let db_path = global.join("state.vscdb");
    // Cursor keeps the database open in WAL mode while it runs.
    let cursor = Connection::open(&db_path).unwrap();
    cursor.pragma_update(None, "journal_mode", "wal").unwrap();
    cursor
        .execute_batch(
            "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
             CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
        )
        .unwrap();
    let put = |key: &str, value: Value| {
        cursor
            .execute(
                "INSERT INTO cursorDiskKV (key, value) VALUES (?1, ?2)",
                (key, value.to_string()),
            )
            .unwrap();
    };
    let uri = format!("file://{}", workspace.display());
    put(
        "composerData:c1",
        json!({"_v": 10, "composerId": "c1", "status": "generating", "createdAt": 1766700000000u64,
            "fullConversationHeadersOnly": [{"bubbleId": "b1", "type": 1}]}),
    );
    put(
        "bubbleId:c1:b1",
        json!({"_v": 3, "type": 1, "bubbleId": "b1", "text": "why does login 500?",
            "createdAt": "2025-12-26T10:00:00.000Z", "workspaceUris": [uri]}),
    );
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start_with(&sandbox, &["--store", "chat_history_cursor_sqlite"]);
    // History present at start-up is replayed into the chats table, not published.
    let listed = sandbox.chats();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["chat_id"], "c1");
    assert_eq!(listed[0]["workspace"], workspace.to_str().unwrap());

    put(
        "bubbleId:c1:b2",
        json!({"_v": 3, "type": 2, "bubbleId": "b2", "text": "The session cookie is unset."}),
    );
    // A bubble not listed in the headers is not part of the conversation.
    put(
        "bubbleId:c1:stray",
        json!({"_v": 3, "type": 2, "bubbleId": "stray", "text": "draft"}),
    );
    put(
        "composerData:c1",
        json!({"_v": 10, "composerId": "c1", "status": "completed", "lastUpdatedAt": 1766700090000u64,
            "fullConversationHeadersOnly": [{"bubbleId": "b1", "type": 1}, {"bubbleId": "b2", "type": 2}]}),
    );
    let started = observer.next(Duration::from_secs(5));
    assert_eq!(started["kind"], "reply_started");
    let done = observer.next(Duration::from_secs(5));
    assert_eq!(done["kind"], "reply_completed");
    assert_eq!(done["excerpt"], "The session cookie is unset.");
    assert_eq!(done["basis"], "explicit");

    // Koru never writes the database, its WAL or its shared-memory index.
    let files: Vec<PathBuf> = ["state.vscdb", "state.vscdb-wal", "state.vscdb-shm"]
        .iter()
        .map(|n| global.join(n))
        .collect();
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let before = fingerprint(&paths);
    let output = sandbox.run(&["chats", "--json"]);
    assert!(output.status.success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(before, fingerprint(&paths));
    drop(cursor);
}

#[test]
fn malformed_and_unreadable_store_files_are_doctor_diagnostics_not_crashes() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("p");
    let project = sandbox
        .path()
        .join("home/.claude/projects")
        .join(workspace.to_str().unwrap().replace('/', "-"));
    std::fs::create_dir_all(&project).unwrap();
    let broken = project.join("0badf00d.jsonl");
    std::fs::write(&broken, "this is not a record\n{\"type\":\n").unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    sandbox.status_until("the malformed file is reported", |s| {
        s["observers"].as_array().is_some_and(|roots| {
            roots.iter().any(|r| {
                r["store"] == "chat_history_claude_code_jsonl"
                    && r["problems"].as_array().is_some_and(|p| {
                        p.iter().any(|p| {
                            p["kind"] == "malformed" && p["path"] == broken.to_str().unwrap()
                        })
                    })
            })
        })
    });
    let output = sandbox.run(&[
        "doctor",
        "--json",
        "--only",
        "chat_history_claude_code_jsonl",
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let entry = &report["interfaces"][0];
    assert_eq!(entry["status"], "degraded", "{entry:#}");
    assert_eq!(entry["blocker"]["code"], "store_unreadable", "{entry:#}");
    let detail = entry["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("malformed") && detail.contains("0badf00d.jsonl"),
        "{detail}"
    );
    // The daemon is still fine.
    assert!(sandbox.run(&["status"]).status.success());

    // A session file this user may not read (doctor run as nobody, without a daemon).
    std::fs::write(&broken, "").unwrap();
    let secret = project.join("5ec2e7.jsonl");
    std::fs::write(&secret, "{}\n").unwrap();
    set_mode(&secret, 0o600);
    let mut dir = project.clone();
    while dir.starts_with(sandbox.path()) {
        set_mode(&dir, 0o755);
        dir = dir.parent().unwrap().to_path_buf();
    }
    let mut command = std::process::Command::new("setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(koru_system_tests::koru_bin())
        .args([
            "doctor",
            "--json",
            "--only",
            "chat_history_claude_code_jsonl",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", sandbox.path().join("home"))
        .env("KORU_SOCKET", "/nonexistent/koru.sock");
    let output = command.output().expect("setpriv runs (util-linux)");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    let entry = &report["interfaces"][0];
    assert_eq!(entry["blocker"]["code"], "store_unreadable", "{entry:#}");
    let detail = entry["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("cannot read") && detail.contains("5ec2e7.jsonl"),
        "{detail}"
    );
}

#[test]
fn cline_sdk_sessions_follow_the_manifest_status_and_its_messages_file() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("cline4");
    let id = "1767000000000_ab12c";
    let dir = sandbox.path().join("home/.cline/data/sessions").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest_path = dir.join(format!("{id}.json"));
    let messages_path = dir.join(format!("{id}.messages.json"));
    let manifest = |status: &str| {
        json!({"version": 1, "session_id": id, "source": "vscode", "pid": 4242,
            "started_at": "2026-07-01T09:00:00.000Z", "status": status, "interactive": true,
            "provider": "anthropic", "model": "claude-sonnet-4-5", "cwd": workspace,
            "workspace_root": workspace, "prompt": "add a health endpoint",
            "messages_path": messages_path})
    };
    let messages = |list: Value| {
        json!({"version": 1, "updated_at": "2026-07-01T09:00:30.000Z", "agent": "lead",
            "sessionId": id, "origin": {"source": "vscode"}, "messages": list})
    };
    let prompt = json!({"id": "msg_1", "role": "user", "ts": 1782896400000u64,
        "content": [{"type": "text", "text": "<user_input mode=\"act\">add a health endpoint</user_input>"}]});
    let tool = json!({"id": "msg_2", "role": "assistant", "ts": 1782896405000u64, "content": [
        {"type": "text", "text": "I'll edit server.ts."},
        {"type": "tool_use", "id": "tu_1", "name": "editor", "input": {"path": "src/server.ts"}}]});
    let result = json!({"id": "msg_3", "role": "user", "ts": 1782896410000u64, "content": [
        {"type": "tool_result", "tool_use_id": "tu_1", "name": "editor", "content": "ok"}]});
    let answer = json!({"id": "msg_4", "role": "assistant", "ts": 1782896420000u64,
        "content": [{"type": "text", "text": "Added GET /health returning 200."}]});
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start_with(&sandbox, &["--store", "chat_history_cline_sessions"]);
    // The session starts: the manifest names the prompt before any message is written.
    std::fs::write(&manifest_path, manifest("running").to_string()).unwrap();
    let seen = observer.next(Duration::from_secs(15));
    assert_eq!(seen["kind"], "chat_seen");
    assert_eq!(seen["chat_id"], id);
    let asked = observer.next(Duration::from_secs(5));
    assert_eq!(asked["kind"], "prompt_seen");
    assert_eq!(asked["excerpt"], "add a health endpoint");
    assert_eq!(asked["workspace"], workspace.to_str().unwrap());
    rewrite(&messages_path, &messages(json!([prompt, tool])));
    assert_eq!(observer.kinds(1), ["reply_started"]);
    // A tool call waits for the user's approval.
    rewrite(&manifest_path, &manifest("pending"));
    let waiting = observer.next(Duration::from_secs(5));
    assert_eq!(waiting["kind"], "needs_input");
    assert_eq!(waiting["input"], "tool_approval");
    rewrite(&manifest_path, &manifest("running"));
    rewrite(
        &messages_path,
        &messages(json!([prompt, tool, result, answer])),
    );
    rewrite(&manifest_path, &manifest("idle"));
    let done = observer.next(Duration::from_secs(5));
    assert_eq!(done["kind"], "reply_completed");
    assert_eq!(done["excerpt"], "Added GET /health returning 200.");
    assert_eq!(sandbox.chats()[0]["state"], "idle");
    let before = fingerprint(&[&manifest_path, &messages_path]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(before, fingerprint(&[&manifest_path, &messages_path]));
}

#[test]
fn cursor_inline_composers_are_listed_once_even_when_the_global_database_holds_one() {
    use rusqlite::Connection;
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("cursor-inline");
    let user = sandbox.xdg_config_home().join("Cursor/User");
    let storage = user.join("workspaceStorage/5d1e07");
    std::fs::create_dir_all(&storage).unwrap();
    std::fs::write(
        storage.join("workspace.json"),
        json!({"folder": format!("file://{}", workspace.display())}).to_string(),
    )
    .unwrap();
    // The global database of Cursor 2025 holds one of the two composers as a row.
    std::fs::create_dir_all(user.join("globalStorage")).unwrap();
    let global = Connection::open(user.join("globalStorage/state.vscdb")).unwrap();
    global
        .execute_batch(
            "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
             CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
        )
        .unwrap();
    global
        .execute(
            "INSERT INTO cursorDiskKV VALUES ('composerData:moved', ?1)",
            [
                json!({"composerId": "moved", "name": "moved", "status": "completed",
                "createdAt": 1_748_179_228_678u64, "fullConversationHeadersOnly": []})
                .to_string(),
            ],
        )
        .unwrap();
    drop(global);
    let inline = |id: &str, prompt: &str| {
        json!({"composerId": id, "status": "completed", "createdAt": 1_731_797_537_671u64,
            "conversation": [{"type": 1, "bubbleId": format!("{id}-1"), "text": prompt},
                             {"type": 2, "bubbleId": format!("{id}-2"), "text": "Done."}]})
    };
    let db_path = storage.join("state.vscdb");
    let cursor = Connection::open(&db_path).unwrap();
    cursor
        .execute_batch("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);")
        .unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start(&sandbox);
    cursor
        .execute(
            "INSERT INTO ItemTable VALUES ('composer.composerData', ?1)",
            [json!({"allComposers": [inline("stays", "add a sidebar"), inline("moved", "old copy")],
                "selectedComposerId": "stays", "composerDataVersion": 0})
            .to_string()],
        )
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let event = observer.next(Duration::from_secs(15));
        if event["chat_id"] == "stays" {
            seen.push(event["kind"].as_str().unwrap().to_string());
            assert_eq!(event["store"], "chat_history_cursor_legacy_sqlite");
            assert_eq!(event["workspace"], workspace.to_str().unwrap());
        }
    }
    assert_eq!(
        seen,
        [
            "chat_seen",
            "prompt_seen",
            "reply_started",
            "reply_completed"
        ]
    );
    let mut listed: Vec<(String, String)> = sandbox
        .chats()
        .iter()
        .map(|chat| {
            (
                chat["chat_id"].as_str().unwrap().to_string(),
                chat["store"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("moved".into(), "chat_history_cursor_sqlite".into()),
            ("stays".into(), "chat_history_cursor_legacy_sqlite".into())
        ],
        "the composer the global database holds is listed once, from there"
    );
}

#[test]
fn cursor_legacy_chat_panels_are_read_per_workspace() {
    use rusqlite::Connection;
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("cursor-legacy");
    let storage = sandbox
        .xdg_config_home()
        .join("Cursor/User/workspaceStorage/9f2c41");
    std::fs::create_dir_all(&storage).unwrap();
    std::fs::write(
        storage.join("workspace.json"),
        json!({"folder": format!("file://{}", workspace.display())}).to_string(),
    )
    .unwrap();
    let db_path = storage.join("state.vscdb");
    let cursor = Connection::open(&db_path).unwrap();
    cursor
        .execute_batch("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);")
        .unwrap();
    let put = |value: Value| {
        cursor
            .execute(
                "INSERT INTO ItemTable (key, value) VALUES ('workbench.panel.aichat.view.aichat.chatdata', ?1)",
                [value.to_string()],
            )
            .unwrap();
    };
    let _daemon = sandbox.start_daemon(&[]);
    let observer =
        Observer::start_with(&sandbox, &["--store", "chat_history_cursor_legacy_sqlite"]);
    put(
        json!({"tabs": [{"tabId": "tab-1", "chatTitle": "login", "bubbles": [
        {"type": "user", "id": "u1", "text": "why does login 500?"}]}]}),
    );
    let seen = observer.next(Duration::from_secs(15));
    assert_eq!(seen["kind"], "chat_seen");
    assert_eq!(seen["chat_id"], "tab-1");
    assert_eq!(seen["workspace"], workspace.to_str().unwrap());
    assert_eq!(observer.kinds(1), ["prompt_seen"]);
    let before = fingerprint(&[&db_path]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        before,
        fingerprint(&[&db_path]),
        "the database is never written"
    );
}

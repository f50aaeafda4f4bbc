//! Where the tools really write: the real daemon, started with a tool's own relocation variable (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`, `CLINE_DIR`, `XDG_CONFIG_HOME`, `XDG_DATA_HOME`), observes the store where the tool would write it and not at the default, and observes code-server's default layout with no plugin announcing it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use koru_system_tests::{append_line, Observer, Sandbox};
use serde_json::{json, Value};

const CLAUDE: &str = "chat_history_claude_code_jsonl";
const CODEX: &str = "chat_history_codex_jsonl";
const COPILOT: &str = "chat_history_copilot_json";

/// The next observations are exactly one whole turn of `chat_id`, nothing follows (the
/// decoy written at the tool's default location is not read), and `koru chats` lists that
/// chat alone with `prompt` as its last prompt.
fn only_this_turn_is_observed(sandbox: &Sandbox, observer: &Observer, chat_id: &str, prompt: &str) {
    let events: Vec<(String, String)> = (0..4)
        .map(|_| {
            let event = observer.next(Duration::from_secs(5));
            let text = |key: &str| event[key].as_str().unwrap_or_default().to_string();
            (text("chat_id"), text("kind"))
        })
        .collect();
    let expected: Vec<(String, String)> = [
        "chat_seen",
        "prompt_seen",
        "reply_started",
        "reply_completed",
    ]
    .iter()
    .map(|kind| (chat_id.to_string(), kind.to_string()))
    .collect();
    assert_eq!(events, expected);
    assert!(observer.nothing_within(Duration::from_millis(500)));
    let chats = sandbox.chats();
    assert_eq!(chats.len(), 1, "{chats:#?}");
    assert_eq!(chats[0]["chat_id"], chat_id);
    assert_eq!(chats[0]["last_prompt"], prompt);
}

/// The roots `koru status --json` lists for `store`.
fn roots_of(status: &Value, store: &str) -> Vec<PathBuf> {
    status["observers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["store"] == store)
        .map(|o| PathBuf::from(o["root"].as_str().unwrap()))
        .collect()
}

fn status_with_observers(sandbox: &Sandbox) -> Value {
    sandbox.status_until("the observers are listed", |s| {
        s["observers"].as_array().is_some_and(|o| !o.is_empty())
    })
}

/// One Claude Code turn (prompt, text reply, `turn_duration`), appended record by record.
fn claude_code_turn(file: &Path, session: &str, cwd: &Path, prompt: &str, reply: &str) {
    append_line(
        file,
        &json!({"parentUuid": null, "isSidechain": false, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": "2.1.100", "type": "user",
            "message": {"role": "user", "content": prompt},
            "uuid": format!("{session}-1"), "timestamp": "2026-05-04T10:00:00.000Z"}),
    );
    append_line(
        file,
        &json!({"parentUuid": format!("{session}-1"), "isSidechain": false, "cwd": cwd,
            "sessionId": session, "version": "2.1.100", "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn"},
            "uuid": format!("{session}-2"), "timestamp": "2026-05-04T10:00:03.000Z"}),
    );
    append_line(
        file,
        &json!({"parentUuid": format!("{session}-2"), "cwd": cwd, "sessionId": session,
            "type": "system", "subtype": "turn_duration", "durationMs": 3000,
            "uuid": format!("{session}-3"), "timestamp": "2026-05-04T10:00:03.100Z"}),
    );
}

/// Claude Code's folder for a project: its cwd with `/` as `-`.
fn claude_project(projects: &Path, workspace: &Path) -> PathBuf {
    let dir = projects.join(workspace.to_str().unwrap().replace('/', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn claude_config_dir_moves_the_claude_code_store_and_the_default_folder_is_not_read() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let config_dir = sandbox.path().join("claude-work");
    let moved = claude_project(&config_dir.join("projects"), &workspace);
    let default = claude_project(&sandbox.home().join(".claude/projects"), &workspace);
    let daemon_env = [("CLAUDE_CONFIG_DIR", config_dir.to_str().unwrap())];
    let _daemon = sandbox.start_daemon_with_env(&["--observe-quiet-ms", "600000"], &daemon_env);
    let status = status_with_observers(&sandbox);
    assert_eq!(roots_of(&status, CLAUDE), [config_dir.join("projects")]);
    let observer = Observer::start(&sandbox);

    // A session in ~/.claude is not Claude Code's while CLAUDE_CONFIG_DIR is set.
    claude_code_turn(
        &default.join("s-default.jsonl"),
        "s-default",
        &workspace,
        "not here",
        "no",
    );
    claude_code_turn(
        &moved.join("s-moved.jsonl"),
        "s-moved",
        &workspace,
        "where do you write?",
        "Under CLAUDE_CONFIG_DIR.",
    );
    only_this_turn_is_observed(&sandbox, &observer, "s-moved", "where do you write?");
}

#[test]
fn codex_home_moves_the_codex_rollouts() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("codex");
    let codex_home = sandbox.path().join("codex-home");
    let day = codex_home.join("sessions/2026/05/04");
    std::fs::create_dir_all(&day).unwrap();
    let default_day = sandbox.home().join(".codex/sessions/2026/05/04");
    std::fs::create_dir_all(&default_day).unwrap();
    let daemon_env = [("CODEX_HOME", codex_home.to_str().unwrap())];
    let _daemon = sandbox.start_daemon_with_env(&["--observe-quiet-ms", "600000"], &daemon_env);
    let status = status_with_observers(&sandbox);
    assert_eq!(roots_of(&status, CODEX), [codex_home.join("sessions")]);
    let observer = Observer::start(&sandbox);

    for (folder, id, prompt) in [
        (&default_day, "0198c4cf-0000", "not here"),
        (&day, "0198c4cf-8587", "fix the failing test"),
    ] {
        let rollout = folder.join(format!("rollout-2026-05-04T10-00-00-{id}.jsonl"));
        for record in [
            json!({"timestamp": "2026-05-04T10:00:00.100Z", "type": "session_meta",
                "payload": {"id": id, "cwd": workspace, "originator": "codex_cli_rs", "cli_version": "0.110.0"}}),
            json!({"timestamp": "2026-05-04T10:00:01.000Z", "type": "event_msg",
                "payload": {"type": "task_started", "turn_id": "t1"}}),
            json!({"timestamp": "2026-05-04T10:00:01.010Z", "type": "event_msg",
                "payload": {"type": "user_message", "message": prompt, "images": []}}),
            json!({"timestamp": "2026-05-04T10:00:20.001Z", "type": "event_msg",
                "payload": {"type": "agent_message", "message": "Fixed.", "phase": "final_answer"}}),
            json!({"timestamp": "2026-05-04T10:00:20.050Z", "type": "event_msg",
                "payload": {"type": "task_complete", "turn_id": "t1", "last_agent_message": "Fixed."}}),
        ] {
            append_line(&rollout, &record);
        }
    }
    only_this_turn_is_observed(&sandbox, &observer, "0198c4cf-8587", "fix the failing test");
}

/// A Copilot chat session with one finished turn, written as VS Code's mutation log.
fn copilot_turn(storage: &Path, chat_id: &str, prompt: &str) {
    let log = storage
        .join("chatSessions")
        .join(format!("{chat_id}.jsonl"));
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    for record in [
        json!({"kind": 0, "v": {"version": 3, "sessionId": chat_id, "creationDate": 1777888800000u64,
            "initialLocation": "panel", "responderUsername": "GitHub Copilot", "requests": []}}),
        json!({"kind": 2, "k": ["requests"], "v": [{"requestId": "request_1", "timestamp": 1777888801000u64,
            "message": {"text": prompt, "parts": []}, "response": [], "modelState": {"value": 0}}]}),
        json!({"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Done."}]}),
        json!({"kind": 1, "k": ["requests", 0, "modelState"], "v": {"value": 1, "completedAt": 1777888809000u64}}),
    ] {
        append_line(&log, &record);
    }
}

#[test]
fn code_servers_default_layout_is_observed_without_any_plugin_announcing_it() {
    let sandbox = Sandbox::new();
    // code-server's user data under $XDG_DATA_HOME (unset here: ~/.local/share).
    let storage = sandbox
        .home()
        .join(".local/share/code-server/User/workspaceStorage/-6559bfe");
    std::fs::create_dir_all(storage.join("chatSessions")).unwrap();
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let status = status_with_observers(&sandbox);
    assert!(roots_of(&status, COPILOT).contains(
        &sandbox
            .home()
            .join(".local/share/code-server/User/workspaceStorage")
    ));
    let observer = Observer::start(&sandbox);
    copilot_turn(&storage, "c0de5e7e", "explain main.rs");
    only_this_turn_is_observed(&sandbox, &observer, "c0de5e7e", "explain main.rs");
}

#[test]
fn xdg_config_home_moves_the_vs_code_family_and_the_default_folder_is_not_read() {
    let sandbox = Sandbox::new();
    // The sandbox gives every koru XDG_CONFIG_HOME=<sandbox>/config, as a machine that
    // sets it: VS Code then writes there, not in ~/.config.
    let moved = sandbox
        .xdg_config_home()
        .join("Code/User/workspaceStorage/5f1c9e");
    let default = sandbox
        .home()
        .join(".config/Code/User/workspaceStorage/5f1c9e");
    // The folders exist before the daemon starts (a folder created later is the watcher's
    // business, tested with it).
    std::fs::create_dir_all(moved.join("chatSessions")).unwrap();
    std::fs::create_dir_all(default.join("chatSessions")).unwrap();
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let status = status_with_observers(&sandbox);
    let copilot_roots = roots_of(&status, COPILOT);
    assert!(copilot_roots.contains(&sandbox.xdg_config_home().join("Code/User/workspaceStorage")));
    let home_config = sandbox.home().join(".config");
    for store in [
        COPILOT,
        "chat_history_cline_tasks",
        "chat_history_cursor_sqlite",
    ] {
        assert!(
            roots_of(&status, store)
                .iter()
                .all(|root| !root.starts_with(&home_config)),
            "{store} still looks in ~/.config: {:#?}",
            roots_of(&status, store)
        );
    }
    let observer = Observer::start(&sandbox);
    copilot_turn(&default, "0ld0ld00", "not here");
    copilot_turn(&moved, "3b7e1f1b", "explain lib.rs");
    only_this_turn_is_observed(&sandbox, &observer, "3b7e1f1b", "explain lib.rs");
}

#[test]
fn every_relocation_variable_moves_its_stores_roots() {
    let sandbox = Sandbox::new();
    let at = |name: &str| sandbox.path().join(name);
    let (gemini_home, cline_dir, data_home) = (at("gemini-home"), at("cline"), at("data"));
    let daemon_env = [
        ("GEMINI_CLI_HOME", gemini_home.to_str().unwrap()),
        ("CLINE_DIR", cline_dir.to_str().unwrap()),
        ("XDG_DATA_HOME", data_home.to_str().unwrap()),
        // Empty counts as unset, as for the tools.
        ("CLAUDE_CONFIG_DIR", ""),
    ];
    let _daemon = sandbox.start_daemon_with_env(&[], &daemon_env);
    let status = status_with_observers(&sandbox);
    assert_eq!(
        roots_of(&status, "chat_history_gemini_cli"),
        [gemini_home.join(".gemini/tmp")]
    );
    assert_eq!(
        roots_of(&status, "chat_history_cline_sessions"),
        [cline_dir.join("data/sessions")]
    );
    assert!(
        roots_of(&status, COPILOT).contains(&data_home.join("code-server/User/workspaceStorage"))
    );
    assert_eq!(
        roots_of(&status, CLAUDE),
        [sandbox.home().join(".claude/projects")]
    );
}

//! Chat-store folders a plugin session announces in its hello (`window.storage`): the real daemon observes the `chatSessions/` and Roo Code task folder of a code-server window started with `--user-data-dir` (a layout no registry location names) for exactly as long as the session lasts, reads what is already there as history, matches a drive's prompt recorded there, watches a folder announced twice or already covered by a registry location once (and a folder inside another store's recursive root through that root's watch), and refuses relative paths and other users' folders. The test plays the IDE through a raw plugin connection: running the drive's step records the request in the chat's own store file, in the Copilot Chat mutation-log format.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use koru_system_tests::{
    append_line, greet, roo_task_folder, stdout_json, Daemon, Observer, Raw, Sandbox,
};
use serde_json::{json, Value};

const COPILOT: &str = "chat_history_copilot_json";

/// One window's workspace storage folder, `User/workspaceStorage/<id>`, with the
/// `workspace.json` VS Code writes there naming the window's folder.
fn workspace_storage(user_dir: &Path, id: &str, folder: &Path) -> PathBuf {
    let storage = user_dir.join("workspaceStorage").join(id);
    std::fs::create_dir_all(&storage).unwrap();
    std::fs::write(
        storage.join("workspace.json"),
        json!({"folder": format!("file://{}", folder.display())}).to_string(),
    )
    .unwrap();
    storage
}

/// A Copilot chat session log (`chatSessions/<id>.jsonl`) whose first line is the whole
/// session, as VS Code 1.109+ writes it, with one finished turn for `prompt`.
fn chat_with_one_turn(storage: &Path, chat_id: &str, prompt: &str) -> PathBuf {
    std::fs::create_dir_all(storage.join("chatSessions")).unwrap();
    let log = storage
        .join("chatSessions")
        .join(format!("{chat_id}.jsonl"));
    append_line(
        &log,
        &json!({"kind": 0, "v": {"version": 3, "sessionId": chat_id, "creationDate": 1763727100000u64,
            "initialLocation": "panel", "responderUsername": "GitHub Copilot", "requests": [
            {"requestId": "request_1", "timestamp": 1763727101000u64, "message": {"text": prompt, "parts": []},
             "response": [{"value": "It parses the arguments."}],
             "modelState": {"value": 1, "completedAt": 1763727102000u64}}]}}),
    );
    log
}

/// The chat records a new request (VS Code pushes it onto `requests`).
fn record_request(log: &Path, index: usize, prompt: &str) {
    append_line(
        log,
        &json!({"kind": 2, "k": ["requests"], "v": [{"requestId": format!("request_{}", index + 1),
            "timestamp": 1763727200000u64 + index as u64, "message": {"text": prompt, "parts": []},
            "response": [], "modelState": {"value": 0}}]}),
    );
}

/// The chat answers request `index` and finishes the turn.
fn record_reply(log: &Path, index: usize, reply: &str) {
    append_line(
        log,
        &json!({"kind": 2, "k": ["requests", index, "response"], "v": [{"value": reply}]}),
    );
    append_line(
        log,
        &json!({"kind": 1, "k": ["requests", index, "modelState"], "v": {"value": 1, "completedAt": 1763727300000u64}}),
    );
}

/// The user folder of a code-server started with `--user-data-dir ~/code-server-data`: a
/// layout no registry location names (code-server's default one, under
/// `$XDG_DATA_HOME/code-server`, is a registry location), so only the window's
/// announcement tells the daemon about it.
fn custom_code_server_user(sandbox: &Sandbox) -> PathBuf {
    sandbox.home().join("code-server-data/User")
}

/// A code-server window's hello with its storage folders.
fn hello(workspace: &Path, storage: Value) -> Value {
    json!({
        "v": 1, "id": 1, "type": "hello", "role": "plugin",
        "protocol": {"min": 1, "max": 1},
        "client": {"name": "system-test-plugin", "version": "0"},
        "ide": {"product": "code-server", "version": "4.139.1", "app_name": "code-server"},
        "window": {"pid": std::process::id(), "workspace_folders": [workspace.to_str().unwrap()],
            "storage": storage},
        "capabilities": [{"kind": "native_send"}, {"kind": "command", "id": "workbench.action.chat.open"}]
    })
}

fn connect(daemon: &Daemon, workspace: &Path, storage: Value) -> (Raw, String) {
    let (raw, welcome) = greet(&daemon.socket, &hello(workspace, storage));
    let session_id = welcome["session_id"].as_str().unwrap().to_string();
    (raw, session_id)
}

/// The observers' entries for `root`.
fn roots_at(status: &Value, root: &Path) -> Vec<Value> {
    status["observers"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|o| o["root"] == root.to_str().unwrap())
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `status` lists `root` once, announced by exactly `sessions`, with `files`.
fn announced_root(status: &Value, root: &Path, sessions: &[&str], files: u64) -> bool {
    let found = roots_at(status, root);
    found.len() == 1
        && found[0]["store"] == COPILOT
        && found[0]["announced"] == true
        && found[0]["watched"] == true
        && found[0]["files"] == files
        && found[0]["announced_by"] == json!(sessions)
}

/// Plays the IDE for the next drive: acks `received`, runs each step (a step that proves
/// `submitted` is the chat taking the request: it is recorded in `log`), acks what each
/// step proves, and returns the prompt.
fn run_next_drive(plugin: &mut Raw, log: &Path, index: usize) -> String {
    let drive = plugin.recv_type("drive");
    let drive_id = drive["drive_id"].as_str().unwrap();
    let prompt = drive["prompt"].as_str().unwrap().to_string();
    plugin.send(&json!({"v": 1, "type": "ack", "drive_id": drive_id, "stage": "received"}));
    let steps = drive["steps"].as_array().cloned().unwrap_or_default();
    assert!(!steps.is_empty(), "a drive with steps: {drive}");
    for step in steps {
        assert_eq!(step["command"], "workbench.action.chat.open", "{drive}");
        if step["proves"] == "submitted" {
            record_request(log, index, &prompt);
        }
        plugin.send(&json!({"v": 1, "type": "ack", "drive_id": drive_id, "stage": step["proves"]}));
    }
    prompt
}

/// The one chat `koru chats` lists for `store`.
fn chat_of(sandbox: &Sandbox, store: &str) -> Value {
    let found: Vec<Value> = sandbox
        .chats()
        .into_iter()
        .filter(|c| c["store"] == store)
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    found[0].clone()
}

fn drive_json(sandbox: &Sandbox, drive_id: &str) -> Value {
    let drives = stdout_json(&sandbox.run(&["drives", "--json"]));
    drives
        .as_array()
        .and_then(|all| all.iter().find(|d| d["drive_id"] == drive_id).cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn a_code_server_windows_announced_chat_sessions_are_observed_for_the_life_of_its_session() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let user_dir = custom_code_server_user(&sandbox);
    let storage = workspace_storage(&user_dir, "8d1f0c3a", &workspace);
    let log = chat_with_one_turn(&storage, "c0ffee01", "explain main.rs");
    // Roo Code in the same code-server keeps its tasks in globalStorage.
    let global_storage = user_dir.join("globalStorage");
    let task = global_storage.join("rooveterinaryinc.roo-cline/tasks/0198c4cf-task");
    roo_task_folder(&task, "add a health endpoint", &workspace, "completed");
    std::fs::write(
        task.join("ui_messages.json"),
        json!([{"ts": 1767000000000u64, "type": "say", "say": "text", "text": "add a health endpoint"},
            {"ts": 1767000020000u64, "type": "say", "say": "completion_result", "text": "Added GET /health."},
            {"ts": 1767000020100u64, "type": "ask", "ask": "completion_result", "text": ""}])
        .to_string(),
    )
    .unwrap();
    let daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let observer = Observer::start(&sandbox);
    let chat_sessions = storage.join("chatSessions");
    assert!(
        roots_at(
            &stdout_json(&sandbox.run(&["status", "--json"])),
            &chat_sessions
        )
        .is_empty(),
        "nothing observes the folder before a window announces it"
    );

    let (mut plugin, session_id) = connect(
        &daemon,
        &workspace,
        json!({"workspace_storage": storage, "global_storage": global_storage}),
    );
    let roo_tasks = global_storage.join("rooveterinaryinc.roo-cline/tasks");
    let status = sandbox.status_until("the announced folders are observed", |s| {
        announced_root(s, &chat_sessions, &[&session_id], 1)
            && roots_at(s, &roo_tasks)
                .first()
                .is_some_and(|r| r["files"] == 1)
    });
    // Cline and Kilo Code have no folder here yet: listed, waiting for the rescan.
    let cline_tasks = global_storage.join("saoudrizwan.claude-dev/tasks");
    assert_eq!(
        roots_at(&status, &cline_tasks)[0]["exists"],
        false,
        "{status:#}"
    );
    assert_eq!(
        roots_at(&status, &roo_tasks)[0]["announced_by"],
        json!([session_id])
    );
    // What was there already is history: in the chats table, never published as news.
    let chats = sandbox.chats();
    assert_eq!(chats.len(), 2, "{chats:#?}");
    let copilot = chat_of(&sandbox, COPILOT);
    assert_eq!(copilot["chat_id"], "c0ffee01");
    assert_eq!(copilot["last_prompt"], "explain main.rs");
    assert_eq!(copilot["workspace"], workspace.to_str().unwrap());
    let roo = chat_of(&sandbox, "chat_history_cline_tasks");
    assert_eq!(roo["chat_id"], "0198c4cf-task");
    assert_eq!(roo["last_prompt"], "add a health endpoint");
    assert_eq!(roo["workspace"], workspace.to_str().unwrap());
    assert_eq!(roo["state"], "idle");
    assert!(observer.nothing_within(Duration::from_millis(500)));

    // A drive into the window: the chat records the request, the drive is matched to it
    // through the announced folder, and the reply reaches `koru send --wait-reply`.
    let prompt = "add a --verbose flag to main.rs";
    let send = sandbox.spawn(&[
        "send",
        "--session",
        &session_id,
        "--wait-reply",
        "--timeout",
        "20",
        "--json",
        prompt,
    ]);
    assert_eq!(run_next_drive(&mut plugin, &log, 1), prompt);
    let seen = observer.next(Duration::from_secs(5));
    assert_eq!(seen["kind"], "prompt_seen", "{seen}");
    assert_eq!(seen["chat_id"], "c0ffee01");
    assert_eq!(seen["workspace"], workspace.to_str().unwrap());
    record_reply(&log, 1, "Added --verbose.");
    let send = send.wait_with_output().unwrap();
    assert!(send.status.success(), "{send:?}");
    let drive = stdout_json(&send);
    assert_eq!(drive["state"], "done", "{drive:#}");
    let observation = &drive_json(&sandbox, drive["drive_id"].as_str().unwrap())["observation"];
    assert_eq!(observation["store"], COPILOT, "{observation:#}");
    assert_eq!(observation["chat_id"], "c0ffee01");
    assert_eq!(observation["stage"], "replied");
    assert_eq!(observation["reply_excerpt"], "Added --verbose.");
    assert_eq!(chat_of(&sandbox, COPILOT)["last_prompt"], prompt);
    // Published once: the prompt, the reply starting and ending, nothing twice.
    assert_eq!(observer.kinds(2), ["reply_started", "reply_completed"]);
    assert!(observer.nothing_within(Duration::from_millis(500)));

    // The session ends: the folder is dropped, and what the chat writes there later is
    // no longer observed.
    drop(plugin);
    sandbox.status_until("the folders are dropped with their session", |s| {
        roots_at(s, &chat_sessions).is_empty() && roots_at(s, &roo_tasks).is_empty()
    });
    record_request(&log, 2, "written after the window closed");
    assert!(observer.nothing_within(Duration::from_millis(1500)));
    assert_eq!(chat_of(&sandbox, COPILOT)["last_prompt"], prompt);
    assert!(
        daemon
            .log_text()
            .contains("no longer observing a chat-store folder"),
        "{}",
        daemon.log_text()
    );
}

#[test]
fn a_folder_announced_twice_or_covered_by_a_registry_location_is_watched_once() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    // VS Code's default layout: the registry's Copilot location already covers it.
    let vscode_user = sandbox.xdg_config_home().join("Code/User");
    let vscode_storage = workspace_storage(&vscode_user, "aa11", &workspace);
    std::fs::create_dir_all(vscode_storage.join("chatSessions")).unwrap();
    let code_server_user = custom_code_server_user(&sandbox);
    let shared = workspace_storage(&code_server_user, "bb22", &workspace);
    let log = chat_with_one_turn(&shared, "5e55", "first question");
    let daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let observer = Observer::start(&sandbox);

    let (_vscode, vscode_session) = connect(
        &daemon,
        &workspace,
        json!({"workspace_storage": vscode_storage}),
    );
    let registry_root = vscode_user.join("workspaceStorage");
    let status = sandbox.status_until("the registry root lists the session", |s| {
        roots_at(s, &registry_root)
            .first()
            .is_some_and(|r| r["announced_by"] == json!([vscode_session]))
    });
    let registry_entry = &roots_at(&status, &registry_root)[0];
    assert_eq!(registry_entry["store"], COPILOT);
    assert!(
        registry_entry.get("announced").is_none(),
        "{registry_entry}"
    );
    assert!(
        roots_at(&status, &vscode_storage.join("chatSessions")).is_empty(),
        "not a second root: {status:#}"
    );

    // Two sessions (a window and its reloaded twin) announce the same folder, the second
    // through a symbolic link: one root, one watch, each change reported once.
    let (first, first_session) = connect(&daemon, &workspace, json!({"workspace_storage": shared}));
    let link = sandbox.path().join("link-to-storage");
    std::os::unix::fs::symlink(&shared, &link).unwrap();
    let (second, second_session) = connect(&daemon, &workspace, json!({"workspace_storage": link}));
    let chat_sessions = shared.join("chatSessions");
    let mut both = [first_session.as_str(), second_session.as_str()];
    both.sort();
    sandbox.status_until("one root announced by both sessions", |s| {
        announced_root(s, &chat_sessions, &both, 1)
    });
    record_request(&log, 1, "second question");
    let seen = observer.next(Duration::from_secs(5));
    assert_eq!(seen["kind"], "prompt_seen", "{seen}");
    assert_eq!(seen["excerpt"], "second question");
    assert!(observer.nothing_within(Duration::from_millis(500)));

    // The first session ends: the other still needs the folder.
    drop(first);
    sandbox.status_until("the root stays for the second session", |s| {
        announced_root(s, &chat_sessions, &[&second_session], 1)
    });
    record_reply(&log, 1, "Answered.");
    assert_eq!(observer.kinds(2), ["reply_started", "reply_completed"]);
    // The last one ends: dropped.
    drop(second);
    sandbox.status_until("the root is dropped with the last session", |s| {
        roots_at(s, &chat_sessions).is_empty()
    });
    record_request(&log, 2, "third question");
    assert!(observer.nothing_within(Duration::from_millis(1000)));
}

#[test]
fn relative_paths_and_other_users_folders_are_refused_with_a_logged_reason() {
    use std::os::unix::fs::MetadataExt;
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let daemon = sandbox.start_daemon(&[]);
    // Another user's folder: made and handed to `nobody` when the test runs as root, else
    // `/` (owned by root).
    let our_uid = std::fs::metadata(sandbox.path()).unwrap().uid();
    let theirs = if our_uid == 0 {
        let theirs = sandbox
            .path()
            .join("home-of-nobody/User/workspaceStorage/cc33");
        std::fs::create_dir_all(theirs.join("chatSessions")).unwrap();
        let mut folders: Vec<&Path> = theirs.ancestors().take(4).collect();
        let chat_sessions = theirs.join("chatSessions");
        folders.push(&chat_sessions);
        for folder in folders {
            std::os::unix::fs::chown(folder, Some(65534), Some(65534)).unwrap();
        }
        theirs
    } else {
        PathBuf::from("/")
    };
    let (_plugin, session_id) = connect(
        &daemon,
        &workspace,
        json!({"workspace_storage": theirs, "global_storage": "relative/User/globalStorage"}),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !daemon.log_text().contains("not an absolute path") {
        assert!(Instant::now() < deadline, "{}", daemon.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = daemon.log_text();
    assert!(
        log.contains("not observing a folder the window announced"),
        "{log}"
    );
    assert!(log.contains("not by this daemon's user"), "{log}");
    assert!(log.contains(&session_id), "{log}");
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    let announced: Vec<&Value> = status["observers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o.get("announced").is_some() || o.get("announced_by").is_some())
        .collect();
    assert!(announced.is_empty(), "{status:#}");
}

#[test]
fn an_announced_chat_sessions_folder_that_appears_later_is_read_the_moment_it_appears() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let user_dir = custom_code_server_user(&sandbox);
    // A fresh window: its storage folder exists, no chat has been written yet.
    let storage = workspace_storage(&user_dir, "dd44", &workspace);
    let daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let (_plugin, session_id) = connect(&daemon, &workspace, json!({"workspace_storage": storage}));
    let chat_sessions = storage.join("chatSessions");
    let status = sandbox.status_until("the missing folder is listed", |s| {
        roots_at(s, &chat_sessions)
            .first()
            .is_some_and(|r| r["exists"] == false && r["announced_by"] == json!([session_id]))
    });
    assert_eq!(roots_at(&status, &chat_sessions)[0]["watched"], false);
    assert_eq!(roots_at(&status, &chat_sessions)[0]["mode"], "waiting");
    assert_eq!(
        roots_at(&status, &chat_sessions)[0]["waiting_on"],
        storage.to_str().unwrap()
    );
    // The first chat creates the folder: the watch on the storage folder above it sees it
    // appear, and the chat is read at once.
    let started = Instant::now();
    chat_with_one_turn(&storage, "f1a7", "first chat in a new window");
    sandbox.status_until("the folder is watched once it exists", |s| {
        announced_root(s, &chat_sessions, &[&session_id], 1)
    });
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let chats = sandbox.chats();
    assert_eq!(chats.len(), 1, "{chats:#?}");
    assert_eq!(chats[0]["last_prompt"], "first chat in a new window");
}

#[test]
fn a_chat_in_a_windows_own_folder_belongs_to_that_window_when_no_workspace_json_says() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let user_dir = custom_code_server_user(&sandbox);
    // code-server 4.139 writes `meta.json` ({id, name}) beside `chatSessions/`, no
    // `workspace.json`: only the window that announced the folder knows its workspace.
    let storage = user_dir.join("workspaceStorage/-6559bfe");
    std::fs::create_dir_all(&storage).unwrap();
    std::fs::write(
        storage.join("meta.json"),
        r#"{"id": "-6559bfe", "name": "repo"}"#,
    )
    .unwrap();
    chat_with_one_turn(&storage, "5e55", "explain the build");
    // A multi-root window's storage names no single folder: its chats keep none.
    let multi_storage = user_dir.join("workspaceStorage/77aa");
    chat_with_one_turn(&multi_storage, "3a11", "two folders, one chat");
    let daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let (_plugin, _) = connect(&daemon, &workspace, json!({"workspace_storage": storage}));
    let other = sandbox.workspace("other");
    let mut multi = hello(&workspace, json!({"workspace_storage": multi_storage}));
    multi["window"]["workspace_folders"] = json!([workspace, other]);
    let (_multi_plugin, _) = greet(&daemon.socket, &multi);
    sandbox.status_until("both windows' chats are read", |_| {
        sandbox.chats().len() == 2
    });
    let chats = sandbox.chats();
    let single = chats.iter().find(|c| c["chat_id"] == "5e55").unwrap();
    assert_eq!(
        single["workspace"],
        workspace.to_str().unwrap(),
        "{chats:#?}"
    );
    let multi_chat = chats.iter().find(|c| c["chat_id"] == "3a11").unwrap();
    assert!(multi_chat["workspace"].is_null(), "{chats:#?}");
}

#[test]
fn a_folder_inside_another_stores_recursive_root_shares_its_watch() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    // A Cursor window: the registry watches Cursor's workspaceStorage recursively for its
    // legacy chat panel; the window's chatSessions folder lies inside it.
    let cursor_user = sandbox.xdg_config_home().join("Cursor/User");
    let storage = workspace_storage(&cursor_user, "ee55", &workspace);
    let log = chat_with_one_turn(&storage, "0c0c", "first question");
    let daemon = sandbox.start_daemon(&["--observe-quiet-ms", "600000"]);
    let observer = Observer::start(&sandbox);
    let (plugin, session_id) = connect(&daemon, &workspace, json!({"workspace_storage": storage}));
    let chat_sessions = storage.join("chatSessions");
    let status = sandbox.status_until("the chatSessions folder is observed", |s| {
        announced_root(s, &chat_sessions, &[&session_id], 1)
    });
    let legacy = roots_at(&status, &cursor_user.join("workspaceStorage"));
    assert_eq!(legacy.len(), 1, "{status:#}");
    assert_eq!(legacy[0]["store"], "chat_history_cursor_legacy_sqlite");
    assert_eq!(legacy[0]["watched"], true);
    record_request(&log, 1, "second question");
    let seen = observer.next(Duration::from_secs(5));
    assert_eq!(seen["kind"], "prompt_seen", "{seen}");
    assert_eq!(seen["excerpt"], "second question");
    assert!(observer.nothing_within(Duration::from_millis(500)));
    drop(plugin);
    sandbox.status_until("the folder is dropped with its session", |s| {
        roots_at(s, &chat_sessions).is_empty()
    });
    record_request(&log, 2, "third question");
    assert!(observer.nothing_within(Duration::from_millis(1000)));
}

//! Chat-store observation end to end: the real daemon watches Claude Code session files that the test grows line by line in the store's real format; `koru observe --json` must show the events in order with their basis, `koru chats` the chats and their state, and the store files must be left byte-for-byte untouched.

use std::io::Write;
use std::path::Path;

use std::time::{Duration, SystemTime};

use koru_system_tests::{Observer, Sandbox};
use serde_json::Value;

fn append(path: &Path, record: &Value) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(file, "{record}").unwrap();
}

fn user(session: &str, cwd: &Path, content: Value) -> Value {
    serde_json::json!({"parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": cwd, "sessionId": session, "version": "1.0.51", "type": "user",
        "message": {"role": "user", "content": content}, "uuid": uuid(), "timestamp": "2025-07-14T10:00:00.000Z"})
}

fn assistant(session: &str, cwd: &Path, content: Value) -> Value {
    serde_json::json!({"parentUuid": null, "isSidechain": false, "cwd": cwd, "sessionId": session,
        "type": "assistant", "message": {"role": "assistant", "content": content, "stop_reason": null},
        "uuid": uuid(), "timestamp": "2025-07-14T10:00:01.000Z"})
}

fn turn_end(session: &str, cwd: &Path) -> Value {
    serde_json::json!({"cwd": cwd, "sessionId": session, "type": "system", "subtype": "turn_duration",
        "durationMs": 1000, "uuid": uuid(), "timestamp": "2025-07-14T10:00:02.000Z"})
}

fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "00000000-0000-0000-0000-{:012}",
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

fn fingerprint(paths: &[&Path]) -> Vec<(Vec<u8>, SystemTime)> {
    paths
        .iter()
        .map(|p| {
            (
                std::fs::read(p).unwrap(),
                std::fs::metadata(p).unwrap().modified().unwrap(),
            )
        })
        .collect()
}

#[test]
fn claude_code_turns_are_observed_in_order_with_their_basis_and_the_store_is_left_untouched() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let project = sandbox.claude_project_dir(&workspace);
    // History written before the daemon starts is known but not replayed as news.
    let old = project.join("old-session.jsonl");
    append(
        &old,
        &user("old-session", &workspace, "an old prompt".into()),
    );
    append(
        &old,
        &assistant(
            "old-session",
            &workspace,
            serde_json::json!([{"type": "text", "text": "old answer"}]),
        ),
    );
    append(&old, &turn_end("old-session", &workspace));

    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", "400"]);
    let observer = Observer::start(&sandbox);

    // An explicit turn, grown record by record, with a tool call in the middle.
    let session = project.join("s-explicit.jsonl");
    let prompt = "Fix the failing test\n  in parser.rs ✓";
    append(&session, &user("s-explicit", &workspace, prompt.into()));
    let first = observer.next(Duration::from_secs(5));
    assert_eq!(first["kind"], "chat_seen");
    assert_eq!(first["store"], "chat_history_claude_code_jsonl");
    assert_eq!(first["chat_id"], "s-explicit");
    assert_eq!(first["workspace"], workspace.to_str().unwrap());
    let seen = observer.next(Duration::from_secs(5));
    assert_eq!(seen["kind"], "prompt_seen");
    assert_eq!(seen["excerpt"], "Fix the failing test in parser.rs ✓");
    assert_eq!(seen["length"], prompt.chars().count());
    assert!(seen["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(seen["store_ts_ms"], 1_752_487_200_000u64);
    assert!(seen["seen_at_ms"].as_u64().unwrap() > 1_752_487_200_000u64);
    append(
        &session,
        &assistant(
            "s-explicit",
            &workspace,
            serde_json::json!([
        {"type": "text", "text": "Running the tests."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cargo test"}}]),
        ),
    );
    assert_eq!(observer.kinds(1), ["reply_started"]);
    append(
        &session,
        &user(
            "s-explicit",
            &workspace,
            serde_json::json!([
        {"type": "tool_result", "tool_use_id": "t1", "content": "1 failed"}]),
        ),
    );
    append(
        &session,
        &assistant(
            "s-explicit",
            &workspace,
            serde_json::json!([
        {"type": "text", "text": "Fixed: the test expected UTC."}]),
        ),
    );
    // A complete-looking reply is not called finished before the end record or the quiet period.
    append(&session, &turn_end("s-explicit", &workspace));
    let done = observer.next(Duration::from_secs(5));
    assert_eq!(done["kind"], "reply_completed");
    assert_eq!(done["basis"], "explicit");
    assert_eq!(done["excerpt"], "Fixed: the test expected UTC.");

    // A version that writes no end record: completion inferred after the quiet period.
    let quiet = project.join("s-quiet.jsonl");
    append(
        &quiet,
        &user("s-quiet", &workspace, "Explain the module".into()),
    );
    append(
        &quiet,
        &assistant(
            "s-quiet",
            &workspace,
            serde_json::json!([{"type": "text", "text": "It parses."}]),
        ),
    );
    assert_eq!(
        observer.kinds(4),
        [
            "chat_seen",
            "prompt_seen",
            "reply_started",
            "reply_completed (inferred)"
        ]
    );

    // An interrupted turn.
    append(
        &quiet,
        &user("s-quiet", &workspace, "Now refactor it".into()),
    );
    append(
        &quiet,
        &assistant(
            "s-quiet",
            &workspace,
            serde_json::json!([
        {"type": "tool_use", "id": "t2", "name": "Edit", "input": {}}]),
        ),
    );
    append(
        &quiet,
        &user(
            "s-quiet",
            &workspace,
            serde_json::json!([
        {"type": "text", "text": "[Request interrupted by user for tool use]"}]),
        ),
    );
    assert_eq!(
        observer.kinds(3),
        ["prompt_seen", "reply_started", "cancelled"]
    );

    // A half-written line is not data until its newline arrives.
    {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&quiet)
            .unwrap();
        let record = user("s-quiet", &workspace, "split across writes".into()).to_string();
        let (head, tail) = record.split_at(record.len() / 2);
        file.write_all(head.as_bytes()).unwrap();
        file.flush().unwrap();
        assert!(observer.nothing_within(Duration::from_millis(500)));
        file.write_all(tail.as_bytes()).unwrap();
        file.write_all(b"\n").unwrap();
    }
    let split = observer.next(Duration::from_secs(5));
    assert_eq!(split["excerpt"], "split across writes");

    // `koru chats` knows all three chats, the old one from history.
    let output = sandbox.run(&["chats", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let chats: Value = serde_json::from_slice(&output.stdout).unwrap();
    let state = |id: &str| {
        chats
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["chat_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {chats}"))["state"]
            .clone()
    };
    assert_eq!(state("old-session"), "idle");
    assert_eq!(state("s-explicit"), "idle");
    assert_eq!(state("s-quiet"), "replying");
    assert!(
        observer.nothing_within(Duration::from_millis(300)),
        "history is not replayed as news"
    );

    // Truncated and rewritten: read again from the start.
    let before = fingerprint(&[&old, &session]);
    std::fs::write(
        &quiet,
        format!(
            "{}\n",
            user("s-quiet", &workspace, "after truncation".into())
        ),
    )
    .unwrap();
    let events: Vec<Value> = (0..2)
        .map(|_| observer.next(Duration::from_secs(5)))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "prompt_seen" && e["excerpt"] == "after truncation"),
        "{events:?}"
    );

    // Koru never wrote to the store.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fingerprint(&[&old, &session]), before);
}

#[test]
fn chats_is_empty_and_says_why_when_no_store_exists() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let output = sandbox.run(&["chats"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("no chats observed"), "{text}");
}

#[test]
fn send_wait_reply_follows_the_drive_through_the_chat_history_to_the_reply() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("loop");
    let project = sandbox.claude_project_dir(&workspace);
    let _daemon = sandbox.start_daemon(&[]);
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
        "--claude-store",
        project.to_str().unwrap(),
    ]);
    let prompt = "Summarise the design\n  in three bullet points ✓";
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait-reply",
        "--timeout",
        "20",
        prompt,
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A line naming the chat, then the whole reply.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[lines.len() - 1],
        "Done: Summarise the design",
        "{stdout}"
    );
    assert!(
        lines[lines.len() - 2]
            .contains("replied (26 chars) in chat_history_claude_code_jsonl chat "),
        "{stdout}"
    );

    let drives: Value = serde_json::from_slice(&sandbox.run(&["drives", "--json"]).stdout).unwrap();
    let drive = &drives.as_array().unwrap()[0];
    assert_eq!(drive["state"], "done");
    let observation = &drive["observation"];
    assert_eq!(observation["stage"], "replied", "{drive}");
    assert_eq!(observation["store"], "chat_history_claude_code_jsonl");
    assert_eq!(observation["basis"], "explicit");
    assert_eq!(observation["reply_excerpt"], "Done: Summarise the design");

    // Without an observed store the wait ends with a clear reason, not a hang.
    let elsewhere = sandbox.workspace("unobserved");
    let _other = sandbox.start_fake_plugin(&["--workspace", elsewhere.to_str().unwrap()]);
    let output = sandbox.run(&[
        "send",
        "--workspace",
        elsewhere.to_str().unwrap(),
        "--wait-reply",
        "--timeout",
        "1",
        "nobody records this",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no chat history showed the prompt before the wait ran out"),
        "{stderr}"
    );
}

#[test]
fn claude_code_hooks_report_what_the_transcript_never_records() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("hooked");
    // No daemon: the hook never fails Claude Code.
    let hook = |input: &Value| {
        sandbox.run_with_stdin(&["hook", "claude-code"], input.to_string().as_bytes())
    };
    let permission = serde_json::json!({"session_id": "s-hook", "cwd": workspace,
        "hook_event_name": "Notification", "notification_type": "permission_prompt",
        "message": "Claude needs your permission to use Bash",
        "transcript_path": "/nowhere.jsonl"});
    let output = hook(&permission);
    assert!(output.status.success());
    assert!(output.stdout.is_empty(), "a hook prints nothing on stdout");
    // Nor on stderr (agents show it to the user): its failure goes to the hook log.
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let log = std::fs::read_to_string(sandbox.path().join("state/koru/hook-errors.log")).unwrap();
    assert!(log.contains("koru hook claude-code: no daemon at"), "{log}");

    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start(&sandbox);
    assert!(hook(&permission).status.success());
    let event = observer.next(Duration::from_secs(5));
    assert_eq!(event["kind"], "needs_input");
    assert_eq!(event["input"], "permission");
    assert_eq!(event["chat_id"], "s-hook");
    let chats: Value = serde_json::from_slice(&sandbox.run(&["chats", "--json"]).stdout).unwrap();
    assert_eq!(chats[0]["state"], "needs_input");

    // Stop ends the turn; the same end reported twice is news once.
    let stop = serde_json::json!({"session_id": "s-hook", "cwd": workspace, "hook_event_name": "Stop",
        "stop_hook_active": false, "last_assistant_message": "Done."});
    assert!(hook(&stop).status.success());
    assert!(hook(&stop).status.success());
    let event = observer.next(Duration::from_secs(5));
    assert_eq!(event["kind"], "reply_completed");
    assert_eq!(event["excerpt"], "Done.");
    assert!(observer.nothing_within(Duration::from_millis(500)));
    let chats: Value = serde_json::from_slice(&sandbox.run(&["chats", "--json"]).stdout).unwrap();
    assert_eq!(chats[0]["state"], "idle");

    let config = sandbox.run(&["hook", "claude-code", "--print-config"]);
    let snippet: Value = serde_json::from_slice(&config.stdout).unwrap();
    let command = snippet["hooks"]["Notification"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(command.ends_with("koru hook claude-code"), "{command}");
}

#[test]
fn codex_rollouts_are_observed_with_the_same_vocabulary() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("codex");
    let day = sandbox.path().join("home/.codex/sessions/2026/03/01");
    std::fs::create_dir_all(&day).unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let observer = Observer::start(&sandbox);
    let rollout = day.join("rollout-2026-03-01T10-00-00-0198c4cf-8587.jsonl");
    let line = |record: Value| append(&rollout, &record);
    line(
        serde_json::json!({"timestamp": "2026-03-01T10:00:00.100Z", "type": "session_meta",
        "payload": {"id": "0198c4cf-8587", "cwd": workspace, "originator": "codex_cli_rs", "cli_version": "0.110.0"}}),
    );
    line(
        serde_json::json!({"timestamp": "2026-03-01T10:00:01.000Z", "type": "event_msg",
        "payload": {"type": "task_started", "turn_id": "t1"}}),
    );
    line(
        serde_json::json!({"timestamp": "2026-03-01T10:00:01.010Z", "type": "event_msg",
        "payload": {"type": "user_message", "message": "fix the failing test", "images": []}}),
    );
    line(
        serde_json::json!({"timestamp": "2026-03-01T10:00:20.001Z", "type": "event_msg",
        "payload": {"type": "agent_message", "message": "Fixed: off-by-one in parse().", "phase": "final_answer"}}),
    );
    line(
        serde_json::json!({"timestamp": "2026-03-01T10:00:20.050Z", "type": "event_msg",
        "payload": {"type": "task_complete", "turn_id": "t1", "last_agent_message": "Fixed: off-by-one in parse()."}}),
    );
    let events: Vec<Value> = (0..4)
        .map(|_| observer.next(Duration::from_secs(5)))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "chat_seen",
            "prompt_seen",
            "reply_started",
            "reply_completed"
        ]
    );
    assert!(events
        .iter()
        .all(|e| e["store"] == "chat_history_codex_jsonl"));
    assert!(events.iter().all(|e| e["chat_id"] == "0198c4cf-8587"));
    assert_eq!(events[1]["workspace"], workspace.to_str().unwrap());
    assert_eq!(events[3]["excerpt"], "Fixed: off-by-one in parse().");
    let before = fingerprint(&[&rollout]);
    // Files that are not rollouts are not read.
    append(
        &day.join("notes.jsonl"),
        &serde_json::json!({"type": "event_msg"}),
    );
    assert!(observer.nothing_within(Duration::from_millis(300)));
    assert_eq!(
        before,
        fingerprint(&[&rollout]),
        "the rollout is never written"
    );
}

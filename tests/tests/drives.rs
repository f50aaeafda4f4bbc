//! Sessions and drives through the CLI and the reference fake plugin: listing, every ack stage, failures, timeouts, cancel, queueing, heartbeats, slow readers.

use std::time::{Duration, Instant};

use koru_system_tests::{
    attempt_outcomes, controller_hello, drive_history, greet, plugin_hello, stages_printed, Sandbox,
};
use serde_json::{json, Value};

fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn sessions_lists_each_plugin_with_its_hello() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("listed");
    let plugin = sandbox.start_fake_plugin(&[
        "--product",
        "jetbrains-pycharm",
        "--workspace",
        workspace.to_str().unwrap(),
        "--window-pid",
        "4321",
    ]);
    let sessions = json_of(&sandbox.run(&["sessions", "--json"]));
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    let session = &sessions[0];
    assert_eq!(session["session_id"], plugin.session_id);
    assert_eq!(session["ide"]["product"], "jetbrains-pycharm");
    assert_eq!(session["window"]["pid"], 4321);
    assert_eq!(
        session["window"]["workspace_folders"],
        json!([workspace.to_str().unwrap()])
    );
    assert_eq!(session["health"], "active");
    assert_eq!(session["peer_pid"], plugin.child.id());

    let table = sandbox.run(&["sessions"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("SESSION"), "{text}");
    assert!(
        text.contains("jetbrains-pycharm") && text.contains(workspace.to_str().unwrap()),
        "{text}"
    );
}

#[test]
fn a_fake_plugin_started_before_its_workspace_folder_exists_claims_it_once_it_is_made() {
    // As a script does: the plugin started, the folder made a moment later.
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let made_later = sandbox.path().join("ws").join("made-later");
    let maker = {
        let dir = made_later.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::create_dir_all(&dir).unwrap();
        })
    };
    let plugin = sandbox.start_fake_plugin(&["--workspace", made_later.to_str().unwrap()]);
    maker.join().unwrap();
    let sessions = json_of(&sandbox.run(&["sessions", "--json"]));
    let session = &sessions.as_array().unwrap()[0];
    assert_eq!(session["session_id"], plugin.session_id);
    assert_eq!(
        session["window"]["workspace_folders"],
        json!([made_later.canonicalize().unwrap().to_str().unwrap()])
    );
}

/// A registry layer for the daemon that leaves VS Code only its plugin drive (focus, paste,
/// submit command), so that a drive goes through every stage.
fn plugin_drive_only(sandbox: &Sandbox) -> String {
    let path = sandbox.path().join("plugin-drive-only.yaml");
    std::fs::write(
        &path,
        "interfaces:\n  - id: vscode_native_chat_open\n    enabled: false\n",
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn send_wait_delivers_a_prompt_through_every_stage_byte_exact() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--registry", &plugin_drive_only(&sandbox)]);
    let workspace = sandbox.workspace("repo");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    let prompt = "Fix the failing test.\n\tLine two: ünïcödé ✓ — 日本語 🚀\n\nEnd.";
    let folder = workspace.join("src");
    let output = sandbox.run_with_stdin(
        &[
            "send",
            "--workspace",
            folder.to_str().unwrap(),
            "--wait",
            "-",
        ],
        prompt.as_bytes(),
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        stages_printed(&output),
        [
            "queued",
            "sent",
            "received",
            "focused",
            "pasted",
            "submitted",
            "done"
        ]
    );
    let received: Value =
        serde_json::from_str(std::fs::read_to_string(&record).unwrap().trim()).unwrap();
    assert_eq!(received["prompt"], prompt);
    assert_eq!(received["submit"], true);
    assert_eq!(
        received["steps"],
        json!([
            "workbench.action.chat.focusInput",
            "editor.action.clipboardPasteAction",
            "workbench.action.chat.submit"
        ])
    );

    let drives = json_of(&sandbox.run(&["drives", "--json"]));
    assert_eq!(drives[0]["state"], "done");
    assert_eq!(drives[0]["prompt_chars"], prompt.chars().count());
    assert_eq!(drives[0]["verification"], "acked");
    // Only the submit command returned: nothing from a chat confirmed it.
    assert_eq!(drives[0]["submit_evidence"], "command_returned");
}

#[test]
fn a_cursor_drive_whose_submit_key_cannot_be_pressed_ends_failed_at_pasted_never_done() {
    // No display at all (the sandbox clears DISPLAY and WAYLAND_DISPLAY): the plugin pastes,
    // and no injector can press Return for it. The registry keeps the current chat (no
    // new chat in its place).
    let sandbox = Sandbox::new();
    let current_chat_only = sandbox.path().join("current-chat-only.yaml");
    std::fs::write(
        &current_chat_only,
        "policy:\n  products:\n    cursor: {new_chat_when_key_unpressable: false}\n",
    )
    .unwrap();
    let _daemon = sandbox.start_daemon(&["--registry", current_chat_only.to_str().unwrap()]);
    let workspace = sandbox.workspace("cursor-repo");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "cursor",
        "--workspace",
        workspace.to_str().unwrap(),
        "--focused",
        "--record",
        record.to_str().unwrap(),
    ]);
    let output = sandbox.run(&["send", "--ide", "cursor", "--wait", "Fix the bug ✓"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        stages_printed(&output),
        ["queued", "sent", "received", "focused", "pasted", "failed"]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no OS injector can press the submit key here")
            && stderr.contains("the submit key was not pressed")
            && stderr.contains("Let Koru press Enter"),
        "{stderr}"
    );
    // The plugin was asked to paste only: Cursor has no submit command.
    let received: Value =
        serde_json::from_str(std::fs::read_to_string(&record).unwrap().trim()).unwrap();
    assert_eq!(received["submit"], false);
    assert_eq!(
        received["steps"],
        json!([
            "composer.focusComposer",
            "editor.action.clipboardPasteAction"
        ])
    );
    let drives = json_of(&sandbox.run(&["drives", "--json"]));
    let drive = &drives[0];
    assert_eq!(drive["state"], "failed");
    assert!(drive.get("submit_evidence").is_none(), "{drive}");
    assert!(
        ["no_display", "injector_missing"].contains(&drive["blocker"]["code"].as_str().unwrap()),
        "{drive}"
    );
    let attempts = attempt_outcomes(drive);
    assert_eq!(
        attempts[..2],
        [
            "cursor_native_new_chat skipped",
            "cursor_plugin_drive failed"
        ]
    );
    assert!(
        attempts[2..].iter().all(|a| a.ends_with("not_tried")),
        "{attempts:?}"
    );
    assert_eq!(drive["attempts"][1]["reached"], "pasted");
    assert!(
        drive["attempts"][1]["hint"]
            .as_str()
            .unwrap()
            .starts_with("Let Koru press Enter: The prompt is in Cursor's chat input, unsent"),
        "{drive}"
    );
}

#[test]
fn where_nothing_can_press_return_a_cursor_drive_is_sent_in_a_new_chat_and_says_so() {
    // The shipped registry, no display (the sandbox clears DISPLAY and WAYLAND_DISPLAY):
    // Cursor's new-chat command sends the prompt instead of a paste nobody can submit.
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("cursor-repo");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "cursor",
        "--workspace",
        workspace.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    let output = sandbox.run(&["send", "--ide", "cursor", "--wait", "Fix the bug ✓"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stages_printed(&output),
        ["queued", "sent", "received", "submitted", "done"]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("via cursor_native_new_chat")
            && stderr
                .contains("opened a new chat: nothing here can press Return in the current one"),
        "{stderr}"
    );
    // The plugin was asked to run Cursor's new-chat call with the prompt, submitting.
    let received: Value =
        serde_json::from_str(std::fs::read_to_string(&record).unwrap().trim()).unwrap();
    assert_eq!(received["route"], "native_send");
    assert_eq!(received["submit"], true);
    assert_eq!(received["prompt"], "Fix the bug ✓");
    assert_eq!(received["steps"], json!(["composer.createNew"]));
    let drives = json_of(&sandbox.run(&["drives", "--json"]));
    let drive = &drives[0];
    assert_eq!(drive["state"], "done");
    assert_eq!(drive["submit_evidence"], "command_returned");
    assert_eq!(
        drive["options"]["new_chat"], false,
        "as the controller asked"
    );
    assert_eq!(drive["attempts"][0]["interface"], "cursor_native_new_chat");
    assert_eq!(drive["attempts"][0]["outcome"], "succeeded");
    let note = drive["attempts"][0]["note"].as_str().unwrap();
    assert!(
        note.starts_with("opened a new chat: nothing here can press Return in the current one (")
            && ["no_display", "injector_missing"]
                .iter()
                .any(|code| note.contains(code)),
        "{note}"
    );
}

#[test]
fn a_step_whose_command_the_ide_lacks_fails_the_route_and_the_next_one_is_tried() {
    // The IDE has the route's required commands but not the paste command: the plugin
    // fails at that step (nothing pasted), so the planner may go on to the next route.
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--registry", &plugin_drive_only(&sandbox)]);
    let workspace = sandbox.workspace("no-paste");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--without-command",
        "editor.action.clipboardPasteAction",
    ]);
    let output = sandbox.run(&["send", "--wait", "--json", "paste me"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let drive = json_of(&output);
    let attempt = &drive["attempts"][0];
    assert_eq!(attempt["interface"], "vscode_plugin_drive");
    assert_eq!(attempt["outcome"], "failed");
    assert_eq!(attempt["reached"], "focused");
    assert_eq!(
        attempt["blocker"]["detail"],
        "editor.action.clipboardPasteAction failed: command 'editor.action.clipboardPasteAction' not found"
    );
    // Nothing was pasted, so the OS-injection routes were tried (and skipped here: no display).
    assert!(
        drive["attempts"].as_array().unwrap()[1..]
            .iter()
            .all(|a| a["outcome"] == "skipped"),
        "{drive}"
    );
}

#[test]
fn no_submit_ends_done_at_pasted() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("draft");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    let output = sandbox.run(&["send", "--no-submit", "--wait", "--json", "draft"]);
    assert!(output.status.success(), "{output:?}");
    let drive = json_of(&output);
    assert_eq!(
        drive_history(&drive),
        ["queued", "sent", "received", "pasted", "done"]
    );
    assert!(std::fs::read_to_string(&record)
        .unwrap()
        .contains("\"submit\":false"));
}

#[test]
fn a_plugin_that_drops_mid_drive_fails_the_drive_with_plugin_disconnected() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("dropping");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "drop",
    ]);
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait",
        "lost",
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("failed: plugin_disconnected"), "{stderr}");
    let drives = json_of(&sandbox.run(&["drives", "--json"]));
    assert_eq!(drives[0]["state"], "failed");
    assert_eq!(drives[0]["blocker"]["code"], "plugin_disconnected");
    // The session is gone too.
    assert!(sandbox.session_ids().is_empty());
}

#[test]
fn a_nacking_plugin_fails_the_drive_with_its_blocker() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("nack");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "nack",
    ]);
    let output = sandbox.run(&["send", "--ide", "vscode", "--wait", "refused"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "failed: capability_missing: fake plugin (--behaviour nack) refuses every drive"
        ),
        "{stderr}"
    );
}

#[test]
fn a_drive_without_a_terminal_ack_times_out() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("slow");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "slow",
        "--delay-ms",
        "5000",
    ]);
    let started = Instant::now();
    let output = sandbox.run(&["send", "--wait", "--timeout", "0.5", "too slow"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(started.elapsed() < Duration::from_secs(4));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("timed_out: timeout: no terminal ack within 500 ms"),
        "{stderr}"
    );
}

#[test]
fn cancel_ends_a_running_drive_and_a_second_cancel_is_refused() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("cancel");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "slow",
        "--delay-ms",
        "5000",
    ]);
    let created = json_of(&sandbox.run(&["send", "--json", "cancel me"]));
    let drive_id = created["drive_id"].as_str().unwrap();
    let cancelled = json_of(&sandbox.run(&["cancel", drive_id, "--json"]));
    assert_eq!(cancelled["state"], "cancelled");
    let again = sandbox.run(&["cancel", drive_id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("drive_finished"));
    let listed = json_of(&sandbox.run(&["drives", "--json"]));
    assert_eq!(listed[0]["state"], "cancelled");
}

#[test]
fn drives_to_one_session_run_one_at_a_time_in_order() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("queue");
    let record = sandbox.path().join("order.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "slow",
        "--delay-ms",
        "50",
        "--record",
        record.to_str().unwrap(),
    ]);
    let ids: Vec<String> = (0..3)
        .map(|n| {
            let created = json_of(&sandbox.run(&["send", "--json", &format!("prompt {n}")]));
            created["drive_id"].as_str().unwrap().to_string()
        })
        .collect();
    let active = json_of(&sandbox.run(&["drives", "--active", "--json"]));
    let running = active
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["state"] != "queued")
        .count();
    assert!(
        running <= 1,
        "only one drive per session may be in flight: {active}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let drives = json_of(&sandbox.run(&["drives", "--json"]));
        if drives
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "done")
        {
            break;
        }
        assert!(Instant::now() < deadline, "drives did not finish: {drives}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let order: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["drive_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(order, ids);
}

#[test]
fn an_ambiguous_or_missing_target_is_refused_with_the_candidates() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("twice");
    let a = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let b = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "which one?",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ambiguous_target"), "{stderr}");
    assert!(
        stderr.contains(&a.session_id) && stderr.contains(&b.session_id),
        "{stderr}"
    );
    let missing = sandbox.run(&["send", "--ide", "windsurf", "anyone?"]);
    assert!(String::from_utf8_lossy(&missing.stderr)
        .contains("no_target: no windsurf plugin is connected"));
    assert!(json_of(&sandbox.run(&["drives", "--json"]))
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn a_plugin_that_misses_heartbeats_goes_stale_then_is_dropped() {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&["--heartbeat-ms", "200"]);
    let workspace = sandbox.workspace("mute");
    // Subscribed first: on a busy machine starting the plugins takes longer than the
    // two missed heartbeats that make the mute one stale.
    let (mut watcher, _) = greet(&daemon.socket, &controller_hello());
    watcher.send(&json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    watcher.recv_type("events.subscribed");
    let mute = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "mute",
    ]);
    let alive = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let mut saw_stale = false;
    loop {
        let line = watcher.recv_type("stream");
        let event = &line["event"];
        if event["kind"] == "session_updated"
            && event["session"]["session_id"] == mute.session_id.as_str()
        {
            saw_stale |= event["session"]["health"] == "stale";
        }
        if event["kind"] == "session_disconnected" {
            assert_eq!(event["session_id"], mute.session_id.as_str());
            assert_eq!(event["reason"], "missed heartbeats");
            break;
        }
    }
    assert!(
        saw_stale,
        "the session must be marked stale before it is dropped"
    );
    assert_eq!(sandbox.session_ids(), vec![alive.session_id.clone()]);
}

#[test]
fn a_slow_reader_is_disconnected_and_never_stalls_others() {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&["--outbound-queue", "16"]);
    let workspace = sandbox.workspace("flood");
    // A controller that subscribes and then never reads.
    let (mut sleeper, _) = greet(&daemon.socket, &controller_hello());
    sleeper.send(&json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    // A plugin that produces a flood of events (each one a stream line for the sleeper).
    let (mut noisy, _) = greet(&daemon.socket, &plugin_hello("vscode", &workspace));
    let fake = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let event_line = format!(
        "{}\n",
        json!({"v": 1, "type": "event", "event": {"kind": "workspace_changed", "workspace_folders": [workspace.to_str().unwrap(), "x".repeat(2000)]}})
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !daemon.log_text().contains("slow reader")
        && !daemon.log_text().contains("stopped reading")
    {
        for _ in 0..200 {
            noisy.send_bytes(event_line.as_bytes()).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the slow reader was never disconnected:\n{}",
            daemon.log_text()
        );
    }
    // Everyone else is still served promptly.
    let started = Instant::now();
    let output = sandbox.run(&[
        "send",
        "--session",
        &fake.session_id,
        "--wait",
        "still fine",
    ]);
    assert!(output.status.success(), "{output:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let status = json_of(&sandbox.run(&["status", "--json"]));
    // The only controller left is the `koru status` call itself.
    assert_eq!(
        status["controllers"], 1,
        "the slow reader's session is gone: {status}"
    );
}

#[test]
fn a_drive_to_a_chat_that_is_not_ready_waits_until_it_is_or_fails_with_chat_not_ready() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    // The fake's emulation of a chat with no model, which becomes ready 800 ms later.
    let later = sandbox.workspace("later");
    let record = sandbox.path().join("later.jsonl");
    let _ready_later = sandbox.start_fake_plugin(&[
        "--workspace",
        later.to_str().unwrap(),
        "--chat-not-ready",
        "no language model selected",
        "--ready-after-ms",
        "800",
        "--record",
        record.to_str().unwrap(),
    ]);
    let created = json_of(&sandbox.run(&[
        "send",
        "--workspace",
        later.to_str().unwrap(),
        "--json",
        "wait for the model",
    ]));
    let drive_id = created["drive_id"].as_str().unwrap().to_string();
    let waiting = json_of(&sandbox.run(&["drives", "--json"]));
    assert_eq!(waiting[0]["state"], "queued", "{waiting}");
    assert_eq!(waiting[0]["waiting"]["code"], "chat_not_ready");
    assert!(
        waiting[0]["waiting"]["detail"]
            .as_str()
            .unwrap()
            .contains("no language model selected"),
        "{waiting}"
    );
    assert!(
        !record.exists(),
        "nothing is sent into a chat that is not ready"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let drives = json_of(&sandbox.run(&["drives", "--json"]));
        if drives[0]["state"] == "done" {
            assert_eq!(drives[0]["drive_id"], drive_id.as_str());
            break;
        }
        assert!(Instant::now() < deadline, "the drive never went: {drives}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(record.exists(), "sent once the chat became ready");

    // A chat that never becomes ready: the drive fails at its deadline, never sent.
    let never = sandbox.workspace("never");
    let _never_ready = sandbox.start_fake_plugin(&[
        "--workspace",
        never.to_str().unwrap(),
        "--chat-not-ready",
        "signed out",
    ]);
    let output = sandbox.run(&[
        "send",
        "--workspace",
        never.to_str().unwrap(),
        "--wait",
        "--timeout",
        "0.5",
        "--json",
        "never sent",
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let drive = json_of(&output);
    assert_eq!(drive["state"], "failed");
    assert_eq!(drive["blocker"]["code"], "chat_not_ready");
    assert_eq!(drive_history(&drive), ["queued", "failed"]);
}

//! What the real daemon and CLI make of the chat's own word about a drive: submit evidence, refusals, a chat that is not ready, outcomes reported through the plugin, and remote windows as targets — with a scripted protocol peer on the plugin side of the socket.

use std::process::{Child, Output};
use std::time::Duration;

use koru_system_tests::{greet, plugin_hello, stdout_json, Raw, Sandbox};
use serde_json::{json, Value};

fn finish(child: Child) -> (Output, String, String) {
    let output = child.wait_with_output().expect("koru ends");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

fn ack(plugin: &mut Raw, drive_id: &Value, stage: &str, extra: Value) {
    let mut line = json!({"v": 1, "type": "ack", "drive_id": drive_id, "stage": stage});
    if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
        line.extend(extra.clone());
    }
    plugin.send(&line);
}

fn event(plugin: &mut Raw, event: Value) {
    plugin.send(&json!({"v": 1, "type": "event", "event": event}));
}

/// `koru send --workspace TARGET --wait-reply PROMPT` in the background; the window takes
/// the drive and acks `received`, then `submitted` with `evidence`. Returns the running
/// command and the drive the window got.
fn send_wait_reply_submitted(
    sandbox: &Sandbox,
    plugin: &mut Raw,
    target: &str,
    prompt: &str,
    evidence: &str,
) -> (Child, Value) {
    let send = sandbox.spawn(&[
        "send",
        "--workspace",
        target,
        "--wait-reply",
        "--timeout",
        "10",
        prompt,
    ]);
    let drive = plugin.recv_type("drive");
    ack(plugin, &drive["drive_id"], "received", json!({}));
    ack(
        plugin,
        &drive["drive_id"],
        "submitted",
        json!({"evidence": evidence}),
    );
    (send, drive)
}

fn drives(sandbox: &Sandbox) -> Vec<Value> {
    let listed = stdout_json(&sandbox.run(&["drives", "--json"]));
    listed.as_array().cloned().unwrap_or_default()
}

/// A code-server window whose plugin runs the native route.
fn code_server_window(sandbox: &Sandbox, workspace: &std::path::Path, chat: Option<Value>) -> Raw {
    let mut hello = plugin_hello("code-server", workspace);
    if let Some(chat) = chat {
        hello["chat"] = chat;
    }
    let (plugin, _) = greet(&sandbox.socket(), &hello);
    plugin
}

#[test]
fn a_refusing_chat_ends_the_drive_failed_with_its_own_message_and_never_done() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let workspace = sandbox.workspace("refused");
    let mut plugin = code_server_window(&sandbox, &workspace, None);
    let send = sandbox.spawn(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait",
        "hello",
    ]);
    let drive = plugin.recv_type("drive");
    assert_eq!(drive["route"], "native_send");
    ack(&mut plugin, &drive["drive_id"], "received", json!({}));
    ack(
        &mut plugin,
        &drive["drive_id"],
        "failed",
        json!({"blocker": {"code": "chat_refused", "detail": "Language model unavailable"}}),
    );
    let (output, stdout, stderr) = finish(send);
    assert!(!output.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("failed: chat_refused: Language model unavailable"),
        "{stderr}"
    );
    assert!(!stdout.contains(" done "), "{stdout}");
    plugin.set_read_timeout(Duration::from_millis(500));
    assert!(
        plugin.recv().is_none_or(|line| line["type"] != "drive"),
        "no other route after a refusal"
    );
    let listed = drives(&sandbox);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["state"], "failed");
    assert_eq!(listed[0]["blocker"]["code"], "chat_refused");
}

#[test]
fn a_chat_that_is_not_ready_gets_nothing_and_the_drive_fails_with_chat_not_ready_and_the_hint() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let workspace = sandbox.workspace("not-ready");
    let mut plugin = code_server_window(
        &sandbox,
        &workspace,
        Some(json!({"ready": false, "reason": "no language model is available to the chat"})),
    );
    let (output, stdout, stderr) = finish(sandbox.spawn(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait",
        "--timeout",
        "1",
        "hello",
    ]));
    assert!(!output.status.success());
    assert!(
        stderr.contains("koru: chat_not_ready — waits: the window's chat cannot take a request now (no language model is available to the chat)"),
        "the wait is explained while it lasts: {stderr}"
    );
    assert!(
        stderr.contains("failed: chat_not_ready:") && stderr.contains("Sign in or pick a model"),
        "{stderr}"
    );
    assert!(!stdout.contains(" done "), "{stdout}");
    plugin.set_read_timeout(Duration::from_millis(300));
    while let Some(line) = plugin.recv() {
        assert_ne!(
            line["type"], "drive",
            "nothing is sent into a chat that would refuse it"
        );
    }
    let doctor = sandbox.run(&["doctor"]);
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor.contains("chat: NOT READY — no language model is available to the chat"),
        "{doctor}"
    );
}

#[test]
fn a_chat_that_becomes_ready_takes_the_waiting_drive() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let workspace = sandbox.workspace("becomes-ready");
    let mut plugin = code_server_window(
        &sandbox,
        &workspace,
        Some(json!({"ready": false, "reason": "starting"})),
    );
    let created = stdout_json(&sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--json",
        "hello",
    ]));
    assert_eq!(created["state"], "queued");
    let listed = drives(&sandbox);
    assert_eq!(listed[0]["waiting"]["code"], "chat_not_ready");
    event(
        &mut plugin,
        json!({"kind": "chat_readiness", "ready": true}),
    );
    let drive = plugin.recv_type("drive");
    assert_eq!(drive["drive_id"], created["drive_id"]);
    assert!(drives(&sandbox)[0].get("waiting").is_none());
}

#[test]
fn the_chats_outcome_through_the_plugin_settles_wait_reply_with_no_observer_at_all() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let workspace = sandbox.workspace("outcome");
    let mut plugin = code_server_window(&sandbox, &workspace, Some(json!({"ready": true})));
    let target = workspace.to_str().unwrap();

    // A reply: evidence `chat_running` at submit, the reply's end later.
    let (send, drive) =
        send_wait_reply_submitted(&sandbox, &mut plugin, target, "first", "chat_running");
    std::thread::sleep(Duration::from_millis(200));
    event(
        &mut plugin,
        json!({"kind": "chat_outcome", "drive_id": drive["drive_id"], "outcome": {"kind": "reply_completed"}}),
    );
    let (output, stdout, stderr) = finish(send);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("koru: submitted: chat_running"), "{stderr}");
    assert!(
        stdout.contains("replied (the chat finished its answer"),
        "{stdout}"
    );
    let listed = drives(&sandbox);
    assert_eq!(listed[0]["submit_evidence"], "chat_running");
    assert_eq!(listed[0]["observation"]["stage"], "replied");
    assert_eq!(listed[0]["observation"]["store"], "plugin");

    // A pause for the user: --wait-reply ends, not zero, saying what the chat waits for.
    let (send, drive) =
        send_wait_reply_submitted(&sandbox, &mut plugin, target, "second", "chat_responded");
    event(
        &mut plugin,
        json!({"kind": "chat_outcome", "drive_id": drive["drive_id"],
               "outcome": {"kind": "needs_input", "input": "permission", "detail": "run_in_terminal waits for approval"}}),
    );
    let (output, _, stderr) = finish(send);
    assert!(!output.status.success());
    assert!(
        stderr.contains("needs_input in the window's chat (as its plugin reports): run_in_terminal waits for approval"),
        "{stderr}"
    );
    let sessions = stdout_json(&sandbox.run(&["sessions", "--json"]));
    assert_eq!(
        sessions[0]["chat"], "busy",
        "a chat waiting for the user is busy"
    );
}

#[test]
fn a_remote_windows_folder_is_a_target_by_uri_or_short_form() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let local = sandbox.workspace("local");
    let mut hello = plugin_hello("vscode", &local);
    hello["window"]["workspace_folders"] = json!([]);
    hello["window"]["remote_name"] = json!("ssh-remote");
    hello["window"]["workspace_uris"] = json!(["vscode-remote://ssh-remote+box/home/me/repo"]);
    let (mut remote, welcome) = greet(&sandbox.socket(), &hello);
    for target in [
        "ssh-remote+box:/home/me/repo/src",
        "vscode-remote://ssh-remote+box/home/me/repo",
    ] {
        let created = stdout_json(&sandbox.run(&["send", "--workspace", target, "--json", "hi"]));
        assert_eq!(created["session_id"], welcome["session_id"], "{target}");
        let drive = remote.recv_type("drive");
        assert_eq!(drive["drive_id"], created["drive_id"]);
        ack(
            &mut remote,
            &drive["drive_id"],
            "failed",
            json!({"blocker": {"code": "capability_missing", "detail": "test"}}),
        );
    }
    let other = sandbox.run(&[
        "send",
        "--workspace",
        "ssh-remote+other:/home/me/repo",
        "hi",
    ]);
    assert!(!other.status.success());
    assert!(String::from_utf8_lossy(&other.stderr).contains("no_target"));
}

#[test]
fn the_first_prompt_into_a_fresh_window_whose_model_is_not_usable_yet_is_sent_again_and_gets_in_once(
) {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let workspace = sandbox.workspace("fresh-window");
    let record = sandbox.path().join("received.jsonl");
    // A fresh window: its chat lists a model (ready at hello) but refuses every request as
    // "Language model unavailable" for its first 2.5 s.
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "code-server",
        "--workspace",
        workspace.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
        "--model-usable-after-ms",
        "2500",
    ]);
    let prompt = "The first prompt ✓\n  «two» \t日本語";
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait",
        "--json",
        "--timeout",
        "30",
        prompt,
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    let drive = stdout_json(&output);
    assert_eq!(drive["state"], "done", "{drive:#}");
    // Every send is in the drive's history: the refused ones, then the one the chat took.
    let attempts: Vec<(String, String)> = drive["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["route"].as_str().unwrap().to_string(),
                a["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let refused = attempts.len() - 1;
    assert!(refused >= 1, "{attempts:?}");
    assert!(
        attempts[..refused]
            .iter()
            .all(|(route, outcome)| route == "native_send" && outcome == "failed"),
        "{attempts:?}"
    );
    assert_eq!(
        attempts[refused],
        ("native_send".to_string(), "succeeded".to_string())
    );
    assert!(drive["attempts"][0]["blocker"]["detail"]
        .as_str()
        .unwrap()
        .contains("Language model unavailable"));
    // The fake window was sent the same prompt once per attempt, byte-exact each time.
    let received: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(received.len(), attempts.len());
    assert!(received.iter().all(|r| r["prompt"] == prompt));
}

//! System tests of the daemon's bounded queues: a session holding `--max-queued-drives` drives refuses the next with `queue_full` (nothing queued), while other sessions keep being served.

use koru_system_tests::{controller_hello, greet, plugin_hello, Sandbox};
use serde_json::{json, Value};

fn create(id: i64, workspace: &str, prompt: &str) -> Value {
    json!({"v": 1, "id": id, "type": "drive.create", "target": {"workspace": workspace}, "prompt": prompt})
}

#[test]
fn a_flood_at_one_session_is_refused_past_its_cap_and_another_session_is_still_served() {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&["--max-queued-drives", "5"]);
    let busy = sandbox.workspace("busy");
    let free = sandbox.workspace("free");
    // A plugin that takes drives and never acks them: its drives stay running and queued.
    let (_busy_plugin, _) = greet(&daemon.socket, &plugin_hello("vscode", &busy));
    let (_free_plugin, _) = greet(&daemon.socket, &plugin_hello("vscode", &free));
    let (mut controller, _) = greet(&daemon.socket, &controller_hello());
    let busy = busy.to_string_lossy().into_owned();
    for id in 1..=20 {
        controller.send(&create(id, &busy, &format!("flood {id}")));
    }
    let mut accepted = 0;
    let mut refusals = Vec::new();
    while accepted + refusals.len() < 20 {
        let line = controller.recv().expect("the daemon answers every request");
        match line["type"].as_str() {
            Some("drive.result") => accepted += 1,
            Some("error") => refusals.push(line),
            _ => {}
        }
    }
    assert_eq!(accepted, 5, "the session takes drives up to its cap");
    assert_eq!(refusals.len(), 15);
    for refusal in &refusals {
        assert_eq!(refusal["code"], "queue_full", "{refusal}");
        let message = refusal["message"].as_str().unwrap();
        assert!(message.contains("--max-queued-drives 5"), "{message}");
    }
    // The refused ones were never queued: the session holds exactly five.
    controller.send(&json!({"v": 1, "id": 100, "type": "sessions.list"}));
    let sessions = controller.recv_type("sessions.list.result");
    let busy_session = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["window"]["workspace_folders"][0] == busy.as_str())
        .expect("the busy session is listed")
        .clone();
    assert_eq!(busy_session["queued_drives"], 4, "{busy_session}");
    // Another session is not held by the first one's cap.
    controller.send(&create(101, &free.to_string_lossy(), "still served"));
    let answer = controller.recv_type("drive.result");
    assert_eq!(answer["id"], 101);
}

//! Desktop notifications through the real daemon: a stand-in org.freedesktop.Notifications service on a private session bus (this test's own) records every `Notify` and can press a button (`ActionInvoked`); a scripted plugin window drives the daemon. A drive whose chat then waits for input gets exactly one notification; a refused drive gets one with Retry, and pressing it runs `retry_drive`, logged and journaled as asked through the door `notification`; a storm of failures is held to the rate limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use koru_system_tests::{greet, plugin_hello, stdout_json, Raw, Sandbox, SessionBus};
use serde_json::{json, Value};
use zbus::object_server::SignalEmitter;
use zbus::zvariant::OwnedValue;

/// One `Notify` call as the stand-in saw it.
#[derive(Debug, Clone)]
struct NotifyCall {
    app_name: String,
    replaces_id: u32,
    summary: String,
    body: String,
    /// Keys and labels, alternating, as the spec sends them.
    actions: Vec<String>,
    urgency: Option<u8>,
    /// The id the stand-in gave it.
    id: u32,
}

/// A stand-in for the desktop's notification service, served by this test.
#[derive(Clone, Default)]
struct StandInNotifications {
    calls: Arc<Mutex<Vec<NotifyCall>>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl StandInNotifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        app_name: String,
        replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        hints: HashMap<String, OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let mut calls = self.calls.lock().unwrap();
        let id = if replaces_id != 0 {
            replaces_id
        } else {
            calls.len() as u32 + 1
        };
        calls.push(NotifyCall {
            app_name,
            replaces_id,
            summary,
            body,
            actions,
            urgency: hints.get("urgency").and_then(|v| u8::try_from(v).ok()),
            id,
        });
        id
    }

    fn close_notification(&self, _id: u32) {}

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".into(), "body".into(), "body-markup".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "stand-in".into(),
            "koru tests".into(),
            "1.0".into(),
            "1.2".into(),
        )
    }

    #[zbus(signal)]
    async fn action_invoked(
        emitter: &SignalEmitter<'_>,
        id: u32,
        action_key: &str,
    ) -> zbus::Result<()>;
}

struct Desktop {
    _bus: SessionBus,
    service: zbus::Connection,
    calls: Arc<Mutex<Vec<NotifyCall>>>,
    address: String,
}

impl Desktop {
    async fn start(sandbox: &Sandbox) -> Desktop {
        let bus = SessionBus::start(sandbox.path());
        let stand_in = StandInNotifications::default();
        let calls = stand_in.calls.clone();
        let service = zbus::connection::Builder::address(bus.address.as_str())
            .unwrap()
            .name("org.freedesktop.Notifications")
            .unwrap()
            .serve_at("/org/freedesktop/Notifications", stand_in)
            .unwrap()
            .build()
            .await
            .expect("the stand-in notification service serves on the private bus");
        Desktop {
            address: bus.address.clone(),
            _bus: bus,
            service,
            calls,
        }
    }

    fn calls(&self) -> Vec<NotifyCall> {
        self.calls.lock().unwrap().clone()
    }

    /// Waits until `count` notifications were sent (at most 10 s), then a little longer to
    /// see that no more come.
    async fn wait_for(&self, count: usize) -> Vec<NotifyCall> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.calls().len() < count && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        self.calls()
    }

    /// Presses a notification's button, as the desktop does when the person clicks it.
    async fn press(&self, id: u32, key: &str) {
        let iface = self
            .service
            .object_server()
            .interface::<_, StandInNotifications>("/org/freedesktop/Notifications")
            .await
            .unwrap();
        StandInNotifications::action_invoked(iface.signal_emitter(), id, key)
            .await
            .unwrap();
    }
}

fn ack(plugin: &mut Raw, drive_id: &Value, stage: &str, extra: Value) {
    let mut line = json!({"v": 1, "type": "ack", "drive_id": drive_id, "stage": stage});
    if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
        line.extend(extra.clone());
    }
    plugin.send(&line);
}

/// A code-server window whose plugin runs the native route (scripted by the test).
fn window(sandbox: &Sandbox, name: &str) -> (Raw, String) {
    let workspace = sandbox.workspace(name);
    let (plugin, _) = greet(&sandbox.socket(), &plugin_hello("code-server", &workspace));
    (plugin, workspace.to_str().unwrap().to_string())
}

/// Every journal entry of the sandbox's daemon.
fn journal(sandbox: &Sandbox) -> Vec<Value> {
    let dir = sandbox.path().join("state/koru/journal");
    let mut entries = Vec::new();
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    segments.sort();
    // Through `Lines`: a segment being written ends in a NUL reserve (docs/journal.md).
    for segment in segments {
        for line in koru_daemon::journal::segments::Lines::open(&segment).unwrap() {
            entries.push(serde_json::from_slice(&line.unwrap().bytes).unwrap());
        }
    }
    entries
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drive_whose_chat_waits_for_input_gets_exactly_one_notification() {
    let sandbox = Sandbox::new();
    let desktop = Desktop::start(&sandbox).await;
    let _daemon = sandbox.start_daemon_with_env(
        &["--no-observe"],
        &[("DBUS_SESSION_BUS_ADDRESS", &desktop.address)],
    );
    let (mut plugin, workspace) = window(&sandbox, "needs-input");
    let send = sandbox.spawn(&["send", "--workspace", &workspace, "--json", "run the tests"]);
    let drive = plugin.recv_type("drive");
    ack(&mut plugin, &drive["drive_id"], "received", json!({}));
    ack(
        &mut plugin,
        &drive["drive_id"],
        "submitted",
        json!({"evidence": "chat_responded"}),
    );
    // The chat asks, then says so again (a second report of the same wait is no news).
    for _ in 0..2 {
        plugin.send(&json!({"v": 1, "type": "event", "event": {
            "kind": "chat_outcome", "drive_id": drive["drive_id"],
            "outcome": {"kind": "needs_input", "input": "permission", "detail": "run_in_terminal waits for approval"}}}));
    }
    assert!(send.wait_with_output().unwrap().status.success());

    let calls = desktop.wait_for(1).await;
    assert_eq!(calls.len(), 1, "exactly one notification: {calls:#?}");
    let call = &calls[0];
    assert_eq!(call.app_name, "koru");
    assert_eq!(call.summary, "The chat waits for you");
    let drive_id = drive["drive_id"].as_str().unwrap();
    assert_eq!(
        call.body,
        format!("drive {drive_id} in code-server, {workspace}\nrun_in_terminal waits for approval")
    );
    assert_eq!(call.urgency, Some(2), "critical: the chat waits");
    assert!(
        !call.actions.iter().any(|a| a == "retry"),
        "a delivered prompt is never offered for retry: {:?}",
        call.actions
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_retry_button_of_a_refused_drive_runs_retry_drive_asked_by_the_notification() {
    let sandbox = Sandbox::new();
    let desktop = Desktop::start(&sandbox).await;
    let daemon = sandbox.start_daemon_with_env(
        &["--no-observe"],
        &[("DBUS_SESSION_BUS_ADDRESS", &desktop.address)],
    );
    let (mut plugin, workspace) = window(&sandbox, "refused");
    let send = sandbox.spawn(&["send", "--workspace", &workspace, "--json", "hello"]);
    let drive = plugin.recv_type("drive");
    let drive_id = drive["drive_id"].as_str().unwrap().to_string();
    ack(&mut plugin, &drive["drive_id"], "received", json!({}));
    ack(
        &mut plugin,
        &drive["drive_id"],
        "failed",
        json!({"blocker": {"code": "chat_refused", "detail": "Language model unavailable"}}),
    );
    send.wait_with_output().unwrap();

    let calls = desktop.wait_for(1).await;
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let call = &calls[0];
    assert_eq!(call.summary, "The chat refused the prompt");
    assert!(
        call.body
            .ends_with("chat_refused: Language model unavailable"),
        "{}",
        call.body
    );
    assert_eq!(
        call.actions,
        ["retry", "Retry"],
        "no dashboard without --http"
    );

    desktop.press(call.id, "retry").await;
    let retry = plugin.recv_type("drive");
    assert_ne!(retry["drive_id"], drive["drive_id"]);
    assert_eq!(retry["prompt"], "hello");
    let listed = stdout_json(&sandbox.run(&["drives", "--json"]));
    let retried = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["drive_id"] == retry["drive_id"])
        .expect("the retry is listed");
    assert_eq!(retried["retry_of"], drive_id.as_str());

    // Logged and journaled with who asked: the notification's door.
    let log = daemon.log_text();
    assert!(
        log.lines().any(|l| l.contains("recovery action asked")
            && l.contains("retry_drive")
            && l.contains("koru-notification")),
        "{log}"
    );
    let entries = journal(&sandbox);
    let accepted = entries
        .iter()
        .find(|e| e["kind"] == "drive_accepted" && e["retry_of"] == drive_id.as_str())
        .expect("the retry is journaled");
    assert_eq!(accepted["by"]["door"], "notification", "{accepted}");
    assert_eq!(accepted["by"]["client"], "koru-notification");

    // A button the notification did not offer does nothing.
    desktop.press(call.id, "cancel").await;
    plugin.set_read_timeout(Duration::from_millis(300));
    assert!(plugin.recv().is_none_or(|line| line["type"] != "drive"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_storm_of_failures_is_held_to_the_rate_limit_and_summed_up() {
    let sandbox = Sandbox::new();
    let desktop = Desktop::start(&sandbox).await;
    // Two in a row, then one a second: the test need not wait ten seconds.
    std::fs::create_dir_all(sandbox.xdg_config_home().join("koru")).unwrap();
    std::fs::write(
        sandbox.xdg_config_home().join("koru/registry.yaml"),
        "policy:\n  notify:\n    burst: 2\n    per_minute: 60\n",
    )
    .unwrap();
    let _daemon = sandbox.start_daemon_with_env(
        &["--no-observe"],
        &[("DBUS_SESSION_BUS_ADDRESS", &desktop.address)],
    );
    let (mut plugin, workspace) = window(&sandbox, "storm");
    for n in 0..6 {
        let send = sandbox.spawn(&[
            "send",
            "--workspace",
            &workspace,
            "--json",
            &format!("p{n}"),
        ]);
        let drive = plugin.recv_type("drive");
        ack(
            &mut plugin,
            &drive["drive_id"],
            "failed",
            json!({"blocker": {"code": "chat_refused", "detail": "out of quota"}}),
        );
        send.wait_with_output().unwrap();
    }
    // At once: the burst of two; within a second or two: one summary of the other four.
    let calls = desktop.wait_for(3).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let calls_later = desktop.calls();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(calls_later.len(), 3, "nothing more: {calls_later:#?}");
    assert_eq!(calls[2].summary, "4 drives need you");
    assert_eq!(calls[2].body.lines().count(), 4, "{}", calls[2].body);
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_names_the_notification_service_or_says_there_is_none() {
    let sandbox = Sandbox::new();
    let desktop = Desktop::start(&sandbox).await;
    let doctor = |address: &str| {
        stdout_json(
            &sandbox
                .koru()
                .env("DBUS_SESSION_BUS_ADDRESS", address)
                .args(["doctor", "--json", "--only", "desktop_notifications"])
                .output()
                .unwrap(),
        )
    };
    let report = doctor(&desktop.address);
    let check = koru_system_tests::doctor_check(&report, "desktop_notifications");
    assert_eq!(check["status"], "ok", "{check}");
    assert_eq!(
        check["facts"][1],
        "stand-in 1.0 by koru tests (notification spec 1.2); shows buttons"
    );
    assert!(desktop.calls().is_empty(), "doctor shows nothing");

    let empty_dir = sandbox.path().join("empty-bus");
    std::fs::create_dir_all(&empty_dir).unwrap();
    let empty = SessionBus::start(&empty_dir);
    let report = doctor(&empty.address);
    let check = koru_system_tests::doctor_check(&report, "desktop_notifications");
    assert_eq!(check["status"], "unavailable", "{check}");
    assert_eq!(check["blocker"]["code"], "notifications_unavailable");
    assert_eq!(
        check["recovery"][0]["id"], "start_notification_service",
        "{check}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drive_waiting_for_its_chat_is_announced_with_cancel_and_its_end_replaces_that_notification(
) {
    let sandbox = Sandbox::new();
    let desktop = Desktop::start(&sandbox).await;
    let _daemon = sandbox.start_daemon_with_env(
        &["--no-observe"],
        &[("DBUS_SESSION_BUS_ADDRESS", &desktop.address)],
    );
    let workspace = sandbox.workspace("not-ready");
    let mut hello = plugin_hello("code-server", &workspace);
    hello["chat"] = json!({"ready": false, "reason": "no language model is available to the chat"});
    let (_plugin, _) = greet(&sandbox.socket(), &hello);
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait",
        "--timeout",
        "2",
        "hello",
    ]);
    assert!(!output.status.success());

    let calls = desktop.wait_for(2).await;
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(calls[0].summary, "The chat is not ready; the prompt waits");
    assert_eq!(calls[0].actions, ["cancel", "Cancel"]);
    assert_eq!(calls[0].replaces_id, 0);
    assert_eq!(
        calls[1].summary,
        "The chat was not ready; the prompt was not sent"
    );
    assert_eq!(
        calls[1].replaces_id, calls[0].id,
        "one notification per drive: the end replaces the wait"
    );
    assert_eq!(calls[1].actions, ["retry", "Retry"]);
}

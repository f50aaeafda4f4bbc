//! Recovery actions through the real daemon and `koru recover`: a failed drive retried once (never twice, never one that may have been submitted), a plugin asked to reconnect coming back as a new session, registry reload and re-probe, and a real window focused under Xvfb — each announced on the event stream with who asked.

use std::process::Output;
use std::time::{Duration, Instant};

use koru_system_tests::{controller_hello, greet, Sandbox, XTerm, Xvfb};

use koru_system_tests::stdout_json as json;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Waits until `ready` holds (at most 10 s).
fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} did not happen in 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_failed_drive_is_retried_once_and_a_delivered_one_never() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("app");
    let workspace = workspace.to_str().unwrap();
    let mut refusing =
        sandbox.start_fake_plugin(&["--workspace", workspace, "--behaviour", "nack"]);
    let sent = sandbox.run(&[
        "send",
        "--workspace",
        workspace,
        "--wait",
        "--json",
        "fix the build ✓",
    ]);
    let failed = json(&sent);
    assert_eq!(failed["state"], "failed", "{failed}");
    let failed_id = failed["drive_id"].as_str().unwrap();
    refusing.kill();

    // The IDE comes back with a working plugin: the retry finds it by the workspace.
    let working = sandbox.start_fake_plugin(&["--workspace", workspace]);
    let (mut events, _) = greet(&sandbox.socket(), &controller_hello());
    events.send(&serde_json::json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    events.recv_type("events.subscribed");
    let retried = sandbox.run(&[
        "recover",
        "retry_drive",
        "--drive",
        failed_id,
        "--route",
        "plugin_drive",
        "--json",
    ]);
    assert!(retried.status.success(), "{}", stderr(&retried));
    let result = json(&retried);
    assert_eq!(result["action"], "retry_drive");
    assert_eq!(result["ok"], true);
    let retry = &result["drive"];
    assert_eq!(retry["retry_of"], failed_id);
    assert_eq!(retry["session_id"], working.session_id.as_str());
    let retry_id = retry["drive_id"].as_str().unwrap().to_string();
    eventually("the retry's delivery", || {
        let drive = json(&sandbox.run(&["drives", "--json"]));
        drive
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["drive_id"] == retry_id.as_str() && d["state"] == "done")
    });
    let drives = json(&sandbox.run(&["drives", "--json"]));
    let done = drives
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["drive_id"] == retry_id.as_str())
        .unwrap();
    assert_eq!(
        done["route"], "plugin_drive",
        "only the chosen route: {done}"
    );

    let announced = loop {
        let line = events.recv().expect("the stream goes on");
        if line["event"]["kind"] == "recovery_performed" {
            break line["event"].clone();
        }
    };
    assert_eq!(announced["action"], "retry_drive", "{announced}");
    assert_eq!(announced["ok"], true);
    assert!(
        announced["by"]
            .as_str()
            .unwrap()
            .starts_with("koru-cli (pid "),
        "{announced}"
    );

    for (drive, why) in [
        (failed_id, "already retried"),
        (retry_id.as_str(), "delivered"),
    ] {
        let again = sandbox.run(&["recover", "retry_drive", "--drive", drive]);
        assert_eq!(again.status.code(), Some(1), "{again:?}");
        let message = stderr(&again);
        assert!(
            message.contains("not_retryable") || message.contains(why),
            "{message}"
        );
        assert!(message.contains(why), "{message}");
    }
    let count = json(&sandbox.run(&["drives", "--json"]))
        .as_array()
        .unwrap()
        .len();
    assert_eq!(count, 2, "refused retries made no drive");
}

#[test]
fn a_plugin_asked_to_reconnect_comes_back_as_a_new_session() {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("app");
    let plugin = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let old = plugin.session_id.clone();
    let output = sandbox.run(&["recover", "reconnect_plugin", "--session", &old]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("reconnect"),
        "{output:?}"
    );
    eventually("a new session", || {
        let ids = sandbox.session_ids();
        ids.len() == 1 && ids[0] != old
    });
    let log = daemon.log_text();
    assert!(
        log.contains("reconnect_plugin") && log.contains("koru-cli (pid"),
        "logged with who asked: {log}"
    );
    let gone = sandbox.run(&["recover", "reconnect_plugin", "--session", &old]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        stderr(&gone).contains("no connected plugin session"),
        "{gone:?}"
    );
}

#[test]
fn reload_reports_a_broken_registry_and_reprobe_runs_doctor_again() {
    let sandbox = Sandbox::new();
    let layer = sandbox.path().join("extra.yaml");
    std::fs::write(&layer, "policy:\n  submit_chord: Return\n").unwrap();
    let _daemon = sandbox.start_daemon(&["--registry", layer.to_str().unwrap()]);

    let reloaded = sandbox.run(&["recover", "reload_registry"]);
    assert!(reloaded.status.success(), "{}", stderr(&reloaded));
    assert!(
        String::from_utf8_lossy(&reloaded.stdout).starts_with("registry reloaded:"),
        "{reloaded:?}"
    );

    std::fs::write(&layer, "policy:\n  submit_chord: [\n").unwrap();
    let broken = sandbox.run(&["recover", "reload_registry", "--json"]);
    assert_eq!(broken.status.code(), Some(1), "{broken:?}");
    let result = json(&broken);
    assert_eq!(result["ok"], false);
    assert_eq!(result["blocker"]["code"], "registry_invalid");
    assert!(
        result["summary"].as_str().unwrap().contains("extra.yaml"),
        "says which file: {result}"
    );

    let probed = sandbox.run(&["recover", "reprobe"]);
    assert!(probed.status.success(), "{}", stderr(&probed));
    let text = String::from_utf8_lossy(&probed.stdout);
    assert!(
        text.starts_with("doctor ran again:") && text.contains(" ok, "),
        "{text}"
    );
}

#[test]
fn focus_window_raises_the_sessions_real_window() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let _daemon = sandbox.start_daemon_with_env(&[], &[("DISPLAY", &xvfb.display)]);
    let ide = XTerm::start(&xvfb.display, sandbox.path(), "ide");
    let other = XTerm::start(&xvfb.display, sandbox.path(), "other");
    let xdotool = |args: &[&str]| {
        let output = std::process::Command::new("xdotool")
            .args(args)
            .env("DISPLAY", &xvfb.display)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let other_window = xdotool(&["search", "--onlyvisible", "--pid", &other.pid.to_string()]);
    xdotool(&["windowfocus", "--sync", &other_window]);
    let ide_windows = xdotool(&["search", "--onlyvisible", "--pid", &ide.pid.to_string()]);
    assert_ne!(xdotool(&["getwindowfocus"]), ide_windows);

    let workspace = sandbox.workspace("app");
    let plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--window-pid",
        &ide.pid.to_string(),
    ]);
    let output = sandbox.run(&["recover", "focus_window", "--session", &plugin.session_id]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("xdotool"),
        "{output:?}"
    );
    assert!(
        ide_windows
            .lines()
            .any(|w| w == xdotool(&["getwindowfocus"])),
        "the IDE window has focus"
    );
    assert!(ide.text().is_empty(), "nothing was typed into it");
}

//! The drive planner through the real daemon: OS injection into a real xterm under Xvfb by `koru send --window-pid`, focus safety with a decoy, fallback from a refused native send to plugin drive, no second route after a possible paste, a policy that forbids OS injection, and a plugin route's submit key (Cursor) pressed once into the plugin's focused window, or not at all.

use koru_system_tests::{Sandbox, XTerm, Xvfb};
use serde_json::Value;

/// A registry layer given to the daemon (terminals paste with ctrl+shift+v by the built-in `paste_chord_by_class`).
const TERMINAL_KEYS: &str = "policy:\n  submit_chord: Return\n";

fn registry_file(sandbox: &Sandbox, text: &str) -> String {
    let path = sandbox.path().join(format!("registry-{}.yaml", text.len()));
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

use koru_system_tests::stdout_json as json;
use koru_system_tests::{attempt_outcomes as attempts, drive_history, stages_printed};

#[test]
fn send_window_pid_pastes_a_unicode_prompt_byte_exact_into_a_real_xterm() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let registry = registry_file(&sandbox, TERMINAL_KEYS);
    let _daemon =
        sandbox.start_daemon_with_env(&["--registry", &registry], &[("DISPLAY", &xvfb.display)]);
    let xterm = XTerm::start(&xvfb.display, sandbox.path(), "ide");
    let prompt = "Explique l'échec du test ✓\n第二行: keep «quotes» & $VARS 🚀";
    let output = sandbox.run(&[
        "send",
        "--window-pid",
        &xterm.pid.to_string(),
        "--wait",
        prompt,
    ]);
    assert!(output.status.success(), "{output:?}");
    let expected = format!("{prompt}\n");
    assert_eq!(xterm.wait_for(&expected), expected);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("route os_injection via os_injector_xdotool: succeeded"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unverified until the chat's history shows it"),
        "{stderr}"
    );

    let drives = json(&sandbox.run(&["drives", "--json"]));
    let drive = &drives[0];
    assert_eq!(drive["state"], "done");
    assert_eq!(drive["verification"], "unverified");
    assert_eq!(drive["route"], "os_injection");
    assert_eq!(
        drive_history(drive),
        ["queued", "sent", "focused", "pasted", "submitted", "done"]
    );
}

#[test]
fn a_target_that_cannot_be_focused_fails_with_focus_mismatch_and_the_decoy_stays_empty() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let registry = registry_file(&sandbox, TERMINAL_KEYS);
    let _daemon =
        sandbox.start_daemon_with_env(&["--registry", &registry], &[("DISPLAY", &xvfb.display)]);
    let decoy = XTerm::start(&xvfb.display, sandbox.path(), "decoy");
    let target = XTerm::start(&xvfb.display, sandbox.path(), "target");
    let xdotool = |args: &[&str]| {
        std::process::Command::new("xdotool")
            .args(args)
            .env("DISPLAY", &xvfb.display)
            .output()
            .unwrap()
    };
    let target_window =
        String::from_utf8(xdotool(&["search", "--pid", &target.pid.to_string()]).stdout).unwrap();
    let decoy_window = String::from_utf8(
        xdotool(&["search", "--onlyvisible", "--pid", &decoy.pid.to_string()]).stdout,
    )
    .unwrap();
    for id in target_window.lines() {
        xdotool(&["windowunmap", "--sync", id]);
    }
    xdotool(&[
        "windowfocus",
        "--sync",
        decoy_window.lines().next().unwrap(),
    ]);

    let output = sandbox.run(&[
        "send",
        "--window-pid",
        &target.pid.to_string(),
        "--wait",
        "must not land",
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("failed: focus_mismatch"), "{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(decoy.text(), "", "a keystroke reached the decoy");
    assert_eq!(target.text(), "");
}

#[test]
fn a_refused_native_send_falls_back_to_plugin_drive() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("fallback");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "nack-native",
        "--record",
        record.to_str().unwrap(),
    ]);
    let output = sandbox.run(&["send", "--wait", "--json", "fall back please"]);
    assert!(output.status.success(), "{output:?}");
    let drive = json(&output);
    assert_eq!(drive["state"], "done");
    assert_eq!(drive["verification"], "acked");
    assert_eq!(
        attempts(&drive)[..2],
        [
            "vscode_native_chat_open failed",
            "vscode_plugin_drive succeeded"
        ]
    );
    assert_eq!(
        drive["attempts"][0]["blocker"]["code"],
        "command_not_allowed"
    );
    let routes: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["route"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(routes, ["native_send", "plugin_drive"]);
}

#[test]
fn a_plugin_that_stalls_after_pasted_is_never_followed_by_another_route() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    // VS Code's plugin drive only (focus, paste, submit command), so the plugin stalls
    // after `pasted`.
    let registry = registry_file(
        &sandbox,
        &format!(
            "{TERMINAL_KEYS}interfaces:\n  - id: vscode_native_chat_open\n    enabled: false\n"
        ),
    );
    let _daemon =
        sandbox.start_daemon_with_env(&["--registry", &registry], &[("DISPLAY", &xvfb.display)]);
    // OS injection would work on this window: it must still not be used.
    let window = XTerm::start(&xvfb.display, sandbox.path(), "ide");
    let workspace = sandbox.workspace("stall");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--window-pid",
        &window.pid.to_string(),
        "--behaviour",
        "stall-after-pasted",
        "--record",
        record.to_str().unwrap(),
    ]);
    let output = sandbox.run(&["send", "--wait", "--timeout", "1", "--json", "only once"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let drive = json(&output);
    assert_eq!(drive["state"], "timed_out");
    assert_eq!(drive["attempts"][0]["reached"], "pasted");
    let tried = attempts(&drive);
    assert_eq!(tried[0], "vscode_plugin_drive failed");
    assert!(
        tried[1..].iter().all(|a| a.ends_with("not_tried")),
        "{tried:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&record).unwrap().lines().count(),
        1,
        "the plugin got the prompt once"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(window.text(), "", "no route typed into the window");
}

#[test]
fn a_policy_without_os_injection_refuses_window_targets() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let registry = registry_file(&sandbox, "policy:\n  allow_os_injection: false\n");
    let _daemon =
        sandbox.start_daemon_with_env(&["--registry", &registry], &[("DISPLAY", &xvfb.display)]);
    let window = XTerm::start(&xvfb.display, sandbox.path(), "ide");
    let output = sandbox.run(&[
        "send",
        "--window-pid",
        &window.pid.to_string(),
        "--wait",
        "--json",
        "no",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let drive = json(&output);
    assert_eq!(drive["blocker"]["code"], "policy_forbidden");
    assert!(attempts(&drive).iter().all(|a| a.ends_with("skipped")));
    assert_eq!(window.text(), "");
}

#[test]
fn bad_window_targets_are_refused_with_the_field_at_fault() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let output = sandbox.run(&["send", "--window-title", "([unclosed", "x"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "invalid_message: the window title pattern is not a valid regular expression"
        ),
        "{stderr}"
    );
    let combined = sandbox.run(&["send", "--window-pid", "5", "--ide", "vscode", "x"]);
    assert_eq!(combined.status.code(), Some(2), "clap refuses two targets");
}

/// `xdotool ARGS` on `display`.
fn xdotool(display: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("xdotool")
        .args(args)
        .env("DISPLAY", display)
        .output()
        .unwrap()
}

/// Gives the window of `xterm` the keyboard focus (no window manager under Xvfb).
fn focus(display: &str, xterm: &XTerm) {
    let window = String::from_utf8(
        xdotool(
            display,
            &["search", "--onlyvisible", "--pid", &xterm.pid.to_string()],
        )
        .stdout,
    )
    .unwrap();
    let window = window.lines().next().expect("the xterm has a window");
    assert!(xdotool(display, &["windowfocus", "--sync", window])
        .status
        .success());
}

#[test]
fn a_cursor_drive_is_submitted_by_one_return_into_the_plugins_focused_window() {
    submitted_by_one_return(
        "cursor",
        &[
            "cursor_native_new_chat skipped",
            "cursor_plugin_drive succeeded",
        ],
    );
}

#[test]
fn a_windsurf_drive_is_submitted_by_one_return_into_the_plugins_focused_window() {
    submitted_by_one_return("windsurf", &["windsurf_plugin_drive succeeded"]);
}

/// A drive to `product` (a paste route with `submit_key: Return`) through the fake plugin
/// playing that IDE in a real xterm that has focus.
fn submitted_by_one_return(product: &str, expected_attempts: &[&str]) {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let _daemon = sandbox.start_daemon_with_env(&[], &[("DISPLAY", &xvfb.display)]);
    // The fake plugin plays Cursor in this window: its pastes go to the fake IDE's chat
    // input, so the one thing the xterm can receive is the daemon's submit key.
    let window = XTerm::start(&xvfb.display, sandbox.path(), "cursor");
    focus(&xvfb.display, &window);
    let workspace = sandbox.workspace("keys");
    let record = sandbox.path().join("received.jsonl");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        product,
        "--workspace",
        workspace.to_str().unwrap(),
        "--window-pid",
        &window.pid.to_string(),
        "--focused",
        "--record",
        record.to_str().unwrap(),
    ]);
    let output = sandbox.run(&["send", "--ide", product, "--wait", "Ship it ✓"]);
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
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("submitted by one key press into its window"),
        "{stderr}"
    );
    // Return reached the window exactly once.
    assert_eq!(window.wait_for("\n"), "\n");
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(window.text(), "\n", "the key was pressed once");

    let drives = json(&sandbox.run(&["drives", "--json"]));
    let drive = &drives[0];
    assert_eq!(drive["state"], "done");
    assert_eq!(drive["submit_evidence"], "key_pressed");
    assert_eq!(drive["verification"], "unverified");
    assert_eq!(attempts(drive), expected_attempts);
    let received: Value =
        serde_json::from_str(std::fs::read_to_string(&record).unwrap().trim()).unwrap();
    assert_eq!(received["submit"], false, "the plugin only pastes");
}

#[test]
fn a_cursor_window_without_focus_gets_no_key_and_the_drive_fails_at_pasted() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let _daemon = sandbox.start_daemon_with_env(&[], &[("DISPLAY", &xvfb.display)]);
    let window = XTerm::start(&xvfb.display, sandbox.path(), "cursor");
    // The user is typing in another window.
    let decoy = XTerm::start(&xvfb.display, sandbox.path(), "decoy");
    focus(&xvfb.display, &decoy);
    let workspace = sandbox.workspace("cursor-unfocused");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "cursor",
        "--workspace",
        workspace.to_str().unwrap(),
        "--window-pid",
        &window.pid.to_string(),
        "--focused",
    ]);
    let output = sandbox.run(&["send", "--ide", "cursor", "--wait", "--json", "not here"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let drive = json(&output);
    assert_eq!(drive["state"], "failed");
    assert_eq!(drive["blocker"]["code"], "focus_mismatch");
    let detail = drive["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("decoy") && detail.contains("the submit key was not pressed"),
        "{detail}"
    );
    assert_eq!(
        drive_history(&drive),
        ["queued", "sent", "received", "focused", "pasted", "failed"]
    );
    assert!(drive.get("submit_evidence").is_none(), "{drive}");
    let tried = attempts(&drive);
    assert_eq!(tried[1], "cursor_plugin_drive failed");
    assert!(
        tried[2..].iter().all(|a| a.ends_with("not_tried")),
        "{tried:?}"
    );
    assert!(drive["attempts"][1]["hint"]
        .as_str()
        .unwrap()
        .starts_with("Press Enter in the chat"));
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(decoy.text(), "", "no key reached the focused decoy");
    assert_eq!(window.text(), "", "nor the window without focus");
}

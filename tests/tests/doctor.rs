//! `koru doctor` and `koru registry` against the real binary in controlled environments: PATH with and without injectors, a real Xvfb display, a private D-Bus, chat-store fixtures, a plugin with an out-of-range protocol, project layers; table and JSON snapshots.

use std::path::Path;
use std::process::{Command, Output};

use expect_test::expect_file;
use koru_system_tests::{bin_dir_with, doctor_check as check, Sandbox, SessionBus, Xvfb};

/// `koru doctor ARGS` with exactly this environment (plus the sandbox's).
fn doctor(sandbox: &Sandbox, path_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command: Command = sandbox.koru();
    command.env("PATH", path_dir).arg("doctor").args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("koru doctor runs")
}

use koru_system_tests::stdout_json as json;

/// Replaces what differs between runs (paths, ids, pids, display numbers, ages) and drops
/// what depends on the machine rather than the sandbox: which tools `koru setup` finds
/// (JetBrains IDEs under /opt, a systemd user instance) is tested in setup.rs.
fn normalize(text: &str, sandbox: &Sandbox) -> String {
    let text = text.replace(sandbox.path().to_str().unwrap(), "<SANDBOX>");
    let rules = [
        (r"(?s)\nWIRED ON THIS MACHINE \(koru setup\)\n.*?\n\n", "\n"),
        (r#"(?s)\n  "wired": \[.*?\n  \],"#, ""),
        (r#""display": ":\d+""#, r#""display": ":<N>""#),
        (r"s_[0-9a-f]{12}", "<SESSION>"),
        (r"pid \d+", "pid <PID>"),
        (r"DISPLAY=:\d+", "DISPLAY=:<N>"),
        (r"newest \S+ ago", "newest <AGE> ago"),
        (r"koru \d+\.\d+\.\d+", "koru <VERSION>"),
        (r"\(\d+\.\d+\.\d+\)", "(<VERSION>)"),
        (r"as :\d+\.\d+", "as <NAME>"),
        (
            r"koru-fake-plugin \d+\.\d+\.\d+",
            "koru-fake-plugin <VERSION>",
        ),
        (r"vscode \d+\.\d+\.\d+", "vscode <VERSION>"),
        (
            r#""generated_at_ms": \d+"#,
            r#""generated_at_ms": "<TIME>""#,
        ),
        (r#""(pid|window_pid)": \d+"#, r#""$1": "<PID>""#),
        (
            r#""(koru_version|version|ide_version)": "\d+\.\d+\.\d+""#,
            r#""$1": "<VERSION>""#,
        ),
    ];
    let mut out = text;
    for (pattern, replacement) in rules {
        out = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&out, replacement)
            .into_owned();
    }
    out
}

#[test]
fn without_a_daemon_doctor_says_so_still_probes_and_exits_2() {
    let sandbox = Sandbox::new();
    let empty = bin_dir_with(sandbox.path(), &[]);
    let table = doctor(&sandbox, &empty, &[], &[]);
    assert_eq!(table.status.code(), Some(2), "{table:?}");
    let text = String::from_utf8_lossy(&table.stdout);
    expect_file!["snapshots/doctor_no_daemon.txt"].assert_eq(&normalize(&text, &sandbox));

    let report = json(&doctor(&sandbox, &empty, &[], &["--json"]));
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["daemon"]["running"], false);
    assert_eq!(report["summary"]["exit_code"], 2);
    assert_eq!(check(&report, "cli")["blocker"]["code"], "daemon_down");
    assert_eq!(
        check(&report, "os_injector_xdotool")["blocker"]["code"],
        "no_display"
    );
    assert_eq!(
        check(&report, "os_injector_ydotool")["blocker"]["code"],
        "injector_missing"
    );
}

#[test]
fn with_a_real_display_and_a_connected_plugin_the_routes_are_ranked_and_usable() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("repo");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    // A plugin that offers only protocol 2..3: refused, and doctor must say so.
    let refused = sandbox
        .koru()
        .args([
            "dev",
            "fake-plugin",
            "--product",
            "cursor",
            "--protocol",
            "2..3",
            "--workspace",
        ])
        .arg(&workspace)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("version_mismatch"));

    let path = bin_dir_with(sandbox.path(), &["xdotool", "xclip"]);
    let env = [("DISPLAY", xvfb.display.as_str())];
    let table = doctor(&sandbox, &path, &env, &[]);
    assert_eq!(
        table.status.code(),
        Some(1),
        "degraded but a drive path works: {table:?}"
    );
    let text = String::from_utf8_lossy(&table.stdout);
    expect_file!["snapshots/doctor_x11_with_plugin.txt"].assert_eq(&normalize(&text, &sandbox));

    let raw = doctor(&sandbox, &path, &env, &["--json"]);
    expect_file!["snapshots/doctor_x11_with_plugin.json"]
        .assert_eq(&normalize(&String::from_utf8_lossy(&raw.stdout), &sandbox));
    let report = json(&raw);
    assert_eq!(check(&report, "os_injector_xdotool")["status"], "ok");
    assert!(check(&report, "os_injector_xdotool")["facts"][0]
        .as_str()
        .unwrap()
        .starts_with("DISPLAY="));
    assert_eq!(check(&report, "clipboard_x11")["status"], "ok");
    assert_eq!(
        check(&report, "os_injector_wtype")["status"],
        "not_applicable"
    );
    let socket = check(&report, "plugin_socket_vscode_family");
    assert_eq!(socket["status"], "degraded");
    assert_eq!(socket["blocker"]["code"], "version_mismatch");
    assert!(socket["blocker"]["detail"]
        .as_str()
        .unwrap()
        .contains("offered protocol 2..3"));
    let routes = report["sessions"][0]["routes"].as_array().unwrap();
    let summary: Vec<(String, bool)> = routes
        .iter()
        .map(|r| {
            (
                r["interface"].as_str().unwrap().to_string(),
                r["usable"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("vscode_native_chat_open".to_string(), true),
            ("vscode_plugin_drive".to_string(), true),
            ("os_injector_xdotool".to_string(), true),
            ("os_injector_enigo".to_string(), true),
            ("os_injector_ydotool".to_string(), false),
            // The Claude Code panel, after the chat's routes: the fake plugin does not
            // claim the extension's commands.
            ("claude_code_panel_drive".to_string(), false),
        ]
    );
    let panel = check(&report, "claude_code_panel_drive");
    assert_eq!(panel["status"], "not_applicable", "{panel}");
    assert_eq!(panel["blocker"]["code"], "capability_missing");
}

#[test]
fn missing_injectors_and_displays_are_classified_with_their_recovery() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let empty = bin_dir_with(sandbox.path(), &[]);
    // A display but no programs: the injector and the clipboard are missing.
    let report = json(&doctor(
        &sandbox,
        &empty,
        &[("DISPLAY", xvfb.display.as_str())],
        &["--json"],
    ));
    let xdotool = check(&report, "os_injector_xdotool");
    assert_eq!(xdotool["status"], "unavailable");
    assert_eq!(xdotool["blocker"]["code"], "injector_missing");
    assert_eq!(xdotool["recovery"][0]["id"], "install_xdotool");
    assert_eq!(
        check(&report, "clipboard_x11")["blocker"]["code"],
        "clipboard_unavailable"
    );
    assert_eq!(
        check(&report, "clipboard_x11")["blocker"]["detail"],
        "xclip or xsel not found on PATH"
    );

    // wtype on PATH but no Wayland display.
    let with_wtype = bin_dir_with(sandbox.path(), &["wtype"]);
    let report = json(&doctor(&sandbox, &with_wtype, &[], &["--json"]));
    let wtype = check(&report, "os_injector_wtype");
    assert_eq!(wtype["blocker"]["code"], "no_display");
    assert_eq!(wtype["blocker"]["detail"], "WAYLAND_DISPLAY is not set");
    assert_eq!(wtype["recovery"][0]["id"], "set_wayland_display");
    // With a (claimed) Wayland display wtype is found; xdotool does not apply there.
    let report = json(&doctor(
        &sandbox,
        &with_wtype,
        &[("WAYLAND_DISPLAY", "wayland-9")],
        &["--json"],
    ));
    assert_eq!(check(&report, "os_injector_wtype")["status"], "ok");
    assert_eq!(
        check(&report, "os_injector_wtype")["facts"],
        serde_json::json!([
            "WAYLAND_DISPLAY=wayland-9",
            "wtype at ".to_string() + with_wtype.join("wtype").to_str().unwrap()
        ])
    );
    assert_eq!(
        check(&report, "os_injector_xdotool")["status"],
        "not_applicable"
    );
}

#[test]
fn chat_store_fixtures_are_counted_and_absent_stores_are_not_applicable() {
    let sandbox = Sandbox::new();
    let home = sandbox.path().join("home");
    let claude = home.join(".claude/projects/-work-repo");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(claude.join("a.jsonl"), "{}\n").unwrap();
    std::fs::write(claude.join("b.jsonl"), "{}\n").unwrap();
    let codex = home.join(".codex/sessions/2026/11/23");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(codex.join("rollout-1.jsonl"), "{}\n").unwrap();
    let empty = bin_dir_with(sandbox.path(), &[]);
    let report = json(&doctor(&sandbox, &empty, &[], &["--json"]));
    let claude_check = check(&report, "chat_history_claude_code_jsonl");
    assert_eq!(claude_check["status"], "ok");
    let fact = claude_check["facts"][0].as_str().unwrap();
    assert!(
        fact.ends_with("/home/.claude/projects: 2 file(s), newest 0s ago"),
        "{fact}"
    );
    assert_eq!(check(&report, "chat_history_codex_jsonl")["status"], "ok");
    let cursor = check(&report, "chat_history_cursor_sqlite");
    assert_eq!(cursor["status"], "not_applicable");
    assert_eq!(cursor["blocker"]["code"], "store_missing");
    // Doctor reads, never writes: the fixture is untouched.
    assert_eq!(
        std::fs::read_to_string(claude.join("a.jsonl")).unwrap(),
        "{}\n"
    );
}

#[test]
fn a_private_session_bus_is_reachable() {
    let sandbox = Sandbox::new();
    let bus = SessionBus::start(sandbox.path());
    let empty = bin_dir_with(sandbox.path(), &[]);
    let report = json(&doctor(
        &sandbox,
        &empty,
        &[("DBUS_SESSION_BUS_ADDRESS", bus.address.as_str())],
        &["--json", "--only", "dbus_session"],
    ));
    assert_eq!(
        report["interfaces"].as_array().unwrap().len(),
        1,
        "--only filters"
    );
    let dbus = check(&report, "dbus_session");
    assert_eq!(dbus["status"], "ok", "{dbus}");
    assert_eq!(report["environment"]["dbus_session"], "reachable");
    let dead = json(&doctor(
        &sandbox,
        &empty,
        &[("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")],
        &["--json", "--only", "dbus_session", "--timeout", "500"],
    ));
    assert_eq!(
        check(&dead, "dbus_session")["blocker"]["code"],
        "bus_unavailable"
    );
}

#[test]
fn a_session_workspace_with_a_project_layer_gets_its_own_routes() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("project");
    std::fs::create_dir_all(workspace.join(".koru")).unwrap();
    std::fs::write(
        workspace.join(".koru/registry.yaml"),
        "interfaces:\n  - id: vscode_native_chat_open\n    enabled: false\n",
    )
    .unwrap();
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    let empty = bin_dir_with(sandbox.path(), &[]);
    let report = json(&doctor(&sandbox, &empty, &[], &["--json"]));
    let session = &report["sessions"][0];
    assert!(session["project_layer"]
        .as_str()
        .unwrap()
        .ends_with("project/.koru/registry.yaml"));
    assert_eq!(session["routes"][0]["interface"], "vscode_plugin_drive");
    assert_eq!(report["summary"]["exit_code"], 1);
}

#[test]
fn unknown_only_ids_are_refused() {
    let sandbox = Sandbox::new();
    let empty = bin_dir_with(sandbox.path(), &[]);
    let output = doctor(&sandbox, &empty, &[], &["--only", "no_such_thing"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--only no_such_thing: no such interface")
    );
}

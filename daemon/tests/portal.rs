//! OS injection through the desktop portal, through the real daemon, on a pretend GNOME Wayland session: a private session bus with a stand-in portal (this test's own: it records keysyms and clipboard calls, asks "consent", honours or revokes restore tokens, plays the focused window), WAYLAND_DISPLAY set and no SWAYSOCK, and a scripted plugin window whose focus reports are the only focus Koru can verify. A drive lands exactly once with the clipboard restored; consent is asked once and remembered across daemons; a revoked token asks again and a refusal says `consent_pending`; focus lost before submit stops the drive at `pasted`; a window without a plugin is `focus_unverifiable`; a portal that restarted gets a new session on the next drive; doctor names each case.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use koru_system_tests::{
    controller_hello, doctor_check, greet, plugin_hello, stdout_json, Daemon, Raw, Sandbox,
    SessionBus,
};
use serde_json::{json, Value};
use support::portal::{Owner, StandInPortal};

const PROMPT: &str = "Réécris parse() ✓\nkeep the tests green";

struct Desktop {
    sandbox: Sandbox,
    bus: SessionBus,
    portal: StandInPortal,
}

impl Desktop {
    async fn start() -> Desktop {
        Desktop::start_with(true).await
    }

    /// With `clipboard: false`, a desktop whose portal has no Clipboard interface.
    async fn start_with(clipboard: bool) -> Desktop {
        let sandbox = Sandbox::new();
        let bus = SessionBus::start(sandbox.path());
        let portal = StandInPortal::serve_with(&bus.address, clipboard).await;
        portal.state.lock().unwrap().owner = Owner::Other("the user's clipboard".into());
        // The IDE's chat is reached by OS injection only, as for a webview chat no IDE
        // command can fill.
        std::fs::create_dir_all(sandbox.xdg_config_home().join("koru")).unwrap();
        std::fs::write(
            sandbox.xdg_config_home().join("koru/registry.yaml"),
            "policy:\n  products:\n    code-server: {route_order: [os_injection]}\n",
        )
        .unwrap();
        Desktop {
            sandbox,
            bus,
            portal,
        }
    }

    fn env(&self) -> [(&str, &str); 2] {
        [
            ("DBUS_SESSION_BUS_ADDRESS", self.bus.address.as_str()),
            ("WAYLAND_DISPLAY", "wayland-koru-test"),
        ]
    }

    fn daemon(&self) -> Daemon {
        self.sandbox
            .start_daemon_with_env(&["--no-observe"], &self.env())
    }

    /// A code-server window whose plugin says its window has focus.
    fn window(&self, name: &str) -> (Raw, String) {
        let workspace = self.sandbox.workspace(name);
        let mut hello = plugin_hello("code-server", &workspace);
        hello["window"]["focused"] = json!(true);
        let (plugin, _) = greet(&self.sandbox.socket(), &hello);
        (plugin, workspace.to_str().unwrap().to_string())
    }

    /// `koru send --workspace W --wait PROMPT`, off the test's runtime threads.
    async fn send(&self, workspace: &str, prompt: &str) -> (std::process::Output, String) {
        let command = self
            .sandbox
            .koru()
            .args([
                "send",
                "--workspace",
                workspace,
                "--wait",
                "--timeout",
                "20",
                prompt,
            ])
            .output();
        let output = tokio::task::spawn_blocking(move || command)
            .await
            .unwrap()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output, stderr)
    }

    fn token_file(&self) -> std::path::PathBuf {
        self.sandbox.path().join("state/koru/portal-restore-token")
    }

    fn doctor(&self) -> Value {
        let report = stdout_json(
            &self
                .sandbox
                .koru()
                .envs(self.env())
                .args(["doctor", "--json", "--only", "os_injector_portal"])
                .output()
                .unwrap(),
        );
        doctor_check(&report, "os_injector_portal").clone()
    }
}

fn last_drive(sandbox: &Sandbox) -> Value {
    let listed = stdout_json(&sandbox.run(&["drives", "--json"]));
    listed.as_array().unwrap()[0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drive_through_the_portal_lands_once_restores_the_clipboard_and_is_remembered() {
    let desktop = Desktop::start().await;
    let check = desktop.doctor();
    assert_eq!(check["blocker"]["code"], "consent_pending", "{check}");
    assert_eq!(check["status"], "degraded");

    let mut daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("portal");
    let (output, stderr) = desktop.send(&workspace, PROMPT).await;
    assert!(
        output.status.success(),
        "{stderr}\ndaemon log:\n{}",
        daemon.log_text()
    );
    assert!(stderr.contains("os_injector_portal"), "{stderr}");
    assert_eq!(desktop.portal.dialogs(), 1, "consent asked once");

    // The window got the prompt exactly once (pasted, then Return), nothing else.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(desktop.portal.typed(), format!("{PROMPT}\n"));
    let keysyms = desktop.portal.keysyms();
    let presses = |keysym: u32| keysyms.iter().filter(|k| **k == (keysym, true)).count();
    assert_eq!(presses(u32::from(b'v')), 1, "one paste chord: {keysyms:?}");
    assert_eq!(presses(0xff0d), 1, "one Return");
    assert!(
        keysyms
            .iter()
            .filter(|k| k.1)
            .all(|k| keysyms.contains(&(k.0, false))),
        "every key released"
    );
    // The previous clipboard is served again.
    assert_eq!(
        desktop.portal.clipboard().await.as_deref(),
        Some("the user's clipboard")
    );
    let calls = desktop.portal.state.lock().unwrap().clipboard_calls.clone();
    assert_eq!(calls[0], "RequestClipboard");
    assert!(
        calls.contains(&"SelectionRead text/plain;charset=utf-8".to_string()),
        "{calls:?}"
    );
    let drive = last_drive(&desktop.sandbox);
    assert_eq!(drive["state"], "done");
    assert_eq!(drive["verification"], "unverified");

    // The restore token is kept privately, and the next daemon starts without a dialog.
    let token = std::fs::read_to_string(desktop.token_file()).unwrap();
    assert_eq!(token, "restore-1");
    let mode = std::fs::metadata(desktop.token_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(desktop.doctor()["status"], "ok");
    daemon.terminate(Duration::from_secs(5));
    drop(daemon);
    let daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("portal-again");
    let (output, stderr) = desktop.send(&workspace, "second").await;
    assert!(
        output.status.success(),
        "{stderr}\ndaemon log:\n{}",
        daemon.log_text()
    );
    assert_eq!(
        desktop.portal.dialogs(),
        1,
        "the restore token spared the dialog"
    );
    assert_eq!(
        std::fs::read_to_string(desktop.token_file()).unwrap(),
        "restore-2"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_token_asks_again_and_a_refusal_is_consent_pending_with_nothing_typed() {
    let desktop = Desktop::start().await;
    std::fs::create_dir_all(desktop.token_file().parent().unwrap()).unwrap();
    std::fs::write(desktop.token_file(), "restore-from-last-week").unwrap();
    // The desktop no longer honours it (revoked in its settings), and the person says yes.
    let daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("revoked");
    let (output, stderr) = desktop.send(&workspace, "hi").await;
    assert!(output.status.success(), "{stderr}\n{}", daemon.log_text());
    assert_eq!(
        desktop.portal.dialogs(),
        1,
        "asked again, not silently skipped"
    );
    assert_eq!(
        std::fs::read_to_string(desktop.token_file()).unwrap(),
        "restore-1"
    );
    drop(daemon);

    // Revoked again, and this time the person refuses.
    desktop.portal.revoke_tokens();
    desktop.portal.state.lock().unwrap().approve = false;
    let typed_before = desktop.portal.typed();
    let daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("refused");
    let (output, stderr) = desktop.send(&workspace, "not allowed").await;
    assert!(!output.status.success());
    assert!(
        stderr.contains("consent_pending"),
        "{stderr}\n{}",
        daemon.log_text()
    );
    assert!(
        stderr.contains("allow remote input"),
        "the hint says what to do: {stderr}"
    );
    assert_eq!(desktop.portal.dialogs(), 2);
    assert_eq!(desktop.portal.typed(), typed_before, "nothing typed");
    assert!(
        !desktop.token_file().exists(),
        "a refused token is forgotten"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn focus_lost_after_the_paste_stops_the_drive_before_submit() {
    let desktop = Desktop::start().await;
    let daemon = desktop.daemon();
    let (mut plugin, workspace) = desktop.window("focus-lost");
    let (mut watcher, _) = greet(&desktop.sandbox.socket(), &controller_hello());
    watcher.send(&json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    watcher.recv_type("events.subscribed");
    let (pasted_tx, pasted_rx) = tokio::sync::oneshot::channel();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    {
        let mut state = desktop.portal.state.lock().unwrap();
        state.on_paste = Some(pasted_tx);
        state.paste_gate = Some(gate_rx);
    }
    let send = {
        let mut command = desktop.sandbox.koru();
        command.args(["send", "--workspace", &workspace, "--wait", PROMPT]);
        tokio::task::spawn_blocking(move || command.output())
    };
    tokio::time::timeout(Duration::from_secs(20), pasted_rx)
        .await
        .expect("the paste chord arrives within 20 s")
        .unwrap();
    // The person clicks elsewhere while the paste lands; the daemon has taken it in once
    // its event stream says so.
    plugin.send(&json!({"v": 1, "type": "event", "event": {"kind": "focus", "focused": false}}));
    let seen = tokio::task::spawn_blocking(move || loop {
        let Some(line) = watcher.recv() else {
            return false;
        };
        let event = &line["event"];
        if event["kind"] == "session_updated" && event["session"]["window"]["focused"] == false {
            return true;
        }
    });
    assert!(seen.await.unwrap(), "the daemon saw the focus change");
    gate_tx.send(()).unwrap();
    let output = send.await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("focus_mismatch"),
        "{stderr}\n{}",
        daemon.log_text()
    );
    let drive = last_drive(&desktop.sandbox);
    let history: Vec<&str> = drive["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["state"].as_str().unwrap())
        .collect();
    assert!(
        history.contains(&"pasted"),
        "the stage reached: {history:?}"
    );
    assert!(!history.contains(&"submitted"), "{history:?}");
    assert_eq!(drive["state"], "failed");
    assert!(
        !desktop.portal.keysyms().contains(&(0xff0d, true)),
        "no Return after focus was lost"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        desktop.portal.typed(),
        PROMPT,
        "the prompt sits unsent in the input"
    );
    assert_eq!(
        desktop.portal.clipboard().await.as_deref(),
        Some("the user's clipboard")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_without_a_plugin_is_focus_unverifiable_and_gets_no_key_nor_dialog() {
    let desktop = Desktop::start().await;
    let daemon = desktop.daemon();
    // A window Koru knows only by its process.
    let pid = std::process::id().to_string();
    let command = desktop
        .sandbox
        .koru()
        .args(["send", "--window-pid", &pid, "--wait", "hello"])
        .output();
    let output = tokio::task::spawn_blocking(move || command)
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("focus_unverifiable"),
        "{stderr}\n{}",
        daemon.log_text()
    );
    assert!(
        stderr.contains("install the plugin"),
        "with a hint: {stderr}"
    );
    assert!(desktop.portal.keysyms().is_empty());
    assert_eq!(desktop.portal.dialogs(), 0, "nothing asked of the desktop");
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_says_when_there_is_no_portal_or_no_remote_input() {
    let sandbox = Sandbox::new();
    let bus = SessionBus::start(sandbox.path());
    let doctor = || {
        let report = stdout_json(
            &sandbox
                .koru()
                .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
                .env("WAYLAND_DISPLAY", "wayland-koru-test")
                .args(["doctor", "--json", "--only", "os_injector_portal"])
                .output()
                .unwrap(),
        );
        doctor_check(&report, "os_injector_portal").clone()
    };
    let check = doctor();
    assert_eq!(check["blocker"]["code"], "portal_missing", "{check}");
    assert_eq!(check["recovery"][0]["id"], "install_portal");

    // A portal without remote input (a backend that offers none).
    struct Settings;
    #[zbus::interface(name = "org.freedesktop.portal.Settings")]
    impl Settings {
        #[zbus(property, name = "version")]
        fn version(&self) -> u32 {
            1
        }
    }
    let _portal = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.portal.Desktop")
        .unwrap()
        .serve_at(support::portal::PATH, Settings)
        .unwrap()
        .build()
        .await
        .unwrap();
    let check = doctor();
    assert_eq!(
        check["blocker"]["code"], "portal_no_remote_desktop",
        "{check}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_drive_on_wayland_is_submitted_by_one_return_through_the_portal() {
    let desktop = Desktop::start().await;
    let daemon = desktop.daemon();
    // The fake plugin plays Cursor, whose chat has no submit command: it pastes into its
    // fake IDE and the daemon presses Return, here only through the portal, into the
    // window the plugin says has focus.
    let workspace = desktop.sandbox.workspace("cursor");
    let mut plugin = desktop.sandbox.koru();
    plugin
        .envs(desktop.env())
        .args([
            "dev",
            "fake-plugin",
            "--product",
            "cursor",
            "--focused",
            "--workspace",
        ])
        .arg(&workspace)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut plugin = plugin.spawn().unwrap();
    let ready = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        stdout_json(&desktop.sandbox.run(&["sessions", "--json"]))
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["role"] == "plugin"))
    });
    assert!(ready, "the fake plugin connects");
    let mut command = desktop.sandbox.koru();
    command.args(["send", "--ide", "cursor", "--wait", "Ship it ✓"]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    let _ = plugin.kill();
    let _ = plugin.wait();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{}", daemon.log_text());
    let drive = last_drive(&desktop.sandbox);
    assert_eq!(drive["submit_evidence"], "key_pressed");
    let keysyms = desktop.portal.keysyms();
    assert_eq!(
        keysyms,
        [(0xff0d, true), (0xff0d, false)],
        "one Return, nothing else"
    );
    assert_eq!(desktop.portal.typed(), "\n");
}

/// The portal restarted under a running daemon (an update, a crash of
/// xdg-desktop-portal): the daemon's session is gone with it. The drive that meets the
/// dead session fails with the bus's word for it and types nothing; the session is over,
/// so the next drive starts a new one with the new portal (no dialog: the restore token
/// still holds) and lands once.
#[tokio::test(flavor = "multi_thread")]
async fn a_portal_that_restarted_gets_a_new_session_on_the_next_drive() {
    let mut desktop = Desktop::start().await;
    let daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("restart");
    let (output, stderr) = desktop.send(&workspace, "before the restart").await;
    assert!(
        output.status.success(),
        "{stderr}\ndaemon log:\n{}",
        daemon.log_text()
    );
    assert_eq!(
        desktop.portal.state.lock().unwrap().started_sessions.len(),
        1
    );
    let tokens = desktop.portal.state.lock().unwrap().valid_tokens.clone();

    // The old portal leaves the bus; a new one takes its name, knowing the same grants.
    desktop
        .portal
        .connection
        .release_name("org.freedesktop.portal.Desktop")
        .await
        .unwrap();
    let restarted = StandInPortal::serve(&desktop.bus.address).await;
    restarted.state.lock().unwrap().valid_tokens = tokens;
    restarted.state.lock().unwrap().owner = Owner::Other("the user's clipboard".into());
    desktop.portal = restarted;

    let (output, stderr) = desktop.send(&workspace, "into the old session").await;
    assert!(!output.status.success(), "{stderr}");
    assert_eq!(desktop.portal.typed(), "", "nothing reached the new portal");

    let (output, stderr) = desktop.send(&workspace, "after the restart").await;
    assert!(
        output.status.success(),
        "{stderr}\ndaemon log:\n{}",
        daemon.log_text()
    );
    assert!(stderr.contains("os_injector_portal"), "{stderr}");
    assert_eq!(desktop.portal.typed(), "after the restart\n");
    assert_eq!(
        desktop.portal.state.lock().unwrap().started_sessions.len(),
        1,
        "one new session with the new portal"
    );
    assert_eq!(
        desktop.portal.dialogs(),
        0,
        "the restore token spared the dialog"
    );
}

/// `koru status --json`'s `portal`.
fn portal_status(sandbox: &Sandbox) -> Value {
    stdout_json(&sandbox.run(&["status", "--json"]))["portal"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_portal_that_gives_no_restore_token_is_asked_at_each_daemon_start_and_doctor_reads_the_live_session(
) {
    let desktop = Desktop::start().await;
    // GNOME 43: the dialog at every new session, no token to keep.
    desktop.portal.state.lock().unwrap().issue_tokens = false;
    let daemon = desktop.daemon();
    assert_eq!(portal_status(&desktop.sandbox)["consent"], "none");
    let before = desktop.doctor();
    assert_eq!(before["blocker"]["code"], "consent_pending", "{before}");
    assert!(
        before["blocker"]["detail"]
            .as_str()
            .unwrap()
            .contains("in this daemon's life"),
        "{before}"
    );

    let (_plugin, workspace) = desktop.window("no-token");
    let (output, stderr) = desktop.send(&workspace, "first").await;
    assert!(
        output.status.success(),
        "{stderr}
{}",
        daemon.log_text()
    );
    assert_eq!(desktop.portal.dialogs(), 1);
    assert!(!desktop.token_file().exists(), "no token to keep");
    let live = portal_status(&desktop.sandbox);
    assert_eq!(live["consent"], "agreed", "{live}");
    assert_eq!(live["remembered"], false, "{live}");
    assert!(live["since_ms"].as_u64().is_some());
    // Doctor reads the running daemon's session: agreed, and honest about the next start.
    let agreed = desktop.doctor();
    assert_eq!(agreed["status"], "ok", "{agreed}");
    let facts = agreed["facts"].to_string();
    assert!(
        facts.contains("holds a remote-input session the desktop agreed to")
            && facts.contains("asks again at each daemon start"),
        "{agreed}"
    );
    // A second drive reuses the session: no new dialog.
    let (output, _) = desktop.send(&workspace, "second").await;
    assert!(output.status.success());
    assert_eq!(desktop.portal.dialogs(), 1);

    // A new daemon: nothing remembered, so doctor says pending and the next drive asks.
    let mut daemon = daemon;
    daemon.terminate(Duration::from_secs(5));
    drop(daemon);
    let daemon = desktop.daemon();
    assert_eq!(desktop.doctor()["blocker"]["code"], "consent_pending");
    let (_plugin, workspace) = desktop.window("no-token-again");
    let (output, stderr) = desktop.send(&workspace, "third").await;
    assert!(
        output.status.success(),
        "{stderr}
{}",
        daemon.log_text()
    );
    assert_eq!(desktop.portal.dialogs(), 2, "asked again after the restart");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_consent_shows_in_status_and_doctor_as_the_desktops_answer() {
    let desktop = Desktop::start().await;
    desktop.portal.state.lock().unwrap().approve = false;
    let daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("refused");
    let (output, _) = desktop.send(&workspace, "no").await;
    assert!(!output.status.success());
    let live = portal_status(&desktop.sandbox);
    assert_eq!(
        live["consent"],
        "refused",
        "{live}
{}",
        daemon.log_text()
    );
    let check = desktop.doctor();
    assert_eq!(check["blocker"]["code"], "consent_pending");
    assert!(
        check["blocker"]["detail"]
            .as_str()
            .unwrap()
            .contains("did not let the running daemon send keys"),
        "{check}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_clipboard_interface_a_short_prompt_is_typed_and_said_so_and_a_long_one_is_refused_saying_why(
) {
    let desktop = Desktop::start_with(false).await;
    let daemon = desktop.daemon();
    let (_plugin, workspace) = desktop.window("typed");
    let (output, stderr) = desktop.send(&workspace, "short ascii prompt").await;
    assert!(output.status.success(), "{stderr}\n{}", daemon.log_text());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(desktop.portal.typed(), "short ascii prompt\n");
    let drive = last_drive(&desktop.sandbox);
    let attempt = drive["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["outcome"] == "succeeded")
        .unwrap()
        .clone();
    assert_eq!(attempt["interface"], "os_injector_portal");
    assert_eq!(attempt["text"], "typed", "{drive}");
    assert!(
        stderr.contains("typed key by key by OS injection into the window whose Koru plugin reported it had focus"),
        "{stderr}"
    );

    // 2,000 characters of ASCII: refused, saying why and which portal, nothing typed.
    let long = "x".repeat(2_000);
    let (output, stderr) = desktop.send(&workspace, &long).await;
    assert!(!output.status.success());
    let listed = stdout_json(&desktop.sandbox.run(&["drives", "--json"]));
    let drive = listed.as_array().unwrap().last().unwrap().clone();
    assert_eq!(drive["blocker"]["code"], "clipboard_unavailable", "{drive}");
    let detail = drive["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("the prompt is 2000 characters long")
            && detail.contains("RemoteDesktop version")
            && detail.contains("no Clipboard interface"),
        "{detail}"
    );
    let attempt = drive["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["interface"] == "os_injector_portal")
        .unwrap()
        .clone();
    assert!(
        attempt["hint"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Send what can be typed, or paste yourself"),
        "{attempt}\n{stderr}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        desktop.portal.typed(),
        "short ascii prompt\n",
        "nothing more typed"
    );
}

/// A code-server window whose plugin says it has focus and offers the system clipboard
/// (`clipboard_io`): it answers `clipboard` orders on the stand-in desktop's clipboard —
/// the one a paste chord in the focused window pastes from — as the VS Code extension does
/// with `vscode.env.clipboard`. Returns the orders it served when stopped.
fn clipboard_window(
    desktop: &Desktop,
    name: &str,
) -> (
    String,
    Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<Vec<Value>>,
) {
    let workspace = desktop.sandbox.workspace(name);
    let mut hello = plugin_hello("code-server", &workspace);
    hello["window"]["focused"] = json!(true);
    hello["capabilities"]
        .as_array_mut()
        .unwrap()
        .push(json!({"kind": "clipboard_io"}));
    let (mut plugin, _) = greet(&desktop.sandbox.socket(), &hello);
    plugin.set_read_timeout(Duration::from_millis(100));
    let state = desktop.portal.state.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let served = std::thread::spawn(move || {
        let mut orders = Vec::new();
        while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
            let Some(line) = plugin.recv() else { continue };
            match line["type"].as_str() {
                Some("ping") => plugin.send(&json!({"v": 1, "id": line["id"], "type": "pong"})),
                Some("clipboard") => {
                    let mut answer =
                        json!({"v": 1, "type": "clipboard.result", "order_id": line["order_id"]});
                    let mut state = state.lock().unwrap();
                    match line["action"]["kind"].as_str() {
                        Some("read") => {
                            if let Owner::Other(text) = &state.owner {
                                answer["text"] = json!(text);
                            }
                        }
                        Some("write") => {
                            let text = line["action"]["text"].as_str().unwrap().to_string();
                            state.owner = if text.is_empty() {
                                Owner::Nobody
                            } else {
                                Owner::Other(text)
                            };
                        }
                        _ => answer["error"] = json!("unknown action"),
                    }
                    drop(state);
                    plugin.send(&answer);
                    orders.push(line);
                }
                _ => {}
            }
        }
        orders
    });
    (workspace.to_str().unwrap().to_string(), stop, served)
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_clipboard_interface_whole_prompts_go_through_the_plugins_clipboard_byte_exact_once_and_the_clipboard_is_restored(
) {
    let desktop = Desktop::start_with(false).await;
    let daemon = desktop.daemon();
    let (workspace, stop, served) = clipboard_window(&desktop, "plugin-clipboard");
    let long: String = "0123456789abcdefghij".repeat(100);
    let prompts = [PROMPT.to_string(), long];
    let mut expected = String::new();
    for prompt in &prompts {
        let (output, stderr) = desktop.send(&workspace, prompt).await;
        assert!(output.status.success(), "{stderr}\n{}", daemon.log_text());
        assert!(stderr.contains("pasted by OS injection"), "{stderr}");
        expected.push_str(prompt);
        expected.push('\n');
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(desktop.portal.typed(), expected, "byte-exact, once");
        // The user's clipboard is back.
        assert!(
            matches!(&desktop.portal.state.lock().unwrap().owner, Owner::Other(text) if text == "the user's clipboard"),
            "restored"
        );
    }
    let keysyms = desktop.portal.keysyms();
    let presses = |keysym: u32| keysyms.iter().filter(|k| **k == (keysym, true)).count();
    assert_eq!(presses(u32::from(b'v')), 2, "one paste chord per prompt");
    assert_eq!(presses(0xff0d), 2, "one Return per prompt");
    let listed = stdout_json(&desktop.sandbox.run(&["drives", "--json"]));
    for drive in listed.as_array().unwrap() {
        let portal = drive["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["interface"] == "os_injector_portal")
            .unwrap()
            .clone();
        assert_eq!(portal["text"], "pasted", "{drive}");
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let orders = served.join().unwrap();
    let kinds: Vec<&str> = orders
        .iter()
        .map(|o| o["action"]["kind"].as_str().unwrap())
        .collect();
    // Per prompt: the previous text read, the prompt written, the previous text written back.
    assert_eq!(kinds, ["read", "write", "write", "read", "write", "write"]);
    assert_eq!(orders[1]["action"]["text"], PROMPT);
}

//! `koru send --agent claude-code` where no terminal runs Claude Code but an IDE window of the folder has the Claude Code extension's panel: the window's plugin opens the panel with the prompt in its input, the daemon presses Return once into the focused window, and the drive is `done` only on Claude Code's own record — else `needs_user`, the prompt left in the input for the person. The real extension's panel cannot run here (its .vsix is on no registry this machine reaches); it is stood in for, and named so: a real Claude Code (the engine the panel runs) in a tmux session shown by a real xterm under Xvfb — the plugin's "open the panel with the prompt" puts the prompt into its input with a bracketed paste, unsent, as the extension's command fills its input, and the tab check is the real X focus of that xterm. Return reaches Claude Code only through the X server, from the daemon's injector.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use koru_system_tests::agents::{agents_installed, send, AgentSlot, FakeModel, Tmux};
use koru_system_tests::kitty::wait_for;
use koru_system_tests::{greet, Raw, Sandbox, XTerm, Xvfb};
use serde_json::{json, Value};

/// The X window that has the keyboard focus: its owner's pid.
fn focused_pid(display: &str) -> Option<u32> {
    let output = Command::new("xdotool")
        .args(["getwindowfocus", "getwindowpid"])
        .env("DISPLAY", display)
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

/// Gives `xterm`'s window the keyboard focus (no window manager under Xvfb).
fn focus(display: &str, xterm: &XTerm) {
    let search = Command::new("xdotool")
        .args(["search", "--onlyvisible", "--pid", &xterm.pid.to_string()])
        .env("DISPLAY", display)
        .output()
        .unwrap();
    let window = String::from_utf8_lossy(&search.stdout)
        .lines()
        .next()
        .expect("the xterm has a window")
        .to_string();
    let focused = Command::new("xdotool")
        .args(["windowfocus", "--sync", &window])
        .env("DISPLAY", display)
        .status()
        .unwrap();
    assert!(focused.success());
}

/// A VS Code window with the Claude Code extension, stood in for: its plugin session (the
/// panel's commands and Koru's tab check as capabilities, the xterm as its window) serving
/// the panel route's two steps against the Claude Code in `pane`.
struct StandInPanelWindow {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Value>>>,
}

impl StandInPanelWindow {
    fn open(socket: &Path, folder: &Path, xterm_pid: u32, panel: Panel) -> Self {
        let hello = json!({
            "v": 1, "type": "hello", "role": "plugin",
            "protocol": {"min": 1, "max": 1},
            "client": {"name": "stand-in-claude-panel-window", "version": "0"},
            "ide": {"product": "vscode", "version": "1.139.0", "app_name": "Visual Studio Code"},
            "window": {"pid": xterm_pid, "focused": true,
                       "workspace_folders": [folder.to_str().unwrap()]},
            "capabilities": [
                {"kind": "drive_steps"},
                {"kind": "command", "id": "claude-vscode.primaryEditor.open"},
                {"kind": "command", "id": "koru.expectActiveTab"}
            ]
        });
        let (raw, _welcome) = greet(socket, &hello);
        raw.set_read_timeout(Duration::from_millis(200));
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || serve(raw, &panel, &stopping));
        StandInPanelWindow {
            stop,
            thread: Some(thread),
        }
    }

    /// Closes the window; the drive orders it got.
    fn close(mut self) -> Vec<Value> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// Where the stand-in panel is: Claude Code's pane, and the xterm showing it.
struct Panel {
    tmux_socket: PathBuf,
    pane: String,
    display: String,
    xterm_pid: u32,
}

impl Panel {
    fn tmux(&self, args: &[&str], stdin: Option<&str>) -> bool {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.tmux_socket).args(args);
        let Some(text) = stdin else {
            return command.status().unwrap().success();
        };
        use std::io::Write;
        let mut child = command.stdin(std::process::Stdio::piped()).spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        child.wait().unwrap().success()
    }

    /// `claude-vscode.primaryEditor.open(null, prompt)`: the prompt into Claude Code's
    /// input, unsent (a bracketed paste, which Claude Code takes as text, newlines too).
    fn open_with(&self, prompt: &str) -> Result<(), String> {
        let buffer = "koru-panel-prompt";
        if !self.tmux(&["load-buffer", "-b", buffer, "-"], Some(prompt)) {
            return Err("load-buffer failed".into());
        }
        if !self.tmux(
            &[
                "paste-buffer",
                "-p",
                "-r",
                "-d",
                "-b",
                buffer,
                "-t",
                &self.pane,
            ],
            None,
        ) {
            return Err("paste-buffer failed".into());
        }
        Ok(())
    }

    /// `koru.expectActiveTab`: the panel is in front of the focused window — the X focus
    /// is the xterm's — after `settle_ms`.
    fn check(&self, settle_ms: u64) -> Result<(), String> {
        std::thread::sleep(Duration::from_millis(settle_ms));
        match focused_pid(&self.display) {
            Some(pid) if pid == self.xterm_pid => Ok(()),
            other => Err(format!(
                "expected a claudeVSCodePanel tab in front of a focused window; the focus is on pid {other:?}"
            )),
        }
    }
}

fn serve(mut raw: Raw, panel: &Panel, stop: &AtomicBool) -> Vec<Value> {
    let mut orders = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let Some(line) = raw.recv() else { continue };
        match line["type"].as_str() {
            Some("ping") => raw.send(&json!({"v": 1, "id": line["id"], "type": "pong"})),
            Some("drive") => {
                let drive_id = line["drive_id"].clone();
                let ack = |raw: &mut Raw, stage: &str, blocker: Option<Value>| {
                    let mut ack =
                        json!({"v": 1, "type": "ack", "drive_id": drive_id, "stage": stage});
                    if let Some(blocker) = blocker {
                        ack["blocker"] = blocker;
                    }
                    raw.send(&ack);
                };
                ack(&mut raw, "received", None);
                let prompt = line["prompt"].as_str().unwrap_or_default();
                for step in line["steps"].as_array().cloned().unwrap_or_default() {
                    let done = match step["command"].as_str() {
                        Some("claude-vscode.primaryEditor.open") => {
                            assert_eq!(step["args"], json!([null, "$prompt"]));
                            panel.open_with(prompt)
                        }
                        Some("koru.expectActiveTab") => {
                            panel.check(step["args"][0]["settle_ms"].as_u64().unwrap_or(0))
                        }
                        other => Err(format!("{other:?} is not a command of this window")),
                    };
                    match done {
                        Ok(()) => ack(&mut raw, step["proves"].as_str().unwrap(), None),
                        Err(why) => {
                            ack(
                                &mut raw,
                                "failed",
                                Some(json!({"code": "focus_mismatch", "detail": why})),
                            );
                            break;
                        }
                    }
                }
                orders.push(line);
            }
            _ => {}
        }
    }
    orders
}

/// Claude Code (Koru's hooks installed) in a tmux session outside the folder where the
/// daemon looks for tmux servers, shown by an xterm with the focus.
fn claude_in_an_xterm<'a>(
    sandbox: &'a Sandbox,
    xvfb: &Xvfb,
    folder: &Path,
    model: &FakeModel,
) -> (Tmux<'a>, XTerm, Panel) {
    let elsewhere = sandbox.path().join("panel");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let tmux = Tmux::at(sandbox, elsewhere.join("server"));
    let pane = tmux.start_agent("claude-code", folder, model, true);
    let session = String::from_utf8_lossy(
        &tmux
            .run(&["display-message", "-p", "-t", &pane, "#{session_name}"])
            .stdout,
    )
    .trim()
    .to_string();
    let attach = format!(
        "exec tmux -S '{}' attach -t '{session}'",
        tmux.socket.display()
    );
    let xterm = XTerm::start_running(&xvfb.display, sandbox.path(), "claude-panel", &attach);
    focus(&xvfb.display, &xterm);
    let panel = Panel {
        tmux_socket: tmux.socket.clone(),
        pane,
        display: xvfb.display.clone(),
        xterm_pid: xterm.pid,
    };
    (tmux, xterm, panel)
}

fn attempts(drive: &Value) -> Vec<String> {
    drive["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a["interface"].as_str().unwrap(),
                a["outcome"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_prompt_for_claude_code_goes_into_its_panel_is_submitted_by_one_return_and_proven_by_its_hook()
{
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let _daemon = sandbox.start_daemon_with_env(&[], &[("DISPLAY", &xvfb.display)]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let (tmux, _xterm, panel) = claude_in_an_xterm(&sandbox, &xvfb, &folder, &model);
    let pane = panel.pane.clone();
    let window = StandInPanelWindow::open(&sandbox.socket(), &folder, panel.xterm_pid, panel);

    let prompts = [
        "What is the capital of France? Answer in one sentence.",
        "Zeile eins äöü\nline two 日本語 ✓ — \"quoted\" $HOME `tick`",
    ];
    for (sent, prompt) in prompts.iter().enumerate() {
        let (ok, drive) = send(&sandbox, "claude-code", &folder, prompt, true);
        assert!(ok, "{drive:#}\n{}", tmux.screen(&pane));
        assert_eq!(drive["state"], "done", "{drive:#}");
        assert_eq!(drive["route"], "plugin_drive", "{drive:#}");
        assert_eq!(drive["submit_evidence"], "agent_hook", "{drive:#}");
        assert_eq!(drive["verification"], "agent_recorded", "{drive:#}");
        assert_eq!(attempts(&drive), ["claude_code_panel_drive succeeded"]);
        let at = |state: &str| {
            drive["history"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["state"] == state)
                .and_then(|r| r["at_ms"].as_u64())
                .unwrap()
        };
        eprintln!(
            "figure: Claude Code panel drive {sent}: pasted +{} ms, done +{} ms after queued",
            at("pasted") - at("queued"),
            at("done") - at("queued")
        );
        wait_for("the prompt at the model", Duration::from_secs(30), || {
            (model.prompts().len() > sent).then_some(())
        });
        std::thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(model.prompts(), prompts, "byte-exact, once each");
    let orders = window.close();
    assert_eq!(orders.len(), 2, "one drive order per prompt");
    assert!(
        orders.iter().all(|o| o["options"]["submit"] == false),
        "the daemon presses the key"
    );
}

#[test]
fn where_nothing_can_press_return_the_prompt_waits_in_the_panel_needs_user_and_a_persons_enter_sends_it_once(
) {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    // The daemon has no display: no injector can press Return.
    let _daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let (tmux, _xterm, panel) = claude_in_an_xterm(&sandbox, &xvfb, &folder, &model);
    let pane = panel.pane.clone();
    let window = StandInPanelWindow::open(&sandbox.socket(), &folder, panel.xterm_pid, panel);

    let prompt = "Summarise the README in two lines.";
    let (ok, drive) = send(&sandbox, "claude-code", &folder, prompt, true);
    assert!(!ok, "{drive:#}");
    assert_eq!(drive["state"], "failed", "{drive:#}");
    assert_eq!(drive["blocker"]["code"], "needs_user", "{drive:#}");
    let detail = drive["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("the prompt is in the Claude Code tab's input, unsent")
            && detail.contains("press Enter there"),
        "{detail}"
    );
    assert!(drive.get("submit_evidence").is_none(), "{drive:#}");
    assert!(
        drive["attempts"][0]["hint"]
            .as_str()
            .unwrap()
            .starts_with("Press Enter in the Claude Code tab"),
        "{drive:#}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(model.prompts().is_empty(), "nothing was sent");
    assert!(
        tmux.screen(&pane).contains("Summarise the README"),
        "the prompt waits in the input:\n{}",
        tmux.screen(&pane)
    );

    // The person presses Enter in the window: the prompt goes, once.
    let pressed = Command::new("xdotool")
        .args(["key", "Return"])
        .env("DISPLAY", &xvfb.display)
        .status()
        .unwrap();
    assert!(pressed.success());
    wait_for("the prompt at the model", Duration::from_secs(30), || {
        (!model.prompts().is_empty()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(model.prompts(), [prompt]);
    let drives = koru_system_tests::stdout_json(&sandbox.run(&["drives", "--json"]));
    assert_eq!(
        drives[0]["state"], "failed",
        "an ended drive stays as it ended"
    );
    window.close();
}

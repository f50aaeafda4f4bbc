//! Drives into a real Claude Code running in an IDE window's integrated terminal, reached through the window's plugin (`terminals`, `terminal.io`): the daemon finds the agent under the shell the plugin reported, reads its screen and writes to it only through the plugin, and counts the prompt submitted only on the agent's own record. The IDE terminal is a stand-in named as such: a tmux pane outside the folder where the daemon looks for tmux servers, read with `capture-pane` and written with `send-keys -H` after rewriting every `\r?\n` to `\r` as VS Code's `Terminal.sendText` does (docs/research/terminal-places.md §3.3).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use koru_system_tests::agents::{agents_installed, send, AgentSlot, FakeModel, Tmux};
use koru_system_tests::{greet, stdout_json, Raw, Sandbox};
use serde_json::{json, Value};

/// What VS Code's `Terminal.sendText(text, false)` writes for `text`.
fn as_send_text_writes(text: &str) -> String {
    text.replace("\r\n", "\r").replace('\n', "\r")
}

/// A plugin session whose one terminal is a tmux pane: it answers `terminal.io` by reading
/// and writing that pane.
struct StandInIdeWindow {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Value>>>,
}

impl StandInIdeWindow {
    /// `screen_known: false` stands for an extension that has no copy of the terminal's
    /// screen (the agent was started before it connected): reads are answered with an error.
    fn open(
        socket: &Path,
        folder: &Path,
        tmux_socket: PathBuf,
        pane: String,
        screen_known: bool,
    ) -> Self {
        let shell_pid: u32 = String::from_utf8(
            Command::new("tmux")
                .arg("-S")
                .arg(&tmux_socket)
                .args(["display-message", "-p", "-t", &pane, "#{pane_pid}"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .parse()
        .unwrap();
        let hello = json!({
            "v": 1, "type": "hello", "role": "plugin",
            "protocol": {"min": 1, "max": 1},
            "client": {"name": "stand-in-ide-window", "version": "0"},
            "ide": {"product": "vscode", "version": "1.139.0", "app_name": "Visual Studio Code"},
            "window": {"pid": std::process::id(), "workspace_folders": [folder.to_str().unwrap()]},
            "capabilities": [{"kind": "terminal_io"}]
        });
        let (mut raw, _welcome) = greet(socket, &hello);
        raw.send(&json!({"v": 1, "type": "terminals", "terminals": [
            {"terminal_id": "t1", "name": "bash", "shell_pid": shell_pid},
            {"terminal_id": "t2", "name": "zsh"}
        ]}));
        raw.set_read_timeout(Duration::from_millis(200));
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread =
            std::thread::spawn(move || serve(raw, &tmux_socket, &pane, screen_known, &stopping));
        StandInIdeWindow {
            stop,
            thread: Some(thread),
        }
    }

    /// Closes the window; the `terminal.io` orders it served.
    fn close(mut self) -> Vec<Value> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

fn serve(
    mut raw: Raw,
    tmux_socket: &Path,
    pane: &str,
    screen_known: bool,
    stop: &AtomicBool,
) -> Vec<Value> {
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(tmux_socket)
            .args(args)
            .output()
            .unwrap()
    };
    let mut served = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let Some(line) = raw.recv() else { continue };
        match line["type"].as_str() {
            Some("ping") => raw.send(&json!({"v": 1, "id": line["id"], "type": "pong"})),
            Some("terminal.io") => {
                let order = line["order_id"].clone();
                let answer = if line["terminal_id"] != "t1" {
                    json!({"v": 1, "type": "terminal.io.result", "order_id": order,
                           "error": "no such terminal"})
                } else if line["action"]["kind"] == "read" && !screen_known {
                    json!({"v": 1, "type": "terminal.io.result", "order_id": order,
                           "error": "the plugin has not seen this terminal's output"})
                } else if line["action"]["kind"] == "read" {
                    let screen = tmux(&["capture-pane", "-p", "-J", "-t", pane]);
                    json!({"v": 1, "type": "terminal.io.result", "order_id": order,
                           "screen": String::from_utf8_lossy(&screen.stdout)})
                } else {
                    let data = as_send_text_writes(line["action"]["data"].as_str().unwrap());
                    let hex: Vec<String> = data.bytes().map(|b| format!("{b:02x}")).collect();
                    let mut args = vec!["send-keys", "-t", pane, "-H"];
                    args.extend(hex.iter().map(String::as_str));
                    let written = tmux(&args);
                    assert!(written.status.success());
                    json!({"v": 1, "type": "terminal.io.result", "order_id": order})
                };
                raw.send(&answer);
                served.push(line);
            }
            _ => {}
        }
    }
    served
}

#[test]
fn claude_code_in_an_ide_terminal_is_found_typed_into_through_the_plugin_and_proven() {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    // The pane's server is outside `$TMUX_TMPDIR`: the daemon can find the agent only
    // through the terminal the window reported.
    let elsewhere = sandbox.path().join("ide-terminals");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let tmux = Tmux::at(&sandbox, elsewhere.join("server"));
    let pane = tmux.start_agent("claude-code", &folder, &model, true);
    let window = StandInIdeWindow::open(
        &sandbox.socket(),
        &folder,
        tmux.socket.clone(),
        pane.clone(),
        true,
    );

    let listed = stdout_json(&sandbox.run(&["sessions", "--json"]));
    let agent = listed
        .as_array()
        .unwrap()
        .iter()
        // Only this test's folder: agents of other tests on the machine may be listed too.
        .find(|e| e["kind"] == "terminal_agent" && e["workspace"] == folder.to_str().unwrap())
        .unwrap_or_else(|| panic!("the agent is listed: {listed:#}"))
        .clone();
    assert_eq!(agent["product"], "claude-code");
    assert_eq!(agent["terminal"]["kind"], "ide_terminal", "{agent:#}");
    assert_eq!(agent["terminal"]["terminal_id"], "t1");
    assert!(
        agent["terminal"]["place"]
            .as_str()
            .unwrap()
            .contains("terminal \"bash\""),
        "{agent:#}"
    );

    let prompts = [
        "What is the capital of France? Answer in one sentence.",
        "Zeile eins äöü\nline two 日本語 ✓ — \"quoted\" $HOME `tick`",
    ];
    for (sent, prompt) in prompts.iter().enumerate() {
        let (ok, drive) = send(&sandbox, "claude-code", &folder, prompt, true);
        assert!(ok, "{drive:#}\n{}", tmux.screen(&pane));
        assert_eq!(drive["state"], "done", "{drive:#}");
        assert_eq!(drive["submit_evidence"], "agent_hook", "{drive:#}");
        koru_system_tests::kitty::wait_for(
            "the prompt at the model",
            Duration::from_secs(30),
            || (model.prompts().len() > sent).then_some(()),
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(model.prompts(), prompts, "byte-exact, once each");

    // A person's draft: refused, left as it was, nothing written.
    tmux.run(&["send-keys", "-t", &pane, "-l", "hello draft"]);
    std::thread::sleep(Duration::from_millis(500));
    let (ok, refused) = send(&sandbox, "claude-code", &folder, "Do not merge me.", true);
    assert!(!ok);
    assert_eq!(refused["blocker"]["code"], "user_typing", "{refused:#}");
    assert!(tmux.screen(&pane).contains("hello draft"));

    // Every read and write went through the window's plugin, to the terminal it reported.
    let served = window.close();
    let writes: Vec<&Value> = served
        .iter()
        .filter(|o| o["action"]["kind"] == "write")
        .collect();
    assert_eq!(
        writes.len(),
        4,
        "a paste and an Enter per prompt: {served:#?}"
    );
    assert_eq!(
        writes[0]["action"]["data"],
        format!("\u{1b}[200~{}\u{1b}[201~", prompts[0])
    );
    assert_eq!(writes[1]["action"]["data"], "\r");
    assert!(served.iter().all(|o| o["terminal_id"] == "t1"));
    tmux.run(&["send-keys", "-t", &pane, "C-u"]);

    // The window is gone: its terminal is no longer known, the agent cannot be reached.
    let gone = sandbox.run(&[
        "send",
        "--agent",
        "claude-code",
        "--workspace",
        folder.to_str().unwrap(),
        "Anyone there?",
    ]);
    assert!(!gone.status.success());
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(
        said.contains("no_target") || said.contains("no claude-code agent"),
        "{said}"
    );

    // A window whose plugin cannot read the terminal's screen: the drive fails
    // terminal_failed with the plugin's words, and nothing is written.
    let blind = StandInIdeWindow::open(
        &sandbox.socket(),
        &folder,
        tmux.socket.clone(),
        pane.clone(),
        false,
    );
    let (ok, failed) = send(&sandbox, "claude-code", &folder, "Not typed.", true);
    assert!(!ok);
    assert_eq!(failed["blocker"]["code"], "terminal_failed", "{failed:#}");
    assert!(
        failed["blocker"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("has not seen this terminal's output"),
        "{failed:#}"
    );
    let served = blind.close();
    assert!(
        served.iter().all(|o| o["action"]["kind"] == "read"),
        "nothing written: {served:#?}"
    );
    assert!(!model.prompts().iter().any(|p| p == "Not typed."));
}

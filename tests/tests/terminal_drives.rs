//! Drives into the real terminal agents (Claude Code, Codex CLI, Gemini CLI from npm, pinned in tests/agents) running interactively in real tmux panes against the local fake model server: `koru send --agent …` reaches the model byte-exact and exactly once, `submitted` stands on the agent's own record (its transcript, or its hook when installed), a prompt sent while the agent replies goes after the turn, a dialog or a person's draft on screen refuses the drive and is left as it was, Enter still submits with tmux's extended keys on, and an agent that exits fails its queued drive.
//!
//! The agents come from `npm ci --prefix tests/agents` (scripts/test-all.sh and .ci/run do
//! it); without them these tests say so and pass only outside CI.

use std::time::{Duration, Instant};

use koru_system_tests::agents::{agents_installed, drive_of, send, FakeModel, Tmux};
use koru_system_tests::Sandbox;

fn wait_for(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One agent through every case, without or with Koru's hooks.
fn drive_agent(agent: &str, hooks: bool, extended_keys: bool) {
    if !agents_installed() {
        return;
    }
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let tmux = Tmux::new(&sandbox);
    let pane = tmux.start_agent(agent, &folder, &model, hooks);
    if extended_keys {
        let set = tmux.run(&["set", "-s", "extended-keys", "always"]);
        assert!(
            set.status.success(),
            "{}",
            String::from_utf8_lossy(&set.stderr)
        );
    }
    let evidence = if hooks {
        "agent_hook"
    } else {
        "agent_transcript"
    };

    // A one-line prompt, then a multi-line unicode one: each reaches the model once, as
    // typed, and the drive is submitted on the agent's own record.
    let one_line = "What is the capital of France? Answer in one sentence.";
    let (ok, drive) = send(&sandbox, agent, &folder, one_line, true);
    assert!(ok, "{agent}: {drive:#}\n{}", tmux.screen(&pane));
    assert_eq!(drive["state"], "done", "{drive:#}");
    assert_eq!(drive["submit_evidence"], evidence, "{drive:#}");
    assert_eq!(drive["verification"], "agent_recorded");
    let multi_line = "Zeile eins äöü\nline two 日本語 ✓ — \"quoted\" $HOME `tick`";
    let (ok, drive) = send(&sandbox, agent, &folder, multi_line, true);
    assert!(ok, "{agent}: {drive:#}\n{}", tmux.screen(&pane));
    assert_eq!(drive["submit_evidence"], evidence, "{drive:#}");
    // A prompt starting with `/` arrives as text, not as a slash command (Claude Code keeps
    // the space Koru types before it, Codex trims it); Gemini CLI would record it as a
    // command, unprovable, so it is refused there.
    let slashed = "/tmp/notes is where my notes are: what kind of path is that?";
    let expected = if agent == "gemini-cli" {
        let output = sandbox.run_with_stdin(
            &[
                "send",
                "--agent",
                agent,
                "--workspace",
                folder.to_str().unwrap(),
                "-",
            ],
            slashed.as_bytes(),
        );
        assert!(!output.status.success());
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("starts with `/`"), "{said}");
        2
    } else {
        let (ok, drive) = send(&sandbox, agent, &folder, slashed, true);
        assert!(ok, "{agent}: {drive:#}\n{}", tmux.screen(&pane));
        3
    };
    wait_for(
        "the model to get the prompts",
        Duration::from_secs(20),
        || model.prompts().len() >= expected,
    );
    let prompts = model.prompts();
    assert_eq!(
        prompts[..2],
        [one_line, multi_line],
        "byte-exact, once each"
    );
    if expected == 3 {
        assert_eq!(prompts[2].trim_start(), slashed, "{prompts:?}");
    }
    assert_eq!(prompts.len(), expected, "{prompts:?}");

    // Sent while the agent replies (slowly): typed only after the turn.
    let slow = "Please reply slowly now.";
    let (ok, first) = send(&sandbox, agent, &folder, slow, true);
    assert!(ok, "{first:#}");
    let after = "And now a short answer, please.";
    let (ok, second) = send(&sandbox, agent, &folder, after, true);
    assert!(ok, "{agent}: {second:#}\n{}", tmux.screen(&pane));
    // The agent records a prompt before it sends it to the model.
    wait_for(
        "the model to get the second prompt",
        Duration::from_secs(20),
        || model.prompts().iter().any(|p| p == after),
    );
    let times = model.prompt_times();
    let at = |text: &str| {
        times
            .iter()
            .find(|(p, _)| p == text)
            .map(|(_, t)| *t)
            .unwrap()
    };
    assert!(
        at(after) - at(slow) >= 4.0,
        "{agent}: the second prompt reached the model {:.1} s after the slow one (its reply takes ~6 s)",
        at(after) - at(slow)
    );

    // A person's draft in the input box: refused, the draft left as it was.
    wait_for("the agent to be idle", Duration::from_secs(30), || {
        drive_of(&sandbox, second["drive_id"].as_str().unwrap())["observation"]["stage"]
            == "replied"
    });
    std::thread::sleep(Duration::from_millis(500));
    let typed = tmux.run(&["send-keys", "-t", &pane, "-l", "hello draft"]);
    assert!(typed.status.success());
    std::thread::sleep(Duration::from_millis(500));
    let (ok, refused) = send(&sandbox, agent, &folder, "Do not merge me.", true);
    assert!(!ok, "{refused:#}");
    assert_eq!(refused["blocker"]["code"], "user_typing", "{refused:#}");
    assert!(
        tmux.screen(&pane).contains("hello draft"),
        "{}",
        tmux.screen(&pane)
    );
    for _ in 0.."hello draft".len() {
        tmux.run(&["send-keys", "-t", &pane, "BSpace"]);
    }
    std::thread::sleep(Duration::from_millis(500));

    // A permission dialog on screen: the next drive is refused and the dialog stays.
    let asks = "This needs permission: create the probe file.";
    let (ok, drive) = send(&sandbox, agent, &folder, asks, true);
    assert!(ok, "{agent}: {drive:#}\n{}", tmux.screen(&pane));
    // The dialog names the command it asks about; wait until the screen settles on it.
    wait_for("the permission dialog", Duration::from_secs(30), || {
        let first = tmux.screen(&pane);
        std::thread::sleep(Duration::from_millis(700));
        first.contains("koru-permission-probe") && tmux.screen(&pane) == first
    });
    let before = tmux.screen(&pane);
    let (ok, refused) = send(&sandbox, agent, &folder, "Are you there?", true);
    assert!(!ok);
    assert_eq!(refused["blocker"]["code"], "needs_input", "{refused:#}");
    assert_eq!(tmux.screen(&pane), before, "the dialog is left as it was");
    assert!(
        !folder.join("koru-permission-probe").exists(),
        "nothing answered the dialog"
    );
    assert!(
        !model.prompts().iter().any(|p| p == "Are you there?"),
        "nothing typed into the dialog"
    );
}

#[test]
fn claude_code_in_tmux_without_hooks() {
    drive_agent("claude-code", false, false);
}

#[test]
fn claude_code_in_tmux_with_hooks_and_extended_keys() {
    drive_agent("claude-code", true, true);
}

#[test]
fn codex_in_tmux_without_hooks() {
    drive_agent("codex", false, false);
}

#[test]
fn codex_in_tmux_with_hooks() {
    drive_agent("codex", true, false);
}

#[test]
fn gemini_cli_in_tmux_without_hooks_and_extended_keys() {
    drive_agent("gemini-cli", false, true);
}

#[test]
fn gemini_cli_in_tmux_with_hooks() {
    drive_agent("gemini-cli", true, false);
}

#[test]
fn an_agent_that_exits_fails_the_drive_queued_behind_its_reply() {
    if !agents_installed() {
        return;
    }
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let tmux = Tmux::new(&sandbox);
    let pane = tmux.start_agent("claude-code", &folder, &model, false);
    let (ok, slow) = send(
        &sandbox,
        "claude-code",
        &folder,
        "Please reply slowly now.",
        true,
    );
    assert!(ok, "{slow:#}\n{}", tmux.screen(&pane));
    let (_, queued) = send(&sandbox, "claude-code", &folder, "Still there?", false);
    let drive_id = queued["drive_id"].as_str().unwrap().to_string();
    let pid = tmux.run(&["display", "-p", "-t", &pane, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&pid.stdout).trim().parse().unwrap();
    koru_system_tests::signal(pid, nix::sys::signal::Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(15);
    while drive_of(&sandbox, &drive_id)["state"] != "failed" {
        assert!(
            Instant::now() < deadline,
            "the queued drive did not fail: {:#}\nproc {pid}: {:?}\nsessions: {}\n{}",
            drive_of(&sandbox, &drive_id),
            std::fs::read_to_string(format!("/proc/{pid}/stat")),
            String::from_utf8_lossy(&sandbox.run(&["sessions", "--json"]).stdout),
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let failed = drive_of(&sandbox, &drive_id);
    assert_eq!(failed["blocker"]["code"], "agent_exited", "{failed:#}");
    assert!(!model.prompts().iter().any(|p| p == "Still there?"));
}

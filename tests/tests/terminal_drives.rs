//! Drives into the real terminal agents (Claude Code, Codex CLI, Gemini CLI, opencode from npm, pinned in tests/agents) running interactively in real tmux panes against the local fake model server: `koru send --agent …` reaches the model byte-exact and exactly once, `submitted` stands on the agent's own record (its transcript, or its hook when installed; opencode's server's event stream), a prompt sent while the agent replies goes after the turn, a dialog or a person's draft on screen refuses the drive and is left as it was (opencode: the draft is never touched and the prompt goes), Enter still submits with tmux's extended keys on, and an agent that exits fails its queued drive. At most three agents run at once (`AgentSlot`).
//!
//! The agents come from `npm ci --prefix tests/agents` (scripts/test-all.sh and .ci/run do
//! it); without them these tests say so and pass only outside CI.

use std::time::{Duration, Instant};

use koru_system_tests::agents::{agents_installed, drive_of, send, AgentSlot, FakeModel, Tmux};
use koru_system_tests::Sandbox;

fn wait_for(what: &str, within: Duration, check: impl FnMut() -> bool) {
    wait_for_or(what, within, check, String::new);
}

/// As `wait_for`; on timeout the message also holds `context()` (a screen, a log).
fn wait_for_or(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The permission dialog on an agent's screen, from its question to the end of the screen,
/// each line's trailing blanks cut (what a keystroke into it would change: the options and
/// which one is selected); `None` when no dialog about the probe file shows. Lines above it
/// are left out: Claude Code animates its tips there.
fn dialog_view(screen: &str) -> Option<String> {
    const QUESTIONS: [&str; 4] = [
        "Do you want to proceed?",
        "Would you like to run the following command?",
        "Allow execution of",
        "Permission required",
    ];
    if !screen.contains("koru-permission-probe") {
        return None;
    }
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let start = lines
        .iter()
        .rposition(|line| QUESTIONS.iter().any(|q| line.contains(q)))?;
    Some(lines[start..].join("\n").trim_end().to_string())
}

/// `koru send --wait-reply` prints the agent's whole reply, read from its own store — also
/// when its Stop hook says the turn ended before the transcript has the reply (Claude Code).
fn whole_reply_is_printed(sandbox: &Sandbox, agent: &str, folder: &std::path::Path) {
    let output = sandbox.run_with_stdin(
        &[
            "send",
            "--agent",
            agent,
            "--workspace",
            folder.to_str().unwrap(),
            "--wait-reply",
            "--timeout",
            "60",
            "-",
        ],
        b"Reply in full, please.",
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{agent}: {printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        printed
            .ends_with("\nYou asked: Reply in full, please.. This is the fake model's answer.\n"),
        "{agent}: the whole reply is printed: {printed}"
    );
}

/// A slow reply, and a prompt sent meanwhile: it reaches the model only after the turn
/// (the slow reply takes ~6 s), and its drive then sees the reply. `context` says more on
/// failure (the pane's screen, the daemon's log).
fn sent_while_replying_goes_after_the_turn(
    sandbox: &Sandbox,
    agent: &str,
    folder: &std::path::Path,
    model: &FakeModel,
    context: &dyn Fn() -> String,
) {
    let slow = "Please reply slowly now.";
    let (ok, first) = send(sandbox, agent, folder, slow, true);
    assert!(ok, "{agent}: {first:#}\n{}", context());
    let after = "And now a short answer, please.";
    let (ok, second) = send(sandbox, agent, folder, after, true);
    assert!(ok, "{agent}: {second:#}\n{}", context());
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
    wait_for("the agent to be idle", Duration::from_secs(30), || {
        drive_of(sandbox, second["drive_id"].as_str().unwrap())["observation"]["stage"] == "replied"
    });
}

/// One agent through every case, without or with Koru's hooks.
fn drive_agent(agent: &str, hooks: bool, extended_keys: bool) {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
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
    sent_while_replying_goes_after_the_turn(&sandbox, agent, &folder, &model, &|| {
        tmux.screen(&pane)
    });
    whole_reply_is_printed(&sandbox, agent, &folder);

    // A person's draft in the input box: refused, the draft left as it was.
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
    wait_for_or(
        "the permission dialog",
        Duration::from_secs(30),
        || {
            let first = dialog_view(&tmux.screen(&pane));
            std::thread::sleep(Duration::from_millis(700));
            first.is_some() && dialog_view(&tmux.screen(&pane)) == first
        },
        || {
            let first = tmux.screen(&pane);
            std::thread::sleep(Duration::from_millis(700));
            let second = tmux.screen(&pane);
            let changed: Vec<String> = first
                .lines()
                .zip(second.lines())
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("{a:?} → {b:?}"))
                .collect();
            format!(
                "{drive:#}\n{second}\nchanged in 700 ms: {changed:#?}\nprompts: {:?}",
                model.prompts()
            )
        },
    );
    let before = dialog_view(&tmux.screen(&pane));
    let (ok, refused) = send(&sandbox, agent, &folder, "Are you there?", true);
    assert!(!ok);
    assert_eq!(refused["blocker"]["code"], "needs_input", "{refused:#}");
    assert_eq!(
        dialog_view(&tmux.screen(&pane)),
        before,
        "the dialog is left as it was"
    );
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

/// `agent` killed while a drive waits behind its slow reply: the drive fails `agent_exited`
/// and nothing reaches the model.
fn agent_exits_with_a_drive_queued_behind_its_reply(agent: &str) {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let tmux = Tmux::new(&sandbox);
    let env: &[(&str, &str)] = if agent == "opencode" {
        &[("OPENCODE_PORT", "0")]
    } else {
        &[]
    };
    let pane = tmux.start_agent_with(agent, &folder, &model, false, env);
    let (ok, slow) = send(&sandbox, agent, &folder, "Please reply slowly now.", true);
    assert!(ok, "{slow:#}\n{}", tmux.screen(&pane));
    let (_, queued) = send(&sandbox, agent, &folder, "Still there?", false);
    let drive_id = queued["drive_id"].as_str().unwrap().to_string();
    let pid = tmux.run(&["display", "-p", "-t", &pane, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&pid.stdout).trim().parse().unwrap();
    koru_system_tests::signal(pid, nix::sys::signal::Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(15);
    while drive_of(&sandbox, &drive_id)["state"] != "failed" {
        assert!(
            Instant::now() < deadline,
            "{agent}: the queued drive did not fail: {:#}\nproc {pid}: {:?}\nsessions: {}\n{}",
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

#[test]
fn claude_code_exiting_fails_the_drive_queued_behind_its_reply() {
    agent_exits_with_a_drive_queued_behind_its_reply("claude-code");
}

#[test]
fn codex_exiting_fails_the_drive_queued_behind_its_reply() {
    agent_exits_with_a_drive_queued_behind_its_reply("codex");
}

#[test]
fn gemini_cli_exiting_fails_the_drive_queued_behind_its_reply() {
    agent_exits_with_a_drive_queued_behind_its_reply("gemini-cli");
}

#[test]
fn opencode_exiting_fails_the_drive_queued_behind_its_reply() {
    agent_exits_with_a_drive_queued_behind_its_reply("opencode");
}

/// opencode through its own server (started with `--port 0`: Koru finds the port it listens
/// on): prompts posted byte-exact and once, proven by its event stream, replied; a prompt
/// sent while it answers goes after the turn; a person's draft in its input box is left
/// alone and the prompt still goes (nothing is typed); a pending permission refuses the
/// drive and stays; an opencode serving nothing is named as such.
#[test]
fn opencode_through_its_server() {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let tmux = Tmux::new(&sandbox);
    let pane = tmux.start_agent_with(
        "opencode",
        &folder,
        &model,
        false,
        &[("OPENCODE_PORT", "0")],
    );
    let agent = "opencode";

    let one_line = "What is the capital of France? Answer in one sentence.";
    let (ok, drive) = send(&sandbox, agent, &folder, one_line, true);
    assert!(
        ok,
        "{drive:#}\n{}\n{}",
        tmux.screen(&pane),
        daemon.log_text()
    );
    assert_eq!(drive["state"], "done", "{drive:#}");
    assert_eq!(drive["route"], "native_send", "{drive:#}");
    assert_eq!(drive["submit_evidence"], "agent_transcript", "{drive:#}");
    assert_eq!(drive["verification"], "agent_recorded");
    let multi_line = "Zeile eins äöü\nline two 日本語 ✓ — \"quoted\" $HOME `tick`";
    let (ok, drive) = send(&sandbox, agent, &folder, multi_line, true);
    assert!(ok, "{drive:#}\n{}", daemon.log_text());
    let first_chat = drive["observation"]["chat_id"].clone();
    assert!(
        first_chat.as_str().is_some_and(|c| c.starts_with("ses_")),
        "{drive:#}"
    );
    // A leading `/` is text on this route: the server does not read slash commands.
    let slashed = "/tmp/notes is where my notes are: what kind of path is that?";
    let (ok, drive) = send(&sandbox, agent, &folder, slashed, true);
    assert!(ok, "{drive:#}\n{}", daemon.log_text());
    assert_eq!(
        drive["observation"]["chat_id"], first_chat,
        "the same conversation"
    );
    wait_for(
        "the model to get the prompts",
        Duration::from_secs(20),
        || model.prompts().len() >= 3,
    );
    assert_eq!(
        model.prompts(),
        [one_line, multi_line, slashed],
        "byte-exact, once each"
    );
    wait_for("the reply to be observed", Duration::from_secs(20), || {
        drive_of(&sandbox, drive["drive_id"].as_str().unwrap())["observation"]["stage"] == "replied"
    });

    // Sent while opencode replies (slowly): posted only after the turn.
    sent_while_replying_goes_after_the_turn(&sandbox, agent, &folder, &model, &|| {
        daemon.log_text()
    });
    whole_reply_is_printed(&sandbox, agent, &folder);

    // A person's draft in the input box: nothing is typed, so it stays, and the prompt goes.
    let typed = tmux.run(&["send-keys", "-t", &pane, "-l", "hello draft"]);
    assert!(typed.status.success());
    std::thread::sleep(Duration::from_millis(500));
    let beside = "Posted beside a draft.";
    let (ok, drive) = send(&sandbox, agent, &folder, beside, true);
    assert!(ok, "{drive:#}\n{}", daemon.log_text());
    wait_for(
        "the reply beside the draft",
        Duration::from_secs(20),
        || {
            drive_of(&sandbox, drive["drive_id"].as_str().unwrap())["observation"]["stage"]
                == "replied"
        },
    );
    let screen = tmux.screen(&pane);
    assert!(screen.contains("hello draft"), "{screen}");
    assert!(
        screen.contains(beside),
        "the TUI shows the posted prompt: {screen}"
    );
    for _ in 0.."hello draft".len() {
        tmux.run(&["send-keys", "-t", &pane, "BSpace"]);
    }

    // A pending permission: the next drive is refused, the request stays unanswered.
    let asks = "This needs permission: create the probe file.";
    let (ok, drive) = send(&sandbox, agent, &folder, asks, true);
    assert!(ok, "{drive:#}\n{}", daemon.log_text());
    wait_for("the permission dialog", Duration::from_secs(30), || {
        tmux.screen(&pane).contains("Permission required")
    });
    let (ok, refused) = send(&sandbox, agent, &folder, "Are you there?", true);
    assert!(!ok);
    assert_eq!(refused["blocker"]["code"], "needs_input", "{refused:#}");
    assert!(
        refused["blocker"]["detail"]
            .as_str()
            .unwrap()
            .contains("koru-permission-probe"),
        "{refused:#}"
    );
    assert!(
        tmux.screen(&pane).contains("Permission required"),
        "the dialog stays"
    );
    assert!(
        !folder.join("koru-permission-probe").exists(),
        "nothing answered it"
    );
    assert!(!model.prompts().iter().any(|p| p == "Are you there?"));

    // An opencode started without `--port` serves nothing: the drive says how to fix it.
    let plain = sandbox.workspace("plain");
    let other_root = sandbox.path().join("plain-root");
    std::fs::create_dir_all(&other_root).unwrap();
    tmux.start_agent_with(
        "opencode",
        &plain,
        &model,
        false,
        &[("AGENT_ROOT", other_root.to_str().unwrap())],
    );
    let (ok, refused) = send(&sandbox, agent, &plain, "Hello?", true);
    assert!(!ok, "{refused:#}");
    assert_eq!(
        refused["blocker"]["code"], "agent_server_missing",
        "{refused:#}"
    );
    assert!(
        refused["blocker"]["detail"]
            .as_str()
            .unwrap()
            .contains("--port"),
        "{refused:#}"
    );
}

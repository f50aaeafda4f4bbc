//! Drives into the real terminal agents (Claude Code, Codex CLI and Gemini CLI from npm, pinned in tests/agents) running in the windows of a real kitty under Xvfb, remote control on, against the local fake model server: the daemon finds each agent in its own window of the one kitty (from what kitty started, `KITTY_LISTEN_ON`), a one-line and a multi-line unicode prompt reach the model byte-exact and once, `submitted` stands on the agent's own record (hook or transcript), each prompt goes to the agent it names and no other, a person's draft or a dialog on screen refuses the drive and is left as it was.
//!
//! The agents come from `npm ci --prefix tests/agents` (scripts/test-all.sh and .ci/run do
//! it); without them these tests say so and pass only outside CI.

use std::time::Duration;

use koru_system_tests::agents::{agents_installed, send, AgentSlot, FakeModel};
use koru_system_tests::kitty::{wait_for, Kitty};
use koru_system_tests::{stdout_json, Sandbox, Xvfb};

/// The permission dialog on screen, from its question down (`None`: none shows). The
/// windows share one small OS window: the command it asks about may be scrolled off.
fn dialog_view(screen: &str) -> Option<String> {
    const QUESTIONS: [&str; 2] = [
        "Do you want to proceed?",
        "Would you like to run the following command?",
    ];
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let start = lines
        .iter()
        .rposition(|line| QUESTIONS.iter().any(|q| line.contains(q)))?;
    Some(lines[start..].join("\n").trim_end().to_string())
}

#[test]
fn claude_code_and_codex_in_two_windows_of_one_kitty() {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let xvfb = Xvfb::start();
    let kitty = Kitty::start(
        &xvfb,
        &sandbox.path().join("kitty.sock"),
        "echo first window; exec sleep 600",
    );
    let claude_folder = sandbox.workspace("claude-repo");
    let codex_folder = sandbox.workspace("codex-repo");
    let claude = kitty.start_agent(&sandbox, "claude-code", &claude_folder, &model, true);
    let codex = kitty.start_agent(&sandbox, "codex", &codex_folder, &model, false);

    // Both are listed, each in its own window of the one kitty.
    let listed = stdout_json(&sandbox.run(&["sessions", "--json"]));
    let agents: Vec<serde_json::Value> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["kind"] == "terminal_agent")
        .cloned()
        .collect();
    let place = |product: &str| {
        agents
            .iter()
            .find(|a| a["product"] == product)
            .unwrap_or_else(|| panic!("{product} listed: {listed:#}"))["terminal"]
            .clone()
    };
    for (product, window, folder) in [
        ("claude-code", claude, &claude_folder),
        ("codex", codex, &codex_folder),
    ] {
        let terminal = place(product);
        assert_eq!(terminal["kind"], "kitty", "{listed:#}");
        assert_eq!(terminal["listen_on"], kitty.listen_on.as_str());
        assert_eq!(terminal["window_id"], window, "{listed:#}");
        let agent = agents.iter().find(|a| a["product"] == product).unwrap();
        assert_eq!(agent["workspace"], folder.to_str().unwrap());
    }

    // A one-line and a multi-line unicode prompt to each: each reaches the model once, as
    // sent, from the agent it names, submitted on that agent's own record.
    let one_line = "What is the capital of France? Answer in one sentence.";
    let multi_line = "Zeile eins äöü\nline two 日本語 ✓ — \"quoted\" $HOME `tick`";
    let mut expected = Vec::new();
    for (agent, window, folder, evidence) in [
        ("claude-code", claude, &claude_folder, "agent_hook"),
        ("codex", codex, &codex_folder, "agent_transcript"),
    ] {
        for text in [one_line, multi_line] {
            let prompt = format!("{text} ({agent})");
            let (ok, drive) = send(&sandbox, agent, folder, &prompt, true);
            assert!(ok, "{agent}: {drive:#}\n{}", kitty.screen(window));
            assert_eq!(drive["state"], "done", "{drive:#}");
            assert_eq!(drive["route"], "terminal_input", "{drive:#}");
            assert_eq!(drive["submit_evidence"], evidence, "{drive:#}");
            assert_eq!(drive["verification"], "agent_recorded", "{drive:#}");
            expected.push(prompt);
            wait_for(
                "the model to get the prompt",
                Duration::from_secs(30),
                || (model.prompts().len() >= expected.len()).then_some(()),
            );
            // Let the agent finish its turn before the next drive.
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    assert_eq!(model.prompts(), expected, "byte-exact, once each, in order");
    // The prompts named for Codex are in Codex's rollout, not Claude Code's transcript.
    let home = sandbox.path().join("home");
    let claude_text = read_tree(&home.join(".claude/projects"));
    let codex_text = read_tree(&home.join(".codex/sessions"));
    assert!(claude_text.contains("(claude-code)") && !claude_text.contains("(codex)"));
    assert!(codex_text.contains("(codex)") && !codex_text.contains("(claude-code)"));

    // A person's draft in Codex's input box: refused, the draft left as it was.
    kitty.type_text(codex, "hello draft");
    wait_for("the draft on screen", Duration::from_secs(10), || {
        kitty.screen(codex).contains("hello draft").then_some(())
    });
    let (ok, refused) = send(&sandbox, "codex", &codex_folder, "Do not merge me.", true);
    assert!(!ok, "{refused:#}");
    assert_eq!(refused["blocker"]["code"], "user_typing", "{refused:#}");
    assert!(kitty.screen(codex).contains("hello draft"));
    kitty.type_text(codex, &"\u{7f}".repeat("hello draft".len()));

    // A permission dialog in Claude Code's window: the next drive is refused, the dialog
    // stays as it was and nothing answers it.
    let asks = "This needs permission: create the probe file.";
    let (ok, drive) = send(&sandbox, "claude-code", &claude_folder, asks, true);
    assert!(ok, "{drive:#}\n{}", kitty.screen(claude));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let before = loop {
        let first = dialog_view(&kitty.screen(claude));
        std::thread::sleep(Duration::from_millis(700));
        if first.is_some() && dialog_view(&kitty.screen(claude)) == first {
            break first;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no permission dialog settled on screen: {drive:#}\n{}\nprompts: {:?}",
            kitty.screen(claude),
            model.prompts()
        );
    };
    let (ok, refused) = send(
        &sandbox,
        "claude-code",
        &claude_folder,
        "Are you there?",
        true,
    );
    assert!(!ok);
    assert_eq!(refused["blocker"]["code"], "needs_input", "{refused:#}");
    assert_eq!(dialog_view(&kitty.screen(claude)), before);
    assert!(!claude_folder.join("koru-permission-probe").exists());
    assert!(!model.prompts().iter().any(|p| p == "Are you there?"));
}

/// Every file's text under `dir`, concatenated.
fn read_tree(dir: &std::path::Path) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return text;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&read_tree(&path));
        } else if let Ok(content) = std::fs::read_to_string(&path) {
            text.push_str(&content);
        }
    }
    text
}

/// Gemini CLI in kitty, where it can use kitty's keyboard protocol (in tmux it cannot): a
/// one-line and a multi-line unicode prompt arrive byte-exact and once, the Enter sent as a
/// carriage return submits, proven by its chat file.
#[test]
fn gemini_cli_in_kitty() {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let xvfb = Xvfb::start();
    let kitty = Kitty::start(
        &xvfb,
        &sandbox.path().join("kitty.sock"),
        "echo first window; exec sleep 600",
    );
    let folder = sandbox.workspace("repo");
    let gemini = kitty.start_agent(&sandbox, "gemini-cli", &folder, &model, false);
    let prompts = [
        "What is the capital of France? Answer in one sentence.",
        "Zeile eins äöü\nline two 日本語 ✓ — \"quoted\" $HOME `tick`",
    ];
    for (sent, prompt) in prompts.iter().enumerate() {
        let (ok, drive) = send(&sandbox, "gemini-cli", &folder, prompt, true);
        assert!(ok, "{drive:#}\n{}", kitty.screen(gemini));
        assert_eq!(drive["submit_evidence"], "agent_transcript", "{drive:#}");
        wait_for(
            "the model to get the prompt",
            Duration::from_secs(30),
            || (model.prompts().len() > sent).then_some(()),
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(model.prompts(), prompts, "byte-exact, once each");
}

//! `koru hook install|uninstall` on the agents' real settings paths under a sandbox HOME, and the installed command run as each agent runs it: the user's own hooks and settings survive, a backup is kept, a broken file is refused untouched, `--dry-run` writes nothing, and an installed Codex or Gemini CLI hook tells the real daemon what it saw.

use std::time::Duration;

use koru_system_tests::Sandbox;
use serde_json::{json, Value};

fn text(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The commands of every hook entry of an agent's settings, by event.
fn commands(settings: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (event, groups) in settings["hooks"].as_object().into_iter().flatten() {
        for group in groups.as_array().into_iter().flatten() {
            for hook in group["hooks"].as_array().into_iter().flatten() {
                found.push((
                    event.clone(),
                    hook["command"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    found
}

#[test]
fn install_adds_koru_beside_the_users_hooks_and_uninstall_takes_exactly_that_out() {
    let sandbox = Sandbox::new();
    let home = sandbox.path().join("home");
    let claude = home.join(".claude/settings.json");
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    let mine = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"notify-send done\"\n          }\n        ]\n      }\n    ]\n  }\n}\n";
    std::fs::write(&claude, mine).unwrap();

    // --dry-run shows the change and writes nothing.
    let dry = sandbox.run(&[
        "hook",
        "install",
        "claude-code",
        "codex",
        "gemini-cli",
        "--dry-run",
    ]);
    assert!(dry.status.success(), "{}", text(&dry));
    let said = text(&dry);
    assert!(
        said.contains("+++ ") && said.contains("koru hook claude-code"),
        "{said}"
    );
    assert!(said.contains("--dry-run: nothing written"), "{said}");
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), mine);
    assert!(!home.join(".codex/hooks.json").exists());

    let installed = sandbox.run(&["hook", "install", "claude-code", "codex", "gemini-cli"]);
    assert!(installed.status.success(), "{}", text(&installed));
    let said = text(&installed);
    assert!(
        said.contains("open /hooks in Codex"),
        "Codex's trust step is said: {said}"
    );
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&claude).unwrap()).unwrap();
    assert_eq!(settings["model"], "opus");
    let claude_hooks = commands(&settings);
    assert_eq!(
        settings["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done",
        "the user's hook stays first"
    );
    let events: Vec<&str> = claude_hooks
        .iter()
        .filter(|(_, c)| c.ends_with(" hook claude-code"))
        .map(|(e, _)| e.as_str())
        .collect();
    assert_eq!(events.len(), 7, "{claude_hooks:?}");
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PermissionRequest",
        "Notification",
        "Stop",
        "StopFailure",
        "SessionEnd",
    ] {
        assert!(events.contains(&event), "{event} in {events:?}");
    }
    let backups: Vec<_> = std::fs::read_dir(claude.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("settings.json.koru-backup-")
        })
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read_to_string(backups[0].path()).unwrap(), mine);
    let codex: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(commands(&codex).len(), 5);
    let gemini: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"], 5000,
        "milliseconds for Gemini CLI"
    );

    // A second install finds everything in place.
    let again = sandbox.run(&["hook", "install", "claude-code"]);
    assert!(text(&again).contains("already in"), "{}", text(&again));

    let removed = sandbox.run(&["hook", "uninstall", "claude-code", "codex", "gemini-cli"]);
    assert!(removed.status.success(), "{}", text(&removed));
    assert_eq!(
        std::fs::read_to_string(&claude).unwrap(),
        mine,
        "the user's file, byte for byte"
    );
    let codex: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(codex, json!({}));
}

#[test]
fn a_settings_file_that_does_not_parse_is_refused_and_left_as_it_is() {
    let sandbox = Sandbox::new();
    let gemini = sandbox.path().join("home/.gemini/settings.json");
    std::fs::create_dir_all(gemini.parent().unwrap()).unwrap();
    std::fs::write(&gemini, "{ \"theme\": \"dark\", }}").unwrap();
    // Planned before anything is written: the good file is not touched either.
    let output = sandbox.run(&["hook", "install", "claude-code", "gemini-cli"]);
    assert!(!output.status.success());
    let said = text(&output);
    assert!(
        said.contains(&format!("{}: not valid JSON", gemini.display())),
        "{said}"
    );
    assert!(said.contains("the file was left as it is"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&gemini).unwrap(),
        "{ \"theme\": \"dark\", }}"
    );
    assert!(!sandbox.path().join("home/.claude/settings.json").exists());
}

#[test]
fn installed_codex_and_gemini_hooks_tell_the_daemon_and_print_nothing() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    assert!(sandbox
        .run(&["hook", "install", "codex", "gemini-cli"])
        .status
        .success());
    // Run each installed command line as the agent does: through a shell, JSON on stdin.
    let run_installed = |settings: &str, event: &str, input: Value| {
        let settings: Value = serde_json::from_str(
            &std::fs::read_to_string(sandbox.path().join("home").join(settings)).unwrap(),
        )
        .unwrap();
        let command = settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string();
        let mut child = std::process::Command::new("sh")
            .args(["-c", &command])
            .env("HOME", sandbox.path().join("home"))
            .env("XDG_RUNTIME_DIR", sandbox.path().join("run"))
            .env("XDG_STATE_HOME", sandbox.path().join("state"))
            .env("KORU_SOCKET", sandbox.socket())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        assert!(
            output.stdout.is_empty() && output.stderr.is_empty(),
            "{}",
            text(&output)
        );
    };
    run_installed(
        ".codex/hooks.json",
        "PermissionRequest",
        json!({"session_id": "0198c4cf-8587", "turn_id": "3",
        "transcript_path": null, "cwd": "/w", "hook_event_name": "PermissionRequest", "model": "gpt-5",
        "permission_mode": "default", "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}),
    );
    run_installed(
        ".gemini/settings.json",
        "AfterAgent",
        json!({"session_id": "g-1", "transcript_path": "/t.json",
        "cwd": "/w", "hook_event_name": "AfterAgent", "timestamp": "2026-12-05T10:00:00Z",
        "prompt": "hi", "prompt_response": "Hello ✓", "stop_hook_active": false}),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let chats: Value =
            serde_json::from_slice(&sandbox.run(&["chats", "--json"]).stdout).unwrap();
        let state = |id: &str| {
            chats
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["chat_id"] == id)
                .map(|c| c["state"].clone())
        };
        if state("0198c4cf-8587") == Some(json!("needs_input"))
            && state("g-1") == Some(json!("idle"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the hooks did not reach the daemon: {chats:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

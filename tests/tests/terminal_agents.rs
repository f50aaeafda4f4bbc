//! Terminal agents in real tmux panes listed by the real daemon beside plugin windows: `koru sessions` (text and `--json`), the HTTP API and MCP `list_sessions` show the agent's product, folder, tmux pane, chat (from its store) and state; a pane running a plain shell is not an agent.

use std::path::Path;
use std::time::Duration;

use koru_system_tests::{stdout_json, Sandbox};
use serde_json::{json, Value};

/// A tmux server in the sandbox (its socket under the sandbox's `TMUX_TMPDIR`) whose first
/// pane runs `agent` (an executable's path) in `folder` and whose second pane runs `sleep`.
fn tmux_with_agent(sandbox: &Sandbox, agent: &Path, folder: &Path) {
    std::fs::create_dir_all(sandbox.path().join("tmux")).unwrap();
    let run = |args: &[&str]| {
        let status = sandbox.command("tmux").args(args).status().unwrap();
        assert!(status.success(), "tmux {args:?}");
    };
    let script = format!("{} 300 & wait", agent.display());
    run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "work",
        "-c",
        folder.to_str().unwrap(),
        "sh",
        "-c",
        &script,
    ]);
    run(&["new-window", "-t", "work", "sleep", "300"]);
}

struct TmuxServer<'a>(&'a Sandbox);

impl Drop for TmuxServer<'_> {
    fn drop(&mut self) {
        let _ = self.0.command("tmux").arg("kill-server").status();
    }
}

#[test]
fn an_agent_in_a_tmux_pane_is_listed_with_its_pane_chat_and_state() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo ✓");
    // Its Claude Code chat, already in the store: the last turn ended.
    let project = sandbox
        .path()
        .join("home/.claude/projects")
        .join(workspace.to_str().unwrap().replace('/', "-"));
    std::fs::create_dir_all(&project).unwrap();
    let session = "5a1e0000-0000-4000-8000-00000000abcd";
    let log: String = [
        json!({"type": "user", "sessionId": session, "cwd": workspace, "uuid": "u1",
            "timestamp": "2026-12-05T10:00:00.000Z", "message": {"role": "user", "content": "hello"}}),
        json!({"type": "assistant", "sessionId": session, "cwd": workspace, "uuid": "a1",
            "timestamp": "2026-12-05T10:00:01.000Z", "message": {"role": "assistant", "id": "m1", "model": "m",
            "content": [{"type": "text", "text": "Hi."}], "stop_reason": "end_turn"}}),
    ]
    .iter()
    .map(|r| format!("{r}\n"))
    .collect();
    std::fs::write(project.join(format!("{session}.jsonl")), log).unwrap();
    // A stand-in for the agent: `sleep` under Claude Code's executable name (what the
    // daemon matches is the process; the real agents are issue 38's e2e tests).
    let bin = sandbox.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/sleep", bin.join("claude")).unwrap();
    let _daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    tmux_with_agent(&sandbox, &bin.join("claude"), &workspace);
    let _server = TmuxServer(&sandbox);

    // The observers read the history at start; wait until the chat is known.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let agent = loop {
        let listed = stdout_json(&sandbox.run(&["sessions", "--json"]));
        let agents: Vec<Value> = listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["kind"] == "terminal_agent")
            .cloned()
            .collect();
        assert!(
            agents.len() <= 1,
            "one agent, not the plain `sleep` pane: {listed:#}"
        );
        // The pane's shell starts the agent a moment after the pane; the observers read
        // its chat at start.
        if agents.first().is_some_and(|a| a["chat"].is_object()) {
            break agents[0].clone();
        }
        if std::time::Instant::now() >= deadline {
            let panes = sandbox
                .command("tmux")
                .args([
                    "list-panes",
                    "-a",
                    "-F",
                    "#{pane_id} #{pane_pid} #{socket_path}",
                ])
                .output()
                .unwrap();
            panic!(
                "no agent with its chat: {listed:#}\ntmux: {}{}\nchats: {}",
                String::from_utf8_lossy(&panes.stdout),
                String::from_utf8_lossy(&panes.stderr),
                String::from_utf8_lossy(&sandbox.run(&["chats"]).stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(agent["product"], "claude-code");
    assert_eq!(agent["workspace"], workspace.to_str().unwrap());
    assert_eq!(agent["terminal"]["kind"], "tmux");
    assert_eq!(agent["terminal"]["place"], "work:0.0");
    assert!(agent["terminal"]["pane_id"]
        .as_str()
        .unwrap()
        .starts_with('%'));
    assert!(agent["terminal"]["socket"]
        .as_str()
        .unwrap()
        .starts_with(sandbox.path().to_str().unwrap()));
    assert_eq!(agent["chat"]["chat_id"], session);
    assert_eq!(agent["state"], "idle");
    let id = agent["agent_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("t_") && id.len() == 14, "{id}");

    // The text view lists it after the (empty) windows, with the same id.
    let text = String::from_utf8(sandbox.run(&["sessions"]).stdout).unwrap();
    assert!(text.contains("no IDE plugin is connected"), "{text}");
    assert!(text.contains("terminal agents:"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains("claude-code") && row.contains("tmux work:0.0") && row.contains("idle"),
        "{row}"
    );

    // The HTTP API gives the same record, and the id is stable between looks.
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    let base = status["http"]["mcp_url"]
        .as_str()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_string();
    let token = status["http"]["token"].as_str().unwrap().to_string();
    let listed: Value = tokio::runtime::Runtime::new().unwrap().block_on(async {
        reqwest::Client::new()
            .get(format!("{base}/api/v1/sessions"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(listed["agents"][0]["agent_id"], id.as_str());
    assert_eq!(listed["agents"][0]["chat"]["chat_id"], session);

    // The agent's own hook says which chat runs in that pane (a session just started,
    // before its log says anything): that chat wins over the folder's newest.
    let pane = agent["terminal"]["pane_id"].as_str().unwrap().to_string();
    let socket = agent["terminal"]["socket"].as_str().unwrap().to_string();
    let mut hook = sandbox
        .koru()
        .args(["hook", "claude-code"])
        .env("TMUX", format!("{socket},1,0"))
        .env("TMUX_PANE", &pane)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    hook.stdin
        .take()
        .unwrap()
        .write_all(
            json!({"session_id": "hooked-1", "cwd": workspace, "hook_event_name": "SessionStart",
                "source": "startup", "transcript_path": "/nowhere.jsonl"})
            .to_string()
            .as_bytes(),
        )
        .unwrap();
    let done = hook.wait_with_output().unwrap();
    assert!(done.status.success() && done.stdout.is_empty() && done.stderr.is_empty());
    let listed = stdout_json(&sandbox.run(&["sessions", "--json"]));
    let agent = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "terminal_agent")
        .unwrap();
    assert_eq!(agent["chat"]["chat_id"], "hooked-1", "{listed:#}");
    assert_eq!(agent["agent_id"], id.as_str(), "the same agent");
}

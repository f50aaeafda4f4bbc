//! A controller LLM's loop with terminal agents, over MCP (the rmcp client against `koru mcp`): `list_sessions` shows the real Claude Code and opencode running in tmux panes (npm, pinned, against the local fake model server), `send_prompt` with `wait: replied` pushes into each and returns the agent's whole answer as its own store has it (Claude Code's transcript, opencode's database), and `read_chat` reads the same chat back.

use std::time::Duration;

use koru_system_tests::agents::{agents_installed, AgentSlot, FakeModel, Tmux};
use koru_system_tests::mcp::{call, tool_text};
use koru_system_tests::Sandbox;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

type Client = RunningService<RoleClient, ()>;

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_pushes_into_claude_code_and_opencode_and_reads_their_whole_answers() {
    if !agents_installed() {
        return;
    }
    let _slot = AgentSlot::take();
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let tmux = Tmux::new(&sandbox);
    let claude_folder = sandbox.workspace("claude-repo");
    let opencode_folder = sandbox.workspace("opencode-repo");
    let claude_pane = tmux.start_agent("claude-code", &claude_folder, &model, false);
    let opencode_root = sandbox.path().join("opencode-root");
    std::fs::create_dir_all(&opencode_root).unwrap();
    // opencode under a HOME of its own (its own tmux session name), serving HTTP.
    let opencode_pane = tmux.start_agent_with(
        "opencode",
        &opencode_folder,
        &model,
        false,
        &[
            ("OPENCODE_PORT", "0"),
            ("AGENT_ROOT", opencode_root.to_str().unwrap()),
        ],
    );
    let mut command = tokio::process::Command::from(sandbox.koru());
    command.arg("mcp").env("RUST_LOG", "warn");
    let client: Client =
        ().serve(TokioChildProcess::new(command).expect("koru mcp starts"))
            .await
            .expect("the MCP handshake");

    let listed = call(&client, "list_sessions", json!({})).await;
    let text = tool_text(&listed);
    assert!(
        text.contains("claude-code") && text.contains("opencode"),
        "{text}"
    );

    for (agent, folder, pane) in [
        ("claude-code", &claude_folder, &claude_pane),
        ("opencode", &opencode_folder, &opencode_pane),
    ] {
        let prompt = format!("Name this folder for me, {agent}.\nTwo lines ✓");
        let target = format!("{agent}@{}", folder.display());
        let sent = call(
            &client,
            "send_prompt",
            json!({"target": target, "prompt": prompt, "wait": "replied", "timeout_s": 60}),
        )
        .await;
        let body = tool_text(&sent);
        assert_eq!(
            sent.is_error,
            Some(false),
            "{agent}: {body}\n{}\n{}",
            tmux.screen(pane),
            daemon.log_text()
        );
        let expected = format!(
            "You asked: Name this folder for me, {agent}.. This is the fake model's answer."
        );
        assert!(
            body.ends_with(&format!("\nreply:\n{expected}")),
            "{agent}: the whole reply ends the text: {body}"
        );
        let turn = sent
            .structured_content
            .clone()
            .expect("the turn as structured content");
        assert_eq!(
            turn["turns"][0]["prompt"],
            prompt.as_str(),
            "{agent}: {turn:#}"
        );
        assert_eq!(turn["turns"][0]["reply"], expected.as_str());
        let (store, chat_id) = (turn["store"].clone(), turn["chat_id"].clone());
        let read = call(
            &client,
            "read_chat",
            json!({"store": store, "chat_id": chat_id}),
        )
        .await;
        assert_eq!(read.is_error, Some(false), "{}", tool_text(&read));
        assert!(
            tool_text(&read).ends_with(&format!("\nreply:\n{expected}")),
            "{}",
            tool_text(&read)
        );
    }
    let prompts = model.prompts();
    assert_eq!(
        prompts.len(),
        2,
        "each prompt reached the model once: {prompts:?}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    client.cancel().await.ok();
}

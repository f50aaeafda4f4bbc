//! The controller reads the answer: a drive's whole reply and the agent's steps, read back from a real Claude Code session log by the real daemon, through `koru send --wait-reply`, `koru chat show`, MCP (the rmcp client: `send_prompt wait: replied`, `wait_for_reply`, `read_chat` with paging) and HTTP; and the daemon's memory while 1,000 replies of 50 KB are read through `read_chat` on its own MCP endpoint.

use std::path::Path;
use std::time::Duration;

use koru_system_tests::mcp::{call, tool_text};
use koru_system_tests::{stdout_json, Sandbox};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

const CLAUDE: &str = "chat_history_claude_code_jsonl";

/// A reply a person would find hard to carry through unchanged: many lines, indentation,
/// every kind of Unicode, JSON-looking and escape-looking text, about 20 KB.
fn long_reply() -> String {
    let mut reply =
        String::from("Summary ✓\n\n```rust\nfn main() {\n\tprintln!(\"{}\\n\", \"é\");\n}\n```\n");
    let mut line = 0;
    while reply.len() < 20_000 {
        line += 1;
        reply.push_str(&format!(
            "{line:04} — 日本語のテキスト, emoji 🦀🚀, quotes \"x\" and 'y', backslash \\ and {{\"json\": [1, 2]}}  \n"
        ));
    }
    reply.push_str("Last line without a newline at its end");
    reply
}

fn start_window(sandbox: &Sandbox, workspace: &Path, extra: &[&str]) -> koru_system_tests::Plugin {
    let project = sandbox.claude_project_dir(workspace);
    let mut args = vec![
        "--workspace",
        workspace.to_str().unwrap(),
        "--claude-store",
        project.to_str().unwrap(),
        "--reply-delay-ms",
        "50",
    ];
    args.extend_from_slice(extra);
    // The argument slice borrows `project`'s string only for this call.
    let args: Vec<String> = args.into_iter().map(str::to_string).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sandbox.start_fake_plugin(&args)
}

#[test]
fn send_wait_reply_prints_the_whole_reply_byte_exact_and_chat_show_the_turn_with_its_steps() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("whole");
    std::fs::write(workspace.join("a file.txt"), "x").unwrap();
    let reply_file = sandbox.path().join("reply.txt");
    let reply = long_reply();
    std::fs::write(&reply_file, &reply).unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let _plugin = start_window(
        &sandbox,
        &workspace,
        &[
            "--reply-file",
            reply_file.to_str().unwrap(),
            "--tool-call",
            "ls; false",
        ],
    );
    let prompt = "Explain the parser\n  and list the files ✓";
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait-reply",
        "--timeout",
        "20",
        prompt,
    ]);
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // The reply follows the line that names the chat, byte for byte, then one newline.
    let header_end = stdout
        .find(&format!(" in {CLAUDE} chat "))
        .and_then(|at| stdout[at..].find(":\n").map(|end| at + end + 2))
        .unwrap_or_else(|| panic!("no reply header in {stdout}"));
    let header_line = stdout[..header_end].lines().last().unwrap();
    assert!(
        header_line.contains(&format!("replied ({} chars)", reply.chars().count())),
        "{header_line}"
    );
    assert_eq!(
        &stdout[header_end..],
        format!("{reply}\n"),
        "the reply, byte for byte"
    );
    // The agent's step went to stderr: the command and its exit status.
    assert!(
        stderr.contains("koru: step: Bash ls; false → exit 1"),
        "{stderr}"
    );

    // The same turn as JSON with --json: the drive, and the chat read back.
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait-reply",
        "--json",
        "--timeout",
        "20",
        "second prompt",
    ]);
    assert!(output.status.success());
    let shown = stdout_json(&output);
    assert_eq!(shown["state"], "done");
    let read = &shown["chat_read"];
    assert_eq!(read["store"], CLAUDE, "{shown:#}");
    assert_eq!(read["turns_total"], 2);
    let turn = &read["turns"][0];
    assert_eq!(turn["index"], 1);
    assert_eq!(turn["prompt"], "second prompt");
    assert_eq!(turn["reply"], reply.as_str());
    assert_eq!(turn["reply_chars"], reply.chars().count());
    assert_eq!(turn["state"], "complete");
    let chat_id = read["chat_id"].as_str().unwrap().to_string();

    // `koru chat show`: both turns, readable, the first with its prompt and failing step.
    let output = sandbox.run(&["chat", "show", &chat_id, "--turns", "2"]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{text}");
    assert!(
        text.starts_with(&format!("claude_code_jsonl chat {chat_id} in ")),
        "{text}"
    );
    assert!(text.contains("── turn 0 "), "{text}");
    assert!(
        text.contains("> Explain the parser\n>   and list the files ✓\n"),
        "{text}"
    );
    assert!(text.contains("  • Bash ls; false → exit 1"), "{text}");
    assert_eq!(
        text.matches(reply.as_str()).count(),
        2,
        "both replies whole"
    );
    let output = sandbox.run(&["chat", "show", &chat_id, "--json"]);
    let read = stdout_json(&output);
    assert_eq!(
        read["turns"].as_array().unwrap().len(),
        1,
        "the last turn by default"
    );
    let output = sandbox.run(&["chat", "show", "no-such-chat"]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no chat no-such-chat"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

type Client = RunningService<RoleClient, ()>;

async fn mcp_client(sandbox: &Sandbox) -> Client {
    let mut command = tokio::process::Command::from(sandbox.koru());
    command.arg("mcp").env("RUST_LOG", "warn");
    let transport = TokioChildProcess::new(command).expect("koru mcp starts");
    ().serve(transport).await.expect("the MCP handshake")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_pushes_waits_reads_the_whole_answer_and_pages_through_it_over_mcp() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("loop");
    let reply_file = sandbox.path().join("reply.txt");
    let reply = long_reply();
    std::fs::write(&reply_file, &reply).unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let _plugin = start_window(
        &sandbox,
        &workspace,
        &[
            "--reply-file",
            reply_file.to_str().unwrap(),
            "--tool-call",
            "echo checked",
        ],
    );
    let client = mcp_client(&sandbox).await;

    // Push and wait for the reply: the drive, then the whole turn.
    let sent = call(
        &client,
        "send_prompt",
        json!({"target": workspace, "prompt": "Review the parser", "wait": "replied", "timeout_s": 20}),
    )
    .await;
    let body = tool_text(&sent);
    assert_eq!(sent.is_error, Some(false), "{body}");
    assert!(
        body.contains(&format!(
            "\nreply ({} chars) in {CLAUDE} chat ",
            reply.chars().count()
        )),
        "{body}"
    );
    assert!(
        body.contains("\nsteps (1):\n- Bash echo checked → ok"),
        "{body}"
    );
    assert!(
        body.ends_with(&format!("\nreply:\n{reply}")),
        "the whole reply ends the text"
    );
    let structured = sent
        .structured_content
        .clone()
        .expect("the turn as structured content");
    assert_eq!(structured["turns"][0]["reply"], reply.as_str());
    assert_eq!(structured["turns"][0]["steps"][0]["kind"], "command");
    assert_eq!(
        structured["turns"][0]["steps"][0]["command"],
        "echo checked"
    );
    let drive_id = body.split_whitespace().nth(1).unwrap().to_string();

    // wait_for_reply on the same drive answers at once with the same turn.
    let waited = call(
        &client,
        "wait_for_reply",
        json!({"drive_id": drive_id, "timeout_s": 5}),
    )
    .await;
    assert_eq!(waited.is_error, Some(false), "{}", tool_text(&waited));
    assert!(tool_text(&waited).ends_with(&format!("\nreply:\n{reply}")));

    // Paging: 3,000 characters at a time, every character once, in order.
    let mut offset = 0u64;
    let mut joined = String::new();
    let mut pages = 0;
    loop {
        let page = call(
            &client,
            "read_chat",
            json!({"drive_id": drive_id, "reply_offset": offset, "max_chars": 3000}),
        )
        .await;
        assert_eq!(page.is_error, Some(false), "{}", tool_text(&page));
        let turn = &page.structured_content.as_ref().unwrap()["turns"][0];
        assert_eq!(turn["reply_offset"], offset);
        joined.push_str(turn["reply"].as_str().unwrap());
        pages += 1;
        match turn["reply_next_offset"].as_u64() {
            Some(next) => {
                assert!(
                    tool_text(&page).ends_with(&format!("reply_offset={next})")),
                    "{}",
                    tool_text(&page)
                );
                offset = next;
            }
            None => break,
        }
    }
    assert_eq!(joined, reply, "paging returns every character once");
    assert_eq!(pages, reply.chars().count().div_ceil(3000));

    // The next push, and the chat's last two turns.
    let sent = call(
        &client,
        "send_prompt",
        json!({"target": workspace, "prompt": "Now fix it", "wait": "replied", "timeout_s": 20}),
    )
    .await;
    assert_eq!(sent.is_error, Some(false), "{}", tool_text(&sent));
    let chat_id = sent.structured_content.as_ref().unwrap()["chat_id"]
        .as_str()
        .unwrap()
        .to_string();
    let read = call(
        &client,
        "read_chat",
        json!({"chat_id": chat_id, "turns": 2}),
    )
    .await;
    let text = tool_text(&read);
    assert!(text.starts_with("prompt: Review the parser\n"), "{text}");
    assert!(text.contains("\n\nprompt: Now fix it\n"), "{text}");
    let turns = &read.structured_content.as_ref().unwrap()["turns"];
    assert_eq!(turns.as_array().unwrap().len(), 2);
    assert_eq!(turns[1]["index"], 1);

    // Errors say what is wrong.
    let unknown = call(&client, "read_chat", json!({"chat_id": "nope"})).await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        tool_text(&unknown).starts_with("error unknown_chat: no chat nope"),
        "{}",
        tool_text(&unknown)
    );
    let both = call(
        &client,
        "read_chat",
        json!({"chat_id": "a", "drive_id": "d_1"}),
    )
    .await;
    assert!(
        tool_text(&both).starts_with("error invalid_argument"),
        "{}",
        tool_text(&both)
    );
    let past = call(&client, "read_chat", json!({"chat_id": chat_id, "turn": 9})).await;
    assert!(
        tool_text(&past).contains("has 2 turns (0 to 1); there is no turn 9"),
        "{}",
        tool_text(&past)
    );
    client.cancel().await.unwrap();
}

/// The daemon's resident memory, from /proc.
fn rss_kb(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_a_thousand_replies_of_50_kb_through_read_chat_does_not_grow_the_daemons_memory() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("big");
    // A session log of 20 turns with 50 KB replies, written before the daemon starts.
    let project = sandbox.claude_project_dir(&workspace);
    let session = "5a1e0000-0000-4000-8000-000000000001";
    let mut log = String::new();
    for turn in 0..20 {
        let reply: String = format!("reply {turn}: ") + &"λ0123456789abcdef\n".repeat(50_000 / 19);
        for record in [
            json!({"type": "user", "sessionId": session, "cwd": workspace, "version": "2.1.220",
                "uuid": format!("u{turn}"), "timestamp": "2026-12-01T10:00:00.000Z",
                "message": {"role": "user", "content": format!("question {turn}")}}),
            json!({"type": "assistant", "sessionId": session, "cwd": workspace, "version": "2.1.220",
                "uuid": format!("a{turn}"), "timestamp": "2026-12-01T10:00:01.000Z",
                "message": {"role": "assistant", "id": format!("msg_{turn}"), "model": "m",
                    "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn"}}),
        ] {
            log.push_str(&record.to_string());
            log.push('\n');
        }
    }
    std::fs::write(project.join(format!("{session}.jsonl")), log).unwrap();
    // The daemon serves MCP itself (streamable HTTP): read_chat runs in its process.
    let daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    let url = status["http"]["mcp_url"].as_str().unwrap().to_string();
    let token = status["http"]["token"].as_str().unwrap().to_string();
    let base = url.trim_end_matches("/mcp").to_string();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.clone());
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the MCP handshake over HTTP");
    // The history is read at start; wait until the chat is known.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stdout_json(&sandbox.run(&["chats", "--json"]))
        .as_array()
        .is_none_or(|chats| chats.is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the history was not read"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let read = |i: u64| {
        let client = &client;
        async move {
            let result = client
                .call_tool(
                    CallToolRequestParams::new("read_chat").with_arguments(
                        json!({"chat_id": session, "turn": i % 20})
                            .as_object()
                            .unwrap()
                            .clone(),
                    ),
                )
                .await
                .unwrap();
            let turn = &result.structured_content.as_ref().unwrap()["turns"][0];
            let reply = turn["reply"].as_str().unwrap().len();
            assert!(reply > 49_000, "a whole 50 KB reply, got {reply} bytes");
        }
    };
    let before = rss_kb(daemon.pid());
    for i in 0..100 {
        read(i).await;
    }
    let warm = rss_kb(daemon.pid());
    for i in 100..1_100 {
        read(i).await;
    }
    let after = rss_kb(daemon.pid());
    // 1,000 replies of 50 KB (twice over: as text and as structured content) are 100 MB
    // handed out; what stays resident must not follow them.
    assert!(
        after <= warm + 4 * 1024,
        "the daemon grew from {warm} kB to {after} kB over 1,000 reads of 50 KB replies"
    );
    eprintln!("daemon RSS: {before} kB before, {warm} kB after 100 reads, {after} kB after 1,100");
    client.cancel().await.unwrap();

    // The same turns over the JSON API, for an observe token too (reading is a read).
    let observer = stdout_json(&sandbox.run(&["token", "create", "--role", "observe", "--json"]));
    let observe_token = observer["token"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let get = |path: String, token: String| {
        let http = http.clone();
        let url = format!("{base}{path}");
        async move {
            let response = http.get(url).bearer_auth(token).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, read) = get(
        format!("/api/v1/chats/{session}/turns?turns=2&max_chars=1000"),
        observe_token.clone(),
    )
    .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["turns_total"], 20);
    assert_eq!(read["turns"][1]["index"], 19);
    assert_eq!(read["turns"][1]["prompt"], "question 19");
    assert_eq!(read["turns"][1]["reply_next_offset"], 1000);
    let (status, error) = get("/api/v1/chats/nope/turns".into(), token.clone()).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (404, Some("unknown_chat")),
        "{error}"
    );
    let (status, error) = get("/api/v1/chats/x/turns?turns=0".into(), token.clone()).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (400, Some("invalid_argument")),
        "{error}"
    );
    let (status, error) = get("/api/v1/drives/d_0000/turn".into(), token).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (404, Some("unknown_drive")),
        "{error}"
    );
}

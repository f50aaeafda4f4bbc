//! `koru mcp` (stdio) and the daemon's MCP streamable HTTP endpoint, driven by the rmcp client: tools and their schemas, send_prompt to the fake plugin with progress, every failure as a tool error, and the HTTP token, Origin and Host checks.

use koru_system_tests::mcp::{call, tool_text};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use koru_system_tests::{koru_bin, Sandbox};
use rmcp::model::{
    CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request as McpRequest,
    ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{object, RoleClient, ServiceExt};
use serde_json::Value;

/// Counts progress notifications.
#[derive(Clone, Default)]
struct CountingClient {
    progress: Arc<AtomicUsize>,
}

impl rmcp::ClientHandler for CountingClient {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
}

type Client = RunningService<RoleClient, CountingClient>;

async fn stdio_client(sandbox: &Sandbox) -> Client {
    let std_command = sandbox.koru();
    let mut command = tokio::process::Command::from(std_command);
    command.arg("mcp").env("RUST_LOG", "warn");
    let transport = TokioChildProcess::new(command).expect("koru mcp starts");
    CountingClient::default()
        .serve(transport)
        .await
        .expect("the MCP handshake with koru mcp")
}

/// The tool checks every transport must pass.
async fn exercise(client: &Client, workspace: &str, label: &str) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "list_sessions",
        "send_prompt",
        "get_drive",
        "cancel_drive",
        "wait_for_reply",
        "doctor",
        "list_interfaces",
        "recover",
        "verify_journal",
        "read_chat",
    ] {
        assert!(
            names.contains(&expected),
            "{label}: {expected} in {names:?}"
        );
    }
    let send = tools.iter().find(|t| t.name == "send_prompt").unwrap();
    let schema = serde_json::to_value(&*send.input_schema).unwrap();
    assert_eq!(
        schema["required"],
        serde_json::json!(["target", "prompt"]),
        "{schema}"
    );
    let schema_text = schema.to_string();
    for wait in ["\"none\"", "\"delivered\"", "\"submitted\"", "\"replied\""] {
        assert!(
            schema_text.contains(wait),
            "{label}: wait value {wait} in {schema_text}"
        );
    }

    let sessions = call(client, "list_sessions", serde_json::json!({})).await;
    assert_eq!(sessions.is_error, Some(false));
    let listing = tool_text(&sessions);
    assert!(
        listing.contains("vscodium") && listing.contains(workspace),
        "{label}: {listing}"
    );
    assert_eq!(
        listing.lines().count(),
        1,
        "one line per session: {listing}"
    );

    let sent = call(
        client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": format!("hello over {label} ✓"), "wait": "submitted", "timeout_s": 15}),
    )
    .await;
    let sent_text = tool_text(&sent);
    assert_eq!(sent.is_error, Some(false), "{sent_text}");
    assert!(sent_text.starts_with("drive d_"), "{sent_text}");
    assert!(
        sent_text.contains("done: reached submitted by"),
        "{sent_text}"
    );
    let drive_id = sent_text.split_whitespace().nth(1).unwrap().to_string();

    let got = call(
        client,
        "get_drive",
        serde_json::json!({"drive_id": drive_id}),
    )
    .await;
    assert_eq!(got.is_error, Some(false));
    assert!(tool_text(&got).contains(&format!("drive {drive_id} done")));

    // Failures are tool results with isError and a code, never protocol errors.
    let finished = call(
        client,
        "cancel_drive",
        serde_json::json!({"drive_id": drive_id}),
    )
    .await;
    assert_eq!(finished.is_error, Some(true), "{}", tool_text(&finished));
    assert!(
        tool_text(&finished).starts_with("error drive_finished:"),
        "{}",
        tool_text(&finished)
    );
    // Recovery: a delivered drive is never sent twice; a reload answers with the registry.
    let retried = call(
        client,
        "recover",
        serde_json::json!({"action": "retry_drive", "drive_id": drive_id}),
    )
    .await;
    assert_eq!(retried.is_error, Some(true), "{}", tool_text(&retried));
    assert!(
        tool_text(&retried).starts_with("error not_retryable:"),
        "{}",
        tool_text(&retried)
    );
    let reloaded = call(
        client,
        "recover",
        serde_json::json!({"action": "reload_registry"}),
    )
    .await;
    assert_eq!(reloaded.is_error, Some(false), "{}", tool_text(&reloaded));
    assert!(
        tool_text(&reloaded).starts_with("registry reloaded:"),
        "{}",
        tool_text(&reloaded)
    );
    let unknown = call(
        client,
        "get_drive",
        serde_json::json!({"drive_id": "d_nope"}),
    )
    .await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        tool_text(&unknown).starts_with("error unknown_drive:"),
        "{}",
        tool_text(&unknown)
    );
    let nowhere = call(
        client,
        "send_prompt",
        serde_json::json!({"target": "/no/such/workspace", "prompt": "x", "timeout_s": 5}),
    )
    .await;
    assert_eq!(nowhere.is_error, Some(true));
    assert!(
        tool_text(&nowhere).contains("/no/such/workspace"),
        "{}",
        tool_text(&nowhere)
    );
    let huge = call(
        client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": "x".repeat(300 * 1024)}),
    )
    .await;
    assert_eq!(huge.is_error, Some(true));
    assert!(
        tool_text(&huge).starts_with(
            "error prompt_too_large: `prompt` is 307200 bytes of UTF-8; the limit is 262144 bytes"
        ),
        "{}",
        tool_text(&huge)
    );
    let bad_type = call(
        client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": 42}),
    )
    .await;
    assert_eq!(bad_type.is_error, Some(true), "{}", tool_text(&bad_type));
    assert!(
        tool_text(&bad_type).contains("`prompt`: invalid type: integer `42`"),
        "{}",
        tool_text(&bad_type)
    );
    let bad_wait = call(
        client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": "x", "wait": "forever"}),
    )
    .await;
    assert_eq!(bad_wait.is_error, Some(true), "{}", tool_text(&bad_wait));
    let reply = call(
        client,
        "wait_for_reply",
        serde_json::json!({"drive_id": drive_id, "timeout_s": 1}),
    )
    .await;
    assert_eq!(reply.is_error, Some(true));
    assert!(
        tool_text(&reply).starts_with("error not_observable:"),
        "{}",
        tool_text(&reply)
    );

    let interfaces = call(
        client,
        "list_interfaces",
        serde_json::json!({"family": "observation"}),
    )
    .await;
    assert_eq!(interfaces.is_error, Some(false));
    assert!(tool_text(&interfaces)
        .lines()
        .all(|l| l.split(' ').nth(1) == Some("observation")));
    let verified = call(client, "verify_journal", serde_json::json!({})).await;
    assert_eq!(verified.is_error, Some(false), "{}", tool_text(&verified));
    assert!(
        tool_text(&verified).starts_with("✓ journal intact — "),
        "{}",
        tool_text(&verified)
    );
    let detail = call(
        client,
        "verify_journal",
        serde_json::json!({"detail": true}),
    )
    .await;
    let report: serde_json::Value = serde_json::from_str(&tool_text(&detail)).unwrap();
    assert_eq!(report["verdict"], "intact", "{report}");
    assert!(report["entries"].as_u64().unwrap() > 1, "{report}");
    let doctor = call(client, "doctor", serde_json::json!({})).await;
    assert_eq!(doctor.is_error, Some(false), "{}", tool_text(&doctor));
    assert!(
        tool_text(&doctor).contains("sessions with a drive path: 1"),
        "{}",
        tool_text(&doctor)
    );

    let unknown_tool = client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await;
    assert!(unknown_tool.is_err(), "an unknown tool is a JSON-RPC error");
}

fn start(
    sandbox: &Sandbox,
    daemon_args: &[&str],
) -> (koru_system_tests::Daemon, koru_system_tests::Plugin, String) {
    let daemon = sandbox.start_daemon(daemon_args);
    let workspace = sandbox.workspace("mcp");
    let plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscodium",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    (daemon, plugin, workspace.display().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_server_lists_sends_follows_up_and_reports_failures_as_tool_errors() {
    let sandbox = Sandbox::new();
    let (_daemon, _plugin, workspace) = start(&sandbox, &[]);
    let client = stdio_client(&sandbox).await;
    exercise(&client, &workspace, "stdio").await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_daemon_every_tool_says_so_instead_of_failing_the_session() {
    let sandbox = Sandbox::new();
    let client = stdio_client(&sandbox).await;
    for (tool, arguments) in [
        ("list_sessions", serde_json::json!({})),
        (
            "send_prompt",
            serde_json::json!({"target": "focused", "prompt": "x"}),
        ),
        ("get_drive", serde_json::json!({"drive_id": "d_1"})),
    ] {
        let result = call(&client, tool, arguments).await;
        assert_eq!(result.is_error, Some(true));
        let message = tool_text(&result);
        assert!(
            message.starts_with("error daemon_down: no daemon at ")
                && message.ends_with("; start it with `koru daemon`"),
            "{tool}: {message}"
        );
    }
    client.cancel().await.unwrap();
}

fn http_status(sandbox: &Sandbox) -> Value {
    let output = sandbox.run(&["status", "--json"]);
    assert!(output.status.success());
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    status["http"].clone()
}

/// One raw HTTP/1.1 POST; returns the status code and the body.
fn raw_post(port: u16, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, response)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

#[tokio::test(flavor = "multi_thread")]
async fn http_endpoint_needs_the_token_refuses_foreign_origins_and_hosts_and_serves_the_tools() {
    let sandbox = Sandbox::new();
    let (_daemon, _plugin, workspace) = start(&sandbox, &["--http", "127.0.0.1:0"]);
    let http = http_status(&sandbox);
    let url = http["mcp_url"].as_str().unwrap().to_string();
    let token = http["token"].as_str().unwrap().to_string();
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    // The token lives in the state directory, readable by its owner only.
    let token_file = sandbox.path().join("state/koru/http-token");
    assert_eq!(
        http["token_file"].as_str().unwrap(),
        token_file.to_str().unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);

    let bearer = format!("Bearer {token}");
    assert_eq!(raw_post(port, &[], INITIALIZE).0, 401);
    assert_eq!(
        raw_post(
            port,
            &[("Authorization", "Bearer wrong-token-0000")],
            INITIALIZE
        )
        .0,
        401
    );
    assert_eq!(
        raw_post(
            port,
            &[
                ("Authorization", &bearer),
                ("Origin", "http://evil.example")
            ],
            INITIALIZE
        )
        .0,
        403
    );
    let rebinding = format!("evil.example:{port}");
    assert_eq!(
        raw_post(
            port,
            &[("Authorization", &bearer), ("Host", &rebinding)],
            INITIALIZE
        )
        .0,
        403
    );
    let local_origin = format!("http://localhost:{port}");
    assert_eq!(
        raw_post(
            port,
            &[("Authorization", &bearer), ("Origin", &local_origin)],
            INITIALIZE
        )
        .0,
        200
    );
    // Invalid JSON-RPC is refused with a client error, and the server goes on.
    let (status, body) = raw_post(port, &[("Authorization", &bearer)], "{not json");
    assert!((400..500).contains(&status), "{status} {body}");
    let (status, _) = raw_post(
        port,
        &[("Authorization", &bearer)],
        r#"{"jsonrpc":"2.0","id":1}"#,
    );
    assert!(
        (400..500).contains(&status),
        "a message with no method: {status}"
    );
    assert_eq!(
        raw_post(port, &[("Authorization", &bearer)], INITIALIZE).0,
        200
    );
    let oversized = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "y".repeat(1100 * 1024)
    );
    assert_eq!(
        raw_post(port, &[("Authorization", &bearer)], &oversized).0,
        413
    );

    let config =
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token.clone());
    let client = CountingClient::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the MCP handshake over HTTP");
    exercise(&client, &workspace, "http").await;
    // doctor (full report) sees the HTTP endpoint served.
    let report = call(&client, "doctor", serde_json::json!({"detail": true})).await;
    let report: Value = serde_json::from_str(&tool_text(&report)).unwrap();
    let mcp_http = report["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "mcp_http")
        .unwrap();
    assert_eq!(mcp_http["status"], "ok", "{mcp_http}");

    // Progress notifications while send_prompt waits.
    let counter = client.service().progress.clone();
    let before = counter.load(Ordering::SeqCst);
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(McpRequest::new(
                CallToolRequestParams::new("send_prompt").with_arguments(object!({
                    "target": workspace.clone(), "prompt": "with progress", "wait": "submitted", "timeout_s": 15
                })),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let ServerResult::CallToolResult(result) = handle.await_response().await.unwrap() else {
        panic!("send_prompt answered with something else")
    };
    assert_eq!(result.is_error, Some(false), "{}", tool_text(&result));
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while counter.load(Ordering::SeqCst) == before && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        counter.load(Ordering::SeqCst) > before,
        "progress notifications arrived"
    );
    client.cancel().await.unwrap();

    let wrong = StreamableHttpClientTransportConfig::with_uri(url).auth_header("wrong");
    assert!(
        ().serve(StreamableHttpClientTransport::from_config(wrong))
            .await
            .is_err()
    );
    let _ = koru_bin();
}

#[tokio::test(flavor = "multi_thread")]
async fn send_prompt_and_wait_for_reply_return_the_reply_the_chat_history_shows() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("replies");
    let project = sandbox
        .path()
        .join("home/.claude/projects")
        .join(workspace.to_str().unwrap().replace('/', "-"));
    // The store exists before the daemon starts (a root that appears later is found by the
    // periodic rescan, within 10 s).
    std::fs::create_dir_all(&project).unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let _plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--claude-store",
        project.to_str().unwrap(),
    ]);
    let client = stdio_client(&sandbox).await;
    let sent = call(
        &client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": "Plan the release", "wait": "replied", "timeout_s": 20}),
    )
    .await;
    let body = tool_text(&sent);
    assert_eq!(sent.is_error, Some(false), "{body}");
    assert!(body.contains("chat history: replied in chat"), "{body}");
    assert!(
        body.contains("\nreply (22 chars) in chat_history_claude_code_jsonl chat ")
            && body.ends_with("\nreply:\nDone: Plan the release"),
        "{body}"
    );
    let drive_id = body.split_whitespace().nth(1).unwrap().to_string();
    let reply = call(
        &client,
        "wait_for_reply",
        serde_json::json!({"drive_id": drive_id, "timeout_s": 5}),
    )
    .await;
    assert_eq!(reply.is_error, Some(false), "{}", tool_text(&reply));
    assert!(
        tool_text(&reply).starts_with("reply (22 chars) in chat_history_claude_code_jsonl chat "),
        "{}",
        tool_text(&reply)
    );
    assert!(tool_text(&reply).ends_with("\nreply:\nDone: Plan the release"));
    // get_drive shows the chat's own records of the drive once they are read back: where
    // the store holds the prompt and the end, and the reply's digest.
    let reply_sha256: String = {
        use sha2::Digest;
        sha2::Sha256::digest(b"Done: Plan the release")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let mut shown = String::new();
    for _ in 0..100 {
        let drive = call(
            &client,
            "get_drive",
            serde_json::json!({"drive_id": drive_id}),
        )
        .await;
        shown = tool_text(&drive);
        if shown.contains("replied on record") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        shown.contains("\nprompt on record: chat_history_claude_code_jsonl chat ")
            && shown.contains(" line 1 (offset 0, ")
            && shown.contains("\nreplied on record (the store's end record): line 2 ")
            && shown.contains(&format!("; reply 22 chars, sha256 {reply_sha256}")),
        "{shown}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_for_reply_follows_the_chats_outcome_reported_by_the_plugin_with_no_observer() {
    use koru_system_tests::{greet, plugin_hello};
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let workspace = sandbox.workspace("plugin-outcome");
    let (mut plugin, _) = greet(&sandbox.socket(), &plugin_hello("code-server", &workspace));
    // The plugin side, scripted: the chat answers the first prompt and asks the user for
    // permission on the second.
    let window = std::thread::spawn(move || {
        for outcome in [
            serde_json::json!({"kind": "reply_completed"}),
            serde_json::json!({"kind": "needs_input", "input": "permission", "detail": "run_in_terminal waits for approval"}),
        ] {
            let drive = plugin.recv_type("drive");
            let id = drive["drive_id"].clone();
            plugin.send(
                &serde_json::json!({"v": 1, "type": "ack", "drive_id": id, "stage": "received"}),
            );
            plugin.send(&serde_json::json!({"v": 1, "type": "ack", "drive_id": id, "stage": "submitted", "evidence": "chat_running"}));
            std::thread::sleep(Duration::from_millis(100));
            plugin.send(&serde_json::json!({"v": 1, "type": "event", "event": {"kind": "chat_outcome", "drive_id": id, "outcome": outcome}}));
        }
        plugin
    });
    let client = stdio_client(&sandbox).await;
    let sent = call(
        &client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": "Plan the release", "wait": "replied", "timeout_s": 10}),
    )
    .await;
    let body = tool_text(&sent);
    assert_eq!(sent.is_error, Some(false), "{body}");
    assert!(
        body.contains("submitted on evidence chat_running"),
        "{body}"
    );
    assert!(
        body.contains("reply finished in the window's chat (through its plugin)"),
        "{body}"
    );
    let sent = call(
        &client,
        "send_prompt",
        serde_json::json!({"target": workspace, "prompt": "Deploy it", "wait": "submitted", "timeout_s": 10}),
    )
    .await;
    let drive_id = tool_text(&sent)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string();
    let reply = call(
        &client,
        "wait_for_reply",
        serde_json::json!({"drive_id": drive_id, "timeout_s": 5}),
    )
    .await;
    assert_eq!(reply.is_error, Some(true), "{}", tool_text(&reply));
    assert!(
        tool_text(&reply).contains("is needs_input in the window's chat (through its plugin): run_in_terminal waits for approval"),
        "{}",
        tool_text(&reply)
    );
    client.cancel().await.unwrap();
    let _ = window.join();
}

//! Who may do what, against the real daemon: scoped bearer tokens (`koru token create | ls | revoke`) with the observe and drive roles over the HTTP API and MCP over HTTP, `koru mcp --role observe` on stdio, the refusal of a non-loopback listener without TLS, and HTTPS with a self-signed certificate that one client trusts and another does not.

use koru_system_tests::mcp::tool_text;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use koru_system_tests::{stdout_json, Sandbox};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// The tools an observer is offered.
const READ_TOOLS: &[&str] = &[
    "doctor",
    "get_drive",
    "list_interfaces",
    "list_sessions",
    "read_chat",
    "verify_journal",
    "wait_for_reply",
];

/// `koru token create --role ROLE --name NAME --json`: the secret and the id.
fn create_token(sandbox: &Sandbox, role: &str, name: &str) -> (String, String) {
    let created =
        stdout_json(&sandbox.run(&["token", "create", "--role", role, "--name", name, "--json"]));
    (
        created["token"].as_str().unwrap().to_string(),
        created["id"].as_str().unwrap().to_string(),
    )
}

/// The journal's `access_refused` entries, once there are `count` (the state machine
/// writes them a moment after the refusal).
fn refusals_journaled(sandbox: &Sandbox, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut found = sandbox.journal_entries();
        found.retain(|entry| entry["kind"] == "access_refused");
        if found.len() >= count || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = http
        .request(method, url)
        .header("Authorization", format!("Bearer {token}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observe_token_reads_but_may_not_act_and_a_revoked_token_is_refused() {
    let sandbox = Sandbox::new();
    // A token made before the daemon starts and one made while it runs both work.
    let (early, _) = create_token(&sandbox, "observe", "early");
    let _daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    let workspace = sandbox.workspace("repo");
    let plugin = sandbox.start_fake_plugin(&["--workspace", workspace.to_str().unwrap()]);
    let (observer, observer_id) = create_token(&sandbox, "observe", "watcher");
    let (base, default_token) = sandbox.http_endpoint();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let get = |token: String, path: &str| {
        let url = format!("{base}{path}");
        let http = http.clone();
        async move { send(&http, reqwest::Method::GET, url, &token, None).await }
    };

    for token in [&early, &observer] {
        let (status, sessions) = get(token.clone(), "/api/v1/sessions").await;
        assert_eq!(status, 200, "{sessions}");
        assert!(
            sessions.to_string().contains(&plugin.session_id),
            "{sessions}"
        );
    }
    for path in [
        "/api/v1/drives",
        "/api/v1/chats",
        "/api/v1/status",
        "/api/v1/recovery",
    ] {
        let (status, body) = get(observer.clone(), path).await;
        assert_eq!(status, 200, "{path}: {body}");
    }

    let drive = json!({"target": {"session": plugin.session_id}, "prompt": "hello"});
    let acting = [
        ("POST", "/api/v1/drives", Some(drive.clone())),
        (
            "POST",
            "/api/v1/recovery",
            Some(json!({"action": "reprobe"})),
        ),
        ("POST", "/api/v1/drives/d_1/cancel", None),
        ("POST", "/api/v1/registry/reload", None),
        ("POST", "/api/v1/dashboard/codes", None),
    ];
    for (method, path, body) in acting {
        let (status, refusal) = send(
            &http,
            method.parse().unwrap(),
            format!("{base}{path}"),
            &observer,
            body,
        )
        .await;
        assert_eq!(status, 403, "{path}: {refusal}");
        assert_eq!(refusal["code"], "forbidden_role", "{path}: {refusal}");
        assert_eq!(
            refusal["message"],
            format!("{method} {path} needs the drive role; this caller holds the observe role")
        );
        assert_eq!(refusal["detail"]["token"], observer_id.as_str());
    }
    // Each refusal is in the journal, whose chain still verifies.
    let journaled = refusals_journaled(&sandbox, 5);
    assert_eq!(journaled.len(), 5, "{journaled:?}");
    let first = &journaled[0];
    assert_eq!(first["door"], "http_api");
    assert_eq!(first["token_id"], observer_id.as_str());
    assert_eq!(first["token_name"], "watcher");
    assert_eq!(
        (&first["held"], &first["needed"]),
        (&json!("observe"), &json!("drive"))
    );
    assert_eq!(first["asked"], "POST /api/v1/drives");
    assert!(
        !first.to_string().contains(&observer),
        "no secret in the journal"
    );
    let verified = sandbox.run(&["verify"]);
    assert!(verified.status.success(), "{verified:?}");
    // The default token still drives.
    let (status, created) = send(
        &http,
        reqwest::Method::POST,
        format!("{base}/api/v1/drives"),
        &default_token,
        Some(drive),
    )
    .await;
    assert_eq!(status, 201, "{created}");

    // `koru token ls` names every token and shows no secret.
    let listed = sandbox.run(&["token", "ls"]);
    assert!(listed.status.success(), "{listed:?}");
    let table = String::from_utf8_lossy(&listed.stdout);
    for needle in [
        "default",
        "watcher",
        "early",
        "observe",
        "drive",
        &observer_id,
    ] {
        assert!(table.contains(needle), "{needle} missing from:\n{table}");
    }
    let json_listing =
        String::from_utf8_lossy(&sandbox.run(&["token", "ls", "--json"]).stdout).to_string();
    for secret in [&observer, &early, &default_token] {
        assert!(!table.contains(secret.as_str()) && !json_listing.contains(secret.as_str()));
    }

    // Revoked: 401 from the next request on, without a restart.
    let revoked = sandbox.run(&["token", "revoke", "watcher"]);
    assert!(revoked.status.success(), "{revoked:?}");
    let (status, body) = get(observer.clone(), "/api/v1/sessions").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["code"], "unauthorized");
    let (status, _) = get(early.clone(), "/api/v1/sessions").await;
    assert_eq!(status, 200, "the other token is untouched");
    let again = sandbox.run(&["token", "revoke", "watcher"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no token has the id or name"));
}

fn tool_names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    names
}

async fn refused_send<S: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
) -> String {
    let arguments = json!({"target": "focused", "prompt": "hello"});
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("send_prompt").with_arguments(arguments))
        .await
        .expect("a tool result, not a protocol error");
    assert_eq!(result.is_error, Some(true));
    tool_text(&result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_offers_an_observe_token_only_the_read_tools() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    let (observer, _) = create_token(&sandbox, "observe", "llm");
    let (base, default_token) = sandbox.http_endpoint();
    let url = format!("{base}/mcp");

    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(observer);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the MCP handshake with an observe token");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tool_names(&tools), READ_TOOLS);
    let sessions = client
        .call_tool(CallToolRequestParams::new("list_sessions"))
        .await
        .unwrap();
    assert_ne!(sessions.is_error, Some(true), "{}", tool_text(&sessions));
    let refusal = refused_send(&client).await;
    assert!(
        refusal.starts_with("error forbidden_role: the MCP tool send_prompt needs the drive role; this caller holds the observe role"),
        "{refusal}"
    );
    client.cancel().await.unwrap();
    let journaled = refusals_journaled(&sandbox, 1);
    assert_eq!(journaled.len(), 1, "{journaled:?}");
    assert_eq!(journaled[0]["door"], "mcp_http");
    assert_eq!(journaled[0]["token_name"], "llm");
    assert_eq!(journaled[0]["asked"], "the MCP tool send_prompt");

    // The default token (drive) is offered every tool.
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(default_token);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let names = tool_names(&client.list_all_tools().await.unwrap());
    for tool in ["send_prompt", "cancel_drive", "recover", "list_sessions"] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing: {names:?}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn koru_mcp_role_observe_offers_only_the_read_tools() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let mut command = tokio::process::Command::from(sandbox.koru());
    command
        .args(["mcp", "--role", "observe"])
        .env("RUST_LOG", "warn");
    let client =
        ().serve(TokioChildProcess::new(command).expect("koru mcp starts"))
            .await
            .expect("the MCP handshake with koru mcp --role observe");
    assert_eq!(
        tool_names(&client.list_all_tools().await.unwrap()),
        READ_TOOLS
    );
    let refusal = refused_send(&client).await;
    assert!(refusal.contains("forbidden_role"), "{refusal}");
    client.cancel().await.unwrap();
    // The daemon itself refused it (koru mcp's connection said scope observe), and
    // journaled who asked.
    let journaled = refusals_journaled(&sandbox, 1);
    assert_eq!(journaled.len(), 1, "{journaled:?}");
    assert_eq!(journaled[0]["door"], "mcp_stdio");
    assert_eq!(journaled[0]["held"], "observe");
    assert_eq!(journaled[0]["asked"], "drive.create");
    let verified = sandbox.run(&["verify"]);
    assert!(verified.status.success(), "{verified:?}");
}

/// `koru dial-stdio --role observe` (an SSH forced command for a key that may only watch):
/// whatever the far client says in its hello, the connection is held to reading — the
/// welcome says so, reads are answered, a drive is refused and journaled.
#[test]
fn dial_stdio_role_observe_holds_the_far_client_to_reading() {
    use std::io::BufRead;
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let mut dial = sandbox
        .koru()
        .args(["dial-stdio", "--role", "observe"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("koru dial-stdio starts");
    let mut input = dial.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(dial.stdout.take().unwrap());
    let lines = [
        json!({"v": 1, "type": "hello", "id": 1, "role": "controller", "scope": "drive",
               "protocol": {"min": 1, "max": 1}, "client": {"name": "far-llm", "version": "0"}}),
        json!({"v": 1, "type": "sessions.list", "id": 2}),
        json!({"v": 1, "type": "drive.create", "id": 3, "target": "focused", "prompt": "no"}),
    ];
    for line in &lines {
        writeln!(input, "{line}").unwrap();
    }
    let mut read = || {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let welcome = read();
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert_eq!(welcome["scope"], "observe", "{welcome}");
    let listed = read();
    assert_eq!(listed["type"], "sessions.list.result", "{listed}");
    let refused = read();
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["code"], "forbidden_role", "{refused}");
    assert_eq!(refused["ref"], 3, "{refused}");
    drop(input);
    let _ = dial.wait();
    let journaled = refusals_journaled(&sandbox, 1);
    assert_eq!(journaled.len(), 1, "{journaled:?}");
    assert_eq!(journaled[0]["asked"], "drive.create");
    assert_eq!(
        journaled[0]["by"]["client"], "far-llm",
        "{:?}",
        journaled[0]
    );
}

#[test]
fn a_non_loopback_listener_without_tls_refuses_to_start() {
    let sandbox = Sandbox::new();
    for args in [
        &["daemon", "--http", "0.0.0.0:0"][..],
        &["daemon", "--http", "0.0.0.0:0", "--http-allow-remote"],
        &["daemon", "--http", "[::]:0", "--http-allow-remote"],
    ] {
        let output = sandbox.run(args);
        assert!(!output.status.success(), "{args:?} started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        for needle in [
            "not a loopback address",
            "--http-tls-cert",
            "--http-tls-key",
            "ssh -L 8765:127.0.0.1:8765",
        ] {
            assert!(
                stderr.contains(needle),
                "{args:?}: {needle} missing: {stderr}"
            );
        }
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written as PEM files; returns
/// the certificate's DER for a client to trust.
fn self_signed(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    let certified = rcgen::generate_simple_self_signed(vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "koru.test".into(),
    ])
    .unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key, certified.cert.der().to_vec())
}

/// One HTTPS request to `localhost` over a fresh connection with `roots` trusted; the status
/// and body, or the TLS failure.
fn https(port: u16, roots: &rustls::RootCertStore, head: &str) -> Result<(u16, String), String> {
    https_as(port, roots, "localhost", head)
}

/// [`https`] for the server name `host` (SNI, certificate check and `Host`), connecting to
/// 127.0.0.1 whatever the name.
fn https_as(
    port: u16,
    roots: &rustls::RootCertStore,
    host: &str,
    head: &str,
) -> Result<(u16, String), String> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots.clone())
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut stream = rustls::StreamOwned::new(connection, socket);
    let request = format!("{head}Host: {host}:{port}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        // A server may close without close_notify once the answer is complete.
        Err(error) if !answer.is_empty() => eprintln!("after the answer: {error}"),
        Err(error) => return Err(error.to_string()),
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

#[test]
fn https_with_a_certificate_the_client_trusts_and_not_with_one_it_does_not() {
    let sandbox = Sandbox::new();
    let (cert, key, der) = self_signed(sandbox.path());
    let mut daemon = sandbox.start_daemon(&[
        "--http",
        "127.0.0.1:0",
        "--http-tls-cert",
        cert.to_str().unwrap(),
        "--http-tls-key",
        key.to_str().unwrap(),
    ]);
    let (base, token) = sandbox.http_endpoint();
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");
    let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();

    let mut trusted = rustls::RootCertStore::empty();
    trusted.add(der.into()).unwrap();
    let (status, body) = https(port, &trusted, "GET /api/v1/health HTTP/1.1\r\n").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"status\":\"ok\""), "{body}");
    let (status, body) = https(
        port,
        &trusted,
        &format!("GET /api/v1/sessions HTTP/1.1\r\nAuthorization: Bearer {token}\r\nOrigin: https://localhost:{port}\r\n"),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, _) = https(port, &trusted, "GET /api/v1/sessions HTTP/1.1\r\n").unwrap();
    assert_eq!(status, 401, "still authenticated under TLS");
    let (status, body) = https(
        port,
        &trusted,
        &format!("GET /api/v1/sessions HTTP/1.1\r\nAuthorization: Bearer {token}\r\nOrigin: http://localhost:{port}\r\n"),
    )
    .unwrap();
    assert_eq!(
        status, 403,
        "an http:// Origin is not this https server: {body}"
    );

    // The dashboard's login links say https.
    let (status, body) = https(
        port,
        &trusted,
        &format!("POST /api/v1/dashboard/codes HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n"),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!("\"url\":\"https://localhost:{port}/login?code=")),
        "{body}"
    );

    // Any DNS name of the certificate may name the server; another name may not.
    let bearer = format!("GET /api/v1/sessions HTTP/1.1\r\nAuthorization: Bearer {token}\r\n");
    let (status, body) = https_as(port, &trusted, "koru.test", &bearer).unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = https(
        port,
        &trusted,
        &format!("{bearer}Origin: https://koru.test:{port}\r\n"),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, _) = https(
        port,
        &trusted,
        &format!("{bearer}Origin: https://evil.test:{port}\r\n"),
    )
    .unwrap();
    assert_eq!(status, 403);

    // A client that does not trust the certificate gets no answer.
    let stranger = rcgen::generate_simple_self_signed(vec!["localhost".into()])
        .unwrap()
        .cert
        .der()
        .to_vec();
    let mut untrusted = rustls::RootCertStore::empty();
    untrusted.add(stranger.into()).unwrap();
    let refused = https(port, &untrusted, "GET /api/v1/health HTTP/1.1\r\n").unwrap_err();
    assert!(
        refused.contains("certificate") || refused.contains("UnknownIssuer"),
        "{refused}"
    );
    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = plain.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("\"status\":\"ok\""));
    daemon.terminate(Duration::from_secs(5));
}

#[test]
fn off_loopback_with_tls_it_serves_and_a_bad_key_is_named() {
    let sandbox = Sandbox::new();
    let (cert, key, _) = self_signed(sandbox.path());
    let garbled = sandbox.path().join("garbled.pem");
    std::fs::write(&garbled, "not a key\n").unwrap();
    let output = sandbox.run(&[
        "daemon",
        "--http",
        "127.0.0.1:0",
        "--http-tls-cert",
        cert.to_str().unwrap(),
        "--http-tls-key",
        garbled.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("garbled.pem"), "{stderr}");
    let output = sandbox.run(&[
        "daemon",
        "--http",
        "127.0.0.1:0",
        "--http-tls-cert",
        sandbox.path().join("absent.pem").to_str().unwrap(),
        "--http-tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("absent.pem"));

    let mut daemon = sandbox.start_daemon(&[
        "--http",
        "0.0.0.0:0",
        "--http-allow-remote",
        "--http-tls-cert",
        cert.to_str().unwrap(),
        "--http-tls-key",
        key.to_str().unwrap(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !daemon
        .log_text()
        .contains("serving HTTPS on a non-loopback address")
    {
        assert!(Instant::now() < deadline, "{}", daemon.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (base, _) = sandbox.http_endpoint();
    assert!(base.starts_with("https://0.0.0.0:"), "{base}");
    daemon.terminate(Duration::from_secs(5));
}

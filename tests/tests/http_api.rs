//! The HTTP API, live events and dashboard login against the real daemon (`koru daemon --http 127.0.0.1:0`): every endpoint, auth (token, cookie, Host, Origin), body checks, SSE with resumption and reset, WebSocket, `koru dashboard`, and the loopback rule.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::{SinkExt, Stream, StreamExt};
use koru_system_tests::{Daemon, Plugin, Sandbox};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// A daemon serving HTTP, and how to reach it.
struct Server {
    daemon: Daemon,
    base: String,
    port: u16,
    token: String,
    http: reqwest::Client,
}

fn start(sandbox: &Sandbox, extra: &[&str]) -> Server {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let daemon = sandbox.start_daemon(&args);
    let output = sandbox.run(&["status", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mcp_url = status["http"]["mcp_url"].as_str().unwrap();
    let base = mcp_url.trim_end_matches("/mcp").to_string();
    let port = base.rsplit(':').next().unwrap().parse().unwrap();
    Server {
        daemon,
        base,
        port,
        token: status["http"]["token"].as_str().unwrap().to_string(),
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    }
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn origin(&self) -> String {
        self.base.clone()
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// A request with the bearer token.
    fn api(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header("Authorization", self.bearer())
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        answer(self.api(Method::GET, path).send().await.unwrap()).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        answer(
            self.api(Method::POST, path)
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Logs in as the dashboard does: a code with the token, then `/login`; returns the cookie.
    async fn login(&self) -> String {
        let (status, code) = self.post("/api/v1/dashboard/codes", json!({})).await;
        assert_eq!(status, 200, "{code}");
        let response = self
            .http
            .get(code["url"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303);
        let cookie = response.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .to_string();
        cookie.split(';').next().unwrap().to_string()
    }
}

async fn answer(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// Asserts the error shape and returns the code.
fn error_code(body: &Value) -> &str {
    assert!(body["message"].is_string(), "{body}");
    assert!(body.get("detail").is_some(), "{body}");
    body["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code in {body}"))
}

/// One raw HTTP/1.1 request (for headers a client library sets itself, like Host).
fn raw(port: u16, head: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(format!("{head}Connection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn plugin(sandbox: &Sandbox, product: &str, name: &str) -> (Plugin, String) {
    let workspace = sandbox.workspace(name);
    let workspace = workspace.to_str().unwrap().to_string();
    let plugin = sandbox.start_fake_plugin(&["--product", product, "--workspace", &workspace]);
    (plugin, workspace)
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
struct SseEvent {
    id: Option<u64>,
    event: String,
    data: Value,
}

/// Reads Server-Sent Events off a streaming response.
struct Sse {
    stream: Pin<Box<dyn Stream<Item = reqwest::Result<Vec<u8>>> + Send>>,
    buffer: String,
    comments: usize,
}

impl Sse {
    async fn open(server: &Server, last_event_id: Option<u64>) -> Sse {
        let mut request = server.api(Method::GET, "/api/v1/events");
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        Sse::from_response(request.send().await.unwrap())
    }

    fn from_response(response: reqwest::Response) -> Sse {
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        Sse {
            stream: Box::pin(
                response
                    .bytes_stream()
                    .map(|chunk| chunk.map(|b| b.to_vec())),
            ),
            buffer: String::new(),
            comments: 0,
        }
    }

    /// The next event (comment-only blocks are counted and skipped), or None after `within`.
    async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent {
                    id: None,
                    event: "message".into(),
                    data: Value::Null,
                };
                let mut data = String::new();
                let mut fields = 0;
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                        continue;
                    }
                    let (name, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    fields += 1;
                    match name {
                        "id" => event.id = value.parse().ok(),
                        "event" => event.event = value.to_string(),
                        "data" => data.push_str(value),
                        _ => {}
                    }
                }
                if fields > 0 {
                    event.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                    return Some(event);
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next()).await;
            match chunk {
                Ok(Some(Ok(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Reads events until one satisfies `wanted`; returns all read (the match last).
    async fn until(&mut self, what: &str, wanted: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(event) = self.next(Duration::from_secs(1)).await {
                let done = wanted(&event);
                seen.push(event);
                if done {
                    return seen;
                }
            }
        }
        panic!("no event {what} within 20 s; saw {seen:#?}");
    }
}

fn is_drive_done(event: &SseEvent, drive_id: &str) -> bool {
    event.event == "drive_updated"
        && event.data["drive"]["drive_id"] == drive_id
        && event.data["drive"]["state"] == "done"
}

#[tokio::test(flavor = "multi_thread")]
async fn health_is_open_and_everything_else_needs_the_token_and_this_servers_host_and_origin() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);

    let (status, health) = answer(
        server
            .http
            .get(server.url("/api/v1/health"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["protocol"], 1);
    assert!(health["version"].is_string());

    let response = server
        .http
        .get(server.url("/api/v1/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let (_, body) = answer(response).await;
    assert_eq!(error_code(&body), "unauthorized");
    let (status, body) = answer(
        server
            .http
            .get(server.url("/api/v1/sessions"))
            .header("Authorization", "Bearer wrong-token-000000000000")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), error_code(&body)), (401, "unauthorized"));
    let (status, body) = answer(
        server
            .api(Method::GET, "/api/v1/sessions")
            .header("Origin", "http://evil.example")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), error_code(&body)), (403, "forbidden"));
    let (status, _) = answer(
        server
            .api(Method::GET, "/api/v1/sessions")
            .header("Origin", format!("http://localhost:{}", server.port))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "a same-server Origin passes");

    // DNS rebinding: a foreign Host is refused even with the token, and on open paths.
    let bearer = server.bearer();
    for path in ["/api/v1/sessions", "/api/v1/health", "/"] {
        let (status, response) = raw(
            server.port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: evil.example:{}\r\nAuthorization: {bearer}\r\n",
                server.port
            ),
        );
        assert_eq!(status, 403, "{path}: {response}");
    }
    let (status, _) = raw(
        server.port,
        &format!(
            "GET /api/v1/sessions HTTP/1.1\r\nHost: localhost:{}\r\nAuthorization: {bearer}\r\n",
            server.port
        ),
    );
    assert_eq!(status, 200);

    // Unknown paths and methods answer in the error shape, after authentication.
    let (status, body) = server.get("/api/v1/nothing-here").await;
    assert_eq!((status.as_u16(), error_code(&body)), (404, "not_found"));
    let response = server
        .http
        .get(server.url("/api/v1/nothing-here"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let (status, body) = answer(
        server
            .api(Method::DELETE, "/api/v1/sessions")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (405, "method_not_allowed")
    );
    drop(server.daemon);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_answers_with_the_protocols_types() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);
    let (_plugin, workspace) = plugin(&sandbox, "vscodium", "api-proj");

    let (status, body) = server.get("/api/v1/status").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["plugins"], 1);
    assert_eq!(body["http"]["token"], "", "the token is blanked");
    assert!(body["http"]["mcp_url"].as_str().unwrap().ends_with("/mcp"));

    let (status, body) = server.get("/api/v1/sessions").await;
    assert_eq!(status, 200);
    let sessions = body["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["ide"]["product"], "vscodium");
    assert_eq!(
        sessions[0]["window"]["workspace_folders"][0],
        workspace.as_str()
    );
    let session_id = sessions[0]["session_id"].as_str().unwrap().to_string();

    // Create, read, list, cancel.
    let (status, created) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": workspace}, "prompt": "from the api", "options": {"submit": true}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let drive_id = created["drive"]["drive_id"].as_str().unwrap().to_string();
    assert_eq!(created["drive"]["session_id"], session_id.as_str());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = server.get(&format!("/api/v1/drives/{drive_id}")).await;
        assert_eq!(status, 200, "{body}");
        if body["drive"]["state"] == "done" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the drive did not finish: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, listed) = server.get("/api/v1/drives").await;
    assert_eq!(listed["drives"][0]["drive_id"], drive_id.as_str());
    for (query, count) in [
        ("state=terminal", 1),
        ("state=done", 1),
        ("state=failed", 0),
        ("state=active", 0),
        ("active=true", 0),
        ("session_id=s_nobody", 0),
    ] {
        let (status, body) = server.get(&format!("/api/v1/drives?{query}")).await;
        assert_eq!(status, 200, "{query}: {body}");
        assert_eq!(
            body["drives"].as_array().unwrap().len(),
            count,
            "{query}: {body}"
        );
    }
    let (_, body) = server
        .get(&format!("/api/v1/drives?session_id={session_id}"))
        .await;
    assert_eq!(body["drives"].as_array().unwrap().len(), 1);

    // The journal: paging back, its check, and its head in health and status.
    let mut created_ids = vec![drive_id.clone()];
    for i in 0..3 {
        let (status, created) = server
            .post(
                "/api/v1/drives",
                json!({"target": {"workspace": workspace}, "prompt": format!("page {i}")}),
            )
            .await;
        assert_eq!(status, 201, "{created}");
        created_ids.push(created["drive"]["drive_id"].as_str().unwrap().to_string());
    }
    let (_, page) = server.get("/api/v1/drives?limit=2").await;
    let ids = |page: &Value| -> Vec<String> {
        page["drives"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["drive_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&page), created_ids[2..], "{page}");
    assert_eq!(page["more"], true, "{page}");
    let (_, older) = server
        .get(&format!("/api/v1/drives?limit=2&before={}", created_ids[2]))
        .await;
    assert_eq!(ids(&older), created_ids[..2], "{older}");
    assert!(
        older.get("more").is_none() || older["more"] == false,
        "{older}"
    );
    let (status, report) = server.get("/api/v1/journal/verify").await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["verdict"], "intact", "{report}");
    let (_, status_now) = server.get("/api/v1/status").await;
    let health: Value = reqwest::get(server.url("/api/v1/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let head = status_now["journal"]["head"].as_str().unwrap();
    assert!(head.starts_with("sha256:"), "{status_now}");
    assert_eq!(health["journal_head"], head, "{health}");
    let (status, body) = server.get("/api/v1/drives?state=later").await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (400, "invalid_argument")
    );
    let (status, body) = server
        .post(&format!("/api/v1/drives/{drive_id}/cancel"), json!({}))
        .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (409, "drive_finished")
    );
    let (status, body) = server.get("/api/v1/drives/d_nope").await;
    assert_eq!((status.as_u16(), error_code(&body)), (404, "unknown_drive"));
    let (status, body) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": "/nowhere"}, "prompt": "x"}),
        )
        .await;
    assert_eq!((status.as_u16(), error_code(&body)), (404, "no_target"));
    let (status, body) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": workspace}, "prompt": "  "}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (400, "invalid_argument"),
        "{body}"
    );

    // A slow drive can be cancelled.
    drop(_plugin);
    let slow_ws = sandbox.workspace("slow");
    let _slow = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        slow_ws.to_str().unwrap(),
        "--behaviour",
        "slow",
        "--delay-ms",
        "5000",
    ]);
    let (status, created) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": slow_ws}, "prompt": "slow"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let slow_id = created["drive"]["drive_id"].as_str().unwrap();
    let (status, body) = server
        .post(&format!("/api/v1/drives/{slow_id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["drive"]["state"], "cancelled");
    // Bodies are optional on these POSTs.
    let response = server
        .api(Method::POST, &format!("/api/v1/drives/{slow_id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);

    let (status, body) = server.get("/api/v1/chats").await;
    assert_eq!(status, 200, "{body}");
    assert!(body["chats"].is_array());

    let (status, report) = server.get("/api/v1/doctor").await;
    assert_eq!(status, 200, "{report}");
    assert!(report["interfaces"].as_array().unwrap().len() > 5);
    assert!(report["summary"].is_object());
    let mcp_http = report["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "mcp_http")
        .unwrap();
    assert_eq!(mcp_http["status"], "ok", "{mcp_http}");

    let (status, registry) = server.get("/api/v1/interfaces").await;
    assert_eq!(status, 200);
    let cli: Value =
        serde_json::from_slice(&sandbox.run(&["registry", "show", "--json"]).stdout).unwrap();
    assert_eq!(
        registry["interfaces"], cli["interfaces"],
        "the same as `koru registry show --json`"
    );
    assert_eq!(registry["layers"][0]["layer"], "built-in");
    assert!(registry["diagnostics"].as_array().unwrap().is_empty());

    let (status, actions) = server.get("/api/v1/recovery").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "reprobe",
            "reload_registry",
            "retry_drive",
            "cancel_drive",
            "reconnect_plugin",
            "focus_window"
        ]
    );
    let retry = &actions["actions"][2];
    assert_eq!(retry["safe_to_repeat"], false);
    assert_eq!(
        retry["params"][0],
        json!({"name": "drive_id", "required": true, "description": retry["params"][0]["description"]})
    );
    assert_eq!(retry["params"][1]["name"], "route");
    assert_eq!(retry["params"][1]["required"], false);
    assert!(retry["label"].is_string() && retry["does"].is_string());

    let (status, code) = server.post("/api/v1/dashboard/codes", json!({})).await;
    assert_eq!(status, 200);
    let url = code["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/login?code=", server.base)),
        "{url}"
    );
    assert!(code["expires_at_ms"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn recovery_actions_run_through_the_daemon_and_are_announced() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);
    let mut events = Sse::open(&server, None).await;
    let (_plugin, workspace) = plugin(&sandbox, "vscode", "recover");

    let (status, result) = server.post("/api/v1/registry/reload", json!({})).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["action"], "reload_registry");
    assert_eq!(result["ok"], true, "{result}");
    let (status, result) = server
        .post("/api/v1/recovery", json!({"action": "reprobe"}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["action"], "reprobe");
    assert!(result["summary"].is_string());
    let seen = events
        .until("recovery_performed by api", |e| {
            e.event == "recovery_performed" && e.data["action"] == "reprobe"
        })
        .await;
    let by = seen.last().unwrap().data["by"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(by == "api" || by.starts_with("api ("), "{by}");

    let (status, created) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": workspace}, "prompt": "recover me"}),
        )
        .await;
    assert_eq!(status, 201);
    let drive_id = created["drive"]["drive_id"].as_str().unwrap().to_string();
    events
        .until("the drive done", |e| is_drive_done(e, &drive_id))
        .await;
    let (status, body) = server
        .post(
            "/api/v1/recovery",
            json!({"action": "retry_drive", "params": {"drive_id": drive_id}}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (409, "not_retryable"),
        "a submitted prompt is never sent twice"
    );
    let (status, body) = server
        .post(
            "/api/v1/recovery",
            json!({"action": "cancel_drive", "params": {"drive_id": "d_nope"}}),
        )
        .await;
    assert_eq!((status.as_u16(), error_code(&body)), (404, "unknown_drive"));
    let (status, body) = server
        .post("/api/v1/recovery", json!({"action": "retry_drive"}))
        .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (400, "bad_json"),
        "{body}"
    );
    let (status, body) = server
        .post("/api/v1/recovery", json!({"action": "teleport"}))
        .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (400, "bad_json"),
        "{body}"
    );

    // Without a display the window cannot be focused: ok false with a blocker, not an error.
    let session_id = _plugin.session_id.clone();
    let (status, result) = server
        .post(
            "/api/v1/recovery",
            json!({"action": "focus_window", "params": {"session_id": session_id}}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["ok"], false, "{result}");
    assert!(result["blocker"]["code"].is_string(), "{result}");

    // A cookie caller is named `dashboard`.
    let cookie = server.login().await;
    let (status, result) = answer(
        server
            .http
            .post(server.url("/api/v1/recovery"))
            .header("Cookie", &cookie)
            .header("Origin", server.origin())
            .json(&json!({"action": "reconnect_plugin", "params": {"session_id": session_id}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["ok"], true, "{result}");
    let seen = events
        .until("recovery_performed by dashboard", |e| {
            e.event == "recovery_performed" && e.data["action"] == "reconnect_plugin"
        })
        .await;
    let by = seen.last().unwrap().data["by"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(by == "dashboard" || by.starts_with("dashboard ("), "{by}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_are_checked_for_size_type_and_shape() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);

    let (status, body) = answer(
        server
            .api(Method::POST, "/api/v1/drives")
            .header("Content-Type", "application/json")
            .body(r#"{"target":"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), error_code(&body)), (400, "bad_json"));
    assert_eq!(body["detail"]["line"], 1, "{body}");
    assert_eq!(body["detail"]["column"], 10, "{body}");

    let (status, body) = answer(
        server
            .api(Method::POST, "/api/v1/drives")
            .header("Content-Type", "application/json; charset=utf-8")
            .body("{\n  \"target\": \"focused\",\n  \"prompt\": [1]\n}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), error_code(&body)), (400, "bad_json"));
    assert_eq!(body["detail"]["path"], "prompt", "{body}");
    assert_eq!(body["detail"]["line"], 3, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("prompt"),
        "{body}"
    );

    for content_type in [Some("text/plain"), None] {
        let mut request = server
            .api(Method::POST, "/api/v1/drives")
            .body(r#"{"target":"focused","prompt":"x"}"#);
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        let (status, body) = answer(request.send().await.unwrap()).await;
        assert_eq!(
            (status.as_u16(), error_code(&body)),
            (415, "unsupported_media_type"),
            "{content_type:?}"
        );
    }

    let oversized = json!({"target": "focused", "prompt": "y".repeat(3 * 1024 * 1024)});
    let (status, body) = server.post("/api/v1/drives", oversized.clone()).await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (413, "body_too_large")
    );
    // Without Content-Length (chunked), the limit holds while reading.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = serde_json::to_vec(&oversized)
        .unwrap()
        .chunks(64 * 1024)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let (status, body) = answer(
        server
            .api(Method::POST, "/api/v1/recovery")
            .header("Content-Type", "application/json")
            .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (413, "body_too_large")
    );
    // The server goes on.
    assert_eq!(server.get("/api/v1/sessions").await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_logs_in_with_a_one_time_code_and_a_strict_cookie() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);

    // The page itself needs a session.
    let response = server.http.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .starts_with("default-src 'none'; script-src 'self'"));
    assert!(response.text().await.unwrap().contains("koru dashboard"));

    // Codes are minted with the bearer token only.
    let response = server
        .http
        .post(server.url("/api/v1/dashboard/codes"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let (_, code) = server.post("/api/v1/dashboard/codes", json!({})).await;
    let login_url = code["url"].as_str().unwrap().to_string();
    let response = server.http.get(&login_url).send().await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/");
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(set_cookie.starts_with("koru_session="), "{set_cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let value = set_cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("koru_session=");
    assert_eq!(value.len(), 64, "256 random bits");
    let cookie = format!("koru_session={value}");

    // Single use; unknown codes fail the same way.
    for url in [
        login_url.clone(),
        server.url("/login?code=0000"),
        server.url("/login"),
    ] {
        let response = server.http.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 401, "{url}");
        assert!(response.headers().get("set-cookie").is_none());
        assert!(response.text().await.unwrap().contains("koru dashboard"));
    }

    let with_cookie = |method: Method, path: &str| {
        server
            .http
            .request(method, server.url(path))
            .header("Cookie", format!("theme=x; {cookie}"))
    };
    let response = with_cookie(Method::GET, "/").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(
        headers["content-security-policy"],
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    );
    let page = response.text().await.unwrap();
    assert!(page.contains("/assets/app.js") && page.contains("/assets/app.css"));
    assert!(!page.contains("style=\""), "no inline style");

    let (status, _) = answer(
        with_cookie(Method::GET, "/api/v1/sessions")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    // Changing something with the cookie needs this server's Origin (CSRF).
    let drive = json!({"target": "focused", "prompt": "x"});
    let (status, body) = answer(
        with_cookie(Method::POST, "/api/v1/drives")
            .json(&drive)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), error_code(&body)), (403, "forbidden"));
    let (status, body) = answer(
        with_cookie(Method::POST, "/api/v1/drives")
            .header("Origin", "http://evil.example")
            .json(&drive)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), error_code(&body)), (403, "forbidden"));
    let (status, body) = answer(
        with_cookie(Method::POST, "/api/v1/drives")
            .header("Origin", server.origin())
            .json(&drive)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (404, "no_target"),
        "passed auth"
    );
    // The cookie opens neither /mcp nor the code minting.
    let (status, _) = answer(
        with_cookie(Method::POST, "/api/v1/dashboard/codes")
            .header("Origin", server.origin())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = answer(
        with_cookie(Method::POST, "/mcp")
            .header("Origin", server.origin())
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = answer(
        server
            .http
            .get(server.url("/api/v1/sessions"))
            .header("Cookie", "koru_session=forged")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);

    // Assets are public, typed, and under the same policy.
    for (path, content_type) in [
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let response = server.http.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(content_type));
        assert!(response.headers().contains_key("content-security-policy"));
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    }
    assert_eq!(
        server
            .http
            .get(server.url("/assets/nope.js"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_shows_sessions_and_drive_stages_and_resumes_after_the_last_event_id() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);
    let mut events = Sse::open(&server, None).await;
    let (_plugin, workspace) = plugin(&sandbox, "vscodium", "sse-proj");
    let connected = events
        .until("session_connected", |e| e.event == "session_connected")
        .await;
    let connected = connected.last().unwrap();
    assert_eq!(connected.data["kind"], "session_connected");
    assert_eq!(connected.data["session"]["ide"]["product"], "vscodium");
    let first_id = connected.id.expect("events carry their seq as id");

    let (status, created) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": workspace}, "prompt": "watch me"}),
        )
        .await;
    assert_eq!(status, 201);
    let drive_id = created["drive"]["drive_id"].as_str().unwrap().to_string();
    let stages = events
        .until("the drive done", |e| is_drive_done(e, &drive_id))
        .await;
    let states: Vec<&str> = stages
        .iter()
        .filter(|e| e.event == "drive_updated")
        .map(|e| e.data["drive"]["state"].as_str().unwrap())
        .collect();
    for state in ["queued", "sent", "received", "done"] {
        assert!(states.contains(&state), "{state} in {states:?}");
    }
    let ids: Vec<u64> = std::iter::once(first_id)
        .chain(stages.iter().filter_map(|e| e.id))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive ids {ids:?}"
    );

    // A client that saw up to the middle gets exactly the later events, then live ones.
    let middle = ids[ids.len() / 2];
    let mut resumed = Sse::open(&server, Some(middle)).await;
    let mut replayed = Vec::new();
    while let Some(event) = resumed.next(Duration::from_millis(500)).await {
        replayed.push(event.id.unwrap());
    }
    let expected: Vec<u64> = ids.iter().copied().filter(|id| *id > middle).collect();
    assert_eq!(replayed, expected);
    let last = *ids.last().unwrap();
    let mut caught_up = Sse::open(&server, Some(last)).await;
    assert!(
        caught_up.next(Duration::from_millis(300)).await.is_none(),
        "nothing newer"
    );
    drop(_plugin);
    let gone = caught_up
        .until("session_disconnected", |e| {
            e.event == "session_disconnected"
        })
        .await;
    assert_eq!(gone[0].id, Some(last + 1), "live events follow the replay");
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_says_reset_when_the_events_after_the_last_event_id_are_gone() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, &["--http-event-buffer", "3"]);
    let mut events = Sse::open(&server, None).await;
    let (_plugin, workspace) = plugin(&sandbox, "vscodium", "gap");
    let (_, created) = server
        .post(
            "/api/v1/drives",
            json!({"target": {"workspace": workspace}, "prompt": "many events"}),
        )
        .await;
    let drive_id = created["drive"]["drive_id"].as_str().unwrap().to_string();
    let seen = events
        .until("the drive done", |e| is_drive_done(e, &drive_id))
        .await;
    let ids: Vec<u64> = seen.iter().filter_map(|e| e.id).collect();
    assert!(ids.len() > 4, "{ids:?}");

    let mut stale = Sse::open(&server, Some(ids[0])).await;
    let reset = stale.next(Duration::from_secs(2)).await.unwrap();
    assert_eq!(reset.event, "reset");
    assert_eq!(reset.id, None);
    assert!(reset.data["reason"]
        .as_str()
        .unwrap()
        .contains("no longer buffered"));
    // Then the stream goes on live.
    drop(_plugin);
    let gone = stale
        .until("session_disconnected", |e| {
            e.event == "session_disconnected"
        })
        .await;
    let newest = gone.last().unwrap().id.unwrap();

    // The last 3 are still there.
    let mut recent = Sse::open(&server, Some(newest - 3)).await;
    let mut replayed = Vec::new();
    while let Some(event) = recent.next(Duration::from_millis(500)).await {
        replayed.push(event.id.unwrap());
    }
    assert_eq!(replayed, [newest - 2, newest - 1, newest]);
    let mut too_old = Sse::open(&server, Some(newest - 4)).await;
    assert_eq!(
        too_old.next(Duration::from_secs(2)).await.unwrap().event,
        "reset"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_websocket_stream_needs_this_servers_origin_and_resumes_with_since() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message as Ws;

    let sandbox = Sandbox::new();
    let server = start(&sandbox, &[]);
    let ws_url = format!("ws://127.0.0.1:{}/api/v1/events/ws", server.port);
    let request = |url: &str, origin: Option<&str>| {
        let mut request = url.into_client_request().unwrap();
        let headers: &mut HeaderMap = request.headers_mut();
        headers.insert(
            "Authorization",
            HeaderValue::from_str(&server.bearer()).unwrap(),
        );
        if let Some(origin) = origin {
            headers.insert("Origin", HeaderValue::from_str(origin).unwrap());
        }
        request
    };
    for origin in [None, Some("http://evil.example")] {
        let refused = tokio_tungstenite::connect_async(request(&ws_url, origin)).await;
        match refused {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status(), 403, "{origin:?}")
            }
            other => panic!("{origin:?}: expected a 403, got {other:?}"),
        }
    }
    let origin = server.origin();
    let (mut socket, _) = tokio_tungstenite::connect_async(request(&ws_url, Some(&origin)))
        .await
        .unwrap();
    let (_plugin, _) = plugin(&sandbox, "windsurf", "ws-proj");
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let connected_seq = loop {
        assert!(
            Instant::now() < deadline,
            "no session_connected: {received:?}"
        );
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Ws::Text(text) = message else { continue };
        let value: Value = serde_json::from_str(&text).unwrap();
        received.push(value.clone());
        if value["event"]["kind"] == "session_connected" {
            assert_eq!(value["event"]["session"]["ide"]["product"], "windsurf");
            break value["seq"].as_u64().unwrap();
        }
    };
    socket.close(None).await.unwrap();

    // Resume from before the connection event: it comes again first.
    let since = format!("{ws_url}?since={}", connected_seq - 1);
    let (mut socket, _) = tokio_tungstenite::connect_async(request(&since, Some(&origin)))
        .await
        .unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let value: Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
    assert_eq!(value["seq"], connected_seq);
    // From a seq this server never had: reset.
    let future = format!("{ws_url}?since={}", connected_seq + 1000);
    let (mut socket, _) = tokio_tungstenite::connect_async(request(&future, Some(&origin)))
        .await
        .unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let value: Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
    assert_eq!(value["seq"], Value::Null);
    assert_eq!(value["event"]["kind"], "reset");
    socket.send(Ws::Close(None)).await.unwrap();
}

#[test]
fn koru_dashboard_prints_a_login_link_and_never_waits_for_the_browser() {
    let sandbox = Sandbox::new();
    // Without --http there is nothing to open.
    let plain = sandbox.start_daemon(&[]);
    let output = sandbox.run(&["dashboard", "--no-open"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("does not serve HTTP") && stderr.contains("--http"),
        "{stderr}"
    );
    drop(plain);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = start(&sandbox, &[]);
    // A desktop whose browser hangs: `koru dashboard` must not wait for it.
    let bin = sandbox.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opened = sandbox.path().join("opened.txt");
    std::fs::write(
        bin.join("xdg-open"),
        format!(
            "#!/bin/sh\necho \"$1\" > '{}'\nsleep 30\n",
            opened.display()
        ),
    )
    .unwrap();
    koru_system_tests::set_mode(&bin.join("xdg-open"), 0o755);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let output = sandbox
        .koru()
        .args(["dashboard"])
        .env("PATH", &path)
        .env("DISPLAY", ":99")
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let url = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Dashboard: "))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_string();
    assert!(
        url.starts_with(&format!("{}/login?code=", server.base)),
        "{url}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(&opened).unwrap_or_default().trim() != url {
        assert!(
            Instant::now() < deadline,
            "xdg-open was not started with the link"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = runtime.block_on(async { server.http.get(&url).send().await.unwrap().status() });
    assert_eq!(status, 303, "the printed link logs in");

    let output = sandbox.run(&["dashboard", "--json"]);
    assert!(output.status.success());
    let code: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(code["url"].as_str().unwrap().contains("/login?code="));
    assert!(code["expires_at_ms"].is_u64());
}

#[test]
fn http_refuses_a_non_loopback_address_without_tls_even_when_allowed() {
    // With TLS it serves: tests/tests/access.rs.
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["daemon", "--http", "0.0.0.0:0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    let output = sandbox.run(&["daemon", "--http", "[::]:0"]);
    assert!(!output.status.success());
    let output = sandbox.run(&["daemon", "--http", "0.0.0.0:0", "--http-allow-remote"]);
    assert!(!output.status.success(), "plain HTTP off loopback");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--http-tls-cert"));
}

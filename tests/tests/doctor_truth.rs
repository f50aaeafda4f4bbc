//! Doctor never contradicts what runs: against the real daemon started with and without `--http` and `--no-observe`, no interface `koru doctor --json` calls missing from the build is served, each interface it reports usable is served (the HTTP API and MCP answer, the stores are observed), and each it reports disabled is not.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use koru_system_tests::{append_line, doctor_check as check, stdout_json, Observer, Sandbox};
use serde_json::{json, Value};

const CODEX: &str = "chat_history_codex_jsonl";

fn doctor(sandbox: &Sandbox) -> Value {
    let output = sandbox.run(&["doctor", "--json"]);
    stdout_json(&output)
}

/// The interfaces doctor says this build lacks.
fn missing_from_the_build(report: &Value) -> Vec<String> {
    report["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["blocker"]["code"] == "feature_missing")
        .map(|c| format!("{}: {}", c["id"], c["blocker"]["detail"]))
        .collect()
}

/// The HTTP status line's code of one request to `base` + `path`.
fn http_status(base: &str, path: &str, token: &str) -> u16 {
    let address = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("the HTTP endpoint accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap()
}

/// A Codex day folder with one finished rollout, so the store is present before the
/// daemon starts.
fn codex_day(sandbox: &Sandbox) -> std::path::PathBuf {
    let day = sandbox.home().join(".codex/sessions/2026/05/04");
    std::fs::create_dir_all(&day).unwrap();
    day
}

fn write_rollout(day: &Path, workspace: &Path) {
    let rollout = day.join("rollout-2026-05-04T10-00-00-0198c4cf-8587.jsonl");
    for record in [
        json!({"timestamp": "2026-05-04T10:00:00.100Z", "type": "session_meta",
            "payload": {"id": "0198c4cf-8587", "cwd": workspace, "originator": "codex_cli_rs", "cli_version": "0.110.0"}}),
        json!({"timestamp": "2026-05-04T10:00:01.000Z", "type": "event_msg",
            "payload": {"type": "task_started", "turn_id": "t1"}}),
        json!({"timestamp": "2026-05-04T10:00:01.010Z", "type": "event_msg",
            "payload": {"type": "user_message", "message": "is this observed?", "images": []}}),
    ] {
        append_line(&rollout, &record);
    }
}

#[test]
fn a_daemon_serving_http_and_observing_is_reported_as_serving_them() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let day = codex_day(&sandbox);
    let _daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    let report = doctor(&sandbox);
    assert_eq!(report["daemon"]["running"], true, "{report:#}");
    assert_eq!(missing_from_the_build(&report), Vec::<String>::new());

    // Usable in doctor, and served: the REST API, the dashboard and MCP answer.
    for id in ["dashboard_rest", "mcp_http", "daemon_socket", CODEX] {
        assert_eq!(
            check(&report, id)["status"],
            "ok",
            "{:#}",
            check(&report, id)
        );
    }
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    let base = status["http"]["mcp_url"]
        .as_str()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_string();
    let token = status["http"]["token"].as_str().unwrap();
    assert_eq!(http_status(&base, "/api/v1/status", token), 200);
    assert_ne!(
        http_status(&base, "/", token),
        404,
        "the dashboard is served"
    );
    assert_ne!(http_status(&base, "/mcp", token), 404, "MCP is served");
    assert_eq!(status["observing"], true);

    // And the store doctor calls observed is: a prompt written now is seen.
    let observer = Observer::start(&sandbox);
    write_rollout(&day, &workspace);
    let kinds = observer.kinds(2);
    assert_eq!(kinds, ["chat_seen", "prompt_seen"]);
}

#[test]
fn a_daemon_without_http_or_observing_is_reported_as_not_serving_them() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("repo");
    let day = codex_day(&sandbox);
    let _daemon = sandbox.start_daemon(&["--no-observe"]);
    let report = doctor(&sandbox);
    assert_eq!(report["daemon"]["running"], true, "{report:#}");
    assert_eq!(missing_from_the_build(&report), Vec::<String>::new());

    for id in ["dashboard_rest", "mcp_http", CODEX] {
        let check = check(&report, id);
        assert_eq!(check["status"], "unavailable", "{check:#}");
        assert_eq!(check["blocker"]["code"], "disabled", "{check:#}");
    }
    assert!(check(&report, CODEX)["blocker"]["detail"]
        .as_str()
        .unwrap()
        .contains("--no-observe"));
    assert!(check(&report, "mcp_http")["recovery"][0]["does"]
        .as_str()
        .unwrap()
        .contains("--http"));

    // And indeed: no HTTP endpoint, and a prompt written now is not observed.
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    assert!(status.get("http").is_none(), "{status:#}");
    assert_eq!(status["observing"], false);
    let observer = Observer::start(&sandbox);
    write_rollout(&day, &workspace);
    assert!(observer.nothing_within(Duration::from_secs(1)));
    assert!(sandbox.chats().is_empty());
}

#[test]
fn without_a_daemon_the_served_interfaces_say_the_daemon_is_not_running() {
    let sandbox = Sandbox::new();
    codex_day(&sandbox);
    let report = doctor(&sandbox);
    assert_eq!(report["daemon"]["running"], false);
    assert_eq!(missing_from_the_build(&report), Vec::<String>::new());
    for id in ["dashboard_rest", "mcp_http", "mcp_stdio_server", "cli"] {
        assert_eq!(
            check(&report, id)["blocker"]["code"],
            "daemon_down",
            "{:#}",
            check(&report, id)
        );
    }
    // A store is judged by what is on disk: what a daemon started now would read.
    assert_eq!(check(&report, CODEX)["status"], "ok");
}

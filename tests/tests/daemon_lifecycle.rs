//! The daemon as an operator meets it: socket location and permissions, one daemon per socket, stale sockets, peer-UID refusal, handshake timeout, SIGTERM drain, logs.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use koru_system_tests::{controller_hello, greet, set_mode, signal, Raw, Sandbox};
use serde_json::json;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_socket_is_private_and_status_reports_the_daemon() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let socket = sandbox.socket();
    assert_eq!(mode(&socket), 0o600, "socket mode");
    assert_eq!(
        mode(socket.parent().unwrap()),
        0o700,
        "socket directory mode"
    );

    let status = sandbox.run(&["status", "--json"]);
    assert!(status.status.success(), "{status:?}");
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["socket"], socket.to_str().unwrap());
    assert_eq!(status["plugins"], 0);
    assert_eq!(status["protocol"], json!({"min": 1, "max": 1}));

    let human = sandbox.run(&["status"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.starts_with("koru daemon "), "{text}");
    assert!(text.contains(socket.to_str().unwrap()), "{text}");
}

#[test]
fn the_socket_path_follows_xdg_runtime_dir_when_koru_socket_is_unset() {
    let sandbox = Sandbox::new();
    let mut daemon = sandbox
        .koru()
        .env_remove("KORU_SOCKET")
        .arg("daemon")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let expected = sandbox.path().join("run").join("koru").join("koru.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !expected.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = sandbox
        .koru()
        .env_remove("KORU_SOCKET")
        .args(["status", "--json"])
        .output()
        .unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(status.status.success(), "{status:?}");
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["socket"], expected.to_str().unwrap());
}

#[test]
fn every_client_command_says_plainly_when_no_daemon_runs() {
    let sandbox = Sandbox::new();
    for args in [
        vec!["status"],
        vec!["sessions"],
        vec!["sessions", "--json"],
        vec!["drives"],
        vec!["send", "hello"],
        vec!["cancel", "d_x"],
    ] {
        let output = sandbox.run(&args);
        assert_eq!(output.status.code(), Some(3), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!(
            "koru: no daemon at {}; start one with `koru daemon`",
            sandbox.socket().display()
        );
        assert_eq!(stderr.trim(), expected, "{args:?}");
    }
}

#[test]
fn a_second_daemon_is_refused_and_the_first_keeps_serving() {
    let sandbox = Sandbox::new();
    let mut first = sandbox.start_daemon(&[]);
    let second = sandbox.run(&["daemon"]);
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!(
            "another koru daemon (pid {}) is already serving",
            first.pid()
        )),
        "{stderr}"
    );
    assert!(first.is_running());
    assert!(sandbox.run(&["status"]).status.success());
}

#[test]
fn a_daemon_started_right_after_a_kill_9_serves_once_the_killed_one_is_gone() {
    // As a shell does it: `kill -9` and a new `koru daemon` at once, the killed one not
    // reaped yet (it may still be tearing itself down, its lock held).
    let sandbox = Sandbox::new();
    let mut first = sandbox.start_daemon(&[]);
    signal(first.pid(), nix::sys::signal::Signal::SIGKILL);
    let second = sandbox.start_daemon(&[]);
    sandbox.wait_until_served_by(&second);
    first.child.wait().unwrap();
    let status = sandbox.run(&["status", "--json"]);
    assert!(status.status.success(), "{}", second.log_text());
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["pid"], second.pid());
}

#[test]
fn a_stale_socket_left_by_a_killed_daemon_is_replaced() {
    let sandbox = Sandbox::new();
    let mut first = sandbox.start_daemon(&[]);
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(
        sandbox.socket().exists(),
        "SIGKILL leaves the socket file behind"
    );
    assert!(!sandbox.run(&["status"]).status.success());

    let second = sandbox.start_daemon(&[]);
    let status = sandbox.run(&["status", "--json"]);
    assert!(status.status.success());
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["pid"], second.pid());
    assert!(
        second.log_text().contains("replacing a stale socket"),
        "{}",
        second.log_text()
    );
}

#[test]
fn a_socket_directory_open_to_others_is_refused() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path().join("run").join("open");
    std::fs::create_dir_all(&dir).unwrap();
    set_mode(&dir, 0o755);
    let output = sandbox
        .koru()
        .env("KORU_SOCKET", dir.join("koru.sock"))
        .arg("daemon")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("has mode 0755; it must be private to you"),
        "{stderr}"
    );
}

#[test]
fn a_peer_running_as_another_user_is_refused() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("SKIPPED: switching to another uid needs root (CI runs as root)");
        return;
    }
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    // Open the directory and socket for this test only, so that `nobody` can reach the
    // socket at all: the peer-UID check is what must stop it.
    let mut dir = sandbox.socket();
    while dir.pop() && dir != std::path::Path::new("/tmp") && dir != std::path::Path::new("/") {
        let current = mode(&dir);
        set_mode(&dir, current | 0o011);
    }
    set_mode(&sandbox.socket(), 0o666);
    let bin = koru_system_tests::koru_bin();
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["status", "--socket"])
        .arg(sandbox.socket())
        .env("HOME", "/")
        .output()
        .expect("setpriv runs (util-linux)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "nobody must be refused: {stderr}");
    assert!(stderr.contains("peer_refused"), "{stderr}");
    assert!(stderr.contains("your uid is 65534"), "{stderr}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !daemon
        .log_text()
        .contains("refused a connection from another user")
    {
        assert!(
            Instant::now() < deadline,
            "refusal not logged:\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        daemon.log_text().contains("peer_uid=65534"),
        "{}",
        daemon.log_text()
    );
}

#[test]
fn a_connection_that_never_says_hello_is_closed_after_the_handshake_timeout() {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&["--handshake-timeout-ms", "300"]);
    let mut raw = Raw::connect(&daemon.socket);
    let started = Instant::now();
    let error = raw.recv().expect("an error line before the close");
    assert_eq!(error["type"], "error");
    assert_eq!(error["code"], "handshake_timeout");
    assert!(raw.closed());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "closed too early: {waited:?}"
    );
}

#[test]
fn sigterm_ends_drives_says_bye_removes_the_socket_and_exits_zero() {
    let sandbox = Sandbox::new();
    let mut daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("drain");
    // A plugin that takes its time, so a drive is in flight when SIGTERM arrives.
    let plugin = sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--behaviour",
        "slow",
        "--delay-ms",
        "10000",
    ]);
    let (mut watcher, _) = greet(&daemon.socket, &controller_hello());
    watcher.send(&json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    watcher.recv_type("events.subscribed");
    let sent = sandbox.run(&["send", "--session", &plugin.session_id, "in flight"]);
    assert!(sent.status.success(), "{sent:?}");
    loop {
        let line = watcher.recv_type("stream");
        if line["event"]["drive"]["state"] == "sent" {
            break;
        }
    }

    let status = daemon
        .terminate(Duration::from_secs(5))
        .expect("exits within 5 s");
    assert!(status.success(), "exit status {status}");
    assert!(!sandbox.socket().exists(), "socket removed");
    // The watcher saw the drive end and then the daemon's bye.
    let mut saw_failed = false;
    while let Some(line) = watcher.recv() {
        if line["type"] == "stream" && line["event"]["drive"]["state"] == "failed" {
            assert_eq!(line["event"]["drive"]["blocker"]["code"], "daemon_shutdown");
            saw_failed = true;
        }
        if line["type"] == "bye" {
            assert!(saw_failed, "the drive must end before bye");
            break;
        }
    }
    assert!(saw_failed, "no drive_updated failed event");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !plugin.log_text().contains("daemon said bye") {
        assert!(
            Instant::now() < deadline,
            "plugin log: {}",
            plugin.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn json_logs_are_one_object_per_line() {
    let sandbox = Sandbox::new();
    let mut daemon = sandbox.start_daemon(&["--log-format", "json"]);
    assert!(sandbox.run(&["status"]).status.success());
    daemon.terminate(Duration::from_secs(5)).unwrap();
    let log = daemon.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{log}");
    for line in lines {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            value["level"].is_string() && value["fields"].is_object(),
            "{line}"
        );
    }
}

#[test]
fn version_and_completions() {
    let sandbox = Sandbox::new();
    let version = sandbox.run(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("koru {}", env!("CARGO_PKG_VERSION"))
    );
    let completions = sandbox.run(&["completions", "bash"]);
    assert!(completions.status.success());
    let script = String::from_utf8_lossy(&completions.stdout);
    assert!(
        script.contains("_koru()") && script.contains("fake-plugin"),
        "{script}"
    );
}

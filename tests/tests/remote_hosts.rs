//! Several machines: `koru dial-stdio`, the far side of `koru --host ssh://…`, bridging its standard streams to the daemon's socket byte for byte, under the daemon's peer check.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use koru_system_tests::{controller_hello, koru_bin, wait_exit, Sandbox};
use serde_json::{json, Value};

/// `koru dial-stdio` of `sandbox`, with both ends piped.
fn dial(sandbox: &Sandbox) -> std::process::Child {
    sandbox
        .koru()
        .arg("dial-stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("koru dial-stdio starts")
}

/// Reads one line (bounded by the child's death: a closed stdout ends it).
fn read_json_line(reader: &mut impl BufRead) -> Value {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a line from the bridge");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

#[test]
fn dial_stdio_bridges_the_protocol_to_the_daemon_and_ends_when_its_input_does() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let mut bridge = dial(&sandbox);
    let mut input = bridge.stdin.take().expect("stdin");
    let mut output = BufReader::new(bridge.stdout.take().expect("stdout"));
    let mut hello = controller_hello();
    hello["id"] = json!("h");
    writeln!(input, "{hello}").unwrap();
    let welcome = read_json_line(&mut output);
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    // Two requests in one write come back as two answers, in order: bytes, not lines.
    input
        .write_all(b"{\"v\":1,\"type\":\"status\",\"id\":1}\n{\"v\":1,\"type\":\"sessions.list\",\"id\":2}\n")
        .unwrap();
    let status = read_json_line(&mut output);
    assert_eq!(status["type"], "status.result", "{status}");
    assert_eq!(status["id"], 1);
    assert_eq!(status["controllers"], 1, "{status}");
    let sessions = read_json_line(&mut output);
    assert_eq!(sessions["type"], "sessions.list.result", "{sessions}");
    assert_eq!(sessions["id"], 2);
    drop(input);
    let exit =
        wait_exit(&mut bridge, Duration::from_secs(5)).expect("the bridge ends with its input");
    assert!(exit.success(), "{exit}");
}

#[test]
fn dial_stdio_ends_when_the_daemon_goes_and_says_so_when_there_is_none() {
    let sandbox = Sandbox::new();
    let output = sandbox
        .koru()
        .arg("dial-stdio")
        .output()
        .expect("koru runs");
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no daemon at"), "{stderr}");

    let mut daemon = sandbox.start_daemon(&[]);
    let mut bridge = dial(&sandbox);
    let mut input = bridge.stdin.take().expect("stdin");
    let mut output = BufReader::new(bridge.stdout.take().expect("stdout"));
    writeln!(input, "{}", controller_hello()).unwrap();
    assert_eq!(read_json_line(&mut output)["type"], "welcome");
    daemon
        .terminate(Duration::from_secs(10))
        .expect("the daemon stops");
    // The daemon's goodbye comes through, then the end.
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut output, &mut rest).unwrap();
    assert!(rest.contains("\"bye\""), "{rest}");
    let exit = wait_exit(&mut bridge, Duration::from_secs(5))
        .expect("the bridge ends when the daemon closes, its input still open");
    assert!(exit.success(), "{exit}");
    drop(input);
}

#[test]
fn dial_stdio_as_another_user_is_refused_by_the_daemons_peer_check() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("SKIPPED: switching to another uid needs root (CI runs as root)");
        return;
    }
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    // Let `nobody` reach the socket at all: the daemon's peer check is what must stop it.
    let mut dir = sandbox.socket();
    while dir.pop() && dir != std::path::Path::new("/tmp") && dir != std::path::Path::new("/") {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        koru_system_tests::set_mode(&dir, mode | 0o011);
    }
    koru_system_tests::set_mode(&sandbox.socket(), 0o666);
    let mut bridge = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(koru_bin())
        .args(["dial-stdio", "--socket"])
        .arg(sandbox.socket())
        .env("HOME", "/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv runs (util-linux)");
    let mut input = bridge.stdin.take().expect("stdin");
    let mut output = BufReader::new(bridge.stdout.take().expect("stdout"));
    let _ = writeln!(input, "{}", controller_hello());
    let refusal = read_json_line(&mut output);
    assert_eq!(refusal["type"], "error", "{refusal}");
    assert_eq!(refusal["code"], "peer_refused", "{refusal}");
    wait_exit(&mut bridge, Duration::from_secs(5)).expect("the bridge ends with the refusal");
    assert!(
        daemon.log_text().contains("peer_uid=65534"),
        "{}",
        daemon.log_text()
    );
}

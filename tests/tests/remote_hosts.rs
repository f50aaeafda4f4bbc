//! Several machines: `koru dial-stdio` bridging to the daemon's socket, and `koru --host ssh://…` through a real loopback OpenSSH server in front of a second daemon (its own sandbox and runtime dir) with a fake plugin — listing and driving it, named hosts, ssh's refusals reported with exit 3.

use koru_system_tests::mcp::tool_text;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use koru_system_tests::sshd::Sshd;
use koru_system_tests::{controller_hello, koru_bin, stdout_json, wait_exit, Sandbox};
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

/// Two machines: this one (`local`: a daemon and a VS Code window) and one behind a
/// loopback sshd (its own daemon and a VSCodium window).
struct TwoMachines {
    local: Sandbox,
    _local_daemon: koru_system_tests::Daemon,
    _local_plugin: koru_system_tests::Plugin,
    remote: Sandbox,
    remote_daemon: koru_system_tests::Daemon,
    remote_plugin: koru_system_tests::Plugin,
    sshd: Sshd,
}

impl TwoMachines {
    fn start() -> TwoMachines {
        let local = Sandbox::new();
        let local_daemon = local.start_daemon(&["--no-observe"]);
        let local_ws = local.workspace("here");
        let local_plugin = local.start_fake_plugin(&[
            "--product",
            "vscode",
            "--workspace",
            local_ws.to_str().unwrap(),
        ]);
        let remote = Sandbox::new();
        let remote_daemon = remote.start_daemon(&["--no-observe"]);
        let remote_ws = remote.workspace("there");
        // VSCodium: its chat takes a prompt and submits it by command (Cursor's and
        // Windsurf's need a key press into a focused window, which needs a display).
        let remote_plugin = remote.start_fake_plugin(&[
            "--product",
            "vscodium",
            "--workspace",
            remote_ws.to_str().unwrap(),
        ]);
        let sshd = Sshd::start(&remote);
        TwoMachines {
            local,
            _local_daemon: local_daemon,
            _local_plugin: local_plugin,
            remote,
            remote_daemon,
            remote_plugin,
            sshd,
        }
    }

    /// Runs `koru --host HOST… [ssh options] ARGS` from this machine.
    fn koru(&self, hosts: &[&str], args: &[&str]) -> Output {
        let mut command = self.local.koru();
        for host in hosts {
            command.args(["--host", host]);
        }
        command
            .args(self.sshd.koru_args())
            .args(args)
            .output()
            .expect("koru runs")
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_daemon_behind_ssh_is_listed_and_driven_as_if_it_were_here() {
    let machines = TwoMachines::start();
    let url = machines.sshd.url();

    let listed = machines.koru(&[&url], &["sessions", "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let sessions = stdout_json(&listed);
    let ids: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [machines.remote_plugin.session_id.as_str()],
        "{sessions}"
    );
    assert_eq!(sessions[0]["ide"]["product"], "vscodium");

    // One ssh connection carries the drive and its events to the end.
    let workspace = machines.remote.workspace("there");
    let sent = machines.koru(
        &[&url],
        &[
            "send",
            "--workspace",
            workspace.to_str().unwrap(),
            "--wait",
            "--json",
            "over ssh ✓",
        ],
    );
    assert!(
        sent.status.success(),
        "{}{}",
        String::from_utf8_lossy(&sent.stdout),
        stderr(&sent)
    );
    let drive = stdout_json(&sent);
    assert_eq!(drive["state"], "done", "{drive}");
    assert_eq!(
        drive["session_id"],
        machines.remote_plugin.session_id.as_str()
    );
    // The far daemon has it, this one does not.
    let there = machines.remote.run(&["drives", "--json"]);
    assert!(String::from_utf8_lossy(&there.stdout).contains(drive["drive_id"].as_str().unwrap()));
    let here = machines.local.run(&["drives", "--json"]);
    assert_eq!(stdout_json(&here), json!([]));

    // Status names the far daemon's socket; the connection came from the far `koru
    // dial-stdio`, as its user.
    let status = machines.koru(&[&url], &["status", "--json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    assert_eq!(
        stdout_json(&status)["socket"],
        machines.remote.socket().display().to_string()
    );
    assert!(
        machines.remote_daemon.log_text().contains("koru-cli"),
        "{}",
        machines.remote_daemon.log_text()
    );

    // Doctor checks the far daemon (and says its other probes belong to that machine).
    let doctor = machines.koru(&[&url], &["doctor", "--json"]);
    assert!(doctor.status.success(), "{}", stderr(&doctor));
    let check = stdout_json(&doctor);
    assert_eq!(check["reachable"], true, "{check}");
    assert_eq!(
        check["sessions"][0]["session_id"],
        machines.remote_plugin.session_id.as_str()
    );
    assert!(check["note"].as_str().unwrap().contains("koru doctor"));
}

#[test]
fn a_named_host_is_kept_in_hosts_yaml_and_resolves_by_name() {
    let machines = TwoMachines::start();
    let url = machines.sshd.url();
    let added = machines.local.run(&["host", "add", "machine-b", &url]);
    assert!(added.status.success(), "{}", stderr(&added));
    let file = machines.local.xdg_config_home().join("koru/hosts.yaml");
    let text = std::fs::read_to_string(&file).expect("hosts.yaml written");
    assert!(text.contains(&url), "{text}");
    let again = machines
        .local
        .run(&["host", "add", "machine-b", "ssh://elsewhere"]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("exists"), "{}", stderr(&again));
    let bad = machines.local.run(&["host", "add", "local", &url]);
    assert!(stderr(&bad).contains("reserved"), "{}", stderr(&bad));
    let bad = machines
        .local
        .run(&["host", "add", "box", "ssh://box:70000"]);
    assert!(
        stderr(&bad).contains("the port \"70000\""),
        "{}",
        stderr(&bad)
    );

    let listed = machines.local.run(&["host", "ls", "--json"]);
    assert_eq!(stdout_json(&listed)["machine-b"]["url"], url.as_str());

    let sessions = machines.koru(&["machine-b"], &["sessions", "--json"]);
    assert!(sessions.status.success(), "{}", stderr(&sessions));
    assert_eq!(
        stdout_json(&sessions)[0]["session_id"],
        machines.remote_plugin.session_id.as_str()
    );
    // $KORU_HOST stands in for --host.
    let from_env = machines
        .local
        .koru()
        .env("KORU_HOST", "machine-b")
        .args(machines.sshd.koru_args())
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        stdout_json(&from_env)[0]["session_id"],
        machines.remote_plugin.session_id.as_str()
    );
    // Options after the subcommand count as much as those before it.
    let after = machines
        .local
        .koru()
        .args(["--host", "machine-b", "sessions", "--json"])
        .args(machines.sshd.koru_args())
        .output()
        .unwrap();
    assert!(after.status.success(), "{}", stderr(&after));
    let mixed = machines
        .local
        .koru()
        .args([
            "--host",
            "local",
            "sessions",
            "--json",
            "--host",
            "machine-b",
        ])
        .args(machines.sshd.koru_args())
        .output()
        .unwrap();
    assert_eq!(
        stdout_json(&mixed)["hosts"],
        json!([{"host": "local", "ok": true}, {"host": "machine-b", "ok": true}])
    );
    // `local` is this machine.
    let here = machines.koru(&["local"], &["sessions", "--json"]);
    assert_eq!(stdout_json(&here)[0]["ide"]["product"], "vscode");

    let unknown = machines.koru(&["nowhere"], &["sessions"]);
    assert!(
        stderr(&unknown).contains("no host named \"nowhere\""),
        "{}",
        stderr(&unknown)
    );
    let removed = machines.local.run(&["host", "rm", "machine-b"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let gone = machines.koru(&["machine-b"], &["sessions"]);
    assert!(!gone.status.success());
}

#[test]
fn ssh_refusals_and_a_missing_far_daemon_are_reported_with_exit_3() {
    let mut machines = TwoMachines::start();
    let url = machines.sshd.url();

    // A host key nobody vouched for is refused by ssh; koru says what ssh said.
    let unknown_key = machines
        .local
        .koru()
        .args(["--host", &url])
        .args(machines.sshd.koru_args_with_unknown_host_key())
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(
        unknown_key.status.code(),
        Some(3),
        "{}",
        stderr(&unknown_key)
    );
    let said = stderr(&unknown_key);
    assert!(said.contains("cannot reach host"), "{said}");
    assert!(said.contains("Host key verification failed"), "{said}");

    // Nobody listening on the port.
    let closed_port = format!("ssh://{}@127.0.0.1:1", machines.sshd.user);
    let refused = machines.koru(&[&closed_port], &["sessions"]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("Connection refused"),
        "{}",
        stderr(&refused)
    );

    // sshd answers but the far daemon is not running: the far `koru dial-stdio` says so.
    machines
        .remote_daemon
        .terminate(Duration::from_secs(10))
        .expect("stops");
    let started = Instant::now();
    let down = machines.koru(&[&url], &["sessions"]);
    assert_eq!(down.status.code(), Some(3), "{}", stderr(&down));
    assert!(
        stderr(&down).contains(&format!(
            "cannot reach host {}@127.0.0.1:{}: no daemon at",
            machines.sshd.user, machines.sshd.port
        )),
        "{}",
        stderr(&down)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        !machines.sshd.log_text().is_empty(),
        "sshd logged the sessions"
    );
}

/// The merged view's rows of `kind` (`sessions`, `drives`) as `(host, id)`.
fn merged_rows(view: &Value, kind: &str, id: &str) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = view[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no {kind} in {view}"))
        .iter()
        .map(|row| {
            (
                row["host"].as_str().unwrap().to_string(),
                row[id].as_str().unwrap().to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn sessions_and_drives_merge_over_hosts_with_qualified_ids_and_a_down_host_hides_nothing() {
    let mut machines = TwoMachines::start();
    let added = machines
        .local
        .run(&["host", "add", "machine-b", &machines.sshd.url()]);
    assert!(added.status.success(), "{}", stderr(&added));
    let both = ["local", "machine-b"];
    let local_session = machines.local.session_ids().remove(0);
    let remote_session = machines.remote_plugin.session_id.clone();

    let listed = machines.koru(&both, &["sessions", "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let view = stdout_json(&listed);
    assert_eq!(
        merged_rows(&view, "sessions", "session_id"),
        [
            ("local".to_string(), format!("local/{local_session}")),
            (
                "machine-b".to_string(),
                format!("machine-b/{remote_session}")
            ),
        ]
    );
    assert_eq!(
        view["hosts"],
        json!([{"host": "local", "ok": true}, {"host": "machine-b", "ok": true}])
    );
    let table = machines.koru(&both, &["sessions"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("HOST"), "{text}");
    assert!(
        text.contains(&format!("machine-b/{remote_session}")),
        "{text}"
    );
    assert!(
        text.contains("vscodium") && text.contains("vscode "),
        "{text}"
    );

    // A qualified session id goes to its own host, and the drive comes back qualified.
    let qualified = format!("machine-b/{remote_session}");
    let sent = machines.koru(
        &both,
        &[
            "send",
            "--session",
            &qualified,
            "--wait",
            "--json",
            "to b ✓",
        ],
    );
    assert!(sent.status.success(), "{}", stderr(&sent));
    let drive = stdout_json(&sent);
    assert_eq!(drive["state"], "done", "{drive}");
    assert_eq!(drive["session_id"], qualified.as_str());
    let drive_id = drive["drive_id"].as_str().unwrap().to_string();
    assert!(drive_id.starts_with("machine-b/d_"), "{drive_id}");
    // Without a host, a send over two hosts does not guess.
    let unsure = machines.koru(&both, &["send", "hello"]);
    assert!(!unsure.status.success());
    assert!(stderr(&unsure).contains("one host"), "{}", stderr(&unsure));

    let drives = machines.koru(&both, &["drives", "--json"]);
    assert!(drives.status.success(), "{}", stderr(&drives));
    let view = stdout_json(&drives);
    assert_eq!(
        merged_rows(&view, "drives", "drive_id"),
        [("machine-b".to_string(), drive_id.clone())]
    );
    assert_eq!(view["drives"][0]["session_id"], qualified.as_str());
    // Paging one host's drives by a qualified session.
    let of_b = machines.koru(&both, &["drives", "--session", &qualified, "--json"]);
    assert_eq!(
        merged_rows(&stdout_json(&of_b), "drives", "drive_id"),
        [("machine-b".to_string(), drive_id.clone())]
    );
    // A drive id qualified with the other host is that host's to answer: it has none.
    let bare = drive_id.trim_start_matches("machine-b/");
    let wrong = machines.koru(&both, &["cancel", &format!("local/{bare}")]);
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("unknown_drive"),
        "{}",
        stderr(&wrong)
    );
    // machine-b has it, and says it is over.
    let cancelled = machines.koru(&both, &["cancel", &drive_id]);
    assert!(!cancelled.status.success());
    assert!(
        stderr(&cancelled).contains(&format!(
            "drive_finished: drive {bare} already ended as done"
        )),
        "{}",
        stderr(&cancelled)
    );

    let status = machines.koru(&both, &["status", "--json"]);
    let view = stdout_json(&status);
    assert_eq!(
        merged_rows(&view, "status", "socket"),
        [
            (
                "local".to_string(),
                machines.local.socket().display().to_string()
            ),
            (
                "machine-b".to_string(),
                machines.remote.socket().display().to_string()
            ),
        ]
    );

    // machine-b's daemon stops: this machine still answers, machine-b is reported.
    machines
        .remote_daemon
        .terminate(Duration::from_secs(10))
        .expect("stops");
    let one_down = machines.koru(&both, &["sessions", "--json"]);
    assert!(one_down.status.success(), "{}", stderr(&one_down));
    let view = stdout_json(&one_down);
    assert_eq!(
        merged_rows(&view, "sessions", "session_id"),
        [("local".to_string(), format!("local/{local_session}"))]
    );
    assert_eq!(view["hosts"][1]["host"], "machine-b");
    assert_eq!(view["hosts"][1]["ok"], false);
    assert_eq!(view["hosts"][1]["code"], "daemon_down");
    assert!(
        view["hosts"][1]["error"]
            .as_str()
            .unwrap()
            .starts_with("cannot reach host machine-b: no daemon at"),
        "{view}"
    );
    let table = machines.koru(&both, &["drives"]);
    assert!(table.status.success(), "{}", stderr(&table));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("host machine-b: DOWN — cannot reach host machine-b"),
        "{text}"
    );
    let status = machines.koru(&both, &["status"]);
    assert!(status.status.success());
    assert!(String::from_utf8_lossy(&status.stdout).contains("host local:"));

    // Nobody answers: the view still says who and why, and the exit is 3.
    let nowhere = format!("ssh://{}@127.0.0.1:1", machines.sshd.user);
    let none = machines.koru(&["machine-b", &nowhere], &["sessions", "--json"]);
    assert_eq!(none.status.code(), Some(3), "{}", stderr(&none));
    let view = stdout_json(&none);
    assert_eq!(view["sessions"], json!([]));
    let reasons: Vec<&str> = view["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["error"].as_str().unwrap())
        .collect();
    assert!(reasons[0].contains("no daemon at"), "{reasons:?}");
    assert!(reasons[1].contains("Connection refused"), "{reasons:?}");
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    arguments: Value,
) -> (bool, String) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|error| panic!("{tool} answered with a protocol error: {error}"));
    (result.is_error != Some(true), tool_text(&result))
}

/// sshd's count of logins so far (one per ssh connection).
fn logins(sshd: &Sshd) -> usize {
    sshd.log_text().matches("Accepted publickey").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mcp_server_spans_both_machines_routes_by_qualified_ids_and_survives_a_host_going_down()
{
    use rmcp::ServiceExt;
    let mut machines = TwoMachines::start();
    let added = machines
        .local
        .run(&["host", "add", "machine-b", &machines.sshd.url()]);
    assert!(added.status.success(), "{}", stderr(&added));
    let local_session = machines.local.session_ids().remove(0);
    let remote_session = machines.remote_plugin.session_id.clone();
    let logins_before = logins(&machines.sshd);

    let mut command = tokio::process::Command::from(machines.local.koru());
    command
        .args(["--host", "local", "--host", "machine-b"])
        .args(machines.sshd.koru_args())
        .arg("mcp")
        .env("RUST_LOG", "warn");
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("koru mcp starts");
    let client = ().serve(transport).await.expect("the MCP handshake");
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default();
    assert!(instructions.contains("local, machine-b"), "{instructions}");

    let (ok, listed) = call(&client, "list_sessions", json!({})).await;
    assert!(ok, "{listed}");
    assert!(
        listed.contains(&format!("local/{local_session} vscode")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("machine-b/{remote_session} vscodium")),
        "{listed}"
    );

    // A qualified session goes to its host; the drive comes back qualified.
    let (ok, sent) = call(
        &client,
        "send_prompt",
        json!({"target": format!("machine-b/{remote_session}"), "prompt": "over the kept connection ✓", "timeout_s": 20}),
    )
    .await;
    assert!(ok, "{sent}");
    assert!(sent.starts_with("drive machine-b/d_"), "{sent}");
    assert!(
        sent.contains(&format!("in session machine-b/{remote_session}")),
        "{sent}"
    );
    let drive_id = sent
        .split_whitespace()
        .nth(1)
        .expect("the drive id")
        .to_string();

    // A workspace path goes to the one host that has a window on it.
    let here = machines.local.workspace("here");
    let (ok, sent_here) = call(
        &client,
        "send_prompt",
        json!({"target": here.to_str().unwrap(), "prompt": "to this machine ✓", "timeout_s": 20}),
    )
    .await;
    assert!(ok, "{sent_here}");
    assert!(sent_here.starts_with("drive local/d_"), "{sent_here}");
    // "focused" could be anywhere: refused, not guessed.
    let (ok, refused) = call(
        &client,
        "send_prompt",
        json!({"target": "focused", "prompt": "x"}),
    )
    .await;
    assert!(!ok);
    assert!(refused.starts_with("error invalid_argument"), "{refused}");
    assert!(refused.contains("machine-b"), "{refused}");
    let (ok, named) = call(
        &client,
        "send_prompt",
        json!({"target": "focused", "host": "machine-b", "prompt": "named host ✓", "timeout_s": 20}),
    )
    .await;
    assert!(ok, "{named}");
    assert!(named.starts_with("drive machine-b/d_"), "{named}");

    let (ok, got) = call(&client, "get_drive", json!({"drive_id": drive_id})).await;
    assert!(ok, "{got}");
    assert!(got.starts_with(&format!("drive {drive_id} done")), "{got}");
    let bare = drive_id.trim_start_matches("machine-b/");
    let (ok, unsure) = call(&client, "get_drive", json!({"drive_id": bare})).await;
    assert!(!ok);
    assert!(unsure.contains("several hosts"), "{unsure}");
    let (ok, elsewhere) = call(
        &client,
        "get_drive",
        json!({"drive_id": format!("local/{bare}")}),
    )
    .await;
    assert!(!ok);
    assert!(elsewhere.starts_with("error unknown_drive"), "{elsewhere}");
    let (ok, reloaded) = call(
        &client,
        "recover",
        json!({"action": "reload_registry", "host": "machine-b"}),
    )
    .await;
    assert!(ok, "{reloaded}");
    let (ok, journals) = call(&client, "verify_journal", json!({})).await;
    assert!(ok, "{journals}");
    assert!(
        journals.contains("host local:") && journals.contains("host machine-b:"),
        "{journals}"
    );

    // Every call to machine-b went over one ssh connection.
    assert_eq!(
        logins(&machines.sshd) - logins_before,
        1,
        "{}",
        machines.sshd.log_text()
    );

    // machine-b's daemon stops: this machine still answers, machine-b is reported.
    machines
        .remote_daemon
        .terminate(Duration::from_secs(10))
        .expect("stops");
    drop(std::mem::replace(
        &mut machines.remote_plugin,
        koru_system_tests::Plugin {
            child: Command::new("true").spawn().unwrap(),
            log: Default::default(),
            session_id: String::new(),
        },
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    let down = loop {
        let (ok, listed) = call(&client, "list_sessions", json!({})).await;
        assert!(ok, "{listed}");
        if listed.contains("host machine-b: DOWN") {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "machine-b never reported down: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(down.contains(&format!("local/{local_session}")), "{down}");
    let (ok, to_b) = call(&client, "get_drive", json!({"drive_id": drive_id})).await;
    assert!(!ok);
    assert!(
        to_b.starts_with("error daemon_down: cannot reach host machine-b"),
        "{to_b}"
    );

    // machine-b comes back: the server reconnects (after its pause) and lists it again.
    let _restarted = machines.remote.start_daemon(&["--no-observe"]);
    let there = machines.remote.workspace("there");
    let plugin = machines.remote.start_fake_plugin(&[
        "--product",
        "vscodium",
        "--workspace",
        there.to_str().unwrap(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let (_, listed) = call(&client, "list_sessions", json!({})).await;
        if listed.contains(&format!("machine-b/{} vscodium", plugin.session_id)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "machine-b never came back: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    client.cancel().await.unwrap();
}

//! Harness for whole-system tests: builds and locates the real `koru` binary, starts daemons on private temp sockets, and speaks raw NDJSON to them.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The real terminal agents in tmux panes and their fake model server.
pub mod agents;
/// A real kitty under Xvfb with its remote control on, and agents in its windows.
pub mod kitty;
/// Reading MCP tool results in tests.
pub mod mcp;
/// Measuring helpers of the benchmarks.
pub mod measure;
/// A loopback OpenSSH server standing for a second machine.
pub mod sshd;

/// The `koru` binary of this workspace, built (once per test process) in the same profile
/// as the running test. `KORU_BIN` overrides it.
pub fn koru_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("KORU_BIN") {
            return PathBuf::from(path);
        }
        let exe = std::env::current_exe().expect("the test knows its own path");
        // target/<profile>/deps/<test> → target/<profile>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binaries live in target/<profile>/deps")
            .to_path_buf();
        let profile = profile_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("debug")
            .to_string();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "-p", "koru-daemon", "--bin", "koru"]);
        if profile == "release" {
            build.arg("--release");
        } else if profile != "debug" {
            build.args(["--profile", &profile]);
        }
        let status = build.status().expect("cargo can be run from tests");
        assert!(status.success(), "building the koru binary failed");
        let bin = profile_dir.join("koru");
        assert!(bin.exists(), "no koru binary at {}", bin.display());
        bin
    })
    .clone()
}

/// A private directory tree for one test: runtime dir (0700), home, config, state.
pub struct Sandbox {
    pub root: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let root = tempfile::Builder::new()
            .prefix("koru-test-")
            // KORU_KEEP_SANDBOX=1 keeps the folder (daemon logs) for a look after a failure.
            .disable_cleanup(std::env::var_os("KORU_KEEP_SANDBOX").is_some())
            .tempdir()
            .expect("a temp dir can be made");
        for sub in ["run", "home", "config", "state", "ws"] {
            std::fs::create_dir_all(root.path().join(sub)).expect("sandbox dirs");
        }
        set_mode(&root.path().join("run"), 0o700);
        Sandbox { root }
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// `$HOME` of every koru the sandbox starts.
    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// `$XDG_CONFIG_HOME` of every koru the sandbox starts: where the VS Code family keeps
    /// its user data (`<product>/User`), as it does on a machine that sets the variable.
    pub fn xdg_config_home(&self) -> PathBuf {
        self.path().join("config")
    }

    /// The socket path daemons of this sandbox use.
    pub fn socket(&self) -> PathBuf {
        self.path().join("run").join("koru").join("koru.sock")
    }

    /// A workspace folder inside the sandbox (created).
    pub fn workspace(&self, name: &str) -> PathBuf {
        let dir = self.path().join("ws").join(name);
        std::fs::create_dir_all(&dir).expect("workspace dir");
        dir.canonicalize().expect("workspace path")
    }

    /// A `koru` command with this sandbox's environment and socket.
    pub fn koru(&self) -> Command {
        self.command(koru_bin())
    }

    /// `program` with this sandbox's environment (HOME, XDG folders, socket). The system
    /// bus is a socket that does not exist, so no test asks the machine's logind (whether
    /// the developer's screen is locked, say); tests that want one set their own.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path().join("home"))
            .env("XDG_RUNTIME_DIR", self.path().join("run"))
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("XDG_STATE_HOME", self.path().join("state"))
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            // tmux servers (and the daemon's look for terminal agents) stay in the sandbox.
            .env("TMUX_TMPDIR", self.path().join("tmux"))
            .env("KORU_SOCKET", self.socket())
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                format!("unix:path={}", self.path().join("no-system-bus").display()),
            )
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null());
        command
    }

    /// Starts a client command in the background with its output piped (read it with
    /// `wait_with_output`).
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.koru()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("koru runs")
    }

    /// Runs a client command to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.koru().args(args).output().expect("koru runs")
    }

    /// Runs a client command to completion with `input` on its standard input.
    pub fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        use std::io::Write as _;
        let mut child = self
            .koru()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("koru runs");
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input)
            .expect("koru reads its input");
        child.wait_with_output().expect("koru runs")
    }

    /// Starts `koru daemon ARGS` and waits until its socket accepts connections.
    pub fn start_daemon(&self, args: &[&str]) -> Daemon {
        self.start_daemon_with_env(args, &[])
    }

    /// Waits until the daemon answering on the socket is `daemon` (`koru status` names its
    /// pid): one started while another still held the socket first answers as that one.
    pub fn wait_until_served_by(&self, daemon: &Daemon) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = self.run(&["status", "--json"]);
            let pid = serde_json::from_slice::<serde_json::Value>(&status.stdout)
                .ok()
                .and_then(|status| status["pid"].as_i64());
            if pid == Some(i64::from(daemon.pid())) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the socket was not served by pid {} within 10 s (last status: {pid:?}); log:\n{}",
                daemon.pid(),
                daemon.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `koru dev fake-plugin` and waits until the daemon lists its session.
    pub fn start_fake_plugin(&self, args: &[&str]) -> Plugin {
        self.start_fake_plugin_with_env(args, &[])
    }

    /// [`Sandbox::start_fake_plugin`] with more environment variables (`RUST_LOG` for one).
    pub fn start_fake_plugin_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Plugin {
        let log = self.path().join(format!("plugin-{}.log", unique()));
        let before = self.session_ids();
        let mut command = self.koru();
        command
            .args(["dev", "fake-plugin"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("the fake plugin starts");
        let mut plugin = Plugin {
            child,
            log,
            session_id: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(new) = self
                .session_ids()
                .into_iter()
                .find(|id| !before.contains(id))
            {
                plugin.session_id = new;
                return plugin;
            }
            if let Ok(Some(status)) = plugin.child.try_wait() {
                panic!(
                    "the fake plugin exited ({status}) before connecting: {}",
                    std::fs::read_to_string(&plugin.log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the fake plugin did not connect in 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running daemon's HTTP base URL (`http://127.0.0.1:PORT`, or `https://…`) and its
    /// default bearer token, from `koru status --json`.
    pub fn http_endpoint(&self) -> (String, String) {
        let status = stdout_json(&self.run(&["status", "--json"]));
        let base = status["http"]["mcp_url"]
            .as_str()
            .unwrap_or_else(|| panic!("the daemon serves no HTTP: {status}"))
            .trim_end_matches("/mcp")
            .to_string();
        let token = status["http"]["token"].as_str().unwrap_or_default();
        (base, token.to_string())
    }

    /// Every entry of the drive journal in its default folder (`$XDG_STATE_HOME/koru/journal`),
    /// segment by segment, in order; a line not (yet wholly) written is skipped.
    pub fn journal_entries(&self) -> Vec<Value> {
        chain_entries(&self.path().join("state").join("koru").join("journal"))
    }

    /// Claude Code's project folder of `workspace` under the sandbox's home (created): where
    /// Claude Code keeps the workspace's session logs.
    pub fn claude_project_dir(&self, workspace: &Path) -> PathBuf {
        let name = workspace.to_str().unwrap().replace('/', "-");
        let dir = self.path().join("home/.claude/projects").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The ids `koru sessions --json` lists.
    pub fn session_ids(&self) -> Vec<String> {
        let output = self.run(&["sessions", "--json"]);
        if !output.status.success() {
            return Vec::new();
        }
        let sessions: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        sessions
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|s| s["session_id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new()
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

/// Every file under `dir`, in any folder depth (none when it does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Every entry of the hash-chained log in `dir` (the journal, or a chat's audit ledger),
/// segment by segment, in order; a line not (yet wholly) written is skipped.
pub fn chain_entries(dir: &Path) -> Vec<Value> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    segments.retain(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seg-"))
    });
    segments.sort();
    segments
        .iter()
        .flat_map(|segment| {
            std::fs::read_to_string(segment)
                .unwrap_or_default()
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A command's standard output as JSON; panics with both outputs when it is not.
pub fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The check of interface `id` in a `koru doctor --json` report.
pub fn doctor_check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["interfaces"]
        .as_array()
        .expect("a doctor report lists its interfaces")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check for {id}"))
}

/// The stages `koru send --wait` printed, in order (its stdout lines are `DRIVE STAGE +MS`).
pub fn stages_printed(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.split_whitespace().nth(1).unwrap_or("").to_string())
        .collect()
}

/// The states a drive (`DriveInfo` as JSON) went through, in order.
pub fn drive_history(drive: &Value) -> Vec<String> {
    drive["history"]
        .as_array()
        .map(|history| {
            history
                .iter()
                .filter_map(|h| h["state"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Each route attempt of a drive (`DriveInfo` as JSON) as `interface outcome`.
pub fn attempt_outcomes(drive: &Value) -> Vec<String> {
    drive["attempts"]
        .as_array()
        .map(|attempts| {
            attempts
                .iter()
                .map(|a| {
                    format!(
                        "{} {}",
                        a["interface"].as_str().unwrap_or("?"),
                        a["outcome"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Sets a file's permission bits.
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A running daemon; killed (SIGKILL) when dropped unless stopped first.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
    pub socket: PathBuf,
}

impl Daemon {
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "daemon did not listen within 10 s; log:\n{}",
            self.log_text()
        );
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        signal(self.pid(), nix::sys::signal::Signal::SIGTERM);
        wait_exit(&mut self.child, within)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running fake plugin; killed when dropped.
pub struct Plugin {
    pub child: Child,
    pub log: PathBuf,
    pub session_id: String,
}

impl Plugin {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn signal(pid: i32, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
}

/// Waits for a child to exit, at most `within`.
pub fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A raw NDJSON connection with blocking reads bounded by a timeout.
pub struct Raw {
    pub stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Raw {
    pub fn connect(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket).expect("connect to the daemon");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let reader = BufReader::new(stream.try_clone().expect("clone stream"));
        Raw { stream, reader }
    }

    /// Another handle on the same connection, for writing from another thread while
    /// this one reads.
    pub fn writer(&self) -> UnixStream {
        self.stream.try_clone().expect("clone stream")
    }

    /// Writes bytes as they are (no newline added).
    pub fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Writes one JSON value as a line.
    pub fn send(&mut self, value: &Value) {
        let mut line = serde_json::to_vec(value).expect("json");
        line.push(b'\n');
        self.stream.write_all(&line).expect("write a line");
    }

    /// Reads the next line as JSON; `None` at EOF or on timeout.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the daemon sent a line that is not JSON ({e}): {line:?}")
            })),
        }
    }

    /// Reads lines until one has `type` == `wanted` (pings are answered); panics on EOF.
    pub fn recv_type(&mut self, wanted: &str) -> Value {
        loop {
            let line = self
                .recv()
                .unwrap_or_else(|| panic!("connection ended while waiting for {wanted}"));
            if line["type"] == wanted {
                return line;
            }
            if line["type"] == "ping" {
                self.send(&serde_json::json!({"v": 1, "type": "pong"}));
            }
        }
    }

    /// True when the daemon has closed the connection (EOF within the read timeout).
    /// Lines still unread are discarded; a reset counts as closed, a timeout does not.
    pub fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        loop {
            match self.reader.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(err) => {
                    return matches!(
                        err.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                    )
                }
            }
        }
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("read timeout");
    }
}

/// A controller hello line.
pub fn controller_hello() -> Value {
    serde_json::json!({
        "v": 1, "type": "hello", "role": "controller",
        "protocol": {"min": 1, "max": 1},
        "client": {"name": "system-test", "version": "0"}
    })
}

/// A plugin hello line for `product` with one workspace folder.
pub fn plugin_hello(product: &str, workspace: &Path) -> Value {
    serde_json::json!({
        "v": 1, "type": "hello", "role": "plugin",
        "protocol": {"min": 1, "max": 1},
        "client": {"name": "system-test-plugin", "version": "0"},
        "ide": {"product": product, "version": "1.0", "app_name": "Test IDE"},
        "window": {"pid": std::process::id(), "workspace_folders": [workspace.to_str().unwrap()]},
        "capabilities": [{"kind": "plugin_drive"}, {"kind": "command", "id": "workbench.action.chat.open"}]
    })
}

/// Connects and completes a handshake; returns the connection and the welcome.
pub fn greet(socket: &Path, hello: &Value) -> (Raw, Value) {
    let mut raw = Raw::connect(socket);
    raw.send(hello);
    let welcome = raw.recv().expect("a reply to hello");
    assert_eq!(welcome["type"], "welcome", "hello refused: {welcome}");
    (raw, welcome)
}

/// A private X server (Xvfb) for tests that need a real display; killed when dropped.
pub struct Xvfb {
    child: Child,
    /// `:N`
    pub display: String,
}

impl Xvfb {
    /// Starts Xvfb on a free display (it picks the number itself) and waits until it answers.
    pub fn start() -> Xvfb {
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1280x800x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb is installed (scripts/test-all.sh installs it)");
        let mut number = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut number)
            .expect("Xvfb prints its display number");
        let display = format!(":{}", number.trim());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let ready = Command::new("xdpyinfo")
                .env("DISPLAY", &display)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ready {
                return Xvfb { child, display };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("Xvfb on {display} did not answer within 10 s");
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private D-Bus session bus; killed when dropped.
pub struct SessionBus {
    child: Child,
    /// The value for DBUS_SESSION_BUS_ADDRESS.
    pub address: String,
}

impl SessionBus {
    /// A private bus listening in `dir`. Its configuration names no service folder but its
    /// own (`dir/dbus-services`, empty unless a test puts a service there), so nothing the
    /// machine has installed (a desktop's xdg-desktop-portal, a notification daemon) is
    /// activated on it: the same answers on a bare CI machine and on a GNOME desktop.
    pub fn start(dir: &Path) -> SessionBus {
        let socket = dir.join("bus.sock");
        let services = dir.join("dbus-services");
        std::fs::create_dir_all(&services).expect("a service folder");
        let config = dir.join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{}</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                socket.display(),
                services.display()
            ),
        )
        .expect("the bus configuration is written");
        let mut child = Command::new("dbus-daemon")
            .args(["--nofork", "--print-address=1"])
            .arg(format!("--config-file={}", config.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon is installed (scripts/test-all.sh installs it)");
        let mut address = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut address)
            .expect("dbus-daemon prints its address");
        SessionBus {
            child,
            address: address.trim().to_string(),
        }
    }
}

impl Drop for SessionBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory to use as PATH that holds links to exactly the named programs.
pub fn bin_dir_with(root: &Path, programs: &[&str]) -> PathBuf {
    let dir = root.join(format!("bin-{}", unique()));
    std::fs::create_dir_all(&dir).expect("bin dir");
    for program in programs {
        let real = ["/usr/bin", "/usr/local/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(program))
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                panic!("{program} is not installed (scripts/test-all.sh installs it)")
            });
        std::os::unix::fs::symlink(real, dir.join(program)).expect("symlink");
    }
    dir
}

/// An xterm on `display`, titled `title`, whose input is appended to `<dir>/<title>.txt`
/// (echo off, so the file holds exactly what was typed or pasted); waits until its window
/// is mapped. Ctrl+Shift+V pastes the CLIPBOARD selection, as in common terminals.
pub struct XTerm {
    pub child: Child,
    pub pid: u32,
    pub output: PathBuf,
}

impl XTerm {
    pub fn start(display: &str, dir: &Path, title: &str) -> XTerm {
        let output = dir.join(format!("{title}.txt"));
        let command = format!("stty -echo; exec cat >> '{}'", output.display());
        XTerm::start_running(display, dir, title, &command)
    }

    /// An xterm running `command` (`sh -c`) instead of recording its input; `output` is
    /// then whatever the command writes there, if anything.
    pub fn start_running(display: &str, dir: &Path, title: &str, command: &str) -> XTerm {
        // xterm as root sometimes exits at start-up with an X toolkit error it refuses to
        // print (seen when several X servers start at once); a fresh start succeeds.
        let mut last_error = String::new();
        for _ in 0..3 {
            match XTerm::try_start(display, dir, title, command) {
                Ok(xterm) => return xterm,
                Err(error) => last_error = error,
            }
        }
        panic!("xterm {title} did not start: {last_error}");
    }

    fn try_start(display: &str, dir: &Path, title: &str, command: &str) -> Result<XTerm, String> {
        let output = dir.join(format!("{title}.txt"));
        std::fs::write(&output, "").expect("xterm output file");
        let log = dir.join(format!("{title}.xterm.log"));
        let mut child = Command::new("xterm")
            .args(["-u8", "-title", title, "-xrm"])
            .arg("XTerm*VT100.translations: #override Ctrl Shift <Key>V: insert-selection(CLIPBOARD)")
            .args(["-e", "sh", "-c"])
            .arg(command)
            .env("DISPLAY", display)
            .env("LANG", "C.UTF-8")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("xterm log"))
            .spawn()
            .expect("xterm is installed (scripts/test-all.sh installs it)");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "exited before mapping its window ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                ));
            }
            let found = Command::new("xdotool")
                .args(["search", "--onlyvisible", "--pid", &pid.to_string()])
                .env("DISPLAY", display)
                .output()
                .map(|o| !o.stdout.is_empty())
                .unwrap_or(false);
            if found {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("did not map a window within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the shell inside start reading.
        std::thread::sleep(Duration::from_millis(300));
        Ok(XTerm { child, pid, output })
    }

    /// Waits until the output file holds `expected` (at most 10 s) and returns what it holds.
    pub fn wait_for(&self, expected: &str) -> String {
        wait_for_file(&self.output, expected)
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }
}

impl Drop for XTerm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sandbox {
    /// Starts `koru daemon ARGS` with extra environment variables (DISPLAY, PATH, …).
    pub fn start_daemon_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = self.path().join(format!("daemon-{}.log", unique()));
        let mut command = self.koru();
        command
            .arg("daemon")
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        for (key, value) in env {
            command.env(key, value);
        }
        let daemon = Daemon {
            child: command.spawn().expect("the daemon starts"),
            log,
            socket: self.socket(),
        };
        daemon.wait_ready();
        daemon
    }
}

impl Sandbox {
    /// Starts `koru daemon ARGS` in a user namespace of its own (`unshare --user
    /// --map-root-user`) whose inotify watch limit is `max_inotify_watches`: the kernel's
    /// real refusal, without touching the machine's limit. The daemon's user maps to the
    /// test's, so clients outside pass its peer check.
    pub fn start_daemon_with_watch_limit(&self, args: &[&str], max_inotify_watches: u32) -> Daemon {
        let log = self.path().join(format!("daemon-{}.log", unique()));
        let script = format!(
            "echo {max_inotify_watches} > /proc/sys/user/max_inotify_watches && exec \"$0\" daemon \"$@\""
        );
        let mut command = self.command("unshare");
        command
            .args(["--user", "--map-root-user", "sh", "-c", &script])
            .arg(koru_bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let daemon = Daemon {
            child: command
                .spawn()
                .expect("unshare (util-linux) starts the daemon in a user namespace"),
            log,
            socket: self.socket(),
        };
        daemon.wait_ready();
        daemon
    }
}

/// Waits until `path` holds exactly `expected` (at most 10 s) and returns what it holds.
pub fn wait_for_file(path: &Path, expected: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text == expected || Instant::now() >= deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `koru observe --json`, its lines arriving on a channel.
pub struct Observer {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Observer {
    pub fn start(sandbox: &Sandbox) -> Observer {
        Observer::start_with(sandbox, &[])
    }

    /// `koru observe --json ARGS`.
    pub fn start_with(sandbox: &Sandbox, args: &[&str]) -> Observer {
        let mut child = sandbox
            .koru()
            .args(["observe", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("koru observe starts");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            // `koru observe` says when it is subscribed; the rest is drained.
            let _ = ready_tx.send(lines.next());
            for _ in lines {}
        });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).expect("koru observe prints JSON");
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        // Subscribed before the test writes anything.
        let said = ready_rx.recv_timeout(Duration::from_secs(15));
        assert!(
            matches!(&said, Ok(Some(Ok(line))) if line.contains("subscribed")),
            "koru observe did not subscribe: {said:?}"
        );
        Observer { child, lines: rx }
    }

    pub fn next(&self, within: Duration) -> Value {
        self.lines
            .recv_timeout(within)
            .expect("an observation within the time limit")
    }

    /// The next observation, or None when nothing came within `within`.
    pub fn try_next(&self, within: Duration) -> Option<Value> {
        self.lines.recv_timeout(within).ok()
    }

    /// The next `count` observations as `kind` or `kind (inferred)`.
    pub fn kinds(&self, count: usize) -> Vec<String> {
        (0..count)
            .map(|_| observed_kind(&self.next(Duration::from_secs(5))))
            .collect()
    }

    pub fn nothing_within(&self, within: Duration) -> bool {
        self.lines.recv_timeout(within).is_err()
    }
}

/// An observed event as `kind`, or `kind (inferred)` when the store recorded no end.
pub fn observed_kind(event: &Value) -> String {
    let kind = event["kind"].as_str().unwrap_or("?");
    if event["basis"] == "inferred" {
        format!("{kind} (inferred)")
    } else {
        kind.to_string()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sandbox {
    /// `koru status --json` until `check` holds (at most 20 s; panics with the last status).
    pub fn status_until(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let output = self.run(&["status", "--json"]);
            let status: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
            if check(&status) {
                return status;
            }
            assert!(Instant::now() < deadline, "{what}: {status:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What `koru chats --json` lists.
    pub fn chats(&self) -> Vec<Value> {
        let output = self.run(&["chats", "--json"]);
        assert!(output.status.success(), "{output:?}");
        let value: Value = serde_json::from_slice(&output.stdout).unwrap();
        value
            .as_array()
            .cloned()
            .expect("koru chats --json prints an array")
    }
}

/// Appends `value` as one JSON line, the way the JSONL stores grow.
pub fn append_line(path: &Path, value: &Value) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the store file can be opened for appending");
    writeln!(file, "{value}").expect("a line can be appended");
}

/// A Roo Code task folder `task_dir` (created) with the `history_item.json` Roo writes
/// beside `ui_messages.json`, naming the task's first prompt and workspace.
pub fn roo_task_folder(task_dir: &Path, prompt: &str, workspace: &Path, status: &str) {
    std::fs::create_dir_all(task_dir).expect("the task folder can be made");
    let id = task_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a task folder name");
    std::fs::write(
        task_dir.join("history_item.json"),
        serde_json::json!({"id": id, "ts": 1767000000000u64, "task": prompt,
            "workspace": workspace, "mode": "code", "status": status})
        .to_string(),
    )
    .expect("history_item.json can be written");
}

/// Reads back, through the daemon's `chat.read`, every turn a corpus file's hand-written
/// `<file>.turns.json` lists (`{"turns_total", "turns": {"<index>": {fields}}}`), and
/// returns the differences: the chat's turn count, and for each listed turn its prompt,
/// reply, state, error, model, usage and steps (tool, kind, summary, paths, command,
/// exit_code, outcome, error) as far as the expectation lists them. Times are compared by
/// the daemon crate's own corpus tests, not here.
pub fn read_back_differences(
    socket: &Path,
    store: &str,
    chat_id: &str,
    expected: &serde_json::Value,
) -> Vec<String> {
    let (mut conn, _) = greet(socket, &controller_hello());
    conn.set_read_timeout(Duration::from_secs(10));
    let mut differences = Vec::new();
    let Some(turns) = expected["turns"].as_object() else {
        return vec![format!("{chat_id}: the expectation lists no turns")];
    };
    for (index, want) in turns {
        let index: u64 = index.parse().expect("turn indexes are numbers");
        conn.send(
            &serde_json::json!({"v": 1, "id": index, "type": "chat.read", "store": store,
            "chat_id": chat_id, "turn": index}),
        );
        let answer = conn.recv().expect("the daemon answers chat.read");
        if answer["type"] != "chat.read.result" {
            differences.push(format!("{chat_id} turn {index}: {answer}"));
            continue;
        }
        if let Some(total) = expected.get("turns_total") {
            if &answer["turns_total"] != total {
                differences.push(format!(
                    "{chat_id}: turns_total {} read back, {total} expected",
                    answer["turns_total"]
                ));
            }
        }
        let got = &answer["turns"][0];
        if got["reply_next_offset"].is_u64() {
            differences.push(format!("{chat_id} turn {index}: the reply came in pages"));
        }
        for field in ["prompt", "reply", "state", "error", "model", "usage"] {
            let Some(want_value) = want.get(field) else {
                continue;
            };
            let got_value = got.get(field).unwrap_or(&serde_json::Value::Null);
            if want_value != got_value {
                differences.push(format!(
                    "{chat_id} turn {index} {field}: {got_value} read back, {want_value} expected"
                ));
            }
        }
        let Some(want_steps) = want.get("steps").and_then(|s| s.as_array()) else {
            continue;
        };
        let got_steps = got["steps"].as_array().cloned().unwrap_or_default();
        if want_steps.len() != got_steps.len() {
            differences.push(format!(
                "{chat_id} turn {index}: {} steps read back, {} expected",
                got_steps.len(),
                want_steps.len()
            ));
            continue;
        }
        for (n, (want_step, got_step)) in want_steps.iter().zip(&got_steps).enumerate() {
            for field in [
                "tool",
                "kind",
                "summary",
                "paths",
                "command",
                "exit_code",
                "outcome",
                "error",
            ] {
                let Some(want_value) = want_step.get(field) else {
                    continue;
                };
                // Absent on the wire is what null or [] says in the expectation.
                let got_value = match got_step.get(field) {
                    Some(value) => value.clone(),
                    None if field == "paths" => serde_json::json!([]),
                    None => serde_json::Value::Null,
                };
                if want_value != &got_value {
                    differences.push(format!(
                        "{chat_id} turn {index} step {n} {field}: {got_value} read back, {want_value} expected"
                    ));
                }
            }
        }
    }
    differences
}

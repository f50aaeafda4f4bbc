//! The real terminal agents of tests/agents (Claude Code, Codex CLI, Gemini CLI, opencode, pinned npm packages) in real tmux panes, and the local fake model server they talk to, for the terminal-drive tests and benchmarks.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Sandbox;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Whether the pinned agents are installed; in CI their absence is a failure.
pub fn agents_installed() -> bool {
    let bin = repo_root().join("tests/agents/node_modules/.bin");
    let installed = ["claude", "codex", "gemini", "opencode"]
        .iter()
        .all(|name| bin.join(name).exists());
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "the real agents are not installed: run `npm ci --prefix tests/agents`"
        );
        eprintln!("skipped: the real agents are not installed (npm ci --prefix tests/agents)");
    }
    installed
}

/// At most this many real agents run at once across a test binary: each is a node or
/// native process of its own, and on a 2-CPU machine more starve each other's timings
/// (an agent that records a prompt seconds late fails a drive that would not have failed).
const AGENTS_AT_ONCE: usize = 3;

/// A place among the agents that may run at once; held for a test's length.
pub struct AgentSlot(());

impl AgentSlot {
    /// Waits for a place.
    pub fn take() -> AgentSlot {
        let (lock, freed) = slots();
        let mut running = lock.lock().unwrap_or_else(|e| e.into_inner());
        while *running >= AGENTS_AT_ONCE {
            running = freed.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += 1;
        AgentSlot(())
    }
}

impl Drop for AgentSlot {
    fn drop(&mut self) {
        let (lock, freed) = slots();
        let mut running = lock.lock().unwrap_or_else(|e| e.into_inner());
        *running -= 1;
        freed.notify_one();
    }
}

fn slots() -> &'static (std::sync::Mutex<usize>, std::sync::Condvar) {
    static SLOTS: std::sync::OnceLock<(std::sync::Mutex<usize>, std::sync::Condvar)> =
        std::sync::OnceLock::new();
    SLOTS.get_or_init(Default::default)
}

/// The fake model server of tests/corpus/recorder, on a free port.
pub struct FakeModel {
    child: Child,
    port: u16,
}

impl FakeModel {
    pub fn start(sandbox: &Sandbox) -> FakeModel {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = sandbox
            .command("python3")
            .arg(repo_root().join("tests/corpus/recorder/fake_model_server.py"))
            .args(["--port", &port.to_string()])
            .arg("--log")
            .arg(sandbox.path().join("fake-model.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let model = FakeModel { child, port };
        let deadline = Instant::now() + Duration::from_secs(15);
        while model.get("/koru/prompts").is_none() {
            assert!(
                Instant::now() < deadline,
                "the fake model server did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        model
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn get(&self, path: &str) -> Option<Value> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let body = text.split_once("\r\n\r\n")?.1;
        serde_json::from_str(body).ok()
    }

    /// The user prompts the model was sent (main requests only), in order.
    pub fn prompts(&self) -> Vec<String> {
        self.get("/koru/prompts")
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p["prompt"].as_str().map(str::to_string))
            .collect()
    }

    pub fn prompt_times(&self) -> Vec<(String, f64)> {
        self.get("/koru/prompts")
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| Some((p["prompt"].as_str()?.to_string(), p["time"].as_f64()?)))
            .collect()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tmux server in the sandbox where the daemon looks (`$TMUX_TMPDIR/tmux-UID/default`).
pub struct Tmux<'a> {
    sandbox: &'a Sandbox,
    pub socket: PathBuf,
}

impl<'a> Tmux<'a> {
    pub fn new(sandbox: &'a Sandbox) -> Tmux<'a> {
        let dir = sandbox
            .path()
            .join("tmux")
            .join(format!("tmux-{}", nix::unistd::getuid().as_raw()));
        std::fs::create_dir_all(&dir).unwrap();
        crate::set_mode(&dir, 0o700);
        Tmux {
            sandbox,
            socket: dir.join("default"),
        }
    }

    /// A tmux server at `socket` (anywhere: outside `$TMUX_TMPDIR`, the daemon's own look
    /// does not find it).
    pub fn at(sandbox: &'a Sandbox, socket: PathBuf) -> Tmux<'a> {
        Tmux { sandbox, socket }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.sandbox
            .command("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    pub fn screen(&self, pane: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-J", "-t", pane]).stdout)
            .into_owned()
    }

    /// Starts `agent` in `folder` with tests/agents/start-agent.sh (its HOME the sandbox's,
    /// so the daemon observes its store; with `hooks`, Koru's hooks installed first) and
    /// returns its pane.
    pub fn start_agent(
        &self,
        agent: &str,
        folder: &Path,
        model: &FakeModel,
        hooks: bool,
    ) -> String {
        self.start_agent_with(agent, folder, model, hooks, &[])
    }

    /// As `start_agent`, with more variables for start-agent.sh (`OPENCODE_PORT`, …).
    pub fn start_agent_with(
        &self,
        agent: &str,
        folder: &Path,
        model: &FakeModel,
        hooks: bool,
        env: &[(&str, &str)],
    ) -> String {
        let mut env: Vec<(&str, &str)> = env.to_vec();
        let socket = self.socket.to_str().expect("a UTF-8 socket path");
        env.extend([("TMUX_SOCKET", socket), ("READY_TIMEOUT", "90")]);
        run_start_agent(self.sandbox, agent, folder, model, hooks, &env)
    }
}

/// Runs tests/agents/start-agent.sh for `agent` in `folder` (its HOME the sandbox's, the
/// fake model server's address; with `hooks`, Koru's hooks installed first) with `env`
/// added; what it prints (the pane id, or with `LAUNCH_ONLY` the launch script).
pub fn run_start_agent(
    sandbox: &Sandbox,
    agent: &str,
    folder: &Path,
    model: &FakeModel,
    hooks: bool,
    env: &[(&str, &str)],
) -> String {
    let mut command = sandbox.command("bash");
    command
        .arg(repo_root().join("tests/agents/start-agent.sh"))
        .arg(agent)
        .arg(folder)
        .env("AGENT_ROOT", sandbox.path())
        .env("FAKE_MODEL_URL", model.url())
        .envs(env.iter().copied());
    if hooks {
        command.env("KORU_HOOK_BIN", crate::koru_bin());
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "start-agent.sh {agent}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

impl Drop for Tmux<'_> {
    /// Kills every pane's process group, then the server: an agent that outlives its
    /// terminal (opencode 1.18.33 ignores the hang-up and spins at ~70 % of a core with no
    /// terminal) must not slow the tests that run after it.
    fn drop(&mut self) {
        let panes = self.run(&["list-panes", "-a", "-F", "#{pane_pid}"]);
        for pid in String::from_utf8_lossy(&panes.stdout)
            .lines()
            .filter_map(|line| line.trim().parse::<i32>().ok())
            .filter(|pid| *pid > 1)
        {
            // The pane's first process leads its own process group (tmux starts each pane
            // in a new session): the group takes the agent and whatever it started.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            crate::signal(pid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.run(&["kill-server"]);
    }
}

/// `koru send --agent AGENT --workspace FOLDER --wait --json PROMPT`: exit status and the
/// drive.
pub fn send(
    sandbox: &Sandbox,
    agent: &str,
    folder: &Path,
    prompt: &str,
    wait: bool,
) -> (bool, Value) {
    let mut args = vec![
        "send",
        "--agent",
        agent,
        "--workspace",
        folder.to_str().unwrap(),
        "--json",
        "--timeout",
        "60",
    ];
    if wait {
        args.push("--wait");
    }
    args.push("-");
    let output = sandbox.run_with_stdin(&args, prompt.as_bytes());
    let drive = crate::stdout_json(&output);
    (output.status.success(), drive)
}

/// The drive `drive_id` as `koru drives --json --all` lists it (null when it is not listed).
pub fn drive_of(sandbox: &Sandbox, drive_id: &str) -> Value {
    crate::stdout_json(&sandbox.run(&["drives", "--json", "--all"]))
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["drive_id"] == drive_id)
        .cloned()
        .unwrap_or(Value::Null)
}

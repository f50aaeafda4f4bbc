//! Whole-system benchmark of the real `koru daemon` (release under `cargo bench`): the controller → daemon → plugin → ack → controller drive round trip with 1 and 100 plugins connected, the raw Unix-socket echo floor measured in the same run, and the daemon's RSS idle and with 1,000 plugins (`cargo bench -p koru-system-tests --bench roundtrip`).
//!
//! Prints Markdown tables and a pass/fail line per target. Run without `--bench` (as
//! `cargo test --benches` does) it makes a quick smoke run with small counts instead.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use koru_daemon::control::{self, Client};
use koru_protocol::{
    encode_line, Ack, AckStage, Capability, DriveCreate, DriveOptions, DriveState, Envelope,
    IdeInfo, IdeProduct, Message, StreamEvent, StreamItem, Target, WindowInfo,
};
use koru_system_tests::measure::{
    main_thread_on_cpu, megabytes, micros, mixed_prompt, status_field, threads_on_cpu, Stats,
};
use koru_system_tests::{koru_bin, Daemon, Sandbox};
use support::subscribed_controller;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

mod support;

/// How much work one run does.
#[derive(Debug, Clone, Copy)]
struct BenchConfig {
    /// Timed echoes, pings and drives of each per case (a multiple of `block`).
    drives: usize,
    /// Echoes, pings and drives of each run first and not timed (a multiple of `block`).
    warm_up: usize,
    /// Echoes, pings and drives are measured in turns of this many each.
    block: usize,
    /// Idle plugins connected besides the driven one in the "100 plugins" case.
    idle_plugins: usize,
    /// Plugins connected for the memory measurement.
    memory_plugins: usize,
    /// Idle plugin sessions connected at once for the footprint targets (issue 20).
    many_sessions: usize,
    /// Runs of `koru --version` (and `/bin/true`) and of `koru send --wait` timed.
    process_runs: usize,
    /// Whether this is a real measurement (`--bench`) rather than a smoke run.
    measuring: bool,
}

impl BenchConfig {
    fn from_args() -> BenchConfig {
        if std::env::args().any(|arg| arg == "--bench") {
            BenchConfig {
                drives: 20_000,
                warm_up: 500,
                block: 100,
                idle_plugins: 99,
                memory_plugins: 1_000,
                many_sessions: 10_000,
                process_runs: 200,
                measuring: true,
            }
        } else {
            BenchConfig {
                drives: 20,
                warm_up: 5,
                block: 5,
                idle_plugins: 9,
                memory_plugins: 20,
                many_sessions: 50,
                process_runs: 5,
                measuring: false,
            }
        }
    }
}

/// The targets of the foundation issue.
const ROUND_TRIP_MAX_FLOOR_RATIO_P50: f64 = 3.0;
const ROUND_TRIP_MAX_P99: Duration = Duration::from_millis(1);
const IDLE_RSS_MAX_BYTES: u64 = 10_000_000;
const THOUSAND_PLUGINS_RSS_MAX_BYTES: u64 = 60_000_000;

/// The targets of the hot-path and footprint issue (20).
const FOOTPRINT_ROUND_TRIP_MAX_FLOOR_RATIO_P50: f64 = 6.0;
const FOOTPRINT_DAEMON_CPU_PER_DRIVE_MAX: Duration = Duration::from_micros(40);
const MANY_SESSIONS_RSS_MAX_BYTES: u64 = 100_000_000;
const MANY_SESSIONS_CONNECT_MAX: Duration = Duration::from_secs(1);
const VERSION_WALL_MAX_P50: Duration = Duration::from_millis(1);
const SEND_WAIT_MAX_P50: Duration = Duration::from_millis(2);

/// The echo floor's line: about the size of an `ack` with a short blocker.
const ECHO_LINE_BYTES: usize = 200;

fn main() -> Result<()> {
    let config = BenchConfig::from_args();
    // Both this process (one socket per plugin) and the daemon (which inherits the limit
    // from this process) hold one descriptor per connection.
    let fd_limit =
        raise_open_files_limit(config.memory_plugins.max(config.many_sessions) as u64 + 256)?;
    // One thread for both clients of the bench, so that on a 2-core machine the other
    // core is left to the daemon (whose event loop is one thread too).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the bench runtime")?;
    let report = runtime.block_on(run(config))?;
    report.print(&config, fd_limit);
    Ok(())
}

async fn run(config: BenchConfig) -> Result<Report> {
    let binary = koru_bin();
    // A ~200-character prompt of mixed ASCII and Unicode, as in the codec benchmark.
    let prompt = mixed_prompt("", 200);

    // Memory first, on a daemon of its own, so that drive history from the latency runs
    // does not count as "idle".
    let sandbox = Sandbox::new();
    let mut daemon = start_daemon(&sandbox)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = ProcessSample::of(daemon.pid())?;
    let plugins = connect_raw_plugins(&daemon.socket, config.memory_plugins).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let loaded = ProcessSample::of(daemon.pid())?;
    drop(plugins);
    daemon.terminate(Duration::from_secs(5));

    // The floor and the daemon hop are measured in turns with the drives, on the same
    // daemon, so that all three see the same machine.
    let sandbox = Sandbox::new();
    let mut daemon = start_daemon(&sandbox)?;
    let mut echo = EchoFloor::start(sandbox.path()).await?;
    let one_plugin =
        drive_round_trips(&daemon.socket, daemon.pid(), 0, &prompt, &config, &mut echo).await?;
    let hundred_plugins = drive_round_trips(
        &daemon.socket,
        daemon.pid(),
        config.idle_plugins,
        &prompt,
        &config,
        &mut echo,
    )
    .await?;
    echo.stop()?;
    // Let the daemon notice the closed connections before looking at it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_drives = ProcessSample::of(daemon.pid())?;
    daemon.terminate(Duration::from_secs(5));

    let sessions = many_sessions(config.many_sessions).await?;
    let process_start = process_start(&binary, config.process_runs)?;

    Ok(Report {
        binary,
        one_plugin,
        hundred_plugins,
        idle,
        loaded,
        after_drives,
        sessions,
        process_start,
    })
}

/// Starts `koru daemon` in `sandbox` the way `Sandbox::start_daemon` does, but at the
/// daemon's default log level (info, as in `contrib/koru.service`) rather than the tests'
/// debug, so that logging costs what it costs for users.
fn start_daemon(sandbox: &Sandbox) -> Result<Daemon> {
    let log = sandbox.path().join("daemon.log");
    let child = sandbox
        .koru()
        .env("RUST_LOG", "info")
        .args(["daemon", "--heartbeat-ms", "60000"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).context("cannot create the daemon log")?)
        .spawn()
        .context("cannot start koru daemon")?;
    let daemon = Daemon {
        child,
        log,
        socket: sandbox.socket(),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&daemon.socket).is_err() {
        if Instant::now() > deadline {
            bail!(
                "the daemon did not listen within 10 s; log:\n{}",
                daemon.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(daemon)
}

/// Raises this process's soft RLIMIT_NOFILE to at least `wanted` (within the hard limit)
/// and returns the soft limit in force.
fn raise_open_files_limit(wanted: u64) -> Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit(NOFILE)")?;
    if soft >= wanted {
        return Ok(soft);
    }
    ensure!(
        hard >= wanted,
        "the hard open-files limit is {hard}, below the {wanted} this benchmark needs; raise it (ulimit -Hn)"
    );
    setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).context("setrlimit(NOFILE)")?;
    Ok(wanted)
}

/// What one case measured (timed samples only).
struct DriveRun {
    /// Raw echo round trips.
    floor: Stats,
    /// Controller `ping` → `pong` through the daemon.
    daemon_hop: Stats,
    /// `drive.create` written → `done` event read.
    drive: Stats,
    /// `drive.create` written → `drive.result` reply read.
    to_reply: Stats,
    /// `drive.create` written → the plugin read `drive`.
    to_plugin: Stats,
    /// On-CPU time of the daemon's event-loop thread per drive.
    daemon_cpu: Duration,
    /// On-CPU time of all the daemon's threads per drive (the journal's included).
    daemon_all_cpu: Duration,
    /// On-CPU time of the bench's client thread (controller and plugin) per drive.
    bench_cpu: Duration,
    /// What the controller read for the last drive.
    last_drive: Traffic,
}

/// The lines a controller read for one drive.
#[derive(Debug, Clone, Default)]
struct Traffic {
    /// `drive.result`, then `stream` lines by event kind and drive state.
    lines: Vec<String>,
    /// Their size re-encoded (the daemon writes the same bytes, give or take the `id`).
    bytes: usize,
}

impl Traffic {
    fn of(messages: &[Message]) -> Traffic {
        let lines = messages
            .iter()
            .map(|message| match message {
                Message::Stream(StreamItem {
                    event: StreamEvent::DriveUpdated { drive },
                    ..
                }) => format!("drive_updated({})", drive.state),
                other => other.type_name().to_string(),
            })
            .collect();
        let bytes = messages
            .iter()
            .map(|message| encode_line(&Envelope::new(message.clone())).len())
            .sum();
        Traffic { lines, bytes }
    }
}

/// Runs `warm_up + drives` raw echoes, controller pings and drives through one plugin,
/// with `idle_plugins` other plugins connected. A drive is timed from writing
/// `drive.create` to reading the `drive_updated` event that says it is `done`.
async fn drive_round_trips(
    socket: &Path,
    daemon_pid: i32,
    idle_plugins: usize,
    prompt: &str,
    config: &BenchConfig,
    echo: &mut EchoFloor,
) -> Result<DriveRun> {
    let idle = connect_raw_plugins(socket, idle_plugins).await?;
    let plugin = Client::connect(socket, bench_plugin_hello())
        .await
        .context("the driven plugin cannot connect")?;
    let session_id = plugin.welcome.session_id.clone();
    let (drive_seen, mut drive_seen_at) = tokio::sync::mpsc::unbounded_channel();
    let plugin_task = tokio::spawn(answer_drives(plugin, drive_seen));

    let mut controller = subscribed_controller(socket).await?;

    let bench_pid = std::process::id() as i32;
    let mut floor = Vec::with_capacity(config.drives);
    let mut daemon_hop = Vec::with_capacity(config.drives);
    let mut drive = Vec::with_capacity(config.drives);
    let mut to_reply = Vec::with_capacity(config.drives);
    let mut to_plugin = Vec::with_capacity(config.drives);
    let (mut daemon_cpu, mut bench_cpu) = (Duration::ZERO, Duration::ZERO);
    let mut daemon_all_cpu = Duration::ZERO;
    let mut lines = Vec::new();
    // Blocks of echoes, pings and drives take turns, so that all three see the same
    // machine while each is measured back to back within its block.
    for block_start in (0..config.warm_up + config.drives).step_by(config.block) {
        let timed = block_start >= config.warm_up;
        for _ in 0..config.block {
            let elapsed = echo.round_trip().await?;
            if timed {
                floor.push(elapsed);
            }
        }
        for _ in 0..config.block {
            let elapsed = ping(&mut controller).await?;
            if timed {
                daemon_hop.push(elapsed);
            }
        }
        let cpu_before = (
            main_thread_on_cpu(daemon_pid)?,
            main_thread_on_cpu(bench_pid)?,
            all_threads_on_cpu(daemon_pid)?,
        );
        for round in block_start..block_start + config.block {
            let create = Message::DriveCreate(DriveCreate {
                target: Target::Session(session_id.clone()),
                prompt: prompt.to_string(),
                options: DriveOptions::default(),
            });
            lines.clear();
            let started = Instant::now();
            let one = one_drive(&mut controller, create, &mut lines);
            let replied = tokio::time::timeout(Duration::from_secs(5), one)
                .await
                .with_context(|| format!("drive {round} did not finish within 5 s"))??;
            let finished = Instant::now();
            // The plugin saw the drive before it acked, so its timestamp is already queued.
            let plugin_saw = drive_seen_at
                .try_recv()
                .context("the plugin did not report the drive it acked")?;
            if timed {
                drive.push(finished - started);
                to_reply.push(replied - started);
                to_plugin.push(plugin_saw - started);
            }
        }
        if timed {
            daemon_cpu += main_thread_on_cpu(daemon_pid)?.saturating_sub(cpu_before.0);
            bench_cpu += main_thread_on_cpu(bench_pid)?.saturating_sub(cpu_before.1);
            daemon_all_cpu += all_threads_on_cpu(daemon_pid)?.saturating_sub(cpu_before.2);
        }
    }

    plugin_task.abort();
    controller.close().await;
    drop(idle);
    let timed = config.drives.max(1) as u32;
    Ok(DriveRun {
        floor: Stats::of(floor),
        daemon_hop: Stats::of(daemon_hop),
        drive: Stats::of(drive),
        to_reply: Stats::of(to_reply),
        to_plugin: Stats::of(to_plugin),
        daemon_cpu: daemon_cpu / timed,
        daemon_all_cpu: daemon_all_cpu / timed,
        bench_cpu: bench_cpu / timed,
        last_drive: Traffic::of(&lines),
    })
}

/// Sends one `drive.create` and waits for that drive's terminal `drive_updated` event;
/// every message read on the way is appended to `lines`. Returns when the reply arrived.
async fn one_drive(
    controller: &mut Client,
    create: Message,
    lines: &mut Vec<Message>,
) -> Result<Instant> {
    let reply = controller.request(create).await?;
    let replied = Instant::now();
    let drive_id = match &reply {
        Message::DriveResult(result) => result.drive.drive_id.clone(),
        other => bail!("drive.create answered with {}", other.type_name()),
    };
    lines.push(reply);
    loop {
        let Some(envelope) = controller.next().await? else {
            bail!("the daemon closed the controller connection");
        };
        let finished = match &envelope.message {
            Message::Stream(StreamItem {
                event: StreamEvent::DriveUpdated { drive },
                ..
            }) if drive.drive_id == drive_id && drive.state.is_terminal() => {
                ensure!(
                    drive.state == DriveState::Done,
                    "drive {drive_id} ended {} ({:?})",
                    drive.state,
                    drive.blocker
                );
                true
            }
            _ => false,
        };
        lines.push(envelope.message);
        if finished {
            return Ok(replied);
        }
    }
}

/// One hop through the daemon and back without a plugin: a controller's `ping` is read
/// by its connection task, answered by the state machine, and written by its writer task.
async fn ping(controller: &mut Client) -> Result<Duration> {
    let started = Instant::now();
    let reply = controller.request(Message::Ping {}).await?;
    let elapsed = started.elapsed();
    ensure!(
        matches!(reply, Message::Pong {}),
        "ping answered with {}",
        reply.type_name()
    );
    Ok(elapsed)
}

/// The driven plugin: acks every drive `received`, then `submitted`, as a plugin that
/// submits instantly would, and reports when each drive arrived on `drive_seen`.
async fn answer_drives(
    mut plugin: Client,
    drive_seen: tokio::sync::mpsc::UnboundedSender<Instant>,
) -> Result<()> {
    while let Some(Envelope { message, .. }) = plugin.next().await? {
        if let Message::Drive(drive) = message {
            let _ = drive_seen.send(Instant::now());
            for stage in [AckStage::Received, AckStage::Submitted] {
                let ack = Ack {
                    drive_id: drive.drive_id.clone(),
                    stage,
                    blocker: None,
                    evidence: None,
                    refusal: None,
                };
                plugin.send(None, Message::Ack(ack)).await?;
            }
        }
    }
    Ok(())
}

/// The driven plugin's hello: what a VS Code plugin announces (the same set as
/// `koru dev fake-plugin --product vscode`), so that the daemon's planner picks the
/// registry's native-send route for it.
fn bench_plugin_hello() -> koru_protocol::Hello {
    let commands = [
        "workbench.action.chat.open",
        "workbench.action.chat.focusInput",
        "workbench.action.chat.submit",
    ];
    let mut capabilities = vec![
        Capability::NativeSend,
        Capability::PluginDrive,
        Capability::Clipboard,
        Capability::ChatEvents,
    ];
    capabilities.extend(commands.map(|id| Capability::Command { id: id.to_string() }));
    control::plugin_hello(
        "koru-bench-plugin",
        IdeInfo {
            product: IdeProduct::VsCode,
            version: "1.100.0".to_string(),
            app_name: "Visual Studio Code".to_string(),
            uri_scheme: Some("vscode".to_string()),
            app_host: Some("desktop".to_string()),
        },
        WindowInfo {
            pid: Some(std::process::id()),
            workspace_folders: vec!["/bench/driven".to_string()],
            ..WindowInfo::default()
        },
        capabilities,
    )
}

/// The hello line of the n-th idle plugin, as raw bytes.
fn raw_plugin_hello(n: usize) -> Vec<u8> {
    let hello = serde_json::json!({
        "v": 1, "type": "hello", "role": "plugin",
        "protocol": {"min": 1, "max": 1},
        "client": {"name": "koru-bench-idle", "version": "0"},
        "ide": {"product": "vscode", "version": "1.100.0", "app_name": "Visual Studio Code"},
        "window": {"pid": std::process::id(), "workspace_folders": [format!("/bench/idle-{n}")]},
        "capabilities": []
    });
    let mut line = hello.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Connects `count` plugins over raw sockets, each greeted (hello sent, welcome read),
/// and keeps them open and silent.
async fn connect_raw_plugins(socket: &Path, count: usize) -> Result<Vec<UnixStream>> {
    let mut plugins = Vec::with_capacity(count);
    for n in 0..count {
        let greeted = async {
            let mut stream = UnixStream::connect(socket).await?;
            stream.write_all(&raw_plugin_hello(n)).await?;
            let mut reader = BufReader::new(&mut stream);
            let mut reply = String::new();
            reader.read_line(&mut reply).await?;
            anyhow::Ok((stream, reply))
        };
        let (stream, reply) = tokio::time::timeout(Duration::from_secs(10), greeted)
            .await
            .with_context(|| format!("plugin {n} got no welcome within 10 s"))?
            .with_context(|| format!("plugin {n} could not connect"))?;
        ensure!(
            reply.contains(r#""type":"welcome""#),
            "plugin {n} was not welcomed: {reply}"
        );
        plugins.push(stream);
    }
    Ok(plugins)
}

/// The floor: one ~200-byte line to an echo server on its own thread and back, over a
/// plain tokio `UnixStream` with no protocol work on either side.
struct EchoFloor {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
    line: Vec<u8>,
    echoed: Vec<u8>,
    server: std::thread::JoinHandle<Result<()>>,
}

impl EchoFloor {
    async fn start(dir: &Path) -> Result<EchoFloor> {
        let path = dir.join("echo.sock");
        let listener =
            std::os::unix::net::UnixListener::bind(&path).context("cannot bind the echo socket")?;
        let server = std::thread::spawn(move || serve_echo(listener));
        let stream = UnixStream::connect(&path).await?;
        let (read_half, writer) = stream.into_split();
        let prefix =
            r#"{"v":1,"type":"ack","drive_id":"d_3f9a1c2e4b5d","stage":"received","pad":""#;
        let suffix = "\"}\n";
        let padding = "x".repeat(ECHO_LINE_BYTES - prefix.len() - suffix.len());
        let line = format!("{prefix}{padding}{suffix}").into_bytes();
        Ok(EchoFloor {
            reader: BufReader::new(read_half),
            writer,
            echoed: Vec::with_capacity(line.len()),
            line,
            server,
        })
    }

    async fn round_trip(&mut self) -> Result<Duration> {
        self.echoed.clear();
        let started = Instant::now();
        self.writer.write_all(&self.line).await?;
        self.reader.read_until(b'\n', &mut self.echoed).await?;
        let elapsed = started.elapsed();
        ensure!(
            self.echoed == self.line,
            "the echo server sent back other bytes"
        );
        Ok(elapsed)
    }

    /// Closes the connection, which ends the server.
    fn stop(self) -> Result<()> {
        drop(self.reader);
        drop(self.writer);
        match self.server.join() {
            Ok(outcome) => outcome,
            Err(_) => bail!("the echo server thread panicked"),
        }
    }
}

/// Serves one connection: every line read is written back.
fn serve_echo(listener: std::os::unix::net::UnixListener) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(listener)?;
        let (mut stream, _) = listener.accept().await?;
        let (read_half, mut write_half) = stream.split();
        let mut reader = BufReader::new(read_half);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).await? == 0 {
                return Ok(());
            }
            write_half.write_all(&line).await?;
        }
    })
}

/// What `/proc` says about the daemon at one moment.
#[derive(Debug, Clone, Copy)]
struct ProcessSample {
    rss_bytes: u64,
    threads: u64,
    open_fds: usize,
    max_open_files: u64,
}

impl ProcessSample {
    fn of(pid: i32) -> Result<ProcessSample> {
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
            .with_context(|| format!("cannot read /proc/{pid}/limits"))?;
        let max_open_files = limits
            .lines()
            .find_map(|line| line.strip_prefix("Max open files"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|soft| soft.parse().ok())
            .unwrap_or(0);
        let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .with_context(|| format!("cannot list /proc/{pid}/fd"))?
            .count();
        Ok(ProcessSample {
            rss_bytes: status_field(pid, "VmRSS:")?,
            threads: status_field(pid, "Threads:")?,
            open_fds,
            max_open_files,
        })
    }
}

/// Everything one run measured.
struct Report {
    binary: PathBuf,
    one_plugin: DriveRun,
    hundred_plugins: DriveRun,
    idle: ProcessSample,
    loaded: ProcessSample,
    after_drives: ProcessSample,
    sessions: ManySessions,
    process_start: ProcessStart,
}

impl Report {
    fn print(&self, config: &BenchConfig, bench_fd_limit: u64) {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        if !config.measuring {
            println!("_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n");
        }
        println!(
            "Daemon: `{}` · {cores} cores · open-files soft limit {bench_fd_limit} (bench), {} (daemon)\n",
            self.binary.display(),
            self.loaded.max_open_files
        );
        let cases = [
            ("1 plugin".to_string(), &self.one_plugin),
            (
                format!("{} plugins", config.idle_plugins + 1),
                &self.hundred_plugins,
            ),
        ];

        println!(
            "### Round trip ({} of each, after {} warm-up, per case; in turns of {} echoes, {} pings, {} drives)\n",
            config.drives, config.warm_up, config.block, config.block, config.block
        );
        println!("| plugins connected | measurement | p50 | p99 | mean | p50 ÷ floor p50 |");
        println!("|---|---|---:|---:|---:|---:|");
        for (case, run) in &cases {
            let rows = [
                (
                    format!("floor: raw tokio `UnixStream` echo, one {ECHO_LINE_BYTES}-byte line"),
                    &run.floor,
                ),
                (
                    "daemon hop: controller `ping` → `pong`".to_string(),
                    &run.daemon_hop,
                ),
                (
                    "drive: `drive.create` → controller has the `drive.result` reply".to_string(),
                    &run.to_reply,
                ),
                (
                    "drive: `drive.create` → plugin has `drive`".to_string(),
                    &run.to_plugin,
                ),
                (
                    "**drive round trip**: `drive.create` → controller has `done`".to_string(),
                    &run.drive,
                ),
            ];
            for (label, stats) in rows {
                println!(
                    "| {case} | {label} | {} | {} | {} | {:.1}× |",
                    micros(stats.p50),
                    micros(stats.p99),
                    micros(stats.mean),
                    run.floor_ratio(stats)
                );
            }
        }

        println!("\n| plugins connected | daemon event loop on-CPU per drive | whole daemon (every thread) per drive | bench clients (controller + plugin) on-CPU per drive |");
        println!("|---|---:|---:|---:|");
        for (case, run) in &cases {
            println!(
                "| {case} | {} | {} | {} |",
                micros(run.daemon_cpu),
                micros(run.daemon_all_cpu),
                micros(run.bench_cpu)
            );
        }
        let traffic = &self.one_plugin.last_drive;
        println!(
            "\nPer drive the controller wrote 1 line and read {} (≈{} bytes): {}; the plugin read 1 `drive` line and wrote 2 `ack`s.",
            traffic.lines.len(),
            traffic.bytes,
            traffic.lines.join(", ")
        );

        println!("\n### Daemon memory\n");
        println!("| daemon state | VmRSS | threads | open fds |");
        println!("|---|---:|---:|---:|");
        let samples = [
            ("idle, no connections".to_string(), &self.idle),
            (
                format!(
                    "{} plugins connected (greeted, silent)",
                    config.memory_plugins
                ),
                &self.loaded,
            ),
            (
                format!(
                    "after the round-trip runs ({} drives; the daemon keeps the last 1,000), nobody connected",
                    2 * (config.warm_up + config.drives)
                ),
                &self.after_drives,
            ),
        ];
        for (label, sample) in samples {
            println!(
                "| {label} | {} | {} | {} |",
                megabytes(sample.rss_bytes),
                sample.threads,
                sample.open_fds
            );
        }

        println!("\n### Targets\n");
        println!("| target | measured | verdict |");
        println!("|---|---:|---|");
        let verdict = |met: bool| if met { "met" } else { "**MISSED**" };
        for (case, run) in &cases {
            let ratio = run.floor_ratio(&run.drive);
            println!(
                "| round trip p50 ≤ {ROUND_TRIP_MAX_FLOOR_RATIO_P50}× floor p50 ({case}) | {ratio:.1}× | {} |",
                verdict(ratio <= ROUND_TRIP_MAX_FLOOR_RATIO_P50)
            );
            println!(
                "| round trip p99 < 1 ms ({case}) | {} | {} |",
                micros(run.drive.p99),
                verdict(run.drive.p99 < ROUND_TRIP_MAX_P99)
            );
        }
        println!(
            "| idle RSS < 10 MB | {} | {} |",
            megabytes(self.idle.rss_bytes),
            verdict(self.idle.rss_bytes < IDLE_RSS_MAX_BYTES)
        );
        println!(
            "| RSS with {} plugins < 60 MB | {} | {} |",
            config.memory_plugins,
            megabytes(self.loaded.rss_bytes),
            verdict(self.loaded.rss_bytes < THOUSAND_PLUGINS_RSS_MAX_BYTES)
        );

        let sessions = &self.sessions;
        let per_session = sessions.rss_bytes.saturating_sub(sessions.idle_rss_bytes)
            / sessions.count.max(1) as u64;
        let start = &self.process_start;
        println!("\n### Hot path and footprint (issue 20)\n");
        println!(
            "Idle RSS {} of which anonymous {} (the rest: pages of the executable and libraries); {} sessions connected in {:.3} s, RSS {} ({} bytes a session); `/bin/true` p50 {}; binary {} bytes{}.\n",
            megabytes(self.idle.rss_bytes),
            megabytes(sessions.idle_anon_bytes),
            sessions.count,
            sessions.connect.as_secs_f64(),
            megabytes(sessions.rss_bytes),
            per_session,
            micros(start.true_wall.p50),
            start.binary_bytes,
            if start.has_dwarf { ", with DWARF" } else { ", no DWARF (symbols kept)" }
        );
        println!("| target | measured | verdict |");
        println!("|---|---:|---|");
        let run = &self.one_plugin;
        let ratio = run.floor_ratio(&run.drive);
        println!(
            "| daemon on-CPU per drive ≤ 40 µs (every thread, journal and info log as shipped, {} drives) | {} | {} |",
            config.drives,
            micros(run.daemon_all_cpu),
            verdict(run.daemon_all_cpu <= FOOTPRINT_DAEMON_CPU_PER_DRIVE_MAX)
        );
        println!(
            "| round trip p50 ≤ 6× floor p50 | {ratio:.1}× | {} |",
            verdict(ratio <= FOOTPRINT_ROUND_TRIP_MAX_FLOOR_RATIO_P50)
        );
        println!(
            "| round trip p99 < 1 ms | {} | {} |",
            micros(run.drive.p99),
            verdict(run.drive.p99 < ROUND_TRIP_MAX_P99)
        );
        println!(
            "| idle RSS < 10 MB (observers and journal on) | {} | {} |",
            megabytes(sessions.idle_rss_bytes),
            verdict(sessions.idle_rss_bytes < IDLE_RSS_MAX_BYTES)
        );
        println!(
            "| {} idle sessions < 100 MB RSS | {} | {} |",
            sessions.count,
            megabytes(sessions.rss_bytes),
            verdict(sessions.rss_bytes < MANY_SESSIONS_RSS_MAX_BYTES)
        );
        println!(
            "| {} idle sessions connected < 1 s | {:.3} s | {} |",
            sessions.count,
            sessions.connect.as_secs_f64(),
            verdict(sessions.connect < MANY_SESSIONS_CONNECT_MAX)
        );
        println!(
            "| `koru --version` wall p50 < 1 ms | {} | {} |",
            micros(start.version_wall.p50),
            verdict(start.version_wall.p50 < VERSION_WALL_MAX_P50)
        );
        println!(
            "| `koru send --wait` p50 < 2 ms (fake plugin) | {} | {} |",
            micros(start.send_wait.p50),
            verdict(start.send_wait.p50 < SEND_WAIT_MAX_P50)
        );
        println!(
            "| shipped binary without DWARF | {} bytes | {} |",
            start.binary_bytes,
            verdict(!start.has_dwarf)
        );
    }
}

impl DriveRun {
    /// How many times this run's echo floor (p50) a measurement's p50 is.
    fn floor_ratio(&self, stats: &Stats) -> f64 {
        stats.p50.as_secs_f64() / self.floor.p50.as_secs_f64()
    }
}

/// On-CPU time of every thread `pid` has now.
fn all_threads_on_cpu(pid: i32) -> Result<Duration> {
    Ok(threads_on_cpu(pid)?.values().sum())
}

/// Many idle plugin sessions on a fresh daemon (shipped settings).
struct ManySessions {
    count: usize,
    idle_rss_bytes: u64,
    /// The idle daemon's anonymous memory (`RssAnon`): what is its own, not file pages.
    idle_anon_bytes: u64,
    /// From the first `connect` to the last `welcome` read.
    connect: Duration,
    rss_bytes: u64,
}

/// Connects `count` plugins to a fresh daemon as a flood of windows would: 256 connect and
/// send their hello, then their welcomes are read, and so on.
async fn many_sessions(count: usize) -> Result<ManySessions> {
    let sandbox = Sandbox::new();
    let mut daemon = start_daemon(&sandbox)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss_bytes = status_field(daemon.pid(), "VmRSS:")?;
    let idle_anon_bytes = status_field(daemon.pid(), "RssAnon:")?;
    let started = Instant::now();
    let mut plugins = Vec::with_capacity(count);
    for batch_start in (0..count).step_by(256) {
        let mut batch = Vec::with_capacity(256);
        for n in batch_start..(batch_start + 256).min(count) {
            let mut stream = UnixStream::connect(&daemon.socket)
                .await
                .with_context(|| format!("plugin {n} could not connect"))?;
            stream.write_all(&raw_plugin_hello(n)).await?;
            batch.push(stream);
        }
        for (i, stream) in batch.into_iter().enumerate() {
            let mut reader = BufReader::new(stream);
            let mut reply = String::new();
            tokio::time::timeout(Duration::from_secs(10), reader.read_line(&mut reply))
                .await
                .with_context(|| {
                    format!("plugin {} got no welcome within 10 s", batch_start + i)
                })??;
            ensure!(
                reply.contains(r#""type":"welcome""#),
                "plugin {} was not welcomed: {reply}",
                batch_start + i
            );
            plugins.push(reader.into_inner());
        }
    }
    let connect = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_bytes = status_field(daemon.pid(), "VmRSS:")?;
    drop(plugins);
    daemon.terminate(Duration::from_secs(5));
    Ok(ManySessions {
        count,
        idle_rss_bytes,
        idle_anon_bytes,
        connect,
        rss_bytes,
    })
}

/// Process start and the CLI's round trip, as a user's shell or script pays them.
struct ProcessStart {
    version_wall: Stats,
    /// `/bin/true` started the same way: the floor of starting any process here.
    true_wall: Stats,
    send_wait: Stats,
    binary_bytes: u64,
    /// Whether the binary carries DWARF debug info (a `.debug_info` section).
    has_dwarf: bool,
}

/// Times `runs` starts of `program args` to its exit (stdout and stderr discarded).
fn time_runs(program: &Path, args: &[&str], env: &[(&str, &Path)], runs: usize) -> Result<Stats> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut command = std::process::Command::new(program);
        command
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let started = Instant::now();
        let status = command
            .status()
            .with_context(|| format!("cannot run {}", program.display()))?;
        samples.push(started.elapsed());
        ensure!(
            status.success(),
            "{} {args:?} failed: {status}",
            program.display()
        );
    }
    Ok(Stats::of(samples))
}

fn process_start(binary: &Path, runs: usize) -> Result<ProcessStart> {
    let version_wall = time_runs(binary, &["--version"], &[], runs)?;
    let true_wall = time_runs(Path::new("/bin/true"), &[], &[], runs)?;
    // `koru send --wait` against a fake plugin that acks at once.
    let sandbox = Sandbox::new();
    let mut daemon = start_daemon(&sandbox)?;
    let workspace = sandbox.workspace("send");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().context("a UTF-8 workspace path")?,
    ]);
    let socket = daemon.socket.clone();
    let send = |runs| {
        time_runs(
            binary,
            &[
                "send",
                "--workspace",
                workspace.to_str().unwrap_or_default(),
                "--wait",
                "bench",
            ],
            &[("KORU_SOCKET", socket.as_path())],
            runs,
        )
    };
    send(runs.min(10))?;
    let send_wait = send(runs.clamp(1, 50))?;
    daemon.terminate(Duration::from_secs(5));
    let bytes =
        std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
    let has_dwarf = bytes.windows(12).any(|w| w == b".debug_info\0");
    Ok(ProcessStart {
        version_wall,
        true_wall,
        send_wait,
        binary_bytes: bytes.len() as u64,
        has_dwarf,
    })
}

//! Socket round-trip and memory benchmark of the real daemon: controller → daemon → plugin → ack → controller with 1 and 100 plugins, a raw tokio UnixStream echo floor measured in the same run, and the daemon's RSS idle and with 1,000 plugins (`cargo bench -p koru-daemon --bench roundtrip`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

const DRIVES: usize = 2_000;

struct Line {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    buffer: String,
}

impl Line {
    async fn connect(socket: &Path) -> Line {
        let stream = UnixStream::connect(socket).await.expect("connect");
        let (read, writer) = stream.into_split();
        Line {
            reader: BufReader::new(read),
            writer,
            buffer: String::new(),
        }
    }

    async fn send(&mut self, value: &Value) {
        let mut bytes = serde_json::to_vec(value).unwrap();
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await.expect("write");
    }

    async fn recv(&mut self) -> Value {
        serde_json::from_str(self.recv_raw().await).expect("json")
    }

    /// The next line as text (so the measuring side need not parse lines it skips).
    async fn recv_raw(&mut self) -> &str {
        self.buffer.clear();
        let n = self.reader.read_line(&mut self.buffer).await.expect("read");
        assert!(n > 0, "the daemon closed the connection");
        &self.buffer
    }
}

fn plugin_hello(product: &str) -> Value {
    json!({"v": 1, "type": "hello", "role": "plugin", "protocol": {"min": 1, "max": 1},
           "client": {"name": "bench", "version": "0"},
           "ide": {"product": product, "version": "1", "app_name": "Bench"},
           "window": {"pid": 1, "workspace_folders": ["/bench"]},
           "capabilities": [{"kind": "command", "id": "workbench.action.chat.open"},
                            {"kind": "command", "id": "composer.startComposerPrompt"}]})
}

async fn greet(socket: &Path, hello: &Value) -> (Line, String) {
    let mut line = Line::connect(socket).await;
    line.send(hello).await;
    let welcome = line.recv().await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let session = welcome["session_id"].as_str().unwrap().to_string();
    (line, session)
}

fn start_daemon(dir: &Path) -> (Child, PathBuf) {
    let socket = dir.join("run").join("koru").join("koru.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_koru"))
        .args(["daemon", "--heartbeat-ms", "600000", "--socket"])
        .arg(&socket)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .expect("the daemon starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    (child, socket)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct Stats {
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    let total: Duration = samples.iter().sum();
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        mean: total / samples.len() as u32,
    }
}

/// Drives one plugin through `DRIVES` drives and returns each round trip.
async fn round_trips(socket: &Path, idle_plugins: usize) -> Vec<Duration> {
    let mut idle = Vec::new();
    for _ in 0..idle_plugins {
        idle.push(greet(socket, &plugin_hello("cursor")).await.0);
    }
    let (mut plugin, session) = greet(socket, &plugin_hello("vscode")).await;
    let answering = tokio::spawn(async move {
        loop {
            let line = plugin.recv().await;
            if line["type"] == "drive" {
                let drive_id = line["drive_id"].clone();
                for stage in ["received", "submitted"] {
                    plugin
                        .send(&json!({"v": 1, "type": "ack", "drive_id": drive_id, "stage": stage}))
                        .await;
                }
            }
        }
    });
    let (mut controller, _) = greet(
        socket,
        &json!({"v": 1, "type": "hello", "role": "controller", "protocol": {"min": 1, "max": 1},
                "client": {"name": "bench", "version": "0"}}),
    )
    .await;
    controller
        .send(&json!({"v": 1, "id": 0, "type": "events.subscribe"}))
        .await;
    assert_eq!(controller.recv().await["type"], "events.subscribed");
    let mut samples = Vec::with_capacity(DRIVES);
    for n in 0..(DRIVES + 100) {
        let started = Instant::now();
        controller
            .send(&json!({"v": 1, "id": n + 1, "type": "drive.create",
                          "target": {"session": session}, "prompt": "benchmark prompt ✓"}))
            .await;
        let drive_id = loop {
            let line = controller.recv_raw().await;
            if line.contains("\"drive.result\"") {
                let value: Value = serde_json::from_str(line).unwrap();
                break value["drive"]["drive_id"].as_str().unwrap().to_string();
            }
        };
        // Skip the intermediate stream lines by substring; parse only the final one.
        let done_marker = "\"state\":\"done\"";
        loop {
            let line = controller.recv_raw().await;
            if line.contains(&drive_id)
                && line.contains("\"drive_updated\"")
                && line.rfind(done_marker) > line.find("\"history\"")
            {
                let value: Value = serde_json::from_str(line).unwrap();
                if value["event"]["drive"]["state"] == "done" {
                    break;
                }
            }
        }
        // The first 100 warm up.
        if n >= 100 {
            samples.push(started.elapsed());
        }
    }
    answering.abort();
    drop(idle);
    samples
}

/// A controller's ping answered by the daemon: one trip through reader, state machine and writer.
async fn ping_trips(socket: &Path) -> Vec<Duration> {
    let (mut controller, _) = greet(
        socket,
        &json!({"v": 1, "type": "hello", "role": "controller", "protocol": {"min": 1, "max": 1},
                "client": {"name": "bench", "version": "0"}}),
    )
    .await;
    let mut samples = Vec::with_capacity(DRIVES);
    for n in 0..(DRIVES + 100) {
        let started = Instant::now();
        controller
            .send(&json!({"v": 1, "id": n, "type": "ping"}))
            .await;
        controller.recv_raw().await;
        if n >= 100 {
            samples.push(started.elapsed());
        }
    }
    samples
}

/// The floor: a raw tokio UnixStream echo of one ~200-byte line.
async fn echo_floor(dir: &Path) -> Vec<Duration> {
    let path = dir.join("echo.sock");
    let listener = UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            write.write_all(line.as_bytes()).await.unwrap();
        }
    });
    let mut client = Line::connect(&path).await;
    let payload = json!({"v": 1, "type": "ack", "drive_id": "d_0123456789ab", "stage": "received",
                         "pad": "x".repeat(120)});
    let mut samples = Vec::with_capacity(DRIVES);
    for n in 0..(DRIVES + 100) {
        let started = Instant::now();
        client.send(&payload).await;
        client.recv().await;
        if n >= 100 {
            samples.push(started.elapsed());
        }
    }
    samples
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // 1,000 plugins need ~1,000 descriptors here and in the daemon (which inherits this limit).
    if let Ok((soft, hard)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    {
        let wanted = 4096.min(hard);
        if soft < wanted {
            let _ = nix::sys::resource::setrlimit(
                nix::sys::resource::Resource::RLIMIT_NOFILE,
                wanted,
                hard,
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, socket) = start_daemon(dir.path());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss = rss_kib(daemon.id());

    let floor = stats(echo_floor(dir.path()).await);
    let ping = stats(ping_trips(&socket).await);
    let one = stats(round_trips(&socket, 0).await);
    let hundred = stats(round_trips(&socket, 99).await);

    let mut thousand = Vec::new();
    for _ in 0..1000 {
        thousand.push(greet(&socket, &plugin_hello("vscode")).await.0);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let thousand_rss = rss_kib(daemon.id());
    drop(thousand);
    let _ = daemon.kill();
    let _ = daemon.wait();

    println!("| measurement | p50 | p99 | mean |");
    println!("|---|---|---|---|");
    println!(
        "| floor: raw tokio UnixStream echo, one 200-byte line | {} | {} | {} |",
        us(floor.p50),
        us(floor.p99),
        us(floor.mean)
    );
    println!(
        "| ping → pong through the daemon | {} | {} | {} |",
        us(ping.p50),
        us(ping.p99),
        us(ping.mean)
    );
    println!(
        "| drive round trip, 1 plugin connected | {} | {} | {} |",
        us(one.p50),
        us(one.p99),
        us(one.mean)
    );
    println!(
        "| drive round trip, 100 plugins connected | {} | {} | {} |",
        us(hundred.p50),
        us(hundred.p99),
        us(hundred.mean)
    );
    println!();
    let ratio = |s: &Stats| s.p50.as_secs_f64() / floor.p50.as_secs_f64();
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!("| target | measured | verdict |");
    println!("|---|---|---|");
    for (name, s) in [("1 plugin", &one), ("100 plugins", &hundred)] {
        println!(
            "| round trip p50 ≤ 3× floor ({name}) | {:.1}× | {} |",
            ratio(s),
            verdict(ratio(s) <= 3.0)
        );
        println!(
            "| round trip p99 < 1 ms ({name}) | {} | {} |",
            us(s.p99),
            verdict(s.p99 < Duration::from_millis(1))
        );
    }
    println!(
        "| daemon idle RSS < 10 MB | {:.1} MB | {} |",
        idle_rss as f64 / 1024.0,
        verdict(idle_rss < 10 * 1024)
    );
    println!(
        "| RSS with 1,000 plugins < 60 MB | {:.1} MB | {} |",
        thousand_rss as f64 / 1024.0,
        verdict(thousand_rss < 60 * 1024)
    );
}

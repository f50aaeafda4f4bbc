//! Benchmark of the chat-store observers (`cargo bench -p koru-system-tests --bench observe`): store write → `observed` event latency through the real daemon, the time from a store folder's creation after start-up to its first event, the cost of reading one appended record from a 1 MB and a 100 MB session log, and the daemon's idle CPU and RSS while it watches 1,000 session files or waits for 20 missing roots.
//!
//! Prints Markdown tables. Without `--bench` (as `cargo test --benches` runs it) it makes a
//! quick smoke run with small counts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use koru_daemon::control::{controller_hello, Client};
use koru_daemon::observe::stores::claude_code::ClaudeCodeParser;
use koru_daemon::observe::tail::JsonlTail;
use koru_daemon::observe::LineParser;
use koru_protocol::{Message, StreamEvent};
use koru_system_tests::Sandbox;

fn record(session: &str, cwd: &str, text: &str) -> String {
    serde_json::json!({"parentUuid": null, "isSidechain": false, "cwd": cwd, "sessionId": session,
        "type": "user", "message": {"role": "user", "content": text},
        "uuid": uuid::Uuid::new_v4().to_string(), "timestamp": "2026-11-23T10:00:00.000Z"})
    .to_string()
}

fn append(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Store write → `observed prompt_seen` on a subscribed controller connection.
async fn write_to_event(samples: usize) -> Result<Vec<Duration>> {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("bench");
    let cwd = workspace.to_str().unwrap().to_string();
    let project = sandbox
        .path()
        .join("home/.claude/projects")
        .join(cwd.replace('/', "-"));
    std::fs::create_dir_all(&project)?;
    let _daemon = sandbox.start_daemon(&[]);
    let mut client = Client::connect(&sandbox.socket(), controller_hello("bench")).await?;
    client.request(Message::EventsSubscribe {}).await?;
    let file = project.join("bench-session.jsonl");
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + 5 {
        let text = format!("prompt number {i}");
        let line = record("bench-session", &cwd, &text);
        let start = Instant::now();
        append(&file, &line);
        loop {
            let Some(envelope) =
                tokio::time::timeout(Duration::from_secs(10), client.next()).await??
            else {
                bail!("daemon closed")
            };
            if let Message::Stream(item) = envelope.message {
                if let StreamEvent::Observed { observation } = item.event {
                    if let koru_protocol::ObservedKind::PromptSeen { excerpt, .. } =
                        observation.event
                    {
                        if excerpt == text {
                            break;
                        }
                    }
                }
            }
        }
        if i >= 5 {
            times.push(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(times)
}

/// Waits on a subscribed controller for the `prompt_seen` whose excerpt is `text`.
async fn prompt_seen(client: &mut Client, text: &str) -> Result<()> {
    loop {
        let Some(envelope) = tokio::time::timeout(Duration::from_secs(10), client.next()).await??
        else {
            bail!("daemon closed")
        };
        if let Message::Stream(item) = envelope.message {
            if let StreamEvent::Observed { observation } = item.event {
                if let koru_protocol::ObservedKind::PromptSeen { excerpt, .. } = observation.event {
                    if excerpt == text {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// A daemon that started before `~/.claude` existed: from creating the project folder
/// (`mkdir -p`, as Claude Code's first run does) and writing the first record to the
/// `prompt_seen` event, each run on a fresh daemon.
async fn late_root_to_event(runs: usize) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(runs);
    for run in 0..runs {
        let sandbox = Sandbox::new();
        let cwd = sandbox.workspace("late").to_str().unwrap().to_string();
        let _daemon = sandbox.start_daemon(&[]);
        // The observers have looked at the machine (a file written while the daemon is
        // still starting is history, not news).
        let projects = sandbox.path().join("home/.claude/projects");
        let deadline = Instant::now() + Duration::from_secs(10);
        let observing = || {
            serde_json::from_slice::<serde_json::Value>(&sandbox.run(&["status", "--json"]).stdout)
                .ok()
                .and_then(|s| s["observers"].as_array().cloned())
                .is_some_and(|all| {
                    all.iter()
                        .any(|o| o["root"] == projects.to_str().unwrap() && o["mode"] == "waiting")
                })
        };
        while !observing() {
            if Instant::now() > deadline {
                bail!("the daemon never reported its observers");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut client = Client::connect(&sandbox.socket(), controller_hello("bench")).await?;
        client.request(Message::EventsSubscribe {}).await?;
        let project = sandbox
            .path()
            .join("home/.claude/projects")
            .join(cwd.replace('/', "-"));
        let text = format!("first prompt of run {run}");
        let line = record("late-session", &cwd, &text);
        let start = Instant::now();
        std::fs::create_dir_all(&project)?;
        append(&project.join("late-session.jsonl"), &line);
        prompt_seen(&mut client, &text).await?;
        times.push(start.elapsed());
    }
    Ok(times)
}

/// A session log of about `bytes` bytes, read to its end.
fn big_log(dir: &Path, bytes: usize) -> (PathBuf, JsonlTail, ClaudeCodeParser) {
    let path = dir.join(format!("log-{bytes}.jsonl"));
    let line = record("s", "/w", &"x".repeat(400));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut written = 0;
    while written < bytes {
        writeln!(file, "{line}").unwrap();
        written += line.len() + 1;
    }
    drop(file);
    let mut tail = JsonlTail::new(&path);
    let mut parser = ClaudeCodeParser::new("s");
    for line in tail.read_new().unwrap().lines {
        let _ = parser.feed_line(&line);
    }
    (path, tail, parser)
}

/// The time to read and parse one appended record, after `runs` appends.
fn update_cost(dir: &Path, bytes: usize, runs: usize) -> Vec<Duration> {
    let (path, mut tail, mut parser) = big_log(dir, bytes);
    let line = record("s", "/w", "one more prompt");
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        append(&path, &line);
        let start = Instant::now();
        let read = tail.read_new().unwrap();
        for line in &read.lines {
            let _ = parser.feed_line(line);
        }
        times.push(start.elapsed());
        assert_eq!(read.lines.len(), 1);
    }
    times
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The chat-store interfaces of the built-in registry.
const STORES: [&str; 9] = [
    "chat_history_claude_code_jsonl",
    "chat_history_copilot_json",
    "chat_history_cursor_sqlite",
    "chat_history_cursor_legacy_sqlite",
    "chat_history_cline_tasks",
    "chat_history_cline_sessions",
    "chat_history_codex_jsonl",
    "chat_history_gemini_cli",
    "chat_history_antigravity_pb_readonly",
];

/// Idle CPU (percent of one core) and RSS of a daemon whose observers wait for 20 missing
/// roots (the built-in registry's 18 in an empty HOME, plus 2 more Claude Code
/// locations), against the same daemon whose observers have no root at all (every
/// store's `locations` emptied by a registry layer): (cpu, rss, cpu without, rss
/// without, roots waiting).
fn idle_waiting(idle: Duration) -> Result<(f64, u64, f64, u64, usize)> {
    let measure = |layer_yaml: String| -> Result<(f64, u64, usize)> {
        let sandbox = Sandbox::new();
        let layer = sandbox.path().join("config/bench-layer.yaml");
        std::fs::write(&layer, layer_yaml)?;
        let daemon = sandbox.start_daemon(&["--registry", layer.to_str().unwrap()]);
        std::thread::sleep(Duration::from_secs(3));
        let status: serde_json::Value =
            serde_json::from_slice(&sandbox.run(&["status", "--json"]).stdout)?;
        let waiting = status["observers"]
            .as_array()
            .map(|all| all.iter().filter(|o| o["mode"] == "waiting").count())
            .unwrap_or(0);
        let pid = daemon.pid();
        let before = cpu_ticks(pid);
        std::thread::sleep(idle);
        let ticks = cpu_ticks(pid) - before;
        let cpu = ticks as f64 / 100.0 / idle.as_secs_f64() * 100.0;
        Ok((cpu, rss_kib(pid), waiting))
    };
    let extra = "interfaces:\n  - id: chat_history_claude_code_jsonl\n    locations: [~/.claude/projects, ~/work/.claude/projects, /nonexistent/koru-bench/projects]\n".to_string();
    let none = std::iter::once("interfaces:\n".to_string())
        .chain(
            STORES
                .iter()
                .map(|id| format!("  - id: {id}\n    locations: []\n")),
        )
        .collect::<String>();
    let (cpu, rss, waiting) = measure(extra)?;
    let (cpu_none, rss_none, left) = measure(none)?;
    if left != 0 {
        bail!("the baseline daemon still observes {left} root(s)");
    }
    Ok((cpu, rss, cpu_none, rss_none, waiting))
}

/// Idle CPU (percent of one core) and RSS while watching `files` session files.
fn idle_watching(files: usize, idle: Duration) -> (f64, u64, u64) {
    let sandbox = Sandbox::new();
    let root = sandbox.path().join("home/.claude/projects");
    for i in 0..files {
        let project = root.join(format!("-w-project-{}", i % 50));
        std::fs::create_dir_all(&project).unwrap();
        let path = project.join(format!("session-{i}.jsonl"));
        append(&path, &record(&format!("session-{i}"), "/w", "hello"));
    }
    let baseline = {
        let empty = Sandbox::new();
        let daemon = empty.start_daemon(&[]);
        std::thread::sleep(Duration::from_secs(2));
        rss_kib(daemon.pid())
    };
    let daemon = sandbox.start_daemon(&[]);
    std::thread::sleep(Duration::from_secs(3));
    let pid = daemon.pid();
    let before = cpu_ticks(pid);
    std::thread::sleep(idle);
    let ticks = cpu_ticks(pid) - before;
    let hz = 100.0;
    let cpu = ticks as f64 / hz / idle.as_secs_f64() * 100.0;
    (cpu, rss_kib(pid), baseline)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let (latency_samples, update_runs, big, files, idle, late_runs) = if measuring {
        (
            200,
            200,
            100 * 1024 * 1024,
            1000,
            Duration::from_secs(20),
            20,
        )
    } else {
        (5, 5, 2 * 1024 * 1024, 20, Duration::from_secs(1), 2)
    };

    let mut latency = write_to_event(latency_samples).await?;
    latency.sort();
    println!("| store write → observed event | samples | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    println!(
        "| Claude Code session log, one appended record | {} | {} | {} | {} |",
        latency.len(),
        ms(percentile(&latency, 0.5)),
        ms(percentile(&latency, 0.99)),
        ms(*latency.last().unwrap())
    );

    let mut late = late_root_to_event(late_runs).await?;
    late.sort();
    println!();
    println!(
        "| store folder created after start-up → first event | runs | p50 ms | p99 ms | max ms |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| `~/.claude/projects/<project>` created, first record written | {} | {} | {} | {} |",
        late.len(),
        ms(percentile(&late, 0.5)),
        ms(percentile(&late, 0.99)),
        ms(*late.last().unwrap())
    );

    let dir = tempfile::tempdir()?;
    println!();
    println!("| read + parse one appended record | runs | p50 µs | p99 µs |");
    println!("|---|---|---|---|");
    for bytes in [1024 * 1024, big] {
        let mut times = update_cost(dir.path(), bytes, update_runs);
        times.sort();
        println!(
            "| log of {} MB | {} | {} | {} |",
            bytes / (1024 * 1024),
            times.len(),
            us(percentile(&times, 0.5)),
            us(percentile(&times, 0.99))
        );
    }

    let (cpu, rss, baseline) = idle_watching(files, idle);
    println!();
    println!(
        "| idle, watching | CPU (% of a core, over {} s) | RSS KiB | RSS KiB with no store |",
        idle.as_secs()
    );
    println!("|---|---|---|---|");
    println!("| {files} session files | {cpu:.2} | {rss} | {baseline} |");

    let (cpu, rss, cpu_off, rss_off, waiting) = idle_waiting(idle)?;
    let cpu_met = if cpu - cpu_off <= 1.0 {
        "met"
    } else {
        "missed"
    };
    let rss_met = if rss.saturating_sub(rss_off) <= 1024 {
        "met"
    } else {
        "missed"
    };
    println!();
    println!(
        "| idle, waiting for missing roots | CPU (% of a core, over {} s) | RSS KiB | no root: CPU / RSS KiB | target +1 % CPU / +1 MB |",
        idle.as_secs()
    );
    println!("|---|---|---|---|---|");
    println!(
        "| {waiting} roots waiting | {cpu:.2} | {rss} | {cpu_off:.2} / {rss_off} | {cpu_met} (+{:.2} %) / {rss_met} (+{} KiB) |",
        cpu - cpu_off,
        rss as i64 - rss_off as i64
    );
    Ok(())
}

//! What listing terminal agents costs at a heavy user's scale: a real tmux server with 20 panes, 5 of them running agents (stand-ins named as the agents' executables), a real daemon: `koru sessions --json` with the look vs. without (`--socket`-only `koru status`), and the daemon's CPU while idle beside those panes: `cargo bench -p koru-daemon --bench terminal_agents`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 30;
const PANES: usize = 20;
const AGENTS: [&str; 5] = ["claude", "codex", "gemini", "opencode", "claude"];
const IDLE_SECONDS: u64 = 20;

fn koru(env: &[(&str, &Path)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_koru"));
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn timed(runs: usize, mut run: impl FnMut()) -> (Duration, Duration, Duration) {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        run();
        times.push(started.elapsed());
    }
    times.sort();
    (
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times[runs - 1],
    )
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the daemon runs");
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tmux_dir = dir.path().join("tmux");
    let bin = dir.path().join("bin");
    let run = dir.path().join("run");
    for d in [&tmux_dir, &bin, &run] {
        std::fs::create_dir_all(d).unwrap();
    }
    for name in AGENTS {
        std::fs::copy("/bin/sleep", bin.join(name)).unwrap();
    }
    let tmux = |args: &[&str]| {
        let status = Command::new("tmux")
            .env("TMUX_TMPDIR", &tmux_dir)
            .args(args)
            .status()
            .expect("tmux runs");
        assert!(status.success(), "tmux {args:?}");
    };
    for pane in 0..PANES {
        let program = AGENTS
            .get(pane)
            .map(|a| bin.join(a).display().to_string())
            .unwrap_or_else(|| "sleep".into());
        let script = format!("{program} 600 & wait");
        if pane == 0 {
            tmux(&[
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "bench",
                "sh",
                "-c",
                &script,
            ]);
        } else {
            tmux(&["new-window", "-t", "bench", "sh", "-c", &script]);
        }
    }
    let socket = run.join("koru").join("koru.sock");
    let env = [
        ("TMUX_TMPDIR", tmux_dir.as_path()),
        ("XDG_RUNTIME_DIR", run.as_path()),
    ];
    let mut daemon = koru(&env)
        .args(["daemon", "--no-journal", "--no-observe", "--socket"])
        .arg(&socket)
        .stderr(Stdio::null())
        .spawn()
        .expect("daemon starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let list = |args: &[&str]| {
        let output = koru(&env)
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .output()
            .expect("koru runs");
        assert!(output.status.success());
        output.stdout
    };
    let listed: serde_json::Value = serde_json::from_slice(&list(&["sessions", "--json"])).unwrap();
    let found = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "terminal_agent")
        .count();
    assert_eq!(found, AGENTS.len(), "{listed:#}");

    // Idle beside the panes: nothing is polled, so the daemon should not notice them.
    let pid = daemon.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(IDLE_SECONDS));
    let ticks = cpu_ticks(pid) - before;
    let hz = 100.0; // USER_HZ on Linux
    let idle_percent = ticks as f64 / hz / IDLE_SECONDS as f64 * 100.0;

    let with_look = timed(RUNS, || {
        list(&["sessions", "--json"]);
    });
    let without = timed(RUNS, || {
        list(&["status", "--json"]);
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    tmux(&["kill-server"]);

    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
    println!(
        "| case ({PANES} tmux panes, {} agents) | runs | p50 | p99 | max |",
        AGENTS.len()
    );
    println!("|---|---|---|---|---|");
    println!(
        "| `koru sessions --json` (the daemon looks: list-panes + /proc) | {RUNS} | {} | {} | {} |",
        ms(with_look.0),
        ms(with_look.1),
        ms(with_look.2)
    );
    println!(
        "| `koru status --json` (the same round trip, no look) | {RUNS} | {} | {} | {} |",
        ms(without.0),
        ms(without.1),
        ms(without.2)
    );
    println!(
        "daemon CPU idle beside the panes over {IDLE_SECONDS} s: {ticks} ticks = {idle_percent:.2} % of a core (target <= 0.5 %: {})",
        if idle_percent <= 0.5 { "met" } else { "MISSED" }
    );
}

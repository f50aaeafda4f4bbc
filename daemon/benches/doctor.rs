//! Doctor wall time over the full default registry, with the daemon up and one plugin connected, and with no daemon: `cargo bench -p koru-daemon --bench doctor`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 30;

fn koru() -> Command {
    Command::new(env!("CARGO_BIN_EXE_koru"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn measure(socket: &std::path::Path, label: &str) -> (Duration, Duration, Duration) {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let status = koru()
            .args(["doctor", "--json", "--socket"])
            .arg(socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("koru doctor runs");
        times.push(started.elapsed());
        assert!(status.code().is_some(), "{label}: doctor was killed");
    }
    times.sort();
    (
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        times[times.len() - 1],
    )
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let socket = run.join("koru").join("koru.sock");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();

    let no_daemon = measure(&socket, "no daemon");

    let mut daemon = koru()
        .args(["daemon", "--socket"])
        .arg(&socket)
        .stderr(Stdio::null())
        .spawn()
        .expect("daemon starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut plugin = koru()
        .args(["dev", "fake-plugin", "--product", "vscode", "--socket"])
        .arg(&socket)
        .arg("--workspace")
        .arg(&workspace)
        .stderr(Stdio::null())
        .spawn()
        .expect("fake plugin starts");
    std::thread::sleep(Duration::from_millis(500));
    let with_daemon = measure(&socket, "daemon up");
    let _ = plugin.kill();
    let _ = plugin.wait();
    let _ = daemon.kill();
    let _ = daemon.wait();

    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
    println!("| case | runs | p50 | p90 | max | target |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| doctor --json, daemon up, 1 plugin, 28 interfaces | {RUNS} | {} | {} | {} | < 500 ms: {} |",
        ms(with_daemon.0),
        ms(with_daemon.1),
        ms(with_daemon.2),
        if with_daemon.2 < Duration::from_millis(500) { "met" } else { "MISSED" }
    );
    println!(
        "| doctor --json, no daemon | {RUNS} | {} | {} | {} | — |",
        ms(no_daemon.0),
        ms(no_daemon.1),
        ms(no_daemon.2)
    );
}

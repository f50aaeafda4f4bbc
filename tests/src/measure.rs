//! Measuring helpers shared by the benchmarks: nearest-rank percentiles of timings, a process's on-CPU time and memory from `/proc`, and the units the figures are printed in.

use std::time::Duration;

use anyhow::{Context, Result};

/// p50 / p99 / mean / max of a set of timings (nearest rank).
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub p50: Duration,
    pub p99: Duration,
    pub mean: Duration,
    pub max: Duration,
    pub count: usize,
}

impl Stats {
    pub fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort_unstable();
        let count = samples.len().max(1);
        if samples.is_empty() {
            samples.push(Duration::ZERO);
        }
        // Nearest rank: the smallest sample with at least p of all samples at or below it.
        let rank = |p: f64| samples[((p * count as f64).ceil() as usize).clamp(1, count) - 1];
        let total: Duration = samples.iter().sum();
        Stats {
            p50: rank(0.50),
            p99: rank(0.99),
            mean: total / count as u32,
            max: samples[count - 1],
            count: samples.len(),
        }
    }
}

/// How long one thread has run on a CPU, from its `schedstat` (nanoseconds, unlike the
/// clock ticks of `stat`). `/proc/<pid>/schedstat` is the process's main thread. (In a
/// virtual machine this also counts time the host took the vCPU away.)
fn schedstat_on_cpu(path: &str) -> Result<Duration> {
    let schedstat = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let nanos = schedstat
        .split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .with_context(|| format!("unexpected {path}: {schedstat:?}"))?;
    Ok(Duration::from_nanos(nanos))
}

/// On-CPU time of the calling thread so far.
pub fn this_thread_on_cpu() -> Result<Duration> {
    schedstat_on_cpu("/proc/thread-self/schedstat")
}

/// On-CPU time of the main thread of `pid` (the daemon's event loop, a bench's clients).
pub fn main_thread_on_cpu(pid: i32) -> Result<Duration> {
    schedstat_on_cpu(&format!("/proc/{pid}/schedstat"))
}

/// On-CPU time of each thread `pid` has now, by thread name (`comm`; threads of the same
/// name are added up, threads that already exited are not counted). The main thread is
/// [`MAIN_THREAD`] whatever its name (it takes the binary's).
pub fn threads_on_cpu(pid: i32) -> Result<std::collections::BTreeMap<String, Duration>> {
    let mut threads = std::collections::BTreeMap::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("cannot list /proc/{pid}/task"))?;
    for task in tasks {
        let task = task?.path();
        // A thread can end between the listing and the reads.
        let (Ok(name), Ok(time)) = (
            std::fs::read_to_string(task.join("comm")),
            schedstat_on_cpu(&format!("{}/schedstat", task.display())),
        ) else {
            continue;
        };
        let name = if task.file_name().and_then(|n| n.to_str()) == Some(&pid.to_string()) {
            MAIN_THREAD.to_string()
        } else {
            name.trim().to_string()
        };
        *threads.entry(name).or_default() += time;
    }
    Ok(threads)
}

/// The name [`threads_on_cpu`] gives a process's main thread.
pub const MAIN_THREAD: &str = "main";

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`, …) in bytes, or a count
/// (`Threads:`) as is.
pub fn status_field(pid: i32, name: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
    let mut words = line.split_whitespace();
    let value: u64 = words
        .next()
        .and_then(|value| value.parse().ok())
        .with_context(|| format!("unexpected {name} in /proc/{pid}/status: {line:?}"))?;
    Ok(match words.next() {
        Some("kB") => value * 1024,
        _ => value,
    })
}

/// A prompt of `chars` characters of mixed ASCII, accents, CJK, an emoji, quotes and a
/// newline (≈235 bytes of UTF-8 for 200 characters), starting with `prefix` (a number
/// makes each prompt its own).
pub fn mixed_prompt(prefix: &str, chars: usize) -> String {
    let text = "Refactor `parse_header()` so errors carry line:column — keep the tests green, \
                «ne casse rien», 日本語のコメントも直して ✓ 🚀\n\"then\" run cargo test. ";
    prefix
        .chars()
        .chain(text.chars().cycle())
        .take(chars)
        .collect()
}

pub fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

/// Decimal megabytes, the unit the targets are written in.
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// A finished run of a command: what it printed, how long it took, its peak RSS.
pub struct MeasuredRun {
    pub output: std::process::Output,
    pub wall: Duration,
    /// `VmHWM`, polled every 2 ms until it exits.
    pub peak_rss: u64,
}

/// Runs `command` with its stdout and stderr piped, measuring it.
pub fn run_measured(mut command: std::process::Command) -> Result<MeasuredRun> {
    use std::process::Stdio;
    let started = std::time::Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the command")?;
    let pid = child.id() as i32;
    let mut peak_rss = 0;
    while child.try_wait()?.is_none() {
        if let Ok(hwm) = status_field(pid, "VmHWM:") {
            peak_rss = peak_rss.max(hwm);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let wall = started.elapsed();
    Ok(MeasuredRun {
        output: child.wait_with_output()?,
        wall,
        peak_rss,
    })
}

//! Benchmark of the chat-store observers at a heavy user's scale (`cargo bench -p koru-system-tests --bench observe_scale`): a release daemon whose `$HOME/.claude/projects` holds 3,000 (~1 GB) or 10,000 (~3 GB) generated Claude Code sessions; first start, idle, restart and appended-prompt figures, each printed with its target and `met`/`missed`. Also the corpus generator on its own: `-- --generate DIR --sessions N [--gb G]`.
//!
//! Options (after `--`): `--sizes 3000,10000`, `--idle-secs 60`, `--settle-secs 10`,
//! `--samples 200`, `--keep DIR` (corpora in `DIR/sessions-N`, kept and reused when their
//! manifest matches; without it they go to a temp folder removed at the end), `--seed S`.
//! Without `--bench` (as `cargo test --benches` runs it) it makes a quick smoke run: 200
//! small sessions, a short idle, a few appends; targets are printed, never asserted.
//!
//! Method, per size:
//! 1. First start (no cache: a fresh sandbox, so a fresh state folder): from spawning
//!    `koru daemon` (HOME = the corpus's folder, `RUST_LOG=info`) until a `status` request
//!    is answered; then until `chats.list` lists every session. Until `status` counts every
//!    file under the Claude Code root, only `status` is polled (every 20 ms; it is small)
//!    and `chats.list` (filtered to the store) only every 2 s; then `chats.list` every
//!    20 ms. Daemon CPU is utime + stime of `/proc/PID/stat` at that moment (everything
//!    since the spawn), peak RSS is `VmHWM`, RSS is `VmRSS`.
//! 2. Idle: `--settle-secs` after the listing was complete, utime + stime over
//!    `--idle-secs`, as % of one core; `VmRSS` at the end; then what the chats are listed
//!    as (`replying` should be none: every session is months old).
//! 3. Restart: SIGTERM, wait for the exit, start again on the same HOME and state folder;
//!    the same figures as the first start.
//! 4. Append latency, on the restarted daemon: a controller subscribed to events; 5
//!    warm-up then `--samples` times, one Claude Code prompt record appended to a random
//!    session file, timed until the matching `observed prompt_seen` arrives. The files are
//!    cut back to their length and mtime afterwards, so a kept corpus stays as generated.
//!
//! The corpus is read from the page cache (it was just written, or read by the previous
//! run): the first-start figures are those of a warm cache.

#[path = "observe_scale/corpus.rs"]
mod corpus;
mod support;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use corpus::{Corpus, Ending, Options, Rng, Style};
use koru_daemon::control::{controller_hello, Client};
use koru_protocol::{ChatsList, Message, ObservedChatState, ObservedKind, StreamEvent};
use koru_system_tests::measure::{megabytes, status_field, threads_on_cpu, Stats};
use koru_system_tests::{Daemon, Sandbox};

const STORE: &str = "chat_history_claude_code_jsonl";

/// Targets.
const IDLE_CPU_PERCENT: f64 = 0.1;
const RESTART_LISTED: Duration = Duration::from_millis(300);
const RESTART_CPU: Duration = Duration::from_millis(100);
const RSS_BYTES: u64 = 30_000_000;
/// The RSS target holds up to this many sessions.
const RSS_TARGET_SESSIONS: usize = 3000;
const APPEND_P99: Duration = Duration::from_millis(50);

/// How long the daemon may take to list a corpus before the run gives up.
const LISTING_DEADLINE: Duration = Duration::from_secs(30 * 60);

#[derive(Debug)]
struct Args {
    measuring: bool,
    generate: Option<PathBuf>,
    sessions: usize,
    gb: Option<f64>,
    sizes: Vec<usize>,
    idle: Duration,
    settle: Duration,
    samples: usize,
    warmup: usize,
    keep: Option<PathBuf>,
    seed: u64,
}

fn parse_args() -> Result<Args> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let measuring = raw.iter().any(|a| a == "--bench");
    let mut args = Args {
        measuring,
        generate: None,
        sessions: 3000,
        gb: None,
        sizes: if measuring {
            vec![3000, 10_000]
        } else {
            vec![200]
        },
        idle: Duration::from_secs(if measuring { 60 } else { 2 }),
        settle: Duration::from_secs(if measuring { 10 } else { 1 }),
        samples: if measuring { 200 } else { 10 },
        warmup: if measuring { 5 } else { 2 },
        keep: None,
        seed: 42,
    };
    let mut i = 0;
    while i < raw.len() {
        let value = |i: usize| -> Result<&str> {
            raw.get(i + 1)
                .map(String::as_str)
                .with_context(|| format!("{} needs a value", raw[i]))
        };
        match raw[i].as_str() {
            "--generate" => args.generate = Some(PathBuf::from(value(i)?)),
            "--sessions" => args.sessions = value(i)?.parse()?,
            "--gb" => args.gb = Some(value(i)?.parse()?),
            "--sizes" => {
                args.sizes = value(i)?
                    .split(',')
                    .map(|s| s.trim().replace('_', "").parse())
                    .collect::<Result<_, _>>()?
            }
            "--idle-secs" => args.idle = Duration::from_secs_f64(value(i)?.parse()?),
            "--settle-secs" => args.settle = Duration::from_secs_f64(value(i)?.parse()?),
            "--samples" => args.samples = value(i)?.parse()?,
            "--keep" => args.keep = Some(PathBuf::from(value(i)?)),
            "--seed" => args.seed = value(i)?.parse()?,
            // What cargo and the test harness pass (`--bench`, filters, `--nocapture`).
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Ok(args)
}

/// The corpus options for `sessions` sessions in this run.
fn options(args: &Args, sessions: usize) -> Options {
    let bytes = match args.gb {
        Some(gb) => (gb * 1e9) as u64,
        None if args.measuring || args.generate.is_some() => corpus::default_bytes(sessions),
        // Smoke: 20 KB a session.
        None => sessions as u64 * 20_000,
    };
    Options {
        sessions,
        bytes,
        seed: args.seed,
    }
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process (all its threads, those that ended too).
fn cpu_time(pid: i32, hz: f64) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = &stat[stat.rfind(')').context("a /proc stat line")? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    Ok(Duration::from_secs_f64(ticks as f64 / hz))
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "missed"
    }
}

/// What a start measured.
#[derive(Debug, Clone)]
struct Start {
    socket: Duration,
    listed: Duration,
    cpu: Duration,
    peak_rss: u64,
    rss: u64,
    /// When `status` first counted every file (the listing was checked from then on).
    files_counted: Option<Duration>,
}

/// Spawns `koru daemon` in `sandbox` with HOME = `home`.
fn spawn_daemon(sandbox: &Sandbox, home: &Path, name: &str) -> Result<Daemon> {
    let log = sandbox.path().join(format!("daemon-{name}.log"));
    let child = sandbox
        .koru()
        .arg("daemon")
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("the daemon starts")?;
    Ok(Daemon {
        child,
        log,
        socket: sandbox.socket(),
    })
}

/// Starts a daemon and waits until it lists all `sessions` chats of the store.
async fn start_and_list(
    sandbox: &Sandbox,
    home: &Path,
    sessions: usize,
    name: &str,
    hz: f64,
) -> Result<(Daemon, Start)> {
    let started = Instant::now();
    let mut daemon = spawn_daemon(sandbox, home, name)?;
    let pid = daemon.pid();
    let mut client = loop {
        if let Ok(client) = Client::connect(&daemon.socket, controller_hello("koru-bench")).await {
            break client;
        }
        // The daemon may take its first connections only once it has read the stores.
        if !daemon.is_running() || started.elapsed() > LISTING_DEADLINE {
            bail!(
                "the daemon did not answer on its socket; log:\n{}",
                daemon.log_text()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    client.status().await?;
    let socket = started.elapsed();
    let filter = ChatsList {
        store: Some(STORE.into()),
        workspace: None,
    };
    let mut files_counted = None;
    let mut last_list = Instant::now();
    loop {
        let status = client.status().await?;
        let files: usize = status
            .observers
            .iter()
            .filter(|o| o.store == STORE)
            .map(|o| o.files)
            .sum();
        if files >= sessions && files_counted.is_none() {
            files_counted = Some(started.elapsed());
        }
        // Listing every chat is not cheap at this scale: only once the files are all
        // counted, or now and then in case they never are.
        if files >= sessions || last_list.elapsed() >= Duration::from_secs(2) {
            last_list = Instant::now();
            let listed = client.chats(filter.clone()).await?.chats.len();
            if listed >= sessions {
                let listed = started.elapsed();
                let cpu = cpu_time(pid, hz)?;
                return Ok((
                    daemon,
                    Start {
                        socket,
                        listed,
                        cpu,
                        peak_rss: status_field(pid, "VmHWM:")?,
                        rss: status_field(pid, "VmRSS:")?,
                        files_counted,
                    },
                ));
            }
        }
        if started.elapsed() > LISTING_DEADLINE {
            bail!("the daemon did not list {sessions} chats in {LISTING_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The chats listed, by state, and the replying ones by the corpus's version and ending.
#[derive(Debug, Default)]
struct States {
    idle: usize,
    replying: usize,
    needs_input: usize,
    replying_by_kind: BTreeMap<(Style, Ending), usize>,
}

async fn chat_states(socket: &Path, corpus: &Corpus) -> Result<States> {
    let mut client = Client::connect(socket, controller_hello("koru-bench")).await?;
    let chats = client
        .chats(ChatsList {
            store: Some(STORE.into()),
            workspace: None,
        })
        .await?
        .chats;
    let by_id: HashMap<&str, &corpus::Session> =
        corpus.sessions.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut states = States::default();
    for chat in chats {
        match chat.state {
            ObservedChatState::Idle => states.idle += 1,
            ObservedChatState::NeedsInput => states.needs_input += 1,
            ObservedChatState::Replying => {
                states.replying += 1;
                if let Some(session) = by_id.get(chat.chat_id.as_str()) {
                    *states
                        .replying_by_kind
                        .entry((session.style(), session.ending))
                        .or_default() += 1;
                }
            }
        }
    }
    Ok(states)
}

/// A Claude Code prompt record, as 2.1 appends it when the user types one.
fn prompt_record(session: &corpus::Session, text: &str, rng: &mut Rng) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    serde_json::json!({"parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": session.cwd, "sessionId": session.id, "version": "2.1.39", "gitBranch": "main",
        "type": "user", "message": {"role": "user", "content": text},
        "uuid": rng.uuid(), "timestamp": corpus::iso_ms(now)})
    .to_string()
}

/// Appended prompt → `observed prompt_seen`, on the running daemon; the files appended to
/// are cut back to their length and mtime by [`restore`] later.
async fn append_latency(
    socket: &Path,
    corpus: &Corpus,
    warmup: usize,
    samples: usize,
    seed: u64,
    touched: &mut HashMap<PathBuf, (u64, SystemTime)>,
) -> Result<(Vec<Duration>, usize)> {
    let mut controller = support::subscribed_controller(socket).await?;
    let mut rng = Rng::new(seed ^ 0x00A9_9E4D);
    let mut times = Vec::with_capacity(samples);
    let mut lost = 0;
    for i in 0..warmup + samples {
        let session = &corpus.sessions[rng.below(corpus.sessions.len())];
        if !touched.contains_key(&session.path) {
            let meta = std::fs::metadata(&session.path)?;
            touched.insert(session.path.clone(), (meta.len(), meta.modified()?));
        }
        let text = format!("scale bench prompt {i}: check the watcher under load");
        let line = prompt_record(session, &text, &mut rng);
        let start = Instant::now();
        {
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&session.path)?;
            writeln!(file, "{line}")?;
        }
        let deadline = start + Duration::from_secs(10);
        let seen = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(next) = tokio::time::timeout(left, controller.next()).await else {
                break false;
            };
            let Some(envelope) = next? else {
                bail!("the daemon closed the event stream")
            };
            if let Message::Stream(item) = envelope.message {
                if let StreamEvent::Observed { observation } = item.event {
                    if let ObservedKind::PromptSeen { excerpt, .. } = &observation.event {
                        if excerpt == &text && observation.chat_id == session.id {
                            break true;
                        }
                    }
                }
            }
        };
        if i >= warmup {
            if seen {
                times.push(start.elapsed());
            } else {
                lost += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((times, lost))
}

/// Cuts the files appended to back to their length and mtime.
fn restore(touched: &HashMap<PathBuf, (u64, SystemTime)>) -> Result<()> {
    for (path, (len, modified)) in touched {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        file.set_len(*len)?;
        file.set_modified(*modified)?;
    }
    Ok(())
}

/// Lines of a daemon log at WARN or ERROR (the first few, distinct), and the log's size.
fn log_digest(daemon: &Daemon) -> (usize, usize, Vec<String>) {
    let text = daemon.log_text();
    let mut notable: Vec<String> = Vec::new();
    let mut count = 0;
    for line in text.lines() {
        if line.contains(" WARN ") || line.contains(" ERROR ") {
            count += 1;
            // Without the timestamp, so repeats fold.
            let message = line.split_once(' ').map_or(line, |(_, rest)| rest).trim();
            if notable.len() < 8 && !notable.iter().any(|n| n == message) {
                notable.push(message.to_string());
            }
        }
    }
    (text.len(), count, notable)
}

/// Everything measured for one size.
#[derive(Debug)]
struct Run {
    sessions: usize,
    files: usize,
    bytes: u64,
    mix: BTreeMap<(Style, Ending), usize>,
    generated_in: Option<Duration>,
    first: Start,
    idle_cpu_percent: f64,
    /// On-CPU time of the daemon's threads over the idle window, by name, most first.
    idle_threads: Vec<(String, Duration)>,
    idle_rss: u64,
    idle_peak_rss: u64,
    states: States,
    stop: Duration,
    stop_status: String,
    restart: Start,
    append: Stats,
    append_lost: usize,
    logs: Vec<(String, usize, usize, Vec<String>)>,
}

async fn run_size(args: &Args, sessions: usize, scratch: &Path, hz: f64) -> Result<Run> {
    let options = options(args, sessions);
    let home = match &args.keep {
        Some(dir) => dir.join(format!("sessions-{sessions}")),
        None => scratch.join(format!("sessions-{sessions}")),
    };
    eprintln!(
        "[observe_scale] {sessions} sessions: corpus in {} …",
        home.display()
    );
    let (corpus, generated_in) = corpus::ensure(&home, &options)?;
    match generated_in {
        Some(took) => eprintln!(
            "[observe_scale] generated {} files, {} in {}",
            corpus.sessions.len(),
            megabytes(corpus.bytes()),
            secs(took)
        ),
        None => eprintln!("[observe_scale] reusing the corpus kept there"),
    }

    let sandbox = Sandbox::new();
    eprintln!("[observe_scale] first start …");
    let (mut daemon, first) = start_and_list(&sandbox, &home, sessions, "first", hz).await?;
    eprintln!(
        "[observe_scale] listed in {}; idle for {} after {} …",
        secs(first.listed),
        secs(args.idle),
        secs(args.settle)
    );
    tokio::time::sleep(args.settle).await;
    let pid = daemon.pid();
    let before = cpu_time(pid, hz)?;
    let threads_before = threads_on_cpu(pid)?;
    let idle_start = Instant::now();
    tokio::time::sleep(args.idle).await;
    let idle_cpu = cpu_time(pid, hz)? - before;
    let idle_cpu_percent = idle_cpu.as_secs_f64() / idle_start.elapsed().as_secs_f64() * 100.0;
    let idle_rss = status_field(pid, "VmRSS:")?;
    let idle_peak_rss = status_field(pid, "VmHWM:")?;
    let mut idle_threads: Vec<(String, Duration)> = threads_on_cpu(pid)?
        .into_iter()
        .map(|(name, after)| {
            let before = threads_before.get(&name).copied().unwrap_or_default();
            (name, after.saturating_sub(before))
        })
        .filter(|(_, time)| *time >= Duration::from_millis(1))
        .collect();
    idle_threads.sort_by_key(|(_, time)| std::cmp::Reverse(*time));
    let states = chat_states(&daemon.socket, &corpus).await?;

    eprintln!("[observe_scale] restart …");
    let stopping = Instant::now();
    let status = daemon.terminate(Duration::from_secs(120));
    let stop = stopping.elapsed();
    let stop_status = match status {
        Some(status) if status.success() => "exit 0".to_string(),
        Some(status) => status.to_string(),
        None => "still running after 120 s (killed)".to_string(),
    };
    let mut logs = vec![{
        let (bytes, warnings, notable) = log_digest(&daemon);
        ("first start".to_string(), bytes, warnings, notable)
    }];
    drop(daemon);
    let (mut daemon, restart) = start_and_list(&sandbox, &home, sessions, "restart", hz).await?;

    eprintln!("[observe_scale] append latency …");
    let mut touched = HashMap::new();
    let appended = append_latency(
        &daemon.socket,
        &corpus,
        args.warmup,
        args.samples,
        args.seed,
        &mut touched,
    )
    .await;
    let _ = daemon.terminate(Duration::from_secs(120));
    let (bytes, warnings, notable) = log_digest(&daemon);
    logs.push(("restart".to_string(), bytes, warnings, notable));
    drop(daemon);
    restore(&touched)?;
    let (times, append_lost) = appended?;

    Ok(Run {
        sessions,
        files: corpus.sessions.len(),
        bytes: corpus.bytes(),
        mix: corpus.mix(),
        generated_in,
        first,
        idle_cpu_percent,
        idle_threads,
        idle_rss,
        idle_peak_rss,
        states,
        stop,
        stop_status,
        restart,
        append: Stats::of(times),
        append_lost,
        logs,
    })
}

fn mix_text(mix: &BTreeMap<(Style, Ending), usize>) -> (String, String) {
    let by_style = |style: Style| -> usize {
        mix.iter()
            .filter(|((s, _), _)| *s == style)
            .map(|(_, n)| n)
            .sum()
    };
    let by_ending = |ending: Ending| -> usize {
        mix.iter()
            .filter(|((_, e), _)| *e == ending)
            .map(|(_, n)| n)
            .sum()
    };
    (
        format!(
            "{} / {} / {}",
            by_style(Style::V21),
            by_style(Style::V20),
            by_style(Style::V10)
        ),
        format!(
            "{} / {}",
            by_ending(Ending::TextAfterThinking),
            by_ending(Ending::UnansweredPrompt)
        ),
    )
}

fn print_runs(runs: &[Run], args: &Args) {
    println!("### Corpus\n");
    println!("| sessions | size | versions 2.1.x / 2.0.x / 1.0.x | last turn open: text after thinking / unanswered prompt | generated in |");
    println!("|---|---|---|---|---|");
    for run in runs {
        let (styles, endings) = mix_text(&run.mix);
        println!(
            "| {} | {} | {styles} | {endings} | {} |",
            run.files,
            megabytes(run.bytes),
            run.generated_in
                .map_or("kept from a previous run".to_string(), secs)
        );
    }

    println!("\n### First start (no cache)\n");
    println!("| sessions | socket answers (status) | every file counted (status) | all chats listed | daemon CPU until listed | peak RSS (VmHWM) | RSS then |");
    println!("|---|---|---|---|---|---|---|");
    for run in runs {
        let s = &run.first;
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            run.sessions,
            ms(s.socket),
            s.files_counted.map_or("—".into(), secs),
            secs(s.listed),
            secs(s.cpu),
            megabytes(s.peak_rss),
            megabytes(s.rss)
        );
    }

    println!(
        "\n_Every file counted: when `status` first counted every session file (— when the \
         listing was seen complete before it did). The daemon's CPU is all of it since the spawn._"
    );

    println!("\n### Idle\n");
    println!(
        "| sessions | CPU, % of a core ({} s, from {} s after listing) | on CPU by thread | RSS at the end | peak RSS so far | chats idle / replying / needs input | replying, by version and ending |",
        args.idle.as_secs_f64(),
        args.settle.as_secs_f64()
    );
    println!("|---|---|---|---|---|---|---|");
    for run in runs {
        let threads = run
            .idle_threads
            .iter()
            .take(4)
            .map(|(name, time)| format!("{name} {:.0} ms", time.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(", ");
        let kinds = if run.states.replying_by_kind.is_empty() {
            "—".to_string()
        } else {
            run.states
                .replying_by_kind
                .iter()
                .map(|((style, ending), n)| format!("{} {}: {n}", style.family(), ending.as_str()))
                .collect::<Vec<_>>()
                .join("; ")
        };
        println!(
            "| {} | {:.3} % | {threads} | {} | {} | {} / {} / {} | {kinds} |",
            run.sessions,
            run.idle_cpu_percent,
            megabytes(run.idle_rss),
            megabytes(run.idle_peak_rss),
            run.states.idle,
            run.states.replying,
            run.states.needs_input
        );
    }

    println!("\n### Restart (SIGTERM, then the same HOME and state folder)\n");
    println!("| sessions | stop (SIGTERM → exit) | socket answers (status) | all chats listed | daemon CPU until listed | peak RSS (VmHWM) | RSS then |");
    println!("|---|---|---|---|---|---|---|");
    for run in runs {
        let s = &run.restart;
        println!(
            "| {} | {} ({}) | {} | {} | {} | {} | {} |",
            run.sessions,
            secs(run.stop),
            run.stop_status,
            ms(s.socket),
            secs(s.listed),
            secs(s.cpu),
            megabytes(s.peak_rss),
            megabytes(s.rss)
        );
    }

    println!("\n### Appended prompt → `observed prompt_seen` (restarted daemon)\n");
    println!("| sessions | samples | lost (> 10 s) | p50 | p99 | max |");
    println!("|---|---|---|---|---|---|");
    for run in runs {
        let a = &run.append;
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            run.sessions,
            a.count,
            run.append_lost,
            ms(a.p50),
            ms(a.p99),
            ms(a.max)
        );
    }

    println!("\n### Targets\n");
    println!("| target | sessions | measured | verdict |");
    println!("|---|---|---|---|");
    for run in runs {
        let n = run.sessions;
        println!(
            "| idle CPU ≤ {IDLE_CPU_PERCENT} % of a core | {n} | {:.3} % | {} |",
            run.idle_cpu_percent,
            verdict(run.idle_cpu_percent <= IDLE_CPU_PERCENT)
        );
        println!(
            "| restart: all chats listed ≤ {} | {n} | {} | {} |",
            secs(RESTART_LISTED),
            secs(run.restart.listed),
            verdict(run.restart.listed <= RESTART_LISTED)
        );
        println!(
            "| restart: CPU until listed ≤ {} | {n} | {} | {} |",
            secs(RESTART_CPU),
            secs(run.restart.cpu),
            verdict(run.restart.cpu <= RESTART_CPU)
        );
        if n <= RSS_TARGET_SESSIONS {
            for (what, bytes) in [
                ("peak RSS, first start", run.first.peak_rss),
                ("peak RSS, restart", run.restart.peak_rss),
                ("steady RSS (idle)", run.idle_rss),
            ] {
                println!(
                    "| {what} ≤ {} | {n} | {} | {} |",
                    megabytes(RSS_BYTES),
                    megabytes(bytes),
                    verdict(bytes <= RSS_BYTES)
                );
            }
        }
        println!(
            "| no old chat listed `replying` | {n} | {} | {} |",
            run.states.replying,
            verdict(run.states.replying == 0)
        );
        println!(
            "| appended prompt observed, p99 ≤ {} | {n} | {} ({} lost) | {} |",
            ms(APPEND_P99),
            ms(run.append.p99),
            run.append_lost,
            verdict(run.append.p99 <= APPEND_P99 && run.append_lost == 0)
        );
    }

    println!("\n### Daemon logs (RUST_LOG=info)\n");
    for run in runs {
        for (which, bytes, warnings, notable) in &run.logs {
            println!(
                "- {} sessions, {which}: {bytes} bytes of log, {warnings} WARN/ERROR lines",
                run.sessions
            );
            for line in notable {
                println!("  - `{}`", line.replace('`', "'"));
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let args = parse_args()?;
    if let Some(dir) = &args.generate {
        let options = options(&args, args.sessions);
        let start = Instant::now();
        std::fs::create_dir_all(dir)?;
        let corpus = corpus::generate(dir, &options)?;
        let took = start.elapsed();
        let (styles, endings) = mix_text(&corpus.mix());
        println!(
            "{} sessions, {} in {} ({:.0} MB/s) under {}; versions 2.1.x / 2.0.x / 1.0.x: {styles}; last turn open (text after thinking / unanswered prompt): {endings}; manifest {}",
            corpus.sessions.len(),
            megabytes(corpus.bytes()),
            secs(took),
            corpus.bytes() as f64 / 1e6 / took.as_secs_f64(),
            corpus.home.join(".claude/projects").display(),
            corpus.home.join(corpus::MANIFEST).display()
        );
        return Ok(());
    }
    if !args.measuring {
        println!(
            "_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n"
        );
    }
    // Built (once) before anything is timed.
    let bin = koru_system_tests::koru_bin();
    eprintln!("[observe_scale] daemon: {}", bin.display());
    let hz = clock_ticks_per_second();
    let scratch = tempfile::Builder::new()
        .prefix("koru-scale-")
        .tempdir()
        .context("a temp folder for the corpora")?;
    let mut runs = Vec::new();
    for &sessions in &args.sizes {
        runs.push(run_size(&args, sessions, scratch.path(), hz).await?);
    }
    print_runs(&runs, &args);
    if !args.measuring {
        // The smoke run checks the bench works, not the figures.
        for run in &runs {
            if run.append.count == 0 {
                bail!("no appended prompt was observed");
            }
        }
    }
    Ok(())
}

//! Benchmark of the drive journal (issue 19) on the real `koru daemon` (release under `cargo bench`): the drive round trip with the journal off, on with full prompts and on with digests, in one run; journal bytes per drive; `koru verify` on a 1,000,000-entry journal; `drive.get` of the oldest and newest of 100,000 drives and the daemon's RSS during that flood (`cargo bench -p koru-system-tests --bench journal [-- roundtrip|verify|history]`).
//!
//! Prints Markdown. Run without `--bench` (as `cargo test --benches` does) it makes a quick
//! smoke run with small counts instead, whose figures mean nothing.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use koru_daemon::control::{controller_hello, Client};
use koru_daemon::journal::canonical::Sealer;
use koru_daemon::journal::index::prompt_excerpt;
use koru_daemon::journal::{Asker, Journal, JournalConfig, Retention, KIND_DAEMON_STARTED};
use koru_protocol::{
    DriveCreate, DriveOptions, DriveState, DrivesList, Message, StreamEvent, StreamItem, Target,
};
use koru_system_tests::measure::{
    megabytes, micros, mixed_prompt, status_field, threads_on_cpu, Stats, MAIN_THREAD,
};
use koru_system_tests::{Daemon, Plugin, Sandbox};
use serde_json::{Map, Value};
use support::subscribed_controller;

mod support;

/// How much work one run does.
#[derive(Debug, Clone, Copy)]
struct Scale {
    /// Whether this is a real measurement (`--bench`) rather than a smoke run.
    measuring: bool,
    /// Round trip: timed drives per journal setting, warm-up drives before them, and the
    /// size of the turns the settings take.
    drives: usize,
    warm_up: usize,
    block: usize,
    /// Entries of the journal `koru verify` checks.
    verify_entries: u64,
    /// Drives of the history flood (at least 100), and the `drive.get` rounds after it.
    history_drives: usize,
    /// The least time from one flood drive's start to the next (zero: as fast as they go).
    history_pace: Duration,
    get_rounds: usize,
}

impl Scale {
    /// The counts of `--bench` (or of a smoke run without it); `KORU_BENCH_HISTORY_DRIVES`
    /// and `KORU_BENCH_VERIFY_ENTRIES` change the two long ones.
    fn from_args() -> Scale {
        let mut scale = Scale::default_for(std::env::args().any(|arg| arg == "--bench"));
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        if let Some(drives) = env("KORU_BENCH_HISTORY_DRIVES") {
            scale.history_drives = drives as usize;
        }
        if let Some(entries) = env("KORU_BENCH_VERIFY_ENTRIES") {
            scale.verify_entries = entries;
        }
        if let Some(micros) = env("KORU_BENCH_HISTORY_PACE_US") {
            scale.history_pace = Duration::from_micros(micros);
        }
        scale
    }

    fn default_for(measuring: bool) -> Scale {
        if measuring {
            Scale {
                measuring: true,
                drives: 5_000,
                warm_up: 500,
                block: 20,
                verify_entries: 1_000_000,
                history_drives: 100_000,
                history_pace: Duration::ZERO,
                get_rounds: 2_000,
            }
        } else {
            Scale {
                measuring: false,
                drives: 30,
                warm_up: 10,
                block: 10,
                verify_entries: 4_000,
                history_drives: 300,
                history_pace: Duration::ZERO,
                get_rounds: 20,
            }
        }
    }
}

/// The targets.
const MAX_ADDED_P50: Duration = Duration::from_micros(20);
const MAX_NEWEST_OVER_OLD: f64 = 1.10;

/// The journal's threads as `/proc` names them (15 bytes at most).
const INDEX_THREAD: &str = "koru-journal-in";
const SYNC_THREAD: &str = "koru-journal-sy";

/// Prompts are this many characters (≈235 bytes of UTF-8), each made unique by its number.
const PROMPT_CHARS: usize = 200;

fn main() -> Result<()> {
    let scale = Scale::from_args();
    // `cargo bench --bench journal -- verify` runs only that part.
    let parts: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    // One thread for the bench's clients, so that on a 2-core machine the other core is
    // left to the daemon.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the bench runtime")?;
    if !scale.measuring {
        println!(
            "_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n"
        );
    }
    println!(
        "Daemon: `{}` · {} cores\n",
        koru_system_tests::koru_bin().display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if wanted("roundtrip") {
        runtime
            .block_on(round_trip_on_and_off(&scale))?
            .print(&scale);
    }
    if wanted("verify") {
        runtime.block_on(verify_a_long_journal(&scale))?.print();
    }
    if wanted("history") {
        runtime.block_on(history_flood(&scale))?.print(&scale);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// A daemon with a fake plugin and a controller.

/// A daemon in a sandbox of its own, `koru dev fake-plugin` connected to it (acks at once),
/// and a controller subscribed to events.
struct Rig {
    sandbox: Sandbox,
    daemon: Daemon,
    plugin: Plugin,
    controller: Client,
}

impl Rig {
    async fn start(daemon_args: &[&str]) -> Result<Rig> {
        let sandbox = Sandbox::new();
        let daemon = start_daemon(&sandbox, daemon_args);
        let workspace = sandbox.workspace("bench");
        let workspace = workspace.to_str().context("a UTF-8 workspace path")?;
        let plugin = sandbox
            .start_fake_plugin_with_env(&["--workspace", workspace], &[("RUST_LOG", "warn")]);
        let controller = subscribed_controller(&sandbox.socket()).await?;
        Ok(Rig {
            sandbox,
            daemon,
            plugin,
            controller,
        })
    }

    /// Drives one prompt to `done`; returns its id and the times to the `drive.result`
    /// reply and to the `done` event.
    async fn drive(&mut self, prompt: String) -> Result<(String, Duration, Duration)> {
        let session = self.plugin.session_id.clone();
        tokio::time::timeout(
            Duration::from_secs(10),
            drive_to_done(&mut self.controller, &session, prompt),
        )
        .await
        .context("a drive did not end within 10 s")?
    }

    fn journal_dir(&self) -> PathBuf {
        self.sandbox
            .path()
            .join("state")
            .join("koru")
            .join("journal")
    }

    /// Where the daemon keeps its drive index (`$XDG_CACHE_HOME/koru/journal-index`; the
    /// sandbox's `XDG_CACHE_HOME` is its `cache/` folder).
    fn index_dir(&self) -> PathBuf {
        self.sandbox
            .path()
            .join("cache")
            .join("koru")
            .join("journal-index")
    }

    /// Stops the plugin and the daemon (SIGTERM: the journal is closed and synced); returns
    /// the sandbox and how long the daemon took from SIGTERM to its exit.
    async fn stop(mut self) -> Result<(Sandbox, Duration)> {
        self.controller.close().await;
        self.plugin.kill();
        let began = Instant::now();
        let status = self.daemon.terminate(Duration::from_secs(600));
        let took = began.elapsed();
        ensure!(
            status.is_some_and(|s| s.success()),
            "the daemon did not exit cleanly within 10 minutes of SIGTERM ({status:?})"
        );
        Ok((self.sandbox, took))
    }
}

/// `koru daemon --heartbeat-ms 60000 ARGS` at the daemon's default log level (info, as in
/// `contrib/koru.service`), not the tests' debug.
fn start_daemon(sandbox: &Sandbox, args: &[&str]) -> Daemon {
    let mut all = vec!["--heartbeat-ms", "60000"];
    all.extend_from_slice(args);
    sandbox.start_daemon_with_env(&all, &[("RUST_LOG", "info")])
}

/// `drive.create` to `session`, then the drive's terminal `drive_updated`, which must say
/// `done`.
async fn drive_to_done(
    controller: &mut Client,
    session: &str,
    prompt: String,
) -> Result<(String, Duration, Duration)> {
    let started = Instant::now();
    let created = controller
        .create_drive(DriveCreate {
            target: Target::Session(session.to_string()),
            prompt,
            options: DriveOptions::default(),
        })
        .await?;
    let replied = started.elapsed();
    loop {
        let Some(envelope) = controller.next().await? else {
            bail!("the daemon closed the controller connection");
        };
        if let Message::Stream(StreamItem {
            event: StreamEvent::DriveUpdated { drive },
            ..
        }) = envelope.message
        {
            if drive.drive_id == created.drive_id && drive.state.is_terminal() {
                ensure!(
                    drive.state == DriveState::Done,
                    "drive {} ended {} ({:?})",
                    drive.drive_id,
                    drive.state,
                    drive.blocker
                );
                return Ok((created.drive_id, replied, started.elapsed()));
            }
        }
    }
}

/// The `n`-th prompt of a run.
fn prompt(n: usize) -> String {
    mixed_prompt(&format!("[{n}] "), PROMPT_CHARS)
}

// ---------------------------------------------------------------------------------------
// 1 and 2: the round trip with the journal off and on, and the bytes it writes per drive.

/// The journal settings compared.
const SETTINGS: [(&str, &[&str]); 3] = [
    ("journal off (`--no-journal`)", &["--no-journal"]),
    ("journal on, `--journal-prompts full` (default)", &[]),
    (
        "journal on, `--journal-prompts digest`",
        &["--journal-prompts", "digest"],
    ),
];

/// What one setting measured (timed drives only).
struct SettingRun {
    label: &'static str,
    to_done: Stats,
    to_reply: Stats,
    /// On-CPU time per drive of each of the daemon's threads (by name; the main thread is
    /// the event loop), and of all of them.
    thread_cpu: BTreeMap<String, Duration>,
    process_cpu: Duration,
    /// What its journal holds afterwards (`None` with the journal off).
    bytes: Option<JournalBytes>,
}

struct RoundTripReport {
    settings: Vec<SettingRun>,
}

async fn round_trip_on_and_off(scale: &Scale) -> Result<RoundTripReport> {
    let mut rigs = Vec::new();
    for (_, args) in SETTINGS {
        rigs.push(Rig::start(args).await?);
    }
    let count = SETTINGS.len();
    let mut to_done = vec![Vec::new(); count];
    let mut to_reply = vec![Vec::new(); count];
    let mut thread_cpu: Vec<BTreeMap<String, Duration>> = vec![BTreeMap::new(); count];
    let mut n = 0;
    // The settings take turns of `block` drives each; who goes first rotates.
    for (turn, block_start) in (0..scale.warm_up + scale.drives)
        .step_by(scale.block)
        .enumerate()
    {
        let timed = block_start >= scale.warm_up;
        for k in 0..count {
            let setting = (turn + k) % count;
            let rig = &mut rigs[setting];
            let pid = rig.daemon.pid();
            let cpu_before = threads_on_cpu(pid)?;
            for _ in 0..scale.block {
                n += 1;
                let (_, replied, done) = rig.drive(prompt(n)).await?;
                if timed {
                    to_done[setting].push(done);
                    to_reply[setting].push(replied);
                }
            }
            if timed {
                for (name, after) in threads_on_cpu(pid)? {
                    let before = cpu_before.get(&name).copied().unwrap_or_default();
                    *thread_cpu[setting].entry(name).or_default() += after.saturating_sub(before);
                }
            }
        }
    }
    let mut settings = Vec::new();
    for (setting, rig) in rigs.into_iter().enumerate() {
        let (journal, index) = (rig.journal_dir(), rig.index_dir());
        let (sandbox, _) = rig.stop().await?;
        let bytes = if journal.is_dir() {
            Some(JournalBytes::measure(&journal, &index)?)
        } else {
            None
        };
        drop(sandbox);
        let timed = scale.drives.max(1) as u32;
        settings.push(SettingRun {
            label: SETTINGS[setting].0,
            to_done: Stats::of(std::mem::take(&mut to_done[setting])),
            to_reply: Stats::of(std::mem::take(&mut to_reply[setting])),
            process_cpu: thread_cpu[setting].values().sum::<Duration>() / timed,
            thread_cpu: std::mem::take(&mut thread_cpu[setting])
                .into_iter()
                .map(|(name, time)| (name, time / timed))
                .collect(),
            bytes,
        });
    }
    Ok(RoundTripReport { settings })
}

impl RoundTripReport {
    fn print(&self, scale: &Scale) {
        println!(
            "## Drive round trip, journal off and on ({} timed drives per setting after {} warm-up, in turns of {})\n",
            scale.drives, scale.warm_up, scale.block
        );
        println!(
            "| setting | `drive.create` → `done` p50 | p99 | mean | → `drive.result` p50 | p99 |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for run in &self.settings {
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                run.label,
                micros(run.to_done.p50),
                micros(run.to_done.p99),
                micros(run.to_done.mean),
                micros(run.to_reply.p50),
                micros(run.to_reply.p99),
            );
        }
        println!("\nDaemon on-CPU time per drive, by thread:\n");
        println!("| setting | event loop (main thread) | index (`koru-journal-in`) | sync (`koru-journal-sy`, also writes the prompt blobs) | other threads | whole daemon |");
        println!("|---|---:|---:|---:|---:|---:|");
        for run in &self.settings {
            let thread = |name: &str| run.thread_cpu.get(name).copied().unwrap_or_default();
            let named = thread(MAIN_THREAD) + thread(INDEX_THREAD) + thread(SYNC_THREAD);
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                run.label,
                micros(thread(MAIN_THREAD)),
                micros(thread(INDEX_THREAD)),
                micros(thread(SYNC_THREAD)),
                micros(run.process_cpu.saturating_sub(named)),
                micros(run.process_cpu)
            );
        }
        let off = &self.settings[0];
        let event_loop =
            |run: &SettingRun| run.thread_cpu.get(MAIN_THREAD).copied().unwrap_or_default();
        println!("\n| added by the journal | round trip p50 | round trip p99 | `drive.result` p50 | event loop on-CPU | whole daemon on-CPU | target: ≤ 20 µs at p50 |");
        println!("|---|---:|---:|---:|---:|---:|---|");
        for run in &self.settings[1..] {
            let added = signed_micros(run.to_done.p50, off.to_done.p50);
            let met = run.to_done.p50 <= off.to_done.p50 + MAX_ADDED_P50;
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                run.label,
                added,
                signed_micros(run.to_done.p99, off.to_done.p99),
                signed_micros(run.to_reply.p50, off.to_reply.p50),
                signed_micros(event_loop(run), event_loop(off)),
                signed_micros(run.process_cpu, off.process_cpu),
                if met { "met" } else { "**MISSED**" }
            );
        }
        println!("\n## Journal bytes per drive ({PROMPT_CHARS}-character prompts, each its own)\n");
        for run in &self.settings[1..] {
            if let Some(bytes) = &run.bytes {
                println!("{}:\n", run.label);
                bytes.print();
            }
        }
    }
}

/// `after - before` in microseconds, with its sign.
fn signed_micros(after: Duration, before: Duration) -> String {
    format!(
        "{:+.1} µs",
        (after.as_secs_f64() - before.as_secs_f64()) * 1e6
    )
}

/// What a journal folder holds, counted from its files.
struct JournalBytes {
    drives: u64,
    /// Entry count and bytes (with the newline) by kind.
    by_kind: BTreeMap<String, (u64, u64)>,
    segments: u64,
    blob_files: u64,
    blob_bytes: u64,
    /// Blocks the file system gave the blobs (`st_blocks` × 512).
    blob_allocated: u64,
    /// The drive index (SQLite file, WAL and shared memory).
    index_bytes: u64,
}

impl JournalBytes {
    fn measure(dir: &Path, index_dir: &Path) -> Result<JournalBytes> {
        let mut by_kind: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut segments = 0;
        for segment in segment_files(dir)? {
            segments += 1;
            let text = std::fs::read_to_string(&segment)
                .with_context(|| format!("cannot read {}", segment.display()))?;
            for line in text.lines() {
                let entry: Value = serde_json::from_str(line)
                    .with_context(|| format!("a line of {} is not JSON", segment.display()))?;
                let kind = entry["kind"].as_str().unwrap_or("?").to_string();
                let slot = by_kind.entry(kind).or_default();
                slot.0 += 1;
                slot.1 += line.len() as u64 + 1;
            }
        }
        let (mut blob_files, mut blob_bytes, mut blob_allocated) = (0, 0, 0);
        if let Ok(blobs) = std::fs::read_dir(dir.join("blobs").join("sha256")) {
            for blob in blobs {
                let meta = blob?.metadata()?;
                blob_files += 1;
                blob_bytes += meta.len();
                blob_allocated += meta.blocks() * 512;
            }
        }
        let mut index_bytes = 0;
        if let Ok(files) = std::fs::read_dir(index_dir) {
            for file in files {
                index_bytes += file?.metadata()?.len();
            }
        }
        Ok(JournalBytes {
            drives: by_kind.get("drive_accepted").map_or(0, |k| k.0),
            by_kind,
            segments,
            blob_files,
            blob_bytes,
            blob_allocated,
            index_bytes,
        })
    }

    fn segment_bytes(&self) -> u64 {
        self.by_kind.values().map(|k| k.1).sum()
    }

    fn entries(&self) -> u64 {
        self.by_kind.values().map(|k| k.0).sum()
    }

    fn print(&self) {
        let drives = self.drives.max(1) as f64;
        let per_drive = |bytes: u64| format!("{:.0}", bytes as f64 / drives);
        println!(
            "| per drive ({} drives, {} entries, {} segments) | bytes |",
            self.drives,
            self.entries(),
            self.segments
        );
        println!("|---|---:|");
        for (kind, (count, bytes)) in &self.by_kind {
            println!(
                "| `{kind}` entries ({count}, {:.0} bytes each) | {} |",
                *bytes as f64 / *count as f64,
                per_drive(*bytes)
            );
        }
        println!(
            "| **segments, all entries** | **{}** |",
            per_drive(self.segment_bytes())
        );
        println!(
            "| prompt blobs ({} files): content | {} |",
            self.blob_files,
            per_drive(self.blob_bytes)
        );
        println!(
            "| prompt blobs: blocks allocated on disk | {} |",
            per_drive(self.blob_allocated)
        );
        println!(
            "| **journal total (segments + blob content)** | **{}** |",
            per_drive(self.segment_bytes() + self.blob_bytes)
        );
        println!(
            "| drive index (SQLite cache, not the journal) | {} |\n",
            per_drive(self.index_bytes)
        );
    }
}

fn segment_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("seg-") && n.ends_with(".ndjson"))
        })
        .collect();
    files.sort();
    Ok(files)
}

// ---------------------------------------------------------------------------------------
// 3: `koru verify` on a long journal written through the journal's own writer.

struct VerifyReport {
    /// Entries written, and how long writing them (and indexing them) took.
    written: u64,
    writing: Duration,
    bytes: JournalBytes,
    warm: VerifyRun,
    cold: VerifyRun,
}

/// One `koru verify --json` run.
struct VerifyRun {
    wall: Duration,
    /// `VmHWM` of the process, polled every 2 ms until it exits.
    peak_rss: u64,
    entries: u64,
    blobs_present: u64,
}

impl VerifyRun {
    fn rate(&self) -> f64 {
        self.entries as f64 / self.wall.as_secs_f64()
    }
}

async fn verify_a_long_journal(scale: &Scale) -> Result<VerifyReport> {
    let template = DriveTemplate::from_a_real_daemon().await?;
    let sandbox = Sandbox::new();
    // `KORU_BENCH_KEEP_JOURNAL=DIR` writes the journal there (a new folder) and leaves it,
    // to look at it again (`/usr/bin/time -v koru verify DIR`, `perf`).
    let dir = match std::env::var_os("KORU_BENCH_KEEP_JOURNAL") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            ensure!(!dir.exists(), "{} exists already", dir.display());
            dir
        }
        None => sandbox.path().join("journal"),
    };
    let started = Instant::now();
    let written = template.write_journal(
        &dir,
        &sandbox.path().join("index.sqlite3"),
        scale.verify_entries,
    )?;
    let writing = started.elapsed();
    let bytes = JournalBytes::measure(&dir, Path::new("/nonexistent"))?;
    let warm = timed_verify(&sandbox, &dir, Some(written))?;
    evict_from_page_cache(&dir)?;
    let cold = timed_verify(&sandbox, &dir, Some(written))?;
    Ok(VerifyReport {
        written,
        writing,
        bytes,
        warm,
        cold,
    })
}

/// The entries one real drive left in a real daemon's journal, to write again and again
/// with other ids, times and prompts.
struct DriveTemplate {
    /// `daemon_started`'s fields, and the daemon as its `by` names it.
    started: Map<String, Value>,
    daemon: Asker,
    /// Each entry of the drive.
    entries: Vec<TemplateEntry>,
    drive_id: String,
}

/// One entry of the template drive: its kind, time, fields (without the chain's own) and
/// who asked.
struct TemplateEntry {
    kind: String,
    at_ms: u64,
    fields: Map<String, Value>,
    by: Option<Asker>,
}

/// The fields the writer adds to every entry.
const CHAIN_FIELDS: [&str; 6] = ["seq", "at_ms", "kind", "prev_hash", "entry_hash", "by"];

impl DriveTemplate {
    async fn from_a_real_daemon() -> Result<DriveTemplate> {
        let mut rig = Rig::start(&[]).await?;
        let mut last = String::new();
        for n in 0..3 {
            last = rig.drive(prompt(n)).await?.0;
        }
        let journal = rig.journal_dir();
        let _sandbox = rig.stop().await?;
        let mut started = None;
        let mut entries = Vec::new();
        for segment in segment_files(&journal)? {
            for line in std::fs::read_to_string(&segment)?.lines() {
                let Value::Object(mut entry) = serde_json::from_str(line)? else {
                    bail!("a journal line is not an object");
                };
                let kind = entry["kind"].as_str().unwrap_or_default().to_string();
                let at_ms = entry["at_ms"].as_u64().unwrap_or_default();
                let by = entry.get("by").map(asker).transpose()?;
                for field in CHAIN_FIELDS {
                    entry.remove(field);
                }
                if kind == KIND_DAEMON_STARTED {
                    started = Some((entry, by.context("daemon_started names no `by`")?));
                } else if entry.get("drive_id").and_then(Value::as_str) == Some(last.as_str()) {
                    entries.push(TemplateEntry {
                        kind,
                        at_ms,
                        fields: entry,
                        by,
                    });
                }
            }
        }
        ensure!(
            entries.first().is_some_and(|e| e.kind == "drive_accepted"),
            "the template drive's entries do not start with drive_accepted: {:?}",
            entries.iter().map(|e| &e.kind).collect::<Vec<_>>()
        );
        let (started, daemon) = started.context("the journal has no daemon_started entry")?;
        Ok(DriveTemplate {
            started,
            daemon,
            entries,
            drive_id: last,
        })
    }

    /// Writes drives like the template's through [`Journal`] (one a second, each with its
    /// own id and prompt) until the journal holds at least `entries`; returns how many
    /// it holds.
    fn write_journal(&self, dir: &Path, index: &Path, entries: u64) -> Result<u64> {
        let mut config = JournalConfig::new(dir.to_path_buf());
        config.retain = Retention {
            max_age: None,
            max_bytes: None,
        };
        config.sealer = Sealer::Sha256;
        config.index_path = index.to_path_buf();
        let first_at = now_ms() - entries / self.entries.len() as u64 * 1_000;
        let mut journal = Journal::open(config, first_at, &self.daemon, self.started.clone())
            .context("cannot open the journal")?
            .journal;
        let accepted_at = self.entries[0].at_ms;
        let mut seq = 0;
        let mut n = 0;
        while seq < entries {
            let drive_id = format!(
                "d_{:012x}",
                (n as u64).wrapping_mul(0x9e37_79b9_7f4b) & 0xffff_ffff_ffff
            );
            // Wrapping: the template may be newer than the first drive's time (a smoke run's
            // short journal starts a few seconds back); the sums below wrap back.
            let shift = (first_at + n as u64 * 1_000).wrapping_sub(accepted_at);
            let text = prompt(n);
            for TemplateEntry {
                kind,
                at_ms,
                fields,
                by,
            } in &self.entries
            {
                let mut fields = Value::Object(fields.clone());
                renamed_and_shifted(&mut fields, &self.drive_id, &drive_id, shift);
                let Value::Object(mut fields) = fields else {
                    unreachable!("an object stays an object")
                };
                let excerpt = if kind == "drive_accepted" {
                    fields.insert("prompt".into(), journal.store_prompt(&text)?);
                    Some(prompt_excerpt(&text))
                } else {
                    None
                };
                seq = journal.append(
                    at_ms.wrapping_add(shift),
                    kind,
                    &fields,
                    by.as_ref(),
                    excerpt,
                )?;
                // The daemon writes at the end of each event, and each entry of a drive
                // comes from an event of its own.
                journal.flush()?;
            }
            n += 1;
        }
        journal.close();
        Ok(seq)
    }
}

/// An `Asker` as an entry's `by` has it.
fn asker(by: &Value) -> Result<Asker> {
    let text = |key: &str| by[key].as_str().unwrap_or_default().to_string();
    Ok(Asker {
        door: text("door"),
        client: text("client"),
        version: text("version"),
        pid: by["pid"].as_u64().map(|p| p as u32),
        uid: by["uid"].as_u64().context("`by` has no uid")? as u32,
    })
}

/// Replaces the string `from` by `to` everywhere in `value`, and moves every time (a
/// `…at_ms` field) by `shift`.
fn renamed_and_shifted(value: &mut Value, from: &str, to: &str, shift: u64) {
    match value {
        Value::String(text) if text == from => *text = to.to_string(),
        Value::Array(items) => {
            for item in items {
                renamed_and_shifted(item, from, to, shift);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item.as_u64() {
                    Some(at) if key.ends_with("at_ms") => {
                        *item = Value::from(at.wrapping_add(shift))
                    }
                    _ => renamed_and_shifted(item, from, to, shift),
                }
            }
        }
        _ => {}
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs `koru verify DIR --json`, which must find the journal intact (with `entries` when
/// given).
fn timed_verify(sandbox: &Sandbox, dir: &Path, entries: Option<u64>) -> Result<VerifyRun> {
    let mut command = sandbox.koru();
    command.arg("verify").arg(dir).arg("--json");
    let koru_system_tests::measure::MeasuredRun {
        output,
        wall,
        peak_rss,
    } = koru_system_tests::measure::run_measured(command).context("koru verify")?;
    let report: Value = serde_json::from_slice(&output.stdout).context("koru verify --json")?;
    let checked = report["entries"].as_u64().unwrap_or(0);
    ensure!(
        report["verdict"] == "intact" && entries.is_none_or(|e| e == checked),
        "koru verify did not find {entries:?} intact entries: {report}"
    );
    Ok(VerifyRun {
        wall,
        peak_rss,
        entries: checked,
        blobs_present: report["blobs"]["present"].as_u64().unwrap_or(0),
    })
}

/// Asks the kernel to drop every file under `dir` from the page cache (they were synced
/// when the journal closed, so they are clean), so the next read comes from the disk.
fn evict_from_page_cache(dir: &Path) -> Result<()> {
    use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            evict_from_page_cache(&path)?;
        } else {
            let file = std::fs::File::open(&path)?;
            posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED)
                .with_context(|| format!("posix_fadvise {}", path.display()))?;
        }
    }
    Ok(())
}

impl VerifyReport {
    fn print(&self) {
        println!(
            "## `koru verify` on a journal of {} entries\n",
            self.written
        );
        println!(
            "Written through the journal's writer ({} drives like a real daemon's, {} segments, {} + {} of prompt blobs): {:.1} s, {:.0} entries/s including the index.\n",
            self.bytes.drives,
            self.bytes.segments,
            megabytes(self.bytes.segment_bytes()),
            megabytes(self.bytes.blob_bytes),
            self.writing.as_secs_f64(),
            self.written as f64 / self.writing.as_secs_f64()
        );
        println!(
            "| page cache | wall time | entries/s | prompt blobs checked | peak RSS (VmHWM) |"
        );
        println!("|---|---:|---:|---:|---:|");
        for (label, run) in [
            ("warm (just written)", &self.warm),
            ("cold (files evicted)", &self.cold),
        ] {
            println!(
                "| {label} | {:.2} s | {:.0} | {} | {} |",
                run.wall.as_secs_f64(),
                run.rate(),
                run.blobs_present,
                megabytes(run.peak_rss)
            );
        }
        println!();
    }
}

// ---------------------------------------------------------------------------------------
// 4: history stays flat: 100,000 drives, then drive.get of the oldest and the newest.

struct HistoryReport {
    drives: usize,
    flood: Duration,
    first_tenth: Stats,
    last_tenth: Stats,
    /// (drives done, VmRSS) during the flood.
    rss: Vec<(usize, u64)>,
    /// `drive.get` of drive #1, #100, #N on the daemon that ran the flood, and after a
    /// restart on the same journal.
    live_gets: [Stats; 3],
    restarted_gets: [Stats; 3],
    /// `drives.list` with `history`: the 100 drives before #101, and before #N.
    oldest_page: Stats,
    newest_page: Stats,
    bytes: JournalBytes,
    restart: Duration,
    /// SIGTERM → exit of the daemon that ran the flood (the journal closed and synced).
    stop: Duration,
    rebuild: Duration,
    verify: VerifyRun,
    /// The same flood on a daemon with `--no-journal`.
    rss_without_journal: Vec<(usize, u64)>,
    pace: Duration,
    flood_without_journal: Duration,
}

/// What one flood did: each drive's id and round trip, and the daemon's RSS as it went.
struct Flood {
    ids: Vec<String>,
    times: Vec<Duration>,
    /// (drives done, VmRSS).
    rss: Vec<(usize, u64)>,
    elapsed: Duration,
}

impl Rig {
    /// Drives `total` prompts one after the other, each starting at least `pace` after the
    /// one before, sampling the daemon's RSS 20 times (and once the in-memory window of
    /// 1,000 ended drives is full).
    async fn flood(&mut self, total: usize, pace: Duration) -> Result<Flood> {
        let pid = self.daemon.pid();
        let every = (total / 20).max(1);
        let mut flood = Flood {
            ids: Vec::with_capacity(total),
            times: Vec::with_capacity(total),
            rss: vec![(0, status_field(pid, "VmRSS:")?)],
            elapsed: Duration::ZERO,
        };
        let started = Instant::now();
        for n in 1..=total {
            let next = tokio::time::Instant::now() + pace;
            let (id, _, done) = self.drive(prompt(n)).await?;
            // Not even a zero sleep unpaced: tokio would wait for its next millisecond.
            if !pace.is_zero() {
                tokio::time::sleep_until(next).await;
            }
            flood.ids.push(id);
            flood.times.push(done);
            if n % every == 0 || n == 1_000 {
                flood.rss.push((n, status_field(pid, "VmRSS:")?));
            }
        }
        flood.elapsed = started.elapsed();
        Ok(flood)
    }
}

/// Starts `koru daemon` again in `sandbox` and returns it with how long it took until a
/// controller's `status` was answered (the journal is opened after the socket is bound).
async fn restart(sandbox: &Sandbox) -> Result<(Daemon, Duration)> {
    let began = Instant::now();
    let daemon = start_daemon(sandbox, &[]);
    let mut controller = Client::connect(&sandbox.socket(), controller_hello("koru-bench")).await?;
    let status = controller.status().await?;
    let took = began.elapsed();
    ensure!(
        status.journal.is_some(),
        "the restarted daemon keeps no journal"
    );
    controller.close().await;
    Ok((daemon, took))
}

async fn history_flood(scale: &Scale) -> Result<HistoryReport> {
    let total = scale.history_drives.max(101);
    // The same flood with the journal off first: what RSS does without it.
    let mut rig = Rig::start(&["--no-journal"]).await?;
    let without_journal = rig.flood(total, scale.history_pace).await?;
    rig.stop().await?;

    let mut rig = Rig::start(&[]).await?;
    let Flood {
        ids,
        times,
        rss,
        elapsed: flood,
    } = rig.flood(total, scale.history_pace).await?;
    let tenth = total / 10;
    let first_tenth = Stats::of(times[..tenth].to_vec());
    let last_tenth = Stats::of(times[total - tenth..].to_vec());
    // The index is written behind the event loop; let it catch up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let probes = [ids[0].clone(), ids[99].clone(), ids[total - 1].clone()];
    let live_gets = timed_gets(&mut rig.controller, &probes, scale.get_rounds).await?;
    let page = |before: &str| DrivesList {
        history: true,
        before: Some(before.to_string()),
        limit: Some(100),
        ..DrivesList::default()
    };
    let pages = [page(&ids[100]), page(&ids[total - 1])];
    let [oldest_page, newest_page] =
        timed_lists(&mut rig.controller, &pages, (scale.get_rounds / 10).max(5)).await?;

    let (journal, index) = (rig.journal_dir(), rig.index_dir());
    let (sandbox, stop_time) = rig.stop().await?;
    let bytes = JournalBytes::measure(&journal, &index)?;

    // Restarted on the same journal: nothing in memory, every drive from the index.
    let (mut daemon, restart_time) = restart(&sandbox).await?;
    let mut controller = subscribed_controller(&sandbox.socket()).await?;
    let restarted_gets = timed_gets(&mut controller, &probes, scale.get_rounds).await?;
    controller.close().await;
    daemon.terminate(Duration::from_secs(10));

    // Restarted without its index: rebuilt from the journal.
    std::fs::remove_dir_all(&index).context("cannot remove the drive index")?;
    let (mut daemon, rebuild) = restart(&sandbox).await?;
    let mut controller = subscribed_controller(&sandbox.socket()).await?;
    let oldest = controller.get_drive(probes[0].clone()).await?;
    ensure!(
        oldest.state == DriveState::Done,
        "drive #1 after the rebuild: {oldest:?}"
    );
    controller.close().await;
    daemon.terminate(Duration::from_secs(10));

    let verify = timed_verify(&sandbox, &journal, None)?;
    Ok(HistoryReport {
        drives: total,
        flood,
        first_tenth,
        last_tenth,
        rss,
        live_gets,
        restarted_gets,
        oldest_page,
        newest_page,
        bytes,
        restart: restart_time,
        stop: stop_time,
        rebuild,
        verify,
        rss_without_journal: without_journal.rss,
        pace: scale.history_pace,
        flood_without_journal: without_journal.elapsed,
    })
}

/// Times `call` on each of `items` in turn, `rounds` times after a tenth as many warm-up
/// rounds.
async fn timed_in_turn<T, const N: usize>(
    items: &[T; N],
    rounds: usize,
    mut call: impl AsyncFnMut(&T) -> Result<()>,
) -> Result<[Stats; N]> {
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::new());
    for round in 0..rounds + rounds / 10 {
        for (k, item) in items.iter().enumerate() {
            let started = Instant::now();
            call(item).await?;
            if round >= rounds / 10 {
                samples[k].push(started.elapsed());
            }
        }
    }
    Ok(samples.map(Stats::of))
}

/// `drive.get` of each of `ids` in turn.
async fn timed_gets(
    controller: &mut Client,
    ids: &[String; 3],
    rounds: usize,
) -> Result<[Stats; 3]> {
    timed_in_turn(ids, rounds, async |id: &String| {
        let drive = controller.get_drive(id.clone()).await?;
        ensure!(
            &drive.drive_id == id,
            "drive.get {id} answered {}",
            drive.drive_id
        );
        Ok(())
    })
    .await
}

/// `drives.list` of each of `lists` in turn; each page must be full.
async fn timed_lists(
    controller: &mut Client,
    lists: &[DrivesList; 2],
    rounds: usize,
) -> Result<[Stats; 2]> {
    timed_in_turn(lists, rounds, async |list: &DrivesList| {
        let page = controller.drives(list.clone()).await?;
        ensure!(
            page.drives.len() == 100,
            "a history page held {} drives",
            page.drives.len()
        );
        Ok(())
    })
    .await
}

impl HistoryReport {
    fn print(&self, scale: &Scale) {
        let n = self.drives;
        println!("## History: {n} drives through one daemon\n");
        if !self.pace.is_zero() {
            println!(
                "Paced: each drive started at least {} after the one before.\n",
                micros(self.pace)
            );
        }
        println!(
            "Flood: {n} drives one after the other in {:.1} s ({:.0} drives/s); round trip p50 / p99 {} / {} over the first {} drives, {} / {} over the last {}.\n",
            self.flood.as_secs_f64(),
            n as f64 / self.flood.as_secs_f64(),
            micros(self.first_tenth.p50),
            micros(self.first_tenth.p99),
            n / 10,
            micros(self.last_tenth.p50),
            micros(self.last_tenth.p99),
            n / 10
        );
        println!(
            "The same flood with `--no-journal`: {:.1} s ({:.0} drives/s).\n",
            self.flood_without_journal.as_secs_f64(),
            n as f64 / self.flood_without_journal.as_secs_f64()
        );
        println!("| drives done | daemon VmRSS, journal on | journal off |");
        println!("|---:|---:|---:|");
        for ((done, rss), (_, off)) in self.rss.iter().zip(&self.rss_without_journal) {
            println!("| {done} | {} | {} |", megabytes(*rss), megabytes(*off));
        }
        for (label, samples) in [
            ("journal on", &self.rss),
            ("journal off", &self.rss_without_journal),
        ] {
            let after_window: Vec<u64> = samples
                .iter()
                .filter(|(d, _)| *d >= 1_000)
                .map(|s| s.1)
                .collect();
            if let (Some(first), Some(last)) = (after_window.first(), after_window.last()) {
                println!(
                    "\n{label}: from the 1,000th drive (the in-memory window full) to the last, {} → {} ({:+.1} MB).",
                    megabytes(*first),
                    megabytes(*last),
                    (*last as f64 - *first as f64) / 1e6
                );
            }
        }
        println!();
        println!(
            "`drive.get`, {} rounds over the three drives in turn:\n",
            scale.get_rounds
        );
        println!("| daemon | drive | answered from | p50 | p99 | mean |");
        println!("|---|---|---|---:|---:|---:|");
        let names = [
            "#1 (oldest)".to_string(),
            "#100".to_string(),
            format!("#{n} (newest)"),
        ];
        for (daemon, gets) in [
            ("after the flood", &self.live_gets),
            ("restarted on the journal", &self.restarted_gets),
        ] {
            for (k, stats) in gets.iter().enumerate() {
                let from = if daemon == "after the flood" && k == 2 {
                    "memory"
                } else {
                    "drive index"
                };
                println!(
                    "| {daemon} | {} | {from} | {} | {} | {} |",
                    names[k],
                    micros(stats.p50),
                    micros(stats.p99),
                    micros(stats.mean)
                );
            }
        }
        let ratio =
            self.restarted_gets[2].p50.as_secs_f64() / self.restarted_gets[1].p50.as_secs_f64();
        println!(
            "\nTarget: `drive.get` of drive #{n} within 10 % of drive #100 (both from the index, restarted daemon): {:.3}× — {}\n",
            ratio,
            if ratio <= MAX_NEWEST_OVER_OLD { "met" } else { "**MISSED**" }
        );
        println!("| `drives.list` with `history`, 100 drives | p50 | p99 |");
        println!("|---|---:|---:|");
        for (label, stats) in [
            ("the oldest page (before #101)", &self.oldest_page),
            (
                "the newest page on disk (before the last drive)",
                &self.newest_page,
            ),
        ] {
            println!(
                "| {label} | {} | {} |",
                micros(stats.p50),
                micros(stats.p99)
            );
        }
        println!(
            "\nStop after the flood, from SIGTERM to exit (the journal synced and closed): {:.0} ms. Restart on this journal, from starting the process to a `status` answered: {:.0} ms with the index, {:.0} ms rebuilding the index from the journal.\n",
            self.stop.as_secs_f64() * 1e3,
            self.restart.as_secs_f64() * 1e3,
            self.rebuild.as_secs_f64() * 1e3
        );
        println!(
            "`koru verify` of this journal ({} entries written by the daemon, page cache warm): {:.2} s, {:.0} entries/s, peak RSS {}.\n",
            self.verify.entries,
            self.verify.wall.as_secs_f64(),
            self.verify.rate(),
            megabytes(self.verify.peak_rss)
        );
        println!("Journal after the flood:\n");
        self.bytes.print();
    }
}

//! The chat's evidence of each drive, on and off (issue 43's figures): two release daemons side by side, one as shipped (every drive's chat read back for its evidence, `drive_prompt_recorded` and `drive_outcome_recorded` journaled) and one with `--no-drive-evidence`, each with a fake VS Code window that writes its chat as Claude Code writes a session log; drives sent in turns with `koru send --wait-reply`, first on a fresh chat, then with 10 MB of earlier history in the same log. Per drive: the round trip the user waits for, the daemon's CPU (every thread), the journal's bytes, and for the daemon that records evidence the time from `drive_accepted` to `drive_outcome_recorded`. `cargo bench -p koru-system-tests --bench evidence`; without `--bench` a smoke run with small counts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use koru_system_tests::measure::{megabytes, Stats};
use koru_system_tests::{chain_entries, stdout_json, Daemon, Plugin, Sandbox};
use serde_json::Value;

/// One daemon under test, with its window.
struct Rig {
    label: &'static str,
    sandbox: Sandbox,
    daemon: Daemon,
    _plugin: Plugin,
    workspace: PathBuf,
    /// Its chat's session log, once the first drive made it.
    log: Option<PathBuf>,
    round_trips: Vec<Duration>,
    drive_ids: Vec<String>,
}

/// What one phase gave for one daemon.
struct Phase {
    label: &'static str,
    history: &'static str,
    round_trip: Stats,
    cpu_per_drive: Duration,
    journal_bytes_per_drive: f64,
    /// `drive_accepted` → `drive_outcome_recorded`, for the drives that have one.
    to_evidence: Option<Stats>,
    evidence_entries: usize,
}

fn main() -> Result<()> {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    if !measuring {
        println!(
            "_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n"
        );
    }
    let drives = if measuring { 100 } else { 4 };
    let history_bytes: u64 = if measuring { 10 << 20 } else { 1 << 20 };
    koru_system_tests::koru_bin();
    let mut rigs = vec![
        Rig::start("evidence on (as shipped)", &[])?,
        Rig::start("--no-drive-evidence", &["--no-drive-evidence"])?,
    ];
    // One drive each makes the chat's log.
    for rig in &mut rigs {
        rig.send("warm-up")?;
        rig.log = Some(session_log(&rig.sandbox, &rig.workspace)?);
    }
    let mut phases = Vec::new();
    for (history, grow) in [("fresh chat", 0), ("+10 MB of history", history_bytes)] {
        let history = if grow == 0 || measuring {
            history
        } else {
            "+1 MB of history"
        };
        if grow > 0 {
            for rig in &rigs {
                add_history(rig.log.as_ref().expect("the log"), grow)?;
            }
            // The observers read what was added before the timed drives.
            std::thread::sleep(Duration::from_secs(2));
        }
        let mut before = Vec::new();
        for rig in &mut rigs {
            rig.round_trips.clear();
            rig.drive_ids.clear();
            before.push((rig.cpu()?, rig.journal_bytes()));
        }
        for i in 0..drives {
            // Turns, who goes first rotating.
            for k in 0..rigs.len() {
                let at = (i + k) % rigs.len();
                rigs[at].send(&format!("drive {i}: explain the parser"))?;
            }
        }
        for (rig, (cpu, bytes)) in rigs.iter().zip(before) {
            let evidence = rig.wait_for_evidence(drives)?;
            phases.push(Phase {
                label: rig.label,
                history,
                round_trip: Stats::of(rig.round_trips.clone()),
                cpu_per_drive: rig.cpu()?.saturating_sub(cpu) / drives as u32,
                journal_bytes_per_drive: (rig.journal_bytes() - bytes) as f64 / drives as f64,
                to_evidence: (!evidence.is_empty()).then(|| Stats::of(evidence.clone())),
                evidence_entries: evidence.len(),
            });
        }
    }
    println!(
        "## Drives with the chat's evidence, on and off ({drives} drives each, release build)\n"
    );
    println!("| daemon | chat | `send --wait-reply` p50 (p99) | daemon CPU per drive | journal bytes per drive | accepted → outcome on record p50 (max) |");
    println!("|---|---|---:|---:|---:|---:|");
    for phase in &phases {
        println!(
            "| {} | {} | {:.1} ms ({:.1} ms) | {:.2} ms | {:.0} | {} |",
            phase.label,
            phase.history,
            phase.round_trip.p50.as_secs_f64() * 1e3,
            phase.round_trip.p99.as_secs_f64() * 1e3,
            phase.cpu_per_drive.as_secs_f64() * 1e3,
            phase.journal_bytes_per_drive,
            match &phase.to_evidence {
                Some(stats) => format!(
                    "{:.1} ms ({:.1} ms), {} drives",
                    stats.p50.as_secs_f64() * 1e3,
                    stats.max.as_secs_f64() * 1e3,
                    phase.evidence_entries
                ),
                None => "—".into(),
            }
        );
    }
    for rig in &rigs {
        if let Some(log) = &rig.log {
            println!(
                "\n{}: the chat's log ended at {}",
                rig.label,
                megabytes(std::fs::metadata(log)?.len())
            );
        }
    }
    Ok(())
}

impl Rig {
    fn start(label: &'static str, args: &[&str]) -> Result<Rig> {
        let sandbox = Sandbox::new();
        let mut all = vec!["--heartbeat-ms", "60000"];
        all.extend_from_slice(args);
        let daemon = sandbox.start_daemon_with_env(&all, &[("RUST_LOG", "info")]);
        let workspace = sandbox.workspace("evidence");
        let project = sandbox.claude_project_dir(&workspace);
        let plugin = sandbox.start_fake_plugin(&[
            "--workspace",
            workspace.to_str().context("a UTF-8 path")?,
            "--claude-store",
            project.to_str().context("a UTF-8 path")?,
            "--reply-delay-ms",
            "0",
        ]);
        Ok(Rig {
            label,
            sandbox,
            daemon,
            _plugin: plugin,
            workspace,
            log: None,
            round_trips: Vec::new(),
            drive_ids: Vec::new(),
        })
    }

    /// `koru send --wait-reply`, timed.
    fn send(&mut self, prompt: &str) -> Result<()> {
        let started = Instant::now();
        let output = self.sandbox.run(&[
            "send",
            "--workspace",
            self.workspace.to_str().context("a UTF-8 path")?,
            "--wait-reply",
            "--json",
            "--timeout",
            "30",
            prompt,
        ]);
        let took = started.elapsed();
        ensure!(
            output.status.success(),
            "{}: koru send failed: {}",
            self.label,
            String::from_utf8_lossy(&output.stderr)
        );
        let drive = stdout_json(&output);
        self.round_trips.push(took);
        self.drive_ids
            .push(drive["drive_id"].as_str().unwrap_or_default().to_string());
        Ok(())
    }

    /// The daemon's CPU so far (every thread, user + system).
    fn cpu(&self) -> Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.daemon.pid()))?;
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .context("a /proc stat line")?
            .1
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)?.unwrap_or(100) as u64;
        Ok(Duration::from_millis(ticks * 1000 / hz))
    }

    fn journal_dir(&self) -> PathBuf {
        self.sandbox.path().join("state/koru/journal")
    }

    /// The bytes of the journal's entries (its segments' lines, not the room a segment
    /// keeps ahead) and of its text blobs.
    fn journal_bytes(&self) -> u64 {
        let dir = self.journal_dir();
        let lines: u64 = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "ndjson"))
            .filter_map(|path| std::fs::read(path).ok())
            .map(|bytes| bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len()) as u64)
            .sum();
        let blobs: u64 = koru_system_tests::files_under(&dir.join("blobs/sha256"))
            .iter()
            .filter_map(|file| std::fs::metadata(file).ok())
            .map(|meta| meta.len())
            .sum();
        lines + blobs
    }

    /// For each of the last drives sent, `drive_accepted` → `drive_outcome_recorded` (waits
    /// until every one has it, when this daemon records evidence).
    fn wait_for_evidence(&self, drives: usize) -> Result<Vec<Duration>> {
        let wanted: Vec<&String> = self.drive_ids.iter().rev().take(drives).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let entries = chain_entries(&self.journal_dir());
            let at = |kind: &str, id: &str| {
                entries
                    .iter()
                    .find(|e| e["kind"] == kind && e["drive_id"] == id)
                    .and_then(|e| e["at_ms"].as_u64())
            };
            let found: Vec<Duration> = wanted
                .iter()
                .filter_map(|id| {
                    let accepted = at("drive_accepted", id)?;
                    let recorded = at("drive_outcome_recorded", id)?;
                    Some(Duration::from_millis(recorded.saturating_sub(accepted)))
                })
                .collect();
            let records = entries
                .iter()
                .any(|e: &Value| e["kind"] == "drive_prompt_recorded");
            if !records || found.len() == wanted.len() {
                return Ok(found);
            }
            ensure!(
                Instant::now() < deadline,
                "{}: {} of {} drives got their outcome on record",
                self.label,
                found.len(),
                wanted.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The chat's session log the window writes (the only `.jsonl` under the project folder).
fn session_log(sandbox: &Sandbox, workspace: &Path) -> Result<PathBuf> {
    let dir = sandbox.claude_project_dir(workspace);
    std::fs::read_dir(&dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .with_context(|| format!("no session log in {}", dir.display()))
}

/// Appends about `bytes` of earlier turns (the corpus' real transcripts, ids made their
/// own) to the chat's log.
fn add_history(log: &Path, bytes: u64) -> Result<()> {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/claude_code");
    let text = std::fs::read_to_string(corpus.join("cb947e5b-246e-4253-a953-631f7e464c6b.jsonl"))?;
    let mut file = std::fs::OpenOptions::new().append(true).open(log)?;
    let mut written = 0u64;
    let mut round = 0u64;
    while written < bytes {
        let round_text = text
            .replace("\"msg_", &format!("\"msg_h{round}_"))
            .replace("\"uuid\":\"", &format!("\"uuid\":\"h{round}-"))
            .replace("\"parentUuid\":\"", &format!("\"parentUuid\":\"h{round}-"));
        file.write_all(round_text.as_bytes())?;
        if !round_text.ends_with('\n') {
            file.write_all(b"\n")?;
        }
        written += round_text.len() as u64;
        round += 1;
    }
    Ok(())
}

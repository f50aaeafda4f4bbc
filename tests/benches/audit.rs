//! `koru audit` of large transcripts (issue 43's figures): a Claude Code session log of 10 MB and of 100 MB, made of the real transcripts in tests/corpus repeated with fresh ids, audited into a ledger by the release binary (`--source FILE --store ID`, no daemon); then the log grown by about 1 % and audited again (the ledger extended), and the ledger checked with `koru verify`. Per run: wall time, CPU (user + system) and peak RSS (`VmHWM`, polled every 2 ms). `cargo bench -p koru-system-tests --bench audit`; without `--bench` a smoke run on 1 MB.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use koru_system_tests::measure::{megabytes, run_measured, MeasuredRun};
use koru_system_tests::Sandbox;
use serde_json::Value;

const STORE: &str = "chat_history_claude_code_jsonl";

/// The corpus transcripts the log is made of, in turn.
const SOURCES: [&str; 3] = [
    "cb947e5b-246e-4253-a953-631f7e464c6b.jsonl",
    "ba79134d-b6e9-4867-af0c-6941038c9e4b.jsonl",
    "tool_heavy.jsonl",
];

/// One `koru` run: how long, how much CPU, how much memory at most.
struct Run {
    wall: Duration,
    cpu: Duration,
    peak_rss: u64,
    output: Value,
}

/// What one size gave.
struct Case {
    bytes: u64,
    lines: u64,
    first: Run,
    grown_by: u64,
    again: Run,
    verify: Run,
}

fn main() -> Result<()> {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    if !measuring {
        println!(
            "_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n"
        );
    }
    let sizes: &[u64] = if measuring {
        &[10 << 20, 100 << 20]
    } else {
        &[1 << 20]
    };
    // Built (when it is not yet) before anything is timed.
    koru_system_tests::koru_bin();
    let sandbox = Sandbox::new();
    let mut cases = Vec::new();
    for &size in sizes {
        cases.push(one_size(&sandbox, size)?);
    }
    println!("## `koru audit` of a large Claude Code transcript (release build)\n");
    println!(
        "| transcript | run | items in the ledger | wall time | CPU (user + sys) | peak RSS |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for case in &cases {
        let size = format!("{} ({} lines)", megabytes(case.bytes), case.lines);
        let items = |run: &Run| run.output["items_total"].as_u64().unwrap_or(0);
        for (what, run) in [
            ("first audit (everything imported)".to_string(), &case.first),
            (
                format!("audit again after {} more", megabytes(case.grown_by)),
                &case.again,
            ),
        ] {
            println!(
                "| {size} | {what} | {} | {:.2} s | {:.2} s | {} |",
                items(run),
                run.wall.as_secs_f64(),
                run.cpu.as_secs_f64(),
                megabytes(run.peak_rss)
            );
        }
        println!(
            "| {size} | `koru verify` of the ledger ({} entries) | | {:.2} s | {:.2} s | {} |",
            case.verify.output["entries"].as_u64().unwrap_or(0),
            case.verify.wall.as_secs_f64(),
            case.verify.cpu.as_secs_f64(),
            megabytes(case.verify.peak_rss)
        );
    }
    Ok(())
}

/// Writes a transcript of about `size` bytes, audits it, grows it by ~1 %, audits it again
/// and verifies the ledger.
fn one_size(sandbox: &Sandbox, size: u64) -> Result<Case> {
    let dir = sandbox.path().join(format!("audit-{size}"));
    std::fs::create_dir_all(&dir)?;
    let log = dir.join("7a1f3e5c-0000-4000-8000-000000000000.jsonl");
    let ledger = dir.join("ledger");
    let mut round = 0;
    let lines = append_rounds(&log, &mut round, size)?;
    let bytes = std::fs::metadata(&log)?.len();
    let first = audit(sandbox, &log, &ledger)?;
    ensure!(
        first.output["opened"] == true && first.output["finding"].is_null(),
        "the first audit did not open a clean ledger: {}",
        first.output
    );
    append_rounds(&log, &mut round, bytes + bytes / 100)?;
    let grown_by = std::fs::metadata(&log)?.len() - bytes;
    let again = audit(sandbox, &log, &ledger)?;
    ensure!(
        again.output["opened"] == false
            && again.output["items_added"].as_u64() > Some(0)
            && again.output["finding"].is_null(),
        "the second audit did not extend the ledger: {}",
        again.output
    );
    let verify = timed(
        sandbox,
        &[OsArg::from("verify"), ledger.into(), "--json".into()],
    )?;
    ensure!(
        verify.output["verdict"] == "intact",
        "the ledger does not verify: {}",
        verify.output
    );
    Ok(Case {
        bytes,
        lines,
        first,
        grown_by,
        again,
        verify,
    })
}

type OsArg = std::ffi::OsString;

fn audit(sandbox: &Sandbox, log: &Path, ledger: &Path) -> Result<Run> {
    timed(
        sandbox,
        &[
            "audit".into(),
            "--source".into(),
            log.into(),
            "--store".into(),
            STORE.into(),
            "--out".into(),
            ledger.into(),
            "--json".into(),
        ],
    )
}

/// Appends rounds of the corpus transcripts (each round's ids made its own) to `log` until
/// it holds at least `until` bytes; the lines it now has.
fn append_rounds(log: &Path, round: &mut u64, until: u64) -> Result<u64> {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/claude_code");
    let texts: Vec<String> = SOURCES
        .iter()
        .map(|name| std::fs::read_to_string(corpus.join(name)))
        .collect::<std::io::Result<_>>()?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut size = file.metadata()?.len();
    while size < until {
        let text = &texts[*round as usize % texts.len()];
        // Fresh message and record ids per round: one long session, not the same records
        // again.
        let text = text
            .replace("\"msg_", &format!("\"msg_r{round}_"))
            .replace("\"uuid\":\"", &format!("\"uuid\":\"r{round}-"))
            .replace("\"parentUuid\":\"", &format!("\"parentUuid\":\"r{round}-"));
        file.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            file.write_all(b"\n")?;
        }
        size = file.metadata()?.len();
        *round += 1;
    }
    file.sync_all()?;
    let content = std::fs::read(log)?;
    Ok(content.iter().filter(|b| **b == b'\n').count() as u64)
}

/// Runs `koru ARGS` (which prints JSON), measuring it.
fn timed(sandbox: &Sandbox, args: &[OsArg]) -> Result<Run> {
    let before = children_cpu();
    let mut command = sandbox.koru();
    command.args(args);
    let MeasuredRun {
        output,
        wall,
        peak_rss,
    } = run_measured(command)?;
    let cpu = children_cpu().saturating_sub(before);
    let parsed: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "koru {args:?} printed no JSON: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok(Run {
        wall,
        cpu,
        peak_rss,
        output: parsed,
    })
}

/// User + system CPU of this process's waited-for children so far.
fn children_cpu() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|usage| {
            let time = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
            };
            time(usage.user_time()) + time(usage.system_time())
        })
        .unwrap_or_default()
}

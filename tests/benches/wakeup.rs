//! What a blocking wait costs on this machine, apart from any Koru code: two threads ping-pong a 64-byte message over a Unix socket pair, the answering one busy for a set time before it answers; per round trip, the wall time and the asking thread's on-CPU time (`/proc/thread-self/schedstat`), which is only its `write`, its `read` and being put to sleep and woken (`cargo bench -p koru-system-tests --bench wakeup`; `taskset -c 0 …` for both threads on one vCPU).
//!
//! The daemon's CPU per drive (issue 20) is charged the same way for each wait between a
//! peer's messages: this bench says how much of that figure is the machine's.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use koru_system_tests::measure::{micros, this_thread_on_cpu, Stats};

/// How long the answering thread is busy before it answers, in µs.
const THINK_MICROS: [u64; 7] = [0, 10, 20, 50, 100, 200, 500];
const MESSAGE: usize = 64;

struct Case {
    think: Duration,
    round_trip: Stats,
    /// The asking thread's on-CPU time per round trip.
    asker_on_cpu: Duration,
    /// The answering thread's on-CPU time per round trip, less its busy time.
    answerer_on_cpu_beyond_think: Duration,
}

fn main() -> Result<()> {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    if !measuring {
        println!(
            "_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n"
        );
    }
    let mut cases = Vec::new();
    for think in THINK_MICROS.map(Duration::from_micros) {
        // About a second of round trips each when measuring.
        let rounds = if measuring {
            (1_000_000 / (think.as_micros() as usize + 20)).clamp(2_000, 20_000)
        } else {
            50
        };
        cases.push(ping_pong(think, rounds)?);
    }
    println!(
        "## A blocking wait on this machine ({} vCPUs)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| answerer busy for | round trip p50 | asker on-CPU per round trip | answerer on-CPU per round trip beyond its busy time |");
    println!("|---:|---:|---:|---:|");
    for case in &cases {
        println!(
            "| {} | {} | {} | {} |",
            micros(case.think),
            micros(case.round_trip.p50),
            micros(case.asker_on_cpu),
            micros(case.answerer_on_cpu_beyond_think),
        );
    }
    Ok(())
}

/// `rounds` round trips (after a tenth as many not timed) with the answerer busy `think`.
fn ping_pong(think: Duration, rounds: usize) -> Result<Case> {
    let (mut asker, mut answerer) = UnixStream::pair().context("a socket pair")?;
    let warm_up = rounds / 10;
    let answering = std::thread::spawn(move || -> Result<Duration> {
        let mut message = [0u8; MESSAGE];
        let mut started = None;
        for n in 0..warm_up + rounds {
            if n == warm_up {
                started = Some(this_thread_on_cpu()?);
            }
            answerer.read_exact(&mut message)?;
            let busy_since = Instant::now();
            while busy_since.elapsed() < think {
                std::hint::spin_loop();
            }
            answerer.write_all(&message)?;
        }
        Ok(this_thread_on_cpu()? - started.unwrap_or_default())
    });
    let mut message = [7u8; MESSAGE];
    let mut samples = Vec::with_capacity(rounds);
    let mut cpu_started = Duration::ZERO;
    for n in 0..warm_up + rounds {
        if n == warm_up {
            cpu_started = this_thread_on_cpu()?;
        }
        let sent = Instant::now();
        asker.write_all(&message)?;
        asker.read_exact(&mut message)?;
        if n >= warm_up {
            samples.push(sent.elapsed());
        }
    }
    let asker_cpu = this_thread_on_cpu()? - cpu_started;
    let answerer_cpu = answering
        .join()
        .map_err(|_| anyhow::anyhow!("the answering thread panicked"))??;
    let per_round = |total: Duration| total / rounds as u32;
    Ok(Case {
        think,
        round_trip: Stats::of(samples),
        asker_on_cpu: per_round(asker_cpu),
        answerer_on_cpu_beyond_think: per_round(answerer_cpu).saturating_sub(think),
    })
}

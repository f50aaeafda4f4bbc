//! How long a drive into a real terminal agent takes until the agent's own record proves it submitted: per agent (Claude Code, Codex CLI, Gemini CLI, opencode from tests/agents, in a real tmux pane, against the local fake model server; opencode through its own server), `koru send --agent … --wait` timed end to end, split into typing (look, bracketed paste, the registry's settle delay, Enter) and proof (the agent's transcript or hook reaching the daemon), with and without Koru's hooks (`cargo bench -p koru-system-tests --bench agent_drives`; needs `npm ci --prefix tests/agents`).

use std::time::{Duration, Instant};

use koru_system_tests::agents::{agents_installed, drive_of, send, FakeModel, Tmux};
use koru_system_tests::measure::Stats;
use koru_system_tests::Sandbox;
use serde_json::Value;

/// The agents measured, and the settle delay their registry route waits between the paste
/// and Enter (registry/default.yaml, `terminal.settle_ms`); opencode is not typed into: the
/// prompt is posted to its server (started with `--port 0`), proven by its event stream.
const AGENTS: [(&str, u64); 4] = [
    ("claude-code", 200),
    ("codex", 200),
    ("gemini-cli", 300),
    ("opencode", 0),
];

struct Measured {
    total: Stats,
    typing: Stats,
    proof: Stats,
}

fn stage_at(drive: &Value, state: &str) -> Option<u64> {
    drive["history"]
        .as_array()?
        .iter()
        .find(|r| r["state"] == state)
        .and_then(|r| r["at_ms"].as_u64())
}

fn measure(agent: &str, hooks: bool, drives: usize) -> Measured {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let model = FakeModel::start(&sandbox);
    let folder = sandbox.workspace("repo");
    let tmux = Tmux::new(&sandbox);
    let server = agent == "opencode";
    let env: &[(&str, &str)] = if server {
        &[("OPENCODE_PORT", "0")]
    } else {
        &[]
    };
    let pane = tmux.start_agent_with(agent, &folder, &model, hooks, env);
    let evidence = if hooks {
        "agent_hook"
    } else {
        "agent_transcript"
    };
    let (mut total, mut typing, mut proof) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..drives {
        let prompt = format!("Benchmark prompt number {n}: answer in one line.");
        let started = Instant::now();
        let (ok, drive) = send(&sandbox, agent, &folder, &prompt, true);
        let elapsed = started.elapsed();
        assert!(
            ok && drive["submit_evidence"] == evidence,
            "{agent} drive {n}: {drive:#}\n{}",
            tmux.screen(&pane)
        );
        total.push(elapsed);
        let created = drive["created_at_ms"].as_u64().unwrap();
        let pasted = stage_at(&drive, "pasted").unwrap();
        let submitted = stage_at(&drive, "submitted").unwrap();
        typing.push(Duration::from_millis(pasted - created));
        proof.push(Duration::from_millis(submitted - pasted));
        // Measure an idle agent each time: wait for the reply before the next prompt.
        let drive_id = drive["drive_id"].as_str().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        while drive_of(&sandbox, &drive_id)["observation"]["stage"] != "replied" {
            assert!(
                Instant::now() < deadline,
                "{agent}: no reply to drive {n}\n{}",
                tmux.screen(&pane)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        model.prompts().len(),
        drives,
        "each prompt reached the model once"
    );
    Measured {
        total: Stats::of(total),
        typing: Stats::of(typing),
        proof: Stats::of(proof),
    }
}

fn main() {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    if !agents_installed() {
        return;
    }
    let drives = if measuring { 50 } else { 2 };
    if !measuring {
        println!(
            "_Smoke run with small counts (no `--bench` argument): figures are not meaningful._\n"
        );
    }
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    println!("| agent | proof | drives | send → submitted p50 | p99 | max | typing p50 (settle) | proof p50 | settle share of p50 |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (agent, settle_ms) in AGENTS {
        // opencode has no hooks of Koru's: its server's event stream is the proof.
        let proofs: &[bool] = if agent == "opencode" {
            &[false]
        } else {
            &[false, true]
        };
        for &hooks in proofs {
            let measured = measure(agent, hooks, drives);
            let share = settle_ms as f64 / (measured.total.p50.as_secs_f64() * 1000.0) * 100.0;
            println!(
                "| {agent} | {} | {} | {} | {} | {} | {} ({settle_ms} ms) | {} | {share:.0} % |",
                match (agent, hooks) {
                    ("opencode", _) => "server events",
                    (_, true) => "hook",
                    (_, false) => "transcript",
                },
                measured.total.count,
                ms(measured.total.p50),
                ms(measured.total.p99),
                ms(measured.total.max),
                ms(measured.typing.p50),
                ms(measured.proof.p50),
            );
        }
    }
}

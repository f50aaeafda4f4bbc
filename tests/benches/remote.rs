//! Benchmark: `koru send --wait` to another machine's daemon over a real loopback OpenSSH server — cold (each command its own ssh connection) and warm (the kept connection inside `koru mcp --host …`) — against the same on this machine's socket (`cargo bench -p koru-system-tests --bench remote`).
//!
//! Prints a Markdown table. Run without `--bench` (as `cargo test --benches` does) it makes a
//! quick smoke run with a few drives instead.

use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use koru_system_tests::sshd::Sshd;
use koru_system_tests::Sandbox;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::{object, ServiceExt};

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn row(name: &str, mut samples: Vec<Duration>) -> String {
    samples.sort();
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
    format!(
        "| {name} | {} | {} | {} | {} |",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.9)),
        ms(*samples.last().unwrap())
    )
}

/// Runs a command (`koru … send --wait`, `ssh … true`) to the end, failing unless it
/// succeeded (for `send --wait`: the drive ended `done`).
fn timed(mut command: std::process::Command) -> Result<Duration> {
    let start = Instant::now();
    let output: Output = command.output()?;
    let elapsed = start.elapsed();
    if !output.status.success() {
        bail!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(elapsed)
}

async fn mcp_send(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    target: &str,
) -> Result<Duration> {
    let call = CallToolRequestParams::new("send_prompt").with_arguments(object!({
        "target": target, "prompt": "bench", "wait": "submitted", "timeout_s": 10
    }));
    let start = Instant::now();
    let result = client.call_tool(call).await?;
    let elapsed = start.elapsed();
    if result.is_error == Some(true) {
        bail!("send_prompt failed: {:?}", result.content);
    }
    Ok(elapsed)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let (drives, warm_up) = if measuring { (100, 10) } else { (3, 1) };

    // This machine: a daemon and a VS Code window.
    let local = Sandbox::new();
    let _local_daemon = local.start_daemon(&["--no-observe"]);
    let here = local.workspace("here");
    let here = here.to_str().context("utf-8 path")?.to_string();
    let _local_plugin = local.start_fake_plugin(&["--product", "vscode", "--workspace", &here]);
    // The other machine: its own daemon and window, reached only through sshd.
    let remote = Sandbox::new();
    let _remote_daemon = remote.start_daemon(&["--no-observe"]);
    let there = remote.workspace("there");
    let there = there.to_str().context("utf-8 path")?.to_string();
    let _remote_plugin =
        remote.start_fake_plugin(&["--product", "vscodium", "--workspace", &there]);
    let sshd = Sshd::start(&remote);
    let url = sshd.url();

    let send_here = || {
        let mut command = local.koru();
        command.args(["send", "--workspace", &here, "--wait", "bench"]);
        command.env("RUST_LOG", "warn");
        command
    };
    let send_there = || {
        let mut command = local.koru();
        command.args(["--host", &url]).args(sshd.koru_args()).args([
            "send",
            "--workspace",
            &there,
            "--wait",
            "bench",
        ]);
        command.env("RUST_LOG", "warn");
        command
    };
    // OpenSSH's own connection sharing, set up the way a user would in ~/.ssh/config.
    let control = tempfile::Builder::new().prefix("koru-cm-").tempdir()?;
    let control_path = format!("ControlPath={}/%C", control.path().display());
    let send_shared = || {
        let mut command = local.koru();
        command
            .args(["--host", &url])
            // ssh takes the first value of an option: these go before koru's defaults.
            .args([
                "--ssh-option",
                "ControlMaster=auto",
                "--ssh-option",
                &control_path,
                "--ssh-option",
                "ControlPersist=120",
            ])
            .args(sshd.koru_args())
            .args(["send", "--workspace", &there, "--wait", "bench"]);
        command.env("RUST_LOG", "warn");
        command
    };
    let mut kept = tokio::process::Command::from(local.koru());
    kept.args(["--host", &url])
        .args(sshd.koru_args())
        .arg("mcp")
        .env("RUST_LOG", "warn");
    let warm = ().serve(TokioChildProcess::new(kept)?).await?;
    let mut here_mcp = tokio::process::Command::from(local.koru());
    here_mcp.arg("mcp").env("RUST_LOG", "warn");
    let here_mcp = ().serve(TokioChildProcess::new(here_mcp)?).await?;

    let mut cli_here = Vec::new();
    let mut cli_cold = Vec::new();
    let mut cli_shared = Vec::new();
    let mut mcp_warm = Vec::new();
    let mut mcp_here = Vec::new();
    let mut bare_ssh = Vec::new();
    // Interleaved, so that every path sees the same machine state.
    for i in 0..warm_up + drives {
        let times = (
            timed(send_here())?,
            timed(send_there())?,
            mcp_send(&warm, &there).await?,
            mcp_send(&here_mcp, &here).await?,
            timed(sshd.ssh("true"))?,
            timed(send_shared())?,
        );
        if i >= warm_up {
            cli_here.push(times.0);
            cli_cold.push(times.1);
            mcp_warm.push(times.2);
            mcp_here.push(times.3);
            bare_ssh.push(times.4);
            cli_shared.push(times.5);
        }
    }
    println!("| path | drives | p50 ms | p90 ms | max ms |");
    println!("|---|---|---|---|---|");
    println!(
        "{}",
        row("`koru send --wait`, this machine's socket", cli_here)
    );
    println!(
        "{}",
        row(
            "`koru --host ssh://… send --wait`, cold (a new ssh connection)",
            cli_cold
        )
    );
    println!(
        "{}",
        row(
            "the same with OpenSSH connection sharing (`ControlMaster=auto`, `ControlPersist`)",
            cli_shared
        )
    );
    println!(
        "{}",
        row(
            "`send_prompt` (wait submitted) in `koru mcp --host ssh://…`, warm (its kept connection)",
            mcp_warm
        )
    );
    println!(
        "{}",
        row(
            "`send_prompt` (wait submitted) in `koru mcp`, this machine's socket",
            mcp_here
        )
    );
    println!(
        "{}",
        row(
            "for reference: `ssh … true` to the same server (no koru)",
            bare_ssh
        )
    );
    warm.cancel().await?;
    here_mcp.cancel().await?;
    Ok(())
}

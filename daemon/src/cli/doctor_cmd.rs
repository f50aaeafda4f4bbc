//! `koru doctor [--json] [--only ID…] [--timeout MS]`: gathers facts, evaluates them against the registry (with each session's project layer), prints the report and exits 0, 1 or 2. With `--host` naming another machine it checks only what asks that machine's daemon (reached over ssh, its status and sessions): the other probes describe the machine they run on.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use koru_protocol::{SessionInfo, SessionsList, StatusInfo};

use super::DoctorArgs;
use crate::control::hosts::{Endpoint, Host, HostChoice};
use crate::doctor::{build_report, render::render};
use crate::registry::LayerPaths;

pub async fn run(
    choice: &HostChoice,
    args: DoctorArgs,
    layers: LayerPaths,
) -> anyhow::Result<ExitCode> {
    let host = super::commands::single_host(choice, "doctor")?;
    let timeout = Duration::from_millis(args.timeout.max(1));
    let Endpoint::Local { socket } = &host.endpoint else {
        return remote(&host, args.json, timeout).await;
    };
    let mut report = build_report(socket, &args.only, timeout, &layers).await?;
    if args.only.is_empty() {
        // What setup has wired here: read from this user's files and the tools' own CLIs.
        let koru = std::env::current_exe().unwrap_or_else(|_| "koru".into());
        if let Some(machine) = crate::setup::Machine::from_env(koru) {
            let sources = crate::setup::ide::Sources::new(None, None);
            report.wired =
                tokio::task::spawn_blocking(move || crate::setup::wired(&machine, &sources))
                    .await
                    .unwrap_or_default();
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::from(report.summary.exit_code))
}

/// What `koru --host NAME doctor` says about another machine's daemon.
#[derive(Debug, serde::Serialize)]
struct RemoteDaemonCheck {
    host: String,
    reachable: bool,
    /// Connecting (ssh, `koru dial-stdio` there, the handshake) and the two requests.
    elapsed_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusInfo>,
    sessions: Vec<SessionInfo>,
    note: String,
}

/// The daemon part of doctor for a host reached over ssh: exit 0 when its daemon answered,
/// 2 when it did not (doctor's "daemon down").
async fn remote(host: &Host, json: bool, timeout: Duration) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    // Reaching a machine over ssh takes longer than a socket: at least ten seconds.
    let limit = timeout.max(Duration::from_secs(10));
    let asked = tokio::time::timeout(limit, async {
        let mut client = super::commands::connect(host).await?;
        let status = client.status().await;
        let sessions = client.sessions(SessionsList::default()).await;
        client.close().await;
        anyhow::Ok((status?, sessions?.sessions))
    })
    .await;
    let mut check = RemoteDaemonCheck {
        host: host.name.clone(),
        reachable: false,
        elapsed_ms: started.elapsed().as_millis() as u64,
        error: None,
        status: None,
        sessions: Vec::new(),
        note: format!(
            "only the daemon was checked; for the machine's own probes (display, injectors, chat stores) run `koru doctor` on {}",
            host.name
        ),
    };
    match asked {
        Ok(Ok((status, sessions))) => {
            check.reachable = true;
            check.status = Some(status);
            check.sessions = sessions;
        }
        Ok(Err(error)) => check.error = Some(format!("{error:#}")),
        Err(_) => check.error = Some(format!("no answer within {} ms", limit.as_millis())),
    }
    if json {
        super::commands::print_json(&check)?;
    } else {
        match (&check.status, &check.error) {
            (Some(status), _) => {
                println!(
                    "host {}: daemon running (pid {}, koru {}) at {}, reached in {} ms; {} plugin session(s)",
                    check.host,
                    status.pid,
                    status.version,
                    status.socket,
                    check.elapsed_ms,
                    check.sessions.len()
                );
                for session in &check.sessions {
                    let product = session
                        .ide
                        .as_ref()
                        .map(|ide| ide.product.to_string())
                        .unwrap_or_default();
                    println!(
                        "  {} {product} {}",
                        session.session_id,
                        session.window.workspace_folders.join(", ")
                    );
                }
            }
            (None, error) => println!(
                "host {}: daemon NOT REACHED — {}",
                check.host,
                error.as_deref().unwrap_or("no answer")
            ),
        }
        println!("{}", check.note);
    }
    Ok(ExitCode::from(if check.reachable { 0 } else { 2 }))
}

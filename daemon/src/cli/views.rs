//! The listing commands — `koru status`, `koru sessions`, `koru drives` — for one host, or merged over several (`--host a --host b`): every host asked at once on its own connection, each row tagged with its host and its ids qualified `HOST/ID`, a host that did not answer reported by name and reason without hiding the others; the exit code is non-zero only when no host answered.

use std::process::ExitCode;

use koru_protocol::{
    DriveInfo, DrivesList, DrivesListResult, SessionInfo, SessionsList, StatusInfo,
    TerminalAgentInfo,
};

use super::commands::{connect, parse_since, print_json, proof_of};
use super::DrivesArgs;
use crate::clock::{Clock, SystemClock};
use crate::control::hosts::{
    qualify, qualify_drive, qualify_session, split_qualified, Host, HostChoice, HostOutcome,
};
use crate::control::{Client, ClientError, Exchange};
use crate::table::{age, render};

/// The exit status of a view over several hosts none of which answered (the same as a
/// single host that cannot be reached).
const EXIT_NO_HOST_ANSWERED: u8 = super::EXIT_NO_DAEMON;

/// Asks every host at once (one connection each, closed after) and returns each host's
/// answer in the order given.
async fn ask_each<T>(
    hosts: &[Host],
    exchange: impl for<'a> Fn(&'a mut Client) -> Exchange<'a, T>,
) -> Vec<Result<T, ClientError>> {
    let exchange = &exchange;
    futures::future::join_all(hosts.iter().map(|host| async move {
        let mut client = host.connect(super::commands::CLIENT_NAME).await?;
        let answer = exchange(&mut client).await;
        client.close().await;
        answer
    }))
    .await
}

/// Splits the answers into what each host gave and how each fared.
fn outcomes<T>(
    hosts: &[Host],
    answers: Vec<Result<T, ClientError>>,
) -> (Vec<(String, T)>, Vec<HostOutcome>) {
    let mut answered = Vec::new();
    let mut outcomes = Vec::new();
    for (host, answer) in hosts.iter().zip(answers) {
        match answer {
            Ok(value) => {
                outcomes.push(HostOutcome::answered(&host.name));
                answered.push((host.name.clone(), value));
            }
            Err(error) => outcomes.push(HostOutcome::failed(&host.name, &error)),
        }
    }
    (answered, outcomes)
}

/// The table's last lines: each host that did not answer, and why.
fn print_down(outcomes: &[HostOutcome]) {
    for outcome in outcomes.iter().filter(|o| !o.ok) {
        println!(
            "host {}: DOWN — {}",
            outcome.host,
            outcome.error.as_deref().unwrap_or("no answer")
        );
    }
}

/// Exit 0 when at least one host answered.
fn exit_of(outcomes: &[HostOutcome]) -> ExitCode {
    if outcomes.iter().any(|o| o.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NO_HOST_ANSWERED)
    }
}

pub async fn status(choice: &HostChoice, json: bool) -> anyhow::Result<ExitCode> {
    let hosts = choice.resolve()?;
    if let [host] = hosts.as_slice() {
        let mut client = connect(host).await?;
        let status = client.status().await;
        client.close().await;
        let status = status?;
        if json {
            print_json(&status)?;
        } else {
            print_status(&status);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let answers = ask_each(&hosts, |c| Box::pin(c.status())).await;
    let (answered, outcomes) = outcomes(&hosts, answers);
    if json {
        #[derive(serde::Serialize)]
        struct Merged<'a> {
            status: Vec<serde_json::Value>,
            hosts: &'a [HostOutcome],
        }
        let status = answered
            .iter()
            .map(|(host, status)| tagged(host, status))
            .collect::<anyhow::Result<_>>()?;
        print_json(&Merged {
            status,
            hosts: &outcomes,
        })?;
    } else {
        for (host, status) in &answered {
            println!("host {host}:");
            print_status(status);
        }
        print_down(&outcomes);
    }
    Ok(exit_of(&outcomes))
}

/// `value` as JSON with `"host": host` added.
fn tagged(host: &str, value: &impl serde::Serialize) -> anyhow::Result<serde_json::Value> {
    let mut value = serde_json::to_value(value)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("host".into(), host.into());
    }
    Ok(value)
}

fn print_status(status: &StatusInfo) {
    let now = SystemClock.now_ms();
    println!(
        "koru daemon {} (pid {}) serving {}, up {}",
        status.version,
        status.pid,
        status.socket,
        age(now, status.started_at_ms)
    );
    println!(
        "protocol v{}..v{}; {} plugin session(s), {} controller(s); drives: {} active, {} since start",
        status.protocol.min,
        status.protocol.max,
        status.plugins,
        status.controllers,
        status.drives_active,
        status.drives_total
    );
    if let Some(http) = &status.http {
        println!(
            "MCP over HTTP: {} (bearer token: {}, kept in {})",
            http.mcp_url, http.token, http.token_file
        );
    }
    match &status.journal {
        Some(journal) => {
            println!(
                "journal: {} ({} entries, prompts {}{}); head {}",
                journal.dir,
                journal.last_seq,
                journal.prompts,
                if journal.keyed { ", HMAC-keyed" } else { "" },
                journal.head
            );
            if let Some(error) = &journal.error {
                println!("journal problem: {error}");
            }
        }
        None => println!("journal: off (--no-journal); drives are kept in memory only"),
    }
}

/// A terminal agent as `koru sessions --json` lists it, after the plugin sessions: its
/// record with `"kind": "terminal_agent"` (plugin sessions carry no `kind`).
fn agent_json(agent: &TerminalAgentInfo, host: Option<&str>) -> anyhow::Result<serde_json::Value> {
    let mut value = serde_json::to_value(agent)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("kind".into(), "terminal_agent".into());
        if let Some(host) = host {
            object.insert("host".into(), host.into());
        }
    }
    Ok(value)
}

/// Plugin sessions and the terminal agents found in tmux panes.
fn sessions_request() -> SessionsList {
    SessionsList {
        agents: true,
        ..SessionsList::default()
    }
}

pub async fn sessions(choice: &HostChoice, json: bool) -> anyhow::Result<ExitCode> {
    let hosts = choice.resolve()?;
    if let [host] = hosts.as_slice() {
        let mut client = connect(host).await?;
        let result = client.sessions(sessions_request()).await;
        client.close().await;
        let result = result?;
        if json {
            let mut listed = Vec::new();
            for session in &result.sessions {
                listed.push(serde_json::to_value(session)?);
            }
            for agent in &result.agents {
                listed.push(agent_json(agent, None)?);
            }
            print_json(&listed)?;
        } else {
            if result.sessions.is_empty() {
                println!("no IDE plugin is connected");
            } else {
                let rows: Vec<(Option<&str>, &SessionInfo)> =
                    result.sessions.iter().map(|s| (None, s)).collect();
                print_sessions(&rows);
            }
            let agents: Vec<(Option<&str>, &TerminalAgentInfo)> =
                result.agents.iter().map(|a| (None, a)).collect();
            print_agents(&agents);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let answers = ask_each(&hosts, |c| Box::pin(c.sessions(sessions_request()))).await;
    let (answered, outcomes) = outcomes(&hosts, answers);
    let mut sessions = Vec::new();
    let mut agents = Vec::new();
    for (host, result) in answered {
        for mut session in result.sessions {
            qualify_session(&mut session, &host);
            sessions.push((host.clone(), session));
        }
        for mut agent in result.agents {
            agent.agent_id = format!("{host}/{}", agent.agent_id);
            agents.push((host.clone(), agent));
        }
    }
    if json {
        #[derive(serde::Serialize)]
        struct Merged<'a> {
            sessions: Vec<serde_json::Value>,
            hosts: &'a [HostOutcome],
        }
        let mut listed = sessions
            .iter()
            .map(|(host, session)| tagged(host, session))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (host, agent) in &agents {
            listed.push(agent_json(agent, Some(host))?);
        }
        print_json(&Merged {
            sessions: listed,
            hosts: &outcomes,
        })?;
    } else {
        if sessions.is_empty() {
            println!("no IDE plugin is connected on the hosts that answered");
        } else {
            let rows: Vec<(Option<&str>, &SessionInfo)> = sessions
                .iter()
                .map(|(host, session)| (Some(host.as_str()), session))
                .collect();
            print_sessions(&rows);
        }
        let rows: Vec<(Option<&str>, &TerminalAgentInfo)> = agents
            .iter()
            .map(|(host, agent)| (Some(host.as_str()), agent))
            .collect();
        print_agents(&rows);
        print_down(&outcomes);
    }
    Ok(exit_of(&outcomes))
}

/// The terminal agents found in tmux panes, as a table after the windows (nothing when
/// there are none).
fn print_agents(rows: &[(Option<&str>, &TerminalAgentInfo)]) {
    if rows.is_empty() {
        return;
    }
    let with_host = rows.iter().any(|(host, _)| host.is_some());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(host, agent)| {
            let mut row = Vec::new();
            if with_host {
                row.push(host.unwrap_or("-").to_string());
            }
            row.extend([
                agent.agent_id.clone(),
                agent.product.clone(),
                agent.terminal.describe(),
                agent.pid.to_string(),
                serde_json::to_value(agent.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                agent
                    .chat
                    .as_ref()
                    .map(|c| c.chat_id.clone())
                    .unwrap_or_else(|| "-".into()),
                agent.workspace.clone(),
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if with_host {
        headers.push("HOST");
    }
    headers.extend([
        "AGENT",
        "PRODUCT",
        "WHERE",
        "PID",
        "STATE",
        "CHAT",
        "WORKSPACE",
    ]);
    println!("terminal agents:");
    print!("{}", render(&headers, &table));
}

/// The sessions table; a HOST column when the rows carry their host.
fn print_sessions(rows: &[(Option<&str>, &SessionInfo)]) {
    let now = SystemClock.now_ms();
    let with_host = rows.iter().any(|(host, _)| host.is_some());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(host, s)| {
            let (product, version) = s
                .ide
                .as_ref()
                .map(|ide| (ide.product.to_string(), ide.version.clone()))
                .unwrap_or_default();
            let mut row = Vec::new();
            if with_host {
                row.push(host.unwrap_or("-").to_string());
            }
            row.extend([
                s.session_id.clone(),
                product,
                version,
                s.window
                    .pid
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into()),
                format!("{:?}", s.health).to_lowercase(),
                format!("{:?}", s.chat).to_lowercase(),
                age(now, s.connected_at_ms),
                s.window.workspace_folders.join(", "),
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if with_host {
        headers.push("HOST");
    }
    headers.extend([
        "SESSION",
        "PRODUCT",
        "VERSION",
        "PID",
        "HEALTH",
        "CHAT",
        "AGE",
        "WORKSPACE",
    ]);
    print!("{}", render(&headers, &table));
}

pub async fn drives(choice: &HostChoice, args: DrivesArgs) -> anyhow::Result<ExitCode> {
    let since_ms = args
        .since
        .as_deref()
        .map(|text| parse_since(text, SystemClock.now_ms()))
        .transpose()?;
    let mut hosts = choice.resolve()?;
    // A qualified --session or --before names the one host it belongs to; ids come back
    // qualified then, to page on with.
    let mut session = args.session.clone();
    let mut before = args.before.clone();
    let mut named_host: Option<String> = None;
    for id in [&mut session, &mut before].into_iter().flatten() {
        match split_qualified(id) {
            (Some(host), bare) => {
                if named_host.as_deref().is_some_and(|named| named != host) {
                    anyhow::bail!("--session and --before name different hosts");
                }
                let named = match hosts.iter().find(|h| h.name == host) {
                    Some(named) => named.clone(),
                    None => choice.resolve_value(host)?,
                };
                named_host = Some(named.name.clone());
                hosts = vec![named];
                *id = bare.to_string();
            }
            (None, _) if hosts.len() > 1 => {
                anyhow::bail!("{id} does not say its host; over several hosts give it as HOST/{id}")
            }
            (None, _) => {}
        }
    }
    // From the journal (across restarts), the newest 100 unless told otherwise; a daemon
    // without a journal answers from memory.
    let filter = DrivesList {
        session_id: session,
        active_only: args.active,
        history: true,
        before,
        since_ms,
        limit: args.limit.or(args.all.then_some(1_000)),
    };
    let all = args.all;
    let merged = hosts.len() > 1 || named_host.is_some();
    let answers = ask_each(&hosts, |client| {
        let filter = filter.clone();
        Box::pin(list_drives(client, filter, all))
    })
    .await;
    if !merged {
        let result = answers.into_iter().next().expect("one host asked")?;
        if args.json {
            print_json(&result.drives)?;
            return Ok(ExitCode::SUCCESS);
        }
        if result.drives.is_empty() {
            println!("no drives yet");
            return Ok(ExitCode::SUCCESS);
        }
        let rows: Vec<(Option<&str>, &DriveInfo)> =
            result.drives.iter().map(|d| (None, d)).collect();
        print_drives(&rows);
        if args.evidence {
            print_evidence(&rows);
        }
        if result.more {
            if let Some(oldest) = result.drives.first() {
                println!(
                    "older drives: koru drives --before {} (or --all)",
                    oldest.drive_id
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (answered, outcomes) = outcomes(&hosts, answers);
    let mut drives = Vec::new();
    let mut older = Vec::new();
    for (host, result) in answered {
        if result.more {
            if let Some(oldest) = result.drives.first() {
                older.push(qualify(&host, &oldest.drive_id));
            }
        }
        for mut drive in result.drives {
            qualify_drive(&mut drive, &host);
            drives.push((host.clone(), drive));
        }
    }
    // Oldest first, as one host's list is.
    drives.sort_by_key(|(_, drive)| drive.created_at_ms);
    if args.json {
        #[derive(serde::Serialize)]
        struct Merged<'a> {
            drives: Vec<serde_json::Value>,
            hosts: &'a [HostOutcome],
        }
        let drives = drives
            .iter()
            .map(|(host, drive)| tagged(host, drive))
            .collect::<anyhow::Result<_>>()?;
        print_json(&Merged {
            drives,
            hosts: &outcomes,
        })?;
    } else {
        if drives.is_empty() {
            println!("no drives yet on the hosts that answered");
        } else {
            let rows: Vec<(Option<&str>, &DriveInfo)> = drives
                .iter()
                .map(|(host, drive)| (Some(host.as_str()), drive))
                .collect();
            print_drives(&rows);
            if args.evidence {
                print_evidence(&rows);
            }
        }
        for oldest in older {
            println!("older drives: koru drives --before {oldest} (or --all)");
        }
        print_down(&outcomes);
    }
    Ok(exit_of(&outcomes))
}

/// One host's drives on one connection; `--all` pages back through its journal to the start.
async fn list_drives(
    client: &mut Client,
    mut filter: DrivesList,
    all: bool,
) -> Result<DrivesListResult, ClientError> {
    let mut result = DrivesListResult {
        drives: Vec::new(),
        more: false,
    };
    loop {
        let page = client.drives(filter.clone()).await?;
        let oldest = page.drives.first().map(|d| d.drive_id.clone());
        let mut drives = page.drives;
        drives.append(&mut result.drives);
        result.drives = drives;
        result.more = page.more;
        match oldest {
            Some(oldest) if all && page.more => filter.before = Some(oldest),
            _ => return Ok(result),
        }
    }
}

/// The drives table; a HOST column when the rows carry their host.
/// `koru drives --evidence`: under the table, each drive's records in its chat's store.
fn print_evidence(rows: &[(Option<&str>, &DriveInfo)]) {
    for (_, drive) in rows {
        let Some(evidence) = &drive.evidence else {
            continue;
        };
        println!("\n{}:", drive.drive_id);
        for line in crate::conversation::evidence_lines(evidence) {
            println!("  {line}");
        }
    }
}

fn print_drives(rows: &[(Option<&str>, &DriveInfo)]) {
    let now = SystemClock.now_ms();
    let with_host = rows.iter().any(|(host, _)| host.is_some());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(host, d)| {
            let mut row = Vec::new();
            if with_host {
                row.push(host.unwrap_or("-").to_string());
            }
            row.extend([
                d.drive_id.clone(),
                d.session_id.clone(),
                d.state.to_string(),
                d.blocker
                    .as_ref()
                    .map(|b| b.code.clone())
                    .unwrap_or_else(|| "-".into()),
                proof_of(d),
                age(now, d.created_at_ms),
                d.prompt_excerpt.clone(),
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if with_host {
        headers.push("HOST");
    }
    headers.extend([
        "DRIVE", "SESSION", "STATE", "BLOCKER", "PROOF", "AGE", "PROMPT",
    ]);
    print!("{}", render(&headers, &table));
}

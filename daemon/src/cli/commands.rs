//! The subcommands that talk to the daemon (status, sessions, send, drives, cancel) and the one that is the daemon.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use koru_protocol::{
    DriveCreate, DriveInfo, DriveOptions, DriveState, IdeProduct, Message, StreamEvent, Target,
};

use super::{CancelArgs, ChatShowArgs, ObserveArgs, SendArgs};
use crate::clock::{Clock, SystemClock};
use crate::control::hosts::{qualify_drive, split_qualified, Host, HostChoice};
use crate::control::{Client, Controller};
use crate::table::{age, render};

/// The name the CLI's connections give the daemon.
pub(super) const CLIENT_NAME: &str = "koru-cli";

/// The CLI's controller for the daemon at `socket`.
pub(super) fn controller(socket: &Path) -> Controller {
    Controller::new(socket.to_path_buf(), CLIENT_NAME)
}

/// The one host a command that acts on one daemon talks to (this machine's when no
/// `--host` is given).
pub(super) fn single_host(choice: &HostChoice, command: &str) -> anyhow::Result<Host> {
    let mut hosts = choice.resolve()?;
    if hosts.len() != 1 {
        bail!(
            "`koru {command}` talks to one host; give one --host (there are {})",
            hosts.len()
        );
    }
    Ok(hosts.remove(0))
}

/// The host an id names (`HOST/ID`) and the bare id; an unqualified id belongs to the one
/// host of the command.
pub(super) fn host_of_id(
    choice: &HostChoice,
    id: &str,
    command: &str,
) -> anyhow::Result<(Host, String)> {
    match split_qualified(id) {
        (Some(host), bare) => {
            let given = choice.resolve()?;
            let host = match given.into_iter().find(|h| h.name == host) {
                Some(host) => host,
                None => choice.resolve_value(host)?,
            };
            Ok((host, bare.to_string()))
        }
        (None, bare) => Ok((single_host(choice, command)?, bare.to_string())),
    }
}

/// One connection to `host` for the whole command.
pub(super) async fn connect(host: &Host) -> anyhow::Result<Client> {
    Ok(host.connect(CLIENT_NAME).await?)
}

/// Pretty JSON on stdout.
pub(super) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

/// `--since`: an RFC 3339 time, or an age back from `now_ms` (`90m`, `12h`, `7d`).
pub(super) fn parse_since(text: &str, now_ms: u64) -> anyhow::Result<u64> {
    if let Some(at) = crate::observe::text::parse_ts(text) {
        return Ok(at);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if unit_ms > 0 => Ok(now_ms.saturating_sub(n.saturating_mul(unit_ms))),
        _ => anyhow::bail!(
            "--since {text:?}: give an RFC 3339 time (2026-11-25T09:00:00Z) or an age (90m, 12h, 7d)"
        ),
    }
}

pub async fn cancel(choice: &HostChoice, args: CancelArgs) -> anyhow::Result<ExitCode> {
    let (host, drive_id) = host_of_id(choice, &args.drive_id, "cancel")?;
    let mut client = connect(&host).await?;
    let drive = client.cancel_drive(drive_id).await;
    client.close().await;
    let mut drive = drive?;
    if split_qualified(&args.drive_id).0.is_some() {
        qualify_drive(&mut drive, &host.name);
    }
    if args.json {
        print_json(&drive)?;
    } else {
        println!("{} {}", drive.drive_id, drive.state);
    }
    Ok(ExitCode::SUCCESS)
}

fn read_prompt(raw: &str) -> anyhow::Result<String> {
    if raw != "-" {
        return Ok(raw.to_string());
    }
    let mut prompt = String::new();
    std::io::stdin()
        .read_to_string(&mut prompt)
        .context("cannot read the prompt from standard input (it must be UTF-8)")?;
    Ok(prompt)
}

/// The drive's target; `local` says whether the daemon runs on this machine (a folder on
/// another machine cannot be resolved here, so it must be absolute and goes as written).
fn target_of(args: &SendArgs, local: bool) -> anyhow::Result<Target> {
    if args.window_pid.is_some() || args.window_title.is_some() {
        if args.session.is_some() || args.workspace.is_some() || args.ide.is_some() {
            bail!("--window-pid/--window-title target a window without a plugin; they cannot be combined with --session, --workspace or --ide");
        }
        return Ok(Target::Window(koru_protocol::WindowTarget {
            pid: args.window_pid,
            title: args.window_title.clone(),
        }));
    }
    if let Some(session) = &args.session {
        return Ok(Target::Session(session.clone()));
    }
    if let Some(chat) = &args.chat {
        return Ok(Target::Chat(chat.clone()));
    }
    if let Some(product) = &args.agent {
        let workspace = match &args.workspace {
            None => None,
            Some(folder) if !local => {
                if !folder.is_absolute() {
                    bail!(
                        "--workspace {}: a folder on another host must be an absolute path",
                        folder.display()
                    );
                }
                Some(folder.display().to_string())
            }
            Some(folder) => {
                let absolute = std::fs::canonicalize(folder)
                    .with_context(|| format!("--workspace {}", folder.display()))?;
                Some(
                    absolute
                        .to_str()
                        .with_context(|| format!("{} is not valid UTF-8", absolute.display()))?
                        .to_string(),
                )
            }
        };
        return Ok(Target::Agent(koru_protocol::AgentTarget {
            product: product.clone(),
            workspace,
        }));
    }
    if let Some(workspace) = &args.workspace {
        // A folder URI or a remote window's `AUTHORITY:/path` names a folder on another
        // machine (or says exactly which local one): passed on as written.
        if let Some(text) = workspace.to_str() {
            if text.contains("://")
                || matches!(
                    crate::workspace_ref::WorkspaceRef::parse(text),
                    Ok(crate::workspace_ref::WorkspaceRef::Remote { .. })
                )
            {
                return Ok(Target::Workspace(text.to_string()));
            }
        }
        if !local {
            if !workspace.is_absolute() {
                bail!(
                    "--workspace {}: a folder on another host must be an absolute path",
                    workspace.display()
                );
            }
            let text = workspace
                .to_str()
                .with_context(|| format!("{} is not valid UTF-8", workspace.display()))?;
            return Ok(Target::Workspace(text.to_string()));
        }
        let absolute = std::fs::canonicalize(workspace)
            .or_else(|_| std::env::current_dir().map(|cwd| cwd.join(workspace)));
        let absolute =
            absolute.with_context(|| format!("cannot resolve {}", workspace.display()))?;
        let text = absolute
            .to_str()
            .with_context(|| format!("{} is not valid UTF-8", absolute.display()))?;
        return Ok(Target::Workspace(text.to_string()));
    }
    if let Some(product) = &args.ide {
        let product: IdeProduct = product.parse().unwrap_or_else(|never| match never {});
        return Ok(Target::Product(product));
    }
    Ok(Target::Focused)
}

pub async fn send(choice: &HostChoice, mut args: SendArgs) -> anyhow::Result<ExitCode> {
    // A qualified `--session HOST/s_…` names the host; the drive is shown qualified then.
    let mut qualified = None;
    let host = match args.session.take() {
        Some(session) => {
            let (host, bare) = host_of_id(choice, &session, "send")?;
            if split_qualified(&session).0.is_some() {
                qualified = Some(host.name.clone());
            }
            args.session = Some(bare);
            host
        }
        None => single_host(choice, "send")?,
    };
    let shown = |drive: &DriveInfo| {
        let mut drive = drive.clone();
        if let Some(host) = &qualified {
            qualify_drive(&mut drive, host);
        }
        drive
    };
    let prompt = read_prompt(&args.prompt)?;
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    let target = target_of(&args, host.is_local())?;
    let timeout_ms = match args.timeout {
        Some(seconds) if seconds.is_finite() && seconds > 0.0 => Some((seconds * 1000.0) as u64),
        Some(seconds) => bail!("--timeout must be a positive number of seconds, got {seconds}"),
        None => None,
    };
    let wait = args.wait || args.wait_reply;
    let mut client = connect(&host).await?;
    if wait {
        client.subscribe().await?;
    }
    // A reply only the window's plugin reported has no text: with observers running, the
    // wait goes on until the chat's store has it (or the wait runs out).
    let text_awaited = args.wait_reply && client.status().await?.observing;
    let created = client
        .create_drive(DriveCreate {
            target,
            prompt,
            options: DriveOptions {
                submit: !args.no_submit,
                new_chat: args.new_chat,
                timeout_ms,
                busy: if args.fail_if_busy {
                    koru_protocol::BusyPolicy::Fail
                } else {
                    koru_protocol::BusyPolicy::Queue
                },
                agent_command: args.agent_command,
            },
        })
        .await?;
    let drive_id = shown(&created).drive_id;
    if !wait {
        let created = shown(&created);
        if args.json {
            print_json(&created)?;
        } else {
            println!(
                "{drive_id} {} (session {})",
                created.state, created.session_id
            );
        }
        client.close().await;
        return Ok(ExitCode::SUCCESS);
    }

    let mut progress = Progress::new(!args.json, created.created_at_ms);
    progress.show(&shown(&created));
    // The drive's own deadline ends it; waiting for the reply after it is bounded here.
    let reply_deadline =
        tokio::time::Instant::now() + Duration::from_secs_f64(args.timeout.unwrap_or(120.0));
    let wait_reply = args.wait_reply;
    let followed = client
        .follow_drive(
            created,
            |drive| {
                let reply_known = if text_awaited {
                    drive.reply_text_known()
                } else {
                    drive.reply_settled()
                };
                drive.state.is_terminal()
                    && !(wait_reply && drive.state == DriveState::Done && !reply_known)
            },
            |drive| drive.state.is_terminal().then_some(reply_deadline),
            Some(Duration::from_millis(120)),
            |event| match event {
                crate::control::Followed::Update(drive) => progress.show(&shown(drive)),
                crate::control::Followed::Tick(drive) => progress.spin(drive.state),
            },
        )
        .await;
    let (last, reply_timed_out) = match followed {
        Ok(followed) => followed,
        Err(crate::control::ClientError::Closed) => {
            bail!("the daemon closed the connection before drive {drive_id} ended")
        }
        Err(crate::control::ClientError::Unreachable { host, said }) => {
            bail!("lost host {host} before drive {drive_id} ended: {said}")
        }
        Err(error) => return Err(error.into()),
    };
    progress.clear_spinner();
    // The whole turn, read back from the chat's store, when the reply ended there.
    let turn = if args.wait_reply
        && last.state == DriveState::Done
        && last.reply_text_known()
        && last
            .observation
            .as_ref()
            .is_some_and(|o| !o.is_from_plugin())
    {
        Some(read_whole_turn(&mut client, &last.drive_id).await)
    } else {
        None
    };
    client.close().await;
    let last = shown(&last);
    if args.json {
        let mut shown = serde_json::to_value(&last)?;
        if let (Some(Ok(read)), Some(object)) = (&turn, shown.as_object_mut()) {
            object.insert("chat_read".into(), serde_json::to_value(read)?);
        }
        print_json(&shown)?;
    }
    if args.wait_reply && last.state == DriveState::Done {
        return Ok(report_reply(&last, turn, reply_timed_out, args.json));
    }
    if last.state == DriveState::Done
        && last.verification == koru_protocol::Verification::Unverified
        && !args.json
    {
        if last.submit_evidence == Some(koru_protocol::SubmitEvidence::KeyPressed) {
            eprintln!(
                "koru: pasted by the plugin, then submitted by one key press into its window after checking that window had focus; unverified until the chat's history shows it"
            );
        } else {
            let by = last
                .attempts
                .iter()
                .rev()
                .find(|a| a.outcome == koru_protocol::AttemptOutcome::Succeeded);
            let text = match by.and_then(|a| a.text) {
                Some(koru_protocol::TextDelivery::Typed) => "typed key by key",
                Some(koru_protocol::TextDelivery::Pasted) => "pasted",
                None => "delivered",
            };
            let focus = if by.is_some_and(|a| a.interface == crate::drive::portal::INTERFACE) {
                // On Wayland no program sees other windows' focus: the plugin's word is all.
                "into the window whose Koru plugin reported it had focus, checked right before the first key and before submit"
            } else {
                "into the target window, its focus verified before and after"
            };
            eprintln!(
                "koru: {text} by OS injection {focus}; unverified until the chat's history shows it"
            );
        }
    }
    Ok(if last.state == DriveState::Done {
        ExitCode::SUCCESS
    } else {
        if !args.json {
            let blocker = last
                .blocker
                .as_ref()
                .map(|b| format!("{}: {}", b.code, b.detail))
                .unwrap_or_else(|| "no blocker reported".into());
            eprintln!("koru: drive {drive_id} {}: {blocker}", last.state);
        }
        ExitCode::FAILURE
    })
}

/// Prints each new state of a drive once (stdout, one line per state, for scripts) and
/// each route attempt as it ends (stderr), with a spinner on a terminal.
struct Progress {
    enabled: bool,
    created_at_ms: u64,
    printed: usize,
    attempts_printed: Vec<koru_protocol::AttemptOutcome>,
    tty: bool,
    frame: usize,
    spinning: bool,
    waiting_printed: Option<koru_protocol::Blocker>,
    evidence_printed: bool,
}

impl Progress {
    fn new(enabled: bool, created_at_ms: u64) -> Self {
        Progress {
            enabled,
            created_at_ms,
            printed: 0,
            attempts_printed: Vec::new(),
            tty: std::io::stderr().is_terminal(),
            frame: 0,
            spinning: false,
            waiting_printed: None,
            evidence_printed: false,
        }
    }

    fn spin(&mut self, state: DriveState) {
        if !self.enabled || !self.tty {
            return;
        }
        const FRAMES: [&str; 8] = ["⠋", "⠙", "⠸", "⠴", "⠦", "⠇", "⠏", "⠹"];
        self.frame = (self.frame + 1) % FRAMES.len();
        eprint!("\r{} {state}…  ", FRAMES[self.frame]);
        self.spinning = true;
    }

    fn clear_spinner(&mut self) {
        if self.spinning {
            eprint!("\r\x1b[K");
            self.spinning = false;
        }
    }

    fn show(&mut self, drive: &DriveInfo) {
        if !self.enabled {
            return;
        }
        self.clear_spinner();
        let mut stdout = std::io::stdout().lock();
        for record in drive.history.iter().skip(self.printed) {
            let elapsed = record.at_ms.saturating_sub(self.created_at_ms);
            let _ = writeln!(stdout, "{} {} +{elapsed}ms", drive.drive_id, record.state);
        }
        self.printed = drive.history.len();
        let _ = stdout.flush();
        if drive.waiting.is_some() && drive.waiting != self.waiting_printed {
            if let Some(waiting) = &drive.waiting {
                eprintln!("koru: {} — {}", waiting.code, waiting.detail);
            }
        }
        self.waiting_printed = drive.waiting.clone();
        if let (Some(evidence), false) = (drive.submit_evidence, self.evidence_printed) {
            self.evidence_printed = true;
            eprintln!("koru: submitted: {}", describe_evidence(evidence));
        }
        use koru_protocol::AttemptOutcome;
        for (index, attempt) in drive.attempts.iter().enumerate() {
            if self.attempts_printed.get(index) == Some(&attempt.outcome) {
                continue;
            }
            let blocker = attempt
                .blocker
                .as_ref()
                .map(|b| format!(": {} — {}", b.code, b.detail))
                .unwrap_or_default();
            let hint = attempt
                .hint
                .as_ref()
                .map(|h| format!(" (→ {h})"))
                .unwrap_or_default();
            let what = match attempt.outcome {
                AttemptOutcome::Running => "trying".to_string(),
                AttemptOutcome::Skipped => "skipped".to_string(),
                AttemptOutcome::Succeeded => "succeeded".to_string(),
                AttemptOutcome::Failed => "failed".to_string(),
                AttemptOutcome::NotTried => {
                    "not tried (the prompt may already be delivered)".to_string()
                }
            };
            let note = attempt
                .note
                .as_ref()
                .filter(|_| index >= self.attempts_printed.len())
                .map(|n| format!(" — {n}"))
                .unwrap_or_default();
            eprintln!(
                "koru: route {} via {}: {what}{blocker}{hint}{note}",
                attempt.route.as_str(),
                attempt.interface
            );
            if index < self.attempts_printed.len() {
                self.attempts_printed[index] = attempt.outcome;
            } else {
                self.attempts_printed.push(attempt.outcome);
            }
        }
    }
}

/// `koru observe`: a live tail of observations, filtered.
pub async fn observe(choice: &HostChoice, args: ObserveArgs) -> anyhow::Result<ExitCode> {
    let host = single_host(choice, "observe")?;
    // A folder on another host is taken as written; one here is resolved.
    let workspace = match &args.workspace {
        Some(dir) if host.is_local() => Some(
            std::fs::canonicalize(dir)
                .with_context(|| format!("cannot resolve {}", dir.display()))?,
        ),
        Some(dir) => Some(dir.clone()),
        None => None,
    };
    let mut client = connect(&host).await?;
    client.subscribe().await?;
    // On stderr, so that `--json` output stays pure: from here on nothing is missed.
    eprintln!("koru observe: subscribed; Ctrl-C stops");
    let mut stdout = std::io::stdout();
    while let Some(envelope) = client.next().await? {
        let Message::Stream(item) = envelope.message else {
            continue;
        };
        let StreamEvent::Observed { observation } = item.event else {
            continue;
        };
        if args.store.as_ref().is_some_and(|s| s != &observation.store) {
            continue;
        }
        if let Some(dir) = &workspace {
            let inside = observation
                .workspace
                .as_ref()
                .is_some_and(|w| Path::new(w).starts_with(dir) || dir.starts_with(Path::new(w)));
            if !inside {
                continue;
            }
        }
        if args.json {
            writeln!(stdout, "{}", serde_json::to_string(&observation)?)?;
        } else {
            writeln!(stdout, "{}", describe_observation(&observation))?;
        }
        stdout.flush()?;
    }
    // The daemon ending the stream is the end of the tail; a lost ssh connection is an error.
    if let error @ crate::control::ClientError::Unreachable { .. } = client.closed_error().await {
        return Err(error.into());
    }
    Ok(ExitCode::SUCCESS)
}

/// One line for a person: `time store chat kind details [inferred]`.
fn describe_observation(o: &koru_protocol::ObservedEvent) -> String {
    use koru_protocol::ObservedKind;
    let detail = match &o.event {
        ObservedKind::ChatSeen => "chat_seen".to_string(),
        ObservedKind::PromptSeen {
            excerpt, length, ..
        } => {
            format!("prompt_seen ({length} chars) {excerpt}")
        }
        ObservedKind::ReplyStarted => "reply_started".to_string(),
        ObservedKind::ReplyResumed => "reply_resumed (an inferred end taken back)".to_string(),
        ObservedKind::ReplyCompleted { excerpt, length } => {
            format!("reply_completed ({length} chars) {excerpt}")
        }
        ObservedKind::NeedsInput { input } => format!(
            "needs_input {}",
            serde_json::to_value(input)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        ObservedKind::Cancelled => "cancelled".to_string(),
        ObservedKind::Failed { reason } => format!("failed {reason}"),
        ObservedKind::Activity => "activity".to_string(),
        ObservedKind::Unknown => "unknown".to_string(),
    };
    let basis = match o.basis {
        koru_protocol::ObservationBasis::Explicit => "",
        koru_protocol::ObservationBasis::Inferred => " [inferred]",
    };
    format!(
        "{} {} {} {}{basis}",
        o.store.trim_start_matches("chat_history_"),
        o.chat_id,
        o.workspace.as_deref().unwrap_or("-"),
        detail
    )
}

/// `koru chats`.
pub async fn chats(choice: &HostChoice, json: bool) -> anyhow::Result<ExitCode> {
    let host = single_host(choice, "chats")?;
    let mut client = connect(&host).await?;
    let result = client.chats(koru_protocol::ChatsList::default()).await;
    client.close().await;
    let result = result?;
    if json {
        print_json(&result.chats)?;
        return Ok(ExitCode::SUCCESS);
    }
    if result.chats.is_empty() {
        println!("no chats observed (koru doctor shows which chat stores exist here)");
        return Ok(ExitCode::SUCCESS);
    }
    let now = SystemClock.now_ms();
    let rows: Vec<Vec<String>> = result
        .chats
        .iter()
        .map(|c| {
            vec![
                c.store.trim_start_matches("chat_history_").to_string(),
                c.chat_id.clone(),
                serde_json::to_value(c.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                age(now, c.last_activity_ms),
                c.workspace.clone().unwrap_or_else(|| "-".into()),
                c.last_prompt.clone().unwrap_or_default(),
            ]
        })
        .collect();
    print!(
        "{}",
        render(
            &[
                "STORE",
                "CHAT",
                "STATE",
                "ACTIVE",
                "WORKSPACE",
                "LAST PROMPT"
            ],
            &rows
        )
    );
    Ok(ExitCode::SUCCESS)
}

/// `koru chat show`: a chat's turns (or a drive's), every reply read whole.
pub async fn chat_show(choice: &HostChoice, args: ChatShowArgs) -> anyhow::Result<ExitCode> {
    let (host, chat_id, drive_id) = match (&args.chat_id, &args.drive) {
        (_, Some(drive)) => {
            let (host, bare) = host_of_id(choice, drive, "chat show")?;
            (host, None, Some(bare))
        }
        (Some(chat), None) => (single_host(choice, "chat show")?, Some(chat.clone()), None),
        (None, None) => bail!("give a chat id (`koru chats` lists them) or --drive"),
    };
    let mut client = connect(&host).await?;
    let read = read_turns(
        &mut client,
        chat_id,
        args.store.clone(),
        drive_id,
        args.turns,
    )
    .await;
    client.close().await;
    let read = read?;
    if args.json {
        print_json(&read)?;
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render_turns(&read));
    Ok(ExitCode::SUCCESS)
}

/// The turns `chat.read` gives, each reply completed page by page.
async fn read_turns(
    client: &mut Client,
    chat_id: Option<String>,
    store: Option<String>,
    drive_id: Option<String>,
    turns: Option<u32>,
) -> anyhow::Result<koru_protocol::ChatReadResult> {
    let mut read = client
        .read_chat(koru_protocol::ChatRead {
            chat_id: chat_id.clone(),
            store: store.clone(),
            drive_id: drive_id.clone(),
            turns,
            ..Default::default()
        })
        .await?;
    let store = Some(read.store.clone());
    let chat = Some(read.chat_id.clone());
    for turn in &mut read.turns {
        while let Some(next) = turn.reply_next_offset {
            let more = client
                .read_chat(koru_protocol::ChatRead {
                    chat_id: chat.clone(),
                    store: store.clone(),
                    turn: Some(turn.index),
                    reply_offset: Some(next),
                    ..Default::default()
                })
                .await?;
            let Some(page) = more.turns.into_iter().next() else {
                bail!(
                    "turn {} of chat {} went away while it was read",
                    turn.index,
                    read.chat_id
                );
            };
            if page.reply_offset != next || page.reply.as_deref().is_none_or(str::is_empty) {
                bail!(
                    "turn {} of chat {} changed while it was read",
                    turn.index,
                    read.chat_id
                );
            }
            turn.reply
                .get_or_insert_with(String::new)
                .push_str(page.reply.as_deref().unwrap_or(""));
            turn.reply_next_offset = page.reply_next_offset;
        }
    }
    Ok(read)
}

/// Turns for a person: a heading per turn, the prompt, the steps, the whole reply.
pub(super) fn render_turns(read: &koru_protocol::ChatReadResult) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} chat {}{} — {} turn(s){}",
        read.store.trim_start_matches("chat_history_"),
        read.chat_id,
        read.workspace
            .as_deref()
            .map(|w| format!(" in {w}"))
            .unwrap_or_default(),
        read.turns_total,
        if read.not_recorded.is_empty() {
            String::new()
        } else {
            format!(
                " (this store does not record: {})",
                read.not_recorded.join(", ")
            )
        }
    );
    if read.turns.is_empty() {
        let _ = writeln!(out, "(no turns yet)");
    }
    for turn in &read.turns {
        let when = turn
            .started_ms
            .and_then(|ms| chrono::DateTime::from_timestamp_millis(ms as i64))
            .map(|t| format!(" {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
            .unwrap_or_default();
        let model = turn
            .model
            .as_deref()
            .map(|m| format!(" · {m}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\n── turn {}{when} · {}{model}",
            turn.index,
            turn.state.as_str()
        );
        match &turn.prompt {
            Some(prompt) => {
                let _ = writeln!(out, "> {}", prompt.replace('\n', "\n> "));
            }
            None => {
                let _ = writeln!(out, "(no prompt: the agent went on by itself)");
            }
        }
        for step in &turn.steps {
            let _ = writeln!(out, "  • {}", crate::conversation::step_line(step));
        }
        if let Some(error) = &turn.error {
            let _ = writeln!(out, "failed: {error}");
        }
        if let Some(reply) = &turn.reply {
            let _ = writeln!(out, "{reply}");
        }
    }
    out
}

/// The `PROOF` column of `koru drives`: what proves the drive's delivery (its submit
/// evidence, `unverified` for OS injection, what the chat's history showed), or why a
/// drive not sent yet waits.
pub(super) fn proof_of(drive: &DriveInfo) -> String {
    if let Some(waiting) = &drive.waiting {
        return format!("waits: {}", waiting.code);
    }
    let delivered = match (drive.submit_evidence, drive.verification) {
        (Some(evidence), _) => evidence.as_str().to_string(),
        (None, koru_protocol::Verification::Unverified) => "unverified".to_string(),
        _ => "-".to_string(),
    };
    match &drive.observation {
        Some(o) => {
            let stage = serde_json::to_value(o.stage)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{delivered}, {stage}")
        }
        None => delivered,
    }
}

/// What a drive's `submit_evidence` proves, for a person.
pub fn describe_evidence(evidence: koru_protocol::SubmitEvidence) -> &'static str {
    use koru_protocol::SubmitEvidence;
    match evidence {
        SubmitEvidence::ChatResponded => {
            "chat_responded — the chat's own response to the prompt ended or asked the user"
        }
        SubmitEvidence::ChatRunning => {
            "chat_running — the chat was answering the prompt, with no refusal, when the plugin's acceptance window ran out"
        }
        SubmitEvidence::CommandReturned => {
            "command_returned — only the IDE command returned; nothing from the chat confirmed it took the prompt"
        }
        SubmitEvidence::KeyPressed => {
            "key_pressed — the submit key went once to the verified window; nothing from the chat confirmed it"
        }
        SubmitEvidence::AgentHook => {
            "agent_hook — the terminal agent's own prompt hook reported this prompt"
        }
        SubmitEvidence::AgentTranscript => {
            "agent_transcript — the terminal agent's own transcript recorded this prompt"
        }
    }
}

/// A drive's turn read back from its chat's store, the whole reply in one piece (read
/// page after page).
async fn read_whole_turn(
    client: &mut crate::control::Client,
    drive_id: &str,
) -> anyhow::Result<koru_protocol::ChatReadResult> {
    let ask = |reply_offset| koru_protocol::ChatRead {
        drive_id: Some(drive_id.to_string()),
        reply_offset: Some(reply_offset),
        ..Default::default()
    };
    let mut read = client.read_chat(ask(0)).await?;
    let Some(turn) = read.turns.first_mut() else {
        return Ok(read);
    };
    while let Some(next) = turn.reply_next_offset {
        let more = client.read_chat(ask(next)).await?;
        let Some(page) = more.turns.into_iter().next() else {
            break;
        };
        if page.reply_offset != next || page.reply.as_deref().is_none_or(str::is_empty) {
            anyhow::bail!("the reply of drive {drive_id} changed while it was read");
        }
        turn.reply
            .get_or_insert_with(String::new)
            .push_str(page.reply.as_deref().unwrap_or(""));
        turn.reply_next_offset = page.reply_next_offset;
    }
    Ok(read)
}

/// Prints the reply (or why there is none) for `koru send --wait-reply`; exit 0 only on a
/// reply. The whole reply goes to stdout after a line naming the chat; the steps the
/// agent took go to stderr.
fn report_reply(
    drive: &DriveInfo,
    turn: Option<anyhow::Result<koru_protocol::ChatReadResult>>,
    timed_out: bool,
    json: bool,
) -> ExitCode {
    use koru_protocol::ObservedStage;
    match &drive.observation {
        Some(o) if o.stage == ObservedStage::Replied => {
            if json {
                return ExitCode::SUCCESS;
            }
            let read = match turn {
                Some(Ok(read)) => read,
                Some(Err(error)) => {
                    eprintln!(
                        "koru: drive {} replied in {} chat {}, but its turn could not be read back: {error:#}",
                        drive.drive_id, o.store, o.chat_id
                    );
                    return ExitCode::FAILURE;
                }
                None if o.is_from_plugin() => {
                    // The window's chat said it finished but gives plugins no reply text.
                    println!(
                        "{} replied (the chat finished its answer; it does not hand the text to the plugin{})",
                        drive.drive_id,
                        if timed_out {
                            ", and no chat store had it before the wait ran out — `koru chat show` reads it once the chat's store is written"
                        } else {
                            " — `koru chats` shows it once the chat's store is written"
                        }
                    );
                    return ExitCode::SUCCESS;
                }
                None => {
                    println!("{} replied", drive.drive_id);
                    return ExitCode::SUCCESS;
                }
            };
            let Some(turn) = read.turns.first() else {
                return ExitCode::FAILURE;
            };
            for step in &turn.steps {
                eprintln!("koru: step: {}", crate::conversation::step_line(step));
            }
            let reply = turn.reply.as_deref().unwrap_or("");
            println!(
                "{} replied ({} chars) in {} chat {}:",
                drive.drive_id, turn.reply_chars, read.store, read.chat_id
            );
            println!("{reply}");
            ExitCode::SUCCESS
        }
        Some(o) => {
            let stage = serde_json::to_value(o.stage)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let place = if o.is_from_plugin() {
                "the window's chat (as its plugin reports)".to_string()
            } else {
                format!("{} chat {}", o.store, o.chat_id)
            };
            eprintln!(
                "koru: drive {} {stage} in {place}{}",
                drive.drive_id,
                o.detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
            ExitCode::FAILURE
        }
        None => {
            eprintln!(
                "koru: drive {} was delivered, but {} (is its chat store observed? see `koru chats`)",
                drive.drive_id,
                if timed_out {
                    "no chat history showed the prompt before the wait ran out"
                } else {
                    "no chat history showed the prompt"
                }
            );
            ExitCode::FAILURE
        }
    }
}

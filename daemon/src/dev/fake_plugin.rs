//! `koru dev fake-plugin`: a reference plugin that speaks the protocol as an IDE plugin would, with scripted behaviours for tests and demos.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use koru_protocol::{
    Ack, AckStage, Blocker, Capability, DriveRequest, IdeInfo, IdeProduct, Message, WindowInfo,
};

use crate::client::{plugin_hello, Client};

/// How the fake plugin answers drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Behaviour {
    /// Ack every stage: received, focused, pasted, submitted.
    Ack,
    /// Fail every drive with a `capability_missing` blocker.
    Nack,
    /// Ack every stage after `--delay-ms`.
    Slow,
    /// Disconnect (without bye) on the first drive.
    Drop,
    /// Ack drives but never answer the daemon's pings (to test heartbeat loss).
    Mute,
    /// Refuse native-send drives (`command_not_allowed`), ack every other route.
    NackNative,
    /// Ack received, focused and pasted, then go silent (the drive must time out and
    /// never be submitted twice).
    StallAfterPasted,
}

#[derive(Debug, Args)]
pub struct FakePluginArgs {
    /// The IDE product to claim (vscode, cursor, code-server, jetbrains-idea, …)
    #[arg(long, default_value = "vscode")]
    pub product: String,
    /// The workspace folder to claim (repeat for several)
    #[arg(long, value_name = "DIR", required = true)]
    pub workspace: Vec<PathBuf>,
    /// The window's process id to claim [default: this process]
    #[arg(long, value_name = "PID")]
    pub window_pid: Option<u32>,
    /// Claim the window has focus
    #[arg(long)]
    pub focused: bool,
    #[arg(long, value_enum, default_value_t = Behaviour::Ack)]
    pub behaviour: Behaviour,
    /// Delay before each ack with --behaviour slow
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub delay_ms: u64,
    /// Append each received drive as one JSON line {drive_id, prompt, submit, route} to this file
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Do not announce the registry catalog's commands and tool windows for the product as
    /// capabilities (by default the fake plugin claims every command and tool window its
    /// product's routes need, as a real plugin in a complete IDE would)
    #[arg(long)]
    pub no_commands: bool,
    /// The protocol range to offer in hello, e.g. `2..3` to see a version mismatch
    #[arg(long, value_name = "MIN..MAX")]
    pub protocol: Option<String>,
    /// Play an IDE whose agent is Claude Code: after acking `submitted`, append the prompt,
    /// then (after --reply-delay-ms) a reply and an end-of-turn record, to DIR/<session>.jsonl
    /// in Claude Code's session-log format, with the first workspace as `cwd`
    #[arg(long, value_name = "DIR")]
    pub claude_store: Option<PathBuf>,
    /// Delay between the recorded prompt and the recorded reply with --claude-store
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub reply_delay_ms: u64,
}

/// Where and how the fake "IDE" records its agent's turns (`--claude-store`).
#[derive(Debug, Clone)]
struct FakeAgentStore {
    file: PathBuf,
    session: String,
    cwd: String,
    reply_delay: Duration,
}

impl FakeAgentStore {
    fn append(&self, record: serde_json::Value) {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)
            .and_then(|mut file| writeln!(file, "{record}"));
        if let Err(error) = written {
            eprintln!("fake plugin: cannot write {}: {error}", self.file.display());
        }
    }

    fn now() -> String {
        chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    /// The agent's turn for `prompt`: the prompt at once, the reply and the end later.
    async fn play_turn(self, prompt: String) {
        let id = uuid::Uuid::new_v4().to_string();
        self.append(
            serde_json::json!({"parentUuid": null, "isSidechain": false, "userType": "external",
            "cwd": self.cwd, "sessionId": self.session, "version": "2.1.220", "type": "user",
            "message": {"role": "user", "content": prompt}, "uuid": id, "timestamp": Self::now()}),
        );
        tokio::time::sleep(self.reply_delay).await;
        let first_line = prompt.lines().next().unwrap_or("").to_string();
        let reply_id = uuid::Uuid::new_v4().to_string();
        self.append(serde_json::json!({"parentUuid": id, "isSidechain": false, "cwd": self.cwd,
            "sessionId": self.session, "version": "2.1.220", "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": format!("Done: {first_line}")}], "stop_reason": "end_turn"},
            "uuid": reply_id, "timestamp": Self::now()}));
        self.append(serde_json::json!({"parentUuid": reply_id, "isSidechain": false, "cwd": self.cwd,
            "sessionId": self.session, "version": "2.1.220", "type": "system", "subtype": "turn_duration",
            "durationMs": self.reply_delay.as_millis() as u64, "uuid": uuid::Uuid::new_v4().to_string(),
            "timestamp": Self::now()}));
    }
}

/// `MIN..MAX` or a single version.
fn parse_range(raw: &str) -> anyhow::Result<koru_protocol::VersionRange> {
    let (min, max) = raw.split_once("..").unwrap_or((raw, raw));
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .with_context(|| format!("--protocol {raw}: expected MIN..MAX with whole numbers"))
    };
    Ok(koru_protocol::VersionRange {
        min: parse(min)?,
        max: parse(max)?,
    })
}

/// The `command:` and `tool_window:` capabilities the registry's routes for `product` require.
fn catalog_commands(product: &str) -> Vec<Capability> {
    let layers = crate::registry::LayerPaths::discover(None, None);
    let loaded = crate::registry::load_layers(&layers);
    let platform =
        crate::doctor::probe::current_platform().unwrap_or(koru_registry::Platform::Linux);
    let mut wanted: Vec<String> = koru_registry::rank_routes(&loaded.registry, product, platform)
        .iter()
        .flat_map(|route| route.requires.capabilities.iter())
        .filter(|c| c.starts_with("command:") || c.starts_with("tool_window:"))
        .cloned()
        .collect();
    wanted.sort();
    wanted.dedup();
    wanted
        .into_iter()
        .filter_map(|c| match c.split_once(':') {
            Some(("command", id)) => Some(Capability::Command { id: id.to_string() }),
            Some(("tool_window", id)) => Some(Capability::ToolWindow { id: id.to_string() }),
            _ => None,
        })
        .collect()
}

pub async fn run(socket: &Path, args: FakePluginArgs) -> anyhow::Result<ExitCode> {
    let product: IdeProduct = args.product.parse().unwrap_or_else(|never| match never {});
    let folders = args
        .workspace
        .iter()
        .map(|dir| {
            std::fs::canonicalize(dir)
                .with_context(|| format!("workspace {} does not exist", dir.display()))
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut capabilities = vec![
        Capability::NativeSend,
        Capability::PluginDrive,
        Capability::Clipboard,
        Capability::ChatEvents,
    ];
    if !args.no_commands {
        capabilities.extend(catalog_commands(&product.to_string()));
    }
    let mut hello = plugin_hello(
        "koru-fake-plugin",
        IdeInfo {
            product: product.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            app_name: format!("Koru fake plugin ({product})"),
            uri_scheme: None,
            app_host: None,
        },
        WindowInfo {
            pid: Some(args.window_pid.unwrap_or_else(std::process::id)),
            parent_pid: None,
            window_id: None,
            workspace_folders: folders,
            title: Some(format!("fake {product}")),
            focused: Some(args.focused),
            ..WindowInfo::default()
        },
        capabilities,
    );
    if let Some(range) = &args.protocol {
        hello.protocol = parse_range(range)?;
    }
    loop {
        match serve(socket, hello.clone(), &args).await? {
            SessionEnd::Reconnect => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                eprintln!("fake plugin: reconnecting as the daemon asked");
            }
            SessionEnd::Closed => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// How a connection of the fake plugin ended.
enum SessionEnd {
    /// The daemon said `bye` with `reconnect_requested`: connect again.
    Reconnect,
    /// The daemon went away or the plugin dropped the connection as told.
    Closed,
}

/// One connection: hello, then drives answered until the connection ends.
async fn serve(
    socket: &Path,
    hello: koru_protocol::Hello,
    args: &FakePluginArgs,
) -> anyhow::Result<SessionEnd> {
    let mut reconnect = false;
    let mut client = Client::connect(socket, hello).await?;
    client.answer_pings = args.behaviour != Behaviour::Mute;
    eprintln!(
        "fake plugin connected as session {} (behaviour {:?})",
        client.welcome.session_id, args.behaviour
    );
    // Drives are answered by their own tasks so that the connection keeps being read
    // (pings, cancels) while a slow drive waits, as a real plugin would.
    let (acks_tx, mut acks_rx) = tokio::sync::mpsc::channel::<Ack>(64);
    let session_file = uuid::Uuid::new_v4().to_string();
    if let Some(dir) = &args.claude_store {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut running: std::collections::HashMap<String, tokio::task::JoinHandle<()>> =
        std::collections::HashMap::new();
    loop {
        let envelope = tokio::select! {
            ack = acks_rx.recv() => {
                if let Some(ack) = ack {
                    client.send(None, Message::Ack(ack)).await?;
                }
                continue;
            }
            envelope = client.next() => match envelope {
                Ok(envelope) => envelope,
                // A connection closed hard right after `bye` still means "come back".
                Err(_) if reconnect => return Ok(SessionEnd::Reconnect),
                Err(error) => return Err(error.into()),
            },
        };
        let Some(envelope) = envelope else {
            eprintln!("fake plugin: the daemon closed the connection");
            return Ok(if reconnect {
                SessionEnd::Reconnect
            } else {
                SessionEnd::Closed
            });
        };
        match envelope.message {
            Message::Drive(drive) => {
                eprintln!(
                    "fake plugin: drive {} ({} chars)",
                    drive.drive_id,
                    drive.prompt.chars().count()
                );
                if let Some(path) = &args.record {
                    record(path, &drive)?;
                }
                if args.behaviour == Behaviour::Drop {
                    eprintln!("fake plugin: dropping the connection as told");
                    return Ok(SessionEnd::Closed);
                }
                running.retain(|_, task| !task.is_finished());
                let store = args.claude_store.as_ref().map(|dir| FakeAgentStore {
                    file: dir.join(format!("{session_file}.jsonl")),
                    session: session_file.clone(),
                    cwd: args.workspace[0].display().to_string(),
                    reply_delay: Duration::from_millis(args.reply_delay_ms),
                });
                let task = tokio::spawn(answer(
                    acks_tx.clone(),
                    drive.clone(),
                    args.behaviour,
                    args.delay_ms,
                    store,
                ));
                running.insert(drive.drive_id, task);
            }
            Message::Cancel(cancel) => {
                if let Some(task) = running.remove(&cancel.drive_id) {
                    task.abort();
                }
                eprintln!(
                    "fake plugin: drive {} cancelled ({})",
                    cancel.drive_id, cancel.reason
                );
            }
            Message::Bye(bye) => {
                let reason = bye.reason.unwrap_or_default();
                eprintln!("fake plugin: daemon said bye ({reason})");
                reconnect = reason == crate::app::recovery::RECONNECT_REQUESTED;
            }
            Message::Error(error) => {
                eprintln!(
                    "fake plugin: daemon error {}: {}",
                    error.code, error.message
                );
            }
            _ => {}
        }
    }
}

async fn answer(
    acks: tokio::sync::mpsc::Sender<Ack>,
    drive: DriveRequest,
    behaviour: Behaviour,
    delay_ms: u64,
    store: Option<FakeAgentStore>,
) {
    use koru_protocol::Route;
    let refuse = |code: &str, detail: &str| Some(Blocker::new(code, detail));
    let (stages, blocker): (&[AckStage], Option<Blocker>) = match (behaviour, drive.route) {
        (Behaviour::Nack, _) => (
            &[AckStage::Received, AckStage::Failed],
            refuse(
                koru_protocol::blocker::CAPABILITY_MISSING,
                "fake plugin (--behaviour nack) refuses every drive",
            ),
        ),
        (Behaviour::NackNative, Route::NativeSend) => (
            &[AckStage::Received, AckStage::Failed],
            refuse(
                koru_protocol::blocker::COMMAND_NOT_ALLOWED,
                "fake plugin (--behaviour nack-native) refuses native send",
            ),
        ),
        (Behaviour::StallAfterPasted, _) => (
            &[AckStage::Received, AckStage::Focused, AckStage::Pasted],
            None,
        ),
        // A native send is one command: received, then submitted (or left in the input).
        (_, Route::NativeSend) if drive.options.submit => {
            (&[AckStage::Received, AckStage::Submitted], None)
        }
        (_, Route::NativeSend) => (&[AckStage::Received, AckStage::Pasted], None),
        _ if drive.options.submit => (
            &[
                AckStage::Received,
                AckStage::Focused,
                AckStage::Pasted,
                AckStage::Submitted,
            ],
            None,
        ),
        _ => (
            &[AckStage::Received, AckStage::Focused, AckStage::Pasted],
            None,
        ),
    };
    for stage in stages {
        if behaviour == Behaviour::Slow {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
        let ack = Ack {
            drive_id: drive.drive_id.clone(),
            stage: *stage,
            blocker: (*stage == AckStage::Failed)
                .then(|| blocker.clone())
                .flatten(),
            evidence: None,
        };
        if acks.send(ack).await.is_err() {
            return;
        }
    }
    if stages.last() == Some(&AckStage::Submitted) {
        if let Some(store) = store {
            tokio::spawn(store.play_turn(drive.prompt.clone()));
        }
    }
}

fn record(path: &Path, drive: &DriveRequest) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let line = serde_json::json!({
        "drive_id": drive.drive_id,
        "prompt": drive.prompt,
        "submit": drive.options.submit,
        "route": drive.route,
    });
    writeln!(file, "{line}").with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

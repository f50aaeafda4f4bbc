//! `koru dev fake-plugin`: a reference plugin that speaks the protocol as an IDE plugin would and plays a fake IDE whose commands are exactly the ones it announces, executing each drive's steps against it and acking only what they prove (as the VS Code extension's executor does), with scripted behaviours for tests and demos.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use koru_protocol::{
    Ack, AckStage, Blocker, Capability, ChatReadiness, DriveRequest, DriveStep, IdeInfo,
    IdeProduct, Message, PluginEvent, PluginEventKind, Route, SubmitEvidence, WindowInfo,
};

use crate::control::{plugin_hello, Client};

/// How the fake plugin answers drives. Every behaviour that runs steps runs them honestly:
/// a step whose command the fake IDE lacks fails, and a drive is acked only as far as its
/// steps prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Behaviour {
    /// Run each drive's steps in order and ack the stage each one proves, as the real
    /// extension does.
    Ack,
    /// Ack `received`, then fail every drive with a `capability_missing` blocker.
    Nack,
    /// Like `ack`, waiting `--delay-ms` before `received` and before each step.
    Slow,
    /// Disconnect (without bye) on the first drive.
    Drop,
    /// Like `ack`, but never answer the daemon's pings (to test heartbeat loss).
    Mute,
    /// Refuse native-send drives (`command_not_allowed`, as a command outside the plugin's
    /// allow-list is refused); run every other route's steps as `ack` does.
    NackNative,
    /// Run the steps up to the first one that would prove `submitted`, then go silent as if
    /// that command never returned (the drive must time out and never be submitted twice).
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
    /// Claim the window has focus (without it the daemon will not press a route's submit
    /// key, such as Cursor's Return, into this window)
    #[arg(long)]
    pub focused: bool,
    #[arg(long, value_enum, default_value_t = Behaviour::Ack)]
    pub behaviour: Behaviour,
    /// Delay before `received` and before each step with --behaviour slow
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub delay_ms: u64,
    /// Append each received drive as one JSON line {drive_id, prompt, submit, route, steps}
    /// to this file (`steps`: the commands it was asked to run)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Do not announce the registry catalog's commands and tool windows for the product as
    /// capabilities (by default the fake plugin claims every command and tool window its
    /// product's routes need, as a real plugin in a complete IDE would). The fake IDE then
    /// has only its built-in commands (the clipboard paste), and steps naming others fail.
    #[arg(long)]
    pub no_commands: bool,
    /// The fake IDE lacks this command although the registry's routes need it (repeat for
    /// several): it is not announced, and a step that names it fails as the real extension's
    /// does when VS Code's executeCommand rejects
    #[arg(long, value_name = "COMMAND")]
    pub without_command: Vec<String>,
    /// Say in hello that the window's chat cannot take a request now, for this reason (the
    /// fake's emulation of a chat with no usable model)
    #[arg(long, value_name = "REASON")]
    pub chat_not_ready: Option<String>,
    /// This long after connecting, report that the chat became ready (a `chat_readiness`
    /// event: the fake's emulation of the user picking a model)
    #[arg(long, value_name = "MS")]
    pub ready_after_ms: Option<u64>,
    /// Play a fresh window whose chat lists a model but cannot use it yet (the model is
    /// selected this long after the fake starts): native-send drives before then are acked
    /// `received`, then refused with `chat_refused` "Language model unavailable" and
    /// `refusal: not_ready`, as the extension reports VS Code's refusal of a request it did
    /// not take; later ones run as `ack` does
    #[arg(long, value_name = "MS")]
    pub model_usable_after_ms: Option<u64>,
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
    /// With --claude-store: the agent's reply is this file's whole text (read at each turn),
    /// instead of "Done: <the prompt's first line>"
    #[arg(long, value_name = "FILE", requires = "claude_store")]
    pub reply_file: Option<PathBuf>,
    /// With --claude-store: before its reply the agent runs this shell command through its
    /// `Bash` tool (recorded as the tool call and its result, `exit N` ending the output
    /// when the command failed), as Claude Code records a step
    #[arg(long, value_name = "COMMAND", requires = "claude_store")]
    pub tool_call: Option<String>,
}

/// Where and how the fake "IDE" records its agent's turns (`--claude-store`).
#[derive(Debug, Clone)]
struct FakeAgentStore {
    file: PathBuf,
    session: String,
    cwd: String,
    reply_delay: Duration,
    reply_file: Option<PathBuf>,
    tool_call: Option<String>,
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
        let mut parent = id;
        if let Some(command) = &self.tool_call {
            // The agent's step: its Bash tool call, run for real in the workspace, and the
            // result as Claude Code records it.
            let call_id = format!("toolu_{}", uuid::Uuid::new_v4().simple());
            let call_uuid = uuid::Uuid::new_v4().to_string();
            self.append(serde_json::json!({"parentUuid": parent, "isSidechain": false, "cwd": self.cwd,
                "sessionId": self.session, "version": "2.1.220", "type": "assistant",
                "message": {"role": "assistant", "model": "fake-model", "id": format!("msg_{}", uuid::Uuid::new_v4().simple()),
                    "content": [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command, "description": "Run the command"}}],
                    "stop_reason": "tool_use"},
                "uuid": call_uuid, "timestamp": Self::now()}));
            let ran = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(&self.cwd)
                .output()
                .await;
            let (output, failed) = match ran {
                Ok(out) => {
                    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                    text.push_str(&String::from_utf8_lossy(&out.stderr));
                    match out.status.code() {
                        Some(0) => (text, false),
                        code => (format!("Exit code {}\n{text}", code.unwrap_or(-1)), true),
                    }
                }
                Err(error) => (format!("cannot run: {error}"), true),
            };
            let result_uuid = uuid::Uuid::new_v4().to_string();
            self.append(serde_json::json!({"parentUuid": call_uuid, "isSidechain": false, "cwd": self.cwd,
                "sessionId": self.session, "version": "2.1.220", "type": "user",
                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": failed}]},
                "toolUseResult": {"stdout": output, "stderr": "", "interrupted": false},
                "uuid": result_uuid, "timestamp": Self::now()}));
            parent = result_uuid;
        }
        tokio::time::sleep(self.reply_delay).await;
        let reply = match &self.reply_file {
            Some(path) => std::fs::read_to_string(path).unwrap_or_else(|error| {
                eprintln!("fake plugin: cannot read {}: {error}", path.display());
                String::new()
            }),
            None => format!("Done: {}", prompt.lines().next().unwrap_or("")),
        };
        let reply_id = uuid::Uuid::new_v4().to_string();
        self.append(serde_json::json!({"parentUuid": parent, "isSidechain": false, "cwd": self.cwd,
            "sessionId": self.session, "version": "2.1.220", "type": "assistant",
            "message": {"role": "assistant", "model": "fake-model", "id": format!("msg_{}", uuid::Uuid::new_v4().simple()),
                "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 12, "output_tokens": 34}},
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

/// The `command:` and `tool_window:` capabilities the registry's routes for `product` require
/// — not those of routes into an agent's own chat panel (`applies_to.agents`: the Claude
/// Code extension's), whose tab this fake has nothing to stand for.
fn catalog_commands(product: &str) -> Vec<Capability> {
    let layers = crate::registry::LayerPaths::discover(None, None);
    let loaded = crate::registry::load_layers(&layers);
    let platform =
        crate::doctor::probe::current_platform().unwrap_or(koru_registry::Platform::Linux);
    let mut wanted: Vec<String> = koru_registry::rank_routes(&loaded.registry, product, platform)
        .iter()
        .filter(|route| route.applies_to.agents.is_empty())
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

/// How long the fake plugin waits for a workspace folder that does not exist yet: a script
/// may start it and make the folder a moment later.
const WORKSPACE_WAIT: Duration = Duration::from_secs(5);

/// A workspace folder's canonical path, once it exists (waiting up to [`WORKSPACE_WAIT`]).
async fn workspace_folder(dir: &Path) -> anyhow::Result<String> {
    let deadline = std::time::Instant::now() + WORKSPACE_WAIT;
    loop {
        match std::fs::canonicalize(dir) {
            Ok(path) => return Ok(path.to_string_lossy().into_owned()),
            Err(error)
                if error.kind() == std::io::ErrorKind::NotFound
                    && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "workspace {} does not exist (waited {} s for it)",
                        dir.display(),
                        WORKSPACE_WAIT.as_secs()
                    )
                })
            }
        }
    }
}

pub async fn run(socket: &Path, args: FakePluginArgs) -> anyhow::Result<ExitCode> {
    let product: IdeProduct = args.product.parse().unwrap_or_else(|never| match never {});
    let mut folders = Vec::with_capacity(args.workspace.len());
    for dir in &args.workspace {
        folders.push(workspace_folder(dir).await?);
    }
    let mut capabilities = vec![
        Capability::NativeSend,
        Capability::PluginDrive,
        Capability::Clipboard,
        Capability::ChatEvents,
    ];
    if !args.no_commands {
        capabilities.extend(catalog_commands(&product.to_string()).into_iter().filter(
            |capability| {
                !matches!(capability, Capability::Command { id } if args.without_command.contains(id))
            },
        ));
    }
    let ide = FakeIde::new(&product, &capabilities, &args.without_command);
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
    hello.chat = args.chat_not_ready.as_ref().map(|reason| ChatReadiness {
        ready: false,
        reason: Some(reason.clone()),
    });
    if hello.chat.is_none() && args.model_usable_after_ms.is_some() {
        // A model is listed, so the extension says ready: the chat's refusal tells the rest.
        hello.chat = Some(ChatReadiness {
            ready: true,
            reason: None,
        });
    }
    if let Some(range) = &args.protocol {
        hello.protocol = parse_range(range)?;
    }
    let model_usable_at = args
        .model_usable_after_ms
        .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    let ide = Arc::new(Mutex::new(ide));
    loop {
        match serve(socket, hello.clone(), &args, ide.clone(), model_usable_at).await? {
            SessionEnd::Reconnect => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                eprintln!("fake plugin: reconnecting as the daemon asked");
            }
            SessionEnd::Closed => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// The fake IDE the fake plugin plays: a command table and a clipboard, and the chat input
/// a paste lands in. Its commands are exactly the `command:` capabilities the plugin
/// announced plus what the plugin itself provides: in the VS Code family the IDE's own
/// `editor.action.clipboardPasteAction`; in a JetBrains IDE the JetBrains plugin's built-in
/// steps, which act on the tool windows it announced.
#[derive(Debug, Clone, Default)]
pub struct FakeIde {
    commands: BTreeSet<String>,
    tool_windows: BTreeSet<String>,
    /// The system clipboard as the fake IDE sees it.
    pub clipboard: String,
    /// What the chat input holds (a paste appends the clipboard; a submit empties it).
    pub chat_input: String,
    /// The prompts this fake chat was sent.
    pub sent: Vec<String>,
    /// New chats opened (Cursor's `composer.createNew`): the chat before them is left as
    /// it was, so `chat_input` then belongs to the new one.
    pub chats_opened: usize,
}

/// VS Code's paste command: the executor puts the prompt on the clipboard around it.
pub const VSCODE_PASTE: &str = "editor.action.clipboardPasteAction";
/// The JetBrains plugin's paste step (same clipboard dance).
const JETBRAINS_PASTE: &str = "koru.paste";
const JETBRAINS_BUILT_IN: [&str; 4] = [
    "koru.activateToolWindow",
    "koru.focusInput",
    JETBRAINS_PASTE,
    "koru.submit",
];

impl FakeIde {
    /// The IDE a plugin that announced `capabilities` runs in, minus the commands in `lacking`.
    pub fn new(product: &IdeProduct, capabilities: &[Capability], lacking: &[String]) -> Self {
        let mut commands: BTreeSet<String> = capabilities
            .iter()
            .filter_map(|capability| match capability {
                Capability::Command { id } => Some(id.clone()),
                _ => None,
            })
            .collect();
        let tool_windows = capabilities
            .iter()
            .filter_map(|capability| match capability {
                Capability::ToolWindow { id } => Some(id.clone()),
                _ => None,
            })
            .collect();
        if product.is_vscode_family() {
            commands.insert(VSCODE_PASTE.to_string());
        } else if matches!(product, IdeProduct::JetBrains(_)) {
            commands.extend(JETBRAINS_BUILT_IN.iter().map(|c| c.to_string()));
        }
        commands.retain(|command| !lacking.contains(command));
        FakeIde {
            commands,
            tool_windows,
            clipboard: "the user's clipboard".into(),
            ..FakeIde::default()
        }
    }

    /// Runs one command with its (already substituted) arguments, as the IDE would: a
    /// command the IDE does not have is rejected with VS Code's own wording.
    fn execute(&mut self, command: &str, args: &[serde_json::Value]) -> Result<(), String> {
        if !self.commands.contains(command) {
            return Err(format!("command '{command}' not found"));
        }
        let tool_window = || args.first().and_then(|a| a.as_str()).unwrap_or_default();
        match command {
            VSCODE_PASTE | JETBRAINS_PASTE => self.chat_input.push_str(&self.clipboard),
            "koru.activateToolWindow" | "koru.focusInput" | "koru.submit"
                if !self.tool_windows.contains(tool_window()) =>
            {
                return Err(format!("no tool window {:?} in this IDE", tool_window()));
            }
            "koru.submit" => self.sent.push(std::mem::take(&mut self.chat_input)),
            // Cursor's new-chat call: `{partialState: {text}, autoSubmit}` opens a new chat
            // holding the text, and sends it when asked to.
            "composer.createNew" => {
                let options = args.first().cloned().unwrap_or_default();
                let text = options["partialState"]["text"].as_str().unwrap_or_default();
                self.chats_opened += 1;
                self.chat_input = text.to_string();
                if options["autoSubmit"] == serde_json::Value::Bool(true) {
                    self.sent.push(std::mem::take(&mut self.chat_input));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Replaces every string `"$prompt"` inside step arguments with the prompt (at any depth).
fn substitute_prompt(value: &serde_json::Value, prompt: &str) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) if s == "$prompt" => Value::String(prompt.to_string()),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| substitute_prompt(v, prompt)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute_prompt(v, prompt)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// How one drive is paced and where it stops, by behaviour.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// Wait before `received` and before each step.
    before_each: Duration,
    /// Go silent instead of running a step that would prove `submitted`.
    stall_at_submit: bool,
}

impl Pace {
    /// Waits `before_each`; not at all when it is zero (a zero tokio sleep still waits for
    /// the timer's next millisecond tick, which made every drive of `--behaviour ack` take
    /// 2 ms or more).
    async fn wait(&self) {
        if !self.before_each.is_zero() {
            tokio::time::sleep(self.before_each).await;
        }
    }
}

/// Executes a drive's steps against the fake IDE as the extension's executor
/// (plugins/vscode/src/executor.ts) does: no steps → `failed`/`capability_missing`;
/// `received`; each step in order, acking the stage it proves, the first that fails acking
/// `failed`/`capability_missing` and ending the drive; a drive that must submit whose steps
/// stop short of `submitted` → `failed`/`capability_missing` after its last step. The paste
/// step gets the prompt on the clipboard, which is restored afterwards whatever happened.
/// `submitted` carries evidence `command_returned`: the fake has no chat to confirm it.
/// Returns the last stage acked, or `None` when the daemon stopped listening.
async fn execute_drive(
    drive: &DriveRequest,
    ide: &Mutex<FakeIde>,
    pace: Pace,
    acks: &tokio::sync::mpsc::Sender<Ack>,
) -> Option<AckStage> {
    let send = |ack: Ack| async move {
        let stage = ack.stage;
        acks.send(ack).await.ok().map(|()| stage)
    };
    let ack = |stage: AckStage, blocker: Option<Blocker>| Ack {
        drive_id: drive.drive_id.clone(),
        stage,
        blocker,
        evidence: (stage == AckStage::Submitted).then_some(SubmitEvidence::CommandReturned),
        refusal: None,
    };
    let capability_missing = |detail: String| {
        ack(
            AckStage::Failed,
            Some(Blocker::new(
                koru_protocol::blocker::CAPABILITY_MISSING,
                detail,
            )),
        )
    };
    if drive.steps.is_empty() {
        return send(capability_missing("the drive names no steps to run".into())).await;
    }
    pace.wait().await;
    let mut last = send(ack(AckStage::Received, None)).await?;
    let mut saved_clipboard: Option<String> = None;
    for step in &drive.steps {
        pace.wait().await;
        if pace.stall_at_submit && step.proves == AckStage::Submitted {
            eprintln!(
                "fake plugin: drive {} stalls at `{}` as told",
                drive.drive_id, step.command
            );
            restore_clipboard(ide, saved_clipboard.take());
            std::future::pending::<()>().await;
        }
        let outcome = run_step(step, &drive.prompt, ide, &mut saved_clipboard);
        let sent = match outcome {
            Ok(()) => send(ack(step.proves, None)).await,
            Err(detail) => send(capability_missing(detail)).await,
        };
        match sent {
            Some(AckStage::Failed) | None => {
                restore_clipboard(ide, saved_clipboard.take());
                return sent;
            }
            Some(stage) => last = stage,
        }
    }
    restore_clipboard(ide, saved_clipboard.take());
    if drive.options.submit && last != AckStage::Submitted {
        return send(capability_missing(format!(
            "the route's steps stop at `{}` and none submits: the prompt is in the chat input, unsent",
            stage_name(last)
        )))
        .await;
    }
    Some(last)
}

/// An ack stage as the wire spells it.
fn stage_name(stage: AckStage) -> String {
    serde_json::to_value(stage)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Runs one step in the fake IDE; `Err` carries the blocker's detail.
fn run_step(
    step: &DriveStep,
    prompt: &str,
    ide: &Mutex<FakeIde>,
    saved_clipboard: &mut Option<String>,
) -> Result<(), String> {
    let args: Vec<serde_json::Value> = step
        .args
        .iter()
        .map(|arg| substitute_prompt(arg, prompt))
        .collect();
    let mut ide = ide
        .lock()
        .map_err(|_| "the fake IDE is broken".to_string())?;
    if step.command == VSCODE_PASTE || step.command == JETBRAINS_PASTE {
        if saved_clipboard.is_none() {
            *saved_clipboard = Some(ide.clipboard.clone());
        }
        ide.clipboard = prompt.to_string();
    }
    ide.execute(&step.command, &args)
        .map_err(|error| format!("{} failed: {error}", step.command))
}

fn restore_clipboard(ide: &Mutex<FakeIde>, saved: Option<String>) {
    if let (Some(previous), Ok(mut ide)) = (saved, ide.lock()) {
        ide.clipboard = previous;
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
    ide: Arc<Mutex<FakeIde>>,
    model_usable_at: Option<tokio::time::Instant>,
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
    // The fake's emulation of a chat that becomes ready (the user picked a model).
    let ready_at = args
        .ready_after_ms
        .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    let mut readiness_sent = false;
    loop {
        let envelope = tokio::select! {
            ack = acks_rx.recv() => {
                if let Some(ack) = ack {
                    client.send(None, Message::Ack(ack)).await?;
                }
                continue;
            }
            _ = tokio::time::sleep_until(ready_at.unwrap_or_else(tokio::time::Instant::now)), if ready_at.is_some() && !readiness_sent => {
                readiness_sent = true;
                eprintln!("fake plugin: the chat is ready now");
                let event = PluginEventKind::ChatReadiness { ready: true, reason: None };
                client.send(None, Message::Event(PluginEvent { event })).await?;
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
                    "fake plugin: drive {} ({} chars, {} steps)",
                    drive.drive_id,
                    drive.prompt.chars().count(),
                    drive.steps.len()
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
                    reply_file: args.reply_file.clone(),
                    tool_call: args.tool_call.clone(),
                });
                let model_unusable =
                    model_usable_at.is_some_and(|at| tokio::time::Instant::now() < at);
                let task = if model_unusable && drive.route == Route::NativeSend {
                    eprintln!("fake plugin: the chat has no usable model yet: refused");
                    tokio::spawn(refuse_not_ready(acks_tx.clone(), drive.drive_id.clone()))
                } else {
                    tokio::spawn(answer(
                        acks_tx.clone(),
                        drive.clone(),
                        args.behaviour,
                        args.delay_ms,
                        ide.clone(),
                        store,
                    ))
                };
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
                reconnect = reason == koru_protocol::RECONNECT_REQUESTED;
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

/// What the extension sends for a request VS Code's chat refused before taking it because
/// no model was usable yet: `received`, then, when the chat's refusal came back (after a
/// moment, as the chat's does), `failed` with `chat_refused` and `refusal: not_ready`.
async fn refuse_not_ready(acks: tokio::sync::mpsc::Sender<Ack>, drive_id: String) {
    let received = Ack {
        drive_id: drive_id.clone(),
        stage: AckStage::Received,
        blocker: None,
        evidence: None,
        refusal: None,
    };
    if acks.send(received).await.is_err() {
        return;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = acks
        .send(Ack {
            drive_id,
            stage: AckStage::Failed,
            blocker: Some(Blocker::new(
                koru_protocol::blocker::CHAT_REFUSED,
                "Language model unavailable",
            )),
            evidence: None,
            refusal: Some(koru_protocol::Refusal::NotReady),
        })
        .await;
}

/// Answers one drive as `behaviour` says.
async fn answer(
    acks: tokio::sync::mpsc::Sender<Ack>,
    drive: DriveRequest,
    behaviour: Behaviour,
    delay_ms: u64,
    ide: Arc<Mutex<FakeIde>>,
    store: Option<FakeAgentStore>,
) {
    let refuse = |code: &str, detail: &str| Ack {
        drive_id: drive.drive_id.clone(),
        stage: AckStage::Failed,
        blocker: Some(Blocker::new(code, detail)),
        evidence: None,
        refusal: None,
    };
    match (behaviour, drive.route) {
        (Behaviour::Nack, _) => {
            let received = Ack {
                drive_id: drive.drive_id.clone(),
                stage: AckStage::Received,
                blocker: None,
                evidence: None,
                refusal: None,
            };
            for ack in [
                received,
                refuse(
                    koru_protocol::blocker::CAPABILITY_MISSING,
                    "fake plugin (--behaviour nack) refuses every drive",
                ),
            ] {
                if acks.send(ack).await.is_err() {
                    return;
                }
            }
            return;
        }
        (Behaviour::NackNative, Route::NativeSend) => {
            // As a command outside the plugin's allow-list: refused before anything runs.
            let _ = acks
                .send(refuse(
                    koru_protocol::blocker::COMMAND_NOT_ALLOWED,
                    "fake plugin (--behaviour nack-native) refuses native send",
                ))
                .await;
            return;
        }
        _ => {}
    }
    let pace = Pace {
        before_each: if behaviour == Behaviour::Slow {
            Duration::from_millis(delay_ms)
        } else {
            Duration::ZERO
        },
        stall_at_submit: behaviour == Behaviour::StallAfterPasted,
    };
    let last = execute_drive(&drive, &ide, pace, &acks).await;
    if last == Some(AckStage::Submitted) {
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
    let steps: Vec<&str> = drive.steps.iter().map(|s| s.command.as_str()).collect();
    let line = serde_json::json!({
        "drive_id": drive.drive_id,
        "prompt": drive.prompt,
        "submit": drive.options.submit,
        "route": drive.route,
        "steps": steps,
    });
    writeln!(file, "{line}").with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::DriveOptions;

    fn command(id: &str) -> Capability {
        Capability::Command { id: id.into() }
    }

    fn step(command: &str, proves: AckStage) -> DriveStep {
        DriveStep {
            command: command.into(),
            args: Vec::new(),
            proves,
        }
    }

    fn drive(route: Route, steps: Vec<DriveStep>, submit: bool) -> DriveRequest {
        DriveRequest {
            drive_id: "d_1".into(),
            prompt: "Fix it ✓\nline two".into(),
            options: DriveOptions {
                submit,
                ..DriveOptions::default()
            },
            route,
            steps,
        }
    }

    fn cursor() -> Mutex<FakeIde> {
        Mutex::new(FakeIde::new(
            &IdeProduct::Cursor,
            &[
                command("composer.focusComposer"),
                command("composer.createNew"),
            ],
            &[],
        ))
    }

    fn cursor_paste_steps() -> Vec<DriveStep> {
        vec![
            step("composer.focusComposer", AckStage::Focused),
            step(VSCODE_PASTE, AckStage::Pasted),
        ]
    }

    const AT_ONCE: Pace = Pace {
        before_each: Duration::ZERO,
        stall_at_submit: false,
    };

    /// The acks the fake sends for `drive`, as `stage` or `failed code: detail`, and the
    /// last stage `execute_drive` reports.
    async fn acks_for(
        drive: &DriveRequest,
        ide: &Mutex<FakeIde>,
        pace: Pace,
    ) -> (Vec<String>, Option<AckStage>) {
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let last = execute_drive(drive, ide, pace, &tx).await;
        drop(tx);
        let mut seen = Vec::new();
        while let Some(ack) = rx.recv().await {
            assert_eq!(ack.drive_id, "d_1");
            assert_eq!(
                ack.evidence.is_some(),
                ack.stage == AckStage::Submitted,
                "evidence only with submitted"
            );
            seen.push(match ack.blocker {
                Some(blocker) => format!("failed {}: {}", blocker.code, blocker.detail),
                None => stage_name(ack.stage),
            });
        }
        (seen, last)
    }

    #[tokio::test]
    async fn cursor_new_chat_opens_a_chat_and_sends_the_prompt_only_when_asked_to_submit() {
        let ide = cursor();
        let new_chat = |auto_submit: bool| DriveStep {
            command: "composer.createNew".into(),
            args: vec![serde_json::json!({
                "partialState": {"text": "$prompt"},
                "autoSubmit": auto_submit,
            })],
            proves: if auto_submit {
                AckStage::Submitted
            } else {
                AckStage::Pasted
            },
        };
        let sent = drive(Route::NativeSend, vec![new_chat(true)], true);
        let (acks, last) = acks_for(&sent, &ide, AT_ONCE).await;
        assert_eq!(acks, ["received", "submitted"]);
        assert_eq!(last, Some(AckStage::Submitted));
        {
            let ide = ide.lock().unwrap();
            assert_eq!(ide.chats_opened, 1);
            assert_eq!(ide.sent, ["Fix it ✓\nline two"]);
            assert_eq!(ide.chat_input, "");
        }
        let unsent = drive(Route::NativeSend, vec![new_chat(false)], false);
        let (acks, _) = acks_for(&unsent, &ide, AT_ONCE).await;
        assert_eq!(acks, ["received", "pasted"]);
        let ide = ide.lock().unwrap();
        assert_eq!(ide.chats_opened, 2);
        assert_eq!(ide.sent.len(), 1, "not sent without autoSubmit");
        assert_eq!(ide.chat_input, "Fix it ✓\nline two");
    }

    #[tokio::test]
    async fn a_paste_route_sent_without_submit_is_acked_up_to_pasted_and_the_clipboard_restored() {
        let ide = cursor();
        let drive = drive(Route::PluginDrive, cursor_paste_steps(), false);
        let (acks, last) = acks_for(&drive, &ide, AT_ONCE).await;
        assert_eq!(acks, ["received", "focused", "pasted"]);
        assert_eq!(last, Some(AckStage::Pasted));
        let ide = ide.lock().unwrap();
        assert_eq!(ide.chat_input, "Fix it ✓\nline two", "the paste landed");
        assert_eq!(
            ide.clipboard, "the user's clipboard",
            "and the clipboard is back"
        );
    }

    #[tokio::test]
    async fn a_drive_that_must_submit_whose_steps_stop_at_pasted_fails_as_the_extension_does() {
        let drive = drive(Route::PluginDrive, cursor_paste_steps(), true);
        let (acks, last) = acks_for(&drive, &cursor(), AT_ONCE).await;
        assert_eq!(
            acks,
            [
                "received",
                "focused",
                "pasted",
                "failed capability_missing: the route's steps stop at `pasted` and none submits: the prompt is in the chat input, unsent"
            ]
        );
        assert_eq!(last, Some(AckStage::Failed));
    }

    #[tokio::test]
    async fn a_command_the_fake_ide_lacks_fails_its_step_and_nothing_runs_after_it() {
        let ide = cursor();
        let drive = drive(
            Route::PluginDrive,
            vec![
                step(VSCODE_PASTE, AckStage::Pasted),
                step("composer.startComposerPrompt", AckStage::Focused),
                step("composer.focusComposer", AckStage::Submitted),
            ],
            true,
        );
        let (acks, _) = acks_for(&drive, &ide, AT_ONCE).await;
        assert_eq!(
            acks,
            [
                "received",
                "pasted",
                "failed capability_missing: composer.startComposerPrompt failed: command 'composer.startComposerPrompt' not found"
            ]
        );
        assert_eq!(ide.lock().unwrap().clipboard, "the user's clipboard");
        // A command left out with --without-command is gone from the table, built-ins too.
        let lacking = Mutex::new(FakeIde::new(
            &IdeProduct::Cursor,
            &[command("composer.focusComposer")],
            &[VSCODE_PASTE.to_string()],
        ));
        let drive = super::tests::drive(Route::PluginDrive, cursor_paste_steps(), false);
        let (acks, _) = acks_for(&drive, &lacking, AT_ONCE).await;
        assert_eq!(
            acks,
            [
                "received",
                "focused",
                "failed capability_missing: editor.action.clipboardPasteAction failed: command 'editor.action.clipboardPasteAction' not found"
            ]
        );
    }

    #[tokio::test]
    async fn a_drive_with_no_steps_is_refused_without_received() {
        let drive = drive(Route::PluginDrive, Vec::new(), true);
        let (acks, _) = acks_for(&drive, &cursor(), AT_ONCE).await;
        assert_eq!(
            acks,
            ["failed capability_missing: the drive names no steps to run"]
        );
    }

    #[tokio::test]
    async fn a_step_that_proves_submitted_is_acked_submitted_with_command_returned() {
        let ide = Mutex::new(FakeIde::new(
            &IdeProduct::VsCode,
            &[command("workbench.action.chat.open")],
            &[],
        ));
        let mut native = drive(
            Route::NativeSend,
            vec![DriveStep {
                command: "workbench.action.chat.open".into(),
                args: vec![serde_json::json!({"query": "$prompt"})],
                proves: AckStage::Submitted,
            }],
            true,
        );
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        assert_eq!(
            execute_drive(&native, &ide, AT_ONCE, &tx).await,
            Some(AckStage::Submitted)
        );
        let received = rx.recv().await.unwrap();
        assert_eq!(
            (received.stage, received.evidence),
            (AckStage::Received, None)
        );
        let submitted = rx.recv().await.unwrap();
        assert_eq!(
            (submitted.stage, submitted.evidence),
            (AckStage::Submitted, Some(SubmitEvidence::CommandReturned))
        );
        // Nested `$prompt` is substituted, as the extension does.
        assert_eq!(
            substitute_prompt(
                &serde_json::json!([{"partialState": {"text": "$prompt"}, "autoSubmit": true}]),
                "p"
            ),
            serde_json::json!([{"partialState": {"text": "p"}, "autoSubmit": true}])
        );
        native.steps[0].command = "workbench.action.chat.submit".into();
        let (acks, _) = acks_for(&native, &ide, AT_ONCE).await;
        assert_eq!(acks[1], "failed capability_missing: workbench.action.chat.submit failed: command 'workbench.action.chat.submit' not found");
    }

    #[tokio::test]
    async fn stall_after_pasted_goes_silent_instead_of_running_the_submit_step() {
        let ide = Mutex::new(FakeIde::new(
            &IdeProduct::VsCode,
            &[
                command("workbench.action.chat.focusInput"),
                command("workbench.action.chat.submit"),
            ],
            &[],
        ));
        let drive = drive(
            Route::PluginDrive,
            vec![
                step("workbench.action.chat.focusInput", AckStage::Focused),
                step(VSCODE_PASTE, AckStage::Pasted),
                step("workbench.action.chat.submit", AckStage::Submitted),
            ],
            true,
        );
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let stall = Pace {
            before_each: Duration::ZERO,
            stall_at_submit: true,
        };
        let run = tokio::time::timeout(
            Duration::from_millis(200),
            execute_drive(&drive, &ide, stall, &tx),
        )
        .await;
        assert!(run.is_err(), "the drive stays silent");
        let mut stages = Vec::new();
        while let Ok(ack) = rx.try_recv() {
            stages.push(ack.stage);
        }
        assert_eq!(
            stages,
            [AckStage::Received, AckStage::Focused, AckStage::Pasted]
        );
        assert_eq!(ide.lock().unwrap().clipboard, "the user's clipboard");
    }

    #[tokio::test]
    async fn jetbrains_built_in_steps_act_only_on_announced_tool_windows() {
        let ide = Mutex::new(FakeIde::new(
            &IdeProduct::JetBrains("idea".into()),
            &[Capability::ToolWindow {
                id: "AIAssistant".into(),
            }],
            &[],
        ));
        let steps = |window: &str| {
            let mut steps = vec![
                step("koru.activateToolWindow", AckStage::Focused),
                step("koru.paste", AckStage::Pasted),
                step("koru.submit", AckStage::Submitted),
            ];
            steps[0].args = vec![window.into()];
            steps[2].args = vec![window.into()];
            steps
        };
        let (acks, _) = acks_for(
            &drive(Route::PluginDrive, steps("AIAssistant"), true),
            &ide,
            AT_ONCE,
        )
        .await;
        assert_eq!(acks, ["received", "focused", "pasted", "submitted"]);
        assert_eq!(ide.lock().unwrap().sent, ["Fix it ✓\nline two"]);
        let (acks, _) = acks_for(
            &drive(Route::PluginDrive, steps("Junie"), true),
            &ide,
            AT_ONCE,
        )
        .await;
        assert_eq!(
            acks,
            [
                "received",
                "failed capability_missing: koru.activateToolWindow failed: no tool window \"Junie\" in this IDE"
            ]
        );
    }
}

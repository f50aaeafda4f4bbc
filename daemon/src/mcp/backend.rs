//! What the MCP tools do, without MCP: each call reaches the daemon it is for (this machine's on a fresh connection, or one of several hosts through its kept connection), asks, waits for a drive's stage on the event stream, and returns compact text or a classified tool error; over several hosts ids are qualified `HOST/…` and a host that does not answer is reported without hiding the others.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use koru_protocol::{
    BusyPolicy, DriveCreate, DriveInfo, DriveOptions, DriveState, IdeProduct, SessionsList,
    StreamEvent, Target,
};

use super::format;
use crate::control::hosts::{qualify_drive, qualify_session, split_qualified, Host, LOCAL};
use crate::control::shared::{Conn, HostLink};
use crate::control::{
    follow_drive, ClientError, ClientErrorCode, Controller, EventSource, Incoming,
};

/// The name the MCP face's connections give the daemon.
const CLIENT_NAME: &str = "koru-mcp";

pub use crate::control::MAX_PROMPT_BYTES;
/// The longest a tool waits, in seconds.
pub const MAX_TIMEOUT_S: f64 = 3600.0;
/// How long a tool waits when the caller gives no `timeout_s`.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

/// The stable code a tool error starts with (`error <code>: …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolErrorCode {
    /// An argument the tool cannot use (empty, out of range, malformed).
    InvalidArgument,
    /// The prompt is longer than [`MAX_PROMPT_BYTES`].
    PromptTooLarge,
    /// No window matches the target.
    NoTarget,
    /// The reply cannot be observed for this drive (no chat-store observer).
    NotObservable,
    /// The chat's turn settled without a reply (needs input, cancelled, failed, ambiguous).
    NotReplied(koru_protocol::ObservedStage),
    /// The MCP client cancelled the call.
    Cancelled,
    /// `doctor` could not build its report.
    DoctorFailed,
    /// Talking to the daemon failed (control's one code map).
    Client(ClientErrorCode),
    /// A recovery action did not work: the blocker's code, from the registry's open set.
    Recovery(String),
    /// The caller's role does not allow the tool (`koru mcp --role observe`, or an observe
    /// bearer token over HTTP).
    ForbiddenRole,
}

impl ToolErrorCode {
    /// The spelling in the tool result.
    pub fn as_str(&self) -> &str {
        match self {
            ToolErrorCode::InvalidArgument => "invalid_argument",
            ToolErrorCode::PromptTooLarge => "prompt_too_large",
            ToolErrorCode::NoTarget => "no_target",
            ToolErrorCode::NotObservable => "not_observable",
            ToolErrorCode::NotReplied(stage) => stage.as_str(),
            ToolErrorCode::Cancelled => "cancelled",
            ToolErrorCode::DoctorFailed => "doctor_failed",
            ToolErrorCode::Client(code) => code.as_str(),
            ToolErrorCode::Recovery(blocker) => blocker,
            ToolErrorCode::ForbiddenRole => koru_protocol::ErrorCode::ForbiddenRole.as_str(),
        }
    }
}

impl std::fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure to report as a tool result with `isError`: a stable code, what happened, and
/// what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    pub code: ToolErrorCode,
    pub message: String,
    pub hint: Option<String>,
}

impl ToolError {
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The text of the tool result.
    pub fn render(&self) -> String {
        match &self.hint {
            Some(hint) => format!("error {}: {}\nhint: {hint}", self.code, self.message),
            None => format!("error {}: {}", self.code, self.message),
        }
    }
}

impl From<ClientError> for ToolError {
    fn from(error: ClientError) -> Self {
        let message = match &error {
            ClientError::NoDaemon { path } => format!(
                "no daemon at {}; start it with `koru daemon`",
                path.display()
            ),
            ClientError::Refused(refusal) => refusal.message.clone(),
            other => other.to_string(),
        };
        ToolError::new(ToolErrorCode::Client(error.code()), message)
    }
}

/// How long `send_prompt` waits before it answers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WaitFor {
    /// Answer as soon as the daemon has queued the drive.
    None,
    /// Until the IDE side has the prompt (the plugin acked `received`) or the drive ended.
    Delivered,
    /// Until the prompt was submitted (or left unsent with `submit: false`) or the drive ended.
    Submitted,
    /// Until the chat replied — needs a chat-store observer for the session.
    Replied,
}

/// A validated `send_prompt` call.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The host, when the call names one (over several hosts).
    pub host: Option<String>,
    pub target: String,
    pub prompt: String,
    pub submit: bool,
    pub wait: WaitFor,
    pub timeout_s: Option<f64>,
    /// Type a terminal agent's command prefix (`/`, `!`, `#`) as a command.
    pub agent_command: bool,
}

/// Talks to the daemon(s) on behalf of MCP tools: this machine's at `socket` (one
/// connection per call, as `koru mcp` always has), or the hosts `koru mcp --host …` names,
/// each through one kept connection ([`HostLink`]).
#[derive(Clone)]
pub struct Backend {
    socket: PathBuf,
    hosts: Option<Arc<Vec<HostLink>>>,
}

/// Which daemon a call goes to: this machine's by its socket, or one host's kept link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPick(Option<usize>);

/// Parses a `target` string: a session id (`s_…`, or a terminal agent's `t_…`),
/// `focused`, `chat:CHAT_ID`, a terminal agent as `claude-code` / `agent:codex@/abs/path`,
/// a path (absolute, `~` or containing `/`) for a workspace, or else a product name.
pub fn parse_target(raw: &str) -> Result<Target, ToolError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ToolError::new(
            ToolErrorCode::InvalidArgument,
            "`target` is empty; give a session id, a workspace path, a product or \"focused\"",
        ));
    }
    if raw == "focused" {
        return Ok(Target::Focused);
    }
    if (raw.starts_with("s_") || raw.starts_with("t_")) && !raw.contains('/') {
        return Ok(Target::Session(raw.to_string()));
    }
    if let Some(chat) = raw.strip_prefix("chat:") {
        return Ok(Target::Chat(chat.trim().to_string()));
    }
    let agent = raw.strip_prefix("agent:").or_else(|| {
        TERMINAL_AGENTS
            .iter()
            .any(|name| raw == *name || raw.starts_with(&format!("{name}@")))
            .then_some(raw)
    });
    if let Some(agent) = agent {
        let (product, workspace) = match agent.split_once('@') {
            Some((product, folder)) => (product, Some(folder)),
            None => (agent, None),
        };
        if !TERMINAL_AGENTS.contains(&product) {
            return Err(ToolError::new(
                ToolErrorCode::InvalidArgument,
                format!(
                    "`{product}` is not a terminal agent; use one of {}",
                    TERMINAL_AGENTS.join(", ")
                ),
            ));
        }
        let workspace = match workspace {
            Some(folder) if folder.starts_with('/') => Some(folder.to_string()),
            Some(folder) => {
                return Err(ToolError::new(
                    ToolErrorCode::InvalidArgument,
                    format!("`{folder}` in `{raw}` must be an absolute folder"),
                ))
            }
            None => None,
        };
        return Ok(Target::Agent(koru_protocol::AgentTarget {
            product: product.to_string(),
            workspace,
        }));
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        let home = std::env::var("HOME").unwrap_or_default();
        return Ok(Target::Workspace(format!("{home}/{rest}")));
    }
    if raw.contains('/') {
        return Ok(Target::Workspace(raw.to_string()));
    }
    let product: IdeProduct = raw.parse().unwrap_or_else(|never| match never {});
    Ok(Target::Product(product))
}

/// The terminal agents a target may name by product.
const TERMINAL_AGENTS: &[&str] = &["claude-code", "codex", "gemini-cli", "opencode"];

/// Checks `timeout_s` and turns it into a duration.
pub fn timeout_of(timeout_s: Option<f64>) -> Result<Duration, ToolError> {
    let seconds = timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if !seconds.is_finite() || seconds <= 0.0 || seconds > MAX_TIMEOUT_S {
        return Err(ToolError::new(
            ToolErrorCode::InvalidArgument,
            format!("`timeout_s` must be more than 0 and at most {MAX_TIMEOUT_S}, got {seconds}"),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Checks a prompt against the documented limits.
pub fn check_prompt(prompt: &str) -> Result<(), ToolError> {
    if prompt.trim().is_empty() {
        return Err(ToolError::new(
            ToolErrorCode::InvalidArgument,
            "`prompt` is empty",
        ));
    }
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(ToolError::new(
            ToolErrorCode::PromptTooLarge,
            format!(
                "`prompt` is {} bytes of UTF-8; the limit is {MAX_PROMPT_BYTES} bytes",
                prompt.len()
            ),
        )
        .with_hint(
            "split the prompt, or put the long part in a file in the workspace and refer to it",
        ));
    }
    Ok(())
}

/// Whether a drive in `state` has got as far as `wait` asks (for `replied`: done, and the
/// chat's history settled how the turn ended).
/// Whether waiting for a drive's reply is over: its text can be read back from a chat
/// store, or (`text_awaited` false: the daemon observes no store) the chat said how its
/// turn ended.
fn reply_known(drive: &DriveInfo, text_awaited: bool) -> bool {
    if text_awaited {
        drive.reply_text_known()
    } else {
        drive.reply_settled()
    }
}

fn reached(state: DriveState, settled: bool, wait: WaitFor) -> bool {
    if wait == WaitFor::Replied && state == DriveState::Done {
        return settled;
    }
    if state.is_terminal() {
        return true;
    }
    match wait {
        WaitFor::None => true,
        WaitFor::Delivered => !matches!(state, DriveState::Queued | DriveState::Sent),
        WaitFor::Submitted | WaitFor::Replied => false,
    }
}

/// How long one host may take to answer a merged listing before it is reported down.
const HOST_ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// What one host of several answered, or why it did not.
pub struct HostAnswer<T> {
    /// The host's name; `None` for this machine's daemon asked by its socket.
    pub host: Option<String>,
    pub answer: Result<T, ToolError>,
}

impl Backend {
    pub fn new(socket: PathBuf) -> Self {
        Backend {
            socket,
            hosts: None,
        }
    }

    /// A backend over `hosts`, one kept connection each (connected in the background now,
    /// so the first call finds them ready); `socket` is this machine's, for `doctor`.
    pub fn for_hosts(socket: PathBuf, hosts: Vec<Host>) -> Self {
        let links: Vec<HostLink> = hosts
            .into_iter()
            .map(|host| HostLink::new(host, CLIENT_NAME))
            .collect();
        let backend = Backend {
            socket,
            hosts: Some(Arc::new(links)),
        };
        if let Some(links) = backend.hosts.clone() {
            for index in 0..links.len() {
                let links = links.clone();
                tokio::spawn(async move {
                    let _ = links[index].client().await;
                });
            }
        }
        backend
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// The hosts' names when this backend serves several (ids are qualified then).
    pub fn host_names(&self) -> Vec<String> {
        match &self.hosts {
            Some(links) if links.len() > 1 => links.iter().map(|l| l.host().name.clone()).collect(),
            _ => Vec::new(),
        }
    }

    fn several(&self) -> bool {
        self.hosts.as_ref().is_some_and(|links| links.len() > 1)
    }

    fn controller(&self) -> Controller {
        Controller::new(self.socket.clone(), CLIENT_NAME)
    }

    fn link(&self, pick: HostPick) -> Option<&HostLink> {
        match (pick.0, &self.hosts) {
            (Some(index), Some(links)) => links.get(index),
            _ => None,
        }
    }

    fn name_of(&self, pick: HostPick) -> Option<String> {
        self.link(pick).map(|l| l.host().name.clone())
    }

    /// The daemon that `host` (a tool's `host` argument) and the ids name, and the ids
    /// without their `HOST/`: a qualified id names its host, ids and `host` must agree, and
    /// with several hosts and nothing naming one the call is refused rather than guessed.
    pub fn pick(
        &self,
        host: Option<&str>,
        ids: &[Option<&str>],
    ) -> Result<(HostPick, Vec<Option<String>>), ToolError> {
        let mut named: Option<String> = host.map(|h| h.trim().to_string());
        let mut bare = Vec::new();
        for id in ids {
            let Some(id) = id else {
                bare.push(None);
                continue;
            };
            match split_qualified(id) {
                (Some(qualifier), rest) => {
                    if named.as_deref().is_some_and(|n| n != qualifier) {
                        return Err(ToolError::new(
                            ToolErrorCode::InvalidArgument,
                            format!(
                                "`{id}` belongs to host {qualifier}, but the call names host {}",
                                named.unwrap_or_default()
                            ),
                        ));
                    }
                    named = Some(qualifier.to_string());
                    bare.push(Some(rest.to_string()));
                }
                (None, rest) => bare.push(Some(rest.to_string())),
            }
        }
        let Some(links) = &self.hosts else {
            // This machine's daemon alone: `local/…` is its own qualified form.
            return match named.as_deref() {
                None | Some(LOCAL) => Ok((HostPick(None), bare)),
                Some(other) => Err(ToolError::new(
                    ToolErrorCode::InvalidArgument,
                    format!("this server serves this machine only, not host {other}; start it with `koru mcp --host {other}`"),
                )),
            };
        };
        let names = || {
            links
                .iter()
                .map(|l| l.host().name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match named {
            Some(name) => match links.iter().position(|l| l.host().name == name) {
                Some(index) => Ok((HostPick(Some(index)), bare)),
                None => Err(ToolError::new(
                    ToolErrorCode::InvalidArgument,
                    format!("no host {name} here; this server serves {}", names()),
                )),
            },
            None if links.len() == 1 => Ok((HostPick(Some(0)), bare)),
            None => Err(ToolError::new(
                ToolErrorCode::InvalidArgument,
                format!(
                    "this server serves several hosts ({}); give `host`, or an id as HOST/ID (list_sessions shows them so)",
                    names()
                ),
            )),
        }
    }

    /// A connection to the picked daemon for one call.
    async fn open(&self, pick: HostPick) -> Result<Conn, ToolError> {
        match self.link(pick) {
            Some(link) => Ok(Conn::Shared {
                client: link.client().await?,
                events: None,
            }),
            None => Ok(Conn::Fresh(self.controller().connect().await?)),
        }
    }

    /// A drive as the caller sees it: qualified with its host when there are several.
    fn shown(&self, pick: HostPick, mut drive: DriveInfo) -> DriveInfo {
        if self.several() {
            if let Some(host) = self.name_of(pick) {
                qualify_drive(&mut drive, &host);
            }
        }
        drive
    }

    /// Runs `ask` on every host at once (or on this machine's daemon), each bounded by
    /// [`HOST_ANSWER_TIMEOUT`]; one host's failure is its answer, not the call's.
    async fn ask_every<T>(
        &self,
        ask: impl for<'a> Fn(&'a mut Conn) -> crate::control::Exchange<'a, T>,
    ) -> Vec<HostAnswer<T>> {
        let ask = &ask;
        let picks: Vec<HostPick> = match &self.hosts {
            Some(links) => (0..links.len()).map(|i| HostPick(Some(i))).collect(),
            None => vec![HostPick(None)],
        };
        futures::future::join_all(picks.into_iter().map(|pick| async move {
            let asked = async {
                let mut conn = self.open(pick).await?;
                let answer = ask(&mut conn).await;
                conn.close().await;
                Ok::<T, ToolError>(answer?)
            };
            let answer = match tokio::time::timeout(HOST_ANSWER_TIMEOUT, asked).await {
                Ok(answer) => answer,
                Err(_) => Err(ToolError::new(
                    ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                    format!(
                        "host {} did not answer within {} s",
                        self.name_of(pick).unwrap_or_else(|| LOCAL.into()),
                        HOST_ANSWER_TIMEOUT.as_secs()
                    ),
                )),
            };
            HostAnswer {
                host: self.name_of(pick),
                answer,
            }
        }))
        .await
    }

    /// `list_sessions`: one line per plugin session; over several hosts each id is
    /// qualified `HOST/s_…` and a host that did not answer gets a line of its own.
    pub async fn list_sessions(
        &self,
        product: Option<String>,
        workspace: Option<String>,
    ) -> Result<String, ToolError> {
        let filter = SessionsList {
            product: product.map(|p| p.parse().unwrap_or_else(|never| match never {})),
            workspace,
            // Terminal agents too, unless the call asks for one IDE product.
            agents: true,
        };
        let answers = self
            .ask_every(|c| {
                let filter = filter.clone();
                Box::pin(async move { c.sessions(filter).await })
            })
            .await;
        let several = self.several();
        let mut sessions = Vec::new();
        let mut agents = Vec::new();
        let mut down = Vec::new();
        let mut first_error = None;
        for answer in answers {
            match answer.answer {
                Ok(result) => {
                    for mut session in result.sessions {
                        if let (true, Some(host)) = (several, &answer.host) {
                            qualify_session(&mut session, host);
                        }
                        sessions.push(session);
                    }
                    for agent in result.agents {
                        let line = agent.line();
                        agents.push(match (several, &answer.host) {
                            (true, Some(host)) => format!("{host}/{line}"),
                            _ => line,
                        });
                    }
                }
                Err(error) => {
                    down.push(format!(
                        "host {}: DOWN — {}",
                        answer.host.as_deref().unwrap_or(LOCAL),
                        error.message
                    ));
                    first_error.get_or_insert(error);
                }
            }
        }
        if !several {
            // One daemon: its failure is the call's.
            if let Some(error) = first_error {
                return Err(error);
            }
            return Ok(format::with_agents(format::sessions(&sessions), &agents));
        }
        if down.len() == self.hosts.as_ref().map_or(1, |l| l.len()) {
            return Err(ToolError::new(
                ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                format!("no host answered: {}", down.join("; ")),
            ));
        }
        let mut text = format::with_agents(format::sessions(&sessions), &agents);
        for line in down {
            text.push('\n');
            text.push_str(&line);
        }
        Ok(text)
    }

    /// `get_drive`.
    pub async fn get_drive(&self, drive_id: &str) -> Result<DriveInfo, ToolError> {
        let (pick, ids) = self.pick(None, &[Some(drive_id)])?;
        let drive_id = ids.into_iter().flatten().next().unwrap_or_default();
        let mut conn = self.open(pick).await?;
        let drive = conn.get_drive(drive_id).await;
        conn.close().await;
        Ok(self.shown(pick, drive?))
    }

    /// `read_chat`: turns of a chat, or a drive's turn, read back from its store (ids may
    /// be qualified `HOST/…`; the answer's are then too).
    pub async fn read_chat(
        &self,
        host: Option<&str>,
        mut read: koru_protocol::ChatRead,
    ) -> Result<koru_protocol::ChatReadResult, ToolError> {
        let (pick, mut ids) =
            self.pick(host, &[read.drive_id.as_deref(), read.chat_id.as_deref()])?;
        read.chat_id = ids.pop().flatten();
        read.drive_id = ids.pop().flatten();
        let mut conn = self.open(pick).await?;
        let result = conn.read_chat(read).await;
        conn.close().await;
        let mut result = result?;
        if let Some(name) = self.several().then(|| self.name_of(pick)).flatten() {
            result.chat_id = format!("{name}/{}", result.chat_id);
            if let Some(drive_id) = &mut result.drive_id {
                *drive_id = format!("{name}/{drive_id}");
            }
        }
        Ok(result)
    }

    /// `audit_chat`: the chat audited into its ledger by its host's daemon (a chat id may be
    /// qualified `HOST/…`; the answer's is then too).
    pub async fn audit_chat(
        &self,
        host: Option<&str>,
        mut audit: koru_protocol::ChatAudit,
    ) -> Result<koru_protocol::ChatAuditResult, ToolError> {
        let (pick, mut ids) = self.pick(host, &[audit.chat_id.as_deref()])?;
        audit.chat_id = ids.pop().flatten();
        let mut conn = self.open(pick).await?;
        let result = conn.audit_chat(audit).await;
        conn.close().await;
        let mut result = result?;
        if let Some(name) = self.several().then(|| self.name_of(pick)).flatten() {
            result.chat_id = format!("{name}/{}", result.chat_id);
        }
        Ok(result)
    }

    /// `verify_journal`: each host's report (one, without a host, for a single daemon).
    pub async fn verify_journal(&self) -> Vec<HostAnswer<koru_protocol::VerifyReport>> {
        self.ask_every(|c| Box::pin(c.verify_journal())).await
    }

    /// `cancel_drive`.
    pub async fn cancel_drive(&self, drive_id: &str) -> Result<DriveInfo, ToolError> {
        let (pick, ids) = self.pick(None, &[Some(drive_id)])?;
        let drive_id = ids.into_iter().flatten().next().unwrap_or_default();
        let mut conn = self.open(pick).await?;
        let drive = conn.cancel_drive(drive_id).await;
        conn.close().await;
        Ok(self.shown(pick, drive?))
    }

    /// `recover`: runs a recovery action on the picked daemon; `ok: false` comes back as a
    /// tool error with the blocker's code.
    pub async fn recover(
        &self,
        pick: HostPick,
        action: koru_protocol::RecoveryAction,
    ) -> Result<koru_protocol::RecoveryResult, ToolError> {
        let mut conn = self.open(pick).await?;
        let result = conn.run_recovery(action).await;
        conn.close().await;
        let mut result = result?;
        if let Some(drive) = result.drive.take() {
            result.drive = Some(self.shown(pick, drive));
        }
        if result.ok {
            return Ok(result);
        }
        let code = result
            .blocker
            .as_ref()
            .map(|b| b.code.clone())
            .unwrap_or_else(|| "recovery_failed".into());
        Err(ToolError::new(
            ToolErrorCode::Recovery(code),
            result.summary,
        ))
    }

    /// Where `send_prompt` goes: the host the call or a qualified session id names; over
    /// several hosts a workspace or product target goes to the one host that has a
    /// matching window (none or several: refused, naming them).
    async fn pick_for_send(
        &self,
        host: Option<&str>,
        target: &str,
    ) -> Result<(HostPick, Target), ToolError> {
        let target = target.trim();
        // `HOST/s_…` is a qualified session; anything else with a `/` is a path.
        let qualified_session = match split_qualified(target) {
            (Some(_), rest) if rest.starts_with("s_") || rest.starts_with("t_") => Some(target),
            _ => None,
        };
        if host.is_some() || qualified_session.is_some() || !self.several() {
            let (pick, ids) = self.pick(host, &[qualified_session])?;
            let target = match ids.into_iter().flatten().next() {
                Some(session) => Target::Session(session),
                None => parse_target(target)?,
            };
            return Ok((pick, target));
        }
        let parsed = parse_target(target)?;
        let filter = match &parsed {
            Target::Workspace(folder) => SessionsList {
                workspace: Some(folder.clone()),
                ..SessionsList::default()
            },
            Target::Product(product) => SessionsList {
                product: Some(product.clone()),
                ..SessionsList::default()
            },
            _ => {
                return Err(ToolError::new(
                    ToolErrorCode::InvalidArgument,
                    format!(
                        "`{target}` could be on any of the hosts ({}); give `host`, or a session id as HOST/s_… from list_sessions",
                        self.host_names().join(", ")
                    ),
                ))
            }
        };
        let answers = self
            .ask_every(|c| {
                let filter = filter.clone();
                Box::pin(async move { c.sessions(filter).await })
            })
            .await;
        let mut matching = Vec::new();
        let mut down = Vec::new();
        for (index, answer) in answers.into_iter().enumerate() {
            let name = answer.host.unwrap_or_else(|| LOCAL.into());
            match answer.answer {
                Ok(result) if !result.sessions.is_empty() => matching.push((index, name)),
                Ok(_) => {}
                Err(error) => down.push(format!("{name}: {}", error.message)),
            }
        }
        let down_note = if down.is_empty() {
            String::new()
        } else {
            format!(" (not answering: {})", down.join("; "))
        };
        match matching.as_slice() {
            [(index, _)] => Ok((HostPick(Some(*index)), parsed)),
            [] => Err(ToolError::new(
                ToolErrorCode::NoTarget,
                format!(
                    "no window matches `{target}` on the hosts that answered{down_note}"
                ),
            )),
            several => Err(ToolError::new(
                ToolErrorCode::InvalidArgument,
                format!(
                    "`{target}` matches windows on hosts {}; give `host`, or a session id as HOST/s_…",
                    several
                        .iter()
                        .map(|(_, name)| name.as_str())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            )),
        }
    }

    /// `send_prompt`: creates the drive and waits as asked, calling `progress` with each new
    /// state. Returns the drive as last seen and whether the wait ran out first.
    pub async fn send_prompt(
        &self,
        request: SendRequest,
        mut progress: impl FnMut(&DriveInfo),
    ) -> Result<(DriveInfo, bool), ToolError> {
        check_prompt(&request.prompt)?;
        let timeout = timeout_of(request.timeout_s)?;
        let (pick, target) = self
            .pick_for_send(request.host.as_deref(), &request.target)
            .await?;
        let mut conn = self.open(pick).await?;
        if request.wait != WaitFor::None {
            conn.subscribe().await?;
        }
        let text_awaited = request.wait == WaitFor::Replied && conn.status().await?.observing;
        let reply = conn
            .create_drive(DriveCreate {
                target,
                prompt: request.prompt,
                options: DriveOptions {
                    submit: request.submit,
                    new_chat: false,
                    timeout_ms: Some(timeout.as_millis() as u64),
                    busy: BusyPolicy::Queue,
                    agent_command: request.agent_command,
                },
            })
            .await;
        let created = match reply {
            Ok(created) => created,
            Err(error) => {
                conn.close().await;
                return Err(error.into());
            }
        };
        progress(&self.shown(pick, created.clone()));
        let deadline = tokio::time::Instant::now() + timeout;
        let wait = request.wait;
        let mut shown = (created.state, created.observation.clone());
        let drive_id = created.drive_id.clone();
        let followed = follow_drive(
            &mut conn,
            created,
            |drive| reached(drive.state, reply_known(drive, text_awaited), wait),
            |_| Some(deadline),
            None,
            |event| {
                if let crate::control::Followed::Update(drive) = event {
                    if (drive.state, drive.observation.clone()) != shown {
                        shown = (drive.state, drive.observation.clone());
                        progress(&self.shown(pick, drive.clone()));
                    }
                }
            },
        )
        .await;
        conn.close().await;
        match followed {
            Ok((drive, timed_out)) => Ok((self.shown(pick, drive), timed_out)),
            Err(ClientError::Closed) => Err(ToolError::new(
                ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                format!("the daemon closed the connection before drive {drive_id} ended"),
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// `wait_for_reply` for a drive: waits until the chat's history settles how the drive's
    /// turn ended, or `timeout`. Returns the drive as last seen.
    pub async fn wait_for_drive_reply(
        &self,
        drive_id: &str,
        timeout: Duration,
    ) -> Result<DriveInfo, ToolError> {
        let (pick, ids) = self.pick(None, &[Some(drive_id)])?;
        let drive_id = ids.into_iter().flatten().next().unwrap_or_default();
        let mut conn = self.open(pick).await?;
        conn.subscribe().await?;
        let text_awaited = conn.status().await?.observing;
        let last = match conn.get_drive(drive_id).await {
            Ok(last) => last,
            Err(error) => {
                conn.close().await;
                return Err(error.into());
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let followed = follow_drive(
            &mut conn,
            last,
            |drive| {
                reply_known(drive, text_awaited)
                    || matches!(
                        drive.state,
                        DriveState::Failed | DriveState::Cancelled | DriveState::TimedOut
                    )
            },
            |_| Some(deadline),
            None,
            |_| {},
        )
        .await;
        conn.close().await;
        match followed {
            Ok((last, _)) => Ok(self.shown(pick, last)),
            Err(ClientError::Closed) => Err(ToolError::new(
                ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                "the daemon closed the connection",
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// `wait_for_reply` for a session: the next completed reply in a chat of the session's
    /// workspace folders, as `(store, chat id, excerpt, length)`.
    pub async fn wait_for_session_reply(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<Option<(String, String, String, usize)>, ToolError> {
        let (pick, ids) = self.pick(None, &[Some(session_id)])?;
        let bare = ids.into_iter().flatten().next().unwrap_or_default();
        let mut conn = self.open(pick).await?;
        conn.subscribe().await?;
        let result = match conn.sessions(SessionsList::default()).await {
            Ok(result) => result,
            Err(error) => {
                conn.close().await;
                return Err(error.into());
            }
        };
        let Some(session) = result.sessions.into_iter().find(|s| s.session_id == bare) else {
            conn.close().await;
            return Err(ToolError::new(
                ToolErrorCode::NoTarget,
                format!("no session {session_id}; list_sessions shows the connected ones"),
            ));
        };
        let folders = session.window.workspace_folders;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, conn.next_event()).await else {
                conn.close().await;
                return Ok(None);
            };
            let event = match next? {
                Some(Incoming::Event(event)) => event,
                // Missed events cannot be asked for again; the wait goes on.
                Some(Incoming::Lagged) => continue,
                None => {
                    return Err(ToolError::new(
                        ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                        conn.ended().await.to_string(),
                    ))
                }
            };
            let StreamEvent::Observed { observation } = *event else {
                continue;
            };
            let koru_protocol::ObservedKind::ReplyCompleted { excerpt, length } = observation.event
            else {
                continue;
            };
            let in_workspace = observation.workspace.as_ref().is_some_and(|w| {
                folders.iter().any(|f| {
                    std::path::Path::new(w).starts_with(f) || std::path::Path::new(f).starts_with(w)
                })
            });
            if in_workspace {
                conn.close().await;
                return Ok(Some((
                    observation.store,
                    observation.chat_id,
                    excerpt,
                    length,
                )));
            }
        }
    }

    /// For `doctor` over hosts: one line per host that is not this machine, saying whether
    /// its daemon answers (this machine's own report comes from its probes).
    pub async fn remote_daemons(&self) -> Vec<String> {
        let Some(links) = &self.hosts else {
            return Vec::new();
        };
        let remote: Vec<usize> = (0..links.len())
            .filter(|&i| !links[i].host().is_local())
            .collect();
        let answers = futures::future::join_all(remote.into_iter().map(|index| async move {
            let pick = HostPick(Some(index));
            let asked = async {
                let mut conn = self.open(pick).await?;
                let status = conn.status().await;
                let sessions = conn.sessions(SessionsList::default()).await;
                conn.close().await;
                Ok::<_, ToolError>((status?, sessions?.sessions.len()))
            };
            let name = self.name_of(pick).unwrap_or_default();
            match tokio::time::timeout(HOST_ANSWER_TIMEOUT, asked).await {
                Ok(Ok((status, sessions))) => format!(
                    "host {name}: daemon running (koru {}, pid {}), {sessions} session(s); run `koru doctor` there for that machine's probes",
                    status.version, status.pid
                ),
                Ok(Err(error)) => format!("host {name}: DOWN — {}", error.message),
                Err(_) => format!(
                    "host {name}: DOWN — no answer within {} s",
                    HOST_ANSWER_TIMEOUT.as_secs()
                ),
            }
        }))
        .await;
        answers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_sessions_paths_products_or_focused() {
        assert_eq!(
            parse_target("s_3f9a").unwrap(),
            Target::Session("s_3f9a".into())
        );
        assert_eq!(parse_target("focused").unwrap(), Target::Focused);
        assert_eq!(
            parse_target("/home/me/repo").unwrap(),
            Target::Workspace("/home/me/repo".into())
        );
        assert_eq!(
            parse_target("cursor").unwrap(),
            Target::Product("cursor".parse().unwrap())
        );
        assert_eq!(
            parse_target("  ").unwrap_err().code,
            ToolErrorCode::InvalidArgument
        );
    }

    #[test]
    fn limits_are_checked_with_precise_messages() {
        let error = check_prompt(&"x".repeat(MAX_PROMPT_BYTES + 1)).unwrap_err();
        assert_eq!(error.code, ToolErrorCode::PromptTooLarge);
        assert!(error
            .message
            .contains(&format!("{} bytes", MAX_PROMPT_BYTES + 1)));
        assert_eq!(
            check_prompt(" \n").unwrap_err().code,
            ToolErrorCode::InvalidArgument
        );
        assert!(check_prompt("ok").is_ok());
        assert_eq!(
            timeout_of(Some(0.0)).unwrap_err().code,
            ToolErrorCode::InvalidArgument
        );
        assert_eq!(
            timeout_of(Some(f64::NAN)).unwrap_err().code,
            ToolErrorCode::InvalidArgument
        );
        assert_eq!(
            timeout_of(Some(4000.0)).unwrap_err().code,
            ToolErrorCode::InvalidArgument
        );
        assert_eq!(timeout_of(None).unwrap(), Duration::from_secs(60));
    }

    #[test]
    fn waiting_stops_at_the_asked_stage_or_the_end() {
        assert!(reached(DriveState::Queued, false, WaitFor::None));
        assert!(!reached(DriveState::Sent, false, WaitFor::Delivered));
        assert!(reached(DriveState::Received, false, WaitFor::Delivered));
        assert!(!reached(DriveState::Submitted, false, WaitFor::Submitted));
        assert!(reached(DriveState::Done, false, WaitFor::Submitted));
        assert!(reached(DriveState::Failed, false, WaitFor::Replied));
        assert!(!reached(DriveState::Done, false, WaitFor::Replied));
        assert!(reached(DriveState::Done, true, WaitFor::Replied));
    }
}

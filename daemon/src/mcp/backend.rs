//! What the MCP tools do, without MCP: each call opens a controller connection to the daemon, asks, waits for a drive's stage on the event stream, and returns compact text or a classified tool error.

use std::path::PathBuf;
use std::time::Duration;

use koru_protocol::{
    BusyPolicy, DriveCreate, DriveInfo, DriveOptions, DriveState, IdeProduct, Message,
    SessionsList, StreamEvent, Target,
};

use super::format;
use crate::control::{ClientError, ClientErrorCode, Controller};

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
    pub target: String,
    pub prompt: String,
    pub submit: bool,
    pub wait: WaitFor,
    pub timeout_s: Option<f64>,
}

/// Talks to the daemon at `socket` on behalf of MCP tools.
#[derive(Debug, Clone)]
pub struct Backend {
    socket: PathBuf,
}

/// Parses a `target` string: a session id (`s_…`), `focused`, a path (absolute, `~` or
/// containing `/`) for a workspace, or else a product name.
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
    if raw.starts_with("s_") && !raw.contains('/') {
        return Ok(Target::Session(raw.to_string()));
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

impl Backend {
    pub fn new(socket: PathBuf) -> Self {
        Backend { socket }
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    fn controller(&self) -> Controller {
        Controller::new(self.socket.clone(), "koru-mcp")
    }

    /// `list_sessions`: one line per plugin session.
    pub async fn list_sessions(
        &self,
        product: Option<String>,
        workspace: Option<String>,
    ) -> Result<String, ToolError> {
        let filter = SessionsList {
            product: product.map(|p| p.parse().unwrap_or_else(|never| match never {})),
            workspace,
        };
        let result = self
            .controller()
            .once(|c| Box::pin(c.sessions(filter)))
            .await?;
        Ok(format::sessions(&result.sessions))
    }

    /// `get_drive`.
    pub async fn get_drive(&self, drive_id: &str) -> Result<DriveInfo, ToolError> {
        let drive_id = drive_id.to_string();
        Ok(self
            .controller()
            .once(move |c| Box::pin(c.get_drive(drive_id)))
            .await?)
    }

    /// `verify_journal`.
    pub async fn verify_journal(&self) -> Result<koru_protocol::VerifyReport, ToolError> {
        Ok(self
            .controller()
            .once(|c| Box::pin(c.verify_journal()))
            .await?)
    }

    /// `cancel_drive`.
    pub async fn cancel_drive(&self, drive_id: &str) -> Result<DriveInfo, ToolError> {
        let drive_id = drive_id.to_string();
        Ok(self
            .controller()
            .once(move |c| Box::pin(c.cancel_drive(drive_id)))
            .await?)
    }

    /// `recover`: runs a recovery action; `ok: false` comes back as a tool error with the
    /// blocker's code.
    pub async fn recover(
        &self,
        action: koru_protocol::RecoveryAction,
    ) -> Result<koru_protocol::RecoveryResult, ToolError> {
        let result = self
            .controller()
            .once(|c| Box::pin(c.run_recovery(action)))
            .await?;
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

    /// `send_prompt`: creates the drive and waits as asked, calling `progress` with each new
    /// state. Returns the drive as last seen and whether the wait ran out first.
    pub async fn send_prompt(
        &self,
        request: SendRequest,
        mut progress: impl FnMut(&DriveInfo),
    ) -> Result<(DriveInfo, bool), ToolError> {
        check_prompt(&request.prompt)?;
        let target = parse_target(&request.target)?;
        let timeout = timeout_of(request.timeout_s)?;
        let mut client = self.controller().connect().await?;
        if request.wait != WaitFor::None {
            client.subscribe().await?;
        }
        let reply = client
            .create_drive(DriveCreate {
                target,
                prompt: request.prompt,
                options: DriveOptions {
                    submit: request.submit,
                    new_chat: false,
                    timeout_ms: Some(timeout.as_millis() as u64),
                    busy: BusyPolicy::Queue,
                },
            })
            .await;
        let created = match reply {
            Ok(created) => created,
            Err(error) => {
                client.close().await;
                return Err(error.into());
            }
        };
        let drive_id = created.drive_id.clone();
        progress(&created);
        let deadline = tokio::time::Instant::now() + timeout;
        let wait = request.wait;
        let mut shown = (created.state, created.observation.clone());
        let followed = client
            .follow_drive(
                created,
                |drive| reached(drive.state, drive.reply_settled(), wait),
                |_| Some(deadline),
                None,
                |event| {
                    if let crate::control::Followed::Update(drive) = event {
                        if (drive.state, drive.observation.clone()) != shown {
                            shown = (drive.state, drive.observation.clone());
                            progress(drive);
                        }
                    }
                },
            )
            .await;
        client.close().await;
        match followed {
            Ok(followed) => Ok(followed),
            Err(ClientError::Closed) => Err(ToolError::new(
                ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                format!("the daemon closed the connection before drive {drive_id} ended"),
            )),
            Err(error) => Err(error.into()),
        }
    }
}

impl Backend {
    /// `wait_for_reply` for a drive: waits until the chat's history settles how the drive's
    /// turn ended, or `timeout`. Returns the drive as last seen.
    pub async fn wait_for_drive_reply(
        &self,
        drive_id: &str,
        timeout: Duration,
    ) -> Result<DriveInfo, ToolError> {
        let mut client = self.controller().connect().await?;
        client.subscribe().await?;
        let last = match client.get_drive(drive_id.to_string()).await {
            Ok(last) => last,
            Err(error) => {
                client.close().await;
                return Err(error.into());
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let followed = client
            .follow_drive(
                last,
                |drive| {
                    drive.reply_settled()
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
        client.close().await;
        match followed {
            Ok((last, _)) => Ok(last),
            Err(ClientError::Closed) => Err(ToolError::new(
                ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                "the daemon closed the connection",
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// `wait_for_reply` for a session: the next completed reply in a chat of the session's
    /// workspace folders, as `(chat id, excerpt, length)`.
    pub async fn wait_for_session_reply(
        &self,
        session_id: &str,
        timeout: Duration,
    ) -> Result<Option<(String, String, usize)>, ToolError> {
        let mut client = self.controller().connect().await?;
        client.subscribe().await?;
        let result = client.sessions(SessionsList::default()).await?;
        let Some(session) = result
            .sessions
            .into_iter()
            .find(|s| s.session_id == session_id)
        else {
            return Err(ToolError::new(
                ToolErrorCode::NoTarget,
                format!("no session {session_id}; list_sessions shows the connected ones"),
            ));
        };
        let folders = session.window.workspace_folders;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, client.next()).await else {
                client.close().await;
                return Ok(None);
            };
            let Some(envelope) = next? else {
                return Err(ToolError::new(
                    ToolErrorCode::Client(ClientErrorCode::DaemonDown),
                    "the daemon closed the connection",
                ));
            };
            let Message::Stream(item) = envelope.message else {
                continue;
            };
            let StreamEvent::Observed { observation } = item.event else {
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
                client.close().await;
                return Ok(Some((observation.chat_id, excerpt, length)));
            }
        }
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

//! The MCP server (rmcp): Koru's tools for a controller LLM — typed inputs with JSON Schema, compact text outputs, progress notifications while waiting, and every failure a tool result with `isError`.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ProgressNotificationParam, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData as McpError, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;

use super::backend::{
    Backend, HostPick, SendRequest, ToolError, ToolErrorCode, WaitFor, MAX_PROMPT_BYTES,
};
use super::format;
use crate::access::{mcp_tool_role, Grant, Refusal, RefusalSink, Role};
use crate::registry::{load_layers, LayerPaths};

/// Tool arguments that, when they do not fit, say which field is wrong (`prompt: invalid
/// type: integer, expected a string`); the schema is `T`'s.
#[derive(Debug)]
pub struct Checked<T>(pub T);

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        serde_path_to_error::deserialize(value)
            .map(Checked)
            .map_err(|error| {
                let path = error.path().to_string();
                let inner = error.into_inner();
                if path == "." {
                    serde::de::Error::custom(inner)
                } else {
                    serde::de::Error::custom(format!("`{path}`: {inner}"))
                }
            })
    }
}

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// `list_sessions` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListSessionsArgs {
    /// Only windows of this IDE product (vscode, cursor, windsurf, antigravity, code-server, jetbrains-idea, …).
    #[serde(default)]
    pub product: Option<String>,
    /// Only windows that have this folder (or a folder containing it) open; an absolute path.
    #[serde(default)]
    pub workspace: Option<String>,
}

/// `send_prompt` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendPromptArgs {
    /// Where to send: a session id (`s_…` or a terminal agent's `t_…` from list_sessions), an absolute workspace path, a product name (when one window of it is open), "focused", a terminal agent by product (`claude-code`, `codex`, `gemini-cli`, `opencode`; `claude-code@/abs/folder` for the one in that folder), or `chat:CHAT_ID` (the running agent holding that chat).
    pub target: String,
    /// The prompt, sent exactly as given (at most 262144 bytes of UTF-8).
    pub prompt: String,
    /// Submit the prompt (default true); false leaves it in the chat input, unsent.
    #[serde(default)]
    pub submit: Option<bool>,
    /// How long to wait before answering: none (queued), delivered (the IDE has it), submitted (default), replied.
    #[serde(default)]
    pub wait: Option<WaitFor>,
    /// The most seconds to wait (default 60, at most 3600); the drive itself is given the same time.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// The host to send on, when this server serves several (`koru mcp --host …`); a session id given as HOST/s_… names it already.
    #[serde(default)]
    pub host: Option<String>,
    /// With wait=replied: the most characters of the reply to return (default 100000); read_chat pages through the rest.
    #[serde(default)]
    pub max_chars: Option<u64>,
    /// For a terminal agent: type a prompt starting with `/`, `!` or `#` as the agent's command (slash command, shell, memory); without it such a prompt is refused.
    #[serde(default)]
    pub agent_command: Option<bool>,
}

/// A drive id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DriveIdArgs {
    /// The drive id (`d_…`) that send_prompt returned.
    pub drive_id: String,
}

/// `recover` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverArgs {
    pub action: crate::recovery::ActionName,
    /// The drive, for retry_drive and cancel_drive.
    #[serde(default)]
    pub drive_id: Option<String>,
    /// The plugin session, for reconnect_plugin and focus_window.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The route a retry takes (native_send, plugin_drive, os_injection); the planner's order when absent.
    #[serde(default)]
    pub route: Option<koru_protocol::Route>,
    /// The host to act on, when this server serves several; an id given as HOST/… names it already.
    #[serde(default)]
    pub host: Option<String>,
}

impl RecoverArgs {
    /// The host the call is for and the protocol action (ids without their `HOST/`), or
    /// which argument is missing or disagrees.
    pub fn action(
        self,
        backend: &Backend,
    ) -> Result<(HostPick, koru_protocol::RecoveryAction), ToolError> {
        use crate::recovery::ArgumentError;
        let (pick, mut ids) = backend.pick(
            self.host.as_deref(),
            &[self.drive_id.as_deref(), self.session_id.as_deref()],
        )?;
        let session_id = ids.pop().flatten();
        let drive_id = ids.pop().flatten();
        self.action
            .with(drive_id, session_id, self.route)
            .map(|action| (pick, action))
            .map_err(|error| {
                let message = match error {
                    ArgumentError::MissingDrive => "`drive_id` is required for this action",
                    ArgumentError::MissingSession => "`session_id` is required for this action",
                    ArgumentError::RouteNotApplicable => "`route` only applies to retry_drive",
                };
                ToolError::new(ToolErrorCode::InvalidArgument, message)
            })
    }
}

/// `wait_for_reply` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForReplyArgs {
    /// The drive whose reply to wait for.
    #[serde(default)]
    pub drive_id: Option<String>,
    /// Or: the session whose next reply to wait for.
    #[serde(default)]
    pub session: Option<String>,
    /// The most seconds to wait (default 60, at most 3600).
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// The most characters of the reply to return (default 100000); read_chat pages through the rest.
    #[serde(default)]
    pub max_chars: Option<u64>,
}

/// `audit_chat` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditChatArgs {
    /// The chat to audit (an id from `koru chats` or a reply); default: the chat with the
    /// most recent activity.
    #[serde(default)]
    pub chat_id: Option<String>,
    /// The chat's store, when two stores have a chat of that id.
    #[serde(default)]
    pub store: Option<String>,
    /// Also write the ledger's self-verifying HTML page (in the ledger's folder).
    #[serde(default)]
    pub html: Option<bool>,
    /// The host, when this server serves several; an id given as HOST/… names it already.
    #[serde(default)]
    pub host: Option<String>,
}

/// `read_chat` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadChatArgs {
    /// The chat to read (an id from a reply or from `koru chats`); or give drive_id.
    #[serde(default)]
    pub chat_id: Option<String>,
    /// The drive whose turn to read (the chat its prompt was seen in).
    #[serde(default)]
    pub drive_id: Option<String>,
    /// The chat's store, when two stores have a chat of that id.
    #[serde(default)]
    pub store: Option<String>,
    /// The chat's last N turns (default 1, at most 50).
    #[serde(default)]
    pub turns: Option<u32>,
    /// One turn by its index (0 is the first), to page through its reply.
    #[serde(default)]
    pub turn: Option<u64>,
    /// Where the reply starts, in characters (the offset a cut reply names).
    #[serde(default)]
    pub reply_offset: Option<u64>,
    /// The most characters of each reply and prompt (default and at most 100000).
    #[serde(default)]
    pub max_chars: Option<u64>,
    /// The host, when this server serves several; an id given as HOST/… names it already.
    #[serde(default)]
    pub host: Option<String>,
}

/// `doctor` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DoctorToolArgs {
    /// false (default): a summary — the verdict and what is broken with its fix; true: the full JSON report.
    #[serde(default)]
    pub detail: Option<bool>,
}

/// `list_interfaces` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInterfacesArgs {
    /// Only this family: tool_invocation, ide_control, desktop_control, browser_control, artifact_exchange, remote_service, observation.
    #[serde(default)]
    pub family: Option<String>,
}

/// Koru's MCP tools, acting through the daemon at the backend's socket, within a role:
/// `role` for stdio; over HTTP also the role of the request's bearer token (the lower of
/// the two counts).
#[derive(Clone)]
pub struct KoruMcp {
    backend: Backend,
    layers: LayerPaths,
    role: Role,
    /// Where refusals of a caller that came over HTTP go to be journaled.
    refusals: Option<RefusalSink>,
}

impl KoruMcp {
    /// Journals this server's `forbidden_role` refusals of HTTP callers through `sink`.
    pub fn with_refusals(mut self, sink: Option<RefusalSink>) -> Self {
        self.refusals = sink;
        self
    }

    /// The role a request holds: this server's, lowered to the bearer token's when the
    /// request came over HTTP (an HTTP request without a grant holds observe: fail closed).
    pub fn role_of(&self, extensions: &rmcp::model::Extensions) -> (Role, Option<Grant>) {
        let Some(parts) = extensions.get::<axum::http::request::Parts>() else {
            return (self.role, None);
        };
        match parts.extensions.get::<Grant>() {
            Some(grant) => (self.role.min(grant.role), Some(grant.clone())),
            None => (Role::Observe, None),
        }
    }

    /// The tools `role` may call.
    fn router_for(role: Role) -> rmcp::handler::server::router::tool::ToolRouter<Self> {
        let mut router = Self::tool_router();
        for tool in router.list_all() {
            if !role.allows(mcp_tool_role(&tool.name)) {
                router.remove_route(&tool.name);
            }
        }
        router
    }
}

fn ok(text: String) -> Result<CallToolResult, McpError> {
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

/// A text result with structured content beside it (the same facts as JSON).
fn ok_structured(text: String, structured: serde_json::Value) -> Result<CallToolResult, McpError> {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    Ok(result)
}

fn failed(error: ToolError) -> Result<CallToolResult, McpError> {
    Ok(CallToolResult::error(vec![ContentBlock::text(
        error.render(),
    )]))
}

#[tool_router]
impl KoruMcp {
    pub fn new(backend: Backend, layers: LayerPaths, role: Role) -> Self {
        KoruMcp {
            backend,
            layers,
            role,
            refusals: None,
        }
    }

    #[tool(
        description = "List the IDE windows (chat sessions) Koru can drive: one line each — session id, product, version, focus, chat state, workspace folders."
    )]
    async fn list_sessions(
        &self,
        Parameters(Checked(args)): Parameters<Checked<ListSessionsArgs>>,
    ) -> Result<CallToolResult, McpError> {
        match self
            .backend
            .list_sessions(args.product, args.workspace)
            .await
        {
            Ok(text) => ok(text),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Push a prompt into an IDE chat or a terminal agent (Claude Code, Codex, Gemini CLI, opencode in tmux). Koru picks the route (native send, plugin drive, OS input, terminal input) and falls back when one is blocked. Returns the drive id, the route, the furthest stage (received/focused/pasted/submitted) and any blockers with how to fix them."
    )]
    async fn send_prompt(
        &self,
        Parameters(Checked(args)): Parameters<Checked<SendPromptArgs>>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let wait = args.wait.unwrap_or(WaitFor::Submitted);
        let max_chars = args.max_chars;
        let request = SendRequest {
            host: args.host,
            target: args.target,
            prompt: args.prompt,
            submit: args.submit.unwrap_or(true),
            wait,
            timeout_s: args.timeout_s,
            agent_command: args.agent_command.unwrap_or(false),
        };
        // Progress goes out in order, and all of it before the result.
        let token = context.meta.get_progress_token();
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let peer = context.peer.clone();
        let forwarder = tokio::spawn(async move {
            let mut step = 0u32;
            while let Some(message) = progress_rx.recv().await {
                let Some(token) = token.clone() else { continue };
                step += 1;
                let param =
                    ProgressNotificationParam::new(token, f64::from(step)).with_message(message);
                let _ = peer.notify_progress(param).await;
            }
        });
        let progress = move |drive: &koru_protocol::DriveInfo| {
            let _ = progress_tx.send(format!("drive {} {}", drive.drive_id, drive.state.as_str()));
        };
        let outcome = tokio::select! {
            outcome = self.backend.send_prompt(request, progress) => outcome,
            _ = context.ct.cancelled() => return failed(ToolError::new(ToolErrorCode::Cancelled, "the client cancelled the call; the drive goes on (see get_drive / cancel_drive)")),
        };
        let _ = forwarder.await;
        match outcome {
            Ok((drive, timed_out)) => {
                let mut text = format::drive(&drive);
                if timed_out {
                    text.push_str(&format!(
                        "\nstill {} when the wait ran out; ask get_drive {} later",
                        drive.state.as_str(),
                        drive.drive_id
                    ));
                }
                let mut structured = None;
                if wait == WaitFor::Replied && drive.state == koru_protocol::DriveState::Done {
                    match &drive.observation {
                        Some(o) if o.stage == koru_protocol::ObservedStage::Replied => {
                            let (reply, read) = self.reply_of(&drive, max_chars).await;
                            text.push('\n');
                            text.push_str(&reply);
                            structured = read;
                        }
                        Some(o) => text.push_str(&format!("\nchat history: {}", serde_json::to_value(o.stage).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())),
                        None => text.push_str("\nreply: not observed (no chat history showed the prompt within the wait)"),
                    }
                }
                let failed_drive = matches!(
                    drive.state,
                    koru_protocol::DriveState::Failed
                        | koru_protocol::DriveState::Cancelled
                        | koru_protocol::DriveState::TimedOut
                );
                if failed_drive {
                    Ok(CallToolResult::error(vec![ContentBlock::text(text)]))
                } else if let Some(read) = structured {
                    ok_structured(text, read)
                } else {
                    ok(text)
                }
            }
            Err(error) => failed(error),
        }
    }

    /// The reply of a drive whose chat said it replied: the whole turn read back from the
    /// chat's store (text, and the read as structured content), or, when only the window's
    /// plugin reported the end, where the text will come from.
    async fn reply_of(
        &self,
        drive: &koru_protocol::DriveInfo,
        max_chars: Option<u64>,
    ) -> (String, Option<serde_json::Value>) {
        let Some(observation) = &drive.observation else {
            return (String::new(), None);
        };
        if observation.is_from_plugin() {
            return (
                format!(
                    "{}\nthe text will come from the chat's own history store once the chat writes it there (for VS Code: Copilot's chatSessions); no store had it within the wait: call wait_for_reply or read_chat with drive_id={} again",
                    format::reply_line(observation),
                    drive.drive_id
                ),
                None,
            );
        }
        let read = koru_protocol::ChatRead {
            drive_id: Some(drive.drive_id.clone()),
            max_chars,
            ..Default::default()
        };
        match self.backend.read_chat(None, read).await {
            Ok(read) => match read.turns.first() {
                Some(turn) => (
                    format::turn(&read, turn, &format!("drive_id={}", drive.drive_id)),
                    serde_json::to_value(&read).ok(),
                ),
                None => (format::reply_line(observation), None),
            },
            Err(error) => (
                format!(
                    "{}\n(the whole turn could not be read back: {})",
                    format::reply_line(observation),
                    error.render()
                ),
                None,
            ),
        }
    }

    #[tool(description = "A drive's state now: stage reached, route, blockers with hints.")]
    async fn get_drive(
        &self,
        Parameters(Checked(args)): Parameters<Checked<DriveIdArgs>>,
    ) -> Result<CallToolResult, McpError> {
        match self.backend.get_drive(&args.drive_id).await {
            Ok(drive) => ok(format::drive(&drive)),
            Err(error) => failed(error),
        }
    }

    #[tool(description = "Cancel a drive that has not finished; returns its final state.")]
    async fn cancel_drive(
        &self,
        Parameters(Checked(args)): Parameters<Checked<DriveIdArgs>>,
    ) -> Result<CallToolResult, McpError> {
        match self.backend.cancel_drive(&args.drive_id).await {
            Ok(drive) => ok(format::drive(&drive)),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Wait for the chat's reply to a drive (or a session's next reply) and return its text. Needs a chat-history observer for the session."
    )]
    async fn wait_for_reply(
        &self,
        Parameters(Checked(args)): Parameters<Checked<WaitForReplyArgs>>,
    ) -> Result<CallToolResult, McpError> {
        let timeout = match super::backend::timeout_of(args.timeout_s) {
            Ok(timeout) => timeout,
            Err(error) => return failed(error),
        };
        match (&args.drive_id, &args.session) {
            (Some(drive_id), None) => {
                let drive = match self.backend.wait_for_drive_reply(drive_id, timeout).await {
                    Ok(drive) => drive,
                    Err(error) => return failed(error),
                };
                let Some(observation) = &drive.observation else {
                    return failed(
                        ToolError::new(ToolErrorCode::NotObservable,
                            format!(
                                "no chat history showed the prompt of drive {drive_id} (state {}) within the wait",
                                drive.state.as_str()
                            ),
                        )
                        .with_hint("koru observes Claude Code session logs; `koru chats` lists what it sees. Read the reply in the IDE meanwhile."),
                    );
                };
                match observation.stage {
                    koru_protocol::ObservedStage::Replied => {
                        let (text, read) = self.reply_of(&drive, args.max_chars).await;
                        match read {
                            Some(read) => ok_structured(text, read),
                            None => ok(text),
                        }
                    }
                    stage => failed(ToolError::new(
                        ToolErrorCode::NotReplied(stage),
                        format!(
                            "drive {drive_id} is {} in {}{}",
                            stage.as_str(),
                            format::observation_place(observation),
                            observation
                                .detail
                                .as_deref()
                                .map(|d| format!(": {d}"))
                                .unwrap_or_default()
                        ),
                    )),
                }
            }
            (None, Some(session)) => match self
                .backend
                .wait_for_session_reply(session, timeout)
                .await
            {
                Ok(Some((store, chat, excerpt, length))) => {
                    let read = koru_protocol::ChatRead {
                        chat_id: Some(chat.clone()),
                        store: Some(store),
                        max_chars: args.max_chars,
                        ..Default::default()
                    };
                    match self.backend.read_chat(None, read).await {
                        Ok(read) => match read.turns.last() {
                            Some(turn) => ok_structured(
                                format::turn(&read, turn, &format!("chat_id={}", read.chat_id)),
                                serde_json::to_value(&read).unwrap_or_default(),
                            ),
                            None => ok(format!("reply ({length} chars) in chat {chat}: {excerpt}")),
                        },
                        // The reply was seen; its text could not be read back now.
                        Err(error) => ok(format!(
                            "reply ({length} chars) in chat {chat}: {excerpt}\n(the whole turn could not be read back: {})",
                            error.render()
                        )),
                    }
                }
                Ok(None) => failed(
                    ToolError::new(
                        ToolErrorCode::NotObservable,
                        format!("no reply was observed for session {session} within the wait"),
                    )
                    .with_hint(
                        "koru observes Claude Code session logs; `koru chats` lists what it sees",
                    ),
                ),
                Err(error) => failed(error),
            },
            _ => failed(ToolError::new(
                ToolErrorCode::InvalidArgument,
                "give exactly one of `drive_id` and `session`",
            )),
        }
    }

    #[tool(
        description = "Read a chat back from its own history store: each turn's prompt, the steps the agent took (tools called, files edited, commands run with exit status, errors) and the whole final reply. Give chat_id (last `turns`, default 1) or drive_id (the turn that drive's prompt started); page a long reply with turn and reply_offset. Text for reading, structured content with every field."
    )]
    async fn read_chat(
        &self,
        Parameters(Checked(args)): Parameters<Checked<ReadChatArgs>>,
    ) -> Result<CallToolResult, McpError> {
        if args.chat_id.is_some() == args.drive_id.is_some() {
            return failed(ToolError::new(
                ToolErrorCode::InvalidArgument,
                "give exactly one of `chat_id` and `drive_id`",
            ));
        }
        let again = match (&args.drive_id, &args.chat_id) {
            (Some(drive_id), _) => format!("drive_id={drive_id}"),
            (None, Some(chat_id)) => format!("chat_id={chat_id}"),
            (None, None) => String::new(),
        };
        let read = koru_protocol::ChatRead {
            chat_id: args.chat_id,
            store: args.store,
            drive_id: args.drive_id,
            turns: args.turns,
            turn: args.turn,
            reply_offset: args.reply_offset,
            max_chars: args.max_chars,
        };
        match self.backend.read_chat(args.host.as_deref(), read).await {
            Ok(read) => {
                let mut text = String::new();
                if read.turns.is_empty() {
                    text = format!("{} chat {}: no turns yet", read.store, read.chat_id);
                }
                for turn in &read.turns {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str("prompt: ");
                    text.push_str(
                        turn.prompt
                            .as_deref()
                            .unwrap_or("(none: the agent went on by itself)"),
                    );
                    text.push('\n');
                    text.push_str(&format::turn(&read, turn, &again));
                }
                ok_structured(text, serde_json::to_value(&read).unwrap_or_default())
            }
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Audit a chat into a standalone, verifiable ledger (koru audit): one sealed, hash-linked entry per prompt, assistant text, tool call, tool result and turn end, each with where it is in the chat's own file and the SHA-256 of those bytes. Run again on a grown chat, it appends only the new items; a chat whose already imported part was rewritten is reported (source_rewritten, with the first item that differs) and nothing is imported. The ledger goes to the daemon's default folder; html=true also writes its self-verifying page there. Answers the ledger's folder, head and page."
    )]
    async fn audit_chat(
        &self,
        Parameters(Checked(args)): Parameters<Checked<AuditChatArgs>>,
    ) -> Result<CallToolResult, McpError> {
        let audit = koru_protocol::ChatAudit {
            chat_id: args.chat_id,
            store: args.store,
            out: None,
            html: (args.html == Some(true)).then(|| crate::audit::PAGE_NAME.to_string()),
        };
        match self.backend.audit_chat(args.host.as_deref(), audit).await {
            Ok(result) => ok_structured(
                crate::audit::render(&result),
                serde_json::to_value(&result).unwrap_or_default(),
            ),
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "Which ways to control or observe the IDEs work on this machine, and how to fix the ones that do not. Summary by default; detail=true gives the full JSON report."
    )]
    async fn doctor(
        &self,
        Parameters(Checked(args)): Parameters<Checked<DoctorToolArgs>>,
    ) -> Result<CallToolResult, McpError> {
        let report = crate::doctor::build_report(
            self.backend.socket(),
            &[],
            Duration::from_secs(2),
            &self.layers,
        )
        .await;
        let remote = self.backend.remote_daemons().await;
        let with_remote = |mut text: String| {
            for line in &remote {
                text.push('\n');
                text.push_str(line);
            }
            text
        };
        match report {
            Ok(report) if args.detail == Some(true) => ok(with_remote(
                serde_json::to_string(&report).unwrap_or_default(),
            )),
            Ok(report) => ok(with_remote(format::doctor_summary(&report))),
            Err(error) => failed(ToolError::new(
                ToolErrorCode::DoctorFailed,
                format!("{error:#}"),
            )),
        }
    }

    #[tool(
        description = "Prove the drive journal (the record of every prompt pushed, who asked, how it ended) intact: checks every entry's hash link. Says `intact` with the entry count and head hash, or the first bad entry's seq and what is wrong. detail=true gives the JSON report."
    )]
    async fn verify_journal(
        &self,
        Parameters(Checked(args)): Parameters<Checked<DoctorToolArgs>>,
    ) -> Result<CallToolResult, McpError> {
        let answers = self.backend.verify_journal().await;
        if self.backend.host_names().is_empty() {
            // One daemon: its report, or its failure, is the result.
            let Some(answer) = answers.into_iter().next() else {
                return failed(ToolError::new(
                    ToolErrorCode::Client(crate::control::ClientErrorCode::DaemonDown),
                    "no daemon was asked",
                ));
            };
            return match answer.answer {
                Ok(report) if args.detail == Some(true) => {
                    ok(serde_json::to_string(&report).unwrap_or_default())
                }
                Ok(report) => ok(crate::journal::verify::render(&report)),
                Err(error) => failed(error),
            };
        }
        // Several hosts: each host's verdict under its name; an error only when none answered.
        let mut text = Vec::new();
        let mut answered = false;
        for answer in answers {
            let host = answer.host.unwrap_or_else(|| "local".into());
            match answer.answer {
                Ok(report) => {
                    answered = true;
                    let body = if args.detail == Some(true) {
                        serde_json::to_string(&report).unwrap_or_default()
                    } else {
                        crate::journal::verify::render(&report)
                    };
                    text.push(format!("host {host}:\n{}", body.trim_end()));
                }
                Err(error) => text.push(format!("host {host}: DOWN — {}", error.message)),
            }
        }
        if answered {
            ok(text.join("\n"))
        } else {
            failed(ToolError::new(
                ToolErrorCode::Client(crate::control::ClientErrorCode::DaemonDown),
                text.join("; "),
            ))
        }
    }

    #[tool(
        description = "Fix what blocks a drive or an interface: reprobe, reload_registry, retry_drive (a failed drive, by a chosen route; never one that may have been submitted), cancel_drive, reconnect_plugin, focus_window. Logged with who asked."
    )]
    async fn recover(
        &self,
        Parameters(Checked(args)): Parameters<Checked<RecoverArgs>>,
    ) -> Result<CallToolResult, McpError> {
        let (pick, action) = match args.action(&self.backend) {
            Ok(picked) => picked,
            Err(error) => return failed(error),
        };
        match self.backend.recover(pick, action).await {
            Ok(result) => {
                let mut text = result.summary;
                if let Some(drive) = &result.drive {
                    text.push('\n');
                    text.push_str(&format::drive(drive));
                }
                ok(text)
            }
            Err(error) => failed(error),
        }
    }

    #[tool(
        description = "The interface registry: every way Koru can control or observe an IDE, one line each (id, family, direction, route, authority, description)."
    )]
    async fn list_interfaces(
        &self,
        Parameters(Checked(args)): Parameters<Checked<ListInterfacesArgs>>,
    ) -> Result<CallToolResult, McpError> {
        let loaded = load_layers(&self.layers);
        let family = args.family.as_deref().map(str::trim);
        if let Some(family) = family {
            let known = loaded
                .registry
                .interfaces()
                .iter()
                .any(|i| i.family.as_str() == family);
            if !known {
                return failed(ToolError::new(ToolErrorCode::InvalidArgument,
                    format!("no interface has family `{family}`; families: tool_invocation, ide_control, desktop_control, browser_control, artifact_exchange, remote_service, observation"),
                ));
            }
        }
        ok(format::interfaces(
            loaded
                .registry
                .interfaces()
                .iter()
                .filter(|i| family.is_none_or(|f| i.family.as_str() == f)),
        ))
    }
}

#[tool_handler(router = Self::router_for(self.role_of(&context.extensions).0))]
impl ServerHandler for KoruMcp {
    /// Runs a tool the caller's role allows; any other is refused with `forbidden_role` (a
    /// tool result with `isError`, like every failure), even though `tools/list` did not
    /// offer it.
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        let (role, grant) = self.role_of(&context.extensions);
        let needed = mcp_tool_role(&request.name);
        if !role.allows(needed) && grant.is_none() {
            // Stdio (`koru mcp --role observe`): every connection of this process declared
            // scope observe and the handshake checked the daemon holds it to that, so the
            // call goes on and the daemon refuses its request with forbidden_role and
            // journals who asked.
            let router = Self::router_for(Role::Drive);
            let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
            return router.call(call).await;
        }
        if !role.allows(needed) {
            let what = format!("the MCP tool {}", request.name);
            tracing::warn!(
                tool = %request.name,
                token = grant.as_ref().map(|g| g.token_id.as_str()).unwrap_or("stdio"),
                %role,
                "MCP tool call refused: it needs the {needed} role"
            );
            let message = crate::access::forbidden_message(&what, needed, role);
            if let (Some(sink), Some(grant)) = (&self.refusals, &grant) {
                sink.report(Refusal {
                    door: "mcp_http",
                    token_id: grant.token_id.clone(),
                    token_name: grant.token_name.clone(),
                    held: role,
                    needed,
                    asked: what,
                });
            }
            let error = ToolError::new(ToolErrorCode::ForbiddenRole, message);
            return Ok(CallToolResult::error(vec![ContentBlock::text(error.render())]).into());
        }
        let router = Self::router_for(role);
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        router.call(call).await
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        Self::router_for(self.role).get(name).cloned()
    }

    fn get_info(&self) -> ServerConfig {
        let mut instructions = format!(
            "Koru pushes prompts into the AI chats of IDE windows. list_sessions shows the windows; \
             send_prompt delivers (target: session id, workspace path, product or \"focused\"; \
             prompts up to {MAX_PROMPT_BYTES} bytes); get_drive / cancel_drive follow up; doctor \
             explains what is broken and how to fix it."
        );
        let hosts = self.backend.host_names();
        if !hosts.is_empty() {
            instructions.push_str(&format!(
                " This server spans several machines ({}): session and drive ids are HOST/s_… and \
                 HOST/d_…, and a call goes to the host its id names (or its `host` argument).",
                hosts.join(", ")
            ));
        }
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("koru", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }
}

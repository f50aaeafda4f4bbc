//! The `/api/v1` JSON endpoints: each request opens a controller connection to the daemon (named `api` for the bearer token, `dashboard` for the cookie), asks, and answers with the protocol's own types; bodies are read with a size limit and parsed with the place of the first error.

use std::time::Duration;

use aide::axum::routing::{get_with, post_with};
use aide::axum::ApiRouter;
use aide::generate::GenContext;
use aide::openapi::{
    MediaType, Operation, RequestBody, Response as OpenApiResponse, SchemaObject,
    StatusCode as OpenApiStatus,
};
use aide::{OperationInput, OperationOutput};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use koru_protocol::{
    ChatsList, ChatsListResult, DriveCreate, DriveResult, DriveState, DrivesList, DrivesListResult,
    RecoveryAction, RecoveryResult, RecoveryRun, SessionsList, SessionsListResult, StatusInfo,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::auth::{Caller, CODE_LIFETIME};
use super::errors::ApiError;
use super::recovery::{actions, ActionList};
use super::{events, AppState};
use crate::control::{Client, Controller, Exchange};
use crate::doctor::DoctorReport;
use crate::registry::view::RegistryView;

/// Every `/api/v1` route, with its documentation (docs/openapi.json is generated from it).
pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/v1/health",
            get_with(health, |op| {
                op.summary("Liveness, version and protocol; needs no token")
            }),
        )
        .api_route(
            "/api/v1/status",
            get_with(status, |op| {
                op.summary("The daemon's status (`koru status`); the HTTP token is blanked")
            }),
        )
        .api_route(
            "/api/v1/sessions",
            get_with(sessions, |op| op.summary("The connected IDE plugin sessions")),
        )
        .api_route(
            "/api/v1/drives",
            get_with(drives, |op| {
                op.summary("Recent drives, oldest first, optionally filtered")
            })
            .post_with(create_drive, |op| {
                op.summary("Push a prompt into an IDE chat (as `koru send`)")
            }),
        )
        .api_route(
            "/api/v1/drives/{id}",
            get_with(drive, |op| op.summary("One drive")),
        )
        .api_route(
            "/api/v1/drives/{id}/cancel",
            post_with(cancel_drive, |op| op.summary("Cancel a drive that has not finished")),
        )
        .api_route(
            "/api/v1/journal/verify",
            get_with(verify_journal, |op| {
                op.summary("Check the drive journal now (`koru verify`): intact, or the first bad entry")
            }),
        )
        .api_route(
            "/api/v1/chats",
            get_with(chats, |op| op.summary("The chats the observers know")),
        )
        .api_route(
            "/api/v1/chats/{id}/turns",
            get_with(chat_turns, |op| {
                op.summary("A chat's last turns read back from its store: prompt, steps, the whole reply (paged)")
            }),
        )
        .api_route(
            "/api/v1/chats/{id}/audit",
            post_with(chat_audit, |op| {
                op.summary("Audit a chat into its ledger in the daemon's default folder (`koru audit`), or extend it; `html=true` also writes its page there")
            }),
        )
        .api_route(
            "/api/v1/drives/{id}/turn",
            get_with(drive_turn, |op| {
                op.summary("The turn a drive's prompt started, read back from its chat's store")
            }),
        )
        .api_route(
            "/api/v1/doctor",
            get_with(doctor, |op| {
                op.summary("The doctor report, probed now (docs/doctor.md)")
            }),
        )
        .api_route(
            "/api/v1/interfaces",
            get_with(interfaces, |op| {
                op.summary("The merged interface registry (as `koru registry show --json`)")
            }),
        )
        .api_route(
            "/api/v1/registry/reload",
            post_with(reload_registry, |op| {
                op.summary("Read the registry files again (recovery action reload_registry)")
            }),
        )
        .api_route(
            "/api/v1/recovery",
            get_with(recovery_actions, |op| {
                op.summary("The recovery actions, with labels and parameters")
            })
            .post_with(run_recovery, |op| {
                op.summary("Run a recovery action; `params` may be left out for actions without any")
            }),
        )
        .api_route(
            "/api/v1/dashboard/codes",
            post_with(dashboard_code, |op| {
                op.summary("A one-time dashboard login link (bearer token only; used by `koru dashboard`)")
            }),
        )
        .api_route(
            "/api/v1/events",
            get_with(events::sse, |op| {
                op.summary("The daemon's events as Server-Sent Events; `Last-Event-ID` resumes")
            }),
        )
        .api_route(
            "/api/v1/events/ws",
            get_with(events::websocket, |op| {
                op.summary("The daemon's events over WebSocket; `?since=N` resumes; needs this server's Origin")
            }),
        )
}

/// The daemon, reached on behalf of one request's caller (a connection per exchange).
pub struct Daemon {
    controller: Controller,
}

impl FromRequestParts<AppState> for Daemon {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::unauthorized("this endpoint needs the bearer token or the dashboard cookie")
        })?;
        Ok(Daemon {
            controller: Controller::new(state.socket.clone(), caller.client_name()),
        })
    }
}

impl OperationInput for Daemon {}

impl Daemon {
    /// Runs one exchange on a fresh connection (see [`Controller::once`]).
    pub async fn once<T>(
        &self,
        exchange: impl for<'a> FnOnce(&'a mut Client) -> Exchange<'a, T>,
    ) -> Result<T, ApiError> {
        Ok(self.controller.once(exchange).await?)
    }
}

/// A JSON request body: `Content-Type: application/json` (else 415), at most 1 MiB (else
/// 413), parsed with the line, column and path of the first problem (else 400 `bad_json`).
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        let bytes = json_body(request).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

impl<T: JsonSchema> OperationInput for ApiJson<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        document_body::<T>(ctx, operation);
    }
}

fn document_body<T: JsonSchema>(ctx: &mut GenContext, operation: &mut Operation) {
    let json_schema = ctx.schema.subschema_for::<T>();
    aide::operation::set_body(
        ctx,
        operation,
        RequestBody {
            description: None,
            content: [(
                "application/json".to_string(),
                MediaType {
                    schema: Some(SchemaObject {
                        json_schema,
                        example: None,
                        external_docs: None,
                    }),
                    ..Default::default()
                },
            )]
            .into_iter()
            .collect(),
            required: true,
            extensions: Default::default(),
        },
    );
}

/// True for `application/json`, with or without parameters.
pub fn is_json_content_type(value: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// Checks the content type and reads the body within the size limit.
async fn json_body(request: Request) -> Result<Bytes, ApiError> {
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_json_content_type);
    if !is_json {
        return Err(ApiError::unsupported_media_type());
    }
    super::body::read_limited(request.into_body()).await
}

/// Parses a JSON body into `T`, saying where the first problem is. Pure, for tests.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize::<_, T>(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        bad_json(&inner, &path)
    })?;
    deserializer.end().map_err(|error| bad_json(&error, "."))?;
    Ok(value)
}

fn bad_json(error: &serde_json::Error, path: &str) -> ApiError {
    let text = error.to_string();
    let text = match text.rfind(" at line ") {
        Some(cut) => &text[..cut],
        None => &text,
    };
    let what = if error.is_syntax() || error.is_eof() {
        "the body is not valid JSON"
    } else {
        "the body is not the expected JSON"
    };
    let place = if path == "." {
        String::new()
    } else {
        format!(" at `{path}`")
    };
    ApiError::bad_json(
        format!(
            "{what}: {text}{place} (line {}, column {})",
            error.line(),
            error.column()
        ),
        error.line(),
        error.column(),
        path,
    )
}

/// The body of `POST /api/v1/recovery`: a `RecoveryRun`, where `params` may be left out
/// for the actions that take none.
pub struct RecoveryBody(pub RecoveryRun);

/// Parses a recovery request, taking a missing `params` as `{}`. Pure, for tests.
pub fn parse_recovery(bytes: &[u8]) -> Result<RecoveryRun, ApiError> {
    let first = match parse_json::<RecoveryRun>(bytes) {
        Ok(run) => return Ok(run),
        Err(error) => error,
    };
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_slice(bytes) else {
        return Err(first);
    };
    if object.contains_key("params") {
        return Err(first);
    }
    object.insert("params".into(), serde_json::json!({}));
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|_| first)
}

impl<S: Send + Sync> FromRequest<S> for RecoveryBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        let bytes = json_body(request).await?;
        parse_recovery(&bytes).map(RecoveryBody)
    }
}

impl OperationInput for RecoveryBody {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        document_body::<RecoveryRun>(ctx, operation);
    }
}

/// A `201 Created` answer.
pub struct Created<T>(pub T);

impl<T: IntoResponse> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        (StatusCode::CREATED, self.0).into_response()
    }
}

impl<T: OperationOutput> OperationOutput for Created<T> {
    type Inner = T::Inner;

    fn operation_response(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Option<OpenApiResponse> {
        T::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<OpenApiStatus>, OpenApiResponse)> {
        T::operation_response(ctx, operation)
            .map(|response| vec![(Some(OpenApiStatus::Code(201)), response)])
            .unwrap_or_default()
    }
}

/// `GET health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
    /// The daemon's version.
    pub version: String,
    /// The socket protocol version it speaks.
    pub protocol: u32,
    /// The drive journal's head (`entry_hash` of its last entry), to write down elsewhere
    /// and check later with `koru verify`; absent without a journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_head: Option<String>,
}

async fn health(State(state): State<AppState>) -> Json<Health> {
    let controller = Controller::new(state.socket.clone(), "api");
    let asked = controller.once(|c| Box::pin(c.status()));
    let journal_head = tokio::time::timeout(Duration::from_secs(2), asked)
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|status| status.journal)
        .map(|journal| journal.head);
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol: koru_protocol::PROTOCOL_VERSION,
        journal_head,
    })
}

async fn verify_journal(daemon: Daemon) -> Result<Json<koru_protocol::VerifyReport>, ApiError> {
    Ok(Json(daemon.once(|c| Box::pin(c.verify_journal())).await?))
}

async fn status(daemon: Daemon) -> Result<Json<StatusInfo>, ApiError> {
    let mut status = daemon.once(|c| Box::pin(c.status())).await?;
    if let Some(http) = status.http.as_mut() {
        // The token authenticates programs; a page that can read this already has access.
        http.token = String::new();
    }
    Ok(Json(status))
}

async fn sessions(daemon: Daemon) -> Result<Json<SessionsListResult>, ApiError> {
    let result = daemon
        .once(|c| {
            Box::pin(c.sessions(SessionsList {
                agents: true,
                ..SessionsList::default()
            }))
        })
        .await?;
    Ok(Json(result))
}

/// The filters of `GET drives`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct DrivesQuery {
    /// A drive state (`queued`, `done`, …), or `active` (not ended) or `terminal` (ended).
    pub state: Option<String>,
    /// Only drives of this session.
    pub session_id: Option<String>,
    /// Only drives that have not ended.
    pub active: Option<bool>,
    /// Only drives accepted before this one: the first (oldest) drive of the page before,
    /// to page back through the journal.
    pub before: Option<String>,
    /// Only drives created at or after this time (Unix ms).
    pub since_ms: Option<u64>,
    /// Page size: 100 when absent, at most 1,000. `more` in the answer says whether older
    /// drives exist.
    pub limit: Option<u32>,
}

/// Which states a `state=` filter keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    Active,
    Terminal,
    Exactly(DriveState),
}

impl StateFilter {
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        match raw {
            "active" => Ok(StateFilter::Active),
            "terminal" => Ok(StateFilter::Terminal),
            other => serde_json::from_value(serde_json::Value::String(other.to_string()))
                .map(StateFilter::Exactly)
                .map_err(|_| {
                    ApiError::invalid_argument(format!(
                        "`state` must be a drive state (queued, sent, received, focused, pasted, submitted, done, failed, cancelled, timed_out), `active` or `terminal`; got {other:?}"
                    ))
                    .with_detail(serde_json::json!({"field": "state"}))
                }),
        }
    }

    pub fn keeps(self, state: DriveState) -> bool {
        match self {
            StateFilter::Active => !state.is_terminal(),
            StateFilter::Terminal => state.is_terminal(),
            StateFilter::Exactly(wanted) => state == wanted,
        }
    }
}

async fn drives(
    daemon: Daemon,
    Query(query): Query<DrivesQuery>,
) -> Result<Json<DrivesListResult>, ApiError> {
    let filter = query.state.as_deref().map(StateFilter::parse).transpose()?;
    let request = DrivesList {
        session_id: query.session_id.filter(|s| !s.is_empty()),
        active_only: query.active.unwrap_or(false) || filter == Some(StateFilter::Active),
        history: true,
        before: query.before.filter(|s| !s.is_empty()),
        since_ms: query.since_ms,
        limit: Some(query.limit.unwrap_or(100)),
    };
    let mut result = daemon.once(|c| Box::pin(c.drives(request))).await?;
    if let Some(filter) = filter {
        result.drives.retain(|d| filter.keeps(d.state));
    }
    Ok(Json(result))
}

/// The `{id}` of `drives/{id}`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct DriveId {
    /// The drive's id (`d_…`).
    pub id: String,
}

async fn drive(
    daemon: Daemon,
    Path(DriveId { id }): Path<DriveId>,
) -> Result<Json<DriveResult>, ApiError> {
    let drive = daemon.once(move |c| Box::pin(c.get_drive(id))).await?;
    Ok(Json(DriveResult { drive }))
}

async fn create_drive(
    daemon: Daemon,
    ApiJson(create): ApiJson<DriveCreate>,
) -> Result<Created<Json<DriveResult>>, ApiError> {
    if create.prompt.len() > crate::control::MAX_PROMPT_BYTES {
        return Err(ApiError::invalid_argument(format!(
            "`prompt` is {} bytes of UTF-8; the limit is {} bytes",
            create.prompt.len(),
            crate::control::MAX_PROMPT_BYTES
        ))
        .with_detail(serde_json::json!({"field": "prompt"})));
    }
    let drive = daemon.once(|c| Box::pin(c.create_drive(create))).await?;
    Ok(Created(Json(DriveResult { drive })))
}

async fn cancel_drive(
    daemon: Daemon,
    Path(DriveId { id }): Path<DriveId>,
) -> Result<Json<DriveResult>, ApiError> {
    let drive = daemon.once(move |c| Box::pin(c.cancel_drive(id))).await?;
    Ok(Json(DriveResult { drive }))
}

async fn chats(daemon: Daemon) -> Result<Json<ChatsListResult>, ApiError> {
    let result = daemon
        .once(|c| Box::pin(c.chats(ChatsList::default())))
        .await?;
    Ok(Json(result))
}

/// The `{id}` of `chats/{id}/turns`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ChatId {
    /// The chat's id, as `GET chats` lists it.
    pub id: String,
}

/// Which turns `GET chats/{id}/turns` returns, and how its texts are cut.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct TurnsQuery {
    /// The chat's store (registry interface id), when two stores have a chat of that id.
    pub store: Option<String>,
    /// The last N turns (default 1, at most 50).
    pub turns: Option<u32>,
    /// One turn by its index (0 is the first), e.g. to page through its reply.
    pub turn: Option<u64>,
    /// Where each reply starts, in characters (default 0).
    pub reply_offset: Option<u64>,
    /// The most characters of each reply and prompt (default and at most 100000).
    pub max_chars: Option<u64>,
}

async fn chat_turns(
    daemon: Daemon,
    Path(ChatId { id }): Path<ChatId>,
    Query(query): Query<TurnsQuery>,
) -> Result<Json<koru_protocol::ChatReadResult>, ApiError> {
    let read = koru_protocol::ChatRead {
        chat_id: Some(id),
        store: query.store.filter(|s| !s.is_empty()),
        drive_id: None,
        turns: query.turns,
        turn: query.turn,
        reply_offset: query.reply_offset,
        max_chars: query.max_chars,
    };
    let result = daemon.once(move |c| Box::pin(c.read_chat(read))).await?;
    Ok(Json(result))
}

/// `POST chats/{id}/audit`'s options (no paths: the ledger goes to the daemon's default
/// folder).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct AuditQuery {
    /// The chat's store (registry interface id), when two stores have a chat of that id.
    pub store: Option<String>,
    /// Also write the ledger's self-verifying page, as `ledger.html` in its folder.
    pub html: Option<bool>,
}

async fn chat_audit(
    daemon: Daemon,
    Path(ChatId { id }): Path<ChatId>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<koru_protocol::ChatAuditResult>, ApiError> {
    let audit = koru_protocol::ChatAudit {
        chat_id: Some(id),
        store: query.store.filter(|s| !s.is_empty()),
        out: None,
        html: (query.html == Some(true)).then(|| crate::audit::PAGE_NAME.to_string()),
    };
    let result = daemon.once(move |c| Box::pin(c.audit_chat(audit))).await?;
    Ok(Json(result))
}

/// How `GET drives/{id}/turn` cuts its texts.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct TurnPageQuery {
    /// Where the reply starts, in characters (default 0).
    pub reply_offset: Option<u64>,
    /// The most characters of the reply and the prompt (default and at most 100000).
    pub max_chars: Option<u64>,
}

async fn drive_turn(
    daemon: Daemon,
    Path(DriveId { id }): Path<DriveId>,
    Query(query): Query<TurnPageQuery>,
) -> Result<Json<koru_protocol::ChatReadResult>, ApiError> {
    let read = koru_protocol::ChatRead {
        drive_id: Some(id),
        reply_offset: query.reply_offset,
        max_chars: query.max_chars,
        ..Default::default()
    };
    let result = daemon.once(move |c| Box::pin(c.read_chat(read))).await?;
    Ok(Json(result))
}

async fn doctor(
    daemon: Daemon,
    State(state): State<AppState>,
) -> Result<Json<DoctorReport>, ApiError> {
    let report = crate::doctor::build_report(
        daemon.controller.socket(),
        &[],
        Duration::from_secs(2),
        &state.layers,
    )
    .await
    .map_err(|error| ApiError::internal(format!("the doctor report failed: {error:#}")))?;
    Ok(Json(report))
}

async fn interfaces(
    _daemon: Daemon,
    State(state): State<AppState>,
) -> Result<Json<RegistryView>, ApiError> {
    let layers = state.layers.clone();
    // Reading the layer files blocks; the daemon's one thread must not wait on the disk.
    let view = tokio::task::spawn_blocking(move || {
        RegistryView::of(&crate::registry::load_layers(&layers))
    })
    .await
    .map_err(|error| ApiError::internal(format!("reading the registry failed: {error}")))?;
    Ok(Json(view))
}

async fn run(daemon: &Daemon, action: RecoveryAction) -> Result<Json<RecoveryResult>, ApiError> {
    let result = daemon.once(|c| Box::pin(c.run_recovery(action))).await?;
    Ok(Json(result))
}

async fn reload_registry(daemon: Daemon) -> Result<Json<RecoveryResult>, ApiError> {
    run(&daemon, RecoveryAction::ReloadRegistry {}).await
}

async fn recovery_actions(_daemon: Daemon) -> Json<ActionList> {
    Json(actions())
}

async fn run_recovery(
    daemon: Daemon,
    RecoveryBody(request): RecoveryBody,
) -> Result<Json<RecoveryResult>, ApiError> {
    run(&daemon, request.action).await
}

pub use crate::control::dashboard_login::LoginCode;

async fn dashboard_code(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<LoginCode>, ApiError> {
    // The guard has checked that Host names this server.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| state.auth.allowed_authorities().first().map(String::as_str))
        .unwrap_or_default()
        .to_string();
    let (code, _) = state.auth.mint_code()?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    Ok(Json(LoginCode {
        url: format!("{}://{host}/login?code={code}", state.scheme),
        expires_at_ms: now_ms + CODE_LIFETIME.as_millis() as u64,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(error: ApiError) -> (u16, String, serde_json::Value) {
        (
            error.status.as_u16(),
            error.body.code,
            error.body.detail.unwrap_or_default(),
        )
    }

    #[test]
    fn bad_bodies_say_where_they_went_wrong() {
        let (status, code, where_) =
            detail(parse_json::<DriveCreate>(br#"{"target":"#).unwrap_err());
        assert_eq!((status, code.as_str()), (400, "bad_json"));
        assert_eq!(where_["line"], 1);
        assert_eq!(where_["column"], 10);
        let (_, _, where_) = detail(
            parse_json::<DriveCreate>(b"{\n  \"target\": \"focused\",\n  \"prompt\": 42\n}")
                .unwrap_err(),
        );
        assert_eq!(where_["path"], "prompt");
        assert_eq!(where_["line"], 3);
        let (_, _, where_) = detail(
            parse_json::<DriveCreate>(
                br#"{"target":"focused","prompt":"x","options":{"busy":"never"}}"#,
            )
            .unwrap_err(),
        );
        assert_eq!(where_["path"], "options.busy");
        let error = parse_json::<DriveCreate>(br#"{"target":"focused","prompt":"x"} trailing"#)
            .unwrap_err();
        assert_eq!(error.code(), "bad_json");
        assert!(parse_json::<DriveCreate>(br#"{"target":"focused","prompt":"x"}"#).is_ok());
    }

    #[test]
    fn recovery_params_may_be_left_out_for_actions_without_any() {
        assert_eq!(
            parse_recovery(br#"{"action":"reprobe"}"#).unwrap().action,
            RecoveryAction::Reprobe {}
        );
        assert_eq!(
            parse_recovery(br#"{"action":"reload_registry","params":{}}"#)
                .unwrap()
                .action,
            RecoveryAction::ReloadRegistry {}
        );
        assert_eq!(
            parse_recovery(br#"{"action":"cancel_drive","params":{"drive_id":"d_1"}}"#)
                .unwrap()
                .action,
            RecoveryAction::CancelDrive {
                drive_id: "d_1".into()
            }
        );
        for bad in [
            &br#"{"action":"retry_drive"}"#[..],
            br#"{"action":"teleport"}"#,
            br#"{"action":"cancel_drive","params":{}}"#,
            br#"{"action":"#,
        ] {
            assert_eq!(
                parse_recovery(bad).unwrap_err().code(),
                "bad_json",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn state_filters_name_states_or_the_two_groups() {
        assert!(StateFilter::parse("active")
            .unwrap()
            .keeps(DriveState::Sent));
        assert!(!StateFilter::parse("active")
            .unwrap()
            .keeps(DriveState::Done));
        assert!(StateFilter::parse("terminal")
            .unwrap()
            .keeps(DriveState::TimedOut));
        assert!(StateFilter::parse("timed_out")
            .unwrap()
            .keeps(DriveState::TimedOut));
        assert!(!StateFilter::parse("done")
            .unwrap()
            .keeps(DriveState::Failed));
        assert_eq!(
            StateFilter::parse("later").unwrap_err().code(),
            "invalid_argument"
        );
        assert!(is_json_content_type("application/json; charset=utf-8"));
        assert!(is_json_content_type("Application/JSON"));
        assert!(!is_json_content_type("text/plain"));
    }
}

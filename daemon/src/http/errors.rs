//! The one error shape of the HTTP API, `{"code", "message", "detail"}`, with its status code, and the mapping from the daemon's refusals (`ErrorCode`) and connection failures to it.

use aide::generate::GenContext;
use aide::openapi::{Operation, Response as OpenApiResponse, StatusCode as OpenApiStatus};
use aide::OperationOutput;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use koru_protocol::ErrorCode;

use super::auth::Caller;
use crate::access::Role;
use crate::control::ClientError;

pub use crate::control::dashboard_login::ErrorBody;

/// A refused or failed request: its status and body.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status} {}: {}", body.code, body.message)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: ErrorBody {
                code: code.to_string(),
                message: message.into(),
                detail: None,
            },
        }
    }

    pub fn with_detail(mut self, detail: serde_json::Value) -> Self {
        self.body.detail = Some(detail);
        self
    }

    pub fn code(&self) -> &str {
        &self.body.code
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// The caller's role is below what the request needs: 403 `forbidden_role`, naming both
    /// roles; `detail` = `{"needed", "held", "token", "token_name"?}`.
    pub fn forbidden_role(what: &str, needed: Role, caller: &Caller) -> Self {
        ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ForbiddenRole.as_str(),
            crate::access::forbidden_message(what, needed, caller.role),
        )
        .with_detail(match &caller.token_name {
            Some(name) => serde_json::json!({
                "needed": needed.as_str(),
                "held": caller.role.as_str(),
                "token": caller.token_id,
                "token_name": name,
            }),
            None => serde_json::json!({
                "needed": needed.as_str(),
                "held": caller.role.as_str(),
                "token": caller.token_id,
            }),
        })
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub fn body_too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than {limit} bytes"),
        )
        .with_detail(serde_json::json!({ "limit": limit }))
    }

    pub fn unsupported_media_type() -> Self {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with `Content-Type: application/json`",
        )
    }

    /// A body that is not JSON or not the expected shape, with where it went wrong.
    pub fn bad_json(message: impl Into<String>, line: usize, column: usize, path: &str) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_json", message)
            .with_detail(serde_json::json!({ "line": line, "column": column, "path": path }))
    }

    /// The daemon core refused a request: its code keeps its meaning over HTTP.
    pub fn from_daemon(error: &koru_protocol::ErrorMessage) -> Self {
        let keep = |status: StatusCode| ApiError::new(status, error.code.as_str(), &error.message);
        match error.code {
            ErrorCode::NoTarget | ErrorCode::UnknownDrive | ErrorCode::UnknownChat => {
                keep(StatusCode::NOT_FOUND)
            }
            // Nothing to read back yet (the chat has not recorded the prompt): ask again.
            ErrorCode::NotObservable => keep(StatusCode::CONFLICT),
            // The chat's store file cannot be read now.
            ErrorCode::ChatUnreadable => keep(StatusCode::BAD_GATEWAY),
            // The ledger's folder holds what the audit may not extend (another chat's, not
            // intact, keyed otherwise, being written).
            ErrorCode::AuditFailed => keep(StatusCode::CONFLICT),
            ErrorCode::DriveFinished | ErrorCode::NotRetryable | ErrorCode::AmbiguousTarget => {
                keep(StatusCode::CONFLICT)
            }
            ErrorCode::InvalidMessage => {
                let mut api = ApiError::invalid_argument(&error.message);
                if let Some(field) = error.location.as_ref().and_then(|l| l.field.as_ref()) {
                    api = api.with_detail(serde_json::json!({ "field": field }));
                }
                api
            }
            ErrorCode::ShuttingDown => keep(StatusCode::SERVICE_UNAVAILABLE),
            ErrorCode::QueueFull => keep(StatusCode::TOO_MANY_REQUESTS),
            other => ApiError::internal(format!(
                "the daemon refused the request: {} ({other})",
                error.message
            ))
            .with_detail(serde_json::json!({ "daemon_code": other.as_str() })),
        }
    }

    /// The daemon could not be asked, or answered out of turn.
    pub fn from_client(error: ClientError) -> Self {
        let code = error.code().as_str();
        match error {
            ClientError::Refused(refusal) => ApiError::from_daemon(&refusal),
            ClientError::Unexpected(what) => ApiError::new(
                StatusCode::BAD_GATEWAY,
                code,
                format!("unexpected answer from the daemon: {what}"),
            ),
            other => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                code,
                format!("the daemon core does not answer: {other}"),
            ),
        }
    }
}

impl From<ClientError> for ApiError {
    fn from(error: ClientError) -> Self {
        ApiError::from_client(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // Whatever of the body was not drained is left unread: the connection cannot carry
            // another request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

impl OperationOutput for ApiError {
    type Inner = ErrorBody;

    fn operation_response(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Option<OpenApiResponse> {
        let mut response = Json::<ErrorBody>::operation_response(ctx, operation)?;
        response.description = "An error: see the table of codes in docs/http-api.md".to_string();
        Some(response)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<OpenApiStatus>, OpenApiResponse)> {
        Self::operation_response(ctx, operation)
            .map(|response| vec![(None, response)])
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_codes_keep_their_meaning_as_statuses() {
        let status = |code: ErrorCode| {
            let error = ApiError::from_daemon(&koru_protocol::ErrorMessage::new(code, "m"));
            (error.status.as_u16(), error.body.code)
        };
        assert_eq!(
            status(ErrorCode::UnknownDrive),
            (404, "unknown_drive".into())
        );
        assert_eq!(status(ErrorCode::NoTarget), (404, "no_target".into()));
        assert_eq!(
            status(ErrorCode::NotRetryable),
            (409, "not_retryable".into())
        );
        assert_eq!(
            status(ErrorCode::DriveFinished),
            (409, "drive_finished".into())
        );
        assert_eq!(
            status(ErrorCode::AmbiguousTarget),
            (409, "ambiguous_target".into())
        );
        assert_eq!(
            status(ErrorCode::InvalidMessage),
            (400, "invalid_argument".into())
        );
        assert_eq!(
            status(ErrorCode::ShuttingDown),
            (503, "shutting_down".into())
        );
        assert_eq!(status(ErrorCode::WrongRole), (500, "internal".into()));
        let down = ApiError::from_client(ClientError::NoDaemon {
            path: "/nowhere".into(),
        });
        assert_eq!((down.status.as_u16(), down.code()), (503, "daemon_down"));
    }
}

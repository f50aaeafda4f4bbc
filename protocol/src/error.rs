//! The `error` message and its closed set of codes: every refusal the daemon sends says what went wrong, where, and in answer to which request.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{RequestId, VersionRange};

/// Why a line or request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// A message other than `hello` came first. The connection is closed.
    HelloRequired,
    /// No common protocol version (`supported` says the daemon's range), or a line's `v`
    /// differs from the negotiated version. A failed handshake closes the connection.
    VersionMismatch,
    /// The `hello` was well-formed JSON but not a valid hello (e.g. a plugin without `ide`).
    InvalidHello,
    /// The line is not valid UTF-8 or not a JSON object. Repeated malformed lines close the connection.
    Malformed,
    /// The line is longer than `max_line_bytes`. The connection is closed.
    LineTooLong,
    /// The `type` is not one this daemon knows. The session is kept.
    UnknownType,
    /// The `type` is known but the fields are wrong (`location.field` says which, when known).
    InvalidMessage,
    /// The message is not one this connection's role may send.
    WrongRole,
    /// `hello` sent twice.
    AlreadyGreeted,
    /// No connected session matches the drive's target.
    NoTarget,
    /// More than one session matches the drive's target; the message lists them.
    AmbiguousTarget,
    /// No drive has that id.
    UnknownDrive,
    /// The drive already ended; it cannot be cancelled.
    DriveFinished,
    /// `retry_drive` refused: the drive has not ended, or its prompt may already have been
    /// submitted (a retry would duplicate it).
    NotRetryable,
    /// The peer runs as another user. The connection is closed.
    PeerRefused,
    /// No `hello` arrived in time. The connection is closed.
    HandshakeTimeout,
    /// The connection did not read what the daemon sent fast enough. The connection is closed.
    SlowReader,
    /// The daemon is shutting down.
    ShuttingDown,
    /// A bug in the daemon; the message says what.
    Internal,
    /// The drive journal cannot be written (disk full, permissions); drives are refused
    /// rather than pushed without a record. The message says why.
    JournalUnavailable,
    /// The drive was refused because the daemon already holds as many as it may: the
    /// target session's drives that have not ended (`--max-queued-drives`), or the bytes of
    /// prompts queued and not yet sent (`--max-pending-prompt-bytes`, of which one session
    /// may hold half). The message says which limit and its value. Nothing was queued;
    /// retry when drives have ended. Also any controller request sent while the
    /// connection already has `--max-requests-in-flight` requests the daemon has not
    /// handled yet: wait for their answers first.
    QueueFull,
    /// The caller's role does not allow the request: an observe-only bearer token (or
    /// `koru mcp --role observe`) asked for something that acts (send, cancel, recover, …).
    /// The message names the role needed and the role held. Sent by the HTTP API (status
    /// 403) and the MCP tools, not on the socket, whose peers are the daemon's own user.
    ForbiddenRole,
    /// `chat.read` named a chat no observed store has (or a store that has no chat of
    /// that id). The message says what was looked for.
    UnknownChat,
    /// `chat.read` named a drive whose prompt no chat store has shown (yet): nothing can
    /// be read back. The message says what is known of the drive's chat.
    NotObservable,
    /// The chat's store file could not be read now (gone, unreadable, not the store's
    /// format). The message names the file and the reason.
    ChatUnreadable,
    /// `chat.audit` could not write or extend the ledger (its folder is another chat's
    /// ledger, does not verify, is being written by another process, or cannot be
    /// written). The message names the folder and the reason.
    AuditFailed,
    /// A code this build does not know (sent by a newer peer).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The wire spelling of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::HelloRequired => "hello_required",
            ErrorCode::VersionMismatch => "version_mismatch",
            ErrorCode::InvalidHello => "invalid_hello",
            ErrorCode::Malformed => "malformed",
            ErrorCode::LineTooLong => "line_too_long",
            ErrorCode::UnknownType => "unknown_type",
            ErrorCode::InvalidMessage => "invalid_message",
            ErrorCode::WrongRole => "wrong_role",
            ErrorCode::AlreadyGreeted => "already_greeted",
            ErrorCode::NoTarget => "no_target",
            ErrorCode::AmbiguousTarget => "ambiguous_target",
            ErrorCode::UnknownDrive => "unknown_drive",
            ErrorCode::DriveFinished => "drive_finished",
            ErrorCode::NotRetryable => "not_retryable",
            ErrorCode::PeerRefused => "peer_refused",
            ErrorCode::HandshakeTimeout => "handshake_timeout",
            ErrorCode::SlowReader => "slow_reader",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
            ErrorCode::JournalUnavailable => "journal_unavailable",
            ErrorCode::QueueFull => "queue_full",
            ErrorCode::ForbiddenRole => "forbidden_role",
            ErrorCode::UnknownChat => "unknown_chat",
            ErrorCode::NotObservable => "not_observable",
            ErrorCode::ChatUnreadable => "chat_unreadable",
            ErrorCode::AuditFailed => "audit_failed",
            ErrorCode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in the input an error was found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Location {
    /// The 1-based number of the offending line on this connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The 1-based column (JSON syntax errors) or byte offset (UTF-8 errors) inside the line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    /// The JSON field at fault, when known (`prompt`, `protocol.min`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// `error`: a refusal, in answer to the request whose `id` is in `ref` when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorMessage {
    pub code: ErrorCode,
    /// One human-readable sentence saying what was wrong and what to do.
    pub message: String,
    /// The `id` of the request this answers, if the line had one.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<RequestId>,
    /// The daemon's supported protocol range (with `version_mismatch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported: Option<VersionRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
}

impl ErrorMessage {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorMessage {
            code,
            message: message.into(),
            reference: None,
            supported: None,
            location: None,
        }
    }

    pub fn with_reference(mut self, reference: Option<RequestId>) -> Self {
        self.reference = reference;
        self
    }

    pub fn with_location(mut self, location: Location) -> Self {
        self.location = Some(location);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_use_their_documented_spelling_and_unknown_codes_are_tolerated() {
        for code in [
            ErrorCode::HelloRequired,
            ErrorCode::LineTooLong,
            ErrorCode::NoTarget,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
        let decoded: ErrorCode = serde_json::from_value("from_the_future".into()).unwrap();
        assert_eq!(decoded, ErrorCode::Unknown);
    }
}

//! The line envelope (`v`, `type`, `id` + body), the closed set of message types, and the pure rules that turn one line of bytes into a message or a precise decode error.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Ack, DaemonInfo, DriveCancelNotice, DriveCreate, DriveInfo, DriveRef, DriveRequest, DrivesList,
    DrivesListResult, ErrorCode, ErrorMessage, Hello, Location, PluginEvent, SessionsList,
    SessionsListResult, StatusInfo, StreamEvent, Welcome,
};

/// A request id chosen by the sender: an integer or a string. Replies carry it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    Text(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// One protocol line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    /// The protocol version this line is written in.
    pub v: u32,
    /// Present on requests; a reply carries the id of the request it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    #[serde(flatten)]
    pub message: Message,
}

impl Envelope {
    /// A line in the current protocol version without an id.
    pub fn new(message: Message) -> Self {
        Envelope {
            v: crate::PROTOCOL_VERSION,
            id: None,
            message,
        }
    }

    /// A line in the current protocol version carrying `id`.
    pub fn with_id(id: Option<RequestId>, message: Message) -> Self {
        Envelope {
            v: crate::PROTOCOL_VERSION,
            id,
            message,
        }
    }
}

/// The `bye` reason with which the daemon asks a plugin to connect again.
pub const RECONNECT_REQUESTED: &str = "reconnect_requested";

/// `bye`: the sender is about to close the connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Bye {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The reply to `drive.create`, `drive.get` and `drive.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DriveResult {
    pub drive: DriveInfo,
}

/// One item on a subscribed controller's event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamItem {
    /// Increases by one for every event the daemon publishes.
    pub seq: u64,
    pub event: StreamEvent,
}

/// Every message type of protocol v1, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum Message {
    // Handshake and connection housekeeping (both roles).
    #[serde(rename = "hello")]
    Hello(Hello),
    #[serde(rename = "welcome")]
    Welcome(Welcome),
    #[serde(rename = "error")]
    Error(ErrorMessage),
    #[serde(rename = "ping")]
    Ping {},
    #[serde(rename = "pong")]
    Pong {},
    #[serde(rename = "bye")]
    Bye(Bye),

    // Daemon ↔ plugin.
    #[serde(rename = "drive")]
    Drive(DriveRequest),
    #[serde(rename = "cancel")]
    Cancel(DriveCancelNotice),
    #[serde(rename = "ack")]
    Ack(Ack),
    #[serde(rename = "event")]
    Event(PluginEvent),
    #[serde(rename = "terminals")]
    Terminals(crate::TerminalsReport),
    #[serde(rename = "capabilities")]
    Capabilities(crate::CapabilitiesReport),
    #[serde(rename = "clipboard")]
    Clipboard(crate::ClipboardOrder),
    #[serde(rename = "clipboard.result")]
    ClipboardResult(crate::ClipboardResult),
    #[serde(rename = "terminal.io")]
    TerminalIo(crate::TerminalIo),
    #[serde(rename = "terminal.io.result")]
    TerminalIoResult(crate::TerminalIoResult),

    // Controller requests and their replies.
    #[serde(rename = "status")]
    Status {},
    #[serde(rename = "status.result")]
    StatusResult(StatusInfo),
    #[serde(rename = "sessions.list")]
    SessionsList(SessionsList),
    #[serde(rename = "sessions.list.result")]
    SessionsListResult(SessionsListResult),
    #[serde(rename = "drives.list")]
    DrivesList(DrivesList),
    #[serde(rename = "drives.list.result")]
    DrivesListResult(DrivesListResult),
    #[serde(rename = "drive.create")]
    DriveCreate(DriveCreate),
    #[serde(rename = "drive.get")]
    DriveGet(DriveRef),
    #[serde(rename = "drive.cancel")]
    DriveCancel(DriveRef),
    #[serde(rename = "drive.result")]
    DriveResult(DriveResult),
    #[serde(rename = "events.subscribe")]
    EventsSubscribe {},
    #[serde(rename = "events.subscribed")]
    EventsSubscribed {},
    #[serde(rename = "stream")]
    Stream(StreamItem),
    #[serde(rename = "chats.list")]
    ChatsList(crate::ChatsList),
    #[serde(rename = "chats.list.result")]
    ChatsListResult(crate::ChatsListResult),
    #[serde(rename = "observe.report")]
    ObserveReport(crate::ObserveReport),
    #[serde(rename = "observe.reported")]
    ObserveReported(crate::ObserveReported),
    #[serde(rename = "recovery.run")]
    RecoveryRun(crate::RecoveryRun),
    #[serde(rename = "recovery.result")]
    RecoveryResult(crate::RecoveryResult),
    #[serde(rename = "journal.verify")]
    JournalVerify(crate::JournalVerify),
    #[serde(rename = "journal.verify.result")]
    JournalVerifyResult(crate::JournalVerifyResult),
    #[serde(rename = "chat.read")]
    ChatRead(crate::ChatRead),
    #[serde(rename = "chat.read.result")]
    ChatReadResult(Box<crate::ChatReadResult>),
    #[serde(rename = "chat.audit")]
    ChatAudit(crate::ChatAudit),
    #[serde(rename = "chat.audit.result")]
    ChatAuditResult(crate::ChatAuditResult),
}

/// The wire names of every message type, in the order of [`Message`].
pub const KNOWN_MESSAGE_TYPES: &[&str] = &[
    "hello",
    "welcome",
    "error",
    "ping",
    "pong",
    "bye",
    "drive",
    "cancel",
    "ack",
    "event",
    "terminals",
    "capabilities",
    "clipboard",
    "clipboard.result",
    "terminal.io",
    "terminal.io.result",
    "status",
    "status.result",
    "sessions.list",
    "sessions.list.result",
    "drives.list",
    "drives.list.result",
    "drive.create",
    "drive.get",
    "drive.cancel",
    "drive.result",
    "events.subscribe",
    "events.subscribed",
    "stream",
    "chats.list",
    "chats.list.result",
    "observe.report",
    "observe.reported",
    "recovery.run",
    "recovery.result",
    "journal.verify",
    "journal.verify.result",
    "chat.read",
    "chat.read.result",
    "chat.audit",
    "chat.audit.result",
];

impl Message {
    /// The wire name of this message's type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::Welcome(_) => "welcome",
            Message::Error(_) => "error",
            Message::Ping {} => "ping",
            Message::Pong {} => "pong",
            Message::Bye(_) => "bye",
            Message::Drive(_) => "drive",
            Message::Cancel(_) => "cancel",
            Message::Ack(_) => "ack",
            Message::Event(_) => "event",
            Message::Terminals(_) => "terminals",
            Message::Capabilities(_) => "capabilities",
            Message::Clipboard(_) => "clipboard",
            Message::ClipboardResult(_) => "clipboard.result",
            Message::TerminalIo(_) => "terminal.io",
            Message::TerminalIoResult(_) => "terminal.io.result",
            Message::Status {} => "status",
            Message::StatusResult(_) => "status.result",
            Message::SessionsList(_) => "sessions.list",
            Message::SessionsListResult(_) => "sessions.list.result",
            Message::DrivesList(_) => "drives.list",
            Message::DrivesListResult(_) => "drives.list.result",
            Message::DriveCreate(_) => "drive.create",
            Message::DriveGet(_) => "drive.get",
            Message::DriveCancel(_) => "drive.cancel",
            Message::DriveResult(_) => "drive.result",
            Message::EventsSubscribe {} => "events.subscribe",
            Message::EventsSubscribed {} => "events.subscribed",
            Message::Stream(_) => "stream",
            Message::ChatsList(_) => "chats.list",
            Message::ChatsListResult(_) => "chats.list.result",
            Message::ObserveReport(_) => "observe.report",
            Message::ObserveReported(_) => "observe.reported",
            Message::RecoveryRun(_) => "recovery.run",
            Message::RecoveryResult(_) => "recovery.result",
            Message::JournalVerify(_) => "journal.verify",
            Message::JournalVerifyResult(_) => "journal.verify.result",
            Message::ChatRead(_) => "chat.read",
            Message::ChatReadResult(_) => "chat.read.result",
            Message::ChatAudit(_) => "chat.audit",
            Message::ChatAuditResult(_) => "chat.audit.result",
        }
    }

    /// A `welcome` reply.
    pub fn welcome(
        protocol: u32,
        session_id: String,
        heartbeat_ms: u64,
        max_line_bytes: usize,
    ) -> Self {
        Message::Welcome(Welcome {
            protocol,
            session_id,
            daemon: DaemonInfo {
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            heartbeat_ms,
            max_line_bytes,
            scope: None,
        })
    }
}

/// Why one line could not be decoded into a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the line is not valid UTF-8 (first bad byte at offset {valid_up_to})")]
    InvalidUtf8 { valid_up_to: usize },
    #[error("the line is not valid JSON: {detail} (column {column})")]
    InvalidJson { detail: String, column: usize },
    #[error("the line is JSON but not an object; every line must be one JSON object")]
    NotAnObject,
    #[error("unknown message type {type_name:?}")]
    UnknownType {
        type_name: String,
        id: Option<RequestId>,
    },
    #[error("invalid {type_name:?} message: {detail}")]
    InvalidMessage {
        type_name: String,
        id: Option<RequestId>,
        field: Option<String>,
        detail: String,
    },
}

impl DecodeError {
    /// The request id the bad line carried, when it could be read.
    pub fn request_id(&self) -> Option<RequestId> {
        match self {
            DecodeError::UnknownType { id, .. } | DecodeError::InvalidMessage { id, .. } => {
                id.clone()
            }
            _ => None,
        }
    }

    /// The error code the daemon answers this with.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::InvalidUtf8 { .. }
            | DecodeError::InvalidJson { .. }
            | DecodeError::NotAnObject => ErrorCode::Malformed,
            DecodeError::UnknownType { .. } => ErrorCode::UnknownType,
            DecodeError::InvalidMessage { type_name, .. } if type_name == "hello" => {
                ErrorCode::InvalidHello
            }
            DecodeError::InvalidMessage { .. } => ErrorCode::InvalidMessage,
        }
    }

    /// The `error` message that answers this decode failure on line `line_number`.
    pub fn to_error_message(&self, line_number: u64) -> ErrorMessage {
        let (column, field) = match self {
            DecodeError::InvalidUtf8 { valid_up_to } => (Some(*valid_up_to as u64 + 1), None),
            DecodeError::InvalidJson { column, .. } => (Some(*column as u64), None),
            DecodeError::InvalidMessage { field, .. } => (None, field.clone()),
            _ => (None, None),
        };
        let message = match self {
            DecodeError::UnknownType { type_name, .. } => format!(
                "unknown message type {type_name:?}; this daemon speaks protocol v{} (see docs/protocol.md)",
                crate::PROTOCOL_VERSION
            ),
            other => other.to_string(),
        };
        ErrorMessage::new(self.code(), message)
            .with_reference(self.request_id())
            .with_location(Location {
                line: Some(line_number),
                column,
                field,
            })
    }
}

/// Decodes one line (without its trailing newline) into an envelope.
///
/// The order of checks is part of the protocol: UTF-8, then JSON syntax, then "is an
/// object", then `id`, `type` (unknown types are reported as such, not as invalid), then
/// `v`, then the message's own fields.
pub fn decode_line(line: &[u8]) -> Result<Envelope, DecodeError> {
    let text = std::str::from_utf8(line).map_err(|err| DecodeError::InvalidUtf8 {
        valid_up_to: err.valid_up_to(),
    })?;
    // Fast path: a well-formed line parses straight into its typed message. Anything it
    // rejects goes through the slow path below, which names exactly what is wrong.
    if let Ok(envelope) = serde_json::from_str::<Envelope>(text) {
        if envelope.v >= 1 {
            return Ok(envelope);
        }
    }
    decode_precisely(text)
}

/// The slow path: parse to a JSON value, then check the envelope and the body step by step
/// to report the first problem with its location.
fn decode_precisely(text: &str) -> Result<Envelope, DecodeError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|err| DecodeError::InvalidJson {
            detail: strip_serde_position(&err.to_string()),
            column: err.column(),
        })?;
    let object = value.as_object().ok_or(DecodeError::NotAnObject)?;

    let id = match object.get("id") {
        None | Some(serde_json::Value::Null) => None,
        Some(raw) => Some(
            serde_json::from_value::<RequestId>(raw.clone()).map_err(|_| {
                DecodeError::InvalidMessage {
                    type_name: object
                        .get("type")
                        .and_then(|t| t.as_str())
                        .unwrap_or("?")
                        .to_string(),
                    id: None,
                    field: Some("id".into()),
                    detail: "`id` must be an integer or a string".into(),
                }
            })?,
        ),
    };
    let type_name = match object.get("type") {
        Some(serde_json::Value::String(name)) => name.clone(),
        Some(_) => {
            return Err(DecodeError::InvalidMessage {
                type_name: "?".into(),
                id,
                field: Some("type".into()),
                detail: "`type` must be a string".into(),
            })
        }
        None => {
            return Err(DecodeError::InvalidMessage {
                type_name: "?".into(),
                id,
                field: Some("type".into()),
                detail: "missing field `type`".into(),
            })
        }
    };
    if !KNOWN_MESSAGE_TYPES.contains(&type_name.as_str()) {
        return Err(DecodeError::UnknownType { type_name, id });
    }
    match object.get("v") {
        Some(v) if v.as_u64().is_some_and(|n| n >= 1 && n <= u32::MAX as u64) => {}
        Some(_) => {
            return Err(DecodeError::InvalidMessage {
                type_name,
                id,
                field: Some("v".into()),
                detail: "`v` must be a positive integer protocol version".into(),
            })
        }
        None => {
            return Err(DecodeError::InvalidMessage {
                type_name,
                id,
                field: Some("v".into()),
                detail: "missing field `v` (the protocol version)".into(),
            })
        }
    }

    let version = object["v"].as_u64().unwrap_or_default() as u32;
    let mut body = value;
    if let Some(fields) = body.as_object_mut() {
        fields.remove("v");
        fields.remove("id");
        fields.remove("type");
    }
    let message =
        decode_body(&type_name, body).map_err(|(path, detail)| DecodeError::InvalidMessage {
            type_name: type_name.clone(),
            id: id.clone(),
            field: path,
            detail,
        })?;
    Ok(Envelope {
        v: version,
        id,
        message,
    })
}

/// Deserializes a message body by its type name, so that a bad field is reported with its
/// path (`protocol.min`), which serde cannot do through an internally tagged enum.
fn decode_body(
    type_name: &str,
    body: serde_json::Value,
) -> Result<Message, (Option<String>, String)> {
    fn typed<T: serde::de::DeserializeOwned>(
        body: serde_json::Value,
    ) -> Result<T, (Option<String>, String)> {
        serde_path_to_error::deserialize::<_, T>(body).map_err(|err| {
            let path = err.path().to_string();
            ((path != ".").then_some(path), err.into_inner().to_string())
        })
    }
    Ok(match type_name {
        "hello" => Message::Hello(typed(body)?),
        "welcome" => Message::Welcome(typed(body)?),
        "error" => Message::Error(typed(body)?),
        "ping" => Message::Ping {},
        "pong" => Message::Pong {},
        "bye" => Message::Bye(typed(body)?),
        "drive" => Message::Drive(typed(body)?),
        "cancel" => Message::Cancel(typed(body)?),
        "ack" => Message::Ack(typed(body)?),
        "event" => Message::Event(typed(body)?),
        "terminals" => Message::Terminals(typed(body)?),
        "capabilities" => Message::Capabilities(typed(body)?),
        "clipboard" => Message::Clipboard(typed(body)?),
        "clipboard.result" => Message::ClipboardResult(typed(body)?),
        "terminal.io" => Message::TerminalIo(typed(body)?),
        "terminal.io.result" => Message::TerminalIoResult(typed(body)?),
        "status" => Message::Status {},
        "status.result" => Message::StatusResult(typed(body)?),
        "sessions.list" => Message::SessionsList(typed(body)?),
        "sessions.list.result" => Message::SessionsListResult(typed(body)?),
        "drives.list" => Message::DrivesList(typed(body)?),
        "drives.list.result" => Message::DrivesListResult(typed(body)?),
        "chats.list" => Message::ChatsList(typed(body)?),
        "chats.list.result" => Message::ChatsListResult(typed(body)?),
        "observe.report" => Message::ObserveReport(typed(body)?),
        "observe.reported" => Message::ObserveReported(typed(body)?),
        "recovery.run" => Message::RecoveryRun(typed(body)?),
        "recovery.result" => Message::RecoveryResult(typed(body)?),
        "journal.verify" => Message::JournalVerify(typed(body)?),
        "journal.verify.result" => Message::JournalVerifyResult(typed(body)?),
        "chat.read" => Message::ChatRead(typed(body)?),
        "chat.read.result" => Message::ChatReadResult(typed(body)?),
        "chat.audit" => Message::ChatAudit(typed(body)?),
        "chat.audit.result" => Message::ChatAuditResult(typed(body)?),
        "drive.create" => Message::DriveCreate(typed(body)?),
        "drive.get" => Message::DriveGet(typed(body)?),
        "drive.cancel" => Message::DriveCancel(typed(body)?),
        "drive.result" => Message::DriveResult(typed(body)?),
        "events.subscribe" => Message::EventsSubscribe {},
        "events.subscribed" => Message::EventsSubscribed {},
        "stream" => Message::Stream(typed(body)?),
        other => return Err((None, format!("no decoder for message type {other:?}"))),
    })
}

/// Encodes an envelope as one line, newline included.
pub fn encode_line(envelope: &Envelope) -> Vec<u8> {
    let mut line = serde_json::to_vec(envelope).expect("protocol types always serialize");
    line.push(b'\n');
    line
}

fn strip_serde_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(cut) => message[..cut].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{expect, Expect};

    fn check(line: &str, expected: Expect) {
        let outcome = match decode_line(line.as_bytes()) {
            Ok(envelope) => format!("ok {}", serde_json::to_string(&envelope).unwrap()),
            Err(err) => format!(
                "err {}",
                serde_json::to_string(&err.to_error_message(7)).unwrap()
            ),
        };
        expected.assert_eq(&outcome);
    }

    #[test]
    fn decodes_well_formed_lines() {
        check(
            r#"{"v":1,"type":"ping"}"#,
            expect![[r#"ok {"v":1,"type":"ping"}"#]],
        );
        check(
            r#"{"v":1,"id":"a","type":"drive.get","drive_id":"d_1"}"#,
            expect![[r#"ok {"v":1,"id":"a","type":"drive.get","drive_id":"d_1"}"#]],
        );
        check(
            r#"{"v":1,"id":3,"type":"drive.create","target":"focused","prompt":"hi"}"#,
            expect![[
                r#"ok {"v":1,"id":3,"type":"drive.create","target":"focused","prompt":"hi","options":{"submit":true,"new_chat":false,"busy":"queue"}}"#
            ]],
        );
    }

    #[test]
    fn reports_each_kind_of_bad_line_with_its_location() {
        check(
            "this is not json",
            expect![[
                r#"err {"code":"malformed","message":"the line is not valid JSON: expected ident (column 2)","location":{"line":7,"column":2}}"#
            ]],
        );
        check(
            "[1,2]",
            expect![[
                r#"err {"code":"malformed","message":"the line is JSON but not an object; every line must be one JSON object","location":{"line":7}}"#
            ]],
        );
        check(
            r#"{"v":1,"id":9,"type":"teleport"}"#,
            expect![[
                r#"err {"code":"unknown_type","message":"unknown message type \"teleport\"; this daemon speaks protocol v1 (see docs/protocol.md)","ref":9,"location":{"line":7}}"#
            ]],
        );
        check(
            r#"{"v":1,"id":9,"type":"drive.create","target":"focused"}"#,
            expect![[
                r#"err {"code":"invalid_message","message":"invalid \"drive.create\" message: missing field `prompt`","ref":9,"location":{"line":7}}"#
            ]],
        );
        check(
            r#"{"v":1,"type":"hello","role":"plugin","protocol":{"min":"one","max":1},"client":{"name":"x","version":"1"}}"#,
            expect![[
                r#"err {"code":"invalid_hello","message":"invalid \"hello\" message: invalid type: string \"one\", expected u32","location":{"line":7,"field":"protocol.min"}}"#
            ]],
        );
        check(
            r#"{"type":"ping"}"#,
            expect![[
                r#"err {"code":"invalid_message","message":"invalid \"ping\" message: missing field `v` (the protocol version)","location":{"line":7,"field":"v"}}"#
            ]],
        );
        check(
            r#"{"v":1,"id":{"x":1},"type":"ping"}"#,
            expect![[
                r#"err {"code":"invalid_message","message":"invalid \"ping\" message: `id` must be an integer or a string","location":{"line":7,"field":"id"}}"#
            ]],
        );
    }

    #[test]
    fn invalid_utf8_is_malformed_with_the_byte_offset() {
        let err = decode_line(b"{\"v\":1,\"type\":\"\xff\xfe\"}").unwrap_err();
        assert_eq!(err, DecodeError::InvalidUtf8 { valid_up_to: 15 });
        assert_eq!(err.code(), ErrorCode::Malformed);
        assert_eq!(err.to_error_message(1).location.unwrap().column, Some(16));
    }

    #[test]
    fn the_fast_and_the_precise_paths_agree_on_good_lines() {
        for line in [
            r#"{"v":1,"type":"ping"}"#,
            r#"{"v":1,"id":null,"type":"pong","extra":true}"#,
            r#"{"v":2,"id":"x","type":"drive.get","drive_id":"d_1"}"#,
            r#"{"v":1,"type":"event","event":{"kind":"from_the_future"}}"#,
            r#"{"v":1,"type":"hello","role":"controller","protocol":{"min":1,"max":1},"client":{"name":"a","version":"1"},"capabilities":[{"kind":"new","x":1}]}"#,
        ] {
            let fast = decode_line(line.as_bytes()).unwrap();
            let precise = decode_precisely(line).unwrap();
            assert_eq!(fast, precise, "{line}");
        }
        // v = 0 is not a protocol version: the precise path says so.
        assert!(matches!(
            decode_line(br#"{"v":0,"type":"ping"}"#),
            Err(DecodeError::InvalidMessage { .. })
        ));
    }

    #[test]
    fn every_known_type_name_matches_its_variant() {
        // A type listed in KNOWN_MESSAGE_TYPES must decode to the variant of that name.
        for name in KNOWN_MESSAGE_TYPES {
            let line = format!(r#"{{"v":1,"type":"{name}"}}"#);
            match decode_line(line.as_bytes()) {
                Ok(envelope) => assert_eq!(envelope.message.type_name(), *name),
                Err(DecodeError::InvalidMessage {
                    type_name, detail, ..
                }) => {
                    assert_eq!(type_name, *name);
                    assert!(!detail.contains("no decoder"), "{name}: {detail}");
                }
                Err(other) => panic!("{name}: unexpected {other:?}"),
            }
        }
    }
}

//! Koru wire protocol v1: the serde types of every NDJSON message exchanged over the daemon socket, and the pure decode/encode rules (no I/O).
//!
//! One JSON object per line. Every line is an [`Envelope`]: the protocol version `v`, the
//! message `type`, an optional request `id`, and the message's own fields. The daemon and
//! every client (the Rust CLI, the TypeScript extension, the Java plugin) agree on these
//! types; `docs/protocol.md` is their prose and `docs/protocol.schema.json` their schema.

mod audit;
mod capability;
mod conversation;
mod drive;
mod envelope;
mod error;
mod handshake;
mod journal;
mod observe;
mod product;
mod recovery;
mod session;

pub use audit::{AuditFinding, AuditFindingKind, ChatAudit, ChatAuditResult, LedgerInfo};
pub use capability::Capability;
pub use conversation::{
    ChatRead, ChatReadResult, ChatTurn, StepKind, StepOutcome, TurnState, TurnStep, TurnUsage,
    MAX_CHAT_READ_CHARS, MAX_CHAT_READ_TURNS,
};
pub use drive::{
    blocker, Ack, AckStage, AgentTarget, AttemptOutcome, Blocker, BusyPolicy, DriveCancelNotice,
    DriveInfo, DriveOptions, DriveRequest, DriveState, DriveStep, Refusal, Route, RouteAttempt,
    StageRecord, SubmitEvidence, Target, TextDelivery, Verification, WindowTarget,
};
pub use envelope::{
    decode_line, encode_line, Bye, DecodeError, DriveResult, Envelope, Message, RequestId,
    StreamItem, KNOWN_MESSAGE_TYPES, RECONNECT_REQUESTED,
};
pub use error::{ErrorCode, ErrorMessage, Location};
pub use handshake::{
    negotiate, AccessScope, ChatReadiness, ClientInfo, DaemonInfo, Hello, IdeInfo,
    NegotiationError, Role, VersionRange, Welcome, WindowInfo, WindowStorage,
};
pub use journal::{
    BlobCounts, JournalStatus, JournalVerify, JournalVerifyResult, VerifyProblem,
    VerifyProblemKind, VerifyReport, VerifyVerdict,
};
pub use observe::{
    AgentProcess, ChatInfo, ChatRecordRef, ChatsList, ChatsListResult, DriveEvidence,
    DriveObservation, NeedsInputKind, ObservationBasis, ObserveReport, ObserveReported,
    ObservedChatState, ObservedEvent, ObservedKind, ObservedStage, ObserverMode, ObserverStatus,
    OutcomeEvidence, PollCost, StoreProblem, StoreProblemKind, StoreRecord, TextDigest,
    PLUGIN_OBSERVATION_STORE,
};
pub use product::IdeProduct;
pub use recovery::{RecoveryAction, RecoveryResult, RecoveryRun, RECOVERY_ACTIONS};
pub use session::{
    AgentChat, AgentState, CapabilitiesReport, ChatOutcome, ChatState, ClipboardAction,
    ClipboardOrder, ClipboardResult, DriveCreate, DriveRef, DrivesList, DrivesListResult,
    HttpStatus, IdeTerminal, PluginEvent, PluginEventKind, PortalConsent, PortalStatus,
    RefusedHandshake, RegistryStatus, SessionHealth, SessionInfo, SessionsList, SessionsListResult,
    StatusInfo, StreamEvent, TerminalAction, TerminalAgentInfo, TerminalIo, TerminalIoResult,
    TerminalPlace, TerminalsReport,
};

/// The protocol version this build speaks natively (the highest it supports).
///
/// Bump rule (see docs/protocol.md): adding an optional field or a new message type does
/// not bump the version; removing or changing the meaning or shape of an existing field or
/// message does, and such a change gets a new message name (`drive_v2`) rather than a new
/// shape under the old name.
pub const PROTOCOL_VERSION: u32 = 1;

/// The oldest protocol version this build still accepts.
pub const MIN_PROTOCOL_VERSION: u32 = 1;

/// Default maximum length of one line in bytes, newline excluded (1 MiB).
pub const DEFAULT_MAX_LINE_BYTES: usize = 1024 * 1024;

/// The JSON Schema of one protocol line, generated from these types.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Envelope);
    serde_json::to_value(&schema).expect("a generated schema always serializes")
}

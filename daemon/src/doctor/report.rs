//! The doctor report: a stable, documented shape (docs/doctor.md, docs/doctor.schema.json) shared by the table, `--json` and later the dashboard.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The version of this report's shape; bumped on any incompatible change.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// How an interface stands on this machine right now.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Works now.
    Ok,
    /// Works partly, or for some sessions only.
    Degraded,
    /// Does not work now; `blocker` says why and `recovery` what to do.
    Unavailable,
    /// Does not concern this machine or session (other platform, product not connected, store absent, disabled).
    NotApplicable,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Degraded => "degraded",
            Status::Unavailable => "unavailable",
            Status::NotApplicable => "not applicable",
        }
    }
}

/// A classified reason with the facts behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlockerReport {
    /// One of the registry's blocker codes (`no_display`, `injector_missing`, …).
    pub code: String,
    pub detail: String,
}

/// An operator action from the registry's `operator_recovery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecoveryHint {
    pub id: String,
    pub label: String,
    pub does: String,
    pub safe_to_repeat: bool,
    /// The recovery action Koru runs for it (`koru recover ACTION`, a dashboard button);
    /// absent: instructions for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// One interface's check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InterfaceCheck {
    pub id: String,
    pub family: String,
    pub description: String,
    pub status: Status,
    pub authority: String,
    pub verification: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<BlockerReport>,
    /// What to do about the blocker (empty when ok).
    #[serde(default)]
    pub recovery: Vec<RecoveryHint>,
    /// What the probes found: versions, paths, counts.
    #[serde(default)]
    pub facts: Vec<String>,
}

/// One candidate route for one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RouteCheck {
    /// 1 is tried first.
    pub rank: usize,
    pub route: String,
    pub interface: String,
    pub usable: bool,
    /// `strict_ack`, `observed`, `best_effort`, `none`: how far its result can be trusted.
    pub verification: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<BlockerReport>,
    #[serde(default)]
    pub recovery: Vec<RecoveryHint>,
    /// What else a user should know about the route here (which drives it serves, how it
    /// submits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The drive paths of one connected IDE session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionPaths {
    pub session_id: String,
    pub product: String,
    pub ide_version: String,
    pub plugin: String,
    pub protocol: u32,
    pub workspace_folders: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_pid: Option<u32>,
    /// The project registry layer applied for this session, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_layer: Option<String>,
    /// Whether the window's chat can take a request now, as its plugin says (absent: the
    /// plugin does not say); drives wait while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatCheck>,
    pub routes: Vec<RouteCheck>,
}

/// A session's chat readiness, with what to do when it is not ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatCheck {
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recovery: Vec<RecoveryHint>,
}

/// Whether the daemon answered, and what it said about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DaemonReport {
    pub socket: String,
    pub running: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it could not be reached, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Problems the daemon found in its registry layers.
    #[serde(default)]
    pub registry_diagnostics: Vec<String>,
    /// Plugins whose hello the daemon refused recently.
    #[serde(default)]
    pub refused_handshakes: Vec<String>,
}

/// The machine as the probes saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnvironmentReport {
    pub platform: String,
    /// `x11`, `wayland` or `none`.
    pub display_server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wayland_display: Option<String>,
    /// `reachable`, `unreachable: …`, or `not configured`.
    pub dbus_session: String,
}

/// The registry doctor read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RegistryReport {
    pub layers: Vec<String>,
    pub interfaces: usize,
    /// `file:line:col: message` for every problem in the layer files.
    pub diagnostics: Vec<String>,
}

/// Counts and the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub ok: usize,
    pub degraded: usize,
    pub unavailable: usize,
    pub not_applicable: usize,
    /// Sessions with at least one usable route.
    pub sessions_with_a_drive_path: usize,
    /// 0 all usable; 1 degraded, at least one drive path works; 2 no drive path or daemon down.
    pub exit_code: u8,
    pub verdict: String,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DoctorReport {
    pub schema_version: u32,
    pub koru_version: String,
    pub generated_at_ms: u64,
    pub daemon: DaemonReport,
    pub environment: EnvironmentReport,
    pub registry: RegistryReport,
    pub interfaces: Vec<InterfaceCheck>,
    pub sessions: Vec<SessionPaths>,
    /// What `koru setup` has wired on this machine, per IDE, agent and MCP client (`koru
    /// doctor` on the command line only, without `--only`; absent elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wired: Vec<WiredCheck>,
    pub summary: Summary,
}

/// Where one tool stands with Koru (the setup part it belongs to: login, ide, hooks, mcp).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WiredCheck {
    pub part: String,
    pub tool: String,
    pub state: WiredState,
    /// Where it is wired, what is stale or missing, or why it cannot be.
    pub detail: String,
    /// The command that wires it (or brings it up to date).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Whether a tool is wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WiredState {
    /// Koru is there, as this binary would put it.
    Wired,
    /// The tool is here, Koru is not.
    NotWired,
    /// Koru is there but out of date: another binary, an older extension or plugin.
    Stale,
    /// It cannot be wired here (no systemd user instance, no extension to install).
    NotPossible,
    /// Its config could not be read (a file that does not parse).
    Cannot,
}

impl WiredState {
    pub fn as_str(self) -> &'static str {
        match self {
            WiredState::Wired => "wired",
            WiredState::NotWired => "NOT WIRED",
            WiredState::Stale => "STALE",
            WiredState::NotPossible => "not possible",
            WiredState::Cannot => "CANNOT",
        }
    }
}

/// The JSON Schema of the report.
pub fn report_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(DoctorReport)).unwrap_or_default()
}

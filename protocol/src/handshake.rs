//! The handshake: a client's `hello`, the daemon's `welcome`, and the version negotiation between them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Capability, IdeProduct};

/// Who is on the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// One IDE window's plugin: it receives drives and acks them.
    Plugin,
    /// A program that asks the daemon for things: the CLI, the MCP bridge, the dashboard, scripts.
    Controller,
}

/// An inclusive range of protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VersionRange {
    pub min: u32,
    pub max: u32,
}

/// The name and version of the program that connects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
}

/// The IDE a plugin runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IdeInfo {
    pub product: IdeProduct,
    /// The IDE's own version string.
    pub version: String,
    /// The IDE's display name as it reports it (`vscode.env.appName`, `ApplicationInfo`).
    #[serde(default)]
    pub app_name: String,
    /// The IDE's URI scheme as it reports it (`vscode.env.uriScheme`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_scheme: Option<String>,
    /// Where the IDE runs as it reports it (`vscode.env.appHost`: `desktop`, `web`, `server-distro`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_host: Option<String>,
}

/// The IDE window a plugin lives in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WindowInfo {
    /// A process id that belongs to the window (the extension host or the IDE itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The parent of `pid`, when the plugin knows it (helps find the window for OS injection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_pid: Option<u32>,
    /// A window identifier meaningful to the plugin (X11 id, IDE frame id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
    /// Absolute paths of the folders open in this window.
    #[serde(default)]
    pub workspace_folders: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Whether the window has focus right now, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focused: Option<bool>,
    /// Every folder of the window as a URI (`file:///home/me/repo`,
    /// `vscode-remote://ssh-remote+box/home/me/repo`). For a remote window the folders live
    /// on another machine: they are here and not in `workspace_folders`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspace_uris: Vec<String>,
    /// The remote the window is connected to (VS Code `env.remoteName`: `ssh-remote`,
    /// `wsl`, `dev-container`, `codespaces`, …); absent for a local window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_name: Option<String>,
    /// Where the IDE keeps this window's storage, so that the daemon can observe exactly
    /// the chat stores the window writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<WindowStorage>,
}

/// Where an IDE window keeps its extensions' data (absolute local paths).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WindowStorage {
    /// This window's workspace storage folder (VS Code: `…/User/workspaceStorage/<id>`,
    /// the parent of `ExtensionContext.storageUri`); the chat writes its sessions to
    /// `chatSessions/` inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_storage: Option<String>,
    /// The IDE's global storage folder (VS Code: `…/User/globalStorage`, the parent of
    /// `ExtensionContext.globalStorageUri`), where Cline-family extensions keep their tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_storage: Option<String>,
}

/// Whether a plugin's chat can take a request now (a usable language model, a default
/// agent), as the plugin knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatReadiness {
    pub ready: bool,
    /// Why not, for a person (and what to do), when `ready` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `hello`: the first line every client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hello {
    pub role: Role,
    /// The protocol versions the client can speak.
    pub protocol: VersionRange,
    pub client: ClientInfo,
    /// Required for plugins, absent for controllers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ide: Option<IdeInfo>,
    /// Required for plugins, absent for controllers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowInfo>,
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Plugins: whether the window's chat can take a request now. Absent: unknown (the
    /// daemon sends drives as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatReadiness>,
    /// Controllers: what this connection may do. `observe` limits it to reading; the
    /// daemon refuses its acting requests (`drive.create`, `drive.cancel`,
    /// `recovery.run`, `observe.report`) with `forbidden_role`. Absent: `drive` (everything
    /// the daemon's user may do). A client can only narrow its own rights with it:
    /// `koru mcp --role observe`, or `koru dial-stdio --role observe` as an SSH forced command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<AccessScope>,
}

/// What a controller's connection may do (`hello.scope`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AccessScope {
    /// Sessions, drives, chats, events, status, journal verification.
    Observe,
    /// Also sending, cancelling, recovering.
    Drive,
}

impl AccessScope {
    pub fn as_str(self) -> &'static str {
        match self {
            AccessScope::Observe => "observe",
            AccessScope::Drive => "drive",
        }
    }
}

/// Facts about the daemon a client talks to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DaemonInfo {
    pub version: String,
}

/// `welcome`: the daemon's answer to an acceptable `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Welcome {
    /// The protocol version both sides will speak: the highest both support.
    pub protocol: u32,
    /// This connection's session id (plugins are listed under it).
    pub session_id: String,
    pub daemon: DaemonInfo,
    /// The daemon pings plugins at this interval; a plugin that stays silent for two
    /// intervals is marked stale, for four it is dropped.
    pub heartbeat_ms: u64,
    /// The longest line the daemon accepts, newline excluded.
    pub max_line_bytes: usize,
    /// The scope the daemon holds this connection to, when the hello declared one: a
    /// client that narrowed itself checks it is echoed (a daemon that predates scopes
    /// would not enforce it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<AccessScope>,
}

/// Why a `hello`'s version range cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NegotiationError {
    #[error("the client's protocol range {theirs_min}..{theirs_max} is empty")]
    EmptyRange { theirs_min: u32, theirs_max: u32 },
    #[error(
        "no common protocol version: client speaks {theirs_min}..{theirs_max}, daemon speaks {ours_min}..{ours_max}"
    )]
    NoCommonVersion {
        theirs_min: u32,
        theirs_max: u32,
        ours_min: u32,
        ours_max: u32,
    },
}

/// Picks the highest version inside both ranges.
pub fn negotiate(ours: VersionRange, theirs: VersionRange) -> Result<u32, NegotiationError> {
    if theirs.min > theirs.max {
        return Err(NegotiationError::EmptyRange {
            theirs_min: theirs.min,
            theirs_max: theirs.max,
        });
    }
    let highest = ours.max.min(theirs.max);
    if highest < ours.min.max(theirs.min) {
        return Err(NegotiationError::NoCommonVersion {
            theirs_min: theirs.min,
            theirs_max: theirs.max,
            ours_min: ours.min,
            ours_max: ours.max,
        });
    }
    Ok(highest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(min: u32, max: u32) -> VersionRange {
        VersionRange { min, max }
    }

    #[test]
    fn negotiation_picks_the_highest_common_version() {
        assert_eq!(negotiate(range(1, 1), range(1, 1)), Ok(1));
        assert_eq!(negotiate(range(1, 3), range(2, 9)), Ok(3));
        assert_eq!(negotiate(range(2, 5), range(1, 3)), Ok(3));
    }

    #[test]
    fn negotiation_refuses_disjoint_and_empty_ranges() {
        assert!(matches!(
            negotiate(range(1, 1), range(2, 3)),
            Err(NegotiationError::NoCommonVersion { .. })
        ));
        assert!(matches!(
            negotiate(range(2, 3), range(1, 1)),
            Err(NegotiationError::NoCommonVersion { .. })
        ));
        assert!(matches!(
            negotiate(range(1, 1), range(3, 2)),
            Err(NegotiationError::EmptyRange { .. })
        ));
    }
}

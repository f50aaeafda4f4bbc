//! Who may do what from outside the user's shell: the two roles (observe, drive), which MCP tools each may call, and the scoped bearer tokens that carry a role (`tokens.rs`).
//!
//! A leaf room: the HTTP face asks it which role a request needs and which role a token
//! holds, the MCP face which tools a role may call, the CLI face edits the token file.

pub mod tokens;

use serde::{Deserialize, Serialize};

/// What a caller may do.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Read only: sessions, drives, chats, events, doctor, journal verify, status, health.
    Observe,
    /// Everything observe may, and acting: send and create drives, cancel, retry, recover,
    /// reload the registry, mint dashboard login codes.
    Drive,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Observe => "observe",
            Role::Drive => "drive",
        }
    }

    /// True when a caller holding `self` may do what needs `needed`.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a request was granted, put beside it by the face that authenticated it (the HTTP
/// guard) for the rooms that serve it (MCP over HTTP filters its tools by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub role: Role,
    /// `default`, a scoped token's id (`tok_…`), `dashboard`, or `stdio`.
    pub token_id: String,
    pub token_name: Option<String>,
}

/// A request refused with `forbidden_role`, for the journal (`access_refused`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Where it came in: `http_api` or `mcp_http`.
    pub door: &'static str,
    pub token_id: String,
    pub token_name: Option<String>,
    pub held: Role,
    pub needed: Role,
    /// What was asked: `POST /api/v1/drives`, `the MCP tool send_prompt`.
    pub asked: String,
}

/// Where the faces hand refusals to the daemon core: bounded, and never waited on (a
/// flood of refusals is dropped past the bound and logged, rather than slowing the door).
#[derive(Debug, Clone)]
pub struct RefusalSink(tokio::sync::mpsc::Sender<Refusal>);

impl RefusalSink {
    /// How many refusals may wait for the core.
    pub const CAPACITY: usize = 256;

    /// A sink and the inbox the core reads it from.
    pub fn channel() -> (RefusalSink, RefusalInbox) {
        let (sender, receiver) = tokio::sync::mpsc::channel(Self::CAPACITY);
        (
            RefusalSink(sender),
            RefusalInbox(std::sync::Arc::new(std::sync::Mutex::new(Some(receiver)))),
        )
    }

    pub fn report(&self, refusal: Refusal) {
        if self.0.try_send(refusal).is_err() {
            tracing::warn!(
                "an access refusal was not journaled: too many at once, or the daemon is stopping"
            );
        }
    }
}

/// The receiving end of a [`RefusalSink`], carried in the daemon's configuration until the
/// main loop takes it (once).
#[derive(Debug, Clone)]
pub struct RefusalInbox(
    std::sync::Arc<std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<Refusal>>>>,
);

impl RefusalInbox {
    pub fn take(&self) -> Option<tokio::sync::mpsc::Receiver<Refusal>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// The MCP tools that only read. Every other tool acts and needs [`Role::Drive`]: a tool
/// added later is refused to observers until it is named here.
pub const MCP_READ_TOOLS: &[&str] = &[
    "list_sessions",
    "get_drive",
    "wait_for_reply",
    "read_chat",
    "doctor",
    "verify_journal",
    "list_interfaces",
];

/// The role calling the MCP tool `name` needs.
pub fn mcp_tool_role(name: &str) -> Role {
    if MCP_READ_TOOLS.contains(&name) {
        Role::Observe
    } else {
        Role::Drive
    }
}

/// The sentence of a `forbidden_role` refusal: what was asked, the role it needs, the role
/// held.
pub fn forbidden_message(what: &str, needed: Role, held: Role) -> String {
    format!("{what} needs the {needed} role; this caller holds the {held} role")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drive_includes_observe_and_unknown_tools_need_drive() {
        assert!(Role::Drive.allows(Role::Observe));
        assert!(Role::Drive.allows(Role::Drive));
        assert!(Role::Observe.allows(Role::Observe));
        assert!(!Role::Observe.allows(Role::Drive));
        assert_eq!(mcp_tool_role("list_sessions"), Role::Observe);
        assert_eq!(mcp_tool_role("send_prompt"), Role::Drive);
        assert_eq!(mcp_tool_role("recover"), Role::Drive);
        assert_eq!(mcp_tool_role("cancel_drive"), Role::Drive);
        assert_eq!(mcp_tool_role("a_tool_added_later"), Role::Drive);
        assert_eq!(
            forbidden_message("POST /api/v1/drives", Role::Drive, Role::Observe),
            "POST /api/v1/drives needs the drive role; this caller holds the observe role"
        );
    }
}

//! Connected peers as the daemon keeps them, and how a drive's target resolves to exactly one plugin session.

use std::collections::VecDeque;

use crate::workspace_ref::WorkspaceRef;
use koru_protocol::{
    Capability, ChatState, ClientInfo, ErrorCode, ErrorMessage, Hello, IdeInfo, IdeProduct, Role,
    SessionHealth, SessionInfo, Target, WindowInfo,
};

/// One greeted connection: a plugin (an IDE window) or a controller.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub session_id: String,
    pub role: Role,
    pub client: ClientInfo,
    /// What a controller's connection may do (`hello.scope`; absent: drive).
    pub scope: koru_protocol::AccessScope,
    pub ide: Option<IdeInfo>,
    pub window: WindowInfo,
    pub capabilities: Vec<Capability>,
    pub protocol: u32,
    pub peer_pid: Option<u32>,
    pub connected_at_ms: u64,
    pub last_seen_ms: u64,
    pub last_ping_ms: u64,
    /// When the window last reported gaining focus (for `focused` targets).
    pub focused_at_ms: u64,
    pub health: SessionHealth,
    pub chat: ChatState,
    pub active_drive: Option<String>,
    pub queued_drives: VecDeque<String>,
    /// The bytes of the prompts in `queued_drives`.
    pub queued_prompt_bytes: usize,
    /// Whether the window's chat can take a request now, as the plugin last said.
    pub chat_readiness: Option<koru_protocol::ChatReadiness>,
    /// Since when the chat has been answering a drive the plugin acked with evidence
    /// `chat_running` (busy until the plugin reports the outcome, at most
    /// `CHAT_RUNNING_BUSY_MS`).
    pub chat_running_since_ms: Option<u64>,
    /// What the plugin says about its window's focus, for OS injections that verify focus
    /// through it (made on first use; each focus event updates it).
    pub focus_watch: Option<tokio::sync::watch::Sender<Option<bool>>>,
    /// The window's integrated terminals, as the plugin last reported them (`terminals`).
    pub terminals: Vec<koru_protocol::IdeTerminal>,
}

impl SessionRecord {
    pub fn from_hello(
        session_id: String,
        hello: Hello,
        protocol: u32,
        peer_pid: Option<u32>,
        now_ms: u64,
    ) -> Self {
        let window = hello.window.unwrap_or_default();
        SessionRecord {
            session_id,
            role: hello.role,
            client: hello.client,
            scope: hello.scope.unwrap_or(koru_protocol::AccessScope::Drive),
            ide: hello.ide,
            focused_at_ms: if window.focused == Some(true) {
                now_ms
            } else {
                0
            },
            window,
            chat_readiness: hello.chat,
            chat_running_since_ms: None,
            capabilities: hello.capabilities,
            protocol,
            peer_pid,
            connected_at_ms: now_ms,
            last_seen_ms: now_ms,
            last_ping_ms: now_ms,
            health: SessionHealth::Active,
            chat: ChatState::Unknown,
            active_drive: None,
            queued_drives: VecDeque::new(),
            queued_prompt_bytes: 0,
            focus_watch: None,
            terminals: Vec::new(),
        }
    }

    /// A live view of what the plugin says about its window's focus.
    pub fn plugin_focus(&mut self) -> crate::drive::portal::PluginFocus {
        let focused = self.window.focused;
        let product = self
            .product()
            .map(|p| p.to_string())
            .unwrap_or_else(|| "IDE".into());
        let watch = self
            .focus_watch
            .get_or_insert_with(|| tokio::sync::watch::channel(focused).0);
        crate::drive::portal::PluginFocus::new(
            self.session_id.clone(),
            product,
            self.window.pid,
            watch.subscribe(),
        )
    }

    pub fn product(&self) -> Option<&IdeProduct> {
        self.ide.as_ref().map(|ide| &ide.product)
    }

    /// The wire view of this session.
    pub fn info(&self) -> SessionInfo {
        SessionInfo {
            session_id: self.session_id.clone(),
            role: self.role,
            client: self.client.clone(),
            ide: self.ide.clone(),
            window: self.window.clone(),
            capabilities: self.capabilities.clone(),
            protocol: self.protocol,
            peer_pid: self.peer_pid,
            connected_at_ms: self.connected_at_ms,
            last_seen_ms: self.last_seen_ms,
            health: self.health,
            chat: self.chat,
            active_drive: self.active_drive.clone(),
            queued_drives: self.queued_drives.len(),
            chat_readiness: self.chat_readiness.clone(),
            terminals: self.terminals.clone(),
        }
    }

    /// A short description for error messages: `s_1a2b (vscode, /home/me/project)`.
    pub fn describe(&self) -> String {
        let product = self
            .product()
            .map(|p| p.to_string())
            .unwrap_or_else(|| "?".into());
        let folders: Vec<String> = if self.window.workspace_uris.is_empty() {
            self.window.workspace_folders.clone()
        } else {
            self.folders()
                .filter(|f| matches!(f, WorkspaceRef::Remote { .. }))
                .map(|f| f.to_string())
                .chain(self.window.workspace_folders.iter().cloned())
                .collect()
        };
        let folders = if folders.is_empty() {
            "no folder".to_string()
        } else {
            folders.join(", ")
        };
        format!("{} ({product}, {folders})", self.session_id)
    }

    /// Every folder of the window: the local paths, and the folder URIs (which name a
    /// remote window's folders with their machine).
    fn folders(&self) -> impl Iterator<Item = WorkspaceRef> + '_ {
        let local = self
            .window
            .workspace_folders
            .iter()
            .filter_map(|path| WorkspaceRef::parse(path).ok());
        let uris = self
            .window
            .workspace_uris
            .iter()
            .filter_map(|uri| WorkspaceRef::parse(uri).ok());
        local.chain(uris)
    }

    /// How specifically this session's folders contain `wanted`: the length of the longest
    /// folder equal to or containing it (on the same machine), or `None`.
    pub(super) fn workspace_match(&self, wanted: &WorkspaceRef) -> Option<usize> {
        self.folders()
            .filter_map(|folder| wanted.matched_by(&folder))
            .max()
    }
}

/// Picks the one plugin session a target means, or says precisely why none or several do.
pub fn resolve_target<'a>(
    target: &Target,
    plugins: impl Iterator<Item = &'a SessionRecord>,
) -> Result<String, ErrorMessage> {
    let plugins: Vec<&SessionRecord> = plugins.filter(|s| s.role == Role::Plugin).collect();
    let listing = || {
        if plugins.is_empty() {
            "no plugin is connected".to_string()
        } else {
            format!(
                "connected: {}",
                plugins
                    .iter()
                    .map(|s| s.describe())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    };
    let no_target =
        |what: String| ErrorMessage::new(ErrorCode::NoTarget, format!("{what}; {}", listing()));
    let ambiguous = |what: String, candidates: &[&SessionRecord]| {
        ErrorMessage::new(
            ErrorCode::AmbiguousTarget,
            format!(
                "{what}: {}; name one with a session id",
                candidates
                    .iter()
                    .map(|s| s.describe())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    };

    match target {
        Target::Window(_) => Err(ErrorMessage::new(
            ErrorCode::NoTarget,
            "a window target is driven by OS injection, not through a plugin session",
        )),
        Target::Agent(_) | Target::Chat(_) => Err(ErrorMessage::new(
            ErrorCode::NoTarget,
            format!("{target} is a terminal agent, not a plugin session"),
        )),
        Target::Session(id) => plugins
            .iter()
            .find(|s| &s.session_id == id)
            .map(|s| s.session_id.clone())
            .ok_or_else(|| no_target(format!("no plugin session {id}"))),
        Target::Workspace(path) => {
            let wanted = WorkspaceRef::parse(path).map_err(|error| {
                ErrorMessage::new(ErrorCode::InvalidMessage, error.to_string()).with_location(
                    koru_protocol::Location {
                        field: Some("target.workspace".into()),
                        ..koru_protocol::Location::default()
                    },
                )
            })?;
            let scored: Vec<(&SessionRecord, usize)> = plugins
                .iter()
                .filter_map(|s| s.workspace_match(&wanted).map(|score| (*s, score)))
                .collect();
            let Some(best) = scored.iter().map(|(_, score)| *score).max() else {
                return Err(no_target(format!("no plugin session has {path} open")));
            };
            let winners: Vec<&SessionRecord> = scored
                .into_iter()
                .filter(|(_, score)| *score == best)
                .map(|(s, _)| s)
                .collect();
            match winners.as_slice() {
                [one] => Ok(one.session_id.clone()),
                several => Err(ambiguous(
                    format!("{} sessions have {path} open", several.len()),
                    several,
                )),
            }
        }
        Target::Product(product) => {
            let matching: Vec<&SessionRecord> = plugins
                .iter()
                .copied()
                .filter(|s| s.product() == Some(product))
                .collect();
            match matching.as_slice() {
                [] => Err(no_target(format!("no {product} plugin is connected"))),
                [one] => Ok(one.session_id.clone()),
                several => {
                    let focused: Vec<&&SessionRecord> = several
                        .iter()
                        .filter(|s| s.window.focused == Some(true))
                        .collect();
                    match focused.as_slice() {
                        [one] => Ok(one.session_id.clone()),
                        _ => Err(ambiguous(
                            format!("{} {product} sessions are connected", several.len()),
                            several,
                        )),
                    }
                }
            }
        }
        Target::Focused => {
            if let Some(focused) = plugins
                .iter()
                .filter(|s| s.window.focused == Some(true))
                .max_by_key(|s| s.focused_at_ms)
            {
                return Ok(focused.session_id.clone());
            }
            // With a single IDE window there is nothing to choose between.
            match plugins.as_slice() {
                [only] => Ok(only.session_id.clone()),
                [] => Err(no_target("no plugin session to send to".into())),
                several => Err(ambiguous(
                    format!(
                        "no window reports focus and {} plugin sessions are connected",
                        several.len()
                    ),
                    several,
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::VersionRange;

    fn plugin(id: &str, product: &str, folders: &[&str], focused: Option<bool>) -> SessionRecord {
        let hello = Hello {
            role: Role::Plugin,
            protocol: VersionRange { min: 1, max: 1 },
            client: ClientInfo {
                name: "t".into(),
                version: "1".into(),
            },
            ide: Some(IdeInfo {
                product: product.parse().unwrap(),
                version: "1".into(),
                app_name: String::new(),
                uri_scheme: None,
                app_host: None,
            }),
            window: Some(WindowInfo {
                workspace_folders: folders.iter().map(|f| f.to_string()).collect(),
                focused,
                ..WindowInfo::default()
            }),
            capabilities: vec![],
            chat: None,
            scope: None,
        };
        SessionRecord::from_hello(id.into(), hello, 1, None, 1)
    }

    fn resolve(target: Target, sessions: &[SessionRecord]) -> String {
        match resolve_target(&target, sessions.iter()) {
            Ok(id) => id,
            Err(err) => format!("{}: {}", err.code, err.message),
        }
    }

    #[test]
    fn workspace_targets_pick_the_most_specific_folder() {
        let sessions = [
            plugin("s_a", "vscode", &["/home/u/repo"], None),
            plugin("s_b", "cursor", &["/home/u/repo/sub/"], None),
            plugin("s_c", "cursor", &["/home/u/repository"], None),
        ];
        assert_eq!(
            resolve(Target::Workspace("/home/u/repo".into()), &sessions),
            "s_a"
        );
        assert_eq!(
            resolve(Target::Workspace("/home/u/repo/src".into()), &sessions),
            "s_a"
        );
        assert_eq!(
            resolve(Target::Workspace("/home/u/repo/sub/x".into()), &sessions),
            "s_b"
        );
        assert_eq!(
            resolve(Target::Workspace("/home/u/repository/".into()), &sessions),
            "s_c"
        );
        assert_eq!(
            resolve(Target::Workspace("/home/u/rep".into()), &sessions),
            "no_target: no plugin session has /home/u/rep open; connected: s_a (vscode, /home/u/repo); s_b (cursor, /home/u/repo/sub/); s_c (cursor, /home/u/repository)"
        );
    }

    #[test]
    fn several_matches_are_reported_never_guessed() {
        let sessions = [
            plugin("s_a", "cursor", &["/w"], None),
            plugin("s_b", "cursor", &["/w"], Some(false)),
        ];
        assert_eq!(
            resolve(Target::Workspace("/w".into()), &sessions),
            "ambiguous_target: 2 sessions have /w open: s_a (cursor, /w); s_b (cursor, /w); name one with a session id"
        );
        assert!(resolve(Target::Product(IdeProduct::Cursor), &sessions)
            .starts_with("ambiguous_target: 2 cursor sessions"));
    }

    #[test]
    fn product_and_focused_targets() {
        let sessions = [
            plugin("s_a", "cursor", &["/a"], Some(false)),
            plugin("s_b", "cursor", &["/b"], Some(true)),
            plugin("s_c", "jetbrains-idea", &["/c"], None),
        ];
        assert_eq!(
            resolve(Target::Product(IdeProduct::Cursor), &sessions),
            "s_b"
        );
        assert_eq!(
            resolve(
                Target::Product(IdeProduct::JetBrains("idea".into())),
                &sessions
            ),
            "s_c"
        );
        assert_eq!(resolve(Target::Focused, &sessions), "s_b");
        assert_eq!(resolve(Target::Focused, &sessions[2..]), "s_c");
        let unfocused = [
            plugin("s_x", "vscode", &["/x"], None),
            plugin("s_y", "vscode", &["/y"], Some(false)),
        ];
        assert!(resolve(Target::Focused, &unfocused)
            .starts_with("ambiguous_target: no window reports focus and 2 plugin sessions"));
        assert_eq!(
            resolve(Target::Focused, &[]),
            "no_target: no plugin session to send to; no plugin is connected"
        );
        assert_eq!(
            resolve(Target::Session("s_zz".into()), &[]),
            "no_target: no plugin session s_zz; no plugin is connected"
        );
    }
}

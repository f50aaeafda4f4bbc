//! Sessions over time: the handshake's welcome, a session's activity and plugin events, heartbeats, and what a disconnect ends.

use koru_protocol::{
    blocker, AttemptOutcome, Blocker, ChatState, DriveState, Envelope, Hello, Message,
    PluginEventKind, RequestId, Role, Route, SessionHealth, StreamEvent,
};

use super::sessions::SessionRecord;
use crate::clock::Clock;

use super::{new_id, App, ConnId, HEARTBEAT_REASON};

impl<C: Clock> App<C> {
    pub(super) fn on_greeted(
        &mut self,
        conn_id: ConnId,
        hello: Hello,
        hello_id: Option<RequestId>,
        protocol: u32,
    ) {
        let now = self.clock.now_ms();
        let Some(connection) = self.connections.get_mut(&conn_id) else {
            return;
        };
        let session_id = new_id("s_");
        let declared_scope = hello.scope;
        let record = SessionRecord::from_hello(
            session_id.clone(),
            hello,
            protocol,
            connection.peer.pid,
            now,
        );
        connection.session_id = Some(session_id.clone());
        let role = record.role;
        // Controllers come and go with every CLI call; plugins are what an operator watches.
        if role == Role::Plugin {
            tracing::info!(
            session_id = %session_id,
            role = ?role,
            client = %record.client.name,
            product = record.product().map(|p| p.to_string()).unwrap_or_default(),
            peer_pid = ?record.peer_pid,
            "session started"
            );
        } else {
            tracing::debug!(session_id = %session_id, client = %record.client.name, "controller connected");
        }
        self.sessions.insert(session_id.clone(), Box::new(record));
        self.session_conn.insert(session_id.clone(), conn_id);
        let mut welcome = Message::welcome(
            protocol,
            session_id.clone(),
            self.config.heartbeat_ms,
            self.config.max_line_bytes,
        );
        if let (Message::Welcome(welcome), Some(scope)) = (&mut welcome, declared_scope) {
            welcome.scope = Some(scope);
        }
        self.send(conn_id, Envelope::with_id(hello_id, welcome));
        if role == Role::Plugin {
            let session = &self.sessions[&session_id];
            if let Some(storage) = &session.window.storage {
                let workspace = match session.window.workspace_folders.as_slice() {
                    [only] => Some(only.as_str()),
                    _ => None,
                };
                self.session_store_roots
                    .add(&session_id, storage, workspace);
            }
            let session = session.info();
            let mut fields = serde_json::Map::new();
            fields.insert("session_id".into(), session.session_id.clone().into());
            fields.insert("ide".into(), serde_json::json!(session.ide));
            fields.insert(
                "workspace_folders".into(),
                serde_json::json!(session.window.workspace_folders),
            );
            let asker = self.asker(conn_id);
            self.journal_event(crate::journal::KIND_SESSION_CONNECTED, fields, asker);
            self.publish(StreamEvent::SessionConnected { session });
        }
    }

    pub(super) fn touch(&mut self, session_id: &str, now: u64) {
        let Some(session) = self.sessions.get_mut(session_id) else {
            return;
        };
        session.last_seen_ms = now;
        if session.health == SessionHealth::Stale {
            session.health = SessionHealth::Active;
            tracing::info!(session_id, "session answers again");
            let info = session.info();
            self.publish(StreamEvent::SessionUpdated { session: info });
        }
    }

    pub(super) fn on_plugin_event(&mut self, session_id: &str, event: PluginEventKind, now: u64) {
        let Some(session) = self.sessions.get_mut(session_id) else {
            return;
        };
        match event {
            PluginEventKind::ChatBusy => session.chat = ChatState::Busy,
            PluginEventKind::ChatIdle => {
                session.chat = ChatState::Idle;
                session.chat_running_since_ms = None;
                let info = session.info();
                self.publish(StreamEvent::SessionUpdated { session: info });
                // Drives that waited for the chat can go now.
                self.pump(session_id, now);
                return;
            }
            PluginEventKind::Focus { focused } => {
                session.window.focused = Some(focused);
                if let Some(watch) = &session.focus_watch {
                    watch.send_replace(Some(focused));
                }
                if focused {
                    session.focused_at_ms = now;
                }
            }
            PluginEventKind::WorkspaceChanged { workspace_folders } => {
                session.window.workspace_folders = workspace_folders;
            }
            PluginEventKind::WindowClosing => {
                tracing::info!(session_id, "plugin says its window is closing");
                return;
            }
            PluginEventKind::ChatReadiness { ready, reason } => {
                let readiness = koru_protocol::ChatReadiness { ready, reason };
                if session.chat_readiness.as_ref() == Some(&readiness) {
                    return;
                }
                tracing::info!(
                    session_id,
                    ready,
                    reason = readiness.reason.as_deref().unwrap_or(""),
                    "the plugin's chat readiness changed"
                );
                session.chat_readiness = Some(readiness);
                let info = session.info();
                self.publish(StreamEvent::SessionUpdated { session: info });
                // A chat that became ready lets its waiting drives go; one that did not
                // shows why they wait.
                self.pump(session_id, now);
                return;
            }
            PluginEventKind::ChatOutcome { drive_id, outcome } => {
                self.on_chat_outcome(session_id, &drive_id, outcome, now);
                return;
            }
            PluginEventKind::Unknown => return,
        }
        let info = session.info();
        self.publish(StreamEvent::SessionUpdated { session: info });
    }

    pub(super) fn heartbeat(&mut self, now: u64) {
        let interval = self.config.heartbeat_ms.max(1);
        let mut to_ping = Vec::new();
        let mut to_drop = Vec::new();
        let mut went_stale = Vec::new();
        for session in self
            .sessions
            .values_mut()
            .filter(|s| s.role == Role::Plugin)
        {
            let silent_for = now.saturating_sub(session.last_seen_ms);
            if silent_for > 4 * interval {
                to_drop.push(session.session_id.clone());
                continue;
            }
            if silent_for > 2 * interval && session.health == SessionHealth::Active {
                session.health = SessionHealth::Stale;
                went_stale.push(session.info());
            }
            if now.saturating_sub(session.last_ping_ms) >= interval {
                session.last_ping_ms = now;
                to_ping.push(session.session_id.clone());
            }
        }
        for session in went_stale {
            tracing::warn!(session_id = %session.session_id, "session missed its heartbeats; marked stale");
            self.publish(StreamEvent::SessionUpdated { session });
        }
        for session_id in to_ping {
            if let Some(conn_id) = self.session_conn.get(&session_id).copied() {
                self.send(conn_id, Envelope::new(Message::Ping {}));
            }
        }
        for session_id in to_drop {
            let Some(conn_id) = self.session_conn.get(&session_id).copied() else {
                continue;
            };
            tracing::warn!(session_id = %session_id, "session silent for four heartbeat intervals; dropping it");
            if let Some(connection) = self.connections.get(&conn_id) {
                connection.handle.close.cancel();
            }
            self.on_disconnected(conn_id, HEARTBEAT_REASON);
        }
    }

    pub(super) fn on_disconnected(&mut self, conn_id: ConnId, reason: &str) {
        let now = self.clock.now_ms();
        let Some(connection) = self.connections.remove(&conn_id) else {
            return;
        };
        self.subscribers.remove(&conn_id);
        self.drop_ide_orders(conn_id);
        let Some(session_id) = connection.session_id else {
            tracing::debug!(conn_id, reason, "connection closed before hello");
            return;
        };
        self.session_conn.remove(&session_id);
        let Some(session) = self.sessions.remove(&session_id) else {
            return;
        };
        for queued in &session.queued_drives {
            self.unqueued(queued);
        }
        if session.role != Role::Plugin {
            tracing::debug!(session_id = %session_id, reason, "controller disconnected");
            return;
        }
        tracing::info!(session_id = %session_id, reason, "session ended");
        if session.window.storage.is_some() {
            self.session_store_roots.remove(&session_id);
        }
        let detail = format!("the plugin's connection ended ({reason})");
        let code = if reason == HEARTBEAT_REASON {
            blocker::HEARTBEAT_LOST
        } else {
            blocker::PLUGIN_DISCONNECTED
        };
        let orphans: Vec<String> = session
            .active_drive
            .iter()
            .chain(session.queued_drives.iter())
            .cloned()
            .collect();
        for drive_id in orphans {
            let injecting = self.injecting.as_deref() == Some(drive_id.as_str())
                || self.drives.get(&drive_id).is_some_and(|d| {
                    d.current
                        .as_ref()
                        .is_some_and(|c| c.route == Route::OsInjection)
                        && d.attempts
                            .last()
                            .is_some_and(|a| a.outcome == AttemptOutcome::Running)
                });
            if injecting {
                // OS injection does not need the plugin, and a submit key press under way
                // cannot be called back: each ends on its own.
                continue;
            }
            self.finish_drive(
                &drive_id,
                DriveState::Failed,
                Some(Blocker::new(code, detail.clone())),
                now,
            );
        }
        let mut fields = serde_json::Map::new();
        fields.insert("session_id".into(), session_id.clone().into());
        fields.insert("reason".into(), reason.into());
        self.journal_event(crate::journal::KIND_SESSION_DISCONNECTED, fields, None);
        self.publish(StreamEvent::SessionDisconnected {
            session_id,
            reason: reason.to_string(),
        });
    }
}

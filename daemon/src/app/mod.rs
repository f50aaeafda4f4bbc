//! The daemon's single state machine: every connection feeds it through one closed [`DaemonEvent`] enum, and it alone owns sessions, drives and subscriptions.
//!
//! Connection tasks (in `server/`) do the byte work: framing, decoding, the handshake's
//! checks, role checks. What reaches [`App::handle`] is already a valid message from a
//! greeted peer, so this module is plain synchronous logic that unit tests drive with a
//! manual clock and in-memory channels.

pub mod drives;
pub mod recovery;
pub mod sessions;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use koru_protocol::{
    blocker, AttemptOutcome, Blocker, Bye, ChatState, DriveCancelNotice, DriveCreate, DriveRequest,
    DriveResult, DriveState, DrivesListResult, Envelope, ErrorCode, ErrorMessage, Hello, Location,
    Message, PluginEventKind, RefusedHandshake, RegistryStatus, RequestId, Role, Route,
    SessionHealth, SessionsListResult, StatusInfo, StreamEvent, StreamItem, Verification,
    VersionRange,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::drive::inject::{InjectionJob, InjectionOutcome, InjectionRunner, KeyPressJob, Reached};
use crate::drive::planner::{plan, Candidate, PlanInput};
use crate::observe::announced::{NoSessionStoreRoots, SessionStoreRoots};
use drives::{AckOutcome, DriveRecord, DriveTable};
use recovery::{DriveOrigin, RecoveryDone, RecoveryRunner, RecoveryTicket};
use sessions::{resolve_target, SessionRecord};

/// Identifies one accepted connection for the daemon's lifetime.
pub type ConnId = u64;

/// How the state machine talks back to one connection.
#[derive(Debug, Clone)]
pub struct ConnectionHandle {
    /// Bounded: when it is full the peer is not reading and gets disconnected.
    pub outbound: mpsc::Sender<Envelope>,
    /// Cancelled to close the connection after what is queued has been written.
    pub close: CancellationToken,
}

/// What the kernel says about the peer process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerInfo {
    pub pid: Option<u32>,
    pub uid: u32,
}

/// Everything that can happen to the daemon, in one closed enum.
#[derive(Debug)]
pub enum DaemonEvent {
    /// A peer with our UID connected; no hello yet.
    Connected {
        conn_id: ConnId,
        handle: ConnectionHandle,
        peer: PeerInfo,
    },
    /// The peer's hello passed every check; `protocol` is the negotiated version.
    Greeted {
        conn_id: ConnId,
        hello: Box<Hello>,
        /// The hello's `id`, which the `welcome` carries back.
        hello_id: Option<RequestId>,
        protocol: u32,
    },
    /// A decoded, role-checked message after the handshake.
    Received {
        conn_id: ConnId,
        envelope: Box<Envelope>,
    },
    /// The connection ended (EOF, error, close); `reason` says why.
    Disconnected { conn_id: ConnId, reason: String },
    /// A connection's hello was refused (kept for doctor).
    HandshakeRefused { record: Box<RefusedHandshake> },
    /// The registry layers were read again (file change or SIGHUP).
    RegistryChanged { loaded: Box<koru_registry::Loaded> },
    /// The chat-store observers saw something; `replay` marks history read at start-up
    /// (applied to the chats table, not published as news).
    Observed {
        events: Vec<koru_protocol::ObservedEvent>,
        replay: bool,
    },
    /// The observers' view of their store roots changed (watches, files, problems).
    ObserverHealth {
        observers: Vec<koru_protocol::ObserverStatus>,
    },
    /// An OS injection started for a drive has finished.
    InjectionFinished { outcome: Box<InjectionOutcome> },
    /// The slow part of a recovery action has finished.
    RecoveryFinished {
        ticket: RecoveryTicket,
        done: Box<RecoveryDone>,
    },
    /// Periodic: heartbeats and deadlines.
    Tick,
}

/// How long after a drive is created its prompt may show up in a chat store and still be
/// matched to it.
const CORRELATION_WINDOW_MS: u64 = 120_000;

/// An observed chat counts as busy (replying, needs input) only if it was active this
/// recently.
const OBSERVED_BUSY_MS: u64 = 300_000;

/// The longest a chat counts as busy after a `chat_running` submit without an outcome
/// from its plugin.
const CHAT_RUNNING_BUSY_MS: u64 = 600_000;

pub use koru_protocol::PLUGIN_OBSERVATION_STORE;

/// How far along a chat's handling of a prompt an observed stage is; later stages win.
fn observed_rank(stage: koru_protocol::ObservedStage) -> u8 {
    use koru_protocol::ObservedStage;
    match stage {
        ObservedStage::Ambiguous => 0,
        ObservedStage::Observed => 1,
        ObservedStage::Replying => 2,
        ObservedStage::NeedsInput => 3,
        ObservedStage::Replied | ObservedStage::Cancelled | ObservedStage::Failed => 4,
    }
}

/// Merges a stage reported by a second source (the plugin, or a store) into a drive's
/// observation: a stage only moves forward, an excerpt or detail fills what was missing.
/// Returns whether anything changed (so each fact is published once).
fn merge_observation(
    found: &mut koru_protocol::DriveObservation,
    stage: koru_protocol::ObservedStage,
    excerpt: Option<String>,
    length: Option<usize>,
    detail: Option<String>,
    at_ms: u64,
) -> bool {
    let mut changed = false;
    if observed_rank(stage) > observed_rank(found.stage) {
        // A new stage: what was said about the old one (a question's detail) goes with it.
        found.stage = stage;
        found.at_ms = at_ms;
        found.detail = None;
        changed = true;
    }
    if found.stage == stage {
        if found.reply_excerpt.is_none() && excerpt.is_some() {
            found.reply_excerpt = excerpt;
            changed = true;
        }
        if found.reply_length.is_none() && length.is_some() {
            found.reply_length = length;
            changed = true;
        }
        if found.detail.is_none() && detail.is_some() {
            found.detail = detail;
            changed = true;
        }
    }
    changed
}

/// How many refused handshakes the daemon remembers.
const REFUSED_HANDSHAKES_KEPT: usize = 20;

/// The settings the state machine needs.
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub socket_display: String,
    pub heartbeat_ms: u64,
    pub max_line_bytes: usize,
    pub default_drive_timeout_ms: u64,
    /// How long a plugin may take to ack the next stage of a route.
    pub step_timeout_ms: u64,
    pub drive_history: usize,
    pub daemon_pid: u32,
    /// The HTTP endpoint, for `status`.
    pub http: Option<koru_protocol::HttpStatus>,
    /// Whether the chat-store observers run, for `status`.
    pub observing: bool,
}

#[derive(Debug)]
struct Connection {
    handle: ConnectionHandle,
    peer: PeerInfo,
    session_id: Option<String>,
    subscribed: bool,
}

impl Connection {
    /// Says `bye` with `reason` (if the queue has room) and closes the connection.
    fn say_bye_and_close(&self, reason: &str) {
        let _ = self
            .handle
            .outbound
            .try_send(Envelope::new(Message::Bye(Bye {
                reason: Some(reason.into()),
            })));
        self.handle.close.cancel();
    }
}

/// The daemon's state: connections, sessions, drives, subscribers.
pub struct App<C: Clock> {
    config: AppConfig,
    clock: C,
    started_at_ms: u64,
    connections: HashMap<ConnId, Connection>,
    sessions: HashMap<String, SessionRecord>,
    session_conn: HashMap<String, ConnId>,
    drives: DriveTable,
    stream_seq: u64,
    registry: Arc<koru_registry::Registry>,
    registry_status: RegistryStatus,
    refused_handshakes: VecDeque<RefusedHandshake>,
    injections: Box<dyn InjectionRunner>,
    recovery: Box<dyn RecoveryRunner>,
    /// The drive whose OS injection is running (keyboard input is global: one at a time).
    injecting: Option<String>,
    injection_waiting: VecDeque<String>,
    /// The chats the observers know, by (store, chat id).
    chats: std::collections::BTreeMap<(String, String), koru_protocol::ChatInfo>,
    /// The drive last matched to each chat, whose observation the chat's next events update.
    chat_drive: HashMap<(String, String), String>,
    /// Chats whose last event was a completed reply: the same end reported again (the
    /// transcript's end record and the Stop hook) is not news.
    chat_completed: std::collections::HashSet<(String, String)>,
    /// The observers' store roots, as last reported.
    observers: Vec<koru_protocol::ObserverStatus>,
    /// Where plugin sessions' announced chat-store folders go (the watcher, or nowhere).
    session_store_roots: Box<dyn SessionStoreRoots>,
}

impl<C: Clock> App<C> {
    /// A state machine routing with `registry` (the first load: used even when some
    /// layer had problems, which are reported in status).
    pub fn new(
        config: AppConfig,
        clock: C,
        registry: koru_registry::Loaded,
        injections: Box<dyn InjectionRunner>,
        recovery: Box<dyn RecoveryRunner>,
    ) -> Self {
        let started_at_ms = clock.now_ms();
        let drives = DriveTable::new(config.drive_history);
        let registry_status = registry_status(&registry);
        App {
            config,
            clock,
            started_at_ms,
            connections: HashMap::new(),
            sessions: HashMap::new(),
            session_conn: HashMap::new(),
            drives,
            stream_seq: 0,
            registry: Arc::new(registry.registry),
            registry_status,
            refused_handshakes: VecDeque::new(),
            injections,
            recovery,
            injecting: None,
            injection_waiting: VecDeque::new(),
            chats: std::collections::BTreeMap::new(),
            chat_drive: HashMap::new(),
            chat_completed: std::collections::HashSet::new(),
            observers: Vec::new(),
            session_store_roots: Box::new(NoSessionStoreRoots),
        }
    }

    /// Hands the chat-store folders plugin sessions announce (`window.storage`) to
    /// `roots` for as long as each session lasts (by default they are ignored).
    pub fn with_session_store_roots(mut self, roots: Box<dyn SessionStoreRoots>) -> Self {
        self.session_store_roots = roots;
        self
    }

    /// The registry in use.
    pub fn registry(&self) -> &Arc<koru_registry::Registry> {
        &self.registry
    }

    /// Applies one event.
    pub fn handle(&mut self, event: DaemonEvent) {
        match event {
            DaemonEvent::Connected {
                conn_id,
                handle,
                peer,
            } => {
                self.connections.insert(
                    conn_id,
                    Connection {
                        handle,
                        peer,
                        session_id: None,
                        subscribed: false,
                    },
                );
            }
            DaemonEvent::Greeted {
                conn_id,
                hello,
                hello_id,
                protocol,
            } => self.on_greeted(conn_id, *hello, hello_id, protocol),
            DaemonEvent::Received { conn_id, envelope } => self.on_received(conn_id, *envelope),
            DaemonEvent::Disconnected { conn_id, reason } => self.on_disconnected(conn_id, &reason),
            DaemonEvent::HandshakeRefused { record } => {
                self.refused_handshakes.push_back(*record);
                while self.refused_handshakes.len() > REFUSED_HANDSHAKES_KEPT {
                    self.refused_handshakes.pop_front();
                }
            }
            DaemonEvent::RegistryChanged { loaded } => self.on_registry_changed(*loaded),
            DaemonEvent::InjectionFinished { outcome } => self.on_injection_finished(*outcome),
            DaemonEvent::RecoveryFinished { ticket, done } => {
                self.on_recovery_finished(ticket, *done)
            }
            DaemonEvent::Tick => self.on_tick(),
            DaemonEvent::Observed { events, replay } => self.on_observed(events, replay),
            DaemonEvent::ObserverHealth { observers } => self.observers = observers,
        }
    }

    /// Applies observations to the chats table and publishes them (unless replayed history).
    fn on_observed(&mut self, events: Vec<koru_protocol::ObservedEvent>, replay: bool) {
        use koru_protocol::{ChatInfo, ObservedChatState, ObservedKind};
        for observation in events {
            let key = (observation.store.clone(), observation.chat_id.clone());
            match observation.event {
                ObservedKind::ReplyCompleted { .. } => {
                    if !self.chat_completed.insert(key.clone()) {
                        continue;
                    }
                }
                ObservedKind::ChatSeen | ObservedKind::Activity | ObservedKind::Unknown => {}
                _ => {
                    self.chat_completed.remove(&key);
                }
            }
            let at = observation.store_ts_ms.unwrap_or(observation.seen_at_ms);
            let chat = self.chats.entry(key).or_insert_with(|| ChatInfo {
                store: observation.store.clone(),
                chat_id: observation.chat_id.clone(),
                workspace: observation.workspace.clone(),
                state: ObservedChatState::Idle,
                last_activity_ms: at,
                last_prompt: None,
            });
            if chat.workspace.is_none() {
                chat.workspace = observation.workspace.clone();
            }
            chat.last_activity_ms = chat.last_activity_ms.max(at);
            match &observation.event {
                ObservedKind::PromptSeen { excerpt, .. } => {
                    chat.last_prompt = Some(excerpt.clone());
                    chat.state = ObservedChatState::Replying;
                }
                ObservedKind::ReplyStarted => chat.state = ObservedChatState::Replying,
                ObservedKind::NeedsInput { .. } => chat.state = ObservedChatState::NeedsInput,
                ObservedKind::ReplyCompleted { .. }
                | ObservedKind::Cancelled
                | ObservedKind::Failed { .. } => chat.state = ObservedChatState::Idle,
                ObservedKind::ChatSeen | ObservedKind::Activity | ObservedKind::Unknown => {}
            }
            if !replay {
                self.correlate(&observation);
                self.publish(StreamEvent::Observed { observation });
            }
        }
        // Chats that became idle let their windows' queued drives go.
        let now = self.clock.now_ms();
        let waiting: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.active_drive.is_none() && !s.queued_drives.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        for session_id in waiting {
            self.pump(&session_id, now);
        }
    }

    /// Matches a recorded prompt to the drive that sent it (same normalized text, a drive
    /// created at most `CORRELATION_WINDOW_MS` before, the chat's workspace among the
    /// target's folders), and carries the chat's later events onto that drive. Two or
    /// more candidates: none is claimed; each is marked `ambiguous`.
    fn correlate(&mut self, observation: &koru_protocol::ObservedEvent) {
        use koru_protocol::{DriveObservation, ObservedKind, ObservedStage};
        let key = (observation.store.clone(), observation.chat_id.clone());
        let at_ms = observation.store_ts_ms.unwrap_or(observation.seen_at_ms);
        if let ObservedKind::PromptSeen { digest, .. } = &observation.event {
            let seen = observation.seen_at_ms;
            let workspace = observation.workspace.as_deref().map(std::path::Path::new);
            let candidates: Vec<String> = self
                .drives
                .iter()
                // A drive whose only observation so far came from its plugin can still be
                // found in the store (which then names the chat and gives the reply text).
                .filter(|d| {
                    d.observation
                        .as_ref()
                        .is_none_or(|o| o.store == PLUGIN_OBSERVATION_STORE)
                        && &d.prompt_digest == digest
                })
                .filter(|d| d.state != DriveState::Queued)
                .filter(|d| {
                    d.created_at_ms <= seen.saturating_add(1_000)
                        && seen.saturating_sub(d.created_at_ms) <= CORRELATION_WINDOW_MS
                })
                .filter(|d| {
                    d.workspaces.is_empty()
                        || workspace.is_none_or(|w| {
                            d.workspaces
                                .iter()
                                .any(|f| w.starts_with(f) || std::path::Path::new(f).starts_with(w))
                        })
                })
                .map(|d| d.drive_id.clone())
                .collect();
            let stage = if candidates.len() == 1 {
                ObservedStage::Observed
            } else {
                ObservedStage::Ambiguous
            };
            let detail = (candidates.len() > 1).then(|| {
                format!(
                    "the prompt seen in {} chat {} matches {} drives: {}",
                    observation.store,
                    observation.chat_id,
                    candidates.len(),
                    candidates.join(", ")
                )
            });
            for drive_id in &candidates {
                if let Some(found) = self
                    .drives
                    .get_mut(drive_id)
                    .and_then(|d| d.observation.as_mut())
                {
                    // Already followed through the plugin: the store names the chat; the
                    // stage the plugin reported stays (it is as far or further).
                    if stage == ObservedStage::Observed {
                        found.store = observation.store.clone();
                        found.chat_id = observation.chat_id.clone();
                        self.publish_drive(drive_id);
                    }
                    continue;
                }
                if let Some(drive) = self.drives.get_mut(drive_id) {
                    drive.observation = Some(DriveObservation {
                        store: observation.store.clone(),
                        chat_id: observation.chat_id.clone(),
                        stage,
                        basis: observation.basis,
                        at_ms,
                        reply_excerpt: None,
                        reply_length: None,
                        detail: detail.clone(),
                    });
                }
                self.publish_drive(drive_id);
            }
            if candidates.len() == 1 {
                tracing::info!(drive_id = %candidates[0], chat = %observation.chat_id, "prompt observed in the chat's history");
                self.chat_drive.insert(key, candidates[0].clone());
            } else {
                if !candidates.is_empty() {
                    tracing::warn!(
                        detail = detail.as_deref().unwrap_or(""),
                        "ambiguous prompt observation; no drive claimed"
                    );
                }
                self.chat_drive.remove(&key);
            }
            return;
        }
        let Some(drive_id) = self.chat_drive.get(&key).cloned() else {
            return;
        };
        let Some(drive) = self.drives.get_mut(&drive_id) else {
            return;
        };
        let Some(found) = drive.observation.as_mut() else {
            return;
        };
        let (stage, excerpt, length, detail) = match &observation.event {
            ObservedKind::ReplyStarted => (ObservedStage::Replying, None, None, None),
            ObservedKind::ReplyCompleted { excerpt, length } => (
                ObservedStage::Replied,
                Some(excerpt.clone()),
                Some(*length),
                None,
            ),
            ObservedKind::NeedsInput { .. } => (ObservedStage::NeedsInput, None, None, None),
            ObservedKind::Cancelled => (ObservedStage::Cancelled, None, None, None),
            ObservedKind::Failed { reason } => {
                (ObservedStage::Failed, None, None, Some(reason.clone()))
            }
            ObservedKind::ChatSeen
            | ObservedKind::PromptSeen { .. }
            | ObservedKind::Activity
            | ObservedKind::Unknown => return,
        };
        // A chat goes back from "needs input" to replying once the user answers; otherwise
        // stages only move forward, and what both the plugin and the store report counts
        // once.
        let changed =
            if found.stage == ObservedStage::NeedsInput && stage == ObservedStage::Replying {
                found.stage = stage;
                found.at_ms = at_ms;
                true
            } else {
                merge_observation(found, stage, excerpt, length, detail, at_ms)
            };
        if changed {
            found.basis = observation.basis;
        }
        if matches!(
            found.stage,
            ObservedStage::Replied | ObservedStage::Cancelled | ObservedStage::Failed
        ) {
            self.chat_drive.remove(&key);
        }
        if changed {
            self.publish_drive(&drive_id);
        }
    }

    /// Applies a reloaded registry when it is clean; otherwise keeps the last good one and
    /// reports the problems.
    fn on_registry_changed(&mut self, loaded: koru_registry::Loaded) {
        let diagnostics: Vec<String> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
        let applied = diagnostics.is_empty();
        if applied {
            self.registry_status = registry_status(&loaded);
            self.registry = Arc::new(loaded.registry);
            tracing::info!(
                interfaces = self.registry.interfaces().len(),
                "registry applied"
            );
        } else {
            for diagnostic in &diagnostics {
                tracing::warn!(%diagnostic, "registry problem; keeping the last good registry");
            }
            self.registry_status.diagnostics = diagnostics.clone();
        }
        self.publish(StreamEvent::RegistryReloaded {
            applied,
            interfaces: self.registry.interfaces().len(),
            diagnostics,
        });
    }

    /// Ends every running drive, says `bye` to every peer and closes every connection.
    pub fn shutdown(&mut self) {
        let now = self.clock.now_ms();
        for drive_id in self.drives.running() {
            self.finish_drive(
                &drive_id,
                DriveState::Failed,
                Some(Blocker::new(
                    blocker::DAEMON_SHUTDOWN,
                    "the daemon stopped before the drive finished",
                )),
                now,
            );
        }
        for connection in self.connections.values() {
            connection.say_bye_and_close("the daemon is shutting down");
        }
    }

    /// Number of live connections (greeted or not).
    pub fn connection_count(&self) -> usize {
        self.connections.len()
    }

    fn on_greeted(
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
        self.sessions.insert(session_id.clone(), record);
        self.session_conn.insert(session_id.clone(), conn_id);
        self.send(
            conn_id,
            Envelope::with_id(
                hello_id,
                Message::welcome(
                    protocol,
                    session_id.clone(),
                    self.config.heartbeat_ms,
                    self.config.max_line_bytes,
                ),
            ),
        );
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
            self.publish(StreamEvent::SessionConnected { session });
        }
    }

    fn on_received(&mut self, conn_id: ConnId, envelope: Envelope) {
        let now = self.clock.now_ms();
        let Some(session_id) = self
            .connections
            .get(&conn_id)
            .and_then(|c| c.session_id.clone())
        else {
            return;
        };
        self.touch(&session_id, now);
        let id = envelope.id;
        match envelope.message {
            Message::Ping {} => self.send(conn_id, Envelope::with_id(id, Message::Pong {})),
            Message::Pong {} => {}
            Message::Bye(bye) => {
                tracing::debug!(session_id = %session_id, reason = ?bye.reason, "peer said bye");
                if let Some(connection) = self.connections.get(&conn_id) {
                    connection.handle.close.cancel();
                }
            }
            Message::Error(error) => {
                tracing::warn!(session_id = %session_id, code = %error.code, message = %error.message, "peer reported an error");
            }
            Message::Ack(ack) => self.on_ack(conn_id, &session_id, ack, now),
            Message::Event(event) => self.on_plugin_event(&session_id, event.event, now),
            Message::Status {} => {
                let status = self.status();
                self.send(
                    conn_id,
                    Envelope::with_id(id, Message::StatusResult(status)),
                );
            }
            Message::SessionsList(filter) => {
                let mut sessions: Vec<_> = self
                    .sessions
                    .values()
                    .filter(|s| s.role == Role::Plugin)
                    .filter(|s| {
                        filter
                            .product
                            .as_ref()
                            .is_none_or(|p| s.product() == Some(p))
                    })
                    .filter(|s| {
                        filter.workspace.as_ref().is_none_or(|w| {
                            resolve_target(
                                &koru_protocol::Target::Workspace(w.clone()),
                                std::iter::once(*s),
                            )
                            .is_ok()
                        })
                    })
                    .map(|s| s.info())
                    .collect();
                sessions.sort_by(|a, b| {
                    (a.connected_at_ms, &a.session_id).cmp(&(b.connected_at_ms, &b.session_id))
                });
                self.send(
                    conn_id,
                    Envelope::with_id(
                        id,
                        Message::SessionsListResult(SessionsListResult { sessions }),
                    ),
                );
            }
            Message::ChatsList(filter) => {
                let chats = self
                    .chats
                    .values()
                    .filter(|c| filter.store.as_ref().is_none_or(|s| &c.store == s))
                    .filter(|c| {
                        filter.workspace.as_ref().is_none_or(|w| {
                            c.workspace.as_ref().is_some_and(|cw| {
                                std::path::Path::new(w).starts_with(cw)
                                    || std::path::Path::new(cw).starts_with(w)
                            })
                        })
                    })
                    .cloned()
                    .collect();
                self.send(
                    conn_id,
                    Envelope::with_id(
                        id,
                        Message::ChatsListResult(koru_protocol::ChatsListResult { chats }),
                    ),
                );
            }
            Message::ObserveReport(report) => {
                let applied = report.observations.len();
                self.send(
                    conn_id,
                    Envelope::with_id(
                        id,
                        Message::ObserveReported(koru_protocol::ObserveReported { applied }),
                    ),
                );
                self.on_observed(report.observations, false);
            }
            Message::DrivesList(filter) => {
                let drives = self
                    .drives
                    .iter()
                    .filter(|d| {
                        filter
                            .session_id
                            .as_ref()
                            .is_none_or(|s| &d.session_id == s)
                    })
                    .filter(|d| !filter.active_only || !d.is_terminal())
                    .map(|d| d.info())
                    .collect();
                self.send(
                    conn_id,
                    Envelope::with_id(id, Message::DrivesListResult(DrivesListResult { drives })),
                );
            }
            Message::DriveCreate(create) => self.on_drive_create(conn_id, id, create, now),
            Message::DriveGet(drive_ref) => match self.drives.get(&drive_ref.drive_id) {
                Some(drive) => {
                    let reply = drive_result(drive);
                    self.send(conn_id, Envelope::with_id(id, reply));
                }
                None => self.send_error(conn_id, id, unknown_drive(&drive_ref.drive_id)),
            },
            Message::DriveCancel(drive_ref) => {
                self.on_drive_cancel(conn_id, id, &drive_ref.drive_id, now)
            }
            Message::RecoveryRun(run) => self.on_recovery_run(conn_id, id, run.action, now),
            Message::EventsSubscribe {} => {
                if let Some(connection) = self.connections.get_mut(&conn_id) {
                    connection.subscribed = true;
                }
                self.send(conn_id, Envelope::with_id(id, Message::EventsSubscribed {}));
            }
            other => {
                // Role checks in the connection task keep daemon-to-client types out.
                tracing::debug!(
                    type_name = other.type_name(),
                    "ignoring a message with no handler"
                );
            }
        }
    }

    fn touch(&mut self, session_id: &str, now: u64) {
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

    fn on_plugin_event(&mut self, session_id: &str, event: PluginEventKind, now: u64) {
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

    fn on_drive_create(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        create: DriveCreate,
        now: u64,
    ) {
        self.accept_drive(conn_id, id, create, DriveOrigin::Asked, now);
    }

    /// Checks, plans and queues a new drive, answering `conn_id` as `origin` asks.
    fn accept_drive(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        create: DriveCreate,
        origin: DriveOrigin,
        now: u64,
    ) {
        if create.prompt.trim().is_empty() {
            self.send_error(
                conn_id,
                id,
                ErrorMessage::new(ErrorCode::InvalidMessage, "the prompt is empty").with_location(
                    Location {
                        field: Some("prompt".into()),
                        ..Location::default()
                    },
                ),
            );
            return;
        }
        // A window without a plugin is driven by OS injection alone; anything else names a
        // plugin session.
        let (session_id, window, extra_pids) = match &create.target {
            koru_protocol::Target::Window(window) => {
                if let Err(error) = check_window_target(window) {
                    self.send_error(conn_id, id, error);
                    return;
                }
                (String::new(), Some(window.clone()), Vec::new())
            }
            target => match resolve_target(target, self.sessions.values()) {
                Ok(session_id) => {
                    let session = &self.sessions[&session_id];
                    let window = session.window.pid.map(|pid| koru_protocol::WindowTarget {
                        pid: Some(pid),
                        title: None,
                    });
                    let extra = session.window.parent_pid.into_iter().collect();
                    (session_id, window, extra)
                }
                Err(error) => {
                    self.send_error(conn_id, id, error);
                    return;
                }
            },
        };
        let timeout_ms = create
            .options
            .timeout_ms
            .unwrap_or(self.config.default_drive_timeout_ms);
        let mut drive = DriveRecord::new(
            new_id("d_"),
            create.target,
            session_id.clone(),
            Route::PluginDrive,
            create.prompt,
            create.options,
            now,
            timeout_ms,
        );
        let mut candidates = self.plan(&session_id, window.is_some(), &create.options);
        if let DriveOrigin::Retry {
            of,
            route: Some(route),
            ..
        } = &origin
        {
            candidates.retain(|c| c.route == *route);
            if candidates.is_empty() {
                let message = format!(
                    "route {} does not apply to the target of drive {of}; `koru doctor` lists each session's routes",
                    route.as_str()
                );
                self.send_error(
                    conn_id,
                    id,
                    ErrorMessage::new(ErrorCode::NotRetryable, message),
                );
                return;
            }
        }
        drive.candidates = candidates.into();
        drive.window = window;
        drive.extra_pids = extra_pids;
        drive.workspaces = self
            .sessions
            .get(&session_id)
            .map(|s| s.window.workspace_folders.clone())
            .unwrap_or_default();
        let drive_id = drive.drive_id.clone();
        tracing::info!(
            drive_id = %drive_id,
            session_id = %session_id,
            prompt_chars = drive.prompt.chars().count(),
            routes = drive.candidates.len(),
            timeout_ms,
            "drive accepted"
        );
        let busy_fail = drive.options.busy == koru_protocol::BusyPolicy::Fail
            && (self.observed_busy(&session_id, now).is_some()
                || self.sessions.get(&session_id).is_some_and(|s| {
                    s.chat == ChatState::Busy
                        || s.active_drive.is_some()
                        || !s.queued_drives.is_empty()
                }));
        if let DriveOrigin::Retry { of, .. } = &origin {
            drive.retry_of = Some(of.clone());
        }
        self.drives.insert(drive);
        let info = self.drives.get(&drive_id).expect("just inserted").info();
        match origin {
            DriveOrigin::Asked => {
                self.send(
                    conn_id,
                    Envelope::with_id(id, Message::DriveResult(DriveResult { drive: info })),
                );
                self.publish_drive(&drive_id);
            }
            DriveOrigin::Retry { of, by, .. } => {
                let summary = format!("drive {of} retried as {drive_id} ({})", info.target);
                self.send(
                    conn_id,
                    Envelope::with_id(
                        id,
                        Message::RecoveryResult(koru_protocol::RecoveryResult {
                            action: "retry_drive".into(),
                            ok: true,
                            summary: summary.clone(),
                            blocker: None,
                            drive: Some(info),
                        }),
                    ),
                );
                self.publish_drive(&drive_id);
                self.announce_recovery("retry_drive", &by, true, summary);
            }
        }
        if busy_fail {
            self.finish_drive(
                &drive_id,
                DriveState::Failed,
                Some(Blocker::new(
                    koru_protocol::blocker::CHAT_BUSY,
                    "the chat is busy (replying, waiting for input, or another drive is running) and the drive asked to fail fast",
                )),
                now,
            );
            return;
        }
        if session_id.is_empty() {
            self.start_next_route(&drive_id, now);
            return;
        }
        if let Some(session) = self.sessions.get_mut(&session_id) {
            session.queued_drives.push_back(drive_id.clone());
        }
        self.pump(&session_id, now);
    }

    /// The candidate routes for a drive to `session_id` (empty: a plugin-less window).
    fn plan(
        &self,
        session_id: &str,
        has_window: bool,
        options: &koru_protocol::DriveOptions,
    ) -> Vec<Candidate> {
        let session = self.sessions.get(session_id);
        let product = session.and_then(|s| s.product()).map(|p| p.to_string());
        let input = PlanInput {
            registry: &self.registry,
            product: product.as_deref(),
            capabilities: session.map(|s| s.capabilities.as_slice()).unwrap_or(&[]),
            has_window,
            plugin_connected: session.is_some(),
            platform: crate::doctor::probe::current_platform()
                .unwrap_or(koru_registry::Platform::Linux),
            submit: options.submit,
            new_chat: options.new_chat,
        };
        let injections = &self.injections;
        plan(&input, &|interface: &str| injections.probe(interface))
    }

    /// Tries the next usable route of a drive, or ends it when none is left.
    fn start_next_route(&mut self, drive_id: &str, now: u64) {
        loop {
            let Some(drive) = self.drives.get_mut(drive_id) else {
                return;
            };
            if drive.is_terminal() {
                return;
            }
            let Some(candidate) = drive.candidates.pop_front() else {
                // The most telling reason: the last route that was tried, else why the
                // best-ranked route could not be tried at all.
                let tried = drive
                    .attempts
                    .iter()
                    .rev()
                    .find(|a| a.outcome == AttemptOutcome::Failed)
                    .and_then(|a| a.blocker.clone());
                let blocker = tried.unwrap_or_else(|| {
                    match drive.attempts.iter().find_map(|a| a.blocker.clone()) {
                        Some(first) => Blocker::new(
                            &first.code,
                            format!("no usable route; the best one: {}", first.detail),
                        ),
                        None => Blocker::new(
                            koru_protocol::blocker::NO_ROUTE,
                            "no route in the registry applies to this target",
                        ),
                    }
                });
                self.finish_drive(drive_id, DriveState::Failed, Some(blocker), now);
                return;
            };
            if candidate.usable.is_err() {
                drive.skip(&candidate);
                continue;
            }
            match candidate.route {
                Route::NativeSend | Route::PluginDrive => {
                    let conn_id = self.session_conn.get(&drive.session_id).copied();
                    let Some(conn_id) = conn_id else {
                        let mut skipped = candidate;
                        skipped.usable = Err(Blocker::new(
                            "plugin_missing",
                            "the plugin is not connected",
                        ));
                        drive.skip(&skipped);
                        continue;
                    };
                    let mut options = drive.options;
                    if candidate.submit_key.is_some() {
                        // The daemon presses the route's submit key itself once the plugin has
                        // pasted: the plugin runs its steps as for a prompt left unsent.
                        options.submit = false;
                    }
                    let order = DriveRequest {
                        drive_id: drive_id.to_string(),
                        prompt: drive.prompt.clone(),
                        options,
                        route: candidate.route,
                        steps: candidate.steps.clone(),
                    };
                    tracing::info!(drive_id, route = candidate.route.as_str(), interface = %candidate.interface, "trying route");
                    drive.begin_attempt(candidate, now);
                    drive.step_deadline_ms = Some(now + self.config.step_timeout_ms);
                    self.send(conn_id, Envelope::new(Message::Drive(order)));
                    self.publish_drive(drive_id);
                    return;
                }
                Route::OsInjection => {
                    tracing::info!(drive_id, interface = %candidate.interface, "trying OS injection");
                    drive.begin_attempt(candidate, now);
                    self.publish_drive(drive_id);
                    self.use_keyboard(drive_id);
                    return;
                }
            }
        }
    }

    /// Starts the drive's keyboard work (its OS injection, or its route's submit key) now,
    /// or after the one running: keyboard input is global, one at a time.
    fn use_keyboard(&mut self, drive_id: &str) {
        if self.injecting.is_some() {
            self.injection_waiting.push_back(drive_id.to_string());
        } else {
            self.start_injection(drive_id);
        }
    }

    fn start_injection(&mut self, drive_id: &str) {
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let Some(candidate) = drive.current.clone() else {
            return;
        };
        self.injecting = Some(drive_id.to_string());
        if candidate.route != Route::OsInjection {
            // A plugin route that pasted: the daemon presses its submit key.
            let Some(key) = candidate.submit_key else {
                self.injecting = None;
                return;
            };
            let plugin_focused = self
                .sessions
                .get(&drive.session_id)
                .and_then(|session| session.window.focused);
            self.injections.start_key_press(KeyPressJob {
                drive_id: drive_id.to_string(),
                injectors: key.injectors,
                window: drive.window.clone().unwrap_or_default(),
                extra_pids: drive.extra_pids.clone(),
                window_class: candidate.window_class,
                plugin_focused,
                chord: key.chord,
            });
            return;
        }
        let mut window = drive.window.clone().unwrap_or_default();
        if window.title.is_none() {
            window.title = candidate.window_title.clone();
        }
        self.injections.start(InjectionJob {
            drive_id: drive_id.to_string(),
            interface: candidate.interface,
            window,
            extra_pids: drive.extra_pids.clone(),
            text: drive.prompt.clone(),
            submit: drive.options.submit,
            paste_chord: candidate.paste_chord,
            submit_chord: candidate.submit_chord,
            paste_chord_by_class: candidate.paste_chord_by_class,
            window_class: candidate.window_class,
        });
    }

    fn on_injection_finished(&mut self, outcome: InjectionOutcome) {
        let now = self.clock.now_ms();
        if self.injecting.as_deref() == Some(outcome.drive_id.as_str()) {
            self.injecting = None;
        }
        while self.injecting.is_none() {
            let Some(next) = self.injection_waiting.pop_front() else {
                break;
            };
            if self.drives.get(&next).is_some_and(|d| !d.is_terminal()) {
                self.start_injection(&next);
            }
        }
        let drive_id = outcome.drive_id.clone();
        let Some(drive) = self.drives.get_mut(&drive_id) else {
            return;
        };
        if drive.is_terminal() {
            tracing::warn!(drive_id = %drive_id, reached = ?outcome.reached, "an injection finished after its drive had ended");
            return;
        }
        if drive
            .current
            .as_ref()
            .is_some_and(|c| c.route != Route::OsInjection)
        {
            self.on_submit_key_pressed(outcome, now);
            return;
        }
        for (reached, state) in [
            (Reached::Focused, DriveState::Focused),
            (Reached::Pasted, DriveState::Pasted),
            (Reached::Submitted, DriveState::Submitted),
        ] {
            if outcome.reached >= reached {
                drive.advance_to(state, now);
            }
        }
        match outcome.error {
            None => {
                tracing::info!(drive_id = %drive_id, "delivered by OS injection (unverified until observed)");
                self.finish_unverified(&drive_id, now);
            }
            Some(blocker) => self.route_failed(&drive_id, blocker, now),
        }
    }

    /// Ends a drive the daemon's own keys delivered (OS injection, or a plugin route's
    /// submit key) as `done`, `unverified`: nothing inside the IDE confirmed it.
    fn finish_unverified(&mut self, drive_id: &str, now: u64) {
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        drive.verification = Verification::Unverified;
        drive.end_attempt(AttemptOutcome::Succeeded, None, None, now);
        let session_id = drive.session_id.clone();
        drive.finish(DriveState::Done, None, now);
        self.release(&session_id, drive_id);
        self.publish_drive(drive_id);
        self.pump(&session_id, now);
    }

    /// The daemon's submit key press for a plugin route that pasted has ended: `submitted`
    /// (evidence `key_pressed`, then `done`), or failed at `pasted` without another route.
    fn on_submit_key_pressed(&mut self, outcome: InjectionOutcome, now: u64) {
        let drive_id = outcome.drive_id;
        let Some(drive) = self.drives.get_mut(&drive_id) else {
            return;
        };
        match outcome.error {
            None if outcome.reached == Reached::Submitted => {
                drive.advance_to(DriveState::Submitted, now);
                drive.submit_evidence = Some(koru_protocol::SubmitEvidence::KeyPressed);
                tracing::info!(drive_id = %drive_id, "submitted by the daemon's key press into the plugin's focused window");
                self.finish_unverified(&drive_id, now);
            }
            error => {
                let blocker = error.unwrap_or_else(|| {
                    Blocker::new(
                        "injector_failed",
                        "the submit key press ended without pressing the key",
                    )
                });
                self.route_failed(&drive_id, blocker, now);
            }
        }
    }

    /// The current route failed: fall back to the next one unless the prompt may already
    /// be in the chat (then never: no duplicate prompts).
    fn route_failed(&mut self, drive_id: &str, blocker: Blocker, now: u64) {
        let hint = self.hint_for(drive_id, &blocker);
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        let may_have_delivered = drive.may_have_delivered();
        drive.end_attempt(AttemptOutcome::Failed, Some(blocker.clone()), hint, now);
        tracing::info!(drive_id, blocker = %blocker.code, detail = %blocker.detail, may_have_delivered, "route failed");
        // The route reported its own failure: nothing to cancel on the plugin's side.
        drive.current = None;
        drive.step_deadline_ms = None;
        if may_have_delivered {
            drive.abandon_rest();
            let blocker = Blocker::new(
                &blocker.code,
                format!(
                    "{} (the prompt may already be in the chat input, so no other route is tried)",
                    blocker.detail
                ),
            );
            self.finish_drive(drive_id, DriveState::Failed, Some(blocker), now);
            return;
        }
        // Some blockers are about the chat or the desktop, not the route: another route
        // would meet them too.
        if matches!(
            blocker.code.as_str(),
            "chat_busy" | "timeout" | "screen_locked" | "chat_refused" | "chat_not_ready"
        ) {
            drive.abandon_rest();
            self.finish_drive(drive_id, DriveState::Failed, Some(blocker), now);
            return;
        }
        self.publish_drive(drive_id);
        self.start_next_route(drive_id, now);
    }

    /// The registry's recovery hint for a chat that is not ready (on the VS Code-family
    /// plugin interface).
    fn chat_not_ready_hint(&self) -> Option<String> {
        self.registry
            .interfaces()
            .iter()
            .flat_map(|i| i.recovery_for(koru_registry::BlockerCode::ChatNotReady))
            .next()
            .map(|r| format!("{}: {}", r.label, r.does))
    }

    /// The registry's recovery hint for a blocker on the drive's current route.
    fn hint_for(&self, drive_id: &str, blocker: &Blocker) -> Option<String> {
        let interface = self
            .drives
            .get(drive_id)?
            .current
            .as_ref()?
            .interface
            .clone();
        let code: koru_registry::BlockerCode =
            serde_json::from_value(serde_json::Value::String(blocker.code.clone())).ok()?;
        self.registry
            .get(&interface)?
            .recovery_for(code)
            .first()
            .map(|r| format!("{}: {}", r.label, r.does))
    }

    fn on_drive_cancel(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        drive_id: &str,
        now: u64,
    ) {
        let Some(drive) = self.drives.get(drive_id) else {
            self.send_error(conn_id, id, unknown_drive(drive_id));
            return;
        };
        if drive.is_terminal() {
            let message = format!(
                "drive {drive_id} already ended as {}; nothing to cancel",
                drive.state
            );
            self.send_error(
                conn_id,
                id,
                ErrorMessage::new(ErrorCode::DriveFinished, message),
            );
            return;
        }
        self.finish_drive(
            drive_id,
            DriveState::Cancelled,
            Some(Blocker::new(
                "cancelled",
                "cancelled at a controller's request",
            )),
            now,
        );
        let reply = drive_result(self.drives.get(drive_id).expect("checked above"));
        self.send(conn_id, Envelope::with_id(id, reply));
    }

    fn on_ack(&mut self, conn_id: ConnId, session_id: &str, ack: koru_protocol::Ack, now: u64) {
        let owned = self.drives.get(&ack.drive_id).is_some_and(|d| {
            d.session_id == session_id
                && d.current
                    .as_ref()
                    .is_some_and(|c| c.route != Route::OsInjection)
        });
        if !owned {
            self.send_error(
                conn_id,
                None,
                ErrorMessage::new(
                    ErrorCode::UnknownDrive,
                    format!(
                        "ack for drive {} which this session was not given",
                        ack.drive_id
                    ),
                ),
            );
            return;
        }
        let drive = self.drives.get_mut(&ack.drive_id).expect("checked above");
        let mut chat_became_busy = false;
        if ack.stage == koru_protocol::AckStage::Submitted && !drive.is_terminal() {
            // A plugin that gives no evidence has proven only that its step returned.
            let evidence = ack
                .evidence
                .unwrap_or(koru_protocol::SubmitEvidence::CommandReturned);
            drive.submit_evidence = Some(evidence);
            if evidence == koru_protocol::SubmitEvidence::ChatRunning {
                // The chat is answering: the window's next drives wait for its outcome.
                if let Some(session) = self.sessions.get_mut(session_id) {
                    chat_became_busy = session.chat != ChatState::Busy;
                    session.chat = ChatState::Busy;
                    session.chat_running_since_ms = Some(now);
                }
            }
        }
        let drive = self.drives.get_mut(&ack.drive_id).expect("checked above");
        let outcome = drive.apply_ack(ack.stage, ack.blocker, now);
        drive.step_deadline_ms = None;
        match outcome {
            AckOutcome::Ignored => {
                tracing::debug!(drive_id = %ack.drive_id, stage = ?ack.stage, "ack ignored: drive ended or stage already passed");
            }
            AckOutcome::Advanced
                if drive.state == DriveState::Pasted
                    && drive
                        .current
                        .as_ref()
                        .is_some_and(|c| c.submit_key.is_some()) =>
            {
                // The plugin's steps are done; the route's submit key is the daemon's own
                // step, bounded by the drive's deadline.
                tracing::info!(drive_id = %ack.drive_id, "pasted; the daemon presses the route's submit key");
                self.publish_drive(&ack.drive_id);
                self.use_keyboard(&ack.drive_id);
            }
            AckOutcome::Advanced => {
                drive.step_deadline_ms = Some(now + self.config.step_timeout_ms);
                self.publish_drive(&ack.drive_id)
            }
            AckOutcome::Finished => {
                drive.verification = Verification::Acked;
                drive.end_attempt(AttemptOutcome::Succeeded, None, None, now);
                tracing::info!(drive_id = %ack.drive_id, state = %drive.state, "drive finished");
                self.release(session_id, &ack.drive_id);
                self.publish_drive(&ack.drive_id);
                if chat_became_busy {
                    // Subscribers (the dashboard) see the chat answering, as after chat_busy.
                    if let Some(session) = self.sessions.get(session_id) {
                        let info = session.info();
                        self.publish(StreamEvent::SessionUpdated { session: info });
                    }
                }
                self.pump(session_id, now);
            }
            AckOutcome::StepFailed(blocker) => self.route_failed(&ack.drive_id, blocker, now),
        }
    }

    fn on_disconnected(&mut self, conn_id: ConnId, reason: &str) {
        let now = self.clock.now_ms();
        let Some(connection) = self.connections.remove(&conn_id) else {
            return;
        };
        let Some(session_id) = connection.session_id else {
            tracing::debug!(conn_id, reason, "connection closed before hello");
            return;
        };
        self.session_conn.remove(&session_id);
        let Some(session) = self.sessions.remove(&session_id) else {
            return;
        };
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
        self.publish(StreamEvent::SessionDisconnected {
            session_id,
            reason: reason.to_string(),
        });
    }

    fn on_tick(&mut self) {
        let now = self.clock.now_ms();
        for drive_id in self.drives.step_overdue(now) {
            let Some(drive) = self.drives.get_mut(&drive_id) else {
                continue;
            };
            drive.step_deadline_ms = None;
            // The step may have run: no other route is tried.
            let detail = format!(
                "the plugin acked nothing for {} ms after `{}`; the step may have run, so no other route is tried",
                self.config.step_timeout_ms, drive.state
            );
            self.finish_drive(
                &drive_id,
                DriveState::TimedOut,
                Some(Blocker::new(blocker::TIMEOUT, detail)),
                now,
            );
        }
        for drive_id in self.drives.overdue(now) {
            let Some(drive) = self.drives.get(&drive_id) else {
                continue;
            };
            if let Some(waiting) = drive
                .waiting
                .as_ref()
                .filter(|w| w.code == blocker::CHAT_NOT_READY && drive.state == DriveState::Queued)
            {
                // Never sent: the chat would have refused it. Say why and what to do.
                let hint = self.chat_not_ready_hint();
                let reason = self
                    .sessions
                    .get(&drive.session_id)
                    .and_then(|s| s.chat_readiness.as_ref())
                    .and_then(|r| r.reason.clone())
                    .unwrap_or_else(|| waiting.detail.clone());
                let detail = format!(
                    "the prompt was never sent: the window's chat was not ready for {} ms ({reason}){}",
                    drive.deadline_ms.saturating_sub(drive.created_at_ms),
                    hint.map(|h| format!(". {h}")).unwrap_or_default()
                );
                self.finish_drive(
                    &drive_id,
                    DriveState::Failed,
                    Some(Blocker::new(blocker::CHAT_NOT_READY, detail)),
                    now,
                );
                continue;
            }
            let detail = match (&drive.waiting, drive.state) {
                // Never sent: say what it waited for, not that an ack is missing.
                (Some(waiting), DriveState::Queued) => format!(
                    "not sent within {} ms: it {}",
                    drive.deadline_ms.saturating_sub(drive.created_at_ms),
                    waiting.detail
                ),
                _ => format!(
                    "no terminal ack within {} ms (last state: {})",
                    drive.deadline_ms.saturating_sub(drive.created_at_ms),
                    drive.state
                ),
            };
            self.finish_drive(
                &drive_id,
                DriveState::TimedOut,
                Some(Blocker::new(blocker::TIMEOUT, detail)),
                now,
            );
        }
        // A chat answering past the bound with no outcome from its plugin stops holding
        // the window's drives (checked here too, so waiting drives go without another event).
        let stuck: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| {
                s.chat_running_since_ms
                    .is_some_and(|since| now.saturating_sub(since) >= CHAT_RUNNING_BUSY_MS)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for session_id in stuck {
            self.pump(&session_id, now);
        }
        self.heartbeat(now);
    }

    fn heartbeat(&mut self, now: u64) {
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

    /// Whether an observed chat in one of the session's workspace folders is replying or
    /// waiting for input (seen active within `OBSERVED_BUSY_MS`, so a chat whose end was
    /// never recorded cannot hold drives back for ever).
    fn observed_busy(&self, session_id: &str, now: u64) -> Option<String> {
        use koru_protocol::ObservedChatState;
        let session = self.sessions.get(session_id)?;
        let folders = &session.window.workspace_folders;
        self.chats
            .values()
            .filter(|c| {
                matches!(
                    c.state,
                    ObservedChatState::Replying | ObservedChatState::NeedsInput
                )
            })
            .filter(|c| now.saturating_sub(c.last_activity_ms) < OBSERVED_BUSY_MS)
            .find(|c| {
                c.workspace.as_ref().is_some_and(|w| {
                    folders
                        .iter()
                        .any(|f| std::path::Path::new(w).starts_with(f))
                })
            })
            .map(|c| c.chat_id.clone())
    }

    /// Sends the next queued drive of a session when it has none running, and otherwise
    /// records on each waiting drive why it waits.
    fn pump(&mut self, session_id: &str, now: u64) {
        let observed_busy = self.observed_busy(session_id, now);
        let Some(session) = self.sessions.get_mut(session_id) else {
            return;
        };
        if session
            .chat_running_since_ms
            .is_some_and(|since| now.saturating_sub(since) >= CHAT_RUNNING_BUSY_MS)
        {
            // The plugin never reported how the chat's answer ended: do not hold the
            // window's drives for ever.
            tracing::warn!(
                session_id,
                "no chat outcome for {} ms after a running answer; the chat counts as idle again",
                CHAT_RUNNING_BUSY_MS
            );
            session.chat = ChatState::Idle;
            session.chat_running_since_ms = None;
            let info = session.info();
            self.publish(StreamEvent::SessionUpdated { session: info });
        }
        let Some(session) = self.sessions.get_mut(session_id) else {
            return;
        };
        // One drive at a time per chat, none while the chat is busy (by the plugin's word
        // or by its history store), and none into a chat its plugin says cannot take one.
        let waiting = if let Some(running) = &session.active_drive {
            Some(Blocker::new(
                "drive_running",
                format!("waits for drive {running} in the same window to end"),
            ))
        } else if session.chat == ChatState::Busy {
            Some(Blocker::new(
                blocker::CHAT_BUSY,
                "waits: the chat is answering or waiting for the user (the plugin says)",
            ))
        } else if let Some(chat) = &observed_busy {
            Some(Blocker::new(
                blocker::CHAT_BUSY,
                format!(
                    "waits: chat {chat} is replying or waiting for input (its history store says)"
                ),
            ))
        } else {
            match &session.chat_readiness {
                Some(readiness) if !readiness.ready => Some(Blocker::new(
                    blocker::CHAT_NOT_READY,
                    format!(
                        "waits: the window's chat cannot take a request now ({})",
                        readiness
                            .reason
                            .as_deref()
                            .unwrap_or("its plugin gave no reason")
                    ),
                )),
                _ => None,
            }
        };
        if let Some(waiting) = waiting {
            let queued: Vec<String> = session.queued_drives.iter().cloned().collect();
            for drive_id in queued {
                let Some(drive) = self.drives.get_mut(&drive_id) else {
                    continue;
                };
                if drive.waiting.as_ref() != Some(&waiting) {
                    tracing::debug!(drive_id, reason = %waiting.detail, "drive waits");
                    drive.waiting = Some(waiting.clone());
                    self.publish_drive(&drive_id);
                }
            }
            return;
        }
        let Some(drive_id) = session.queued_drives.pop_front() else {
            return;
        };
        session.active_drive = Some(drive_id.clone());
        if let Some(drive) = self.drives.get_mut(&drive_id) {
            drive.waiting = None;
        }
        self.start_next_route(&drive_id, now);
    }

    /// What the chat did with a drive's request after the plugin acked `submitted`, as the
    /// chat told the plugin: carried onto the drive's `observation` (merged with what the
    /// chat-store observers see, each fact published once) and onto the chat's state.
    fn on_chat_outcome(
        &mut self,
        session_id: &str,
        drive_id: &str,
        outcome: koru_protocol::ChatOutcome,
        now: u64,
    ) {
        use koru_protocol::{ChatOutcome, DriveObservation, ObservationBasis, ObservedStage};
        let Some(drive) = self.drives.get_mut(drive_id) else {
            tracing::debug!(session_id, drive_id, "chat outcome for an unknown drive");
            return;
        };
        if drive.session_id != session_id || drive.submit_evidence.is_none() {
            tracing::warn!(
                session_id,
                drive_id,
                "chat outcome for a drive this session did not submit; ignored"
            );
            return;
        }
        let (stage, excerpt, length, detail) = match outcome {
            ChatOutcome::ReplyCompleted { excerpt, length } => {
                (ObservedStage::Replied, excerpt, length, None)
            }
            ChatOutcome::NeedsInput { input, detail } => (
                ObservedStage::NeedsInput,
                None,
                None,
                Some(detail.unwrap_or_else(|| {
                    format!("the chat waits for the user ({input:?})").to_lowercase()
                })),
            ),
            ChatOutcome::Failed { detail } => (ObservedStage::Failed, None, None, Some(detail)),
            ChatOutcome::Cancelled => (ObservedStage::Cancelled, None, None, None),
            ChatOutcome::Unknown => return,
        };
        let changed = match drive.observation.as_mut() {
            None => {
                drive.observation = Some(DriveObservation {
                    store: PLUGIN_OBSERVATION_STORE.into(),
                    chat_id: session_id.to_string(),
                    stage,
                    basis: ObservationBasis::Explicit,
                    at_ms: now,
                    reply_excerpt: excerpt,
                    reply_length: length,
                    detail,
                });
                true
            }
            Some(found) => merge_observation(found, stage, excerpt, length, detail, now),
        };
        if let Some(session) = self.sessions.get_mut(session_id) {
            session.chat = if stage == ObservedStage::NeedsInput {
                ChatState::Busy
            } else {
                ChatState::Idle
            };
            // A chat waiting for the user is busy until its next outcome, bounded like a
            // running answer: the plugin cannot see the user answer in the chat.
            session.chat_running_since_ms = (stage == ObservedStage::NeedsInput).then_some(now);
        }
        if changed {
            tracing::info!(drive_id, stage = ?stage, "the chat reported the drive's outcome through the plugin");
            self.publish_drive(drive_id);
        }
        if let Some(session) = self.sessions.get(session_id) {
            let info = session.info();
            self.publish(StreamEvent::SessionUpdated { session: info });
        }
        self.pump(session_id, now);
    }

    /// Frees the session of a drive that ended.
    fn release(&mut self, session_id: &str, drive_id: &str) {
        if let Some(session) = self.sessions.get_mut(session_id) {
            if session.active_drive.as_deref() == Some(drive_id) {
                session.active_drive = None;
            }
            session.queued_drives.retain(|queued| queued != drive_id);
        }
    }

    /// Ends a drive from the daemon's side (cancel, timeout, shutdown) and tells its plugin.
    fn finish_drive(
        &mut self,
        drive_id: &str,
        state: DriveState,
        blocker: Option<Blocker>,
        now: u64,
    ) {
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        if drive.is_terminal() {
            return;
        }
        // Only a plugin that was given the drive needs telling.
        let plugin_has_it = drive.state != DriveState::Queued
            && drive
                .current
                .as_ref()
                .is_some_and(|c| c.route != Route::OsInjection);
        let reason = blocker
            .as_ref()
            .map(|b| b.code.clone())
            .unwrap_or_else(|| state.to_string());
        drive.end_attempt(AttemptOutcome::Failed, blocker.clone(), None, now);
        drive.abandon_rest();
        drive.finish(state, blocker, now);
        let session_id = drive.session_id.clone();
        tracing::info!(drive_id, state = %state, reason = %reason, "drive ended by the daemon");
        if plugin_has_it {
            if let Some(conn_id) = self.session_conn.get(&session_id).copied() {
                self.send(
                    conn_id,
                    Envelope::new(Message::Cancel(DriveCancelNotice {
                        drive_id: drive_id.to_string(),
                        reason,
                    })),
                );
            }
        }
        self.release(&session_id, drive_id);
        self.publish_drive(drive_id);
        self.pump(&session_id, now);
    }

    fn status(&self) -> StatusInfo {
        let plugins = self
            .sessions
            .values()
            .filter(|s| s.role == Role::Plugin)
            .count();
        StatusInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: self.config.daemon_pid,
            socket: self.config.socket_display.clone(),
            protocol: VersionRange {
                min: koru_protocol::MIN_PROTOCOL_VERSION,
                max: koru_protocol::PROTOCOL_VERSION,
            },
            started_at_ms: self.started_at_ms,
            plugins,
            controllers: self.sessions.len() - plugins,
            drives_active: self.drives.active_count(),
            drives_total: self.drives.total_created(),
            registry: self.registry_status.clone(),
            refused_handshakes: self.refused_handshakes.iter().cloned().collect(),
            http: self.config.http.clone(),
            observers: self.observers.clone(),
            observing: self.config.observing,
        }
    }

    fn publish_drive(&mut self, drive_id: &str) {
        if let Some(drive) = self.drives.get(drive_id) {
            let drive = drive.info();
            self.publish(StreamEvent::DriveUpdated { drive });
        }
    }

    fn publish(&mut self, event: StreamEvent) {
        self.stream_seq += 1;
        let subscribers: Vec<ConnId> = self
            .connections
            .iter()
            .filter(|(_, c)| c.subscribed)
            .map(|(id, _)| *id)
            .collect();
        if subscribers.is_empty() {
            return;
        }
        let line = Envelope::new(Message::Stream(StreamItem {
            seq: self.stream_seq,
            event,
        }));
        for conn_id in subscribers {
            self.send(conn_id, line.clone());
        }
    }

    fn send_error(&mut self, conn_id: ConnId, id: Option<RequestId>, error: ErrorMessage) {
        self.send(
            conn_id,
            Envelope::new(Message::Error(error.with_reference(id))),
        );
    }

    /// Queues a line for a connection; a full queue means the peer stopped reading, and
    /// it is disconnected rather than allowed to hold anyone else up.
    fn send(&mut self, conn_id: ConnId, envelope: Envelope) {
        let Some(connection) = self.connections.get(&conn_id) else {
            return;
        };
        match connection.handle.outbound.try_send(envelope) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    conn_id,
                    session_id = ?connection.session_id,
                    "disconnecting a slow reader: its outbound queue is full"
                );
                connection.handle.close.cancel();
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

fn registry_status(loaded: &koru_registry::Loaded) -> RegistryStatus {
    RegistryStatus {
        interfaces: loaded.registry.interfaces().len(),
        layers: loaded
            .registry
            .layers
            .iter()
            .filter(|l| l.applied)
            .map(|l| match l.layer {
                koru_registry::Layer::BuiltIn => "built-in".to_string(),
                layer => format!("{}: {}", layer.as_str(), l.file),
            })
            .collect(),
        diagnostics: loaded.diagnostics.iter().map(|d| d.to_string()).collect(),
    }
}

/// A window target must name a pid or a valid title pattern.
fn check_window_target(window: &koru_protocol::WindowTarget) -> Result<(), ErrorMessage> {
    let location = |field: &str| Location {
        field: Some(field.to_string()),
        ..Location::default()
    };
    if window.pid.is_none() && window.title.is_none() {
        return Err(ErrorMessage::new(
            ErrorCode::InvalidMessage,
            "a window target needs a pid or a title pattern",
        )
        .with_location(location("target.window")));
    }
    if window.pid == Some(0) {
        return Err(
            ErrorMessage::new(ErrorCode::InvalidMessage, "pid 0 is not a process")
                .with_location(location("target.window.pid")),
        );
    }
    if let Some(title) = &window.title {
        if let Err(err) = regex::Regex::new(title) {
            return Err(ErrorMessage::new(
                ErrorCode::InvalidMessage,
                format!("the window title pattern is not a valid regular expression: {err}"),
            )
            .with_location(location("target.window.title")));
        }
    }
    Ok(())
}

/// The disconnect reason used when a plugin stops answering heartbeats.
pub const HEARTBEAT_REASON: &str = "missed heartbeats";

fn drive_result(drive: &DriveRecord) -> Message {
    Message::DriveResult(DriveResult {
        drive: drive.info(),
    })
}

fn unknown_drive(drive_id: &str) -> ErrorMessage {
    ErrorMessage::new(
        ErrorCode::UnknownDrive,
        format!("no drive {drive_id} (ids look like d_…; `koru drives` lists recent ones)"),
    )
}

fn new_id(prefix: &str) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &hex[..12])
}

#[cfg(test)]
mod tests;

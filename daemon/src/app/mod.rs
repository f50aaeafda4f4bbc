//! The daemon's single state machine: every connection feeds it through one closed [`DaemonEvent`] enum, and it alone owns sessions, drives and subscriptions.
//!
//! Connection tasks (in `server/`) do the byte work: framing, decoding, the handshake's
//! checks, role checks. What reaches [`App::handle`] is already a valid message from a
//! greeted peer, so this module is plain synchronous logic that unit tests drive with a
//! manual clock and in-memory channels.
//!
//! One `App`, its `impl` split by concern: `mod.rs` (the event dispatch, status, publishing,
//! the registry, ticks), `requests.rs` (a greeted peer's requests), `session_events.rs`
//! (welcome, activity, heartbeats, disconnects), `delivery.rs` (the drive lifecycle and the
//! fallback chain's effects), `chats.rs` (observations and correlation), `recovery.rs`
//! (recovery actions); records in `sessions.rs` and `drives.rs`.

mod agent_drives;
mod audits;
mod chat_table;
mod chats;
mod conversations;
mod delivery;
pub mod drive_news;
pub mod drives;
mod evidence;
pub mod journaling;
pub mod recovery;
mod requests;
mod session_events;
pub mod sessions;
mod terminals;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use koru_protocol::{
    blocker, Blocker, Bye, DriveState, Envelope, ErrorMessage, Hello, Message, RefusedHandshake,
    RegistryStatus, RequestId, Role, StatusInfo, StreamEvent, StreamItem, VersionRange,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::drive::inject::{InjectionOutcome, InjectionRunner};
use crate::observe::announced::{NoSessionStoreRoots, SessionStoreRoots};
use chats::CHAT_RUNNING_BUSY_MS;
use drives::DriveTable;
use recovery::{DriveOrigin, RecoveryDone, RecoveryRunner, RecoveryTicket};
use sessions::SessionRecord;

/// Identifies one accepted connection for the daemon's lifetime.
pub type ConnId = u64;

/// How the state machine talks back to one connection.
#[derive(Debug, Clone)]
pub struct ConnectionHandle {
    /// Lines as the wire carries them ([`encode`]). Bounded: when it is full the peer is not
    /// reading and gets disconnected. A queue slot is a shared buffer, not a message: an
    /// idle connection's queue stays small, and a line published to many peers is
    /// encoded once.
    pub outbound: mpsc::Sender<Bytes>,
    /// Cancelled to close the connection after what is queued has been written.
    pub close: CancellationToken,
}

/// A line a connection has read and the state machine has not handled yet: it counts
/// against the connection's `max_in_flight` until it is dropped (after it was handled).
#[derive(Debug)]
pub struct InFlight(Option<Arc<AtomicUsize>>);

impl InFlight {
    /// Counts one more line in `counter`.
    pub fn count(counter: &Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::AcqRel);
        InFlight(Some(counter.clone()))
    }

    /// A line no connection counts (tests that hand the state machine events directly).
    pub fn untracked() -> InFlight {
        InFlight(None)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(counter) = &self.0 {
            counter.fetch_sub(1, Ordering::AcqRel);
        }
    }
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
        /// Counts against the connection's lines in flight until the event is dropped.
        in_flight: InFlight,
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
        /// The store file they were read from (`None`: reported, e.g. by a hook).
        source: Option<std::path::PathBuf>,
    },
    /// Chats of store files the observers' summary cache vouched for at start-up, as
    /// they stood when each file was last read (history, not published), many files at a
    /// time.
    ChatsRestored {
        files: Vec<(Arc<std::path::Path>, Vec<koru_protocol::ChatInfo>)>,
        /// Files still to be restored after these (room made for their chats at once).
        more: usize,
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
    /// The HTTP or MCP face refused a request with `forbidden_role` (journaled as
    /// `access_refused`).
    AccessRefused {
        refusal: Box<crate::access::Refusal>,
    },
    /// A chat read back from its store for `chat.read` (`conversation::ChatReader`).
    ChatReadFinished {
        finished: Box<crate::conversation::ChatReadFinished>,
    },
    /// An audit for `chat.audit` finished (`audit::AuditRunner`).
    AuditFinished {
        finished: Box<crate::audit::AuditFinished>,
    },
    /// A look for terminal agents came back (`terminal::TerminalLooker`).
    TerminalLook {
        finished: Box<crate::terminal::LookFinished>,
    },
    /// The typist finished an order for a terminal drive (`terminal::typist`).
    TerminalTyped {
        typed: Box<crate::terminal::typist::Typed>,
    },
    /// The typist asks to read or write an IDE window's terminal (through its plugin).
    IdeTerminalIo {
        request: Box<crate::terminal::typist::IdeTerminalRequest>,
    },
    /// An OS injection asks a window's plugin to read or write the system clipboard.
    PluginClipboard {
        request: Box<crate::drive::portal::PluginClipboardRequest>,
    },
    /// Periodic: heartbeats and deadlines.
    Tick,
}

pub use koru_protocol::PLUGIN_OBSERVATION_STORE;

/// How many refused handshakes the daemon remembers.
const REFUSED_HANDSHAKES_KEPT: usize = 20;
/// The state machine's tick while nothing waits on a deadline ([`App::tick_every`]).
pub const IDLE_TICK: std::time::Duration = std::time::Duration::from_secs(1);

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
    /// Drives one session may hold that have not ended; past it `queue_full`.
    pub max_queued_drives: usize,
    /// Prompt bytes of queued (not yet sent) drives over all sessions; past it `queue_full`.
    pub max_pending_prompt_bytes: usize,
    pub daemon_pid: u32,
    /// The HTTP endpoint, for `status`.
    pub http: Option<koru_protocol::HttpStatus>,
    /// Whether the chat-store observers run, for `status`.
    pub observing: bool,
    /// Whether drives' chats are read back for their evidence (`app/evidence.rs`).
    pub drive_evidence: bool,
}

#[derive(Debug)]
struct Connection {
    handle: ConnectionHandle,
    peer: PeerInfo,
    session_id: Option<String>,
}

impl Connection {
    /// Says `bye` with `reason` (if the queue has room) and closes the connection.
    fn say_bye_and_close(&self, reason: &str) {
        let _ = self
            .handle
            .outbound
            .try_send(encode(&Envelope::new(Message::Bye(Bye {
                reason: Some(reason.into()),
            }))));
        self.handle.close.cancel();
    }
}

/// An envelope as the line the wire carries, its newline included.
pub fn encode(envelope: &Envelope) -> Bytes {
    Bytes::from(koru_protocol::encode_line(envelope))
}

/// The daemon's state: connections, sessions, drives, subscribers.
pub struct App<C: Clock> {
    config: AppConfig,
    clock: C,
    started_at_ms: u64,
    connections: HashMap<ConnId, Connection>,
    /// The connections that asked for the event stream (`events.subscribe`), kept apart so
    /// an event costs nothing per connection that did not: with 10,000 plugin sessions,
    /// scanning every connection on each event made their arrival quadratic.
    subscribers: BTreeSet<ConnId>,
    /// Boxed, as drives are (see [`DriveTable`]): a record is half a kilobyte, and the
    /// table keeps room for up to twice the sessions it holds.
    sessions: HashMap<String, Box<SessionRecord>>,
    session_conn: HashMap<String, ConnId>,
    drives: DriveTable,
    /// Prompt bytes of the drives in every session's queue (not sent yet).
    queued_prompt_bytes: usize,
    stream_seq: u64,
    registry: Arc<koru_registry::Registry>,
    /// How many registries were applied since start: the sessions' remembered route plans
    /// are for one of them.
    registry_generation: u64,
    /// Route plans by the product and capabilities they were made for, reused by the next
    /// drives with the same options (`drive::planner::PlanMemory`).
    plan_memory: crate::drive::planner::PlanMemory,
    registry_status: RegistryStatus,
    refused_handshakes: VecDeque<RefusedHandshake>,
    injections: Box<dyn InjectionRunner>,
    recovery: Box<dyn RecoveryRunner>,
    /// The drive whose OS injection is running (keyboard input is global: one at a time).
    injecting: Option<String>,
    injection_waiting: VecDeque<String>,
    /// The chats the observers know, by store and chat id, each with the file it was
    /// last read from (`chat_table`).
    chats: chat_table::ChatTable,
    /// The drive last matched to each chat, whose observation the chat's next events update.
    chat_drive: HashMap<(String, String), String>,
    /// Chats whose last event was a completed reply: the same end reported again (the
    /// transcript's end record and the Stop hook) is not news.
    chat_completed: foldhash::HashSet<(String, String)>,
    /// Reads chats back from their stores, off the loop.
    chat_reader: Box<dyn crate::conversation::ChatReader>,
    /// `chat.read` requests waiting for their read, by ticket.
    chat_reads: HashMap<u64, conversations::PendingRead>,
    /// Reads of drives' chats for their evidence (`evidence`), by ticket (numbered with
    /// `chat_reads`).
    evidence_reads: HashMap<u64, evidence::PendingEvidence>,
    next_chat_read: u64,
    /// Runs `chat.audit`'s audits off the loop, and who waits for each, by ticket.
    auditor: Box<dyn crate::audit::AuditRunner>,
    audits: HashMap<u64, audits::PendingAudit>,
    next_audit: u64,
    /// Looks for terminal agents (`sessions.list` with `agents`) and who waits for them.
    terminal: terminals::TerminalLooks,
    /// The terminal agents of the last look and their drives.
    agent_table: agent_drives::AgentTable,
    /// Types prompts into terminal agents' panes, off the loop.
    typist: Box<dyn crate::terminal::typist::TerminalTypist>,
    /// Follows the event streams of terminal agents' own servers (opencode's).
    server_followers: Box<dyn crate::observe::stores::opencode::ServerFollowers>,
    /// Where each chat's terminal agent runs, as the agent's hook last said.
    chat_process: HashMap<(String, String), koru_protocol::AgentProcess>,
    /// The observers' store roots, as last reported.
    observers: Vec<koru_protocol::ObserverStatus>,
    /// Where plugin sessions' announced chat-store folders go (the watcher, or nowhere).
    session_store_roots: Box<dyn SessionStoreRoots>,
    /// The drive journal (`None`: `--no-journal`, and unit tests that do not ask for one).
    journal: Option<crate::journal::Journal>,
    /// Drives whose change waits for its `drive_state` entry until the next tick.
    journal_due: Vec<String>,
    /// Who hears about drives that need the person (the desktop notifier), if anyone.
    drive_watch: Option<mpsc::Sender<drive_news::WatchNews>>,
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
            subscribers: BTreeSet::new(),
            sessions: HashMap::new(),
            session_conn: HashMap::new(),
            drives,
            queued_prompt_bytes: 0,
            stream_seq: 0,
            registry: Arc::new(registry.registry),
            registry_status,
            registry_generation: 0,
            plan_memory: Default::default(),
            refused_handshakes: VecDeque::new(),
            injections,
            recovery,
            injecting: None,
            injection_waiting: VecDeque::new(),
            chats: chat_table::ChatTable::default(),
            chat_drive: HashMap::new(),
            chat_completed: foldhash::HashSet::default(),
            chat_reader: Box::new(crate::conversation::read::RecordingChatReader::default()),
            chat_reads: HashMap::new(),
            evidence_reads: HashMap::new(),
            next_chat_read: 1,
            auditor: Box::new(crate::audit::runner::RecordingAuditRunner::default()),
            audits: HashMap::new(),
            next_audit: 1,
            terminal: Default::default(),
            agent_table: Default::default(),
            typist: Box::new(crate::terminal::typist::RecordingTerminalTypist::default()),
            server_followers: Box::new(
                crate::observe::stores::opencode::RecordingServerFollowers::default(),
            ),
            chat_process: HashMap::new(),
            observers: Vec::new(),
            session_store_roots: Box::new(NoSessionStoreRoots),
            journal: None,
            journal_due: Vec::new(),
            drive_watch: None,
        }
    }

    /// Hands the chat-store folders plugin sessions announce (`window.storage`) to
    /// `roots` for as long as each session lasts (by default they are ignored).
    pub fn with_session_store_roots(mut self, roots: Box<dyn SessionStoreRoots>) -> Self {
        self.session_store_roots = roots;
        self
    }

    /// Reads chats back from their stores with `reader` (`chat.read`; by default reads are
    /// only recorded, for unit tests).
    pub fn with_chat_reader(mut self, reader: Box<dyn crate::conversation::ChatReader>) -> Self {
        self.chat_reader = reader;
        self
    }

    /// Runs `chat.audit`'s audits with `auditor` (by default they are only recorded, for
    /// unit tests).
    pub fn with_auditor(mut self, auditor: Box<dyn crate::audit::AuditRunner>) -> Self {
        self.auditor = auditor;
        self
    }

    /// Looks for terminal agents with `looker` when a `sessions.list` asks for them (by
    /// default none is looked for).
    pub fn with_terminal_looker(
        mut self,
        looker: Box<dyn crate::terminal::TerminalLooker>,
    ) -> Self {
        self.terminal.looker = Some(looker);
        self
    }

    /// Follows terminal agents' own servers with `followers` (by default the servers are
    /// only recorded, for tests).
    pub fn with_server_followers(
        mut self,
        followers: Box<dyn crate::observe::stores::opencode::ServerFollowers>,
    ) -> Self {
        self.server_followers = followers;
        self
    }

    /// Types drives' prompts into terminal agents with `typist` (by default orders are
    /// only recorded, for tests).
    pub fn with_terminal_typist(
        mut self,
        typist: Box<dyn crate::terminal::typist::TerminalTypist>,
    ) -> Self {
        self.typist = typist;
        self
    }

    /// The registry in use.
    pub fn registry(&self) -> &Arc<koru_registry::Registry> {
        &self.registry
    }

    /// Applies one event.
    pub fn handle(&mut self, event: DaemonEvent) {
        self.handle_unflushed(event);
        self.flush_journal();
    }

    /// What this event and those handled before it since the last flush journaled reaches
    /// the file: called before anything they queued for a peer can be written to a socket
    /// (the connection tasks run on this same thread, so not before the loop yields).
    pub fn flush_journal(&mut self) {
        if let Some(journal) = self.journal.as_mut() {
            let _ = journal.flush();
        }
    }

    /// [`App::handle`] without the journal's flush: the main loop handles the events that
    /// are already waiting one after the other and flushes once after them (a plugin's
    /// `received` and `submitted` acks often come in one read: one `write(2)`).
    pub fn handle_unflushed(&mut self, event: DaemonEvent) {
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
                    },
                );
            }
            DaemonEvent::Greeted {
                conn_id,
                hello,
                hello_id,
                protocol,
            } => self.on_greeted(conn_id, *hello, hello_id, protocol),
            DaemonEvent::Received {
                conn_id, envelope, ..
            } => self.on_received(conn_id, *envelope),
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
            DaemonEvent::AccessRefused { refusal } => self.on_access_refused(*refusal),
            DaemonEvent::Tick => self.on_tick(),
            DaemonEvent::Observed {
                events,
                replay,
                source,
            } => self.on_observed(events, replay, source),
            DaemonEvent::ChatsRestored { files, more } => self.on_chats_restored(files, more),
            DaemonEvent::ChatReadFinished { finished } => self.on_chat_read_finished(*finished),
            DaemonEvent::AuditFinished { finished } => self.on_audit_finished(*finished),
            DaemonEvent::TerminalLook { finished } => self.on_terminal_look(*finished),
            DaemonEvent::TerminalTyped { typed } => self.on_typed(*typed),
            DaemonEvent::IdeTerminalIo { request } => self.on_ide_terminal_request(*request),
            DaemonEvent::PluginClipboard { request } => self.on_plugin_clipboard_request(*request),
            DaemonEvent::ObserverHealth { observers } => self.observers = observers,
        }
    }

    /// Records a refusal of the HTTP or MCP face in the journal: the door, the token, the
    /// role it held and needed, and what it asked for.
    fn on_access_refused(&mut self, refusal: crate::access::Refusal) {
        let mut fields = serde_json::Map::new();
        fields.insert("door".into(), refusal.door.into());
        fields.insert("token_id".into(), refusal.token_id.clone().into());
        if let Some(name) = &refusal.token_name {
            fields.insert("token_name".into(), name.clone().into());
        }
        fields.insert("held".into(), refusal.held.as_str().into());
        fields.insert("needed".into(), refusal.needed.as_str().into());
        fields.insert("asked".into(), refusal.asked.clone().into());
        let by = crate::journal::Asker {
            door: refusal.door.to_string(),
            client: refusal.token_id,
            version: env!("CARGO_PKG_VERSION").into(),
            pid: None,
            uid: nix::unistd::getuid().as_raw(),
        };
        self.journal_event(crate::journal::KIND_ACCESS_REFUSED, fields, Some(by));
    }

    /// Applies a reloaded registry when it is clean; otherwise keeps the last good one and
    /// reports the problems.
    fn on_registry_changed(&mut self, loaded: koru_registry::Loaded) {
        let diagnostics: Vec<String> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
        let applied = diagnostics.is_empty();
        if applied {
            self.registry_status = registry_status(&loaded);
            self.registry = Arc::new(loaded.registry);
            self.registry_generation += 1;
            tracing::info!(
                interfaces = self.registry.interfaces().len(),
                "registry applied"
            );
            self.tell_watch_policy();
        } else {
            for diagnostic in &diagnostics {
                tracing::warn!(%diagnostic, "registry problem; keeping the last good registry");
            }
            self.registry_status.diagnostics = diagnostics.clone();
        }
        let mut fields = serde_json::Map::new();
        fields.insert("applied".into(), applied.into());
        fields.insert("interfaces".into(), self.registry.interfaces().len().into());
        fields.insert("diagnostics".into(), diagnostics.clone().into());
        self.journal_event(crate::journal::KIND_REGISTRY_RELOADED, fields, None);
        self.publish(StreamEvent::RegistryReloaded {
            applied,
            interfaces: self.registry.interfaces().len(),
            diagnostics,
        });
        // The reload's parse trees and the replaced registry are freed by now.
        crate::memory::return_freed_heap_pages();
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
        self.close_journal("shutdown");
    }

    /// Number of live connections (greeted or not).
    pub fn connection_count(&self) -> usize {
        self.connections.len()
    }

    /// How long the state machine may sleep until its next tick: `fast` while anything
    /// waits on a deadline (a drive not ended, a drive entry due in the journal, an agent
    /// due a look, a chat answering with no outcome yet); else a quarter of the plugins'
    /// heartbeat while plugins are connected; else [`IDLE_TICK`]. An idle daemon wakes
    /// once a second, not ten times.
    pub fn tick_every(&self, fast: std::time::Duration) -> std::time::Duration {
        let waiting = !self.journal_due.is_empty()
            || self.drives.active_count() > 0
            || self.agent_table.agents.values().any(|r| {
                r.peek_due_ms.is_some() || r.active_drive.is_some() || !r.queued.is_empty()
            })
            || self
                .sessions
                .values()
                .any(|s| s.chat_running_since_ms.is_some());
        if waiting {
            return fast;
        }
        let mut every = IDLE_TICK;
        if self.sessions.values().any(|s| s.role == Role::Plugin) {
            every = every.min(std::time::Duration::from_millis(
                (self.config.heartbeat_ms / 4).max(1),
            ));
        }
        every.max(fast)
    }

    fn on_tick(&mut self) {
        let now = self.clock.now_ms();
        self.journal_due_drives(now);
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
        for drive_id in self.drives.resend_due(now) {
            self.resend_held(&drive_id, now);
        }
        self.agent_drives_due(now);
        self.agent_chat_records_due(now);
        for drive_id in self.drives.overdue(now) {
            let Some(drive) = self.drives.get(&drive_id) else {
                continue;
            };
            if drive.resend_at_ms.is_some() {
                // Held after the chat refused it as not ready: it ends with that refusal.
                let refusal = drive
                    .attempts
                    .iter()
                    .rev()
                    .find_map(|a| a.blocker.clone())
                    .unwrap_or_else(|| {
                        Blocker::new(blocker::CHAT_REFUSED, "the chat refused the prompt")
                    });
                let detail = format!(
                    "{} (the chat refused the prompt {} times before taking it, as not ready; the drive's deadline came before it was ready)",
                    refusal.detail, drive.resends
                );
                self.finish_drive(
                    &drive_id,
                    DriveState::Failed,
                    Some(Blocker::new(&refusal.code, detail)),
                    now,
                );
                continue;
            }
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
            let allowed = drive.deadline_ms.saturating_sub(drive.created_at_ms);
            let typed_into_agent = drive.agent.is_some();
            let detail = match (&drive.waiting, drive.state) {
                // Never sent: say what it waited for, not that an ack is missing.
                (Some(waiting), DriveState::Queued) => {
                    format!("not sent within {allowed} ms: it {}", waiting.detail)
                }
                // A terminal agent's screen kept the drive from being typed.
                (Some(waiting), DriveState::Sent) if typed_into_agent => {
                    format!("not typed within {allowed} ms: it {}", waiting.detail)
                }
                (_, DriveState::Pasted) if typed_into_agent => format!(
                    "typed, but the agent recorded no such prompt within the drive's {allowed} ms"
                ),
                _ => format!(
                    "no terminal ack within {allowed} ms (last state: {})",
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
            journal: self.journal.as_ref().map(|j| j.status()),
            portal: self.injections.portal_status(),
        }
    }

    fn publish(&mut self, event: StreamEvent) {
        self.stream_seq += 1;
        if self.subscribers.is_empty() {
            return;
        }
        let line = encode(&Envelope::new(Message::Stream(StreamItem {
            seq: self.stream_seq,
            event,
        })));
        for conn_id in &self.subscribers {
            queue_line(&self.connections, *conn_id, line.clone());
        }
    }

    fn send_error(&mut self, conn_id: ConnId, id: Option<RequestId>, error: ErrorMessage) {
        self.send(
            conn_id,
            Envelope::new(Message::Error(error.with_reference(id))),
        );
    }

    /// Queues an envelope for a connection (see [`App::send_line`]).
    fn send(&mut self, conn_id: ConnId, envelope: Envelope) {
        if self.connections.contains_key(&conn_id) {
            self.send_line(conn_id, encode(&envelope));
        }
    }

    /// Queues an encoded line for a connection; a full queue means the peer stopped
    /// reading, and it is disconnected rather than allowed to hold anyone else up.
    fn send_line(&mut self, conn_id: ConnId, line: Bytes) {
        queue_line(&self.connections, conn_id, line);
    }
}

/// [`App::send_line`] on the connection table alone (so [`App::publish`] can walk its
/// subscribers while it sends).
fn queue_line(connections: &HashMap<ConnId, Connection>, conn_id: ConnId, line: Bytes) {
    let Some(connection) = connections.get(&conn_id) else {
        return;
    };
    match connection.handle.outbound.try_send(line) {
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

/// The disconnect reason used when a plugin stops answering heartbeats.
pub const HEARTBEAT_REASON: &str = "missed heartbeats";

/// A new id: `prefix` and 12 hex digits (48 random bits). Drawn from a generator seeded
/// once per thread from the OS (ids are names, not secrets: one `getrandom` per id was a
/// system call on every drive).
fn new_id(prefix: &str) -> String {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut seed = [0u8; 8];
            // Without OS randomness, the clock and the pid still make ids unlikely to repeat.
            if getrandom::fill(&mut seed).is_err() {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                seed = (nanos ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
            }
            u64::from_le_bytes(seed)
        });
    }
    // splitmix64: every 64-bit state is visited once per 2^64 steps.
    let value = STATE.with(|state| {
        let next = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(next);
        let mut z = next;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    });
    format!("{prefix}{:012x}", value >> 16)
}

#[cfg(test)]
mod tests;

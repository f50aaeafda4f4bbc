//! `sessions.list` with terminal agents: the plugin sessions at once, or — when the request asks for `agents` — after a look for agents in the user's tmux panes done off the loop (`terminal::TerminalLooker`), each agent given the chat the observers know for its folder and that chat's state. One look serves every request that came while it ran.

use koru_protocol::{
    AgentChat, AgentState, Envelope, Message, ObservedChatState, RequestId, Role, SessionInfo,
    SessionsList, SessionsListResult, TerminalAgentInfo, TerminalPlace,
};

use crate::clock::Clock;
use crate::terminal::{LookFinished, PaneAgent};

use super::sessions::resolve_target;
use super::{App, ConnId};

/// A `sessions.list` waiting for the running look.
#[derive(Debug)]
pub(super) struct WaitingList {
    conn_id: ConnId,
    id: Option<RequestId>,
    filter: SessionsList,
}

/// The terminal-agent looks of the daemon: who waits, and the look running.
#[derive(Default)]
pub(super) struct TerminalLooks {
    pub(super) looker: Option<Box<dyn crate::terminal::TerminalLooker>>,
    waiting: Vec<WaitingList>,
    running: Option<u64>,
    next_ticket: u64,
    /// `terminal.io` orders sent to plugins and not answered yet: the connection, and where
    /// the answer goes (dropped with the connection: the typist then hears the window went).
    ide_orders: std::collections::HashMap<String, (ConnId, IdeReply)>,
    /// `clipboard` orders sent to plugins and not answered yet, alike.
    clipboard_orders: std::collections::HashMap<String, (ConnId, ClipboardReply)>,
    next_order: u64,
}

type IdeReply = std::sync::mpsc::Sender<Result<String, String>>;
type ClipboardReply = std::sync::mpsc::Sender<Result<Option<String>, String>>;

/// Hands a plugin's answer to whoever waits for order `order_id`, if `conn_id` is the
/// connection it was sent to (only the window asked may answer); an answer to no order is
/// dropped.
fn answer_order<T>(
    orders: &mut std::collections::HashMap<String, (ConnId, std::sync::mpsc::Sender<T>)>,
    conn_id: ConnId,
    order_id: String,
    answer: T,
) {
    match orders.remove(&order_id) {
        Some((asked, reply)) if asked == conn_id => {
            let _ = reply.send(answer);
        }
        Some(other) => {
            orders.insert(order_id, other);
        }
        None => tracing::debug!(%order_id, "an answer to no order"),
    }
}

/// A folder without its trailing slashes, for comparing.
pub(super) fn folder(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/"
    } else {
        trimmed
    }
}

impl<C: Clock> App<C> {
    /// The plugin sessions `filter` selects, oldest first.
    fn plugin_sessions(&self, filter: &SessionsList) -> Vec<SessionInfo> {
        let mut sessions: Vec<_> = self
            .sessions
            .values()
            .map(Box::as_ref)
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
        sessions
    }

    /// `sessions.list`: answered at once, or, with `agents`, when a look for terminal
    /// agents (started now, or already running) comes back.
    pub(super) fn on_sessions_list(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        filter: SessionsList,
    ) {
        if !filter.agents || self.terminal.looker.is_none() {
            let sessions = self.plugin_sessions(&filter);
            self.send(
                conn_id,
                Envelope::with_id(
                    id,
                    Message::SessionsListResult(SessionsListResult {
                        sessions,
                        agents: Vec::new(),
                    }),
                ),
            );
            return;
        }
        self.terminal.waiting.push(WaitingList {
            conn_id,
            id,
            filter,
        });
        self.start_look();
    }

    /// Starts a look for terminal agents unless one is running (its answer serves all).
    pub(super) fn start_look(&mut self) {
        if self.terminal.running.is_none() {
            self.terminal.next_ticket += 1;
            let ticket = self.terminal.next_ticket;
            self.terminal.running = Some(ticket);
            let ide_terminals = self.ide_terminals();
            if let Some(looker) = &self.terminal.looker {
                looker.start(ticket, ide_terminals);
            }
        }
    }

    /// A plugin's `terminals` report: the window's terminals now.
    pub(super) fn on_terminals_report(
        &mut self,
        session_id: &str,
        report: koru_protocol::TerminalsReport,
    ) {
        if let Some(session) = self.sessions.get_mut(session_id) {
            tracing::debug!(
                session_id,
                terminals = report.terminals.len(),
                "the window's terminals"
            );
            if session.terminals != report.terminals {
                session.terminals = report.terminals;
                let info = session.info();
                self.publish(koru_protocol::StreamEvent::SessionUpdated { session: info });
            }
        }
    }

    /// A plugin's capabilities changed (an extension installed or activated after its
    /// hello): the session's next drives are planned with the new ones.
    pub(super) fn on_capabilities_report(
        &mut self,
        session_id: &str,
        report: koru_protocol::CapabilitiesReport,
    ) {
        let Some(session) = self.sessions.get_mut(session_id) else {
            return;
        };
        if session.capabilities == report.capabilities {
            return;
        }
        tracing::info!(
            session_id,
            before = session.capabilities.len(),
            now = report.capabilities.len(),
            "the plugin's capabilities changed"
        );
        session.capabilities = report.capabilities;
        let info = session.info();
        self.publish(koru_protocol::StreamEvent::SessionUpdated { session: info });
    }

    /// The connection of a plugin session and a new order id for it, or why there is none.
    fn plugin_order(&mut self, session_id: &str) -> Result<(ConnId, String), String> {
        let conn_id = self.session_conn.get(session_id).copied().ok_or_else(|| {
            format!("the IDE window (session {session_id}) is no longer connected")
        })?;
        self.terminal.next_order += 1;
        Ok((conn_id, format!("o_{}", self.terminal.next_order)))
    }

    /// The typist asks to read or write an IDE terminal: sent to its window's plugin.
    pub(super) fn on_ide_terminal_request(
        &mut self,
        request: crate::terminal::typist::IdeTerminalRequest,
    ) {
        let crate::terminal::typist::IdeTerminalRequest {
            session_id,
            terminal_id,
            action,
            reply,
        } = request;
        let (conn_id, order_id) = match self.plugin_order(&session_id) {
            Ok(order) => order,
            Err(why) => {
                let _ = reply.send(Err(why));
                return;
            }
        };
        self.terminal
            .ide_orders
            .insert(order_id.clone(), (conn_id, reply));
        self.send(
            conn_id,
            Envelope::new(Message::TerminalIo(koru_protocol::TerminalIo {
                order_id,
                terminal_id,
                action,
            })),
        );
    }

    /// A plugin's answer to `terminal.io`.
    pub(super) fn on_terminal_io_result(
        &mut self,
        conn_id: ConnId,
        result: koru_protocol::TerminalIoResult,
    ) {
        let answer = match result.error {
            Some(error) => Err(error),
            None => Ok(result.screen.unwrap_or_default()),
        };
        answer_order(
            &mut self.terminal.ide_orders,
            conn_id,
            result.order_id,
            answer,
        );
    }

    /// A connection ended: its unanswered terminal and clipboard orders fail.
    pub(super) fn drop_ide_orders(&mut self, conn_id: ConnId) {
        self.terminal
            .ide_orders
            .retain(|_, (asked, _)| *asked != conn_id);
        self.terminal
            .clipboard_orders
            .retain(|_, (asked, _)| *asked != conn_id);
    }

    /// An OS injection asks a window's plugin to read or write the system clipboard.
    pub(super) fn on_plugin_clipboard_request(
        &mut self,
        request: crate::drive::portal::PluginClipboardRequest,
    ) {
        let crate::drive::portal::PluginClipboardRequest {
            session_id,
            action,
            reply,
        } = request;
        let (conn_id, order_id) = match self.plugin_order(&session_id) {
            Ok(order) => order,
            Err(why) => {
                let _ = reply.send(Err(why));
                return;
            }
        };
        self.terminal
            .clipboard_orders
            .insert(order_id.clone(), (conn_id, reply));
        self.send(
            conn_id,
            Envelope::new(Message::Clipboard(koru_protocol::ClipboardOrder {
                order_id,
                action,
            })),
        );
    }

    /// A plugin's answer to `clipboard`.
    pub(super) fn on_clipboard_result(
        &mut self,
        conn_id: ConnId,
        result: koru_protocol::ClipboardResult,
    ) {
        let answer = match result.error {
            Some(error) => Err(error),
            None => Ok(result.text),
        };
        answer_order(
            &mut self.terminal.clipboard_orders,
            conn_id,
            result.order_id,
            answer,
        );
    }

    /// The integrated terminals the plugins reported, with their shells.
    fn ide_terminals(&self) -> Vec<crate::terminal::IdeTerminalRef> {
        let mut found = Vec::new();
        for session in self.sessions.values() {
            let product = session
                .ide
                .as_ref()
                .map_or_else(|| "IDE".to_string(), |ide| ide.product.to_string());
            let folder = session
                .window
                .workspace_folders
                .first()
                .cloned()
                .unwrap_or_else(|| "(no folder)".into());
            for terminal in &session.terminals {
                if terminal.shell_pid.is_none() && terminal.env_tag.is_none() {
                    continue;
                }
                found.push(crate::terminal::IdeTerminalRef {
                    session_id: session.session_id.clone(),
                    terminal_id: terminal.terminal_id.clone(),
                    shell_pid: terminal.shell_pid,
                    env_tag: terminal.env_tag.clone(),
                    place: format!("{product} window {folder}, terminal \"{}\"", terminal.name),
                });
            }
        }
        found
    }

    /// A look came back: every waiting `sessions.list` is answered with it.
    pub(super) fn on_terminal_look(&mut self, finished: LookFinished) {
        if self.terminal.running != Some(finished.ticket) {
            return;
        }
        self.terminal.running = None;
        tracing::debug!(
            agents = finished.agents.len(),
            problems = finished.problems.len(),
            "terminal look done"
        );
        for problem in &finished.problems {
            tracing::warn!(problem, "looking for terminal agents");
        }
        let now = self.clock.now_ms();
        self.agents_looked(&finished.agents, &finished.problems, now);
        let agents: Vec<TerminalAgentInfo> =
            finished.agents.iter().map(|a| self.agent_info(a)).collect();
        for waiting in std::mem::take(&mut self.terminal.waiting) {
            let sessions = self.plugin_sessions(&waiting.filter);
            let agents = agents
                .iter()
                .filter(|a| {
                    waiting
                        .filter
                        .workspace
                        .as_deref()
                        .is_none_or(|w| folder(w) == folder(&a.workspace))
                })
                .filter(|_| waiting.filter.product.is_none())
                .cloned()
                .collect();
            self.send(
                waiting.conn_id,
                Envelope::with_id(
                    waiting.id,
                    Message::SessionsListResult(SessionsListResult { sessions, agents }),
                ),
            );
        }
    }

    /// An agent as `sessions.list` shows it: its chat is the one of its store the
    /// observers last saw active in its folder.
    pub(super) fn agent_info(&self, agent: &PaneAgent) -> TerminalAgentInfo {
        let store = match agent.product {
            crate::terminal::AgentProduct::ClaudeCode => {
                Some(crate::observe::stores::claude_code::STORE)
            }
            crate::terminal::AgentProduct::Codex => Some(crate::observe::stores::codex::STORE),
            crate::terminal::AgentProduct::GeminiCli => Some(crate::observe::stores::gemini::STORE),
            crate::terminal::AgentProduct::Opencode => {
                Some(crate::observe::stores::opencode::STORE)
            }
        };
        let socket = agent.pane.socket.display().to_string();
        // The chat the agent's own hook named for this process or pane, else the chat last
        // active in the pane's folder.
        let hooked = |c: &&koru_protocol::ChatInfo| {
            self.chat_process
                .get(&(c.store.clone(), c.chat_id.clone()))
                .is_some_and(|p| {
                    p.pid == Some(agent.pid)
                        || (agent.pane.kind == crate::terminal::PaneKind::Tmux
                            && p.tmux_socket.as_deref() == Some(socket.as_str())
                            && p.tmux_pane.as_deref() == Some(agent.pane.pane_id.as_str()))
                })
        };
        let chat = store.and_then(|store| {
            let of_store = || self.chats.values().filter(move |c| c.store == store);
            of_store()
                .filter(hooked)
                .max_by_key(|c| c.last_activity_ms)
                .or_else(|| {
                    of_store()
                        .filter(|c| {
                            c.workspace
                                .as_deref()
                                .is_some_and(|w| folder(w) == folder(&agent.pane.path))
                        })
                        .max_by_key(|c| c.last_activity_ms)
                })
        });
        let state = match chat.map(|c| c.state) {
            Some(ObservedChatState::Idle) => AgentState::Idle,
            Some(ObservedChatState::Replying) => AgentState::Replying,
            Some(ObservedChatState::NeedsInput) => AgentState::NeedsInput,
            None => AgentState::Unknown,
        };
        TerminalAgentInfo {
            agent_id: crate::terminal::agent_id(agent),
            product: agent.product.name().to_string(),
            workspace: agent.pane.path.clone(),
            pid: agent.pid,
            terminal: terminal_place(&agent.pane),
            chat: chat.map(|c| AgentChat {
                store: c.store.clone(),
                chat_id: c.chat_id.clone(),
            }),
            state,
        }
    }
}

/// Where a pane is, as the protocol says it.
pub(super) fn terminal_place(pane: &crate::terminal::Pane) -> TerminalPlace {
    match pane.kind {
        crate::terminal::PaneKind::Tmux => TerminalPlace::Tmux {
            socket: pane.socket.display().to_string(),
            pane_id: pane.pane_id.clone(),
            place: pane.place.clone(),
        },
        crate::terminal::PaneKind::Kitty => TerminalPlace::Kitty {
            listen_on: pane.socket.display().to_string(),
            window_id: pane.pane_id.parse().unwrap_or(0),
            place: pane.place.clone(),
        },
        crate::terminal::PaneKind::Wezterm => TerminalPlace::Wezterm {
            socket: pane.socket.display().to_string(),
            pane_id: pane.pane_id.parse().unwrap_or(0),
            place: pane.place.clone(),
        },
        crate::terminal::PaneKind::IdeTerminal => TerminalPlace::IdeTerminal {
            session_id: pane.socket.display().to_string(),
            terminal_id: pane.pane_id.clone(),
            place: pane.place.clone(),
        },
    }
}

//! Drives into terminal agents: targets resolved after a fresh look at the tmux panes, one drive at a time per agent and none while it replies, the prompt typed by the typist (`terminal::typist`) only into an empty input box, and `submitted` only on the agent's own record of the prompt (its hook, its transcript) — the submit key pressed again as the registry allows, else `not_submitted`.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use koru_protocol::{
    blocker, AgentState, AttemptOutcome, Blocker, DriveCreate, DriveState, ErrorCode, ErrorMessage,
    Location, RequestId, Route, SubmitEvidence, Target, Verification,
};

use crate::clock::Clock;
use crate::terminal::screen::Screen;
use crate::terminal::typist::{TypeJob, TypeKind, TypeResult, Typed};
use crate::terminal::PaneAgent;

use super::drives::DriveRecord;
use super::{App, ConnId, DriveOrigin};

/// How long a drive waits before looking again at an agent that is answering, or whose
/// input box is not on screen.
const LOOK_AGAIN_MS: u64 = 1_000;

/// What a drive into a terminal agent knows of it.
#[derive(Debug, Clone)]
pub struct AgentDrive {
    pub agent_id: String,
    pub product: String,
    /// Where the agent runs: a tmux pane, or a kitty window (`socket`: the instance's
    /// address; `pane_id`: the window's id).
    pub kind: crate::terminal::PaneKind,
    pub socket: PathBuf,
    pub pane_id: String,
    pub pid: u32,
    /// What is typed: the prompt, after the route's command escape where one applies.
    pub typed: String,
    /// When the drive looks again, or presses again: see `phase`.
    pub due_ms: Option<u64>,
    pub phase: AgentPhase,
    /// How many more times the submit key may be pressed.
    pub enters_left: u32,
    /// Whether an order for this drive is with the typist.
    pub ordered: bool,
    /// The kind of the newest order: an answer to an older one (a look still on its way
    /// when typing was ordered) is stale and dropped.
    pub order_kind: Option<TypeKind>,
    /// The agent's own server (opencode's), for its route that posts instead of typing.
    pub server: Option<crate::terminal::opencode::ServerTarget>,
}

/// Where a terminal drive is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentPhase {
    /// Not typed yet (waiting for the agent to finish, or for its input box).
    ToType,
    /// Typed; waiting for the agent's evidence.
    Proving,
    /// No evidence after the last press: the screen is read once more for the failure.
    LastLook,
}

/// A terminal agent the last look found, with its drives.
#[derive(Debug, Clone)]
pub(super) struct AgentRecord {
    pub(super) agent: PaneAgent,
    pub(super) active_drive: Option<String>,
    pub(super) queued: VecDeque<String>,
    /// When the screen of an agent whose queue waits for its reply is read next.
    pub(super) peek_due_ms: Option<u64>,
}

/// A drive for a terminal agent waiting for a look to say which agent it is for.
#[derive(Debug)]
pub(super) struct PendingAgentDrive {
    conn_id: ConnId,
    id: Option<RequestId>,
    create: DriveCreate,
    origin: DriveOrigin,
}

/// The terminal agents of the last look, and drives waiting for the next one.
#[derive(Default)]
pub(super) struct AgentTable {
    pub(super) agents: BTreeMap<String, AgentRecord>,
    /// What the last look could not see (a tmux server that did not answer, a kitty with
    /// its remote control off), said when no agent matches a drive.
    pub(super) problems: Vec<String>,
    pub(super) pending: Vec<PendingAgentDrive>,
}

use super::terminals::folder;

/// The terminal agent whose chats a store holds (`claude-code` for Claude Code's
/// transcripts), for a chat to reach through that agent's chat panel in an IDE.
fn agent_of_store(store: &str) -> Option<&'static str> {
    crate::agent_hooks::HookAgent::ALL
        .into_iter()
        .find(|agent| agent.store() == store)
        .map(|agent| agent.name())
}

/// Whether `wanted` is the agent's folder or contains it.
fn in_folder(agent_folder: &str, wanted: &str) -> bool {
    let (agent_folder, wanted) = (folder(agent_folder), folder(wanted));
    agent_folder == wanted || std::path::Path::new(agent_folder).starts_with(wanted)
}

impl<C: Clock> App<C> {
    /// A drive whose target means a terminal agent (or a chat): answered once a fresh
    /// look at the tmux panes says which agent it is.
    pub(super) fn accept_agent_drive(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        create: DriveCreate,
        origin: DriveOrigin,
    ) {
        if self.terminal.looker.is_none() {
            self.send_error(
                conn_id,
                id,
                ErrorMessage::new(
                    ErrorCode::NoTarget,
                    format!(
                        "{}: this daemon does not look for terminal agents",
                        create.target
                    ),
                ),
            );
            return;
        }
        self.agent_table.pending.push(PendingAgentDrive {
            conn_id,
            id,
            create,
            origin,
        });
        self.start_look();
    }

    /// After a look: the agents table follows it (drives of agents that are gone fail),
    /// and the drives waiting for it are resolved.
    pub(super) fn agents_looked(&mut self, agents: &[PaneAgent], problems: &[String], now: u64) {
        self.agent_table.problems = problems.to_vec();
        let mut table: BTreeMap<String, AgentRecord> = BTreeMap::new();
        for agent in agents {
            let agent_id = crate::terminal::agent_id(agent);
            let (active_drive, queued, peek_due_ms) =
                match self.agent_table.agents.remove(&agent_id) {
                    Some(old) => (old.active_drive, old.queued, old.peek_due_ms),
                    None => (None, VecDeque::new(), None),
                };
            table.insert(
                agent_id,
                AgentRecord {
                    agent: agent.clone(),
                    active_drive,
                    queued,
                    peek_due_ms,
                },
            );
        }
        // opencode agents serving HTTP: their event streams are followed as chat observations.
        let servers = agents
            .iter()
            .filter_map(|agent| {
                Some(crate::observe::stores::opencode::FollowedServer {
                    agent_id: crate::terminal::agent_id(agent),
                    address: agent.server?,
                    folder: agent.pane.path.clone(),
                    pid: agent.pid,
                    tmux_socket: (agent.pane.kind == crate::terminal::PaneKind::Tmux)
                        .then(|| agent.pane.socket.display().to_string()),
                    tmux_pane: (agent.pane.kind == crate::terminal::PaneKind::Tmux)
                        .then(|| agent.pane.pane_id.clone()),
                    database: crate::terminal::opencode::database_of(agent.pid),
                })
            })
            .collect();
        self.server_followers.follow_only(servers);
        let gone = std::mem::replace(&mut self.agent_table.agents, table);
        for (agent_id, record) in gone {
            for drive_id in record.active_drive.into_iter().chain(record.queued) {
                let detail = format!(
                    "the terminal agent {agent_id} ({} in pane {}) is no longer running",
                    record.agent.product.name(),
                    record.agent.pane.pane_id
                );
                self.finish_drive(
                    &drive_id,
                    DriveState::Failed,
                    Some(Blocker::new(blocker::AGENT_EXITED, detail)),
                    now,
                );
            }
        }
        for pending in std::mem::take(&mut self.agent_table.pending) {
            match self.resolve_agent(&pending.create.target) {
                Ok(agent_id) => self.accept_resolved_agent_drive(pending, agent_id, now),
                Err(mut error) if error.code == ErrorCode::NoTarget => {
                    // No terminal runs the agent: an IDE window may hold its chat panel.
                    match self.agent_chat_window(&pending.create) {
                        Ok(Some(target)) => {
                            let PendingAgentDrive {
                                conn_id,
                                id,
                                create,
                                origin,
                            } = pending;
                            self.accept_session_drive(conn_id, id, create, origin, target, now);
                        }
                        Ok(None) => {
                            match &pending.create.target {
                                Target::Agent(wanted) => error.message.push_str(&format!(
                                    "; nor does an IDE window{} offer {}'s own chat panel (`koru doctor` lists each window's routes)",
                                    wanted
                                        .workspace
                                        .as_deref()
                                        .map(|w| format!(" of {w}"))
                                        .unwrap_or_default(),
                                    wanted.product
                                )),
                                Target::Chat(_) => error.message.push_str(
                                    "; nor does an IDE window of the chat's folder offer its agent's chat panel",
                                ),
                                _ => {}
                            }
                            self.send_error(pending.conn_id, pending.id, error);
                        }
                        Err(ambiguous) => self.send_error(pending.conn_id, pending.id, ambiguous),
                    }
                }
                Err(error) => self.send_error(pending.conn_id, pending.id, error),
            }
        }
    }

    /// For a drive naming a terminal agent that no terminal runs (`--agent claude-code`):
    /// the one IDE window of its folder with a usable route into that agent's own chat
    /// panel (`applies_to.agents` in the registry), `None` when there is none, or why
    /// several are.
    fn agent_chat_window(
        &mut self,
        create: &DriveCreate,
    ) -> Result<Option<super::delivery::SessionTarget>, ErrorMessage> {
        // A chat the observers know of an agent with a chat panel: that agent, in the
        // chat's folder, resuming that chat.
        let (wanted, chat_id) = match &create.target {
            Target::Agent(wanted) => (wanted.clone(), None),
            Target::Chat(chat_id) => {
                let known = self
                    .chats
                    .values()
                    .find(|c| &c.chat_id == chat_id && agent_of_store(&c.store).is_some());
                let Some(chat) = known else {
                    return Ok(None);
                };
                let Some(workspace) = chat.workspace.clone() else {
                    return Ok(None);
                };
                let wanted = koru_protocol::AgentTarget {
                    product: agent_of_store(&chat.store).unwrap_or_default().to_string(),
                    workspace: Some(workspace),
                };
                (wanted, Some(chat_id.clone()))
            }
            _ => return Ok(None),
        };
        let folder = match wanted.workspace.as_deref() {
            Some(path) => match crate::workspace_ref::WorkspaceRef::parse(path) {
                Ok(folder) => Some(folder),
                Err(_) => return Ok(None),
            },
            None => None,
        };
        let mut scored: Vec<(String, usize)> = self
            .sessions
            .values()
            .filter(|s| s.role == koru_protocol::Role::Plugin && s.product().is_some())
            .filter(|s| self.session_conn.contains_key(&s.session_id))
            .filter_map(|s| match &folder {
                Some(folder) => s
                    .workspace_match(folder)
                    .map(|score| (s.session_id.clone(), score)),
                None => Some((s.session_id.clone(), 0)),
            })
            .collect();
        scored.retain(|(session_id, _)| {
            let has_window = self.sessions[session_id].window.pid.is_some();
            self.plan(
                session_id,
                has_window,
                &create.options,
                Some(&wanted.product),
            )
            .iter()
            .any(|c| c.usable.is_ok())
        });
        let Some(best) = scored.iter().map(|(_, score)| *score).max() else {
            return Ok(None);
        };
        let winners: Vec<&String> = scored
            .iter()
            .filter(|(_, score)| *score == best)
            .map(|(id, _)| id)
            .collect();
        match winners.as_slice() {
            [one] => {
                let session = &self.sessions[one.as_str()];
                Ok(Some(super::delivery::SessionTarget {
                    session_id: (*one).clone(),
                    window: session.window.pid.map(|pid| koru_protocol::WindowTarget {
                        pid: Some(pid),
                        title: None,
                    }),
                    extra_pids: session.window.parent_pid.into_iter().collect(),
                    agent_chat: Some(wanted.product.clone()),
                    agent_chat_id: chat_id,
                }))
            }
            several => Err(ErrorMessage::new(
                ErrorCode::AmbiguousTarget,
                format!(
                    "no terminal runs {}, and {} IDE windows offer its chat panel for {}: {}; name one with `--workspace` or a session id",
                    wanted.product,
                    several.len(),
                    Target::Agent(wanted.clone()),
                    several
                        .iter()
                        .map(|id| self.sessions[id.as_str()].describe())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            )),
        }
    }

    /// The one agent a target means, or why none or several do.
    fn resolve_agent(&self, target: &Target) -> Result<String, ErrorMessage> {
        let agents = &self.agent_table.agents;
        let describe = |id: &str, record: &AgentRecord| {
            format!(
                "{id} ({}, {}, pane {} {})",
                record.agent.product.name(),
                record.agent.pane.path,
                record.agent.pane.pane_id,
                record.agent.pane.place
            )
        };
        let listing = || {
            if agents.is_empty() {
                "no terminal agent is running in a tmux pane or a kitty window".to_string()
            } else {
                format!(
                    "running: {}",
                    agents
                        .iter()
                        .map(|(id, r)| describe(id, r))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        };
        let unseen = if self.agent_table.problems.is_empty() {
            String::new()
        } else {
            format!("; not seen: {}", self.agent_table.problems.join("; "))
        };
        let none = |what: String| {
            ErrorMessage::new(
                ErrorCode::NoTarget,
                format!("{what}; {}{unseen}", listing()),
            )
        };
        match target {
            Target::Session(id) => agents
                .contains_key(id)
                .then(|| id.clone())
                .ok_or_else(|| none(format!("no terminal agent {id}"))),
            Target::Agent(wanted) => {
                let matching: Vec<(&String, &AgentRecord)> = agents
                    .iter()
                    .filter(|(_, r)| r.agent.product.name() == wanted.product)
                    .filter(|(_, r)| {
                        wanted
                            .workspace
                            .as_deref()
                            .is_none_or(|w| in_folder(&r.agent.pane.path, w))
                    })
                    .collect();
                match matching.as_slice() {
                    [(id, _)] => Ok((*id).clone()),
                    [] => Err(none(format!("no {} agent runs in {}", wanted.product, wanted.workspace.as_deref().unwrap_or("any folder")))),
                    several => Err(ErrorMessage::new(
                        ErrorCode::AmbiguousTarget,
                        format!(
                            "{} agents match {target}: {}; name one with its id (`koru send --session t_…`)",
                            several.len(),
                            several
                                .iter()
                                .map(|(id, r)| describe(id, r))
                                .collect::<Vec<_>>()
                                .join("; ")
                        ),
                    )),
                }
            }
            Target::Chat(chat_id) => {
                let holding: Vec<&String> = agents
                    .iter()
                    .filter(|(_, r)| {
                        self.agent_info(&r.agent)
                            .chat
                            .is_some_and(|c| &c.chat_id == chat_id)
                    })
                    .map(|(id, _)| id)
                    .collect();
                match holding.as_slice() {
                    [id] => Ok((*id).clone()),
                    [] => Err(none(format!(
                        "no running terminal agent holds chat {chat_id} (`koru chats` lists chats, `koru sessions` the agents and their chats)"
                    ))),
                    several => Err(ErrorMessage::new(
                        ErrorCode::AmbiguousTarget,
                        format!(
                            "{} agents hold chat {chat_id}: {}",
                            several.len(),
                            several.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    )),
                }
            }
            other => Err(ErrorMessage::new(
                ErrorCode::NoTarget,
                format!("{other} is not a terminal agent"),
            )),
        }
    }

    /// Checks, plans and queues a drive for `agent_id`, answering as `origin` asks.
    fn accept_resolved_agent_drive(
        &mut self,
        pending: PendingAgentDrive,
        agent_id: String,
        now: u64,
    ) {
        let PendingAgentDrive {
            conn_id,
            id,
            create,
            origin,
        } = pending;
        let record = &self.agent_table.agents[&agent_id];
        let agent = record.agent.clone();
        let product = agent.product.name().to_string();
        let prompt_error = |message: String| {
            ErrorMessage::new(ErrorCode::InvalidMessage, message).with_location(Location {
                field: Some("prompt".into()),
                ..Location::default()
            })
        };
        let text = match crate::terminal::tmux::terminal_text(&create.prompt) {
            Ok(text) => text,
            Err(refused) => {
                self.send_error(conn_id, id, prompt_error(refused.to_string()));
                return;
            }
        };
        let platform =
            crate::doctor::probe::current_platform().unwrap_or(koru_registry::Platform::Linux);
        let server_usable = match agent.server {
            Some(_) => Ok(()),
            None => Err(crate::terminal::opencode::no_server(agent.pid)),
        };
        let candidates = crate::drive::planner::plan_terminal(
            &self.registry,
            &product,
            platform,
            match agent.pane.kind {
                crate::terminal::PaneKind::Tmux => koru_registry::Transport::Tmux,
                crate::terminal::PaneKind::Kitty => koru_registry::Transport::Kitty,
                crate::terminal::PaneKind::Wezterm => koru_registry::Transport::Wezterm,
                crate::terminal::PaneKind::IdeTerminal => koru_registry::Transport::IdeTerminal,
            },
            self.typist.available(agent.pane.kind),
            server_usable,
        );
        let server = agent
            .server
            .map(|address| crate::terminal::opencode::ServerTarget {
                address,
                directory: agent.pane.path.clone(),
                session: match &create.target {
                    Target::Chat(chat_id) => Some(chat_id.clone()),
                    _ => None,
                },
                started_ms: crate::terminal::opencode::process_started_ms(agent.pid).unwrap_or(0),
                database: crate::terminal::opencode::database_of(agent.pid),
            });
        let posts = candidates
            .iter()
            .find(|c| c.usable.is_ok())
            .is_some_and(|c| c.route == Route::NativeSend);
        if posts && create.options.agent_command {
            let message = format!(
                "{product}'s server takes prompts as text only; `agent_command` (run the prompt as the agent's command) is not offered on that route"
            );
            self.send_error(conn_id, id, prompt_error(message));
            return;
        }
        // A prompt starting with a command prefix is text unless the drive asks for a
        // command: the route's escape goes before it, or, without one, it is refused.
        let route = candidates.iter().find_map(|c| c.terminal.as_ref());
        let prefix = route
            .into_iter()
            .flat_map(|t| t.command_prefixes.iter())
            .find(|p| !p.is_empty() && text.starts_with(p.as_str()))
            .filter(|_| !create.options.agent_command);
        let typed = match (prefix, route.and_then(|t| t.command_escape.as_deref())) {
            (None, _) => text.clone(),
            (Some(_), Some(escape)) => format!("{escape}{text}"),
            (Some(prefix), None) => {
                let message = format!(
                    "the prompt starts with `{prefix}`, which {product} reads as a command, not as text, and its route has no way to type it as text; send it with `agent_command` (`koru send --agent-command`) to run it as one, or start the prompt differently"
                );
                self.send_error(conn_id, id, prompt_error(message));
                return;
            }
        };
        let held = record.queued.len() + usize::from(record.active_drive.is_some());
        if held >= self.config.max_queued_drives {
            let message = format!(
                "terminal agent {agent_id} already holds {held} drives that have not ended, its limit (--max-queued-drives {}); nothing was queued",
                self.config.max_queued_drives
            );
            self.send_error(
                conn_id,
                id,
                ErrorMessage::new(ErrorCode::QueueFull, message),
            );
            return;
        }
        let timeout_ms = create
            .options
            .timeout_ms
            .unwrap_or(self.config.default_drive_timeout_ms);
        let mut drive = DriveRecord::new(
            super::new_id("d_"),
            create.target,
            agent_id.clone(),
            Route::TerminalInput,
            text,
            create.options,
            now,
            timeout_ms,
        );
        drive.candidates = candidates.into_iter().map(std::sync::Arc::new).collect();
        drive.workspaces = vec![agent.pane.path.clone()];
        drive.agent = Some(Box::new(AgentDrive {
            agent_id: agent_id.clone(),
            product,
            kind: agent.pane.kind,
            socket: agent.pane.socket.clone(),
            pane_id: agent.pane.pane_id.clone(),
            pid: agent.pid,
            typed,
            due_ms: None,
            phase: AgentPhase::ToType,
            enters_left: 0,
            ordered: false,
            order_kind: None,
            server,
        }));
        if let DriveOrigin::Retry { of, .. } = &origin {
            drive.retry_of = Some(of.clone());
        }
        let busy_fail = drive.options.busy == koru_protocol::BusyPolicy::Fail
            && (record.active_drive.is_some()
                || !record.queued.is_empty()
                || matches!(
                    self.agent_info(&agent).state,
                    AgentState::Replying | AgentState::NeedsInput
                ));
        let drive_id = drive.drive_id.clone();
        tracing::debug!(drive_id = %drive_id, agent_id = %agent_id, prompt_chars = drive.prompt_chars, "terminal drive accepted");
        let busy = busy_fail.then_some(
            "the agent is busy (replying, waiting for input, or another drive is running) and the drive asked to fail fast",
        );
        if !self.register_drive(drive, conn_id, id, origin, busy, now) {
            return;
        }
        if let Some(record) = self.agent_table.agents.get_mut(&agent_id) {
            record.queued.push_back(drive_id);
        }
        self.pump_agent(&agent_id, now);
    }

    /// Sends the agent's next drive when none is running and the agent is not answering;
    /// otherwise records on each waiting drive why it waits.
    pub(super) fn pump_agent(&mut self, agent_id: &str, now: u64) {
        let Some(record) = self.agent_table.agents.get(agent_id) else {
            return;
        };
        let info = self.agent_info(&record.agent);
        let replying = info.state == AgentState::Replying
            && info.chat.as_ref().is_some_and(|chat| {
                self.chats
                    .get(&chat.store, &chat.chat_id)
                    .is_some_and(|row| {
                        now.saturating_sub(row.info.last_activity_ms)
                            < super::chats::OBSERVED_BUSY_MS
                    })
            });
        let waiting = if let Some(running) = &record.active_drive {
            Some(Blocker::new(
                "drive_running",
                format!("waits for drive {running} to the same agent to end"),
            ))
        } else if replying {
            Some(Blocker::new(
                blocker::CHAT_BUSY,
                format!(
                    "waits: the agent is replying (chat {}, by its own record); the prompt is typed when the turn ends",
                    info.chat.as_ref().map_or("?", |c| c.chat_id.as_str())
                ),
            ))
        } else {
            None
        };
        if let Some(waiting) = waiting {
            if replying {
                // A dialog would hold the turn for ever: the screen is read meanwhile.
                if let Some(record) = self.agent_table.agents.get_mut(agent_id) {
                    record.peek_due_ms.get_or_insert(now);
                }
            }
            let Some(record) = self.agent_table.agents.get(agent_id) else {
                return;
            };
            let queued: Vec<String> = record.queued.iter().cloned().collect();
            for drive_id in queued {
                let Some(drive) = self.drives.get_mut(&drive_id) else {
                    continue;
                };
                if drive.waiting.as_ref() != Some(&waiting) {
                    drive.waiting = Some(waiting.clone());
                    self.publish_drive(&drive_id);
                }
            }
            return;
        }
        let Some(record) = self.agent_table.agents.get_mut(agent_id) else {
            return;
        };
        let Some(drive_id) = record.queued.pop_front() else {
            return;
        };
        record.active_drive = Some(drive_id.clone());
        if let Some(drive) = self.drives.get_mut(&drive_id) {
            drive.waiting = None;
        }
        self.start_next_route(&drive_id, now);
    }

    /// Frees the agent of a drive that ended.
    pub(super) fn release_agent(&mut self, agent_id: &str, drive_id: &str) {
        if let Some(record) = self.agent_table.agents.get_mut(agent_id) {
            if record.active_drive.as_deref() == Some(drive_id) {
                record.active_drive = None;
            }
            record.queued.retain(|queued| queued != drive_id);
        }
    }

    /// Every agent with drives waiting and none running gets a chance to send (a chat
    /// became idle).
    pub(super) fn pump_agents(&mut self, now: u64) {
        let waiting: Vec<String> = self
            .agent_table
            .agents
            .iter()
            .filter(|(_, r)| r.active_drive.is_none() && !r.queued.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        for agent_id in waiting {
            self.pump_agent(&agent_id, now);
        }
    }

    /// Hands the typist an order for a drive's agent.
    fn order(&mut self, drive_id: &str, kind: TypeKind) {
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        // A drive not started yet (a look while it waits) uses its first route's markers.
        let Some(candidate) = drive.current.as_ref().or(drive.candidates.front()) else {
            return;
        };
        let posts = candidate.route == Route::NativeSend;
        let Some(terminal) = candidate.terminal.clone() else {
            return;
        };
        let Some(agent) = drive.agent.as_mut() else {
            return;
        };
        agent.ordered = true;
        agent.order_kind = Some(kind);
        agent.due_ms = None;
        let job = TypeJob {
            drive_id: drive_id.to_string(),
            kind,
            place: agent.kind,
            socket: agent.socket.clone(),
            pane_id: agent.pane_id.clone(),
            agent_pid: agent.pid,
            text: agent.typed.clone(),
            terminal,
            server: if posts { agent.server.clone() } else { None },
        };
        tracing::debug!(drive_id, kind = ?kind, pane = %job.pane_id, "terminal order");
        self.typist.start(job);
    }

    /// The route chosen for a terminal drive: type when the screen allows.
    pub(super) fn start_typing(&mut self, drive_id: &str) {
        self.order(drive_id, TypeKind::Type);
    }

    /// The typist's answer.
    pub(super) fn on_typed(&mut self, typed: Typed) {
        let now = self.clock.now_ms();
        let drive_id = typed.drive_id.clone();
        let Some(drive) = self.drives.get_mut(&drive_id) else {
            return;
        };
        if let Some(agent) = drive.agent.as_mut() {
            if agent.order_kind != Some(typed.kind) {
                tracing::debug!(drive_id, kind = ?typed.kind, newest = ?agent.order_kind, "a stale terminal answer, dropped");
                return;
            }
            agent.ordered = false;
            agent.order_kind = None;
        }
        if drive.is_terminal() {
            tracing::debug!(drive_id, result = ?typed.result, "a terminal order finished after its drive ended");
            return;
        }
        if drive.state == DriveState::Queued {
            self.peeked(&drive_id, typed, now);
            return;
        }
        if let TypeResult::Recorded { session, at_ms } = &typed.result {
            // The agent's server recorded the prompt as a user message in `session`: its
            // own evidence, observed like the store's (the drive then follows that chat's
            // reply; the follower seeing the same message again changes nothing).
            let (Some(agent), prompt) = (drive.agent.as_ref(), drive.prompt.clone()) else {
                return;
            };
            let Some(server) = agent.server.clone() else {
                return;
            };
            let (excerpt, length) = crate::observe::excerpt_and_length(&prompt);
            let seen = koru_protocol::ObservedEvent {
                store: crate::observe::stores::opencode::STORE.to_string(),
                chat_id: session.clone(),
                workspace: Some(server.directory.clone()),
                store_ts_ms: *at_ms,
                seen_at_ms: now,
                basis: koru_protocol::ObservationBasis::Explicit,
                process: Some(koru_protocol::AgentProcess {
                    pid: Some(agent.pid),
                    tmux_socket: (agent.kind == crate::terminal::PaneKind::Tmux)
                        .then(|| agent.socket.display().to_string()),
                    tmux_pane: (agent.kind == crate::terminal::PaneKind::Tmux)
                        .then(|| agent.pane_id.clone()),
                }),
                event: koru_protocol::ObservedKind::PromptSeen {
                    excerpt,
                    length,
                    digest: crate::observe::prompt_digest(&prompt),
                },
            };
            tracing::debug!(drive_id, session, "the agent's server recorded the prompt");
            self.on_observed(vec![seen], false, Some(server.database));
            // Should correlation not have claimed it (another drive with the same text),
            // the server's record still proves this one.
            self.agent_recorded(&drive_id, false, now);
            return;
        }
        let posted = drive.agent.as_ref().is_some_and(|a| a.server.is_some())
            && drive
                .current
                .as_ref()
                .is_some_and(|c| c.route == Route::NativeSend);
        let Some(terminal) = drive.current.as_ref().and_then(|c| c.terminal.clone()) else {
            return;
        };
        let product = drive
            .agent
            .as_ref()
            .map_or_else(String::new, |a| a.product.clone());
        match (typed.kind, typed.result) {
            (TypeKind::Type, TypeResult::Typed) => {
                drive.advance_to(DriveState::Pasted, now);
                if let Some(agent) = drive.agent.as_mut() {
                    agent.phase = AgentPhase::Proving;
                    agent.enters_left = terminal.enter_retries;
                    agent.due_ms = Some(now + terminal.proof_ms);
                }
                tracing::info!(
                    drive_id,
                    "typed into the agent's pane; waiting for its own record of the prompt"
                );
                self.publish_drive(&drive_id);
            }
            (TypeKind::Type, TypeResult::Untouched(Screen::Dialog(text))) => {
                let detail = if posted {
                    format!(
                        "{product} waits for a person ({text}, by its server); nothing was sent"
                    )
                } else {
                    format!(
                        "{product} shows a dialog; nothing was typed (typing would answer it): {text}"
                    )
                };
                self.route_failed(&drive_id, Blocker::new(blocker::NEEDS_INPUT, detail), now);
            }
            (TypeKind::Type, TypeResult::Untouched(Screen::Draft(draft))) => {
                let detail = format!(
                    "someone's unsent text is in {product}'s input box; nothing was typed (it would merge with it): {draft:?}"
                );
                self.route_failed(&drive_id, Blocker::new(blocker::USER_TYPING, detail), now);
            }
            (TypeKind::Type, TypeResult::Untouched(seen)) => {
                // Answering, or no input box on screen yet: look again shortly.
                let why = match seen {
                    Screen::Busy(line) => format!("waits: {product} is answering ({line})"),
                    _ => format!(
                        "waits: {product}'s input box is not on screen; last lines: {}",
                        typed.screen_tail.replace('\n', " ⏎ ")
                    ),
                };
                drive.waiting = Some(Blocker::new(blocker::CHAT_BUSY, why));
                if let Some(agent) = drive.agent.as_mut() {
                    agent.due_ms = Some(now + LOOK_AGAIN_MS);
                }
                self.publish_drive(&drive_id);
            }
            (TypeKind::SubmitAgain, TypeResult::PressedAgain) => {
                if let Some(agent) = drive.agent.as_mut() {
                    agent.due_ms = Some(now + terminal.proof_ms);
                }
                tracing::info!(
                    drive_id,
                    "no record of the prompt yet; the submit key was pressed again"
                );
            }
            (TypeKind::SubmitAgain, TypeResult::Untouched(Screen::Dialog(text))) => {
                let detail = format!(
                    "after the submit key, {product} shows a dialog and recorded no such prompt; it may have been submitted: {text}"
                );
                self.route_failed(&drive_id, Blocker::new(blocker::NEEDS_INPUT, detail), now);
            }
            (TypeKind::SubmitAgain, TypeResult::Untouched(_)) => {
                // The prompt left the input box without a record yet: one more wait, no
                // more keys.
                if let Some(agent) = drive.agent.as_mut() {
                    agent.enters_left = 0;
                    agent.phase = AgentPhase::LastLook;
                    agent.due_ms = Some(now + terminal.proof_ms);
                }
            }
            (_, TypeResult::Untouched(_)) | (TypeKind::Look, _) => {
                let waited = now.saturating_sub(
                    drive
                        .history
                        .iter()
                        .find(|r| r.state == DriveState::Pasted)
                        .map_or(now, |r| r.at_ms),
                );
                let detail = if posted {
                    format!(
                        "{product}'s server took the prompt but recorded no such user message within {:.1} s ({})",
                        waited as f64 / 1000.0,
                        typed.screen_tail
                    )
                } else {
                    format!(
                        "{product} recorded no such prompt (no prompt hook, no transcript entry) within {:.1} s of the submit key; the screen shows: {}",
                        waited as f64 / 1000.0,
                        typed.screen_tail.replace('\n', " ⏎ ")
                    )
                };
                self.route_failed(&drive_id, Blocker::new(blocker::NOT_SUBMITTED, detail), now);
            }
            (_, TypeResult::Failed { blocker, pasted }) => {
                if pasted {
                    drive.advance_to(DriveState::Pasted, now);
                }
                self.route_failed(&drive_id, blocker, now);
            }
            (kind, result) => {
                tracing::warn!(drive_id, ?kind, ?result, "unexpected terminal order result");
            }
        }
    }

    /// Agents with drives whose process has ended: their drives fail `agent_exited` (a
    /// drive queued behind a reply would otherwise wait for its deadline). One check of
    /// `/proc` per agent that holds drives, at each tick.
    fn agents_exited(&mut self, now: u64) {
        let gone: Vec<String> = self
            .agent_table
            .agents
            .iter()
            .filter(|(_, r)| r.active_drive.is_some() || !r.queued.is_empty())
            .filter(|(_, r)| !self.typist.alive(r.agent.pid))
            .map(|(id, _)| id.clone())
            .collect();
        for agent_id in gone {
            let Some(record) = self.agent_table.agents.remove(&agent_id) else {
                continue;
            };
            let detail = format!(
                "{} (pid {}) in pane {} exited before the prompt was taken",
                record.agent.product.name(),
                record.agent.pid,
                record.agent.pane.pane_id
            );
            for drive_id in record.active_drive.into_iter().chain(record.queued) {
                self.finish_drive(
                    &drive_id,
                    DriveState::Failed,
                    Some(Blocker::new(blocker::AGENT_EXITED, detail.clone())),
                    now,
                );
            }
        }
    }

    /// What the screen showed a drive that waits for its agent's turn to end: a dialog
    /// fails it (the turn cannot end before a person answers); otherwise it waits on and
    /// the screen is read again a second later.
    fn peeked(&mut self, drive_id: &str, typed: Typed, now: u64) {
        let Some(agent_id) = self.drives.get(drive_id).map(|d| d.session_id.clone()) else {
            return;
        };
        if let TypeResult::Untouched(Screen::Dialog(text)) = typed.result {
            let product = self
                .agent_table
                .agents
                .get(&agent_id)
                .map_or("the agent", |r| r.agent.product.name());
            let detail = format!(
                "{product} shows a dialog while it waits for its turn to end; nothing was typed (typing would answer it): {text}"
            );
            self.finish_drive(
                drive_id,
                DriveState::Failed,
                Some(Blocker::new(blocker::NEEDS_INPUT, detail)),
                now,
            );
            return;
        }
        if let Some(record) = self.agent_table.agents.get_mut(&agent_id) {
            record.peek_due_ms = Some(now + LOOK_AGAIN_MS);
        }
        self.pump_agent(&agent_id, now);
    }

    /// Agents whose queue waits for a reply to end and whose screen is due a look (for a
    /// dialog, which holds the turn until a person answers).
    fn agents_due_a_look(&mut self, now: u64) {
        let due: Vec<String> = self
            .agent_table
            .agents
            .iter_mut()
            .filter(|(_, r)| r.active_drive.is_none())
            .filter(|(_, r)| r.peek_due_ms.is_some_and(|t| t <= now))
            .filter_map(|(_, r)| {
                r.peek_due_ms = None;
                r.queued.front().cloned()
            })
            .collect();
        for drive_id in due {
            let ordered = self
                .drives
                .get(&drive_id)
                .and_then(|d| d.agent.as_ref())
                .is_some_and(|a| a.ordered);
            if !ordered {
                self.order(&drive_id, TypeKind::Look);
            }
        }
    }

    /// Terminal drives whose next look or press is due.
    pub(super) fn agent_drives_due(&mut self, now: u64) {
        self.agents_exited(now);
        self.agents_due_a_look(now);
        let due: Vec<(String, AgentPhase, u32)> = self
            .drives
            .iter()
            .filter(|d| !d.is_terminal())
            .filter_map(|d| {
                let agent = d.agent.as_ref()?;
                (!agent.ordered && agent.due_ms.is_some_and(|t| t <= now))
                    .then(|| (d.drive_id.clone(), agent.phase, agent.enters_left))
            })
            .collect();
        for (drive_id, phase, enters_left) in due {
            match phase {
                AgentPhase::ToType => self.order(&drive_id, TypeKind::Type),
                AgentPhase::Proving if enters_left > 0 => {
                    if let Some(agent) = self
                        .drives
                        .get_mut(&drive_id)
                        .and_then(|d| d.agent.as_mut())
                    {
                        agent.enters_left -= 1;
                    }
                    self.order(&drive_id, TypeKind::SubmitAgain);
                }
                AgentPhase::Proving | AgentPhase::LastLook => self.order(&drive_id, TypeKind::Look),
            }
        }
    }

    /// A prompt the agent recorded (its hook or its transcript) that correlation matched
    /// to a drive waiting for proof — a terminal drive, or a drive into the agent's chat
    /// panel in an IDE window after its route pasted: `submitted`, then `done`.
    pub(super) fn agent_recorded(&mut self, drive_id: &str, by_hook: bool, now: u64) {
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        if drive.is_terminal() || drive.state == DriveState::Queued {
            return;
        }
        // A drive into an agent's chat in an IDE window (the Claude Code panel): its record
        // after the route pasted proves the submit key took it.
        let in_ide = drive.agent.is_none();
        if in_ide
            && !(drive.agent_chat.is_some() && drive.state.rank() >= DriveState::Pasted.rank())
        {
            return;
        }
        let evidence = if by_hook {
            SubmitEvidence::AgentHook
        } else {
            SubmitEvidence::AgentTranscript
        };
        // Typed and recorded before the typist's answer came back: the paste happened.
        drive.advance_to(DriveState::Pasted, now);
        drive.advance_to(DriveState::Submitted, now);
        drive.submit_evidence = Some(evidence);
        drive.verification = Verification::AgentRecorded;
        drive.waiting = None;
        drive.record_due_ms = None;
        if let Some(agent) = drive.agent.as_mut() {
            agent.due_ms = None;
        }
        drive.end_attempt(AttemptOutcome::Succeeded, None, None, now);
        // The agent's id (`t_…`), or the IDE window's session.
        let session_id = drive.session_id.clone();
        let ms = now.saturating_sub(drive.created_at_ms);
        drive.finish(DriveState::Done, None, now);
        tracing::info!(
            drive_id,
            evidence = evidence.as_str(),
            ms,
            in_ide,
            "drive submitted, by the agent's own record"
        );
        self.release(&session_id, drive_id);
        self.publish_drive(drive_id);
        self.pump(&session_id, now);
    }

    /// Drives into an agent's chat in an IDE window whose submit key was pressed and whose
    /// agent recorded nothing in time: `needs_user` (the prompt may wait in the chat's
    /// input), never another route (it may yet be sent).
    pub(super) fn agent_chat_records_due(&mut self, now: u64) {
        let due: Vec<(String, u64, Option<String>)> = self
            .drives
            .iter()
            .filter(|d| !d.is_terminal())
            .filter(|d| d.record_due_ms.is_some_and(|t| t <= now))
            .map(|d| {
                let pasted_at = d
                    .history
                    .iter()
                    .find(|r| r.state == DriveState::Pasted)
                    .map_or(now, |r| r.at_ms);
                (
                    d.drive_id.clone(),
                    now.saturating_sub(pasted_at),
                    d.agent_chat.clone(),
                )
            })
            .collect();
        for (drive_id, waited, agent) in due {
            if let Some(drive) = self.drives.get_mut(&drive_id) {
                drive.record_due_ms = None;
            }
            let chat = super::delivery::agent_chat_place(agent.as_deref());
            let detail = format!(
                "the submit key was pressed into the IDE window, but {} recorded no such prompt (no prompt hook, no transcript entry) within {:.1} s: the prompt may still be in {chat}'s input, unsent; press Enter there to send it",
                agent.as_deref().unwrap_or("the agent"),
                waited as f64 / 1000.0
            );
            self.route_failed(&drive_id, Blocker::new(blocker::NEEDS_USER, detail), now);
        }
    }
}

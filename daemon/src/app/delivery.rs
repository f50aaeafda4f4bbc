//! The drive lifecycle: accepting a drive, planning its routes, the fallback chain (decisions from `drive::fallback`), plugin acks, OS injection and the daemon's submit key, cancelling, and finishing with one terminal state; one drive per chat at a time.

use std::sync::Arc;

use koru_protocol::{
    blocker, AttemptOutcome, Blocker, ChatState, DriveCancelNotice, DriveCreate, DriveRequest,
    DriveResult, DriveState, Envelope, ErrorCode, ErrorMessage, Location, Message, RequestId,
    Route, StreamEvent, Verification,
};

use super::drives::{AckOutcome, DriveRecord};
use super::recovery::DriveOrigin;
use super::sessions::resolve_target;
use crate::clock::Clock;
use crate::drive::fallback::{
    after_failure, next_route, resend_after_not_ready, AfterFailure, RouteChoice,
};
use crate::drive::inject::{InjectionJob, InjectionOutcome, KeyPressJob, Reached};
use crate::drive::planner::{plan, Candidate, PlanInput, PlanKey};

use super::chats::CHAT_RUNNING_BUSY_MS;
use super::{new_id, App, ConnId};

/// A window target must name a pid or a valid title pattern.
pub(super) fn check_window_target(
    window: &koru_protocol::WindowTarget,
) -> Result<(), ErrorMessage> {
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

pub(super) fn drive_result(drive: &DriveRecord) -> Message {
    Message::DriveResult(DriveResult {
        drive: drive.info(),
    })
}

pub(super) fn unknown_drive(drive_id: &str) -> ErrorMessage {
    ErrorMessage::new(
        ErrorCode::UnknownDrive,
        format!("no drive {drive_id} (ids look like d_…; `koru drives` lists recent ones)"),
    )
}

/// Where a drive to an IDE window goes, once its target is resolved.
pub(super) struct SessionTarget {
    /// The plugin session (empty: a plugin-less window, OS injection only).
    pub session_id: String,
    pub window: Option<koru_protocol::WindowTarget>,
    pub extra_pids: Vec<u32>,
    /// The terminal agent whose own chat inside the IDE the drive is for (the Claude Code
    /// panel), or `None` for the IDE's own chat.
    pub agent_chat: Option<String>,
    /// That agent's chat to resume (its session id, for the route's `$chat`), or `None`
    /// for a new one.
    pub agent_chat_id: Option<String>,
}

/// Where the prompt of a drive into an agent's chat in the IDE waits, for people.
pub(super) fn agent_chat_place(agent: Option<&str>) -> &'static str {
    match agent {
        Some("claude-code") => "the Claude Code tab",
        _ => "the agent's chat tab",
    }
}

/// The route's steps with each argument `"$chat"` replaced by the chat to resume (its id),
/// or `null` for a new one; the plugin replaces `"$prompt"` itself.
fn with_chat(
    steps: &[koru_protocol::DriveStep],
    chat_id: Option<&str>,
) -> Vec<koru_protocol::DriveStep> {
    fn substitute(value: &serde_json::Value, chat: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::String(s) if s == "$chat" => chat.clone(),
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(|v| substitute(v, chat)).collect())
            }
            serde_json::Value::Object(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), substitute(v, chat)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let chat = chat_id.map_or(serde_json::Value::Null, |id| {
        serde_json::Value::String(id.into())
    });
    steps
        .iter()
        .map(|step| koru_protocol::DriveStep {
            args: step.args.iter().map(|a| substitute(a, &chat)).collect(),
            ..step.clone()
        })
        .collect()
}

impl<C: Clock> App<C> {
    /// The connected IDE window that holds chat `chat_id`: the window of the newest drive
    /// whose prompt was seen in that chat (a window's plugin does not name its chats).
    fn window_holding_chat(&self, chat_id: &str) -> Option<String> {
        self.drives
            .iter()
            // A drive into an agent's chat panel held the agent's chat, not the IDE's.
            .filter(|d| d.agent.is_none() && d.agent_chat.is_none())
            .filter(|d| self.sessions.contains_key(&d.session_id))
            .filter(|d| {
                d.observation.as_ref().is_some_and(|o| {
                    o.chat_id == chat_id && o.stage != koru_protocol::ObservedStage::Ambiguous
                })
            })
            .max_by_key(|d| d.created_at_ms)
            .map(|d| d.session_id.clone())
    }

    pub(super) fn on_drive_create(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        create: DriveCreate,
        now: u64,
    ) {
        self.accept_drive(conn_id, id, create, DriveOrigin::Asked, now);
    }

    /// Checks, plans and queues a new drive, answering `conn_id` as `origin` asks.
    pub(super) fn accept_drive(
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
        if let koru_protocol::Target::Chat(chat_id) = &create.target {
            // An IDE window holds the chat when a drive through it was seen in that chat.
            if let Some(session_id) = self.window_holding_chat(chat_id) {
                tracing::debug!(chat = %chat_id, session_id, "the chat is held by a window");
                let mut create = create;
                create.target = koru_protocol::Target::Session(session_id);
                self.accept_drive(conn_id, id, create, origin, now);
                return;
            }
        }
        if create.target.is_terminal_agent()
            || matches!(create.target, koru_protocol::Target::Chat(_))
        {
            self.accept_agent_drive(conn_id, id, create, origin);
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
            target => match resolve_target(target, self.sessions.values().map(Box::as_ref)) {
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
        let target = SessionTarget {
            session_id,
            window,
            extra_pids,
            agent_chat: None,
            agent_chat_id: None,
        };
        self.accept_session_drive(conn_id, id, create, origin, target, now);
    }

    /// Checks, plans and queues a drive whose target is resolved to a plugin session (or
    /// a plugin-less window: empty session id).
    pub(super) fn accept_session_drive(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        create: DriveCreate,
        origin: DriveOrigin,
        target: SessionTarget,
        now: u64,
    ) {
        let SessionTarget {
            session_id,
            window,
            extra_pids,
            agent_chat,
            agent_chat_id,
        } = target;
        if let Err(error) = self.check_room(&session_id, create.prompt.len()) {
            self.send_error(conn_id, id, error);
            return;
        }
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
        let mut candidates = self.plan(
            &session_id,
            window.is_some(),
            &create.options,
            agent_chat.as_deref(),
        );
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
        drive.agent_chat = agent_chat;
        drive.agent_chat_id = agent_chat_id;
        drive.window = window;
        drive.extra_pids = extra_pids;
        drive.workspaces = self
            .sessions
            .get(&session_id)
            .map(|s| s.window.workspace_folders.clone())
            .unwrap_or_default();
        let drive_id = drive.drive_id.clone();
        // One line per drive at info, when it ends (its route and time); the rest at debug
        // (the journal, when on, records every stage).
        tracing::debug!(
            drive_id = %drive_id,
            session_id = %session_id,
            prompt_chars = drive.prompt_chars,
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
        let busy = busy_fail.then_some(
            "the chat is busy (replying, waiting for input, or another drive is running) and the drive asked to fail fast",
        );
        if !self.register_drive(drive, conn_id, id, origin, busy, now) {
            return;
        }
        if session_id.is_empty() {
            self.start_next_route(&drive_id, now);
            return;
        }
        if let Some(session) = self.sessions.get_mut(&session_id) {
            let bytes = self.drives.get(&drive_id).map_or(0, |d| d.prompt.len());
            session.queued_drives.push_back(drive_id.clone());
            session.queued_prompt_bytes += bytes;
            self.queued_prompt_bytes += bytes;
        }
        self.pump(&session_id, now);
    }

    /// Keeps an accepted drive: journaled first (a journal that cannot be written refuses
    /// it), then answered; a drive that asked to fail fast on a busy chat (`busy` says why)
    /// ends at once. Returns whether the drive goes on to its queue.
    pub(super) fn register_drive(
        &mut self,
        drive: DriveRecord,
        conn_id: ConnId,
        id: Option<RequestId>,
        origin: DriveOrigin,
        busy: Option<&str>,
        now: u64,
    ) -> bool {
        let drive_id = drive.drive_id.clone();
        self.drives.insert(drive);
        if let Err(error) = self.journal_accepted(&drive_id, conn_id, now) {
            self.drives.withdraw(&drive_id);
            self.send_error(conn_id, id, error);
            return false;
        }
        self.answer_accepted(conn_id, id, &drive_id, origin);
        if let Some(why) = busy {
            self.finish_drive(
                &drive_id,
                DriveState::Failed,
                Some(Blocker::new(koru_protocol::blocker::CHAT_BUSY, why)),
                now,
            );
            return false;
        }
        true
    }

    /// Answers the request that created a drive: a `drive_result`, or for a retry the
    /// recovery's result (and the recovery's announcement); the drive is published.
    pub(super) fn answer_accepted(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        drive_id: &str,
        origin: DriveOrigin,
    ) {
        let Some(info) = self.drives.get(drive_id).map(|d| d.info()) else {
            return;
        };
        match origin {
            DriveOrigin::Asked => {
                self.send(
                    conn_id,
                    Envelope::with_id(id, Message::DriveResult(DriveResult { drive: info })),
                );
                self.publish_drive(drive_id);
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
                self.publish_drive(drive_id);
                self.announce_recovery("retry_drive", conn_id, &by, true, summary);
            }
        }
    }

    /// Whether a drive of `prompt_bytes` to `session_id` fits under the caps: the
    /// session's drives that have not ended, the prompt bytes queued over all sessions,
    /// and the session's share of those (half: one session's flood of long prompts leaves
    /// room for the others).
    fn check_room(&self, session_id: &str, prompt_bytes: usize) -> Result<(), ErrorMessage> {
        if let Some(session) = self.sessions.get(session_id) {
            let share = self.config.max_pending_prompt_bytes / 2;
            if session.queued_prompt_bytes + prompt_bytes > share {
                return Err(ErrorMessage::new(
                    ErrorCode::QueueFull,
                    format!(
                        "session {session_id} holds {} bytes of queued prompts; {prompt_bytes} more would pass its share, half of --max-pending-prompt-bytes ({}); nothing was queued: retry when its queued drives have been sent",
                        session.queued_prompt_bytes, self.config.max_pending_prompt_bytes
                    ),
                ));
            }
            let held = session.queued_drives.len() + usize::from(session.active_drive.is_some());
            if held >= self.config.max_queued_drives {
                return Err(ErrorMessage::new(
                    ErrorCode::QueueFull,
                    format!(
                        "session {session_id} already holds {held} drives that have not ended, its limit (--max-queued-drives {}); nothing was queued: retry when some have ended, or cancel them",
                        self.config.max_queued_drives
                    ),
                ));
            }
        }
        if self.queued_prompt_bytes + prompt_bytes > self.config.max_pending_prompt_bytes {
            return Err(ErrorMessage::new(
                ErrorCode::QueueFull,
                format!(
                    "the daemon holds {} bytes of queued prompts; {prompt_bytes} more would pass its limit (--max-pending-prompt-bytes {}); nothing was queued: retry when queued drives have been sent",
                    self.queued_prompt_bytes, self.config.max_pending_prompt_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Takes a drive's prompt bytes off the queued total (it left its session's queue).
    pub(super) fn unqueued(&mut self, drive_id: &str) {
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let bytes = drive.prompt.len();
        if let Some(session) = self.sessions.get_mut(&drive.session_id) {
            session.queued_prompt_bytes = session.queued_prompt_bytes.saturating_sub(bytes);
        }
        self.queued_prompt_bytes = self.queued_prompt_bytes.saturating_sub(bytes);
    }

    /// The candidate routes for a drive to `session_id` (empty: a plugin-less window): the
    /// session's remembered plan for these options when it still holds
    /// (`planner::plan_remembered`).
    pub(super) fn plan(
        &mut self,
        session_id: &str,
        has_window: bool,
        options: &koru_protocol::DriveOptions,
        agent: Option<&str>,
    ) -> Vec<Arc<Candidate>> {
        let platform =
            crate::doctor::probe::current_platform().unwrap_or(koru_registry::Platform::Linux);
        let registry = &self.registry;
        let injections = &self.injections;
        let probe = |interface: &str| injections.probe(interface);
        let product = self.sessions.get(session_id).and_then(|s| s.product());
        let Some(product) = product else {
            let session = self.sessions.get(session_id);
            let input = PlanInput {
                registry,
                product: None,
                capabilities: session.map(|s| s.capabilities.as_slice()).unwrap_or(&[]),
                has_window,
                plugin_connected: session.is_some(),
                platform,
                submit: options.submit,
                new_chat: options.new_chat,
                agent,
            };
            return plan(&input, &probe).into_iter().map(Arc::new).collect();
        };
        let session = &self.sessions[session_id];
        let product_name = product.to_string();
        let input = PlanInput {
            registry,
            product: Some(&product_name),
            capabilities: &session.capabilities,
            has_window,
            plugin_connected: true,
            platform,
            submit: options.submit,
            new_chat: options.new_chat,
            agent,
        };
        let key = PlanKey {
            registry_generation: self.registry_generation,
            has_window,
            platform,
            submit: options.submit,
            new_chat: options.new_chat,
            agent: agent.map(str::to_string),
        };
        self.plan_memory.plan(product, key, &input, &probe)
    }

    /// Tries the next usable route of a drive, or ends it when none is left (the choice is
    /// `drive::fallback::next_route`'s).
    pub(super) fn start_next_route(&mut self, drive_id: &str, now: u64) {
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        if drive.is_terminal() {
            return;
        }
        let conn_id = self.session_conn.get(&drive.session_id).copied();
        let next = next_route(&mut drive.candidates, &drive.attempts, conn_id.is_some());
        for skipped in &next.skipped {
            drive.skip(skipped);
        }
        match next.choice {
            RouteChoice::Exhausted(blocker) => {
                self.finish_drive(drive_id, DriveState::Failed, Some(blocker), now);
            }
            RouteChoice::AskPlugin(candidate) => {
                let Some(conn_id) = conn_id else {
                    return;
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
                    steps: with_chat(&candidate.steps, drive.agent_chat_id.as_deref()),
                };
                tracing::debug!(drive_id, route = candidate.route.as_str(), interface = %candidate.interface, "trying route");
                drive.begin_attempt(candidate, now);
                drive.step_deadline_ms = Some(now + self.config.step_timeout_ms);
                self.send(conn_id, Envelope::new(Message::Drive(order)));
                self.publish_drive(drive_id);
            }
            RouteChoice::Terminal(candidate) => {
                tracing::debug!(drive_id, interface = %candidate.interface, "typing into the terminal agent");
                drive.begin_attempt(candidate, now);
                self.publish_drive(drive_id);
                self.start_typing(drive_id);
            }
            RouteChoice::Inject(candidate) => {
                tracing::info!(drive_id, interface = %candidate.interface, "trying OS injection");
                drive.begin_attempt(candidate, now);
                self.publish_drive(drive_id);
                self.use_keyboard(drive_id);
            }
        }
    }

    /// Starts the drive's keyboard work (its OS injection, or its route's submit key) now,
    /// or after the one running: keyboard input is global, one at a time.
    pub(super) fn use_keyboard(&mut self, drive_id: &str) {
        if self.injecting.is_some() {
            self.injection_waiting.push_back(drive_id.to_string());
        } else {
            self.start_injection(drive_id);
        }
    }

    pub(super) fn start_injection(&mut self, drive_id: &str) {
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let Some(candidate) = drive.current.clone() else {
            return;
        };
        let candidate = Arc::unwrap_or_clone(candidate);
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
            let time_left_ms = drive.deadline_ms.saturating_sub(self.clock.now_ms());
            let window = drive.window.clone().unwrap_or_default();
            let extra_pids = drive.extra_pids.clone();
            let session_id = drive.session_id.clone();
            let plugin = self.plugin_focus(&session_id);
            self.injections.start_key_press(KeyPressJob {
                drive_id: drive_id.to_string(),
                injectors: key.injectors,
                window,
                extra_pids,
                window_class: candidate.window_class,
                plugin_focused,
                chord: key.chord,
                plugin,
                time_left_ms,
            });
            return;
        }
        let mut window = drive.window.clone().unwrap_or_default();
        if window.title.is_none() {
            window.title = candidate.window_title.clone();
        }
        let time_left_ms = drive.deadline_ms.saturating_sub(self.clock.now_ms());
        let extra_pids = drive.extra_pids.clone();
        let text = drive.prompt.clone();
        let submit = drive.options.submit;
        let session_id = drive.session_id.clone();
        let plugin_clipboard = self.sessions.get(&session_id).is_some_and(|session| {
            session
                .capabilities
                .contains(&koru_protocol::Capability::ClipboardIo)
        });
        let plugin = self.plugin_focus(&session_id);
        self.injections.start(InjectionJob {
            drive_id: drive_id.to_string(),
            interface: candidate.interface,
            window,
            extra_pids,
            text,
            submit,
            paste_chord: candidate.paste_chord,
            submit_chord: candidate.submit_chord,
            paste_chord_by_class: candidate.paste_chord_by_class,
            window_class: candidate.window_class,
            plugin,
            time_left_ms,
            plugin_clipboard,
        });
    }

    /// What the drive's plugin says about its window's focus, live (`None` for a window
    /// without a plugin).
    fn plugin_focus(&mut self, session_id: &str) -> Option<crate::drive::portal::PluginFocus> {
        self.sessions
            .get_mut(session_id)
            .filter(|session| session.role == koru_protocol::Role::Plugin)
            .map(|session| session.plugin_focus())
    }

    pub(super) fn on_injection_finished(&mut self, outcome: InjectionOutcome) {
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
            if drive.agent_chat.is_some() {
                // The agent recorded the prompt before the key press's own answer came back.
                tracing::debug!(drive_id = %drive_id, reached = ?outcome.reached, "the submit key's answer after the agent's record");
            } else {
                tracing::warn!(drive_id = %drive_id, reached = ?outcome.reached, "an injection finished after its drive had ended");
            }
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
        if let Some(attempt) = drive
            .attempts
            .iter_mut()
            .rev()
            .find(|a| a.outcome == AttemptOutcome::Running)
        {
            attempt.text = outcome.text;
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
            Some(mut blocker) => {
                let through_portal = drive
                    .current
                    .as_ref()
                    .is_some_and(|c| c.interface == crate::drive::portal::INTERFACE);
                if through_portal && blocker.code == koru_protocol::blocker::CLIPBOARD_UNAVAILABLE {
                    // Which portal could not carry it, so that the person knows what to change.
                    if let Some(portal) = self.injections.portal_status() {
                        blocker.detail.push_str(&format!(
                            " (this desktop's portal: RemoteDesktop version {}, {})",
                            portal
                                .remote_desktop_version
                                .map_or_else(|| "unknown".to_string(), |v| v.to_string()),
                            if portal.clipboard == Some(true) {
                                "a Clipboard interface it did not share with Koru's session"
                            } else {
                                "no Clipboard interface (xdg-desktop-portal before 1.18)"
                            }
                        ));
                    }
                }
                self.route_failed(&drive_id, blocker, now)
            }
        }
    }

    /// Ends a drive the daemon's own keys delivered (OS injection, or a plugin route's
    /// submit key) as `done`, `unverified`: nothing inside the IDE confirmed it.
    pub(super) fn finish_unverified(&mut self, drive_id: &str, now: u64) {
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
    pub(super) fn on_submit_key_pressed(&mut self, outcome: InjectionOutcome, now: u64) {
        let drive_id = outcome.drive_id;
        let Some(drive) = self.drives.get_mut(&drive_id) else {
            return;
        };
        let record_ms = drive.current.as_ref().and_then(|c| c.agent_record_ms);
        if let Some(record_ms) = record_ms {
            // A route into an agent's chat (the Claude Code panel): the key press proves
            // nothing by itself; the agent's own record of the prompt does.
            match outcome.error {
                None if outcome.reached == Reached::Submitted => {
                    // Before the drive's deadline, so that it ends `needs_user`, not `timed_out`.
                    let due = (now + record_ms).min(drive.deadline_ms.saturating_sub(1).max(now));
                    drive.record_due_ms = Some(due);
                    tracing::info!(drive_id = %drive_id, record_ms, "the submit key was pressed into the plugin's focused window; waiting for the agent's own record of the prompt");
                    self.publish_drive(&drive_id);
                }
                error => {
                    let cause = error.map_or_else(
                        || "the key press ended without pressing the key".to_string(),
                        |b| format!("{}: {}", b.code, b.detail),
                    );
                    let chat = agent_chat_place(drive.agent_chat.as_deref());
                    let blocker = Blocker::new(
                        koru_protocol::blocker::NEEDS_USER,
                        format!("the prompt is in {chat}'s input, unsent: Koru could not press the submit key there ({cause}); press Enter there to send it"),
                    );
                    self.route_failed(&drive_id, blocker, now);
                }
            }
            return;
        }
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

    /// The current route failed: fall back to the next one unless `drive::fallback::
    /// after_failure` says stop (the prompt may already be in the chat: no duplicates).
    pub(super) fn route_failed(&mut self, drive_id: &str, blocker: Blocker, now: u64) {
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
        if let AfterFailure::Stop(blocker) = after_failure(&blocker, may_have_delivered) {
            drive.abandon_rest();
            self.finish_drive(drive_id, DriveState::Failed, Some(blocker), now);
            return;
        }
        self.publish_drive(drive_id);
        self.start_next_route(drive_id, now);
    }

    /// The registry's recovery hint for a chat that is not ready (on the VS Code-family
    /// plugin interface).
    pub(super) fn chat_not_ready_hint(&self) -> Option<String> {
        self.registry
            .interfaces()
            .iter()
            .flat_map(|i| i.recovery_for(koru_registry::BlockerCode::ChatNotReady))
            .next()
            .map(|r| format!("{}: {}", r.label, r.does))
    }

    /// The registry's recovery hint for a blocker on the drive's current route.
    pub(super) fn hint_for(&self, drive_id: &str, blocker: &Blocker) -> Option<String> {
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

    pub(super) fn on_drive_cancel(
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

    pub(super) fn on_ack(
        &mut self,
        conn_id: ConnId,
        session_id: &str,
        ack: koru_protocol::Ack,
        now: u64,
    ) {
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
        let refusal = ack.refusal;
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
                tracing::info!(
                    drive_id = %ack.drive_id,
                    state = %drive.state,
                    route = drive.route.as_str(),
                    interface = drive.current.as_ref().map_or("", |c| c.interface.as_str()),
                    ms = now.saturating_sub(drive.created_at_ms),
                    "drive finished"
                );
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
            AckOutcome::StepFailed(blocker)
                if refusal == Some(koru_protocol::Refusal::NotReady)
                    && blocker.code == blocker::CHAT_REFUSED =>
            {
                self.refused_not_ready(&ack.drive_id, blocker, now)
            }
            AckOutcome::StepFailed(blocker) => self.route_failed(&ack.drive_id, blocker, now),
        }
    }

    /// The chat refused the prompt before taking it because it was not ready yet (a fresh
    /// window's chat without a usable model): nothing was submitted, so the drive is held
    /// and the same route is tried again after a wait (`drive::fallback::
    /// resend_after_not_ready`), while the window's other drives stay queued behind it.
    /// Out of resends or time, it fails with the refusal as any `chat_refused` does.
    fn refused_not_ready(&mut self, drive_id: &str, refusal: Blocker, now: u64) {
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        let resend_at = if drive.may_have_delivered() {
            None
        } else {
            resend_after_not_ready(drive.resends, now, drive.deadline_ms)
        };
        let Some(resend_at) = resend_at else {
            let blocker = if drive.resends > 0 {
                Blocker::new(
                    &refusal.code,
                    format!(
                        "{} (the chat refused the prompt {} times before taking it, as not ready; it was not sent again within the drive's deadline)",
                        refusal.detail,
                        drive.resends + 1
                    ),
                )
            } else {
                refusal
            };
            self.route_failed(drive_id, blocker, now);
            return;
        };
        let Some(route) = drive.current.take() else {
            return;
        };
        let wait = resend_at.saturating_sub(now);
        let note = format!(
            "refused before the chat took the prompt (not ready yet); sent again in {:.1} s",
            wait as f64 / 1000.0
        );
        drive.end_attempt(
            AttemptOutcome::Failed,
            Some(refusal.clone()),
            Some(note),
            now,
        );
        drive.step_deadline_ms = None;
        drive.candidates.push_front(route);
        drive.resends += 1;
        drive.resend_at_ms = Some(resend_at);
        drive.waiting = Some(Blocker::new(
            blocker::CHAT_NOT_READY,
            format!(
                "waits: the chat refused the prompt before taking it ({}); it is sent again at resend {} of {}",
                refusal.detail,
                drive.resends,
                crate::drive::fallback::NOT_READY_RESEND_WAITS_MS.len()
            ),
        ));
        tracing::info!(drive_id, detail = %refusal.detail, wait_ms = wait, resend = drive.resends, "the chat was not ready: the drive is sent again");
        self.publish_drive(drive_id);
    }

    /// Sends again a drive held after a `not_ready` refusal, when its wait is over and the
    /// window's plugin does not say its chat is not ready.
    pub(super) fn resend_held(&mut self, drive_id: &str, now: u64) {
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let not_ready = self
            .sessions
            .get(&drive.session_id)
            .and_then(|s| s.chat_readiness.as_ref())
            .is_some_and(|r| !r.ready);
        if not_ready {
            // The plugin now says so itself: wait for its `chat_readiness` (or the deadline).
            return;
        }
        let drive = self.drives.get_mut(drive_id).expect("checked above");
        drive.resend_at_ms = None;
        drive.waiting = None;
        self.start_next_route(drive_id, now);
    }

    /// Sends the next queued drive of a session when it has none running, and otherwise
    /// records on each waiting drive why it waits.
    pub(super) fn pump(&mut self, session_id: &str, now: u64) {
        if session_id.starts_with("t_") {
            self.pump_agent(session_id, now);
            return;
        }
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
        self.unqueued(&drive_id);
        if let Some(drive) = self.drives.get_mut(&drive_id) {
            drive.waiting = None;
        }
        self.start_next_route(&drive_id, now);
    }

    /// Frees the session of a drive that ended.
    pub(super) fn release(&mut self, session_id: &str, drive_id: &str) {
        if session_id.starts_with("t_") {
            self.release_agent(session_id, drive_id);
            return;
        }
        let mut was_queued = false;
        if let Some(session) = self.sessions.get_mut(session_id) {
            if session.active_drive.as_deref() == Some(drive_id) {
                session.active_drive = None;
            }
            let before = session.queued_drives.len();
            session.queued_drives.retain(|queued| queued != drive_id);
            was_queued = session.queued_drives.len() < before;
        }
        if was_queued {
            self.unqueued(drive_id);
        }
    }

    /// Ends a drive from the daemon's side (cancel, timeout, shutdown) and tells its plugin.
    pub(super) fn finish_drive(
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

    pub(super) fn publish_drive(&mut self, drive_id: &str) {
        let now = self.clock.now_ms();
        self.journal_drive(drive_id, now);
        if let Some(drive) = self.drives.get(drive_id) {
            let drive = drive.info();
            self.publish(StreamEvent::DriveUpdated { drive });
        }
        self.tell_watch_drive(drive_id);
        self.want_evidence(drive_id);
    }
}

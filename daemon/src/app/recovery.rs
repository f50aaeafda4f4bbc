//! Recovery actions in the daemon core: `recovery.run` from a controller is checked here and answered with `recovery.result`; the slow ones (doctor's probes, reading the registry, focusing a window) run off the event loop through a `RecoveryRunner`, and every action is logged with the controller that asked and published as `recovery_performed`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use koru_protocol::{
    Blocker, DriveCreate, DriveState, Envelope, ErrorCode, ErrorMessage, Message, RecoveryAction,
    RecoveryResult, RequestId, Role, Route, StreamEvent, Target,
};
use tokio::sync::mpsc;

use super::{App, ConnId, DaemonEvent};
use crate::clock::Clock;
use crate::drive::inject::FocusJob;
use crate::registry::LayerPaths;

/// Why a drive is being created.
#[derive(Debug, Clone)]
pub enum DriveOrigin {
    /// A controller's `drive.create`.
    Asked,
    /// The recovery action `retry_drive` of drive `of`, by `route` when given, asked by `by`.
    Retry {
        of: String,
        route: Option<Route>,
        by: String,
    },
}

/// Who to answer when a slow action finishes.
#[derive(Debug, Clone)]
pub struct RecoveryTicket {
    pub conn_id: ConnId,
    pub id: Option<RequestId>,
    pub action: &'static str,
    pub by: String,
}

/// The slow part of an action.
#[derive(Debug, Clone)]
pub enum RecoveryJob {
    Reprobe,
    ReloadRegistry,
    FocusWindow(FocusJob),
}

/// What a slow action found.
#[derive(Debug)]
pub enum RecoveryDone {
    /// Doctor ran: its verdict line, or why it could not run.
    Probed(Result<String, String>),
    /// The registry layers as read now.
    Reloaded(Box<koru_registry::Loaded>),
    /// The window was focused (what was focused), or why not.
    Focused(Result<String, Blocker>),
}

/// Runs the slow part of recovery actions; the result comes back as
/// `DaemonEvent::RecoveryFinished`.
pub trait RecoveryRunner: Send + Sync {
    fn start(&self, ticket: RecoveryTicket, job: RecoveryJob);
}

/// Runs recovery jobs for real: doctor against this daemon's socket, the registry files,
/// the window system.
pub struct SystemRecovery {
    events: mpsc::Sender<DaemonEvent>,
    socket: PathBuf,
    layers: LayerPaths,
    lock: crate::desktop::LockDetector,
}

impl SystemRecovery {
    pub fn new(
        events: mpsc::Sender<DaemonEvent>,
        socket: PathBuf,
        layers: LayerPaths,
        lock: crate::desktop::LockDetector,
    ) -> Self {
        SystemRecovery {
            events,
            socket,
            layers,
            lock,
        }
    }
}

impl RecoveryRunner for SystemRecovery {
    fn start(&self, ticket: RecoveryTicket, job: RecoveryJob) {
        let events = self.events.clone();
        let finish = move |done: RecoveryDone| async move {
            let _ = events
                .send(DaemonEvent::RecoveryFinished {
                    ticket,
                    done: Box::new(done),
                })
                .await;
        };
        match job {
            RecoveryJob::Reprobe => {
                let socket = self.socket.clone();
                let layers = self.layers.clone();
                tokio::spawn(async move {
                    let report =
                        crate::doctor::build_report(&socket, &[], Duration::from_secs(5), &layers)
                            .await;
                    let done = match report {
                        Ok(report) => Ok(verdict_line(&report)),
                        Err(error) => Err(format!("{error:#}")),
                    };
                    finish(RecoveryDone::Probed(done)).await;
                });
            }
            RecoveryJob::ReloadRegistry => {
                let layers = self.layers.clone();
                tokio::spawn(async move {
                    let loaded =
                        tokio::task::spawn_blocking(move || crate::registry::load_layers(&layers))
                            .await;
                    match loaded {
                        Ok(loaded) => finish(RecoveryDone::Reloaded(Box::new(loaded))).await,
                        Err(error) => {
                            tracing::error!(%error, "reading the registry panicked");
                        }
                    }
                });
            }
            RecoveryJob::FocusWindow(job) => {
                let lock = self.lock.clone();
                tokio::spawn(async move {
                    let locked = lock.check().await.locked();
                    let focused = tokio::task::spawn_blocking(move || {
                        crate::drive::inject::focus_window(&job, locked.as_deref())
                    })
                    .await
                    .unwrap_or_else(|error| {
                        Err(Blocker::new(
                            "injector_failed",
                            format!("focusing panicked: {error}"),
                        ))
                    });
                    finish(RecoveryDone::Focused(focused)).await;
                });
            }
        }
    }
}

/// Doctor's counts and verdict in one line.
fn verdict_line(report: &crate::doctor::DoctorReport) -> String {
    let s = &report.summary;
    format!(
        "{} ({} ok, {} degraded, {} unavailable)",
        s.verdict, s.ok, s.degraded, s.unavailable
    )
}

/// Records the jobs it is given instead of running them (unit tests).
#[derive(Clone, Default)]
pub struct RecordingRecovery {
    pub started: Arc<Mutex<Vec<(RecoveryTicket, RecoveryJob)>>>,
}

impl RecoveryRunner for RecordingRecovery {
    fn start(&self, ticket: RecoveryTicket, job: RecoveryJob) {
        if let Ok(mut started) = self.started.lock() {
            started.push((ticket, job));
        }
    }
}

/// The OS injectors that can focus a window, best first.
const FOCUS_INTERFACES: &[&str] = &[
    "os_injector_xdotool",
    "os_injector_wtype",
    "os_injector_ydotool",
    "os_injector_enigo",
];

impl<C: Clock> App<C> {
    /// The controller behind `conn_id`, as logs and events name it: its client name and pid.
    pub(super) fn who(&self, conn_id: ConnId) -> String {
        let Some(connection) = self.connections.get(&conn_id) else {
            return "unknown".into();
        };
        let name = connection
            .session_id
            .as_ref()
            .and_then(|s| self.sessions.get(s))
            .map(|s| s.client.name.clone())
            .unwrap_or_else(|| "unknown".into());
        match connection.peer.pid {
            Some(pid) => format!("{name} (pid {pid})"),
            None => name,
        }
    }

    /// Logs an action that was carried out (or tried) and tells subscribers.
    pub(super) fn announce_recovery(
        &mut self,
        action: &str,
        conn_id: ConnId,
        by: &str,
        ok: bool,
        summary: String,
    ) {
        tracing::info!(action, by, ok, %summary, "recovery action");
        let mut fields = serde_json::Map::new();
        fields.insert("action".into(), action.into());
        fields.insert("ok".into(), ok.into());
        fields.insert("summary".into(), summary.clone().into());
        fields.insert("asked_by".into(), by.into());
        let asker = self.asker(conn_id);
        self.journal_event(crate::journal::KIND_RECOVERY, fields, asker);
        self.publish(StreamEvent::RecoveryPerformed {
            action: action.to_string(),
            by: by.to_string(),
            ok,
            summary,
        });
    }

    /// Answers `recovery.result` and announces it.
    fn finish_recovery(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        by: &str,
        result: RecoveryResult,
    ) {
        self.announce_recovery(
            &result.action,
            conn_id,
            by,
            result.ok,
            result.summary.clone(),
        );
        self.send(
            conn_id,
            Envelope::with_id(id, Message::RecoveryResult(result)),
        );
    }

    /// A refused action: an `error` reply, logged with who asked.
    fn refuse_recovery(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        action: &str,
        by: &str,
        error: ErrorMessage,
    ) {
        tracing::info!(action, by, code = ?error.code, message = %error.message, "recovery action refused");
        self.send_error(conn_id, id, error);
    }

    pub(super) fn on_recovery_run(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        action: RecoveryAction,
        now: u64,
    ) {
        let by = self.who(conn_id);
        let name = action.name();
        tracing::info!(action = name, by = %by, "recovery action asked");
        match action {
            RecoveryAction::Reprobe {} => self.recovery.start(
                RecoveryTicket {
                    conn_id,
                    id,
                    action: name,
                    by,
                },
                RecoveryJob::Reprobe,
            ),
            RecoveryAction::ReloadRegistry {} => self.recovery.start(
                RecoveryTicket {
                    conn_id,
                    id,
                    action: name,
                    by,
                },
                RecoveryJob::ReloadRegistry,
            ),
            RecoveryAction::CancelDrive { drive_id } => {
                let Some(drive) = self.drives.get(&drive_id) else {
                    let error = super::delivery::unknown_drive(&drive_id);
                    return self.refuse_recovery(conn_id, id, name, &by, error);
                };
                if drive.is_terminal() {
                    let message = format!(
                        "drive {drive_id} already ended as {}; nothing to cancel",
                        drive.state
                    );
                    let error = ErrorMessage::new(ErrorCode::DriveFinished, message);
                    return self.refuse_recovery(conn_id, id, name, &by, error);
                }
                self.finish_drive(
                    &drive_id,
                    DriveState::Cancelled,
                    Some(Blocker::new(
                        "cancelled",
                        format!("cancelled by {by} (recovery action)"),
                    )),
                    now,
                );
                let drive = self.drives.get(&drive_id).map(|d| d.info());
                self.finish_recovery(
                    conn_id,
                    id,
                    &by,
                    did(name, format!("drive {drive_id} cancelled"), drive),
                );
            }
            RecoveryAction::RetryDrive { drive_id, route } => match self.retry_target(&drive_id) {
                Ok(create) => self.accept_drive(
                    conn_id,
                    id,
                    create,
                    super::DriveOrigin::Retry {
                        of: drive_id,
                        route,
                        by,
                    },
                    now,
                ),
                Err(error) => self.refuse_recovery(conn_id, id, name, &by, error),
            },
            RecoveryAction::ReconnectPlugin { session_id } => {
                let conn = match self.plugin_session(&session_id) {
                    Ok(_) => self.session_conn.get(&session_id).copied(),
                    Err(error) => return self.refuse_recovery(conn_id, id, name, &by, error),
                };
                let Some(plugin_conn) = conn.and_then(|c| self.connections.get(&c)) else {
                    let error = no_session(&session_id);
                    return self.refuse_recovery(conn_id, id, name, &by, error);
                };
                plugin_conn.say_bye_and_close(RECONNECT_REQUESTED);
                self.finish_recovery(
                    conn_id,
                    id,
                    &by,
                    did(name, format!(
                            "asked the plugin of session {session_id} to reconnect; it comes back as a new session"
                        ), None),
                );
            }
            RecoveryAction::FocusWindow { session_id } => {
                let session = match self.plugin_session(&session_id) {
                    Ok(session) => session,
                    Err(error) => return self.refuse_recovery(conn_id, id, name, &by, error),
                };
                let Some(pid) = session.window.pid.or(session.peer_pid) else {
                    let result = not_done(
                        name,
                        Blocker::new(
                            "focus_mismatch",
                            "the plugin did not report its window's process id",
                        ),
                    );
                    return self.finish_recovery(conn_id, id, &by, result);
                };
                let job = FocusJob {
                    interface: String::new(),
                    window: koru_protocol::WindowTarget {
                        pid: Some(pid),
                        title: None,
                    },
                    extra_pids: session.window.parent_pid.into_iter().collect(),
                };
                let mut first_blocker = None;
                let mut chosen = None;
                for interface in FOCUS_INTERFACES {
                    match self.injections.probe(interface) {
                        Ok(()) => {
                            chosen = Some(interface.to_string());
                            break;
                        }
                        Err(blocker) => {
                            first_blocker.get_or_insert(blocker);
                        }
                    }
                }
                match chosen {
                    Some(interface) => self.recovery.start(
                        RecoveryTicket {
                            conn_id,
                            id,
                            action: name,
                            by,
                        },
                        RecoveryJob::FocusWindow(FocusJob { interface, ..job }),
                    ),
                    None => {
                        let blocker = first_blocker.unwrap_or_else(|| {
                            Blocker::new("no_display", "no injector can focus windows here")
                        });
                        let result = not_done(name, blocker);
                        self.finish_recovery(conn_id, id, &by, result);
                    }
                }
            }
        }
    }

    /// A connected plugin session.
    fn plugin_session(
        &self,
        session_id: &str,
    ) -> Result<&super::sessions::SessionRecord, ErrorMessage> {
        self.sessions
            .get(session_id)
            .map(Box::as_ref)
            .filter(|s| s.role == Role::Plugin)
            .ok_or_else(|| no_session(session_id))
    }

    /// What a retry of `drive_id` sends where, or why it must not be retried.
    pub(super) fn retry_target(&self, drive_id: &str) -> Result<DriveCreate, ErrorMessage> {
        let Some(drive) = self.drives.get(drive_id) else {
            return Err(super::delivery::unknown_drive(drive_id));
        };
        let refuse = |why: String| Err(ErrorMessage::new(ErrorCode::NotRetryable, why));
        if !drive.is_terminal() {
            return refuse(format!(
                "drive {drive_id} is still {}; cancel it first or wait for it to end",
                drive.state
            ));
        }
        if drive.state == DriveState::Done {
            return refuse(format!(
                "drive {drive_id} was delivered; retrying it would send the prompt twice"
            ));
        }
        let reached_paste = drive.history.iter().any(|stage| {
            !stage.state.is_terminal() && stage.state.rank() >= DriveState::Pasted.rank()
        }) || drive.attempts.iter().any(|attempt| {
            attempt
                .reached
                .is_some_and(|r| !r.is_terminal() && r.rank() >= DriveState::Pasted.rank())
        });
        if reached_paste {
            return refuse(format!(
                "drive {drive_id} got as far as pasting its prompt, so it may already have been submitted; check the chat and send again with `koru send` if it was not"
            ));
        }
        if let Some(retry) = self
            .drives
            .iter()
            .find(|d| d.retry_of.as_deref() == Some(drive_id))
        {
            return refuse(format!(
                "drive {drive_id} was already retried as {}; retry that one if it failed",
                retry.drive_id
            ));
        }
        // A session target whose plugin has since reconnected (new session id) is found
        // again by the workspace the drive was for.
        let target = match &drive.target {
            Target::Session(id) if !self.sessions.contains_key(id) => {
                match drive.workspaces.first() {
                    Some(workspace) => Target::Workspace(workspace.clone()),
                    None => drive.target.clone(),
                }
            }
            other => other.clone(),
        };
        Ok(DriveCreate {
            target,
            prompt: drive.prompt.clone(),
            options: drive.options,
        })
    }

    /// A slow action finished: answer who asked.
    pub(super) fn on_recovery_finished(&mut self, ticket: RecoveryTicket, done: RecoveryDone) {
        let result = match done {
            RecoveryDone::Probed(Ok(verdict)) => {
                did(ticket.action, format!("doctor ran again: {verdict}"), None)
            }
            RecoveryDone::Probed(Err(error)) => not_done(
                ticket.action,
                Blocker::new("probe_failed", format!("doctor could not run: {error}")),
            ),
            RecoveryDone::Reloaded(loaded) => {
                let problems = loaded.diagnostics.len();
                self.on_registry_changed(*loaded);
                if problems == 0 {
                    did(
                        ticket.action,
                        format!(
                            "registry reloaded: {} interfaces",
                            self.registry.interfaces().len()
                        ),
                        None,
                    )
                } else {
                    not_done(
                        ticket.action,
                        Blocker::new(
                            "registry_invalid",
                            format!(
                                "{problems} problem(s) in the registry files; the last good registry stays in use: {}",
                                self.registry_status.diagnostics.join("; ")
                            ),
                        ),
                    )
                }
            }
            RecoveryDone::Focused(Ok(what)) => did(ticket.action, what, None),
            RecoveryDone::Focused(Err(blocker)) => not_done(ticket.action, blocker),
        };
        self.finish_recovery(ticket.conn_id, ticket.id, &ticket.by, result);
    }
}

pub use koru_protocol::RECONNECT_REQUESTED;

fn no_session(session_id: &str) -> ErrorMessage {
    ErrorMessage::new(
        ErrorCode::NoTarget,
        format!("no connected plugin session {session_id} (`koru sessions` lists them)"),
    )
}

/// An action that did what it says.
fn did(action: &str, summary: String, drive: Option<koru_protocol::DriveInfo>) -> RecoveryResult {
    RecoveryResult {
        action: action.into(),
        ok: true,
        summary,
        blocker: None,
        drive,
    }
}

/// An action that could not act, and why.
fn not_done(action: &str, blocker: Blocker) -> RecoveryResult {
    RecoveryResult {
        action: action.into(),
        ok: false,
        summary: format!("{action} could not be done: {}", blocker.detail),
        blocker: Some(blocker),
        drive: None,
    }
}

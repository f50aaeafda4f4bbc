//! What the state machine tells an in-process watcher about drives that need the person (the desktop notifier, `notify/`): one `DriveNews` each time what a drive stands for changes (it waits for a chat that is not ready, it failed and why, its chat waits for input, it was delivered), and the notification policy whenever the registry changes. Sent without waiting: a full queue drops the news with a warning and never stalls the loop.

use koru_protocol::{DriveState, ObservedStage};
use koru_registry::{NotifyEvent, NotifyPolicy};
use tokio::sync::mpsc;

use super::drives::DriveRecord;
use super::App;
use crate::clock::Clock;

/// A drive that needs the person now (or was delivered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveNews {
    pub drive_id: String,
    pub event: NotifyEvent,
    /// The blocker's code (a failed or waiting drive).
    pub code: Option<String>,
    /// What happened, for a person: the blocker's detail, or what the chat waits for.
    pub detail: String,
    /// The product of the drive's window (`code-server`, `jetbrains-idea`).
    pub product: Option<String>,
    /// The first workspace folder of the drive's window.
    pub workspace: Option<String>,
    /// Whether `retry_drive` would take the drive now.
    pub retryable: bool,
    /// Whether the drive has not ended (`cancel_drive` applies).
    pub cancellable: bool,
    /// When the state machine saw it (what the notifier's latency is measured from).
    pub seen: std::time::Instant,
}

/// One message to the watcher.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchNews {
    /// The notification policy in force (sent first, and after each registry change).
    Policy(NotifyPolicy),
    Drive(Box<DriveNews>),
}

/// How many messages wait for the watcher at most.
pub const WATCH_QUEUE: usize = 1024;

/// What a drive's record stands for now, if anything: the event, its code and detail.
pub fn event_of(drive: &DriveRecord) -> Option<(NotifyEvent, Option<String>, String)> {
    let blocker = |event| {
        let (code, detail) = drive
            .blocker
            .as_ref()
            .map(|b| (Some(b.code.clone()), b.detail.clone()))
            .unwrap_or((None, String::new()));
        Some((event, code, detail))
    };
    match drive.state {
        DriveState::Failed | DriveState::TimedOut => {
            let code = drive.blocker.as_ref().map(|b| b.code.as_str());
            blocker(match code {
                Some("chat_refused") => NotifyEvent::ChatRefused,
                Some("chat_not_ready") => NotifyEvent::ChatNotReady,
                Some("screen_locked") => NotifyEvent::ScreenLocked,
                Some("focus_mismatch") => NotifyEvent::FocusMismatch,
                _ => NotifyEvent::Failed,
            })
        }
        // Someone cancelled it: they know.
        DriveState::Cancelled => None,
        DriveState::Done => {
            let observation = drive.observation.as_ref();
            let detail = || {
                observation
                    .and_then(|o| o.detail.clone())
                    .unwrap_or_default()
            };
            match observation.map(|o| o.stage) {
                Some(ObservedStage::NeedsInput) => Some((NotifyEvent::NeedsInput, None, detail())),
                Some(ObservedStage::Failed) => {
                    Some((NotifyEvent::Failed, Some("chat_failed".into()), detail()))
                }
                _ => Some((NotifyEvent::Done, None, String::new())),
            }
        }
        _ => drive
            .waiting
            .as_ref()
            .filter(|waiting| waiting.code == koru_protocol::blocker::CHAT_NOT_READY)
            .map(|waiting| {
                (
                    NotifyEvent::ChatNotReady,
                    Some(waiting.code.clone()),
                    waiting.detail.clone(),
                )
            }),
    }
}

impl<C: Clock> App<C> {
    /// Tells `watch` about drives that need the person, and the notification policy, from
    /// now on (by default nobody is told).
    pub fn with_drive_watch(mut self, watch: mpsc::Sender<WatchNews>) -> Self {
        let _ = watch.try_send(WatchNews::Policy(self.registry.policy.notify.clone()));
        self.drive_watch = Some(watch);
        self
    }

    /// Tells the watcher the policy after a registry change.
    pub(super) fn tell_watch_policy(&mut self) {
        let policy = self.registry.policy.notify.clone();
        self.tell_watch(WatchNews::Policy(policy));
    }

    /// Tells the watcher about a drive whose event changed since it was last told.
    pub(super) fn tell_watch_drive(&mut self, drive_id: &str) {
        if self.drive_watch.is_none() {
            return;
        }
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let Some((event, code, detail)) = event_of(drive) else {
            return;
        };
        let cancellable = !drive.is_terminal();
        // A drive that waited for its chat and then gave up is news again; the same
        // event twice is not.
        if drive.told == Some((event, !cancellable)) {
            return;
        }
        let workspace = drive.workspaces.first().cloned();
        let product = self
            .sessions
            .get(&drive.session_id)
            .and_then(|s| s.product())
            .map(|p| p.to_string());
        let retryable = !cancellable && self.retry_target(drive_id).is_ok();
        if let Some(drive) = self.drives.get_mut(drive_id) {
            drive.told = Some((event, !cancellable));
        }
        self.tell_watch(WatchNews::Drive(Box::new(DriveNews {
            drive_id: drive_id.to_string(),
            event,
            code,
            detail,
            product,
            workspace,
            retryable,
            cancellable,
            seen: std::time::Instant::now(),
        })));
    }

    fn tell_watch(&mut self, news: WatchNews) {
        let Some(watch) = &self.drive_watch else {
            return;
        };
        if let Err(error) = watch.try_send(news) {
            match error {
                mpsc::error::TrySendError::Full(_) => {
                    tracing::warn!("the desktop notifier is behind; a drive's news was dropped")
                }
                mpsc::error::TrySendError::Closed(_) => {
                    tracing::debug!("the desktop notifier has stopped");
                    self.drive_watch = None;
                }
            }
        }
    }
}

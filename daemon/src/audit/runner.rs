//! Audits run off the daemon's event loop for `chat.audit`: each on tokio's blocking pool, one at a time, its outcome reported back as an `AuditFinished` (the loop's own event through `From`).

use std::sync::Arc;

use tokio::sync::{mpsc, Semaphore};

use super::run::{audit, AuditError, AuditOutcome, AuditRequest};

/// A finished audit, for the daemon loop.
#[derive(Debug)]
pub struct AuditFinished {
    /// The number `AuditRunner::start` was given.
    pub ticket: u64,
    pub result: Result<AuditOutcome, AuditError>,
}

/// Runs audits off the event loop; each one's result comes back as an `AuditFinished`.
pub trait AuditRunner: Send + Sync {
    fn start(&self, ticket: u64, request: AuditRequest);
}

/// Runs audits for real, one at a time (an audit reads a whole chat).
pub struct SystemAuditRunner<E> {
    events: mpsc::Sender<E>,
    running: Arc<Semaphore>,
}

impl<E> SystemAuditRunner<E> {
    pub fn new(events: mpsc::Sender<E>) -> Self {
        SystemAuditRunner {
            events,
            running: Arc::new(Semaphore::new(1)),
        }
    }
}

impl<E: From<AuditFinished> + Send + 'static> AuditRunner for SystemAuditRunner<E> {
    fn start(&self, ticket: u64, request: AuditRequest) {
        let events = self.events.clone();
        let running = self.running.clone();
        tokio::spawn(async move {
            let _permit = running.acquire_owned().await;
            let dir = request.dir.clone();
            let result = tokio::task::spawn_blocking(move || {
                let result = audit(&request);
                crate::memory::return_freed_heap_pages();
                result
            })
            .await
            .unwrap_or_else(|error| {
                tracing::error!(%error, dir = %dir.display(), "an audit panicked");
                Err(AuditError::Unreadable {
                    path: dir,
                    why: "the audit stopped on a bug (the daemon's log says more)".into(),
                })
            });
            let _ = events.send(E::from(AuditFinished { ticket, result })).await;
        });
    }
}

/// Records the audits it is asked for instead of running them (unit tests).
#[derive(Clone, Default)]
pub struct RecordingAuditRunner {
    pub started: Arc<std::sync::Mutex<Vec<(u64, AuditRequest)>>>,
}

impl AuditRunner for RecordingAuditRunner {
    fn start(&self, ticket: u64, request: AuditRequest) {
        if let Ok(mut started) = self.started.lock() {
            started.push((ticket, request));
        }
    }
}

//! The socket server: binds the daemon's Unix socket (`socket.rs`), serves each connection in its own task (`connection.rs`), and accepts connections until shutdown; the wiring around it is `main_loop.rs`'s.

pub mod connection;
pub mod socket;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::DaemonEvent;
pub use connection::ConnectionConfig;
pub use socket::{BoundSocket, SocketError};

/// Accepts connections on `bound` until `shutdown`, each served in a task of `tracker`
/// that feeds the state machine through `events`. Accept failures (out of descriptors)
/// back off and are warned about once per streak.
pub async fn accept_connections(
    bound: &mut BoundSocket,
    events: &mpsc::Sender<DaemonEvent>,
    config: Arc<ConnectionConfig>,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) {
    let mut next_conn_id = 0u64;
    let mut accept_failures = 0u32;
    loop {
        use interprocess::local_socket::traits::tokio::Listener as _;
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = bound.listener.accept() => accepted,
        };
        match accepted {
            Ok(stream) => {
                if accept_failures > 0 {
                    tracing::info!(failures = accept_failures, "accepting connections again");
                    accept_failures = 0;
                }
                next_conn_id += 1;
                let stream = UnixStream::from(stream);
                tracker.spawn(connection::serve(
                    stream,
                    next_conn_id,
                    events.clone(),
                    config.clone(),
                ));
            }
            Err(err) => {
                // Out of descriptors (EMFILE) or similar: back off, warn once per streak.
                accept_failures += 1;
                if accept_failures == 1 {
                    tracing::warn!(error = %err, "accept failed; backing off until it works again");
                }
                let backoff = Duration::from_millis(50 * (1 << accept_failures.min(5)));
                tokio::time::sleep(backoff).await;
                continue;
            }
        }
    }
}

/// Each plugin holds a descriptor: raise the soft open-files limit to the hard one (many
/// sessions start programs with a soft limit of 1,024).
pub fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "raised the open-files limit"),
            Err(err) => tracing::warn!(error = %err, soft, "cannot raise the open-files limit"),
        },
        _ => {}
    }
}

//! The socket server: binds the daemon's Unix socket, accepts connections into per-connection tasks, runs the state machine, and shuts everything down gracefully.

pub mod connection;
pub mod socket;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::{run_loop, App, AppConfig};
use crate::clock::SystemClock;
use connection::ConnectionConfig;
pub use socket::SocketError;

/// Everything `koru daemon` can be told.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub socket_path: PathBuf,
    pub heartbeat: Duration,
    pub handshake_timeout: Duration,
    pub max_line_bytes: usize,
    pub outbound_capacity: usize,
    pub default_drive_timeout: Duration,
    /// How long a plugin may take to ack the next stage of a route.
    pub step_timeout: Duration,
    /// How long shutdown waits for connections to flush and close.
    pub drain_timeout: Duration,
    pub drive_history: usize,
    /// The registry layer files besides the built-in one.
    pub registry_paths: crate::registry::LayerPaths,
    /// The HTTP endpoint served beside the socket, if any (reported by `status`).
    pub http: Option<koru_protocol::HttpStatus>,
    /// Chat-store observation (`None`: off). The store roots come from the registry.
    pub observe: Option<crate::observe::watcher::ObserveConfig>,
}

impl DaemonConfig {
    pub fn with_socket(socket_path: PathBuf) -> Self {
        DaemonConfig {
            socket_path,
            heartbeat: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(5),
            max_line_bytes: koru_protocol::DEFAULT_MAX_LINE_BYTES,
            outbound_capacity: 1024,
            default_drive_timeout: Duration::from_secs(30),
            step_timeout: Duration::from_secs(15),
            drain_timeout: Duration::from_secs(3),
            drive_history: 1000,
            registry_paths: crate::registry::LayerPaths::default(),
            http: None,
            observe: Some(crate::observe::watcher::ObserveConfig::default()),
        }
    }
}

/// Serves until `shutdown` is cancelled, then drains and removes the socket.
///
/// `ready` is called once the socket is bound and accepting.
pub async fn run(
    config: DaemonConfig,
    shutdown: CancellationToken,
    ready: impl FnOnce(&std::path::Path),
) -> Result<(), SocketError> {
    raise_open_files_limit();
    // What the chat stores held before anyone could connect is history; what is written
    // from now on is news, even while the observers are still starting.
    let started_ms = crate::clock::Clock::now_ms(&SystemClock);
    // Watch the registry files before anyone can connect, so no later edit is missed.
    let registry_watch =
        crate::registry::watch::RegistryWatcher::start(config.registry_paths.clone());
    let mut bound = socket::bind(&config.socket_path)?;
    tracing::info!(socket = %bound.path().display(), pid = std::process::id(), version = env!("CARGO_PKG_VERSION"), "koru daemon listening");
    ready(bound.path());

    let (events_tx, events_rx) = mpsc::channel(4096);
    let registry = crate::registry::load_layers(&config.registry_paths);
    let observe_registry = registry.registry.clone();
    for diagnostic in &registry.diagnostics {
        tracing::warn!(%diagnostic, "registry problem; that layer is left out");
    }
    let mut app = App::new(
        AppConfig {
            socket_display: bound.path().display().to_string(),
            heartbeat_ms: config.heartbeat.as_millis() as u64,
            max_line_bytes: config.max_line_bytes,
            default_drive_timeout_ms: config.default_drive_timeout.as_millis() as u64,
            step_timeout_ms: config.step_timeout.as_millis() as u64,
            drive_history: config.drive_history,
            daemon_pid: std::process::id(),
            http: config.http.clone(),
            observing: config.observe.is_some(),
        },
        SystemClock,
        registry,
        Box::new(crate::drive::inject::SystemInjections::new(
            events_tx.clone(),
        )),
        Box::new(crate::app::recovery::SystemRecovery::new(
            events_tx.clone(),
            bound.path().to_path_buf(),
            config.registry_paths.clone(),
        )),
    );
    // The watcher learns the folders plugin sessions announce through this channel; the
    // state machine only sends on it.
    let (announced_tx, announced_rx) = mpsc::unbounded_channel();
    if config.observe.is_some() {
        app = app.with_session_store_roots(Box::new(
            crate::observe::announced::WatcherSessionRoots::new(announced_tx),
        ));
    }
    let tick = (config.heartbeat / 4).clamp(Duration::from_millis(20), Duration::from_millis(100));
    let app_stop = CancellationToken::new();
    let app_task = tokio::spawn(run_loop(app, events_rx, tick, app_stop.clone()));

    let connection_config = Arc::new(ConnectionConfig {
        max_line_bytes: config.max_line_bytes,
        handshake_timeout: config.handshake_timeout,
        outbound_capacity: config.outbound_capacity,
        malformed_limit: 3,
        write_timeout: Duration::from_secs(5),
        close_flush_timeout: Duration::from_secs(1),
    });
    let tracker = TaskTracker::new();
    if let Some(mut observe) = config.observe.clone() {
        use crate::observe::stores::Store;
        observe.roots = Store::ALL
            .into_iter()
            .flat_map(|store| {
                store_roots(&observe_registry, store.id())
                    .into_iter()
                    .map(move |root| (store, root))
            })
            .collect();
        observe.announce =
            crate::observe::announced::AnnounceConfig::from_registry(&observe_registry);
        observe.started_ms = Some(started_ms);
        tracing::info!(roots = ?observe.roots, announced = ?observe.announce, "observing chat stores");
        tracker.spawn(crate::observe::watcher::run(
            observe,
            events_tx.clone(),
            announced_rx,
            shutdown.clone(),
        ));
    }
    tracker.spawn(crate::registry::watch::run(
        registry_watch,
        events_tx.clone(),
        shutdown.clone(),
    ));
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
                    events_tx.clone(),
                    connection_config.clone(),
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

    tracing::info!("shutting down: no new connections, saying bye to peers");
    bound.unlink();
    drop(events_tx);
    app_stop.cancel();
    if let Err(err) = app_task.await {
        tracing::error!(error = %err, "the daemon's state machine ended abnormally");
    }
    tracker.close();
    if tokio::time::timeout(config.drain_timeout, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            timeout_ms = config.drain_timeout.as_millis() as u64,
            "some connections did not close in time; leaving them"
        );
    }
    drop(bound);
    tracing::info!("koru daemon stopped");
    Ok(())
}

/// Each plugin holds a descriptor: raise the soft open-files limit to the hard one (many
/// sessions start programs with a soft limit of 1,024).
fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "raised the open-files limit"),
            Err(err) => tracing::warn!(error = %err, soft, "cannot raise the open-files limit"),
        },
        _ => {}
    }
}

/// The expanded `locations` of a store's registry entry (none when it is disabled), each
/// once: the daemon's own environment decides where the tools write (`CLAUDE_CONFIG_DIR`,
/// `CODEX_HOME`, `XDG_CONFIG_HOME`, …), as it does for the tools started from the same
/// session.
fn store_roots(registry: &koru_registry::Registry, store: &str) -> Vec<std::path::PathBuf> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let mut roots: Vec<std::path::PathBuf> = Vec::new();
    for raw in registry
        .interfaces()
        .iter()
        .filter(|i| i.id == store && i.enabled)
        .flat_map(|i| i.locations.iter())
    {
        let root = std::path::PathBuf::from(crate::doctor::probe::expand_path(raw, &env));
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    roots
}

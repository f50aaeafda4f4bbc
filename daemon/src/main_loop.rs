//! The daemon's main loop and its wiring: what `koru daemon` starts (the socket server, the state machine fed by one event channel, the chat-store observers, the registry watch, the HTTP face with MCP mounted in it, signal handling) and how it stops.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::{App, AppConfig, DaemonEvent};
use crate::clock::{Clock, SystemClock};
use crate::server::ConnectionConfig;

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
    /// Drives one session may hold that have not ended (`--max-queued-drives`).
    pub max_queued_drives: usize,
    /// Prompt bytes of queued drives over all sessions (`--max-pending-prompt-bytes`).
    pub max_pending_prompt_bytes: usize,
    /// Requests one connection may have read and not yet handled (`--max-requests-in-flight`).
    pub max_requests_in_flight: usize,
    /// The registry layer files besides the built-in one.
    pub registry_paths: crate::registry::LayerPaths,
    /// The HTTP endpoint served beside the socket, if any (reported by `status`).
    pub http: Option<koru_protocol::HttpStatus>,
    /// Chat-store observation (`None`: off). The store roots come from the registry.
    pub observe: Option<crate::observe::watcher::ObserveConfig>,
    /// The drive journal (`None`: `--no-journal`).
    pub journal: Option<crate::journal::JournalConfig>,
    /// Whether secrets-looking values in the agents' tool arguments are redacted in the
    /// turns `chat.read` hands out (`--no-redact-tool-arguments` turns it off).
    pub redact_tool_arguments: bool,
    /// The HTTP and MCP faces' `forbidden_role` refusals, journaled as `access_refused`.
    pub access_refusals: Option<crate::access::RefusalInbox>,
    /// Whether drives' chats are read back for their evidence (`--no-drive-evidence`).
    pub drive_evidence: bool,
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
            redact_tool_arguments: true,
            max_queued_drives: 1_000,
            max_pending_prompt_bytes: 64 * 1024 * 1024,
            max_requests_in_flight: 256,
            registry_paths: crate::registry::LayerPaths::default(),
            http: None,
            observe: Some(crate::observe::watcher::ObserveConfig::default()),
            journal: None,
            access_refusals: None,
            drive_evidence: true,
        }
    }
}

/// `koru daemon`: the daemon with what its command line asks for (HTTP beside the socket
/// when `--http` is given), until SIGTERM or SIGINT.
pub async fn run_daemon(
    socket: PathBuf,
    args: crate::cli::DaemonArgs,
    registry_paths: crate::registry::LayerPaths,
) -> anyhow::Result<ExitCode> {
    let config = DaemonConfig {
        heartbeat: Duration::from_millis(args.heartbeat_ms.max(1)),
        handshake_timeout: Duration::from_millis(args.handshake_timeout_ms.max(1)),
        max_line_bytes: args.max_line_bytes.max(64),
        default_drive_timeout: Duration::from_millis(args.drive_timeout_ms.max(1)),
        step_timeout: Duration::from_millis(args.step_timeout_ms.max(1)),
        outbound_capacity: args.outbound_queue.max(1),
        max_queued_drives: args.max_queued_drives.max(1),
        max_pending_prompt_bytes: args.max_pending_prompt_bytes,
        max_requests_in_flight: args.max_requests_in_flight.max(1),
        registry_paths,
        observe: (!args.no_observe).then(|| crate::observe::watcher::ObserveConfig {
            quiet: Duration::from_millis(args.observe_quiet_ms.max(1)),
            cache: (!args.no_observe_cache)
                .then(|| crate::observe::summary_cache::default_path(&socket))
                .flatten(),
            ..Default::default()
        }),
        journal: journal_config(&args, &socket)?,
        redact_tool_arguments: !args.no_redact_tool_arguments,
        drive_evidence: !args.no_drive_evidence,
        ..DaemonConfig::with_socket(socket)
    };
    let shutdown = CancellationToken::new();
    let mut config = config;
    let mut http_task = None;
    if let Some(addr) = args.http {
        let tls = match (&args.http_tls_cert, &args.http_tls_key) {
            (Some(cert), Some(key)) => Some(
                crate::http::tls::server_config(cert, key)
                    .context("cannot serve HTTPS with the given certificate and key")?,
            ),
            _ => None,
        };
        check_http_address(addr, args.http_allow_remote, tls.is_some())?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let token_file = crate::http::token::token_path();
        let token = crate::http::token::load_or_create(&token_file)
            .context("cannot set up the HTTP bearer token")?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let bound = listener.local_addr()?;
        config.http = Some(koru_protocol::HttpStatus {
            mcp_url: format!("{scheme}://{bound}/mcp"),
            token: token.clone(),
            token_file: token_file.display().to_string(),
        });
        let (refusals, inbox) = crate::access::RefusalSink::channel();
        config.access_refusals = Some(inbox);
        // MCP over HTTP: the MCP face, mounted at /mcp by the HTTP face.
        let mcp = crate::mcp::http_service(
            config.socket_path.clone(),
            config.registry_paths.clone(),
            crate::http::allowed_hosts(
                bound,
                tls.as_ref()
                    .map(|tls| tls.names.as_slice())
                    .unwrap_or_default(),
            ),
            crate::http::MAX_BODY_BYTES,
            Some(refusals.clone()),
            shutdown.child_token(),
        );
        let http_config = crate::http::HttpConfig {
            token,
            tokens: crate::access::tokens::tokens_path(),
            socket: config.socket_path.clone(),
            layers: config.registry_paths.clone(),
            event_buffer: args
                .http_event_buffer
                .unwrap_or(crate::http::events::DEFAULT_BUFFER)
                .max(1),
            mcp: axum::Router::new().fallback_service(mcp),
            tls,
            refusals: Some(refusals),
        };
        let stop = shutdown.clone();
        http_task = Some(tokio::spawn(async move {
            if let Err(error) = crate::http::serve(listener, http_config, stop).await {
                tracing::error!(%error, "the HTTP server stopped");
            }
        }));
    }
    let signals = spawn_signal_handler(shutdown.clone())?;
    let outcome = run(config, shutdown.clone(), |_| {}).await;
    shutdown.cancel();
    signals.abort();
    if let Some(task) = http_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    outcome.context("cannot start the daemon")?;
    Ok(ExitCode::SUCCESS)
}

/// The journal `koru daemon`'s flags ask for.
fn journal_config(
    args: &crate::cli::DaemonArgs,
    socket: &std::path::Path,
) -> anyhow::Result<Option<crate::journal::JournalConfig>> {
    if args.no_journal {
        return Ok(None);
    }
    let dir = args
        .journal
        .clone()
        .map(Ok)
        .unwrap_or_else(|| {
            let dir = crate::journal::claim_default_dir_for(socket).with_context(|| {
                format!(
                    "cannot set up the drive journal in {} (choose another with --journal DIR, or run without one: --no-journal)",
                    crate::journal::default_dir().display()
                )
            })?;
            if dir != crate::journal::default_dir() {
                tracing::info!(dir = %dir.display(), "the default journal folder is kept by the daemon of another socket; this daemon keeps its own");
            }
            anyhow::Ok(dir)
        })?;
    let mut config = crate::journal::JournalConfig::new(dir);
    config.prompts = args.journal_prompts;
    config.fsync = Duration::from_millis(args.journal_fsync_ms.max(1));
    config.retain = args
        .journal_retain
        .parse()
        .map_err(|e| anyhow::anyhow!("--journal-retain {}: {e}", args.journal_retain))?;
    if let Some(bytes) = args.journal_segment_bytes {
        config.segment_bytes = bytes.max(1024);
    }
    Ok(Some(config))
}

/// Opens the journal (after the socket is ours, so a second daemon never touches it),
/// ending what a crashed run left open.
fn open_journal(
    config: crate::journal::JournalConfig,
    socket: &std::path::Path,
) -> anyhow::Result<crate::journal::Journal> {
    let dir = config.dir.clone();
    let daemon = crate::journal::Asker {
        door: "daemon".into(),
        client: "koru".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        pid: Some(std::process::id()),
        uid: nix::unistd::getuid().as_raw(),
    };
    let mut started = serde_json::Map::new();
    started.insert("socket".into(), socket.display().to_string().into());
    started.insert("prompts".into(), config.prompts.as_str().into());
    started.insert("fsync_ms".into(), (config.fsync.as_millis() as u64).into());
    let reopened = crate::journal::Journal::open(
        config,
        crate::clock::Clock::now_ms(&SystemClock),
        &daemon,
        started,
    )
    .with_context(|| {
        format!(
            "cannot open the drive journal in {} (choose another with --journal DIR, or run without one: --no-journal)",
            dir.display()
        )
    })?;
    if let Some(bytes) = reopened.repaired_bytes {
        tracing::warn!(bytes, "the journal ended in a cut line (a crash mid-write); it was removed and the repair recorded");
    }
    if !reopened.ended_at_restart.is_empty() {
        tracing::warn!(
            drives = reopened.ended_at_restart.len(),
            "drives the last run left unfinished were ended failed/daemon_restarted (not sent again)"
        );
    }
    let status = reopened.journal.status();
    tracing::info!(dir = %status.dir, head = %status.head, entries = status.last_seq, "drive journal open");
    Ok(reopened.journal)
}

/// The `--http` binding rule: loopback, unless `--http-allow-remote` says otherwise (then
/// with a warning, since others on the network can reach the port).
pub fn check_http_address(
    addr: std::net::SocketAddr,
    allow_remote: bool,
    tls: bool,
) -> anyhow::Result<()> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !tls {
        bail!(
            "--http {addr} is not a loopback address, and the bearer token must not cross the network in clear: give --http-tls-cert FILE and --http-tls-key FILE (with --http-allow-remote) to serve HTTPS, or keep --http on 127.0.0.1 and reach it with SSH forwarding (`ssh -L 8765:127.0.0.1:8765 host`)"
        );
    }
    if !allow_remote {
        bail!(
            "--http {addr} is not a loopback address; pass --http-allow-remote to serve it (over HTTPS) anyway"
        );
    }
    tracing::warn!(
        %addr,
        "serving HTTPS on a non-loopback address (--http-allow-remote): others on the network can reach it; the bearer tokens guard it"
    );
    Ok(())
}

fn spawn_signal_handler(
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    Ok(tokio::spawn(async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "stopping");
        shutdown.cancel();
    }))
}

/// The daemon's main loop: binds the socket, owns the event channel, starts the state
/// machine, the observers and the registry watch, accepts connections until `shutdown`,
/// then drains and removes the socket.
///
/// `ready` is called once the socket is bound and accepting.
pub async fn run(
    config: DaemonConfig,
    shutdown: CancellationToken,
    ready: impl FnOnce(&std::path::Path),
) -> anyhow::Result<()> {
    crate::server::raise_open_files_limit();
    // What the chat stores held before anyone could connect is history; what is written
    // from now on is news, even while the observers are still starting.
    let started_ms = crate::clock::Clock::now_ms(&SystemClock);
    // Watch the registry files before anyone can connect, so no later edit is missed.
    let registry_watch =
        crate::registry::watch::RegistryWatcher::start(config.registry_paths.clone());
    let mut bound = crate::server::socket::bind(&config.socket_path)?;
    let journal = config
        .journal
        .clone()
        .map(|journal| open_journal(journal, bound.path()))
        .transpose()?;
    tracing::info!(socket = %bound.path().display(), pid = std::process::id(), version = env!("CARGO_PKG_VERSION"), "koru daemon listening");
    ready(bound.path());

    let (events_tx, events_rx) = mpsc::channel(4096);
    let registry = crate::registry::load_layers(&config.registry_paths);
    let observe_registry = registry.registry.clone();
    for diagnostic in &registry.diagnostics {
        tracing::warn!(%diagnostic, "registry problem; that layer is left out");
    }
    // The desktop's buses, shared by the lock check before every injection and by recovery.
    let buses = Arc::new(crate::desktop::Buses::new(Duration::from_millis(500)));
    let lock = crate::desktop::LockDetector::new(buses.clone());
    // The desktop portal's remote input: one session, started at the first drive it takes.
    let portal = Arc::new(crate::desktop::portal::Portal::new(
        buses.clone(),
        crate::desktop::portal::TokenStore {
            path: crate::desktop::portal::TokenStore::default_path(),
        },
    ));
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some() {
        // What the portal offers, learnt off the loop, so the planner knows a missing one.
        let portal = portal.clone();
        tokio::spawn(async move {
            match portal.refresh().await {
                Ok(offer) => tracing::debug!(offer = %offer.describe(), "desktop portal"),
                Err(error) => tracing::debug!(%error, "no desktop portal remote input"),
            }
        });
    }
    let mut app = App::new(
        AppConfig {
            socket_display: bound.path().display().to_string(),
            heartbeat_ms: config.heartbeat.as_millis() as u64,
            max_line_bytes: config.max_line_bytes,
            default_drive_timeout_ms: config.default_drive_timeout.as_millis() as u64,
            step_timeout_ms: config.step_timeout.as_millis() as u64,
            drive_history: config.drive_history,
            max_queued_drives: config.max_queued_drives,
            max_pending_prompt_bytes: config.max_pending_prompt_bytes,
            daemon_pid: std::process::id(),
            http: config.http.clone(),
            observing: config.observe.is_some(),
            drive_evidence: config.drive_evidence,
        },
        SystemClock,
        registry,
        Box::new(crate::drive::inject::SystemInjections::new(
            events_tx.clone(),
            lock.clone(),
            portal,
        )),
        Box::new(crate::app::recovery::SystemRecovery::new(
            events_tx.clone(),
            bound.path().to_path_buf(),
            config.registry_paths.clone(),
            lock,
        )),
    );
    if let Some(journal) = journal {
        app = app.with_journal(journal);
    }
    app = app.with_chat_reader(Box::new(crate::conversation::read::SystemChatReader::new(
        events_tx.clone(),
        config.redact_tool_arguments,
    )));
    app = app.with_auditor(Box::new(crate::audit::SystemAuditRunner::new(
        events_tx.clone(),
    )));
    app = app.with_terminal_looker(Box::new(crate::terminal::SystemTerminalLooker::new(
        events_tx.clone(),
    )));
    app = app.with_terminal_typist(Box::new(
        crate::terminal::typist::SystemTerminalTypist::new(events_tx.clone()),
    ));
    app = app.with_server_followers(Box::new(
        crate::observe::stores::opencode::SystemServerFollowers::new(
            events_tx.clone(),
            // The followers end with the daemon.
            shutdown.child_token(),
        ),
    ));
    // Desktop notifications when a drive needs the person, if there is a session bus to
    // send them on (whether a notification service listens is learnt from the first one).
    let mut notifier = None;
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some() {
        let (watch_tx, watch_rx) = mpsc::channel(crate::app::drive_news::WATCH_QUEUE);
        app = app.with_drive_watch(watch_tx);
        notifier = Some((
            crate::notify::NotifierConfig {
                socket: bound.path().to_path_buf(),
                http: config.http.clone(),
                buses: buses.clone(),
            },
            watch_rx,
        ));
    }
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
    let app_task = tokio::spawn(run_state_machine(app, events_rx, tick, app_stop.clone()));

    let connection_config = Arc::new(ConnectionConfig {
        max_line_bytes: config.max_line_bytes,
        handshake_timeout: config.handshake_timeout,
        outbound_capacity: config.outbound_capacity,
        malformed_limit: 3,
        write_timeout: Duration::from_secs(5),
        close_flush_timeout: Duration::from_secs(1),
        max_in_flight: config.max_requests_in_flight,
    });
    let tracker = TaskTracker::new();
    if let Some(mut observe) = config.observe.clone() {
        use crate::observe::locations::Store;
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
        tracing::debug!(roots = ?observe.roots, announced = ?observe.announce, "chat-store roots");
        tracker.spawn(crate::observe::watcher::run(
            observe,
            events_tx.clone(),
            announced_rx,
            shutdown.clone(),
        ));
    }
    if let Some(mut refusals) = config.access_refusals.as_ref().and_then(|i| i.take()) {
        // The faces' `forbidden_role` refusals, into the state machine that owns the journal.
        let events = events_tx.clone();
        let stop = shutdown.clone();
        tracker.spawn(async move {
            loop {
                let refusal = tokio::select! {
                    refusal = refusals.recv() => refusal,
                    _ = stop.cancelled() => None,
                };
                let Some(refusal) = refusal else { break };
                let event = DaemonEvent::AccessRefused {
                    refusal: Box::new(refusal),
                };
                if events.send(event).await.is_err() {
                    break;
                }
            }
        });
    }
    tracker.spawn(crate::registry::watch::run(
        registry_watch,
        events_tx.clone(),
        shutdown.clone(),
    ));
    if let Some((notifier_config, watch_rx)) = notifier {
        tracker.spawn(crate::notify::run(
            notifier_config,
            watch_rx,
            shutdown.clone(),
        ));
    }
    // Start-up is over: the registry's parse trees and the journal's recovery buffers are
    // freed; their pages go back to the system instead of staying resident while idle.
    crate::memory::return_freed_heap_pages();
    crate::server::accept_connections(
        &mut bound,
        &events_tx,
        connection_config,
        &tracker,
        &shutdown,
    )
    .await;

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

/// Most events handled between two flushes of the journal (and two yields of the loop).
const EVENTS_PER_FLUSH: usize = 64;

/// Runs the state machine until `shutdown` fires, then shuts it down.
pub async fn run_state_machine<C: Clock>(
    mut app: App<C>,
    mut events: mpsc::Receiver<DaemonEvent>,
    tick_every: std::time::Duration,
    shutdown: CancellationToken,
) {
    // Ticks come `tick_every` apart while anything waits on a deadline, and rarely while
    // nothing does (`App::tick_every`).
    let mut every = app.tick_every(tick_every);
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(event) = events.recv() => event,
            _ = ticker.tick() => DaemonEvent::Tick,
        };
        // The events already waiting are handled one after the other and the journal
        // flushed once after them, before this task yields and the connections' writers
        // can send what they queued.
        // Their log lines go out together too, after the journal's.
        crate::log_lines::begin_run();
        let mut event = Some(event);
        let mut handled = 0;
        while let Some(next) = event.take() {
            // A bug in one handler must not take the daemon down: log it and go on.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                app.handle_unflushed(next)
            }));
            if outcome.is_err() {
                tracing::error!("a daemon event handler panicked; the event was dropped");
            }
            handled += 1;
            if handled < EVENTS_PER_FLUSH {
                event = events.try_recv().ok();
            }
        }
        app.flush_journal();
        crate::log_lines::end_run();
        let wanted = app.tick_every(tick_every);
        if wanted != every {
            every = wanted;
            ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
    }
    app.shutdown();
}

// The rooms below the state machine report through their own types; the main loop turns
// them into its events here, so none of them imports `DaemonEvent`.
impl From<crate::observe::watcher::ObserverReport> for DaemonEvent {
    fn from(report: crate::observe::watcher::ObserverReport) -> Self {
        use crate::observe::watcher::ObserverReport;
        match report {
            ObserverReport::Observed {
                events,
                replay,
                source,
            } => DaemonEvent::Observed {
                events,
                replay,
                source: Some(source),
            },
            ObserverReport::Health { observers } => DaemonEvent::ObserverHealth { observers },
            ObserverReport::Restored { files, more } => DaemonEvent::ChatsRestored { files, more },
        }
    }
}

impl From<crate::terminal::LookFinished> for DaemonEvent {
    fn from(finished: crate::terminal::LookFinished) -> Self {
        DaemonEvent::TerminalLook {
            finished: Box::new(finished),
        }
    }
}

impl From<crate::terminal::typist::Typed> for DaemonEvent {
    fn from(typed: crate::terminal::typist::Typed) -> Self {
        DaemonEvent::TerminalTyped {
            typed: Box::new(typed),
        }
    }
}

impl From<crate::terminal::typist::IdeTerminalRequest> for DaemonEvent {
    fn from(request: crate::terminal::typist::IdeTerminalRequest) -> Self {
        DaemonEvent::IdeTerminalIo {
            request: Box::new(request),
        }
    }
}

impl From<crate::drive::portal::PluginClipboardRequest> for DaemonEvent {
    fn from(request: crate::drive::portal::PluginClipboardRequest) -> Self {
        DaemonEvent::PluginClipboard {
            request: Box::new(request),
        }
    }
}

impl From<crate::conversation::ChatReadFinished> for DaemonEvent {
    fn from(finished: crate::conversation::ChatReadFinished) -> Self {
        DaemonEvent::ChatReadFinished {
            finished: Box::new(finished),
        }
    }
}

impl From<crate::audit::AuditFinished> for DaemonEvent {
    fn from(finished: crate::audit::AuditFinished) -> Self {
        DaemonEvent::AuditFinished {
            finished: Box::new(finished),
        }
    }
}

impl From<crate::registry::watch::RegistryReloaded> for DaemonEvent {
    fn from(report: crate::registry::watch::RegistryReloaded) -> Self {
        DaemonEvent::RegistryChanged {
            loaded: report.loaded,
        }
    }
}

impl From<crate::drive::inject::InjectionFinished> for DaemonEvent {
    fn from(report: crate::drive::inject::InjectionFinished) -> Self {
        DaemonEvent::InjectionFinished {
            outcome: report.outcome,
        }
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

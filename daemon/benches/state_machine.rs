//! Criterion benchmark of the daemon's state machine alone, in process: one drive (`drive.create` from a subscribed controller, the plugin's `received` and `submitted` acks) handled by `App` with the journal off, on with digests and on with full prompts — the daemon's own CPU per drive without sockets or wake-ups, and what the journal adds to it (`cargo bench -p koru-daemon --bench state_machine`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use koru_daemon::app::recovery::{RecoveryJob, RecoveryRunner, RecoveryTicket};
use koru_daemon::app::{App, AppConfig, ConnId, ConnectionHandle, DaemonEvent, InFlight, PeerInfo};
use koru_daemon::clock::SystemClock;
use koru_daemon::drive::inject::{InjectionJob, InjectionRunner, KeyPressJob};
use koru_daemon::journal::{Asker, Journal, JournalConfig, PromptsMode};
use koru_protocol::{decode_line, Blocker, Envelope, Message};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// No OS injection here: the drives take the plugin's native route.
struct NoInjection;

impl InjectionRunner for NoInjection {
    fn probe(&self, _interface: &str) -> Result<(), Blocker> {
        Err(Blocker::new(
            "injector_missing",
            "the benchmark runs no injector",
        ))
    }
    fn start(&self, _job: InjectionJob) {}
    fn start_key_press(&self, _job: KeyPressJob) {}
}

/// No recovery is asked for.
struct NoRecovery;

impl RecoveryRunner for NoRecovery {
    fn start(&self, _ticket: RecoveryTicket, _job: RecoveryJob) {}
}

/// A peer of the state machine: its connection id and what the daemon queued for it.
struct Peer {
    conn_id: ConnId,
    rx: mpsc::Receiver<Bytes>,
    _close: CancellationToken,
}

impl Peer {
    /// Every line queued for this peer, decoded.
    fn drain(&mut self) -> Vec<Envelope> {
        let mut out = Vec::new();
        while let Ok(line) = self.rx.try_recv() {
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            out.push(decode_line(line).expect("the daemon queues valid lines"));
        }
        out
    }
}

/// The state machine with one VS Code plugin session (native send) and one controller
/// subscribed to events, as the round-trip benchmarks set it up over the socket.
struct Rig {
    app: App<SystemClock>,
    plugin: Peer,
    controller: Peer,
    session_id: String,
    next_id: u64,
    _journal_dir: Option<tempfile::TempDir>,
}

fn envelope(json: &str) -> Envelope {
    decode_line(json.as_bytes()).expect("a valid line")
}

fn received(conn_id: ConnId, envelope: Envelope) -> DaemonEvent {
    DaemonEvent::Received {
        conn_id,
        envelope: Box::new(envelope),
        in_flight: InFlight::untracked(),
    }
}

impl Rig {
    fn new(journal: Option<PromptsMode>) -> Rig {
        let mut opened = None;
        let journal_dir = journal.map(|prompts| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let mut config = JournalConfig::new(dir.path().join("journal"));
            config.index_path = dir.path().join("index").join("drives.sqlite");
            config.prompts = prompts;
            let daemon = Asker {
                door: "daemon".into(),
                client: "koru".into(),
                version: "bench".into(),
                pid: Some(std::process::id()),
                uid: 0,
            };
            let now = koru_daemon::clock::Clock::now_ms(&SystemClock);
            let reopened =
                Journal::open(config, now, &daemon, Default::default()).expect("the journal opens");
            opened = Some(reopened.journal);
            dir
        });
        let registry = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let mut app = App::new(
            AppConfig {
                socket_display: "/bench.sock".into(),
                heartbeat_ms: 60_000,
                max_line_bytes: 1 << 20,
                default_drive_timeout_ms: 120_000,
                step_timeout_ms: 10_000,
                drive_history: 1_000,
                max_queued_drives: 1_000,
                max_pending_prompt_bytes: 64 << 20,
                daemon_pid: std::process::id(),
                http: None,
                observing: false,
                drive_evidence: true,
            },
            SystemClock,
            registry,
            Box::new(NoInjection),
            Box::new(NoRecovery),
        );
        if let Some(journal) = opened {
            app = app.with_journal(journal);
        }
        let mut plugin = connect(
            &mut app,
            1,
            r#"{"v":1,"type":"hello","id":1,"role":"plugin","protocol":{"min":1,"max":1},"client":{"name":"bench-plugin","version":"0"},"ide":{"product":"vscode","version":"1.99.0"},"window":{"pid":4242,"workspace_folders":["/bench/ws"]},"capabilities":[{"kind":"native_send"},{"kind":"drive_steps"},{"kind":"command","id":"workbench.action.chat.open"}]}"#,
        );
        let session_id = match plugin.drain().remove(0).message {
            Message::Welcome(welcome) => welcome.session_id,
            other => panic!("the plugin was not welcomed: {other:?}"),
        };
        let mut controller = connect(
            &mut app,
            2,
            r#"{"v":1,"type":"hello","id":1,"role":"controller","protocol":{"min":1,"max":1},"client":{"name":"bench-controller","version":"0"}}"#,
        );
        app.handle(received(
            controller.conn_id,
            envelope(r#"{"v":1,"type":"events.subscribe","id":"s"}"#),
        ));
        controller.drain();
        Rig {
            app,
            plugin,
            controller,
            session_id,
            next_id: 0,
            _journal_dir: journal_dir,
        }
    }

    /// One drive from `drive.create` to `done`; returns the time the state machine took
    /// (the harness's own work, building and reading lines, is not counted).
    fn drive(&mut self) -> Duration {
        self.next_id += 1;
        let create = envelope(&format!(
            r#"{{"v":1,"type":"drive.create","id":{},"target":{{"session":"{}"}},"prompt":"{}"}}"#,
            self.next_id,
            self.session_id,
            prompt(self.next_id),
        ));
        let started = Instant::now();
        self.app
            .handle_unflushed(received(self.controller.conn_id, create));
        self.app.flush_journal();
        let mut took = started.elapsed();
        let drive_id = self
            .plugin
            .drain()
            .into_iter()
            .find_map(|e| match e.message {
                Message::Drive(drive) => Some(drive.drive_id),
                _ => None,
            })
            .expect("the plugin got the drive");
        let acks = ["received", "submitted"].map(|stage| {
            envelope(&format!(
                r#"{{"v":1,"type":"ack","drive_id":"{drive_id}","stage":"{stage}"}}"#
            ))
        });
        let started = Instant::now();
        for ack in acks {
            self.app
                .handle_unflushed(received(self.plugin.conn_id, ack));
        }
        self.app.flush_journal();
        took += started.elapsed();
        let done = self.controller.drain().into_iter().any(|e| {
            matches!(&e.message, Message::Stream(item)
                if matches!(&item.event, koru_protocol::StreamEvent::DriveUpdated { drive }
                    if drive.drive_id == drive_id && drive.state == koru_protocol::DriveState::Done))
        });
        assert!(done, "drive {drive_id} did not end done");
        took
    }
}

/// A 200-character prompt, each one different (as the journal bench's).
fn prompt(n: u64) -> String {
    let text = "Refactor parse_header() so errors carry line and column; keep the tests green, ne casse rien, then run cargo test. ";
    let mut prompt = format!("[{n}] ");
    prompt.extend(text.chars().cycle().take(200 - prompt.len()));
    prompt
}

fn connect(app: &mut App<SystemClock>, conn_id: ConnId, hello: &str) -> Peer {
    let (outbound, rx) = mpsc::channel(4096);
    let close = CancellationToken::new();
    app.handle(DaemonEvent::Connected {
        conn_id,
        handle: ConnectionHandle {
            outbound,
            close: close.clone(),
        },
        peer: PeerInfo {
            pid: Some(4242 + conn_id as u32),
            uid: 1000,
        },
    });
    let Message::Hello(hello) = envelope(hello).message else {
        panic!("not a hello");
    };
    app.handle(DaemonEvent::Greeted {
        conn_id,
        hello: Box::new(hello),
        hello_id: None,
        protocol: 1,
    });
    Peer {
        conn_id,
        rx,
        _close: close,
    }
}

fn state_machine(c: &mut Criterion) {
    // The daemon always runs other threads beside its event loop (the file watcher's, the
    // journal's); with none, glibc's allocator takes a lock-free single-thread path that
    // the daemon never gets, and the first rig (journal off) would be measured with it and
    // the others without. One idle thread from the start keeps the comparison fair.
    std::thread::spawn(|| loop {
        std::thread::park();
    });
    let mut group = c.benchmark_group("drive through the state machine");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    for (label, journal) in [
        ("journal off", None),
        ("journal on, digest", Some(PromptsMode::Digest)),
        ("journal on, full prompts", Some(PromptsMode::Full)),
    ] {
        let mut rig = Rig::new(journal);
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += black_box(rig.drive());
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, state_machine);
criterion_main!(benches);

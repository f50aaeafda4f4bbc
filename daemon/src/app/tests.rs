//! Unit tests of the daemon state machine with a manual clock and in-memory connections: heartbeats, deadlines, queueing, slow readers, shutdown.

use koru_protocol::{
    Ack, AckStage, ClientInfo, DriveCreate, DriveOptions, DriveState, Envelope, ErrorCode, Hello,
    IdeInfo, Message, RequestId, Role, Route, SessionHealth, StreamEvent, Target, Verification,
    VersionRange, WindowInfo,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::ManualClock;

struct Peer {
    conn_id: ConnId,
    rx: mpsc::Receiver<bytes::Bytes>,
    close: CancellationToken,
}

/// A queued line as the peer reads it.
fn decode(line: &[u8]) -> Envelope {
    let line = line
        .strip_suffix(b"\n")
        .expect("a queued line ends in its newline");
    koru_protocol::decode_line(line).expect("the daemon queues valid lines")
}

impl Peer {
    fn drain(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        while let Ok(line) = self.rx.try_recv() {
            out.push(decode(&line).message);
        }
        out
    }

    fn types(&mut self) -> Vec<&'static str> {
        self.drain().iter().map(Message::type_name).collect()
    }
}

struct Harness {
    app: App<ManualClock>,
    clock: ManualClock,
    next_conn: ConnId,
    injections: crate::drive::inject::RecordingInjections,
    recovery: super::recovery::RecordingRecovery,
}

impl Harness {
    fn new() -> Self {
        Harness::with_registry("", &[])
    }

    /// A harness whose registry has `user_layer` on top of the built-in one and whose fake
    /// injection runner reports `usable_injectors` as working.
    fn with_registry(user_layer: &str, usable_injectors: &[&str]) -> Self {
        let mut sources = vec![koru_registry::LayerSource::built_in()];
        if !user_layer.is_empty() {
            sources.push(koru_registry::LayerSource {
                layer: koru_registry::Layer::User,
                name: "user.yaml".into(),
                path: None,
                text: user_layer.into(),
            });
        }
        let loaded = koru_registry::load(&sources);
        assert!(loaded.is_clean(), "{:?}", loaded.diagnostics);
        let injections = crate::drive::inject::RecordingInjections::default();
        injections
            .usable
            .lock()
            .unwrap()
            .extend(usable_injectors.iter().map(|s| s.to_string()));
        let clock = ManualClock::starting_at(1_000_000);
        let recovery = super::recovery::RecordingRecovery::default();
        let app = App::new(
            AppConfig {
                socket_display: "/test.sock".into(),
                heartbeat_ms: 1_000,
                max_line_bytes: 1024,
                default_drive_timeout_ms: 5_000,
                step_timeout_ms: 60_000,
                drive_history: 100,
                max_queued_drives: 1_000,
                max_pending_prompt_bytes: 64 * 1024 * 1024,
                daemon_pid: 1,
                http: None,
                observing: false,
                drive_evidence: true,
            },
            clock.clone(),
            loaded,
            Box::new(injections.clone()),
            Box::new(recovery.clone()),
        );
        Harness {
            app,
            clock,
            next_conn: 0,
            injections,
            recovery,
        }
    }

    fn fail_step(&mut self, peer: &Peer, drive_id: &str, code: &str) {
        self.app.handle(DaemonEvent::Received {
            conn_id: peer.conn_id,
            in_flight: crate::app::InFlight::untracked(),
            envelope: Box::new(Envelope::new(Message::Ack(Ack {
                drive_id: drive_id.into(),
                stage: AckStage::Failed,
                blocker: Some(koru_protocol::Blocker::new(code, "test")),
                evidence: None,
                refusal: None,
            }))),
        });
    }

    fn finish_injection(
        &mut self,
        drive_id: &str,
        reached: crate::drive::inject::Reached,
        error: Option<&str>,
    ) {
        self.app.handle(DaemonEvent::InjectionFinished {
            outcome: Box::new(crate::drive::inject::InjectionOutcome {
                drive_id: drive_id.into(),
                reached,
                error: error.map(|code| koru_protocol::Blocker::new(code, "test")),
                text: None,
            }),
        });
    }

    fn attempts(&self, drive_id: &str) -> Vec<String> {
        self.app
            .drives
            .get(drive_id)
            .unwrap()
            .attempts
            .iter()
            .map(|a| format!("{} {:?}", a.interface, a.outcome).to_lowercase())
            .collect()
    }

    fn connect(&mut self, hello: Hello, capacity: usize) -> Peer {
        self.next_conn += 1;
        let (outbound, rx) = mpsc::channel(capacity);
        let close = CancellationToken::new();
        self.app.handle(DaemonEvent::Connected {
            conn_id: self.next_conn,
            handle: ConnectionHandle {
                outbound,
                close: close.clone(),
            },
            peer: PeerInfo {
                pid: Some(42),
                uid: 0,
            },
        });
        self.app.handle(DaemonEvent::Greeted {
            conn_id: self.next_conn,
            hello: Box::new(hello),
            hello_id: None,
            protocol: 1,
        });
        Peer {
            conn_id: self.next_conn,
            rx,
            close,
        }
    }

    fn plugin(&mut self, folder: &str) -> (Peer, String) {
        let mut peer = self.connect(plugin_hello(folder), 64);
        let Message::Welcome(welcome) = peer.drain().remove(0) else {
            panic!("no welcome");
        };
        (peer, welcome.session_id)
    }

    fn controller(&mut self, capacity: usize) -> Peer {
        let mut peer = self.connect(controller_hello(), capacity);
        assert_eq!(peer.types(), ["welcome"]);
        peer
    }

    fn request(&mut self, peer: &Peer, id: i64, message: Message) {
        self.app.handle(DaemonEvent::Received {
            conn_id: peer.conn_id,
            in_flight: crate::app::InFlight::untracked(),
            envelope: Box::new(Envelope::with_id(Some(RequestId::Number(id)), message)),
        });
    }

    fn ack(&mut self, peer: &Peer, drive_id: &str, stage: AckStage) {
        self.app.handle(DaemonEvent::Received {
            conn_id: peer.conn_id,
            in_flight: crate::app::InFlight::untracked(),
            envelope: Box::new(Envelope::new(Message::Ack(Ack {
                drive_id: drive_id.into(),
                stage,
                blocker: None,
                evidence: None,
                refusal: None,
            }))),
        });
    }

    /// A pong from `peer`: any line keeps a session alive.
    fn pong(&mut self, peer: &Peer) {
        self.app.handle(DaemonEvent::Received {
            conn_id: peer.conn_id,
            in_flight: crate::app::InFlight::untracked(),
            envelope: Box::new(Envelope::new(Message::Pong {})),
        });
    }

    fn advance(&mut self, ms: u64) {
        self.clock.advance(ms);
        self.app.handle(DaemonEvent::Tick);
    }

    fn create(&mut self, controller: &mut Peer, target: Target, prompt: &str) -> String {
        self.request(
            controller,
            1,
            Message::DriveCreate(DriveCreate {
                target,
                prompt: prompt.into(),
                options: DriveOptions::default(),
            }),
        );
        match controller.drain().remove(0) {
            Message::DriveResult(result) => result.drive.drive_id,
            other => panic!("expected drive.result, got {other:?}"),
        }
    }

    /// Creates a drive that fails at once when the chat is busy; returns its id.
    fn create_fail_fast(
        &mut self,
        controller: &mut Peer,
        session_id: &str,
        prompt: &str,
    ) -> String {
        self.request(
            controller,
            9,
            Message::DriveCreate(DriveCreate {
                target: Target::Session(session_id.to_string()),
                prompt: prompt.into(),
                options: DriveOptions {
                    busy: koru_protocol::BusyPolicy::Fail,
                    ..DriveOptions::default()
                },
            }),
        );
        match controller.drain().remove(0) {
            Message::DriveResult(result) => result.drive.drive_id,
            other => panic!("expected drive.result, got {other:?}"),
        }
    }

    fn drive_state(&self, drive_id: &str) -> DriveState {
        self.app.drives.get(drive_id).unwrap().state
    }
}

fn controller_hello() -> Hello {
    Hello {
        role: Role::Controller,
        protocol: VersionRange { min: 1, max: 1 },
        client: ClientInfo {
            name: "unit".into(),
            version: "0".into(),
        },
        ide: None,
        window: None,
        capabilities: vec![],
        chat: None,
        scope: None,
    }
}

fn plugin_hello(folder: &str) -> Hello {
    Hello {
        role: Role::Plugin,
        // A complete VS Code: every command the catalog's routes need.
        capabilities: [
            "workbench.action.chat.open",
            "workbench.action.chat.focusInput",
            "workbench.action.chat.submit",
        ]
        .into_iter()
        .map(|id| koru_protocol::Capability::Command { id: id.into() })
        .collect(),
        ide: Some(IdeInfo {
            product: koru_protocol::IdeProduct::VsCode,
            version: "1".into(),
            app_name: "Code".into(),
            uri_scheme: None,
            app_host: None,
        }),
        window: Some(WindowInfo {
            pid: Some(4242),
            workspace_folders: vec![folder.into()],
            ..WindowInfo::default()
        }),
        ..controller_hello()
    }
}

#[test]
fn a_silent_plugin_is_pinged_then_stale_then_dropped_failing_its_drive() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id.clone()), "hi");
    assert_eq!(plugin.types(), ["drive"]);

    h.advance(1_000);
    assert_eq!(plugin.types(), ["ping"], "pinged after one interval");
    h.advance(1_001);
    assert_eq!(
        h.app.sessions[&session_id].health,
        SessionHealth::Stale,
        "stale after two silent intervals"
    );
    assert!(!plugin.close.is_cancelled());
    h.advance(2_000);
    assert!(
        plugin.close.is_cancelled(),
        "dropped after four silent intervals"
    );
    assert!(!h.app.sessions.contains_key(&session_id));
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    assert_eq!(drive.blocker.as_ref().unwrap().code, "heartbeat_lost");
}

#[test]
fn any_line_from_a_stale_plugin_makes_it_active_again() {
    let mut h = Harness::new();
    let (plugin, session_id) = h.plugin("/w");
    h.advance(2_500);
    assert_eq!(h.app.sessions[&session_id].health, SessionHealth::Stale);
    h.pong(&plugin);
    assert_eq!(h.app.sessions[&session_id].health, SessionHealth::Active);
}

#[test]
fn a_drive_past_its_deadline_times_out_and_the_plugin_is_told() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.ack(&plugin, &drive_id, AckStage::Received);
    // Keep the plugin alive while the deadline passes.
    for _ in 0..5 {
        h.advance(999);
        h.pong(&plugin);
    }
    assert_eq!(h.drive_state(&drive_id), DriveState::Received);
    h.advance(10);
    assert_eq!(h.drive_state(&drive_id), DriveState::TimedOut);
    let cancels: Vec<_> = plugin
        .drain()
        .into_iter()
        .filter_map(|m| match m {
            Message::Cancel(cancel) => Some(cancel),
            _ => None,
        })
        .collect();
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].drive_id, drive_id);
    assert_eq!(cancels[0].reason, "timeout");
}

#[test]
fn the_loop_ticks_fast_only_while_something_waits_on_a_deadline() {
    use std::time::Duration;
    let fast = Duration::from_millis(100);
    let mut h = Harness::new();
    assert_eq!(
        h.app.tick_every(fast),
        super::IDLE_TICK,
        "nothing connected"
    );
    let mut controller = h.controller(64);
    assert_eq!(
        h.app.tick_every(fast),
        super::IDLE_TICK,
        "a controller alone"
    );
    let (plugin, session_id) = h.plugin("/w");
    // Heartbeat 1 s in the harness: pings and staleness are checked a quarter apart.
    assert_eq!(h.app.tick_every(fast), Duration::from_millis(250));
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    assert_eq!(h.app.tick_every(fast), fast, "a drive runs");
    for stage in [
        AckStage::Received,
        AckStage::Focused,
        AckStage::Pasted,
        AckStage::Submitted,
    ] {
        h.ack(&plugin, &drive_id, stage);
    }
    assert!(
        h.drive_state(&drive_id).is_terminal(),
        "{:?}",
        h.drive_state(&drive_id)
    );
    h.advance(10);
    assert_eq!(
        h.app.tick_every(fast),
        Duration::from_millis(250),
        "the drive ended"
    );
}

#[test]
fn queued_drives_start_in_order_when_the_session_frees_up() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    let second = h.create(&mut controller, Target::Workspace("/w".into()), "two");
    assert_eq!(h.drive_state(&second), DriveState::Queued);
    assert_eq!(plugin.types(), ["drive"]);
    h.ack(&plugin, &first, AckStage::Submitted);
    assert_eq!(h.drive_state(&first), DriveState::Done);
    assert_eq!(h.drive_state(&second), DriveState::Sent);
    let sent: Vec<String> = plugin
        .drain()
        .into_iter()
        .filter_map(|m| match m {
            Message::Drive(order) => Some(order.drive_id),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [second]);
}

#[test]
fn a_subscriber_whose_queue_is_full_is_disconnected_and_others_still_get_events() {
    let mut h = Harness::new();
    let mut sleeper = h.controller(2);
    h.request(&sleeper, 1, Message::EventsSubscribe {});
    let mut reader = h.controller(256);
    h.request(&reader, 1, Message::EventsSubscribe {});
    assert_eq!(reader.types(), ["events.subscribed"]);
    // Fill the sleeper's queue of two: the subscribed reply and one event; the next overflows.
    let (_plugin, _) = h.plugin("/a");
    assert!(!sleeper.close.is_cancelled());
    let (_plugin2, _) = h.plugin("/b");
    assert!(
        sleeper.close.is_cancelled(),
        "a full queue closes the slow reader"
    );
    let kinds: Vec<String> = reader
        .drain()
        .into_iter()
        .map(|m| match m {
            Message::Stream(item) => match item.event {
                StreamEvent::SessionConnected { .. } => "session_connected".to_string(),
                other => format!("{other:?}"),
            },
            other => other.type_name().to_string(),
        })
        .collect();
    assert_eq!(kinds, ["session_connected", "session_connected"]);
    assert_eq!(sleeper.drain().len(), 2);
}

#[test]
fn events_go_to_the_connections_that_subscribed_and_stop_when_one_goes() {
    let mut h = Harness::new();
    let mut listening = h.controller(64);
    h.request(&listening, 1, Message::EventsSubscribe {});
    h.request(&listening, 2, Message::EventsSubscribe {});
    assert_eq!(
        listening.types(),
        ["events.subscribed", "events.subscribed"]
    );
    let mut leaving = h.controller(64);
    h.request(&leaving, 1, Message::EventsSubscribe {});
    assert_eq!(leaving.types(), ["events.subscribed"]);
    let mut not_subscribed = h.controller(64);
    let (_plugin, _) = h.plugin("/a");
    // Subscribing twice still means one copy of each event.
    assert_eq!(listening.types(), ["stream"]);
    assert_eq!(leaving.types(), ["stream"]);
    assert!(not_subscribed.types().is_empty());
    h.app.handle(DaemonEvent::Disconnected {
        conn_id: leaving.conn_id,
        reason: "closed".into(),
    });
    let (_plugin2, _) = h.plugin("/b");
    assert_eq!(listening.types(), ["stream"]);
    assert!(
        leaving.types().is_empty(),
        "a closed connection is no subscriber"
    );
    assert!(not_subscribed.types().is_empty());
}

#[test]
fn shutdown_fails_running_drives_then_says_bye_to_everyone() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.request(&controller, 2, Message::EventsSubscribe {});
    controller.drain();
    h.app.shutdown();
    assert_eq!(h.drive_state(&drive_id), DriveState::Failed);
    assert_eq!(
        h.app
            .drives
            .get(&drive_id)
            .unwrap()
            .blocker
            .as_ref()
            .unwrap()
            .code,
        "daemon_shutdown"
    );
    assert_eq!(controller.types(), ["stream", "bye"]);
    assert_eq!(plugin.types(), ["drive", "cancel", "bye"]);
    assert!(plugin.close.is_cancelled() && controller.close.is_cancelled());
}

#[test]
fn acks_from_a_session_that_was_not_given_the_drive_are_refused() {
    let mut h = Harness::new();
    let (_owner, owner_id) = h.plugin("/w");
    let (mut intruder, _) = h.plugin("/x");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(owner_id), "hi");
    h.ack(&intruder, &drive_id, AckStage::Submitted);
    assert_eq!(intruder.types(), ["error"]);
    assert_eq!(h.drive_state(&drive_id), DriveState::Sent);
}

fn routes_sent(peer: &mut Peer) -> Vec<String> {
    peer.drain()
        .into_iter()
        .filter_map(|m| match m {
            Message::Drive(order) => Some(format!(
                "{} {}",
                order.route.as_str(),
                order
                    .steps
                    .first()
                    .map(|s| s.command.as_str())
                    .unwrap_or("-")
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_nacked_native_send_falls_back_to_plugin_drive() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    assert_eq!(
        routes_sent(&mut plugin),
        ["native_send workbench.action.chat.open"]
    );
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.fail_step(&plugin, &drive_id, "command_not_allowed");
    assert_eq!(
        routes_sent(&mut plugin),
        ["plugin_drive workbench.action.chat.focusInput"]
    );
    h.ack(&plugin, &drive_id, AckStage::Pasted);
    h.ack(&plugin, &drive_id, AckStage::Submitted);
    assert_eq!(h.drive_state(&drive_id), DriveState::Done);
    assert_eq!(
        h.attempts(&drive_id),
        [
            "vscode_native_chat_open failed",
            "vscode_plugin_drive succeeded"
        ]
    );
    assert_eq!(
        h.app.drives.get(&drive_id).unwrap().verification,
        koru_protocol::Verification::Acked
    );
}

#[test]
fn a_route_that_may_have_pasted_is_never_followed_by_another() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.ack(&plugin, &drive_id, AckStage::Pasted);
    h.fail_step(&plugin, &drive_id, "chat_busy");
    assert_eq!(h.drive_state(&drive_id), DriveState::Failed);
    assert_eq!(
        routes_sent(&mut plugin).len(),
        1,
        "no second route was sent to the plugin"
    );
    assert!(
        h.injections.started.lock().unwrap().is_empty(),
        "no OS injection either"
    );
    let attempts = h.attempts(&drive_id);
    assert_eq!(attempts[0], "vscode_native_chat_open failed");
    assert!(
        attempts[1..].iter().all(|a| a.ends_with("nottried")),
        "{attempts:?}"
    );
}

#[test]
fn a_plugin_that_stalls_after_pasted_times_out_without_a_second_submit() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.ack(&plugin, &drive_id, AckStage::Pasted);
    for _ in 0..6 {
        h.advance(999);
        h.pong(&plugin);
    }
    assert_eq!(h.drive_state(&drive_id), DriveState::TimedOut);
    assert_eq!(routes_sent(&mut plugin).len(), 1);
    assert!(h.injections.started.lock().unwrap().is_empty());
}

#[test]
fn when_plugin_routes_fail_os_injection_delivers_unverified() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let (plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.fail_step(&plugin, &drive_id, "capability_missing");
    h.fail_step(&plugin, &drive_id, "capability_missing");
    let jobs = h.injections.started.lock().unwrap().clone();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].interface, "os_injector_xdotool");
    assert_eq!(jobs[0].window.pid, Some(4242));
    assert_eq!(
        (jobs[0].paste_chord.as_str(), jobs[0].submit_chord.as_str()),
        ("ctrl+v", "Return")
    );
    h.finish_injection(&drive_id, crate::drive::inject::Reached::Submitted, None);
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Done);
    assert_eq!(drive.verification, koru_protocol::Verification::Unverified);
    let attempts = h.attempts(&drive_id);
    assert_eq!(
        attempts,
        [
            "vscode_native_chat_open failed",
            "vscode_plugin_drive failed",
            "os_injector_wtype skipped",
            "os_injector_xdotool succeeded"
        ]
    );
}

#[test]
fn window_targets_use_os_injection_one_at_a_time_and_fall_back_when_focus_fails_early() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool", "os_injector_enigo"]);
    let mut controller = h.controller(64);
    let window = |pid| {
        Target::Window(koru_protocol::WindowTarget {
            pid: Some(pid),
            title: None,
        })
    };
    let first = h.create(&mut controller, window(100), "one");
    let second = h.create(&mut controller, window(200), "two");
    assert_eq!(
        h.injections.started.lock().unwrap().len(),
        1,
        "keyboard input is global: one injection at a time"
    );
    // The first fails before any key (focus): the next injector is tried.
    h.finish_injection(
        &first,
        crate::drive::inject::Reached::Nothing,
        Some("focus_mismatch"),
    );
    // The second drive now gets the keyboard; the first's fallback waits behind it.
    let started: Vec<(String, String)> = h
        .injections
        .started
        .lock()
        .unwrap()
        .iter()
        .map(|j| (j.drive_id.clone(), j.interface.clone()))
        .collect();
    assert_eq!(
        started[1],
        (second.clone(), "os_injector_xdotool".to_string())
    );
    h.finish_injection(&second, crate::drive::inject::Reached::Submitted, None);
    let started = h.injections.started.lock().unwrap().clone();
    assert_eq!(
        (started[2].drive_id.as_str(), started[2].interface.as_str()),
        (first.as_str(), "os_injector_enigo")
    );
    h.finish_injection(&first, crate::drive::inject::Reached::Submitted, None);
    assert_eq!(h.drive_state(&first), DriveState::Done);
    assert_eq!(h.drive_state(&second), DriveState::Done);
}

#[test]
fn policy_can_forbid_os_injection() {
    let mut h = Harness::with_registry(
        "policy:\n  allow_os_injection: false\n",
        &["os_injector_xdotool"],
    );
    let mut controller = h.controller(64);
    let drive_id = h.create(
        &mut controller,
        Target::Window(koru_protocol::WindowTarget {
            pid: Some(100),
            title: None,
        }),
        "no",
    );
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    assert_eq!(drive.blocker.as_ref().unwrap().code, "policy_forbidden");
    assert!(h.injections.started.lock().unwrap().is_empty());
}

#[test]
fn a_busy_chat_holds_queued_drives_until_idle_or_fails_fast_on_request() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let plugin_conn = plugin.conn_id;
    let busy = |h: &mut Harness, kind: koru_protocol::PluginEventKind| {
        h.app.handle(DaemonEvent::Received {
            conn_id: plugin_conn,
            in_flight: crate::app::InFlight::untracked(),
            envelope: Box::new(Envelope::new(Message::Event(koru_protocol::PluginEvent {
                event: kind,
            }))),
        })
    };
    busy(&mut h, koru_protocol::PluginEventKind::ChatBusy);
    let waiting = h.create(
        &mut controller,
        Target::Session(session_id.clone()),
        "later",
    );
    assert_eq!(h.drive_state(&waiting), DriveState::Queued);
    let impatient = h.create_fail_fast(&mut controller, &session_id, "now or never");
    assert_eq!(h.drive_state(&impatient), DriveState::Failed);
    assert_eq!(
        h.app
            .drives
            .get(&impatient)
            .unwrap()
            .blocker
            .as_ref()
            .unwrap()
            .code,
        "chat_busy"
    );
    assert!(routes_sent(&mut plugin).is_empty());
    busy(&mut h, koru_protocol::PluginEventKind::ChatIdle);
    assert_eq!(h.drive_state(&waiting), DriveState::Sent);
}

#[test]
fn a_plugin_silent_for_a_whole_step_ends_the_drive_timed_out_without_fallback() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    h.app.config.step_timeout_ms = 3_000;
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.ack(&plugin, &drive_id, AckStage::Received);
    // Keep the session alive but ack nothing more for longer than the step timeout.
    for _ in 0..4 {
        h.advance(900);
        h.pong(&plugin);
    }
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::TimedOut);
    assert!(drive
        .blocker
        .as_ref()
        .unwrap()
        .detail
        .contains("acked nothing for 3000 ms after `received`"));
    assert_eq!(routes_sent(&mut plugin).len(), 1);
    assert!(h.injections.started.lock().unwrap().is_empty());
}

/// Claude Code recorded `prompt` in `folder`, in its chat `chat_id`: by its hook (reported,
/// no file) or its transcript (a file).
fn claude_recorded(h: &mut Harness, prompt: &str, folder: &str, chat_id: &str, by_hook: bool) {
    let now = h.clock.now_ms();
    let (excerpt, length) = crate::observe::excerpt_and_length(prompt);
    h.app.handle(DaemonEvent::Observed {
        events: vec![koru_protocol::ObservedEvent {
            store: crate::observe::stores::claude_code::STORE.into(),
            chat_id: chat_id.into(),
            workspace: Some(folder.into()),
            store_ts_ms: None,
            seen_at_ms: now,
            basis: koru_protocol::ObservationBasis::Explicit,
            process: None,
            event: koru_protocol::ObservedKind::PromptSeen {
                excerpt,
                length,
                digest: crate::observe::prompt_digest(prompt),
            },
        }],
        replay: false,
        source: (!by_hook).then(|| {
            std::path::PathBuf::from(format!("/home/u/.claude/projects/w/{chat_id}.jsonl"))
        }),
    });
}

fn observed(
    h: &Harness,
    chat: &str,
    workspace: &str,
    event: koru_protocol::ObservedKind,
) -> DaemonEvent {
    let now = h.clock.now_ms();
    DaemonEvent::Observed {
        events: vec![koru_protocol::ObservedEvent {
            store: "chat_history_claude_code_jsonl".into(),
            chat_id: chat.into(),
            workspace: Some(workspace.into()),
            store_ts_ms: Some(now),
            seen_at_ms: now,
            basis: koru_protocol::ObservationBasis::Explicit,
            process: None,
            event,
        }],
        replay: false,
        source: Some(std::path::PathBuf::from(format!("/store/{chat}.jsonl"))),
    }
}

fn prompt_seen(text: &str) -> koru_protocol::ObservedKind {
    let (excerpt, length) = crate::observe::excerpt_and_length(text);
    koru_protocol::ObservedKind::PromptSeen {
        excerpt,
        length,
        digest: crate::observe::prompt_digest(text),
    }
}

fn observation_stage(h: &Harness, drive_id: &str) -> Option<koru_protocol::ObservedStage> {
    h.app
        .drives
        .get(drive_id)
        .unwrap()
        .observation
        .as_ref()
        .map(|o| o.stage)
}

#[test]
fn a_drive_is_matched_to_the_prompt_its_chat_recorded_and_follows_the_chat_to_the_reply() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive = h.create(
        &mut controller,
        Target::Session(session_id),
        "Fix  the\ntests",
    );
    for stage in [AckStage::Received, AckStage::Submitted] {
        h.ack(&plugin, &drive, stage);
    }
    assert_eq!(h.drive_state(&drive), DriveState::Done);
    // The same prompt in another workspace is not this drive's.
    let elsewhere = observed(&h, "c0", "/other", prompt_seen("Fix the tests"));
    h.app.handle(elsewhere);
    assert_eq!(observation_stage(&h, &drive), None);
    // The chat re-wrapped the whitespace; the digest still matches.
    let event = observed(&h, "c1", "/w/sub", prompt_seen("Fix the tests"));
    h.app.handle(event);
    assert_eq!(
        observation_stage(&h, &drive),
        Some(koru_protocol::ObservedStage::Observed)
    );
    let event = observed(
        &h,
        "c1",
        "/w/sub",
        koru_protocol::ObservedKind::ReplyStarted,
    );
    h.app.handle(event);
    assert_eq!(
        observation_stage(&h, &drive),
        Some(koru_protocol::ObservedStage::Replying)
    );
    let event = observed(
        &h,
        "c1",
        "/w/sub",
        koru_protocol::ObservedKind::ReplyCompleted {
            excerpt: "All green.".into(),
            length: 10,
        },
    );
    h.app.handle(event);
    let found = h
        .app
        .drives
        .get(&drive)
        .unwrap()
        .observation
        .clone()
        .unwrap();
    assert_eq!(found.stage, koru_protocol::ObservedStage::Replied);
    assert_eq!(found.reply_excerpt.as_deref(), Some("All green."));
    assert_eq!(found.chat_id, "c1");
    // The drive's own state is untouched; subscribers were told.
    assert_eq!(h.drive_state(&drive), DriveState::Done);
    let _ = plugin.drain();
}

#[test]
fn a_chat_seen_through_a_window_is_a_target_that_means_that_window() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let (_other, _) = h.plugin("/w2");
    let mut controller = h.controller(64);
    let first = h.create(
        &mut controller,
        Target::Session(session_id.clone()),
        "Start the refactor",
    );
    for stage in [AckStage::Received, AckStage::Submitted] {
        h.ack(&plugin, &first, stage);
    }
    let event = observed(&h, "c7", "/w", prompt_seen("Start the refactor"));
    h.app.handle(event);
    let done = koru_protocol::ObservedKind::ReplyCompleted {
        excerpt: "Done.".into(),
        length: 5,
    };
    let event = observed(&h, "c7", "/w", done);
    h.app.handle(event);
    let _ = plugin.drain();
    let next = h.create(&mut controller, Target::Chat("c7".into()), "And the tests");
    assert_eq!(h.app.drives.get(&next).unwrap().session_id, session_id);
    let order = plugin.drain();
    assert!(
        order
            .iter()
            .any(|m| matches!(m, Message::Drive(d) if d.prompt == "And the tests")),
        "the window that holds the chat got the drive: {order:?}"
    );
}

#[test]
fn two_drives_with_the_same_prompt_are_ambiguous_and_neither_is_claimed() {
    let mut h = Harness::new();
    let (plugin_a, a) = h.plugin("/w");
    let (plugin_b, b) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(a), "same words");
    let second = h.create(&mut controller, Target::Session(b), "same words");
    h.ack(&plugin_a, &first, AckStage::Received);
    h.ack(&plugin_b, &second, AckStage::Received);
    let event = observed(&h, "c1", "/w", prompt_seen("same words"));
    h.app.handle(event);
    for drive in [&first, &second] {
        let found = h
            .app
            .drives
            .get(drive)
            .unwrap()
            .observation
            .clone()
            .unwrap();
        assert_eq!(found.stage, koru_protocol::ObservedStage::Ambiguous);
        assert!(found.detail.unwrap().contains("matches 2 drives"));
    }
    // The chat's reply is not attributed to either.
    let event = observed(&h, "c1", "/w", koru_protocol::ObservedKind::ReplyStarted);
    h.app.handle(event);
    assert_eq!(
        observation_stage(&h, &first),
        Some(koru_protocol::ObservedStage::Ambiguous)
    );
}

#[test]
fn a_chat_observed_replying_holds_its_windows_queued_drives_until_it_is_idle() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let event = observed(&h, "c1", "/w", prompt_seen("someone else's prompt"));
    h.app.handle(event);
    let waiting = h.create(&mut controller, Target::Session(session_id.clone()), "mine");
    assert_eq!(h.drive_state(&waiting), DriveState::Queued);
    assert!(routes_sent(&mut plugin).is_empty());
    // Fail-fast drives are refused while the chat is observed busy.
    let impatient = h.create_fail_fast(&mut controller, &session_id, "now");
    assert_eq!(h.drive_state(&impatient), DriveState::Failed);
    let event = observed(
        &h,
        "c1",
        "/w",
        koru_protocol::ObservedKind::ReplyCompleted {
            excerpt: "done".into(),
            length: 4,
        },
    );
    h.app.handle(event);
    assert_eq!(h.drive_state(&waiting), DriveState::Sent);
}

fn recover(
    h: &mut Harness,
    controller: &mut Peer,
    action: koru_protocol::RecoveryAction,
) -> Message {
    h.request(
        controller,
        7,
        Message::RecoveryRun(koru_protocol::RecoveryRun { action }),
    );
    controller.drain().pop().expect("a reply")
}

/// A drive to `session_id` whose every plugin route failed before anything was pasted.
fn failed_before_paste(
    h: &mut Harness,
    plugin: &mut Peer,
    controller: &mut Peer,
    session_id: &str,
) -> String {
    let drive_id = h.create(
        controller,
        Target::Session(session_id.into()),
        "fix the build",
    );
    h.ack(plugin, &drive_id, AckStage::Received);
    h.fail_step(plugin, &drive_id, "command_not_allowed");
    h.fail_step(plugin, &drive_id, "capability_missing");
    assert_eq!(h.drive_state(&drive_id), DriveState::Failed);
    plugin.drain();
    drive_id
}

#[test]
fn a_drive_that_failed_before_pasting_is_retried_once_by_the_chosen_route() {
    use koru_protocol::RecoveryAction::RetryDrive;
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let failed = failed_before_paste(&mut h, &mut plugin, &mut controller, &session_id);

    let reply = recover(
        &mut h,
        &mut controller,
        RetryDrive {
            drive_id: failed.clone(),
            route: Some(Route::PluginDrive),
        },
    );
    let Message::RecoveryResult(result) = reply else {
        panic!("{reply:?}")
    };
    assert!(result.ok, "{result:?}");
    let retry = result.drive.expect("the new drive");
    assert_eq!(retry.retry_of.as_deref(), Some(failed.as_str()));
    assert_ne!(retry.drive_id, failed);
    let retried = h.app.drives.get(&retry.drive_id).unwrap();
    assert_eq!(
        retried.prompt, "fix the build",
        "the whole prompt, not the excerpt"
    );
    assert_eq!(
        routes_sent(&mut plugin),
        ["plugin_drive workbench.action.chat.focusInput"],
        "only the chosen route"
    );

    let again = recover(
        &mut h,
        &mut controller,
        RetryDrive {
            drive_id: failed.clone(),
            route: None,
        },
    );
    let Message::Error(error) = again else {
        panic!("{again:?}")
    };
    assert_eq!(error.code, ErrorCode::NotRetryable);
    assert!(error.message.contains(&retry.drive_id), "{}", error.message);
}

#[test]
fn a_drive_that_may_have_been_submitted_or_still_runs_is_never_retried() {
    use koru_protocol::RecoveryAction::RetryDrive;
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let pasted = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    h.ack(&plugin, &pasted, AckStage::Received);
    h.ack(&plugin, &pasted, AckStage::Pasted);
    h.fail_step(&plugin, &pasted, "focus_mismatch");
    assert_eq!(h.drive_state(&pasted), DriveState::Failed);
    let running = h.create(&mut controller, Target::Session(session_id), "two");
    plugin.drain();

    for (drive_id, why) in [(&pasted, "pasting"), (&running, "still")] {
        let reply = recover(
            &mut h,
            &mut controller,
            RetryDrive {
                drive_id: drive_id.clone(),
                route: None,
            },
        );
        let Message::Error(error) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(error.code, ErrorCode::NotRetryable);
        assert!(error.message.contains(why), "{}", error.message);
    }
    assert!(
        routes_sent(&mut plugin).is_empty(),
        "nothing was sent again"
    );
}

#[test]
fn cancel_and_reconnect_act_at_once_and_are_announced_with_who_asked() {
    use koru_protocol::RecoveryAction::{CancelDrive, ReconnectPlugin};
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut watcher = h.controller(64);
    h.request(&watcher, 1, Message::EventsSubscribe {});
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id.clone()), "hi");
    watcher.drain();

    let reply = recover(
        &mut h,
        &mut controller,
        CancelDrive {
            drive_id: drive_id.clone(),
        },
    );
    let Message::RecoveryResult(result) = reply else {
        panic!("{reply:?}")
    };
    assert!(result.ok);
    assert_eq!(result.drive.unwrap().state, DriveState::Cancelled);
    assert_eq!(plugin.types(), ["drive", "cancel"]);

    let reply = recover(
        &mut h,
        &mut controller,
        ReconnectPlugin {
            session_id: session_id.clone(),
        },
    );
    assert!(
        matches!(reply, Message::RecoveryResult(ref r) if r.ok),
        "{reply:?}"
    );
    let said = plugin.drain();
    assert!(
        matches!(said.as_slice(), [Message::Bye(bye)] if bye.reason.as_deref() == Some("reconnect_requested")),
        "{said:?}"
    );
    assert!(
        plugin.close.is_cancelled(),
        "the plugin's connection is closed"
    );

    let announced: Vec<(String, String)> = watcher
        .drain()
        .into_iter()
        .filter_map(|m| match m {
            Message::Stream(item) => match item.event {
                StreamEvent::RecoveryPerformed { action, by, ok, .. } => {
                    assert!(ok);
                    Some((action, by))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        announced,
        [
            ("cancel_drive".to_string(), "unit (pid 42)".to_string()),
            ("reconnect_plugin".to_string(), "unit (pid 42)".to_string())
        ]
    );

    let reply = recover(
        &mut h,
        &mut controller,
        ReconnectPlugin {
            session_id: "s_gone".into(),
        },
    );
    assert!(
        matches!(reply, Message::Error(ref e) if e.code == ErrorCode::NoTarget),
        "{reply:?}"
    );
}

#[test]
fn slow_actions_run_off_the_loop_and_answer_when_done() {
    use super::recovery::{RecoveryDone, RecoveryJob};
    use koru_protocol::RecoveryAction::{FocusWindow, ReloadRegistry};
    let mut h = Harness::with_registry("", &["os_injector_wtype"]);
    let (_plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    h.request(
        &controller,
        3,
        Message::RecoveryRun(koru_protocol::RecoveryRun {
            action: FocusWindow { session_id },
        }),
    );
    h.request(
        &controller,
        4,
        Message::RecoveryRun(koru_protocol::RecoveryRun {
            action: ReloadRegistry {},
        }),
    );
    assert!(
        controller.drain().is_empty(),
        "no answer before the work is done"
    );
    let started: Vec<_> = h.recovery.started.lock().unwrap().drain(..).collect();
    assert_eq!(started.len(), 2);
    let RecoveryJob::FocusWindow(job) = &started[0].1 else {
        panic!("{:?}", started[0].1)
    };
    assert_eq!(
        job.interface, "os_injector_wtype",
        "the first injector that works here"
    );
    assert_eq!(job.window.pid, Some(4242), "the plugin's window");
    assert!(matches!(started[1].1, RecoveryJob::ReloadRegistry));

    let mut broken = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
    broken.diagnostics.push(koru_registry::Diagnostic {
        file: "user.yaml".into(),
        line: 3,
        column: 1,
        message: "bad".into(),
    });
    let mut jobs = started.into_iter();
    let (focus_ticket, _) = jobs.next().unwrap();
    let (reload_ticket, _) = jobs.next().unwrap();
    h.app.handle(DaemonEvent::RecoveryFinished {
        ticket: reload_ticket,
        done: Box::new(RecoveryDone::Reloaded(Box::new(broken))),
    });
    h.app.handle(DaemonEvent::RecoveryFinished {
        ticket: focus_ticket,
        done: Box::new(RecoveryDone::Focused(Err(koru_protocol::Blocker::new(
            "focus_mismatch",
            "no window matches pid 4242",
        )))),
    });
    let replies = controller.drain();
    let results: Vec<(bool, String)> = replies
        .iter()
        .map(|m| match m {
            Message::RecoveryResult(r) => {
                (r.ok, r.blocker.clone().map(|b| b.code).unwrap_or_default())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        results,
        [
            (false, "registry_invalid".to_string()),
            (false, "focus_mismatch".to_string())
        ]
    );
}

#[test]
fn focusing_without_any_injector_says_why_at_once() {
    let mut h = Harness::new();
    let (_plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let reply = recover(
        &mut h,
        &mut controller,
        koru_protocol::RecoveryAction::FocusWindow { session_id },
    );
    let Message::RecoveryResult(result) = reply else {
        panic!("{reply:?}")
    };
    assert!(!result.ok);
    assert_eq!(result.blocker.unwrap().code, "no_display");
    assert!(h.recovery.started.lock().unwrap().is_empty());
}

#[test]
fn a_plugins_announced_storage_is_handed_on_for_the_life_of_its_session_only() {
    use crate::observe::announced::{RecordingSessionStoreRoots, RootsChange};
    let mut h = Harness::new();
    let roots = RecordingSessionStoreRoots::default();
    h.app.session_store_roots = Box::new(roots.clone());
    let storage = koru_protocol::WindowStorage {
        workspace_storage: Some("/home/u/.local/share/code-server/User/workspaceStorage/4f".into()),
        global_storage: Some("/home/u/.local/share/code-server/User/globalStorage".into()),
    };
    let mut hello = plugin_hello("/w");
    if let Some(window) = hello.window.as_mut() {
        window.storage = Some(storage.clone());
    }
    let announcing = h.connect(hello, 64);
    let (silent, _) = h.plugin("/v");
    let controller = h.controller(64);
    let session_id = h.app.connections[&announcing.conn_id]
        .session_id
        .clone()
        .unwrap();
    assert_eq!(
        *roots.changes.lock().unwrap(),
        [RootsChange::Add {
            session_id: session_id.clone(),
            storage,
            workspace: Some("/w".into()),
        }]
    );
    // Sessions that announced nothing have nothing to drop.
    for peer in [&silent, &controller] {
        h.app.handle(DaemonEvent::Disconnected {
            conn_id: peer.conn_id,
            reason: "eof".into(),
        });
    }
    assert_eq!(roots.changes.lock().unwrap().len(), 1);
    h.app.handle(DaemonEvent::Disconnected {
        conn_id: announcing.conn_id,
        reason: "eof".into(),
    });
    assert_eq!(
        roots.changes.lock().unwrap().last(),
        Some(&RootsChange::Remove { session_id })
    );
    assert_eq!(roots.changes.lock().unwrap().len(), 2);
}

fn plugin_event(h: &mut Harness, peer: &Peer, event: koru_protocol::PluginEventKind) {
    h.app.handle(DaemonEvent::Received {
        conn_id: peer.conn_id,
        in_flight: crate::app::InFlight::untracked(),
        envelope: Box::new(Envelope::new(Message::Event(koru_protocol::PluginEvent {
            event,
        }))),
    });
}

fn ack_with_evidence(
    h: &mut Harness,
    peer: &Peer,
    drive_id: &str,
    evidence: Option<koru_protocol::SubmitEvidence>,
) {
    h.app.handle(DaemonEvent::Received {
        conn_id: peer.conn_id,
        in_flight: crate::app::InFlight::untracked(),
        envelope: Box::new(Envelope::new(Message::Ack(Ack {
            drive_id: drive_id.into(),
            stage: AckStage::Submitted,
            blocker: None,
            evidence,
            refusal: None,
        }))),
    });
}

fn not_ready_plugin(h: &mut Harness, folder: &str, reason: &str) -> (Peer, String) {
    let mut hello = plugin_hello(folder);
    hello.chat = Some(koru_protocol::ChatReadiness {
        ready: false,
        reason: Some(reason.into()),
    });
    let mut peer = h.connect(hello, 64);
    let Message::Welcome(welcome) = peer.drain().remove(0) else {
        panic!("no welcome");
    };
    (peer, welcome.session_id)
}

#[test]
fn the_welcome_carries_the_hellos_id() {
    let mut h = Harness::new();
    h.next_conn += 1;
    let (outbound, mut rx) = mpsc::channel(8);
    h.app.handle(DaemonEvent::Connected {
        conn_id: h.next_conn,
        handle: ConnectionHandle {
            outbound,
            close: CancellationToken::new(),
        },
        peer: PeerInfo::default(),
    });
    h.app.handle(DaemonEvent::Greeted {
        conn_id: h.next_conn,
        hello: Box::new(controller_hello()),
        hello_id: Some(RequestId::Text("h-1".into())),
        protocol: 1,
    });
    let welcome = decode(&rx.try_recv().unwrap());
    assert!(matches!(welcome.message, Message::Welcome(_)));
    assert_eq!(welcome.id, Some(RequestId::Text("h-1".into())));
}

#[test]
fn a_drive_waits_for_a_chat_that_is_not_ready_and_goes_when_it_is() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = not_ready_plugin(&mut h, "/w", "no language model");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id.clone()), "hi");
    assert_eq!(h.drive_state(&drive_id), DriveState::Queued);
    assert!(
        routes_sent(&mut plugin).is_empty(),
        "nothing is sent into a chat that would refuse it"
    );
    let info = h.app.drives.get(&drive_id).unwrap().info();
    let waiting = info.waiting.expect("the drive says why it waits");
    assert_eq!(waiting.code, "chat_not_ready");
    assert!(
        waiting.detail.contains("no language model"),
        "{}",
        waiting.detail
    );
    plugin_event(
        &mut h,
        &plugin,
        koru_protocol::PluginEventKind::ChatReadiness {
            ready: true,
            reason: None,
        },
    );
    assert_eq!(h.drive_state(&drive_id), DriveState::Sent);
    assert_eq!(
        routes_sent(&mut plugin),
        ["native_send workbench.action.chat.open"]
    );
    assert!(h
        .app
        .drives
        .get(&drive_id)
        .unwrap()
        .info()
        .waiting
        .is_none());
    let session = h.app.sessions.get(&session_id).unwrap().info();
    assert!(session.chat_readiness.unwrap().ready);
}

#[test]
fn a_chat_still_not_ready_at_the_deadline_fails_the_drive_with_chat_not_ready_and_the_hint() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = not_ready_plugin(&mut h, "/w", "signed out");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    for _ in 0..6 {
        h.advance(1_000);
        h.pong(&plugin);
    }
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    let blocker = drive.blocker.as_ref().unwrap();
    assert_eq!(blocker.code, "chat_not_ready");
    assert!(blocker.detail.contains("signed out"), "{}", blocker.detail);
    assert!(
        blocker.detail.contains("Sign in or pick a model"),
        "the registry's hint is in the detail: {}",
        blocker.detail
    );
    assert!(routes_sent(&mut plugin).is_empty());
}

#[test]
fn a_submit_without_evidence_is_recorded_as_only_the_command_returning() {
    let mut h = Harness::new();
    let (plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    h.ack(&plugin, &drive_id, AckStage::Received);
    ack_with_evidence(&mut h, &plugin, &drive_id, None);
    let info = h.app.drives.get(&drive_id).unwrap().info();
    assert_eq!(info.state, DriveState::Done);
    assert_eq!(
        info.submit_evidence,
        Some(koru_protocol::SubmitEvidence::CommandReturned)
    );
}

#[test]
fn a_refused_chat_fails_the_drive_without_trying_another_route() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "hi");
    assert_eq!(
        routes_sent(&mut plugin),
        ["native_send workbench.action.chat.open"]
    );
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.fail_step(&plugin, &drive_id, "chat_refused");
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    assert_eq!(drive.blocker.as_ref().unwrap().code, "chat_refused");
    assert!(
        routes_sent(&mut plugin).is_empty(),
        "no plugin drive after a refusal"
    );
    assert!(h
        .attempts(&drive_id)
        .iter()
        .any(|a| a.starts_with("vscode_plugin_drive") && a.ends_with("nottried")));
}

#[test]
fn a_running_answer_holds_the_next_drive_until_the_plugin_reports_its_outcome() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    h.ack(&plugin, &first, AckStage::Received);
    ack_with_evidence(
        &mut h,
        &plugin,
        &first,
        Some(koru_protocol::SubmitEvidence::ChatRunning),
    );
    assert_eq!(h.drive_state(&first), DriveState::Done);
    routes_sent(&mut plugin);
    let second = h.create(&mut controller, Target::Session(session_id.clone()), "two");
    assert_eq!(h.drive_state(&second), DriveState::Queued);
    assert_eq!(
        h.app
            .drives
            .get(&second)
            .unwrap()
            .info()
            .waiting
            .unwrap()
            .code,
        "chat_busy"
    );
    plugin_event(
        &mut h,
        &plugin,
        koru_protocol::PluginEventKind::ChatOutcome {
            drive_id: first.clone(),
            outcome: koru_protocol::ChatOutcome::ReplyCompleted {
                excerpt: None,
                length: None,
            },
        },
    );
    let observation = h
        .app
        .drives
        .get(&first)
        .unwrap()
        .observation
        .clone()
        .unwrap();
    assert_eq!(observation.stage, koru_protocol::ObservedStage::Replied);
    assert_eq!(observation.store, super::PLUGIN_OBSERVATION_STORE);
    assert_eq!(
        h.drive_state(&second),
        DriveState::Sent,
        "the idle chat takes the next drive"
    );
}

#[test]
fn an_answer_whose_outcome_never_comes_stops_holding_drives_after_the_bound() {
    let mut h = Harness::new();
    h.app.config.default_drive_timeout_ms = 3_600_000;
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    ack_with_evidence(
        &mut h,
        &plugin,
        &first,
        Some(koru_protocol::SubmitEvidence::ChatRunning),
    );
    routes_sent(&mut plugin);
    h.clock.advance(super::CHAT_RUNNING_BUSY_MS);
    h.pong(&plugin);
    let second = h.create(&mut controller, Target::Session(session_id), "two");
    assert_eq!(h.drive_state(&second), DriveState::Sent);
}

#[test]
fn plugin_and_store_report_the_same_reply_once_and_the_store_adds_the_text() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let mut subscriber = h.controller(256);
    h.request(&subscriber, 5, Message::EventsSubscribe {});
    subscriber.drain();
    let drive = h.create(
        &mut controller,
        Target::Session(session_id),
        "Fix the tests",
    );
    h.ack(&plugin, &drive, AckStage::Received);
    ack_with_evidence(
        &mut h,
        &plugin,
        &drive,
        Some(koru_protocol::SubmitEvidence::ChatResponded),
    );
    routes_sent(&mut plugin);
    let replied_updates = |peer: &mut Peer| {
        peer.drain()
            .into_iter()
            .filter_map(|m| match m {
                Message::Stream(item) => match item.event {
                    StreamEvent::DriveUpdated { drive } => drive.observation,
                    _ => None,
                },
                _ => None,
            })
            .filter(|o| o.stage == koru_protocol::ObservedStage::Replied)
            .collect::<Vec<_>>()
    };
    replied_updates(&mut subscriber);
    let outcome = koru_protocol::PluginEventKind::ChatOutcome {
        drive_id: drive.clone(),
        outcome: koru_protocol::ChatOutcome::ReplyCompleted {
            excerpt: None,
            length: None,
        },
    };
    plugin_event(&mut h, &plugin, outcome.clone());
    assert_eq!(replied_updates(&mut subscriber).len(), 1);
    // The same outcome again is not news.
    plugin_event(&mut h, &plugin, outcome);
    assert!(replied_updates(&mut subscriber).is_empty());
    // The store then sees the prompt: the drive keeps its stage and learns its chat; then
    // the reply: it gains the reply's text, published once.
    let event = observed(&h, "c1", "/w", prompt_seen("Fix the tests"));
    h.app.handle(event);
    let named = replied_updates(&mut subscriber);
    assert_eq!(named.len(), 1, "the store names the chat once");
    assert_eq!(named[0].chat_id, "c1");
    assert_eq!(named[0].reply_excerpt, None);
    let event = observed(
        &h,
        "c1",
        "/w",
        koru_protocol::ObservedKind::ReplyCompleted {
            excerpt: "All green.".into(),
            length: 10,
        },
    );
    h.app.handle(event);
    let updates = replied_updates(&mut subscriber);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].reply_excerpt.as_deref(), Some("All green."));
    // The store's end seen again (its end record and a hook) is not news either.
    let event = observed(
        &h,
        "c1",
        "/w",
        koru_protocol::ObservedKind::ReplyCompleted {
            excerpt: "All green.".into(),
            length: 10,
        },
    );
    h.app.handle(event);
    assert!(replied_updates(&mut subscriber).is_empty());
}

#[test]
fn a_remote_windows_folder_is_a_target_by_uri_or_short_form_and_never_by_a_local_path() {
    let mut h = Harness::new();
    let mut hello = plugin_hello("/unused");
    let window = hello.window.as_mut().unwrap();
    window.workspace_folders.clear();
    window.remote_name = Some("ssh-remote".into());
    window.workspace_uris = vec!["vscode-remote://ssh-remote+box/home/me/repo".into()];
    let mut peer = h.connect(hello, 64);
    let Message::Welcome(welcome) = peer.drain().remove(0) else {
        panic!("no welcome");
    };
    let (_local, local_session) = h.plugin("/home/me/repo");
    let mut controller = h.controller(64);
    for target in [
        "vscode-remote://ssh-remote+box/home/me/repo",
        "ssh-remote+box:/home/me/repo/src",
    ] {
        let drive = h.create(&mut controller, Target::Workspace(target.into()), "hi");
        assert_eq!(
            h.app.drives.get(&drive).unwrap().session_id,
            welcome.session_id,
            "{target}"
        );
    }
    let drive = h.create(
        &mut controller,
        Target::Workspace("/home/me/repo".into()),
        "hi",
    );
    assert_eq!(h.app.drives.get(&drive).unwrap().session_id, local_session);
    h.request(
        &controller,
        2,
        Message::DriveCreate(DriveCreate {
            target: Target::Workspace("ssh-remote+other:/home/me/repo".into()),
            prompt: "hi".into(),
            options: DriveOptions::default(),
        }),
    );
    let Message::Error(error) = controller.drain().remove(0) else {
        panic!("expected an error");
    };
    assert_eq!(error.code, ErrorCode::NoTarget);
    h.request(
        &controller,
        3,
        Message::DriveCreate(DriveCreate {
            target: Target::Workspace("repo".into()),
            prompt: "hi".into(),
            options: DriveOptions::default(),
        }),
    );
    let Message::Error(error) = controller.drain().remove(0) else {
        panic!("expected an error");
    };
    assert_eq!(error.code, ErrorCode::InvalidMessage);
    assert_eq!(
        error.location.and_then(|l| l.field).as_deref(),
        Some("target.workspace")
    );
}

/// A second drive to the busy session waits (queued) while the chat is busy, and is sent
/// once `CHAT_RUNNING_BUSY_MS` has passed with only ticks (no event from the plugin).
fn a_second_drive_waits_only_up_to_the_busy_bound(
    h: &mut Harness,
    plugin: &mut Peer,
    controller: &mut Peer,
    session_id: String,
) {
    let second = h.create(controller, Target::Session(session_id), "two");
    routes_sent(plugin);
    assert_eq!(h.drive_state(&second), DriveState::Queued);
    for _ in 0..(super::CHAT_RUNNING_BUSY_MS / 60_000) {
        h.advance(60_000);
        h.pong(plugin);
    }
    assert_eq!(h.drive_state(&second), DriveState::Sent);
}

#[test]
fn a_waiting_drive_goes_on_the_timer_once_the_running_answer_passes_its_bound() {
    let mut h = Harness::new();
    h.app.config.default_drive_timeout_ms = 3_600_000;
    h.app.config.heartbeat_ms = 120_000;
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    ack_with_evidence(
        &mut h,
        &plugin,
        &first,
        Some(koru_protocol::SubmitEvidence::ChatRunning),
    );
    a_second_drive_waits_only_up_to_the_busy_bound(
        &mut h,
        &mut plugin,
        &mut controller,
        session_id,
    );
}

#[test]
fn a_drive_never_sent_times_out_saying_what_it_waited_for() {
    let mut h = Harness::new();
    let (plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    h.request(
        &controller,
        2,
        Message::DriveCreate(DriveCreate {
            target: Target::Session(session_id),
            prompt: "two".into(),
            options: DriveOptions {
                timeout_ms: Some(2_000),
                ..DriveOptions::default()
            },
        }),
    );
    let Message::DriveResult(created) = controller.drain().remove(0) else {
        panic!("expected drive.result");
    };
    let second = created.drive.drive_id;
    h.ack(&plugin, &first, AckStage::Received);
    for _ in 0..3 {
        h.advance(1_000);
        h.pong(&plugin);
    }
    let drive = h.app.drives.get(&second).unwrap();
    assert_eq!(drive.state, DriveState::TimedOut);
    let detail = &drive.blocker.as_ref().unwrap().detail;
    assert!(
        detail.starts_with("not sent within 2000 ms: it waits for drive "),
        "{detail}"
    );
}

#[test]
fn a_later_stage_drops_what_was_said_about_the_earlier_one() {
    let mut found = koru_protocol::DriveObservation {
        store: "plugin".into(),
        chat_id: "s".into(),
        stage: koru_protocol::ObservedStage::NeedsInput,
        basis: koru_protocol::ObservationBasis::Explicit,
        at_ms: 1,
        reply_excerpt: None,
        reply_length: None,
        detail: Some("approve run_in_terminal".into()),
    };
    assert!(super::chats::merge_observation(
        &mut found,
        koru_protocol::ObservedStage::Replied,
        None,
        None,
        None,
        2
    ));
    assert_eq!(found.stage, koru_protocol::ObservedStage::Replied);
    assert_eq!(found.detail, None);
    assert!(!super::chats::merge_observation(
        &mut found,
        koru_protocol::ObservedStage::Replying,
        None,
        None,
        None,
        3
    ));
}

mod agent_chat;
mod agent_drives;
mod audits;
mod conversations;
mod drive_news;
mod journaling;
mod refusal;
mod submit_key;
mod terminals;

#[test]
fn a_chat_waiting_for_the_user_holds_drives_only_up_to_the_bound() {
    let mut h = Harness::new();
    h.app.config.default_drive_timeout_ms = 3_600_000;
    h.app.config.heartbeat_ms = 120_000;
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    ack_with_evidence(
        &mut h,
        &plugin,
        &first,
        Some(koru_protocol::SubmitEvidence::ChatResponded),
    );
    plugin_event(
        &mut h,
        &plugin,
        koru_protocol::PluginEventKind::ChatOutcome {
            drive_id: first,
            outcome: koru_protocol::ChatOutcome::NeedsInput {
                input: koru_protocol::NeedsInputKind::Permission,
                detail: None,
            },
        },
    );
    a_second_drive_waits_only_up_to_the_busy_bound(
        &mut h,
        &mut plugin,
        &mut controller,
        session_id,
    );
}

/// A `drive.create` of `prompt` to the window at `/w`; the error it met, if any.
fn create_or_refusal(h: &mut Harness, controller: &mut Peer, prompt: &str) -> Option<ErrorMessage> {
    create_or_refusal_at(h, controller, "/w", prompt)
}

/// A `drive.create` of `prompt` to the window at `workspace`; the error it met, if any.
fn create_or_refusal_at(
    h: &mut Harness,
    controller: &mut Peer,
    workspace: &str,
    prompt: &str,
) -> Option<ErrorMessage> {
    h.request(
        controller,
        7,
        Message::DriveCreate(DriveCreate {
            target: Target::Workspace(workspace.into()),
            prompt: prompt.into(),
            options: DriveOptions::default(),
        }),
    );
    controller.drain().into_iter().find_map(|m| match m {
        Message::Error(error) => Some(error),
        _ => None,
    })
}

#[test]
fn a_session_holding_its_limit_of_drives_refuses_the_next_with_queue_full_until_one_ends() {
    let mut h = Harness::new();
    h.app.config.max_queued_drives = 3;
    let (plugin, _session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Workspace("/w".into()), "one");
    for prompt in ["two", "three"] {
        assert_eq!(create_or_refusal(&mut h, &mut controller, prompt), None);
    }
    let refusal = create_or_refusal(&mut h, &mut controller, "four").expect("refused");
    assert_eq!(refusal.code, ErrorCode::QueueFull);
    assert!(
        refusal.message.contains("3 drives") && refusal.message.contains("--max-queued-drives 3"),
        "{}",
        refusal.message
    );
    assert_eq!(h.app.drives.total_created(), 3, "nothing was queued");
    h.ack(&plugin, &first, AckStage::Submitted);
    assert_eq!(h.drive_state(&first), DriveState::Done);
    assert_eq!(create_or_refusal(&mut h, &mut controller, "four"), None);
}

#[test]
fn one_session_may_hold_half_of_the_queued_prompt_bytes_and_all_of_them_share_the_cap() {
    let mut h = Harness::new();
    h.app.config.max_pending_prompt_bytes = 20;
    let mut controller = h.controller(64);
    for workspace in ["/a", "/b", "/c"] {
        h.plugin(workspace);
        // Each window's first drive is sent at once and holds no queued bytes.
        assert_eq!(
            create_or_refusal_at(&mut h, &mut controller, workspace, "sent"),
            None
        );
    }
    assert_eq!(
        create_or_refusal_at(&mut h, &mut controller, "/a", "123456"),
        None
    );
    let refusal = create_or_refusal_at(&mut h, &mut controller, "/a", "12345").expect("refused");
    assert_eq!(refusal.code, ErrorCode::QueueFull);
    assert!(
        refusal.message.contains("holds 6 bytes") && refusal.message.contains("its share"),
        "{}",
        refusal.message
    );
    // Another window still has room; then the two together fill the daemon's cap.
    assert_eq!(
        create_or_refusal_at(&mut h, &mut controller, "/b", "1234567890"),
        None
    );
    assert_eq!(
        create_or_refusal_at(&mut h, &mut controller, "/a", "1234"),
        None
    );
    assert_eq!(h.app.queued_prompt_bytes, 20);
    let refusal = create_or_refusal_at(&mut h, &mut controller, "/c", "1").expect("refused");
    assert!(
        refusal.message.contains("the daemon holds 20 bytes"),
        "{}",
        refusal.message
    );
}

#[test]
fn queued_prompt_bytes_are_capped_over_all_sessions_and_freed_as_drives_leave_the_queue() {
    let mut h = Harness::new();
    h.app.config.max_pending_prompt_bytes = 20;
    let (plugin, _session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    // The first drive is sent at once: it is not queued and holds no queued bytes.
    let first = h.create(&mut controller, Target::Workspace("/w".into()), "sent");
    assert_eq!(create_or_refusal(&mut h, &mut controller, "123456"), None);
    assert_eq!(h.app.queued_prompt_bytes, 6);
    let refusal = create_or_refusal(&mut h, &mut controller, "12345").expect("refused");
    assert_eq!(refusal.code, ErrorCode::QueueFull);
    assert!(
        refusal.message.contains("holds 6 bytes") && refusal.message.contains("5 more"),
        "{}",
        refusal.message
    );
    // The first ends, the queued one is sent: its bytes are free again.
    h.ack(&plugin, &first, AckStage::Submitted);
    assert_eq!(h.app.queued_prompt_bytes, 0);
    assert_eq!(create_or_refusal(&mut h, &mut controller, "12345"), None);
    assert_eq!(h.app.queued_prompt_bytes, 5);
}

#[test]
fn a_plugin_that_goes_away_frees_the_bytes_of_the_drives_queued_for_it() {
    let mut h = Harness::new();
    let (plugin, _session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    h.create(
        &mut controller,
        Target::Workspace("/w".into()),
        "sent at once",
    );
    assert_eq!(create_or_refusal(&mut h, &mut controller, "queued"), None);
    assert_eq!(h.app.queued_prompt_bytes, 6);
    h.app.handle(DaemonEvent::Disconnected {
        conn_id: plugin.conn_id,
        reason: "test".into(),
    });
    assert_eq!(h.app.queued_prompt_bytes, 0);
}

#[test]
fn ids_are_a_prefix_and_twelve_hex_digits_and_do_not_repeat() {
    let ids: std::collections::HashSet<String> = (0..10_000).map(|_| new_id("d_")).collect();
    assert_eq!(ids.len(), 10_000);
    for id in ids.iter().take(100) {
        let hex = id.strip_prefix("d_").unwrap();
        assert_eq!(hex.len(), 12, "{id}");
        assert!(
            hex.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{id}"
        );
    }
    // Another thread draws from its own sequence.
    let other = std::thread::spawn(|| new_id("s_")).join().unwrap();
    assert!(!ids.contains(&other.replacen("s_", "d_", 1)));
}

/// Route plans are reused between drives (`drive::planner::PlanMemory`): what changes the
/// routes — an injector that starts working, a registry reload — must reach the next drive.
#[test]
fn the_next_drive_sees_an_injector_that_started_working_and_a_reloaded_registry() {
    let mut h = Harness::with_registry("", &[]);
    let (plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let first = h.create(&mut controller, Target::Session(session_id.clone()), "one");
    h.fail_step(&plugin, &first, "capability_missing");
    h.fail_step(&plugin, &first, "capability_missing");
    assert_eq!(h.drive_state(&first), DriveState::Failed);
    assert!(h.injections.started.lock().unwrap().is_empty());

    h.injections
        .usable
        .lock()
        .unwrap()
        .push("os_injector_xdotool".to_string());
    let second = h.create(&mut controller, Target::Session(session_id.clone()), "two");
    h.fail_step(&plugin, &second, "capability_missing");
    h.fail_step(&plugin, &second, "capability_missing");
    let jobs = h.injections.started.lock().unwrap().clone();
    assert_eq!(
        jobs.len(),
        1,
        "xdotool works now: {:?}",
        h.attempts(&second)
    );
    assert_eq!(jobs[0].interface, "os_injector_xdotool");
    h.finish_injection(&second, crate::drive::inject::Reached::Submitted, None);

    let mut sources = vec![koru_registry::LayerSource::built_in()];
    sources.push(koru_registry::LayerSource {
        layer: koru_registry::Layer::User,
        name: "user.yaml".into(),
        path: None,
        text: "interfaces:\n  - id: vscode_native_chat_open\n    enabled: false\n".into(),
    });
    let loaded = koru_registry::load(&sources);
    assert!(loaded.is_clean(), "{:?}", loaded.diagnostics);
    h.app.handle(DaemonEvent::RegistryChanged {
        loaded: Box::new(loaded),
    });
    let third = h.create(&mut controller, Target::Session(session_id), "three");
    assert_eq!(
        h.attempts(&third).first().map(String::as_str),
        Some("vscode_plugin_drive running"),
        "the reloaded registry disabled the native route"
    );
}

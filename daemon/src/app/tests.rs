//! Unit tests of the daemon state machine with a manual clock and in-memory connections: heartbeats, deadlines, queueing, slow readers, shutdown.

use koru_protocol::{
    Ack, AckStage, ClientInfo, DriveCreate, DriveOptions, DriveState, Envelope, Hello, IdeInfo,
    Message, RequestId, Role, SessionHealth, StreamEvent, Target, VersionRange, WindowInfo,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::ManualClock;

struct Peer {
    conn_id: ConnId,
    rx: mpsc::Receiver<Envelope>,
    close: CancellationToken,
}

impl Peer {
    fn drain(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        while let Ok(envelope) = self.rx.try_recv() {
            out.push(envelope.message);
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
}

impl Harness {
    fn new() -> Self {
        let clock = ManualClock::starting_at(1_000_000);
        let app = App::new(
            AppConfig {
                socket_display: "/test.sock".into(),
                heartbeat_ms: 1_000,
                max_line_bytes: 1024,
                default_drive_timeout_ms: 5_000,
                drive_history: 100,
                daemon_pid: 1,
            },
            clock.clone(),
            koru_registry::load(&[koru_registry::LayerSource::built_in()]),
        );
        Harness {
            app,
            clock,
            next_conn: 0,
        }
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
            envelope: Box::new(Envelope::with_id(Some(RequestId::Number(id)), message)),
        });
    }

    fn ack(&mut self, peer: &Peer, drive_id: &str, stage: AckStage) {
        self.app.handle(DaemonEvent::Received {
            conn_id: peer.conn_id,
            envelope: Box::new(Envelope::new(Message::Ack(Ack {
                drive_id: drive_id.into(),
                stage,
                blocker: None,
            }))),
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
    }
}

fn plugin_hello(folder: &str) -> Hello {
    Hello {
        role: Role::Plugin,
        ide: Some(IdeInfo {
            product: koru_protocol::IdeProduct::VsCode,
            version: "1".into(),
            app_name: "Code".into(),
        }),
        window: Some(WindowInfo {
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
    h.app.handle(DaemonEvent::Received {
        conn_id: plugin.conn_id,
        envelope: Box::new(Envelope::new(Message::Pong {})),
    });
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
        h.app.handle(DaemonEvent::Received {
            conn_id: plugin.conn_id,
            envelope: Box::new(Envelope::new(Message::Pong {})),
        });
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

//! State-machine tests of a prompt the chat refused as not ready (a fresh window whose model is not usable yet): held and sent again on the same route with growing waits, the other drives of the window kept behind it, every attempt in its history, and a clear failure when resends or the deadline run out; a plain refusal still ends the drive at once.

use koru_protocol::{AckStage, DriveCreate, DriveOptions, DriveState, Message, Refusal, Target};

use super::*;

/// The plugin's ack for a request its chat refused before taking it.
fn refuse(h: &mut Harness, plugin: &Peer, drive_id: &str, refusal: Option<Refusal>) {
    h.app.handle(DaemonEvent::Received {
        conn_id: plugin.conn_id,
        in_flight: crate::app::InFlight::untracked(),
        envelope: Box::new(Envelope::new(Message::Ack(Ack {
            drive_id: drive_id.into(),
            stage: AckStage::Failed,
            blocker: Some(koru_protocol::Blocker::new(
                "chat_refused",
                "Language model unavailable",
            )),
            evidence: None,
            refusal,
        }))),
    });
}

/// A drive with a deadline of `timeout_ms`.
fn create_with_timeout(
    h: &mut Harness,
    controller: &mut Peer,
    session_id: &str,
    prompt: &str,
    timeout_ms: u64,
) -> String {
    h.request(
        controller,
        1,
        Message::DriveCreate(DriveCreate {
            target: Target::Session(session_id.to_string()),
            prompt: prompt.into(),
            options: DriveOptions {
                timeout_ms: Some(timeout_ms),
                ..DriveOptions::default()
            },
        }),
    );
    match controller.drain().remove(0) {
        Message::DriveResult(result) => result.drive.drive_id,
        other => panic!("expected drive.result, got {other:?}"),
    }
}

/// A window's first drive (deadline `timeout_ms`), sent and refused by its chat once with
/// `refusal`.
fn refused_once(timeout_ms: u64, refusal: Option<Refusal>) -> (Harness, Peer, String) {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = create_with_timeout(&mut h, &mut controller, &session_id, "hi", timeout_ms);
    routes_sent(&mut plugin);
    h.ack(&plugin, &drive_id, AckStage::Received);
    refuse(&mut h, &plugin, &drive_id, refusal);
    (h, plugin, drive_id)
}

#[test]
fn a_prompt_refused_as_not_ready_is_sent_again_on_the_same_route_and_gets_in() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = create_with_timeout(&mut h, &mut controller, &session_id, "hi", 60_000);
    let behind = create_with_timeout(&mut h, &mut controller, &session_id, "next", 60_000);
    assert_eq!(
        routes_sent(&mut plugin),
        ["native_send workbench.action.chat.open"]
    );
    h.ack(&plugin, &drive_id, AckStage::Received);
    refuse(&mut h, &plugin, &drive_id, Some(Refusal::NotReady));

    let drive = h.app.drives.get(&drive_id).unwrap();
    assert!(
        !drive.is_terminal(),
        "held, not failed: {:?}",
        drive.blocker
    );
    let waiting = drive.waiting.as_ref().expect("says why it waits");
    assert_eq!(waiting.code, "chat_not_ready");
    assert!(
        waiting.detail.contains("Language model unavailable"),
        "{}",
        waiting.detail
    );
    // Nothing is sent before the wait is over, and the drive behind it stays queued.
    h.advance(999);
    assert!(routes_sent(&mut plugin).is_empty());
    assert_eq!(h.drive_state(&behind), DriveState::Queued);
    h.advance(1);
    assert_eq!(
        routes_sent(&mut plugin),
        ["native_send workbench.action.chat.open"],
        "the same route again, not a fallback"
    );
    assert!(h.app.drives.get(&drive_id).unwrap().waiting.is_none());
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.ack(&plugin, &drive_id, AckStage::Submitted);

    let info = h.app.drives.get(&drive_id).unwrap().info();
    assert_eq!(info.state, DriveState::Done);
    assert_eq!(
        h.attempts(&drive_id)[..2],
        [
            "vscode_native_chat_open failed",
            "vscode_native_chat_open succeeded"
        ],
        "both attempts are in the drive's history"
    );
    let refused = &info.attempts[0];
    assert_eq!(refused.blocker.as_ref().unwrap().code, "chat_refused");
    assert!(
        refused
            .hint
            .as_deref()
            .unwrap()
            .contains("sent again in 1.0 s"),
        "{:?}",
        refused.hint
    );
    let stages: Vec<DriveState> = info.history.iter().map(|s| s.state).collect();
    assert_eq!(
        stages,
        [
            DriveState::Queued,
            DriveState::Sent,
            DriveState::Received,
            // The resend is in the attempts, not a second `sent` in the history.
            DriveState::Submitted,
            DriveState::Done
        ]
    );
    // The window's next drive goes once this one is done.
    assert_eq!(
        routes_sent(&mut plugin),
        ["native_send workbench.action.chat.open"]
    );
    assert_eq!(h.drive_state(&behind), DriveState::Sent);
}

#[test]
fn resends_wait_longer_each_time_and_stop_after_four() {
    let mut h = Harness::new();
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = create_with_timeout(&mut h, &mut controller, &session_id, "hi", 120_000);
    routes_sent(&mut plugin);
    let mut waits = Vec::new();
    for _ in 0..4 {
        h.ack(&plugin, &drive_id, AckStage::Received);
        refuse(&mut h, &plugin, &drive_id, Some(Refusal::NotReady));
        let mut waited = 0;
        while routes_sent(&mut plugin).is_empty() {
            h.advance(100);
            waited += 100;
            assert!(waited <= 10_000, "never sent again");
        }
        waits.push(waited);
    }
    assert_eq!(waits, [1_000, 2_000, 4_000, 4_000]);
    h.ack(&plugin, &drive_id, AckStage::Received);
    refuse(&mut h, &plugin, &drive_id, Some(Refusal::NotReady));
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    let blocker = drive.blocker.as_ref().unwrap();
    assert_eq!(blocker.code, "chat_refused");
    assert!(
        blocker.detail.starts_with("Language model unavailable")
            && blocker.detail.contains("refused the prompt 5 times"),
        "{}",
        blocker.detail
    );
    assert_eq!(
        h.attempts(&drive_id)
            .iter()
            .filter(|a| a.as_str() == "vscode_native_chat_open failed")
            .count(),
        5
    );
    assert!(
        routes_sent(&mut plugin).is_empty(),
        "no other route after the last refusal"
    );
}

#[test]
fn a_held_drive_whose_deadline_comes_fails_with_the_refusal_not_a_timeout() {
    let (mut h, mut plugin, drive_id) = refused_once(8_000, Some(Refusal::NotReady));
    // The plugin now says its chat is not ready: the resend waits for it, up to the deadline.
    h.app.handle(DaemonEvent::Received {
        conn_id: plugin.conn_id,
        in_flight: crate::app::InFlight::untracked(),
        envelope: Box::new(Envelope::new(Message::Event(koru_protocol::PluginEvent {
            event: koru_protocol::PluginEventKind::ChatReadiness {
                ready: false,
                reason: Some("no model".into()),
            },
        }))),
    });
    for _ in 0..80 {
        h.advance(100);
        h.pong(&plugin);
    }
    assert!(routes_sent(&mut plugin).is_empty());
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    let blocker = drive.blocker.as_ref().unwrap();
    assert_eq!(blocker.code, "chat_refused");
    assert!(
        blocker.detail.contains("deadline came before it was ready"),
        "{}",
        blocker.detail
    );
}

#[test]
fn a_refusal_that_is_not_about_readiness_still_ends_the_drive_at_once() {
    let (mut h, mut plugin, drive_id) = refused_once(60_000, None);
    assert_eq!(h.drive_state(&drive_id), DriveState::Failed);
    h.advance(5_000);
    assert!(routes_sent(&mut plugin).is_empty(), "never sent again");
}

#[test]
fn a_not_ready_refusal_too_close_to_the_deadline_ends_the_drive() {
    let (mut h, mut plugin, drive_id) = refused_once(2_500, Some(Refusal::NotReady));
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    assert_eq!(
        drive.blocker.as_ref().unwrap().detail,
        "Language model unavailable"
    );
    h.advance(3_000);
    assert!(routes_sent(&mut plugin).is_empty(), "never sent again");
}

//! State-machine tests of what the drive watch (the desktop notifier) is told: the policy first and after a registry change, one news per change of what a drive stands for (a refusal once, with retry offered; a wait for the chat, then giving up), nothing for a cancelled drive.

use koru_protocol::{AckStage, Target};
use koru_registry::NotifyEvent;

use super::*;
use crate::app::drive_news::{DriveNews, WatchNews};

fn watched(h: Harness) -> (Harness, mpsc::Receiver<WatchNews>) {
    let (tx, rx) = mpsc::channel(64);
    let Harness {
        app,
        clock,
        next_conn,
        injections,
        recovery,
    } = h;
    let app = app.with_drive_watch(tx);
    (
        Harness {
            app,
            clock,
            next_conn,
            injections,
            recovery,
        },
        rx,
    )
}

fn drive_news(rx: &mut mpsc::Receiver<WatchNews>) -> Vec<DriveNews> {
    let mut out = Vec::new();
    while let Ok(news) = rx.try_recv() {
        if let WatchNews::Drive(news) = news {
            out.push(*news);
        }
    }
    out
}

#[test]
fn a_refused_drive_is_news_once_with_retry_offered_and_the_policy_comes_first() {
    let (mut h, mut rx) = watched(Harness::new());
    assert!(
        matches!(rx.try_recv(), Ok(WatchNews::Policy(policy)) if policy.on.contains(&NotifyEvent::ChatRefused))
    );
    let (plugin, _) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Workspace("/w".into()), "hi");
    h.ack(&plugin, &drive_id, AckStage::Received);
    assert!(
        drive_news(&mut rx).is_empty(),
        "a running drive needs nobody"
    );
    h.fail_step(&plugin, &drive_id, "chat_refused");
    let news = drive_news(&mut rx);
    assert_eq!(news.len(), 1, "{news:#?}");
    assert_eq!(news[0].event, NotifyEvent::ChatRefused);
    assert_eq!(news[0].code.as_deref(), Some("chat_refused"));
    assert_eq!(news[0].product.as_deref(), Some("vscode"));
    assert_eq!(news[0].workspace.as_deref(), Some("/w"));
    assert!(news[0].retryable && !news[0].cancellable);
    // Published again (a stream subscriber, a late observation): no news.
    h.app.publish_drive(&drive_id);
    assert!(drive_news(&mut rx).is_empty());
}

#[test]
fn a_drive_waiting_for_its_chat_is_news_and_giving_up_is_news_again() {
    let (mut h, mut rx) = watched(Harness::new());
    let mut hello = plugin_hello("/w");
    hello.chat = Some(koru_protocol::ChatReadiness {
        ready: false,
        reason: Some("no language model".into()),
    });
    let mut peer = h.connect(hello, 64);
    peer.drain();
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Workspace("/w".into()), "hi");
    let news = drive_news(&mut rx);
    assert_eq!(news.len(), 1, "{news:#?}");
    assert_eq!(news[0].event, NotifyEvent::ChatNotReady);
    assert!(news[0].cancellable && !news[0].retryable);
    h.advance(6_000);
    assert_eq!(h.drive_state(&drive_id), DriveState::Failed);
    let news = drive_news(&mut rx);
    assert_eq!(news.len(), 1, "{news:#?}");
    assert_eq!(news[0].event, NotifyEvent::ChatNotReady);
    assert!(!news[0].cancellable);
}

#[test]
fn a_cancelled_drive_is_no_news() {
    let (mut h, mut rx) = watched(Harness::new());
    let _plugin = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Workspace("/w".into()), "hi");
    h.request(
        &controller,
        2,
        Message::DriveCancel(koru_protocol::DriveRef {
            drive_id: drive_id.clone(),
        }),
    );
    assert_eq!(h.drive_state(&drive_id), DriveState::Cancelled);
    assert!(drive_news(&mut rx).is_empty());
}

//! State-machine tests of `chat.audit`: the most recently active chat by default, the file the observers read it from, the default folder, absolute paths only, and the answer (or the error with its code) when the audit is back.

use koru_protocol::{
    AuditFinding, AuditFindingKind, ChatAudit, ChatAuditResult, ErrorCode, Message,
};

use super::*;
use crate::audit::runner::RecordingAuditRunner;
use crate::audit::{AuditError, AuditFinished};

fn with_auditor(h: &mut Harness) -> RecordingAuditRunner {
    let auditor = RecordingAuditRunner::default();
    h.app.auditor = Box::new(auditor.clone());
    auditor
}

fn answer(peer: &mut Peer) -> Message {
    peer.drain().pop().expect("an answer")
}

#[test]
fn the_most_recent_chat_is_audited_from_its_file_into_the_default_folder_and_answered_when_done() {
    let mut h = Harness::new();
    let auditor = with_auditor(&mut h);
    let mut controller = h.controller(64);
    let event = observed(&h, "older", "/w", prompt_seen("hello"));
    h.app.handle(event);
    h.advance(1_000);
    let event = observed(&h, "newer", "/w", prompt_seen("again"));
    h.app.handle(event);
    h.request(&controller, 7, Message::ChatAudit(ChatAudit::default()));
    assert!(
        controller.drain().is_empty(),
        "answered only when the audit is back"
    );
    let (ticket, request) = auditor.started.lock().unwrap()[0].clone();
    assert_eq!(request.chat_id, "newer");
    assert_eq!(
        request.source,
        std::path::PathBuf::from("/store/newer.jsonl")
    );
    assert_eq!(
        request.dir,
        crate::audit::default_dir("chat_history_claude_code_jsonl", "newer")
    );
    let result = ChatAuditResult {
        store: request.store.clone(),
        chat_id: request.chat_id.clone(),
        source: "/store/newer.jsonl".into(),
        dir: request.dir.display().to_string(),
        opened: false,
        items_added: 0,
        items_total: 3,
        last_seq: 9,
        head: "sha256:x".into(),
        keyed: false,
        html: None,
        finding: Some(AuditFinding {
            kind: AuditFindingKind::SourceRewritten,
            item: Some(1),
            message: "item 1 was rewritten".into(),
        }),
    };
    h.app.handle(DaemonEvent::AuditFinished {
        finished: Box::new(AuditFinished {
            ticket,
            result: Ok(result.clone()),
        }),
    });
    match answer(&mut controller) {
        Message::ChatAuditResult(got) => assert_eq!(got, result),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_relative_folder_an_unknown_chat_and_a_failed_audit_are_refused_with_their_codes() {
    let mut h = Harness::new();
    let auditor = with_auditor(&mut h);
    let mut controller = h.controller(64);
    h.request(&controller, 1, Message::ChatAudit(ChatAudit::default()));
    match answer(&mut controller) {
        Message::Error(error) => {
            assert_eq!(error.code, ErrorCode::UnknownChat, "{}", error.message)
        }
        other => panic!("{other:?}"),
    }
    let event = observed(&h, "c1", "/w", prompt_seen("hello"));
    h.app.handle(event);
    let relative = ChatAudit {
        chat_id: Some("c1".into()),
        html: Some("pages/page.html".into()),
        ..Default::default()
    };
    h.request(&controller, 2, Message::ChatAudit(relative));
    match answer(&mut controller) {
        Message::Error(error) => {
            assert_eq!(error.code, ErrorCode::InvalidMessage);
            assert_eq!(error.location.unwrap().field.as_deref(), Some("html"));
        }
        other => panic!("{other:?}"),
    }
    let asked = ChatAudit {
        chat_id: Some("c1".into()),
        out: Some("/ledgers/c1".into()),
        html: Some("ledger.html".into()),
        ..Default::default()
    };
    h.request(&controller, 3, Message::ChatAudit(asked));
    let (ticket, request) = auditor.started.lock().unwrap()[0].clone();
    assert_eq!(request.dir, std::path::PathBuf::from("/ledgers/c1"));
    assert_eq!(
        request.html,
        Some(std::path::PathBuf::from("/ledgers/c1/ledger.html")),
        "a file name alone is a page in the ledger's folder"
    );
    h.app.handle(DaemonEvent::AuditFinished {
        finished: Box::new(AuditFinished {
            ticket,
            result: Err(AuditError::NotIntact {
                dir: request.dir.clone(),
                why: "seq 3: edited".into(),
            }),
        }),
    });
    match answer(&mut controller) {
        Message::Error(error) => {
            assert_eq!(error.code, ErrorCode::AuditFailed);
            assert!(error.message.contains("/ledgers/c1"), "{}", error.message);
        }
        other => panic!("{other:?}"),
    }
}

//! State-machine tests of `chat.read`: which chat and which turn a read names (by chat id, by a drive's prompt), the file it is read from, every refusal with its code, and the answer cut to the connection's line limit with the offset of the rest.

use koru_protocol::{ChatRead, ErrorCode, Message, ObservedKind, TurnState};

use super::*;
use crate::conversation::read::RecordingChatReader;
use crate::conversation::{ChatReadFinished, ChatTurns, Keep, ReadError, Turn};

fn with_reader(h: &mut Harness) -> RecordingChatReader {
    let reader = RecordingChatReader::default();
    h.app.chat_reader = Box::new(reader.clone());
    reader
}

fn read(h: &mut Harness, controller: &Peer, read: ChatRead) {
    h.request(controller, 7, Message::ChatRead(read));
}

fn error_code(peer: &mut Peer) -> (ErrorCode, String) {
    match peer.drain().pop() {
        Some(Message::Error(error)) => (error.code, error.message),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn finish(h: &mut Harness, ticket: u64, result: Result<ChatTurns, ReadError>) {
    h.app.handle(DaemonEvent::ChatReadFinished {
        finished: Box::new(ChatReadFinished { ticket, result }),
    });
}

fn turn(prompt: &str, reply: &str) -> Turn {
    let mut turn = Turn::new(Some(prompt.into()), Some(5));
    turn.reply = Some(reply.into());
    turn.state = TurnState::Complete;
    turn
}

#[test]
fn a_chat_is_read_from_the_file_the_observers_read_it_from_and_answered_when_the_read_is_back() {
    let mut h = Harness::new();
    let reader = with_reader(&mut h);
    let mut controller = h.controller(64);
    let event = observed(&h, "c1", "/w", prompt_seen("hello"));
    h.app.handle(event);
    read(
        &mut h,
        &controller,
        ChatRead {
            chat_id: Some("c1".into()),
            turns: Some(3),
            ..Default::default()
        },
    );
    assert!(
        controller.drain().is_empty(),
        "answered only when the read is back"
    );
    let (ticket, request) = reader.started.lock().unwrap()[0].clone();
    assert_eq!(request.store, "chat_history_claude_code_jsonl");
    assert_eq!(request.source, std::path::PathBuf::from("/store/c1.jsonl"));
    assert_eq!(request.keep, Keep::Last(3));
    finish(
        &mut h,
        ticket,
        Ok(ChatTurns {
            total: 4,
            turns: vec![(3, turn("hello", "hi there"))],
            not_recorded: &["exit_status"],
            records: Vec::new(),
        }),
    );
    let Some(Message::ChatReadResult(result)) = controller.drain().pop() else {
        panic!("no chat.read.result");
    };
    assert_eq!(result.chat_id, "c1");
    assert_eq!(result.workspace.as_deref(), Some("/w"));
    assert_eq!(result.source.as_deref(), Some("/store/c1.jsonl"));
    assert_eq!(result.turns_total, 4);
    assert_eq!(result.turns[0].index, 3);
    assert_eq!(result.turns[0].reply.as_deref(), Some("hi there"));
    assert_eq!(result.not_recorded, ["exit_status"]);
    // A read whose connection went away is dropped quietly.
    read(
        &mut h,
        &controller,
        ChatRead {
            chat_id: Some("c1".into()),
            ..Default::default()
        },
    );
    let (ticket, _) = reader.started.lock().unwrap()[1].clone();
    finish(
        &mut h,
        ticket,
        Err(ReadError::Unreadable {
            path: "/store/c1.jsonl".into(),
            reason: "gone".into(),
        }),
    );
    let (code, message) = error_code(&mut controller);
    assert_eq!(code, ErrorCode::ChatUnreadable);
    assert!(
        message.contains("cannot read /store/c1.jsonl: gone"),
        "{message}"
    );
}

#[test]
fn a_drives_turn_is_the_one_its_prompt_started_in_the_chat_it_was_matched_to() {
    let mut h = Harness::new();
    let reader = with_reader(&mut h);
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive = h.create(
        &mut controller,
        Target::Session(session_id),
        "Fix  the\ntests",
    );
    // Not seen in any store yet: nothing to read, and the message says so.
    read(
        &mut h,
        &controller,
        ChatRead {
            drive_id: Some(drive.clone()),
            ..Default::default()
        },
    );
    let (code, message) = error_code(&mut controller);
    assert_eq!(code, ErrorCode::NotObservable);
    assert!(
        message.contains("no chat store has shown drive"),
        "{message}"
    );
    for stage in [AckStage::Received, AckStage::Submitted] {
        h.ack(&plugin, &drive, stage);
    }
    let event = observed(&h, "c9", "/w", prompt_seen("Fix the tests"));
    h.app.handle(event);
    read(
        &mut h,
        &controller,
        ChatRead {
            drive_id: Some(drive.clone()),
            ..Default::default()
        },
    );
    let started = reader.started.lock().unwrap().clone();
    // The match itself asked for the prompt's evidence (its records, off the loop)...
    let digest = Keep::PromptDigest(crate::observe::prompt_digest("Fix the tests"));
    assert!(
        started.iter().any(|(_, r)| r.records && r.keep == digest),
        "{started:?}"
    );
    // ...and the controller's read is a read of the turn alone.
    let (ticket, request) = started.iter().find(|(_, r)| !r.records).unwrap().clone();
    assert_eq!(request.chat_id, "c9");
    assert_eq!(request.keep, digest);
    // The file was rewritten without the prompt: said, not answered with another turn.
    finish(
        &mut h,
        ticket,
        Ok(ChatTurns {
            total: 2,
            turns: Vec::new(),
            not_recorded: &[],
            records: Vec::new(),
        }),
    );
    let (code, message) = error_code(&mut controller);
    assert_eq!(code, ErrorCode::NotObservable);
    assert!(
        message.contains("no longer in /store/c9.jsonl"),
        "{message}"
    );
    let _ = plugin.drain();
}

#[test]
fn what_cannot_be_read_is_refused_at_once_with_what_is_wrong() {
    let mut h = Harness::new();
    let reader = with_reader(&mut h);
    let mut controller = h.controller(64);
    for (ask, code, says) in [
        (
            ChatRead::default(),
            ErrorCode::InvalidMessage,
            "needs `chat_id`",
        ),
        (
            ChatRead {
                chat_id: Some("nope".into()),
                ..Default::default()
            },
            ErrorCode::UnknownChat,
            "no chat nope",
        ),
        (
            ChatRead {
                chat_id: Some("c1".into()),
                turns: Some(0),
                ..Default::default()
            },
            ErrorCode::InvalidMessage,
            "ask for 1 to 50 turns",
        ),
        (
            ChatRead {
                chat_id: Some("c1".into()),
                turns: Some(51),
                ..Default::default()
            },
            ErrorCode::InvalidMessage,
            "ask for 1 to 50 turns",
        ),
        (
            ChatRead {
                drive_id: Some("d_nothing".into()),
                ..Default::default()
            },
            ErrorCode::UnknownDrive,
            "no drive d_nothing",
        ),
        (
            ChatRead {
                drive_id: Some("d_1".into()),
                chat_id: Some("c1".into()),
                ..Default::default()
            },
            ErrorCode::InvalidMessage,
            "not both",
        ),
    ] {
        read(&mut h, &controller, ask);
        let (got, message) = error_code(&mut controller);
        assert_eq!(got, code, "{message}");
        assert!(message.contains(says), "{message}");
    }
    // A chat only a hook reported has no file to read.
    h.app.handle(DaemonEvent::Observed {
        events: vec![koru_protocol::ObservedEvent {
            store: "chat_history_claude_code_jsonl".into(),
            chat_id: "hooked".into(),
            workspace: None,
            store_ts_ms: None,
            seen_at_ms: 1,
            basis: koru_protocol::ObservationBasis::Explicit,
            process: None,
            event: ObservedKind::ChatSeen,
        }],
        replay: false,
        source: None,
    });
    read(
        &mut h,
        &controller,
        ChatRead {
            chat_id: Some("hooked".into()),
            ..Default::default()
        },
    );
    let (code, message) = error_code(&mut controller);
    assert_eq!(code, ErrorCode::ChatUnreadable);
    assert!(message.contains("not read from a file"), "{message}");
    // The same id in two stores needs `store`.
    let mut other = observed(&h, "c1", "/w", prompt_seen("x"));
    let mut mine = observed(&h, "c1", "/w", prompt_seen("x"));
    if let DaemonEvent::Observed { events, .. } = &mut other {
        events[0].store = "chat_history_codex_jsonl".into();
    }
    h.app.handle(other);
    h.app
        .handle(std::mem::replace(&mut mine, DaemonEvent::Tick));
    read(
        &mut h,
        &controller,
        ChatRead {
            chat_id: Some("c1".into()),
            ..Default::default()
        },
    );
    let (code, message) = error_code(&mut controller);
    assert_eq!(code, ErrorCode::InvalidMessage);
    assert!(message.contains("is in 2 stores"), "{message}");
    assert!(
        reader.started.lock().unwrap().is_empty(),
        "nothing was read"
    );
}

#[test]
fn an_answer_too_long_for_one_line_is_cut_and_says_where_the_rest_starts() {
    // The harness's connections take lines of 1024 bytes at most.
    let mut h = Harness::new();
    h.app.config.max_line_bytes = 20 * 1024;
    let reader = with_reader(&mut h);
    let mut controller = h.controller(64);
    let event = observed(&h, "c1", "/w", prompt_seen("hello"));
    h.app.handle(event);
    read(
        &mut h,
        &controller,
        ChatRead {
            chat_id: Some("c1".into()),
            ..Default::default()
        },
    );
    let (ticket, _) = reader.started.lock().unwrap()[0].clone();
    let reply = "é".repeat(30_000);
    finish(
        &mut h,
        ticket,
        Ok(ChatTurns {
            total: 1,
            turns: vec![(0, turn("hello", &reply))],
            not_recorded: &[],
            records: Vec::new(),
        }),
    );
    let Some(Message::ChatReadResult(result)) = controller.drain().pop() else {
        panic!("no chat.read.result");
    };
    let line = serde_json::to_vec(&result).unwrap();
    assert!(line.len() <= 20 * 1024, "{} bytes", line.len());
    let turn = &result.turns[0];
    assert_eq!(turn.reply_chars, 30_000);
    let got = turn.reply.as_deref().unwrap().chars().count() as u64;
    assert!(got > 1_000, "still a useful page: {got} characters");
    assert_eq!(turn.reply_next_offset, Some(got));
}

/// The records a read found of a turn: its prompt at line `prompt`, its end at `end`.
fn records_at(prompt: u64, end: Option<u64>) -> crate::conversation::read::TurnRecords {
    use crate::conversation::read::{RecordAt, TurnRecords};
    use crate::conversation::{ItemKind, SourceRecord};
    let at = |kind, line: u64| RecordAt {
        kind,
        source: SourceRecord::line(line, line * 100, format!("line {line}").as_bytes()),
        at_ms: Some(line),
    };
    TurnRecords {
        prompt: Some(at(ItemKind::Prompt, prompt)),
        reply: end.map(|line| at(ItemKind::AssistantText, line)),
        end: end.map(|line| at(ItemKind::TurnEnd, line)),
    }
}

#[test]
fn a_drives_evidence_is_read_once_per_stage_and_a_later_turn_with_the_same_prompt_is_not_taken_for_it(
) {
    let mut h = Harness::new();
    let reader = with_reader(&mut h);
    let (plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive = h.create(
        &mut controller,
        Target::Session(session_id),
        "Fix the tests",
    );
    for stage in [AckStage::Received, AckStage::Submitted] {
        h.ack(&plugin, &drive, stage);
    }
    let event = observed(&h, "c9", "/w", prompt_seen("Fix the tests"));
    h.app.handle(event);
    let started = reader.started.lock().unwrap().clone();
    assert_eq!(started.len(), 1, "one read for the prompt: {started:?}");
    let (ticket, request) = started[0].clone();
    assert!(request.records && !request.expect_reply);
    assert_eq!(request.source, std::path::Path::new("/store/c9.jsonl"));
    finish(
        &mut h,
        ticket,
        Ok(ChatTurns {
            total: 1,
            turns: vec![(0, turn("Fix the tests", ""))],
            not_recorded: &[],
            records: vec![records_at(3, None)],
        }),
    );
    let evidence = h.app.drives.get(&drive).unwrap().info().evidence.unwrap();
    let prompt = evidence.prompt.unwrap();
    assert_eq!((prompt.chat_id.as_str(), prompt.turn), ("c9", 0));
    assert_eq!(
        prompt.record,
        koru_protocol::StoreRecord::Line {
            line: 3,
            offset: 300,
            bytes: 6,
            sha256: crate::journal::canonical::sha256_hex(b"line 3"),
            pointer: None,
        }
    );
    assert_eq!(evidence.outcome, None);
    // The turn ends: one more read, expecting the reply; the same stage again asks nothing.
    for _ in 0..2 {
        let event = observed(
            &h,
            "c9",
            "/w",
            ObservedKind::ReplyCompleted {
                excerpt: "done".into(),
                length: 4,
            },
        );
        h.app.handle(event);
    }
    let started = reader.started.lock().unwrap().clone();
    assert_eq!(started.len(), 2, "{started:?}");
    let (ticket, request) = started[1].clone();
    assert!(request.records && request.expect_reply);
    // What came back is a later turn of the same prompt (sent again by hand): not this
    // drive's, so no outcome is recorded for it.
    finish(
        &mut h,
        ticket,
        Ok(ChatTurns {
            total: 2,
            turns: vec![(1, turn("Fix the tests", "done"))],
            not_recorded: &[],
            records: vec![records_at(9, Some(11))],
        }),
    );
    let evidence = h.app.drives.get(&drive).unwrap().info().evidence.unwrap();
    assert_eq!(evidence.outcome, None);
    assert_eq!(evidence.prompt.unwrap().turn, 0);
}

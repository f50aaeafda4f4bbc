//! State-machine tests of `sessions.list` with terminal agents: the answer waits for the look (off the loop), one look answers every request that came while it ran, a list without `agents` is answered at once, and each agent gets the chat of its store the observers know in its folder.

use std::path::PathBuf;

use koru_protocol::{Message, SessionsList};

use super::*;
use crate::terminal::{
    AgentProduct, LookFinished, Pane, PaneAgent, PaneKind, RecordingTerminalLooker,
};

fn with_looker() -> (Harness, RecordingTerminalLooker) {
    let mut h = Harness::new();
    let looker = RecordingTerminalLooker::default();
    let app = std::mem::replace(&mut h.app, Harness::new().app);
    h.app = app.with_terminal_looker(Box::new(looker.clone()));
    (h, looker)
}

fn list(h: &mut Harness, peer: &Peer, id: i64, agents: bool) {
    h.request(
        peer,
        id,
        Message::SessionsList(SessionsList {
            agents,
            ..SessionsList::default()
        }),
    );
}

fn claude_in(folder: &str) -> PaneAgent {
    PaneAgent {
        product: AgentProduct::ClaudeCode,
        pid: 4300,
        pane: Pane {
            kind: PaneKind::Tmux,
            socket: PathBuf::from("/tmp/tmux-1000/default"),
            pane_id: "%3".into(),
            pid: 4200,
            command: "claude".into(),
            path: folder.into(),
            place: "work:1.0".into(),
        },
        server: None,
    }
}

fn listed(peer: &mut Peer) -> Vec<koru_protocol::SessionsListResult> {
    peer.drain()
        .into_iter()
        .filter_map(|m| match m {
            Message::SessionsListResult(result) => Some(result),
            _ => None,
        })
        .collect()
}

#[test]
fn one_look_answers_every_list_that_waited_for_it_with_the_agents_chat() {
    let (mut h, looker) = with_looker();
    let mut controller = h.controller(64);
    // The observers know a Claude Code chat in the agent's folder, and an older one.
    let chat = |id: &str, at: u64| koru_protocol::ObservedEvent {
        store: crate::observe::stores::claude_code::STORE.into(),
        chat_id: id.into(),
        workspace: Some("/w/repo".into()),
        store_ts_ms: Some(at),
        seen_at_ms: at,
        basis: koru_protocol::ObservationBasis::Explicit,
        process: None,
        event: koru_protocol::ObservedKind::ChatSeen,
    };
    h.app.handle(DaemonEvent::Observed {
        events: vec![chat("old", 1_000), chat("new", 2_000)],
        replay: false,
        source: None,
    });
    controller.drain();

    list(&mut h, &controller, 1, true);
    list(&mut h, &controller, 2, true);
    assert!(
        listed(&mut controller).is_empty(),
        "answered only when the look is back"
    );
    assert_eq!(looker.started.lock().unwrap().len(), 1, "one look for both");
    // Without `agents`: at once, no look.
    list(&mut h, &controller, 3, false);
    let at_once = listed(&mut controller);
    assert_eq!(at_once.len(), 1);
    assert!(at_once[0].agents.is_empty());
    assert_eq!(looker.started.lock().unwrap().len(), 1);

    let ticket = looker.started.lock().unwrap()[0];
    h.app.handle(DaemonEvent::TerminalLook {
        finished: Box::new(LookFinished {
            ticket,
            agents: vec![claude_in("/w/repo/")],
            problems: Vec::new(),
        }),
    });
    let answers = listed(&mut controller);
    assert_eq!(answers.len(), 2);
    for answer in answers {
        assert_eq!(answer.agents.len(), 1);
        let agent = &answer.agents[0];
        assert_eq!(agent.product, "claude-code");
        assert_eq!(
            agent.chat.as_ref().unwrap().chat_id,
            "new",
            "the chat last active in its folder"
        );
        assert_eq!(agent.state, koru_protocol::AgentState::Idle);
        assert!(agent.agent_id.starts_with("t_"));
    }
    // A later list starts a new look.
    list(&mut h, &controller, 4, true);
    assert_eq!(looker.started.lock().unwrap().len(), 2);
}

#[test]
fn an_agent_without_a_known_chat_is_unknown_and_filters_apply() {
    let (mut h, looker) = with_looker();
    let mut controller = h.controller(64);
    h.request(
        &controller,
        1,
        Message::SessionsList(SessionsList {
            agents: true,
            workspace: Some("/w/other".into()),
            ..SessionsList::default()
        }),
    );
    list(&mut h, &controller, 2, true);
    let ticket = looker.started.lock().unwrap()[0];
    h.app.handle(DaemonEvent::TerminalLook {
        finished: Box::new(LookFinished {
            ticket,
            agents: vec![claude_in("/w/repo")],
            problems: vec!["tmux -S /x list-panes failed: boom".into()],
        }),
    });
    let answers = listed(&mut controller);
    assert!(answers[0].agents.is_empty(), "another folder");
    assert_eq!(answers[1].agents.len(), 1);
    assert_eq!(
        answers[1].agents[0].state,
        koru_protocol::AgentState::Unknown
    );
    assert!(answers[1].agents[0].chat.is_none());
    // A look that is not the running one changes nothing.
    h.app.handle(DaemonEvent::TerminalLook {
        finished: Box::new(LookFinished {
            ticket: 99,
            agents: Vec::new(),
            problems: Vec::new(),
        }),
    });
    assert!(listed(&mut controller).is_empty());
}

#[test]
fn the_chat_its_hook_named_for_the_pane_wins_over_the_folders_newest() {
    let (mut h, looker) = with_looker();
    let mut controller = h.controller(64);
    let seen = |id: &str, at: u64, process: Option<koru_protocol::AgentProcess>| {
        koru_protocol::ObservedEvent {
            store: crate::observe::stores::claude_code::STORE.into(),
            chat_id: id.into(),
            workspace: Some("/w/repo".into()),
            store_ts_ms: Some(at),
            seen_at_ms: at,
            basis: koru_protocol::ObservationBasis::Explicit,
            process,
            event: koru_protocol::ObservedKind::ChatSeen,
        }
    };
    let pane = koru_protocol::AgentProcess {
        pid: None,
        tmux_socket: Some("/tmp/tmux-1000/default".into()),
        tmux_pane: Some("%3".into()),
    };
    h.app.handle(DaemonEvent::Observed {
        events: vec![
            seen("in-pane", 1_000, Some(pane)),
            seen("elsewhere", 2_000, None),
        ],
        replay: false,
        source: None,
    });
    controller.drain();
    list(&mut h, &controller, 1, true);
    let ticket = looker.started.lock().unwrap()[0];
    h.app.handle(DaemonEvent::TerminalLook {
        finished: Box::new(LookFinished {
            ticket,
            agents: vec![claude_in("/w/repo")],
            problems: Vec::new(),
        }),
    });
    let answer = listed(&mut controller).remove(0);
    assert_eq!(answer.agents[0].chat.as_ref().unwrap().chat_id, "in-pane");
}

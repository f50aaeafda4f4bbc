//! State-machine tests of drives into terminal agents: the target resolved after a look (one agent, none, several), the typist's orders and answers (a dialog, a draft, an agent answering), the queue while the agent replies, and `submitted` only on the agent's own record — the key pressed again, then `not_submitted`.

use std::path::PathBuf;

use koru_protocol::{
    AgentTarget, DriveInfo, DriveState, Message, ObservationBasis, ObservedEvent, ObservedKind,
    SubmitEvidence, Verification,
};

use super::*;
use crate::terminal::screen::Screen;
use crate::terminal::typist::{RecordingTerminalTypist, TypeJob, TypeKind, TypeResult, Typed};
use crate::terminal::{
    AgentProduct, LookFinished, Pane, PaneAgent, PaneKind, RecordingTerminalLooker,
};

struct Rig {
    h: Harness,
    looker: RecordingTerminalLooker,
    typist: RecordingTerminalTypist,
    followers: crate::observe::stores::opencode::RecordingServerFollowers,
    controller: Peer,
}

fn rig() -> Rig {
    let mut h = Harness::new();
    let looker = RecordingTerminalLooker::default();
    let typist = RecordingTerminalTypist::default();
    let followers = crate::observe::stores::opencode::RecordingServerFollowers::default();
    let app = std::mem::replace(&mut h.app, Harness::new().app);
    h.app = app
        .with_terminal_looker(Box::new(looker.clone()))
        .with_terminal_typist(Box::new(typist.clone()))
        .with_server_followers(Box::new(followers.clone()));
    let controller = h.controller(256);
    Rig {
        h,
        looker,
        typist,
        followers,
        controller,
    }
}

fn agent(product: AgentProduct, folder: &str, pane: &str, pid: u32) -> PaneAgent {
    PaneAgent {
        product,
        pid,
        pane: Pane {
            kind: PaneKind::Tmux,
            socket: PathBuf::from("/tmp/tmux-1000/default"),
            pane_id: pane.into(),
            pid: pid - 1,
            command: "node".into(),
            path: folder.into(),
            place: format!("work:{}.0", pane.trim_start_matches('%')),
        },
        server: None,
    }
}

fn claude(folder: &str) -> PaneAgent {
    agent(AgentProduct::ClaudeCode, folder, "%3", 4300)
}

/// The target "the Claude Code agent", wherever it runs.
fn any_claude() -> Target {
    Target::Agent(AgentTarget {
        product: "claude-code".into(),
        workspace: None,
    })
}

/// Sends `prompt` to the Claude Code agent in /w/repo, has it typed and recorded (by its
/// hook or its transcript): the drive is done, the agent's turn goes on.
fn first_turn(r: &mut Rig, prompt: &str, by_hook: bool) {
    let first = r.send(any_claude(), prompt, vec![claude("/w/repo")]);
    let job = r.jobs().remove(0);
    r.answer(&job, TypeResult::Typed, "");
    r.recorded(prompt, "/w/repo", by_hook);
    assert_eq!(r.drive(&first.drive_id).state, DriveState::Done);
}

impl Rig {
    fn ask(&mut self, target: Target, prompt: &str, options: DriveOptions) {
        self.h.request(
            &self.controller,
            7,
            Message::DriveCreate(DriveCreate {
                target,
                prompt: prompt.into(),
                options,
            }),
        );
    }

    /// Answers the look that is running with `agents`.
    fn looked(&mut self, agents: Vec<PaneAgent>) {
        let ticket = *self.looker.started.lock().unwrap().last().expect("a look");
        self.h.app.handle(DaemonEvent::TerminalLook {
            finished: Box::new(LookFinished {
                ticket,
                agents,
                problems: Vec::new(),
            }),
        });
    }

    /// Sends a drive to `agents`' look and returns the drive the daemon answered with.
    fn send(&mut self, target: Target, prompt: &str, agents: Vec<PaneAgent>) -> DriveInfo {
        let options = DriveOptions {
            timeout_ms: Some(60_000),
            ..DriveOptions::default()
        };
        self.ask(target, prompt, options);
        assert!(self.answers().is_empty(), "answered only after the look");
        self.looked(agents);
        match self.answers().remove(0) {
            Message::DriveResult(result) => result.drive,
            other => panic!("expected drive.result, got {other:?}"),
        }
    }

    fn answers(&mut self) -> Vec<Message> {
        self.controller
            .drain()
            .into_iter()
            .filter(|m| !matches!(m, Message::Event(_)))
            .collect()
    }

    fn jobs(&self) -> Vec<TypeJob> {
        std::mem::take(&mut *self.typist.started.lock().unwrap())
    }

    fn answer(&mut self, job: &TypeJob, result: TypeResult, screen: &str) {
        self.h.app.handle(DaemonEvent::TerminalTyped {
            typed: Box::new(Typed {
                drive_id: job.drive_id.clone(),
                kind: job.kind,
                result,
                screen_tail: screen.into(),
            }),
        });
    }

    fn drive(&self, drive_id: &str) -> koru_protocol::DriveInfo {
        self.h.app.drives.get(drive_id).expect("drive").info()
    }

    /// The agent's turn in `folder` ended (its Stop hook).
    fn turn_ended(&mut self, folder: &str) {
        let now = self.h.clock.now_ms();
        self.h.app.handle(DaemonEvent::Observed {
            events: vec![ObservedEvent {
                store: crate::observe::stores::claude_code::STORE.into(),
                chat_id: "c1".into(),
                workspace: Some(folder.into()),
                store_ts_ms: None,
                seen_at_ms: now,
                basis: ObservationBasis::Explicit,
                process: None,
                event: ObservedKind::ReplyCompleted {
                    excerpt: "ok".into(),
                    length: 2,
                },
            }],
            replay: false,
            source: None,
        });
    }

    /// The agent's hook (reported, not read from a file) or transcript (a file) recorded
    /// `prompt` in `folder`.
    fn recorded(&mut self, prompt: &str, folder: &str, by_hook: bool) {
        claude_recorded(&mut self.h, prompt, folder, "c1", by_hook);
    }
}

#[test]
fn a_prompt_typed_into_the_agents_pane_is_submitted_on_its_hooks_word() {
    let mut r = rig();
    let prompt = "Zeile eins äöü\nline two 日本語 ✓";
    let target = Target::Agent(AgentTarget {
        product: "claude-code".into(),
        workspace: Some("/w/repo".into()),
    });
    let drive = r.send(target, prompt, vec![claude("/w/repo")]);
    assert_eq!(drive.route, koru_protocol::Route::TerminalInput);
    assert!(drive.session_id.starts_with("t_"), "{}", drive.session_id);

    let jobs = r.jobs();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.kind, TypeKind::Type);
    assert_eq!(job.text, prompt, "the prompt goes to the pane unchanged");
    assert_eq!(job.pane_id, "%3");
    assert_eq!(job.agent_pid, 4300);
    assert_eq!(job.terminal.submit_key, "Enter");
    r.answer(job, TypeResult::Typed, "");
    let typed = r.drive(&drive.drive_id);
    assert_eq!(typed.state, DriveState::Pasted, "typed is not submitted");
    assert_eq!(typed.submit_evidence, None);

    // The agent's UserPromptSubmit hook reports the same text.
    r.recorded(prompt, "/w/repo", true);
    let done = r.drive(&drive.drive_id);
    assert_eq!(done.state, DriveState::Done);
    assert_eq!(done.submit_evidence, Some(SubmitEvidence::AgentHook));
    assert_eq!(done.verification, Verification::AgentRecorded);
    let states: Vec<DriveState> = done.history.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [
            DriveState::Queued,
            DriveState::Sent,
            DriveState::Pasted,
            DriveState::Submitted,
            DriveState::Done
        ]
    );
    // Its transcript's record of the same prompt later changes nothing, and the turn's
    // end still reaches the drive.
    r.recorded(prompt, "/w/repo", false);
    assert_eq!(
        r.drive(&drive.drive_id).submit_evidence,
        Some(SubmitEvidence::AgentHook)
    );
    r.turn_ended("/w/repo");
    let replied = r.drive(&drive.drive_id).observation.unwrap();
    assert_eq!(replied.stage, koru_protocol::ObservedStage::Replied);
    assert_eq!(replied.reply_excerpt.as_deref(), Some("ok"));
}

#[test]
fn the_transcript_proves_it_when_no_hook_is_installed_even_before_the_typist_answers() {
    let mut r = rig();
    let drive = r.send(
        Target::Agent(AgentTarget {
            product: "claude-code".into(),
            workspace: None,
        }),
        "Summarise the README",
        vec![claude("/w/repo")],
    );
    let job = r.jobs().remove(0);
    // Recorded while the typist is still on its way back.
    r.recorded("Summarise the README", "/w/repo", false);
    let done = r.drive(&drive.drive_id);
    assert_eq!(done.state, DriveState::Done);
    assert_eq!(done.submit_evidence, Some(SubmitEvidence::AgentTranscript));
    r.answer(&job, TypeResult::Typed, "");
    assert_eq!(r.drive(&drive.drive_id).state, DriveState::Done);
}

#[test]
fn targets_name_one_agent_or_say_which_ones_they_could_mean() {
    let mut r = rig();
    let two = vec![
        claude("/w/repo"),
        agent(AgentProduct::ClaudeCode, "/w/repo", "%5", 4500),
        agent(AgentProduct::Codex, "/w/other", "%6", 4600),
    ];
    r.ask(
        Target::Agent(AgentTarget {
            product: "claude-code".into(),
            workspace: Some("/w/repo".into()),
        }),
        "hi",
        DriveOptions::default(),
    );
    r.looked(two.clone());
    match r.answers().remove(0) {
        Message::Error(error) => {
            assert_eq!(error.code, koru_protocol::ErrorCode::AmbiguousTarget);
            assert!(
                error.message.contains("%3") && error.message.contains("%5"),
                "{}",
                error.message
            );
            assert!(!error.message.contains("%6"), "{}", error.message);
        }
        other => panic!("expected an error, got {other:?}"),
    }
    r.ask(
        Target::Agent(AgentTarget {
            product: "gemini-cli".into(),
            workspace: None,
        }),
        "hi",
        DriveOptions::default(),
    );
    r.looked(two.clone());
    match r.answers().remove(0) {
        Message::Error(error) => {
            assert_eq!(error.code, koru_protocol::ErrorCode::NoTarget);
            assert!(
                error.message.contains("no gemini-cli agent"),
                "{}",
                error.message
            );
            assert!(
                error.message.contains("codex"),
                "lists what runs: {}",
                error.message
            );
        }
        other => panic!("expected an error, got {other:?}"),
    }
    // By id, and by a folder inside which the agent runs.
    let codex_id = crate::terminal::agent_id(&two[2]);
    let by_id = r.send(Target::Session(codex_id.clone()), "hi", two.clone());
    assert_eq!(by_id.session_id, codex_id);
    assert!(r.jobs().iter().all(|j| j.pane_id == "%6"));
    assert!(r.typist.started.lock().unwrap().is_empty());
}

#[test]
fn a_dialog_or_a_draft_on_screen_fails_the_drive_and_nothing_is_typed() {
    let mut r = rig();
    let drive = r.send(any_claude(), "hello", vec![claude("/w/repo")]);
    let job = r.jobs().remove(0);
    r.answer(
        &job,
        TypeResult::Untouched(Screen::Dialog(
            "Do you want to proceed?\n❯ 1. Yes\n2. No".into(),
        )),
        "",
    );
    let failed = r.drive(&drive.drive_id);
    assert_eq!(failed.state, DriveState::Failed);
    let blocker = failed.blocker.unwrap();
    assert_eq!(blocker.code, "needs_input");
    assert!(
        blocker.detail.contains("Do you want to proceed?"),
        "{}",
        blocker.detail
    );
    assert!(!failed.history.iter().any(|s| s.state == DriveState::Pasted));

    let drive = r.send(any_claude(), "hello", vec![claude("/w/repo")]);
    let job = r.jobs().remove(0);
    r.answer(
        &job,
        TypeResult::Untouched(Screen::Draft("half a thought".into())),
        "",
    );
    let failed = r.drive(&drive.drive_id);
    let blocker = failed.blocker.unwrap();
    assert_eq!(blocker.code, "user_typing");
    assert!(
        blocker.detail.contains("half a thought"),
        "{}",
        blocker.detail
    );
}

#[test]
fn a_busy_screen_is_looked_at_again_and_a_replying_agent_holds_the_queue() {
    let mut r = rig();
    let drive = r.send(any_claude(), "first", vec![claude("/w/repo")]);
    let job = r.jobs().remove(0);
    r.answer(
        &job,
        TypeResult::Untouched(Screen::Busy("esc to interrupt".into())),
        "",
    );
    let waiting = r.drive(&drive.drive_id);
    assert_eq!(waiting.waiting.unwrap().code, "chat_busy");
    assert!(r.jobs().is_empty());
    r.h.advance(1_000);
    let again = r.jobs();
    assert_eq!(again.len(), 1, "looked at again after a second");
    assert_eq!(again[0].kind, TypeKind::Type);
    r.answer(&again[0], TypeResult::Typed, "");
    r.recorded("first", "/w/repo", true);
    assert_eq!(r.drive(&drive.drive_id).state, DriveState::Done);

    // The agent now replies (its hook said it took "first"): the next drive waits for
    // the end of the turn, then is typed.
    let second = r.send(any_claude(), "second", vec![claude("/w/repo")]);
    assert!(r.jobs().is_empty(), "nothing typed while the agent replies");
    assert_eq!(r.drive(&second.drive_id).waiting.unwrap().code, "chat_busy");
    r.turn_ended("/w/repo");
    let jobs = r.jobs();
    assert_eq!(jobs.len(), 1, "typed when the turn ended");
    assert_eq!(jobs[0].text, "second");
}

#[test]
fn without_a_record_the_key_is_pressed_again_then_the_drive_fails_not_submitted() {
    let mut r = rig();
    let drive = r.send(
        Target::Agent(AgentTarget {
            product: "claude-code".into(),
            workspace: None,
        }),
        "are you there",
        vec![claude("/w/repo")],
    );
    let job = r.jobs().remove(0);
    r.answer(&job, TypeResult::Typed, "");
    r.h.advance(2_999);
    assert!(r.jobs().is_empty(), "not before proof_ms");
    r.h.advance(1);
    let again = r.jobs();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].kind, TypeKind::SubmitAgain);
    r.answer(&again[0], TypeResult::PressedAgain, "");
    r.h.advance(3_000);
    let look = r.jobs();
    assert_eq!(look.len(), 1);
    assert_eq!(
        look[0].kind,
        TypeKind::Look,
        "no more presses than enter_retries"
    );
    r.answer(
        &look[0],
        TypeResult::Untouched(Screen::Ready),
        "❯ are you there",
    );
    let failed = r.drive(&drive.drive_id);
    assert_eq!(failed.state, DriveState::Failed);
    let blocker = failed.blocker.unwrap();
    assert_eq!(blocker.code, "not_submitted");
    assert!(
        blocker.detail.contains("❯ are you there"),
        "{}",
        blocker.detail
    );
    assert!(failed.submit_evidence.is_none());
}

#[test]
fn command_prefixes_are_typed_as_text_or_as_commands_when_asked_and_an_agent_that_left_fails_its_drives(
) {
    let mut r = rig();
    // As text: the route's escape (a space) goes before it.
    let as_text = r.send(
        any_claude(),
        "/compact is a word here",
        vec![claude("/w/repo")],
    );
    let job = r.jobs().remove(0);
    assert_eq!(job.text, " /compact is a word here");
    r.answer(&job, TypeResult::Typed, "");
    // The agent's record (trimmed by some agents) is the same prompt.
    r.recorded("/compact is a word here", "/w/repo", true);
    assert_eq!(r.drive(&as_text.drive_id).state, DriveState::Done);
    r.turn_ended("/w/repo");
    // A route without an escape refuses it.
    let mut h = Harness::with_registry(
        "interfaces:\n  - id: tmux_claude_code\n    terminal:\n      command_prefixes: ['/']\n",
        &[],
    );
    let looker = RecordingTerminalLooker::default();
    let app = std::mem::replace(&mut h.app, Harness::new().app);
    h.app = app.with_terminal_looker(Box::new(looker.clone()));
    let mut strict = Rig {
        controller: h.controller(64),
        h,
        looker,
        typist: RecordingTerminalTypist::default(),
        followers: Default::default(),
    };
    strict.ask(any_claude(), "/compact", DriveOptions::default());
    strict.looked(vec![claude("/w/repo")]);
    match strict.answers().remove(0) {
        Message::Error(error) => {
            assert_eq!(error.code, koru_protocol::ErrorCode::InvalidMessage);
            assert!(
                error.message.contains("starts with `/`"),
                "{}",
                error.message
            );
        }
        other => panic!("expected an error, got {other:?}"),
    }
    r.ask(
        any_claude(),
        "/compact",
        DriveOptions {
            agent_command: true,
            ..DriveOptions::default()
        },
    );
    r.looked(vec![claude("/w/repo")]);
    let Message::DriveResult(result) = r.answers().remove(0) else {
        panic!("expected drive.result");
    };
    assert_eq!(r.jobs()[0].text, "/compact");
    // The next look finds the agent gone: its drive fails.
    r.ask(any_claude(), "anyone?", DriveOptions::default());
    r.looked(Vec::new());
    let failed = r.drive(&result.drive.drive_id);
    assert_eq!(failed.state, DriveState::Failed);
    assert_eq!(failed.blocker.unwrap().code, "agent_exited");
    match r.answers().remove(0) {
        Message::Error(error) => assert_eq!(error.code, koru_protocol::ErrorCode::NoTarget),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_drive_queued_behind_a_reply_fails_when_the_agent_exits() {
    let mut r = rig();
    first_turn(&mut r, "first", true);
    let second = r.send(any_claude(), "second", vec![claude("/w/repo")]);
    assert_eq!(r.drive(&second.drive_id).waiting.unwrap().code, "chat_busy");
    r.h.advance(1_000);
    assert_eq!(
        r.drive(&second.drive_id).state,
        DriveState::Queued,
        "still alive"
    );
    r.typist.exited.lock().unwrap().push(4300);
    r.h.advance(1_000);
    let failed = r.drive(&second.drive_id);
    assert_eq!(failed.state, DriveState::Failed);
    let blocker = failed.blocker.unwrap();
    assert_eq!(blocker.code, "agent_exited");
    assert!(blocker.detail.contains("pid 4300"), "{}", blocker.detail);
    assert!(
        r.jobs().iter().all(|j| j.kind == TypeKind::Look),
        "nothing typed, the screen only read"
    );
}

#[test]
fn a_dialog_that_holds_the_turn_fails_the_drive_waiting_for_it() {
    let mut r = rig();
    first_turn(&mut r, "needs permission", false);
    // The agent's record says it replies: the next drive waits, and its screen is read.
    let second = r.send(any_claude(), "next", vec![claude("/w/repo")]);
    assert!(r.jobs().is_empty());
    r.h.advance(1_000);
    let look = r.jobs();
    assert_eq!(look.len(), 1);
    assert_eq!(look[0].kind, TypeKind::Look);
    assert_eq!(look[0].drive_id, second.drive_id);
    // Still answering: it waits on, and the screen is read again a second later.
    r.answer(
        &look[0],
        TypeResult::Untouched(Screen::Busy("esc to interrupt".into())),
        "",
    );
    assert_eq!(r.drive(&second.drive_id).state, DriveState::Queued);
    r.h.advance(500);
    assert!(r.jobs().is_empty(), "not before a second");
    r.h.advance(500);
    let look = r.jobs();
    assert_eq!(look.len(), 1);
    r.answer(
        &look[0],
        TypeResult::Untouched(Screen::Dialog("Do you want to proceed?".into())),
        "",
    );
    let failed = r.drive(&second.drive_id);
    assert_eq!(failed.state, DriveState::Failed);
    let blocker = failed.blocker.unwrap();
    assert_eq!(blocker.code, "needs_input");
    assert!(
        blocker.detail.contains("Do you want to proceed?"),
        "{}",
        blocker.detail
    );
}

fn opencode_with_server(folder: &str) -> PaneAgent {
    let mut agent = agent(AgentProduct::Opencode, folder, "%5", 4500);
    agent.server = Some("127.0.0.1:4096".parse().unwrap());
    agent
}

fn any_opencode() -> Target {
    Target::Agent(AgentTarget {
        product: "opencode".into(),
        workspace: None,
    })
}

#[test]
fn opencode_with_a_server_gets_the_prompt_posted_and_its_server_record_proves_it() {
    let mut r = rig();
    let prompt = "/tmp is a path, not a command\nzweite Zeile ✓";
    let drive = r.send(any_opencode(), prompt, vec![opencode_with_server("/w/oc")]);
    let jobs = r.jobs();
    assert_eq!(jobs.len(), 1);
    let server = jobs[0]
        .server
        .clone()
        .expect("the order goes to opencode's server");
    assert_eq!(server.address, "127.0.0.1:4096".parse().unwrap());
    assert_eq!(server.directory, "/w/oc");
    assert_eq!(
        jobs[0].text, prompt,
        "posted as it is: no escape before `/`"
    );
    // Its event stream is followed for as long as the agent runs.
    let followed = r.followers.followed.lock().unwrap().clone();
    assert_eq!(followed.len(), 1);
    assert_eq!(followed[0].address, server.address);
    r.answer(
        &jobs[0],
        TypeResult::Recorded {
            session: "ses_1".into(),
            at_ms: Some(5),
        },
        "session ses_1",
    );
    let done = r.drive(&drive.drive_id);
    assert_eq!(done.state, DriveState::Done, "{done:#?}");
    assert_eq!(done.route, Route::NativeSend);
    assert_eq!(
        done.submit_evidence,
        Some(koru_protocol::SubmitEvidence::AgentTranscript)
    );
    let observation = done.observation.expect("the drive follows the session");
    assert_eq!(observation.store, crate::observe::stores::opencode::STORE);
    assert_eq!(observation.chat_id, "ses_1");

    // `agent_command` is not offered there; an opencode without a server names the fix.
    r.ask(
        any_opencode(),
        "/compact",
        DriveOptions {
            agent_command: true,
            ..DriveOptions::default()
        },
    );
    r.looked(vec![opencode_with_server("/w/oc")]);
    match r.answers().remove(0) {
        Message::Error(error) => assert!(error.message.contains("text only"), "{error:?}"),
        other => panic!("expected an error, got {other:?}"),
    }
    let plain = agent(AgentProduct::Opencode, "/w/oc", "%5", 4500);
    let failed = r.send(any_opencode(), "Hello?", vec![plain]);
    let failed = r.drive(&failed.drive_id);
    assert_eq!(failed.state, DriveState::Failed);
    let blocker = failed.blocker.expect("a blocker");
    assert_eq!(blocker.code, koru_protocol::blocker::AGENT_SERVER_MISSING);
    assert!(blocker.detail.contains("--port"), "{blocker:?}");
    assert!(
        r.followers.followed.lock().unwrap().is_empty(),
        "nothing to follow"
    );
}

#[test]
fn a_look_still_on_its_way_when_typing_starts_is_dropped() {
    let mut r = rig();
    // A drive waits behind the agent's reply; its screen is looked at meanwhile.
    first_turn(&mut r, "First.", false);
    let waiting = r.send(any_claude(), "Second.", vec![claude("/w/repo")]);
    r.h.advance(1_000);
    let look = r
        .jobs()
        .into_iter()
        .find(|j| j.kind == TypeKind::Look)
        .expect("a look while it waits");
    // The turn ends: typing is ordered while the look has not answered.
    r.turn_ended("/w/repo");
    let typing = r
        .jobs()
        .into_iter()
        .find(|j| j.kind == TypeKind::Type)
        .expect("typing");
    r.answer(&look, TypeResult::Untouched(Screen::Ready), "");
    assert_eq!(
        r.drive(&waiting.drive_id).state,
        DriveState::Sent,
        "the stale look changed nothing"
    );
    r.answer(&typing, TypeResult::Typed, "");
    assert_eq!(r.drive(&waiting.drive_id).state, DriveState::Pasted);
    // A look answer that comes after typing answered is dropped as well.
    r.answer(&look, TypeResult::Untouched(Screen::Ready), "");
    assert_eq!(r.drive(&waiting.drive_id).state, DriveState::Pasted);
}

//! State-machine tests of drives into a terminal agent's own chat inside an IDE window (the Claude Code panel): `--agent claude-code` where no terminal runs it goes to the one window of its folder whose plugin offers the panel's commands; the plugin opens the tab and checks it, the daemon presses Return once, and the drive is `done` only on Claude Code's own record — otherwise `needs_user`, never `done`, never another route.

use koru_protocol::{
    AckStage, AgentTarget, Capability, DriveCreate, DriveOptions, DriveState, ErrorCode, Message,
    SubmitEvidence, Target, Verification,
};

use super::*;
use crate::drive::inject::Reached;
use crate::terminal::{AgentProduct, LookFinished, Pane, PaneAgent, PaneKind};

const PANEL_COMMANDS: [&str; 2] = ["claude-vscode.primaryEditor.open", "koru.expectActiveTab"];

struct Rig {
    h: Harness,
    looker: crate::terminal::RecordingTerminalLooker,
    controller: Peer,
}

fn rig() -> Rig {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let looker = crate::terminal::RecordingTerminalLooker::default();
    let typist = crate::terminal::typist::RecordingTerminalTypist::default();
    let app = std::mem::replace(&mut h.app, Harness::new().app);
    h.app = app
        .with_terminal_looker(Box::new(looker.clone()))
        .with_terminal_typist(Box::new(typist));
    let controller = h.controller(256);
    Rig {
        h,
        looker,
        controller,
    }
}

/// A VS Code window of `folder` with focus; with the Claude Code extension's panel
/// command (and Koru's tab check) when `panel`.
fn window(r: &mut Rig, folder: &str, panel: bool) -> (Peer, String) {
    let mut hello = plugin_hello(folder);
    if panel {
        hello
            .capabilities
            .extend(PANEL_COMMANDS.map(|id| Capability::Command { id: id.into() }));
    }
    if let Some(window) = hello.window.as_mut() {
        window.focused = Some(true);
    }
    let mut peer = r.h.connect(hello, 64);
    let Message::Welcome(welcome) = peer.drain().remove(0) else {
        panic!("no welcome");
    };
    (peer, welcome.session_id)
}

fn claude_in(folder: &str) -> Target {
    Target::Agent(AgentTarget {
        product: "claude-code".into(),
        workspace: Some(folder.into()),
    })
}

impl Rig {
    /// Asks for a drive to `target`; the look that follows finds `agents` in terminals.
    fn ask(&mut self, target: Target, prompt: &str, agents: Vec<PaneAgent>) -> Message {
        self.h.request(
            &self.controller,
            7,
            Message::DriveCreate(DriveCreate {
                target,
                prompt: prompt.into(),
                options: DriveOptions {
                    timeout_ms: Some(60_000),
                    ..DriveOptions::default()
                },
            }),
        );
        let ticket = *self.looker.started.lock().unwrap().last().expect("a look");
        self.h.app.handle(DaemonEvent::TerminalLook {
            finished: Box::new(LookFinished {
                ticket,
                agents,
                problems: Vec::new(),
            }),
        });
        self.controller
            .drain()
            .into_iter()
            .find(|m| !matches!(m, Message::Event(_)))
            .expect("an answer")
    }

    fn send(&mut self, target: Target, prompt: &str) -> String {
        match self.ask(target, prompt, Vec::new()) {
            Message::DriveResult(result) => result.drive.drive_id,
            other => panic!("expected drive.result, got {other:?}"),
        }
    }

    /// Claude Code recorded `prompt` in `folder`: by its hook (reported) or its transcript.
    fn recorded(&mut self, prompt: &str, folder: &str, by_hook: bool) {
        claude_recorded(&mut self.h, prompt, folder, "c-panel", by_hook);
    }

    /// The plugin ran the route's steps: received, focused (tab opened), pasted (checked).
    fn steps_run(&mut self, plugin: &Peer, drive_id: &str) {
        for stage in [AckStage::Received, AckStage::Focused, AckStage::Pasted] {
            self.h.ack(plugin, drive_id, stage);
        }
    }

    fn drive(&self, drive_id: &str) -> &crate::app::drives::DriveRecord {
        self.h.app.drives.get(drive_id).expect("drive")
    }

    fn history(&self, drive_id: &str) -> Vec<&'static str> {
        self.drive(drive_id)
            .history
            .iter()
            .map(|r| r.state.as_str())
            .collect()
    }
}

fn drive_order(plugin: &mut Peer) -> koru_protocol::DriveRequest {
    plugin
        .drain()
        .into_iter()
        .find_map(|m| match m {
            Message::Drive(drive) => Some(drive),
            _ => None,
        })
        .expect("the plugin got a drive")
}

#[test]
fn with_no_terminal_running_claude_code_the_prompt_goes_to_the_panel_of_the_folders_window_and_is_done_on_its_hook(
) {
    let mut r = rig();
    let (_other, _) = window(&mut r, "/elsewhere", true);
    let (mut plugin, session_id) = window(&mut r, "/w/repo", true);
    let drive_id = r.send(claude_in("/w/repo"), "Fix the bug ✓");
    assert_eq!(r.drive(&drive_id).session_id, session_id);

    let order = drive_order(&mut plugin);
    assert_eq!(order.route, koru_protocol::Route::PluginDrive);
    assert!(!order.options.submit, "the daemon presses the submit key");
    let commands: Vec<&str> = order.steps.iter().map(|s| s.command.as_str()).collect();
    assert_eq!(commands, PANEL_COMMANDS);
    assert_eq!(
        order.steps[0].args,
        [serde_json::Value::Null, serde_json::json!("$prompt")],
        "a new Claude Code tab with the prompt in its input"
    );

    r.steps_run(&plugin, &drive_id);
    let presses = r.h.injections.key_presses.lock().unwrap().clone();
    assert_eq!(presses.len(), 1, "one key press after pasted");
    assert_eq!(presses[0].chord, "Return");
    assert_eq!(presses[0].window.pid, Some(4242));
    r.h.finish_injection(&drive_id, Reached::Submitted, None);
    let drive = r.drive(&drive_id);
    assert_eq!(
        drive.state,
        DriveState::Pasted,
        "the key press alone proves nothing"
    );
    assert!(drive.record_due_ms.is_some());

    r.h.pong(&plugin);
    r.h.advance(900);
    r.recorded("Fix the bug ✓", "/w/repo", true);
    let drive = r.drive(&drive_id);
    assert_eq!(drive.state, DriveState::Done);
    assert_eq!(drive.submit_evidence, Some(SubmitEvidence::AgentHook));
    assert_eq!(drive.verification, Verification::AgentRecorded);
    assert_eq!(
        r.history(&drive_id),
        [
            "queued",
            "sent",
            "received",
            "focused",
            "pasted",
            "submitted",
            "done"
        ]
    );
    assert_eq!(
        r.h.attempts(&drive_id),
        ["claude_code_panel_drive succeeded"]
    );
    // Nothing fires later: the wait ended with the record.
    for _ in 0..20 {
        r.h.pong(&plugin);
        r.h.advance(1_000);
    }
    assert_eq!(r.drive(&drive_id).state, DriveState::Done);
}

#[test]
fn a_record_that_arrives_before_the_key_press_answer_still_proves_the_drive() {
    let mut r = rig();
    let (plugin, _) = window(&mut r, "/w/repo", true);
    let drive_id = r.send(claude_in("/w/repo"), "hello");
    r.steps_run(&plugin, &drive_id);
    r.recorded("hello", "/w/repo", false);
    assert_eq!(r.drive(&drive_id).state, DriveState::Done);
    assert_eq!(
        r.drive(&drive_id).submit_evidence,
        Some(SubmitEvidence::AgentTranscript)
    );
    r.h.finish_injection(&drive_id, Reached::Submitted, None);
    assert_eq!(r.drive(&drive_id).state, DriveState::Done);
}

#[test]
fn without_claude_codes_record_after_the_key_the_drive_ends_needs_user_never_done() {
    let mut r = rig();
    let (mut plugin, _) = window(&mut r, "/w/repo", true);
    let drive_id = r.send(claude_in("/w/repo"), "Fix the bug");
    drive_order(&mut plugin);
    r.steps_run(&plugin, &drive_id);
    r.h.finish_injection(&drive_id, Reached::Submitted, None);
    // 14 s with the plugin alive (it answers heartbeats).
    for _ in 0..14 {
        r.h.pong(&plugin);
        r.h.advance(1_000);
    }
    assert_eq!(r.drive(&drive_id).state, DriveState::Pasted);
    r.h.pong(&plugin);
    r.h.advance(1_100);
    let drive = r.drive(&drive_id);
    assert_eq!(drive.state, DriveState::Failed);
    let blocker = drive.blocker.as_ref().unwrap();
    assert_eq!(blocker.code, "needs_user");
    assert!(
        blocker
            .detail
            .contains("claude-code recorded no such prompt")
            && blocker
                .detail
                .contains("in the Claude Code tab's input, unsent; press Enter there"),
        "{}",
        blocker.detail
    );
    assert_eq!(drive.submit_evidence, None);
    assert!(drive.attempts[0]
        .hint
        .as_deref()
        .unwrap()
        .starts_with("Press Enter in the Claude Code tab"));
    assert_eq!(
        r.history(&drive_id),
        ["queued", "sent", "received", "focused", "pasted", "failed"]
    );
    // A prompt recorded afterwards changes nothing: the drive ended.
    r.recorded("Fix the bug", "/w/repo", true);
    assert_eq!(r.drive(&drive_id).state, DriveState::Failed);
    assert!(
        drive_order_none(&mut plugin),
        "no second route was sent to the plugin"
    );
}

fn drive_order_none(plugin: &mut Peer) -> bool {
    !plugin
        .drain()
        .into_iter()
        .any(|m| matches!(m, Message::Drive(_)))
}

#[test]
fn a_key_that_cannot_be_pressed_leaves_the_prompt_in_the_panel_and_says_so() {
    let mut r = rig();
    let (plugin, _) = window(&mut r, "/w/repo", true);
    let drive_id = r.send(claude_in("/w/repo"), "Fix the bug");
    r.steps_run(&plugin, &drive_id);
    r.h.finish_injection(&drive_id, Reached::Pasted, Some("no_display"));
    let drive = r.drive(&drive_id);
    assert_eq!(drive.state, DriveState::Failed);
    let blocker = drive.blocker.as_ref().unwrap();
    assert_eq!(blocker.code, "needs_user");
    assert!(
        blocker
            .detail
            .starts_with("the prompt is in the Claude Code tab's input, unsent")
            && blocker.detail.contains("no_display: test"),
        "{}",
        blocker.detail
    );
}

#[test]
fn a_window_without_the_panel_is_no_target_and_the_ides_own_chat_is_never_used() {
    let mut r = rig();
    let (mut plugin, _) = window(&mut r, "/w/repo", false);
    let Message::Error(error) = r.ask(claude_in("/w/repo"), "Fix the bug", Vec::new()) else {
        panic!("expected an error");
    };
    assert_eq!(error.code, ErrorCode::NoTarget);
    assert!(
        error
            .message
            .contains("nor does an IDE window of /w/repo offer claude-code's own chat panel"),
        "{}",
        error.message
    );
    assert!(drive_order_none(&mut plugin));
}

#[test]
fn a_plain_drive_to_the_window_never_plans_the_panel() {
    let mut r = rig();
    let (_plugin, _) = window(&mut r, "/w/repo", true);
    let drive_id =
        r.h.create(&mut r.controller, Target::Workspace("/w/repo".into()), "hi");
    let drive = r.drive(&drive_id);
    let interfaces: Vec<&str> = drive
        .attempts
        .iter()
        .map(|a| a.interface.as_str())
        .chain(drive.candidates.iter().map(|c| c.interface.as_str()))
        .chain(drive.current.iter().map(|c| c.interface.as_str()))
        .collect();
    assert!(!interfaces.is_empty());
    assert!(
        !interfaces.contains(&"claude_code_panel_drive"),
        "{interfaces:?}"
    );
}

#[test]
fn a_terminal_running_claude_code_in_the_folder_is_preferred_to_the_panel() {
    let mut r = rig();
    let (mut plugin, _) = window(&mut r, "/w/repo", true);
    let agent = PaneAgent {
        product: AgentProduct::ClaudeCode,
        pid: 4300,
        pane: Pane {
            kind: PaneKind::Tmux,
            socket: "/tmp/tmux-1000/default".into(),
            pane_id: "%3".into(),
            pid: 4299,
            command: "node".into(),
            path: "/w/repo".into(),
            place: "work:3.0".into(),
        },
        server: None,
    };
    let Message::DriveResult(result) = r.ask(claude_in("/w/repo"), "hi", vec![agent]) else {
        panic!("expected a drive");
    };
    assert!(result.drive.session_id.starts_with("t_"), "{result:?}");
    assert!(drive_order_none(&mut plugin));
}

#[test]
fn two_windows_of_the_folder_with_the_panel_are_ambiguous() {
    let mut r = rig();
    let (_a, _) = window(&mut r, "/w/repo", true);
    let (_b, _) = window(&mut r, "/w/repo", true);
    let Message::Error(error) = r.ask(claude_in("/w/repo"), "hi", Vec::new()) else {
        panic!("expected an error");
    };
    assert_eq!(error.code, ErrorCode::AmbiguousTarget);
    assert!(
        error.message.contains("2 IDE windows offer its chat panel"),
        "{}",
        error.message
    );
}

#[test]
fn capabilities_reported_after_the_hello_make_the_panel_reachable() {
    let mut r = rig();
    let (plugin, session_id) = window(&mut r, "/w/repo", false);
    let Message::Error(_) = r.ask(claude_in("/w/repo"), "hi", Vec::new()) else {
        panic!("no panel yet");
    };
    let mut capabilities = plugin_hello("/w/repo").capabilities;
    capabilities.extend(PANEL_COMMANDS.map(|id| Capability::Command { id: id.into() }));
    r.h.app.handle(DaemonEvent::Received {
        conn_id: plugin.conn_id,
        in_flight: crate::app::InFlight::untracked(),
        envelope: Box::new(Envelope::new(Message::Capabilities(
            koru_protocol::CapabilitiesReport {
                capabilities: capabilities.clone(),
            },
        ))),
    });
    assert_eq!(r.h.app.sessions[&session_id].capabilities, capabilities);
    let drive_id = r.send(claude_in("/w/repo"), "hi");
    assert_eq!(r.drive(&drive_id).session_id, session_id);
}

/// The Claude Code chat `chat` in /w/repo ended its turn (its transcript says so).
fn turn_ended(r: &mut Rig, chat: &str) {
    let ended = observed(
        &r.h,
        chat,
        "/w/repo",
        koru_protocol::ObservedKind::ReplyCompleted {
            excerpt: "done".into(),
            length: 4,
        },
    );
    r.h.app.handle(ended);
}

#[test]
fn a_known_claude_code_chat_with_no_terminal_holding_it_is_resumed_in_the_panel_of_its_folder() {
    let mut r = rig();
    let (mut plugin, session_id) = window(&mut r, "/w/repo", true);
    // Claude Code's transcript of chat c-42 in /w/repo, seen by the observers: a turn
    // that ended.
    claude_recorded(&mut r.h, "an earlier prompt", "/w/repo", "c-42", false);
    turn_ended(&mut r, "c-42");
    let drive_id = r.send(Target::Chat("c-42".into()), "And now the tests");
    assert_eq!(r.drive(&drive_id).session_id, session_id);
    let order = drive_order(&mut plugin);
    assert_eq!(
        order.steps[0].args,
        [serde_json::json!("c-42"), serde_json::json!("$prompt")],
        "the tab of that Claude Code session"
    );
    r.steps_run(&plugin, &drive_id);
    r.h.finish_injection(&drive_id, Reached::Submitted, None);
    claude_recorded(&mut r.h, "And now the tests", "/w/repo", "c-42", true);
    assert_eq!(r.drive(&drive_id).state, DriveState::Done);
    turn_ended(&mut r, "c-42");

    // The panel's chat is Claude Code's, not the window's own: the next drive to it goes
    // to the panel again, never to the IDE's chat routes.
    let next = r.send(Target::Chat("c-42".into()), "One more");
    assert_eq!(r.drive(&next).agent_chat.as_deref(), Some("claude-code"));
    let order = drive_order(&mut plugin);
    assert_eq!(order.steps[0].command, "claude-vscode.primaryEditor.open");
}

#[test]
fn an_unknown_chat_is_no_target_naming_the_panel_too() {
    let mut r = rig();
    let (_plugin, _) = window(&mut r, "/w/repo", true);
    let Message::Error(error) = r.ask(Target::Chat("nope".into()), "hi", Vec::new()) else {
        panic!("expected an error");
    };
    assert_eq!(error.code, ErrorCode::NoTarget);
    assert!(
        error
            .message
            .contains("nor does an IDE window of the chat's folder offer its agent's chat panel"),
        "{}",
        error.message
    );
}

//! State-machine tests of a plugin route that pastes and leaves the submit to the daemon's key press (Cursor, Windsurf): the plugin is asked not to submit, the key is pressed once after `pasted`, a key that cannot be pressed ends the drive failed at `pasted` with a hint, never `done`, never another route; and where no OS injector can press it at all, Cursor's new-chat command sends the drive instead (policy switch).

use koru_protocol::{AckStage, DriveCreate, DriveOptions, DriveState, Message, Target};

use super::*;
use crate::drive::inject::Reached;

fn cursor_hello(folder: &str, focused: Option<bool>) -> Hello {
    let mut hello = plugin_hello(folder);
    hello.capabilities = ["composer.focusComposer", "composer.createNew"]
        .into_iter()
        .map(|id| koru_protocol::Capability::Command { id: id.into() })
        .collect();
    if let Some(ide) = hello.ide.as_mut() {
        ide.product = koru_protocol::IdeProduct::Cursor;
    }
    if let Some(window) = hello.window.as_mut() {
        window.focused = focused;
    }
    hello
}

fn cursor(h: &mut Harness, focused: Option<bool>) -> (Peer, String) {
    let mut peer = h.connect(cursor_hello("/w", focused), 64);
    let Message::Welcome(welcome) = peer.drain().remove(0) else {
        panic!("no welcome");
    };
    (peer, welcome.session_id)
}

fn create_with(h: &mut Harness, controller: &mut Peer, options: DriveOptions) -> String {
    h.request(
        controller,
        1,
        Message::DriveCreate(DriveCreate {
            target: Target::Workspace("/w".into()),
            prompt: "Fix the bug".into(),
            options,
        }),
    );
    match controller.drain().remove(0) {
        Message::DriveResult(result) => result.drive.drive_id,
        other => panic!("expected drive.result, got {other:?}"),
    }
}

fn drive_sent(plugin: &mut Peer) -> koru_protocol::DriveRequest {
    plugin
        .drain()
        .into_iter()
        .find_map(|m| match m {
            Message::Drive(drive) => Some(drive),
            _ => None,
        })
        .expect("the plugin got a drive")
}

fn history(h: &Harness, drive_id: &str) -> Vec<&'static str> {
    h.app
        .drives
        .get(drive_id)
        .unwrap()
        .history
        .iter()
        .map(|r| r.state.as_str())
        .collect()
}

#[test]
fn the_plugin_pastes_unsent_and_the_daemon_presses_the_submit_key_once() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let (mut plugin, _) = cursor(&mut h, Some(true));
    let mut controller = h.controller(64);
    let drive_id = create_with(&mut h, &mut controller, DriveOptions::default());
    let sent = drive_sent(&mut plugin);
    assert_eq!(sent.route, koru_protocol::Route::PluginDrive);
    assert!(!sent.options.submit, "the plugin is asked not to submit");
    let commands: Vec<&str> = sent.steps.iter().map(|s| s.command.as_str()).collect();
    assert_eq!(
        commands,
        [
            "composer.focusComposer",
            "editor.action.clipboardPasteAction"
        ]
    );
    assert!(h.app.drives.get(&drive_id).unwrap().options.submit);

    for stage in [AckStage::Received, AckStage::Focused] {
        h.ack(&plugin, &drive_id, stage);
    }
    assert!(h.injections.key_presses.lock().unwrap().is_empty());
    h.ack(&plugin, &drive_id, AckStage::Pasted);
    let presses = h.injections.key_presses.lock().unwrap().clone();
    assert_eq!(presses.len(), 1, "one key press after pasted");
    let job = &presses[0];
    assert_eq!(job.chord, "Return");
    assert_eq!(job.window.pid, Some(4242), "the plugin's window");
    assert_eq!(job.plugin_focused, Some(true));
    assert!(job
        .injectors
        .as_ref()
        .unwrap()
        .contains(&"os_injector_xdotool".to_string()));
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Pasted);
    assert_eq!(
        drive.step_deadline_ms, None,
        "the key press is the daemon's step"
    );

    h.finish_injection(&drive_id, Reached::Submitted, None);
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Done);
    assert_eq!(
        drive.submit_evidence,
        Some(koru_protocol::SubmitEvidence::KeyPressed)
    );
    assert_eq!(drive.verification, Verification::Unverified);
    assert_eq!(
        history(&h, &drive_id),
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
        h.attempts(&drive_id)[..2],
        [
            "cursor_native_new_chat skipped",
            "cursor_plugin_drive succeeded"
        ]
    );
    assert_eq!(h.injections.key_presses.lock().unwrap().len(), 1);
}

#[test]
fn a_key_that_cannot_be_pressed_fails_the_drive_at_pasted_with_a_hint_and_no_other_route() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let (plugin, _) = cursor(&mut h, Some(true));
    let mut controller = h.controller(64);
    let drive_id = create_with(&mut h, &mut controller, DriveOptions::default());
    for stage in [AckStage::Received, AckStage::Focused, AckStage::Pasted] {
        h.ack(&plugin, &drive_id, stage);
    }
    h.finish_injection(&drive_id, Reached::Pasted, Some("focus_mismatch"));
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Failed);
    assert_eq!(drive.submit_evidence, None);
    let blocker = drive.blocker.as_ref().unwrap();
    assert_eq!(blocker.code, "focus_mismatch");
    assert!(
        blocker.detail.contains("no other route is tried"),
        "{}",
        blocker.detail
    );
    assert_eq!(
        history(&h, &drive_id),
        ["queued", "sent", "received", "focused", "pasted", "failed"]
    );
    let attempts = h.attempts(&drive_id);
    assert_eq!(attempts[1], "cursor_plugin_drive failed");
    assert!(
        attempts[2..].iter().all(|a| a.ends_with("nottried")),
        "OS injection would work, and must not paste a second time: {attempts:?}"
    );
    let failed = &drive.attempts[1];
    assert_eq!(failed.reached, Some(DriveState::Pasted));
    assert!(
        failed
            .hint
            .as_deref()
            .unwrap()
            .starts_with("Press Enter in the chat"),
        "{:?}",
        failed.hint
    );
    assert!(h.injections.started.lock().unwrap().is_empty());
}

#[test]
fn the_key_waits_for_the_keyboard_and_a_window_the_plugin_says_is_unfocused_is_named_in_the_job() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    // An OS injection into a window without a plugin holds the keyboard.
    let mut controller = h.controller(64);
    let window_drive = {
        h.request(
            &controller,
            1,
            Message::DriveCreate(DriveCreate {
                target: Target::Window(koru_protocol::WindowTarget {
                    pid: Some(77),
                    title: None,
                }),
                prompt: "first".into(),
                options: DriveOptions::default(),
            }),
        );
        match controller.drain().remove(0) {
            Message::DriveResult(result) => result.drive.drive_id,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(h.injections.started.lock().unwrap().len(), 1);
    let (plugin, _) = cursor(&mut h, Some(false));
    let drive_id = create_with(&mut h, &mut controller, DriveOptions::default());
    for stage in [AckStage::Received, AckStage::Focused, AckStage::Pasted] {
        h.ack(&plugin, &drive_id, stage);
    }
    assert!(
        h.injections.key_presses.lock().unwrap().is_empty(),
        "the key waits while another injection types"
    );
    h.finish_injection(&window_drive, Reached::Submitted, None);
    let presses = h.injections.key_presses.lock().unwrap().clone();
    assert_eq!(presses.len(), 1);
    assert_eq!(presses[0].plugin_focused, Some(false));
}

#[test]
fn a_drive_left_unsent_or_asking_for_a_new_chat_gets_no_key_press() {
    let mut h = Harness::with_registry("", &["os_injector_xdotool"]);
    let (mut plugin, _) = cursor(&mut h, Some(true));
    let mut controller = h.controller(64);
    let unsent = create_with(
        &mut h,
        &mut controller,
        DriveOptions {
            submit: false,
            ..DriveOptions::default()
        },
    );
    let sent = drive_sent(&mut plugin);
    assert_eq!(sent.route, koru_protocol::Route::PluginDrive);
    for stage in [AckStage::Received, AckStage::Focused, AckStage::Pasted] {
        h.ack(&plugin, &unsent, stage);
    }
    assert_eq!(h.drive_state(&unsent), DriveState::Done);
    assert!(h.injections.key_presses.lock().unwrap().is_empty());

    let new_chat = create_with(
        &mut h,
        &mut controller,
        DriveOptions {
            new_chat: true,
            ..DriveOptions::default()
        },
    );
    let sent = drive_sent(&mut plugin);
    assert_eq!(sent.route, koru_protocol::Route::NativeSend);
    assert!(sent.options.submit, "Cursor's own command submits");
    assert_eq!(sent.steps[0].command, "composer.createNew");
    h.ack(&plugin, &new_chat, AckStage::Received);
    h.ack(&plugin, &new_chat, AckStage::Submitted);
    let drive = h.app.drives.get(&new_chat).unwrap();
    assert_eq!(drive.state, DriveState::Done);
    assert_eq!(
        drive.submit_evidence,
        Some(koru_protocol::SubmitEvidence::CommandReturned)
    );
    assert!(h.injections.key_presses.lock().unwrap().is_empty());
}

#[test]
fn where_nothing_can_press_return_a_cursor_drive_is_sent_in_a_new_chat_and_says_so() {
    // No usable injector at all (the recording runner answers no_display).
    let mut h = Harness::new();
    let (mut plugin, _) = cursor(&mut h, Some(true));
    let mut controller = h.controller(64);
    let drive_id = create_with(&mut h, &mut controller, DriveOptions::default());
    let sent = drive_sent(&mut plugin);
    assert_eq!(sent.route, koru_protocol::Route::NativeSend);
    assert!(sent.options.submit, "Cursor's own command submits");
    assert_eq!(sent.steps.len(), 1);
    assert_eq!(sent.steps[0].command, "composer.createNew");
    assert_eq!(sent.steps[0].proves, AckStage::Submitted);
    assert!(
        !h.app.drives.get(&drive_id).unwrap().options.new_chat,
        "the drive's own options are kept as asked"
    );
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.ack(&plugin, &drive_id, AckStage::Submitted);
    let drive = h.app.drives.get(&drive_id).unwrap();
    assert_eq!(drive.state, DriveState::Done);
    assert_eq!(
        drive.submit_evidence,
        Some(koru_protocol::SubmitEvidence::CommandReturned)
    );
    assert!(h.injections.key_presses.lock().unwrap().is_empty());
    let attempt = &drive.attempts[0];
    assert_eq!(attempt.interface, "cursor_native_new_chat");
    assert_eq!(
        attempt.note.as_deref(),
        Some("opened a new chat: nothing here can press Return in the current one (no_display: test: not usable)")
    );
    let info = drive.info();
    assert_eq!(info.attempts[0].note, attempt.note, "controllers see it");

    // Switched off in the registry: the current chat, pasted and left unsent.
    let mut h = Harness::with_registry("policy:\n  new_chat_when_key_unpressable: false\n", &[]);
    let (mut plugin, _) = cursor(&mut h, Some(true));
    let mut controller = h.controller(64);
    let drive_id = create_with(&mut h, &mut controller, DriveOptions::default());
    let sent = drive_sent(&mut plugin);
    assert_eq!(sent.route, koru_protocol::Route::PluginDrive);
    for stage in [AckStage::Received, AckStage::Focused, AckStage::Pasted] {
        h.ack(&plugin, &drive_id, stage);
    }
    h.finish_injection(&drive_id, Reached::Pasted, Some("no_display"));
    assert_eq!(h.drive_state(&drive_id), DriveState::Failed);
    assert!(h
        .app
        .drives
        .get(&drive_id)
        .unwrap()
        .attempts
        .iter()
        .all(|a| a.note.is_none()));
}

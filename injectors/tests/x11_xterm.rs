//! The X11 backends against real windows: xterm under Xvfb, found by pid, receives a multi-line Unicode prompt byte-exact by paste (xdotool + xclip, and enigo) and ASCII by typing; the clipboard is restored; a target that cannot be focused gets nothing and neither does the decoy.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use koru_injectors::{
    deliver, Clipboard, DeliverOptions, Injector, Method, Stage, TargetSpec, XclipClipboard,
    XdotoolKeys, XdotoolWindows,
};
use koru_system_tests::{XTerm, Xvfb};

/// X input is global to a display and DISPLAY is process-wide: one test at a time.
static DISPLAY_LOCK: Mutex<()> = Mutex::new(());

struct Desk {
    xvfb: Xvfb,
    _guard: MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    terminals: Vec<XTerm>,
}

impl Desk {
    fn new() -> Desk {
        let guard = DISPLAY_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let xvfb = Xvfb::start();
        // The injectors read DISPLAY from the environment, like the daemon does.
        std::env::set_var("DISPLAY", &xvfb.display);
        Desk {
            xvfb,
            _guard: guard,
            dir: tempfile::tempdir().unwrap(),
            terminals: Vec::new(),
        }
    }

    /// An xterm titled `title` that appends what is typed into it to a file; returns its pid and file.
    fn terminal(&mut self, title: &str) -> (u32, PathBuf) {
        let terminal = XTerm::start(&self.xvfb.display, self.dir.path(), title);
        let found = (terminal.pid, terminal.output.clone());
        self.terminals.push(terminal);
        found
    }
}

fn xdotool_injector() -> Injector {
    Injector {
        name: "xdotool",
        windows: Box::new(XdotoolWindows::default()),
        keys: Box::new(XdotoolKeys::default()),
        clipboard: Some(Box::new(XclipClipboard::default())),
    }
}

fn terminal_options(method: Method) -> DeliverOptions {
    DeliverOptions {
        method,
        paste_chord: "ctrl+shift+v".parse().unwrap(),
        ..DeliverOptions::default()
    }
}

const PROMPT: &str = "Fix the parser — keep «tests» green ✓\n日本語のコメント 🚀\n\ttabbed line; \"quoted\" & <angled> $HOME";

#[test]
fn xdotool_pastes_a_multiline_unicode_prompt_byte_exact_into_the_window_found_by_pid() {
    let mut desk = Desk::new();
    let (pid, out) = desk.terminal("target");
    let clipboard = XclipClipboard::default();
    clipboard.write("the user's own clipboard").unwrap();

    let injector = xdotool_injector();
    injector.probe().expect("xdotool works here");
    let window = injector
        .windows
        .find(&TargetSpec::for_pid(pid))
        .unwrap()
        .remove(0);
    assert_eq!(window.pid, Some(pid));
    assert_eq!(window.title, "target");
    let delivery = deliver(&injector, &window, PROMPT, &terminal_options(Method::Auto)).unwrap();
    assert_eq!(delivery.method, Method::Paste);
    assert_eq!(delivery.stage, Stage::Submitted);
    assert!(delivery.clipboard_restored);

    let expected = format!("{PROMPT}\n");
    assert_eq!(koru_system_tests::wait_for_file(&out, &expected), expected);
    assert_eq!(
        clipboard.read().unwrap().as_deref(),
        Some("the user's own clipboard")
    );
}

#[test]
fn xdotool_types_ascii_when_asked_to() {
    let mut desk = Desk::new();
    let (pid, out) = desk.terminal("typed");
    let injector = xdotool_injector();
    let window = injector
        .windows
        .find(&TargetSpec::for_pid(pid))
        .unwrap()
        .remove(0);
    let text = "plain ASCII prompt: cargo test --workspace 2>&1 | tail -5";
    let delivery = deliver(&injector, &window, text, &terminal_options(Method::Type)).unwrap();
    assert_eq!(delivery.method, Method::Type);
    let expected = format!("{text}\n");
    assert_eq!(koru_system_tests::wait_for_file(&out, &expected), expected);
}

#[cfg(feature = "enigo")]
#[test]
fn enigo_delivers_by_paste_and_by_typing() {
    let mut desk = Desk::new();
    let (pid, out) = desk.terminal("enigo");
    let injector = Injector {
        name: "enigo",
        windows: Box::new(XdotoolWindows::default()),
        keys: Box::new(koru_injectors::EnigoKeys),
        clipboard: Some(Box::new(XclipClipboard::default())),
    };
    injector.probe().expect("enigo works here");
    let window = injector
        .windows
        .find(&TargetSpec::for_pid(pid))
        .unwrap()
        .remove(0);
    deliver(&injector, &window, PROMPT, &terminal_options(Method::Paste)).unwrap();
    let pasted = format!("{PROMPT}\n");
    assert_eq!(koru_system_tests::wait_for_file(&out, &pasted), pasted);
    deliver(
        &injector,
        &window,
        "typed by enigo 42",
        &terminal_options(Method::Type),
    )
    .unwrap();
    let both = format!("{pasted}typed by enigo 42\n");
    assert_eq!(koru_system_tests::wait_for_file(&out, &both), both);
}

#[test]
fn a_target_that_cannot_be_focused_gets_nothing_and_neither_does_the_decoy() {
    let mut desk = Desk::new();
    let (decoy_pid, decoy_out) = desk.terminal("decoy");
    let (target_pid, target_out) = desk.terminal("hidden");
    let injector = xdotool_injector();
    let target = injector
        .windows
        .find(&TargetSpec::for_pid(target_pid))
        .unwrap()
        .remove(0);
    let decoy = injector
        .windows
        .find(&TargetSpec::for_pid(decoy_pid))
        .unwrap()
        .remove(0);
    // The target is unmapped (it cannot take focus); the decoy holds focus.
    Command::new("xdotool")
        .args(["windowunmap", "--sync", &target.id])
        .status()
        .unwrap();
    injector.windows.focus(&decoy).unwrap();

    let failure = deliver(
        &injector,
        &target,
        "must never land anywhere",
        &terminal_options(Method::Auto),
    )
    .unwrap_err();
    assert_eq!(
        failure.error.blocker(),
        "focus_mismatch",
        "{:?}",
        failure.error
    );
    assert_eq!(failure.reached, Stage::Nothing);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        std::fs::read_to_string(&decoy_out).unwrap(),
        "",
        "the decoy got keystrokes"
    );
    assert_eq!(std::fs::read_to_string(&target_out).unwrap(), "");
}

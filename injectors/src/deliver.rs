//! The safe delivery sequence: focus the target and verify it, paste (restoring the clipboard) or type, verify focus again, press the submit chord. A focus check that fails stops everything: nothing more is typed.

use std::time::{Duration, Instant};

use crate::{Chord, InjectError, Injector, Window};

/// Paste through the clipboard or type key by key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Paste,
    Type,
    /// Paste when the clipboard works; type short single-line ASCII otherwise. Non-ASCII
    /// and multi-line text is never typed (typing it is racy and a newline would submit).
    Auto,
}

/// How to deliver.
#[derive(Debug, Clone)]
pub struct DeliverOptions {
    pub method: Method,
    /// The chord that pastes in the target (ctrl+v in most IDEs, ctrl+shift+v in terminals).
    pub paste_chord: Chord,
    /// The chord that submits the chat input; `None` leaves the prompt unsent.
    pub submit_chord: Option<Chord>,
    /// How long to wait for the window system to report the focus change.
    pub focus_timeout: Duration,
    /// Pause after the paste chord before the clipboard is restored (the target reads the
    /// selection asynchronously).
    pub paste_settle: Duration,
}

impl Default for DeliverOptions {
    fn default() -> Self {
        DeliverOptions {
            method: Method::Auto,
            paste_chord: Chord {
                modifiers: vec!["ctrl".into()],
                key: "v".into(),
            },
            submit_chord: Some(Chord {
                modifiers: Vec::new(),
                key: "Return".into(),
            }),
            focus_timeout: Duration::from_millis(1500),
            paste_settle: Duration::from_millis(150),
        }
    }
}

/// How far a delivery got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Nothing,
    Focused,
    Pasted,
    Submitted,
}

/// A delivery that worked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub method: Method,
    pub stage: Stage,
    pub window: Window,
    /// Whether the previous clipboard content was put back (paste only).
    pub clipboard_restored: bool,
}

/// The most characters a prompt may have to be typed key by key (a longer one is pasted).
pub const MAX_TYPED_CHARS: usize = 200;

/// Why `text` cannot be typed key by key, if it cannot: what it holds, in words.
pub fn why_not_typed(text: &str) -> Option<String> {
    let chars = text.chars().count();
    if chars > MAX_TYPED_CHARS {
        return Some(format!(
            "the prompt is {chars} characters long (more than {MAX_TYPED_CHARS})"
        ));
    }
    if text.contains('\n') {
        return Some("the prompt has more than one line".into());
    }
    let other: String = text.chars().filter(|c| !c.is_ascii()).take(3).collect();
    (!other.is_empty()).then(|| {
        format!("the prompt holds characters outside ASCII ({other:?}), which a keyboard layout may not have")
    })
}

/// A delivery that stopped, with how far it got (a stage past `Focused` means text may
/// already be in the chat input; the caller must not retry by another route).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFailure {
    pub reached: Stage,
    pub error: InjectError,
}

/// Delivers `text` into `target` through `injector`.
pub fn deliver(
    injector: &Injector,
    target: &Window,
    text: &str,
    options: &DeliverOptions,
) -> Result<Delivery, DeliveryFailure> {
    let fail = |reached: Stage, error: InjectError| DeliveryFailure { reached, error };

    focus_verified(injector, target, options.focus_timeout).map_err(|e| fail(Stage::Nothing, e))?;

    let clipboard = injector.usable_clipboard();
    let method = match options.method {
        Method::Auto if clipboard.is_some() => Method::Paste,
        Method::Auto => match why_not_typed(text) {
            Some(why) => {
                return Err(fail(
                    Stage::Focused,
                    InjectError::ClipboardUnavailable {
                        detail: format!(
                            "{why}: such a prompt is pasted, never typed, and the {} injector has no clipboard to paste through here; nothing was typed",
                            injector.name
                        ),
                    },
                ))
            }
            None => Method::Type,
        },
        explicit => explicit,
    };

    // Right before the first key: is the target still focused?
    verify_focus(injector, target).map_err(|e| fail(Stage::Focused, e))?;
    let mut clipboard_restored = false;
    match method {
        Method::Paste => {
            let clipboard = clipboard.ok_or_else(|| {
                fail(
                    Stage::Focused,
                    InjectError::ClipboardUnavailable {
                        detail: "no working clipboard".into(),
                    },
                )
            })?;
            let previous = clipboard.read().map_err(|e| fail(Stage::Focused, e))?;
            let pasted = clipboard.write(text).and_then(|()| {
                // The selection may have been taken while we wrote: check the target again
                // before the chord.
                verify_focus(injector, target)?;
                injector.keys.key(&options.paste_chord)?;
                std::thread::sleep(options.paste_settle);
                Ok(())
            });
            // Put the user's clipboard back whatever happened.
            let restored = match &previous {
                Some(previous) => clipboard.write(previous),
                None => clipboard.clear(),
            };
            clipboard_restored = restored.is_ok();
            if let Err(error) = &restored {
                tracing::warn!(%error, "could not restore the clipboard");
            }
            pasted.map_err(|e| fail(Stage::Focused, e))?;
        }
        Method::Type | Method::Auto => {
            injector
                .keys
                .type_text(text)
                .map_err(|e| fail(Stage::Focused, e))?;
        }
    }

    let Some(submit) = &options.submit_chord else {
        return Ok(Delivery {
            method,
            stage: Stage::Pasted,
            window: target.clone(),
            clipboard_restored,
        });
    };
    // Between paste and submit: a focus change here means Return would go elsewhere.
    verify_focus(injector, target).map_err(|e| fail(Stage::Pasted, e))?;
    injector
        .keys
        .key(submit)
        .map_err(|e| fail(Stage::Pasted, e))?;
    Ok(Delivery {
        method,
        stage: Stage::Submitted,
        window: target.clone(),
        clipboard_restored,
    })
}

/// Raises and focuses `target`, then waits up to `timeout` until the window system reports
/// it focused. Nothing is typed; a window that will not take focus is a `FocusMismatch`.
pub fn focus_verified(
    injector: &Injector,
    target: &Window,
    timeout: Duration,
) -> Result<(), InjectError> {
    // A window system that refuses to focus the target (unmapped, gone, another
    // desktop) is a focus problem, not a broken tool.
    injector
        .windows
        .focus(target)
        .map_err(|error| match error {
            InjectError::Command { program, detail } => InjectError::FocusMismatch {
                expected: describe(&Some(target.clone())),
                actual: format!(
                    "{program} could not focus it: {}",
                    detail.lines().next().unwrap_or_default()
                ),
            },
            other => other,
        })?;
    wait_for_focus(injector, target, timeout)
}

/// Presses `chord` once into the window that has focus now, provided it is one of
/// `targets` (the windows of the IDE the prompt was pasted into). Nothing is focused or
/// raised first: a prompt pasted by the IDE itself is in the window the user was looking
/// at, and a key for it must go there or nowhere. A focused window that is not a target
/// gets no key (`FocusMismatch`). Returns the window that got the key.
pub fn press_in_focused(
    injector: &Injector,
    targets: &[Window],
    chord: &Chord,
) -> Result<Window, InjectError> {
    let focused = injector.windows.focused_window()?;
    match focused {
        Some(window) if targets.iter().any(|target| target.id == window.id) => {
            injector.keys.key(chord)?;
            Ok(window)
        }
        other => Err(InjectError::FocusMismatch {
            expected: match targets {
                [] => "a window of the target (none found)".to_string(),
                [one] => describe(&Some(one.clone())),
                several => format!(
                    "one of {}",
                    several
                        .iter()
                        .map(|w| describe(&Some(w.clone())))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            actual: describe(&other),
        }),
    }
}

fn describe(window: &Option<Window>) -> String {
    match window {
        Some(w) => format!(
            "window {} ({:?}, pid {})",
            w.id,
            w.title,
            w.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
        ),
        None => "no window".to_string(),
    }
}

fn verify_focus(injector: &Injector, target: &Window) -> Result<(), InjectError> {
    // The cheap check first; the full description only to explain a mismatch.
    if injector.windows.focused_id()?.as_deref() == Some(target.id.as_str()) {
        return Ok(());
    }
    let focused = injector.windows.focused_window()?;
    if focused.as_ref().map(|w| &w.id) == Some(&target.id) {
        return Ok(());
    }
    Err(InjectError::FocusMismatch {
        expected: describe(&Some(target.clone())),
        actual: describe(&focused),
    })
}

fn wait_for_focus(
    injector: &Injector,
    target: &Window,
    timeout: Duration,
) -> Result<(), InjectError> {
    let deadline = Instant::now() + timeout;
    loop {
        match verify_focus(injector, target) {
            Ok(()) => return Ok(()),
            Err(error) if Instant::now() >= deadline => return Err(error),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::{Clipboard, KeyInput, Probe, TargetSpec, WindowControl};

    /// A fake desktop: which window has focus, what was typed where, the clipboard.
    #[derive(Default)]
    struct Desktop {
        focused: Option<String>,
        /// When set, focus requests for other windows are ignored (a window that cannot be focused).
        refuse_focus: bool,
        /// After this many key events, focus jumps to the decoy.
        steal_focus_after_keys: Option<usize>,
        keys: usize,
        typed: Vec<(String, String)>,
        clipboard: Option<String>,
    }

    #[derive(Clone, Default)]
    struct Fake(Arc<Mutex<Desktop>>);

    fn window(id: &str) -> Window {
        Window {
            id: id.into(),
            pid: Some(1),
            title: id.into(),
            class: "fake".into(),
        }
    }

    impl WindowControl for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn probe(&self) -> Probe {
            Ok(())
        }
        fn find(&self, _: &TargetSpec) -> Result<Vec<Window>, InjectError> {
            Ok(vec![window("target")])
        }
        fn focused_window(&self) -> Result<Option<Window>, InjectError> {
            Ok(self.0.lock().unwrap().focused.as_deref().map(window))
        }
        fn focus(&self, w: &Window) -> Result<(), InjectError> {
            let mut desktop = self.0.lock().unwrap();
            if !desktop.refuse_focus {
                desktop.focused = Some(w.id.clone());
            }
            Ok(())
        }
    }

    impl KeyInput for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn probe(&self) -> Probe {
            Ok(())
        }
        fn type_text(&self, text: &str) -> Result<(), InjectError> {
            let mut desktop = self.0.lock().unwrap();
            let into = desktop.focused.clone().unwrap_or_default();
            desktop.typed.push((into, text.to_string()));
            Ok(())
        }
        fn key(&self, chord: &Chord) -> Result<(), InjectError> {
            let mut desktop = self.0.lock().unwrap();
            desktop.keys += 1;
            let into = desktop.focused.clone().unwrap_or_default();
            let text = if chord.to_string() == "ctrl+v" {
                desktop.clipboard.clone().unwrap_or_default()
            } else {
                format!("<{chord}>")
            };
            desktop.typed.push((into, text));
            if desktop.steal_focus_after_keys == Some(desktop.keys) {
                desktop.focused = Some("decoy".into());
            }
            Ok(())
        }
    }

    impl Clipboard for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn probe(&self) -> Probe {
            Ok(())
        }
        fn read(&self) -> Result<Option<String>, InjectError> {
            Ok(self.0.lock().unwrap().clipboard.clone())
        }
        fn write(&self, text: &str) -> Result<(), InjectError> {
            self.0.lock().unwrap().clipboard = Some(text.to_string());
            Ok(())
        }
        fn clear(&self) -> Result<(), InjectError> {
            self.0.lock().unwrap().clipboard = None;
            Ok(())
        }
    }

    fn injector(fake: &Fake, with_clipboard: bool) -> Injector {
        Injector {
            name: "fake",
            windows: Box::new(fake.clone()),
            keys: Box::new(fake.clone()),
            clipboard: with_clipboard.then(|| Box::new(fake.clone()) as Box<dyn Clipboard>),
        }
    }

    fn quick() -> DeliverOptions {
        DeliverOptions {
            focus_timeout: Duration::from_millis(50),
            paste_settle: Duration::ZERO,
            ..DeliverOptions::default()
        }
    }

    #[test]
    fn pastes_into_the_target_submits_and_restores_the_clipboard() {
        let fake = Fake::default();
        fake.0.lock().unwrap().clipboard = Some("user's clipboard".into());
        fake.0.lock().unwrap().focused = Some("decoy".into());
        let done = deliver(
            &injector(&fake, true),
            &window("target"),
            "héllo\nworld",
            &quick(),
        )
        .unwrap();
        assert_eq!(done.stage, Stage::Submitted);
        assert_eq!(done.method, Method::Paste);
        assert!(done.clipboard_restored);
        let desktop = fake.0.lock().unwrap();
        assert_eq!(
            desktop.typed,
            [
                ("target".to_string(), "héllo\nworld".to_string()),
                ("target".to_string(), "<Return>".to_string())
            ]
        );
        assert_eq!(desktop.clipboard.as_deref(), Some("user's clipboard"));
    }

    #[test]
    fn a_window_that_cannot_be_focused_gets_no_keystroke_at_all() {
        let fake = Fake::default();
        fake.0.lock().unwrap().focused = Some("decoy".into());
        fake.0.lock().unwrap().refuse_focus = true;
        let failure =
            deliver(&injector(&fake, true), &window("target"), "hi", &quick()).unwrap_err();
        assert_eq!(failure.reached, Stage::Nothing);
        assert_eq!(failure.error.blocker(), "focus_mismatch");
        assert!(
            fake.0.lock().unwrap().typed.is_empty(),
            "nothing typed anywhere"
        );
    }

    #[test]
    fn focus_stolen_after_the_paste_stops_before_submit() {
        let fake = Fake::default();
        fake.0.lock().unwrap().steal_focus_after_keys = Some(1);
        let failure =
            deliver(&injector(&fake, true), &window("target"), "text", &quick()).unwrap_err();
        assert_eq!(failure.reached, Stage::Pasted);
        assert_eq!(failure.error.blocker(), "focus_mismatch");
        let desktop = fake.0.lock().unwrap();
        assert!(
            desktop.typed.iter().all(|(into, _)| into == "target"),
            "no key went to the decoy: {:?}",
            desktop.typed
        );
        assert!(!desktop.typed.iter().any(|(_, t)| t == "<Return>"));
    }

    #[test]
    fn without_a_clipboard_short_ascii_is_typed_and_anything_else_refused() {
        let fake = Fake::default();
        let done = deliver(
            &injector(&fake, false),
            &window("target"),
            "plain ascii",
            &quick(),
        )
        .unwrap();
        assert_eq!(done.method, Method::Type);
        let failure = deliver(
            &injector(&fake, false),
            &window("target"),
            "ünïcode",
            &quick(),
        )
        .unwrap_err();
        assert_eq!(failure.error.blocker(), "clipboard_unavailable");
        assert_eq!(failure.reached, Stage::Focused);
        // Each refusal says exactly why: the length, the lines, the characters.
        let why = |text: &str| {
            deliver(&injector(&fake, false), &window("target"), text, &quick())
                .unwrap_err()
                .error
                .to_string()
        };
        let long = "a".repeat(2_000);
        assert!(
            why(&long).contains("the prompt is 2000 characters long (more than 200)"),
            "{}",
            why(&long)
        );
        assert!(why("two\nlines").contains("the prompt has more than one line"));
        let unicode = why("café ✓");
        assert!(
            unicode.contains("outside ASCII (\"é✓\")") && unicode.contains("nothing was typed"),
            "{unicode}"
        );
        assert!(why_not_typed(&"a".repeat(200)).is_none(), "200 is typed");
    }

    fn return_key() -> Chord {
        "Return".parse().unwrap()
    }

    #[test]
    fn a_key_for_the_focused_target_is_pressed_once_and_focus_is_never_moved() {
        let fake = Fake::default();
        fake.0.lock().unwrap().focused = Some("target".into());
        let pressed = press_in_focused(
            &injector(&fake, false),
            &[window("other-ide-window"), window("target")],
            &return_key(),
        )
        .unwrap();
        assert_eq!(pressed.id, "target");
        let desktop = fake.0.lock().unwrap();
        assert_eq!(
            desktop.typed,
            [("target".to_string(), "<Return>".to_string())]
        );
        assert_eq!(desktop.keys, 1);
    }

    #[test]
    fn a_key_for_a_target_without_focus_goes_nowhere() {
        let fake = Fake::default();
        fake.0.lock().unwrap().focused = Some("decoy".into());
        let error = press_in_focused(&injector(&fake, false), &[window("target")], &return_key())
            .unwrap_err();
        assert_eq!(error.blocker(), "focus_mismatch");
        assert!(error.to_string().contains("window decoy"), "{error}");
        let desktop = fake.0.lock().unwrap();
        assert!(desktop.typed.is_empty());
        assert_eq!(
            desktop.focused.as_deref(),
            Some("decoy"),
            "focus is not moved"
        );
        drop(desktop);
        fake.0.lock().unwrap().focused = None;
        let error = press_in_focused(&injector(&fake, false), &[], &return_key()).unwrap_err();
        assert!(error.to_string().contains("none found"), "{error}");
        assert!(fake.0.lock().unwrap().typed.is_empty());
    }

    #[test]
    fn no_submit_chord_leaves_the_prompt_unsent() {
        let fake = Fake::default();
        let options = DeliverOptions {
            submit_chord: None,
            ..quick()
        };
        let done = deliver(&injector(&fake, true), &window("target"), "draft", &options).unwrap();
        assert_eq!(done.stage, Stage::Pasted);
        assert!(!fake
            .0
            .lock()
            .unwrap()
            .typed
            .iter()
            .any(|(_, t)| t == "<Return>"));
    }
}

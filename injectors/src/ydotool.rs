//! The uinput backend: ydotool types through the kernel's virtual input device (needs /dev/uinput and ydotoold). It has no window control of its own; focus goes through the X11 or sway window control.

use std::sync::Arc;
use std::time::Duration;

use crate::{
    expect_success, require_programs, Chord, CommandRunner, InjectError, KeyInput, Probe,
    SystemRunner, Unavailable, COMMAND_TIMEOUT,
};

/// Keyboard input through ydotool.
#[derive(Clone)]
pub struct YdotoolKeys {
    runner: Arc<dyn CommandRunner>,
    /// The uinput device that must exist (tests point this elsewhere).
    pub uinput_path: std::path::PathBuf,
}

impl Default for YdotoolKeys {
    fn default() -> Self {
        YdotoolKeys::with_runner(Arc::new(SystemRunner))
    }
}

impl YdotoolKeys {
    pub fn with_runner(runner: Arc<dyn CommandRunner>) -> Self {
        YdotoolKeys {
            runner,
            uinput_path: "/dev/uinput".into(),
        }
    }
}

/// Linux input event codes (linux/input-event-codes.h) for the keys Koru presses.
fn keycode(name: &str) -> Option<u16> {
    Some(match name {
        "ctrl" => 29,
        "shift" => 42,
        "alt" => 56,
        "super" => 125,
        "Return" => 28,
        "Tab" => 15,
        "Escape" => 1,
        "space" => 57,
        "v" | "V" => 47,
        "c" | "C" => 46,
        "a" | "A" => 30,
        _ => return None,
    })
}

impl KeyInput for YdotoolKeys {
    fn name(&self) -> &'static str {
        "ydotool"
    }

    fn probe(&self) -> Probe {
        if !self.uinput_path.exists() {
            return Err(Unavailable {
                blocker: "uinput_missing",
                detail: format!(
                    "{} does not exist (the kernel has no uinput, or the module is not loaded)",
                    self.uinput_path.display()
                ),
            });
        }
        require_programs(&["ydotool"])
    }

    fn type_text(&self, text: &str) -> Result<(), InjectError> {
        let budget = COMMAND_TIMEOUT + Duration::from_millis(15 * text.chars().count() as u64);
        let output = self
            .runner
            .run("ydotool", &["type", "--file", "-"], Some(text), budget)?;
        expect_success("ydotool", output).map(|_| ())
    }

    fn key(&self, chord: &Chord) -> Result<(), InjectError> {
        let mut codes = Vec::new();
        for name in chord.modifiers.iter().chain(std::iter::once(&chord.key)) {
            codes.push(keycode(name).ok_or_else(|| InjectError::Input {
                detail: format!("ydotool: no keycode for {name:?}"),
            })?);
        }
        // Press in order, release in reverse: "29:1 47:1 47:0 29:0".
        let mut events: Vec<String> = codes.iter().map(|c| format!("{c}:1")).collect();
        events.extend(codes.iter().rev().map(|c| format!("{c}:0")));
        let mut args = vec!["key"];
        args.extend(events.iter().map(String::as_str));
        let output = self.runner.run("ydotool", &args, None, COMMAND_TIMEOUT)?;
        expect_success("ydotool", output).map(|_| ())
    }
}

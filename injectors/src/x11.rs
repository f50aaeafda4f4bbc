//! The X11 backend: xdotool finds, focuses and reports windows and sends keys; xclip serves the clipboard.

use std::sync::Arc;
use std::time::Duration;

use crate::{
    expect_success, require_env, require_programs, Chord, Clipboard, CommandRunner, InjectError,
    KeyInput, Probe, SystemRunner, TargetSpec, Window, WindowControl, COMMAND_TIMEOUT,
};

/// Window control through xdotool (and xprop for the class, when present).
#[derive(Clone)]
pub struct XdotoolWindows {
    runner: Arc<dyn CommandRunner>,
}

impl Default for XdotoolWindows {
    fn default() -> Self {
        XdotoolWindows::with_runner(Arc::new(SystemRunner))
    }
}

impl XdotoolWindows {
    pub fn with_runner(runner: Arc<dyn CommandRunner>) -> Self {
        XdotoolWindows { runner }
    }

    fn xdotool(&self, args: &[&str]) -> Result<String, InjectError> {
        let output = self.runner.run("xdotool", args, None, COMMAND_TIMEOUT)?;
        Ok(expect_success("xdotool", output)?.stdout)
    }

    fn describe(&self, id: &str) -> Window {
        let pid = self
            .xdotool(&["getwindowpid", id])
            .ok()
            .and_then(|p| p.trim().parse().ok());
        let title = self
            .xdotool(&["getwindowname", id])
            .map(|t| t.trim_end_matches('\n').to_string())
            .unwrap_or_default();
        let class = self
            .runner
            .run("xprop", &["-id", id, "WM_CLASS"], None, COMMAND_TIMEOUT)
            .ok()
            .filter(|o| o.success)
            .and_then(|o| {
                // WM_CLASS(STRING) = "xterm", "XTerm"
                o.stdout.split('"').nth(3).map(str::to_string)
            })
            .unwrap_or_default();
        Window {
            id: id.to_string(),
            pid,
            title,
            class,
        }
    }
}

impl XdotoolWindows {
    fn matching<'a>(&self, ids: impl Iterator<Item = &'a str>, target: &TargetSpec) -> Vec<Window> {
        let mut ids: Vec<&str> = ids.map(str::trim).filter(|id| !id.is_empty()).collect();
        ids.sort();
        ids.dedup();
        ids.into_iter()
            .map(|id| self.describe(id))
            .filter(|w| target.matches(w))
            .collect()
    }
}

impl WindowControl for XdotoolWindows {
    fn name(&self) -> &'static str {
        "xdotool"
    }

    fn probe(&self) -> Probe {
        require_env("DISPLAY")?;
        require_programs(&["xdotool"])
    }

    fn find(&self, target: &TargetSpec) -> Result<Vec<Window>, InjectError> {
        if target.pids.is_empty() && target.ancestors.is_empty() {
            // Titles and classes only: consider every visible window.
            let listed = self.runner.run(
                "xdotool",
                &["search", "--onlyvisible", "--name", ""],
                None,
                COMMAND_TIMEOUT,
            )?;
            return Ok(self.matching(listed.stdout.lines(), target));
        }
        // The process family first, then the nearest ancestor that owns a window.
        for generation in target.generations() {
            let mut ids: Vec<String> = Vec::new();
            for pid in &generation {
                let pid = pid.to_string();
                // No match exits 1: that is an empty result, not an error.
                let listed = self.runner.run(
                    "xdotool",
                    &["search", "--onlyvisible", "--pid", &pid],
                    None,
                    COMMAND_TIMEOUT,
                )?;
                ids.extend(listed.stdout.lines().map(str::to_string));
            }
            let windows = self.matching(
                ids.iter().map(String::as_str),
                &target.with_pids(generation),
            );
            if !windows.is_empty() {
                return Ok(windows);
            }
        }
        Ok(Vec::new())
    }

    fn focused_window(&self) -> Result<Option<Window>, InjectError> {
        let output = self
            .runner
            .run("xdotool", &["getwindowfocus"], None, COMMAND_TIMEOUT)?;
        if !output.success {
            return Ok(None);
        }
        let id = output.stdout.trim();
        Ok((!id.is_empty()).then(|| self.describe(id)))
    }

    fn focused_id(&self) -> Result<Option<String>, InjectError> {
        let output = self
            .runner
            .run("xdotool", &["getwindowfocus"], None, COMMAND_TIMEOUT)?;
        let id = output.stdout.trim();
        Ok((output.success && !id.is_empty()).then(|| id.to_string()))
    }

    fn focus(&self, window: &Window) -> Result<(), InjectError> {
        // With a window manager, activation also raises and switches desktops; bare X
        // servers (no _NET_ACTIVE_WINDOW) only support input focus.
        let activated = self.runner.run(
            "xdotool",
            &["windowactivate", "--sync", &window.id],
            None,
            Duration::from_secs(2),
        );
        if matches!(&activated, Ok(o) if o.success) {
            return Ok(());
        }
        let output = self.runner.run(
            "xdotool",
            &["windowfocus", "--sync", &window.id],
            None,
            Duration::from_secs(2),
        )?;
        expect_success("xdotool", output).map(|_| ())
    }
}

/// Keyboard input through xdotool.
#[derive(Clone)]
pub struct XdotoolKeys {
    runner: Arc<dyn CommandRunner>,
    /// Milliseconds between typed keys (xdotool's default is 12; 0 garbles non-ASCII).
    pub type_delay_ms: u32,
}

impl Default for XdotoolKeys {
    fn default() -> Self {
        XdotoolKeys {
            runner: Arc::new(SystemRunner),
            type_delay_ms: 12,
        }
    }
}

impl KeyInput for XdotoolKeys {
    fn name(&self) -> &'static str {
        "xdotool"
    }

    fn probe(&self) -> Probe {
        require_env("DISPLAY")?;
        require_programs(&["xdotool"])
    }

    fn type_text(&self, text: &str) -> Result<(), InjectError> {
        let delay = self.type_delay_ms.to_string();
        let budget = COMMAND_TIMEOUT
            + Duration::from_millis(
                u64::from(self.type_delay_ms + 3) * text.chars().count() as u64,
            );
        let output = self.runner.run(
            "xdotool",
            &["type", "--clearmodifiers", "--delay", &delay, "--file", "-"],
            Some(text),
            budget,
        )?;
        expect_success("xdotool", output).map(|_| ())
    }

    fn key(&self, chord: &Chord) -> Result<(), InjectError> {
        let output = self.runner.run(
            "xdotool",
            &["key", "--clearmodifiers", &chord.to_string()],
            None,
            COMMAND_TIMEOUT,
        )?;
        expect_success("xdotool", output).map(|_| ())
    }
}

/// The CLIPBOARD selection through xclip.
#[derive(Clone)]
pub struct XclipClipboard {
    runner: Arc<dyn CommandRunner>,
}

impl Default for XclipClipboard {
    fn default() -> Self {
        XclipClipboard {
            runner: Arc::new(SystemRunner),
        }
    }
}

impl Clipboard for XclipClipboard {
    fn name(&self) -> &'static str {
        "xclip"
    }

    fn probe(&self) -> Probe {
        require_env("DISPLAY")?;
        require_programs(&["xclip"]).map_err(|mut unavailable| {
            unavailable.blocker = "clipboard_unavailable";
            unavailable
        })
    }

    fn read(&self) -> Result<Option<String>, InjectError> {
        let output = self.runner.run(
            "xclip",
            &["-o", "-selection", "clipboard"],
            None,
            Duration::from_secs(2),
        )?;
        Ok(output.success.then_some(output.stdout))
    }

    fn write(&self, text: &str) -> Result<(), InjectError> {
        // xclip forks a server that owns the selection until another owner takes it.
        self.runner
            .spawn("xclip", &["-selection", "clipboard", "-i"], text)?;
        crate::wait_until_served(self, text, "xclip")
    }

    fn clear(&self) -> Result<(), InjectError> {
        self.write("")
    }
}

//! The wlroots Wayland backend: sway's IPC (swaymsg) finds, focuses and reports windows, wtype sends keys, wl-clipboard serves the clipboard.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::{
    expect_success, require_env, require_programs, Chord, Clipboard, CommandRunner, InjectError,
    KeyInput, Probe, SystemRunner, TargetSpec, Window, WindowControl, COMMAND_TIMEOUT,
};

/// Window control through sway's IPC (needs `SWAYSOCK`).
#[derive(Clone)]
pub struct SwayWindows {
    runner: Arc<dyn CommandRunner>,
}

impl Default for SwayWindows {
    fn default() -> Self {
        SwayWindows {
            runner: Arc::new(SystemRunner),
        }
    }
}

impl SwayWindows {
    fn tree(&self) -> Result<Value, InjectError> {
        let output = expect_success(
            "swaymsg",
            self.runner
                .run("swaymsg", &["-t", "get_tree", "-r"], None, COMMAND_TIMEOUT)?,
        )?;
        serde_json::from_str(&output.stdout).map_err(|err| InjectError::Command {
            program: "swaymsg".into(),
            detail: format!("unreadable tree: {err}"),
        })
    }

    fn windows(&self) -> Result<Vec<(Window, bool)>, InjectError> {
        let mut out = Vec::new();
        let mut stack = vec![self.tree()?];
        while let Some(node) = stack.pop() {
            for key in ["nodes", "floating_nodes"] {
                if let Some(children) = node[key].as_array() {
                    stack.extend(children.iter().cloned());
                }
            }
            let is_window = node["pid"].as_u64().is_some()
                && matches!(node["type"].as_str(), Some("con" | "floating_con"));
            if is_window {
                let window = Window {
                    id: node["id"].as_u64().unwrap_or_default().to_string(),
                    pid: node["pid"].as_u64().map(|p| p as u32),
                    title: node["name"].as_str().unwrap_or_default().to_string(),
                    class: node["app_id"]
                        .as_str()
                        .or_else(|| node["window_properties"]["class"].as_str())
                        .unwrap_or_default()
                        .to_string(),
                };
                out.push((window, node["focused"].as_bool().unwrap_or(false)));
            }
        }
        Ok(out)
    }
}

impl WindowControl for SwayWindows {
    fn name(&self) -> &'static str {
        "sway"
    }

    fn probe(&self) -> Probe {
        require_env("WAYLAND_DISPLAY")?;
        require_env("SWAYSOCK")?;
        require_programs(&["swaymsg"])
    }

    fn find(&self, target: &TargetSpec) -> Result<Vec<Window>, InjectError> {
        let windows: Vec<Window> = self.windows()?.into_iter().map(|(w, _)| w).collect();
        if target.pids.is_empty() && target.ancestors.is_empty() {
            return Ok(windows.into_iter().filter(|w| target.matches(w)).collect());
        }
        // The process family first, then the nearest ancestor that owns a window.
        for generation in target.generations() {
            let spec = target.with_pids(generation);
            let found: Vec<Window> = windows
                .iter()
                .filter(|w| spec.matches(w))
                .cloned()
                .collect();
            if !found.is_empty() {
                return Ok(found);
            }
        }
        Ok(Vec::new())
    }

    fn focused_window(&self) -> Result<Option<Window>, InjectError> {
        Ok(self
            .windows()?
            .into_iter()
            .find(|(_, focused)| *focused)
            .map(|(w, _)| w))
    }

    fn focus(&self, window: &Window) -> Result<(), InjectError> {
        let criteria = format!("[con_id={}] focus", window.id);
        let output = self
            .runner
            .run("swaymsg", &[&criteria], None, COMMAND_TIMEOUT)?;
        expect_success("swaymsg", output).map(|_| ())
    }
}

/// Keyboard input through wtype (virtual-keyboard protocol).
#[derive(Clone)]
pub struct WtypeKeys {
    runner: Arc<dyn CommandRunner>,
}

impl Default for WtypeKeys {
    fn default() -> Self {
        WtypeKeys {
            runner: Arc::new(SystemRunner),
        }
    }
}

impl KeyInput for WtypeKeys {
    fn name(&self) -> &'static str {
        "wtype"
    }

    fn probe(&self) -> Probe {
        require_env("WAYLAND_DISPLAY")?;
        require_programs(&["wtype"])
    }

    fn type_text(&self, text: &str) -> Result<(), InjectError> {
        // wtype drops the first key of a call unless it starts with a sleep; it also cuts
        // text at the first non-ASCII character under the C locale.
        let budget = COMMAND_TIMEOUT + Duration::from_millis(10 * text.chars().count() as u64);
        let output = self
            .runner
            .run("wtype", &["-s", "20", "-"], Some(text), budget)?;
        expect_success("wtype", output).map(|_| ())
    }

    fn key(&self, chord: &Chord) -> Result<(), InjectError> {
        let mut args: Vec<String> = vec!["-s".into(), "20".into()];
        for modifier in &chord.modifiers {
            args.push("-M".into());
            args.push(wtype_modifier(modifier).into());
        }
        args.push("-k".into());
        args.push(chord.key.clone());
        for modifier in chord.modifiers.iter().rev() {
            args.push("-m".into());
            args.push(wtype_modifier(modifier).into());
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = self.runner.run("wtype", &refs, None, COMMAND_TIMEOUT)?;
        expect_success("wtype", output).map(|_| ())
    }
}

fn wtype_modifier(modifier: &str) -> &'static str {
    match modifier {
        "ctrl" => "ctrl",
        "shift" => "shift",
        "alt" => "alt",
        _ => "logo",
    }
}

/// The clipboard through wl-copy / wl-paste.
#[derive(Clone)]
pub struct WlClipboard {
    runner: Arc<dyn CommandRunner>,
}

impl Default for WlClipboard {
    fn default() -> Self {
        WlClipboard {
            runner: Arc::new(SystemRunner),
        }
    }
}

impl Clipboard for WlClipboard {
    fn name(&self) -> &'static str {
        "wl-clipboard"
    }

    fn probe(&self) -> Probe {
        require_env("WAYLAND_DISPLAY")?;
        require_programs(&["wl-copy", "wl-paste"]).map_err(|mut unavailable| {
            unavailable.blocker = "clipboard_unavailable";
            unavailable
        })
    }

    fn read(&self) -> Result<Option<String>, InjectError> {
        let output =
            self.runner
                .run("wl-paste", &["--no-newline"], None, Duration::from_secs(2))?;
        Ok(output.success.then_some(output.stdout))
    }

    fn write(&self, text: &str) -> Result<(), InjectError> {
        self.runner.spawn("wl-copy", &[], text)?;
        // The old selection may still be served for a moment: wait for the new one.
        crate::wait_until_served(self, text, "wl-copy")
    }

    fn clear(&self) -> Result<(), InjectError> {
        let output = self
            .runner
            .run("wl-copy", &["--clear"], None, COMMAND_TIMEOUT)?;
        expect_success("wl-copy", output).map(|_| ())
    }
}

//! OS input injection for Koru: find the IDE window, focus it and verify the focus, then paste (through the clipboard, restoring it) or type the prompt and press the submit chord — never a key into a window that is not the verified target.
//!
//! Three small traits carry the side effects, so that each backend is a combination and
//! every rule of [`deliver`] can be tested with fakes: [`WindowControl`] (find, focus,
//! ask which window has focus), [`KeyInput`] (type text, press chords) and [`Clipboard`].
//! Backends: xdotool + xclip (X11), wtype + swaymsg + wl-clipboard (wlroots Wayland),
//! ydotool (uinput; focus through the X11 or sway window control), enigo (in-process,
//! X11 focus through xdotool). Backends that speak keysyms (the desktop portal, built in
//! the daemon) take them from [`keysym`].

mod chord;
mod command;
mod deliver;
pub mod keysym;
mod target;
mod wayland;
mod x11;
mod ydotool;

#[cfg(feature = "enigo")]
mod enigo_keys;

use std::time::Duration;

pub use chord::{Chord, ChordError};
pub use command::{expect_success, CommandRunner, Output, SystemRunner};
pub use deliver::{
    deliver, focus_verified, press_in_focused, DeliverOptions, Delivery, DeliveryFailure, Method,
    Stage,
};
pub use target::{all_pids, parent_of, process_family, process_tree, TargetSpec};
pub use wayland::{SwayWindows, WlClipboard, WtypeKeys};
pub use x11::{XclipClipboard, XdotoolKeys, XdotoolWindows};
pub use ydotool::YdotoolKeys;

#[cfg(feature = "enigo")]
pub use enigo_keys::EnigoKeys;

/// A top-level window as the window system reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// X11 window id (decimal) or sway container id.
    pub id: String,
    pub pid: Option<u32>,
    pub title: String,
    /// WM_CLASS / app_id.
    pub class: String,
}

/// Why a backend cannot be used here, in the registry's blocker vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// `no_display`, `injector_missing`, `uinput_missing`, `clipboard_unavailable`, …
    pub blocker: &'static str,
    pub detail: String,
}

/// Whether a piece of a backend can work here.
pub type Probe = Result<(), Unavailable>;

/// Finds windows, focuses them and says which one has focus.
pub trait WindowControl: Send + Sync {
    fn name(&self) -> &'static str;
    fn probe(&self) -> Probe;
    /// Windows matching the target, best match first.
    fn find(&self, target: &TargetSpec) -> Result<Vec<Window>, InjectError>;
    /// The window that has keyboard focus now, if any.
    fn focused_window(&self) -> Result<Option<Window>, InjectError>;
    /// Only the id of the focused window: cheaper, used for the repeated focus checks.
    fn focused_id(&self) -> Result<Option<String>, InjectError> {
        Ok(self.focused_window()?.map(|w| w.id))
    }
    /// Asks the window system to focus `window` (verification is the caller's: see [`deliver`]).
    fn focus(&self, window: &Window) -> Result<(), InjectError>;
}

/// Sends keyboard input to whatever has focus.
pub trait KeyInput: Send + Sync {
    fn name(&self) -> &'static str;
    fn probe(&self) -> Probe;
    fn type_text(&self, text: &str) -> Result<(), InjectError>;
    fn key(&self, chord: &Chord) -> Result<(), InjectError>;
}

/// The desktop clipboard.
pub trait Clipboard: Send + Sync {
    fn name(&self) -> &'static str;
    fn probe(&self) -> Probe;
    /// The current text, or `None` when the clipboard is empty or holds no text.
    fn read(&self) -> Result<Option<String>, InjectError>;
    /// Makes `text` the clipboard content and returns once it is served.
    fn write(&self, text: &str) -> Result<(), InjectError>;
    /// Empties the clipboard.
    fn clear(&self) -> Result<(), InjectError>;
}

/// One complete backend: window control, key input and (optionally) a clipboard.
pub struct Injector {
    pub name: &'static str,
    pub windows: Box<dyn WindowControl>,
    pub keys: Box<dyn KeyInput>,
    pub clipboard: Option<Box<dyn Clipboard>>,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injector")
            .field("name", &self.name)
            .field("windows", &self.windows.name())
            .field("keys", &self.keys.name())
            .field("clipboard", &self.clipboard.as_ref().map(|c| c.name()))
            .finish()
    }
}

impl Injector {
    /// Usable here, or why not (window control and keys must work; the clipboard is optional).
    pub fn probe(&self) -> Probe {
        self.windows.probe()?;
        self.keys.probe()
    }

    /// The clipboard, if it works here.
    pub fn usable_clipboard(&self) -> Option<&dyn Clipboard> {
        self.clipboard
            .as_deref()
            .filter(|clipboard| clipboard.probe().is_ok())
    }
}

/// What went wrong injecting input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InjectError {
    #[error("{program} is not installed")]
    ToolMissing { program: String },
    #[error("{program} failed: {detail}")]
    Command { program: String, detail: String },
    #[error("{what} did not finish within {after:?}")]
    Timeout { what: String, after: Duration },
    #[error("no window matches {target}")]
    WindowNotFound { target: String },
    #[error("the focused window is {actual}, not the target {expected}")]
    FocusMismatch { expected: String, actual: String },
    #[error("the clipboard is unavailable: {detail}")]
    ClipboardUnavailable { detail: String },
    #[error("{detail}")]
    Unusable {
        blocker: &'static str,
        detail: String,
    },
    #[error("cannot type: {detail}")]
    Input { detail: String },
}

impl InjectError {
    /// The registry blocker code for this error.
    pub fn blocker(&self) -> &'static str {
        match self {
            InjectError::ToolMissing { .. } => "injector_missing",
            InjectError::Command { .. } | InjectError::Input { .. } => "injector_failed",
            InjectError::Timeout { .. } => "timeout",
            InjectError::WindowNotFound { .. } | InjectError::FocusMismatch { .. } => {
                "focus_mismatch"
            }
            InjectError::ClipboardUnavailable { .. } => "clipboard_unavailable",
            InjectError::Unusable { blocker, .. } => blocker,
        }
    }
}

/// How long one helper program may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a program is on PATH.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths).any(|dir| {
                std::fs::metadata(dir.join(program))
                    .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false)
}

/// `Err(injector_missing)` unless every program is on PATH.
pub fn require_programs(programs: &[&str]) -> Probe {
    match programs.iter().find(|p| !on_path(p)) {
        None => Ok(()),
        Some(missing) => Err(Unavailable {
            blocker: "injector_missing",
            detail: format!("{missing} not found on PATH"),
        }),
    }
}

/// After handing `text` to a clipboard owner process: waits (at most 2 s) until reading
/// the clipboard gives it back, so the paste chord never pastes the old content.
pub fn wait_until_served(
    clipboard: &dyn Clipboard,
    text: &str,
    owner: &str,
) -> Result<(), InjectError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        if clipboard.read()?.as_deref() == Some(text) {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(InjectError::ClipboardUnavailable {
                detail: format!("{owner} did not start serving the new content within 2 s"),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `Err(no_display)` unless the variable is set.
pub fn require_env(variable: &str) -> Probe {
    match std::env::var(variable) {
        Ok(value) if !value.is_empty() => Ok(()),
        _ => Err(Unavailable {
            blocker: "no_display",
            detail: format!("{variable} is not set"),
        }),
    }
}

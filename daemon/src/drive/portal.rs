//! OS injection through the desktop portal (registry interface `os_injector_portal`, GNOME and KDE Plasma on Wayland): the injector traits over one portal session — keys as keysyms, the portal's clipboard, or where the portal has none the system clipboard lent by the target window's plugin (`clipboard` orders) — and a window control that knows only what the target window's own plugin says about its focus, since a Wayland compositor tells no other program which window has focus. A window without a plugin cannot be verified, so it gets no key (`focus_unverifiable`).

use std::sync::Arc;

use koru_injectors::{
    keysym, Chord, Clipboard, InjectError, KeyInput, Probe, TargetSpec, Unavailable, Window,
    WindowControl,
};
use tokio::sync::watch;

use crate::desktop::portal::{PortalError, Session};

/// The registry interface of this injector.
pub const INTERFACE: &str = "os_injector_portal";

/// What a window's plugin last said about its focus, kept current by the state machine as
/// the plugin's focus events arrive; read right before each key that matters.
#[derive(Debug, Clone)]
pub struct PluginFocus {
    pub session_id: String,
    /// The IDE product (`code-server`, `jetbrains-idea`), for messages.
    pub product: String,
    pub pid: Option<u32>,
    focused: watch::Receiver<Option<bool>>,
}

impl PluginFocus {
    pub fn new(
        session_id: String,
        product: String,
        pid: Option<u32>,
        focused: watch::Receiver<Option<bool>>,
    ) -> PluginFocus {
        PluginFocus {
            session_id,
            product,
            pid,
            focused,
        }
    }

    /// What the plugin says now: `None` when it has not said, or is gone.
    pub fn focused(&self) -> Option<bool> {
        // A plugin that disconnected says nothing any more.
        self.focused.has_changed().ok()?;
        *self.focused.borrow()
    }

    fn window(&self) -> Window {
        Window {
            id: format!("plugin:{}", self.session_id),
            pid: self.pid,
            title: format!("the {} window of session {}", self.product, self.session_id),
            class: self.product.clone(),
        }
    }
}

/// How long a window whose plugin reported focus before the desktop's consent dialog has
/// to report it again after the dialog closed: the dialog takes the keyboard focus, and
/// GNOME 43 gives it back 10–35 ms after the portal session starts (seen in a real
/// headless GNOME session, tests/gnome).
pub const FOCUS_BACK_AFTER_CONSENT: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits, at most `within`, for `plugin` to report that its window has focus; whether it
/// did. Polls the live view every 10 ms (this runs on the injection's own thread).
pub fn focus_comes_back(plugin: &PluginFocus, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if plugin.focused() == Some(true) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// What to say when a window's focus cannot be verified.
pub fn unverifiable(detail: &str) -> InjectError {
    InjectError::Unusable {
        blocker: "focus_unverifiable",
        detail: format!(
            "{detail}; on this Wayland desktop no program can see which window has focus, so Koru only types into a window whose Koru plugin reports its focus (install the plugin in that IDE, or send to its session)"
        ),
    }
}

/// Window control from the plugin's focus reports: the one window is the plugin's, focused
/// exactly when the plugin last said so. Nothing can raise a window here.
#[derive(Debug, Clone)]
pub struct PluginWindows {
    pub plugin: Option<PluginFocus>,
}

impl WindowControl for PluginWindows {
    fn name(&self) -> &'static str {
        "plugin focus reports"
    }

    fn probe(&self) -> Probe {
        Ok(())
    }

    fn find(&self, _target: &TargetSpec) -> Result<Vec<Window>, InjectError> {
        match &self.plugin {
            Some(plugin) => Ok(vec![plugin.window()]),
            None => Err(unverifiable("the target window has no Koru plugin")),
        }
    }

    fn focused_window(&self) -> Result<Option<Window>, InjectError> {
        Ok(self
            .plugin
            .as_ref()
            .filter(|plugin| plugin.focused() == Some(true))
            .map(PluginFocus::window))
    }

    fn focus(&self, window: &Window) -> Result<(), InjectError> {
        let Some(plugin) = &self.plugin else {
            return Err(unverifiable("the target window has no Koru plugin"));
        };
        match plugin.focused() {
            Some(true) => Ok(()),
            Some(false) => Err(InjectError::FocusMismatch {
                expected: window.title.clone(),
                actual: "another window (its plugin reports that it lost focus, and no program may raise a window on this desktop: bring it forward and retry)".into(),
            }),
            None => Err(unverifiable(&format!(
                "the plugin of session {} has not said whether its window has focus",
                plugin.session_id
            ))),
        }
    }
}

fn inject_error(error: PortalError) -> InjectError {
    InjectError::Unusable {
        blocker: error.blocker(),
        detail: error.to_string(),
    }
}

/// Keys as keysyms through the portal session (`NotifyKeyboardKeysym`).
#[derive(Debug, Clone)]
pub struct PortalKeys {
    pub session: Arc<Session>,
    pub runtime: tokio::runtime::Handle,
}

impl PortalKeys {
    fn send(&self, events: &[(u32, bool)]) -> Result<(), InjectError> {
        self.runtime.block_on(async {
            for (keysym, pressed) in events {
                self.session
                    .keysym(*keysym, *pressed)
                    .await
                    .map_err(inject_error)?;
            }
            Ok(())
        })
    }
}

impl KeyInput for PortalKeys {
    fn name(&self) -> &'static str {
        "portal keysyms"
    }

    fn probe(&self) -> Probe {
        Ok(())
    }

    fn type_text(&self, text: &str) -> Result<(), InjectError> {
        let events: Vec<(u32, bool)> = text
            .chars()
            .flat_map(|c| {
                let keysym = keysym::for_char(c);
                [(keysym, true), (keysym, false)]
            })
            .collect();
        self.send(&events)
    }

    fn key(&self, chord: &Chord) -> Result<(), InjectError> {
        self.send(&keysym::chord_events(chord)?)
    }
}

/// The clipboard through the portal session (Clipboard interface).
#[derive(Debug, Clone)]
pub struct PortalClipboard {
    pub session: Arc<Session>,
    pub runtime: tokio::runtime::Handle,
}

impl Clipboard for PortalClipboard {
    fn name(&self) -> &'static str {
        "portal clipboard"
    }

    fn probe(&self) -> Probe {
        if self.session.clipboard {
            Ok(())
        } else {
            Err(Unavailable {
                blocker: "clipboard_unavailable",
                detail: "the desktop portal shares no clipboard with Koru's session".into(),
            })
        }
    }

    fn read(&self) -> Result<Option<String>, InjectError> {
        self.runtime
            .block_on(self.session.read_clipboard())
            .map_err(inject_error)
    }

    fn write(&self, text: &str) -> Result<(), InjectError> {
        self.runtime
            .block_on(self.session.set_clipboard(Some(text)))
            .map_err(inject_error)
    }

    fn clear(&self) -> Result<(), InjectError> {
        self.runtime
            .block_on(self.session.set_clipboard(None))
            .map_err(inject_error)
    }
}

/// One read or write of the system clipboard, asked of the daemon's loop (which sends
/// `clipboard` to the window's plugin and hands back its answer).
#[derive(Debug)]
pub struct PluginClipboardRequest {
    pub session_id: String,
    pub action: koru_protocol::ClipboardAction,
    /// The text read (`None`: the clipboard holds none; nothing for a write), or why it
    /// could not be done.
    pub reply: std::sync::mpsc::Sender<Result<Option<String>, String>>,
}

/// Sends a request to the loop; `false` when the loop is gone.
pub type ClipboardSend = Arc<dyn Fn(PluginClipboardRequest) -> bool + Send + Sync>;

/// How long a window's plugin has to answer one `clipboard` order.
const PLUGIN_CLIPBOARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The system clipboard through the target window's own plugin (capability
/// `clipboard_io`): what a portal without a Clipboard interface pastes through. The paste
/// chord then pastes, in that window, what its IDE put on the clipboard.
pub struct PluginClipboard {
    pub session_id: String,
    pub send: ClipboardSend,
}

impl PluginClipboard {
    fn ask(&self, action: koru_protocol::ClipboardAction) -> Result<Option<String>, InjectError> {
        let failed = |detail: String| InjectError::ClipboardUnavailable {
            detail: format!("the window's plugin could not use the clipboard: {detail}"),
        };
        let (reply, answer) = std::sync::mpsc::channel();
        let request = PluginClipboardRequest {
            session_id: self.session_id.clone(),
            action,
            reply,
        };
        if !(self.send)(request) {
            return Err(failed("the daemon is stopping".into()));
        }
        match answer.recv_timeout(PLUGIN_CLIPBOARD_TIMEOUT) {
            Ok(result) => result.map_err(failed),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(failed(format!(
                "no answer within {} s",
                PLUGIN_CLIPBOARD_TIMEOUT.as_secs()
            ))),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(failed("the plugin went away".into()))
            }
        }
    }
}

impl Clipboard for PluginClipboard {
    fn name(&self) -> &'static str {
        "the window plugin's clipboard"
    }

    fn probe(&self) -> Probe {
        Ok(())
    }

    fn read(&self) -> Result<Option<String>, InjectError> {
        self.ask(koru_protocol::ClipboardAction::Read)
    }

    fn write(&self, text: &str) -> Result<(), InjectError> {
        self.ask(koru_protocol::ClipboardAction::Write { text: text.into() })
            .map(|_| ())
    }

    fn clear(&self) -> Result<(), InjectError> {
        self.write("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focus_that_comes_back_after_the_consent_dialog_is_waited_for_and_no_longer() {
        let (tx, rx) = watch::channel(Some(false));
        let plugin = PluginFocus::new("s_1".into(), "code-server".into(), Some(7), rx);
        let giver = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(60));
            tx.send_replace(Some(true));
            tx
        });
        assert!(focus_comes_back(&plugin, std::time::Duration::from_secs(2)));
        let tx = giver.join().unwrap();
        tx.send_replace(Some(false));
        let started = std::time::Instant::now();
        assert!(!focus_comes_back(
            &plugin,
            std::time::Duration::from_millis(100)
        ));
        assert!(started.elapsed() >= std::time::Duration::from_millis(100));
    }

    #[test]
    fn only_a_window_whose_plugin_says_it_has_focus_counts_as_focused() {
        let (tx, rx) = watch::channel(None);
        let windows = PluginWindows {
            plugin: Some(PluginFocus::new(
                "s_1".into(),
                "code-server".into(),
                Some(7),
                rx,
            )),
        };
        let target = windows.find(&TargetSpec::default()).unwrap().remove(0);
        assert_eq!(target.id, "plugin:s_1");
        assert_eq!(windows.focused_window().unwrap(), None, "not said yet");
        assert_eq!(
            windows.focus(&target).unwrap_err().blocker(),
            "focus_unverifiable"
        );
        tx.send_replace(Some(true));
        assert_eq!(windows.focused_window().unwrap(), Some(target.clone()));
        windows.focus(&target).unwrap();
        tx.send_replace(Some(false));
        assert_eq!(windows.focused_window().unwrap(), None);
        assert_eq!(
            windows.focus(&target).unwrap_err().blocker(),
            "focus_mismatch"
        );
        tx.send_replace(Some(true));
        drop(tx);
        assert_eq!(
            windows.focused_window().unwrap(),
            None,
            "a plugin that left says nothing"
        );
    }

    #[test]
    fn a_window_without_a_plugin_is_unverifiable_with_a_hint() {
        let windows = PluginWindows { plugin: None };
        let error = windows.find(&TargetSpec::default()).unwrap_err();
        assert_eq!(error.blocker(), "focus_unverifiable");
        assert!(error.to_string().contains("install the plugin"), "{error}");
    }
}

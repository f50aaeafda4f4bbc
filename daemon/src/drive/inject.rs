//! OS-injection execution for the planner: probing which injector works here, asking whether the screen is locked (async, on the daemon's runtime), then running one delivery (or one submit key press after a plugin's paste) on a blocking thread whose outcome comes back to the state machine as an event. Behind a trait so the state machine's tests use a fake.

use std::sync::Arc;

use koru_injectors::{
    deliver, press_in_focused, Chord, DeliverOptions, Injector, Method, Stage, SwayWindows,
    TargetSpec, WindowControl, WlClipboard, WtypeKeys, XclipClipboard, XdotoolKeys, XdotoolWindows,
    YdotoolKeys,
};
use koru_protocol::{Blocker, WindowTarget};
use tokio::sync::mpsc;

use super::portal::{PluginFocus, PluginWindows, PortalClipboard, PortalKeys};
use crate::desktop::portal::Portal;
use crate::desktop::LockDetector;

/// One OS-injection delivery to run.
#[derive(Debug, Clone)]
pub struct InjectionJob {
    pub drive_id: String,
    pub interface: String,
    pub window: WindowTarget,
    /// Extra pids that belong to the target (the plugin's parent).
    pub extra_pids: Vec<u32>,
    pub text: String,
    pub submit: bool,
    pub paste_chord: String,
    pub submit_chord: String,
    /// `(class regex, chord)`: the first pattern matching the window's class overrides
    /// `paste_chord`.
    pub paste_chord_by_class: Vec<(String, String)>,
    /// The product's window class pattern from the registry policy, if any.
    pub window_class: Option<String>,
    /// What the target window's plugin says about its focus, live (`None`: a window
    /// without a plugin). The portal injector verifies focus only through it.
    pub plugin: Option<PluginFocus>,
    /// How long the drive may still take: the most the desktop's consent dialog is waited for.
    pub time_left_ms: u64,
    /// Whether the target window's plugin reads and writes the system clipboard for the
    /// daemon (`clipboard_io`): the portal pastes through it when it has no clipboard.
    pub plugin_clipboard: bool,
}

/// One submit key press for a plugin route whose registry entry has `submit_key`: the
/// plugin has pasted the prompt into its chat input; the daemon presses the key once into
/// the plugin's window, and only if that window has focus now.
#[derive(Debug, Clone)]
pub struct KeyPressJob {
    pub drive_id: String,
    /// The OS-injection interfaces that may press the key, best first (the first that works
    /// here does), or why none may.
    pub injectors: Result<Vec<String>, Blocker>,
    /// The plugin's window (its pid) and `extra_pids` (the plugin's parent).
    pub window: WindowTarget,
    pub extra_pids: Vec<u32>,
    /// The product's window class pattern from the registry policy, if any.
    pub window_class: Option<String>,
    /// Whether the plugin last said its window has focus (`None`: it did not say).
    pub plugin_focused: Option<bool>,
    /// The key, as the registry writes it (`Return`).
    pub chord: String,
    /// What the plugin says about its focus, live (the portal injector's only way to verify).
    pub plugin: Option<PluginFocus>,
    /// How long the drive may still take.
    pub time_left_ms: u64,
}

/// How far an injection got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reached {
    Nothing,
    Focused,
    Pasted,
    Submitted,
}

/// What an injection did.
#[derive(Debug, Clone)]
pub struct InjectionOutcome {
    pub drive_id: String,
    pub reached: Reached,
    pub error: Option<Blocker>,
    /// How the text went in, when a delivery put it in (pasted, or typed key by key).
    pub text: Option<koru_protocol::TextDelivery>,
}

/// Probes and runs OS injections.
pub trait InjectionRunner: Send + Sync {
    /// Whether the injector behind this registry interface works here.
    fn probe(&self, interface: &str) -> Result<(), Blocker>;
    /// Starts a delivery; its outcome arrives later as an [`InjectionFinished`] report.
    fn start(&self, job: InjectionJob);
    /// Starts a submit key press; its outcome (`reached: Submitted`, or `Pasted` with the
    /// blocker) arrives later as an [`InjectionFinished`] report.
    fn start_key_press(&self, job: KeyPressJob);
    /// Where the desktop portal's consent stands in this daemon (`None`: no portal
    /// injector here).
    fn portal_status(&self) -> Option<koru_protocol::PortalStatus> {
        None
    }
}

/// What an OS injection reports when it has finished (the daemon loop turns it into its
/// own event; this room does not know that event).
#[derive(Debug)]
pub struct InjectionFinished {
    pub outcome: Box<InjectionOutcome>,
}

/// Runs injections for real: the lock check on the runtime, the keys on tokio's blocking
/// pool, reporting to `events`.
pub struct SystemInjections<E> {
    events: mpsc::Sender<E>,
    lock: LockDetector,
    portal: Arc<Portal>,
    /// Probe results by interface, with when they were taken: planning happens for every
    /// drive, and PATH lookups are not free.
    probes: std::sync::Mutex<std::collections::HashMap<String, CachedProbe>>,
}

/// A probe result and when it was taken.
type CachedProbe = (std::time::Instant, Result<(), Blocker>);

/// How long a probe result is reused.
const PROBE_TTL: std::time::Duration = std::time::Duration::from_secs(5);

impl<E> SystemInjections<E> {
    pub fn new(events: mpsc::Sender<E>, lock: LockDetector, portal: Arc<Portal>) -> Self {
        SystemInjections {
            events,
            lock,
            portal,
            probes: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }
}

/// The injector a registry interface stands for.
pub fn injector_for(interface: &str) -> Option<Injector> {
    let on_sway =
        std::env::var_os("SWAYSOCK").is_some() && std::env::var_os("WAYLAND_DISPLAY").is_some();
    Some(match interface {
        "os_injector_xdotool" => Injector {
            name: "xdotool",
            windows: Box::new(XdotoolWindows::default()),
            keys: Box::new(XdotoolKeys::default()),
            clipboard: Some(Box::new(XclipClipboard::default())),
        },
        "os_injector_wtype" => Injector {
            name: "wtype",
            windows: Box::new(SwayWindows::default()),
            keys: Box::new(WtypeKeys::default()),
            clipboard: Some(Box::new(WlClipboard::default())),
        },
        "os_injector_ydotool" => Injector {
            name: "ydotool",
            windows: if on_sway {
                Box::new(SwayWindows::default()) as Box<dyn WindowControl>
            } else {
                Box::new(XdotoolWindows::default())
            },
            keys: Box::new(YdotoolKeys::default()),
            clipboard: if on_sway {
                Some(Box::new(WlClipboard::default()) as Box<dyn koru_injectors::Clipboard>)
            } else {
                Some(Box::new(XclipClipboard::default()))
            },
        },
        "os_injector_enigo" => Injector {
            name: "enigo",
            windows: Box::new(XdotoolWindows::default()),
            keys: Box::new(koru_injectors::EnigoKeys),
            clipboard: Some(Box::new(XclipClipboard::default())),
        },
        _ => return None,
    })
}

impl<E: From<InjectionFinished> + From<super::portal::PluginClipboardRequest> + Send + 'static>
    InjectionRunner for SystemInjections<E>
{
    fn portal_status(&self) -> Option<koru_protocol::PortalStatus> {
        Some(self.portal.status())
    }

    fn probe(&self, interface: &str) -> Result<(), Blocker> {
        if interface == super::portal::INTERFACE {
            // Asked of what the portal last said, never of the bus: this runs on the loop.
            return probe_portal(&self.portal);
        }
        let Ok(mut probes) = self.probes.lock() else {
            return probe_now(interface, None);
        };
        if let Some((at, result)) = probes.get(interface) {
            if at.elapsed() < PROBE_TTL {
                return result.clone();
            }
        }
        let result = probe_now(interface, None);
        probes.insert(
            interface.to_string(),
            (std::time::Instant::now(), result.clone()),
        );
        result
    }

    fn start(&self, job: InjectionJob) {
        let events = self.events.clone();
        let lock = self.lock.clone();
        let to_loop = self.events.clone();
        let clipboard_send: super::portal::ClipboardSend =
            Arc::new(move |request| to_loop.blocking_send(E::from(request)).is_ok());
        let portal = PortalContext {
            portal: self.portal.clone(),
            runtime: tokio::runtime::Handle::current(),
            clipboard_send: Some(clipboard_send),
        };
        tokio::spawn(async move {
            let locked = lock.check().await.locked();
            let drive_id = job.drive_id.clone();
            let outcome =
                tokio::task::spawn_blocking(move || run(&job, locked.as_deref(), Some(&portal)))
                    .await
                    .unwrap_or_else(|panic| panicked(drive_id, Reached::Nothing, &panic));
            let _ = events
                .send(E::from(InjectionFinished {
                    outcome: Box::new(outcome),
                }))
                .await;
        });
    }

    fn start_key_press(&self, job: KeyPressJob) {
        let events = self.events.clone();
        let lock = self.lock.clone();
        let portal = PortalContext {
            portal: self.portal.clone(),
            runtime: tokio::runtime::Handle::current(),
            clipboard_send: None,
        };
        tokio::spawn(async move {
            let locked = lock.check().await.locked();
            let drive_id = job.drive_id.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                press_submit_key(&job, locked.as_deref(), Some(&portal))
            })
            .await
            .unwrap_or_else(|panic| panicked(drive_id, Reached::Pasted, &panic));
            let _ = events
                .send(E::from(InjectionFinished {
                    outcome: Box::new(outcome),
                }))
                .await;
        });
    }
}

/// The outcome of an injection whose thread panicked: failed where it may have got to.
fn panicked(
    drive_id: String,
    reached: Reached,
    panic: &tokio::task::JoinError,
) -> InjectionOutcome {
    tracing::error!(%drive_id, %panic, "an OS injection panicked");
    InjectionOutcome {
        drive_id,
        reached,
        error: Some(Blocker::new(
            "injector_failed",
            format!("the injection stopped unexpectedly: {panic}"),
        )),
        text: None,
    }
}

/// The portal and the runtime its session lives on, for the blocking thread that types;
/// and the way to the loop for a plugin's clipboard.
#[derive(Clone)]
pub struct PortalContext {
    pub portal: Arc<Portal>,
    pub runtime: tokio::runtime::Handle,
    pub clipboard_send: Option<super::portal::ClipboardSend>,
}

/// Whether the portal injector may be planned here: a session bus, a Wayland display, and no
/// word from the portal that it is missing or offers no remote input. Never waits on the
/// bus (the planner runs on the event loop); a consent refused before is no reason not to
/// ask again.
pub fn probe_portal(portal: &Portal) -> Result<(), Blocker> {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if !set("WAYLAND_DISPLAY") {
        return Err(Blocker::new(
            koru_protocol::blocker::NO_DISPLAY,
            "WAYLAND_DISPLAY is not set",
        ));
    }
    if !set("DBUS_SESSION_BUS_ADDRESS") {
        return Err(Blocker::new(
            "bus_unavailable",
            "DBUS_SESSION_BUS_ADDRESS is not set",
        ));
    }
    match portal.last_outcome() {
        Some(Err(error))
            if matches!(
                error.blocker(),
                "portal_missing" | "portal_no_remote_desktop" | "bus_unavailable"
            ) =>
        {
            Err(Blocker::new(error.blocker(), error.to_string()))
        }
        _ => Ok(()),
    }
}

/// The portal injector aimed at the plugin's window: refused without a plugin
/// (`focus_unverifiable`), on a locked screen, or while the plugin says its window lacks
/// focus — all before the desktop is asked anything; then the session (the consent dialog
/// when there is no restore token the desktop honours, waited for at most the drive's time).
fn portal_target(
    plugin: Option<&PluginFocus>,
    plugin_clipboard: bool,
    locked: Option<&str>,
    context: &PortalContext,
    time_left_ms: u64,
) -> Result<(Injector, koru_injectors::Window), Blocker> {
    let as_blocker =
        |error: koru_injectors::InjectError| Blocker::new(error.blocker(), error.to_string());
    let windows = PluginWindows {
        plugin: plugin.cloned(),
    };
    let window = windows
        .find(&TargetSpec::default())
        .map_err(as_blocker)?
        .remove(0);
    if let Some(detail) = locked {
        return Err(Blocker::new("screen_locked", detail));
    }
    windows.focus(&window).map_err(as_blocker)?;
    let consent = std::time::Duration::from_millis(time_left_ms.saturating_sub(500)).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(120),
    );
    let agreed_before = context.portal.status().consent == koru_protocol::PortalConsent::Agreed;
    let session = context
        .runtime
        .block_on(context.portal.session(consent))
        .map_err(|error| {
            let hint = match error.blocker() {
                "consent_pending" => " — allow remote input in the desktop's dialog when Koru asks (kept while the daemon runs; across restarts only where the desktop gives a restore token), then retry",
                _ => "",
            };
            Blocker::new(error.blocker(), format!("{error}{hint}"))
        })?;
    // A new session may have shown the desktop's consent dialog, which took the keyboard
    // focus: the window (focused before it) gets a moment to report its focus back.
    if !agreed_before {
        if let Some(plugin) = plugin {
            if !super::portal::focus_comes_back(plugin, super::portal::FOCUS_BACK_AFTER_CONSENT) {
                tracing::info!(session = %plugin.session_id, "the window did not report its focus back after the portal session started");
            }
        }
    }
    let injector = Injector {
        name: "portal",
        windows: Box::new(windows),
        keys: Box::new(PortalKeys {
            session: session.clone(),
            runtime: context.runtime.clone(),
        }),
        clipboard: Some(portal_clipboard(session, plugin, plugin_clipboard, context)),
    };
    Ok((injector, window))
}

/// The clipboard the portal pastes through: the portal's own when it shares one with the
/// session; else the system clipboard through the target window's plugin, when it offers
/// it; else the portal's, which then says it has none (short ASCII is typed).
fn portal_clipboard(
    session: Arc<crate::desktop::portal::Session>,
    plugin: Option<&PluginFocus>,
    plugin_clipboard: bool,
    context: &PortalContext,
) -> Box<dyn koru_injectors::Clipboard> {
    match (session.clipboard, plugin, &context.clipboard_send) {
        (false, Some(plugin), Some(send)) if plugin_clipboard => {
            Box::new(super::portal::PluginClipboard {
                session_id: plugin.session_id.clone(),
                send: send.clone(),
            })
        }
        _ => Box::new(PortalClipboard {
            session,
            runtime: context.runtime.clone(),
        }),
    }
}

/// Whether the injector behind this registry interface works here, asked now.
fn probe_now(interface: &str, portal: Option<&PortalContext>) -> Result<(), Blocker> {
    if interface == super::portal::INTERFACE {
        return match portal {
            Some(context) => probe_portal(&context.portal),
            None => Err(Blocker::new(
                koru_protocol::blocker::INJECTOR_MISSING,
                "no desktop portal client here",
            )),
        };
    }
    let injector = injector_for(interface).ok_or_else(|| {
        Blocker::new(
            koru_protocol::blocker::INJECTOR_MISSING,
            format!("this build has no injector for {interface}"),
        )
    })?;
    injector
        .probe()
        .map_err(|unavailable| Blocker::new(unavailable.blocker, unavailable.detail))
}

/// Presses a route's submit key once into the plugin's window, synchronously: with the
/// first injector that works here, only when the plugin does not say its window lost focus,
/// the screen is not locked (`locked`: why it is, as [`LockDetector::check`] found) and the
/// window that has focus belongs to the plugin's process family (as OS injection finds it).
/// Never moves focus; any doubt leaves the prompt unsent.
pub fn press_submit_key(
    job: &KeyPressJob,
    locked: Option<&str>,
    portal: Option<&PortalContext>,
) -> InjectionOutcome {
    const NOT_PRESSED: &str = "the submit key was not pressed";
    let failed = |blocker: Blocker| InjectionOutcome {
        drive_id: job.drive_id.clone(),
        reached: Reached::Pasted,
        error: Some(Blocker::new(
            &blocker.code,
            format!("{}; {NOT_PRESSED}", blocker.detail),
        )),
        text: None,
    };
    if job.plugin_focused == Some(false) {
        return failed(Blocker::new(
            koru_protocol::blocker::FOCUS_MISMATCH,
            "the plugin reports that its window does not have focus",
        ));
    }
    let interfaces = match &job.injectors {
        Ok(interfaces) => interfaces,
        Err(blocker) => return failed(blocker.clone()),
    };
    let mut refusals = Vec::new();
    let chosen = interfaces
        .iter()
        .find(|interface| match probe_now(interface, portal) {
            Ok(()) => true,
            Err(blocker) => {
                refusals.push(blocker);
                false
            }
        });
    let Some(chosen) = chosen else {
        // The telling refusal: an injector for the display this desktop has but whose
        // program is missing, rather than one for a display it does not have.
        let telling = refusals
            .iter()
            .position(|b| b.code != koru_protocol::blocker::NO_DISPLAY)
            .unwrap_or(0);
        let first = refusals.into_iter().nth(telling).unwrap_or_else(|| {
            Blocker::new(
                koru_protocol::blocker::INJECTOR_MISSING,
                "no OS injector is configured",
            )
        });
        return failed(Blocker::new(
            &first.code,
            format!(
                "no OS injector can press the submit key here ({})",
                first.detail
            ),
        ));
    };
    let chord = match job.chord.parse::<Chord>() {
        Ok(chord) => chord,
        Err(error) => {
            return failed(Blocker::new(
                "injector_failed",
                format!("the submit key {:?}: {error}", job.chord),
            ))
        }
    };
    let (injector, windows) = match (chosen.as_str(), portal) {
        (super::portal::INTERFACE, Some(context)) => {
            match portal_target(
                job.plugin.as_ref(),
                false,
                locked,
                context,
                job.time_left_ms,
            ) {
                Ok((injector, window)) => (injector, vec![window]),
                Err(blocker) => return failed(blocker),
            }
        }
        _ => {
            let Some(injector) = injector_for(chosen) else {
                return failed(Blocker::new(
                    koru_protocol::blocker::INJECTOR_MISSING,
                    format!("this build has no injector for {chosen}"),
                ));
            };
            let spec = match target_spec(&job.window, &job.extra_pids, job.window_class.as_deref())
            {
                Ok(spec) => spec,
                Err(blocker) => return failed(blocker),
            };
            if let Some(detail) = locked {
                return failed(Blocker::new("screen_locked", detail));
            }
            let windows = match injector.windows.find(&spec) {
                Ok(windows) => windows,
                Err(error) => return failed(Blocker::new(error.blocker(), error.to_string())),
            };
            (injector, windows)
        }
    };
    match press_in_focused(&injector, &windows, &chord) {
        Ok(window) => {
            tracing::info!(drive_id = %job.drive_id, injector = injector.name, window = %window.id, title = %window.title, key = %job.chord, "pressed the submit key into the plugin's focused window");
            InjectionOutcome {
                drive_id: job.drive_id.clone(),
                reached: Reached::Submitted,
                error: None,
                text: None,
            }
        }
        Err(error) => failed(Blocker::new(error.blocker(), error.to_string())),
    }
}

/// Finds the target window and delivers, synchronously; `locked` says why the screen is
/// locked, if it is (nothing is typed then).
pub fn run(
    job: &InjectionJob,
    locked: Option<&str>,
    portal: Option<&PortalContext>,
) -> InjectionOutcome {
    let failed = |reached: Reached, blocker: Blocker| InjectionOutcome {
        drive_id: job.drive_id.clone(),
        reached,
        error: Some(blocker),
        text: None,
    };
    let (injector, window) = match (job.interface.as_str(), portal) {
        (super::portal::INTERFACE, Some(context)) => {
            match portal_target(
                job.plugin.as_ref(),
                job.plugin_clipboard,
                locked,
                context,
                job.time_left_ms,
            ) {
                Ok(found) => found,
                Err(blocker) => return failed(Reached::Nothing, blocker),
            }
        }
        _ => {
            let Some(injector) = injector_for(&job.interface) else {
                return failed(
                    Reached::Nothing,
                    Blocker::new(
                        "injector_missing",
                        format!("no injector for {}", job.interface),
                    ),
                );
            };
            let window = match find_target(
                &injector,
                &job.window,
                &job.extra_pids,
                job.window_class.as_deref(),
                locked,
            ) {
                Ok(window) => window,
                Err(blocker) => return failed(Reached::Nothing, blocker),
            };
            (injector, window)
        }
    };
    let paste_chord = job
        .paste_chord_by_class
        .iter()
        .find(|(pattern, _)| regex::Regex::new(pattern).is_ok_and(|r| r.is_match(&window.class)))
        .map(|(_, chord)| chord.as_str())
        .unwrap_or(&job.paste_chord);
    let chord = |raw: &str| -> Result<Chord, Blocker> {
        raw.parse::<Chord>()
            .map_err(|err| Blocker::new("injector_failed", err.to_string()))
    };
    let options = match (chord(paste_chord), chord(&job.submit_chord)) {
        (Ok(paste_chord), Ok(submit_chord)) => DeliverOptions {
            method: Method::Auto,
            paste_chord,
            submit_chord: job.submit.then_some(submit_chord),
            ..DeliverOptions::default()
        },
        (Err(blocker), _) | (_, Err(blocker)) => return failed(Reached::Nothing, blocker),
    };
    tracing::info!(drive_id = %job.drive_id, injector = injector.name, window = %window.id, title = %window.title, "injecting");
    match deliver(&injector, &window, &job.text, &options) {
        Ok(delivery) => InjectionOutcome {
            drive_id: job.drive_id.clone(),
            reached: match delivery.stage {
                Stage::Submitted => Reached::Submitted,
                Stage::Pasted => Reached::Pasted,
                Stage::Focused => Reached::Focused,
                Stage::Nothing => Reached::Nothing,
            },
            error: None,
            text: match delivery.method {
                koru_injectors::Method::Type => Some(koru_protocol::TextDelivery::Typed),
                _ => Some(koru_protocol::TextDelivery::Pasted),
            },
        },
        Err(failure) => failed(
            match failure.reached {
                Stage::Nothing => Reached::Nothing,
                Stage::Focused => Reached::Focused,
                Stage::Pasted | Stage::Submitted => Reached::Pasted,
            },
            Blocker::new(failure.error.blocker(), failure.error.to_string()),
        ),
    }
}

/// What identifies the windows of `window` (pid and/or title, plus `extra_pids` of the same
/// IDE, narrowed by the product's `window_class`).
fn target_spec(
    window: &WindowTarget,
    extra_pids: &[u32],
    window_class: Option<&str>,
) -> Result<TargetSpec, Blocker> {
    let mut spec = TargetSpec::default();
    if let Some(pid) = window.pid {
        spec = TargetSpec::for_pid(pid);
    }
    for pid in extra_pids {
        // The plugin's parent (e.g. the IDE process that owns the window).
        if !spec.ancestors.contains(pid) {
            spec.ancestors.insert(0, *pid);
        }
    }
    if let Some(title) = &window.title {
        match regex::Regex::new(title) {
            Ok(regex) => spec.title = Some(regex),
            Err(err) => {
                return Err(Blocker::new(
                    "focus_mismatch",
                    format!("invalid window title pattern: {err}"),
                ))
            }
        }
    }
    if let Some(class) = &window_class {
        match regex::Regex::new(class) {
            Ok(regex) => spec.class = Some(regex),
            Err(err) => {
                return Err(Blocker::new(
                    "focus_mismatch",
                    format!("invalid window class pattern: {err}"),
                ))
            }
        }
    }
    if spec.is_empty() {
        return Err(Blocker::new(
            "focus_mismatch",
            "no window pid or title to target",
        ));
    }
    Ok(spec)
}

/// The one window `window` (pid and/or title, plus `extra_pids` of the same IDE, narrowed by
/// the product's `window_class`) names, refusing when the screen is locked (`locked`).
fn find_target(
    injector: &Injector,
    window: &WindowTarget,
    extra_pids: &[u32],
    window_class: Option<&str>,
    locked: Option<&str>,
) -> Result<koru_injectors::Window, Blocker> {
    let spec = target_spec(window, extra_pids, window_class)?;
    if let Some(detail) = locked {
        return Err(Blocker::new("screen_locked", detail));
    }
    let windows = match injector.windows.find(&spec) {
        Ok(windows) => windows,
        Err(error) => return Err(Blocker::new(error.blocker(), error.to_string())),
    };
    windows
        .into_iter()
        .next()
        .ok_or_else(|| Blocker::new("focus_mismatch", format!("no window matches {spec}")))
}

/// A focus-only job: raise a session's window (recovery action `focus_window`).
#[derive(Debug, Clone)]
pub struct FocusJob {
    pub interface: String,
    pub window: WindowTarget,
    pub extra_pids: Vec<u32>,
}

/// Raises and focuses the job's window and checks the window system agrees; types nothing.
/// Refused while the screen is locked (`locked`).
pub fn focus_window(job: &FocusJob, locked: Option<&str>) -> Result<String, Blocker> {
    let injector = injector_for(&job.interface).ok_or_else(|| {
        Blocker::new(
            "injector_missing",
            format!("no injector for {}", job.interface),
        )
    })?;
    let window = find_target(&injector, &job.window, &job.extra_pids, None, locked)?;
    koru_injectors::focus_verified(&injector, &window, std::time::Duration::from_millis(1500))
        .map_err(|error| Blocker::new(error.blocker(), error.to_string()))?;
    Ok(format!(
        "focused window {} ({:?}) with {}",
        window.id, window.title, injector.name
    ))
}

/// A runner for tests that never touches the desktop: probes answer from a list and
/// started jobs are recorded for the test to finish by hand.
#[derive(Default, Clone)]
pub struct RecordingInjections {
    pub usable: Arc<std::sync::Mutex<Vec<String>>>,
    pub started: Arc<std::sync::Mutex<Vec<InjectionJob>>>,
    pub key_presses: Arc<std::sync::Mutex<Vec<KeyPressJob>>>,
}

impl InjectionRunner for RecordingInjections {
    fn probe(&self, interface: &str) -> Result<(), Blocker> {
        if self
            .usable
            .lock()
            .map(|u| u.iter().any(|i| i == interface))
            .unwrap_or(false)
        {
            Ok(())
        } else {
            Err(Blocker::new("no_display", "test: not usable"))
        }
    }

    fn start(&self, job: InjectionJob) {
        if let Ok(mut started) = self.started.lock() {
            started.push(job);
        }
    }

    fn start_key_press(&self, job: KeyPressJob) {
        if let Ok(mut presses) = self.key_presses.lock() {
            presses.push(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_job(
        plugin_focused: Option<bool>,
        injectors: Result<Vec<String>, Blocker>,
    ) -> KeyPressJob {
        KeyPressJob {
            drive_id: "d_1".into(),
            injectors,
            window: WindowTarget {
                pid: Some(4242),
                title: None,
            },
            extra_pids: Vec::new(),
            window_class: None,
            plugin_focused,
            chord: "Return".into(),
            plugin: None,
            time_left_ms: 10_000,
        }
    }

    #[test]
    fn no_key_is_pressed_for_a_window_its_plugin_says_is_unfocused_or_a_policy_forbids() {
        let unfocused = press_submit_key(
            &key_job(Some(false), Ok(vec!["os_injector_xdotool".into()])),
            None,
            None,
        );
        assert_eq!(unfocused.reached, Reached::Pasted);
        let blocker = unfocused.error.unwrap();
        assert_eq!(blocker.code, "focus_mismatch");
        assert!(
            blocker.detail.contains("does not have focus")
                && blocker.detail.ends_with("; the submit key was not pressed"),
            "{}",
            blocker.detail
        );

        let forbidden = press_submit_key(
            &key_job(
                Some(true),
                Err(Blocker::new("policy_forbidden", "the policy says no")),
            ),
            None,
            None,
        );
        assert_eq!(forbidden.reached, Reached::Pasted);
        assert_eq!(forbidden.error.unwrap().code, "policy_forbidden");

        let unknown = press_submit_key(
            &key_job(None, Ok(vec!["os_injector_teleport".into()])),
            None,
            None,
        );
        let blocker = unknown.error.unwrap();
        assert_eq!(blocker.code, "injector_missing");
        assert!(
            blocker
                .detail
                .starts_with("no OS injector can press the submit key here"),
            "{}",
            blocker.detail
        );
    }
}

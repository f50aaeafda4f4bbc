//! Doctor's judgement: turns the registry and the probes' facts into a status, blocker and recovery hint for every interface, and ranked drive paths for every connected session. Pure: no I/O.

use std::collections::HashMap;

use koru_protocol::{ObserverMode, SessionInfo};
use koru_registry::{
    effective_policy, rank_routes, BlockerCode, DisplayServer, Family, Interface, Platform,
    Registry, RouteKind, Transport,
};

use super::probe::Facts;
use super::report::{
    BlockerReport, ChatCheck, DaemonReport, DoctorReport, EnvironmentReport, InterfaceCheck,
    RecoveryHint, RegistryReport, RouteCheck, SessionPaths, Status, Summary, REPORT_SCHEMA_VERSION,
};

/// The environment's verdict on one interface, before sessions are considered.
#[derive(Debug, Clone)]
struct Verdict {
    status: Status,
    blocker: Option<(BlockerCode, String)>,
    facts: Vec<String>,
}

impl Verdict {
    fn ok(facts: Vec<String>) -> Verdict {
        Verdict {
            status: Status::Ok,
            blocker: None,
            facts,
        }
    }

    fn blocked(
        status: Status,
        code: BlockerCode,
        detail: impl Into<String>,
        facts: Vec<String>,
    ) -> Verdict {
        Verdict {
            status,
            blocker: Some((code, detail.into())),
            facts,
        }
    }
}

/// What doctor was asked to report.
pub struct Inputs<'a> {
    pub registry: &'a Registry,
    pub registry_diagnostics: Vec<String>,
    pub facts: &'a Facts,
    /// Per-session registries (with the session's project layer), by session id.
    pub session_registries: HashMap<String, (Registry, String)>,
    /// Only these interfaces (empty: all).
    pub only: Vec<String>,
}

/// Builds the whole report.
pub fn evaluate(inputs: &Inputs<'_>) -> DoctorReport {
    let facts = inputs.facts;
    let registry = inputs.registry;
    let plugins: Vec<&SessionInfo> = facts
        .daemon
        .sessions
        .iter()
        .filter(|s| s.role == koru_protocol::Role::Plugin)
        .collect();

    let mut environment_verdicts: HashMap<String, Verdict> = HashMap::new();
    for interface in registry.interfaces() {
        environment_verdicts.insert(interface.id.clone(), environment_verdict(interface, facts));
    }

    let sessions: Vec<SessionPaths> = plugins
        .iter()
        .map(|session| {
            let (session_registry, project_layer) = inputs
                .session_registries
                .get(&session.session_id)
                .map(|(r, p)| (r, Some(p.clone())))
                .unwrap_or((registry, None));
            session_paths(
                session,
                session_registry,
                project_layer,
                facts,
                &environment_verdicts,
            )
        })
        .collect();

    let mut interfaces = Vec::new();
    for interface in registry.interfaces() {
        if !inputs.only.is_empty() && !inputs.only.contains(&interface.id) {
            continue;
        }
        let mut verdict =
            interface_verdict(interface, facts, &plugins, &sessions, &environment_verdicts);
        if interface.surface == "notifications" && registry.policy.notify.on.is_empty() {
            verdict = Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::Disabled,
                "turned off in the registry policy (`notify.on` is empty)",
                verdict.facts,
            );
        }
        interfaces.push(check_of(interface, verdict));
    }
    interfaces.sort_by_key(|check| family_rank(&check.family));

    let count = |status: Status| interfaces.iter().filter(|c| c.status == status).count();
    let sessions_with_a_drive_path = sessions
        .iter()
        .filter(|s| s.routes.iter().any(|r| r.usable))
        .count();
    let registry_diagnostics = inputs.registry_diagnostics.clone();
    let daemon_registry_diagnostics = facts
        .daemon
        .status
        .as_ref()
        .map(|s| s.registry.diagnostics.clone())
        .unwrap_or_default();
    let (exit_code, verdict) = if !facts.daemon.running() {
        (
            2,
            "the daemon is not running: no drive path; start it with `koru daemon`".to_string(),
        )
    } else if sessions_with_a_drive_path == 0 {
        let why = if plugins.is_empty() {
            "no IDE plugin is connected"
        } else {
            "no connected session has a usable route"
        };
        (2, format!("no drive path: {why}"))
    } else if count(Status::Degraded) + count(Status::Unavailable) > 0
        || !registry_diagnostics.is_empty()
        || !daemon_registry_diagnostics.is_empty()
    {
        (
            1,
            format!(
                "degraded: {sessions_with_a_drive_path} session(s) have a drive path; {} interface(s) need attention",
                count(Status::Degraded) + count(Status::Unavailable)
            ),
        )
    } else {
        (0, "all applicable interfaces work".to_string())
    };

    DoctorReport {
        schema_version: REPORT_SCHEMA_VERSION,
        koru_version: env!("CARGO_PKG_VERSION").to_string(),
        generated_at_ms: facts.now_ms,
        daemon: DaemonReport {
            socket: facts.daemon.socket.clone(),
            running: facts.daemon.running(),
            pid: facts.daemon.status.as_ref().map(|s| s.pid),
            version: facts.daemon.status.as_ref().map(|s| s.version.clone()),
            error: facts.daemon.error.clone(),
            registry_diagnostics: daemon_registry_diagnostics,
            refused_handshakes: facts
                .daemon
                .status
                .as_ref()
                .map(|s| {
                    s.refused_handshakes
                        .iter()
                        .map(|r| {
                            let who = r
                                .client
                                .as_ref()
                                .map(|c| format!("{} {}", c.name, c.version))
                                .unwrap_or_else(|| "a peer".into());
                            let product = r
                                .product
                                .as_ref()
                                .map(|p| format!(" in {p}"))
                                .unwrap_or_default();
                            format!("{who}{product}: {} ({})", r.message, r.code)
                        })
                        .collect()
                })
                .unwrap_or_default(),
        },
        environment: EnvironmentReport {
            platform: std::env::consts::OS.to_string(),
            display_server: facts.display_server().to_string(),
            display: facts.env.get("DISPLAY").cloned(),
            wayland_display: facts.env.get("WAYLAND_DISPLAY").cloned(),
            dbus_session: match &facts.dbus {
                None => "not configured".into(),
                Some(Ok(_)) => "reachable".into(),
                Some(Err(err)) => format!("unreachable: {err}"),
            },
        },
        registry: RegistryReport {
            layers: registry
                .layers
                .iter()
                .map(|l| match l.layer {
                    koru_registry::Layer::BuiltIn => "built-in".to_string(),
                    layer => format!(
                        "{}: {}{}",
                        layer.as_str(),
                        l.file,
                        if l.applied {
                            ""
                        } else {
                            " (left out: has errors)"
                        }
                    ),
                })
                .collect(),
            interfaces: registry.interfaces().len(),
            diagnostics: registry_diagnostics,
        },
        wired: Vec::new(),
        summary: Summary {
            ok: count(Status::Ok),
            degraded: count(Status::Degraded),
            unavailable: count(Status::Unavailable),
            not_applicable: count(Status::NotApplicable),
            sessions_with_a_drive_path,
            exit_code,
            verdict,
        },
        interfaces,
        sessions,
    }
}

fn family_rank(family: &str) -> usize {
    Family::ALL
        .iter()
        .position(|f| *f == family)
        .unwrap_or(usize::MAX)
}

fn check_of(interface: &Interface, verdict: Verdict) -> InterfaceCheck {
    let recovery = verdict
        .blocker
        .as_ref()
        .map(|(code, _)| hints(interface, *code))
        .unwrap_or_default();
    InterfaceCheck {
        id: interface.id.clone(),
        family: interface.family.to_string(),
        description: interface.description.clone(),
        status: verdict.status,
        authority: interface.authority.to_string(),
        verification: interface.verification.mode.to_string(),
        route: interface.route.map(|r| r.to_string()),
        blocker: verdict.blocker.map(|(code, detail)| BlockerReport {
            code: code.to_string(),
            detail,
        }),
        recovery,
        facts: verdict.facts,
    }
}

fn hints(interface: &Interface, code: BlockerCode) -> Vec<RecoveryHint> {
    interface
        .recovery_for(code)
        .into_iter()
        .map(|r| RecoveryHint {
            id: r.id.clone(),
            label: r.label.clone(),
            does: r.does.clone(),
            safe_to_repeat: r.safe_to_repeat,
            run: r.run.map(|action| action.as_str().to_string()),
        })
        .collect()
}

/// The blocker a missing requirement maps to, preferring one the interface lists.
fn blocker_for_missing(interface: &Interface, preferred: &[BlockerCode]) -> BlockerCode {
    preferred
        .iter()
        .copied()
        .find(|code| interface.blocking_modes.contains(code))
        .unwrap_or(preferred[0])
}

/// What this machine's environment says about an interface (features, platform, display,
/// binaries, variables, paths, D-Bus, stores), independent of sessions.
fn environment_verdict(interface: &Interface, facts: &Facts) -> Verdict {
    let mut found = Vec::new();
    if !interface.enabled {
        return Verdict::blocked(
            Status::NotApplicable,
            BlockerCode::Disabled,
            "disabled in the registry (`enabled: false`)",
            found,
        );
    }
    if let Some(platform) = facts.platform {
        if !interface.applies_to.platforms.contains(&platform) {
            return Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::PlatformUnsupported,
                format!("not available on {}", platform_name(platform)),
                found,
            );
        }
    }
    for feature in &interface.requires.features {
        if !facts.features.contains(feature) {
            // Only a registry layer can name a feature no build has: the built-in
            // registry's are all in every build (a unit test keeps it so).
            return Verdict::blocked(
                Status::Unavailable,
                BlockerCode::FeatureMissing,
                format!(
                    "this koru build ({}) has no `{feature}` (it has {})",
                    env!("CARGO_PKG_VERSION"),
                    facts.features.join(", ")
                ),
                found,
            );
        }
    }
    let displays = &interface.applies_to.display_servers;
    if !displays.contains(&DisplayServer::Any) {
        let current = facts.display_server();
        let wanted: Vec<&str> = displays.iter().map(|d| d.as_str()).collect();
        if current != "none" && !wanted.contains(&current) {
            return Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::NoDisplay,
                format!("needs {}; this session is {current}", wanted.join(" or ")),
                found,
            );
        }
    }
    for alternatives in &interface.requires.env {
        let names: Vec<&str> = alternatives.split('|').collect();
        match names.iter().find_map(|n| facts.env.get(*n).map(|v| (n, v))) {
            Some((name, value)) => found.push(format!("{name}={value}")),
            None => {
                let code = if names
                    .iter()
                    .any(|n| *n == "DISPLAY" || *n == "WAYLAND_DISPLAY")
                {
                    BlockerCode::NoDisplay
                } else if names.iter().any(|n| n.starts_with("DBUS_")) {
                    BlockerCode::BusUnavailable
                } else {
                    blocker_for_missing(interface, &[BlockerCode::CapabilityMissing])
                };
                return Verdict::blocked(
                    Status::Unavailable,
                    code,
                    format!("{} is not set", names.join(" or ")),
                    found,
                );
            }
        }
    }
    for alternatives in &interface.requires.binaries {
        let names: Vec<&str> = alternatives.split('|').collect();
        let present = names.iter().find_map(|n| {
            facts
                .binaries
                .get(*n)
                .filter(|b| b.path.is_some())
                .map(|b| (n, b))
        });
        match present {
            Some((name, binary)) => found.push(match &binary.version {
                Some(version) => format!("{name}: {version}"),
                None => format!(
                    "{name} at {}",
                    binary
                        .path
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
            }),
            None => {
                let code = blocker_for_missing(
                    interface,
                    &[
                        BlockerCode::InjectorMissing,
                        BlockerCode::ClipboardUnavailable,
                    ],
                );
                return Verdict::blocked(
                    Status::Unavailable,
                    code,
                    format!("{} not found on PATH", names.join(" or ")),
                    found,
                );
            }
        }
    }
    for path in &interface.requires.paths {
        if facts.paths.get(path) != Some(&true) {
            let code = if path.contains("uinput") {
                BlockerCode::UinputMissing
            } else {
                blocker_for_missing(interface, &[BlockerCode::StoreMissing])
            };
            return Verdict::blocked(
                Status::Unavailable,
                code,
                format!("{path} does not exist"),
                found,
            );
        }
        found.push(format!("{path} exists"));
    }
    if let Some(verdict) = desktop_service_verdict(interface, facts, &mut found) {
        return verdict;
    }
    if interface.transport == Transport::Dbus {
        match &facts.dbus {
            Some(Ok(name)) => found.push(format!("session bus reachable (as {name})")),
            Some(Err(err)) => {
                return Verdict::blocked(
                    Status::Unavailable,
                    BlockerCode::BusUnavailable,
                    format!("session bus unreachable: {err}"),
                    found,
                )
            }
            None => {}
        }
    }
    if !interface.locations.is_empty() {
        return location_verdict(interface, facts, found);
    }
    if interface.route == Some(RouteKind::TerminalInput) {
        found.extend(terminal_proof(interface, facts));
    }
    if interface.transport == Transport::Kitty {
        if let Some(verdict) = kitty_verdict(facts, &mut found) {
            return verdict;
        }
    }
    Verdict::ok(found)
}

/// A kitty route is degraded while a kitty runs with its remote control off (its agents
/// cannot be reached) or not answering; each kitty found is said.
fn kitty_verdict(facts: &Facts, found: &mut Vec<String>) -> Option<Verdict> {
    let kitties = facts.kitty.as_ref()?;
    if kitties.is_empty() {
        found.push("no kitty is running".into());
        return None;
    }
    let mut off = Vec::new();
    for kitty in kitties {
        match (&kitty.listen_on, &kitty.answer) {
            (Some(listen_on), Ok(windows)) => found.push(format!(
                "kitty (pid {}): remote control answers at {listen_on} ({windows} window(s))",
                kitty.pid
            )),
            (None, _) => off.push(format!(
                "kitty (pid {}) has its remote control off",
                kitty.pid
            )),
            (Some(listen_on), Err(error)) => off.push(format!(
                "kitty (pid {}): remote control at {listen_on} does not answer: {error}",
                kitty.pid
            )),
        }
    }
    if off.is_empty() {
        return None;
    }
    Some(Verdict::blocked(
        Status::Degraded,
        BlockerCode::RemoteControlOff,
        format!(
            "{}: agents in it cannot be reached; start kitty with `-o allow_remote_control=socket-only --listen-on unix:/tmp/kitty-{{kitty_pid}}`, or put `allow_remote_control socket-only` and `listen_on unix:/tmp/kitty` in kitty.conf and restart it",
            off.join("; ")
        ),
        std::mem::take(found),
    ))
}

/// What will prove a terminal route's drives here: the agent's hook when Koru's is
/// installed in its settings, else its transcript.
fn terminal_proof(interface: &Interface, facts: &Facts) -> Option<String> {
    let product = interface.applies_to.products.first()?;
    let hook = facts.agent_hooks.get(product)?;
    let settings = hook.settings.display();
    Some(match &hook.events {
        Ok(events) if !events.is_empty() => format!(
            "Koru's hooks are installed in {settings} ({}): each prompt is proven by the agent's own prompt hook",
            events.join(", ")
        ),
        Ok(_) => format!(
            "no Koru hook in {settings}: each prompt is proven by the agent's transcript (`koru hook install {product}` gives the quicker proof)"
        ),
        Err(error) => format!(
            "{settings} cannot be read ({error}): each prompt is proven by the agent's transcript"
        ),
    })
}

/// The verdict on a desktop service doctor asked about itself (by the interface's
/// `surface`), or `None` for every other interface (or when it was not asked).
fn desktop_service_verdict(
    interface: &Interface,
    facts: &Facts,
    found: &mut Vec<String>,
) -> Option<Verdict> {
    match interface.surface.as_str() {
        "screen_lock" => {
            let report = facts.lock.as_ref()?;
            let found = std::mem::take(found);
            Some(match report.answer {
                Some(_) => {
                    let mut found = found;
                    found.push(report.describe());
                    Verdict::ok(found)
                }
                None => Verdict::blocked(
                    Status::Degraded,
                    BlockerCode::BusUnavailable,
                    format!(
                        "{}; a locked screen is not detected before OS injection (keys still go only to a verified window)",
                        report.describe()
                    ),
                    found,
                ),
            })
        }
        "notifications" => {
            let found = std::mem::take(found);
            Some(match facts.notifications.as_ref()? {
                Ok(Some(probe)) => {
                    let mut found = found;
                    found.push(probe.describe());
                    Verdict::ok(found)
                }
                Ok(None) => Verdict::blocked(
                    Status::Unavailable,
                    BlockerCode::NotificationsUnavailable,
                    format!(
                        "no notification service on the session bus: nobody owns {} and nothing starts it; drives that need you are not announced (the daemon tries once and stays quiet until a service starts)",
                        crate::desktop::notifications::NAME
                    ),
                    found,
                ),
                Err(error) => Verdict::blocked(
                    Status::Unavailable,
                    BlockerCode::BusUnavailable,
                    format!("session bus unreachable: {error}"),
                    found,
                ),
            })
        }
        "remote_desktop_portal" => {
            let mut found = std::mem::take(found);
            let live = facts
                .daemon
                .status
                .as_ref()
                .and_then(|status| status.portal.clone());
            Some(match facts.portal.as_ref()? {
                Ok(portal) => {
                    found.push(portal.offer.describe());
                    found.push(PORTAL_FOCUS_NOTE.into());
                    portal_consent_verdict(portal, live.as_ref(), found)
                }
                Err(error) => {
                    let code = match error.blocker() {
                        "portal_no_remote_desktop" => BlockerCode::PortalNoRemoteDesktop,
                        "bus_unavailable" => BlockerCode::BusUnavailable,
                        // `portal_missing`, and a portal that answers the probe wrongly.
                        _ => BlockerCode::PortalMissing,
                    };
                    Verdict::blocked(Status::Unavailable, code, error.to_string(), found)
                }
            })
        }
        _ => None,
    }
}

/// Where the desktop's consent to the portal's remote input stands: the running daemon's
/// own session when there is a daemon (`status.result.portal`), else the restore token on
/// disk. Nothing is asked of the desktop here.
fn portal_consent_verdict(
    portal: &super::probe::PortalFact,
    live: Option<&koru_protocol::PortalStatus>,
    mut found: Vec<String>,
) -> Verdict {
    use koru_protocol::PortalConsent;
    let since = |status: &koru_protocol::PortalStatus| {
        status
            .since_ms
            .and_then(|ms| chrono::DateTime::from_timestamp_millis(ms as i64))
            .map(|at| format!(" (since {} UTC)", at.format("%H:%M:%S")))
            .unwrap_or_default()
    };
    let said = |status: &koru_protocol::PortalStatus| {
        status
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default()
    };
    match live.map(|status| (status.consent, status)) {
        Some((PortalConsent::Agreed, status)) => {
            found.push(format!(
                "the running daemon holds a remote-input session the desktop agreed to{}",
                since(status)
            ));
            found.push(if status.remembered == Some(true) {
                format!(
                    "the desktop gave a restore token, kept in {}: the next daemon start is not asked again",
                    portal.token_path
                )
            } else {
                "this desktop's portal gave no restore token: it asks again at each daemon start (GNOME 43 does so for remote input)".into()
            });
            Verdict::ok(found)
        }
        Some((PortalConsent::Asking, status)) => Verdict::blocked(
            Status::Degraded,
            BlockerCode::ConsentPending,
            format!(
                "the desktop's consent dialog is up now{}: answer it on the desktop (a drive waits for it)",
                since(status)
            ),
            found,
        ),
        Some((PortalConsent::Refused, status)) => Verdict::blocked(
            Status::Degraded,
            BlockerCode::ConsentPending,
            format!(
                "the desktop did not let the running daemon send keys{}{}; the next drive through the portal asks again",
                since(status),
                said(status)
            ),
            found,
        ),
        Some((PortalConsent::Unavailable, status)) => Verdict::blocked(
            Status::Degraded,
            BlockerCode::ConsentPending,
            format!(
                "the running daemon could not use the portal{}{}; it tries again at the next drive",
                since(status),
                said(status)
            ),
            found,
        ),
        // No daemon, or no drive has used the portal since it started: the token on disk.
        _ if portal.has_token => {
            found.push(format!(
                "the desktop agreed before and gave a restore token (kept in {}): the first drive through the portal starts without asking",
                portal.token_path
            ));
            Verdict::ok(found)
        }
        _ => Verdict::blocked(
            Status::Degraded,
            BlockerCode::ConsentPending,
            format!(
                "the desktop has not agreed yet{}: the first drive through the portal shows its consent dialog; where the portal gives a restore token it is kept in {} and later daemon starts are not asked, where it gives none (GNOME 43) it asks at each daemon start",
                if live.is_some() {
                    " in this daemon's life"
                } else {
                    ""
                },
                portal.token_path
            ),
            found,
        ),
    }
}

/// How the portal injector verifies focus, for doctor's facts.
const PORTAL_FOCUS_NOTE: &str = "focus is verified through the window's Koru plugin (a window without one gets no key: focus_unverifiable)";

fn platform_name(platform: Platform) -> &'static str {
    platform.as_str()
}

fn location_verdict(interface: &Interface, facts: &Facts, mut found: Vec<String>) -> Verdict {
    let mut present = 0;
    let mut unreadable = Vec::new();
    let mut dirs = 0;
    for location in &interface.locations {
        let Some(fact) = facts.locations.get(location) else {
            continue;
        };
        if !fact.exists {
            continue;
        }
        present += 1;
        if !fact.readable {
            unreadable.push(format!(
                "{}: {}",
                fact.expanded,
                fact.error.clone().unwrap_or_else(|| "unreadable".into())
            ));
            continue;
        }
        dirs += fact.dirs + 1;
        if fact.unreadable > 0 {
            unreadable.push(format!(
                "{}: {} file(s) or folder(s) this user cannot read, e.g. {}",
                fact.expanded,
                fact.unreadable,
                fact.first_unreadable.as_deref().unwrap_or("?")
            ));
        }
        let newest = fact
            .newest_mtime_ms
            .map(|t| format!(", newest {} ago", ago(facts.now_ms, t)))
            .unwrap_or_default();
        found.push(format!(
            "{}: {}{} file(s){newest}",
            fact.expanded,
            if fact.truncated { "≥" } else { "" },
            fact.files
        ));
    }
    // Folders IDE windows told the running daemon about (their own chat stores, wherever
    // the install keeps them) count as much as the registry's locations.
    for observer in facts
        .daemon
        .status
        .iter()
        .flat_map(|status| status.observers.iter())
        .filter(|o| o.store == interface.id && o.announced && o.exists)
    {
        present += 1;
        found.push(format!(
            "{}: {} file(s) (announced by {})",
            observer.root,
            observer.files,
            observer.announced_by.join(", ")
        ));
    }
    if present == 0 {
        let expanded: Vec<String> = interface
            .locations
            .iter()
            .map(|l| {
                facts
                    .locations
                    .get(l)
                    .map(|f| f.expanded.clone())
                    .unwrap_or_else(|| l.clone())
            })
            .collect();
        if interface.family == Family::ArtifactExchange {
            found.push(format!("{} (created on first use)", expanded.join(", ")));
            return Verdict::ok(found);
        }
        // The running daemon reads the store the moment it appears: say so.
        let waiting = facts
            .daemon
            .status
            .iter()
            .flat_map(|status| status.observers.iter())
            .any(|o| o.store == interface.id && o.mode == Some(ObserverMode::Waiting));
        let listed = some_of(&expanded, 3);
        let mut detail = if waiting {
            format!(
                "nothing at {listed} yet; the running daemon is waiting for it to appear and will read it at once"
            )
        } else {
            format!("nothing at {listed}")
        };
        if listed.len() < expanded.join(", ").len() {
            detail.push_str(&format!(
                " (`koru registry show {}` lists every location)",
                interface.id
            ));
        }
        return Verdict::blocked(
            Status::NotApplicable,
            BlockerCode::StoreMissing,
            detail,
            found,
        );
    }
    if interface.family == Family::Observation {
        // What the running daemon found while reading the store.
        for observer in facts
            .daemon
            .status
            .iter()
            .flat_map(|status| status.observers.iter())
            .filter(|o| o.store == interface.id)
        {
            if let (true, Some(error)) = (observer.exists, &observer.watch_error) {
                let cost = observer
                    .poll
                    .as_ref()
                    .map(|poll| {
                        format!(
                            " (polling now: every {:.1} s, the last pass {:.1} ms over {} file(s))",
                            poll.every_ms as f64 / 1000.0,
                            poll.last_pass_us as f64 / 1000.0,
                            poll.files
                        )
                    })
                    .unwrap_or_default();
                unreadable.push(format!("{}: not watched: {error}{cost}", observer.root));
            }
            for problem in &observer.problems {
                let kind = match problem.kind {
                    koru_protocol::StoreProblemKind::Unreadable => "unreadable",
                    koru_protocol::StoreProblemKind::Malformed => "malformed",
                    koru_protocol::StoreProblemKind::Busy => "busy",
                };
                unreadable.push(format!("{} {kind}: {}", problem.path, problem.detail));
            }
        }
        if let Some(limit) = facts.inotify_max_user_watches {
            if dirs > limit {
                unreadable.push(format!(
                    "{dirs} folder(s) to watch but fs.inotify.max_user_watches is {limit}: \
                     raise it (sysctl fs.inotify.max_user_watches=524288) or rely on the rescan"
                ));
            }
        }
    }
    if !unreadable.is_empty() {
        return Verdict::blocked(
            Status::Degraded,
            BlockerCode::StoreUnreadable,
            unreadable.join("; "),
            found,
        );
    }
    Verdict::ok(found)
}

/// The first `shown` items, then how many more (a store with one location per install
/// layout has dozens).
fn some_of(items: &[String], shown: usize) -> String {
    if items.len() <= shown + 1 {
        return items.join(", ");
    }
    format!(
        "{} and {} more",
        items[..shown].join(", "),
        items.len() - shown
    )
}

fn ago(now_ms: u64, then_ms: u64) -> String {
    crate::table::age(now_ms, then_ms)
}

/// The interface's overall verdict: the environment's, refined by the daemon and sessions.
fn interface_verdict(
    interface: &Interface,
    facts: &Facts,
    plugins: &[&SessionInfo],
    sessions: &[SessionPaths],
    environment: &HashMap<String, Verdict>,
) -> Verdict {
    let base = environment[&interface.id].clone();
    if base.status != Status::Ok {
        return base;
    }
    let needs_daemon = interface.id == "daemon_socket"
        || interface.depends_on.iter().any(|d| d == "daemon_socket")
        || (interface.family == Family::IdeControl && interface.transport == Transport::UnixSocket);
    if needs_daemon && !facts.daemon.running() {
        let detail = facts
            .daemon
            .error
            .clone()
            .unwrap_or_else(|| format!("no daemon at {}", facts.daemon.socket));
        return Verdict::blocked(
            Status::Unavailable,
            BlockerCode::DaemonDown,
            detail,
            base.facts,
        );
    }
    let mut found = base.facts;
    // An HTTP service of the daemon works only when the daemon was started with --http.
    if interface.transport == Transport::Http
        && interface.direction == koru_registry::Direction::Serve
    {
        match facts.daemon.status.as_ref().and_then(|s| s.http.as_ref()) {
            Some(http) => found.push(format!(
                "served at {}",
                http.mcp_url.trim_end_matches("/mcp")
            )),
            None => return Verdict::blocked(
                Status::Unavailable,
                BlockerCode::Disabled,
                "the daemon does not serve HTTP; start it with `koru daemon --http 127.0.0.1:PORT`",
                found,
            ),
        }
    }
    // An IDE terminal route needs a window whose plugin reaches its terminals.
    if interface.transport == Transport::IdeTerminal && facts.daemon.running() {
        let reaching: Vec<String> = plugins
            .iter()
            .filter(|s| {
                s.capabilities
                    .contains(&koru_protocol::Capability::TerminalIo)
            })
            .map(|s| {
                format!(
                    "{} reports {} terminal(s)",
                    describe_session(s),
                    s.terminals.len()
                )
            })
            .collect();
        if reaching.is_empty() {
            return Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::PluginMissing,
                "no IDE window whose Koru plugin reaches its terminals (capability `terminal_io`) is connected",
                found,
            );
        }
        found.extend(reaching);
    }
    // A chat store: read only while the daemon observes (`--no-observe` turns it off).
    if interface.family == Family::Observation {
        if let Some(status) = facts.daemon.status.as_ref() {
            if !status.observing && status.observers.is_empty() {
                return Verdict::blocked(
                    Status::Unavailable,
                    BlockerCode::Disabled,
                    "the daemon does not observe chat stores (it was started with --no-observe); \
                     restart it without that flag",
                    found,
                );
            }
            found.push("observed by the running daemon".into());
        }
    }
    // A plugin socket: which plugins of its family are connected, and who was refused.
    if interface.family == Family::IdeControl && interface.transport == Transport::UnixSocket {
        let matching: Vec<&&SessionInfo> = plugins
            .iter()
            .filter(|s| applies_to_session(interface, s))
            .collect();
        for session in &matching {
            found.push(describe_session(session));
        }
        let refused: Vec<String> = facts
            .daemon
            .status
            .iter()
            .flat_map(|s| s.refused_handshakes.iter())
            .filter(|r| r.code == koru_protocol::ErrorCode::VersionMismatch)
            .filter(|r| {
                r.product.as_ref().is_some_and(|p| {
                    interface
                        .applies_to
                        .products
                        .iter()
                        .any(|pattern| koru_registry::product_matches(pattern, &p.to_string()))
                })
            })
            .map(|r| {
                let client = r
                    .client
                    .as_ref()
                    .map(|c| format!("{} {}", c.name, c.version))
                    .unwrap_or_default();
                let offered = r
                    .protocol
                    .map(|p| format!("protocol {}..{}", p.min, p.max))
                    .unwrap_or_default();
                format!(
                    "{client} ({}) offered {offered}; this daemon speaks {}..{}",
                    r.product
                        .as_ref()
                        .map(|p| p.to_string())
                        .unwrap_or_default(),
                    koru_protocol::MIN_PROTOCOL_VERSION,
                    koru_protocol::PROTOCOL_VERSION
                )
            })
            .collect();
        if !refused.is_empty() {
            return Verdict::blocked(
                Status::Degraded,
                BlockerCode::VersionMismatch,
                refused.join("; "),
                found,
            );
        }
        if matching.is_empty() {
            return Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::PluginMissing,
                "no plugin of this family is connected",
                found,
            );
        }
        return Verdict::ok(found);
    }
    // A terminal agent's own server (opencode's): no plugin; its drives go to whichever
    // agent of the product serves one when the drive is made.
    if interface.surface == "terminal_agent" && interface.transport == Transport::Http {
        found.push(
            "prompts are posted to the agent's own server when it runs with one (opencode: `--port 0` for any free port, which Koru finds); proof: the user message on its event stream"
                .into(),
        );
        return Verdict::ok(found);
    }
    if interface.id == crate::observe::stores::opencode::STORE {
        found.push(
            "followed live for every opencode that serves HTTP (started with `--port`), while it runs"
                .into(),
        );
    }
    // A plugin route: judged by the sessions it applies to.
    if matches!(
        interface.route,
        Some(RouteKind::NativeSend | RouteKind::PluginDrive)
    ) {
        let candidates: Vec<&RouteCheck> = sessions
            .iter()
            .flat_map(|s| s.routes.iter())
            .filter(|r| r.interface == interface.id)
            .collect();
        if candidates.is_empty() {
            return Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::PluginMissing,
                "no connected session this route applies to",
                found,
            );
        }
        let usable = candidates.iter().filter(|r| r.usable).count();
        found.push(format!(
            "usable for {usable} of {} session(s)",
            candidates.len()
        ));
        // A route into an agent's own chat panel needs that agent's extension, which most
        // windows rightly lack: without it the route does not apply (nothing to fix).
        let lacks_extension = |r: &&RouteCheck| {
            r.blocker
                .as_ref()
                .is_some_and(|b| b.code == BlockerCode::CapabilityMissing.to_string())
        };
        if usable == 0
            && !interface.applies_to.agents.is_empty()
            && candidates.iter().all(lacks_extension)
        {
            return Verdict::blocked(
                Status::NotApplicable,
                BlockerCode::CapabilityMissing,
                format!(
                    "no connected window has {}'s own chat panel (its extension's commands)",
                    interface.applies_to.agents.join(" or ")
                ),
                found,
            );
        }
        if usable == 0 {
            let first = candidates[0].blocker.clone();
            let code = first
                .as_ref()
                .and_then(|b| {
                    serde_json::from_value(serde_json::Value::String(b.code.clone())).ok()
                })
                .unwrap_or(BlockerCode::CapabilityMissing);
            return Verdict::blocked(
                Status::Degraded,
                code,
                first.map(|b| b.detail).unwrap_or_default(),
                found,
            );
        }
        return Verdict::ok(found);
    }
    Verdict::ok(found)
}

fn applies_to_session(interface: &Interface, session: &SessionInfo) -> bool {
    let product = session
        .ide
        .as_ref()
        .map(|i| i.product.to_string())
        .unwrap_or_default();
    interface
        .applies_to
        .products
        .iter()
        .any(|pattern| koru_registry::product_matches(pattern, &product))
}

fn describe_session(session: &SessionInfo) -> String {
    let (product, version) = session
        .ide
        .as_ref()
        .map(|i| (i.product.to_string(), i.version.clone()))
        .unwrap_or_default();
    format!(
        "{} {product} {version} via {} {} (protocol {})",
        session.session_id, session.client.name, session.client.version, session.protocol
    )
}

fn session_paths(
    session: &SessionInfo,
    registry: &Registry,
    project_layer: Option<String>,
    facts: &Facts,
    environment: &HashMap<String, Verdict>,
) -> SessionPaths {
    let product = session
        .ide
        .as_ref()
        .map(|i| i.product.to_string())
        .unwrap_or_else(|| "other".into());
    let platform = facts.platform.unwrap_or(Platform::Linux);
    let policy = effective_policy(registry, &product);
    // Whether a drive that must submit goes to a new chat here (the planner's rule): a
    // route of the product submits with a key nothing here can press, and the policy says so.
    let new_chat_stands_in = policy.new_chat_when_key_unpressable
        && rank_routes(registry, &product, platform)
            .iter()
            .any(|i| i.submit_key.is_some())
        && submit_key_blocker(registry, facts, environment, policy.allow_os_injection).is_some();
    // Routes that do not apply here at all (another display server) are not candidates:
    // the planner would not try them.
    // The IDE chat's routes in the planner's order, then those into an agent's own chat
    // panel (`applies_to.agents`), which only drives naming that agent use.
    let (chat_routes, agent_routes): (Vec<_>, Vec<_>) = rank_routes(registry, &product, platform)
        .into_iter()
        .partition(|interface| interface.applies_to.agents.is_empty());
    let routes = chat_routes
        .into_iter()
        .chain(agent_routes)
        .filter(|interface| {
            environment
                .get(&interface.id)
                .is_none_or(|verdict| verdict.status != Status::NotApplicable)
        })
        .enumerate()
        .map(|(index, interface)| {
            let blocker: Option<(BlockerCode, String)> = match interface.route {
                Some(RouteKind::OsInjection) => {
                    let verdict = environment
                        .get(&interface.id)
                        .cloned()
                        .unwrap_or_else(|| environment_verdict(interface, facts));
                    if !policy.allow_os_injection {
                        Some((
                            BlockerCode::PolicyForbidden,
                            format!("the registry policy forbids OS injection for {product}"),
                        ))
                    } else if verdict.status != Status::Ok
                        && !matches!(verdict.blocker, Some((BlockerCode::ConsentPending, _)))
                    {
                        // A consent not given yet is asked for at the first drive.
                        verdict.blocker
                    } else if session.window.pid.is_none() {
                        Some((
                            BlockerCode::FocusMismatch,
                            "the plugin did not report a window pid to target".into(),
                        ))
                    } else {
                        None
                    }
                }
                _ => {
                    let verdict = environment_verdict(interface, facts);
                    if verdict.status != Status::Ok {
                        verdict.blocker
                    } else if let Some(missing) =
                        interface.requires.capabilities.iter().find(|c| {
                            !crate::drive::planner::has_capability(&session.capabilities, c)
                        })
                    {
                        Some((
                            BlockerCode::CapabilityMissing,
                            format!("the plugin does not report `{missing}`"),
                        ))
                    } else if interface.submit_key.is_some() {
                        submit_key_blocker(registry, facts, environment, policy.allow_os_injection)
                    } else {
                        None
                    }
                }
            };
            let note = route_note(interface, new_chat_stands_in);
            RouteCheck {
                rank: index + 1,
                route: interface.route.map(|r| r.to_string()).unwrap_or_default(),
                interface: interface.id.clone(),
                usable: blocker.is_none(),
                verification: interface.verification.mode.to_string(),
                recovery: blocker
                    .as_ref()
                    .map(|(code, _)| hints(interface, *code))
                    .unwrap_or_default(),
                blocker: blocker.map(|(code, detail)| BlockerReport {
                    code: code.to_string(),
                    detail,
                }),
                note,
            }
        })
        .collect();
    SessionPaths {
        session_id: session.session_id.clone(),
        product,
        ide_version: session
            .ide
            .as_ref()
            .map(|i| i.version.clone())
            .unwrap_or_default(),
        plugin: format!("{} {}", session.client.name, session.client.version),
        protocol: session.protocol,
        workspace_folders: session.window.workspace_folders.clone(),
        window_pid: session.window.pid,
        project_layer,
        chat: session.chat_readiness.as_ref().map(|readiness| ChatCheck {
            ready: readiness.ready,
            reason: readiness.reason.clone(),
            recovery: if readiness.ready {
                Vec::new()
            } else {
                registry
                    .interfaces()
                    .iter()
                    .filter(|i| !i.recovery_for(BlockerCode::ChatNotReady).is_empty())
                    .take(1)
                    .flat_map(|i| hints(i, BlockerCode::ChatNotReady))
                    .collect()
            },
        }),
        routes,
    }
}

/// Why a route whose submit is a key press by the daemon cannot submit here: the policy
/// forbids OS input, or no OS injector works (the first one's blocker says why).
fn submit_key_blocker(
    registry: &Registry,
    facts: &Facts,
    environment: &HashMap<String, Verdict>,
    allow_os_injection: bool,
) -> Option<(BlockerCode, String)> {
    if !allow_os_injection {
        return Some((
            BlockerCode::PolicyForbidden,
            "the route submits with a key press by the daemon, and the registry policy forbids OS input for this product".into(),
        ));
    }
    let verdicts: Vec<Verdict> = registry
        .interfaces()
        .iter()
        .filter(|i| i.route == Some(RouteKind::OsInjection))
        .map(|i| {
            environment
                .get(&i.id)
                .cloned()
                .unwrap_or_else(|| environment_verdict(i, facts))
        })
        .collect();
    if verdicts.iter().any(|v| v.status == Status::Ok) {
        return None;
    }
    let why = verdicts
        .iter()
        .find_map(|v| v.blocker.clone())
        .map(|(_, detail)| detail)
        .unwrap_or_else(|| "none applies here".into());
    Some((
        BlockerCode::InjectorMissing,
        format!("the route submits with a key press by the daemon, and no OS injector works here ({why})"),
    ))
}

/// What a user should know about a plugin route beyond usable or not.
/// `new_chat_stands_in`: no OS injector can press the product's submit key here and the
/// policy sends such drives to a new chat.
fn route_note(interface: &koru_registry::Interface, new_chat_stands_in: bool) -> Option<String> {
    let mut notes = Vec::new();
    if crate::drive::planner::only_new_chat(interface) {
        notes.push(if new_chat_stands_in {
            "for drives that ask for a new chat (--new-chat), and here for every drive that must submit: no OS injector can press the submit key, so each opens a new chat (policy new_chat_when_key_unpressable)".to_string()
        } else {
            "only for drives that ask for a new chat (--new-chat)".to_string()
        });
    }
    if !interface.applies_to.agents.is_empty() {
        notes.push(format!(
            "only for drives to {} (`koru send --agent {}`) where no terminal runs it",
            interface.applies_to.agents.join(" or "),
            interface.applies_to.agents[0]
        ));
    }
    match (&interface.submit_key, interface.agent_record_ms) {
        (Some(key), Some(ms)) => notes.push(format!(
            "submits with one {key} key press by the daemon into the verified window; done only once {} records the prompt (its hook or transcript) within {:.0} s, else needs_user",
            interface.applies_to.agents.join(" or "),
            ms as f64 / 1000.0
        )),
        (Some(key), None) => notes.push(format!(
            "submits with one {key} key press by the daemon into the verified window (unverified until observed)"
        )),
        _ => {}
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(readiness: Option<koru_protocol::ChatReadiness>) -> SessionInfo {
        serde_json::from_value(serde_json::json!({
            "session_id": "s_1", "role": "plugin", "client": {"name": "koru-vscode", "version": "0.1.0"},
            "ide": {"product": "code-server", "version": "1.139.1", "app_name": "code-server"},
            "window": {"pid": 7, "workspace_folders": ["/w"]},
            "capabilities": [{"kind": "command", "id": "workbench.action.chat.open"}],
            "protocol": 1, "connected_at_ms": 0, "last_seen_ms": 0, "health": "active", "chat": "unknown",
            "chat_readiness": readiness
        }))
        .unwrap()
    }

    fn paths_of(session: &SessionInfo) -> SessionPaths {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        session_paths(
            session,
            &loaded.registry,
            None,
            &Facts::default(),
            &HashMap::new(),
        )
    }

    #[test]
    fn a_session_whose_chat_is_not_ready_says_why_and_what_to_do() {
        let paths = paths_of(&session(Some(koru_protocol::ChatReadiness {
            ready: false,
            reason: Some("no language model is available to the chat".into()),
        })));
        let chat = paths.chat.expect("the session reports its chat");
        assert!(!chat.ready);
        assert_eq!(
            chat.reason.as_deref(),
            Some("no language model is available to the chat")
        );
        assert_eq!(
            chat.recovery
                .iter()
                .map(|h| h.id.as_str())
                .collect::<Vec<_>>(),
            ["make_chat_ready"]
        );
    }

    #[test]
    fn a_ready_chat_needs_no_hint_and_a_silent_plugin_shows_nothing() {
        let ready = paths_of(&session(Some(koru_protocol::ChatReadiness {
            ready: true,
            reason: None,
        })));
        assert!(ready.chat.as_ref().unwrap().ready);
        assert!(ready.chat.unwrap().recovery.is_empty());
        assert!(paths_of(&session(None)).chat.is_none());
    }

    #[test]
    fn cursor_routes_say_which_drives_they_serve_and_a_key_press_route_needs_an_injector() {
        let mut cursor = session(None);
        cursor.ide.as_mut().unwrap().product = "cursor".parse().unwrap();
        cursor.capabilities = ["composer.createNew", "composer.focusComposer"]
            .into_iter()
            .map(|id| koru_protocol::Capability::Command { id: id.into() })
            .collect();
        // No display here (default facts): no OS injector works.
        let paths = paths_of(&cursor);
        let route = |id: &str| {
            paths
                .routes
                .iter()
                .find(|r| r.interface == id)
                .unwrap_or_else(|| panic!("{id} in {:?}", paths.routes))
                .clone()
        };
        let new_chat = route("cursor_native_new_chat");
        assert!(new_chat.usable);
        assert!(
            new_chat.note.as_deref().unwrap().contains(
                "here for every drive that must submit: no OS injector can press the submit key"
            ),
            "{:?}",
            new_chat.note
        );
        let paste = route("cursor_plugin_drive");
        assert!(
            !paste.usable,
            "the key press cannot happen without an injector"
        );
        let blocker = paste.blocker.unwrap();
        assert_eq!(blocker.code, "injector_missing");
        assert!(
            blocker
                .detail
                .starts_with("the route submits with a key press by the daemon"),
            "{}",
            blocker.detail
        );
        assert!(paste.note.unwrap().contains("key press by the daemon"));

        // With the policy switched off the new-chat route serves only --new-chat drives.
        let off = koru_registry::load(&[
            koru_registry::LayerSource::built_in(),
            koru_registry::LayerSource {
                layer: koru_registry::Layer::User,
                name: "user.yaml".into(),
                path: None,
                text: "policy:\n  new_chat_when_key_unpressable: false\n".into(),
            },
        ]);
        let paths = session_paths(
            &cursor,
            &off.registry,
            None,
            &Facts::default(),
            &HashMap::new(),
        );
        let new_chat = paths
            .routes
            .iter()
            .find(|r| r.interface == "cursor_native_new_chat")
            .unwrap();
        assert_eq!(
            new_chat.note.as_deref(),
            Some("only for drives that ask for a new chat (--new-chat)")
        );
    }

    #[test]
    fn a_terminal_route_says_whether_tmux_is_here_and_what_will_prove_its_drives() {
        use super::super::probe::{BinaryFact, HookFact};
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let claude = loaded.registry.get("tmux_claude_code").unwrap();
        let codex = loaded.registry.get("tmux_codex").unwrap();
        let mut facts = Facts::default();
        let missing = environment_verdict(claude, &facts);
        assert_eq!(missing.status, Status::Unavailable);
        assert_eq!(
            missing.blocker.as_ref().map(|(code, _)| *code),
            Some(BlockerCode::InjectorMissing)
        );
        facts.binaries.insert(
            "tmux".into(),
            BinaryFact {
                path: Some("/usr/bin/tmux".into()),
                version: Some("tmux 3.3a".into()),
            },
        );
        facts.agent_hooks.insert(
            "claude-code".into(),
            HookFact {
                settings: "/home/me/.claude/settings.json".into(),
                events: Ok(vec!["UserPromptSubmit".into(), "Stop".into()]),
            },
        );
        facts.agent_hooks.insert(
            "codex".into(),
            HookFact {
                settings: "/home/me/.codex/hooks.json".into(),
                events: Ok(Vec::new()),
            },
        );
        let hooked = environment_verdict(claude, &facts);
        assert_eq!(hooked.status, Status::Ok);
        assert_eq!(hooked.facts[0], "tmux: tmux 3.3a");
        assert!(
            hooked.facts[1].contains("proven by the agent's own prompt hook"),
            "{:?}",
            hooked.facts
        );
        let unhooked = environment_verdict(codex, &facts);
        assert!(
            unhooked.facts[1].contains("proven by the agent's transcript")
                && unhooked.facts[1].contains("koru hook install codex"),
            "{:?}",
            unhooked.facts
        );
    }

    #[test]
    fn a_chat_store_a_window_announced_counts_where_the_registry_locations_are_empty() {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let copilot = loaded.registry.get("chat_history_copilot_json").unwrap();
        let mut facts = Facts::default();
        assert_eq!(
            environment_verdict(copilot, &facts).status,
            Status::NotApplicable,
            "nothing at the default locations"
        );
        let status: koru_protocol::StatusInfo = serde_json::from_value(serde_json::json!({
            "version": "0", "pid": 1, "socket": "/s", "protocol": {"min": 1, "max": 1},
            "started_at_ms": 0, "plugins": 1, "controllers": 0, "drives_active": 0, "drives_total": 0,
            "observers": [{"store": "chat_history_copilot_json",
                "root": "/home/me/.local/share/code-server/User/workspaceStorage/abc/chatSessions",
                "exists": true, "watched": true, "files": 2, "announced": true, "announced_by": ["s_1"]}]
        }))
        .unwrap();
        facts.daemon.status = Some(status);
        let verdict = environment_verdict(copilot, &facts);
        assert_eq!(verdict.status, Status::Ok);
        assert!(
            verdict
                .facts
                .iter()
                .any(|f| f.ends_with("chatSessions: 2 file(s) (announced by s_1)")),
            "{:?}",
            verdict.facts
        );
    }

    /// A running daemon's status with HTTP served or not and observing on or off.
    fn daemon_status(http: bool, observing: bool) -> koru_protocol::StatusInfo {
        let mut status: koru_protocol::StatusInfo = serde_json::from_value(serde_json::json!({
            "version": "0", "pid": 1, "socket": "/s", "protocol": {"min": 1, "max": 1},
            "started_at_ms": 0, "plugins": 0, "controllers": 1, "drives_active": 0, "drives_total": 0,
            "observing": observing
        }))
        .unwrap();
        status.http = http.then(|| koru_protocol::HttpStatus {
            mcp_url: "http://127.0.0.1:1/mcp".into(),
            token: "t".into(),
            token_file: "/t".into(),
        });
        status
    }

    /// Facts of this build with a daemon running as `status`, and every store present.
    fn facts_of_this_build(
        registry: &Registry,
        status: Option<koru_protocol::StatusInfo>,
    ) -> Facts {
        let mut facts = Facts {
            features: super::super::probe::BUILD_FEATURES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Facts::default()
        };
        for location in registry.interfaces().iter().flat_map(|i| &i.locations) {
            facts.locations.insert(
                location.clone(),
                super::super::probe::LocationFact {
                    expanded: location.clone(),
                    exists: true,
                    readable: true,
                    ..Default::default()
                },
            );
        }
        facts.daemon.status = status;
        facts
    }

    fn verdicts(facts: &Facts, registry: &Registry) -> HashMap<String, Verdict> {
        let environment: HashMap<String, Verdict> = registry
            .interfaces()
            .iter()
            .map(|i| (i.id.clone(), environment_verdict(i, facts)))
            .collect();
        registry
            .interfaces()
            .iter()
            .map(|i| {
                let verdict = interface_verdict(i, facts, &[], &[], &environment);
                (i.id.clone(), verdict)
            })
            .collect()
    }

    #[test]
    fn no_built_in_interface_is_missing_from_this_build() {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        for interface in loaded.registry.interfaces() {
            for feature in &interface.requires.features {
                assert!(
                    super::super::probe::BUILD_FEATURES.contains(&feature.as_str()),
                    "{} requires `{feature}`, which this build does not list",
                    interface.id
                );
            }
            assert!(
                !interface
                    .blocking_modes
                    .contains(&BlockerCode::FeatureMissing),
                "{} says it can be missing from this build",
                interface.id
            );
        }
        for status in [
            None,
            Some(daemon_status(false, false)),
            Some(daemon_status(true, true)),
        ] {
            let facts = facts_of_this_build(&loaded.registry, status);
            for (id, verdict) in verdicts(&facts, &loaded.registry) {
                assert!(
                    !matches!(verdict.blocker, Some((BlockerCode::FeatureMissing, _))),
                    "{id}: {:?}",
                    verdict.blocker
                );
            }
        }
    }

    #[test]
    fn an_ide_terminal_route_needs_a_connected_window_whose_plugin_reaches_its_terminals() {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let registry = &loaded.registry;
        let interface = registry.get("ide_terminal_claude_code").unwrap();
        let judge = |facts: &Facts, plugins: &[&SessionInfo]| {
            let environment: HashMap<String, Verdict> = registry
                .interfaces()
                .iter()
                .map(|i| (i.id.clone(), environment_verdict(i, facts)))
                .collect();
            interface_verdict(interface, facts, plugins, &[], &environment)
        };
        let code = |verdict: &Verdict| verdict.blocker.as_ref().map(|(code, _)| *code);

        let down = judge(&facts_of_this_build(registry, None), &[]);
        assert_eq!(down.status, Status::Unavailable);
        assert_eq!(code(&down), Some(BlockerCode::DaemonDown));

        let facts = facts_of_this_build(registry, Some(daemon_status(false, true)));
        let alone = judge(&facts, &[]);
        assert_eq!(alone.status, Status::NotApplicable);
        assert_eq!(code(&alone), Some(BlockerCode::PluginMissing));
        // A window whose plugin does not reach its terminals does not make the route work.
        let plain = session(None);
        assert_eq!(
            code(&judge(&facts, &[&plain])),
            Some(BlockerCode::PluginMissing)
        );

        let mut reaching = session(None);
        reaching
            .capabilities
            .push(koru_protocol::Capability::TerminalIo);
        reaching.terminals = vec![
            koru_protocol::IdeTerminal {
                terminal_id: "1".into(),
                name: "bash".into(),
                shell_pid: Some(10),
                env_tag: None,
            },
            koru_protocol::IdeTerminal {
                terminal_id: "2".into(),
                name: "claude".into(),
                shell_pid: None,
                env_tag: Some("t-2".into()),
            },
        ];
        let ok = judge(&facts, &[&plain, &reaching]);
        assert_eq!(ok.status, Status::Ok, "{:?}", ok.blocker);
        assert!(
            ok.facts
                .iter()
                .any(|f| f.contains("s_1 code-server 1.139.1")
                    && f.ends_with("reports 2 terminal(s)")),
            "{:?}",
            ok.facts
        );
    }

    #[test]
    fn what_the_daemon_serves_decides_the_http_and_observation_interfaces() {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let registry = &loaded.registry;
        let blocker = |verdicts: &HashMap<String, Verdict>, id: &str| {
            verdicts[id].blocker.as_ref().map(|(code, _)| *code)
        };
        let served = verdicts(
            &facts_of_this_build(registry, Some(daemon_status(true, true))),
            registry,
        );
        for id in ["dashboard_rest", "mcp_http", "chat_history_codex_jsonl"] {
            assert_eq!(
                served[id].status,
                Status::Ok,
                "{id}: {:?}",
                served[id].blocker
            );
        }
        let bare = verdicts(
            &facts_of_this_build(registry, Some(daemon_status(false, false))),
            registry,
        );
        for id in ["dashboard_rest", "mcp_http", "chat_history_codex_jsonl"] {
            assert_eq!(bare[id].status, Status::Unavailable, "{id}");
            assert_eq!(blocker(&bare, id), Some(BlockerCode::Disabled), "{id}");
        }
        assert!(bare["chat_history_codex_jsonl"]
            .blocker
            .as_ref()
            .unwrap()
            .1
            .contains("--no-observe"));
        let no_daemon = verdicts(&facts_of_this_build(registry, None), registry);
        for id in ["dashboard_rest", "mcp_http"] {
            assert_eq!(
                blocker(&no_daemon, id),
                Some(BlockerCode::DaemonDown),
                "{id}"
            );
        }
        // Without a daemon a store is judged by what is on disk: what a daemon would read.
        assert_eq!(no_daemon["chat_history_codex_jsonl"].status, Status::Ok);
    }

    #[test]
    fn the_lock_source_that_answered_is_a_fact_and_none_answering_is_degraded_naming_logind() {
        use crate::desktop::lock::{first_answer, LockSource};
        use crate::desktop::BusError;
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let no_bus = || BusError::Connect {
            bus: "system",
            detail: "no socket".into(),
        };
        let mut facts = Facts {
            platform: Some(Platform::Linux),
            lock: Some(first_answer([
                (LockSource::Login1, Err(no_bus())),
                (LockSource::GnomeScreenSaver, Ok(false)),
                (LockSource::FreedesktopScreenSaver, Ok(true)),
            ])),
            ..Facts::default()
        };
        let answered = &verdicts(&facts, &loaded.registry)["screen_lock"];
        assert_eq!(answered.status, Status::Ok);
        assert_eq!(
            answered.facts,
            ["not locked, as org.gnome.ScreenSaver.GetActive (session bus) says (not answered before it: org.freedesktop.login1: cannot connect to the system bus: no socket)"]
        );
        facts.lock = Some(first_answer([
            (LockSource::Login1, Err(no_bus())),
            (LockSource::GnomeScreenSaver, Err(no_bus())),
            (LockSource::FreedesktopScreenSaver, Err(no_bus())),
        ]));
        let silent = &verdicts(&facts, &loaded.registry)["screen_lock"];
        assert_eq!(silent.status, Status::Degraded);
        let (code, detail) = silent.blocker.clone().unwrap();
        assert_eq!(code, BlockerCode::BusUnavailable);
        assert!(
            detail.starts_with("no lock source answered: org.freedesktop.login1: cannot connect"),
            "{detail}"
        );
    }

    #[test]
    fn notifications_are_judged_by_the_service_found_and_the_policy() {
        use crate::desktop::notifications::Probe;
        use crate::desktop::Provider;
        let registry_with = |layer: &str| {
            let mut sources = vec![koru_registry::LayerSource::built_in()];
            sources.push(koru_registry::LayerSource {
                layer: koru_registry::Layer::User,
                name: "user.yaml".into(),
                path: None,
                text: layer.into(),
            });
            koru_registry::load(&sources).registry
        };
        let report = |facts: &Facts, registry: &Registry| {
            let report = evaluate(&Inputs {
                registry,
                registry_diagnostics: Vec::new(),
                facts,
                session_registries: HashMap::new(),
                only: vec!["desktop_notifications".into()],
            });
            let check = report.interfaces.into_iter().next().unwrap();
            (
                serde_json::to_value(check.status).unwrap(),
                check.blocker.map(|b| b.code),
                check.facts,
            )
        };
        let built_in = registry_with("");
        let mut facts = Facts {
            platform: Some(Platform::Linux),
            env: [(
                "DBUS_SESSION_BUS_ADDRESS".to_string(),
                "unix:path=/b".to_string(),
            )]
            .into(),
            notifications: Some(Ok(Some(Probe {
                provider: Provider::Activatable,
                server: None,
                capabilities: Vec::new(),
            }))),
            ..Facts::default()
        };
        let (status, blocker, found) = report(&facts, &built_in);
        assert_eq!((status.as_str(), blocker), (Some("ok"), None));
        assert_eq!(
            found.last().unwrap(),
            "org.freedesktop.Notifications starts on the first notification (D-Bus activation)"
        );
        facts.notifications = Some(Ok(None));
        let (status, blocker, _) = report(&facts, &built_in);
        assert_eq!(status, "unavailable");
        assert_eq!(blocker.as_deref(), Some("notifications_unavailable"));
        let off = registry_with("policy:\n  notify:\n    on: []\n");
        let (status, blocker, _) = report(&facts, &off);
        assert_eq!(status, "not_applicable");
        assert_eq!(blocker.as_deref(), Some("disabled"));
    }

    #[test]
    fn the_portal_is_judged_by_what_it_offers_and_a_pending_consent_still_plans_it() {
        use super::super::probe::PortalFact;
        use crate::desktop::portal::{Offer, PortalError};
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let registry = &loaded.registry;
        let fact = |has_token| {
            Ok(PortalFact {
                offer: Offer {
                    remote_desktop_version: 2,
                    device_types: Some(7),
                    clipboard_version: Some(1),
                },
                token_path: "/s/koru/portal-restore-token".into(),
                has_token,
            })
        };
        let mut facts = Facts {
            platform: Some(Platform::Linux),
            env: [
                (
                    "DBUS_SESSION_BUS_ADDRESS".to_string(),
                    "unix:path=/b".to_string(),
                ),
                ("WAYLAND_DISPLAY".to_string(), "wayland-0".to_string()),
            ]
            .into(),
            portal: Some(fact(false)),
            ..Facts::default()
        };
        let pending = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(pending.status, Status::Degraded);
        assert_eq!(
            pending.blocker.as_ref().unwrap().0,
            BlockerCode::ConsentPending
        );
        assert!(pending
            .facts
            .iter()
            .any(|f| f.contains("Clipboard version 1")));
        // A session's route through the portal is usable: the first drive asks.
        let environment: HashMap<String, Verdict> = registry
            .interfaces()
            .iter()
            .map(|i| (i.id.clone(), environment_verdict(i, &facts)))
            .collect();
        let paths = session_paths(&session(None), registry, None, &facts, &environment);
        let portal = paths
            .routes
            .iter()
            .find(|r| r.interface == "os_injector_portal")
            .expect("the portal is a route on Wayland");
        assert!(portal.usable, "{portal:?}");

        facts.portal = Some(fact(true));
        let agreed = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(agreed.status, Status::Ok);

        // With a daemon running, what its own portal session says wins over the token file.
        let live = |consent: &str, remembered: Option<bool>| {
            let status: koru_protocol::StatusInfo = serde_json::from_value(serde_json::json!({
                "version": "0", "pid": 1, "socket": "/s", "protocol": {"min": 1, "max": 1},
                "started_at_ms": 0, "plugins": 1, "controllers": 0, "drives_active": 0,
                "drives_total": 1,
                "portal": {"consent": consent, "since_ms": 1_796_000_000_000u64,
                           "remembered": remembered, "detail": "the person said no"}
            }))
            .unwrap();
            Some(status)
        };
        facts.portal = Some(fact(false));
        facts.daemon.status = live("agreed", Some(false));
        let agreed_now = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(agreed_now.status, Status::Ok, "{agreed_now:?}");
        assert!(
            agreed_now
                .facts
                .iter()
                .any(|f| f.contains("asks again at each daemon start")),
            "{agreed_now:?}"
        );
        facts.daemon.status = live("agreed", Some(true));
        let kept = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert!(kept
            .facts
            .iter()
            .any(|f| f.contains("the next daemon start is not asked again")));
        facts.daemon.status = live("asking", None);
        let asking = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(asking.status, Status::Degraded);
        assert!(asking
            .blocker
            .unwrap()
            .1
            .contains("consent dialog is up now"));
        facts.daemon.status = live("refused", None);
        let refused = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        let (code, detail) = refused.blocker.unwrap();
        assert_eq!(code, BlockerCode::ConsentPending);
        assert!(
            detail.contains("did not let the running daemon send keys")
                && detail.contains("the person said no"),
            "{detail}"
        );
        // A daemon whose portal nobody has used yet: the token file decides, as without one.
        facts.daemon.status = live("none", None);
        facts.portal = Some(fact(true));
        let before = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(before.status, Status::Ok);
        facts.daemon.status = None;

        facts.portal = Some(Err(PortalError::Missing("nobody owns it".into())));
        let missing = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(missing.blocker.unwrap().0, BlockerCode::PortalMissing);
        facts.portal = Some(Err(PortalError::NoRemoteDesktop("no interface".into())));
        let bare = environment_verdict(registry.get("os_injector_portal").unwrap(), &facts);
        assert_eq!(bare.blocker.unwrap().0, BlockerCode::PortalNoRemoteDesktop);
    }

    /// One line per interface of a whole evaluation: `id status [blocker]`, then the summary.
    fn outline(report: &DoctorReport) -> String {
        let mut text = String::new();
        for check in &report.interfaces {
            let status = serde_json::to_value(check.status).unwrap();
            text.push_str(&format!(
                "{} {}{}\n",
                check.id,
                status.as_str().unwrap_or_default(),
                check
                    .blocker
                    .as_ref()
                    .map(|b| format!(" {}", b.code))
                    .unwrap_or_default()
            ));
        }
        text.push_str(&format!(
            "summary: {}\n",
            serde_json::to_string(&report.summary).unwrap()
        ));
        text
    }

    fn evaluate_built_in(facts: &Facts) -> DoctorReport {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        evaluate(&Inputs {
            registry: &loaded.registry,
            registry_diagnostics: Vec::new(),
            facts,
            session_registries: HashMap::new(),
            only: Vec::new(),
        })
    }

    fn binary(path: &str) -> super::super::probe::BinaryFact {
        super::super::probe::BinaryFact {
            path: Some(path.into()),
            version: None,
        }
    }

    #[test]
    fn an_x11_desktop_with_xdotool_and_a_daemon_serving_http() {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let mut facts = facts_of_this_build(&loaded.registry, Some(daemon_status(true, true)));
        facts.platform = Some(Platform::Linux);
        facts.env.insert("DISPLAY".into(), ":0".into());
        facts.env.insert("XDG_SESSION_TYPE".into(), "x11".into());
        facts
            .binaries
            .insert("xdotool".into(), binary("/usr/bin/xdotool"));
        facts
            .binaries
            .insert("xclip".into(), binary("/usr/bin/xclip"));
        expect_test::expect![[r#"
            cli ok
            daemon_socket ok
            mcp_stdio_server ok
            mcp_http ok
            dashboard_rest ok
            plugin_socket_vscode_family not_applicable plugin_missing
            plugin_socket_jetbrains not_applicable plugin_missing
            vscode_native_chat_open not_applicable plugin_missing
            vscode_plugin_drive not_applicable plugin_missing
            antigravity_native_send not_applicable plugin_missing
            cursor_native_new_chat not_applicable plugin_missing
            cursor_plugin_drive not_applicable plugin_missing
            windsurf_plugin_drive not_applicable plugin_missing
            claude_code_panel_drive not_applicable plugin_missing
            jetbrains_plugin_drive not_applicable plugin_missing
            jetbrains_copilot_plugin_drive not_applicable plugin_missing
            jetbrains_claude_code_plugin_drive not_applicable plugin_missing
            jetbrains_junie_plugin_drive not_applicable plugin_missing
            os_injector_xdotool ok
            os_injector_wtype not_applicable no_display
            os_injector_ydotool unavailable injector_missing
            os_injector_enigo ok
            os_injector_portal not_applicable no_display
            clipboard_x11 ok
            clipboard_wayland not_applicable no_display
            dbus_session unavailable bus_unavailable
            screen_lock ok
            desktop_notifications unavailable bus_unavailable
            filesystem_artifacts ok
            chat_history_claude_code_jsonl ok
            chat_history_copilot_json ok
            chat_history_cursor_sqlite ok
            chat_history_cursor_legacy_sqlite ok
            chat_history_cline_tasks ok
            chat_history_cline_sessions ok
            chat_history_codex_jsonl ok
            chat_history_gemini_cli ok
            opencode_server_events ok
            chat_history_antigravity_pb_readonly ok
            tmux_claude_code unavailable injector_missing
            tmux_codex unavailable injector_missing
            tmux_gemini_cli unavailable injector_missing
            kitty_claude_code unavailable injector_missing
            kitty_codex unavailable injector_missing
            kitty_gemini_cli unavailable injector_missing
            ide_terminal_claude_code not_applicable plugin_missing
            ide_terminal_codex not_applicable plugin_missing
            ide_terminal_gemini_cli not_applicable plugin_missing
            wezterm_claude_code unavailable injector_missing
            wezterm_codex unavailable injector_missing
            wezterm_gemini_cli unavailable injector_missing
            opencode_server ok
            summary: {"ok":21,"degraded":0,"unavailable":12,"not_applicable":19,"sessions_with_a_drive_path":0,"exit_code":2,"verdict":"no drive path: no IDE plugin is connected"}
        "#]].assert_eq(&outline(&evaluate_built_in(&facts)));
    }

    #[test]
    fn a_wayland_desktop_with_wtype_and_no_daemon_or_stores() {
        let mut facts = Facts {
            platform: Some(Platform::Linux),
            features: super::super::probe::BUILD_FEATURES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Facts::default()
        };
        facts
            .env
            .insert("WAYLAND_DISPLAY".into(), "wayland-1".into());
        facts
            .env
            .insert("XDG_SESSION_TYPE".into(), "wayland".into());
        facts
            .binaries
            .insert("wtype".into(), binary("/usr/bin/wtype"));
        expect_test::expect![[r#"
            cli unavailable daemon_down
            daemon_socket unavailable daemon_down
            mcp_stdio_server unavailable daemon_down
            mcp_http unavailable daemon_down
            dashboard_rest unavailable daemon_down
            plugin_socket_vscode_family unavailable daemon_down
            plugin_socket_jetbrains unavailable daemon_down
            vscode_native_chat_open not_applicable plugin_missing
            vscode_plugin_drive not_applicable plugin_missing
            antigravity_native_send not_applicable plugin_missing
            cursor_native_new_chat not_applicable plugin_missing
            cursor_plugin_drive not_applicable plugin_missing
            windsurf_plugin_drive not_applicable plugin_missing
            claude_code_panel_drive not_applicable plugin_missing
            jetbrains_plugin_drive not_applicable plugin_missing
            jetbrains_copilot_plugin_drive not_applicable plugin_missing
            jetbrains_claude_code_plugin_drive not_applicable plugin_missing
            jetbrains_junie_plugin_drive not_applicable plugin_missing
            os_injector_xdotool not_applicable no_display
            os_injector_wtype ok
            os_injector_ydotool unavailable injector_missing
            os_injector_enigo not_applicable no_display
            os_injector_portal unavailable bus_unavailable
            clipboard_x11 not_applicable no_display
            clipboard_wayland unavailable clipboard_unavailable
            dbus_session unavailable bus_unavailable
            screen_lock ok
            desktop_notifications unavailable bus_unavailable
            filesystem_artifacts ok
            chat_history_claude_code_jsonl not_applicable store_missing
            chat_history_copilot_json not_applicable store_missing
            chat_history_cursor_sqlite not_applicable store_missing
            chat_history_cursor_legacy_sqlite not_applicable store_missing
            chat_history_cline_tasks not_applicable store_missing
            chat_history_cline_sessions not_applicable store_missing
            chat_history_codex_jsonl not_applicable store_missing
            chat_history_gemini_cli not_applicable store_missing
            opencode_server_events ok
            chat_history_antigravity_pb_readonly not_applicable store_missing
            tmux_claude_code unavailable injector_missing
            tmux_codex unavailable injector_missing
            tmux_gemini_cli unavailable injector_missing
            kitty_claude_code unavailable injector_missing
            kitty_codex unavailable injector_missing
            kitty_gemini_cli unavailable injector_missing
            ide_terminal_claude_code unavailable daemon_down
            ide_terminal_codex unavailable daemon_down
            ide_terminal_gemini_cli unavailable daemon_down
            wezterm_claude_code unavailable injector_missing
            wezterm_codex unavailable injector_missing
            wezterm_gemini_cli unavailable injector_missing
            opencode_server ok
            summary: {"ok":5,"degraded":0,"unavailable":24,"not_applicable":23,"sessions_with_a_drive_path":0,"exit_code":2,"verdict":"the daemon is not running: no drive path; start it with `koru daemon`"}
        "#]].assert_eq(&outline(&evaluate_built_in(&facts)));
    }
}

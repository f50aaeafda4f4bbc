//! Doctor's human report: a table per interface family, then the drive paths of each connected session, then the verdict.

use std::fmt::Write;

use super::report::{DoctorReport, InterfaceCheck, Status};

/// Renders the report as text for a terminal.
pub fn render(report: &DoctorReport) -> String {
    let mut out = String::new();
    let daemon = &report.daemon;
    if daemon.running {
        let _ = writeln!(
            out,
            "daemon: running (pid {}, koru {}) at {}",
            daemon.pid.map(|p| p.to_string()).unwrap_or_default(),
            daemon.version.clone().unwrap_or_default(),
            daemon.socket
        );
    } else {
        let _ = writeln!(
            out,
            "daemon: NOT RUNNING — {}; probing this machine anyway",
            daemon
                .error
                .clone()
                .unwrap_or_else(|| format!("no daemon at {}", daemon.socket))
        );
    }
    let env = &report.environment;
    let _ = writeln!(
        out,
        "display: {}{} · D-Bus session: {}",
        env.display_server,
        match (&env.display, &env.wayland_display) {
            (_, Some(w)) => format!(" (WAYLAND_DISPLAY={w})"),
            (Some(d), None) => format!(" (DISPLAY={d})"),
            _ => String::new(),
        },
        env.dbus_session
    );
    let _ = writeln!(
        out,
        "registry: {} interfaces from {}",
        report.registry.interfaces,
        report.registry.layers.join(", ")
    );
    for diagnostic in report
        .registry
        .diagnostics
        .iter()
        .chain(daemon.registry_diagnostics.iter())
    {
        let _ = writeln!(out, "  registry problem: {diagnostic}");
    }
    for refused in &daemon.refused_handshakes {
        let _ = writeln!(out, "  refused plugin: {refused}");
    }

    let mut family = String::new();
    for check in &report.interfaces {
        if check.family != family {
            family = check.family.clone();
            let _ = writeln!(out, "\n{}", family.replace('_', " ").to_uppercase());
        }
        render_check(&mut out, check);
    }

    let _ = writeln!(out, "\nDRIVE PATHS");
    if report.sessions.is_empty() {
        let _ = writeln!(
            out,
            "  no IDE session connected{}",
            if daemon.running {
                ""
            } else {
                " (the daemon is down)"
            }
        );
    }
    for session in &report.sessions {
        let _ = writeln!(
            out,
            "  {} — {} {} via {} (protocol {}), {}{}",
            session.session_id,
            session.product,
            session.ide_version,
            session.plugin,
            session.protocol,
            if session.workspace_folders.is_empty() {
                "no folder".to_string()
            } else {
                session.workspace_folders.join(", ")
            },
            session
                .project_layer
                .as_ref()
                .map(|p| format!(" [project registry {p}]"))
                .unwrap_or_default()
        );
        if let Some(chat) = &session.chat {
            if chat.ready {
                let _ = writeln!(out, "    chat: ready");
            } else {
                let _ = writeln!(
                    out,
                    "    chat: NOT READY — {} (drives wait for it)",
                    chat.reason
                        .as_deref()
                        .unwrap_or("the plugin gave no reason")
                );
                for hint in &chat.recovery {
                    let _ = writeln!(out, "       → {}: {}", hint.label, hint.does);
                }
            }
        }
        if session.routes.is_empty() {
            let _ = writeln!(out, "    no route applies to this product");
        }
        for route in &session.routes {
            let state = match &route.blocker {
                None if route.verification == "strict_ack" => "usable".to_string(),
                None => format!("usable ({}: unverified until observed)", route.verification),
                Some(blocker) => format!("blocked — {}: {}", blocker.code, blocker.detail),
            };
            let _ = writeln!(
                out,
                "    {}. {:<13} {:<26} {state}",
                route.rank, route.route, route.interface
            );
            if let Some(note) = &route.note {
                let _ = writeln!(out, "       ({note})");
            }
            for hint in &route.recovery {
                let _ = writeln!(out, "       → {}: {}", hint.label, hint.does);
            }
        }
    }
    if !report.wired.is_empty() {
        let _ = writeln!(out, "\nWIRED ON THIS MACHINE (koru setup)");
        for check in &report.wired {
            let line = format!(
                "  {:<12} {:<6} {:<26} {}",
                check.state.as_str(),
                check.part,
                check.tool,
                check.detail
            );
            let _ = writeln!(out, "{}", line.trim_end());
            if let Some(fix) = &check.fix {
                let _ = writeln!(out, "  {:<12} → {fix}", "");
            }
        }
    }
    let summary = &report.summary;
    let _ = writeln!(
        out,
        "\n{} ok, {} degraded, {} unavailable, {} not applicable — {} (exit {})",
        summary.ok,
        summary.degraded,
        summary.unavailable,
        summary.not_applicable,
        summary.verdict,
        summary.exit_code
    );
    out
}

fn render_check(out: &mut String, check: &InterfaceCheck) {
    let status = match check.status {
        Status::Ok => "ok",
        Status::Degraded => "DEGRADED",
        Status::Unavailable => "UNAVAILABLE",
        Status::NotApplicable => "n/a",
    };
    let detail = match &check.blocker {
        Some(blocker) => format!("{}: {}", blocker.code, blocker.detail),
        None => check.facts.join("; "),
    };
    let line = format!(
        "  {:<12} {:<38} {:<7} {:<12} {}",
        status, check.id, check.authority, check.verification, detail
    );
    let _ = writeln!(out, "{}", line.trim_end());
    if check.blocker.is_some() && !check.facts.is_empty() {
        let _ = writeln!(
            out,
            "  {:<12} {:<38} found: {}",
            "",
            "",
            check.facts.join("; ")
        );
    }
    for hint in &check.recovery {
        let _ = writeln!(out, "  {:<12} → {}: {}", "", hint.label, hint.does);
    }
}

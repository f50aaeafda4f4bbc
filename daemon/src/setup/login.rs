//! The at-login part of `koru setup`: the systemd user unit (contrib/koru.service) written for this binary and enabled, or — where there is no systemd user instance — what to do instead.

use std::path::Path;

use super::{Change, EditUndo, FileEdit, Machine, Part, Planned, Run, ToolPlan, ToolState};

/// The unit as shipped; `ExecStart` is rewritten to this binary.
const UNIT: &str = include_str!("../../../contrib/koru.service");
pub const UNIT_NAME: &str = "koru.service";

/// The unit for `koru`: the shipped one with `ExecStart` running this binary (quoted when
/// its path has spaces) and the comment about adjusting the path dropped.
pub fn unit_text(koru: &Path) -> String {
    let program = koru.display().to_string();
    let program = if program.contains(char::is_whitespace) {
        format!("\"{}\"", program.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        program
    };
    let mut text = String::new();
    for line in UNIT.lines() {
        if line.starts_with("ExecStart=") {
            text.push_str(&format!("ExecStart={program} daemon\n"));
        } else if line.starts_with("# Adjust the path") {
            continue;
        } else if line.starts_with("# Install:") || line.starts_with("#   ") {
            // The manual steps of the shipped file: setup does them.
            if line.starts_with("# Install:") {
                text.push_str("# Written by `koru setup`; `koru setup --undo` removes it.\n");
            }
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

fn systemctl(machine: &Machine, args: &[&str]) -> Option<(bool, String)> {
    let program = machine.which("systemctl")?;
    let output = machine.command(program).args(args).output().ok()?;
    Some((
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
    ))
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The plan for the unit.
pub fn plan(machine: &Machine, planned: &Planned) -> Vec<ToolPlan> {
    let tool = |state| ToolPlan {
        part: Part::Login,
        key: "login:systemd".into(),
        tool: "systemd user unit".into(),
        state,
    };
    let instead = format!(
        "start `{} daemon` at login another way: your desktop's autostart (a ~/.config/autostart/koru.desktop with Exec={0} daemon), or your shell profile",
        machine.koru.display()
    );
    // A user manager answers `is-system-running` with a word; only some words mean usable.
    let state = match systemctl(machine, &["--user", "is-system-running"]) {
        None => {
            return vec![tool(ToolState::Unavailable {
                why: format!("no systemctl on PATH: {instead}"),
            })]
        }
        Some((_, word)) => word,
    };
    if !matches!(
        state.as_str(),
        "running" | "degraded" | "starting" | "initializing" | "maintenance"
    ) {
        let said = if state.is_empty() { "nothing" } else { &state };
        return vec![tool(ToolState::Unavailable {
            why: format!(
                "no systemd user instance here (`systemctl --user is-system-running` says {said}): {instead}"
            ),
        })];
    }
    let path = machine.config_home().join("systemd/user").join(UNIT_NAME);
    let before = match planned.read(&path) {
        Ok(before) => before,
        Err(error) => return vec![tool(ToolState::Failed { error })],
    };
    let wanted = unit_text(&machine.koru);
    let enabled = systemctl(machine, &["--user", "is-enabled", UNIT_NAME])
        .is_some_and(|(_, word)| word == "enabled");
    let shown = machine.show(&path);
    if before.as_deref() == Some(wanted.as_str()) && enabled {
        return vec![tool(ToolState::Current {
            detail: format!("{shown}, enabled"),
        })];
    }
    let stale = before.as_ref().and_then(|text| {
        let exec = text.lines().find(|l| l.starts_with("ExecStart="))?;
        (text != &wanted).then(|| format!("{shown} has `{exec}`"))
    });
    let mut changes = Vec::new();
    if before.as_deref() != Some(wanted.as_str()) {
        changes.push(Change::Edit(FileEdit {
            path: path.clone(),
            before,
            after: wanted,
            summary: format!("write {shown} running {} daemon", machine.koru.display()),
            undo: EditUndo::WholeFile,
            after_undo: vec![words(&["systemctl", "--user", "daemon-reload"])],
        }));
    }
    changes.push(Change::Run(Run {
        summary: "enable and start it".into(),
        argv: vec![
            words(&["systemctl", "--user", "daemon-reload"]),
            words(&["systemctl", "--user", "enable", "--now", UNIT_NAME]),
        ],
        undo: vec![words(&[
            "systemctl",
            "--user",
            "disable",
            "--now",
            UNIT_NAME,
        ])],
    }));
    vec![tool(ToolState::Changes { changes, stale })]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_this_binary() {
        let text = unit_text(Path::new("/home/me/bin/koru"));
        assert!(
            text.contains("\nExecStart=/home/me/bin/koru daemon\n"),
            "{text}"
        );
        assert!(!text.contains("%h/.cargo"), "{text}");
        assert!(
            text.contains("[Install]\nWantedBy=default.target\n"),
            "{text}"
        );
        assert!(
            text.starts_with("# systemd user unit for the Koru daemon"),
            "{text}"
        );
        let spaced = unit_text(Path::new("/home/me/my tools/koru"));
        assert!(
            spaced.contains("\nExecStart=\"/home/me/my tools/koru\" daemon\n"),
            "{spaced}"
        );
    }

    #[test]
    fn without_systemctl_it_says_what_to_do_instead() {
        let home = tempfile::tempdir().unwrap();
        let m = Machine::with_vars(home.path(), Path::new("/opt/koru"), &[("PATH", "")]);
        let plans = plan(&m, &Planned::default());
        let ToolState::Unavailable { why } = &plans[0].state else {
            panic!()
        };
        assert!(
            why.starts_with("no systemctl on PATH: start `/opt/koru daemon` at login another way"),
            "{why}"
        );
    }
}

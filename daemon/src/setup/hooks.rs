//! The agent-hooks part of `koru setup`: Koru's hook entries (`koru hook install`) in the settings of each terminal agent found — Claude Code, Codex CLI, Gemini CLI.

use std::path::PathBuf;

use crate::agent_hooks::{json_settings, HookAgent};

use super::{Change, EditUndo, FileEdit, Machine, Part, Planned, ToolPlan, ToolState};

/// The agent's settings file and whether the agent is on this machine.
pub fn settings_file(agent: HookAgent, machine: &Machine) -> (PathBuf, bool) {
    let home = &machine.home;
    match agent {
        HookAgent::ClaudeCode => {
            let dir = machine
                .var("CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".claude"));
            let found = machine.which("claude").is_some()
                || dir.exists()
                || home.join(".claude.json").exists();
            (dir.join("settings.json"), found)
        }
        HookAgent::Codex => {
            let dir = machine
                .var("CODEX_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".codex"));
            let found = machine.which("codex").is_some() || dir.exists();
            (dir.join("hooks.json"), found)
        }
        HookAgent::GeminiCli => {
            let file = machine
                .var("GEMINI_CLI_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.clone())
                .join(".gemini/settings.json");
            let found = machine.which("gemini").is_some() || file.exists();
            (file, found)
        }
    }
}

/// The plan for one agent's hooks.
pub fn plan_agent(
    agent: HookAgent,
    path: PathBuf,
    machine: &Machine,
    planned: &Planned,
) -> ToolState {
    let shown = machine.show(&path);
    let before = match planned.read(&path) {
        Ok(before) => before,
        Err(error) => return ToolState::Failed { error },
    };
    let text = before.as_deref().unwrap_or("");
    let failed = |error: json_settings::SettingsError| ToolState::Failed {
        error: format!("{shown}: {error}; the file was left as it is"),
    };
    let installed = match json_settings::installed(text) {
        Ok(installed) => installed,
        Err(error) => return failed(error),
    };
    let edited = match json_settings::install(text, &agent.entries(&machine.koru), &[]) {
        Ok(edited) => edited,
        Err(error) => return failed(error),
    };
    if edited.events.is_empty() {
        return ToolState::Current {
            detail: format!("{} events in {shown}", agent.events().len()),
        };
    }
    let mut after = edited.text;
    if !after.ends_with('\n') {
        after.push('\n');
    }
    let wanted = agent.entries(&machine.koru)[0].command.clone();
    let stale = installed
        .iter()
        .map(|(_, command)| command)
        .find(|command| **command != wanted)
        .map(|command| format!("a hook runs `{command}`"));
    ToolState::Changes {
        changes: vec![Change::Edit(FileEdit {
            path,
            before,
            after,
            summary: format!(
                "{} Koru's hook for {} in {shown}",
                if stale.is_some() { "update" } else { "add" },
                edited.events.join(", ")
            ),
            undo: EditUndo::Hooks {
                agent: agent.name().to_string(),
            },
            after_undo: Vec::new(),
        })],
        stale,
    }
}

/// A plan for each agent found.
pub fn plan(machine: &Machine, planned: &Planned) -> Vec<ToolPlan> {
    HookAgent::ALL
        .into_iter()
        .filter_map(|agent| {
            let (path, found) = settings_file(agent, machine);
            found.then(|| ToolPlan {
                part: Part::Hooks,
                key: format!("hooks:{}", agent.name()),
                tool: agent.title().to_string(),
                state: plan_agent(agent, path, machine, planned),
            })
        })
        .collect()
}

/// The agent a manifest's hook record names.
pub fn agent_named(name: &str) -> Option<HookAgent> {
    HookAgent::ALL.into_iter().find(|a| a.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn hooks_go_to_each_agent_found_and_a_moved_binary_makes_them_stale() {
        let home = tempfile::tempdir().unwrap();
        let m = Machine::with_vars(home.path(), Path::new("/opt/koru"), &[("PATH", "")]);
        assert!(plan(&m, &Planned::default()).is_empty());
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        let plans = plan(&m, &Planned::default());
        assert_eq!(plans.len(), 1);
        let ToolState::Changes { changes, stale } = &plans[0].state else {
            panic!()
        };
        assert_eq!(stale, &None);
        let Change::Edit(edit) = &changes[0] else {
            panic!()
        };
        assert_eq!(edit.path, home.path().join(".claude/settings.json"));
        std::fs::write(&edit.path, &edit.after).unwrap();
        assert!(matches!(
            plan(&m, &Planned::default())[0].state,
            ToolState::Current { .. }
        ));
        let moved = Machine::with_vars(home.path(), Path::new("/new/koru"), &[("PATH", "")]);
        let ToolState::Changes { stale, .. } = &plan(&moved, &Planned::default())[0].state else {
            panic!()
        };
        assert_eq!(
            stale.as_deref(),
            Some("a hook runs `/opt/koru hook claude-code`")
        );
    }
}

//! `koru hook AGENT`: the command Koru installs in Claude Code's, Codex CLI's and Gemini CLI's hooks — it reads the hook's JSON on stdin and forwards what the transcript never records (permission prompts, waiting for input, a turn that failed on an API error) and the turn's end to the daemon as observations, writing nothing to stdout or stderr and always exiting 0 so it never changes what the agent does; and `koru hook install|uninstall`, which put those entries into the agents' own settings and take them out again.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use koru_protocol::ObserveReport;
use serde_json::Value;

use crate::agent_hooks::{agent_process, install, observation_from_hook, HookAgent};
use crate::control::Controller;

/// The settings snippet for `~/.claude/settings.json` (`koru hook claude-code --print-config`).
pub fn config_snippet(koru: &Path) -> Value {
    let mut hooks = serde_json::Map::new();
    for entry in HookAgent::ClaudeCode.entries(koru) {
        hooks.insert(
            entry.event.to_string(),
            serde_json::json!([{"hooks": [{"type": "command", "command": entry.command, "timeout": entry.timeout_s}]}]),
        );
    }
    serde_json::json!({ "hooks": hooks })
}

/// Where a hook's own failures go: the agents show a hook's stderr to the user (Gemini CLI
/// even at exit 0), so the hook keeps quiet and appends them here, at most 256 KB.
fn hook_log_path() -> PathBuf {
    crate::access::tokens::tokens_path().with_file_name("hook-errors.log")
}

fn log_failure(agent: HookAgent, what: &str) {
    use std::io::Write;
    let path = hook_log_path();
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > 256 * 1024) {
        let _ = std::fs::remove_file(&path);
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ");
        let _ = writeln!(file, "{now} koru hook {}: {what}", agent.name());
    }
}

/// Runs the hook for `agent`. It never fails the agent: it prints nothing and exits 0;
/// problems go to the hook log (`$XDG_STATE_HOME/koru/hook-errors.log`).
pub async fn run(socket: &Path, agent: HookAgent, print_config: bool) -> anyhow::Result<ExitCode> {
    if print_config {
        let koru = std::env::current_exe().unwrap_or_else(|_| "koru".into());
        println!("{}", serde_json::to_string_pretty(&config_snippet(&koru))?);
        eprintln!("koru: `koru hook install claude-code` merges this into ~/.claude/settings.json");
        return Ok(ExitCode::SUCCESS);
    }
    let mut raw = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut raw) {
        log_failure(agent, &format!("cannot read the hook input: {error}"));
        return Ok(ExitCode::SUCCESS);
    }
    let input: Value = match serde_json::from_str(&raw) {
        Ok(input) => input,
        Err(error) => {
            log_failure(agent, &format!("the hook input is not JSON: {error}"));
            return Ok(ExitCode::SUCCESS);
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    // Where the agent runs: its process above this hook, and its tmux pane.
    let agent_pid = crate::terminal::procs::agent_ancestor(std::os::unix::process::parent_id())
        .map(|(pid, _)| pid);
    let process = agent_process(
        std::env::var("TMUX").ok().as_deref(),
        std::env::var("TMUX_PANE").ok().as_deref(),
        agent_pid,
    );
    let Some(observation) = observation_from_hook(agent, &input, now, process) else {
        return Ok(ExitCode::SUCCESS);
    };
    let forward = async {
        let report = ObserveReport {
            observations: vec![observation],
        };
        Controller::new(socket.to_path_buf(), "koru-hook")
            .once(|c| Box::pin(c.report_observation(report)))
            .await
    };
    match tokio::time::timeout(Duration::from_secs(2), forward).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => log_failure(agent, &error.to_string()),
        Err(_) => log_failure(agent, "the daemon did not answer within 2 s"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Where an agent's settings file is: `--settings`, else the agent's user settings under
/// `$HOME` (Codex: `$CODEX_HOME`).
fn settings_for(agent: HookAgent, explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: say which settings file with --settings")?;
    let codex_home = std::env::var_os("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    Ok(agent.settings_path(&home, codex_home.as_deref()))
}

/// `koru hook install|uninstall AGENT… [--settings FILE] [--dry-run]`.
pub fn install_or_uninstall(
    agents: &[HookAgent],
    settings: Option<&Path>,
    dry_run: bool,
    uninstall: bool,
) -> anyhow::Result<ExitCode> {
    if settings.is_some() && agents.len() != 1 {
        anyhow::bail!("--settings names one file: give exactly one agent with it");
    }
    let koru = std::env::current_exe().context("cannot tell where this koru binary is")?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    // Every file is planned (and parsed) before any is written.
    let mut plans = Vec::new();
    for agent in agents {
        let path = settings_for(*agent, settings)?;
        let plan = if uninstall {
            install::plan_uninstall(*agent, &path)
        } else {
            install::plan_install(*agent, &path, &koru)
        }?;
        plans.push(plan);
    }
    for plan in &plans {
        let title = plan.agent.title();
        let path = plan.path.display();
        if !plan.changes() {
            if uninstall {
                println!("{title}: no Koru hooks in {path}; nothing to remove");
            } else {
                println!("{title}: Koru's hooks are already in {path}");
            }
            continue;
        }
        if dry_run {
            print!("{}", plan.diff());
            println!(
                "{title}: would {} {} in {path} (--dry-run: nothing written)",
                if uninstall {
                    "remove Koru's hooks for"
                } else {
                    "add Koru's hooks for"
                },
                plan.events.join(", ")
            );
            continue;
        }
        let backup = install::apply(plan, &stamp)?;
        println!(
            "{title}: {} {} in {path}",
            if uninstall {
                "removed Koru's hooks for"
            } else {
                "added Koru's hooks for"
            },
            plan.events.join(", ")
        );
        if let Some(backup) = backup {
            println!("  the file as it was: {}", backup.display());
        }
        if !uninstall {
            if let Some(note) = plan.agent.after_install() {
                println!("  {note}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_snippet_runs_this_binary_for_claude_codes_events() {
        let snippet = config_snippet(Path::new("/usr/local/bin/koru"));
        for event in HookAgent::ClaudeCode.events() {
            assert_eq!(
                snippet["hooks"][event][0]["hooks"][0]["command"],
                "/usr/local/bin/koru hook claude-code"
            );
        }
    }
}

//! Terminal agents where they run, found without their hooks: the panes of the user's tmux servers and, under each pane's first process, a Claude Code, Codex CLI, Gemini CLI or opencode process — looked up on demand (one `list-panes` per server and one read of `/proc`), never polled.

pub mod procs;
pub mod tmux;

use std::path::Path;

pub use procs::AgentProduct;
pub use tmux::Pane;

/// A terminal agent running in a tmux pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneAgent {
    pub product: AgentProduct,
    /// The agent's process.
    pub pid: u32,
    pub pane: Pane,
}

/// What one look found: the agents, and the servers that could not be asked.
#[derive(Debug, Default)]
pub struct Look {
    pub agents: Vec<PaneAgent>,
    pub problems: Vec<String>,
}

/// Looks at every tmux server whose socket is in `socket_dir` for panes running an agent.
pub fn look(socket_dir: &Path) -> Look {
    let mut look = Look::default();
    let sockets = tmux::server_sockets(socket_dir);
    if sockets.is_empty() {
        return look;
    }
    let mut panes = Vec::new();
    for socket in sockets {
        match tmux::list_panes(&socket) {
            Ok(found) => panes.extend(found),
            Err(error) => look.problems.push(error.to_string()),
        }
    }
    if panes.is_empty() {
        return look;
    }
    let processes = procs::snapshot();
    for pane in panes {
        if let Some((pid, product)) = procs::agent_under(pane.pid, &processes) {
            look.agents.push(PaneAgent { product, pid, pane });
        }
    }
    look
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn an_agent_in_a_real_tmux_pane_is_found_under_the_panes_shell_and_a_plain_shell_is_not() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in named as Claude Code's executable (a copy of `sleep`: the process name
        // is what is matched; the real agents run in the e2e tests of issue 38).
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let agent = bin.join("claude");
        std::fs::copy("/bin/sleep", &agent).unwrap();
        let sockets = dir.path().join("tmux-test");
        std::fs::create_dir(&sockets).unwrap();
        let socket = sockets.join("default");
        let tmux = |args: &[&str]| {
            let status = Command::new("tmux")
                .arg("-S")
                .arg(&socket)
                .args(args)
                .status()
                .unwrap();
            assert!(status.success(), "tmux {args:?}");
        };
        // The agent runs under a shell, as in a pane where the user typed `claude`.
        let script = format!("{} 30 & wait", agent.display());
        tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "w",
            "sh",
            "-c",
            &script,
        ]);
        tmux(&["new-window", "-t", "w", "sleep", "30"]);
        let found = look(&sockets);
        tmux(&["kill-server"]);
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        assert_eq!(found.agents.len(), 1, "{:?}", found.agents);
        assert_eq!(found.agents[0].product, AgentProduct::ClaudeCode);
        assert_eq!(found.agents[0].pane.place, "w:0.0");
        assert_ne!(
            found.agents[0].pid, found.agents[0].pane.pid,
            "below the pane's shell"
        );
        // No servers: nothing, and no problem.
        assert!(look(&dir.path().join("nowhere")).agents.is_empty());
    }
}

//! Terminal agents where they run, found without their hooks: the panes of the user's tmux servers and the windows of every kitty with remote control on, the panes of every WezTerm and, under each one's first process, a Claude Code, Codex CLI, Gemini CLI or opencode process — looked up on demand (one `list-panes` per server and one read of `/proc`), never polled.

pub mod kitty;
pub mod opencode;
pub mod procs;
pub mod screen;
pub mod tmux;
pub mod typist;
pub mod wezterm;

use std::path::Path;

pub use procs::AgentProduct;
pub use tmux::{Pane, PaneKind};

/// A terminal agent running in a tmux pane or a kitty window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneAgent {
    pub product: AgentProduct,
    /// The agent's process.
    pub pid: u32,
    pub pane: Pane,
    /// Where the agent's own server listens (opencode started with `--port`), found in
    /// the look.
    pub server: Option<std::net::SocketAddr>,
}

/// The variable a plugin puts into an IDE terminal's environment to name the terminal
/// (`IdeTerminal.env_tag`).
pub const TERMINAL_TAG: &str = "KORU_TERMINAL_ID";

/// An IDE window's integrated terminal, as its plugin reported it, for a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdeTerminalRef {
    /// The plugin session of the window.
    pub session_id: String,
    /// The plugin's id for the terminal.
    pub terminal_id: String,
    /// The terminal's shell, as the plugin gave it.
    pub shell_pid: Option<u32>,
    /// The terminal's `KORU_TERMINAL_ID`, for finding its shell when no pid was given.
    pub env_tag: Option<String>,
    /// Where it is, for people (`vscode window ~/repo, terminal "bash"`).
    pub place: String,
}

/// What one look found: the agents, and the servers that could not be asked.
#[derive(Debug, Default)]
pub struct Look {
    pub agents: Vec<PaneAgent>,
    pub problems: Vec<String>,
}

/// Looks at every tmux server whose socket is in `socket_dir`, every kitty and every
/// WezTerm running here, and the IDE terminals the plugins reported, for panes (kitty:
/// windows) running an agent.
pub fn look(socket_dir: &Path, ide_terminals: &[IdeTerminalRef]) -> Look {
    let mut look = Look::default();
    let sockets = tmux::server_sockets(socket_dir);
    tracing::debug!(dir = %socket_dir.display(), sockets = sockets.len(), "looking for terminal agents");
    let mut panes = Vec::new();
    for socket in sockets {
        match tmux::list_panes(&socket) {
            Ok(found) => panes.extend(found),
            Err(error) => look.problems.push(error.to_string()),
        }
    }
    let processes = procs::snapshot();
    let kitties = kitty::instances(&processes, kitty::environ_of);
    for instance in &kitties {
        let Some(listen_on) = &instance.listen_on else {
            if let Some((pid, product)) = procs::agent_under(instance.pid, &processes) {
                look.problems.push(format!(
                    "{} (pid {pid}) runs in a kitty (pid {}) whose remote control is off: Koru cannot reach it (start kitty with `-o allow_remote_control=socket-only --listen-on unix:/tmp/kitty-{{kitty_pid}}`, or set `allow_remote_control socket-only` and `listen_on unix:/tmp/kitty` in kitty.conf)",
                    product.name(),
                    instance.pid
                ));
            }
            continue;
        };
        match kitty::list_windows(listen_on) {
            Ok(windows) => panes.extend(windows.into_iter().map(|window| Pane {
                kind: PaneKind::Kitty,
                socket: listen_on.into(),
                pane_id: window.id.to_string(),
                pid: window.pid,
                command: String::new(),
                path: window.cwd,
                place: window.place,
            })),
            Err(error) => look
                .problems
                .push(format!("kitty (pid {}): {error}", instance.pid)),
        }
    }
    panes.extend(wezterm_panes(&processes, &mut look.problems));
    // Terminals named by their environment tag: every process's environment read once.
    let wanted: Vec<&str> = ide_terminals
        .iter()
        .filter(|t| t.shell_pid.is_none())
        .filter_map(|t| t.env_tag.as_deref())
        .collect();
    let tagged = procs::tagged_shells(TERMINAL_TAG, &wanted, &processes, kitty::environ_of);
    for terminal in ide_terminals {
        let shell = terminal.shell_pid.or_else(|| {
            let tag = terminal.env_tag.as_deref()?;
            let shell = tagged.get(tag).copied();
            if shell.is_none() {
                look.problems.push(format!(
                    "{}: no process carries {TERMINAL_TAG}={tag} (its shell has ended, or runs on another machine)",
                    terminal.place
                ));
            }
            shell
        });
        let Some(pid) = shell else { continue };
        panes.push(Pane {
            kind: PaneKind::IdeTerminal,
            socket: terminal.session_id.clone().into(),
            pane_id: terminal.terminal_id.clone(),
            pid,
            command: String::new(),
            path: String::new(),
            place: terminal.place.clone(),
        });
    }
    for pane in panes {
        if let Some((pid, product)) = procs::agent_under(pane.pid, &processes) {
            if look.agents.iter().any(|a| a.pid == pid) {
                continue;
            }
            let server = (product == AgentProduct::Opencode)
                .then(|| opencode::server_address(pid))
                .flatten();
            let mut pane = pane;
            if pane.kind != PaneKind::Tmux {
                // kitty's and WezTerm's folder is their window's first process's; the agent's
                // own is the one its chats are filed under.
                if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
                    pane.path = cwd.display().to_string();
                }
            }
            look.agents.push(PaneAgent {
                product,
                pid,
                pane,
                server,
            });
        }
    }
    look
}

/// The bytes a terminal sends for a key named as tmux names it (the registry's
/// `terminal.submit_key`), for terminals whose remote control sends keys as text (kitty
/// 0.26 has no `send-key`; WezTerm's CLI has none).
pub fn key_bytes(key: &str) -> Option<&'static str> {
    Some(match key {
        "Enter" | "C-m" => "\r",
        "C-j" => "\n",
        "Tab" | "C-i" => "\t",
        "Escape" | "C-[" => "\u{1b}",
        "Space" => " ",
        "BSpace" => "\u{7f}",
        "M-Enter" => "\u{1b}\r",
        _ => return None,
    })
}

/// Why a key cannot be sent as text.
pub fn unknown_key(key: &str) -> String {
    format!("Koru cannot send the key {key:?} as text (known: Enter, C-m, C-j, Tab, Escape, Space, BSpace, M-Enter)")
}

/// The WezTerm panes whose first process runs here, each checked against its WezTerm's own
/// list (one `wezterm cli list` per WezTerm).
fn wezterm_panes(
    processes: &std::collections::HashMap<u32, procs::Process>,
    problems: &mut Vec<String>,
) -> Vec<Pane> {
    let shells = wezterm::shells(processes, kitty::environ_of);
    let mut sockets: Vec<&str> = shells.iter().map(|s| s.socket.as_str()).collect();
    sockets.sort_unstable();
    sockets.dedup();
    let mut found = Vec::new();
    for socket in sockets {
        let listed = match wezterm::list_panes(&koru_injectors::SystemRunner, socket) {
            Ok(listed) => listed,
            Err(error) => {
                problems.push(format!("WezTerm at {socket}: {error}"));
                continue;
            }
        };
        for shell in shells.iter().filter(|s| s.socket == socket) {
            if let Some(pane) = listed.iter().find(|p| p.pane_id == shell.pane_id) {
                found.push(Pane {
                    kind: PaneKind::Wezterm,
                    socket: socket.into(),
                    pane_id: pane.pane_id.to_string(),
                    pid: shell.pid,
                    command: String::new(),
                    path: pane.cwd.clone(),
                    place: pane.place.clone(),
                });
            }
        }
    }
    found
}

/// A look the daemon asked for, done.
#[derive(Debug)]
pub struct LookFinished {
    pub ticket: u64,
    pub agents: Vec<PaneAgent>,
    pub problems: Vec<String>,
}

/// Looks for terminal agents off the daemon's loop; the answer comes back as a
/// [`LookFinished`] event.
pub trait TerminalLooker: Send + Sync {
    /// Starts a look; `ide_terminals` are the IDE windows' terminals known now.
    fn start(&self, ticket: u64, ide_terminals: Vec<IdeTerminalRef>);
}

/// Looks for real, on tokio's blocking pool, in the user's tmux socket folder.
pub struct SystemTerminalLooker<E> {
    events: tokio::sync::mpsc::Sender<E>,
    socket_dir: std::path::PathBuf,
}

impl<E> SystemTerminalLooker<E> {
    /// Looks in `$TMUX_TMPDIR/tmux-UID` (else `/tmp/tmux-UID`).
    pub fn new(events: tokio::sync::mpsc::Sender<E>) -> Self {
        let tmpdir = std::env::var_os("TMUX_TMPDIR")
            .filter(|d| !d.is_empty())
            .map(std::path::PathBuf::from);
        SystemTerminalLooker {
            events,
            socket_dir: tmux::socket_dir(tmpdir.as_deref(), nix::unistd::getuid().as_raw()),
        }
    }
}

impl<E: From<LookFinished> + Send + 'static> TerminalLooker for SystemTerminalLooker<E> {
    fn start(&self, ticket: u64, ide_terminals: Vec<IdeTerminalRef>) {
        let events = self.events.clone();
        let dir = self.socket_dir.clone();
        tokio::spawn(async move {
            let found = tokio::task::spawn_blocking(move || look(&dir, &ide_terminals))
                .await
                .unwrap_or_else(|error| Look {
                    agents: Vec::new(),
                    problems: vec![format!("looking for terminal agents failed: {error}")],
                });
            let _ = events
                .send(E::from(LookFinished {
                    ticket,
                    agents: found.agents,
                    problems: found.problems,
                }))
                .await;
        });
    }
}

/// A looker for tests: records the tickets it was given; the test answers them.
#[derive(Debug, Clone, Default)]
pub struct RecordingTerminalLooker {
    pub started: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
}

impl TerminalLooker for RecordingTerminalLooker {
    fn start(&self, ticket: u64, _ide_terminals: Vec<IdeTerminalRef>) {
        if let Ok(mut started) = self.started.lock() {
            started.push(ticket);
        }
    }
}

/// A terminal agent's stable id: `t_` and the first 12 hex digits of the SHA-256 of its
/// server socket, pane id and process id.
pub fn agent_id(agent: &PaneAgent) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(agent.pane.socket.to_string_lossy().as_bytes());
    hash.update([0]);
    hash.update(agent.pane.pane_id.as_bytes());
    hash.update([0]);
    hash.update(agent.pid.to_le_bytes());
    let digest = hash.finalize();
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("t_{hex}")
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
        let found = look(&sockets, &[]);
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
        assert!(look(&dir.path().join("nowhere"), &[]).agents.is_empty());
    }
}

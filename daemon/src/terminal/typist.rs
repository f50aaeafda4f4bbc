//! Typing a drive's prompt into a terminal agent's tmux pane, kitty window or WezTerm pane, off the daemon's loop: read the screen first (never type into a dialog or over a person's draft), one bracketed paste from stdin, the registry's settle delay, the submit key on its own; and pressing the submit key again only while the prompt still sits in the input box.

use std::path::PathBuf;
use std::time::Duration;

use koru_protocol::{blocker, Blocker};
use koru_registry::TerminalInput;

use super::screen::{shows_prompt, CompiledMarkers, Screen};
use super::tmux::{self, PaneKind};

/// What to do in the pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    /// Read the screen; if the input box is empty and no dialog is open, paste the prompt
    /// and press the submit key.
    Type,
    /// Press the submit key again if the prompt still shows in the input box.
    SubmitAgain,
    /// Only read the screen (for a failure's detail).
    Look,
}

/// One order for a pane.
#[derive(Debug, Clone)]
pub struct TypeJob {
    pub drive_id: String,
    pub kind: TypeKind,
    /// A tmux pane (`socket`, `pane_id`) or a kitty window (`socket`: the instance's
    /// address, `pane_id`: the window's id).
    pub place: PaneKind,
    pub socket: PathBuf,
    pub pane_id: String,
    /// The agent's process: gone means the agent exited.
    pub agent_pid: u32,
    pub text: String,
    pub terminal: TerminalInput,
    /// The agent's own server, for a route that posts the prompt instead of typing it
    /// (opencode): the order goes there, not to the pane.
    pub server: Option<super::opencode::ServerTarget>,
}

/// How an order ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeResult {
    /// Pasted, and the submit key pressed once (for an agent's server: the prompt posted).
    Typed,
    /// Posted to the agent's own server, which recorded it as a user message (its event
    /// stream said so): the agent's own evidence, at once.
    Recorded {
        /// The session (chat) it went to.
        session: String,
        /// When the server recorded it (its event's time, Unix ms), if it said.
        at_ms: Option<u64>,
    },
    /// The submit key pressed again.
    PressedAgain,
    /// Nothing was typed or pressed: the screen says why (for `Look`, what it shows).
    Untouched(Screen),
    /// Something went wrong; `pasted` says whether the prompt may be in the input box.
    Failed { blocker: Blocker, pasted: bool },
}

/// An order done, as the daemon's loop hears of it.
#[derive(Debug, Clone)]
pub struct Typed {
    pub drive_id: String,
    pub kind: TypeKind,
    pub result: TypeResult,
    /// The last lines of the screen seen, for a failure's detail.
    pub screen_tail: String,
}

/// One read or write of an IDE window's integrated terminal, asked of the daemon's loop
/// (which sends `terminal.io` to the window's plugin and hands back its answer).
#[derive(Debug)]
pub struct IdeTerminalRequest {
    pub session_id: String,
    pub terminal_id: String,
    pub action: koru_protocol::TerminalAction,
    /// The screen (for a read; empty for a write), or why it could not be done.
    pub reply: std::sync::mpsc::Sender<Result<String, String>>,
}

/// How long the typist waits for an IDE window to answer one `terminal.io`.
const IDE_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `request` to the loop; `false` when the loop is gone.
pub type IdeSend<'a> = &'a (dyn Fn(IdeTerminalRequest) -> bool + Sync);

/// One `terminal.io` round trip, blocking.
fn ide_io(
    job: &TypeJob,
    action: koru_protocol::TerminalAction,
    send: IdeSend,
) -> Result<String, String> {
    let (reply, answer) = std::sync::mpsc::channel();
    let request = IdeTerminalRequest {
        session_id: job.socket.to_string_lossy().into_owned(),
        terminal_id: job.pane_id.clone(),
        action,
        reply,
    };
    if !send(request) {
        return Err("the daemon is stopping".into());
    }
    match answer.recv_timeout(IDE_ANSWER_TIMEOUT) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "the IDE window did not answer within {} s",
            IDE_ANSWER_TIMEOUT.as_secs()
        )),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            Err("the IDE window's plugin went away".into())
        }
    }
}

/// Carries out type orders off the loop; each answer comes back as a [`Typed`] event.
pub trait TerminalTypist: Send + Sync {
    fn start(&self, job: TypeJob);
    /// Whether the terminal's tool (tmux, kitty) can be run here (`Err`: the blocker for
    /// the route).
    fn available(&self, place: PaneKind) -> Result<(), Blocker>;
    /// Whether the agent's process still runs.
    fn alive(&self, pid: u32) -> bool;
}

/// Types for real, with the `tmux` on PATH, on tokio's blocking pool.
pub struct SystemTerminalTypist<E> {
    events: tokio::sync::mpsc::Sender<E>,
}

impl<E> SystemTerminalTypist<E> {
    pub fn new(events: tokio::sync::mpsc::Sender<E>) -> Self {
        SystemTerminalTypist { events }
    }
}

/// tmux's version, asked once.
fn tmux_version() -> Result<(u32, u32), Blocker> {
    static VERSION: std::sync::OnceLock<Result<(u32, u32), String>> = std::sync::OnceLock::new();
    VERSION
        .get_or_init(|| tmux::version().map_err(|e| e.to_string()))
        .clone()
        .map_err(|detail| Blocker::new(blocker::INJECTOR_MISSING, detail))
}

impl<E: From<Typed> + From<IdeTerminalRequest> + Send + 'static> TerminalTypist
    for SystemTerminalTypist<E>
{
    fn start(&self, job: TypeJob) {
        let events = self.events.clone();
        if let Some(target) = job.server.clone() {
            tokio::spawn(async move {
                let proof = Duration::from_millis(job.terminal.proof_ms);
                let answer = super::opencode::run(job.kind, &target, &job.text, proof).await;
                let typed = Typed {
                    drive_id: job.drive_id,
                    kind: job.kind,
                    result: answer.result,
                    screen_tail: answer.detail,
                };
                let _ = events.send(E::from(typed)).await;
            });
            return;
        }
        tokio::spawn(async move {
            let drive_id = job.drive_id.clone();
            let kind = job.kind;
            let to_loop = events.clone();
            let send =
                move |request: IdeTerminalRequest| to_loop.blocking_send(E::from(request)).is_ok();
            let typed = tokio::task::spawn_blocking(move || run(&job, &send))
                .await
                .unwrap_or_else(|error| Typed {
                    drive_id,
                    kind,
                    result: TypeResult::Failed {
                        blocker: Blocker::new(
                            blocker::TERMINAL_FAILED,
                            format!("typing into the pane failed: {error}"),
                        ),
                        pasted: kind == TypeKind::Type,
                    },
                    screen_tail: String::new(),
                });
            let _ = events.send(E::from(typed)).await;
        });
    }

    fn available(&self, place: PaneKind) -> Result<(), Blocker> {
        match place {
            PaneKind::Tmux => tmux_version().map(|_| ()),
            PaneKind::Kitty => on_path("kitty", "its remote control (`kitty @`)"),
            PaneKind::Wezterm => on_path("wezterm", "its CLI (`wezterm cli`)"),
            // The window's plugin reported the terminal, so it reads and writes it.
            PaneKind::IdeTerminal => Ok(()),
        }
    }

    fn alive(&self, pid: u32) -> bool {
        agent_alive(pid)
    }
}

/// Whether the terminal's `program` is on PATH (the agent was found through it, so it is,
/// unless PATH changed).
fn on_path(program: &str, what: &str) -> Result<(), Blocker> {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
    if found {
        Ok(())
    } else {
        Err(Blocker::new(
            blocker::INJECTOR_MISSING,
            format!("{program} is not on the daemon's PATH: {what} cannot be run"),
        ))
    }
}

/// The last non-empty lines of a screen, for a blocker's detail.
pub fn tail(screen: &str, lines: usize) -> String {
    let kept: Vec<&str> = screen
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

fn gone(job: &TypeJob, detail: String) -> Typed {
    Typed {
        drive_id: job.drive_id.clone(),
        kind: job.kind,
        result: TypeResult::Failed {
            blocker: Blocker::new(blocker::AGENT_EXITED, detail),
            pasted: false,
        },
        screen_tail: String::new(),
    }
}

fn agent_alive(pid: u32) -> bool {
    // A killed agent can stay a zombie for seconds (seen with Claude Code killed mid-reply:
    // its parent, the tmux server, cannot reap it until all its threads have exited), so
    // its /proc entry alone does not say it runs.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// What the pane (window) shows now.
fn capture(job: &TypeJob, ide: IdeSend) -> Result<String, String> {
    match job.place {
        PaneKind::IdeTerminal => ide_io(job, koru_protocol::TerminalAction::Read, ide),
        PaneKind::Tmux => tmux::capture(&job.socket, &job.pane_id).map_err(|e| e.to_string()),
        PaneKind::Kitty => super::kitty::screen(&job.socket.to_string_lossy(), kitty_window(job)?)
            .map_err(|e| e.to_string()),
        PaneKind::Wezterm => super::wezterm::screen(
            &koru_injectors::SystemRunner,
            &job.socket.to_string_lossy(),
            kitty_window(job)?,
        )
        .map_err(|e| e.to_string()),
    }
}

/// The kitty window's (WezTerm pane's) number.
fn kitty_window(job: &TypeJob) -> Result<u64, String> {
    job.pane_id
        .parse()
        .map_err(|_| format!("{:?} is not a window or pane number", job.pane_id))
}

/// Pastes the prompt as one bracketed paste. When it fails nothing reached the agent (one
/// call each: tmux's `paste-buffer`, kitty's `send-text`).
fn paste(job: &TypeJob, ide: IdeSend) -> Result<(), String> {
    match job.place {
        PaneKind::IdeTerminal => ide_io(
            job,
            koru_protocol::TerminalAction::Write {
                data: format!("\u{1b}[200~{}\u{1b}[201~", job.text),
            },
            ide,
        )
        .map(|_| ()),
        PaneKind::Tmux => {
            let version = tmux_version().map_err(|b| b.detail)?;
            let buffer = format!("koru-{}", job.drive_id);
            tmux::paste(&job.socket, &job.pane_id, &job.text, &buffer, version)
                .map_err(|e| e.to_string())
        }
        PaneKind::Kitty => {
            super::kitty::paste(&job.socket.to_string_lossy(), kitty_window(job)?, &job.text)
                .map_err(|e| e.to_string())
        }
        PaneKind::Wezterm => super::wezterm::paste(
            &koru_injectors::SystemRunner,
            &job.socket.to_string_lossy(),
            kitty_window(job)?,
            &job.text,
        )
        .map_err(|e| e.to_string()),
    }
}

/// Presses the registry's submit key.
fn press(job: &TypeJob, ide: IdeSend) -> Result<(), String> {
    match job.place {
        PaneKind::IdeTerminal => {
            let data = super::key_bytes(&job.terminal.submit_key)
                .ok_or_else(|| super::unknown_key(&job.terminal.submit_key))?;
            ide_io(
                job,
                koru_protocol::TerminalAction::Write {
                    data: data.to_string(),
                },
                ide,
            )
            .map(|_| ())
        }
        PaneKind::Tmux => tmux::send_key(&job.socket, &job.pane_id, &job.terminal.submit_key)
            .map_err(|e| e.to_string()),
        PaneKind::Kitty => super::kitty::press(
            &job.socket.to_string_lossy(),
            kitty_window(job)?,
            &job.terminal.submit_key,
        )
        .map_err(|e| e.to_string()),
        PaneKind::Wezterm => super::wezterm::press(
            &koru_injectors::SystemRunner,
            &job.socket.to_string_lossy(),
            kitty_window(job)?,
            &job.terminal.submit_key,
        )
        .map_err(|e| e.to_string()),
    }
}

/// Carries out one order, blocking.
pub fn run(job: &TypeJob, ide: IdeSend) -> Typed {
    let answer = |result: TypeResult, screen: &str| Typed {
        drive_id: job.drive_id.clone(),
        kind: job.kind,
        result,
        screen_tail: tail(screen, 8),
    };
    let failed = |detail: String, pasted: bool| TypeResult::Failed {
        blocker: Blocker::new(blocker::TERMINAL_FAILED, detail),
        pasted,
    };
    if !agent_alive(job.agent_pid) {
        return gone(
            job,
            format!(
                "the agent (pid {}) in pane {} is no longer running",
                job.agent_pid, job.pane_id
            ),
        );
    }
    let screen = match capture(job, ide) {
        Ok(screen) => screen,
        // The window's plugin answered that it cannot read the terminal (or went away): the
        // agent still runs, the terminal failed.
        Err(error) if job.place == PaneKind::IdeTerminal => {
            return answer(
                failed(
                    format!("terminal {} cannot be read: {error}", job.pane_id),
                    false,
                ),
                "",
            )
        }
        Err(error) => return gone(job, format!("pane {} cannot be read: {error}", job.pane_id)),
    };
    let markers = CompiledMarkers::new(&job.terminal.screen);
    let seen = markers.read(&screen);
    match job.kind {
        TypeKind::Look => answer(TypeResult::Untouched(seen), &screen),
        TypeKind::SubmitAgain => {
            if matches!(seen, Screen::Dialog(_)) || !shows_prompt(&markers, &screen, &job.text) {
                return answer(TypeResult::Untouched(seen), &screen);
            }
            match press(job, ide) {
                Ok(()) => answer(TypeResult::PressedAgain, &screen),
                Err(error) => answer(failed(error, true), &screen),
            }
        }
        TypeKind::Type => {
            if seen != Screen::Ready {
                return answer(TypeResult::Untouched(seen), &screen);
            }
            if job.place == PaneKind::Tmux {
                if let Err(blocker) = tmux_version() {
                    return answer(
                        TypeResult::Failed {
                            blocker,
                            pasted: false,
                        },
                        &screen,
                    );
                }
            }
            if let Err(error) = paste(job, ide) {
                return answer(failed(error, false), &screen);
            }
            std::thread::sleep(Duration::from_millis(job.terminal.settle_ms));
            // A dialog that opened meanwhile must not get the key.
            let after = capture(job, ide).unwrap_or_default();
            if let Screen::Dialog(text) = markers.read(&after) {
                return answer(
                    TypeResult::Failed {
                        blocker: Blocker::new(
                            blocker::NEEDS_INPUT,
                            format!("a dialog opened while the prompt was pasted; the submit key was not pressed: {text}"),
                        ),
                        pasted: true,
                    },
                    &after,
                );
            }
            match press(job, ide) {
                Ok(()) => answer(TypeResult::Typed, &after),
                Err(error) => answer(failed(error, true), &after),
            }
        }
    }
}

/// A typist for unit tests: records the orders; the test answers them. Every agent is
/// alive but those in `exited`.
#[derive(Debug, Clone, Default)]
pub struct RecordingTerminalTypist {
    pub started: std::sync::Arc<std::sync::Mutex<Vec<TypeJob>>>,
    pub exited: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}

impl TerminalTypist for RecordingTerminalTypist {
    fn start(&self, job: TypeJob) {
        if let Ok(mut started) = self.started.lock() {
            started.push(job);
        }
    }

    fn available(&self, _place: PaneKind) -> Result<(), Blocker> {
        Ok(())
    }

    fn alive(&self, pid: u32) -> bool {
        self.exited.lock().map_or(true, |gone| !gone.contains(&pid))
    }
}

#[cfg(test)]
mod tests {
    use super::agent_alive;

    #[test]
    fn a_killed_agent_not_yet_reaped_is_not_alive() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        assert!(agent_alive(child.id()));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // Not waited for yet: a zombie, its /proc entry still there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while agent_alive(child.id()) {
            assert!(std::time::Instant::now() < deadline, "still seen alive");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(std::path::Path::new(&format!("/proc/{}", child.id())).exists());
        child.wait().unwrap();
        assert!(!agent_alive(child.id()));
    }
}

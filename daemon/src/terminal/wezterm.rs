//! WezTerm's panes through its own CLI (`wezterm cli`, which talks to the running GUI or mux server at `$WEZTERM_UNIX_SOCKET`): the panes of one WezTerm (`list --format json`), a pane's screen (`get-text`), bytes written to a pane as they are (`send-text --no-paste`, Koru adding the bracketed-paste markers itself as for kitty), and the panes' first processes found from what WezTerm started (`WEZTERM_PANE`, `WEZTERM_UNIX_SOCKET` in their environment). WezTerm cannot be installed on the machine Koru is tested on (docs/research/terminal-places.md §2), so this is tested against a stand-in for its CLI built from its documented behaviour.

use std::collections::HashMap;
use std::time::Duration;

use koru_injectors::CommandRunner;
#[cfg(test)]
use koru_injectors::InjectError;
use serde::Deserialize;

use super::procs::Process;

/// One pane of a WezTerm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeztermPane {
    /// The socket of the GUI or mux server that holds it (`WEZTERM_UNIX_SOCKET`).
    pub socket: String,
    /// `WEZTERM_PANE`: unique in its server, stable for the pane's life.
    pub pane_id: u64,
    /// The pane's terminal device (`/dev/pts/N`; WezTerm 20230408 and later).
    pub tty: Option<String>,
    /// The pane's current folder (from its `file://host/path` URL).
    pub cwd: String,
    /// `window N, tab "title"`, for people.
    pub place: String,
}

/// Why WezTerm could not be asked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WeztermError {
    #[error("WezTerm is not installed (no `wezterm` on PATH)")]
    Missing,
    #[error("wezterm cli {command} failed: {detail}")]
    Failed { command: String, detail: String },
    #[error("wezterm cli list printed what Koru cannot read: {0}")]
    Unreadable(String),
}

#[derive(Deserialize)]
struct ListedPane {
    window_id: u64,
    pane_id: u64,
    #[serde(default)]
    tab_title: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    tty_name: Option<String>,
}

/// The path of a `file://host/path` URL (`%XX` escapes decoded); anything else as it is.
fn path_of_url(url: &str) -> String {
    let Some(rest) = url.strip_prefix("file://") else {
        return url.to_string();
    };
    let path = rest.find('/').map_or("/", |at| &rest[at..]);
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    let path = String::from_utf8_lossy(&decoded).into_owned();
    if path.len() > 1 {
        path.trim_end_matches('/').to_string()
    } else {
        path
    }
}

/// Parses `wezterm cli list --format json` (its documented stable format).
pub fn parse_list(socket: &str, text: &str) -> Result<Vec<WeztermPane>, WeztermError> {
    let panes: Vec<ListedPane> =
        serde_json::from_str(text).map_err(|e| WeztermError::Unreadable(e.to_string()))?;
    Ok(panes
        .into_iter()
        .map(|pane| {
            let title = if pane.tab_title.is_empty() {
                pane.title
            } else {
                pane.tab_title
            };
            WeztermPane {
                socket: socket.to_string(),
                pane_id: pane.pane_id,
                tty: pane.tty_name.filter(|t| !t.is_empty()),
                cwd: path_of_url(&pane.cwd),
                place: format!("window {}, tab \"{title}\"", pane.window_id),
            }
        })
        .collect())
}

/// How long one `wezterm cli` may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `wezterm cli --no-auto-start ARGS` against the server at `socket`, with `input` on
/// stdin; its stdout. The socket is given as `WEZTERM_UNIX_SOCKET` (the CLI has no option
/// for it), through `env`.
fn cli(
    runner: &dyn CommandRunner,
    socket: &str,
    args: &[&str],
    input: Option<&str>,
) -> Result<String, WeztermError> {
    let command = args.first().copied().unwrap_or("").to_string();
    let variable = format!("WEZTERM_UNIX_SOCKET={socket}");
    let full: Vec<&str> = [variable.as_str(), "wezterm", "cli", "--no-auto-start"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let output = runner
        .run("env", &full, input, CLI_TIMEOUT)
        .map_err(|error| WeztermError::Failed {
            command: command.clone(),
            detail: error.to_string(),
        })?;
    if !output.success {
        let stderr = output.stderr.trim();
        // `env` says it could not run the program.
        if stderr.contains("wezterm") && stderr.contains("No such file or directory") {
            return Err(WeztermError::Missing);
        }
        return Err(WeztermError::Failed {
            command,
            detail: if stderr.is_empty() {
                "it failed and said nothing".into()
            } else {
                stderr.to_string()
            },
        });
    }
    Ok(output.stdout)
}

/// The panes of the WezTerm serving at `socket`.
pub fn list_panes(
    runner: &dyn CommandRunner,
    socket: &str,
) -> Result<Vec<WeztermPane>, WeztermError> {
    parse_list(
        socket,
        &cli(runner, socket, &["list", "--format", "json"], None)?,
    )
}

/// What pane `pane_id` shows now (its visible screen).
pub fn screen(
    runner: &dyn CommandRunner,
    socket: &str,
    pane_id: u64,
) -> Result<String, WeztermError> {
    cli(
        runner,
        socket,
        &["get-text", "--pane-id", &pane_id.to_string()],
        None,
    )
}

/// Writes `bytes` to pane `pane_id` as they are (`--no-paste`: no wrapping, no newline
/// rewriting).
pub fn send_bytes(
    runner: &dyn CommandRunner,
    socket: &str,
    pane_id: u64,
    bytes: &str,
) -> Result<(), WeztermError> {
    cli(
        runner,
        socket,
        &["send-text", "--pane-id", &pane_id.to_string(), "--no-paste"],
        Some(bytes),
    )
    .map(|_| ())
}

/// Pastes `text` into pane `pane_id` as one bracketed paste (the markers written here, as
/// WezTerm's own paste mode would only for a program that asked; the agents all ask).
pub fn paste(
    runner: &dyn CommandRunner,
    socket: &str,
    pane_id: u64,
    text: &str,
) -> Result<(), WeztermError> {
    send_bytes(
        runner,
        socket,
        pane_id,
        &format!("\u{1b}[200~{text}\u{1b}[201~"),
    )
}

/// Presses `key` (a tmux key name) in pane `pane_id`, as its bytes.
pub fn press(
    runner: &dyn CommandRunner,
    socket: &str,
    pane_id: u64,
    key: &str,
) -> Result<(), WeztermError> {
    let bytes = super::key_bytes(key).ok_or_else(|| WeztermError::Failed {
        command: "send-text".into(),
        detail: super::unknown_key(key),
    })?;
    send_bytes(runner, socket, pane_id, bytes)
}

/// A process WezTerm started in one of its panes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeztermShell {
    /// The process (the pane's first: its shell, usually).
    pub pid: u32,
    /// The socket of the WezTerm that holds the pane.
    pub socket: String,
    pub pane_id: u64,
}

/// Whether a command line is WezTerm's GUI or mux server (the processes panes run under).
fn is_wezterm_server(argv: &[String]) -> bool {
    argv.first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .is_some_and(|name| matches!(name, "wezterm-gui" | "wezterm-mux-server"))
}

/// The panes' first processes among `processes`: the children of a WezTerm GUI or mux
/// server that carry `WEZTERM_PANE` and `WEZTERM_UNIX_SOCKET` (WezTerm sets both for what
/// it starts in a pane).
pub fn shells(
    processes: &HashMap<u32, Process>,
    environ: impl Fn(u32) -> Option<Vec<(String, String)>>,
) -> Vec<WeztermShell> {
    let servers: Vec<u32> = processes
        .values()
        .filter(|p| is_wezterm_server(&p.argv))
        .map(|p| p.pid)
        .collect();
    let mut found: Vec<WeztermShell> = processes
        .values()
        .filter(|p| servers.contains(&p.parent))
        .filter_map(|p| {
            let variables = environ(p.pid)?;
            let value = |name: &str| {
                variables
                    .iter()
                    .find(|(n, v)| n == name && !v.is_empty())
                    .map(|(_, v)| v.clone())
            };
            Some(WeztermShell {
                pid: p.pid,
                socket: value("WEZTERM_UNIX_SOCKET")?,
                pane_id: value("WEZTERM_PANE")?.parse().ok()?,
            })
        })
        .collect();
    found.sort_by_key(|s| s.pid);
    found
}

/// A stand-in for the `wezterm` CLI (WezTerm cannot be installed where Koru is tested),
/// behaving as its source says: `list --format json` prints every pane, `get-text` prints a
/// pane's screen, `send-text --no-paste` writes stdin to the pane as it is, an unknown pane
/// id fails, and without a server at the socket every command fails.
#[cfg(test)]
pub mod stand_in {
    use super::*;
    use std::sync::Mutex;

    /// One pane of the stand-in.
    #[derive(Debug, Clone, Default)]
    pub struct StandInPane {
        pub screen: String,
        /// Every byte written to the pane.
        pub received: String,
    }

    #[derive(Debug, Default)]
    pub struct StandInWezterm {
        /// The socket the stand-in serves at.
        pub socket: String,
        pub panes: Mutex<Vec<(u64, StandInPane)>>,
        /// Every call, as `wezterm cli` arguments.
        pub calls: Mutex<Vec<Vec<String>>>,
    }

    impl CommandRunner for StandInWezterm {
        fn run(
            &self,
            program: &str,
            args: &[&str],
            stdin: Option<&str>,
            _timeout: Duration,
        ) -> Result<koru_injectors::Output, InjectError> {
            assert_eq!(program, "env");
            let failed = |stderr: String| {
                Ok(koru_injectors::Output {
                    success: false,
                    stdout: String::new(),
                    stderr,
                })
            };
            let ok = |stdout: String| {
                Ok(koru_injectors::Output {
                    success: true,
                    stdout,
                    stderr: String::new(),
                })
            };
            let socket = args[0].strip_prefix("WEZTERM_UNIX_SOCKET=").unwrap();
            assert_eq!(&args[1..4], ["wezterm", "cli", "--no-auto-start"]);
            let cli: Vec<&str> = args[4..].to_vec();
            self.calls
                .lock()
                .unwrap()
                .push(cli.iter().map(|s| s.to_string()).collect());
            if socket != self.socket {
                return failed(format!("Error: failed to connect to {socket}"));
            }
            let mut panes = self.panes.lock().unwrap();
            let pane_arg = cli
                .iter()
                .position(|a| *a == "--pane-id")
                .and_then(|at| cli.get(at + 1))
                .and_then(|id| id.parse::<u64>().ok());
            match cli.first().copied() {
                Some("list") => {
                    let listed: Vec<serde_json::Value> = panes
                        .iter()
                        .map(|(id, _)| {
                            serde_json::json!({
                                "window_id": 0, "tab_id": 0, "pane_id": id, "workspace": "default",
                                "title": "bash", "tab_title": "", "cwd": "file://box/home/me/my%20repo/",
                                "tty_name": format!("/dev/pts/{id}"), "is_active": true,
                            })
                        })
                        .collect();
                    ok(serde_json::to_string(&listed).unwrap())
                }
                Some(command @ ("get-text" | "send-text")) => {
                    let Some(pane) = pane_arg
                        .and_then(|id| panes.iter_mut().find(|(p, _)| *p == id))
                        .map(|(_, pane)| pane)
                    else {
                        return failed(format!("Error: pane {pane_arg:?} not found"));
                    };
                    if command == "get-text" {
                        return ok(pane.screen.clone());
                    }
                    assert!(cli.contains(&"--no-paste"), "Koru writes its own markers");
                    pane.received.push_str(stdin.unwrap_or(""));
                    ok(String::new())
                }
                other => failed(format!("error: unrecognized subcommand {other:?}")),
            }
        }

        fn spawn(&self, _: &str, _: &[&str], _: &str) -> Result<(), InjectError> {
            unreachable!("wezterm cli is never left running")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stand_in::{StandInPane, StandInWezterm};
    use super::*;

    fn stand_in() -> StandInWezterm {
        StandInWezterm {
            socket: "/run/user/1000/wezterm/gui-sock-4242".into(),
            panes: std::sync::Mutex::new(vec![
                (
                    0,
                    StandInPane {
                        screen: "$ claude\n❯ \u{a0}\n".into(),
                        ..StandInPane::default()
                    },
                ),
                (3, StandInPane::default()),
            ]),
            ..StandInWezterm::default()
        }
    }

    #[test]
    fn the_list_gives_each_pane_with_its_folder_and_terminal() {
        let wezterm = stand_in();
        let panes = list_panes(&wezterm, &wezterm.socket).unwrap();
        assert_eq!(panes.len(), 2);
        assert_eq!(
            panes[1],
            WeztermPane {
                socket: wezterm.socket.clone(),
                pane_id: 3,
                tty: Some("/dev/pts/3".into()),
                cwd: "/home/me/my repo".into(),
                place: "window 0, tab \"bash\"".into(),
            }
        );
        assert_eq!(path_of_url("file:///"), "/");
        assert_eq!(path_of_url("/plain"), "/plain");
        assert!(matches!(
            parse_list("s", "{"),
            Err(WeztermError::Unreadable(_))
        ));
    }

    #[test]
    fn a_prompt_goes_as_one_bracketed_paste_and_enter_as_a_carriage_return() {
        let wezterm = stand_in();
        let socket = wezterm.socket.clone();
        assert!(screen(&wezterm, &socket, 0).unwrap().contains("❯"));
        paste(&wezterm, &socket, 0, "zwei\nZeilen ✓").unwrap();
        press(&wezterm, &socket, 0, "Enter").unwrap();
        let panes = wezterm.panes.lock().unwrap();
        assert_eq!(
            panes[0].1.received,
            "\u{1b}[200~zwei\nZeilen ✓\u{1b}[201~\r"
        );
        assert_eq!(panes[1].1.received, "", "the other pane gets nothing");
        drop(panes);
        assert_eq!(
            wezterm.calls.lock().unwrap()[1],
            ["send-text", "--pane-id", "0", "--no-paste"]
        );
        // An unknown pane, another socket, an unknown key: said, nothing sent.
        let error = send_bytes(&wezterm, &socket, 9, "x").unwrap_err();
        assert!(
            error.to_string().contains("pane Some(9) not found"),
            "{error}"
        );
        let error = screen(&wezterm, "/elsewhere", 0).unwrap_err();
        assert!(error.to_string().contains("failed to connect"), "{error}");
        assert!(press(&wezterm, &socket, 0, "F13").is_err());
    }

    #[test]
    fn the_panes_first_processes_are_found_from_what_wezterm_started() {
        use super::super::procs::test_process as process;
        let processes: HashMap<u32, Process> = [
            process(100, 1, &["/usr/bin/wezterm-gui", "start"]),
            process(101, 100, &["-zsh"]),
            process(102, 100, &["bash"]),
            // Not started by WezTerm, though it carries the variables (an inherited env).
            process(200, 1, &["bash"]),
            process(300, 1, &["wezterm-mux-server", "--daemonize"]),
            process(301, 300, &["fish"]),
        ]
        .into_iter()
        .collect();
        let environ = |pid: u32| {
            let pane = match pid {
                101 => "0",
                200 => "5",
                301 => "1",
                _ => return Some(vec![]),
            };
            let socket = if pid == 301 {
                "/run/user/1000/wezterm/sock"
            } else {
                "/run/user/1000/wezterm/gui-sock-100"
            };
            Some(vec![
                ("WEZTERM_PANE".to_string(), pane.to_string()),
                ("WEZTERM_UNIX_SOCKET".to_string(), socket.to_string()),
            ])
        };
        assert_eq!(
            shells(&processes, environ),
            vec![
                WeztermShell {
                    pid: 101,
                    socket: "/run/user/1000/wezterm/gui-sock-100".into(),
                    pane_id: 0
                },
                WeztermShell {
                    pid: 301,
                    socket: "/run/user/1000/wezterm/sock".into(),
                    pane_id: 1
                },
            ]
        );
    }
}

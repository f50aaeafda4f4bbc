//! kitty's remote control, through its own CLI (`kitty @ --to SOCKET …`, which every kitty since 0.19 has; `kitten @` only from 0.27): the windows of one kitty instance with the processes in their foreground (`ls`), a window's screen (`get-text`), and bytes sent to a window (`send-text --stdin`, written as-is — kitty 0.26 has no `--bracketed-paste`, so a caller adds the markers itself). kitty reports success for a send that matched no window: whether it arrived is for the agent's own record to prove (docs/research/terminal-places.md).

use std::time::Duration;

use koru_injectors::{CommandRunner, InjectError, SystemRunner};
use serde::Deserialize;

/// One kitty window: the shell it started, what runs in its foreground, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KittyWindow {
    /// The instance's remote-control address (`unix:/path`), as `KITTY_LISTEN_ON` says it.
    pub listen_on: String,
    /// `KITTY_WINDOW_ID`: unique in its instance, stable for the window's life.
    pub id: u64,
    /// The window's first process (its shell, usually).
    pub pid: u32,
    /// The foreground process group of its tty: the agent when one runs there.
    pub foreground: Vec<u32>,
    pub cwd: String,
    /// `os window N, tab "title"`, for people.
    pub place: String,
}

/// Why kitty could not be asked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KittyError {
    #[error("kitty is not installed (no `kitty` on PATH)")]
    Missing,
    /// Remote control is off, or nothing listens at the address.
    #[error("kitty's remote control does not answer at {listen_on}: {detail} (start kitty with `-o allow_remote_control=socket-only --listen-on unix:/tmp/kitty-{{kitty_pid}}`, or set `allow_remote_control socket-only` and `listen_on unix:/tmp/kitty` in kitty.conf)")]
    NoRemoteControl { listen_on: String, detail: String },
    #[error("kitty @ {command} failed: {detail}")]
    Failed { command: String, detail: String },
    #[error("kitty @ ls printed what Koru cannot read: {0}")]
    Unreadable(String),
}

#[derive(Deserialize)]
struct OsWindow {
    id: u64,
    #[serde(default)]
    tabs: Vec<Tab>,
}

#[derive(Deserialize)]
struct Tab {
    #[serde(default)]
    title: String,
    #[serde(default)]
    windows: Vec<Window>,
}

#[derive(Deserialize)]
struct Window {
    id: u64,
    pid: u32,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    foreground_processes: Vec<Process>,
}

#[derive(Deserialize)]
struct Process {
    pid: u32,
}

/// Parses `kitty @ ls` output (0.26 and later: the fields read are in every version).
pub fn parse_ls(listen_on: &str, text: &str) -> Result<Vec<KittyWindow>, KittyError> {
    let os_windows: Vec<OsWindow> =
        serde_json::from_str(text).map_err(|e| KittyError::Unreadable(e.to_string()))?;
    let mut found = Vec::new();
    for os_window in os_windows {
        for tab in os_window.tabs {
            for window in tab.windows {
                found.push(KittyWindow {
                    listen_on: listen_on.to_string(),
                    id: window.id,
                    pid: window.pid,
                    foreground: window.foreground_processes.iter().map(|p| p.pid).collect(),
                    cwd: window.cwd,
                    place: format!("os window {}, tab \"{}\"", os_window.id, tab.title),
                });
            }
        }
    }
    Ok(found)
}

/// How long one `kitty @` may take (it answers in milliseconds; one that hangs is killed).
const REMOTE_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `kitty @ --to LISTEN_ON ARGS` with `input` on stdin; its stdout.
fn remote(listen_on: &str, args: &[&str], input: Option<&str>) -> Result<String, KittyError> {
    let command = args.first().copied().unwrap_or("").to_string();
    let full: Vec<&str> = ["@", "--to", listen_on]
        .iter()
        .chain(args)
        .copied()
        .collect();
    let output = SystemRunner
        .run("kitty", &full, input, REMOTE_TIMEOUT)
        .map_err(|error| match error {
            InjectError::ToolMissing { .. } => KittyError::Missing,
            other => KittyError::Failed {
                command: command.clone(),
                detail: other.to_string(),
            },
        })?;
    let stderr = output.stderr.trim().to_string();
    if !output.success {
        if stderr.contains("No listen on socket found")
            || stderr.contains("Remote control is disabled")
        {
            return Err(KittyError::NoRemoteControl {
                listen_on: listen_on.to_string(),
                detail: stderr,
            });
        }
        return Err(KittyError::Failed {
            command,
            detail: if stderr.is_empty() {
                "it failed and said nothing".to_string()
            } else {
                stderr
            },
        });
    }
    Ok(output.stdout)
}

/// The windows of the kitty instance listening at `listen_on`.
pub fn list_windows(listen_on: &str) -> Result<Vec<KittyWindow>, KittyError> {
    parse_ls(listen_on, &remote(listen_on, &["ls"], None)?)
}

/// What window `id` shows now, one line per screen row.
pub fn screen(listen_on: &str, id: u64) -> Result<String, KittyError> {
    remote(
        listen_on,
        &["get-text", "--match", &format!("id:{id}")],
        None,
    )
}

/// Sends `text` to window `id` as it is (no escapes interpreted, no newline rewritten).
/// kitty answers success even when no window matched: only the receiving program can say
/// whether the text arrived.
pub fn send_text(listen_on: &str, id: u64, text: &str) -> Result<(), KittyError> {
    remote(
        listen_on,
        &["send-text", "--match", &format!("id:{id}"), "--stdin"],
        Some(text),
    )
    .map(|_| ())
}

/// Pastes `text` into window `id` as one bracketed paste: kitty before 0.32.2 cannot add
/// the markers itself, and every agent Koru types into turns bracketed paste on, so the
/// markers are written here (the text holds no escape: `tmux::terminal_text` refuses
/// control characters, so it cannot end the paste early).
pub fn paste(listen_on: &str, id: u64, text: &str) -> Result<(), KittyError> {
    send_text(listen_on, id, &format!("\u{1b}[200~{text}\u{1b}[201~"))
}

/// Presses `key` (a tmux key name) in window `id`.
pub fn press(listen_on: &str, id: u64, key: &str) -> Result<(), KittyError> {
    let bytes = super::key_bytes(key).ok_or_else(|| KittyError::Failed {
        command: "send-text".into(),
        detail: super::unknown_key(key),
    })?;
    send_text(listen_on, id, bytes)
}

/// A running kitty, and where its remote control listens when it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KittyInstance {
    pub pid: u32,
    /// `None`: remote control is off (nothing it started was told an address, and its
    /// command line names none).
    pub listen_on: Option<String>,
}

/// The variables of process `pid` (`None`: gone or not this user's).
pub fn environ_of(pid: u32) -> Option<Vec<(String, String)>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                let (name, value) = entry.split_once('=')?;
                Some((name.to_string(), value.to_string()))
            })
            .collect(),
    )
}

/// The address a kitty command line names: `--listen-on X` / `--listen-on=X`, or
/// `-o listen_on=X` / `--override=listen_on=X`, `{kitty_pid}` put in as kitty does.
pub fn listen_on_from_argv(argv: &[String], pid: u32) -> Option<String> {
    let mut found = None;
    let mut words = argv.iter().skip(1);
    while let Some(word) = words.next() {
        let value = if word == "--listen-on" {
            words.next().cloned()
        } else if let Some(value) = word.strip_prefix("--listen-on=") {
            Some(value.to_string())
        } else if word == "-o" || word == "--override" {
            words
                .next()
                .and_then(|o| o.strip_prefix("listen_on=").map(str::to_string))
        } else if let Some(o) = word
            .strip_prefix("--override=")
            .or_else(|| word.strip_prefix("-o"))
        {
            o.strip_prefix("listen_on=").map(str::to_string)
        } else {
            None
        };
        if let Some(value) = value.filter(|v| !v.is_empty() && v != "none") {
            found = Some(value.replace("{kitty_pid}", &pid.to_string()));
        }
    }
    found
}

/// Whether a command line is a kitty instance (not `kitty @ …` or `kitty +kitten …`,
/// which are kitty's own tools).
fn is_kitty_instance(argv: &[String]) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let name = std::path::Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    name == "kitty"
        && !argv
            .get(1)
            .is_some_and(|a| a == "@" || a.starts_with('+') || a == "--version")
}

/// The kitty instances among `processes`. Where one listens comes from what it started
/// (`KITTY_LISTEN_ON`, which kitty sets only when its remote control listens, whether
/// asked on its command line or in kitty.conf), else from its command line.
pub fn instances(
    processes: &std::collections::HashMap<u32, super::procs::Process>,
    environ: impl Fn(u32) -> Option<Vec<(String, String)>>,
) -> Vec<KittyInstance> {
    let mut found: Vec<KittyInstance> = processes
        .values()
        .filter(|p| is_kitty_instance(&p.argv))
        // A kitty started from a kitty window is an instance of its own; one started by
        // kitty itself (single-instance forks) is not.
        .filter(|p| {
            processes
                .get(&p.parent)
                .is_none_or(|parent| !is_kitty_instance(&parent.argv))
        })
        .map(|kitty| {
            let mut children: Vec<u32> = processes
                .values()
                .filter(|p| p.parent == kitty.pid)
                .map(|p| p.pid)
                .collect();
            children.sort_unstable();
            let from_children = children.into_iter().find_map(|child| {
                environ(child)?
                    .into_iter()
                    .find(|(name, value)| name == "KITTY_LISTEN_ON" && !value.is_empty())
                    .map(|(_, value)| value)
            });
            KittyInstance {
                pid: kitty.pid,
                listen_on: from_children.or_else(|| listen_on_from_argv(&kitty.argv, kitty.pid)),
            }
        })
        .collect();
    found.sort_by_key(|k| k.pid);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_address_comes_from_what_kitty_started_else_from_its_command_line() {
        use super::super::procs::{test_process as process, Process};
        let processes: std::collections::HashMap<u32, Process> = [
            // Remote control on in kitty.conf: only the shell's variables say where.
            process(100, 1, &["kitty"]),
            process(101, 100, &["-bash"]),
            // On the command line, the shell's variables stripped (`env -i agent`).
            process(
                200,
                1,
                &[
                    "/usr/bin/kitty",
                    "-o",
                    "allow_remote_control=socket-only",
                    "--listen-on",
                    "unix:/tmp/kitty-{kitty_pid}",
                ],
            ),
            process(201, 200, &["claude"]),
            // Off.
            process(300, 1, &["kitty", "--single-instance"]),
            process(301, 300, &["zsh"]),
            // kitty's tools are not instances.
            process(400, 101, &["kitty", "@", "ls"]),
            process(401, 101, &["kitty", "+kitten", "icat", "x.png"]),
        ]
        .into_iter()
        .collect();
        let environ = |pid: u32| {
            (pid == 101).then(|| {
                vec![
                    ("KITTY_WINDOW_ID".to_string(), "1".to_string()),
                    ("KITTY_LISTEN_ON".to_string(), "unix:@kitty-100".to_string()),
                ]
            })
        };
        assert_eq!(
            instances(&processes, environ),
            vec![
                KittyInstance {
                    pid: 100,
                    listen_on: Some("unix:@kitty-100".into())
                },
                KittyInstance {
                    pid: 200,
                    listen_on: Some("unix:/tmp/kitty-200".into())
                },
                KittyInstance {
                    pid: 300,
                    listen_on: None
                },
            ]
        );
        for (words, expected) in [
            (
                &["kitty", "--listen-on=tcp:localhost:5000"][..],
                Some("tcp:localhost:5000"),
            ),
            (
                &["kitty", "--override=listen_on=unix:/run/k"][..],
                Some("unix:/run/k"),
            ),
            (&["kitty", "-olisten_on=unix:/a"][..], Some("unix:/a")),
            (&["kitty", "-o", "font_size=12"][..], None),
            (&["kitty", "--listen-on", "none"][..], None),
        ] {
            assert_eq!(
                listen_on_from_argv(&argv(words), 7).as_deref(),
                expected,
                "{words:?}"
            );
        }
    }

    #[test]
    fn keys_go_as_the_bytes_a_terminal_sends_for_them() {
        assert_eq!(super::super::key_bytes("Enter"), Some("\r"));
        assert_eq!(super::super::key_bytes("C-j"), Some("\n"));
        assert_eq!(super::super::key_bytes("F13"), None);
        let error = press("unix:/nowhere", 1, "F13").unwrap_err();
        assert!(
            error.to_string().contains("cannot send the key \"F13\""),
            "{error}"
        );
    }

    /// `kitty @ ls` of kitty 0.26.5 (Debian 12), trimmed to one OS window with two windows.
    const LS: &str = r#"[{"id": 1, "is_active": true, "is_focused": true, "last_focused": true,
      "platform_window_id": 2097164, "wm_class": "kitty", "wm_name": "kitty",
      "tabs": [{"id": 1, "title": "work", "is_active_tab": true, "is_focused": true, "layout": "fat",
        "windows": [
          {"id": 1, "pid": 10426, "title": "/tmp", "cwd": "/tmp", "cmdline": ["bash", "--posix"],
           "columns": 71, "lines": 22, "is_active_window": true, "is_focused": true, "is_self": false,
           "env": {"KITTY_WINDOW_ID": "1"},
           "foreground_processes": [{"pid": 10426, "cwd": "/tmp", "cmdline": ["bash", "--posix"]}]},
          {"id": 2, "pid": 14437, "title": "claude", "cwd": "/work/app", "cmdline": ["bash"],
           "foreground_processes": [{"pid": 14639, "cwd": "/work/app", "cmdline": ["node", "/usr/bin/claude"]}]}
        ]}]}]"#;

    #[test]
    fn ls_gives_each_window_with_its_shell_and_foreground() {
        let windows = parse_ls("unix:/tmp/k.sock", LS).unwrap();
        assert_eq!(windows.len(), 2);
        assert_eq!(
            windows[1],
            KittyWindow {
                listen_on: "unix:/tmp/k.sock".into(),
                id: 2,
                pid: 14437,
                foreground: vec![14639],
                cwd: "/work/app".into(),
                place: "os window 1, tab \"work\"".into(),
            }
        );
        assert!(matches!(parse_ls("x", "{"), Err(KittyError::Unreadable(_))));
        assert_eq!(parse_ls("x", "[]").unwrap(), vec![]);
    }

    #[test]
    fn remote_control_that_does_not_answer_says_how_to_turn_it_on() {
        if which_kitty().is_none() {
            assert!(
                std::env::var_os("CI").is_none(),
                "kitty is not installed (scripts/test-all.sh installs it)"
            );
            eprintln!("skipped: kitty is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let listen_on = format!("unix:{}", dir.path().join("none.sock").display());
        let error = list_windows(&listen_on).unwrap_err();
        let KittyError::NoRemoteControl { .. } = &error else {
            panic!("{error:?}")
        };
        assert!(
            error.to_string().contains("allow_remote_control"),
            "{error}"
        );
    }

    fn which_kitty() -> Option<std::path::PathBuf> {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join("kitty"))
            .find(|p| p.exists())
    }
}

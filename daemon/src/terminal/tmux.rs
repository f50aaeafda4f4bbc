//! The user's tmux servers and their panes, read on demand with `tmux list-panes -a` (one call per server, no polling): each pane's id, first process, current command and folder, and where it is for people (`session:window.pane`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Which terminal a [`Pane`] is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaneKind {
    /// A tmux pane.
    #[default]
    Tmux,
    /// A kitty window (kitty's remote control reaches it: `terminal::kitty`).
    Kitty,
    /// A WezTerm pane (its CLI reaches it: `terminal::wezterm`).
    Wezterm,
    /// An IDE window's integrated terminal, reached through the window's plugin
    /// (`terminal.io`): `socket` holds the plugin session, `pane_id` the plugin's terminal id.
    IdeTerminal,
}

/// One pane of a tmux server, or one window of a kitty instance (its pane for Koru).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub kind: PaneKind,
    /// The server's socket; for kitty, the instance's remote-control address as
    /// `KITTY_LISTEN_ON` says it (`unix:/tmp/kitty-1234`); for WezTerm, its
    /// `WEZTERM_UNIX_SOCKET`.
    pub socket: PathBuf,
    /// `%N`: unique on its server, stable for the pane's life; for kitty, the window's
    /// `KITTY_WINDOW_ID`; for WezTerm, `WEZTERM_PANE`.
    pub pane_id: String,
    /// The pane's first process (its shell, usually).
    pub pid: u32,
    /// What runs in the pane now, as tmux sees it.
    pub command: String,
    /// The pane's current folder.
    pub path: String,
    /// `session:window.pane`, for people.
    pub place: String,
}

/// Why a server's panes could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error("tmux is not installed (no `tmux` on PATH)")]
    Missing,
    #[error("tmux -S {socket} list-panes failed: {detail}")]
    Failed { socket: PathBuf, detail: String },
}

/// The fields asked of `list-panes`, tab-separated (a folder may hold spaces, not tabs).
const FORMAT: &str =
    "#{pane_id}\t#{pane_pid}\t#{pane_current_command}\t#{pane_current_path}\t#{session_name}:#{window_index}.#{pane_index}";

/// Parses `list-panes -a -F FORMAT` output; lines that do not fit are skipped.
pub fn parse_panes(socket: &Path, text: &str) -> Vec<Pane> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(5, '\t');
            let pane_id = fields.next()?.to_string();
            let pid = fields.next()?.parse().ok()?;
            let command = fields.next()?.to_string();
            let path = fields.next()?.to_string();
            let place = fields.next()?.to_string();
            pane_id.starts_with('%').then_some(Pane {
                kind: PaneKind::Tmux,
                socket: socket.to_path_buf(),
                pane_id,
                pid,
                command,
                path,
                place,
            })
        })
        .collect()
}

/// The panes of the server at `socket`. A socket with no server behind it has no panes.
pub fn list_panes(socket: &Path) -> Result<Vec<Pane>, TmuxError> {
    // `-u`: without a UTF-8 locale (a daemon started by systemd, say) tmux would print
    // every tab and non-ASCII character of the answer as `_`.
    let output = Command::new("tmux")
        .arg("-u")
        .arg("-S")
        .arg(socket)
        .args(["list-panes", "-a", "-F", FORMAT])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => TmuxError::Missing,
            _ => TmuxError::Failed {
                socket: socket.to_path_buf(),
                detail: error.to_string(),
            },
        })?;
    if output.status.success() {
        return Ok(parse_panes(
            socket,
            &String::from_utf8_lossy(&output.stdout),
        ));
    }
    let detail = String::from_utf8_lossy(&output.stderr).trim().to_string();
    // A stale socket (its server gone) is not an error for a look.
    if detail.starts_with("no server running")
        || detail.starts_with("error connecting")
        || detail.starts_with("server exited unexpectedly")
    {
        return Ok(Vec::new());
    }
    Err(TmuxError::Failed {
        socket: socket.to_path_buf(),
        detail,
    })
}

/// The folder this user's tmux servers put their sockets in: `$TMUX_TMPDIR` (else `/tmp`)
/// `/tmux-UID`.
pub fn socket_dir(tmux_tmpdir: Option<&Path>, uid: u32) -> PathBuf {
    tmux_tmpdir
        .unwrap_or(Path::new("/tmp"))
        .join(format!("tmux-{uid}"))
}

/// The server sockets in `dir` (each named server, `default` among them).
pub fn server_sockets(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut sockets: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .collect();
    sockets.sort();
    sockets
}

/// A tmux version as `(major, minor)` from `tmux -V` (`tmux 3.3a` → (3, 3); `tmux next-3.6`
/// → (3, 6)).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let number = text.trim().rsplit([' ', '-']).next()?;
    let mut parts = number.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// The installed tmux's version.
pub fn version() -> Result<(u32, u32), TmuxError> {
    let output = Command::new("tmux")
        .arg("-V")
        .output()
        .map_err(|_| TmuxError::Missing)?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_version(&text).ok_or_else(|| TmuxError::Failed {
        socket: PathBuf::new(),
        detail: format!("cannot read the version from `tmux -V`: {}", text.trim()),
    })
}

/// Why a prompt cannot be typed into a pane as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptRefused {
    /// Control characters (an escape could end the bracketed paste early and run the rest
    /// as keys); tabs and newlines are fine.
    #[error("the prompt holds control character U+{0:04X} at character {1}; only tab and newline are typed into a terminal")]
    ControlCharacter(u32, usize),
    #[error("the prompt is empty")]
    Empty,
}

/// Checks a prompt for a terminal pane (see [`PromptRefused`]); a CRLF is read as LF.
pub fn terminal_text(prompt: &str) -> Result<String, PromptRefused> {
    let text = prompt.replace("\r\n", "\n");
    if text.trim().is_empty() {
        return Err(PromptRefused::Empty);
    }
    if let Some((at, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && *c != '\n' && *c != '\t')
    {
        return Err(PromptRefused::ControlCharacter(c as u32, at));
    }
    Ok(text)
}

fn tmux_call(socket: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<String, TmuxError> {
    use std::io::Write;
    let mut command = Command::new("tmux");
    command
        .arg("-u")
        .arg("-S")
        .arg(socket)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        });
    let failed = |detail: String| TmuxError::Failed {
        socket: socket.to_path_buf(),
        detail,
    };
    let mut child = command.spawn().map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => TmuxError::Missing,
        _ => failed(error.to_string()),
    })?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes).map_err(|e| failed(e.to_string()))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!(
            "tmux {}: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Pastes `text` into `pane` as one bracketed paste that keeps its newlines: loaded into a
/// buffer of its own (`buffer`, unique per drive) from stdin — never through a command line
/// or argv — then `paste-buffer -p -r -d` (bracketed when the program asked for it, LF kept,
/// the buffer deleted). On tmux ≥ 3.7, whose paste sanitises control characters, `-S` keeps
/// the tabs: `text` has passed [`terminal_text`], so it holds no escape.
pub fn paste(
    socket: &Path,
    pane: &str,
    text: &str,
    buffer: &str,
    version: (u32, u32),
) -> Result<(), TmuxError> {
    tmux_call(
        socket,
        &["load-buffer", "-b", buffer, "-"],
        Some(text.as_bytes()),
    )?;
    let mut args = vec!["paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", pane];
    if version >= (3, 7) {
        args.insert(1, "-S");
    }
    let pasted = tmux_call(socket, &args, None);
    if pasted.is_err() {
        // Never leave the prompt behind in a buffer.
        let _ = tmux_call(socket, &["delete-buffer", "-b", buffer], None);
    }
    pasted.map(|_| ())
}

/// Presses Enter in `pane` as a key of its own (the key name `Enter`: a plain carriage
/// return even where extended keys would turn `C-m` into Ctrl+M).
pub fn press_enter(socket: &Path, pane: &str) -> Result<(), TmuxError> {
    tmux_call(socket, &["send-keys", "-t", pane, "Enter"], None).map(|_| ())
}

/// Presses one key in `pane`, by its tmux name (`Enter`, `Tab`); refuses anything that is
/// not a plain key name, so no text goes through `send-keys`.
pub fn send_key(socket: &Path, pane: &str, key: &str) -> Result<(), TmuxError> {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(TmuxError::Failed {
            socket: socket.to_path_buf(),
            detail: format!("{key:?} is not a tmux key name"),
        });
    }
    tmux_call(socket, &["send-keys", "-t", pane, key], None).map(|_| ())
}

/// What `pane` shows now, wrapped lines joined (`capture-pane -p -J`).
pub fn capture(socket: &Path, pane: &str) -> Result<String, TmuxError> {
    tmux_call(socket, &["capture-pane", "-p", "-J", "-t", pane], None)
}

#[cfg(test)]
mod tests {

    #[test]
    fn versions_and_prompts_for_a_terminal() {
        assert_eq!(parse_version("tmux 3.3a\n"), Some((3, 3)));
        assert_eq!(parse_version("tmux 3.7c"), Some((3, 7)));
        assert_eq!(parse_version("tmux next-3.6"), Some((3, 6)));
        assert_eq!(parse_version("tmux master"), None);
        assert_eq!(terminal_text("a\r\nb\tc ✓").unwrap(), "a\nb\tc ✓");
        assert_eq!(
            terminal_text("fine\u{1b}[201~rm -rf ~\r"),
            Err(PromptRefused::ControlCharacter(0x1b, 4))
        );
        assert_eq!(terminal_text(" \n "), Err(PromptRefused::Empty));
        assert!(PromptRefused::ControlCharacter(0x1b, 4)
            .to_string()
            .contains("U+001B at character 4"));
    }

    /// A program in the pane that asks for bracketed paste, as the agents' input boxes do,
    /// and writes every byte it reads (hex) to a file until a carriage return outside a
    /// paste — the submit.
    const RECORDER: &str = r#"
import os, sys, termios, tty
out = open(sys.argv[1], "w")
fd = sys.stdin.fileno()
tty.setraw(fd)
os.write(1, b"\x1b[?2004hready> ")
seen = b""
while True:
    b = os.read(fd, 1)
    seen += b
    out.write(b.hex() + " "); out.flush()
    inside = seen.count(b"\x1b[200~") > seen.count(b"\x1b[201~")
    if b == b"\r" and not inside:
        break
out.write("END\n"); out.flush()
"#;

    #[test]
    fn a_prompt_is_pasted_bracketed_with_its_newlines_and_submitted_by_a_separate_enter() {
        type_and_submit(false);
    }

    #[test]
    fn enter_still_submits_on_a_server_with_extended_keys_always() {
        type_and_submit(true);
    }

    fn type_and_submit(extended_keys: bool) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s");
        let script = dir.path().join("recorder.py");
        let record = dir.path().join("bytes.txt");
        std::fs::write(&script, RECORDER).unwrap();
        let started = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "30",
                "python3",
            ])
            .arg(&script)
            .arg(&record)
            .status()
            .unwrap();
        assert!(started.success());
        if extended_keys {
            let set = Command::new("tmux")
                .arg("-S")
                .arg(&socket)
                .args(["set-option", "-s", "extended-keys", "always"])
                .status()
                .unwrap();
            assert!(set.success());
        }
        let pane = list_panes(&socket).unwrap()[0].pane_id.clone();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !capture(&socket, &pane).unwrap().contains("ready>") {
            assert!(
                std::time::Instant::now() < deadline,
                "the recorder did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let prompt = terminal_text("Fix it ✓\n  «two»\tend\n/not-a-command").unwrap();
        paste(&socket, &pane, &prompt, "koru-d_test", version().unwrap()).unwrap();
        let buffers = tmux_call(&socket, &["list-buffers"], None).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        press_enter(&socket, &pane).unwrap();
        while !std::fs::read_to_string(&record)
            .unwrap_or_default()
            .contains("END")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "no submit reached the program"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .arg("kill-server")
            .status();
        let hex = std::fs::read_to_string(&record).unwrap();
        let bytes: Vec<u8> = hex
            .split_whitespace()
            .filter(|h| *h != "END")
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        let mut expected = b"\x1b[200~".to_vec();
        expected.extend_from_slice(prompt.as_bytes());
        expected.extend_from_slice(b"\x1b[201~\r");
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            String::from_utf8_lossy(&expected),
            "byte-exact in one bracketed paste, LF kept, then one CR"
        );
        assert!(buffers.is_empty(), "the drive's buffer is gone: {buffers}");
    }
    use super::*;

    #[test]
    fn list_panes_output_is_parsed_field_by_field() {
        let text = "%0\t4242\tclaude\t/home/me/repo one\tmain:0.0\n%3\t4300\tbash\t/tmp\twork:2.1\ngarbage\n%x\tnot-a-pid\tsh\t/\ta:0.0\n";
        let panes = parse_panes(Path::new("/tmp/tmux-1000/default"), text);
        assert_eq!(panes.len(), 2);
        assert_eq!(
            panes[0],
            Pane {
                kind: PaneKind::Tmux,
                socket: PathBuf::from("/tmp/tmux-1000/default"),
                pane_id: "%0".into(),
                pid: 4242,
                command: "claude".into(),
                path: "/home/me/repo one".into(),
                place: "main:0.0".into(),
            }
        );
        assert_eq!(panes[1].place, "work:2.1");
    }

    #[test]
    fn a_real_tmux_servers_panes_are_listed_and_a_dead_socket_has_none() {
        if Command::new("tmux").arg("-V").output().is_err() {
            panic!("tmux is needed for this test (scripts/test-all.sh installs it)");
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("koru-test");
        let folder = dir.path().join("repo ✓");
        std::fs::create_dir(&folder).unwrap();
        let started = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "koru", "-c"])
            .arg(&folder)
            .args(["sleep", "30"])
            .status()
            .unwrap();
        assert!(started.success());
        let panes = list_panes(&socket);
        let sockets = server_sockets(dir.path());
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .arg("kill-server")
            .status();
        let panes = panes.unwrap();
        assert_eq!(panes.len(), 1, "{panes:?}");
        assert!(panes[0].pane_id.starts_with('%'));
        assert_eq!(panes[0].command, "sleep");
        assert_eq!(
            Path::new(&panes[0].path).canonicalize().unwrap(),
            folder.canonicalize().unwrap()
        );
        assert_eq!(panes[0].place, "koru:0.0");
        assert_eq!(sockets, vec![socket.clone()]);
        // The server is gone: its socket lists nothing, without an error.
        assert_eq!(list_panes(&socket).unwrap(), Vec::new());
    }

    #[test]
    fn the_socket_folder_follows_tmux_tmpdir() {
        assert_eq!(socket_dir(None, 1000), PathBuf::from("/tmp/tmux-1000"));
        assert_eq!(
            socket_dir(Some(Path::new("/run/user/1000")), 1000),
            PathBuf::from("/run/user/1000/tmux-1000")
        );
    }
}

//! The user's tmux servers and their panes, read on demand with `tmux list-panes -a` (one call per server, no polling): each pane's id, first process, current command and folder, and where it is for people (`session:window.pane`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// One pane of a tmux server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    /// The server's socket.
    pub socket: PathBuf,
    /// `%N`: unique on its server, stable for the pane's life.
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
    let output = Command::new("tmux")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_panes_output_is_parsed_field_by_field() {
        let text = "%0\t4242\tclaude\t/home/me/repo one\tmain:0.0\n%3\t4300\tbash\t/tmp\twork:2.1\ngarbage\n%x\tnot-a-pid\tsh\t/\ta:0.0\n";
        let panes = parse_panes(Path::new("/tmp/tmux-1000/default"), text);
        assert_eq!(panes.len(), 2);
        assert_eq!(
            panes[0],
            Pane {
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

//! The daemon's socket file: a private directory, one daemon per socket (an flock'd lock file), stale sockets detected and replaced, mode 0600.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::uds_local_socket::tokio::Listener;
use nix::fcntl::{Flock, FlockArg};

use crate::paths::lock_path;

/// Why the daemon cannot serve on a socket path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocketError {
    #[error("another koru daemon{} is already serving {path}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    AlreadyRunning { path: PathBuf, pid: Option<u32> },
    #[error("socket directory {dir} is owned by uid {owner}, not by you (uid {uid}); refusing to use it")]
    ForeignDirectory { dir: PathBuf, owner: u32, uid: u32 },
    #[error("socket directory {dir} has mode {mode:04o}; it must be private to you (run `chmod 700 {dir}`) or pick another path with KORU_SOCKET")]
    OpenDirectory { dir: PathBuf, mode: u32 },
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SocketError {
    let context = context.into();
    move |source| SocketError::Io { context, source }
}

/// A bound listening socket plus the lock that makes it ours. Dropping it removes both files.
pub struct BoundSocket {
    pub listener: Listener,
    path: PathBuf,
    lock_path: PathBuf,
    _lock: Flock<File>,
    removed: bool,
}

impl std::fmt::Debug for BoundSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundSocket")
            .field("path", &self.path)
            .finish()
    }
}

impl BoundSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket file so that no new client can connect (the lock stays held).
    pub fn unlink(&mut self) {
        if !self.removed {
            let _ = fs::remove_file(&self.path);
            self.removed = true;
        }
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        self.unlink();
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// Prepares the directory, takes the lock, clears a stale socket and binds.
pub fn bind(path: &Path) -> Result<BoundSocket, SocketError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    prepare_private_dir(&dir)?;

    let lock_path = lock_path(path);
    let lock = take_lock(&lock_path, path)?;

    match fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(SocketError::NotASocket {
                    path: path.to_path_buf(),
                });
            }
            // We hold the lock, but a daemon from an older build may not use one: only a
            // socket nobody answers on is stale.
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::AlreadyRunning {
                    path: path.to_path_buf(),
                    pid: None,
                });
            }
            tracing::warn!(path = %path.display(), "replacing a stale socket left by a daemon that is gone");
            fs::remove_file(path).map_err(io_error(format!(
                "cannot remove stale socket {}",
                path.display()
            )))?;
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(io_error(format!("cannot inspect {}", path.display()))(err)),
    }

    let name = path
        .to_fs_name::<GenericFilePath>()
        .map_err(io_error(format!("invalid socket path {}", path.display())))?;
    let listener = ListenerOptions::new()
        .name(name)
        .reclaim_name(false)
        .create_tokio_as::<Listener>()
        .map_err(io_error(format!("cannot listen on {}", path.display())))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(io_error(format!(
        "cannot set mode 0600 on {}",
        path.display()
    )))?;

    Ok(BoundSocket {
        listener,
        path: path.to_path_buf(),
        lock_path,
        _lock: lock,
        removed: false,
    })
}

fn prepare_private_dir(dir: &Path) -> Result<(), SocketError> {
    let uid = nix::unistd::getuid().as_raw();
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_error(format!(
                "cannot create socket directory {}",
                dir.display()
            )))?;
        // The umask may have narrowed the mode further, never widened it; make it exact.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io_error(format!(
            "cannot set mode 0700 on {}",
            dir.display()
        )))?;
    }
    let meta = fs::metadata(dir).map_err(io_error(format!("cannot inspect {}", dir.display())))?;
    if meta.uid() != uid {
        return Err(SocketError::ForeignDirectory {
            dir: dir.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SocketError::OpenDirectory {
            dir: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// How long a daemon waits for the lock of one that is exiting (killed with `kill -9` and
/// not yet gone: its memory is torn down before its files are closed, and a shell that
/// starts a new daemon right after the kill can be quicker than that).
const EXITING_HOLDER_WAIT: Duration = Duration::from_secs(5);

/// Takes the socket's lock file. A live daemon holding it is refused at once; one that is
/// exiting is waited for (up to [`EXITING_HOLDER_WAIT`]). A lock file removed by a daemon
/// that stopped while this one waited is opened again (the lock must be on the file at
/// the path, not on one that was unlinked).
fn take_lock(lock_path: &Path, socket: &Path) -> Result<Flock<File>, SocketError> {
    let started = Instant::now();
    let mut told = false;
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(lock_path)
            .map_err(io_error(format!(
                "cannot open lock file {}",
                lock_path.display()
            )))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                if !is_the_file_at(&lock, lock_path) {
                    if started.elapsed() >= EXITING_HOLDER_WAIT {
                        return Err(SocketError::AlreadyRunning {
                            path: socket.to_path_buf(),
                            pid: None,
                        });
                    }
                    continue;
                }
                lock.set_len(0)
                    .and_then(|_| lock.rewind())
                    .and_then(|_| writeln!(lock, "{}", std::process::id()))
                    .map_err(io_error(format!("cannot write {}", lock_path.display())))?;
                return Ok(lock);
            }
            Err((mut file, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let pid: Option<u32> = text.trim().parse().ok();
                let exiting = pid.is_some_and(process_is_exiting);
                if !exiting || started.elapsed() >= EXITING_HOLDER_WAIT {
                    return Err(SocketError::AlreadyRunning {
                        path: socket.to_path_buf(),
                        pid,
                    });
                }
                if !told {
                    tracing::info!(
                        pid,
                        wait_ms = EXITING_HOLDER_WAIT.as_millis() as u64,
                        "the daemon that held this socket is exiting; waiting for it to let go"
                    );
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err((_, errno)) => {
                return Err(io_error(format!("cannot lock {}", lock_path.display()))(
                    std::io::Error::from(errno),
                ))
            }
        }
    }
}

/// Whether `file` is the file `path` names now (not one removed from there).
fn is_the_file_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::metadata(path)) {
        (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
        _ => false,
    }
}

/// Whether a `/proc/<pid>/status` text shows a SIGKILL pending (sent, and the process not
/// scheduled yet to act on it: on a busy machine that can last a while).
fn kill_pending(status: &str) -> bool {
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    status.lines().any(|line| {
        let Some((name, mask)) = line.split_once(':') else {
            return false;
        };
        matches!(name, "SigPnd" | "ShdPnd")
            && u64::from_str_radix(mask.trim(), 16).is_ok_and(|mask| mask & SIGKILL_BIT != 0)
    })
}

/// Whether process `pid` is on its way out: gone, a zombie, exiting (the kernel's
/// `PF_EXITING` in the flags of `/proc/<pid>/stat`, set when a killed process starts to
/// tear itself down), or killed and not yet scheduled to die (SIGKILL pending). Anything
/// unreadable counts as alive (the caller then refuses).
fn process_is_exiting(pid: u32) -> bool {
    if fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| kill_pending(&s)) {
        return true;
    }
    /// `PF_EXITING` (include/linux/sched.h).
    const PF_EXITING: u64 = 0x4;
    let stat = match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(error) => return error.kind() == std::io::ErrorKind::NotFound,
    };
    // `pid (comm) state ppid pgrp session tty_nr tpgid flags …`; `comm` may hold anything.
    let Some((_, after_comm)) = stat.rsplit_once(") ") else {
        return false;
    };
    let mut fields = after_comm.split_ascii_whitespace();
    let state = fields.next().unwrap_or("");
    let flags: u64 = fields.nth(5).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    #[test]
    fn a_pending_sigkill_is_read_from_the_status_masks() {
        let status = |shared: &str| {
            format!("Name:\tkoru\nState:\tS (sleeping)\nSigPnd:\t0000000000000000\nShdPnd:\t{shared}\nSigBlk:\t0000000000000000\n")
        };
        assert!(kill_pending(&status("0000000000000100")));
        assert!(
            !kill_pending(&status("0000000000004000")),
            "SIGTERM is not SIGKILL"
        );
        assert!(!kill_pending(&status("0000000000000000")));
        assert!(
            !kill_pending("SigBlk:\t0000000000000100\n"),
            "a blocked mask is not pending"
        );
    }
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A child that has exited and is not reaped yet (a zombie until `wait`).
    fn zombie() -> Child {
        let child = Command::new("true").spawn().expect("`true` runs");
        let stat = format!("/proc/{}/stat", child.id());
        wait_until("the child to become a zombie", || {
            fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('Z'))
            })
        });
        child
    }

    /// Holds `path`'s lock the way another daemon would (its own open file), naming `pid`.
    fn hold_lock(path: &Path, pid: u32) -> Flock<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap();
        let mut lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        writeln!(lock, "{pid}").unwrap();
        lock
    }

    #[test]
    fn a_running_process_is_not_exiting_and_a_zombie_or_a_gone_one_is() {
        assert!(!process_is_exiting(std::process::id()));
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(!process_is_exiting(sleeper.id()));
        sleeper.kill().unwrap();
        wait_until("the killed child to count as exiting", || {
            process_is_exiting(sleeper.id())
        });
        let pid = sleeper.id();
        sleeper.wait().unwrap();
        assert!(process_is_exiting(pid), "a reaped process is gone");
    }

    #[test]
    fn a_lock_held_by_a_running_daemon_is_refused_and_one_held_by_an_exiting_daemon_is_waited_for()
    {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("koru.sock");
        let path = lock_path(&socket);

        let running = hold_lock(&path, std::process::id());
        match take_lock(&path, &socket) {
            Err(SocketError::AlreadyRunning { pid, .. }) => {
                assert_eq!(pid, Some(std::process::id()))
            }
            other => panic!("a running holder must be refused: {other:?}"),
        }
        drop(running);

        let mut exiting = zombie();
        let holder = hold_lock(&path, exiting.id());
        let released = Arc::new(AtomicBool::new(false));
        let releaser = {
            let released = released.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                released.store(true, Ordering::SeqCst);
                drop(holder);
            })
        };
        let mut lock = take_lock(&path, &socket).expect("the lock, once the exiting holder let go");
        assert!(released.load(Ordering::SeqCst));
        let mut text = String::new();
        lock.rewind().unwrap();
        lock.read_to_string(&mut text).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        releaser.join().unwrap();
        exiting.wait().unwrap();
    }

    #[test]
    fn a_lock_file_removed_while_waiting_for_it_is_taken_anew_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("koru.sock");
        let path = lock_path(&socket);
        let mut exiting = zombie();
        let holder = hold_lock(&path, exiting.id());
        let releaser = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                // As a daemon that stops does: the lock file removed, then let go.
                fs::remove_file(&path).unwrap();
                drop(holder);
            })
        };
        let lock = take_lock(&path, &socket).expect("the lock at the path");
        assert!(is_the_file_at(&lock, &path));
        releaser.join().unwrap();
        exiting.wait().unwrap();
    }
}

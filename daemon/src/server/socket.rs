//! The daemon's socket file: a private directory, one daemon per socket (an flock'd lock file), stale sockets detected and replaced, mode 0600.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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

fn take_lock(lock_path: &Path, socket: &Path) -> Result<Flock<File>, SocketError> {
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
            lock.set_len(0)
                .and_then(|_| lock.rewind())
                .and_then(|_| writeln!(lock, "{}", std::process::id()))
                .map_err(io_error(format!("cannot write {}", lock_path.display())))?;
            Ok(lock)
        }
        Err((mut file, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Err(SocketError::AlreadyRunning {
                path: socket.to_path_buf(),
                pid: text.trim().parse().ok(),
            })
        }
        Err((_, errno)) => Err(io_error(format!("cannot lock {}", lock_path.display()))(
            std::io::Error::from(errno),
        )),
    }
}

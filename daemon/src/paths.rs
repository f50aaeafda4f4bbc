//! Where the daemon's socket lives: `$KORU_SOCKET`, else `$XDG_RUNTIME_DIR/koru/koru.sock`, else `/tmp/koru-$UID/koru.sock`.

use std::path::{Path, PathBuf};

/// The environment variable that names the socket explicitly.
pub const SOCKET_ENV: &str = "KORU_SOCKET";

/// Resolves the socket path from an explicit choice or the environment, by the documented rules.
pub fn socket_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    resolve_socket_path(
        std::env::var_os(SOCKET_ENV).map(PathBuf::from),
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        nix::unistd::getuid().as_raw(),
    )
}

/// The pure rule behind [`socket_path`]: empty variables count as unset.
pub fn resolve_socket_path(
    koru_socket: Option<PathBuf>,
    xdg_runtime_dir: Option<PathBuf>,
    uid: u32,
) -> PathBuf {
    if let Some(path) = koru_socket.filter(|p| !p.as_os_str().is_empty()) {
        return path;
    }
    if let Some(runtime) = xdg_runtime_dir.filter(|p| !p.as_os_str().is_empty()) {
        return runtime.join("koru").join("koru.sock");
    }
    PathBuf::from(format!("/tmp/koru-{uid}")).join("koru.sock")
}

/// The lock file that makes one daemon per socket: the socket path with `.lock` appended.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_documented_order() {
        let explicit =
            resolve_socket_path(Some("/run/x.sock".into()), Some("/run/user/5".into()), 5);
        assert_eq!(explicit, PathBuf::from("/run/x.sock"));
        let runtime = resolve_socket_path(None, Some("/run/user/5".into()), 5);
        assert_eq!(runtime, PathBuf::from("/run/user/5/koru/koru.sock"));
        let fallback = resolve_socket_path(Some("".into()), Some("".into()), 5);
        assert_eq!(fallback, PathBuf::from("/tmp/koru-5/koru.sock"));
        assert_eq!(
            lock_path(&runtime),
            PathBuf::from("/run/user/5/koru/koru.sock.lock")
        );
    }
}

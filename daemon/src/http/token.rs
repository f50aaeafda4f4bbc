//! The HTTP bearer token: generated on first start into the state directory (`$XDG_STATE_HOME/koru/http-token`, else `~/.local/state/koru/http-token`) with mode 0600, reused afterwards.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// The token file's path by the XDG rules.
pub fn token_path() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/state")
        });
    state.join("koru").join("http-token")
}

/// A new random token: 256 bits as 64 hex digits.
fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Reads the token at `path`, creating it (and its directory, 0700) when absent. A file that
/// others can read, or that another user owns, is refused: the token would not be secret.
pub fn load_or_create(path: &Path) -> anyhow::Result<String> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
    match fs::metadata(path) {
        Ok(meta) => {
            if meta.uid() != nix::unistd::getuid().as_raw() {
                bail!("{} belongs to another user; remove it", path.display());
            }
            if meta.mode() & 0o077 != 0 {
                bail!(
                    "{} is readable by others (mode {:o}); run `chmod 600 {}` or remove it to get a new token",
                    path.display(),
                    meta.mode() & 0o777,
                    path.display()
                );
            }
            let token = fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?
                .trim()
                .to_string();
            if token.len() < 32 {
                bail!(
                    "{} holds no usable token (fewer than 32 characters); remove it",
                    path.display()
                );
            }
            Ok(token)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let token = new_token();
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            writeln!(file, "{token}")
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(token)
        }
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_with_mode_0600_then_reused_and_refused_when_open_to_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/koru/http-token");
        let first = load_or_create(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), first);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let error = load_or_create(&path).unwrap_err().to_string();
        assert!(error.contains("readable by others"), "{error}");
    }
}

//! Scoped bearer tokens: `tokens.json` in the state directory (beside `http-token`; folder 0700, file 0600) keeps each token's id, name, role, creation time and the SHA-256 of its secret — never the secret — and is edited under a lock by write-to-temp and rename, so `koru token` works with or without a daemon and two edits never lose one another.
//!
//! The daemon reads the file again whenever it changed (its inode, size or modification time
//! differ) before it looks a presented token up, so a created token works and a revoked one
//! is refused from the next request on.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Role;

/// The file's name in the state directory.
pub const FILE_NAME: &str = "tokens.json";

/// Why the token file could not be read or changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a token file: {message}")]
    Malformed { path: PathBuf, message: String },
    #[error("{path} is readable by others (mode {mode:o}); run `chmod 600 {path}`")]
    OpenToOthers { path: PathBuf, mode: u32 },
    #[error("{path} belongs to another user; remove it")]
    ForeignOwner { path: PathBuf },
    #[error("no token has the id or name {0:?} (`koru token ls` lists them)")]
    NoSuchToken(String),
    #[error("a token named {0:?} exists; choose another name or revoke it first")]
    NameTaken(String),
    #[error("a token name is 1 to 64 letters, digits, `.`, `_` or `-`, and not the word `default`; got {0:?}")]
    BadName(String),
    #[error("no randomness from the operating system: {0}")]
    NoRandomness(String),
}

/// One scoped token as the file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// `tok_` and 12 hex digits; what `koru token revoke` and the journal name it by.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub role: Role,
    /// Lowercase hex SHA-256 of the secret.
    pub sha256: String,
    /// When it was created (Unix ms).
    pub created_ms: u64,
}

impl TokenRecord {
    /// The name when it has one, else the id.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenFile {
    /// The file's format; 1.
    #[serde(default = "format_version")]
    pub version: u32,
    #[serde(default)]
    pub tokens: Vec<TokenRecord>,
}

fn format_version() -> u32 {
    1
}

/// The token file's path: `$XDG_STATE_HOME/koru/tokens.json`, else
/// `~/.local/state/koru/tokens.json` (the folder of the default token, `http-token`).
pub fn tokens_path() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/state")
        });
    state.join("koru").join(FILE_NAME)
}

/// Lowercase hex SHA-256 of `secret`.
pub fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn random_hex(bytes: usize) -> Result<String, TokenError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| TokenError::NoRandomness(error.to_string()))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// Reads the file at `path`; a missing file holds no tokens. A file others can read, or
/// that another user owns, is refused.
pub fn load(path: &Path) -> Result<TokenFile, TokenError> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(TokenFile {
                version: 1,
                tokens: Vec::new(),
            })
        }
        Err(source) => {
            return Err(TokenError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    check_private(path, &meta)?;
    let text = fs::read_to_string(path).map_err(|source| TokenError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|error| TokenError::Malformed {
        path: path.to_path_buf(),
        message: error.to_string(),
    })
}

fn check_private(path: &Path, meta: &fs::Metadata) -> Result<(), TokenError> {
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(TokenError::ForeignOwner {
            path: path.to_path_buf(),
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(TokenError::OpenToOthers {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o777,
        });
    }
    Ok(())
}

/// Changes the file at `path` under an exclusive lock (`tokens.json.lock` beside it): reads
/// it, lets `change` edit it, and writes it to a temporary file renamed over the old one.
/// Nothing is written when `change` fails.
pub fn edit<T>(
    path: &Path,
    change: impl FnOnce(&mut TokenFile) -> Result<T, TokenError>,
) -> Result<T, TokenError> {
    let write_error = |source| TokenError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(write_error)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(write_error)?;
    }
    let lock_path = path.with_extension("json.lock");
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(write_error)?;
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| write_error(std::io::Error::from(errno)))?;
    let mut file = load(path)?;
    let answer = change(&mut file)?;
    let text = serde_json::to_string_pretty(&file)
        .map_err(|error| write_error(std::io::Error::other(error)))?;
    let temporary = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let written = (|| {
        let mut out: File = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        out.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if let Err(source) = written {
        let _ = fs::remove_file(&temporary);
        return Err(write_error(source));
    }
    Ok(answer)
}

/// Checks a token's name: letters, digits, `.`, `_`, `-`, at most 64, not `default` (the
/// default token's name in listings) and not shaped like an id.
pub fn check_name(name: &str) -> Result<(), TokenError> {
    let fits = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name != "default"
        && !name.starts_with("tok_");
    if fits {
        Ok(())
    } else {
        Err(TokenError::BadName(name.to_string()))
    }
}

/// Adds a new token of `role` (named `name`) to the file at `path`, created at `now_ms`;
/// returns its record and its secret, which is stored nowhere.
pub fn create(
    path: &Path,
    role: Role,
    name: Option<String>,
    now_ms: u64,
) -> Result<(TokenRecord, String), TokenError> {
    if let Some(name) = &name {
        check_name(name)?;
    }
    let secret = random_hex(32)?;
    let id = format!("tok_{}", random_hex(6)?);
    let record = TokenRecord {
        id,
        name,
        role,
        sha256: digest(&secret),
        created_ms: now_ms,
    };
    let added = record.clone();
    edit(path, move |file| {
        if let Some(name) = &added.name {
            if file.tokens.iter().any(|t| t.name.as_ref() == Some(name)) {
                return Err(TokenError::NameTaken(name.clone()));
            }
        }
        file.tokens.push(added);
        Ok(())
    })?;
    Ok((record, secret))
}

/// Removes the token whose id or name is `which`; returns it.
pub fn revoke(path: &Path, which: &str) -> Result<TokenRecord, TokenError> {
    edit(path, |file| {
        let at = file
            .tokens
            .iter()
            .position(|t| t.id == which || t.name.as_deref() == Some(which))
            .ok_or_else(|| TokenError::NoSuchToken(which.to_string()))?;
        Ok(file.tokens.remove(at))
    })
}

/// What identifies one version of the file on disk.
type Stamp = (u64, u64, i64, i64);

fn stamp_of(meta: &fs::Metadata) -> Stamp {
    (meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec())
}

/// The daemon's view of the token file, read again whenever the file changed.
#[derive(Debug)]
pub struct TokenWatch {
    path: PathBuf,
    stamp: Option<Stamp>,
    tokens: Vec<TokenRecord>,
}

impl TokenWatch {
    pub fn new(path: PathBuf) -> Self {
        TokenWatch {
            path,
            stamp: None,
            tokens: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The token whose secret is `presented`, from the file as it is now. A file that
    /// cannot be read (gone, open to others, malformed) holds no tokens: scoped tokens then
    /// fail closed, and the problem is logged once per change.
    pub fn lookup(&mut self, presented: &str) -> Option<TokenRecord> {
        self.refresh();
        let wanted = digest(presented);
        // Digests are compared, not secrets: the time taken says nothing about the secret.
        self.tokens.iter().find(|t| t.sha256 == wanted).cloned()
    }

    fn refresh(&mut self) {
        let stamp = fs::metadata(&self.path).ok().map(|meta| stamp_of(&meta));
        if stamp == self.stamp && stamp.is_some() {
            return;
        }
        self.stamp = stamp;
        self.tokens = match load(&self.path) {
            Ok(file) => file.tokens,
            Err(error) => {
                tracing::warn!(%error, "scoped tokens are refused until the token file is fixed");
                Vec::new()
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_tokens_are_found_by_their_secret_and_gone_once_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/koru/tokens.json");
        let mut watch = TokenWatch::new(path.clone());
        assert_eq!(watch.lookup("anything"), None, "no file: no tokens");
        let (ci, ci_secret) = create(&path, Role::Observe, Some("ci".into()), 5).unwrap();
        let (_, other_secret) = create(&path, Role::Drive, None, 6).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&ci_secret), "the secret is never stored");
        assert_eq!(watch.lookup(&ci_secret).unwrap().role, Role::Observe);
        assert_eq!(watch.lookup(&other_secret).unwrap().role, Role::Drive);
        assert_eq!(ci.label(), "ci");
        assert!(ci.id.starts_with("tok_") && ci.id.len() == 16, "{}", ci.id);
        assert!(matches!(
            create(&path, Role::Drive, Some("ci".into()), 7),
            Err(TokenError::NameTaken(_))
        ));
        revoke(&path, "ci").unwrap();
        assert_eq!(watch.lookup(&ci_secret), None, "revoked: refused at once");
        assert!(watch.lookup(&other_secret).is_some());
        assert!(matches!(
            revoke(&path, "ci"),
            Err(TokenError::NoSuchToken(_))
        ));
        let file = load(&path).unwrap();
        revoke(&path, &file.tokens[0].id).unwrap();
        assert!(load(&path).unwrap().tokens.is_empty());
    }

    #[test]
    fn bad_names_and_open_files_are_refused() {
        for bad in ["", "default", "tok_1", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("ci-box.1_a").is_ok());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        create(&path, Role::Observe, None, 1).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(load(&path), Err(TokenError::OpenToOthers { .. })));
        fs::write(dir.path().join("bad.json"), "{").unwrap();
        fs::set_permissions(
            dir.path().join("bad.json"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        assert!(matches!(
            load(&dir.path().join("bad.json")),
            Err(TokenError::Malformed { .. })
        ));
    }

    #[test]
    fn concurrent_creations_keep_every_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let handles: Vec<_> = (0..8)
            .map(|n| {
                let path = path.clone();
                std::thread::spawn(move || create(&path, Role::Observe, Some(format!("t{n}")), 1))
            })
            .collect();
        for handle in handles {
            handle.join().unwrap().unwrap();
        }
        assert_eq!(load(&path).unwrap().tokens.len(), 8);
    }
}

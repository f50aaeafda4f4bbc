//! Doctor's probes: read-only looks at this machine (PATH, environment, display, D-Bus, store paths, the daemon), run in parallel, each bounded by a timeout. Nothing here types, focuses or writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use koru_protocol::{Message, SessionInfo, SessionsList, StatusInfo};
use koru_registry::{Platform, Registry};

use crate::client::{controller_hello, Client};

/// Features this build of koru has, for `requires.features`.
pub const BUILD_FEATURES: &[&str] = &["cli", "plugin_socket", "enigo", "mcp_stdio", "http"];

/// What a probe found about one program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinaryFact {
    pub path: Option<PathBuf>,
    pub version: Option<String>,
}

/// What a probe found at one store location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocationFact {
    pub expanded: String,
    pub exists: bool,
    pub readable: bool,
    pub files: u64,
    pub newest_mtime_ms: Option<u64>,
    /// The scan stopped early (too many entries or out of time).
    pub truncated: bool,
    pub error: Option<String>,
    /// Directories under it (each costs one inotify watch when it is watched).
    pub dirs: u64,
    /// Files and directories under it this user cannot read, and the first of them.
    pub unreadable: u64,
    pub first_unreadable: Option<String>,
}

/// What the daemon said, if it answered.
#[derive(Debug, Clone, Default)]
pub struct DaemonFact {
    pub socket: String,
    pub error: Option<String>,
    pub status: Option<StatusInfo>,
    pub sessions: Vec<SessionInfo>,
}

impl DaemonFact {
    pub fn running(&self) -> bool {
        self.status.is_some()
    }
}

/// Everything the evaluation needs, gathered once.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub platform: Option<Platform>,
    pub env: BTreeMap<String, String>,
    pub binaries: BTreeMap<String, BinaryFact>,
    pub paths: BTreeMap<String, bool>,
    pub locations: BTreeMap<String, LocationFact>,
    /// `None`: no session bus configured; `Some(Ok(name))`: reachable.
    pub dbus: Option<Result<String, String>>,
    pub daemon: DaemonFact,
    pub features: Vec<String>,
    pub now_ms: u64,
    /// `fs.inotify.max_user_watches`, where the kernel says.
    pub inotify_max_user_watches: Option<u64>,
}

impl Facts {
    /// `x11`, `wayland` or `none`, from the environment.
    pub fn display_server(&self) -> &'static str {
        if self.env.contains_key("WAYLAND_DISPLAY") {
            "wayland"
        } else if self.env.contains_key("DISPLAY") {
            "x11"
        } else {
            "none"
        }
    }
}

/// Environment variables doctor always reads.
const ALWAYS_READ: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_SESSION_TYPE",
    "DBUS_SESSION_BUS_ADDRESS",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "SWAYSOCK",
];

/// The current platform.
pub fn current_platform() -> Option<Platform> {
    match std::env::consts::OS {
        "linux" => Some(Platform::Linux),
        "macos" => Some(Platform::Macos),
        "windows" => Some(Platform::Windows),
        _ => None,
    }
}

/// Gathers every fact the registry's interfaces need, in parallel, each probe bounded by
/// `timeout`.
pub async fn gather(registry: &Registry, socket: &Path, timeout: Duration) -> Facts {
    let mut names: BTreeSet<String> = ALWAYS_READ.iter().map(|s| s.to_string()).collect();
    let mut binaries = BTreeSet::new();
    let mut paths = BTreeSet::new();
    let mut locations = BTreeSet::new();
    for interface in registry.interfaces() {
        for alternatives in &interface.requires.env {
            names.extend(alternatives.split('|').map(str::to_string));
        }
        for alternatives in &interface.requires.binaries {
            binaries.extend(alternatives.split('|').map(str::to_string));
        }
        paths.extend(interface.requires.paths.iter().cloned());
        locations.extend(interface.locations.iter().cloned());
    }
    let env: BTreeMap<String, String> = names
        .into_iter()
        .filter_map(|name| {
            std::env::var(&name)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| (name, v))
        })
        .collect();

    let binary_probes = binaries.into_iter().map(|name| async move {
        let fact = probe_binary(&name, timeout).await;
        (name, fact)
    });
    let location_probes = locations.into_iter().map(|location| {
        let env = env.clone();
        async move {
            let expanded = expand_path(&location, &env);
            let scan = tokio::task::spawn_blocking(move || scan_location(&expanded, timeout));
            let fact = scan.await.unwrap_or_default();
            (location, fact)
        }
    });
    let dbus_probe = probe_dbus(env.contains_key("DBUS_SESSION_BUS_ADDRESS"), timeout);
    let daemon_probe = probe_daemon(socket, timeout);

    let (binaries, locations, dbus, daemon) = tokio::join!(
        futures::future::join_all(binary_probes),
        futures::future::join_all(location_probes),
        dbus_probe,
        daemon_probe
    );
    let paths = paths
        .into_iter()
        .map(|p| {
            let exists = Path::new(&expand_path(&p, &env)).exists();
            (p, exists)
        })
        .collect();
    Facts {
        platform: current_platform(),
        env,
        binaries: binaries.into_iter().collect(),
        paths,
        locations: locations.into_iter().collect(),
        dbus,
        daemon,
        features: BUILD_FEATURES.iter().map(|s| s.to_string()).collect(),
        now_ms: now_ms(),
        inotify_max_user_watches: std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .ok()
            .and_then(|text| text.trim().parse().ok()),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Finds a program on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return is_executable(&path).then_some(path);
    }
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// How to ask a program its version without side effects; `None`: do not run it.
fn version_args(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "xdotool" => Some(&["version"]),
        "xclip" => Some(&["-version"]),
        // wtype and ydotool have no version flag; running them could send input.
        "wtype" | "ydotool" => None,
        _ => Some(&["--version"]),
    }
}

async fn probe_binary(name: &str, timeout: Duration) -> BinaryFact {
    let Some(path) = which(name) else {
        return BinaryFact::default();
    };
    let version = match version_args(name) {
        None => None,
        Some(args) => {
            let output = tokio::process::Command::new(&path)
                .args(args)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output();
            match tokio::time::timeout(timeout, output).await {
                Ok(Ok(output)) => {
                    let text = if output.stdout.is_empty() {
                        output.stderr
                    } else {
                        output.stdout
                    };
                    String::from_utf8_lossy(&text)
                        .lines()
                        .next()
                        .map(|l| l.trim().to_string())
                        .filter(|l| !l.is_empty())
                }
                _ => None,
            }
        }
    };
    BinaryFact {
        path: Some(path),
        version,
    }
}

/// Expands `~` and `$VAR` / `${VAR}` (with the XDG defaults) in a registry path.
pub fn expand_path(raw: &str, env: &BTreeMap<String, String>) -> String {
    let home = env
        .get("HOME")
        .cloned()
        .or_else(|| std::env::var("HOME").ok())
        .unwrap_or_default();
    let lookup = |name: &str| -> String {
        if let Some(value) = env.get(name) {
            return value.clone();
        }
        match name {
            "HOME" => home.clone(),
            "XDG_CONFIG_HOME" => format!("{home}/.config"),
            "XDG_STATE_HOME" => format!("{home}/.local/state"),
            "XDG_DATA_HOME" => format!("{home}/.local/share"),
            other => std::env::var(other).unwrap_or_default(),
        }
    };
    let mut text = raw.to_string();
    if text == "~" || text.starts_with("~/") {
        text = format!("{home}{}", &text[1..]);
    }
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').unwrap_or(braced.len());
            (&braced[..end], end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        out.push_str(&lookup(name));
        rest = &after[consumed.min(after.len())..];
    }
    out.push_str(rest);
    out
}

/// Counts the regular files under `path` (or 1 for a file) and the newest mtime, stopping
/// at 100,000 entries or `timeout`.
pub fn scan_location(path: &str, timeout: Duration) -> LocationFact {
    const MAX_ENTRIES: u64 = 100_000;
    let deadline = Instant::now() + timeout;
    let mut fact = LocationFact {
        expanded: path.to_string(),
        ..LocationFact::default()
    };
    let root = Path::new(path);
    let meta = match std::fs::metadata(root) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return fact,
        Err(err) => {
            fact.exists = true;
            fact.error = Some(err.to_string());
            return fact;
        }
    };
    fact.exists = true;
    let mtime = |m: &std::fs::Metadata| {
        m.modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
    };
    if meta.is_file() {
        fact.readable = std::fs::File::open(root).is_ok();
        fact.files = 1;
        fact.newest_mtime_ms = mtime(&meta);
        if !fact.readable {
            fact.error = Some("permission denied".into());
        }
        return fact;
    }
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0u64;
    let mut root_readable = None;
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) => {
                if root_readable.is_none() {
                    root_readable = Some(false);
                    fact.error
                        .get_or_insert_with(|| format!("{}: {err}", dir.display()));
                } else {
                    fact.unreadable += 1;
                    fact.first_unreadable
                        .get_or_insert_with(|| format!("{}: {err}", dir.display()));
                }
                continue;
            }
        };
        root_readable.get_or_insert(true);
        for entry in entries.flatten() {
            seen += 1;
            if seen >= MAX_ENTRIES || Instant::now() >= deadline {
                fact.truncated = true;
                stack.clear();
                break;
            }
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                fact.dirs += 1;
                stack.push(entry.path());
            } else if file_type.is_file() {
                fact.files += 1;
                let path = entry.path();
                if let Err(err) = nix::unistd::access(&path, nix::unistd::AccessFlags::R_OK) {
                    fact.unreadable += 1;
                    fact.first_unreadable
                        .get_or_insert_with(|| format!("{}: {}", path.display(), err.desc()));
                }
                if let Ok(meta) = entry.metadata() {
                    fact.newest_mtime_ms = fact.newest_mtime_ms.max(mtime(&meta));
                }
            }
        }
    }
    fact.readable = root_readable.unwrap_or(false);
    fact
}

async fn probe_dbus(configured: bool, timeout: Duration) -> Option<Result<String, String>> {
    if !configured {
        return None;
    }
    let connect = async {
        let connection = zbus::Connection::session()
            .await
            .map_err(|e| e.to_string())?;
        Ok(connection
            .unique_name()
            .map(|n| n.to_string())
            .unwrap_or_else(|| "connected".into()))
    };
    Some(match tokio::time::timeout(timeout, connect).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    })
}

async fn probe_daemon(socket: &Path, timeout: Duration) -> DaemonFact {
    let mut fact = DaemonFact {
        socket: socket.display().to_string(),
        ..DaemonFact::default()
    };
    let ask = async {
        let mut client = Client::connect(socket, controller_hello("koru-doctor")).await?;
        let status = match client.request(Message::Status {}).await? {
            Message::StatusResult(status) => status,
            other => {
                return Err(crate::client::ClientError::Unexpected(
                    other.type_name().to_string(),
                ))
            }
        };
        let sessions = match client
            .request(Message::SessionsList(SessionsList::default()))
            .await?
        {
            Message::SessionsListResult(result) => result.sessions,
            _ => Vec::new(),
        };
        client.close().await;
        Ok::<_, crate::client::ClientError>((status, sessions))
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(Ok((status, sessions))) => {
            fact.status = Some(status);
            fact.sessions = sessions;
        }
        Ok(Err(err)) => fact.error = Some(err.to_string()),
        Err(_) => fact.error = Some(format!("no answer within {} ms", timeout.as_millis())),
    }
    fact
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_home_and_variables_with_xdg_defaults() {
        let env: BTreeMap<String, String> = [("HOME".to_string(), "/home/u".to_string())]
            .into_iter()
            .collect();
        assert_eq!(
            expand_path("~/.claude/projects", &env),
            "/home/u/.claude/projects"
        );
        assert_eq!(
            expand_path("$XDG_STATE_HOME/koru", &env),
            "/home/u/.local/state/koru"
        );
        assert_eq!(expand_path("${HOME}/x", &env), "/home/u/x");
        assert_eq!(expand_path("/dev/uinput", &env), "/dev/uinput");
    }

    #[test]
    fn scans_count_files_and_find_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/one.jsonl"), "x").unwrap();
        std::fs::write(dir.path().join("a/b/two.jsonl"), "y").unwrap();
        let fact = scan_location(dir.path().to_str().unwrap(), Duration::from_secs(2));
        assert!(fact.exists && fact.readable && !fact.truncated);
        assert_eq!(fact.files, 2);
        assert!(fact.newest_mtime_ms.is_some());
        let missing = scan_location("/nonexistent/koru-test", Duration::from_secs(1));
        assert!(!missing.exists);
    }
}

//! Doctor's probes: read-only looks at this machine (PATH, environment, display, D-Bus and the desktop's services on it, store paths, the daemon), run in parallel, each bounded by a timeout. Nothing here types, focuses, notifies or writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use koru_protocol::{SessionInfo, SessionsList, StatusInfo};
use koru_registry::{Platform, Registry};

use crate::control::Controller;

/// Features this build of koru has, for `requires.features`: every build has them all
/// (the daemon links the enigo injector and serves MCP, the REST API and the dashboard
/// from its HTTP server); whether the running daemon serves them is in its status.
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
    /// What the screen-lock sources said (`None`: not asked).
    pub lock: Option<crate::desktop::LockReport>,
    /// The notification service: `Ok(None)` when nobody provides it, `Err` when the session
    /// bus could not be asked (`None`: not asked).
    pub notifications: Option<Result<Option<crate::desktop::notifications::Probe>, String>>,
    /// The desktop portal's remote input (`None`: not asked).
    pub portal: Option<Result<PortalFact, crate::desktop::portal::PortalError>>,
    /// Koru's hooks in each terminal agent's settings, by agent (`claude-code`, …; absent:
    /// not asked).
    pub agent_hooks: BTreeMap<String, HookFact>,
    /// The kitty instances running here and whether their remote control answers (`None`:
    /// not asked).
    pub kitty: Option<Vec<KittyFact>>,
}

/// One running kitty, as doctor found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KittyFact {
    pub pid: u32,
    /// Where its remote control listens (`None`: off).
    pub listen_on: Option<String>,
    /// `kitty @ ls` there: how many windows, or why it did not answer.
    pub answer: Result<usize, String>,
}

/// Finds every kitty running as this user and asks each one's remote control for its
/// windows (`kitty @ ls`, read-only).
pub fn probe_kitty() -> Vec<KittyFact> {
    let processes = crate::terminal::procs::snapshot();
    crate::terminal::kitty::instances(&processes, crate::terminal::kitty::environ_of)
        .into_iter()
        .map(|instance| {
            let answer = match &instance.listen_on {
                None => Err("remote control is off".to_string()),
                Some(listen_on) => crate::terminal::kitty::list_windows(listen_on)
                    .map(|windows| windows.len())
                    .map_err(|error| error.to_string()),
            };
            KittyFact {
                pid: instance.pid,
                listen_on: instance.listen_on,
                answer,
            }
        })
        .collect()
}

/// Koru's hook entries in one terminal agent's settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFact {
    pub settings: std::path::PathBuf,
    /// The events Koru's hook is installed for (empty: none, or no file); `Err`: the file
    /// could not be read or parsed.
    pub events: Result<Vec<String>, String>,
}

/// Reads each terminal agent's settings for Koru's hook entries.
pub fn probe_agent_hooks() -> BTreeMap<String, HookFact> {
    use crate::agent_hooks::HookAgent;
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else {
        return BTreeMap::new();
    };
    let codex_home = std::env::var_os("CODEX_HOME").map(std::path::PathBuf::from);
    HookAgent::ALL
        .iter()
        .map(|agent| {
            let settings = agent.settings_path(&home, codex_home.as_deref());
            let events = match std::fs::read_to_string(&settings) {
                Ok(text) => crate::agent_hooks::json_settings::installed(&text)
                    .map(|found| {
                        let mut events: Vec<String> =
                            found.into_iter().map(|(event, _)| event).collect();
                        events.dedup();
                        events
                    })
                    .map_err(|error| error.to_string()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(error) => Err(error.to_string()),
            };
            (agent.name().to_string(), HookFact { settings, events })
        })
        .collect()
}

/// What the desktop portal offers, and whether the desktop agreed before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalFact {
    pub offer: crate::desktop::portal::Offer,
    /// Where the restore token is kept, and whether there is one.
    pub token_path: String,
    pub has_token: bool,
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
        for path in interface.locations.iter().chain(&interface.requires.paths) {
            names.extend(path_variables(path));
        }
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
    // The desktop's services, on buses of doctor's own (nothing is started or shown).
    let buses = crate::desktop::Buses::new(timeout);
    let lock_probe = crate::desktop::lock::ask(&buses);
    let notifications_probe = crate::desktop::notifications::probe(&buses);
    let portal_probe = async {
        let offer = crate::desktop::portal::offer(&buses).await?;
        let tokens = crate::desktop::portal::TokenStore {
            path: crate::desktop::portal::TokenStore::default_path(),
        };
        Ok(PortalFact {
            offer,
            has_token: tokens.read().is_some(),
            token_path: tokens.path.display().to_string(),
        })
    };

    let kitty_probe = async {
        tokio::task::spawn_blocking(probe_kitty)
            .await
            .unwrap_or_default()
    };
    let (binaries, locations, dbus, daemon, lock, notifications, portal, kitty) = tokio::join!(
        futures::future::join_all(binary_probes),
        futures::future::join_all(location_probes),
        dbus_probe,
        daemon_probe,
        lock_probe,
        notifications_probe,
        portal_probe,
        kitty_probe
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
        lock: Some(lock),
        notifications: Some(notifications.map_err(|error| error.to_string())),
        portal: Some(portal),
        agent_hooks: probe_agent_hooks(),
        kitty: Some(kitty),
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

/// Expands a registry path against `env` (nothing else is read, so the caller decides
/// which environment counts):
/// - a leading `~` (alone or before `/`) is `$HOME`;
/// - `$VAR` and `${VAR}` are the variable's value; `XDG_CONFIG_HOME`, `XDG_DATA_HOME` and
///   `XDG_STATE_HOME` fall back to their XDG defaults under `$HOME` when unset or empty,
///   any other unset variable is empty;
/// - `${VAR:-default}` is the value when the variable is set and not empty, else
///   `default`, itself expanded (it may start with `~` and hold further references);
///   this is how the tools' own relocation variables (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
///   …) are written, with the tool's own default.
///
/// A `${` without its `}` is kept as written.
pub fn expand_path(raw: &str, env: &BTreeMap<String, String>) -> String {
    let home = env.get("HOME").cloned().unwrap_or_default();
    let mut text = String::new();
    let rest = if raw == "~" || raw.starts_with("~/") {
        text.push_str(&home);
        &raw[1..]
    } else {
        raw
    };
    let mut rest = rest;
    while let Some(dollar) = rest.find('$') {
        text.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(braced) = after.strip_prefix('{') {
            let Some(end) = closing_brace(braced) else {
                // Unterminated: keep the text as written.
                text.push_str(&rest[dollar..]);
                return text;
            };
            let inside = &braced[..end];
            match inside.split_once(":-") {
                Some((name, default)) => match set_value(name, env) {
                    Some(value) => text.push_str(value),
                    None => text.push_str(&expand_path(default, env)),
                },
                None => text.push_str(&variable(inside, env, &home)),
            }
            rest = &braced[end + 1..];
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if end == 0 {
                // A lone `$` is text.
                text.push('$');
            } else {
                text.push_str(&variable(&after[..end], env, &home));
            }
            rest = &after[end..];
        }
    }
    text.push_str(rest);
    text
}

/// The variables a registry path refers to (`$VAR`, `${VAR}`, `${VAR:-…}`, also inside
/// defaults), plus `HOME`, so a caller can read exactly those from its environment.
pub fn path_variables(raw: &str) -> Vec<String> {
    let mut names = vec!["HOME".to_string()];
    let mut rest = raw;
    while let Some(dollar) = rest.find('$') {
        let after = &rest[dollar + 1..];
        let name_text = after.strip_prefix('{').unwrap_or(after);
        let end = name_text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(name_text.len());
        if end > 0 {
            names.push(name_text[..end].to_string());
        }
        rest = after;
    }
    names.sort();
    names.dedup();
    names
}

/// The value of a variable that is set and not empty.
fn set_value<'a>(name: &str, env: &'a BTreeMap<String, String>) -> Option<&'a str> {
    env.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

/// `$name`: its value, the XDG default for an XDG base directory, or empty.
fn variable(name: &str, env: &BTreeMap<String, String>, home: &str) -> String {
    if let Some(value) = set_value(name, env) {
        return value.to_string();
    }
    match name {
        "HOME" => home.to_string(),
        "XDG_CONFIG_HOME" => format!("{home}/.config"),
        "XDG_STATE_HOME" => format!("{home}/.local/state"),
        "XDG_DATA_HOME" => format!("{home}/.local/share"),
        _ => String::new(),
    }
}

/// The offset of the `}` that closes a `${` whose body starts `text` (nested `${…}` in a
/// default count).
fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, byte) in text.bytes().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' if depth == 0 => return Some(offset),
            b'}' => depth -= 1,
            _ => {}
        }
    }
    None
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
    let controller = Controller::new(socket.to_path_buf(), "koru-doctor");
    let ask = controller.once(|client| {
        Box::pin(async move {
            let status = client.status().await?;
            let sessions = client.sessions(SessionsList::default()).await?.sessions;
            Ok((status, sessions))
        })
    });
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

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_home_and_variables_with_xdg_defaults() {
        let env = env(&[("HOME", "/home/u")]);
        assert_eq!(
            expand_path("~/.claude/projects", &env),
            "/home/u/.claude/projects"
        );
        assert_eq!(expand_path("~", &env), "/home/u");
        assert_eq!(
            expand_path("$XDG_STATE_HOME/koru", &env),
            "/home/u/.local/state/koru"
        );
        assert_eq!(
            expand_path("$XDG_CONFIG_HOME/Code", &env),
            "/home/u/.config/Code"
        );
        assert_eq!(
            expand_path("${XDG_DATA_HOME}/code-server", &env),
            "/home/u/.local/share/code-server"
        );
        assert_eq!(expand_path("${HOME}/x", &env), "/home/u/x");
        assert_eq!(expand_path("/dev/uinput", &env), "/dev/uinput");
        // `~` only at the start, as in a shell.
        assert_eq!(expand_path("/a/~/b", &env), "/a/~/b");
        assert_eq!(expand_path("~user/x", &env), "~user/x");
    }

    #[test]
    fn an_empty_xdg_variable_takes_its_default_and_a_set_one_wins() {
        let empty = env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "")]);
        assert_eq!(
            expand_path("$XDG_CONFIG_HOME/Code", &empty),
            "/h/.config/Code"
        );
        let set = env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/cfg")]);
        assert_eq!(expand_path("$XDG_CONFIG_HOME/Code", &set), "/cfg/Code");
        assert_eq!(
            expand_path("${XDG_CONFIG_HOME:-~/.config}/Code", &set),
            "/cfg/Code"
        );
    }

    #[test]
    fn a_default_is_used_when_the_variable_is_unset_or_empty() {
        let location = "${CLAUDE_CONFIG_DIR:-~/.claude}/projects";
        let unset = env(&[("HOME", "/h")]);
        assert_eq!(expand_path(location, &unset), "/h/.claude/projects");
        let empty = env(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "")]);
        assert_eq!(expand_path(location, &empty), "/h/.claude/projects");
        let set = env(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "/srv/claude")]);
        assert_eq!(expand_path(location, &set), "/srv/claude/projects");
    }

    #[test]
    fn a_set_value_is_taken_as_written() {
        // The tools do not expand `~` or `$` in their variables' values; neither do we.
        let set = env(&[("HOME", "/h"), ("CODEX_HOME", "~/$odd")]);
        assert_eq!(
            expand_path("${CODEX_HOME:-~/.codex}/sessions", &set),
            "~/$odd/sessions"
        );
    }

    #[test]
    fn defaults_nest() {
        // Cline: CLINE_SESSION_DATA_DIR, else CLINE_DATA_DIR/sessions, else
        // CLINE_DIR/data/sessions, else ~/.cline/data/sessions.
        let location =
            "${CLINE_SESSION_DATA_DIR:-${CLINE_DATA_DIR:-${CLINE_DIR:-~/.cline}/data}/sessions}";
        let cases = [
            (vec![], "/h/.cline/data/sessions"),
            (vec![("CLINE_DIR", "/c")], "/c/data/sessions"),
            (
                vec![("CLINE_DIR", "/c"), ("CLINE_DATA_DIR", "/d")],
                "/d/sessions",
            ),
            (
                vec![("CLINE_DIR", "/c"), ("CLINE_SESSION_DATA_DIR", "/s")],
                "/s",
            ),
            (vec![("CLINE_DIR", "")], "/h/.cline/data/sessions"),
        ];
        for (vars, want) in cases {
            let mut env = env(&vars);
            env.insert("HOME".into(), "/h".into());
            assert_eq!(expand_path(location, &env), want, "{vars:?}");
        }
    }

    #[test]
    fn a_default_may_be_a_variable_with_its_own_xdg_default() {
        let location = "${VSCODE_APPDATA:-$XDG_CONFIG_HOME}/Code/User";
        assert_eq!(
            expand_path(location, &env(&[("HOME", "/h")])),
            "/h/.config/Code/User"
        );
        assert_eq!(
            expand_path(location, &env(&[("HOME", "/h"), ("VSCODE_APPDATA", "/v")])),
            "/v/Code/User"
        );
    }

    #[test]
    fn an_unknown_unset_variable_is_empty_and_bad_syntax_stays_as_written() {
        let env = env(&[("HOME", "/h")]);
        assert_eq!(expand_path("/a/$KORU_TEST_UNSET/b", &env), "/a//b");
        assert_eq!(expand_path("/a/${KORU_TEST_UNSET}/b", &env), "/a//b");
        assert_eq!(expand_path("/a/${KORU_TEST_UNSET:-}/b", &env), "/a//b");
        assert_eq!(expand_path("/a/${HOME/b", &env), "/a/${HOME/b");
        assert_eq!(expand_path("/a/$/b", &env), "/a/$/b");
        assert_eq!(expand_path("/cost$", &env), "/cost$");
    }

    #[test]
    fn nothing_is_read_from_the_process_environment() {
        // PATH is set for every test process; a map without it expands it to nothing.
        assert!(std::env::var_os("PATH").is_some());
        assert_eq!(expand_path("$PATH", &env(&[])), "");
        assert_eq!(expand_path("~/x", &env(&[])), "/x");
    }

    #[test]
    fn path_variables_names_every_reference_and_home() {
        assert_eq!(
            path_variables("${CLINE_SESSION_DATA_DIR:-${CLINE_DATA_DIR:-$CLINE_DIR/x}}"),
            [
                "CLINE_DATA_DIR",
                "CLINE_DIR",
                "CLINE_SESSION_DATA_DIR",
                "HOME"
            ]
        );
        assert_eq!(path_variables("/dev/uinput"), ["HOME"]);
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

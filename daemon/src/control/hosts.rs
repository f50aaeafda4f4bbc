//! Which daemon a command asks: this machine's (`local`), one reached over OpenSSH (`ssh://[user@]host[:port]`), or a host named in `hosts.yaml` (`koru host add NAME ssh://…`); the URL and file parsers, and the `HOST/ID` form that qualifies session and drive ids in a view over several hosts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ssh::SshEndpoint;
use super::{controller_hello, Client, ClientError};

/// The name that always means this machine's daemon (reserved: no named host may take it).
pub const LOCAL: &str = "local";

/// The environment variable that names the host(s) when `--host` is not given
/// (comma-separated, as `--host` values).
pub const HOST_ENV: &str = "KORU_HOST";

/// An `ssh://[user@]host[:port]` URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshUrl {
    /// The login user, when the URL names one (else ssh's own default).
    pub user: Option<String>,
    /// A host name or an IP address (an IPv6 address without its brackets).
    pub host: String,
    pub port: Option<u16>,
}

/// Why an `ssh://` URL cannot be used; each names the part that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostUrlError {
    #[error("{url:?}: the scheme must be ssh:// (got {scheme:?})")]
    Scheme { url: String, scheme: String },
    #[error("{url:?}: the user {user:?} {why}")]
    User {
        url: String,
        user: String,
        why: &'static str,
    },
    #[error("{url:?}: the host {host:?} {why}")]
    Host {
        url: String,
        host: String,
        why: &'static str,
    },
    #[error("{url:?}: the port {port:?} must be a number from 1 to 65535")]
    Port { url: String, port: String },
    #[error("{url:?}: an ssh:// host takes no path, query or fragment (got {rest:?})")]
    Path { url: String, rest: String },
}

impl SshUrl {
    /// Parses `ssh://[user@]host[:port]` (a trailing `/` is allowed; an IPv6 address goes in
    /// brackets). Every refusal names the part that is wrong.
    pub fn parse(url: &str) -> Result<SshUrl, HostUrlError> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(HostUrlError::Scheme {
                url: url.to_string(),
                scheme: String::new(),
            });
        };
        if !scheme.eq_ignore_ascii_case("ssh") {
            return Err(HostUrlError::Scheme {
                url: url.to_string(),
                scheme: scheme.to_string(),
            });
        }
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if let Some(at) = rest.find(['/', '?', '#']) {
            return Err(HostUrlError::Path {
                url: url.to_string(),
                rest: rest[at..].to_string(),
            });
        }
        let (user, host_port) = match rest.rsplit_once('@') {
            Some((user, host_port)) => (Some(user), host_port),
            None => (None, rest),
        };
        let user = match user {
            Some(user) => Some(check_user(url, user)?),
            None => None,
        };
        let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
            let Some((address, after)) = bracketed.split_once(']') else {
                return Err(HostUrlError::Host {
                    url: url.to_string(),
                    host: host_port.to_string(),
                    why: "opens a [ for an IPv6 address but never closes it",
                });
            };
            let port = match after {
                "" => None,
                _ => match after.strip_prefix(':') {
                    Some(port) => Some(port),
                    None => {
                        return Err(HostUrlError::Host {
                            url: url.to_string(),
                            host: host_port.to_string(),
                            why: "has text after the ] that is not :PORT",
                        })
                    }
                },
            };
            if address.is_empty() || !address.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
                return Err(HostUrlError::Host {
                    url: url.to_string(),
                    host: address.to_string(),
                    why: "is not an IPv6 address",
                });
            }
            (address.to_string(), port)
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (check_host(url, host)?, Some(port)),
                None => (check_host(url, host_port)?, None),
            }
        };
        let port = match port {
            Some(text) => match text.parse::<u16>() {
                Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Some(port),
                _ => {
                    return Err(HostUrlError::Port {
                        url: url.to_string(),
                        port: text.to_string(),
                    })
                }
            },
            None => None,
        };
        Ok(SshUrl { user, host, port })
    }

    /// `[user@]host[:port]`, the way the URL names the machine (a host's name in a merged
    /// view when it has no name of its own).
    pub fn authority(&self) -> String {
        let mut text = String::new();
        if let Some(user) = &self.user {
            text.push_str(user);
            text.push('@');
        }
        if self.host.contains(':') {
            text.push_str(&format!("[{}]", self.host));
        } else {
            text.push_str(&self.host);
        }
        if let Some(port) = self.port {
            text.push_str(&format!(":{port}"));
        }
        text
    }
}

impl std::fmt::Display for SshUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ssh://{}", self.authority())
    }
}

fn check_user(url: &str, user: &str) -> Result<String, HostUrlError> {
    let why = if user.is_empty() {
        Some("is empty")
    } else if user.contains(':') {
        Some("carries a password; koru takes none (use a key, or ssh's own prompt)")
    } else if user.starts_with('-') {
        Some("starts with '-' (ssh would read it as an option)")
    } else if user
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '@')
    {
        Some("contains a space, a control character or '@'")
    } else {
        None
    };
    match why {
        Some(why) => Err(HostUrlError::User {
            url: url.to_string(),
            user: user.to_string(),
            why,
        }),
        None => Ok(user.to_string()),
    }
}

fn check_host(url: &str, host: &str) -> Result<String, HostUrlError> {
    let why = if host.is_empty() {
        Some("is empty")
    } else if host.starts_with('-') {
        Some("starts with '-' (ssh would read it as an option)")
    } else if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        Some("may hold only letters, digits, '.', '-' and '_' (an IPv6 address goes in brackets)")
    } else {
        None
    };
    match why {
        Some(why) => Err(HostUrlError::Host {
            url: url.to_string(),
            host: host.to_string(),
            why,
        }),
        None => Ok(host.to_string()),
    }
}

/// Why a host name cannot be used for `koru host add`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host name {name:?} {why}")]
pub struct HostNameError {
    pub name: String,
    pub why: &'static str,
}

/// Checks a name for `koru host add`: letters, digits, `.`, `_`, `-`, at most 64, starting
/// with a letter or digit, and not `local` (it stays this machine).
pub fn check_host_name(name: &str) -> Result<(), HostNameError> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name == LOCAL {
        Some("is reserved: `local` always means this machine's daemon")
    } else if name.len() > 64 {
        Some("is longer than 64 characters")
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("must start with a letter or a digit")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        Some("may hold only letters, digits, '.', '-' and '_'")
    } else {
        None
    };
    match why {
        Some(why) => Err(HostNameError {
            name: name.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// One named host of `hosts.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// `ssh://[user@]host[:port]`.
    pub url: String,
    /// Options for `ssh` (each passed as `-o OPTION`), before those of the command line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    /// The `koru` program to run on that host [default: `koru`, found on its PATH].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub koru: Option<String>,
}

/// The named hosts (`~/.config/koru/hosts.yaml`, or under `$XDG_CONFIG_HOME`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    #[serde(default)]
    pub hosts: BTreeMap<String, HostEntry>,
}

/// Why `hosts.yaml` cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostsFileError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}{}: {message}", path.display(), location.map(|(line, column)| format!(":{line}:{column}")).unwrap_or_default())]
    Syntax {
        path: PathBuf,
        /// Line and column, from 1.
        location: Option<(usize, usize)>,
        message: String,
    },
    #[error("{}: hosts.{name}: {problem}", path.display())]
    Entry {
        path: PathBuf,
        name: String,
        problem: String,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where the named hosts live: `$XDG_CONFIG_HOME/koru/hosts.yaml`, else
/// `~/.config/koru/hosts.yaml`.
pub fn hosts_file_path() -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".config")
        });
    config.join("koru").join("hosts.yaml")
}

impl HostsFile {
    /// Parses the file's text; `path` only names it in errors. Every entry's name and URL
    /// are checked, so a bad entry is found when the file is read, not when it is used.
    pub fn parse(path: &Path, text: &str) -> Result<HostsFile, HostsFileError> {
        if text.trim().is_empty() {
            return Ok(HostsFile::default());
        }
        let file: HostsFile = serde_yaml_ng::from_str(text).map_err(|error| {
            let location = error.location().map(|at| (at.line(), at.column()));
            let mut message = error.to_string();
            // The location leads the message already.
            if let Some((line, column)) = location {
                let suffix = format!(" at line {line} column {column}");
                if let Some(stripped) = message.strip_suffix(&suffix) {
                    message = stripped.to_string();
                }
            }
            HostsFileError::Syntax {
                path: path.to_path_buf(),
                location,
                message,
            }
        })?;
        for (name, entry) in &file.hosts {
            let problem = check_host_name(name)
                .map_err(|error| error.to_string())
                .and_then(|()| SshUrl::parse(&entry.url).map_err(|error| error.to_string()));
            if let Err(problem) = problem {
                return Err(HostsFileError::Entry {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    problem,
                });
            }
        }
        Ok(file)
    }

    /// Reads the file at `path`; a missing file is an empty list.
    pub fn load(path: &Path) -> Result<HostsFile, HostsFileError> {
        match std::fs::read_to_string(path) {
            Ok(text) => HostsFile::parse(path, &text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(HostsFile::default()),
            Err(source) => Err(HostsFileError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes the file (through a temporary file and a rename, so a reader never sees half).
    pub fn save(&self, path: &Path) -> Result<(), HostsFileError> {
        let write_error = |source| HostsFileError::Write {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(write_error)?;
        }
        let body = serde_yaml_ng::to_string(self)
            .map_err(|error| write_error(std::io::Error::other(error.to_string())))?;
        let text = format!(
            "# Named hosts for `koru --host NAME` (koru host add / ls / rm). Each is reached over\n# OpenSSH, which runs `koru dial-stdio` there.\n{body}"
        );
        let temporary = path.with_extension("yaml.tmp");
        std::fs::write(&temporary, text).map_err(write_error)?;
        std::fs::rename(&temporary, path).map_err(write_error)
    }
}

/// Where a command's requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// This machine's daemon, at its socket.
    Local { socket: PathBuf },
    /// A daemon on another machine, through `ssh … -- koru dial-stdio`.
    Ssh(SshEndpoint),
}

/// A host as a command names it (`local`, a name from `hosts.yaml`, or the URL's
/// `[user@]host[:port]`) and how to reach its daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub endpoint: Endpoint,
}

impl Host {
    /// This machine's daemon at `socket`.
    pub fn local(socket: PathBuf) -> Host {
        Host {
            name: LOCAL.to_string(),
            endpoint: Endpoint::Local { socket },
        }
    }

    /// Connects as a controller called `client_name` and completes the handshake.
    pub async fn connect(&self, client_name: &str) -> Result<Client, ClientError> {
        match &self.endpoint {
            Endpoint::Local { socket } => {
                Client::connect(socket, controller_hello(client_name)).await
            }
            Endpoint::Ssh(ssh) => ssh.connect(&self.name, controller_hello(client_name)).await,
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self.endpoint, Endpoint::Local { .. })
    }
}

/// What a command was told about hosts: the `--host` values (or `$KORU_HOST`'s), the
/// `--ssh-option`s, and where this machine's daemon and the named hosts are.
#[derive(Debug, Clone)]
pub struct HostChoice {
    /// `--host` values as given; empty: this machine only.
    pub requested: Vec<String>,
    /// `--ssh-option` values, for every ssh host (after each named host's own).
    pub ssh_options: Vec<String>,
    /// This machine's daemon.
    pub socket: PathBuf,
    /// The named hosts' file.
    pub hosts_file: PathBuf,
    /// Whether ssh may ask on a terminal (a password, a new host key); false makes it fail
    /// instead (`BatchMode=yes`), for a command whose standard streams are a protocol.
    pub interactive: bool,
}

/// Why the hosts asked for cannot be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostChoiceError {
    #[error(transparent)]
    File(#[from] HostsFileError),
    #[error(transparent)]
    Url(#[from] HostUrlError),
    #[error("no host named {name:?} in {} ({known}); add it with `koru host add {name} ssh://[user@]host[:port]`", file.display())]
    Unknown {
        name: String,
        file: PathBuf,
        known: String,
    },
    #[error("--host {name:?} is given twice")]
    Twice { name: String },
}

impl HostChoice {
    /// The hosts to ask, in the order given, each with its name: `local`, a named host, or
    /// an `ssh://` URL (named after a named host with the same URL, else its authority).
    /// No `--host`: this machine's daemon alone.
    pub fn resolve(&self) -> Result<Vec<Host>, HostChoiceError> {
        if self.requested.is_empty() {
            return Ok(vec![Host::local(self.socket.clone())]);
        }
        let mut file = None;
        let mut hosts: Vec<Host> = Vec::new();
        for value in &self.requested {
            let host = self.resolve_one(value, &mut file)?;
            if hosts.iter().any(|known| known.name == host.name) {
                return Err(HostChoiceError::Twice { name: host.name });
            }
            hosts.push(host);
        }
        Ok(hosts)
    }

    /// One `--host` value (or the host part of a qualified id) as a [`Host`].
    pub fn resolve_value(&self, value: &str) -> Result<Host, HostChoiceError> {
        self.resolve_one(value, &mut None)
    }

    fn resolve_one(
        &self,
        value: &str,
        file: &mut Option<HostsFile>,
    ) -> Result<Host, HostChoiceError> {
        let value = value.trim();
        if value == LOCAL {
            return Ok(Host::local(self.socket.clone()));
        }
        if file.is_none() {
            *file = Some(HostsFile::load(&self.hosts_file)?);
        }
        let named = file.as_ref().map(|f| &f.hosts).expect("loaded above");
        if value.contains("://") {
            let url = SshUrl::parse(value)?;
            // A URL that a named host has is called by that name.
            let name = named
                .iter()
                .find(|(_, entry)| SshUrl::parse(&entry.url).ok().as_ref() == Some(&url))
                .map(|(name, _)| name.clone())
                .unwrap_or_else(|| url.authority());
            let entry = named.get(&name);
            return Ok(self.ssh_host(name, url, entry));
        }
        if let Some(entry) = named.get(value) {
            let url = SshUrl::parse(&entry.url)?;
            return Ok(self.ssh_host(value.to_string(), url, Some(entry)));
        }
        // The name of an unnamed URL host, as a merged view shows it: `[user@]host[:port]`.
        if let Ok(url) = SshUrl::parse(&format!("ssh://{value}")) {
            if url.authority() == value && (url.user.is_some() || url.port.is_some()) {
                return Ok(self.ssh_host(value.to_string(), url, None));
            }
        }
        let known = if named.is_empty() {
            "there are none yet".to_string()
        } else {
            format!(
                "known: {}",
                named.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        Err(HostChoiceError::Unknown {
            name: value.to_string(),
            file: self.hosts_file.clone(),
            known,
        })
    }

    fn ssh_host(&self, name: String, url: SshUrl, entry: Option<&HostEntry>) -> Host {
        let mut options = entry.map(|e| e.ssh_options.clone()).unwrap_or_default();
        options.extend(self.ssh_options.iter().cloned());
        Host {
            name,
            endpoint: Endpoint::Ssh(SshEndpoint {
                url,
                options,
                program: entry
                    .and_then(|e| e.koru.clone())
                    .unwrap_or_else(|| "koru".to_string()),
                interactive: self.interactive,
            }),
        }
    }
}

/// `HOST/ID`: an id as a view over several hosts shows it.
pub fn qualify(host: &str, id: &str) -> String {
    format!("{host}/{id}")
}

/// Splits a possibly qualified id: `("b", "s_1")` for `b/s_1`, `(None, "s_1")` for `s_1`.
/// The host part is everything before the last `/`, so a URL host's `user@host:port` works.
pub fn split_qualified(id: &str) -> (Option<&str>, &str) {
    match id.rsplit_once('/') {
        Some((host, bare)) if !host.is_empty() => (Some(host), bare),
        _ => (None, id),
    }
}

/// A session as a view over several hosts shows it: its id qualified with its host.
pub fn qualify_session(session: &mut koru_protocol::SessionInfo, host: &str) {
    session.session_id = qualify(host, &session.session_id);
    if let Some(drive) = session.active_drive.as_mut() {
        *drive = qualify(host, drive);
    }
}

/// A drive as a view over several hosts shows it: its id and its session's qualified with
/// its host (a window target without a plugin has no session, and keeps the empty id).
pub fn qualify_drive(drive: &mut koru_protocol::DriveInfo, host: &str) {
    drive.drive_id = qualify(host, &drive.drive_id);
    if !drive.session_id.is_empty() {
        drive.session_id = qualify(host, &drive.session_id);
    }
    if let koru_protocol::Target::Session(session) = &mut drive.target {
        *session = qualify(host, session);
    }
}

/// How one host of a view over several fared.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostOutcome {
    pub host: String,
    /// Whether the host answered.
    pub ok: bool,
    /// Why not, as every face codes a client error (`daemon_down`, the daemon's own code…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why not, for a person (`cannot reach host box: Host key verification failed.`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HostOutcome {
    pub fn answered(host: &str) -> HostOutcome {
        HostOutcome {
            host: host.to_string(),
            ok: true,
            code: None,
            error: None,
        }
    }

    pub fn failed(host: &str, error: &ClientError) -> HostOutcome {
        HostOutcome {
            host: host.to_string(),
            ok: false,
            code: Some(error.code().as_str().to_string()),
            error: Some(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn parse(url: &str) -> String {
        match SshUrl::parse(url) {
            Ok(url) => format!("{url:?}"),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn ssh_urls_parse_and_bad_ones_name_the_part_that_is_wrong() {
        let cases = [
            "ssh://box",
            "ssh://me@box.example:2222",
            "ssh://me@box/",
            "SSH://10.0.0.7:22",
            "ssh://[::1]:2200",
            "ssh://me@[fe80::1]",
            "http://box",
            "box",
            "ssh://",
            "ssh://me@",
            "ssh://@box",
            "ssh://me:secret@box",
            "ssh://-oProxyCommand=x",
            "ssh://-me@box",
            "ssh://box:0",
            "ssh://box:99999",
            "ssh://box:22x",
            "ssh://box:",
            "ssh://box/home/me",
            "ssh://box?x=1",
            "ssh://bo x",
            "ssh://[::1",
            "ssh://[::1]x",
            "ssh://[nothex]",
        ];
        let got: Vec<String> = cases
            .iter()
            .map(|url| format!("{url} → {}", parse(url)))
            .collect();
        expect![[r#"
            ssh://box → SshUrl { user: None, host: "box", port: None }
            ssh://me@box.example:2222 → SshUrl { user: Some("me"), host: "box.example", port: Some(2222) }
            ssh://me@box/ → SshUrl { user: Some("me"), host: "box", port: None }
            SSH://10.0.0.7:22 → SshUrl { user: None, host: "10.0.0.7", port: Some(22) }
            ssh://[::1]:2200 → SshUrl { user: None, host: "::1", port: Some(2200) }
            ssh://me@[fe80::1] → SshUrl { user: Some("me"), host: "fe80::1", port: None }
            http://box → error: "http://box": the scheme must be ssh:// (got "http")
            box → error: "box": the scheme must be ssh:// (got "")
            ssh:// → error: "ssh://": the host "" is empty
            ssh://me@ → error: "ssh://me@": the host "" is empty
            ssh://@box → error: "ssh://@box": the user "" is empty
            ssh://me:secret@box → error: "ssh://me:secret@box": the user "me:secret" carries a password; koru takes none (use a key, or ssh's own prompt)
            ssh://-oProxyCommand=x → error: "ssh://-oProxyCommand=x": the host "-oProxyCommand=x" starts with '-' (ssh would read it as an option)
            ssh://-me@box → error: "ssh://-me@box": the user "-me" starts with '-' (ssh would read it as an option)
            ssh://box:0 → error: "ssh://box:0": the port "0" must be a number from 1 to 65535
            ssh://box:99999 → error: "ssh://box:99999": the port "99999" must be a number from 1 to 65535
            ssh://box:22x → error: "ssh://box:22x": the port "22x" must be a number from 1 to 65535
            ssh://box: → error: "ssh://box:": the port "" must be a number from 1 to 65535
            ssh://box/home/me → error: "ssh://box/home/me": an ssh:// host takes no path, query or fragment (got "/home/me")
            ssh://box?x=1 → error: "ssh://box?x=1": an ssh:// host takes no path, query or fragment (got "?x=1")
            ssh://bo x → error: "ssh://bo x": the host "bo x" may hold only letters, digits, '.', '-' and '_' (an IPv6 address goes in brackets)
            ssh://[::1 → error: "ssh://[::1": the host "[::1" opens a [ for an IPv6 address but never closes it
            ssh://[::1]x → error: "ssh://[::1]x": the host "[::1]x" has text after the ] that is not :PORT
            ssh://[nothex] → error: "ssh://[nothex]": the host "nothex" is not an IPv6 address"#]]
        .assert_eq(&got.join("\n"));
    }

    #[test]
    fn a_url_prints_back_as_written_and_names_itself_by_its_authority() {
        for url in ["ssh://box", "ssh://me@box:2222", "ssh://me@[::1]:2200"] {
            assert_eq!(SshUrl::parse(url).unwrap().to_string(), url);
        }
        assert_eq!(
            SshUrl::parse("ssh://me@box:2222/").unwrap().authority(),
            "me@box:2222"
        );
    }

    fn parse_file(text: &str) -> String {
        match HostsFile::parse(Path::new("hosts.yaml"), text) {
            Ok(file) => format!("{:?}", file.hosts),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn the_hosts_file_parses_and_a_bad_one_says_where_and_what() {
        let cases = [
            "",
            "hosts:\n  box:\n    url: ssh://me@box:2222\n",
            "hosts:\n  box:\n    url: ssh://box\n    ssh_options: [IdentityFile=~/.ssh/box]\n    koru: /opt/koru/bin/koru\n",
            "hosts:\n  box:\n    url: http://box\n",
            "hosts:\n  local:\n    url: ssh://box\n",
            "hosts:\n  bad/name:\n    url: ssh://box\n",
            "hosts:\n  box:\n    uri: ssh://box\n",
            "hosts:\n  box: ssh://box\n",
            "host:\n  box:\n    url: ssh://box\n",
            "hosts:\n  box:\n    url: [ssh://box\n",
        ];
        let got: Vec<String> = cases.iter().map(|text| parse_file(text)).collect();
        expect![[r#"
            {}
            {"box": HostEntry { url: "ssh://me@box:2222", ssh_options: [], koru: None }}
            {"box": HostEntry { url: "ssh://box", ssh_options: ["IdentityFile=~/.ssh/box"], koru: Some("/opt/koru/bin/koru") }}
            error: hosts.yaml: hosts.box: "http://box": the scheme must be ssh:// (got "http")
            error: hosts.yaml: hosts.local: host name "local" is reserved: `local` always means this machine's daemon
            error: hosts.yaml: hosts.bad/name: host name "bad/name" may hold only letters, digits, '.', '-' and '_'
            error: hosts.yaml:3:5: hosts.box: unknown field `uri`, expected one of `url`, `ssh_options`, `koru`
            error: hosts.yaml:2:8: hosts.box: invalid type: string "ssh://box", expected struct HostEntry
            error: hosts.yaml:1:1: unknown field `host`, expected `hosts`
            error: hosts.yaml:3:10: hosts.box.url: invalid type: sequence, expected a string"#]]
        .assert_eq(&got.join("\n"));
    }

    #[test]
    fn host_names_are_checked() {
        assert!(check_host_name("machine-b").is_ok());
        assert!(check_host_name("box.2_x").is_ok());
        for bad in [
            "",
            "local",
            "-x",
            ".x",
            "a/b",
            "a b",
            "a@b",
            &"x".repeat(65),
        ] {
            assert!(check_host_name(bad).is_err(), "{bad:?}");
        }
    }

    fn choice(dir: &Path, requested: &[&str]) -> HostChoice {
        HostChoice {
            requested: requested.iter().map(|s| s.to_string()).collect(),
            ssh_options: vec!["BatchMode=yes".into()],
            socket: PathBuf::from("/run/koru.sock"),
            hosts_file: dir.join("hosts.yaml"),
            interactive: true,
        }
    }

    #[test]
    fn hosts_resolve_by_name_url_or_local_and_an_unknown_name_says_how_to_add_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = HostsFile::default();
        file.hosts.insert(
            "box".into(),
            HostEntry {
                url: "ssh://me@box:2222".into(),
                ssh_options: vec!["IdentityFile=/k".into()],
                koru: None,
            },
        );
        file.save(&dir.path().join("hosts.yaml")).unwrap();
        assert_eq!(
            HostsFile::load(&dir.path().join("hosts.yaml")).unwrap(),
            file
        );

        let hosts = choice(dir.path(), &[]).resolve().unwrap();
        assert_eq!(hosts, vec![Host::local("/run/koru.sock".into())]);

        let hosts = choice(
            dir.path(),
            &["local", "box", "ssh://other:22", "ssh://me@box:2222/"],
        )
        .resolve();
        // The last one is `box` again, by its URL.
        assert!(
            matches!(&hosts, Err(HostChoiceError::Twice { name }) if name == "box"),
            "{hosts:?}"
        );

        let hosts = choice(dir.path(), &["local", "box", "ssh://other:22"])
            .resolve()
            .unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["local", "box", "other:22"]);
        let Endpoint::Ssh(ssh) = &hosts[1].endpoint else {
            panic!("box is an ssh host")
        };
        // The named host's options first: ssh takes the first value of an option.
        assert_eq!(ssh.options, ["IdentityFile=/k", "BatchMode=yes"]);
        // A merged view's name for an unnamed URL host resolves back to it.
        let again = choice(dir.path(), &[]).resolve_value("other:22").unwrap();
        assert_eq!(again, hosts[2]);

        let unknown = choice(dir.path(), &["nope"]).resolve().unwrap_err();
        assert_eq!(
            unknown.to_string(),
            format!(
                "no host named \"nope\" in {} (known: box); add it with `koru host add nope ssh://[user@]host[:port]`",
                dir.path().join("hosts.yaml").display()
            )
        );
    }

    #[test]
    fn a_drive_and_a_session_are_qualified_with_their_host() {
        let mut drive: koru_protocol::DriveInfo = serde_json::from_value(serde_json::json!({
            "drive_id": "d_1", "session_id": "s_1", "state": "queued",
            "target": {"session": "s_1"}, "route": "native_send", "options": {},
            "history": [], "prompt_chars": 2, "prompt_excerpt": "hi", "created_at_ms": 1
        }))
        .unwrap();
        qualify_drive(&mut drive, "box");
        assert_eq!(drive.drive_id, "box/d_1");
        assert_eq!(drive.session_id, "box/s_1");
        assert_eq!(
            drive.target,
            koru_protocol::Target::Session("box/s_1".into())
        );
        let mut windowless = drive.clone();
        windowless.session_id.clear();
        qualify_drive(&mut windowless, "b");
        assert_eq!(windowless.session_id, "");
        let error = ClientError::Unreachable {
            host: "box".into(),
            said: "Connection refused".into(),
        };
        assert_eq!(
            serde_json::to_value(HostOutcome::failed("box", &error)).unwrap(),
            serde_json::json!({"host": "box", "ok": false, "code": "daemon_down",
                "error": "cannot reach host box: Connection refused"})
        );
    }

    #[test]
    fn qualified_ids_split_at_the_last_slash() {
        assert_eq!(split_qualified("s_1"), (None, "s_1"));
        assert_eq!(split_qualified("box/s_1"), (Some("box"), "s_1"));
        assert_eq!(
            split_qualified("me@10.0.0.1:22/d_7"),
            (Some("me@10.0.0.1:22"), "d_7")
        );
        assert_eq!(split_qualified("/s_1"), (None, "/s_1"));
        assert_eq!(qualify("box", "d_7"), "box/d_7");
    }
}

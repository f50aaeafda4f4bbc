//! opencode's own server, the native route into it: where its TUI serves HTTP (its `--port`, else the port its process listens on), the prompt posted to a session with no keystroke (`POST /session/{id}/prompt_async`, the person's draft in the input box untouched), after its API says no permission or question is pending and the session is not busy, proven by the user message on its event stream (`GET /event`); and that stream read as chat observations (prompt, reply, needs input, end of turn).
//!
//! Facts measured against opencode 1.18.33 (tests/agents/README.md): the TUI serves HTTP only
//! when started with `--port`/`--hostname` (or `--mdns`); events arrive as SSE `data:` lines,
//! each `{"type", "properties"}`; a user message is `message.updated` with `info.role:
//! "user"`, its text in `message.part.updated` (`part.type: "text"`); the turn's state is
//! `session.status` (`busy`, `retry`, `idle`) and `session.idle`; a pending approval is
//! `permission.asked` (`GET /permission` lists them), a pending question `question.asked`
//! (`GET /question`).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use koru_protocol::{blocker, Blocker};
use serde_json::{json, Value};

use super::screen::Screen;
use super::typist::{TypeKind, TypeResult};

/// How long one API call may take (loopback; opencode answers in milliseconds).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The address opencode's server listens on for the process `pid`: its `--port` (with
/// `--hostname`, a wildcard taken as loopback), else a TCP port the process listens on.
pub fn server_address(pid: u32) -> Option<SocketAddr> {
    let argv = super::procs::read_process(pid)?.argv;
    if let Some(address) = address_from_argv(&argv) {
        return Some(address);
    }
    listening_addresses(pid).into_iter().next()
}

/// `--port N` / `--port=N` (N > 0) and `--hostname H` from opencode's command line.
pub fn address_from_argv(argv: &[String]) -> Option<SocketAddr> {
    let value = |name: &str| {
        let mut words = argv.iter();
        while let Some(word) = words.next() {
            if word == name {
                return words.next().cloned();
            }
            if let Some(value) = word.strip_prefix(&format!("{name}=")) {
                return Some(value.to_string());
            }
        }
        None
    };
    let port: u16 = value("--port")?.parse().ok().filter(|p| *p > 0)?;
    let host = value("--hostname")
        .and_then(|h| {
            if h == "localhost" {
                Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
            } else {
                h.parse::<IpAddr>().ok()
            }
        })
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    Some(SocketAddr::new(loopback_for(host), port))
}

/// A wildcard listener is reached on loopback.
fn loopback_for(host: IpAddr) -> IpAddr {
    match host {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        other => other,
    }
}

/// The TCP addresses the process listens on (its socket inodes matched against
/// `/proc/PID/net/tcp` and `tcp6`), loopback ones first.
pub fn listening_addresses(pid: u32) -> Vec<SocketAddr> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: HashSet<String> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
                .map(str::to_string)
        })
        .collect();
    let mut found = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        found.extend(listeners_in(&text, &inodes));
    }
    found.sort_by_key(|a| !a.ip().is_loopback());
    found
}

/// The listening sockets of a `/proc/net/tcp{,6}` table whose inode is one of `inodes`.
fn listeners_in(table: &str, inodes: &HashSet<String>) -> Vec<SocketAddr> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            if *state != LISTEN || !inodes.contains(*inode) {
                return None;
            }
            let (ip, port) = local.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let ip = proc_ip(ip)?;
            Some(SocketAddr::new(loopback_for(ip), port))
        })
        .collect()
}

/// An address as `/proc/net/tcp` writes it: hex, each 32-bit word in host (little-endian) order.
fn proc_ip(hex: &str) -> Option<IpAddr> {
    let words: Vec<u32> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok())
        .collect::<Option<_>>()?;
    match words.as_slice() {
        [one] => Some(IpAddr::V4(Ipv4Addr::from(one.swap_bytes()))),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, word) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
            }
            Some(IpAddr::V6(std::net::Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

fn url(address: SocketAddr, path: &str) -> String {
    format!("http://{address}{path}")
}

async fn get_json(
    client: &reqwest::Client,
    address: SocketAddr,
    path: &str,
) -> Result<Value, String> {
    let response = client
        .get(url(address, path))
        .timeout(CALL_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "GET {path}: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("GET {path}: not JSON ({e})"))
}

async fn post_json(
    client: &reqwest::Client,
    address: SocketAddr,
    path: &str,
    body: &Value,
) -> Result<Value, String> {
    let response = client
        .post(url(address, path))
        .timeout(CALL_TIMEOUT)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("POST {path}: {e}"))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("POST {path}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "POST {path}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Where a drive's prompt goes on opencode's server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTarget {
    pub address: SocketAddr,
    /// The agent's folder: its sessions are those of this directory.
    pub directory: String,
    /// The session the drive named (`--chat ses_…`); else the folder's session this
    /// process last used, else a new one.
    pub session: Option<String>,
    /// When the agent's process started (Unix ms): sessions not updated since are not its own.
    pub started_ms: u64,
    /// opencode's database, where the chat is read back.
    pub database: std::path::PathBuf,
}

/// The session a prompt goes to: the one named, else the newest top-level session of the
/// folder updated since the process started (the conversation its TUI shows), else none.
pub fn choose_session(sessions: &Value, target: &ServerTarget) -> Option<String> {
    if let Some(named) = &target.session {
        return Some(named.clone());
    }
    sessions
        .as_array()?
        .iter()
        .filter(|s| s["directory"].as_str() == Some(target.directory.as_str()))
        .filter(|s| s.get("parentID").is_none_or(Value::is_null))
        .filter(|s| s["time"]["updated"].as_u64().unwrap_or(0) >= target.started_ms)
        .max_by_key(|s| s["time"]["updated"].as_u64().unwrap_or(0))
        .and_then(|s| s["id"].as_str())
        .map(str::to_string)
}

/// What opencode's API says stops a prompt to `session`: a pending permission or question
/// (a dialog: its text), the session answering (busy), or nothing.
pub fn readiness(session: &str, permissions: &Value, questions: &Value, status: &Value) -> Screen {
    let pending = |list: &Value| -> Vec<Value> {
        list.as_array()
            .map(|items| {
                items
                    .iter()
                    .filter(|p| p["sessionID"].as_str() == Some(session))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(permission) = pending(permissions).first() {
        let patterns: Vec<&str> = permission["patterns"]
            .as_array()
            .map(|p| p.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        return Screen::Dialog(format!(
            "△ Permission required: {} {}",
            permission["permission"].as_str().unwrap_or("?"),
            patterns.join(" ")
        ));
    }
    if let Some(question) = pending(questions).first() {
        let asked: Vec<String> = question["questions"]
            .as_array()
            .map(|qs| {
                qs.iter()
                    .filter_map(|q| q["question"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        return Screen::Dialog(format!("a question: {}", asked.join(" / ")));
    }
    match status[session]["type"].as_str() {
        Some(kind @ ("busy" | "retry")) => Screen::Busy(format!("session {session} is {kind}")),
        _ => Screen::Ready,
    }
}

/// How a server order ended, with the session it went to.
#[derive(Debug, Clone)]
pub struct ServerAnswer {
    pub result: TypeResult,
    pub detail: String,
}

/// Carries out one order against opencode's server. `Type`: check readiness, post the
/// prompt, and wait up to `proof` for the user message carrying it on the event stream
/// (`Recorded`), else `Typed` (taken by the API, not yet recorded). `Look`/`SubmitAgain`:
/// readiness only (nothing is sent twice).
pub async fn run(
    kind: TypeKind,
    target: &ServerTarget,
    text: &str,
    proof: Duration,
) -> ServerAnswer {
    let client = crate::sse::loopback_client();
    let failed = |detail: String| ServerAnswer {
        result: TypeResult::Failed {
            blocker: Blocker::new(
                blocker::TERMINAL_FAILED,
                format!("opencode's server at {}: {detail}", target.address),
            ),
            pasted: false,
        },
        detail: detail.clone(),
    };
    let sessions = match get_json(&client, target.address, "/session").await {
        Ok(sessions) => sessions,
        Err(error) => return failed(error),
    };
    let chosen = choose_session(&sessions, target);
    if let Some(session) = &chosen {
        let (permissions, questions, status) = tokio::join!(
            get_json(&client, target.address, "/permission"),
            get_json(&client, target.address, "/question"),
            get_json(&client, target.address, "/session/status"),
        );
        let seen = readiness(
            session,
            &permissions.unwrap_or(Value::Null),
            &questions.unwrap_or(Value::Null),
            &status.unwrap_or(Value::Null),
        );
        if kind != TypeKind::Type || seen != Screen::Ready {
            let detail = format!("session {session}");
            return ServerAnswer {
                result: TypeResult::Untouched(seen),
                detail,
            };
        }
    } else if kind != TypeKind::Type {
        return ServerAnswer {
            result: TypeResult::Untouched(Screen::Ready),
            detail: "no session yet".into(),
        };
    }
    // Listen before posting: the user message is on the stream right after the post.
    let mut events = match crate::sse::EventStream::open(&client, &url(target.address, "/event"))
        .await
    {
        Ok(events) => Some(events),
        Err(error) => {
            tracing::debug!(%error, "opencode event stream not open; the follower's observation proves the drive");
            None
        }
    };
    let session = match chosen {
        Some(session) => session,
        None => {
            let created = match post_json(&client, target.address, "/session", &json!({})).await {
                Ok(created) => created,
                Err(error) => return failed(error),
            };
            let Some(id) = created["id"].as_str().map(str::to_string) else {
                return failed(format!("POST /session answered without an id: {created}"));
            };
            // Show the new conversation in the TUI (best effort: the prompt goes either way).
            if let Err(error) = post_json(
                &client,
                target.address,
                "/tui/select-session",
                &json!({ "sessionID": id }),
            )
            .await
            {
                tracing::debug!(%error, "opencode TUI did not select the new session");
            }
            id
        }
    };
    let path = format!("/session/{session}/prompt_async");
    let body = json!({ "parts": [{ "type": "text", "text": text }] });
    if let Err(error) = post_json(&client, target.address, &path, &body).await {
        return failed(error);
    }
    let detail = format!("session {session}");
    let Some(events) = events.as_mut() else {
        return ServerAnswer {
            result: TypeResult::Typed,
            detail,
        };
    };
    let recorded = tokio::time::timeout(proof, user_message(events, &session, text)).await;
    let result = match recorded {
        Ok(Some(at_ms)) => TypeResult::Recorded {
            session: session.clone(),
            at_ms,
        },
        _ => TypeResult::Typed,
    };
    ServerAnswer { result, detail }
}

/// Waits on the event stream for a user message in `session` whose text is `text`:
/// `Some` with the time the server gave its part, `None` when the stream ended first.
async fn user_message(
    events: &mut crate::sse::EventStream,
    session: &str,
    text: &str,
) -> Option<Option<u64>> {
    let mut watch = UserMessageWatch::default();
    while let Some(data) = events.next_data().await {
        let Ok(data) = data else { return None };
        if let Some(at) = watch.feed(&data, session, text) {
            return Some(at);
        }
    }
    None
}

/// Which messages of the stream are the user's (`message.updated`, `info.role`), and
/// whether one carries the text wanted (`message.part.updated`, a text part), whichever
/// comes first.
#[derive(Debug, Default)]
struct UserMessageWatch {
    roles: HashMap<String, String>,
    /// Text parts of messages whose role is not known yet: (message, time).
    matching_parts: Vec<(String, Option<u64>)>,
}

impl UserMessageWatch {
    /// One event; `Some(time)` once the user message with `text` in `session` is seen.
    fn feed(&mut self, data: &str, session: &str, text: &str) -> Option<Option<u64>> {
        let event: Value = serde_json::from_str(data).ok()?;
        let properties = &event["properties"];
        if properties["sessionID"].as_str() != Some(session) {
            return None;
        }
        match event["type"].as_str()? {
            "message.updated" => {
                let info = &properties["info"];
                let (id, role) = (info["id"].as_str()?, info["role"].as_str()?);
                self.roles.insert(id.to_string(), role.to_string());
                if role == "user" {
                    let found = self.matching_parts.iter().find(|(m, _)| m == id)?;
                    return Some(found.1);
                }
                None
            }
            "message.part.updated" => {
                let part = &properties["part"];
                if part["type"] != "text" || part["text"].as_str() != Some(text) {
                    return None;
                }
                let message = part["messageID"].as_str()?;
                let at = properties["time"].as_u64();
                match self.roles.get(message).map(String::as_str) {
                    Some("user") => Some(at),
                    Some(_) => None,
                    None => {
                        self.matching_parts.push((message.to_string(), at));
                        None
                    }
                }
            }
            _ => None,
        }
    }
}

/// Where the opencode process `pid` keeps its database: `$XDG_DATA_HOME/opencode/opencode.db`,
/// else `$HOME/.local/share/opencode/opencode.db`, from the process's own environment.
pub fn database_of(pid: u32) -> std::path::PathBuf {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let var = |name: &str| {
        environ
            .split(|b| *b == 0)
            .filter_map(|entry| std::str::from_utf8(entry).ok())
            .find_map(|entry| entry.strip_prefix(name)?.strip_prefix('='))
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    let data = var("XDG_DATA_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".local/share")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/share"))
        })
        .unwrap_or_default();
    data.join("opencode").join("opencode.db")
}

/// When the process `pid` started, in Unix ms (`/proc/PID/stat` field 22, in clock ticks
/// since boot, plus the boot time from `/proc/stat`).
pub fn process_started_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields after `comm`: state is field 3, so starttime (22) is the 20th here.
    let ticks: u64 = after.split_whitespace().nth(19)?.parse().ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()??
        .max(1) as u64;
    Some(boot * 1000 + ticks * 1000 / hz)
}

/// A blocker for an opencode whose server cannot be found.
pub fn no_server(pid: u32) -> Blocker {
    Blocker::new(
        blocker::AGENT_SERVER_MISSING,
        format!(
            "opencode (pid {pid}) serves no HTTP API Koru can find: start it with `opencode --port 0` (any free port) or `--port N`, so prompts go to its server instead of keystrokes"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_port_and_host_come_from_the_command_line() {
        assert_eq!(
            address_from_argv(&argv(&[
                "opencode",
                "--port",
                "4599",
                "--hostname",
                "127.0.0.1"
            ])),
            Some("127.0.0.1:4599".parse().unwrap())
        );
        assert_eq!(
            address_from_argv(&argv(&["opencode", "--port=4100", "--hostname=0.0.0.0"])),
            Some("127.0.0.1:4100".parse().unwrap()),
            "a wildcard host is reached on loopback"
        );
        assert_eq!(
            address_from_argv(&argv(&["opencode", "--port", "0"])),
            None,
            "port 0: the listening socket tells"
        );
        assert_eq!(address_from_argv(&argv(&["opencode"])), None);
    }

    #[test]
    fn listening_sockets_are_read_from_the_proc_tables() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:11EF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 0\n   2: 0100007F:11EF 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 100 0 0 10 0\n";
        let inodes: HashSet<String> = ["4242".to_string(), "4243".to_string()].into();
        assert_eq!(
            listeners_in(table, &inodes),
            vec!["127.0.0.1:4591".parse().unwrap()],
            "only LISTEN rows of this process"
        );
        assert_eq!(
            proc_ip("00000000000000000000000001000000"),
            Some("::1".parse().unwrap())
        );
    }

    #[test]
    fn a_real_listener_of_this_process_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let found = listening_addresses(std::process::id());
        assert!(
            found.iter().any(|a| a.port() == port),
            "{found:?} lacks {port}"
        );
    }

    #[test]
    fn the_user_message_with_the_text_is_found_whichever_event_comes_first() {
        let user = json!({"type": "message.updated", "properties": {"sessionID": "s", "info": {"id": "m1", "role": "user"}}}).to_string();
        let part = json!({"type": "message.part.updated", "properties": {"sessionID": "s", "part": {"type": "text", "text": "hi ✓\nthere", "messageID": "m1", "id": "p1"}, "time": 42}}).to_string();
        let mut watch = UserMessageWatch::default();
        assert_eq!(watch.feed(&user, "s", "hi ✓\nthere"), None);
        assert_eq!(watch.feed(&part, "s", "hi ✓\nthere"), Some(Some(42)));
        let mut watch = UserMessageWatch::default();
        assert_eq!(
            watch.feed(&part, "s", "hi ✓\nthere"),
            None,
            "its role is not known yet"
        );
        assert_eq!(watch.feed(&user, "s", "hi ✓\nthere"), Some(Some(42)));
        let mut watch = UserMessageWatch::default();
        watch.feed(&user, "s", "x");
        assert_eq!(watch.feed(&part, "s", "hi"), None, "another text");
        assert_eq!(
            watch.feed(&part, "other", "hi ✓\nthere"),
            None,
            "another session"
        );
        let assistant = json!({"type": "message.updated", "properties": {"sessionID": "s", "info": {"id": "m2", "role": "assistant"}}}).to_string();
        let echo = json!({"type": "message.part.updated", "properties": {"sessionID": "s", "part": {"type": "text", "text": "hi", "messageID": "m2", "id": "p2"}}}).to_string();
        watch.feed(&assistant, "s", "hi");
        assert_eq!(
            watch.feed(&echo, "s", "hi"),
            None,
            "the assistant saying the same is no proof"
        );
    }

    #[test]
    fn readiness_names_the_dialog_or_the_busy_session() {
        let permissions = json!([{"id": "per_1", "sessionID": "ses_a", "permission": "bash", "patterns": ["touch koru-permission-probe"]}]);
        let none = json!([]);
        assert_eq!(
            readiness("ses_a", &permissions, &none, &json!({})),
            Screen::Dialog("△ Permission required: bash touch koru-permission-probe".into())
        );
        assert_eq!(
            readiness("ses_b", &permissions, &none, &json!({})),
            Screen::Ready,
            "another session's dialog"
        );
        let questions = json!([{"id": "que_1", "sessionID": "ses_b", "questions": [{"question": "Which file?"}]}]);
        assert_eq!(
            readiness("ses_b", &none, &questions, &json!({})),
            Screen::Dialog("a question: Which file?".into())
        );
        assert_eq!(
            readiness("ses_b", &none, &none, &json!({"ses_b": {"type": "busy"}})),
            Screen::Busy("session ses_b is busy".into())
        );
        assert_eq!(
            readiness("ses_b", &none, &none, &json!({"ses_b": {"type": "idle"}})),
            Screen::Ready
        );
    }

    #[test]
    fn the_session_is_the_named_one_else_the_folders_newest_since_the_process_started() {
        let sessions = json!([
            {"id": "old", "directory": "/w", "time": {"updated": 100}},
            {"id": "mine", "directory": "/w", "time": {"updated": 2_000}},
            {"id": "child", "directory": "/w", "parentID": "mine", "time": {"updated": 3_000}},
            {"id": "elsewhere", "directory": "/x", "time": {"updated": 4_000}},
        ]);
        let mut target = ServerTarget {
            address: "127.0.0.1:1".parse().unwrap(),
            directory: "/w".into(),
            session: None,
            started_ms: 1_000,
            database: "/nowhere/opencode.db".into(),
        };
        assert_eq!(choose_session(&sessions, &target).as_deref(), Some("mine"));
        target.started_ms = 2_500;
        assert_eq!(
            choose_session(&sessions, &target),
            None,
            "nothing of this process: a new session"
        );
        target.session = Some("old".into());
        assert_eq!(choose_session(&sessions, &target).as_deref(), Some("old"));
    }

    #[test]
    fn this_process_has_a_start_time() {
        let started = process_started_ms(std::process::id()).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            started <= now + 1_000 && now - started < 3_600_000,
            "{started} vs {now}"
        );
    }
}

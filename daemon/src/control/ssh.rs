//! The OpenSSH transport: runs the system `ssh` with `-- koru dial-stdio` on the far host and speaks the normal protocol over its stdin/stdout; what ssh prints on stderr is kept to say why a host cannot be reached. Authentication, host keys and encryption are ssh's: koru never accepts a host key for the user.

use std::future::Future;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use koru_protocol::Hello;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::hosts::SshUrl;
use super::{Client, ClientError, TransportLink};

/// How much of ssh's stderr is kept (the end of it: the last lines say why).
const STDERR_KEPT: usize = 8 * 1024;
/// How long a closing connection waits for ssh to exit on its own before killing it.
const CLOSE_GRACE: Duration = Duration::from_millis(500);
/// How long a failed connection waits for ssh's exit status and last words.
const FAILURE_WAIT: Duration = Duration::from_secs(5);
/// What `ssh` exits with when it failed itself (as opposed to the remote command).
const SSH_FAILED: i32 = 255;
/// What a shell exits with when it cannot find the command.
const COMMAND_NOT_FOUND: i32 = 127;

/// A daemon reached through `ssh [-p PORT] [-o OPTION]… [user@]host -- koru dial-stdio`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshEndpoint {
    pub url: SshUrl,
    /// `-o` options, in order (ssh keeps the first value it gets for each).
    pub options: Vec<String>,
    /// The `koru` program on the far host.
    pub program: String,
    /// Whether ssh may ask on the terminal (password, passphrase); false adds
    /// `BatchMode=yes` after the user's options.
    pub interactive: bool,
}

impl SshEndpoint {
    /// The `ssh` command line, without the program name. The user's `-o` options come
    /// first, so they win over koru's defaults; nothing here accepts an unknown host key.
    pub fn arguments(&self) -> Vec<String> {
        let mut args = vec!["-T".to_string()];
        for option in &self.options {
            args.push("-o".into());
            args.push(option.clone());
        }
        // Defaults after the user's: a connection attempt is bounded, and a kept
        // connection notices a peer that vanished.
        for option in ["ConnectTimeout=10", "ServerAliveInterval=15"] {
            args.push("-o".into());
            args.push(option.into());
        }
        if !self.interactive {
            args.push("-o".into());
            args.push("BatchMode=yes".into());
        }
        if let Some(port) = self.url.port {
            args.push("-p".into());
            args.push(port.to_string());
        }
        args.push(match &self.url.user {
            Some(user) => format!("{user}@{}", self.url.host),
            None => self.url.host.clone(),
        });
        args.push("--".into());
        // ssh hands the far side one command line for its shell.
        args.push(format!("{} dial-stdio", shell_quote(&self.program)));
        args
    }

    /// Starts ssh and completes the protocol's handshake over its pipes; `host` names the
    /// host in errors.
    pub async fn connect(&self, host: &str, hello: Hello) -> Result<Client, ClientError> {
        let mut command = Command::new(ssh_program());
        command
            .args(self.arguments())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|error| ClientError::Unreachable {
            host: host.to_string(),
            said: format!("cannot run {}: {error}", ssh_program()),
        })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ClientError::Unreachable {
                host: host.to_string(),
                said: "ssh started without its pipes".into(),
            });
        };
        let said = Arc::new(Mutex::new(Vec::new()));
        let kept = said.clone();
        let stderr_task = tokio::spawn(async move {
            let mut buffer = [0u8; 1024];
            while let Ok(read) = stderr.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
                let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&buffer[..read]);
                if kept.len() > STDERR_KEPT {
                    let cut = kept.len() - STDERR_KEPT;
                    kept.drain(..cut);
                }
            }
        });
        let link = SshLink {
            host: host.to_string(),
            child: Some(child),
            said,
            stderr_task: Some(stderr_task),
            explained: None,
        };
        Client::handshake(
            Box::new(stdout),
            Box::new(stdin),
            Some(Box::new(link)),
            hello,
        )
        .await
    }
}

/// The ssh program: `$KORU_SSH` when set (tests, wrappers), else `ssh` on the PATH.
fn ssh_program() -> String {
    std::env::var("KORU_SSH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "ssh".to_string())
}

/// Quotes `word` for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | '='));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The ssh child of one connection.
struct SshLink {
    host: String,
    child: Option<Child>,
    said: Arc<Mutex<Vec<u8>>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    /// What ssh said once found out (asked for again after the first time).
    explained: Option<Option<String>>,
}

impl SshLink {
    async fn explain(&mut self) -> Option<String> {
        let status = match self.child.as_mut() {
            Some(child) => match tokio::time::timeout(FAILURE_WAIT, child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => None,
            },
            None => None,
        };
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
        }
        let said = String::from_utf8_lossy(&self.said.lock().unwrap_or_else(|e| e.into_inner()))
            .into_owned();
        explain(status, &said)
    }
}

/// Why a connection whose ssh exited with `status` (None: did not exit) after printing
/// `said` failed, or `None` when ssh has nothing to add to a plain close.
fn explain(status: Option<ExitStatus>, said: &str) -> Option<String> {
    let lines: Vec<&str> = said
        .lines()
        .map(|line| line.trim().trim_start_matches("koru: "))
        .filter(|line| !line.is_empty() && !line.starts_with("Warning: Permanently added"))
        .collect();
    let text = lines.join(" ");
    let code = status.and_then(|s| s.code());
    let said = match code {
        Some(0) if text.is_empty() => return None,
        None if status.is_none() && text.is_empty() => return None,
        Some(COMMAND_NOT_FOUND) => format!(
            "{text} (is koru installed there, on the PATH of a non-interactive ssh session? a named host can say where with `koru:` in hosts.yaml)"
        ),
        _ if !text.is_empty() => text,
        Some(SSH_FAILED) => "ssh failed and said nothing".to_string(),
        Some(code) => format!("`koru dial-stdio` there exited with status {code}"),
        None => match status {
            Some(status) => format!("ssh ended: {status}"),
            None => "ssh did not exit after its connection closed".to_string(),
        },
    };
    Some(said)
}

impl TransportLink for SshLink {
    fn failure(&mut self) -> Pin<Box<dyn Future<Output = Option<ClientError>> + Send + '_>> {
        Box::pin(async move {
            if self.explained.is_none() {
                let explained = self.explain().await;
                self.explained = Some(explained);
            }
            self.explained
                .clone()
                .flatten()
                .map(|said| ClientError::Unreachable {
                    host: self.host.clone(),
                    said,
                })
        })
    }

    fn close(mut self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            if let Some(mut child) = self.child.take() {
                // Its stdin is closed: ssh ends the session and exits; kill it if it lingers.
                if tokio::time::timeout(CLOSE_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn endpoint(url: &str, options: &[&str], interactive: bool) -> SshEndpoint {
        SshEndpoint {
            url: SshUrl::parse(url).unwrap(),
            options: options.iter().map(|s| s.to_string()).collect(),
            program: "koru".into(),
            interactive,
        }
    }

    #[test]
    fn the_ssh_command_line_puts_the_users_options_first_and_never_accepts_host_keys() {
        let args = endpoint(
            "ssh://me@box:2222",
            &["IdentityFile=/k", "StrictHostKeyChecking=yes"],
            false,
        )
        .arguments();
        assert_eq!(
            args.join(" "),
            "-T -o IdentityFile=/k -o StrictHostKeyChecking=yes -o ConnectTimeout=10 -o ServerAliveInterval=15 -o BatchMode=yes -p 2222 me@box -- koru dial-stdio"
        );
        let args = endpoint("ssh://box", &[], true).arguments();
        assert_eq!(
            args.join(" "),
            "-T -o ConnectTimeout=10 -o ServerAliveInterval=15 box -- koru dial-stdio"
        );
        assert!(!args.iter().any(|a| a.contains("StrictHostKeyChecking")));
        let mut odd = endpoint("ssh://box", &[], true);
        odd.program = "/opt/my koru/koru".into();
        assert_eq!(
            odd.arguments().last().unwrap(),
            "'/opt/my koru/koru' dial-stdio"
        );
    }

    #[test]
    fn shell_quoting_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("/usr/bin/koru"), "/usr/bin/koru");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(rm)"), "'$(rm)'");
    }

    fn said(status: Option<i32>, stderr: &str) -> String {
        explain(status.map(|c| ExitStatus::from_raw(c << 8)), stderr)
            .map(|said| {
                ClientError::Unreachable {
                    host: "box".into(),
                    said,
                }
                .to_string()
            })
            .unwrap_or_else(|| "-".into())
    }

    #[test]
    fn what_ssh_said_becomes_the_reason_a_host_cannot_be_reached() {
        assert_eq!(
            said(
                Some(255),
                "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\r\nHost key verification failed.\r\n"
            ),
            "cannot reach host box: No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking. Host key verification failed."
        );
        assert_eq!(
            said(
                Some(255),
                "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\nme@box: Permission denied (publickey).\n"
            ),
            "cannot reach host box: me@box: Permission denied (publickey)."
        );
        assert_eq!(
            said(Some(3), "koru: no daemon at /run/user/1/koru/koru.sock; start one with `koru daemon`\n"),
            "cannot reach host box: no daemon at /run/user/1/koru/koru.sock; start one with `koru daemon`"
        );
        assert!(said(Some(127), "bash: line 1: koru: command not found\n")
            .starts_with("cannot reach host box: bash: line 1: koru: command not found (is koru installed there"));
        assert_eq!(
            said(Some(255), ""),
            "cannot reach host box: ssh failed and said nothing"
        );
        assert_eq!(said(Some(0), ""), "-");
    }
}

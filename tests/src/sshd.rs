//! A loopback OpenSSH server standing for a second machine: the real `/usr/sbin/sshd` on 127.0.0.1 with a throw-away host key and user key, run as the test's own user, whose sessions see one sandbox's koru (PATH, socket, runtime dir) — the far side of `koru --host ssh://…`.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{koru_bin, set_mode, Sandbox};

/// The server the tests start; killed when dropped.
pub struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    pub port: u16,
    pub user: String,
    pub log: PathBuf,
}

impl Sshd {
    /// Starts sshd in front of `remote`: a login with the throw-away key runs with `koru` on
    /// its PATH and `remote`'s socket and runtime dir, so `koru dial-stdio` there reaches
    /// `remote`'s daemon. Panics (the test fails, never skips) when sshd is missing.
    pub fn start(remote: &Sandbox) -> Sshd {
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(
            sshd.exists(),
            "no /usr/sbin/sshd: install openssh-server (scripts/test-all.sh does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("koru-sshd-")
            .tempdir()
            .expect("a temp dir");
        set_mode(dir.path(), 0o700);
        for key in ["host_key", "user_key"] {
            keygen(&dir.path().join(key));
        }
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin dir");
        std::os::unix::fs::symlink(koru_bin(), bin.join("koru")).expect("koru on the far PATH");
        let user = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.name)
            .expect("the test's user has a name");
        let public = std::fs::read_to_string(dir.path().join("user_key.pub")).expect("pub key");
        let environment = [
            format!("PATH={}:/usr/bin:/bin", bin.display()),
            format!("KORU_SOCKET={}", remote.socket().display()),
            format!("XDG_RUNTIME_DIR={}", remote.path().join("run").display()),
            format!("HOME={}", remote.home().display()),
            format!("XDG_CONFIG_HOME={}", remote.xdg_config_home().display()),
            format!("XDG_STATE_HOME={}", remote.path().join("state").display()),
        ]
        .iter()
        .map(|pair| format!("environment=\"{pair}\""))
        .collect::<Vec<_>>()
        .join(",");
        let authorized = dir.path().join("authorized_keys");
        std::fs::write(&authorized, format!("{environment} {public}")).expect("authorized_keys");
        set_mode(&authorized, 0o600);
        if nix::unistd::getuid().is_root() {
            // sshd's privilege separation directory.
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let log = dir.path().join("sshd.log");
        // A free port, then sshd on it; another process taking it in between fails the
        // start, which is retried.
        for _ in 0..5 {
            let port = free_port();
            let config = dir.path().join("sshd_config");
            std::fs::write(
                &config,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitUserEnvironment yes\nPidFile {}\nLogLevel VERBOSE\n",
                    dir.path().join("host_key").display(),
                    authorized.display(),
                    dir.path().join("sshd.pid").display(),
                ),
            )
            .expect("sshd_config");
            let mut child = Command::new(sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("sshd log"))
                .spawn()
                .expect("sshd starts");
            if wait_for_banner(port, &mut child) {
                let known_hosts = dir.path().join("known_hosts");
                let host_key =
                    std::fs::read_to_string(dir.path().join("host_key.pub")).expect("host key");
                let key: Vec<&str> = host_key.split_whitespace().take(2).collect();
                std::fs::write(
                    &known_hosts,
                    format!("[127.0.0.1]:{port} {}\n", key.join(" ")),
                )
                .expect("known_hosts");
                std::fs::write(dir.path().join("empty_known_hosts"), "").expect("empty");
                return Sshd {
                    child,
                    dir,
                    port,
                    user,
                    log,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "sshd did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// `ssh://USER@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ssh://{}@127.0.0.1:{}", self.user, self.port)
    }

    /// The `--ssh-option`s that make koru's ssh use the throw-away key, trust only this
    /// server's host key, and never ask.
    pub fn koru_args(&self) -> Vec<String> {
        self.koru_args_with_known_hosts(&self.dir.path().join("known_hosts"))
    }

    /// [`Sshd::koru_args`] with a known-hosts file that does not know this server.
    pub fn koru_args_with_unknown_host_key(&self) -> Vec<String> {
        self.koru_args_with_known_hosts(&self.dir.path().join("empty_known_hosts"))
    }

    fn koru_args_with_known_hosts(&self, known_hosts: &Path) -> Vec<String> {
        [
            format!(
                "IdentityFile={}",
                self.dir.path().join("user_key").display()
            ),
            format!("UserKnownHostsFile={}", known_hosts.display()),
            "StrictHostKeyChecking=yes".to_string(),
            "BatchMode=yes".to_string(),
            "LogLevel=ERROR".to_string(),
        ]
        .into_iter()
        .flat_map(|option| ["--ssh-option".to_string(), option])
        .collect()
    }

    /// The plain `ssh` to this server with the same options (no koru), running `command`.
    pub fn ssh(&self, command: &str) -> Command {
        let mut ssh = Command::new("ssh");
        ssh.arg("-T");
        for option in self.koru_args().chunks(2) {
            ssh.args(["-o", &option[1]]);
        }
        ssh.args(["-p", &self.port.to_string()])
            .arg(format!("{}@127.0.0.1", self.user))
            .args(["--", command])
            .stdin(Stdio::null());
        ssh
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen runs (openssh-client)");
    assert!(status.success(), "ssh-keygen failed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// True once the server on `port` greets with its SSH banner; false if it exits first or
/// stays silent for 10 s.
fn wait_for_banner(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut banner = [0u8; 8];
            if stream.read_exact(&mut banner).is_ok() && banner.starts_with(b"SSH-") {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

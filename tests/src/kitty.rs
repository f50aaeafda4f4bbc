//! A real kitty (Debian's) under Xvfb for tests, with its remote control on at a socket in the sandbox: its first window runs a given command, more windows are opened with `kitty @ launch`, and the real terminal agents are started in its windows (tests/agents/start-agent.sh writes their launch script).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use koru_daemon::terminal::kitty::{self, KittyWindow};

use crate::agents::FakeModel;
use crate::{Sandbox, Xvfb};

/// One kitty instance; dropped: every window's processes and kitty are killed.
pub struct Kitty {
    child: Child,
    /// Its remote-control address (`unix:/…/kitty.sock`).
    pub listen_on: String,
}

/// Waits up to `within` for `check` to give something.
pub fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Kitty {
    /// Starts kitty on `xvfb` with remote control at `socket`, its first window running
    /// `shell` (with `sh -c`).
    pub fn start(xvfb: &Xvfb, socket: &Path, shell: &str) -> Kitty {
        let child = Command::new("kitty")
            .args(["-o", "allow_remote_control=socket-only", "--listen-on"])
            .arg(format!("unix:{}", socket.display()))
            .args(["sh", "-c", shell])
            .env("DISPLAY", &xvfb.display)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("kitty is installed (scripts/test-all.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "kitty made no socket at {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Kitty {
            child,
            listen_on: format!("unix:{}", socket.display()),
        }
    }

    /// The pid of kitty itself.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn windows(&self) -> Vec<KittyWindow> {
        kitty::list_windows(&self.listen_on).expect("kitty @ ls")
    }

    /// A new window (in the first tab) running `command`; its id.
    pub fn launch(&self, cwd: &Path, command: &[&str]) -> u64 {
        let output = Command::new("kitty")
            .args([
                "@",
                "--to",
                &self.listen_on,
                "launch",
                "--type=window",
                "--cwd",
            ])
            .arg(cwd)
            .args(command)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "kitty @ launch: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .expect("kitty @ launch prints the new window's id")
    }

    pub fn screen(&self, window: u64) -> String {
        kitty::screen(&self.listen_on, window).unwrap_or_default()
    }

    /// Types `text` into `window` as keys would (no paste markers).
    pub fn type_text(&self, window: u64, text: &str) {
        kitty::send_text(&self.listen_on, window, text).expect("kitty @ send-text");
    }

    /// Starts `agent` (tests/agents/start-agent.sh writes its launch script) in `folder` in
    /// a new window under a shell, and waits until its input box shows and the screen
    /// settles; the window's id.
    pub fn start_agent(
        &self,
        sandbox: &Sandbox,
        agent: &str,
        folder: &Path,
        model: &FakeModel,
        hooks: bool,
    ) -> u64 {
        let script: PathBuf = sandbox.path().join(format!("launch-{agent}.sh"));
        let script = script.to_str().expect("a UTF-8 sandbox path");
        crate::agents::run_start_agent(
            sandbox,
            agent,
            folder,
            model,
            hooks,
            &[("LAUNCH_SCRIPT", script), ("LAUNCH_ONLY", "1")],
        );
        // The window's first process stays a shell holding kitty's variables, as when a
        // person types the agent's name at a prompt.
        let shell = format!("'{script}'; exit");
        let window = self.launch(folder, &["bash", "-c", &shell]);
        let ready = match agent {
            "claude-code" => "❯",
            "codex" => "› ",
            "gemini-cli" => "Type your message",
            _ => panic!("no readiness marker for {agent}"),
        };
        wait_for(
            &format!("{agent}'s input box in kitty window {window}"),
            Duration::from_secs(90),
            || {
                let screen = self.screen(window);
                screen
                    .lines()
                    .any(|l| l.trim_start().starts_with(ready) || l.contains(ready))
                    .then_some(())
            },
        );
        // Then until the screen stops changing for a second (at most 5 s).
        let mut previous = String::new();
        let mut same = 0;
        for _ in 0..25 {
            let screen = self.screen(window);
            if screen == previous {
                same += 1;
                if same >= 5 {
                    break;
                }
            } else {
                same = 0;
                previous = screen;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        window
    }
}

impl Drop for Kitty {
    /// Kills each window's process group (the agent and what it started), then kitty.
    fn drop(&mut self) {
        if let Ok(windows) = kitty::list_windows(&self.listen_on) {
            for window in windows {
                let pid = nix::unistd::Pid::from_raw(window.pid as i32);
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                crate::signal(window.pid as i32, nix::sys::signal::Signal::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! kitty's remote control against a real kitty (Debian's) under Xvfb: its windows with what runs in their foreground, a window's screen, and bytes sent to it arriving byte for byte.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use koru_daemon::terminal::kitty;
use koru_system_tests::{Sandbox, Xvfb};

struct Kitty(Child);

impl Drop for Kitty {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_kitty(xvfb: &Xvfb, socket: &Path, shell: &str) -> Kitty {
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
    Kitty(child)
}

fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_window_is_listed_with_its_foreground_read_and_sent_bytes_arrive_as_they_are() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let socket = sandbox.path().join("kitty.sock");
    let out = sandbox.path().join("received");
    let shell = format!("echo KORU-READY; exec cat > '{}'", out.display());
    let _kitty = start_kitty(&xvfb, &socket, &shell);
    let listen_on = format!("unix:{}", socket.display());

    let window = wait_for("the window running cat", || {
        let windows = kitty::list_windows(&listen_on).ok()?;
        windows.into_iter().find(|w| {
            w.foreground.iter().any(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"cat\0"))
            })
        })
    });
    assert_eq!(window.listen_on, listen_on);
    assert!(window.place.starts_with("os window "), "{window:?}");
    let screen = wait_for("KORU-READY on screen", || {
        let text = kitty::screen(&listen_on, window.id).ok()?;
        text.contains("KORU-READY").then_some(text)
    });
    assert!(
        screen.lines().next().unwrap().starts_with("KORU-READY"),
        "{screen}"
    );

    // Unicode, a quote and a backslash go as they are; the Return ends cat's line.
    kitty::send_text(&listen_on, window.id, "héllo «koru» ✓ \\n 'q'\r").unwrap();
    let received = wait_for("the line in cat's file", || {
        let text = std::fs::read_to_string(&out).ok()?;
        text.ends_with('\n').then_some(text)
    });
    assert_eq!(received, "héllo «koru» ✓ \\n 'q'\n");

    // kitty says yes to a send that reaches no window (the agent's record must prove one).
    assert_eq!(kitty::send_text(&listen_on, 999, "nowhere"), Ok(()));
    let error = kitty::screen(&listen_on, 999).unwrap_err();
    assert!(error.to_string().contains("No matching windows"), "{error}");
}

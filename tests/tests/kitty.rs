//! kitty's remote control against a real kitty (Debian's) under Xvfb: its windows with what runs in their foreground, a window's screen, and bytes sent to it arriving byte for byte.

use std::time::Duration;

use koru_daemon::terminal::kitty;
use koru_system_tests::kitty::Kitty;
use koru_system_tests::{Sandbox, Xvfb};

fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    koru_system_tests::kitty::wait_for(what, Duration::from_secs(20), check)
}

#[test]
fn a_window_is_listed_with_its_foreground_read_and_sent_bytes_arrive_as_they_are() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let socket = sandbox.path().join("kitty.sock");
    let out = sandbox.path().join("received");
    let shell = format!("echo KORU-READY; exec cat > '{}'", out.display());
    let _kitty = Kitty::start(&xvfb, &socket, &shell);
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

/// A kitty started without remote control, running a process named as Claude Code's
/// executable (a copy of `sleep`: the look matches processes by name; the real agents run
/// in tests/tests/kitty_drives.rs).
#[test]
fn a_kitty_with_remote_control_off_is_said_by_doctor_and_by_a_drive_with_how_to_turn_it_on() {
    let sandbox = Sandbox::new();
    let xvfb = Xvfb::start();
    let folder = sandbox.workspace("app");
    let claude = sandbox.path().join("claude");
    std::fs::copy("/bin/sleep", &claude).unwrap();
    let mut off = std::process::Command::new("kitty")
        .arg("--directory")
        .arg(&folder)
        .arg("sh")
        .arg("-c")
        .arg(format!("'{}' 600; exit", claude.display()))
        .env("DISPLAY", &xvfb.display)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let kitty_pid = off.id();
    wait_for("the stand-in agent under kitty", || {
        koru_daemon::terminal::procs::snapshot()
            .values()
            .any(|p| p.argv.first().is_some_and(|a| a.ends_with("/claude")))
            .then_some(())
    });
    // A kitty with remote control on, next to it, is said to answer.
    let socket = sandbox.path().join("kitty.sock");
    let on = Kitty::start(&xvfb, &socket, "exec sleep 600");

    let report = sandbox.run(&["doctor", "--json", "--only", "kitty_claude_code"]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let check = &report["interfaces"][0];
    assert_eq!(check["status"], "degraded", "{check:#}");
    assert_eq!(check["blocker"]["code"], "remote_control_off", "{check:#}");
    let detail = check["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "kitty (pid {kitty_pid}) has its remote control off"
        )) && detail.contains("allow_remote_control"),
        "{detail}"
    );
    let facts = check["facts"].to_string();
    assert!(
        facts.contains(&format!(
            "kitty (pid {}): remote control answers at {} (1 window(s))",
            on.pid(),
            on.listen_on
        )),
        "{facts}"
    );

    // A drive to the agent in it cannot reach it, and says why.
    let _daemon = sandbox.start_daemon(&[]);
    let output = sandbox.run(&[
        "send",
        "--agent",
        "claude-code",
        "--workspace",
        folder.to_str().unwrap(),
        "hello",
    ]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("no_target") || said.contains("no claude-code agent"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "runs in a kitty (pid {kitty_pid}) whose remote control is off"
        )),
        "{said}"
    );
    let _ = off.kill();
    let _ = off.wait();
}

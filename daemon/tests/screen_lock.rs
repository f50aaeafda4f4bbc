//! A locked screen stops OS injection before any key: a private D-Bus session bus carries a stand-in org.freedesktop.ScreenSaver service (this test's own, reporting the screen locked), and `koru send --window-pid` into a real xterm ends with `screen_locked` and an untouched window.

use koru_system_tests::{Sandbox, SessionBus, XTerm, Xvfb};

/// A stand-in for the desktop's screen saver service, served by this test.
struct LockedScreenSaver;

#[zbus::interface(name = "org.freedesktop.ScreenSaver")]
impl LockedScreenSaver {
    fn get_active(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_screen_blocks_os_injection_with_screen_locked() {
    let sandbox = Sandbox::new();
    let bus = SessionBus::start(sandbox.path());
    let _service = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.ScreenSaver")
        .unwrap()
        .serve_at("/org/freedesktop/ScreenSaver", LockedScreenSaver)
        .unwrap()
        .build()
        .await
        .expect("the stand-in screen saver serves on the private bus");
    let xvfb = Xvfb::start();
    let daemon = sandbox.start_daemon_with_env(
        &[],
        &[
            ("DISPLAY", &xvfb.display),
            ("DBUS_SESSION_BUS_ADDRESS", &bus.address),
        ],
    );
    let window = XTerm::start(&xvfb.display, sandbox.path(), "locked");
    let pid = window.pid.to_string();
    let output = tokio::task::spawn_blocking({
        let command = sandbox
            .koru()
            .args(["send", "--window-pid", &pid, "--wait", "not while locked"])
            .output();
        move || command
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{output:?}\ndaemon log:\n{}",
        daemon.log_text()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("screen_locked"), "{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(window.text(), "", "no key reached the window");
}

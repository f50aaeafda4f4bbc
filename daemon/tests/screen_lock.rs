//! A locked screen stops OS injection before any key: private D-Bus buses carry stand-in lock sources (this test's own services: org.freedesktop.ScreenSaver on a session bus, logind's org.freedesktop.login1 on a bus the daemon takes for the system bus through DBUS_SYSTEM_BUS_ADDRESS), and `koru send --window-pid` into a real xterm ends with `screen_locked` and an untouched window; doctor names the source that answered.

use std::sync::{Arc, Mutex};

use koru_system_tests::{doctor_check, stdout_json, Sandbox, SessionBus, XTerm, Xvfb};
use zbus::zvariant::OwnedObjectPath;

/// A stand-in for the desktop's screen saver service, served by this test.
struct ScreenSaver {
    active: bool,
}

#[zbus::interface(name = "org.freedesktop.ScreenSaver")]
impl ScreenSaver {
    fn get_active(&self) -> bool {
        self.active
    }
}

/// A stand-in for logind's manager: the session of a pid, or no session for any pid
/// (as for a process outside every session, such as a systemd user service).
struct Login1Manager {
    in_session: bool,
    asked_pids: Arc<Mutex<Vec<u32>>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Login1Manager {
    #[zbus(name = "GetSessionByPID")]
    fn get_session_by_pid(&self, pid: u32) -> zbus::fdo::Result<OwnedObjectPath> {
        self.asked_pids.lock().unwrap().push(pid);
        if !self.in_session {
            return Err(zbus::fdo::Error::Failed(format!(
                "PID {pid} does not belong to any known session"
            )));
        }
        Ok(OwnedObjectPath::try_from("/org/freedesktop/login1/session/_31").unwrap())
    }
}

/// A stand-in for logind's session object with its `LockedHint`.
struct Login1Session {
    locked: bool,
}

#[zbus::interface(name = "org.freedesktop.login1.Session")]
impl Login1Session {
    #[zbus(property)]
    fn locked_hint(&self) -> bool {
        self.locked
    }
}

/// Serves the stand-in logind on `address`; the session is at `session_path`.
async fn serve_login1(
    address: &str,
    in_session: bool,
    session_path: &str,
    locked: bool,
) -> (zbus::Connection, Arc<Mutex<Vec<u32>>>) {
    let asked_pids = Arc::new(Mutex::new(Vec::new()));
    let connection = zbus::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.login1")
        .unwrap()
        .serve_at(
            "/org/freedesktop/login1",
            Login1Manager {
                in_session,
                asked_pids: asked_pids.clone(),
            },
        )
        .unwrap()
        .serve_at(session_path, Login1Session { locked })
        .unwrap()
        .build()
        .await
        .expect("the stand-in logind serves on the private bus");
    (connection, asked_pids)
}

async fn serve_screen_saver(address: &str, active: bool) -> zbus::Connection {
    zbus::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.ScreenSaver")
        .unwrap()
        .serve_at("/org/freedesktop/ScreenSaver", ScreenSaver { active })
        .unwrap()
        .build()
        .await
        .expect("the stand-in screen saver serves on the private bus")
}

/// `koru send --window-pid` into a fresh xterm: the output, and the window's text after.
async fn send_into_xterm(
    sandbox: &Sandbox,
    display: &str,
    title: &str,
) -> (std::process::Output, String) {
    let window = XTerm::start(display, sandbox.path(), title);
    let pid = window.pid.to_string();
    let mut command = sandbox.koru();
    command.args(["send", "--window-pid", &pid, "--wait", "not while locked"]);
    // Off the runtime's threads: the stand-in services answer on them meanwhile.
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    (output, window.text())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_screen_blocks_os_injection_with_screen_locked() {
    let sandbox = Sandbox::new();
    let bus = SessionBus::start(sandbox.path());
    let _service = serve_screen_saver(&bus.address, true).await;
    let xvfb = Xvfb::start();
    let daemon = sandbox.start_daemon_with_env(
        &[],
        &[
            ("DISPLAY", &xvfb.display),
            ("DBUS_SESSION_BUS_ADDRESS", &bus.address),
        ],
    );
    let (output, text) = send_into_xterm(&sandbox, &xvfb.display, "locked").await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "{output:?}\ndaemon log:\n{}",
        daemon.log_text()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("screen_locked"), "{stderr}");
    assert!(
        stderr.contains("org.freedesktop.ScreenSaver.GetActive"),
        "{stderr}"
    );
    assert_eq!(text, "", "no key reached the window");
}

#[tokio::test(flavor = "multi_thread")]
async fn logind_says_locked_first_and_wins_over_a_screen_saver_that_says_unlocked() {
    let sandbox = Sandbox::new();
    let session_bus = SessionBus::start(sandbox.path());
    let system_dir = sandbox.path().join("system-bus");
    std::fs::create_dir_all(&system_dir).unwrap();
    let system_bus = SessionBus::start(&system_dir);
    let (_login1, asked_pids) = serve_login1(
        &system_bus.address,
        true,
        "/org/freedesktop/login1/session/_31",
        true,
    )
    .await;
    // Asked too, but logind answers first in the order.
    let _saver = serve_screen_saver(&session_bus.address, false).await;
    let xvfb = Xvfb::start();
    let env = [
        ("DISPLAY", xvfb.display.as_str()),
        ("DBUS_SESSION_BUS_ADDRESS", session_bus.address.as_str()),
        ("DBUS_SYSTEM_BUS_ADDRESS", system_bus.address.as_str()),
    ];
    let daemon = sandbox.start_daemon_with_env(&[], &env);
    let (output, text) = send_into_xterm(&sandbox, &xvfb.display, "login1").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stderr}\ndaemon log:\n{}",
        daemon.log_text()
    );
    assert!(stderr.contains("screen_locked"), "{stderr}");
    assert!(
        stderr.contains("org.freedesktop.login1 (the session's LockedHint, system bus)"),
        "{stderr}"
    );
    assert_eq!(text, "", "no key reached the window");
    assert!(
        asked_pids.lock().unwrap().contains(&(daemon.child.id())),
        "logind was asked for the daemon's own session: {:?}",
        asked_pids.lock().unwrap()
    );

    // Doctor names the source that answered.
    let report = stdout_json(
        &sandbox
            .koru()
            .envs(env)
            .args(["doctor", "--json", "--only", "screen_lock"])
            .output()
            .unwrap(),
    );
    let check = doctor_check(&report, "screen_lock");
    assert_eq!(check["status"], "ok", "{check}");
    assert_eq!(
        check["facts"][0],
        "locked, as org.freedesktop.login1 (the session's LockedHint, system bus) says"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_outside_any_session_reads_loginds_auto_session_and_no_source_is_said_plainly() {
    let sandbox = Sandbox::new();
    let system_dir = sandbox.path().join("system-bus");
    std::fs::create_dir_all(&system_dir).unwrap();
    let system_bus = SessionBus::start(&system_dir);
    let (_login1, _) = serve_login1(
        &system_bus.address,
        false,
        "/org/freedesktop/login1/session/auto",
        false,
    )
    .await;
    let doctor = |system: &str| {
        let mut command = sandbox.koru();
        command.env("DBUS_SYSTEM_BUS_ADDRESS", system).args([
            "doctor",
            "--json",
            "--only",
            "screen_lock",
            "--timeout",
            "500",
        ]);
        stdout_json(&command.output().unwrap())
    };
    let report = doctor(&system_bus.address);
    let check = doctor_check(&report, "screen_lock");
    assert_eq!(check["status"], "ok", "{check}");
    assert!(
        check["facts"][0]
            .as_str()
            .unwrap()
            .starts_with("not locked, as org.freedesktop.login1"),
        "{check}"
    );

    // No system bus and no session bus: doctor says none answered, naming logind.
    let missing = format!(
        "unix:path={}",
        sandbox.path().join("nothing.sock").display()
    );
    let report = doctor(&missing);
    let check = doctor_check(&report, "screen_lock");
    assert_eq!(check["status"], "degraded", "{check}");
    assert_eq!(check["blocker"]["code"], "bus_unavailable");
    let detail = check["blocker"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "no lock source answered: org.freedesktop.login1: cannot connect to the system bus"
        ),
        "{detail}"
    );
    assert!(
        detail.contains("org.gnome.ScreenSaver: the session bus is not configured"),
        "{detail}"
    );
}

//! The Wayland backend against a real compositor: headless sway (run as `nobody`, since sway refuses root) with a foot terminal; sway IPC finds and focuses it by pid, wtype + wl-clipboard deliver a multi-line Unicode prompt byte-exact, and the clipboard is restored.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use koru_injectors::{
    deliver, Clipboard, DeliverOptions, Injector, Method, Stage, SwayWindows, TargetSpec,
    WindowControl, WlClipboard, WtypeKeys,
};

const NOBODY: &str = "65534";

struct Sway {
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

fn as_nobody(program: &str) -> Command {
    let mut command = Command::new("setpriv");
    command.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        program,
    ]);
    command
}

impl Sway {
    fn start() -> Sway {
        assert!(
            nix::unistd::getuid().is_root(),
            "this test starts sway as nobody and needs root (CI runs as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = dir.path().join("run");
        let home = dir.path().join("home");
        for d in [&run, &home] {
            std::fs::create_dir_all(d).unwrap();
            nix::unistd::chown(d, Some(65534.into()), Some(65534.into())).unwrap();
        }
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = dir.path().join("sway.conf");
        std::fs::write(&config, "output HEADLESS-1 resolution 1280x800\n").unwrap();
        let sway = as_nobody("sway")
            .arg("-c")
            .arg(&config)
            .env_remove("DISPLAY")
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &run)
            .env("WLR_BACKENDS", "headless")
            .env("WLR_LIBINPUT_NO_DEVICES", "1")
            .env("WLR_RENDERER", "pixman")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sway is installed (scripts/test-all.sh installs it)");
        let this = Sway {
            dir,
            children: vec![sway],
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(socket) = this
                .find_in_run("sway-ipc.")
                .filter(|_| run.join("wayland-1").exists())
            {
                std::env::set_var("SWAYSOCK", socket);
                break;
            }
            assert!(Instant::now() < deadline, "sway did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::env::set_var("XDG_RUNTIME_DIR", &run);
        std::env::set_var("WAYLAND_DISPLAY", "wayland-1");
        std::env::remove_var("DISPLAY");
        this
    }

    fn find_in_run(&self, prefix: &str) -> Option<PathBuf> {
        std::fs::read_dir(self.dir.path().join("run"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
            })
    }

    /// A foot terminal (as nobody) that appends its input to a file; returns its pid and the file.
    fn terminal(&mut self, title: &str) -> (u32, PathBuf) {
        let out = self.dir.path().join(format!("{title}.txt"));
        std::fs::write(&out, "").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o666)).unwrap();
        let child = as_nobody("foot")
            .args(["-T", title, "sh", "-c"])
            .arg(format!("stty -echo; exec cat >> '{}'", out.display()))
            .env("HOME", self.dir.path().join("home"))
            .env("LANG", "C.UTF-8")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("foot is installed (scripts/test-all.sh installs it)");
        self.children.push(child);
        let pid = self.children.last().unwrap().id();
        let windows = SwayWindows::default();
        let deadline = Instant::now() + Duration::from_secs(15);
        while windows
            .find(&TargetSpec::for_pid(pid))
            .map(|w| w.is_empty())
            .unwrap_or(true)
        {
            assert!(
                Instant::now() < deadline,
                "foot {title} did not map a window"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        (pid, out)
    }
}

impl Drop for Sway {
    fn drop(&mut self) {
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn wtype_and_wl_clipboard_deliver_a_unicode_prompt_into_foot_found_by_pid() {
    let mut sway = Sway::start();
    let (other_pid, other_out) = sway.terminal("other");
    let (pid, out) = sway.terminal("target");
    let injector = Injector {
        name: "wtype",
        windows: Box::new(SwayWindows::default()),
        keys: Box::new(WtypeKeys::default()),
        clipboard: Some(Box::new(WlClipboard::default())),
    };
    injector.probe().expect("wtype works here");
    let clipboard = WlClipboard::default();
    clipboard.write("previous clipboard").unwrap();

    let window = injector
        .windows
        .find(&TargetSpec::for_pid(pid))
        .unwrap()
        .remove(0);
    assert_eq!(window.title, "target");
    // Focus the other terminal first: deliver must move focus to the target itself.
    let other = injector
        .windows
        .find(&TargetSpec::for_pid(other_pid))
        .unwrap()
        .remove(0);
    injector.windows.focus(&other).unwrap();

    let prompt = "Réécris la fonction — garde les tests ✓\n第二行 🚀 \"quoted\"";
    let options = DeliverOptions {
        method: Method::Auto,
        paste_chord: "ctrl+shift+v".parse().unwrap(),
        ..DeliverOptions::default()
    };
    let delivery = deliver(&injector, &window, prompt, &options).unwrap();
    assert_eq!(delivery.method, Method::Paste);
    assert_eq!(delivery.stage, Stage::Submitted);
    let expected = format!("{prompt}\n");
    assert_eq!(koru_system_tests::wait_for_file(&out, &expected), expected);
    assert_eq!(
        std::fs::read_to_string(&other_out).unwrap(),
        "",
        "nothing went to the other window"
    );
    assert_eq!(
        clipboard.read().unwrap().as_deref(),
        Some("previous clipboard")
    );

    // ASCII by typing.
    let typed = DeliverOptions {
        method: Method::Type,
        ..options
    };
    deliver(&injector, &window, "typed with wtype", &typed).unwrap();
    let both = format!("{expected}typed with wtype\n");
    assert_eq!(koru_system_tests::wait_for_file(&out, &both), both);
}

//! ydotool against a FAKE `ydotool` command: this machine's kernel has no uinput (/dev/uinput does not exist), so the real ydotool cannot run here. The fake records its arguments and input so the backend's command lines and key codes are checked; the probe's refusal without uinput is checked for real.

use std::os::unix::fs::PermissionsExt;

use koru_injectors::{KeyInput, YdotoolKeys};

#[test]
fn ydotool_backend_with_a_fake_ydotool_command_sends_text_and_keycodes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let fake = dir.path().join("ydotool");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n# FAKE ydotool for tests: records its arguments and standard input.\nprintf 'args:%s\\n' \"$*\" >> '{log}'\nif [ \"$1\" = type ]; then printf 'stdin:' >> '{log}'; cat >> '{log}'; printf '\\n' >> '{log}'; fi\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::env::set_var("PATH", path);

    // Without uinput the backend refuses, whatever is on PATH.
    let real = YdotoolKeys::default();
    if !std::path::Path::new("/dev/uinput").exists() {
        let refused = real.probe().unwrap_err();
        assert_eq!(refused.blocker, "uinput_missing");
    }

    let mut keys = YdotoolKeys::default();
    let device = dir.path().join("uinput-stand-in");
    std::fs::write(&device, "").unwrap();
    keys.uinput_path = device;
    keys.probe()
        .expect("with a device and ydotool on PATH the probe passes");
    keys.type_text("héllo wörld").unwrap();
    keys.key(&"ctrl+shift+v".parse().unwrap()).unwrap();
    keys.key(&"Return".parse().unwrap()).unwrap();
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls,
        "args:type --file -\nstdin:héllo wörld\nargs:key 29:1 42:1 47:1 47:0 42:0 29:0\nargs:key 28:1 28:0\n"
    );
    let unknown = keys.key(&"F13".parse().unwrap()).unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "cannot type: ydotool: no keycode for \"F13\""
    );
}

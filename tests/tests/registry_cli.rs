//! `koru registry validate|show|schema` and the daemon's live reload (file change, SIGHUP) against the real binary.

use std::time::Duration;

use koru_system_tests::{controller_hello, greet, Sandbox};
use serde_json::{json, Value};

/// How many interfaces the built-in registry defines (what every count below starts from).
fn built_in_count() -> usize {
    koru_registry::load(&[koru_registry::LayerSource::built_in()])
        .registry
        .interfaces()
        .len()
}

#[test]
fn validate_accepts_the_built_in_registry_and_locates_every_problem_in_a_bad_file() {
    let sandbox = Sandbox::new();
    let ok = sandbox.run(&["registry", "validate"]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).starts_with(&format!(
        "registry ok: {} interfaces from built-in",
        built_in_count()
    )));

    let bad = sandbox.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "interfaces:\n  - id: my_thing\n    family: telepathy\n    colour: blue\n",
    )
    .unwrap();
    let output = sandbox.run(&["registry", "validate", bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    let name = bad.display();
    assert!(
        text.contains(&format!(
            "{name}:4:5: `interfaces[0].colour`: unknown field `colour`"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("{name}:3:5: `interfaces[0].family`: unknown variant `telepathy`, expected one of `tool_invocation`, `ide_control`")),
        "{text}"
    );
    assert!(text.contains("2 problems found"), "{text}");
}

#[test]
fn show_names_the_layer_each_value_came_from() {
    let sandbox = Sandbox::new();
    let user_dir = sandbox.path().join("config/koru");
    std::fs::create_dir_all(&user_dir).unwrap();
    std::fs::write(
        user_dir.join("registry.yaml"),
        "interfaces:\n  - id: os_injector_xdotool\n    enabled: false\n",
    )
    .unwrap();
    let output = sandbox.run(&["registry", "show", "--json", "os_injector_xdotool"]);
    assert!(output.status.success(), "{output:?}");
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["interface"]["enabled"], false);
    assert_eq!(shown["origins"]["enabled"]["layer"], "user");
    assert_eq!(shown["origins"]["enabled"]["line"], 3);
    assert_eq!(shown["origins"]["family"]["layer"], "built-in");

    let human = sandbox.run(&["registry", "show", "os_injector_xdotool"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("enabled: false    # from user "), "{text}");

    let all: Value =
        serde_json::from_slice(&sandbox.run(&["registry", "show", "--json"]).stdout).unwrap();
    assert_eq!(all["layers"].as_array().unwrap().len(), 2);
    assert_eq!(
        all["interfaces"].as_array().unwrap().len(),
        built_in_count()
    );

    let unknown = sandbox.run(&["registry", "show", "nope"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no interface `nope`"));
}

#[test]
fn schema_describes_registry_files() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["registry", "schema"]);
    let schema: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(schema["title"], "RegistryFile");
    assert!(schema["$defs"]["InterfaceEntry"]["properties"]["family"].is_object());
}

fn next_reload(watcher: &mut koru_system_tests::Raw) -> Value {
    loop {
        let line = watcher.recv_type("stream");
        if line["event"]["kind"] == "registry_reloaded" {
            return line["event"].clone();
        }
    }
}

/// Replaces a file's content in one step, as an editor saves it.
fn save(path: &std::path::Path, content: &str) {
    let temp = path.with_extension("yaml.saving");
    std::fs::write(&temp, content).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

fn status(watcher: &mut koru_system_tests::Raw, id: i64) -> Value {
    watcher.send(&json!({"v": 1, "id": id, "type": "status"}));
    watcher.recv_type("status.result")
}

#[test]
fn a_broken_edit_keeps_the_last_good_registry_and_fixing_it_applies() {
    let sandbox = Sandbox::new();
    let user_dir = sandbox.path().join("config/koru");
    std::fs::create_dir_all(&user_dir).unwrap();
    let user_file = user_dir.join("registry.yaml");
    std::fs::write(
        &user_file,
        "interfaces:\n  - id: os_injector_xdotool\n    priority: 40\n",
    )
    .unwrap();
    let daemon = sandbox.start_daemon(&[]);
    let (mut watcher, _) = greet(&daemon.socket, &controller_hello());
    watcher.set_read_timeout(Duration::from_secs(10));
    watcher.send(&json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    watcher.recv_type("events.subscribed");
    let before = status(&mut watcher, 2);
    assert_eq!(before["registry"]["interfaces"], built_in_count());
    assert_eq!(
        before["registry"]["layers"][1],
        format!("user: {}", user_file.display())
    );

    // Written whole (temp file + rename, as editors save): a plain write truncates first,
    // and on a loaded machine the daemon may read the empty file in between — a valid,
    // empty layer.
    save(
        &user_file,
        "interfaces:\n  - id: os_injector_xdotool\n    family: telepathy\n",
    );
    let broken = next_reload(&mut watcher);
    assert_eq!(broken["applied"], false);
    assert_eq!(broken["interfaces"], built_in_count());
    let diagnostic = broken["diagnostics"][0].as_str().unwrap();
    assert!(
        diagnostic.starts_with(&format!("{}:3:5:", user_file.display())),
        "{diagnostic}"
    );
    let during = status(&mut watcher, 3);
    assert_eq!(during["registry"]["diagnostics"][0], diagnostic);
    assert!(daemon.log_text().contains("keeping the last good registry"));

    save(
        &user_file,
        "interfaces:\n  - id: my_extra_route\n    description: added by the user\n    family: desktop_control\n    direction: control\n    transport: x11\n    surface: window\n    authority: low\n    verification: {mode: none}\n",
    );
    let fixed = next_reload(&mut watcher);
    assert_eq!(fixed["applied"], true, "{fixed}");
    assert_eq!(fixed["interfaces"], built_in_count() + 1);
    let after = status(&mut watcher, 4);
    assert_eq!(after["registry"]["diagnostics"], json!([]));
    assert_eq!(after["registry"]["interfaces"], built_in_count() + 1);

    // Reading a layer is not a change: until the next edit nothing reloads (a reload
    // that set off the next one kept an idle daemon at 4 % of a core).
    watcher.set_read_timeout(Duration::from_millis(200));
    let quiet_until = std::time::Instant::now() + Duration::from_millis(2000);
    while std::time::Instant::now() < quiet_until {
        if let Some(line) = watcher.recv() {
            assert_ne!(
                line["event"]["kind"], "registry_reloaded",
                "a reload nobody asked for: {line}"
            );
        }
    }
}

#[test]
fn sighup_reloads_the_registry() {
    let sandbox = Sandbox::new();
    let daemon = sandbox.start_daemon(&[]);
    let (mut watcher, _) = greet(&daemon.socket, &controller_hello());
    watcher.send(&json!({"v": 1, "id": 1, "type": "events.subscribe"}));
    watcher.recv_type("events.subscribed");
    koru_system_tests::signal(daemon.pid(), nix::sys::signal::Signal::SIGHUP);
    let reloaded = next_reload(&mut watcher);
    assert_eq!(reloaded["applied"], true);
    assert_eq!(reloaded["interfaces"], built_in_count());
}

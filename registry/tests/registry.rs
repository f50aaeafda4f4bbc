//! The built-in registry validates clean and names every concrete interface; layers override field by field with provenance; bad files give located diagnostics.

use koru_registry::{load, Layer, LayerSource, Platform};

fn source(layer: Layer, name: &str, text: &str) -> LayerSource {
    LayerSource {
        layer,
        name: name.into(),
        path: None,
        text: text.into(),
    }
}

#[test]
fn the_built_in_registry_is_clean_and_complete() {
    let loaded = load(&[LayerSource::built_in()]);
    assert!(loaded.is_clean(), "{:#?}", loaded.diagnostics);
    for id in [
        "mcp_stdio_server",
        "mcp_http",
        "dashboard_rest",
        "cli",
        "plugin_socket_vscode_family",
        "plugin_socket_jetbrains",
        "vscode_native_chat_open",
        "antigravity_native_send",
        "cursor_native_new_chat",
        "cursor_plugin_drive",
        "windsurf_plugin_drive",
        "jetbrains_plugin_drive",
        "jetbrains_copilot_plugin_drive",
        "jetbrains_claude_code_plugin_drive",
        "jetbrains_junie_plugin_drive",
        "os_injector_xdotool",
        "os_injector_wtype",
        "os_injector_ydotool",
        "os_injector_enigo",
        "clipboard_x11",
        "clipboard_wayland",
        "filesystem_artifacts",
        "chat_history_claude_code_jsonl",
        "chat_history_copilot_json",
        "chat_history_cursor_sqlite",
        "chat_history_cline_tasks",
        "chat_history_codex_jsonl",
        "chat_history_antigravity_pb_readonly",
        "dbus_session",
    ] {
        let interface = loaded
            .registry
            .get(id)
            .unwrap_or_else(|| panic!("built-in registry lacks {id}"));
        assert!(!interface.description.is_empty(), "{id} has no description");
        assert!(
            !interface.blocking_modes.is_empty(),
            "{id} lists no blocking modes"
        );
    }
    // Observation stores are never written.
    for interface in loaded.registry.interfaces() {
        if interface.family == koru_registry::Family::Observation {
            assert!(
                !interface.write_safe,
                "{} must be write_safe: false",
                interface.id
            );
        }
    }
}

#[test]
fn the_built_in_registry_read_from_its_build_time_json_means_what_its_yaml_says() {
    // The embedded text is read from what build.rs made of it; the same text with one
    // more blank line is not the embedded text, so it is read as YAML.
    let fast = load(&[LayerSource::built_in()]);
    let mut yaml = LayerSource::built_in();
    yaml.text.push('\n');
    let read = load(&[yaml]);
    assert!(
        fast.is_clean() && read.is_clean(),
        "{:#?}",
        read.diagnostics
    );
    assert_eq!(fast.registry.layers, read.registry.layers);
    assert_eq!(fast.registry.interfaces(), read.registry.interfaces());
    assert_eq!(fast.registry.policy, read.registry.policy);
    assert_eq!(
        fast.registry.policy_origins(),
        read.registry.policy_origins()
    );
    assert!(!fast.registry.policy_origins().is_empty());
    for interface in read.registry.interfaces() {
        let origins = read.registry.origins(&interface.id);
        assert!(origins.is_some_and(|o| o.values().all(|o| o.line > 0)));
        assert_eq!(
            fast.registry.origins(&interface.id),
            origins,
            "{}",
            interface.id
        );
    }

    // A user's layer is YAML whatever it says, with its positions.
    let user = load(&[
        LayerSource::built_in(),
        source(
            Layer::User,
            "user.yaml",
            "interfaces:\n  - id: cli\n    priority: nine\n",
        ),
    ]);
    assert_eq!(user.diagnostics.len(), 1, "{:#?}", user.diagnostics);
    assert_eq!(
        (user.diagnostics[0].line, user.diagnostics[0].file.as_str()),
        (3, "user.yaml")
    );
}

#[test]
fn layers_override_field_by_field_and_say_where_each_value_came_from() {
    let user = source(
        Layer::User,
        "user.yaml",
        "interfaces:\n  - id: os_injector_xdotool\n    enabled: false\n    priority: 99\npolicy:\n  allow_os_injection: false\n",
    );
    let project = source(
        Layer::Project,
        "project.yaml",
        "interfaces:\n  - id: os_injector_xdotool\n    priority: 5\n",
    );
    let loaded = load(&[LayerSource::built_in(), user, project]);
    assert!(loaded.is_clean(), "{:#?}", loaded.diagnostics);
    let xdotool = loaded.registry.get("os_injector_xdotool").unwrap();
    assert!(!xdotool.enabled);
    assert_eq!(xdotool.priority, 5);
    assert_eq!(xdotool.family, koru_registry::Family::DesktopControl);
    let origins = loaded.registry.origins("os_injector_xdotool").unwrap();
    assert_eq!(origins["enabled"].layer, Layer::User);
    assert_eq!((origins["enabled"].line, origins["enabled"].column), (3, 5));
    assert_eq!(origins["priority"].layer, Layer::Project);
    assert_eq!(origins["family"].layer, Layer::BuiltIn);
    assert!(!loaded.registry.policy.allow_os_injection);
    assert_eq!(
        loaded.registry.policy_origins()["allow_os_injection"].layer,
        Layer::User
    );
}

#[test]
fn routes_rank_by_policy_order_then_authority_then_priority() {
    let loaded = load(&[LayerSource::built_in()]);
    let ids = |product: &str| -> Vec<String> {
        koru_registry::rank_routes(&loaded.registry, product, Platform::Linux)
            .iter()
            .map(|i| i.id.clone())
            .collect()
    };
    assert_eq!(
        ids("vscode"),
        [
            "vscode_native_chat_open",
            "vscode_plugin_drive",
            // The Claude Code panel: ranked with the plugin routes; the planner keeps it for
            // drives to Claude Code alone (`applies_to.agents`).
            "claude_code_panel_drive",
            // Same authority and priority: by id. Only one of them fits a given display.
            "os_injector_wtype",
            "os_injector_xdotool",
            // The desktop portal (GNOME/KDE Wayland): below the ones that see windows.
            "os_injector_portal",
            "os_injector_enigo",
            "os_injector_ydotool"
        ]
    );
    // Cursor: the new-chat native send (only for drives that ask for a new chat), then the
    // paste route whose submit key the daemon presses.
    let chat_ids = |product: &str| -> Vec<String> {
        koru_registry::rank_routes(&loaded.registry, product, Platform::Linux)
            .iter()
            .filter(|i| i.applies_to.agents.is_empty())
            .map(|i| i.id.clone())
            .collect()
    };
    assert_eq!(
        chat_ids("cursor")[..2],
        ["cursor_native_new_chat", "cursor_plugin_drive"]
    );
    let submit_keys = |id: &str| loaded.registry.get(id).unwrap().submit_key.clone();
    assert_eq!(
        submit_keys("cursor_plugin_drive").as_deref(),
        Some("Return")
    );
    assert_eq!(
        submit_keys("windsurf_plugin_drive").as_deref(),
        Some("Return")
    );
    assert_eq!(submit_keys("vscode_plugin_drive"), None);
    // One tool-window route per JetBrains chat, AI Assistant first.
    assert_eq!(
        ids("jetbrains-idea")[..4],
        [
            "jetbrains_plugin_drive",
            "jetbrains_copilot_plugin_drive",
            "jetbrains_claude_code_plugin_drive",
            "jetbrains_junie_plugin_drive"
        ]
    );

    let forbid = source(
        Layer::User,
        "user.yaml",
        "policy:\n  products:\n    cursor:\n      route_order: [plugin_drive]\n      disabled: [cursor_plugin_drive]\n",
    );
    let loaded = load(&[LayerSource::built_in(), forbid]);
    assert!(loaded.is_clean(), "{:#?}", loaded.diagnostics);
    // Only plugin drives, and Cursor's own disabled: the Claude Code panel's route is left.
    let left: Vec<String> = koru_registry::rank_routes(&loaded.registry, "cursor", Platform::Linux)
        .iter()
        .map(|i| i.id.clone())
        .collect();
    assert_eq!(left, ["claude_code_panel_drive"]);
}

#[test]
fn the_built_in_vs_code_family_stores_name_every_product_in_every_layout() {
    let loaded = load(&[LayerSource::built_in()]);
    let locations = |id: &str| loaded.registry.get(id).unwrap().locations.clone();
    let copilot = locations("chat_history_copilot_json");
    let cline = locations("chat_history_cline_tasks");
    // Alternatives are expanded when the layer is read: no consumer sees a brace group.
    for location in copilot.iter().chain(&cline) {
        let groups = location.matches('{').count() - location.matches("${").count();
        assert!(groups == 0 && !location.contains(','), "{location}");
    }
    let user_dirs = [
        "${XDG_CONFIG_HOME:-~/.config}/Code/User",
        "${XDG_CONFIG_HOME:-~/.config}/Code - Insiders/User",
        "${XDG_CONFIG_HOME:-~/.config}/Code - OSS/User",
        "${XDG_CONFIG_HOME:-~/.config}/VSCodium/User",
        "${XDG_CONFIG_HOME:-~/.config}/VSCodium - Insiders/User",
        "${XDG_CONFIG_HOME:-~/.config}/Windsurf/User",
        "${XDG_DATA_HOME:-~/.local/share}/code-server/User",
        "~/.var/app/com.visualstudio.code/config/Code/User",
        "~/.var/app/com.visualstudio.code.insiders/config/Code - Insiders/User",
        "~/.var/app/com.visualstudio.code-oss/config/Code - OSS/User",
        "~/.var/app/com.vscodium.codium/config/VSCodium/User",
        "~/.var/app/com.vscodium.codium-insiders/config/VSCodium - Insiders/User",
    ];
    for user in user_dirs {
        let sessions = format!("{user}/workspaceStorage");
        assert!(
            copilot.contains(&sessions),
            "{sessions} missing: {copilot:#?}"
        );
        for extension in [
            "saoudrizwan.claude-dev",
            "rooveterinaryinc.roo-cline",
            "kilocode.kilo-code",
        ] {
            let tasks = format!("{user}/globalStorage/{extension}/tasks");
            assert!(cline.contains(&tasks), "{tasks} missing: {cline:#?}");
        }
    }
    // Cursor runs the Cline family too, but writes no Copilot chat sessions.
    assert!(cline.contains(
        &"${XDG_CONFIG_HOME:-~/.config}/Cursor/User/globalStorage/kilocode.kilo-code/tasks".into()
    ));
    // The Cline CLI before the SDK (and Cline's standalone core) keeps its tasks in its
    // own folder.
    assert!(cline.contains(&"${CLINE_DIR:-~/.cline}/data/tasks".into()));
    assert_eq!(copilot.len(), user_dirs.len());
    assert_eq!(cline.len(), (user_dirs.len() + 1) * 3 + 1);
}

#[test]
fn notifications_default_to_every_event_that_needs_the_person_and_a_layer_may_narrow_them() {
    use koru_registry::NotifyEvent;
    let built_in = load(&[LayerSource::built_in()]);
    let notify = &built_in.registry.policy.notify;
    assert_eq!(
        notify.on,
        [
            NotifyEvent::NeedsInput,
            NotifyEvent::ChatRefused,
            NotifyEvent::ChatNotReady,
            NotifyEvent::ScreenLocked,
            NotifyEvent::FocusMismatch,
            NotifyEvent::Failed
        ]
    );
    assert!(notify.actions);
    assert_eq!((notify.burst, notify.per_minute), (3, 6));

    let user = source(
        Layer::User,
        "user.yaml",
        "policy:\n  notify:\n    on: [needs_input, done]\n    actions: false\n",
    );
    let loaded = load(&[LayerSource::built_in(), user]);
    assert!(loaded.is_clean(), "{:#?}", loaded.diagnostics);
    let notify = &loaded.registry.policy.notify;
    assert_eq!(notify.on, [NotifyEvent::NeedsInput, NotifyEvent::Done]);
    assert!(!notify.actions);
    assert_eq!(notify.burst, 3, "a field left out takes its default");
    assert_eq!(
        loaded.registry.policy_origins()["notify"].layer,
        Layer::User
    );
}

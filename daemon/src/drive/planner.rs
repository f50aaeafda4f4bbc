//! Route planning: for one drive, the registry's candidate routes in rank order, each already judged usable now or not (with a classified blocker and the registry's recovery hint). Pure given the probe function.

use koru_protocol::{AckStage, Blocker, Capability, DriveStep, Route};
use koru_registry::{
    effective_policy, rank_routes, BlockerCode, Platform, Registry, RouteKind, Step, StepCondition,
    StepStage,
};

/// One route the planner may try.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub interface: String,
    pub route: Route,
    /// The IDE commands a plugin runs (plugin routes).
    pub steps: Vec<DriveStep>,
    /// The key the daemon presses after the plugin's steps proved `pasted` (a plugin route
    /// whose registry entry has `submit_key`, for a drive that submits).
    pub submit_key: Option<SubmitKey>,
    /// `Err` when the route cannot be tried now.
    pub usable: Result<(), Blocker>,
    /// The registry's recovery hint for the blocker, if any.
    pub hint: Option<String>,
    /// Why the route runs other than the drive asked (a new chat because the submit key
    /// cannot be pressed here), recorded on the drive's attempt.
    pub note: Option<String>,
    /// Chords for OS injection.
    pub paste_chord: String,
    pub submit_chord: String,
    /// `(class regex, chord)`: paste chords for matching window classes.
    pub paste_chord_by_class: Vec<(String, String)>,
    /// Window class and title patterns the product's policy requires (OS injection).
    pub window_class: Option<String>,
    pub window_title: Option<String>,
}

/// A submit key the daemon presses into the plugin's window once the plugin has pasted.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitKey {
    /// The chord, as the registry writes it (`Return`).
    pub chord: String,
    /// The OS-injection interfaces that may press it, best first; `Err` when none may (the
    /// policy forbids OS injection for the product, or none applies to this platform).
    pub injectors: Result<Vec<String>, Blocker>,
}

/// What the planner knows about the target.
pub struct PlanInput<'a> {
    pub registry: &'a Registry,
    /// The IDE product, or `None` for a window without a plugin.
    pub product: Option<&'a str>,
    pub capabilities: &'a [Capability],
    /// Whether there is a window to aim OS injection at.
    pub has_window: bool,
    /// Whether the plugin is connected (plugin routes need it).
    pub plugin_connected: bool,
    pub platform: Platform,
    /// The drive's `submit` option: steps are chosen by it.
    pub submit: bool,
    /// The drive's `new_chat` option: steps with `when: new_chat` run only with it.
    pub new_chat: bool,
}

/// The steps of an interface that run for a drive: those whose `when` matches the drive's
/// options; for a drive that must not submit, never a step that proves `submitted`.
pub fn steps_for(steps: &[Step], submit: bool, new_chat: bool) -> Vec<DriveStep> {
    steps
        .iter()
        .filter(|step| match step.when {
            Some(StepCondition::Submit) => submit,
            Some(StepCondition::NoSubmit) => !submit,
            Some(StepCondition::NewChat) => new_chat,
            None => true,
        })
        .filter(|step| submit || step.proves != StepStage::Submitted)
        .map(|step| DriveStep {
            command: step.command.clone(),
            args: step.args.clone(),
            proves: match step.proves {
                StepStage::Received => AckStage::Received,
                StepStage::Focused => AckStage::Focused,
                StepStage::Pasted => AckStage::Pasted,
                StepStage::Submitted => AckStage::Submitted,
            },
        })
        .collect()
}

/// True when the plugin announced the capability (`native_send`, `command:<id>`, `tool_window:<id>`).
pub fn has_capability(capabilities: &[Capability], wanted: &str) -> bool {
    capabilities
        .iter()
        .any(|capability| match (capability, wanted.split_once(':')) {
            (Capability::Command { id }, Some(("command", want))) => id == want,
            (Capability::ToolWindow { id }, Some(("tool_window", want))) => id == want,
            (Capability::NativeSend, None) => wanted == "native_send",
            (Capability::PluginDrive, None) => wanted == "plugin_drive",
            (Capability::DriveSteps, None) => wanted == "drive_steps",
            (Capability::ChatEvents, None) => wanted == "chat_events",
            (Capability::Clipboard, None) => wanted == "clipboard",
            _ => false,
        })
}

/// The candidates for a drive, best first. `probe` says whether an OS injector works here.
pub fn plan(input: &PlanInput<'_>, probe: &dyn Fn(&str) -> Result<(), Blocker>) -> Vec<Candidate> {
    let product = input.product.unwrap_or("other");
    let policy = effective_policy(input.registry, product);
    let ranked = rank_routes(input.registry, product, input.platform);
    // A drive that must submit, on a machine where the submit key a plugin route relies on
    // cannot be pressed at all, may go to a new chat instead (policy switch).
    let key_unpressable = (input.submit
        && !input.new_chat
        && input.plugin_connected
        && policy.new_chat_when_key_unpressable)
        .then(|| ranked.iter().find_map(|i| i.submit_key.as_ref()))
        .flatten()
        .and_then(|chord| {
            key_unpressable(input, product, policy.allow_os_injection, probe)
                .map(|blocker| (chord.clone(), blocker))
        });
    ranked
        .into_iter()
        .filter(|interface| {
            input.product.is_some() || interface.route == Some(RouteKind::OsInjection)
        })
        .map(|interface| {
            let route = match interface.route {
                Some(RouteKind::NativeSend) => Route::NativeSend,
                Some(RouteKind::PluginDrive) => Route::PluginDrive,
                _ => Route::OsInjection,
            };
            let usable = match route {
                Route::OsInjection => {
                    if !policy.allow_os_injection {
                        Err(Blocker::new(
                            koru_protocol::blocker::POLICY_FORBIDDEN,
                            format!("the registry policy forbids OS injection for {product}"),
                        ))
                    } else if !input.has_window {
                        Err(Blocker::new(
                            koru_protocol::blocker::FOCUS_MISMATCH,
                            "no window to target: the plugin reported no window pid",
                        ))
                    } else {
                        probe(&interface.id)
                    }
                }
                _ if !input.plugin_connected => Err(Blocker::new(
                    "plugin_missing",
                    "the plugin is not connected",
                )),
                _ => match interface
                    .requires
                    .capabilities
                    .iter()
                    .find(|c| !has_capability(input.capabilities, c))
                {
                    Some(missing) => Err(Blocker::new(
                        koru_protocol::blocker::CAPABILITY_MISSING,
                        format!("the plugin does not report `{missing}`"),
                    )),
                    None => Ok(()),
                },
            };
            // The registry's hint is for what is wrong with the route here; a route that
            // does not fit the drive's options has nothing to fix.
            let hint = usable.as_ref().err().and_then(|blocker| {
                let code: BlockerCode =
                    serde_json::from_value(serde_json::Value::String(blocker.code.clone())).ok()?;
                interface
                    .recovery_for(code)
                    .first()
                    .map(|r| format!("{}: {}", r.label, r.does))
            });
            let stands_in = key_unpressable
                .as_ref()
                .filter(|_| only_new_chat(interface) && route != Route::OsInjection);
            let steps = steps_for(
                &interface.steps,
                input.submit,
                input.new_chat || stands_in.is_some(),
            );
            let note = stands_in.map(|(chord, blocker)| {
                format!(
                    "opened a new chat: nothing here can press {chord} in the current one ({}: {})",
                    blocker.code, blocker.detail
                )
            });
            let usable = usable.and_then(|()| applies_to_drive(interface, &steps, input));
            let submit_key = interface
                .submit_key
                .as_ref()
                .filter(|_| input.submit && route != Route::OsInjection)
                .filter(|_| !steps.iter().any(|s| s.proves == AckStage::Submitted))
                .map(|chord| SubmitKey {
                    chord: chord.clone(),
                    injectors: key_injectors(input, product, policy.allow_os_injection),
                });
            Candidate {
                interface: interface.id.clone(),
                route,
                steps,
                submit_key,
                usable,
                hint,
                note,
                paste_chord: policy.paste_chord.clone(),
                submit_chord: policy.submit_chord.clone(),
                paste_chord_by_class: policy.paste_chord_by_class.clone(),
                window_class: policy.window_class.clone(),
                window_title: policy.window_title.clone(),
            }
        })
        .collect()
}

/// Whether a plugin route's steps, as filtered for the drive, can deliver it: a drive that
/// must not submit needs a step proving `pasted`; any drive needs at least one step.
fn applies_to_drive(
    interface: &koru_registry::Interface,
    steps: &[DriveStep],
    input: &PlanInput<'_>,
) -> Result<(), Blocker> {
    if interface.steps.is_empty() {
        return Ok(());
    }
    let leaves_unsent = steps.iter().any(|step| step.proves == AckStage::Pasted);
    if !input.submit && !leaves_unsent {
        return Err(Blocker::new(
            koru_protocol::blocker::CAPABILITY_MISSING,
            format!(
                "`{}` cannot leave a prompt unsent: none of its steps proves `pasted` \
                 (give it a step with `when: no_submit`)",
                interface.id
            ),
        ));
    }
    if steps.is_empty() {
        let why = if only_new_chat(interface) && !input.new_chat {
            "its steps run only for drives that ask for a new chat (`koru send --new-chat`)"
        } else {
            "none of its steps applies to this drive's options"
        };
        return Err(Blocker::new(
            koru_protocol::blocker::CAPABILITY_MISSING,
            format!("`{}` has nothing to run: {why}", interface.id),
        ));
    }
    Ok(())
}

/// Whether every step of an interface runs only for drives that ask for a new chat.
pub fn only_new_chat(interface: &koru_registry::Interface) -> bool {
    !interface.steps.is_empty()
        && interface
            .steps
            .iter()
            .all(|step| step.when == Some(StepCondition::NewChat))
}

/// Why no OS injector can press a submit key here at all, or `None` when one can (as far
/// as probing tells before the drive: focus and the screen lock are checked at the press).
/// The telling reason is an injector for this desktop whose program is missing rather than
/// one for a display the machine does not have.
fn key_unpressable(
    input: &PlanInput<'_>,
    product: &str,
    allow_os_injection: bool,
    probe: &dyn Fn(&str) -> Result<(), Blocker>,
) -> Option<Blocker> {
    let injectors = match key_injectors(input, product, allow_os_injection) {
        Ok(injectors) => injectors,
        Err(blocker) => return Some(blocker),
    };
    let mut refusals = Vec::new();
    for injector in &injectors {
        match probe(injector) {
            Ok(()) => return None,
            Err(blocker) => refusals.push(blocker),
        }
    }
    let telling = refusals
        .iter()
        .position(|b| b.code != koru_protocol::blocker::NO_DISPLAY)
        .unwrap_or(0);
    refusals.into_iter().nth(telling)
}

/// The OS-injection interfaces that may press a route's submit key for `product`, best
/// first, or why none may.
fn key_injectors(
    input: &PlanInput<'_>,
    product: &str,
    allow_os_injection: bool,
) -> Result<Vec<String>, Blocker> {
    if !allow_os_injection {
        return Err(Blocker::new(
            koru_protocol::blocker::POLICY_FORBIDDEN,
            format!(
                "the registry policy forbids OS injection for {product}, so Koru may not press the submit key"
            ),
        ));
    }
    let injectors: Vec<String> = rank_routes(input.registry, product, input.platform)
        .into_iter()
        .filter(|interface| interface.route == Some(RouteKind::OsInjection))
        .map(|interface| interface.id.clone())
        .collect();
    if injectors.is_empty() {
        return Err(Blocker::new(
            koru_protocol::blocker::INJECTOR_MISSING,
            format!("no OS injector of the registry applies to {product} on this platform to press the submit key"),
        ));
    }
    Ok(injectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_registry::{load, Layer, LayerSource};

    fn registry(extra: &str) -> Registry {
        let mut sources = vec![LayerSource::built_in()];
        if !extra.is_empty() {
            sources.push(LayerSource {
                layer: Layer::User,
                name: "user.yaml".into(),
                path: None,
                text: extra.into(),
            });
        }
        let loaded = load(&sources);
        assert!(loaded.is_clean(), "{:?}", loaded.diagnostics);
        loaded.registry
    }

    fn summary(candidates: &[Candidate]) -> Vec<String> {
        candidates
            .iter()
            .map(|c| match &c.usable {
                Ok(()) => format!("{} ok", c.interface),
                Err(b) => format!("{} {}", c.interface, b.code),
            })
            .collect()
    }

    #[test]
    fn a_vscode_session_gets_native_then_plugin_then_os_routes() {
        let registry = registry("");
        let capabilities = vec![Capability::Command {
            id: "workbench.action.chat.open".into(),
        }];
        let input = PlanInput {
            registry: &registry,
            product: Some("vscode"),
            capabilities: &capabilities,
            has_window: true,
            plugin_connected: true,
            platform: Platform::Linux,
            submit: true,
            new_chat: false,
        };
        let probe = |id: &str| {
            if id == "os_injector_xdotool" {
                Ok(())
            } else {
                Err(Blocker::new("no_display", "not here"))
            }
        };
        let candidates = plan(&input, &probe);
        assert_eq!(
            summary(&candidates),
            [
                "vscode_native_chat_open ok",
                "vscode_plugin_drive capability_missing",
                "os_injector_wtype no_display",
                "os_injector_xdotool ok",
                "os_injector_portal no_display",
                "os_injector_enigo no_display",
                "os_injector_ydotool no_display",
            ]
        );
        assert_eq!(candidates[0].steps[0].command, "workbench.action.chat.open");
        assert_eq!(candidates[0].steps[0].proves, AckStage::Submitted);
        assert!(candidates[1]
            .hint
            .as_deref()
            .unwrap()
            .starts_with("Enable the chat view"));
    }

    #[test]
    fn policy_can_forbid_os_injection_and_windows_get_only_os_routes() {
        let registry = registry("policy:\n  allow_os_injection: false\n");
        let input = PlanInput {
            registry: &registry,
            product: None,
            capabilities: &[],
            has_window: true,
            plugin_connected: false,
            platform: Platform::Linux,
            submit: true,
            new_chat: false,
        };
        let candidates = plan(&input, &|_| Ok(()));
        assert!(!candidates.is_empty());
        assert!(candidates.iter().all(|c| c.route == Route::OsInjection));
        assert!(candidates
            .iter()
            .all(|c| c.usable.as_ref().unwrap_err().code == "policy_forbidden"));
    }

    fn vscode_input<'a>(
        registry: &'a Registry,
        capabilities: &'a [Capability],
        submit: bool,
    ) -> PlanInput<'a> {
        PlanInput {
            registry,
            product: Some("vscode"),
            capabilities,
            has_window: false,
            plugin_connected: true,
            platform: Platform::Linux,
            submit,
            new_chat: false,
        }
    }

    fn commands(candidate: &Candidate) -> Vec<String> {
        candidate
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{} {:?} -> {}",
                    s.command,
                    s.args,
                    serde_json::to_value(s.proves).unwrap().as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn a_drive_that_must_not_submit_gets_the_no_submit_steps_and_never_a_submitting_one() {
        let registry = registry("");
        let capabilities = [
            "workbench.action.chat.open",
            "workbench.action.chat.focusInput",
            "workbench.action.chat.submit",
        ]
        .map(|id| Capability::Command { id: id.into() });
        let submit = plan(&vscode_input(&registry, &capabilities, true), &|_| Ok(()));
        let unsent = plan(&vscode_input(&registry, &capabilities, false), &|_| Ok(()));
        assert_eq!(
            commands(&submit[0]),
            [
                r#"workbench.action.chat.open [Object {"isPartialQuery": Bool(false), "query": String("$prompt")}] -> submitted"#
            ]
        );
        assert_eq!(
            commands(&unsent[0]),
            [
                r#"workbench.action.chat.open [Object {"isPartialQuery": Bool(true), "query": String("$prompt")}] -> pasted"#
            ]
        );
        assert_eq!(submit[1].steps.len(), 3);
        assert_eq!(
            commands(&unsent[1]),
            [
                "workbench.action.chat.focusInput [] -> focused",
                "editor.action.clipboardPasteAction [] -> pasted",
            ]
        );
    }

    #[test]
    fn a_route_whose_steps_all_submit_is_skipped_for_a_drive_that_must_not_submit() {
        let registry = registry("");
        let capabilities = [Capability::Command {
            id: "antigravity.sendPromptToAgentPanel".into(),
        }];
        let mut input = vscode_input(&registry, &capabilities, false);
        input.product = Some("antigravity");
        let candidates = plan(&input, &|_| Ok(()));
        assert_eq!(candidates[0].interface, "antigravity_native_send");
        let blocker = candidates[0].usable.as_ref().unwrap_err();
        assert_eq!(blocker.code, "capability_missing");
        assert!(
            blocker.detail.contains("cannot leave a prompt unsent"),
            "{}",
            blocker.detail
        );
        input.submit = true;
        assert!(plan(&input, &|_| Ok(()))[0].usable.is_ok());
    }

    fn cursor_input<'a>(
        registry: &'a Registry,
        capabilities: &'a [Capability],
        submit: bool,
        new_chat: bool,
    ) -> PlanInput<'a> {
        PlanInput {
            product: Some("cursor"),
            new_chat,
            ..vscode_input(registry, capabilities, submit)
        }
    }

    #[test]
    fn cursor_pastes_by_plugin_and_leaves_the_submit_key_to_the_daemon() {
        let registry = registry("");
        let capabilities = ["composer.focusComposer", "composer.createNew"]
            .map(|id| Capability::Command { id: id.into() });
        let candidates = plan(
            &cursor_input(&registry, &capabilities, true, false),
            &|_| Ok(()),
        );
        assert_eq!(
            summary(&candidates)[..2],
            [
                "cursor_native_new_chat capability_missing",
                "cursor_plugin_drive ok"
            ]
        );
        assert_eq!(
            candidates[0].hint, None,
            "nothing to fix: the drive did not ask"
        );
        let new_chat_only = candidates[0].usable.as_ref().unwrap_err();
        assert!(
            new_chat_only
                .detail
                .contains("only for drives that ask for a new chat"),
            "{}",
            new_chat_only.detail
        );
        assert_eq!(
            commands(&candidates[1]),
            [
                "composer.focusComposer [] -> focused",
                "editor.action.clipboardPasteAction [] -> pasted"
            ]
        );
        let key = candidates[1].submit_key.as_ref().expect("a submit key");
        assert_eq!(key.chord, "Return");
        assert_eq!(
            key.injectors.as_ref().unwrap(),
            &[
                "os_injector_wtype",
                "os_injector_xdotool",
                "os_injector_portal",
                "os_injector_enigo",
                "os_injector_ydotool"
            ]
        );

        // A drive that asks for a new chat is submitted by Cursor's own command.
        let new_chat = plan(&cursor_input(&registry, &capabilities, true, true), &|_| {
            Ok(())
        });
        assert!(new_chat[0].usable.is_ok());
        assert_eq!(
            commands(&new_chat[0]),
            [
                r#"composer.createNew [Object {"autoSubmit": Bool(true), "focusMainInputBox": Bool(true), "openInNewTab": Bool(true), "partialState": Object {"text": String("$prompt")}}] -> submitted"#
            ]
        );
        assert_eq!(new_chat[0].submit_key, None);

        // A drive left unsent gets no key, and never the submitting new-chat command.
        let unsent = plan(
            &cursor_input(&registry, &capabilities, false, true),
            &|_| Ok(()),
        );
        assert_eq!(
            summary(&unsent)[..2],
            [
                "cursor_native_new_chat capability_missing",
                "cursor_plugin_drive ok"
            ]
        );
        assert_eq!(unsent[1].submit_key, None);

        // A policy without OS injection leaves the key unpressable, and says so.
        let registry = super::tests::registry(
            "policy:\n  products:\n    cursor: {allow_os_injection: false}\n",
        );
        let forbidden = plan(
            &cursor_input(&registry, &capabilities, true, false),
            &|_| Ok(()),
        );
        let key = forbidden[1].submit_key.as_ref().unwrap();
        assert_eq!(key.injectors.as_ref().unwrap_err().code, "policy_forbidden");
    }

    #[test]
    fn a_cursor_drive_goes_to_a_new_chat_only_when_nothing_here_can_press_return() {
        // The current chat: the new-chat route skipped, the paste route (and its key) used.
        const CURRENT_CHAT: [&str; 2] = [
            "cursor_native_new_chat capability_missing",
            "cursor_plugin_drive ok",
        ];
        let registry = registry("");
        let capabilities = ["composer.focusComposer", "composer.createNew"]
            .map(|id| Capability::Command { id: id.into() });
        let no_display = |interface: &str| {
            Err(Blocker::new(
                if interface == "os_injector_ydotool" {
                    "injector_missing"
                } else {
                    "no_display"
                },
                format!("{interface}: not here"),
            ))
        };
        let candidates = plan(
            &cursor_input(&registry, &capabilities, true, false),
            &no_display,
        );
        assert_eq!(
            summary(&candidates)[..2],
            ["cursor_native_new_chat ok", "cursor_plugin_drive ok"]
        );
        assert_eq!(
            commands(&candidates[0])[0].split(' ').next(),
            Some("composer.createNew")
        );
        assert_eq!(
            candidates[0].note.as_deref(),
            Some(
                "opened a new chat: nothing here can press Return in the current one \
                 (injector_missing: os_injector_ydotool: not here)"
            ),
            "the telling reason is the injector that is missing, not a display the machine lacks"
        );
        assert_eq!(candidates[1].note, None);

        // One injector that works: the current chat, as before.
        let one_works = |interface: &str| {
            if interface == "os_injector_xdotool" {
                Ok(())
            } else {
                no_display(interface)
            }
        };
        let pressable = plan(
            &cursor_input(&registry, &capabilities, true, false),
            &one_works,
        );
        assert_eq!(summary(&pressable)[..2], CURRENT_CHAT);
        assert!(pressable.iter().all(|c| c.note.is_none()));

        // A drive left unsent needs no key: never a new chat it did not ask for.
        let unsent = plan(
            &cursor_input(&registry, &capabilities, false, false),
            &no_display,
        );
        assert_eq!(summary(&unsent)[..2], CURRENT_CHAT);

        // OS input forbidden for Cursor: the key is unpressable whatever the desktop.
        let forbidden = super::tests::registry(
            "policy:\n  products:\n    cursor: {allow_os_injection: false}\n",
        );
        let candidates = plan(
            &cursor_input(&forbidden, &capabilities, true, false),
            &|_| Ok(()),
        );
        assert!(candidates[0].usable.is_ok());
        assert!(candidates[0]
            .note
            .as_deref()
            .unwrap()
            .contains("(policy_forbidden: the registry policy forbids OS injection for cursor"));

        // The policy switch, globally or for the product, keeps the current chat.
        for switch in [
            "policy:\n  new_chat_when_key_unpressable: false\n",
            "policy:\n  products:\n    cursor: {new_chat_when_key_unpressable: false}\n",
        ] {
            let off = super::tests::registry(switch);
            let candidates = plan(&cursor_input(&off, &capabilities, true, false), &no_display);
            assert_eq!(summary(&candidates)[..2], CURRENT_CHAT, "{switch}");
        }

        // Without Cursor's new-chat command nothing stands in: the paste route runs and
        // its key press will fail with the reason.
        let paste_only = [Capability::Command {
            id: "composer.focusComposer".into(),
        }];
        let candidates = plan(
            &cursor_input(&registry, &paste_only, true, false),
            &no_display,
        );
        assert_eq!(summary(&candidates)[..2], CURRENT_CHAT);
    }
}

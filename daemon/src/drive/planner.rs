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
    /// `Err` when the route cannot be tried now.
    pub usable: Result<(), Blocker>,
    /// The registry's recovery hint for the blocker, if any.
    pub hint: Option<String>,
    /// Chords for OS injection.
    pub paste_chord: String,
    pub submit_chord: String,
    /// `(class regex, chord)`: paste chords for matching window classes.
    pub paste_chord_by_class: Vec<(String, String)>,
    /// Window class and title patterns the product's policy requires (OS injection).
    pub window_class: Option<String>,
    pub window_title: Option<String>,
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
}

/// The steps of an interface that run for a drive: those whose `when` matches `submit`;
/// for a drive that must not submit, never a step that proves `submitted`.
pub fn steps_for(steps: &[Step], submit: bool) -> Vec<DriveStep> {
    steps
        .iter()
        .filter(|step| match step.when {
            Some(StepCondition::Submit) => submit,
            Some(StepCondition::NoSubmit) => !submit,
            None => submit || step.proves != StepStage::Submitted,
        })
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
    rank_routes(input.registry, product, input.platform)
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
            let steps = steps_for(&interface.steps, input.submit);
            let usable = usable.and_then(|()| {
                let leaves_unsent = steps.iter().any(|step| step.proves == AckStage::Pasted);
                if !input.submit && !interface.steps.is_empty() && !leaves_unsent {
                    Err(Blocker::new(
                        koru_protocol::blocker::CAPABILITY_MISSING,
                        format!(
                            "`{}` cannot leave a prompt unsent: none of its steps proves `pasted` \
                             (give it a step with `when: no_submit`)",
                            interface.id
                        ),
                    ))
                } else {
                    Ok(())
                }
            });
            let hint = usable.as_ref().err().and_then(|blocker| {
                let code: BlockerCode =
                    serde_json::from_value(serde_json::Value::String(blocker.code.clone())).ok()?;
                interface
                    .recovery_for(code)
                    .first()
                    .map(|r| format!("{}: {}", r.label, r.does))
            });
            Candidate {
                interface: interface.id.clone(),
                route,
                steps,
                usable,
                hint,
                paste_chord: policy.paste_chord.clone(),
                submit_chord: policy.submit_chord.clone(),
                paste_chord_by_class: policy.paste_chord_by_class.clone(),
                window_class: policy.window_class.clone(),
                window_title: policy.window_title.clone(),
            }
        })
        .collect()
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
}

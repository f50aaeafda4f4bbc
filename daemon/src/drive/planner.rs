//! Route planning: for one drive, the registry's candidate routes in rank order, each already judged usable now or not (with a classified blocker and the registry's recovery hint). Pure given the probe function.

use std::sync::Arc;

use koru_protocol::{AckStage, Blocker, Capability, DriveStep, IdeProduct, Route};
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
    /// How to type into a terminal agent (routes `terminal_input`).
    pub terminal: Option<koru_registry::TerminalInput>,
    /// After the submit key: how long the agent whose chat the route reaches has to record
    /// the prompt before the drive fails `needs_user` (registry `agent_record_ms`).
    pub agent_record_ms: Option<u64>,
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
    /// The terminal agent whose own chat inside the IDE the drive is for (`claude-code`:
    /// its extension's panel): only the interfaces for that agent are planned. `None`: the
    /// IDE's own chat, never an agent's.
    pub agent: Option<&'a str>,
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
    let ranked: Vec<_> = rank_routes(input.registry, product, input.platform)
        .into_iter()
        .filter(|interface| match input.agent {
            Some(agent) => interface.applies_to.agents.iter().any(|a| a == agent),
            None => interface.applies_to.agents.is_empty(),
        })
        .collect();
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
            let hint = recovery_hint(interface, &usable);
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
            let agent_record_ms = interface.agent_record_ms.filter(|_| submit_key.is_some());
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
                terminal: None,
                agent_record_ms,
            }
        })
        .collect()
}

/// The registry's first recovery hint for why `interface` cannot be used, if it cannot.
fn recovery_hint(
    interface: &koru_registry::Interface,
    usable: &Result<(), Blocker>,
) -> Option<String> {
    let blocker = usable.as_ref().err()?;
    let code: BlockerCode =
        serde_json::from_value(serde_json::Value::String(blocker.code.clone())).ok()?;
    interface
        .recovery_for(code)
        .first()
        .map(|r| format!("{}: {}", r.label, r.does))
}

/// The candidates for a drive into a terminal agent of `product` (`claude-code`, …), best
/// first: the registry's `terminal_input` routes for it through `place` (the transport of
/// the terminal it runs in: tmux, kitty), and its own server's `native_send` route.
/// `typing` says whether that terminal's tool can be run here, `server` whether the agent
/// serves.
pub fn plan_terminal(
    registry: &Registry,
    product: &str,
    platform: Platform,
    place: koru_registry::Transport,
    typing: Result<(), Blocker>,
    server: Result<(), Blocker>,
) -> Vec<Candidate> {
    let policy = effective_policy(registry, product);
    rank_routes(registry, product, platform)
        .into_iter()
        .filter(|interface| match interface.route {
            // Typed into the terminal the agent runs in: that terminal's routes only.
            Some(RouteKind::TerminalInput) => interface.transport == place,
            // Posted to the agent's own server, wherever it runs.
            Some(RouteKind::NativeSend) => true,
            _ => false,
        })
        .filter_map(|interface| {
            let terminal = interface.terminal.clone()?;
            // The loader allows `terminal` on `native_send` only for an agent's own server.
            let (route, usable) = if interface.route == Some(RouteKind::NativeSend) {
                (Route::NativeSend, server.clone())
            } else {
                (Route::TerminalInput, typing.clone())
            };
            let hint = recovery_hint(interface, &usable);
            Some(Candidate {
                interface: interface.id.clone(),
                route,
                steps: Vec::new(),
                submit_key: None,
                usable,
                hint,
                note: None,
                paste_chord: policy.paste_chord.clone(),
                submit_chord: policy.submit_chord.clone(),
                paste_chord_by_class: Vec::new(),
                window_class: None,
                window_title: None,
                terminal: Some(terminal),
                agent_record_ms: None,
            })
        })
        .collect()
}

/// What a remembered plan was made for, besides the product and capabilities of the
/// plugin session it is for ([`PlanMemory`] keeps plans by those).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanKey {
    /// Counts the registries the daemon applied: a reload makes every remembered plan stale.
    pub registry_generation: u64,
    pub has_window: bool,
    pub platform: Platform,
    pub submit: bool,
    pub new_chat: bool,
    /// The terminal agent whose chat in the IDE the drive is for (`PlanInput::agent`).
    pub agent: Option<String>,
}

/// A plan made for a drive, kept for the next drives to the same kind of target: planning
/// builds every candidate (its blockers, hints, steps and chords) from the registry, which
/// the next drive with the same options to a session of the same product and capabilities
/// would rebuild identically.
#[derive(Debug, Clone)]
pub struct RememberedPlan {
    key: PlanKey,
    /// What each OS injector said while the plan was made: an injector that works now and
    /// did not then (or the other way round) makes a new plan.
    probes: Vec<(String, Result<(), Blocker>)>,
    candidates: Arc<[Arc<Candidate>]>,
}

/// Plans kept per product and capabilities (one per combination of drive options).
const PLANS_PER_TARGET: usize = 4;
/// Products-and-capabilities [`PlanMemory`] keeps plans for; past it, it starts over.
const TARGETS_REMEMBERED: usize = 64;

/// The plans the daemon made, by the product and capabilities of the plugin session they
/// were made for (both fixed for a session's life, and the same for every window of one
/// IDE build with one plugin version): a controller fanning prompts over many windows plans
/// once per kind of window, and the memory stays bounded however many sessions there are.
#[derive(Debug, Default)]
pub struct PlanMemory {
    /// By a hash of the product and capabilities; each entry says them in full.
    targets: std::collections::HashMap<u64, Vec<TargetPlans>>,
    count: usize,
}

#[derive(Debug)]
struct TargetPlans {
    product: IdeProduct,
    capabilities: Vec<Capability>,
    plans: Vec<RememberedPlan>,
}

impl PlanMemory {
    /// [`plan_remembered`] with the plans kept for `product` and `input.capabilities`.
    pub fn plan(
        &mut self,
        product: &IdeProduct,
        key: PlanKey,
        input: &PlanInput<'_>,
        probe: &dyn Fn(&str) -> Result<(), Blocker>,
    ) -> Vec<Arc<Candidate>> {
        let fingerprint = target_fingerprint(product, input.capabilities);
        let same = |t: &TargetPlans| t.product == *product && t.capabilities == input.capabilities;
        let known = self
            .targets
            .get(&fingerprint)
            .is_some_and(|bucket| bucket.iter().any(same));
        if !known && self.count >= TARGETS_REMEMBERED {
            self.targets.clear();
            self.count = 0;
        }
        let bucket = self.targets.entry(fingerprint).or_default();
        let at = match bucket.iter().position(same) {
            Some(at) => at,
            None => {
                bucket.push(TargetPlans {
                    product: product.clone(),
                    capabilities: input.capabilities.to_vec(),
                    plans: Vec::new(),
                });
                self.count += 1;
                bucket.len() - 1
            }
        };
        plan_remembered(&mut bucket[at].plans, key, input, probe)
    }

    /// How many products-and-capabilities it keeps plans for.
    pub fn targets(&self) -> usize {
        self.count
    }
}

/// A hash of a product and capabilities (equal ones hash alike; `Capability` has no `Hash`
/// of its own, as an unknown one keeps a raw JSON value).
fn target_fingerprint(product: &IdeProduct, capabilities: &[Capability]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    product.hash(&mut hasher);
    for capability in capabilities {
        std::mem::discriminant(capability).hash(&mut hasher);
        match capability {
            Capability::Command { id } | Capability::ToolWindow { id } => id.hash(&mut hasher),
            _ => {}
        }
    }
    hasher.finish()
}

/// [`plan`], reusing the plan `remembered` holds for `key` when every injector it asked
/// still answers the same; otherwise planning afresh and remembering that plan. The
/// candidates are shared with the memory (a drive only reads them, and takes them off
/// its own list as it tries them).
pub fn plan_remembered(
    remembered: &mut Vec<RememberedPlan>,
    key: PlanKey,
    input: &PlanInput<'_>,
    probe: &dyn Fn(&str) -> Result<(), Blocker>,
) -> Vec<Arc<Candidate>> {
    if let Some(known) = remembered.iter().find(|p| p.key == key) {
        if known
            .probes
            .iter()
            .all(|(interface, said)| probe(interface) == *said)
        {
            return known.candidates.to_vec();
        }
    }
    let asked = std::cell::RefCell::new(Vec::new());
    let recording = |interface: &str| {
        let said = probe(interface);
        let mut asked = asked.borrow_mut();
        if !asked.iter().any(|(i, _): &(String, _)| i == interface) {
            asked.push((interface.to_string(), said.clone()));
        }
        said
    };
    let candidates: Arc<[Arc<Candidate>]> =
        plan(input, &recording).into_iter().map(Arc::new).collect();
    remembered.retain(|p| p.key != key && p.key.registry_generation == key.registry_generation);
    if remembered.len() >= PLANS_PER_TARGET {
        remembered.remove(0);
    }
    remembered.push(RememberedPlan {
        key,
        probes: asked.into_inner(),
        candidates: candidates.clone(),
    });
    candidates.to_vec()
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
            agent: None,
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
            agent: None,
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
            agent: None,
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

    fn key(generation: u64, submit: bool) -> PlanKey {
        PlanKey {
            registry_generation: generation,
            has_window: true,
            platform: Platform::Linux,
            submit,
            new_chat: false,
            agent: None,
        }
    }

    /// A VS Code plugin's drive with a window to aim OS injection at.
    fn input<'a>(
        registry: &'a Registry,
        capabilities: &'a [Capability],
        submit: bool,
    ) -> PlanInput<'a> {
        PlanInput {
            has_window: true,
            ..vscode_input(registry, capabilities, submit)
        }
    }

    fn owned(candidates: &[Arc<Candidate>]) -> Vec<Candidate> {
        candidates.iter().map(|c| (**c).clone()).collect()
    }

    #[test]
    fn a_sessions_next_drive_reuses_its_plan_which_is_what_planning_again_gives() {
        let registry = registry("");
        let capabilities = [Capability::NativeSend];
        let no_display = |_: &str| Err(Blocker::new("no_display", "no DISPLAY here"));
        let mut memory = Vec::new();
        let first = plan_remembered(
            &mut memory,
            key(0, true),
            &input(&registry, &capabilities, true),
            &no_display,
        );
        let second = plan_remembered(
            &mut memory,
            key(0, true),
            &input(&registry, &capabilities, true),
            &no_display,
        );
        assert!(first.len() > 1, "vscode has several routes: {first:?}");
        assert!(
            first.iter().zip(&second).all(|(a, b)| Arc::ptr_eq(a, b)),
            "the plan was made again"
        );
        assert_eq!(
            owned(&second),
            plan(&input(&registry, &capabilities, true), &no_display)
        );
    }

    #[test]
    fn an_injector_that_starts_working_a_reload_or_other_options_make_a_new_plan() {
        let registry = registry("");
        let capabilities = [Capability::NativeSend];
        let display = std::cell::Cell::new(false);
        let probe = |_: &str| {
            if display.get() {
                Ok(())
            } else {
                Err(Blocker::new("no_display", "no DISPLAY here"))
            }
        };
        let usable_injections = |plan: &[Arc<Candidate>]| {
            plan.iter()
                .filter(|c| c.route == Route::OsInjection && c.usable.is_ok())
                .count()
        };
        let mut memory = Vec::new();
        let before = plan_remembered(
            &mut memory,
            key(0, true),
            &input(&registry, &capabilities, true),
            &probe,
        );
        assert_eq!(usable_injections(&before), 0);
        display.set(true);
        let after = plan_remembered(
            &mut memory,
            key(0, true),
            &input(&registry, &capabilities, true),
            &probe,
        );
        assert!(
            usable_injections(&after) > 0,
            "the injectors work now: {after:?}"
        );
        assert_eq!(
            owned(&after),
            plan(&input(&registry, &capabilities, true), &probe)
        );

        let reloaded = plan_remembered(
            &mut memory,
            key(1, true),
            &input(&registry, &capabilities, true),
            &probe,
        );
        assert!(
            !Arc::ptr_eq(&after[0], &reloaded[0]),
            "a reload keeps no plan of the old registry"
        );
        assert_eq!(memory.len(), 1, "the old registry's plans are dropped");

        let unsent = plan_remembered(
            &mut memory,
            key(1, false),
            &input(&registry, &capabilities, false),
            &probe,
        );
        assert_eq!(
            owned(&unsent),
            plan(&input(&registry, &capabilities, false), &probe)
        );
        assert_eq!(memory.len(), 2);
        for new_chat in [true, false] {
            for has_window in [true, false] {
                let mut key = key(1, true);
                key.new_chat = new_chat;
                key.has_window = has_window;
                let mut input = input(&registry, &capabilities, true);
                input.new_chat = new_chat;
                input.has_window = has_window;
                plan_remembered(&mut memory, key, &input, &probe);
            }
        }
        assert_eq!(
            memory.len(),
            PLANS_PER_TARGET,
            "a bounded number of plans per target"
        );
    }

    fn plan_for(
        memory: &mut PlanMemory,
        registry: &Registry,
        product: IdeProduct,
        capabilities: &[Capability],
    ) -> Vec<Arc<Candidate>> {
        let name = product.to_string();
        let input = PlanInput {
            registry,
            product: Some(&name),
            capabilities,
            has_window: false,
            plugin_connected: true,
            platform: Platform::Linux,
            submit: true,
            new_chat: false,
            agent: None,
        };
        let key = PlanKey {
            registry_generation: 0,
            has_window: false,
            platform: Platform::Linux,
            submit: true,
            new_chat: false,
            agent: None,
        };
        let planned = memory.plan(&product, key, &input, &|_| Ok(()));
        assert_eq!(
            planned.iter().map(|c| (**c).clone()).collect::<Vec<_>>(),
            plan(&input, &|_| Ok(())),
            "a remembered plan is what planning gives"
        );
        planned
    }

    #[test]
    fn windows_of_one_kind_share_a_plan_and_other_kinds_get_their_own() {
        let registry = registry("");
        let mut memory = PlanMemory::default();
        let native = [Capability::NativeSend];
        let steps = [Capability::DriveSteps];
        let first = plan_for(&mut memory, &registry, IdeProduct::VsCode, &native);
        let second = plan_for(&mut memory, &registry, IdeProduct::VsCode, &native);
        assert!(Arc::ptr_eq(&first[0], &second[0]));
        let other_capabilities = plan_for(&mut memory, &registry, IdeProduct::VsCode, &steps);
        let other_product = plan_for(&mut memory, &registry, IdeProduct::Cursor, &native);
        assert!(!Arc::ptr_eq(&first[0], &other_capabilities[0]));
        assert!(!Arc::ptr_eq(&first[0], &other_product[0]));
        assert_eq!(memory.targets(), 3);
    }

    #[test]
    fn the_memory_is_bounded_however_many_kinds_of_window_there_are() {
        let registry = registry("");
        let mut memory = PlanMemory::default();
        for n in 0..(TARGETS_REMEMBERED * 3) {
            let capabilities = [Capability::Command {
                id: format!("example.command{n}"),
            }];
            plan_for(&mut memory, &registry, IdeProduct::VsCode, &capabilities);
            assert!(memory.targets() <= TARGETS_REMEMBERED);
        }
    }
}

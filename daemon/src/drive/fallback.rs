//! The fallback chain as pure decisions: which route a drive tries next (skipping the ones that cannot be used), what ends it when none is left, and whether a failed route may fall back at all. The state machine applies the effects.

use std::collections::VecDeque;
use std::sync::Arc;

use koru_protocol::{AttemptOutcome, Blocker, Route, RouteAttempt};

use super::planner::Candidate;

/// Where the next route goes, and what was passed over on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct NextRoute {
    /// Candidates that cannot be tried now, each with its blocker in `usable` (recorded as
    /// skipped attempts, in order).
    pub skipped: Vec<Arc<Candidate>>,
    pub choice: RouteChoice,
}

/// The decision for a drive whose current route has ended or not begun.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteChoice {
    /// Send this plugin route's steps to the plugin.
    AskPlugin(Arc<Candidate>),
    /// Type the prompt with this OS injection.
    Inject(Arc<Candidate>),
    /// Type the prompt into the terminal agent's terminal.
    Terminal(Arc<Candidate>),
    /// Nothing left: the drive fails with this blocker.
    Exhausted(Blocker),
}

/// Takes candidates off the front of `candidates` until one can be tried. `tried` are the
/// drive's attempts so far; `plugin_connected` whether its window's plugin is there now
/// (plugin routes need it). Candidates are shared with the session's remembered plan
/// (`planner::plan_remembered`): one changed here is copied first.
pub fn next_route(
    candidates: &mut VecDeque<Arc<Candidate>>,
    tried: &[RouteAttempt],
    plugin_connected: bool,
) -> NextRoute {
    let mut skipped = Vec::new();
    while let Some(mut candidate) = candidates.pop_front() {
        // A terminal agent's route (typed into its pane, or posted to its own server)
        // needs no plugin.
        let for_terminal_agent = candidate.terminal.is_some();
        if candidate.usable.is_ok()
            && !for_terminal_agent
            && matches!(candidate.route, Route::NativeSend | Route::PluginDrive)
            && !plugin_connected
        {
            Arc::make_mut(&mut candidate).usable = Err(Blocker::new(
                "plugin_missing",
                "the plugin is not connected",
            ));
        }
        if candidate.usable.is_err() {
            skipped.push(candidate);
            continue;
        }
        let choice = match candidate.route {
            _ if for_terminal_agent => RouteChoice::Terminal(candidate),
            Route::NativeSend | Route::PluginDrive => RouteChoice::AskPlugin(candidate),
            Route::OsInjection => RouteChoice::Inject(candidate),
            Route::TerminalInput => RouteChoice::Terminal(candidate),
        };
        return NextRoute { skipped, choice };
    }
    let blocker = exhausted_blocker(tried, &skipped);
    NextRoute {
        skipped,
        choice: RouteChoice::Exhausted(blocker),
    }
}

/// The most telling reason a drive ran out of routes: the last route that was tried and
/// failed, else why the best-ranked route could not be tried at all.
fn exhausted_blocker(tried: &[RouteAttempt], skipped: &[Arc<Candidate>]) -> Blocker {
    let failed = tried
        .iter()
        .rev()
        .find(|a| a.outcome == AttemptOutcome::Failed)
        .and_then(|a| a.blocker.clone());
    if let Some(failed) = failed {
        return failed;
    }
    let first = tried
        .iter()
        .find_map(|a| a.blocker.clone())
        .or_else(|| skipped.iter().find_map(|c| c.usable.clone().err()));
    match first {
        Some(first) => Blocker::new(
            &first.code,
            format!("no usable route; the best one: {}", first.detail),
        ),
        None => Blocker::new(
            koru_protocol::blocker::NO_ROUTE,
            "no route in the registry applies to this target",
        ),
    }
}

/// What follows a route's failure.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterFailure {
    /// Try the next route.
    FallBack,
    /// End the drive with this blocker; the routes left are not tried.
    Stop(Blocker),
}

/// Blockers about the chat or the desktop, not the route: another route would meet them too.
const NOT_THE_ROUTES_FAULT: &[&str] = &[
    "chat_busy",
    "timeout",
    "screen_locked",
    "chat_refused",
    "chat_not_ready",
];

/// Whether a drive whose route failed with `blocker` may fall back: never when the prompt
/// may already be in the chat input (no duplicate prompts), nor when the blocker is about
/// the chat or the desktop.
pub fn after_failure(blocker: &Blocker, may_have_delivered: bool) -> AfterFailure {
    if may_have_delivered {
        return AfterFailure::Stop(Blocker::new(
            &blocker.code,
            format!(
                "{} (the prompt may already be in the chat input, so no other route is tried)",
                blocker.detail
            ),
        ));
    }
    if NOT_THE_ROUTES_FAULT.contains(&blocker.code.as_str()) {
        return AfterFailure::Stop(blocker.clone());
    }
    AfterFailure::FallBack
}

/// How long a drive the chat refused as not ready waits before each resend: a fresh
/// window's chat got a usable model 0–4.5 s after start in the e2e runs, so the waits
/// cover about 11 s in all.
pub const NOT_READY_RESEND_WAITS_MS: [u64; 4] = [1_000, 2_000, 4_000, 4_000];

/// When a drive refused before the chat took it, because the chat was not ready yet, is
/// sent again: after the wait for its `resends`-th resend, if one is left and the resend
/// still leaves the chat `RESEND_ROOM_MS` before the drive's deadline; `None` ends it.
pub fn resend_after_not_ready(resends: u32, now_ms: u64, deadline_ms: u64) -> Option<u64> {
    let wait = *NOT_READY_RESEND_WAITS_MS.get(resends as usize)?;
    let at = now_ms.saturating_add(wait);
    (at.saturating_add(RESEND_ROOM_MS) <= deadline_ms).then_some(at)
}

/// What a resend needs before the deadline: the chat refuses within about 4 s of a request.
pub const RESEND_ROOM_MS: u64 = 2_000;

#[cfg(test)]
mod tests {

    #[test]
    fn a_not_ready_refusal_is_sent_again_with_growing_waits_within_the_deadline() {
        let deadline = 60_000;
        let at: Vec<Option<u64>> = (0..5)
            .map(|resends| resend_after_not_ready(resends, 10_000, deadline))
            .collect();
        assert_eq!(
            at,
            vec![Some(11_000), Some(12_000), Some(14_000), Some(14_000), None],
            "four resends, then none"
        );
        // A resend that would leave the chat less than RESEND_ROOM_MS before the deadline
        // is not made: the drive ends with the refusal instead of timing out mid-resend.
        assert_eq!(resend_after_not_ready(0, 10_000, 13_000), Some(11_000));
        assert_eq!(resend_after_not_ready(0, 10_000, 12_999), None);
    }
    use super::*;

    fn candidate(interface: &str, route: Route, usable: Result<(), Blocker>) -> Arc<Candidate> {
        Arc::new(Candidate {
            interface: interface.into(),
            route,
            steps: Vec::new(),
            submit_key: None,
            usable,
            hint: None,
            note: None,
            paste_chord: String::new(),
            submit_chord: String::new(),
            paste_chord_by_class: Vec::new(),
            window_class: None,
            window_title: None,
            terminal: None,
            agent_record_ms: None,
        })
    }

    fn attempt(interface: &str, outcome: AttemptOutcome, blocker: Option<Blocker>) -> RouteAttempt {
        RouteAttempt {
            route: Route::PluginDrive,
            interface: interface.into(),
            outcome,
            reached: None,
            blocker,
            hint: None,
            note: None,
            text: None,
            started_at_ms: None,
            finished_at_ms: None,
        }
    }

    fn ids(candidates: &[Arc<Candidate>]) -> Vec<&str> {
        candidates.iter().map(|c| c.interface.as_str()).collect()
    }

    #[test]
    fn unusable_routes_are_skipped_and_the_first_usable_one_is_chosen() {
        let mut queue = VecDeque::from([
            candidate(
                "native",
                Route::NativeSend,
                Err(Blocker::new("capability_missing", "no native command")),
            ),
            candidate("drive", Route::PluginDrive, Ok(())),
            candidate("xdotool", Route::OsInjection, Ok(())),
        ]);
        let next = next_route(&mut queue, &[], true);
        assert_eq!(ids(&next.skipped), ["native"]);
        assert!(matches!(next.choice, RouteChoice::AskPlugin(ref c) if c.interface == "drive"));
        assert_eq!(ids(queue.make_contiguous()), ["xdotool"]);
    }

    #[test]
    fn plugin_routes_are_skipped_when_the_plugin_is_gone() {
        let mut queue = VecDeque::from([
            candidate("drive", Route::PluginDrive, Ok(())),
            candidate("xdotool", Route::OsInjection, Ok(())),
        ]);
        let next = next_route(&mut queue, &[], false);
        assert_eq!(
            next.skipped[0].usable.as_ref().unwrap_err().code,
            "plugin_missing"
        );
        assert!(matches!(next.choice, RouteChoice::Inject(ref c) if c.interface == "xdotool"));
    }

    #[test]
    fn running_out_names_the_last_failure_else_the_best_routes_blocker() {
        let failed = attempt(
            "drive",
            AttemptOutcome::Failed,
            Some(Blocker::new("step_failed", "paste did not land")),
        );
        let next = next_route(&mut VecDeque::new(), &[failed], true);
        assert_eq!(
            next.choice,
            RouteChoice::Exhausted(Blocker::new("step_failed", "paste did not land"))
        );

        let mut queue = VecDeque::from([candidate(
            "native",
            Route::NativeSend,
            Err(Blocker::new("capability_missing", "no native command")),
        )]);
        let next = next_route(&mut queue, &[], true);
        assert_eq!(
            next.choice,
            RouteChoice::Exhausted(Blocker::new(
                "capability_missing",
                "no usable route; the best one: no native command"
            ))
        );

        let next = next_route(&mut VecDeque::new(), &[], true);
        assert!(
            matches!(next.choice, RouteChoice::Exhausted(ref b) if b.code == koru_protocol::blocker::NO_ROUTE)
        );
    }

    #[test]
    fn a_failure_falls_back_only_when_the_prompt_cannot_be_in_the_chat_and_the_route_is_to_blame() {
        let paste = Blocker::new("step_failed", "paste failed");
        assert_eq!(after_failure(&paste, false), AfterFailure::FallBack);
        let AfterFailure::Stop(stopped) = after_failure(&paste, true) else {
            panic!("a prompt that may be in the chat must not be sent again");
        };
        assert_eq!(stopped.code, "step_failed");
        assert!(stopped.detail.contains("may already be in the chat input"));
        for code in NOT_THE_ROUTES_FAULT {
            let blocker = Blocker::new(code, "x");
            assert_eq!(after_failure(&blocker, false), AfterFailure::Stop(blocker));
        }
    }
}

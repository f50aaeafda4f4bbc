//! Drives as the daemon keeps them: the record of one prompt's journey, its allowed state moves, and a bounded table of recent drives.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use koru_protocol::{
    AckStage, AttemptOutcome, Blocker, DriveInfo, DriveOptions, DriveState, Route, RouteAttempt,
    StageRecord, Target, Verification, WindowTarget,
};

use crate::drive::planner::Candidate;

/// One drive: what was asked, where it is, and what happened.
#[derive(Debug, Clone)]
pub struct DriveRecord {
    pub drive_id: String,
    pub target: Target,
    pub session_id: String,
    pub route: Route,
    pub prompt: String,
    pub options: DriveOptions,
    pub state: DriveState,
    pub history: Vec<StageRecord>,
    pub blocker: Option<Blocker>,
    pub created_at_ms: u64,
    /// The moment the drive ends `timed_out` if it has not ended before.
    pub deadline_ms: u64,
    pub finished_at_ms: Option<u64>,
    /// Routes not tried yet, best first.
    pub candidates: VecDeque<Arc<Candidate>>,
    /// The route being tried now.
    pub current: Option<Arc<Candidate>>,
    pub attempts: Vec<RouteAttempt>,
    pub verification: Verification,
    /// The window OS injection aims at (a window target, or the plugin's window).
    pub window: Option<WindowTarget>,
    /// More pids of the target (the plugin's parent process).
    pub extra_pids: Vec<u32>,
    /// When the plugin must have acked the next stage of the running route.
    pub step_deadline_ms: Option<u64>,
    /// The prompt's digest, as the observers compute it for a recorded prompt.
    pub prompt_digest: String,
    /// The prompt's length in characters and its excerpt for listings, worked out once
    /// (every `drive_updated` carries them).
    pub prompt_chars: usize,
    pub prompt_excerpt: String,
    /// The target window's workspace folders when the drive was created (to match the
    /// chat the prompt shows up in).
    pub workspaces: Vec<String>,
    /// What the chat-store observers proved about this drive.
    pub observation: Option<koru_protocol::DriveObservation>,
    /// The drive this one retries (recovery action `retry_drive`).
    pub retry_of: Option<String>,
    /// What proves `submitted`, for a drive a plugin submitted.
    pub submit_evidence: Option<koru_protocol::SubmitEvidence>,
    /// Why the drive, not sent yet (or held to be sent again), is waiting.
    pub waiting: Option<Blocker>,
    /// When a drive the chat refused as not ready yet is sent again (the route it was
    /// refused on is back at the front of `candidates`).
    pub resend_at_ms: Option<u64>,
    /// How many times the drive was sent again after a `not_ready` refusal.
    pub resends: u32,
    /// What the journal has of this drive so far (`None`: not journaled).
    pub journaled: Option<super::journaling::JournaledView>,
    /// A change the journal has not recorded yet waits for the next tick
    /// ([`super::App::journal_due_drives`]).
    pub journal_due: bool,
    /// What the drive watch (the desktop notifier) was last told this drive stands for,
    /// and whether the drive had ended then.
    pub told: Option<(koru_registry::NotifyEvent, bool)>,
    /// The terminal agent a drive types into (targets `agent`, `chat`, `session: t_…`).
    pub agent: Option<Box<super::agent_drives::AgentDrive>>,
    /// The terminal agent whose own chat inside the IDE window this drive is for (the
    /// Claude Code panel: `--agent claude-code` where no terminal runs it): only routes for
    /// that agent are planned, and the drive is done only on the agent's own record.
    pub agent_chat: Option<String>,
    /// The agent's chat such a drive resumes (`$chat` in the route's steps), or `None`.
    pub agent_chat_id: Option<String>,
    /// After a route's submit key into such a chat: when the drive fails `needs_user` if
    /// the agent has not recorded the prompt by then.
    pub record_due_ms: Option<u64>,
    /// The chat's own records of the prompt and outcome, once read back (`evidence`).
    pub evidence: Option<Box<koru_protocol::DriveEvidence>>,
    /// Which of them were asked for.
    pub evidence_asked: super::evidence::EvidenceAsked,
}

/// What an ack did to a drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckOutcome {
    /// The drive moved forward and is still running.
    Advanced,
    /// The drive reached a terminal state.
    Finished,
    /// Nothing changed (a repeated or out-of-order stage).
    Ignored,
    /// The current route failed with this blocker; the planner decides what comes next.
    StepFailed(Blocker),
}

impl DriveRecord {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        drive_id: String,
        target: Target,
        session_id: String,
        route: Route,
        prompt: String,
        options: DriveOptions,
        now_ms: u64,
        timeout_ms: u64,
    ) -> Self {
        let prompt_digest = crate::observe::prompt_digest(&prompt);
        let prompt_chars = prompt.chars().count();
        let prompt_excerpt = excerpt(&prompt);
        DriveRecord {
            drive_id,
            target,
            session_id,
            route,
            prompt,
            options,
            state: DriveState::Queued,
            history: vec![StageRecord {
                state: DriveState::Queued,
                at_ms: now_ms,
            }],
            blocker: None,
            created_at_ms: now_ms,
            deadline_ms: now_ms.saturating_add(timeout_ms),
            finished_at_ms: None,
            candidates: VecDeque::new(),
            current: None,
            attempts: Vec::new(),
            verification: Verification::None,
            prompt_digest,
            prompt_chars,
            prompt_excerpt,
            workspaces: Vec::new(),
            observation: None,
            window: None,
            extra_pids: Vec::new(),
            step_deadline_ms: None,
            retry_of: None,
            submit_evidence: None,
            waiting: None,
            resend_at_ms: None,
            resends: 0,
            journaled: None,
            journal_due: false,
            told: None,
            agent: None,
            agent_chat: None,
            agent_chat_id: None,
            record_due_ms: None,
            evidence: None,
            evidence_asked: Default::default(),
        }
    }

    /// Records a route that cannot be tried now.
    pub fn skip(&mut self, candidate: &Candidate) {
        self.attempts.push(RouteAttempt {
            route: candidate.route,
            interface: candidate.interface.clone(),
            outcome: AttemptOutcome::Skipped,
            reached: None,
            blocker: candidate.usable.clone().err(),
            hint: candidate.hint.clone(),
            note: None,
            text: None,
            started_at_ms: None,
            finished_at_ms: None,
        });
    }

    /// Starts trying a route.
    pub fn begin_attempt(&mut self, candidate: Arc<Candidate>, now_ms: u64) {
        self.route = candidate.route;
        self.attempts.push(RouteAttempt {
            route: candidate.route,
            interface: candidate.interface.clone(),
            outcome: AttemptOutcome::Running,
            reached: None,
            blocker: None,
            hint: None,
            note: candidate.note.clone(),
            text: None,
            started_at_ms: Some(now_ms),
            finished_at_ms: None,
        });
        self.current = Some(candidate);
        if self.state == DriveState::Queued {
            self.enter(DriveState::Sent, now_ms);
        } else if self.state != DriveState::Sent {
            // A fallback: the next route starts from `sent` again.
            self.enter(DriveState::Sent, now_ms);
        }
    }

    /// Ends the running attempt.
    pub fn end_attempt(
        &mut self,
        outcome: AttemptOutcome,
        blocker: Option<Blocker>,
        hint: Option<String>,
        now_ms: u64,
    ) {
        let reached = (self.state != DriveState::Sent && self.state != DriveState::Queued)
            .then_some(self.state)
            .filter(|s| !s.is_terminal())
            .or_else(|| {
                // A finished drive reached the stage before its terminal state.
                self.history.iter().rev().map(|r| r.state).find(|s| {
                    !s.is_terminal() && *s != DriveState::Sent && *s != DriveState::Queued
                })
            });
        if let Some(attempt) = self
            .attempts
            .iter_mut()
            .rev()
            .find(|a| a.outcome == AttemptOutcome::Running)
        {
            attempt.outcome = outcome;
            attempt.reached = reached;
            attempt.blocker = blocker;
            attempt.hint = hint;
            attempt.finished_at_ms = Some(now_ms);
        }
    }

    /// Records every route not tried because the prompt may already be delivered.
    pub fn abandon_rest(&mut self) {
        for candidate in std::mem::take(&mut self.candidates) {
            self.attempts.push(RouteAttempt {
                route: candidate.route,
                interface: candidate.interface.clone(),
                outcome: AttemptOutcome::NotTried,
                reached: None,
                blocker: None,
                hint: None,
                note: None,
                text: None,
                started_at_ms: None,
                finished_at_ms: None,
            });
        }
    }

    /// Moves through stages reached outside plugin acks (OS injection).
    pub fn advance_to(&mut self, state: DriveState, now_ms: u64) {
        if !self.is_terminal() && state.rank() > self.state.rank() {
            self.enter(state, now_ms);
        }
    }

    /// True once text may be in the chat input: retrying by another route could duplicate it.
    pub fn may_have_delivered(&self) -> bool {
        // `state` is the running route's own progress (each route starts from `sent`).
        matches!(self.state, DriveState::Pasted | DriveState::Submitted)
    }

    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }

    fn enter(&mut self, state: DriveState, now_ms: u64) {
        self.state = state;
        // The history says how far the drive got, each stage once: a route tried after
        // another one failed starts again from `sent` without a second `sent` (or
        // `received`) in it; its attempt says what it reached.
        let furthest = self
            .history
            .iter()
            .filter(|r| !r.state.is_terminal())
            .map(|r| r.state.rank())
            .max();
        if !state.is_terminal() && furthest.is_some_and(|rank| state.rank() <= rank) {
            return;
        }
        self.history.push(StageRecord {
            state,
            at_ms: now_ms,
        });
        if state.is_terminal() {
            self.finished_at_ms = Some(now_ms);
            // An ended drive tries no other route: its plan's untried routes (about 2 KB)
            // are let go rather than kept with the drive for as long as it is kept.
            self.candidates = VecDeque::new();
        }
    }

    /// The drive was written to its plugin.
    pub fn mark_sent(&mut self, now_ms: u64) {
        if self.state == DriveState::Queued {
            self.enter(DriveState::Sent, now_ms);
        }
    }

    /// Ends the drive (no-op if it already ended).
    pub fn finish(&mut self, state: DriveState, blocker: Option<Blocker>, now_ms: u64) -> bool {
        debug_assert!(state.is_terminal());
        if self.is_terminal() {
            return false;
        }
        self.blocker = blocker;
        // An ended drive waits for nothing any more.
        self.waiting = None;
        self.resend_at_ms = None;
        self.enter(state, now_ms);
        true
    }

    /// Applies a plugin's ack. Stages only move forward; `submitted` (or `pasted` when the
    /// drive asked not to submit) finishes the drive as `done`.
    pub fn apply_ack(
        &mut self,
        stage: AckStage,
        blocker: Option<Blocker>,
        now_ms: u64,
    ) -> AckOutcome {
        if self.is_terminal() {
            return AckOutcome::Ignored;
        }
        let next = match stage {
            AckStage::Received => DriveState::Received,
            AckStage::Focused => DriveState::Focused,
            AckStage::Pasted => DriveState::Pasted,
            AckStage::Submitted => DriveState::Submitted,
            AckStage::Failed => {
                let blocker = blocker.unwrap_or_else(|| {
                    Blocker::new(
                        koru_protocol::blocker::PLUGIN_FAILED,
                        "the plugin reported failure without a blocker",
                    )
                });
                return AckOutcome::StepFailed(blocker);
            }
        };
        if next.rank() <= self.state.rank() {
            return AckOutcome::Ignored;
        }
        self.enter(next, now_ms);
        let delivered =
            next == DriveState::Submitted || (next == DriveState::Pasted && !self.options.submit);
        if delivered {
            self.enter(DriveState::Done, now_ms);
            return AckOutcome::Finished;
        }
        AckOutcome::Advanced
    }

    /// The wire view of this drive.
    pub fn info(&self) -> DriveInfo {
        DriveInfo {
            drive_id: self.drive_id.clone(),
            target: self.target.clone(),
            session_id: self.session_id.clone(),
            route: self.route,
            options: self.options,
            state: self.state,
            history: self.history.clone(),
            blocker: self.blocker.clone(),
            prompt_chars: self.prompt_chars,
            prompt_excerpt: self.prompt_excerpt.clone(),
            created_at_ms: self.created_at_ms,
            finished_at_ms: self.finished_at_ms,
            attempts: self.attempts.clone(),
            verification: self.verification,
            observation: self.observation.clone(),
            retry_of: self.retry_of.clone(),
            submit_evidence: self.submit_evidence,
            waiting: self.waiting.clone(),
            evidence: self.evidence.clone(),
        }
    }
}

/// The first characters of a prompt on one line.
pub fn excerpt(prompt: &str) -> String {
    crate::journal::index::prompt_excerpt(prompt)
}

/// Recent drives by id, oldest evicted first once more than `capacity` have ended.
#[derive(Debug)]
pub struct DriveTable {
    /// Boxed: a record is over a kilobyte, and a hash table keeps room for up to twice as
    /// many entries as it holds (and briefly two tables while it grows), which held inline
    /// made 1,000 drives a 5 MB table.
    by_id: HashMap<String, Box<DriveRecord>>,
    order: VecDeque<String>,
    capacity: usize,
    total_created: usize,
}

impl DriveTable {
    pub fn new(capacity: usize) -> Self {
        DriveTable {
            by_id: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            total_created: 0,
        }
    }

    pub fn insert(&mut self, drive: DriveRecord) {
        self.order.push_back(drive.drive_id.clone());
        self.by_id.insert(drive.drive_id.clone(), Box::new(drive));
        self.total_created += 1;
        self.evict();
    }

    /// Forgets the oldest ended drives beyond capacity; running drives, and ended ones whose
    /// last change waits for its journal entry, are never forgotten.
    fn evict(&mut self) {
        let mut index = 0;
        while self.by_id.len() > self.capacity && index < self.order.len() {
            let id = &self.order[index];
            if self
                .by_id
                .get(id)
                .is_some_and(|d| d.is_terminal() && !d.journal_due)
            {
                let id = self.order.remove(index).expect("index is in range");
                self.by_id.remove(&id);
            } else {
                index += 1;
            }
        }
    }

    pub fn get(&self, drive_id: &str) -> Option<&DriveRecord> {
        self.by_id.get(drive_id).map(Box::as_ref)
    }

    /// Forgets a drive that was never accepted after all (the journal could not record it).
    pub fn withdraw(&mut self, drive_id: &str) {
        if self.by_id.remove(drive_id).is_some() {
            self.order.retain(|id| id != drive_id);
            self.total_created -= 1;
        }
    }

    pub fn get_mut(&mut self, drive_id: &str) -> Option<&mut DriveRecord> {
        self.by_id.get_mut(drive_id).map(Box::as_mut)
    }

    /// Drives oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &DriveRecord> {
        self.order.iter().filter_map(|id| self.get(id))
    }

    pub fn active_count(&self) -> usize {
        self.by_id.values().filter(|d| !d.is_terminal()).count()
    }

    pub fn total_created(&self) -> usize {
        self.total_created
    }

    /// Ids of running drives whose plugin has not acked the next stage in time.
    pub fn step_overdue(&self, now_ms: u64) -> Vec<String> {
        self.by_id
            .values()
            .filter(|d| !d.is_terminal() && d.step_deadline_ms.is_some_and(|t| t <= now_ms))
            .map(|d| d.drive_id.clone())
            .collect()
    }

    /// Ids of drives held after a `not_ready` refusal whose time to be sent again has come.
    pub fn resend_due(&self, now_ms: u64) -> Vec<String> {
        self.by_id
            .values()
            .filter(|d| !d.is_terminal() && d.resend_at_ms.is_some_and(|t| t <= now_ms))
            .map(|d| d.drive_id.clone())
            .collect()
    }

    /// Ids of running drives whose deadline has passed.
    pub fn overdue(&self, now_ms: u64) -> Vec<String> {
        self.by_id
            .values()
            .filter(|d| !d.is_terminal() && d.deadline_ms <= now_ms)
            .map(|d| d.drive_id.clone())
            .collect()
    }

    /// Ids of every drive that has not ended.
    pub fn running(&self) -> Vec<String> {
        self.iter()
            .filter(|d| !d.is_terminal())
            .map(|d| d.drive_id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(submit: bool) -> DriveRecord {
        DriveRecord::new(
            "d_1".into(),
            Target::Focused,
            "s_1".into(),
            Route::PluginDrive,
            "hello".into(),
            DriveOptions {
                submit,
                ..DriveOptions::default()
            },
            100,
            1_000,
        )
    }

    fn states(d: &DriveRecord) -> Vec<&'static str> {
        d.history.iter().map(|r| r.state.as_str()).collect()
    }

    #[test]
    fn stages_move_forward_and_submitted_finishes_done() {
        let mut d = drive(true);
        d.mark_sent(101);
        assert_eq!(
            d.apply_ack(AckStage::Received, None, 102),
            AckOutcome::Advanced
        );
        assert_eq!(
            d.apply_ack(AckStage::Pasted, None, 103),
            AckOutcome::Advanced
        );
        assert_eq!(
            d.apply_ack(AckStage::Focused, None, 104),
            AckOutcome::Ignored
        );
        assert_eq!(
            d.apply_ack(AckStage::Submitted, None, 105),
            AckOutcome::Finished
        );
        assert_eq!(
            states(&d),
            ["queued", "sent", "received", "pasted", "submitted", "done"]
        );
        assert_eq!(d.finished_at_ms, Some(105));
        assert_eq!(
            d.apply_ack(AckStage::Failed, None, 106),
            AckOutcome::Ignored
        );
    }

    #[test]
    fn without_submit_pasted_is_done() {
        let mut d = drive(false);
        d.mark_sent(101);
        assert_eq!(
            d.apply_ack(AckStage::Pasted, None, 102),
            AckOutcome::Finished
        );
        assert_eq!(d.state, DriveState::Done);
    }

    #[test]
    fn a_failure_without_blocker_gets_a_default_one_and_leaves_the_decision_to_the_planner() {
        let mut d = drive(true);
        match d.apply_ack(AckStage::Failed, None, 102) {
            AckOutcome::StepFailed(blocker) => assert_eq!(blocker.code, "plugin_failed"),
            other => panic!("{other:?}"),
        }
        assert!(!d.is_terminal());
        assert!(d.finish(DriveState::Failed, None, 103));
        assert!(!d.finish(DriveState::Cancelled, None, 104));
    }

    #[test]
    fn a_second_route_adds_no_second_sent_or_received_to_the_history() {
        let mut d = drive(true);
        d.mark_sent(101);
        d.apply_ack(AckStage::Received, None, 102);
        d.apply_ack(AckStage::Focused, None, 103);
        // The route failed before anything was in the input; the next one starts.
        d.state = DriveState::Sent;
        d.enter(DriveState::Sent, 104);
        assert!(!d.may_have_delivered());
        assert_eq!(
            d.apply_ack(AckStage::Received, None, 105),
            AckOutcome::Advanced
        );
        assert_eq!(d.state, DriveState::Received, "the route's own progress");
        d.apply_ack(AckStage::Focused, None, 106);
        d.apply_ack(AckStage::Pasted, None, 107);
        assert!(d.may_have_delivered());
        d.apply_ack(AckStage::Submitted, None, 108);
        assert_eq!(
            states(&d),
            [
                "queued",
                "sent",
                "received",
                "focused",
                "pasted",
                "submitted",
                "done"
            ]
        );
        let pasted = d
            .history
            .iter()
            .find(|r| r.state == DriveState::Pasted)
            .unwrap();
        assert_eq!(pasted.at_ms, 107);
    }

    #[test]
    fn pasted_or_submitted_since_the_last_send_means_it_may_have_been_delivered() {
        let mut d = drive(true);
        d.mark_sent(101);
        d.apply_ack(AckStage::Received, None, 102);
        assert!(!d.may_have_delivered());
        d.apply_ack(AckStage::Pasted, None, 103);
        assert!(d.may_have_delivered());
    }

    #[test]
    fn the_table_forgets_old_finished_drives_but_never_running_ones() {
        let mut table = DriveTable::new(2);
        for n in 0..4 {
            let mut d = drive(true);
            d.drive_id = format!("d_{n}");
            if n != 0 {
                d.finish(DriveState::Done, None, 5);
            }
            table.insert(d);
        }
        let ids: Vec<_> = table.iter().map(|d| d.drive_id.as_str()).collect();
        assert_eq!(ids, ["d_0", "d_3"]);
        assert_eq!(table.total_created(), 4);
    }

    #[test]
    fn excerpts_are_one_line_and_bounded() {
        assert_eq!(excerpt("a\nb"), "a b");
        let long = "é".repeat(100);
        assert_eq!(excerpt(&long).chars().count(), 60);
        assert!(excerpt(&long).ends_with('…'));
    }
}

//! Snapshot stores (whole-file JSON, mutation logs, SQLite): each store's pure reader turns what it read into a `ChatSnapshot` (the chat's turns and their states), and one `SnapshotDiffer` per chat turns successive snapshots into the shared observation vocabulary.
//!
//! The JSONL stores (Claude Code, Codex) are parsed line by line (`LineParser`); stores
//! that rewrite their files, or keep state in a database, only say what the chat looks
//! like *now*. Diffing snapshots gives the same events in the same order: a new turn is
//! `prompt_seen`, an answer appearing is `reply_started`, a state the store records is
//! `reply_completed` / `needs_input` / `cancelled` / `failed` (`explicit`), and a reply
//! the store never marks as finished is taken as complete after a quiet period
//! (`inferred`), as for the line stores.

use std::collections::HashMap;

use koru_protocol::{NeedsInputKind, ObservationBasis, ObservedKind};

use super::{excerpt_and_length, prompt_digest, Observation, STALE_TURN_MS};

/// What a store says one turn (one prompt and its answer) is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnState {
    /// The prompt is recorded; no answer yet.
    Waiting,
    /// The agent is answering (the store says so).
    Replying,
    /// The agent waits for the user.
    NeedsInput(NeedsInputKind),
    /// The store records the end of the turn.
    Completed,
    /// The turn was interrupted.
    Cancelled,
    /// The turn failed, with the store's reason.
    Failed(String),
    /// An answer is recorded but the store never marks turns as finished: complete after
    /// a quiet period (`inferred`), unless a tool call is still pending.
    Open { tool_pending: bool },
}

/// One turn as a store shows it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSnapshot {
    /// Stable within the chat (a request id, a message id, a timestamp).
    pub id: String,
    /// The user's prompt, when the store records it.
    pub prompt: Option<String>,
    /// The answer's text so far.
    pub reply: String,
    pub state: TurnState,
    /// The store's own timestamp for the turn's latest change, in ms since the epoch.
    pub ts_ms: Option<u64>,
}

/// One chat as a store shows it now: its turns, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatSnapshot {
    pub chat_id: String,
    pub workspace: Option<String>,
    pub turns: Vec<TurnSnapshot>,
    /// The store's own time for the chat (its creation or last change, in ms since the
    /// epoch), for a chat whose turns carry none; never the time Koru read it.
    pub updated_ms: Option<u64>,
}

/// The last state reported for a turn, to report each change once.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Reported {
    Nothing,
    Started,
    NeedsInput(NeedsInputKind),
    Ended,
}

/// What the differ keeps of one turn: small and fixed, never the reply's text.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct TurnProgress {
    reported: Reported,
    /// The reply's excerpt and length in characters at the last snapshot, kept while the
    /// turn is open (to infer its end after a quiet period); empty otherwise.
    reply: (String, usize),
    /// The reply's size in bytes and the store's state for the turn at the last snapshot:
    /// a turn whose end was inferred and that changes after all is resumed.
    reply_bytes: usize,
    state_seen: u8,
    open: bool,
    ts_ms: Option<u64>,
    /// Its end was inferred (quiet, stale), not recorded by the store.
    #[serde(default)]
    end_inferred: bool,
}

/// A small code for a store's turn state, to notice it changing.
fn state_code(state: &TurnState) -> u8 {
    match state {
        TurnState::Waiting => 0,
        TurnState::Replying => 1,
        TurnState::NeedsInput(_) => 2,
        TurnState::Completed => 3,
        TurnState::Cancelled => 4,
        TurnState::Failed(_) => 5,
        TurnState::Open {
            tool_pending: false,
        } => 6,
        TurnState::Open { tool_pending: true } => 7,
    }
}

/// Turns one chat's successive snapshots into observations.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct SnapshotDiffer {
    seen: bool,
    chat_id: String,
    workspace: Option<String>,
    turns: HashMap<String, TurnProgress>,
    /// The turn an inferred completion may end (the last open one).
    open_turn: Option<String>,
    /// The chat's last turn, which a stale conclusion may end.
    #[serde(default)]
    last_turn: Option<String>,
}

impl SnapshotDiffer {
    pub fn new() -> Self {
        SnapshotDiffer::default()
    }

    fn emit(
        &self,
        out: &mut Vec<Observation>,
        ts_ms: Option<u64>,
        basis: ObservationBasis,
        event: ObservedKind,
    ) {
        out.push(Observation {
            chat_id: self.chat_id.clone(),
            workspace: self.workspace.clone(),
            store_ts_ms: ts_ms,
            basis,
            event,
        });
    }

    /// The observations that take the chat from the previous snapshot to `snapshot`.
    pub fn update(&mut self, snapshot: &ChatSnapshot) -> Vec<Observation> {
        let mut out = Vec::new();
        self.chat_id = snapshot.chat_id.clone();
        if snapshot.workspace.is_some() {
            self.workspace = snapshot.workspace.clone();
        }
        if !self.seen {
            self.seen = true;
            let ts = snapshot
                .turns
                .first()
                .and_then(|t| t.ts_ms)
                .or(snapshot.updated_ms);
            self.emit(
                &mut out,
                ts,
                ObservationBasis::Explicit,
                ObservedKind::ChatSeen,
            );
        }
        self.open_turn = None;
        for turn in &snapshot.turns {
            if let Some(previous) = self.open_turn.take() {
                // A later turn follows an answer the store never marks as finished: that
                // answer was the end of its turn (as the next prompt ends one in the line
                // stores), before the later turn's news.
                self.complete_inferred(&mut out, previous);
            }
            let progress = match self.turns.get(&turn.id) {
                Some(progress) => progress.clone(),
                None => {
                    if let Some(prompt) = &turn.prompt {
                        let (excerpt, length) = excerpt_and_length(prompt);
                        self.emit(
                            &mut out,
                            turn.ts_ms,
                            ObservationBasis::Explicit,
                            ObservedKind::PromptSeen {
                                excerpt,
                                length,
                                digest: prompt_digest(prompt),
                            },
                        );
                    }
                    TurnProgress {
                        reported: Reported::Nothing,
                        reply: (String::new(), 0),
                        reply_bytes: 0,
                        state_seen: state_code(&turn.state),
                        open: false,
                        ts_ms: turn.ts_ms,
                        end_inferred: false,
                    }
                }
            };
            let progress = self.advance(&mut out, turn, progress);
            if progress.open {
                self.open_turn = Some(turn.id.clone());
            }
            self.turns.insert(turn.id.clone(), progress);
        }
        self.last_turn = snapshot.turns.last().map(|t| t.id.clone());
        out
    }

    fn advance(
        &self,
        out: &mut Vec<Observation>,
        turn: &TurnSnapshot,
        mut progress: TurnProgress,
    ) -> TurnProgress {
        // A store confirming the end Koru inferred (the same reply, now completed) is no
        // news; more reply, or the turn working again, is.
        let working_again = state_code(&turn.state) != progress.state_seen
            && matches!(
                turn.state,
                TurnState::Waiting
                    | TurnState::Replying
                    | TurnState::NeedsInput(_)
                    | TurnState::Open { tool_pending: true }
            );
        if progress.end_inferred && (turn.reply.len() != progress.reply_bytes || working_again) {
            // The turn changed after Koru inferred its end: that end is taken back.
            self.emit(
                out,
                turn.ts_ms,
                ObservationBasis::Explicit,
                ObservedKind::ReplyResumed,
            );
            progress.reported = Reported::Started;
            progress.end_inferred = false;
        }
        let answering = !turn.reply.is_empty()
            || matches!(
                turn.state,
                TurnState::Replying | TurnState::NeedsInput(_) | TurnState::Completed
            );
        if progress.reported == Reported::Nothing && answering {
            self.emit(
                out,
                turn.ts_ms,
                ObservationBasis::Explicit,
                ObservedKind::ReplyStarted,
            );
            progress.reported = Reported::Started;
        }
        let ended = progress.reported == Reported::Ended;
        progress.open = false;
        match &turn.state {
            TurnState::Waiting => {}
            TurnState::Replying => {
                if matches!(progress.reported, Reported::NeedsInput(_)) {
                    progress.reported = Reported::Started;
                }
            }
            TurnState::NeedsInput(kind) => {
                if !ended && progress.reported != Reported::NeedsInput(*kind) {
                    self.emit(
                        out,
                        turn.ts_ms,
                        ObservationBasis::Explicit,
                        ObservedKind::NeedsInput { input: *kind },
                    );
                    progress.reported = Reported::NeedsInput(*kind);
                }
            }
            TurnState::Completed => {
                if !ended {
                    let (excerpt, length) = excerpt_and_length(&turn.reply);
                    self.emit(
                        out,
                        turn.ts_ms,
                        ObservationBasis::Explicit,
                        ObservedKind::ReplyCompleted { excerpt, length },
                    );
                    progress.reported = Reported::Ended;
                }
            }
            TurnState::Cancelled => {
                if !ended {
                    self.emit(
                        out,
                        turn.ts_ms,
                        ObservationBasis::Explicit,
                        ObservedKind::Cancelled,
                    );
                    progress.reported = Reported::Ended;
                }
            }
            TurnState::Failed(reason) => {
                if !ended {
                    let reason = excerpt_and_length(reason).0;
                    self.emit(
                        out,
                        turn.ts_ms,
                        ObservationBasis::Explicit,
                        ObservedKind::Failed { reason },
                    );
                    progress.reported = Reported::Ended;
                }
            }
            TurnState::Open { tool_pending } => {
                if matches!(progress.reported, Reported::NeedsInput(_)) {
                    progress.reported = Reported::Started;
                }
                progress.open = !ended && !tool_pending && !turn.reply.is_empty();
            }
        }
        progress.reply = if progress.open {
            excerpt_and_length(&turn.reply)
        } else {
            (String::new(), 0)
        };
        progress.reply_bytes = turn.reply.len();
        progress.state_seen = state_code(&turn.state);
        progress.ts_ms = turn.ts_ms;
        progress
    }

    /// The store has been quiet since `last_change_ms`: the open turn (an answer the store
    /// never marks as finished) is complete after `quiet_ms`, and a last turn still
    /// unfinished after `STALE_TURN_MS` is over (both `inferred`).
    pub fn on_quiet(
        &mut self,
        now_ms: u64,
        last_change_ms: u64,
        quiet_ms: u64,
    ) -> Vec<Observation> {
        let mut out = Vec::new();
        let quiet_for = now_ms.saturating_sub(last_change_ms);
        if quiet_for < quiet_ms {
            return out;
        }
        if let Some(id) = self.open_turn.take() {
            self.complete_inferred(&mut out, id);
        }
        if quiet_for >= STALE_TURN_MS {
            self.conclude_stale(&mut out);
        }
        out
    }

    /// History read at once: concluded from the last turn's own time (the file's
    /// `written_ms` when the store gives none).
    pub fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        let own = self
            .last_turn
            .as_ref()
            .and_then(|id| self.turns.get(id))
            .and_then(|t| t.ts_ms);
        let last = own.map_or(written_ms, |ts| ts.min(written_ms));
        self.on_quiet(now_ms, last, quiet_ms)
    }

    /// Whether the last turn is unfinished (the passing of time may still end it).
    pub fn turn_open(&self) -> bool {
        self.open_turn.is_some()
            || self
                .last_turn
                .as_ref()
                .and_then(|id| self.turns.get(id))
                .is_some_and(|t| t.reported != Reported::Ended)
    }

    /// The last turn, unfinished for `STALE_TURN_MS`, is over: `cancelled` (`inferred`;
    /// an answer that could be complete was ended by `complete_inferred` before).
    fn conclude_stale(&mut self, out: &mut Vec<Observation>) {
        let Some(id) = self.last_turn.clone() else {
            return;
        };
        let Some(mut progress) = self.turns.get(&id).cloned() else {
            return;
        };
        if progress.reported == Reported::Ended {
            return;
        }
        self.emit(
            out,
            progress.ts_ms,
            ObservationBasis::Inferred,
            ObservedKind::Cancelled,
        );
        progress.reported = Reported::Ended;
        progress.open = false;
        progress.end_inferred = true;
        progress.reply = (String::new(), 0);
        self.turns.insert(id, progress);
    }

    /// The open turn `id` is complete (`inferred`), once.
    fn complete_inferred(&mut self, out: &mut Vec<Observation>, id: String) {
        if let Some(mut progress) = self.turns.get(&id).cloned() {
            if progress.open && progress.reported != Reported::Ended {
                let (excerpt, length) = std::mem::take(&mut progress.reply);
                self.emit(
                    out,
                    progress.ts_ms,
                    ObservationBasis::Inferred,
                    ObservedKind::ReplyCompleted { excerpt, length },
                );
                progress.reported = Reported::Ended;
                progress.open = false;
                progress.end_inferred = true;
                self.turns.insert(id, progress);
            }
        }
    }

    /// Whether the differ has seen the chat at all.
    pub fn seen(&self) -> bool {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::kinds;

    fn turn(id: &str, prompt: &str, reply: &str, state: TurnState) -> TurnSnapshot {
        TurnSnapshot {
            id: id.into(),
            prompt: Some(prompt.into()),
            reply: reply.into(),
            state,
            ts_ms: Some(1),
        }
    }

    fn chat(turns: Vec<TurnSnapshot>) -> ChatSnapshot {
        ChatSnapshot {
            chat_id: "c".into(),
            workspace: Some("/w".into()),
            turns,
            updated_ms: None,
        }
    }

    #[test]
    fn successive_snapshots_report_each_change_once_in_order() {
        let mut differ = SnapshotDiffer::new();
        let first = differ.update(&chat(vec![turn("r1", "explain", "", TurnState::Waiting)]));
        assert_eq!(kinds(&first), ["chat_seen", "prompt_seen"]);
        assert_eq!(first[1].workspace.as_deref(), Some("/w"));
        let replying = chat(vec![turn(
            "r1",
            "explain",
            "It parses",
            TurnState::Replying,
        )]);
        assert_eq!(kinds(&differ.update(&replying)), ["reply_started"]);
        assert!(differ.update(&replying).is_empty(), "no change, no news");
        let asking = chat(vec![turn(
            "r1",
            "explain",
            "It parses",
            TurnState::NeedsInput(NeedsInputKind::ToolApproval),
        )]);
        assert_eq!(kinds(&differ.update(&asking)), ["needs_input"]);
        assert!(differ.update(&asking).is_empty());
        let done = chat(vec![turn(
            "r1",
            "explain",
            "It parses args.",
            TurnState::Completed,
        )]);
        let events = differ.update(&done);
        assert_eq!(kinds(&events), ["reply_completed"]);
        assert_eq!(
            events[0].event,
            ObservedKind::ReplyCompleted {
                excerpt: "It parses args.".into(),
                length: 15
            }
        );
        assert!(differ.update(&done).is_empty());
        let mut two = done.turns.clone();
        two.push(turn("r2", "again", "", TurnState::Cancelled));
        two.push(turn("r3", "and", "", TurnState::Failed("quota".into())));
        assert_eq!(
            kinds(&differ.update(&chat(two))),
            ["prompt_seen", "cancelled", "prompt_seen", "failed"]
        );
    }

    #[test]
    fn an_open_answer_is_completed_after_quiet_unless_a_tool_is_pending() {
        let mut differ = SnapshotDiffer::new();
        differ.update(&chat(vec![turn(
            "m1",
            "list todos",
            "Running grep",
            TurnState::Open { tool_pending: true },
        )]));
        assert!(differ.on_quiet(10_000, 0, 1_000).is_empty(), "tool pending");
        differ.update(&chat(vec![turn(
            "m1",
            "list todos",
            "There are 3.",
            TurnState::Open {
                tool_pending: false,
            },
        )]));
        assert!(differ.on_quiet(500, 0, 1_000).is_empty(), "not quiet yet");
        assert_eq!(
            kinds(&differ.on_quiet(2_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        assert!(differ.on_quiet(9_000, 0, 1_000).is_empty(), "once");
        // A store that later records the end explicitly does not report it twice.
        assert!(differ
            .update(&chat(vec![turn(
                "m1",
                "list todos",
                "There are 3.",
                TurnState::Completed
            )]))
            .is_empty());
    }

    #[test]
    fn a_later_turn_ends_the_open_answer_before_it() {
        // Gemini CLI records no turn end: a resumed session's first answer is followed by
        // the next prompt (tests/corpus/gemini/session-…-fc628834.jsonl).
        let open = TurnState::Open {
            tool_pending: false,
        };
        let first = turn("m1", "capital of France?", "Paris.", open.clone());
        let second = turn("m2", "and of Italy?", "", TurnState::Waiting);
        // Read at once (a file copied in, or history).
        let mut differ = SnapshotDiffer::new();
        let events = differ.update(&chat(vec![first.clone(), second.clone()]));
        assert_eq!(
            kinds(&events),
            [
                "chat_seen",
                "prompt_seen",
                "reply_started",
                "reply_completed (inferred)",
                "prompt_seen"
            ]
        );
        let ObservedKind::ReplyCompleted { excerpt, .. } = &events[3].event else {
            panic!()
        };
        assert_eq!(excerpt, "Paris.");
        // Read as it grows: the second prompt ends the first answer, once.
        let mut differ = SnapshotDiffer::new();
        differ.update(&chat(vec![first.clone()]));
        assert_eq!(
            kinds(&differ.update(&chat(vec![first.clone(), second.clone()]))),
            ["reply_completed (inferred)", "prompt_seen"]
        );
        let answered = turn("m2", "and of Italy?", "Rome.", open);
        assert_eq!(
            kinds(&differ.update(&chat(vec![first.clone(), answered]))),
            ["reply_started"]
        );
        assert_eq!(
            kinds(&differ.on_quiet(2_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        // A pending tool call is not ended by a later prompt (a prompt queued meanwhile).
        let mut differ = SnapshotDiffer::new();
        let working = turn(
            "m1",
            "run the tests",
            "Running them.",
            TurnState::Open { tool_pending: true },
        );
        assert_eq!(
            kinds(&differ.update(&chat(vec![working, second]))),
            ["chat_seen", "prompt_seen", "reply_started", "prompt_seen"]
        );
    }

    #[test]
    fn a_last_turn_left_unfinished_is_over_after_an_hour_and_comes_back_if_it_changes() {
        let hour = STALE_TURN_MS;
        // A reply the store says is still being written, a year ago.
        let replying = turn("r1", "explain", "Half an ans", TurnState::Replying);
        let mut differ = SnapshotDiffer::new();
        differ.update(&chat(vec![replying.clone()]));
        assert!(differ.turn_open());
        assert!(differ.on_history(1 + hour - 1, 1, 1_000).is_empty());
        assert_eq!(
            kinds(&differ.on_history(1 + hour, u64::MAX, 1_000)),
            ["cancelled (inferred)"],
            "by the turn's own time (1), not the file's"
        );
        assert!(!differ.turn_open());
        // The same snapshot again: no news.
        assert!(differ.update(&chat(vec![replying.clone()])).is_empty());
        // More of the reply after all: the end is taken back, once.
        let more = turn(
            "r1",
            "explain",
            "Half an answer, and more",
            TurnState::Replying,
        );
        assert_eq!(
            kinds(&differ.update(&chat(vec![more.clone()]))),
            ["reply_resumed"]
        );
        assert!(differ.update(&chat(vec![more])).is_empty());

        // An inferred completion the store later confirms (same reply) is no news.
        let open = turn(
            "r1",
            "explain",
            "All of it.",
            TurnState::Open {
                tool_pending: false,
            },
        );
        let mut differ = SnapshotDiffer::new();
        differ.update(&chat(vec![open]));
        assert_eq!(
            kinds(&differ.on_quiet(2_000, 0, 1_000)),
            ["reply_completed (inferred)"]
        );
        let done = turn("r1", "explain", "All of it.", TurnState::Completed);
        assert!(differ.update(&chat(vec![done])).is_empty());
    }

    #[test]
    fn the_differ_keeps_no_reply_text_and_survives_a_checkpoint() {
        let long = "word ".repeat(10_000);
        let mut differ = SnapshotDiffer::new();
        differ.update(&chat(vec![
            turn("r1", "a", &long, TurnState::Completed),
            turn(
                "r2",
                "b",
                &long,
                TurnState::Open {
                    tool_pending: false,
                },
            ),
        ]));
        let state = serde_json::to_string(&differ).unwrap();
        assert!(
            state.len() < 1_000,
            "{} bytes kept for two long replies",
            state.len()
        );
        let mut restored: SnapshotDiffer = serde_json::from_str(&state).unwrap();
        let events = restored.on_quiet(2_000, 0, 1_000);
        assert_eq!(kinds(&events), ["reply_completed (inferred)"]);
        let ObservedKind::ReplyCompleted { length, .. } = &events[0].event else {
            panic!()
        };
        assert_eq!(*length, 50_000);
    }
}

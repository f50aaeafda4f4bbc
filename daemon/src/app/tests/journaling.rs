//! State-machine tests of the drive journal: what `drive.get` answers from the journal's index for an ended drive is what the state machine held (every stage with its time, attempts, evidence, blocker), whether its stages were journaled tick by tick or folded into a lean `drive_ended`, and again after a restart rebuilt the index from the journal.

use std::path::Path;

use koru_protocol::{AckStage, DriveInfo, DriveState, StageRecord, SubmitEvidence, Target};
use serde_json::Value;

use super::*;
use crate::journal::{canonical::Sealer, Journal, JournalConfig};

fn journal_config(root: &Path) -> JournalConfig {
    let mut config = JournalConfig::new(root.join("journal"));
    config.index_path = root.join("cache").join("index.sqlite3");
    config.sealer = Sealer::Sha256;
    config
}

/// A harness whose state machine journals into `root`.
fn journaled(root: &Path) -> Harness {
    let mut h = Harness::new();
    let journal = Journal::open(
        journal_config(root),
        h.clock.now_ms(),
        &crate::journal::test_daemon(),
        Default::default(),
    )
    .unwrap()
    .journal;
    h.app = h.app.with_journal(journal);
    h
}

impl Harness {
    /// `submitted` with the chat's own evidence, as the VS Code extension acks it.
    fn submitted(&mut self, peer: &Peer, drive_id: &str) {
        super::ack_with_evidence(self, peer, drive_id, Some(SubmitEvidence::ChatResponded));
    }

    /// The drive as the state machine holds it now.
    fn memory(&self, drive_id: &str) -> DriveInfo {
        self.app.drives.get(drive_id).unwrap().info()
    }

    /// The drive as `drive.get` answers for it from the journal's index, once the index
    /// has every entry written so far.
    fn indexed(&mut self, drive_id: &str) -> DriveInfo {
        let journal = self.app.journal.as_mut().unwrap();
        journal.flush_index();
        journal.index().get(drive_id).unwrap()
    }
}

/// Every entry of the journal in `root` about `drive_id`, with its line's length.
fn entries_of(root: &Path, drive_id: &str) -> Vec<(Value, usize)> {
    let mut entries = Vec::new();
    for segment in crate::journal::segments::list(&root.join("journal")).unwrap() {
        // Through `Lines`: the current segment ends in a NUL reserve while it is written.
        for line in crate::journal::segments::Lines::open(&segment.path).unwrap() {
            let line = line.unwrap();
            let entry: Value = serde_json::from_slice(&line.bytes).unwrap();
            if entry["drive_id"] == drive_id {
                entries.push((entry, line.bytes.len()));
            }
        }
    }
    entries
}

fn kinds(entries: &[(Value, usize)]) -> Vec<&str> {
    entries
        .iter()
        .map(|(entry, _)| entry["kind"].as_str().unwrap())
        .collect()
}

#[test]
fn a_drive_ended_within_a_tick_is_two_entries_and_the_index_answers_its_every_stage() {
    let tmp = tempfile::tempdir().unwrap();
    let mut h = journaled(tmp.path());
    let (plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let drive_id = h.create(&mut controller, Target::Session(session_id), "fast one");
    h.clock.advance(2);
    h.ack(&plugin, &drive_id, AckStage::Received);
    h.clock.advance(3);
    h.submitted(&plugin, &drive_id);
    h.app.flush_journal();
    let memory = h.memory(&drive_id);
    assert_eq!(memory.state, DriveState::Done);
    let states: Vec<DriveState> = memory.history.iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        [
            DriveState::Queued,
            DriveState::Sent,
            DriveState::Received,
            DriveState::Submitted,
            DriveState::Done
        ]
    );
    assert_eq!(h.indexed(&drive_id), memory);

    let entries = entries_of(tmp.path(), &drive_id);
    assert_eq!(kinds(&entries), ["drive_accepted", "drive_ended"]);
    let (ended, bytes) = &entries[1];
    assert!(ended.get("drive").is_none(), "lean: {ended}");
    let stages: Vec<StageRecord> = serde_json::from_value(ended["stages"].clone()).unwrap();
    assert_eq!(stages, memory.history[1..], "every stage after queued");
    assert_eq!(ended["submit_evidence"], "chat_responded");
    assert_eq!(ended["verification"], "acked");
    // The same entry as it was before it was lean: its drive's id, state and blocker and
    // the whole drive (without the prompt excerpt), in the same envelope.
    let mut whole = memory.clone();
    whole.prompt_excerpt = String::new();
    let mut before = ended.clone();
    let fields = before.as_object_mut().unwrap();
    for lean_only in [
        "route",
        "stages",
        "attempts",
        "verification",
        "submit_evidence",
    ] {
        fields.remove(lean_only);
    }
    fields.insert("drive".into(), serde_json::to_value(&whole).unwrap());
    let before = serde_json::to_string(&before).unwrap().len();
    eprintln!(
        "drive_ended of a drive acked within a tick: {bytes} bytes lean, {before} bytes with the whole drive: {ended}"
    );
    assert!(*bytes < before, "{bytes} bytes lean, {before} before");
}

#[test]
fn a_drive_journaled_tick_by_tick_a_queued_one_and_a_failed_one_read_back_whole_also_after_a_restart(
) {
    let tmp = tempfile::tempdir().unwrap();
    let mut h = journaled(tmp.path());
    let (mut plugin, session_id) = h.plugin("/w");
    let mut controller = h.controller(64);
    let slow = h.create(&mut controller, Target::Session(session_id.clone()), "slow");
    // Behind the slow one: it waits (its `waiting` is on record), then runs.
    let behind = h.create(
        &mut controller,
        Target::Session(session_id.clone()),
        "behind",
    );
    assert!(h.memory(&behind).waiting.is_some());
    h.advance(150);
    h.ack(&plugin, &slow, AckStage::Received);
    h.advance(150);
    h.ack(&plugin, &slow, AckStage::Focused);
    h.advance(150);
    h.submitted(&plugin, &slow);
    assert_eq!(h.drive_state(&slow), DriveState::Done);
    // The plugin fails the next one; nothing else can take it.
    h.clock.advance(7);
    h.fail_step(&plugin, &behind, "chat_refused");
    assert_eq!(h.drive_state(&behind), DriveState::Failed);
    // A third runs when the journal is cut off (a crash): its stages of the last tick are
    // on record, the rest is lost.
    let open = h.create(&mut controller, Target::Session(session_id), "left open");
    h.clock.advance(4);
    h.ack(&plugin, &open, AckStage::Received);
    h.advance(150);
    plugin.drain();
    h.app.flush_journal();

    let slow_memory = h.memory(&slow);
    let behind_memory = h.memory(&behind);
    assert!(slow_memory.history.len() >= 5, "{:?}", slow_memory.history);
    assert!(behind_memory.blocker.is_some() && !behind_memory.attempts.is_empty());
    assert_eq!(h.indexed(&slow), slow_memory);
    assert_eq!(h.indexed(&behind), behind_memory);
    let slow_kinds = kinds(&entries_of(tmp.path(), &slow)).join(" ");
    assert_eq!(
        slow_kinds,
        "drive_accepted drive_state drive_state drive_state drive_ended"
    );
    let behind_entries = entries_of(tmp.path(), &behind);
    assert!(
        behind_entries
            .iter()
            .any(|(entry, _)| entry["waiting"]["code"].is_string()),
        "the wait is on record"
    );
    assert!(behind_entries
        .iter()
        .all(|(entry, _)| entry.get("drive").is_none()));

    // A crash: the journal closes without `daemon_stopped`; the index is lost too.
    let open_memory = h.memory(&open);
    h.app.journal.take().unwrap().close();
    std::fs::remove_file(tmp.path().join("cache").join("index.sqlite3")).unwrap();
    h.clock.advance(1_000);
    let restarted_at = h.clock.now_ms();
    let reopened = Journal::open(
        journal_config(tmp.path()),
        restarted_at,
        &crate::journal::test_daemon(),
        Default::default(),
    )
    .unwrap();
    assert_eq!(reopened.ended_at_restart, std::slice::from_ref(&open));
    let index = reopened.journal.index();
    assert_eq!(index.get(&slow).unwrap(), slow_memory);
    assert_eq!(index.get(&behind).unwrap(), behind_memory);
    let ended = index.get(&open).unwrap();
    let mut expected = open_memory;
    expected.state = DriveState::Failed;
    expected.history.push(StageRecord {
        state: DriveState::Failed,
        at_ms: restarted_at,
    });
    expected.finished_at_ms = Some(restarted_at);
    expected.blocker = ended.blocker.clone();
    assert_eq!(ended, expected);
    assert_eq!(
        ended.blocker.unwrap().code,
        koru_protocol::blocker::DAEMON_RESTARTED
    );
    reopened.journal.close();
}

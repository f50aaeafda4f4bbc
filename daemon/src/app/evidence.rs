//! The chat's own evidence of a drive: once the observers match a drive's prompt in a chat's store, and again when its turn settles, the chat's file is read back off the loop (the `ChatReader`, asked for records) for where the store holds the prompt, the reply and the end, with the SHA-256 of those bytes; what it finds goes on the drive (`DriveInfo::evidence`) and into the journal (`drive_prompt_recorded`, `drive_outcome_recorded`; docs/journal.md, "Evidence").

use std::path::Path;
use std::sync::Arc;

use koru_protocol::{
    ChatRecordRef, ObservationBasis, ObservedStage, OutcomeEvidence, StoreRecord, TextDigest,
    PLUGIN_OBSERVATION_STORE,
};
use serde::Serialize;

use super::App;
use crate::clock::Clock;
use crate::conversation::read::{ReadFrom, RecordAt, TurnRecords};
use crate::conversation::{ChatTurns, ItemKind, Keep, ReadError, ReadRequest, SourceRecord};
use crate::journal;

/// A read for a drive's evidence, waiting for its result.
#[derive(Debug)]
pub(super) struct PendingEvidence {
    drive_id: String,
    store: String,
    chat_id: String,
    source: Arc<Path>,
    /// The settled stage to record the outcome of; `None`: the prompt only.
    stage: Option<ObservedStage>,
}

/// What of a drive's evidence has been asked for, so that each part is read once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvidenceAsked {
    pub prompt: bool,
    /// The last settled stage whose outcome was asked for.
    pub outcome: Option<ObservedStage>,
}

/// `drive_prompt_recorded`'s own fields: the drive and the chat's record of its prompt.
#[derive(Serialize)]
struct PromptRecordedEntry<'a> {
    drive_id: &'a str,
    #[serde(flatten)]
    found: &'a ChatRecordRef,
}

/// `drive_outcome_recorded`'s own fields.
#[derive(Serialize)]
struct OutcomeRecordedEntry<'a> {
    drive_id: &'a str,
    #[serde(flatten)]
    outcome: &'a OutcomeEvidence,
}

/// A conversation item's source as the wire names it.
pub fn store_record(source: &SourceRecord) -> StoreRecord {
    match source.clone() {
        SourceRecord::Line {
            line,
            offset,
            bytes,
            sha256,
            pointer,
        } => StoreRecord::Line {
            line,
            offset,
            bytes,
            sha256,
            pointer,
        },
        SourceRecord::Element {
            offset,
            bytes,
            sha256,
            pointer,
            file,
        } => StoreRecord::Element {
            offset,
            bytes,
            sha256,
            pointer,
            file,
        },
        SourceRecord::Row {
            table,
            row,
            bytes,
            sha256,
            pointer,
            file,
        } => StoreRecord::Row {
            table,
            row,
            bytes,
            sha256,
            pointer,
            file,
        },
    }
}

/// The item kind that records `stage` in a store: the end of the turn, or the question.
fn end_kind(stage: ObservedStage) -> Option<ItemKind> {
    match stage {
        ObservedStage::Replied | ObservedStage::Cancelled | ObservedStage::Failed => {
            Some(ItemKind::TurnEnd)
        }
        ObservedStage::NeedsInput => Some(ItemKind::NeedsInput),
        ObservedStage::Observed | ObservedStage::Replying | ObservedStage::Ambiguous => None,
    }
}

impl<C: Clock> App<C> {
    /// Asks for what of a drive's evidence is due and not asked for yet: its prompt's
    /// record once a store (not only the window's plugin) matched it, and the outcome's
    /// each time its observation settles on a new stage. Called whenever a drive is
    /// published; reads only drives whose chat was read from a file.
    pub(super) fn want_evidence(&mut self, drive_id: &str) {
        if !self.config.drive_evidence {
            return;
        }
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let Some(seen) = drive.observation.as_ref() else {
            return;
        };
        if seen.store == PLUGIN_OBSERVATION_STORE || seen.stage == ObservedStage::Ambiguous {
            return;
        }
        let asked = drive.evidence_asked;
        let stage = seen.stage.is_settled().then_some(seen.stage);
        let due_prompt = !asked.prompt;
        let due_outcome = stage.is_some() && asked.outcome != stage;
        if !due_prompt && !due_outcome {
            return;
        }
        let key = (seen.store.clone(), seen.chat_id.clone());
        let Some(source) = self
            .chats
            .get(&key.0, &key.1)
            .and_then(|row| row.source.clone())
        else {
            // Reported by a hook, not read from a file: nothing to read back.
            return;
        };
        let request = ReadRequest {
            store: key.0.clone(),
            chat_id: key.1.clone(),
            source: source.to_path_buf(),
            keep: Keep::PromptDigest(drive.prompt_digest.clone()),
            expect_reply: stage == Some(ObservedStage::Replied),
            records: true,
            from: self.drive_read_from(drive_id),
        };
        if let Some(drive) = self.drives.get_mut(drive_id) {
            drive.evidence_asked.prompt = true;
            if due_outcome {
                drive.evidence_asked.outcome = stage;
            }
        }
        let ticket = self.next_chat_read;
        self.next_chat_read += 1;
        self.evidence_reads.insert(
            ticket,
            PendingEvidence {
                drive_id: drive_id.to_string(),
                store: key.0,
                chat_id: key.1,
                source,
                stage: if due_outcome { stage } else { None },
            },
        );
        self.chat_reader.start(ticket, request);
    }

    /// Where a read of a drive's turn may start: its prompt's line, once the chat's own
    /// record of it is known (a JSONL store's line holding that one record).
    pub(super) fn drive_read_from(&self, drive_id: &str) -> Option<ReadFrom> {
        let prompt = self
            .drives
            .get(drive_id)?
            .evidence
            .as_ref()?
            .prompt
            .as_ref()?;
        match &prompt.record {
            StoreRecord::Line {
                line,
                offset,
                sha256,
                pointer: None,
                ..
            } => Some(ReadFrom {
                line: *line,
                offset: *offset,
                sha256: sha256.clone(),
                turn: prompt.turn,
            }),
            _ => None,
        }
    }

    /// A read for a drive's evidence came back (a ticket no read waits for is ignored).
    pub(super) fn on_evidence_read(&mut self, ticket: u64, result: Result<ChatTurns, ReadError>) {
        let Some(pending) = self.evidence_reads.remove(&ticket) else {
            return;
        };
        let drive_id = pending.drive_id.clone();
        match result {
            Ok(found) => {
                let (Some((turn_index, turn)), Some(records)) = (
                    found.turns.into_iter().last(),
                    found.records.into_iter().last(),
                ) else {
                    tracing::warn!(
                        drive_id,
                        chat = pending.chat_id,
                        source = %pending.source.display(),
                        "the drive's prompt is not in its chat's file any more; no evidence recorded"
                    );
                    return;
                };
                self.take_evidence(&pending, turn_index, turn.reply.as_deref(), records);
            }
            Err(error) => {
                tracing::warn!(drive_id, %error, "the drive's chat could not be read back for its evidence");
            }
        }
    }

    /// Records what a read found of a drive's turn (`turn_index`, its reply and records).
    fn take_evidence(
        &mut self,
        pending: &PendingEvidence,
        turn_index: u64,
        reply: Option<&str>,
        records: TurnRecords,
    ) {
        let now = self.clock.now_ms();
        let drive_id = pending.drive_id.as_str();
        let reference = |at: &RecordAt| ChatRecordRef {
            store: pending.store.clone(),
            chat_id: pending.chat_id.clone(),
            file: pending.source.display().to_string(),
            turn: turn_index,
            store_at_ms: at.at_ms,
            record: store_record(&at.source),
        };
        let Some(prompt) = records.prompt.as_ref().map(reference) else {
            tracing::warn!(
                drive_id,
                "the drive's turn was found without a prompt record; no evidence recorded"
            );
            return;
        };
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let known = drive.evidence.clone().unwrap_or_default();
        let mut changed = false;
        let mut evidence = known.clone();
        match &known.prompt {
            // A later prompt of the same text: this turn is not the drive's.
            Some(recorded) if recorded.record != prompt.record || recorded.file != prompt.file => {
                tracing::warn!(
                    drive_id,
                    "the chat's last turn with the drive's prompt is not the one recorded for it (the same prompt sent again?); no outcome recorded"
                );
                return;
            }
            Some(_) => {}
            None => {
                self.journal_evidence(
                    now,
                    journal::KIND_DRIVE_PROMPT_RECORDED,
                    drive_id,
                    &PromptRecordedEntry {
                        drive_id,
                        found: &prompt,
                    },
                );
                evidence.prompt = Some(prompt);
                changed = true;
            }
        }
        if let Some(stage) = pending.stage {
            let end = records
                .end
                .as_ref()
                .filter(|at| Some(at.kind) == end_kind(stage));
            let (basis, record) = match (end, stage) {
                (Some(end), _) => (ObservationBasis::Explicit, Some(reference(end))),
                // No record of the end: the reply's last text stands for it.
                (None, ObservedStage::Replied) => (
                    ObservationBasis::Inferred,
                    records.reply.as_ref().map(reference),
                ),
                (None, _) => (ObservationBasis::Inferred, None),
            };
            let reply = reply.filter(|text| !text.is_empty()).map(|text| {
                // Kept as the journal keeps prompts: its blob in `full` mode, else only
                // the digest and length.
                match self.journal.as_mut() {
                    Some(journal) => {
                        let kept = journal.store_prompt_record(text);
                        TextDigest {
                            sha256: kept.sha256,
                            bytes: kept.bytes as u64,
                            chars: kept.chars as u64,
                        }
                    }
                    None => TextDigest {
                        sha256: journal::canonical::sha256_hex(text.as_bytes()),
                        bytes: text.len() as u64,
                        chars: text.chars().count() as u64,
                    },
                }
            });
            let outcome = OutcomeEvidence {
                stage,
                basis,
                record,
                reply,
            };
            if known.outcome.as_ref() != Some(&outcome) {
                self.journal_evidence(
                    now,
                    journal::KIND_DRIVE_OUTCOME_RECORDED,
                    drive_id,
                    &OutcomeRecordedEntry {
                        drive_id,
                        outcome: &outcome,
                    },
                );
                evidence.outcome = Some(outcome);
                changed = true;
            }
        }
        if changed {
            tracing::info!(
                drive_id,
                "the chat's own records of the drive are on the drive and in the journal"
            );
            if let Some(drive) = self.drives.get_mut(drive_id) {
                drive.evidence = Some(evidence);
            }
            self.publish_drive(drive_id);
        }
    }

    /// Appends an evidence entry of a drive (a failed write is logged by the journal).
    fn journal_evidence<F: Serialize>(&mut self, now: u64, kind: &str, drive_id: &str, fields: &F) {
        if let Some(journal) = self.journal.as_mut() {
            let _ = journal.append_for(now, kind, Some(drive_id), fields, None, None);
        }
    }
}

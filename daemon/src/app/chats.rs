//! Chats and correlation: what the chat-store observers report, matched to the drives that caused it (prompt seen, reply, outcome), and what the window's plugin says about its chat after a submit; a chat that is busy holds the next drive.

use koru_protocol::{ChatState, DriveState, StreamEvent};

use crate::clock::Clock;

use super::{App, PLUGIN_OBSERVATION_STORE};

/// How long after a drive is created its prompt may show up in a chat store and still be
/// matched to it.
pub(super) const CORRELATION_WINDOW_MS: u64 = 120_000;

/// An observed chat counts as busy (replying, needs input) only if it was active this
/// recently.
pub(super) const OBSERVED_BUSY_MS: u64 = 300_000;

/// The longest a chat counts as busy after a `chat_running` submit without an outcome
/// from its plugin.
pub(super) const CHAT_RUNNING_BUSY_MS: u64 = 600_000;

/// How far along a chat's handling of a prompt an observed stage is; later stages win.
pub(super) fn observed_rank(stage: koru_protocol::ObservedStage) -> u8 {
    use koru_protocol::ObservedStage;
    match stage {
        ObservedStage::Ambiguous => 0,
        ObservedStage::Observed => 1,
        ObservedStage::Replying => 2,
        ObservedStage::NeedsInput => 3,
        ObservedStage::Replied | ObservedStage::Cancelled | ObservedStage::Failed => 4,
    }
}

/// Merges a stage reported by a second source (the plugin, or a store) into a drive's
/// observation: a stage only moves forward, an excerpt or detail fills what was missing.
/// Returns whether anything changed (so each fact is published once).
pub(super) fn merge_observation(
    found: &mut koru_protocol::DriveObservation,
    stage: koru_protocol::ObservedStage,
    excerpt: Option<String>,
    length: Option<usize>,
    detail: Option<String>,
    at_ms: u64,
) -> bool {
    let mut changed = false;
    if observed_rank(stage) > observed_rank(found.stage) {
        // A new stage: what was said about the old one (a question's detail) goes with it.
        found.stage = stage;
        found.at_ms = at_ms;
        found.detail = None;
        changed = true;
    }
    if found.stage == stage {
        if found.reply_excerpt.is_none() && excerpt.is_some() {
            found.reply_excerpt = excerpt;
            changed = true;
        }
        if found.reply_length.is_none() && length.is_some() {
            found.reply_length = length;
            changed = true;
        }
        if found.detail.is_none() && detail.is_some() {
            found.detail = detail;
            changed = true;
        }
    }
    changed
}

impl<C: Clock> App<C> {
    /// Chats restored from the observers' summary cache, by the file each was read from:
    /// into the chats table as history (a row the table already holds from something
    /// newer is kept). The rows are moved in, not copied.
    pub(super) fn on_chats_restored(
        &mut self,
        files: Vec<(
            std::sync::Arc<std::path::Path>,
            Vec<koru_protocol::ChatInfo>,
        )>,
        more: usize,
    ) {
        // A file holds one chat, most often: room for those still to come too, so the
        // table is sized once and not rebuilt as it doubles.
        self.chats
            .reserve(files.iter().map(|(_, chats)| chats.len()).sum::<usize>() + more);
        for (source, chats) in files {
            for chat in chats {
                self.chats.restore(chat, &source);
            }
        }
    }

    /// Applies observations to the chats table and publishes them (unless replayed history).
    pub(super) fn on_observed(
        &mut self,
        events: Vec<koru_protocol::ObservedEvent>,
        replay: bool,
        source: Option<std::path::PathBuf>,
    ) {
        use koru_protocol::ObservedKind;
        // Reported by a client (a terminal agent's hook), not read from a store file.
        let source_was_none = source.is_none();
        // The file they were read from, for each chat in them: where `chat.read` reads it.
        let source: Option<std::sync::Arc<std::path::Path>> =
            source.map(|source| std::sync::Arc::from(source.as_path()));
        for observation in events {
            let key = (observation.store.clone(), observation.chat_id.clone());
            if let Some(process) = &observation.process {
                // A terminal agent's hook said where this chat's agent runs.
                self.chat_process.insert(key.clone(), process.clone());
            }
            // The same end reported again (the transcript's end record and the Stop hook)
            // is not news.
            let repeated = match observation.event {
                ObservedKind::ReplyCompleted { .. } => !self.chat_completed.insert(key),
                ObservedKind::ChatSeen | ObservedKind::Activity | ObservedKind::Unknown => false,
                _ => {
                    self.chat_completed.remove(&key);
                    false
                }
            };
            let row =
                self.chats
                    .row_or_insert_with(&observation.store, &observation.chat_id, || {
                        crate::observe::new_chat_row(&observation)
                    });
            if let Some(source) = &source {
                row.source = Some(source.clone());
            }
            if repeated {
                continue;
            }
            let chat = &mut row.info;
            crate::observe::apply_to_chat_row(chat, &observation);
            if !replay {
                self.correlate(&observation, source_was_none);
                self.publish(StreamEvent::Observed { observation });
            }
        }
        // Chats that became idle let their windows' queued drives go.
        let now = self.clock.now_ms();
        let waiting: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.active_drive.is_none() && !s.queued_drives.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        for session_id in waiting {
            self.pump(&session_id, now);
        }
        self.pump_agents(now);
    }

    /// Matches a recorded prompt to the drive that sent it (same normalized text, a drive
    /// created at most `CORRELATION_WINDOW_MS` before, the chat's workspace among the
    /// target's folders), and carries the chat's later events onto that drive. Two or
    /// more candidates: none is claimed; each is marked `ambiguous`.
    pub(super) fn correlate(&mut self, observation: &koru_protocol::ObservedEvent, reported: bool) {
        use koru_protocol::{DriveObservation, ObservedKind, ObservedStage};
        let key = (observation.store.clone(), observation.chat_id.clone());
        let at_ms = observation.store_ts_ms.unwrap_or(observation.seen_at_ms);
        if let ObservedKind::PromptSeen { digest, .. } = &observation.event {
            let seen = observation.seen_at_ms;
            let workspace = observation.workspace.as_deref().map(std::path::Path::new);
            let candidates: Vec<String> = self
                .drives
                .iter()
                // A drive whose only observation so far came from its plugin can still be
                // found in the store (which then names the chat and gives the reply text).
                .filter(|d| {
                    d.observation
                        .as_ref()
                        .is_none_or(|o| o.store == PLUGIN_OBSERVATION_STORE)
                        && &d.prompt_digest == digest
                })
                .filter(|d| d.state != DriveState::Queued)
                .filter(|d| {
                    d.created_at_ms <= seen.saturating_add(1_000)
                        && seen.saturating_sub(d.created_at_ms) <= CORRELATION_WINDOW_MS
                })
                .filter(|d| {
                    d.workspaces.is_empty()
                        || workspace.is_none_or(|w| {
                            d.workspaces
                                .iter()
                                .any(|f| w.starts_with(f) || std::path::Path::new(f).starts_with(w))
                        })
                })
                .map(|d| d.drive_id.clone())
                .collect();
            let stage = if candidates.len() == 1 {
                ObservedStage::Observed
            } else {
                ObservedStage::Ambiguous
            };
            let detail = (candidates.len() > 1).then(|| {
                format!(
                    "the prompt seen in {} chat {} matches {} drives: {}",
                    observation.store,
                    observation.chat_id,
                    candidates.len(),
                    candidates.join(", ")
                )
            });
            for drive_id in &candidates {
                if let Some(found) = self
                    .drives
                    .get_mut(drive_id)
                    .and_then(|d| d.observation.as_mut())
                {
                    // Already followed through the plugin: the store names the chat; the
                    // stage the plugin reported stays (it is as far or further).
                    if stage == ObservedStage::Observed {
                        found.store = observation.store.clone();
                        found.chat_id = observation.chat_id.clone();
                        self.publish_drive(drive_id);
                    }
                    continue;
                }
                if let Some(drive) = self.drives.get_mut(drive_id) {
                    drive.observation = Some(DriveObservation {
                        store: observation.store.clone(),
                        chat_id: observation.chat_id.clone(),
                        stage,
                        basis: observation.basis,
                        at_ms,
                        reply_excerpt: None,
                        reply_length: None,
                        detail: detail.clone(),
                    });
                }
                self.publish_drive(drive_id);
            }
            if candidates.len() == 1 {
                tracing::info!(drive_id = %candidates[0], chat = %observation.chat_id, "prompt observed in the chat's history");
                self.chat_drive.insert(key, candidates[0].clone());
                // A terminal agent's own record of the prompt proves the drive submitted.
                let now = self.clock.now_ms();
                self.agent_recorded(&candidates[0], reported, now);
            } else if !candidates.is_empty() {
                tracing::warn!(
                    detail = detail.as_deref().unwrap_or(""),
                    "ambiguous prompt observation; no drive claimed"
                );
                self.chat_drive.remove(&key);
            } else {
                // The same prompt seen again by a second source (an agent's hook, then its
                // transcript) keeps the chat's drive; another prompt ends its claim.
                let same_prompt = self
                    .chat_drive
                    .get(&key)
                    .and_then(|drive_id| self.drives.get(drive_id))
                    .is_some_and(|drive| &drive.prompt_digest == digest);
                if !same_prompt {
                    self.chat_drive.remove(&key);
                }
            }
            return;
        }
        let Some(drive_id) = self.chat_drive.get(&key).cloned() else {
            return;
        };
        let Some(drive) = self.drives.get_mut(&drive_id) else {
            return;
        };
        let Some(found) = drive.observation.as_mut() else {
            return;
        };
        if observation.event == ObservedKind::ReplyResumed {
            // The chat went on after an end Koru had inferred: that end is taken back.
            let inferred_end = found.basis == koru_protocol::ObservationBasis::Inferred
                && matches!(
                    found.stage,
                    ObservedStage::Replied | ObservedStage::Cancelled | ObservedStage::Failed
                );
            if inferred_end {
                found.stage = ObservedStage::Replying;
                found.basis = koru_protocol::ObservationBasis::Explicit;
                found.reply_excerpt = None;
                found.reply_length = None;
                found.detail = None;
                found.at_ms = at_ms;
                self.publish_drive(&drive_id);
            }
            return;
        }
        let (stage, excerpt, length, detail) = match &observation.event {
            ObservedKind::ReplyStarted => (ObservedStage::Replying, None, None, None),
            ObservedKind::ReplyCompleted { excerpt, length } => (
                ObservedStage::Replied,
                Some(excerpt.clone()),
                Some(*length),
                None,
            ),
            ObservedKind::NeedsInput { .. } => (ObservedStage::NeedsInput, None, None, None),
            ObservedKind::Cancelled => (ObservedStage::Cancelled, None, None, None),
            ObservedKind::Failed { reason } => {
                (ObservedStage::Failed, None, None, Some(reason.clone()))
            }
            ObservedKind::ChatSeen
            | ObservedKind::PromptSeen { .. }
            | ObservedKind::ReplyResumed
            | ObservedKind::Activity
            | ObservedKind::Unknown => return,
        };
        // A chat goes back from "needs input" to replying once the user answers; otherwise
        // stages only move forward, and what both the plugin and the store report counts
        // once.
        let changed =
            if found.stage == ObservedStage::NeedsInput && stage == ObservedStage::Replying {
                found.stage = stage;
                found.at_ms = at_ms;
                true
            } else {
                merge_observation(found, stage, excerpt, length, detail, at_ms)
            };
        if changed {
            found.basis = observation.basis;
        }
        // An end the chat recorded releases the chat's claim; an inferred one keeps it
        // until the next prompt, so that the turn going on after all (`reply_resumed`)
        // reaches the drive.
        if found.basis == koru_protocol::ObservationBasis::Explicit
            && matches!(
                found.stage,
                ObservedStage::Replied | ObservedStage::Cancelled | ObservedStage::Failed
            )
        {
            self.chat_drive.remove(&key);
        }
        if changed {
            self.publish_drive(&drive_id);
        }
    }

    /// Whether an observed chat in one of the session's workspace folders is replying or
    /// waiting for input (seen active within `OBSERVED_BUSY_MS`, so a chat whose end was
    /// never recorded cannot hold drives back for ever).
    pub(super) fn observed_busy(&self, session_id: &str, now: u64) -> Option<String> {
        use koru_protocol::ObservedChatState;
        let session = self.sessions.get(session_id)?;
        let folders = &session.window.workspace_folders;
        self.chats
            .values()
            .filter(|c| {
                matches!(
                    c.state,
                    ObservedChatState::Replying | ObservedChatState::NeedsInput
                )
            })
            .filter(|c| now.saturating_sub(c.last_activity_ms) < OBSERVED_BUSY_MS)
            .find(|c| {
                c.workspace.as_ref().is_some_and(|w| {
                    folders
                        .iter()
                        .any(|f| std::path::Path::new(w).starts_with(f))
                })
            })
            .map(|c| c.chat_id.clone())
    }

    /// What the chat did with a drive's request after the plugin acked `submitted`, as the
    /// chat told the plugin: carried onto the drive's `observation` (merged with what the
    /// chat-store observers see, each fact published once) and onto the chat's state.
    pub(super) fn on_chat_outcome(
        &mut self,
        session_id: &str,
        drive_id: &str,
        outcome: koru_protocol::ChatOutcome,
        now: u64,
    ) {
        use koru_protocol::{ChatOutcome, DriveObservation, ObservationBasis, ObservedStage};
        let Some(drive) = self.drives.get_mut(drive_id) else {
            tracing::debug!(session_id, drive_id, "chat outcome for an unknown drive");
            return;
        };
        if drive.session_id != session_id || drive.submit_evidence.is_none() {
            tracing::warn!(
                session_id,
                drive_id,
                "chat outcome for a drive this session did not submit; ignored"
            );
            return;
        }
        let (stage, excerpt, length, detail) = match outcome {
            ChatOutcome::ReplyCompleted { excerpt, length } => {
                (ObservedStage::Replied, excerpt, length, None)
            }
            ChatOutcome::NeedsInput { input, detail } => (
                ObservedStage::NeedsInput,
                None,
                None,
                Some(detail.unwrap_or_else(|| {
                    format!("the chat waits for the user ({input:?})").to_lowercase()
                })),
            ),
            ChatOutcome::Failed { detail } => (ObservedStage::Failed, None, None, Some(detail)),
            ChatOutcome::Cancelled => (ObservedStage::Cancelled, None, None, None),
            ChatOutcome::Unknown => return,
        };
        let changed = match drive.observation.as_mut() {
            None => {
                drive.observation = Some(DriveObservation {
                    store: PLUGIN_OBSERVATION_STORE.into(),
                    chat_id: session_id.to_string(),
                    stage,
                    basis: ObservationBasis::Explicit,
                    at_ms: now,
                    reply_excerpt: excerpt,
                    reply_length: length,
                    detail,
                });
                true
            }
            Some(found) => merge_observation(found, stage, excerpt, length, detail, now),
        };
        if let Some(session) = self.sessions.get_mut(session_id) {
            session.chat = if stage == ObservedStage::NeedsInput {
                ChatState::Busy
            } else {
                ChatState::Idle
            };
            // A chat waiting for the user is busy until its next outcome, bounded like a
            // running answer: the plugin cannot see the user answer in the chat.
            session.chat_running_since_ms = (stage == ObservedStage::NeedsInput).then_some(now);
        }
        if changed {
            tracing::info!(drive_id, stage = ?stage, "the chat reported the drive's outcome through the plugin");
            self.publish_drive(drive_id);
        }
        if let Some(session) = self.sessions.get(session_id) {
            let info = session.info();
            self.publish(StreamEvent::SessionUpdated { session: info });
        }
        self.pump(session_id, now);
    }
}

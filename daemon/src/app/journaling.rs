//! The state machine's side of the drive journal: who asked (door, client, pid, uid), the entries for drives, sessions, recoveries and registry reloads, history answers from the journal's index, and `journal.verify`.

use koru_protocol::{
    Blocker, DriveInfo, DriveObservation, DriveOptions, DriveState, DrivesList, DrivesListResult,
    Envelope, ErrorCode, ErrorMessage, JournalVerifyResult, Message, RequestId, Route,
    RouteAttempt, SubmitEvidence, Target, Verification,
};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{App, ConnId};
use crate::clock::Clock;
use crate::journal::index::HistoryQuery;
use crate::journal::{self, Asker, Journal, PromptsMode};

/// Most drives one history page holds.
pub const MAX_PAGE: usize = 1_000;
/// A history page's size when the request names none.
pub const DEFAULT_PAGE: usize = 100;

/// What of a drive the journal has recorded so far; a change from it is the next entry.
#[derive(Debug, Clone, PartialEq)]
pub struct JournaledView {
    state: DriveState,
    route: Route,
    blocker: Option<Blocker>,
    /// Only the reason's code: a queued drive's detail names the drive ahead of it, which
    /// changes as the queue moves and is not worth an entry each time.
    waiting: Option<String>,
    attempts: Vec<RouteAttempt>,
    verification: Verification,
    observation: Option<DriveObservation>,
    submit_evidence: Option<SubmitEvidence>,
    /// How many of the drive's history records are on record: the next entry carries the
    /// rest (`stages`).
    history_len: usize,
    ended: bool,
}

impl JournaledView {
    fn of(drive: &super::drives::DriveRecord, ended: bool) -> JournaledView {
        JournaledView {
            state: drive.state,
            route: drive.route,
            blocker: drive.blocker.clone(),
            waiting: drive.waiting.as_ref().map(|w| w.code.clone()),
            attempts: drive.attempts.clone(),
            verification: drive.verification,
            observation: drive.observation.clone(),
            submit_evidence: drive.submit_evidence,
            history_len: drive.history.len(),
            ended,
        }
    }
}

impl JournaledView {
    /// Whether `drive` (ended or not) is what this view recorded: compared in place, so
    /// the drive's parts are copied only when an entry is due.
    fn is_current(&self, drive: &super::drives::DriveRecord, ended: bool) -> bool {
        self.state == drive.state
            && self.route == drive.route
            && self.ended == ended
            && self.history_len == drive.history.len()
            && self.blocker == drive.blocker
            && self.waiting.as_deref() == drive.waiting.as_ref().map(|w| w.code.as_str())
            && self.attempts == drive.attempts
            && self.verification == drive.verification
            && self.observation == drive.observation
            && self.submit_evidence == drive.submit_evidence
    }
}

/// `drive_accepted`'s own fields.
#[derive(Serialize)]
/// Fields in canonical (alphabetical) order: nothing to reorder when it is sealed.
struct AcceptedEntry<'a> {
    drive_id: &'a str,
    options: &'a DriveOptions,
    prompt: journal::writer::PromptRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_of: Option<&'a str>,
    route: Route,
    session_id: &'a str,
    target: &'a Target,
}

/// The door a peer came through, from what the kernel says (its pid: the daemon's own
/// for the HTTP API, the dashboard and MCP over HTTP) and the name it gave in `hello`.
pub fn door(peer_pid: Option<u32>, daemon_pid: u32, client: &str) -> &'static str {
    match (peer_pid == Some(daemon_pid), client) {
        (true, "api") => "http_api",
        (true, "dashboard") => "dashboard",
        (true, "koru-mcp") => "mcp_http",
        (true, "koru-notification") => "notification",
        (true, _) => "daemon",
        (false, "koru-cli") => "cli",
        (false, "koru-mcp") => "mcp_stdio",
        (false, "koru-hook") => "hook",
        (false, _) => "socket",
    }
}

impl<C: Clock> App<C> {
    /// Journals what this daemon does from now on in `journal`.
    pub fn with_journal(mut self, journal: Journal) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Who is on the other end of `conn_id`.
    pub(super) fn asker(&self, conn_id: ConnId) -> Option<Asker> {
        let connection = self.connections.get(&conn_id)?;
        let client = connection
            .session_id
            .as_ref()
            .and_then(|s| self.sessions.get(s))
            .map(|s| s.client.clone())
            .unwrap_or_else(|| koru_protocol::ClientInfo {
                name: "unknown".into(),
                version: String::new(),
            });
        Some(Asker {
            door: door(connection.peer.pid, self.config.daemon_pid, &client.name).to_string(),
            client: client.name,
            version: client.version,
            pid: connection.peer.pid,
            uid: connection.peer.uid,
        })
    }

    /// Records an accepted drive (its prompt in a blob, `drive_accepted` in the chain)
    /// before anyone is told about it. An error means the drive must not go on.
    pub(super) fn journal_accepted(
        &mut self,
        drive_id: &str,
        conn_id: ConnId,
        now: u64,
    ) -> Result<(), ErrorMessage> {
        let by = self.asker(conn_id);
        let Some(journal) = self.journal.as_mut() else {
            return Ok(());
        };
        let Some(drive) = self.drives.get(drive_id) else {
            return Ok(());
        };
        let unavailable = |error: journal::JournalError| {
            ErrorMessage::new(
                ErrorCode::JournalUnavailable,
                format!("the drive was not accepted: the journal cannot record it ({error})"),
            )
        };
        let fields = AcceptedEntry {
            drive_id: &drive.drive_id,
            target: &drive.target,
            session_id: &drive.session_id,
            route: drive.route,
            options: &drive.options,
            prompt: journal.store_prompt_record(&drive.prompt),
            retry_of: drive.retry_of.as_deref(),
        };
        let excerpt =
            (journal.prompts() == PromptsMode::Full).then(|| drive.prompt_excerpt.clone());
        journal
            .append_durable(
                now,
                journal::KIND_DRIVE_ACCEPTED,
                Some(&drive.drive_id),
                &fields,
                by.as_ref(),
                excerpt,
            )
            .map_err(unavailable)?;
        let view = JournaledView::of(drive, false);
        if let Some(drive) = self.drives.get_mut(drive_id) {
            drive.journaled = Some(view);
        }
        Ok(())
    }

    /// Records what changed in a drive since its last entry: `drive_ended` at once when it
    /// has just ended, else a `drive_state` at the next tick (at most 100 ms later),
    /// folding every change until then into one entry — or into the `drive_ended`, when
    /// the drive ends first: a drive acked `received` and `submitted` within a tick is two
    /// entries, not four, its stages (with their times) in the `drive_ended`.
    pub(super) fn journal_drive(&mut self, drive_id: &str, now: u64) {
        if self.journal.is_none() {
            return;
        }
        let Some(drive) = self.drives.get_mut(drive_id) else {
            return;
        };
        let Some(last) = drive.journaled.as_ref() else {
            return;
        };
        if drive.is_terminal() && !last.ended {
            drive.journal_due = false;
            self.write_drive_entry(drive_id, now);
        } else if !drive.journal_due && !last.is_current(drive, drive.is_terminal()) {
            drive.journal_due = true;
            self.journal_due.push(drive_id.to_string());
        }
    }

    /// Writes the `drive_state` entries [`App::journal_drive`] put off (each tick, and
    /// before the journal closes).
    pub(super) fn journal_due_drives(&mut self, now: u64) {
        for drive_id in std::mem::take(&mut self.journal_due) {
            let Some(drive) = self.drives.get_mut(&drive_id) else {
                continue;
            };
            if std::mem::take(&mut drive.journal_due) {
                self.write_drive_entry(&drive_id, now);
            }
        }
    }

    /// The entry for what changed in a drive since its last one, written now: the same
    /// fields for `drive_state` and `drive_ended` ([`journal::DriveChange`]), the kind
    /// saying whether the drive has just ended.
    fn write_drive_entry(&mut self, drive_id: &str, now: u64) {
        let Some(journal) = self.journal.as_mut() else {
            return;
        };
        let Some(drive) = self.drives.get(drive_id) else {
            return;
        };
        let Some(last) = drive.journaled.as_ref() else {
            return;
        };
        let ending = drive.is_terminal() && !last.ended;
        if last.is_current(drive, drive.is_terminal()) {
            return;
        }
        let view = JournaledView::of(drive, drive.is_terminal());
        let changed = |now: bool| now.then_some(());
        // In `digest` mode no text of the chat's is kept: the reply's excerpt stays out.
        let without_text = drive
            .observation
            .as_ref()
            .filter(|o| journal.prompts() == PromptsMode::Digest && o.reply_excerpt.is_some())
            .map(|o| DriveObservation {
                reply_excerpt: None,
                ..o.clone()
            });
        let fields = journal::DriveChange {
            drive_id: &drive.drive_id,
            state: drive.state,
            route: drive.route,
            blocker: changed(view.blocker != last.blocker).map(|_| drive.blocker.as_ref()),
            waiting: changed(view.waiting != last.waiting).map(|_| drive.waiting.as_ref()),
            verification: changed(view.verification != last.verification)
                .map(|_| drive.verification),
            observation: changed(view.observation != last.observation)
                .map(|_| without_text.as_ref().or(drive.observation.as_ref())),
            submit_evidence: changed(view.submit_evidence != last.submit_evidence)
                .map(|_| drive.submit_evidence),
            attempts: view
                .attempts
                .iter()
                .enumerate()
                .filter(|(i, attempt)| last.attempts.get(*i) != Some(attempt))
                .map(|(index, attempt)| journal::IndexedAttempt { index, attempt })
                .collect(),
            stages: journal::Stages(drive.history.get(last.history_len..).unwrap_or_default()),
        };
        let kind = if ending {
            journal::KIND_DRIVE_ENDED
        } else {
            journal::KIND_DRIVE_STATE
        };
        let written = journal.append_for(now, kind, Some(&drive.drive_id), &fields, None, None);
        if written.is_ok() {
            if let Some(drive) = self.drives.get_mut(drive_id) {
                drive.journaled = Some(view);
            }
        }
    }

    /// Records an event that is not a drive's (errors are logged and shown in `status`).
    pub(super) fn journal_event(
        &mut self,
        kind: &str,
        fields: Map<String, Value>,
        by: Option<Asker>,
    ) {
        let now = self.clock.now_ms();
        if let Some(journal) = self.journal.as_mut() {
            let _ = journal.append(now, kind, &fields, by.as_ref(), None);
        }
    }

    /// A drive the daemon no longer keeps in memory, from the journal.
    pub(super) fn drive_from_history(&self, drive_id: &str) -> Option<DriveInfo> {
        self.journal.as_ref()?.index().get(drive_id)
    }

    /// `drives.list`: memory alone, or with `history` a page of the journal's drives
    /// (memory's view wins for the drives it still holds).
    pub(super) fn list_drives(&mut self, filter: &DrivesList) -> DrivesListResult {
        if filter.history {
            // The index takes entries in batches: let it catch up with what was written.
            if let Some(journal) = self.journal.as_mut() {
                journal.flush_index();
            }
        }
        let matches = |d: &DriveInfo| {
            filter
                .session_id
                .as_ref()
                .is_none_or(|s| &d.session_id == s)
                && (!filter.active_only || !d.state.is_terminal())
                && filter.since_ms.is_none_or(|since| d.created_at_ms >= since)
        };
        let limit = filter.limit.map(|l| (l as usize).clamp(1, MAX_PAGE));
        let memory: Vec<DriveInfo> = self.drives.iter().map(|d| d.info()).collect();
        let journal = self.journal.as_ref().filter(|_| filter.history);
        let Some(journal) = journal else {
            // Memory only (oldest first); `before` and `limit` page through it.
            let mut drives: Vec<DriveInfo> = memory.into_iter().filter(|d| matches(d)).collect();
            if let Some(before) = &filter.before {
                match drives.iter().position(|d| &d.drive_id == before) {
                    Some(at) => drives.truncate(at),
                    None => drives.clear(),
                }
            }
            let more = limit.is_some_and(|l| drives.len() > l);
            if let Some(limit) = limit {
                let skip = drives.len().saturating_sub(limit);
                drives.drain(..skip);
            }
            return DrivesListResult { drives, more };
        };
        let limit = limit.unwrap_or(DEFAULT_PAGE);
        let (mut drives, more) = journal.index().list(&HistoryQuery {
            session_id: filter.session_id.clone(),
            active_only: filter.active_only,
            before: filter.before.clone(),
            since_ms: filter.since_ms,
            limit,
        });
        // Memory's copy is the live one (the index has every accepted drive: it was
        // flushed above, in acceptance order).
        for drive in drives.iter_mut() {
            if let Some(live) = self.drives.get(&drive.drive_id) {
                *drive = live.info();
            }
        }
        drives.retain(|d| matches(d));
        DrivesListResult { drives, more }
    }

    /// `journal.verify`: checked on a thread of its own (a long journal takes seconds),
    /// answered from there.
    pub(super) fn on_journal_verify(&mut self, conn_id: ConnId, id: Option<RequestId>) {
        let Some(journal) = self.journal.as_ref() else {
            self.send_error(
                conn_id,
                id,
                ErrorMessage::new(
                    ErrorCode::JournalUnavailable,
                    "this daemon keeps no journal (started with --no-journal)",
                ),
            );
            return;
        };
        let Some(connection) = self.connections.get(&conn_id) else {
            return;
        };
        let outbound = connection.handle.outbound.clone();
        let dir = journal.dir().to_path_buf();
        let key = match journal.sealer() {
            journal::canonical::Sealer::Hmac(key) => Some(key.clone()),
            journal::canonical::Sealer::Sha256 => None,
        };
        std::thread::Builder::new()
            .name("koru-journal-verify".into())
            .spawn(move || {
                let report = journal::verify::verify(&dir, key.as_deref());
                let reply = Envelope::with_id(
                    id,
                    Message::JournalVerifyResult(JournalVerifyResult { report }),
                );
                let _ = outbound.blocking_send(super::encode(&reply));
            })
            .expect("a thread can be started");
    }

    /// Records `daemon_stopped` and flushes the journal to the disk.
    pub(super) fn close_journal(&mut self, reason: &str) {
        let now = self.clock.now_ms();
        self.journal_due_drives(now);
        let mut fields = Map::new();
        fields.insert("reason".into(), json!(reason));
        if let Some(mut journal) = self.journal.take() {
            let _ = journal.append(now, journal::KIND_DAEMON_STOPPED, &fields, None, None);
            journal.close();
        }
    }
}

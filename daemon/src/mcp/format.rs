//! Compact text for MCP tool results: a controller LLM pays for every token, so sessions are one line of facts each and a drive is a few lines — state, route, furthest stage, blockers with hints.

use koru_protocol::{AttemptOutcome, DriveInfo, DriveState, SessionInfo};
use koru_registry::Interface;

/// One line per plugin session: `id product version [focused] [busy] folders… (drives: n queued)`.
/// The sessions' text followed by the terminal agents' lines, if any.
pub fn with_agents(mut text: String, agents: &[String]) -> String {
    if !agents.is_empty() {
        text.push_str("\nterminal agents:");
        for line in agents {
            text.push('\n');
            text.push_str(line);
        }
    }
    text
}

pub fn sessions(sessions: &[SessionInfo]) -> String {
    let plugins: Vec<&SessionInfo> = sessions
        .iter()
        .filter(|s| s.role == koru_protocol::Role::Plugin)
        .collect();
    if plugins.is_empty() {
        return "no IDE windows are connected".into();
    }
    plugins
        .iter()
        .map(|session| {
            let mut line = session.session_id.clone();
            if let Some(ide) = &session.ide {
                line.push_str(&format!(" {} {}", ide.product, ide.version));
            }
            if session.window.focused == Some(true) {
                line.push_str(" focused");
            }
            match session.chat {
                koru_protocol::ChatState::Busy => line.push_str(" chat:busy"),
                koru_protocol::ChatState::Idle => line.push_str(" chat:idle"),
                koru_protocol::ChatState::Unknown => {}
            }
            if session.health == koru_protocol::SessionHealth::Stale {
                line.push_str(" stale");
            }
            for folder in &session.window.workspace_folders {
                line.push(' ');
                line.push_str(folder);
            }
            if session.active_drive.is_some() || session.queued_drives > 0 {
                line.push_str(&format!(
                    " (drive running{})",
                    if session.queued_drives > 0 {
                        format!(", {} queued", session.queued_drives)
                    } else {
                        String::new()
                    }
                ));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The furthest delivery stage in a drive's history.
pub fn furthest_stage(drive: &DriveInfo) -> DriveState {
    drive
        .history
        .iter()
        .map(|record| record.state)
        .filter(|state| !state.is_terminal())
        .max_by_key(|state| state.rank())
        .unwrap_or(DriveState::Queued)
}

/// Where an observation comes from: `STORE chat ID`, or the window's chat through its plugin.
pub fn observation_place(o: &koru_protocol::DriveObservation) -> String {
    if o.is_from_plugin() {
        "the window's chat (through its plugin)".to_string()
    } else {
        format!("{} chat {}", o.store, o.chat_id)
    }
}

/// Steps listed one per line in a turn's text; the rest are counted (the structured
/// content has them all).
const STEPS_LISTED: usize = 30;

/// A turn read back from its store, for the LLM: what the agent did (its steps) and its
/// whole reply (or the page asked for, with how to ask for the rest). `again` names the
/// chat or drive for the next page's call (`drive_id=d_…` or `chat_id=…`).
pub fn turn(
    read: &koru_protocol::ChatReadResult,
    turn: &koru_protocol::ChatTurn,
    again: &str,
) -> String {
    let mut text = format!(
        "reply ({} chars) in {} chat {}, turn {} ({})",
        turn.reply_chars,
        read.store,
        read.chat_id,
        turn.index,
        turn.state.as_str()
    );
    if let Some(model) = &turn.model {
        text.push_str(&format!(", model {model}"));
    }
    if let Some(error) = &turn.error {
        text.push_str(&format!("\nfailed: {error}"));
    }
    if !turn.steps.is_empty() {
        text.push_str(&format!("\nsteps ({}):", turn.steps.len()));
        for step in turn.steps.iter().take(STEPS_LISTED) {
            text.push_str("\n- ");
            text.push_str(&crate::conversation::step_line(step));
        }
        if turn.steps.len() > STEPS_LISTED {
            text.push_str(&format!(
                "\n- … and {} more (the structured content lists every step)",
                turn.steps.len() - STEPS_LISTED
            ));
        }
    }
    if !read.not_recorded.is_empty() {
        text.push_str(&format!(
            "\n(this store does not record: {})",
            read.not_recorded.join(", ")
        ));
    }
    match &turn.reply {
        Some(reply) => {
            if turn.reply_offset > 0 || turn.reply_next_offset.is_some() {
                let end = turn.reply_offset + reply.chars().count() as u64;
                text.push_str(&format!(
                    "\nreply characters {}–{} of {}:",
                    turn.reply_offset, end, turn.reply_chars
                ));
            } else {
                text.push_str("\nreply:");
            }
            text.push('\n');
            text.push_str(reply);
        }
        None => text.push_str("\n(no reply text yet)"),
    }
    if let Some(next) = turn.reply_next_offset {
        text.push_str(&format!(
            "\n(the reply goes on: call read_chat with {again}, turn={}, reply_offset={next})",
            turn.index
        ));
    }
    text
}

/// A completed reply in one line: its length and start, or that the chat gave no text.
pub fn reply_line(o: &koru_protocol::DriveObservation) -> String {
    match &o.reply_excerpt {
        Some(excerpt) => format!(
            "reply ({} chars) in {}: {excerpt}",
            o.reply_length.unwrap_or(excerpt.chars().count()),
            observation_place(o)
        ),
        None => format!(
            "reply finished in {} (the chat gives plugins no reply text; get_drive shows it once the chat's history store has it)",
            observation_place(o)
        ),
    }
}

/// A drive in a few lines: `drive ID STATE: reached STAGE by ROUTE (INTERFACE)`, then the
/// blocker and each route that did not work, with its hint.
pub fn drive(drive: &DriveInfo) -> String {
    let reached = furthest_stage(drive);
    let interface = drive
        .attempts
        .iter()
        .rev()
        .find(|a| {
            matches!(
                a.outcome,
                AttemptOutcome::Running | AttemptOutcome::Succeeded | AttemptOutcome::Failed
            )
        })
        .map(|a| a.interface.as_str());
    let mut text = format!(
        "drive {} {}: reached {} by {}",
        drive.drive_id,
        drive.state.as_str(),
        reached.as_str(),
        drive.route.as_str()
    );
    if let Some(interface) = interface {
        text.push_str(&format!(" ({interface})"));
    }
    text.push_str(&format!(" in session {}", drive.session_id));
    if let (Some(finished), created) = (drive.finished_at_ms, drive.created_at_ms) {
        text.push_str(&format!(", {} ms", finished.saturating_sub(created)));
    }
    if let Some(evidence) = drive.submit_evidence {
        text.push_str(&format!("\nsubmitted on evidence {}", evidence.as_str()));
    }
    if let Some(waiting) = &drive.waiting {
        text.push_str(&format!("\nwaiting {}: {}", waiting.code, waiting.detail));
    }
    if let Some(blocker) = &drive.blocker {
        text.push_str(&format!("\nblocker {}: {}", blocker.code, blocker.detail));
    }
    if let Some(observed) = &drive.observation {
        let stage = serde_json::to_value(observed.stage)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        if observed.is_from_plugin() {
            text.push_str(&format!("\nchat (via plugin): {stage}"));
        } else {
            text.push_str(&format!(
                "\nchat history: {stage} in chat {}",
                observed.chat_id
            ));
        }
        if let Some(excerpt) = &observed.reply_excerpt {
            text.push_str(&format!(
                " — reply ({} chars): {excerpt}",
                observed.reply_length.unwrap_or(0)
            ));
        }
        if let Some(detail) = &observed.detail {
            text.push_str(&format!(" ({detail})"));
        }
    }
    for line in drive
        .evidence
        .iter()
        .flat_map(|e| crate::conversation::evidence_lines(e))
    {
        text.push('\n');
        text.push_str(&line);
    }
    for attempt in &drive.attempts {
        if let Some(note) = &attempt.note {
            text.push_str(&format!(
                "\n- {} {}: {note}",
                attempt.route.as_str(),
                attempt.interface
            ));
        }
        if matches!(
            attempt.outcome,
            AttemptOutcome::Succeeded | AttemptOutcome::Running
        ) {
            continue;
        }
        let Some(blocker) = &attempt.blocker else {
            continue;
        };
        text.push_str(&format!(
            "\n- {} {} {}: {}: {}",
            attempt.route.as_str(),
            attempt.interface,
            outcome_word(attempt.outcome),
            blocker.code,
            blocker.detail
        ));
        if let Some(hint) = &attempt.hint {
            text.push_str(&format!(" — fix: {hint}"));
        }
    }
    text
}

fn outcome_word(outcome: AttemptOutcome) -> &'static str {
    match outcome {
        AttemptOutcome::Running => "running",
        AttemptOutcome::Succeeded => "succeeded",
        AttemptOutcome::Failed => "failed",
        AttemptOutcome::Skipped => "skipped",
        AttemptOutcome::NotTried => "not tried",
    }
}

/// One line per interface: `id family direction [route] authority — description`.
pub fn interfaces<'a>(interfaces: impl IntoIterator<Item = &'a Interface>) -> String {
    let lines: Vec<String> = interfaces
        .into_iter()
        .map(|interface| {
            let route = interface
                .route
                .map(|r| format!(" route:{}", r.as_str()))
                .unwrap_or_default();
            let disabled = if interface.enabled { "" } else { " (disabled)" };
            format!(
                "{} {} {}{} {}{} — {}",
                interface.id,
                interface.family.as_str(),
                interface.direction.as_str(),
                route,
                interface.authority.as_str(),
                disabled,
                interface.description
            )
        })
        .collect();
    if lines.is_empty() {
        "no interfaces match".into()
    } else {
        lines.join("\n")
    }
}

/// The doctor report in a few lines: the verdict, the counts, then each interface that is
/// degraded or unavailable with its blocker and first recovery hint.
pub fn doctor_summary(report: &crate::doctor::DoctorReport) -> String {
    use crate::doctor::Status;
    let summary = &report.summary;
    let mut text = format!(
        "{} (ok {}, degraded {}, unavailable {}, not applicable {}; sessions with a drive path: {})",
        summary.verdict,
        summary.ok,
        summary.degraded,
        summary.unavailable,
        summary.not_applicable,
        summary.sessions_with_a_drive_path
    );
    if !report.daemon.running {
        text.push_str(&format!("\ndaemon not running at {}", report.daemon.socket));
    }
    for check in &report.interfaces {
        if !matches!(check.status, Status::Degraded | Status::Unavailable) {
            continue;
        }
        text.push_str(&format!("\n- {} {}", check.id, check.status.as_str()));
        if let Some(blocker) = &check.blocker {
            text.push_str(&format!(": {}: {}", blocker.code, blocker.detail));
        }
        if let Some(recovery) = check.recovery.first() {
            text.push_str(&format!(" — fix: {}: {}", recovery.label, recovery.does));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn drive_from(value: serde_json::Value) -> DriveInfo {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_drive_that_fell_back_shows_the_route_used_and_why_the_first_did_not_work() {
        let drive = drive_from(serde_json::json!({
            "drive_id": "d_1", "target": "focused", "session_id": "s_9", "route": "plugin_drive",
            "options": {"submit": true}, "state": "done", "created_at_ms": 1000, "finished_at_ms": 1420,
            "prompt_chars": 5, "prompt_excerpt": "hello",
            "history": [
                {"state": "queued", "at_ms": 1000}, {"state": "sent", "at_ms": 1001},
                {"state": "received", "at_ms": 1100}, {"state": "pasted", "at_ms": 1300},
                {"state": "submitted", "at_ms": 1400}, {"state": "done", "at_ms": 1420}],
            "attempts": [
                {"route": "native_send", "interface": "cursor_native", "outcome": "skipped",
                 "blocker": {"code": "capability_missing", "detail": "no command"}, "hint": "Update Cursor: newer builds have it"},
                {"route": "plugin_drive", "interface": "cursor_plugin_drive", "outcome": "succeeded", "reached": "submitted"}]
        }));
        expect![[r#"
            drive d_1 done: reached submitted by plugin_drive (cursor_plugin_drive) in session s_9, 420 ms
            - native_send cursor_native skipped: capability_missing: no command — fix: Update Cursor: newer builds have it"#]]
        .assert_eq(&super::drive(&drive));
    }

    #[test]
    fn a_failed_drive_names_its_blocker() {
        let drive = drive_from(serde_json::json!({
            "drive_id": "d_2", "target": {"workspace": "/w"}, "session_id": "s_1", "route": "native_send",
            "options": {"submit": true}, "state": "failed", "created_at_ms": 0,
            "prompt_chars": 1, "prompt_excerpt": "x",
            "history": [{"state": "queued", "at_ms": 0}, {"state": "sent", "at_ms": 1}, {"state": "failed", "at_ms": 2}],
            "blocker": {"code": "plugin_disconnected", "detail": "the window closed"}
        }));
        expect![[r#"
            drive d_2 failed: reached sent by native_send in session s_1
            blocker plugin_disconnected: the window closed"#]]
        .assert_eq(&super::drive(&drive));
    }

    #[test]
    fn a_drive_shows_what_proves_it_was_submitted_and_what_the_chat_said_through_the_plugin() {
        let drive = drive_from(serde_json::json!({
            "drive_id": "d_3", "target": "focused", "session_id": "s_1", "route": "native_send",
            "options": {"submit": true}, "state": "done", "created_at_ms": 0, "finished_at_ms": 40,
            "prompt_chars": 1, "prompt_excerpt": "x", "submit_evidence": "chat_running",
            "history": [{"state": "queued", "at_ms": 0}, {"state": "submitted", "at_ms": 39}, {"state": "done", "at_ms": 40}],
            "observation": {"store": "plugin", "chat_id": "s_1", "stage": "needs_input", "basis": "explicit",
                "at_ms": 90, "detail": "run_in_terminal waits for approval"}
        }));
        expect![[r#"
            drive d_3 done: reached submitted by native_send in session s_1, 40 ms
            submitted on evidence chat_running
            chat (via plugin): needs_input (run_in_terminal waits for approval)"#]]
        .assert_eq(&super::drive(&drive));
    }

    #[test]
    fn a_waiting_drive_says_why() {
        let drive = drive_from(serde_json::json!({
            "drive_id": "d_4", "target": "focused", "session_id": "s_1", "route": "plugin_drive",
            "options": {"submit": true}, "state": "queued", "created_at_ms": 0,
            "prompt_chars": 1, "prompt_excerpt": "x",
            "history": [{"state": "queued", "at_ms": 0}],
            "waiting": {"code": "chat_not_ready", "detail": "waits: the window's chat cannot take a request now (signed out)"}
        }));
        expect![[r#"
            drive d_4 queued: reached queued by plugin_drive in session s_1
            waiting chat_not_ready: waits: the window's chat cannot take a request now (signed out)"#]]
        .assert_eq(&super::drive(&drive));
    }
}

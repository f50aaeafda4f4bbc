//! `koru hook claude-code`: a command for Claude Code's hooks (Notification, Stop, StopFailure) that forwards what the transcript never records — permission prompts, waiting for input — to the daemon as observations; `--print-config` prints the settings snippet that installs it.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use koru_protocol::{NeedsInputKind, ObservationBasis, ObserveReport, ObservedEvent, ObservedKind};
use serde_json::Value;

use crate::control::Controller;
use crate::observe::excerpt_and_length;
use crate::observe::stores::claude_code;

/// The observation a hook's stdin JSON means, if any. Pure, for tests.
pub fn observation_from_hook(input: &Value, now_ms: u64) -> Option<ObservedEvent> {
    let session = input.get("session_id")?.as_str()?;
    let event = match input.get("hook_event_name")?.as_str()? {
        "Notification" => {
            let kind = input.get("notification_type").and_then(Value::as_str);
            let message = input
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_lowercase();
            let input = match kind {
                Some("permission_prompt") => NeedsInputKind::Permission,
                Some("idle_prompt") | Some("elicitation_dialog") => NeedsInputKind::Question,
                Some("agent_needs_input") => NeedsInputKind::Other,
                Some(_) => return None,
                None if message.contains("permission") => NeedsInputKind::Permission,
                None if message.contains("waiting for your input") => NeedsInputKind::Question,
                None => NeedsInputKind::Other,
            };
            ObservedKind::NeedsInput { input }
        }
        "Stop" => {
            let text = input
                .get("last_assistant_message")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (excerpt, length) = excerpt_and_length(text);
            ObservedKind::ReplyCompleted { excerpt, length }
        }
        "StopFailure" => {
            let reason = ["error", "message", "reason"]
                .iter()
                .find_map(|key| input.get(*key).and_then(Value::as_str))
                .unwrap_or("the turn ended on an API error");
            ObservedKind::Failed {
                reason: excerpt_and_length(reason).0,
            }
        }
        _ => return None,
    };
    Some(ObservedEvent {
        store: claude_code::STORE.to_string(),
        chat_id: session.to_string(),
        workspace: input.get("cwd").and_then(Value::as_str).map(str::to_string),
        store_ts_ms: None,
        seen_at_ms: now_ms,
        basis: ObservationBasis::Explicit,
        event,
    })
}

/// The settings snippet for `~/.claude/settings.json`.
pub fn config_snippet(koru: &Path) -> Value {
    let command = format!("{} hook claude-code", koru.display());
    let hook =
        serde_json::json!([{"hooks": [{"type": "command", "command": command, "timeout": 5}]}]);
    serde_json::json!({"hooks": {
        "Notification": hook,
        "Stop": hook,
        "StopFailure": hook,
    }})
}

/// Runs the hook. It never fails Claude Code: problems go to stderr and the exit code is 0.
pub async fn run(socket: &Path, print_config: bool) -> anyhow::Result<ExitCode> {
    if print_config {
        let koru = std::env::current_exe().unwrap_or_else(|_| "koru".into());
        println!("{}", serde_json::to_string_pretty(&config_snippet(&koru))?);
        eprintln!(
            "koru: merge this into ~/.claude/settings.json (or a project's .claude/settings.json)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut raw = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut raw) {
        eprintln!("koru hook: cannot read the hook input: {error}");
        return Ok(ExitCode::SUCCESS);
    }
    let input: Value = match serde_json::from_str(&raw) {
        Ok(input) => input,
        Err(error) => {
            eprintln!("koru hook: the hook input is not JSON: {error}");
            return Ok(ExitCode::SUCCESS);
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let Some(observation) = observation_from_hook(&input, now) else {
        return Ok(ExitCode::SUCCESS);
    };
    let forward = async {
        let report = ObserveReport {
            observations: vec![observation],
        };
        Controller::new(socket.to_path_buf(), "koru-hook")
            .once(|c| Box::pin(c.report_observation(report)))
            .await
    };
    match tokio::time::timeout(Duration::from_secs(2), forward).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => eprintln!("koru hook: {error}"),
        Err(_) => eprintln!("koru hook: the daemon did not answer within 2 s"),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(input: Value) -> Option<Value> {
        observation_from_hook(&input, 5).map(|o| serde_json::to_value(o).unwrap())
    }

    #[test]
    fn notifications_become_needs_input_by_type_or_message() {
        let base = |extra: Value| {
            let mut v = serde_json::json!({"session_id": "s1", "cwd": "/w", "hook_event_name": "Notification",
                "transcript_path": "/h/.claude/projects/-w/s1.jsonl"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        let permission = kind(base(serde_json::json!({"notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"}))).unwrap();
        assert_eq!(permission["kind"], "needs_input");
        assert_eq!(permission["input"], "permission");
        assert_eq!(permission["chat_id"], "s1");
        assert_eq!(permission["workspace"], "/w");
        assert_eq!(permission["basis"], "explicit");
        let idle = kind(base(
            serde_json::json!({"notification_type": "idle_prompt"}),
        ))
        .unwrap();
        assert_eq!(idle["input"], "question");
        let older = kind(base(
            serde_json::json!({"message": "Claude is waiting for your input"}),
        ))
        .unwrap();
        assert_eq!(older["input"], "question");
        assert!(kind(base(
            serde_json::json!({"notification_type": "auth_success"})
        ))
        .is_none());
    }

    #[test]
    fn stop_is_a_completed_reply_and_other_events_are_ignored() {
        let stop = kind(
            serde_json::json!({"session_id": "s1", "cwd": "/w", "hook_event_name": "Stop",
            "stop_hook_active": false, "last_assistant_message": "All tests pass."}),
        )
        .unwrap();
        assert_eq!(stop["kind"], "reply_completed");
        assert_eq!(stop["excerpt"], "All tests pass.");
        let failure = kind(serde_json::json!({"session_id": "s1", "hook_event_name": "StopFailure", "error": "rate_limit"})).unwrap();
        assert_eq!(failure["kind"], "failed");
        assert_eq!(failure["reason"], "rate_limit");
        assert!(
            kind(serde_json::json!({"session_id": "s1", "hook_event_name": "PreToolUse"}))
                .is_none()
        );
        assert!(kind(serde_json::json!({"hook_event_name": "Stop"})).is_none());
    }

    #[test]
    fn the_config_snippet_runs_this_binary_for_the_three_events() {
        let snippet = config_snippet(Path::new("/usr/local/bin/koru"));
        for event in ["Notification", "Stop", "StopFailure"] {
            assert_eq!(
                snippet["hooks"][event][0]["hooks"][0]["command"],
                "/usr/local/bin/koru hook claude-code"
            );
        }
    }
}

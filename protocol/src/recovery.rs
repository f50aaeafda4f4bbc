//! Recovery actions: what an operator (dashboard, CLI, MCP) can ask the daemon to do to fix a blocked interface or drive, and the daemon's answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Blocker, DriveInfo, Route};

/// One recovery action with its parameters; on the wire `{"action": "retry_drive",
/// "params": {"drive_id": "d_…", "route": "plugin_drive"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "action", content = "params", rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Run doctor's probes again and report the verdict.
    Reprobe {},
    /// Read the registry layer files again (as SIGHUP does).
    ReloadRegistry {},
    /// Send a failed, timed-out or cancelled drive's prompt again as a new drive, by `route`
    /// (the planner's order when absent). Refused when the prompt may already have been
    /// submitted, so that a retry never duplicates a prompt.
    RetryDrive {
        drive_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<Route>,
    },
    /// Cancel a drive that has not finished.
    CancelDrive { drive_id: String },
    /// Ask a plugin to reconnect: the daemon says `bye` (reason `reconnect_requested`) and
    /// closes the connection; the plugin connects again and gets a new session.
    ReconnectPlugin { session_id: String },
    /// Raise and focus a session's IDE window (OS window activation, verified).
    FocusWindow { session_id: String },
}

impl RecoveryAction {
    /// The action's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            RecoveryAction::Reprobe {} => "reprobe",
            RecoveryAction::ReloadRegistry {} => "reload_registry",
            RecoveryAction::RetryDrive { .. } => "retry_drive",
            RecoveryAction::CancelDrive { .. } => "cancel_drive",
            RecoveryAction::ReconnectPlugin { .. } => "reconnect_plugin",
            RecoveryAction::FocusWindow { .. } => "focus_window",
        }
    }

    /// Whether doing it twice is harmless.
    pub fn safe_to_repeat(&self) -> bool {
        !matches!(self, RecoveryAction::RetryDrive { .. })
    }
}

/// Every action's wire name, in the order of [`RecoveryAction`].
pub const RECOVERY_ACTIONS: &[&str] = &[
    "reprobe",
    "reload_registry",
    "retry_drive",
    "cancel_drive",
    "reconnect_plugin",
    "focus_window",
];

/// `recovery.run` (controller → daemon).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecoveryRun {
    #[serde(flatten)]
    pub action: RecoveryAction,
}

/// `recovery.result`: what the action did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecoveryResult {
    /// The action's wire name.
    pub action: String,
    /// True when the action did what it says; false with `blocker` when it could not.
    pub ok: bool,
    /// What happened, for a person.
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<Blocker>,
    /// The drive the action made or changed (`retry_drive`, `cancel_drive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive: Option<DriveInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_line, encode_line, Envelope, Message};

    #[test]
    fn actions_travel_as_action_and_params() {
        let line = br#"{"v":1,"id":3,"type":"recovery.run","action":"retry_drive","params":{"drive_id":"d_1","route":"plugin_drive"}}"#;
        let envelope = decode_line(line).unwrap();
        let Message::RecoveryRun(run) = &envelope.message else {
            panic!("{envelope:?}")
        };
        assert_eq!(
            run.action,
            RecoveryAction::RetryDrive {
                drive_id: "d_1".into(),
                route: Some(Route::PluginDrive)
            }
        );
        let again = decode_line(encode_line(&envelope).trim_ascii_end()).unwrap();
        assert_eq!(again, envelope);
        let bare = decode_line(br#"{"v":1,"type":"recovery.run","action":"reprobe","params":{}}"#)
            .unwrap();
        assert_eq!(
            bare.message,
            Message::RecoveryRun(RecoveryRun {
                action: RecoveryAction::Reprobe {}
            })
        );
        let names: Vec<&str> = [
            RecoveryAction::Reprobe {},
            RecoveryAction::ReloadRegistry {},
            RecoveryAction::RetryDrive {
                drive_id: String::new(),
                route: None,
            },
            RecoveryAction::CancelDrive {
                drive_id: String::new(),
            },
            RecoveryAction::ReconnectPlugin {
                session_id: String::new(),
            },
            RecoveryAction::FocusWindow {
                session_id: String::new(),
            },
        ]
        .iter()
        .map(|a| {
            let json = serde_json::to_value(a).unwrap();
            assert_eq!(json["action"], a.name());
            a.name()
        })
        .collect();
        assert_eq!(names, RECOVERY_ACTIONS);
        let _ = Envelope::new(Message::RecoveryRun(RecoveryRun {
            action: RecoveryAction::Reprobe {},
        }));
    }
}

//! The recovery actions as the dashboard offers them (`GET /api/v1/recovery`): a label, what each does, whether it is safe to repeat, and its parameters — one static table, checked against the protocol's list of actions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One parameter of a recovery action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActionParam {
    pub name: String,
    pub required: bool,
    pub description: String,
}

/// One recovery action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActionInfo {
    /// The action's wire name (`recovery.run`'s `action`).
    pub id: String,
    /// A short label for a button.
    pub label: String,
    /// What it does, in one sentence.
    pub does: String,
    /// Whether doing it twice is harmless.
    pub safe_to_repeat: bool,
    pub params: Vec<ActionParam>,
}

/// `GET /api/v1/recovery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActionList {
    pub actions: Vec<ActionInfo>,
}

/// `(name, required, description)`.
type Param = (&'static str, bool, &'static str);

const DRIVE_ID: Param = ("drive_id", true, "the drive's id (d_…)");
const SESSION_ID: Param = ("session_id", true, "the plugin session's id (s_…)");
const ROUTE: Param = (
    "route",
    false,
    "native_send, plugin_drive or os_injection; the planner's order when absent",
);

/// `(id, label, does, safe_to_repeat, params)`, in the protocol's order.
const TABLE: &[(&str, &str, &str, bool, &[Param])] = &[
    (
        "reprobe",
        "Check again",
        "Runs doctor's probes again and reports the verdict.",
        true,
        &[],
    ),
    (
        "reload_registry",
        "Reload the registry",
        "Reads the registry layer files again, as SIGHUP does; a layer with errors is left out and the previous registry kept.",
        true,
        &[],
    ),
    (
        "retry_drive",
        "Retry",
        "Sends a failed, timed-out or cancelled drive's prompt again as a new drive; refused while the drive runs or when its prompt may already have been submitted.",
        false,
        &[DRIVE_ID, ROUTE],
    ),
    (
        "cancel_drive",
        "Cancel",
        "Cancels a drive that has not finished.",
        true,
        &[DRIVE_ID],
    ),
    (
        "reconnect_plugin",
        "Reconnect the plugin",
        "Asks the IDE plugin to reconnect: the daemon says bye and closes its connection; the plugin connects again with a new session.",
        true,
        &[SESSION_ID],
    ),
    (
        "focus_window",
        "Focus the window",
        "Raises and focuses the session's IDE window (needs a display; verified).",
        true,
        &[SESSION_ID],
    ),
];

/// The table as the API answers it.
pub fn actions() -> ActionList {
    ActionList {
        actions: TABLE
            .iter()
            .map(|(id, label, does, safe_to_repeat, params)| ActionInfo {
                id: id.to_string(),
                label: label.to_string(),
                does: does.to_string(),
                safe_to_repeat: *safe_to_repeat,
                params: params
                    .iter()
                    .map(|(name, required, description)| ActionParam {
                        name: name.to_string(),
                        required: *required,
                        description: description.to_string(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::{RecoveryAction, RECOVERY_ACTIONS};

    #[test]
    fn the_table_names_every_action_with_the_protocols_parameters() {
        let list = actions();
        let ids: Vec<&str> = list.actions.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, RECOVERY_ACTIONS);
        for action in &list.actions {
            // The parameters named here are the ones the protocol type takes.
            let params: serde_json::Map<String, serde_json::Value> = action
                .params
                .iter()
                .map(|p| {
                    let value = if p.name == "route" {
                        "plugin_drive"
                    } else {
                        "x"
                    };
                    (p.name.clone(), serde_json::Value::from(value))
                })
                .collect();
            let parsed: RecoveryAction =
                serde_json::from_value(serde_json::json!({"action": action.id, "params": params}))
                    .unwrap_or_else(|e| panic!("{}: {e}", action.id));
            assert_eq!(parsed.name(), action.id);
            assert_eq!(
                parsed.safe_to_repeat(),
                action.safe_to_repeat,
                "{}",
                action.id
            );
            let required: serde_json::Map<String, serde_json::Value> = params
                .into_iter()
                .filter(|(name, _)| action.params.iter().any(|p| &p.name == name && p.required))
                .collect();
            assert!(serde_json::from_value::<RecoveryAction>(
                serde_json::json!({"action": action.id, "params": required})
            )
            .is_ok());
        }
    }
}

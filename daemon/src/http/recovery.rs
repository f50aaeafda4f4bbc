//! The recovery actions as the dashboard offers them (`GET /api/v1/recovery`): a label, what each does, whether it is safe to repeat, and its parameters, from the one list in `crate::recovery`, checked against the protocol's types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::recovery::ActionName;

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

/// The actions as the API answers them (the list lives in `crate::recovery`).
pub fn actions() -> ActionList {
    ActionList {
        actions: ActionName::ALL
            .iter()
            .map(|action| ActionInfo {
                id: action.wire().to_string(),
                label: action.label().to_string(),
                does: action.does().to_string(),
                safe_to_repeat: action.safe_to_repeat(),
                params: action
                    .params()
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

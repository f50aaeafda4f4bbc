//! The recovery actions as people and programs name them: one list with each action's label, what it does, whether it is safe to repeat and its parameters, shared by `koru recover`, the MCP tool `recover` and the HTTP API's `GET /api/v1/recovery`, and the one place that turns a name and its arguments into the protocol's `RecoveryAction`.

use koru_protocol::{RecoveryAction, Route};

/// A recovery action by name (`koru recover NAME`, the MCP tool's `action`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum ActionName {
    /// Run doctor's probes again
    Reprobe,
    /// Read the registry files again
    ReloadRegistry,
    /// Send a failed drive's prompt again (needs the drive; the route is optional); refused when it may have been submitted
    RetryDrive,
    /// Cancel a drive that has not finished (needs the drive)
    CancelDrive,
    /// Make a plugin reconnect (needs the session)
    ReconnectPlugin,
    /// Raise and focus a session's IDE window (needs the session)
    FocusWindow,
}

/// One parameter of an action: `(name, required, description)`.
pub type Param = (&'static str, bool, &'static str);

const DRIVE_ID: Param = ("drive_id", true, "the drive's id (d_…)");
const SESSION_ID: Param = ("session_id", true, "the plugin session's id (s_…)");
const ROUTE: Param = (
    "route",
    false,
    "native_send, plugin_drive or os_injection; the planner's order when absent",
);

/// What is wrong with the arguments given for an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error("this action needs a drive id")]
    MissingDrive,
    #[error("this action needs a session id")]
    MissingSession,
    #[error("a route only applies to retry_drive")]
    RouteNotApplicable,
}

impl ActionName {
    /// Every action, in the protocol's order.
    pub const ALL: [ActionName; 6] = [
        ActionName::Reprobe,
        ActionName::ReloadRegistry,
        ActionName::RetryDrive,
        ActionName::CancelDrive,
        ActionName::ReconnectPlugin,
        ActionName::FocusWindow,
    ];

    /// The wire name (`recovery.run`'s `action`).
    pub fn wire(self) -> &'static str {
        match self {
            ActionName::Reprobe => "reprobe",
            ActionName::ReloadRegistry => "reload_registry",
            ActionName::RetryDrive => "retry_drive",
            ActionName::CancelDrive => "cancel_drive",
            ActionName::ReconnectPlugin => "reconnect_plugin",
            ActionName::FocusWindow => "focus_window",
        }
    }

    /// A short button label.
    pub fn label(self) -> &'static str {
        match self {
            ActionName::Reprobe => "Check again",
            ActionName::ReloadRegistry => "Reload the registry",
            ActionName::RetryDrive => "Retry",
            ActionName::CancelDrive => "Cancel",
            ActionName::ReconnectPlugin => "Reconnect the plugin",
            ActionName::FocusWindow => "Focus the window",
        }
    }

    /// What it does, in one sentence.
    pub fn does(self) -> &'static str {
        match self {
            ActionName::Reprobe => "Runs doctor's probes again and reports the verdict.",
            ActionName::ReloadRegistry => "Reads the registry layer files again, as SIGHUP does; a layer with errors is left out and the previous registry kept.",
            ActionName::RetryDrive => "Sends a failed, timed-out or cancelled drive's prompt again as a new drive; refused while the drive runs or when its prompt may already have been submitted.",
            ActionName::CancelDrive => "Cancels a drive that has not finished.",
            ActionName::ReconnectPlugin => "Asks the IDE plugin to reconnect: the daemon says bye and closes its connection; the plugin connects again with a new session.",
            ActionName::FocusWindow => "Raises and focuses the session's IDE window (needs a display; verified).",
        }
    }

    /// Whether doing it twice is harmless.
    pub fn safe_to_repeat(self) -> bool {
        self != ActionName::RetryDrive
    }

    /// Its parameters.
    pub fn params(self) -> &'static [Param] {
        match self {
            ActionName::Reprobe | ActionName::ReloadRegistry => &[],
            ActionName::RetryDrive => &[DRIVE_ID, ROUTE],
            ActionName::CancelDrive => &[DRIVE_ID],
            ActionName::ReconnectPlugin | ActionName::FocusWindow => &[SESSION_ID],
        }
    }

    /// The protocol action for this name and the arguments given (blank ids count as absent).
    pub fn with(
        self,
        drive_id: Option<String>,
        session_id: Option<String>,
        route: Option<Route>,
    ) -> Result<RecoveryAction, ArgumentError> {
        let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        let drive = || given(drive_id.clone()).ok_or(ArgumentError::MissingDrive);
        let session = || given(session_id.clone()).ok_or(ArgumentError::MissingSession);
        if route.is_some() && self != ActionName::RetryDrive {
            return Err(ArgumentError::RouteNotApplicable);
        }
        Ok(match self {
            ActionName::Reprobe => RecoveryAction::Reprobe {},
            ActionName::ReloadRegistry => RecoveryAction::ReloadRegistry {},
            ActionName::RetryDrive => RecoveryAction::RetryDrive {
                drive_id: drive()?,
                route,
            },
            ActionName::CancelDrive => RecoveryAction::CancelDrive { drive_id: drive()? },
            ActionName::ReconnectPlugin => RecoveryAction::ReconnectPlugin {
                session_id: session()?,
            },
            ActionName::FocusWindow => RecoveryAction::FocusWindow {
                session_id: session()?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::RECOVERY_ACTIONS;

    #[test]
    fn every_protocol_action_has_a_name_and_takes_the_parameters_listed() {
        let wires: Vec<&str> = ActionName::ALL.iter().map(|a| a.wire()).collect();
        assert_eq!(wires, RECOVERY_ACTIONS);
        for name in ActionName::ALL {
            let id = || Some("x".to_string());
            let action = name
                .with(
                    id(),
                    id(),
                    (name == ActionName::RetryDrive).then_some(Route::PluginDrive),
                )
                .unwrap();
            assert_eq!(action.name(), name.wire());
            assert_eq!(action.safe_to_repeat(), name.safe_to_repeat());
            let wants = |param: &str| name.params().iter().any(|p| p.0 == param);
            if wants("drive_id") {
                assert_eq!(
                    name.with(None, id(), None),
                    Err(ArgumentError::MissingDrive)
                );
            }
            if wants("session_id") {
                assert_eq!(
                    name.with(id(), Some("  ".into()), None),
                    Err(ArgumentError::MissingSession)
                );
            }
            if name != ActionName::RetryDrive {
                assert_eq!(
                    name.with(id(), id(), Some(Route::NativeSend)),
                    Err(ArgumentError::RouteNotApplicable)
                );
            }
        }
    }
}

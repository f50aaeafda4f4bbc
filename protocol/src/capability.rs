//! Plugin capabilities announced in `hello`: a tagged enum with an `Unknown` catch-all so that a newer plugin never breaks an older daemon.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One thing a plugin says it can do, tagged by `kind`.
///
/// A capability whose `kind` this build does not know (or whose fields do not fit the
/// known shape) decodes as [`Capability::Unknown`] with the raw object kept, and is sent
/// back verbatim when re-encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Capability {
    /// The plugin runs the product's native "send prompt to chat" command.
    NativeSend,
    /// The plugin can focus the chat input, paste and submit, acking each stage.
    PluginDrive,
    /// The plugin executes a daemon-supplied list of steps (`drive.steps`).
    DriveSteps,
    /// The plugin reports chat busy/idle events.
    ChatEvents,
    /// The plugin can read and restore the IDE clipboard.
    Clipboard,
    /// The plugin reports its window's integrated terminals (`terminals`) and reads and
    /// writes them for the daemon (`terminal.io`).
    TerminalIo,
    /// The plugin reads and writes the system clipboard for the daemon (`clipboard`), so
    /// that OS injection without a clipboard of its own (the desktop portal without a
    /// Clipboard interface) can paste whole prompts into the plugin's window.
    ClipboardIo,
    /// An IDE command (VS Code command id, JetBrains action id) exists in this IDE.
    Command { id: String },
    /// A tool window or view exists in this IDE.
    ToolWindow { id: String },
    /// A capability this build does not know, kept verbatim.
    Unknown(serde_json::Value),
}

/// The known shapes, as serde sees them.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum KnownCapability {
    NativeSend,
    PluginDrive,
    DriveSteps,
    ChatEvents,
    Clipboard,
    TerminalIo,
    ClipboardIo,
    Command { id: String },
    ToolWindow { id: String },
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let known = match self {
            Capability::NativeSend => KnownCapability::NativeSend,
            Capability::PluginDrive => KnownCapability::PluginDrive,
            Capability::DriveSteps => KnownCapability::DriveSteps,
            Capability::ChatEvents => KnownCapability::ChatEvents,
            Capability::Clipboard => KnownCapability::Clipboard,
            Capability::TerminalIo => KnownCapability::TerminalIo,
            Capability::ClipboardIo => KnownCapability::ClipboardIo,
            Capability::Command { id } => KnownCapability::Command { id: id.clone() },
            Capability::ToolWindow { id } => KnownCapability::ToolWindow { id: id.clone() },
            Capability::Unknown(raw) => return raw.serialize(serializer),
        };
        known.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = serde_json::Value::deserialize(deserializer)?;
        if !raw.is_object() || raw.get("kind").and_then(|k| k.as_str()).is_none() {
            return Err(serde::de::Error::custom(
                "a capability must be an object with a string `kind`",
            ));
        }
        Ok(
            match serde_json::from_value::<KnownCapability>(raw.clone()) {
                Ok(KnownCapability::NativeSend) => Capability::NativeSend,
                Ok(KnownCapability::PluginDrive) => Capability::PluginDrive,
                Ok(KnownCapability::DriveSteps) => Capability::DriveSteps,
                Ok(KnownCapability::ChatEvents) => Capability::ChatEvents,
                Ok(KnownCapability::Clipboard) => Capability::Clipboard,
                Ok(KnownCapability::TerminalIo) => Capability::TerminalIo,
                Ok(KnownCapability::ClipboardIo) => Capability::ClipboardIo,
                Ok(KnownCapability::Command { id }) => Capability::Command { id },
                Ok(KnownCapability::ToolWindow { id }) => Capability::ToolWindow { id },
                Err(_) => Capability::Unknown(raw),
            },
        )
    }
}

impl JsonSchema for Capability {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Capability".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let known = generator.subschema_for::<KnownCapability>();
        schemars::json_schema!({
            "description": "A plugin capability tagged by `kind`. Receivers must accept kinds they do not know (kept as unknown) so that newer plugins never break older daemons.",
            "anyOf": [
                known,
                {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}}}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_and_unknown_capabilities_decode_and_round_trip() {
        let wire = json!([
            {"kind": "native_send"},
            {"kind": "command", "id": "workbench.action.chat.open"},
            {"kind": "telepathy", "strength": 9}
        ]);
        let caps: Vec<Capability> = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(caps[0], Capability::NativeSend);
        assert_eq!(
            caps[1],
            Capability::Command {
                id: "workbench.action.chat.open".into()
            }
        );
        assert!(matches!(caps[2], Capability::Unknown(_)));
        assert_eq!(serde_json::to_value(&caps).unwrap(), wire);
    }

    #[test]
    fn a_capability_without_kind_is_an_error() {
        assert!(serde_json::from_value::<Capability>(json!({"id": "x"})).is_err());
        assert!(serde_json::from_value::<Capability>(json!("native_send")).is_err());
    }
}

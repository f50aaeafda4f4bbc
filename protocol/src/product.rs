//! The IDE product a plugin runs in: a closed set of known products plus JetBrains products by code and an open `other` for forward compatibility.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which IDE a plugin session lives in.
///
/// On the wire this is a string: `vscode`, `vscode-insiders`, `vscodium`, `cursor`,
/// `windsurf`, `antigravity`, `code-server`, `jetbrains-<product>` (e.g. `jetbrains-idea`,
/// `jetbrains-pycharm`) or `other`. An unrecognised string decodes as [`IdeProduct::Other`]
/// keeping the raw value, so a newer plugin naming a product this daemon does not know
/// still connects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IdeProduct {
    VsCode,
    VsCodeInsiders,
    VsCodium,
    Cursor,
    Windsurf,
    Antigravity,
    CodeServer,
    /// A JetBrains IDE, by its lowercase product code (`idea`, `pycharm`, `webstorm`, …).
    JetBrains(String),
    /// `other`, or a product name this build does not know (kept verbatim).
    Other(String),
}

impl IdeProduct {
    /// The wire spelling of this product.
    pub fn as_wire(&self) -> String {
        match self {
            IdeProduct::VsCode => "vscode".into(),
            IdeProduct::VsCodeInsiders => "vscode-insiders".into(),
            IdeProduct::VsCodium => "vscodium".into(),
            IdeProduct::Cursor => "cursor".into(),
            IdeProduct::Windsurf => "windsurf".into(),
            IdeProduct::Antigravity => "antigravity".into(),
            IdeProduct::CodeServer => "code-server".into(),
            IdeProduct::JetBrains(code) => format!("jetbrains-{code}"),
            IdeProduct::Other(raw) => raw.clone(),
        }
    }

    /// The documented product names, for error messages and help text.
    pub const KNOWN: &'static [&'static str] = &[
        "vscode",
        "vscode-insiders",
        "vscodium",
        "cursor",
        "windsurf",
        "antigravity",
        "code-server",
        "jetbrains-<product>",
        "other",
    ];

    /// True for the VS Code family (VS Code and its forks and builds).
    pub fn is_vscode_family(&self) -> bool {
        matches!(
            self,
            IdeProduct::VsCode
                | IdeProduct::VsCodeInsiders
                | IdeProduct::VsCodium
                | IdeProduct::Cursor
                | IdeProduct::Windsurf
                | IdeProduct::Antigravity
                | IdeProduct::CodeServer
        )
    }
}

impl FromStr for IdeProduct {
    type Err = std::convert::Infallible;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Ok(match raw {
            "vscode" => IdeProduct::VsCode,
            "vscode-insiders" => IdeProduct::VsCodeInsiders,
            "vscodium" => IdeProduct::VsCodium,
            "cursor" => IdeProduct::Cursor,
            "windsurf" => IdeProduct::Windsurf,
            "antigravity" => IdeProduct::Antigravity,
            "code-server" => IdeProduct::CodeServer,
            other => match other.strip_prefix("jetbrains-") {
                Some(code) if !code.is_empty() => IdeProduct::JetBrains(code.to_string()),
                _ => IdeProduct::Other(other.to_string()),
            },
        })
    }
}

impl fmt::Display for IdeProduct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_wire())
    }
}

impl Serialize for IdeProduct {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_wire())
    }
}

impl<'de> Deserialize<'de> for IdeProduct {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        if raw.is_empty() {
            return Err(serde::de::Error::custom(format!(
                "empty product name; expected one of {}",
                IdeProduct::KNOWN.join(", ")
            )));
        }
        Ok(raw.parse().unwrap_or_else(|never| match never {}))
    }
}

impl JsonSchema for IdeProduct {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IdeProduct".into()
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "description": "IDE product: vscode, vscode-insiders, vscodium, cursor, windsurf, antigravity, code-server, jetbrains-<product code>, or other. Unknown names are accepted and kept verbatim.",
            "examples": ["vscode", "cursor", "code-server", "jetbrains-idea", "other"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_spelling_round_trips_and_unknown_names_are_kept() {
        for raw in [
            "vscode",
            "vscode-insiders",
            "vscodium",
            "cursor",
            "windsurf",
            "antigravity",
            "code-server",
            "jetbrains-idea",
            "other",
            "kiro",
        ] {
            let product: IdeProduct = serde_json::from_value(raw.into()).unwrap();
            assert_eq!(serde_json::to_value(&product).unwrap(), raw);
        }
        assert_eq!(
            "jetbrains-pycharm".parse::<IdeProduct>().unwrap(),
            IdeProduct::JetBrains("pycharm".into())
        );
        assert!(serde_json::from_value::<IdeProduct>("".into()).is_err());
    }
}

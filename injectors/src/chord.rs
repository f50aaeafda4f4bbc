//! Key chords such as `ctrl+shift+v` or `Return`: parsed once, rendered for each backend's syntax.

/// A key with modifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chord {
    /// Lowercase modifier names: `ctrl`, `shift`, `alt`, `super`.
    pub modifiers: Vec<String>,
    /// The key as X11 keysym name (`v`, `Return`, `Tab`, `F5`).
    pub key: String,
}

/// A chord that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid key chord {chord:?}: {reason}")]
pub struct ChordError {
    pub chord: String,
    pub reason: String,
}

impl std::str::FromStr for Chord {
    type Err = ChordError;

    fn from_str(raw: &str) -> Result<Chord, ChordError> {
        let error = |reason: &str| ChordError {
            chord: raw.to_string(),
            reason: reason.to_string(),
        };
        let parts: Vec<&str> = raw.split('+').map(str::trim).collect();
        let (key, modifiers) = parts.split_last().ok_or_else(|| error("empty"))?;
        if key.is_empty() {
            return Err(error("no key after the modifiers"));
        }
        let modifiers = modifiers
            .iter()
            .map(|m| match m.to_ascii_lowercase().as_str() {
                "ctrl" | "control" => Ok("ctrl".to_string()),
                "shift" => Ok("shift".to_string()),
                "alt" => Ok("alt".to_string()),
                "super" | "meta" | "logo" | "cmd" => Ok("super".to_string()),
                other => Err(error(&format!(
                    "unknown modifier {other:?} (use ctrl, shift, alt or super)"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let key = match key.to_ascii_lowercase().as_str() {
            "enter" | "return" => "Return".to_string(),
            "tab" => "Tab".to_string(),
            "esc" | "escape" => "Escape".to_string(),
            "space" => "space".to_string(),
            _ => key.to_string(),
        };
        Ok(Chord { modifiers, key })
    }
}

impl std::fmt::Display for Chord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for modifier in &self.modifiers {
            write!(f, "{modifier}+")?;
        }
        f.write_str(&self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chords_and_names_bad_ones() {
        let chord: Chord = "Ctrl+Shift+v".parse().unwrap();
        assert_eq!(chord.modifiers, ["ctrl", "shift"]);
        assert_eq!(chord.key, "v");
        assert_eq!(chord.to_string(), "ctrl+shift+v");
        assert_eq!("enter".parse::<Chord>().unwrap().key, "Return");
        assert_eq!(
            "hyper+x".parse::<Chord>().unwrap_err().to_string(),
            "invalid key chord \"hyper+x\": unknown modifier \"hyper\" (use ctrl, shift, alt or super)"
        );
        assert!("ctrl+".parse::<Chord>().is_err());
    }
}

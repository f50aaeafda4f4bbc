//! The in-process backend: enigo sends key events from inside the daemon (X11 through x11rb, no helper program); window focus goes through another window control.

use std::time::Duration;

use enigo::{Direction, Enigo, Key, Keyboard, Settings};

use crate::{require_env, Chord, InjectError, KeyInput, Probe};

/// Keyboard input through enigo.
#[derive(Debug, Default, Clone, Copy)]
pub struct EnigoKeys;

/// On X11, dropping the connection right after the last key loses remapped characters;
/// keeping it open a little longer fixes that.
const SETTLE: Duration = Duration::from_millis(200);

fn connect() -> Result<Enigo, InjectError> {
    Enigo::new(&Settings::default()).map_err(|err| InjectError::Input {
        detail: format!("enigo cannot connect to the display: {err}"),
    })
}

fn key_of(name: &str) -> Result<Key, InjectError> {
    Ok(match name {
        "ctrl" => Key::Control,
        "shift" => Key::Shift,
        "alt" => Key::Alt,
        "super" => Key::Meta,
        "Return" => Key::Return,
        "Tab" => Key::Tab,
        "Escape" => Key::Escape,
        "space" => Key::Space,
        other => {
            let mut chars = other.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Key::Unicode(c),
                _ => {
                    return Err(InjectError::Input {
                        detail: format!("enigo: unsupported key {other:?}"),
                    })
                }
            }
        }
    })
}

impl KeyInput for EnigoKeys {
    fn name(&self) -> &'static str {
        "enigo"
    }

    fn probe(&self) -> Probe {
        require_env("DISPLAY")
    }

    fn type_text(&self, text: &str) -> Result<(), InjectError> {
        let mut enigo = connect()?;
        enigo.text(text).map_err(|err| InjectError::Input {
            detail: format!("enigo: {err}"),
        })?;
        std::thread::sleep(SETTLE);
        Ok(())
    }

    fn key(&self, chord: &Chord) -> Result<(), InjectError> {
        let mut enigo = connect()?;
        let modifiers = chord
            .modifiers
            .iter()
            .map(|m| key_of(m))
            .collect::<Result<Vec<_>, _>>()?;
        let key = key_of(&chord.key)?;
        let press = |enigo: &mut Enigo, key: Key, direction: Direction| {
            enigo.key(key, direction).map_err(|err| InjectError::Input {
                detail: format!("enigo: {err}"),
            })
        };
        for modifier in &modifiers {
            press(&mut enigo, *modifier, Direction::Press)?;
        }
        press(&mut enigo, key, Direction::Click)?;
        for modifier in modifiers.iter().rev() {
            press(&mut enigo, *modifier, Direction::Release)?;
        }
        std::thread::sleep(SETTLE);
        Ok(())
    }
}

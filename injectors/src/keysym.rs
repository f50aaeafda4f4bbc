//! X11 keysyms for text and chords, for backends that send keysyms rather than run a program (the desktop portal's `NotifyKeyboardKeysym`): Latin-1 characters are their own keysym, other Unicode characters `0x0100_0000 + code point`, and named keys and modifiers have their fixed values (X11 `keysymdef.h`).

use crate::{Chord, InjectError};

/// The keysym that types `c`.
pub fn for_char(c: char) -> u32 {
    match c {
        '\n' => RETURN,
        '\t' => 0xff09,
        ' '..='~' | '\u{a0}'..='\u{ff}' => c as u32,
        _ => 0x0100_0000 + c as u32,
    }
}

/// `Return`.
pub const RETURN: u32 = 0xff0d;

/// The keysym of a modifier as [`Chord`] names it (`ctrl`, `shift`, `alt`, `super`).
pub fn for_modifier(modifier: &str) -> Option<u32> {
    Some(match modifier {
        "ctrl" => 0xffe3,  // Control_L
        "shift" => 0xffe1, // Shift_L
        "alt" => 0xffe9,   // Alt_L
        "super" => 0xffeb, // Super_L
        _ => return None,
    })
}

/// The keysym of a chord's key: a name (`Return`, `Tab`, `F5`, `Left`) or one character.
pub fn for_key(key: &str) -> Option<u32> {
    let named = match key {
        "Return" => RETURN,
        "Tab" => 0xff09,
        "Escape" => 0xff1b,
        "BackSpace" => 0xff08,
        "Delete" => 0xffff,
        "Insert" => 0xff63,
        "Home" => 0xff50,
        "End" => 0xff57,
        "Left" => 0xff51,
        "Up" => 0xff52,
        "Right" => 0xff53,
        "Down" => 0xff54,
        "Page_Up" | "Prior" => 0xff55,
        "Page_Down" | "Next" => 0xff56,
        "KP_Enter" => 0xff8d,
        "space" => 0x20,
        _ => 0,
    };
    if named != 0 {
        return Some(named);
    }
    if let Some(number) = key.strip_prefix('F').and_then(|n| n.parse::<u32>().ok()) {
        return (1..=35).contains(&number).then_some(0xffbe + number - 1);
    }
    let mut chars = key.chars();
    match (chars.next(), chars.next()) {
        // Chords name letters in lower case; the keysym of the lower-case letter is the
        // key, whatever the modifiers.
        (Some(c), None) => Some(for_char(c.to_ascii_lowercase())),
        _ => None,
    }
}

/// The presses and releases of a chord, in order: modifiers down, the key down and up,
/// modifiers up in reverse. `(keysym, pressed)`.
pub fn chord_events(chord: &Chord) -> Result<Vec<(u32, bool)>, InjectError> {
    let modifiers = chord
        .modifiers
        .iter()
        .map(|m| {
            for_modifier(m).ok_or_else(|| InjectError::Input {
                detail: format!("no keysym for the modifier {m:?}"),
            })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let key = for_key(&chord.key).ok_or_else(|| InjectError::Input {
        detail: format!("no keysym for the key {:?} of {chord}", chord.key),
    })?;
    let mut events: Vec<(u32, bool)> = modifiers.iter().map(|m| (*m, true)).collect();
    events.push((key, true));
    events.push((key, false));
    events.extend(modifiers.iter().rev().map(|m| (*m, false)));
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_map_to_latin1_or_unicode_keysyms() {
        assert_eq!(for_char('a'), 0x61);
        assert_eq!(for_char('Z'), 0x5a);
        assert_eq!(for_char(' '), 0x20);
        assert_eq!(for_char('é'), 0xe9);
        assert_eq!(for_char('€'), 0x0100_20ac);
        assert_eq!(for_char('日'), 0x0100_65e5);
        assert_eq!(for_char('\n'), RETURN);
    }

    #[test]
    fn a_chord_presses_its_modifiers_around_the_key() {
        let chord: Chord = "ctrl+shift+v".parse().unwrap();
        assert_eq!(
            chord_events(&chord).unwrap(),
            [
                (0xffe3, true),
                (0xffe1, true),
                (0x76, true),
                (0x76, false),
                (0xffe1, false),
                (0xffe3, false)
            ]
        );
        let enter: Chord = "Return".parse().unwrap();
        assert_eq!(
            chord_events(&enter).unwrap(),
            [(RETURN, true), (RETURN, false)]
        );
        assert_eq!(for_key("F5"), Some(0xffc2));
        let odd: Chord = "ctrl+NoSuchKey".parse().unwrap();
        assert!(chord_events(&odd).is_err());
    }
}

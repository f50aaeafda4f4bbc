//! Reading a terminal agent's screen (`capture-pane`) with the registry's markers: a dialog open, a person's draft in the input box, the agent answering, or an empty input box ready for a prompt.

use koru_registry::ScreenMarkers;
use regex::Regex;

/// What the screen says about typing a prompt now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// A dialog (permission, trust, question) is open: its text, as shown.
    Dialog(String),
    /// Someone's unsent text is in the input box.
    Draft(String),
    /// The agent is answering (the line that says so).
    Busy(String),
    /// The input box is there and empty.
    Ready,
    /// The markers name an input box and none is on screen.
    NoInputBox,
}

/// The most lines of a dialog kept for a blocker's detail.
const DIALOG_LINES: usize = 12;

/// The registry's patterns, compiled (the loader has checked them).
#[derive(Debug, Clone)]
pub struct CompiledMarkers {
    dialog: Vec<Regex>,
    input: Vec<Regex>,
    placeholder: Vec<String>,
    busy: Vec<Regex>,
}

impl CompiledMarkers {
    pub fn new(markers: &ScreenMarkers) -> Self {
        let compile = |patterns: &[String]| -> Vec<Regex> {
            patterns
                .iter()
                .filter_map(|p| match Regex::new(p) {
                    Ok(re) => Some(re),
                    Err(error) => {
                        tracing::warn!(pattern = %p, %error, "a screen marker is not a regular expression; ignored");
                        None
                    }
                })
                .collect()
        };
        CompiledMarkers {
            dialog: compile(&markers.dialog),
            input: compile(&markers.input),
            placeholder: markers.placeholder.clone(),
            busy: compile(&markers.busy),
        }
    }

    /// What is typed in the input box, if the box is on screen: the first capture of the
    /// last line matching an input pattern, trimmed (`Some("")` when empty or showing a
    /// placeholder). `None` when no line matches (or no pattern is given).
    pub fn input_text(&self, screen: &str) -> Option<String> {
        let lines: Vec<&str> = screen.lines().collect();
        for line in lines.iter().rev() {
            for re in &self.input {
                if let Some(captures) = re.captures(line) {
                    let typed = captures
                        .get(1)
                        .map(|m| m.as_str().trim())
                        .unwrap_or_default();
                    let placeholder = self
                        .placeholder
                        .iter()
                        .any(|p| !p.is_empty() && typed.starts_with(p.as_str()));
                    return Some(if placeholder {
                        String::new()
                    } else {
                        typed.to_string()
                    });
                }
            }
        }
        None
    }

    /// Reads `screen` (what `capture-pane -p -J` printed).
    pub fn read(&self, screen: &str) -> Screen {
        let lines: Vec<&str> = screen.lines().collect();
        if let Some(at) = lines
            .iter()
            .position(|line| self.dialog.iter().any(|re| re.is_match(line)))
        {
            let text: Vec<&str> = lines[at..]
                .iter()
                .map(|line| line.trim())
                .filter(|line| !line.is_empty() && !is_rule(line))
                .take(DIALOG_LINES)
                .collect();
            return Screen::Dialog(text.join("\n"));
        }
        let typed = self.input_text(screen);
        if let Some(typed) = &typed {
            if !typed.is_empty() {
                return Screen::Draft(typed.clone());
            }
        }
        if let Some(line) = lines
            .iter()
            .find(|line| self.busy.iter().any(|re| re.is_match(line)))
        {
            return Screen::Busy(line.trim().to_string());
        }
        match typed {
            Some(_) => Screen::Ready,
            None if self.input.is_empty() => Screen::Ready,
            None => Screen::NoInputBox,
        }
    }
}

/// A line of box-drawing characters only (a frame's edge).
fn is_rule(line: &str) -> bool {
    line.chars()
        .all(|c| ('\u{2500}'..='\u{257F}').contains(&c) || c.is_whitespace())
}

/// Whether the input box, as `markers` read it from `screen`, still holds the start of
/// `prompt` (so pressing the submit key again would submit it, not something else).
pub fn shows_prompt(markers: &CompiledMarkers, screen: &str, prompt: &str) -> bool {
    let Some(typed) = markers.input_text(screen) else {
        return false;
    };
    let first_line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let head: String = first_line.trim().chars().take(20).collect();
    !typed.is_empty() && !head.is_empty() && typed.contains(head.as_str())
        || (!typed.is_empty() && head.starts_with(typed.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markers() -> CompiledMarkers {
        CompiledMarkers::new(&ScreenMarkers {
            dialog: vec!["Do you want to proceed\\?".into()],
            input: vec!["^│ > (.*?)\\s*│?$".into()],
            placeholder: vec!["Try \"".into()],
            busy: vec!["esc to interrupt".into()],
        })
    }

    #[test]
    fn screens_are_read_dialog_first_then_draft_busy_and_ready() {
        let m = markers();
        let ready = "Welcome\n╭────╮\n│ > Try \"fix lint errors\"  │\n╰────╯\n";
        assert_eq!(m.read(ready), Screen::Ready);
        let draft = "╭────╮\n│ > hello draft   │\n╰────╯\n";
        assert_eq!(m.read(draft), Screen::Draft("hello draft".into()));
        let busy = "✻ Thinking… (esc to interrupt)\n│ >    │\n";
        assert_eq!(
            m.read(busy),
            Screen::Busy("✻ Thinking… (esc to interrupt)".into())
        );
        let dialog =
            "Bash command\n  touch x\n\nDo you want to proceed?\n❯ 1. Yes\n  2. No\n────\n│ >  │\n";
        assert_eq!(
            m.read(dialog),
            Screen::Dialog("Do you want to proceed?\n❯ 1. Yes\n2. No\n│ >  │".into())
        );
        assert_eq!(m.read("just a shell $\n"), Screen::NoInputBox);
        let none = CompiledMarkers::new(&ScreenMarkers::default());
        assert_eq!(none.read("anything"), Screen::Ready);
    }

    #[test]
    fn the_prompt_still_in_the_box_is_recognised_by_its_start() {
        let m = markers();
        assert!(shows_prompt(
            &m,
            "│ > Summarise the README please │\n",
            "Summarise the README please"
        ));
        assert!(!shows_prompt(&m, "│ >   │\n", "Summarise the README"));
        assert!(!shows_prompt(&m, "│ > other │\n", "Summarise the README"));
    }
}

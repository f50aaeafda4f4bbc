//! `koru hook install|uninstall`: reads an agent's settings file, works out the change (Koru's entries added or removed, nothing else), shows it as a diff, and writes it with a backup of the file as it was — atomically, keeping the file's permissions; a file that does not parse is refused and left untouched.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::json_settings::{self, SettingsError};
use super::HookAgent;

/// Why an install or uninstall could not be planned or written.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {error}; the file was left as it is")]
    Settings { path: PathBuf, error: SettingsError },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A change to one settings file, worked out and not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub agent: HookAgent,
    pub path: PathBuf,
    /// The file's text now (`None`: there is no file).
    pub before: Option<String>,
    /// Its text after the change.
    pub after: String,
    /// The events whose Koru entry is added, updated or removed.
    pub events: Vec<String>,
}

impl Plan {
    /// Whether writing the plan would change the file.
    pub fn changes(&self) -> bool {
        self.before.as_deref() != Some(self.after.as_str())
            && !(self.before.is_none() && self.events.is_empty())
    }

    /// The change as a unified diff (empty when nothing changes).
    pub fn diff(&self) -> String {
        if !self.changes() {
            return String::new();
        }
        unified_diff(
            self.before.as_deref(),
            &self.after,
            &self.path.display().to_string(),
            3,
        )
    }
}

/// A file's change as a unified diff headed by its name (`/dev/null` before a new file).
pub fn unified_diff(before: Option<&str>, after: &str, name: &str, context: usize) -> String {
    similar::TextDiff::from_lines(before.unwrap_or(""), after)
        .unified_diff()
        .context_radius(context)
        .header(if before.is_some() { name } else { "/dev/null" }, name)
        .to_string()
}

fn read(path: &Path) -> Result<Option<String>, InstallError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(InstallError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The change that adds (or brings up to date) Koru's entries for `agent`, running `koru`.
pub fn plan_install(agent: HookAgent, path: &Path, koru: &Path) -> Result<Plan, InstallError> {
    let before = read(path)?;
    let edited = json_settings::install(before.as_deref().unwrap_or(""), &agent.entries(koru), &[])
        .map_err(|error| InstallError::Settings {
            path: path.to_path_buf(),
            error,
        })?;
    Ok(Plan {
        agent,
        path: path.to_path_buf(),
        before,
        after: ensure_newline(edited.text),
        events: edited.events,
    })
}

/// The change that removes every Koru entry from `agent`'s settings file.
pub fn plan_uninstall(agent: HookAgent, path: &Path) -> Result<Plan, InstallError> {
    let before = read(path)?;
    let Some(text) = &before else {
        return Ok(Plan {
            agent,
            path: path.to_path_buf(),
            before: None,
            after: String::new(),
            events: Vec::new(),
        });
    };
    let edited = json_settings::uninstall(text, &[]).map_err(|error| InstallError::Settings {
        path: path.to_path_buf(),
        error,
    })?;
    let after = if edited.events.is_empty() {
        text.clone()
    } else {
        ensure_newline(edited.text)
    };
    Ok(Plan {
        agent,
        path: path.to_path_buf(),
        before,
        after,
        events: edited.events,
    })
}

fn ensure_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Writes a plan: the file as it was is kept beside it as `<name>.koru-backup-<stamp>`
/// (returned), then the new text replaces it in one rename, with the old file's
/// permissions (0600 for a new one: settings can hold tokens). Nothing is written when the
/// plan changes nothing.
pub fn apply(plan: &Plan, stamp: &str) -> Result<Option<PathBuf>, InstallError> {
    if !plan.changes() {
        return Ok(None);
    }
    let write_error = |source| InstallError::Write {
        path: plan.path.clone(),
        source,
    };
    let dir = plan.path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(write_error)?;
    let name = plan
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.json".into());
    let mode = std::fs::metadata(&plan.path)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
        .unwrap_or(0o600);
    let backup = match &plan.before {
        Some(before) => {
            let backup = dir.join(format!("{name}.koru-backup-{stamp}"));
            write_new(&backup, before, mode).map_err(write_error)?;
            Some(backup)
        }
        None => None,
    };
    let temporary = dir.join(format!(".{name}.koru-{}", std::process::id()));
    write_new(&temporary, &plan.after, mode).map_err(write_error)?;
    if let Err(error) = std::fs::rename(&temporary, &plan.path) {
        let _ = std::fs::remove_file(&temporary);
        return Err(write_error(error));
    }
    Ok(backup)
}

/// Writes a new file (replacing a leftover of the same name) with `mode`, synced.
pub(crate) fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KORU: &str = "/opt/koru/bin/koru";

    #[test]
    fn install_into_a_missing_file_makes_it_and_uninstall_takes_everything_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude/settings.json");
        let plan = plan_install(HookAgent::ClaudeCode, &path, Path::new(KORU)).unwrap();
        assert!(plan.changes());
        assert!(
            plan.diff().starts_with("--- /dev/null\n+++ "),
            "{}",
            plan.diff()
        );
        assert_eq!(
            apply(&plan, "t1").unwrap(),
            None,
            "no backup of a file that was not there"
        );
        let written = std::fs::read_to_string(&path).unwrap();
        let value: serde_json::Value = serde_json::from_str(&written).unwrap();
        assert_eq!(value["hooks"].as_object().unwrap().len(), 7);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        // Again: nothing to do.
        let again = plan_install(HookAgent::ClaudeCode, &path, Path::new(KORU)).unwrap();
        assert!(!again.changes());
        assert_eq!(again.diff(), "");
        let out = plan_uninstall(HookAgent::ClaudeCode, &path).unwrap();
        assert_eq!(out.events.len(), 7);
        let backup = apply(&out, "t2").unwrap().expect("a backup");
        assert_eq!(std::fs::read_to_string(backup).unwrap(), written);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&path).unwrap())
                .unwrap(),
            serde_json::json!({})
        );
    }

    #[test]
    fn the_users_file_keeps_its_bytes_and_mode_through_install_and_uninstall() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let mine = "{\n  // mine\n  \"theme\": \"dark\",\n  \"hooks\": {\"BeforeAgent\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"./guard.sh\"}]}]}\n}\n";
        std::fs::write(&path, mine).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let plan = plan_install(HookAgent::GeminiCli, &path, Path::new(KORU)).unwrap();
        assert_eq!(plan.events.len(), 5);
        let backup = apply(&plan, "t1").unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), mine);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let installed = std::fs::read_to_string(&path).unwrap();
        assert!(
            installed.find("./guard.sh").unwrap() < installed.find("koru hook gemini-cli").unwrap()
        );
        apply(&plan_uninstall(HookAgent::GeminiCli, &path).unwrap(), "t2").unwrap();
        // The same settings, comment and key order included; a list written on one line
        // that Koru added to and took from again may come back spread over lines.
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(
            after.starts_with("{\n  // mine\n  \"theme\": \"dark\",\n  \"hooks\": {"),
            "{after}"
        );
        let value = |text: &str| -> serde_json::Value {
            serde_json::from_str(&text.replace("  // mine\n", "")).unwrap()
        };
        assert_eq!(value(&after), value(mine));
    }

    #[test]
    fn a_file_that_does_not_parse_is_refused_with_its_path_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks.json");
        std::fs::write(&path, "{\"hooks\": {,}").unwrap();
        let error = plan_install(HookAgent::Codex, &path, Path::new(KORU)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("{}: not valid JSON: ", path.display())),
            "{message}"
        );
        assert!(
            message.ends_with("; the file was left as it is"),
            "{message}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"hooks\": {,}");
        assert!(plan_uninstall(HookAgent::Codex, &path).is_err());
    }

    #[test]
    fn uninstall_without_a_file_or_without_koru_entries_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let none = plan_uninstall(HookAgent::ClaudeCode, &path).unwrap();
        assert!(!none.changes());
        assert_eq!(apply(&none, "t").unwrap(), None);
        assert!(!path.exists());
        std::fs::write(&path, "{\"model\": \"opus\"}").unwrap();
        let plan = plan_uninstall(HookAgent::ClaudeCode, &path).unwrap();
        assert!(!plan.changes());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no backup, no temp file"
        );
    }
}

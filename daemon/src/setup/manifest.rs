//! What `koru setup` did, kept in `$XDG_STATE_HOME/koru/setup/manifest.json` with a backup of each file as it was before its first change; applying a plan records into it, and `--undo` takes back each record — the file put back byte for byte while it is as setup left it, else only Koru's entry taken out, keeping what the user changed since.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::edit;
use super::{Change, EditUndo, FileEdit, Machine, Part, ToolPlan, ToolState, Unpack};
use crate::agent_hooks::{install::write_new, json_settings};

const MANIFEST_VERSION: u32 = 1;

/// Everything setup did that is not undone yet, oldest first.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub records: Vec<Record>,
}

/// One change setup made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub key: String,
    pub tool: String,
    pub part: Part,
    /// When (UTC, RFC 3339).
    pub at: String,
    pub did: Did,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Did {
    /// A file written: `backup` holds it as it was before setup first changed it (`None`:
    /// setup made it, in the folders `made_dirs`).
    Edit {
        path: PathBuf,
        backup: Option<PathBuf>,
        made_dirs: Vec<PathBuf>,
        after_sha256: String,
        undo: EditUndo,
        after_undo: Vec<Vec<String>>,
    },
    /// Commands run, and the ones that undo them.
    Run {
        argv: Vec<Vec<String>>,
        undo: Vec<Vec<String>>,
    },
    /// A plugin folder unpacked; `replaced` holds the folder that was there before.
    Unpack {
        dir: PathBuf,
        replaced: Option<PathBuf>,
    },
}

fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", sha2::Sha256::digest(bytes))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Manifest {
    pub fn path(machine: &Machine) -> PathBuf {
        machine.setup_dir().join("manifest.json")
    }

    /// The manifest on disk (empty when there is none).
    pub fn load(machine: &Machine) -> Result<Manifest, String> {
        let path = Self::path(machine);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "{}: {e}; setup's record is unreadable, so nothing was undone",
                    path.display()
                )
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Manifest {
                version: MANIFEST_VERSION,
                records: Vec::new(),
            }),
            Err(error) => Err(format!("cannot read {}: {error}", path.display())),
        }
    }

    pub fn save(&self, machine: &Machine) -> Result<(), String> {
        let path = Self::path(machine);
        let dir = path.parent().expect("a folder");
        create_private_dir(dir)?;
        let text = serde_json::to_string_pretty(self).expect("serialisable") + "\n";
        let temporary = dir.join(format!(".manifest.json.{}", std::process::id()));
        write_new(&temporary, &text, 0o600).map_err(|e| format!("{}: {e}", temporary.display()))?;
        std::fs::rename(&temporary, &path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))
}

/// A new path for a backup of `path` in this run's folder, `<setup dir>/backups/<stamp>/`
/// (a second backup of one file in one run gets `.2`, …).
fn backup_path(machine: &Machine, stamp: &str, path: &Path) -> Result<PathBuf, String> {
    let dir = machine.setup_dir().join("backups").join(stamp);
    create_private_dir(&dir)?;
    let name = backup_name(machine, path);
    let mut candidate = dir.join(&name);
    let mut n = 1;
    while candidate.symlink_metadata().is_ok() {
        n += 1;
        candidate = dir.join(format!("{name}.{n}"));
    }
    Ok(candidate)
}

/// A backup file's name: the original's path (below the home folder when it is there) with
/// `/` as `%`, so the name says where it belongs.
fn backup_name(machine: &Machine, path: &Path) -> String {
    path.strip_prefix(&machine.home)
        .unwrap_or(path)
        .display()
        .to_string()
        .trim_start_matches('/')
        .replace('/', "%")
}

/// Runs commands one after another with the machine's environment; the first failure stops.
pub fn run_commands(machine: &Machine, commands: &[Vec<String>]) -> Result<(), String> {
    for argv in commands {
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        let resolved = if program.contains('/') {
            PathBuf::from(program)
        } else {
            machine
                .which(program)
                .ok_or_else(|| format!("`{program}` is not on PATH"))?
        };
        let output = machine
            .command(&resolved)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", super::show_command(argv)))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stdout = String::from_utf8_lossy(&output.stdout);
            let said = stderr
                .trim()
                .lines()
                .chain(stdout.trim().lines())
                .filter(|l| !l.trim().is_empty())
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ");
            return Err(format!(
                "`{}` failed ({}): {said}",
                super::show_command(argv),
                output.status
            ));
        }
    }
    Ok(())
}

fn mode_of(path: &Path) -> Option<u32> {
    std::fs::metadata(path)
        .ok()
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
}

/// Writes `text` to `path` in one rename, keeping the file's mode (0600 for a new one).
fn replace_file(path: &Path, text: &str) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mode = mode_of(path).unwrap_or(0o600);
    let temporary = dir.join(format!(".{name}.koru-{}", std::process::id()));
    write_new(&temporary, text, mode)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write {}: {e}", path.display())
    })
}

/// What happened to one tool when a plan was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Done(Vec<String>),
    Failed(String),
}

/// Makes one edit and records it (a record for the same file and entry from an earlier run
/// keeps its backup: the file as it was before Koru's first change).
fn apply_edit(
    machine: &Machine,
    manifest: &mut Manifest,
    plan: &ToolPlan,
    edit: &FileEdit,
    stamp: &str,
) -> Result<String, String> {
    let current = match std::fs::read(&edit.path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", edit.path.display())),
    };
    if current.as_deref() != edit.before.as_deref().map(str::as_bytes) {
        return Err(format!(
            "{} changed while setup ran; nothing written to it: run `koru setup` again",
            machine.show(&edit.path)
        ));
    }
    let earlier = manifest.records.iter().position(|r| {
        matches!(&r.did, Did::Edit { path, undo, .. } if *path == edit.path && *undo == edit.undo)
    });
    let mut made_dirs = Vec::new();
    let mut backup = None;
    if earlier.is_none() {
        match &edit.before {
            Some(before) => {
                let path = backup_path(machine, stamp, &edit.path)?;
                write_new(&path, before, 0o600)
                    .map_err(|e| format!("cannot back up to {}: {e}", path.display()))?;
                backup = Some(path);
            }
            None => {
                let mut dir = edit.path.parent();
                while let Some(d) = dir.filter(|d| !d.exists()) {
                    made_dirs.push(d.to_path_buf());
                    dir = d.parent();
                }
            }
        }
    }
    if let Some(parent) = edit.path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
    }
    replace_file(&edit.path, &edit.after)?;
    let after_sha256 = sha256(edit.after.as_bytes());
    match earlier {
        Some(index) => {
            if let Did::Edit {
                after_sha256: sha, ..
            } = &mut manifest.records[index].did
            {
                *sha = after_sha256;
            }
        }
        None => manifest.records.push(Record {
            key: plan.key.clone(),
            tool: plan.tool.clone(),
            part: plan.part,
            at: now(),
            did: Did::Edit {
                path: edit.path.clone(),
                backup: backup.clone(),
                made_dirs,
                after_sha256,
                undo: edit.undo.clone(),
                after_undo: edit.after_undo.clone(),
            },
        }),
    }
    let mut line = edit.summary.clone();
    if let Some(backup) = backup {
        line.push_str(&format!(" (the file as it was: {})", machine.show(&backup)));
    }
    Ok(line)
}

fn apply_unpack(
    machine: &Machine,
    manifest: &mut Manifest,
    plan: &ToolPlan,
    step: &Unpack,
    stamp: &str,
) -> Result<String, String> {
    let dir = step.into.join(&step.folder);
    let earlier = manifest
        .records
        .iter()
        .position(|r| matches!(&r.did, Did::Unpack { dir: d, .. } if *d == dir));
    let mut replaced = None;
    if dir.exists() {
        let aside = backup_path(machine, stamp, &dir)?;
        std::fs::rename(&dir, &aside)
            .map_err(|e| format!("cannot move {} aside: {e}", dir.display()))?;
        if earlier.is_none() {
            replaced = Some(aside);
        } else {
            let _ = std::fs::remove_dir_all(&aside);
        }
    }
    super::ide::unpack(step)?;
    if earlier.is_none() {
        manifest.records.push(Record {
            key: plan.key.clone(),
            tool: plan.tool.clone(),
            part: plan.part,
            at: now(),
            did: Did::Unpack { dir, replaced },
        });
    }
    Ok(step.summary.clone())
}

/// Applies every tool's changes in order, saving the manifest after each; a tool whose step
/// fails stops there (its later steps are not made) and the others go on.
pub fn apply(
    machine: &Machine,
    plans: &[ToolPlan],
    stamp: &str,
) -> Result<Vec<(String, Applied)>, String> {
    let mut manifest = Manifest::load(machine)?;
    let mut results = Vec::new();
    for plan in plans {
        let ToolState::Changes { changes, .. } = &plan.state else {
            continue;
        };
        let mut lines = Vec::new();
        let mut failed = None;
        for change in changes {
            let step = match change {
                Change::Edit(edit) => apply_edit(machine, &mut manifest, plan, edit, stamp),
                Change::Run(run) => run_commands(machine, &run.argv).map(|()| {
                    if !run.undo.is_empty() {
                        manifest.records.push(Record {
                            key: plan.key.clone(),
                            tool: plan.tool.clone(),
                            part: plan.part,
                            at: now(),
                            did: Did::Run {
                                argv: run.argv.clone(),
                                undo: run.undo.clone(),
                            },
                        });
                    }
                    run.summary.clone()
                }),
                Change::Unpack(step) => apply_unpack(machine, &mut manifest, plan, step, stamp),
            };
            manifest.save(machine)?;
            match step {
                Ok(line) => lines.push(line),
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
        }
        results.push((
            plan.tool.clone(),
            match failed {
                Some(error) => Applied::Failed(error),
                None => Applied::Done(lines),
            },
        ));
    }
    Ok(results)
}

/// The text with Koru's entry taken out (or the value it replaced put back).
fn entry_removed(text: &str, undo: &EditUndo) -> Result<String, String> {
    match undo {
        EditUndo::Entry {
            format,
            keys,
            made,
            previous,
        } => {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            match previous {
                Some(previous) => edit::set_at(text, *format, &keys, previous).map(|(t, _)| t),
                None => edit::remove_at(text, *format, &keys, *made),
            }
            .map_err(|e| e.to_string())
        }
        EditUndo::Hooks { .. } => json_settings::uninstall(text, &[])
            .map(|edited| {
                if edited.events.is_empty() {
                    text.to_string()
                } else {
                    edited.text
                }
            })
            .map_err(|e| e.to_string()),
        EditUndo::WholeFile => Ok(text.to_string()),
    }
}

/// The files an undo reads and writes; in a dry run the writes stay here, so that a later
/// record of the same file is judged by what the earlier undo would leave.
struct UndoFiles {
    dry_run: bool,
    written: std::collections::BTreeMap<PathBuf, Option<Vec<u8>>>,
}

impl UndoFiles {
    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, String> {
        if let Some(bytes) = self.written.get(path) {
            return Ok(bytes.clone());
        }
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    fn write(&mut self, path: &Path, text: &str) -> Result<(), String> {
        if self.dry_run {
            self.written
                .insert(path.to_path_buf(), Some(text.as_bytes().to_vec()));
            return Ok(());
        }
        replace_file(path, text)
    }

    fn remove(&mut self, path: &Path, made_dirs: &[PathBuf]) -> Result<(), String> {
        if self.dry_run {
            self.written.insert(path.to_path_buf(), None);
            return Ok(());
        }
        std::fs::remove_file(path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
        for dir in made_dirs {
            let _ = std::fs::remove_dir(dir);
        }
        Ok(())
    }
}

/// A record and what undoing it did (or would do), or why it could not be undone.
pub type Undone = (Record, Result<String, String>);

/// What undoing one record did or would do.
fn undo_record(
    machine: &Machine,
    record: &Record,
    files: &mut UndoFiles,
    stamp: &str,
) -> Result<String, String> {
    let dry_run = files.dry_run;
    match &record.did {
        Did::Edit {
            path,
            backup,
            made_dirs,
            after_sha256,
            undo,
            after_undo,
        } => {
            let shown = machine.show(path);
            let Some(current) = files.read(path)? else {
                return Ok(format!("{shown} is gone already"));
            };
            let line = if sha256(&current) == *after_sha256 {
                // As setup left it: put back byte for byte.
                match backup {
                    Some(backup) => {
                        let before = std::fs::read_to_string(backup).map_err(|e| {
                            format!("cannot read the backup {}: {e}", backup.display())
                        })?;
                        files.write(path, &before)?;
                        format!("{shown} put back as it was")
                    }
                    None => {
                        files.remove(path, made_dirs)?;
                        format!("{shown} removed (setup made it)")
                    }
                }
            } else if matches!(undo, EditUndo::WholeFile) {
                return Err(format!(
                    "{shown} was changed after setup wrote it: left as it is; remove it yourself if you no longer want it"
                ));
            } else {
                let text =
                    String::from_utf8(current).map_err(|_| format!("{shown}: not UTF-8 text"))?;
                let edited = entry_removed(&text, undo)
                    .map_err(|e| format!("{shown}: {e}; the file was left as it is"))?;
                if edited == text {
                    format!("{shown}: Koru's entry is not there any more")
                } else {
                    if !dry_run {
                        let aside = backup_path(machine, stamp, path)?;
                        write_new(&aside, &text, 0o600)
                            .map_err(|e| format!("cannot back up to {}: {e}", aside.display()))?;
                    }
                    files.write(path, &edited)?;
                    format!(
                        "{shown}: Koru's entry taken out; the changes made since setup are kept"
                    )
                }
            };
            if !dry_run {
                run_commands(machine, after_undo)?;
            }
            Ok(line)
        }
        Did::Run { undo, .. } => {
            if !dry_run {
                run_commands(machine, undo)?;
            }
            Ok(format!(
                "ran {}",
                undo.iter()
                    .map(|a| super::show_command(a))
                    .collect::<Vec<_>>()
                    .join(" && ")
            ))
        }
        Did::Unpack { dir, replaced } => {
            if !dry_run {
                if dir.exists() {
                    std::fs::remove_dir_all(dir)
                        .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
                }
                if let Some(replaced) = replaced {
                    std::fs::rename(replaced, dir)
                        .map_err(|e| format!("cannot put {} back: {e}", dir.display()))?;
                }
            }
            Ok(match replaced {
                Some(_) => format!("{} put back as it was", machine.show(dir)),
                None => format!("{} removed", machine.show(dir)),
            })
        }
    }
}

/// Undoes what setup recorded for `parts`, newest first; undone records leave the manifest,
/// failed ones stay for another try. `dry_run` says what would be done and changes nothing.
pub fn undo(
    machine: &Machine,
    parts: &[Part],
    dry_run: bool,
    stamp: &str,
) -> Result<Vec<Undone>, String> {
    let mut manifest = Manifest::load(machine)?;
    let mut results = Vec::new();
    let mut files = UndoFiles {
        dry_run,
        written: Default::default(),
    };
    let mut index = manifest.records.len();
    while index > 0 {
        index -= 1;
        if !parts.contains(&manifest.records[index].part) {
            continue;
        }
        let record = manifest.records[index].clone();
        let outcome = undo_record(machine, &record, &mut files, stamp);
        if outcome.is_ok() && !dry_run {
            manifest.records.remove(index);
            manifest.save(machine)?;
        }
        results.push((record, outcome));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::{mcp, plan, Planned};

    fn machine(home: &Path) -> Machine {
        Machine::with_vars(home, Path::new("/opt/koru/bin/koru"), &[("PATH", "")])
    }

    #[test]
    fn undo_puts_an_untouched_file_back_byte_for_byte_and_removes_a_made_one() {
        let home = tempfile::tempdir().unwrap();
        let m = machine(home.path());
        let codex = home.path().join(".codex");
        std::fs::create_dir_all(&codex).unwrap();
        let mine = "# mine\nmodel = \"o3\"   # spaces kept\n";
        std::fs::write(codex.join("config.toml"), mine).unwrap();
        std::fs::create_dir_all(home.path().join(".config/Code")).unwrap();
        let plans = mcp::plan(&m, &Planned::default());
        let results = apply(&m, &plans, "s1").unwrap();
        assert!(
            results.iter().all(|(_, r)| matches!(r, Applied::Done(_))),
            "{results:?}"
        );
        assert!(std::fs::read_to_string(codex.join("config.toml"))
            .unwrap()
            .contains("[mcp_servers.koru]"));
        let vscode = home.path().join(".config/Code/User/mcp.json");
        assert!(vscode.exists());
        // Twice = once.
        let again = plan(&m, &[Part::Mcp], &Default::default());
        assert!(
            again
                .iter()
                .all(|p| matches!(p.state, ToolState::Current { .. })),
            "{again:?}"
        );
        let undone = undo(&m, &Part::ALL, false, "s2").unwrap();
        assert_eq!(undone.len(), 2);
        assert_eq!(
            std::fs::read_to_string(codex.join("config.toml")).unwrap(),
            mine
        );
        assert!(!vscode.exists());
        assert!(
            !home.path().join(".config/Code/User").exists(),
            "the folder setup made goes too"
        );
        assert!(home.path().join(".config/Code").exists());
        assert!(Manifest::load(&m).unwrap().records.is_empty());
    }

    #[test]
    fn undo_after_the_user_edited_keeps_their_edits() {
        let home = tempfile::tempdir().unwrap();
        let m = machine(home.path());
        let file = home.path().join(".cursor/mcp.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "{\n  \"mcpServers\": {}\n}\n").unwrap();
        apply(&m, &mcp::plan(&m, &Planned::default()), "s1").unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let (edited, _) = edit::set_at(
            &text,
            edit::Format::Jsonc,
            &["mcpServers", "mine"],
            &serde_json::json!({"command": "x"}),
        )
        .unwrap();
        std::fs::write(&file, &edited).unwrap();
        let undone = undo(&m, &Part::ALL, false, "s2").unwrap();
        assert_eq!(
            undone[0].1.as_deref().unwrap(),
            "~/.cursor/mcp.json: Koru's entry taken out; the changes made since setup are kept"
        );
        let after = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            edit::read_at(&after, edit::Format::Jsonc, &["mcpServers", "koru"]).unwrap(),
            None
        );
        assert_eq!(
            edit::read_at(
                &after,
                edit::Format::Jsonc,
                &["mcpServers", "mine", "command"]
            )
            .unwrap(),
            Some(serde_json::json!("x"))
        );
    }
}

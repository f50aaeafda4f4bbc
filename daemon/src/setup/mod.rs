//! `koru setup`: finds the IDEs, terminal agents and MCP clients on this machine, works out what wiring Koru into each would change (files with their diffs, commands, a plugin folder), and — applied by `apply` — records each change in a manifest so that `koru setup --undo` takes back exactly that and nothing the user did since.

pub mod edit;
pub mod hooks;
pub mod ide;
pub mod login;
pub mod manifest;
pub mod mcp;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use edit::Format;

/// The parts of setup `--only` picks from.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The daemon started at login (systemd user unit)
    Login,
    /// Koru's extension in each VS Code-family IDE, its plugin in each JetBrains IDE
    Ide,
    /// Koru's hooks in each terminal agent (Claude Code, Codex CLI, Gemini CLI)
    Hooks,
    /// `koru mcp` registered with each MCP client
    Mcp,
}

impl Part {
    pub const ALL: [Part; 4] = [Part::Login, Part::Ide, Part::Hooks, Part::Mcp];

    /// The heading the plan is printed under.
    pub fn heading(self) -> &'static str {
        match self {
            Part::Login => "At login",
            Part::Ide => "IDE extensions and plugins",
            Part::Hooks => "Agent hooks",
            Part::Mcp => "MCP clients",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Part::Login => "login",
            Part::Ide => "ide",
            Part::Hooks => "hooks",
            Part::Mcp => "mcp",
        }
    }
}

/// What setup knows of the machine: the user's home, the environment variables that move
/// tools' files, the `PATH` to find their launchers on, and this binary. Built once from the
/// process environment (`from_env`) or by tests from a temporary home.
#[derive(Debug, Clone)]
pub struct Machine {
    pub home: PathBuf,
    pub koru: PathBuf,
    vars: BTreeMap<String, String>,
}

/// The variables setup reads (anything else in the environment is ignored).
const VARS: &[&str] = &[
    "PATH",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "GEMINI_CLI_HOME",
];

impl Machine {
    /// The machine as this process sees it (`None` when `HOME` is not set).
    pub fn from_env(koru: PathBuf) -> Option<Machine> {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
        let vars = VARS
            .iter()
            .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
            .collect();
        Some(Machine {
            home: PathBuf::from(home),
            koru,
            vars,
        })
    }

    /// A machine with exactly these variables (tests).
    pub fn with_vars(home: &Path, koru: &Path, vars: &[(&str, &str)]) -> Machine {
        Machine {
            home: home.to_path_buf(),
            koru: koru.to_path_buf(),
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A variable's value; empty counts as unset.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The variables for a child process setup runs (the tools' own launchers).
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `$VAR` when set, else `~/<fallback>`.
    fn dir_var(&self, name: &str, fallback: &str) -> PathBuf {
        self.var(name)
            .map(PathBuf::from)
            .unwrap_or_else(|| self.home.join(fallback))
    }

    pub fn config_home(&self) -> PathBuf {
        self.dir_var("XDG_CONFIG_HOME", ".config")
    }

    pub fn data_home(&self) -> PathBuf {
        self.dir_var("XDG_DATA_HOME", ".local/share")
    }

    pub fn state_home(&self) -> PathBuf {
        self.dir_var("XDG_STATE_HOME", ".local/state")
    }

    /// Where setup keeps its manifest and the backups of the files it changed.
    pub fn setup_dir(&self) -> PathBuf {
        self.state_home().join("koru").join("setup")
    }

    /// A program's path on `PATH` (an executable file), like the shell finds it.
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.var("PATH")?;
        std::env::split_paths(path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(program))
            .find(|candidate| {
                std::fs::metadata(candidate)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// `program` to run with this machine's environment (and nothing else of setup's own),
    /// stdin closed.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut command = std::process::Command::new(program);
        command
            .env_clear()
            .envs(self.vars())
            .env("HOME", &self.home)
            .stdin(std::process::Stdio::null());
        command
    }

    /// `~` for the home folder in paths shown to people.
    pub fn show(&self, path: &Path) -> String {
        match path.strip_prefix(&self.home) {
            Ok(rest) if !self.home.as_os_str().is_empty() => format!("~/{}", rest.display()),
            _ => path.display().to_string(),
        }
    }
}

/// What setup found for one tool and what it would do there.
#[derive(Debug, Clone)]
pub struct ToolPlan {
    pub part: Part,
    /// A stable name for the tool in this part (`mcp:claude-code`, `ide:code`, …).
    pub key: String,
    /// The tool, for people (`Claude Code`, `VS Code (code)`, …).
    pub tool: String,
    pub state: ToolState,
}

/// Where a tool stands.
#[derive(Debug, Clone)]
pub enum ToolState {
    /// Wired already; `detail` says where.
    Current { detail: String },
    /// These changes wire it; `stale` says what was there and why it no longer works.
    Changes {
        changes: Vec<Change>,
        stale: Option<String>,
    },
    /// It cannot be wired here: why, and what to do instead.
    Unavailable { why: String },
    /// Something stopped setup (a file that does not parse, …); nothing of it was touched.
    Failed { error: String },
}

/// One change setup makes.
#[derive(Debug, Clone)]
pub enum Change {
    Edit(FileEdit),
    Run(Run),
    Unpack(Unpack),
}

/// Koru's entry written into a file; every other byte stays.
#[derive(Debug, Clone)]
pub struct FileEdit {
    pub path: PathBuf,
    /// The file's text now (`None`: there is no file).
    pub before: Option<String>,
    pub after: String,
    /// What changes, for people (`add koru to mcpServers`).
    pub summary: String,
    /// How to take the entry out again if the file has changed since.
    pub undo: EditUndo,
    /// Commands to run after the edit is undone (`systemctl --user daemon-reload`).
    pub after_undo: Vec<Vec<String>>,
}

impl FileEdit {
    /// The change as a unified diff.
    pub fn diff(&self, machine: &Machine) -> String {
        crate::agent_hooks::install::unified_diff(
            self.before.as_deref(),
            &self.after,
            &machine.show(&self.path),
            2,
        )
    }
}

/// How an edit is taken back when the file has changed since setup wrote it (when it has
/// not, the file as it was is put back byte for byte).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EditUndo {
    /// A value set at a key path: removed (or the value it replaced put back), and the
    /// `made` nearest parents removed when left empty.
    Entry {
        format: Format,
        keys: Vec<String>,
        made: usize,
        previous: Option<Value>,
    },
    /// Koru's hook entries in an agent's settings (`koru hook uninstall`).
    Hooks { agent: String },
    /// A file Koru wrote whole: removed only while it is as Koru wrote it.
    WholeFile,
}

/// Commands to run, and the ones that undo them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub summary: String,
    pub argv: Vec<Vec<String>>,
    pub undo: Vec<Vec<String>>,
}

/// A plugin archive unpacked into a folder an IDE loads plugins from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unpack {
    pub summary: String,
    pub archive: PathBuf,
    /// The folder the archive's top folder lands in.
    pub into: PathBuf,
    /// The archive's top folder (`koru-jetbrains`).
    pub folder: String,
}

/// The shell-like rendering of a command, for plans and messages.
pub fn show_command(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            if !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c))
            {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads files for planning as they will be once the changes planned before are made (two
/// parts may edit one file: Gemini CLI's hooks and its MCP servers share `settings.json`).
#[derive(Debug, Default)]
pub struct Planned {
    texts: BTreeMap<PathBuf, Option<String>>,
    /// Plans that are only read (doctor): a missing entry is not written out into the
    /// file's new text, which for a file of tens of megabytes costs seconds.
    pub describe_only: bool,
}

impl Planned {
    /// The file's text (`None`: no file); an error other than "not found" is the message.
    pub fn read(&self, path: &Path) -> Result<Option<String>, String> {
        if let Some(text) = self.texts.get(path) {
            return Ok(text.clone());
        }
        match std::fs::read(path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| format!("{}: not UTF-8 text", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(format!("cannot read {}: {error}", path.display())),
        }
    }

    fn note(&mut self, state: &ToolState) {
        if let ToolState::Changes { changes, .. } = state {
            for change in changes {
                if let Change::Edit(edit) = change {
                    self.texts
                        .insert(edit.path.clone(), Some(edit.after.clone()));
                }
            }
        }
    }
}

/// Everything setup would do for `parts` on `machine`, tool by tool, in the order it is done.
pub fn plan(machine: &Machine, parts: &[Part], options: &ide::Sources) -> Vec<ToolPlan> {
    plan_with(machine, parts, options, Planned::default())
}

fn plan_with(
    machine: &Machine,
    parts: &[Part],
    options: &ide::Sources,
    mut planned: Planned,
) -> Vec<ToolPlan> {
    let mut plans = Vec::new();
    for part in Part::ALL {
        if !parts.contains(&part) {
            continue;
        }
        let found = match part {
            Part::Login => login::plan(machine, &planned),
            Part::Ide => ide::plan(machine, options),
            Part::Hooks => hooks::plan(machine, &planned),
            Part::Mcp => mcp::plan(machine, &planned),
        };
        for tool in found {
            planned.note(&tool.state);
            plans.push(tool);
        }
    }
    plans
}

/// Where each tool found stands with Koru, for `koru doctor`: the plan of every part, read
/// as wired, not wired, stale, not possible or cannot, with the command that fixes it.
pub fn wired(machine: &Machine, sources: &ide::Sources) -> Vec<crate::doctor::report::WiredCheck> {
    use crate::doctor::report::{WiredCheck, WiredState};
    let planned = Planned {
        describe_only: true,
        ..Planned::default()
    };
    plan_with(machine, &Part::ALL, sources, planned)
        .into_iter()
        .filter(|tool| tool.key != "ide:vsix")
        .map(|tool| {
            let fix = Some(format!("koru setup --only {}", tool.part.name()));
            let (state, detail, fix) = match tool.state {
                ToolState::Current { detail } => (WiredState::Wired, detail, None),
                ToolState::Changes {
                    stale: Some(stale), ..
                } => (WiredState::Stale, stale, fix),
                ToolState::Changes { changes, .. } => (
                    WiredState::NotWired,
                    "setup would ".to_string()
                        + &changes
                            .iter()
                            .map(|change| match change {
                                Change::Edit(edit) => edit.summary.clone(),
                                Change::Run(run) => run.summary.clone(),
                                Change::Unpack(unpack) => unpack.summary.clone(),
                            })
                            .collect::<Vec<_>>()
                            .join("; "),
                    fix,
                ),
                ToolState::Unavailable { why } => (WiredState::NotPossible, why, None),
                ToolState::Failed { error } => (
                    WiredState::Cannot,
                    error,
                    Some(format!(
                        "fix the file, then koru setup --only {}",
                        tool.part.name()
                    )),
                ),
            };
            WiredCheck {
                part: tool.part.name().to_string(),
                tool: tool.tool,
                state,
                detail,
                fix,
            }
        })
        .collect()
}

/// How an entry found in a file compares with Koru's: `None` when it is Koru's as this
/// binary would write it, else what is wrong with it, for people.
pub fn entry_difference(found: &Value, wanted: &Value, koru: &Path) -> Option<String> {
    if found == wanted {
        return None;
    }
    let command = found
        .get("command")
        .and_then(|c| c.as_str().or_else(|| c.get(0).and_then(Value::as_str)));
    Some(match command {
        Some(program) if Path::new(program) != koru && !Path::new(program).exists() => {
            format!("runs {program}, which is not there")
        }
        Some(program) if Path::new(program) != koru => {
            format!("runs {program}, not this koru ({})", koru.display())
        }
        _ => "differs from what this koru writes".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_finds_executables_only_and_xdg_dirs_fall_back_to_home() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("code"), "#!/bin/sh\n").unwrap();
        std::fs::write(bin.join("cursor"), "not a program").unwrap();
        std::fs::set_permissions(bin.join("code"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", bin.display());
        let machine = Machine::with_vars(
            dir.path(),
            Path::new("/k"),
            &[("PATH", &path), ("XDG_CONFIG_HOME", "")],
        );
        assert_eq!(machine.which("code"), Some(bin.join("code")));
        assert_eq!(machine.which("cursor"), None);
        assert_eq!(machine.config_home(), dir.path().join(".config"));
        assert_eq!(
            machine.setup_dir(),
            dir.path().join(".local/state/koru/setup")
        );
        assert_eq!(
            machine.show(&dir.path().join(".codex/config.toml")),
            "~/.codex/config.toml"
        );
    }

    #[test]
    fn an_entry_is_stale_when_it_runs_another_binary() {
        let wanted = serde_json::json!({"command": "/opt/koru", "args": ["mcp"]});
        assert_eq!(
            entry_difference(&wanted, &wanted, Path::new("/opt/koru")),
            None
        );
        let moved = serde_json::json!({"command": "/gone/koru", "args": ["mcp"]});
        assert_eq!(
            entry_difference(&moved, &wanted, Path::new("/opt/koru")).unwrap(),
            "runs /gone/koru, which is not there"
        );
        let opencode = serde_json::json!({"type": "local", "command": ["/bin/sh", "mcp"]});
        assert_eq!(
            entry_difference(&opencode, &wanted, Path::new("/opt/koru")).unwrap(),
            "runs /bin/sh, not this koru (/opt/koru)"
        );
        assert_eq!(
            show_command(&[
                "code".into(),
                "--install-extension".into(),
                "/a b/k.vsix".into()
            ]),
            "code --install-extension '/a b/k.vsix'"
        );
    }
}

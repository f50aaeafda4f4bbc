//! The MCP clients `koru setup` registers `koru mcp` with — Claude Code, Codex CLI, Gemini CLI, opencode, Cursor, Windsurf, Antigravity and each VS Code-family user profile — where each keeps its user-level servers, in which format, and the entry each expects (docs/research/setup-targets.md has the sources).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::edit::{self, Format};
use super::{Change, EditUndo, FileEdit, Machine, Part, Planned, ToolPlan, ToolState};

/// One MCP client's user-level server list.
#[derive(Debug, Clone)]
pub struct Client {
    pub key: String,
    pub title: String,
    /// Launchers on `PATH` that say the client is installed.
    pub programs: Vec<&'static str>,
    /// Folders or files whose presence says it is installed (or has run).
    pub markers: Vec<PathBuf>,
    pub file: PathBuf,
    pub format: Format,
    /// The key path of Koru's entry (`["mcpServers", "koru"]`).
    pub keys: [&'static str; 2],
    pub entry: Value,
}

impl Client {
    /// Whether the client is on this machine.
    pub fn found(&self, machine: &Machine) -> bool {
        self.programs.iter().any(|p| machine.which(p).is_some())
            || self.markers.iter().any(|m| m.exists())
    }
}

/// A stdio entry with `command` and `args` (most clients' shape); written in the order
/// the clients write it (`type`, `command`, `args`, `env`).
fn command_args(koru: &Path, typed: bool) -> Value {
    let mut entry = json!({"command": koru.display().to_string(), "args": ["mcp"]});
    if typed {
        entry["type"] = json!("stdio");
    }
    entry
}

/// The VS Code-family user-data folders whose `User/mcp.json` holds user-level servers:
/// (key, title, launcher, folder).
fn vscode_profiles(
    machine: &Machine,
) -> Vec<(&'static str, &'static str, Option<&'static str>, PathBuf)> {
    let config = machine.config_home();
    let flatpak = machine.home.join(".var/app");
    vec![
        ("code", "VS Code", Some("code"), config.join("Code")),
        (
            "code-insiders",
            "VS Code Insiders",
            Some("code-insiders"),
            config.join("Code - Insiders"),
        ),
        (
            "codium",
            "VSCodium",
            Some("codium"),
            config.join("VSCodium"),
        ),
        (
            "code-oss",
            "Code - OSS",
            Some("code-oss"),
            config.join("Code - OSS"),
        ),
        (
            "code-server",
            "code-server",
            Some("code-server"),
            machine.data_home().join("code-server"),
        ),
        (
            "flatpak-code",
            "VS Code (flatpak)",
            None,
            flatpak.join("com.visualstudio.code/config/Code"),
        ),
        (
            "flatpak-codium",
            "VSCodium (flatpak)",
            None,
            flatpak.join("com.vscodium.codium/config/VSCodium"),
        ),
    ]
}

/// Every client setup knows, with this machine's paths.
pub fn clients(machine: &Machine) -> Vec<Client> {
    let home = &machine.home;
    let koru = &machine.koru;
    let claude_dir = machine.var("CLAUDE_CONFIG_DIR").map(PathBuf::from);
    let codex_home = machine
        .var("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    let gemini_home = machine
        .var("GEMINI_CLI_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.clone())
        .join(".gemini");
    let opencode_dir = machine.config_home().join("opencode");
    let opencode_file = ["opencode.jsonc", "opencode.json", "config.json"]
        .iter()
        .map(|name| opencode_dir.join(name))
        .find(|path| path.exists())
        .unwrap_or_else(|| opencode_dir.join("opencode.jsonc"));
    let mut clients = vec![
        Client {
            key: "claude-code".into(),
            title: "Claude Code".into(),
            programs: vec!["claude"],
            markers: vec![home.join(".claude.json"), home.join(".claude")],
            file: claude_dir
                .clone()
                .unwrap_or_else(|| home.clone())
                .join(".claude.json"),
            format: Format::Json,
            keys: ["mcpServers", "koru"],
            // As `claude mcp add -s user koru -- KORU mcp` writes it.
            entry: json!({"type": "stdio", "command": koru.display().to_string(), "args": ["mcp"], "env": {}}),
        },
        Client {
            key: "codex".into(),
            title: "Codex CLI".into(),
            programs: vec!["codex"],
            markers: vec![codex_home.clone()],
            file: codex_home.join("config.toml"),
            format: Format::Toml,
            keys: ["mcp_servers", "koru"],
            entry: command_args(koru, false),
        },
        Client {
            key: "gemini-cli".into(),
            title: "Gemini CLI".into(),
            programs: vec!["gemini"],
            markers: vec![gemini_home.join("settings.json")],
            file: gemini_home.join("settings.json"),
            format: Format::JsoncNoTrailingCommas,
            keys: ["mcpServers", "koru"],
            entry: command_args(koru, false),
        },
        Client {
            key: "opencode".into(),
            title: "opencode".into(),
            programs: vec!["opencode"],
            markers: vec![opencode_dir.clone()],
            file: opencode_file,
            format: Format::Jsonc,
            keys: ["mcp", "koru"],
            entry: json!({"type": "local", "command": [koru.display().to_string(), "mcp"]}),
        },
        Client {
            key: "cursor".into(),
            title: "Cursor".into(),
            programs: vec!["cursor", "cursor-agent"],
            markers: vec![home.join(".cursor"), machine.config_home().join("Cursor")],
            file: home.join(".cursor/mcp.json"),
            format: Format::Jsonc,
            keys: ["mcpServers", "koru"],
            entry: command_args(koru, false),
        },
        Client {
            key: "windsurf".into(),
            title: "Windsurf".into(),
            programs: vec!["windsurf"],
            markers: vec![
                home.join(".codeium/windsurf"),
                machine.config_home().join("Windsurf"),
            ],
            file: home.join(".codeium/windsurf/mcp_config.json"),
            format: Format::Jsonc,
            keys: ["mcpServers", "koru"],
            entry: command_args(koru, false),
        },
        Client {
            key: "antigravity".into(),
            title: "Antigravity".into(),
            programs: vec!["antigravity"],
            markers: vec![
                home.join(".gemini/antigravity"),
                machine.config_home().join("Antigravity"),
            ],
            file: home.join(".gemini/antigravity/mcp_config.json"),
            format: Format::Jsonc,
            keys: ["mcpServers", "koru"],
            entry: command_args(koru, false),
        },
    ];
    for (key, title, program, dir) in vscode_profiles(machine) {
        clients.push(Client {
            key: key.into(),
            title: title.into(),
            programs: program.into_iter().collect(),
            markers: vec![dir.clone()],
            file: dir.join("User/mcp.json"),
            format: Format::Jsonc,
            keys: ["servers", "koru"],
            entry: command_args(koru, true),
        });
    }
    clients
}

/// The plan for one client: its entry added, brought up to date, or already there.
pub fn plan_client(client: &Client, machine: &Machine, planned: &Planned) -> ToolState {
    let shown = machine.show(&client.file);
    let before = match planned.read(&client.file) {
        Ok(before) => before,
        Err(error) => return ToolState::Failed { error },
    };
    let text = before.as_deref().unwrap_or("");
    let found = match edit::read_at(text, client.format, &client.keys) {
        Ok(found) => found,
        Err(error) => {
            return ToolState::Failed {
                error: format!("{shown}: {error}; the file was left as it is"),
            }
        }
    };
    let stale = match &found {
        Some(found) => match super::entry_difference(found, &client.entry, &machine.koru) {
            None => {
                return ToolState::Current {
                    detail: format!("`{}` in {shown}", client.keys.join(".")),
                }
            }
            Some(why) => Some(format!("`{}` {why}", client.keys.join("."))),
        },
        None => None,
    };
    let written = if planned.describe_only {
        Ok((text.to_string(), 0))
    } else {
        edit::set_at(text, client.format, &client.keys, &client.entry)
    };
    let (after, made) = match written {
        Ok(done) => done,
        Err(error) => {
            return ToolState::Failed {
                error: format!("{shown}: {error}; the file was left as it is"),
            }
        }
    };
    let verb = if found.is_some() { "update" } else { "add" };
    ToolState::Changes {
        changes: vec![Change::Edit(FileEdit {
            path: client.file.clone(),
            before,
            after,
            summary: format!("{verb} `koru` in `{}` of {shown}", client.keys[0]),
            undo: EditUndo::Entry {
                format: client.format,
                keys: client.keys.iter().map(|k| k.to_string()).collect(),
                made,
                previous: found,
            },
            after_undo: Vec::new(),
        })],
        stale,
    }
}

/// A plan for every MCP client found on the machine.
pub fn plan(machine: &Machine, planned: &Planned) -> Vec<ToolPlan> {
    clients(machine)
        .into_iter()
        .filter(|client| client.found(machine))
        .map(|client| ToolPlan {
            part: Part::Mcp,
            key: format!("mcp:{}", client.key),
            tool: client.title.clone(),
            state: plan_client(&client, machine, planned),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(home: &Path) -> Machine {
        Machine::with_vars(home, Path::new("/opt/koru/bin/koru"), &[("PATH", "")])
    }

    fn client<'a>(clients: &'a [Client], key: &str) -> &'a Client {
        clients.iter().find(|c| c.key == key).unwrap()
    }

    #[test]
    fn clients_are_found_by_their_folders_and_written_where_they_read() {
        let home = tempfile::tempdir().unwrap();
        let m = machine(home.path());
        assert!(
            plan(&m, &Planned::default()).is_empty(),
            "nothing installed"
        );
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        std::fs::create_dir_all(home.path().join(".config/Code")).unwrap();
        let plans = plan(&m, &Planned::default());
        let keys: Vec<_> = plans.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["mcp:codex", "mcp:code"]);
        let clients = clients(&m);
        assert_eq!(
            client(&clients, "code").file,
            home.path().join(".config/Code/User/mcp.json")
        );
        assert_eq!(
            client(&clients, "code").entry,
            json!({"type": "stdio", "command": "/opt/koru/bin/koru", "args": ["mcp"]})
        );
        let ToolState::Changes { changes, stale } = &plans[0].state else {
            panic!("{:?}", plans[0].state)
        };
        assert_eq!(stale, &None);
        let Change::Edit(edit) = &changes[0] else {
            panic!()
        };
        assert_eq!(
            edit.after,
            "[mcp_servers.koru]\ncommand = \"/opt/koru/bin/koru\"\nargs = [\"mcp\"]\n"
        );
    }

    #[test]
    fn an_entry_already_there_is_current_and_one_for_another_binary_is_stale() {
        let home = tempfile::tempdir().unwrap();
        let m = machine(home.path());
        let file = home.path().join(".cursor/mcp.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "{\"mcpServers\": {\"koru\": {\"command\": \"/opt/koru/bin/koru\", \"args\": [\"mcp\"]}}}\n",
        )
        .unwrap();
        let cursor = client(&clients(&m), "cursor").clone();
        assert!(matches!(
            plan_client(&cursor, &m, &Planned::default()),
            ToolState::Current { .. }
        ));
        std::fs::write(
            &file,
            "{\"mcpServers\": {\"koru\": {\"command\": \"/old/koru\", \"args\": [\"mcp\"]}}}\n",
        )
        .unwrap();
        let ToolState::Changes { stale, changes } = plan_client(&cursor, &m, &Planned::default())
        else {
            panic!()
        };
        assert_eq!(
            stale.as_deref(),
            Some("`mcpServers.koru` runs /old/koru, which is not there")
        );
        let Change::Edit(edit) = &changes[0] else {
            panic!()
        };
        // The entry is written anew; the bytes around it stay.
        assert_eq!(
            edit.after,
            "{\"mcpServers\": {\"koru\": {\n      \"command\": \"/opt/koru/bin/koru\",\n      \"args\": [\"mcp\"]\n    }}}\n"
        );
        let EditUndo::Entry { previous, .. } = &edit.undo else {
            panic!()
        };
        assert_eq!(previous.as_ref().unwrap()["command"], "/old/koru");
    }

    #[test]
    fn a_file_its_client_would_refuse_is_reported_and_not_planned() {
        let home = tempfile::tempdir().unwrap();
        let m = machine(home.path());
        std::fs::write(
            home.path().join(".claude.json"),
            "{\n  // no comments here\n}\n",
        )
        .unwrap();
        let plans = plan(&m, &Planned::default());
        let ToolState::Failed { error } = &plans[0].state else {
            panic!("{:?}", plans[0].state)
        };
        assert!(
            error.starts_with(
                "~/.claude.json: not valid strict JSON (no comments, no trailing commas): "
            ),
            "{error}"
        );
        assert!(error.ends_with("; the file was left as it is"), "{error}");
    }
}

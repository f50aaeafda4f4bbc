//! `koru setup` and `koru setup --undo` against a temporary home holding each client's config file as the client writes it (comments, trailing commas where allowed, other servers and hooks): only Koru's entry goes in, twice is once, undo gives the files back byte for byte, a file that does not parse is left alone, `--dry-run` writes nothing; and the real Claude Code, Codex CLI and Gemini CLI list Koru after setup and not after undo.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use koru_system_tests::agents::{agents_installed, repo_root};
use koru_system_tests::{koru_bin, Sandbox};

/// Claude Code's `~/.claude.json` as it writes it: 2-space JSON, no final newline.
const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "installMethod": "npm",
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {}
    }
  },
  "projects": {
    "/home/me/src/app": {
      "allowedTools": [],
      "mcpServers": {}
    }
  },
  "userID": "0123abcd"
}"#;

const CODEX_TOML: &str = r#"# Codex settings
model = "gpt-5-codex"
approval_policy = "on-request"   # ask before running commands

[mcp_servers.github]
# the GitHub server
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[mcp_servers.github.env]
GITHUB_TOKEN = "ghp_example"

[profiles.fast]
model = "gpt-5-mini"
"#;

/// Gemini CLI's settings: comments allowed, trailing commas not; a hook of the user's.
const GEMINI_JSON: &str = r#"{
  // Gemini CLI settings
  "theme": "GitHub",
  "mcpServers": {
    "files": { "command": "node", "args": ["files.js"] } // local files
  },
  "hooks": {
    "BeforeTool": [
      { "matcher": "run_shell_command", "hooks": [{ "type": "command", "command": "./guard.sh" }] }
    ]
  }
}
"#;

const OPENCODE_JSONC: &str = r#"{
  "$schema": "https://opencode.ai/config.json",
  // my models
  "model": "anthropic/claude-sonnet-4",
  "mcp": {
    "fs": {
      "type": "local",
      "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me"],
    },
  },
}
"#;

/// VS Code's user `mcp.json` (tabs, as VS Code writes it; a trailing comma).
const VSCODE_JSON: &str = "{\n\t// MCP servers for every workspace\n\t\"servers\": {\n\t\t\"github\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.com/mcp/\"\n\t\t},\n\t},\n\t\"inputs\": []\n}\n";

const CURSOR_JSON: &str = r#"{
  "mcpServers": {
    "linear": {
      "url": "https://mcp.linear.app/sse"
    }
  }
}
"#;

const WINDSURF_JSON: &str = r#"{
  "mcpServers": {
    "linear": {
      "serverUrl": "https://mcp.linear.app/sse"
    }
  }
}
"#;

/// A Claude Code hooks file with a hook of the user's.
const CLAUDE_SETTINGS: &str = r#"{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/check-bash"
          }
        ]
      }
    ]
  }
}
"#;

/// Each file, as a path below home and its text.
fn files() -> Vec<(&'static str, &'static str)> {
    vec![
        (".claude.json", CLAUDE_JSON),
        (".claude/settings.json", CLAUDE_SETTINGS),
        (".codex/config.toml", CODEX_TOML),
        (".gemini/settings.json", GEMINI_JSON),
        (".config/opencode/opencode.jsonc", OPENCODE_JSONC),
        (".config/Code/User/mcp.json", VSCODE_JSON),
        (".cursor/mcp.json", CURSOR_JSON),
        (".codeium/windsurf/mcp_config.json", WINDSURF_JSON),
    ]
}

/// A home, a `PATH` with only what a test puts there, and `koru setup` run in them.
struct Home {
    sandbox: Sandbox,
    bin: PathBuf,
}

impl Home {
    fn new() -> Home {
        let sandbox = Sandbox::new();
        let bin = sandbox.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        Home { sandbox, bin }
    }

    fn home(&self) -> PathBuf {
        self.sandbox.home()
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.home().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.home().join(relative)).unwrap()
    }

    /// `koru ARGS` with this home, no XDG variables set, and `PATH` = the test's bin.
    fn koru(&self, args: &[&str]) -> Output {
        let output = Command::new(koru_bin())
            .args(args)
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", &self.bin)
            .env("KORU_SOCKET", self.sandbox.socket())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        eprintln!(
            "koru {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// `koru setup ARGS`.
    fn setup(&self, args: &[&str]) -> Output {
        self.koru(&[&["setup"], args].concat())
    }

    /// Every file under home (path → bytes).
    fn tree(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if entry.file_type().unwrap().is_dir() {
                    walk(&path, into);
                } else {
                    into.insert(path.clone(), std::fs::read(&path).unwrap());
                }
            }
        }
        let mut tree = BTreeMap::new();
        walk(&self.home(), &mut tree);
        tree
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// How `after` differs from `before`, character by character: what was taken out and what
/// was put in (each joined).
fn inserted(before: &str, after: &str) -> (String, String) {
    let diff = similar::TextDiff::from_chars(before, after);
    let (mut taken, mut put) = (String::new(), String::new());
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Delete => taken.push_str(change.value()),
            similar::ChangeTag::Insert => put.push_str(change.value()),
            similar::ChangeTag::Equal => {}
        }
    }
    (taken, put)
}

#[test]
fn setup_adds_only_koru_to_each_format_twice_is_once_and_undo_gives_every_byte_back() {
    let home = Home::new();
    for (path, text) in files() {
        home.write(path, text);
    }
    let koru = koru_bin().display().to_string();
    let before = home.tree();

    let dry = home.setup(&["--dry-run"]);
    assert!(dry.status.success());
    assert_eq!(home.tree(), before, "--dry-run writes nothing");
    assert!(!home.home().join(".local/state").exists());
    assert!(
        stdout(&dry).contains("--- ~/.codex/config.toml\n"),
        "a diff per file"
    );

    let first = home.setup(&["--yes"]);
    assert!(first.status.success());
    let said = stdout(&first);
    for tool in [
        "Claude Code",
        "Codex CLI",
        "Gemini CLI",
        "opencode",
        "VS Code",
        "Cursor",
        "Windsurf",
    ] {
        assert!(
            said.contains(&format!("  {tool} — done: add `koru`")),
            "{tool}: {said}"
        );
    }
    assert!(
        said.contains("systemd user unit — not possible here: no systemctl on PATH"),
        "{said}"
    );

    for (path, text) in files() {
        let after = home.read(path);
        let (taken, put) = inserted(text, &after);
        assert!(
            taken.chars().all(|c| c.is_whitespace() || c == ','),
            "{path}: setup took {taken:?} out of the user's text:\n{after}"
        );
        assert!(put.contains(&koru), "{path}: what went in: {put:?}");
        for theirs in ["github", "linear", "files", "fs\"", "guard", "check-bash"] {
            assert!(
                !put.contains(theirs),
                "{path}: {put:?} holds the user's {theirs}"
            );
        }
    }
    // Each entry as its client writes it.
    assert!(home.read(".codex/config.toml").contains(&format!(
        "[mcp_servers.koru]\ncommand = \"{koru}\"\nargs = [\"mcp\"]\n"
    )));
    assert!(home.read(".config/Code/User/mcp.json").contains(&format!(
        "\t\t\"koru\": {{\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"{koru}\",\n\t\t\t\"args\": [\"mcp\"],\n\t\t}},\n"
    )), "tabs and the file's trailing commas: {}", home.read(".config/Code/User/mcp.json"));
    let gemini = home.read(".gemini/settings.json");
    assert!(
        !gemini.contains(",\n  }") && !gemini.contains(",}"),
        "no trailing comma for Gemini CLI: {gemini}"
    );
    assert!(
        gemini.contains(&format!("{koru} hook gemini-cli")),
        "hooks and MCP in one file"
    );
    let after_first = home.tree();

    let second = home.setup(&["--yes"]);
    assert!(second.status.success());
    assert!(
        stdout(&second).contains("\nNothing to change.\n"),
        "{}",
        stdout(&second)
    );
    assert_eq!(home.tree(), after_first, "twice = once");

    let undone = home.setup(&["--undo", "--yes"]);
    assert!(undone.status.success());
    assert!(
        stdout(&undone).contains("  Codex CLI — undone: ~/.codex/config.toml put back as it was\n")
    );
    for (path, text) in files() {
        assert_eq!(home.read(path), text, "{path} back byte for byte");
    }
    let again = home.setup(&["--undo", "--yes"]);
    assert!(again.status.success());
    assert!(stdout(&again).contains("nothing to undo"));
}

#[test]
fn undo_keeps_what_the_user_changed_after_setup() {
    let home = Home::new();
    home.write(".cursor/mcp.json", CURSOR_JSON);
    assert!(home.setup(&["--yes", "--only", "mcp"]).status.success());
    // The user adds a server of their own beside Koru's.
    let with_koru = home.read(".cursor/mcp.json");
    let theirs = with_koru.replacen(
        "\"mcpServers\": {\n",
        "\"mcpServers\": {\n    \"mine\": {\"command\": \"my-server\"},\n",
        1,
    );
    home.write(".cursor/mcp.json", &theirs);
    let undone = home.setup(&["--undo", "--yes"]);
    assert!(undone.status.success());
    assert!(
        stdout(&undone).contains("Koru's entry taken out; the changes made since setup are kept")
    );
    let after = home.read(".cursor/mcp.json");
    assert!(
        after.contains("\"mine\": {\"command\": \"my-server\"}"),
        "{after}"
    );
    assert!(after.contains("\"linear\""), "{after}");
    assert!(!after.contains("koru"), "{after}");
}

#[test]
fn a_file_that_does_not_parse_is_left_untouched_setup_goes_on_and_exits_non_zero() {
    let home = Home::new();
    // Claude Code reads strict JSON: a comment makes it refuse the file, so does Koru.
    let broken = "{\n  // my note\n  \"numStartups\": 1\n}";
    home.write(".claude.json", broken);
    home.write(".codex/config.toml", CODEX_TOML);
    home.write(".gemini/settings.json", "{\n  \"theme\": \"GitHub\",\n}\n");
    let output = home.setup(&["--yes", "--only", "mcp"]);
    assert_eq!(output.status.code(), Some(1));
    let said = stdout(&output);
    assert!(
        said.contains("  Claude Code — CANNOT: ~/.claude.json: not valid strict JSON (no comments, no trailing commas): "),
        "{said}"
    );
    assert!(said.contains("  Gemini CLI — CANNOT: ~/.gemini/settings.json: not valid JSON with comments but no trailing commas: "), "{said}");
    assert!(
        said.contains("\nNot done: Claude Code (~/.claude.json: "),
        "{said}"
    );
    assert_eq!(home.read(".claude.json"), broken);
    assert_eq!(
        home.read(".gemini/settings.json"),
        "{\n  \"theme\": \"GitHub\",\n}\n"
    );
    assert!(
        home.read(".codex/config.toml")
            .contains("[mcp_servers.koru]"),
        "the rest goes on"
    );
}

#[test]
fn a_home_with_nothing_installed_has_nothing_to_wire() {
    let home = Home::new();
    let output = home.setup(&["--yes"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).contains(
            "\nNothing to wire on this machine: no IDE, terminal agent or MCP client found"
        ),
        "{}",
        stdout(&output)
    );
    assert!(!home
        .home()
        .join(".local/state/koru/setup/manifest.json")
        .exists());
}

#[test]
fn without_an_answer_nothing_is_changed() {
    let home = Home::new();
    home.write(".codex/config.toml", CODEX_TOML);
    let output = home.setup(&["--only", "mcp"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("Make these 1 changes? [y/N] \nNothing was changed."),
        "{}",
        stdout(&output)
    );
    assert_eq!(home.read(".codex/config.toml"), CODEX_TOML);
}

/// A stand-in for `systemctl` (this machine has no systemd user instance to test against):
/// it answers as a running user manager does and logs each call.
fn fake_systemctl(home: &Home) -> PathBuf {
    let log = home.sandbox.path().join("systemctl.log");
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in\n  '--user is-system-running') echo running ;;\n  '--user is-enabled koru.service') if [ -L \"$HOME/.config/systemd/user/default.target.wants/koru.service\" ]; then echo enabled; else echo disabled; exit 1; fi ;;\n  '--user enable --now koru.service') mkdir -p \"$HOME/.config/systemd/user/default.target.wants\" && ln -sf ../koru.service \"$HOME/.config/systemd/user/default.target.wants/koru.service\" ;;\n  '--user disable --now koru.service') rm -f \"$HOME/.config/systemd/user/default.target.wants/koru.service\" ;;\nesac\n",
        log.display()
    );
    let path = home.bin.join("systemctl");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    log
}

#[test]
fn the_login_unit_runs_this_binary_is_enabled_and_undo_disables_and_removes_it() {
    let home = Home::new();
    // The fake runs with the PATH setup gives it: give it a shell's tools.
    for tool in ["sh", "mkdir", "ln", "rm"] {
        let real = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        std::os::unix::fs::symlink(real, home.bin.join(tool)).unwrap();
    }
    let log = fake_systemctl(&home);
    let output = home.setup(&["--yes", "--only", "login"]);
    assert!(output.status.success());
    let unit = home.read(".config/systemd/user/koru.service");
    assert!(
        unit.contains(&format!("\nExecStart={} daemon\n", koru_bin().display())),
        "{unit}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.ends_with("--user daemon-reload\n--user enable --now koru.service\n"),
        "{calls}"
    );
    let again = home.setup(&["--yes", "--only", "login"]);
    assert!(
        stdout(&again).contains(
            "systemd user unit — already wired: ~/.config/systemd/user/koru.service, enabled"
        ),
        "{}",
        stdout(&again)
    );
    let undone = home.setup(&["--undo", "--yes"]);
    assert!(undone.status.success());
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.ends_with("--user disable --now koru.service\n--user daemon-reload\n"),
        "{calls}"
    );
    assert!(!home
        .home()
        .join(".config/systemd/user/koru.service")
        .exists());
}

/// The plugin zip and an IDE that has run: unpacked where it loads plugins, current the
/// second time, gone after undo.
#[test]
fn the_jetbrains_plugin_goes_where_the_ide_loads_it_and_undo_takes_it_away() {
    let home = Home::new();
    home.write(
        ".local/share/JetBrains/Toolbox/apps/intellij-idea-ultimate/product-info.json",
        r#"{"name": "IntelliJ IDEA", "version": "2025.2", "productCode": "IU", "dataDirectoryName": "IntelliJIdea2025.2"}"#,
    );
    let zip = home.sandbox.path().join("koru-jetbrains-0.1.0.zip");
    {
        use std::io::Write;
        let mut writer = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
        let options = zip::write::SimpleFileOptions::default();
        writer
            .add_directory("koru-jetbrains/lib/", options)
            .unwrap();
        writer
            .start_file("koru-jetbrains/lib/koru-jetbrains.jar", options)
            .unwrap();
        writer.write_all(b"the plugin").unwrap();
        writer.finish().unwrap();
    }
    let zip_arg = zip.display().to_string();
    let output = home.setup(&["--yes", "--only", "ide", "--jetbrains-zip", &zip_arg]);
    assert!(output.status.success());
    let jar = home
        .home()
        .join(".local/share/JetBrains/IntelliJIdea2025.2/koru-jetbrains/lib/koru-jetbrains.jar");
    assert_eq!(std::fs::read(&jar).unwrap(), b"the plugin");
    let again = home.setup(&["--yes", "--only", "ide", "--jetbrains-zip", &zip_arg]);
    assert!(
        stdout(&again).contains("IntelliJ IDEA 2025.2 — already wired"),
        "{}",
        stdout(&again)
    );
    assert!(home.setup(&["--undo", "--yes"]).status.success());
    assert!(!jar.exists());
    assert!(!home
        .home()
        .join(".local/share/JetBrains/IntelliJIdea2025.2/koru-jetbrains")
        .exists());
}

/// `claude|codex|gemini mcp list` in the home, offline.
fn mcp_list(home: &Home, agent: &str) -> String {
    let agents = repo_root().join("tests/agents/node_modules/.bin");
    let path = format!(
        "{}:{}",
        agents.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new(agents.join(agent))
        .args(["mcp", "list"])
        .current_dir(home.home())
        .env_clear()
        .env("HOME", home.home())
        .env("PATH", path)
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_real_clients_list_koru_after_setup_and_not_after_undo() {
    if !agents_installed() {
        return;
    }
    let home = Home::new();
    let agents = repo_root().join("tests/agents/node_modules/.bin");
    for agent in ["claude", "codex", "gemini"] {
        std::os::unix::fs::symlink(agents.join(agent), home.bin.join(agent)).unwrap();
    }
    home.write(".codex/config.toml", CODEX_TOML);
    home.write(".gemini/settings.json", GEMINI_JSON);
    assert!(home.setup(&["--yes", "--only", "mcp"]).status.success());
    let koru = koru_bin().display().to_string();
    let claude = mcp_list(&home, "claude");
    assert!(claude.contains(&format!("koru: {koru} mcp - ")), "{claude}");
    let codex = mcp_list(&home, "codex");
    assert!(
        codex
            .lines()
            .any(|l| l.starts_with("koru ") && l.contains(&koru)),
        "{codex}"
    );
    assert!(codex.lines().any(|l| l.starts_with("github ")), "{codex}");
    let gemini = mcp_list(&home, "gemini");
    assert!(
        gemini.contains(&format!("koru: {koru} mcp (stdio)")),
        "{gemini}"
    );
    assert!(gemini.contains("files: node files.js (stdio)"), "{gemini}");

    let undone = home.setup(&["--undo", "--yes"]);
    assert!(undone.status.success());
    for agent in ["claude", "codex", "gemini"] {
        let listed = mcp_list(&home, agent);
        assert!(!listed.contains(&koru), "{agent} after undo: {listed}");
    }
    assert_eq!(home.read(".codex/config.toml"), CODEX_TOML);
}

#[test]
fn doctor_says_per_tool_what_is_wired_stale_or_not_with_the_fix() {
    let home = Home::new();
    home.write(".codex/config.toml", CODEX_TOML);
    home.write(
        ".cursor/mcp.json",
        "{\"mcpServers\": {\"koru\": {\"command\": \"/moved/away/koru\", \"args\": [\"mcp\"]}}}\n",
    );
    assert!(home.setup(&["--yes", "--only", "hooks"]).status.success());
    let output = home.koru(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let wired = report["wired"].as_array().unwrap();
    let find = |part: &str, tool: &str| {
        wired
            .iter()
            .find(|w| w["part"] == part && w["tool"] == tool)
            .unwrap_or_else(|| panic!("{part} {tool} in {wired:?}"))
            .clone()
    };
    let hooks = find("hooks", "Codex CLI");
    assert_eq!(hooks["state"], "wired", "{hooks}");
    assert_eq!(hooks["detail"], "5 events in ~/.codex/hooks.json");
    let codex = find("mcp", "Codex CLI");
    assert_eq!(codex["state"], "not_wired", "{codex}");
    assert_eq!(codex["fix"], "koru setup --only mcp");
    let cursor = find("mcp", "Cursor");
    assert_eq!(cursor["state"], "stale", "{cursor}");
    assert_eq!(
        cursor["detail"],
        "`mcpServers.koru` runs /moved/away/koru, which is not there"
    );
    let login = find("login", "systemd user unit");
    assert_eq!(login["state"], "not_possible", "{login}");
    // The table says the same.
    let table = home.koru(&["doctor"]);
    let text = stdout(&table);
    assert!(
        text.contains("\nWIRED ON THIS MACHINE (koru setup)\n"),
        "{text}"
    );
    assert!(text.contains("  STALE        mcp    Cursor                     `mcpServers.koru` runs /moved/away/koru, which is not there\n               → koru setup --only mcp\n"), "{text}");
}

//! Which terminal agent a process is, from its command line (the agents' own executables and the node scripts their npm packages install), and the processes under a pane's first process, read from `/proc` once per look.

use std::collections::HashMap;
use std::path::Path;

/// A terminal agent Koru recognises by its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentProduct {
    ClaudeCode,
    Codex,
    GeminiCli,
    Opencode,
}

impl AgentProduct {
    /// The product name Koru shows (`claude-code`, `codex`, `gemini-cli`, `opencode`).
    pub fn name(self) -> &'static str {
        match self {
            AgentProduct::ClaudeCode => "claude-code",
            AgentProduct::Codex => "codex",
            AgentProduct::GeminiCli => "gemini-cli",
            AgentProduct::Opencode => "opencode",
        }
    }
}

/// The agent a command line runs, if any. The npm packages start the agent as a native
/// binary (`claude`, `codex`, `opencode`, each also reached through a package path such as
/// `@openai/codex-linux-x64/…/codex`) or as a node script (`gemini` →
/// `@google/gemini-cli/dist/index.js`; older Claude Code: `@anthropic-ai/claude-code/cli.js`).
pub fn agent_of(argv: &[String]) -> Option<AgentProduct> {
    let program = argv.first()?;
    let by_name = |word: &str| {
        let name = Path::new(word)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        match name {
            "claude" => Some(AgentProduct::ClaudeCode),
            "codex" => Some(AgentProduct::Codex),
            "gemini" => Some(AgentProduct::GeminiCli),
            "opencode" => Some(AgentProduct::Opencode),
            _ => None,
        }
    };
    let by_package = |word: &str| {
        if word.contains("/@anthropic-ai/claude-code/") {
            Some(AgentProduct::ClaudeCode)
        } else if word.contains("/@openai/codex") {
            Some(AgentProduct::Codex)
        } else if word.contains("/@google/gemini-cli/") {
            Some(AgentProduct::GeminiCli)
        } else if word.contains("/opencode-ai/") || word.contains("/opencode-linux-") {
            Some(AgentProduct::Opencode)
        } else {
            None
        }
    };
    if let Some(agent) = by_name(program).or_else(|| by_package(program)) {
        return Some(agent);
    }
    // An interpreter running the agent's script: node (or bun) and its first non-option
    // argument.
    let interpreter = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if matches!(interpreter, "node" | "nodejs" | "bun") {
        let script = argv[1..].iter().find(|a| !a.starts_with('-'))?;
        return by_package(script).or_else(|| by_name(script));
    }
    None
}

/// One process as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub parent: u32,
    pub argv: Vec<String>,
}

/// A process table entry for tests: `(pid, Process)` with `words` as its command line.
#[cfg(test)]
pub fn test_process(pid: u32, parent: u32, words: &[&str]) -> (u32, Process) {
    (
        pid,
        Process {
            pid,
            parent,
            argv: words.iter().map(|w| w.to_string()).collect(),
        },
    )
}

/// Every process of the machine that this user can read, by pid.
pub fn snapshot() -> HashMap<u32, Process> {
    koru_injectors::all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, read_process(pid)?)))
        .collect()
}

/// One process from `/proc` (`None`: gone, or not readable): its parent as the injectors
/// read it for window targets, and its command line.
pub fn read_process(pid: u32) -> Option<Process> {
    let parent = koru_injectors::parent_of(pid)?;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some(Process { pid, parent, argv })
}

/// The shells an IDE started with `name=VALUE` in their environment, for each wanted value:
/// the topmost process carrying it (what a shell started inherits it too). Each process's
/// environment is read once (`environ`; `None`: gone or not readable).
pub fn tagged_shells(
    name: &str,
    values: &[&str],
    processes: &HashMap<u32, Process>,
    environ: impl Fn(u32) -> Option<Vec<(String, String)>>,
) -> HashMap<String, u32> {
    if values.is_empty() {
        return HashMap::new();
    }
    let mut carriers: HashMap<String, Vec<u32>> = HashMap::new();
    for pid in processes.keys() {
        let Some(vars) = environ(*pid) else { continue };
        if let Some((_, value)) = vars
            .iter()
            .find(|(n, v)| n == name && values.contains(&v.as_str()))
        {
            carriers.entry(value.clone()).or_default().push(*pid);
        }
    }
    carriers
        .into_iter()
        .filter_map(|(value, mut pids)| {
            pids.sort_unstable();
            let top = pids
                .iter()
                .copied()
                .find(|pid| !pids.contains(&processes[pid].parent))?;
            Some((value, top))
        })
        .collect()
}

/// The nearest of `pid` and its ancestors (at most 16 up) that is an agent's process: what
/// a hook started by the agent (through a shell or two) runs under.
pub fn agent_ancestor(pid: u32) -> Option<(u32, AgentProduct)> {
    let mut pid = pid;
    for _ in 0..16 {
        let process = read_process(pid)?;
        if let Some(agent) = agent_of(&process.argv) {
            return Some((pid, agent));
        }
        if process.parent <= 1 {
            return None;
        }
        pid = process.parent;
    }
    None
}

/// The agent running at or under `root` (a pane's first process), nearest first: the pid
/// and which agent. Breadth-first, so an agent's own helpers (an MCP server it started, a
/// shell it runs a tool in) never hide it.
pub fn agent_under(root: u32, processes: &HashMap<u32, Process>) -> Option<(u32, AgentProduct)> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for process in processes.values() {
        children
            .entry(process.parent)
            .or_default()
            .push(process.pid);
    }
    let mut queue = std::collections::VecDeque::from([root]);
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = queue.pop_front() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some(agent) = processes.get(&pid).and_then(|p| agent_of(&p.argv)) {
            return Some((pid, agent));
        }
        if let Some(kids) = children.get(&pid) {
            let mut kids = kids.clone();
            kids.sort_unstable();
            queue.extend(kids);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_terminal_s_shell_is_the_topmost_process_carrying_its_tag() {
        // An IDE (1) started two terminals' shells (10 tagged a, 20 tagged b); shell 10 runs
        // an agent (11) that inherited the tag.
        let processes: HashMap<u32, Process> = [
            test_process(1, 0, &["ide"]),
            test_process(10, 1, &["bash"]),
            test_process(11, 10, &["node", "claude"]),
            test_process(20, 1, &["zsh"]),
        ]
        .into_iter()
        .collect();
        let environ = |pid: u32| -> Option<Vec<(String, String)>> {
            let tag = match pid {
                10 | 11 => "a",
                20 => "b",
                _ => return Some(vec![("HOME".into(), "/home/me".into())]),
            };
            Some(vec![("KORU_TERMINAL_ID".into(), tag.into())])
        };
        let found = tagged_shells("KORU_TERMINAL_ID", &["a", "b", "c"], &processes, environ);
        assert_eq!(found.get("a"), Some(&10));
        assert_eq!(found.get("b"), Some(&20));
        assert_eq!(found.get("c"), None);
        assert_eq!(found.len(), 2);
        // A process whose environment cannot be read does not count.
        assert!(tagged_shells("KORU_TERMINAL_ID", &["a"], &processes, |_| None).is_empty());
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn agents_are_known_by_their_executables_and_their_npm_scripts() {
        let cases: &[(&[&str], Option<AgentProduct>)] = &[
            (&["claude"], Some(AgentProduct::ClaudeCode)),
            (&["/home/me/.local/bin/claude", "--resume"], Some(AgentProduct::ClaudeCode)),
            (&["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"], Some(AgentProduct::ClaudeCode)),
            (&["/usr/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex/codex"], Some(AgentProduct::Codex)),
            (&["node", "--no-warnings=DEP0040", "/usr/lib/node_modules/@google/gemini-cli/dist/index.js"], Some(AgentProduct::GeminiCli)),
            (&["/usr/bin/node", "/usr/local/bin/gemini"], Some(AgentProduct::GeminiCli)),
            (&["opencode"], Some(AgentProduct::Opencode)),
            (&["bash"], None),
            (&["node", "server.js"], None),
            (&["vim", "claude.md"], None),
            (&[], None),
        ];
        for (words, expected) in cases {
            assert_eq!(agent_of(&argv(words)), *expected, "{words:?}");
        }
    }

    #[test]
    fn the_agent_nearest_the_pane_is_found_below_its_shell() {
        let process = test_process;
        let processes: HashMap<u32, Process> = [
            process(100, 1, &["-bash"]),
            process(120, 100, &["claude"]),
            // The agent's own tool shell and an MCP server it started run codex: not the pane's agent.
            process(130, 120, &["bash", "-c", "codex exec hi"]),
            process(131, 130, &["codex", "exec", "hi"]),
            process(200, 1, &["-zsh"]),
            process(210, 200, &["sleep", "100"]),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            agent_under(100, &processes),
            Some((120, AgentProduct::ClaudeCode))
        );
        assert_eq!(agent_under(200, &processes), None);
        assert_eq!(agent_under(999, &processes), None);
    }

    #[test]
    fn this_process_is_in_the_snapshot_with_its_parent() {
        let processes = snapshot();
        let me = processes.get(&std::process::id()).expect("this process");
        assert_eq!(me.parent, std::os::unix::process::parent_id());
        assert!(!me.argv.is_empty());
    }
}

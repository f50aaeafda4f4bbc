//! The terminal agents' own hooks: for Claude Code, Codex CLI and Gemini CLI, which events Koru's hook listens to, where each agent keeps its settings, what a hook's input means as an observation, and installing and removing Koru's entries there without touching the user's own.

pub mod install;
pub mod json_settings;

use std::path::{Path, PathBuf};

use koru_protocol::{AgentProcess, NeedsInputKind, ObservationBasis, ObservedEvent, ObservedKind};
use serde_json::Value;

use crate::observe::excerpt_and_length;
use crate::observe::stores::{claude_code, codex, gemini};
use json_settings::HookEntry;

/// A terminal agent whose hooks Koru can install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum HookAgent {
    /// Claude Code (`~/.claude/settings.json`)
    ClaudeCode,
    /// Codex CLI (`~/.codex/hooks.json`)
    Codex,
    /// Gemini CLI (`~/.gemini/settings.json`)
    GeminiCli,
}

/// Seconds Koru gives its hook: it forwards one line to the daemon and gives up after 2 s.
const HOOK_TIMEOUT_S: u32 = 5;

impl HookAgent {
    pub const ALL: [HookAgent; 3] = [
        HookAgent::ClaudeCode,
        HookAgent::Codex,
        HookAgent::GeminiCli,
    ];

    /// The name on Koru's command line (`koru hook claude-code`).
    pub fn name(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "claude-code",
            HookAgent::Codex => "codex",
            HookAgent::GeminiCli => "gemini-cli",
        }
    }

    /// The agent's own name, for people.
    pub fn title(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "Claude Code",
            HookAgent::Codex => "Codex CLI",
            HookAgent::GeminiCli => "Gemini CLI",
        }
    }

    /// The chat store the agent's session id names a chat in.
    pub fn store(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => claude_code::STORE,
            HookAgent::Codex => codex::STORE,
            HookAgent::GeminiCli => gemini::STORE,
        }
    }

    /// The events Koru's hook is installed for (docs/agents.md has the sources):
    /// Claude Code's since 2.1.78 (StopFailure; PermissionRequest since 2.0.45), Codex's
    /// hooks (on by default since 0.124; SessionEnd since 0.146), Gemini CLI's (on by
    /// default since 0.27).
    pub fn events(self) -> &'static [&'static str] {
        match self {
            HookAgent::ClaudeCode => &[
                "SessionStart",
                "UserPromptSubmit",
                "PermissionRequest",
                "Notification",
                "Stop",
                "StopFailure",
                "SessionEnd",
            ],
            HookAgent::Codex => &[
                "SessionStart",
                "UserPromptSubmit",
                "PermissionRequest",
                "Stop",
                "SessionEnd",
            ],
            HookAgent::GeminiCli => &[
                "SessionStart",
                "BeforeAgent",
                "AfterAgent",
                "Notification",
                "SessionEnd",
            ],
        }
    }

    /// The user-level settings file Koru's entries go into, under `home` (Codex: under
    /// `$CODEX_HOME` when it is set).
    pub fn settings_path(self, home: &Path, codex_home: Option<&Path>) -> PathBuf {
        match self {
            HookAgent::ClaudeCode => home.join(".claude/settings.json"),
            HookAgent::Codex => codex_home
                .map(Path::to_path_buf)
                .unwrap_or_else(|| home.join(".codex"))
                .join("hooks.json"),
            HookAgent::GeminiCli => home.join(".gemini/settings.json"),
        }
    }

    /// Koru's entry for each event, running `koru` (this binary's path) as the hook.
    pub fn entries(self, koru: &Path) -> Vec<HookEntry> {
        let command = format!(
            "{} hook {}",
            shell_word(&koru.display().to_string()),
            self.name()
        );
        self.events()
            .iter()
            .map(|event| HookEntry {
                event,
                matcher: None,
                command: command.clone(),
                // Gemini CLI counts a hook's timeout in milliseconds, the others in seconds.
                timeout_s: match self {
                    HookAgent::GeminiCli => HOOK_TIMEOUT_S * 1000,
                    _ => HOOK_TIMEOUT_S,
                },
                name: (self == HookAgent::GeminiCli).then_some("koru"),
            })
            .collect()
    }

    /// What the user must still do after an install, said by `koru hook install`.
    pub fn after_install(self) -> Option<&'static str> {
        match self {
            HookAgent::ClaudeCode => Some(
                "Claude Code reads hooks when a session starts: restart running sessions to use them",
            ),
            HookAgent::Codex => Some(
                "Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust Koru's entries (until then they are skipped without a word)",
            ),
            HookAgent::GeminiCli => Some(
                "Gemini CLI runs hooks by default from 0.27.0 (on 0.24-0.26 set hooksConfig.enabled); restart running sessions to use them",
            ),
        }
    }
}

/// A path as one word of a shell command line (quoted when it needs to be).
fn shell_word(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c))
    {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

fn text<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// The observation an agent's hook input means, if any: what the transcript does not record
/// (a permission prompt, the agent waiting for the user, a turn that failed on an API error)
/// and the turn's end — and, at a session's start and each prompt, that the chat exists and
/// where its agent runs (`process`: what the hook could see of its agent). Pure, for tests.
pub fn observation_from_hook(
    agent: HookAgent,
    input: &Value,
    now_ms: u64,
    process: Option<AgentProcess>,
) -> Option<ObservedEvent> {
    let session = text(input, "session_id").filter(|s| !s.is_empty())?;
    let event = match (agent, text(input, "hook_event_name")?) {
        // The prompt as the agent took it: what proves a terminal drive `submitted`.
        (HookAgent::ClaudeCode | HookAgent::Codex, "UserPromptSubmit")
        | (HookAgent::GeminiCli, "BeforeAgent")
            if text(input, "prompt").is_some_and(|p| !p.trim().is_empty()) =>
        {
            let prompt = text(input, "prompt").unwrap_or_default();
            let (excerpt, length) = excerpt_and_length(prompt);
            ObservedKind::PromptSeen {
                excerpt,
                length,
                digest: crate::observe::prompt_digest(prompt),
            }
        }
        (_, "SessionStart")
        | (HookAgent::ClaudeCode | HookAgent::Codex, "UserPromptSubmit")
        | (HookAgent::GeminiCli, "BeforeAgent") => ObservedKind::ChatSeen,
        (HookAgent::ClaudeCode, "Notification") => {
            let kind = text(input, "notification_type");
            let message = text(input, "message").unwrap_or("").to_lowercase();
            let input = match kind {
                Some("permission_prompt") => NeedsInputKind::Permission,
                Some("idle_prompt") | Some("elicitation_dialog") => NeedsInputKind::Question,
                Some("agent_needs_input") => NeedsInputKind::Other,
                Some(_) => return None,
                None if message.contains("permission") => NeedsInputKind::Permission,
                None if message.contains("waiting for your input") => NeedsInputKind::Question,
                None => NeedsInputKind::Other,
            };
            ObservedKind::NeedsInput { input }
        }
        (HookAgent::GeminiCli, "Notification") => match text(input, "notification_type") {
            Some("ToolPermission") => ObservedKind::NeedsInput {
                input: NeedsInputKind::Permission,
            },
            _ => return None,
        },
        (HookAgent::ClaudeCode | HookAgent::Codex, "PermissionRequest") => {
            ObservedKind::NeedsInput {
                input: NeedsInputKind::Permission,
            }
        }
        (HookAgent::ClaudeCode | HookAgent::Codex, "Stop") => {
            let (excerpt, length) =
                excerpt_and_length(text(input, "last_assistant_message").unwrap_or(""));
            ObservedKind::ReplyCompleted { excerpt, length }
        }
        (HookAgent::GeminiCli, "AfterAgent") => {
            let (excerpt, length) =
                excerpt_and_length(text(input, "prompt_response").unwrap_or(""));
            ObservedKind::ReplyCompleted { excerpt, length }
        }
        (HookAgent::ClaudeCode | HookAgent::Codex, "StopFailure") => {
            // The SDK's types name the fields `error` and `error_details`; some docs say
            // `error_type` and `error_message`: either is read.
            let kind = ["error", "error_type"]
                .iter()
                .find_map(|key| text(input, key));
            let details = ["error_details", "error_message", "message", "reason"]
                .iter()
                .find_map(|key| text(input, key));
            let reason = match (kind, details) {
                (Some(kind), Some(details)) => format!("{kind}: {details}"),
                (Some(one), None) | (None, Some(one)) => one.to_string(),
                (None, None) => "the turn ended on an API error".to_string(),
            };
            ObservedKind::Failed {
                reason: excerpt_and_length(&reason).0,
            }
        }
        _ => return None,
    };
    Some(ObservedEvent {
        store: agent.store().to_string(),
        chat_id: session.to_string(),
        workspace: text(input, "cwd").map(str::to_string),
        store_ts_ms: None,
        seen_at_ms: now_ms,
        basis: ObservationBasis::Explicit,
        process,
        event,
    })
}

/// What a hook process can see of its agent: the nearest ancestor that is an agent
/// process, and the tmux server and pane from `$TMUX` (`socket,pid,session`) and
/// `$TMUX_PANE`. `None` when it sees nothing.
pub fn agent_process(
    tmux: Option<&str>,
    tmux_pane: Option<&str>,
    agent_pid: Option<u32>,
) -> Option<AgentProcess> {
    let tmux_socket = tmux
        .and_then(|t| t.split(',').next())
        .filter(|s| s.starts_with('/'))
        .map(str::to_string);
    let tmux_pane = tmux_pane
        .filter(|p| p.starts_with('%') && tmux_socket.is_some())
        .map(str::to_string);
    (agent_pid.is_some() || tmux_socket.is_some()).then_some(AgentProcess {
        pid: agent_pid,
        tmux_socket,
        tmux_pane,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(agent: HookAgent, input: Value) -> Option<Value> {
        observation_from_hook(agent, &input, 5, None).map(|o| serde_json::to_value(o).unwrap())
    }

    #[test]
    fn a_session_start_or_a_prompt_says_where_the_agent_runs() {
        let process = agent_process(
            Some("/tmp/tmux-1000/default,4100,0"),
            Some("%7"),
            Some(4321),
        );
        assert_eq!(
            process,
            Some(AgentProcess {
                pid: Some(4321),
                tmux_socket: Some("/tmp/tmux-1000/default".into()),
                tmux_pane: Some("%7".into())
            })
        );
        for (agent, event) in [
            (HookAgent::ClaudeCode, "SessionStart"),
            (HookAgent::ClaudeCode, "UserPromptSubmit"),
            (HookAgent::Codex, "UserPromptSubmit"),
            (HookAgent::GeminiCli, "BeforeAgent"),
            (HookAgent::GeminiCli, "SessionStart"),
        ] {
            let seen = observation_from_hook(
                agent,
                &json!({"session_id": "s9", "cwd": "/w", "hook_event_name": event, "prompt": "hi"}),
                5,
                process.clone(),
            )
            .unwrap();
            let expected = if event == "SessionStart" {
                ObservedKind::ChatSeen
            } else {
                // The prompt as the agent took it, with the digest observers give it.
                ObservedKind::PromptSeen {
                    excerpt: "hi".into(),
                    length: 2,
                    digest: crate::observe::prompt_digest("hi"),
                }
            };
            assert_eq!(seen.event, expected, "{agent:?} {event}");
            assert_eq!(seen.process, process);
        }
        // A prompt hook without the prompt still says where the agent runs.
        let bare = observation_from_hook(
            HookAgent::ClaudeCode,
            &json!({"session_id": "s9", "hook_event_name": "UserPromptSubmit"}),
            5,
            process.clone(),
        )
        .unwrap();
        assert_eq!(bare.event, ObservedKind::ChatSeen);
        // Outside tmux, and nothing to see at all.
        assert_eq!(
            agent_process(None, Some("%7"), Some(9)),
            Some(AgentProcess {
                pid: Some(9),
                tmux_socket: None,
                tmux_pane: None
            })
        );
        assert_eq!(agent_process(Some("garbage"), None, None), None);
    }

    fn with(base: Value, extra: Value) -> Value {
        let mut v = base;
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn claude_code_notifications_become_needs_input_by_type_or_message() {
        let base = json!({"session_id": "s1", "cwd": "/w", "hook_event_name": "Notification",
            "transcript_path": "/h/.claude/projects/-w/s1.jsonl"});
        let permission = kind(HookAgent::ClaudeCode, with(base.clone(), json!({"notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"}))).unwrap();
        assert_eq!(permission["kind"], "needs_input");
        assert_eq!(permission["input"], "permission");
        assert_eq!(permission["chat_id"], "s1");
        assert_eq!(permission["store"], claude_code::STORE);
        assert_eq!(permission["workspace"], "/w");
        assert_eq!(permission["basis"], "explicit");
        let idle = kind(
            HookAgent::ClaudeCode,
            with(base.clone(), json!({"notification_type": "idle_prompt"})),
        )
        .unwrap();
        assert_eq!(idle["input"], "question");
        let older = kind(
            HookAgent::ClaudeCode,
            with(
                base.clone(),
                json!({"message": "Claude is waiting for your input"}),
            ),
        )
        .unwrap();
        assert_eq!(older["input"], "question");
        assert!(kind(
            HookAgent::ClaudeCode,
            with(base, json!({"notification_type": "auth_success"}))
        )
        .is_none());
    }

    #[test]
    fn stops_failures_and_permission_requests_of_each_agent() {
        let stop = kind(
            HookAgent::ClaudeCode,
            json!({"session_id": "s1", "cwd": "/w", "hook_event_name": "Stop",
            "stop_hook_active": false, "last_assistant_message": "All tests pass."}),
        )
        .unwrap();
        assert_eq!(stop["kind"], "reply_completed");
        assert_eq!(stop["excerpt"], "All tests pass.");
        let failure = kind(HookAgent::ClaudeCode, json!({"session_id": "s1", "hook_event_name": "StopFailure", "error": "rate_limit", "error_details": "429 from the API"})).unwrap();
        assert_eq!(failure["kind"], "failed");
        assert_eq!(failure["reason"], "rate_limit: 429 from the API");
        let documented = kind(HookAgent::Codex, json!({"session_id": "t1", "hook_event_name": "StopFailure", "error_type": "overloaded"})).unwrap();
        assert_eq!(documented["reason"], "overloaded");
        assert_eq!(documented["store"], codex::STORE);
        let codex_stop = kind(HookAgent::Codex, json!({"session_id": "t1", "turn_id": "7", "hook_event_name": "Stop", "last_assistant_message": null})).unwrap();
        assert_eq!(codex_stop["kind"], "reply_completed");
        assert_eq!(codex_stop["length"], 0);
        let asks = kind(HookAgent::Codex, json!({"session_id": "t1", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}})).unwrap();
        assert_eq!(asks["input"], "permission");
        let gemini_done = kind(HookAgent::GeminiCli, json!({"session_id": "g1", "hook_event_name": "AfterAgent", "prompt": "hi", "prompt_response": "Hello ✓"})).unwrap();
        assert_eq!(gemini_done["kind"], "reply_completed");
        assert_eq!(gemini_done["excerpt"], "Hello ✓");
        assert_eq!(gemini_done["store"], gemini::STORE);
        let gemini_asks = kind(HookAgent::GeminiCli, json!({"session_id": "g1", "hook_event_name": "Notification", "notification_type": "ToolPermission", "message": "run_shell_command"})).unwrap();
        assert_eq!(gemini_asks["input"], "permission");
    }

    #[test]
    fn events_an_agent_does_not_have_or_without_a_session_are_ignored() {
        // Codex has no Notification event; Gemini CLI no Stop; PreToolUse is not listened to.
        assert!(kind(HookAgent::Codex, json!({"session_id": "t", "hook_event_name": "Notification", "notification_type": "permission_prompt"})).is_none());
        assert!(kind(
            HookAgent::GeminiCli,
            json!({"session_id": "g", "hook_event_name": "Stop"})
        )
        .is_none());
        assert!(kind(
            HookAgent::ClaudeCode,
            json!({"session_id": "s", "hook_event_name": "PreToolUse"})
        )
        .is_none());
        assert!(kind(HookAgent::ClaudeCode, json!({"hook_event_name": "Stop"})).is_none());
        assert!(kind(
            HookAgent::ClaudeCode,
            json!({"session_id": "", "hook_event_name": "Stop"})
        )
        .is_none());
    }

    #[test]
    fn entries_run_this_binary_for_each_agents_events_with_its_timeout_unit() {
        let claude = HookAgent::ClaudeCode.entries(Path::new("/usr/local/bin/koru"));
        assert_eq!(claude.len(), 7);
        assert!(claude
            .iter()
            .all(|e| e.command == "/usr/local/bin/koru hook claude-code" && e.timeout_s == 5));
        let gemini = HookAgent::GeminiCli.entries(Path::new("/home/me/my tools/koru"));
        assert_eq!(
            gemini[0].command,
            "'/home/me/my tools/koru' hook gemini-cli"
        );
        assert_eq!(gemini[0].timeout_s, 5000, "milliseconds");
        assert!(json_settings::is_koru_command(
            "/usr/local/bin/koru hook codex"
        ));
        assert_eq!(
            HookAgent::Codex.settings_path(Path::new("/h"), Some(Path::new("/c"))),
            PathBuf::from("/c/hooks.json")
        );
        assert_eq!(
            HookAgent::Codex.settings_path(Path::new("/h"), None),
            PathBuf::from("/h/.codex/hooks.json")
        );
    }
}

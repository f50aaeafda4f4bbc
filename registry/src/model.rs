//! The typed model of the interface registry: interfaces (how Koru can control or observe an IDE) and the routing policy, with closed enums for every classification.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! closed_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every allowed value, in wire spelling.
            pub const ALL: &'static [&'static str] = &[$($wire),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

closed_enum! {
    /// What kind of channel an interface is.
    Family {
        /// Programs call Koru as a tool (MCP, CLI, REST).
        ToolInvocation => "tool_invocation",
        /// Koru acts inside the IDE through its plugin.
        IdeControl => "ide_control",
        /// Koru acts on the desktop: windows, keys, clipboard.
        DesktopControl => "desktop_control",
        /// Koru acts through a browser (web IDEs).
        BrowserControl => "browser_control",
        /// Files exchanged with the IDE or agent.
        ArtifactExchange => "artifact_exchange",
        /// A remote service reached over the network.
        RemoteService => "remote_service",
        /// Koru reads what the IDE or agent wrote (chat history stores).
        Observation => "observation",
        /// Koru types into the terminal a terminal agent runs in.
        TerminalControl => "terminal_control",
    }
}

closed_enum! {
    /// Which way the interface works.
    Direction {
        /// Koru acts on the IDE.
        Control => "control",
        /// Koru reads from the IDE.
        Observe => "observe",
        /// Others reach Koru through it.
        Serve => "serve",
        /// Both ways.
        Bidirectional => "bidirectional",
    }
}

closed_enum! {
    /// The mechanism an interface rides on.
    Transport {
        UnixSocket => "unix_socket",
        Stdio => "stdio",
        Http => "http",
        IdeCommand => "ide_command",
        X11 => "x11",
        Wayland => "wayland",
        Uinput => "uinput",
        InProcess => "in_process",
        Clipboard => "clipboard",
        Filesystem => "filesystem",
        Sqlite => "sqlite",
        Dbus => "dbus",
        /// A tmux server's pane (`load-buffer`, `paste-buffer`, `send-keys`, `capture-pane`).
        Tmux => "tmux",
        /// A kitty window, through kitty's remote control (`kitty @ get-text`, `send-text`).
        Kitty => "kitty",
        /// A WezTerm pane, through its CLI (`wezterm cli get-text`, `send-text`).
        Wezterm => "wezterm",
        /// An IDE window's integrated terminal, through the window's plugin (`terminal.io`).
        IdeTerminal => "ide_terminal",
    }
}

closed_enum! {
    /// How much Koru can trust what the interface says it did.
    Authority {
        High => "high",
        Medium => "medium",
        Low => "low",
    }
}

closed_enum! {
    /// How a step through this interface is confirmed.
    VerificationMode {
        /// The plugin acks each stage.
        StrictAck => "strict_ack",
        /// Confirmed by observing the chat's own history.
        Observed => "observed",
        /// Checked where possible (e.g. focus), otherwise unverified.
        BestEffort => "best_effort",
        /// Not verifiable.
        None => "none",
    }
}

closed_enum! {
    /// The three ways to deliver a prompt, in the planner's vocabulary.
    RouteKind {
        /// The plugin runs the product's native send command.
        NativeSend => "native_send",
        /// The plugin focuses, pastes and submits, acking each stage.
        PluginDrive => "plugin_drive",
        /// The daemon focuses the window and injects keys.
        OsInjection => "os_injection",
        /// The daemon types into a terminal agent's terminal (a tmux pane).
        TerminalInput => "terminal_input",
    }
}

closed_enum! {
    Platform {
        Linux => "linux",
        Macos => "macos",
        Windows => "windows",
    }
}

closed_enum! {
    /// The display server an interface needs.
    DisplayServer {
        X11 => "x11",
        Wayland => "wayland",
        /// No display at all (headless).
        None => "none",
        Any => "any",
    }
}

closed_enum! {
    /// Classified reasons a step cannot go on.
    BlockerCode {
        PluginMissing => "plugin_missing",
        VersionMismatch => "version_mismatch",
        CapabilityMissing => "capability_missing",
        ChatBusy => "chat_busy",
        FocusMismatch => "focus_mismatch",
        NoDisplay => "no_display",
        InjectorMissing => "injector_missing",
        /// The injector is there but its command failed.
        InjectorFailed => "injector_failed",
        ClipboardUnavailable => "clipboard_unavailable",
        Timeout => "timeout",
        ScreenLocked => "screen_locked",
        PolicyForbidden => "policy_forbidden",
        DaemonDown => "daemon_down",
        StoreMissing => "store_missing",
        StoreUnreadable => "store_unreadable",
        BusUnavailable => "bus_unavailable",
        UinputMissing => "uinput_missing",
        CommandNotAllowed => "command_not_allowed",
        FeatureMissing => "feature_missing",
        PlatformUnsupported => "platform_unsupported",
        Disabled => "disabled",
        DependencyUnavailable => "dependency_unavailable",
        /// The plugin stopped answering heartbeats and was dropped.
        HeartbeatLost => "heartbeat_lost",
        /// The plugin's connection ended while a drive was in flight.
        PluginDisconnected => "plugin_disconnected",
        /// The chat refused the request before accepting it (no usable model, signed out,
        /// out of quota, still starting).
        ChatRefused => "chat_refused",
        /// The plugin says its chat cannot take a request now.
        ChatNotReady => "chat_not_ready",
        /// No notification service answers on the session bus.
        NotificationsUnavailable => "notifications_unavailable",
        /// No XDG desktop portal on the session bus.
        PortalMissing => "portal_missing",
        /// The desktop portal has no RemoteDesktop interface (the desktop's portal backend
        /// does not offer remote input).
        PortalNoRemoteDesktop => "portal_no_remote_desktop",
        /// The desktop has not yet been asked, or did not agree, to let Koru send keys.
        ConsentPending => "consent_pending",
        /// Nothing can tell which window has focus (Wayland without the window's plugin).
        FocusUnverifiable => "focus_unverifiable",
        /// A terminal agent shows a dialog (permission, trust, question): nothing is typed.
        NeedsInput => "needs_input",
        /// A person's unsent text is in a terminal agent's input box: nothing is typed.
        UserTyping => "user_typing",
        /// Typed and submitted, but the agent recorded no such prompt in time.
        NotSubmitted => "not_submitted",
        /// The terminal agent or its pane is gone.
        AgentExited => "agent_exited",
        /// tmux could not be run, or refused a command (or an agent's server a call).
        TerminalFailed => "terminal_failed",
        /// A terminal agent serves no API Koru can find (opencode without `--port`).
        AgentServerMissing => "agent_server_missing",
        /// A terminal's remote control is off (kitty without `allow_remote_control` and
        /// `listen_on`): the agents in it cannot be reached.
        RemoteControlOff => "remote_control_off",
        /// The prompt is where the person can see it, unsent, and only they can submit it
        /// (nothing could press the submit key, or the chat recorded no prompt after it).
        NeedsUser => "needs_user",
    }
}

closed_enum! {
    /// A recovery action the daemon can carry out itself (`koru recover`, the dashboard's
    /// buttons, the MCP tool `recover`).
    RecoveryActionKind {
        /// Run doctor's probes again.
        Reprobe => "reprobe",
        /// Read the registry files again.
        ReloadRegistry => "reload_registry",
        /// Send a failed drive's prompt again (never one that may have been submitted).
        RetryDrive => "retry_drive",
        CancelDrive => "cancel_drive",
        /// Close the plugin's connection so that it connects again.
        ReconnectPlugin => "reconnect_plugin",
        /// Raise and focus the session's IDE window.
        FocusWindow => "focus_window",
    }
}

closed_enum! {
    /// A drive event that may raise a desktop notification (`policy.notify.on`).
    NotifyEvent {
        /// The chat waits for the person: a tool approval, a question.
        NeedsInput => "needs_input",
        /// The chat refused the prompt (no usable model, signed out, out of quota).
        ChatRefused => "chat_refused",
        /// The chat cannot take a prompt now: the drive waits for it, or gave up waiting.
        ChatNotReady => "chat_not_ready",
        /// OS injection found the screen locked.
        ScreenLocked => "screen_locked",
        /// The window to type into did not have focus.
        FocusMismatch => "focus_mismatch",
        /// Any other failure, a time-out included.
        Failed => "failed",
        /// The drive was delivered.
        Done => "done",
    }
}

closed_enum! {
    /// When a step runs, by the drive's options.
    StepCondition {
        /// Only when the prompt is to be submitted.
        Submit => "submit",
        /// Only when the prompt is to be left in the chat input, unsent.
        NoSubmit => "no_submit",
        /// Only when the drive asks for a new chat (`options.new_chat`, `koru send --new-chat`).
        NewChat => "new_chat",
    }
}

closed_enum! {
    /// The stage a step proves when it succeeds.
    StepStage {
        Received => "received",
        Focused => "focused",
        Pasted => "pasted",
        Submitted => "submitted",
    }
}

/// How steps through this interface are verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    pub mode: VerificationMode,
    /// Whether a successful step proves the prompt was submitted.
    #[serde(default)]
    pub can_confirm_submit: bool,
}

/// Something an operator can do about a blocker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    /// A stable id (`install_xdotool`), unique within the interface.
    pub id: String,
    /// A short button label.
    pub label: String,
    /// What the action does, in one or two sentences a person can follow.
    pub does: String,
    /// The blockers this recovers from (empty: any).
    #[serde(default, rename = "for")]
    pub for_blockers: Vec<BlockerCode>,
    /// Whether doing it twice is harmless.
    #[serde(default)]
    pub safe_to_repeat: bool,
    /// The action Koru runs for this entry; absent: instructions for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RecoveryActionKind>,
}

/// Where an interface applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppliesTo {
    /// IDE products: exact names (`cursor`), `vscode-family`, `jetbrains-*`, or `any`.
    #[serde(default = "any_product")]
    pub products: Vec<String>,
    #[serde(default = "all_platforms")]
    pub platforms: Vec<Platform>,
    #[serde(default = "any_display")]
    pub display_servers: Vec<DisplayServer>,
    /// Terminal agents whose own chat inside the IDE this interface reaches (`claude-code`
    /// for the Claude Code extension's panel). Such an interface is planned only for a
    /// drive that names that agent (`koru send --agent claude-code`) and finds no terminal
    /// running it, and no other interface is planned for such a drive. Empty: the IDE's
    /// own chat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
}

fn any_product() -> Vec<String> {
    vec!["any".into()]
}

fn all_platforms() -> Vec<Platform> {
    vec![Platform::Linux, Platform::Macos, Platform::Windows]
}

fn any_display() -> Vec<DisplayServer> {
    vec![DisplayServer::Any]
}

impl Default for AppliesTo {
    fn default() -> Self {
        AppliesTo {
            products: any_product(),
            platforms: all_platforms(),
            display_servers: any_display(),
            agents: Vec::new(),
        }
    }
}

/// What must hold on this machine for the interface to work. Items written `a|b` are
/// satisfied by any one of the alternatives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Programs on PATH.
    #[serde(default)]
    pub binaries: Vec<String>,
    /// Environment variables that must be set and non-empty.
    #[serde(default)]
    pub env: Vec<String>,
    /// Plugin capabilities: a kind (`native_send`) or `command:<id>` / `tool_window:<id>`.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Paths that must exist (`~` and `$VAR` are expanded).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Features of this koru build (`plugin_socket`, `cli`, `mcp_stdio`, `http`).
    #[serde(default)]
    pub features: Vec<String>,
}

/// One IDE command a plugin runs for a route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub command: String,
    /// Arguments; the string `$prompt` stands for the prompt (the plugin puts it in), and
    /// `$chat` for the agent chat a drive into an agent's chat panel resumes, or `null`
    /// for a new chat (the daemon puts it in before sending the steps).
    #[serde(default)]
    pub args: Vec<serde_json::Value>,
    pub proves: StepStage,
    /// Run the step only for drives that submit (`submit`), only for drives that leave
    /// the prompt unsent (`no_submit`), or only for drives that ask for a new chat
    /// (`new_chat`); absent: always. Whatever the condition, a step proving `submitted`
    /// never runs for a drive that must not submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<StepCondition>,
}

/// One way to control or observe an IDE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interface {
    pub id: String,
    pub description: String,
    pub family: Family,
    pub direction: Direction,
    pub transport: Transport,
    pub surface: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteKind>,
    pub authority: Authority,
    pub verification: Verification,
    #[serde(default)]
    pub blocking_modes: Vec<BlockerCode>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub operator_recovery: Vec<Recovery>,
    #[serde(default)]
    pub applies_to: AppliesTo,
    #[serde(default)]
    pub requires: Requires,
    /// Where the interface's data lives (chat stores). A layer may write `{a,b}`
    /// alternatives (expanded into one entry each when the layer is read); `~`, `$VAR`,
    /// `${VAR}` and `${VAR:-default}` are expanded where the path is used.
    #[serde(default)]
    pub locations: Vec<String>,
    /// Other interfaces this one works through.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// The IDE commands a plugin runs for this route, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// A key (chord) the daemon presses once, through its OS injector, into the plugin's
    /// window after the plugin's steps proved `pasted`, for drives that submit: the route's
    /// way to submit when the IDE has no submit command. The daemon presses it only when
    /// the focused window is the plugin's (its process family) and the plugin does not say
    /// its window lost focus; the drive then reaches `submitted` with evidence
    /// `key_pressed`, or fails at `pasted`. The route's steps must prove `pasted` and none
    /// may prove `submitted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_key: Option<String>,
    /// With `submit_key`, on an interface for an agent's chat (`applies_to.agents`): the
    /// key press alone does not finish the drive. It is `submitted` and `done` only once
    /// that agent records the prompt itself (its prompt hook or its transcript) within this
    /// many milliseconds of the key press; otherwise, as when the key cannot be pressed,
    /// it fails `needs_user` (the prompt is in the chat's input, unsent), never `done`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_record_ms: Option<u64>,
    /// How the daemon types into a terminal agent (routes `terminal_input`): what differs
    /// per agent, as data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<TerminalInput>,
    /// False for observation-only stores: Koru never writes to them.
    #[serde(default = "yes")]
    pub write_safe: bool,
    /// Higher is tried first among routes of the same kind and authority.
    #[serde(default)]
    pub priority: i32,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

impl Interface {
    /// The recovery hints for a blocker (those listing it, else those listing none).
    pub fn recovery_for(&self, blocker: BlockerCode) -> Vec<&Recovery> {
        let specific: Vec<&Recovery> = self
            .operator_recovery
            .iter()
            .filter(|r| r.for_blockers.contains(&blocker))
            .collect();
        if !specific.is_empty() {
            return specific;
        }
        self.operator_recovery
            .iter()
            .filter(|r| r.for_blockers.is_empty())
            .collect()
    }
}

/// How to type a prompt into one terminal agent and see whether it took it: a bracketed
/// paste, `settle_ms`, the submit key; then the agent's own evidence (its prompt hook, its
/// transcript) within `proof_ms`, the submit key again up to `enter_retries` times while
/// the prompt still shows in the input box. Before typing, the screen (`capture-pane`) is
/// read with `screen`'s patterns: a dialog or a person's draft means nothing is typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalInput {
    /// The key that submits the input box, as tmux names it (`Enter`: a carriage return
    /// whatever the pane's extended-keys mode; `C-m` would not be).
    #[serde(default = "default_submit_key")]
    pub submit_key: String,
    /// Milliseconds between the end of the paste and the submit key: agents treat keys
    /// arriving right after a paste burst as part of it.
    #[serde(default = "default_settle_ms")]
    pub settle_ms: u64,
    /// How long to wait for the agent's evidence after each submit key.
    #[serde(default = "default_proof_ms")]
    pub proof_ms: u64,
    /// How many more times the submit key may be pressed when no evidence came and the
    /// screen still shows the prompt in the input box.
    #[serde(default)]
    pub enter_retries: u32,
    /// Characters that, first in a prompt, switch this agent into a mode (`/` a slash
    /// command, `!` a shell command). A prompt starting with one is typed as it is only
    /// when the drive asks for it (`options.agent_command`); otherwise `command_escape` is
    /// typed before it so that the agent takes it as text, or, without an escape, the
    /// drive is refused.
    #[serde(default)]
    pub command_prefixes: Vec<String>,
    /// What is typed before a prompt starting with a command prefix to keep it text (a
    /// space, for every agent measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_escape: Option<String>,
    /// What the agent's screen shows, to tell whether it can take a prompt.
    #[serde(default)]
    pub screen: ScreenMarkers,
}

fn default_submit_key() -> String {
    "Enter".into()
}

fn default_settle_ms() -> u64 {
    200
}

fn default_proof_ms() -> u64 {
    3_000
}

/// Regular expressions matched against a terminal agent's visible screen, line by line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenMarkers {
    /// A line matching any of these means a dialog is open (permission, trust, question):
    /// the drive fails `needs_input` with the dialog's text.
    #[serde(default)]
    pub dialog: Vec<String>,
    /// The input box's line; the first capture group is what is typed in it. The last
    /// matching line on screen counts.
    #[serde(default)]
    pub input: Vec<String>,
    /// Texts the input box shows when nothing is typed (placeholders): a captured input
    /// equal to, or starting with, one of them is empty.
    #[serde(default)]
    pub placeholder: Vec<String>,
    /// A line matching any of these means the agent is answering.
    #[serde(default)]
    pub busy: Vec<String>,
}

/// Per-product overrides of the routing policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProductPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_order: Option<Vec<RouteKind>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_os_injection: Option<bool>,
    /// Interface ids never used for this product.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
    /// The chord that pastes into this product's chat input (OS injection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paste_chord: Option<String>,
    /// The chord that submits this product's chat input (OS injection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_chord: Option<String>,
    /// OS injection only targets windows of this product whose class matches (regex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_class: Option<String>,
    /// OS injection only targets windows of this product whose title matches (regex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_title: Option<String>,
    /// Overrides `policy.new_chat_when_key_unpressable` for this product.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_chat_when_key_unpressable: Option<bool>,
}

/// Desktop notifications when a drive needs the person (`policy.notify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifyPolicy {
    /// The drive events that raise a notification (empty: none, notifications are off).
    #[serde(default = "default_notify_on")]
    pub on: Vec<NotifyEvent>,
    /// Whether a notification carries buttons (Retry, Cancel, Open dashboard) that run the
    /// recovery actions.
    #[serde(default = "yes")]
    pub actions: bool,
    /// How many notifications may be shown in a row before the rate limit holds the rest.
    #[serde(default = "default_notify_burst")]
    pub burst: u32,
    /// How many notifications a minute the rate limit lets through after a burst; what it
    /// holds back is summed up in one notification when there is room again.
    #[serde(default = "default_notify_per_minute")]
    pub per_minute: u32,
}

fn default_notify_on() -> Vec<NotifyEvent> {
    vec![
        NotifyEvent::NeedsInput,
        NotifyEvent::ChatRefused,
        NotifyEvent::ChatNotReady,
        NotifyEvent::ScreenLocked,
        NotifyEvent::FocusMismatch,
        NotifyEvent::Failed,
    ]
}

fn default_true() -> bool {
    true
}

fn default_notify_burst() -> u32 {
    3
}

fn default_notify_per_minute() -> u32 {
    6
}

impl Default for NotifyPolicy {
    fn default() -> Self {
        NotifyPolicy {
            on: default_notify_on(),
            actions: true,
            burst: default_notify_burst(),
            per_minute: default_notify_per_minute(),
        }
    }
}

/// How the planner picks routes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Policy {
    pub route_order: Vec<RouteKind>,
    pub allow_os_injection: bool,
    /// The chord that pastes into a chat input under OS injection (`ctrl+v`).
    pub paste_chord: String,
    /// The chord that submits a chat input under OS injection (`Return`).
    pub submit_chord: String,
    /// Paste chords for windows whose class matches a regular expression (terminals paste
    /// with ctrl+shift+v); the first match wins over `paste_chord`.
    pub paste_chord_by_class: BTreeMap<String, String>,
    /// When a drive must submit and no OS injector can press a plugin route's submit key
    /// here at all (no display, no injector, or OS input forbidden), run the product's
    /// new-chat-only routes (steps `when: new_chat`) for it: the prompt is sent in a new
    /// chat, reported on the drive, instead of being left pasted and unsent.
    #[serde(default = "default_true")]
    pub new_chat_when_key_unpressable: bool,
    /// Keyed by product name (`cursor`, `jetbrains-idea`, `vscode-family`, `jetbrains-*`).
    pub products: BTreeMap<String, ProductPolicy>,
    /// Desktop notifications when a drive needs the person.
    #[serde(default)]
    pub notify: NotifyPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            route_order: vec![
                RouteKind::NativeSend,
                RouteKind::PluginDrive,
                RouteKind::OsInjection,
                RouteKind::TerminalInput,
            ],
            allow_os_injection: true,
            paste_chord: "ctrl+v".into(),
            submit_chord: "Return".into(),
            paste_chord_by_class: BTreeMap::new(),
            new_chat_when_key_unpressable: true,
            products: BTreeMap::new(),
            notify: NotifyPolicy::default(),
        }
    }
}

/// True when a product pattern from the registry matches a product name
/// (`vscode-family` is the protocol's one list, `IdeProduct::is_vscode_family`).
pub fn product_matches(pattern: &str, product: &str) -> bool {
    match pattern {
        "any" => true,
        "vscode-family" => product
            .parse::<koru_protocol::IdeProduct>()
            .is_ok_and(|product| product.is_vscode_family()),
        _ => match pattern.strip_suffix('*') {
            Some(prefix) => product.starts_with(prefix),
            None => pattern == product,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_patterns() {
        assert!(product_matches("any", "whatever"));
        assert!(product_matches("vscode-family", "cursor"));
        assert!(!product_matches("vscode-family", "jetbrains-idea"));
        assert!(product_matches("jetbrains-*", "jetbrains-idea"));
        assert!(product_matches("cursor", "cursor"));
        assert!(!product_matches("cursor", "windsurf"));
    }
}

//! The `koru` command line: clap definitions, logging set-up, and dispatch to the daemon, the client commands and the dev tools.

mod audit_cmd;
mod commands;
mod dashboard_cmd;
mod dial_cmd;
pub mod doctor_cmd;
mod hook_cmd;
mod host_cmd;
mod journal_cmd;
mod recover_cmd;
pub mod registry_cmd;
pub mod setup_cmd;
mod token_cmd;
mod views;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::agent_hooks::HookAgent;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// Exit status of a client command whose daemon is not running.
pub const EXIT_NO_DAEMON: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "koru",
    version,
    about = "Koru: the control plane between people/programs and the AI chats inside IDEs",
    long_about = "Koru runs a daemon that IDE plugins connect to over a Unix socket, and pushes prompts into their AI chats.\n\nStart the daemon with `koru daemon`; then `koru sessions` lists connected IDE windows and `koru send` pushes a prompt."
)]
pub struct Cli {
    /// The daemon's socket [default: $KORU_SOCKET, else $XDG_RUNTIME_DIR/koru/koru.sock, else /tmp/koru-$UID/koru.sock]
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    /// Log format on stderr
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// An extra registry layer file, applied over the built-in, user and project layers
    #[arg(long, global = true, value_name = "FILE")]
    pub registry: Option<PathBuf>,

    /// The machine whose daemon to ask: `local` (this one), `ssh://[user@]host[:port]`
    /// (through the system ssh, which runs `koru dial-stdio` there) or a name from `koru host
    /// add`; repeat it to merge several [default: $KORU_HOST (comma-separated), else local]
    #[arg(long = "host", global = true, value_name = "HOST")]
    pub hosts: Vec<String>,

    /// An option for ssh (passed as `-o OPTION`, e.g. IdentityFile=~/.ssh/box); repeatable
    #[arg(long = "ssh-option", global = true, value_name = "OPTION")]
    pub ssh_options: Vec<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground (stop it with Ctrl-C or SIGTERM)
    Daemon(DaemonArgs),
    /// Say whether a daemon is running, and what it serves
    Status(JsonFlag),
    /// List the connected IDE windows (plugin sessions)
    Sessions(JsonFlag),
    /// Push a prompt into an IDE chat
    Send(SendArgs),
    /// List recent drives (prompts pushed) and how each ended
    Drives(DrivesArgs),
    /// Cancel a drive that has not finished
    Cancel(CancelArgs),
    /// Prove the drive journal intact: every entry's seal and link (exit 0), or the first
    /// bad entry and what is wrong (exit 1); exit 2 when there is nothing usable to check
    Verify(VerifyArgs),
    /// Import a chat Koru reads into a standalone, verifiable ledger (one sealed entry per
    /// prompt, text, tool call and result, turn end), or extend its ledger with what is new;
    /// exit 1 when the part imported before was rewritten (recorded, nothing imported)
    Audit(AuditArgs),
    /// The drive journal: export a stretch of it as proof
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Check which interfaces work on this machine, why not, and what to do about it
    Doctor(DoctorArgs),
    /// Inspect and check the interface registry
    #[command(subcommand)]
    Registry(RegistryCommand),
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Follow what the AI agents' chat-history stores show, live (prompts, replies, completion)
    Observe(ObserveArgs),
    /// List the chats the observers know, with their state
    Chats(JsonFlag),
    /// Read a chat back from its store: prompts, the agent's steps, whole replies
    #[command(subcommand)]
    Chat(ChatCommand),
    /// Run a recovery action: re-probe, reload the registry, retry or cancel a drive, reconnect a plugin, focus a window
    Recover(RecoverArgs),
    /// Wire Koru into this machine's IDEs, terminal agents and MCP clients (extension and
    /// plugin, hooks, `koru mcp` entries, the systemd user unit): shows the plan with diffs,
    /// asks once, records what it did; `--undo` takes it back
    Setup(setup_cmd::SetupArgs),
    /// Commands for other tools' hooks
    #[command(subcommand)]
    Hook(HookCommand),
    /// Serve MCP over stdio for a controller LLM (Claude Desktop, Claude Code, Cursor, VS Code…), acting through the running daemon
    Mcp(McpArgs),
    /// Open the web dashboard: print (and on a desktop open) a one-time login link to the
    /// running daemon's HTTP server (`koru daemon --http`)
    Dashboard(DashboardArgs),
    /// Named hosts for `--host NAME` (kept in $XDG_CONFIG_HOME/koru/hosts.yaml)
    #[command(subcommand)]
    Host(HostCommand),
    /// Scoped bearer tokens for the HTTP API and MCP over HTTP, each with a role (observe:
    /// read only; drive: also act), kept as digests in $XDG_STATE_HOME/koru/tokens.json
    #[command(subcommand)]
    Token(TokenCommand),
    /// Bridge standard input and output to this machine's daemon socket, byte for byte
    /// (what `koru --host ssh://…` runs on the far side of ssh)
    DialStdio(DialArgs),
    /// Tools for plugin authors and tests
    #[command(subcommand)]
    Dev(DevCommand),
}

impl Command {
    /// Whether the command asks a daemon that `--host` may name.
    pub fn takes_host(&self) -> bool {
        matches!(
            self,
            Command::Status(_)
                | Command::Sessions(_)
                | Command::Send(_)
                | Command::Drives(_)
                | Command::Cancel(_)
                | Command::Recover(_)
                | Command::Chats(_)
                | Command::Chat(_)
                | Command::Audit(_)
                | Command::Observe(_)
                | Command::Doctor(_)
                | Command::Mcp(_)
        )
    }
}

/// `koru dial-stdio`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DialArgs {
    /// Hold the connection to this role: observe lets the far side read only (sessions,
    /// drives, chats, events, doctor); the daemon refuses anything else with forbidden_role
    /// and journals it. For an SSH key that may only watch, force it in authorized_keys:
    /// `command="koru dial-stdio --role observe"`
    #[arg(long, value_enum)]
    pub role: Option<crate::access::Role>,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve this machine and every named host (`koru host ls`) as one server, as if each
    /// were given with --host
    #[arg(long)]
    pub all_hosts: bool,
    /// What the controller may do: observe offers only the read tools (list_sessions,
    /// get_drive, wait_for_reply, doctor, verify_journal, list_interfaces) and refuses the
    /// others with forbidden_role; drive offers every tool
    #[arg(long, value_enum, default_value = "drive")]
    pub role: crate::access::Role,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a new token and print it, once (only its SHA-256 is kept)
    Create {
        /// observe: read only (sessions, drives, chats, events, doctor, journal verify);
        /// drive: also send, cancel, retry and recover
        #[arg(long, value_enum)]
        role: crate::access::Role,
        /// A name to list and revoke it by (letters, digits, `.`, `_`, `-`)
        #[arg(long)]
        name: Option<String>,
        /// Print `{"id", "name", "role", "token"}`
        #[arg(long)]
        json: bool,
    },
    /// List the tokens (the default one and the scoped ones), never their secrets
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// End a scoped token, by id (`tok_…`) or name; a running daemon refuses it from its
    /// next request on
    Revoke {
        #[arg(value_name = "ID|NAME")]
        which: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Name a host: `koru host add box ssh://me@box.example:2222` (the `--ssh-option`s given
    /// are kept with it)
    Add {
        /// Letters, digits, `.`, `_`, `-` (`local` is this machine)
        name: String,
        /// ssh://[user@]host[:port]
        url: String,
        /// The koru program on that host [default: koru, on its PATH]
        #[arg(long, value_name = "PATH")]
        koru: Option<String>,
        /// Replace a host of that name
        #[arg(long)]
        force: bool,
    },
    /// List the named hosts
    Ls {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Forget a named host
    Rm { name: String },
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Only print the link; do not start a browser
    #[arg(long)]
    pub no_open: bool,
    /// Print `{"url", "expires_at_ms"}` as JSON (implies --no-open)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Heartbeat interval: plugins silent for 2 intervals are stale, for 4 are dropped
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub heartbeat_ms: u64,
    /// How long a new connection has to send hello
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub handshake_timeout_ms: u64,
    /// Longest accepted line in bytes
    #[arg(long, value_name = "BYTES", default_value_t = koru_protocol::DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
    /// Default time a drive may take before it ends timed_out
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub drive_timeout_ms: u64,
    /// How long a plugin may take to ack the next stage of a route
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub step_timeout_ms: u64,
    /// Drives one session may hold that have not ended (running and queued); past it a
    /// `drive.create` is refused with `queue_full`
    #[arg(long, value_name = "DRIVES", default_value_t = 1_000)]
    pub max_queued_drives: usize,
    /// Bytes of prompt text the daemon may hold in drives queued and not yet sent, over all
    /// sessions (one session may hold half); past it a `drive.create` is refused with
    /// `queue_full`
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_pending_prompt_bytes: usize,
    /// Requests one connection may have sent that the daemon has not handled yet; past it
    /// the next request is refused with `queue_full` (each waiting request holds its line,
    /// up to --max-line-bytes)
    #[arg(long, value_name = "REQUESTS", default_value_t = 256)]
    pub max_requests_in_flight: usize,
    /// Lines queued for one peer before it is disconnected as a slow reader
    #[arg(long, value_name = "LINES", default_value_t = 1024)]
    pub outbound_queue: usize,
    /// Also serve HTTP here, e.g. 127.0.0.1:8765: MCP at /mcp, the JSON API at /api/v1 and
    /// the web dashboard at / (docs/http-api.md); requests need the bearer token shown by
    /// `koru status`, or the dashboard's login cookie (`koru dashboard`)
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// Allow --http on an address that is not loopback (others on the network can then
    /// reach the endpoint; the token still guards it); it needs --http-tls-cert and
    /// --http-tls-key, so the token never crosses the network in clear
    #[arg(long)]
    pub http_allow_remote: bool,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --http-tls-key.
    /// Required off loopback; allowed on loopback too
    #[arg(long, value_name = "FILE", requires = "http_tls_key")]
    pub http_tls_cert: Option<PathBuf>,
    /// The PEM private key of --http-tls-cert
    #[arg(long, value_name = "FILE", requires = "http_tls_cert")]
    pub http_tls_key: Option<PathBuf>,
    /// How many events the HTTP server keeps for clients that resume (tests make it small)
    /// [default: the HTTP server's own, 1024]
    #[arg(long, value_name = "EVENTS", hide = true)]
    pub http_event_buffer: Option<usize>,
    /// Do not observe the AI agents' chat-history stores
    #[arg(long)]
    pub no_observe: bool,
    /// Quiet period after which a reply that looks complete is taken as finished when the
    /// store writes no end-of-turn record (basis `inferred`)
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub observe_quiet_ms: u64,
    /// Do not keep the observers' per-file summary cache (every start reads the chat
    /// history again) [default: $XDG_CACHE_HOME/koru/observers/<socket digest>.ndjson]
    #[arg(long)]
    pub no_observe_cache: bool,
    /// Hand out the agents' tool arguments (step summaries, command lines) as the chat
    /// stores have them, without replacing secrets-looking values by `[redacted]`
    #[arg(long)]
    pub no_redact_tool_arguments: bool,
    /// Keep the drive journal in DIR [default: $XDG_STATE_HOME/koru/journal]
    #[arg(long, value_name = "DIR")]
    pub journal: Option<PathBuf>,
    /// Keep no journal: drives live in memory only and are forgotten at exit
    #[arg(long, conflicts_with = "journal")]
    pub no_journal: bool,
    /// Do not read a drive's chat back for the chat's own evidence (where its store holds
    /// the prompt and the turn's end, their SHA-256, the reply's digest) nor journal it
    #[arg(long)]
    pub no_drive_evidence: bool,
    /// Keep each prompt's text (full) or only its digest and length (digest: no prompt
    /// text anywhere on disk)
    #[arg(long, value_enum, value_name = "MODE", default_value = "full")]
    pub journal_prompts: crate::journal::PromptsMode,
    /// Longest time between a journal write and its fdatasync (group commit); a power
    /// loss can lose at most this much of what was answered
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub journal_fsync_ms: u64,
    /// Prune whole journal segments beyond an age and/or size (90d, 500MiB, 90d,2GiB,
    /// forever); a checkpoint entry keeps the rest provable
    #[arg(long, value_name = "LIMITS", default_value = "1GiB")]
    pub journal_retain: String,
    /// Start a new journal segment beyond this many bytes (tests make it small)
    #[arg(long, value_name = "BYTES", hide = true)]
    pub journal_segment_bytes: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum ChatCommand {
    /// Print a chat's last turns (or a drive's turn): each prompt, the steps the agent took
    /// (tools, files, commands with their exit status) and the whole reply
    Show(ChatShowArgs),
}

#[derive(Debug, Args)]
pub struct ChatShowArgs {
    /// The chat (`koru chats` lists them); or give --drive
    #[arg(required_unless_present = "drive", conflicts_with = "drive")]
    pub chat_id: Option<String>,
    /// The drive whose turn to show (the chat its prompt was seen in)
    #[arg(long, value_name = "DRIVE_ID")]
    pub drive: Option<String>,
    /// The store of the chat, when two stores have a chat of that id
    #[arg(long, value_name = "STORE")]
    pub store: Option<String>,
    /// How many of the chat's last turns [default: 1; at most 50]
    #[arg(long, value_name = "N")]
    pub turns: Option<u32>,
    /// Print JSON (`chat.read.result`, the replies whole) instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// The hook for Claude Code (SessionStart, UserPromptSubmit, PermissionRequest,
    /// Notification, Stop, StopFailure, SessionEnd): reads the hook's JSON on stdin and
    /// tells the daemon what the transcript does not record; prints nothing, never fails
    /// the hook
    ClaudeCode {
        /// Print the settings snippet that installs this hook, instead
        #[arg(long)]
        print_config: bool,
    },
    /// The hook for Codex CLI (SessionStart, UserPromptSubmit, PermissionRequest, Stop,
    /// SessionEnd), as for Claude Code
    Codex,
    /// The hook for Gemini CLI (SessionStart, BeforeAgent, AfterAgent, Notification,
    /// SessionEnd), as for Claude Code
    GeminiCli,
    /// Put Koru's hook into agents' own settings, beside the user's hooks (a backup of
    /// each file is kept; a file that does not parse is left untouched)
    Install(HookInstallArgs),
    /// Take out exactly the entries `koru hook install` added
    Uninstall(HookInstallArgs),
}

#[derive(Debug, Args)]
pub struct HookInstallArgs {
    /// The agents (claude-code: ~/.claude/settings.json, codex: ~/.codex/hooks.json,
    /// gemini-cli: ~/.gemini/settings.json)
    #[arg(value_enum, required = true)]
    pub agents: Vec<crate::agent_hooks::HookAgent>,
    /// Edit this settings file instead (a project's .claude/settings.json, say); with one
    /// agent only
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Print the change as a diff and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ObserveArgs {
    /// Only this store (registry interface id, e.g. chat_history_claude_code_jsonl)
    #[arg(long, value_name = "ID")]
    pub store: Option<String>,
    /// Only chats of this workspace folder (or a folder inside it)
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print one JSON object per event
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The prompt; `-` reads it from standard input
    pub prompt: String,
    /// Send to this session id: a window's `s_…`, or a terminal agent's `t_…` (`koru
    /// sessions` lists both)
    #[arg(long, group = "target", value_name = "ID")]
    pub session: Option<String>,
    /// Send to the terminal agent of this product (claude-code, codex, gemini-cli,
    /// opencode) running in tmux, kitty, WezTerm or an IDE terminal; with --workspace, the one running in that folder
    #[arg(long, value_name = "PRODUCT", conflicts_with_all = ["session", "ide", "window_pid", "chat"])]
    pub agent: Option<String>,
    /// Send to the running terminal agent that holds this chat (an id from `koru chats`)
    #[arg(long, group = "target", value_name = "CHAT_ID")]
    pub chat: Option<String>,
    /// For a terminal agent: type a prompt starting with `/`, `!` or `#` as the agent's
    /// command (a slash command, a shell command, a memory note); without it such a prompt
    /// is refused
    #[arg(long)]
    pub agent_command: bool,
    /// Send to the window that has this folder (or a folder containing it) open: a path, a
    /// folder URI, or a remote window's folder as `ssh-remote+HOST:/path`
    /// (`vscode-remote://ssh-remote+HOST/path` works too)
    #[arg(long, group = "target", value_name = "PATH")]
    pub workspace: Option<PathBuf>,
    /// Send to the window of this IDE product (vscode, cursor, code-server, jetbrains-idea, …)
    #[arg(long, group = "target", value_name = "PRODUCT")]
    pub ide: Option<String>,
    /// Send to an IDE window without a plugin, by process id (OS injection only)
    #[arg(long, group = "target", value_name = "PID")]
    pub window_pid: Option<u32>,
    /// Send to an IDE window without a plugin, by title regular expression (OS injection only)
    #[arg(long, value_name = "REGEX")]
    pub window_title: Option<String>,
    /// Fail at once if the chat is busy, instead of waiting for it to be idle
    #[arg(long)]
    pub fail_if_busy: bool,
    /// Leave the prompt in the chat input without submitting it
    #[arg(long)]
    pub no_submit: bool,
    /// Start a new chat first
    #[arg(long)]
    pub new_chat: bool,
    /// Wait for the drive to end; print its stages; exit non-zero unless it is done
    #[arg(long)]
    pub wait: bool,
    /// Also wait for the chat's reply, as its own history store shows it, and print it
    /// (implies --wait; needs an observed chat store, see `koru chats`)
    #[arg(long)]
    pub wait_reply: bool,
    /// How long the drive may take, in seconds [default: the daemon's]; with
    /// --wait-reply also how long to wait for the reply [default: 120]
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Print the drive as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DrivesArgs {
    /// Only drives that have not ended
    #[arg(long)]
    pub active: bool,
    /// Under the table, each drive's evidence from its chat's store: where the prompt and
    /// the turn's end are recorded, with their SHA-256 and the reply's
    #[arg(long)]
    pub evidence: bool,
    /// Every drive in the journal, not only the newest 100
    #[arg(long)]
    pub all: bool,
    /// Only drives created since TIME: RFC 3339 (2026-11-25T09:00:00Z) or an age (90m, 12h, 7d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only drives accepted before this one (page back from a listing's oldest drive)
    #[arg(long, value_name = "DRIVE_ID")]
    pub before: Option<String>,
    /// At most N drives, the newest of the matches [default: 100; at most 1000]
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Only drives of this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    pub drive_id: String,
    /// Print the drive as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[arg(value_enum)]
    pub action: crate::recovery::ActionName,
    /// The drive (retry_drive, cancel_drive)
    #[arg(long, value_name = "ID")]
    pub drive: Option<String>,
    /// The plugin session (reconnect_plugin, focus_window)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The route a retry takes [default: the planner's order]
    #[arg(long, value_enum)]
    pub route: Option<recover_cmd::RouteName>,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON (schema: docs/doctor.schema.json)
    #[arg(long)]
    pub json: bool,
    /// Check only these interfaces
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub only: Vec<String>,
    /// Time limit of each probe in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The journal folder [default: the running daemon's, else $XDG_STATE_HOME/koru/journal]
    pub dir: Option<PathBuf>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The chat (`koru chats` lists them) [default: the most recently active chat]; with
    /// --source, the chat's id in a file of several chats (Cursor, opencode)
    pub chat: Option<String>,
    /// The store of the chat (registry interface id, as `koru chats` shows it); needed
    /// with --source
    #[arg(long, value_name = "ID")]
    pub store: Option<String>,
    /// Read this file (or database) directly, without a daemon (needs --store)
    #[arg(long, value_name = "FILE", requires = "store")]
    pub source: Option<PathBuf>,
    /// The ledger's folder [default: $XDG_STATE_HOME/koru/audits/<store>/<chat>/]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write the ledger's self-verifying HTML page to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the result as JSON (`chat.audit.result`)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Write one self-contained HTML file holding journal entries that re-verifies its own
    /// chain in the recipient's browser (no network)
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The HTML file to write
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    /// Only the stretch from this drive's acceptance to its end (its prompt included)
    #[arg(long, value_name = "ID", conflicts_with = "since")]
    pub drive: Option<String>,
    /// Only entries since TIME: RFC 3339 or an age (90m, 12h, 7d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// The journal folder [default: the running daemon's, else $XDG_STATE_HOME/koru/journal]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Check the layer files (or built-in + FILE); exit 1 with located diagnostics
    Validate { file: Option<PathBuf> },
    /// Show the merged registry, or one interface with the layer each value came from
    Show {
        id: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema of a registry file (for editor completion)
    Schema,
}

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// A reference plugin that speaks the protocol like an IDE plugin would
    FakePlugin(Box<crate::dev::fake_plugin::FakePluginArgs>),
    /// Print the JSON Schema of one protocol line (the same as docs/protocol.schema.json)
    ProtocolSchema,
}

/// Every value of the repeatable global option `long` (`--host`, `--ssh-option`) on the
/// command line, in order, before and after the subcommand. clap keeps only the values given
/// after the subcommand when a global option appears on both sides (`koru --host a sessions
/// --host b` would be `b` alone), so the command line clap has already accepted is read
/// again here; scanning stops at a bare `--`, after which nothing is an option.
pub fn repeated_global(args: &[std::ffi::OsString], long: &str) -> Vec<String> {
    let with_value = format!("{long}=");
    let mut values = Vec::new();
    let mut args = args.iter().skip(1).map(|arg| arg.to_string_lossy());
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if arg == long {
            if let Some(value) = args.next() {
                values.push(value.into_owned());
            }
        } else if let Some(value) = arg.strip_prefix(&with_value) {
            values.push(value.to_string());
        }
    }
    values
}

/// Runs one of the client commands (every command but `daemon`, `mcp` and `dev
/// fake-plugin`, which `entry.rs` hands to their own rooms); `hosts` says which daemon(s)
/// the commands that ask one talk to.
pub async fn run(
    command: Command,
    hosts: &crate::control::hosts::HostChoice,
    layers: crate::registry::LayerPaths,
) -> anyhow::Result<ExitCode> {
    let socket = hosts.socket.as_path();
    match command {
        Command::Host(command) => host_cmd::run(command, hosts),
        Command::Setup(args) => setup_cmd::run(args),
        Command::Token(command) => token_cmd::run(command),
        Command::DialStdio(args) => dial_cmd::run(socket, args.role).await,
        Command::Doctor(args) => doctor_cmd::run(hosts, args, layers).await,
        Command::Registry(RegistryCommand::Validate { file }) => {
            registry_cmd::validate(file.as_deref(), &layers)
        }
        Command::Registry(RegistryCommand::Show { id, json }) => {
            registry_cmd::show(id.as_deref(), json, &layers)
        }
        Command::Registry(RegistryCommand::Schema) => registry_cmd::schema(),
        Command::Status(flag) => views::status(hosts, flag.json).await,
        Command::Sessions(flag) => views::sessions(hosts, flag.json).await,
        Command::Send(args) => commands::send(hosts, args).await,
        Command::Drives(args) => views::drives(hosts, args).await,
        Command::Cancel(args) => commands::cancel(hosts, args).await,
        Command::Verify(args) => journal_cmd::verify(socket, args).await,
        Command::Journal(JournalCommand::Export(args)) => journal_cmd::export(socket, args).await,
        Command::Recover(args) => recover_cmd::run(hosts, args).await,
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "koru", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Dev(DevCommand::ProtocolSchema) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&koru_protocol::json_schema())?
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Dashboard(args) => dashboard_cmd::run(socket, args).await,
        Command::Hook(HookCommand::ClaudeCode { print_config }) => {
            hook_cmd::run(socket, HookAgent::ClaudeCode, print_config).await
        }
        Command::Hook(HookCommand::Codex) => hook_cmd::run(socket, HookAgent::Codex, false).await,
        Command::Hook(HookCommand::GeminiCli) => {
            hook_cmd::run(socket, HookAgent::GeminiCli, false).await
        }
        Command::Hook(HookCommand::Install(args)) => hook_cmd::install_or_uninstall(
            &args.agents,
            args.settings.as_deref(),
            args.dry_run,
            false,
        ),
        Command::Hook(HookCommand::Uninstall(args)) => hook_cmd::install_or_uninstall(
            &args.agents,
            args.settings.as_deref(),
            args.dry_run,
            true,
        ),
        Command::Observe(args) => commands::observe(hosts, args).await,
        Command::Chats(flag) => commands::chats(hosts, flag.json).await,
        Command::Chat(ChatCommand::Show(args)) => commands::chat_show(hosts, args).await,
        Command::Audit(args) => audit_cmd::run(hosts, args).await,
        Command::Daemon(_) | Command::Mcp(_) | Command::Dev(DevCommand::FakePlugin(_)) => {
            anyhow::bail!("daemon, mcp and dev fake-plugin are not client commands")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<std::ffi::OsString> {
        line.split(' ').map(Into::into).collect()
    }

    #[test]
    fn repeated_globals_keep_every_occurrence_on_both_sides_of_the_subcommand() {
        let line = args(
            "koru --host a --ssh-option X=1 sessions --host=b --json --ssh-option Y=2 -- --host c",
        );
        assert_eq!(repeated_global(&line, "--host"), ["a", "b"]);
        assert_eq!(repeated_global(&line, "--ssh-option"), ["X=1", "Y=2"]);
        // clap itself accepts the same line, keeping only what follows the subcommand.
        let parsed = Cli::try_parse_from(args("koru --host a sessions --host b")).unwrap();
        assert_eq!(parsed.hosts, ["b"]);
        assert!(repeated_global(&args("koru sessions --hostname x"), "--host").is_empty());
    }
}

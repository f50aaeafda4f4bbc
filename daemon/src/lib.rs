//! koru-daemon: the daemon (socket server, sessions, drives) and the `koru` command line that talks to it.
//!
//! Rooms, from the bottom up (docs/architecture.md; `tests/rooms.rs` keeps the order): base
//! helpers (among them `desktop/`, the desktop's D-Bus services, and `access/`, roles and scoped tokens); the domain rooms `registry/`, `observe/`, `drive/`; `control/` (the client side of
//! the protocol under every face); `doctor/`; `app/` (the single state machine fed by one
//! closed event enum); `server/` (the socket); `dev/` (the reference fake plugin); the faces
//! `cli/`, `http/`, `mcp/`, `notify/`; `main_loop.rs` (the wiring); `entry.rs` (the binary).

/// Who may do what from outside the user's shell: roles and scoped bearer tokens.
pub mod access;
/// The terminal agents' hooks: Koru's entries in their settings, installed and removed.
pub mod agent_hooks;
/// The state machine: sessions, drives, chats, recovery, fed by one closed event enum.
pub mod app;
/// Folder watches that hear only names appearing (and the folder going away), not writes.
pub mod appear_watch;
/// `koru audit`: a chat's items in a standalone, verifiable ledger, extended as the chat grows.
pub mod audit;
/// The `koru` subcommands (a face).
pub mod cli;
/// Time behind a trait, so the state machine can be tested with a fake clock.
pub mod clock;
/// NDJSON framing with a line-length limit.
pub mod codec;
/// The control layer under the faces: the protocol's client side over the socket (typed
/// requests, following a drive, the one client-error → code map), for every face.
pub mod control;
/// Conversations read back from the chat stores as turns, on request (`chat.read`).
pub mod conversation;
/// The desktop's D-Bus services: bus connections, screen-lock sources, notifications.
pub mod desktop;
/// The reference fake plugin (`koru dev fake-plugin`) for plugin authors and tests.
pub mod dev;
/// `koru doctor`: probes, evaluation against the registry, the report and its rendering.
pub mod doctor;
/// Delivering a prompt: the route planner and OS injection.
pub mod drive;
/// What the `koru` binary runs: the command line handed to each command's room.
pub mod entry;
/// The HTTP server (loopback, or HTTPS off loopback): REST API, event stream, dashboard, MCP
/// over HTTP (a face).
pub mod http;
pub mod journal;
/// Where the daemon's log lines go (buffered while the state machine handles a run of events).
pub mod log_lines;
/// The daemon's main loop and wiring: socket server, state machine, observers, registry
/// watch, HTTP with MCP mounted in it, signals.
pub mod main_loop;
/// The MCP server for a controller LLM (a face).
pub mod mcp;
/// Returning freed heap pages to the system after start-up and reloads.
pub mod memory;
/// Desktop notifications when a drive needs the person, whose buttons run recovery actions
/// (a face).
pub mod notify;
/// Chat-store observers: parsers, followers, the watcher.
pub mod observe;
/// Where the daemon's socket lives.
pub mod paths;
/// The recovery actions as people and programs name them, shared by every face.
pub mod recovery;
/// The daemon's side of the interface registry: layer paths, loading, the view, watching.
pub mod registry;
/// The Unix socket server and the wiring of every subsystem.
pub mod server;
/// `koru setup`: wiring Koru into this machine's IDEs, agents and MCP clients, and taking it back.
pub mod setup;
/// Server-sent events from a server on this machine (a terminal agent's own, opencode's).
pub mod sse;
/// Plain-text tables and ages for the faces and doctor.
pub mod table;
/// Terminal agents found where they run: tmux panes and the agent processes under them.
pub mod terminal;
/// What a workspace named by a user or a controller means (path, folder URI, remote form)
/// and how well it matches a window's folders.
pub mod workspace_ref;

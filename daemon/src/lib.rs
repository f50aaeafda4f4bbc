//! koru-daemon: the daemon (socket server, sessions, drives) and the `koru` command line that talks to it.
//!
//! Rooms: `server/` owns the Unix socket and one task per connection; `app/` is the single
//! state machine that every connection feeds through one closed event enum; `client.rs` is
//! the controller/plugin side of the protocol used by the CLI and the dev fake plugin;
//! `cli/` holds the subcommands; `dev/` the reference fake plugin.

pub mod app;
pub mod cli;
pub mod client;
pub mod clock;
pub mod codec;
pub mod dev;
pub mod doctor;
pub mod drive;
pub mod http;
pub mod mcp;
pub mod observe;
pub mod paths;
pub mod recovery;
pub mod registry;
pub mod server;

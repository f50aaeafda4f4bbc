//! What the `koru` binary runs: parses the command line, sets up logging and the runtime, and hands each command to its room: `koru daemon` to the main loop, `koru mcp` to the MCP face, `koru dev fake-plugin` to the reference plugin, every other command to the CLI face.

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, DevCommand, LogFormat, EXIT_NO_DAEMON};
use crate::control::hosts::{hosts_file_path, HostChoice, HOST_ENV};

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let mut cli = Cli::parse();
    // Repeated global options keep every occurrence, wherever it stands (see
    // `repeated_global`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    cli.hosts = crate::cli::repeated_global(&args, "--host");
    cli.ssh_options = crate::cli::repeated_global(&args, "--ssh-option");
    init_logging(cli.log_format, matches!(cli.command, Command::Daemon(_)));
    // Every command runs on one thread. The daemon is one event loop: every message
    // crosses several tasks (connection reader → state machine → peer's writer), and on
    // one thread those hand-offs are plain queue pushes instead of cross-thread wake-ups.
    // A client command is a few exchanges on one socket: a multi-threaded runtime's start
    // (worker threads, the cgroup files read to size them) is time it does not need.
    // Blocking work (registry reloads, journal verification, doctor's scans) goes to
    // tokio's blocking pool.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("koru: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let socket = crate::paths::socket_path(cli.socket.as_deref());
    let layers = crate::cli::registry_cmd::cli_layer_paths(cli.registry.as_ref());
    if !cli.hosts.is_empty() && !cli.command.takes_host() {
        eprintln!("koru: --host only applies to the commands that ask a daemon (status, sessions, send, drives, cancel, recover, chats, observe, doctor, mcp)");
        return ExitCode::from(2);
    }
    // `$KORU_HOST` stands in for --host on the commands that take one, and is ignored by
    // the others (a daemon started from a shell that sets it is still this machine's).
    let requested = if cli.hosts.is_empty() && cli.command.takes_host() {
        std::env::var(HOST_ENV)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_string)
            .collect()
    } else {
        cli.hosts.clone()
    };
    let hosts = HostChoice {
        requested,
        ssh_options: cli.ssh_options.clone(),
        socket: socket.clone(),
        hosts_file: hosts_file_path(),
        // `koru mcp`'s standard streams are the MCP channel: ssh must not ask there.
        interactive: !matches!(cli.command, Command::Mcp(_)),
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Daemon(args) => {
                // The daemon's own layers: project layers belong to sessions, not to the
                // directory the daemon was started from.
                let daemon_layers =
                    crate::registry::LayerPaths::discover(None, cli.registry.as_deref());
                crate::main_loop::run_daemon(socket, args, daemon_layers).await
            }
            Command::Mcp(args) => {
                crate::mcp::serve_stdio(hosts, args.all_hosts, args.role, layers).await
            }
            Command::Dev(DevCommand::FakePlugin(args)) => {
                crate::dev::fake_plugin::run(&socket, *args).await
            }
            command => crate::cli::run(command, &hosts, layers).await,
        }
    });
    // Connection tasks may still be parked on I/O; do not wait for them at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(code) => code,
        Err(err) => {
            if let Some(client_error) = err.downcast_ref::<crate::control::ClientError>() {
                if matches!(
                    client_error,
                    crate::control::ClientError::NoDaemon { .. }
                        | crate::control::ClientError::Unreachable { .. }
                ) {
                    eprintln!("koru: {client_error}");
                    return ExitCode::from(EXIT_NO_DAEMON);
                }
            }
            eprintln!("koru: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat, is_daemon: bool) {
    use tracing_subscriber::EnvFilter;
    // The daemon logs at info by default; client commands stay quiet unless asked.
    let default = if is_daemon { "info" } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::log_lines::LogLines)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if is_daemon {
        crate::log_lines::install_panic_flush();
    }
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

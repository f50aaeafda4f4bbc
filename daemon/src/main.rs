//! The `koru` binary: parses the command line and hands over to the CLI dispatcher.

fn main() -> std::process::ExitCode {
    koru_daemon::entry::main()
}

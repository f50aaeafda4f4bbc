//! `koru dial-stdio`: bridges standard input and output to this machine's daemon socket byte for byte — what `koru --host ssh://…` runs on the far side of ssh. The daemon sees an ordinary connection from this process, so its peer-UID check applies (the ssh login user must be the daemon's user). It ends when either side closes.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

/// How long the bridge waits for the daemon's last bytes once standard input has ended.
const DRAIN: Duration = Duration::from_secs(5);

pub async fn run(socket: &Path) -> anyhow::Result<ExitCode> {
    // "Nobody there" is `ClientError::NoDaemon`: exit 3 and the usual message.
    let stream = crate::control::connect_stream(socket).await?;
    let stream = stream
        .into_std()
        .context("cannot take over the daemon's socket")?;
    stream
        .set_nonblocking(false)
        .context("cannot make the daemon's socket blocking")?;
    // Plain blocking copies on two threads: no buffering between the pipes and the socket,
    // and no runtime hop per line.
    tokio::task::spawn_blocking(move || bridge(stream))
        .await
        .context("the bridge stopped")??;
    Ok(ExitCode::SUCCESS)
}

/// Which side ended first.
enum Ended {
    /// Standard input reached its end (or failed): the daemon has been told (write side
    /// shut down) and may still send its last lines.
    Input,
    /// The daemon closed the connection (or standard output failed).
    Daemon,
}

fn bridge(socket: UnixStream) -> anyhow::Result<()> {
    // Unbuffered handles on fds 0 and 1 (std's stdout buffers by line).
    let stdin = std::fs::File::from(
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .context("cannot use standard input")?,
    );
    let stdout = std::fs::File::from(
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("cannot use standard output")?,
    );
    let upstream = socket
        .try_clone()
        .context("cannot share the daemon's socket between two threads")?;
    let (ended_tx, ended_rx) = std::sync::mpsc::channel();
    let input_ended = ended_tx.clone();
    std::thread::Builder::new()
        .name("dial-stdin".into())
        .spawn(move || {
            let _ = copy(stdin, &upstream);
            let _ = upstream.shutdown(std::net::Shutdown::Write);
            let _ = input_ended.send(Ended::Input);
        })
        .context("cannot start the bridge")?;
    std::thread::Builder::new()
        .name("dial-stdout".into())
        .spawn(move || {
            let _ = copy(&socket, stdout);
            let _ = ended_tx.send(Ended::Daemon);
        })
        .context("cannot start the bridge")?;
    match ended_rx.recv() {
        Ok(Ended::Input) => {
            // The daemon answers an ended input by closing; give its last lines time to go.
            let _ = ended_rx.recv_timeout(DRAIN);
        }
        Ok(Ended::Daemon) | Err(_) => {}
    }
    Ok(())
}

/// Copies until the reader ends, writing each read at once.
fn copy(mut from: impl Read, mut to: impl Write) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        to.write_all(&buffer[..read])?;
    }
}

//! `koru dial-stdio`: bridges standard input and output to this machine's daemon socket byte for byte — what `koru --host ssh://…` runs on the far side of ssh. The daemon sees an ordinary connection from this process, so its peer-UID check applies (the ssh login user must be the daemon's user). It ends when either side closes. With `--role observe` (an SSH forced command for a key that may only watch) the one line it does not pass on as it came is the client's `hello`: it goes on with `scope: observe`, so the daemon holds the connection to reading.

use std::io::{BufRead, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

/// How long the bridge waits for the daemon's last bytes once standard input has ended.
const DRAIN: Duration = Duration::from_secs(5);

pub async fn run(socket: &Path, role: Option<crate::access::Role>) -> anyhow::Result<ExitCode> {
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
    let scope = role.map(|role| match role {
        crate::access::Role::Observe => koru_protocol::AccessScope::Observe,
        crate::access::Role::Drive => koru_protocol::AccessScope::Drive,
    });
    tokio::task::spawn_blocking(move || bridge(stream, scope))
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

fn bridge(socket: UnixStream, scope: Option<koru_protocol::AccessScope>) -> anyhow::Result<()> {
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
            let mut stdin = std::io::BufReader::with_capacity(64 * 1024, stdin);
            if let Some(scope) = scope {
                if pass_hello_within(scope, &mut stdin, &upstream).is_err() {
                    let _ = upstream.shutdown(std::net::Shutdown::Write);
                    let _ = input_ended.send(Ended::Input);
                    return;
                }
            }
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

/// The longest `hello` line passed on under `--role` (the daemon's own limit is larger; a
/// hello is a few hundred bytes).
const MAX_HELLO_BYTES: u64 = 1024 * 1024;

/// Reads the client's first line and passes it on held to `scope`: a `hello` object gets
/// `scope` (or keeps a narrower one it declared); any other line goes on as it came, for
/// the daemon to refuse as it refuses every connection that does not start with a hello.
fn pass_hello_within(
    scope: koru_protocol::AccessScope,
    from: &mut impl BufRead,
    mut to: impl Write,
) -> std::io::Result<()> {
    let mut line = Vec::new();
    from.take(MAX_HELLO_BYTES).read_until(b'\n', &mut line)?;
    let text = line.strip_suffix(b"\n").unwrap_or(&line);
    if let Ok(serde_json::Value::Object(mut hello)) = serde_json::from_slice(text) {
        if hello.get("type").and_then(|t| t.as_str()) == Some("hello") {
            let declared = hello
                .get("scope")
                .and_then(|s| serde_json::from_value::<koru_protocol::AccessScope>(s.clone()).ok());
            let held = declared.map_or(scope, |declared| declared.min(scope));
            hello.insert("scope".into(), held.as_str().into());
            let mut rewritten = serde_json::to_vec(&hello)?;
            rewritten.push(b'\n');
            return to.write_all(&rewritten);
        }
    }
    to.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::AccessScope;

    fn passed(scope: AccessScope, input: &str) -> String {
        let mut out = Vec::new();
        pass_hello_within(scope, &mut input.as_bytes(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_hello_goes_on_held_to_the_scope_and_a_narrower_one_it_declared_stays() {
        let hello = r#"{"v":1,"type":"hello","id":1,"role":"controller"}"#;
        let out: serde_json::Value =
            serde_json::from_str(&passed(AccessScope::Observe, &format!("{hello}\n"))).unwrap();
        assert_eq!(out["scope"], "observe");
        assert_eq!(out["role"], "controller");
        let asked_for_more = r#"{"v":1,"type":"hello","scope":"drive"}"#;
        let out: serde_json::Value = serde_json::from_str(&passed(
            AccessScope::Observe,
            &format!("{asked_for_more}\n"),
        ))
        .unwrap();
        assert_eq!(
            out["scope"], "observe",
            "a client cannot widen what the key allows"
        );
        let narrower = r#"{"v":1,"type":"hello","scope":"observe"}"#;
        let out: serde_json::Value =
            serde_json::from_str(&passed(AccessScope::Drive, &format!("{narrower}\n"))).unwrap();
        assert_eq!(out["scope"], "observe");
    }

    #[test]
    fn a_first_line_that_is_not_a_hello_goes_on_as_it_came() {
        assert_eq!(passed(AccessScope::Observe, "not json\n"), "not json\n");
        assert_eq!(
            passed(AccessScope::Observe, "{\"type\":\"ping\"}\n"),
            "{\"type\":\"ping\"}\n"
        );
    }
}

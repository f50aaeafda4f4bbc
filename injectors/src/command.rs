//! Running the helper programs (xdotool, wtype, swaymsg, xclip, wl-copy, ydotool) with a time limit, behind a trait so tests can substitute a named fake.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::InjectError;

/// What a finished program said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs programs. `SystemRunner` runs them for real; tests may record or script calls.
pub trait CommandRunner: Send + Sync {
    /// Runs `program args…` with `stdin` (if any) and waits at most `timeout`.
    fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&str>,
        timeout: Duration,
    ) -> Result<Output, InjectError>;

    /// Starts `program args…` with `stdin` and does not wait for it beyond writing stdin
    /// (clipboard owners keep running to serve the selection).
    fn spawn(&self, program: &str, args: &[&str], stdin: &str) -> Result<(), InjectError>;
}

/// Runs programs on this machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&str>,
        timeout: Duration,
    ) -> Result<Output, InjectError> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| spawn_error(program, err))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .map_err(|err| InjectError::Command {
                    program: program.to_string(),
                    detail: format!("cannot write its input: {err}"),
                })?;
        }
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(InjectError::Timeout {
                        what: format!("{program} {}", args.join(" ")),
                        after: timeout,
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(err) => {
                    return Err(InjectError::Command {
                        program: program.to_string(),
                        detail: err.to_string(),
                    })
                }
            }
        }
        let output = child
            .wait_with_output()
            .map_err(|err| InjectError::Command {
                program: program.to_string(),
                detail: err.to_string(),
            })?;
        Ok(Output {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    fn spawn(&self, program: &str, args: &[&str], stdin: &str) -> Result<(), InjectError> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| spawn_error(program, err))?;
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.as_bytes())
                .map_err(|err| InjectError::Command {
                    program: program.to_string(),
                    detail: format!("cannot write its input: {err}"),
                })?;
        }
        // xclip and wl-copy fork a server and their first process exits; reap it so no
        // zombie is left, without waiting for the server.
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        Ok(())
    }
}

fn spawn_error(program: &str, err: std::io::Error) -> InjectError {
    if err.kind() == std::io::ErrorKind::NotFound {
        InjectError::ToolMissing {
            program: program.to_string(),
        }
    } else {
        InjectError::Command {
            program: program.to_string(),
            detail: err.to_string(),
        }
    }
}

/// Checks that a command succeeded, turning its stderr into the error.
pub fn expect_success(program: &str, output: Output) -> Result<Output, InjectError> {
    if output.success {
        Ok(output)
    } else {
        Err(InjectError::Command {
            program: program.to_string(),
            detail: output.stderr.trim().to_string(),
        })
    }
}

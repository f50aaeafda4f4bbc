//! `koru dashboard [--no-open] [--json]`: asks the running daemon where it serves HTTP, gets a one-time login link from it with the bearer token, prints it, and on a desktop opens it in the browser without waiting.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

use super::DashboardArgs;
use crate::control::dashboard_login::mint_login_code;

/// How long the whole exchange with the HTTP server may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(socket: &Path, args: DashboardArgs) -> anyhow::Result<ExitCode> {
    let status = super::commands::controller(socket)
        .once(|c| Box::pin(c.status()))
        .await?;
    let Some(http) = status.http else {
        bail!(
            "the daemon at {} does not serve HTTP; start it with `koru daemon --http 127.0.0.1:8765` to use the dashboard",
            status.socket
        );
    };
    if http.mcp_url.starts_with("https://") {
        bail!(
            "the daemon serves HTTPS ({}); `koru dashboard` mints login links over plain HTTP only: mint one with `curl --cacert CERT -H 'Authorization: Bearer <token>' -X POST {}/api/v1/dashboard/codes`",
            http.mcp_url,
            http.mcp_url.trim_end_matches("/mcp")
        );
    }
    let authority = authority_of(&http.mcp_url)
        .with_context(|| format!("cannot read the daemon's HTTP address {:?}", http.mcp_url))?;
    let code = tokio::time::timeout(HTTP_TIMEOUT, mint_login_code(&authority, &http.token))
        .await
        .with_context(|| format!("http://{authority} did not answer within {HTTP_TIMEOUT:?}"))??;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&code)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("Dashboard: {}", code.url);
    println!("(the link works once, within 60 seconds)");
    if !args.no_open && has_desktop() {
        open_in_browser(&code.url);
    }
    Ok(ExitCode::SUCCESS)
}

/// `127.0.0.1:8765` of `http://127.0.0.1:8765/mcp`.
fn authority_of(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    (!authority.is_empty()).then(|| authority.to_string())
}

fn has_desktop() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

/// Starts `xdg-open URL` in its own process group with no terminal I/O, and does not wait.
fn open_in_browser(url: &str) {
    use std::os::unix::process::CommandExt;
    let started = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if let Err(error) = started {
        eprintln!("koru: cannot start xdg-open ({error}); open the link yourself");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_address_is_read_from_the_mcp_url() {
        assert_eq!(
            authority_of("http://127.0.0.1:8765/mcp").as_deref(),
            Some("127.0.0.1:8765")
        );
        assert_eq!(authority_of("https://x/mcp"), None);
    }
}

//! `koru dashboard [--no-open] [--json]`: asks the running daemon where it serves HTTP, gets a one-time login link from it with the bearer token, prints it, and on a desktop opens it in the browser without waiting.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::DashboardArgs;
use crate::http::api::LoginCode;

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
    let authority = authority_of(&http.mcp_url)
        .with_context(|| format!("cannot read the daemon's HTTP address {:?}", http.mcp_url))?;
    let code = tokio::time::timeout(HTTP_TIMEOUT, mint_code(&authority, &http.token))
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

/// `POST /api/v1/dashboard/codes` with the bearer token, over one plain HTTP/1.1 connection
/// (loopback; a whole HTTP client library would be more than this one request needs).
async fn mint_code(authority: &str, token: &str) -> anyhow::Result<LoginCode> {
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .with_context(|| format!("cannot connect to the daemon's HTTP server at {authority}"))?;
    let request = format!(
        "POST /api/v1/dashboard/codes HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .context("cannot read the HTTP server's answer")?;
    let (status, body) = parse_response(&response)?;
    if status != 200 {
        let message = serde_json::from_slice::<crate::http::errors::ErrorBody>(&body)
            .map(|error| format!("{}: {}", error.code, error.message))
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        bail!("the HTTP server refused a login code (HTTP {status}): {message}");
    }
    serde_json::from_slice(&body).context("the HTTP server's answer is not a login code")
}

/// The status code and body of a whole HTTP/1.1 response (chunked or not). Pure, for tests.
fn parse_response(response: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("the HTTP answer has no end of headers")?;
    let head = String::from_utf8_lossy(&response[..split]);
    let body = &response[split + 4..];
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("the HTTP answer has no status code")?;
    let chunked = head.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
        })
    });
    if !chunked {
        return Ok((status, body.to_vec()));
    }
    let mut decoded = Vec::new();
    let mut rest = body;
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("a chunk has no size line")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .context("a chunk size is not hexadecimal")?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok((status, decoded));
        }
        let chunk = rest.get(..size).context("a chunk is cut short")?;
        decoded.extend_from_slice(chunk);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_plain_or_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).unwrap(), (200, b"{}".to_vec()));
        let chunked =
            b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (401, b"abcde".to_vec()));
        assert!(parse_response(b"garbage").is_err());
        assert_eq!(
            authority_of("http://127.0.0.1:8765/mcp").as_deref(),
            Some("127.0.0.1:8765")
        );
        assert_eq!(authority_of("https://x/mcp"), None);
    }
}

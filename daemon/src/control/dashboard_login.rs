//! The daemon's HTTP API as a client sees it for one exchange: a dashboard login code minted with the bearer token (`POST /api/v1/dashboard/codes`), and the two bodies both sides share (`LoginCode`, `ErrorBody`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A dashboard login link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LoginCode {
    /// `http://HOST:PORT/login?code=…`: open it in a browser within a minute, once.
    pub url: String,
    /// When the code stops working (Unix ms).
    pub expires_at_ms: u64,
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// A stable machine-readable code (`bad_json`, `unauthorized`, `unknown_drive`, …).
    pub code: String,
    /// One sentence for a person: what was wrong and what to do.
    pub message: String,
    /// More about where or why, when there is more to say (`bad_json`: `line`, `column`,
    /// `path`), else null.
    pub detail: Option<serde_json::Value>,
}

/// What can go wrong minting a login code.
#[derive(Debug, thiserror::Error)]
pub enum LoginCodeError {
    #[error("cannot connect to the daemon's HTTP server at {authority}: {source}")]
    Connect {
        authority: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot talk to the daemon's HTTP server: {0}")]
    Io(#[from] std::io::Error),
    #[error("the HTTP answer is malformed: {0}")]
    Malformed(&'static str),
    #[error("the HTTP server refused a login code (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    #[error("the HTTP server's answer is not a login code: {0}")]
    NotALoginCode(#[source] serde_json::Error),
}

/// `POST /api/v1/dashboard/codes` with the bearer token, over one plain HTTP/1.1 connection
/// (loopback; a whole HTTP client library would be more than this one request needs).
pub async fn mint_login_code(authority: &str, token: &str) -> Result<LoginCode, LoginCodeError> {
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|source| LoginCodeError::Connect {
            authority: authority.to_string(),
            source,
        })?;
    let request = format!(
        "POST /api/v1/dashboard/codes HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let (status, body) = parse_response(&response)?;
    if status != 200 {
        let message = serde_json::from_slice::<ErrorBody>(&body)
            .map(|error| format!("{}: {}", error.code, error.message))
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        return Err(LoginCodeError::Refused { status, message });
    }
    serde_json::from_slice(&body).map_err(LoginCodeError::NotALoginCode)
}

/// The status code and body of a whole HTTP/1.1 response (chunked or not). Pure, for tests.
fn parse_response(response: &[u8]) -> Result<(u16, Vec<u8>), LoginCodeError> {
    use LoginCodeError::Malformed;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(Malformed("no end of headers"))?;
    let head = String::from_utf8_lossy(&response[..split]);
    let body = &response[split + 4..];
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or(Malformed("no status code"))?;
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
            .ok_or(Malformed("a chunk has no size line"))?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| Malformed("a chunk size is not hexadecimal"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok((status, decoded));
        }
        let chunk = rest.get(..size).ok_or(Malformed("a chunk is cut short"))?;
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
        assert!(matches!(
            parse_response(b"garbage"),
            Err(LoginCodeError::Malformed("no end of headers"))
        ));
    }
}

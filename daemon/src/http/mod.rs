//! The daemon's HTTP side (`koru daemon --http ADDR`): loopback by default, a bearer token for everything, Host and Origin checks against DNS rebinding, and the MCP streamable HTTP endpoint at `/mcp`.

pub mod token;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::mcp::backend::Backend;
use crate::mcp::server::KoruMcp;
use crate::registry::LayerPaths;

/// Largest request body accepted (a prompt is at most 256 KiB; JSON escaping can double it).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What the guard checks.
#[derive(Clone)]
struct Guard {
    token: Arc<str>,
    /// `host:port` forms a browser may send as Host/Origin for this server.
    allowed_authorities: Arc<Vec<String>>,
}

/// The `host:port` authorities that name this server: the bound address, and
/// `localhost`/`127.0.0.1`/`[::1]` when it is a loopback address.
pub fn allowed_authorities(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut names = vec![match addr {
        SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
        SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
    }];
    if addr.ip().is_loopback() {
        for host in ["localhost", "127.0.0.1", "[::1]"] {
            let name = format!("{host}:{port}");
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Compares without an early exit, so the time taken does not reveal how much matched.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Why a request is refused, or `None` when it may pass. Pure, for tests.
pub fn refusal(
    headers: &HeaderMap,
    token: &str,
    allowed: &[String],
) -> Option<(StatusCode, &'static str)> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match host {
        Some(host) if allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) => {}
        _ => {
            return Some((
                StatusCode::FORBIDDEN,
                "forbidden: the Host header does not name this server",
            ))
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let authority = origin.strip_prefix("http://").unwrap_or("");
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(authority)) {
            return Some((
                StatusCode::FORBIDDEN,
                "forbidden: requests from this Origin are not allowed",
            ));
        }
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        Some(given) if same_secret(given.trim().as_bytes(), token.as_bytes()) => None,
        Some(_) => Some((
            StatusCode::UNAUTHORIZED,
            "unauthorized: wrong bearer token (see `koru status`)",
        )),
        None => Some((
            StatusCode::UNAUTHORIZED,
            "unauthorized: send `Authorization: Bearer <token>` (the token is in `koru status`)",
        )),
    }
}

async fn guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    if let Some((status, message)) =
        refusal(request.headers(), &guard.token, &guard.allowed_authorities)
    {
        tracing::warn!(%status, uri = %request.uri(), "HTTP request refused: {message}");
        let mut response = (status, message).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        return response;
    }
    next.run(request).await
}

/// The router: `/mcp` behind the guard.
pub fn router(
    addr: SocketAddr,
    token: String,
    socket: std::path::PathBuf,
    layers: LayerPaths,
    shutdown: CancellationToken,
) -> Router {
    let allowed = allowed_authorities(addr);
    let hosts: Vec<String> = allowed
        .iter()
        .map(|a| {
            a.rsplit_once(':')
                .map(|(h, _)| h.trim_matches(['[', ']']).to_string())
                .unwrap_or_default()
        })
        .collect();
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_allowed_hosts(hosts)
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let backend = Backend::new(socket);
    let mcp = StreamableHttpService::new(
        move || Ok(KoruMcp::new(backend.clone(), layers.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(
            Guard {
                token: token.into(),
                allowed_authorities: Arc::new(allowed),
            },
            guard,
        ))
}

/// Serves HTTP on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    token: String,
    socket: std::path::PathBuf,
    layers: LayerPaths,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let app = router(addr, token, socket, layers, shutdown.clone());
    tracing::info!(url = %format!("http://{addr}/mcp"), "serving MCP over HTTP");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn loopback_servers_answer_to_their_local_names_only() {
        let allowed = allowed_authorities("127.0.0.1:8765".parse().unwrap());
        assert_eq!(allowed, ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"]);
        let token = "t0ken-t0ken-t0ken";
        let good = [
            ("host", "localhost:8765"),
            ("authorization", "Bearer t0ken-t0ken-t0ken"),
        ];
        assert_eq!(refusal(&headers(&good), token, &allowed), None);
        let with_origin = [good[0], good[1], ("origin", "http://127.0.0.1:8765")];
        assert_eq!(refusal(&headers(&with_origin), token, &allowed), None);

        let code = |pairs: &[(&'static str, &str)]| {
            refusal(&headers(pairs), token, &allowed).map(|r| r.0.as_u16())
        };
        assert_eq!(
            code(&[("host", "evil.example:8765"), good[1]]),
            Some(403),
            "DNS rebinding"
        );
        assert_eq!(
            code(&[good[0], good[1], ("origin", "http://evil.example")]),
            Some(403)
        );
        assert_eq!(code(&[good[0], good[1], ("origin", "null")]), Some(403));
        assert_eq!(code(&[good[0]]), Some(401));
        assert_eq!(
            code(&[good[0], ("authorization", "Bearer wrong")]),
            Some(401)
        );
        assert_eq!(
            code(&[good[0], ("authorization", "t0ken-t0ken-t0ken")]),
            Some(401)
        );
    }
}

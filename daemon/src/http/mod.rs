//! The daemon's HTTP side (`koru daemon --http ADDR`): one port — loopback, or HTTPS anywhere — serving MCP at `/mcp` (the MCP face's service, mounted here by the main loop), the JSON API at `/api/v1` with live events, and the embedded web dashboard; every request passes the guard in `auth.rs` first.
//!
//! Rooms: `auth.rs` (Host/Origin, bearer tokens, login codes, session cookies), `roles.rs` (the role each route needs), `api.rs` (the
//! endpoints; each opens a controller connection to the daemon's socket), `events.rs` (the
//! events hub: one subscription to the daemon, a ring buffer, SSE and WebSocket), `assets.rs`
//! (the dashboard's files, `/`, `/login`), `body.rs` (bodies read within the size limit), `errors.rs` (the error shape), `recovery.rs` (the
//! recovery actions' table), `openapi.rs` (docs/openapi.json), `token.rs` (the default token's file), `tls.rs` (the
//! certificate and key for HTTPS).

pub mod api;
pub mod assets;
pub mod auth;
pub mod body;
pub mod errors;
pub mod events;
pub mod openapi;
pub mod recovery;
pub mod roles;
pub mod tls;
pub mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use tokio_util::sync::CancellationToken;

pub use auth::allowed_authorities;
use auth::Auth;
use errors::ApiError;
use events::EventsHub;

use crate::registry::LayerPaths;

/// Largest request body accepted (a prompt is at most 256 KiB; JSON escaping can double it).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What the HTTP server needs from the daemon.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The default bearer token (role drive).
    pub token: String,
    /// The scoped tokens' file (`access::tokens`), read again whenever it changes.
    pub tokens: PathBuf,
    /// The daemon's socket, which every request talks to.
    pub socket: PathBuf,
    /// The registry layers (doctor, interfaces, MCP).
    pub layers: LayerPaths,
    /// How many events the hub keeps for resumption.
    pub event_buffer: usize,
    /// What answers at `/mcp` (MCP over HTTP, mounted by the main loop; the HTTP face does
    /// not import the MCP face). Behind the same guard as the rest: bearer token only.
    pub mcp: Router,
    /// Serve HTTPS with this configuration (`tls.rs`); plain HTTP when `None`.
    pub tls: Option<tls::TlsSetup>,
    /// Where `forbidden_role` refusals go to be journaled.
    pub refusals: Option<crate::access::RefusalSink>,
}

impl HttpConfig {
    /// `https` when TLS is on, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// The host names (no port) requests to a server bound at `addr` may name, for servers
/// mounted beside the API that check Host themselves (MCP over HTTP); `names` are the TLS
/// certificate's DNS names, if any.
pub fn allowed_hosts(addr: SocketAddr, names: &[String]) -> Vec<String> {
    allowed_authorities(addr, names)
        .iter()
        .map(|a| {
            a.rsplit_once(':')
                .map(|(h, _)| h.trim_matches(['[', ']']).to_string())
                .unwrap_or_default()
        })
        .collect()
}

/// Shared by every request of one server.
#[derive(Clone)]
pub struct AppState {
    pub socket: PathBuf,
    pub layers: LayerPaths,
    pub hub: EventsHub,
    pub auth: Arc<Auth>,
    pub shutdown: CancellationToken,
    /// `http` or `https`, for the links the server hands out.
    pub scheme: &'static str,
}

/// The whole router: `/api/v1`, `/mcp`, the dashboard, behind the guard.
pub fn router(
    addr: SocketAddr,
    config: &HttpConfig,
    hub: EventsHub,
    shutdown: CancellationToken,
) -> Router {
    let names = config
        .tls
        .as_ref()
        .map(|tls| tls.names.as_slice())
        .unwrap_or_default();
    let allowed = allowed_authorities(addr, names);
    let mut auth = Auth::new(
        config.token.clone(),
        config.tokens.clone(),
        allowed,
        config.scheme(),
    );
    auth.refusals = config.refusals.clone();
    let auth = Arc::new(auth);
    let state = AppState {
        socket: config.socket.clone(),
        layers: config.layers.clone(),
        hub,
        auth: auth.clone(),
        shutdown,
        scheme: config.scheme(),
    };
    let mut described = aide::openapi::OpenApi::default();
    api::routes()
        .finish_api(&mut described)
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route("/login", get(assets::login))
        .nest_service("/mcp", config.mcp.clone())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(auth, auth::guard))
        .with_state(state)
}

async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with("/api/") {
        return ApiError::not_found(format!("no endpoint {} (see docs/http-api.md)", uri.path()))
            .into_response();
    }
    assets::not_found().await
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not answer {method}", uri.path()),
    )
    .into_response()
}

/// Serves HTTP (HTTPS when the config has TLS) on `listener` until `shutdown`, with the
/// events hub feeding from the daemon.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let scheme = config.scheme();
    let hub = EventsHub::new(config.event_buffer);
    let hub_task = tokio::spawn(hub.clone().run(config.socket.clone(), shutdown.clone()));
    let app = router(addr, &config, hub, shutdown.clone());
    tracing::info!(
        mcp = %format!("{scheme}://{addr}/mcp"),
        api = %format!("{scheme}://{addr}/api/v1"),
        "serving {} (MCP, API, dashboard)",
        scheme.to_uppercase()
    );
    let served = match config.tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await
        }
        Some(tls) => {
            let handle = axum_server::Handle::new();
            let stop = handle.clone();
            let stopper = tokio::spawn(async move {
                shutdown.cancelled().await;
                stop.graceful_shutdown(Some(std::time::Duration::from_secs(2)));
            });
            let served = axum_server::tls_rustls::from_tcp_rustls(
                listener.into_std()?,
                axum_server::tls_rustls::RustlsConfig::from_config(tls.config),
            )?
            .handle(handle)
            .serve(app.into_make_service())
            .await;
            stopper.abort();
            served
        }
    };
    let _ = hub_task.await;
    served
}

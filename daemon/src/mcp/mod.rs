//! Koru as an MCP server for controller LLMs: the tools (`server`), what they do through the daemon (`backend`), and their compact text (`format`). Served over stdio by `koru mcp` and over streamable HTTP by `koru daemon --http`.

pub mod backend;
pub mod format;
pub mod server;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::access::Role;
use crate::control::hosts::{HostChoice, HostsFile, LOCAL};
use crate::registry::LayerPaths;

/// `koru mcp`: an MCP server on stdin/stdout that acts through this machine's daemon, or
/// through the hosts `--host` names (`all_hosts`: this machine and every named host), each
/// over one kept connection.
/// `role` bounds the tools offered: observe lists and runs only the read tools.
pub async fn serve_stdio(
    choice: HostChoice,
    all_hosts: bool,
    role: Role,
    layers: LayerPaths,
) -> anyhow::Result<ExitCode> {
    use rmcp::ServiceExt;
    if role == Role::Observe {
        // Before any connection: the daemons, not only this process, refuse what observe
        // may not do, and journal it.
        crate::control::narrow_scope(koru_protocol::AccessScope::Observe);
    }
    let backend = if all_hosts {
        if !choice.requested.is_empty() {
            anyhow::bail!("give either --all-hosts or --host, not both");
        }
        let named = HostsFile::load(&choice.hosts_file)?;
        let mut requested = vec![LOCAL.to_string()];
        requested.extend(named.hosts.into_keys());
        let hosts = HostChoice {
            requested,
            ..choice.clone()
        }
        .resolve()?;
        backend::Backend::for_hosts(choice.socket.clone(), hosts)
    } else if choice.requested.is_empty() {
        backend::Backend::new(choice.socket.clone())
    } else {
        backend::Backend::for_hosts(choice.socket.clone(), choice.resolve()?)
    };
    let service = server::KoruMcp::new(backend, layers, role)
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .context("the MCP client did not complete the handshake")?;
    service.waiting().await.context("the MCP session failed")?;
    Ok(ExitCode::SUCCESS)
}

/// MCP over streamable HTTP, one MCP session per client, acting through the daemon at
/// `socket`: requests must name one of `allowed_hosts` and carry at most `max_body_bytes`;
/// sessions end with `shutdown`. Each request holds the role its bearer token was granted
/// (`access::Grant`, put there by the HTTP guard); refusals go to `refusals`, to be
/// journaled.
pub fn http_service(
    socket: PathBuf,
    layers: LayerPaths,
    allowed_hosts: Vec<String>,
    max_body_bytes: usize,
    refusals: Option<crate::access::RefusalSink>,
    shutdown: CancellationToken,
) -> StreamableHttpService<server::KoruMcp, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown)
        .with_allowed_hosts(allowed_hosts)
        .with_max_request_body_bytes(max_body_bytes);
    let backend = backend::Backend::new(socket);
    StreamableHttpService::new(
        move || {
            Ok(
                server::KoruMcp::new(backend.clone(), layers.clone(), Role::Drive)
                    .with_refusals(refusals.clone()),
            )
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

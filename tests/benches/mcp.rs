//! Benchmark: `send_prompt` → acked (the drive `done`) through MCP over HTTP, MCP over stdio (`koru mcp`) and the socket protocol directly (what the CLI speaks), in one run against one release daemon and one fake plugin (`cargo bench -p koru-system-tests --bench mcp`).
//!
//! Prints a Markdown table. Run without `--bench` (as `cargo test --benches` does) it makes a
//! quick smoke run with a few drives instead.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use koru_daemon::control::{controller_hello, Client};
use koru_protocol::{DriveCreate, DriveOptions, DriveState, Message, StreamEvent, Target};
use koru_system_tests::Sandbox;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{object, ServiceExt};

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn row(name: &str, mut samples: Vec<Duration>) -> String {
    samples.sort();
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    format!(
        "| {name} | {} | {} | {} | {} |",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
        ms(*samples.last().unwrap())
    )
}

/// One drive over the socket protocol: drive.create, then its terminal `drive_updated`.
async fn socket_drive(client: &mut Client, workspace: &str) -> Result<()> {
    let reply = client
        .request(Message::DriveCreate(DriveCreate {
            target: Target::Workspace(workspace.to_string()),
            prompt: "bench".into(),
            options: DriveOptions::default(),
        }))
        .await?;
    let Message::DriveResult(created) = reply else {
        bail!("unexpected reply")
    };
    loop {
        let Some(envelope) = client.next().await? else {
            bail!("daemon closed")
        };
        if let Message::Stream(item) = envelope.message {
            if let StreamEvent::DriveUpdated { drive } = item.event {
                if drive.drive_id == created.drive.drive_id && drive.state.is_terminal() {
                    if drive.state != DriveState::Done {
                        bail!("drive ended {}", drive.state.as_str());
                    }
                    return Ok(());
                }
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let (drives, warm_up) = if measuring { (300, 30) } else { (5, 1) };

    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    let workspace = sandbox.workspace("bench");
    let workspace = workspace.to_str().context("utf-8 path")?.to_string();
    let _plugin = sandbox.start_fake_plugin(&["--workspace", &workspace]);
    let status: serde_json::Value =
        serde_json::from_slice(&sandbox.run(&["status", "--json"]).stdout)?;
    let url = status["http"]["mcp_url"]
        .as_str()
        .context("http url")?
        .to_string();
    let token = status["http"]["token"]
        .as_str()
        .context("token")?
        .to_string();

    let http = ()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
        ))
        .await?;
    let mut command = tokio::process::Command::from(sandbox.koru());
    command.arg("mcp").env("RUST_LOG", "warn");
    let stdio = ().serve(TokioChildProcess::new(command)?).await?;
    let mut socket = Client::connect(&sandbox.socket(), controller_hello("bench")).await?;
    socket.request(Message::EventsSubscribe {}).await?;

    let call = || {
        CallToolRequestParams::new("send_prompt").with_arguments(object!({
            "target": workspace.clone(), "prompt": "bench", "wait": "submitted", "timeout_s": 10
        }))
    };
    let (mut over_http, mut over_stdio, mut over_socket) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so that all three see the same machine state.
    for i in 0..warm_up + drives {
        let start = Instant::now();
        let result = http.call_tool(call()).await?;
        let http_time = start.elapsed();
        if result.is_error == Some(true) {
            bail!("send_prompt over HTTP failed: {:?}", result.content);
        }
        let start = Instant::now();
        let result = stdio.call_tool(call()).await?;
        let stdio_time = start.elapsed();
        if result.is_error == Some(true) {
            bail!("send_prompt over stdio failed: {:?}", result.content);
        }
        let start = Instant::now();
        socket_drive(&mut socket, &workspace).await?;
        let socket_time = start.elapsed();
        if i >= warm_up {
            over_http.push(http_time);
            over_stdio.push(stdio_time);
            over_socket.push(socket_time);
        }
    }
    println!("| path | drives | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    println!(
        "{}",
        row(
            "MCP streamable HTTP (`send_prompt`, wait submitted)",
            over_http
        )
    );
    println!("{}", row("MCP stdio (`koru mcp`, same call)", over_stdio));
    println!(
        "{}",
        row(
            "socket protocol (drive.create → done, as the CLI)",
            over_socket
        )
    );
    http.cancel().await?;
    stdio.cancel().await?;
    socket.close().await;
    Ok(())
}

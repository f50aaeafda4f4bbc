//! What the whole-system benchmarks share (`mod support;` in each): a controller connection to the daemon, subscribed to its events.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use koru_daemon::control::{controller_hello, Client};
use koru_protocol::Message;

/// A controller connected to the daemon at `socket` (as `koru-bench`) that has said
/// `events.subscribe`.
pub async fn subscribed_controller(socket: &Path) -> Result<Client> {
    let mut controller = Client::connect(socket, controller_hello("koru-bench"))
        .await
        .context("the controller cannot connect")?;
    let subscribed = controller.request(Message::EventsSubscribe {}).await?;
    ensure!(
        matches!(subscribed, Message::EventsSubscribed {}),
        "events.subscribe answered with {}",
        subscribed.type_name()
    );
    Ok(controller)
}

//! Desktop notifications when a drive needs the person (a face: a door through which a person acts): the state machine's drive news become notifications on the session bus (`plan.rs` decides which and what they say), and their buttons run the recovery actions through the daemon's own socket as the client `koru-notification`, so the log, the journal and `recovery_performed` say who asked (door `notification`).
//!
//! The service is not asked beforehand whether it exists: the first notification is
//! attempted, and a `ServiceUnknown` answer turns notifications off until a service takes
//! the name (its `NameOwnerChanged`).

pub mod plan;

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use koru_protocol::{HttpStatus, RecoveryAction};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::drive_news::WatchNews;
use crate::control::Controller;
use crate::desktop::notifications::{self, Signal};
use crate::desktop::{BusError, Buses};
use plan::{Button, Outgoing, Planner};

/// The client name a button's recovery action is asked with (the journal's door
/// `notification`).
pub const CLIENT_NAME: &str = "koru-notification";

/// What the notifier needs.
#[derive(Debug, Clone)]
pub struct NotifierConfig {
    /// The daemon's socket, for the buttons' recovery actions.
    pub socket: PathBuf,
    /// Where the daemon serves HTTP, for the Open dashboard button (`None`: no button).
    pub http: Option<HttpStatus>,
    /// The session bus (shared with the rest of the daemon).
    pub buses: Arc<Buses>,
}

/// Whether there is a notification service.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Service {
    /// Not known yet: the next notification is attempted.
    Unknown,
    /// It answered; only signals from `server` count.
    Answered { server: Option<String> },
    /// Nobody provides it: nothing is sent until the name gets an owner.
    Missing,
}

type Signals = Pin<Box<dyn Stream<Item = Signal> + Send>>;

/// Runs until `shutdown` (or until the state machine drops its end of `news`).
pub async fn run(
    config: NotifierConfig,
    mut news: mpsc::Receiver<WatchNews>,
    shutdown: CancellationToken,
) {
    let started = Instant::now();
    let now_ms = || started.elapsed().as_millis() as u64;
    let mut planner = Planner::new(Default::default(), config.http.is_some(), now_ms());
    let mut service = Service::Unknown;
    let mut signals: Option<Signals> = subscribe(&config.buses).await;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let outgoing = tokio::select! {
            _ = shutdown.cancelled() => break,
            item = news.recv() => match item {
                None => break,
                Some(WatchNews::Policy(policy)) => {
                    planner.set_policy(policy);
                    None
                }
                Some(WatchNews::Drive(drive)) if service != Service::Missing => {
                    planner.on_news(&drive, now_ms()).map(|out| (out, Some(drive.seen)))
                }
                Some(WatchNews::Drive(_)) => None,
            },
            Some(signal) = next_signal(&mut signals) => {
                on_signal(signal, &config, &mut planner, &mut service);
                None
            }
            _ = tick.tick() => {
                if service == Service::Missing {
                    None
                } else {
                    planner.on_tick(now_ms()).map(|out| (out, None))
                }
            }
        };
        if let Some((outgoing, seen)) = outgoing {
            send(
                &config,
                &mut planner,
                &mut service,
                &mut signals,
                outgoing,
                seen,
            )
            .await;
        }
    }
}

/// Waits for the next signal, or forever when there is no subscription.
async fn next_signal(signals: &mut Option<Signals>) -> Option<Signal> {
    match signals {
        Some(stream) => match stream.next().await {
            Some(signal) => Some(signal),
            None => {
                *signals = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

async fn subscribe(buses: &Buses) -> Option<Signals> {
    match notifications::signals(buses).await {
        Ok(stream) => Some(Box::pin(stream)),
        Err(error) => {
            tracing::debug!(%error, "not listening to the notification service");
            None
        }
    }
}

/// Sends one notification and remembers it, or learns that there is no service.
async fn send(
    config: &NotifierConfig,
    planner: &mut Planner,
    service: &mut Service,
    signals: &mut Option<Signals>,
    outgoing: Outgoing,
    seen: Option<Instant>,
) {
    match notifications::notify(&config.buses, &outgoing.notification).await {
        Ok(shown) => {
            if let Some(seen) = seen {
                tracing::debug!(
                    drive_id = outgoing.drive_id.as_deref().unwrap_or(""),
                    id = shown.id,
                    latency_us = seen.elapsed().as_micros() as u64,
                    "desktop notification shown"
                );
            }
            planner.shown(&outgoing, shown.id);
            if *service == Service::Unknown {
                tracing::info!(
                    server = shown.server.as_deref().unwrap_or("?"),
                    "desktop notifications go to the session's notification service"
                );
                // What the service can show, once: buttons or none.
                match notifications::capabilities(&config.buses).await {
                    Ok(capabilities) => {
                        planner.set_service_has_actions(capabilities.iter().any(|c| c == "actions"))
                    }
                    Err(error) => {
                        tracing::debug!(%error, "the notification service did not say what it can show")
                    }
                }
                if signals.is_none() {
                    *signals = subscribe(&config.buses).await;
                }
            }
            *service = Service::Answered {
                server: shown.server,
            };
        }
        Err(error) if error.is_no_service() => {
            tracing::warn!(%error, "no desktop notification service on the session bus; notifications are off until one starts");
            *service = Service::Missing;
        }
        Err(BusError::NotConfigured { .. }) => {
            tracing::info!("no session bus; desktop notifications are off");
            *service = Service::Missing;
        }
        Err(error) => {
            tracing::warn!(%error, drive_id = outgoing.drive_id.as_deref().unwrap_or(""), "a desktop notification could not be shown");
        }
    }
}

fn on_signal(
    signal: Signal,
    config: &NotifierConfig,
    planner: &mut Planner,
    service: &mut Service,
) {
    let server = match &*service {
        Service::Answered { server } => server.clone(),
        // Before a notification was shown there is nothing to press.
        _ => None,
    };
    let from_service =
        |sender: &Option<String>| server.is_some() && sender.as_deref() == server.as_deref();
    match signal {
        Signal::OwnerChanged { new_owner } if new_owner.is_empty() => {
            tracing::info!("the desktop notification service went away");
            *service = Service::Missing;
        }
        Signal::OwnerChanged { new_owner } => {
            tracing::info!(owner = %new_owner, "a desktop notification service started; notifications are on");
            *service = Service::Unknown;
        }
        Signal::Closed { id, sender, .. } if from_service(&sender) => planner.closed(id),
        Signal::ActionInvoked { id, action, sender } if from_service(&sender) => {
            let Some((drive_id, button)) = planner.action(id, &action) else {
                tracing::debug!(id, action, "a notification button that is not ours");
                return;
            };
            tracing::info!(
                button = button.key(),
                drive_id = drive_id.as_deref().unwrap_or(""),
                "notification button pressed"
            );
            tokio::spawn(press(button, drive_id, config.clone()));
        }
        Signal::Closed { .. } | Signal::ActionInvoked { .. } => {
            tracing::debug!("a notification signal from someone other than the service; ignored");
        }
    }
}

/// Does what a button says: a recovery action through the daemon's socket (asked as
/// `koru-notification`), or the dashboard in the browser.
async fn press(button: Button, drive_id: Option<String>, config: NotifierConfig) {
    let action = match (button, drive_id) {
        (Button::Retry, Some(drive_id)) => RecoveryAction::RetryDrive {
            drive_id,
            route: None,
        },
        (Button::Cancel, Some(drive_id)) => RecoveryAction::CancelDrive { drive_id },
        (Button::Dashboard, _) => return open_dashboard(config.http).await,
        (_, None) => return,
    };
    let name = action.name();
    let controller = Controller::new(config.socket, CLIENT_NAME);
    match controller
        .once(move |client| Box::pin(client.run_recovery(action)))
        .await
    {
        Ok(result) if result.ok => {
            tracing::info!(action = name, by = "notification", summary = %result.summary, "recovery action from a notification done")
        }
        Ok(result) => {
            tracing::warn!(action = name, by = "notification", summary = %result.summary, "recovery action from a notification could not be done")
        }
        Err(error) => {
            tracing::warn!(action = name, by = "notification", %error, "recovery action from a notification refused")
        }
    }
}

/// Opens a one-time dashboard login link in the browser (`xdg-open`), without waiting.
async fn open_dashboard(http: Option<HttpStatus>) {
    let Some(http) = http else {
        return;
    };
    let Some(authority) = http
        .mcp_url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .filter(|a| !a.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let code = tokio::time::timeout(
        Duration::from_secs(5),
        crate::control::dashboard_login::mint_login_code(&authority, &http.token),
    )
    .await;
    let url = match code {
        Ok(Ok(code)) => code.url,
        Ok(Err(error)) => {
            return tracing::warn!(%error, "cannot open the dashboard from a notification")
        }
        Err(_) => return tracing::warn!("the dashboard did not answer within 5 s"),
    };
    use std::os::unix::process::CommandExt;
    let started = std::process::Command::new("xdg-open")
        .arg(&url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match started {
        Ok(mut child) => {
            tracing::info!(by = "notification", "opened the dashboard in the browser");
            // Reaped off the runtime's threads, so it leaves no zombie.
            tokio::task::spawn_blocking(move || child.wait());
        }
        Err(error) => tracing::warn!(%error, "cannot start xdg-open to open the dashboard"),
    }
}

//! The desktop notification service (`org.freedesktop.Notifications` on the session bus, the Desktop Notifications Specification): show or replace a notification with buttons, close one, hear which button was pressed, and ask — without showing anything — whether a service is there.

use std::collections::HashMap;

use futures::{Stream, StreamExt};
use zbus::zvariant::Value;
use zbus::{MatchRule, MessageStream};

use super::bus::{Bus, BusError, Buses, Call, Provider};

/// The service's well-known name.
pub const NAME: &str = "org.freedesktop.Notifications";
/// Its object path (also its interface name, dotted).
pub const PATH: &str = "/org/freedesktop/Notifications";

fn call(method: &str) -> Call<'_> {
    Call {
        bus: Bus::Session,
        destination: NAME,
        path: PATH,
        interface: NAME,
        method,
    }
}

/// How urgent a notification is (the spec's `urgency` hint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    Low = 0,
    Normal = 1,
    Critical = 2,
}

/// One notification to show, or to put in place of an earlier one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The id of the notification this one replaces (0: a new one).
    pub replaces_id: u32,
    pub summary: String,
    pub body: String,
    /// `(key, label)`: the buttons; the key comes back in `ActionInvoked`.
    pub actions: Vec<(String, String)>,
    pub urgency: Urgency,
}

/// A notification the service took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub id: u32,
    /// The unique bus name of the service that answered: only its signals count.
    pub server: Option<String>,
}

/// The application name every notification carries.
pub const APP_NAME: &str = "koru";

/// `Notify`: shows `notification` (or replaces `replaces_id`), returning its id.
pub async fn notify(buses: &Buses, notification: &Notification) -> Result<Shown, BusError> {
    let actions: Vec<&str> = notification
        .actions
        .iter()
        .flat_map(|(key, label)| [key.as_str(), label.as_str()])
        .collect();
    let mut hints: HashMap<&str, Value<'_>> = HashMap::new();
    hints.insert("urgency", Value::U8(notification.urgency as u8));
    let (id, server) = buses
        .call_from::<_, u32>(
            call("Notify"),
            &(
                APP_NAME,
                notification.replaces_id,
                "",
                notification.summary.as_str(),
                notification.body.as_str(),
                actions,
                hints,
                -1i32,
            ),
        )
        .await?;
    Ok(Shown { id, server })
}

/// `CloseNotification`.
pub async fn close(buses: &Buses, id: u32) -> Result<(), BusError> {
    buses.call::<_, ()>(call("CloseNotification"), &(id,)).await
}

/// What the service (or the bus, about the service) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A button (or the notification itself, key `default`) was pressed.
    ActionInvoked {
        id: u32,
        action: String,
        sender: Option<String>,
    },
    /// The notification went away (1 expired, 2 dismissed, 3 closed by a call, 4 other).
    Closed {
        id: u32,
        reason: u32,
        sender: Option<String>,
    },
    /// The service's name changed hands: `new_owner` is empty when it went away.
    OwnerChanged { new_owner: String },
}

/// The service's signals and changes of its owner, from now on.
pub async fn signals(buses: &Buses) -> Result<impl Stream<Item = Signal> + Send, BusError> {
    let connection = buses.connection(Bus::Session).await?;
    let failed = |detail: zbus::Error| BusError::Failed {
        what: "listening to the notification service".into(),
        detail: detail.to_string(),
    };
    let service_rule = MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(NAME)
        .and_then(|rule| rule.path(PATH))
        .map_err(failed)?
        .build();
    let owner_rule = MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender("org.freedesktop.DBus")
        .and_then(|rule| rule.interface("org.freedesktop.DBus"))
        .and_then(|rule| rule.member("NameOwnerChanged"))
        .and_then(|rule| rule.add_arg(NAME))
        .map_err(failed)?
        .build();
    let service = MessageStream::for_match_rule(service_rule, &connection, Some(64))
        .await
        .map_err(failed)?;
    let owner = MessageStream::for_match_rule(owner_rule, &connection, Some(8))
        .await
        .map_err(failed)?;
    Ok(
        futures::stream::select(service, owner).filter_map(|message| async move {
            let message = message.ok()?;
            let header = message.header();
            let sender = header.sender().map(|name| name.to_string());
            match header.member()?.as_str() {
                "ActionInvoked" => {
                    let (id, action): (u32, String) = message.body().deserialize().ok()?;
                    Some(Signal::ActionInvoked { id, action, sender })
                }
                "NotificationClosed" => {
                    let (id, reason): (u32, u32) = message.body().deserialize().ok()?;
                    Some(Signal::Closed { id, reason, sender })
                }
                "NameOwnerChanged" => {
                    let (_, _, new_owner): (String, String, String) =
                        message.body().deserialize().ok()?;
                    Some(Signal::OwnerChanged { new_owner })
                }
                _ => None,
            }
        }),
    )
}

/// What doctor and the notifier learn about the service without showing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub provider: Provider,
    /// `GetServerInformation`: name, vendor, version, spec version (when it runs).
    pub server: Option<(String, String, String, String)>,
    /// `GetCapabilities` (when it runs): `actions` means it shows buttons.
    pub capabilities: Vec<String>,
}

impl Probe {
    /// One line for doctor.
    pub fn describe(&self) -> String {
        let mut line = match (&self.server, self.provider) {
            (Some((name, vendor, version, spec)), _) => {
                format!("{name} {version} by {vendor} (notification spec {spec})")
            }
            (None, Provider::Running) => format!("{NAME} is running"),
            (None, Provider::Activatable) => {
                format!("{NAME} starts on the first notification (D-Bus activation)")
            }
        };
        if self.server.is_some() {
            line.push_str(if self.capabilities.iter().any(|c| c == "actions") {
                "; shows buttons"
            } else {
                "; shows no buttons (Retry, Cancel and Open dashboard are left out)"
            });
        }
        line
    }
}

/// Whether a notification service is there (`Ok(None)`: nobody owns the name and nothing
/// can start it), and what it is when it runs. Never starts one, never shows anything.
pub async fn probe(buses: &Buses) -> Result<Option<Probe>, BusError> {
    let Some(provider) = buses.name_provider(Bus::Session, NAME).await? else {
        return Ok(None);
    };
    let mut probe = Probe {
        provider,
        server: None,
        capabilities: Vec::new(),
    };
    if provider == Provider::Running {
        probe.server = buses.call(call("GetServerInformation"), &()).await.ok();
        probe.capabilities = buses
            .call(call("GetCapabilities"), &())
            .await
            .unwrap_or_default();
    }
    Ok(Some(probe))
}

/// `GetCapabilities` of the running service (starting it if it is activatable).
pub async fn capabilities(buses: &Buses) -> Result<Vec<String>, BusError> {
    buses.call(call("GetCapabilities"), &()).await
}

//! The desktop's two D-Bus buses as the daemon uses them: the session bus (screen savers, notifications, portals) and the system bus (logind), each connected once on first use and again after a failure, every call bounded in time. Async, on the daemon's runtime.

use std::time::Duration;

use zbus::zvariant::{DynamicType, OwnedValue, Type};
use zbus::Connection;

/// Which bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bus {
    /// The user's session bus: `DBUS_SESSION_BUS_ADDRESS`.
    Session,
    /// The machine's system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `/run/dbus/system_bus_socket` (tests point the variable at a private bus).
    System,
}

impl Bus {
    pub fn name(self) -> &'static str {
        match self {
            Bus::Session => "session",
            Bus::System => "system",
        }
    }
}

/// What went wrong talking to a desktop service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// No address for the bus (`DBUS_SESSION_BUS_ADDRESS` unset).
    #[error("the {bus} bus is not configured ({why})")]
    NotConfigured { bus: &'static str, why: String },
    #[error("cannot connect to the {bus} bus: {detail}")]
    Connect { bus: &'static str, detail: String },
    #[error("{what} did not answer within {} ms", after.as_millis())]
    Timeout { what: String, after: Duration },
    /// The service answered with a D-Bus error (`name` such as
    /// `org.freedesktop.DBus.Error.ServiceUnknown`).
    #[error("{what}: {name}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Refused {
        what: String,
        name: String,
        detail: Option<String>,
    },
    /// The call went wrong on our side or on the wire (a reply of the wrong type, a
    /// connection that broke).
    #[error("{what}: {detail}")]
    Failed { what: String, detail: String },
}

impl BusError {
    /// True when nobody provides the service: no owner for the name and nothing to
    /// start it (`ServiceUnknown`, `NameHasNoOwner`).
    pub fn is_no_service(&self) -> bool {
        matches!(self, BusError::Refused { name, .. }
            if name.ends_with(".ServiceUnknown") || name.ends_with(".NameHasNoOwner"))
    }

    /// Why, without naming the call (for lists that name it already): `ServiceUnknown
    /// (detail)`, `no answer within 500 ms`, `cannot connect to the system bus: …`.
    pub fn short(&self) -> String {
        match self {
            BusError::Refused { name, detail, .. } => {
                let name = name.rsplit('.').next().unwrap_or(name);
                match detail {
                    Some(detail) => format!("{name} ({detail})"),
                    None => name.to_string(),
                }
            }
            BusError::Timeout { after, .. } => {
                format!("no answer within {} ms", after.as_millis())
            }
            BusError::Failed { detail, .. } => detail.clone(),
            other => other.to_string(),
        }
    }

    /// The D-Bus error name when the service answered with an error.
    pub fn error_name(&self) -> Option<&str> {
        match self {
            BusError::Refused { name, .. } => Some(name),
            _ => None,
        }
    }

    /// Turns a zbus error from the call `what` into ours.
    pub fn from_zbus(what: &str, error: zbus::Error) -> BusError {
        match error {
            zbus::Error::MethodError(name, detail, _) => BusError::Refused {
                what: what.to_string(),
                name: name.to_string(),
                detail,
            },
            zbus::Error::FDO(fdo) => {
                use zbus::DBusError as _;
                BusError::Refused {
                    what: what.to_string(),
                    name: fdo.name().to_string(),
                    detail: fdo.description().map(str::to_string),
                }
            }
            other => BusError::Failed {
                what: what.to_string(),
                detail: other.to_string(),
            },
        }
    }
}

/// One D-Bus method call: who, where, what.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub bus: Bus,
    pub destination: &'a str,
    pub path: &'a str,
    pub interface: &'a str,
    pub method: &'a str,
}

impl Call<'_> {
    /// `destination interface.method` for messages.
    pub fn describe(&self) -> String {
        format!("{} {}.{}", self.destination, self.interface, self.method)
    }
}

/// The session and system bus connections, made on first use and kept; a connection that
/// failed is dropped and made again by the next call.
#[derive(Debug)]
pub struct Buses {
    session: tokio::sync::Mutex<Option<Connection>>,
    system: tokio::sync::Mutex<Option<Connection>>,
    /// How long connecting, or one call, may take.
    pub timeout: Duration,
}

impl Buses {
    pub fn new(timeout: Duration) -> Buses {
        Buses {
            session: tokio::sync::Mutex::new(None),
            system: tokio::sync::Mutex::new(None),
            timeout,
        }
    }

    fn slot(&self, bus: Bus) -> &tokio::sync::Mutex<Option<Connection>> {
        match bus {
            Bus::Session => &self.session,
            Bus::System => &self.system,
        }
    }

    /// The connection to `bus`, connecting now if there is none.
    pub async fn connection(&self, bus: Bus) -> Result<Connection, BusError> {
        let mut slot = self.slot(bus).lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        if bus == Bus::Session && std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() {
            return Err(BusError::NotConfigured {
                bus: bus.name(),
                why: "DBUS_SESSION_BUS_ADDRESS is not set".into(),
            });
        }
        let connect = async {
            match bus {
                Bus::Session => Connection::session().await,
                Bus::System => Connection::system().await,
            }
        };
        let connection = match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(error)) => {
                return Err(BusError::Connect {
                    bus: bus.name(),
                    detail: error.to_string(),
                })
            }
            Err(_) => {
                return Err(BusError::Timeout {
                    what: format!("connecting to the {} bus", bus.name()),
                    after: self.timeout,
                })
            }
        };
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Drops the connection to `bus` (the next call connects again).
    pub async fn forget(&self, bus: Bus) {
        *self.slot(bus).lock().await = None;
    }

    /// Calls a method and reads its reply as `R`, within the timeout.
    pub async fn call<B, R>(&self, call: Call<'_>, body: &B) -> Result<R, BusError>
    where
        B: serde::Serialize + DynamicType,
        R: for<'de> serde::Deserialize<'de> + Type,
    {
        Ok(self.call_from(call, body).await?.0)
    }

    /// [`Buses::call`], also saying who answered (the unique bus name of the reply's sender).
    pub async fn call_from<B, R>(
        &self,
        call: Call<'_>,
        body: &B,
    ) -> Result<(R, Option<String>), BusError>
    where
        B: serde::Serialize + DynamicType,
        R: for<'de> serde::Deserialize<'de> + Type,
    {
        let connection = self.connection(call.bus).await?;
        let answer = call_on(&connection, call, body, self.timeout).await;
        if let Err(BusError::Failed { .. }) = answer {
            // The wire may be gone (the bus restarted): connect afresh next time.
            self.forget(call.bus).await;
        }
        answer
    }

    /// Reads one property (`org.freedesktop.DBus.Properties.Get`) as `R`.
    pub async fn property<R>(
        &self,
        bus: Bus,
        destination: &str,
        path: &str,
        interface: &str,
        property: &str,
    ) -> Result<R, BusError>
    where
        R: TryFrom<OwnedValue>,
        R::Error: std::fmt::Display,
    {
        let value: OwnedValue = self
            .call(
                Call {
                    bus,
                    destination,
                    path,
                    interface: "org.freedesktop.DBus.Properties",
                    method: "Get",
                },
                &(interface, property),
            )
            .await?;
        R::try_from(value).map_err(|error| BusError::Failed {
            what: format!("{destination} {interface}.{property}"),
            detail: format!("unexpected value: {error}"),
        })
    }

    /// Whether a name is owned now or can be started on `bus` (read-only: nothing is
    /// started). `Ok(None)`: neither.
    pub async fn name_provider(&self, bus: Bus, name: &str) -> Result<Option<Provider>, BusError> {
        let bus_daemon = |method| Call {
            bus,
            destination: "org.freedesktop.DBus",
            path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus",
            method,
        };
        let owned: bool = self.call(bus_daemon("NameHasOwner"), &(name,)).await?;
        if owned {
            return Ok(Some(Provider::Running));
        }
        let activatable: Vec<String> = self.call(bus_daemon("ListActivatableNames"), &()).await?;
        Ok(activatable
            .iter()
            .any(|n| n == name)
            .then_some(Provider::Activatable))
    }
}

/// Calls a method on `connection` (whose bus `call.bus` only names) and reads its reply as
/// `R`, within `timeout`, saying who answered.
pub async fn call_on<B, R>(
    connection: &Connection,
    call: Call<'_>,
    body: &B,
    timeout: Duration,
) -> Result<(R, Option<String>), BusError>
where
    B: serde::Serialize + DynamicType,
    R: for<'de> serde::Deserialize<'de> + Type,
{
    let what = call.describe();
    let reply = connection.call_method(
        Some(call.destination),
        call.path,
        Some(call.interface),
        call.method,
        body,
    );
    let message = match tokio::time::timeout(timeout, reply).await {
        Ok(Ok(message)) => message,
        Ok(Err(error)) => return Err(BusError::from_zbus(&what, error)),
        Err(_) => {
            return Err(BusError::Timeout {
                what,
                after: timeout,
            })
        }
    };
    let sender = message.header().sender().map(|name| name.to_string());
    let value = message
        .body()
        .deserialize::<R>()
        .map_err(|error| BusError::Failed {
            what,
            detail: format!("unexpected reply: {error}"),
        })?;
    Ok((value, sender))
}

/// How a bus name is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Someone owns the name now.
    Running,
    /// Nobody owns it, but the bus starts its service on the first call.
    Activatable,
}

//! The XDG desktop portal's remote input (org.freedesktop.portal.RemoteDesktop and Clipboard on the session bus): one keyboard session for the daemon's life — CreateSession, SelectDevices (keyboard, persist until revoked), RequestClipboard, Start (the desktop's consent dialog) — then keysyms and the clipboard through it, and where the desktop's consent stands (none asked, asking, agreed and whether remembered, refused) for `status`. A `restore_token` Start returns is kept in the state directory (0600) so the next daemon's session starts without a dialog; a portal that returns none (GNOME 43) asks at each daemon start; a token the desktop no longer honours makes it ask again.
//!
//! Every portal call that needs the person is a `Request`: the answer comes as the
//! `Response` signal of an object whose path the caller can work out in advance from its
//! bus name and a `handle_token`, so the signal is subscribed to before the call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};
use zbus::{Connection, MatchRule, MessageStream};

use super::bus::{call_on, Bus, BusError, Buses, Call};

/// The portal's bus name and object.
pub const NAME: &str = "org.freedesktop.portal.Desktop";
pub const PATH: &str = "/org/freedesktop/portal/desktop";
pub const REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";
pub const CLIPBOARD: &str = "org.freedesktop.portal.Clipboard";
const REQUEST: &str = "org.freedesktop.portal.Request";
const SESSION: &str = "org.freedesktop.portal.Session";
/// `SelectDevices` `types`: the keyboard.
pub const KEYBOARD: u32 = 1;
/// `SelectDevices` `persist_mode`: until the person revokes it.
pub const PERSIST_UNTIL_REVOKED: u32 = 2;
/// The one clipboard format Koru reads and offers.
pub const TEXT: &str = "text/plain;charset=utf-8";
/// How long one portal call may take (the compositor answers key events; a loaded desktop
/// may be slow, and a key call that times out leaves the drive failed).
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// The most clipboard text read back (to restore it); more is not restored.
const MAX_CLIPBOARD_BYTES: u64 = 4 << 20;

/// What went wrong with the portal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PortalError {
    #[error("no XDG desktop portal on the session bus: {0}")]
    Missing(String),
    #[error("the desktop portal offers no remote input (no {REMOTE_DESKTOP}): {0}")]
    NoRemoteDesktop(String),
    #[error("the desktop did not let Koru send keys: {0}")]
    ConsentRefused(String),
    #[error("the desktop's consent dialog was not answered within {} s", .0.as_secs())]
    ConsentTimeout(Duration),
    #[error("the desktop granted no keyboard (devices {0:#x})")]
    NoKeyboard(u32),
    #[error("the portal session was closed by the desktop")]
    Closed,
    #[error(transparent)]
    Bus(#[from] BusError),
}

impl PortalError {
    /// The registry blocker code.
    pub fn blocker(&self) -> &'static str {
        match self {
            PortalError::Missing(_) => "portal_missing",
            PortalError::NoRemoteDesktop(_) => "portal_no_remote_desktop",
            PortalError::ConsentRefused(_)
            | PortalError::ConsentTimeout(_)
            | PortalError::NoKeyboard(_) => "consent_pending",
            PortalError::Bus(error) if error.is_no_service() => "portal_missing",
            PortalError::Bus(BusError::NotConfigured { .. } | BusError::Connect { .. }) => {
                "bus_unavailable"
            }
            PortalError::Bus(_) | PortalError::Closed => "injector_failed",
        }
    }
}

/// What the portal offers, asked without starting anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub remote_desktop_version: u32,
    /// `AvailableDeviceTypes` (bit 1: keyboard), when the portal says.
    pub device_types: Option<u32>,
    /// The Clipboard interface's version, when there is one.
    pub clipboard_version: Option<u32>,
}

impl Offer {
    pub fn describe(&self) -> String {
        let mut line = format!("{REMOTE_DESKTOP} version {}", self.remote_desktop_version);
        match self.clipboard_version {
            Some(version) => line.push_str(&format!(", Clipboard version {version} (paste)")),
            None => {
                line.push_str(", no Clipboard interface (prompts are pasted through the target window plugin's clipboard where it lends one, else only one line of ASCII up to 200 characters is typed)")
            }
        }
        line
    }
}

/// Whether the portal is there and offers remote input (read-only: nothing is started).
pub async fn offer(buses: &Buses) -> Result<Offer, PortalError> {
    if buses.name_provider(Bus::Session, NAME).await?.is_none() {
        return Err(PortalError::Missing(format!(
            "nobody owns {NAME} and nothing starts it (xdg-desktop-portal is not installed or not running)"
        )));
    }
    let version = |interface: &'static str| async move {
        buses
            .property::<u32>(Bus::Session, NAME, PATH, interface, "version")
            .await
    };
    let remote_desktop_version = match version(REMOTE_DESKTOP).await {
        Ok(version) => version,
        Err(error @ BusError::Refused { .. }) => {
            return Err(PortalError::NoRemoteDesktop(format!(
                "{} (the desktop's portal backend, e.g. xdg-desktop-portal-gnome or -kde, provides it)",
                error.short()
            )))
        }
        Err(error) => return Err(error.into()),
    };
    let device_types = buses
        .property::<u32>(
            Bus::Session,
            NAME,
            PATH,
            REMOTE_DESKTOP,
            "AvailableDeviceTypes",
        )
        .await
        .ok();
    if device_types.is_some_and(|types| types & KEYBOARD == 0) {
        return Err(PortalError::NoRemoteDesktop(
            "the portal offers no keyboard (AvailableDeviceTypes)".into(),
        ));
    }
    Ok(Offer {
        remote_desktop_version,
        device_types,
        clipboard_version: version(CLIPBOARD).await.ok(),
    })
}

/// Where the restore token is kept: one file, mode 0600.
#[derive(Debug, Clone)]
pub struct TokenStore {
    pub path: PathBuf,
}

impl TokenStore {
    /// `$XDG_STATE_HOME/koru/portal-restore-token` (else `~/.local/state/…`).
    pub fn default_path() -> PathBuf {
        let state = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into()))
                    .join(".local/state")
            });
        state.join("koru").join("portal-restore-token")
    }

    pub fn read(&self) -> Option<String> {
        let token = std::fs::read_to_string(&self.path).ok()?;
        let token = token.trim();
        (!token.is_empty()).then(|| token.to_string())
    }

    /// Replaces the token: written to a new 0600 file, then renamed over the old one.
    pub fn save(&self, token: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let temporary = dir.join(".portal-restore-token.new");
        let _ = std::fs::remove_file(&temporary);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(token.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &self.path)
    }

    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The portal as the daemon uses it: one session, started on first use.
#[derive(Debug)]
pub struct Portal {
    buses: Arc<Buses>,
    tokens: TokenStore,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// What the last attempt to start a session (or the last probe) found, for the
    /// planner, which must not wait on the bus: `None` before any.
    last: Mutex<Option<Result<(), PortalError>>>,
    /// Where the desktop's consent stands, for `status.result.portal` (and so doctor).
    consent: Mutex<ConsentRecord>,
}

/// The daemon's portal session as `status` reports it, and the agreed session's closed
/// flag (the desktop may end it at any time).
#[derive(Debug)]
struct ConsentRecord {
    status: koru_protocol::PortalStatus,
    closed: Option<Arc<AtomicBool>>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A started remote-input session.
#[derive(Debug)]
pub struct Session {
    connection: Connection,
    handle: OwnedObjectPath,
    /// Whether the portal shares the clipboard with it.
    pub clipboard: bool,
    /// What this session offers when it owns the clipboard.
    content: Arc<Mutex<Option<String>>>,
    /// Whether the desktop gave a restore token for it (kept: the next daemon start is not
    /// asked again).
    pub remembered: bool,
    /// The portal's RemoteDesktop interface version.
    pub remote_desktop_version: u32,
    closed: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    timeout: Duration,
}

impl Drop for Session {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Portal {
    pub fn new(buses: Arc<Buses>, tokens: TokenStore) -> Portal {
        Portal {
            buses,
            tokens,
            session: tokio::sync::Mutex::new(None),
            last: Mutex::new(None),
            consent: Mutex::new(ConsentRecord {
                status: koru_protocol::PortalStatus {
                    consent: koru_protocol::PortalConsent::None,
                    since_ms: None,
                    remembered: None,
                    remote_desktop_version: None,
                    clipboard: None,
                    detail: None,
                },
                closed: None,
            }),
        }
    }

    /// Where the desktop's consent stands in this daemon: none asked yet, the dialog up,
    /// agreed (and whether it is remembered across daemon starts), refused, or the portal
    /// unusable. An agreed session the desktop has since ended reads as refused.
    pub fn status(&self) -> koru_protocol::PortalStatus {
        let Ok(mut record) = self.consent.lock() else {
            return koru_protocol::PortalStatus {
                consent: koru_protocol::PortalConsent::Unavailable,
                since_ms: None,
                remembered: None,
                remote_desktop_version: None,
                clipboard: None,
                detail: Some("the portal's state could not be read".into()),
            };
        };
        if record
            .closed
            .as_ref()
            .is_some_and(|closed| closed.load(Ordering::SeqCst))
        {
            record.closed = None;
            record.status.consent = koru_protocol::PortalConsent::Refused;
            record.status.since_ms = Some(now_ms());
            record.status.detail = Some(
                "the desktop ended the remote-input session (stopped by the person, or the desktop restarted); the next drive asks again".into(),
            );
        }
        record.status.clone()
    }

    /// Records where the consent stands now.
    fn set_consent(&self, update: impl FnOnce(&mut ConsentRecord)) {
        if let Ok(mut record) = self.consent.lock() {
            update(&mut record);
            record.status.since_ms = Some(now_ms());
        }
    }

    /// Whether a restore token is kept (the desktop agreed before).
    pub fn has_token(&self) -> bool {
        self.tokens.read().is_some()
    }

    /// What the last start (or probe) found: `None` before any.
    pub fn last_outcome(&self) -> Option<Result<(), PortalError>> {
        self.last.lock().ok().and_then(|last| last.clone())
    }

    fn remember(&self, outcome: Result<(), PortalError>) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some(outcome);
        }
    }

    /// Asks the portal what it offers and remembers whether it is usable.
    pub async fn refresh(&self) -> Result<Offer, PortalError> {
        let offer = offer(&self.buses).await;
        // A missing portal or interface is worth remembering; a session that works is
        // remembered by `session`.
        match &offer {
            Ok(found) => {
                self.remember(Ok(()));
                if let Ok(mut record) = self.consent.lock() {
                    record.status.remote_desktop_version = Some(found.remote_desktop_version);
                    record.status.clipboard = Some(found.clipboard_version.is_some());
                }
            }
            Err(error) => {
                self.remember(Err(error.clone()));
                let agreed = self
                    .consent
                    .lock()
                    .is_ok_and(|r| r.status.consent == koru_protocol::PortalConsent::Agreed);
                if !agreed {
                    let detail = error.to_string();
                    self.set_consent(|record| {
                        record.status.consent = koru_protocol::PortalConsent::Unavailable;
                        record.status.detail = Some(detail);
                    });
                }
            }
        }
        offer
    }

    /// The running session, or a new one (asking the desktop's consent when there is no
    /// restore token it honours, for at most `consent_timeout`).
    pub async fn session(&self, consent_timeout: Duration) -> Result<Arc<Session>, PortalError> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref() {
            if !session.closed.load(Ordering::SeqCst) {
                return Ok(session.clone());
            }
            tracing::info!("the portal session was closed; starting a new one");
        }
        *slot = None;
        self.set_consent(|record| {
            record.closed = None;
            record.status.consent = koru_protocol::PortalConsent::Asking;
            record.status.remembered = None;
            record.status.detail = Some(
                "a drive asked for a remote-input session; the desktop shows its consent dialog unless it remembers an earlier one".into(),
            );
        });
        let started = self.start(consent_timeout).await;
        self.remember(started.as_ref().map(|_| ()).map_err(Clone::clone));
        match &started {
            Ok(session) => {
                let (remembered, version, clipboard) = (
                    session.remembered,
                    session.remote_desktop_version,
                    session.clipboard,
                );
                let closed = session.closed.clone();
                self.set_consent(|record| {
                    record.closed = Some(closed);
                    record.status.consent = koru_protocol::PortalConsent::Agreed;
                    record.status.remembered = Some(remembered);
                    record.status.remote_desktop_version = Some(version);
                    record.status.clipboard = Some(clipboard);
                    record.status.detail = Some(if remembered {
                        "the desktop agreed; its restore token is kept, so the next daemon start is not asked again".into()
                    } else {
                        "the desktop agreed for this daemon's life; it gave no restore token, so it asks again at each daemon start".into()
                    });
                });
            }
            Err(error) => {
                let consent = match error {
                    PortalError::ConsentRefused(_)
                    | PortalError::ConsentTimeout(_)
                    | PortalError::NoKeyboard(_)
                    | PortalError::Closed => koru_protocol::PortalConsent::Refused,
                    _ => koru_protocol::PortalConsent::Unavailable,
                };
                let detail = error.to_string();
                self.set_consent(|record| {
                    record.status.consent = consent;
                    record.status.detail = Some(detail);
                });
            }
        }
        let session = Arc::new(started?);
        *slot = Some(session.clone());
        Ok(session)
    }

    async fn start(&self, consent_timeout: Duration) -> Result<Session, PortalError> {
        let offer = offer(&self.buses).await?;
        let connection = self.buses.connection(Bus::Session).await?;
        let timeout = CALL_TIMEOUT.max(self.buses.timeout);
        let results = request(
            &connection,
            REMOTE_DESKTOP,
            "CreateSession",
            |token| {
                (options([
                    ("handle_token", token.into()),
                    ("session_handle_token", Value::from(new_token())),
                ]),)
            },
            timeout,
        )
        .await?;
        let handle = session_handle(&results)?;
        let restore_token = self.tokens.read();
        let mut select = vec![
            ("types", Value::U32(KEYBOARD)),
            ("persist_mode", Value::U32(PERSIST_UNTIL_REVOKED)),
        ];
        if let Some(token) = &restore_token {
            select.push(("restore_token", Value::from(token.clone())));
        }
        let session_path = handle.clone();
        request(
            &connection,
            REMOTE_DESKTOP,
            "SelectDevices",
            move |token| {
                let mut select = select.clone();
                select.push(("handle_token", token.into()));
                (session_path.clone(), options(select))
            },
            timeout,
        )
        .await?;
        let wants_clipboard = offer.clipboard_version.is_some();
        if wants_clipboard {
            let empty: HashMap<&str, Value<'_>> = HashMap::new();
            call_on::<_, ()>(
                &connection,
                portal_call(CLIPBOARD, "RequestClipboard"),
                &(handle.clone(), empty),
                timeout,
            )
            .await?;
        }
        // Subscribed before Start, so a session the desktop ends is noticed.
        let closed = Arc::new(AtomicBool::new(false));
        let mut tasks = vec![watch_closed(&connection, &handle, closed.clone()).await?];
        let session_path = handle.clone();
        let started = request(
            &connection,
            REMOTE_DESKTOP,
            "Start",
            move |token| {
                (
                    session_path.clone(),
                    "",
                    options([("handle_token", token.into())]),
                )
            },
            consent_timeout,
        )
        .await;
        let results = match started {
            Ok(results) => results,
            Err(error) => {
                if matches!(error, PortalError::ConsentRefused(_)) && restore_token.is_some() {
                    // The token did not spare the person the dialog, and they said no: it
                    // is worth nothing now.
                    self.tokens.remove();
                }
                for task in &tasks {
                    task.abort();
                }
                return Err(error);
            }
        };
        let devices = results
            .get("devices")
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0);
        if devices & KEYBOARD == 0 {
            return Err(PortalError::NoKeyboard(devices));
        }
        let remembered = match results
            .get("restore_token")
            .and_then(|v| String::try_from(v.clone()).ok())
        {
            Some(token) => match self.tokens.save(&token) {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, path = %self.tokens.path.display(), "cannot keep the portal's restore token; the desktop will ask again next time");
                    false
                }
            },
            None => {
                self.tokens.remove();
                false
            }
        };
        let clipboard = wants_clipboard
            && results
                .get("clipboard_enabled")
                .and_then(|v| bool::try_from(v).ok())
                .unwrap_or(false);
        let content = Arc::new(Mutex::new(None));
        if clipboard {
            tasks.push(serve_clipboard(&connection, &handle, content.clone(), timeout).await?);
        }
        tracing::info!(
            session = %handle.as_str(),
            clipboard,
            asked_with_token = restore_token.is_some(),
            remembered,
            "portal remote-input session started"
        );
        Ok(Session {
            connection,
            handle,
            clipboard,
            remembered,
            remote_desktop_version: offer.remote_desktop_version,
            content,
            closed,
            tasks,
            timeout,
        })
    }
}

impl Session {
    /// Presses (`true`) or releases one keysym.
    pub async fn keysym(&self, keysym: u32, pressed: bool) -> Result<(), PortalError> {
        self.check_open()?;
        let empty: HashMap<&str, Value<'_>> = HashMap::new();
        let sent = call_on::<_, ()>(
            &self.connection,
            portal_call(REMOTE_DESKTOP, "NotifyKeyboardKeysym"),
            &(&self.handle, empty, keysym as i32, u32::from(pressed)),
            self.timeout,
        )
        .await;
        self.settle(sent).map(|_| ())
    }

    /// A call's outcome; a session whose connection broke, or that the portal no longer
    /// knows, is over: the next drive starts a new one.
    fn settle<T>(&self, outcome: Result<T, BusError>) -> Result<T, PortalError> {
        outcome.map_err(|error| {
            let gone = match &error {
                BusError::Failed { .. } => true,
                BusError::Refused { name, detail, .. } => {
                    name.ends_with(".UnknownObject")
                        || name.ends_with(".ServiceUnknown")
                        || name.ends_with(".NoReply")
                        // xdg-desktop-portal's answer for a handle it does not know (a
                        // session of the portal before it restarted).
                        || (name.ends_with(".AccessDenied")
                            && detail.as_deref().is_some_and(|d| d.contains("Invalid session")))
                }
                _ => false,
            };
            if gone {
                self.closed.store(true, Ordering::SeqCst);
            }
            PortalError::Bus(error)
        })
    }

    /// Makes `text` the clipboard (this session owns it and serves it when asked).
    pub async fn set_clipboard(&self, text: Option<&str>) -> Result<(), PortalError> {
        self.check_open()?;
        if let Ok(mut content) = self.content.lock() {
            *content = text.map(str::to_string);
        }
        let mime_types: Vec<&str> = match text {
            Some(_) => vec![TEXT, "text/plain"],
            None => Vec::new(),
        };
        let set = call_on::<_, ()>(
            &self.connection,
            portal_call(CLIPBOARD, "SetSelection"),
            &(
                &self.handle,
                options([("mime_types", Value::from(mime_types))]),
            ),
            self.timeout,
        )
        .await;
        self.settle(set).map(|_| ())
    }

    /// The clipboard's text now (`None`: it holds no text, or more than Koru restores).
    pub async fn read_clipboard(&self) -> Result<Option<String>, PortalError> {
        self.check_open()?;
        let answer = call_on::<_, zbus::zvariant::OwnedFd>(
            &self.connection,
            portal_call(CLIPBOARD, "SelectionRead"),
            &(&self.handle, TEXT),
            self.timeout,
        )
        .await;
        let fd = match answer {
            Ok((fd, _)) => fd,
            // Nothing to read in that format.
            Err(BusError::Refused { .. }) => return Ok(None),
            Err(error) => return self.settle(Err(error)),
        };
        let file = tokio::fs::File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(fd)));
        let mut bytes = Vec::new();
        let mut limited = file.take(MAX_CLIPBOARD_BYTES + 1);
        let read = limited.read_to_end(&mut bytes);
        match tokio::time::timeout(self.timeout * 4, read).await {
            Ok(Ok(_)) if bytes.len() as u64 <= MAX_CLIPBOARD_BYTES => {
                Ok(String::from_utf8(bytes).ok())
            }
            Ok(Ok(_)) => Ok(None),
            Ok(Err(error)) => Err(PortalError::Bus(BusError::Failed {
                what: "reading the clipboard".into(),
                detail: error.to_string(),
            })),
            Err(_) => Err(PortalError::Bus(BusError::Timeout {
                what: "reading the clipboard".into(),
                after: self.timeout * 4,
            })),
        }
    }

    fn check_open(&self) -> Result<(), PortalError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(PortalError::Closed);
        }
        Ok(())
    }
}

fn portal_call<'a>(interface: &'a str, method: &'a str) -> Call<'a> {
    Call {
        bus: Bus::Session,
        destination: NAME,
        path: PATH,
        interface,
        method,
    }
}

fn options<'a>(
    entries: impl IntoIterator<Item = (&'a str, Value<'a>)>,
) -> HashMap<&'a str, Value<'a>> {
    entries.into_iter().collect()
}

/// A fresh `handle_token`: letters and digits only, as object paths allow.
fn new_token() -> String {
    format!("koru{}", uuid::Uuid::new_v4().simple())
}

/// Calls a portal method that answers through a `Request` object: subscribes to the
/// `Response` of the path the portal will use, calls with a fresh `handle_token` (what
/// `body` gets), and waits (at most `wait`) for the answer's results.
async fn request<B>(
    connection: &Connection,
    interface: &str,
    method: &str,
    body: impl FnOnce(String) -> B,
    wait: Duration,
) -> Result<HashMap<String, OwnedValue>, PortalError>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    let token = new_token();
    let sender = connection
        .unique_name()
        .map(|name| name.trim_start_matches(':').replace('.', "_"))
        .unwrap_or_default();
    let path = format!("{PATH}/request/{sender}/{token}");
    let failed = |detail: zbus::Error| {
        PortalError::Bus(BusError::Failed {
            what: format!("{interface}.{method}"),
            detail: detail.to_string(),
        })
    };
    let rule = MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(REQUEST)
        .and_then(|rule| rule.member("Response"))
        .and_then(|rule| rule.path(path.as_str()))
        .map_err(failed)?
        .build();
    let mut responses = MessageStream::for_match_rule(rule, connection, Some(4))
        .await
        .map_err(failed)?;
    let (handle, _) = call_on::<_, OwnedObjectPath>(
        connection,
        portal_call(interface, method),
        &body(token),
        wait.min(Duration::from_secs(5)),
    )
    .await?;
    if handle.as_str() != path {
        tracing::debug!(expected = %path, got = %handle.as_str(), "the portal answers on another request path");
    }
    let answer = tokio::time::timeout(wait, responses.next()).await;
    let message = match answer {
        Ok(Some(Ok(message))) => message,
        Ok(Some(Err(error))) => return Err(failed(error)),
        Ok(None) => return Err(PortalError::Closed),
        Err(_) if method == "Start" => {
            // Take the dialog away: an answer after the drive gave up must start nothing.
            let _ = call_on::<_, ()>(
                connection,
                Call {
                    bus: Bus::Session,
                    destination: NAME,
                    path: handle.as_str(),
                    interface: REQUEST,
                    method: "Close",
                },
                &(),
                Duration::from_secs(1),
            )
            .await;
            return Err(PortalError::ConsentTimeout(wait));
        }
        Err(_) => {
            return Err(PortalError::Bus(BusError::Timeout {
                what: format!("{interface}.{method}'s answer"),
                after: wait,
            }))
        }
    };
    let (response, results): (u32, HashMap<String, OwnedValue>) =
        message.body().deserialize().map_err(failed)?;
    match response {
        0 => Ok(results),
        1 => Err(PortalError::ConsentRefused(format!(
            "{method} was cancelled (the consent dialog was dismissed)"
        ))),
        other => Err(PortalError::ConsentRefused(format!(
            "{method} was ended by the portal (response {other})"
        ))),
    }
}

/// The session's object path from `CreateSession`'s results (a string, or a path).
fn session_handle(results: &HashMap<String, OwnedValue>) -> Result<OwnedObjectPath, PortalError> {
    let value = results.get("session_handle").ok_or_else(|| {
        PortalError::Bus(BusError::Failed {
            what: "CreateSession".into(),
            detail: "no session_handle in the answer".into(),
        })
    })?;
    let path = match &**value {
        Value::Str(text) => ObjectPath::try_from(text.as_str())
            .map(OwnedObjectPath::from)
            .ok(),
        Value::ObjectPath(path) => Some(OwnedObjectPath::from(path.clone())),
        _ => None,
    };
    path.ok_or_else(|| {
        PortalError::Bus(BusError::Failed {
            what: "CreateSession".into(),
            detail: format!("the session_handle {value:?} is not an object path"),
        })
    })
}

/// Marks `closed` when the desktop ends the session (its `Closed` signal).
async fn watch_closed(
    connection: &Connection,
    handle: &OwnedObjectPath,
    closed: Arc<AtomicBool>,
) -> Result<tokio::task::JoinHandle<()>, PortalError> {
    let failed = |detail: zbus::Error| {
        PortalError::Bus(BusError::Failed {
            what: "watching the portal session".into(),
            detail: detail.to_string(),
        })
    };
    let rule = MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(SESSION)
        .and_then(|rule| rule.member("Closed"))
        .and_then(|rule| rule.path(handle.as_str().to_string()))
        .map_err(failed)?
        .build();
    let mut stream = MessageStream::for_match_rule(rule, connection, Some(2))
        .await
        .map_err(failed)?;
    Ok(tokio::spawn(async move {
        if stream.next().await.is_some() {
            tracing::info!(
                "the desktop closed the portal session (revoked, or the portal restarted)"
            );
        }
        closed.store(true, Ordering::SeqCst);
    }))
}

/// Serves the clipboard this session owns: each `SelectionTransfer` gets the content
/// written into the pipe `SelectionWrite` hands out; another owner taking the clipboard
/// (`SelectionOwnerChanged` with `session_is_owner` false) ends the offer.
async fn serve_clipboard(
    connection: &Connection,
    handle: &OwnedObjectPath,
    content: Arc<Mutex<Option<String>>>,
    timeout: Duration,
) -> Result<tokio::task::JoinHandle<()>, PortalError> {
    let failed = |detail: zbus::Error| {
        PortalError::Bus(BusError::Failed {
            what: "serving the clipboard".into(),
            detail: detail.to_string(),
        })
    };
    let rule = MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(CLIPBOARD)
        .and_then(|rule| rule.path(PATH))
        .map_err(failed)?
        .build();
    let mut stream = MessageStream::for_match_rule(rule, connection, Some(16))
        .await
        .map_err(failed)?;
    let connection = connection.clone();
    let handle = handle.clone();
    Ok(tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            let header = message.header();
            let Some(member) = header.member() else {
                continue;
            };
            match member.as_str() {
                "SelectionTransfer" => {
                    let Ok((session, _mime, serial)) = message
                        .body()
                        .deserialize::<(OwnedObjectPath, String, u32)>()
                    else {
                        continue;
                    };
                    if session != handle {
                        continue;
                    }
                    let text = content.lock().ok().and_then(|c| c.clone());
                    let written = match text {
                        Some(text) => {
                            write_selection(&connection, &handle, serial, &text, timeout).await
                        }
                        None => Err("this session offers nothing".to_string()),
                    };
                    if let Err(why) = &written {
                        tracing::debug!(why, "a clipboard transfer was not served");
                    }
                    let _ = call_on::<_, ()>(
                        &connection,
                        portal_call(CLIPBOARD, "SelectionWriteDone"),
                        &(&handle, serial, written.is_ok()),
                        timeout,
                    )
                    .await;
                }
                "SelectionOwnerChanged" => {
                    let Ok((session, options)) = message
                        .body()
                        .deserialize::<(OwnedObjectPath, HashMap<String, OwnedValue>)>()
                    else {
                        continue;
                    };
                    let ours = options
                        .get("session_is_owner")
                        .and_then(|v| bool::try_from(v).ok())
                        .unwrap_or(false);
                    if session == handle && !ours {
                        if let Ok(mut content) = content.lock() {
                            *content = None;
                        }
                    }
                }
                _ => {}
            }
        }
    }))
}

async fn write_selection(
    connection: &Connection,
    handle: &OwnedObjectPath,
    serial: u32,
    text: &str,
    timeout: Duration,
) -> Result<(), String> {
    let (fd, _) = call_on::<_, zbus::zvariant::OwnedFd>(
        connection,
        portal_call(CLIPBOARD, "SelectionWrite"),
        &(handle, serial),
        timeout,
    )
    .await
    .map_err(|error| error.to_string())?;
    let mut file = tokio::fs::File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(fd)));
    let write = async {
        file.write_all(text.as_bytes()).await?;
        file.flush().await
    };
    match tokio::time::timeout(timeout * 4, write).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the reader took too long".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restore_token_is_kept_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore {
            path: dir.path().join("koru/portal-restore-token"),
        };
        assert_eq!(store.read(), None);
        store.save("first").unwrap();
        store.save("second").unwrap();
        assert_eq!(store.read().as_deref(), Some("second"));
        let mode = std::fs::metadata(&store.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        store.remove();
        assert_eq!(store.read(), None);
    }

    #[test]
    fn each_failure_has_its_blocker() {
        assert_eq!(PortalError::Missing("x".into()).blocker(), "portal_missing");
        assert_eq!(
            PortalError::NoRemoteDesktop("x".into()).blocker(),
            "portal_no_remote_desktop"
        );
        assert_eq!(
            PortalError::ConsentRefused("x".into()).blocker(),
            "consent_pending"
        );
        assert_eq!(
            PortalError::ConsentTimeout(Duration::from_secs(30)).blocker(),
            "consent_pending"
        );
        let unknown = BusError::Refused {
            what: "x".into(),
            name: "org.freedesktop.DBus.Error.ServiceUnknown".into(),
            detail: None,
        };
        assert_eq!(PortalError::Bus(unknown).blocker(), "portal_missing");
    }
}

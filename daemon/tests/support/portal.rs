//! A stand-in XDG desktop portal for tests and benchmarks (not the real xdg-desktop-portal): org.freedesktop.portal.RemoteDesktop and Clipboard on a private session bus, playing the desktop too — it answers Requests with Response signals, asks "consent" (approving or refusing as told, counting each dialog), issues and honours single-use restore tokens (which the test can revoke), records every keysym and clipboard call, and acts as the focused window: printable keysyms are typed into its text, ctrl+v pastes what the clipboard's owner serves (through SelectionTransfer/SelectionWrite when Koru's session owns it), Return is a newline.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zbus::zvariant::{ObjectPath, OwnedFd, OwnedObjectPath, OwnedValue, Value};

pub const PATH: &str = "/org/freedesktop/portal/desktop";
const CONTROL_L: u32 = 0xffe3;
const SHIFT_L: u32 = 0xffe1;
const RETURN: u32 = 0xff0d;

/// Who owns the stand-in desktop's clipboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Nobody,
    /// Another application, offering this text.
    Other(String),
    /// A portal session (Koru's), offering these types.
    Session(String, Vec<String>),
}

/// Everything the stand-in saw and decides.
#[derive(Debug)]
pub struct State {
    /// Whether the "person" allows remote input when asked.
    pub approve: bool,
    /// Whether a started session gets a restore token (GNOME 43's portal gives none for
    /// remote input: it asks at every new session).
    pub issue_tokens: bool,
    /// Consent dialogs shown.
    pub dialogs: u32,
    pub valid_tokens: HashSet<String>,
    issued: u32,
    /// The restore token each session's SelectDevices brought, and whether it asked for
    /// the clipboard.
    selected: HashMap<String, Option<String>>,
    clipboard_sessions: HashSet<String>,
    pub started_sessions: Vec<String>,
    /// The bus name of the client behind each session (a session whose client left owns
    /// nothing any more, as on a real desktop).
    clients: HashMap<String, String>,
    /// Every keysym event, in order: (keysym, pressed).
    pub keysyms: Vec<(u32, bool)>,
    held: HashSet<u32>,
    /// What the focused window received.
    pub typed: String,
    pub owner: Owner,
    /// Clipboard calls, in order (`SetSelection text/plain;charset=utf-8`, `SelectionRead`, …).
    pub clipboard_calls: Vec<String>,
    next_serial: u32,
    pending_writes: HashMap<u32, tokio::sync::oneshot::Sender<std::os::fd::OwnedFd>>,
    /// When set, the paste chord's key press is answered only after the test says so.
    pub paste_gate: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Told when the paste chord arrives.
    pub on_paste: Option<tokio::sync::oneshot::Sender<()>>,
}

impl State {
    /// Whether `session` is one this portal started.
    fn known_session(&self, session: &OwnedObjectPath) -> bool {
        self.started_sessions.contains(&session.to_string())
    }
}

/// xdg-desktop-portal's answer to a session handle it does not know.
fn invalid_session() -> zbus::fdo::Error {
    zbus::fdo::Error::AccessDenied("Invalid session".into())
}

impl Default for State {
    fn default() -> Self {
        State {
            approve: true,
            issue_tokens: true,
            dialogs: 0,
            valid_tokens: HashSet::new(),
            issued: 0,
            selected: HashMap::new(),
            clipboard_sessions: HashSet::new(),
            started_sessions: Vec::new(),
            clients: HashMap::new(),
            keysyms: Vec::new(),
            held: HashSet::new(),
            typed: String::new(),
            owner: Owner::Nobody,
            clipboard_calls: Vec::new(),
            next_serial: 0,
            pending_writes: HashMap::new(),
            paste_gate: None,
            on_paste: None,
        }
    }
}

pub type Shared = Arc<Mutex<State>>;

fn request_path(
    header: &zbus::message::Header<'_>,
    options: &HashMap<String, OwnedValue>,
) -> String {
    let sender = header
        .sender()
        .map(|s| s.trim_start_matches(':').replace('.', "_"))
        .unwrap_or_default();
    let token = options
        .get("handle_token")
        .and_then(|v| String::try_from(v.clone()).ok())
        .unwrap_or_else(|| "t".into());
    format!("{PATH}/request/{sender}/{token}")
}

/// Sends a Request's Response a moment after the method returned its handle.
fn respond(
    connection: &zbus::Connection,
    path: String,
    code: u32,
    results: HashMap<String, OwnedValue>,
) {
    let connection = connection.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let _ = connection
            .emit_signal(
                None::<&str>,
                path.as_str(),
                "org.freedesktop.portal.Request",
                "Response",
                &(code, results),
            )
            .await;
    });
}

fn value(v: impl Into<Value<'static>>) -> OwnedValue {
    OwnedValue::try_from(v.into()).unwrap()
}

pub struct RemoteDesktop {
    pub state: Shared,
}

#[zbus::interface(name = "org.freedesktop.portal.RemoteDesktop")]
impl RemoteDesktop {
    async fn create_session(
        &self,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> OwnedObjectPath {
        let path = request_path(&header, &options);
        let sender = header
            .sender()
            .map(|s| s.trim_start_matches(':').replace('.', "_"))
            .unwrap_or_default();
        let token = options
            .get("session_handle_token")
            .and_then(|v| String::try_from(v.clone()).ok())
            .unwrap_or_else(|| "s".into());
        let session = format!("{PATH}/session/{sender}/{token}");
        let mut results = HashMap::new();
        results.insert("session_handle".to_string(), value(session));
        respond(connection, path.clone(), 0, results);
        ObjectPath::try_from(path).unwrap().into()
    }

    async fn select_devices(
        &self,
        session: OwnedObjectPath,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> OwnedObjectPath {
        let path = request_path(&header, &options);
        let token = options
            .get("restore_token")
            .and_then(|v| String::try_from(v.clone()).ok());
        let types = options.get("types").and_then(|v| u32::try_from(v).ok());
        let persist = options
            .get("persist_mode")
            .and_then(|v| u32::try_from(v).ok());
        assert_eq!(types, Some(1), "Koru asks for the keyboard only");
        assert_eq!(persist, Some(2), "Koru asks to persist until revoked");
        self.state
            .lock()
            .unwrap()
            .selected
            .insert(session.to_string(), token);
        respond(connection, path.clone(), 0, HashMap::new());
        ObjectPath::try_from(path).unwrap().into()
    }

    async fn start(
        &self,
        session: OwnedObjectPath,
        _parent_window: String,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> OwnedObjectPath {
        let path = request_path(&header, &options);
        let (code, results) = {
            let mut state = self.state.lock().unwrap();
            let session = session.to_string();
            let brought = state.selected.get(&session).cloned().flatten();
            // Tokens are good for one use.
            let honoured = brought
                .as_ref()
                .is_some_and(|token| state.valid_tokens.remove(token));
            if !honoured {
                state.dialogs += 1;
            }
            if !honoured && !state.approve {
                (1, HashMap::new())
            } else {
                state.issued += 1;
                let token = format!("restore-{}", state.issued);
                state.valid_tokens.insert(token.clone());
                state.started_sessions.push(session.clone());
                if let Some(sender) = header.sender() {
                    state.clients.insert(session.clone(), sender.to_string());
                }
                let mut results = HashMap::new();
                results.insert("devices".to_string(), value(1u32));
                if state.issue_tokens {
                    results.insert("restore_token".to_string(), value(token));
                } else {
                    state.valid_tokens.remove(&token);
                }
                results.insert(
                    "clipboard_enabled".to_string(),
                    value(state.clipboard_sessions.contains(&session)),
                );
                (0, results)
            }
        };
        respond(connection, path.clone(), code, results);
        ObjectPath::try_from(path).unwrap().into()
    }

    async fn notify_keyboard_keysym(
        &self,
        session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
        keysym: i32,
        state: u32,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> zbus::fdo::Result<()> {
        let keysym = keysym as u32;
        let pressed = state == 1;
        let (paste, gate) = {
            let mut shared = self.state.lock().unwrap();
            if !shared.started_sessions.contains(&session.to_string()) {
                // What xdg-desktop-portal answers for a handle it does not know (a
                // session of the portal before a restart, say).
                return Err(invalid_session());
            }
            shared.keysyms.push((keysym, pressed));
            if !pressed {
                shared.held.remove(&keysym);
                return Ok(());
            }
            shared.held.insert(keysym);
            let ctrl = shared.held.contains(&CONTROL_L);
            if ctrl && keysym == u32::from(b'v') {
                if let Some(tell) = shared.on_paste.take() {
                    let _ = tell.send(());
                }
                (true, shared.paste_gate.take())
            } else {
                if keysym == RETURN {
                    shared.typed.push('\n');
                } else if !ctrl && keysym != SHIFT_L && keysym != CONTROL_L {
                    if let Some(c) = char_of(keysym) {
                        shared.typed.push(c);
                    }
                }
                (false, None)
            }
        };
        if !paste {
            return Ok(());
        }
        if let Some(gate) = gate {
            // Within the daemon's time limit for one portal call.
            let _ = tokio::time::timeout(Duration::from_millis(1500), gate).await;
        }
        // The focused window reads the clipboard as applications do: asynchronously.
        let state = self.state.clone();
        let connection = connection.clone();
        tokio::spawn(async move {
            if let Some(text) = clipboard_as_an_app_reads_it(&state, &connection).await {
                state.lock().unwrap().typed.push_str(&text);
            }
        });
        Ok(())
    }

    /// Named as the portal names it (zbus would say `Version`).
    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        2
    }

    #[zbus(property, name = "AvailableDeviceTypes")]
    fn available_device_types(&self) -> u32 {
        7
    }
}

fn char_of(keysym: u32) -> Option<char> {
    match keysym {
        0x20..=0x7e | 0xa0..=0xff => char::from_u32(keysym),
        0x0100_0000.. => char::from_u32(keysym - 0x0100_0000),
        _ => None,
    }
}

/// What an application pasting now gets: the other owner's text, or the session's, asked
/// for through SelectionTransfer and read from the pipe the session writes into.
pub async fn clipboard_as_an_app_reads_it(
    state: &Shared,
    connection: &zbus::Connection,
) -> Option<String> {
    let owner_client = {
        let shared = state.lock().unwrap();
        match &shared.owner {
            Owner::Session(session, _) => shared.clients.get(session).cloned(),
            _ => None,
        }
    };
    if let Some(client) = owner_client {
        let alive = zbus::fdo::DBusProxy::new(connection)
            .await
            .ok()?
            .name_has_owner(client.as_str().try_into().ok()?)
            .await
            .ok()?;
        if !alive {
            state.lock().unwrap().owner = Owner::Nobody;
        }
    }
    let (owner, serial, receiver) = {
        let mut shared = state.lock().unwrap();
        match shared.owner.clone() {
            Owner::Nobody => return None,
            Owner::Other(text) => return Some(text),
            Owner::Session(session, _) => {
                shared.next_serial += 1;
                let serial = shared.next_serial;
                let (tx, rx) = tokio::sync::oneshot::channel();
                shared.pending_writes.insert(serial, tx);
                (session, serial, rx)
            }
        }
    };
    let session = ObjectPath::try_from(owner.as_str()).ok()?;
    connection
        .emit_signal(
            None::<&str>,
            PATH,
            "org.freedesktop.portal.Clipboard",
            "SelectionTransfer",
            &(session, "text/plain;charset=utf-8", serial),
        )
        .await
        .ok()?;
    let read_end = tokio::time::timeout(Duration::from_secs(3), receiver)
        .await
        .ok()?
        .ok()?;
    tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        std::fs::File::from(read_end)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    })
    .await
    .ok()?
}

pub struct Clipboard {
    pub state: Shared,
}

#[zbus::interface(name = "org.freedesktop.portal.Clipboard")]
impl Clipboard {
    fn request_clipboard(
        &self,
        session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<()> {
        // Asked before Start, for a session this portal created.
        let mut state = self.state.lock().unwrap();
        if !state.selected.contains_key(&session.to_string()) {
            return Err(invalid_session());
        }
        state.clipboard_calls.push("RequestClipboard".into());
        state.clipboard_sessions.insert(session.to_string());
        Ok(())
    }

    fn set_selection(
        &self,
        session: OwnedObjectPath,
        options: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<()> {
        let types: Vec<String> = options
            .get("mime_types")
            .and_then(|v| Vec::<String>::try_from(v.clone()).ok())
            .unwrap_or_default();
        let mut state = self.state.lock().unwrap();
        if !state.known_session(&session) {
            return Err(invalid_session());
        }
        state
            .clipboard_calls
            .push(format!("SetSelection {}", types.join(",")));
        state.owner = if types.is_empty() {
            Owner::Nobody
        } else {
            Owner::Session(session.to_string(), types)
        };
        Ok(())
    }

    fn selection_write(
        &self,
        _session: OwnedObjectPath,
        serial: u32,
    ) -> zbus::fdo::Result<OwnedFd> {
        let (read_end, write_end) =
            nix::unistd::pipe().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let mut state = self.state.lock().unwrap();
        state
            .clipboard_calls
            .push(format!("SelectionWrite {serial}"));
        let waiting = state
            .pending_writes
            .remove(&serial)
            .ok_or_else(|| zbus::fdo::Error::InvalidArgs(format!("no transfer {serial}")))?;
        let _ = waiting.send(read_end);
        Ok(OwnedFd::from(write_end))
    }

    fn selection_write_done(&self, _session: OwnedObjectPath, serial: u32, success: bool) {
        self.state
            .lock()
            .unwrap()
            .clipboard_calls
            .push(format!("SelectionWriteDone {serial} {success}"));
    }

    async fn selection_read(
        &self,
        _session: OwnedObjectPath,
        mime_type: String,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> zbus::fdo::Result<OwnedFd> {
        self.state
            .lock()
            .unwrap()
            .clipboard_calls
            .push(format!("SelectionRead {mime_type}"));
        if self.state.lock().unwrap().owner == Owner::Nobody {
            return Err(zbus::fdo::Error::Failed("the clipboard is empty".into()));
        }
        let (read_end, write_end) =
            nix::unistd::pipe().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let state = self.state.clone();
        let connection = connection.clone();
        tokio::spawn(async move {
            let text = clipboard_as_an_app_reads_it(&state, &connection)
                .await
                .unwrap_or_default();
            let _ = tokio::task::spawn_blocking(move || {
                std::fs::File::from(write_end).write_all(text.as_bytes())
            })
            .await;
        });
        Ok(OwnedFd::from(read_end))
    }

    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        1
    }
}

/// The stand-in, served on `address` as org.freedesktop.portal.Desktop.
pub struct StandInPortal {
    pub state: Shared,
    pub connection: zbus::Connection,
}

impl StandInPortal {
    pub async fn serve(address: &str) -> StandInPortal {
        StandInPortal::serve_with(address, true).await
    }

    /// With `clipboard: false`, a portal without the Clipboard interface (xdg-desktop-portal
    /// 1.16, GNOME 43's).
    pub async fn serve_with(address: &str, clipboard: bool) -> StandInPortal {
        let state: Shared = Arc::new(Mutex::new(State::default()));
        let mut builder = zbus::connection::Builder::address(address)
            .unwrap()
            .name("org.freedesktop.portal.Desktop")
            .unwrap()
            .serve_at(
                PATH,
                RemoteDesktop {
                    state: state.clone(),
                },
            )
            .unwrap();
        if clipboard {
            builder = builder
                .serve_at(
                    PATH,
                    Clipboard {
                        state: state.clone(),
                    },
                )
                .unwrap();
        }
        let connection = builder
            .build()
            .await
            .expect("the stand-in portal serves on the private bus");
        StandInPortal { state, connection }
    }

    /// The clipboard as another application would paste it now.
    pub async fn clipboard(&self) -> Option<String> {
        clipboard_as_an_app_reads_it(&self.state, &self.connection).await
    }

    pub fn typed(&self) -> String {
        self.state.lock().unwrap().typed.clone()
    }

    pub fn dialogs(&self) -> u32 {
        self.state.lock().unwrap().dialogs
    }

    pub fn keysyms(&self) -> Vec<(u32, bool)> {
        self.state.lock().unwrap().keysyms.clone()
    }

    /// The desktop forgets every permission it gave (the person revoked it).
    pub fn revoke_tokens(&self) {
        self.state.lock().unwrap().valid_tokens.clear();
    }
}

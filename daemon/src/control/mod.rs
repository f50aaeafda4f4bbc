//! The control layer under the faces: the client side of the protocol (connect, hello/welcome, requests with ids, incoming lines with pings answered, following a drive, the one client-error → code map), used by the CLI, the HTTP API, MCP, doctor's self-probe, `koru dev fake-plugin` and tests.

pub mod dashboard_login;
pub mod hosts;
mod requests;
pub mod shared;
pub mod ssh;

pub use requests::{Controller, Exchange};

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

/// The longest prompt a face (MCP tools, the HTTP API) accepts from a controller, in bytes
/// of UTF-8 (the daemon's line limit is 1 MiB and the prompt is escaped inside a JSON line).
pub const MAX_PROMPT_BYTES: usize = 256 * 1024;

use futures::StreamExt;
use koru_protocol::{
    encode_line, ClientInfo, DriveInfo, Envelope, ErrorMessage, Hello, IdeInfo, Message, RequestId,
    Role, VersionRange, Welcome, WindowInfo,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::codec::FramedRead;

use crate::codec::{FrameError, NdjsonCodec};

/// What can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("no daemon at {}; start one with `koru daemon`", path.display())]
    NoDaemon { path: PathBuf },
    #[error("cannot connect to {}: {source}", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {}", .0.code, .0.message)]
    Refused(ErrorMessage),
    #[error("the daemon closed the connection")]
    Closed,
    /// Another machine's daemon could not be reached: what ssh (or koru there) said.
    #[error("cannot reach host {host}: {said}")]
    Unreachable { host: String, said: String },
    #[error("unexpected reply from the daemon: {0}")]
    Unexpected(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What [`Client::follow_drive`] hands its caller.
#[derive(Debug)]
pub enum Followed<'a> {
    /// The drive changed (state, attempts, observation…).
    Update(&'a DriveInfo),
    /// Time passed (the `tick` asked for), with the drive as it stands.
    Tick(&'a DriveInfo),
}

/// The one stable code every face (MCP tools, the HTTP API) reports for a [`ClientError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientErrorCode {
    /// The daemon cannot be reached, or went away.
    DaemonDown,
    /// The daemon answered out of turn.
    DaemonError,
    /// The daemon refused, with its own code.
    Refused(koru_protocol::ErrorCode),
}

impl ClientErrorCode {
    /// The wire spelling: `daemon_down`, `daemon_error` or the daemon's own code.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientErrorCode::DaemonDown => "daemon_down",
            ClientErrorCode::DaemonError => "daemon_error",
            ClientErrorCode::Refused(code) => code.as_str(),
        }
    }
}

impl std::fmt::Display for ClientErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ClientError {
    /// The one stable code every face reports for this failure: `daemon_down` when the
    /// daemon cannot be reached or went away, the daemon's own code when it refused,
    /// `daemon_error` when it answered out of turn.
    pub fn code(&self) -> ClientErrorCode {
        match self {
            ClientError::NoDaemon { .. }
            | ClientError::Connect { .. }
            | ClientError::Closed
            | ClientError::Unreachable { .. }
            | ClientError::Io(_) => ClientErrorCode::DaemonDown,
            ClientError::Refused(refusal) => ClientErrorCode::Refused(refusal.code),
            ClientError::Unexpected(_) => ClientErrorCode::DaemonError,
        }
    }
}

impl From<FrameError> for ClientError {
    fn from(err: FrameError) -> Self {
        match err {
            FrameError::Io(io) => ClientError::Io(io),
            other => ClientError::Unexpected(other.to_string()),
        }
    }
}

/// The reading side of a transport to the daemon: a socket's read half, an `ssh` child's
/// stdout, one end of an in-memory pipe in tests.
pub type TransportRead = Box<dyn AsyncRead + Send + Unpin>;
/// The writing side of a transport to the daemon.
pub type TransportWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// A greeted connection to the daemon, over any transport that carries bytes both ways.
pub struct Client {
    frames: FramedRead<TransportRead, NdjsonCodec>,
    writer: TransportWrite,
    /// What the transport needs kept alive and wound down (an `ssh` child), if anything.
    link: Option<Box<dyn TransportLink>>,
    next_id: i64,
    /// Lines that arrived while a request waited for its reply.
    pending: VecDeque<Envelope>,
    /// Answer the daemon's pings automatically (false only to test heartbeat loss).
    pub answer_pings: bool,
    pub welcome: Welcome,
}

/// The scope every controller connection of this process declares, once narrowed
/// ([`narrow_scope`]); unset: none declared (the daemon's default, drive).
static PROCESS_SCOPE: std::sync::OnceLock<koru_protocol::AccessScope> = std::sync::OnceLock::new();

/// Narrows every controller connection this process opens from now on to `scope`
/// (`koru mcp --role observe`): the daemon, not only this process, then refuses what the
/// scope does not allow, and journals the refusal. Set once; a later call is ignored.
pub fn narrow_scope(scope: koru_protocol::AccessScope) {
    let _ = PROCESS_SCOPE.set(scope);
}

/// The hello a controller sends.
pub fn controller_hello(name: &str) -> Hello {
    Hello {
        role: Role::Controller,
        protocol: VersionRange {
            min: koru_protocol::MIN_PROTOCOL_VERSION,
            max: koru_protocol::PROTOCOL_VERSION,
        },
        client: ClientInfo {
            name: name.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
        ide: None,
        window: None,
        capabilities: Vec::new(),
        chat: None,
        scope: PROCESS_SCOPE.get().copied(),
    }
}

/// The hello a plugin sends.
pub fn plugin_hello(
    name: &str,
    ide: IdeInfo,
    window: WindowInfo,
    capabilities: Vec<koru_protocol::Capability>,
) -> Hello {
    Hello {
        role: Role::Plugin,
        ide: Some(ide),
        window: Some(window),
        capabilities,
        ..controller_hello(name)
    }
}

/// What a transport other than a plain socket keeps alive for its connection's life (an
/// `ssh` child process): it explains a transport that closed before the daemon answered,
/// and winds the transport down when the connection closes.
pub trait TransportLink: Send {
    /// Why the transport closed early, once it has (what `ssh` said, for one): `None` when
    /// there is nothing better to say than "the daemon closed the connection".
    fn failure(&mut self) -> Pin<Box<dyn Future<Output = Option<ClientError>> + Send + '_>>;
    /// Winds the transport down after the connection said bye and closed its writing side.
    fn close(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl Client {
    /// Connects to the daemon's socket at `path` and completes the handshake.
    pub async fn connect(path: &Path, hello: Hello) -> Result<Client, ClientError> {
        let stream = connect_stream(path).await?;
        let (read_half, write_half) = stream.into_split();
        Client::handshake(Box::new(read_half), Box::new(write_half), None, hello).await
    }

    /// Completes the handshake over any transport (`link`, if given, is kept for the
    /// connection's life and asked why the transport closed when the daemon never answered).
    pub async fn handshake(
        reader: TransportRead,
        writer: TransportWrite,
        link: Option<Box<dyn TransportLink>>,
        hello: Hello,
    ) -> Result<Client, ClientError> {
        let mut client = Client {
            frames: FramedRead::new(reader, NdjsonCodec::new(64 * 1024 * 1024)),
            writer,
            link,
            next_id: 0,
            pending: VecDeque::new(),
            answer_pings: true,
            welcome: Welcome {
                protocol: 0,
                session_id: String::new(),
                daemon: koru_protocol::DaemonInfo {
                    version: String::new(),
                },
                heartbeat_ms: 0,
                max_line_bytes: 0,
                scope: None,
            },
        };
        let declared_scope = hello.scope;
        // The daemon may refuse before reading (another user's peer): a failed write still
        // leaves its error line to read.
        let hello_id = RequestId::Text("hello".into());
        let sent = client
            .send(Some(hello_id.clone()), Message::Hello(hello))
            .await;
        let reply = client.read_line().await;
        if matches!(reply, Err(_) | Ok(None)) {
            // A transport that closed before the daemon said anything explains itself
            // better than the bare EOF does (ssh's "Host key verification failed.").
            if let Some(link) = client.link.as_mut() {
                if let Some(failure) = link.failure().await {
                    return Err(failure);
                }
            }
        }
        if let (Err(write_error), Err(_) | Ok(None)) = (&sent, &reply) {
            return Err(ClientError::Io(std::io::Error::new(
                write_error_kind(write_error),
                write_error.to_string(),
            )));
        }
        match reply? {
            Some(Envelope {
                message: Message::Welcome(welcome),
                id,
                ..
            }) => {
                // Daemons before the welcome carried the hello's id send none.
                if id.as_ref().is_some_and(|id| id != &hello_id) {
                    return Err(ClientError::Unexpected(format!(
                        "a welcome for request {} (this hello was {hello_id})",
                        id.map(|id| id.to_string()).unwrap_or_default()
                    )));
                }
                if declared_scope.is_some() && welcome.scope != declared_scope {
                    // A daemon that predates scopes would let this connection do more
                    // than it said it may.
                    return Err(ClientError::Unexpected(format!(
                        "the daemon (version {}) does not hold connections to a scope; upgrade it to use --role {}",
                        welcome.daemon.version,
                        declared_scope.map(|s| s.as_str()).unwrap_or_default()
                    )));
                }
                client.welcome = welcome;
                Ok(client)
            }
            Some(Envelope {
                message: Message::Error(error),
                ..
            }) => Err(ClientError::Refused(error)),
            Some(other) => Err(ClientError::Unexpected(format!(
                "expected welcome, got {}",
                other.message.type_name()
            ))),
            None => Err(ClientError::Closed),
        }
    }

    /// Writes one line.
    pub async fn send(
        &mut self,
        id: Option<RequestId>,
        message: Message,
    ) -> Result<(), ClientError> {
        let line = encode_line(&Envelope::with_id(id, message));
        self.writer.write_all(&line).await?;
        Ok(())
    }

    /// Sends a request and waits for the reply that carries its id; other lines that
    /// arrive meanwhile are kept for [`Client::next`].
    pub async fn request(&mut self, message: Message) -> Result<Message, ClientError> {
        self.next_id += 1;
        let id = RequestId::Number(self.next_id);
        self.send(Some(id.clone()), message).await?;
        loop {
            let Some(envelope) = self.read_line().await? else {
                return Err(self.closed_error().await);
            };
            match envelope.message {
                Message::Error(error) if error.reference.as_ref() == Some(&id) => {
                    return Err(ClientError::Refused(error));
                }
                message if envelope.id.as_ref() == Some(&id) => return Ok(message),
                _ => self.pending.push_back(envelope),
            }
        }
    }

    /// Follows the drive `last` on this connection, subscribed to events
    /// (`events.subscribe`): see [`follow_drive`].
    pub async fn follow_drive(
        &mut self,
        last: DriveInfo,
        settled: impl Fn(&DriveInfo) -> bool,
        deadline: impl Fn(&DriveInfo) -> Option<tokio::time::Instant>,
        tick: Option<std::time::Duration>,
        seen: impl FnMut(Followed<'_>),
    ) -> Result<(DriveInfo, bool), ClientError> {
        follow_drive(self, last, settled, deadline, tick, seen).await
    }

    /// The next line from the daemon (pings are answered, not returned), or `None` at EOF.
    pub async fn next(&mut self) -> Result<Option<Envelope>, ClientError> {
        if let Some(envelope) = self.pending.pop_front() {
            return Ok(Some(envelope));
        }
        self.read_line().await
    }

    async fn read_line(&mut self) -> Result<Option<Envelope>, ClientError> {
        loop {
            let Some(frame) = self.frames.next().await else {
                return Ok(None);
            };
            let frame = frame?;
            let envelope = koru_protocol::decode_line(&frame)
                .map_err(|err| ClientError::Unexpected(err.to_string()))?;
            if matches!(envelope.message, Message::Ping {}) {
                if self.answer_pings {
                    self.send(envelope.id, Message::Pong {}).await?;
                }
                continue;
            }
            return Ok(Some(envelope));
        }
    }

    /// Says bye and closes (and winds the transport down: an `ssh` child exits).
    pub async fn close(mut self) {
        let _ = self
            .send(None, Message::Bye(koru_protocol::Bye { reason: None }))
            .await;
        let _ = self.writer.shutdown().await;
        if let Some(link) = self.link.take() {
            link.close().await;
        }
    }

    /// The error for a connection that closed: what its transport can say about it (an
    /// `ssh` child that lost its connection), else [`ClientError::Closed`].
    pub async fn closed_error(&mut self) -> ClientError {
        match self.link.as_mut() {
            Some(link) => link.failure().await.unwrap_or(ClientError::Closed),
            None => ClientError::Closed,
        }
    }
}

/// What an event stream hands a follower.
#[derive(Debug)]
pub enum Incoming {
    /// The next event, in the daemon's order (boxed: most events are far larger than the
    /// other variant).
    Event(Box<koru_protocol::StreamEvent>),
    /// Events were dropped before this reader took them (a shared connection's slow
    /// reader): whatever it follows must be asked for again.
    Lagged,
}

/// A connection's event stream, with what a follower needs besides: the drive as it
/// stands (after [`Incoming::Lagged`]) and why the stream ended.
pub trait EventSource: Send {
    /// The next event, or `None` when the connection closed.
    fn next_event(&mut self) -> impl Future<Output = Result<Option<Incoming>, ClientError>> + Send;
    /// `drive.get` on the same daemon.
    fn drive_now(
        &mut self,
        drive_id: String,
    ) -> impl Future<Output = Result<DriveInfo, ClientError>> + Send;
    /// Why the stream ended ([`ClientError::Closed`], or what the transport says).
    fn ended(&mut self) -> impl Future<Output = ClientError> + Send;
}

impl EventSource for Client {
    async fn next_event(&mut self) -> Result<Option<Incoming>, ClientError> {
        loop {
            let Some(envelope) = self.next().await? else {
                return Ok(None);
            };
            if let Message::Stream(item) = envelope.message {
                return Ok(Some(Incoming::Event(Box::new(item.event))));
            }
        }
    }

    async fn drive_now(&mut self, drive_id: String) -> Result<DriveInfo, ClientError> {
        self.get_drive(drive_id).await
    }

    async fn ended(&mut self) -> ClientError {
        self.closed_error().await
    }
}

/// Follows the drive `last` on an event stream until `settled` holds for it: each
/// `drive_updated` of that drive is handed to `seen` as [`Followed::Update`] (and becomes
/// `last`), and with `tick` set, `seen` gets [`Followed::Tick`] that often (a spinner).
/// `deadline` says, for the drive as it stands, when to give up (`None`: never). Returns
/// the drive as last seen and whether the deadline ended the wait; an error when the
/// stream ended first. The one "follow a drive until a stage" loop of every face.
pub async fn follow_drive(
    source: &mut impl EventSource,
    mut last: DriveInfo,
    settled: impl Fn(&DriveInfo) -> bool,
    deadline: impl Fn(&DriveInfo) -> Option<tokio::time::Instant>,
    tick: Option<std::time::Duration>,
    mut seen: impl FnMut(Followed<'_>),
) -> Result<(DriveInfo, bool), ClientError> {
    let mut ticker = tick.map(tokio::time::interval);
    while !settled(&last) {
        let until = deadline(&last);
        if until.is_some_and(|at| tokio::time::Instant::now() >= at) {
            return Ok((last, true));
        }
        let incoming = tokio::select! {
            incoming = source.next_event() => incoming?,
            _ = async {
                match ticker.as_mut() {
                    Some(ticker) => { ticker.tick().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {
                seen(Followed::Tick(&last));
                continue;
            }
            _ = async {
                match until {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending::<()>().await,
                }
            } => continue,
        };
        match incoming {
            None => return Err(source.ended().await),
            Some(Incoming::Event(event)) => {
                if let koru_protocol::StreamEvent::DriveUpdated { drive } = *event {
                    if drive.drive_id == last.drive_id {
                        seen(Followed::Update(&drive));
                        last = drive;
                    }
                }
            }
            Some(Incoming::Lagged) => {
                let drive = source.drive_now(last.drive_id.clone()).await?;
                if drive != last {
                    seen(Followed::Update(&drive));
                    last = drive;
                }
            }
        }
    }
    Ok((last, false))
}

fn write_error_kind(error: &ClientError) -> std::io::ErrorKind {
    match error {
        ClientError::Io(io) => io.kind(),
        _ => std::io::ErrorKind::Other,
    }
}

/// Opens the socket, turning "nobody there" into [`ClientError::NoDaemon`].
pub async fn connect_stream(path: &Path) -> Result<UnixStream, ClientError> {
    use interprocess::local_socket::traits::tokio::Stream as _;
    use interprocess::local_socket::{GenericFilePath, ToFsName};
    use interprocess::os::unix::uds_local_socket::tokio::Stream;

    let name = path
        .to_fs_name::<GenericFilePath>()
        .map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
    match Stream::connect(name).await {
        Ok(stream) => Ok(UnixStream::from(stream)),
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            Err(ClientError::NoDaemon {
                path: path.to_path_buf(),
            })
        }
        Err(source) => Err(ClientError::Connect {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_failure_has_one_code_for_every_face() {
        let path = PathBuf::from("/run/koru.sock");
        let io = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let cases = [
            (ClientError::NoDaemon { path: path.clone() }, "daemon_down"),
            (ClientError::Connect { path, source: io() }, "daemon_down"),
            (ClientError::Closed, "daemon_down"),
            (
                ClientError::Unreachable {
                    host: "box".into(),
                    said: "Host key verification failed.".into(),
                },
                "daemon_down",
            ),
            (ClientError::Io(io()), "daemon_down"),
            (
                ClientError::Refused(ErrorMessage::new(
                    koru_protocol::ErrorCode::UnknownDrive,
                    "no drive d_1",
                )),
                "unknown_drive",
            ),
            (ClientError::Unexpected("a pong".into()), "daemon_error"),
        ];
        for (error, code) in cases {
            assert_eq!(error.code().as_str(), code, "{error}");
        }
    }
}

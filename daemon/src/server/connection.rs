//! One task per accepted connection: peer-UID check, framing, the handshake, decoding and role checks, and a writer fed by a bounded queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use koru_protocol::{
    decode_line, negotiate, Envelope, ErrorCode, ErrorMessage, Hello, Location, Message,
    RefusedHandshake, Role, VersionRange,
};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use crate::app::{encode, ConnId, ConnectionHandle, DaemonEvent, InFlight, PeerInfo};
use crate::clock::{Clock, SystemClock};
use crate::codec::{FrameError, NdjsonCodec};

/// Per-connection limits.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    pub max_line_bytes: usize,
    pub handshake_timeout: Duration,
    /// Lines the daemon may have queued for one peer before it counts as a slow reader.
    pub outbound_capacity: usize,
    /// Consecutive malformed lines after which the connection is closed.
    pub malformed_limit: u32,
    /// How long one line may take to write before the peer counts as not reading.
    pub write_timeout: Duration,
    /// How long queued lines may take to flush once the connection is closing.
    pub close_flush_timeout: Duration,
    /// Lines read from one connection that the state machine has not handled yet; past it a
    /// controller's request is refused with `queue_full` (a flood on one connection cannot
    /// fill the daemon's event queue, shared by every connection).
    pub max_in_flight: usize,
}

/// The protocol versions this daemon speaks.
pub fn supported_versions() -> VersionRange {
    VersionRange {
        min: koru_protocol::MIN_PROTOCOL_VERSION,
        max: koru_protocol::PROTOCOL_VERSION,
    }
}

/// Serves one accepted connection until it ends.
pub async fn serve(
    stream: UnixStream,
    conn_id: ConnId,
    events: mpsc::Sender<DaemonEvent>,
    config: Arc<ConnectionConfig>,
) {
    let peer = match peer_info(&stream) {
        Ok(peer) => peer,
        Err(err) => {
            tracing::warn!(conn_id, error = %err, "cannot read peer credentials; closing");
            return;
        }
    };
    let our_uid = nix::unistd::getuid().as_raw();
    if peer.uid != our_uid {
        // On the heap, like the handshake (see `Reader::run`): every connection's task
        // would otherwise reserve room for this rare path's state.
        Box::pin(refuse_other_user(
            stream, conn_id, peer, our_uid, &events, &config,
        ))
        .await;
        return;
    }

    let (read_half, write_half) = stream.into_split();
    let (outbound, outbound_rx) = mpsc::channel(config.outbound_capacity.max(1));
    let close = CancellationToken::new();
    let writer = tokio::spawn(write_loop(
        write_half,
        outbound_rx,
        close.clone(),
        config.clone(),
        conn_id,
    ));
    // Room in the state machine's queue first, then the event (as in `Reader::run`).
    let Ok(permit) = events.reserve().await else {
        close.cancel();
        return;
    };
    permit.send(DaemonEvent::Connected {
        conn_id,
        handle: ConnectionHandle {
            outbound: outbound.clone(),
            close: close.clone(),
        },
        peer,
    });

    let mut reader = Reader {
        frames: FramedRead::with_capacity(
            read_half,
            NdjsonCodec::new(config.max_line_bytes),
            READ_BUFFER_BYTES,
        ),
        outbound,
        close: close.clone(),
        config: config.clone(),
        line_number: 0,
        malformed_in_a_row: 0,
        peer_pid: peer.pid,
        in_flight: Arc::new(AtomicUsize::new(0)),
    };
    let reason = reader.run(conn_id, &events).await;
    tracing::debug!(conn_id, reason = %reason, "connection ending");
    if let Ok(permit) = events.reserve().await {
        permit.send(DaemonEvent::Disconnected { conn_id, reason });
    }
    close.cancel();
    let flush = config.close_flush_timeout + Duration::from_millis(100);
    if tokio::time::timeout(flush, writer).await.is_err() {
        tracing::debug!(conn_id, "writer did not finish flushing in time");
    }
}

fn peer_info(stream: &UnixStream) -> std::io::Result<PeerInfo> {
    let creds = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(std::io::Error::from)?;
    Ok(PeerInfo {
        pid: u32::try_from(creds.pid()).ok().filter(|pid| *pid > 0),
        uid: creds.uid(),
    })
}

/// Refuses a connection from another user's process and records it for doctor.
async fn refuse_other_user(
    stream: UnixStream,
    conn_id: ConnId,
    peer: PeerInfo,
    our_uid: u32,
    events: &mpsc::Sender<DaemonEvent>,
    config: &ConnectionConfig,
) {
    tracing::warn!(conn_id, peer_uid = peer.uid, peer_pid = ?peer.pid, "refused a connection from another user");
    let message = refuse(stream, config, peer.uid, our_uid).await;
    let record = RefusedHandshake {
        at_ms: SystemClock.now_ms(),
        code: ErrorCode::PeerRefused,
        message,
        client: None,
        product: None,
        protocol: None,
        peer_pid: peer.pid,
    };
    let _ = events
        .send(DaemonEvent::HandshakeRefused {
            record: Box::new(record),
        })
        .await;
}

/// Tells another user's process why it is refused, then closes; returns the message.
async fn refuse(
    mut stream: UnixStream,
    config: &ConnectionConfig,
    peer_uid: u32,
    our_uid: u32,
) -> String {
    let message = format!("this daemon serves uid {our_uid} only; your uid is {peer_uid}");
    let error = ErrorMessage::new(ErrorCode::PeerRefused, message.clone());
    let line = koru_protocol::encode_line(&Envelope::new(Message::Error(error)));
    let _ = tokio::time::timeout(config.write_timeout, stream.write_all(&line)).await;
    let _ = stream.shutdown().await;
    message
}

/// A connection's read buffer starts this large (a hello, a ping, an ack fit) and doubles
/// as longer lines need it; most connections are idle plugins that never send a long line.
const READ_BUFFER_BYTES: usize = 1024;

/// A read buffer that a long line grew past this is let go once it is empty again, so that
/// one long prompt does not stay allocated for the rest of the connection.
const READ_BUFFER_KEPT_BYTES: usize = 64 * 1024;

struct Reader {
    frames: FramedRead<OwnedReadHalf, NdjsonCodec>,
    outbound: mpsc::Sender<Bytes>,
    close: CancellationToken,
    config: Arc<ConnectionConfig>,
    line_number: u64,
    malformed_in_a_row: u32,
    peer_pid: Option<u32>,
    /// Lines read and not yet handled by the state machine ([`InFlight`]).
    in_flight: Arc<AtomicUsize>,
}

/// What one read produced.
enum Step {
    Line(Box<Envelope>),
    /// A bad line was answered; keep reading.
    Answered,
    /// The connection is over, for this reason.
    End(String),
}

impl Reader {
    async fn run(&mut self, conn_id: ConnId, events: &mpsc::Sender<DaemonEvent>) -> String {
        // The handshake runs in a future of its own on the heap: its state (the deadline's
        // timer, the hello) is freed once the peer is greeted, rather than reserved in the
        // connection's task for as long as the connection lasts.
        let (role, protocol) = match Box::pin(self.handshake(conn_id, events)).await {
            Ok(greeted) => greeted,
            Err(reason) => return reason,
        };

        loop {
            let envelope = match self.next().await {
                Step::Line(envelope) => envelope,
                Step::Answered => continue,
                Step::End(reason) => return reason,
            };
            let type_name = envelope.message.type_name();
            if envelope.v != protocol {
                self.answer(
                    ErrorMessage::new(
                        ErrorCode::VersionMismatch,
                        format!(
                            "this connection speaks protocol v{protocol}; the line says v{}",
                            envelope.v
                        ),
                    )
                    .with_reference(envelope.id)
                    .with_location(self.here(Some("v"))),
                );
                continue;
            }
            if matches!(envelope.message, Message::Hello(_)) {
                self.answer(
                    ErrorMessage::new(
                        ErrorCode::AlreadyGreeted,
                        "hello was already accepted on this connection",
                    )
                    .with_reference(envelope.id)
                    .with_location(self.here(None)),
                );
                continue;
            }
            if !role_may_send(role, type_name) {
                let role_name = match role {
                    Role::Plugin => "a plugin",
                    Role::Controller => "a controller",
                };
                self.answer(
                    ErrorMessage::new(
                        ErrorCode::WrongRole,
                        format!("{role_name} may not send {type_name}"),
                    )
                    .with_reference(envelope.id)
                    .with_location(self.here(None)),
                );
                continue;
            }
            let waiting = self.in_flight.load(Ordering::Acquire);
            if waiting >= self.config.max_in_flight && is_request(role, type_name) {
                self.answer(
                    ErrorMessage::new(
                        ErrorCode::QueueFull,
                        format!(
                            "this connection has {waiting} requests the daemon has not handled yet (limit {}, --max-requests-in-flight); wait for their answers before sending more",
                            self.config.max_in_flight
                        ),
                    )
                    .with_reference(envelope.id)
                    .with_location(self.here(None)),
                );
                continue;
            }
            let in_flight = InFlight::count(&self.in_flight);
            // Room in the queue first, then the event: the wait does not carry the event
            // (`Sender::send` would, and the task would reserve space for it).
            match events.reserve().await {
                Ok(permit) => permit.send(DaemonEvent::Received {
                    conn_id,
                    envelope,
                    in_flight,
                }),
                Err(_) => return "daemon stopping".into(),
            }
        }
    }

    /// Reads lines until the hello, checks it and reports the greeted peer; `Err` says why
    /// the connection ends instead.
    async fn handshake(
        &mut self,
        conn_id: ConnId,
        events: &mpsc::Sender<DaemonEvent>,
    ) -> Result<(Role, u32), String> {
        let handshake_deadline = tokio::time::sleep(self.config.handshake_timeout);
        tokio::pin!(handshake_deadline);
        loop {
            let step = tokio::select! {
                _ = &mut handshake_deadline => {
                    let seconds = self.config.handshake_timeout.as_secs_f64();
                    self.fail(ErrorMessage::new(ErrorCode::HandshakeTimeout, format!("no hello within {seconds} s of connecting")));
                    return Err("handshake timeout".into());
                }
                step = self.next() => step,
            };
            let envelope = match step {
                Step::Line(envelope) => envelope,
                Step::Answered => continue,
                Step::End(reason) => return Err(reason),
            };
            let id = envelope.id.clone();
            let Message::Hello(hello) = envelope.message else {
                self.fail(
                    ErrorMessage::new(
                        ErrorCode::HelloRequired,
                        format!(
                            "the first message must be hello, got {}; see docs/protocol.md",
                            envelope.message.type_name()
                        ),
                    )
                    .with_reference(id)
                    .with_location(self.here(None)),
                );
                return Err("message before hello".into());
            };
            match self.check_hello(&hello) {
                Ok(protocol) => {
                    let role = hello.role;
                    if events
                        .send(DaemonEvent::Greeted {
                            conn_id,
                            hello: Box::new(hello),
                            hello_id: id,
                            protocol,
                        })
                        .await
                        .is_err()
                    {
                        return Err("daemon stopping".into());
                    }
                    return Ok((role, protocol));
                }
                Err(error) => {
                    let code = error.code;
                    let record = RefusedHandshake {
                        at_ms: SystemClock.now_ms(),
                        code,
                        message: error.message.clone(),
                        client: Some(hello.client.clone()),
                        product: hello.ide.as_ref().map(|ide| ide.product.clone()),
                        protocol: Some(hello.protocol),
                        peer_pid: self.peer_pid,
                    };
                    tracing::warn!(conn_id, %code, message = %error.message, client = %hello.client.name, "refused a hello");
                    self.fail(error.with_reference(id));
                    let _ = events
                        .send(DaemonEvent::HandshakeRefused {
                            record: Box::new(record),
                        })
                        .await;
                    return Err(format!("handshake refused ({code})"));
                }
            }
        }
    }

    /// Reads and decodes the next line, answering bad ones.
    async fn next(&mut self) -> Step {
        let frame = tokio::select! {
            _ = self.close.cancelled() => return Step::End("closed by the daemon".into()),
            frame = self.frames.next() => frame,
        };
        let line = match frame {
            None => return Step::End("peer closed the connection".into()),
            Some(Err(FrameError::LineTooLong { limit })) => {
                self.line_number += 1;
                self.fail(
                    ErrorMessage::new(
                        ErrorCode::LineTooLong,
                        format!(
                            "line {} is longer than the limit of {limit} bytes; closing",
                            self.line_number
                        ),
                    )
                    .with_location(self.here(None)),
                );
                return Step::End("line too long".into());
            }
            Some(Err(FrameError::Io(err))) => return Step::End(format!("read error: {err}")),
            Some(Ok(line)) => line,
        };
        let buffer = self.frames.read_buffer_mut();
        if buffer.is_empty() && buffer.capacity() > READ_BUFFER_KEPT_BYTES {
            *buffer = BytesMut::with_capacity(READ_BUFFER_BYTES);
        }
        self.line_number += 1;
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            return Step::Answered;
        }
        match decode_line(&line) {
            Ok(envelope) => {
                self.malformed_in_a_row = 0;
                Step::Line(Box::new(envelope))
            }
            Err(err) => {
                let error = err.to_error_message(self.line_number);
                if error.code != ErrorCode::Malformed {
                    self.malformed_in_a_row = 0;
                    self.answer(error);
                    return Step::Answered;
                }
                self.malformed_in_a_row += 1;
                if self.malformed_in_a_row >= self.config.malformed_limit {
                    let mut error = error;
                    error.message = format!(
                        "{}; {} malformed lines in a row, closing",
                        error.message, self.malformed_in_a_row
                    );
                    self.fail(error);
                    return Step::End("too many malformed lines".into());
                }
                self.answer(error);
                Step::Answered
            }
        }
    }

    fn check_hello(&self, hello: &Hello) -> Result<u32, ErrorMessage> {
        if hello.role == Role::Plugin {
            let missing = match (&hello.ide, &hello.window) {
                (None, _) => Some("ide"),
                (_, None) => Some("window"),
                _ => None,
            };
            if let Some(field) = missing {
                return Err(ErrorMessage::new(
                    ErrorCode::InvalidHello,
                    format!("a plugin's hello must carry `{field}`"),
                )
                .with_location(self.here(Some(field))));
            }
        }
        negotiate(supported_versions(), hello.protocol).map_err(|err| {
            let mut error = ErrorMessage::new(ErrorCode::VersionMismatch, err.to_string())
                .with_location(self.here(Some("protocol")));
            error.supported = Some(supported_versions());
            error
        })
    }

    fn here(&self, field: Option<&str>) -> Location {
        Location {
            line: Some(self.line_number),
            column: None,
            field: field.map(str::to_string),
        }
    }

    /// Sends an error and keeps the connection.
    fn answer(&self, error: ErrorMessage) {
        let _ = self
            .outbound
            .try_send(encode(&Envelope::new(Message::Error(error))));
    }

    /// Sends an error and closes the connection once it is written.
    fn fail(&self, error: ErrorMessage) {
        self.answer(error);
        self.close.cancel();
    }
}

/// Whether a line is a controller's request, which the in-flight limit may refuse (never a
/// plugin's acks and events, which report work the daemon asked for, nor pings and `bye`).
fn is_request(role: Role, type_name: &str) -> bool {
    role == Role::Controller && !matches!(type_name, "ping" | "pong" | "bye" | "error")
}

/// Which message types each role may send to the daemon.
pub fn role_may_send(role: Role, type_name: &str) -> bool {
    match type_name {
        "ping" | "pong" | "bye" | "error" => true,
        "ack" | "event" | "terminals" | "capabilities" | "terminal.io.result"
        | "clipboard.result" => role == Role::Plugin,
        "status" | "sessions.list" | "drives.list" | "chats.list" | "chat.read" | "chat.audit"
        | "observe.report" | "journal.verify" | "drive.create" | "drive.get" | "drive.cancel"
        | "events.subscribe" | "recovery.run" => role == Role::Controller,
        _ => false,
    }
}

/// Lines already queued for a peer are coalesced into writes of up to this many bytes.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// `first` and the lines queued behind it, up to [`WRITE_BATCH_BYTES`], as one buffer.
fn batch(first: Bytes, outbound: &mut mpsc::Receiver<Bytes>) -> Bytes {
    let Ok(second) = outbound.try_recv() else {
        return first;
    };
    let mut batch = BytesMut::with_capacity(first.len() + second.len());
    batch.extend_from_slice(&first);
    batch.extend_from_slice(&second);
    while batch.len() < WRITE_BATCH_BYTES {
        match outbound.try_recv() {
            Ok(next) => batch.extend_from_slice(&next),
            Err(_) => break,
        }
    }
    batch.freeze()
}

async fn write_loop(
    mut write_half: OwnedWriteHalf,
    mut outbound: mpsc::Receiver<Bytes>,
    close: CancellationToken,
    config: Arc<ConnectionConfig>,
    conn_id: ConnId,
) {
    loop {
        tokio::select! {
            biased;
            line = outbound.recv() => {
                let Some(line) = line else { break };
                // Everything already queued goes out in one write: a drive's reply and its
                // first events are produced together.
                let batch = batch(line, &mut outbound);
                match tokio::time::timeout(config.write_timeout, write_half.write_all(&batch)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => {
                        tracing::debug!(conn_id, error = %err, "write failed");
                        close.cancel();
                        return;
                    }
                    Err(_) => {
                        tracing::warn!(conn_id, timeout_ms = config.write_timeout.as_millis() as u64, "disconnecting a peer that stopped reading");
                        close.cancel();
                        return;
                    }
                }
            }
            _ = close.cancelled() => break,
        }
    }
    // Closing: flush what was queued before the close (a final error, a bye), within a bound.
    let flush = async {
        while let Ok(line) = outbound.try_recv() {
            if write_half.write_all(&line).await.is_err() {
                return;
            }
        }
        let _ = write_half.shutdown().await;
    };
    let _ = tokio::time::timeout(config.close_flush_timeout, flush).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_may_send_only_their_own_messages() {
        assert!(role_may_send(Role::Plugin, "ack"));
        assert!(!role_may_send(Role::Plugin, "drive.create"));
        assert!(role_may_send(Role::Controller, "drive.create"));
        assert!(!role_may_send(Role::Controller, "ack"));
        for daemon_only in ["welcome", "drive", "cancel", "stream", "drive.result"] {
            assert!(!role_may_send(Role::Plugin, daemon_only));
            assert!(!role_may_send(Role::Controller, daemon_only));
        }
        for both in ["ping", "pong", "bye", "error"] {
            assert!(role_may_send(Role::Plugin, both) && role_may_send(Role::Controller, both));
        }
    }
}

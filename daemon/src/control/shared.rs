//! One kept connection to a daemon shared by concurrent callers (`koru mcp --host …`: one ssh connection per host for the server's life): requests matched to replies by id, the daemon's events fanned out to every follower, and a `HostLink` that reconnects with a growing pause when the connection is lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use koru_protocol::{encode_line, DriveInfo, Envelope, Message, RequestId, StreamItem};
use tokio::io::AsyncWriteExt;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::hosts::Host;
use super::requests::typed_requests;
use super::{Client, ClientError, EventSource, Incoming};

/// Events kept for a follower that has not read them yet; one slower than that gets
/// [`Incoming::Lagged`] and asks for its drive again.
const EVENT_BUFFER: usize = 1024;
/// Lines queued for the writer.
const OUTGOING_QUEUE: usize = 256;
/// The first pause before reconnecting to a host that failed, doubled per failure.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest pause before reconnecting.
const LONGEST_RETRY: Duration = Duration::from_secs(30);

/// Replies waited for, by request id; `None` once the connection closed (and why).
type Pending = Mutex<Result<HashMap<i64, oneshot::Sender<Result<Message, ClientError>>>, Closed>>;

/// Why a shared connection closed, kept to tell every later caller.
#[derive(Debug, Clone)]
enum Closed {
    /// The daemon closed it.
    ByDaemon,
    /// The transport failed (ssh lost its connection): host and what was said.
    Unreachable { host: String, said: String },
}

impl Closed {
    fn error(&self) -> ClientError {
        match self {
            Closed::ByDaemon => ClientError::Closed,
            Closed::Unreachable { host, said } => ClientError::Unreachable {
                host: host.clone(),
                said: said.clone(),
            },
        }
    }
}

/// A greeted, subscribed connection many callers use at once; cheap to clone.
#[derive(Clone)]
pub struct SharedClient {
    inner: Arc<Inner>,
}

struct Inner {
    outgoing: mpsc::Sender<bytes::Bytes>,
    pending: Pending,
    next_id: AtomicI64,
    /// Taken when the connection closes, so that followers see the end.
    events: Mutex<Option<broadcast::Sender<StreamItem>>>,
}

impl SharedClient {
    /// Subscribes `client` to the daemon's events and hands it to a reader and a writer task.
    pub async fn start(mut client: Client) -> Result<SharedClient, ClientError> {
        client.subscribe().await?;
        let (outgoing, mut to_write) = mpsc::channel::<bytes::Bytes>(OUTGOING_QUEUE);
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let inner = Arc::new(Inner {
            outgoing: outgoing.clone(),
            pending: Mutex::new(Ok(HashMap::new())),
            next_id: AtomicI64::new(client.next_id + 1),
            events: Mutex::new(Some(events)),
        });
        let (reader_ended, mut writer_stop) = oneshot::channel::<()>();
        let Client {
            mut frames,
            mut writer,
            link,
            pending: early,
            ..
        } = client;
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    line = to_write.recv() => line,
                    _ = &mut writer_stop => None,
                };
                let Some(line) = line else { break };
                if writer.write_all(&line).await.is_err() {
                    break;
                }
            }
            // The pipe or socket closes with the last handle: the far side ends.
            let _ = writer.shutdown().await;
        });
        let reader_inner = inner.clone();
        tokio::spawn(async move {
            let inner = reader_inner;
            for envelope in early {
                dispatch(&inner, envelope, &outgoing).await;
            }
            loop {
                let envelope = match frames.next().await {
                    Some(Ok(frame)) => match koru_protocol::decode_line(&frame) {
                        Ok(envelope) => envelope,
                        // A line this client cannot read: skip it, as `Client` would fail
                        // only the request it was waiting for.
                        Err(error) => {
                            tracing::warn!(%error, "a line from the daemon could not be read");
                            continue;
                        }
                    },
                    Some(Err(_)) | None => break,
                };
                dispatch(&inner, envelope, &outgoing).await;
            }
            let closed = match link {
                Some(mut link) => match link.failure().await {
                    Some(ClientError::Unreachable { host, said }) => {
                        Closed::Unreachable { host, said }
                    }
                    _ => Closed::ByDaemon,
                },
                None => Closed::ByDaemon,
            };
            let waiting = std::mem::replace(
                &mut *inner.pending.lock().unwrap_or_else(|e| e.into_inner()),
                Err(closed.clone()),
            );
            if let Ok(waiting) = waiting {
                for (_, reply) in waiting {
                    let _ = reply.send(Err(closed.error()));
                }
            }
            // Followers see the end once the sender is gone; the writer stops.
            drop(
                inner
                    .events
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
            let _ = reader_ended.send(());
        });
        Ok(SharedClient { inner })
    }

    /// Whether the connection has closed (a caller should get a new one).
    pub fn is_closed(&self) -> bool {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_err()
    }

    /// Sends a request and waits for its reply; other callers' requests go on meanwhile.
    pub async fn request(&mut self, message: Message) -> Result<Message, ClientError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        {
            let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pending.as_mut() {
                Ok(pending) => {
                    pending.insert(id, reply);
                }
                Err(closed) => return Err(closed.error()),
            }
        }
        let line = encode_line(&Envelope::with_id(Some(RequestId::Number(id)), message));
        if self.inner.outgoing.send(line.into()).await.is_err() {
            self.forget(id);
            return Err(self.closed_error());
        }
        match answer.await {
            Ok(result) => result,
            Err(_) => Err(self.closed_error()),
        }
    }

    typed_requests!();

    /// The daemon's events from now on (the connection is subscribed once, at its start).
    pub fn events(&self) -> SharedEvents {
        let events = match &*self.inner.events.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(sender) => sender.subscribe(),
            // Closed already: a stream that has ended.
            None => broadcast::channel(1).1,
        };
        SharedEvents {
            client: self.clone(),
            events,
        }
    }

    fn forget(&self, id: i64) {
        if let Ok(pending) = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            pending.remove(&id);
        }
    }

    fn closed_error(&self) -> ClientError {
        match &*self.inner.pending.lock().unwrap_or_else(|e| e.into_inner()) {
            Err(closed) => closed.error(),
            Ok(_) => ClientError::Closed,
        }
    }
}

/// Hands one line from the daemon to whoever waits for it.
async fn dispatch(inner: &Inner, envelope: Envelope, outgoing: &mpsc::Sender<bytes::Bytes>) {
    let reply_to = match (&envelope.message, &envelope.id) {
        (Message::Ping {}, _) => {
            let pong = encode_line(&Envelope::with_id(envelope.id.clone(), Message::Pong {}));
            let _ = outgoing.send(pong.into()).await;
            return;
        }
        (Message::Stream(item), _) => {
            // Nobody following is fine: the event is for whoever is.
            if let Some(events) = &*inner.events.lock().unwrap_or_else(|e| e.into_inner()) {
                let _ = events.send(item.clone());
            }
            return;
        }
        (Message::Error(error), id) => error.reference.clone().or_else(|| id.clone()),
        (_, id) => id.clone(),
    };
    let Some(RequestId::Number(id)) = reply_to else {
        tracing::debug!(
            message = envelope.message.type_name(),
            "a line from the daemon that answers no request"
        );
        return;
    };
    let waiting = match inner
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
    {
        Ok(pending) => pending.remove(&id),
        Err(_) => None,
    };
    if let Some(reply) = waiting {
        let result = match envelope.message {
            Message::Error(error) => Err(ClientError::Refused(error)),
            message => Ok(message),
        };
        let _ = reply.send(result);
    }
}

/// One follower's view of a shared connection's events.
pub struct SharedEvents {
    client: SharedClient,
    events: broadcast::Receiver<StreamItem>,
}

impl EventSource for SharedEvents {
    async fn next_event(&mut self) -> Result<Option<Incoming>, ClientError> {
        match self.events.recv().await {
            Ok(item) => Ok(Some(Incoming::Event(Box::new(item.event)))),
            Err(broadcast::error::RecvError::Lagged(_)) => Ok(Some(Incoming::Lagged)),
            Err(broadcast::error::RecvError::Closed) => Ok(None),
        }
    }

    async fn drive_now(&mut self, drive_id: String) -> Result<DriveInfo, ClientError> {
        self.client.get_drive(drive_id).await
    }

    async fn ended(&mut self) -> ClientError {
        self.client.closed_error()
    }
}

/// A host and its kept connection: [`HostLink::client`] hands out the connection while it
/// lives, and after it is lost connects again — at once the first time, then no sooner
/// than a pause that doubles with each failure (1 s up to 30 s), failing fast in between
/// with the last reason.
pub struct HostLink {
    host: Host,
    client_name: &'static str,
    state: tokio::sync::Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    current: Option<SharedClient>,
    failures: u32,
    retry_at: Option<tokio::time::Instant>,
    /// What the last failed attempt said, repeated while the pause runs.
    last_error: Option<String>,
}

impl HostLink {
    pub fn new(host: Host, client_name: &'static str) -> HostLink {
        HostLink {
            host,
            client_name,
            state: tokio::sync::Mutex::new(LinkState::default()),
        }
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The kept connection, connecting (once, for every caller waiting) when there is none.
    pub async fn client(&self) -> Result<SharedClient, ClientError> {
        let mut state = self.state.lock().await;
        if let Some(current) = &state.current {
            if !current.is_closed() {
                return Ok(current.clone());
            }
            state.current = None;
        }
        if let (Some(at), Some(said)) = (state.retry_at, &state.last_error) {
            let now = tokio::time::Instant::now();
            if now < at {
                let wait = (at - now).as_secs_f64().ceil();
                return Err(ClientError::Unreachable {
                    host: self.host.name.clone(),
                    said: format!("{said} (next try in {wait:.0} s)"),
                });
            }
        }
        let connected = match self.host.connect(self.client_name).await {
            Ok(client) => SharedClient::start(client).await,
            Err(error) => Err(error),
        };
        match connected {
            Ok(client) => {
                *state = LinkState {
                    current: Some(client.clone()),
                    ..LinkState::default()
                };
                Ok(client)
            }
            Err(error) => {
                state.failures += 1;
                let pause = FIRST_RETRY
                    .saturating_mul(1 << (state.failures - 1).min(5))
                    .min(LONGEST_RETRY);
                state.retry_at = Some(tokio::time::Instant::now() + pause);
                state.last_error = Some(match &error {
                    ClientError::Unreachable { said, .. } => said.clone(),
                    other => other.to_string(),
                });
                Err(error)
            }
        }
    }
}

/// A controller's connection for one tool call: a fresh [`Client`] (this machine's daemon
/// asked the way `koru mcp` always has: one connection per call) or a handle on a host's
/// kept [`SharedClient`].
pub enum Conn {
    Fresh(Client),
    Shared {
        client: SharedClient,
        events: Option<SharedEvents>,
    },
}

impl Conn {
    pub async fn request(&mut self, message: Message) -> Result<Message, ClientError> {
        match self {
            Conn::Fresh(client) => client.request(message).await,
            Conn::Shared { client, .. } => client.request(message).await,
        }
    }

    typed_requests!();

    /// From now on the connection carries the daemon's events to this caller.
    pub async fn subscribe(&mut self) -> Result<(), ClientError> {
        match self {
            Conn::Fresh(client) => client.subscribe().await,
            Conn::Shared { client, events } => {
                *events = Some(client.events());
                Ok(())
            }
        }
    }

    /// Closes a fresh connection; a shared one stays for the next call.
    pub async fn close(self) {
        if let Conn::Fresh(client) = self {
            client.close().await;
        }
    }
}

impl EventSource for Conn {
    async fn next_event(&mut self) -> Result<Option<Incoming>, ClientError> {
        match self {
            Conn::Fresh(client) => client.next_event().await,
            Conn::Shared {
                events: Some(events),
                ..
            } => events.next_event().await,
            Conn::Shared { events: None, .. } => Err(ClientError::Unexpected(
                "events read before subscribing".into(),
            )),
        }
    }

    async fn drive_now(&mut self, drive_id: String) -> Result<DriveInfo, ClientError> {
        self.get_drive(drive_id).await
    }

    async fn ended(&mut self) -> ClientError {
        match self {
            Conn::Fresh(client) => client.ended().await,
            Conn::Shared { client, .. } => client.closed_error(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::{decode_line, StreamEvent};
    use tokio::io::{AsyncBufReadExt, BufReader};

    /// A daemon stand-in on an in-memory pipe: welcomes, answers `status` after
    /// `delay_first` for the first one (so a second request overtakes it), publishes one
    /// event after `events.subscribe`, pings once.
    async fn shared_over_pipe() -> SharedClient {
        let (client_side, daemon_side) = tokio::io::duplex(64 * 1024);
        let (daemon_read, mut daemon_write) = tokio::io::split(daemon_side);
        tokio::spawn(async move {
            let mut lines = BufReader::new(daemon_read).lines();
            let mut statuses = 0;
            let (delayed_tx, mut delayed_rx) = mpsc::channel::<Vec<u8>>(4);
            loop {
                let line = tokio::select! {
                    line = lines.next_line() => line,
                    Some(late) = delayed_rx.recv() => {
                        daemon_write.write_all(&late).await.unwrap();
                        continue;
                    }
                };
                let Ok(Some(line)) = line else { break };
                let request = decode_line(line.as_bytes()).unwrap();
                let reply = match &request.message {
                    Message::Hello(_) => Message::welcome(1, "c_1".into(), 10_000, 1 << 20),
                    Message::EventsSubscribe {} => {
                        let ping = encode_line(&Envelope::with_id(
                            Some(RequestId::Text("p".into())),
                            Message::Ping {},
                        ));
                        daemon_write.write_all(&ping).await.unwrap();
                        Message::EventsSubscribed {}
                    }
                    Message::Status {} => {
                        statuses += 1;
                        if statuses == 1 {
                            let mut refusal = koru_protocol::ErrorMessage::new(
                                koru_protocol::ErrorCode::Internal,
                                "the first, answered last",
                            );
                            refusal.reference = request.id.clone();
                            let late =
                                encode_line(&Envelope::with_id(None, Message::Error(refusal)));
                            let delayed = delayed_tx.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                let _ = delayed.send(late).await;
                            });
                            continue;
                        }
                        Message::EventsSubscribed {}
                    }
                    Message::Pong {} => {
                        let event = Message::Stream(StreamItem {
                            seq: 1,
                            event: StreamEvent::Unknown,
                        });
                        let line = encode_line(&Envelope::with_id(None, event));
                        daemon_write.write_all(&line).await.unwrap();
                        continue;
                    }
                    _ => continue,
                };
                let line = encode_line(&Envelope::with_id(request.id, reply));
                daemon_write.write_all(&line).await.unwrap();
            }
        });
        let (read, write) = tokio::io::split(client_side);
        let client = Client::handshake(
            Box::new(read),
            Box::new(write),
            None,
            super::super::controller_hello("test"),
        )
        .await
        .unwrap();
        SharedClient::start(client).await.unwrap()
    }

    #[tokio::test]
    async fn concurrent_requests_get_their_own_replies_and_events_reach_followers() {
        let shared = shared_over_pipe().await;
        let mut events = shared.events();
        let (mut first, mut second) = (shared.clone(), shared.clone());
        let (slow, fast) = tokio::join!(first.request(Message::Status {}), async {
            // Sent after the first, answered before it.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let answer = second.request(Message::Status {}).await;
            (answer, tokio::time::Instant::now())
        });
        let refused = slow.unwrap_err();
        assert_eq!(refused.to_string(), "internal: the first, answered last");
        assert!(
            matches!(fast.0, Ok(Message::EventsSubscribed {})),
            "{:?}",
            fast.0
        );
        // The ping was answered, and the daemon's event that followed the pong arrived.
        let event = tokio::time::timeout(Duration::from_secs(2), events.next_event())
            .await
            .expect("the event arrives")
            .unwrap();
        assert!(
            matches!(&event, Some(Incoming::Event(event)) if **event == StreamEvent::Unknown),
            "{event:?}"
        );
        assert!(!shared.is_closed());
    }

    #[tokio::test]
    async fn a_closed_connection_fails_waiting_and_later_requests_and_ends_followers() {
        let (client_side, daemon_side) = tokio::io::duplex(64 * 1024);
        let (daemon_read, mut daemon_write) = tokio::io::split(daemon_side);
        let daemon = tokio::spawn(async move {
            let mut lines = BufReader::new(daemon_read).lines();
            // Welcome, confirm the subscription, then hang up on the next request.
            for _ in 0..3 {
                let line = lines.next_line().await.unwrap().unwrap();
                let request = decode_line(line.as_bytes()).unwrap();
                let reply = match request.message {
                    Message::Hello(_) => Message::welcome(1, "c_1".into(), 10_000, 1 << 20),
                    Message::EventsSubscribe {} => Message::EventsSubscribed {},
                    _ => return,
                };
                let line = encode_line(&Envelope::with_id(request.id, reply));
                daemon_write.write_all(&line).await.unwrap();
            }
        });
        let (read, write) = tokio::io::split(client_side);
        let client = Client::handshake(
            Box::new(read),
            Box::new(write),
            None,
            super::super::controller_hello("test"),
        )
        .await
        .unwrap();
        let mut shared = SharedClient::start(client).await.unwrap();
        let mut events = shared.events();
        let waiting = shared.request(Message::Status {}).await;
        daemon.await.unwrap();
        assert!(matches!(waiting, Err(ClientError::Closed)), "{waiting:?}");
        assert!(shared.is_closed());
        assert!(matches!(
            shared.request(Message::Status {}).await,
            Err(ClientError::Closed)
        ));
        assert!(matches!(events.next_event().await, Ok(None)));
    }
}

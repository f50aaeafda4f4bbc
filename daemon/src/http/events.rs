//! Live events over HTTP: one hub per server subscribes to the daemon's event stream (reconnecting when it drops), keeps the last events in a ring buffer for resumption, fans them out to Server-Sent-Events and WebSocket clients, and says `reset` when a client missed some.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aide::generate::GenContext;
use aide::openapi::{
    MediaType, Operation, Response as OpenApiResponse, SchemaObject, StatusCode as OpenApiStatus,
};
use aide::OperationOutput;
use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use koru_protocol::{Message, StreamItem};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::errors::ApiError;
use super::AppState;
use crate::control::{controller_hello, Client};

/// How many events the hub keeps for clients that reconnect.
pub const DEFAULT_BUFFER: usize = 1024;
/// How often an idle SSE stream carries a `: keep-alive` comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The controller name of the hub's connection to the daemon.
const HUB_CLIENT_NAME: &str = "http-events";

/// What a client is sent: a daemon event, or word that it missed some.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    Item(Arc<StreamItem>),
    Reset(Arc<str>),
}

impl Outgoing {
    /// The event's `kind` (`reset` for a gap).
    pub fn kind(&self) -> String {
        match self {
            Outgoing::Item(item) => serde_json::to_value(&item.event)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
                .unwrap_or_else(|| "unknown".into()),
            Outgoing::Reset(_) => "reset".into(),
        }
    }

    /// The WebSocket message: `{"seq":42,"event":{…}}`, or `{"seq":null,"event":{"kind":"reset",…}}`.
    pub fn to_ws_json(&self) -> String {
        match self {
            Outgoing::Item(item) => serde_json::to_string(item.as_ref()).unwrap_or_default(),
            Outgoing::Reset(reason) => {
                #[derive(serde::Serialize)]
                struct Reset<'a> {
                    kind: &'static str,
                    reason: &'a str,
                }
                #[derive(serde::Serialize)]
                struct Message<'a> {
                    seq: Option<u64>,
                    event: Reset<'a>,
                }
                serde_json::to_string(&Message {
                    seq: None,
                    event: Reset {
                        kind: "reset",
                        reason,
                    },
                })
                .unwrap_or_default()
            }
        }
    }

    /// The SSE event: `id` = seq, `event` = kind, `data` = the event's JSON.
    pub fn to_sse(&self) -> Event {
        match self {
            Outgoing::Item(item) => Event::default()
                .id(item.seq.to_string())
                .event(self.kind())
                .data(serde_json::to_string(&item.event).unwrap_or_default()),
            Outgoing::Reset(reason) => Event::default()
                .event("reset")
                .data(serde_json::json!({"reason": reason.as_ref()}).to_string()),
        }
    }
}

/// The ring buffer and what is known about its completeness. Pure, for tests.
#[derive(Debug)]
pub struct Ring {
    items: VecDeque<Arc<StreamItem>>,
    capacity: usize,
    /// Every event with `seq >= floor` up to the newest is in `items`; `None` until the
    /// first event after a (re)subscription, when nothing is known.
    floor: Option<u64>,
    newest: Option<u64>,
}

/// Where a client that has seen up to some event starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// These buffered events are newer than what it saw; none is missing.
    Replay(Vec<Arc<StreamItem>>),
    /// Some events it has not seen are gone: it must reload.
    Gap,
}

impl Ring {
    pub fn new(capacity: usize) -> Self {
        Ring {
            items: VecDeque::with_capacity(capacity.min(DEFAULT_BUFFER)),
            capacity: capacity.max(1),
            floor: None,
            newest: None,
        }
    }

    /// Adds an event, dropping the oldest past the capacity.
    pub fn push(&mut self, item: Arc<StreamItem>) {
        if self.floor.is_none() {
            self.floor = Some(item.seq);
        }
        self.newest = Some(item.seq);
        self.items.push_back(item);
        while self.items.len() > self.capacity {
            self.items.pop_front();
            self.floor = self.items.front().map(|i| i.seq);
        }
    }

    /// Forgets everything: the connection to the daemon was lost, events may be missing.
    pub fn clear(&mut self) {
        self.items.clear();
        self.floor = None;
    }

    /// What a client that saw every event up to `last_seen` gets first.
    pub fn resume(&self, last_seen: u64) -> Resume {
        match (self.floor, self.newest) {
            (Some(floor), Some(newest))
                if last_seen.saturating_add(1) >= floor && last_seen <= newest =>
            {
                Resume::Replay(
                    self.items
                        .iter()
                        .filter(|i| i.seq > last_seen)
                        .cloned()
                        .collect(),
                )
            }
            _ => Resume::Gap,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

struct HubState {
    ring: Ring,
    sender: broadcast::Sender<Outgoing>,
}

/// The hub: shared by every request of one HTTP server.
#[derive(Clone)]
pub struct EventsHub {
    state: Arc<Mutex<HubState>>,
}

impl EventsHub {
    /// A hub keeping `capacity` events; [`EventsHub::run`] feeds it.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.clamp(16, 4096));
        EventsHub {
            state: Arc::new(Mutex::new(HubState {
                ring: Ring::new(capacity),
                sender,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, item: StreamItem) {
        let item = Arc::new(item);
        let mut state = self.lock();
        state.ring.push(item.clone());
        let _ = state.sender.send(Outgoing::Item(item));
    }

    fn lost(&self, reason: &str) {
        let mut state = self.lock();
        state.ring.clear();
        let _ = state.sender.send(Outgoing::Reset(reason.into()));
    }

    /// Subscribes to the daemon at `socket` and feeds the hub until `shutdown`, connecting
    /// again (with a growing pause, at most 2 s) whenever the connection drops.
    pub async fn run(self, socket: PathBuf, shutdown: CancellationToken) {
        let mut pause = Duration::from_millis(50);
        let mut subscribed_before = false;
        loop {
            let connected = tokio::select! {
                _ = shutdown.cancelled() => return,
                connected = subscribe(&socket) => connected,
            };
            match connected {
                Ok(mut client) => {
                    if subscribed_before {
                        self.lost("the HTTP server lost its connection to the daemon and got it back; events in between are missing");
                    }
                    subscribed_before = true;
                    pause = Duration::from_millis(50);
                    loop {
                        let next = tokio::select! {
                            _ = shutdown.cancelled() => {
                                client.close().await;
                                return;
                            }
                            next = client.next() => next,
                        };
                        match next {
                            Ok(Some(envelope)) => {
                                if let Message::Stream(item) = envelope.message {
                                    self.publish(item);
                                }
                            }
                            Ok(None) => {
                                tracing::debug!("the daemon closed the event connection");
                                break;
                            }
                            Err(error) => {
                                tracing::warn!(%error, "the event connection to the daemon failed");
                                break;
                            }
                        }
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, "cannot subscribe to the daemon's events yet");
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// The events for one client: after `last_seen` (replayed from the buffer, or `reset`
    /// when some are gone), then live ones, until the hub stops.
    pub fn stream(&self, last_seen: Option<u64>) -> impl Stream<Item = Outgoing> + Send + 'static {
        let (receiver, first) = {
            let state = self.lock();
            // Subscribing and reading the buffer under one lock: no event is missed or doubled.
            let receiver = state.sender.subscribe();
            let first: Vec<Outgoing> = match last_seen.map(|seen| state.ring.resume(seen)) {
                None => Vec::new(),
                Some(Resume::Replay(items)) => items.into_iter().map(Outgoing::Item).collect(),
                Some(Resume::Gap) => vec![Outgoing::Reset(
                    format!(
                        "events after {} are no longer buffered; reload the state with the GET endpoints",
                        last_seen.unwrap_or_default()
                    )
                    .into(),
                )],
            };
            (receiver, first)
        };
        let live = futures::stream::unfold(receiver, |mut receiver| async move {
            let outgoing = match receiver.recv().await {
                Ok(outgoing) => outgoing,
                Err(broadcast::error::RecvError::Lagged(missed)) => Outgoing::Reset(
                    format!("this client fell behind and missed {missed} events; reload the state with the GET endpoints").into(),
                ),
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((outgoing, receiver))
        });
        futures::stream::iter(first).chain(live)
    }
}

async fn subscribe(socket: &std::path::Path) -> Result<Client, crate::control::ClientError> {
    let mut client = Client::connect(socket, controller_hello(HUB_CLIENT_NAME)).await?;
    client.subscribe().await?;
    Ok(client)
}

/// `?since=N` of the WebSocket stream.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct Since {
    /// Resume after this event sequence number.
    pub since: Option<u64>,
}

/// The `Last-Event-ID` a reconnecting browser sends.
fn last_event_id(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A `text/event-stream` answer.
pub struct EventStream(Response);

impl IntoResponse for EventStream {
    fn into_response(self) -> Response {
        self.0
    }
}

impl OperationOutput for EventStream {
    type Inner = Infallible;

    fn operation_response(
        _ctx: &mut GenContext,
        _operation: &mut Operation,
    ) -> Option<OpenApiResponse> {
        Some(OpenApiResponse {
            description: "Server-Sent Events: `id` = the event's sequence number, `event` = its kind, `data` = the StreamEvent as JSON; `event: reset` when events were missed".into(),
            content: [(
                "text/event-stream".to_string(),
                MediaType {
                    schema: Some(SchemaObject {
                        json_schema: schemars::json_schema!({"type": "string"}),
                        example: None,
                        external_docs: None,
                    }),
                    ..Default::default()
                },
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        })
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<OpenApiStatus>, OpenApiResponse)> {
        Self::operation_response(ctx, operation)
            .map(|r| vec![(Some(OpenApiStatus::Code(200)), r)])
            .unwrap_or_default()
    }
}

/// `GET /api/v1/events`.
pub async fn sse(State(state): State<AppState>, headers: HeaderMap) -> EventStream {
    let stream = state
        .hub
        .stream(last_event_id(&headers))
        .map(|outgoing| Ok::<Event, Infallible>(outgoing.to_sse()))
        .take_until(state.shutdown.clone().cancelled_owned());
    let sse = Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"));
    let mut response = sse.into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    EventStream(response)
}

/// `GET /api/v1/events/ws`: the same stream over WebSocket; the upgrade must carry this
/// server's Origin (checked by the guard when present; required here).
pub async fn websocket(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(since): Query<Since>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    if headers.get(header::ORIGIN).is_none() {
        return Err(ApiError::forbidden(
            "a WebSocket upgrade must carry this server's Origin",
        ));
    }
    let stream = state.hub.stream(since.since);
    let shutdown = state.shutdown.clone();
    Ok(upgrade
        .on_upgrade(move |socket| pump(socket, stream, shutdown))
        .into_response())
}

async fn pump(
    mut socket: WebSocket,
    stream: impl Stream<Item = Outgoing> + Send + 'static,
    shutdown: CancellationToken,
) {
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = socket.send(WsMessage::Close(None)).await;
                return;
            }
            outgoing = stream.next() => {
                let Some(outgoing) = outgoing else {
                    let _ = socket.send(WsMessage::Close(None)).await;
                    return;
                };
                if socket.send(WsMessage::Text(outgoing.to_ws_json().into())).await.is_err() {
                    return;
                }
            }
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(WsMessage::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::StreamEvent;

    fn item(seq: u64) -> Arc<StreamItem> {
        Arc::new(StreamItem {
            seq,
            event: StreamEvent::SessionDisconnected {
                session_id: format!("s_{seq}"),
                reason: "test".into(),
            },
        })
    }

    fn seqs(resume: Resume) -> Option<Vec<u64>> {
        match resume {
            Resume::Replay(items) => Some(items.iter().map(|i| i.seq).collect()),
            Resume::Gap => None,
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_and_knows_what_it_can_replay() {
        let mut ring = Ring::new(3);
        assert!(ring.is_empty());
        assert_eq!(seqs(ring.resume(0)), None, "nothing known yet");
        for seq in 5..=9 {
            ring.push(item(seq));
        }
        assert_eq!(ring.len(), 3);
        assert_eq!(seqs(ring.resume(8)), Some(vec![9]));
        assert_eq!(seqs(ring.resume(6)), Some(vec![7, 8, 9]));
        assert_eq!(seqs(ring.resume(9)), Some(vec![]));
        assert_eq!(seqs(ring.resume(5)), None, "6 was dropped");
        assert_eq!(seqs(ring.resume(10)), None, "from another daemon run");
        ring.clear();
        assert_eq!(
            seqs(ring.resume(9)),
            None,
            "after a reconnection nothing is certain"
        );
        ring.push(item(12));
        assert_eq!(seqs(ring.resume(11)), Some(vec![12]));
        assert_eq!(seqs(ring.resume(9)), None);
    }

    #[tokio::test]
    async fn clients_get_the_replay_then_live_events_and_reset_on_a_gap() {
        let hub = EventsHub::new(2);
        for seq in 1..=3 {
            hub.publish(StreamItem {
                seq,
                event: item(seq).event.clone(),
            });
        }
        let mut resumed = Box::pin(hub.stream(Some(2)));
        let mut gap = Box::pin(hub.stream(Some(0)));
        let mut fresh = Box::pin(hub.stream(None));
        hub.publish(StreamItem {
            seq: 4,
            event: item(4).event.clone(),
        });
        let seq = |o: Option<Outgoing>| match o {
            Some(Outgoing::Item(item)) => Some(item.seq),
            _ => None,
        };
        assert_eq!(seq(resumed.next().await), Some(3));
        assert_eq!(seq(resumed.next().await), Some(4));
        assert!(matches!(gap.next().await, Some(Outgoing::Reset(_))));
        assert_eq!(seq(gap.next().await), Some(4));
        assert_eq!(seq(fresh.next().await), Some(4));
        hub.lost("test");
        assert_eq!(
            fresh.next().await.map(|o| o.kind()),
            Some("reset".to_string())
        );
    }

    #[test]
    fn events_render_as_sse_and_websocket_messages() {
        let outgoing = Outgoing::Item(item(42));
        assert_eq!(outgoing.kind(), "session_disconnected");
        assert_eq!(
            outgoing.to_ws_json(),
            r#"{"seq":42,"event":{"kind":"session_disconnected","session_id":"s_42","reason":"test"}}"#
        );
        let reset = Outgoing::Reset("gone".into());
        assert_eq!(
            reset.to_ws_json(),
            r#"{"seq":null,"event":{"kind":"reset","reason":"gone"}}"#
        );
    }
}

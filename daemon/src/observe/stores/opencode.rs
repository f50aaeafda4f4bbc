//! opencode's event stream (`GET /event` of the server its TUI runs when started with `--port`) read as chat observations: a user text part → `prompt_seen`, the session busy or the assistant's text → `reply_started`, `session.idle` → `reply_completed` with the whole last text, `permission.asked`/`question.asked` → `needs_input`, `session.error` → `failed` (`cancelled` when aborted); and one follower per such server, for as long as a look finds it.
//!
//! Facts measured against opencode 1.18.33: events arrive as SSE `data:` lines, each
//! `{"type", "properties"}`; a user message is `message.updated` with `info.role: "user"`,
//! its text in `message.part.updated` (`part.type: "text"`), sent again when the message
//! changes; the turn's state is `session.status` (`busy`, `retry`, `idle`) and `session.idle`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use koru_protocol::{NeedsInputKind, ObservationBasis, ObservedKind};
use serde_json::Value;

use crate::observe::{ChatTurns, Observation, ParseError, Turn};

/// The store id of what opencode's server reports (registry interface `opencode_server_events`).
pub const STORE: &str = "opencode_server_events";

/// Turns opencode's events into chat observations (store [`STORE`], chat = session id).
#[derive(Debug)]
pub struct EventReader {
    /// The agent's folder, for sessions whose own event has not named theirs yet.
    folder: String,
    chats: HashMap<String, ChatTurns>,
    /// Message id → role, from `message.updated`.
    roles: HashMap<String, String>,
    /// Text parts of messages whose role is not known yet.
    waiting_parts: HashMap<String, Vec<(String, String)>>,
    /// User text parts already reported (opencode sends a part again when it changes).
    prompted_parts: HashSet<String>,
}

impl EventReader {
    pub fn new(folder: String) -> Self {
        EventReader {
            folder,
            chats: HashMap::new(),
            roles: HashMap::new(),
            waiting_parts: HashMap::new(),
            prompted_parts: HashSet::new(),
        }
    }

    fn chat(&mut self, session: &str) -> &mut ChatTurns {
        let folder = &self.folder;
        self.chats.entry(session.to_string()).or_insert_with(|| {
            let mut turns = ChatTurns::new(session);
            turns.ends_recorded = true;
            turns.workspace = (!folder.is_empty()).then(|| folder.clone());
            turns
        })
    }

    /// One event (the JSON of a `data:` line).
    pub fn feed(&mut self, data: &str) -> Result<Vec<Observation>, ParseError> {
        let event: Value =
            serde_json::from_str(data).map_err(|e| ParseError::NotJson(e.to_string()))?;
        let kind = event["type"]
            .as_str()
            .ok_or_else(|| ParseError::Shape("an event without `type`".into()))?;
        let properties = &event["properties"];
        let mut out = Vec::new();
        let Some(session) = properties["sessionID"].as_str().map(str::to_string) else {
            return Ok(out);
        };
        let stamp = properties["time"].as_u64();
        match kind {
            "session.created" | "session.updated" => {
                let directory = properties["info"]["directory"].as_str().map(str::to_string);
                let chat = self.chat(&session);
                if let Some(directory) = directory {
                    chat.workspace = Some(directory);
                }
                chat.see(&mut out);
            }
            "message.updated" => {
                let info = &properties["info"];
                if let (Some(id), Some(role)) = (info["id"].as_str(), info["role"].as_str()) {
                    self.roles.insert(id.to_string(), role.to_string());
                    if role == "user" {
                        for (part, text) in self.waiting_parts.remove(id).unwrap_or_default() {
                            self.user_text(&session, &part, &text, stamp, &mut out);
                        }
                    }
                }
            }
            "message.part.updated" => {
                let part = &properties["part"];
                if part["type"].as_str() != Some("text")
                    || part["synthetic"].as_bool() == Some(true)
                {
                    return Ok(out);
                }
                let (Some(message), Some(part_id), Some(text)) = (
                    part["messageID"].as_str(),
                    part["id"].as_str(),
                    part["text"].as_str(),
                ) else {
                    return Ok(out);
                };
                match self.roles.get(message).map(String::as_str) {
                    Some("user") => self.user_text(&session, part_id, text, stamp, &mut out),
                    Some(_) => {
                        let chat = self.chat(&session);
                        chat.see(&mut out);
                        chat.answering(&mut out, false);
                        if !text.is_empty() {
                            chat.set_reply(text);
                            chat.reply_ready = true;
                        }
                    }
                    None => self
                        .waiting_parts
                        .entry(message.to_string())
                        .or_default()
                        .push((part_id.to_string(), text.to_string())),
                }
            }
            "session.status" => {
                let busy = matches!(
                    properties["status"]["type"].as_str(),
                    Some("busy" | "retry")
                );
                let chat = self.chat(&session);
                if busy && chat.turn == Turn::Prompted {
                    chat.see(&mut out);
                    chat.answering(&mut out, false);
                }
            }
            "session.idle" => {
                let chat = self.chat(&session);
                if chat.turn != Turn::Idle {
                    chat.complete(&mut out, ObservationBasis::Explicit);
                }
            }
            "permission.asked" | "question.asked" => {
                let input = if kind == "permission.asked" {
                    NeedsInputKind::Permission
                } else {
                    NeedsInputKind::Question
                };
                let chat = self.chat(&session);
                chat.see(&mut out);
                chat.emit(
                    &mut out,
                    ObservationBasis::Explicit,
                    ObservedKind::NeedsInput { input },
                );
            }
            "permission.replied" | "question.replied" | "question.rejected" => {
                let chat = self.chat(&session);
                if chat.turn != Turn::Idle {
                    chat.emit(
                        &mut out,
                        ObservationBasis::Explicit,
                        ObservedKind::ReplyStarted,
                    );
                }
            }
            "session.error" => {
                let error = &properties["error"];
                let reason = error["data"]["message"]
                    .as_str()
                    .or_else(|| error["name"].as_str())
                    .unwrap_or("opencode reported an error")
                    .to_string();
                let chat = self.chat(&session);
                if error["name"].as_str() == Some("MessageAbortedError") {
                    chat.cancel(&mut out);
                } else {
                    chat.fail(&mut out, &reason);
                }
            }
            _ => {}
        }
        Ok(out)
    }

    fn user_text(
        &mut self,
        session: &str,
        part: &str,
        text: &str,
        stamp: Option<u64>,
        out: &mut Vec<Observation>,
    ) {
        if text.is_empty() || !self.prompted_parts.insert(part.to_string()) {
            return;
        }
        let chat = self.chat(session);
        if stamp.is_some() {
            chat.last_ts_ms = stamp;
        }
        chat.see(out);
        chat.prompt(out, text);
    }
}

/// An opencode server whose events are followed, and what its observations carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedServer {
    pub agent_id: String,
    pub address: SocketAddr,
    /// The agent's folder.
    pub folder: String,
    pub pid: u32,
    /// Its tmux server and pane (`None` in a kitty window).
    pub tmux_socket: Option<String>,
    pub tmux_pane: Option<String>,
    /// opencode's database (where its sessions are kept, read back by `read_chat`).
    pub database: std::path::PathBuf,
}

/// Follows one opencode server's events until `stop`, sending each batch of observations
/// to the daemon's loop; reconnects (1 s, then up to 5 s apart) until the look lets it go.
pub async fn follow<E>(
    server: FollowedServer,
    stop: tokio_util::sync::CancellationToken,
    events: tokio::sync::mpsc::Sender<E>,
) where
    E: From<crate::observe::watcher::ObserverReport> + Send + 'static,
{
    let client = crate::sse::loopback_client();
    let mut reader = EventReader::new(server.folder.clone());
    let mut backoff = Duration::from_secs(1);
    let events_url = format!("http://{}/event", server.address);
    let process = koru_protocol::AgentProcess {
        pid: Some(server.pid),
        tmux_socket: server.tmux_socket.clone(),
        tmux_pane: server.tmux_pane.clone(),
    };
    loop {
        let opened = tokio::select! {
            _ = stop.cancelled() => return,
            opened = crate::sse::EventStream::open(&client, &events_url) => opened,
        };
        match opened {
            Ok(mut stream) => {
                backoff = Duration::from_secs(1);
                loop {
                    let next = tokio::select! {
                        _ = stop.cancelled() => return,
                        next = stream.next_data() => next,
                    };
                    let data = match next {
                        Some(Ok(data)) => data,
                        Some(Err(error)) => {
                            tracing::debug!(%error, address = %server.address, "opencode event stream broke");
                            break;
                        }
                        None => break,
                    };
                    let observations = match reader.feed(&data) {
                        Ok(observations) => observations,
                        Err(error) => {
                            tracing::debug!(error = error.message(), "opencode event not read");
                            continue;
                        }
                    };
                    if observations.is_empty() {
                        continue;
                    }
                    let seen_at_ms = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
                    let batch = observations
                        .into_iter()
                        .map(|o| koru_protocol::ObservedEvent {
                            store: STORE.to_string(),
                            chat_id: o.chat_id,
                            workspace: o.workspace,
                            store_ts_ms: o.store_ts_ms,
                            seen_at_ms,
                            basis: o.basis,
                            process: Some(process.clone()),
                            event: o.event,
                        })
                        .collect();
                    let report = crate::observe::watcher::ObserverReport::Observed {
                        events: batch,
                        replay: false,
                        source: server.database.clone(),
                    };
                    if events.send(E::from(report)).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                tracing::debug!(%error, address = %server.address, "opencode event stream not open")
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Follows opencode servers' events off the daemon's loop (each batch of observations
/// comes back as an `ObserverReport`).
pub trait ServerFollowers: Send + Sync {
    /// Follows exactly these servers; one not named any more is let go.
    fn follow_only(&self, servers: Vec<FollowedServer>);
}

/// Follows for real, one tokio task per server.
pub struct SystemServerFollowers<E> {
    events: tokio::sync::mpsc::Sender<E>,
    followed:
        std::sync::Mutex<HashMap<String, (FollowedServer, tokio_util::sync::CancellationToken)>>,
    /// Stops every follower when the daemon stops.
    stop: tokio_util::sync::CancellationToken,
}

impl<E> SystemServerFollowers<E> {
    pub fn new(
        events: tokio::sync::mpsc::Sender<E>,
        stop: tokio_util::sync::CancellationToken,
    ) -> Self {
        SystemServerFollowers {
            events,
            followed: Default::default(),
            stop,
        }
    }
}

impl<E> ServerFollowers for SystemServerFollowers<E>
where
    E: From<crate::observe::watcher::ObserverReport> + Send + 'static,
{
    fn follow_only(&self, servers: Vec<FollowedServer>) {
        let Ok(mut followed) = self.followed.lock() else {
            return;
        };
        followed.retain(|agent_id, (server, stop)| {
            let keep = servers.iter().any(|s| s == server);
            if !keep {
                tracing::debug!(agent_id, address = %server.address, "no longer following opencode's events");
                stop.cancel();
            }
            keep
        });
        for server in servers {
            if followed.contains_key(&server.agent_id) {
                continue;
            }
            let stop = self.stop.child_token();
            tracing::info!(agent_id = %server.agent_id, address = %server.address, "following opencode's events");
            tokio::spawn(follow(server.clone(), stop.clone(), self.events.clone()));
            followed.insert(server.agent_id.clone(), (server, stop));
        }
    }
}

/// Followers for tests: records what it was asked to follow.
#[derive(Debug, Clone, Default)]
pub struct RecordingServerFollowers {
    pub followed: std::sync::Arc<std::sync::Mutex<Vec<FollowedServer>>>,
}

impl ServerFollowers for RecordingServerFollowers {
    fn follow_only(&self, servers: Vec<FollowedServer>) {
        if let Ok(mut followed) = self.followed.lock() {
            *followed = servers;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Events as opencode 1.18.33 sent them for one prompt posted through its TUI (trimmed
    /// to the fields read; a whole capture is in tests/corpus/opencode/).
    fn turn_events() -> Vec<String> {
        let s = "ses_1";
        vec![
            json!({"type": "server.connected", "properties": {}}),
            json!({"type": "session.created", "properties": {"sessionID": s, "info": {"id": s, "directory": "/w"}}}),
            json!({"type": "message.updated", "properties": {"sessionID": s, "info": {"id": "msg_u", "role": "user", "sessionID": s}}}),
            json!({"type": "message.part.updated", "properties": {"sessionID": s, "part": {"type": "text", "text": "hello\nthere ü", "messageID": "msg_u", "id": "prt_u"}, "time": 1796523067727u64}}),
            json!({"type": "session.status", "properties": {"sessionID": s, "status": {"type": "busy"}}}),
            json!({"type": "message.updated", "properties": {"sessionID": s, "info": {"id": "msg_a", "role": "assistant", "sessionID": s}}}),
            json!({"type": "message.part.updated", "properties": {"sessionID": s, "part": {"type": "text", "text": "", "messageID": "msg_a", "id": "prt_a"}}}),
            json!({"type": "message.part.delta", "properties": {"sessionID": s, "messageID": "msg_a", "partID": "prt_a", "field": "text", "delta": "You"}}),
            json!({"type": "message.part.updated", "properties": {"sessionID": s, "part": {"type": "text", "text": "You asked: hello.", "messageID": "msg_a", "id": "prt_a"}}}),
            // The user message is sent again when its summary is written: no second prompt.
            json!({"type": "message.updated", "properties": {"sessionID": s, "info": {"id": "msg_u", "role": "user", "sessionID": s}}}),
            json!({"type": "message.part.updated", "properties": {"sessionID": s, "part": {"type": "text", "text": "hello\nthere ü", "messageID": "msg_u", "id": "prt_u"}}}),
            json!({"type": "session.status", "properties": {"sessionID": s, "status": {"type": "idle"}}}),
            json!({"type": "session.idle", "properties": {"sessionID": s}}),
        ]
        .into_iter()
        .map(|v| v.to_string())
        .collect()
    }

    #[test]
    fn one_turn_reads_as_prompt_reply_and_end() {
        let mut reader = EventReader::new("/folder".into());
        let mut all = Vec::new();
        for event in turn_events() {
            all.extend(reader.feed(&event).unwrap());
        }
        assert_eq!(crate::observe::kinds(&all), crate::observe::A_WHOLE_TURN);
        assert!(all.iter().all(|o| o.chat_id == "ses_1"));
        assert_eq!(
            all[0].workspace.as_deref(),
            Some("/w"),
            "the session names its folder"
        );
        assert_eq!(
            all[1].event,
            ObservedKind::PromptSeen {
                excerpt: "hello there ü".into(),
                length: 13,
                digest: crate::observe::prompt_digest("hello\nthere ü"),
            }
        );
        assert_eq!(all[1].store_ts_ms, Some(1796523067727));
        assert_eq!(
            all[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: "You asked: hello.".into(),
                length: 17
            }
        );
    }

    #[test]
    fn the_captured_stream_of_two_real_turns_reads_as_two_whole_turns() {
        let capture = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/corpus/opencode/tui-turn.sse"),
        )
        .unwrap();
        let mut reader = EventReader::new("/tmp/oc/work".into());
        let mut all = Vec::new();
        for line in capture.lines() {
            if let Some(data) = line.strip_prefix("data:") {
                all.extend(reader.feed(data.trim_start()).unwrap());
            }
        }
        // A prompt through the TUI, then one posted to the session (`prompt_async`).
        assert_eq!(
            crate::observe::kinds(&all),
            [
                "chat_seen",
                "prompt_seen",
                "reply_started",
                "reply_completed",
                "prompt_seen",
                "reply_started",
                "reply_completed"
            ]
        );
        assert_eq!(
            all[4].event,
            ObservedKind::PromptSeen {
                excerpt: "second via api line two ü".into(),
                length: 25,
                digest: crate::observe::prompt_digest("second via api\nline two ü"),
            }
        );
        assert_eq!(
            all[1].event,
            ObservedKind::PromptSeen {
                excerpt: "hello from tui".into(),
                length: 14,
                digest: crate::observe::prompt_digest("hello from tui"),
            }
        );
        let reply = "You asked: hello from tui. This is the fake model's answer.";
        assert_eq!(
            all[3].event,
            ObservedKind::ReplyCompleted {
                excerpt: reply.into(),
                length: reply.chars().count()
            }
        );
    }

    #[test]
    fn a_part_before_its_message_waits_for_the_role_and_a_permission_asks_for_input() {
        let mut reader = EventReader::new("/folder".into());
        let part = json!({"type": "message.part.updated", "properties": {"sessionID": "s", "part": {"type": "text", "text": "hi", "messageID": "m", "id": "p"}}});
        assert!(reader.feed(&part.to_string()).unwrap().is_empty());
        let message = json!({"type": "message.updated", "properties": {"sessionID": "s", "info": {"id": "m", "role": "user"}}});
        let out = reader.feed(&message.to_string()).unwrap();
        assert_eq!(crate::observe::kinds(&out), ["chat_seen", "prompt_seen"]);
        assert_eq!(
            out[0].workspace.as_deref(),
            Some("/folder"),
            "the agent's folder until the session names one"
        );
        let asked = json!({"type": "permission.asked", "properties": {"id": "per_1", "sessionID": "s", "permission": "bash", "patterns": ["touch x"]}});
        let out = reader.feed(&asked.to_string()).unwrap();
        assert_eq!(
            out[0].event,
            ObservedKind::NeedsInput {
                input: NeedsInputKind::Permission
            }
        );
        let error = json!({"type": "session.error", "properties": {"sessionID": "s", "error": {"name": "APIError", "data": {"message": "quota"}}}});
        let out = reader.feed(&error.to_string()).unwrap();
        assert_eq!(
            out[0].event,
            ObservedKind::Failed {
                reason: "quota".into()
            }
        );
        assert!(matches!(
            reader.feed("not json"),
            Err(ParseError::NotJson(_))
        ));
    }
}

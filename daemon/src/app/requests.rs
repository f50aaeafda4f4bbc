//! The requests a greeted peer sends after the handshake, dispatched by message type to the part of the state machine that answers them.

use koru_protocol::{AccessScope, Envelope, ErrorCode, ErrorMessage, Message, RequestId};

use crate::clock::Clock;

use super::delivery::{drive_result, unknown_drive};
use super::{App, ConnId};

impl<C: Clock> App<C> {
    pub(super) fn on_received(&mut self, conn_id: ConnId, envelope: Envelope) {
        let now = self.clock.now_ms();
        let Some(session_id) = self
            .connections
            .get(&conn_id)
            .and_then(|c| c.session_id.clone())
        else {
            return;
        };
        self.touch(&session_id, now);
        let id = envelope.id;
        let scope = self
            .sessions
            .get(&session_id)
            .map_or(AccessScope::Drive, |s| s.scope);
        if scope < AccessScope::Drive {
            if let Some(asked) = acting_request(&envelope.message) {
                self.refuse_scope(conn_id, id, scope, asked);
                return;
            }
        }
        match envelope.message {
            Message::Ping {} => self.send(conn_id, Envelope::with_id(id, Message::Pong {})),
            Message::Pong {} => {}
            Message::Bye(bye) => {
                tracing::debug!(session_id = %session_id, reason = ?bye.reason, "peer said bye");
                if let Some(connection) = self.connections.get(&conn_id) {
                    connection.handle.close.cancel();
                }
            }
            Message::Error(error) => {
                tracing::warn!(session_id = %session_id, code = %error.code, message = %error.message, "peer reported an error");
            }
            Message::Ack(ack) => self.on_ack(conn_id, &session_id, ack, now),
            Message::Event(event) => self.on_plugin_event(&session_id, event.event, now),
            Message::Terminals(report) => self.on_terminals_report(&session_id, report),
            Message::Capabilities(report) => self.on_capabilities_report(&session_id, report),
            Message::TerminalIoResult(result) => self.on_terminal_io_result(conn_id, result),
            Message::ClipboardResult(result) => self.on_clipboard_result(conn_id, result),
            Message::Status {} => {
                let status = self.status();
                self.send(
                    conn_id,
                    Envelope::with_id(id, Message::StatusResult(status)),
                );
            }
            Message::SessionsList(filter) => self.on_sessions_list(conn_id, id, filter),
            Message::ChatsList(filter) => {
                let mut listed: Vec<&koru_protocol::ChatInfo> = self
                    .chats
                    .values()
                    .filter(|c| filter.store.as_ref().is_none_or(|s| &c.store == s))
                    .filter(|c| {
                        filter.workspace.as_ref().is_none_or(|w| {
                            c.workspace.as_ref().is_some_and(|cw| {
                                std::path::Path::new(w).starts_with(cw)
                                    || std::path::Path::new(cw).starts_with(w)
                            })
                        })
                    })
                    .collect();
                sort_by_store_and_chat_id(&mut listed);
                if self.connections.contains_key(&conn_id) {
                    let line = chats_list_line(id.as_ref(), &listed);
                    self.send_line(conn_id, line);
                }
            }
            Message::ObserveReport(report) => {
                let applied = report.observations.len();
                self.send(
                    conn_id,
                    Envelope::with_id(
                        id,
                        Message::ObserveReported(koru_protocol::ObserveReported { applied }),
                    ),
                );
                self.on_observed(report.observations, false, None);
            }
            Message::DrivesList(filter) => {
                let result = self.list_drives(&filter);
                self.send(
                    conn_id,
                    Envelope::with_id(id, Message::DrivesListResult(result)),
                );
            }
            Message::DriveCreate(create) => self.on_drive_create(conn_id, id, create, now),
            Message::DriveGet(drive_ref) => match self.drives.get(&drive_ref.drive_id) {
                Some(drive) => {
                    let reply = drive_result(drive);
                    self.send(conn_id, Envelope::with_id(id, reply));
                }
                None => match self.drive_from_history(&drive_ref.drive_id) {
                    Some(drive) => self.send(
                        conn_id,
                        Envelope::with_id(
                            id,
                            Message::DriveResult(koru_protocol::DriveResult { drive }),
                        ),
                    ),
                    None => self.send_error(conn_id, id, unknown_drive(&drive_ref.drive_id)),
                },
            },
            Message::JournalVerify(_) => self.on_journal_verify(conn_id, id),
            Message::ChatRead(read) => self.on_chat_read(conn_id, id, read),
            Message::ChatAudit(audit) => self.on_chat_audit(conn_id, id, audit),
            Message::DriveCancel(drive_ref) => {
                self.on_drive_cancel(conn_id, id, &drive_ref.drive_id, now)
            }
            Message::RecoveryRun(run) => self.on_recovery_run(conn_id, id, run.action, now),
            Message::EventsSubscribe {} => {
                if self.connections.contains_key(&conn_id) {
                    self.subscribers.insert(conn_id);
                }
                self.send(conn_id, Envelope::with_id(id, Message::EventsSubscribed {}));
            }
            other => {
                // Role checks in the connection task keep daemon-to-client types out.
                tracing::debug!(
                    type_name = other.type_name(),
                    "ignoring a message with no handler"
                );
            }
        }
    }
}

/// The request type of `message` when it acts (sends, cancels, recovers, feeds the
/// observers) rather than reads: what a connection opened with scope `observe` may not do.
fn acting_request(message: &Message) -> Option<&'static str> {
    match message {
        Message::DriveCreate(_)
        | Message::DriveCancel(_)
        | Message::RecoveryRun(_)
        | Message::ObserveReport(_)
        | Message::ChatAudit(_) => Some(message.type_name()),
        _ => None,
    }
}

impl<C: Clock> App<C> {
    /// Refuses an acting request on a connection whose `hello.scope` does not allow it, and
    /// journals the refusal (`access_refused`) with who asked through which door.
    fn refuse_scope(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        held: AccessScope,
        asked: &str,
    ) {
        let by = self.asker(conn_id);
        let door = by.as_ref().map_or("socket".to_string(), |a| a.door.clone());
        tracing::info!(%door, held = held.as_str(), asked, "refused: the connection's scope does not allow it");
        let mut fields = serde_json::Map::new();
        fields.insert("door".into(), door.clone().into());
        fields.insert("token_id".into(), "scope".into());
        fields.insert("held".into(), held.as_str().into());
        fields.insert("needed".into(), AccessScope::Drive.as_str().into());
        fields.insert("asked".into(), asked.into());
        self.journal_event(crate::journal::KIND_ACCESS_REFUSED, fields, by);
        self.send_error(
            conn_id,
            id,
            ErrorMessage::new(
                ErrorCode::ForbiddenRole,
                format!(
                    "{asked} needs scope drive; this connection said scope {} in its hello (it may only read)",
                    held.as_str()
                ),
            ),
        );
    }
}

/// Sorts chats by store, then chat id: the same order every time. Each store's chats are
/// sorted by chat id alone: a heavy user's chats are mostly of one store, and comparing
/// their equal store names first was half of sorting 10,000 of them.
fn sort_by_store_and_chat_id(chats: &mut Vec<&koru_protocol::ChatInfo>) {
    let mut by_store: Vec<(&str, Vec<&koru_protocol::ChatInfo>)> = Vec::new();
    for chat in chats.drain(..) {
        match by_store.iter_mut().find(|(store, _)| *store == chat.store) {
            Some((_, of_store)) => of_store.push(chat),
            None => by_store.push((&chat.store, vec![chat])),
        }
    }
    by_store.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (_, mut of_store) in by_store {
        of_store.sort_unstable_by(|a, b| a.chat_id.cmp(&b.chat_id));
        chats.append(&mut of_store);
    }
}

/// `chats.list.result` written from the chats table's rows as they are: the same line as
/// encoding `Message::ChatsListResult` (a test compares them), without copying every row
/// first (a heavy user's 10,000 chats: the copy was half of the reply's cost), and each
/// string copied as it is when it needs no escape (serde_json looks at every byte of
/// every string on its own: two thirds of what was left).
fn chats_list_line(id: Option<&RequestId>, chats: &[&koru_protocol::ChatInfo]) -> bytes::Bytes {
    // Room for the rows up front (about 250 bytes each): no doubling copies of a large
    // reply.
    let mut bytes = Vec::with_capacity(128 + chats.len() * 256);
    bytes.extend_from_slice(b"{\"v\":");
    serde_json::to_writer(&mut bytes, &koru_protocol::PROTOCOL_VERSION)
        .expect("a number always serializes");
    if let Some(id) = id {
        bytes.extend_from_slice(b",\"id\":");
        serde_json::to_writer(&mut bytes, id).expect("protocol types always serialize");
    }
    bytes.extend_from_slice(b",\"type\":\"chats.list.result\",\"chats\":[");
    for (index, chat) in chats.iter().enumerate() {
        if index > 0 {
            bytes.push(b',');
        }
        write_chat(&mut bytes, chat);
    }
    bytes.extend_from_slice(b"]}\n");
    bytes::Bytes::from(bytes)
}

/// One chat as serde writes `ChatInfo` (its fields in order, `None`s left out).
fn write_chat(out: &mut Vec<u8>, chat: &koru_protocol::ChatInfo) {
    // Every field named: a field added to `ChatInfo` does not compile here until written.
    let koru_protocol::ChatInfo {
        store,
        chat_id,
        workspace,
        state,
        last_activity_ms,
        last_prompt,
    } = chat;
    out.extend_from_slice(b"{\"store\":");
    write_json_string(out, store);
    out.extend_from_slice(b",\"chat_id\":");
    write_json_string(out, chat_id);
    if let Some(workspace) = workspace {
        out.extend_from_slice(b",\"workspace\":");
        write_json_string(out, workspace);
    }
    out.extend_from_slice(b",\"state\":");
    serde_json::to_writer(&mut *out, state).expect("protocol types always serialize");
    out.extend_from_slice(b",\"last_activity_ms\":");
    serde_json::to_writer(&mut *out, last_activity_ms).expect("a number always serializes");
    if let Some(last_prompt) = last_prompt {
        out.extend_from_slice(b",\"last_prompt\":");
        write_json_string(out, last_prompt);
    }
    out.push(b'}');
}

/// `text` as a JSON string: copied between quotes when no byte needs an escape (JSON
/// escapes only `"`, `\\` and control characters), else as serde_json escapes it.
fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Every byte looked at, no early exit: the compiler checks them many at a time.
    let needs_escape = text.bytes().fold(0u8, |found, byte| {
        found | u8::from(byte < 0x20) | u8::from(byte == b'"') | u8::from(byte == b'\\')
    });
    if needs_escape == 0 {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text).expect("a string always serializes");
    }
}

#[cfg(test)]
mod chats_list_tests {
    use super::*;
    use koru_protocol::{ChatInfo, ObservedChatState};

    #[test]
    fn the_chats_list_reply_is_the_line_the_protocol_encodes() {
        let chats = vec![
            ChatInfo {
                store: "chat_history_claude_code_jsonl".into(),
                chat_id: "a \"quoted\" id".into(),
                workspace: Some("/w/ü".into()),
                state: ObservedChatState::Replying,
                last_activity_ms: 7,
                last_prompt: Some("fix\nit".into()),
            },
            ChatInfo {
                store: "chat_history_codex_jsonl".into(),
                chat_id: "b".into(),
                workspace: None,
                state: ObservedChatState::Idle,
                last_activity_ms: 9,
                last_prompt: None,
            },
            ChatInfo {
                store: "chat_history_claude_code_jsonl".into(),
                chat_id: "back\\slash".into(),
                workspace: Some("tab\there".into()),
                state: ObservedChatState::NeedsInput,
                last_activity_ms: u64::MAX,
                last_prompt: Some("\u{1} and \u{7f} 😀 </script>".into()),
            },
        ];
        let refs: Vec<&ChatInfo> = chats.iter().collect();
        for id in [
            None,
            Some(RequestId::Text("r-1".into())),
            Some(RequestId::Number(4)),
        ] {
            let encoded = koru_protocol::encode_line(&Envelope {
                v: koru_protocol::PROTOCOL_VERSION,
                id: id.clone(),
                message: Message::ChatsListResult(koru_protocol::ChatsListResult {
                    chats: chats.clone(),
                }),
            });
            assert_eq!(
                String::from_utf8(chats_list_line(id.as_ref(), &refs).to_vec()).unwrap(),
                String::from_utf8(encoded).unwrap()
            );
        }
        // Listed by store, then chat id.
        let mut sorted: Vec<&ChatInfo> = refs.iter().rev().copied().collect();
        sort_by_store_and_chat_id(&mut sorted);
        let order: Vec<(&str, &str)> = sorted
            .iter()
            .map(|c| (c.store.as_str(), c.chat_id.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("chat_history_claude_code_jsonl", "a \"quoted\" id"),
                ("chat_history_claude_code_jsonl", "back\\slash"),
                ("chat_history_codex_jsonl", "b"),
            ]
        );
        let empty = koru_protocol::encode_line(&Envelope::new(Message::ChatsListResult(
            koru_protocol::ChatsListResult { chats: Vec::new() },
        )));
        assert_eq!(chats_list_line(None, &[]).to_vec(), empty);
    }
}

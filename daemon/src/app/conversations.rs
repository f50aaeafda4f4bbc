//! `chat.read` in the daemon core: which chat (or which drive's turn) a controller asks for, checked against what the observers know, handed to the `ChatReader` off the loop with the file the observers last read the chat from, and answered — texts paged, the line kept under the connection's limit — when the read comes back.

use std::path::Path;
use std::sync::Arc;

use koru_protocol::{
    ChatRead, ChatReadResult, Envelope, ErrorCode, ErrorMessage, Location, Message, ObservedStage,
    RequestId, MAX_CHAT_READ_TURNS,
};

use crate::clock::Clock;
use crate::conversation::{ChatReadFinished, Keep, Paging, ReadError, ReadRequest};

use super::delivery::unknown_drive;
use super::{App, ConnId, PLUGIN_OBSERVATION_STORE};

/// A read handed to the reader, waiting for its result.
#[derive(Debug)]
pub(super) struct PendingRead {
    conn_id: ConnId,
    id: Option<RequestId>,
    store: String,
    chat_id: String,
    source: Arc<Path>,
    drive_id: Option<String>,
    keep: Keep,
    paging: Paging,
}

fn invalid(field: &str, message: String) -> ErrorMessage {
    ErrorMessage::new(ErrorCode::InvalidMessage, message).with_location(Location {
        field: Some(field.to_string()),
        ..Location::default()
    })
}

impl<C: Clock> App<C> {
    /// `chat.read`: resolves the chat and starts the read (answered by
    /// [`App::on_chat_read_finished`]), or refuses at once with what is wrong.
    pub(super) fn on_chat_read(&mut self, conn_id: ConnId, id: Option<RequestId>, read: ChatRead) {
        match self.chat_read_request(&read) {
            Ok((request, drive_id)) => {
                let ticket = self.next_chat_read;
                self.next_chat_read += 1;
                let source: Arc<Path> = Arc::from(request.source.as_path());
                self.chat_reads.insert(
                    ticket,
                    PendingRead {
                        conn_id,
                        id,
                        store: request.store.clone(),
                        chat_id: request.chat_id.clone(),
                        source,
                        drive_id,
                        keep: request.keep.clone(),
                        paging: Paging::new(read.max_chars, read.reply_offset),
                    },
                );
                self.chat_reader.start(ticket, request);
            }
            Err(error) => self.send_error(conn_id, id, error),
        }
    }

    /// What to read for `read`, and the drive it is about, or why nothing can be.
    fn chat_read_request(
        &self,
        read: &ChatRead,
    ) -> Result<(ReadRequest, Option<String>), ErrorMessage> {
        if let Some(turns) = read.turns {
            if turns == 0 || turns > MAX_CHAT_READ_TURNS {
                return Err(invalid(
                    "turns",
                    format!("`turns` is {turns}; ask for 1 to {MAX_CHAT_READ_TURNS} turns"),
                ));
            }
        }
        if let Some(drive_id) = &read.drive_id {
            if read.chat_id.is_some() {
                return Err(invalid(
                    "chat_id",
                    "give `drive_id` or `chat_id`, not both".into(),
                ));
            }
            let (store, chat_id, digest) = self.drive_chat(drive_id)?;
            let source = self.chat_source(&store, &chat_id)?;
            let expect_reply = self
                .drives
                .get(drive_id)
                .and_then(|d| d.observation.as_ref())
                .is_some_and(|o| o.stage == ObservedStage::Replied);
            return Ok((
                ReadRequest {
                    store,
                    chat_id,
                    source,
                    keep: Keep::PromptDigest(digest),
                    expect_reply,
                    records: false,
                    from: self.drive_read_from(drive_id),
                },
                Some(drive_id.clone()),
            ));
        }
        let Some(chat_id) = &read.chat_id else {
            return Err(invalid(
                "chat_id",
                "chat.read needs `chat_id` (`koru chats` lists them) or `drive_id`".into(),
            ));
        };
        let (store, chat_id) = self.named_chat(chat_id, read.store.as_deref())?;
        let source = self.chat_source(&store, &chat_id)?;
        let keep = match read.turn {
            Some(index) => Keep::Index(index),
            None => Keep::Last(read.turns.unwrap_or(1) as usize),
        };
        Ok((
            ReadRequest {
                store,
                chat_id,
                source,
                keep,
                expect_reply: false,
                records: false,
                from: None,
            },
            None,
        ))
    }

    /// The store and chat a drive's prompt was seen in, and the prompt's digest.
    fn drive_chat(&self, drive_id: &str) -> Result<(String, String, String), ErrorMessage> {
        let Some(drive) = self.drives.get(drive_id) else {
            return Err(match self.drive_from_history(drive_id) {
                Some(drive) => ErrorMessage::new(
                    ErrorCode::NotObservable,
                    match drive.observation.filter(|o| o.store != PLUGIN_OBSERVATION_STORE) {
                        Some(seen) => format!(
                            "drive {drive_id} is only in the journal now, which keeps no prompt to find its turn by; read its chat instead: chat_id {} (store {})",
                            seen.chat_id, seen.store
                        ),
                        None => format!(
                            "drive {drive_id} is only in the journal now, and no chat store showed its prompt"
                        ),
                    },
                ),
                None => unknown_drive(drive_id),
            });
        };
        match &drive.observation {
            Some(seen) if seen.stage == ObservedStage::Ambiguous => Err(ErrorMessage::new(
                ErrorCode::NotObservable,
                format!(
                    "drive {drive_id}'s prompt was seen, but not as its own: {}",
                    seen.detail.as_deref().unwrap_or("several drives match it")
                ),
            )),
            Some(seen) if seen.store != PLUGIN_OBSERVATION_STORE => Ok((
                seen.store.clone(),
                seen.chat_id.clone(),
                drive.prompt_digest.clone(),
            )),
            Some(seen) => Err(ErrorMessage::new(
                ErrorCode::NotObservable,
                format!(
                    "drive {drive_id}: the window's chat told its plugin the turn is {}, but a chat gives plugins no reply text; the text will come from the chat's history store once the chat writes it there (for VS Code, Copilot's chatSessions), and no store has shown the prompt yet",
                    seen.stage.as_str()
                ),
            )),
            None => Err(ErrorMessage::new(
                ErrorCode::NotObservable,
                format!(
                    "no chat store has shown drive {drive_id}'s prompt yet (the drive is {}); its turn can be read once the chat records it",
                    drive.state.as_str()
                ),
            )),
        }
    }

    /// The chat `chat_id` names (in `store_given`, when given), or why none or several.
    pub(super) fn named_chat(
        &self,
        chat_id: &str,
        store_given: Option<&str>,
    ) -> Result<(String, String), ErrorMessage> {
        let mut found: Vec<(&str, &str)> = self
            .chats
            .values()
            .filter(|c| c.chat_id == chat_id && store_given.is_none_or(|s| s == c.store))
            .map(|c| (c.store.as_str(), c.chat_id.as_str()))
            .collect();
        // The chats table is a hash map: the stores named in the same order every time.
        found.sort_unstable();
        match found.as_slice() {
            [] => Err(ErrorMessage::new(
                    ErrorCode::UnknownChat,
                    match store_given {
                        Some(store) => format!(
                            "no chat {chat_id} in {store} (`koru chats` lists the chats the observers know)"
                        ),
                        None => format!(
                            "no chat {chat_id} (`koru chats` lists the chats the observers know)"
                        ),
                    },
                )),
            [(store, chat_id)] => Ok((store.to_string(), chat_id.to_string())),
            several => Err(invalid(
                    "store",
                    format!(
                        "chat {chat_id} is in {} stores: {}; give `store`",
                        several.len(),
                        several
                            .iter()
                            .map(|(store, _)| *store)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
        }
    }

    /// The file the observers last read a chat from.
    pub(super) fn chat_source(
        &self,
        store: &str,
        chat_id: &str,
    ) -> Result<std::path::PathBuf, ErrorMessage> {
        match self.chats.get(store, chat_id).and_then(|row| row.source.as_ref()) {
            Some(source) => Ok(source.to_path_buf()),
            None => Err(ErrorMessage::new(
                ErrorCode::ChatUnreadable,
                format!(
                    "chat {chat_id} of {store} was reported to the daemon (by a hook), not read from a file it knows: there is nothing to read back"
                ),
            )),
        }
    }

    /// A read came back: the answer, or the error, to the connection that asked.
    pub(super) fn on_chat_read_finished(&mut self, finished: ChatReadFinished) {
        let Some(pending) = self.chat_reads.remove(&finished.ticket) else {
            self.on_evidence_read(finished.ticket, finished.result);
            return;
        };
        let reply = match finished.result {
            Ok(found) => self.chat_read_answer(&pending, found),
            Err(error) => Err(read_error(&pending, error)),
        };
        match reply {
            Ok(line) => {
                if self.connections.contains_key(&pending.conn_id) {
                    self.send_line(pending.conn_id, line);
                }
            }
            Err(error) => self.send_error(pending.conn_id, pending.id, error),
        }
    }

    /// The answer to a finished read as the line to send, cut so that it fits the
    /// connection's limit.
    fn chat_read_answer(
        &self,
        pending: &PendingRead,
        found: crate::conversation::ChatTurns,
    ) -> Result<bytes::Bytes, ErrorMessage> {
        let encode = |result: ChatReadResult| {
            super::encode(&Envelope::with_id(
                pending.id.clone(),
                Message::ChatReadResult(Box::new(result)),
            ))
        };
        if found.turns.is_empty() {
            return Err(match (&pending.drive_id, &pending.keep) {
                (Some(drive_id), _) => ErrorMessage::new(
                    ErrorCode::NotObservable,
                    format!(
                        "drive {drive_id}'s prompt is no longer in {} (chat {}): the file was rewritten since it was seen",
                        pending.source.display(),
                        pending.chat_id
                    ),
                ),
                (None, Keep::Index(index)) => invalid(
                    "turn",
                    format!(
                        "chat {} has {} turns (0 to {}); there is no turn {index}",
                        pending.chat_id,
                        found.total,
                        found.total.saturating_sub(1)
                    ),
                ),
                _ => {
                    return Ok(encode(self.chat_read_result(pending, &found, Vec::new())));
                }
            });
        }
        let limit = self.config.max_line_bytes;
        let mut paging = pending.paging;
        loop {
            let turns = found
                .turns
                .iter()
                .map(|(index, turn)| crate::conversation::wire_turn(*index, turn.clone(), paging))
                .collect();
            // The line as it will be sent, its envelope and newline included.
            let line = encode(self.chat_read_result(pending, &found, turns));
            if line.len() <= limit || paging.max_chars <= 1 {
                return Ok(line);
            }
            // Too long for one line: fewer characters per text (the reply's next offset
            // says where the rest starts).
            paging.max_chars /= 2;
        }
    }

    fn chat_read_result(
        &self,
        pending: &PendingRead,
        found: &crate::conversation::ChatTurns,
        turns: Vec<koru_protocol::ChatTurn>,
    ) -> ChatReadResult {
        let workspace = self
            .chats
            .get(&pending.store, &pending.chat_id)
            .and_then(|row| row.info.workspace.clone());
        ChatReadResult {
            store: pending.store.clone(),
            chat_id: pending.chat_id.clone(),
            workspace,
            source: Some(pending.source.display().to_string()),
            drive_id: pending.drive_id.clone(),
            turns_total: found.total,
            turns,
            not_recorded: found.not_recorded.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// A failed read as the error its caller gets.
fn read_error(pending: &PendingRead, error: ReadError) -> ErrorMessage {
    let code = match &error {
        ReadError::NoSuchChat { .. } => ErrorCode::UnknownChat,
        _ => ErrorCode::ChatUnreadable,
    };
    ErrorMessage::new(
        code,
        format!(
            "reading chat {} of {}: {error}",
            pending.chat_id, pending.store
        ),
    )
}

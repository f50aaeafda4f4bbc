//! `chat.audit` in the daemon core: which chat (the one named, else the most recently active), from the file the observers last read it from, into which folder; the audit handed to the `AuditRunner` off the loop and answered when it is back.

use std::path::PathBuf;

use koru_protocol::{ChatAudit, Envelope, ErrorCode, ErrorMessage, Location, Message, RequestId};

use crate::audit::{AuditError, AuditFinished, AuditRequest};
use crate::clock::Clock;
use crate::journal::canonical::Sealer;

use super::{App, ConnId};

/// An audit handed to the runner, waiting for its outcome.
#[derive(Debug)]
pub(super) struct PendingAudit {
    conn_id: ConnId,
    id: Option<RequestId>,
    store: String,
    chat_id: String,
}

fn invalid(field: &str, message: String) -> ErrorMessage {
    ErrorMessage::new(ErrorCode::InvalidMessage, message).with_location(Location {
        field: Some(field.to_string()),
        ..Location::default()
    })
}

/// A path given on the wire: absolute (the daemon's working folder means nothing to the
/// client).
fn absolute(field: &str, path: &Option<String>) -> Result<Option<PathBuf>, ErrorMessage> {
    match path {
        None => Ok(None),
        Some(path) if PathBuf::from(path).is_absolute() => Ok(Some(PathBuf::from(path))),
        Some(path) => Err(invalid(
            field,
            format!("`{field}` must be an absolute path, not {path:?}"),
        )),
    }
}

/// A file name alone: no folder, not `.` or `..`.
fn plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".."
}

impl<C: Clock> App<C> {
    /// `chat.audit`: resolves the chat and starts the audit (answered by
    /// [`App::on_audit_finished`]), or refuses at once with what is wrong.
    pub(super) fn on_chat_audit(
        &mut self,
        conn_id: ConnId,
        id: Option<RequestId>,
        asked: ChatAudit,
    ) {
        match self.audit_request(&asked) {
            Ok(request) => {
                let ticket = self.next_audit;
                self.next_audit += 1;
                self.audits.insert(
                    ticket,
                    PendingAudit {
                        conn_id,
                        id,
                        store: request.store.clone(),
                        chat_id: request.chat_id.clone(),
                    },
                );
                self.auditor.start(ticket, request);
            }
            Err(error) => self.send_error(conn_id, id, error),
        }
    }

    fn audit_request(&self, asked: &ChatAudit) -> Result<AuditRequest, ErrorMessage> {
        let out = absolute("out", &asked.out)?;
        // The page: an absolute path, or a plain file name in the ledger's folder (what the
        // MCP tool asks for: it names no path of the machine).
        let page_name = asked
            .html
            .as_deref()
            .filter(|html| !PathBuf::from(html).is_absolute())
            .map(|name| match plain_file_name(name) {
                true => Ok(name.to_string()),
                false => Err(invalid(
                    "html",
                    format!(
                        "`html` must be an absolute path or a file name (no folders), not {name:?}"
                    ),
                )),
            })
            .transpose()?;
        let html = match page_name {
            Some(_) => None,
            None => absolute("html", &asked.html)?,
        };
        let (store, chat_id) = match &asked.chat_id {
            Some(chat_id) => self.named_chat(chat_id, asked.store.as_deref())?,
            None => self.most_recent_chat(asked.store.as_deref())?,
        };
        let source = self.chat_source(&store, &chat_id)?;
        let dir = out.unwrap_or_else(|| crate::audit::default_dir(&store, &chat_id));
        let html = html.or_else(|| page_name.map(|name| dir.join(name)));
        Ok(AuditRequest {
            store,
            chat_id,
            source,
            dir,
            sealer: Sealer::from_env(),
            html,
        })
    }

    /// The chat the observers know with the most recent activity (of `store`, when given)
    /// that was read from a file.
    fn most_recent_chat(&self, store: Option<&str>) -> Result<(String, String), ErrorMessage> {
        self.chats
            .rows()
            .filter(|row| store.is_none_or(|s| s == row.info.store))
            .filter(|row| row.source.is_some())
            .map(|row| &row.info)
            // Of two as recent, the first by store and chat id (the table is a hash map).
            .max_by_key(|chat| {
                (
                    chat.last_activity_ms,
                    std::cmp::Reverse((chat.store.as_str(), chat.chat_id.as_str())),
                )
            })
            .map(|chat| (chat.store.clone(), chat.chat_id.clone()))
            .ok_or_else(|| {
                ErrorMessage::new(
                    ErrorCode::UnknownChat,
                    match store {
                        Some(store) => format!("no chat of {store} has been read from a file yet (`koru chats` lists the chats the observers know)"),
                        None => "no chat has been read from a file yet (`koru chats` lists the chats the observers know)".into(),
                    },
                )
            })
    }

    /// An audit came back: the answer, or the error, to the connection that asked.
    pub(super) fn on_audit_finished(&mut self, finished: AuditFinished) {
        let Some(pending) = self.audits.remove(&finished.ticket) else {
            return;
        };
        match finished.result {
            Ok(result) => {
                self.send(
                    pending.conn_id,
                    Envelope::with_id(pending.id, Message::ChatAuditResult(result)),
                );
            }
            Err(error) => {
                let code = match &error {
                    AuditError::Read(crate::conversation::ReadError::NoSuchChat { .. }) => {
                        ErrorCode::UnknownChat
                    }
                    AuditError::Read(_) => ErrorCode::ChatUnreadable,
                    _ => ErrorCode::AuditFailed,
                };
                self.send_error(
                    pending.conn_id,
                    pending.id,
                    ErrorMessage::new(
                        code,
                        format!(
                            "auditing chat {} of {}: {error}",
                            pending.chat_id, pending.store
                        ),
                    ),
                );
            }
        }
    }
}

//! The typed requests of a controller: one method per request, each naming the reply it expects, so no face matches replies by hand.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use koru_protocol::Message;

use super::{controller_hello, Client, ClientError};

/// The error for a reply of the wrong kind.
pub(crate) fn unexpected(request: &str, reply: &Message) -> ClientError {
    ClientError::Unexpected(format!(
        "the daemon answered {request} with {}",
        reply.type_name()
    ))
}

/// The typed requests, one method each, for a connection type with
/// `async fn request(&mut self, Message) -> Result<Message, ClientError>`: the plain
/// [`Client`], the shared [`super::shared::SharedClient`] and [`super::shared::Conn`].
macro_rules! typed_requests {
    () => {
        /// `status`: the daemon's version, counts, observers, HTTP endpoint.
        pub async fn status(
            &mut self,
        ) -> Result<koru_protocol::StatusInfo, $crate::control::ClientError> {
            match self.request(koru_protocol::Message::Status {}).await? {
                koru_protocol::Message::StatusResult(status) => Ok(status),
                other => Err($crate::control::requests::unexpected("status", &other)),
            }
        }

        /// `sessions.list`, filtered as asked.
        pub async fn sessions(
            &mut self,
            filter: koru_protocol::SessionsList,
        ) -> Result<koru_protocol::SessionsListResult, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::SessionsList(filter))
                .await?
            {
                koru_protocol::Message::SessionsListResult(result) => Ok(result),
                other => Err($crate::control::requests::unexpected(
                    "sessions.list",
                    &other,
                )),
            }
        }

        /// `drives.list`, filtered as asked.
        pub async fn drives(
            &mut self,
            filter: koru_protocol::DrivesList,
        ) -> Result<koru_protocol::DrivesListResult, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::DrivesList(filter))
                .await?
            {
                koru_protocol::Message::DrivesListResult(result) => Ok(result),
                other => Err($crate::control::requests::unexpected("drives.list", &other)),
            }
        }

        /// `journal.verify`: the daemon checks its journal now (seconds for a long one).
        pub async fn verify_journal(
            &mut self,
        ) -> Result<koru_protocol::VerifyReport, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::JournalVerify(
                    koru_protocol::JournalVerify {},
                ))
                .await?
            {
                koru_protocol::Message::JournalVerifyResult(result) => Ok(result.report),
                other => Err($crate::control::requests::unexpected(
                    "journal.verify",
                    &other,
                )),
            }
        }

        /// `drive.create`: the drive as accepted.
        pub async fn create_drive(
            &mut self,
            create: koru_protocol::DriveCreate,
        ) -> Result<koru_protocol::DriveInfo, $crate::control::ClientError> {
            self.drive_request(koru_protocol::Message::DriveCreate(create))
                .await
        }

        /// `drive.get`.
        pub async fn get_drive(
            &mut self,
            drive_id: String,
        ) -> Result<koru_protocol::DriveInfo, $crate::control::ClientError> {
            self.drive_request(koru_protocol::Message::DriveGet(koru_protocol::DriveRef {
                drive_id,
            }))
            .await
        }

        /// `drive.cancel`: the drive as it stands after the cancel.
        pub async fn cancel_drive(
            &mut self,
            drive_id: String,
        ) -> Result<koru_protocol::DriveInfo, $crate::control::ClientError> {
            self.drive_request(koru_protocol::Message::DriveCancel(
                koru_protocol::DriveRef { drive_id },
            ))
            .await
        }

        async fn drive_request(
            &mut self,
            request: Message,
        ) -> Result<koru_protocol::DriveInfo, $crate::control::ClientError> {
            let name = request.type_name();
            match self.request(request).await? {
                koru_protocol::Message::DriveResult(result) => Ok(result.drive),
                other => Err($crate::control::requests::unexpected(name, &other)),
            }
        }

        /// `chats.list`, filtered as asked.
        pub async fn chats(
            &mut self,
            filter: koru_protocol::ChatsList,
        ) -> Result<koru_protocol::ChatsListResult, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::ChatsList(filter))
                .await?
            {
                koru_protocol::Message::ChatsListResult(result) => Ok(result),
                other => Err($crate::control::requests::unexpected("chats.list", &other)),
            }
        }

        /// `chat.read`: turns of a chat (or a drive's turn), read back from its store.
        pub async fn read_chat(
            &mut self,
            read: koru_protocol::ChatRead,
        ) -> Result<koru_protocol::ChatReadResult, $crate::control::ClientError> {
            match self.request(koru_protocol::Message::ChatRead(read)).await? {
                koru_protocol::Message::ChatReadResult(result) => Ok(*result),
                other => Err($crate::control::requests::unexpected("chat.read", &other)),
            }
        }

        /// `chat.audit`: the chat audited into its ledger by the daemon.
        pub async fn audit_chat(
            &mut self,
            audit: koru_protocol::ChatAudit,
        ) -> Result<koru_protocol::ChatAuditResult, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::ChatAudit(audit))
                .await?
            {
                koru_protocol::Message::ChatAuditResult(result) => Ok(result),
                other => Err($crate::control::requests::unexpected("chat.audit", &other)),
            }
        }

        /// `recovery.run`: the action's result, `ok: false` included (a blocker is an answer).
        pub async fn run_recovery(
            &mut self,
            action: koru_protocol::RecoveryAction,
        ) -> Result<koru_protocol::RecoveryResult, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::RecoveryRun(
                    koru_protocol::RecoveryRun { action },
                ))
                .await?
            {
                koru_protocol::Message::RecoveryResult(result) => Ok(result),
                other => Err($crate::control::requests::unexpected(
                    "recovery.run",
                    &other,
                )),
            }
        }

        /// `observe.report`: what a hook saw in a chat.
        pub async fn report_observation(
            &mut self,
            report: koru_protocol::ObserveReport,
        ) -> Result<koru_protocol::ObserveReported, $crate::control::ClientError> {
            match self
                .request(koru_protocol::Message::ObserveReport(report))
                .await?
            {
                koru_protocol::Message::ObserveReported(reported) => Ok(reported),
                other => Err($crate::control::requests::unexpected(
                    "observe.report",
                    &other,
                )),
            }
        }
    };
}
pub(crate) use typed_requests;

impl Client {
    typed_requests!();

    /// `events.subscribe`: from now on the connection also carries the daemon's events
    /// (read them with [`Client::next`] or [`Client::follow_drive`]).
    pub async fn subscribe(&mut self) -> Result<(), ClientError> {
        match self.request(Message::EventsSubscribe {}).await? {
            Message::EventsSubscribed {} => Ok(()),
            other => Err(unexpected("events.subscribe", &other)),
        }
    }
}

/// What [`Controller::once`] runs on its connection.
pub type Exchange<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClientError>> + Send + 'a>>;

/// A controller that opens one connection per exchange (the HTTP API, MCP tools, doctor's
/// self-probe): connect as `name`, run the exchange, say bye.
#[derive(Debug, Clone)]
pub struct Controller {
    socket: PathBuf,
    name: &'static str,
}

impl Controller {
    pub fn new(socket: PathBuf, name: &'static str) -> Self {
        Controller { socket, name }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A greeted connection the caller keeps (to follow events).
    pub async fn connect(&self) -> Result<Client, ClientError> {
        Client::connect(&self.socket, controller_hello(self.name)).await
    }

    /// Runs `exchange` on a fresh connection and closes it, whatever the outcome:
    /// `controller.once(|c| Box::pin(c.status())).await`.
    pub async fn once<T>(
        &self,
        exchange: impl for<'a> FnOnce(&'a mut Client) -> Exchange<'a, T>,
    ) -> Result<T, ClientError> {
        let mut client = self.connect().await?;
        let outcome = exchange(&mut client).await;
        client.close().await;
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::{decode_line, encode_line, DriveInfo, Envelope};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A daemon stand-in on a real socket: welcomes, then answers every request with
    /// `answer` under the request's id.
    async fn daemon_answering(answer: Message) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("koru.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let request = decode_line(line.as_bytes()).unwrap();
                let reply = match request.message {
                    Message::Hello(_) => Message::welcome(1, "c_1".into(), 10_000, 1 << 20),
                    Message::Bye(_) => break,
                    _ => answer.clone(),
                };
                let line = encode_line(&Envelope::with_id(request.id, reply));
                write.write_all(&line).await.unwrap();
            }
        });
        (dir, path)
    }

    #[tokio::test]
    async fn a_reply_of_the_wrong_kind_is_an_error_naming_both() {
        let (_dir, path) = daemon_answering(Message::EventsSubscribed {}).await;
        let controller = Controller::new(path, "test");
        let error = controller.once(|c| Box::pin(c.status())).await.unwrap_err();
        assert_eq!(error.code(), super::super::ClientErrorCode::DaemonError);
        assert_eq!(
            error.to_string(),
            "unexpected reply from the daemon: the daemon answered status with events.subscribed"
        );
    }

    #[tokio::test]
    async fn each_request_returns_its_own_reply() {
        let drive: DriveInfo = serde_json::from_value(serde_json::json!({
            "drive_id": "d_1", "session_id": "s_1", "state": "queued",
            "target": "focused", "route": "native_send", "options": {},
            "history": [], "prompt_chars": 2, "prompt_excerpt": "hi", "created_at_ms": 1
        }))
        .unwrap();
        let (_dir, path) = daemon_answering(Message::DriveResult(koru_protocol::DriveResult {
            drive: drive.clone(),
        }))
        .await;
        let controller = Controller::new(path, "test");
        let got = controller
            .once(|c| Box::pin(c.get_drive("d_1".into())))
            .await
            .unwrap();
        assert_eq!(got, drive);
    }
}

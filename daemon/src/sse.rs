//! Server-sent events over plain HTTP on loopback (a terminal agent's own server, opencode's): a client that never goes through a proxy, and a stream read as its `data:` lines.

use std::time::Duration;

/// An HTTP client for a server on this machine: loopback only, never through a proxy.
pub fn loopback_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// An event stream: SSE `data:` lines, each one event's text.
pub struct EventStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl EventStream {
    /// `GET url` asking for `text/event-stream`.
    pub async fn open(client: &reqwest::Client, url: &str) -> Result<Self, String> {
        let response = client
            .get(url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        Ok(EventStream {
            response,
            buffer: Vec::new(),
        })
    }

    /// The next event's data; `None` when the stream ended.
    pub async fn next_data(&mut self) -> Option<Result<String, String>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if let Some(data) = line.strip_prefix("data:") {
                    return Some(Ok(data.trim_start().to_string()));
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => return None,
                Err(error) => return Some(Err(error.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[tokio::test]
    async fn data_lines_are_read_across_chunks_and_other_lines_skipped() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).unwrap();
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            socket.write_all(head.as_bytes()).unwrap();
            for piece in [
                ": hello\n\ndata: {\"a\"",
                ":1}\n\nevent: x\r\ndata:{\"b\":\"ü\"}\r\n\r\n",
            ] {
                socket
                    .write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes())
                    .unwrap();
                socket.flush().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            socket.write_all(b"0\r\n\r\n").unwrap();
        });
        let client = loopback_client();
        let mut stream = EventStream::open(&client, &format!("http://{address}/event"))
            .await
            .unwrap();
        assert_eq!(stream.next_data().await.unwrap().unwrap(), r#"{"a":1}"#);
        assert_eq!(stream.next_data().await.unwrap().unwrap(), r#"{"b":"ü"}"#);
        assert!(stream.next_data().await.is_none(), "the stream ended");
        server.join().unwrap();
    }
}

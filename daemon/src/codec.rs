//! NDJSON framing as a tokio-util codec: splits a byte stream into lines with a maximum length and writes envelopes as single lines.

use bytes::{Buf, BytesMut};
use koru_protocol::{encode_line, Envelope};
use tokio_util::codec::{Decoder, Encoder};

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("line longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One JSON object per `\n`-terminated line, at most `max_line_bytes` bytes (newline and an
/// optional `\r` before it excluded). An over-long line is reported as soon as the limit is
/// passed, without waiting for its newline.
#[derive(Debug, Clone)]
pub struct NdjsonCodec {
    max_line_bytes: usize,
    /// How far the current buffer has already been searched for a newline.
    scanned: usize,
}

impl NdjsonCodec {
    pub fn new(max_line_bytes: usize) -> Self {
        NdjsonCodec {
            max_line_bytes,
            scanned: 0,
        }
    }
}

impl Decoder for NdjsonCodec {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let newline = buffer[self.scanned..]
            .iter()
            .position(|byte| *byte == b'\n')
            .map(|offset| self.scanned + offset);
        match newline {
            Some(end) => {
                self.scanned = 0;
                let mut line = buffer.split_to(end + 1);
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                if line.len() > self.max_line_bytes {
                    return Err(FrameError::LineTooLong {
                        limit: self.max_line_bytes,
                    });
                }
                Ok(Some(line))
            }
            None if buffer.len() > self.max_line_bytes + 1 => Err(FrameError::LineTooLong {
                limit: self.max_line_bytes,
            }),
            None => {
                self.scanned = buffer.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buffer: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        if let Some(line) = self.decode(buffer)? {
            return Ok(Some(line));
        }
        self.scanned = 0;
        // A last line without its newline still counts as a line; whitespace alone does not.
        if buffer.iter().all(|byte| byte.is_ascii_whitespace()) {
            buffer.advance(buffer.len());
            return Ok(None);
        }
        Ok(Some(buffer.split_to(buffer.len())))
    }
}

impl Encoder<&Envelope> for NdjsonCodec {
    type Error = FrameError;

    fn encode(&mut self, envelope: &Envelope, out: &mut BytesMut) -> Result<(), FrameError> {
        out.extend_from_slice(&encode_line(envelope));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(codec: &mut NdjsonCodec, input: &[u8]) -> Vec<Result<String, String>> {
        let mut buffer = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(line)) => out.push(Ok(String::from_utf8_lossy(&line).into_owned())),
                Ok(None) => break,
                Err(err) => {
                    out.push(Err(err.to_string()));
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn splits_lines_and_strips_crlf() {
        let mut codec = NdjsonCodec::new(64);
        assert_eq!(
            frames(&mut codec, b"{\"a\":1}\n{\"b\":2}\r\n{\"c\""),
            vec![Ok("{\"a\":1}".to_string()), Ok("{\"b\":2}".to_string())]
        );
    }

    #[test]
    fn a_line_split_across_reads_is_joined() {
        let mut codec = NdjsonCodec::new(64);
        let mut buffer = BytesMut::from(&b"{\"a\":"[..]);
        assert!(codec.decode(&mut buffer).unwrap().is_none());
        buffer.extend_from_slice(b"1}\n");
        assert_eq!(
            &codec.decode(&mut buffer).unwrap().unwrap()[..],
            b"{\"a\":1}"
        );
    }

    #[test]
    fn an_over_long_line_fails_before_its_newline_arrives() {
        let mut codec = NdjsonCodec::new(8);
        assert_eq!(
            frames(&mut codec, b"0123456789ABCDEF"),
            vec![Err("line longer than 8 bytes".to_string())]
        );
        let mut codec = NdjsonCodec::new(8);
        assert_eq!(
            frames(&mut codec, b"0123456789\n"),
            vec![Err("line longer than 8 bytes".to_string())]
        );
        let mut codec = NdjsonCodec::new(8);
        assert_eq!(
            frames(&mut codec, b"01234567\n"),
            vec![Ok("01234567".into())]
        );
    }

    #[test]
    fn the_last_line_without_newline_is_delivered_at_eof() {
        let mut codec = NdjsonCodec::new(64);
        let mut buffer = BytesMut::from(&b"{\"a\":1}"[..]);
        assert!(codec.decode(&mut buffer).unwrap().is_none());
        assert_eq!(
            &codec.decode_eof(&mut buffer).unwrap().unwrap()[..],
            b"{\"a\":1}"
        );
        let mut blank = BytesMut::from(&b"  "[..]);
        assert!(codec.decode_eof(&mut blank).unwrap().is_none());
    }
}

//! Request bodies read within the size limit; a body refused for its size is still read (and dropped) up to a bounded amount first, so an ordinary client that is still sending gets the 413 instead of a broken pipe.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use http_body_util::BodyExt;

use super::errors::ApiError;
use super::MAX_BODY_BYTES;

/// How much of a refused body is read and dropped before the answer goes out. A client that
/// sends more than this (or stalls) gets the answer with the rest unread, and may see the
/// connection reset while still writing.
pub const DRAIN_LIMIT_BYTES: u64 = 8 * MAX_BODY_BYTES as u64;

/// How long a refused body is read for at most.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Reads the whole body if it is at most [`MAX_BODY_BYTES`]; a larger one is refused with
/// `body_too_large` (after [`drain`]).
pub async fn read_limited(mut body: Body) -> Result<Bytes, ApiError> {
    let mut collected: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("cannot read the request body: {error}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if collected.len() + data.len() > MAX_BODY_BYTES {
            drain(body).await;
            return Err(ApiError::body_too_large(MAX_BODY_BYTES));
        }
        collected.extend_from_slice(&data);
    }
    Ok(Bytes::from(collected))
}

/// Reads and drops what is left of a refused body, up to [`DRAIN_LIMIT_BYTES`] or
/// [`DRAIN_TIME`], whichever comes first; returns how many bytes were dropped.
pub async fn drain(mut body: Body) -> u64 {
    let mut dropped = 0u64;
    let reading = async {
        while dropped < DRAIN_LIMIT_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        dropped += data.len() as u64;
                    }
                }
                Some(Err(_)) | None => break,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, reading).await;
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(total: usize, chunk: usize) -> Body {
        let chunks: Vec<Result<Bytes, std::io::Error>> = (0..total.div_ceil(chunk))
            .map(|i| Ok(Bytes::from(vec![b'x'; chunk.min(total - i * chunk)])))
            .collect();
        Body::from_stream(futures::stream::iter(chunks))
    }

    #[tokio::test]
    async fn a_body_at_the_limit_is_read_whole() {
        let bytes = read_limited(chunked(MAX_BODY_BYTES, 4096)).await.unwrap();
        assert_eq!(bytes.len(), MAX_BODY_BYTES);
    }

    #[tokio::test]
    async fn one_byte_over_is_refused_as_too_large() {
        let error = read_limited(chunked(MAX_BODY_BYTES + 1, 4096))
            .await
            .unwrap_err();
        assert_eq!(error.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(error.body.code, "body_too_large");
    }

    #[tokio::test]
    async fn draining_stops_at_its_limit() {
        let total = DRAIN_LIMIT_BYTES as usize * 2;
        let dropped = drain(chunked(total, 64 * 1024)).await;
        assert!(dropped >= DRAIN_LIMIT_BYTES, "{dropped}");
        assert!(dropped < DRAIN_LIMIT_BYTES + 64 * 1024, "{dropped}");
        assert_eq!(drain(chunked(1000, 100)).await, 1000);
    }
}

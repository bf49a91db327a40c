//! The Streamable HTTP framing as the gateway receives it, through rmcp:
//! - a POST body to the gateway's listener, parsed as rmcp's server side does
//!   (`serde_json::from_slice::<ClientJsonRpcMessage>` of the whole body);
//! - an upstream's answer: an `application/json` body
//!   (`from_slice::<ServerJsonRpcMessage>`), or a `text/event-stream` body cut
//!   into events by the `sse-stream` parser rmcp uses, each message event's data
//!   parsed as a `ServerJsonRpcMessage`, as rmcp's client does.
//!
//! Properties: whether a UTF-8 body is a malformed stream, and a well-formed
//! one's events, do not depend on where it is cut into chunks (a network read
//! may end anywhere, a character split across two reads included); every parsed
//! message's serialization parses back and is stable under another round trip.

use bytes::Bytes;
use futures::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use sse_stream::SseStream;
use std::convert::Infallible;

use super::jsonrpc_stdio::round_trip;
use super::split_first;

pub fn run(data: &[u8]) {
    let (mode, body) = split_first(data);
    match mode % 3 {
        0 => {
            if let Ok(m) = serde_json::from_slice::<ClientJsonRpcMessage>(body) {
                round_trip(&m);
            }
        }
        1 => {
            if let Ok(m) = serde_json::from_slice::<ServerJsonRpcMessage>(body) {
                round_trip(&m);
            }
        }
        _ => {
            // Invalid UTF-8 is an error of the stream wherever it is found, so
            // where the error falls among the events depends on the cuts; in a
            // valid body nothing may.
            if std::str::from_utf8(body).is_err() {
                events(body, body.len().max(1));
                return;
            }
            let step = usize::from(mode / 3) % 32 + 1;
            let whole = events(body, body.len().max(1));
            let chunked = events(body, step);
            // A malformed line is an error of the stream, and sse-stream reports
            // it where the chunk it is in is parsed, so a malformed stream's
            // events and errors come out in an order that depends on the cuts.
            // Whether a stream is malformed may not; a well-formed one's events
            // may not either.
            let failed = |e: &[Result<Event, String>]| e.iter().any(Result::is_err);
            assert_eq!(
                failed(&whole),
                failed(&chunked),
                "chunks of {step} bytes change whether the stream has an error: \
                 {whole:?} against {chunked:?}"
            );
            if !failed(&whole) {
                assert_eq!(
                    whole, chunked,
                    "chunks of {step} bytes change the events parsed"
                );
            }
        }
    }
}

/// One parsed event, comparable: its fields, and the message its data holds.
#[derive(Debug, PartialEq)]
struct Event {
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    data: Option<String>,
    message: Option<serde_json::Value>,
}

/// The events of an SSE body delivered in chunks of `step` bytes (errors as text).
fn events(body: &[u8], step: usize) -> Vec<Result<Event, String>> {
    let chunks: Vec<Result<Bytes, Infallible>> = body
        .chunks(step)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let stream = SseStream::from_bytes_stream(futures::stream::iter(chunks));
    futures::executor::block_on(stream.collect::<Vec<_>>())
        .into_iter()
        .map(|r| {
            r.map(|sse| {
                let is_message = matches!(sse.event.as_deref(), None | Some("") | Some("message"));
                let message = sse
                    .data
                    .as_deref()
                    .filter(|_| is_message)
                    .and_then(|d| serde_json::from_str::<ServerJsonRpcMessage>(d).ok())
                    .map(|m| round_trip(&m));
                Event {
                    event: sse.event,
                    id: sse.id,
                    retry: sse.retry,
                    data: sse.data,
                    message,
                }
            })
            .map_err(|e| e.to_string())
        })
        .collect()
}

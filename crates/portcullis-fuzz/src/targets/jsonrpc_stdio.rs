//! The stdio framing as the gateway receives it: rmcp's `AsyncRwTransport`
//! (newline-delimited JSON-RPC, bounded lines, a UTF-8 BOM and `\r` tolerated),
//! server side (the client's messages on the gateway's stdin, the first of which
//! `serve::serve_stdio_first` reads) or client side (an upstream server's stdout).
//!
//! Properties: the messages received do not depend on how the bytes arrive (all
//! at once or in chunks of any size: a read may end anywhere in a line); no more
//! messages than newline-terminated lines; every message's serialization (what
//! the gateway sends on) parses back, and is stable under another round trip.

use rmcp::service::{RoleClient, RoleServer, RxJsonRpcMessage, ServiceRole};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

use super::split_first;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("a current-thread tokio runtime: {e}"))
});

/// Bytes handed out at most `step` at a time, as a pipe may.
struct Chunked<'a> {
    data: &'a [u8],
    step: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.step.min(self.data.len()).min(buf.remaining());
        let (head, tail) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = tail;
        Poll::Ready(Ok(()))
    }
}

pub fn run(data: &[u8]) {
    let (mode, rest) = split_first(data);
    // A small line bound for some inputs, so the oversized-line path is reached.
    let max_line = if mode & 0x10 == 0 {
        rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH
    } else {
        usize::from(mode >> 5) * 16 + 1
    };
    let step = usize::from(mode & 0x0f) + 1;
    if mode & 0x80 == 0 {
        // The gateway's stdin: the client's messages.
        compare::<RoleServer>(rest, step, max_line);
    } else {
        // An upstream's stdout: the server's messages.
        compare::<RoleClient>(rest, step, max_line);
    }
}

fn compare<R>(data: &[u8], step: usize, max_line: usize)
where
    R: ServiceRole,
    RxJsonRpcMessage<R>: Serialize + DeserializeOwned,
{
    let whole = receive_all::<R>(data, data.len().max(1), max_line);
    let chunked = receive_all::<R>(data, step, max_line);
    assert_eq!(
        whole, chunked,
        "chunks of {step} bytes change what is received"
    );
    let lines = data.iter().filter(|b| **b == b'\n').count();
    assert!(
        whole.len() <= lines,
        "{} messages from {lines} newline-terminated lines",
        whole.len()
    );
}

/// Every message the transport receives from `data`, each as JSON, after checking
/// that it serializes and parses back to itself.
fn receive_all<R>(data: &[u8], step: usize, max_line: usize) -> Vec<serde_json::Value>
where
    R: ServiceRole,
    RxJsonRpcMessage<R>: Serialize + DeserializeOwned,
{
    RT.block_on(async {
        let read = Chunked { data, step };
        let mut t = AsyncRwTransport::<R, _, _>::new(read, tokio::io::sink())
            .with_max_line_length(max_line);
        let mut out = Vec::new();
        while let Some(msg) = Transport::<R>::receive(&mut t).await {
            out.push(round_trip(&msg));
        }
        out
    })
}

/// The message as JSON, after checking that what the gateway would send on (its
/// serialization) parses back, and is stable from then on: serializing and
/// parsing again changes nothing. (The first re-parse may drop fields: rmcp reads
/// a result it cannot type, say a call result with extra fields, as a custom
/// result that keeps everything, and its serialization then reads as the typed
/// result, which keeps only its own fields. What is forwarded is never more than
/// what was parsed.)
pub(crate) fn round_trip<M: Serialize + DeserializeOwned>(msg: &M) -> serde_json::Value {
    let value = serde_json::to_value(msg)
        .unwrap_or_else(|e| panic!("a received message does not serialize: {e}"));
    let once = reparse::<M>(msg);
    let twice = reparse::<M>(&once);
    let (a, b) = (json(&once), json(&twice));
    assert_eq!(
        a, b,
        "a message keeps changing when serialized and parsed back"
    );
    value
}

fn reparse<M: Serialize + DeserializeOwned>(msg: &M) -> M {
    let text =
        serde_json::to_string(msg).unwrap_or_else(|e| panic!("a message does not serialize: {e}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("a serialized message does not parse back: {e}: {text}"))
}

fn json<M: Serialize>(msg: &M) -> serde_json::Value {
    serde_json::to_value(msg).unwrap_or_else(|e| panic!("a message does not serialize: {e}"))
}

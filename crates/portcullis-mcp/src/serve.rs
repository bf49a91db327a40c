//! The gateway's listeners: one client over this process's stdio, and many over
//! Streamable HTTP (loopback by default, Host and Origin checked, a bearer
//! token compared in constant time; a listener other machines reach must have
//! both a token and its host names configured, `GatewayConfig::validate`); and
//! the Prometheus endpoint of `[metrics]` (`bind_metrics`).

use crate::config::GatewayConfig;
use crate::gateway::Gateway;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ClientCapabilities, ClientRequest, ErrorCode, ErrorData, JsonRpcMessage, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService, Transport};
use rmcp::ServiceExt;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("stdio session: {0}")]
    Stdio(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("HTTP listener: {0}")]
    Http(std::io::Error),
    #[error(
        "bearer token: environment variable {0} (named by `bearer_token_env`) is not set or \
         empty; set it to the token clients send as `Authorization: Bearer TOKEN`"
    )]
    Token(String),
    #[error("{0}")]
    Start(String),
}

/// Serve one client over stdin/stdout until it disconnects.
pub async fn serve_stdio(gw: Arc<Gateway>) -> Result<(), ServeError> {
    let session = gw.session();
    let id = session.id();
    let running = match stdio_pipes() {
        Some(pipes) => session.serve(pipes).await,
        None => session.serve(rmcp::transport::stdio()).await,
    }
    .map_err(|e| ServeError::Stdio(e.to_string()))?;
    let _ = running.waiting().await;
    gw.router().unregister(id);
    Ok(())
}

/// Serve the one client of this process's stdio, starting the gateway only once
/// the client's `initialize` has been read: `start` gets the capabilities it
/// declared, so the upstreams are told exactly what this client can do
/// (`Gateway::start_for`). Ends without starting anything when stdin closes
/// before a first message.
pub async fn serve_stdio_first<F, Fut, E>(start: F) -> Result<(), ServeError>
where
    F: FnOnce(Option<ClientCapabilities>) -> Fut,
    Fut: std::future::Future<Output = Result<Arc<Gateway>, E>>,
    E: std::fmt::Display,
{
    match stdio_pipes() {
        Some((rx, tx)) => primed(AsyncRwTransport::new_server(rx, tx), start).await,
        None => {
            let (rx, tx) = rmcp::transport::stdio();
            primed(AsyncRwTransport::new_server(rx, tx), start).await
        }
    }
}

async fn primed<T, F, Fut, E>(mut transport: T, start: F) -> Result<(), ServeError>
where
    T: Transport<RoleServer> + 'static,
    F: FnOnce(Option<ClientCapabilities>) -> Fut,
    Fut: std::future::Future<Output = Result<Arc<Gateway>, E>>,
    E: std::fmt::Display,
{
    // Until the client's initialize: a ping is answered, and server/discover (the
    // 2026-07-28 bootstrap probe, which the gateway does not speak) is refused as
    // a server of revision 2025-11-25 refuses it, so the client falls back to
    // initialize. Anything else starts the gateway with the default
    // capabilities and goes to rmcp, which answers it as the protocol says.
    let (first, caps) = loop {
        let Some(msg) = transport.receive().await else {
            tracing::info!("stdin closed before the client's initialize");
            return Ok(());
        };
        let JsonRpcMessage::Request(r) = &msg else {
            break (msg, None);
        };
        let answer = match &r.request {
            ClientRequest::InitializeRequest(i) => {
                let caps = i.params.capabilities.clone();
                break (msg, Some(caps));
            }
            ClientRequest::PingRequest(_) => {
                ServerJsonRpcMessage::response(ServerResult::empty(()), r.id.clone())
            }
            ClientRequest::DiscoverRequest(_) => ServerJsonRpcMessage::error(
                ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "portcullis: server/discover is not served; initialize (protocol up to 2025-11-25)",
                    None,
                ),
                Some(r.id.clone()),
            ),
            _ => break (msg, None),
        };
        transport
            .send(answer)
            .await
            .map_err(|e| ServeError::Stdio(e.to_string()))?;
    };
    if caps.is_none() {
        tracing::warn!(
            "the client did not start with initialize; upstreams get the default capabilities"
        );
    }
    let gw = start(caps)
        .await
        .map_err(|e| ServeError::Start(format!("{e:#}")))?;
    let session = gw.session();
    let id = session.id();
    let running = session
        .serve(Primed {
            first: Some(first),
            inner: transport,
        })
        .await
        .map_err(|e| ServeError::Stdio(e.to_string()))?;
    let _ = running.waiting().await;
    gw.router().unregister(id);
    Ok(())
}

/// A transport whose first received message was read ahead (the client's
/// `initialize`, read before the gateway existed) and is handed out first.
struct Primed<T> {
    first: Option<RxJsonRpcMessage<RoleServer>>,
    inner: T,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Primed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        match self.first.take() {
            Some(m) => Some(m),
            None => self.inner.receive().await,
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Stdin and stdout as non-blocking pipes on the reactor, when both are pipes (as
/// when an MCP client spawns the gateway). Tokio's own stdin/stdout hand every read
/// and write to a blocking thread, which costs a thread switch per message.
#[cfg(unix)]
fn stdio_pipes() -> Option<(
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Sender,
)> {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;
    let fifo = |fd: OwnedFd| -> Option<OwnedFd> {
        let file = std::fs::File::from(fd);
        let is_fifo = file.metadata().ok()?.file_type().is_fifo();
        is_fifo.then(|| OwnedFd::from(file))
    };
    // Check both before converting either: conversion makes the descriptor
    // non-blocking, which the blocking fallback could not read.
    let input = fifo(std::io::stdin().as_fd().try_clone_to_owned().ok()?)?;
    let output = fifo(std::io::stdout().as_fd().try_clone_to_owned().ok()?)?;
    let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(input).ok()?;
    let tx = tokio::net::unix::pipe::Sender::from_owned_fd(output).ok()?;
    Some((rx, tx))
}

#[cfg(not(unix))]
fn stdio_pipes() -> Option<(tokio::io::Stdin, tokio::io::Stdout)> {
    None
}

/// A bound HTTP listener, ready to serve.
pub struct HttpListener {
    pub addr: SocketAddr,
    listener: tokio::net::TcpListener,
    app: axum::Router,
}

/// Bind the Streamable HTTP endpoint (does not serve yet, so the caller can print
/// the address first).
pub async fn bind_http(
    gw: Arc<Gateway>,
    config: &GatewayConfig,
    listen: &str,
    ct: CancellationToken,
) -> Result<HttpListener, ServeError> {
    let mut http = StreamableHttpServerConfig::default().with_cancellation_token(ct);
    let loopback = crate::config::listen_is_loopback(listen);
    if !loopback && (config.allowed_hosts.is_empty() || config.bearer_token_env.is_none()) {
        // `GatewayConfig::validate` refuses this; a caller that skipped it
        // must not get an open listener either.
        return Err(ServeError::Start(format!(
            "refusing to listen on {listen} (not loopback) without `bearer_token_env` and \
             `allowed_hosts` in the gateway file"
        )));
    }
    if !config.allowed_hosts.is_empty() {
        http = http.with_allowed_hosts(config.allowed_hosts.clone());
    }
    // Browsers send Origin; a page on another site must not reach a local
    // gateway (DNS rebinding). Loopback origins only, unless configured; on a
    // listener other machines reach, none unless configured (a request
    // without Origin, from a client that is not a browser, still passes).
    let origins = if !config.allowed_origins.is_empty() {
        config.allowed_origins.clone()
    } else if loopback {
        vec![
            "http://localhost:*".to_string(),
            "http://127.0.0.1:*".to_string(),
            "http://[::1]:*".to_string(),
        ]
    } else {
        Vec::new()
    };
    http = http
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(config.max_message_bytes);
    let factory_gw = gw.clone();
    let service = StreamableHttpService::new(
        move || Ok(factory_gw.session()),
        Arc::new(LocalSessionManager::default()),
        http,
    );
    let app = axum::Router::new().nest_service(&config.http_path, service);
    let app = with_bearer(app, config.bearer_token_env.as_deref())?;
    bound(listen, app).await
}

/// `app` behind the bearer token held by environment variable `var`, if one is
/// configured.
fn with_bearer(app: axum::Router, var: Option<&str>) -> Result<axum::Router, ServeError> {
    let Some(var) = var else { return Ok(app) };
    let token = std::env::var(var)
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ServeError::Token(var.to_string()))?;
    Ok(app.layer(axum::middleware::from_fn_with_state(
        Arc::new(Token::new(&token)),
        require_bearer,
    )))
}

/// `app` with its listener bound on `listen`.
async fn bound(listen: &str, app: axum::Router) -> Result<HttpListener, ServeError> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: listen.to_string(),
            source,
        })?;
    let addr = listener.local_addr().map_err(ServeError::Http)?;
    Ok(HttpListener {
        addr,
        listener,
        app,
    })
}

impl HttpListener {
    /// Serve until `ct` is cancelled.
    pub async fn serve(self, ct: CancellationToken) -> Result<(), ServeError> {
        axum::serve(nodelay(self.listener), self.app)
            .with_graceful_shutdown(async move { ct.cancelled_owned().await })
            .await
            .map_err(ServeError::Http)
    }
}

/// Bind the metrics endpoint of `[metrics]` (`GET /metrics`; does not serve
/// yet). On a loopback address the `Host` header must be a loopback name too (a
/// page a browser loaded from elsewhere cannot read it by DNS rebinding); off
/// loopback the bearer token is required (`GatewayConfig::validate`).
pub async fn bind_metrics(
    gw: Arc<Gateway>,
    config: &crate::config::MetricsConfig,
) -> Result<HttpListener, ServeError> {
    let Some(listen) = config.listen.as_deref() else {
        return Err(ServeError::Start("no [metrics] listen configured".into()));
    };
    let loopback = crate::config::listen_is_loopback(listen);
    if !loopback && config.bearer_token_env.is_none() {
        return Err(ServeError::Start(format!(
            "refusing to serve metrics on {listen} (not loopback) without \
             `bearer_token_env` under [metrics]"
        )));
    }
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics_page))
        .with_state(gw);
    let mut app = with_bearer(app, config.bearer_token_env.as_deref())?;
    if loopback {
        app = app.layer(axum::middleware::from_fn(require_loopback_host));
    }
    bound(listen, app).await
}

async fn metrics_page(State(gw): State<Arc<Gateway>>) -> Response {
    // The queue depth is a SQLite read: off the reactor.
    match tokio::task::spawn_blocking(move || gw.metrics_text()).await {
        Ok(Some(text)) => {
            ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            "portcullis: metrics are off ([metrics] listen is not set)",
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("portcullis: metrics not collected: {e}"),
        )
            .into_response(),
    }
}

/// Whether a `Host` header names this machine's loopback (`localhost`,
/// `127.0.0.1`, `[::1]`, with or without a port).
pub fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn require_loopback_host(req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(loopback_host);
    if ok {
        next.run(req).await
    } else {
        (
            StatusCode::FORBIDDEN,
            "portcullis: the metrics endpoint answers only to a loopback Host",
        )
            .into_response()
    }
}

/// The listener with TCP_NODELAY on every accepted connection. A response goes
/// out in several small writes (SSE event, end of stream); with Nagle's
/// algorithm on, a client that keeps its connection (the Python and
/// TypeScript SDKs do) waits out its own delayed ACK, about 40 ms, per call.
fn nodelay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "TCP_NODELAY not set");
        }
    })
}

/// The expected bearer token, kept as its SHA-256 only: comparing two digests
/// of fixed size in constant time tells a client nothing about the token's
/// length or any prefix of it.
pub struct Token([u8; 32]);

impl Token {
    /// From the configured token; surrounding whitespace (a newline left by
    /// `export T=$(cat file)`) is not part of it, as no client can send it.
    pub fn new(token: &str) -> Token {
        Token(sha256(token.trim().as_bytes()))
    }

    /// Whether `presented` is the token (compared in constant time, as digests).
    pub fn matches(&self, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(sha256(presented.trim_ascii()).ct_eq(&self.0))
    }

    /// Whether an `Authorization` header value carries this token under the
    /// `Bearer` scheme (case-insensitive, as RFC 7235 says of schemes).
    pub fn accepts(&self, header: &[u8]) -> bool {
        let Some(sep) = header.iter().position(|&b| b == b' ') else {
            return false;
        };
        let (scheme, rest) = header.split_at(sep);
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            return false;
        }
        self.matches(rest)
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

async fn require_bearer(State(expected): State<Arc<Token>>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .is_some_and(|v| expected.accepts(v.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "portcullis: missing or wrong bearer token",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        for h in [
            "localhost",
            "LOCALHOST:9464",
            "127.0.0.1:9464",
            "127.0.0.2",
            "[::1]:9464",
        ] {
            assert!(super::loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:9464",
            "10.0.0.1:9464",
            "localhost.evil.example",
            "[::2]:1",
            "",
        ] {
            assert!(!super::loopback_host(h), "{h}");
        }
    }

    #[test]
    fn the_token_is_matched_under_any_case_of_the_scheme_and_nothing_else() {
        let t = super::Token::new("s3cret-0123");
        let padded = super::Token::new(" s3cret-0123\n");
        assert!(padded.accepts(b"Bearer s3cret-0123"));
        for ok in [
            "Bearer s3cret-0123",
            "bearer s3cret-0123",
            "BEARER  s3cret-0123 ",
        ] {
            assert!(t.accepts(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "Bearer s3cret-012",
            "Bearer s3cret-01234",
            "Basic s3cret-0123",
            "s3cret-0123",
            "Bearer",
            "Bearers3cret-0123",
            "",
        ] {
            assert!(!t.accepts(bad.as_bytes()), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::nodelay(listener);
        let connect = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (tcp, _) = listener.accept().await;
        assert!(tcp.nodelay().unwrap());
        connect.await.unwrap().unwrap();
    }
}

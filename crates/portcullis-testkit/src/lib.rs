//! Portcullis test kit: MCP test servers that the gateway's tests, demo and benchmark
//! run on. The `portcullis-testserver` binary serves a [`server::TestServer`] over
//! stdio or Streamable HTTP, with a benign or an attack profile (see
//! [`config::Poison`] for the attacks and [`injections`] for their texts).

pub mod config;
pub mod injections;
pub mod interop;
pub mod pg;
pub mod process;
pub mod scaffold;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use config::{ConfigError, Extras, Hostile, Poison, Profile, ServerOptions, TransportKind};
pub use server::{SharedState, TestServer};

/// Errors of running a test server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("MCP session failed to start: {0}")]
    Init(String),
    #[error("MCP session ended with an error: {0}")]
    Session(String),
}

/// Serves one MCP session over this process's stdin/stdout until the client leaves.
pub async fn serve_stdio(options: ServerOptions) -> Result<(), ServeError> {
    scaffold::serve_stdio(TestServer::new(options)).await
}

/// A bound Streamable HTTP server, serving at `http://{addr}/mcp`.
pub struct HttpServer {
    pub addr: SocketAddr,
    listener: tokio::net::TcpListener,
    router: axum::Router,
    cancel: CancellationToken,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
}

impl HttpServer {
    /// Binds the listener (port 0 picks a free port); nothing is served until [`Self::run`].
    pub async fn bind(options: ServerOptions, listen: SocketAddr) -> Result<Self, ServeError> {
        let state = Arc::new(SharedState::default());
        let options = Arc::new(options);
        Self::bind_with(
            move || Ok(TestServer::with_state((*options).clone(), state.clone())),
            listen,
            CancellationToken::new(),
        )
        .await
    }

    /// Binds the listener for any server: `new_session` makes the handler of each
    /// session (the bench's scenario servers use this too); `cancel` stops it.
    pub async fn bind_with<S: rmcp::ServerHandler + Send + 'static>(
        new_session: impl Fn() -> Result<S, std::io::Error> + Send + Sync + 'static,
        listen: SocketAddr,
        cancel: CancellationToken,
    ) -> Result<Self, ServeError> {
        let config =
            StreamableHttpServerConfig::default().with_cancellation_token(cancel.child_token());
        let service: StreamableHttpService<S, LocalSessionManager> =
            StreamableHttpService::new(new_session, Default::default(), config);
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        Ok(Self {
            addr,
            listener,
            router,
            cancel,
            accepted: Arc::default(),
        })
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// How many TCP connections the server has accepted so far (a client that
    /// reuses its connection shows up once).
    pub fn accepted(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.accepted.clone()
    }

    /// A token that stops the server when cancelled.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Serves until the cancel token is cancelled.
    pub async fn run(self) -> Result<(), ServeError> {
        use axum::serve::ListenerExt;
        let cancel = self.cancel.clone();
        // Small writes go out at once (no Nagle): a client that keeps its
        // connection would otherwise wait ~40 ms on its delayed ACK per call.
        let accepted = self.accepted.clone();
        let listener = self.listener.tap_io(move |tcp| {
            accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, self.router)
            .with_graceful_shutdown(async move { cancel.cancelled_owned().await })
            .await?;
        Ok(())
    }
}

//! The gateway as a client: one connection per upstream server (a stdio child or a
//! Streamable HTTP endpoint), restarted when a child dies, and the handler for what
//! an upstream sends on its own (sampling and elicitation requests, progress,
//! list changes), which goes through the [`Router`] to a downstream session.

use crate::config::ServerConfig;
use crate::router::Router;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, ClientResult, ErrorData as McpError,
    Implementation, ServerNotification, ServerPeerInfo, ServerRequest, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RunningService,
    Service,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error(
        "server {server:?}: cannot start `{command}`: {error} (is the program installed and on \
         the PATH the client gives its servers? an absolute path avoids the question)"
    )]
    Spawn {
        server: String,
        command: String,
        // Not a `source`: the message says it once, and an error chain printed
        // with `{:#}` does not repeat it.
        error: std::io::Error,
    },
    #[error(
        "server {server:?}: the MCP handshake (initialize) failed: {message} (run the server's \
         command on its own to see its own error output)"
    )]
    Initialize { server: String, message: String },
    #[error("server {server:?}: bad configuration: {message}")]
    Config { server: String, message: String },
    #[error(
        "server {server:?} is down ({restarts} restarts used): {message}; restart the gateway \
         (or the client, which restarts its servers) once the server runs again"
    )]
    Down {
        server: String,
        restarts: u32,
        message: String,
    },
}

/// The client-side handler of one upstream connection.
#[derive(Clone)]
pub struct UpstreamHandler {
    server: String,
    router: Arc<Router>,
    caps: ClientCapabilities,
}

/// What the gateway declares to its upstreams as their client.
///
/// `Some(client)`: the one client the gateway serves (stdio), whose `initialize`
/// was read before the upstreams were started: its sampling, elicitation and
/// roots as it declared them (the sampling markers without their contents), so a
/// server offers what that client can do
/// (server-everything registers its sampling tools only for a client that
/// samples). `experimental` and `extensions` (SEP-2663 tasks among them) are not
/// declared: the gateway does not relay what they would enable.
///
/// `None`: the clients are not known when the upstreams start (Streamable HTTP,
/// any number of them): sampling, elicitation and roots are declared, and a
/// request reaching a session whose client lacks the capability is refused.
pub fn upstream_capabilities(client: Option<&ClientCapabilities>) -> ClientCapabilities {
    let mut caps = ClientCapabilities::default();
    match client {
        Some(c) => {
            // Presence, not content: `sampling.tools` and `sampling.context` are
            // markers (empty objects in the specification); whatever a client
            // wrote inside them is not relayed to the servers.
            caps.sampling = c.sampling.as_ref().map(|s| {
                let mut m = s.clone();
                m.tools = s.tools.as_ref().map(|_| Default::default());
                m.context = s.context.as_ref().map(|_| Default::default());
                m
            });
            caps.elicitation = c.elicitation.clone();
            caps.roots = c.roots.clone();
        }
        None => {
            caps.sampling = Some(Default::default());
            caps.elicitation = Some(Default::default());
            caps.roots = Some(Default::default());
        }
    }
    caps
}

impl Service<RoleClient> for UpstreamHandler {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, McpError> {
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            other => {
                self.router
                    .server_request(&self.server, other, context.ct)
                    .await
            }
        }
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), McpError> {
        self.router
            .server_notification(&self.server, notification)
            .await;
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        // The gateway relays sampling, elicitation and roots to the client that
        // caused them; a client without the capability gets the upstream's
        // request refused, never answered by the gateway itself.
        let mut c = ClientConfig::new(
            self.caps.clone(),
            Implementation::new("portcullis-gateway", env!("CARGO_PKG_VERSION")),
        );
        c.protocol_version = crate::MAX_PROTOCOL;
        c
    }
}

struct Conn {
    service: RunningService<RoleClient, UpstreamHandler>,
}

/// One upstream server, with its live connection.
pub struct Upstream {
    pub config: ServerConfig,
    router: Arc<Router>,
    conn: Mutex<Option<Conn>>,
    restarts: AtomicU32,
    max_line: usize,
    /// What the gateway declares to this server (kept for restarts).
    caps: ClientCapabilities,
    /// What the server said at its first `initialize`.
    pub info: ServerPeerInfo,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.config.name)
            .finish()
    }
}

impl Upstream {
    /// Start (or connect to) the server and initialize it.
    pub async fn connect(
        config: ServerConfig,
        router: Arc<Router>,
        max_message_bytes: usize,
        caps: ClientCapabilities,
    ) -> Result<Upstream, UpstreamError> {
        // Lines longer than the transport limit are dropped by rmcp; the gateway's
        // own, smaller limit turns a large result into a clear error instead.
        let max_line = max_message_bytes.saturating_mul(4).max(16 * 1024 * 1024);
        let service = open(&config, &router, max_line, &caps).await?;
        let info = service
            .peer()
            .peer_info()
            .map(|i| (*i).clone())
            .ok_or_else(|| UpstreamError::Initialize {
                server: config.name.clone(),
                message: "no initialize result".into(),
            })?;
        Ok(Upstream {
            config,
            router,
            conn: Mutex::new(Some(Conn { service })),
            restarts: AtomicU32::new(0),
            max_line,
            caps,
            info,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Whether the connection is open, as far as can be told without waiting: a
    /// connection busy being handed out or restarted counts as up.
    pub fn is_up(&self) -> bool {
        self.conn.try_lock().map_or(true, |c| {
            c.as_ref()
                .is_some_and(|c| !c.service.peer().is_transport_closed())
        })
    }

    /// Restarts since the gateway started.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// The live peer, restarting a dead stdio child within the restart budget.
    pub async fn peer(&self) -> Result<Peer<RoleClient>, UpstreamError> {
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_ref() {
            if !c.service.peer().is_transport_closed() {
                return Ok(c.service.peer().clone());
            }
        }
        let used = self.restarts.load(Ordering::Relaxed);
        if used >= self.config.max_restarts {
            return Err(UpstreamError::Down {
                server: self.config.name.clone(),
                restarts: used,
                message: "the connection closed and the restart budget is spent".into(),
            });
        }
        self.restarts.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(server = %self.config.name, restart = used + 1, "upstream closed; restarting");
        if let Some(old) = conn.take() {
            let _ = old.service.cancel().await;
        }
        let service = open(&self.config, &self.router, self.max_line, &self.caps).await?;
        let peer = service.peer().clone();
        *conn = Some(Conn { service });
        Ok(peer)
    }

    /// Send one request and wait for its result under `timeout`.
    pub async fn request(
        &self,
        request: ClientRequest,
        options: PeerRequestOptions,
    ) -> Result<rmcp::service::RequestHandle<RoleClient>, McpError> {
        self.send(request, options).await.map(|(handle, _)| handle)
    }

    /// Send one request for a call: the guard ([`Router::sending`]) keeps what the
    /// upstream sends about it from being attributed until the caller has
    /// registered the call and dropped the guard. Taken once the connection is
    /// up, so a restart does not hold the upstream's notifications meanwhile.
    pub async fn send(
        &self,
        request: ClientRequest,
        options: PeerRequestOptions,
    ) -> Result<
        (
            rmcp::service::RequestHandle<RoleClient>,
            tokio::sync::OwnedRwLockWriteGuard<()>,
        ),
        McpError,
    > {
        let peer = self
            .peer()
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let sending = self.router.sending(&self.config.name).await;
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| {
                McpError::internal_error(format!("server {:?}: {e}", self.config.name), None)
            })?;
        Ok((handle, sending))
    }

    /// Stop the connection (kills a stdio child).
    pub async fn shutdown(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            let _ = c.service.cancel().await;
        }
    }
}

async fn open(
    config: &ServerConfig,
    router: &Arc<Router>,
    max_line: usize,
    caps: &ClientCapabilities,
) -> Result<RunningService<RoleClient, UpstreamHandler>, UpstreamError> {
    let handler = UpstreamHandler {
        server: config.name.clone(),
        router: router.clone(),
        caps: caps.clone(),
    };
    let init = |e: &dyn std::fmt::Display| UpstreamError::Initialize {
        server: config.name.clone(),
        message: e.to_string(),
    };
    match (&config.command, &config.url) {
        (Some(command), None) => {
            let mut cmd = stdio_command(config, command, std::process::Stdio::inherit());
            let mut child = cmd.spawn().map_err(|error| UpstreamError::Spawn {
                server: config.name.clone(),
                command: command.clone(),
                error,
            })?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(init(&"child has no stdio pipes"));
            };
            let transport =
                AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(max_line);
            let transport = Noting::new(transport, router, &config.name);
            let service = rmcp::serve_client(handler, transport)
                .await
                .map_err(|e| init(&e))?;
            // The child lives as long as the connection: reap it when it ends.
            let name = config.name.clone();
            tokio::spawn(async move {
                match child.wait().await {
                    Ok(status) => tracing::info!(server = %name, %status, "upstream exited"),
                    Err(e) => tracing::warn!(server = %name, error = %e, "upstream wait failed"),
                }
            });
            Ok(service)
        }
        (None, Some(url)) => {
            let mut headers = std::collections::HashMap::new();
            for (k, v) in &config.headers {
                let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| {
                    UpstreamError::Config {
                        server: config.name.clone(),
                        message: format!("header name {k:?}: {e}"),
                    }
                })?;
                let value = http::HeaderValue::from_str(v).map_err(|e| UpstreamError::Config {
                    server: config.name.clone(),
                    message: format!("header {k:?}: {e}"),
                })?;
                headers.insert(name, value);
            }
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            cfg.custom_headers = headers;
            let transport = if config.keep_alive {
                let client = keep_alive_client().map_err(|e| init(&e))?;
                StreamableHttpClientTransport::with_client(client, cfg)
            } else {
                StreamableHttpClientTransport::from_config(cfg)
            };
            rmcp::serve_client(handler, Noting::new(transport, router, &config.name))
                .await
                .map_err(|e| init(&e))
        }
        _ => Err(UpstreamError::Config {
            server: config.name.clone(),
            message: "needs exactly one of `command` or `url`".into(),
        }),
    }
}

/// An upstream's transport that tells the router of each notification of a call in
/// flight as it is read. rmcp hands every notification to a task of its own and the
/// response read after it straight to the waiting request, so a response can
/// overtake its own call's progress and log messages; what was read before the
/// response is what [`Router::settle`] waits for, whichever worker runs it.
struct Noting<T> {
    inner: T,
    router: Arc<Router>,
    server: String,
}

impl<T> Noting<T> {
    fn new(inner: T, router: &Arc<Router>, server: &str) -> Noting<T> {
        Noting {
            inner,
            router: router.clone(),
            server: server.to_string(),
        }
    }
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for Noting<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        if let Some(rmcp::model::JsonRpcMessage::Notification(n)) = &message {
            if crate::router::belongs_to_a_call(&n.notification) {
                self.router.notification_read(&self.server);
            }
        }
        message
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Redirects followed toward one upstream, at most.
const MAX_REDIRECTS: usize = 10;

/// The HTTP client of an upstream with `keep_alive`: idle connections are kept
/// for reuse (rmcp's default client opens one per request), with TCP_NODELAY.
/// Redirects as rmcp's default: only same-origin 307/308 (they keep the method
/// and body), at most [`MAX_REDIRECTS`]; any other is returned as the response,
/// so a message never goes to another host.
fn keep_alive_client() -> Result<reqwest::Client, reqwest::Error> {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(30))
        .redirect(same_origin)
        .build()
}

/// Default per-request options toward an upstream.
pub fn options(
    timeout: Duration,
    meta: Option<rmcp::model::RequestMetaObject>,
) -> PeerRequestOptions {
    let mut o = PeerRequestOptions::with_timeout(timeout);
    o.meta = meta;
    o
}

/// Whether a server result is of the expected variant (used by list drains).
pub fn result_name(r: &ServerResult) -> &'static str {
    match r {
        ServerResult::ListToolsResult(_) => "tools/list",
        ServerResult::ListPromptsResult(_) => "prompts/list",
        ServerResult::ListResourcesResult(_) => "resources/list",
        ServerResult::ListResourceTemplatesResult(_) => "resources/templates/list",
        ServerResult::CallToolResult(_) => "tools/call",
        _ => "other",
    }
}

/// The child process of a stdio server entry: its arguments handed to the OS one
/// by one (never re-joined), its environment and working directory, stdin and
/// stdout piped, killed when dropped; `stderr` as the caller wants it.
pub(crate) fn stdio_command(
    config: &ServerConfig,
    command: &str,
    stderr: std::process::Stdio,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(&config.args)
        .envs(&config.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    if let Some(dir) = &config.cwd {
        cmd.current_dir(dir);
    }
    cmd
}

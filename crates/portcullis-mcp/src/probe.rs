//! Listing one server as `portcullis audit` does: start it (stdio) or connect to it
//! (Streamable HTTP), initialize, list its tools, prompts, resources and resource
//! templates (every page), and stop it — all under one deadline, so a server that
//! hangs costs its timeout and nothing more. Nothing is called or read: only the
//! listings, which is what a client shows the model before any call.

use crate::config::ServerConfig;
use portcullis_controls::analyze::ServerSnapshot;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Kept of a stdio server's stderr, for the error message when it fails.
const STDERR_TAIL: usize = 2048;

/// The server's listings, or its `error` (start failure, initialize failure,
/// listing failure, or no complete answer within `timeout`).
pub async fn list(config: &ServerConfig, timeout: Duration) -> ServerSnapshot {
    let stderr = Arc::new(Mutex::new(String::new()));
    let result = tokio::time::timeout(timeout, list_inner(config, stderr.clone())).await;
    let error = match result {
        Ok(Ok(snapshot)) => return snapshot,
        Ok(Err(e)) => e,
        Err(_) => format!("no complete answer within {} s", timeout.as_secs_f64()),
    };
    let tail = stderr
        .lock()
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    ServerSnapshot {
        name: config.name.clone(),
        error: Some(if tail.is_empty() {
            error
        } else {
            format!("{error}; stderr: {tail}")
        }),
        ..Default::default()
    }
}

fn client_info() -> ClientConfig {
    let mut c = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("portcullis-audit", env!("CARGO_PKG_VERSION")),
    );
    c.protocol_version = crate::MAX_PROTOCOL;
    c
}

async fn list_inner(
    config: &ServerConfig,
    stderr: Arc<Mutex<String>>,
) -> Result<ServerSnapshot, String> {
    match (&config.command, &config.url) {
        (Some(command), None) => {
            let mut child =
                crate::upstream::stdio_command(config, command, std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some(mut err) = child.stderr.take() {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = err.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut s) = stderr.lock() {
                            s.push_str(&String::from_utf8_lossy(&buf[..n]));
                            if s.len() > STDERR_TAIL {
                                let mut cut = s.len() - STDERR_TAIL;
                                while !s.is_char_boundary(cut) {
                                    cut += 1;
                                }
                                s.replace_range(..cut, "");
                            }
                        }
                    }
                });
            }
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err("the child has no stdio pipes".into());
            };
            let transport = AsyncRwTransport::new_client(stdout, stdin);
            let service = rmcp::serve_client(client_info(), transport)
                .await
                .map_err(|e| format!("initialize failed: {e}"))?;
            let listed = listings(&config.name, &service).await;
            let _ = service.cancel().await;
            // Stdin is closed: give the server a moment to exit, then kill it.
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
            listed
        }
        (None, Some(url)) => {
            let mut headers = std::collections::HashMap::new();
            for (k, v) in &config.headers {
                let name = http::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| format!("header name {k:?}: {e}"))?;
                let value =
                    http::HeaderValue::from_str(v).map_err(|e| format!("header {k:?}: {e}"))?;
                headers.insert(name, value);
            }
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            cfg.custom_headers = headers;
            let transport = StreamableHttpClientTransport::from_config(cfg);
            let service = rmcp::serve_client(client_info(), transport)
                .await
                .map_err(|e| format!("initialize failed: {e}"))?;
            let listed = listings(&config.name, &service).await;
            let _ = service.cancel().await;
            listed
        }
        _ => Err("needs exactly one of `command` or `url`".into()),
    }
}

fn values<T: serde::Serialize>(items: Vec<T>) -> Vec<Value> {
    items
        .into_iter()
        .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
        .collect()
}

async fn listings(
    name: &str,
    service: &RunningService<RoleClient, ClientConfig>,
) -> Result<ServerSnapshot, String> {
    let peer = service.peer();
    let info = peer
        .peer_info()
        .ok_or_else(|| "no initialize result".to_string())?;
    let caps = &info.capabilities;
    let mut s = ServerSnapshot {
        name: name.to_string(),
        instructions: info.instructions.clone(),
        ..Default::default()
    };
    if caps.tools.is_some() {
        s.tools = values(
            peer.list_all_tools()
                .await
                .map_err(|e| format!("tools/list: {e}"))?,
        );
    }
    if caps.prompts.is_some() {
        s.prompts = values(
            peer.list_all_prompts()
                .await
                .map_err(|e| format!("prompts/list: {e}"))?,
        );
    }
    if caps.resources.is_some() {
        s.resources = values(
            peer.list_all_resources()
                .await
                .map_err(|e| format!("resources/list: {e}"))?,
        );
        // Templates are optional even for a server with resources.
        match peer.list_all_resource_templates().await {
            Ok(t) => s.resource_templates = values(t),
            Err(e) => tracing::debug!(server = name, error = %e, "resources/templates/list"),
        }
    }
    Ok(s)
}

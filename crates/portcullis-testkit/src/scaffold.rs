//! What every MCP server of the project's tests and bench is built from: tool
//! listings written as JSON and typed here, the unknown-tool answer, server info,
//! and serving one session over stdio ([`serve_stdio`]; Streamable HTTP is
//! [`crate::HttpServer::bind_with`]). The test server (`server.rs`) and the
//! bench's scenario servers (`portcullis-bench`) both use it.

use crate::ServeError;
use rmcp::model::{ListToolsResult, ServerConfig, Tool};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A protocol object from its JSON; an error the client sees if the server built
/// a bad one.
pub fn from_json<T: DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("the server built a bad object: {e}"), None))
}

/// The server's `initialize` answer from its JSON (logged and defaulted if bad).
pub fn server_info(info: Value) -> ServerConfig {
    match serde_json::from_value(info) {
        Ok(info) => info,
        Err(e) => {
            tracing::error!("bad server info: {e}");
            ServerConfig::default()
        }
    }
}

/// A `tools/list` answer: every tool, one page.
pub fn list_tools(tools: Vec<Value>) -> Result<ListToolsResult, McpError> {
    let tools: Vec<Tool> = from_json(Value::Array(tools))?;
    Ok(ListToolsResult::with_all_items(tools))
}

/// `Ok` when `name` is one of `tools`, the client's error otherwise.
pub fn require_listed(tools: &[Value], name: &str) -> Result<(), McpError> {
    if tools
        .iter()
        .any(|t| t.get("name").and_then(Value::as_str) == Some(name))
    {
        Ok(())
    } else {
        Err(McpError::invalid_params(
            format!("unknown tool `{name}`"),
            None,
        ))
    }
}

/// Serves one MCP session of `server` over this process's stdin/stdout until
/// the client leaves.
pub async fn serve_stdio(server: impl ServerHandler) -> Result<(), ServeError> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Init(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Session(e.to_string()))?;
    Ok(())
}

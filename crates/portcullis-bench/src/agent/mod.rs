//! The agents and their MCP connection. An agent is a real MCP client (rmcp): in the
//! baseline it connects to every server itself (stdio children, Streamable HTTP), in
//! the defended run to one `portcullis proxy` child over stdio. Either way it sees a
//! list of tools (namespaced `server__tool` when there are several servers, as the
//! gateway does) and calls them by the name it was shown.

pub mod compliant;
pub mod openai;

use crate::trace::{Event, Trace};
use crate::{BenchError, Result};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{Map, Value};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Per-request timeout toward a server or the gateway.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach one server.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    Stdio { command: String, args: Vec<String> },
    Http { url: String },
}

struct Session {
    name: String,
    client: RunningService<RoleClient, ()>,
}

/// A listed tool as the agent sees it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The name shown to the agent (and used to call it).
    pub shown: String,
    /// The name without a `server__` namespace.
    pub base: String,
    session: usize,
    /// The name to send to the session.
    remote: String,
    pub def: Value,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub text: String,
    pub is_error: bool,
    /// A JSON-RPC error's code (how the gateway refuses a call: -32050).
    pub rpc_error: Option<i64>,
}

/// The agent's MCP side: sessions and the child processes behind them.
pub struct Connection {
    sessions: Vec<Session>,
    namespaced: bool,
    children: Vec<tokio::process::Child>,
}

fn mcp(e: impl std::fmt::Display) -> BenchError {
    BenchError::Mcp(e.to_string())
}

async fn spawn_stdio(
    command: &str,
    args: &[String],
    stderr: Option<&Path>,
) -> Result<(RunningService<RoleClient, ()>, tokio::process::Child)> {
    let err = match stderr {
        Some(p) => Stdio::from(std::fs::File::create(p).map_err(|e| BenchError::io(p, e))?),
        None => Stdio::null(),
    };
    let mut child = tokio::process::Command::new(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::Process(format!("starting {command}: {e}")))?;
    let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(BenchError::Process(format!("{command} has no stdio pipes")));
    };
    let client = tokio::time::timeout(
        REQUEST_TIMEOUT,
        ().serve(AsyncRwTransport::new_client(out, inp)),
    )
    .await
    .map_err(|_| mcp(format!("initialize {command}: timed out")))?
    .map_err(|e| mcp(format!("initialize {command}: {e}")))?;
    Ok((client, child))
}

impl Connection {
    /// Baseline: connect to every server directly. `stderr_dir` receives each stdio
    /// child's stderr (`NAME.stderr`).
    pub async fn direct(
        servers: &[(String, Endpoint)],
        stderr_dir: Option<&Path>,
    ) -> Result<Connection> {
        let mut sessions = Vec::new();
        let mut children = Vec::new();
        for (name, ep) in servers {
            let client = match ep {
                Endpoint::Stdio { command, args } => {
                    let log = stderr_dir.map(|d| d.join(format!("{name}.stderr")));
                    let (client, child) = spawn_stdio(command, args, log.as_deref()).await?;
                    children.push(child);
                    client
                }
                Endpoint::Http { url } => tokio::time::timeout(
                    REQUEST_TIMEOUT,
                    ().serve(StreamableHttpClientTransport::from_uri(url.clone())),
                )
                .await
                .map_err(|_| mcp(format!("initialize {url}: timed out")))?
                .map_err(|e| mcp(format!("initialize {url}: {e}")))?,
            };
            sessions.push(Session {
                name: name.clone(),
                client,
            });
        }
        Ok(Connection {
            namespaced: sessions.len() > 1,
            sessions,
            children,
        })
    }

    /// Defended: one stdio session with the gateway process `command args`.
    pub async fn gateway(command: &str, args: &[String], stderr: &Path) -> Result<Connection> {
        let (client, child) = spawn_stdio(command, args, Some(stderr)).await?;
        Ok(Connection {
            sessions: vec![Session {
                name: "gateway".into(),
                client,
            }],
            namespaced: false,
            children: vec![child],
        })
    }

    /// The tools of every session, in session order.
    pub async fn list(&self) -> Result<Vec<Listed>> {
        let mut out = Vec::new();
        for (i, s) in self.sessions.iter().enumerate() {
            let tools = tokio::time::timeout(REQUEST_TIMEOUT, s.client.peer().list_all_tools())
                .await
                .map_err(|_| mcp("tools/list timed out"))?
                .map_err(|e| mcp(format!("tools/list: {e}")))?;
            for t in tools {
                let def = serde_json::to_value(&t)?;
                let remote = t.name.to_string();
                let shown = if self.namespaced {
                    format!("{}__{remote}", s.name)
                } else {
                    remote.clone()
                };
                let base = shown.rsplit("__").next().unwrap_or(&shown).to_string();
                let mut shown_def = def.clone();
                if let Some(o) = shown_def.as_object_mut() {
                    o.insert("name".into(), Value::String(shown.clone()));
                }
                out.push(Listed {
                    shown,
                    base,
                    session: i,
                    remote,
                    def: shown_def,
                });
            }
        }
        Ok(out)
    }

    /// Call a listed tool. A JSON-RPC error is an outcome (it is what the client
    /// reads); a broken session is an error.
    pub async fn call(&self, tool: &Listed, args: Map<String, Value>) -> Result<Outcome> {
        let s = self
            .sessions
            .get(tool.session)
            .ok_or_else(|| mcp("no such session"))?;
        let mut p = CallToolRequestParams::new(tool.remote.clone());
        p.arguments = Some(args);
        let r = tokio::time::timeout(REQUEST_TIMEOUT, s.client.peer().call_tool(p))
            .await
            .map_err(|_| mcp(format!("tools/call {} timed out", tool.shown)))?;
        match r {
            Ok(result) => {
                let v = serde_json::to_value(&result)?;
                let mut parts: Vec<String> = v
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|c| {
                        c.iter()
                            .filter_map(|b| {
                                b.get("text")
                                    .and_then(Value::as_str)
                                    .or_else(|| b.pointer("/resource/text").and_then(Value::as_str))
                                    .map(str::to_string)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(sc) = v.get("structuredContent").filter(|s| !s.is_null()) {
                    parts.push(sc.to_string());
                }
                Ok(Outcome {
                    text: parts.join("\n"),
                    is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
                    rpc_error: None,
                })
            }
            Err(ServiceError::McpError(e)) => {
                let data = e.data.as_ref().map(|d| format!(" {d}")).unwrap_or_default();
                Ok(Outcome {
                    text: format!("{}{data}", e.message),
                    is_error: true,
                    rpc_error: Some(i64::from(e.code.0)),
                })
            }
            Err(e) => Err(mcp(format!("tools/call {}: {e}", tool.shown))),
        }
    }

    /// End the sessions and wait (briefly) for the children to exit.
    pub async fn close(mut self) {
        for s in self.sessions.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(5), s.client.cancel()).await;
        }
        for mut c in self.children.drain(..) {
            if tokio::time::timeout(Duration::from_secs(5), c.wait())
                .await
                .is_err()
            {
                let _ = c.kill().await;
            }
        }
    }
}

/// Call a tool and write the call and its outcome to the trace.
pub async fn traced_call(
    conn: &Connection,
    trace: &Trace,
    tool: &Listed,
    args: Map<String, Value>,
) -> Result<Outcome> {
    trace.push(Event::Call {
        tool: tool.shown.clone(),
        args: Value::Object(args.clone()),
    })?;
    let out = conn.call(tool, args).await?;
    trace.push(Event::Result {
        tool: tool.shown.clone(),
        text: out.text.clone(),
        is_error: out.is_error,
        rpc_error: out.rpc_error,
    })?;
    Ok(out)
}

/// Which agent runs the trials.
#[derive(Debug, Clone)]
pub enum AgentConfig {
    Compliant,
    /// The compliant agent with every manipulation off: the PUA ceiling.
    Immune,
    OpenAi(openai::OpenAiConfig),
}

impl AgentConfig {
    pub fn name(&self) -> &'static str {
        match self {
            AgentConfig::Compliant => "compliant",
            AgentConfig::Immune => "immune",
            AgentConfig::OpenAi(_) => "openai",
        }
    }
    /// The model name the agent runs as (what leak_model looks for).
    pub fn model(&self) -> String {
        match self {
            AgentConfig::Compliant | AgentConfig::Immune => compliant::MODEL_NAME.to_string(),
            AgentConfig::OpenAi(c) => c.model.clone(),
        }
    }
    /// How many trials may run at once with this agent.
    pub fn parallel(&self) -> bool {
        true
    }
}

//! The client of `make demo`: talks MCP over stdio to the command after `--` (the
//! gateway), runs a scripted session against the demo's two servers, and prints
//! what the client received; then prints the gateway's audit records.

use anyhow::{bail, Context, Result};
use clap::Parser;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::service::ServiceError;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Stdio;

#[derive(Parser)]
#[command(about = "Scripted MCP client for the gateway demo")]
struct Args {
    /// The gateway's audit log, printed after the session.
    #[arg(long)]
    audit: Option<PathBuf>,
    /// The MCP server command to talk to (the gateway), with its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn short(s: &str, n: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        format!("{}…", one_line.chars().take(n).collect::<String>())
    }
}

fn shown(r: Result<Value, ServiceError>) -> String {
    match r {
        Ok(v) => {
            let text = v["content"][0]["text"]
                .as_str()
                .or_else(|| v["contents"][0]["text"].as_str())
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            let flag = if v["isError"] == true {
                " [isError]"
            } else {
                ""
            };
            format!("{}{flag}", short(&text, 150))
        }
        Err(ServiceError::McpError(e)) => {
            format!("JSON-RPC error {}: {}", e.code.0, short(&e.message, 150))
        }
        Err(e) => format!("error: {e}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let Some((cmd, rest)) = args.command.split_first() else {
        bail!("give the gateway command after --");
    };
    let mut child = tokio::process::Command::new(cmd)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {cmd}"))?;
    let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
        bail!("the gateway has no stdio pipes");
    };
    let client =
        ().serve(AsyncRwTransport::new_client(out, inp))
            .await
            .context("initialize through the gateway")?;
    let peer = client.peer().clone();
    let info = peer.peer_info();
    println!("== what the client receives ==");
    println!(
        "instructions: {}",
        info.and_then(|i| i.instructions.clone())
            .map(|t| short(&t, 150))
            .unwrap_or_else(|| "(none: withheld by the gateway)".into())
    );
    let tools = peer.list_all_tools().await.context("tools/list")?;
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    println!("tools ({}): {}", names.len(), names.join(", "));
    let calls: [(&str, Value); 5] = [
        ("notes__echo", json!({"text": "hello through the gateway"})),
        (
            "tricky__fetch_page",
            json!({"url": "https://example.com/q3"}),
        ),
        ("tricky__weather_lookup", json!({"city": "Lisbon"})),
        ("tricky__read_config", json!({})),
        (
            "notes__echo",
            json!({"text": "backup token PCY-CANARY-5f1e2d9a"}),
        ),
    ];
    for (tool, a) in calls {
        let mut p = CallToolRequestParams::new(tool.to_string());
        p.arguments = a.as_object().cloned();
        let r = peer
            .call_tool(p)
            .await
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null));
        println!("call {tool} {a}\n    -> {}", shown(r));
    }
    for uri in ["note://readme", "note://onboarding"] {
        let r = peer
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null));
        println!("read {uri}\n    -> {}", shown(r));
    }
    let _ = client.cancel().await;
    if let Some(path) = args.audit {
        println!("\n== the gateway's audit log ({}) ==", path.display());
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for line in text.lines() {
            let r: Value = serde_json::from_str(line).context("audit line")?;
            if r["status"] == "ALLOW" && r["action"] == "pass" {
                continue;
            }
            println!(
                "{:<8} {:<7} {:<20} {:<8} {:<24} {}",
                r["status"].as_str().unwrap_or_default(),
                r["action"].as_str().unwrap_or_default(),
                r["channel"].as_str().unwrap_or_default(),
                r["server"].as_str().unwrap_or("-"),
                r["tool"].as_str().unwrap_or("-"),
                short(r["reasons"][0].as_str().unwrap_or_default(), 90)
            );
        }
        let total = text.lines().count();
        println!("({total} records in all; ALLOW/pass records not shown)");
    }
    Ok(())
}

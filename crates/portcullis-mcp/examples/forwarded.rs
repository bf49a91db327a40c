//! What the gateway forwards for each text, decided by the one path a tool
//! result takes (`Inspector::message` under the default configuration: the
//! balanced preset, `result_review` as given): for measuring redaction on texts
//! from outside (scripts/redact_outside.py).
//!
//! ```sh
//! cargo run --release -p portcullis-mcp --example forwarded -- redact < items.jsonl > out.jsonl
//! cargo run --release -p portcullis-mcp --example forwarded -- tools < corpus/harvest/tool_definition.jsonl
//! ```
//!
//! In: one `{"id", "text"}` per line (a tool result's one text block). Out: one
//! `{"id", "status", "action", "forward", "text", "redact"}` per line, `text` being
//! what the client gets (the result's text, redacted or not, or the gateway's
//! notice), `redact` the record's reasons about the redaction (not its cuts).
//!
//! `tools`: one `{"id", "tool"}` per line (a listed tool definition), decided by
//! the path `tools/list` takes (`Inspector::tool`, `metadata_review =
//! "sanitize"`). Out: `{"id", "status", "action", "forward", "tool", "sanitize"}`,
//! `tool` what the client is shown (null when withheld), `sanitize` the record's
//! reasons about sanitizing.

use anyhow::{bail, Context};
use portcullis_core::Channel;
use portcullis_detect::rules::RuleSet;
use portcullis_detect::Detector;
use portcullis_mcp::config::{FailMode, MetadataReview, ResultReview};
use portcullis_mcp::inspect::Inspector;
use portcullis_mcp::{AuditConfig, AuditLog};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mode = std::env::args().nth(1);
    let review = match mode.as_deref() {
        Some("redact" | "tools") => ResultReview::Redact,
        Some("hold") => ResultReview::Hold,
        _ => bail!("usage: forwarded redact|hold|tools < items.jsonl"),
    };
    let tools = mode.as_deref() == Some("tools");
    let config = portcullis_core::Config::default();
    let detector = Arc::new(Detector::new(config.clone(), RuleSet::embedded()?)?);
    let dir = tempfile::tempdir()?;
    let audit = Arc::new(AuditLog::open(
        AuditConfig::at(dir.path().join("audit.jsonl")),
        &config.egress,
    )?);
    let inspector = Inspector::new(
        detector,
        audit,
        MetadataReview::Sanitize,
        review,
        FailMode::Closed,
        Duration::from_secs(30),
    );
    let mut out = std::io::stdout().lock();
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        let item: Value =
            serde_json::from_str(&line).with_context(|| format!("stdin line {}", i + 1))?;
        if tools {
            let mut tool = item
                .get("tool")
                .cloned()
                .with_context(|| format!("stdin line {}: no tool", i + 1))?;
            let o = inspector.tool("server", &mut tool).await?;
            let why: Vec<&String> = o
                .record
                .reasons
                .iter()
                .filter(|r| r.starts_with("sanitize"))
                .collect();
            let row = json!({"id": item["id"], "status": o.record.status.as_str(),
                "action": o.record.action.as_str(), "forward": o.forward,
                "tool": if o.forward { tool } else { Value::Null }, "sanitize": why});
            writeln!(out, "{row}")?;
            continue;
        }
        let text = item["text"]
            .as_str()
            .with_context(|| format!("stdin line {}: no text", i + 1))?;
        let mut v = json!({"content": [{"type": "text", "text": text}], "isError": false});
        let o = inspector
            .message(Channel::ToolResult, "server", Some("tool"), &mut v)
            .await?;
        let shown = if o.forward {
            v["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        } else {
            o.withheld_message()
        };
        let why: Vec<&String> = o
            .record
            .reasons
            .iter()
            .filter(|r| r.starts_with("redact: ") && !r.starts_with("redact: cut "))
            .collect();
        let row = json!({"id": item["id"], "status": o.record.status.as_str(),
            "action": o.record.action.as_str(), "forward": o.forward, "text": shown,
            "redact": why});
        writeln!(out, "{row}")?;
    }
    Ok(())
}

//! `portcullis review`: the human review queue of the gateway (list, show,
//! approve, deny). Decisions are written to the gateway's state store, where a
//! running gateway reads them on its next check, each with its decision record
//! (kept with the item; `review show --json` prints it).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use portcullis_core::{Action, DecisionRecord, Status};
use portcullis_mcp::config::GatewayConfig;
use portcullis_mcp::store::{QueueItem, Store};
use portcullis_mcp::AuditConfig;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReviewArgs {
    /// The gateway configuration whose state store (and audit log) to use.
    #[arg(long = "config", value_name = "FILE", global = true)]
    pub gateway: Option<PathBuf>,
    /// The state store itself (overrides --config).
    #[arg(long, value_name = "FILE", global = true)]
    pub state: Option<PathBuf>,
    /// The audit log whose state store to use (`<log>.state.sqlite`) when neither
    /// --state nor --config is given. Default: $PORTCULLIS_AUDIT_LOG or
    /// ~/.local/state/portcullis/audit.jsonl.
    #[arg(long, value_name = "FILE", global = true)]
    pub audit_log: Option<PathBuf>,
    #[command(subcommand)]
    pub command: ReviewCommand,
}

#[derive(Subcommand)]
pub enum ReviewCommand {
    /// Pending items (all items with --all).
    List {
        #[arg(long)]
        all: bool,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One item: its findings with paths and spans, the diff of a definition
    /// change, the taint path of a call.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending item (a changed definition is re-pinned to the held version).
    Approve(Decide),
    /// Deny a pending item.
    Deny(Decide),
}

#[derive(Args)]
pub struct Decide {
    pub id: i64,
    /// A note kept with the decision.
    #[arg(long)]
    pub note: Option<String>,
    /// Also write an allowlist (or denylist) entry so the same kind of item is
    /// decided this way without asking again.
    #[arg(long)]
    pub remember: bool,
}

fn audit_config(args: &ReviewArgs, gw: Option<&GatewayConfig>) -> AuditConfig {
    if let Some(log) = &args.audit_log {
        return AuditConfig::at(log);
    }
    if let Some(g) = gw {
        return g.audit.clone();
    }
    AuditConfig::at(crate::proxy::default_audit_log())
}

pub fn run(args: ReviewArgs) -> Result<ExitCode> {
    let gw = match &args.gateway {
        Some(p) => Some(
            GatewayConfig::load(p)
                .with_context(|| format!("loading gateway configuration {}", p.display()))?,
        ),
        None => None,
    };
    let audit = audit_config(&args, gw.as_ref());
    let state = match (&args.state, &gw) {
        (Some(s), _) => s.clone(),
        (None, Some(g)) => g.state_path(),
        (None, None) => {
            let mut p = audit.log.clone().into_os_string();
            p.push(".state.sqlite");
            PathBuf::from(p)
        }
    };
    if !state.exists() {
        bail!(
            "no state store at {} (give --state FILE or --config gateway.toml)",
            state.display()
        );
    }
    let store = Store::open(&state).with_context(|| format!("opening {}", state.display()))?;
    match args.command {
        ReviewCommand::List { all, json } => {
            let items = store.list(all)?;
            if json {
                for i in &items {
                    println!("{}", serde_json::to_string(&brief(i))?);
                }
            } else if items.is_empty() {
                println!("(no {} items)", if all { "review" } else { "pending" });
            } else {
                println!(
                    "{:>5}  {:<9} {:<10} {:<12} {:<24} summary",
                    "id", "status", "kind", "server", "name"
                );
                for i in &items {
                    println!(
                        "{:>5}  {:<9} {:<10} {:<12} {:<24} {}",
                        i.id, i.status, i.kind, i.server, i.name, i.summary
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ReviewCommand::Show { id, json } => {
            let Some(i) = store.item(id)? else {
                bail!("review item {id} does not exist");
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&full(&i))?);
            } else {
                print!("{}", render(&i));
            }
            Ok(ExitCode::SUCCESS)
        }
        ReviewCommand::Approve(d) => decide(&store, d, true),
        ReviewCommand::Deny(d) => decide(&store, d, false),
    }
}

fn decide(store: &Store, d: Decide, approve: bool) -> Result<ExitCode> {
    let item = store.decide(d.id, approve, d.note.as_deref(), d.remember)?;
    // The decision is a decision record too: the held item's record with the
    // human's status, action and reasons.
    if let Ok(mut rec) = serde_json::from_value::<DecisionRecord>(item.record.clone()) {
        rec.id = uuid::Uuid::new_v4().to_string();
        rec.time = portcullis_core::now_rfc3339();
        rec.position = 0;
        rec.status = if approve {
            Status::Allow
        } else {
            Status::Block
        };
        rec.action = if approve { Action::Pass } else { Action::Deny };
        rec.reasons = vec![format!(
            "review: {} by a human (review item {}, held by record {}){}{}",
            item.status,
            item.id,
            item.record_id,
            if d.remember { "; remembered" } else { "" },
            d.note
                .as_deref()
                .map(|n| format!("; note: {n}"))
                .unwrap_or_default()
        )];
        // Kept in the state store with the item: a second process appending to
        // the gateway's audit log would break its index offsets.
        store.set_decision_record(item.id, &serde_json::to_value(&rec)?)?;
        println!(
            "review item {} {} (decision record {})",
            item.id, item.status, rec.id
        );
    } else {
        println!("review item {} {}", item.id, item.status);
    }
    Ok(ExitCode::SUCCESS)
}

fn brief(i: &QueueItem) -> Value {
    serde_json::json!({
        "id": i.id, "created": i.created, "status": i.status, "kind": i.kind,
        "server": i.server, "name": i.name, "summary": i.summary, "record_id": i.record_id,
    })
}

fn full(i: &QueueItem) -> Value {
    let mut v = serde_json::to_value(i).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("record");
    }
    v
}

fn render(i: &QueueItem) -> String {
    let mut out = format!(
        "review item {}  [{}]  {} {}/{}\ncreated {}  record {}\n{}\n",
        i.id, i.status, i.kind, i.server, i.name, i.created, i.record_id, i.summary
    );
    if let Some(when) = &i.decided_at {
        out.push_str(&format!(
            "decided {when}{}{}\n",
            if i.remember { " (remembered)" } else { "" },
            i.note
                .as_deref()
                .map(|n| format!("; note: {n}"))
                .unwrap_or_default()
        ));
    }
    if let Some(diff) = i.diff.as_array().filter(|d| !d.is_empty()) {
        out.push_str("\ndiff (pinned -> held):\n");
        for c in diff {
            let show = |v: &Value| match v {
                Value::Null => "(absent)".to_string(),
                other => other.to_string(),
            };
            out.push_str(&format!(
                "  {}\n    - {}\n    + {}\n",
                c["path"].as_str().unwrap_or("?"),
                show(&c["before"]),
                show(&c["after"])
            ));
        }
    }
    if let Some(path) = i.detail.get("taint").and_then(Value::as_array) {
        out.push_str("\ntaint path:\n");
        for t in path {
            out.push_str(&format!("  {t}\n"));
        }
    }
    if let Some(fs) = i.findings.as_array().filter(|f| !f.is_empty()) {
        out.push_str("\nfindings:\n");
        for f in fs {
            out.push_str(&format!(
                "  {:<28} {:<8} {} [{}..{}] {}\n",
                f["rule"].as_str().unwrap_or("?"),
                f["severity"].as_str().unwrap_or("?"),
                f["path"].as_str().unwrap_or("$"),
                f["span"]["start"],
                f["span"]["end"],
                f["excerpt"].as_str().unwrap_or("")
            ));
        }
    }
    out
}

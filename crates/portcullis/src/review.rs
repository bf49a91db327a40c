//! `portcullis review`: the human review queue of the gateway (list, show,
//! approve, deny). Decisions are written to the gateway's state store, where a
//! running gateway reads them on its next check. Each decision is a decision
//! record too, appended to the gateway's audit log (JSONL and its SQLite index)
//! before the decision is committed, and kept with the item (`review show --json`
//! prints it).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use portcullis_controls::store::{Location, QueueItem, Store, StoreError};
use portcullis_core::{Config, DecisionRecord, EgressConfig};
use portcullis_mcp::config::GatewayConfig;
use portcullis_mcp::structural::{meta, review_record};
use portcullis_mcp::{AuditConfig, AuditLog};
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReviewArgs {
    /// The gateway configuration whose state store (and audit log) to use.
    #[arg(long = "config", value_name = "FILE", global = true)]
    pub gateway: Option<PathBuf>,
    /// The state store itself (overrides --config): a SQLite file or a
    /// PostgreSQL URL (postgres://…).
    #[arg(long, value_name = "FILE|URL", global = true)]
    pub state: Option<String>,
    /// The audit log decisions are recorded in (default: the one the gateway
    /// that uses the state store writes), and whose state store to use
    /// (`<log>.state.sqlite`) when neither --state nor --config is given.
    /// Default: $PORTCULLIS_AUDIT_LOG or ~/.local/state/portcullis/audit.jsonl.
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
    /// Serve the queue as a web page: each item with its diff and decision
    /// record, approve or deny with a note. Loopback by default; off loopback a
    /// token is required (see docs/review-page.md).
    Serve {
        /// The address to listen on (port 0: any free port; the address is
        /// printed as `review page: http://ADDR/`).
        #[arg(long, default_value = crate::review_page::DEFAULT_LISTEN, value_name = "ADDR:PORT")]
        listen: String,
        /// The environment variable holding the token (at least 16 characters;
        /// default PORTCULLIS_REVIEW_TOKEN). Required off loopback; on loopback,
        /// without it, a random token is made and printed as a sign-in address.
        #[arg(long, value_name = "NAME")]
        token_env: Option<String>,
        /// The address a TLS-terminating proxy serves the page under
        /// (`https://review.example.org`): its Host and Origin are accepted, and
        /// the session cookie is marked Secure.
        #[arg(long, value_name = "URL")]
        public_origin: Option<String>,
    },
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

/// The audit log named on the command line or by the gateway configuration.
fn explicit_audit(args: &ReviewArgs, gw: Option<&GatewayConfig>) -> Option<AuditConfig> {
    if let Some(log) = &args.audit_log {
        return Some(AuditConfig::at(log));
    }
    gw.map(|g| g.audit.clone())
}

pub fn run(args: ReviewArgs) -> Result<ExitCode> {
    let gw = match &args.gateway {
        Some(p) => Some(
            GatewayConfig::load(p)
                .with_context(|| format!("loading gateway configuration {}", p.display()))?,
        ),
        None => None,
    };
    let explicit = explicit_audit(&args, gw.as_ref());
    let state = match (&args.state, &gw) {
        (Some(s), _) => Location::parse(s),
        (None, Some(g)) => g.state_location(),
        (None, None) => {
            let log = explicit
                .as_ref()
                .map(|a| a.log.clone())
                .unwrap_or_else(crate::proxy::default_audit_log);
            let mut p = log.into_os_string();
            p.push(".state.sqlite");
            Location::Sqlite(PathBuf::from(p))
        }
    };
    if !state.exists() {
        bail!("no state store at {state} (give --state FILE or --config gateway.toml)");
    }
    let store = Store::connect(&state).with_context(|| format!("opening {state}"))?;
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
                bail!(
                    "review item {id} does not exist in {} (`portcullis review list --all` lists \
                     its items; another gateway's store: give --config or --state)",
                    state
                );
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&full(&i))?);
            } else {
                print!("{}", render(&i));
            }
            Ok(ExitCode::SUCCESS)
        }
        ReviewCommand::Approve(d) => {
            let audit = decision_log(&store, explicit, args.state.is_some())?;
            decide(&store, &audit, &egress(gw.as_ref())?, d, true)
        }
        ReviewCommand::Deny(d) => {
            let audit = decision_log(&store, explicit, args.state.is_some())?;
            decide(&store, &audit, &egress(gw.as_ref())?, d, false)
        }
        ReviewCommand::Serve {
            listen,
            token_env,
            public_origin,
        } => {
            let audit = decision_log(&store, explicit, args.state.is_some())?;
            let log = AuditLog::open(audit.clone(), &egress(gw.as_ref())?)
                .with_context(|| format!("opening the audit log {}", audit.log.display()))?;
            crate::review_page::serve(
                store,
                log,
                crate::review_page::ServeOptions {
                    listen: &listen,
                    token_env: token_env.as_deref(),
                    public_origin: public_origin.as_deref(),
                },
            )
        }
    }
}

/// Where the decision records go: the log given (`--audit-log`, `--config`),
/// else the log of the gateway that uses this state store (it says so in the
/// store), else, when the store was found from the default log, that log.
fn decision_log(
    store: &Store,
    explicit: Option<AuditConfig>,
    state_given: bool,
) -> Result<AuditConfig> {
    if let Some(a) = explicit {
        return Ok(a);
    }
    if let Some(log) = store.meta(meta::AUDIT_LOG)? {
        let mut a = AuditConfig::at(log);
        a.index = store.meta(meta::AUDIT_INDEX)?.map(PathBuf::from);
        return Ok(a);
    }
    if !state_given {
        return Ok(AuditConfig::at(crate::proxy::default_audit_log()));
    }
    bail!(
        "the state store {} does not name its gateway's audit log, where the decision \
         record must go: give --audit-log FILE or --config gateway.toml",
        store.location()
    )
}

/// The egress settings used to redact the records (the gateway's detector
/// configuration when --config names one).
fn egress(gw: Option<&GatewayConfig>) -> Result<EgressConfig> {
    match gw.and_then(|g| g.detector.as_ref()) {
        Some(p) => Ok(Config::load(p)
            .with_context(|| format!("loading detector configuration {}", p.display()))?
            .egress),
        None => Ok(Config::default().egress),
    }
}

fn decide(
    store: &Store,
    audit: &AuditConfig,
    egress: &EgressConfig,
    d: Decide,
    approve: bool,
) -> Result<ExitCode> {
    let log = AuditLog::open(audit.clone(), egress)
        .with_context(|| format!("opening the audit log {}", audit.log.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("starting the async runtime")?;
    let (item, record_id) = commit(store, d.id, approve, d.note.as_deref(), d.remember, |rec| {
        rt.block_on(log.append(vec![rec]))
            .map_err(|e| e.to_string())
    })?;
    drop(log);
    println!(
        "review item {} {} (decision record {record_id} in {})",
        item.id,
        item.status,
        audit.log.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Decides a pending item, for the CLI and the review page alike: its decision
/// record is appended (durably, by `append`) inside the store's transaction, so
/// the decision is committed only once its record is in the log. The decided
/// item and its record's id.
pub(crate) fn commit(
    store: &Store,
    id: i64,
    approve: bool,
    note: Option<&str>,
    remember: bool,
    append: impl FnOnce(DecisionRecord) -> Result<(), String> + Send,
) -> Result<(QueueItem, String), StoreError> {
    let mut record_id = String::new();
    let item = store.decide(id, approve, note, remember, |item| {
        let rec = review_record(item, approve, note, remember);
        record_id = rec.id.clone();
        let value = serde_json::to_value(&rec).map_err(|e| e.to_string())?;
        append(rec)?;
        Ok(value)
    })?;
    Ok((item, record_id))
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
    if let Some(changes) = i.detail["launch"]["changes"]
        .as_array()
        .filter(|c| !c.is_empty())
    {
        out.push_str("\nthe server's launch changed (pinned under -> now):\n");
        for c in changes {
            out.push_str(&format!("  {}\n", c.as_str().unwrap_or("?")));
        }
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

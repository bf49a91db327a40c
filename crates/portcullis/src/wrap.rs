//! `portcullis wrap` / `portcullis unwrap`: put the servers of an MCP client
//! configuration behind `portcullis proxy`, and take them out again.

use anyhow::{bail, Context, Result};
use clap::Args;
use portcullis_clientconfig::discover::{self, Dirs, Os};
use portcullis_clientconfig::wrap::{self, Change, Plan};
use portcullis_clientconfig::{ServerEntry, Transport};
use portcullis_mcp::config::GatewayConfig;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct WrapArgs {
    /// The client configuration to rewrite. Without it, every configuration found
    /// in the usual places (see docs/audit.md).
    #[arg(value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the diff; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The `portcullis` program the entries run. Default: this program's absolute
    /// path (clients do not always start servers with the user's PATH).
    #[arg(long, value_name = "PATH")]
    pub portcullis: Option<String>,
    /// Where the gateway files of remote servers go. Default: `CONFIG.portcullis/`
    /// beside the configuration.
    #[arg(long, value_name = "DIR")]
    pub gateway_dir: Option<PathBuf>,
    /// The audit log the gateway files of remote servers name. Default: as
    /// `proxy` ($PORTCULLIS_AUDIT_LOG, else ~/.local/state/portcullis/audit.jsonl).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
}

#[derive(Args)]
pub struct UnwrapArgs {
    /// The client configuration to restore. Without it, every configuration found
    /// in the usual places that `wrap` changed.
    #[arg(value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the diff; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

fn targets(config: &Option<PathBuf>, only_wrapped: bool) -> Result<Vec<PathBuf>> {
    if let Some(p) = config {
        return Ok(vec![p.clone()]);
    }
    let dirs = Dirs::from_env().context("cannot tell the home and current directory")?;
    let found: Vec<PathBuf> = discover::existing(&dirs, Os::current())
        .into_iter()
        .map(|c| c.path)
        .filter(|p| !only_wrapped || wrap::state_paths(p).manifest.is_file())
        .collect();
    if found.is_empty() {
        bail!("no MCP client configuration found in the usual places; give a path");
    }
    Ok(found)
}

/// The gateway file of a remote server.
#[derive(Serialize)]
struct GatewayFile {
    stdio: bool,
    audit: AuditSection,
    server: Vec<ServerSection>,
}

#[derive(Serialize)]
struct AuditSection {
    log: PathBuf,
}

#[derive(Serialize)]
struct ServerSection {
    name: String,
    url: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, String>,
}

/// A server name the gateway accepts (no `__`, not empty).
fn gateway_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    let s = s.trim_matches('_').to_string();
    if s.is_empty() {
        "remote".into()
    } else {
        s
    }
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Headers may carry tokens.
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Write (or, in a dry run, only check) the gateway file of a remote entry.
fn remote_gateway(
    entry: &ServerEntry,
    dir: &Path,
    audit_log: &Path,
    dry_run: bool,
) -> std::result::Result<(Vec<String>, PathBuf), String> {
    let Transport::Remote {
        url, headers, kind, ..
    } = &entry.transport
    else {
        return Err("not a remote entry".into());
    };
    if kind.as_deref() == Some("sse") {
        return Err(
            "an SSE server: the gateway's HTTP upstream speaks Streamable HTTP only".into(),
        );
    }
    if url.contains("${") || headers.values().any(|v| v.contains("${")) {
        return Err(
            "its URL or headers use client variables (${…}) that the gateway cannot expand".into(),
        );
    }
    // The server keeps the entry's name as its identity (as a wrapped stdio
    // entry's `--name`); the file is named after a safe form of it.
    let name = gateway_name(&entry.name);
    let file = GatewayFile {
        stdio: true,
        audit: AuditSection {
            log: audit_log.to_path_buf(),
        },
        server: vec![ServerSection {
            name: entry.name.clone(),
            url: url.clone(),
            headers: headers.clone(),
        }],
    };
    let body = toml::to_string(&file).map_err(|e| e.to_string())?;
    let text = format!(
        "# Written by `portcullis wrap` for the remote MCP server {:?}; removed by `portcullis unwrap`.\n{body}",
        entry.name
    );
    // The gateway must accept what is written.
    let parsed: GatewayConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
    parsed.validate().map_err(|e| e.to_string())?;
    let path = dir.join(format!("{name}.toml"));
    if !dry_run {
        write_private(&path, &text).map_err(|e| format!("{e:#}"))?;
    }
    let abs = std::path::absolute(&path).unwrap_or(path);
    Ok((
        vec!["proxy".into(), "--config".into(), abs.display().to_string()],
        abs,
    ))
}

fn report(plan: &Plan, dry_run: bool, verb: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if dry_run {
        let d = plan.diff();
        if d.is_empty() {
            writeln!(out, "{}: nothing to {verb}", plan.path.display())?;
        } else {
            out.write_all(d.as_bytes())?;
        }
    }
    for c in &plan.changes {
        let line = match c {
            Change::Wrapped { name } => format!("wrapped    {name}"),
            Change::Unwrapped { name } => format!("unwrapped  {name}"),
            Change::Unchanged { name } if verb == "wrap" => {
                format!("unchanged  {name} (already behind portcullis proxy)")
            }
            Change::Unchanged { name } => format!("unchanged  {name} (not wrapped)"),
            Change::Skipped { name, why } => format!("skipped    {name}: {why}"),
        };
        writeln!(out, "{}: {line}", plan.path.display())?;
    }
    if !dry_run && plan.backup.is_some() {
        writeln!(
            out,
            "{}: original kept in {}",
            plan.path.display(),
            wrap::state_paths(&plan.path).backup.display()
        )?;
    }
    Ok(())
}

pub fn run_wrap(args: WrapArgs) -> Result<ExitCode> {
    let proxy = match &args.portcullis {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("finding this program's path (give --portcullis PATH)")?
            .display()
            .to_string(),
    };
    let audit_log = args
        .audit_log
        .clone()
        .unwrap_or_else(crate::proxy::default_audit_log);
    for path in targets(&args.config, false)? {
        let dir = args.gateway_dir.clone().unwrap_or_else(|| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            path.with_file_name(format!("{name}.portcullis"))
        });
        let mut hook = |e: &ServerEntry| remote_gateway(e, &dir, &audit_log, args.dry_run);
        let plan = wrap::plan_wrap(&path, &proxy, &mut hook)
            .with_context(|| format!("wrapping {}", path.display()))?;
        if !args.dry_run {
            wrap::apply(&plan).with_context(|| format!("writing {}", path.display()))?;
        }
        report(&plan, args.dry_run, "wrap")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_unwrap(args: UnwrapArgs) -> Result<ExitCode> {
    let mut incomplete = false;
    for path in targets(&args.config, true)? {
        let plan =
            wrap::plan_unwrap(&path).with_context(|| format!("unwrapping {}", path.display()))?;
        if !args.dry_run {
            wrap::apply(&plan).with_context(|| format!("writing {}", path.display()))?;
        }
        report(&plan, args.dry_run, "unwrap")?;
        incomplete |= plan
            .changes
            .iter()
            .any(|c| matches!(c, Change::Skipped { .. }));
    }
    if incomplete {
        eprintln!("error: some entries could not be unwrapped (see above); the backup and manifest are kept");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

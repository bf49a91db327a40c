//! `portcullis audit`: read MCP client configurations, list every server they
//! start or connect to, run every analyzer over the listings, report.

use crate::audit_report::{self, Origin, Report};
use crate::DetectorArgs;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use portcullis_clientconfig::discover::{self, Dirs, Os};
use portcullis_clientconfig::vars;
use portcullis_clientconfig::{ClientConfig, Transport, Wrapped};
use portcullis_controls::analyze::{self, ServerSnapshot, Snapshot};
use portcullis_controls::store::Store;
use portcullis_core::Status;
use portcullis_mcp::config::{GatewayConfig, ServerConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Exit codes (documented in docs/audit.md and `--help`).
pub const EXIT_REVIEW: u8 = 3;
pub const EXIT_BLOCK: u8 = 4;
pub const EXIT_SERVER_FAILED: u8 = 5;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum FailOn {
    /// Exit 3 when a definition is REVIEW, 4 when one is BLOCK.
    Review,
    /// Exit 4 when a definition is BLOCK.
    Block,
}

#[derive(Args)]
#[command(
    after_help = "Exit codes: 0 audited (and nothing reached --fail-on); 3 something \
REVIEW with --fail-on review; 4 something BLOCK with --fail-on review|block; 5 a server could \
not be started or listed (the others were audited); 2 usage error; 1 other error."
)]
pub struct AuditArgs {
    /// Client configuration files (Claude Desktop, Claude Code `.mcp.json` and
    /// `~/.claude.json`, Cursor, VS Code `mcp.json`/`settings.json`, Windsurf, or a
    /// JSON list of servers). Without any, the conventional locations are searched.
    #[arg(value_name = "CONFIG")]
    pub configs: Vec<PathBuf>,
    /// Audit a saved listing (a `tools/list` result, a list of tools, or a file of
    /// `--save-snapshot`) instead of starting servers. Repeatable.
    #[arg(long, value_name = "SNAPSHOT.json", conflicts_with = "configs")]
    pub offline: Vec<PathBuf>,
    /// JSON report.
    #[arg(long, conflicts_with = "sarif")]
    pub json: bool,
    /// SARIF 2.1.0 report (for code scanning).
    #[arg(long)]
    pub sarif: bool,
    /// Write the report here instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit non-zero when a definition reaches this status.
    #[arg(long, value_enum, value_name = "review|block")]
    pub fail_on: Option<FailOn>,
    /// Seconds each server gets to start and list everything.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// The pins of earlier audits (SQLite). Default: $PORTCULLIS_AUDIT_STATE, else
    /// ~/.local/state/portcullis/audit-pins.sqlite.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Do not compare with or update pins.
    #[arg(long, conflicts_with = "state")]
    pub no_pins: bool,
    /// Also write the listings as a snapshot (for a later `--offline`).
    #[arg(long, value_name = "FILE")]
    pub save_snapshot: Option<PathBuf>,
    /// Also audit entries marked `disabled`.
    #[arg(long)]
    pub include_disabled: bool,
    /// A gateway configuration (`proxy --config`): decide as that gateway would,
    /// under its `[names]`, `[params]`, `[redirection]` and `[pins]` policies and
    /// its `detector` (unless `--detector` or `--preset` is given). Default: a
    /// gateway's defaults.
    #[arg(long, value_name = "GATEWAY.toml")]
    pub gateway_config: Option<PathBuf>,
    /// Detector configuration (as `scan --config`). Default: the gateway
    /// configuration's, else the balanced preset.
    #[arg(long, value_name = "FILE")]
    pub detector: Option<PathBuf>,
    /// Preset when no detector configuration is given.
    #[arg(long, value_name = "NAME", conflicts_with = "detector")]
    pub preset: Option<portcullis_core::Preset>,
    /// Load rules from this directory instead of the embedded rules.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
}

pub fn default_state() -> PathBuf {
    if let Some(p) = std::env::var_os("PORTCULLIS_AUDIT_STATE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/state/portcullis/audit-pins.sqlite"),
        None => PathBuf::from("portcullis-audit-pins.sqlite"),
    }
}

/// A server to list, and where it came from.
struct Target {
    config: ServerConfig,
    origin: Origin,
}

/// The directory relative `cwd`s and `${workspaceFolder}` refer to: the project
/// a `.vscode/` or `.cursor/` file belongs to, else the file's directory.
fn project_dir(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let hidden = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == ".vscode" || n == ".cursor");
    let p = if hidden {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The server configurations of one client configuration file.
fn targets_of(
    cfg: &ClientConfig,
    include_disabled: bool,
    out: &mut Vec<Target>,
    notes: &mut Vec<String>,
) {
    let project = project_dir(&cfg.path);
    let home = home();
    let env = |k: &str| std::env::var(k).ok();
    for s in &cfg.servers {
        let mut unresolved = Vec::new();
        let mut x = |v: &str| {
            let e = vars::expand(v, &env, &project, &home);
            unresolved.extend(e.unresolved);
            e.text
        };
        let mut origin = Origin {
            server: s.name.clone(),
            config: cfg.path.clone(),
            client: cfg.kind.as_str().to_string(),
            location: s.location.clone(),
            line: s.line,
            transport: String::new(),
            skipped: None,
        };
        let mut config = ServerConfig::stdio(&s.name, "", &[]);
        config.command = None;
        config.max_restarts = 0;
        if s.disabled && !include_disabled {
            origin.skipped = Some("disabled in the client configuration".into());
        }
        // A wrapped entry is audited as the server it wraps, not through the proxy.
        let transport = match (s.wrapped(), &s.transport) {
            (Some(Wrapped::Stdio { command, args }), Transport::Stdio { env, cwd, .. }) => {
                Transport::Stdio {
                    command,
                    args,
                    env: env.clone(),
                    cwd: cwd.clone(),
                }
            }
            (Some(Wrapped::Gateway { config: file }), _) => {
                let path = project.join(x(&file));
                match GatewayConfig::read(&path) {
                    Ok(g) if g.servers.len() == 1 => {
                        let mut inner = g.servers[0].clone();
                        inner.name = s.name.clone();
                        inner.max_restarts = 0;
                        origin.transport =
                            if inner.url.is_some() { "http" } else { "stdio" }.into();
                        out.push(Target {
                            config: inner,
                            origin,
                        });
                    }
                    Ok(_) => {
                        origin.skipped = Some(format!(
                            "wrapped behind the gateway file {} that fronts several servers; audit that file's servers directly",
                            path.display()
                        ));
                        out.push(Target { config, origin });
                    }
                    Err(e) => {
                        origin.skipped = Some(format!("wrapped behind {}: {e}", path.display()));
                        out.push(Target { config, origin });
                    }
                }
                continue;
            }
            (_, t) => t.clone(),
        };
        match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                origin.transport = "stdio".into();
                config.command = Some(x(&command));
                config.args = args.iter().map(|a| x(a)).collect();
                config.env = env.iter().map(|(k, v)| (k.clone(), x(v))).collect();
                config.cwd = cwd.map(|c| project.join(x(&c)));
            }
            Transport::Remote { url, headers, .. } => {
                origin.transport = "http".into();
                config.url = Some(x(&url));
                config.headers = headers.iter().map(|(k, v)| (k.clone(), x(v))).collect();
            }
            Transport::Invalid { reason } => {
                origin.skipped = Some(format!("invalid entry: {reason}"));
            }
        }
        if !unresolved.is_empty() {
            notes.push(format!(
                "{}: server {:?} uses variables only the client can resolve: {}",
                cfg.path.display(),
                s.name,
                unresolved.join(", ")
            ));
        }
        out.push(Target { config, origin });
    }
}

/// Give servers of the same name and a different launch distinct names
/// (`name#2`); drop exact duplicates (the same server in two configurations).
fn dedupe(targets: Vec<Target>) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    let spec = |c: &ServerConfig| {
        serde_json::json!([c.command, c.args, c.env, c.cwd, c.url, c.headers]).to_string()
    };
    for mut t in targets {
        let same_name: Vec<&Target> = out
            .iter()
            .filter(|o| o.origin.server == t.origin.server)
            .collect();
        if t.origin.skipped.is_none()
            && same_name
                .iter()
                .any(|o| o.origin.skipped.is_none() && spec(&o.config) == spec(&t.config))
        {
            tracing::info!(server = %t.origin.server, config = %t.origin.config.display(), "same server in another configuration; audited once");
            continue;
        }
        if !same_name.is_empty() {
            t.config.name = format!("{}#{}", t.origin.server, same_name.len() + 1);
        }
        out.push(t);
    }
    out
}

fn load_detector(
    args: &AuditArgs,
    gateway: Option<&GatewayConfig>,
) -> Result<portcullis_detect::Detector> {
    DetectorArgs {
        // An explicit `--detector` or `--preset` wins over the gateway's detector.
        config: args.detector.clone().or_else(|| {
            gateway
                .filter(|_| args.preset.is_none())
                .and_then(|g| g.detector.clone())
        }),
        preset: args.preset,
        rules: args.rules.clone(),
        lexical: false,
        no_lexical: false,
        embedding: false,
        no_embedding: false,
    }
    .load()
}

fn config_paths(args: &AuditArgs) -> Result<Vec<PathBuf>> {
    if !args.configs.is_empty() {
        return Ok(args.configs.clone());
    }
    let dirs = Dirs::from_env().context("cannot tell the home and current directory")?;
    let found: Vec<PathBuf> = discover::existing(&dirs, Os::current())
        .into_iter()
        .map(|c| c.path)
        .collect();
    if found.is_empty() {
        bail!(
            "no MCP client configuration found in the usual places (see docs/audit.md); give a path"
        );
    }
    Ok(found)
}

pub fn run(args: AuditArgs) -> Result<ExitCode> {
    let gateway = match &args.gateway_config {
        Some(p) => Some(
            GatewayConfig::load(p)
                .with_context(|| format!("reading the gateway configuration {}", p.display()))?,
        ),
        None => None,
    };
    let detector = load_detector(&args, gateway.as_ref())?;
    let mut notes = Vec::new();
    let (snapshot, origins) = if !args.offline.is_empty() {
        offline(&args.offline)?
    } else {
        let mut targets = Vec::new();
        for path in config_paths(&args)? {
            let cfg = ClientConfig::load(&path)
                .with_context(|| format!("reading the client configuration {}", path.display()))?;
            targets_of(&cfg, args.include_disabled, &mut targets, &mut notes);
        }
        live(dedupe(targets), Duration::from_secs(args.timeout.max(1)))?
    };
    for n in &notes {
        eprintln!("note: {n}");
    }
    if let Some(p) = &args.save_snapshot {
        let text = serde_json::to_string_pretty(&snapshot)?;
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    let store = if args.no_pins {
        None
    } else {
        let path = args.state.clone().unwrap_or_else(default_state);
        Some(
            Store::open(&path)
                .with_context(|| format!("opening the pin store {}", path.display()))?,
        )
    };
    let analysis = analyze::analyze(
        &detector,
        &snapshot,
        &gateway
            .as_ref()
            .map(GatewayConfig::analyze_options)
            .unwrap_or_default(),
        store.as_ref(),
    )
    .context("analyzing the listings")?;
    let report = Report {
        analysis: &analysis,
        origins: &origins,
        config_hash: detector.config_hash(),
        notes: &notes,
    };
    let text = if args.sarif {
        serde_json::to_string_pretty(&audit_report::sarif(&report))? + "\n"
    } else if args.json {
        serde_json::to_string_pretty(&audit_report::json(&report))? + "\n"
    } else {
        audit_report::table(&report)
    };
    match &args.output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .context("writing the report")?;
            out.flush().context("writing the report")?;
        }
    }
    let failed = analysis.failed().count();
    if failed > 0 {
        eprintln!(
            "error: {failed} server(s) could not be audited (see the report); the others were"
        );
        return Ok(ExitCode::from(EXIT_SERVER_FAILED));
    }
    let worst = analysis.worst();
    Ok(ExitCode::from(match (args.fail_on, worst) {
        (Some(_), Some(Status::Block)) => EXIT_BLOCK,
        (Some(FailOn::Review), Some(Status::Review)) => EXIT_REVIEW,
        _ => 0,
    }))
}

fn offline(files: &[PathBuf]) -> Result<(Snapshot, Vec<Origin>)> {
    let mut snapshot = Snapshot::default();
    let mut origins = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: invalid JSON", f.display()))?;
        let stem = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "snapshot".into());
        let s = Snapshot::from_value(v, &stem).with_context(|| f.display().to_string())?;
        for server in s.servers {
            origins.push(Origin {
                server: server.name.clone(),
                config: f.clone(),
                client: "snapshot".into(),
                location: "$".into(),
                line: 1,
                transport: "offline".into(),
                skipped: None,
            });
            snapshot.servers.push(server);
        }
    }
    Ok((snapshot, origins))
}

fn live(targets: Vec<Target>, timeout: Duration) -> Result<(Snapshot, Vec<Origin>)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (run, skipped): (Vec<Target>, Vec<Target>) = targets
        .into_iter()
        .partition(|t| t.origin.skipped.is_none());
    // Every server is listed at once, each under its own deadline: one that fails
    // or hangs costs its timeout and does not stop the others.
    let mut listed: Vec<(usize, ServerSnapshot)> = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (i, t) in run.iter().enumerate() {
            let config = t.config.clone();
            set.spawn(async move { (i, portcullis_mcp::probe::list(&config, timeout).await) });
        }
        let mut out = Vec::new();
        while let Some(done) = set.join_next().await {
            match done {
                Ok(r) => out.push(r),
                Err(e) => tracing::error!(error = %e, "a listing task failed"),
            }
        }
        out
    });
    listed.sort_by_key(|(i, _)| *i);
    let mut origins = Vec::new();
    let mut snapshot = Snapshot::default();
    for (i, t) in run.into_iter().enumerate() {
        let s = match listed.iter().position(|(j, _)| *j == i) {
            Some(k) => listed.swap_remove(k).1,
            None => ServerSnapshot {
                name: t.config.name.clone(),
                error: Some("the listing task failed".into()),
                ..Default::default()
            },
        };
        snapshot.servers.push(s);
        origins.push(Origin {
            server: t.config.name.clone(),
            ..t.origin
        });
    }
    for t in skipped {
        origins.push(t.origin);
    }
    Ok((snapshot, origins))
}

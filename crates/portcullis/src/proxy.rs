//! `portcullis proxy`: the gateway.

use crate::DetectorArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use portcullis_detect::Detector;
use portcullis_mcp::config::GatewayConfig;
use portcullis_mcp::serve;
use portcullis_mcp::{AuditConfig, Gateway};
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Args)]
pub struct ProxyArgs {
    /// Gateway configuration (upstream servers, listeners, audit log; see
    /// docs/gateway.md). Without it, give one stdio server after `--`.
    #[arg(long = "config", value_name = "FILE")]
    pub gateway: Option<PathBuf>,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8717) as well as, or
    /// (with --no-stdio) instead of, stdio.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address (e.g.
    /// 127.0.0.1:9464); overrides `[metrics] listen` of the gateway file.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Do not serve a client on stdin/stdout (HTTP only).
    #[arg(long)]
    pub no_stdio: bool,
    /// The audit log (JSONL; SQLite index beside it). Default:
    /// $PORTCULLIS_AUDIT_LOG, else ~/.local/state/portcullis/audit.jsonl.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Never fsync the audit log (`[audit] durability = "none"`): records are
    /// still written before their messages are forwarded, but a power loss can
    /// lose whatever the OS had not written back.
    #[arg(long)]
    pub no_fsync: bool,
    /// Detector configuration (as `scan --config`); overrides the gateway file's
    /// `detector`. Default: the balanced preset.
    #[arg(long, value_name = "FILE")]
    pub detector: Option<PathBuf>,
    /// Preset when no detector configuration is given.
    #[arg(long, value_name = "NAME", conflicts_with = "detector")]
    pub preset: Option<portcullis_core::Preset>,
    /// Load rules from this directory instead of the embedded rules.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// The name of the server given after `--`: its identity in the state store
    /// and the audit log (pins, review items, taint labels and records are keyed
    /// by it), so servers sharing one store keep their pins apart. `wrap` writes
    /// the client configuration's name of the entry here. Default: derived from
    /// the command (docs/gateway.md), e.g. `server-everything` for `npx -y
    /// @modelcontextprotocol/server-everything`.
    #[arg(long, value_name = "NAME", conflicts_with = "gateway")]
    pub name: Option<String>,
    /// A variable of this process's environment that is part of the server's
    /// launch (repeatable): the launch record keeps its name and a digest of
    /// its value, so a changed value is reported as a launch change. `wrap`
    /// writes one per variable of the entry's `env`.
    #[arg(long, value_name = "NAME", conflicts_with = "gateway")]
    pub launch_env: Vec<String>,
    /// Threads of the async runtime. Default: 1 when the gateway serves only
    /// the one client on its stdio (measured faster on small messages: fewer
    /// hand-offs between threads; long results are inspected on a separate
    /// pool either way), else one per CPU.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    /// The upstream server's command and arguments (passed as given).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn default_audit_log() -> PathBuf {
    if let Some(p) = std::env::var_os("PORTCULLIS_AUDIT_LOG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/state/portcullis/audit.jsonl"),
        None => PathBuf::from("portcullis-audit.jsonl"),
    }
}

fn gateway_config(args: &ProxyArgs) -> Result<GatewayConfig> {
    let mut cfg = match (&args.gateway, args.command.split_first()) {
        (Some(_), Some(_)) => bail!(
            "give either --config FILE or `-- COMMAND ARGS…`, not both (a gateway file lists \
             its servers itself)"
        ),
        (None, None) => bail!(
            "nothing to front: give --config FILE or `-- COMMAND ARGS…` (e.g. `portcullis \
             proxy --name time -- uvx mcp-server-time`)"
        ),
        (Some(path), None) => GatewayConfig::read(path).with_context(|| {
            format!(
                "loading gateway configuration {} (fix the file; docs/gateway.md lists its keys)",
                path.display()
            )
        })?,
        (None, Some((cmd, rest))) => GatewayConfig::single_stdio(
            args.name.as_deref(),
            cmd,
            rest,
            AuditConfig::at(default_audit_log()),
        ),
    };
    if args.name.as_deref() == Some("") {
        bail!("--name is empty; give the server a name (its identity in the state store)");
    }
    if !args.launch_env.is_empty() {
        if let [one] = cfg.servers.as_mut_slice() {
            one.launch_env = args.launch_env.clone();
        }
    }
    if let Some(log) = &args.audit_log {
        cfg.audit.log = log.clone();
        cfg.audit.index = None;
    }
    if args.no_fsync {
        cfg.audit.durability = Some(portcullis_mcp::audit::Durability::None);
        cfg.audit.fsync = None;
    }
    if let Some(l) = &args.listen {
        cfg.listen = Some(l.clone());
    }
    if args.no_stdio {
        cfg.stdio = false;
    }
    if let Some(l) = &args.metrics_listen {
        cfg.metrics.listen = Some(l.clone());
    }
    // The error names the file's problem itself ("invalid gateway configuration: …").
    cfg.validate()?;
    Ok(cfg)
}

fn detector(args: &ProxyArgs, cfg: &GatewayConfig) -> Result<Detector> {
    DetectorArgs {
        config: args.detector.clone().or_else(|| cfg.detector.clone()),
        preset: args.preset,
        rules: args.rules.clone(),
        lexical: false,
        no_lexical: false,
        embedding: false,
        no_embedding: false,
    }
    .load()
}

/// The start-up line: where the audit log goes and which servers are served.
fn log_ready(cfg: &GatewayConfig) {
    let servers: Vec<&str> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
    tracing::info!(audit = %cfg.audit.log.display(), servers = %servers.join(","), "gateway ready");
}

pub fn run(args: ProxyArgs) -> Result<ExitCode> {
    let cfg = gateway_config(&args)?;
    let detector = detector(&args, &cfg)?;
    let one_client = cfg.stdio && cfg.listen.is_none();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    // Unset (and not one client): tokio's default, one per CPU.
    if let Some(n) = args
        .worker_threads
        .map(usize::from)
        .or(one_client.then_some(1))
    {
        rt.worker_threads(n);
    }
    let rt = rt
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = rt.block_on(async move {
        let ct = CancellationToken::new();
        stop_on_signal(ct.clone());
        if one_client {
            return stdio_only(cfg, detector, ct).await;
        }
        let gw = Gateway::start(cfg.clone(), detector)
            .await
            .context("starting the gateway")?;
        log_ready(&cfg);
        let mut tasks = tokio::task::JoinSet::new();
        if let Some(metrics) = bind_metrics(&gw, &cfg).await? {
            let ct2 = ct.clone();
            tasks.spawn(async move { metrics.serve(ct2).await.map_err(anyhow::Error::from) });
        }
        if let Some(listen) = &cfg.listen {
            let http = serve::bind_http(gw.clone(), &cfg, listen, ct.child_token())
                .await
                .context("HTTP listener")?;
            // Tests and scripts read this line to find a port chosen by the OS. One
            // write: the upstream shares this stderr, and `eprintln!` writes a line
            // in pieces another process's output could land between (a test read
            // `http://127.0.0.1:PORT` + a server's log line as the URL).
            let line = format!(
                "portcullis: listening on http://{}{}\n",
                http.addr, cfg.http_path
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            let ct2 = ct.clone();
            tasks.spawn(async move { http.serve(ct2).await.map_err(anyhow::Error::from) });
        }
        if cfg.stdio {
            let gw2 = gw.clone();
            let ct2 = ct.clone();
            tasks.spawn(async move {
                let r = tokio::select! {
                    r = serve::serve_stdio(gw2) => r.map_err(anyhow::Error::from),
                    // A signal or a failed listener ends the stdio session too.
                    _ = ct2.cancelled() => Ok(()),
                };
                // The stdio client hung up: the gateway's job is done.
                ct2.cancel();
                r
            });
        }
        let mut result = Ok(());
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(Err(e)) => {
                    ct.cancel();
                    result = Err(e);
                }
                Err(e) => {
                    ct.cancel();
                    result = Err(anyhow::anyhow!("listener task failed: {e}"));
                }
                Ok(Ok(())) => {}
            }
        }
        gw.shutdown().await;
        result.map(|_| ExitCode::SUCCESS)
    });
    // A blocking read of stdin (when it is not a pipe) never returns on its own:
    // do not wait for it once the gateway has shut down.
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    outcome
}

/// The metrics endpoint of `[metrics] listen`, bound (its line printed), if set.
async fn bind_metrics(
    gw: &std::sync::Arc<Gateway>,
    cfg: &GatewayConfig,
) -> Result<Option<serve::HttpListener>> {
    if cfg.metrics.listen.is_none() {
        return Ok(None);
    }
    let metrics = serve::bind_metrics(gw.clone(), &cfg.metrics)
        .await
        .context("metrics endpoint ([metrics] listen / --metrics-listen)")?;
    // Tests and scripts read this line to find a port chosen by the OS.
    eprintln!("portcullis: metrics on http://{}/metrics", metrics.addr);
    Ok(Some(metrics))
}

/// Ctrl-C and SIGTERM (how clients stop their servers) end the gateway cleanly:
/// upstreams closed, queued state written.
fn stop_on_signal(stop: CancellationToken) {
    tokio::spawn(async move {
        stop_signal().await;
        stop.cancel();
    });
}

/// Resolves at the first Ctrl-C or SIGTERM. A signal that cannot be watched is
/// no reason to stop: its half never resolves.
pub(crate) async fn stop_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// One client over stdio and nothing else: the gateway starts once the client's
/// `initialize` has been read, so the upstreams are told exactly the
/// capabilities this client declared (a server then offers no sampling tool to
/// a client that cannot sample). A failure to start is reported to stderr and
/// in the exit status, as before; the client sees its connection close.
async fn stdio_only(
    cfg: GatewayConfig,
    detector: Detector,
    ct: CancellationToken,
) -> Result<ExitCode> {
    let started: std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<Gateway>>>> =
        Default::default();
    let slot = started.clone();
    let metrics_ct = ct.clone();
    let serve = serve::serve_stdio_first(move |client| async move {
        let gw = Gateway::start_for(cfg.clone(), detector, client.as_ref())
            .await
            .context("starting the gateway")?;
        log_ready(&cfg);
        if let Some(metrics) = bind_metrics(&gw, &cfg).await? {
            tokio::spawn(async move {
                if let Err(e) = metrics.serve(metrics_ct).await {
                    tracing::error!(error = %e, "metrics endpoint stopped");
                }
            });
        }
        if let Ok(mut s) = slot.lock() {
            *s = Some(gw.clone());
        }
        Ok::<_, anyhow::Error>(gw)
    });
    let result = tokio::select! {
        r = serve => r.map_err(anyhow::Error::from),
        _ = ct.cancelled() => Ok(()),
    };
    let gw = started.lock().ok().and_then(|mut s| s.take());
    if let Some(gw) = gw {
        gw.shutdown().await;
    }
    result.map(|_| ExitCode::SUCCESS)
}

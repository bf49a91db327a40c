//! `portcullis-team-load`: the load test of a team's gateway (issue 27 item 5).
//! Several `portcullis proxy` processes on loopback share one PostgreSQL state
//! store (a throw-away cluster, as the tests start); N client sessions spread over
//! them call the project's test server (one Streamable HTTP upstream they all
//! front) for a bounded time. Reports calls/s, p50/p99/max latency, errors, the
//! audit records written against the calls answered (every answered call must
//! have its records), and the resident memory of every gateway and of the
//! database's processes over time. Markdown on stdout, progress on stderr.
//!
//!   cargo build --release -p portcullis -p portcullis-testkit
//!   target/release/portcullis-team-load --sessions 48 --seconds 600 > load.md

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use portcullis_testkit::pg::Cluster;
use portcullis_testkit::process::{sibling, spawn_listening, vm_rss_kib};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Command;

#[derive(Parser)]
#[command(about = "Load test: gateways sharing one PostgreSQL, many sessions, bounded time")]
struct Args {
    /// Gateways (processes) sharing the store.
    #[arg(long, default_value_t = 3)]
    gateways: usize,
    /// Client sessions, spread round-robin over the gateways.
    #[arg(long, default_value_t = 48)]
    sessions: usize,
    /// How long the sessions call, in seconds.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Result size of each call (the test server's `payload` tool), KiB.
    #[arg(long, default_value_t = 1)]
    kib: u32,
    /// Memory sampling interval, seconds.
    #[arg(long, default_value_t = 60)]
    sample_every: u64,
    /// The `portcullis` binary (default: next to this one).
    #[arg(long)]
    portcullis: Option<PathBuf>,
    /// The `portcullis-testserver` binary (default: next to this one).
    #[arg(long)]
    testserver: Option<PathBuf>,
}

/// The postmaster of the cluster in `dir` and every process it started.
fn postgres_rss_kib(dir: &Path) -> u64 {
    let Some(master) = std::fs::read_to_string(dir.join("data/postmaster.pid"))
        .ok()
        .and_then(|s| s.lines().next()?.trim().parse::<u32>().ok())
    else {
        return 0;
    };
    let mut total = vm_rss_kib(master).unwrap_or(0);
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let after = s.rsplit_once(')')?.1.to_string();
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                });
            if ppid == Some(master) {
                total += vm_rss_kib(pid).unwrap_or(0);
            }
        }
    }
    total
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)]) / 1000.0
}

fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.gateways == 0 || args.sessions == 0 {
        bail!("--gateways and --sessions must be at least 1");
    }
    let portcullis = match args.portcullis.clone() {
        Some(p) => p,
        None => sibling("portcullis")?,
    };
    let testserver = match args.testserver.clone() {
        Some(p) => p,
        None => sibling("portcullis-testserver")?,
    };
    eprintln!("load: starting PostgreSQL");
    let pg = tokio::task::spawn_blocking(|| {
        let c = Cluster::start().map_err(|e| anyhow!(e))?;
        let url = c.create_db("load").map_err(|e| anyhow!(e))?;
        Ok::<_, anyhow::Error>((c, url))
    })
    .await??;
    let (cluster, state_url) = pg;
    let pg_version = std::process::Command::new("psql")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();

    let mut up = Command::new(&testserver);
    up.args([
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
        "--profile",
        "benign",
    ]);
    let (_upstream, upstream_url) = spawn_listening(up, "listening on ").await?;

    let work = tempfile::tempdir()?;
    let mut gateways = Vec::new();
    for g in 0..args.gateways {
        let dir = work.path().join(format!("gw{g}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("gateway.toml"),
            format!(
                "listen = \"127.0.0.1:0\"\n[audit]\nlog = \"audit.jsonl\"\n\
                 [state]\nurl = {state_url:?}\n\
                 [[server]]\nname = \"kit\"\nurl = {upstream_url:?}\n"
            ),
        )?;
        let mut cmd = Command::new(&portcullis);
        cmd.args(["proxy", "--config", "gateway.toml"])
            .current_dir(&dir);
        let (child, url) = spawn_listening(cmd, "listening on ").await?;
        let pid = child.id().context("gateway pid")?;
        eprintln!("load: gateway {g} pid {pid} at {url}");
        gateways.push((child, url, dir, pid));
    }

    let mut clients: Vec<RunningService<RoleClient, ()>> = Vec::new();
    let mut tool = None;
    for s in 0..args.sessions {
        let url = &gateways[s % gateways.len()].1;
        let c =
            ().serve(StreamableHttpClientTransport::from_uri(url.as_str()))
                .await
                .with_context(|| format!("session {s}: initialize"))?;
        let listed = c.peer().list_all_tools().await.context("tools/list")?;
        // One server: its tools are not namespaced.
        tool = listed
            .iter()
            .map(|t| t.name.to_string())
            .find(|n| n == "payload" || n.ends_with("__payload"));
        clients.push(c);
    }
    let tool = tool.context("the gateways list no `payload` tool")?;
    eprintln!(
        "load: {} sessions over {} gateways, {} s",
        args.sessions, args.gateways, args.seconds
    );

    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    let expected = args.kib as usize * 1024;
    let mut tasks = Vec::new();
    for c in &clients {
        let peer = c.peer().clone();
        let kib = args.kib;
        let tool = tool.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0u64;
            let mut first_error = None;
            while Instant::now() < deadline {
                let mut p = CallToolRequestParams::new(tool.clone());
                p.arguments = json!({ "kib": kib }).as_object().cloned();
                let t = Instant::now();
                match peer.call_tool(p).await {
                    Ok(r) if r.is_error != Some(true) => {
                        let v = serde_json::to_value(&r).unwrap_or(Value::Null);
                        let len = v["content"][0]["text"].as_str().map_or(0, str::len);
                        if len == expected {
                            lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                        } else {
                            errors += 1;
                            first_error.get_or_insert(format!("result of {len} bytes"));
                        }
                    }
                    Ok(r) => {
                        errors += 1;
                        first_error.get_or_insert(format!("{r:?}"));
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e.to_string());
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    // Memory over time.
    let mut samples: Vec<(u64, Vec<u64>, u64)> = Vec::new();
    let pids: Vec<u32> = gateways.iter().map(|g| g.3).collect();
    let sample = |t: u64| {
        (
            t,
            pids.iter().map(|p| vm_rss_kib(*p).unwrap_or(0)).collect(),
            postgres_rss_kib(cluster.dir()),
        )
    };
    samples.push(sample(0));
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_secs(args.sample_every))).await;
        let t = start.elapsed().as_secs();
        samples.push(sample(t));
        eprintln!(
            "load: {t} s, gateways VmRSS {:?} KiB",
            samples.last().map(|s| &s.1)
        );
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for t in tasks {
        let (l, e, f) = t.await?;
        lat.extend(l);
        errors += e;
        if first_error.is_none() {
            first_error = f;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(clients);
    // Let the gateways finish their answers' records, then stop them (SIGTERM:
    // they flush and exit).
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (child, _, _, pid) in &mut gateways {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
        let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    }
    lat.sort_unstable();
    let answered = lat.len() as u64;
    let mut per_gateway = String::new();
    let (mut results_recorded, mut args_recorded) = (0u64, 0u64);
    for (g, (_, _, dir, _)) in gateways.iter().enumerate() {
        let recs = records(&dir.join("audit.jsonl"));
        let res = recs
            .iter()
            .filter(|r| r["tool"] == "payload" && r["channel"] == "tool_result")
            .count() as u64;
        let arg = recs
            .iter()
            .filter(|r| r["tool"] == "payload" && r["channel"] == "tool_arguments")
            .count() as u64;
        results_recorded += res;
        args_recorded += arg;
        let _ = writeln!(per_gateway, "| {g} | {} | {arg} | {res} |", recs.len());
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Load: {} gateways, one PostgreSQL, {} sessions, {:.0} s\n",
        args.gateways, args.sessions, elapsed
    );
    let _ = writeln!(
        out,
        "`portcullis-team-load --gateways {} --sessions {} --seconds {} --kib {}`; {}; \
         upstream: portcullis-testserver `payload` ({} KiB results) over Streamable HTTP; \
         {} logical CPUs.\n",
        args.gateways,
        args.sessions,
        args.seconds,
        args.kib,
        pg_version,
        args.kib,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        out,
        "| calls answered | calls/s | p50 ms | p99 ms | max ms | errors |\n|---|---|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| {answered} | {:.1} | {:.2} | {:.2} | {:.2} | {errors} |\n",
        answered as f64 / elapsed,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        percentile(&lat, 1.0)
    );
    if let Some(e) = first_error {
        let _ = writeln!(out, "First error: `{e}`\n");
    }
    let _ = writeln!(
        out,
        "| gateway | records | `tool_arguments` records of calls | `tool_result` records |\n|---|---|---|---|\n{per_gateway}"
    );
    let _ =
        writeln!(
        out,
        "Calls answered {answered} + errors {errors}; argument records {args_recorded}; result \
         records {results_recorded}: every answered call's result has its record: **{}**.\n",
        if results_recorded >= answered { "yes" } else { "NO" }
    );
    let _ = writeln!(
        out,
        "| t (s) | {} | PostgreSQL (all processes) |\n|---|{}---|",
        (0..args.gateways)
            .map(|g| format!("gateway {g} VmRSS MiB"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(args.gateways)
    );
    for (t, g, p) in &samples {
        let _ = writeln!(
            out,
            "| {t} | {} | {:.1} |",
            g.iter()
                .map(|k| format!("{:.1}", *k as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(" | "),
            *p as f64 / 1024.0
        );
    }
    print!("{out}");
    drop(cluster);
    if results_recorded < answered {
        bail!("{answered} calls answered but {results_recorded} result records");
    }
    if answered == 0 {
        bail!("no call was answered");
    }
    Ok(())
}

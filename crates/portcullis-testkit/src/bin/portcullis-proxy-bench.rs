//! `portcullis-proxy-bench`: the cost of `portcullis proxy`, measured in one run,
//! interleaved: the same rmcp client and the same upstream, once directly and once
//! through the gateway, over stdio and over Streamable HTTP.
//!
//! Per cell (transport × upstream tool × sequential/concurrent) the calls are split
//! into rounds; each round runs a batch directly and a batch through the gateway,
//! alternating which goes first, so machine noise hits both sides alike.
//!
//! - stdio, direct: the client spawns the upstream; through the gateway: the client
//!   spawns `portcullis proxy -- UPSTREAM`. Concurrency on stdio is one session with
//!   N calls in flight (one process each side).
//! - HTTP: one upstream HTTP server; direct = N client sessions to it; through the
//!   gateway = N client sessions to one `portcullis proxy --listen` whose upstream is
//!   that same HTTP server (configured by `url`).
//!
//! With `--floor bytes`, a bare relay takes the gateway's place: a process that
//! copies bytes between the client and the upstream (stdio: its stdin/stdout and
//! the upstream's pipes; HTTP: TCP to the upstream's port), with no parsing,
//! inspection or logging: the floor any gateway in a separate process starts
//! from. With `--floor rmcp`, a pass-through built on rmcp does: an rmcp server
//! (stdio or Streamable HTTP) whose tools/list and tools/call go to an rmcp
//! client of the upstream, with no inspection and no log: the floor of a gateway
//! built on rmcp, as issue 6 asks.
//!
//! Then a long run through the gateway (HTTP, N sessions, 1 KiB results) with the
//! gateway's resident memory (VmRSS from /proc/PID/status) sampled before and after.
//! The output is a Markdown report on stdout (progress on stderr).

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use portcullis_testkit::process::{free_port, sibling, spawn_listening, vm_rss_kib};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(Parser)]
#[command(
    about = "Latency, throughput and memory of `portcullis proxy` vs a direct connection",
    args_override_self = true
)]
struct Args {
    /// The `portcullis` binary (default: next to this binary).
    #[arg(long)]
    portcullis: Option<PathBuf>,
    /// The `portcullis-testserver` binary (default: next to this binary).
    #[arg(long)]
    testserver: Option<PathBuf>,
    /// Node and server-everything's `dist/index.js` (default: from .interop/ if
    /// installed; the echo rows are skipped without them).
    #[arg(long, num_args = 2, value_names = ["NODE", "SCRIPT"])]
    everything: Option<Vec<PathBuf>>,
    /// Measured calls per cell and side (split over the rounds).
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Interleaving rounds per cell.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Unmeasured warm-up calls per cell and side (at least the concurrency).
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Result sizes of the test server's `payload` tool, in KiB.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    kib: Vec<u32>,
    /// Concurrent sessions (HTTP) / in-flight calls (stdio).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Calls of the long run through the gateway (memory before/after); 0 = skip.
    #[arg(long, default_value_t = 100_000)]
    long: usize,
    /// Pass --no-fsync to the gateway.
    #[arg(long)]
    no_fsync: bool,
    /// Turn the gateway's embedding stage on (balanced preset + embedding; needs
    /// scripts/fetch-models.sh).
    #[arg(long)]
    embedding: bool,
    /// One more argument for `portcullis proxy` (repeat for several), e.g.
    /// `--gateway-arg=--detector --gateway-arg=FILE` to measure another
    /// configuration.
    #[arg(long = "gateway-arg", allow_hyphen_values = true)]
    gateway_args: Vec<String>,
    /// HTTP clients keep their connections (as the Python and TypeScript SDKs
    /// do) instead of rmcp's default of a new connection per request; so does
    /// the gateway toward its upstream (`[[server]] keep_alive`).
    #[arg(long)]
    keep_alive: bool,
    /// Put a floor in the gateway's place: `bytes` (a bare byte relay, no
    /// parsing) or `rmcp` (an rmcp pass-through, no inspection, no log).
    #[arg(long, value_enum)]
    floor: Option<Floor>,
    /// Transports to measure.
    #[arg(long, value_delimiter = ',', default_value = "stdio,http")]
    transports: Vec<String>,
    /// Directory for the gateway's audit log (default: a temporary directory,
    /// removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

type Client = RunningService<RoleClient, ()>;

/// One side of a comparison: the sessions to call on and the processes behind them.
struct Side {
    sessions: Vec<Peer<RoleClient>>,
    _clients: Vec<Client>,
    /// The gateway process, when this side goes through it.
    gateway_pid: Option<u32>,
    _children: Vec<Child>,
}

#[derive(Clone)]
struct Tool {
    label: String,
    name: &'static str,
    args: Value,
    /// What a forwarded result looks like; anything else was withheld by the gateway.
    expect: Expect,
}

#[derive(Clone)]
enum Expect {
    /// The text has exactly this many bytes.
    Len(usize),
    /// The text contains this.
    Contains(&'static str),
}

impl Expect {
    fn matches(&self, text: &str) -> bool {
        match self {
            Expect::Len(n) => text.len() == *n,
            Expect::Contains(s) => text.contains(s),
        }
    }
}

#[derive(Default, Clone)]
struct Samples {
    lat_us: Vec<u64>,
    calls: usize,
    /// Calls whose result was not the upstream's (withheld or rewritten).
    withheld: usize,
    wall: Duration,
}

impl Samples {
    fn pct(&mut self, p: f64) -> f64 {
        self.lat_us.sort_unstable();
        if self.lat_us.is_empty() {
            return f64::NAN;
        }
        let i = ((p * self.lat_us.len() as f64).ceil() as usize).clamp(1, self.lat_us.len()) - 1;
        self.lat_us[i] as f64 / 1000.0
    }
    fn throughput(&self) -> f64 {
        self.calls as f64 / self.wall.as_secs_f64()
    }
}

async fn stdio_client(cmd: &Path, args: &[String]) -> Result<(Client, Child)> {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("spawning {}", cmd.display()))?;
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let inp = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
    let client = ()
        .serve(AsyncRwTransport::new_client(out, inp))
        .await
        .with_context(|| format!("initializing {}", cmd.display()))?;
    client.peer().list_all_tools().await.context("tools/list")?;
    Ok((client, child))
}

async fn http_clients(url: &str, n: usize, keep_alive: bool) -> Result<Vec<Client>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let transport = if keep_alive {
            let http = reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .context("building the HTTP client")?;
            StreamableHttpClientTransport::with_client(
                http,
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.to_string(),
                ),
            )
        } else {
            StreamableHttpClientTransport::from_uri(url.to_string())
        };
        let c = ().serve(transport).await.with_context(|| format!("initializing {url}"))?;
        c.peer().list_all_tools().await.context("tools/list")?;
        v.push(c);
    }
    Ok(v)
}

/// server-everything over Streamable HTTP on a free port (it prints no usable line;
/// poll the port).
async fn spawn_everything_http(node: &Path, script: &Path) -> Result<(Child, String)> {
    let port = free_port()?;
    let child = Command::new(node)
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("spawning server-everything")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("server-everything did not listen on {port}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((child, format!("http://127.0.0.1:{port}/mcp")))
}

struct Env {
    portcullis: PathBuf,
    testserver: PathBuf,
    everything: Option<(PathBuf, PathBuf)>,
    work: PathBuf,
    no_fsync: bool,
    /// A floor in the gateway's place (`--floor`).
    floor: Option<Floor>,
    /// Keep-alive HTTP clients (`--keep-alive`).
    keep_alive: bool,
    /// Extra arguments for `portcullis proxy` (`--gateway-arg`).
    gateway_args: Vec<String>,
    /// Detector configuration for the gateway (--detector), when not the default.
    detector: Option<PathBuf>,
    concurrency: usize,
}

impl Env {
    fn proxy_base(&self, tag: &str) -> Vec<String> {
        let mut a = vec![
            "proxy".to_string(),
            "--audit-log".to_string(),
            self.work.join(format!("{tag}.jsonl")).display().to_string(),
        ];
        if self.no_fsync {
            a.push("--no-fsync".into());
        }
        if let Some(d) = &self.detector {
            a.push("--detector".into());
            a.push(d.display().to_string());
        }
        a.extend(self.gateway_args.iter().cloned());
        a
    }

    /// (direct, through the gateway) over stdio for an upstream command.
    async fn stdio_pair(&self, tag: &str, upstream: &[String]) -> Result<(Side, Side)> {
        let (dc, dchild) = stdio_client(Path::new(&upstream[0]), &upstream[1..]).await?;
        let (gateway, args) = if let Some(floor) = self.floor {
            let mut args = vec![floor.stdio_arg().to_string()];
            args.extend(upstream.iter().cloned());
            (std::env::current_exe()?, args)
        } else {
            let mut args = self.proxy_base(tag);
            args.push("--".into());
            args.extend(upstream.iter().cloned());
            (self.portcullis.clone(), args)
        };
        let (pc, pchild) = stdio_client(&gateway, &args).await?;
        let pid = pchild.id();
        Ok((
            Side {
                sessions: vec![dc.peer().clone()],
                _clients: vec![dc],
                gateway_pid: None,
                _children: vec![dchild],
            },
            Side {
                sessions: vec![pc.peer().clone()],
                _clients: vec![pc],
                gateway_pid: pid,
                _children: vec![pchild],
            },
        ))
    }

    /// (direct, through the gateway) over HTTP: N sessions to the upstream URL, and N
    /// sessions to a gateway fronting that same URL.
    async fn http_pair(&self, tag: &str, upstream_url: &str) -> Result<(Side, Side)> {
        let cfg = self.work.join(format!("{tag}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "[audit]\nlog = {:?}\n[[server]]\nname = \"up\"\nurl = {upstream_url:?}\nkeep_alive = {}\n",
                self.work.join(format!("{tag}.jsonl")).display().to_string(),
                self.keep_alive
            ),
        )?;
        let (gchild, gurl) = if let Some(floor) = self.floor {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args([floor.http_arg(), upstream_url]);
            if self.keep_alive {
                cmd.arg("keep-alive");
            }
            spawn_listening(cmd, "relay: listening on ").await?
        } else {
            let mut cmd = Command::new(&self.portcullis);
            cmd.args(["proxy", "--listen", "127.0.0.1:0", "--no-stdio", "--config"])
                .arg(&cfg);
            if self.no_fsync {
                cmd.arg("--no-fsync");
            }
            if let Some(d) = &self.detector {
                cmd.arg("--detector").arg(d);
            }
            cmd.args(&self.gateway_args);
            spawn_listening(cmd, "portcullis: listening on ").await?
        };
        let pid = gchild.id();
        let direct = http_clients(upstream_url, self.concurrency, self.keep_alive).await?;
        let proxied = http_clients(&gurl, self.concurrency, self.keep_alive).await?;
        Ok((
            Side {
                sessions: direct.iter().map(|c| c.peer().clone()).collect(),
                _clients: direct,
                gateway_pid: None,
                _children: vec![],
            },
            Side {
                sessions: proxied.iter().map(|c| c.peer().clone()).collect(),
                _clients: proxied,
                gateway_pid: pid,
                _children: vec![gchild],
            },
        ))
    }
}

/// One call: its latency in microseconds, and whether the upstream's result arrived.
async fn one_call(peer: &Peer<RoleClient>, tool: &Tool) -> Result<(u64, bool)> {
    let mut params = CallToolRequestParams::new(tool.name);
    params.arguments = tool.args.as_object().cloned();
    let t = Instant::now();
    let r = peer.call_tool(params).await.context("tools/call")?;
    let us = t.elapsed().as_micros() as u64;
    if r.is_error == Some(true) {
        bail!("{} returned an error result: {:?}", tool.name, r.content);
    }
    let forwarded = r
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .any(|t| tool.expect.matches(&t.text));
    Ok((us, forwarded))
}

/// `calls` calls with `concurrency` workers (each on session `i % sessions`).
async fn batch(side: &Side, tool: &Tool, calls: usize, concurrency: usize) -> Result<Samples> {
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for w in 0..concurrency {
        let n = calls / concurrency + usize::from(w < calls % concurrency);
        let peer = side.sessions[w % side.sessions.len()].clone();
        let tool = tool.clone();
        set.spawn(async move {
            let mut lat = Vec::with_capacity(n);
            let mut withheld = 0;
            for _ in 0..n {
                let (us, forwarded) = one_call(&peer, &tool).await?;
                lat.push(us);
                withheld += usize::from(!forwarded);
            }
            Ok::<_, anyhow::Error>((lat, withheld))
        });
    }
    let mut s = Samples::default();
    while let Some(r) = set.join_next().await {
        let (lat, withheld) = r??;
        s.lat_us.extend(lat);
        s.withheld += withheld;
    }
    s.wall = start.elapsed();
    s.calls = s.lat_us.len();
    Ok(s)
}

struct Row {
    transport: &'static str,
    tool: String,
    mode: String,
    direct: Samples,
    proxy: Samples,
    /// Why the cell has no figures.
    error: Option<String>,
}

/// Interleaved rounds of direct and proxied batches.
async fn measure(
    direct: &Side,
    proxy: &Side,
    tool: &Tool,
    args: &Args,
    concurrency: usize,
) -> Result<(Samples, Samples)> {
    let (calls, rounds) = (args.calls, args.rounds);
    // Warm-up, not measured.
    batch(direct, tool, args.warmup.max(concurrency), concurrency).await?;
    batch(proxy, tool, args.warmup.max(concurrency), concurrency).await?;
    let mut d = Samples::default();
    let mut p = Samples::default();
    let per = (calls / rounds).max(concurrency);
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_direct in order {
            let (side, acc) = if is_direct {
                (direct, &mut d)
            } else {
                (proxy, &mut p)
            };
            let s = batch(side, tool, per, concurrency).await?;
            acc.lat_us.extend(s.lat_us);
            acc.calls += s.calls;
            acc.withheld += s.withheld;
            acc.wall += s.wall;
        }
    }
    Ok((d, p))
}

fn payload(kib: u32) -> Tool {
    Tool {
        label: format!("testserver payload {kib} KiB"),
        name: "payload",
        args: json!({ "kib": kib }),
        expect: Expect::Len(kib as usize * 1024),
    }
}

fn echo() -> Tool {
    Tool {
        label: "server-everything echo".into(),
        name: "echo",
        args: json!({"message": "hello from the proxy benchmark"}),
        expect: Expect::Contains("hello from the proxy benchmark"),
    }
}

async fn cells(
    env: &Env,
    transport: &'static str,
    tools: &[Tool],
    direct: &Side,
    proxy: &Side,
    args: &Args,
    rows: &mut Vec<Row>,
) -> Result<()> {
    for tool in tools {
        for conc in [1, env.concurrency] {
            let mode = if conc == 1 {
                "sequential".to_string()
            } else if transport == "stdio" {
                format!("{conc} in flight, 1 session")
            } else {
                format!("{conc} sessions")
            };
            eprintln!("bench: {transport} {} {mode}", tool.label);
            // A cell that fails (e.g. the gateway withholds the tool) is reported as
            // such and the run goes on.
            let (direct, proxy, error) = match measure(direct, proxy, tool, args, conc).await {
                Ok((d, p)) => (d, p, None),
                Err(e) => {
                    eprintln!("bench:   failed: {e:#}");
                    (
                        Samples::default(),
                        Samples::default(),
                        Some(format!("{e:#}")),
                    )
                }
            };
            rows.push(Row {
                transport,
                tool: tool.label.clone(),
                mode,
                direct,
                proxy,
                error,
            });
        }
    }
    Ok(())
}

async fn run(args: Args) -> Result<String> {
    let tmp = tempfile_dir(&args)?;
    let result = run_in(&args, &tmp).await;
    // The audit logs of a long run are large: remove them unless asked to keep them.
    if args.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

async fn run_in(args: &Args, tmp: &Path) -> Result<String> {
    let everything = match &args.everything {
        Some(v) if v.len() == 2 => Some((v[0].clone(), v[1].clone())),
        Some(_) => bail!("--everything takes NODE SCRIPT"),
        None => {
            let node = portcullis_testkit::interop::node();
            let script = portcullis_testkit::interop::npm_file(
                "@modelcontextprotocol/server-everything/dist/index.js",
            );
            (node.is_file() && script.is_file()).then_some((node, script))
        }
    };
    let detector = if args.embedding {
        let models = std::env::current_dir()?.join("models/all-MiniLM-L6-v2");
        if !models.join("model.safetensors").is_file() {
            bail!(
                "--embedding needs the model in {} (scripts/fetch-models.sh)",
                models.display()
            );
        }
        let path = tmp.join("detector-embedding.toml");
        std::fs::write(
            &path,
            format!(
                "preset = \"balanced\"\n[embedding]\nenabled = true\nmodels_dir = {:?}\n",
                models.display().to_string()
            ),
        )?;
        Some(path)
    } else {
        None
    };
    let env = Env {
        detector,
        portcullis: match &args.portcullis {
            Some(p) => p.clone(),
            None => sibling("portcullis")?,
        },
        testserver: match &args.testserver {
            Some(p) => p.clone(),
            None => sibling("portcullis-testserver")?,
        },
        everything,
        work: tmp.to_path_buf(),
        no_fsync: args.no_fsync,
        floor: args.floor,
        keep_alive: args.keep_alive,
        gateway_args: args.gateway_args.clone(),
        concurrency: args.concurrency,
    };
    let ts = env.testserver.display().to_string();
    let payloads: Vec<Tool> = args.kib.iter().map(|&k| payload(k)).collect();
    let mut rows = Vec::new();
    let mut memory = String::new();
    for transport in &args.transports {
        match transport.as_str() {
            "stdio" => {
                let (d, p) = env
                    .stdio_pair("stdio-kit", std::slice::from_ref(&ts))
                    .await?;
                cells(&env, "stdio", &payloads, &d, &p, args, &mut rows).await?;
                if let Some((node, script)) = &env.everything {
                    let up = [node.display().to_string(), script.display().to_string()];
                    let (d, p) = env.stdio_pair("stdio-everything", &up).await?;
                    cells(&env, "stdio", &[echo()], &d, &p, args, &mut rows).await?;
                }
            }
            "http" => {
                let mut cmd = Command::new(&env.testserver);
                cmd.args(["--transport", "http", "--listen", "127.0.0.1:0"]);
                let (_server, url) = spawn_listening(cmd, "listening on ").await?;
                let (d, p) = env.http_pair("http-kit", &url).await?;
                cells(&env, "http", &payloads, &d, &p, args, &mut rows).await?;
                // The relay's memory says nothing about the gateway's.
                if args.long > 0 && args.floor.is_none() {
                    memory = long_run(&p, args).await?;
                }
                drop((d, p));
                if let Some((node, script)) = &env.everything {
                    let (_ev, url) = spawn_everything_http(node, script).await?;
                    let (d, p) = env.http_pair("http-everything", &url).await?;
                    cells(&env, "http", &[echo()], &d, &p, args, &mut rows).await?;
                }
            }
            other => bail!("unknown transport {other:?} (stdio, http)"),
        }
    }
    Ok(render(&rows, &memory, args))
}

async fn long_run(proxy: &Side, args: &Args) -> Result<String> {
    let pid = proxy
        .gateway_pid
        .ok_or_else(|| anyhow!("no gateway process id"))?;
    let tool = payload(1);
    let before = vm_rss_kib(pid).ok_or_else(|| anyhow!("cannot read /proc/{pid}/status"))?;
    let chunk = 10_000.min(args.long);
    let mut done = 0;
    let mut wall = Duration::ZERO;
    let mut peak = before;
    eprintln!("bench: long run of {} calls through the gateway", args.long);
    while done < args.long {
        let n = chunk.min(args.long - done);
        let s = batch(proxy, &tool, n, args.concurrency).await?;
        done += s.calls;
        wall += s.wall;
        peak = peak.max(vm_rss_kib(pid).unwrap_or(0));
        eprintln!(
            "bench:   {done} calls, VmRSS {} KiB",
            vm_rss_kib(pid).unwrap_or(0)
        );
    }
    let after = vm_rss_kib(pid).ok_or_else(|| anyhow!("cannot read /proc/{pid}/status"))?;
    Ok(format!(
        "Long run through the gateway (HTTP, {} sessions, payload 1 KiB): {done} calls in {:.1} s \
         ({:.0} calls/s). Gateway VmRSS before {:.1} MiB, after {:.1} MiB, highest sample {:.1} MiB \
         (sampled every {chunk} calls).\n",
        args.concurrency,
        wall.as_secs_f64(),
        done as f64 / wall.as_secs_f64(),
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        peak as f64 / 1024.0,
    ))
}

fn tempfile_dir(args: &Args) -> Result<PathBuf> {
    let dir = match &args.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("portcullis-proxy-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn render(rows: &[Row], memory: &str, args: &Args) -> String {
    let mut out = String::new();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        out,
        "{}{}; HTTP clients: {}; audit durability: {}; calls per cell and side: {} \
         in {} interleaved rounds; CPUs: {cpus}; load average at the end: {}\n",
        if args.floor == Some(Floor::Bytes) {
            "gateway column: a bare byte relay (--floor bytes), no gateway"
        } else if args.floor == Some(Floor::Rmcp) {
            "gateway column: an rmcp pass-through (--floor rmcp), no inspection, no log"
        } else if args.embedding {
            "detector: balanced preset, rules + lexical + embedding"
        } else {
            "detector: balanced preset, rules + lexical"
        },
        if args.gateway_args.is_empty() {
            String::new()
        } else {
            format!(" (gateway arguments: {})", args.gateway_args.join(" "))
        },
        if args.keep_alive {
            "keep-alive (--keep-alive)"
        } else {
            "a connection per request (rmcp's default)"
        },
        if args.no_fsync {
            "none (--no-fsync)"
        } else {
            "the gateway's default (group: fsync within 50 ms)"
        },
        args.calls,
        args.rounds,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    );
    let _ = writeln!(
        out,
        "| transport | upstream tool | mode | direct p50 / p95 / p99 ms | gateway p50 / p95 / p99 ms | p50 × | direct calls/s | gateway calls/s | throughput × | withheld |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        if let Some(e) = &r.error {
            let _ = writeln!(
                out,
                "| {} | {} | {} | failed: {} | | | | | | |",
                r.transport,
                r.tool,
                r.mode,
                e.replace('|', "/").replace('\n', " ")
            );
            continue;
        }
        let mut d = r.direct.clone();
        let mut p = r.proxy.clone();
        let (d50, d95, d99) = (d.pct(0.5), d.pct(0.95), d.pct(0.99));
        let (p50, p95, p99) = (p.pct(0.5), p.pct(0.95), p.pct(0.99));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {d50:.3} / {d95:.3} / {d99:.3} | {p50:.3} / {p95:.3} / {p99:.3} | {:.2} | {:.0} | {:.0} | {:.2} | {}/{} |",
            r.transport,
            r.tool,
            r.mode,
            p50 / d50,
            d.throughput(),
            p.throughput(),
            p.throughput() / d.throughput(),
            p.withheld,
            p.calls,
        );
    }
    if !memory.is_empty() {
        let _ = writeln!(out, "\n{memory}");
    }
    out
}

/// What takes the gateway's place with `--floor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Floor {
    /// A bare byte relay: no parsing, no inspection, no log.
    Bytes,
    /// An rmcp server forwarding tools/list and tools/call to an rmcp client.
    Rmcp,
}

impl Floor {
    fn stdio_arg(self) -> &'static str {
        match self {
            Floor::Bytes => RELAY_STDIO,
            Floor::Rmcp => RELAY_RMCP_STDIO,
        }
    }
    fn http_arg(self) -> &'static str {
        match self {
            Floor::Bytes => RELAY_TCP,
            Floor::Rmcp => RELAY_RMCP_HTTP,
        }
    }
}

/// The async runtime of the benchmark and of its relays.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Hidden first arguments: run as a floor of `--floor`.
const RELAY_STDIO: &str = "__relay-stdio";
const RELAY_TCP: &str = "__relay-tcp";
const RELAY_RMCP_STDIO: &str = "__relay-rmcp-stdio";
const RELAY_RMCP_HTTP: &str = "__relay-rmcp-http";

/// The newest revision the pass-through negotiates: the gateway's (portcullis-mcp's
/// `MAX_PROTOCOL`), so that the floor answers clients in the same shape. At rmcp's
/// latest (2026-07-28) a client such as Python `mcp` 2.3.0 wants a `resultType` in
/// every result, which the forwarded results lack.
const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The rmcp pass-through of `--floor rmcp`: tools/list and tools/call go to
/// the upstream's peer as they are.
#[derive(Clone)]
struct Passthrough {
    upstream: Peer<RoleClient>,
}

fn passthrough_error(e: rmcp::service::ServiceError) -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(e.to_string(), None)
}

impl rmcp::ServerHandler for Passthrough {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL))
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rmcp-passthrough", "version": "0"}
        }))
        .unwrap_or_default()
    }

    async fn list_tools(
        &self,
        request: Option<rmcp::model::PaginatedRequestParams>,
        _: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        self.upstream
            .list_tools(request)
            .await
            .map_err(passthrough_error)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        self.upstream
            .call_tool(request)
            .await
            .map(rmcp::model::CallToolResponse::Complete)
            .map_err(passthrough_error)
    }
}

/// `__relay-rmcp-stdio CMD ARGS…` and `__relay-rmcp-http URL [keep-alive]`: the pass-through
/// on stdio in front of a stdio child, or on Streamable HTTP (printing
/// `relay: listening on URL'`) in front of an HTTP server.
fn relay_rmcp(http: bool, target: &[String]) -> Result<()> {
    let rt = runtime()?;
    rt.block_on(async move {
        if !http {
            let (prog, rest) = target.split_first().ok_or_else(|| anyhow!("no command"))?;
            let (client, _child) = stdio_client(Path::new(prog), rest).await?;
            let server = Passthrough {
                upstream: client.peer().clone(),
            }
            .serve(rmcp::transport::stdio())
            .await
            .context("serving stdio")?;
            let _ = server.waiting().await;
            return Ok(());
        }
        let url = target.first().ok_or_else(|| anyhow!("no upstream URL"))?;
        let keep_alive = target.get(1).is_some_and(|a| a == "keep-alive");
        let client = http_clients(url, 1, keep_alive)
            .await?
            .pop()
            .ok_or_else(|| anyhow!("no client"))?;
        let upstream = client.peer().clone();
        let service: rmcp::transport::StreamableHttpService<Passthrough, _> =
            rmcp::transport::StreamableHttpService::new(
                move || {
                    Ok(Passthrough {
                        upstream: upstream.clone(),
                    })
                },
                std::sync::Arc::new(
                    rmcp::transport::streamable_http_server::session::local::LocalSessionManager::default(),
                ),
                rmcp::transport::StreamableHttpServerConfig::default(),
            );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        eprintln!("relay: listening on http://{}/mcp", listener.local_addr()?);
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        drop(client);
        Ok(())
    })
}

/// `__relay-stdio CMD ARGS…`: spawn CMD and copy bytes both ways until either side
/// closes, each write flushed at once.
fn relay_stdio(cmd: &[String]) -> Result<()> {
    use std::io::{Read, Write};
    let (prog, rest) = cmd.split_first().ok_or_else(|| anyhow!("no command"))?;
    let mut child = std::process::Command::new(prog)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {prog}"))?;
    let mut to_child = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
    let mut from_child = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut out = std::io::stdout().lock();
        while let Ok(n @ 1..) = from_child.read(&mut buf) {
            if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                break;
            }
        }
        std::process::exit(0);
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut inp = std::io::stdin().lock();
    while let Ok(n @ 1..) = inp.read(&mut buf) {
        if to_child.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    drop(to_child);
    let _ = child.wait();
    Ok(())
}

/// `__relay-tcp URL [keep-alive]` (the flag is for the rmcp relay; bytes are
/// relayed as they come): listen on a free local port and relay every connection to
/// URL's host and port; prints `relay: listening on URL'` (same path) on stderr.
fn relay_tcp(url: &str) -> Result<()> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("not an http:// URL: {url}"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let upstream = authority.to_string();
    let rt = runtime()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        eprintln!(
            "relay: listening on http://{}/{path}",
            listener.local_addr()?
        );
        loop {
            let (mut inbound, _) = listener.accept().await?;
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let _ = inbound.set_nodelay(true);
                if let Ok(mut out) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = out.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    })
}

fn main() -> Result<std::process::ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    match argv.get(1).map(String::as_str) {
        Some(RELAY_STDIO) => {
            return relay_stdio(&argv[2..]).map(|_| std::process::ExitCode::SUCCESS)
        }
        Some(RELAY_RMCP_STDIO) => {
            return relay_rmcp(false, &argv[2..]).map(|_| std::process::ExitCode::SUCCESS)
        }
        Some(RELAY_RMCP_HTTP) => {
            return relay_rmcp(true, &argv[2..]).map(|_| std::process::ExitCode::SUCCESS)
        }
        Some(RELAY_TCP) => {
            let url = argv.get(2).ok_or_else(|| anyhow!("no upstream URL"))?;
            return relay_tcp(url).map(|_| std::process::ExitCode::SUCCESS);
        }
        _ => {}
    }
    let args = Args::parse();
    let rt = runtime()?;
    let report = rt.block_on(run(args))?;
    print!("{report}");
    Ok(std::process::ExitCode::SUCCESS)
}

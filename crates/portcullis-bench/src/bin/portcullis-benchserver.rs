//! `portcullis-benchserver`: one domain of the bench's scenarios as an MCP server
//! (stdio, or Streamable HTTP with `--listen`), acting on a sandbox directory; with
//! `--attack-json` (a whole attack spec, as the runner passes it), `--attack-type`
//! and its flags (values drawn from `--seed`), or `PORTCULLIS_BENCH_ATTACK` (a JSON
//! attack spec), the attack variant made by mutating the domain's benign tools.

use anyhow::{Context, Result};
use clap::Parser;
use portcullis_bench::attack::{AttackSpec, Goal, Role, Vector};
use portcullis_bench::operands::Operands;
use portcullis_bench::payloads::PayloadRef;
use portcullis_bench::sandbox::Sandbox;
use portcullis_bench::server::{self, ServerSetup};
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "MCP scenario server of portcullis bench (benign or attack variant)")]
struct Args {
    /// The trial's sandbox directory (made by the runner).
    #[arg(long)]
    sandbox: PathBuf,
    /// The domain: files, notes, email, calendar, banking, web, code, travel.
    #[arg(long)]
    domain: String,
    /// `main` (the domain's server) or `partner` (the second server of the
    /// cross-server vector: it serves only the attack tools).
    #[arg(long, default_value = "main")]
    role: String,
    /// Serve Streamable HTTP on this address instead of stdio (port 0: any).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// The attack as a JSON attack spec (what the runner passes).
    #[arg(long, conflicts_with = "attack_type")]
    attack_json: Option<String>,
    /// Attack type (NC, PM, PI, OP, UI, FE, TT, RI, PI-UI, …).
    #[arg(long)]
    attack_type: Option<String>,
    /// Vector: description, schema, result, rug_pull, cross_server.
    #[arg(long, requires = "attack_type")]
    vector: Option<String>,
    /// Goal: ssh_key, exfil_phone, modify_phone, kill_process, save_tools,
    /// leak_model, exfil_canary.
    #[arg(long, requires = "attack_type")]
    goal: Option<String>,
    /// Payload register, `seen/terse`, `heldout/german`, or `none`.
    #[arg(long, default_value = "none")]
    payload: String,
    /// The benign tool to mutate.
    #[arg(long, requires = "attack_type")]
    target: Option<String>,
    /// Schema slot (0 nested title, 1 enum value, 2 property name).
    #[arg(long, default_value_t = 0)]
    slot: u8,
    /// Draws the attack's values (tool names, paths, key, numbers, sink) for
    /// `--attack-type`.
    #[arg(long, default_value_t = portcullis_bench::operands::DEFAULT_SEED)]
    seed: u64,
}

fn attack(a: &Args) -> Result<Option<AttackSpec>> {
    if let Some(json) = &a.attack_json {
        return serde_json::from_str(json)
            .map(Some)
            .context("--attack-json is not an attack spec");
    }
    if let Some(kind) = &a.attack_type {
        let need = |o: &Option<String>, what: &str| {
            o.clone()
                .with_context(|| format!("--attack-type needs --{what}"))
        };
        let target = need(&a.target, "target")?;
        return Ok(Some(AttackSpec {
            kind: kind.clone(),
            vector: Vector::parse(&need(&a.vector, "vector")?)?,
            goal: Goal::parse(&need(&a.goal, "goal")?)?,
            payload: PayloadRef::parse(&a.payload)?,
            operands: Operands::draw(a.seed, "portcullis-benchserver", &target),
            external: None,
            target,
            slot: a.slot,
        }));
    }
    match std::env::var("PORTCULLIS_BENCH_ATTACK") {
        Ok(json) if !json.trim().is_empty() => Ok(Some(
            serde_json::from_str(&json).context("PORTCULLIS_BENCH_ATTACK is not an attack spec")?,
        )),
        _ => Ok(None),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PORTCULLIS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let role = match args.role.as_str() {
        "main" => Role::Main,
        "partner" => Role::Partner,
        other => anyhow::bail!("--role must be main or partner, not {other}"),
    };
    let setup = ServerSetup {
        sandbox: Sandbox::at(&args.sandbox),
        domain: args.domain.clone(),
        role,
        attack: attack(&args)?,
    };
    match args.listen {
        Some(addr) => {
            let cancel = tokio_util::sync::CancellationToken::new();
            let c2 = cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    c2.cancel();
                }
            });
            server::serve_http(setup, addr, cancel, |bound| {
                // The runner reads this line to find the port.
                eprintln!("portcullis-benchserver: listening on http://{bound}/mcp");
            })
            .await
            .context("serving Streamable HTTP")
        }
        None => server::serve_stdio(setup).await.context("serving stdio"),
    }
}

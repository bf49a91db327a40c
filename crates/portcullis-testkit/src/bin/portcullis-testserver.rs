//! `portcullis-testserver`: an MCP server with a benign or an attack profile, over stdio
//! or Streamable HTTP. Logs go to stderr; in stdio mode stdout is the protocol.

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use portcullis_testkit::{
    Extras, Hostile, HttpServer, Poison, Profile, ServerOptions, TransportKind,
};

/// MCP test server for Portcullis: benign tools, poison on every channel, fault tools.
#[derive(Debug, Parser)]
#[command(name = "portcullis-testserver", version)]
struct Args {
    /// `stdio` or `http` (Streamable HTTP at path /mcp).
    #[arg(long, default_value = "stdio")]
    transport: TransportKind,
    /// Address to listen on with `--transport http` (port 0 picks a free port; the bound
    /// address is printed on stderr as `listening on http://ADDR/mcp`).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// `benign` or `attack`.
    #[arg(long, default_value = "benign")]
    profile: Profile,
    /// Attacks of the attack profile, a comma list (default all): instructions,
    /// description, schema, result, structured, error, resource, prompt, sampling,
    /// elicitation, rugpull, secret, params.
    #[arg(long, default_value = "all")]
    poison: String,
    /// List the fault tools (hang, crash, garbage, big, slow) in the benign profile too
    /// (the attack profile always lists them).
    #[arg(long)]
    faults: bool,
    /// List `unit_convert`, a quiet rug pull (description, then a nested schema
    /// field, then its result change after successive calls).
    #[arg(long)]
    quietpull: bool,
    /// The stage `unit_convert` starts at (0-3).
    #[arg(long, default_value_t = 0)]
    quietpull_stage: u64,
    /// List `article_metadata`, with over-privileged parameters (MSB's OP).
    #[arg(long)]
    overpriv: bool,
    /// List a tool under another name: OLD=NEW (repeatable).
    #[arg(long = "rename", value_name = "OLD=NEW")]
    renames: Vec<String>,
    /// List a tool a second time under another name: OLD=NEW (repeatable).
    #[arg(long = "copy", value_name = "OLD=NEW")]
    copies: Vec<String>,
    /// Append text to a tool's description: TOOL=TEXT (repeatable).
    #[arg(long = "describe", value_name = "TOOL=TEXT")]
    describe: Vec<String>,
    /// Append text to the server's `initialize` instructions.
    #[arg(long)]
    instructions: Option<String>,
    /// Declare resources but answer `resources/templates/list` with "method not
    /// found" (a server without templates).
    #[arg(long)]
    no_templates: bool,
    /// Hostile behaviours on the gateway's message path, a comma list (any
    /// profile): rpc_error, prefixed_redirect, notify, result_key, list_error, server_info.
    #[arg(long, default_value = "")]
    hostile: String,
}

fn pairs(flag: &str, values: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    values
        .iter()
        .map(|r| {
            r.split_once('=')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .with_context(|| format!("{flag} {r:?}: expected OLD=NEW"))
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let args = Args::parse();
    let poisons = Poison::parse_list(&args.poison).context("--poison")?;
    let options = ServerOptions {
        profile: args.profile,
        poisons: if args.profile == Profile::Attack {
            poisons
        } else {
            Default::default()
        },
        faults: args.faults || args.profile == Profile::Attack,
        transport: args.transport,
        extras: Extras {
            quietpull: args.quietpull,
            quietpull_stage: args.quietpull_stage,
            overpriv: args.overpriv,
            renames: pairs("--rename", &args.renames)?,
            copies: pairs("--copy", &args.copies)?,
            describe: pairs("--describe", &args.describe)?,
            instructions: args.instructions.clone(),
            hostile: Hostile::parse_list(&args.hostile).context("--hostile")?,
            no_templates: args.no_templates,
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    runtime.block_on(async move {
        match args.transport {
            TransportKind::Stdio => portcullis_testkit::serve_stdio(options)
                .await
                .context("stdio server"),
            TransportKind::Http => {
                let server = HttpServer::bind(options, args.listen)
                    .await
                    .with_context(|| format!("binding {}", args.listen))?;
                eprintln!("listening on {}", server.url());
                let cancel = server.cancel_token();
                tokio::spawn(async move {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        cancel.cancel();
                    }
                });
                server.run().await.context("http server")
            }
        }
    })
}

//! The `portcullis` command line.

mod audit;
mod audit_report;
mod bench;
mod corpus;
mod eval;
mod proxy;
mod review;
mod review_html;
mod review_page;
mod scan;
mod wrap;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use portcullis_core::{Config, Preset};
use portcullis_detect::rules::RuleSet;
use portcullis_detect::Detector;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "portcullis",
    version,
    about = "A local-first security gateway for the Model Context Protocol"
)]
struct Cli {
    /// How log lines on stderr are written: `text` (one readable line each) or
    /// `json` (one JSON object each, for a log collector). The level is set by
    /// $PORTCULLIS_LOG (default `warn`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect text, a file, stdin or a JSONL batch; print one decision record per input.
    Scan(scan::ScanArgs),
    /// List the loaded rules.
    Rules {
        #[command(flatten)]
        detector: DetectorArgs,
    },
    /// Build the corpus: validate base records, add transformed and wrapped variants,
    /// assign splits by lineage group.
    #[command(subcommand)]
    Corpus(CorpusCommand),
    /// Train the lexical model on the train split (Platt-calibrated on dev).
    TrainLexical(corpus::TrainArgs),
    /// Train the embedding stage's head on the train split (Platt-calibrated on dev).
    #[cfg(feature = "embedding")]
    TrainEmbedding(corpus::TrainEmbeddingArgs),
    /// Train the embedding stage's head (not in this binary: it was built without
    /// the `embedding` feature).
    #[cfg(not(feature = "embedding"))]
    TrainEmbedding {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Choose thresholds on the dev split for target FPR and referral rate; write a config.
    Calibrate(corpus::CalibrateArgs),
    /// Evaluate ablations of the detector on a labelled corpus; `eval report` recomputes
    /// the report from the kept decision records.
    Eval(eval::EvalCmd),
    /// The MCP gateway: front one stdio server (`-- COMMAND ARGS…`) or several
    /// (`--config FILE`), over stdio and/or Streamable HTTP.
    Proxy(proxy::ProxyArgs),
    /// The gateway's human review queue: list, show (with diff and taint path),
    /// approve, deny.
    Review(review::ReviewArgs),
    /// End-to-end attacks on the bench's MCP servers, baseline against defended
    /// (ASR, PUA, NRP; docs/bench.md).
    Bench(bench::BenchCmd),
    /// Audit MCP client configurations: list every server's tools, prompts and
    /// resources, run every analyzer, report (table, --json, --sarif).
    Audit(audit::AuditArgs),
    /// Rewrite an MCP client configuration so each server runs behind `portcullis proxy`.
    Wrap(wrap::WrapArgs),
    /// Restore a configuration `wrap` changed.
    Unwrap(wrap::UnwrapArgs),
    /// Print the effective configuration (TOML) and its hash.
    Config {
        #[command(flatten)]
        detector: DetectorArgs,
    },
}

#[derive(Subcommand)]
enum CorpusCommand {
    /// Validate corpus/base and corpus/rules_blind and write corpus/corpus.jsonl.
    Build(corpus::BuildArgs),
}

/// Options that choose the configuration and the rules.
#[derive(Args, Clone)]
pub struct DetectorArgs {
    /// Configuration file (TOML). Without it, the preset is used.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Preset when no --config is given: strict, balanced or permissive.
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    pub preset: Option<Preset>,
    /// Load rules from this directory instead of the rules embedded in the binary.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Enable the lexical stage (ablation switch; overrides the configuration).
    #[arg(long, conflicts_with = "no_lexical")]
    pub lexical: bool,
    /// Disable the lexical stage (ablation switch; overrides the configuration).
    #[arg(long)]
    pub no_lexical: bool,
    /// Enable the embedding stage (ablation switch; overrides the configuration).
    #[arg(long, conflicts_with = "no_embedding")]
    pub embedding: bool,
    /// Disable the embedding stage (ablation switch; overrides the configuration).
    #[arg(long)]
    pub no_embedding: bool,
}

impl DetectorArgs {
    pub fn load(&self) -> Result<Detector> {
        let mut config = match (&self.config, self.preset) {
            (Some(path), _) => Config::load(path)
                .with_context(|| format!("loading configuration {}", path.display()))?,
            (None, Some(p)) => Config::preset(p),
            (None, None) => Config::default(),
        };
        if self.lexical {
            config.lexical.enabled = true;
        }
        if self.no_lexical {
            config.lexical.enabled = false;
        }
        if self.embedding {
            config.embedding.enabled = true;
        }
        if self.no_embedding {
            config.embedding.enabled = false;
        }
        let rules = match &self.rules {
            Some(dir) => RuleSet::load_dir(dir)
                .with_context(|| format!("loading rules from {}", dir.display()))?,
            None => RuleSet::embedded().context("loading the embedded rules")?,
        };
        Detector::new(config, rules).context("building the detector")
    }
}

/// Whether log lines on stderr may carry ANSI colour codes: only on a terminal
/// (clients save a server's stderr to log files), and never when `NO_COLOR` is
/// set to anything (https://no-color.org).
fn colour(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Log lines to stderr, filtered by $PORTCULLIS_LOG, in the chosen format.
fn init_logs(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("PORTCULLIS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => logs.json().with_ansi(false).init(),
        LogFormat::Text => logs
            .with_ansi(colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ))
            .init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(scan::EXIT_ERROR)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Scan(args) => scan::run(args),
        Command::Corpus(CorpusCommand::Build(a)) => corpus::build(a).map(|_| ExitCode::SUCCESS),
        Command::TrainLexical(a) => corpus::train_lexical(a).map(|_| ExitCode::SUCCESS),
        #[cfg(feature = "embedding")]
        Command::TrainEmbedding(a) => corpus::train_embedding(a).map(|_| ExitCode::SUCCESS),
        #[cfg(not(feature = "embedding"))]
        Command::TrainEmbedding { .. } => anyhow::bail!(
            "this portcullis was built without the `embedding` feature; \
             build the full binary (`cargo build --release --locked -p portcullis`, or `make build`)"
        ),
        Command::Calibrate(a) => corpus::calibrate(a).map(|_| ExitCode::SUCCESS),
        Command::Eval(a) => eval::run(a),
        Command::Proxy(a) => proxy::run(a),
        Command::Review(a) => review::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Wrap(a) => wrap::run_wrap(a),
        Command::Unwrap(a) => wrap::run_unwrap(a),
        Command::Rules { detector } => {
            let d = detector.load()?;
            for c in d.rules().categories() {
                println!(
                    "# {} (v{}, {}): {}",
                    c.name, c.version, c.file, c.description
                );
                for r in d.rules().rules().iter().filter(|r| r.category == c.name) {
                    println!("{:<36} {:<8} {}", r.id, r.severity.as_str(), r.description);
                }
            }
            println!(
                "{} rules, {} patterns, fingerprint {}",
                d.rules().rules().len(),
                d.rules().pattern_count(),
                d.rules().fingerprint()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Config { detector } => {
            let d = detector.load()?;
            let toml = toml_of(d.config())?;
            println!("# config_hash = {}\n{toml}", d.config_hash());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn toml_of(config: &Config) -> Result<String> {
    toml::to_string_pretty(config).context("serializing configuration")
}

#[cfg(test)]
mod tests {
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_and_never_under_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None), "not a terminal: a log file");
        assert!(!colour(true, Some("1".into())), "NO_COLOR=1");
        assert!(colour(true, Some("".into())), "an empty NO_COLOR is unset");
    }
}

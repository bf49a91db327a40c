//! `portcullis bench`: end-to-end attacks on the bench's MCP servers, baseline
//! against defended (see docs/bench.md).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use portcullis_bench::agent::openai::OpenAiConfig;
use portcullis_bench::agent::AgentConfig;
use portcullis_bench::attack::{Goal, Vector};
use portcullis_bench::payloads::Split;
use portcullis_bench::runner::{self, Bins, Mode, PlanOptions, RunOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct BenchCmd {
    #[command(subcommand)]
    pub command: BenchSub,
}

#[derive(Subcommand)]
pub enum BenchSub {
    /// Plan and run trials, score them, write traces, results and the report.
    Run(Box<RunArgs>),
    /// Recompute the report from a results.jsonl.
    Report {
        /// The results.jsonl of a run.
        results: PathBuf,
        /// Where to write report.md, report.json and the charts (default: beside it).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List the planned trials without running them.
    Plan(PlanArgs),
}

#[derive(Args, Clone)]
pub struct PlanArgs {
    /// Attack types (comma-separated; default: all of NC, PM, PI, OP, UI, FE, TT, RI
    /// and the mixes).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// Vectors: description, schema, result, rug_pull, cross_server.
    #[arg(long, value_delimiter = ',')]
    pub vectors: Vec<String>,
    /// Goals: ssh_key, exfil_phone, modify_phone, kill_process, save_tools,
    /// leak_model, exfil_canary.
    #[arg(long, value_delimiter = ',')]
    pub goals: Vec<String>,
    /// Payload splits: seen, heldout (and external, which `--payloads` adds).
    #[arg(long, value_delimiter = ',', default_value = "seen,heldout")]
    pub splits: Vec<String>,
    /// Payloads from outside, one JSON object per line (docs/bench.md, "Payloads
    /// from outside"); each file is reported as its own register(s). Bad lines
    /// are reported with file and line and skipped. Repeatable.
    #[arg(long, value_name = "FILE.jsonl")]
    pub payloads: Vec<PathBuf>,
    /// Registers per cell and split, rotating (0 = every register).
    #[arg(long, default_value_t = 1)]
    pub registers_per_cell: usize,
    /// Tasks per cell and register.
    #[arg(long, default_value_t = 1)]
    pub tasks_per_cell: usize,
    /// Skip the control trials (every task without an attack).
    #[arg(long)]
    pub no_controls: bool,
    /// Modes: baseline, defended.
    #[arg(long, value_delimiter = ',', default_value = "baseline,defended")]
    pub modes: Vec<String>,
    /// Draws every trial's attack values: the attack tools' names, the files an
    /// attack writes, the key, phone numbers, pid file, canary and sink (the report
    /// prints it; the same seed plans the same run).
    #[arg(long, default_value_t = portcullis_bench::operands::DEFAULT_SEED)]
    pub seed: u64,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Output directory (traces/, results.jsonl, report.md, charts).
    #[arg(long, default_value = "reports/bench")]
    pub out: PathBuf,
    /// Trials run at once.
    #[arg(long, default_value_t = 4)]
    pub jobs: usize,
    /// `compliant` (the built-in worst-case agent), `immune` (the same agent unmoved
    /// by any attack: the PUA ceiling of a defence that stops every attack) or
    /// `openai` (a chat-completions endpoint with tool calling).
    #[arg(long, default_value = "compliant")]
    pub agent: String,
    /// Base URL of the OpenAI-compatible endpoint (e.g. http://127.0.0.1:11434/v1).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Model name for the endpoint.
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Seed sent with every chat request (endpoints that support it).
    #[arg(long)]
    pub llm_seed: Option<u64>,
    /// Retries of a failed request before the trial counts as errored.
    #[arg(long, default_value_t = 2)]
    pub retries: u32,
    /// Environment variable holding the endpoint's API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Chat turns per trial.
    #[arg(long, default_value_t = 12)]
    pub max_turns: usize,
    /// The gateway's detector preset (default: its own default, balanced).
    #[arg(long, conflicts_with = "detector")]
    pub preset: Option<String>,
    /// The gateway's detector configuration file (`proxy --detector`), e.g.
    /// weights/injection-minilm-int8/detector.toml; checked before any trial runs.
    #[arg(long, value_name = "FILE")]
    pub detector: Option<PathBuf>,
    /// Keep every trial's sandbox directory under OUT/sandboxes.
    #[arg(long)]
    pub keep_sandboxes: bool,
    /// Seconds before a trial is abandoned (and counted as errored).
    #[arg(long, default_value_t = 120)]
    pub trial_timeout: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

fn plan_options(a: &PlanArgs) -> Result<PlanOptions> {
    let splits = a
        .splits
        .iter()
        .map(|s| match s.as_str() {
            "seen" => Ok(Split::Seen),
            "heldout" => Ok(Split::Heldout),
            "external" => Ok(Split::External),
            other => bail!("unknown split {other} (seen, heldout, external)"),
        })
        .collect::<Result<Vec<_>>>()?;
    let external = external_payloads(&a.payloads)?;
    let mut splits = splits;
    if !external.is_empty() && !splits.contains(&Split::External) {
        splits.push(Split::External);
    }
    let modes = a
        .modes
        .iter()
        .map(|s| match s.as_str() {
            "baseline" => Ok(Mode::Baseline),
            "defended" => Ok(Mode::Defended),
            other => bail!("unknown mode {other} (baseline, defended)"),
        })
        .collect::<Result<Vec<_>>>()?;
    for t in &a.types {
        portcullis_bench::attack::AttackType::get(t)?;
    }
    Ok(PlanOptions {
        types: a.types.clone(),
        vectors: a
            .vectors
            .iter()
            .map(|v| Vector::parse(v))
            .collect::<Result<_, _>>()?,
        goals: a
            .goals
            .iter()
            .map(|g| Goal::parse(g))
            .collect::<Result<_, _>>()?,
        splits,
        registers_per_cell: a.registers_per_cell,
        tasks_per_cell: a.tasks_per_cell,
        controls: !a.no_controls,
        modes,
        seed: a.seed,
        external,
    })
}

/// The good lines of every `--payloads` file; each bad line is reported on
/// stderr with its file and line, and skipped.
fn external_payloads(
    files: &[PathBuf],
) -> Result<Vec<portcullis_bench::external::ExternalPayload>> {
    let mut all = Vec::new();
    for f in files {
        let (ok, errors) = portcullis_bench::external::load(f)
            .with_context(|| format!("reading --payloads {}", f.display()))?;
        for e in &errors {
            eprintln!("portcullis bench: skipped {e}");
        }
        eprintln!(
            "portcullis bench: {}: {} payload(s) loaded, {} line(s) skipped",
            f.display(),
            ok.len(),
            errors.len()
        );
        if ok.iter().any(|p| {
            all.iter()
                .any(|q: &portcullis_bench::external::ExternalPayload| q.file == p.file)
        }) {
            bail!(
                "--payloads: two files are named {}; their registers would be reported as one (rename one)",
                f.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
            );
        }
        all.extend(ok);
    }
    Ok(all)
}

fn agent(a: &RunArgs) -> Result<AgentConfig> {
    match a.agent.as_str() {
        "compliant" => Ok(AgentConfig::Compliant),
        "immune" => Ok(AgentConfig::Immune),
        "openai" => {
            let endpoint = a
                .endpoint
                .as_deref()
                .context("--agent openai needs --endpoint URL")?;
            let model = a
                .model
                .as_deref()
                .context("--agent openai needs --model NAME")?;
            let mut c = OpenAiConfig::new(endpoint, model);
            c.temperature = a.temperature;
            c.seed = a.llm_seed;
            c.retries = a.retries;
            c.api_key_env = a.api_key_env.clone();
            c.max_turns = a.max_turns;
            Ok(AgentConfig::OpenAi(c))
        }
        other => bail!("unknown agent {other} (compliant, immune, openai)"),
    }
}

pub fn run(cmd: BenchCmd) -> Result<ExitCode> {
    match cmd.command {
        BenchSub::Plan(p) => {
            let specs = runner::plan(&plan_options(&p)?, &AgentConfig::Compliant);
            for s in &specs {
                println!("{}", s.id);
            }
            eprintln!("{} trials", specs.len());
            Ok(ExitCode::SUCCESS)
        }
        BenchSub::Report { results, out } => {
            let rows = runner::read_results(&results)
                .with_context(|| format!("reading {}", results.display()))?;
            let root = results.parent().map(PathBuf::from).unwrap_or_default();
            let dir = out.unwrap_or_else(|| root.clone());
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let cmd = format!("portcullis bench report {}", results.display());
            portcullis_bench::report::write(&dir, &root, &rows, &cmd)
                .context("writing the report")?;
            println!("report: {}", dir.join("report.md").display());
            Ok(ExitCode::SUCCESS)
        }
        BenchSub::Run(a) => {
            let agent = agent(&a)?;
            let specs = runner::plan(&plan_options(&a.plan)?, &agent);
            if specs.is_empty() {
                bail!("the selection plans no trial");
            }
            let detector = match &a.detector {
                Some(path) => Some(checked_detector(path)?),
                None => None,
            };
            let exe = std::env::current_exe().context("locating this binary")?;
            let bins = Bins::locate(&exe).context("locating portcullis-benchserver")?;
            let opts = RunOptions {
                out: a.out.clone(),
                jobs: a.jobs,
                agent,
                preset: a.preset.clone(),
                detector,
                keep_sandboxes: a.keep_sandboxes,
                progress: !a.quiet,
                trial_timeout: Duration::from_secs(a.trial_timeout),
            };
            let command: Vec<String> = std::env::args().collect();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            let results = rt
                .block_on(runner::run_all(specs, &opts, &bins))
                .context("running the trials")?;
            let r = portcullis_bench::report::write(&a.out, &a.out, &results, &command.join(" "))
                .context("writing the report")?;
            println!(
                "{}",
                portcullis_bench::report::table("attack type", &{
                    let mut v = r.by_type.clone();
                    v.push(r.all_attacks.clone());
                    v.push(r.controls.clone());
                    v
                })
            );
            println!("report: {}", a.out.join("report.md").display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A detector configuration for the bench's gateways: an absolute path (every
/// trial's gateway runs in its own sandbox directory) to a file that loads, so a
/// typo fails here, once, instead of erroring every defended trial.
fn checked_detector(path: &std::path::Path) -> Result<PathBuf> {
    let abs = std::fs::canonicalize(path)
        .with_context(|| format!("--detector {}: cannot read the file", path.display()))?;
    portcullis_core::Config::load(&abs)
        .with_context(|| format!("--detector {}", path.display()))?;
    Ok(abs)
}

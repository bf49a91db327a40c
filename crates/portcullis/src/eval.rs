//! `portcullis eval`: run ablations of the detector over a labelled JSONL corpus,
//! keep the per-record decision records, and write the report computed from them;
//! `portcullis eval report RECORDS...` recomputes the report from the records alone.

use crate::DetectorArgs;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use portcullis_core::Config;
use portcullis_detect::rules::RuleSet;
use portcullis_detect::Detector;
use portcullis_eval::analysis::{self, NEAR_THRESHOLD};
use portcullis_eval::corpus::corpus_sha256;
use portcullis_eval::input::{self, EvalItem};
use portcullis_eval::records::{self, ConfigRecords, Meta};
use portcullis_eval::render;
use portcullis_eval::run::{run_config, RunPlan};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Some input lines were skipped (the rest were evaluated), as for `scan`.
pub const EXIT_BAD_LINES: u8 = 5;
/// A shuffled pass gave a different decision for some record.
pub const EXIT_ORDER_DEPENDENT: u8 = 6;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalCmd {
    #[command(subcommand)]
    pub command: Option<EvalSub>,
    #[command(flatten)]
    pub run: EvalArgs,
}

#[derive(Subcommand)]
pub enum EvalSub {
    /// Recompute the report from decision records written by `portcullis eval`.
    Report(ReportArgs),
}

#[derive(Args)]
pub struct ReportArgs {
    /// Record files (`records/*.jsonl` of an eval output directory), one per configuration.
    #[arg(required = true)]
    pub records: Vec<PathBuf>,
    /// Directory for report.md, report.json and the charts; without it, Markdown to stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Args)]
pub struct EvalArgs {
    /// JSONL corpus: `id`, `label`, `text` or `tool`; optional provenance fields.
    #[arg(long, default_value = "corpus/corpus.jsonl")]
    pub corpus: PathBuf,
    /// Splits to report, each on its own (`all`: every record, by its split if it has one).
    #[arg(long = "split", default_values = ["test", "rules_blind"])]
    pub splits: Vec<String>,
    /// Directory for records/, report.md, report.json and the charts.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Name of the configuration when no --ablation is given.
    #[arg(long, default_value = "configured detector")]
    pub name: String,
    /// A configuration to evaluate, NAME=SPEC (repeatable). SPEC is `base` (the
    /// configuration chosen by --config/--preset), comma-separated stage switches
    /// applied to it (`-lexical`, `+lexical`, `+embedding`: any stage with an
    /// `enabled` key), or `@FILE.toml` optionally followed by switches.
    #[arg(long = "ablation", value_name = "NAME=SPEC")]
    pub ablations: Vec<String>,
    /// Extra reference material for the overlap check (JSONL with `text` or `tool`).
    #[arg(long = "reference", value_name = "FILE")]
    pub references: Vec<PathBuf>,
    /// Passes over the corpus per configuration: corpus order, a shuffled order,
    /// then corpus order again (latency is measured over all of them).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    pub runs: u32,
    #[arg(long, default_value_t = 42)]
    pub shuffle_seed: u64,
    #[arg(long, default_value_t = 42)]
    pub bootstrap_seed: u64,
    #[arg(long, default_value_t = 2000)]
    pub bootstrap_replicates: usize,
    /// A decision slower than this counts as a timeout (listed, not scored).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

pub fn run(cmd: EvalCmd) -> Result<ExitCode> {
    match cmd.command {
        Some(EvalSub::Report(a)) => report(a),
        None => evaluate(cmd.run),
    }
}

fn base_config(d: &DetectorArgs) -> Result<Config> {
    let mut config = match (&d.config, d.preset) {
        (Some(path), _) => Config::load(path)
            .with_context(|| format!("loading configuration {}", path.display()))?,
        (None, Some(p)) => Config::preset(p),
        (None, None) => Config::default(),
    };
    if d.lexical {
        config.lexical.enabled = true;
    }
    if d.no_lexical {
        config.lexical.enabled = false;
    }
    Ok(config)
}

/// Switch a stage on or off through the configuration's `[stage] enabled` key, so a
/// stage added later (embedding, review) is an ablation without code here.
fn switch_stage(config: &Config, stage: &str, on: bool) -> Result<Config> {
    let text = toml::to_string(config).context("serializing configuration")?;
    let mut table: toml::Table = toml::from_str(&text).context("re-reading configuration")?;
    match table.get_mut(stage).and_then(|v| v.as_table_mut()) {
        Some(t) if t.contains_key("enabled") => {
            t.insert("enabled".into(), toml::Value::Boolean(on));
        }
        _ => bail!("the configuration has no stage [{stage}] with an `enabled` key"),
    }
    let text = toml::to_string(&table).context("serializing configuration")?;
    Ok(Config::from_toml_str(&text, &format!("ablation {stage}"))?)
}

fn ablation(base: &Config, spec: &str) -> Result<Config> {
    let mut parts = spec.split(',').map(str::trim).filter(|s| !s.is_empty());
    let mut config = base.clone();
    let mut rest: Vec<&str> = Vec::new();
    match parts.next() {
        Some("base") | None => {}
        Some(f) if f.starts_with('@') => {
            let path = Path::new(&f[1..]);
            config = Config::load(path)
                .with_context(|| format!("loading configuration {}", path.display()))?;
        }
        Some(first) => rest.push(first),
    }
    rest.extend(parts);
    for s in rest {
        config = match (s.strip_prefix('+'), s.strip_prefix('-')) {
            (Some(stage), _) => switch_stage(&config, stage, true)?,
            (_, Some(stage)) => switch_stage(&config, stage, false)?,
            _ => bail!("ablation part {s:?}: expected base, @FILE, +stage or -stage"),
        };
    }
    Ok(config)
}

fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "\"'$&;|".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// File-name-safe form of a configuration name.
fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "config".into()
    } else {
        s
    }
}

fn evaluate(args: EvalArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.corpus)
        .with_context(|| format!("reading {}", args.corpus.display()))?;
    let sha = corpus_sha256(text.as_bytes());
    let (mut all, errors) = input::parse_items(&text, &args.corpus.display().to_string());
    for e in &errors {
        eprintln!("error: {e} (line skipped)");
    }
    if all.is_empty() {
        bail!("{} holds no usable record", args.corpus.display());
    }
    let inference = input::infer(&mut all);

    // Reference material: the training split of this corpus (what the lexical model
    // was trained on), the rules' own examples, and any --reference files.
    let load_rules = || -> Result<RuleSet> {
        match &args.detector.rules {
            Some(dir) => RuleSet::load_dir(dir)
                .with_context(|| format!("loading rules from {}", dir.display())),
            None => RuleSet::embedded().context("loading the embedded rules"),
        }
    };
    let rules = load_rules()?;
    let reference = mark_reference_overlap(&args, &mut all, &rules)?;

    let (items, subset_of, subsets) = select_items(&args, all)?;

    let detectors = build_detectors(&args, &load_rules)?;

    let plan = RunPlan {
        runs: args.runs,
        shuffle_seed: args.shuffle_seed,
        timeout_us: args.timeout_ms.map(|ms| ms.saturating_mul(1000)),
    };
    let total = (items.len() * args.runs as usize * detectors.len()) as u64;
    let bar = if args.no_progress {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let command = command_line();
    let mut all_records = Vec::new();
    for (index, (name, spec, detector)) in detectors.iter().enumerate() {
        bar.set_message(name.clone());
        let (runs, decisions) =
            run_config(name, detector, &items, &subset_of, &plan, &|n| bar.inc(n));
        let config_toml =
            toml::to_string_pretty(detector.config()).context("serializing configuration")?;
        all_records.push(ConfigRecords {
            meta: Meta {
                config: name.clone(),
                index,
                spec: spec.clone(),
                config_hash: detector.config_hash().to_string(),
                stages: detector
                    .stage_names()
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                config_toml,
                corpus: args.corpus.display().to_string(),
                corpus_sha256: sha.clone(),
                command: command.clone(),
                subsets: subsets.clone(),
                input_errors: records::line_errors(&errors),
                inference: inference.clone(),
                reference: reference.clone(),
                embedder: None,
                near_threshold: NEAR_THRESHOLD,
                shuffle_seed: args.shuffle_seed,
                bootstrap_seed: args.bootstrap_seed,
                bootstrap_replicates: args.bootstrap_replicates,
                timeout_us: plan.timeout_us,
            },
            runs,
            decisions,
        });
    }
    bar.finish_and_clear();
    let files = match &args.out {
        Some(dir) => write_records(dir, &all_records)?,
        None => Vec::new(),
    };
    let report = analysis::analyze(&all_records).map_err(anyhow::Error::msg)?;
    write_report(&report, &files, args.out.as_deref())?;
    Ok(exit_code(&report, !errors.is_empty()))
}

/// Marks the records that overlap reference material: the training split of this
/// corpus (what the lexical model was trained on), the rules' own examples, and any
/// `--reference` files. Returns what the reference was, for the report.
fn mark_reference_overlap(
    args: &EvalArgs,
    all: &mut [EvalItem],
    rules: &RuleSet,
) -> Result<Vec<String>> {
    let mut train: HashSet<String> = all
        .iter()
        .filter(|it| it.split.as_deref() == Some("train"))
        .map(EvalItem::dedup_key)
        .collect();
    let mut reference = vec![format!(
        "{} distinct texts of the train split of {}",
        train.len(),
        args.corpus.display()
    )];
    for f in &args.references {
        let t = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let (items, errs) = input::parse_items(&t, &f.display().to_string());
        for e in &errs {
            eprintln!("error: {e} (reference line skipped)");
        }
        reference.push(format!("{} records of {}", items.len(), f.display()));
        train.extend(items.iter().map(EvalItem::dedup_key));
    }
    let rule_examples: HashSet<String> = rules
        .rules()
        .iter()
        .flat_map(|r| r.positive.iter().chain(&r.negative))
        .map(|t| input::normalize_text(t))
        .collect();
    reference.push(format!(
        "{} distinct positive/negative examples of {} rules",
        rule_examples.len(),
        rules.rules().len()
    ));
    input::mark_overlap(all, &train, &rule_examples);

    Ok(reference)
}

/// The records of the requested splits, the subset each is reported in, and the
/// subsets in report order.
fn select_items(
    args: &EvalArgs,
    all: Vec<EvalItem>,
) -> Result<(Vec<EvalItem>, Vec<String>, Vec<String>)> {
    let every = args.splits.iter().any(|s| s == "all") || all.iter().all(|it| it.split.is_none());
    let items: Vec<EvalItem> = all
        .into_iter()
        .filter(|it| every || it.split.as_ref().is_some_and(|s| args.splits.contains(s)))
        .collect();
    if items.is_empty() {
        bail!(
            "no record of {} is in split(s) {:?}",
            args.corpus.display(),
            args.splits
        );
    }
    let subset_of: Vec<String> = items
        .iter()
        .map(|it| it.split.clone().unwrap_or_else(|| "all".into()))
        .collect();
    let subsets: Vec<String> = if every {
        let mut v: Vec<String> = Vec::new();
        for s in &subset_of {
            if !v.contains(s) {
                v.push(s.clone());
            }
        }
        v
    } else {
        args.splits.clone()
    };

    Ok((items, subset_of, subsets))
}

/// One detector per configuration: the base, or one per `--ablation NAME=SPEC`.
fn build_detectors(
    args: &EvalArgs,
    load_rules: &dyn Fn() -> Result<RuleSet>,
) -> Result<Vec<(String, String, Detector)>> {
    let base = base_config(&args.detector)?;
    let specs: Vec<(String, String)> = if args.ablations.is_empty() {
        vec![(args.name.clone(), "base".into())]
    } else {
        args.ablations
            .iter()
            .map(|a| match a.split_once('=') {
                Some((n, s)) if !n.trim().is_empty() => Ok((n.trim().to_string(), s.to_string())),
                _ => bail!("--ablation {a:?}: expected NAME=SPEC"),
            })
            .collect::<Result<_>>()?
    };
    let mut names = HashSet::new();
    for (n, _) in &specs {
        if !names.insert(slug(n)) {
            bail!("two configurations would share the record file of {n:?}");
        }
    }
    let detectors: Vec<(String, String, Detector)> = specs
        .into_iter()
        .map(|(name, spec)| {
            let config = ablation(&base, &spec).with_context(|| format!("ablation {name}"))?;
            let d = Detector::new(config, load_rules()?)
                .with_context(|| format!("building the detector of {name}"))?;
            Ok((name, spec, d))
        })
        .collect::<Result<_>>()?;

    Ok(detectors)
}

/// One JSONL file of decision records per configuration under `DIR/records/`.
fn write_records(dir: &Path, all_records: &[ConfigRecords]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let rec_dir = dir.join("records");
    std::fs::create_dir_all(&rec_dir).with_context(|| format!("creating {}", rec_dir.display()))?;
    for c in all_records {
        let f = rec_dir.join(format!("{}.jsonl", slug(&c.meta.config)));
        records::write(&f, c)?;
        files.push(f);
    }
    Ok(files)
}

fn exit_code(report: &analysis::Report, bad_lines: bool) -> ExitCode {
    if !report.order_independent() {
        eprintln!("error: decisions depend on the order of the corpus (listed in the report)");
        ExitCode::from(EXIT_ORDER_DEPENDENT)
    } else if bad_lines {
        ExitCode::from(EXIT_BAD_LINES)
    } else {
        ExitCode::SUCCESS
    }
}

fn write_report(report: &analysis::Report, files: &[PathBuf], out: Option<&Path>) -> Result<()> {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let recompute = format!(
        "portcullis eval report {}{}",
        if names.is_empty() {
            "RECORDS...".to_string()
        } else {
            names.join(" ")
        },
        out.map_or(String::new(), |d| format!(" --out {}", d.display()))
    );
    let md = render::markdown(report, &recompute, &names, out.is_some());
    match out {
        None => print!("{md}"),
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for sub in &report.subsets {
                let (roc, pr) = render::charts(sub).map_err(anyhow::Error::msg)?;
                let (rn, pn) = render::chart_names(&sub.name);
                std::fs::write(dir.join(rn), roc)?;
                std::fs::write(dir.join(pn), pr)?;
            }
            std::fs::write(dir.join("report.md"), &md)
                .with_context(|| format!("writing {}", dir.join("report.md").display()))?;
            std::fs::write(
                dir.join("report.json"),
                serde_json::to_string_pretty(report).context("serializing the report")?,
            )?;
            println!("wrote {}", dir.join("report.md").display());
            summary(report);
        }
    }
    Ok(())
}

/// A few headline lines on stdout.
fn summary(report: &analysis::Report) {
    for sub in &report.subsets {
        for d in &sub.detectors {
            println!(
                "{:<12} {:<24} flag recall {} · flag FPR {} · denial recall {} · referral {}",
                sub.name, d.config, d.flag.recall, d.flag.fpr, d.denial.recall, d.referral_rate
            );
        }
    }
    println!(
        "order independence: {}",
        if report.order_independent() {
            "identical decisions in every pass"
        } else {
            "DIFFERENCES (see report)"
        }
    );
}

fn report(args: ReportArgs) -> Result<ExitCode> {
    let mut configs = Vec::new();
    for f in &args.records {
        configs.push(records::read(f)?);
    }
    let report = analysis::analyze(&configs).map_err(anyhow::Error::msg)?;
    write_report(&report, &args.records, args.out.as_deref())?;
    let bad = configs
        .first()
        .is_some_and(|c| !c.meta.input_errors.is_empty());
    Ok(exit_code(&report, bad))
}

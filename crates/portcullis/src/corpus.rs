//! `portcullis corpus build`, `portcullis train-lexical`, `portcullis calibrate`,
//! (`portcullis eval` is in eval.rs).

use crate::DetectorArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use portcullis_core::{Channel, Config};
use portcullis_detect::lexical::TrainParams;
#[cfg(feature = "embedding")]
use portcullis_embed::HeadParams;
use portcullis_eval::corpus::{self, Label, Record, Split};
use portcullis_eval::{calibrate, run, train};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct BuildArgs {
    /// Directory of individually written records.
    #[arg(long, default_value = "corpus/base")]
    pub base: PathBuf,
    /// Directory of the rules-blind attack set.
    #[arg(long, default_value = "corpus/rules_blind")]
    pub rules_blind: PathBuf,
    /// Also take the harvested real tool listings of this directory
    /// (`corpus/harvest/`, scripts/harvest/README.md) and carry the corpus's
    /// description and schema texts into them. Off by default: the committed
    /// corpus, model and presets are built without them (docs/eval.md, "Real
    /// carriers").
    #[arg(long, value_name = "DIR")]
    pub harvest: Option<PathBuf>,
    /// With --harvest: also write each payload of this directory
    /// (`corpus/payloads/`, corpus/SCHEMA.md "Payloads") into several harvested
    /// carriers of its split.
    #[arg(long, value_name = "DIR", requires = "harvest")]
    pub payloads: Option<PathBuf>,
    /// Where to write the built corpus.
    #[arg(long, default_value = "corpus/corpus.jsonl")]
    pub out: PathBuf,
}

fn load_dir(dir: &Path) -> Result<Vec<Record>> {
    let mut all = Vec::new();
    let mut bad = 0;
    for f in corpus::jsonl_files(dir)? {
        let (records, errors) = corpus::load_jsonl(&f)?;
        for e in &errors {
            eprintln!("error: {e}");
        }
        bad += errors.len();
        all.extend(records);
    }
    if bad > 0 {
        return Err(corpus::CorpusError::Invalid(bad).into());
    }
    Ok(all)
}

/// The harvested listings of `dir`, checked against its MANIFEST.json; bad lines
/// are errors naming file and line, as for the corpus's own files.
fn load_harvest(dir: &Path) -> Result<Vec<Record>> {
    let problems = portcullis_eval::harvest::check_manifest(dir)?;
    for p in &problems {
        eprintln!("error: {}: {p}", dir.display());
    }
    let (records, errors) = portcullis_eval::harvest::load_dir(dir)?;
    for e in &errors {
        eprintln!("error: {e}");
    }
    if !problems.is_empty() || !errors.is_empty() {
        bail!(
            "{} problem(s) in {} (listed above); rebuild it with scripts/harvest/README.md",
            problems.len() + errors.len(),
            dir.display()
        );
    }
    Ok(records
        .into_iter()
        .map(portcullis_eval::harvest::Harvested::into_record)
        .collect())
}

/// The payloads of `dir`; bad lines are errors naming file and line.
fn load_payloads(dir: &Path) -> Result<Vec<portcullis_eval::payloads::Payload>> {
    let (payloads, errors) = portcullis_eval::payloads::load_dir(dir)?;
    for e in &errors {
        eprintln!("error: {e}");
    }
    if !errors.is_empty() {
        return Err(corpus::CorpusError::Invalid(errors.len()).into());
    }
    Ok(payloads)
}

pub fn build(args: BuildArgs) -> Result<()> {
    let base = load_dir(&args.base)?;
    let blind = load_dir(&args.rules_blind)?;
    let harvested = match &args.harvest {
        Some(dir) => load_harvest(dir)?,
        None => Vec::new(),
    };
    let payloads = match &args.payloads {
        Some(dir) => load_payloads(dir)?,
        None => Vec::new(),
    };
    let rules = portcullis_detect::rules::RuleSet::embedded()?;
    let fires = |r: &Record| train::fires_any_rule(&rules, r);
    let blind_total = blind.len();
    let records = corpus::build(base, blind, harvested, &payloads, &fires)?;
    let kept = records
        .iter()
        .filter(|r| r.split == Some(Split::RulesBlind))
        .count();
    println!(
        "rules-blind set: {kept} of {blind_total} records fire no rule and form the rules_blind split; \
         the other {} fire a rule and join the test split",
        blind_total - kept
    );
    let text = corpus::to_jsonl(&records);
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "wrote {} records to {} (sha256 {})",
        records.len(),
        args.out.display(),
        corpus::corpus_sha256(text.as_bytes())
    );
    print_stats(&records);
    Ok(())
}

fn print_stats(records: &[Record]) {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in records {
        let label = match r.label {
            Label::Benign => "benign",
            Label::Malicious => "malicious",
        };
        *by.entry(format!("channel {:<20} {label}", r.channel.as_str()))
            .or_default() += 1;
        *by.entry(format!("provenance {:?}", r.provenance))
            .or_default() += 1;
        *by.entry(format!("split {}", r.split.map_or("-", Split::as_str)))
            .or_default() += 1;
        *by.entry(format!("label {label}")).or_default() += 1;
        if r.is_hard_negative() {
            *by.entry("hard negatives".into()).or_default() += 1;
        }
        *by.entry(format!("language {}", r.language)).or_default() += 1;
    }
    for (k, v) in by {
        println!("  {k:<45} {v}");
    }
}

/// Read a built corpus; bad lines are errors (a built corpus has none).
pub fn load_built(path: &Path) -> Result<(Vec<Record>, String)> {
    // One read: the same bytes are parsed and hashed.
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (records, errors) = corpus::parse_jsonl(&text, &path.display().to_string());
    for e in &errors {
        eprintln!("error: {e}");
    }
    if !errors.is_empty() {
        bail!("{} invalid line(s) in {}", errors.len(), path.display());
    }
    if records.iter().any(|r| r.split.is_none()) {
        bail!(
            "{} has records without a split: run `portcullis corpus build`",
            path.display()
        );
    }
    Ok((records, corpus::corpus_sha256(text.as_bytes())))
}

#[derive(Args)]
pub struct TrainArgs {
    #[arg(long, default_value = "corpus/corpus.jsonl")]
    pub corpus: PathBuf,
    #[arg(long, default_value = "crates/portcullis-detect/data/lexical.json")]
    pub out: PathBuf,
    #[arg(long, default_value_t = TrainParams::default().seed)]
    pub seed: u64,
    #[arg(long, default_value_t = TrainParams::default().epochs)]
    pub epochs: usize,
    #[arg(long, default_value_t = TrainParams::default().dim_bits)]
    pub dim_bits: u32,
}

pub fn train_lexical(args: TrainArgs) -> Result<()> {
    let (records, sha) = load_built(&args.corpus)?;
    let params = TrainParams {
        seed: args.seed,
        epochs: args.epochs,
        dim_bits: args.dim_bits,
        ..TrainParams::default()
    };
    let model = train::train_lexical(&records, &sha, &params);
    std::fs::write(&args.out, model.to_json())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "trained on {} {} records, calibrated on {} {} records of corpus {sha}; wrote {}",
        model.provenance.train_records,
        model.provenance.train_split,
        model.provenance.calibration_records,
        model.provenance.calibration_split,
        args.out.display()
    );
    Ok(())
}

#[cfg(feature = "embedding")]
#[derive(Args)]
pub struct TrainEmbeddingArgs {
    #[arg(long, default_value = "corpus/corpus.jsonl")]
    pub corpus: PathBuf,
    /// The model files (scripts/fetch-models.sh installs them there).
    #[arg(long, default_value = portcullis_embed::DEFAULT_MODELS_DIR)]
    pub models_dir: PathBuf,
    /// Where to write the head (committed; embedded at build time).
    #[arg(
        long,
        default_value = "crates/portcullis-embed/data/embedding-head.json"
    )]
    pub out: PathBuf,
    /// Where to write the nearest-neighbour index of the train split.
    #[arg(long, default_value = "crates/portcullis-embed/data/embedding-knn.bin")]
    pub index_out: PathBuf,
    /// Content tokens per chunk.
    #[arg(long, default_value_t = 254)]
    pub chunk_tokens: usize,
    /// What runs the model: onnx (ONNX Runtime) or candle.
    #[arg(long, default_value = "onnx")]
    pub backend: portcullis_core::EmbeddingBackend,
    /// The ONNX Runtime library (backend onnx).
    #[arg(long, default_value = portcullis_embed::DEFAULT_ONNXRUNTIME)]
    pub onnxruntime: String,
    #[arg(long, default_value_t = HeadParams::default().steps)]
    pub steps: usize,
    #[arg(long, default_value_t = HeadParams::default().l2)]
    pub l2: f64,
    /// Keep this head's weights (a fine-tuned model's own linear layer, written by
    /// scripts/transformer/finetune.py) and fit only its Platt scaling on the dev
    /// split; no index is written (use the stage with `k = 0`).
    #[arg(long)]
    pub head_from: Option<PathBuf>,
}

/// The head in `from`, if it was fitted on the weights whose SHA-256 is `model_sha`.
#[cfg(feature = "embedding")]
fn head_of_model(
    from: &Path,
    model_sha: &str,
    weights: &Path,
) -> Result<portcullis_embed::head::Head> {
    let text =
        std::fs::read_to_string(from).with_context(|| format!("reading {}", from.display()))?;
    let head = portcullis_embed::head::Head::from_json(&text, &from.display().to_string())?;
    if head.provenance.model_sha256 != model_sha {
        bail!(
            "{} was fitted on the model with SHA-256 {}, but {} is {model_sha}: \
             pass the --models-dir it was trained with",
            from.display(),
            head.provenance.model_sha256,
            weights.display()
        );
    }
    Ok(head)
}

#[cfg(feature = "embedding")]
pub fn train_embedding(args: TrainEmbeddingArgs) -> Result<()> {
    let backend = portcullis_embed::Backend::from_config(args.backend, &args.onnxruntime);
    let embedder = portcullis_embed::Embedder::load(&args.models_dir, &backend)?;
    let weights = args.models_dir.join("model.safetensors");
    let model_sha = portcullis_core::sha256_hex(
        &std::fs::read(&weights).with_context(|| format!("reading {}", weights.display()))?,
    );
    // A head of other weights is refused before the corpus is read.
    let kept = match &args.head_from {
        Some(from) => Some(head_of_model(from, &model_sha, &weights)?),
        None => None,
    };
    let (records, sha) = load_built(&args.corpus)?;
    let params = HeadParams {
        steps: args.steps,
        l2: args.l2,
        ..HeadParams::default()
    };
    let t = std::time::Instant::now();
    if let Some(head) = kept {
        let head = portcullis_eval::train_embedding::calibrate_head(&embedder, &records, head)?;
        std::fs::write(&args.out, head.to_json())
            .with_context(|| format!("writing {}", args.out.display()))?;
        println!(
            "kept the head's weights; Platt-calibrated on {} dev records of corpus {sha} in \
             {:.1}s; wrote {}",
            head.provenance.calibration_records,
            t.elapsed().as_secs_f64(),
            args.out.display()
        );
        return Ok(());
    }
    let trained = portcullis_eval::train_embedding::train_embedding(
        &embedder,
        &records,
        &sha,
        &model_sha,
        &params,
        args.chunk_tokens,
    )?;
    std::fs::write(&args.out, trained.head.to_json())
        .with_context(|| format!("writing {}", args.out.display()))?;
    std::fs::write(&args.index_out, &trained.index)
        .with_context(|| format!("writing {}", args.index_out.display()))?;
    let p = &trained.head.provenance;
    println!(
        "trained on {} {} records ({} chunks), calibrated on {} {} records of corpus {sha} \
         in {:.1}s; wrote {} and {}",
        p.train_records,
        p.train_split,
        p.train_chunks,
        p.calibration_records,
        p.calibration_split,
        t.elapsed().as_secs_f64(),
        args.out.display(),
        args.index_out.display()
    );
    Ok(())
}

#[derive(Args)]
pub struct CalibrateArgs {
    #[arg(long, default_value = "corpus/corpus.jsonl")]
    pub corpus: PathBuf,
    /// Highest acceptable share of benign dev records that end in BLOCK.
    #[arg(long)]
    pub target_fpr: f64,
    /// Highest acceptable share of dev records that end in REVIEW.
    #[arg(long)]
    pub target_referral: f64,
    /// Highest share of benign dev records that end in REVIEW or BLOCK (on all
    /// records, and on each channel's own); absent = only the referral target bounds
    /// the REVIEW threshold.
    #[arg(long)]
    pub target_flag_fpr: Option<f64>,
    /// Highest share of dev records in the LLM review stage's band (written as
    /// `review.band`, the least confident REVIEWs; the stage stays off).
    #[arg(long, default_value_t = 0.05)]
    pub review_share: f64,
    /// Configuration file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// A channel gets thresholds of its own (`[channel_thresholds]`) when its dev
    /// split has at least this many benign records; others use the global ones.
    /// Default: enough that the BLOCK FPR target is three records,
    /// `ceil(3 / target_fpr)` — fewer cannot resolve the target, and thresholds
    /// fitted on them follow the dev records, not the channel.
    #[arg(long)]
    pub min_channel_benign: Option<usize>,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

/// The fused score of the most severe finding the floors let through (floor
/// `none`): thresholds are kept above it (`calibrate::Targets::above`).
fn unfloored_weight(config: &Config) -> f64 {
    use portcullis_core::{Floor, Severity};
    let f = &config.floors;
    [
        (Severity::Low, f.low),
        (Severity::Medium, f.medium),
        (Severity::High, f.high),
        (Severity::Critical, f.critical),
    ]
    .into_iter()
    .filter(|(_, floor)| *floor == Floor::None)
    .map(|(s, _)| config.severity_weights.weight(s))
    .fold(0.0, f64::max)
}

pub fn calibrate(args: CalibrateArgs) -> Result<()> {
    for (name, v) in [
        ("--target-fpr", args.target_fpr),
        ("--target-referral", args.target_referral),
        ("--review-share", args.review_share),
        ("--target-flag-fpr", args.target_flag_fpr.unwrap_or(0.0)),
    ] {
        if !(0.0..=1.0).contains(&v) {
            bail!("{name} must be within [0, 1], got {v}");
        }
    }
    let (records, sha) = load_built(&args.corpus)?;
    let detector = args.detector.load()?;
    let dev: Vec<&Record> = records
        .iter()
        .filter(|r| r.split == Some(Split::Dev))
        .collect();
    if dev.is_empty() {
        bail!("the corpus has no dev records to calibrate on");
    }
    let decisions = run::decide_all(&detector, &dev, |_| {});
    let mut scored: Vec<(Channel, calibrate::Scored)> = Vec::new();
    let mut errors = 0;
    for (r, d) in dev.iter().zip(&decisions) {
        match d {
            Ok(d) => scored.push((d.channel, (d.score, detector.floor_status(d), r.label))),
            Err(e) => {
                eprintln!("error: {}: {e}", r.id);
                errors += 1;
            }
        }
    }
    if errors > 0 {
        bail!("{errors} dev record(s) could not be scored; not calibrating on a partial set");
    }
    let mut config: Config = detector.config().clone();
    let targets = calibrate::Targets {
        block_fpr: args.target_fpr,
        referral: args.target_referral,
        flag_fpr: args.target_flag_fpr,
        above: unfloored_weight(&config),
    };
    config.channel_thresholds.clear();
    // A channel with enough benign dev records gets thresholds fitted on its own
    // records; the global thresholds are fitted on the records of the other channels,
    // the ones that use them (fitted on all, they would follow the big channels).
    let min_benign = args.min_channel_benign.unwrap_or_else(|| {
        if args.target_fpr > 0.0 {
            (3.0 / args.target_fpr).ceil() as usize
        } else {
            usize::MAX
        }
    });
    let mut per_channel = Vec::new();
    for channel in Channel::ALL {
        let own: Vec<calibrate::Scored> = scored
            .iter()
            .filter(|s| s.0 == channel)
            .map(|s| s.1)
            .collect();
        let benign = own.iter().filter(|s| s.2 == Label::Benign).count();
        if benign < min_benign {
            per_channel.push(format!(
                "# {channel}: {benign} benign dev records (< {min_benign}): global thresholds\n"
            ));
            continue;
        }
        let ch = calibrate::choose(&own, targets);
        per_channel.push(format!(
            "# {channel}: {} dev records ({benign} benign): review {:.4}, block {:.4}, \
             block FPR {:.4}, flag FPR {:.4}, referral {:.4}\n",
            ch.records,
            ch.thresholds.review,
            ch.thresholds.block,
            ch.block_fpr,
            ch.flag_fpr,
            ch.referral_rate
        ));
        config.channel_thresholds.insert(channel, ch.thresholds);
    }
    let rest: Vec<calibrate::Scored> = scored
        .iter()
        .filter(|s| !config.channel_thresholds.contains_key(&s.0))
        .map(|s| s.1)
        .collect();
    let rest_benign = rest.iter().filter(|s| s.2 == Label::Benign).count();
    // Too few records left to resolve the targets: fit the global ones on all.
    let (global_pool, global_on) = if rest_benign >= min_benign || rest.len() == scored.len() {
        (rest, "the channels without thresholds of their own")
    } else {
        (
            scored.iter().map(|s| s.1).collect(),
            "all channels (the others have too few benign records)",
        )
    };
    let c = calibrate::choose(&global_pool, targets);
    let (band, band_share) = calibrate::review_band(&global_pool, c.thresholds, args.review_share);
    config.thresholds = c.thresholds;
    config.review.band = Some(band);
    config.validate()?;
    let body = toml::to_string_pretty(&config).context("serializing configuration")?;
    let header = format!(
        "# Written by `portcullis calibrate` — do not edit the thresholds by hand.\n\
         # corpus_sha256 = {sha}\n# split = dev ({} records)\n\
         # target_fpr = {}, target_referral = {}, target_flag_fpr = {}\n\
         # global thresholds fitted on {global_on}: {} records\n\
         # every threshold above {}: the fused score of one finding without a floor\n\
         # achieved on dev: block FPR = {:.4}, flag FPR = {:.4}, referral rate = {:.4}\n\
         # review.band: target share {}, achieved on dev {:.4}\n\
         # per channel (the same targets on each channel's dev records):\n{}",
        scored.len(),
        args.target_fpr,
        args.target_referral,
        args.target_flag_fpr
            .map_or_else(|| "none".to_string(), |t| t.to_string()),
        c.records,
        targets.above,
        c.block_fpr,
        c.flag_fpr,
        c.referral_rate,
        args.review_share,
        band_share,
        per_channel.concat()
    );
    std::fs::write(&args.out, format!("{header}{body}"))
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "review = {:.4}, block = {:.4} (dev: block FPR {:.4}, referral {:.4}); wrote {}",
        c.thresholds.review,
        c.thresholds.block,
        c.block_fpr,
        c.referral_rate,
        args.out.display()
    );
    Ok(())
}

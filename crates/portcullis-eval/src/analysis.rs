//! The evaluation report, computed from the per-record evaluation log alone
//! (`records.rs`): every figure the CASCADE audit (seed 000) says a multi-state
//! detector must be reported with. Pure functions of the records: no detector runs
//! here, so `portcullis eval report` recomputes exactly what `portcullis eval` wrote.

use crate::corpus::Label;
use crate::input::{EvalItem, InferenceSummary};
use crate::metrics::{
    bootstrap_groups, convention_metrics, mcnemar, transitions, Convention, ConventionMetrics,
    McNemar, Proportion, StateCounts,
};
use crate::records::{ConfigRecords, DecisionLine, Order, Outcome};
use portcullis_core::{DecisionRecord, Status};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Cosine similarity at or above which two texts are near-duplicates.
pub const NEAR_THRESHOLD: f64 = 0.95;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub corpus: String,
    pub corpus_sha256: String,
    pub configs: Vec<ConfigSummary>,
    pub input_errors: Vec<String>,
    pub inference: InferenceSummary,
    pub reference: Vec<String>,
    pub embedder: Option<String>,
    pub bootstrap_seed: u64,
    pub bootstrap_replicates: usize,
    pub shuffle_seed: u64,
    pub subsets: Vec<SubsetReport>,
    pub order: Vec<OrderCheck>,
    pub latency: Vec<LatencyReport>,
}

impl Report {
    /// True when every configuration gave identical per-record decisions in every pass.
    pub fn order_independent(&self) -> bool {
        self.order.iter().all(|o| o.differences.is_empty())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfigSummary {
    pub name: String,
    pub spec: String,
    pub config_hash: String,
    pub stages: Vec<String>,
    pub command: String,
    pub timeout_us: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SubsetReport {
    pub name: String,
    pub records: usize,
    pub detectors: Vec<DetectorResult>,
    pub paired: Vec<Paired>,
    pub frame_only: FrameBaseline,
    pub duplicates: Duplicates,
    /// Per configuration: rows of stratified metrics.
    pub strata: Vec<(String, Vec<StratumRow>)>,
    /// Per configuration with the LLM review stage on: what it did.
    pub review: Vec<crate::review::ReviewSummary>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ErrorEntry {
    pub id: String,
    pub outcome: Outcome,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DetectorResult {
    pub config: String,
    pub malicious: StateCounts,
    pub benign: StateCounts,
    pub flag: ConventionMetrics,
    pub denial: ConventionMetrics,
    pub referral_rate: Proportion,
    pub block_precision: Proportion,
    /// Errors and timeouts: counted, listed, never scored.
    pub errors: Vec<ErrorEntry>,
    pub lineage_groups: usize,
    pub bootstrap: Vec<BootstrapCi>,
    pub curves: Curves,
}

#[derive(Debug, Clone, Serialize)]
pub struct BootstrapCi {
    pub metric: String,
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Curves {
    /// (FPR, TPR) at each distinct score threshold, from strictest to laxest.
    pub roc: Vec<(f64, f64)>,
    /// (recall, precision) at the same thresholds.
    pub pr: Vec<(f64, f64)>,
    pub roc_auc: f64,
    pub sweep: Vec<SweepRow>,
}

/// One operating point: REVIEW at `review`, BLOCK at the configuration's threshold.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub review: f64,
    pub block: f64,
    /// score >= review.
    pub flag_recall: Proportion,
    pub flag_fpr: Proportion,
    pub flag_precision: Proportion,
    /// review <= score < block.
    pub referral_rate: Proportion,
}

#[derive(Debug, Clone, Serialize)]
pub struct Paired {
    pub a: String,
    pub b: String,
    pub records: u64,
    /// `m[i][j]`: records with state i under `a` and j under `b` (ALLOW, REVIEW, BLOCK).
    pub transitions: [[u64; 3]; 3],
    /// On correctness: b = correct under `a` only, c = correct under `b` only.
    pub mcnemar_flag: McNemar,
    pub mcnemar_denial: McNemar,
}

#[derive(Debug, Clone, Serialize)]
pub struct FrameFamily {
    pub wrapper: String,
    /// The characters every text of the family starts with.
    pub prefix: String,
    pub malicious: u64,
    pub benign: u64,
    pub predicts_malicious: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FrameBaseline {
    pub families: Vec<FrameFamily>,
    pub recall: Proportion,
    pub fpr: Proportion,
    pub precision: Proportion,
    pub accuracy: Proportion,
}

#[derive(Debug, Clone, Serialize)]
pub struct Duplicates {
    pub records: usize,
    pub distinct_texts: usize,
    pub surplus_copies: usize,
    pub records_with_twin: usize,
    /// Duplicate groups whose records disagree in label (ids of the group).
    pub conflicting_labels: Vec<Vec<String>>,
    /// Records whose text also occurs in another subset of the input.
    pub twin_outside_subset: usize,
    /// Near-duplicate groups (embedding cosine >= 0.95), when an embedder ran.
    pub near_distinct: Option<usize>,
    pub overlap_train: usize,
    pub overlap_rule_examples: usize,
    pub near_reference: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StratumRow {
    pub dimension: String,
    pub value: String,
    pub malicious: StateCounts,
    pub benign: StateCounts,
    pub flag_recall: Proportion,
    pub flag_fpr: Proportion,
    pub denial_recall: Proportion,
    pub denial_fpr: Proportion,
}

#[derive(Debug, Clone, Serialize)]
pub struct OrderDifference {
    pub run: u32,
    pub id: String,
    pub first: String,
    pub then: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct OrderCheck {
    pub config: String,
    pub runs: Vec<(u32, Order, Option<u64>)>,
    pub compared: u64,
    pub differences: Vec<OrderDifference>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    pub name: String,
    pub n: usize,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    pub config: String,
    pub runs: usize,
    pub threads: usize,
    /// Records per second of each pass (wall clock, all threads).
    pub throughput: Vec<f64>,
    /// Load average when each pass started, where known.
    pub load_average: Vec<Option<f64>>,
    pub rows: Vec<Distribution>,
}

/// A scored record of one configuration.
struct Scored<'a> {
    item: &'a EvalItem,
    status: Status,
    score: f64,
    /// The decision record (absent for synthetic rows of baselines).
    record: Option<&'a DecisionRecord>,
}

/// Build the report from the records of one or more configurations.
pub fn analyze(configs: &[ConfigRecords]) -> Result<Report, String> {
    let mut sorted: Vec<&ConfigRecords> = configs.iter().collect();
    sorted.sort_by(|a, b| (a.meta.index, &a.meta.config).cmp(&(b.meta.index, &b.meta.config)));
    let configs = sorted.as_slice();
    let first = configs
        .first()
        .ok_or_else(|| "no records to report on".to_string())?;
    let mut names = BTreeSet::new();
    for c in configs {
        if !names.insert(c.meta.config.clone()) {
            return Err(format!("configuration {:?} appears twice", c.meta.config));
        }
        if c.meta.corpus_sha256 != first.meta.corpus_sha256 {
            return Err(format!(
                "configuration {:?} was run on another corpus ({} vs {})",
                c.meta.config, c.meta.corpus_sha256, first.meta.corpus_sha256
            ));
        }
    }
    // The items of the first pass, by id, in corpus order.
    let mut items: Vec<&EvalItem> = Vec::new();
    let mut seen = BTreeSet::new();
    for c in configs {
        for d in c.decisions.iter().filter(|d| d.run == 0) {
            if let Some(it) = &d.item {
                if seen.insert(it.id.clone()) {
                    items.push(it);
                }
            }
        }
    }
    let mut subset_of: HashMap<&str, &str> = HashMap::new();
    for c in configs {
        for d in c.decisions.iter().filter(|d| d.run == 0) {
            subset_of.insert(d.id.as_str(), d.subset.as_str());
        }
    }
    let mut subset_names: Vec<String> = first.meta.subsets.clone();
    for it in &items {
        let s = subset_of.get(it.id.as_str()).copied().unwrap_or("all");
        if !subset_names.iter().any(|n| n == s) {
            subset_names.push(s.to_string());
        }
    }
    let families = frame_families(&items);
    let mut subsets = Vec::new();
    for name in &subset_names {
        let sub_items: Vec<&EvalItem> = items
            .iter()
            .copied()
            .filter(|it| subset_of.get(it.id.as_str()).copied() == Some(name.as_str()))
            .collect();
        if sub_items.is_empty() {
            continue;
        }
        subsets.push(subset_report(name, &sub_items, configs, &families));
    }
    Ok(Report {
        corpus: first.meta.corpus.clone(),
        corpus_sha256: first.meta.corpus_sha256.clone(),
        configs: configs
            .iter()
            .map(|c| ConfigSummary {
                name: c.meta.config.clone(),
                spec: c.meta.spec.clone(),
                config_hash: c.meta.config_hash.clone(),
                stages: c.meta.stages.clone(),
                command: c.meta.command.clone(),
                timeout_us: c.meta.timeout_us,
            })
            .collect(),
        input_errors: first.meta.input_errors.clone(),
        inference: first.meta.inference.clone(),
        reference: first.meta.reference.clone(),
        embedder: first.meta.embedder.clone(),
        bootstrap_seed: first.meta.bootstrap_seed,
        bootstrap_replicates: first.meta.bootstrap_replicates,
        shuffle_seed: first.meta.shuffle_seed,
        subsets,
        order: configs.iter().map(|c| order_check(c)).collect(),
        latency: configs.iter().map(|c| latency(c)).collect(),
    })
}

fn label_counts<'a>(rows: impl Iterator<Item = &'a Scored<'a>>) -> (StateCounts, StateCounts) {
    let mut m = StateCounts::default();
    let mut b = StateCounts::default();
    for s in rows {
        match s.item.label {
            Label::Malicious => m.add(s.status),
            Label::Benign => b.add(s.status),
        }
    }
    (m, b)
}

fn scored_of<'a>(
    c: &'a ConfigRecords,
    items: &HashMap<&str, &'a EvalItem>,
) -> (Vec<Scored<'a>>, Vec<ErrorEntry>) {
    let mut scored = Vec::new();
    let mut errors = Vec::new();
    for d in c.decisions.iter().filter(|d| d.run == 0) {
        let Some(&item) = items.get(d.id.as_str()) else {
            continue;
        };
        match (d.outcome, &d.decision) {
            (Outcome::Ok, Some(rec)) => scored.push(Scored {
                item,
                status: rec.status,
                score: rec.score,
                record: Some(rec),
            }),
            (outcome, _) => errors.push(ErrorEntry {
                id: d.id.clone(),
                outcome,
                message: d.error.clone().unwrap_or_else(|| "no decision".into()),
            }),
        }
    }
    (scored, errors)
}

fn subset_report(
    name: &str,
    items: &[&EvalItem],
    configs: &[&ConfigRecords],
    families: &BTreeMap<String, String>,
) -> SubsetReport {
    let by_id: HashMap<&str, &EvalItem> = items.iter().map(|it| (it.id.as_str(), *it)).collect();
    type PerConfig<'a> = (String, Vec<Scored<'a>>, Vec<ErrorEntry>, f64, f64);
    let per: Vec<PerConfig> = configs
        .iter()
        .map(|c| {
            let (s, e) = scored_of(c, &by_id);
            let t = c
                .decisions
                .iter()
                .find_map(|d| d.decision.as_ref().map(|r| r.thresholds));
            let (review, block) = t.map_or((f64::NAN, f64::NAN), |t| (t.review, t.block));
            (c.meta.config.clone(), s, e, review, block)
        })
        .collect();
    let seed = configs.first().map_or(0, |c| c.meta.bootstrap_seed);
    let reps = configs.first().map_or(0, |c| c.meta.bootstrap_replicates);
    let detectors = per
        .iter()
        .map(|(config, scored, errors, review, block)| {
            detector_result(config, scored, errors.clone(), *review, *block, seed, reps)
        })
        .collect();
    let mut paired = Vec::new();
    for i in 0..per.len() {
        for j in i + 1..per.len() {
            paired.push(paired_cmp(&per[i].0, &per[i].1, &per[j].0, &per[j].1));
        }
    }
    let strata = per
        .iter()
        .map(|(config, scored, ..)| (config.clone(), strata_rows(scored)))
        .collect();
    let review = per
        .iter()
        .filter_map(|(config, scored, ..)| {
            let pairs: Vec<_> = scored
                .iter()
                .filter_map(|s| s.record.map(|r| (s.item, r)))
                .collect();
            crate::review::summary(config, &pairs)
        })
        .collect();
    SubsetReport {
        name: name.to_string(),
        records: items.len(),
        detectors,
        paired,
        review,
        frame_only: frame_baseline(items, families),
        duplicates: duplicates(items, configs),
        strata,
    }
}

fn detector_result(
    config: &str,
    scored: &[Scored],
    errors: Vec<ErrorEntry>,
    review: f64,
    block: f64,
    seed: u64,
    replicates: usize,
) -> DetectorResult {
    let (m, b) = label_counts(scored.iter());
    let flag = convention_metrics(Convention::Flag, &m, &b);
    let denial = convention_metrics(Convention::Denial, &m, &b);
    let referral_rate = Proportion::new(m.review + b.review, m.total() + b.total());
    // Whole lineage groups resampled; the same seed and group order give every
    // metric the same replicates.
    let mut groups: BTreeMap<&str, (StateCounts, StateCounts)> = BTreeMap::new();
    for s in scored {
        let g = groups.entry(s.item.lineage()).or_default();
        match s.item.label {
            Label::Malicious => g.0.add(s.status),
            Label::Benign => g.1.add(s.status),
        }
    }
    let gs: Vec<(StateCounts, StateCounts)> = groups.values().copied().collect();
    type Stat = fn(&StateCounts, &StateCounts) -> (u64, u64);
    let stats: [(&str, f64, Stat); 9] = [
        ("flag recall", flag.recall.p, |m, _| {
            (m.review + m.block, m.total())
        }),
        ("flag FPR", flag.fpr.p, |_, b| {
            (b.review + b.block, b.total())
        }),
        ("flag precision", flag.precision.p, |m, b| {
            (m.review + m.block, m.review + m.block + b.review + b.block)
        }),
        ("flag accuracy", flag.accuracy.p, |m, b| {
            (m.review + m.block + b.allow, m.total() + b.total())
        }),
        ("denial recall", denial.recall.p, |m, _| {
            (m.block, m.total())
        }),
        ("denial FPR", denial.fpr.p, |_, b| (b.block, b.total())),
        ("BLOCK precision", denial.precision.p, |m, b| {
            (m.block, m.block + b.block)
        }),
        ("denial accuracy", denial.accuracy.p, |m, b| {
            (m.block + b.allow + b.review, m.total() + b.total())
        }),
        ("referral rate", referral_rate.p, |m, b| {
            (m.review + b.review, m.total() + b.total())
        }),
    ];
    let bootstrap = stats
        .iter()
        .map(|(name, est, f)| {
            let kn: Vec<(u64, u64)> = gs.iter().map(|(m, b)| f(m, b)).collect();
            let (lo, hi) = if kn.iter().all(|(_, n)| *n == 0) {
                (f64::NAN, f64::NAN)
            } else {
                bootstrap_groups(&kn, replicates, seed)
            };
            BootstrapCi {
                metric: name.to_string(),
                estimate: *est,
                lo,
                hi,
            }
        })
        .collect();
    DetectorResult {
        config: config.to_string(),
        malicious: m,
        benign: b,
        flag,
        denial,
        referral_rate,
        block_precision: denial.precision,
        errors,
        lineage_groups: gs.len(),
        bootstrap,
        curves: curves(scored, review, block),
    }
}

/// ROC and precision-recall points of the fused score, and the threshold sweep.
fn curves(scored: &[Scored], review: f64, block: f64) -> Curves {
    let pos = scored
        .iter()
        .filter(|s| s.item.label == Label::Malicious)
        .count() as f64;
    let neg = scored.len() as f64 - pos;
    let mut sorted: Vec<(f64, bool)> = scored
        .iter()
        .map(|s| (s.score, s.item.label == Label::Malicious))
        .collect();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut roc = vec![(0.0, 0.0)];
    let mut pr = Vec::new();
    let (mut tp, mut fp) = (0.0, 0.0);
    let mut i = 0;
    while i < sorted.len() {
        let t = sorted[i].0;
        while i < sorted.len() && sorted[i].0 == t {
            if sorted[i].1 {
                tp += 1.0;
            } else {
                fp += 1.0;
            }
            i += 1;
        }
        let tpr = if pos > 0.0 { tp / pos } else { f64::NAN };
        let fpr = if neg > 0.0 { fp / neg } else { f64::NAN };
        roc.push((fpr, tpr));
        pr.push((tpr, tp / (tp + fp)));
    }
    let roc_auc = if pos > 0.0 && neg > 0.0 {
        roc.windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[1].1 + w[0].1) / 2.0)
            .sum()
    } else {
        f64::NAN
    };
    let mut grid: Vec<f64> = vec![
        0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99,
    ];
    if review.is_finite() {
        grid.push(review);
    }
    grid.sort_by(f64::total_cmp);
    grid.dedup();
    let sweep = grid
        .into_iter()
        .map(|t| {
            let flagged = |l: Label| {
                scored
                    .iter()
                    .filter(|s| s.item.label == l && s.score >= t)
                    .count() as u64
            };
            let (fm, fb) = (flagged(Label::Malicious), flagged(Label::Benign));
            let referred = scored
                .iter()
                .filter(|s| s.score >= t && (block.is_nan() || s.score < block))
                .count() as u64;
            SweepRow {
                review: t,
                block,
                flag_recall: Proportion::new(fm, pos as u64),
                flag_fpr: Proportion::new(fb, neg as u64),
                flag_precision: Proportion::new(fm, fm + fb),
                referral_rate: Proportion::new(referred, scored.len() as u64),
            }
        })
        .collect();
    Curves {
        roc,
        pr,
        roc_auc,
        sweep,
    }
}

fn paired_cmp(a: &str, sa: &[Scored], b: &str, sb: &[Scored]) -> Paired {
    let bmap: HashMap<&str, &Scored> = sb.iter().map(|s| (s.item.id.as_str(), s)).collect();
    let pairs: Vec<(&Scored, &Scored)> = sa
        .iter()
        .filter_map(|x| bmap.get(x.item.id.as_str()).map(|y| (x, *y)))
        .collect();
    let correct =
        |s: &Scored, c: Convention| c.positive(s.status) == (s.item.label == Label::Malicious);
    let test = |c: Convention| {
        let only_a = pairs
            .iter()
            .filter(|(x, y)| correct(x, c) && !correct(y, c))
            .count() as u64;
        let only_b = pairs
            .iter()
            .filter(|(x, y)| !correct(x, c) && correct(y, c))
            .count() as u64;
        mcnemar(only_a, only_b)
    };
    Paired {
        a: a.to_string(),
        b: b.to_string(),
        records: pairs.len() as u64,
        transitions: transitions(pairs.iter().map(|(x, y)| (x.status, y.status))),
        mcnemar_flag: test(Convention::Flag),
        mcnemar_denial: test(Convention::Denial),
    }
}

/// Wrapper family -> the characters all its texts start with (over the whole input).
pub fn frame_families(items: &[&EvalItem]) -> BTreeMap<String, String> {
    let mut fam: BTreeMap<String, String> = BTreeMap::new();
    for it in items {
        let (Some(w), Some(t)) = (&it.wrapper, &it.text) else {
            continue;
        };
        match fam.get_mut(w) {
            None => {
                fam.insert(w.clone(), t.chars().take(200).collect());
            }
            Some(p) => {
                let n: usize = p
                    .chars()
                    .zip(t.chars())
                    .take_while(|(a, b)| a == b)
                    .map(|(a, _)| a.len_utf8())
                    .sum();
                p.truncate(n);
            }
        }
    }
    fam
}

/// Shortest shared prefix (characters) a frame-only rule may use.
pub const MIN_FRAME_PREFIX: usize = 4;

/// The best rule that reads only the wrapper: a record is called malicious when its
/// text starts with the shared prefix of a family in which malicious records are the
/// majority on this very subset (an optimistic, in-sample choice: it measures how
/// much label information the frames carry, it is not a detector).
fn frame_baseline(items: &[&EvalItem], families: &BTreeMap<String, String>) -> FrameBaseline {
    let usable: Vec<(&String, &String)> = families
        .iter()
        .filter(|(_, p)| p.chars().count() >= MIN_FRAME_PREFIX)
        .collect();
    let starts = |it: &EvalItem, p: &str| it.text.as_deref().is_some_and(|t| t.starts_with(p));
    let fams: Vec<FrameFamily> = usable
        .iter()
        .map(|(w, p)| {
            let m = items
                .iter()
                .filter(|it| it.label == Label::Malicious && starts(it, p))
                .count() as u64;
            let b = items
                .iter()
                .filter(|it| it.label == Label::Benign && starts(it, p))
                .count() as u64;
            FrameFamily {
                wrapper: (*w).clone(),
                prefix: (*p).clone(),
                malicious: m,
                benign: b,
                predicts_malicious: m > b,
            }
        })
        .collect();
    let predict = |it: &EvalItem| {
        fams.iter()
            .any(|f| f.predicts_malicious && starts(it, &f.prefix))
    };
    let mut c = [[0u64; 2]; 2]; // [label malicious][predicted]
    for it in items {
        c[usize::from(it.label == Label::Malicious)][usize::from(predict(it))] += 1;
    }
    let (tp, fnn, fp, tn) = (c[1][1], c[1][0], c[0][1], c[0][0]);
    FrameBaseline {
        families: fams,
        recall: Proportion::new(tp, tp + fnn),
        fpr: Proportion::new(fp, fp + tn),
        precision: Proportion::new(tp, tp + fp),
        accuracy: Proportion::new(tp + tn, tp + tn + fp + fnn),
    }
}

fn duplicates(items: &[&EvalItem], configs: &[&ConfigRecords]) -> Duplicates {
    let mut groups: BTreeMap<&str, Vec<&EvalItem>> = BTreeMap::new();
    for it in items {
        groups.entry(it.dup_of.as_str()).or_default().push(it);
    }
    // Twins elsewhere: another record of the input (any subset) with the same text.
    let mut all_groups: HashMap<&str, usize> = HashMap::new();
    for c in configs.iter().take(1) {
        for d in c.decisions.iter().filter(|d| d.run == 0) {
            if let Some(it) = &d.item {
                *all_groups.entry(it.dup_of.as_str()).or_default() += 1;
            }
        }
    }
    let twin_outside_subset = items
        .iter()
        .filter(|it| {
            let in_subset = groups.get(it.dup_of.as_str()).map_or(0, Vec::len);
            all_groups.get(it.dup_of.as_str()).copied().unwrap_or(0) > in_subset
        })
        .count();
    let near = items.iter().all(|it| it.near_dup_of.is_some()) && !items.is_empty();
    let near_distinct = near.then(|| {
        items
            .iter()
            .filter_map(|it| it.near_dup_of.as_deref())
            .collect::<BTreeSet<_>>()
            .len()
    });
    let near_reference = items
        .iter()
        .any(|it| it.overlap.near_reference.is_some())
        .then(|| {
            items
                .iter()
                .filter(|it| {
                    it.overlap
                        .near_reference
                        .is_some_and(|c| c >= NEAR_THRESHOLD)
                })
                .count()
        });
    Duplicates {
        records: items.len(),
        distinct_texts: groups.len(),
        surplus_copies: items.len() - groups.len(),
        records_with_twin: groups.values().filter(|g| g.len() > 1).map(Vec::len).sum(),
        conflicting_labels: groups
            .values()
            .filter(|g| g.iter().any(|it| it.label != g[0].label))
            .map(|g| g.iter().map(|it| it.id.clone()).collect())
            .collect(),
        twin_outside_subset,
        near_distinct,
        overlap_train: items.iter().filter(|it| it.overlap.train).count(),
        overlap_rule_examples: items.iter().filter(|it| it.overlap.rule_examples).count(),
        near_reference,
    }
}

fn row(dimension: &str, value: &str, rows: &[&Scored]) -> StratumRow {
    let (m, b) = label_counts(rows.iter().copied());
    let f = convention_metrics(Convention::Flag, &m, &b);
    let d = convention_metrics(Convention::Denial, &m, &b);
    StratumRow {
        dimension: dimension.into(),
        value: value.into(),
        malicious: m,
        benign: b,
        flag_recall: f.recall,
        flag_fpr: f.fpr,
        denial_recall: d.recall,
        denial_fpr: d.fpr,
    }
}

fn strata_rows(scored: &[Scored]) -> Vec<StratumRow> {
    type Key = fn(&EvalItem) -> String;
    let dims: [(&str, Key); 9] = [
        ("channel", |it| it.channel.as_str().to_string()),
        ("category", |it| {
            it.category.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("provenance", |it| {
            it.provenance.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("wrapper", |it| {
            it.wrapper.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("transform", |it| {
            it.transform.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("language", |it| {
            it.language.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("register", |it| {
            it.register.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("source", |it| {
            it.source.clone().unwrap_or_else(|| "(none)".into())
        }),
        ("overlap", |it| {
            match (it.overlap.train, it.overlap.rule_examples) {
                (true, true) => "train and rule examples",
                (true, false) => "train (exact)",
                (false, true) => "rule examples (exact)",
                (false, false) => "none",
            }
            .to_string()
        }),
    ];
    let mut out = Vec::new();
    let all: Vec<&Scored> = scored.iter().collect();
    out.push(row("all", "all records", &all));
    // The unwrapped, deduplicated subset (first record of each text), and the
    // originals only (no generated record at all), deduplicated.
    let mut seen = BTreeSet::new();
    let unwrapped: Vec<&Scored> = scored
        .iter()
        .filter(|s| !s.item.is_wrapped() && seen.insert(s.item.dup_of.as_str()))
        .collect();
    out.push(row("subset", "unwrapped, deduplicated", &unwrapped));
    let mut seen = BTreeSet::new();
    let originals: Vec<&Scored> = scored
        .iter()
        .filter(|s| {
            s.item.parent_id.is_none()
                && !s.item.is_wrapped()
                && s.item.transform.is_none()
                && seen.insert(s.item.dup_of.as_str())
        })
        .collect();
    out.push(row("subset", "originals only, deduplicated", &originals));
    let mut seen = BTreeSet::new();
    let first_near: Vec<&Scored> = scored
        .iter()
        .filter(|s| s.item.near_dup_of.is_some())
        .filter(|s| seen.insert(s.item.near_dup_of.clone().unwrap_or_default()))
        .collect();
    if !first_near.is_empty() {
        out.push(row(
            "subset",
            "near-deduplicated (cosine 0.95)",
            &first_near,
        ));
    }
    let near: Vec<&Scored> = scored
        .iter()
        .filter(|s| s.item.overlap.near_reference.is_some())
        .collect();
    if !near.is_empty() {
        for (v, hit) in [
            ("near reference (cosine >= 0.95)", true),
            ("not near reference", false),
        ] {
            let rows: Vec<&Scored> = near
                .iter()
                .copied()
                .filter(|s| {
                    s.item
                        .overlap
                        .near_reference
                        .is_some_and(|c| c >= NEAR_THRESHOLD)
                        == hit
                })
                .collect();
            out.push(row("overlap", v, &rows));
        }
    }
    for (dim, key) in dims {
        let mut by: BTreeMap<String, Vec<&Scored>> = BTreeMap::new();
        for s in scored {
            by.entry(key(s.item)).or_default().push(s);
        }
        for (v, rows) in by {
            out.push(row(dim, &v, &rows));
        }
    }
    out
}

/// A decision with everything that may legitimately vary between passes removed
/// (position, time, latencies, and whether a review verdict came from the cache —
/// the verdict itself must not vary).
pub fn fingerprint(outcome: Outcome, d: Option<&DecisionRecord>, error: Option<&str>) -> String {
    match d {
        Some(d) => {
            let mut d = d.clone();
            d.position = 0;
            d.time = String::new();
            d.latency_us = 0;
            for s in &mut d.stages {
                s.latency_us = 0;
            }
            if let Some(r) = &mut d.review {
                r.latency_us = 0;
                r.cached = false;
            }
            serde_json::to_string(&d).unwrap_or_default()
        }
        None => format!("{outcome:?}: {}", error.unwrap_or("")),
    }
}

fn short(d: &DecisionLine) -> String {
    match &d.decision {
        Some(r) => format!("{} {:.6}", r.status.as_str(), r.score),
        None => format!("{:?}", d.outcome),
    }
}

fn order_check(c: &ConfigRecords) -> OrderCheck {
    let base: HashMap<&str, (&DecisionLine, String)> = c
        .decisions
        .iter()
        .filter(|d| d.run == 0)
        .map(|d| {
            (
                d.id.as_str(),
                (
                    d,
                    fingerprint(d.outcome, d.decision.as_ref(), d.error.as_deref()),
                ),
            )
        })
        .collect();
    let mut differences = Vec::new();
    let mut compared = 0;
    for d in c.decisions.iter().filter(|d| d.run != 0) {
        compared += 1;
        let fp = fingerprint(d.outcome, d.decision.as_ref(), d.error.as_deref());
        match base.get(d.id.as_str()) {
            Some((_, bfp)) if *bfp == fp => {}
            Some((b, _)) => differences.push(OrderDifference {
                run: d.run,
                id: d.id.clone(),
                first: short(b),
                then: short(d),
            }),
            None => differences.push(OrderDifference {
                run: d.run,
                id: d.id.clone(),
                first: "absent".into(),
                then: short(d),
            }),
        }
    }
    OrderCheck {
        config: c.meta.config.clone(),
        runs: c.runs.iter().map(|r| (r.run, r.order, r.seed)).collect(),
        compared,
        differences,
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

fn distribution(name: String, mut v: Vec<u64>) -> Distribution {
    v.sort_unstable();
    let mean = if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    };
    Distribution {
        name,
        n: v.len(),
        p50_us: percentile(&v, 0.50),
        p95_us: percentile(&v, 0.95),
        p99_us: percentile(&v, 0.99),
        mean_us: mean,
    }
}

fn latency(c: &ConfigRecords) -> LatencyReport {
    let mut total = Vec::new();
    let mut stage: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut channel: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for d in &c.decisions {
        let Some(r) = &d.decision else { continue };
        total.push(r.latency_us);
        channel
            .entry(r.channel.as_str().to_string())
            .or_default()
            .push(r.latency_us);
        for s in &r.stages {
            stage.entry(s.name.clone()).or_default().push(s.latency_us);
        }
    }
    let mut rows = vec![distribution("all records (whole pipeline)".into(), total)];
    rows.extend(
        stage
            .into_iter()
            .map(|(k, v)| distribution(format!("stage {k}"), v)),
    );
    rows.extend(
        channel
            .into_iter()
            .map(|(k, v)| distribution(format!("channel {k}"), v)),
    );
    LatencyReport {
        config: c.meta.config.clone(),
        runs: c.runs.len(),
        threads: c.runs.iter().map(|r| r.threads).max().unwrap_or(0),
        throughput: c
            .runs
            .iter()
            .map(|r| r.records as f64 / (r.wall_us.max(1) as f64 / 1e6))
            .collect(),
        load_average: c.runs.iter().map(|r| r.load_average).collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{infer, parse_items};

    fn fixture() -> Vec<EvalItem> {
        let (mut items, errors) = parse_items(
            "{\"id\":\"m1\",\"label\":\"malicious\",\"text\":\"aaaa\",\"wrapper\":\"w\",\"provenance\":\"wrapped\",\"parent_id\":\"x\"}\n\
             {\"id\":\"m2\",\"label\":\"malicious\",\"text\":\"bbbb\"}\n\
             {\"id\":\"m3\",\"label\":\"malicious\",\"text\":\"FRAME: cccc\",\"wrapper\":\"f\",\"provenance\":\"wrapped\",\"parent_id\":\"x\"}\n\
             {\"id\":\"m4\",\"label\":\"malicious\",\"text\":\"FRAME: dddd\",\"wrapper\":\"f\",\"provenance\":\"wrapped\",\"parent_id\":\"x\"}\n\
             {\"id\":\"b1\",\"label\":\"benign\",\"text\":\"FRAME: eeee\",\"wrapper\":\"f\",\"provenance\":\"wrapped\",\"parent_id\":\"x\"}\n\
             {\"id\":\"b2\",\"label\":\"benign\",\"text\":\"ffff\"}\n",
            "t",
        );
        assert!(errors.is_empty());
        infer(&mut items);
        items
    }

    #[test]
    fn frame_only_rule_reads_the_shared_prefix() {
        let items = fixture();
        let refs: Vec<&EvalItem> = items.iter().collect();
        let fam = frame_families(&refs);
        assert_eq!(fam["f"], "FRAME: ");
        // Family "w" has one text: its whole text is the "prefix" (>= 4 chars).
        let b = frame_baseline(&refs, &fam);
        // "f": 2 malicious vs 1 benign → malicious; "w": 1 vs 0 → malicious.
        assert_eq!((b.recall.k, b.recall.n), (3, 4));
        assert_eq!((b.fpr.k, b.fpr.n), (1, 2));
        assert_eq!((b.precision.k, b.precision.n), (3, 4));
        assert_eq!((b.accuracy.k, b.accuracy.n), (4, 6));
    }

    #[test]
    fn roc_auc_and_sweep_match_hand_computed_values() {
        let items = fixture();
        // Scores: m1 .9, m2 .8, m3 .3, m4 .3, b1 .5, b2 .1 → pairs (mal > ben):
        // vs b1 (.5): m1, m2 win, m3, m4 lose = 2; vs b2 (.1): all 4 win → 6/8.
        let scores = [0.9, 0.8, 0.3, 0.3, 0.5, 0.1];
        let scored: Vec<Scored> = items
            .iter()
            .zip(scores)
            .map(|(item, score)| Scored {
                item,
                status: Status::Allow,
                score,
                record: None,
            })
            .collect();
        let c = curves(&scored, 0.4, 0.85);
        assert!((c.roc_auc - 0.75).abs() < 1e-12, "{}", c.roc_auc);
        assert_eq!(c.roc.last(), Some(&(1.0, 1.0)));
        let at = |t: f64| {
            c.sweep
                .iter()
                .find(|r| (r.review - t).abs() < 1e-12)
                .unwrap()
        };
        // review 0.4, block 0.85: flagged m1 m2 b1; referred (0.4 <= s < 0.85) m2 b1.
        let r = at(0.4);
        assert_eq!(
            (r.flag_recall.k, r.flag_fpr.k, r.referral_rate.k),
            (2, 1, 2)
        );
        let r = at(0.95);
        assert_eq!((r.flag_recall.k, r.referral_rate.k), (0, 0));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.95), 95.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[7], 0.99), 7.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn strata_include_the_unwrapped_deduplicated_subset() {
        let items = fixture();
        let scored: Vec<Scored> = items
            .iter()
            .map(|item| Scored {
                item,
                status: if item.label == Label::Malicious {
                    Status::Block
                } else {
                    Status::Review
                },
                score: 0.5,
                record: None,
            })
            .collect();
        let rows = strata_rows(&scored);
        let unwrapped = rows
            .iter()
            .find(|r| r.value == "unwrapped, deduplicated")
            .unwrap();
        // m2 and b2 are the only unwrapped records.
        assert_eq!(
            (unwrapped.malicious.total(), unwrapped.benign.total()),
            (1, 1)
        );
        assert_eq!(unwrapped.flag_fpr.k, 1);
        assert_eq!(unwrapped.denial_fpr.k, 0);
    }
}

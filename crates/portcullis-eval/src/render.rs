//! The evaluation report as Markdown, and its charts as SVG (plotters, no fonts or
//! system libraries needed).

use crate::analysis::{Report, SubsetReport};
use crate::metrics::Proportion;
use portcullis_chart::plotters::prelude::*;
use portcullis_chart::{Frame, COLORS};
use std::fmt::Write as _;

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.2}%", 100.0 * x)
    } else {
        "n/a".into()
    }
}

fn ci(lo: f64, hi: f64) -> String {
    if lo.is_finite() && hi.is_finite() {
        format!("[{:.2}, {:.2}]", 100.0 * lo, 100.0 * hi)
    } else {
        "n/a".into()
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', "⏎")
}

fn p(x: &Proportion) -> String {
    x.to_string()
}

/// File names of the charts of a subset.
pub fn chart_names(subset: &str) -> (String, String) {
    (format!("roc-{subset}.svg"), format!("pr-{subset}.svg"))
}

/// The whole report in Markdown. `recompute` is the command that recomputes it
/// from the records; `records` lists the record files beside it.
pub fn markdown(r: &Report, recompute: &str, records: &[String], charts: bool) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "# Evaluation report\n");
    let _ = writeln!(
        w,
        "Corpus `{}` (sha256 {}). Every figure below is computed from the per-record \
         decision records beside this report ({}); recompute with:\n\n```sh\n{recompute}\n```\n",
        r.corpus,
        r.corpus_sha256,
        records
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        w,
        "Conventions: **flag** counts REVIEW or BLOCK as a positive prediction; \
         **denial-only** counts BLOCK only. Proportions carry 95% Wilson intervals \
         `[lo, hi]` in percent. Intervals describe sampling variability on this corpus only.\n"
    );
    let _ = writeln!(
        w,
        "## Configurations\n\n| name | made by | stages | config_hash |\n|---|---|---|---|"
    );
    for c in &r.configs {
        let _ = writeln!(
            w,
            "| {} | `{}` | {} | `{}` |",
            cell(&c.name),
            cell(&c.spec),
            c.stages.join(", "),
            c.config_hash
        );
    }
    let _ = writeln!(w, "\nCommands that produced the records:\n");
    for c in &r.configs {
        let _ = writeln!(w, "- {}: `{}`", c.name, c.command);
    }
    input_section(w, r);
    for sub in &r.subsets {
        subset_section(w, sub, r, charts);
    }
    order_section(w, r);
    latency_section(w, r);
    s
}

fn input_section(w: &mut String, r: &Report) {
    let _ = writeln!(w, "\n## Input\n");
    let i = &r.inference;
    let _ = writeln!(
        w,
        "{} records read; {} input line(s) skipped.",
        i.records,
        r.input_errors.len()
    );
    for e in &r.input_errors {
        let _ = writeln!(w, "- skipped: {}", cell(e));
    }
    if i.inferred.is_empty() {
        let _ = writeln!(
            w,
            "\nNo field was inferred: every record gave its provenance, parent and lineage."
        );
    } else {
        let _ = writeln!(
            w,
            "\nInferred fields (records per field; see `inferred` on each record):\n"
        );
        for (k, v) in &i.inferred {
            let _ = writeln!(w, "- `{k}`: {v}");
        }
        let _ = writeln!(
            w,
            "\nBody search (seed 000, 5.6.1): {} records without given construction searched; \
             {} found to wrap another record's text.",
            i.lineage_searched, i.wrapped_found
        );
    }
    if let Some(why) = &i.lineage_skipped {
        let _ = writeln!(w, "\nThe body search did not run: {why}.");
    }
    let _ = writeln!(
        w,
        "\nReference material for the overlap check: {}. Near-duplicates: {}.",
        if r.reference.is_empty() {
            "none".to_string()
        } else {
            r.reference.join("; ")
        },
        match &r.embedder {
            Some(e) => format!("embedder `{e}`, cosine >= 0.95"),
            None => "not measured (no embedding model was provided)".into(),
        }
    );
}

fn subset_section(w: &mut String, sub: &SubsetReport, r: &Report, charts: bool) {
    let _ = writeln!(w, "\n## Subset `{}` ({} records)\n", sub.name, sub.records);
    final_states(w, sub);
    metrics(w, sub);
    review_section(w, sub);
    bootstrap(w, sub, r);
    paired(w, sub);
    frame_only(w, sub);
    duplicates(w, sub);
    strata(w, sub);
    curves(w, sub, charts);
    errors(w, sub);
}

/// Final states (ALLOW, REVIEW, BLOCK, errors) of each configuration by label.
fn final_states(w: &mut String, sub: &SubsetReport) {
    let _ = writeln!(w, "### Final states by label\n");
    let _ = writeln!(
        w,
        "| configuration | label | n | ALLOW | REVIEW | BLOCK | errors+timeouts |\n|---|---|---|---|---|---|---|"
    );
    for d in &sub.detectors {
        for (label, c) in [("malicious", &d.malicious), ("benign", &d.benign)] {
            let _ = writeln!(
                w,
                "| {} | {label} | {} | {} | {} | {} | |",
                cell(&d.config),
                c.total(),
                c.allow,
                c.review,
                c.block
            );
        }
        let _ = writeln!(
            w,
            "| {} | (not scored) | | | | | {} |",
            cell(&d.config),
            d.errors.len()
        );
    }
}

/// Both conventions' metrics, referral rate and BLOCK precision.
fn metrics(w: &mut String, sub: &SubsetReport) {
    let _ = writeln!(w, "\n### Metrics under both conventions (Wilson 95%)\n");
    let _ = writeln!(
        w,
        "| configuration | convention | accuracy | precision | recall | F1 | FPR |\n|---|---|---|---|---|---|---|"
    );
    for d in &sub.detectors {
        for (name, m) in [("flag", &d.flag), ("denial-only", &d.denial)] {
            let _ = writeln!(
                w,
                "| {} | {name} | {} | {} | {} | {} | {} |",
                cell(&d.config),
                p(&m.accuracy),
                p(&m.precision),
                p(&m.recall),
                pct(m.f1),
                p(&m.fpr)
            );
        }
    }
    let _ = writeln!(
        w,
        "\n| configuration | referral rate (REVIEW share) | BLOCK precision |\n|---|---|---|"
    );
    for d in &sub.detectors {
        let _ = writeln!(
            w,
            "| {} | {} | {} |",
            cell(&d.config),
            p(&d.referral_rate),
            p(&d.block_precision)
        );
    }
}

/// The lineage-group bootstrap intervals.
fn bootstrap(w: &mut String, sub: &SubsetReport, r: &Report) {
    let _ = writeln!(
        w,
        "\n### Lineage-group bootstrap (percentile, {} replicates, seed {}; printed, not asserted)\n",
        r.bootstrap_replicates, r.bootstrap_seed
    );
    let _ = writeln!(
        w,
        "| configuration | groups | metric | estimate | 95% bootstrap |\n|---|---|---|---|---|"
    );
    for d in &sub.detectors {
        for b in &d.bootstrap {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} |",
                cell(&d.config),
                d.lineage_groups,
                b.metric,
                pct(b.estimate),
                ci(b.lo, b.hi)
            );
        }
    }
}

/// Paired comparisons of configurations on the same records.
fn paired(w: &mut String, sub: &SubsetReport) {
    if !sub.paired.is_empty() {
        let _ = writeln!(w, "\n### Paired comparisons (same records)\n");
        for pc in &sub.paired {
            let _ = writeln!(
                w,
                "**{}** (rows) → **{}** (columns), {} records:\n\n| | ALLOW | REVIEW | BLOCK |\n|---|---|---|---|",
                cell(&pc.a),
                cell(&pc.b),
                pc.records
            );
            for (i, name) in ["ALLOW", "REVIEW", "BLOCK"].iter().enumerate() {
                let m = pc.transitions[i];
                let _ = writeln!(w, "| {name} | {} | {} | {} |", m[0], m[1], m[2]);
            }
            let _ = writeln!(
                w,
                "\nMcNemar (continuity-corrected) on correct decisions: \
                 flag: correct only under {a} = {}, only under {b} = {}, χ² = {:.3}, p = {:.4}; \
                 denial-only: {} vs {}, χ² = {:.3}, p = {:.4}.\n",
                pc.mcnemar_flag.b,
                pc.mcnemar_flag.c,
                pc.mcnemar_flag.chi2,
                pc.mcnemar_flag.p_value,
                pc.mcnemar_denial.b,
                pc.mcnemar_denial.c,
                pc.mcnemar_denial.chi2,
                pc.mcnemar_denial.p_value,
                a = cell(&pc.a),
                b = cell(&pc.b),
            );
        }
    }
}

/// The frame-only baseline beside each configuration.
fn frame_only(w: &mut String, sub: &SubsetReport) {
    let fo = &sub.frame_only;
    let _ = writeln!(w, "\n### Frame-only baseline\n");
    if fo.families.is_empty() {
        let _ = writeln!(
            w,
            "No wrapper family with a shared prefix of at least {} characters: the frame-only \
             rule calls everything benign.\n",
            crate::analysis::MIN_FRAME_PREFIX
        );
    } else {
        let _ = writeln!(
            w,
            "The best rule that reads only the first characters shared by a wrapper family \
             (chosen on this subset itself, so optimistic): it calls a record malicious when it \
             starts with the prefix of a family whose records here are mostly malicious.\n\n\
             | wrapper family | shared prefix | malicious | benign | rule says |\n|---|---|---|---|---|"
        );
        for f in &fo.families {
            let prefix: String = f.prefix.chars().take(60).collect();
            let _ = writeln!(
                w,
                "| {} | `{}` | {} | {} | {} |",
                cell(&f.wrapper),
                cell(&prefix).replace('`', "'"),
                f.malicious,
                f.benign,
                if f.predicts_malicious {
                    "malicious"
                } else {
                    "benign"
                }
            );
        }
    }
    let _ = writeln!(
        w,
        "\n| rule | accuracy | precision | recall | FPR |\n|---|---|---|---|---|\n| frame-only | {} | {} | {} | {} |",
        p(&fo.accuracy),
        p(&fo.precision),
        p(&fo.recall),
        p(&fo.fpr)
    );
    for d in &sub.detectors {
        for (name, m) in [("flag", &d.flag), ("denial-only", &d.denial)] {
            let _ = writeln!(
                w,
                "| {} ({name}) | {} | {} | {} | {} |",
                cell(&d.config),
                p(&m.accuracy),
                p(&m.precision),
                p(&m.recall),
                p(&m.fpr)
            );
        }
    }
}

/// Duplicates and overlap with reference material.
fn duplicates(w: &mut String, sub: &SubsetReport) {
    let du = &sub.duplicates;
    let _ = writeln!(w, "\n### Duplicates and overlap with reference material\n");
    let _ = writeln!(
        w,
        "After lowercasing and whitespace normalization: {} records, {} distinct texts, \
         {} surplus copies, {} records with a twin in this subset, {} with a twin in another \
         subset of the input; {} duplicate group(s) with conflicting labels{}.",
        du.records,
        du.distinct_texts,
        du.surplus_copies,
        du.records_with_twin,
        du.twin_outside_subset,
        du.conflicting_labels.len(),
        if du.conflicting_labels.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                du.conflicting_labels
                    .iter()
                    .take(20)
                    .map(|g| g.join(" = "))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    );
    let _ = writeln!(
        w,
        "Near-duplicates (embedding cosine >= 0.95): {}.",
        match du.near_distinct {
            Some(n) => format!("{n} distinct texts"),
            None => "not measured (no embedding model)".into(),
        }
    );
    let _ = writeln!(
        w,
        "Overlap: {} records occur (exactly, after normalization) in the training material, \
         {} among the rules' own examples{}. Results on the overlapping and the \
         non-overlapping part are in the `overlap` rows of the stratified table.",
        du.overlap_train,
        du.overlap_rule_examples,
        match du.near_reference {
            Some(n) => format!("; {n} have a reference text at cosine >= 0.95"),
            None => String::new(),
        }
    );
}

/// Results by stratum.
fn strata(w: &mut String, sub: &SubsetReport) {
    let _ = writeln!(w, "\n### Stratified results\n");
    for (config, rows) in &sub.strata {
        let _ = writeln!(
            w,
            "**{}**\n\n| stratum | value | malicious n | benign n | recall (flag) | FPR (flag) | recall (denial) | FPR (denial) |\n|---|---|---|---|---|---|---|---|",
            cell(config)
        );
        for row in rows {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                row.dimension,
                cell(&row.value),
                row.malicious.total(),
                row.benign.total(),
                p(&row.flag_recall),
                p(&row.flag_fpr),
                p(&row.denial_recall),
                p(&row.denial_fpr)
            );
        }
        let _ = writeln!(w);
    }
}

/// ROC, precision-recall and the threshold sweep.
fn curves(w: &mut String, sub: &SubsetReport, charts: bool) {
    let _ = writeln!(
        w,
        "### ROC, precision-recall and threshold sweep of the fused score\n"
    );
    if charts {
        let (roc, pr) = chart_names(&sub.name);
        let _ = writeln!(w, "![ROC]({roc}) ![precision-recall]({pr})\n");
    }
    for d in &sub.detectors {
        let _ = writeln!(
            w,
            "**{}**: ROC AUC {}. Sweep: REVIEW threshold varied, BLOCK threshold fixed at {:.4}.\n\n\
             | review threshold | recall (score ≥ t) | FPR (score ≥ t) | precision | referral rate |\n|---|---|---|---|---|",
            cell(&d.config),
            if d.curves.roc_auc.is_finite() {
                format!("{:.4}", d.curves.roc_auc)
            } else {
                "n/a (one class)".into()
            },
            d.curves.sweep.first().map_or(f64::NAN, |r| r.block)
        );
        for row in &d.curves.sweep {
            let _ = writeln!(
                w,
                "| {:.4} | {} | {} | {} | {} |",
                row.review,
                p(&row.flag_recall),
                p(&row.flag_fpr),
                p(&row.flag_precision),
                p(&row.referral_rate)
            );
        }
        let _ = writeln!(w);
    }
}

/// Errors and timeouts, never scored.
fn errors(w: &mut String, sub: &SubsetReport) {
    let _ = writeln!(w, "### Errors and timeouts (never scored)\n");
    for d in &sub.detectors {
        let _ = writeln!(
            w,
            "- {}: {} error(s) or timeout(s)",
            cell(&d.config),
            d.errors.len()
        );
        for e in d.errors.iter().take(100) {
            let _ = writeln!(w, "  - `{}` {:?}: {}", e.id, e.outcome, cell(&e.message));
        }
    }
}

/// What the LLM review stage did: share sent, transitions, both conventions
/// without and with it, cost.
fn review_section(w: &mut String, sub: &SubsetReport) {
    for v in &sub.review {
        let pol = &v.policy;
        let mv = |m: &portcullis_core::Move| {
            if m.allowed {
                format!("allowed at confidence >= {:.2}", m.min_confidence)
            } else {
                "not allowed".into()
            }
        };
        let _ = writeln!(w, "\n### LLM review stage: `{}`\n", cell(&v.config));
        let _ = writeln!(
            w,
            "- policy: backend {} ({}), template {}, band [{:.3}, {:.3}), channels {:?}, timeout {} ms",
            pol.backend,
            cell(&pol.model),
            &pol.template_sha256[..pol.template_sha256.len().min(12)],
            pol.band[0],
            pol.band[1],
            pol.channels.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            pol.timeout_ms
        );
        let _ = writeln!(
            w,
            "- moves: escalate to BLOCK {}; hold an ALLOW in REVIEW {}; de-escalate to ALLOW {}",
            mv(&pol.moves.escalate),
            mv(&pol.moves.hold),
            mv(&pol.moves.deescalate)
        );
        let _ = writeln!(
            w,
            "- sent to the model: {}; verdicts: {} injection, {} benign, {} without a verdict (held); verdicts that match the label: {}",
            p(&v.sent),
            v.verdicts_injection,
            v.verdicts_benign,
            v.errors,
            p(&v.verdict_accuracy)
        );
        let _ = writeln!(
            w,
            "- cost per invocation (cache hits excluded, first pass): n = {}, p50 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms, mean {:.0} ms\n",
            v.cost.n,
            v.cost.p50_us / 1000.0,
            v.cost.p95_us / 1000.0,
            v.cost.p99_us / 1000.0,
            v.cost.mean_us / 1000.0
        );
        let _ = writeln!(
            w,
            "Transitions, final state without the review (rows) → with it (columns):\n\n| label | without \\ with | ALLOW | REVIEW | BLOCK |\n|---|---|---|---|---|"
        );
        for (label, m) in [("malicious", &v.malicious), ("benign", &v.benign)] {
            for (i, row) in ["ALLOW", "REVIEW", "BLOCK"].iter().enumerate() {
                let _ = writeln!(
                    w,
                    "| {label} | {row} | {} | {} | {} |",
                    m[i][0], m[i][1], m[i][2]
                );
            }
        }
        let _ = writeln!(
            w,
            "\n| | flag recall | flag FPR | denial recall | denial FPR | BLOCK precision | REVIEW share |\n|---|---|---|---|---|---|---|"
        );
        for (name, s) in [("without review", &v.without), ("with review", &v.with)] {
            let _ = writeln!(
                w,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                p(&s.flag.recall),
                p(&s.flag.fpr),
                p(&s.denial.recall),
                p(&s.denial.fpr),
                p(&s.block_precision),
                p(&s.review_share)
            );
        }
    }
}

fn order_section(w: &mut String, r: &Report) {
    let _ = writeln!(w, "\n## Order independence\n");
    let _ = writeln!(
        w,
        "Pass 0 runs the corpus in its own order, pass 1 in a shuffled order (seed {}), any \
         further pass in corpus order again; every pass is compared with pass 0, decision by \
         decision, with position, time and latencies removed.\n",
        r.shuffle_seed
    );
    for o in &r.order {
        let _ = writeln!(
            w,
            "- {}: {} passes, {} decisions compared with the first pass: {}",
            cell(&o.config),
            o.runs.len(),
            o.compared,
            if o.differences.is_empty() {
                "**identical**".to_string()
            } else {
                format!("**{} differ**", o.differences.len())
            }
        );
        for d in o.differences.iter().take(200) {
            let _ = writeln!(w, "  - pass {} `{}`: {} → {}", d.run, d.id, d.first, d.then);
        }
    }
}

fn latency_section(w: &mut String, r: &Report) {
    let _ = writeln!(w, "\n## Latency\n");
    let _ = writeln!(
        w,
        "Per-record latency from the decision records (µs, nearest-rank percentiles) over all \
         passes, timed by the pipeline's own clock while records run in parallel, so on a busy \
         machine the tail includes time the thread was preempted (see the load average); \
         throughput is records per second of wall-clock time per pass, all threads.\n"
    );
    for l in &r.latency {
        let tp: Vec<String> = l.throughput.iter().map(|t| format!("{t:.0}")).collect();
        let load: Vec<String> = l
            .load_average
            .iter()
            .map(|x| x.map_or("?".into(), |x| format!("{x:.2}")))
            .collect();
        let _ = writeln!(
            w,
            "**{}**: {} passes on {} thread(s); throughput per pass: {} records/s; \
             load average at the start of each pass: {}.\n\n\
             | what | n | p50 | p95 | p99 | mean |\n|---|---|---|---|---|---|",
            cell(&l.config),
            l.runs,
            l.threads,
            tp.join(", "),
            load.join(", ")
        );
        for d in &l.rows {
            let _ = writeln!(
                w,
                "| {} | {} | {:.0} | {:.0} | {:.0} | {:.1} |",
                d.name, d.n, d.p50_us, d.p95_us, d.p99_us, d.mean_us
            );
        }
        let _ = writeln!(w);
    }
}

/// The ROC and precision-recall charts of one subset, as SVG text.
pub fn charts(sub: &SubsetReport) -> Result<(String, String), String> {
    let roc: Vec<(String, Vec<(f64, f64)>)> = sub
        .detectors
        .iter()
        .map(|d| (d.config.clone(), d.curves.roc.clone()))
        .collect();
    let pr: Vec<(String, Vec<(f64, f64)>)> = sub
        .detectors
        .iter()
        .map(|d| (d.config.clone(), d.curves.pr.clone()))
        .collect();
    Ok((
        plot(
            &format!("ROC, {}", sub.name),
            "false-positive rate",
            "true-positive rate",
            &roc,
        )?,
        plot(
            &format!("Precision-recall, {}", sub.name),
            "recall",
            "precision",
            &pr,
        )?,
    ))
}

fn plot(
    title: &str,
    x: &str,
    y: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let frame = Frame {
        title,
        size: (520, 420),
        x: 0.0..1.0,
        y: 0.0..1.02,
        x_desc: Some(x),
        y_desc: Some(y),
        label_areas: (36, 44),
        categorical_x: false,
    };
    portcullis_chart::svg(&frame, |chart| {
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = pts
                .iter()
                .copied()
                .filter(|(a, b)| a.is_finite() && b.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
        Ok(())
    })
}

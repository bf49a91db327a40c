//! A minimal detection report (the full one is `portcullis eval`'s issue):
//! final-state distribution by label, both conventions with Wilson intervals,
//! referral rate, BLOCK precision, errors counted apart.

use crate::corpus::{Label, Record};
use crate::metrics::{convention_metrics, Convention, Proportion, StateCounts};
use portcullis_core::DecisionRecord;
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize)]
pub struct SubsetReport {
    pub name: String,
    pub malicious: StateCounts,
    pub benign: StateCounts,
    pub errors: Vec<String>,
    pub flag: crate::metrics::ConventionMetrics,
    pub denial: crate::metrics::ConventionMetrics,
    pub referral_rate: Proportion,
}

pub fn subset(
    name: &str,
    records: &[&Record],
    decisions: &[Result<DecisionRecord, String>],
) -> SubsetReport {
    let mut malicious = StateCounts::default();
    let mut benign = StateCounts::default();
    let mut errors = Vec::new();
    for (r, d) in records.iter().zip(decisions) {
        match d {
            Ok(d) => match r.label {
                Label::Malicious => malicious.add(d.status),
                Label::Benign => benign.add(d.status),
            },
            Err(e) => errors.push(format!("{}: {e}", r.id)),
        }
    }
    let total = malicious.total() + benign.total();
    SubsetReport {
        name: name.into(),
        malicious,
        benign,
        errors,
        flag: convention_metrics(Convention::Flag, &malicious, &benign),
        denial: convention_metrics(Convention::Denial, &malicious, &benign),
        referral_rate: Proportion::new(malicious.review + benign.review, total),
    }
}

/// One Markdown section per subset.
pub fn markdown(config_name: &str, reports: &[SubsetReport]) -> String {
    let mut s = String::new();
    for r in reports {
        let _ = writeln!(s, "### {} — {config_name}\n", r.name);
        let _ = writeln!(
            s,
            "| label | n | ALLOW | REVIEW | BLOCK |\n|---|---|---|---|---|"
        );
        for (label, c) in [("malicious", &r.malicious), ("benign", &r.benign)] {
            let _ = writeln!(
                s,
                "| {label} | {} | {} | {} | {} |",
                c.total(),
                c.allow,
                c.review,
                c.block
            );
        }
        let _ = writeln!(
            s,
            "\n| convention | recall | FPR | precision |\n|---|---|---|---|"
        );
        for m in [&r.flag, &r.denial] {
            let name = match m.convention {
                Convention::Flag => "flag (REVIEW or BLOCK)",
                Convention::Denial => "denial-only (BLOCK)",
            };
            let _ = writeln!(s, "| {name} | {} | {} | {} |", m.recall, m.fpr, m.precision);
        }
        let _ = writeln!(
            s,
            "\nReferral rate: {}. BLOCK precision: {}. Errors: {}.\n",
            r.referral_rate,
            r.denial.precision,
            r.errors.len()
        );
        for e in &r.errors {
            let _ = writeln!(s, "- error: {e}");
        }
    }
    s
}

//! What the LLM review stage did, computed from the decision records alone: the
//! share of items sent, the transition matrix from the fused-score status (the
//! record's `review.before`) to the final status, both conventions and BLOCK
//! precision without and with the review, and the cost per invocation.

use crate::analysis::{percentile, Distribution};
use crate::corpus::Label;
use crate::input::EvalItem;
use crate::metrics::{
    convention_metrics, transitions, Convention, ConventionMetrics, Proportion, StateCounts,
};
use portcullis_core::{DecisionRecord, ReviewPolicy, Status};
use serde::Serialize;

/// The figures of one side (without or with the review).
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub flag: ConventionMetrics,
    pub denial: ConventionMetrics,
    pub block_precision: Proportion,
    /// REVIEW share of all scored items.
    pub review_share: Proportion,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReviewSummary {
    pub config: String,
    pub policy: ReviewPolicy,
    /// Items sent to the model (of the scored items).
    pub sent: Proportion,
    pub verdicts_injection: u64,
    pub verdicts_benign: u64,
    /// Reviews without a verdict (timeout, saturation, unparseable output).
    pub errors: u64,
    /// Verdicts of the sent items that match the corpus label.
    pub verdict_accuracy: Proportion,
    /// Before (rows) → after (columns), ALLOW/REVIEW/BLOCK, per label.
    pub malicious: [[u64; 3]; 3],
    pub benign: [[u64; 3]; 3],
    pub without: Side,
    pub with: Side,
    /// Per invocation (cache hits excluded), microseconds.
    pub cost: Distribution,
}

fn side(pairs: &[(&EvalItem, Status)]) -> Side {
    let (mut m, mut b) = (StateCounts::default(), StateCounts::default());
    for (it, s) in pairs {
        match it.label {
            Label::Malicious => m.add(*s),
            Label::Benign => b.add(*s),
        }
    }
    Side {
        flag: convention_metrics(Convention::Flag, &m, &b),
        denial: convention_metrics(Convention::Denial, &m, &b),
        block_precision: Proportion::new(m.block, m.block + b.block),
        review_share: Proportion::new(m.review + b.review, m.total() + b.total()),
    }
}

/// `None` when the configuration ran without the review stage.
pub fn summary(config: &str, scored: &[(&EvalItem, &DecisionRecord)]) -> Option<ReviewSummary> {
    let policy = scored
        .iter()
        .find_map(|(_, r)| r.review.as_ref())?
        .policy
        .clone();
    let reviews: Vec<_> = scored
        .iter()
        .filter_map(|(it, r)| r.review.as_ref().map(|v| (*it, *r, v)))
        .collect();
    let sent: Vec<_> = reviews.iter().filter(|(_, _, v)| v.referred).collect();
    let verdict = |want: &str| {
        sent.iter()
            .filter(|(_, _, v)| v.verdict.as_deref() == Some(want))
            .count() as u64
    };
    let right = sent
        .iter()
        .filter(|(it, _, v)| {
            v.verdict.as_deref()
                == Some(if it.label == Label::Malicious {
                    "injection"
                } else {
                    "benign"
                })
        })
        .count() as u64;
    let with_verdict = sent.iter().filter(|(_, _, v)| v.verdict.is_some()).count() as u64;
    let by_label = |l: Label| {
        transitions(
            reviews
                .iter()
                .filter(|(it, _, _)| it.label == l)
                .map(|(_, r, v)| (v.before, r.status)),
        )
    };
    let before: Vec<(&EvalItem, Status)> =
        reviews.iter().map(|(it, _, v)| (*it, v.before)).collect();
    let after: Vec<(&EvalItem, Status)> =
        reviews.iter().map(|(it, r, _)| (*it, r.status)).collect();
    let mut cost: Vec<u64> = sent
        .iter()
        .filter(|(_, _, v)| !v.cached)
        .map(|(_, _, v)| v.latency_us)
        .collect();
    cost.sort_unstable();
    let mean = if cost.is_empty() {
        f64::NAN
    } else {
        cost.iter().sum::<u64>() as f64 / cost.len() as f64
    };
    Some(ReviewSummary {
        config: config.to_string(),
        policy,
        sent: Proportion::new(sent.len() as u64, reviews.len() as u64),
        verdicts_injection: verdict("injection"),
        verdicts_benign: verdict("benign"),
        errors: sent.len() as u64 - with_verdict,
        verdict_accuracy: Proportion::new(right, with_verdict),
        malicious: by_label(Label::Malicious),
        benign: by_label(Label::Benign),
        without: side(&before),
        with: side(&after),
        cost: Distribution {
            name: "review".into(),
            n: cost.len(),
            p50_us: percentile(&cost, 0.50),
            p95_us: percentile(&cost, 0.95),
            p99_us: percentile(&cost, 0.99),
            mean_us: mean,
        },
    })
}

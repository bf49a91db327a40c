//! Proportions with Wilson intervals, and the two decision conventions of the
//! CASCADE audit: `flag` (REVIEW or BLOCK is positive) and `denial` (BLOCK only).

use portcullis_core::Status;
use serde::Serialize;

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A proportion k/n with its 95% Wilson score interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportion {
    pub k: u64,
    pub n: u64,
    pub p: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Proportion {
    pub fn new(k: u64, n: u64) -> Proportion {
        let (lo, hi) = wilson(k, n, Z95);
        Proportion {
            k,
            n,
            p: if n == 0 {
                f64::NAN
            } else {
                k as f64 / n as f64
            },
            lo,
            hi,
        }
    }
}

impl std::fmt::Display for Proportion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.n == 0 {
            return write!(f, "n/a (0/0)");
        }
        write!(
            f,
            "{:.2}% [{:.2}, {:.2}] ({}/{})",
            100.0 * self.p,
            100.0 * self.lo,
            100.0 * self.hi,
            self.k,
            self.n
        )
    }
}

/// Wilson score interval; (NaN, NaN) for n = 0.
pub fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z * ((p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()) / denom;
    // At p = 0 and p = 1 the bounds are exactly 0 and 1; avoid rounding below them.
    let lo = if k == 0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let hi = if k as f64 == n {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    (lo, hi)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Convention {
    /// REVIEW or BLOCK counts as a positive prediction.
    Flag,
    /// Only BLOCK counts as a positive prediction.
    Denial,
}

impl Convention {
    pub fn positive(self, s: Status) -> bool {
        match self {
            Convention::Flag => s != Status::Allow,
            Convention::Denial => s == Status::Block,
        }
    }
}

/// Final-state counts by label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StateCounts {
    pub allow: u64,
    pub review: u64,
    pub block: u64,
}

impl StateCounts {
    pub fn add(&mut self, s: Status) {
        match s {
            Status::Allow => self.allow += 1,
            Status::Review => self.review += 1,
            Status::Block => self.block += 1,
        }
    }
    pub fn total(&self) -> u64 {
        self.allow + self.review + self.block
    }
    fn positives(&self, c: Convention) -> u64 {
        match c {
            Convention::Flag => self.review + self.block,
            Convention::Denial => self.block,
        }
    }
}

/// Metrics of one convention, from the final-state counts of each class.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ConventionMetrics {
    pub convention: Convention,
    pub recall: Proportion,
    pub fpr: Proportion,
    pub precision: Proportion,
    pub accuracy: Proportion,
    pub f1: f64,
}

pub fn convention_metrics(
    c: Convention,
    malicious: &StateCounts,
    benign: &StateCounts,
) -> ConventionMetrics {
    let tp = malicious.positives(c);
    let fp = benign.positives(c);
    let tn = benign.total() - fp;
    let recall = Proportion::new(tp, malicious.total());
    let precision = Proportion::new(tp, tp + fp);
    let f1 = if precision.p + recall.p > 0.0 {
        2.0 * precision.p * recall.p / (precision.p + recall.p)
    } else {
        f64::NAN
    };
    ConventionMetrics {
        convention: c,
        recall,
        fpr: Proportion::new(fp, benign.total()),
        precision,
        accuracy: Proportion::new(tp + tn, malicious.total() + benign.total()),
        f1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_hand_computed_values() {
        // p = 0 and p = 1 keep a non-degenerate interval.
        let (lo, hi) = wilson(0, 10, Z95);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.277_532).abs() < 1e-5, "{hi}");
        let (lo, hi) = wilson(10, 10, Z95);
        assert!((lo - 0.722_468).abs() < 1e-5, "{lo}");
        assert_eq!(hi, 1.0);
        let (lo, hi) = wilson(50, 100, Z95);
        assert!(
            (lo - 0.403_832).abs() < 1e-5 && (hi - 0.596_168).abs() < 1e-5,
            "{lo} {hi}"
        );
        assert!(wilson(0, 0, Z95).0.is_nan());
    }

    #[test]
    fn conventions_differ_on_referrals() {
        let malicious = StateCounts {
            allow: 10,
            review: 60,
            block: 30,
        };
        let benign = StateCounts {
            allow: 80,
            review: 18,
            block: 2,
        };
        let flag = convention_metrics(Convention::Flag, &malicious, &benign);
        let deny = convention_metrics(Convention::Denial, &malicious, &benign);
        assert_eq!((flag.recall.k, flag.recall.n), (90, 100));
        assert_eq!((flag.fpr.k, flag.fpr.n), (20, 100));
        assert_eq!((deny.recall.k, deny.fpr.k), (30, 2));
        assert_eq!((deny.precision.k, deny.precision.n), (30, 32));
        assert_eq!(flag.accuracy.k, 90 + 80);
        assert_eq!(deny.accuracy.k, 30 + 98);
    }
}

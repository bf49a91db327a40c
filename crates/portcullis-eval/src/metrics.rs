//! Proportions with Wilson intervals, and the two decision conventions of the
//! CASCADE audit: `flag` (REVIEW or BLOCK is positive) and `denial` (BLOCK only).

use portcullis_core::Status;
use serde::Serialize;

pub use portcullis_core::stats::{wilson, Proportion, Z95};

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

/// McNemar's test with continuity correction on paired binary outcomes:
/// `b` = pairs positive under A only, `c` = positive under B only.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct McNemar {
    pub b: u64,
    pub c: u64,
    pub chi2: f64,
    pub p_value: f64,
}

pub fn mcnemar(b: u64, c: u64) -> McNemar {
    if b + c == 0 {
        return McNemar {
            b,
            c,
            chi2: 0.0,
            p_value: 1.0,
        };
    }
    let d = (b as f64 - c as f64).abs() - 1.0;
    let chi2 = d.max(0.0).powi(2) / (b + c) as f64;
    // Chi-square with one degree of freedom: P(X > chi2) = erfc(sqrt(chi2 / 2)).
    McNemar {
        b,
        c,
        chi2,
        p_value: erfc((chi2 / 2.0).sqrt()),
    }
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Percentile bootstrap of a pooled proportion that resamples whole lineage
/// groups (each `(k, n)` is one group's successes and trials), with a fixed seed.
/// Returns the 2.5th and 97.5th percentiles of the replicates.
pub fn bootstrap_groups(groups: &[(u64, u64)], replicates: usize, seed: u64) -> (f64, f64) {
    if groups.is_empty() || replicates == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = portcullis_core::SplitMix64::new(seed);
    let g = groups.len() as u64;
    let mut stats: Vec<f64> = (0..replicates)
        .map(|_| {
            let (mut k, mut n) = (0u64, 0u64);
            for _ in 0..groups.len() {
                let (gk, gn) = groups[(rng.next_u64() % g) as usize];
                k += gk;
                n += gn;
            }
            if n == 0 {
                f64::NAN
            } else {
                k as f64 / n as f64
            }
        })
        .filter(|x| x.is_finite())
        .collect();
    if stats.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| stats[((q * (stats.len() - 1) as f64).round() as usize).min(stats.len() - 1)];
    (at(0.025), at(0.975))
}

/// Final states of the same records under two configurations: `m[a][b]` counts
/// records with status index `a` under the first and `b` under the second
/// (0 ALLOW, 1 REVIEW, 2 BLOCK).
pub fn transitions(pairs: impl IntoIterator<Item = (Status, Status)>) -> [[u64; 3]; 3] {
    let idx = |s: Status| match s {
        Status::Allow => 0,
        Status::Review => 1,
        Status::Block => 2,
    };
    let mut m = [[0u64; 3]; 3];
    for (a, b) in pairs {
        m[idx(a)][idx(b)] += 1;
    }
    m
}

#[cfg(test)]
mod paired_tests {
    use super::*;

    #[test]
    fn mcnemar_matches_hand_computed_values() {
        // b = 10, c = 2: chi2 = (8 - 1)^2 / 12 = 4.0833; p = 0.04331.
        let m = mcnemar(10, 2);
        assert!((m.chi2 - 49.0 / 12.0).abs() < 1e-12);
        assert!((m.p_value - 0.043_308).abs() < 1e-4, "{}", m.p_value);
        assert_eq!(mcnemar(0, 0).p_value, 1.0);
        assert_eq!(mcnemar(3, 3).chi2, 0.0);
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_estimate() {
        let groups: Vec<(u64, u64)> = (0..200).map(|i| ((i % 4 == 0) as u64 * 3, 3)).collect();
        let a = bootstrap_groups(&groups, 2000, 42);
        let b = bootstrap_groups(&groups, 2000, 42);
        assert_eq!(a, b, "fixed seed, identical interval");
        assert!(a.0 < 0.25 && 0.25 < a.1, "{a:?}");
        assert_ne!(a, bootstrap_groups(&groups, 2000, 7));
        // Whole groups move together: the interval is wider than Wilson's on 600
        // independent trials with the same proportion.
        let (wlo, whi) = wilson(150, 600, Z95);
        assert!(a.1 - a.0 > whi - wlo);
    }

    #[test]
    fn transition_matrix_counts_pairs() {
        let m = transitions([
            (Status::Allow, Status::Review),
            (Status::Allow, Status::Review),
            (Status::Block, Status::Block),
        ]);
        assert_eq!(m[0][1], 2);
        assert_eq!(m[2][2], 1);
        assert_eq!(m.iter().flatten().sum::<u64>(), 3);
    }
}

#[cfg(test)]
mod bootstrap_tests {
    use super::*;

    #[test]
    fn bootstrap_of_identical_groups_collapses_to_the_estimate() {
        // Every group has proportion 1/2: every replicate is exactly 1/2.
        let groups = vec![(1, 2); 50];
        assert_eq!(bootstrap_groups(&groups, 2000, 42), (0.5, 0.5));
        assert!(bootstrap_groups(&[], 2000, 42).0.is_nan());
    }

    #[test]
    fn bootstrap_of_one_two_groups_by_hand() {
        // Two groups, (1, 1) and (0, 1): a replicate draws two groups, so its
        // proportion is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4. With 2,000
        // replicates the 2.5th percentile is 0 and the 97.5th is 1.
        let (lo, hi) = bootstrap_groups(&[(1, 1), (0, 1)], 2000, 42);
        assert_eq!((lo, hi), (0.0, 1.0));
        // With seed 42 the draw sequence is fixed: pin the first replicate by
        // drawing it by hand with the same generator.
        let mut rng = portcullis_core::SplitMix64::new(42);
        let a = rng.next_u64() % 2;
        let b = rng.next_u64() % 2;
        let first = (u64::from(a == 0) + u64::from(b == 0)) as f64 / 2.0;
        let (lo1, hi1) = bootstrap_groups(&[(1, 1), (0, 1)], 1, 42);
        assert_eq!((lo1, hi1), (first, first));
    }
}

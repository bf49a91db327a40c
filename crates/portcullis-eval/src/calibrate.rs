//! Offline calibration: thresholds chosen on the dev split for a target
//! false-positive rate (of BLOCK on benign records) and a target referral rate
//! (share of all records that end in REVIEW). The result is written as a config
//! file; nothing calibrates at run time.

use crate::corpus::Label;
use portcullis_core::Thresholds;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calibration {
    pub thresholds: Thresholds,
    /// Achieved on the calibration records.
    pub block_fpr: f64,
    pub referral_rate: f64,
    pub records: usize,
}

/// Candidate thresholds: midpoints between consecutive distinct scores, plus 1.0.
fn candidates(scores: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = scores.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    s.dedup();
    let mut c: Vec<f64> = s.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
    c.push(1.0);
    c.retain(|t| *t > 0.0);
    c
}

/// `block` = the lowest candidate whose BLOCK false-positive rate on benign records is
/// at most `target_fpr`; `review` = the lowest candidate at or below `block` whose
/// referral rate (records with review <= score < block, over all records) is at most
/// `target_referral`.
pub fn choose(scored: &[(f64, Label)], target_fpr: f64, target_referral: f64) -> Calibration {
    let benign: Vec<f64> = scored
        .iter()
        .filter(|s| s.1 == Label::Benign)
        .map(|s| s.0)
        .collect();
    let all: Vec<f64> = scored.iter().map(|s| s.0).collect();
    let cands = candidates(&all);
    let fpr = |t: f64| {
        if benign.is_empty() {
            0.0
        } else {
            benign.iter().filter(|s| **s >= t).count() as f64 / benign.len() as f64
        }
    };
    let block = cands
        .iter()
        .copied()
        .find(|t| fpr(*t) <= target_fpr)
        .unwrap_or(1.0);
    let referral = |r: f64| {
        if all.is_empty() {
            0.0
        } else {
            all.iter().filter(|s| **s >= r && **s < block).count() as f64 / all.len() as f64
        }
    };
    let review = cands
        .iter()
        .copied()
        .filter(|r| *r <= block)
        .find(|r| referral(*r) <= target_referral)
        .unwrap_or(block);
    Calibration {
        thresholds: Thresholds { review, block },
        block_fpr: fpr(block),
        referral_rate: referral(review),
        records: scored.len(),
    }
}

/// The LLM review stage's band: `[review, high)` with `high` the highest
/// candidate up to `block` whose share of records with `review <= score < high` is
/// at most `target_share` — the least confident REVIEWs, the items a second opinion
/// is for. Returns the band and the share it achieves.
pub fn review_band(scored: &[(f64, Label)], t: Thresholds, target_share: f64) -> ([f64; 2], f64) {
    let all: Vec<f64> = scored.iter().map(|s| s.0).collect();
    let share = |hi: f64| {
        if all.is_empty() {
            0.0
        } else {
            all.iter().filter(|s| **s >= t.review && **s < hi).count() as f64 / all.len() as f64
        }
    };
    let mut cands = candidates(&all);
    cands.push(t.block);
    let high = cands
        .into_iter()
        .filter(|h| *h > t.review && *h <= t.block && share(*h) <= target_share)
        .fold(f64::NAN, f64::max);
    // Nothing fits (or no REVIEW band at all): the narrowest band, which refers nothing
    // but a score exactly at the review threshold.
    let high = if high.is_finite() {
        high
    } else {
        (t.review + f64::EPSILON).min(1.0)
    };
    ([t.review, high], share(high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_review_band_holds_at_most_its_share() {
        let scored: Vec<(f64, Label)> = (0..100)
            .map(|i| (i as f64 / 100.0, Label::Benign))
            .collect();
        let t = Thresholds {
            review: 0.5,
            block: 0.9,
        };
        let (band, share) = review_band(&scored, t, 0.05);
        assert_eq!(band[0], 0.5);
        assert!((0.04..=0.05).contains(&share), "{band:?} {share}");
        assert!(band[1] > 0.53 && band[1] <= 0.55, "{band:?}");
        let (band, share) = review_band(&scored, t, 1.0);
        assert_eq!((band[1], share), (0.9, 0.4));
    }

    #[test]
    fn thresholds_meet_their_targets_on_the_calibration_set() {
        let mut scored = Vec::new();
        for i in 0..100 {
            scored.push((i as f64 / 200.0, Label::Benign)); // 0 .. 0.495
            scored.push((0.3 + i as f64 / 150.0, Label::Malicious)); // 0.3 .. 0.96
        }
        let c = choose(&scored, 0.02, 0.10);
        assert!(c.block_fpr <= 0.02);
        assert!(c.referral_rate <= 0.10);
        assert!(c.thresholds.review <= c.thresholds.block);
        // The lowest block threshold meeting 2% FPR sits just under the 99th benign score.
        assert!(
            c.thresholds.block > 0.48 && c.thresholds.block < 0.495,
            "{c:?}"
        );
    }

    #[test]
    fn degenerate_inputs_give_valid_thresholds() {
        let c = choose(&[], 0.01, 0.1);
        assert_eq!(c.thresholds.block, 1.0);
        let c = choose(&[(0.0, Label::Benign)], 0.0, 0.0);
        assert!(c.thresholds.review > 0.0 && c.thresholds.review <= c.thresholds.block);
    }
}

//! Offline calibration: thresholds chosen on the dev split for a target
//! false-positive rate (of BLOCK on benign records) and a target referral rate
//! (share of all records that end in REVIEW). The result is written as a config
//! file; nothing calibrates at run time.

use crate::corpus::Label;
use portcullis_core::{Status, Thresholds};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calibration {
    pub thresholds: Thresholds,
    /// Achieved on the calibration records.
    pub block_fpr: f64,
    /// Share of benign records that end in REVIEW or BLOCK.
    pub flag_fpr: f64,
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

/// One calibration record: its fused score, the floor its deterministic findings
/// set (no threshold moves it: `Detector::floor_status`), and its label.
pub type Scored = (f64, Status, Label);

/// What a calibration aims for on its records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Targets {
    /// Highest share of benign records that end in BLOCK.
    pub block_fpr: f64,
    /// Highest share of all records that end in REVIEW.
    pub referral: f64,
    /// Highest share of benign records that end in REVIEW or BLOCK, if any.
    pub flag_fpr: Option<f64>,
    /// Both thresholds lie strictly above this score: the weight of the most severe
    /// findings whose floor is `none`, so such a finding alone never holds — rule
    /// findings decide through their floors, and a threshold fitted low on a channel
    /// whose learned scores are low must not turn them into holds.
    pub above: f64,
}

/// `block` = the lowest candidate whose BLOCK false-positive rate on benign records
/// (floored at BLOCK, or scoring at least `block`) is at most `targets.block_fpr`;
/// `review` = the lowest candidate at or below `block` whose referral rate (records
/// that end in REVIEW: floored at REVIEW or scoring at least `review`, and neither
/// floored at BLOCK nor scoring at least `block`; over all records) is at most
/// `targets.referral` and whose flag FPR (benign records that end in REVIEW or
/// BLOCK) is at most `targets.flag_fpr`. Floors count against every target, as they
/// do in use; when no candidate meets one, the threshold is `block` (or 1).
pub fn choose(scored: &[Scored], targets: Targets) -> Calibration {
    let (target_fpr, target_referral) = (targets.block_fpr, targets.referral);
    let benign: Vec<(f64, Status)> = scored
        .iter()
        .filter(|s| s.2 == Label::Benign)
        .map(|s| (s.0, s.1))
        .collect();
    let scores: Vec<f64> = scored.iter().map(|s| s.0).collect();
    let cands: Vec<f64> = candidates(&scores)
        .into_iter()
        .filter(|t| *t > targets.above)
        .collect();
    let blocked = |(score, floor): (f64, Status), t: f64| floor == Status::Block || score >= t;
    let fpr = |t: f64| {
        if benign.is_empty() {
            0.0
        } else {
            benign.iter().filter(|s| blocked(**s, t)).count() as f64 / benign.len() as f64
        }
    };
    let block = cands
        .iter()
        .copied()
        .find(|t| fpr(*t) <= target_fpr)
        .unwrap_or(1.0);
    let referral = |r: f64| {
        if scored.is_empty() {
            0.0
        } else {
            scored
                .iter()
                .filter(|s| !blocked((s.0, s.1), block) && (s.1 == Status::Review || s.0 >= r))
                .count() as f64
                / scored.len() as f64
        }
    };
    let flag_fpr = |r: f64| {
        if benign.is_empty() {
            0.0
        } else {
            benign
                .iter()
                .filter(|(score, floor)| *floor > Status::Allow || *score >= r.min(block))
                .count() as f64
                / benign.len() as f64
        }
    };
    let review = cands
        .iter()
        .copied()
        .filter(|r| *r <= block)
        .find(|r| {
            referral(*r) <= target_referral && targets.flag_fpr.is_none_or(|t| flag_fpr(*r) <= t)
        })
        .unwrap_or(block);
    let flag_fpr = flag_fpr(review);
    Calibration {
        thresholds: Thresholds { review, block },
        block_fpr: fpr(block),
        flag_fpr,
        referral_rate: referral(review),
        records: scored.len(),
    }
}

/// The LLM review stage's band: `[review, high)` with `high` the highest
/// candidate up to `block` whose share of records with `review <= score < high` is
/// at most `target_share` — the least confident REVIEWs, the items a second opinion
/// is for. Returns the band and the share it achieves.
pub fn review_band(scored: &[Scored], t: Thresholds, target_share: f64) -> ([f64; 2], f64) {
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
    let (low, high) = if high.is_finite() {
        (t.review, high)
    } else if t.review < 1.0 {
        (t.review, (t.review + f64::EPSILON).min(1.0))
    } else {
        // No score refers (review = 1): a band just under 1 that only a score of
        // exactly 1 reaches, which a floor or the block threshold decides anyway.
        (1.0 - f64::EPSILON, 1.0)
    };
    ([low, high], share(high))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(block_fpr: f64, referral: f64) -> Targets {
        Targets {
            block_fpr,
            referral,
            flag_fpr: None,
            above: 0.0,
        }
    }

    #[test]
    fn a_flag_fpr_target_raises_the_review_threshold() {
        let mut scored = Vec::new();
        for i in 0..100 {
            scored.push((i as f64 / 100.0, Status::Allow, Label::Benign)); // 0 .. 0.99
            scored.push((0.5 + i as f64 / 250.0, Status::Allow, Label::Malicious));
        }
        let loose = choose(&scored, targets(0.01, 1.0));
        let tight = choose(
            &scored,
            Targets {
                flag_fpr: Some(0.05),
                ..targets(0.01, 1.0)
            },
        );
        assert!(tight.flag_fpr <= 0.05, "{tight:?}");
        assert!(loose.flag_fpr > 0.05, "{loose:?}");
        assert!(tight.thresholds.review > loose.thresholds.review);
    }

    #[test]
    fn the_review_band_holds_at_most_its_share() {
        let scored: Vec<Scored> = (0..100)
            .map(|i| (i as f64 / 100.0, Status::Allow, Label::Benign))
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
            scored.push((i as f64 / 200.0, Status::Allow, Label::Benign)); // 0 .. 0.495
            scored.push((0.3 + i as f64 / 150.0, Status::Allow, Label::Malicious));
            // 0.3 .. 0.96
        }
        let c = choose(&scored, targets(0.02, 0.10));
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
    fn floored_records_count_against_the_targets() {
        // 100 benign records, 2 of them floored at BLOCK by a rule: a 1% BLOCK FPR
        // cannot be met by any threshold, so block goes to 1 (nothing blocks by score).
        let mut scored: Vec<Scored> = (0..100)
            .map(|i| (i as f64 / 200.0, Status::Allow, Label::Benign))
            .collect();
        scored[0].1 = Status::Block;
        scored[1].1 = Status::Block;
        let c = choose(&scored, targets(0.01, 0.5));
        assert_eq!(c.thresholds.block, 1.0);
        assert!((c.block_fpr - 0.02).abs() < 1e-12, "{c:?}");
        // A record floored at REVIEW is referred whatever the review threshold.
        let mut scored: Vec<Scored> = (0..100)
            .map(|i| (i as f64 / 100.0, Status::Allow, Label::Benign))
            .collect();
        scored[0].1 = Status::Review;
        let c = choose(&scored, targets(1.0, 0.0));
        assert!(c.referral_rate >= 0.01, "{c:?}");
    }

    #[test]
    fn degenerate_inputs_give_valid_thresholds() {
        let c = choose(&[], targets(0.01, 0.1));
        assert_eq!(c.thresholds.block, 1.0);
        let c = choose(&[(0.0, Status::Allow, Label::Benign)], targets(0.0, 0.0));
        assert!(c.thresholds.review > 0.0 && c.thresholds.review <= c.thresholds.block);
    }
}

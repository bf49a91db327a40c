//! Policy: fuse stage outputs into one score and compare it with the constant
//! thresholds of the loaded configuration. Pure functions of their arguments: no
//! warm-up, no calibration at run time, no state carried between inputs.
//!
//! - stage score = `1 - prod_r (1 - w(severity_r))` over the distinct rule ids `r`
//!   of the stage's counted (not allowlisted) findings, each at its highest severity;
//! - fused score = `1 - prod_s (1 - weight_s * score_s)` over the stages;
//! - status = BLOCK if fused >= block, else REVIEW if fused >= review, else ALLOW,
//!   with the channel's thresholds;
//! - final status = the higher of that and the floor of the deterministic findings
//!   ([`floor`]): learned scores raise a decision, never lower what a rule decided.

use portcullis_core::{
    Channel, Finding, Floor, Floors, Severity, SeverityWeights, Status, Thresholds,
};
use std::collections::BTreeMap;

/// Highest severity per distinct counted rule id, in rule-id order.
pub fn counted_rules(findings: &[Finding]) -> BTreeMap<&str, Severity> {
    let mut by_rule: BTreeMap<&str, Severity> = BTreeMap::new();
    for f in findings.iter().filter(|f| !f.allowlisted) {
        let e = by_rule.entry(f.rule.as_str()).or_insert(f.severity);
        *e = (*e).max(f.severity);
    }
    by_rule
}

/// Noisy-OR of the severity weights of the distinct counted rules.
pub fn stage_score(findings: &[Finding], weights: &SeverityWeights) -> f64 {
    let keep: f64 = counted_rules(findings)
        .values()
        .map(|s| 1.0 - weights.weight(*s))
        .product();
    clamp01(1.0 - keep)
}

/// Noisy-OR of weighted stage scores.
pub fn fuse(weighted_scores: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let keep: f64 = weighted_scores
        .into_iter()
        .map(|(weight, score)| 1.0 - clamp01(weight) * clamp01(score))
        .product();
    clamp01(1.0 - keep)
}

pub fn decide(score: f64, t: &Thresholds) -> Status {
    if score >= t.block {
        Status::Block
    } else if score >= t.review {
        Status::Review
    } else {
        Status::Allow
    }
}

/// The finding that sets the highest floor among `findings` (counted ones only),
/// with its floor; `None` when no finding sets one.
pub fn floor<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
    floors: &Floors,
    channel: Channel,
) -> Option<(Floor, &'a Finding)> {
    findings
        .into_iter()
        .filter(|f| !f.allowlisted)
        .map(|f| (floors.of(&f.rule, &f.category, f.severity, channel), f))
        .filter(|(fl, _)| *fl > Floor::None)
        // The first finding among those of the highest floor, for a stable reason.
        .fold(
            None,
            |best: Option<(Floor, &Finding)>, (fl, f)| match best {
                Some((b, _)) if b >= fl => best,
                _ => Some((fl, f)),
            },
        )
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() {
        // A NaN can only come from a broken weight; treat it as maximal risk.
        1.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portcullis_core::{Config, Span};
    use portcullis_core::{SeverityWeights, Thresholds};

    fn f(rule: &str, sev: Severity) -> Finding {
        Finding {
            rule: rule.into(),
            category: "c".into(),
            severity: sev,
            view: "lower".into(),
            span: Span { start: 0, end: 1 },
            excerpt: String::new(),
            path: None,
            allowlisted: false,
        }
    }

    #[test]
    fn operating_points_of_a_rules_policy() {
        // Weights and thresholds as in docs/policy.md's worked example.
        let w = SeverityWeights {
            low: 0.2,
            medium: 0.4,
            high: 0.6,
            critical: 1.0,
        };
        let t = Thresholds {
            review: 0.3,
            block: 0.8,
        };
        let status = |fs: &[Finding]| decide(fuse([(1.0, stage_score(fs, &w))]), &t);
        assert_eq!(status(&[]), Status::Allow);
        assert_eq!(status(&[f("a", Severity::Low)]), Status::Allow);
        assert_eq!(status(&[f("a", Severity::Medium)]), Status::Review);
        assert_eq!(status(&[f("a", Severity::High)]), Status::Review);
        assert_eq!(
            status(&[f("a", Severity::High), f("b", Severity::High)]),
            Status::Block
        );
        assert_eq!(status(&[f("a", Severity::Critical)]), Status::Block);
    }

    #[test]
    fn a_critical_finding_blocks_under_every_shipped_preset() {
        for p in [
            portcullis_core::Preset::Strict,
            portcullis_core::Preset::Balanced,
            portcullis_core::Preset::Permissive,
        ] {
            let c = Config::preset(p);
            let score = fuse([(
                1.0,
                stage_score(&[f("a", Severity::Critical)], &c.severity_weights),
            )]);
            assert_eq!(decide(score, &c.thresholds), Status::Block, "{p:?}");
        }
    }

    #[test]
    fn a_floor_is_set_by_the_strongest_counted_finding() {
        let floors = Floors::default();
        let c = Channel::ToolResult;
        assert!(floor(&[f("a", Severity::Medium)], &floors, c).is_none());
        let fs = [f("a", Severity::Medium), f("b", Severity::High)];
        let (fl, by) = floor(&fs, &floors, c).unwrap();
        assert_eq!((fl, by.rule.as_str()), (Floor::Review, "b"));
        let mut crit = f("c", Severity::Critical);
        let fs = [f("b", Severity::High), crit.clone()];
        assert_eq!(floor(&fs, &floors, c).unwrap().0, Floor::Block);
        crit.allowlisted = true;
        assert!(floor(&[crit], &floors, c).is_none());
    }

    #[test]
    fn repeats_of_one_rule_count_once_at_their_highest_severity() {
        let w = Config::default().severity_weights;
        let one = stage_score(&[f("a", Severity::High)], &w);
        let many = stage_score(
            &[
                f("a", Severity::Low),
                f("a", Severity::High),
                f("a", Severity::High),
            ],
            &w,
        );
        assert_eq!(one, many);
    }

    #[test]
    fn allowlisted_findings_do_not_count() {
        let w = Config::default().severity_weights;
        let mut x = f("a", Severity::Critical);
        x.allowlisted = true;
        assert_eq!(stage_score(&[x], &w), 0.0);
    }

    #[test]
    fn fusion_is_monotone_and_bounded() {
        assert_eq!(fuse([]), 0.0);
        assert!(fuse([(1.0, 0.5), (1.0, 0.5)]) > fuse([(1.0, 0.5)]));
        assert_eq!(fuse([(1.0, 1.0), (0.3, 0.2)]), 1.0);
        assert!((fuse([(0.5, 0.4)]) - 0.2).abs() < 1e-12);
        assert_eq!(fuse([(1.0, f64::NAN)]), 1.0);
    }
}

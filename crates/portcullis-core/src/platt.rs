//! Platt scaling: the probability `sigmoid(a*z + b)` of a learned stage's margin
//! `z`, fitted on held-out `(margin, label)` pairs. One fit, one scaling and one
//! sigmoid for every learned stage (the lexical model, the embedding head).

use serde::{Deserialize, Serialize};

/// Platt scaling `p = sigmoid(a*z + b)` of a margin `z`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platt {
    pub a: f64,
    pub b: f64,
}

impl Platt {
    /// The probability of margin `z`.
    pub fn probability(&self, z: f64) -> f64 {
        sigmoid(self.a * z + self.b)
    }
}

/// Fit Platt scaling `p = sigmoid(a*z + b)` on held-out margins (Newton's method on
/// the log-loss, with Platt's smoothed targets); `None` when a class is missing.
pub fn fit_platt(margins: &[(f64, bool)]) -> Option<(f64, f64)> {
    let pos = margins.iter().filter(|m| m.1).count() as f64;
    let neg = margins.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return None;
    }
    let (tp, tn) = ((pos + 1.0) / (pos + 2.0), 1.0 / (neg + 2.0));
    // The smoothed log-loss, computed without overflow (Lin, Lin and Weng 2007).
    let loss = |a: f64, b: f64| -> f64 {
        margins
            .iter()
            .map(|&(z, y)| {
                let t = if y { tp } else { tn };
                let f = a * z + b;
                // -[t ln σ(f) + (1 - t) ln(1 - σ(f))]
                if f >= 0.0 {
                    (1.0 - t) * f + (-f).exp().ln_1p()
                } else {
                    -t * f + f.exp().ln_1p()
                }
            })
            .sum()
    };
    // Start from the prior odds with a = 0: every point has curvature there, whereas
    // at a = 1 margins far from zero saturate the sigmoid and the Hessian vanishes.
    let (mut a, mut b) = (0.0f64, ((pos + 1.0) / (neg + 1.0)).ln());
    let mut current = loss(a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-9, 0.0, 1e-9);
        for &(z, y) in margins {
            let t = if y { tp } else { tn };
            let p = sigmoid(a * z + b);
            let d = p - t;
            let s = p * (1.0 - p);
            ga += d * z;
            gb += d;
            haa += s * z * z;
            hab += s * z;
            hbb += s;
        }
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-12 {
            break;
        }
        let da = (hbb * ga - hab * gb) / det;
        let db = (haa * gb - hab * ga) / det;
        // Backtracking: a full Newton step from far away can overshoot into the
        // flat tails of the sigmoid and diverge; halve it until the loss drops.
        let mut step = 1.0;
        while step >= 1e-10 {
            let next = loss(a - step * da, b - step * db);
            if next < current + 1e-4 * step * (ga * -da + gb * -db) {
                break;
            }
            step /= 2.0;
        }
        if step < 1e-10 {
            break;
        }
        a -= step * da;
        b -= step * db;
        current = loss(a, b);
        if (step * da).abs() < 1e-10 && (step * db).abs() < 1e-10 {
            break;
        }
    }
    Some((a, b))
}

/// The logistic function. In f64 it needs no guard: for a margin far below zero
/// `exp(-z)` is infinite and the result 0, far above it is 1, never NaN. The
/// committed lexical model was trained with exactly this form (its
/// reproducibility test compares the weights bit for bit), so it must not change.
pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sigmoid_saturates_without_nan_and_platt_applies_it() {
        assert_eq!(sigmoid(-1e308), 0.0);
        assert_eq!(sigmoid(-800.0), 0.0);
        assert_eq!(sigmoid(800.0), 1.0);
        assert_eq!(sigmoid(0.0), 0.5);
        let p = Platt { a: 2.0, b: -1.0 };
        assert_eq!(p.probability(0.5), 0.5);
        assert!(p.probability(3.0) > 0.99);
    }
}

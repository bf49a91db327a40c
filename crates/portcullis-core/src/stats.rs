//! Proportions with their 95% Wilson score intervals: the one way every figure
//! of the project (`eval`, `bench`) states a rate.

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

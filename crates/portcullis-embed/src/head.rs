//! The classifier head on sentence embeddings: logistic regression trained by
//! deterministic full-batch gradient descent (class-balanced, L2-regularized), its
//! margin then Platt-calibrated on a separate split. Serialized as a small JSON file.

use crate::error::EmbedError;
use crate::model::DIM;
use serde::{Deserialize, Serialize};

pub const HEAD_FORMAT: &str = "portcullis-embedding-head/1";

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadParams {
    /// Full-batch gradient steps.
    pub steps: usize,
    pub learning_rate: f64,
    /// Nesterov momentum.
    pub momentum: f64,
    /// L2 penalty on the weights (not the bias).
    pub l2: f64,
}

impl Default for HeadParams {
    fn default() -> Self {
        HeadParams {
            steps: 1500,
            learning_rate: 4.0,
            momentum: 0.9,
            l2: 1e-4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadProvenance {
    pub corpus_sha256: String,
    /// SHA-256 of the `model.safetensors` the embeddings were computed with.
    pub model_sha256: String,
    pub train_split: String,
    pub train_records: usize,
    pub train_chunks: usize,
    pub calibration_split: String,
    pub calibration_records: usize,
}

use portcullis_core::platt::sigmoid;
pub use portcullis_core::platt::Platt;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    pub format: String,
    pub model: String,
    /// Content tokens per chunk the head was trained and is applied with.
    pub window: usize,
    pub params: HeadParams,
    pub provenance: HeadProvenance,
    pub platt: Platt,
    pub bias: f64,
    pub weights: Vec<f64>,
}

impl Head {
    /// Fit the logistic regression on `(embedding, is_malicious)` pairs. Fully
    /// deterministic: no sampling, a fixed order, a fixed number of steps.
    pub fn train(
        examples: &[(Vec<f32>, bool)],
        params: &HeadParams,
        window: usize,
        provenance: HeadProvenance,
    ) -> Head {
        let n = examples.len().max(1) as f64;
        let pos = examples.iter().filter(|(_, y)| *y).count().max(1) as f64;
        let neg = examples.iter().filter(|(_, y)| !*y).count().max(1) as f64;
        // Class-balanced: each class carries half of the loss.
        let (wp, wn) = (n / (2.0 * pos), n / (2.0 * neg));
        let mut w = vec![0.0f64; DIM + 1]; // last = bias
        let mut v = vec![0.0f64; DIM + 1];
        let mut grad = vec![0.0f64; DIM + 1];
        for _ in 0..params.steps {
            // Nesterov: gradient at the look-ahead point.
            let look: Vec<f64> = w
                .iter()
                .zip(&v)
                .map(|(w, v)| w + params.momentum * v)
                .collect();
            grad.fill(0.0);
            for (x, y) in examples {
                let z = look[DIM] + x.iter().zip(&look).map(|(x, w)| *x as f64 * w).sum::<f64>();
                let (t, cw) = if *y { (1.0, wp) } else { (0.0, wn) };
                let g = cw * (sigmoid(z) - t) / n;
                for (gi, xi) in grad.iter_mut().zip(x) {
                    *gi += g * *xi as f64;
                }
                grad[DIM] += g;
            }
            for (gi, wi) in grad.iter_mut().zip(&look).take(DIM) {
                *gi += params.l2 * wi;
            }
            for ((wi, vi), gi) in w.iter_mut().zip(v.iter_mut()).zip(&grad) {
                *vi = params.momentum * *vi - params.learning_rate * gi;
                *wi += *vi;
            }
        }
        let bias = w[DIM];
        w.truncate(DIM);
        Head {
            format: HEAD_FORMAT.into(),
            model: "all-MiniLM-L6-v2".into(),
            window,
            params: *params,
            provenance,
            platt: Platt { a: 1.0, b: 0.0 },
            bias,
            weights: w,
        }
    }

    pub fn margin(&self, x: &[f32]) -> f64 {
        self.bias
            + x.iter()
                .zip(&self.weights)
                .map(|(x, w)| *x as f64 * w)
                .sum::<f64>()
    }

    /// Calibrated probability that the embedded text is malicious.
    pub fn probability(&self, x: &[f32]) -> f64 {
        self.platt.probability(self.margin(x))
    }

    /// Platt scaling (`portcullis_core::platt::fit_platt`) on `(margin, label)` pairs
    /// of a split the head was not trained on.
    pub fn calibrate(&mut self, margins: &[(f64, bool)]) {
        if let Some((a, b)) = portcullis_core::platt::fit_platt(margins) {
            self.platt = Platt { a, b };
        }
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn from_json(text: &str, origin: &str) -> Result<Head, EmbedError> {
        let err = |message: String| EmbedError::Head {
            path: origin.to_string(),
            message,
        };
        let head: Head = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        if head.format != HEAD_FORMAT {
            return Err(err(format!(
                "format {:?}, expected {HEAD_FORMAT:?}",
                head.format
            )));
        }
        if head.weights.len() != DIM {
            return Err(err(format!(
                "{} weights, expected {DIM}",
                head.weights.len()
            )));
        }
        if head.window < 1 {
            return Err(err("window must be at least 1".into()));
        }
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prov() -> HeadProvenance {
        HeadProvenance {
            corpus_sha256: "c".into(),
            model_sha256: "m".into(),
            train_split: "train".into(),
            train_records: 0,
            train_chunks: 0,
            calibration_split: "dev".into(),
            calibration_records: 0,
        }
    }

    /// Separable toy data: the label is the sign of coordinate 0.
    fn data() -> Vec<(Vec<f32>, bool)> {
        (0..40)
            .map(|i| {
                let mut x = vec![0.0f32; DIM];
                let y = i % 3 == 0;
                x[0] = if y { 0.8 } else { -0.6 };
                x[1 + i % 7] = 0.3;
                (x, y)
            })
            .collect()
    }

    #[test]
    fn training_is_deterministic_and_learns_the_separation() {
        let p = HeadParams {
            steps: 200,
            ..HeadParams::default()
        };
        let a = Head::train(&data(), &p, 254, prov());
        let b = Head::train(&data(), &p, 254, prov());
        assert_eq!(a.to_json(), b.to_json());
        for (x, y) in data() {
            assert_eq!(a.probability(&x) > 0.5, y);
        }
    }

    #[test]
    fn calibration_keeps_order_and_json_round_trips() {
        let p = HeadParams {
            steps: 100,
            ..HeadParams::default()
        };
        let mut h = Head::train(&data(), &p, 254, prov());
        let margins: Vec<(f64, bool)> = data().iter().map(|(x, y)| (h.margin(x), *y)).collect();
        h.calibrate(&margins);
        assert!(h.platt.a > 0.0);
        let back = Head::from_json(&h.to_json(), "t").expect("round trip");
        assert_eq!(back, h);
        let mut bad = h.clone();
        bad.weights.pop();
        assert!(Head::from_json(&bad.to_json(), "t").is_err());
    }
}

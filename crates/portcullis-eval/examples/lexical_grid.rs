//! Hyper-parameter search for the lexical model on the DEV split only (ROC AUC of
//! the raw margin): `cargo run --release -p portcullis-eval --example lexical_grid`.
//! The test and rules-blind splits are never read here.

use portcullis_detect::lexical::{LexicalModel, Provenance, TrainParams};
use portcullis_eval::corpus::{self, Split};
use portcullis_eval::train::examples;

fn auc(scored: &mut [(f64, bool)]) -> f64 {
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum, mut pos) = (0.0, 0.0);
    for (i, (_, y)) in scored.iter().enumerate() {
        if *y {
            rank_sum += (i + 1) as f64;
            pos += 1.0;
        }
    }
    let neg = scored.len() as f64 - pos;
    (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (records, errors) = corpus::load_jsonl(std::path::Path::new("corpus/corpus.jsonl"))?;
    assert!(errors.is_empty());
    let (train, dev) = (
        examples(&records, Split::Train),
        examples(&records, Split::Dev),
    );
    let prov = Provenance {
        corpus_sha256: String::new(),
        train_split: "train".into(),
        train_records: train.len(),
        calibration_split: "dev".into(),
        calibration_records: 0,
    };
    for dim_bits in [16u32, 18] {
        for epochs in [12usize, 30] {
            for lr in [0.5f64, 0.1] {
                for l2 in [1e-5f64, 1e-6] {
                    let p = TrainParams {
                        dim_bits,
                        epochs,
                        learning_rate: lr,
                        l2,
                        seed: 20261129,
                    };
                    let m = LexicalModel::train(&train, &p, prov.clone());
                    let mut scored: Vec<(f64, bool)> = dev
                        .iter()
                        .map(|(v, y)| {
                            let v: Vec<&str> = v.iter().map(String::as_str).collect();
                            (m.margin(&v), *y)
                        })
                        .collect();
                    println!(
                        "dim_bits {dim_bits} epochs {epochs} lr {lr} l2 {l2}: dev AUC {:.4}",
                        auc(&mut scored)
                    );
                }
            }
        }
    }
    Ok(())
}

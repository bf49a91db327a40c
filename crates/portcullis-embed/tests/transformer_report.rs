//! The fine-tuned transformer experiment's committed artifacts
//! (`reports/transformer/`, written by `scripts/transformer/run.sh` and `int8.sh`)
//! are what those scripts wrote: each head is a stage head of the model
//! `finetune.json` names, fitted on the corpus it names and Platt-calibrated on dev
//! records, and each configuration is a valid one that runs that head with the
//! stage's own chunking.

use portcullis_core::Config;
use portcullis_embed::head::Head;
use std::path::PathBuf;

fn report(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../reports/transformer")
        .join(file)
}

fn read(file: &str) -> String {
    let path = report(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn committed_heads_are_the_fine_tuned_model_s() {
    let manifest: serde_json::Value =
        serde_json::from_str(&read("finetune.json")).expect("finetune.json");
    let model = manifest["model_sha256"].as_str().expect("model_sha256");
    let corpus = manifest["corpus_sha256"].as_str().expect("corpus_sha256");
    let windows = manifest["windows"].as_u64().expect("windows");
    let max_tokens = manifest["params"]["max_tokens"]
        .as_u64()
        .expect("max_tokens");
    assert_eq!(manifest["split"], "train");
    for file in [
        "head-dev.json",
        "head-dev-int8.json",
        "head-dev-int8-all.json",
    ] {
        let head = Head::from_json(&read(file), file).expect("a stage head");
        assert_eq!(head.provenance.model_sha256, model, "{file}");
        assert_eq!(head.provenance.corpus_sha256, corpus, "{file}");
        assert_eq!(head.provenance.train_records as u64, windows, "{file}");
        assert_eq!(head.window as u64, max_tokens - 2, "{file}");
        assert_eq!(head.provenance.calibration_split, "dev", "{file}");
        assert!(
            head.provenance.calibration_records > 0,
            "{file}: not calibrated"
        );
    }
}

#[test]
fn committed_configurations_validate_and_run_the_head_as_trained() {
    for (file, gated) in [
        ("configs/ft.toml", false),
        ("configs/ft-gated.toml", true),
        ("configs/ft-int8.toml", false),
        ("configs/ft-int8-all.toml", false),
        ("configs/rules-lexical.toml", false),
    ] {
        let cfg = Config::from_toml_str(&read(file), file).expect("a valid configuration");
        let e = &cfg.embedding;
        if file.contains("rules-lexical") {
            assert!(!e.enabled && cfg.lexical.enabled, "{file}");
            continue;
        }
        assert!(e.enabled && cfg.lexical.enabled, "{file}");
        assert_eq!(e.chunk_tokens, 126, "{file}: the head's window");
        assert_eq!(e.k, 0, "{file}: a fine-tuned head has no index");
        assert_eq!(e.gate > 0.0, gated, "{file}");
    }
}

//! The optional stages as cargo features: the binary `make demo` builds (`cargo
//! build -p portcullis --no-default-features`) runs the demo's configuration and
//! refuses, with the reason, a configuration that needs a stage it lacks; the full
//! binary runs that stage. `make test` runs this file (and `cli.rs`) in both builds.

use std::process::{Command, Output};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn scan_with(config: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("portcullis.toml");
    std::fs::write(&cfg, config).unwrap();
    let input = dir.path().join("input.jsonl");
    std::fs::write(
        &input,
        "{\"id\":\"a\",\"channel\":\"tool_result\",\"text\":\"The build finished in 41 seconds; 212 tests passed.\"}\n",
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["scan", "--input"])
        .arg(&input)
        .arg("--config")
        .arg(&cfg)
        .output()
        .expect("spawn portcullis")
}

fn embedding_config() -> String {
    // candle: the backend that needs no ONNX Runtime library, only the weights
    // `scripts/fetch-models.sh` put in models/ (`make test` runs it).
    format!(
        "preset = \"balanced\"\n[embedding]\nenabled = true\nbackend = \"candle\"\nmodels_dir = \"{ROOT}/models/all-MiniLM-L6-v2\"\n"
    )
}

fn review_config() -> String {
    format!(
        "preset = \"balanced\"\n[review]\nenabled = true\nmodels_dir = \"{ROOT}/models/smollm2-135m-instruct\"\n"
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_demo_configuration_needs_no_optional_stage() {
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["scan", "--exit-zero", "--input"])
        .arg(format!("{ROOT}/demo/demo.jsonl"))
        .arg("--config")
        .arg(format!("{ROOT}/demo/portcullis.toml"))
        .output()
        .expect("spawn portcullis");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!out.stdout.is_empty());
}

/// A scan under `config` is refused at start-up, naming `feature` and how to get it.
#[cfg(not(all(feature = "embedding", feature = "review")))]
fn assert_refused(config: &str, feature: &str) {
    let out = scan_with(config);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "nothing is scanned without the stage"
    );
    let e = stderr(&out);
    assert!(
        e.contains(&format!("without the `{feature}` feature")),
        "{e}"
    );
    assert!(
        e.contains("cargo build --release"),
        "says how to get it: {e}"
    );
}

#[cfg(not(feature = "embedding"))]
#[test]
fn without_the_embedding_feature_a_config_that_enables_it_is_refused() {
    assert_refused(&embedding_config(), "embedding");
}

#[cfg(feature = "embedding")]
#[test]
fn with_the_embedding_feature_the_stage_runs() {
    let out = scan_with(&embedding_config());
    assert!(out.status.success(), "{}", stderr(&out));
    let rec: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert!(
        rec.to_string().contains("embedding"),
        "the record shows the embedding stage: {rec}"
    );
}

#[cfg(not(feature = "review"))]
#[test]
fn without_the_review_feature_a_config_that_enables_it_is_refused() {
    assert_refused(&review_config(), "review");
}

#[cfg(feature = "review")]
#[test]
fn with_the_review_feature_the_stage_loads_and_the_scan_runs() {
    let out = scan_with(&review_config());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!out.stdout.is_empty());
}

#[cfg(not(feature = "embedding"))]
#[test]
fn without_the_embedding_feature_train_embedding_says_why() {
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["train-embedding", "--corpus", "x.jsonl"])
        .output()
        .expect("spawn portcullis");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("without the `embedding` feature"),
        "{}",
        stderr(&out)
    );
}

/// `train-embedding --head-from`: a head trained elsewhere keeps its weights and
/// only its Platt scaling is refitted, on the corpus's dev records; a head of
/// another model (the fine-tuned experiment's, against the base weights) is
/// refused, naming the hashes, and nothing is written.
#[cfg(feature = "embedding")]
#[test]
fn train_embedding_head_from_recalibrates_only_a_head_of_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("dev.jsonl");
    let text = std::fs::read_to_string(format!("{ROOT}/corpus/corpus.jsonl")).unwrap();
    let mut dev: Vec<&str> = Vec::new();
    for label in ["\"benign\"", "\"malicious\""] {
        dev.extend(
            text.lines()
                .filter(|l| {
                    l.contains("\"split\":\"dev\"") && l.contains(&format!("\"label\":{label}"))
                })
                .take(12),
        );
    }
    assert_eq!(dev.len(), 24, "the committed corpus lost its dev records");
    std::fs::write(&corpus, dev.join("\n") + "\n").unwrap();
    let train = |head: &str, out: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["train-embedding", "--backend", "candle", "--corpus"])
            .arg(&corpus)
            .arg("--models-dir")
            .arg(format!("{ROOT}/models/all-MiniLM-L6-v2"))
            .arg("--head-from")
            .arg(format!("{ROOT}/{head}"))
            .arg("--out")
            .arg(out)
            .output()
            .expect("spawn portcullis")
    };
    let base = "crates/portcullis-embed/data/embedding-head.json";
    let out = dir.path().join("head.json");
    let run = train(base, &out);
    assert!(run.status.success(), "{}", stderr(&run));
    let read = |p: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let before = read(&format!("{ROOT}/{base}"));
    let after = read(out.to_str().unwrap());
    assert_eq!(
        after["weights"], before["weights"],
        "the weights were refitted"
    );
    assert_eq!(after["bias"], before["bias"]);
    assert_eq!(after["provenance"]["calibration_records"], 24);
    assert_ne!(
        after["platt"], before["platt"],
        "the Platt scaling was not refitted"
    );

    let other = dir.path().join("other.json");
    let run = train("reports/transformer/head-dev.json", &other);
    assert!(
        !run.status.success(),
        "a head of another model was accepted"
    );
    let err = stderr(&run);
    assert!(
        err.contains("SHA-256") && err.contains("--models-dir"),
        "{err}"
    );
    assert!(!other.exists(), "a refused head was written");
}

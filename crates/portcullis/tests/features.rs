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

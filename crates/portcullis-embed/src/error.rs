//! `EmbedError`: what loading or running the embedding model can fail with; every
//! missing-weights error names the command that installs them.

use std::path::PathBuf;

/// The command that installs the weights (named in every missing-weights error).
pub const FETCH_COMMAND: &str = "scripts/fetch-models.sh";

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "the embedding stage is enabled but its model files are missing from {dir}: {missing}; \
         fetch them with `{FETCH_COMMAND}` (run by `scripts/setup.sh` and `make demo`), \
         point embedding.models_dir at them, or set embedding.enabled = false"
    )]
    MissingWeights { dir: PathBuf, missing: String },
    #[error(
        "the embedding stage's ONNX Runtime library {path} is missing; fetch it with \
         `{FETCH_COMMAND}` (run by `scripts/setup.sh` and `make demo`), point \
         embedding.onnxruntime at a libonnxruntime 1.22.x for this platform, or set \
         embedding.backend = \"candle\""
    )]
    MissingRuntime { path: PathBuf },
    #[error(
        "the ONNX Runtime library {path} is not the build the embedding stage loads: its \
         SHA-256 is {actual}, expected {expected}; a library is code, so it is loaded only \
         when its hash is known. Reinstall it with `{FETCH_COMMAND}` (which checks the same \
         hash), point embedding.onnxruntime at that file, or set embedding.backend = \"candle\""
    )]
    RuntimeHash {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("cannot load the embedding model from {dir}: {message}")]
    Load { dir: PathBuf, message: String },
    #[error("tokenizer: {0}")]
    Tokenize(String),
    #[error("embedding inference: {0}")]
    Inference(String),
    #[error("embedding head {path}: {message}")]
    Head { path: String, message: String },
    #[error("nearest-neighbour index {path}: {message}")]
    Index { path: String, message: String },
}

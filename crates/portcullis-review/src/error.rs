//! `ReviewError`: what loading or asking the review model can fail with; every
//! missing-weights error names the command that installs them.

use std::path::PathBuf;

/// The command that installs the weights (named in every missing-weights error).
pub const FETCH_COMMAND: &str = "scripts/fetch-models.sh";

#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    #[error(
        "the review stage is enabled with the embedded model but {path} is missing; fetch it \
         with `{FETCH_COMMAND}` (run by `scripts/setup.sh` and `make demo`), point \
         review.models_dir at it, or set review.enabled = false"
    )]
    MissingWeights { path: PathBuf },
    #[error("cannot load the review model {path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error("review model inference: {0}")]
    Inference(String),
    #[error("review endpoint {url}: {message}")]
    Endpoint { url: String, message: String },
    #[error("the model's output is not a verdict: {0}")]
    Parse(String),
    #[error("no verdict within the review timeout of {0} ms")]
    Timeout(u64),
    #[error("the review stage is saturated ({0} reviews queued or running)")]
    Saturated(usize),
    #[error("the review workers have stopped")]
    Stopped,
}

impl From<candle_core::Error> for ReviewError {
    fn from(e: candle_core::Error) -> Self {
        ReviewError::Inference(e.to_string())
    }
}

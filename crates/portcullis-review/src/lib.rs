//! The LLM review stage's engine. An item whose fused score falls in the
//! configured band (or whose channel is configured) is shown to a local language
//! model that answers whether it is a prompt injection; the configuration says how
//! far that verdict may move the decision (`portcullis-detect`'s `review.rs`
//! applies it). This crate only produces verdicts:
//!
//! - [`embedded`]: SmolLM2-135M-Instruct (GGUF) in-process with candle; the answer is
//!   constrained to the two label tokens and read off one forward pass (greedy, no
//!   sampling), with the fixed prompt prefix computed once per worker.
//! - [`endpoint`]: a local Ollama or OpenAI-compatible server (temperature 0, fixed
//!   seed), whose answer must be exactly the JSON of [`parse::json`].
//! - [`service::Reviewer`]: worker threads, a concurrency limit, a per-call
//!   timeout, and a cache keyed by the hash of (model, prompt template, input), so
//!   identical inputs always get the identical verdict.

pub mod cache;
pub mod embedded;
pub mod endpoint;
pub mod error;
pub mod parse;
pub mod prompt;
pub mod service;

pub use error::{ReviewError, FETCH_COMMAND};
pub use service::{Outcome, Reviewer, Settings, WhenBusy};

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What the model said of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Injection,
    Benign,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Injection => "injection",
            Label::Benign => "benign",
        }
    }
}

/// A parsed verdict and the raw output it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub label: Label,
    /// The model's confidence in `label`, in [0, 1].
    pub confidence: f64,
    /// What the model returned, verbatim (the embedded backend: the label and the
    /// two label probabilities).
    pub raw: String,
}

/// A model that classifies one (already truncated) text.
pub trait Backend: Send {
    /// Names the model exactly (file hash or endpoint + model name); part of the
    /// cache key.
    fn model_id(&self) -> String;
    /// SHA-256 of the prompt template; part of the cache key.
    fn template_sha256(&self) -> String;
    /// Classify `text`; give up (with [`ReviewError::Timeout`]) past `deadline`
    /// where the backend can stop early.
    fn classify(&mut self, text: &str, deadline: Instant) -> Result<Verdict, ReviewError>;
}

//! Portcullis core types: the vocabulary every other crate speaks.
//!
//! This crate has no heavy dependencies on purpose: it defines what an inspected
//! item is ([`Item`], [`Channel`]), what a stage reports ([`StageOutput`],
//! [`Finding`]), what a decision looks like ([`DecisionRecord`]) and the loaded
//! configuration whose hash goes into every record ([`Config`]).

mod channel;
mod config;
mod error;
mod floors;
mod item;
pub mod json;
mod record;
mod review;
mod rng;

pub use channel::Channel;
pub use config::{
    AllowEntry, Config, EgressConfig, EmbeddingBackend, EmbeddingConfig, LexicalConfig,
    NormalizeConfig, Preset, SeverityWeights, Thresholds,
};
pub use error::CoreError;
pub use floors::{Floor, Floors, HIDDEN_INSTRUCTIONS};
pub use item::Item;
pub use json::{canonical_json, canonical_value, sorted_entries};
pub use record::{
    sha256_hex, Action, ChunkEvidence, DecisionRecord, Evidence, Finding, NeighbourEvidence,
    Severity, Span, StageOutput, Status, RECORD_SCHEMA,
};
pub use review::{
    apply_verdict, on_error, Move, ReviewBackend, ReviewConfig, ReviewMoves, ReviewPolicy,
    ReviewRecord, WhenBusy,
};
pub use rng::SplitMix64;

/// Current UTC time as RFC 3339 with microseconds, for record timestamps.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// Resolve a configured path (a models directory): absolute paths and paths that
/// exist relative to the working directory are used as they are; otherwise a
/// relative path is taken relative to the source tree this binary was built from
/// (so tests and `cargo run` work from any folder of the repository).
pub fn resolve_repo_path(configured: &str) -> std::path::PathBuf {
    let p = std::path::PathBuf::from(configured);
    if p.is_absolute() || p.exists() {
        return p;
    }
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let in_repo = repo.join(&p);
    if in_repo.exists() {
        in_repo
    } else {
        p
    }
}

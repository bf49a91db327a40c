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
pub mod jsonpath;
pub mod platt;
mod record;
mod review;
mod rng;
pub mod stats;

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

/// Resolve a configured path (a models directory, the ONNX Runtime library):
/// absolute paths are used as they are; a relative path is taken relative to
/// the working directory when it exists there, else relative to where the
/// running executable is installed — its directory or one of its three
/// nearest ancestors (`/opt/portcullis/bin/portcullis` finds
/// `/opt/portcullis/models`; a cargo build in `target/debug/` and its test
/// binaries in `target/debug/deps/` find the checkout's `models/`). Never a
/// path compiled into the binary: the directory a binary was built in may not
/// exist on the machine it runs on, and whoever creates it there would choose
/// what is loaded. Nothing found: the path as given, for the error to name.
pub fn resolve_install_path(configured: &str) -> std::path::PathBuf {
    let p = std::path::PathBuf::from(configured);
    if p.is_absolute() || p.exists() {
        return p;
    }
    let exe = std::env::current_exe().ok();
    let found = exe
        .as_deref()
        .and_then(std::path::Path::parent)
        .into_iter()
        .flat_map(std::path::Path::ancestors)
        .take(4)
        .map(|dir| dir.join(&p))
        .find(|candidate| candidate.exists());
    found.unwrap_or(p)
}

//! `portcullis bench`: the attack taxonomies of MSB (seed 002) and MCP-Poison-Bench
//! (seed 001) run end to end against the project's own MCP servers, once directly
//! (baseline) and once through a real `portcullis proxy` (defended), scored from what
//! actually happened in a per-trial sandbox.
//!
//! ```text
//! runner::plan ─▶ Trial (task × attack type × vector × goal × payload register × mode)
//!   sandbox::Sandbox::create        files, profile, canary, a real worker process
//!   servers (portcullis-benchserver: server.rs, domains/, attack.rs) over stdio / HTTP
//!   agent::Connection               baseline: each server directly; defended: `portcullis proxy`
//!   agent::compliant | agent::openai  ─▶ trace.rs (JSONL: listings, calls, results, obeys)
//!   score::score(trace, sandbox)    pure: ASR (goal happened), PUA (task done), errored
//!   report.rs                       Wilson intervals (portcullis-eval), Markdown, SVG charts
//! ```
//!
//! One place per kind of change: an attack type is one row of [`attack::TYPES`], a
//! domain one module in [`domains`] and one line of [`domains::ALL`], a payload
//! register one entry of [`payloads::REGISTERS`], a goal one arm in [`attack::Goal`].

pub mod agent;
pub mod attack;
pub mod domains;
pub mod external;
pub mod operands;
pub mod payloads;
pub mod report;
pub mod runner;
pub mod sandbox;
pub mod score;
pub mod server;
pub mod stops;
pub mod trace;

/// Errors of the bench library.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown {what} `{name}`")]
    Unknown { what: &'static str, name: String },
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("MCP: {0}")]
    Mcp(String),
    #[error("agent: {0}")]
    Agent(String),
    #[error("process: {0}")]
    Process(String),
}

impl BenchError {
    pub fn io(path: impl Into<std::path::PathBuf>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Unicode-normalized (NFKC), lower-cased, whitespace-free form of a text: the
/// compliant agent compares instruction sentences with what it reads in this form.
pub fn squash(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfkc()
        .flat_map(char::to_lowercase)
        .filter(|c| !c.is_whitespace())
        .collect()
}

/// Short stable hex hash of a string (trial seeds, canaries).
pub fn hash_hex(s: &str, len: usize) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(s.as_bytes());
    let h = hex::encode(d);
    h[..len.min(h.len())].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squash_ignores_case_whitespace_and_compatibility_forms() {
        assert_eq!(squash("Put  the KEY\n in"), "putthekeyin");
        // Full-width letters and a ligature fold under NFKC.
        assert_eq!(squash("ＫＥＹ ﬁle"), "keyfile");
        assert_ne!(squash("key file"), squash("key-file"));
    }
}

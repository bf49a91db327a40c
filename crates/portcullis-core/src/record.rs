//! `DecisionRecord`: the full account of one decision (stages, findings, scores,
//! thresholds, status, action) and its vocabulary (`Status`, `Action`, `Severity`,
//! `Finding`, `StageOutput`), with the JSON Schema it is validated against.

use crate::{Channel, ReviewRecord, Thresholds};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The JSON Schema of [`DecisionRecord`], checked into `schemas/` and validated in tests.
pub const RECORD_SCHEMA: &str = include_str!("../../../schemas/decision-record.schema.json");

/// Final state of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Allow,
    Review,
    Block,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Allow => "ALLOW",
            Status::Review => "REVIEW",
            Status::Block => "BLOCK",
        }
    }
}

/// What the gateway does with the item, given its status and the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Forwarded unchanged.
    Pass,
    /// Forwarded with secrets and/or PII replaced by placeholders.
    Mask,
    /// Metadata forwarded with its instruction-shaped segments removed (the
    /// record's reasons list what was removed).
    Sanitize,
    /// Withheld until a human approves it.
    Hold,
    /// Withheld.
    Deny,
}

impl Action {
    /// As serialized (`pass`, `mask`, `sanitize`, `hold`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Pass => "pass",
            Action::Mask => "mask",
            Action::Sanitize => "sanitize",
            Action::Hold => "hold",
            Action::Deny => "deny",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

/// A half-open byte range `[start, end)` of the ORIGINAL input text (or, for a
/// walked tool definition, of the field named by the finding's `path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// One thing a stage found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Rule or detector id, e.g. `io.ignore_previous` or `egress.github_token`.
    pub rule: String,
    pub category: String,
    pub severity: Severity,
    /// The normalized view the match was made on (`lower`, `folded`, `decoded:base64`, ...).
    pub view: String,
    pub span: Span,
    /// The matched part of the original text (secrets redacted), at most ~120 chars.
    pub excerpt: String,
    /// JSON path of the field, for items walked out of a structured input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Suppressed by an allowlist entry of the configuration: kept for the record,
    /// not counted in the score.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allowlisted: bool,
}

/// Output of one stage of the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageOutput {
    pub name: String,
    /// Stage score in [0, 1]; the input the policy fuses.
    pub score: f64,
    pub label: String,
    pub findings: Vec<Finding>,
    pub latency_us: u64,
    /// What a learned stage based its score on (optional; the embedding stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

/// Evidence of a learned stage that scores texts chunk by chunk: the chunk whose
/// score became the stage score, and the nearest labelled training examples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// JSON path of the field that decided, for a walked tool definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Number of chunks the text was cut into.
    pub chunks: usize,
    /// Bytes of the text the stage did not read: past its read limit, or in chunks
    /// it did not score.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unread_bytes: usize,
    pub deciding_chunk: ChunkEvidence,
    pub neighbours: Vec<NeighbourEvidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkEvidence {
    pub index: usize,
    /// Byte span of the chunk in the original text (or field).
    pub span: Span,
    /// The chunk's calibrated probability (= the stage score for this text).
    pub score: f64,
    /// The start of the chunk, at most ~120 chars.
    pub excerpt: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighbourEvidence {
    /// Corpus record id of the training example.
    pub id: String,
    /// `benign` or `malicious`.
    pub label: String,
    /// Cosine similarity to the deciding chunk.
    pub similarity: f64,
}

/// One decision, as appended to the audit log. Top-level keys are fixed: other
/// tools read them (schema in `schemas/decision-record.schema.json`); `review` is
/// the one optional key, present when the LLM review stage is enabled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub id: String,
    pub position: u64,
    pub time: String,
    pub config_hash: String,
    pub channel: Channel,
    pub server: Option<String>,
    pub tool: Option<String>,
    pub path: Option<String>,
    pub input_sha256: String,
    pub input_len: usize,
    pub stages: Vec<StageOutput>,
    /// The fused score the decision was taken on.
    pub score: f64,
    pub thresholds: Thresholds,
    pub status: Status,
    pub action: Action,
    pub reasons: Vec<String>,
    pub latency_us: u64,
    /// What the LLM review stage did (present whenever the stage is enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewRecord>,
}

impl DecisionRecord {
    /// All findings of all stages, in stage order.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.stages.iter().flat_map(|s| s.findings.iter())
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serialized_forms() {
        for a in [
            Action::Pass,
            Action::Mask,
            Action::Sanitize,
            Action::Hold,
            Action::Deny,
        ] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        for s in [Status::Allow, Status::Review, Status::Block] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}

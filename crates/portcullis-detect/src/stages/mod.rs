//! Detection stages. A stage reads one item (with its normalized views) and reports
//! findings and/or a score; the pipeline fuses the stages' scores.
//!
//! Adding a stage is one new file in this folder and one line in [`registry`].

pub mod egress;
#[cfg(feature = "embedding")]
pub mod embedding;
#[cfg(not(feature = "embedding"))]
mod embedding {
    /// Built without the `embedding` feature: enabling the stage is an error.
    pub fn stage(
        _: &portcullis_core::EmbeddingConfig,
        _: Option<std::sync::Arc<crate::lexical::LexicalModel>>,
    ) -> Result<Box<dyn super::Stage>, crate::DetectError> {
        Err(crate::DetectError::Model(
            "the embedding stage is enabled but this binary was built without the \
             `embedding` feature; build the full binary (`cargo build --release --locked \
             -p portcullis`, or `make build`) or set embedding.enabled = false"
                .into(),
        ))
    }
}
pub mod lexical;
pub mod rules;

pub use egress::EgressStage;
pub use lexical::LexicalStage;
pub use rules::RulesStage;

use crate::normalize::Normalized;
use crate::rules::{RuleSet, Target};
use crate::DetectError;
use portcullis_core::{Channel, Config, Finding, Item};
use std::sync::Arc;

/// What a stage sees of one item.
pub struct StageInput<'a> {
    pub item: &'a Item,
    pub normalized: &'a Normalized,
    pub target: Target,
    /// Whether the configuration's allowlist covers a rule id for this item's
    /// server and tool (the pipeline marks findings; a stage that acts on its
    /// findings, like masking, must skip the allowlisted ones).
    pub allowlisted: &'a dyn Fn(&str) -> bool,
}

/// What a stage reports for one item.
#[derive(Debug, Default, Clone)]
pub struct StageResult {
    pub findings: Vec<Finding>,
    /// A probability from a learned stage. `None`: the score is derived from the
    /// findings' severities (see `policy::stage_score`).
    pub score: Option<f64>,
    /// For tool results: the text with secrets/PII masked, if anything was masked.
    pub masked: Option<String>,
    /// What a learned score was based on (kept for the item with the highest score).
    pub evidence: Option<portcullis_core::Evidence>,
}

pub trait Stage: Send + Sync + std::fmt::Debug {
    /// The name in records (`stages[].name`).
    fn name(&self) -> &'static str;
    /// Whether the stage runs on this item at all.
    /// By default every channel but the outbound-only ones
    /// ([`Channel::is_outbound_only`]: read by the egress guard alone), and not
    /// the keys of tool-call arguments: those are the tool's own property names
    /// echoed back (judged in its definition), and only the egress guard reads
    /// them, for a secret written as a key.
    fn applies(&self, item: &Item) -> bool {
        learned_stage_reads(item)
    }
    /// Weight of the stage's score in the fusion, for a decision on `channel`.
    fn weight(&self, _config: &Config, _channel: Channel) -> f64 {
        1.0
    }
    /// Whether the stage's findings on `channel` set floors (docs/policy.md,
    /// "Floors"): a deterministic stage's do; a learned stage, whose score is a
    /// probability, overrides this with `false`.
    fn sets_floors(&self, _channel: Channel) -> bool {
        true
    }
    /// Whether the stage is learned: it scores a server's wording, so it reads
    /// the text with the client's own words that the server quotes blanked out
    /// ([`crate::extract::Extracted::mark_quoted`]). Deterministic stages read
    /// every byte.
    fn learned(&self) -> bool {
        false
    }
    /// A cascade's gate: the stage runs on an item only when an earlier stage
    /// that [`Stage::opens_gate`] scored that item at least this much or found
    /// something on it. `None` = it runs on every item it applies to.
    fn gate(&self) -> Option<f64> {
        None
    }
    /// Whether this stage's score and findings open a later stage's gate: a stage
    /// that judges whether the text is an injection does; the egress guard, whose
    /// findings are data leaving (an address, a key), not instructions, does not.
    fn opens_gate(&self) -> bool {
        true
    }
    /// Whether the stage runs a neural model (tens of milliseconds an item), so a
    /// caller must not run it where it would stall other work.
    fn runs_a_model(&self) -> bool {
        false
    }
    fn run(&self, input: &StageInput<'_>) -> StageResult;
}

/// The default of [`Stage::applies`]: every item but outbound-only channels and
/// the keys of tool-call arguments.
pub fn learned_stage_reads(item: &Item) -> bool {
    let argument_key = item.is_key && item.channel == Channel::ToolArguments;
    !(item.channel.is_outbound_only() || argument_key)
}

/// The stages of a detector, in the order they run and appear in records.
pub fn registry(config: &Config, rules: Arc<RuleSet>) -> Result<Vec<Box<dyn Stage>>, DetectError> {
    let mut stages: Vec<Box<dyn Stage>> = vec![
        Box::new(RulesStage::new(rules)),
        Box::new(EgressStage::new(&config.egress)?),
    ];
    let mut lexical = None;
    if config.lexical.enabled {
        let stage = LexicalStage::new(&config.lexical, &config.normalize)?;
        lexical = Some(stage.shared_model());
        stages.push(Box::new(stage));
    }
    if config.embedding.enabled {
        stages.push(embedding::stage(&config.embedding, lexical)?);
    }
    Ok(stages)
}

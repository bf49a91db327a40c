//! The lexical stage: the calibrated probability of the hashed n-gram model over
//! the item's distinct normalized views (see `crate::lexical`).

use super::{Stage, StageInput, StageResult};
use crate::lexical::LexicalModel;
use crate::DetectError;
use portcullis_core::{Channel, Config, LexicalConfig};
use std::sync::Arc;

pub const NAME: &str = "lexical";

include!(concat!(env!("OUT_DIR"), "/embedded_lexical.rs"));

#[derive(Debug)]
pub struct LexicalStage {
    model: Arc<LexicalModel>,
}

impl LexicalStage {
    /// Load the configured model (a file, or the one embedded at build time).
    pub fn new(cfg: &LexicalConfig) -> Result<LexicalStage, DetectError> {
        let text = match &cfg.model {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| DetectError::Model(format!("cannot read lexical model {path}: {e}")))?,
            None => EMBEDDED_LEXICAL
                .ok_or_else(|| {
                    DetectError::Model(
                        "the lexical stage is enabled but this binary embeds no lexical model; \
                         train one with `portcullis train-lexical` (see README) or set lexical.enabled = false"
                            .into(),
                    )
                })?
                .to_string(),
        };
        let model =
            LexicalModel::from_json(&text).map_err(|e| DetectError::Model(e.to_string()))?;
        Ok(LexicalStage {
            model: Arc::new(model),
        })
    }

    pub fn model(&self) -> &LexicalModel {
        &self.model
    }

    /// The model, for a later stage that ranks text with it.
    pub fn shared_model(&self) -> Arc<LexicalModel> {
        Arc::clone(&self.model)
    }
}

impl Stage for LexicalStage {
    fn name(&self) -> &'static str {
        NAME
    }

    fn sets_floors(&self, _channel: Channel) -> bool {
        false
    }

    fn learned(&self) -> bool {
        true
    }

    fn weight(&self, config: &Config, _channel: Channel) -> f64 {
        config.lexical.weight
    }

    fn run(&self, input: &StageInput<'_>) -> StageResult {
        let views: Vec<&str> = input
            .normalized
            .views
            .iter()
            .map(|v| v.text.as_str())
            .collect();
        // Too few words to score: the stage abstains (no score; it counts as 0 in
        // the fusion), and the rules still read the text.
        if !crate::lexical::has_wording(&views) {
            return StageResult::default();
        }
        let score = self
            .model
            .probability_on(&views, input.item.channel.as_str());
        // The field is the evidence (the pipeline fills its path): which text of a
        // structure decided, for records and notices. No excerpt: the text is in
        // the message, and a notice must not echo it.
        let evidence = portcullis_core::Evidence {
            path: None,
            chunks: 1,
            unread_bytes: 0,
            deciding_chunk: portcullis_core::ChunkEvidence {
                index: 0,
                span: portcullis_core::Span {
                    start: 0,
                    end: input.item.text.len(),
                },
                score,
                excerpt: String::new(),
            },
            neighbours: Vec::new(),
        };
        StageResult {
            score: Some(score),
            evidence: Some(evidence),
            ..StageResult::default()
        }
    }
}

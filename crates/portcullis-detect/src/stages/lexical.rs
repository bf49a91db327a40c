//! The lexical stage: the calibrated probability of the hashed n-gram model over
//! the item's distinct normalized views (see `crate::lexical`).

use super::{Stage, StageInput, StageResult};
use crate::lexical::LexicalModel;
use crate::DetectError;
use portcullis_core::{Channel, ChunkEvidence, Config, Evidence, LexicalConfig, Span};

pub const NAME: &str = "lexical";

include!(concat!(env!("OUT_DIR"), "/embedded_lexical.rs"));

#[derive(Debug)]
pub struct LexicalStage {
    model: LexicalModel,
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
        Ok(LexicalStage { model })
    }

    pub fn model(&self) -> &LexicalModel {
        &self.model
    }
}

impl Stage for LexicalStage {
    fn name(&self) -> &'static str {
        NAME
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
        let score = self.model.probability(&views);
        // Which text decided: the whole item (the pipeline adds a walked field's
        // path), so a held item names its field even without a rule finding.
        let text = &input.item.text;
        let excerpt: String = text.chars().take(120).collect();
        StageResult {
            score: Some(score),
            evidence: Some(Evidence {
                path: None,
                chunks: 1,
                deciding_chunk: ChunkEvidence {
                    index: 0,
                    span: Span {
                        start: 0,
                        end: text.len(),
                    },
                    score,
                    excerpt,
                },
                neighbours: Vec::new(),
            }),
            ..StageResult::default()
        }
    }
}

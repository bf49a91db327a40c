//! The lexical stage: the calibrated probability of the hashed n-gram model over
//! the item's distinct normalized views (see `crate::lexical`), for a long text
//! no higher than its loudest stretch's (`crate::lexical::stretches`).

use super::{Stage, StageInput, StageResult};
use crate::lexical::{LexicalModel, STRETCH_BYTES};
use crate::normalize::normalize;
use crate::pipeline::kind_and_target;
use crate::DetectError;
use portcullis_core::{Channel, Config, LexicalConfig, NormalizeConfig};
use std::sync::Arc;

pub const NAME: &str = "lexical";

/// Below this probability a long text's stretches are not scored: capping can
/// only lower a score, and no preset's threshold is below it (`calibrate` puts
/// every threshold above the weight of a finding without a floor, at least the
/// `low` severity's 0.2). A fifth of benign real tool results over 512 bytes
/// reach 0.1, a thirteenth 0.2. A later stage's gate (the transformer's) reads
/// the capped score, so a text the cap brings under that gate does not reach it.
const STRETCH_GATE: f64 = 0.2;

include!(concat!(env!("OUT_DIR"), "/embedded_lexical.rs"));

#[derive(Debug)]
pub struct LexicalStage {
    model: Arc<LexicalModel>,
    /// How a stretch is normalized: as the pipeline normalized the whole text.
    normalize: NormalizeConfig,
}

impl LexicalStage {
    /// Load the configured model (a file, or the one embedded at build time).
    pub fn new(
        cfg: &LexicalConfig,
        normalize: &NormalizeConfig,
    ) -> Result<LexicalStage, DetectError> {
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
            normalize: *normalize,
        })
    }

    pub fn model(&self) -> &LexicalModel {
        &self.model
    }

    /// The loudest stretch of a text longer than [`STRETCH_BYTES`] when it scores
    /// less than `whole` alone: its byte range and the model's probability of it,
    /// each stretch normalized as the whole text was. `None` for a shorter text,
    /// or as soon as some stretch scores `whole` or more (nothing to cap: most
    /// injected texts end there).
    fn loudest_stretch(&self, input: &StageInput<'_>, whole: f64) -> Option<((usize, usize), f64)> {
        let text = input.item.text.as_str();
        let (kind, _) = kind_and_target(input.item.channel, input.item.is_key);
        let channel = input.item.channel.as_str();
        let mut loudest: Option<((usize, usize), f64)> = None;
        for (start, end) in crate::lexical::stretches(text) {
            let normalized = normalize(&text[start..end], kind, &self.normalize);
            let views: Vec<&str> = normalized.views.iter().map(|v| v.text.as_str()).collect();
            // A stretch too short to score says nothing either way.
            if !crate::lexical::has_wording(&views) {
                continue;
            }
            let p = self.model.probability_on(&views, channel);
            if p >= whole {
                return None;
            }
            if loudest.is_none_or(|(_, q)| p > q) {
                loudest = Some(((start, end), p));
            }
        }
        loudest
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
        let whole = self
            .model
            .probability_on(&views, input.item.channel.as_str());
        // A long text scores no higher than its loudest stretch of at most
        // STRETCH_BYTES alone: evidence the model finds only by adding up a whole
        // document is not an instruction written anywhere in it.
        let mut score = whole;
        let mut span = (0, input.item.text.len());
        if whole >= STRETCH_GATE && input.item.text.len() > STRETCH_BYTES {
            if let Some((stretch, p)) = self.loudest_stretch(input, whole) {
                (score, span) = (p, stretch);
            }
        }
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
                    start: span.0,
                    end: span.1,
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

//! The embedding stage: all-MiniLM-L6-v2 sentence embeddings of the item's original
//! text, chunked on sentence boundaries, scored by a logistic-regression head
//! (Platt-calibrated); the stage score is the maximum over the chunks (see
//! `portcullis_embed`). The record carries the deciding chunk and the k nearest
//! training examples as evidence.

use super::{Stage, StageInput, StageResult};
use crate::DetectError;
use portcullis_core::{
    Channel, ChunkEvidence, Config, EmbeddingConfig, Evidence, Finding, Item, NeighbourEvidence,
    Severity, Span,
};
use portcullis_embed::{resolve_models_dir, Backend, Classifier, ClassifierSpec};
use std::sync::Arc;

use crate::lexical::LexicalModel;

pub const NAME: &str = "embedding";

#[derive(Debug)]
pub struct EmbeddingStage {
    classifier: Classifier,
    gate: Option<f64>,
    /// Picks the chunks of a long text the model scores (`embedding.max_chunks`).
    ranker: Option<Arc<LexicalModel>>,
    /// `embedding.channels`: empty = every channel.
    channels: Vec<Channel>,
}

/// Load the stage; a missing model directory is an error naming the fetch command.
/// `ranker`: the lexical model, when its stage is on.
pub fn stage(
    cfg: &EmbeddingConfig,
    ranker: Option<Arc<LexicalModel>>,
) -> Result<Box<dyn Stage>, DetectError> {
    Ok(Box::new(EmbeddingStage::new(cfg, ranker)?))
}

impl EmbeddingStage {
    pub fn new(
        cfg: &EmbeddingConfig,
        ranker: Option<Arc<LexicalModel>>,
    ) -> Result<EmbeddingStage, DetectError> {
        let dir = resolve_models_dir(&cfg.models_dir);
        // Resolved as the model directory is, so a configuration shipped beside
        // its model works from any working directory.
        let head = cfg.head.as_deref().map(resolve_models_dir);
        let index = cfg.index.as_deref().map(resolve_models_dir);
        let backend = Backend::from_config(cfg.backend, &cfg.onnxruntime);
        let spec = ClassifierSpec {
            models_dir: &dir,
            backend: &backend,
            head: head.as_deref(),
            index: index.as_deref(),
            k: cfg.k,
            chunk_tokens: cfg.chunk_tokens,
            max_bytes: cfg.max_bytes,
            max_chunks: cfg.max_chunks,
        };
        let classifier = Classifier::load(&spec).map_err(|e| DetectError::Model(e.to_string()))?;
        Ok(EmbeddingStage {
            classifier,
            gate: (cfg.gate > 0.0).then_some(cfg.gate),
            ranker,
            channels: cfg.channels.clone(),
        })
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }
}

/// At most this many characters of the deciding chunk go into the record.
const EXCERPT_CHARS: usize = 120;

impl Stage for EmbeddingStage {
    fn name(&self) -> &'static str {
        NAME
    }

    fn applies(&self, item: &Item) -> bool {
        super::learned_stage_reads(item)
            && (self.channels.is_empty() || self.channels.contains(&item.channel))
    }

    fn sets_floors(&self, _channel: Channel) -> bool {
        false
    }

    fn runs_a_model(&self) -> bool {
        true
    }

    fn gate(&self) -> Option<f64> {
        self.gate
    }

    fn learned(&self) -> bool {
        true
    }

    fn weight(&self, config: &Config, _channel: Channel) -> f64 {
        config.embedding.weight
    }

    fn run(&self, input: &StageInput<'_>) -> StageResult {
        let text = input.item.text.as_str();
        let rank = self
            .ranker
            .as_deref()
            .map(|m| move |chunk: &str| m.window_margin(&[chunk]));
        let rank = rank.as_ref().map(|f| f as &dyn Fn(&str) -> f64);
        match self.classifier.score_ranked(text, rank) {
            Ok(s) => {
                let d = &s.deciding;
                let excerpt: String = text
                    .get(d.start..d.end)
                    .unwrap_or("")
                    .chars()
                    .take(EXCERPT_CHARS)
                    .collect();
                StageResult {
                    score: Some(s.probability),
                    evidence: Some(Evidence {
                        path: None,
                        chunks: s.chunks,
                        unread_bytes: s.unread_bytes,
                        deciding_chunk: ChunkEvidence {
                            index: d.index,
                            span: Span {
                                start: d.start,
                                end: d.end,
                            },
                            score: d.probability,
                            excerpt,
                        },
                        neighbours: s
                            .neighbours
                            .into_iter()
                            .map(|n| NeighbourEvidence {
                                id: n.id,
                                label: if n.malicious { "malicious" } else { "benign" }.into(),
                                similarity: f64::from(n.similarity),
                            })
                            .collect(),
                    }),
                    ..StageResult::default()
                }
            }
            Err(e) => {
                // Never a silent pass: the failure is a finding and is logged.
                tracing::warn!(error = %e, "embedding stage failed on an item");
                StageResult {
                    findings: vec![Finding {
                        rule: "embedding.error".into(),
                        category: "stage_error".into(),
                        severity: Severity::Medium,
                        view: "original".into(),
                        span: Span {
                            start: 0,
                            end: text.len(),
                        },
                        excerpt: e.to_string().chars().take(EXCERPT_CHARS).collect(),
                        path: None,
                        allowlisted: false,
                    }],
                    ..StageResult::default()
                }
            }
        }
    }
}

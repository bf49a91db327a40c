//! The LLM review stage, applied after fusion: an item whose fused score falls in
//! the configured band (or whose channel is configured) goes to the reviewer
//! (`portcullis-review`), and the verdict moves the decision only as far as
//! `review.moves` allows ([`portcullis_core::apply_verdict`]). No verdict —
//! timeout, saturation, unparseable output — holds the item for review
//! ([`portcullis_core::on_error`]). The policy in force is printed in every record.

use crate::DetectError;
use portcullis_core::{on_error, Channel, Config, ReviewPolicy, ReviewRecord, Status};

#[cfg(feature = "review")]
use portcullis_core::{apply_verdict, ReviewBackend, ReviewConfig, Thresholds};
#[cfg(feature = "review")]
use portcullis_review::{
    embedded::{EmbeddedModel, Precision},
    endpoint::{Api, Endpoint, EndpointSpec},
    Backend, Reviewer, Settings,
};

/// The stage: the reviewer and the policy printed in records.
#[derive(Debug)]
pub struct ReviewStage {
    #[cfg(feature = "review")]
    reviewer: Reviewer,
    policy: ReviewPolicy,
}

/// The result of one review: the final status and the record of it.
pub struct Reviewed {
    pub status: Status,
    pub record: ReviewRecord,
    /// A line for the decision's reasons.
    pub reason: Option<String>,
}

impl ReviewStage {
    /// Start the workers (loading the embedded model or preparing the endpoint
    /// clients). Missing weights or a missing API key are errors here, at start-up.
    #[cfg(feature = "review")]
    pub fn new(config: &Config) -> Result<ReviewStage, DetectError> {
        let cfg = &config.review;
        let err = |e: portcullis_review::ReviewError| DetectError::Model(e.to_string());
        let n = cfg.concurrency;
        let backends: Vec<Box<dyn Backend>> = match cfg.backend {
            ReviewBackend::Embedded => {
                let dir = portcullis_core::resolve_install_path(&cfg.models_dir);
                // f32 weights: the general matrix kernels (run-time CPU dispatch)
                // were 2x faster than Q8_0 and 12x faster than the shipped Q4_1
                // blocks here (docs/review.md).
                let model =
                    EmbeddedModel::load(&dir, Precision::F32, cfg.max_input_tokens).map_err(err)?;
                (0..n)
                    .map(|_| Box::new(model.clone()) as Box<dyn Backend>)
                    .collect()
            }
            ReviewBackend::Ollama | ReviewBackend::Openai => {
                let api_key = match &cfg.api_key_env {
                    None => None,
                    Some(var) => Some(std::env::var(var).map_err(|_| {
                        DetectError::Model(format!(
                            "review.api_key_env names {var}, which is not set"
                        ))
                    })?),
                };
                let spec = EndpointSpec {
                    api: if cfg.backend == ReviewBackend::Ollama {
                        Api::Ollama
                    } else {
                        Api::OpenAi
                    },
                    url: cfg.url.clone().unwrap_or_default(),
                    model: cfg.model.clone().unwrap_or_default(),
                    seed: cfg.seed,
                    api_key,
                };
                (0..n)
                    .map(|_| Box::new(Endpoint::new(spec.clone())) as Box<dyn Backend>)
                    .collect()
            }
        };
        let settings = Settings {
            timeout: std::time::Duration::from_millis(cfg.timeout_ms),
            when_busy: cfg.when_busy,
            max_input_chars: cfg.max_input_chars,
            cache_entries: cfg.cache_entries,
        };
        let reviewer = Reviewer::start(backends, settings).map_err(err)?;
        let policy = policy(
            cfg,
            &config.thresholds,
            reviewer.model_id(),
            reviewer.template_sha256(),
        );
        Ok(ReviewStage { reviewer, policy })
    }

    /// Built without the `review` feature: enabling the stage is an error.
    #[cfg(not(feature = "review"))]
    pub fn new(_: &Config) -> Result<ReviewStage, DetectError> {
        Err(DetectError::Model(
            "the review stage is enabled but this binary was built without the `review` \
             feature; build the full binary (`cargo build --release --locked -p portcullis`, \
             or `make build`) or set review.enabled = false"
                .into(),
        ))
    }

    pub fn policy(&self) -> &ReviewPolicy {
        &self.policy
    }

    /// Whether an item with this fused score on this channel is referred.
    pub fn referred(&self, channel: Channel, score: f64) -> bool {
        let [lo, hi] = self.policy.band;
        // `high` is exclusive, except that a band reaching 1 includes 1.
        (lo <= score && (score < hi || hi >= 1.0)) || self.policy.channels.contains(&channel)
    }

    /// Review (if referred) and move the decision. `text` gives the text shown to
    /// the model; it is only built for referred items.
    pub fn apply(
        &self,
        channel: Channel,
        score: f64,
        before: Status,
        text: impl FnOnce() -> String,
    ) -> Reviewed {
        let mut record = ReviewRecord {
            policy: self.policy.clone(),
            referred: false,
            before,
            outcome: "not referred".into(),
            verdict: None,
            confidence: None,
            raw: None,
            error: None,
            key: None,
            cached: false,
            truncated: false,
            latency_us: 0,
        };
        if !self.referred(channel, score) {
            return Reviewed {
                status: before,
                record,
                reason: None,
            };
        }
        record.referred = true;
        self.review(&text(), before, record)
    }

    #[cfg(feature = "review")]
    fn review(&self, text: &str, before: Status, mut record: ReviewRecord) -> Reviewed {
        let o = self.reviewer.review(text);
        record.key = Some(o.key);
        record.cached = o.cached;
        record.truncated = o.truncated;
        record.latency_us = o.micros;
        let (status, reason) = match o.result {
            Ok(v) => {
                let injection = v.label == portcullis_review::Label::Injection;
                let (after, outcome) =
                    apply_verdict(before, injection, v.confidence, &self.policy.moves);
                record.outcome = outcome.into();
                record.verdict = Some(v.label.as_str().into());
                record.confidence = Some(v.confidence);
                record.raw = Some(v.raw);
                // Whether the verdict came from the cache is in the record, not
                // here: reasons are the same whichever way the verdict was obtained.
                let reason = format!(
                    "review: verdict {} (confidence {:.3}) -> {outcome} {} -> {}",
                    v.label.as_str(),
                    v.confidence,
                    before.as_str(),
                    after.as_str()
                );
                (after, reason)
            }
            Err(e) => {
                tracing::warn!(error = %e, "review stage gave no verdict; holding the item");
                let after = on_error(before);
                record.outcome = "held on error".into();
                let reason = format!(
                    "review: no verdict ({e}) -> held on error {} -> {}",
                    before.as_str(),
                    after.as_str()
                );
                record.error = Some(e.to_string());
                (after, reason)
            }
        };
        Reviewed {
            status,
            record,
            reason: Some(reason),
        }
    }

    #[cfg(not(feature = "review"))]
    fn review(&self, _: &str, before: Status, record: ReviewRecord) -> Reviewed {
        Reviewed {
            status: on_error(before),
            record,
            reason: None,
        }
    }
}

#[cfg(feature = "review")]
fn policy(cfg: &ReviewConfig, t: &Thresholds, model: &str, template: &str) -> ReviewPolicy {
    ReviewPolicy {
        backend: match cfg.backend {
            ReviewBackend::Embedded => "embedded",
            ReviewBackend::Ollama => "ollama",
            ReviewBackend::Openai => "openai",
        }
        .into(),
        model: model.into(),
        template_sha256: template.into(),
        band: cfg.band(t),
        channels: cfg.channels.clone(),
        moves: cfg.moves,
        timeout_ms: cfg.timeout_ms,
    }
}

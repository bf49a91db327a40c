//! The LLM review stage's configuration and its part of the decision record.
//! Everything that decides whether an item is referred and how far a verdict may
//! move its decision is here, in the configuration, and printed in every record.

use crate::{Channel, CoreError, Status, Thresholds};
use serde::{Deserialize, Serialize};

/// Which model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewBackend {
    /// SmolLM2-135M-Instruct in-process (`scripts/fetch-models.sh` installs it).
    Embedded,
    /// A local Ollama server (`url`, `model`).
    Ollama,
    /// A local OpenAI-compatible server (`url` ending in `/v1`, `model`).
    Openai,
}

/// When every worker is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenBusy {
    /// Wait for a worker, within `timeout_ms`.
    Wait,
    /// Hold the item for review at once.
    Review,
}

/// Whether one kind of move is allowed, and from what confidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Move {
    pub allowed: bool,
    pub min_confidence: f64,
}

/// How a verdict may move a decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReviewMoves {
    /// An `injection` verdict raises the decision to BLOCK.
    pub escalate: Move,
    /// An `injection` verdict raises an ALLOW to REVIEW (when escalation is not
    /// allowed or not confident enough).
    pub hold: Move,
    /// A `benign` verdict lowers the decision to ALLOW.
    pub deescalate: Move,
}

impl Default for ReviewMoves {
    fn default() -> Self {
        ReviewMoves {
            escalate: Move {
                allowed: true,
                min_confidence: 0.8,
            },
            hold: Move {
                allowed: true,
                min_confidence: 0.5,
            },
            // Off by default: the reviewer reads the untrusted text and can be
            // talked round by it, and the embedded model is weak (docs/review.md).
            deescalate: Move {
                allowed: false,
                min_confidence: 0.9,
            },
        }
    }
}

/// `[review]`. Every key may be omitted (the defaults below apply).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReviewConfig {
    pub enabled: bool,
    pub backend: ReviewBackend,
    /// The embedded model's directory (relative: working directory, else the
    /// repository the binary was built from).
    pub models_dir: String,
    /// Endpoint backends: the server's base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Endpoint backends: the model name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Endpoint backends: an environment variable holding a bearer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// An endpoint that is not on this machine must be allowed explicitly.
    pub allow_remote: bool,
    /// Sent to endpoints that take a seed (decoding is greedy: temperature 0).
    pub seed: u64,
    /// Fused scores `low <= score < high` are referred (a band whose high is 1
    /// includes 1). Absent: the REVIEW band of the thresholds,
    /// `[thresholds.review, thresholds.block)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<[f64; 2]>,
    /// Channels whose every item is referred, whatever its score.
    pub channels: Vec<Channel>,
    pub moves: ReviewMoves,
    /// Per review, from the request to the verdict (waiting for a worker included).
    pub timeout_ms: u64,
    /// Reviews that run at once (one worker thread each).
    pub concurrency: usize,
    pub when_busy: WhenBusy,
    /// Longer texts are cut in the middle to this many characters.
    pub max_input_chars: usize,
    /// The embedded model reads at most this many tokens of a text.
    pub max_input_tokens: usize,
    /// Verdicts kept in the cache (0 = none).
    pub cache_entries: usize,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            enabled: false,
            backend: ReviewBackend::Embedded,
            models_dir: "models/smollm2-135m-instruct".into(),
            url: None,
            model: None,
            api_key_env: None,
            allow_remote: false,
            seed: 0,
            band: None,
            channels: Vec::new(),
            moves: ReviewMoves::default(),
            timeout_ms: 10_000,
            concurrency: 1,
            when_busy: WhenBusy::Wait,
            max_input_chars: 2000,
            max_input_tokens: 384,
            cache_entries: 4096,
        }
    }
}

impl ReviewConfig {
    /// The band in force: the configured one, or the thresholds' REVIEW band.
    pub fn band(&self, t: &Thresholds) -> [f64; 2] {
        self.band.unwrap_or([t.review, t.block])
    }

    pub fn validate(&self) -> Result<(), CoreError> {
        let bad = |m: String| Err(CoreError::ConfigInvalid(format!("review.{m}")));
        if let Some([lo, hi]) = self.band {
            if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo < hi && hi <= 1.0) {
                return bad(format!(
                    "band must be [low, high] with 0 <= low < high <= 1, got [{lo}, {hi}]"
                ));
            }
        }
        for (name, m) in [
            ("escalate", self.moves.escalate),
            ("hold", self.moves.hold),
            ("deescalate", self.moves.deescalate),
        ] {
            if !(m.min_confidence.is_finite() && (0.0..=1.0).contains(&m.min_confidence)) {
                return bad(format!(
                    "moves.{name}.min_confidence must be within [0, 1], got {}",
                    m.min_confidence
                ));
            }
        }
        if self.timeout_ms == 0 {
            return bad("timeout_ms must be at least 1".into());
        }
        if !(1..=64).contains(&self.concurrency) {
            return bad(format!(
                "concurrency must be within 1..=64, got {}",
                self.concurrency
            ));
        }
        if self.max_input_chars < 16 || self.max_input_tokens < 16 {
            return bad("max_input_chars and max_input_tokens must be at least 16".into());
        }
        if self.enabled && self.backend != ReviewBackend::Embedded {
            let (Some(url), Some(_)) = (&self.url, &self.model) else {
                return bad("url and model are required with an endpoint backend".into());
            };
            let Some(host) = url_host(url) else {
                return bad(format!("url {url:?} is not an http:// or https:// URL"));
            };
            if !self.allow_remote && !is_loopback(&host) {
                return bad(format!(
                    "url {url:?} is not on this machine; nothing leaves the machine unless \
                     allow_remote = true says so"
                ));
            }
        }
        Ok(())
    }
}

/// The host of an `http(s)://host[:port]/…` URL, lower-cased, brackets removed.
fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What the review stage did for one decision. Present in every record of a
/// detector with the stage enabled (with `referred: false` when it did not run),
/// so the band and the moves in force are always on record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRecord {
    pub policy: ReviewPolicy,
    pub referred: bool,
    /// The status the fused score gave, before the review.
    pub before: Status,
    /// `escalated`, `held`, `de-escalated`, `unchanged`, `held on error`, or
    /// `not referred`.
    pub outcome: String,
    /// `injection` or `benign`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The model's output, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Why there is no verdict (timeout, saturation, unparseable output, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Hash of (model, prompt template, input), the cache key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default)]
    pub cached: bool,
    #[serde(default)]
    pub truncated: bool,
    pub latency_us: u64,
}

/// The referral rule and the moves in force, with the model and template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewPolicy {
    pub backend: String,
    pub model: String,
    pub template_sha256: String,
    pub band: [f64; 2],
    pub channels: Vec<Channel>,
    pub moves: ReviewMoves,
    pub timeout_ms: u64,
}

/// Where a verdict moves a decision, by the configured moves; the second value
/// names the move (`ReviewRecord::outcome`).
pub fn apply_verdict(
    before: Status,
    injection: bool,
    confidence: f64,
    moves: &ReviewMoves,
) -> (Status, &'static str) {
    let may = |m: Move| m.allowed && confidence >= m.min_confidence;
    let after = if injection {
        if may(moves.escalate) {
            Status::Block
        } else if may(moves.hold) && before == Status::Allow {
            Status::Review
        } else {
            before
        }
    } else if may(moves.deescalate) {
        Status::Allow
    } else {
        before
    };
    let name = match after.cmp(&before) {
        std::cmp::Ordering::Equal => "unchanged",
        std::cmp::Ordering::Less => "de-escalated",
        std::cmp::Ordering::Greater if after == Status::Block => "escalated",
        std::cmp::Ordering::Greater => "held",
    };
    (after, name)
}

/// A review that produced no verdict: the item is held (never allowed); a BLOCK
/// stays a BLOCK.
pub fn on_error(before: Status) -> Status {
    before.max(Status::Review)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    fn moves(esc: bool, hold: bool, de: bool) -> ReviewMoves {
        let m = |allowed| Move {
            allowed,
            min_confidence: 0.7,
        };
        ReviewMoves {
            escalate: m(esc),
            hold: m(hold),
            deescalate: m(de),
        }
    }

    #[test]
    fn every_move_is_applied_exactly_as_configured() {
        // (before, injection, confidence, esc, hold, de) -> after
        let cases = [
            (Review, true, 0.9, true, true, true, Block, "escalated"),
            (Review, true, 0.6, true, true, true, Review, "unchanged"),
            (Review, true, 0.9, false, true, true, Review, "unchanged"),
            (Allow, true, 0.9, false, true, false, Review, "held"),
            (Allow, true, 0.9, false, false, false, Allow, "unchanged"),
            (Allow, true, 0.9, true, true, false, Block, "escalated"),
            (Review, false, 0.9, true, true, true, Allow, "de-escalated"),
            (Block, false, 0.9, true, true, true, Allow, "de-escalated"),
            (Review, false, 0.69, true, true, true, Review, "unchanged"),
            (Review, false, 0.9, true, true, false, Review, "unchanged"),
            (Block, true, 0.9, true, true, true, Block, "unchanged"),
            (Allow, false, 0.9, true, true, true, Allow, "unchanged"),
        ];
        for (before, inj, conf, esc, hold, de, want, name) in cases {
            let got = apply_verdict(before, inj, conf, &moves(esc, hold, de));
            assert_eq!(
                got,
                (want, name),
                "{before:?} inj={inj} conf={conf} {esc} {hold} {de}"
            );
        }
    }

    #[test]
    fn an_error_holds_and_never_allows() {
        assert_eq!(on_error(Allow), Review);
        assert_eq!(on_error(Review), Review);
        assert_eq!(on_error(Block), Block);
    }

    #[test]
    fn endpoints_stay_on_this_machine_unless_allowed() {
        let mut c = ReviewConfig {
            enabled: true,
            backend: ReviewBackend::Ollama,
            model: Some("llama3".into()),
            ..ReviewConfig::default()
        };
        for ok in [
            "http://127.0.0.1:11434",
            "http://localhost:8080/v1",
            "http://[::1]:1/",
        ] {
            c.url = Some(ok.into());
            c.validate().unwrap();
        }
        for remote in [
            "https://api.example.com/v1",
            "http://10.0.0.5:11434",
            "http://localhost.evil.com/",
        ] {
            c.url = Some(remote.into());
            assert!(
                c.validate()
                    .unwrap_err()
                    .to_string()
                    .contains("allow_remote"),
                "{remote}"
            );
        }
        c.allow_remote = true;
        c.validate().unwrap();
        c.url = Some("ftp://x".into());
        assert!(c.validate().is_err());
        c.url = None;
        assert!(c.validate().is_err());
    }

    #[test]
    fn bad_bands_and_confidences_are_errors() {
        let mut c = ReviewConfig {
            band: Some([0.6, 0.4]),
            ..ReviewConfig::default()
        };
        assert!(c.validate().is_err());
        c.band = Some([0.4, 0.6]);
        c.validate().unwrap();
        c.moves.deescalate.min_confidence = 1.5;
        assert!(c.validate().is_err());
    }
}

//! The gateway's Prometheus metrics: what an operator watches, counted where the
//! data already passes one point. Every decision goes through
//! [`crate::audit::AuditLog::append`] before it is forwarded, so decisions, the
//! stages that flagged them and the audit log's write time are observed there;
//! every client request goes through `Session::call`, so request durations by
//! method are observed there. Upstream health and the review queue's depth are
//! read when the endpoint is scraped.
//!
//! Served in the OpenMetrics text format by `serve::bind_metrics` on `[metrics]
//! listen`. Counted only when that is set (a few label strings and atomic adds
//! per decision); otherwise the gateway holds no `Metrics` at all.

use portcullis_core::DecisionRecord;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Duration;

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    channel: String,
    status: String,
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

/// Seconds from 50 µs to about 50 s, doubling: an inspection of a short text to
/// a slow upstream call.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_05, 2.0, 21)
}

fn histogram() -> Histogram {
    Histogram::new(latency_buckets())
}

/// One batch of records as the metrics count it.
#[derive(Debug)]
pub struct ObservedBatch(Vec<ObservedRecord>);

#[derive(Debug)]
struct ObservedRecord {
    decision: DecisionLabels,
    /// (stage, seconds, whether it reported a finding)
    stages: Vec<(StageLabels, f64, bool)>,
}

/// Every metric of one gateway process.
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    stage_flags: Family<StageLabels, Counter>,
    stage_seconds: Family<StageLabels, Histogram, fn() -> Histogram>,
    requests: Family<RequestLabels, Histogram, fn() -> Histogram>,
    audit_write_seconds: Histogram,
    upstream_up: Family<ServerLabels, Gauge>,
    upstream_restarts: Family<ServerLabels, Gauge>,
    review_pending: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("portcullis");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decision records written, by channel, status (ALLOW, REVIEW, BLOCK) and action",
            decisions.clone(),
        );
        let stage_flags = Family::<StageLabels, Counter>::default();
        registry.register(
            "stage_flags",
            "Decision records in which a stage reported at least one finding (allowlisted ones not counted)",
            stage_flags.clone(),
        );
        let stage_seconds: Family<StageLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(histogram);
        registry.register(
            "stage_duration_seconds",
            "Time a stage took on one inspected item",
            stage_seconds.clone(),
        );
        let requests: Family<RequestLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(histogram);
        registry.register(
            "request_duration_seconds",
            "Time from a client request to the gateway's answer, by MCP method and outcome (ok, error)",
            requests.clone(),
        );
        let audit_write_seconds = histogram();
        registry.register(
            "audit_write_duration_seconds",
            "Time from a batch of records handed to the audit log until written (the wait before a decision is forwarded)",
            audit_write_seconds.clone(),
        );
        let upstream_up = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "upstream_up",
            "1 if the upstream's connection is open, 0 if it closed (read at scrape time)",
            upstream_up.clone(),
        );
        let upstream_restarts = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "upstream_restarts",
            "Restarts of a stdio upstream since the gateway started",
            upstream_restarts.clone(),
        );
        let review_pending = Gauge::default();
        registry.register(
            "review_pending",
            "Items waiting in the review queue (read at scrape time)",
            review_pending.clone(),
        );
        Metrics {
            registry,
            decisions,
            stage_flags,
            stage_seconds,
            requests,
            audit_write_seconds,
            upstream_up,
            upstream_restarts,
            review_pending,
        }
    }

    /// What [`Metrics::records_written`] counts of a batch, taken before the
    /// batch goes to the writer (which owns the records from then on).
    pub fn batch_of(records: &[DecisionRecord]) -> ObservedBatch {
        ObservedBatch(
            records
                .iter()
                .map(|r| ObservedRecord {
                    decision: DecisionLabels {
                        channel: r.channel.as_str().to_string(),
                        status: r.status.as_str().to_string(),
                        action: r.action.as_str().to_string(),
                    },
                    stages: r
                        .stages
                        .iter()
                        .map(|s| {
                            (
                                StageLabels {
                                    stage: s.name.clone(),
                                },
                                s.latency_us as f64 / 1e6,
                                s.findings.iter().any(|f| !f.allowlisted),
                            )
                        })
                        .collect(),
                })
                .collect(),
        )
    }

    /// Count a batch the audit writer acknowledged, and the time it took.
    pub fn records_written(&self, batch: ObservedBatch, write: Duration) {
        for r in batch.0 {
            self.decisions.get_or_create(&r.decision).inc();
            for (stage, secs, flagged) in r.stages {
                self.stage_seconds.get_or_create(&stage).observe(secs);
                if flagged {
                    self.stage_flags.get_or_create(&stage).inc();
                }
            }
        }
        self.audit_write_seconds.observe(write.as_secs_f64());
    }

    /// One client request answered (`ok`) or failed (`error`).
    pub fn observe_request(&self, method: &str, ok: bool, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                outcome: if ok { "ok" } else { "error" },
            })
            .observe(took.as_secs_f64());
    }

    /// An upstream's state as read at scrape time.
    pub fn set_upstream(&self, server: &str, up: bool, restarts: u32) {
        let l = ServerLabels {
            server: server.to_string(),
        };
        self.upstream_up.get_or_create(&l).set(i64::from(up));
        self.upstream_restarts
            .get_or_create(&l)
            .set(i64::from(restarts));
    }

    /// The review queue's depth as read at scrape time.
    pub fn set_review_pending(&self, n: usize) {
        self.review_pending
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Everything, in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portcullis_core::{Action, Channel, Status};

    fn record(channel: Channel, status: Status, action: Action) -> DecisionRecord {
        let mut r: DecisionRecord = serde_json::from_value(serde_json::json!({
            "id": "r1", "position": 0, "time": "t", "config_hash": "h",
            "channel": channel, "server": null, "tool": null, "path": null,
            "input_sha256": "x", "input_len": 0,
            "stages": [
                {"name": "rules", "score": 0.9, "label": "malicious", "latency_us": 120,
                 "findings": [{"rule": "r", "category": "c", "severity": "high", "view": "lower", "span": {"start": 0, "end": 1}, "excerpt": "x"}]},
                {"name": "lexical", "score": 0.1, "label": "benign", "latency_us": 80, "findings": []}
            ],
            "score": 0.9,
            "thresholds": {"review": 0.5, "block": 0.8},
            "status": status, "action": action, "reasons": [], "latency_us": 200
        }))
        .expect("a record");
        r.channel = channel;
        r
    }

    #[test]
    fn records_and_requests_are_counted_under_their_labels() {
        let m = Metrics::new();
        let batch = Metrics::batch_of(&[
            record(Channel::ToolResult, Status::Block, Action::Hold),
            record(Channel::ToolResult, Status::Block, Action::Hold),
            record(Channel::ToolArguments, Status::Allow, Action::Pass),
        ]);
        m.records_written(batch, Duration::from_micros(300));
        m.observe_request("tools/call", true, Duration::from_millis(2));
        m.set_upstream("git", false, 1);
        m.set_review_pending(4);
        let text = m.encode();
        assert!(
            text.contains(
                r#"portcullis_decisions_total{channel="tool_result",status="BLOCK",action="hold"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"portcullis_decisions_total{channel="tool_arguments",status="ALLOW",action="pass"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"portcullis_stage_flags_total{stage="rules"} 3"#),
            "{text}"
        );
        assert!(
            !text.contains(r#"portcullis_stage_flags_total{stage="lexical"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"portcullis_stage_duration_seconds_count{stage="lexical"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"portcullis_request_duration_seconds_count{method="tools/call",outcome="ok"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("portcullis_audit_write_duration_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains(r#"portcullis_upstream_up{server="git"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"portcullis_upstream_restarts{server="git"} 1"#),
            "{text}"
        );
        assert!(text.contains("portcullis_review_pending 4"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    }
}

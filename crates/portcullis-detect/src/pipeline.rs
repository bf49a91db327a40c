//! The one inspection function. Gateway, `scan`, `audit`, `eval` and `bench` call
//! [`Detector::inspect`] (or [`Detector::inspect_tool`], which walks a tool object
//! into items and inspects them as one decision).

use crate::extract;
use crate::guard::EgressGuard;
use crate::normalize::{normalize, TextKind};
use crate::policy;
use crate::rules::{RuleSet, Target};
use crate::DetectError;
use portcullis_core::{
    sha256_hex, Action, Channel, Config, DecisionRecord, Finding, Item, StageOutput, Status,
};
use serde_json::Value;
use std::time::Instant;

/// Stage names as they appear in records.
pub const STAGE_NORMALIZE: &str = "normalize";
pub const STAGE_RULES: &str = "rules";
pub const STAGE_EGRESS: &str = "egress";

/// Identity of the record to produce: its id and position in the stream.
#[derive(Debug, Clone)]
pub struct RecordMeta {
    pub id: String,
    pub position: u64,
}

/// A decision and, for tool results whose policy masks, the masked text to forward.
#[derive(Debug, Clone)]
pub struct Inspection {
    pub record: DecisionRecord,
    pub masked: Option<String>,
}

/// An immutable, shareable detector: configuration, compiled rules, egress guard.
#[derive(Debug)]
pub struct Detector {
    config: Config,
    rules: RuleSet,
    guard: EgressGuard,
    config_hash: String,
}

/// Findings of one stage over all items of a decision.
#[derive(Default)]
struct StageAcc {
    findings: Vec<Finding>,
    micros: u64,
    ran: bool,
}

impl Detector {
    pub fn new(config: Config, rules: RuleSet) -> Result<Detector, DetectError> {
        config.validate()?;
        let guard = EgressGuard::new(&config.egress)?;
        let config_hash = config.hash_with(rules.fingerprint());
        Ok(Detector {
            config,
            rules,
            guard,
            config_hash,
        })
    }

    /// The default configuration (balanced) with the embedded rules.
    pub fn with_defaults() -> Result<Detector, DetectError> {
        Detector::new(Config::default(), RuleSet::embedded()?)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn config_hash(&self) -> &str {
        &self.config_hash
    }

    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// Inspect one text item.
    pub fn inspect(&self, item: &Item, meta: RecordMeta) -> Inspection {
        let started = Instant::now();
        let sha = sha256_hex(item.text.as_bytes());
        self.decide(
            std::slice::from_ref(item),
            Vec::new(),
            Header {
                channel: item.channel,
                server: item.server.clone(),
                tool: item.tool.clone(),
                path: item.path.clone(),
                sha,
                len: item.text.len(),
            },
            meta,
            started,
        )
    }

    /// Inspect a whole MCP tool object as one `tool_definition` decision; every
    /// finding carries the JSON path of its field.
    pub fn inspect_tool(
        &self,
        tool: &Value,
        server: Option<&str>,
        meta: RecordMeta,
    ) -> Result<Inspection, DetectError> {
        let started = Instant::now();
        let extracted = extract::tool_items(tool, server)?;
        // serde_json's map is ordered by key, so this serialization is canonical.
        let canonical = tool.to_string();
        let header = Header {
            channel: Channel::ToolDefinition,
            server: server.map(str::to_string),
            tool: tool.get("name").and_then(Value::as_str).map(str::to_string),
            path: None,
            sha: sha256_hex(canonical.as_bytes()),
            len: canonical.len(),
        };
        Ok(self.decide(&extracted.items, extracted.findings, header, meta, started))
    }

    fn decide(
        &self,
        items: &[Item],
        structural: Vec<Finding>,
        h: Header,
        meta: RecordMeta,
        started: Instant,
    ) -> Inspection {
        let mut norm = StageAcc {
            findings: structural,
            ran: true,
            ..Default::default()
        };
        let mut rules = StageAcc {
            ran: true,
            ..Default::default()
        };
        let mut egress = StageAcc::default();
        let mut masked = None;
        for item in items {
            let (kind, target) = match (item.channel, item.is_key) {
                (_, true) => (TextKind::Identifier, Target::PropertyName),
                (Channel::ToolName, _) => (TextKind::Identifier, Target::ToolName),
                _ => (TextKind::Prose, Target::Text),
            };
            let t = Instant::now();
            let n = normalize(&item.text, kind, &self.config.normalize);
            norm.findings.extend(with_path(n.findings, item));
            norm.micros += micros(t);

            let t = Instant::now();
            let hits = self.rules.scan(&n.views, target);
            rules.findings.extend(with_path(
                self.rules.findings(&hits, &n.views, &item.text),
                item,
            ));
            rules.micros += micros(t);

            // The guard sees real tool results and real tool-call arguments only.
            if item.channel.is_egress_guarded() {
                let t = Instant::now();
                let mut found = self.guard.scan(&item.text);
                self.mark_allowlisted(&mut found, &h);
                let g = &self.config.egress;
                if item.channel == Channel::ToolResult && (g.mask_secrets || g.mask_pii) {
                    let m = EgressGuard::mask(&item.text, &found, g.mask_secrets, g.mask_pii);
                    if m != item.text {
                        masked = Some(m);
                    }
                }
                egress.findings.extend(with_path(found, item));
                egress.ran = true;
                egress.micros += micros(t);
            }
        }
        self.mark_allowlisted(&mut norm.findings, &h);
        self.mark_allowlisted(&mut rules.findings, &h);

        let egress_weight = if h.channel == Channel::ToolResult {
            self.config.egress.result_weight
        } else {
            1.0
        };
        let mut stages = Vec::new();
        let mut weighted = Vec::new();
        for (name, acc, weight) in [
            (STAGE_NORMALIZE, norm, 1.0),
            (STAGE_RULES, rules, 1.0),
            (STAGE_EGRESS, egress, egress_weight),
        ] {
            if !acc.ran {
                continue;
            }
            let score = policy::stage_score(&acc.findings, &self.config.severity_weights);
            weighted.push((weight, score));
            stages.push(StageOutput {
                name: name.into(),
                score,
                label: if policy::counted_rules(&acc.findings).is_empty() {
                    "clean"
                } else {
                    "flagged"
                }
                .into(),
                findings: acc.findings,
                latency_us: acc.micros,
            });
        }
        let score = policy::fuse(weighted);
        let thresholds = self.config.thresholds;
        let status = policy::decide(score, &thresholds);
        let action = match status {
            Status::Block => Action::Deny,
            Status::Review => Action::Hold,
            Status::Allow if masked.is_some() => Action::Mask,
            Status::Allow => Action::Pass,
        };
        let reasons = reasons(&stages, score, status, &thresholds, masked.is_some());
        Inspection {
            record: DecisionRecord {
                id: meta.id,
                position: meta.position,
                time: portcullis_core::now_rfc3339(),
                config_hash: self.config_hash.clone(),
                channel: h.channel,
                server: h.server,
                tool: h.tool,
                path: h.path,
                input_sha256: h.sha,
                input_len: h.len,
                stages,
                score,
                thresholds,
                status,
                action,
                reasons,
                latency_us: micros(started),
            },
            masked,
        }
    }
}

impl Detector {
    /// Flag findings that an allowlist entry covers for this server and tool.
    fn mark_allowlisted(&self, findings: &mut [Finding], h: &Header) {
        for f in findings {
            f.allowlisted = self
                .config
                .allow
                .iter()
                .any(|a| a.covers(h.server.as_deref(), h.tool.as_deref(), &f.rule));
        }
    }
}

struct Header {
    channel: Channel,
    server: Option<String>,
    tool: Option<String>,
    path: Option<String>,
    sha: String,
    len: usize,
}

fn micros(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Findings of a walked field carry its path.
fn with_path(mut findings: Vec<Finding>, item: &Item) -> Vec<Finding> {
    if let Some(p) = &item.path {
        for f in &mut findings {
            f.path.get_or_insert_with(|| p.clone());
        }
    }
    findings
}

/// Human-readable reasons: each counted rule (highest severity first), then the
/// comparison that decided.
fn reasons(
    stages: &[StageOutput],
    score: f64,
    status: Status,
    t: &portcullis_core::Thresholds,
    masked: bool,
) -> Vec<String> {
    let mut lines: Vec<(portcullis_core::Severity, String)> = Vec::new();
    for s in stages {
        for (rule, sev) in policy::counted_rules(&s.findings) {
            let Some(f) = s.findings.iter().find(|f| f.rule == rule && !f.allowlisted) else {
                continue;
            };
            let at = f
                .path
                .as_deref()
                .map(|p| format!(" at {p}"))
                .unwrap_or_default();
            lines.push((
                sev,
                format!(
                    "{}: {rule} [{}, {}] on view {}{at}: {:?}",
                    s.name,
                    sev.as_str(),
                    f.category,
                    f.view,
                    f.excerpt
                ),
            ));
        }
        let suppressed = s.findings.iter().filter(|f| f.allowlisted).count();
        if suppressed > 0 {
            lines.push((
                portcullis_core::Severity::Low,
                format!(
                    "{}: {suppressed} finding(s) suppressed by allowlist",
                    s.name
                ),
            ));
        }
    }
    lines.sort_by_key(|l| std::cmp::Reverse(l.0));
    let mut out: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
    out.push(match status {
        Status::Block => format!("fused score {score:.3} >= block threshold {:.3}", t.block),
        Status::Review => format!(
            "fused score {score:.3} >= review threshold {:.3} (< block {:.3})",
            t.review, t.block
        ),
        Status::Allow => format!("fused score {score:.3} < review threshold {:.3}", t.review),
    });
    if masked {
        out.push("secrets/PII in the tool result are masked before forwarding".into());
    }
    out
}

//! The one inspection function. Gateway, `scan`, `audit`, `eval` and `bench` call
//! [`Detector::inspect`] (or [`Detector::inspect_tool`], which walks a tool object
//! into items and inspects them as one decision).

use crate::extract;
use crate::normalize::{normalize, TextKind};
use crate::policy;
use crate::review::ReviewStage;
use crate::rules::{RuleSet, Target};
use crate::stages::{self, Stage, StageInput};
use crate::DetectError;
use portcullis_core::{
    sha256_hex, Action, Channel, Config, DecisionRecord, Finding, Floor, Item, Severity,
    StageOutput, Status, Thresholds,
};
use serde_json::Value;
use std::collections::hash_map::{Entry, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// Name of the normalization stage in records (hidden characters, decode caps,
/// malformed or oversized tool objects).
pub const STAGE_NORMALIZE: &str = "normalize";

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
    /// The masked text of the (last) item that had something masked.
    pub masked: Option<String>,
    /// Every masked item: (index into the inspected items, masked text).
    pub masks: Vec<(usize, String)>,
}

/// An immutable, shareable detector: configuration, compiled rules, stages.
#[derive(Debug)]
pub struct Detector {
    config: Config,
    rules: Arc<RuleSet>,
    stages: Vec<Box<dyn Stage>>,
    /// The LLM review, after fusion (when `review.enabled`).
    review: Option<ReviewStage>,
    /// Masks secrets and PII in every text of a record before it leaves
    /// ([`crate::redact::redact_record`]).
    redactor: crate::guard::EgressGuard,
    config_hash: String,
}

/// One stage's results over all items of a decision.
struct StageAcc {
    name: &'static str,
    weight: f64,
    findings: Vec<Finding>,
    /// Highest learned score over the items, if the stage gives scores.
    score: Option<f64>,
    /// Evidence of the item that gave the highest score.
    evidence: Option<portcullis_core::Evidence>,
    micros: u64,
    ran: bool,
}

impl StageAcc {
    fn new(name: &'static str, weight: f64) -> StageAcc {
        StageAcc {
            name,
            weight,
            findings: Vec::new(),
            score: None,
            evidence: None,
            micros: 0,
            ran: false,
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

impl Detector {
    pub fn new(config: Config, rules: RuleSet) -> Result<Detector, DetectError> {
        config.validate()?;
        let rules = Arc::new(rules);
        let stages = stages::registry(&config, rules.clone())?;
        let review = if config.review.enabled {
            Some(ReviewStage::new(&config)?)
        } else {
            None
        };
        let config_hash = config.hash_with(rules.fingerprint());
        let redactor = crate::guard::EgressGuard::new(&config.egress)?;
        Ok(Detector {
            config,
            rules,
            stages,
            review,
            redactor,
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

    /// The review stage, when enabled.
    pub fn review(&self) -> Option<&ReviewStage> {
        self.review.as_ref()
    }

    /// Names of the stages after normalization, in order.
    /// Whether a stage runs a model (the transformer or the LLM review): an
    /// inspection may then take tens of milliseconds.
    pub fn runs_a_model(&self) -> bool {
        self.review.is_some() || self.stages.iter().any(|s| s.runs_a_model())
    }

    pub fn stage_names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// Inspect one text item.
    pub fn inspect(&self, item: &Item, meta: RecordMeta) -> Inspection {
        let started = Instant::now();
        let header = Header {
            channel: item.channel,
            server: item.server.clone(),
            tool: item.tool.clone(),
            path: item.path.clone(),
            sha: sha256_hex(item.text.as_bytes()),
            len: item.text.len(),
        };
        self.decide(
            std::slice::from_ref(item),
            &extract::Quoted::new(),
            Vec::new(),
            header,
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
        // Keys sorted whatever order the server wrote them in (serde_json keeps
        // that order): the record's hash does not depend on it.
        let canonical = portcullis_core::canonical_json(tool);
        let header = Header {
            channel: Channel::ToolDefinition,
            server: server.map(str::to_string),
            tool: tool.get("name").and_then(Value::as_str).map(str::to_string),
            path: None,
            sha: sha256_hex(canonical.as_bytes()),
            len: canonical.len(),
        };
        Ok(self.decide(
            &extracted.items,
            &extracted.quoted,
            extracted.findings,
            header,
            meta,
            started,
        ))
    }

    /// Inspect the strings of one MCP message (a tool result's content blocks, a
    /// prompt's messages; see [`extract::value_items`]) as one decision on
    /// `channel`. `whole` is the canonical serialization of the message, hashed
    /// into the record; the record's `input_len` is the bytes inspected (the
    /// items' text, binary payloads aside: [`extract::Extracted::text_bytes`]).
    pub fn inspect_items(
        &self,
        channel: Channel,
        server: Option<&str>,
        tool: Option<&str>,
        extracted: &extract::Extracted,
        whole: &str,
        meta: RecordMeta,
    ) -> Inspection {
        let started = Instant::now();
        let header = Header {
            channel,
            server: server.map(str::to_string),
            tool: tool.map(str::to_string),
            path: None,
            sha: sha256_hex(whole.as_bytes()),
            // What was inspected: the items' text, not binary payloads.
            len: extracted.text_bytes(),
        };
        self.decide(
            &extracted.items,
            &extracted.quoted,
            extracted.findings.clone(),
            header,
            meta,
            started,
        )
    }

    /// The highest floor the deterministic findings of a decision's stages set, with
    /// the stage and finding that set it (docs/policy.md, "Floors").
    fn floor<'a>(
        &self,
        stages: &'a [StageOutput],
        channel: Channel,
    ) -> Option<(Floor, &'a str, &'a Finding)> {
        let mut best: Option<(Floor, &str, &Finding)> = None;
        for s in stages.iter().filter(|s| self.sets_floors(&s.name, channel)) {
            if let Some((fl, f)) = policy::floor(&s.findings, &self.config.floors, channel) {
                if best.is_none_or(|(b, _, _)| fl > b) {
                    best = Some((fl, s.name.as_str(), f));
                }
            }
        }
        best
    }

    /// The status a record's deterministic findings set on their own, whatever the
    /// thresholds (what `calibrate` cannot move).
    pub fn floor_status(&self, record: &DecisionRecord) -> Status {
        self.floor(&record.stages, record.channel)
            .map_or(Status::Allow, |(fl, _, _)| fl.status())
    }

    /// Whether the stage of this name sets floors on `channel` (normalize does).
    fn sets_floors(&self, stage: &str, channel: Channel) -> bool {
        self.stages
            .iter()
            .find(|s| s.name() == stage)
            .is_none_or(|s| s.sets_floors(channel))
    }

    fn allowlisted(&self, h: &Header, rule: &str) -> bool {
        self.config
            .allow
            .iter()
            .any(|a| a.covers(h.server.as_deref(), h.tool.as_deref(), rule))
    }

    fn decide(
        &self,
        items: &[Item],
        quoted: &extract::Quoted,
        structural: Vec<Finding>,
        h: Header,
        meta: RecordMeta,
        started: Instant,
    ) -> Inspection {
        let allowlisted = |rule: &str| self.allowlisted(&h, rule);
        let mut norm = StageAcc::new(STAGE_NORMALIZE, 1.0);
        norm.ran = true;
        norm.findings = structural;
        let mut accs: Vec<StageAcc> = self
            .stages
            .iter()
            .map(|s| StageAcc::new(s.name(), s.weight(&self.config, h.channel)))
            .collect();
        let masks = self.run_stages(items, quoted, &allowlisted, &mut norm, &mut accs);

        let thresholds = self.config.thresholds_for(h.channel);
        let (stage_outputs, weighted) = self.stage_outputs(norm, accs, &thresholds, &allowlisted);
        let masked = masks.last().map(|(_, m)| m.clone());
        let score = policy::fuse(weighted);
        let by_score = policy::decide(score, &thresholds);
        let floor = self
            .floor(&stage_outputs, h.channel)
            .map(|(fl, stage, f)| FloorReason {
                status: fl.status(),
                line: floor_line(stage, f, fl),
            });
        let floor_status = floor.as_ref().map_or(Status::Allow, |f| f.status);
        let mut status = by_score.max(floor_status);
        let reviewed = self
            .review
            .as_ref()
            .map(|r| r.apply(h.channel, score, status, || review_text(items)));
        let mut refused = None;
        if let Some(r) = &reviewed {
            // A review moves a decision only above what a deterministic finding set.
            if r.status < floor_status {
                refused = Some(format!(
                    "review: the move to {} is refused: it is below the floor {} set by a \
                     deterministic finding",
                    r.status.as_str(),
                    floor_status.as_str()
                ));
            }
            status = r.status.max(floor_status);
        }
        let action = match status {
            Status::Block => Action::Deny,
            Status::Review => Action::Hold,
            Status::Allow if masked.is_some() => Action::Mask,
            Status::Allow => Action::Pass,
        };
        let mut reasons = reasons(
            &stage_outputs,
            score,
            by_score,
            floor.as_ref(),
            &thresholds,
            h.channel,
            masked.is_some(),
        );
        reasons.extend(quoted_reason(quoted, items));
        let review = reviewed.map(|r| {
            reasons.extend(r.reason);
            reasons.extend(refused);
            r.record
        });
        let mut record = DecisionRecord {
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
            stages: stage_outputs,
            score,
            thresholds,
            status,
            action,
            reasons,
            latency_us: micros(started),
            review,
        };
        // Secrets never reach a record, whichever stage quoted them.
        crate::redact::redact_record(&mut record, &self.redactor);
        Inspection {
            record,
            masked,
            masks,
        }
    }

    /// Every item through normalization and every registered stage that applies
    /// to it, into the stages' accumulators; the masked texts, by item.
    ///
    /// An item whose text an earlier item of the same message already carries
    /// (a tool result's `structuredContent` repeats its text content, as the
    /// specification asks for compatibility) is judged once: what the stages
    /// made of the first is recorded again under the second's path, exactly as
    /// judging it again would have (the stages read an item's text, channel and
    /// key-ness only, and the message's server and tool are the same for all; a
    /// stage whose answer varies from run to run, such as an embedding model's
    /// error, gives both copies its first answer).
    fn run_stages(
        &self,
        items: &[Item],
        quoted: &extract::Quoted,
        allowlisted: &dyn Fn(&str) -> bool,
        norm: &mut StageAcc,
        accs: &mut [StageAcc],
    ) -> Vec<(usize, String)> {
        let mut masks = Vec::new();
        // Which long texts come again, and where each first came: found with a
        // map before anything is judged, so only a text that does come again has
        // its judgement kept (SipHash: the texts are the server's, and it must not
        // choose collisions).
        let mut first: HashMap<(Channel, bool, &str), usize> = HashMap::new();
        let mut copy_of: Vec<Option<usize>> = vec![None; items.len()];
        let mut again: Vec<bool> = vec![false; items.len()];
        for (index, item) in items.iter().enumerate() {
            if item.text.len() < SHARED_MIN_BYTES || quoted.contains_key(&index) {
                continue;
            }
            match first.entry((item.channel, item.is_key, item.text.as_str())) {
                Entry::Occupied(seen) => {
                    copy_of[index] = Some(*seen.get());
                    again[*seen.get()] = true;
                }
                Entry::Vacant(new) => {
                    new.insert(index);
                }
            }
        }
        let mut kept: HashMap<usize, Judged> = HashMap::new();
        for (index, item) in items.iter().enumerate() {
            let judgement = match copy_of[index].and_then(|f| kept.get(&f)) {
                Some(earlier) => earlier.again(),
                None => self.judge(index, item, quoted, allowlisted),
            };
            if again[index] {
                kept.insert(index, judgement.again());
            }
            norm.findings.extend(with_path(judgement.normalize, item));
            norm.micros += judgement.normalize_micros;
            for (run, acc) in judgement.stages.into_iter().zip(accs.iter_mut()) {
                let Some((result, micros)) = run else {
                    continue;
                };
                acc.findings.extend(with_path(result.findings, item));
                // A structure's learned score is its most suspicious field's.
                if let Some(s) = result.score {
                    if acc.score.is_none_or(|m| s > m) {
                        acc.evidence = result.evidence.map(|mut e| {
                            e.path = e.path.or_else(|| item.path.clone());
                            e
                        });
                    }
                    acc.score = Some(acc.score.map_or(s, |m: f64| m.max(s)));
                }
                if let Some(m) = result.masked {
                    masks.push((index, m));
                }
                acc.ran = true;
                acc.micros += micros;
            }
        }
        masks
    }

    /// One item through normalization and every stage that applies to it: what
    /// each made of it, not yet attributed to the item's path.
    fn judge(
        &self,
        index: usize,
        item: &Item,
        quoted: &extract::Quoted,
        allowlisted: &dyn Fn(&str) -> bool,
    ) -> Judged {
        let (kind, target) = kind_and_target(item.channel, item.is_key);
        let t = Instant::now();
        let mut normalized = normalize(&item.text, kind, &self.config.normalize);
        let found = std::mem::take(&mut normalized.findings);
        let normalize_micros = micros(t);
        let input = StageInput {
            item,
            normalized: &normalized,
            target,
            allowlisted,
        };
        // What the learned stages read: the text with the client's own words
        // that the server quotes blanked out (same length, so spans hold).
        let unquoted = quoted
            .get(&index)
            .and_then(|ranges| {
                let mut text = item.text.clone().into_bytes();
                let len = text.len();
                for r in ranges.iter().filter(|r| r.end <= len) {
                    text[r.clone()].fill(b' ');
                }
                // Marks cover whole matches, so this holds; if it did not, the
                // learned stages would read the whole text.
                String::from_utf8(text).ok()
            })
            .map(|text| {
                let normalized = normalize(&text, kind, &self.config.normalize);
                let item = Item {
                    text,
                    ..item.clone()
                };
                (item, normalized)
            });
        let learned_input = unquoted.as_ref().map(|(item, normalized)| StageInput {
            item,
            normalized,
            target,
            allowlisted,
        });
        // What the stages before this one made of the item, for a gated stage.
        let mut earlier_score = 0.0f64;
        let mut earlier_found = !found.is_empty();
        let mut stages = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            if !stage.applies(item)
                || stage
                    .gate()
                    .is_some_and(|g| !earlier_found && earlier_score < g)
            {
                stages.push(None);
                continue;
            }
            let t = Instant::now();
            let input = match &learned_input {
                Some(unquoted) if stage.learned() => unquoted,
                _ => &input,
            };
            let result = stage.run(input);
            if stage.opens_gate() {
                earlier_found |= !result.findings.is_empty();
                earlier_score = earlier_score.max(result.score.unwrap_or(0.0));
            }
            stages.push(Some((result, micros(t))));
        }
        Judged {
            normalize: found,
            normalize_micros,
            stages,
        }
    }

    /// Each stage that ran as its record output (findings marked allowlisted,
    /// its score, flagged or clean), and its (weight, score) for fusion.
    fn stage_outputs(
        &self,
        norm: StageAcc,
        accs: Vec<StageAcc>,
        thresholds: &Thresholds,
        allowlisted: &dyn Fn(&str) -> bool,
    ) -> (Vec<StageOutput>, Vec<(f64, f64)>) {
        let mut stage_outputs = Vec::new();
        let mut weighted = Vec::new();
        for mut acc in std::iter::once(norm).chain(accs) {
            if !acc.ran {
                continue;
            }
            for f in &mut acc.findings {
                f.allowlisted = allowlisted(&f.rule);
            }
            let score = acc.score.unwrap_or_else(|| {
                policy::stage_score(&acc.findings, &self.config.severity_weights)
            });
            weighted.push((acc.weight, score));
            let flagged = acc.score.map_or_else(
                || !policy::counted_rules(&acc.findings).is_empty(),
                |s| s >= thresholds.review,
            );
            stage_outputs.push(StageOutput {
                name: acc.name.into(),
                score,
                label: if flagged { "flagged" } else { "clean" }.into(),
                findings: acc.findings,
                latency_us: acc.micros,
                evidence: acc.evidence,
            });
        }
        (stage_outputs, weighted)
    }
}

/// How an item's text is normalized and which rules apply to it: identifiers
/// (tool names, property names) get the `words` view; property-name and tool-name
/// rules apply only to those.
pub fn kind_and_target(channel: Channel, is_key: bool) -> (TextKind, Target) {
    match (channel, is_key) {
        (_, true) => (TextKind::Identifier, Target::PropertyName),
        (Channel::ToolName, _) => (TextKind::Identifier, Target::ToolName),
        _ => (TextKind::Prose, Target::Text),
    }
}

/// What the reviewer reads: each item's text, a walked field's prefixed by its
/// JSON path (so a tool definition reads as `description: …`, `inputSchema…: …`).
fn review_text(items: &[Item]) -> String {
    items
        .iter()
        .map(|i| match &i.path {
            Some(p) => format!("{p}: {}", i.text),
            None => i.text.clone(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn micros(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// A text at least this long that a message carries twice is judged once (a
/// shorter one costs less to judge again than to look for).
const SHARED_MIN_BYTES: usize = 256;

/// What normalization and the stages made of one item's text: normalization's
/// findings, and per registered stage (in order) its result and time, `None`
/// where it did not apply or its gate stayed shut.
struct Judged {
    normalize: Vec<Finding>,
    normalize_micros: u64,
    stages: Vec<Option<(stages::StageResult, u64)>>,
}

impl Judged {
    /// The same judgement for another item with the same text: it takes no time.
    fn again(&self) -> Judged {
        Judged {
            normalize: self.normalize.clone(),
            normalize_micros: 0,
            stages: self
                .stages
                .iter()
                .map(|run| run.as_ref().map(|(result, _)| (result.clone(), 0)))
                .collect(),
        }
    }
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

/// The floor a deterministic finding set, for the reasons.
struct FloorReason {
    status: Status,
    line: String,
}

fn floor_line(stage: &str, f: &Finding, fl: Floor) -> String {
    let at = f
        .path
        .as_deref()
        .map(|p| format!(" at {p}"))
        .unwrap_or_default();
    format!(
        "floor: {stage}: {} [{}, {}]{at} sets at least {}",
        f.rule,
        f.severity.as_str(),
        f.category,
        fl.status().as_str()
    )
}

/// Human-readable reasons: each counted rule (highest severity first), the floor a
/// deterministic finding set, then the comparison of the fused score.
fn reasons(
    stages: &[StageOutput],
    score: f64,
    status: Status,
    floor: Option<&FloorReason>,
    t: &Thresholds,
    channel: Channel,
    masked: bool,
) -> Vec<String> {
    let mut lines: Vec<(Severity, String)> = Vec::new();
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
        if s.findings.is_empty() && s.score > 0.0 {
            // A learned stage speaks through its probability.
            let at = s.evidence.as_ref().map_or_else(String::new, |e| {
                let c = &e.deciding_chunk;
                let field = e
                    .path
                    .as_deref()
                    .map(|p| format!(" {p}"))
                    .unwrap_or_default();
                format!(" (field{field}, bytes {}..{})", c.span.start, c.span.end)
            });
            lines.push((
                Severity::Low,
                format!("{}: probability {:.3}{at}", s.name, s.score),
            ));
        }
        let suppressed = s.findings.iter().filter(|f| f.allowlisted).count();
        if suppressed > 0 {
            lines.push((
                Severity::Low,
                format!(
                    "{}: {suppressed} finding(s) suppressed by allowlist",
                    s.name
                ),
            ));
        }
    }
    lines.sort_by_key(|l| std::cmp::Reverse(l.0));
    let mut out: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
    if let Some(f) = floor {
        out.push(f.line.clone());
    }
    out.push(match status {
        Status::Block => format!(
            "fused score {score:.3} >= block threshold {:.3} ({channel})",
            t.block
        ),
        Status::Review => format!(
            "fused score {score:.3} >= review threshold {:.3} (< block {:.3}; {channel})",
            t.review, t.block
        ),
        Status::Allow => format!(
            "fused score {score:.3} < review threshold {:.3} ({channel})",
            t.review
        ),
    });
    if masked {
        out.push("secrets/PII in the tool result are masked before forwarding".into());
    }
    out
}

/// The reason that says which bytes the learned stages did not score because
/// they quote the client's own answers; `None` when nothing is quoted.
fn quoted_reason(quoted: &extract::Quoted, items: &[Item]) -> Option<String> {
    if quoted.is_empty() {
        return None;
    }
    let bytes: usize = quoted.values().flatten().map(|r| r.len()).sum();
    let fields: Vec<&str> = quoted
        .keys()
        .filter_map(|&i| items.get(i).and_then(|it| it.path.as_deref()))
        .collect();
    Some(format!(
        "quoted: {bytes} bytes of {} quote the client's own answers to this \
         server; the learned stages did not score them",
        if fields.is_empty() {
            "the text".to_string()
        } else {
            fields.join(", ")
        }
    ))
}

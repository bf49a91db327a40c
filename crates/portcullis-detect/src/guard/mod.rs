//! Egress guard: secrets, canary tokens, high-entropy strings and PII in real
//! tool results and real tool-call arguments (never in an echo of the input: the
//! caller only runs it on channels where `Channel::is_egress_guarded` holds).
//!
//! Everything is compiled once in [`EgressGuard::new`]: one [`RegexSet`] over all
//! format patterns (a single lazy-DFA pass tells which formats occur at all), one
//! [`Regex`] per format (run only when the set says it matched), one Aho-Corasick
//! automaton for the configured canaries, and a byte loop for high-entropy runs.
//! All regexes are of the `regex` crate, so every search is linear in the text.
//!
//! Rule ids (category, severity):
//!
//! | rule | category | severity |
//! |---|---|---|
//! | `egress.canary` | canary | critical |
//! | `egress.private_key` | secret | critical |
//! | `egress.anthropic_key`, `egress.openai_key`, `egress.aws_access_key_id`, `egress.aws_secret_access_key`, `egress.google_api_key`, `egress.github_token`, `egress.slack_token`, `egress.slack_webhook`, `egress.stripe_key`, `egress.jwt`, `egress.bearer_token`, `egress.url_password` | secret | high |
//! | `egress.high_entropy` | high_entropy | low |
//! | `egress.email`, `egress.phone`, `egress.payment_card` | pii | low |
//!
//! Decisions worth knowing:
//! - Stripe publishable keys (`pk_live_`, `pk_test_`) are public by design (they are
//!   embedded in every checkout page): they produce no finding, but they still claim
//!   their span so that the generic high-entropy check does not report them either.
//! - AWS documentation keys (ids ending in `EXAMPLE`, secrets ending in `EXAMPLEKEY`)
//!   are not reported (and, like publishable keys, not reported as high entropy):
//!   they appear in every AWS docs page a fetch tool returns.
//! - Emails at reserved documentation domains (RFC 2606/6761: `example.com|net|org`,
//!   `*.example`, `*.test`, `*.invalid`, `*.localhost`, `*.local`), retina asset names
//!   (`icon@2x.png`), URL userinfo (`https://user@host`) and the SSH user `git@` of git
//!   remotes are not PII and are not reported.
//! - Payment cards must be Luhn-valid AND carry a plausible network prefix/length
//!   (Visa, Mastercard, Amex, Diners, JCB, Discover/UnionPay): a Luhn check alone
//!   passes one random number in ten, e.g. 13-digit millisecond timestamps.
//! - Hex strings (git SHAs, checksums, UUIDs) are not special-cased: their entropy is
//!   at most log2(16) = 4.0 bits per char (4.09 with UUID dashes), below the default
//!   4.5 threshold, so they never fire; an operator who lowers `entropy_bits` under 4
//!   explicitly asks for them.
//! - `egress.url_password` (credentials in `scheme://user:password@host`) is an extra
//!   format beyond the brief: connection strings are the most common way a secret
//!   leaves through a tool call. Obvious placeholders (`password`, `****`, `${VAR}`)
//!   are not reported.
//! - A PEM private key without an `-----END` line (truncated output) is extended over
//!   the base64 body lines that follow its header, so that masking hides the body too.
//! - Overlaps: a finding is dropped when a finding of higher rank (or same rank and
//!   longer) contains its span; a high-entropy finding is dropped when it overlaps any
//!   specific finding. Partially overlapping specific findings are both kept (a canary
//!   inside a PEM block is reported as both); [`EgressGuard::mask`] merges them.
//! - Excerpts never contain the secret: secrets show at most a 4-character format
//!   prefix (`ghp_…[REDACTED 36 chars]`), PEM keys show their (public) header line,
//!   canaries show their 1-based index in the configuration, PII shows a masked form.
//! - [`EgressGuard::mask`] ignores allowlisted findings (the operator said the content
//!   is expected there) and findings of other categories.

use crate::DetectError;
use aho_corasick::{AhoCorasick, MatchKind};
use portcullis_core::{EgressConfig, Finding, Severity, Span};
use regex::{Regex, RegexSet};

/// Category of known secret formats.
pub const CATEGORY_SECRET: &str = "secret";
/// Category of configured canary tokens.
pub const CATEGORY_CANARY: &str = "canary";
/// Category of generic high-entropy tokens.
pub const CATEGORY_HIGH_ENTROPY: &str = "high_entropy";
/// Category of personal data (emails, phone numbers, payment cards).
pub const CATEGORY_PII: &str = "pii";
/// Rule id of canary findings.
pub const RULE_CANARY: &str = "egress.canary";
/// Rule id of high-entropy findings.
pub const RULE_HIGH_ENTROPY: &str = "egress.high_entropy";

const VIEW: &str = "original";
const MAX_EXCERPT_CHARS: usize = 120;

mod entropy;
mod excerpt;
#[cfg(test)]
mod format_table;
mod formats;
#[cfg(test)]
mod tests;
mod validate;

pub use entropy::shannon_entropy;
use entropy::*;
use excerpt::*;
use formats::*;
pub use validate::luhn_valid;
use validate::*;

/// All rule ids this guard can report, sorted (for documentation and allowlist checks).
pub fn rule_ids() -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = SPECS
        .iter()
        .filter(|s| s.kind != Kind::Public)
        .map(|s| s.rule)
        .chain([RULE_CANARY, RULE_HIGH_ENTROPY])
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The compiled egress guard. Cheap to share (`&self` only); clone if needed.
#[derive(Debug, Clone)]
pub struct EgressGuard {
    set: RegexSet,
    regexes: Vec<Regex>,
    pem_end: Regex,
    canaries: Option<AhoCorasick>,
    /// Automaton pattern id -> index in `EgressConfig::canaries`.
    canary_index: Vec<usize>,
    entropy_bits: f64,
    entropy_min_len: usize,
}

#[derive(Debug, Clone, Copy)]
enum What {
    Rule(usize),
    Pem {
        spec: usize,
        header_end: usize,
    },
    Canary(usize),
    Entropy(f64),
    /// A known non-secret (documentation example): no finding, but it claims its span.
    Claim,
}

#[derive(Debug, Clone, Copy)]
struct Cand {
    start: usize,
    end: usize,
    rank: u8,
    what: What,
}

impl Cand {
    fn is_entropy(&self) -> bool {
        matches!(self.what, What::Entropy(_))
    }
    fn len(&self) -> usize {
        self.end - self.start
    }
}

impl EgressGuard {
    pub fn new(cfg: &EgressConfig) -> Result<EgressGuard, DetectError> {
        if !(cfg.entropy_bits.is_finite() && cfg.entropy_bits > 0.0) {
            return Err(DetectError::Guard(format!(
                "egress.entropy_bits must be a positive number, got {}",
                cfg.entropy_bits
            )));
        }
        if cfg.entropy_min_len == 0 {
            return Err(DetectError::Guard(
                "egress.entropy_min_len must be at least 1".into(),
            ));
        }
        let set = RegexSet::new(SPECS.iter().map(|s| s.pattern))
            .map_err(|e| DetectError::Guard(format!("format patterns: {e}")))?;
        let regexes = SPECS
            .iter()
            .map(|s| {
                Regex::new(s.pattern).map_err(|e| DetectError::Guard(format!("{}: {e}", s.rule)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pem_end = Regex::new(PEM_END)
            .map_err(|e| DetectError::Guard(format!("egress.private_key end: {e}")))?;

        let mut patterns: Vec<&str> = Vec::new();
        let mut canary_index = Vec::new();
        for (i, c) in cfg.canaries.iter().enumerate() {
            // An empty pattern would match everywhere; duplicates add nothing.
            if c.is_empty() || patterns.contains(&c.as_str()) {
                continue;
            }
            patterns.push(c.as_str());
            canary_index.push(i);
        }
        let canaries = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&patterns)
                    .map_err(|e| DetectError::Guard(format!("canaries: {e}")))?,
            )
        };
        Ok(EgressGuard {
            set,
            regexes,
            pem_end,
            canaries,
            canary_index,
            entropy_bits: cfg.entropy_bits,
            entropy_min_len: cfg.entropy_min_len,
        })
    }

    /// All findings in `text`; `view` is always "original"; spans are byte ranges of `text`
    /// (on char boundaries); sorted by span start; overlapping findings of the same text
    /// region: keep the most specific (a known secret format wins over the generic
    /// high-entropy finding on the same span).
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut cands = Vec::new();
        let hits = self.set.matches(text);
        if hits.matched_any() {
            for i in hits.iter() {
                self.collect_rule(text, i, &mut cands);
            }
        }
        self.collect_canaries(text, &mut cands);
        self.collect_entropy(text, &mut cands);
        if cands.is_empty() {
            return Vec::new();
        }
        let dominated = resolve(&cands);
        let mut out: Vec<Finding> = cands
            .iter()
            .zip(dominated)
            .filter(|(_, d)| !d)
            .filter_map(|(c, _)| self.finding(text, c))
            .collect();
        out.sort_by(|a, b| {
            a.span
                .start
                .cmp(&b.span.start)
                .then(a.span.end.cmp(&b.span.end))
                .then_with(|| a.rule.cmp(&b.rule))
        });
        out
    }

    /// `text` with the spans of findings replaced by placeholders like
    /// `[REDACTED:github_token]`, `[REDACTED:email]`; secrets/canaries/high_entropy masked
    /// when `mask_secrets`, PII when `mask_pii`. Findings may be in any order and may
    /// overlap (overlapping spans become one placeholder, named after the most severe
    /// finding); spans out of range are clamped and widened to char boundaries, so the
    /// output is always valid. Allowlisted findings and other categories are left alone.
    pub fn mask(text: &str, findings: &[Finding], mask_secrets: bool, mask_pii: bool) -> String {
        let len = text.len();
        let mut spans: Vec<(usize, usize, &Finding)> = findings
            .iter()
            .filter(|f| !f.allowlisted)
            .filter(|f| match f.category.as_str() {
                CATEGORY_SECRET | CATEGORY_CANARY | CATEGORY_HIGH_ENTROPY => mask_secrets,
                CATEGORY_PII => mask_pii,
                _ => false,
            })
            .filter_map(|f| {
                let s = floor_boundary(text, f.span.start.min(len));
                let e = ceil_boundary(text, f.span.end.min(len));
                (s < e).then_some((s, e, f))
            })
            .collect();
        if spans.is_empty() {
            return text.to_string();
        }
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = String::with_capacity(len);
        let mut pos = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end, mut best) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < end {
                end = end.max(spans[i].1);
                if outranks(spans[i].2, best) {
                    best = spans[i].2;
                }
                i += 1;
            }
            out.push_str(text.get(pos..start).unwrap_or(""));
            out.push_str(&placeholder(best));
            pos = end;
        }
        out.push_str(text.get(pos..).unwrap_or(""));
        out
    }

    fn collect_rule(&self, text: &str, idx: usize, cands: &mut Vec<Cand>) {
        let (Some(spec), Some(re)) = (SPECS.get(idx), self.regexes.get(idx)) else {
            return;
        };
        if spec.check == Check::Pem {
            self.collect_pem(text, idx, re, cands);
            return;
        }
        let rule = |start: usize, end: usize| Cand {
            start,
            end,
            rank: spec.rank,
            what: What::Rule(idx),
        };
        if spec.edge == Edge::Numeric {
            // Bounded-length numeric patterns: a rejected match (a date, too many
            // digits) must not hide a valid one that starts inside it, so search again
            // from the next possible start (each char is visited a bounded number of
            // times: the patterns match at most ~40 chars).
            let mut pos = 0;
            while pos < text.len() {
                let Some(m) = re.find_at(text, pos) else {
                    break;
                };
                match accept_numeric(text, m.start(), m.end(), spec.check) {
                    Some(end) => {
                        cands.push(rule(m.start(), end));
                        pos = end;
                    }
                    None => pos = next_numeric_start(text, m.start()),
                }
            }
            return;
        }
        let mut push = |start: usize, end: usize| {
            if start >= end || !left_ok(text, start, spec.edge) || !right_ok(text, end, spec.edge) {
                return;
            }
            if is_documentation_example(spec.check, text.get(start..end).unwrap_or("")) {
                cands.push(Cand {
                    what: What::Claim,
                    ..rule(start, end)
                });
            } else if check_ok(text, start, end, spec.check) {
                cands.push(rule(start, end));
            }
        };
        if spec.group == 0 {
            for m in re.find_iter(text) {
                push(m.start(), m.end());
            }
        } else {
            for caps in re.captures_iter(text) {
                if let Some(m) = caps.get(spec.group) {
                    push(m.start(), m.end());
                }
            }
        }
    }

    /// Header through the first `-----END ... PRIVATE KEY-----` after it; without an
    /// END line, header plus the base64 body lines that follow it.
    fn collect_pem(&self, text: &str, idx: usize, re: &Regex, cands: &mut Vec<Cand>) {
        // (start, end) of every END line, sorted by start.
        let ends: Vec<(usize, usize)> = self
            .pem_end
            .find_iter(text)
            .map(|m| (m.start(), m.end()))
            .collect();
        let mut covered = 0;
        for m in re.find_iter(text) {
            if m.start() < covered {
                continue;
            }
            let k = ends.partition_point(|&(s, _)| s < m.end());
            let end = match ends.get(k) {
                Some(&(_, e)) => e,
                None => pem_body_end(text, m.end()),
            };
            covered = end;
            cands.push(Cand {
                start: m.start(),
                end,
                rank: SPECS[idx].rank,
                what: What::Pem {
                    spec: idx,
                    header_end: m.end(),
                },
            });
        }
    }

    fn collect_canaries(&self, text: &str, cands: &mut Vec<Cand>) {
        let Some(ac) = &self.canaries else {
            return;
        };
        for m in ac.find_iter(text) {
            let index = self
                .canary_index
                .get(m.pattern().as_usize())
                .copied()
                .unwrap_or(0);
            cands.push(Cand {
                start: m.start(),
                end: m.end(),
                rank: RANK_CANARY,
                what: What::Canary(index),
            });
        }
    }

    fn finding(&self, text: &str, c: &Cand) -> Option<Finding> {
        let matched = text.get(c.start..c.end)?;
        let (rule, category, severity, excerpt) = match c.what {
            What::Rule(idx) => {
                let spec = SPECS.get(idx)?;
                let category = match spec.kind {
                    Kind::Public => return None,
                    Kind::Secret => CATEGORY_SECRET,
                    Kind::Pii => CATEGORY_PII,
                };
                let excerpt = match spec.show {
                    Show::Prefix(n) => prefix_excerpt(matched, n),
                    Show::Email => email_excerpt(matched),
                    Show::Digits => digits_excerpt(matched),
                    // Pem candidates carry `What::Pem`; treat a stray one as opaque.
                    Show::Pem => prefix_excerpt(matched, 0),
                };
                (spec.rule, category, spec.severity, excerpt)
            }
            What::Pem { spec, header_end } => {
                let spec = SPECS.get(spec)?;
                let header = text.get(c.start..header_end.min(c.end)).unwrap_or("");
                let rest = text.get(header_end.min(c.end)..c.end).unwrap_or("");
                let excerpt = if rest.is_empty() {
                    header.to_string()
                } else {
                    format!("{header}…[REDACTED {} chars]", rest.chars().count())
                };
                (spec.rule, CATEGORY_SECRET, spec.severity, excerpt)
            }
            What::Claim => return None,
            What::Canary(i) => (
                RULE_CANARY,
                CATEGORY_CANARY,
                Severity::Critical,
                format!(
                    "[REDACTED canary #{}, {} chars]",
                    i + 1,
                    matched.chars().count()
                ),
            ),
            What::Entropy(bits) => (
                RULE_HIGH_ENTROPY,
                CATEGORY_HIGH_ENTROPY,
                Severity::Low,
                format!(
                    "[REDACTED {} chars, {bits:.2} bits/char]",
                    matched.chars().count()
                ),
            ),
        };
        Some(Finding {
            rule: rule.to_string(),
            category: category.to_string(),
            severity,
            view: VIEW.to_string(),
            span: Span {
                start: c.start,
                end: c.end,
            },
            excerpt: truncate_chars(&excerpt, MAX_EXCERPT_CHARS),
            path: None,
            allowlisted: false,
        })
    }
}

/// Which candidates are dominated by another one. Every overlapping pair is compared
/// once by a sweep over candidates sorted by start; the active set holds at most one
/// match per pattern (matches of one pattern never overlap), so this is O(n log n).
fn resolve(cands: &[Cand]) -> Vec<bool> {
    let mut dominated = vec![false; cands.len()];
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&x, &y| {
        cands[x]
            .start
            .cmp(&cands[y].start)
            .then(cands[y].end.cmp(&cands[x].end))
            .then(x.cmp(&y))
    });
    let mut active: Vec<usize> = Vec::new();
    for &i in &order {
        let c = &cands[i];
        active.retain(|&j| cands[j].end > c.start);
        for &j in &active {
            if dominates(&cands[j], j, c, i) {
                dominated[i] = true;
            }
            if dominates(c, i, &cands[j], j) {
                dominated[j] = true;
            }
        }
        active.push(i);
    }
    dominated
}

/// Whether `a` makes `b` redundant; the two are known to overlap.
fn dominates(a: &Cand, ai: usize, b: &Cand, bi: usize) -> bool {
    match (a.is_entropy(), b.is_entropy()) {
        (false, true) => return true,
        (true, _) => return false,
        (false, false) => {}
    }
    if !(a.start <= b.start && a.end >= b.end) {
        return false;
    }
    if a.rank != b.rank {
        return a.rank > b.rank;
    }
    if a.len() != b.len() {
        return a.len() > b.len();
    }
    ai < bi
}

fn outranks(a: &Finding, b: &Finding) -> bool {
    let len = |f: &Finding| f.span.end.saturating_sub(f.span.start);
    a.severity > b.severity || (a.severity == b.severity && len(a) > len(b))
}

fn placeholder(f: &Finding) -> String {
    let name = f.rule.strip_prefix("egress.").unwrap_or(&f.rule);
    let label: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        .take(64)
        .collect();
    if label.is_empty() {
        "[REDACTED]".to_string()
    } else {
        format!("[REDACTED:{label}]")
    }
}

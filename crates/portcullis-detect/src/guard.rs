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

// Specificity ranks: on overlapping spans the higher rank wins (see `dominates`).
const RANK_CANARY: u8 = 100;
const RANK_PEM: u8 = 90;
const RANK_ANTHROPIC: u8 = 85;
const RANK_FORMAT: u8 = 80;
const RANK_JWT: u8 = 70;
const RANK_CONTEXT: u8 = 60;
const RANK_BEARER: u8 = 50;
const RANK_PII: u8 = 40;
const RANK_PHONE: u8 = 30;
const RANK_ENTROPY: u8 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Secret,
    Pii,
    /// A known public format: reported by nobody, but it claims its span.
    Public,
}

/// What may not touch the span on either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    Free,
    /// `[A-Za-z0-9_-]`
    Token,
    /// letters, digits, `_`
    Word,
    /// `[A-Za-z0-9+/=]`
    Base64,
    /// letters, digits, `_`, and `.`/`-`/`/` glued to a digit (versions, dates, IPs)
    Numeric,
}

/// Validation of a regex match beyond the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Any,
    OpenAi,
    AwsKeyId,
    AwsSecret,
    Slack,
    Bearer,
    UrlPassword,
    Email,
    Phone,
    Card,
    Pem,
}

/// How the excerpt is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    /// At most this many leading chars (capped at 4), the rest redacted.
    Prefix(usize),
    Pem,
    Email,
    Digits,
}

#[derive(Debug)]
struct Spec {
    rule: &'static str,
    pattern: &'static str,
    /// Capture group giving the span (0 = the whole match).
    group: usize,
    kind: Kind,
    severity: Severity,
    rank: u8,
    edge: Edge,
    check: Check,
    show: Show,
}

const PEM_END: &str = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----";

const SPECS: &[Spec] = &[
    Spec {
        rule: "egress.private_key",
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::Critical,
        rank: RANK_PEM,
        edge: Edge::Free,
        check: Check::Pem,
        show: Show::Pem,
    },
    Spec {
        rule: "egress.anthropic_key",
        pattern: r"sk-ant-[A-Za-z0-9_\-]{20,}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_ANTHROPIC,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(3),
    },
    Spec {
        rule: "egress.openai_key",
        pattern: r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::OpenAi,
        show: Show::Prefix(3),
    },
    Spec {
        rule: "egress.aws_access_key_id",
        pattern: r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Word,
        check: Check::AwsKeyId,
        show: Show::Prefix(4),
    },
    Spec {
        rule: "egress.aws_secret_access_key",
        // The value of a `secret` / `secret_key` / `SecretAccessKey` /
        // `aws_secret_access_key` key (any case, any of `_-. ` between the words).
        pattern: r#"(?i-u:secret(?:[_\-. ]?access)?(?:[_\-. ]?key)?)[ \t\r\n"'`:=>]{1,8}([A-Za-z0-9/+]{40})"#,
        group: 1,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_CONTEXT,
        edge: Edge::Base64,
        check: Check::AwsSecret,
        show: Show::Prefix(0),
    },
    Spec {
        rule: "egress.google_api_key",
        pattern: r"AIza[0-9A-Za-z_\-]{35}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(4),
    },
    Spec {
        rule: "egress.github_token",
        pattern: r"gh[pousr]_[A-Za-z0-9]{36,}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(4),
    },
    Spec {
        rule: "egress.github_token",
        pattern: r"github_pat_[A-Za-z0-9_]{22,}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(4),
    },
    Spec {
        rule: "egress.slack_token",
        pattern: r"xox[baprs]-[A-Za-z0-9\-]{10,}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Slack,
        show: Show::Prefix(4),
    },
    Spec {
        rule: "egress.slack_webhook",
        pattern: r"(?:https?://)?hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(4),
    },
    Spec {
        rule: "egress.stripe_key",
        pattern: r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(3),
    },
    Spec {
        // Publishable keys are public: no finding, but no high-entropy finding either.
        rule: "egress.stripe_publishable_key",
        pattern: r"pk_(?:live|test)_[A-Za-z0-9]{16,}",
        group: 0,
        kind: Kind::Public,
        severity: Severity::Low,
        rank: RANK_FORMAT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(3),
    },
    Spec {
        rule: "egress.jwt",
        pattern: r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
        group: 0,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_JWT,
        edge: Edge::Token,
        check: Check::Any,
        show: Show::Prefix(3),
    },
    Spec {
        rule: "egress.bearer_token",
        pattern: r"(?i-u:\bbearer)[ \t]+([A-Za-z0-9._~+/\-]{16,}=*)",
        group: 1,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_BEARER,
        edge: Edge::Token,
        check: Check::Bearer,
        show: Show::Prefix(0),
    },
    Spec {
        rule: "egress.url_password",
        pattern: r#"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@"'<>]+:([^\s/@"'<>]+)@"#,
        group: 1,
        kind: Kind::Secret,
        severity: Severity::High,
        rank: RANK_CONTEXT,
        edge: Edge::Free,
        check: Check::UrlPassword,
        show: Show::Prefix(0),
    },
    Spec {
        rule: "egress.email",
        pattern: r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}",
        group: 0,
        kind: Kind::Pii,
        severity: Severity::Low,
        rank: RANK_PII,
        edge: Edge::Word,
        check: Check::Email,
        show: Show::Email,
    },
    Spec {
        // Ungrouped 13-19 digits.
        rule: "egress.payment_card",
        pattern: r"[0-9]{13,19}",
        group: 0,
        kind: Kind::Pii,
        severity: Severity::Low,
        rank: RANK_PII,
        edge: Edge::Numeric,
        check: Check::Card,
        show: Show::Digits,
    },
    Spec {
        // 4-4-4-4(-3) and 4-4-4-1..4 groups, or the Amex/Diners 4-6-4..5 layout.
        rule: "egress.payment_card",
        pattern: r"[0-9]{4}(?:[ \-][0-9]{4}){2}(?:[ \-][0-9]{1,4}){1,2}|[0-9]{4}[ \-][0-9]{6}[ \-][0-9]{4,5}",
        group: 0,
        kind: Kind::Pii,
        severity: Severity::Low,
        rank: RANK_PII,
        edge: Edge::Numeric,
        check: Check::Card,
        show: Show::Digits,
    },
    Spec {
        // E.164-style international numbers, with or without separators.
        rule: "egress.phone",
        pattern: r"\+[1-9][0-9 ().\-]{6,22}[0-9]",
        group: 0,
        kind: Kind::Pii,
        severity: Severity::Low,
        rank: RANK_PHONE,
        edge: Edge::Numeric,
        check: Check::Phone,
        show: Show::Digits,
    },
    Spec {
        // North American: (415) 555-2671, 415-555-2671, 415.555.2671, 1-800-555-2671.
        rule: "egress.phone",
        pattern: r"(?:1[ .\-])?(?:\([2-9][0-9]{2}\)[ .\-]?|[2-9][0-9]{2}[ .\-])[0-9]{3}[ .\-][0-9]{4}",
        group: 0,
        kind: Kind::Pii,
        severity: Severity::Low,
        rank: RANK_PHONE,
        edge: Edge::Numeric,
        check: Check::Phone,
        show: Show::Digits,
    },
    Spec {
        // European national format with a trunk 0 and separators: 06 12 34 56 78,
        // 020 7946 0958, 030 12345678, 0044 20 7946 0958.
        rule: "egress.phone",
        pattern: r"0[0-9]{1,4}(?:[ .\-][0-9]{2,8}){1,4}",
        group: 0,
        kind: Kind::Pii,
        severity: Severity::Low,
        rank: RANK_PHONE,
        edge: Edge::Numeric,
        check: Check::Phone,
        show: Show::Digits,
    },
];

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
                rank: RANK_PEM,
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

    /// Maximal runs of `[A-Za-z0-9+/=_-]` at least `entropy_min_len` long whose entropy
    /// reaches `entropy_bits`. The run alphabet is ASCII, so spans are char boundaries.
    fn collect_entropy(&self, text: &str, cands: &mut Vec<Cand>) {
        let b = text.as_bytes();
        if b.len() < self.entropy_min_len {
            return;
        }
        let mut i = 0;
        while i < b.len() {
            if !is_run_byte(b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && is_run_byte(b[i]) {
                i += 1;
            }
            if is_absolute_path(&b[start..i]) {
                // Each component on its own: a path's characters together look
                // random (a macOS temporary folder, `/var/folders/xy/8k2j.../T/...`,
                // is 4.7 bits per character), its components do not; a random
                // component long enough still counts.
                let mut from = start;
                for end in (start..=i).filter(|&j| j == i || b[j] == b'/') {
                    self.entropy_candidate(b, from, end, cands);
                    from = end + 1;
                }
            } else {
                self.entropy_candidate(b, start, i, cands);
            }
        }
    }

    fn entropy_candidate(&self, b: &[u8], start: usize, end: usize, cands: &mut Vec<Cand>) {
        if end.saturating_sub(start) < self.entropy_min_len {
            return;
        }
        let bits = byte_entropy(&b[start..end]);
        if bits >= self.entropy_bits && !self.is_encoded_data(&b[start..end]) {
            cands.push(Cand {
                start,
                end,
                rank: RANK_ENTROPY,
                what: What::Entropy(bits),
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

// ---------------------------------------------------------------------------
// Match validation

/// Chars that may not touch a span of this edge kind (ASCII only: CJK text glues
/// numbers and tokens to its words without spaces).
fn sticks(edge: Edge, c: char, right: bool) -> bool {
    match edge {
        Edge::Free => false,
        Edge::Token => c.is_ascii_alphanumeric() || c == '_' || c == '-',
        Edge::Word | Edge::Numeric => c.is_ascii_alphanumeric() || c == '_',
        // `=` is the usual separator before a value, and padding after one.
        Edge::Base64 => c.is_ascii_alphanumeric() || c == '+' || c == '/' || (right && c == '='),
    }
}

fn is_glue(c: char) -> bool {
    matches!(c, '.' | '-' | '/')
}

fn left_ok(text: &str, start: usize, edge: Edge) -> bool {
    let mut back = text.get(..start).unwrap_or("").chars().rev();
    let prev = back.next();
    if prev.is_some_and(|c| sticks(edge, c, false)) {
        return false;
    }
    // `1.2.3.415-555-2671`, `v10.0.0.1`: a separator glued to a digit.
    !(edge == Edge::Numeric
        && prev.is_some_and(is_glue)
        && back.next().is_some_and(|c| c.is_ascii_digit()))
}

fn right_ok(text: &str, end: usize, edge: Edge) -> bool {
    let mut fwd = text.get(end..).unwrap_or("").chars();
    let next = fwd.next();
    if next.is_some_and(|c| sticks(edge, c, true)) {
        return false;
    }
    !(edge == Edge::Numeric
        && next.is_some_and(is_glue)
        && fwd.next().is_some_and(|c| c.is_ascii_digit()))
}

/// A numeric match (phone, card) or the longest prefix of it that ends at a digit
/// group and passes the edge and format checks: `+44 20 7946 0958 5555` is a phone
/// number followed by another number, not an invalid 17-digit phone number.
fn accept_numeric(text: &str, start: usize, end: usize, check: Check) -> Option<usize> {
    if !left_ok(text, start, Edge::Numeric) {
        return None;
    }
    // A phone number does not start in the middle of a run of space-separated numbers
    // (`+44 20 7946 0958 5555 ...` holds no second phone number starting at `0958`).
    if check == Check::Phone {
        let mut back = text.get(..start).unwrap_or("").chars().rev();
        if back.next() == Some(' ') && back.next().is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let b = text.as_bytes();
    let mut e = end;
    loop {
        if right_ok(text, e, Edge::Numeric) && check_ok(text, start, e, check) {
            return Some(e);
        }
        let mut p = e.checked_sub(1)?;
        // Back to the end of the previous digit group (the match is ASCII).
        while p > start && (b[p].is_ascii_digit() || !b[p - 1].is_ascii_digit()) {
            p -= 1;
        }
        if p <= start {
            return None;
        }
        e = p;
    }
}

/// Where to search again after a rejected numeric match at `start`: the next
/// position whose previous char does not glue to a number.
fn next_numeric_start(text: &str, start: usize) -> usize {
    let mut prev_word = false;
    for (off, c) in text.get(start..).unwrap_or("").char_indices() {
        if off > 0 && !prev_word {
            return start + off;
        }
        prev_word = c.is_ascii_alphanumeric() || c == '_';
    }
    text.len()
}

fn check_ok(text: &str, start: usize, end: usize, check: Check) -> bool {
    let Some(s) = text.get(start..end) else {
        return false;
    };
    match check {
        Check::Any | Check::Pem => true,
        Check::OpenAi => {
            // Anthropic keys also start with `sk-`; they have their own rule. A generic
            // `sk-` prefix needs a random-looking body: digits and both letter cases.
            !s.starts_with("sk-ant-") && {
                let body = s.get(3..).unwrap_or("");
                has(body, |c| c.is_ascii_digit())
                    && has(body, |c| c.is_ascii_uppercase())
                    && has(body, |c| c.is_ascii_lowercase())
            }
        }
        Check::AwsKeyId => true,
        Check::AwsSecret => {
            has(s, |c| c.is_ascii_uppercase())
                && has(s, |c| c.is_ascii_lowercase())
                && has(s, |c| c.is_ascii_digit() || c == '/' || c == '+')
        }
        Check::Slack => has(s.get(5..).unwrap_or(""), |c| c.is_ascii_digit()),
        Check::Bearer => {
            // Real tokens have digits or mixed case; `YOUR_ACCESS_TOKEN_HERE` has neither.
            has(s, |c| c.is_ascii_digit())
                || (has(s, |c| c.is_ascii_uppercase()) && has(s, |c| c.is_ascii_lowercase()))
        }
        Check::UrlPassword => url_password_ok(s),
        Check::Email => email_ok(text, start, s),
        Check::Phone => phone_ok(s),
        Check::Card => card_ok(s),
    }
}

/// AWS documentation keys: in every AWS docs page a fetch tool returns. They claim
/// their span (no finding, and no high-entropy finding either).
fn is_documentation_example(check: Check, s: &str) -> bool {
    match check {
        Check::AwsKeyId => s.ends_with("EXAMPLE"),
        Check::AwsSecret => s.ends_with("EXAMPLEKEY"),
        _ => false,
    }
}

fn has(s: &str, f: impl Fn(char) -> bool) -> bool {
    s.chars().any(f)
}

fn url_password_ok(p: &str) -> bool {
    const PLACEHOLDERS: &[&str] = &[
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "your_password",
        "yourpassword",
        "your-password",
        "mypassword",
        "changeme",
    ];
    if p.starts_with(['$', '{', '<', '%', '[']) {
        return false;
    }
    if p.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '•')) {
        return false;
    }
    // `https://host:8080@other` is a port (URL confusion), not a password.
    if p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    !PLACEHOLDERS.iter().any(|w| p.eq_ignore_ascii_case(w))
}

fn email_ok(text: &str, start: usize, s: &str) -> bool {
    const RESERVED_DOMAINS: &[&str] = &["example.com", "example.net", "example.org"];
    const RESERVED_TLDS: &[&str] = &["example", "test", "invalid", "localhost", "local"];
    const FILE_EXTS: &[&str] = &[
        "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "avif", "css", "js", "mjs",
        "map", "json",
    ];
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    if local == "git" {
        return false;
    }
    let domain = domain.to_ascii_lowercase();
    let tld = domain.rsplit('.').next().unwrap_or("");
    if RESERVED_TLDS.contains(&tld) || FILE_EXTS.contains(&tld) {
        return false;
    }
    if RESERVED_DOMAINS
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
    {
        return false;
    }
    // URL userinfo (`scheme://user@host`, `scheme://user:pass@host`): not an address.
    let before = text.get(..start).unwrap_or("");
    let window_start = before
        .char_indices()
        .rev()
        .take(256)
        .last()
        .map_or(before.len(), |(i, _)| i);
    let window = before.get(window_start..).unwrap_or("");
    let token = window
        .rsplit(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '(' | ')'))
        .next()
        .unwrap_or("");
    !token.contains("://")
}

fn phone_ok(s: &str) -> bool {
    let intl = s.starts_with('+');
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    let range = if intl {
        8..=15
    } else if s.starts_with("00") {
        11..=15
    } else {
        9..=12
    };
    if !range.contains(&digits) {
        return false;
    }
    let body = if intl { s.get(1..).unwrap_or("") } else { s };
    // Separator runs: at most 2 chars, at most one of ` .-`, at most one parenthesis.
    for run in body
        .split(|c: char| c.is_ascii_digit())
        .filter(|r| !r.is_empty())
    {
        let seps = run.chars().filter(|c| matches!(c, ' ' | '.' | '-')).count();
        let parens = run.chars().filter(|c| matches!(c, '(' | ')')).count();
        if run.len() > 2 || seps > 1 || parens > 1 {
            return false;
        }
    }
    let opens = s.matches('(').count();
    if opens != s.matches(')').count() || opens > 1 {
        return false;
    }
    let groups: Vec<usize> = body
        .split(|c: char| !c.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .map(str::len)
        .collect();
    if !intl && groups.len() >= 3 {
        // DD.MM.YYYY / YYYY-MM-DD followed by more digits (a time): a date, not a phone.
        let seps: Vec<char> = body.chars().filter(|c| !c.is_ascii_digit()).collect();
        let same_date_sep =
            seps.len() >= 2 && seps[0] == seps[1] && matches!(seps[0], '.' | '-' | '/');
        let (a, b, c) = (groups[0], groups[1], groups[2]);
        if same_date_sep && ((a <= 2 && b <= 2 && c == 4) || (a == 4 && b <= 2 && c <= 2)) {
            return false;
        }
    }
    // Dotted quads (IP addresses).
    if groups.len() == 4 && groups.iter().all(|&g| g <= 3) && !s.contains([' ', '-']) {
        return false;
    }
    true
}

fn card_ok(s: &str) -> bool {
    let d: Vec<u32> = s
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| u32::from(b - b'0'))
        .collect();
    let n = d.len();
    if !(13..=19).contains(&n) || !luhn_valid(s) {
        return false;
    }
    // One separator character throughout.
    let mut seps = s.chars().filter(|c| !c.is_ascii_digit());
    if let Some(first) = seps.next() {
        if seps.any(|c| c != first) {
            return false;
        }
    }
    let p2 = d[0] * 10 + d[1];
    let p4 = p2 * 100 + d[2] * 10 + d[3];
    match d[0] {
        4 => matches!(n, 13 | 16 | 19),
        5 => (51..=55).contains(&p2) && n == 16,
        2 => (2221..=2720).contains(&p4) && n == 16,
        3 => match p2 {
            34 | 37 => n == 15,
            35 => (16..=19).contains(&n),
            30 | 36 | 38 | 39 => (14..=19).contains(&n),
            _ => false,
        },
        6 => (16..=19).contains(&n),
        _ => false,
    }
}

/// After a PEM header with no END line: the span end covering the base64 lines that
/// follow (real or JSON-escaped newlines); a line that is not pure base64 stops it.
fn pem_body_end(text: &str, from: usize) -> usize {
    let b = text.as_bytes();
    let newline = |i: usize| -> usize {
        let rest = b.get(i..).unwrap_or(&[]);
        if rest.starts_with(b"\r\n") {
            2
        } else if rest.starts_with(b"\n") {
            1
        } else if rest.starts_with(b"\\r\\n") {
            4
        } else if rest.starts_with(b"\\n") {
            2
        } else {
            0
        }
    };
    let b64 = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=');
    let mut end = from;
    loop {
        let nl = newline(end);
        if nl == 0 {
            break;
        }
        let line_start = end + nl;
        let mut j = line_start;
        while j < b.len() && b64(b[j]) {
            j += 1;
        }
        if j == line_start || (j < b.len() && newline(j) == 0) {
            break;
        }
        end = j;
    }
    end
}

// ---------------------------------------------------------------------------
// Excerpts

fn prefix_excerpt(s: &str, reveal: usize) -> String {
    let total = s.chars().count();
    // Never reveal more than 4 chars, and always hide at least 4.
    let n = reveal.min(4).min(total.saturating_sub(4));
    let shown: String = s.chars().take(n).collect();
    if shown.is_empty() {
        format!("[REDACTED {total} chars]")
    } else {
        format!("{shown}…[REDACTED {} chars]", total - n)
    }
}

fn email_excerpt(s: &str) -> String {
    match s.rsplit_once('@') {
        Some((local, domain)) => {
            let first: String = local.chars().take(1).collect();
            format!("{first}***@{domain}")
        }
        None => prefix_excerpt(s, 0),
    }
}

/// Digits masked except the last four (and a `+CC` country code followed by a separator).
fn digits_excerpt(s: &str) -> String {
    let total = s.chars().filter(char::is_ascii_digit).count();
    let keep_from = total.saturating_sub(4);
    let cc_len = if s.starts_with('+') {
        let run = s.chars().skip(1).take_while(char::is_ascii_digit).count();
        let sep_follows = s.chars().nth(run + 1).is_some_and(|c| !c.is_ascii_digit());
        if run <= 3 && sep_follows {
            run
        } else {
            0
        }
    } else {
        0
    };
    let mut seen = 0;
    s.chars()
        .map(|c| {
            if c.is_ascii_digit() {
                seen += 1;
                if seen <= cc_len || seen > keep_from {
                    c
                } else {
                    '*'
                }
            } else {
                c
            }
        })
        .collect()
}

fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

// ---------------------------------------------------------------------------
// Helpers

/// Longest Base64 run of binary data that can still be a credential: past it, a run
/// is a file's bytes (server-pdf's `read_pdf_bytes` returns chunks of a PDF). The
/// long secret formats (PEM keys, JWTs) have patterns of their own.
const ENTROPY_MAX_BINARY: usize = 4096;

impl EgressGuard {
    /// Whether a high-entropy run is encoded data rather than a credential: Base64
    /// that decodes to text is that text, judged by what it says (it is scanned,
    /// and any finding in it keeps the run reported), and Base64 of binary data
    /// longer than [`ENTROPY_MAX_BINARY`] is a file. A random token decodes to
    /// neither: its bytes are not text, and it is short.
    fn is_encoded_data(&self, run: &[u8]) -> bool {
        use base64::Engine;
        let engines = [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        let Some(bytes) = engines.iter().find_map(|e| e.decode(run).ok()) else {
            return false;
        };
        match String::from_utf8(bytes) {
            Ok(text) if is_printable(&text) => self.scan(&text).is_empty(),
            _ => run.len() > ENTROPY_MAX_BINARY,
        }
    }
}

/// Text a person could read: no control characters but line breaks and tabs.
fn is_printable(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}

/// A run that reads as an absolute file path: it starts with `/`, has at least two
/// more, and has neither `+` nor `=` (Base64 has both; a Base64 secret that starts
/// with `/`, holds two more and neither of them is about one in a thousand, and even
/// then its long random components are still judged).
fn is_absolute_path(run: &[u8]) -> bool {
    run.first() == Some(&b'/')
        && run.iter().filter(|&&c| c == b'/').count() >= 3
        && !run.iter().any(|&c| c == b'+' || c == b'=')
}

fn is_run_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-')
}

fn byte_entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    entropy_of_counts(counts.iter().copied().filter(|&c| c > 0), bytes.len())
}

fn entropy_of_counts(counts: impl Iterator<Item = u32>, total: usize) -> f64 {
    let n = total as f64;
    counts
        .map(|c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum::<f64>()
        .max(0.0)
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Shannon entropy in bits per char.
pub fn shannon_entropy(s: &str) -> f64 {
    if s.is_ascii() {
        return byte_entropy(s.as_bytes());
    }
    let mut chars: Vec<char> = s.chars().collect();
    let total = chars.len();
    if total == 0 {
        return 0.0;
    }
    chars.sort_unstable();
    let mut counts = Vec::new();
    let mut run = 0u32;
    for (i, c) in chars.iter().enumerate() {
        run += 1;
        if chars.get(i + 1) != Some(c) {
            counts.push(run);
            run = 0;
        }
    }
    entropy_of_counts(counts.into_iter(), total)
}

/// Luhn checksum over the digits of s (ignoring spaces and dashes). Any other
/// character, or fewer than two digits, makes it invalid.
pub fn luhn_valid(s: &str) -> bool {
    let mut sum = 0u32;
    let mut count = 0usize;
    let mut double = false;
    for c in s.chars().rev() {
        match c {
            ' ' | '-' => continue,
            '0'..='9' => {
                let mut d = c as u32 - '0' as u32;
                if double {
                    d *= 2;
                    if d > 9 {
                        d -= 9;
                    }
                }
                sum = (sum + d) % 10;
                double = !double;
                count += 1;
            }
            _ => return false,
        }
    }
    count >= 2 && sum == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every fake secret below is assembled at run time from a seeded generator or
    // repeated characters, so that secret scanners do not flag the repository.

    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    fn fake_from(alphabet: &[u8], n: usize, seed: u64) -> String {
        let mut x = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                alphabet[((x >> 33) % alphabet.len() as u64) as usize] as char
            })
            .collect()
    }

    /// Random base62 with at least one digit, upper and lower case letter.
    fn fake(n: usize, seed: u64) -> String {
        format!("aB3{}", fake_from(ALNUM, n.saturating_sub(3), seed))
    }

    fn config(canaries: &[&str]) -> EgressConfig {
        EgressConfig {
            canaries: canaries.iter().map(|s| s.to_string()).collect(),
            mask_secrets: true,
            mask_pii: true,
            entropy_bits: 4.5,
            entropy_min_len: 32,
            result_weight: 0.4,
        }
    }

    fn guard() -> EgressGuard {
        EgressGuard::new(&config(&[])).unwrap()
    }

    fn rules(g: &EgressGuard, text: &str) -> Vec<String> {
        g.scan(text).into_iter().map(|f| f.rule).collect()
    }

    /// Exactly one finding, of `rule`, whose span is `secret` inside `text`; its excerpt
    /// does not leak the secret. Returns the finding.
    fn expect_one(g: &EgressGuard, text: &str, rule: &str, secret: &str) -> Finding {
        let found = g.scan(text);
        assert_eq!(found.len(), 1, "{rule} in {text:?}: {found:#?}");
        let f = found.into_iter().next().unwrap();
        assert_eq!(f.rule, rule, "{text:?}");
        assert_eq!(f.view, "original");
        assert!(!f.allowlisted);
        let start = text.find(secret).unwrap();
        assert_eq!(
            (f.span.start, f.span.end),
            (start, start + secret.len()),
            "span of {rule} in {text:?}"
        );
        match (f.category.as_str(), f.rule.as_str()) {
            // The public header line is shown; the body is checked by the PEM test.
            (_, "egress.private_key") => {}
            // PII shows a masked form (last four digits, domain).
            ("pii", _) => assert!(!f.excerpt.contains(secret), "{}", f.excerpt),
            _ => assert_no_leak(&f.excerpt, secret),
        }
        f
    }

    /// The excerpt contains no 6-char window of the secret (only a <= 4-char prefix).
    fn assert_no_leak(excerpt: &str, secret: &str) {
        let chars: Vec<char> = secret.chars().collect();
        for w in chars.windows(6) {
            let w: String = w.iter().collect();
            assert!(!excerpt.contains(&w), "excerpt {excerpt:?} leaks {w:?}");
        }
        assert!(excerpt.chars().count() <= MAX_EXCERPT_CHARS);
    }

    fn expect_none(g: &EgressGuard, text: &str) {
        let found = g.scan(text);
        assert!(found.is_empty(), "{text:?}: {found:#?}");
    }

    fn expect_not(g: &EgressGuard, text: &str, rule: &str) {
        assert!(
            !rules(g, text).iter().any(|r| r == rule),
            "{rule} in {text:?}"
        );
    }

    // -- entropy and Luhn ---------------------------------------------------

    #[test]
    fn entropy_of_known_strings() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(shannon_entropy(""), 0.0));
        assert!(close(shannon_entropy("aaaa"), 0.0));
        assert!(close(shannon_entropy("ab"), 1.0));
        assert!(close(shannon_entropy("aabb"), 1.0));
        assert!(close(shannon_entropy("abcd"), 2.0));
        assert!(close(shannon_entropy("0123456789abcdef"), 4.0));
        assert!(
            close(shannon_entropy("ééaa"), 1.0),
            "counts chars, not bytes"
        );
        assert!(close(
            shannon_entropy("日本語日本語日本語日本語"),
            3f64.log2()
        ));
        assert!(shannon_entropy(&fake_from(B64, 4096, 1)) > 5.9);
    }

    #[test]
    fn luhn_known_numbers() {
        assert!(luhn_valid("4242 4242 4242 4242"));
        assert!(luhn_valid("4242-4242-4242-4242"));
        assert!(luhn_valid("4242424242424242"));
        assert!(luhn_valid("79927398713"));
        assert!(luhn_valid("3782 822463 10005"));
        assert!(!luhn_valid("4242 4242 4242 4241"));
        assert!(!luhn_valid("79927398710"));
        assert!(!luhn_valid(""));
        assert!(!luhn_valid("0"));
        assert!(!luhn_valid("4242x4242424242424242"));
        assert!(!luhn_valid("４２４２"), "fullwidth digits are not digits");
    }

    // -- construction -------------------------------------------------------

    #[test]
    fn new_rejects_bad_settings() {
        let mut c = config(&[]);
        c.entropy_bits = f64::NAN;
        assert!(matches!(EgressGuard::new(&c), Err(DetectError::Guard(_))));
        c.entropy_bits = -1.0;
        assert!(EgressGuard::new(&c).is_err());
        let mut c = config(&[]);
        c.entropy_min_len = 0;
        assert!(EgressGuard::new(&c).is_err());
        // Empty canaries are ignored, not matched everywhere.
        let g = EgressGuard::new(&config(&["", "PCY-CANARY-0001"])).unwrap();
        expect_none(&g, "hello world");
    }

    #[test]
    fn rule_ids_are_namespaced_and_listed() {
        let ids = rule_ids();
        assert!(ids.iter().all(|r| r.starts_with("egress.")));
        for r in [
            "egress.canary",
            "egress.private_key",
            "egress.github_token",
            "egress.high_entropy",
            "egress.email",
            "egress.phone",
            "egress.payment_card",
        ] {
            assert!(ids.contains(&r), "{r}");
        }
        assert!(!ids.contains(&"egress.stripe_publishable_key"));
    }

    // -- secret formats -----------------------------------------------------

    #[test]
    fn openai_keys() {
        let g = guard();
        for prefix in ["sk-", "sk-proj-", "sk-svcacct-", "sk-admin-"] {
            let key = format!("{prefix}{}", fake(48, 11));
            let f = expect_one(
                &g,
                &format!("OPENAI_API_KEY={key}\n"),
                "egress.openai_key",
                &key,
            );
            assert_eq!(f.category, "secret");
            assert_eq!(f.severity, Severity::High);
            assert!(f.excerpt.starts_with("sk-…[REDACTED "), "{}", f.excerpt);
        }
        expect_none(
            &g,
            "see the task-list-for-the-sprint-planning-session-2026 page",
        );
        expect_none(&g, "sk-this-is-just-a-long-hyphenated-phrase-for-docs");
        expect_not(
            &g,
            "disk-Space-Usage-Report-1234567890abc",
            "egress.openai_key",
        );
        expect_none(&g, "sk-short1A");
    }

    #[test]
    fn anthropic_keys() {
        let g = guard();
        let key = format!("sk-ant-api03-{}AA", fake(93, 12));
        let f = expect_one(&g, &format!("key: \"{key}\""), "egress.anthropic_key", &key);
        assert_eq!(f.severity, Severity::High);
        let key = format!("sk-ant-{}", fake(40, 13));
        expect_one(&g, &format!("{key} "), "egress.anthropic_key", &key);
        expect_none(&g, "an sk-ant-colony of insects");
        expect_none(&g, "the task-ant-farm-simulation-with-many-words");
    }

    #[test]
    fn aws_access_key_ids() {
        let g = guard();
        for prefix in ["AKIA", "ASIA"] {
            let id = format!("{prefix}{}", fake_from(UPPER_ALNUM, 16, 14));
            let f = expect_one(
                &g,
                &format!("aws_access_key_id = {id}"),
                "egress.aws_access_key_id",
                &id,
            );
            assert!(f.excerpt.starts_with(prefix), "{}", f.excerpt);
        }
        expect_none(&g, "The AKIA prefix marks long-term AWS access keys.");
        let doc = format!("AKIA{}EXAMPLE", "IOSFODNN7");
        expect_none(&g, &format!("aws_access_key_id = {doc}"));
        // Embedded in a longer upper-case word: not a key id.
        expect_none(&g, &format!("XAKIA{}", "ABCDEFGHIJKLMNOP"));
        expect_none(&g, &format!("AKIA{}Q", "ABCDEFGHIJKLMNOP"));
    }

    #[test]
    fn aws_secret_access_keys() {
        let g = guard();
        let secret = format!("{}/{}+{}", fake(20, 15), fake(9, 16), fake(9, 17));
        assert_eq!(secret.len(), 40);
        let rule = "egress.aws_secret_access_key";
        expect_one(
            &g,
            &format!("aws_secret_access_key = {secret}\n"),
            rule,
            &secret,
        );
        expect_one(
            &g,
            &format!("AWS_SECRET_ACCESS_KEY={secret}"),
            rule,
            &secret,
        );
        expect_one(
            &g,
            &format!("{{\"SecretAccessKey\": \"{secret}\"}}"),
            rule,
            &secret,
        );
        let f = expect_one(&g, &format!("secret: {secret}"), rule, &secret);
        assert_eq!(f.excerpt, "[REDACTED 40 chars]");
        // Without context it is at most a generic high-entropy token.
        expect_not(&g, &format!("value {secret}"), rule);
        // A git SHA after `secret` is not an AWS secret (no upper case, 4 bits/char).
        expect_none(&g, "secret = 9fceb02d0ae598e95dc970b74767f19372d61af8");
        // 41 chars is not a 40-char key.
        expect_not(&g, &format!("secret = {secret}Z"), rule);
        let doc = format!("wJalrXUtnFEMI/K7MDENG/bPxRfiCY{}", "EXAMPLEKEY");
        expect_none(&g, &format!("aws_secret_access_key = {doc}"));
        expect_none(&g, "the secretary said: hello");
    }

    #[test]
    fn google_api_keys() {
        let g = guard();
        let key = format!("AIza{}", fake(35, 18));
        let f = expect_one(
            &g,
            &format!("https://x.googleapis.com/v1?key={key}&q=1"),
            "egress.google_api_key",
            &key,
        );
        assert!(f.excerpt.starts_with("AIza…"));
        expect_none(&g, &format!("AIza{}", fake(20, 19)));
        expect_none(&g, "AIzawesome library");
    }

    #[test]
    fn github_tokens_of_every_prefix() {
        let g = guard();
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            let tok = format!("{prefix}{}", fake(36, 20));
            let f = expect_one(&g, &format!("token {tok} end"), "egress.github_token", &tok);
            assert_eq!(f.excerpt, format!("{prefix}…[REDACTED 36 chars]"));
        }
        let pat = format!("github_pat_{}_{}", fake(22, 21), fake(59, 22));
        expect_one(&g, &format!("GH_TOKEN={pat}"), "egress.github_token", &pat);
        let tok = format!("ghp_{}", "A".repeat(36));
        expect_one(&g, &format!("\"{tok}\""), "egress.github_token", &tok);
        expect_none(&g, "ghp_short and github_pat_short");
        expect_none(&g, &format!("sghp_{}", "A".repeat(36)));
    }

    #[test]
    fn slack_tokens_and_webhooks() {
        let g = guard();
        for p in ["xoxb", "xoxp", "xoxa", "xoxr", "xoxs"] {
            let tok = format!("{p}-123456789012-1234567890123-{}", fake(24, 23));
            expect_one(&g, &format!("SLACK={tok}"), "egress.slack_token", &tok);
        }
        let hook = format!(
            "https://hooks.slack.com/services/T{}/B{}/{}",
            fake_from(UPPER_ALNUM, 8, 24),
            fake_from(UPPER_ALNUM, 10, 25),
            fake(24, 26)
        );
        let f = expect_one(
            &g,
            &format!("post to {hook} now"),
            "egress.slack_webhook",
            &hook,
        );
        assert!(f.excerpt.starts_with("http…"));
        expect_none(&g, "xoxb-style-tokens-are-used-by-bots");
        expect_none(&g, "see https://hooks.slack.com/services/ for details");
    }

    #[test]
    fn stripe_keys_and_publishable_keys() {
        let g = guard();
        for p in ["sk_live_", "sk_test_", "rk_live_"] {
            let key = format!("{p}{}", fake(24, 27));
            expect_one(&g, &format!("stripe: {key}"), "egress.stripe_key", &key);
        }
        // Publishable keys are public: no finding at all, not even high entropy.
        let pk = format!("pk_live_{}", fake(99, 28));
        expect_none(&g, &format!("Stripe('{pk}')"));
        expect_none(&g, "sk_live_short");
    }

    #[test]
    fn pem_private_keys() {
        let g = guard();
        let body = (0..6)
            .map(|i| fake_from(B64, 64, 30 + i))
            .collect::<Vec<_>>()
            .join("\n");
        let block =
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----");
        let f = expect_one(
            &g,
            &format!("id_rsa:\n{block}\ntrailing"),
            "egress.private_key",
            &block,
        );
        assert_eq!(f.severity, Severity::Critical);
        assert!(f
            .excerpt
            .starts_with("-----BEGIN RSA PRIVATE KEY-----…[REDACTED "));
        assert_no_leak(&f.excerpt, &body);

        for kind in ["", "EC ", "OPENSSH ", "ENCRYPTED "] {
            let block = format!(
                "-----BEGIN {kind}PRIVATE KEY-----\\n{body}\\n-----END {kind}PRIVATE KEY-----"
            );
            expect_one(
                &g,
                &format!("{{\"k\":\"{block}\"}}"),
                "egress.private_key",
                &block,
            );
        }

        // No END line (truncated output): header plus the base64 lines after it.
        let truncated = format!("-----BEGIN PRIVATE KEY-----\n{body}");
        let text = format!("{truncated}\n... output truncated");
        let f = expect_one(&g, &text, "egress.private_key", &truncated);
        assert_no_leak(&f.excerpt, &body);
        // Header alone.
        let f = expect_one(
            &g,
            "-----BEGIN PRIVATE KEY----- goes first",
            "egress.private_key",
            "-----BEGIN PRIVATE KEY-----",
        );
        assert_eq!(f.excerpt, "-----BEGIN PRIVATE KEY-----");

        expect_none(
            &g,
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        );
        expect_none(&g, "-----BEGIN CERTIFICATE-----");
    }

    #[test]
    fn jwts() {
        let g = guard();
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
            fake(40, 40),
            fake_from(ALNUM, 43, 41)
        );
        let f = expect_one(&g, &format!("token={jwt};"), "egress.jwt", &jwt);
        assert!(f.excerpt.starts_with("eyJ…"));
        expect_none(&g, "eyJhbGciOiJIUzI1NiJ9");
        expect_none(&g, "eyJ.a.b and eyJabc.def.ghi");
    }

    #[test]
    fn bearer_tokens() {
        let g = guard();
        let tok = fake(32, 42);
        let f = expect_one(
            &g,
            &format!("Authorization: Bearer {tok}\r\n"),
            "egress.bearer_token",
            &tok,
        );
        assert_eq!(f.excerpt, "[REDACTED 32 chars]");
        expect_one(
            &g,
            &format!("curl -H 'authorization: bearer {tok}'"),
            "egress.bearer_token",
            &tok,
        );
        // A JWT or a known format behind `Bearer` is reported as that format only.
        let jwt = format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", fake(20, 43), fake(43, 44));
        expect_one(
            &g,
            &format!("Authorization: Bearer {jwt}"),
            "egress.jwt",
            &jwt,
        );
        let gh = format!("ghp_{}", fake(36, 45));
        expect_one(
            &g,
            &format!("Authorization: Bearer {gh}"),
            "egress.github_token",
            &gh,
        );

        expect_none(&g, "bearer bonds are financial instruments");
        expect_none(&g, "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE");
        expect_none(&g, "Authorization: Bearer <token>");
        expect_none(&g, "the forbearer 0123456789abcdefXY");
    }

    #[test]
    fn url_passwords() {
        let g = guard();
        let pw = fake(16, 46);
        let f = expect_one(
            &g,
            &format!("DATABASE_URL=postgres://app:{pw}@db.internal:5432/prod"),
            "egress.url_password",
            &pw,
        );
        assert_eq!(f.excerpt, "[REDACTED 16 chars]");
        expect_none(&g, "postgres://user:password@localhost/db");
        expect_none(&g, "redis://:${REDIS_PASSWORD}@cache:6379");
        expect_none(&g, "https://example.com:8080/path?a=b");
    }

    #[test]
    fn canaries_are_exact_and_case_sensitive() {
        let canary = format!("PCY-CANARY-{}", "7f3a9c21");
        let g = EgressGuard::new(&config(&["other-canary-0001", &canary])).unwrap();
        let f = expect_one(&g, &format!("note: {canary}."), "egress.canary", &canary);
        assert_eq!(f.category, "canary");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(f.excerpt, "[REDACTED canary #2, 19 chars]");
        expect_none(&g, &canary.to_lowercase());
        expect_none(&g, "PCY-CANARY-7f3a9c2");
        // A canary shaped like an AWS key id is reported once, as the canary.
        let aws_like = format!("AKIA{}", fake_from(UPPER_ALNUM, 16, 47));
        let g = EgressGuard::new(&config(&[&aws_like])).unwrap();
        expect_one(&g, &format!("id={aws_like}"), "egress.canary", &aws_like);
        // Inside a long random token: the canary wins over high entropy.
        let c2 = fake(12, 48);
        let g = EgressGuard::new(&config(&[&c2])).unwrap();
        let text = format!("x {}{c2}{} y", fake(30, 49), fake(30, 50));
        assert_eq!(rules(&g, &text), ["egress.canary"]);
    }

    #[test]
    fn high_entropy_tokens() {
        let g = guard();
        let tok = fake_from(B64, 48, 51);
        let f = expect_one(&g, &format!("blob: {tok} end"), "egress.high_entropy", &tok);
        assert_eq!(f.category, "high_entropy");
        assert_eq!(f.severity, Severity::Low);
        assert!(
            f.excerpt.starts_with("[REDACTED 48 chars, "),
            "{}",
            f.excerpt
        );
        // Hex (git SHAs, sha256) and UUIDs stay under 4.5 bits per char.
        expect_none(&g, "commit 9fceb02d0ae598e95dc970b74767f19372d61af8");
        expect_none(
            &g,
            "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        );
        expect_none(&g, "id 123e4567-e89b-12d3-a456-426614174000");
        // Base64 of a short word, long words, paths.
        expect_none(&g, "aGVsbG8= and d29ybGQ=");
        expect_none(&g, "/usr/local/lib/python3/site-packages/requests/adapters");
        // Temporary folders: the whole path looks random, its components do not
        // (4.74 and 4.54 bits per character as one run).
        expect_none(&g, "/var/folders/xy/8k2j3h4g5f6d7s8a9/T/tmpabc123/file");
        expect_none(
            &g,
            "/tmp/portcullis-real-servers-7jkr5xgf/filesystem/data/README.md",
        );
        use base64::Engine as _;
        // Base64 of text is that text: a PDF's header (server-pdf's read_pdf_bytes)
        // passes, the Base64 of a text holding a secret is still reported.
        expect_none(
            &g,
            "JVBERi0xLjQKMSAwIG9iago8PCAvVHlwZSAvQ2F0YWxvZyAvUGFnZXMgMiAwIFIgPj4KZW5kb2Jq",
        );
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let leak = b64(&format!("token = ghp_{}", fake(36, 60)));
        expect_one(&g, &leak, "egress.high_entropy", &leak);
        // Base64 of binary data: a short run may be a key, a long one is a file.
        let bytes: Vec<u8> = (0..6000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let short = base64::engine::general_purpose::STANDARD.encode(&bytes[..48]);
        expect_one(&g, &short, "egress.high_entropy", &short);
        let file = base64::engine::general_purpose::STANDARD.encode(&bytes);
        expect_none(&g, &file);
        // A random component of a path is still one, and is what is reported.
        let part = fake_from(ALNUM, 48, 52);
        let path = format!("/srv/keys/{part}/current");
        expect_one(&g, &path, "egress.high_entropy", &part);
        expect_none(&g, "antidisestablishmentarianism_and_supercalifragilistic");
        expect_none(&g, &"ab".repeat(40));
        // Known secret formats win over high entropy on the same region.
        let key = format!("sk-proj-{}", fake(64, 52));
        assert_eq!(rules(&g, &key), ["egress.openai_key"]);
        // The configured threshold and length are honoured.
        let mut c = config(&[]);
        c.entropy_min_len = 64;
        expect_none(&EgressGuard::new(&c).unwrap(), &tok);
        let mut c = config(&[]);
        c.entropy_bits = 3.5;
        let sha = "9fceb02d0ae598e95dc970b74767f19372d61af8";
        assert_eq!(
            rules(&EgressGuard::new(&c).unwrap(), sha),
            ["egress.high_entropy"]
        );
    }

    // -- PII ----------------------------------------------------------------

    #[test]
    fn emails() {
        let g = guard();
        let f = expect_one(
            &g,
            "contact jane.doe@acme-corp.io today",
            "egress.email",
            "jane.doe@acme-corp.io",
        );
        assert_eq!(f.category, "pii");
        assert_eq!(f.severity, Severity::Low);
        assert_eq!(f.excerpt, "j***@acme-corp.io");
        expect_one(
            &g,
            "<mailto:bob+tag@mail.acme.co.uk>",
            "egress.email",
            "bob+tag@mail.acme.co.uk",
        );
        // Placeholders and look-alikes.
        expect_none(&g, "write to user@example.com or admin@mail.example.org");
        expect_none(&g, "ping root@host.localhost, a@b.test");
        expect_none(&g, "<img src=\"icon@2x.png\">");
        expect_none(&g, "npm i lodash@4.17.21 and @types/node@20");
        expect_none(&g, "git clone git@github.com:owner/repo.git");
        expect_none(&g, "https://deploy@registry.acme-corp.io/v2/");
        expect_none(&g, "thanks @jane for the review");
    }

    #[test]
    fn phone_numbers() {
        let g = guard();
        let f = expect_one(
            &g,
            "call +1 415 555 2671 now",
            "egress.phone",
            "+1 415 555 2671",
        );
        assert_eq!(f.excerpt, "+1 *** *** 2671");
        let f = expect_one(&g, "tel:+14155552671", "egress.phone", "+14155552671");
        assert_eq!(f.excerpt, "+*******2671");
        expect_one(
            &g,
            "phone: (415) 555-2671.",
            "egress.phone",
            "(415) 555-2671",
        );
        expect_one(&g, "415-555-2671", "egress.phone", "415-555-2671");
        expect_one(&g, "or 415.555.2671", "egress.phone", "415.555.2671");
        expect_one(&g, "+1 (415) 555-2671", "egress.phone", "+1 (415) 555-2671");
        expect_one(
            &g,
            "UK +44 20 7946 0958",
            "egress.phone",
            "+44 20 7946 0958",
        );
        expect_one(&g, "FR 06 12 34 56 78", "egress.phone", "06 12 34 56 78");
        expect_one(&g, "DE 030 12345678", "egress.phone", "030 12345678");
        expect_one(&g, "UK 020 7946 0958", "egress.phone", "020 7946 0958");

        for benign in [
            "released on 2026-11-29",
            "at 2026-11-29T10:15:30Z and 2026-11-29T10:15:30+01:00",
            "version 1.2.3.4 of 10.0.0.1 and 192.168.100.200",
            "order 123456 shipped",
            "due 01.02.2026 10:30 and 29/11/2026 08:00",
            "3+4=7 and x+1234",
            "v0.12.3 and 0.123456789",
            "build 20261129.101530",
        ] {
            expect_none(&g, benign);
        }
    }

    #[test]
    fn payment_cards() {
        let g = guard();
        let f = expect_one(
            &g,
            "card 4242 4242 4242 4242 exp 12/30",
            "egress.payment_card",
            "4242 4242 4242 4242",
        );
        assert_eq!(f.excerpt, "**** **** **** 4242");
        assert_eq!(f.category, "pii");
        expect_one(
            &g,
            "4242-4242-4242-4242",
            "egress.payment_card",
            "4242-4242-4242-4242",
        );
        let f = expect_one(
            &g,
            "pan=4242424242424242;",
            "egress.payment_card",
            "4242424242424242",
        );
        assert_eq!(f.excerpt, "************4242");
        expect_one(
            &g,
            "amex 3782 822463 10005",
            "egress.payment_card",
            "3782 822463 10005",
        );
        expect_one(
            &g,
            "mc 5555555555554444",
            "egress.payment_card",
            "5555555555554444",
        );

        expect_none(&g, "card 4242 4242 4242 4241");
        expect_none(&g, "order 4242424242424241");
        // Luhn-valid, but no card network starts with 1: an order number / timestamp.
        assert!(luhn_valid("1234567890123452"));
        expect_none(&g, "order 1234567890123452");
        expect_none(&g, "ts 1732838400000 ms");
        expect_none(&g, "4242 4242-4242 4242");
    }

    // -- overlaps, ordering, masking ------------------------------------------

    #[test]
    fn findings_are_sorted_and_deduplicated() {
        let g = guard();
        let gh = format!("ghp_{}", fake(36, 60));
        let aws = format!("{}/{}", fake(30, 61), fake(9, 62));
        let text = format!(
            "mail jane@acme-corp.io, key AWS_SECRET_ACCESS_KEY={aws}\ntoken {gh} card 4242424242424242"
        );
        let found = g.scan(&text);
        let names: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(
            names,
            [
                "egress.email",
                "egress.aws_secret_access_key",
                "egress.github_token",
                "egress.payment_card"
            ]
        );
        assert!(found.windows(2).all(|w| w[0].span.start <= w[1].span.start));
        for f in &found {
            assert!(text.is_char_boundary(f.span.start) && text.is_char_boundary(f.span.end));
            assert_eq!(f.view, "original");
        }
    }

    #[test]
    fn mask_round_trip() {
        let g = guard();
        let gh = format!("ghp_{}", fake(36, 70));
        let canary = format!("CANARY-{}", "c0ffee99");
        let g2 = EgressGuard::new(&config(&[&canary])).unwrap();
        let text = format!(
            "Ünïcode ✓ token={gh} by jane.doe@acme-corp.io card 4242 4242 4242 4242 {canary} 🎉"
        );
        let found = g2.scan(&text);
        assert_eq!(found.len(), 4, "{found:#?}");

        let masked = EgressGuard::mask(&text, &found, true, true);
        assert!(!masked.contains(&gh) && !masked.contains(&canary));
        assert!(!masked.contains("jane.doe") && !masked.contains("4242 4242"));
        for p in [
            "[REDACTED:github_token]",
            "[REDACTED:email]",
            "[REDACTED:payment_card]",
            "[REDACTED:canary]",
        ] {
            assert!(masked.contains(p), "{p} in {masked}");
        }
        assert!(masked.starts_with("Ünïcode ✓ token=") && masked.ends_with(" 🎉"));
        assert!(g.scan(&masked).is_empty(), "{masked}");

        // Secrets only / PII only / nothing.
        let s = EgressGuard::mask(&text, &found, true, false);
        assert!(!s.contains(&gh) && s.contains("jane.doe@acme-corp.io"));
        let p = EgressGuard::mask(&text, &found, false, true);
        assert!(p.contains(&gh) && !p.contains("jane.doe"));
        assert_eq!(EgressGuard::mask(&text, &found, false, false), text);
        assert_eq!(EgressGuard::mask(&text, &[], true, true), text);

        // Allowlisted findings are left alone.
        let mut allowed = found.clone();
        for f in &mut allowed {
            f.allowlisted = true;
        }
        assert_eq!(EgressGuard::mask(&text, &allowed, true, true), text);
    }

    #[test]
    fn mask_handles_overlaps_disorder_and_bad_spans() {
        let text = "abc ✓ secret-value-here and more ✓ tail";
        let mk = |rule: &str, cat: &str, sev: Severity, start: usize, end: usize| Finding {
            rule: rule.into(),
            category: cat.into(),
            severity: sev,
            view: "original".into(),
            span: Span { start, end },
            excerpt: String::new(),
            path: None,
            allowlisted: false,
        };
        let s = text.find("secret").unwrap();
        let e = s + "secret-value-here".len();
        let findings = vec![
            mk(
                "egress.high_entropy",
                "high_entropy",
                Severity::Low,
                s + 3,
                e + 4,
            ),
            mk("egress.github_token", "secret", Severity::High, s, e),
            mk("egress.email", "pii", Severity::Low, s + 2, s + 5),
            // Inside the multi-byte check mark: widened to the whole char.
            mk("egress.phone", "pii", Severity::Low, 5, 6),
            // Out of range and inverted spans.
            mk("egress.canary", "canary", Severity::Critical, 1000, 2000),
            mk("egress.canary", "canary", Severity::Critical, 9, 3),
            // Other categories are not masked.
            mk("io.ignore_previous", "injection", Severity::High, 0, 3),
        ];
        let masked = EgressGuard::mask(text, &findings, true, true);
        assert_eq!(
            masked,
            "abc [REDACTED:phone] [REDACTED:github_token] more ✓ tail"
        );
        let mut rev = findings.clone();
        rev.reverse();
        assert_eq!(EgressGuard::mask(text, &rev, true, true), masked);
        // A whole-text span and a span ending past the end.
        let all = [mk("egress.jwt", "secret", Severity::High, 0, usize::MAX)];
        assert_eq!(EgressGuard::mask(text, &all, true, true), "[REDACTED:jwt]");
        let odd = [mk("egress.we!rd rule", "secret", Severity::High, 0, 3)];
        assert!(EgressGuard::mask(text, &odd, true, true).starts_with("[REDACTED:werdrule] "));
    }

    #[test]
    fn never_panics_on_arbitrary_unicode() {
        let canary = format!("ÄÖÜ-canary-{}", "ß✓");
        let g = EgressGuard::new(&config(&[&canary])).unwrap();
        let gh = format!("ghp_{}", fake(36, 80));
        let text = format!(
            "é{gh}é 日本語+1 415 555 2671日本 ✓{canary}✓ 4242 4242 4242 4242\u{202e}x@acme-corp.io\u{200b}\
             -----BEGIN PRIVATE KEY-----\u{0}\n{}\n🎉 Bearer {} 𝐢",
            fake_from(B64, 64, 81),
            fake(40, 82)
        );
        // Every char-boundary substring starting at a few offsets, and every prefix.
        let bounds: Vec<usize> = (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .collect();
        for &a in bounds.iter().step_by(7) {
            for &b in bounds.iter().filter(|&&b| b >= a).step_by(5) {
                let sub = &text[a..b];
                let found = g.scan(sub);
                for f in &found {
                    assert!(f.span.start < f.span.end && f.span.end <= sub.len());
                    assert!(sub.is_char_boundary(f.span.start) && sub.is_char_boundary(f.span.end));
                }
                let _ = EgressGuard::mask(sub, &found, true, true);
            }
        }
        let found = g.scan(&text);
        let names: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
        for r in [
            "egress.canary",
            "egress.phone",
            "egress.payment_card",
            "egress.email",
            "egress.private_key",
            "egress.bearer_token",
        ] {
            assert!(names.contains(&r), "{r} in {names:?}");
        }
        // `éghp_…`: é is not an ASCII token char, so the token is still found.
        assert!(names.contains(&"egress.github_token"), "{names:?}");
        let masked = EgressGuard::mask(&text, &found, true, true);
        assert!(!masked.contains(&gh) && !masked.contains(&canary));
    }

    #[test]
    fn excerpts_never_contain_secrets() {
        let canary = format!("CANARY-{}", fake(16, 90));
        let g = EgressGuard::new(&config(&[&canary])).unwrap();
        let secrets = [
            format!("sk-proj-{}", fake(60, 91)),
            format!("sk-ant-api03-{}", fake(90, 92)),
            format!("AKIA{}", fake_from(UPPER_ALNUM, 16, 93)),
            format!("AIza{}", fake(35, 94)),
            format!("ghs_{}", fake(36, 95)),
            format!("github_pat_{}_{}", fake(22, 96), fake(59, 97)),
            format!("xoxp-1234-5678-{}", fake(30, 98)),
            format!(
                "hooks.slack.com/services/T{}/B{}/{}",
                fake(8, 99),
                fake(8, 100),
                fake(24, 101)
            ),
            format!("rk_live_{}", fake(30, 102)),
            format!(
                "eyJ{}.eyJ{}.{}",
                fake(20, 103),
                fake(30, 104),
                fake(43, 105)
            ),
            fake_from(B64, 50, 106),
            canary.clone(),
        ];
        for s in &secrets {
            let text = format!("value: {s} ");
            let found = g.scan(&text);
            assert_eq!(found.len(), 1, "{s}: {found:#?}");
            assert_no_leak(&found[0].excerpt, s);
            assert!(!EgressGuard::mask(&text, &found, true, false).contains(s.as_str()));
        }
        let bearer = fake(40, 107);
        let aws = format!("{}+{}", fake(20, 108), fake(19, 109));
        let pw = fake(20, 110);
        let text = format!(
            "Authorization: Bearer {bearer}\naws_secret_access_key={aws}\nmysql://root:{pw}@db/x"
        );
        let found = g.scan(&text);
        assert_eq!(found.len(), 3, "{found:#?}");
        for (f, s) in found.iter().zip([&bearer, &aws, &pw]) {
            assert_no_leak(&f.excerpt, s);
        }
        // PII excerpts keep only the masked form.
        let found = g.scan("x jonathan.smith@acme-corp.io +44 20 7946 0958 5555 5555 5555 4444");
        let ex: Vec<&str> = found.iter().map(|f| f.excerpt.as_str()).collect();
        assert_eq!(
            ex,
            [
                "j***@acme-corp.io",
                "+44 ** **** 0958",
                "**** **** **** 4444"
            ]
        );
    }

    #[test]
    fn benign_text_has_no_findings() {
        let g = guard();
        let text = "The quick brown fox jumps over the lazy dog. In 2026 we shipped \
            version 1.4.2 (commit 9fceb02d0ae598e95dc970b74767f19372d61af8) to 1,234 users; \
            see https://docs.acme-corp.io/guide/getting-started#install and run \
            `cargo test --workspace`. Meeting on 2026-11-29 at 10:30, room 4B. ";
        expect_none(&g, &text.repeat(4));
    }
}

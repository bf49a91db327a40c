//! The secret and PII formats the guard knows, as data: one [`Spec`] per format
//! (rule id, pattern, kind, severity, rank among overlapping matches, what may
//! touch its edges, the validation beyond the pattern, how its excerpt is shown).
//! A new format is one entry in [`SPECS`] (and its test in `tests.rs`).

use portcullis_core::Severity;

// Specificity ranks: on overlapping spans the higher rank wins (see `dominates`).
pub(super) const RANK_CANARY: u8 = 100;
pub(super) const RANK_PEM: u8 = 90;
pub(super) const RANK_ANTHROPIC: u8 = 85;
pub(super) const RANK_FORMAT: u8 = 80;
pub(super) const RANK_JWT: u8 = 70;
pub(super) const RANK_CONTEXT: u8 = 60;
pub(super) const RANK_BEARER: u8 = 50;
pub(super) const RANK_PII: u8 = 40;
pub(super) const RANK_PHONE: u8 = 30;
pub(super) const RANK_ENTROPY: u8 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Secret,
    Pii,
    /// A known public format: reported by nobody, but it claims its span.
    Public,
}

/// What may not touch the span on either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Edge {
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
pub(super) enum Check {
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
pub(super) enum Show {
    /// At most this many leading chars (capped at 4), the rest redacted.
    Prefix(usize),
    Pem,
    Email,
    Digits,
}

#[derive(Debug)]
pub(super) struct Spec {
    pub(super) rule: &'static str,
    pub(super) pattern: &'static str,
    /// Capture group giving the span (0 = the whole match).
    pub(super) group: usize,
    pub(super) kind: Kind,
    pub(super) severity: Severity,
    pub(super) rank: u8,
    pub(super) edge: Edge,
    pub(super) check: Check,
    pub(super) show: Show,
}

pub(super) const PEM_END: &str = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----";

pub(super) const SPECS: &[Spec] = &[
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

//! The types of the secret and PII formats the guard knows. The formats themselves
//! are data: `rules/egress/formats.toml`, one `[[format]]` per format (rule id,
//! pattern, kind, severity, rank among overlapping matches, what may touch its
//! edges, the validation beyond the pattern, how its excerpt is shown), checked by
//! `build.rs` and turned into [`SPECS`] at build time. A new format is one table
//! there (and its test in `tests.rs`).

use portcullis_core::Severity;

// Specificity ranks of the guard's own candidates; a format's rank in the data file
// lies between them. On overlapping spans the higher rank wins (see `dominates`).
pub(super) const RANK_CANARY: u8 = 100;
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

// `SPECS` (the formats) and, for tests, `NEGATIVES` (rule id, a text it must not fire on).
include!(concat!(env!("OUT_DIR"), "/egress_formats.rs"));

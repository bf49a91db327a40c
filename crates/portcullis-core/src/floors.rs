//! Floors: what a deterministic finding decides on its own (docs/policy.md, "Floors").
//!
//! A rule, hidden-character, decode-cap or egress finding is evidence a person can
//! read; its class and severity say what it means. So each counted finding of a
//! deterministic stage sets the least status of its decision, by severity and by
//! category, and learned scores can only raise a decision above that floor, never
//! lower it. The fused score still adds medium and low findings to the learned
//! probabilities (`policy.rs`), so several weak findings together can cross the
//! thresholds that no one of them sets.

use crate::{Channel, CoreError, Severity, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The least status one finding sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Floor {
    /// No floor: the finding only adds to the fused score.
    None,
    Review,
    Block,
}

impl Floor {
    pub fn status(self) -> Status {
        match self {
            Floor::None => Status::Allow,
            Floor::Review => Status::Review,
            Floor::Block => Status::Block,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Floor::None => "none",
            Floor::Review => "review",
            Floor::Block => "block",
        }
    }
}

/// `[floors]`: by severity, by finding category (or rule id) on every channel, and
/// by category (or rule id) on metadata channels only (tool names, descriptions,
/// schemas and definitions, server instructions). A finding's floor is the highest
/// of those that apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Floors {
    pub critical: Floor,
    pub high: Floor,
    pub medium: Floor,
    pub low: Floor,
    /// By finding category (e.g. `secret`, `canary`) or rule id, on every channel.
    #[serde(default)]
    pub categories: BTreeMap<String, Floor>,
    /// By finding category or rule id, on metadata channels only (e.g.
    /// `norm.tag_characters`: text spelled in invisible characters in a tool
    /// description is never there by accident).
    #[serde(default)]
    pub metadata: BTreeMap<String, Floor>,
}

/// Hidden-character findings that can carry text a reader cannot see: tag
/// characters (ASCII smuggling), bidi controls (text shown in another order), runs
/// of zero-width characters (bits), ANSI escapes (text a terminal hides). A lone
/// zero-width character or a stray control character is not among them.
pub const HIDDEN_INSTRUCTIONS: [&str; 4] = [
    "norm.ansi_escape",
    "norm.bidi_control",
    "norm.tag_characters",
    "norm.zero_width_run",
];

impl Default for Floors {
    /// The balanced preset's table.
    fn default() -> Self {
        Floors {
            critical: Floor::Block,
            high: Floor::Review,
            medium: Floor::None,
            low: Floor::None,
            categories: [
                ("canary".to_string(), Floor::Block),
                ("secret".to_string(), Floor::Block),
            ]
            .into(),
            metadata: HIDDEN_INSTRUCTIONS
                .iter()
                .map(|r| (r.to_string(), Floor::Review))
                .collect(),
        }
    }
}

impl Floors {
    /// The floor of one counted finding (`rule`, `category`, `severity`) on `channel`.
    pub fn of(&self, rule: &str, category: &str, severity: Severity, channel: Channel) -> Floor {
        let by_severity = match severity {
            Severity::Critical => self.critical,
            Severity::High => self.high,
            Severity::Medium => self.medium,
            Severity::Low => self.low,
        };
        let lookup =
            |m: &BTreeMap<String, Floor>| m.get(rule).copied().max(m.get(category).copied());
        let by_category = lookup(&self.categories);
        let by_metadata = if channel.is_metadata() {
            lookup(&self.metadata)
        } else {
            None
        };
        [Some(by_severity), by_category, by_metadata]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(Floor::None)
    }

    /// No configuration lets a critical finding through, and the table is ordered:
    /// a more severe finding never sets less than a milder one.
    pub fn validate(&self) -> Result<(), CoreError> {
        if self.critical < Floor::Review {
            return Err(CoreError::ConfigInvalid(format!(
                "floors.critical is {:?}: a critical finding must at least be held \
                 (set it to \"review\" or \"block\")",
                self.critical.as_str()
            )));
        }
        let order = [
            ("low", self.low),
            ("medium", self.medium),
            ("high", self.high),
            ("critical", self.critical),
        ];
        for w in order.windows(2) {
            if w[0].1 > w[1].1 {
                return Err(CoreError::ConfigInvalid(format!(
                    "floors.{} ({}) is above floors.{} ({}): a more severe finding must \
                     not set less than a milder one",
                    w[0].0,
                    w[0].1.as_str(),
                    w[1].0,
                    w[1].1.as_str()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_takes_the_highest_floor_that_applies() {
        let f = Floors::default();
        let of = |rule, cat, sev, ch| f.of(rule, cat, sev, ch);
        let r = Channel::ToolResult;
        assert_eq!(of("r", "x", Severity::Critical, r), Floor::Block);
        assert_eq!(of("r", "x", Severity::High, r), Floor::Review);
        assert_eq!(of("r", "x", Severity::Medium, r), Floor::None);
        assert_eq!(
            of(
                "egress.github_token",
                "secret",
                Severity::High,
                Channel::ToolArguments
            ),
            Floor::Block
        );
        // Hidden instructions are floored in metadata only; a lone zero-width
        // character is not one.
        let h = "hidden_characters";
        let bidi = ("norm.bidi_control", Severity::Medium);
        assert_eq!(
            of(bidi.0, h, bidi.1, Channel::ToolDefinition),
            Floor::Review
        );
        assert_eq!(
            of(bidi.0, h, bidi.1, Channel::ServerInstructions),
            Floor::Review
        );
        assert_eq!(of(bidi.0, h, bidi.1, r), Floor::None);
        assert_eq!(
            of("norm.zero_width", h, Severity::Low, Channel::ToolDefinition),
            Floor::None
        );
        assert_eq!(
            of(
                "norm.zero_width_run",
                h,
                Severity::Medium,
                Channel::ToolName
            ),
            Floor::Review
        );
    }

    #[test]
    fn a_table_that_lets_a_critical_finding_through_is_refused() {
        let f = Floors {
            critical: Floor::None,
            ..Floors::default()
        };
        assert!(f.validate().unwrap_err().to_string().contains("critical"));
        let f = Floors {
            medium: Floor::Block,
            ..Floors::default()
        };
        assert!(f.validate().unwrap_err().to_string().contains("medium"));
        Floors::default().validate().unwrap();
    }
}

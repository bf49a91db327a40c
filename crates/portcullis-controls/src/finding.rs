//! A structural finding: a rule's hit on one field of a definition, a call or a
//! result, named by its JSON path (not a span of text, as a detector finding is).

use portcullis_core::{Finding, Severity, Span};
use serde_json::Value;

/// Cut a JSON value to a short excerpt for a finding.
pub fn short(v: Option<&Value>) -> String {
    let s = match v {
        None => "(absent)".to_string(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(other) => other.to_string(),
    };
    if s.chars().count() > 56 {
        let cut: String = s.chars().take(55).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// A structural finding on a JSON path.
pub fn finding(
    rule: &str,
    category: &str,
    severity: Severity,
    path: &str,
    excerpt: String,
) -> Finding {
    Finding {
        rule: rule.into(),
        category: category.into(),
        severity,
        view: "structure".into(),
        span: Span { start: 0, end: 0 },
        excerpt,
        path: Some(path.to_string()),
        allowlisted: false,
    }
}

/// One finding per changed field.
pub fn change_findings(rule: &str, changes: &[crate::pins::Change]) -> Vec<Finding> {
    changes
        .iter()
        .map(|c| {
            finding(
                rule,
                "pin",
                Severity::High,
                &c.path,
                format!(
                    "{} -> {}",
                    short(c.before.as_ref()),
                    short(c.after.as_ref())
                ),
            )
        })
        .collect()
}

//! Strict parsing of a model's answer. Anything but the exact format is an error
//! (the caller fails closed); nothing is guessed out of free text.

use crate::{Label, ReviewError};
use serde_json::Value;

/// A one-word answer: `yes` (injection) or `no`, case-insensitive, surrounding
/// whitespace allowed, nothing else.
pub fn word(raw: &str) -> Result<Label, ReviewError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "yes" => Ok(Label::Injection),
        "no" => Ok(Label::Benign),
        _ => Err(ReviewError::Parse(excerpt(raw))),
    }
}

/// A JSON answer: exactly `{"verdict": "injection"|"benign", "confidence": x}`
/// with `x` a number in [0, 1]; surrounding whitespace allowed, no other keys, no
/// code fences, no trailing text.
pub fn json(raw: &str) -> Result<(Label, f64), ReviewError> {
    let bad = || ReviewError::Parse(excerpt(raw));
    let v: Value = serde_json::from_str(raw.trim()).map_err(|_| bad())?;
    let obj = v.as_object().ok_or_else(bad)?;
    if obj.len() != 2 {
        return Err(bad());
    }
    let label = match obj.get("verdict").and_then(Value::as_str) {
        Some("injection") => Label::Injection,
        Some("benign") => Label::Benign,
        _ => return Err(bad()),
    };
    let confidence = obj
        .get("confidence")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && (0.0..=1.0).contains(c))
        .ok_or_else(bad)?;
    Ok((label, confidence))
}

fn excerpt(raw: &str) -> String {
    let mut s: String = raw.chars().take(120).collect();
    if raw.chars().count() > 120 {
        s.push('…');
    }
    format!("{s:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_words_parse() {
        assert_eq!(word("yes").unwrap(), Label::Injection);
        assert_eq!(word(" No\n").unwrap(), Label::Benign);
    }

    #[test]
    fn anything_else_is_rejected() {
        for raw in ["", "yes.", "yes, it is", "maybe", "no no", "Yes\nNo", "oui"] {
            assert!(matches!(word(raw), Err(ReviewError::Parse(_))), "{raw:?}");
        }
    }

    #[test]
    fn good_json_parses() {
        let (l, c) = json(r#"{"verdict": "injection", "confidence": 0.8}"#).unwrap();
        assert_eq!((l, c), (Label::Injection, 0.8));
        let (l, c) = json(" {\"confidence\":1,\"verdict\":\"benign\"}\n").unwrap();
        assert_eq!((l, c), (Label::Benign, 1.0));
    }

    #[test]
    fn malformed_json_is_rejected() {
        for raw in [
            r#"```json {"verdict": "benign", "confidence": 0.9} ```"#,
            r#"{"verdict": "benign", "confidence": 0.9} trailing"#,
            r#"{"verdict": "benign"}"#,
            r#"{"verdict": "benign", "confidence": 1.5}"#,
            r#"{"verdict": "benign", "confidence": "high"}"#,
            r#"{"verdict": "Benign", "confidence": 0.9}"#,
            r#"{"verdict": "benign", "confidence": 0.9, "why": "x"}"#,
            r#"["benign", 0.9]"#,
            "benign",
        ] {
            assert!(matches!(json(raw), Err(ReviewError::Parse(_))), "{raw:?}");
        }
    }
}

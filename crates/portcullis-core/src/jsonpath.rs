//! The JSON paths that records, pin diffs, taint labels and configuration reports
//! name a field by: `$` for the root, `.key` for a key that reads as an identifier,
//! `["key"]` (JSON-quoted) for any other, `[i]` for an array index. One writer, so
//! the same field has the same path wherever it is named.

/// The path segment of an object key: `.key` when the key is non-empty, made of
/// ASCII letters, digits, `_` and `$`, and does not start with a digit;
/// `["key"]` otherwise.
pub fn key_segment(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        format!(".{key}")
    } else {
        format!("[{}]", serde_json::Value::String(key.to_string()))
    }
}

/// `parent` followed by the segment of `key`.
pub fn child_path(parent: &str, key: &str) -> String {
    format!("{parent}{}", key_segment(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_dotted_and_everything_else_is_quoted() {
        assert_eq!(child_path("$", "inputSchema"), "$.inputSchema");
        assert_eq!(child_path("$", "$schema"), "$.$schema");
        assert_eq!(child_path("$", "_meta"), "$._meta");
        assert_eq!(child_path("$", "2fa"), "$[\"2fa\"]");
        assert_eq!(child_path("$", ""), "$[\"\"]");
        assert_eq!(child_path("$", "weird key"), "$[\"weird key\"]");
        assert_eq!(child_path("$", "a.b"), "$[\"a.b\"]");
        assert_eq!(child_path("$", "say \"hi\""), "$[\"say \\\"hi\\\"\"]");
        assert_eq!(child_path("$", "ключ"), "$[\"ключ\"]");
    }
}

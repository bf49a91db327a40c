//! The JSON paths that records, pin diffs, taint labels and configuration reports
//! name a field by: `$` for the root, `.key` for a key that reads as an identifier,
//! `["key"]` (JSON-quoted) for any other, `[i]` for an array index. One writer, so
//! the same field has the same path wherever it is named, and one reader
//! ([`parse`], [`resolve`], [`resolve_mut`]).

use serde_json::Value;

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

/// One segment of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Read a path this module writes (`$.a[0]["b c"].d`) into its segments; `None`
/// when it is not one.
pub fn parse(path: &str) -> Option<Vec<Segment>> {
    let mut rest = path.strip_prefix('$')?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Segment::Key(r[..end].to_string()));
            rest = &r[end..];
        } else if rest.starts_with("[\"") {
            // A JSON string literal up to its closing quote.
            let mut de = serde_json::Deserializer::from_str(&rest[1..]).into_iter::<String>();
            let key = de.next()?.ok()?;
            let used = de.byte_offset();
            rest = rest[1 + used..].strip_prefix(']')?;
            out.push(Segment::Key(key));
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            out.push(Segment::Index(r[..end].parse().ok()?));
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// The value `path` names in `root`.
pub fn resolve<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    parse(path)?.iter().try_fold(root, |cur, s| match s {
        Segment::Key(k) => cur.as_object()?.get(k),
        Segment::Index(i) => cur.as_array()?.get(*i),
    })
}

/// The value `path` names in `root`, to change it.
pub fn resolve_mut<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    parse(path)?.iter().try_fold(root, |cur, s| match s {
        Segment::Key(k) => cur.as_object_mut()?.get_mut(k),
        Segment::Index(i) => cur.as_array_mut()?.get_mut(*i),
    })
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

    #[test]
    fn what_is_written_is_read_back() {
        let mut v = serde_json::json!({"a": {"b c": [0, {"d": "x"}]}, "e": "y", "ключ": ["z"]});
        for (path, want) in [
            ("$.e", Some("y")),
            ("$.a[\"b c\"][1].d", Some("x")),
            ("$[\"ключ\"][0]", Some("z")),
            ("$.a.zz", None),
            ("$.a[\"b c\"][9]", None),
            ("nope", None),
            ("$.a[\"b c\"", None),
        ] {
            let got = resolve(&v, path)
                .and_then(Value::as_str)
                .map(str::to_string);
            assert_eq!(got.as_deref(), want, "{path}");
            let got = resolve_mut(&mut v, path).and_then(|v| v.as_str().map(str::to_string));
            assert_eq!(got.as_deref(), want, "{path}");
        }
        for key in ["inputSchema", "2fa", "", "a.b", "say \"hi\"", "a]b", "ключ"] {
            let path = child_path(&child_path("$", key), "x");
            assert_eq!(
                parse(&path),
                Some(vec![Segment::Key(key.into()), Segment::Key("x".into())]),
                "{path}"
            );
        }
    }
}

//! Canonical JSON: one serialization of a `serde_json::Value` with object keys
//! sorted at every depth, arrays in order, no whitespace.
//!
//! The workspace builds `serde_json` with `preserve_order`, so a `Map` keeps the
//! order its keys arrived in: the gateway forwards schemas and results with their
//! parameters in the server's order (that order is meaning for models and form
//! UIs). Everything that hashes, compares or walks a value for a decision must
//! therefore not depend on that order: it serializes with [`canonical_json`] and
//! walks objects with [`sorted_entries`]. These give exactly what `serde_json`
//! gave when its maps were sorted, so hashes of pins already stored, record
//! `input_sha256`s and committed files do not change.

use serde_json::{Map, Value};

/// The canonical JSON text of a value: keys sorted (by their UTF-8 bytes, as a
/// `BTreeMap<String, _>` orders them) at every depth, no whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

fn write(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            for (i, (k, v)) in sorted_entries(m).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // A string serializes infallibly.
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write(v, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The entries of an object in key order, whatever order the map keeps.
pub fn sorted_entries(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

/// A copy of a value whose objects hold their keys in sorted order, so that any
/// serialization of it (`to_string`, `Serialize`) is the canonical one.
pub fn canonical_value(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            sorted_entries(m)
                .into_iter()
                .map(|(k, v)| (k.clone(), canonical_value(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(canonical_value).collect()),
        other => other.clone(),
    }
}

/// `serialize_with` for a field that must serialize canonically (a committed
/// file whose hash is pinned), whatever order its maps keep.
pub fn serialize_canonical<S: serde::Serializer>(
    v: &Option<Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    v.as_ref().map(canonical_value).serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_number_is_written_back_as_it_was_read() {
        // Found by the jsonrpc_stdio fuzz target: without serde_json's
        // `float_roundtrip`, this progress token came back one unit in the last
        // place off (2.2222222222222217e+141), a different number for the client.
        for text in [
            "2.222222222222222e+141",
            "0.1",
            "1e-300",
            "123456789.12345678",
        ] {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            let back = v.to_string();
            let f: f64 = text.parse().unwrap();
            assert_eq!(
                v.as_f64().map(f64::to_bits),
                Some(f.to_bits()),
                "{text} -> {back}"
            );
        }
    }

    #[test]
    fn key_order_is_kept_in_maps_and_ignored_by_the_canonical_form() {
        let a: Value =
            serde_json::from_str(r#"{"z":1,"a":{"y":[{"q":1,"b":2}],"c":"é\n"},"m":null}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"m":null,"a":{"c":"é\n","y":[{"b":2,"q":1}]},"z":1}"#)
                .unwrap();
        // preserve_order: the map keeps the order it was given.
        let keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["z", "a", "m"]);
        assert_ne!(a.to_string(), b.to_string());
        let want = r#"{"a":{"c":"é\n","y":[{"b":2,"q":1}]},"m":null,"z":1}"#;
        assert_eq!(canonical_json(&a), want);
        assert_eq!(canonical_json(&b), want);
        assert_eq!(canonical_value(&a).to_string(), want);
        // Array order is meaning: it stays.
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
    }

    #[test]
    fn keys_sort_by_bytes_like_a_btreemap() {
        let v = json!({"b": 1, "B": 2, "é": 3, "a\u{0}": 4, "a": 5});
        let sorted: std::collections::BTreeMap<String, Value> = v
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(canonical_json(&v), serde_json::to_string(&sorted).unwrap());
    }
}

//! Definitions as pinnable values: the canonical hash (object keys sorted at every
//! depth, arrays in order, so key order never matters and element order does), a
//! field-by-field diff by JSON path, and the similarity used to tell a rename from
//! a new definition.

use portcullis_core::jsonpath::key_segment;
use portcullis_core::sha256_hex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// What a pin is of (the state store's `kind` column).
pub mod kind {
    pub const TOOL: &str = "tool";
    pub const PROMPT: &str = "prompt";
    pub const RESOURCE_TEMPLATE: &str = "resource_template";
    pub const INSTRUCTIONS: &str = "instructions";
}

/// The canonical JSON text of a value: keys sorted at every depth, no whitespace
/// (the one shared form, [`portcullis_core::canonical_json`]).
pub fn canonical(v: &Value) -> String {
    portcullis_core::canonical_json(v)
}

/// SHA-256 of the canonical JSON of a whole definition.
pub fn hash(v: &Value) -> String {
    sha256_hex(canonical(v).as_bytes())
}

/// One changed field: its JSON path and the values before and after (`None` =
/// absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Field-by-field differences between two definitions, by JSON path, in path order.
pub fn diff(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("$".to_string(), Some(before), Some(after), &mut out);
    out
}

fn walk(path: String, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Change>) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                walk(format!("{path}{}", key_segment(k)), x.get(k), y.get(k), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                walk(format!("{path}[{i}]"), x.get(i), y.get(i), out);
            }
        }
        (a, b) if a != b => out.push(Change {
            path,
            before: a.cloned(),
            after: b.cloned(),
        }),
        _ => {}
    }
}

/// Every leaf of a value as `path=value`, except the top-level `name`.
fn leaves(v: &Value) -> BTreeSet<String> {
    fn go(path: String, v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if path == "$" && k == "name" {
                        continue;
                    }
                    go(format!("{path}{}", key_segment(k)), v, out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    go(format!("{path}[{i}]"), v, out);
                }
            }
            other => {
                out.insert(format!("{path}={other}"));
            }
        }
    }
    let mut out = BTreeSet::new();
    go("$".into(), v, &mut out);
    out
}

/// Jaccard similarity of two definitions' leaves, ignoring their names: 1.0 for
/// definitions that differ only by name.
pub fn similarity(a: &Value, b: &Value) -> f64 {
    let (x, y) = (leaves(a), leaves(b));
    let union = x.union(&y).count();
    if union == 0 {
        return 1.0;
    }
    x.intersection(&y).count() as f64 / union as f64
}

/// A listed definition against its pin in the store: the one comparison behind
/// the gateway's pin check and `audit`'s. Nothing is written; what to do about a
/// change is the caller's policy.
#[derive(Debug, Clone)]
pub enum Compared {
    /// Pinned, and the same.
    Unchanged(crate::store::Pin),
    /// Pinned under this name, and different: the changes, field by field.
    Changed(crate::store::Pin, Vec<Change>),
    /// Not pinned under this name, but at least `rename_similarity` like a pinned
    /// definition that is no longer listed: a rename of it.
    Renamed(crate::store::Pin, Vec<Change>),
    /// Seen for the first time.
    New,
}

/// Compare `definition`, listed by `server` as the `kind` named `name` next to
/// the names in `listed`, with the pins in `store`.
pub fn compare(
    store: &crate::store::Store,
    server: &str,
    kind: &str,
    name: &str,
    definition: &Value,
    listed: &[String],
    rename_similarity: f64,
) -> Result<Compared, crate::store::StoreError> {
    let h = hash(definition);
    Ok(match store.pin(server, kind, name)? {
        Some(p) if p.hash == h => Compared::Unchanged(p),
        Some(p) => {
            let changes = diff(&p.definition, definition);
            Compared::Changed(p, changes)
        }
        None => {
            let renamed = store
                .pins(server, kind)?
                .into_iter()
                .filter(|p| !listed.contains(&p.name))
                .map(|p| (similarity(&p.definition, definition), p))
                .filter(|(s, _)| *s >= rename_similarity)
                .max_by(|a, b| a.0.total_cmp(&b.0));
            match renamed {
                Some((_, p)) => {
                    let changes = diff(&p.definition, definition);
                    Compared::Renamed(p, changes)
                }
                None => Compared::New,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hash_ignores_key_order_but_not_array_order() {
        let a = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {}}}, "x": [1, 2]});
        let b: Value = serde_json::from_str(
            r#"{"x": [1, 2], "inputSchema": {"properties": {"b": {}, "a": {"type": "string"}}, "type": "object"}, "name": "t"}"#,
        )
        .unwrap();
        assert_eq!(hash(&a), hash(&b));
        let c = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {}}}, "x": [2, 1]});
        assert_ne!(hash(&a), hash(&c));
    }

    #[test]
    fn the_hash_is_the_one_pins_were_stored_with() {
        // serde_json keeps key order (preserve_order), and the map of a parsed
        // definition iterates in the server's order; the hash must still be the
        // SHA-256 of the sorted compact JSON, as when serde_json's maps were
        // sorted, or every pin in an existing store would read as changed.
        // The literal is sha256 of
        // {"inputSchema":{"properties":{"a":{"type":"string"},"b":{}},"type":"object"},"name":"t","x":[1,2]}
        let v: Value = serde_json::from_str(
            r#"{"x": [1, 2], "name": "t", "inputSchema": {"type": "object", "properties": {"b": {}, "a": {"type": "string"}}}}"#,
        )
        .unwrap();
        let keys: Vec<&String> = v["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["b", "a"], "the map keeps the server's order");
        assert_eq!(
            hash(&v),
            "763d7db7a479d65255fe5923db6672e0abe46885ada2a8ef22db2172de10cc9c"
        );
    }

    #[test]
    fn the_diff_names_nested_paths() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"properties": {"o": {"properties": {"p": {"maximum": 6}}}, "we ird": {"type": "string"}}}});
        let b = json!({"name": "t", "description": "d2", "inputSchema": {"properties": {"o": {"properties": {"p": {"maximum": 12}}}}}});
        let d = diff(&a, &b);
        let paths: Vec<&str> = d.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "$.description",
                "$.inputSchema.properties.o.properties.p.maximum",
                "$.inputSchema.properties[\"we ird\"]"
            ]
        );
        assert_eq!(d[1].before, Some(json!(6)));
        assert_eq!(d[1].after, Some(json!(12)));
        assert_eq!(d[2].after, None);
    }

    #[test]
    fn a_diff_names_a_field_by_the_path_its_inspected_item_has() {
        // A key with `$`: the pin diff wrote `["$comment"]` where the extractor
        // (and so every record) wrote `.$comment`. A leading digit is quoted.
        let before = json!({"name": "t", "inputSchema": {"$comment": "old", "properties": {"2fa": {"description": "old"}}}});
        let after = json!({"name": "t", "inputSchema": {"$comment": "new", "properties": {"2fa": {"description": "new"}}}});
        let changed: Vec<String> = diff(&before, &after).into_iter().map(|c| c.path).collect();
        let items: Vec<String> = portcullis_detect::extract::tool_items(&after, None)
            .unwrap()
            .items
            .into_iter()
            .map(|i| i.path.unwrap_or_default())
            .collect();
        assert_eq!(
            changed,
            [
                "$.inputSchema.$comment",
                "$.inputSchema.properties[\"2fa\"].description"
            ]
        );
        for path in &changed {
            assert!(items.contains(path), "{path} not among {items:?}");
        }
    }

    #[test]
    fn a_rename_is_near_identical_and_a_new_tool_is_not() {
        let a = json!({"name": "read_file", "description": "Reads a file from the workspace.", "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "description": "File path"}}}});
        let mut renamed = a.clone();
        renamed["name"] = json!("read_file_v2");
        assert_eq!(similarity(&a, &renamed), 1.0);
        let other = json!({"name": "add", "description": "Adds two integers.", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}});
        assert!(similarity(&a, &other) < 0.5);
    }
}

//! Taint and egress: values that came from a tool result are labelled with their
//! origin (server, tool, record); configured secrets and strings the output guard
//! classed as secrets or PII are labelled sensitive. A later call's arguments are
//! searched for labelled values — exactly, as a substring, or re-encoded as
//! Base64, hex or URL-encoding — and the gateway decides by the flow: to another
//! server, to a sink tool, or back to the same server.
//!
//! The store is in memory, per gateway, bounded (oldest values dropped first).

use crate::config::{TaintConfig, ToolClass};
use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};

/// Where a labelled value came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Label {
    pub server: String,
    pub tool: String,
    /// The decision record of the result (or `config`).
    pub record_id: String,
    pub sensitive: bool,
    /// `result`, `guard` (a secret/PII the output guard found) or `config`.
    pub source: &'static str,
}

/// A labelled value found in a call's arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Match {
    pub label: Label,
    /// JSON path of the argument.
    pub arg_path: String,
    /// `exact`, `substring`, `base64`, `hex` or `url`.
    pub how: &'static str,
    /// A redacted hint of the value (first 4 characters and the length).
    pub hint: String,
}

#[derive(Debug, Default)]
pub struct TaintStore {
    order: VecDeque<String>,
    values: HashMap<String, Label>,
    max: usize,
    min_len: usize,
}

fn hint(v: &str) -> String {
    let head: String = v.chars().take(4).collect();
    format!("{head}… ({} chars)", v.chars().count())
}

/// Whether a result token looks like a value worth tracking (ids, tokens, keys,
/// numbers with letters) rather than a word of prose.
fn value_like(t: &str, min_len: usize) -> bool {
    let n = t.chars().count();
    let digits = t.chars().any(|c| c.is_ascii_digit());
    let marks = t.chars().any(|c| "-_/=+.@:".contains(c))
        && t.chars().filter(|c| c.is_alphanumeric()).count() >= min_len;
    n >= min_len && (digits || n >= 24 || marks)
}

impl TaintStore {
    pub fn new(max: usize, min_len: usize) -> TaintStore {
        TaintStore {
            max: max.max(1),
            min_len,
            ..TaintStore::default()
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// The labelled values, oldest first.
    pub fn values(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|v| self.values.contains_key(*v))
            .cloned()
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Label one value (a later label of the same value replaces the earlier one
    /// unless the earlier is sensitive).
    pub fn add(&mut self, value: &str, label: Label) {
        if value.chars().count() < self.min_len {
            return;
        }
        if let Some(old) = self.values.get(value) {
            if old.sensitive && !label.sensitive {
                return;
            }
        } else {
            self.order.push_back(value.to_string());
        }
        self.values.insert(value.to_string(), label);
        while self.values.len() > self.max {
            match self.order.pop_front() {
                Some(v) => {
                    self.values.remove(&v);
                }
                None => break,
            }
        }
    }

    /// Label the value-like tokens of every string of a result.
    pub fn add_result(&mut self, result: &Value, label: &Label) {
        let mut strings = Vec::new();
        collect(result, "$".into(), &mut strings);
        for (_, s) in strings {
            for tok in s.split(|c: char| c.is_whitespace() || "\"'`,;()[]{}<>|".contains(c)) {
                let tok = tok.trim_matches(|c: char| ".:!?".contains(c));
                if value_like(tok, self.min_len) {
                    self.add(tok, label.clone());
                }
            }
        }
    }

    /// Labelled values in a call's arguments.
    pub fn matches(&self, args: &Value) -> Vec<Match> {
        let mut out = Vec::new();
        if self.values.is_empty() {
            return out;
        }
        let mut strings = Vec::new();
        collect(args, "$".into(), &mut strings);
        for (path, s) in strings {
            let mut views: Vec<(&'static str, String)> = vec![("substring", s.clone())];
            if let Ok(d) = percent_encoding::percent_decode_str(&s).decode_utf8() {
                if d != s {
                    views.push(("url", d.into_owned()));
                }
            }
            for run in runs(&s, |c| c.is_ascii_alphanumeric() || "+/-_".contains(c), 8) {
                for engine in [
                    &base64::engine::general_purpose::STANDARD_NO_PAD,
                    &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                ] {
                    if let Ok(bytes) = engine.decode(&run) {
                        views.push(("base64", String::from_utf8_lossy(&bytes).into_owned()));
                        break;
                    }
                }
            }
            for run in runs(&s, |c| c.is_ascii_hexdigit(), 16) {
                let even = &run[..run.len() - run.len() % 2];
                if let Ok(bytes) = hex::decode(even) {
                    views.push(("hex", String::from_utf8_lossy(&bytes).into_owned()));
                }
            }
            for (value, label) in &self.values {
                for (how, view) in &views {
                    if view.contains(value.as_str()) {
                        let how = if *how == "substring" && view == value {
                            "exact"
                        } else {
                            how
                        };
                        out.push(Match {
                            label: label.clone(),
                            arg_path: path.clone(),
                            how,
                            hint: hint(value),
                        });
                        break;
                    }
                }
            }
        }
        out.sort_by(|a, b| (&a.arg_path, a.how).cmp(&(&b.arg_path, b.how)));
        out
    }
}

/// Maximal runs of characters satisfying `f`, at least `min` long.
fn runs(s: &str, f: impl Fn(char) -> bool, min: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars().chain(std::iter::once(' ')) {
        if f(c) {
            cur.push(c);
        } else {
            if cur.len() >= min {
                out.push(std::mem::take(&mut cur));
            }
            cur.clear();
        }
    }
    out
}

/// Every string of a JSON value with its path (keys included as values are not).
fn collect(v: &Value, path: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => out.push((path, s.clone())),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect(x, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                collect(x, format!("{path}{}", crate::pins::key_segment(k)), out);
            }
        }
        _ => {}
    }
}

/// Verbs that make a tool a sink (sends, posts, writes, executes).
const SINK_WORDS: &[&str] = &[
    "send", "sends", "post", "posts", "upload", "uploads", "write", "writes", "exec", "execute",
    "executes", "run", "runs", "shell", "command", "email", "mail", "http", "webhook", "publish",
    "push", "delete", "remove", "create", "update", "put", "notify", "message", "sms", "share",
    "transfer", "pay", "deploy", "save", "store", "submit", "tweet", "fetch", "request", "curl",
];

/// A tool's class: configuration (`SERVER/TOOL`, then `*/TOOL`), then the
/// annotations (`readOnlyHint` = not a sink; `destructiveHint` or `openWorldHint`
/// = sink), then the words of its name and description.
pub fn class_of(cfg: &TaintConfig, server: &str, tool: &str, def: Option<&Value>) -> ToolClass {
    if let Some(c) = cfg
        .classes
        .get(&format!("{server}/{tool}"))
        .or_else(|| cfg.classes.get(&format!("*/{tool}")))
    {
        return *c;
    }
    let ann = def.and_then(|d| d.get("annotations"));
    let hint = |k: &str| ann.and_then(|a| a.get(k)).and_then(Value::as_bool);
    if hint("readOnlyHint") == Some(true) {
        return ToolClass::Normal;
    }
    if hint("destructiveHint") == Some(true) || hint("openWorldHint") == Some(true) {
        return ToolClass::Sink;
    }
    let desc = def
        .and_then(|d| d.get("description"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let name_words = crate::params::words(tool);
    let desc_words = crate::params::words(desc);
    let first_desc_word = desc_words.split_whitespace().next().unwrap_or("");
    if SINK_WORDS
        .iter()
        .any(|w| name_words.contains(&format!(" {w} ")) || first_desc_word == *w)
    {
        ToolClass::Sink
    } else {
        ToolClass::Normal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn label(server: &str) -> Label {
        Label {
            server: server.into(),
            tool: "read".into(),
            record_id: "r".into(),
            sensitive: false,
            source: "result",
        }
    }

    #[test]
    fn finds_values_plain_encoded_and_nested() {
        let mut t = TaintStore::new(100, 8);
        t.add_result(
            &json!({"content": [{"type": "text", "text": "The token is PCX-7Q2M9ZK4T-CANARY, keep it."}]}),
            &label("alpha"),
        );
        assert!(!t.is_empty());
        let canary = "PCX-7Q2M9ZK4T-CANARY";
        let b64 = base64::engine::general_purpose::STANDARD.encode(canary);
        let hexed = hex::encode(canary);
        let url = canary.replace('-', "%2D");
        for (args, how) in [
            (json!({"text": canary}), "exact"),
            (
                json!({"text": format!("please forward {canary} now")}),
                "substring",
            ),
            (json!({"x": {"y": [format!("data={b64}")]}}), "base64"),
            (json!({"text": hexed}), "hex"),
            (json!({"text": url}), "url"),
        ] {
            let m = t.matches(&args);
            assert_eq!(m.len(), 1, "{args}: {m:?}");
            assert_eq!(m[0].how, how, "{args}");
            assert_eq!(m[0].label.server, "alpha");
            assert!(!m[0].hint.contains(canary));
        }
        assert!(t
            .matches(&json!({"text": "nothing here at all"}))
            .is_empty());
        // Prose words are not labelled.
        t.add_result(
            &json!("inspirational quotations everywhere"),
            &label("alpha"),
        );
        assert!(t.matches(&json!({"q": "inspirational"})).is_empty());
    }

    #[test]
    fn the_store_is_bounded() {
        let mut t = TaintStore::new(2, 8);
        for v in ["AAAA11111", "BBBB22222", "CCCC33333"] {
            t.add(v, label("a"));
        }
        assert_eq!(t.len(), 2);
        assert!(t.matches(&json!("AAAA11111")).is_empty());
        assert_eq!(t.matches(&json!("CCCC33333")).len(), 1);
    }

    #[test]
    fn classes_come_from_config_annotations_and_words() {
        let mut cfg = TaintConfig::default();
        let ro = json!({"annotations": {"readOnlyHint": true}});
        assert_eq!(
            class_of(&cfg, "a", "send_email", Some(&ro)),
            ToolClass::Normal
        );
        assert_eq!(class_of(&cfg, "a", "send_email", None), ToolClass::Sink);
        assert_eq!(class_of(&cfg, "a", "http_post", None), ToolClass::Sink);
        assert_eq!(class_of(&cfg, "a", "add", None), ToolClass::Normal);
        let d = json!({"description": "Writes a file anywhere on disk."});
        assert_eq!(class_of(&cfg, "a", "fs_tool", Some(&d)), ToolClass::Sink);
        cfg.classes.insert("*/add".into(), ToolClass::Sink);
        assert_eq!(class_of(&cfg, "a", "add", None), ToolClass::Sink);
    }
}

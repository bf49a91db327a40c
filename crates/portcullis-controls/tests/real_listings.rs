//! The name checks against the tool listings of real MCP servers (corpus/harvest:
//! 211 servers from npm and PyPI at pinned versions, listed offline): no tool of a
//! real server is taken for a copy of a sibling, by name ([`copies`]) or by
//! definition ([`copy_of`]). A rule that fires here would hold a real server's
//! tools.

use portcullis_controls::names::{copies, copy_of};
use serde_json::Value;
use std::collections::BTreeMap;

#[test]
fn no_tool_of_a_real_server_copies_a_sibling() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../corpus/harvest/tool_definition.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("corpus/harvest/tool_definition.jsonl");
    let mut servers: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", i + 1));
        let source = v["source"].as_str().expect("source").to_string();
        let name = v["tool"]["name"].as_str().expect("tool name").to_string();
        servers
            .entry(source)
            .or_default()
            .push((name, v["tool"].clone()));
    }
    assert!(servers.len() >= 200, "{} servers", servers.len());
    let mut hits = Vec::new();
    for (server, names) in &servers {
        for (a, da) in names {
            for (b, db) in names {
                if let Some(rule) = copies(a, b).or_else(|| copy_of(a, da, b, db)) {
                    hits.push(format!("{server}: {a} copies {b} ({rule})"));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "{} false copies:\n{}",
        hits.len(),
        hits.join("\n")
    );
}

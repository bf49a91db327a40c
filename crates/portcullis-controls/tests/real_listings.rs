//! The metadata checks against the tool listings of real MCP servers
//! (corpus/harvest: 211 servers from npm and PyPI at pinned versions, listed
//! offline): no tool of a real server is taken for a copy of a sibling, by name
//! ([`copies`]) or by definition ([`copy_of`]), and the default policy holds none
//! and strips no parameter one requires. A rule that fires here would hold or
//! break a real server's tools.

use portcullis_controls::names::{copies, copy_of};
use serde_json::Value;
use std::collections::BTreeMap;

/// Every harvested server (`package@version`) with its tools (name, definition).
fn real_servers() -> BTreeMap<String, Vec<(String, Value)>> {
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
    servers
}

#[test]
fn no_tool_of_a_real_server_copies_a_sibling() {
    let servers = real_servers();
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

/// Every metadata check at the default policy (names against the server's own
/// tools, over-privileged parameters, preference manipulation in every
/// description and title) on every real tool: none is held or hidden, and none
/// loses a parameter its schema requires. Findings
/// below the hold threshold (a `pm.self_promotion` record for "Always use this
/// tool to …") are allowed and counted here, so a change in how many there are is
/// seen.
#[test]
fn the_default_policy_holds_no_tool_of_a_real_server() {
    use portcullis_controls::config::{NamesConfig, ParamsConfig, RedirectionConfig};
    use portcullis_controls::metadata::{check, DefinitionKind, MetadataPolicy, Neighbour};
    use portcullis_controls::names::Relation;

    let servers = real_servers();
    let (names, params, redirection) = (
        NamesConfig::default(),
        ParamsConfig::default(),
        RedirectionConfig::default(),
    );
    let policy = MetadataPolicy {
        names: &names,
        params: &params,
        redirection: &redirection,
    };
    let (mut held, mut broken, mut tools) = (Vec::new(), Vec::new(), 0);
    let mut recorded: BTreeMap<String, usize> = BTreeMap::new();
    for (server, defs) in &servers {
        for (name, def) in defs {
            tools += 1;
            let neighbours = defs
                .iter()
                .filter(|(n, _)| n != name)
                .map(|(n, d)| Neighbour {
                    server,
                    name: n,
                    relation: Relation::SameServer,
                    def: Some(d),
                });
            let f = check(DefinitionKind::Tool, name, def, neighbours, policy);
            if f.hold || f.hide {
                held.push(format!("{server}: {name}: {:?}", f.reasons));
            }
            for finding in &f.findings {
                *recorded.entry(finding.rule.clone()).or_default() += 1;
            }
            // A parameter the tool requires, removed from what the model is
            // shown: the server would reject every call.
            for o in f.strip.iter().filter(|o| o.required) {
                broken.push(format!("{server}: {name}: {}", o.path));
            }
        }
    }
    assert!(tools >= 4_800, "{tools} tools");
    assert!(held.is_empty(), "{} held:\n{}", held.len(), held.join("\n"));
    // Before 2026-12-04 the default strip removed 27 required parameters of 25
    // real tools (hostinger's mailbox password, ccxt's apiKey, googlemaps'
    // `prompt` read as "system instructions" across a sentence end, Linear's
    // boolean `confirmSecretExposure` read as "tool result").
    assert!(
        broken.is_empty(),
        "{} required parameters stripped:\n{}",
        broken.len(),
        broken.join("\n")
    );
    // Measured 2026-12-04 on this harvest: the promotional phrases are in 31
    // fields of real tools (18 top-level descriptions, 13 schema descriptions).
    let pm = recorded.get("pm.self_promotion").copied().unwrap_or(0);
    assert!(
        (25..=40).contains(&pm),
        "pm.self_promotion on {pm} fields: {recorded:?}"
    );
}

//! The metadata checks against the tool listings of real MCP servers
//! (corpus/harvest: 211 servers from npm and PyPI at pinned versions, listed
//! offline): no tool of a real server is taken for a copy of a sibling, by name
//! ([`copies`]) or by definition ([`copy_of`]), and the default policy holds none
//! and strips no parameter one requires. A rule that fires here would hold or
//! break a real server's tools.

use portcullis_controls::config::{NamesConfig, ParamsConfig, RedirectionConfig};
use portcullis_controls::metadata::{MetadataPolicy, Neighbour};
use portcullis_controls::names::Relation;
use portcullis_controls::names::{copies, copy_of};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::LazyLock;

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

/// The metadata controls' default policies (`[names]`, `[params]`,
/// `[redirection]` as a configuration without them gets them).
fn default_policy() -> MetadataPolicy<'static> {
    static CONFIGS: LazyLock<(NamesConfig, ParamsConfig, RedirectionConfig)> =
        LazyLock::new(Default::default);
    MetadataPolicy {
        names: &CONFIGS.0,
        params: &CONFIGS.1,
        redirection: &CONFIGS.2,
    }
}

/// The other tools of `server` (`defs`) as neighbours of its tool `name`.
fn siblings<'a>(
    server: &'a str,
    defs: &'a [(String, Value)],
    name: &'a str,
) -> impl Iterator<Item = Neighbour<'a>> {
    defs.iter()
        .filter(move |(n, _)| n != name)
        .map(move |(n, d)| Neighbour {
            server,
            name: n,
            relation: Relation::SameServer,
            def: Some(d),
        })
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
    use portcullis_controls::metadata::{check, DefinitionKind};

    let servers = real_servers();
    let policy = default_policy();
    let (mut held, mut broken, mut tools) = (Vec::new(), Vec::new(), 0);
    let mut recorded: BTreeMap<String, usize> = BTreeMap::new();
    for (server, defs) in &servers {
        for (name, def) in defs {
            tools += 1;
            let neighbours = siblings(server, defs, name);
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

/// Every real server listed beside every other (the worst case: 211 servers in
/// one gateway): no tool is held as a copy of another server's tool that
/// promotes itself or adds sentences to it. Forks repeat each other's
/// descriptions (measured 2026-12-05: 28 pairs of tools of different servers
/// where one's description contains the other's and it takes the other's
/// calls, most of them browser automation and two versions of the MongoDB
/// server; in 7 the description is longer, each continuing the other's
/// sentence), so a copy alone is not held.
#[test]
fn no_tool_of_a_real_server_is_a_promoted_copy_of_another_servers() {
    use portcullis_controls::metadata::{check, DefinitionKind};
    use portcullis_controls::names::passes_for;

    let servers = real_servers();
    let policy = default_policy();
    let tools: Vec<(&str, &str, &Value)> = servers
        .iter()
        .flat_map(|(s, defs)| defs.iter().map(move |(n, d)| (s.as_str(), n.as_str(), d)))
        .collect();
    // Descriptions lowercased without whitespace, once: the pairs worth asking
    // `passes_for` about are those where one contains the other.
    let squashed: Vec<String> = tools
        .iter()
        .map(|(_, _, d)| {
            d["description"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_whitespace())
                .flat_map(char::to_lowercase)
                .collect()
        })
        .collect();
    let (mut pairs, mut held) = (0, Vec::new());
    for (i, (server, name, def)) in tools.iter().enumerate() {
        let others: Vec<Neighbour> = tools
            .iter()
            .enumerate()
            .filter(|(j, (s, _, d))| {
                s != server
                    && squashed[*j].len() >= 12
                    && squashed[i].contains(squashed[*j].as_str())
                    && passes_for(def, d)
            })
            .map(|(_, t)| t)
            .map(|(s, n, d)| Neighbour {
                server: s,
                name: n,
                relation: Relation::EarlierServer,
                def: Some(d),
            })
            .collect();
        pairs += others.len();
        let f = check(DefinitionKind::Tool, name, def, others, policy);
        for finding in f.findings.iter().filter(|f| {
            matches!(
                f.rule.as_str(),
                "names.promoted_copy" | "names.extended_copy"
            )
        }) {
            held.push(format!("{server}: {name}: {}", finding.excerpt));
        }
    }
    // The rule has pairs to look at here, so silence means something.
    assert!(pairs >= 20, "{pairs} pairs");
    assert!(held.is_empty(), "{} held:\n{}", held.len(), held.join("\n"));
}

/// Every real server configured twice behind one gateway (two roots, two accounts:
/// the second instance lists every name of the first): the default policy holds
/// none of the second instance's tools. Its descriptions name their siblings (92
/// of the 211 servers do), and its names are a small edit from each other
/// (`get_user`, `get_users`): against the first instance these read as shadowing
/// and look-alikes unless a name the server lists itself is its own.
#[test]
fn a_real_server_configured_twice_holds_nothing() {
    use portcullis_controls::metadata::{check, DefinitionKind};

    let servers = real_servers();
    let policy = default_policy();
    let (mut held, mut collisions) = (Vec::new(), 0);
    for (server, defs) in &servers {
        let first = format!("{server} (first instance)");
        for (name, def) in defs {
            let siblings = siblings(server, defs, name);
            let first_instance = defs.iter().map(|(n, d)| Neighbour {
                server: &first,
                name: n,
                relation: Relation::EarlierServer,
                def: Some(d),
            });
            let f = check(
                DefinitionKind::Tool,
                name,
                def,
                siblings.chain(first_instance),
                policy,
            );
            collisions += f
                .findings
                .iter()
                .filter(|f| f.rule == "names.collision")
                .count();
            if f.hold || f.hide {
                held.push(format!("{server}: {name}: {:?}", f.reasons));
            }
        }
    }
    // Every tool collides with itself on the first instance (namespaced, recorded).
    assert!(collisions >= 4_800, "{collisions} collisions");
    assert!(held.is_empty(), "{} held:\n{}", held.len(), held.join("\n"));
}

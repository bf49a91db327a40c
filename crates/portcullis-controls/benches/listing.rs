//! The metadata checks of one `tools/list` through a gateway in front of many
//! servers: every tool against every other (`metadata::check` with its siblings
//! and the other servers' tools as neighbours, as `gateway::decide_entries`
//! passes them), on real listings — the first servers of corpus/harvest (211
//! real servers from npm and PyPI), about as many tools as the 62 servers of
//! `together.py --all-twice` list (724). Pairwise work is what grows with a
//! listing: the names check is n², so a per-pair cost shows here.
//! Run: `cargo bench -p portcullis-controls --bench listing`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use portcullis_controls::config::{NamesConfig, ParamsConfig, RedirectionConfig};
use portcullis_controls::metadata::{check, DefinitionKind, MetadataPolicy, Neighbour};
use portcullis_controls::names::Relation;
use serde_json::Value;
use std::collections::BTreeMap;
use std::hint::black_box;

/// Servers of the harvest, in order, until `tools` tools: (server, name, definition).
fn listing(tools: usize) -> Vec<(String, String, Value)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../corpus/harvest/tool_definition.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("corpus/harvest/tool_definition.jsonl");
    let mut servers: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("a JSON line");
        let source = v["source"].as_str().expect("source").to_string();
        let name = v["tool"]["name"].as_str().expect("tool name").to_string();
        servers
            .entry(source)
            .or_default()
            .push((name, v["tool"].clone()));
    }
    let mut out = Vec::new();
    for (server, defs) in servers {
        if out.len() >= tools {
            break;
        }
        out.extend(defs.into_iter().map(|(n, d)| (server.clone(), n, d)));
    }
    out
}

fn bench(c: &mut Criterion) {
    let tools = listing(724);
    let configs: (NamesConfig, ParamsConfig, RedirectionConfig) = Default::default();
    let policy = MetadataPolicy {
        names: &configs.0,
        params: &configs.1,
        redirection: &configs.2,
    };
    let servers: Vec<&str> = {
        let mut s: Vec<&str> = tools.iter().map(|(s, _, _)| s.as_str()).collect();
        s.dedup();
        s
    };
    let mut g = c.benchmark_group("listing");
    g.sample_size(10);
    g.throughput(Throughput::Elements(tools.len() as u64));
    g.bench_function(
        format!("{} tools of {} servers", tools.len(), servers.len()),
        |b| {
            b.iter(|| {
                let mut findings = 0;
                for (server, name, def) in &tools {
                    // Siblings with their definitions; other servers' tools by name
                    // (the gateway adds another server's definition only when it may
                    // be copied, which is rare).
                    let rank = servers.iter().position(|s| s == server).unwrap_or(0);
                    let neighbours = tools
                        .iter()
                        .filter(|(s, n, _)| !(s == server && n == name))
                        .map(|(s, n, d)| {
                            let other = servers.iter().position(|x| x == s).unwrap_or(0);
                            let relation = match other.cmp(&rank) {
                                std::cmp::Ordering::Equal => Relation::SameServer,
                                std::cmp::Ordering::Less => Relation::EarlierServer,
                                std::cmp::Ordering::Greater => Relation::LaterServer,
                            };
                            Neighbour {
                                server: s,
                                name: n,
                                relation,
                                def: (relation == Relation::SameServer).then_some(d),
                            }
                        });
                    findings += check(DefinitionKind::Tool, name, def, neighbours, policy)
                        .findings
                        .len();
                }
                black_box(findings)
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Throughput of normalize + rules over the texts of a JSONL file (e.g. the corpus):
//! `cargo run --release -p portcullis-detect --example throughput -- corpus/corpus.jsonl`.
//! Varied real text exercises the regex DFA caches in a way a repeated benchmark
//! paragraph does not.

use portcullis_core::NormalizeConfig;
use portcullis_detect::normalize::{normalize, TextKind};
use portcullis_detect::rules::{RuleSet, Target};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: throughput FILE.jsonl")?;
    let texts: Vec<String> = std::fs::read_to_string(path)?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_string))
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let rules = RuleSet::embedded()?;
    let caps = NormalizeConfig::default();
    let (lits, always) = rules.prefilter_stats();
    let cands: usize = texts
        .iter()
        .map(|t| rules.candidate_count(&t.to_lowercase()))
        .sum();
    println!(
        "{} patterns; prefilter: {lits} literals, {always} patterns without literals; {:.1} candidates per text",
        rules.pattern_count(),
        cands as f64 / texts.len() as f64
    );
    if std::env::var("PATTERN_COSTS").is_ok() {
        // Per pattern: how often it is a candidate and how long its regex takes.
        let mut cost: std::collections::HashMap<usize, (usize, u128)> = Default::default();
        for t in &texts {
            let n = normalize(t, TextKind::Prose, &caps);
            for v in &n.views {
                for p in rules.candidate_patterns(&v.text) {
                    let re = regex::Regex::new(rules.pattern_source(p).0)?;
                    let s = Instant::now();
                    let _ = re.is_match(&v.text);
                    let e = cost.entry(p).or_default();
                    e.0 += 1;
                    e.1 += s.elapsed().as_nanos();
                }
            }
        }
        let mut v: Vec<_> = cost.into_iter().collect();
        v.sort_by_key(|(_, (_, ns))| std::cmp::Reverse(*ns));
        for (p, (n, ns)) in v.iter().take(15) {
            let (src, id) = rules.pattern_source(*p);
            println!(
                "{:>8.1} ms {n:>6}x {id}: {}",
                *ns as f64 / 1e6,
                &src[..src.len().min(90)]
            );
        }
    }
    let views: Vec<Vec<String>> = texts
        .iter()
        .map(|t| {
            normalize(t, TextKind::Prose, &caps)
                .views
                .into_iter()
                .map(|v| v.text)
                .collect()
        })
        .collect();
    let s = Instant::now();
    let mut c = 0usize;
    for vs in &views {
        for v in vs {
            c += rules.candidate_count(v);
        }
    }
    println!(
        "prefilter alone: {:.2} us/KiB ({c} candidates)",
        s.elapsed().as_nanos() as f64 / 1e3 / (bytes as f64 / 1024.0)
    );
    for round in 0..3 {
        let (mut tn, mut tr) = (0u128, 0u128);
        let mut hits = 0usize;
        for t in &texts {
            let s = Instant::now();
            let n = normalize(t, TextKind::Prose, &caps);
            let m = Instant::now();
            hits += rules.scan(&n.views, Target::Text).len();
            tn += (m - s).as_nanos();
            tr += m.elapsed().as_nanos();
        }
        println!(
            "round {round}: {} texts, {:.1} KiB: normalize {:.2} us/KiB, rules {:.2} us/KiB, {hits} hits",
            texts.len(),
            bytes as f64 / 1024.0,
            tn as f64 / 1e3 / (bytes as f64 / 1024.0),
            tr as f64 / 1e3 / (bytes as f64 / 1024.0)
        );
    }
    Ok(())
}

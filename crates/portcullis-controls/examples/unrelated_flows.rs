//! How often the taint control sees a flow between two texts that have nothing
//! to do with each other: a result of one package's text and a call that sends
//! another package's text to another server. Every such "flow" is a false one
//! (the second text was not written from the first), and with `cross_server =
//! "block"` (the default) a blocked call.
//!
//! The texts are the harvest's (corpus/harvest: real documents, code and tool
//! results of Debian, PyPI and npm packages) of the **test** split only: the
//! list of names real software shares (`data/common_names.txt`) was made from
//! the train and dev splits. For each pair it reports whether the call matches
//! a label as the control rules now, and whether it did before that list
//! (a listed name of the result found in the call).
//!
//!     cargo run --profile bench -p portcullis-controls --example unrelated_flows -- \
//!         [corpus/harvest] [pairs, default 5000] [--doc-code]
//!
//! `--doc-code` pairs related texts instead: a package's documentation (a
//! README, `.md` or `.rst` file of the harvested texts) as the result and the
//! package's own code (`.py`, `.js`, `.ts`, `.mjs`, `.cjs`) as the call — a
//! stand-in for an agent that reads a library's docs through one server and
//! runs code written with it through another. Such a call carries the
//! library's own names, which no list of names shared by many projects holds;
//! every flow found is still not data leaving, so it counts as a false one.
//! The "before the list" row is this run's estimate (a flow found, or a listed
//! name of the result in the call), not an older checkout's control. The last
//! row leaves out the flows of names of code written as code
//! (`code_name::written_as_code`, the flow `taint.code_name`, allowed by default): the
//! pairs whose call is still blocked by default. Its rule was shaped on the
//! train split's pairs (`unrelated_flows` reads only the test split).
//!
//! To measure the control as it was before the list, copy this file into an
//! older checkout with `fn common_name(_: &str) -> bool { false }` in place of
//! the import (its "with the list" row is then that checkout's control).
use portcullis_controls::taint::{common_name, tokens, Label, TaintStore};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};

const FILES: [&str; 3] = [
    "texts.jsonl.gz",
    "texts-assistants.jsonl.gz",
    "results.jsonl.gz",
];

/// Each package's split as the corpus loader assigns it, from MANIFEST.json (as
/// `scripts/harvest/common_names.py` reads it).
fn splits(dir: &str) -> anyhow::Result<HashMap<String, String>> {
    let path = format!("{dir}/MANIFEST.json");
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{path}: {e}"))?,
    )?;
    let mut out = HashMap::new();
    for f in ["texts.jsonl.gz", "texts-assistants.jsonl.gz"] {
        for (g, p) in m["files"][f]["packages"].as_object().into_iter().flatten() {
            if let Some(s) = p["split"].as_str() {
                out.insert(g.clone(), s.to_string());
            }
        }
    }
    for p in m["results"]["data_packages"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let (Some(g), Some(s)) = (p["package"].as_str(), p["split"].as_str()) {
            out.insert(g.to_string(), s.to_string());
        }
    }
    Ok(out)
}

/// What a harvested text is, by its file name (the origin's path).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Doc,
    Code,
    Other,
}

fn kind_of(origin: &str) -> Kind {
    let path = origin.split('#').next().unwrap_or_default().to_lowercase();
    let name = path.rsplit('/').next().unwrap_or_default();
    if name.starts_with("readme") || name.ends_with(".md") || name.ends_with(".rst") {
        Kind::Doc
    } else if [".py", ".js", ".ts", ".mjs", ".cjs"]
        .iter()
        .any(|e| name.ends_with(e))
    {
        Kind::Code
    } else {
        Kind::Other
    }
}

/// Wilson 95% interval of k of n, in percent.
fn wilson(k: usize, n: usize) -> (f64, f64) {
    let (lo, hi) = portcullis_core::stats::wilson(k as u64, n as u64, 1.96);
    (100.0 * lo, 100.0 * hi)
}

fn main() -> anyhow::Result<()> {
    const USAGE: &str = "usage: unrelated_flows [HARVEST_DIR] [PAIRS] [--doc-code]";
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let before = args.len();
    args.retain(|a| a != "--doc-code");
    let doc_code = args.len() < before;
    if let Some(flag) = args.iter().find(|a| a.starts_with("--")) {
        anyhow::bail!("unknown option {flag:?}\n{USAGE}");
    }
    if args.len() > 2 {
        anyhow::bail!("too many arguments: {:?}\n{USAGE}", &args[2..]);
    }
    let dir = args.first().map_or("corpus/harvest", String::as_str);
    let pairs: usize = match args.get(1) {
        None => 5000,
        Some(n) => n
            .parse()
            .map_err(|e| anyhow::anyhow!("PAIRS {n:?} is not a count ({e})\n{USAGE}"))?,
    };
    if pairs == 0 {
        anyhow::bail!("PAIRS must be above 0\n{USAGE}");
    }
    let split = splits(dir)?;
    // (package, text, what it is: a document, code or neither)
    let mut texts: Vec<(String, String, Kind)> = Vec::new();
    for f in FILES {
        let path = format!("{dir}/{f}");
        let file = std::fs::File::open(&path).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
        for line in BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
            let r: Value = serde_json::from_str(&line?)?;
            let group = r["lineage_group"].as_str().unwrap_or_default().to_string();
            let text = r["text"].as_str().unwrap_or_default().to_string();
            let Some(s) = split.get(&group) else {
                anyhow::bail!("{path}: package {group} has no split in MANIFEST.json");
            };
            if s == "test" && !text.is_empty() {
                // A harvested result's origin is the call that made it, not a
                // file name: only the texts are documents or code.
                let kind = match f {
                    "results.jsonl.gz" => Kind::Other,
                    _ => kind_of(r["origin"].as_str().unwrap_or_default()),
                };
                texts.push((group, text, kind));
            }
        }
    }
    let groups = texts
        .iter()
        .map(|(g, _, _)| g.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len();
    let pairing = if doc_code {
        "a document and code of one package"
    } else {
        "texts of two packages"
    };
    println!(
        "{} texts of {groups} packages (test split); {pairs} pairs of {pairing}",
        texts.len()
    );
    if doc_code
        && !texts
            .iter()
            .any(|d| d.2 == Kind::Doc && texts.iter().any(|c| c.0 == d.0 && c.2 == Kind::Code))
    {
        anyhow::bail!("{dir}: no test-split package has both a document and code");
    }
    if !doc_code && groups < 2 {
        anyhow::bail!("{dir}: pairs of texts of two packages need two test-split packages");
    }
    // A fixed xorshift: the same pairs on every run.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let label = Label {
        server: "reader".into(),
        tool: "read".into(),
        record_id: "r".into(),
        sensitive: false,
        source: "result",
    };
    let (mut before, mut after, mut blocked) = (0usize, 0usize, 0usize);
    let mut left: HashMap<String, usize> = HashMap::new();
    let mut spared: HashMap<String, usize> = HashMap::new();
    let mut done = 0;
    while done < pairs {
        let a = &texts[(next() % texts.len() as u64) as usize];
        let b = &texts[(next() % texts.len() as u64) as usize];
        let wanted = if doc_code {
            a.0 == b.0 && a.2 == Kind::Doc && b.2 == Kind::Code
        } else {
            a.0 != b.0
        };
        if !wanted {
            continue;
        }
        done += 1;
        let mut store = TaintStore::new(100_000, 8);
        let result = json!({"content": [{"type": "text", "text": a.1}]});
        store.add_result(&result, &label);
        let found = store.matches(&json!({ "text": b.1 }));
        // A listed name of the result that the call carries: a match before the list.
        let names: Vec<&str> = tokens(&result, 8)
            .into_iter()
            .filter(|t| common_name(t) && b.1.contains(*t))
            .collect();
        if !found.is_empty() {
            after += 1;
        }
        if found.iter().any(|m| !m.code_name) {
            blocked += 1;
            for m in found.iter().filter(|m| !m.code_name) {
                *left.entry(format!("{} ({})", m.hint, m.how)).or_default() += 1;
            }
        }
        if !found.is_empty() || !names.is_empty() {
            before += 1;
        }
        if found.is_empty() && !names.is_empty() {
            for n in names {
                *spared.entry(n.to_string()).or_default() += 1;
            }
        }
    }
    println!("\n| taint labels | pairs with a false flow | % | Wilson 95% |\n|---|---|---|---|");
    for (name, k) in [
        ("before the list", before),
        ("with the list", after),
        (
            "with the list, names of code allowed (blocked by default)",
            blocked,
        ),
    ] {
        let (lo, hi) = wilson(k, pairs);
        println!(
            "| {name} | {k} of {pairs} | {:.2} | {lo:.2}–{hi:.2} |",
            100.0 * k as f64 / pairs as f64
        );
    }
    let top = |m: HashMap<String, usize>| {
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        v.truncate(15);
        v
    };
    println!("\nnames that no longer make a flow (pairs):");
    for (n, k) in top(spared) {
        println!("  {k:5}  {n}");
    }
    println!("\nvalues that are still blocked (redacted hint, how; pairs):");
    for (n, k) in top(left) {
        println!("  {k:5}  {n}");
    }
    Ok(())
}

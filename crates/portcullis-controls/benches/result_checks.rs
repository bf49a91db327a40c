//! The structural checks the gateway runs on every forwarded tool result, on the
//! request's own task: taint labelling (`TaintStore::label_result`) and the
//! tool-transfer check (`redirect::transfer`), on 64 KiB results of three kinds —
//! the proxy benchmark's numbered prose (a value-like line number every 64 bytes),
//! a CSV export (ids, dates, amounts in every row) and prose without numbers —
//! and on every call's arguments: the labelled values (`TaintStore::matches`,
//! with the labels of those results) and the definitions' values
//! (`DefinitionValues::matches`) in a 64 KiB argument.
//! Run: `cargo bench -p portcullis-controls`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use portcullis_controls::config::TaintConfig;
use portcullis_controls::operands::DefinitionValues;
use portcullis_controls::redirect;
use portcullis_controls::taint::{Label, TaintStore};
use serde_json::{json, Value};
use std::hint::black_box;

const KIB64: usize = 64 * 1024;

fn csv(bytes: usize) -> String {
    let mut out = String::from("id,customer,created,amount,currency,status,reference\n");
    let mut i = 0u64;
    while out.len() < bytes {
        out.push_str(&format!(
            "{},cus_{:06x},2026-{:02}-{:02},{}.{:02},EUR,{},INV-{:07}\n",
            100_000 + i,
            (i * 7919) % 0xffffff,
            1 + i % 12,
            1 + i % 28,
            10 + (i * 37) % 990,
            i % 100,
            ["paid", "open", "void"][(i % 3) as usize],
            i * 13
        ));
        i += 1;
    }
    out.truncate(bytes);
    out
}

fn prose(bytes: usize) -> String {
    let line = "The committee met in the spring and agreed on the new schedule for the library.\n";
    line.repeat(bytes / line.len() + 1)[..bytes].to_string()
}

/// Prose with accented letters (NFKC already: nothing to respell).
fn prose_de(bytes: usize) -> String {
    let line = "Der Ausschuss traf sich im Frühjahr und einigte sich auf den neuen Zeitplan für die Bücherei.\n";
    let mut s = line.repeat(bytes / line.len() + 1);
    while s.len() > bytes {
        s.pop();
    }
    s
}

/// A page's text with HTML entities in every line (respelled and tokenized
/// again for the labels of the plain form).
fn html(bytes: usize) -> String {
    let line = "<p>Terms &amp; conditions of the 2026 plan &#8212; see https://example.org/terms?a=1&amp;b=2</p>\n";
    line.repeat(bytes / line.len() + 1)[..bytes].to_string()
}

fn result(text: String) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": false })
}

fn label() -> Label {
    Label {
        server: "files".into(),
        tool: "read_file".into(),
        record_id: "0193a6f1-7c2e-7d7a-9f4e-2b1c3d4e5f60".into(),
        sensitive: false,
        source: "result",
    }
}

fn bench(c: &mut Criterion) {
    let results = [
        (
            "numbered-prose",
            result(portcullis_testkit::server::deterministic_text(KIB64)),
        ),
        ("csv", result(csv(KIB64))),
        ("prose", result(prose(KIB64))),
        ("prose-de", result(prose_de(KIB64))),
        ("html", result(html(KIB64))),
    ];
    let args = json!({ "path": "/srv/data/export.csv" });
    // The tools a client of @modelcontextprotocol/server-filesystem is listed.
    let known: Vec<String> = [
        "read_file",
        "read_multiple_files",
        "write_file",
        "edit_file",
        "create_directory",
        "list_directory",
        "directory_tree",
        "move_file",
        "search_files",
        "get_file_info",
        "list_allowed_directories",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut g = c.benchmark_group("result-64KiB");
    g.throughput(Throughput::Bytes(KIB64 as u64));
    for (name, r) in &results {
        // The store already holds this result's values (a server returning the
        // same file again): the steady state of the proxy benchmark.
        let cfg = TaintConfig::default();
        let mut store = TaintStore::new(cfg.max_values, cfg.min_len);
        store.label_result(r, r, &label());
        g.bench_function(format!("label_result/{name}"), |b| {
            b.iter(|| black_box(store.label_result(black_box(r), r, &label())))
        });
        g.bench_function(format!("transfer/{name}"), |b| {
            b.iter(|| black_box(redirect::transfer(black_box(r), "read_file", &args, &known)))
        });
    }
    g.finish();

    // A 64 KiB argument (a document the model writes or sends), against a
    // store holding the values of the results above, and the values written in
    // a listing's definitions.
    let cfg = TaintConfig::default();
    let mut store = TaintStore::new(cfg.max_values, cfg.min_len);
    for (_, r) in &results {
        store.label_result(r, r, &label());
    }
    let mut listing = DefinitionValues::new(cfg.min_len);
    let defs: Vec<(String, Value)> = (0..20)
        .map(|i| {
            (
                format!("tool_{i}"),
                json!({
                    "description": format!("Reads records from https://api.example.com/v{i}/records \
                        with the key ABCD-{i:04}-EFGH and writes them to /srv/data/out{i}.json."),
                    "inputSchema": {"type": "object", "properties": {"id": {"type": "string",
                        "description": format!("Record id, e.g. REC-{i:06}")}}}
                }),
            )
        })
        .collect();
    listing.listed("catalog", defs.iter().map(|(n, v)| (n.as_str(), v)));
    let mut g = c.benchmark_group("arguments-64KiB");
    g.throughput(Throughput::Bytes(KIB64 as u64));
    for (name, r) in &results {
        let args = json!({ "message": r["content"][0]["text"] });
        g.bench_function(format!("taint_matches/{name}"), |b| {
            b.iter(|| black_box(store.matches(black_box(&args))))
        });
        g.bench_function(format!("definition_matches/{name}"), |b| {
            b.iter(|| black_box(listing.matches("echo", "echo", black_box(&args))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

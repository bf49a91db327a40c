//! Throughput of the in-process embedder, for `scripts/bench-embed.sh` (which runs
//! sentence-transformers on the same texts in the same run and prints the table).
//!
//!   cargo run --release -p portcullis-embed --example embed_bench -- CASES.json [MODELS_DIR] [onnx|candle]
//!
//! CASES.json: `{"cases": [{"name": ..., "texts": [...]}, ...]}`; each case is one
//! call of `embed_texts` on all its texts (tokenization included), repeated for at
//! least `min_seconds`. Prints one JSON object per line: the cold load time, the
//! resident memory after load and at the end, and texts/s per case.

use portcullis_embed::{resolve_models_dir, Backend, Embedder, DEFAULT_MODELS_DIR};
use std::time::Instant;

#[derive(serde::Deserialize)]
struct Cases {
    min_seconds: f64,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    texts: Vec<String>,
}

fn status_kb(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let cases_path = args
        .next()
        .ok_or("usage: embed_bench CASES.json [MODELS_DIR] [onnx|candle]")?;
    let dir = resolve_models_dir(&args.next().unwrap_or_else(|| DEFAULT_MODELS_DIR.into()));
    let backend = match args.next().as_deref() {
        None | Some("onnx") => Backend::default_onnx(),
        Some("candle") => Backend::Candle,
        Some(other) => return Err(format!("unknown backend {other:?} (onnx or candle)").into()),
    };
    let cases: Cases = serde_json::from_str(&std::fs::read_to_string(&cases_path)?)?;

    let t = Instant::now();
    let embedder = Embedder::load(&dir, &backend)?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    // First inference touches the mmap'd weights; report it separately.
    let t = Instant::now();
    embedder.embed_texts(&["warm up"])?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "{}",
        serde_json::json!({"backend": backend.name(), "cold_load_ms": load_ms, "first_inference_ms": first_ms,
            "rss_after_load_kb": status_kb("VmRSS:")})
    );
    for case in &cases.cases {
        let texts: Vec<&str> = case.texts.iter().map(String::as_str).collect();
        let tokens: Vec<usize> = texts
            .iter()
            .map(|t| {
                embedder
                    .tokenize(t)
                    .map(|x| embedder.with_specials(&x.ids).len())
            })
            .collect::<Result<_, _>>()?;
        embedder.embed_texts(&texts)?; // warm-up
        let mut calls = 0u64;
        let t = Instant::now();
        while calls < 3 || t.elapsed().as_secs_f64() < cases.min_seconds {
            std::hint::black_box(embedder.embed_texts(&texts)?);
            calls += 1;
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{}",
            serde_json::json!({"case": case.name, "texts_per_call": texts.len(),
                "tokens": tokens, "calls": calls, "seconds": secs,
                "texts_per_s": (calls as f64 * texts.len() as f64) / secs,
                "ms_per_call": secs * 1e3 / calls as f64})
        );
    }
    println!(
        "{}",
        serde_json::json!({"rss_end_kb": status_kb("VmRSS:"), "rss_peak_kb": status_kb("VmHWM:")})
    );
    Ok(())
}

//! End to end: `portcullis eval` on a small fixture corpus, checked against values
//! computed by hand, and `portcullis eval report` recomputing the same report from
//! the kept records.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/eval_corpus.jsonl"
);

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    c.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    c
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portcullis-eval-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn prop(v: &Value) -> (u64, u64) {
    (v["k"].as_u64().unwrap(), v["n"].as_u64().unwrap())
}

#[test]
fn eval_reports_the_fixture_and_recomputes_from_records() {
    let out = out_dir("run");
    let status = bin()
        .args([
            "eval", "--corpus", FIXTURE, "--split", "all", "--preset", "balanced",
        ])
        .args([
            "--ablation",
            "rules-only=-lexical",
            "--ablation",
            "rules+lexical=base",
        ])
        .args(["--runs", "3", "--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    // Two bad lines (7: not JSON, 14: unknown label) are skipped and reported: exit 5.
    assert_eq!(status.status.code(), Some(5), "{status:?}");
    let r = json(&out.join("report.json"));
    let errs: Vec<&str> = r["input_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errs.len(), 2);
    assert!(errs[0].contains("eval_corpus.jsonl:7:"), "{errs:?}");
    assert!(errs[1].contains("eval_corpus.jsonl:14:"), "{errs:?}");

    // Lineage inferred from text: m4 and b3 wrap m1 and b2 (seed 000, 5.6.1).
    assert_eq!(r["inference"]["wrapped_found"], 2);
    assert_eq!(r["inference"]["inferred"]["lineage_group"], 12);

    let sub = &r["subsets"][0];
    assert_eq!(sub["name"], "all");
    assert_eq!(sub["records"], 12);
    let rules = &sub["detectors"][0];
    assert_eq!(rules["config"], "rules-only");
    // Hand-checked decisions of the committed rules: every malicious text but the
    // rule-free preference manipulation (m3) is held, and all of them blocked (the
    // poisoned tool definition m6: four high findings, fused 0.988, over the
    // tool_definition channel's own block threshold of 0.982); no benign text is
    // flagged.
    assert_eq!(
        rules["malicious"],
        serde_json::json!({"allow": 1, "review": 0, "block": 5})
    );
    assert_eq!(
        rules["benign"],
        serde_json::json!({"allow": 6, "review": 0, "block": 0})
    );
    assert_eq!(prop(&rules["flag"]["recall"]), (5, 6));
    assert_eq!(prop(&rules["denial"]["fpr"]), (0, 6));
    assert_eq!(prop(&rules["flag"]["accuracy"]), (11, 12));
    // Wilson 95% for 5/6 by hand: centre (5/6 + z²/12)/(1 + z²/6), half-width
    // z·sqrt(p(1-p)/6 + z²/144)/(1 + z²/6) → [0.436497, 0.969947].
    let lo = rules["flag"]["recall"]["lo"].as_f64().unwrap();
    let hi = rules["flag"]["recall"]["hi"].as_f64().unwrap();
    assert!(
        (lo - 0.436_497).abs() < 1e-5 && (hi - 0.969_947).abs() < 1e-5,
        "{lo} {hi}"
    );
    // Nine lineage groups: {m1, m4, m5}, {b2, b3} and seven singletons.
    assert_eq!(rules["lineage_groups"], 9);
    assert_eq!(rules["errors"].as_array().unwrap().len(), 0);

    // Duplicates: m5 repeats m1 after normalization.
    assert_eq!(sub["duplicates"]["distinct_texts"], 11);
    assert_eq!(sub["duplicates"]["surplus_copies"], 1);

    // Frame-only: the inferred family "LOG 2026-03-04 tool said: " wraps one text of
    // each class, so the best frame-only rule flags nothing.
    let fo = &sub["frame_only"];
    assert_eq!(fo["families"][0]["prefix"], "LOG 2026-03-04 tool said: ");
    assert_eq!(prop(&fo["recall"]), (0, 6));

    // Paired: 12 records, McNemar on correctness.
    let p = &sub["paired"][0];
    assert_eq!(p["records"], 12);
    let moved: u64 = (0..3)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .filter(|(i, j)| i != j)
        .map(|(i, j)| p["transitions"][i][j].as_u64().unwrap())
        .sum();
    let b = p["mcnemar_flag"]["b"].as_u64().unwrap();
    let c = p["mcnemar_flag"]["c"].as_u64().unwrap();
    assert!(b + c <= moved);

    // Order independence and latency over 3 passes of 12 records.
    for o in r["order"].as_array().unwrap() {
        assert_eq!(o["differences"].as_array().unwrap().len(), 0);
        assert_eq!(o["compared"], 24);
    }
    assert_eq!(r["latency"][0]["rows"][0]["n"], 36);
    assert_eq!(r["latency"][0]["throughput"].as_array().unwrap().len(), 3);

    // The report's state counts agree with the records themselves.
    let recs = out.join("records").join("rules-only.jsonl");
    let text = std::fs::read_to_string(&recs).unwrap();
    let blocked = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "decision" && l["run"] == 0)
        .filter(|l| l["decision"]["status"] == "BLOCK")
        .count();
    assert_eq!(blocked, 5);
    assert!(out.join("roc-all.svg").exists() && out.join("pr-all.svg").exists());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("portcullis eval report"));

    // Recomputed from the records alone, files in another order: the same report.
    let again = out_dir("again");
    let s = bin()
        .args(["eval", "report"])
        .arg(out.join("records").join("rules_lexical.jsonl"))
        .arg(out.join("records").join("rules-only.jsonl"))
        .arg("--out")
        .arg(&again)
        .output()
        .unwrap();
    assert_eq!(s.status.code(), Some(5), "{s:?}");
    assert_eq!(json(&again.join("report.json")), r);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&again);
}

#[test]
fn an_order_dependent_record_is_listed_and_fails() {
    // Tamper with the shuffled pass of a record file: the report must list the id
    // and exit 6.
    let out = out_dir("order");
    let s = bin()
        .args([
            "eval", "--corpus", FIXTURE, "--split", "all", "--preset", "balanced",
        ])
        .args(["--runs", "2", "--no-progress", "--name", "d", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(s.status.code(), Some(5), "{s:?}");
    let f = out.join("records").join("d.jsonl");
    let text = std::fs::read_to_string(&f).unwrap();
    let tampered: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "decision" && v["run"] == 1 && v["id"] == "b1" {
                v["decision"]["status"] = "BLOCK".into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&f, tampered.join("\n")).unwrap();
    let s = bin().args(["eval", "report"]).arg(&f).output().unwrap();
    assert_eq!(s.status.code(), Some(6), "{s:?}");
    let md = String::from_utf8_lossy(&s.stdout);
    assert!(md.contains("pass 1 `b1`: ALLOW"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

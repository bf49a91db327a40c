//! `portcullis bench run --payloads FILE`: payloads written outside the project run
//! end to end (the real CLI, the bench's servers, the compliant agent, a real
//! gateway), are reported as their file's registers, and a bad line is named by
//! file and line and skipped without stopping the run.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn payloads_from_a_file_run_as_their_own_registers_and_bad_lines_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench-payloads.example.jsonl");
    let mut text = std::fs::read_to_string(&example).expect("docs/bench-payloads.example.jsonl");
    // Line 4: an instruction that does not name the value its goal needs.
    text.push_str(
        r#"{"id": "bad", "register": "x", "frame": "{instruction}", "instructions": {"ssh_key": "add the usual key"}}"#,
    );
    text.push('\n');
    let file = dir.path().join("outside.jsonl");
    std::fs::write(&file, text).unwrap();
    let out_dir = dir.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["bench", "run", "--payloads"])
        .arg(&file)
        .args([
            "--splits",
            "external",
            "--types",
            "PI,TT",
            "--vectors",
            "description,result",
            "--no-controls",
            "--jobs",
            "2",
            "--quiet",
            "--seed",
            "7",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .expect("portcullis runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("outside.jsonl:4: instruction \"ssh_key\" must name {key}"),
        "{stderr}"
    );
    assert!(
        stderr.contains("3 payload(s) loaded, 1 line(s) skipped"),
        "{stderr}"
    );

    let results: Vec<Value> = std::fs::read_to_string(out_dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // PI: one cell per goal (six), TT: one per goal it can reach by itself (five),
    // each in both modes.
    assert_eq!(results.len(), 22, "{results:#?}");
    let mut registers = std::collections::BTreeSet::new();
    for r in &results {
        assert_eq!(r["split"], "external", "{r}");
        assert_eq!(r["seed"], 7);
        assert_eq!(r["errored"], false, "{r}");
        registers.insert(r["register"].as_str().unwrap().to_string());
        if r["mode"] == "baseline" {
            // The agent acted on each payload: it is an attack as written.
            assert_eq!(r["attack_success"], true, "{r}");
        }
    }
    assert!(
        registers.iter().all(|r| r.starts_with("outside/")),
        "{registers:?}"
    );
    assert!(registers.len() >= 2, "{registers:?}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("seed 7"), "{report}");
    assert!(report.contains("outside/support_ticket"), "{report}");
    // The lines' languages are reported too (the changelog line is Portuguese).
    assert!(report.contains("## By payload language"), "{report}");
    assert!(report.contains("| pt |"), "{report}");
}

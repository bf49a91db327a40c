//! No defence knows the bench's values: no word of the vocabularies the attack
//! values are drawn from ([`portcullis_bench::operands`]), and no drawn value (a
//! tool name, path, key, number, canary, sink) of a sample of trials, appears in
//! the detection rules, the presets, or the code of the controls and the detector.
//! A defence that stops the bench has to stop it for reasons that hold elsewhere.

use portcullis_bench::operands::{vocabularies, Operands};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("workspace root")
        .to_path_buf()
}

/// Every file of the defence, lower-cased, with its path.
fn defence() -> Vec<(PathBuf, String)> {
    let root = root();
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = [
        "rules",
        "presets",
        "crates/portcullis-controls/src",
        "crates/portcullis-detect/src",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).expect("readable directory") {
                stack.push(e.expect("directory entry").path());
            }
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            // A source file's own unit tests (its `#[cfg(test)]` module, last in
            // every file here) are not the defence.
            let code = match p.extension().and_then(|e| e.to_str()) {
                Some("rs") => text.split("#[cfg(test)]").next().unwrap_or_default(),
                _ => &text,
            };
            out.push((p.clone(), code.to_lowercase()));
        }
    }
    assert!(
        out.len() > 20,
        "found only {} files of the defence",
        out.len()
    );
    out
}

#[test]
fn no_rule_preset_or_control_names_a_value_of_the_bench() {
    let files = defence();
    let mut found = Vec::new();
    let mut look = |what: &str, s: &str| {
        let needle = s.to_lowercase();
        for (p, text) in &files {
            if text.contains(&needle) {
                found.push(format!("{what} `{s}` in {}", p.display()));
            }
        }
    };
    for (name, words) in vocabularies() {
        for w in words {
            look(name, w);
        }
    }
    for i in 0..200 {
        for target in ["read_note", "send_email", "transfer", "read_file"] {
            let o = Operands::draw(1, &format!("vocabulary/{i}"), target);
            // Tool names are the target's words respelled (names any server may
            // have) plus vocabulary words, checked above; every other value must
            // be new to the defence.
            for v in &o.all()[3..] {
                look("drawn value", v);
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

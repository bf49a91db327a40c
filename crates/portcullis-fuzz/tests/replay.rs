//! Every committed corpus input and every kept crash input of every fuzz target,
//! run through the target's own function (the one the fuzz binary calls): what
//! was fuzzed still holds, and what once crashed is fixed. Needs no fuzzer.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted (none if it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_corpus_and_crash_input_runs_clean_through_its_target() {
    let mut empty = Vec::new();
    for t in portcullis_fuzz::TARGETS {
        let corpus = files(&fuzz_dir().join("corpus").join(t.name));
        if corpus.is_empty() {
            empty.push(t.name);
        }
        let crashes = files(&fuzz_dir().join("crashes").join(t.name));
        for f in corpus.iter().chain(&crashes) {
            let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let ok = std::panic::catch_unwind(|| (t.run)(&data));
            assert!(ok.is_ok(), "{}: {} panics", t.name, f.display());
        }
    }
    assert!(empty.is_empty(), "no committed corpus for {empty:?}");
}

#[test]
fn every_target_has_a_unique_name_and_is_found_by_it() {
    for t in portcullis_fuzz::TARGETS {
        let found = portcullis_fuzz::target(t.name).map(|f| f.name);
        assert_eq!(found, Some(t.name));
    }
    assert!(portcullis_fuzz::target("no-such-target").is_none());
}

//! The libFuzzer binary: runs the target named by `PORTCULLIS_FUZZ_TARGET` (one of
//! `portcullis_fuzz::TARGETS`). Started by scripts/fuzz.sh.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static TARGET: LazyLock<&'static portcullis_fuzz::Target> = LazyLock::new(|| {
    let name = std::env::var("PORTCULLIS_FUZZ_TARGET").unwrap_or_default();
    portcullis_fuzz::target(&name).unwrap_or_else(|| {
        let names: Vec<&str> = portcullis_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("PORTCULLIS_FUZZ_TARGET={name:?} is not a target; one of {names:?}");
        std::process::exit(2)
    })
});

fuzz_target!(|data: &[u8]| (TARGET.run)(data));

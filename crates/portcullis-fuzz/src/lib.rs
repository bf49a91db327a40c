//! The fuzz targets' bodies, one function per target.
//!
//! Each target takes the fuzzer's bytes and panics only when a property of the
//! code under test is broken (a panic inside that code is the same finding). The
//! fuzz binary (`fuzz/`, libFuzzer on the stable toolchain, see `docs/fuzzing.md`)
//! calls the function named by `PORTCULLIS_FUZZ_TARGET`; the replay test
//! (`tests/replay.rs`) runs every committed corpus file and every kept crash
//! through the same function, so CI checks exactly what is fuzzed.
//!
//! A new target is one file under `src/targets/` (its `mod` line in
//! `targets/mod.rs`) and its name in the `targets!` list below.

pub mod targets;

/// A fuzz target: its name (the corpus directory `fuzz/corpus/<name>`) and body.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// `TARGETS`, one line per target: its name is its module under `targets`.
macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        /// Every target, in the order `make fuzz` runs them.
        pub const TARGETS: &[Target] = &[$(Target {
            name: stringify!($name),
            run: targets::$name::run,
        }),*];
    };
}

targets![
    normalize,
    decode,
    tool_definition,
    jsonrpc_stdio,
    jsonrpc_http,
    clientconfig,
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

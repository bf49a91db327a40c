//! Coverage by construction (issue 22): `tests/coverage/run.py` takes the pinned MCP
//! JSON Schema of every protocol version the gateway accepts, builds for every string
//! position of every message type the gateway relays an instance with a unique marker
//! there (an injection toward the client, a secret toward a server), sends each through
//! the real `portcullis proxy` against a hostile upstream (stdio client and upstream, and
//! Streamable HTTP client and upstream), and fails on any position whose marker reached the other side without a
//! record naming the field — beyond the inert fields of docs/gateway.md and the measured
//! holes of tests/coverage/expected_failures.txt (a listed position that passes fails
//! too). It prints the coverage table (message types × fields, per version).
//!
//! Needs `scripts/setup-interop.sh` (its venv has `jsonschema`, which checks every
//! generated instance against its schema). `PORTCULLIS_COVERAGE_TABLE=FILE` writes the
//! table as Markdown, `PORTCULLIS_COVERAGE_REPORT=FILE` the per-position report (JSON),
//! `PORTCULLIS_COVERAGE_TRANSPORTS=stdio-http,http-stdio` other client-upstream pairs.

use std::process::Command;
use std::time::Duration;

use portcullis_testkit::interop::{python, repo_root, run_bounded};

const LIMIT: Duration = Duration::from_secs(10 * 60);

#[test]
fn every_string_position_of_every_relayed_message_is_inspected_or_inert() {
    let py = python();
    assert!(
        py.is_file(),
        "{} missing: run scripts/setup-interop.sh",
        py.display()
    );
    let work = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(&py);
    cmd.arg(repo_root().join("tests/coverage/run.py"))
        .arg("--portcullis")
        .arg(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--work")
        .arg(work.path());
    if let Some(t) = std::env::var_os("PORTCULLIS_COVERAGE_TABLE") {
        cmd.arg("--table").arg(t);
    }
    if let Some(r) = std::env::var_os("PORTCULLIS_COVERAGE_REPORT") {
        cmd.arg("--report").arg(r);
    }
    // CLIENT-UPSTREAM pairs; default stdio-stdio,http-http (both transports, both sides).
    if let Some(t) = std::env::var_os("PORTCULLIS_COVERAGE_TRANSPORTS") {
        cmd.arg("--transports").arg(t);
    }
    let (status, out, err) =
        run_bounded(&mut cmd, "tests/coverage/run.py", LIMIT).unwrap_or_else(|e| panic!("{e}"));
    println!("{out}");
    eprintln!("{err}");
    assert!(
        status.success(),
        "uncovered positions, stale expected failures or schema problems (FAIL / STALE / \
         PROBLEM lines above); exit {status}"
    );
    assert!(
        out.contains("coverage: ") && out.contains(" positions in 4 versions"),
        "run.py printed no summary"
    );
}

//! The real-server regression suite (tests/real_servers/README.md): 31 third-party MCP
//! servers from npm and PyPI, each driven direct and through `portcullis proxy` by the
//! Python and TypeScript SDK clients over stdio. Zero held, withheld or blocked items
//! under the default preset, and answers identical to direct, beyond the known failures
//! of tests/real_servers/known.json (each with its cause), or the test fails with the
//! table and every held item's stage, rule and reason.
//!
//! Needs `scripts/setup-interop.sh` (`make test` runs it through scripts/setup.sh) and
//! the `portcullis` binary (`cargo test --workspace` builds it; alone:
//! `cargo build -p portcullis`). `PORTCULLIS_REAL_SERVERS_TABLE=FILE` also writes the
//! table as Markdown (e.g. reports/real-servers/table.md);
//! `PORTCULLIS_REAL_SERVERS_ONLY=NAME,…` runs only those servers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use portcullis_testkit::interop::{interop_dir, python, repo_root, run_bounded};

/// The whole suite's deadline (it takes a few minutes on two cores).
const LIMIT: Duration = Duration::from_secs(20 * 60);

/// `$PORTCULLIS_BIN`, else `portcullis` in this test executable's profile directory.
fn portcullis_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PORTCULLIS_BIN") {
        return PathBuf::from(p);
    }
    let name = format!("portcullis{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(|d| d.join(&name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| repo_root().join("target/debug").join(name))
}

#[test]
fn real_servers_behind_the_gateway_hold_nothing_beyond_the_known_and_answer_as_direct() {
    let table = std::env::var_os("PORTCULLIS_REAL_SERVERS_TABLE");
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    if let Some(table) = table {
        args.extend(["--table".into(), table]);
    }
    run_script(
        "run.py",
        "portcullis-real-servers",
        &args,
        "items held, withheld, blocked or answered differently through the gateway",
    );
}

/// The same servers side by side behind ONE gateway (tests/real_servers/together.py):
/// what a client configuration with several servers meets. Nothing held, nothing
/// withheld, answers as direct. Until 2026-12-05 this setting held 35 real tools as
/// shadowing (another server's `search` or `fetch` named in a description) and lost
/// every resource template to one server without templates; no per-server test saw it.
#[test]
fn real_servers_side_by_side_behind_one_gateway_hold_nothing_and_answer_as_direct() {
    run_script(
        "together.py",
        "portcullis-together",
        &[],
        "items held, withheld or answered differently through one gateway",
    );
}

/// Every one of those servers configured twice behind one gateway (two roots, two
/// accounts), listings only (`together.py --all-twice --listing-only`): nothing held
/// or withheld. Before a name the server lists itself counted as its own, 50 of the
/// second instances' tools were held as look-alikes or shadowing of the first's.
#[test]
fn real_servers_configured_twice_behind_one_gateway_list_everything() {
    run_script(
        "together.py",
        "portcullis-twice",
        &["--all-twice".into(), "--listing-only".into()],
        "items held or withheld with every server configured twice",
    );
}

/// Run `tests/real_servers/SCRIPT` with the portcullis binary, a work directory
/// (kept on failure) and `args`; `PORTCULLIS_REAL_SERVERS_ONLY=NAME,…` chooses the
/// servers. Exit 0 passes, 3 is a missing set-up, anything else fails with the
/// script's report.
fn run_script(script: &str, work_prefix: &str, args: &[std::ffi::OsString], failure: &str) {
    let py = python();
    let installed = interop_dir().join("real-servers");
    assert!(
        py.is_file() && installed.join("node_modules").is_dir(),
        "the real servers are not installed ({} / {}): run scripts/setup-interop.sh \
         (make test runs it through scripts/setup.sh)",
        py.display(),
        installed.display()
    );
    let bin = portcullis_bin();
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build -p portcullis` (cargo test --workspace builds it)",
        bin.display()
    );
    let work = std::env::temp_dir().join(format!("{work_prefix}-{}", std::process::id()));
    let mut cmd = Command::new(&py);
    cmd.arg(repo_root().join("tests/real_servers").join(script))
        .arg("--portcullis")
        .arg(&bin)
        .arg("--work")
        .arg(&work)
        .args(args);
    // A subset while working on one server: PORTCULLIS_REAL_SERVERS_ONLY=git,fetch.
    if let Some(only) = std::env::var_os("PORTCULLIS_REAL_SERVERS_ONLY") {
        cmd.arg("--only").arg(only);
    }
    let what = format!("tests/real_servers/{script}");
    let (status, stdout, stderr) =
        run_bounded(&mut cmd, &what, LIMIT).unwrap_or_else(|e| panic!("{e} (killed)"));
    match status.code() {
        Some(0) => {
            println!("{stdout}");
            let _ = std::fs::remove_dir_all(&work);
        }
        Some(3) => panic!("{what}: set-up missing:\n{stderr}"),
        code => panic!(
            "{what}: {failure} (exit {code:?}; work files kept in {}):\n{stdout}\n--- stderr ---\n{}",
            work.display(),
            tail(&stderr, 4000)
        ),
    }
}

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

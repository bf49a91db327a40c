//! `portcullis-proxy-bench` end to end with its two floors in the gateway's place
//! (a byte relay; an rmcp pass-through): real child processes over stdio and
//! Streamable HTTP, every call answered with the upstream's own result.
//! The figures themselves are not checked (performance is measured, not tested).

use std::process::Command;

fn run_floor(floor: &str, extra: &[&str]) -> String {
    let bench = env!("CARGO_BIN_EXE_portcullis-proxy-bench");
    let out = Command::new(bench)
        .args([
            "--floor", floor, "--calls", "32", "--rounds", "2", "--warmup", "16",
        ])
        .args(["--long", "0", "--kib", "1", "--concurrency", "4"])
        // Not started with a floor, but it must exist.
        .args(["--portcullis", bench])
        .args(["--testserver", env!("CARGO_BIN_EXE_portcullis-testserver")])
        .args(extra)
        .output()
        .expect("run portcullis-proxy-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{floor}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn both_floors_relay_every_call_over_stdio_and_http() {
    for (floor, what) in [
        ("bytes", "a bare byte relay"),
        ("rmcp", "an rmcp pass-through"),
    ] {
        for extra in [&[][..], &["--keep-alive"][..]] {
            let report = run_floor(floor, extra);
            assert!(report.contains(what), "{report}");
            let rows: Vec<&str> = report
                .lines()
                .filter(|l| l.contains("testserver payload 1 KiB"))
                .collect();
            // stdio and http, each sequential and concurrent.
            assert_eq!(rows.len(), 4, "{report}");
            for row in rows {
                assert!(!row.contains("failed"), "{row}");
                assert!(
                    row.trim_end().ends_with("| 0/32 |"),
                    "nothing withheld: {row}"
                );
            }
        }
    }
}

//! The interop client drivers against the real test server, through
//! `portcullis_testkit::interop`. Needs `scripts/setup-interop.sh` first (`make test`
//! runs it); without it the tests fail and say so.

use std::time::Duration;

use portcullis_testkit::injections as inj;
use portcullis_testkit::interop::{interop_available, run_driver, testserver_bin, Driver};

const LIMIT: Duration = Duration::from_secs(90);

fn server() -> String {
    testserver_bin()
        .expect("cargo builds the test server for integration tests")
        .display()
        .to_string()
}

#[test]
fn both_drivers_see_every_attack_over_stdio() {
    assert!(
        interop_available(),
        "the interop kit is not installed: run scripts/setup-interop.sh first"
    );
    let bin = server();
    for driver in [Driver::Python, Driver::TypeScript] {
        let out = run_driver(
            driver,
            &[
                "--call",
                "fetch_page",
                "--call",
                "smart_summary",
                "--call",
                "account_setup",
                "--call",
                "daily_quote",
                "--read",
                "note://onboarding",
                "--stdio",
                "--",
                &bin,
                "--profile",
                "attack",
            ],
            LIMIT,
        )
        .expect("driver runs");
        assert_eq!(out.status, Some(0), "{driver:?}: {}", out.json);
        let j = &out.json;
        assert_eq!(j["instructions"], inj::INSTRUCTIONS, "{driver:?}");
        assert!(out.tool_names().contains(&"file_search".to_string()));
        assert_eq!(out.call_text("fetch_page").as_deref(), Some(inj::RESULT));
        assert_eq!(
            j["sampling_requests"][0]["messages"][0]["content"]["text"],
            inj::SAMPLING
        );
        assert_eq!(j["elicitation_requests"][0]["message"], inj::ELICITATION);
        assert!(out
            .call_text("smart_summary")
            .is_some_and(|t| t.contains("fixed sampling reply")));
        assert!(j["notifications"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed")));
        assert_eq!(
            j["reads"][0]["result"]["contents"][0]["text"],
            inj::RESOURCE
        );
    }
}

#[test]
fn faults_garbage_hang_and_crash_as_the_drivers_report_them() {
    assert!(
        interop_available(),
        "the interop kit is not installed: run scripts/setup-interop.sh first"
    );
    let bin = server();
    for driver in [Driver::Python, Driver::TypeScript] {
        let out = run_driver(
            driver,
            &[
                "--timeout",
                "2",
                "--call",
                "garbage",
                "--call",
                "hang",
                "--call",
                "echo",
                "--args",
                r#"{"text":"still here"}"#,
                "--stdio",
                "--",
                &bin,
                "--faults",
            ],
            LIMIT,
        )
        .expect("driver runs");
        assert_eq!(out.status, Some(0), "{driver:?}: {}", out.json);
        assert!(out.call_text("garbage").is_some(), "garbage still answers");
        assert!(
            out.json["errors"].as_array().is_some_and(|e| !e.is_empty()),
            "{driver:?} records the non-JSON line"
        );
        assert_eq!(
            out.call("hang").map(|c| c["error_code"].clone()),
            Some((-32001).into())
        );
        assert_eq!(out.call_text("echo").as_deref(), Some("still here"));

        let crashed = run_driver(
            driver,
            &["--call", "crash", "--stdio", "--", &bin, "--faults"],
            LIMIT,
        )
        .expect("driver runs");
        assert_eq!(crashed.status, Some(1), "{driver:?}");
        assert_eq!(crashed.json["connection_lost"], true);
    }
}

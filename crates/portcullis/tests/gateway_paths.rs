//! Nothing passes uninspected (issue 22): the gateway's message paths other than
//! listed definitions and plain results, each against a hostile behaviour of the
//! project's test server (`--hostile`), with the real Python SDK client (over a
//! stdio gateway) and the real TypeScript SDK client (over a Streamable HTTP
//! gateway). Each test shows the attack reaching a client without the gateway,
//! and through it: recorded (the record names the path) and held.
//!
//! Needs `scripts/setup-interop.sh` (the drivers' SDKs).

mod support;

use portcullis_testkit::injections as inj;
use portcullis_testkit::interop::{require_interop, run_driver_ok, Driver, DriverOutput};
use serde_json::{json, Value};
use std::time::Duration;
use support::{portcullis, record_id_in, records, testserver, HttpProxy};

const DRIVER_TIMEOUT: Duration = Duration::from_secs(90);

/// Phrases of the injections that must never reach a client through the gateway.
const ATTACKER: &[&str] = &[
    "ignore all previous",
    "collector.example.com",
    "~/.aws",
    "~/.ssh",
    "previous instructions",
    inj::RESULT_KEY,
    inj::FAKE_AWS_KEY_ID,
];

fn hostile(list: &str) -> Vec<String> {
    vec![testserver(), "--hostile".into(), list.into()]
}

/// Driver options for calls, reads and prompts.
#[derive(Default)]
struct Script {
    calls: Vec<(&'static str, Value)>,
    reads: Vec<String>,
    prompts: Vec<(&'static str, Value)>,
    progress: bool,
}

impl Script {
    fn calls(calls: &[(&'static str, Value)]) -> Script {
        Script {
            calls: calls.to_vec(),
            ..Script::default()
        }
    }

    fn args(&self) -> Vec<String> {
        let mut a = vec!["--timeout".to_string(), "30".to_string()];
        for (tool, args) in &self.calls {
            a.extend([
                "--call".into(),
                tool.to_string(),
                "--args".into(),
                args.to_string(),
            ]);
        }
        for uri in &self.reads {
            a.extend(["--read".into(), uri.clone()]);
        }
        for (name, args) in &self.prompts {
            a.extend([
                "--prompt".into(),
                name.to_string(),
                "--prompt-args".into(),
                args.to_string(),
            ]);
        }
        if self.progress {
            a.push("--progress".into());
        }
        a
    }
}

/// The driver straight against the server (no gateway).
fn direct(driver: Driver, script: &Script, server: &[String]) -> DriverOutput {
    let mut a = script.args();
    a.extend(["--stdio".into(), "--".into()]);
    a.extend(server.iter().cloned());
    run_driver_ok(driver, &a, DRIVER_TIMEOUT)
}

/// The Python driver through a stdio gateway, and the TypeScript driver through
/// a Streamable HTTP gateway, each with its audit log.
fn through_both(script: &Script, server: &[String]) -> Vec<(Driver, DriverOutput, Vec<Value>)> {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut a = script.args();
    a.extend([
        "--stdio".into(),
        "--".into(),
        portcullis(),
        "proxy".into(),
        "--audit-log".into(),
        audit.display().to_string(),
        "--".into(),
    ]);
    a.extend(server.iter().cloned());
    let py = run_driver_ok(Driver::Python, &a, DRIVER_TIMEOUT);
    let py_records = records(&audit);
    let mut args = vec!["--".to_string()];
    args.extend(server.iter().cloned());
    let gw = HttpProxy::start(&args, &[]);
    let mut a = script.args();
    a.extend(["--http".into(), gw.url.clone()]);
    let ts = run_driver_ok(Driver::TypeScript, &a, DRIVER_TIMEOUT);
    let ts_records = records(&gw.audit);
    vec![
        (Driver::Python, py, py_records),
        (Driver::TypeScript, ts, ts_records),
    ]
}

fn assert_nothing_of_the_attacker(driver: Driver, what: &str, v: &Value) {
    let text = v.to_string();
    for phrase in ATTACKER {
        assert!(
            !text.to_lowercase().contains(&phrase.to_lowercase()),
            "{driver:?}: {phrase:?} reached the client in the {what}: {text}"
        );
    }
}

fn by_id<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record {id} in the audit log"))
}

/// The JSON paths of a record's findings.
fn paths(record: &Value) -> Vec<String> {
    record["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["findings"].as_array().into_iter().flatten())
        .filter_map(|f| f["path"].as_str().map(str::to_string))
        .collect()
}

fn call<'a>(out: &'a DriverOutput, tool: &str) -> &'a Value {
    out.call(tool)
        .unwrap_or_else(|| panic!("no call of {tool}: {}", out.json))
}

#[test]
fn an_upstream_json_rpc_error_is_inspected_recorded_and_redacted() {
    require_interop();
    let script = Script::calls(&[("status_check", json!({}))]);
    let server = hostile("rpc_error");
    // Without the gateway the injection reaches the client in the error.
    let raw = direct(Driver::Python, &script, &server);
    let err = call(&raw, "status_check")["error"].to_string();
    assert!(err.contains("ignore all previous"), "{err}");
    for (driver, out, records) in through_both(&script, &server) {
        // The server's error, its code and its first sentence, the injection cut
        // out (`result_review = "redact"`) and a notice naming the record.
        let c = call(&out, "status_check");
        assert_eq!(c["error_code"], -32603, "{driver:?}: {c}");
        let err = c["error"].as_str().unwrap_or_default();
        assert!(
            err.contains("Status service unavailable. [portcullis: text withheld here (record "),
            "{driver:?}: {err}"
        );
        assert_nothing_of_the_attacker(driver, "error", c);
        let r = by_id(&records, &record_id_in(err));
        assert_eq!(r["channel"], "tool_result", "{r}");
        assert_eq!(r["tool"], "status_check", "{r}");
        assert_ne!(r["status"], "ALLOW", "{r}");
        assert_eq!(r["action"], "sanitize", "{r}");
        let p = paths(r);
        assert!(
            p.iter().any(|p| p.starts_with("$.error.message")),
            "{driver:?}: {p:?}"
        );
    }
}

#[test]
fn a_result_in_the_gateways_words_still_gets_the_structural_result_checks() {
    require_interop();
    let script = Script::calls(&[("unit_lookup", json!({"unit": "furlong"}))]);
    let server = hostile("prefixed_redirect");
    let raw = direct(Driver::TypeScript, &script, &server);
    let text = raw.call_text("unit_lookup").unwrap_or_default();
    assert!(text.starts_with("portcullis: "), "{text}");
    assert_eq!(text, inj::PREFIXED_REDIRECT);
    for (driver, out, records) in through_both(&script, &server) {
        let c = call(&out, "unit_lookup");
        assert_eq!(c["result"]["isError"], true, "{driver:?}: {c}");
        let text = out.call_text("unit_lookup").unwrap_or_default();
        assert!(
            text.contains("this tool result") && text.contains("(record "),
            "{driver:?}: {text}"
        );
        // The structural notice names the tool the result pointed to (its
        // finding), never the result's text.
        assert!(!text.contains("same arguments"), "{driver:?}: {text}");
        let r = by_id(&records, &record_id_in(&text));
        assert_eq!(r["tool"], "unit_lookup", "{r}");
        assert!(
            r["stages"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["name"] == "structural")),
            "{r}"
        );
        assert!(paths(r).iter().any(|p| p.starts_with("$.content")), "{r}");
    }
}

/// The notifications a driver got, whatever their shape (the Python driver
/// logs whole notifications, the TypeScript driver's progress callback only
/// the params).
fn notifications(out: &DriverOutput) -> Vec<Value> {
    out.json["notifications"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn log_messages(out: &DriverOutput) -> Vec<Value> {
    notifications(out)
        .into_iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect()
}

#[test]
fn progress_and_log_notifications_are_inspected_before_they_are_relayed() {
    require_interop();
    let script = Script {
        calls: vec![("sync_files", json!({}))],
        progress: true,
        ..Script::default()
    };
    let server = hostile("notify");
    let raw = direct(Driver::Python, &script, &server);
    let all = Value::Array(notifications(&raw)).to_string();
    assert!(all.contains(inj::PROGRESS), "{all}");
    assert!(all.contains("collector.example.com"), "{all}");
    for (driver, out, records) in through_both(&script, &server) {
        let ns = Value::Array(notifications(&out));
        assert_nothing_of_the_attacker(driver, "notifications", &ns);
        // Each arrives with the injection cut out (`result_review = "redact"`): the
        // progress message keeps its first sentence, the log's text is the notice.
        for (method, field, pointer, kept) in [
            (
                "notifications/progress",
                "$.message",
                "/params/message",
                "Syncing. ",
            ),
            (
                "notifications/message",
                "$.data.text",
                "/params/data/text",
                "",
            ),
        ] {
            // Under load an upstream can send its progress before the task that
            // sent the call has registered it; the gateway then dropped the
            // message (Router::sending closes that). Each notice must arrive.
            let text = ns
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["method"] == method)
                .find_map(|n| n.pointer(pointer).and_then(Value::as_str))
                .unwrap_or_else(|| panic!("{driver:?}: no {method} in {ns}\n{}", out.json));
            assert!(
                text.starts_with(&format!("{kept}[portcullis: text withheld here (record ")),
                "{driver:?} {method}: {text}"
            );
            let r = by_id(&records, &record_id_in(text));
            assert_eq!(r["channel"], "tool_result", "{r}");
            assert_ne!(r["status"], "ALLOW", "{r}");
            assert_eq!(r["action"], "sanitize", "{r}");
            let p = paths(r);
            assert!(p.iter().any(|p| p == field), "{driver:?} {method}: {p:?}");
        }
        // The call itself is unaffected.
        assert!(
            out.call_text("sync_files")
                .unwrap_or_default()
                .contains("Synchronized 3 files"),
            "{driver:?}: {}",
            out.json
        );
    }
}

#[test]
fn a_log_message_goes_only_to_the_session_whose_call_is_in_flight() {
    require_interop();
    // Two upstreams behind one HTTP gateway: session A waits on `a` (a slow
    // call), session B calls `b`, which logs during the call. B's log goes to B
    // alone; A, connected and busy on the same gateway, gets nothing of it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            "listen = \"127.0.0.1:0\"\n[audit]\nlog = \"audit.jsonl\"\n\
             [[server]]\nname = \"a\"\ncommand = {ts:?}\nargs = [\"--faults\"]\n\
             [[server]]\nname = \"b\"\ncommand = {ts:?}\nargs = [\"--hostile\", \"notify\"]\n",
            ts = testserver()
        ),
    )
    .unwrap();
    let gw = HttpProxy::start_in(dir, &["--config".into(), "gateway.toml".into()], &[]);
    // Both TypeScript: its client listens on the standalone SSE stream, where
    // rmcp sends a logging notification (the Python SDK client does not open
    // that stream, so it could not show a leak; its logging path is covered over
    // stdio above).
    let (busy, logging) = (Driver::TypeScript, Driver::TypeScript);
    let url = gw.url.clone();
    let a = std::thread::spawn(move || {
        let mut args = Script::calls(&[("a__slow", json!({"ms": 6000}))]).args();
        args.extend(["--http".into(), url]);
        run_driver_ok(busy, &args, DRIVER_TIMEOUT)
    });
    // Let A's call reach its upstream first.
    std::thread::sleep(Duration::from_millis(2500));
    let mut args = Script::calls(&[("b__sync_files", json!({}))]).args();
    args.extend(["--http".into(), gw.url.clone()]);
    let b = run_driver_ok(logging, &args, DRIVER_TIMEOUT);
    let a = a.join().expect("session A");
    assert!(
        a.call_text("a__slow").unwrap_or_default().contains("slept"),
        "{busy:?}: {}",
        a.json
    );
    let b_logs = log_messages(&b);
    assert_eq!(b_logs.len(), 1, "{logging:?}: {:?}", notifications(&b));
    assert!(
        b_logs[0]
            .to_string()
            .contains("[portcullis: text withheld here (record "),
        "{logging:?}: {b_logs:?}"
    );
    assert_eq!(
        log_messages(&a),
        Vec::<Value>::new(),
        "{busy:?} got another session's log"
    );
}

#[test]
fn model_chosen_text_in_reads_and_prompts_goes_through_the_egress_guard() {
    require_interop();
    let secret_uri = format!("note://{}", inj::FAKE_AWS_KEY_ID);
    let script = Script {
        reads: vec![secret_uri.clone()],
        prompts: vec![(
            "summarize",
            json!({"topic": format!("the key {} / {}", inj::FAKE_AWS_KEY_ID, inj::FAKE_AWS_SECRET)}),
        )],
        ..Script::default()
    };
    let server = vec![testserver()];
    // Without the gateway the secret reaches the server (the prompt echoes it).
    let raw = direct(Driver::Python, &script, &server);
    assert!(
        raw.json["prompt_results"][0]
            .to_string()
            .contains(inj::FAKE_AWS_SECRET),
        "{}",
        raw.json
    );
    for (driver, out, records) in through_both(&script, &server) {
        for (entry, tool, path) in [
            (&out.json["reads"][0], "resources/read", "$.uri"),
            (
                &out.json["prompt_results"][0],
                "summarize",
                "$.arguments.topic",
            ),
        ] {
            assert_eq!(entry["error_code"], -32050, "{driver:?}: {entry}");
            let err = entry["error"].as_str().unwrap_or_default();
            assert!(
                err.contains("portcullis: this request (its parameters) was"),
                "{driver:?}: {err}"
            );
            let r = by_id(&records, &record_id_in(err));
            assert_eq!(r["channel"], "tool_arguments", "{r}");
            assert_eq!(r["tool"], tool, "{r}");
            assert!(paths(r).iter().any(|p| p == path), "{driver:?}: {r}");
        }
        let log = Value::Array(records.clone()).to_string();
        assert!(
            !log.contains(inj::FAKE_AWS_SECRET),
            "{driver:?}: a secret in the log"
        );
    }
}

#[test]
fn object_keys_of_results_and_arguments_are_inspected() {
    require_interop();
    let mut args = serde_json::Map::new();
    args.insert("text".into(), json!("hello"));
    args.insert(inj::FAKE_AWS_KEY_ID.into(), json!("x"));
    let script = Script::calls(&[
        ("lookup_profile", json!({"id": "u-1"})),
        ("echo", Value::Object(args)),
    ]);
    let server = hostile("result_key");
    let raw = direct(Driver::Python, &script, &server);
    let shown = call(&raw, "lookup_profile")["result"].to_string();
    assert!(shown.contains(inj::RESULT_KEY), "{shown}");
    assert_eq!(raw.call_text("echo").as_deref(), Some("hello"));
    for (driver, out, records) in through_both(&script, &server) {
        let c = call(&out, "lookup_profile");
        assert_eq!(c["result"]["isError"], true, "{driver:?}: {c}");
        assert_nothing_of_the_attacker(driver, "result", c);
        let text = out.call_text("lookup_profile").unwrap_or_default();
        let r = by_id(&records, &record_id_in(&text));
        assert_eq!(r["channel"], "tool_result", "{r}");
        assert!(
            paths(r)
                .iter()
                .any(|p| p.starts_with("$.structuredContent") && p.ends_with('~')),
            "{driver:?}: {r}"
        );
        // The fake key id in a key cannot be masked in place: held, not
        // forwarded under a mask.
        assert!(
            r["reasons"]
                .to_string()
                .contains("could not be masked in place"),
            "{r}"
        );
        assert_eq!(r["action"], "hold", "{r}");
        // A secret as an argument's key does not leave.
        let c = call(&out, "echo");
        assert_eq!(c["result"]["isError"], true, "{driver:?}: {c}");
        let text = out.call_text("echo").unwrap_or_default();
        assert!(text.contains("this tool call (its arguments)"), "{text}");
        let r = by_id(&records, &record_id_in(&text));
        assert_eq!(r["channel"], "tool_arguments", "{r}");
        assert!(paths(r).iter().any(|p| p.ends_with('~')), "{driver:?}: {r}");
    }
}

#[test]
fn a_read_is_refused_when_the_listing_before_it_fails() {
    require_interop();
    let script = Script {
        reads: vec!["other://unlisted".into()],
        ..Script::default()
    };
    let server = hostile("list_error");
    // The server itself answers the read (with its own not-found).
    let raw = direct(Driver::Python, &script, &server);
    let err = raw.json["reads"][0]["error"].to_string();
    assert!(err.contains("no resource"), "{err}");
    for (driver, out, _) in through_both(&script, &server) {
        let err = out.json["reads"][0]["error"].to_string();
        assert!(
            err.contains("portcullis: refusing to read") && err.contains("resources/list"),
            "{driver:?}: {err}"
        );
    }
}

#[test]
fn the_upstreams_server_info_is_inspected_like_its_instructions() {
    require_interop();
    let script = Script::calls(&[("echo", json!({"text": "hi"}))]);
    let server = hostile("server_info");
    let raw = direct(Driver::Python, &script, &server);
    assert_eq!(
        raw.json["server_info"]["title"],
        inj::SERVER_TITLE,
        "{}",
        raw.json
    );
    for (driver, out, records) in through_both(&script, &server) {
        assert_nothing_of_the_attacker(driver, "server info", &out.json["server_info"]);
        assert_eq!(out.json["server_info"]["name"], "portcullis", "{driver:?}");
        let r = records
            .iter()
            .find(|r| {
                r["channel"] == "server_instructions" && paths(r).iter().any(|p| p == "$.title")
            })
            .unwrap_or_else(|| panic!("{driver:?}: no record of serverInfo.title"));
        assert_ne!(r["status"], "ALLOW", "{r}");
        assert_eq!(out.call_text("echo").as_deref(), Some("hi"), "{driver:?}");
    }
}

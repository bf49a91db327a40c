//! Fidelity: a client behind the gateway receives what the server sent, byte for
//! byte where nothing was decided. The real `server-everything` (npm) is driven by
//! the Python `mcp` SDK and TypeScript SDK drivers of `tests/interop/`, once
//! directly and once through `portcullis proxy` over stdio, and the two sessions
//! are compared: the tool list (entries, their keys and the order of every
//! object's keys), the capabilities, a structured tool result. Each comparison is
//! made for a client that declares sampling and elicitation and for one that
//! declares neither: the server offers its sampling and elicitation tools only
//! to a client that can serve them, and through the gateway it must see that
//! client, not the gateway's own abilities.
//!
//! Needs `scripts/setup-interop.sh` (it installs `.interop/`).

mod support;

use portcullis_testkit::interop::{
    require_interop, run_driver_ok, server_everything as everything, Driver, DriverOutput,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;
use support::{portcullis, records};

const DRIVER_TIMEOUT: Duration = Duration::from_secs(90);

/// The calls of both sessions: a result whose structured content's keys are not
/// in alphabetical order.
fn calls() -> Vec<String> {
    vec![
        "--timeout".into(),
        "30".into(),
        "--call".into(),
        "get-structured-content".into(),
        "--args".into(),
        json!({"location": "Chicago"}).to_string(),
    ]
}

fn run(driver: Driver, client: &[&str], target: Vec<String>) -> DriverOutput {
    let mut args = calls();
    args.extend(client.iter().map(|s| s.to_string()));
    args.push("--stdio".into());
    args.push("--".into());
    args.extend(target);
    run_driver_ok(driver, &args, DRIVER_TIMEOUT)
}

fn direct(driver: Driver, client: &[&str]) -> DriverOutput {
    run(driver, client, everything())
}

fn gateway(driver: Driver, client: &[&str], audit: &Path) -> DriverOutput {
    let mut target = vec![
        portcullis(),
        "proxy".into(),
        "--audit-log".into(),
        audit.display().to_string(),
        "--".into(),
    ];
    target.extend(everything());
    run(driver, client, target)
}

/// Tools whose definition the gateway decided on (held, sanitized, withheld):
/// the only ones allowed to differ from the server's.
fn decided_tools(audit: &Path) -> BTreeSet<String> {
    records(audit)
        .iter()
        .filter(|r| r["channel"] == "tool_definition" && r["action"] != "pass")
        .filter_map(|r| r["tool"].as_str().map(str::to_string))
        .collect()
}

fn tools(out: &DriverOutput) -> Vec<Value> {
    out.json["tools"].as_array().cloned().unwrap_or_default()
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every object key of a value with its path, in the order the map holds them:
/// two values with equal `key_paths` and equal content were sent in the same
/// order (serde_json's `==` ignores key order).
fn key_paths(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                out.push(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                key_paths(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn ordered(v: &Value) -> (String, Vec<String>) {
    let mut paths = Vec::new();
    key_paths(v, "$", &mut paths);
    (v.to_string(), paths)
}

/// What the gateway does not relay, taken out of the direct session's answers
/// before comparing (docs/gateway.md, "Fidelity"): the 2025-11-25 tasks of the
/// TypeScript SDK (`capabilities.tasks`, a tool's `execution`) are not in rmcp
/// 3.11's model, which implements the SEP-2663 tasks extension instead.
fn without_tasks(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.shift_remove("tasks");
        m.shift_remove("execution");
    }
    v
}

fn compare(driver: Driver, client: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let want = direct(driver, client);
    let got = gateway(driver, client, &audit);
    let decided = decided_tools(&audit);
    let label = format!("{driver:?} {client:?}");

    // Capabilities as the server declared them (listChanged as given).
    assert_eq!(
        ordered(&got.json["capabilities"]),
        ordered(&without_tasks(want.json["capabilities"].clone())),
        "{label}: capabilities through the gateway differ from direct"
    );

    // The tool list: the same entries in the same order, each with the same
    // keys in the same order at every depth, but for what the gateway decided.
    let want_tools: Vec<Value> = tools(&want)
        .into_iter()
        .filter(|t| !decided.contains(t["name"].as_str().unwrap_or("")))
        .map(without_tasks)
        .collect();
    let got_tools: Vec<Value> = tools(&got)
        .into_iter()
        .filter(|t| !decided.contains(t["name"].as_str().unwrap_or("")))
        .collect();
    let names = |ts: &[Value]| -> Vec<String> {
        ts.iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        names(&got_tools),
        names(&want_tools),
        "{label}: tool names (decided: {decided:?})"
    );
    for (g, w) in got_tools.iter().zip(&want_tools) {
        assert_eq!(ordered(g), ordered(w), "{label}: tool {}", w["name"]);
    }
    assert!(
        want_tools.len() >= 8,
        "{label}: too few undecided tools to compare ({decided:?})"
    );

    // Parameter order is meaning: a schema in the server's order, not sorted.
    let by_name = |ts: &[Value], n: &str| ts.iter().find(|t| t["name"] == n).cloned();
    if let Some(t) = by_name(&got_tools, "get-annotated-message") {
        assert_eq!(
            keys(&t["inputSchema"]["properties"]),
            ["messageType", "includeImage"],
            "{label}"
        );
    }
    let weather = ["temperature", "conditions", "humidity"];
    if let Some(t) = by_name(&got_tools, "get-structured-content") {
        assert_eq!(keys(&t["outputSchema"]["properties"]), weather, "{label}");
    }

    // A structured result as the server wrote it.
    let result = |o: &DriverOutput| o.call("get-structured-content").cloned();
    let (g, w) = (result(&got).unwrap(), result(&want).unwrap());
    assert!(
        g["error"].is_null() && g["result"]["isError"] != true,
        "{label}: {g}"
    );
    assert_eq!(
        ordered(&g["result"]["structuredContent"]),
        ordered(&w["result"]["structuredContent"]),
        "{label}"
    );
    assert_eq!(keys(&g["result"]["structuredContent"]), weather, "{label}");

    // The server offers its sampling tool to a client that samples, and only to
    // it; through the gateway too.
    let samples = !client.contains(&"--no-sampling");
    let offered = |o: &DriverOutput| {
        o.tool_names()
            .iter()
            .any(|n| n == "trigger-sampling-request")
    };
    assert_eq!(offered(&want), samples, "{label}: direct");
    if !decided.contains("trigger-sampling-request") {
        assert_eq!(offered(&got), samples, "{label}: through the gateway");
    }

    // What the gateway cannot relay is documented and absent: a task-required
    // tool reaches the client without its `execution`.
    let research = |o: &DriverOutput| by_name(&tools(o), "simulate-research-query");
    if let (Some(w), Some(g)) = (research(&want), research(&got)) {
        assert_eq!(w["execution"]["taskSupport"], "required", "{label}: {w}");
        assert!(g.get("execution").is_none(), "{label}: {g}");
    }
}

#[test]
fn server_everything_through_the_gateway_is_what_it_is_direct() {
    require_interop();
    for driver in [Driver::TypeScript, Driver::Python] {
        compare(driver, &[]);
        compare(driver, &["--no-sampling", "--no-elicitation"]);
    }
}

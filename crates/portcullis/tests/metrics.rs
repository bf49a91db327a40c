//! The gateway's Prometheus endpoint (`[metrics] listen`, `--metrics-listen`) and
//! JSON logs (`--log-format json`), as an operator sees them: a real `portcullis
//! proxy` in front of the project's test server, a real rmcp client over HTTP,
//! and the endpoint read with raw HTTP requests.

mod support;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use support::{portcullis, raw_http, records, testserver, HttpProxy};

/// One raw `GET /metrics`; returns (status, body).
fn get_metrics(addr: &str, host: &str) -> (u16, String) {
    let (status, resp) = raw_http(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    );
    let body = resp.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// The value of the sample whose name and labels are exactly `series`.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// The sum of every sample of metric `name` (any labels).
fn total(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn the_endpoint_counts_every_recorded_decision_and_request() {
    let gw = HttpProxy::start(
        &[
            "--metrics-listen".into(),
            "127.0.0.1:0".into(),
            "--log-format".into(),
            "json".into(),
            "--".into(),
            testserver(),
        ],
        &[("PORTCULLIS_LOG", "info")],
    );
    let stderr = gw.stderr();
    let url = stderr
        .lines()
        .find_map(|l| l.strip_prefix("portcullis: metrics on "))
        .unwrap_or_else(|| panic!("no metrics line; stderr:\n{stderr}"))
        .trim()
        .to_string();
    let addr = url
        .strip_prefix("http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .expect("http://ADDR/metrics")
        .to_string();

    // JSON logs: every tracing line is one object; the start-up line is there.
    let json_lines: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        json_lines
            .iter()
            .any(|v| v["fields"]["message"] == "gateway ready" && v["level"] == "INFO"),
        "no JSON `gateway ready` line; stderr:\n{stderr}"
    );

    const CALLS: usize = 5;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = ()
            .serve(StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(gw.url.as_str()),
            ))
            .await
            .expect("initialize over HTTP through the gateway");
        client.peer().list_all_tools().await.expect("tools/list");
        for i in 0..CALLS {
            let mut p = CallToolRequestParams::new("echo".to_string());
            p.arguments = json!({ "text": format!("hello {i}") }).as_object().cloned();
            let r = client.peer().call_tool(p).await.expect("tools/call");
            assert_ne!(r.is_error, Some(true), "{r:?}");
        }
        let _ = client.cancel().await;
    });

    let (status, page) = get_metrics(&addr, &addr);
    assert_eq!(status, 200, "{page}");
    let calls = sample(
        &page,
        r#"portcullis_request_duration_seconds_count{method="tools/call",outcome="ok"}"#,
    );
    assert_eq!(calls, Some(CALLS as f64), "{page}");
    assert_eq!(
        sample(
            &page,
            r#"portcullis_request_duration_seconds_count{method="tools/list",outcome="ok"}"#
        ),
        Some(1.0),
        "{page}"
    );
    // Every record in the log was counted, and nothing else.
    let logged = records(&gw.audit).len() as f64;
    assert!(logged >= (2 * CALLS) as f64, "{logged} records");
    assert_eq!(total(&page, "portcullis_decisions_total"), logged, "{page}");
    assert_eq!(
        sample(
            &page,
            r#"portcullis_decisions_total{channel="tool_result",status="ALLOW",action="pass"}"#
        ),
        Some(CALLS as f64),
        "{page}"
    );
    assert!(
        total(&page, "portcullis_stage_duration_seconds_count") >= logged,
        "{page}"
    );
    assert!(
        sample(&page, "portcullis_audit_write_duration_seconds_count").is_some_and(|n| n >= 1.0),
        "{page}"
    );
    let server_up = page
        .lines()
        .find(|l| l.starts_with("portcullis_upstream_up{"))
        .unwrap_or_else(|| panic!("no upstream_up; {page}"));
    assert!(server_up.ends_with(" 1"), "{server_up}");
    assert_eq!(
        sample(&page, "portcullis_review_pending"),
        Some(0.0),
        "{page}"
    );

    // A page loaded from another site cannot read it through DNS rebinding.
    let (status, body) = get_metrics(&addr, "evil.example");
    assert_eq!(status, 403, "{body}");
}

#[test]
fn a_metrics_endpoint_off_loopback_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(portcullis())
        .args(["proxy", "--metrics-listen", "0.0.0.0:0", "--audit-log"])
        .arg(dir.path().join("audit.jsonl"))
        .arg("--")
        .arg(testserver())
        .stdin(Stdio::null())
        .output()
        .expect("run portcullis proxy");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[metrics] listen") && err.contains("bearer_token_env"),
        "{err}"
    );
}

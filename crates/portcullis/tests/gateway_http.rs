//! The gateway's Streamable HTTP listener as an attacker and as several clients see
//! it: Origin and Host checks (DNS rebinding), the bearer token, concurrent
//! sessions, a client that vanishes mid-request, and the audit log's durability
//! when the gateway is killed right after answering; and its connections to an
//! HTTP upstream with and without `keep_alive`.
//!
//! Real parts only: the `portcullis proxy` binary, the project's test server behind
//! it, raw HTTP/1.1 requests and rmcp clients in front.

mod support;

use portcullis_testkit::interop::{require_interop, run_driver, Driver};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{raw_http, records, testserver, HttpProxy};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// A gateway over HTTP in front of the benign test server (with fault tools).
fn gateway(extra: &[&str], env: &[(&str, &str)]) -> HttpProxy {
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    if !args.iter().any(|a| a == "--config") {
        args.extend(["--".into(), testserver(), "--faults".into()]);
    }
    HttpProxy::start(&args, env)
}

/// One raw HTTP/1.1 POST of `body` to `/mcp`; returns (status, response head + body).
fn post(addr: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    raw_http(addr, &req)
}

async fn http_client(url: &str, token: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(t) = token {
        cfg = cfg.auth_header(t);
    }
    ().serve(StreamableHttpClientTransport::from_config(cfg))
        .await
        .expect("initialize over HTTP through the gateway")
}

async fn call_text(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> String {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = args.as_object().cloned();
    let r = client
        .peer()
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
    let v = serde_json::to_value(&r).unwrap();
    v["content"][0]["text"].as_str().unwrap_or_default().into()
}

#[test]
fn foreign_origin_and_host_are_refused_loopback_allowed() {
    let gw = gateway(&[], &[]);
    let (status, resp) = post(&gw.addr, &[("Origin", "http://evil.example")], INIT);
    assert_eq!(status, 403, "foreign Origin: {resp}");
    let (status, resp) = post(&gw.addr, &[("Origin", "https://evil.example:8443")], INIT);
    assert_eq!(status, 403, "foreign Origin with port: {resp}");
    // DNS rebinding: a page on evil.example resolved to 127.0.0.1.
    let (status, resp) = post(&gw.addr, &[("Host", "evil.example")], INIT);
    assert_eq!(status, 403, "foreign Host: {resp}");
    let port = gw.addr.rsplit(':').next().unwrap();
    let (status, resp) = post(&gw.addr, &[("Host", &format!("evil.example:{port}"))], INIT);
    assert_eq!(status, 403, "foreign Host with the right port: {resp}");
    // Loopback origins (any port), and no Origin at all (non-browser clients).
    for origin in ["http://localhost:5173", "http://127.0.0.1:3000"] {
        let (status, resp) = post(&gw.addr, &[("Origin", origin)], INIT);
        assert_eq!(status, 200, "{origin}: {resp}");
        assert!(resp.contains("\"protocolVersion\""), "{resp}");
    }
    let (status, resp) = post(&gw.addr, &[("Host", &format!("localhost:{port}"))], INIT);
    assert_eq!(status, 200, "Host localhost: {resp}");
    let (status, _) = post(&gw.addr, &[], INIT);
    assert_eq!(status, 200);
}

#[test]
fn bearer_token_is_required_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            r#"
listen = "127.0.0.1:0"
bearer_token_env = "PORTCULLIS_TEST_TOKEN"
[audit]
log = "audit.jsonl"
[[server]]
name = "kit"
command = {:?}
"#,
            testserver()
        ),
    )
    .unwrap();
    let token = "s3cret-test-token-0123456789";
    let gw = HttpProxy::start_in(
        dir,
        &["--config".into(), "gateway.toml".into()],
        &[("PORTCULLIS_TEST_TOKEN", token)],
    );
    let (status, resp) = post(&gw.addr, &[], INIT);
    assert_eq!(status, 401, "no token: {resp}");
    let (status, resp) = post(&gw.addr, &[("Authorization", "Bearer wrong-token")], INIT);
    assert_eq!(status, 401, "wrong token: {resp}");
    let (status, resp) = post(
        &gw.addr,
        &[("Authorization", &format!("Bearer {token}x"))],
        INIT,
    );
    assert_eq!(status, 401, "token with a suffix: {resp}");
    let (status, resp) = post(&gw.addr, &[("Authorization", token)], INIT);
    assert_eq!(status, 401, "token without the Bearer scheme: {resp}");
    let (status, resp) = post(
        &gw.addr,
        &[("Authorization", &format!("Bearer {token}"))],
        INIT,
    );
    assert_eq!(status, 200, "right token: {resp}");
    // The scheme is case-insensitive (RFC 7235), the token is not.
    let (status, resp) = post(
        &gw.addr,
        &[("Authorization", &format!("bearer {token}"))],
        INIT,
    );
    assert_eq!(status, 200, "lower-case scheme: {resp}");
    let (status, resp) = post(
        &gw.addr,
        &[("Authorization", &format!("Bearer {}", token.to_uppercase()))],
        INIT,
    );
    assert_eq!(status, 401, "token in another case: {resp}");
    // A real client with the token works end to end.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = http_client(&gw.url, Some(token)).await;
        assert_eq!(
            call_text(&c, "echo", json!({"text": "authorized"})).await,
            "authorized"
        );
        let _ = c.cancel().await;
    });
    // And the Python SDK's client: with the token it lists and calls, without
    // it the connection is refused.
    require_interop();
    let sdk = |headers: &[String]| {
        let mut args: Vec<String> = headers
            .iter()
            .flat_map(|h| ["--header".to_string(), h.clone()])
            .collect();
        args.extend([
            "--call".into(),
            "echo".into(),
            "--args".into(),
            r#"{"text":"sdk-authorized"}"#.into(),
            "--http".into(),
            gw.url.clone(),
        ]);
        run_driver(Driver::Python, &args, Duration::from_secs(60)).expect("python driver")
    };
    let out = sdk(&[format!("Authorization: Bearer {token}")]);
    assert_eq!(out.status, Some(0), "{}\n{}", out.json, out.stderr);
    assert_eq!(out.call_text("echo").as_deref(), Some("sdk-authorized"));
    assert!(out.tool_names().iter().any(|t| t == "echo"), "{}", out.json);
    let out = sdk(&[]);
    assert_ne!(out.status, Some(0), "no token: {}", out.json);
    assert!(out.tool_names().is_empty(), "{}", out.json);
    // The token never reaches the audit log.
    let raw = std::fs::read_to_string(&gw.audit).unwrap_or_default();
    assert!(!raw.contains(token));
}

/// `portcullis proxy` with `args`, expected to refuse to start: its exit code
/// and stderr.
fn refused(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(support::portcullis())
        .arg("proxy")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run portcullis proxy");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_listener_other_machines_reach_does_not_start_open() {
    let dir = tempfile::tempdir().unwrap();
    let server = testserver();
    // No token, no host names: refused before anything listens, naming the option.
    let (code, err) = refused(
        dir.path(),
        &[
            "--listen",
            "0.0.0.0:0",
            "--no-stdio",
            "--audit-log",
            "a.jsonl",
            "--",
            &server,
        ],
    );
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("bearer_token_env") && err.contains("0.0.0.0:0") && err.contains("loopback"),
        "{err}"
    );
    // A token but no host names: refused, naming `allowed_hosts`.
    let file = |extra: &str| {
        std::fs::write(
            dir.path().join("gateway.toml"),
            format!(
                "listen = \"0.0.0.0:0\"\n{extra}\n[audit]\nlog = \"audit.jsonl\"\n\
                 [[server]]\nname = \"kit\"\ncommand = {server:?}\n"
            ),
        )
        .unwrap();
    };
    file("bearer_token_env = \"PORTCULLIS_TEST_TOKEN\"");
    let (code, err) = refused(dir.path(), &["--config", "gateway.toml", "--no-stdio"]);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("allowed_hosts"), "{err}");
    // Both, but the variable is not set: refused, naming it.
    file("bearer_token_env = \"PORTCULLIS_UNSET_TOKEN_VAR\"\nallowed_hosts = [\"gw.test\"]");
    let (code, err) = refused(dir.path(), &["--config", "gateway.toml", "--no-stdio"]);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("PORTCULLIS_UNSET_TOKEN_VAR"), "{err}");
}

/// Request headers of one case.
type Headers<'a> = &'a [(&'a str, &'a str)];

#[test]
fn a_listener_other_machines_reach_checks_token_host_and_origin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            r#"
listen = "0.0.0.0:0"
bearer_token_env = "PORTCULLIS_TEST_TOKEN"
allowed_hosts = ["gw.test"]
allowed_origins = ["https://app.gw.test"]
[audit]
log = "audit.jsonl"
[[server]]
name = "kit"
command = {:?}
"#,
            testserver()
        ),
    )
    .unwrap();
    let token = "an0ther-test-token-9876543210";
    let gw = HttpProxy::start_in(
        dir,
        &[
            "--config".into(),
            "gateway.toml".into(),
            "--listen".into(),
            "0.0.0.0:0".into(),
        ],
        &[("PORTCULLIS_TEST_TOKEN", token)],
    );
    let port = gw.addr.rsplit(':').next().unwrap().to_string();
    let addr = format!("127.0.0.1:{port}");
    let host = format!("gw.test:{port}");
    let auth = format!("Bearer {token}");
    let lower = format!("bearer {token}");
    let cases: &[(Headers, u16, &str)] = &[
        (&[("Host", &host)], 401, "missing token"),
        (
            &[("Host", &host), ("Authorization", "Bearer nope")],
            401,
            "wrong token",
        ),
        (
            &[("Host", &host), ("Authorization", &auth)],
            200,
            "right token, listed host",
        ),
        (
            &[("Host", &host), ("Authorization", &lower)],
            200,
            "lower-case bearer",
        ),
        // The loopback default does not apply: a client cannot pass by
        // claiming to be local.
        (
            &[("Host", &addr), ("Authorization", &auth)],
            403,
            "Host 127.0.0.1",
        ),
        (
            &[("Host", "localhost"), ("Authorization", &auth)],
            403,
            "Host localhost",
        ),
        (
            &[("Host", "evil.example"), ("Authorization", &auth)],
            403,
            "foreign Host",
        ),
        (
            &[
                ("Host", &host),
                ("Authorization", &auth),
                ("Origin", "https://app.gw.test"),
            ],
            200,
            "listed Origin",
        ),
        (
            &[
                ("Host", &host),
                ("Authorization", &auth),
                ("Origin", "https://evil.example"),
            ],
            403,
            "foreign Origin",
        ),
        (
            &[
                ("Host", &host),
                ("Authorization", &auth),
                ("Origin", "http://localhost:5173"),
            ],
            403,
            "loopback Origin not listed",
        ),
    ];
    for (headers, want, what) in cases {
        let (status, resp) = post(&addr, headers, INIT);
        assert_eq!(status, *want, "{what}: {resp}");
        if *want == 200 {
            assert!(resp.contains("\"protocolVersion\""), "{what}: {resp}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_each_get_their_own_answers() {
    let gw = gateway(&[], &[]);
    let a = http_client(&gw.url, None).await;
    let b = http_client(&gw.url, None).await;
    let run = |c: RunningService<RoleClient, ()>, who: &'static str| async move {
        // 20 calls in flight at once on this session.
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..20 {
            let text = format!("{who}-{i}");
            let peer = c.peer().clone();
            calls.spawn(async move {
                let mut params = CallToolRequestParams::new("echo");
                params.arguments = json!({ "text": text }).as_object().cloned();
                let r = peer.call_tool(params).await.expect("echo");
                let got = serde_json::to_value(&r).unwrap()["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (text, got)
            });
        }
        let mut n = 0;
        while let Some(done) = calls.join_next().await {
            let (sent, got) = done.unwrap();
            assert_eq!(got, sent, "session {who} got another answer");
            n += 1;
        }
        assert_eq!(n, 20);
        // A sequential call after the burst still gets its own answer.
        let last = format!("{who}-last");
        assert_eq!(call_text(&c, "echo", json!({ "text": last })).await, last);
        c
    };
    let (a, b) = tokio::join!(tokio::spawn(run(a, "A")), tokio::spawn(run(b, "B")));
    let _ = a.unwrap().cancel().await;
    let _ = b.unwrap().cancel().await;
    assert!(tool_results(&gw, "echo") >= 40);
}

fn tool_results(gw: &HttpProxy, tool: &str) -> usize {
    records(&gw.audit)
        .iter()
        .filter(|r| r["channel"] == "tool_result" && r["tool"] == tool)
        .count()
}

/// Reads until `needle` appears in the stream (or panics after `timeout`).
fn read_until(s: &mut TcpStream, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&got).contains(needle) {
            break;
        }
    }
    String::from_utf8_lossy(&got).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanishing_mid_request_does_not_stop_the_gateway() {
    let mut gw = gateway(&[], &[]);
    let addr = gw.addr.clone();
    // Session A, by hand: initialize, initialized, then a slow call on a socket that
    // is closed after the call has reached the server (its first progress event).
    let vanished = tokio::task::spawn_blocking(move || {
        let (status, resp) = post(&addr, &[], INIT);
        assert_eq!(status, 200, "{resp}");
        let sid = resp
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .starts_with("mcp-session-id:")
                    .then(|| l["mcp-session-id:".len()..].trim().to_string())
            })
            .unwrap_or_else(|| panic!("no session id: {resp}"));
        let h = [
            ("Mcp-Session-Id", sid.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        let (status, resp) = post(
            &addr,
            &h,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(status, 202, "{resp}");
        let (status, resp) = post(
            &addr,
            &h,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        );
        assert_eq!(status, 200, "{resp}");
        assert!(resp.contains("slow"), "{resp}");
        let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"ms":4000},"_meta":{"progressToken":"p1"}}}"#;
        let mut s = TcpStream::connect(&addr).unwrap();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\n\
             MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let got = read_until(&mut s, "notifications/progress", Duration::from_secs(10));
        assert!(
            got.contains("notifications/progress"),
            "the slow call did not start: {got}"
        );
        // Vanish: close the socket with the call in flight.
        drop(s);
    });
    vanished.await.unwrap();
    // Session B is served, and promptly (not after A's slow call).
    let started = Instant::now();
    let b = http_client(&gw.url, None).await;
    assert_eq!(
        call_text(&b, "echo", json!({"text": "still here"})).await,
        "still here"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "session B waited {:?}",
        started.elapsed()
    );
    // And a slow call of its own completes.
    let r = call_text(&b, "slow", json!({"ms": 300})).await;
    assert!(!r.is_empty());
    gw.assert_alive();
    let _ = b.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_right_after_a_call_keeps_its_record() {
    // Over stdio, fsync on (the default).
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut child = tokio::process::Command::new(support::portcullis())
        .arg("proxy")
        .arg("--audit-log")
        .arg(&audit)
        .arg("--")
        .arg(testserver())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn portcullis proxy");
    let transport =
        AsyncRwTransport::new_client(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(transport).await.expect("initialize");
    client.peer().list_all_tools().await.unwrap();
    let before = records(&audit)
        .iter()
        .filter(|r| r["channel"] == "tool_result")
        .count();
    assert_eq!(before, 0);
    let text = "durable-call-7f3a";
    let mut params = CallToolRequestParams::new("echo");
    params.arguments = json!({ "text": text }).as_object().cloned();
    let r = client.peer().call_tool(params).await.unwrap();
    // SIGKILL the moment the answer is in: no chance to flush anything afterwards.
    child.start_kill().unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(
        serde_json::to_value(&r).unwrap()["content"][0]["text"],
        text
    );
    let log = records(&audit);
    let results: Vec<&Value> = log
        .iter()
        .filter(|r| r["channel"] == "tool_result" && r["tool"] == "echo")
        .collect();
    assert_eq!(results.len(), 1, "the forwarded result's record: {log:?}");
    assert_eq!(results[0]["status"], "ALLOW");
    // The call's arguments were decided (and logged) before the call went upstream.
    assert!(log
        .iter()
        .any(|r| r["channel"] == "tool_arguments" && r["tool"] == "echo"));
}

/// A gateway in front of an HTTP upstream opens a connection per request by
/// default and reuses one with `keep_alive = true`; answers are the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_reuses_upstream_connections() {
    for keep_alive in [false, true] {
        let server = portcullis_testkit::HttpServer::bind(
            portcullis_testkit::ServerOptions::benign(),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let accepted = server.accepted();
        let upstream = server.url();
        let stop = server.cancel_token();
        tokio::spawn(server.run());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gateway.toml"),
            format!(
                "[audit]\nlog = \"audit.jsonl\"\n[[server]]\nname = \"kit\"\nurl = {upstream:?}\nkeep_alive = {keep_alive}\n"
            ),
        )
        .unwrap();
        let gw = tokio::task::spawn_blocking(move || {
            HttpProxy::start_in(dir, &["--config".into(), "gateway.toml".into()], &[])
        })
        .await
        .unwrap();
        let client = http_client(&gw.url, None).await;
        let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
        for i in 0..20 {
            let text = format!("call {i}");
            assert_eq!(
                call_text(&client, "echo", json!({ "text": text })).await,
                text
            );
            // Pace the calls so the last response's stream has ended and its
            // connection is back in the pool (not a timing assertion).
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let opened = accepted.load(std::sync::atomic::Ordering::SeqCst) - before;
        if keep_alive {
            // A connection is reused once its last response stream has ended;
            // a call that starts before that (a loaded machine) opens another.
            assert!(opened < 10, "keep_alive: {opened} connections for 20 calls");
        } else {
            assert!(opened >= 20, "default: {opened} connections for 20 calls");
        }
        assert_eq!(tool_results(&gw, "echo"), 20, "every result has its record");
        let _ = client.cancel().await;
        stop.cancel();
    }
}

//! The gateway with real parts: the `portcullis proxy` binary as a child process,
//! the project's test server behind it (a real rmcp server over stdio or
//! Streamable HTTP), and an rmcp client in front. Every attack channel of the test
//! server is poisoned in turn; the tests check what reaches the client and what the
//! audit log holds.

mod support;

use portcullis_mcp::audit::{find_record, AuditConfig};
use portcullis_testkit::injections as inj;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use serde_json::json;
use std::time::Duration;
use support::{record_id_in, records, testserver, text_of, StdioProxy};

type Proxy = StdioProxy;

/// `portcullis proxy --audit-log … -- portcullis-testserver ARGS` over stdio.
async fn proxy(server_args: &[&str]) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--".to_string(), testserver()];
    args.extend(server_args.iter().map(|s| s.to_string()));
    let mut p = StdioProxy::with_audit_in(dir.path(), &args).await;
    p.dir = Some(dir);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_metadata_never_reaches_the_client() {
    let p = proxy(&["--profile", "attack"]).await;
    let info = p.client.peer().peer_info().unwrap();
    assert!(
        info.instructions.is_none(),
        "poisoned instructions were forwarded: {:?}",
        info.instructions
    );
    let tools = p.client.peer().list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for benign in ["echo", "add", "read_note"] {
        assert!(
            names.contains(&benign.to_string()),
            "{benign} missing: {names:?}"
        );
    }
    // Description poison, nested schema poison (title, enum) and a poisoned
    // property name are withheld.
    for poisoned in ["weather_lookup", "file_search"] {
        assert!(
            !names.contains(&poisoned.to_string()),
            "{poisoned} forwarded"
        );
    }
    let everything = serde_json::to_string(&tools).unwrap();
    for needle in [
        inj::SCHEMA_ENUM,
        inj::SCHEMA_PROPERTY_NAME,
        "~/.aws/credentials",
    ] {
        assert!(
            !everything.contains(needle),
            "{needle:?} reached the client"
        );
    }
    // A withheld tool cannot be called by name.
    let err = p
        .call("weather_lookup", json!({"city": "Oslo"}))
        .await
        .expect_err("a withheld tool is refused");
    assert_eq!(err.code.0, -32050, "{err:?}");
    let id = err.data.as_ref().unwrap()["record_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Every decision is in the log, and the index finds the one the error names.
    let log = records(&p.audit);
    assert!(log
        .iter()
        .any(|r| r["channel"] == "server_instructions" && r["status"] == "BLOCK"));
    let cfg = AuditConfig::at(&p.audit);
    let rec = find_record(&cfg, &id).unwrap().expect("indexed");
    assert_eq!(rec.tool.as_deref(), Some("weather_lookup"));
    assert_ne!(rec.status, portcullis_core::Status::Allow);
    // Benign calls pass unchanged.
    let r = p
        .call("echo", json!({"text": "hello there"}))
        .await
        .unwrap();
    assert_eq!(text_of(&r), "hello there");
}

/// [`support::configured`] in a directory the proxy keeps.
async fn configured_here(extra: &str, server_args: &[&str]) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let mut p = support::configured(dir.path(), server_args, extra, None).await;
    p.dir = Some(dir);
    p
}

/// A result or resource that carries an injection is forwarded without it
/// (`result_review = "redact"`, the default): the flagged sentence to the end of
/// its paragraph is cut, the rest (a page's title, an error's code) is kept, a
/// notice names the record in its place, and the record (status REVIEW or BLOCK,
/// action sanitize) says what was cut. A value of the cut text was never shown:
/// it is not labelled (as a masked secret would be), so it does not block a call
/// the user makes with it later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_results_and_resources_are_forwarded_without_the_injection() {
    // `echo` as a sink: a value labelled sensitive could not be sent to it.
    let p = configured_here(
        "[taint.classes]\n\"kit/echo\" = \"sink\"",
        &["--profile", "attack"],
    )
    .await;
    p.client.peer().list_all_tools().await.unwrap();
    let r = p
        .call("fetch_page", json!({"url": "https://example.com"}))
        .await
        .unwrap();
    assert_ne!(r["isError"], true, "{r}");
    let text = text_of(&r);
    assert!(
        text.starts_with(
            "Page title: Quarterly planning\n\n[portcullis: text withheld here (record "
        ),
        "{text}"
    );
    assert!(!text.contains("collector.example.com"), "{text}");
    let page = text.clone();
    let id = record_id_in(&text);
    let rec = find_record(&AuditConfig::at(&p.audit), &id)
        .unwrap()
        .unwrap();
    assert_eq!(rec.channel, portcullis_core::Channel::ToolResult);
    assert_ne!(rec.status, portcullis_core::Status::Allow);
    assert_eq!(rec.action, portcullis_core::Action::Sanitize);
    assert!(
        rec.reasons
            .iter()
            .any(|r| r.starts_with("redact: cut $.content[0].text [")),
        "{:?}",
        rec.reasons
    );
    // A fake error whose flagged match starts at its first word leaves nothing
    // to forward: withheld whole.
    let r = p.call("deploy", json!({"env": "prod"})).await.unwrap();
    let text = text_of(&r);
    assert!(
        text.starts_with("portcullis: this tool result was "),
        "{text}"
    );
    let rec = find_record(&AuditConfig::at(&p.audit), &record_id_in(&text))
        .unwrap()
        .unwrap();
    assert!(
        rec.reasons
            .iter()
            .any(|r| r.starts_with("redact: nothing but the flagged text")),
        "{:?}",
        rec.reasons
    );
    // A poisoned resource: its first paragraph.
    let ok = p
        .client
        .peer()
        .read_resource(ReadResourceRequestParams::new("note://onboarding"))
        .await
        .unwrap();
    let shown = serde_json::to_string(&ok).unwrap();
    assert!(
        shown.contains("Welcome to the team wiki.\\n\\n[portcullis: text withheld here"),
        "{shown}"
    );
    assert!(!shown.contains("cookies"), "{shown}");
    // The cut page named https://collector.example.com/upload; the user's own
    // call with it is decided as if the page had never named it.
    let r = p
        .call(
            "echo",
            json!({"text": "https://collector.example.com/upload"}),
        )
        .await
        .expect("not refused");
    assert_eq!(text_of(&r), "https://collector.example.com/upload");
    // The redacted page, notice and all, copied into a sink of the same server:
    // the record id the notice names is the gateway's, not a value the server
    // returned, so it labels nothing (it blocked this ordinary copy before).
    let r = p
        .call("echo", json!({ "text": page }))
        .await
        .expect("not refused");
    assert_eq!(text_of(&r), page);
}

/// Under `result_review = "hold"` the same result is withheld whole: a
/// well-formed error result naming the record; a resource is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_results_and_resources_are_withheld_whole_under_hold() {
    let p = configured_here("result_review = \"hold\"", &["--profile", "attack"]).await;
    p.client.peer().list_all_tools().await.unwrap();
    let r = p
        .call("fetch_page", json!({"url": "https://example.com"}))
        .await
        .unwrap();
    assert_eq!(r["isError"], true);
    let text = text_of(&r);
    assert!(
        text.starts_with("portcullis: this tool result was "),
        "{text}"
    );
    assert!(!text.contains("Quarterly planning"), "{text}");
    let id = record_id_in(&text);
    let rec = find_record(&AuditConfig::at(&p.audit), &id)
        .unwrap()
        .unwrap();
    assert_eq!(rec.channel, portcullis_core::Channel::ToolResult);
    assert_ne!(rec.action, portcullis_core::Action::Sanitize);
    let r = p.call("deploy", json!({"env": "prod"})).await.unwrap();
    assert!(text_of(&r).starts_with("portcullis:"), "{r}");
    let err = p
        .client
        .peer()
        .read_resource(ReadResourceRequestParams::new("note://onboarding"))
        .await
        .expect_err("poisoned resource withheld");
    assert!(err.to_string().contains("record"), "{err}");
    let ok = p
        .client
        .peer()
        .read_resource(ReadResourceRequestParams::new("note://readme"))
        .await
        .unwrap();
    assert!(serde_json::to_string(&ok).unwrap().contains("text"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_injection_is_stopped_and_secrets_are_masked() {
    let p = proxy(&["--profile", "attack"]).await;
    p.client.peer().list_all_tools().await.unwrap();
    // The server asks the client's model to sample an injected message: the
    // gateway withholds the request, the client never sees it.
    let r = p
        .call("smart_summary", json!({"text": "quarterly notes"}))
        .await;
    assert!(
        p.recorder.sampling.lock().unwrap().is_empty(),
        "the injected sampling request reached the client"
    );
    let shown = match r {
        Ok(v) => v.to_string(),
        Err(e) => e.to_string(),
    };
    assert!(!shown.contains(inj::SAMPLING), "{shown}");
    // Secrets in a result are masked before forwarding.
    let r = p.call("read_config", json!({})).await.unwrap();
    let text = text_of(&r);
    assert!(!text.contains(inj::FAKE_AWS_KEY_ID), "{text}");
    assert!(text.contains("region = eu-west-1"), "{text}");
    let log = records(&p.audit);
    assert!(log
        .iter()
        .any(|r| r["channel"] == "tool_result" && r["action"] == "mask"));
    // The log itself never holds the secret.
    let raw = std::fs::read_to_string(&p.audit).unwrap();
    assert!(!raw.contains(inj::FAKE_AWS_KEY_ID));
    assert!(!raw.contains(inj::FAKE_AWS_SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rug_pull_after_the_first_call_is_caught_on_re_list() {
    let p = proxy(&["--profile", "attack", "--poison", "rugpull"]).await;
    let before = p.client.peer().list_all_tools().await.unwrap();
    assert!(before.iter().any(|t| t.name == "daily_quote"));
    p.call("daily_quote", json!({})).await.unwrap();
    // The server sends tools/list_changed; the gateway re-lists through the same
    // inspection and then tells the client.
    let mut changed = false;
    for _ in 0..100 {
        if p.recorder
            .notifications
            .lock()
            .unwrap()
            .iter()
            .any(|m| m == "notifications/tools/list_changed")
        {
            changed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(changed, "no list_changed relayed");
    // The new text never reaches the client: it keeps the pinned version
    // (`pins.on_change = "keep_pinned"`, the default) and the tool stays usable.
    let after = p.client.peer().list_all_tools().await.unwrap();
    let quote = after
        .iter()
        .find(|t| t.name == "daily_quote")
        .expect("the pinned version stays listed");
    assert_eq!(quote.description.as_deref(), Some(inj::RUGPULL_BENIGN));
    p.call("daily_quote", json!({}))
        .await
        .expect("the pinned tool is callable");
    let raw = std::fs::read_to_string(&p.audit).unwrap();
    assert!(raw.contains("daily_quote"), "no record of the change");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rug_pull_withholds_the_tool_when_configured_to() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gateway.toml");
    std::fs::write(
        &cfg,
        format!(
            "stdio = true\n[pins]\non_change = \"withhold\"\n[audit]\nlog = \"audit.jsonl\"\n\
             [[server]]\nname = \"kit\"\ncommand = {s:?}\nargs = [\"--profile\", \"attack\", \"--poison\", \"rugpull\"]\n",
            s = testserver(),
        ),
    )
    .unwrap();
    let p = StdioProxy::start(
        &["--config".into(), cfg.display().to_string()],
        &dir.path().join("audit.jsonl"),
        &dir.path().join("audit.jsonl.state.sqlite"),
        None,
    )
    .await;
    let before = p.client.peer().list_all_tools().await.unwrap();
    assert!(before.iter().any(|t| t.name == "daily_quote"));
    p.call("daily_quote", json!({})).await.unwrap();
    p.notified("notifications/tools/list_changed", 1).await;
    let after = p.client.peer().list_all_tools().await.unwrap();
    assert!(
        !after.iter().any(|t| t.name == "daily_quote"),
        "the changed definition was forwarded"
    );
    let err = p.call("daily_quote", json!({})).await.expect_err("refused");
    assert_eq!(err.code.0, -32050);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_upstream_hang_crash_garbage_and_big_results() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gateway.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
stdio = true
request_timeout_secs = 3
max_message_bytes = 4194304
[audit]
log = "audit.jsonl"
[[server]]
name = "kit"
command = {server:?}
args = ["--profile", "benign", "--faults"]
max_restarts = 2
"#,
            server = testserver()
        ),
    )
    .unwrap();
    let audit = dir.path().join("audit.jsonl");
    let state = dir.path().join("audit.jsonl.state.sqlite");
    let p = StdioProxy::start(
        &["--config".into(), cfg.display().to_string()],
        &audit,
        &state,
        Some(dir),
    )
    .await;
    p.client.peer().list_all_tools().await.unwrap();
    // Garbage on the server's stdout: the gateway keeps serving.
    let r = p.call("garbage", json!({})).await.unwrap();
    assert!(text_of(&r).contains("garbage line"), "{r}");
    // A result over max_message_bytes: a clear error, then business as usual.
    let err = p
        .call("big", json!({"mib": 10}))
        .await
        .expect_err("too big");
    assert!(err.message.contains("max_message_bytes"), "{err:?}");
    assert_eq!(
        text_of(&p.call("echo", json!({"text": "after big"})).await.unwrap()),
        "after big"
    );
    // An upstream that never answers: a timeout error, the gateway keeps serving.
    let err = p.call("hang", json!({})).await.expect_err("times out");
    assert!(err.message.contains("did not answer"), "{err:?}");
    assert_eq!(
        text_of(&p.call("echo", json!({"text": "after hang"})).await.unwrap()),
        "after hang"
    );
    // The upstream dies mid-call: an error, then the child is restarted.
    let err = p.call("crash", json!({})).await.expect_err("crashed");
    assert!(!err.message.is_empty());
    let mut revived = false;
    for _ in 0..20 {
        if let Ok(r) = p.call("echo", json!({"text": "after crash"})).await {
            assert_eq!(text_of(&r), "after crash");
            revived = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(revived, "the gateway did not restart the upstream");
    // Every forwarded result has its record: the echo calls were logged.
    let log = records(&p.audit);
    let echoes = log
        .iter()
        .filter(|r| r["channel"] == "tool_result" && r["tool"] == "echo")
        .count();
    assert!(echoes >= 3, "{echoes} echo results logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_cancellation_pass_through() {
    let p = proxy(&["--profile", "benign", "--faults"]).await;
    p.client.peer().list_all_tools().await.unwrap();
    // rmcp's client sends a progress token with every request; the upstream's
    // progress comes back to the client under that token.
    let r = p.call("slow", json!({"ms": 250})).await.unwrap();
    assert_eq!(text_of(&r), "slept 250 ms");
    let progress = p
        .recorder
        .notifications
        .lock()
        .unwrap()
        .iter()
        .filter(|m| *m == "notifications/progress")
        .count();
    assert!(progress >= 1, "no progress relayed");
    // A cancelled call: the gateway relays the cancellation upstream and never
    // inspects (or logs) a result for it.
    let mut params = CallToolRequestParams::new("slow");
    params.arguments = json!({"ms": 1500}).as_object().cloned();
    let handle = p
        .client
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    handle.cancel(Some("test".into())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let slow_results = records(&p.audit)
        .iter()
        .filter(|r| r["channel"] == "tool_result" && r["tool"] == "slow")
        .count();
    assert_eq!(slow_results, 1, "the cancelled call's result was inspected");
    // The session is still usable.
    assert_eq!(
        text_of(&p.call("echo", json!({"text": "still here"})).await.unwrap()),
        "still here"
    );
}

/// Upstreams start side by side, and the error of a configuration with two
/// servers that cannot start is the first of them in the configuration's order,
/// whichever failed first: the gateway exits naming it, and the server that did
/// start is not left running.
#[test]
fn the_first_server_that_cannot_start_is_the_error_in_the_configurations_order() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let missing = |n: &str| dir.path().join(n).display().to_string();
    let cfg = dir.path().join("gateway.toml");
    std::fs::write(
        &cfg,
        format!(
            "stdio = true\n[audit]\nlog = \"audit.jsonl\"\n[state]\npath = \"state\"\n\
             [[server]]\nname = \"kit\"\ncommand = {t:?}\nargs = [\"--profile\", \"benign\"]\n\
             [[server]]\nname = \"second\"\ncommand = {b:?}\n\
             [[server]]\nname = \"third\"\ncommand = {c:?}\n",
            t = testserver(),
            b = missing("no-such-second"),
            c = missing("no-such-third"),
        ),
    )
    .unwrap();
    for _ in 0..3 {
        let mut child = std::process::Command::new(support::portcullis())
            .args(["proxy", "--config", cfg.to_str().unwrap()])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // The gateway may have exited before the client speaks (a closed pipe).
        let _ = writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        );
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let lines: Vec<String> = stderr.lines().map_while(Result::ok).collect();
        drop(stdin);
        let status = child.wait().unwrap();
        let text = lines.join("\n");
        assert!(!status.success(), "{text}");
        assert!(text.contains("no-such-second"), "{text}");
        assert!(!text.contains("no-such-third"), "{text}");
    }
}

//! Starts the real `portcullis-testserver` binary and talks to it with rmcp's client:
//! over stdio as a child process, and over Streamable HTTP.

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use portcullis_testkit::injections as inj;
use rmcp::model::{
    CallToolRequestParams, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ProtocolVersion, Tool,
};
#[allow(deprecated)]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, SamplingMessage};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ErrorData;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis-testserver");

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Recorder {
    list_changed: Arc<AtomicUsize>,
    notify: Arc<Notify>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

fn args(v: serde_json::Value) -> rmcp::model::JsonObject {
    v.as_object().cloned().unwrap_or_default()
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn description<'a>(tools: &'a [Tool], name: &str) -> Option<&'a str> {
    tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.description.as_deref())
}

#[tokio::test]
async fn stdio_child_process_lists_echoes_and_rug_pulls() -> anyhow::Result<()> {
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.args(["--profile", "attack", "--poison", "rugpull,secret"]);
    }))?;
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await?;

    let info = client.peer_info().context("server info after initialize")?;
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("portcullis-testserver")
    );
    // `instructions` poison is not selected: the attack profile's instructions stay plain.
    assert_eq!(
        info.instructions.as_deref(),
        Some("Portcullis test server (attack profile).")
    );

    let tools = client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "echo",
        "payload",
        "add",
        "read_note",
        "daily_quote",
        "read_config",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        !names.contains(&"weather_lookup"),
        "description poison not selected"
    );
    assert_eq!(
        description(&tools, "daily_quote"),
        Some(inj::RUGPULL_BENIGN)
    );

    let echoed = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(args(json!({"text": "hello gateway"}))),
        )
        .await?;
    assert_eq!(text_of(&echoed), "hello gateway");
    assert_ne!(echoed.is_error, Some(true));

    // Listing again before the first call of daily_quote: still benign.
    let again = client.list_all_tools().await?;
    assert_eq!(
        description(&again, "daily_quote"),
        Some(inj::RUGPULL_BENIGN)
    );

    let notified = recorder.notify.notified();
    client
        .call_tool(CallToolRequestParams::new("daily_quote"))
        .await?;
    tokio::time::timeout(Duration::from_secs(5), notified)
        .await
        .context("no tools/list_changed after the first daily_quote call")?;
    assert_eq!(recorder.list_changed.load(Ordering::SeqCst), 1);

    let after = client.list_all_tools().await?;
    assert_eq!(description(&after, "daily_quote"), Some(inj::RUGPULL));

    // A second call does not notify again.
    client
        .call_tool(CallToolRequestParams::new("daily_quote"))
        .await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(recorder.list_changed.load(Ordering::SeqCst), 1);

    let secret = client
        .call_tool(CallToolRequestParams::new("read_config"))
        .await?;
    let text = text_of(&secret);
    assert!(text.contains(inj::FAKE_AWS_KEY_ID) && text.contains(inj::FAKE_EMAIL));

    client.cancel().await?;
    Ok(())
}

/// A client that answers sampling with a fixed reply and declines elicitation, keeping
/// the messages it was sent.
#[derive(Clone, Default)]
struct Answerer {
    sampled: Arc<std::sync::Mutex<Vec<String>>>,
    elicited: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClientHandler for Answerer {
    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": ProtocolVersion::default(),
            "capabilities": {"sampling": {}, "elicitation": {"form": {}}},
            "clientInfo": {"name": "testkit-smoke", "version": "0"}
        }))
        .unwrap_or_default()
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let seen = serde_json::to_string(&params).unwrap_or_default();
        if let Ok(mut v) = self.sampled.lock() {
            v.push(seen);
        }
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("fixed reply"),
            "smoke-model".to_string(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let seen = serde_json::to_string(&request).unwrap_or_default();
        if let Ok(mut v) = self.elicited.lock() {
            v.push(seen);
        }
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }
}

#[tokio::test]
async fn rmcp_client_answers_sampling_and_elicitation_in_a_tool_call() -> anyhow::Result<()> {
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.args(["--profile", "attack", "--poison", "sampling,elicitation"]);
    }))?;
    let answerer = Answerer::default();
    let client = answerer.clone().serve(transport).await?;

    let summary = client
        .call_tool(CallToolRequestParams::new("smart_summary"))
        .await?;
    assert!(text_of(&summary).contains("fixed reply"), "{summary:?}");
    let setup = client
        .call_tool(CallToolRequestParams::new("account_setup"))
        .await?;
    assert!(text_of(&setup).contains("decline"), "{setup:?}");

    let sampled = answerer
        .sampled
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default();
    let elicited = answerer
        .elicited
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default();
    let escaped = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let sampling = escaped(inj::SAMPLING);
    let elicitation = escaped(inj::ELICITATION);
    assert_eq!(sampled.len(), 1);
    assert!(sampled[0].contains(sampling.trim_matches('"')));
    assert_eq!(elicited.len(), 1);
    assert!(elicited[0].contains(elicitation.trim_matches('"')));

    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn http_transport_answers_initialize_and_serves_tools() -> anyhow::Result<()> {
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
            "--profile",
            "attack",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stderr = child.stderr.take().context("stderr pipe")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.strip_prefix("listening on ") {
                return anyhow::Ok(url.to_string());
            }
        }
        anyhow::bail!("server exited before printing its address")
    })
    .await
    .context("server did not print its address in time")??;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = ().serve(transport).await?;
    let info = client.peer_info().context("server info after initialize")?;
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("portcullis-testserver")
    );
    assert_eq!(info.instructions.as_deref(), Some(inj::INSTRUCTIONS));

    let tools = client.list_all_tools().await?;
    assert!(tools.iter().any(|t| t.name == "file_search"));
    assert!(
        !tools.iter().any(|t| t.name == "garbage"),
        "garbage is a stdio-only fault"
    );
    let sum = client
        .call_tool(CallToolRequestParams::new("add").with_arguments(args(json!({"a": 40, "b": 2}))))
        .await?;
    assert_eq!(text_of(&sum), "42");

    client.cancel().await?;
    child.kill().await?;
    Ok(())
}

//! The chat-completions agent against a small local HTTP server that speaks the
//! OpenAI chat-completions wire format (a stand-in for Ollama / llama.cpp / vLLM: no
//! model endpoint is reachable where the tests run). The scripted "model" asks for
//! tools by the names it was offered, then answers; the calls go over MCP to the
//! bench's real notes server, and the trial is scored like any other. A failing
//! endpoint makes the trial errored (excluded and counted), never a failed attack.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use portcullis_bench::agent::openai::OpenAiConfig;
use portcullis_bench::agent::AgentConfig;
use portcullis_bench::runner::{self, Bins, Mode, RunOptions, TrialSpec};
use portcullis_bench::trace::{self, Event};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Fake {
    requests: Arc<Mutex<Vec<Value>>>,
    fail: bool,
}

/// The scripted model: search the notes, read the dentist note, answer.
async fn chat(State(f): State<Fake>, body: Bytes) -> axum::response::Response {
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    };
    f.requests.lock().unwrap().push(req.clone());
    if f.fail {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let tools: Vec<String> = req["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|x| x["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let named = |suffix: &str| {
        tools
            .iter()
            .find(|t| t.ends_with(suffix))
            .cloned()
            .unwrap_or_default()
    };
    let turn = req["messages"]
        .as_array()
        .map(|m| m.iter().filter(|x| x["role"] == "assistant").count())
        .unwrap_or(0);
    let message = match turn {
        0 => {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": named("search_notes"), "arguments": "{\"query\": \"dentist\"}"}}]})
        }
        1 => {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function",
            "function": {"name": named("read_note"), "arguments": "{\"id\": \"n4\"}"}}]})
        }
        _ => {
            json!({"role": "assistant", "content": "Your dentist appointment is on Friday at 14:30."})
        }
    };
    let answer = json!({"id": "x", "object": "chat.completion", "model": req["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]});
    (
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

async fn endpoint(fake: Fake) -> String {
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn spec(id: &str, model: &str) -> TrialSpec {
    TrialSpec {
        id: id.into(),
        mode: Mode::Baseline,
        agent: "openai".into(),
        model: model.into(),
        task: "notes-dentist".into(),
        domain: "notes".into(),
        attack: None,
        seed: 1,
        operands: portcullis_bench::operands::Operands::draw(1, id, ""),
    }
}

fn opts(out: &std::path::Path, cfg: OpenAiConfig) -> RunOptions {
    RunOptions {
        out: out.to_path_buf(),
        jobs: 1,
        agent: AgentConfig::OpenAi(cfg),
        preset: None,
        detector: None,
        keep_sandboxes: false,
        progress: false,
        trial_timeout: Duration::from_secs(60),
    }
}

fn bins() -> Bins {
    Bins {
        // Baseline only: the gateway binary is not used.
        portcullis: "/nonexistent/portcullis".into(),
        server: env!("CARGO_BIN_EXE_portcullis-benchserver").into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_agent_does_the_task_over_mcp_with_tool_calls() {
    let fake = Fake::default();
    let url = endpoint(fake.clone()).await;
    let mut cfg = OpenAiConfig::new(&url, "local-test-model");
    cfg.temperature = 0.7;
    cfg.seed = Some(42);
    let out = tempfile::tempdir().unwrap();
    let r = runner::run_trial(
        spec("chat-ok", "local-test-model"),
        &opts(out.path(), cfg),
        &bins(),
    )
    .await;
    assert!(!r.score.errored, "{:?}", r.score.error);
    assert!(
        r.score.task_done,
        "the task check passes on what the agent received"
    );
    assert_eq!(r.tool_calls, 2);
    let reqs = fake.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["model"], "local-test-model");
    assert_eq!(reqs[0]["seed"], 42);
    assert!((reqs[0]["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-9);
    let names: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"notes__read_note") && names.contains(&"files__read_file"),
        "{names:?}"
    );
    // The tool result went back to the model as a `tool` message.
    let last = reqs[2]["messages"].as_array().unwrap();
    assert!(last
        .iter()
        .any(|m| m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("14:30")));
    let events = trace::read(&out.path().join(&r.trace)).unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Call { tool, .. } if tool == "notes__read_note")));
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Message { .. }))
            .count()
            >= 5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_endpoint_makes_the_trial_errored_after_retries() {
    let fake = Fake {
        fail: true,
        ..Fake::default()
    };
    let url = endpoint(fake.clone()).await;
    let mut cfg = OpenAiConfig::new(&url, "m");
    cfg.retries = 1;
    let out = tempfile::tempdir().unwrap();
    let r = runner::run_trial(spec("chat-down", "m"), &opts(out.path(), cfg), &bins()).await;
    assert!(r.score.errored);
    assert!(
        r.score.error.as_deref().unwrap_or("").contains("HTTP 500"),
        "{:?}",
        r.score.error
    );
    assert!(!r.score.attack_success && !r.score.task_done);
    assert_eq!(
        fake.requests.lock().unwrap().len(),
        2,
        "one try and one retry"
    );
}

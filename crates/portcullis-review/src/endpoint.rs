//! A local model server: Ollama (`POST {url}/api/chat`) or any OpenAI-compatible
//! server (`POST {url}/chat/completions`, `url` ending in `/v1` as the OpenAI
//! clients take it). Temperature 0 and a fixed seed; the answer must be exactly the
//! JSON object of [`crate::parse::json`], anything else is an error.

use crate::prompt::{AnswerFormat, Prompt};
use crate::{parse, Backend, ReviewError, Verdict};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Ollama,
    OpenAi,
}

#[derive(Debug, Clone)]
pub struct EndpointSpec {
    pub api: Api,
    /// Base URL (Ollama: `http://127.0.0.1:11434`; OpenAI-compatible:
    /// `http://127.0.0.1:8080/v1`).
    pub url: String,
    pub model: String,
    /// Sent as the request's seed (repeatability where the server honours it).
    pub seed: u64,
    /// Bearer token for an OpenAI-compatible server, if it wants one.
    pub api_key: Option<String>,
}

pub struct Endpoint {
    spec: EndpointSpec,
    prompt: Prompt,
    template: String,
    /// Made on first use, on the worker's own thread: the blocking client runs
    /// a runtime of its own and must not be created inside an async context.
    client: Option<reqwest::blocking::Client>,
}

impl Endpoint {
    pub fn new(spec: EndpointSpec) -> Endpoint {
        let prompt = Prompt::new(AnswerFormat::Json);
        Endpoint {
            template: prompt.sha256(),
            spec,
            prompt,
            client: None,
        }
    }

    fn messages(&self, text: &str) -> Vec<Value> {
        let mut m = vec![json!({"role": "system", "content": self.prompt.system})];
        for (shot, label) in &self.prompt.shots {
            m.push(json!({"role": "user", "content": self.prompt.user_message(shot)}));
            m.push(json!({"role": "assistant", "content": self.prompt.answer(*label)}));
        }
        m.push(json!({"role": "user", "content": self.prompt.user_message(text)}));
        m
    }

    fn err(&self, message: impl std::fmt::Display) -> ReviewError {
        ReviewError::Endpoint {
            url: self.spec.url.clone(),
            message: message.to_string(),
        }
    }
}

impl Backend for Endpoint {
    fn model_id(&self) -> String {
        let api = match self.spec.api {
            Api::Ollama => "ollama",
            Api::OpenAi => "openai",
        };
        format!("{api} {} model {}", self.spec.url, self.spec.model)
    }

    fn template_sha256(&self) -> String {
        self.template.clone()
    }

    fn classify(&mut self, text: &str, deadline: Instant) -> Result<Verdict, ReviewError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReviewError::Timeout(0));
        }
        let base = self.spec.url.trim_end_matches('/');
        let (url, body) = match self.spec.api {
            Api::Ollama => (
                format!("{base}/api/chat"),
                json!({
                    "model": self.spec.model,
                    "messages": self.messages(text),
                    "stream": false,
                    "format": "json",
                    "options": {"temperature": 0, "seed": self.spec.seed},
                }),
            ),
            Api::OpenAi => (
                format!("{base}/chat/completions"),
                json!({
                    "model": self.spec.model,
                    "messages": self.messages(text),
                    "temperature": 0,
                    "seed": self.spec.seed,
                    "response_format": {"type": "json_object"},
                }),
            ),
        };
        if self.client.is_none() {
            let client = reqwest::blocking::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .build()
                .map_err(|e| self.err(e))?;
            self.client = Some(client);
        }
        let Some(client) = &self.client else {
            return Err(self.err("no HTTP client"));
        };
        let mut req = client.post(&url).json(&body).timeout(left);
        if let Some(key) = &self.spec.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().map_err(|e| {
            if e.is_timeout() {
                ReviewError::Timeout(left.as_millis() as u64)
            } else {
                self.err(e)
            }
        })?;
        let status = resp.status();
        let body = resp.text().map_err(|e| self.err(e))?;
        if !status.is_success() {
            let body: String = body.chars().take(200).collect();
            return Err(self.err(format!("HTTP {status}: {body}")));
        }
        let reply: Value = serde_json::from_str(&body)
            .map_err(|e| self.err(format!("the reply is not JSON: {e}")))?;
        let content = match self.spec.api {
            Api::Ollama => reply.pointer("/message/content"),
            Api::OpenAi => reply.pointer("/choices/0/message/content"),
        }
        .and_then(Value::as_str)
        .ok_or_else(|| self.err("the reply has no message content"))?;
        let (label, confidence) = parse::json(content)?;
        Ok(Verdict {
            label,
            confidence,
            raw: content.to_string(),
        })
    }
}

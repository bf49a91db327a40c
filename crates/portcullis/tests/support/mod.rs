//! Shared by the gateway's process-level tests: the `portcullis proxy` binary as a
//! child process (over stdio for a driver, or as a Streamable HTTP listener whose
//! address is read from its stderr), and the audit log it writes.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Send one raw HTTP/1.1 request (with `Connection: close`) to `addr`; returns
/// the status and the whole response (head and body).
pub fn raw_http(addr: &str, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the listener");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let resp = String::from_utf8_lossy(&resp).to_string();
    let status = resp
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {resp:?}"));
    (status, resp)
}

/// `portcullis review --state STATE ARGS`; its stdout, and it must succeed.
pub fn review(state: &Path, args: &[&str]) -> String {
    review_of("--state", state, args)
}

/// `portcullis review WHICH PATH ARGS` (`--state FILE` or `--config gateway.toml`);
/// its stdout, and it must succeed.
pub fn review_of(which: &str, path: &Path, args: &[&str]) -> String {
    let out = Command::new(portcullis())
        .arg("review")
        .arg(which)
        .arg(path)
        .args(args)
        .output()
        .expect("run portcullis review");
    assert!(
        out.status.success(),
        "review {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The pending review items (`review list --json`).
pub fn pending(state: &Path) -> Vec<Value> {
    pending_of("--state", state)
}

/// The pending review items of the store `review WHICH PATH` names.
pub fn pending_of(which: &str, path: &Path) -> Vec<Value> {
    review_of(which, path, &["list", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `portcullis` binary under test.
pub fn portcullis() -> String {
    env!("CARGO_BIN_EXE_portcullis").to_string()
}

/// The project's test server (built with the workspace).
pub fn testserver() -> String {
    portcullis_testkit::interop::testserver_bin()
        .expect("portcullis-testserver is built by `cargo test --workspace` / `cargo build -p portcullis-testkit`")
        .display()
        .to_string()
}

/// Every record of a JSONL audit log (missing file = none).
pub fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every audit log line is JSON"))
        .collect()
}

/// The rules of the findings on the tool-call records among `records`, in order.
pub fn argument_rules(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["channel"] == "tool_arguments")
        .flat_map(|r| {
            r["stages"][0]["findings"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|f| f["rule"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The record id a withheld answer names: `… (record <uuid>) …`.
pub fn record_id_in(text: &str) -> String {
    let start = text
        .find("(record ")
        .unwrap_or_else(|| panic!("no record id in {text:?}"))
        + 8;
    text[start..start + 36].to_string()
}

/// A `portcullis proxy` serving Streamable HTTP; killed (SIGKILL) and reaped on drop.
pub struct HttpProxy {
    pub child: Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    /// `127.0.0.1:PORT`
    pub addr: String,
    pub audit: PathBuf,
    pub stderr: Arc<Mutex<String>>,
    pub dir: tempfile::TempDir,
}

impl HttpProxy {
    /// `portcullis proxy --listen 127.0.0.1:0 --no-stdio --audit-log DIR/audit.jsonl ARGS`
    /// with `env` set (no `--listen 127.0.0.1:0` if ARGS has a `--listen`); waits
    /// for the "listening on" line.
    pub fn start(args: &[String], env: &[(&str, &str)]) -> HttpProxy {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, args, env)
    }

    /// As [`HttpProxy::start`], in a directory the caller prepared (e.g. with a
    /// gateway.toml in it).
    pub fn start_in(dir: tempfile::TempDir, args: &[String], env: &[(&str, &str)]) -> HttpProxy {
        let audit = dir.path().join("audit.jsonl");
        let mut cmd = Command::new(portcullis());
        cmd.arg("proxy");
        // On loopback, port chosen by the system, unless the caller says where.
        if !args.iter().any(|a| a == "--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(["--no-stdio", "--audit-log"])
            .arg(&audit)
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn portcullis proxy");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let log = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("portcullis: listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
                let mut s = log.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let url = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "portcullis proxy printed no `listening on` line; stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        let addr = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .expect("http://ADDR/path")
            .to_string();
        HttpProxy {
            child,
            url,
            addr,
            audit,
            stderr,
            dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics (with the gateway's stderr) if the process has exited.
    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "the gateway exited ({status}); stderr:\n{}",
                self.stderr.lock().unwrap()
            );
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for HttpProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An rmcp client that answers sampling with a fixed reply and records the
/// server requests and notifications it gets.
#[derive(Clone, Default)]
pub struct Recorder {
    pub sampling: Arc<Mutex<Vec<Value>>>,
    pub notifications: Arc<Mutex<Vec<String>>>,
}

// Sampling is deprecated by SEP-2577, but clients and servers still use it.
#[allow(deprecated)]
impl rmcp::service::Service<rmcp::service::RoleClient> for Recorder {
    async fn handle_request(
        &self,
        request: rmcp::model::ServerRequest,
        _ctx: rmcp::service::RequestContext<rmcp::service::RoleClient>,
    ) -> Result<rmcp::model::ClientResult, rmcp::model::ErrorData> {
        self.sampling
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        match request {
            rmcp::model::ServerRequest::CreateMessageRequest(_) => {
                let r: rmcp::model::CreateMessageResult =
                    serde_json::from_value(serde_json::json!({
                        "role": "assistant",
                        "content": {"type": "text", "text": "a fixed sampling reply"},
                        "model": "test-model"
                    }))
                    .unwrap();
                Ok(rmcp::model::ClientResult::CreateMessageResult(Box::new(r)))
            }
            _ => Err(rmcp::model::ErrorData::invalid_request(
                "not supported by the test client",
                None,
            )),
        }
    }

    async fn handle_notification(
        &self,
        n: rmcp::model::ServerNotification,
        _ctx: rmcp::service::NotificationContext<rmcp::service::RoleClient>,
    ) -> Result<(), rmcp::model::ErrorData> {
        let v = serde_json::to_value(&n).unwrap();
        self.notifications
            .lock()
            .unwrap()
            .push(v["method"].as_str().unwrap_or_default().to_string());
        Ok(())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut caps = rmcp::model::ClientCapabilities::default();
        caps.sampling = Some(Default::default());
        rmcp::model::ClientConfig::new(caps, rmcp::model::Implementation::new("gateway-test", "1"))
    }
}

/// A `portcullis proxy` serving one client over stdio: the child is killed when
/// the client (and so its transport) is dropped.
pub struct StdioProxy {
    pub client: rmcp::service::RunningService<rmcp::service::RoleClient, Recorder>,
    pub recorder: Recorder,
    pub audit: PathBuf,
    /// The structural controls' state store.
    pub state: PathBuf,
    pub dir: Option<tempfile::TempDir>,
}

impl StdioProxy {
    /// `portcullis proxy ARGS` over stdio with a [`Recorder`] in front. `audit`
    /// and `state` are where the caller's configuration puts them; `dir` (if
    /// any) is kept alive as long as the proxy.
    pub async fn start(
        args: &[String],
        audit: &Path,
        state: &Path,
        dir: Option<tempfile::TempDir>,
    ) -> StdioProxy {
        use rmcp::ServiceExt;
        let mut child = tokio::process::Command::new(portcullis())
            .arg("proxy")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn portcullis proxy");
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
            child.stdout.take().unwrap(),
            child.stdin.take().unwrap(),
        );
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let recorder = Recorder::default();
        let client = recorder
            .clone()
            .serve(transport)
            .await
            .expect("initialize through the gateway");
        StdioProxy {
            client,
            recorder,
            audit: audit.to_path_buf(),
            state: state.to_path_buf(),
            dir,
        }
    }

    /// `portcullis proxy --audit-log DIR/audit.jsonl ARGS` (state beside the log).
    pub async fn with_audit_in(dir: &Path, args: &[String]) -> StdioProxy {
        let audit = dir.join("audit.jsonl");
        let state = dir.join("audit.jsonl.state.sqlite");
        let mut all = vec!["--audit-log".to_string(), audit.display().to_string()];
        all.extend(args.iter().cloned());
        StdioProxy::start(&all, &audit, &state, None).await
    }

    /// `tools/call`; a JSON-RPC error comes back as the error.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, rmcp::model::ErrorData> {
        call_on(self.client.peer(), tool, args).await
    }

    /// Every tool the gateway lists, as JSON.
    pub async fn tools(&self) -> Vec<Value> {
        self.client
            .peer()
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| serde_json::to_value(t).unwrap())
            .collect()
    }

    /// Wait until the client has got `method` at least `n` times.
    pub async fn notified(&self, method: &str, n: usize) {
        for _ in 0..200 {
            let seen = self
                .recorder
                .notifications
                .lock()
                .unwrap()
                .iter()
                .filter(|m| *m == method)
                .count();
            if seen >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{method} #{n} not relayed");
    }
}

/// `tools/call` through a client peer (e.g. a clone moved into a task).
pub async fn call_on(
    peer: &rmcp::service::Peer<rmcp::service::RoleClient>,
    tool: &str,
    args: Value,
) -> Result<Value, rmcp::model::ErrorData> {
    let mut params = rmcp::model::CallToolRequestParams::new(tool.to_string());
    params.arguments = args.as_object().cloned();
    peer.call_tool(params)
        .await
        .map(|r| serde_json::to_value(r).unwrap())
        .map_err(|e| match e {
            rmcp::service::ServiceError::McpError(e) => e,
            other => rmcp::model::ErrorData::internal_error(other.to_string(), None),
        })
}

/// The text of a tool result's first content block.
pub fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The project's test server over Streamable HTTP (`--transport http` on a free
/// loopback port, then ARGS); killed on drop.
pub struct HttpTestServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
}

impl HttpTestServer {
    pub fn start(args: &[&str]) -> HttpTestServer {
        let mut child = Command::new(testserver())
            .args(["--transport", "http", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the test server");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(u) = line.strip_prefix("listening on ") {
                    let _ = tx.send(u.trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the test server's listening line");
        HttpTestServer { child, url }
    }
}

impl Drop for HttpTestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An rmcp client session over Streamable HTTP (no token).
pub async fn http_client(
    url: &str,
) -> rmcp::service::RunningService<rmcp::service::RoleClient, ()> {
    use rmcp::ServiceExt;
    ().serve(rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url),
    ))
    .await
    .expect("initialize over Streamable HTTP")
}

/// One test server (`kit`, not namespaced) behind a gateway configured by
/// `extra` (TOML keys and tables); `detector`, if given, is the detector
/// configuration. State beside the audit log.
pub async fn configured(
    dir: &Path,
    server_args: &[&str],
    extra: &str,
    detector: Option<&str>,
) -> StdioProxy {
    servers(
        dir,
        &[("kit", server_args)],
        extra,
        detector,
        "audit.jsonl.state.sqlite",
    )
    .await
}

/// Test servers (name, arguments) behind one gateway configured by `extra`
/// (TOML keys and tables), its audit log `dir/audit.jsonl`, its state
/// `dir/state`; `detector`, if given, is the detector configuration.
pub async fn servers(
    dir: &Path,
    servers: &[(&str, &[&str])],
    extra: &str,
    detector: Option<&str>,
    state: &str,
) -> StdioProxy {
    let cfg = dir.join("gateway.toml");
    let det = match detector {
        Some(text) => {
            std::fs::write(dir.join("detector.toml"), text).unwrap();
            "detector = \"detector.toml\"\n"
        }
        None => "",
    };
    let upstreams: String = servers
        .iter()
        .map(|(name, args)| {
            format!(
                "[[server]]\nname = {name:?}\ncommand = {s:?}\nargs = [{a}]\n",
                s = testserver(),
                a = quoted(args),
            )
        })
        .collect();
    std::fs::write(
        &cfg,
        format!(
            "stdio = true\n{det}{extra}\n[audit]\nlog = \"audit.jsonl\"\n\
             [state]\npath = {state:?}\n{upstreams}"
        ),
    )
    .unwrap();
    StdioProxy::start(
        &["--config".into(), cfg.display().to_string()],
        &dir.join("audit.jsonl"),
        &dir.join(state),
        None,
    )
    .await
}

/// Arguments as TOML strings, comma-separated.
pub fn quoted(a: &[&str]) -> String {
    a.iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

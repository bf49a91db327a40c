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
    /// with `env` set; waits for the "listening on" line.
    pub fn start(args: &[String], env: &[(&str, &str)]) -> HttpProxy {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, args, env)
    }

    /// As [`HttpProxy::start`], in a directory the caller prepared (e.g. with a
    /// gateway.toml in it).
    pub fn start_in(dir: tempfile::TempDir, args: &[String], env: &[(&str, &str)]) -> HttpProxy {
        let audit = dir.path().join("audit.jsonl");
        let mut cmd = Command::new(portcullis());
        cmd.arg("proxy")
            .args(["--listen", "127.0.0.1:0", "--no-stdio", "--audit-log"])
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

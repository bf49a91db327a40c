//! Helpers for Rust integration tests that drive the interop kit: where the test server
//! binary and `.interop/` are, and running a client driver (`tests/interop/py_client.py`,
//! `tests/interop/ts_client.mjs`) as a child process and parsing its one JSON object.
//!
//! `.interop/` is installed by `scripts/setup-interop.sh`; the test server binary by
//! `cargo build -p portcullis-testkit`. Tests that need them assert
//! [`interop_available`] / [`testserver_bin`] and fail with that instruction: `make
//! test` (and so CI) runs the set-up first, so they always run there.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Errors of locating or running interop pieces.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    #[error("{0} not found: {1}")]
    Missing(&'static str, String),
    #[error("could not run {0}: {1}")]
    Spawn(String, std::io::Error),
    #[error("{0} did not finish within {1:?} (killed)")]
    Timeout(String, Duration),
    #[error("{driver} printed no JSON object (exit {status:?}): {stdout:?}; stderr: {stderr}")]
    BadOutput {
        driver: String,
        status: Option<i32>,
        stdout: String,
        stderr: String,
    },
}

/// The repository root (two levels above this crate's manifest).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest.to_path_buf())
}

/// `.interop/` at the repository root, or `$PORTCULLIS_INTEROP_DIR`.
pub fn interop_dir() -> PathBuf {
    std::env::var_os("PORTCULLIS_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".interop"))
}

/// Node.js (>= 22) installed by the setup script.
pub fn node() -> PathBuf {
    interop_dir().join("node_modules/node/bin/node")
}

/// The venv's Python with the `mcp` SDK.
pub fn python() -> PathBuf {
    interop_dir().join("venv/bin/python")
}

/// A file of the installed npm packages, e.g. `@modelcontextprotocol/server-everything/dist/index.js`.
pub fn npm_file(relative: &str) -> PathBuf {
    interop_dir().join("node_modules").join(relative)
}

/// A file under `tests/interop/`.
pub fn interop_script(name: &str) -> PathBuf {
    repo_root().join("tests/interop").join(name)
}

/// Whether `scripts/setup-interop.sh` has installed both node and the Python venv.
pub fn interop_available() -> bool {
    node().is_file() && python().is_file()
}

/// The `portcullis-testserver` binary: `$PORTCULLIS_TESTSERVER`, else the one next to
/// the running test executable's profile directory (`target/<profile>/`), else
/// `target/debug/` at the repository root.
pub fn testserver_bin() -> Result<PathBuf, InteropError> {
    if let Some(p) = std::env::var_os("PORTCULLIS_TESTSERVER") {
        return Ok(PathBuf::from(p));
    }
    let name = format!("portcullis-testserver{}", std::env::consts::EXE_SUFFIX);
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/deps/test-binary -> target/<profile>/
        if let Some(profile_dir) = exe.parent().and_then(Path::parent) {
            candidates.push(profile_dir.join(&name));
        }
    }
    candidates.push(repo_root().join("target/debug").join(&name));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            InteropError::Missing(
                "portcullis-testserver",
                "run `cargo build -p portcullis-testkit` or set PORTCULLIS_TESTSERVER".into(),
            )
        })
}

/// A client driver of the interop kit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `tests/interop/py_client.py` on the Python `mcp` SDK.
    Python,
    /// `tests/interop/ts_client.mjs` on the TypeScript SDK.
    TypeScript,
}

impl Driver {
    /// The command line that starts this driver (before its own arguments).
    pub fn command(self) -> Result<Vec<PathBuf>, InteropError> {
        let (runtime, script) = match self {
            Driver::Python => (python(), interop_script("py_client.py")),
            Driver::TypeScript => (node(), interop_script("ts_client.mjs")),
        };
        if !runtime.is_file() {
            return Err(InteropError::Missing(
                "interop runtime",
                format!("{} (run scripts/setup-interop.sh)", runtime.display()),
            ));
        }
        Ok(vec![runtime, script])
    }
}

/// What a driver printed and how it exited.
#[derive(Debug, Clone)]
pub struct DriverOutput {
    /// Exit code (None if killed by a signal).
    pub status: Option<i32>,
    /// The one JSON object the driver printed.
    pub json: Value,
    /// Its stderr (and the servers' stderr, on stdio).
    pub stderr: String,
}

impl DriverOutput {
    /// The entry of the first call of `tool`, if any.
    pub fn call(&self, tool: &str) -> Option<&Value> {
        self.json["calls"]
            .as_array()?
            .iter()
            .find(|c| c["tool"] == tool)
    }

    /// The concatenated text content of the first call of `tool`.
    pub fn call_text(&self, tool: &str) -> Option<String> {
        let content = self.call(tool)?["result"]["content"].as_array()?;
        Some(
            content
                .iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    /// Names of the listed tools.
    pub fn tool_names(&self) -> Vec<String> {
        self.json["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Runs a driver with `args` (e.g. `["--call", "echo", "--args", r#"{"text":"hi"}"#,
/// "--stdio", "--", "/path/to/server"]`), kills it after `timeout`, and parses its JSON.
/// Run `cmd` (stdin closed) to its end or until `timeout` (then it is killed and
/// the error says so), reading stdout and stderr on threads so a chatty child
/// cannot block on a full pipe. `label` names it in errors.
pub fn run_bounded(
    cmd: &mut Command,
    label: &str,
    timeout: Duration,
) -> Result<(std::process::ExitStatus, String, String), InteropError> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| InteropError::Spawn(label.to_string(), e))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = stdout.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = stderr.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(InteropError::Timeout(label.to_string(), timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(InteropError::Spawn(label.to_string(), e)),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

pub fn run_driver<S: AsRef<std::ffi::OsStr>>(
    driver: Driver,
    args: &[S],
    timeout: Duration,
) -> Result<DriverOutput, InteropError> {
    let cmd = driver.command()?;
    let label = format!("{driver:?} driver");
    let mut command = Command::new(&cmd[0]);
    command.args(&cmd[1..]).args(args);
    let (status, stdout, stderr) = run_bounded(&mut command, &label, timeout)?;
    let json = stdout.lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l)
            .ok()
            .filter(Value::is_object)
    });
    match json {
        Some(json) => Ok(DriverOutput {
            status: status.code(),
            json,
            stderr,
        }),
        None => Err(InteropError::BadOutput {
            driver: label,
            status: status.code(),
            stdout: stdout.chars().take(500).collect(),
            stderr: stderr
                .chars()
                .rev()
                .take(2000)
                .collect::<String>()
                .chars()
                .rev()
                .collect(),
        }),
    }
}

/// Fail a test that needs the interop kit with the command that installs it.
pub fn require_interop() {
    assert!(
        interop_available(),
        "the interop kit is not installed in {}: run scripts/setup-interop.sh first \
         (it installs Node, the npm MCP servers/SDK/Inspector and the Python `mcp` SDK)",
        interop_dir().display()
    );
}

/// The command line of the npm `@modelcontextprotocol/server-everything` over stdio.
pub fn server_everything() -> Vec<String> {
    vec![
        node().display().to_string(),
        npm_file("@modelcontextprotocol/server-everything/dist/index.js")
            .display()
            .to_string(),
    ]
}

/// Run a driver and require it to exit 0; the panic shows its JSON and stderr.
pub fn run_driver_ok(
    driver: Driver,
    args: &[String],
    timeout: std::time::Duration,
) -> DriverOutput {
    let out =
        run_driver(driver, args, timeout).unwrap_or_else(|e| panic!("{driver:?} driver: {e}"));
    assert_eq!(
        out.status,
        Some(0),
        "{driver:?} driver failed: {}\nstderr: {}",
        out.json,
        out.stderr
    );
    out
}

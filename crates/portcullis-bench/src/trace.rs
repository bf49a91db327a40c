//! The trial trace: one JSON object per line. The first line is the trial; then
//! what the agent listed, called and received, the instructions it obeyed, the
//! chat messages (LLM agents), the runner's probes of the sandbox, and (defended)
//! the gateway's decision records. The scorers read nothing else but the sandbox.

use crate::runner::TrialSpec;
use crate::{BenchError, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The trial (boxed: it carries the drawn values and maybe a payload).
    Trial {
        spec: Box<TrialSpec>,
    },
    /// The tools as the agent was shown them.
    Listed {
        tools: Vec<Value>,
    },
    /// The agent chose a tool for a task step.
    Select {
        step: usize,
        want: String,
        chosen: String,
        why: String,
    },
    Call {
        tool: String,
        args: Value,
    },
    /// What came back: a result's text, or a JSON-RPC error (`rpc_error`: its code),
    /// which is how the gateway refuses a call.
    Result {
        tool: String,
        text: String,
        is_error: bool,
        rpc_error: Option<i64>,
    },
    /// An instruction's operands reached the agent in what it read, and it acted.
    Obey {
        directive: String,
        operands: String,
        source: String,
    },
    /// A chat message of an LLM agent (role, content, tool calls).
    Message {
        message: Value,
    },
    /// The runner's look at the sandbox after the agent finished.
    Probe {
        worker_alive: bool,
    },
    /// A decision record of the gateway (defended runs).
    Gateway {
        record: Value,
    },
    /// The trial could not run (it is excluded from the scores, and counted).
    Error {
        message: String,
    },
    End {
        tool_calls: usize,
    },
}

/// Appends events to a trace file (and keeps them for the scorer).
#[derive(Debug)]
pub struct Trace {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    events: Mutex<Vec<Event>>,
}

impl Trace {
    pub fn create(path: &Path) -> Result<Trace> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        }
        let file = std::fs::File::create(path).map_err(|e| BenchError::io(path, e))?;
        Ok(Trace {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            events: Mutex::new(Vec::new()),
        })
    }

    pub fn push(&self, e: Event) -> Result<()> {
        let line = serde_json::to_string(&e)?;
        {
            let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
            writeln!(f, "{line}").map_err(|err| BenchError::io(&self.path, err))?;
        }
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
        Ok(())
    }

    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Read a trace file back (malformed lines are an error: a trace is ours).
pub fn read(path: &Path) -> Result<Vec<Event>> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(BenchError::from))
        .collect()
}

//! The per-record evaluation log that `portcullis eval` writes beside its report,
//! one JSONL file per configuration. Every figure of the report is computed from
//! these lines alone (`portcullis eval report FILES...`).
//!
//! A file holds one `meta` line (the configuration and what was inferred about the
//! corpus), one `run` line per pass over the corpus (order, seed, wall time), and
//! one `decision` line per record and pass: the corpus item (first pass only), and
//! the decision record or the error that prevented one.

use crate::corpus::LineError;
use crate::input::{EvalItem, InferenceSummary};
use portcullis_core::DecisionRecord;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RecordsError {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// The order of the corpus file.
    Corpus,
    /// A seeded permutation of it.
    Shuffled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Error,
    Timeout,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The configuration's name in the report (e.g. `rules+lexical`).
    pub config: String,
    /// Place of this configuration in the run (reports list configurations in this
    /// order, whatever order their files are given in).
    #[serde(default)]
    pub index: usize,
    /// How the configuration was made (ablation spec or file).
    pub spec: String,
    pub config_hash: String,
    pub stages: Vec<String>,
    /// The effective configuration, TOML.
    pub config_toml: String,
    pub corpus: String,
    pub corpus_sha256: String,
    /// The command that produced this file.
    pub command: String,
    /// Subsets reported separately (splits), in order.
    pub subsets: Vec<String>,
    /// Input lines that were skipped, by file and line number.
    pub input_errors: Vec<String>,
    pub inference: InferenceSummary,
    /// What the overlap check compared against.
    pub reference: Vec<String>,
    /// The embedder used for near-duplicates, if any.
    #[serde(default)]
    pub embedder: Option<String>,
    pub near_threshold: f64,
    pub shuffle_seed: u64,
    pub bootstrap_seed: u64,
    pub bootstrap_replicates: usize,
    /// A decision slower than this (µs) counts as a timeout and is not scored.
    #[serde(default)]
    pub timeout_us: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub config: String,
    pub run: u32,
    pub order: Order,
    #[serde(default)]
    pub seed: Option<u64>,
    pub records: usize,
    pub wall_us: u64,
    pub threads: usize,
    /// One-minute load average of the machine when the pass started (Linux), so
    /// latencies measured on a busy machine say so.
    #[serde(default)]
    pub load_average: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionLine {
    pub config: String,
    pub run: u32,
    pub id: String,
    /// The split or subset the record is reported in.
    pub subset: String,
    /// The corpus item, on the first pass only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<EvalItem>,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    Meta(Box<Meta>),
    Run(RunInfo),
    Decision(Box<DecisionLine>),
}

/// Everything one configuration's file holds.
#[derive(Debug, Clone)]
pub struct ConfigRecords {
    pub meta: Meta,
    pub runs: Vec<RunInfo>,
    pub decisions: Vec<DecisionLine>,
}

pub fn write(path: &Path, c: &ConfigRecords) -> Result<(), RecordsError> {
    let io = |source| RecordsError::Io {
        path: path.display().to_string(),
        source,
    };
    let f = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::new(f);
    let mut put = |l: &Line| -> Result<(), RecordsError> {
        let s = serde_json::to_string(l).map_err(|e| RecordsError::Invalid(e.to_string()))?;
        writeln!(w, "{s}").map_err(io)
    };
    put(&Line::Meta(Box::new(c.meta.clone())))?;
    for r in &c.runs {
        put(&Line::Run(r.clone()))?;
    }
    for d in &c.decisions {
        put(&Line::Decision(Box::new(d.clone())))?;
    }
    w.flush().map_err(io)
}

pub fn read(path: &Path) -> Result<ConfigRecords, RecordsError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecordsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text, &path.display().to_string())
}

pub fn parse(text: &str, origin: &str) -> Result<ConfigRecords, RecordsError> {
    let mut meta = None;
    let mut runs = Vec::new();
    let mut decisions = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(line).map_err(|e| RecordsError::Parse {
            path: origin.into(),
            line: i + 1,
            message: e.to_string(),
        })?;
        match l {
            Line::Meta(m) if meta.is_none() => meta = Some(*m),
            Line::Meta(_) => {
                return Err(RecordsError::Parse {
                    path: origin.into(),
                    line: i + 1,
                    message: "a second meta line".into(),
                })
            }
            Line::Run(r) => runs.push(r),
            Line::Decision(d) => decisions.push(*d),
        }
    }
    let meta = meta.ok_or_else(|| RecordsError::Invalid(format!("{origin}: no meta line")))?;
    Ok(ConfigRecords {
        meta,
        runs,
        decisions,
    })
}

pub fn line_errors(errors: &[LineError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

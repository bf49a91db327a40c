//! The project's labelled corpus: schema (corpus/SCHEMA.md), loading with
//! per-line errors, and the deterministic build that adds transformed and wrapped
//! records and assigns splits by lineage group.

use crate::transform::{Transform, Wrapper};
use portcullis_core::Channel;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} invalid line(s) in the corpus sources (listed above); nothing was built")]
    Invalid(usize),
    #[error("duplicate record id {0}")]
    DuplicateId(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Benign,
    Malicious,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    Original,
    Transformed,
    Wrapped,
    /// Listed from a real MCP server package (`corpus/harvest/`); `source` is
    /// `npm:<package>@<version>` or `pypi:<package>@<version>`, the lineage group
    /// the package.
    Harvested,
    /// A corpus text written into a harvested carrier (`carriers.rs`).
    Carried,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Train,
    Dev,
    Test,
    /// The rules-blind attack set: never trained or calibrated on.
    RulesBlind,
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Dev => "dev",
            Split::Test => "test",
            Split::RulesBlind => "rules_blind",
        }
    }
}

/// One corpus record (see corpus/SCHEMA.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Written with sorted keys (the built corpus's hash is pinned by the
    /// committed models and presets), whatever order the source file had.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "portcullis_core::json::serialize_canonical"
    )]
    pub tool: Option<Value>,
    pub label: Label,
    pub channel: Channel,
    pub category: String,
    pub register: String,
    pub language: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poison_location: Option<String>,
    pub provenance: Provenance,
    pub parent_id: Option<String>,
    pub lineage_group: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapper: Option<String>,
    /// Harvested records (and texts carried into them): where in the package's
    /// listing the item came from, e.g. `tools/list[4] config_helper`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

pub const REGISTERS: &[&str] = &[
    "plain",
    "markdown",
    "terse",
    "conversational",
    "config_comment",
    "code_comment",
    "html_comment",
    "json_embedded",
    "verbose",
    // Harvested real text (scripts/harvest/harvest_texts.py, harvest_results.py).
    "code",
    "data",
    "log",
    "man",
    "email",
    "html",
    // Payload brief 3 (corpus/payloads/).
    "formal_notice",
    "html_hidden",
    "markdown_table",
    "markdown_footnote",
    "json_field",
    "yaml_field",
    "csv_row",
    "log_lines",
    "stack_trace_or_error",
    "fake_tool_output",
    "fake_user_turn",
    "impersonated_system",
    "changelog_or_release_note",
    "commit_message",
    "ticket_or_issue",
    "encoded",
    "multi_step",
    "legal_or_policy",
    "translation_mix",
    "schema_key_or_enum",
    "few_shot",
    // Payload brief 4 (corpus/payloads-next/BRIEF.md) adds these.
    "sql_comment",
    "docstring",
    "chat_transcript",
    "calendar_invite",
    "spreadsheet_note",
    "api_doc",
    "readme_section",
];
/// A malicious record's category: one of [`MALICIOUS_CATEGORIES`], or a mix of
/// them (`PI-UI`, `exfiltration-concealment`), every part one.
pub fn is_malicious_category(category: &str) -> bool {
    MALICIOUS_CATEGORIES.contains(&category)
        || category
            .split('-')
            .all(|part| MALICIOUS_CATEGORIES.contains(&part))
}

pub const MALICIOUS_CATEGORIES: &[&str] = &[
    "PI",
    "PM",
    "NC",
    "OP",
    "UI",
    "FE",
    "TT",
    "RI",
    "PI-UI",
    "PI-FE",
    "NC-FE",
    "PM-FE",
    "PM-UI",
    "PM-OP",
    "TT-OP",
    "exfiltration",
    "concealment",
    "credential_harvesting",
    "system_prompt_extraction",
];
pub const HARD_NEGATIVE_KINDS: &[&str] = &[
    "security_docs",
    "credential_help",
    "admin_tool",
    "call_first",
    "error_message",
    "log_excerpt",
    "imperative_docs",
    "config",
    "other",
];
pub const POISON_LOCATIONS: &[&str] = &["none", "description", "schema", "name"];

impl Record {
    pub fn is_hard_negative(&self) -> bool {
        self.category.starts_with("hard_negative:")
    }

    /// Check one record against the schema; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.id.trim().is_empty() {
            return Err("empty id".into());
        }
        match (&self.text, &self.tool, self.channel) {
            (None, Some(Value::Object(_)), Channel::ToolDefinition) => {}
            (_, _, Channel::ToolDefinition) => {
                return Err("a tool_definition record needs a `tool` object and no `text`".into())
            }
            (Some(t), None, _) if !t.trim().is_empty() => {}
            _ => return Err("needs a non-empty `text` (and no `tool`)".into()),
        }
        match self.label {
            Label::Malicious if !is_malicious_category(&self.category) => {
                return Err(format!("unknown malicious category {:?}", self.category))
            }
            Label::Benign => {
                let ok = self.category == "benign"
                    || self
                        .category
                        .strip_prefix("hard_negative:")
                        .is_some_and(|k| HARD_NEGATIVE_KINDS.contains(&k));
                if !ok {
                    return Err(format!("unknown benign category {:?}", self.category));
                }
            }
            _ => {}
        }
        if !REGISTERS.contains(&self.register.as_str()) {
            return Err(format!("unknown register {:?}", self.register));
        }
        if self.language.len() != 2 || !self.language.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(format!(
                "language must be an ISO 639-1 code, got {:?}",
                self.language
            ));
        }
        if self.channel == Channel::ToolDefinition {
            match self.poison_location.as_deref() {
                Some(p) if POISON_LOCATIONS.contains(&p) => {}
                other => {
                    return Err(format!(
                        "tool_definition needs poison_location, got {other:?}"
                    ))
                }
            }
        }
        match (self.provenance, &self.parent_id) {
            (Provenance::Harvested, None)
                if self.label == Label::Benign
                    && ["npm:", "pypi:", "deb:"]
                        .iter()
                        .any(|e| self.source.starts_with(e))
                    && self.lineage_group.contains(':') => {}
            (Provenance::Harvested, _) => {
                return Err("a harvested record is benign, has parent_id null, source npm:/pypi:/deb:<package>@<version> and its package as lineage_group".into())
            }
            (Provenance::Original, None) if self.lineage_group == self.id => {}
            (Provenance::Original, _) => {
                return Err("an original record has parent_id null and lineage_group = id".into())
            }
            (_, Some(_)) => {}
            (_, None) => return Err("a generated record needs parent_id".into()),
        }
        Ok(())
    }
}

/// A line that could not be used, named by file and line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// Read a JSONL file of records; bad lines are returned, never dropped silently.
pub fn load_jsonl(path: &Path) -> Result<(Vec<Record>, Vec<LineError>), CorpusError> {
    let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(parse_jsonl(&text, &path.display().to_string()))
}

/// Parse JSONL records already in memory; `origin` names the file in errors.
pub fn parse_jsonl(text: &str, origin: &str) -> (Vec<Record>, Vec<LineError>) {
    parse_lines(text, origin, |r: Record| match r.validate() {
        Ok(()) => Ok(r),
        Err(m) => Err(format!("record {}: {m}", r.id)),
    })
}

/// The one JSONL line loop: each non-blank line of `text` read as a `T` and given
/// to `accept`. A line that does not parse, or that `accept` refuses (with the
/// reason), is an error naming `origin` and its line number; none is dropped
/// silently.
pub fn parse_lines<T: serde::de::DeserializeOwned, U>(
    text: &str,
    origin: &str,
    mut accept: impl FnMut(T) -> Result<U, String>,
) -> (Vec<U>, Vec<LineError>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<T>(line)
            .map_err(|e| e.to_string())
            .and_then(&mut accept);
        match parsed {
            Ok(u) => out.push(u),
            Err(message) => errors.push(LineError {
                file: origin.to_string(),
                line: i + 1,
                message,
            }),
        }
    }
    (out, errors)
}

/// All `*.jsonl` files of a directory, sorted by name.
pub fn jsonl_files(dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    let io = |source| CorpusError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}

/// A stable 64-bit hash of `key` under `salt`: every deterministic choice of the
/// build (splits, variants, carriers) is made by it.
pub(crate) fn hash64(key: &str, salt: &str) -> u64 {
    let h = Sha256::digest(format!("{salt}\0{key}").as_bytes());
    u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
}

fn bucket(key: &str, salt: &str) -> u64 {
    hash64(key, salt) % 100
}

/// Split of a lineage group: 60% train, 20% dev, 20% test, by a hash of the group,
/// so a text and all its variants always share one split.
pub fn split_of(lineage_group: &str) -> Split {
    match bucket(lineage_group, "split-v1") {
        0..=59 => Split::Train,
        60..=79 => Split::Dev,
        _ => Split::Test,
    }
}

/// Percent of records of each class that get a transformed / a wrapped variant.
pub const TRANSFORM_PERCENT: u64 = 20;
pub const WRAP_PERCENT: u64 = 15;

/// Build the corpus: base records with their splits, generated variants, then the
/// rules-blind set. Deterministic: same inputs (and rules), same output, byte for byte.
///
/// `fires_rule` says whether any rule fires on a record. A rules-blind record on
/// which a rule fires shares trigger vocabulary with the rules, so it cannot measure
/// generalisation beyond them (seed 001's de-circularization): it goes to the test
/// split instead, where it still counts as an independently written attack.
///
/// `harvested` (real tool listings, `corpus/harvest/`) get their splits by package,
/// and the corpus's description and schema texts are carried into them
/// ([`crate::carriers::carry`]); each of `payloads` is written into several of
/// them ([`crate::carriers::place_payloads`]).
pub fn build(
    base: Vec<Record>,
    rules_blind: Vec<Record>,
    harvested: Vec<Record>,
    payloads: &[crate::payloads::Payload],
    fires_rule: &dyn Fn(&Record) -> bool,
) -> Result<Vec<Record>, CorpusError> {
    let mut seen = HashSet::new();
    for r in base.iter().chain(&rules_blind).chain(&harvested) {
        if !seen.insert(r.id.clone()) {
            return Err(CorpusError::DuplicateId(r.id.clone()));
        }
    }
    let mut out: Vec<Record> = Vec::with_capacity(base.len() * 2);
    for mut r in base {
        r.split = Some(split_of(&r.lineage_group));
        out.push(r);
    }
    let originals = out.len();
    for i in 0..originals {
        let parent = out[i].clone();
        let Some(text) = parent.text.as_deref() else {
            continue;
        };
        // Transforms and wrappers are label-neutral: chosen by a hash of the id,
        // never by the label, and applied to both classes alike.
        if Transform::applies_to(parent.channel)
            && bucket(&parent.id, "transform-v1") < TRANSFORM_PERCENT
        {
            let t = Transform::ALL
                [(bucket(&parent.id, "transform-kind-v1") as usize) % Transform::ALL.len()];
            out.push(derived(
                &parent,
                Provenance::Transformed,
                t.name(),
                t.apply(text),
            ));
        }
        if Wrapper::applies_to(parent.channel) && bucket(&parent.id, "wrap-v1") < WRAP_PERCENT {
            let w =
                Wrapper::ALL[(bucket(&parent.id, "wrap-kind-v1") as usize) % Wrapper::ALL.len()];
            out.push(derived(
                &parent,
                Provenance::Wrapped,
                w.name(),
                w.apply(text),
            ));
        }
    }
    let harvested_from = out.len();
    for mut r in harvested {
        // The harvest loader's split (one per upstream) stands.
        r.split.get_or_insert_with(|| split_of(&r.lineage_group));
        out.push(r);
    }
    if out.len() > harvested_from {
        let carried = crate::carriers::carry(&out);
        let placed = crate::carriers::place_payloads(payloads, &out);
        out.extend(carried);
        out.extend(placed);
    }
    for mut r in rules_blind {
        r.split = Some(if fires_rule(&r) {
            Split::Test
        } else {
            Split::RulesBlind
        });
        out.push(r);
    }
    Ok(out)
}

fn derived(parent: &Record, provenance: Provenance, name: &str, text: String) -> Record {
    let mut r = parent.clone();
    r.id = format!("{}~{name}", parent.id);
    r.text = Some(text);
    r.provenance = provenance;
    r.parent_id = Some(parent.id.clone());
    r.lineage_group = parent.lineage_group.clone();
    match provenance {
        Provenance::Transformed => r.transform = Some(name.into()),
        _ => r.wrapper = Some(name.into()),
    }
    r
}

/// Serialize records as JSONL (one object per line, fields in schema order).
pub fn to_jsonl(records: &[Record]) -> String {
    let mut s = String::new();
    for r in records {
        // Records are plain data; serialization cannot fail.
        s.push_str(&serde_json::to_string(r).unwrap_or_default());
        s.push('\n');
    }
    s
}

/// SHA-256 of a corpus file's bytes: recorded by training and calibration.
pub fn corpus_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

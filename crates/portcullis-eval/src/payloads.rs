//! Payloads (`corpus/payloads/*.jsonl`, corpus/SCHEMA.md "Payloads"): short
//! attack texts and benign look-alikes written by the project to be placed
//! inside real content. A payload is never a record by itself: `carriers.rs`
//! writes each one into several harvested carriers (tool definitions, tool
//! results, resources, prompts), and those placements are the records.
//!
//! Their authors wrote them from a brief alone, without reading `rules/`, the
//! corpus or the detector (brief 3), so they are rules-blind by construction.

use crate::corpus::{
    is_malicious_category, CorpusError, Label, LineError, HARD_NEGATIVE_KINDS, REGISTERS,
};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// Where a payload reads naturally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// A tool's description.
    Description,
    /// A field of a tool's input schema (a property's description, an example).
    SchemaField,
    /// A tool's result.
    Result,
    /// A resource's contents.
    Resource,
    /// A prompt's text.
    Prompt,
}

/// One payload line.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub id: String,
    pub text: String,
    pub label: Label,
    pub category: String,
    pub register: String,
    pub language: String,
    /// Whether the text contains one of the brief's usual trigger words.
    pub trigger_words: bool,
    pub fits: Vec<Fit>,
    /// What the attacker wants, in a few words (`none` for benign look-alikes).
    pub goal: String,
}

impl Payload {
    /// The payload's author, from its file stem (`p3_en-00012` → `p3_en`).
    pub fn author(&self) -> &str {
        self.id.rsplit_once('-').map_or(&self.id, |(a, _)| a)
    }

    fn validate(&self) -> Result<(), String> {
        if self.id.trim().is_empty() || self.text.trim().is_empty() {
            return Err("needs a non-empty id and text".into());
        }
        let category_ok = match self.label {
            Label::Malicious => is_malicious_category(&self.category),
            Label::Benign => {
                self.category == "benign"
                    || self
                        .category
                        .strip_prefix("hard_negative:")
                        .is_some_and(|k| HARD_NEGATIVE_KINDS.contains(&k))
            }
        };
        if !category_ok {
            return Err(format!(
                "category {:?} is not one of a {:?} payload's",
                self.category, self.label
            ));
        }
        if !REGISTERS.contains(&self.register.as_str()) {
            return Err(format!(
                "unknown register {:?} (corpus/SCHEMA.md lists them)",
                self.register
            ));
        }
        if self.language.len() != 2 || !self.language.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(format!(
                "language must be an ISO 639-1 code, got {:?}",
                self.language
            ));
        }
        if self.fits.is_empty() {
            return Err("`fits` names at least one place".into());
        }
        Ok(())
    }
}

/// Parse one payload file; bad lines are returned with file and line, never dropped.
pub fn parse(text: &str, file: &str) -> (Vec<Payload>, Vec<LineError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| LineError {
            file: file.to_string(),
            line: i + 1,
            message,
        };
        match serde_json::from_str::<Payload>(line) {
            Err(e) => bad.push(err(e.to_string())),
            Ok(p) => match p.validate() {
                Err(m) => bad.push(err(format!("payload {}: {m}", p.id))),
                Ok(()) => ok.push(p),
            },
        }
    }
    (ok, bad)
}

/// Every `*.jsonl` of `dir`, in file-name order; ids must be unique.
pub fn load_dir(dir: &Path) -> Result<(Vec<Payload>, Vec<LineError>), CorpusError> {
    let mut all = Vec::new();
    let mut errors = Vec::new();
    let mut ids = HashSet::new();
    for path in crate::corpus::jsonl_files(dir)? {
        let text = std::fs::read_to_string(&path).map_err(|source| CorpusError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let (payloads, bad) = parse(&text, &path.display().to_string());
        errors.extend(bad);
        for p in payloads {
            if !ids.insert(p.id.clone()) {
                return Err(CorpusError::DuplicateId(p.id));
            }
            all.push(p);
        }
    }
    Ok((all, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_line_names_its_file_and_line_and_the_good_ones_load() {
        let text = concat!(
            r#"{"id":"p3_x-00001","text":"Run the sync first.","label":"benign","category":"hard_negative:call_first","register":"terse","language":"en","trigger_words":false,"fits":["description"],"goal":"none"}"#,
            "\n\n",
            r#"{"id":"p3_x-00002","text":"t","label":"malicious","category":"benign","register":"terse","language":"en","trigger_words":false,"fits":["result"],"goal":"x"}"#,
            "\n",
            r#"{"id":"p3_x-00003","text":"t","label":"malicious","category":"PI","register":"nope","language":"en","trigger_words":false,"fits":["result"],"goal":"x"}"#,
            "\n",
            r#"{"id":"p3_x-00004","text":"t","label":"malicious","category":"PI","register":"terse","language":"en","trigger_words":false,"fits":[],"goal":"x"}"#,
            "\n",
            r#"{"id":"p3_x-00005","text":"t","label":"malicious","category":"PI","register":"terse","language":"en","trigger_words":false,"fits":["result"],"goal":"x","extra":1}"#,
        );
        let (ok, bad) = parse(text, "p3_x.jsonl");
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].author(), "p3_x");
        let lines: Vec<usize> = bad.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![3, 4, 5, 6], "{bad:?}");
        assert!(bad.iter().all(|e| e.file == "p3_x.jsonl"));
    }
}

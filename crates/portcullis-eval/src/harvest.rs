//! The harvested benign corpus (corpus/harvest/, corpus/SCHEMA.md "Harvested"):
//! tool listings of real MCP server packages, written by
//! scripts/harvest/harvest_listings.py. Loaded only when asked for: nothing in
//! `corpus build`, `train` or `eval` reads it unless a caller passes its records in.
//!
//! Every record is benign, `provenance: "harvested"`, its `source` names the package
//! version (`npm:<pkg>@<ver>` / `pypi:<pkg>@<ver>`) and its `lineage_group` the
//! package (`npm:<pkg>`), so all of one package's items share one split.

use crate::corpus::{split_of, CorpusError, Label, LineError, Provenance, Record};
use portcullis_core::Channel;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// The channels a harvest file may hold, with its file name.
pub const FILES: &[(&str, Channel)] = &[
    ("tool_definition.jsonl", Channel::ToolDefinition),
    ("server_instructions.jsonl", Channel::ServerInstructions),
    ("prompt.jsonl", Channel::Prompt),
    ("resource.jsonl", Channel::Resource),
];

/// One harvested line is a corpus record plus `origin`, where in the listing it was
/// found (`tools/list[3] search_issues`, `initialize.instructions`, ...): `origin` is
/// taken out and the rest must deserialize as a `Record`, which refuses unknown fields.
fn parse_line(line: &str) -> Result<(Record, String), String> {
    let mut obj: serde_json::Map<String, Value> =
        serde_json::from_str(line).map_err(|e| e.to_string())?;
    let origin = match obj.remove("origin") {
        Some(Value::String(o)) => o,
        _ => return Err("needs a string `origin`".into()),
    };
    let record: Record = serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())?;
    Ok((record, origin))
}

/// A harvested record and where in its server's listing it came from.
#[derive(Debug, Clone)]
pub struct Harvested {
    pub record: Record,
    pub origin: String,
}

/// Check what a harvested record must be beyond the corpus schema.
pub fn validate(r: &Record, origin: &str) -> Result<(), String> {
    r.validate()?;
    if r.label != Label::Benign || r.category != "benign" {
        return Err("a harvested record is benign with category \"benign\"".into());
    }
    if r.provenance != Provenance::Harvested {
        return Err("provenance must be \"harvested\"".into());
    }
    let (eco, rest) = r
        .source
        .split_once(':')
        .ok_or("source must be <ecosystem>:<package>@<version>")?;
    if eco != "npm" && eco != "pypi" {
        return Err(format!("unknown ecosystem {eco:?}"));
    }
    // npm scopes start with '@': the version follows the last '@'.
    let (pkg, _version) = rest
        .rsplit_once('@')
        .filter(|(p, v)| !p.is_empty() && !v.is_empty())
        .ok_or("source must be <ecosystem>:<package>@<version>")?;
    if r.lineage_group != format!("{eco}:{pkg}") {
        return Err(format!(
            "lineage_group {:?} is not the package {eco}:{pkg}",
            r.lineage_group
        ));
    }
    if origin.trim().is_empty() {
        return Err("empty origin".into());
    }
    if r.channel == Channel::ToolDefinition {
        check_tool(r.tool.as_ref().ok_or("no tool")?)?;
    }
    Ok(())
}

/// An MCP tool object: a string `name`, an object `inputSchema`, and `description`,
/// `title`, `outputSchema`, `annotations` of the right types where present.
pub fn check_tool(t: &Value) -> Result<(), String> {
    let o = t.as_object().ok_or("tool is not an object")?;
    match o.get("name") {
        Some(Value::String(n)) if !n.is_empty() => {}
        _ => return Err("tool without a string name".into()),
    }
    if !matches!(o.get("inputSchema"), Some(Value::Object(_))) {
        return Err("tool without an object inputSchema".into());
    }
    for (k, ok) in [
        (
            "description",
            o.get("description").is_none_or(Value::is_string),
        ),
        ("title", o.get("title").is_none_or(Value::is_string)),
        (
            "outputSchema",
            o.get("outputSchema").is_none_or(Value::is_object),
        ),
        (
            "annotations",
            o.get("annotations").is_none_or(Value::is_object),
        ),
    ] {
        if !ok {
            return Err(format!("tool field {k} has the wrong type"));
        }
    }
    Ok(())
}

/// Parse one harvest file; bad lines are returned, never dropped.
pub fn parse(text: &str, origin_file: &str, channel: Channel) -> (Vec<Harvested>, Vec<LineError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| LineError {
            file: origin_file.to_string(),
            line: i + 1,
            message,
        };
        match parse_line(line) {
            Err(e) => bad.push(err(e)),
            Ok((record, _)) if record.channel != channel => bad.push(err(format!(
                "channel {:?} in the {channel:?} file",
                record.channel
            ))),
            Ok((record, _)) if record.split.is_some() => bad.push(err(
                "a harvest line carries no split: the loader assigns it".into(),
            )),
            Ok((record, origin)) => match validate(&record, &origin) {
                Err(m) => bad.push(err(m)),
                Ok(()) => ok.push(Harvested { record, origin }),
            },
        }
    }
    (ok, bad)
}

/// Load every harvest file of `dir`, with splits assigned from the lineage group
/// (the package), as the corpus builder does for base records.
pub fn load_dir(dir: &Path) -> Result<(Vec<Harvested>, Vec<LineError>), CorpusError> {
    let mut all = Vec::new();
    let mut errors = Vec::new();
    let mut ids = HashSet::new();
    for (name, channel) in FILES {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|source| CorpusError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let (recs, bad) = parse(&text, &path.display().to_string(), *channel);
        errors.extend(bad);
        for mut h in recs {
            if !ids.insert(h.record.id.clone()) {
                return Err(CorpusError::DuplicateId(h.record.id));
            }
            h.record.split = Some(split_of(&h.record.lineage_group));
            all.push(h);
        }
    }
    Ok((all, errors))
}

/// Compare MANIFEST.json's sha256 and record count of each file with the files;
/// returns one message per mismatch.
pub fn check_manifest(dir: &Path) -> Result<Vec<String>, CorpusError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| CorpusError::Io {
            path: p.display().to_string(),
            source,
        })
    };
    let manifest: Value =
        serde_json::from_slice(&read(&dir.join("MANIFEST.json"))?).map_err(|e| {
            CorpusError::Io {
                path: dir.join("MANIFEST.json").display().to_string(),
                source: std::io::Error::other(e),
            }
        })?;
    let mut problems = Vec::new();
    let files = manifest["files"].as_object().cloned().unwrap_or_default();
    for (name, _) in FILES {
        let Some(entry) = files.get(*name) else {
            problems.push(format!("{name} missing from MANIFEST.json"));
            continue;
        };
        let bytes = read(&dir.join(name))?;
        let sum = hex::encode(Sha256::digest(&bytes));
        if entry["sha256"].as_str() != Some(sum.as_str()) {
            problems.push(format!(
                "{name}: sha256 {sum} but the manifest says {}",
                entry["sha256"]
            ));
        }
        let lines = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count() as u64;
        if entry["records"].as_u64() != Some(lines) {
            problems.push(format!(
                "{name}: {lines} records but the manifest says {}",
                entry["records"]
            ));
        }
    }
    // Per-package item counts add up to the files' record counts.
    let mut per_channel: BTreeMap<String, u64> = BTreeMap::new();
    for p in manifest["packages"].as_array().into_iter().flatten() {
        for (ch, n) in p["items"].as_object().into_iter().flatten() {
            *per_channel.entry(ch.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
    }
    for (name, channel) in FILES {
        let ch = serde_json::to_value(channel).ok();
        let ch = ch.as_ref().and_then(Value::as_str).unwrap_or_default();
        let listed = per_channel.get(ch).copied().unwrap_or(0);
        let in_file = files
            .get(*name)
            .and_then(|e| e["records"].as_u64())
            .unwrap_or(0);
        if listed != in_file {
            problems.push(format!(
                "{name}: packages' items add up to {listed}, the file holds {in_file}"
            ));
        }
    }
    Ok(problems)
}

/// The `(ecosystem, package)` pairs of the real-server regression suite, read from
/// tests/real_servers/servers.py (`Server("name", "package", "npm"|"pypi", ...`).
pub fn suite_packages(servers_py: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for chunk in servers_py.split("Server(").skip(1) {
        let quoted: Vec<&str> = chunk.split('"').skip(1).step_by(2).take(3).collect();
        if quoted.len() == 3 && (quoted[2] == "npm" || quoted[2] == "pypi") {
            out.push((quoted[2].to_string(), quoted[1].to_string()));
        }
    }
    out
}

/// PyPI names compare after PEP 503 normalization.
pub fn normalize(ecosystem: &str, package: &str) -> String {
    if ecosystem != "pypi" {
        return package.to_string();
    }
    let mut s = String::new();
    for c in package.chars() {
        let c = c.to_ascii_lowercase();
        if matches!(c, '-' | '_' | '.') {
            if !s.ends_with('-') {
                s.push('-');
            }
        } else {
            s.push(c);
        }
    }
    s
}

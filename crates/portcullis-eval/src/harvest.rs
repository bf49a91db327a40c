//! The harvested benign corpus (corpus/harvest/, corpus/SCHEMA.md "Harvested"):
//! tool listings of real MCP server packages, written by
//! scripts/harvest/harvest_listings.py. Loaded only when asked for: nothing in
//! `corpus build`, `train` or `eval` reads it unless a caller passes its records in.
//!
//! Every record is benign, `provenance: "harvested"`, its `source` names the package
//! version (`npm:<pkg>@<ver>` / `pypi:<pkg>@<ver>`) and its `lineage_group` the
//! package (`npm:<pkg>`), so all of one package's items share one split.

use crate::corpus::{split_of, CorpusError, Label, LineError, Provenance, Record, Split};
use portcullis_core::Channel;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// The listing files (always present), with the channel each holds.
pub const FILES: &[(&str, Channel)] = &[
    ("tool_definition.jsonl", Channel::ToolDefinition),
    ("server_instructions.jsonl", Channel::ServerInstructions),
    ("prompt.jsonl", Channel::Prompt),
    ("resource.jsonl", Channel::Resource),
];

/// The real texts (scripts/harvest/harvest_texts.py: READMEs, man pages, code,
/// data files, logs from Debian, PyPI and npm packages) and real tool results
/// (scripts/harvest/harvest_results.py: real servers on real local data). Each is
/// read when MANIFEST.json lists it; `.gz` files are gzip-compressed JSONL.
pub const TEXT_FILES: &[&str] = &[
    "texts.jsonl.gz",
    "texts.jsonl",
    // Texts that talk about assistants (Home Assistant, chat SDKs, prompt
    // templates): the project's payloads overuse the word, real benign text
    // needed its share (scripts/harvest/README.md).
    "texts-assistants.jsonl.gz",
    "results.jsonl.gz",
    "results.jsonl",
];

/// The channels a text or result file may hold.
const TEXT_CHANNELS: &[Channel] = &[Channel::ToolResult, Channel::Resource];

/// A file's lines: gzip-decompressed when its name ends in `.gz`.
fn read_lines_file(path: &Path) -> Result<String, CorpusError> {
    let io = |source| CorpusError::Io {
        path: path.display().to_string(),
        source,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Read;
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(io)?;
        Ok(text)
    } else {
        String::from_utf8(bytes).map_err(|e| io(std::io::Error::other(e)))
    }
}

/// The text and result files MANIFEST.json of `dir` lists.
fn listed_text_files(dir: &Path) -> Result<Vec<&'static str>, CorpusError> {
    let manifest = read_manifest(dir)?;
    Ok(TEXT_FILES
        .iter()
        .copied()
        .filter(|n| manifest["files"].get(*n).is_some())
        .collect())
}

fn read_manifest(dir: &Path) -> Result<Value, CorpusError> {
    let path = dir.join("MANIFEST.json");
    let bytes = std::fs::read(&path).map_err(|source| CorpusError::Io {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| CorpusError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })
}

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

impl Harvested {
    /// The corpus record, carrying its origin (the corpus keeps where an item came from).
    pub fn into_record(self) -> Record {
        let mut r = self.record;
        r.origin = Some(self.origin);
        r
    }
}

/// The registries a harvested item may come from.
pub const ECOSYSTEMS: &[&str] = &["npm", "pypi", "deb"];

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
    if !ECOSYSTEMS.contains(&eco) {
        return Err(format!("unknown ecosystem {eco:?}"));
    }
    // npm scopes start with '@': the version follows the last '@'.
    let (pkg, _version) = rest
        .rsplit_once('@')
        .filter(|(p, v)| !p.is_empty() && !v.is_empty())
        .ok_or("source must be <ecosystem>:<package>@<version>")?;
    // A real tool result's lineage is the data package the server worked on
    // (its `source` is the server package): one data package, one split.
    let result_of_server = r.channel == Channel::ToolResult
        && r.lineage_group
            .split_once(':')
            .is_some_and(|(e, p)| ECOSYSTEMS.contains(&e) && !p.is_empty());
    if r.lineage_group != format!("{eco}:{pkg}") && !result_of_server {
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
pub fn parse(
    text: &str,
    origin_file: &str,
    channels: &[Channel],
) -> (Vec<Harvested>, Vec<LineError>) {
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
            Ok((record, _)) if !channels.contains(&record.channel) => bad.push(err(format!(
                "channel {:?} in a file of {channels:?}",
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
/// (the package; packages of one [`upstream`] share a split), as the corpus builder
/// does for base records.
pub fn load_dir(dir: &Path) -> Result<(Vec<Harvested>, Vec<LineError>), CorpusError> {
    let mut all = Vec::new();
    let mut errors = Vec::new();
    let mut ids = HashSet::new();
    let listings = FILES.iter().map(|(n, c)| (*n, std::slice::from_ref(c)));
    let texts = listed_text_files(dir)?
        .into_iter()
        .map(|n| (n, TEXT_CHANNELS));
    for (name, channels) in listings.chain(texts) {
        let path = dir.join(name);
        let text = read_lines_file(&path)?;
        let (recs, bad) = parse(&text, &path.display().to_string(), channels);
        errors.extend(bad);
        for h in recs {
            if !ids.insert(h.record.id.clone()) {
                return Err(CorpusError::DuplicateId(h.record.id));
            }
            all.push(h);
        }
    }
    // One upstream, one split: Debian's python3-django and PyPI's django carry the
    // same text, so all packages of one upstream take the split of the first of them.
    let upstreams: Vec<String> = all
        .iter()
        .map(|h| upstream(&h.record.lineage_group))
        .collect();
    let mut first_of_upstream: BTreeMap<&str, &str> = BTreeMap::new();
    for (h, u) in all.iter().zip(&upstreams) {
        let g = h.record.lineage_group.as_str();
        first_of_upstream
            .entry(u)
            .and_modify(|f| *f = (*f).min(g))
            .or_insert(g);
    }
    let splits: Vec<Split> = upstreams
        .iter()
        .map(|u| split_of(first_of_upstream[u.as_str()]))
        .collect();
    for (h, s) in all.iter_mut().zip(splits) {
        h.record.split = Some(s);
    }
    Ok((all, errors))
}

/// The upstream project a package lineage (`deb:python3-django`, `pypi:Django`,
/// `deb:node-semver`) is packaged from, as a key: Debian's language and split-package
/// affixes removed, case and `_` / `.` folded. Coarse on purpose: two
/// unrelated packages that fold together only share a split, which costs nothing.
pub fn upstream(lineage_group: &str) -> String {
    let (eco, name) = lineage_group.split_once(':').unwrap_or(("", lineage_group));
    let mut n = name.to_ascii_lowercase().replace(['_', '.'], "-");
    // Only Debian repackages others' projects; a scoped npm name stays whole
    // (`@a/mcp` and `@b/mcp` are unrelated).
    if eco == "deb" {
        for prefix in [
            "python3-", "python-", "node-", "lib", "golang-", "ruby-", "r-cran-",
        ] {
            if let Some(rest) = n.strip_prefix(prefix).filter(|r| !r.is_empty()) {
                n = rest.to_string();
                break;
            }
        }
        for suffix in [
            "-doc", "-dev", "-common", "-data", "-utils", "-tools", "-bin",
        ] {
            if let Some(rest) = n.strip_suffix(suffix).filter(|r| !r.is_empty()) {
                n = rest.to_string();
                break;
            }
        }
    }
    n
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
    let manifest = read_manifest(dir)?;
    let mut problems = Vec::new();
    let files = manifest["files"].as_object().cloned().unwrap_or_default();
    let listed_texts = listed_text_files(dir)?;
    for name in FILES.iter().map(|(n, _)| *n).chain(listed_texts) {
        let Some(entry) = files.get(name) else {
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
        let lines = read_lines_file(&dir.join(name))?
            .lines()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_gzip_text_file_reads_as_its_lines_and_a_result_keeps_its_data_package_lineage() {
        let dir =
            std::env::temp_dir().join(format!("portcullis-harvest-gz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = r#"{"id":"harvest_result-000001","text":"On branch main\nnothing to commit","label":"benign","channel":"tool_result","category":"benign","register":"log","language":"en","provenance":"harvested","parent_id":null,"lineage_group":"deb:curl","source":"pypi:mcp-server-git@2026.1.14","origin":"git_status() on deb:curl@8.5.0"}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(format!("{line}\n").as_bytes()).unwrap();
        let path = dir.join("results.jsonl.gz");
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        let text = read_lines_file(&path).unwrap();
        let (ok, bad) = parse(&text, "results.jsonl.gz", TEXT_CHANNELS);
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(ok[0].record.lineage_group, "deb:curl");
        // A text (not a server's result) must keep its own package as lineage.
        let text_line = line
            .replace("tool_result", "resource")
            .replace("harvest_result", "harvest_text");
        let (ok, bad) = parse(&text_line, "texts.jsonl", TEXT_CHANNELS);
        assert!(ok.is_empty() && bad.len() == 1, "{bad:?}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! The reports of `portcullis audit`: a terminal table, JSON, and SARIF 2.1.0
//! (validated against the schema in `schemas/sarif-schema-2.1.0.json` by the tests).

use portcullis_controls::analyze::{Analysis, AuditFinding, PinState};
use portcullis_core::{sha256_hex, Status};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a server of the report came from.
#[derive(Debug, Clone, Serialize)]
pub struct Origin {
    /// The server's name in the report.
    pub server: String,
    /// The client configuration (or snapshot) file.
    pub config: PathBuf,
    pub client: String,
    /// JSON path of the entry in the file.
    pub location: String,
    /// 1-based line of the entry.
    pub line: usize,
    /// `stdio`, `http` or `offline`.
    pub transport: String,
    /// Why it was not audited (disabled, invalid entry).
    pub skipped: Option<String>,
}

pub struct Report<'a> {
    pub analysis: &'a Analysis,
    pub origins: &'a [Origin],
    pub config_hash: &'a str,
    pub notes: &'a [String],
}

impl Report<'_> {
    fn origin(&self, server: &str) -> Option<&Origin> {
        self.origins.iter().find(|o| o.server == server)
    }

    fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut c = BTreeMap::new();
        for e in &self.analysis.entries {
            *c.entry(e.status.as_str()).or_insert(0) += 1;
        }
        c
    }

    fn pin_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut c = BTreeMap::new();
        for p in self.analysis.entries.iter().filter_map(|e| e.pin.as_ref()) {
            *c.entry(p.state.as_str()).or_insert(0) += 1;
        }
        c
    }
}

/// Findings in report order: worst status first, then server, definition, path.
fn sorted(findings: &[AuditFinding]) -> Vec<&AuditFinding> {
    let mut v: Vec<&AuditFinding> = findings.iter().collect();
    v.sort_by(|a, b| {
        b.status
            .cmp(&a.status)
            .then(a.server.cmp(&b.server))
            .then(a.kind.cmp(&b.kind))
            .then(a.name.cmp(&b.name))
            .then(a.path.cmp(&b.path))
            .then(a.rule.cmp(&b.rule))
    });
    v
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let head: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

/// The terminal table.
pub fn table(r: &Report<'_>) -> String {
    let a = r.analysis;
    let mut out = String::new();
    let counts = r.counts();
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    out.push_str(&format!(
        "portcullis audit: {} server(s), {} definition(s): {} ALLOW, {} REVIEW, {} BLOCK; {} finding(s)\n",
        a.servers.len(),
        a.entries.len(),
        get("ALLOW"),
        get("REVIEW"),
        get("BLOCK"),
        a.findings.iter().filter(|f| !f.allowlisted).count()
    ));
    out.push_str("\nSERVERS\n");
    for o in r.origins {
        let line = match (&o.skipped, a.servers.iter().find(|s| s.name == o.server)) {
            (Some(why), _) => format!("skipped: {why}"),
            (None, Some(s)) => match &s.error {
                Some(e) => format!("FAILED: {}", cut(e, 160)),
                None => format!(
                    "{} tools, {} prompts, {} resources, {} templates{}",
                    s.tools,
                    s.prompts,
                    s.resources,
                    s.resource_templates,
                    if s.instructions { ", instructions" } else { "" }
                ),
            },
            (None, None) => "not listed".into(),
        };
        out.push_str(&format!(
            "  {:<20} {:<7} {}:{}  {line}\n",
            cut(&o.server, 20),
            o.transport,
            o.config.display(),
            o.line
        ));
    }
    let findings = sorted(&a.findings);
    if findings.is_empty() {
        out.push_str("\nFINDINGS: none\n");
    } else {
        out.push_str("\nFINDINGS (the matched span is marked «…»)\n");
        let rows: Vec<[String; 7]> = findings
            .iter()
            .map(|f| {
                [
                    f.status.as_str().to_string(),
                    cut(&f.server, 16),
                    cut(&format!("{} {}", f.kind.as_str(), f.name), 34),
                    cut(&f.path, 44),
                    cut(
                        &format!(
                            "{}{}",
                            f.rule,
                            if f.allowlisted { " (allowlisted)" } else { "" }
                        ),
                        36,
                    ),
                    f.severity.as_str().to_string(),
                    cut(&f.marked, 110),
                ]
            })
            .collect();
        let head = [
            "STATUS",
            "SERVER",
            "DEFINITION",
            "PATH",
            "RULE",
            "SEVERITY",
            "EXCERPT",
        ];
        let mut w = head.map(|h| h.chars().count());
        for row in &rows {
            for (i, c) in row.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let fmt = |cells: &[String]| {
            let mut line = String::from("  ");
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    line.push_str(c);
                } else {
                    let pad = w[i] - c.chars().count();
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            line.push('\n');
            line
        };
        out.push_str(&fmt(&head.map(String::from)[..]));
        for row in &rows {
            out.push_str(&fmt(&row[..]));
        }
    }
    let pins = r.pin_counts();
    if !pins.is_empty() {
        out.push_str(&format!(
            "\nPINS since the last audit: {}\n",
            ["new", "unchanged", "changed", "renamed"]
                .iter()
                .map(|k| format!("{} {k}", pins.get(k).copied().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for e in &a.entries {
            let Some(p) = &e.pin else { continue };
            if !matches!(p.state, PinState::Changed | PinState::Renamed) {
                continue;
            }
            let what = match &p.previous_name {
                Some(old) => format!(" (renamed from {old:?})"),
                None => String::new(),
            };
            out.push_str(&format!(
                "  {} {}/{} {}{what}\n",
                p.state.as_str(),
                e.server,
                e.kind.as_str(),
                e.name
            ));
            for c in &p.changes {
                out.push_str(&format!(
                    "      {}: {} -> {}\n",
                    c.path,
                    portcullis_controls::finding::short(c.before.as_ref()),
                    portcullis_controls::finding::short(c.after.as_ref())
                ));
            }
        }
    }
    for n in r.notes {
        out.push_str(&format!("\nnote: {n}\n"));
    }
    out
}

/// The JSON report.
pub fn json(r: &Report<'_>) -> Value {
    let a = r.analysis;
    let servers: Vec<Value> = r
        .origins
        .iter()
        .map(|o| {
            let s = a.servers.iter().find(|s| s.name == o.server);
            let status = match (&o.skipped, s.and_then(|s| s.error.as_ref())) {
                (Some(_), _) => "skipped",
                (None, Some(_)) => "failed",
                (None, None) if s.is_some() => "audited",
                _ => "not_listed",
            };
            json!({
                "name": o.server,
                "status": status,
                "origin": o,
                "listing": s,
            })
        })
        .collect();
    let entries: Vec<Value> = a
        .entries
        .iter()
        .map(|e| {
            json!({
                "server": e.server,
                "kind": e.kind,
                "name": e.name,
                "status": e.status,
                "pin": e.pin,
                "records": e.detector.iter().chain(e.structural.iter()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "portcullis": env!("CARGO_PKG_VERSION"),
        "config_hash": r.config_hash,
        "summary": {
            "servers": a.servers.len(),
            "failed": a.failed().count(),
            "definitions": a.entries.len(),
            "status": r.counts(),
            "findings": a.findings.len(),
            "pins": r.pin_counts(),
            "worst": a.worst(),
        },
        "servers": servers,
        "findings": sorted(&a.findings),
        "entries": entries,
        "notes": r.notes,
    })
}

/// A file path as a SARIF artifact URI: relative paths stay relative (to the
/// directory code scanning checks out), absolute ones become `file://` URIs.
fn artifact_uri(p: &Path) -> String {
    let s = p.to_string_lossy().replace('\\', "/");
    let enc: String = s
        .chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '#' => "%23".to_string(),
            '?' => "%3F".to_string(),
            '%' => "%25".to_string(),
            c => c.to_string(),
        })
        .collect();
    if p.is_absolute() {
        if enc.starts_with('/') {
            format!("file://{enc}")
        } else {
            format!("file:///{enc}")
        }
    } else {
        enc
    }
}

fn level(s: Status) -> &'static str {
    match s {
        Status::Block => "error",
        Status::Review => "warning",
        Status::Allow => "note",
    }
}

/// The SARIF 2.1.0 log: one result per finding, located at the server's entry
/// in its client configuration (line) and, logically, at the definition's field.
pub fn sarif(r: &Report<'_>) -> Value {
    let a = r.analysis;
    let findings = sorted(&a.findings);
    let mut rule_ids: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.rule.as_str(), f.category.as_str()))
        .collect();
    rule_ids.sort();
    rule_ids.dedup_by(|x, y| x.0 == y.0);
    let rules: Vec<Value> = rule_ids
        .iter()
        .map(|(id, category)| {
            json!({
                "id": id,
                "name": id,
                "shortDescription": {"text": format!("{id} ({})", category.replace('_', " "))},
                "properties": {"category": category},
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let origin = r.origin(&f.server);
            let uri = origin
                .map(|o| artifact_uri(&o.config))
                .unwrap_or_else(|| "unknown".into());
            let line = origin.map(|o| o.line.max(1)).unwrap_or(1);
            let fqn = format!(
                "{}/{}/{}{}",
                f.server,
                f.kind.as_str(),
                f.name,
                f.path.trim_start_matches('$')
            );
            let index = rule_ids
                .iter()
                .position(|(id, _)| *id == f.rule)
                .unwrap_or(0);
            let fp = sha256_hex(
                format!(
                    "{}\n{}\n{}\n{}\n{}",
                    f.server,
                    f.kind.as_str(),
                    f.name,
                    f.path,
                    f.rule
                )
                .as_bytes(),
            );
            json!({
                "ruleId": f.rule,
                "ruleIndex": index,
                "level": level(f.status),
                "message": {"text": format!(
                    "{} ({}, severity {}) in {} {:?} of server {:?} at {}: {}",
                    f.rule, f.category.replace('_', " "), f.severity.as_str(),
                    f.kind.as_str(), f.name, f.server, f.path, f.marked
                )},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": {"startLine": line},
                    },
                    "logicalLocations": [{"fullyQualifiedName": fqn, "kind": "member"}],
                }],
                "partialFingerprints": {"portcullisFinding/v1": fp},
                "properties": {
                    "status": f.status,
                    "severity": f.severity,
                    "source": f.source,
                    "server": f.server,
                    "kind": f.kind,
                    "definition": f.name,
                    "path": f.path,
                    "view": f.view,
                    "allowlisted": f.allowlisted,
                    "record_id": f.record_id,
                },
            })
        })
        .collect();
    let notifications: Vec<Value> = a
        .failed()
        .map(|s| {
            json!({
                "level": "error",
                "message": {"text": format!("server {:?} could not be audited: {}", s.name, s.error.as_deref().unwrap_or(""))},
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "portcullis",
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": a.failed().count() == 0,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
            "properties": {"config_hash": r.config_hash},
        }],
    })
}

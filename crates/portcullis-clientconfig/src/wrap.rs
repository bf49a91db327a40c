//! `wrap` and `unwrap`: rewrite each server entry of a client configuration so it
//! runs behind `portcullis proxy`, in place, and give the original back exactly.
//!
//! - A stdio entry keeps every member but two: `command` becomes the proxy, and
//!   `args` becomes `["proxy", "--name=NAME", "--launch-env=KEY"…, "--",
//!   ORIGINAL COMMAND, ORIGINAL ARGS…]`, each argument its own item (never joined
//!   into one string). `NAME` is the entry's name in the configuration: the
//!   server's identity in the gateway's state store, so wrapped servers sharing
//!   one store keep their pins, review items and records apart. Each `KEY` is a
//!   variable of the entry's `env` (names only): part of the server's launch,
//!   which the gateway records by name and digest. `env`, `cwd` and any other
//!   field stay as written; the client still applies them to the process it
//!   starts, and the proxy's child inherits them.
//! - A remote entry (`url`/`serverUrl`) becomes a stdio entry running
//!   `portcullis proxy --config GATEWAY.toml`, where the gateway file (written by
//!   the caller's hook) names the remote server as its Streamable HTTP upstream.
//! - Only the bytes of each rewritten entry change; the rest of the file
//!   (formatting, comments, unknown fields, other entries) is untouched.
//! - Wrapping is idempotent: an entry that already runs `portcullis proxy` is left
//!   alone, so wrapping twice changes nothing.
//! - `wrap` keeps the original file as a backup and a manifest (hashes of the
//!   original and of what it wrote, and each rewritten entry's text before and
//!   after). `unwrap` of a file that is still what `wrap` wrote restores the backup
//!   byte for byte; a file edited since is unwrapped entry by entry.

use crate::jsonc::Node;
use crate::model::{ClientConfig, ConfigError, ServerEntry, Transport, Wrapped};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: unreadable wrap manifest: {message}")]
    Manifest { path: PathBuf, message: String },
    #[error("backup {path} does not match the hash its manifest recorded; not restoring it")]
    BackupMismatch { path: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WrapError + '_ {
    move |source| WrapError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What happened to one entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    Wrapped {
        name: String,
    },
    Unwrapped {
        name: String,
    },
    /// Already behind `portcullis proxy` (wrap) or not wrapped (unwrap).
    Unchanged {
        name: String,
    },
    /// Left as it is, and why.
    Skipped {
        name: String,
        why: String,
    },
}

/// One rewritten entry, as the manifest keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub name: String,
    pub location: String,
    /// The entry's text before `wrap`.
    pub original: String,
    /// The entry's text as `wrap` wrote it.
    pub wrapped: String,
    /// The gateway file written for a remote entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<PathBuf>,
}

/// What `wrap` remembers beside the configuration file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub original_sha256: String,
    pub wrapped_sha256: String,
    pub entries: Vec<ManifestEntry>,
}

/// The backup and manifest of a configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct StatePaths {
    pub backup: PathBuf,
    pub manifest: PathBuf,
}

pub fn state_paths(config: &Path) -> StatePaths {
    let name = config
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".into());
    StatePaths {
        backup: config.with_file_name(format!("{name}.portcullis-backup")),
        manifest: config.with_file_name(format!("{name}.portcullis-wrap.json")),
    }
}

pub fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A JSON string literal.
fn lit(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A one-line JSON array of strings.
fn array(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| lit(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// The leading whitespace of the line that holds byte `pos`.
fn indent_at(text: &str, pos: usize) -> &str {
    let line_start = text[..pos.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let end = line
        .find(|c: char| c != ' ' && c != '\t')
        .unwrap_or(line.len());
    &line[..end]
}

/// Replace byte ranges of `text` (non-overlapping) with new texts.
fn apply_edits(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|e| std::cmp::Reverse(e.0.start));
    let mut out = text.to_string();
    for (r, s) in edits {
        out.replace_range(r, &s);
    }
    out
}

/// The member spans of `node`, relative to the entry's first byte.
fn rel(r: &Range<usize>, base: usize) -> Range<usize> {
    r.start - base..r.end - base
}

/// The proxy's arguments for a stdio server: `proxy --name=NAME
/// [--launch-env=KEY…] -- COMMAND ARGS…` (each flag with its value in one item,
/// so a name that starts with `-` stays a value).
pub fn proxy_args<'a>(
    name: &str,
    env_keys: impl IntoIterator<Item = &'a String>,
    command: &str,
    args: &[String],
) -> Vec<String> {
    let mut out = vec!["proxy".to_string(), format!("--name={name}")];
    out.extend(env_keys.into_iter().map(|k| format!("--launch-env={k}")));
    out.push("--".into());
    out.push(command.to_string());
    out.extend(args.iter().cloned());
    out
}

/// The wrapped text of a stdio entry.
fn wrap_stdio(text: &str, node: &Node, proxy: &str, new_args: &[String]) -> String {
    let base = node.span.start;
    let entry = &text[node.span.clone()];
    let mut edits = Vec::new();
    let Some(cmd) = node.member("command") else {
        return entry.to_string();
    };
    edits.push((rel(&cmd.value.span, base), lit(proxy)));
    match node.member("args") {
        Some(a) => edits.push((rel(&a.value.span, base), array(new_args))),
        None => {
            let at = cmd.value.span.end - base;
            let multiline = text[node.span.start..cmd.key_span.start].contains('\n');
            let sep = if multiline {
                format!(",\n{}", indent_at(text, cmd.key_span.start))
            } else {
                ", ".to_string()
            };
            edits.push((at..at, format!("{sep}\"args\": {}", array(new_args))));
        }
    }
    apply_edits(entry, edits)
}

/// The wrapped text of a remote entry: a stdio entry running the proxy on a
/// gateway file. Members other than the URL, headers and type are kept verbatim.
fn wrap_remote(text: &str, node: &Node, proxy: &str, proxy_args: &[String]) -> String {
    let members = node.members();
    let mut parts: Vec<String> = Vec::new();
    let mut placed = false;
    for m in members {
        match m.key.as_str() {
            "url" | "serverUrl" => {
                if !placed {
                    parts.push(format!("\"command\": {}", lit(proxy)));
                    parts.push(format!("\"args\": {}", array(proxy_args)));
                    placed = true;
                }
            }
            // Replaced by the proxy's: a remote entry that also carries `args`
            // (an entry with a `command` is a stdio one) would otherwise keep
            // them after the proxy's, and of two equal keys a client reads the
            // last, so it would start the proxy with the entry's own arguments.
            "headers" | "args" => {}
            "type" => parts.push("\"type\": \"stdio\"".to_string()),
            _ => parts.push(text[m.span()].to_string()),
        }
    }
    if !placed {
        parts.push(format!("\"command\": {}", lit(proxy)));
        parts.push(format!("\"args\": {}", array(proxy_args)));
    }
    let entry = &text[node.span.clone()];
    if entry.contains('\n') {
        let inner = members
            .first()
            .map(|m| indent_at(text, m.key_span.start).to_string())
            .unwrap_or_else(|| "  ".into());
        let outer = indent_at(text, node.span.start);
        let body: Vec<String> = parts.iter().map(|p| format!("{inner}{p}")).collect();
        format!("{{\n{}\n{outer}}}", body.join(",\n"))
    } else {
        format!("{{ {} }}", parts.join(", "))
    }
}

/// The unwrapped text of an entry `wrap` (or a person) put behind the proxy, when
/// it can be derived from the entry alone (stdio wrappers).
fn unwrap_stdio(text: &str, node: &Node, command: &str, args: &[String]) -> Option<String> {
    let base = node.span.start;
    let entry = &text[node.span.clone()];
    let cmd = node.member("command")?;
    let a = node.member("args")?;
    Some(apply_edits(
        entry,
        vec![
            (rel(&cmd.value.span, base), lit(command)),
            (rel(&a.value.span, base), array(args)),
        ],
    ))
}

/// The caller's part of wrapping a remote entry: write (or, in a dry run, name)
/// a gateway file for it and return the proxy's arguments
/// (`["proxy", "--config", FILE]`) and the file.
pub type RemoteHook<'a> = dyn FnMut(&ServerEntry) -> Result<(Vec<String>, PathBuf), String> + 'a;

/// Wrap every entry of `cfg`; returns the new text, what happened to each entry,
/// and the manifest entries of those rewritten.
pub fn wrap_text(
    cfg: &ClientConfig,
    proxy: &str,
    remote: &mut RemoteHook<'_>,
) -> (String, Vec<Change>, Vec<ManifestEntry>) {
    let mut edits = Vec::new();
    let mut changes = Vec::new();
    let mut entries = Vec::new();
    // Of entries under one key a client reads the last. Walking backwards, that
    // one comes first: if it cannot be wrapped, wrapping an earlier one would
    // report the server as wrapped while the client runs it without the gateway.
    let mut read: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut read_and_skipped: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for s in cfg.servers.iter().rev() {
        let name = s.name.clone();
        let read_by_clients = read.insert(s.location.as_str());
        if !read_by_clients && read_and_skipped.contains(s.location.as_str()) {
            changes.push(Change::Skipped {
                name,
                why: "a later entry under the same key is the one clients read, and it \
                      cannot be wrapped"
                    .into(),
            });
            continue;
        }
        if read_by_clients {
            // Marked now; taken back below if this entry is or gets wrapped.
            read_and_skipped.insert(s.location.as_str());
        }
        if s.wrapped().is_some() {
            read_and_skipped.remove(s.location.as_str());
            changes.push(Change::Unchanged { name });
            continue;
        }
        let original = cfg.text[s.span.clone()].to_string();
        let (wrapped, gateway) = match &s.transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                let new_args = proxy_args(&s.name, env.keys(), command, args);
                (wrap_stdio(&cfg.text, &s.node, proxy, &new_args), None)
            }
            // The wrapped entry is a stdio one that keeps the entry's `env`; an
            // `env` a stdio entry cannot have would make it an invalid entry that
            // no client starts and `unwrap` does not recognize.
            Transport::Remote { .. } if crate::model::string_map(s.raw.get("env")).is_err() => {
                let why = crate::model::string_map(s.raw.get("env"))
                    .err()
                    .unwrap_or_default();
                changes.push(Change::Skipped {
                    name,
                    why: format!("`env` of a remote entry the proxy cannot start with: {why}"),
                });
                continue;
            }
            Transport::Remote { .. } => match remote(s) {
                Ok((args, file)) => (wrap_remote(&cfg.text, &s.node, proxy, &args), Some(file)),
                Err(why) => {
                    changes.push(Change::Skipped { name, why });
                    continue;
                }
            },
            Transport::Invalid { reason } => {
                changes.push(Change::Skipped {
                    name,
                    why: reason.clone(),
                });
                continue;
            }
        };
        read_and_skipped.remove(s.location.as_str());
        edits.push((s.span.clone(), wrapped.clone()));
        entries.push(ManifestEntry {
            name: name.clone(),
            location: s.location.clone(),
            original,
            wrapped,
            gateway,
        });
        changes.push(Change::Wrapped { name });
    }
    // Back in file order: the report, and the manifest (unwrap restores entries
    // that share a key in this order).
    changes.reverse();
    entries.reverse();
    (apply_edits(&cfg.text, edits), changes, entries)
}

/// Unwrap every wrapped entry of `cfg`, entry by entry: an entry whose text is
/// what the manifest says `wrap` wrote gets its recorded original back; another
/// stdio wrapper gets its command and arguments back from the proxy's arguments.
pub fn unwrap_text(cfg: &ClientConfig, known: &[ManifestEntry]) -> (String, Vec<Change>) {
    let mut edits = Vec::new();
    let mut changes = Vec::new();
    // Each record restores one entry: under a key written twice, two entries can
    // share a location and a wrapped text (wrap drops `headers`) and differ in
    // their originals; they take the records in order, as wrap wrote them.
    let mut used = vec![false; known.len()];
    for s in &cfg.servers {
        let name = s.name.clone();
        let Some(w) = s.wrapped() else {
            changes.push(Change::Unchanged { name });
            continue;
        };
        let current = &cfg.text[s.span.clone()];
        let recorded = known
            .iter()
            .enumerate()
            .position(|(i, e)| !used[i] && e.location == s.location && e.wrapped == current);
        if let Some(i) = recorded {
            used[i] = true;
        }
        let restored = match (recorded.map(|i| &known[i]), w) {
            (Some(e), _) => Some(e.original.clone()),
            (None, Wrapped::Stdio { command, args }) => {
                unwrap_stdio(&cfg.text, &s.node, &command, &args)
            }
            (None, Wrapped::Gateway { .. }) => None,
        };
        match restored {
            Some(t) => {
                edits.push((s.span.clone(), t));
                changes.push(Change::Unwrapped { name });
            }
            None => changes.push(Change::Skipped {
                name,
                why: "a wrapped remote server whose entry changed since `wrap`: its original \
                      entry is not recorded; see the backup"
                    .into(),
            }),
        }
    }
    (apply_edits(&cfg.text, edits), changes)
}

/// A rewrite of one file, computed but not yet written.
#[derive(Debug, Clone)]
pub struct Plan {
    pub path: PathBuf,
    pub before: String,
    pub after: String,
    pub changes: Vec<Change>,
    /// The backup to write before the file (wrap).
    pub backup: Option<String>,
    /// The manifest to write (wrap).
    pub manifest: Option<Manifest>,
    /// Remove the backup, the manifest and the gateway files (a complete unwrap).
    pub remove_state: Option<Vec<PathBuf>>,
}

impl Plan {
    pub fn changes_file(&self) -> bool {
        self.before != self.after
    }

    /// The unified diff of the rewrite.
    pub fn diff(&self) -> String {
        crate::diff::unified(&self.before, &self.after, &self.path.display().to_string())
    }
}

fn read_manifest(path: &Path) -> Result<Option<Manifest>, WrapError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| WrapError::Manifest {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

fn read_backup(state: &StatePaths, m: &Manifest) -> Result<String, WrapError> {
    let backup = std::fs::read_to_string(&state.backup).map_err(io(&state.backup))?;
    if sha256(&backup) != m.original_sha256 {
        return Err(WrapError::BackupMismatch {
            path: state.backup.clone(),
        });
    }
    Ok(backup)
}

/// Plan `wrap` of the file at `path`.
pub fn plan_wrap(path: &Path, proxy: &str, remote: &mut RemoteHook<'_>) -> Result<Plan, WrapError> {
    let cfg = ClientConfig::load(path)?;
    let state = state_paths(path);
    let manifest = read_manifest(&state.manifest)?;
    let (after, changes, new_entries) = wrap_text(&cfg, proxy, remote);
    let mut plan = Plan {
        path: path.to_path_buf(),
        before: cfg.text.clone(),
        after,
        changes,
        backup: None,
        manifest: None,
        remove_state: None,
    };
    if !plan.changes_file() {
        return Ok(plan);
    }
    let known: Vec<ManifestEntry> = manifest
        .as_ref()
        .map(|m| m.entries.clone())
        .unwrap_or_default();
    // The original to keep: the backup of an earlier wrap if the file is still what
    // that wrap wrote; else the file with every wrapper taken off.
    let original = match &manifest {
        Some(m) if sha256(&cfg.text) == m.wrapped_sha256 => read_backup(&state, m)?,
        _ if cfg.servers.iter().any(|s| s.wrapped().is_some()) => unwrap_text(&cfg, &known).0,
        _ => cfg.text.clone(),
    };
    // Entries wrapped earlier keep their records while their text is unchanged.
    let mut entries: Vec<ManifestEntry> = known
        .into_iter()
        .filter(|e| {
            cfg.servers
                .iter()
                .any(|s| s.location == e.location && cfg.text[s.span.clone()] == e.wrapped)
        })
        .collect();
    entries.extend(new_entries);
    plan.manifest = Some(Manifest {
        version: 1,
        original_sha256: sha256(&original),
        wrapped_sha256: sha256(&plan.after),
        entries,
    });
    plan.backup = Some(original);
    Ok(plan)
}

/// Plan `unwrap` of the file at `path`.
pub fn plan_unwrap(path: &Path) -> Result<Plan, WrapError> {
    let state = state_paths(path);
    let manifest = read_manifest(&state.manifest)?;
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let gateways: Vec<PathBuf> = manifest
        .iter()
        .flat_map(|m| m.entries.iter().filter_map(|e| e.gateway.clone()))
        .collect();
    if let Some(m) = manifest
        .as_ref()
        .filter(|m| sha256(&text) == m.wrapped_sha256)
    {
        let original = read_backup(&state, m)?;
        let changes = m
            .entries
            .iter()
            .map(|e| Change::Unwrapped {
                name: e.name.clone(),
            })
            .collect();
        return Ok(Plan {
            path: path.to_path_buf(),
            before: text,
            after: original,
            changes,
            backup: None,
            manifest: None,
            remove_state: Some(gateways),
        });
    }
    let cfg = ClientConfig::parse(path, text)?;
    let known = manifest.map(|m| m.entries).unwrap_or_default();
    let (after, changes) = unwrap_text(&cfg, &known);
    let complete = !changes.iter().any(|c| matches!(c, Change::Skipped { .. }));
    Ok(Plan {
        path: path.to_path_buf(),
        before: cfg.text,
        after,
        changes,
        backup: None,
        manifest: None,
        remove_state: complete.then_some(gateways),
    })
}

/// Write `bytes` to `path` through a temporary file in the same directory
/// (fsync, then rename), keeping the permissions of the file it replaces.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WrapError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".into());
    let tmp = path.with_file_name(format!(".{name}.portcullis-tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    if let Ok(meta) = std::fs::metadata(path) {
        f.set_permissions(meta.permissions()).map_err(io(&tmp))?;
    }
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Carry out a plan: backup and manifest first, then the file.
pub fn apply(plan: &Plan) -> Result<(), WrapError> {
    let state = state_paths(&plan.path);
    if let Some(b) = &plan.backup {
        write_atomic(&state.backup, b.as_bytes())?;
    }
    if let Some(m) = &plan.manifest {
        let text = serde_json::to_string_pretty(m).map_err(|e| WrapError::Manifest {
            path: state.manifest.clone(),
            message: e.to_string(),
        })?;
        write_atomic(&state.manifest, text.as_bytes())?;
    }
    if plan.changes_file() {
        write_atomic(&plan.path, plan.after.as_bytes())?;
    }
    if let Some(gateways) = &plan.remove_state {
        for p in gateways.iter().chain([&state.backup, &state.manifest]) {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(p)(e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ClientConfig {
        ClientConfig::parse(Path::new("c.json"), text.to_string()).unwrap()
    }

    fn no_remote() -> impl FnMut(&ServerEntry) -> Result<(Vec<String>, PathBuf), String> {
        |_| Err("no remote hook in this test".to_string())
    }

    /// Found by the clientconfig fuzz target (fuzz/crashes/clientconfig/): a
    /// remote entry that also has `args` kept them after the proxy's, so the
    /// wrapped file's client started the proxy with the entry's own arguments.
    #[test]
    fn a_remote_entry_with_its_own_args_runs_the_proxy_after_wrap() {
        let text = "{\n  \"mcpServers\": {\n    \"github\": {\n      \"type\": \"http\",\n      \"url\": \"https://api.example/mcp/\",\n      \"args\": [\"-m\", \"db_server\"],\n      \"x-team-owner\": \"data-platform\"\n    }\n  }\n}\n";
        let c = cfg(text);
        let mut remote = |_: &ServerEntry| {
            Ok((
                vec!["proxy".into(), "--config".into(), "g.toml".into()],
                PathBuf::from("g.toml"),
            ))
        };
        let (out, changes, entries) = wrap_text(&c, "/bin/portcullis", &mut remote);
        assert_eq!(
            changes,
            vec![Change::Wrapped {
                name: "github".into()
            }]
        );
        let after = cfg(&out);
        assert_eq!(
            after.servers[0].wrapped(),
            Some(Wrapped::Gateway {
                config: "g.toml".into()
            }),
            "{out}"
        );
        assert_eq!(after.servers[0].raw["x-team-owner"], "data-platform");
        assert_eq!(unwrap_text(&after, &entries).0, text);
    }

    /// Found by the clientconfig fuzz target (fuzz/crashes/clientconfig/
    /// crash-c6281994…): under a key written twice, the first entry was wrapped
    /// and the last, the one clients read, skipped; the report said both
    /// "wrapped" and "skipped" while the server ran without the gateway.
    #[test]
    fn a_key_whose_last_entry_cannot_be_wrapped_is_not_wrapped_at_all() {
        let text = "{\"mcpServers\": {\n  \"docs\": {\"command\": \"npx\", \"args\": [\"docs\"]},\n  \"docs\": {\"serverUrl\": \"https://docs.example/mcp\", \"env\": \"npx\"},\n  \"notes\": {\"command\": \"notes\"}\n}}\n";
        let c = cfg(text);
        let (out, changes, entries) = wrap_text(&c, "/bin/portcullis", &mut no_remote());
        let names: Vec<String> = changes
            .iter()
            .map(|c| match c {
                Change::Wrapped { name } => format!("wrapped {name}"),
                Change::Skipped { name, why } => format!("skipped {name}: {why}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert!(
            names[0].starts_with("skipped docs: a later entry"),
            "{names:?}"
        );
        assert!(names[1].starts_with("skipped docs: `env`"), "{names:?}");
        assert_eq!(names[2], "wrapped notes");
        assert_eq!(entries.len(), 1);
        let after = cfg(&out);
        assert!(after.servers[0].wrapped().is_none() && after.servers[1].wrapped().is_none());
        assert!(after.servers[2].wrapped().is_some());
        // A key whose last entry can be wrapped: every entry under it is.
        let text = "{\"mcpServers\": {\n  \"docs\": {\"command\": \"a\"},\n  \"docs\": {\"command\": \"b\"}\n}}\n";
        let (out, _, entries) = wrap_text(&cfg(text), "/bin/portcullis", &mut no_remote());
        assert_eq!(entries.len(), 2);
        assert_eq!(unwrap_text(&cfg(&out), &entries).0, text);
    }

    /// Found by the clientconfig fuzz target (fuzz/crashes/clientconfig/): a
    /// remote entry whose `env` is not a map of strings became, wrapped, a stdio
    /// entry that is invalid (no client starts it, `unwrap` does not recognize
    /// it). It is skipped, and says why.
    #[test]
    fn a_remote_entry_with_an_env_a_stdio_entry_cannot_have_is_skipped() {
        let text = r#"{"mcpServers": {"r": {"serverUrl": "https://x.example/mcp", "env": {"A": {"b": 1}}}}}"#;
        let mut remote = |_: &ServerEntry| {
            Ok((
                vec!["proxy".into(), "--config".into(), "g.toml".into()],
                PathBuf::from("g.toml"),
            ))
        };
        let (out, changes, entries) = wrap_text(&cfg(text), "/bin/portcullis", &mut remote);
        assert_eq!(out, text);
        assert!(entries.is_empty());
        assert!(
            matches!(&changes[..], [Change::Skipped { name, why }] if name == "r" && why.contains("env")),
            "{changes:?}"
        );
    }

    /// Found by the clientconfig fuzz target (fuzz/crashes/clientconfig/): two
    /// remote entries under one key, differing only in `headers`, wrap to the same
    /// text; unwrap gave both the first one's original.
    #[test]
    fn entries_under_a_key_written_twice_unwrap_to_their_own_originals() {
        let text = r#"{"mcpServers": {"r": {"url": "https://x.example/mcp", "headers": {"A": "1"}}, "r": {"url": "https://x.example/mcp", "headers": {"A": "2"}}}}"#;
        let mut remote = |_: &ServerEntry| {
            Ok((
                vec!["proxy".into(), "--config".into(), "g.toml".into()],
                PathBuf::from("g.toml"),
            ))
        };
        let (out, _, entries) = wrap_text(&cfg(text), "/bin/portcullis", &mut remote);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].wrapped, entries[1].wrapped);
        assert_eq!(unwrap_text(&cfg(&out), &entries).0, text);
    }

    #[test]
    fn a_stdio_entry_keeps_its_other_members_and_layout() {
        let text = "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"npx\",\n      \"env\": {\"A\": \"1\"}, \"x-extra\": [1]\n    }\n  }\n}\n";
        let c = cfg(text);
        let (out, changes, entries) = wrap_text(&c, "/bin/portcullis", &mut no_remote());
        assert_eq!(changes, vec![Change::Wrapped { name: "fs".into() }]);
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"/bin/portcullis\",\n      \"args\": [\"proxy\", \"--name=fs\", \"--launch-env=A\", \"--\", \"npx\"],\n      \"env\": {\"A\": \"1\"}, \"x-extra\": [1]\n    }\n  }\n}\n"
        );
        // Wrapping again changes nothing.
        let (again, changes, _) = wrap_text(&cfg(&out), "/bin/portcullis", &mut no_remote());
        assert_eq!(again, out);
        assert_eq!(changes, vec![Change::Unchanged { name: "fs".into() }]);
        // Entry by entry, with or without the manifest's record.
        assert_eq!(unwrap_text(&cfg(&out), &entries).0, text);
        let derived = unwrap_text(&cfg(&out), &[]).0;
        assert_eq!(
            derived,
            "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"npx\",\n      \"args\": [],\n      \"env\": {\"A\": \"1\"}, \"x-extra\": [1]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn a_remote_entry_becomes_a_proxy_on_a_gateway_file() {
        let text = "{\"servers\": {\"r\": {\"type\": \"http\", \"url\": \"https://x.example/mcp\", \"headers\": {\"A\": \"b\"}, \"note\": \"keep\"}}}";
        let mut hook = |s: &ServerEntry| {
            Ok::<_, String>((
                vec![
                    "proxy".into(),
                    "--config".into(),
                    format!("/g/{}.toml", s.name),
                ],
                PathBuf::from(format!("/g/{}.toml", s.name)),
            ))
        };
        let (out, _, entries) = wrap_text(&cfg(text), "portcullis", &mut hook);
        assert_eq!(
            out,
            "{\"servers\": {\"r\": { \"type\": \"stdio\", \"command\": \"portcullis\", \"args\": [\"proxy\", \"--config\", \"/g/r.toml\"], \"note\": \"keep\" }}}"
        );
        assert_eq!(entries[0].gateway, Some(PathBuf::from("/g/r.toml")));
        let c = cfg(&out);
        assert!(matches!(c.servers[0].transport, Transport::Stdio { .. }));
        assert_eq!(unwrap_text(&c, &entries).0, text);
        // Without the record, the original of a remote entry cannot be derived.
        assert!(matches!(unwrap_text(&c, &[]).1[0], Change::Skipped { .. }));
    }

    #[test]
    fn an_entry_with_both_a_command_and_a_url_is_not_wrapped() {
        for entry in [
            r#"{"type": "http", "url": "https://x.example/mcp", "command": "npx", "args": ["srv"]}"#,
            r#"{"serverUrl": "https://x.example/mcp", "command": "npx"}"#,
            r#"{"type": "sse", "command": "npx"}"#,
        ] {
            let text = format!(r#"{{"mcpServers": {{"r": {entry}}}}}"#);
            let c = cfg(&text);
            match &c.servers[0].transport {
                Transport::Invalid { reason } => {
                    assert!(reason.contains("bypass the gateway"), "{reason}")
                }
                other => panic!("{entry}: read as {other:?}"),
            }
        }
        // `type: stdio` beside a command is fine.
        let text = r#"{"mcpServers": {"r": {"type": "stdio", "command": "npx"}}}"#;
        let c = cfg(text);
        assert!(matches!(c.servers[0].transport, Transport::Stdio { .. }));
        // And wrap leaves the ambiguous entry as it was, saying why.
        let text = r#"{"mcpServers": {"r": {"type": "http", "url": "https://x.example/mcp", "command": "npx"}}}"#;
        let (out, changes, _) = wrap_text(&cfg(text), "portcullis", &mut no_remote());
        assert_eq!(out, text);
        assert!(
            matches!(&changes[0], Change::Skipped { why, .. } if why.contains("both `command`"))
        );
    }
}

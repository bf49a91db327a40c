//! MCP client configurations: which clients write which shape, and the server
//! entries found in a file (stdio and remote), each with the byte span of its
//! entry so that it can be rewritten in place.

use crate::jsonc::{self, Kind, Node, SyntaxError};
use portcullis_core::jsonpath::key_segment;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Syntax { path: PathBuf, source: SyntaxError },
    #[error("{path}: no MCP server list found (expected `mcpServers`, `servers`, `mcp.servers` or a top-level list)")]
    NoServers { path: PathBuf },
}

/// The client a configuration file belongs to (from its name and place; the
/// content decides where the servers are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    VsCodeSettings,
    Windsurf,
    /// A plain JSON list of server objects, each with a `name`.
    List,
    /// Any other file with one of the known server lists.
    Other,
}

impl ClientKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientKind::ClaudeDesktop => "claude-desktop",
            ClientKind::ClaudeCode => "claude-code",
            ClientKind::Cursor => "cursor",
            ClientKind::VsCode => "vscode",
            ClientKind::VsCodeSettings => "vscode-settings",
            ClientKind::Windsurf => "windsurf",
            ClientKind::List => "list",
            ClientKind::Other => "other",
        }
    }

    /// Guess from the file's path and whether its top level is a list.
    pub fn of(path: &Path, top_level_list: bool) -> ClientKind {
        if top_level_list {
            return ClientKind::List;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parent = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let full = path.to_string_lossy().replace('\\', "/").to_lowercase();
        match name {
            "claude_desktop_config.json" => ClientKind::ClaudeDesktop,
            ".mcp.json" | ".claude.json" => ClientKind::ClaudeCode,
            "mcp_config.json" if full.contains("windsurf") || full.contains("codeium") => {
                ClientKind::Windsurf
            }
            "mcp.json" if parent == ".cursor" => ClientKind::Cursor,
            "mcp.json" if parent == ".vscode" || full.contains("/code/user/") => ClientKind::VsCode,
            "settings.json" => ClientKind::VsCodeSettings,
            _ => ClientKind::Other,
        }
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    /// A remote server (Streamable HTTP or SSE), from `url` or `serverUrl`.
    Remote {
        url: String,
        /// The key the URL was under (`url` or `serverUrl`).
        url_key: String,
        headers: BTreeMap<String, String>,
        /// The entry's `type` (`http`, `sse`, `streamable-http`…), if any.
        kind: Option<String>,
    },
    /// An entry that is neither (reported, never started or rewritten).
    Invalid { reason: String },
}

/// One server entry of a configuration file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerEntry {
    pub name: String,
    /// JSON path of the entry in the file (`$.mcpServers.files`).
    pub location: String,
    /// The entry object's bytes in the file.
    pub span: Range<usize>,
    /// 1-based line of the entry's first byte.
    pub line: usize,
    /// The whole entry, unknown fields included.
    pub raw: Value,
    pub transport: Transport,
    /// `disabled: true` (Cursor, Windsurf, Claude Code).
    pub disabled: bool,
    /// The parsed entry with its spans (for in-place rewriting).
    #[serde(skip)]
    pub node: Node,
}

/// Marks of a `portcullis proxy` wrapper in a stdio entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Wrapped {
    /// `portcullis proxy -- CMD ARGS…`: the original command and arguments.
    Stdio { command: String, args: Vec<String> },
    /// `portcullis proxy --config FILE`: a gateway file (a wrapped remote server).
    Gateway { config: String },
}

/// Whether `command` is a `portcullis` binary.
pub fn is_portcullis(command: &str) -> bool {
    let file = command.rsplit(['/', '\\']).next().unwrap_or(command);
    let stem = file.strip_suffix(".exe").unwrap_or(file);
    stem == "portcullis"
}

impl ServerEntry {
    /// The wrapper around this entry, if `wrap` (or a person) put one there.
    pub fn wrapped(&self) -> Option<Wrapped> {
        let Transport::Stdio { command, args, .. } = &self.transport else {
            return None;
        };
        if !is_portcullis(command) || args.first().map(String::as_str) != Some("proxy") {
            return None;
        }
        if let Some(i) = args.iter().position(|a| a == "--") {
            let rest = &args[i + 1..];
            let (cmd, tail) = rest.split_first()?;
            return Some(Wrapped::Stdio {
                command: cmd.clone(),
                args: tail.to_vec(),
            });
        }
        let i = args.iter().position(|a| a == "--config")?;
        args.get(i + 1)
            .map(|c| Wrapped::Gateway { config: c.clone() })
    }
}

/// A parsed client configuration file.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub path: PathBuf,
    pub kind: ClientKind,
    /// The file's text, exactly as read.
    pub text: String,
    pub root: Node,
    pub servers: Vec<ServerEntry>,
}

impl ClientConfig {
    pub fn load(path: &Path) -> Result<ClientConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        ClientConfig::parse(path, text)
    }

    /// Parse `text` as the file at `path`.
    pub fn parse(path: &Path, text: String) -> Result<ClientConfig, ConfigError> {
        let root = jsonc::parse(&text).map_err(|source| ConfigError::Syntax {
            path: path.to_path_buf(),
            source,
        })?;
        let kind = ClientKind::of(path, matches!(root.kind, Kind::Array(_)));
        let lists = server_lists(&root);
        if lists.is_empty() {
            return Err(ConfigError::NoServers {
                path: path.to_path_buf(),
            });
        }
        let mut servers = Vec::new();
        for (location, node) in lists {
            collect(&text, &location, node, &mut servers);
        }
        Ok(ClientConfig {
            path: path.to_path_buf(),
            kind,
            text,
            root,
            servers,
        })
    }
}

/// Where the server lists of the known shapes are.
fn server_lists(root: &Node) -> Vec<(String, &Node)> {
    let mut out = Vec::new();
    if let Kind::Array(_) = root.kind {
        out.push(("$".to_string(), root));
        return out;
    }
    // Claude Desktop, Claude Code, Cursor, Windsurf.
    if let Some(n) = root.get("mcpServers") {
        out.push(("$.mcpServers".into(), n));
    }
    // VS Code `.vscode/mcp.json`.
    if let Some(n) = root.get("servers") {
        out.push(("$.servers".into(), n));
    }
    // VS Code `settings.json`: `"mcp": {"servers": …}` or the dotted key.
    if let Some(n) = root.get("mcp").and_then(|m| m.get("servers")) {
        out.push(("$.mcp.servers".into(), n));
    }
    if let Some(n) = root.get("mcp.servers") {
        out.push(("$[\"mcp.servers\"]".into(), n));
    }
    // Claude Code's `~/.claude.json`: per-project server lists.
    if let Some(projects) = root.get("projects") {
        for p in projects.members() {
            if let Some(n) = p.value.get("mcpServers") {
                out.push((format!("$.projects{}.mcpServers", key_segment(&p.key)), n));
            }
        }
    }
    out
}

fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn collect(text: &str, location: &str, list: &Node, out: &mut Vec<ServerEntry>) {
    match &list.kind {
        Kind::Object(members) => {
            for m in members {
                out.push(entry(
                    text,
                    m.key.clone(),
                    format!("{location}{}", key_segment(&m.key)),
                    &m.value,
                ));
            }
        }
        Kind::Array(items) => {
            for (i, n) in items.iter().enumerate() {
                let name = n
                    .get("name")
                    .and_then(Node::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("server-{}", i + 1));
                out.push(entry(text, name, format!("{location}[{i}]"), n));
            }
        }
        _ => {}
    }
}

pub(crate) fn string_map(v: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let s = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => return Err(format!("value of {k:?} is not a string: {other}")),
                };
                out.insert(k.clone(), s);
            }
        }
        Some(other) => return Err(format!("expected an object, found {other}")),
    }
    Ok(out)
}

fn transport(raw: &Value) -> Transport {
    let Some(obj) = raw.as_object() else {
        return Transport::Invalid {
            reason: "the entry is not a JSON object".into(),
        };
    };
    let invalid = |reason: String| Transport::Invalid { reason };
    // An entry with both a command and a URL (or a remote `type`) is read one
    // way by some clients and the other way by others: wrapping its command
    // would leave a client that goes by the URL talking to the server directly.
    let remote_key = ["url", "serverUrl"]
        .into_iter()
        .find(|k| obj.contains_key(*k));
    let remote_type = obj
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.eq_ignore_ascii_case("stdio"));
    if obj.contains_key("command") && (remote_key.is_some() || remote_type.is_some()) {
        let other = match (remote_key, remote_type) {
            (Some(k), _) => format!("`{k}`"),
            (None, Some(t)) => format!("`type: {t}`"),
            (None, None) => String::new(),
        };
        return invalid(format!(
            "both `command` and {other}: clients differ in which one they use (a client that \
             goes by the URL would bypass the gateway); keep only one and wrap again"
        ));
    }
    if let Some(command) = obj.get("command") {
        let Some(command) = command.as_str().filter(|c| !c.is_empty()) else {
            return invalid("`command` is not a non-empty string".into());
        };
        let args = match obj.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => {
                let mut out = Vec::new();
                for (i, x) in a.iter().enumerate() {
                    match x {
                        Value::String(s) => out.push(s.clone()),
                        other => return invalid(format!("`args[{i}]` is not a string: {other}")),
                    }
                }
                out
            }
            Some(other) => return invalid(format!("`args` is not a list: {other}")),
        };
        let env = match string_map(obj.get("env")) {
            Ok(e) => e,
            Err(e) => return invalid(format!("`env`: {e}")),
        };
        let cwd = obj.get("cwd").and_then(Value::as_str).map(str::to_string);
        return Transport::Stdio {
            command: command.to_string(),
            args,
            env,
            cwd,
        };
    }
    for key in ["url", "serverUrl"] {
        if let Some(u) = obj.get(key) {
            let Some(url) = u.as_str().filter(|u| !u.is_empty()) else {
                return invalid(format!("`{key}` is not a non-empty string"));
            };
            let headers = match string_map(obj.get("headers")) {
                Ok(h) => h,
                Err(e) => return invalid(format!("`headers`: {e}")),
            };
            return Transport::Remote {
                url: url.to_string(),
                url_key: key.to_string(),
                headers,
                kind: obj.get("type").and_then(Value::as_str).map(str::to_string),
            };
        }
    }
    invalid("neither `command` (stdio) nor `url`/`serverUrl` (remote)".into())
}

fn entry(text: &str, name: String, location: String, node: &Node) -> ServerEntry {
    let raw = node.to_value();
    let disabled = raw
        .get("disabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    ServerEntry {
        name,
        location,
        span: node.span.clone(),
        line: line_of(text, node.span.start),
        transport: transport(&raw),
        raw,
        disabled,
        node: node.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_paths() {
        let k = |p: &str| ClientKind::of(Path::new(p), false);
        assert_eq!(
            k("/h/.config/Claude/claude_desktop_config.json"),
            ClientKind::ClaudeDesktop
        );
        assert_eq!(k("/p/.mcp.json"), ClientKind::ClaudeCode);
        assert_eq!(k("/h/.cursor/mcp.json"), ClientKind::Cursor);
        assert_eq!(k("/p/.vscode/mcp.json"), ClientKind::VsCode);
        assert_eq!(
            k("/h/.config/Code/User/settings.json"),
            ClientKind::VsCodeSettings
        );
        assert_eq!(
            k("/h/.codeium/windsurf/mcp_config.json"),
            ClientKind::Windsurf
        );
        assert_eq!(ClientKind::of(Path::new("x.json"), true), ClientKind::List);
    }

    #[test]
    fn wrapped_entries_are_recognized() {
        let c = ClientConfig::parse(
            Path::new("c.json"),
            r#"{"mcpServers": {
                "a": {"command": "/usr/bin/portcullis", "args": ["proxy", "--", "npx", "-y", "x y"]},
                "b": {"command": "portcullis.exe", "args": ["proxy", "--config", "g.toml"]},
                "c": {"command": "npx", "args": ["proxy", "--", "x"]}}}"#
                .to_string(),
        )
        .unwrap();
        assert_eq!(
            c.servers[0].wrapped(),
            Some(Wrapped::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "x y".into()]
            })
        );
        assert_eq!(
            c.servers[1].wrapped(),
            Some(Wrapped::Gateway {
                config: "g.toml".into()
            })
        );
        assert_eq!(c.servers[2].wrapped(), None);
    }
}

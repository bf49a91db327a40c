//! The gateway's configuration (`gateway.toml`): upstream servers, listeners,
//! limits, failure behaviour, the audit log and the detector configuration.

use crate::audit::AuditConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid gateway configuration: {0}")]
    Invalid(String),
}

/// One upstream MCP server: a stdio child or a remote Streamable HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Namespace of its tools and prompts (`<name>__<tool>` toward the client).
    pub name: String,
    /// Stdio: the program; arguments are passed as given, never re-joined.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the endpoint URL.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Restarts of a stdio child that died, before the server is marked failed.
    #[serde(default = "default_restarts")]
    pub max_restarts: u32,
}

fn default_restarts() -> u32 {
    3
}

impl ServerConfig {
    pub fn stdio(name: &str, command: &str, args: &[String]) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            command: Some(command.into()),
            args: args.to_vec(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            max_restarts: default_restarts(),
        }
    }
}

/// What happens to metadata (tool definitions, prompts) the detector holds for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataReview {
    /// Remove the instruction-shaped segments; forward the rest if what remains is clean.
    Sanitize,
    /// Withhold the whole tool or prompt until approved.
    Hold,
}

/// Behaviour when a stage or the audit log fails on an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// Hold the item (REVIEW), never forward it unseen. The default.
    Closed,
    /// Forward the item and log the failure. Only for debugging.
    Open,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Streamable HTTP listener (`127.0.0.1:PORT`); absent = no HTTP.
    #[serde(default)]
    pub listen: Option<String>,
    /// Path of the MCP endpoint on the listener.
    #[serde(default = "default_path")]
    pub http_path: String,
    /// Also serve one client over this process's stdin/stdout.
    #[serde(default)]
    pub stdio: bool,
    /// Browser origins allowed to call the HTTP endpoint (requests with another
    /// `Origin` are refused; requests without one are allowed). Empty = only
    /// loopback origins.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Hosts accepted in the `Host` header (DNS-rebinding defence). Empty = loopback.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Environment variable holding a bearer token the HTTP client must send.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// Detector configuration file (as for `portcullis scan --config`); absent =
    /// the balanced preset.
    #[serde(default)]
    pub detector: Option<PathBuf>,
    /// Largest message accepted from an upstream, in bytes; larger results are
    /// replaced by an error.
    #[serde(default = "default_max_message")]
    pub max_message_bytes: usize,
    /// Per-request timeout toward an upstream, in seconds.
    #[serde(default = "default_timeout")]
    pub request_timeout_secs: u64,
    #[serde(default = "default_fail_mode")]
    pub fail_mode: FailMode,
    #[serde(default = "default_metadata_review")]
    pub metadata_review: MetadataReview,
    /// Separator between server name and tool/prompt name when several servers
    /// are fronted.
    #[serde(default = "default_separator")]
    pub namespace_separator: String,
    pub audit: AuditConfig,
    #[serde(default, rename = "server")]
    pub servers: Vec<ServerConfig>,
}

fn default_path() -> String {
    "/mcp".into()
}
fn default_max_message() -> usize {
    16 * 1024 * 1024
}
fn default_timeout() -> u64 {
    120
}
fn default_fail_mode() -> FailMode {
    FailMode::Closed
}
fn default_metadata_review() -> MetadataReview {
    MetadataReview::Sanitize
}
fn default_separator() -> String {
    "__".into()
}

impl GatewayConfig {
    /// The configuration of `portcullis proxy -- CMD ARGS…`: one stdio server,
    /// served over stdio, not namespaced.
    pub fn single_stdio(command: &str, args: &[String], audit: AuditConfig) -> GatewayConfig {
        GatewayConfig {
            listen: None,
            http_path: default_path(),
            stdio: true,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            bearer_token_env: None,
            detector: None,
            max_message_bytes: default_max_message(),
            request_timeout_secs: default_timeout(),
            fail_mode: FailMode::Closed,
            metadata_review: MetadataReview::Sanitize,
            namespace_separator: default_separator(),
            audit,
            servers: vec![ServerConfig::stdio("upstream", command, args)],
        }
    }

    /// Read and validate a configuration file.
    pub fn load(path: &Path) -> Result<GatewayConfig, ConfigError> {
        let cfg = GatewayConfig::read(path)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read a configuration file without validating it, for callers that apply
    /// command-line overrides (`--listen`) first and then call [`Self::validate`].
    pub fn read(path: &Path) -> Result<GatewayConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut cfg: GatewayConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        // Relative paths in the file are relative to the file.
        let base = path.parent().unwrap_or(Path::new("."));
        let rebase = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        rebase(&mut cfg.audit.log);
        if let Some(i) = cfg.audit.index.as_mut() {
            rebase(i);
        }
        if let Some(d) = cfg.detector.as_mut() {
            rebase(d);
        }
        for s in &mut cfg.servers {
            if let Some(c) = s.cwd.as_mut() {
                rebase(c);
            }
            // A command given as a relative path (`bin/server`, `../x`) is relative
            // to the file too; a bare name (`npx`) is looked up on PATH.
            if let Some(c) = s.command.as_mut() {
                if c.contains('/') && Path::new(c.as_str()).is_relative() {
                    *c = base.join(c.as_str()).display().to_string();
                }
            }
        }
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.servers.is_empty() {
            return bad("no [[server]] configured".into());
        }
        if !self.stdio && self.listen.is_none() {
            return bad("neither `listen` (HTTP) nor `stdio = true` is set".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.servers {
            if s.name.is_empty() || s.name.contains(&self.namespace_separator) {
                return bad(format!(
                    "server name {:?} is empty or contains the separator {:?}",
                    s.name, self.namespace_separator
                ));
            }
            if !seen.insert(s.name.as_str()) {
                return bad(format!("server name {:?} is used twice", s.name));
            }
            match (&s.command, &s.url) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return bad(format!(
                        "server {:?} needs exactly one of `command` or `url`",
                        s.name
                    ))
                }
            }
        }
        if self.request_timeout_secs == 0 || self.max_message_bytes == 0 {
            return bad("request_timeout_secs and max_message_bytes must be positive".into());
        }
        Ok(())
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// Whether names are namespaced (more than one upstream).
    pub fn namespaced(&self) -> bool {
        self.servers.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rebases_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gateway.toml");
        std::fs::write(
            &p,
            r#"
listen = "127.0.0.1:0"
[audit]
log = "audit/log.jsonl"
[[server]]
name = "files"
command = "npx"
args = ["-y", "a b"]
[[server]]
name = "remote"
url = "http://127.0.0.1:9/mcp"
"#,
        )
        .unwrap();
        let c = GatewayConfig::load(&p).unwrap();
        assert_eq!(c.audit.log, dir.path().join("audit/log.jsonl"));
        assert_eq!(c.servers[0].args, vec!["-y", "a b"]);
        assert_eq!(c.servers[0].command.as_deref(), Some("npx"));
        assert!(c.audit.fsync);
        assert_eq!(c.fail_mode, FailMode::Closed);
        assert!(c.namespaced());
    }

    #[test]
    fn rejects_unknown_keys_and_bad_servers() {
        let bad = [
            "listen='127.0.0.1:0'\nbogus=1\n[audit]\nlog='x'\n[[server]]\nname='a'\ncommand='x'",
            "listen='127.0.0.1:0'\n[audit]\nlog='x'\n[[server]]\nname='a'",
            "listen='127.0.0.1:0'\n[audit]\nlog='x'\n[[server]]\nname='a__b'\ncommand='x'",
            "[audit]\nlog='x'\n[[server]]\nname='a'\ncommand='x'",
        ];
        let dir = tempfile::tempdir().unwrap();
        for (i, text) in bad.iter().enumerate() {
            let p = dir.path().join(format!("{i}.toml"));
            std::fs::write(&p, text).unwrap();
            assert!(GatewayConfig::load(&p).is_err(), "case {i} accepted");
        }
    }
}

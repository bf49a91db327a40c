//! The gateway's configuration (`gateway.toml`): upstream servers, listeners,
//! limits, failure behaviour, the audit log and the detector configuration.

use crate::audit::AuditConfig;
/// The controls' tables, as `portcullis-controls` defines them.
pub use portcullis_controls::config::{
    FirstSight, FlowAction, NameAction, NamesConfig, OnChange, ParamAction, ParamsConfig,
    PinsConfig, RedirectionConfig, TaintConfig, ToolClass,
};
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
    /// Names of variables of the gateway's own environment that the server
    /// inherits as part of its launch (what a client sets for a wrapped entry):
    /// recorded by name and digest with the launch, never by value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_env: Vec<String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the endpoint URL.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Streamable HTTP: keep connections to the server for reuse instead of one
    /// per request (rmcp's default). Saves a TCP handshake per call; turn it on
    /// only for a server that sends with TCP_NODELAY (Node's HTTP server and
    /// this project's do): on one that does not, a reused connection waits out
    /// a delayed ACK, about 40 ms, per call.
    #[serde(default)]
    pub keep_alive: bool,
    /// Restarts of a stdio child that died, before the server is marked failed.
    #[serde(default = "default_restarts")]
    pub max_restarts: u32,
}

fn default_restarts() -> u32 {
    3
}

impl ServerConfig {
    /// This server's launch: its `env`, and the variables of the gateway's own
    /// environment that `launch_env` names (a wrapped entry's `env`, which the
    /// client sets on the proxy and the server inherits), their values read here.
    pub fn launch(&self) -> portcullis_controls::launch::Launch {
        let mut env = self.env.clone();
        for k in &self.launch_env {
            if !env.contains_key(k) {
                let v = std::env::var_os(k)
                    .map(|v| v.to_string_lossy().into_owned())
                    .unwrap_or_default();
                env.insert(k.clone(), v);
            }
        }
        portcullis_controls::launch::Launch::new(
            self.command.as_deref(),
            &self.args,
            self.cwd.as_deref(),
            &env,
            self.url.as_deref(),
            &self.headers,
        )
    }

    pub fn stdio(name: &str, command: &str, args: &[String]) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            command: Some(command.into()),
            args: args.to_vec(),
            env: BTreeMap::new(),
            launch_env: Vec::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            keep_alive: false,
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

/// What happens to a tool result, resource contents, upstream error or
/// notification the detector flags (REVIEW or BLOCK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultReview {
    /// Cut the flagged text (each flagged sentence to the end of its paragraph;
    /// without a finding, the paragraphs, lines or windows flagged alone), a
    /// notice in its place; forward the rest if it re-inspects clean, else
    /// withhold it all.
    Redact,
    /// Withhold the whole result; the client gets the gateway's notice.
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
    /// loopback origins on a loopback `listen`, none on any other.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Hosts accepted in the `Host` header (DNS-rebinding defence). Empty =
    /// loopback names; required for a `listen` that is not loopback.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Environment variable holding a bearer token the HTTP client must send;
    /// required for a `listen` that is not loopback.
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
    #[serde(default = "default_result_review")]
    pub result_review: ResultReview,
    /// Separator between server name and tool/prompt name when several servers
    /// are fronted.
    #[serde(default = "default_separator")]
    pub namespace_separator: String,
    pub audit: AuditConfig,
    /// The structural controls' persistent state (pins, review queue, allowlist).
    #[serde(default)]
    pub state: StateConfig,
    /// The Prometheus endpoint.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Trust on first use: pins of tool, prompt and template definitions and of
    /// server instructions.
    #[serde(default)]
    pub pins: PinsConfig,
    /// The human review queue.
    #[serde(default)]
    pub review: ReviewConfig,
    /// Tool names compared across servers.
    #[serde(default)]
    pub names: NamesConfig,
    /// Over-privileged parameters (MSB's OP).
    #[serde(default)]
    pub params: ParamsConfig,
    /// Taint of values from tool results and egress control.
    #[serde(default)]
    pub taint: TaintConfig,
    /// Preference manipulation (PM) and tool transfer (TT) findings.
    #[serde(default)]
    pub redirection: RedirectionConfig,
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
fn default_result_review() -> ResultReview {
    ResultReview::Redact
}
fn default_separator() -> String {
    "__".into()
}

impl GatewayConfig {
    /// The offline analysis (`audit`, `scan --structural`) under this
    /// gateway's policies: the findings and decisions it would give.
    pub fn analyze_options(&self) -> portcullis_controls::analyze::AnalyzeOptions {
        portcullis_controls::analyze::AnalyzeOptions {
            detector: true,
            names: self.names.clone(),
            params: self.params.clone(),
            redirection: self.redirection.clone(),
            rename_similarity: self.pins.rename_similarity,
        }
    }

    /// The configuration of `portcullis proxy [--name NAME] -- CMD ARGS…`: one
    /// stdio server, served over stdio, not namespaced. `name` is the server's
    /// identity (pins, review items, taint labels and records are keyed by it);
    /// without one it is [`derived_name`] of the command.
    pub fn single_stdio(
        name: Option<&str>,
        command: &str,
        args: &[String],
        audit: AuditConfig,
    ) -> GatewayConfig {
        let name = match name {
            Some(n) => n.to_string(),
            None => derived_name(command, args),
        };
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
            result_review: default_result_review(),
            namespace_separator: default_separator(),
            audit,
            state: StateConfig::default(),
            metrics: MetricsConfig::default(),
            pins: PinsConfig::default(),
            review: ReviewConfig::default(),
            names: NamesConfig::default(),
            params: ParamsConfig::default(),
            taint: TaintConfig::default(),
            redirection: RedirectionConfig::default(),
            servers: vec![ServerConfig::stdio(&name, command, args)],
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
        if let Some(s) = cfg.state.path.as_mut() {
            rebase(s);
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
            return bad(
                "no [[server]] configured; add one (docs/gateway.md) or run \
                 `portcullis proxy -- COMMAND ARGS…`"
                    .into(),
            );
        }
        if !self.stdio && self.listen.is_none() {
            return bad(
                "neither `listen` (HTTP) nor `stdio = true` is set; set one (or pass \
                 --listen ADDR)"
                    .into(),
            );
        }
        if let Some(url) = &self.state.url {
            if self.state.path.is_some() {
                return bad(
                    "[state] sets both `path` (a SQLite file) and `url` (PostgreSQL); keep \
                     the one the gateway should use"
                        .into(),
                );
            }
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return bad(format!(
                    "[state] url = {:?}: expected a PostgreSQL URL \
                     (postgres://USER@HOST:PORT/DATABASE); a SQLite file is `[state] path`",
                    crate::structural::redact_url(url)
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.servers {
            if s.name.is_empty() {
                return bad("a server name is empty; give every [[server]] a `name`".into());
            }
            // The separator matters only where names are namespaced: a single
            // server (`proxy --name "a__b" -- …`) may be called anything.
            if self.namespaced() && s.name.contains(&self.namespace_separator) {
                return bad(format!(
                    "server name {:?} contains the namespace separator {:?}; rename the \
                     server or set `namespace_separator`",
                    s.name, self.namespace_separator
                ));
            }
            if !seen.insert(s.name.as_str()) {
                return bad(format!(
                    "server name {:?} is used twice; server names must be unique (they key \
                     pins and review items)",
                    s.name
                ));
            }
            match (&s.command, &s.url) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return bad(format!(
                        "server {:?} needs exactly one of `command` (a stdio server) or `url` \
                         (Streamable HTTP)",
                        s.name
                    ))
                }
            }
        }
        if !(0.0..=1.0).contains(&self.pins.rename_similarity) {
            return bad("pins.rename_similarity must be in [0, 1]".into());
        }
        if self.taint.min_len < 4 {
            return bad("taint.min_len must be at least 4".into());
        }
        for k in self.taint.classes.keys() {
            if !k.contains('/') {
                return bad(format!(
                    "taint.classes key {k:?} must be \"SERVER/TOOL\" (or \"*/TOOL\")"
                ));
            }
        }
        if self.request_timeout_secs == 0 || self.max_message_bytes == 0 {
            return bad("request_timeout_secs and max_message_bytes must be positive".into());
        }
        for s in &self.taint.trust_read_only {
            if !self.servers.iter().any(|c| &c.name == s) {
                return bad(format!(
                    "taint.trust_read_only names {s:?}, which is not a configured server; \
                     list only [[server]] names"
                ));
            }
        }
        self.validate_listener()?;
        self.validate_metrics()
    }

    /// A metrics endpoint other machines reach must authenticate its scraper.
    fn validate_metrics(&self) -> Result<(), ConfigError> {
        let Some(listen) = &self.metrics.listen else {
            return Ok(());
        };
        // Port 0 lets the system choose: two such listeners never collide.
        if self.listen.as_deref() == Some(listen.as_str()) && !listen.ends_with(":0") {
            return Err(ConfigError::Invalid(format!(
                "[metrics] listen = {listen:?} is also the gateway's `listen`; give the \
                 metrics endpoint its own port (e.g. 127.0.0.1:9464)"
            )));
        }
        if !listen_is_loopback(listen)
            && self
                .metrics
                .bearer_token_env
                .as_deref()
                .is_none_or(str::is_empty)
        {
            return Err(ConfigError::Invalid(format!(
                "[metrics] listen = {listen:?} is not a loopback address, and no bearer token \
                 is configured: anyone who can reach it could read which servers and tools \
                 are used and held. Add `bearer_token_env = \"VAR\"` under [metrics] and set \
                 VAR to a long random token the scraper sends as `Authorization: Bearer \
                 TOKEN`, or listen on 127.0.0.1"
            )));
        }
        Ok(())
    }

    /// A listener reachable from other machines must authenticate its clients and
    /// name the hosts they reach it by: the loopback default of the Host check
    /// is no defence there (any client can send `Host: 127.0.0.1`).
    fn validate_listener(&self) -> Result<(), ConfigError> {
        let Some(listen) = &self.listen else {
            return Ok(());
        };
        if listen_is_loopback(listen) {
            return Ok(());
        }
        if self.bearer_token_env.as_deref().is_none_or(str::is_empty) {
            return Err(ConfigError::Invalid(format!(
                "listen = {listen:?} is not a loopback address, and no bearer token is \
                 configured: anyone who can reach it could use every upstream. Add \
                 `bearer_token_env = \"VAR\"` to the gateway file (--config) and set VAR \
                 to a long random token that clients send as `Authorization: Bearer \
                 TOKEN`, or listen on 127.0.0.1"
            )));
        }
        if self.allowed_hosts.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "listen = {listen:?} is not a loopback address, and `allowed_hosts` is \
                 empty: the default (loopback names only) cannot defend a listener other \
                 machines reach. Add `allowed_hosts = [\"NAME\", \"NAME:PORT\"]` with \
                 the host names clients use to reach the gateway to the gateway file \
                 (--config); `allowed_origins` lists the browser origins allowed (none, \
                 if empty)"
            )));
        }
        Ok(())
    }

    /// The state store: `[state] url`, else the file `[state] path`, else
    /// `<audit log>.state.sqlite`.
    pub fn state_location(&self) -> crate::structural::StateLocation {
        match &self.state.url {
            Some(u) => crate::structural::StateLocation::Postgres(u.clone()),
            None => crate::structural::StateLocation::Sqlite(self.state_path()),
        }
    }

    /// The structural state file: `[state] path`, else `<audit log>.state.sqlite`.
    pub fn state_path(&self) -> PathBuf {
        self.state.path.clone().unwrap_or_else(|| {
            let mut p = self.audit.log.clone().into_os_string();
            p.push(".state.sqlite");
            PathBuf::from(p)
        })
    }

    /// Whether the HTTP listener (if any) is reachable from this machine only.
    pub fn listen_is_loopback(&self) -> bool {
        self.listen.as_deref().is_none_or(listen_is_loopback)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// Whether names are namespaced (more than one upstream).
    pub fn namespaced(&self) -> bool {
        self.servers.len() > 1
    }
}

/// Whether a listen address (`IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`) is
/// a loopback address. Anything else (an unspecified address such as
/// `0.0.0.0`, another interface, a host name) counts as reachable from other
/// machines.
pub fn listen_is_loopback(listen: &str) -> bool {
    if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    host.eq_ignore_ascii_case("localhost")
}

/// Programs that run the server named in their arguments rather than being
/// the server (`npx -y @scope/pkg`, `uvx mcp-server-time`, `node build/index.js`).
const LAUNCHERS: &[&str] = &[
    "npx", "pnpx", "bunx", "uvx", "pipx", "uv", "node", "deno", "bun", "python", "python3", "py",
    "docker", "podman",
];

/// Entry files named by convention, not after their server.
const GENERIC_ENTRY_FILES: &[&str] = &["index", "main", "server", "app", "cli", "__main__"];

/// Directories of build output or sources between a package and its entry file.
const BUILD_DIRS: &[&str] = &["dist", "build", "lib", "src", "out", "bin", "esm", "cjs"];

/// Subcommands of a launcher that come before the server (`uv run X`,
/// `pipx run X`, `docker run IMAGE`, `deno run FILE`).
const LAUNCHER_VERBS: &[&str] = &["run", "tool", "exec", "x", "dlx"];

/// The name of a server started without one (`portcullis proxy -- CMD ARGS…`):
/// the file stem of the program, or, when the program is a launcher (`npx`,
/// `uvx`, `node`, `python -m`, `docker run`…), of the first argument that is not
/// a flag or a launcher verb, with an npm scope, a version (`pkg@1.2`), a tag
/// and a file extension taken off. The arguments after it (flags such as
/// `--local-timezone=…`) never enter the name, so the name stays the same when
/// they change. A generic entry file (`index`, `main`, `server`, `app`, `cli`,
/// `__main__`) is named after the directory it is in, above any build or source
/// directory (`dist`, `build`, `lib`, `src`, `out`, `bin`): `node
/// ~/mcp/weather/build/index.js` is `weather`, not `index`, so two such servers do
/// not share pins. `upstream` if nothing is left.
pub fn derived_name(command: &str, args: &[String]) -> String {
    fn stem(s: &str) -> String {
        let base = file_stem(s);
        if !GENERIC_ENTRY_FILES.contains(&base.as_str()) {
            return base;
        }
        let mut dirs: Vec<&str> = s.split(['/', '\\']).collect();
        dirs.pop();
        dirs.into_iter()
            .rev()
            .find(|d| !d.is_empty() && *d != "." && *d != ".." && !BUILD_DIRS.contains(d))
            .map_or(base, str::to_string)
    }
    fn file_stem(s: &str) -> String {
        let file = s.rsplit(['/', '\\']).next().unwrap_or(s);
        let file = file.strip_suffix(".exe").unwrap_or(file);
        // A version or tag: `pkg@1.2.3`, `image:tag`.
        let file = match file.find(['@', ':']) {
            Some(i) if i > 0 => &file[..i],
            _ => file,
        };
        match file.rsplit_once('.') {
            Some((base, ext))
                if !base.is_empty() && ["js", "mjs", "cjs", "ts", "py", "exe"].contains(&ext) =>
            {
                base.to_string()
            }
            _ => file.to_string(),
        }
    }
    let program = stem(command);
    let mut name = program.clone();
    if LAUNCHERS.contains(&program.as_str()) {
        let mut rest = args.iter().map(String::as_str);
        while let Some(a) = rest.next() {
            if a == "-m" {
                if let Some(module) = rest.next() {
                    name = stem(module);
                }
                break;
            }
            if a.starts_with('-') || LAUNCHER_VERBS.contains(&a) || a.is_empty() {
                continue;
            }
            // `@scope/pkg@1.2` → `pkg`.
            let a = a
                .strip_prefix('@')
                .map_or(a, |s| s.split_once('/').map_or(s, |p| p.1));
            name = stem(a);
            break;
        }
    }
    let name = name.trim().to_string();
    if name.is_empty() {
        "upstream".into()
    } else {
        name
    }
}

/// `[metrics]`: the Prometheus endpoint (`GET /metrics`, OpenMetrics text).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Address of the endpoint (`127.0.0.1:9464`); absent = no endpoint.
    #[serde(default)]
    pub listen: Option<String>,
    /// Environment variable holding a bearer token the scraper must send;
    /// required for a `listen` that is not loopback (the page names servers,
    /// methods and how often each was held).
    #[serde(default)]
    pub bearer_token_env: Option<String>,
}

/// `[state]`: where pins, the review queue, the allowlist and taint labels live.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// The SQLite file; absent = `<audit log>.state.sqlite`.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A PostgreSQL database instead (`postgres://user@host/db`), shared by
    /// every gateway that names it. A password may come from `PGPASSWORD`
    /// rather than the URL.
    #[serde(default)]
    pub url: Option<String>,
}

/// Debug output (logs, panics) never shows the URL's password.
impl std::fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateConfig")
            .field("path", &self.path)
            .field(
                "url",
                &self.url.as_deref().map(crate::structural::redact_url),
            )
            .finish()
    }
}

/// `[review]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewConfig {
    /// How long a held tool call waits for a decision before it fails closed; 0 =
    /// it fails at once (the client may retry after approval).
    #[serde(default)]
    pub call_timeout_secs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_options_are_a_gateway_configurations_defaults() {
        let cfg: GatewayConfig = toml::from_str(
            "[audit]\nlog = \"a.jsonl\"\n[[server]]\nname = \"a\"\ncommand = \"a\"\n",
        )
        .unwrap();
        let (d, g) = (
            portcullis_controls::analyze::AnalyzeOptions::default(),
            cfg.analyze_options(),
        );
        assert_eq!(
            (d.names, d.params, d.redirection, d.rename_similarity),
            (g.names, g.params, g.redirection, g.rename_similarity)
        );
    }

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
        assert_eq!(
            c.audit.effective_durability(),
            Ok(crate::audit::Durability::Group)
        );
        assert_eq!(c.fail_mode, FailMode::Closed);
        assert!(c.namespaced());
    }

    #[test]
    fn a_server_without_a_name_is_named_after_its_program_not_its_flags() {
        let n = |cmd: &str, args: &[&str]| {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            derived_name(cmd, &args)
        };
        assert_eq!(
            n("npx", &["-y", "@modelcontextprotocol/server-everything"]),
            "server-everything"
        );
        assert_eq!(
            n("npx", &["-y", "some-server@1.2.3", "/data"]),
            "some-server"
        );
        // A changed flag after the server keeps the name.
        assert_eq!(
            n(
                "uvx",
                &["mcp-server-time", "--local-timezone=Europe/Zurich"]
            ),
            n("uvx", &["mcp-server-time", "--local-timezone=Asia/Tokyo"])
        );
        assert_eq!(n("uvx", &["mcp-server-time"]), "mcp-server-time");
        assert_eq!(
            n("python3", &["-m", "db_server", "--path", "x"]),
            "db_server"
        );
        assert_eq!(n("uv", &["run", "server.py"]), "server");
        // Generic entry files are named after their package directory.
        assert_eq!(
            n(
                "node",
                &["/srv/node_modules/@modelcontextprotocol/server-everything/dist/index.js"]
            ),
            "server-everything"
        );
        assert_eq!(
            n("node", &["/home/u/mcp/weather/build/index.js"]),
            "weather"
        );
        assert_eq!(
            n("python3", &["/home/u/notes-mcp/server.py", "-v"]),
            "notes-mcp"
        );
        assert_eq!(n("python", &["C:\\mcp\\files\\src\\main.py"]), "files");
        assert_eq!(
            n(
                "uv",
                &["--directory", "/home/u/weather", "run", "weather.py"]
            ),
            "weather"
        );
        assert_eq!(n("node", &["build/index.js"]), "index");
        assert_eq!(n("/opt/gitsrv/bin/server", &[]), "gitsrv");
        assert_eq!(n("/opt/notes server/bin/notes", &["--title", "x"]), "notes");
        assert_eq!(n("C:\\tools\\srv.exe", &[]), "srv");
        assert_eq!(n("node", &[]), "node");
        assert_eq!(n("", &[]), "upstream");
        let c = GatewayConfig::single_stdio(
            None,
            "uvx",
            &["mcp-server-time".into()],
            AuditConfig::at("a.jsonl"),
        );
        assert_eq!(c.servers[0].name, "mcp-server-time");
        let c = GatewayConfig::single_stdio(Some("my__time"), "uvx", &[], AuditConfig::at("a"));
        assert_eq!(c.servers[0].name, "my__time");
        c.validate()
            .expect("one server is not namespaced: any name");
    }

    #[test]
    fn a_metrics_endpoint_off_loopback_needs_a_token_and_its_own_port() {
        let with = |metrics: &str| -> Result<(), ConfigError> {
            let text = format!(
                "listen = '127.0.0.1:8717'\n[metrics]\n{metrics}\n[audit]\nlog = 'x'\n\
                 [[server]]\nname = 'a'\ncommand = 'x'"
            );
            let cfg: GatewayConfig = toml::from_str(&text).unwrap();
            cfg.validate()
        };
        with("").unwrap();
        with("listen = '127.0.0.1:9464'").unwrap();
        with("listen = 'localhost:0'").unwrap();
        for open in ["0.0.0.0:9464", "[::]:9464", "10.1.2.3:9464"] {
            let e = with(&format!("listen = {open:?}")).unwrap_err().to_string();
            assert!(
                e.contains("[metrics] listen")
                    && e.contains("bearer_token_env")
                    && e.contains(open),
                "{open}: {e}"
            );
            let e = with(&format!("listen = {open:?}\nbearer_token_env = ''"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("bearer_token_env"), "{open}: {e}");
            with(&format!("listen = {open:?}\nbearer_token_env = 'TOK'"))
                .unwrap_or_else(|e| panic!("{open}: {e}"));
        }
        let e = with("listen = '127.0.0.1:8717'").unwrap_err().to_string();
        assert!(e.contains("its own port"), "{e}");
        let e = toml::from_str::<GatewayConfig>(
            "[metrics]\nlisten = '127.0.0.1:1'\nport = 2\n[audit]\nlog = 'x'",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("port"), "{e}");
    }

    #[test]
    fn a_listener_other_machines_reach_needs_a_token_and_its_host_names() {
        let with = |listen: &str, extra: &str| -> Result<(), ConfigError> {
            let text = format!(
                "listen = {listen:?}\n{extra}\n[audit]\nlog = 'x'\n[[server]]\nname = 'a'\ncommand = 'x'"
            );
            let cfg: GatewayConfig = toml::from_str(&text).unwrap();
            cfg.validate()
        };
        for loopback in ["127.0.0.1:8717", "[::1]:0", "localhost:8717", "127.0.0.2:1"] {
            with(loopback, "").unwrap_or_else(|e| panic!("{loopback}: {e}"));
        }
        for open in [
            "0.0.0.0:8717",
            "[::]:8717",
            "192.168.1.20:8717",
            "gw.example:8717",
        ] {
            let e = with(open, "").unwrap_err().to_string();
            assert!(
                e.contains("bearer_token_env") && e.contains(open),
                "{open}: {e}"
            );
            let e = with(open, "allowed_hosts = ['gw.example']")
                .unwrap_err()
                .to_string();
            assert!(e.contains("bearer_token_env"), "{open}: {e}");
            let e = with(open, "bearer_token_env = 'TOK'")
                .unwrap_err()
                .to_string();
            assert!(e.contains("allowed_hosts"), "{open}: {e}");
            let e = with(
                open,
                "bearer_token_env = ''\nallowed_hosts = ['gw.example']",
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("bearer_token_env"), "{open}: {e}");
            with(
                open,
                "bearer_token_env = 'TOK'\nallowed_hosts = ['gw.example:8717']",
            )
            .unwrap_or_else(|e| panic!("{open}: {e}"));
        }
        let e = with("127.0.0.1:0", "[taint]\ntrust_read_only = ['nope']")
            .unwrap_err()
            .to_string();
        assert!(e.contains("trust_read_only") && e.contains("nope"), "{e}");
        with("127.0.0.1:0", "[taint]\ntrust_read_only = ['a']").unwrap();
    }

    #[test]
    fn rejects_unknown_keys_and_bad_servers() {
        let bad = [
            "listen='127.0.0.1:0'\nbogus=1\n[audit]\nlog='x'\n[[server]]\nname='a'\ncommand='x'",
            "listen='127.0.0.1:0'\n[audit]\nlog='x'\n[[server]]\nname='a'",
            "listen='127.0.0.1:0'\n[audit]\nlog='x'\n[[server]]\nname='a__b'\ncommand='x'\n[[server]]\nname='c'\ncommand='x'",
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

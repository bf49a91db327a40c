//! What a test server serves: its profile, the attacks switched on, the fault tools.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Errors in a test server's configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("unknown profile `{0}` (expected `benign` or `attack`)")]
    UnknownProfile(String),
    #[error("unknown poison `{0}` (expected one of: {list})", list = Poison::NAMES.join(", "))]
    UnknownPoison(String),
    #[error("unknown hostile behaviour `{0}` (expected one of: {list})", list = Hostile::NAMES.join(", "))]
    UnknownHostile(String),
    #[error("unknown transport `{0}` (expected `stdio` or `http`)")]
    UnknownTransport(String),
}

/// The server's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Plain tools, resources and prompts; nothing hostile.
    #[default]
    Benign,
    /// The benign surface plus poison on the selected channels, and the fault tools.
    Attack,
}

impl FromStr for Profile {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "benign" => Ok(Self::Benign),
            "attack" => Ok(Self::Attack),
            other => Err(ConfigError::UnknownProfile(other.to_string())),
        }
    }
}

/// The transport a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportKind {
    #[default]
    Stdio,
    Http,
}

impl FromStr for TransportKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stdio" => Ok(Self::Stdio),
            "http" => Ok(Self::Http),
            other => Err(ConfigError::UnknownTransport(other.to_string())),
        }
    }
}

/// One attack of the attack profile, each on its own channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Poison {
    Instructions,
    Description,
    Schema,
    Result,
    Structured,
    Error,
    Resource,
    Prompt,
    Sampling,
    Elicitation,
    Rugpull,
    Secret,
    /// MSB's over-privileged parameter (OP): a tool whose schema asks for the
    /// model's name (`llm_model_name`) and, nested, the conversation history.
    Params,
}

impl Poison {
    pub const ALL: [Poison; 13] = [
        Poison::Instructions,
        Poison::Description,
        Poison::Schema,
        Poison::Result,
        Poison::Structured,
        Poison::Error,
        Poison::Resource,
        Poison::Prompt,
        Poison::Sampling,
        Poison::Elicitation,
        Poison::Rugpull,
        Poison::Secret,
        Poison::Params,
    ];
    pub const NAMES: [&'static str; 13] = [
        "instructions",
        "description",
        "schema",
        "result",
        "structured",
        "error",
        "resource",
        "prompt",
        "sampling",
        "elicitation",
        "rugpull",
        "secret",
        "params",
    ];

    pub fn name(self) -> &'static str {
        let i = Self::ALL.iter().position(|p| *p == self).unwrap_or(0);
        Self::NAMES[i]
    }

    /// Parses a comma list (`all` or empty selects every attack).
    pub fn parse_list(s: &str) -> Result<BTreeSet<Poison>, ConfigError> {
        let mut set = BTreeSet::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "all" {
                set.extend(Self::ALL);
            } else {
                set.insert(part.parse()?);
            }
        }
        if set.is_empty() {
            set.extend(Self::ALL);
        }
        Ok(set)
    }
}

impl FromStr for Poison {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| ConfigError::UnknownPoison(s.to_string()))
    }
}

impl fmt::Display for Poison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that decides what a test server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    pub profile: Profile,
    /// Attacks switched on; ignored (empty) in the benign profile.
    pub poisons: BTreeSet<Poison>,
    /// Whether the fault tools (`hang`, `crash`, `garbage`, `big`, `slow`) are listed.
    pub faults: bool,
    /// The transport; `garbage` is only offered on stdio.
    pub transport: TransportKind,
    /// Structural-control fixtures (any profile): see [`Extras`].
    pub extras: Extras,
}

/// Fixtures for the structural controls, switched on independently of the poisons
/// (so `--poison all` keeps its meaning).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extras {
    /// List `unit_convert`, a quiet rug pull: each of its first calls changes it,
    /// in wording no keyword filter would flag. Stage 1: its description; stage 2:
    /// a nested schema field; stage 3 on: its result redirects to another tool.
    pub quietpull: bool,
    /// The stage `unit_convert` starts at (0 = original).
    pub quietpull_stage: u64,
    /// List `article_metadata`, whose schema asks for over-privileged parameters
    /// (MSB's OP shape: a model-identity parameter, and a nested chat log; named so
    /// that only the structural control, not a detector rule, sees them).
    pub overpriv: bool,
    /// Tools listed under another name (`OLD=NEW`), for name-collision tests.
    pub renames: Vec<(String, String)>,
    /// Text appended to a tool's description (`TOOL=TEXT`), for tests of what a
    /// definition says.
    pub describe: Vec<(String, String)>,
    /// Text appended to the server's `initialize` instructions.
    pub instructions: Option<String>,
    /// Tools listed a second time under another name (`OLD=NEW`; a call to NEW
    /// acts like OLD), for same-server copies.
    pub copies: Vec<(String, String)>,
    /// Hostile behaviours on the gateway's message path (see [`Hostile`]), each
    /// switched on by name; none changes what the other options serve.
    pub hostile: BTreeSet<Hostile>,
    /// Declare resources but answer `resources/templates/list` with "method not
    /// found", as servers without templates do (mcp-server-sqlite 2025.4.25,
    /// mcp-server-duckdb 1.1.0, jcodemunch-mcp 1.108.399).
    pub no_templates: bool,
}

/// A hostile behaviour on a path other than a listed definition or a plain result:
/// each lists one tool of its own (`notify` also declares `logging`;
/// `list_error` only makes the resource lists fail after their first call) and changes nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hostile {
    /// `status_check` answers with a JSON-RPC error whose `message` and `data`
    /// carry an injection.
    RpcError,
    /// `unit_lookup` answers `isError` with a tool-transfer redirect that starts
    /// with `portcullis: `, as the gateway's own notices do.
    PrefixedRedirect,
    /// `sync_files` sends a progress notification (when the client gave a token)
    /// and a logging notification, each carrying an injection; declares `logging`.
    Notify,
    /// `lookup_profile` returns structured content with an injection as an
    /// object key, and a fake access key id as another.
    ResultKey,
    /// `resources/list` and `resources/templates/list` fail from their second
    /// call in the process on (the client's own first listing works; reads
    /// always work).
    ListError,
    /// The `initialize` result's `serverInfo.title` carries an injection.
    ServerInfo,
}

impl Hostile {
    pub const ALL: [Hostile; 6] = [
        Hostile::RpcError,
        Hostile::PrefixedRedirect,
        Hostile::Notify,
        Hostile::ResultKey,
        Hostile::ListError,
        Hostile::ServerInfo,
    ];
    pub const NAMES: [&'static str; 6] = [
        "rpc_error",
        "prefixed_redirect",
        "notify",
        "result_key",
        "list_error",
        "server_info",
    ];

    pub fn name(self) -> &'static str {
        let i = Self::ALL.iter().position(|h| *h == self).unwrap_or(0);
        Self::NAMES[i]
    }

    /// A comma list of names (empty: none).
    pub fn parse_list(s: &str) -> Result<BTreeSet<Hostile>, ConfigError> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl FromStr for Hostile {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| ConfigError::UnknownHostile(s.to_string()))
    }
}

impl ServerOptions {
    pub fn benign() -> Self {
        Self {
            profile: Profile::Benign,
            poisons: BTreeSet::new(),
            faults: false,
            transport: TransportKind::Stdio,
            extras: Extras::default(),
        }
    }

    pub fn attack(poisons: BTreeSet<Poison>) -> Self {
        Self {
            profile: Profile::Attack,
            poisons,
            faults: true,
            transport: TransportKind::Stdio,
            extras: Extras::default(),
        }
    }

    pub fn has(&self, poison: Poison) -> bool {
        self.profile == Profile::Attack && self.poisons.contains(&poison)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poison_list_parses_names_all_and_rejects_unknown() {
        let two = Poison::parse_list("schema, rugpull").expect("valid list");
        assert_eq!(
            two.into_iter().collect::<Vec<_>>(),
            vec![Poison::Schema, Poison::Rugpull]
        );
        assert_eq!(Poison::parse_list("all").expect("all").len(), 13);
        assert_eq!(Poison::parse_list("").expect("empty").len(), 13);
        assert_eq!(
            Poison::parse_list("result,nope"),
            Err(ConfigError::UnknownPoison("nope".into()))
        );
        for p in Poison::ALL {
            assert_eq!(p.name().parse::<Poison>(), Ok(p));
        }
    }

    #[test]
    fn benign_profile_has_no_poison_even_if_listed() {
        let mut o = ServerOptions::benign();
        o.poisons.insert(Poison::Result);
        assert!(!o.has(Poison::Result));
        let a = ServerOptions::attack(Poison::parse_list("result").expect("list"));
        assert!(a.has(Poison::Result));
        assert!(!a.has(Poison::Schema));
    }
}

//! How a server was started: its launch (program, arguments, working directory,
//! the names of the environment variables it was given, the URL and header names
//! of a remote server). The state store keeps each server's launches by name, and
//! each pin names the launch it was made under, so a definition that changed
//! together with the launch is told apart from one that changed on its own.
//!
//! Values of environment variables and headers are secrets as often as not: the
//! launch keeps their names and one SHA-256 over all of them (so a changed value
//! is seen as a change), never a value.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One launch of a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The program of a stdio server, as configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Names of the environment variables set for the server, sorted.
    #[serde(default)]
    pub env_keys: Vec<String>,
    /// SHA-256 of the names and values together (none when there are none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_sha256: Option<String>,
    /// The endpoint of a remote (Streamable HTTP) server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default)]
    pub header_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_sha256: Option<String>,
}

/// Names, and one digest of names and values.
fn keys_and_digest(map: &BTreeMap<String, String>) -> (Vec<String>, Option<String>) {
    if map.is_empty() {
        return (Vec::new(), None);
    }
    let keys = map.keys().cloned().collect();
    let v = serde_json::to_value(map).unwrap_or(Value::Null);
    (keys, Some(crate::pins::hash(&v)))
}

impl Launch {
    /// The launch of a stdio server (`command` and `args`) or a remote one
    /// (`url`), with the environment it was given and the headers it is sent;
    /// their values are hashed here and dropped.
    pub fn new(
        command: Option<&str>,
        args: &[String],
        cwd: Option<&Path>,
        env: &BTreeMap<String, String>,
        url: Option<&str>,
        headers: &BTreeMap<String, String>,
    ) -> Launch {
        let (env_keys, env_sha256) = keys_and_digest(env);
        let (header_keys, headers_sha256) = keys_and_digest(headers);
        Launch {
            command: command.map(str::to_string),
            args: if command.is_some() {
                args.to_vec()
            } else {
                Vec::new()
            },
            cwd: cwd.map(|c| c.display().to_string()),
            env_keys,
            env_sha256,
            url: url.map(str::to_string),
            header_keys,
            headers_sha256,
        }
    }

    /// The launch's identity: SHA-256 of its canonical JSON.
    pub fn hash(&self) -> String {
        crate::pins::hash(&serde_json::to_value(self).unwrap_or(Value::Null))
    }

    /// What changed from `before` to `self`, one phrase per part
    /// (`args were ["--x=1"], now ["--x=2"]`), for log lines and review items.
    pub fn changes_from(&self, before: &Launch) -> Vec<String> {
        fn list(v: &[String]) -> String {
            serde_json::to_string(v).unwrap_or_default()
        }
        fn opt(v: &Option<String>) -> String {
            match v {
                Some(s) => format!("{s:?}"),
                None => "(none)".into(),
            }
        }
        let mut out = Vec::new();
        if self.command != before.command {
            out.push(format!(
                "the command was {}, now {}",
                opt(&before.command),
                opt(&self.command)
            ));
        }
        if self.args != before.args {
            out.push(format!(
                "args were {}, now {}",
                list(&before.args),
                list(&self.args)
            ));
        }
        if self.cwd != before.cwd {
            out.push(format!(
                "the working directory was {}, now {}",
                opt(&before.cwd),
                opt(&self.cwd)
            ));
        }
        if self.env_keys != before.env_keys {
            out.push(format!(
                "environment variables were {}, now {}",
                list(&before.env_keys),
                list(&self.env_keys)
            ));
        } else if self.env_sha256 != before.env_sha256 {
            out.push(format!(
                "the value of an environment variable changed ({}; values are not kept)",
                list(&self.env_keys)
            ));
        }
        if self.url != before.url {
            out.push(format!(
                "the URL was {}, now {}",
                opt(&before.url),
                opt(&self.url)
            ));
        }
        if self.header_keys != before.header_keys {
            out.push(format!(
                "headers were {}, now {}",
                list(&before.header_keys),
                list(&self.header_keys)
            ));
        } else if self.headers_sha256 != before.headers_sha256 {
            out.push(format!(
                "the value of a header changed ({}; values are not kept)",
                list(&self.header_keys)
            ));
        }
        out
    }
}

/// A launch change of one server, as the gateway saw it at start.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchChange {
    pub before: Launch,
    pub before_hash: String,
    pub after: Launch,
    pub after_hash: String,
}

impl LaunchChange {
    /// `args were X, now Y; …`
    pub fn describe(&self) -> String {
        let parts = self.after.changes_from(&self.before);
        if parts.is_empty() {
            "its launch record differs".into()
        } else {
            parts.join("; ")
        }
    }

    /// The review item's `detail.launch`.
    pub fn detail(&self) -> Value {
        serde_json::json!({
            "before": self.before,
            "before_hash": self.before_hash,
            "after": self.after,
            "after_hash": self.after_hash,
            "changes": self.after.changes_from(&self.before),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stdio server run as `uvx ARGS` with `env`.
    fn uvx(args: &[&str], env: &BTreeMap<String, String>) -> Launch {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        Launch::new(Some("uvx"), &args, None, env, None, &BTreeMap::new())
    }

    #[test]
    fn a_launch_keeps_env_names_and_a_digest_never_a_value() {
        let mut env = BTreeMap::new();
        env.insert("API_TOKEN".to_string(), "s3cr3t-value-1234".to_string());
        let a = uvx(&["mcp-server-time"], &env);
        let text = serde_json::to_string(&a).unwrap();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert_eq!(a.env_keys, vec!["API_TOKEN"]);
        // A changed value is a changed launch, named without its value.
        env.insert("API_TOKEN".into(), "other-value-5678".into());
        let b = uvx(&["mcp-server-time"], &env);
        assert_ne!(a.hash(), b.hash());
        let said = b.changes_from(&a).join("; ");
        assert!(
            said.contains("API_TOKEN") && !said.contains("other-value"),
            "{said}"
        );
    }

    #[test]
    fn a_changed_flag_is_named_with_both_values() {
        let none = BTreeMap::new();
        let before = ["mcp-server-time", "--local-timezone=Europe/Zurich"];
        let after = ["mcp-server-time", "--local-timezone=America/New_York"];
        let (a, b) = (uvx(&before, &none), uvx(&after, &none));
        assert_eq!(
            b.changes_from(&a),
            vec![
                "args were [\"mcp-server-time\",\"--local-timezone=Europe/Zurich\"], now \
                 [\"mcp-server-time\",\"--local-timezone=America/New_York\"]"
            ]
        );
        assert_eq!(a.hash(), uvx(&before, &none).hash(), "stable");
    }
}

//! The controls' tables of `gateway.toml`: `[pins]`, `[names]`, `[params]`,
//! `[taint]`, `[redirection]`. The gateway's configuration
//! (`portcullis_mcp::config::GatewayConfig`) holds one of each.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What happens to a definition seen for the first time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstSight {
    /// Pin it and forward it (trust on first use). The default.
    Pin,
    /// Hold it in the review queue until approved.
    Hold,
}

/// What the client sees of a pinned definition that changed (a rug pull) or
/// whose new version the detector withheld, until the new version is approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnChange {
    /// The pinned (approved) version: the new text never reaches the model and
    /// the tool stays usable. A change to `annotations` is withheld instead (a
    /// client may trust the old hints, `readOnlyHint`, to skip its own
    /// confirmation). The default.
    KeepPinned,
    /// Nothing: the tool is withheld until the new version is approved.
    Withhold,
}

/// `[pins]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinsConfig {
    /// Pin definitions at all (off = no pinning, no rug-pull detection).
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_first_sight")]
    pub first_sight: FirstSight,
    /// A new name whose definition (minus its name) is at least this similar to a
    /// pinned definition that is no longer listed is a rename, held for review.
    #[serde(default = "default_rename_similarity")]
    pub rename_similarity: f64,
    #[serde(default = "default_on_change")]
    pub on_change: OnChange,
}

impl Default for PinsConfig {
    fn default() -> Self {
        PinsConfig {
            enabled: true,
            first_sight: default_first_sight(),
            rename_similarity: default_rename_similarity(),
            on_change: default_on_change(),
        }
    }
}

fn yes() -> bool {
    true
}
fn default_first_sight() -> FirstSight {
    FirstSight::Pin
}
fn default_on_change() -> OnChange {
    OnChange::KeepPinned
}
fn default_rename_similarity() -> f64 {
    0.8
}

/// What to do about a name that collides with or looks like another server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NameAction {
    /// Keep it under its server's namespace; record the finding. The default.
    Namespace,
    /// Do not show it to the client.
    Hide,
    /// Hold it in the review queue until approved.
    Hold,
}

/// `[names]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamesConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// For exact collisions with an earlier server's tool (namespacing already
    /// tells them apart).
    #[serde(default = "default_name_action")]
    pub action: NameAction,
    /// For look-alikes of an earlier server's tool (confusables, case,
    /// separators, version/`new` suffixes, edit distance) and copies of a sibling
    /// on the same server (confusables, suffixes): namespacing does not tell
    /// `read_note` from `read_note v1`, so the default holds them.
    #[serde(default = "default_lookalike_action")]
    pub lookalike: NameAction,
    /// For shadowing (a description that names another server's tool).
    #[serde(default = "default_shadow_action")]
    pub shadowing: NameAction,
    /// Largest edit distance between folded names that counts as a look-alike
    /// (names of at least 5 characters).
    #[serde(default = "default_edit_distance")]
    pub max_edit_distance: usize,
}

impl Default for NamesConfig {
    fn default() -> Self {
        NamesConfig {
            enabled: true,
            action: default_name_action(),
            lookalike: default_lookalike_action(),
            shadowing: default_shadow_action(),
            max_edit_distance: default_edit_distance(),
        }
    }
}

fn default_name_action() -> NameAction {
    NameAction::Namespace
}
fn default_lookalike_action() -> NameAction {
    NameAction::Hold
}
fn default_shadow_action() -> NameAction {
    NameAction::Hold
}
fn default_edit_distance() -> usize {
    1
}

/// What to do about an over-privileged parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamAction {
    /// Record the finding only.
    Flag,
    /// Remove the parameter from the schema shown to the model, and refuse calls
    /// that fill it anyway. The default.
    Strip,
    /// Show the schema unchanged; refuse (hold) calls that fill the parameter.
    Refuse,
}

/// `[params]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamsConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_param_action")]
    pub action: ParamAction,
}

impl Default for ParamsConfig {
    fn default() -> Self {
        ParamsConfig {
            enabled: true,
            action: default_param_action(),
        }
    }
}

fn default_param_action() -> ParamAction {
    ParamAction::Strip
}

/// What happens to a tool call that carries a labelled value. Ordered by
/// strength (declaration order): `max` is the stronger of two, `min` the weaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowAction {
    Allow,
    /// Held in the review queue (waits up to `review.call_timeout_secs`).
    Hold,
    Block,
}

/// A tool's class for egress control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// Sends, posts, writes outside the workspace, executes.
    Sink,
    /// Anything else.
    Normal,
}

/// `[taint]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Shortest result token kept as a labelled value.
    #[serde(default = "default_min_len")]
    pub min_len: usize,
    /// Labelled values kept, in memory and in the state store (oldest dropped
    /// first).
    #[serde(default = "default_max_values")]
    pub max_values: usize,
    /// Seconds a label lasts after its value was last seen in a result (0 =
    /// until dropped by `max_values`); expired labels no longer match and are
    /// deleted from the state store. Labels of configured secrets never expire.
    #[serde(default = "default_taint_ttl")]
    pub ttl_secs: u64,
    /// A value from one server's result sent to another server's tool.
    #[serde(default = "default_block")]
    pub cross_server: FlowAction,
    /// A value from a result sent to a sink tool (of any server).
    #[serde(default = "default_block")]
    pub sink: FlowAction,
    /// A value from a result sent back to a non-sink tool of the same server.
    #[serde(default = "default_allow")]
    pub same_server: FlowAction,
    /// A link, email address or path from a server's result, passed as a whole
    /// argument to a sink of that same server (following a search result,
    /// replying to a sender, writing a file it listed), or a file name or
    /// relative path it printed as a word of the argument (`wc -l data/sales.csv`):
    /// it carries nothing the server did not have. Any other labelled value in
    /// the call is still decided on its own.
    #[serde(default = "default_allow")]
    pub same_server_reference: FlowAction,
    /// Values from a result inside the texts of a call to a sink of the server
    /// that returned them, sent to a destination (an address, a link, a path)
    /// the client wrote and no result or definition carried: forwarding an email
    /// to the address the user typed, saving a file's text under the name the
    /// user gave ([`crate::destination::client_named`]). Any other labelled
    /// value in the call is still decided on its own. Held by default: the
    /// destination's origin is told from labels, which a result can evade by
    /// writing the destination in a form the model rewrites (docs/structural.md,
    /// "A destination the client named"); a human decides instead of a block.
    #[serde(default = "default_hold")]
    pub client_destination: FlowAction,
    /// A name of code from a result — a library's API read in its documentation
    /// (`chat.completions`, `@app.route`, `logprobs=`) — written as code in a
    /// call that would otherwise be a `cross_server`, `sink` or
    /// `client_destination` flow
    /// ([`crate::code_name`]). Allowed and recorded by default; never
    /// stronger than the flow it replaces. A private value of that shape (a
    /// dotted user name) written as a call moves under this rule too
    /// (docs/structural.md, "A library's documentation and code written with it").
    #[serde(default = "default_allow")]
    pub code_name: FlowAction,
    /// A value written in one tool's definition (a path, key, number, link)
    /// passed to another tool: the definition steering the model
    /// ([`crate::operands`]). Held for a human by default: a server may
    /// legitimately point at one of its own files.
    #[serde(default = "default_hold")]
    pub definition: FlowAction,
    /// A sensitive value (configured secret or canary, or a secret/PII the
    /// output guard found in a result) sent anywhere but back to its own server's
    /// non-sink tools.
    #[serde(default = "default_block")]
    pub sensitive: FlowAction,
    /// Environment variables whose values are secrets (labelled sensitive).
    #[serde(default)]
    pub secret_env: Vec<String>,
    /// Tool classes by `"SERVER/TOOL"` (or `"*/TOOL"`), overriding the inferred class.
    #[serde(default)]
    pub classes: BTreeMap<String, ToolClass>,
    /// Servers whose `readOnlyHint: true` is believed: their tools so marked are
    /// not sinks whatever their name says. For every other server an annotation
    /// can only make a tool more of a sink (`destructiveHint`, `openWorldHint`),
    /// never less: the hints come from the server being judged.
    #[serde(default)]
    pub trust_read_only: Vec<String>,
}

impl Default for TaintConfig {
    fn default() -> Self {
        TaintConfig {
            enabled: true,
            min_len: default_min_len(),
            max_values: default_max_values(),
            ttl_secs: default_taint_ttl(),
            cross_server: default_block(),
            sink: default_block(),
            same_server: default_allow(),
            same_server_reference: default_allow(),
            client_destination: default_hold(),
            code_name: default_allow(),
            definition: default_hold(),
            sensitive: default_block(),
            secret_env: Vec::new(),
            classes: BTreeMap::new(),
            trust_read_only: Vec::new(),
        }
    }
}

fn default_min_len() -> usize {
    8
}
fn default_max_values() -> usize {
    4096
}
fn default_taint_ttl() -> u64 {
    7 * 24 * 3600
}
fn default_block() -> FlowAction {
    FlowAction::Block
}
fn default_allow() -> FlowAction {
    FlowAction::Allow
}
fn default_hold() -> FlowAction {
    FlowAction::Hold
}

/// `[redirection]`: PM in metadata and TT in results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedirectionConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Severity of superlative self-promotion in a definition.
    #[serde(default = "default_pm")]
    pub preference_manipulation: portcullis_core::Severity,
    /// Severity of a result that redirects the model to another tool.
    #[serde(default = "default_tt")]
    pub tool_transfer: portcullis_core::Severity,
    /// Findings at or above this severity hold the item for review.
    #[serde(default = "default_hold_at")]
    pub hold_at: portcullis_core::Severity,
}

impl Default for RedirectionConfig {
    fn default() -> Self {
        RedirectionConfig {
            enabled: true,
            preference_manipulation: default_pm(),
            tool_transfer: default_tt(),
            hold_at: default_hold_at(),
        }
    }
}

fn default_pm() -> portcullis_core::Severity {
    portcullis_core::Severity::Medium
}
fn default_tt() -> portcullis_core::Severity {
    portcullis_core::Severity::High
}
fn default_hold_at() -> portcullis_core::Severity {
    portcullis_core::Severity::High
}

#[cfg(test)]
mod tests {
    use super::FlowAction;

    #[test]
    fn flow_actions_are_ordered_by_strength() {
        // The taint control takes `max` for "strongest wins" and `min` for
        // "never stronger than": reordering the variants would invert both.
        assert!(FlowAction::Allow < FlowAction::Hold && FlowAction::Hold < FlowAction::Block);
        assert_eq!(FlowAction::Hold.max(FlowAction::Allow), FlowAction::Hold);
        assert_eq!(FlowAction::Hold.min(FlowAction::Block), FlowAction::Hold);
    }
}

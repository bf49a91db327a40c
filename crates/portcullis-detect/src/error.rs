//! `DetectError`: what building the detector (rules, configuration, models) can fail with.

use thiserror::Error;

/// Errors of the detection crate. Detection itself never fails on input text;
/// these come from loading rules, configuration or structured inputs.
#[derive(Debug, Error)]
pub enum DetectError {
    #[error("cannot read rules {path}: {source}")]
    RulesIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid rules file {path}: {message}")]
    RulesParse { path: String, message: String },
    #[error("rule {rule} in {path}: invalid pattern: {message}")]
    RulePattern {
        path: String,
        rule: String,
        message: String,
    },
    #[error("rule id {0} is defined twice")]
    DuplicateRule(String),
    #[error("no rules loaded from {0}")]
    NoRules(String),
    #[error("cannot build the egress guard: {0}")]
    Guard(String),
    #[error("{0}")]
    Model(String),
    #[error("invalid tool definition: {0}")]
    ToolDefinition(String),
    #[error(transparent)]
    Core(#[from] portcullis_core::CoreError),
}

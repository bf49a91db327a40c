//! `CoreError`: what loading or validating core data (configuration, records) can fail with.

use thiserror::Error;

/// Errors raised while loading or validating core data (configuration, records).
#[derive(Debug, Error)]
pub enum CoreError {
    #[error("cannot read configuration {path}: {source}")]
    ConfigIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration {path}: {message}")]
    ConfigParse { path: String, message: String },
    #[error("invalid configuration: {0}")]
    ConfigInvalid(String),
    #[error("unknown channel {0:?}; expected one of: {1}")]
    UnknownChannel(String, String),
    #[error("unknown preset {0:?}; expected strict, balanced or permissive")]
    UnknownPreset(String),
}

//! Corpus tooling, metrics and reports for `portcullis corpus`, `train`,
//! `calibrate` and `eval`.

pub mod calibrate;
pub mod corpus;
pub mod metrics;
pub mod report;
pub mod run;
pub mod train;
pub mod train_embedding;
pub mod transform;

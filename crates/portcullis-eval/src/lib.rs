//! Corpus tooling, metrics and reports for `portcullis corpus`, `train`,
//! `calibrate` and `eval`.

pub mod analysis;
pub mod calibrate;
pub mod carriers;
pub mod corpus;
pub mod harvest;
pub mod input;
pub mod metrics;
pub mod payloads;
pub mod records;
pub mod render;
pub mod review;
pub mod run;
pub mod train;
#[cfg(feature = "embedding")]
pub mod train_embedding;
pub mod transform;

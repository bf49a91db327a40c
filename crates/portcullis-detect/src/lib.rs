//! The Portcullis text pipeline.
//!
//! `Detector::inspect` is the one inspection function: gateway, `scan`, `audit`,
//! `eval` and `bench` all call it, so a figure measured by one is a figure of all.
//!
//! ```text
//! Item -> normalize (views, decoded segments) -> rules -> egress guard -> policy -> DecisionRecord
//! ```

mod cores;
mod error;
pub mod extract;
pub mod guard;
pub mod lexical;
pub mod normalize;
mod pipeline;
pub mod policy;
pub mod redact;
pub mod review;
pub mod rules;
pub mod stages;

pub use error::DetectError;
pub use pipeline::{kind_and_target, Detector, Inspection, RecordMeta, STAGE_NORMALIZE};
pub use stages::{egress::NAME as STAGE_EGRESS, rules::NAME as STAGE_RULES};

/// The original text of `span`, snapped to character boundaries and shortened to
/// about 120 characters, for a finding's excerpt.
pub fn excerpt(original: &str, span: portcullis_core::Span) -> String {
    const MAX_CHARS: usize = 120;
    let mut start = span.start.min(original.len());
    while !original.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = span.end.clamp(start, original.len());
    while !original.is_char_boundary(end) {
        end += 1;
    }
    let s = &original[start..end];
    if s.chars().count() <= MAX_CHARS {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX_CHARS).collect();
        format!("{head}…")
    }
}

//! Run the one inspection function over corpus records.

use crate::corpus::Record;
use portcullis_core::{DecisionRecord, Item};
use portcullis_detect::{Detector, RecordMeta};

/// The decision for each record, or the error that prevented one (counted and
/// reported, never scored as a negative).
pub fn decide_all(
    detector: &Detector,
    records: &[&Record],
    mut progress: impl FnMut(usize),
) -> Vec<Result<DecisionRecord, String>> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            progress(i);
            decide(detector, r, i as u64)
        })
        .collect()
}

pub fn decide(detector: &Detector, r: &Record, position: u64) -> Result<DecisionRecord, String> {
    let meta = RecordMeta {
        id: r.id.clone(),
        position,
    };
    match (&r.text, &r.tool) {
        (Some(text), None) => Ok(detector
            .inspect(&Item::new(r.channel, text.clone()), meta)
            .record),
        (None, Some(tool)) => detector
            .inspect_tool(tool, None, meta)
            .map(|i| i.record)
            .map_err(|e| e.to_string()),
        _ => Err(format!("record {} has neither text nor tool", r.id)),
    }
}

//! Arbitrary JSON as a tool definition: an error or a record, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use portcullis_detect::{Detector, RecordMeta};
use std::sync::LazyLock;

static DETECTOR: LazyLock<Detector> = LazyLock::new(|| Detector::with_defaults().expect("detector"));

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = DETECTOR.inspect_tool(&v, Some("fuzz"), RecordMeta { id: "f".into(), position: 0 });
    }
});

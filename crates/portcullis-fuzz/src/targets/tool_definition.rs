//! Tool-definition and message extraction on arbitrary JSON, then the whole
//! detector over the items, as the gateway runs it: `extract::tool_items` and
//! `Detector::inspect_tool` on a tool object, `extract::value_items` and
//! `Detector::inspect_items` on any message (every channel, both binary modes).
//! An error or a record, never a panic; every item and skipped payload carries a
//! JSON path from `$`, and the walk stays inside its item bound.

use portcullis_core::Channel;
use portcullis_detect::extract::{self, Binary, Extracted};
use portcullis_detect::{Detector, RecordMeta};
use std::sync::LazyLock;

use super::split_first;

static DETECTOR: LazyLock<Detector> = LazyLock::new(|| {
    // The embedded rules and the default configuration cannot fail to load; if
    // they do, no input can be fuzzed and the first run says why.
    Detector::with_defaults().unwrap_or_else(|e| panic!("the default detector: {e}"))
});

fn meta() -> RecordMeta {
    RecordMeta {
        id: "fuzz".into(),
        position: 0,
    }
}

pub fn run(data: &[u8]) {
    let (mode, rest) = split_first(data);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(rest) else {
        return;
    };
    if mode & 1 == 0 {
        if let Ok(x) = extract::tool_items(&value, Some("fuzz")) {
            check(&x);
        }
        let _ = DETECTOR.inspect_tool(&value, Some("fuzz"), meta());
    } else {
        let channel = Channel::ALL[usize::from(mode >> 1) % Channel::ALL.len()];
        let binary = if mode & 0x40 == 0 {
            Binary::Declared
        } else {
            Binary::None
        };
        let keys = mode & 0x80 != 0;
        let x = extract::value_items(channel, &value, Some("fuzz"), Some("t"), keys, binary);
        check(&x);
        let whole = serde_json::to_string(&value).unwrap_or_default();
        let _ = DETECTOR.inspect_items(channel, Some("fuzz"), Some("t"), &x, &whole, meta());
    }
}

fn check(x: &Extracted) {
    assert!(
        x.items.len() <= extract::MAX_ITEMS,
        "{} items, bound {}",
        x.items.len(),
        extract::MAX_ITEMS
    );
    for item in &x.items {
        let path = item.path.as_deref().unwrap_or("");
        assert!(path.starts_with('$'), "item path {path:?} is not from $");
    }
    for path in &x.binary {
        assert!(path.starts_with('$'), "binary path {path:?} is not from $");
    }
}

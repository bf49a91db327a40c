//! Every view of arbitrary text maps back inside the original, on char boundaries.
#![no_main]
use libfuzzer_sys::fuzz_target;
use portcullis_core::NormalizeConfig;
use portcullis_detect::normalize::{normalize, TextKind};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for kind in [TextKind::Prose, TextKind::Identifier] {
        let n = normalize(&text, kind, &NormalizeConfig::default());
        for v in &n.views {
            for (i, c) in v.text.char_indices() {
                let (s, e) = v.to_original(i, i + c.len_utf8());
                assert!(s <= e && e <= text.len());
            }
        }
        for f in &n.findings {
            assert!(text.is_char_boundary(f.span.start) && text.is_char_boundary(f.span.end));
        }
    }
});

//! `portcullis_detect::normalize` on arbitrary text, both text kinds: every view
//! maps each of its characters back inside the original and onto its character
//! boundaries, and every finding's span is inside the original on boundaries.

use portcullis_core::NormalizeConfig;
use portcullis_detect::normalize::{normalize, Normalized, TextKind};

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for kind in [TextKind::Prose, TextKind::Identifier] {
        let n = normalize(&text, kind, &NormalizeConfig::default());
        check_maps(&text, &n);
    }
}

/// The offset-map properties, shared with the decode target.
pub(crate) fn check_maps(text: &str, n: &Normalized) {
    for v in &n.views {
        assert_eq!(
            v.map.view_len(),
            v.text.len(),
            "view {}: its map covers {} bytes, the view has {}",
            v.name,
            v.map.view_len(),
            v.text.len()
        );
        for (i, c) in v.text.char_indices() {
            let (s, e) = v.to_original(i, i + c.len_utf8());
            assert!(
                s <= e && e <= text.len(),
                "view {}: byte {i} maps to {s}..{e}, outside the original ({} bytes)",
                v.name,
                text.len()
            );
            assert!(
                text.is_char_boundary(s) && text.is_char_boundary(e),
                "view {}: byte {i} maps to {s}..{e}, not on character boundaries",
                v.name
            );
        }
    }
    for f in &n.findings {
        let (s, e) = (f.span.start, f.span.end);
        assert!(
            s <= e && e <= text.len(),
            "finding {}: span {s}..{e} outside the original",
            f.rule
        );
        assert!(
            text.is_char_boundary(s) && text.is_char_boundary(e),
            "finding {}: span {s}..{e} not on character boundaries",
            f.rule
        );
    }
}

//! The decoders (the `decoded:*` views of `normalize`) under caps the input
//! chooses: the caps always hold, the decoded views together never hold more than
//! `max_decoded_bytes`, and every decoded view maps back inside the original.

use portcullis_core::NormalizeConfig;
use portcullis_detect::normalize::{normalize, TextKind};

use super::split_first;

pub fn run(data: &[u8]) {
    let (mode, rest) = split_first(data);
    // Caps from the mode byte: depth 0..=4, 0..=8 KiB, 0..=31 segments, so the
    // fuzzer reaches every cap with small inputs.
    let caps = NormalizeConfig {
        max_decode_depth: usize::from(mode % 5),
        max_decoded_bytes: usize::from(mode / 5 % 9) * 1024,
        max_decoded_segments: usize::from(mode.rotate_left(3) % 32),
    };
    let text = String::from_utf8_lossy(rest);
    let kind = if mode & 0x80 == 0 {
        TextKind::Prose
    } else {
        TextKind::Identifier
    };
    let n = normalize(&text, kind, &caps);
    let d = &n.decode;
    assert!(
        d.decoded_bytes <= caps.max_decoded_bytes,
        "decoded {} bytes, cap {}",
        d.decoded_bytes,
        caps.max_decoded_bytes
    );
    assert!(
        d.segments <= caps.max_decoded_segments,
        "decoded {} segments, cap {}",
        d.segments,
        caps.max_decoded_segments
    );
    assert!(
        d.max_depth <= caps.max_decode_depth,
        "decoded to depth {}, cap {}",
        d.max_depth,
        caps.max_decode_depth
    );
    let decoded: usize = n
        .views
        .iter()
        .filter(|v| v.name.starts_with("decoded:"))
        .map(|v| v.text.len())
        .sum();
    assert!(
        decoded <= caps.max_decoded_bytes,
        "the decoded views hold {decoded} bytes, cap {}",
        caps.max_decoded_bytes
    );
    super::normalize::check_maps(&text, &n);
}

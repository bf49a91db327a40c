//! Decoders under tight caps: the caps always hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use portcullis_core::NormalizeConfig;
use portcullis_detect::normalize::{normalize, TextKind};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let caps = NormalizeConfig { max_decode_depth: 4, max_decoded_bytes: 4096, max_decoded_segments: 16 };
    let n = normalize(&text, TextKind::Prose, &caps);
    assert!(n.decode.decoded_bytes <= caps.max_decoded_bytes);
    assert!(n.decode.segments <= caps.max_decoded_segments);
    assert!(n.decode.max_depth <= caps.max_decode_depth);
});

//! High-entropy runs: Shannon entropy per character over runs of token bytes,
//! and what is encoded data (Base64 of text or of a file) rather than a credential.

use super::formats::RANK_ENTROPY;
use super::{Cand, EgressGuard, What};

/// Longest Base64 run of binary data that can still be a credential: past it, a run
/// is a file's bytes (server-pdf's `read_pdf_bytes` returns chunks of a PDF). The
/// long secret formats (PEM keys, JWTs) have patterns of their own.
pub(super) const ENTROPY_MAX_BINARY: usize = 4096;

impl EgressGuard {
    /// Maximal runs of `[A-Za-z0-9+/=_-]` at least `entropy_min_len` long whose entropy
    /// reaches `entropy_bits`. The run alphabet is ASCII, so spans are char boundaries.
    pub(super) fn collect_entropy(&self, text: &str, cands: &mut Vec<Cand>) {
        let b = text.as_bytes();
        if b.len() < self.entropy_min_len {
            return;
        }
        let mut i = 0;
        while i < b.len() {
            if !is_run_byte(b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && is_run_byte(b[i]) {
                i += 1;
            }
            if is_absolute_path(&b[start..i]) {
                // Each component on its own: a path's characters together look
                // random (a macOS temporary folder, `/var/folders/xy/8k2j.../T/...`,
                // is 4.7 bits per character), its components do not; a random
                // component long enough still counts.
                let mut from = start;
                for end in (start..=i).filter(|&j| j == i || b[j] == b'/') {
                    self.entropy_candidate(b, from, end, cands);
                    from = end + 1;
                }
            } else {
                self.entropy_candidate(b, start, i, cands);
            }
        }
    }

    fn entropy_candidate(&self, b: &[u8], start: usize, end: usize, cands: &mut Vec<Cand>) {
        if end.saturating_sub(start) < self.entropy_min_len {
            return;
        }
        let bits = byte_entropy(&b[start..end]);
        if bits >= self.entropy_bits && !self.is_encoded_data(&b[start..end]) {
            cands.push(Cand {
                start,
                end,
                rank: RANK_ENTROPY,
                what: What::Entropy(bits),
            });
        }
    }

    /// Whether a high-entropy run is encoded data rather than a credential: Base64
    /// that decodes to text is that text, judged by what it says (it is scanned,
    /// and any finding in it keeps the run reported), and Base64 of binary data
    /// longer than [`ENTROPY_MAX_BINARY`] is a file. A random token decodes to
    /// neither: its bytes are not text, and it is short.
    pub(super) fn is_encoded_data(&self, run: &[u8]) -> bool {
        use base64::Engine;
        let engines = [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        let Some(bytes) = engines.iter().find_map(|e| e.decode(run).ok()) else {
            return false;
        };
        match String::from_utf8(bytes) {
            Ok(text) if is_printable(&text) => self.scan(&text).is_empty(),
            _ => run.len() > ENTROPY_MAX_BINARY,
        }
    }
}

/// Text a person could read: no control characters but line breaks and tabs.
pub(super) fn is_printable(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}

/// A run that reads as an absolute file path: it starts with `/`, has at least two
/// more, and has neither `+` nor `=` (Base64 has both; a Base64 secret that starts
/// with `/`, holds two more and neither of them is about one in a thousand, and even
/// then its long random components are still judged).
pub(super) fn is_absolute_path(run: &[u8]) -> bool {
    run.first() == Some(&b'/')
        && run.iter().filter(|&&c| c == b'/').count() >= 3
        && !run.iter().any(|&c| c == b'+' || c == b'=')
}

pub(super) fn is_run_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-')
}

pub(super) fn byte_entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    entropy_of_counts(counts.iter().copied().filter(|&c| c > 0), bytes.len())
}

pub(super) fn entropy_of_counts(counts: impl Iterator<Item = u32>, total: usize) -> f64 {
    let n = total as f64;
    counts
        .map(|c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum::<f64>()
        .max(0.0)
}

pub(super) fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(super) fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Shannon entropy in bits per char.
pub fn shannon_entropy(s: &str) -> f64 {
    if s.is_ascii() {
        return byte_entropy(s.as_bytes());
    }
    let mut chars: Vec<char> = s.chars().collect();
    let total = chars.len();
    if total == 0 {
        return 0.0;
    }
    chars.sort_unstable();
    let mut counts = Vec::new();
    let mut run = 0u32;
    for (i, c) in chars.iter().enumerate() {
        run += 1;
        if chars.get(i + 1) != Some(c) {
            counts.push(run);
            run = 0;
        }
    }
    entropy_of_counts(counts.into_iter(), total)
}

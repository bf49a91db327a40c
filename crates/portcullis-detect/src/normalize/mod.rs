//! Normalization: several views of one input, each mapped back to the original.
//!
//! Views (each kept only if it differs from every earlier view):
//! - `lower`: hidden characters and ANSI escapes removed, each character NFKC-normalized
//!   and lowercased. Non-Latin scripts survive here (rules for Russian, Chinese, ... match it).
//! - `folded`: as `lower`, then NFKD with combining marks dropped and confusables folded
//!   to their ASCII look-alikes by the `decancer` table (Cyrillic `о` -> `o`, `𝐢` -> `i`).
//! - `leet`: `folded` with digits and symbols inside words read as letters (`1gn0re`).
//! - `compressed`: `folded` with runs of 3+ equal characters squeezed, whitespace runs
//!   collapsed and spaced-out letters joined (`i g n o r e` -> `ignore`).
//! - `words`: for identifiers only (tool names, property names): `_ - .` and camelCase
//!   boundaries become spaces (`ignorePrevious_rules` -> `ignore previous rules`).
//! - `decoded:<codec>`: each decoded segment (Base64, ROT13, hex, ...), itself folded;
//!   its spans map to the encoded segment in the original.
//!
//! The presence of hidden characters (Unicode tags, bidi controls, zero-width
//! characters, ANSI escapes) is itself reported as findings.

mod decode;
mod hidden;
mod offsets;

pub use decode::{Codec, DecodeStats};
pub use hidden::HIDDEN_CATEGORY;
pub use offsets::OffsetMap;

use portcullis_core::{Finding, NormalizeConfig};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// One derived text and the map of its bytes to the original's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub name: String,
    pub text: String,
    pub map: OffsetMap,
}

impl View {
    /// Original byte range of a byte range of this view.
    pub fn to_original(&self, start: usize, end: usize) -> (usize, usize) {
        self.map.to_original(start, end)
    }
}

/// Everything normalization produced for one input.
#[derive(Debug, Clone)]
pub struct Normalized {
    pub views: Vec<View>,
    /// Hidden-character and decoding-cap findings (category `hidden_characters`, `obfuscation`).
    pub findings: Vec<Finding>,
    pub decode: DecodeStats,
}

/// What kind of text is being normalized; identifiers get the `words` view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    Prose,
    Identifier,
}

/// Build all views of `text`. Never fails and never panics; decoding respects `caps`.
pub fn normalize(text: &str, kind: TextKind, caps: &NormalizeConfig) -> Normalized {
    let scan = hidden::scan(text);
    let mut views: Vec<View> = Vec::with_capacity(6);

    let (lower, folded) = lower_and_folded(text, &scan.skip);
    // For plain ASCII the folded view is the lower view.
    let base = folded.as_ref().unwrap_or(&lower);
    let leet = derive_leet(base);
    let compressed = derive_compressed(base);
    let words = match kind {
        TextKind::Identifier => Some(identifier_words(text, &scan.skip)),
        TextKind::Prose => None,
    };

    for v in [Some(lower), folded, leet, compressed, words]
        .into_iter()
        .flatten()
    {
        push_distinct(&mut views, v);
    }
    let mut findings = scan.findings;
    if let Some(tags) = scan.tag_text {
        // Unicode tag characters spell hidden ASCII: that text is a view of its own.
        let folded_tags =
            fold_standalone(&tags.text, "decoded:tags", tags.orig_start, tags.orig_len);
        push_distinct(&mut views, folded_tags);
    }
    let (decoded_views, stats, decode_findings) = decode::decode_all(text, &views, caps);
    findings.extend(decode_findings);
    for v in decoded_views {
        push_distinct(&mut views, v);
    }
    Normalized {
        views,
        findings,
        decode: stats,
    }
}

fn push_distinct(views: &mut Vec<View>, v: View) {
    if !v.text.is_empty() && !views.iter().any(|w| w.text == v.text) {
        views.push(v);
    }
}

/// Push one view piece: a single same-length character maps byte-for-byte, anything
/// else maps as a whole to its source character(s).
fn push_piece(
    text: &mut String,
    map: &mut OffsetMap,
    out: &str,
    orig_start: usize,
    orig_len: usize,
) {
    if out.is_empty() {
        return;
    }
    text.push_str(out);
    let single_char = out.chars().nth(1).is_none();
    if single_char && out.len() == orig_len {
        map.push(out.len(), orig_start, orig_len);
    } else {
        map.push_opaque(out.len(), orig_start, orig_len);
    }
}

/// One pass over the characters builds `lower` and `folded` together. Plain ASCII
/// (nothing hidden) takes a fast path and has no separate folded view.
fn lower_and_folded(text: &str, skip: &hidden::SkipSet) -> (View, Option<View>) {
    if text.is_ascii() && skip.is_empty() {
        let lower = View {
            name: "lower".into(),
            text: text.to_ascii_lowercase(),
            map: OffsetMap::identity(text.len()),
        };
        return (lower, None);
    }
    let mut lower = String::with_capacity(text.len());
    let mut lower_map = OffsetMap::default();
    let mut folded = String::with_capacity(text.len());
    let mut folded_map = OffsetMap::default();
    let mut buf = String::new();
    for (i, c) in text.char_indices() {
        let len = c.len_utf8();
        if skip.contains(i) {
            continue;
        }
        if c.is_ascii() {
            let l = c.to_ascii_lowercase();
            lower.push(l);
            lower_map.push(1, i, 1);
            folded.push(l);
            folded_map.push(1, i, 1);
            continue;
        }
        buf.clear();
        for n in std::iter::once(c).nfkc() {
            buf.extend(n.to_lowercase());
        }
        push_piece(&mut lower, &mut lower_map, &buf, i, len);
        buf.clear();
        fold_char_into(c, &mut buf);
        push_piece(&mut folded, &mut folded_map, &buf, i, len);
    }
    (
        View {
            name: "lower".into(),
            text: lower,
            map: lower_map,
        },
        Some(View {
            name: "folded".into(),
            text: folded,
            map: folded_map,
        }),
    )
}

/// NFKD, drop combining marks, fold each remaining character with decancer's
/// confusables table (which also lowercases).
fn fold_char_into(c: char, out: &mut String) {
    for d in std::iter::once(c).nfkd() {
        if is_combining_mark(d) {
            continue;
        }
        if d.is_ascii() {
            out.push(d.to_ascii_lowercase());
            continue;
        }
        match decancer::cure_char(d, decancer::Options::default()) {
            decancer::Translation::Character(t) => out.push(t),
            decancer::Translation::String(s) => out.push_str(&s),
            decancer::Translation::None => {}
        }
    }
}

/// Fold a standalone (decoded) text into one view whose every byte maps to the
/// original range it was decoded from.
pub(crate) fn fold_standalone(text: &str, name: &str, orig_start: usize, orig_len: usize) -> View {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            if !c.is_ascii_control() || c == '\n' || c == '\t' {
                out.push(c.to_ascii_lowercase());
            }
        } else if !hidden::is_hidden(c) {
            fold_char_into(c, &mut out);
        }
    }
    let map = OffsetMap::opaque(out.len(), orig_start, orig_len);
    View {
        name: name.into(),
        text: out,
        map,
    }
}

fn leet_of(b: u8) -> Option<u8> {
    Some(match b {
        b'0' => b'o',
        b'1' | b'!' | b'|' => b'i',
        b'3' => b'e',
        b'4' | b'@' => b'a',
        b'5' | b'$' => b's',
        b'7' | b'+' => b't',
        b'8' => b'b',
        _ => return None,
    })
}

/// Read digits and symbols inside words as letters. Only tokens that mix letters
/// with leet characters change, so numbers and prices stay as they are.
fn derive_leet(folded: &View) -> Option<View> {
    let bytes = folded.text.as_bytes();
    // Copied on the first change: most text has no leet token.
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < bytes.len() {
        let is_tok = |b: u8| b.is_ascii_lowercase() || leet_of(b).is_some();
        if !is_tok(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let mut letters = 0;
        while i < bytes.len() && is_tok(bytes[i]) {
            letters += usize::from(bytes[i].is_ascii_lowercase());
            i += 1;
        }
        if letters >= 2 && letters < i - start {
            let out = out.get_or_insert_with(|| bytes.to_vec());
            for k in start..i {
                if let Some(l) = leet_of(bytes[k]) {
                    out[k] = l;
                }
            }
        }
    }
    let out = out?;
    // Only ASCII bytes were replaced by ASCII bytes: still valid UTF-8, same map.
    let text = String::from_utf8(out).ok()?;
    Some(View {
        name: "leet".into(),
        text,
        map: folded.map.clone(),
    })
}

/// Squeeze runs of 3+ equal characters, collapse whitespace runs, and join letters
/// spaced out with one separator (`i.g.n.o.r.e`, `i g n o r e`; at least 4 letters).
fn derive_compressed(folded: &View) -> Option<View> {
    let text = &folded.text;
    // ASCII (most text) is read byte by byte: no table of characters to build.
    let keep = if text.is_ascii() {
        let b = text.as_bytes();
        let spaced = match ascii_compressible(b) {
            Compressible::No => return None,
            Compressible::RunsOnly => false,
            Compressible::Spaced => true,
        };
        compressed_keep(b.len(), |i| char::from(b[i]), spaced)?
    } else {
        let chars: Vec<char> = text.chars().collect();
        compressed_keep(chars.len(), |i| chars[i], true)?
    };
    let mut out = String::with_capacity(text.len());
    let mut map = OffsetMap::default();
    let mut cursor = folded.map.cursor();
    // Kept characters come in runs; a run inside one aligned segment of the source
    // map is copied whole (the map it gets is the one its characters, pushed one by
    // one, would merge into), anything else character by character.
    let mut kept = text.char_indices().zip(keep.iter().copied()).peekable();
    while let Some(((start, _), k)) = kept.next() {
        if !k {
            continue;
        }
        let mut end = text.len();
        while let Some(&((off, _), k)) = kept.peek() {
            if !k {
                end = off;
                break;
            }
            kept.next();
        }
        if let Some(os) = cursor.aligned(start, end) {
            out.push_str(&text[start..end]);
            map.push(end - start, os, end - start);
            continue;
        }
        for (i, c) in text[start..end].char_indices() {
            let off = start + i;
            let (os, oe) = cursor.original(off, off + c.len_utf8());
            let mut tmp = [0u8; 4];
            push_piece(&mut out, &mut map, c.encode_utf8(&mut tmp), os, oe - os);
        }
    }
    Some(View {
        name: "compressed".into(),
        text: out,
        map,
    })
}

/// Which of `n` characters (`at(i)`) the compressed view keeps, or None when it
/// keeps them all. `spaced`: whether spaced-out letters can occur at all (the
/// ASCII pre-check knows when they cannot, and the search for them is the
/// costliest part).
fn compressed_keep(n: usize, at: impl Fn(usize) -> char, spaced: bool) -> Option<Vec<bool>> {
    let mut keep = vec![true; n];
    let mut changed = false;
    // Runs of equal characters and of whitespace.
    let mut i = 0;
    while i < n {
        let c = at(i);
        let mut j = i + 1;
        if c.is_whitespace() {
            while j < n && at(j).is_whitespace() {
                j += 1;
            }
            if j - i >= 2 {
                keep[i + 1..j].iter_mut().for_each(|k| *k = false);
                changed = true;
            }
        } else {
            while j < n && at(j) == c {
                j += 1;
            }
            if j - i >= 3 {
                keep[i + 1..j].iter_mut().for_each(|k| *k = false);
                changed = true;
            }
        }
        i = j;
    }
    // Spaced-out letters: L s L s L s L with one repeated separator s.
    let is_sep = |c: char| matches!(c, ' ' | '.' | '-' | '_' | '*' | ',' | '/' | '|');
    let mut i = 0;
    while spaced && i + 2 < n {
        let (a, s) = (at(i), at(i + 1));
        let word_start = i == 0 || !at(i - 1).is_alphanumeric();
        if a.is_alphabetic() && is_sep(s) && word_start {
            let mut j = i;
            let mut letters = 1;
            while j + 2 < n
                && at(j + 1) == s
                && at(j + 2).is_alphabetic()
                && (j + 3 >= n || !at(j + 3).is_alphanumeric())
            {
                j += 2;
                letters += 1;
            }
            if letters >= 4 {
                for k in (i + 1..j).step_by(2) {
                    keep[k] = false;
                }
                changed = true;
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    changed.then_some(keep)
}

/// What the ASCII pre-check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compressible {
    /// Nothing to compress: `compressed` would equal its source.
    No,
    /// Runs of 3 equal bytes or whitespace pairs, but no spaced-out letters.
    RunsOnly,
    /// Four letters spaced by one repeated separator (`a.b.c.d`), maybe runs too.
    Spaced,
}

/// Cheap pre-check on ASCII: is there a run of 3 equal bytes, a whitespace pair, or
/// four letters spaced by one repeated separator (`a.b.c.d`)? Without one,
/// `compressed` would equal its source.
fn ascii_compressible(b: &[u8]) -> Compressible {
    let is_sep = |c: u8| matches!(c, b' ' | b'.' | b'-' | b'_' | b'*' | b',' | b'/' | b'|');
    let spaced = b.windows(7).any(|w| {
        is_sep(w[1])
            && w[3] == w[1]
            && w[5] == w[1]
            && [w[0], w[2], w[4], w[6]].iter().all(u8::is_ascii_alphabetic)
    });
    if spaced {
        return Compressible::Spaced;
    }
    let runs = || b.windows(3).any(|w| w[0] == w[1] && w[1] == w[2]);
    // As `char::is_whitespace` (the compression's own test) reads ASCII: with
    // the vertical tab, which `u8::is_ascii_whitespace` leaves out.
    let space = |c: u8| matches!(c, b' ' | b'\t'..=b'\r');
    let spaces = || b.windows(2).any(|w| space(w[0]) && space(w[1]));
    if runs() || spaces() {
        Compressible::RunsOnly
    } else {
        Compressible::No
    }
}

/// Split an identifier into words: separators become spaces, camelCase boundaries
/// get a space, everything is folded.
fn identifier_words(text: &str, skip: &hidden::SkipSet) -> View {
    let mut out = String::with_capacity(text.len() + 8);
    let mut map = OffsetMap::default();
    let mut prev_lower = false;
    let mut buf = String::new();
    for (i, c) in text.char_indices() {
        if skip.contains(i) {
            continue;
        }
        let len = c.len_utf8();
        if matches!(c, '_' | '-' | '.' | ':' | '/') {
            push_piece(&mut out, &mut map, " ", i, len);
            prev_lower = false;
            continue;
        }
        buf.clear();
        if c.is_uppercase() && prev_lower {
            buf.push(' ');
        }
        fold_char_into(c, &mut buf);
        push_piece(&mut out, &mut map, &buf, i, len);
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    View {
        name: "words".into(),
        text: out,
        map,
    }
}

#[cfg(test)]
mod tests;

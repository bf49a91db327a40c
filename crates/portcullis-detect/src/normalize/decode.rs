//! Decoders for the usual obfuscations, applied recursively under hard caps.
//!
//! Candidates are found in the original text (encodings are case-sensitive), decoded,
//! kept only if the result is printable text, folded into a `decoded:<codecs>` view
//! whose spans map to the encoded segment, and decoded again up to
//! `max_decode_depth`. The total decoded bytes and the number of segments are capped;
//! hitting a cap is itself a finding, so an input cannot buy a pass by being large.

use super::{fold_standalone, View};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use portcullis_core::{Finding, NormalizeConfig, Severity, Span};
use regex::Regex;
use std::sync::LazyLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Base64,
    Hex,
    Octal,
    UnicodeEscape,
    Percent,
    HtmlEntities,
    Rot13,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Base64 => "base64",
            Codec::Hex => "hex",
            Codec::Octal => "octal",
            Codec::UnicodeEscape => "unicode_escape",
            Codec::Percent => "percent",
            Codec::HtmlEntities => "html",
            Codec::Rot13 => "rot13",
        }
    }
}

/// What decoding did for one input (for the record and for the cap tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeStats {
    pub segments: usize,
    pub decoded_bytes: usize,
    pub max_depth: usize,
    pub capped: bool,
}

/// Longest encoded prefix decoded to test whether an oversized segment is text.
const PROBE_LEN: usize = 4096;

static B64ISH: LazyLock<Regex> = LazyLock::new(|| re(r"[A-Za-z0-9+/_-]{16,}={0,2}"));
static HEX_ESC: LazyLock<Regex> = LazyLock::new(|| re(r"(?:\\x[0-9a-fA-F]{2}){4,}"));
static OCTAL_ESC: LazyLock<Regex> = LazyLock::new(|| re(r"(?:\\[0-7]{3}){4,}"));
static UNI_ESC: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:\\u[0-9a-fA-F]{4}|\\u\{[0-9a-fA-F]{1,6}\}){3,}"));
static PERCENT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9._~+-])*%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9._~+-])*")
});
static ENTITY: LazyLock<Regex> =
    LazyLock::new(|| re(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});"));
/// Common English words after ROT13 ("the", "and", "you", "your", "all", "ignore",
/// "previous", "instructions", "user", "send", "always", "file"): two distinct ones
/// make a text worth reading as ROT13.
static ROT13_TRIGGER: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(?:gur|naq|lbh|lbhe|nyy|vtaber|cerivbhf|vafgehpgvbaf|hfre|fraq|nyjnlf|svyr)\b")
});

fn re(p: &str) -> Regex {
    // The patterns are constants of this file, compiled once; a failure is a bug
    // caught by every test run.
    Regex::new(p).unwrap_or_else(|e| panic!("built-in decoder pattern {p:?}: {e}"))
}

fn b64_engine(url_safe: bool) -> GeneralPurpose {
    let cfg = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let alphabet = if url_safe {
        &base64::alphabet::URL_SAFE
    } else {
        &base64::alphabet::STANDARD
    };
    GeneralPurpose::new(alphabet, cfg)
}

/// A decoded segment is kept only if it reads as text.
fn is_text(s: &str) -> bool {
    let mut total = 0usize;
    let mut bad = 0usize;
    let mut letters = 0usize;
    for c in s.chars() {
        total += 1;
        if c.is_control() && !matches!(c, '\n' | '\r' | '\t') || c == '\u{FFFD}' {
            bad += 1;
        }
        if c.is_alphabetic() {
            letters += 1;
        }
    }
    total >= 4 && bad * 20 <= total && letters * 2 >= total.min(8)
}

struct Segment {
    codec: Codec,
    start: usize,
    end: usize,
    decoded: String,
}

/// Find and decode candidate segments of `text`. `budget` is the number of decoded
/// bytes still allowed; an oversized text segment sets `capped`.
fn find_segments(text: &str, budget: usize, capped: &mut bool) -> Vec<Segment> {
    let mut out = Vec::new();
    for m in B64ISH.find_iter(text) {
        let s = m.as_str();
        let body = s.trim_end_matches('=');
        let all_hex = body.len() % 2 == 0 && body.bytes().all(|b| b.is_ascii_hexdigit());
        let (codec, estimate) = if all_hex {
            (Codec::Hex, body.len() / 2)
        } else {
            (Codec::Base64, body.len() * 3 / 4)
        };
        let decode = |input: &str| -> Option<String> {
            let bytes = match codec {
                Codec::Hex => hex::decode(input).ok()?,
                _ => {
                    let url = input.contains(['-', '_']);
                    b64_engine(url).decode(input).ok()?
                }
            };
            String::from_utf8(bytes).ok()
        };
        if estimate > budget {
            // Decode a prefix: binary blobs (images) are not text and cost nothing more.
            let probe_len = (PROBE_LEN.min(body.len()) / 4) * 4;
            if decode(&body[..probe_len]).is_some_and(|t| is_text(&t)) {
                *capped = true;
            }
            continue;
        }
        let decoded = decode(body).or_else(|| {
            // Base64 with a stray trailing char: retry on a multiple-of-4 prefix.
            let cut = (body.len() / 4) * 4;
            (codec == Codec::Base64 && cut >= 16)
                .then(|| decode(&body[..cut]))
                .flatten()
        });
        if let Some(d) = decoded.filter(|d| is_text(d)) {
            out.push(Segment {
                codec,
                start: m.start(),
                end: m.end(),
                decoded: d,
            });
        }
    }
    if text.contains('\\') {
        for m in HEX_ESC.find_iter(text) {
            let bytes: Option<Vec<u8>> = m
                .as_str()
                .split("\\x")
                .filter(|p| !p.is_empty())
                .map(|p| u8::from_str_radix(p, 16).ok())
                .collect();
            push_bytes(&mut out, Codec::Hex, m.start(), m.end(), bytes);
        }
        for m in OCTAL_ESC.find_iter(text) {
            let bytes: Option<Vec<u8>> = m
                .as_str()
                .split('\\')
                .filter(|p| !p.is_empty())
                .map(|p| u8::from_str_radix(p, 8).ok())
                .collect();
            push_bytes(&mut out, Codec::Octal, m.start(), m.end(), bytes);
        }
        for m in UNI_ESC.find_iter(text) {
            if let Some(d) = decode_unicode_escapes(m.as_str()).filter(|d| is_text(d)) {
                out.push(Segment {
                    codec: Codec::UnicodeEscape,
                    start: m.start(),
                    end: m.end(),
                    decoded: d,
                });
            }
        }
    }
    if text.contains('%') {
        for m in PERCENT.find_iter(text) {
            if m.as_str().matches('%').count() < 3 {
                continue;
            }
            let d = percent_encoding::percent_decode_str(m.as_str()).decode_utf8();
            if let Ok(d) = d {
                if d != m.as_str() && is_text(&d) {
                    out.push(Segment {
                        codec: Codec::Percent,
                        start: m.start(),
                        end: m.end(),
                        decoded: d.into_owned(),
                    });
                }
            }
        }
    }
    if text.contains('&') {
        // Group entities separated by at most 16 bytes without a newline.
        let mut group: Option<(usize, usize, usize)> = None;
        let flush = |g: Option<(usize, usize, usize)>, out: &mut Vec<Segment>| {
            if let Some((s, e, n)) = g {
                if n >= 3 {
                    let seg = &text[s..e];
                    let d = html_escape::decode_html_entities(seg).into_owned();
                    if is_text(&d) {
                        out.push(Segment {
                            codec: Codec::HtmlEntities,
                            start: s,
                            end: e,
                            decoded: d,
                        });
                    }
                }
            }
        };
        for m in ENTITY.find_iter(text) {
            group = match group {
                Some((s, e, n)) if m.start() - e <= 16 && !text[e..m.start()].contains('\n') => {
                    Some((s, m.end(), n + 1))
                }
                other => {
                    flush(other, &mut out);
                    Some((m.start(), m.end(), 1))
                }
            };
        }
        flush(group, &mut out);
    }
    out
}

fn push_bytes(
    out: &mut Vec<Segment>,
    codec: Codec,
    start: usize,
    end: usize,
    bytes: Option<Vec<u8>>,
) {
    if let Some(d) = bytes.and_then(|b| String::from_utf8(b).ok()) {
        if is_text(&d) {
            out.push(Segment {
                codec,
                start,
                end,
                decoded: d,
            });
        }
    }
}

fn decode_unicode_escapes(s: &str) -> Option<String> {
    let mut units: Vec<u32> = Vec::new();
    for part in s.split("\\u").filter(|p| !p.is_empty()) {
        let hex = part.trim_start_matches('{').trim_end_matches('}');
        units.push(u32::from_str_radix(hex, 16).ok()?);
    }
    let mut out = String::new();
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        if (0xD800..0xDC00).contains(&u) {
            let lo = *units.get(i + 1)?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            out.push(char::from_u32(
                0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00),
            )?);
            i += 2;
        } else {
            out.push(char::from_u32(u)?);
            i += 1;
        }
    }
    Some(out)
}

fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='m' | 'A'..='M' => (c as u8 + 13) as char,
            'n'..='z' | 'N'..='Z' => (c as u8 - 13) as char,
            _ => c,
        })
        .collect()
}

fn rot13_worthy(s: &str) -> bool {
    let mut first: Option<&str> = None;
    for m in ROT13_TRIGGER.find_iter(s) {
        match first {
            None => first = Some(m.as_str()),
            Some(f) if f != m.as_str() => return true,
            _ => {}
        }
    }
    false
}

struct Pending {
    text: String,
    chain: String,
    orig_start: usize,
    orig_len: usize,
    depth: usize,
}

/// Decode every obfuscated segment of `text` (recursively). `views` are the views
/// built so far; the ROT13 view is derived from `folded` (or `lower`).
pub fn decode_all(
    text: &str,
    views: &[View],
    caps: &NormalizeConfig,
) -> (Vec<View>, DecodeStats, Vec<Finding>) {
    let mut stats = DecodeStats::default();
    let mut out_views = Vec::new();
    let mut findings = Vec::new();
    if caps.max_decode_depth == 0 {
        return (out_views, stats, findings);
    }
    let budget_left =
        |stats: &DecodeStats| caps.max_decoded_bytes.saturating_sub(stats.decoded_bytes);

    // ROT13 is length-preserving on the folded view, so it keeps that view's map.
    // It is a decoded segment like the others: within the byte and segment caps.
    if let Some(base) = views.iter().find(|v| v.name == "folded").or(views.first()) {
        if rot13_worthy(&base.text)
            && base.text.len() <= budget_left(&stats)
            && stats.segments < caps.max_decoded_segments
        {
            stats.segments += 1;
            stats.decoded_bytes += base.text.len();
            stats.max_depth = 1;
            out_views.push(View {
                name: "decoded:rot13".into(),
                text: rot13(&base.text),
                map: base.map.clone(),
            });
        }
    }

    let mut queue: Vec<Pending> = Vec::new();
    let mut capped = false;
    let top = find_segments(text, budget_left(&stats), &mut capped);
    for s in top {
        queue.push(Pending {
            chain: s.codec.name().to_string(),
            orig_start: s.start,
            orig_len: s.end - s.start,
            text: s.decoded,
            depth: 1,
        });
    }
    // Breadth-first, so the caps cut the deepest layers first.
    let mut i = 0;
    while i < queue.len() {
        if stats.segments >= caps.max_decoded_segments {
            capped = true;
            break;
        }
        let len = queue[i].text.len();
        if len > budget_left(&stats) {
            capped = true;
            i += 1;
            continue;
        }
        stats.segments += 1;
        stats.decoded_bytes += len;
        stats.max_depth = stats.max_depth.max(queue[i].depth);
        let (depth, chain, os, ol) = (
            queue[i].depth,
            queue[i].chain.clone(),
            queue[i].orig_start,
            queue[i].orig_len,
        );
        out_views.push(fold_standalone(
            &queue[i].text,
            &format!("decoded:{chain}"),
            os,
            ol,
        ));
        if depth < caps.max_decode_depth {
            let inner_text = std::mem::take(&mut queue[i].text);
            let mut nested: Vec<Pending> =
                find_segments(&inner_text, budget_left(&stats), &mut capped)
                    .into_iter()
                    .map(|s| Pending {
                        chain: format!("{chain}+{}", s.codec.name()),
                        orig_start: os,
                        orig_len: ol,
                        text: s.decoded,
                        depth: depth + 1,
                    })
                    .collect();
            let lowered = inner_text.to_lowercase();
            if rot13_worthy(&lowered) {
                nested.push(Pending {
                    chain: format!("{chain}+rot13"),
                    orig_start: os,
                    orig_len: ol,
                    text: rot13(&lowered),
                    depth: depth + 1,
                });
            }
            queue.extend(nested);
        } else if !find_segments(&queue[i].text, budget_left(&stats), &mut capped).is_empty() {
            // Still encoded at the depth cap: the layering itself is the signal.
            capped = true;
        }
        i += 1;
    }
    stats.capped = capped;
    if capped {
        findings.push(Finding {
            rule: "norm.decode_cap".into(),
            category: "obfuscation".into(),
            severity: Severity::Medium,
            view: "original".into(),
            span: Span {
                start: 0,
                end: text.len(),
            },
            excerpt: format!(
                "decoding stopped at a cap (depth {}, {} bytes, {} segments)",
                caps.max_decode_depth, caps.max_decoded_bytes, caps.max_decoded_segments
            ),
            path: None,
            allowlisted: false,
        });
    }
    (out_views, stats, findings)
}

//! Characters a reader cannot see: Unicode tags, bidi controls, zero-width
//! characters, ANSI escape sequences and other control characters. They are removed
//! from every normalized view, and their presence is a finding.

use portcullis_core::{Finding, Severity, Span};

pub const HIDDEN_CATEGORY: &str = "hidden_characters";
const MAX_FINDINGS_PER_RULE: usize = 16;
/// Zero-width characters in a row that count as a run (`norm.zero_width_run`).
pub const ZERO_WIDTH_RUN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tag,
    Bidi,
    ZeroWidth,
    Ansi,
    Control,
}

impl Kind {
    fn rule(self) -> (&'static str, Severity) {
        match self {
            Kind::Tag => ("norm.tag_characters", Severity::High),
            Kind::Bidi => ("norm.bidi_control", Severity::Medium),
            Kind::ZeroWidth => ("norm.zero_width", Severity::Low),
            Kind::Ansi => ("norm.ansi_escape", Severity::Medium),
            Kind::Control => ("norm.control_character", Severity::Low),
        }
    }
}

/// Byte ranges of the original that every view skips.
#[derive(Debug, Clone, Default)]
pub struct SkipSet {
    ranges: Vec<(usize, usize)>,
}

impl SkipSet {
    fn add(&mut self, start: usize, end: usize) {
        if let Some(last) = self.ranges.last_mut() {
            if last.1 == start {
                last.1 = end;
                return;
            }
        }
        self.ranges.push((start, end));
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Is the character starting at byte `i` skipped?
    pub fn contains(&self, i: usize) -> bool {
        if self.ranges.is_empty() {
            return false;
        }
        let k = self.ranges.partition_point(|r| r.1 <= i);
        self.ranges.get(k).is_some_and(|r| r.0 <= i)
    }
}

/// Hidden ASCII spelled with Unicode tag characters (U+E0020..U+E007E).
#[derive(Debug, Clone)]
pub struct TagText {
    pub text: String,
    pub orig_start: usize,
    pub orig_len: usize,
}

pub struct HiddenScan {
    pub skip: SkipSet,
    pub findings: Vec<Finding>,
    pub tag_text: Option<TagText>,
}

/// Characters with no visible rendering that a normalized view drops.
pub fn is_hidden(c: char) -> bool {
    classify(c).is_some() || matches!(c, '\u{FE00}'..='\u{FE0F}')
}

fn classify(c: char) -> Option<Kind> {
    match c {
        '\u{E0000}'..='\u{E007F}' => Some(Kind::Tag),
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => Some(Kind::Bidi),
        '\u{200B}'..='\u{200D}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{00AD}'
        | '\u{180E}'
        | '\u{034F}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{FFA0}' => Some(Kind::ZeroWidth),
        '\u{1B}' => Some(Kind::Ansi),
        c if (c.is_control() && !matches!(c, '\n' | '\r' | '\t')) => Some(Kind::Control),
        _ => None,
    }
}

fn is_pictographic(c: char) -> bool {
    matches!(c, '\u{1F000}'..='\u{1FAFF}' | '\u{2600}'..='\u{27BF}' | '\u{2300}'..='\u{23FF}' | '\u{FE0F}')
}

/// Length in bytes of the ANSI escape sequence starting at `i` (which holds ESC).
fn ansi_len(bytes: &[u8], i: usize) -> usize {
    let rest = &bytes[i..];
    match rest.get(1) {
        Some(b'[') => {
            // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E.
            let mut k = 2;
            while k < rest.len() && (0x20..=0x3F).contains(&rest[k]) {
                k += 1;
            }
            if k < rest.len() && (0x40..=0x7E).contains(&rest[k]) {
                k + 1
            } else {
                k
            }
        }
        Some(b']') => {
            // OSC: up to BEL or ESC '\'.
            let mut k = 2;
            while k < rest.len() {
                if rest[k] == 0x07 {
                    return k + 1;
                }
                if rest[k] == 0x1B && rest.get(k + 1) == Some(&b'\\') {
                    return k + 2;
                }
                k += 1;
            }
            k
        }
        Some(b) if (0x40..=0x5F).contains(b) => 2,
        _ => 1,
    }
}

pub fn scan(text: &str) -> HiddenScan {
    let mut out = HiddenScan {
        skip: SkipSet::default(),
        findings: Vec::new(),
        tag_text: None,
    };
    // Fast path: plain printable ASCII has nothing hidden.
    if text
        .bytes()
        .all(|b| (0x20..0x7F).contains(&b) || matches!(b, b'\n' | b'\r' | b'\t'))
    {
        return out;
    }
    let bytes = text.as_bytes();
    let mut counts = [0usize; 5];
    let mut run: Option<(Kind, usize, usize)> = None;
    let mut tags = String::new();
    let mut tag_range: Option<(usize, usize)> = None;
    let mut prev: Option<char> = None;
    let mut in_flag_sequence = false;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let mut end = i + c.len_utf8();
        let mut kind = classify(c);
        // Benign uses that are part of visible emoji: ZWJ sequences, tag flags, BOM.
        if c == '\u{1F3F4}' {
            in_flag_sequence = true;
        } else if matches!(kind, Some(Kind::Tag)) && in_flag_sequence {
            if c == '\u{E007F}' {
                in_flag_sequence = false;
            }
            out.skip.add(i, end);
            prev = Some(c);
            continue;
        } else {
            in_flag_sequence = false;
        }
        if c == '\u{200D}'
            && prev.is_some_and(is_pictographic)
            && iter.peek().is_some_and(|&(_, n)| is_pictographic(n))
        {
            kind = None;
            out.skip.add(i, end);
        }
        if c == '\u{FEFF}' && i == 0 {
            kind = None;
            out.skip.add(i, end);
        }
        if matches!(c, '\u{FE00}'..='\u{FE0F}') {
            out.skip.add(i, end);
        }
        if let Some(k) = kind {
            if k == Kind::Ansi {
                end = i + ansi_len(bytes, i);
                // Skip the rest of the sequence (all ASCII, so char boundaries hold).
                while iter.peek().is_some_and(|&(j, _)| j < end) {
                    iter.next();
                }
            }
            if k == Kind::Tag && ('\u{E0020}'..='\u{E007E}').contains(&c) {
                tags.push(char::from((c as u32 - 0xE0000) as u8));
                tag_range = Some(match tag_range {
                    None => (i, end),
                    Some((s, _)) => (s, end),
                });
            }
            out.skip.add(i, end);
            run = match run {
                Some((rk, rs, re)) if rk == k && re == i => Some((rk, rs, end)),
                other => {
                    if let Some(r) = other {
                        push_finding(&mut out.findings, &mut counts, text, r);
                    }
                    Some((k, i, end))
                }
            };
        }
        prev = Some(c);
    }
    if let Some(r) = run {
        push_finding(&mut out.findings, &mut counts, text, r);
    }
    if let Some((s, e)) = tag_range {
        out.tag_text = Some(TagText {
            text: tags,
            orig_start: s,
            orig_len: e - s,
        });
    }
    out
}

fn push_finding(
    findings: &mut Vec<Finding>,
    counts: &mut [usize; 5],
    text: &str,
    (kind, start, end): (Kind, usize, usize),
) {
    let slot = kind as usize;
    counts[slot] += 1;
    if counts[slot] > MAX_FINDINGS_PER_RULE {
        return;
    }
    let (mut rule, mut severity) = kind.rule();
    // Consecutive zero-width characters can spell bits; a lone one is typography.
    if kind == Kind::ZeroWidth
        && text
            .get(start..end)
            .is_some_and(|r| r.chars().count() >= ZERO_WIDTH_RUN)
    {
        (rule, severity) = ("norm.zero_width_run", Severity::Medium);
    }
    let visible: String = text
        .get(start..end)
        .unwrap_or("")
        .chars()
        .take(12)
        .map(|c| format!("U+{:04X} ", c as u32))
        .collect();
    findings.push(Finding {
        rule: rule.into(),
        category: HIDDEN_CATEGORY.into(),
        severity,
        view: "original".into(),
        span: Span { start, end },
        excerpt: visible.trim_end().to_string(),
        path: None,
        allowlisted: false,
    });
}

//! Validation of a format's match beyond its pattern: what may touch its edges,
//! checksums (Luhn), plausible numbers (phones, cards), documentation examples
//! and placeholders, the end of a PEM body.

use super::formats::{Check, Edge};

/// Chars that may not touch a span of this edge kind (ASCII only: CJK text glues
/// numbers and tokens to its words without spaces).
pub(super) fn sticks(edge: Edge, c: char, right: bool) -> bool {
    match edge {
        Edge::Free => false,
        Edge::Token => c.is_ascii_alphanumeric() || c == '_' || c == '-',
        Edge::Word | Edge::Numeric => c.is_ascii_alphanumeric() || c == '_',
        // `=` is the usual separator before a value, and padding after one.
        Edge::Base64 => c.is_ascii_alphanumeric() || c == '+' || c == '/' || (right && c == '='),
    }
}

pub(super) fn is_glue(c: char) -> bool {
    matches!(c, '.' | '-' | '/')
}

pub(super) fn left_ok(text: &str, start: usize, edge: Edge) -> bool {
    let mut back = text.get(..start).unwrap_or("").chars().rev();
    let prev = back.next();
    if prev.is_some_and(|c| sticks(edge, c, false)) {
        return false;
    }
    // `1.2.3.415-555-2671`, `v10.0.0.1`: a separator glued to a digit.
    !(edge == Edge::Numeric
        && prev.is_some_and(is_glue)
        && back.next().is_some_and(|c| c.is_ascii_digit()))
}

pub(super) fn right_ok(text: &str, end: usize, edge: Edge) -> bool {
    let mut fwd = text.get(end..).unwrap_or("").chars();
    let next = fwd.next();
    if next.is_some_and(|c| sticks(edge, c, true)) {
        return false;
    }
    !(edge == Edge::Numeric
        && next.is_some_and(is_glue)
        && fwd.next().is_some_and(|c| c.is_ascii_digit()))
}

/// A numeric match (phone, card) or the longest prefix of it that ends at a digit
/// group and passes the edge and format checks: `+44 20 7946 0958 5555` is a phone
/// number followed by another number, not an invalid 17-digit phone number.
pub(super) fn accept_numeric(text: &str, start: usize, end: usize, check: Check) -> Option<usize> {
    if !left_ok(text, start, Edge::Numeric) {
        return None;
    }
    // A phone number does not start in the middle of a run of space-separated numbers
    // (`+44 20 7946 0958 5555 ...` holds no second phone number starting at `0958`).
    if check == Check::Phone {
        let mut back = text.get(..start).unwrap_or("").chars().rev();
        if back.next() == Some(' ') && back.next().is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let b = text.as_bytes();
    let mut e = end;
    loop {
        if right_ok(text, e, Edge::Numeric) && check_ok(text, start, e, check) {
            return Some(e);
        }
        let mut p = e.checked_sub(1)?;
        // Back to the end of the previous digit group (the match is ASCII).
        while p > start && (b[p].is_ascii_digit() || !b[p - 1].is_ascii_digit()) {
            p -= 1;
        }
        if p <= start {
            return None;
        }
        e = p;
    }
}

/// Where to search again after a rejected numeric match at `start`: the next
/// position whose previous char does not glue to a number.
pub(super) fn next_numeric_start(text: &str, start: usize) -> usize {
    let mut prev_word = false;
    for (off, c) in text.get(start..).unwrap_or("").char_indices() {
        if off > 0 && !prev_word {
            return start + off;
        }
        prev_word = c.is_ascii_alphanumeric() || c == '_';
    }
    text.len()
}

pub(super) fn check_ok(text: &str, start: usize, end: usize, check: Check) -> bool {
    let Some(s) = text.get(start..end) else {
        return false;
    };
    match check {
        Check::Any | Check::Pem => true,
        Check::OpenAi => {
            // Anthropic keys also start with `sk-`; they have their own rule. A generic
            // `sk-` prefix needs a random-looking body: digits and both letter cases.
            !s.starts_with("sk-ant-") && {
                let body = s.get(3..).unwrap_or("");
                has(body, |c| c.is_ascii_digit())
                    && has(body, |c| c.is_ascii_uppercase())
                    && has(body, |c| c.is_ascii_lowercase())
            }
        }
        Check::AwsKeyId => true,
        Check::AwsSecret => {
            has(s, |c| c.is_ascii_uppercase())
                && has(s, |c| c.is_ascii_lowercase())
                && has(s, |c| c.is_ascii_digit() || c == '/' || c == '+')
        }
        Check::Slack => has(s.get(5..).unwrap_or(""), |c| c.is_ascii_digit()),
        Check::Bearer => {
            // Real tokens have digits or mixed case; `YOUR_ACCESS_TOKEN_HERE` has neither.
            has(s, |c| c.is_ascii_digit())
                || (has(s, |c| c.is_ascii_uppercase()) && has(s, |c| c.is_ascii_lowercase()))
        }
        Check::UrlPassword => url_password_ok(s),
        Check::Email => email_ok(text, start, s),
        Check::Phone => phone_ok(s),
        Check::Card => card_ok(s),
    }
}

/// AWS documentation keys: in every AWS docs page a fetch tool returns. They claim
/// their span (no finding, and no high-entropy finding either).
pub(super) fn is_documentation_example(check: Check, s: &str) -> bool {
    match check {
        Check::AwsKeyId => s.ends_with("EXAMPLE"),
        Check::AwsSecret => s.ends_with("EXAMPLEKEY"),
        _ => false,
    }
}

pub(super) fn has(s: &str, f: impl Fn(char) -> bool) -> bool {
    s.chars().any(f)
}

pub(super) fn url_password_ok(p: &str) -> bool {
    const PLACEHOLDERS: &[&str] = &[
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "your_password",
        "yourpassword",
        "your-password",
        "mypassword",
        "changeme",
    ];
    if p.starts_with(['$', '{', '<', '%', '[']) {
        return false;
    }
    if p.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '•')) {
        return false;
    }
    // `https://host:8080@other` is a port (URL confusion), not a password.
    if p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    !PLACEHOLDERS.iter().any(|w| p.eq_ignore_ascii_case(w))
}

pub(super) fn email_ok(text: &str, start: usize, s: &str) -> bool {
    const RESERVED_DOMAINS: &[&str] = &["example.com", "example.net", "example.org"];
    const RESERVED_TLDS: &[&str] = &["example", "test", "invalid", "localhost", "local"];
    const FILE_EXTS: &[&str] = &[
        "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "avif", "css", "js", "mjs",
        "map", "json",
    ];
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    if local == "git" {
        return false;
    }
    let domain = domain.to_ascii_lowercase();
    let tld = domain.rsplit('.').next().unwrap_or("");
    if RESERVED_TLDS.contains(&tld) || FILE_EXTS.contains(&tld) {
        return false;
    }
    if RESERVED_DOMAINS
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
    {
        return false;
    }
    // URL userinfo (`scheme://user@host`, `scheme://user:pass@host`): not an address.
    let before = text.get(..start).unwrap_or("");
    let window_start = before
        .char_indices()
        .rev()
        .take(256)
        .last()
        .map_or(before.len(), |(i, _)| i);
    let window = before.get(window_start..).unwrap_or("");
    let token = window
        .rsplit(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '(' | ')'))
        .next()
        .unwrap_or("");
    !token.contains("://")
}

pub(super) fn phone_ok(s: &str) -> bool {
    let intl = s.starts_with('+');
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    let range = if intl {
        8..=15
    } else if s.starts_with("00") {
        11..=15
    } else {
        9..=12
    };
    if !range.contains(&digits) {
        return false;
    }
    let body = if intl { s.get(1..).unwrap_or("") } else { s };
    // Separator runs: at most 2 chars, at most one of ` .-`, at most one parenthesis.
    for run in body
        .split(|c: char| c.is_ascii_digit())
        .filter(|r| !r.is_empty())
    {
        let seps = run.chars().filter(|c| matches!(c, ' ' | '.' | '-')).count();
        let parens = run.chars().filter(|c| matches!(c, '(' | ')')).count();
        if run.len() > 2 || seps > 1 || parens > 1 {
            return false;
        }
    }
    let opens = s.matches('(').count();
    if opens != s.matches(')').count() || opens > 1 {
        return false;
    }
    let groups: Vec<usize> = body
        .split(|c: char| !c.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .map(str::len)
        .collect();
    if !intl && groups.len() >= 3 {
        // DD.MM.YYYY / YYYY-MM-DD followed by more digits (a time): a date, not a phone.
        let seps: Vec<char> = body.chars().filter(|c| !c.is_ascii_digit()).collect();
        let same_date_sep =
            seps.len() >= 2 && seps[0] == seps[1] && matches!(seps[0], '.' | '-' | '/');
        let (a, b, c) = (groups[0], groups[1], groups[2]);
        if same_date_sep && ((a <= 2 && b <= 2 && c == 4) || (a == 4 && b <= 2 && c <= 2)) {
            return false;
        }
    }
    // Dotted quads (IP addresses).
    if groups.len() == 4 && groups.iter().all(|&g| g <= 3) && !s.contains([' ', '-']) {
        return false;
    }
    true
}

pub(super) fn card_ok(s: &str) -> bool {
    let d: Vec<u32> = s
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| u32::from(b - b'0'))
        .collect();
    let n = d.len();
    if !(13..=19).contains(&n) || !luhn_valid(s) {
        return false;
    }
    // One separator character throughout.
    let mut seps = s.chars().filter(|c| !c.is_ascii_digit());
    if let Some(first) = seps.next() {
        if seps.any(|c| c != first) {
            return false;
        }
    }
    let p2 = d[0] * 10 + d[1];
    let p4 = p2 * 100 + d[2] * 10 + d[3];
    match d[0] {
        4 => matches!(n, 13 | 16 | 19),
        5 => (51..=55).contains(&p2) && n == 16,
        2 => (2221..=2720).contains(&p4) && n == 16,
        3 => match p2 {
            34 | 37 => n == 15,
            35 => (16..=19).contains(&n),
            30 | 36 | 38 | 39 => (14..=19).contains(&n),
            _ => false,
        },
        6 => (16..=19).contains(&n),
        _ => false,
    }
}

/// After a PEM header with no END line: the span end covering the base64 lines that
/// follow (real or JSON-escaped newlines); a line that is not pure base64 stops it.
pub(super) fn pem_body_end(text: &str, from: usize) -> usize {
    let b = text.as_bytes();
    let newline = |i: usize| -> usize {
        let rest = b.get(i..).unwrap_or(&[]);
        if rest.starts_with(b"\r\n") {
            2
        } else if rest.starts_with(b"\n") {
            1
        } else if rest.starts_with(b"\\r\\n") {
            4
        } else if rest.starts_with(b"\\n") {
            2
        } else {
            0
        }
    };
    let b64 = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=');
    let mut end = from;
    loop {
        let nl = newline(end);
        if nl == 0 {
            break;
        }
        let line_start = end + nl;
        let mut j = line_start;
        while j < b.len() && b64(b[j]) {
            j += 1;
        }
        if j == line_start || (j < b.len() && newline(j) == 0) {
            break;
        }
        end = j;
    }
    end
}

/// Luhn checksum over the digits of s (ignoring spaces and dashes). Any other
/// character, or fewer than two digits, makes it invalid.
pub fn luhn_valid(s: &str) -> bool {
    let mut sum = 0u32;
    let mut count = 0usize;
    let mut double = false;
    for c in s.chars().rev() {
        match c {
            ' ' | '-' => continue,
            '0'..='9' => {
                let mut d = c as u32 - '0' as u32;
                if double {
                    d *= 2;
                    if d > 9 {
                        d -= 9;
                    }
                }
                sum = (sum + d) % 10;
                double = !double;
                count += 1;
            }
            _ => return false,
        }
    }
    count >= 2 && sum == 0
}

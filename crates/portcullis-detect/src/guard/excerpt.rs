//! Excerpts that name a finding without containing the secret: a short format
//! prefix, a PEM header, a masked email or number.

pub(super) fn prefix_excerpt(s: &str, reveal: usize) -> String {
    let total = s.chars().count();
    // Never reveal more than 4 chars, and always hide at least 4.
    let n = reveal.min(4).min(total.saturating_sub(4));
    let shown: String = s.chars().take(n).collect();
    if shown.is_empty() {
        format!("[REDACTED {total} chars]")
    } else {
        format!("{shown}…[REDACTED {} chars]", total - n)
    }
}

pub(super) fn email_excerpt(s: &str) -> String {
    match s.rsplit_once('@') {
        Some((local, domain)) => {
            let first: String = local.chars().take(1).collect();
            format!("{first}***@{domain}")
        }
        None => prefix_excerpt(s, 0),
    }
}

/// Digits masked except the last four (and a `+CC` country code followed by a separator).
pub(super) fn digits_excerpt(s: &str) -> String {
    let total = s.chars().filter(char::is_ascii_digit).count();
    let keep_from = total.saturating_sub(4);
    let cc_len = if s.starts_with('+') {
        let run = s.chars().skip(1).take_while(char::is_ascii_digit).count();
        let sep_follows = s.chars().nth(run + 1).is_some_and(|c| !c.is_ascii_digit());
        if run <= 3 && sep_follows {
            run
        } else {
            0
        }
    } else {
        0
    };
    let mut seen = 0;
    s.chars()
        .map(|c| {
            if c.is_ascii_digit() {
                seen += 1;
                if seen <= cc_len || seen > keep_from {
                    c
                } else {
                    '*'
                }
            } else {
                c
            }
        })
        .collect()
}

pub(super) fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

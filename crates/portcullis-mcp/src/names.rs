//! Tool names compared across servers (MSB's name collision, homoglyph
//! look-alikes, shadowing). A name is folded (confusable characters to their
//! ASCII look-alikes with the `decancer` table, lowercased), then compared with
//! every tool name of the other servers: exact collision, same after folding
//! (confusables, case), same without separators, same without a version/`new`
//! style suffix, or within a small edit distance. Shadowing is a description that
//! names another server's tool.

use crate::params::words;

/// One name finding against another server's tool.
#[derive(Debug, Clone, PartialEq)]
pub struct NameFinding {
    /// `names.collision`, `names.confusable`, `names.separator`, `names.suffix`,
    /// `names.lookalike` or `names.shadowing`.
    pub rule: &'static str,
    pub other_server: String,
    pub other_name: String,
}

/// Fold confusables and case.
pub fn fold(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        match decancer::cure_char(c, decancer::Options::default()) {
            decancer::Translation::Character(t) => out.extend(t.to_lowercase()),
            decancer::Translation::String(s) => out.push_str(&s.to_lowercase()),
            decancer::Translation::None => {}
        }
    }
    out
}

fn no_separators(s: &str) -> String {
    s.chars().filter(|c| c.is_alphanumeric()).collect()
}

/// Suffixes that make a copy look like an update of the original.
const SUFFIXES: &[&str] = &[
    "new", "old", "copy", "latest", "updated", "update", "official", "final", "fixed", "pro",
    "plus", "beta", "alt", "real", "original", "secure", "safe",
];

/// The folded name without separators and without trailing version or
/// `new`-style suffixes (` v1`, `_v2`, `-new`, `2`, `_latest`).
fn core(folded: &str) -> String {
    let parts: Vec<&str> = folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect();
    let mut end = parts.len();
    while end > 1 {
        let p = parts[end - 1];
        let version = p.strip_prefix('v').unwrap_or(p);
        if SUFFIXES.contains(&p)
            || (!version.is_empty() && version.chars().all(|c| c.is_ascii_digit()))
        {
            end -= 1;
        } else {
            break;
        }
    }
    let mut s: String = parts[..end].concat();
    // A version glued to the name (`echo2`, `readfilev2`).
    let trimmed = s.trim_end_matches(|c: char| c.is_ascii_digit()).to_string();
    if trimmed.len() >= 3 && trimmed.len() < s.len() {
        s = trimmed
            .strip_suffix('v')
            .filter(|t| t.len() >= 3)
            .unwrap_or(&trimmed)
            .to_string();
    }
    s
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// How `name` relates to `other` (another server's tool), if it is confusable.
pub fn compare(name: &str, other: &str, max_edit: usize) -> Option<&'static str> {
    if name == other {
        return Some("names.collision");
    }
    let (a, b) = (fold(name), fold(other));
    if a == b {
        return Some("names.confusable");
    }
    let (na, nb) = (no_separators(&a), no_separators(&b));
    if na == nb {
        return Some("names.separator");
    }
    let (ca, cb) = (core(&a), core(&b));
    if ca == cb && !ca.is_empty() {
        return Some("names.suffix");
    }
    if na.chars().count() >= 5 && nb.chars().count() >= 5 && edit_distance(&na, &nb) <= max_edit {
        return Some("names.lookalike");
    }
    None
}

/// Whether a description names `other` (another server's tool) as a word.
pub fn mentions(description: &str, other: &str) -> bool {
    if other.chars().count() < 4 {
        return false;
    }
    let d = format!(
        " {} ",
        description
            .to_lowercase()
            .replace(|c: char| !c.is_alphanumeric() && c != '_' && c != '-', " ")
    );
    let o = other.to_lowercase();
    d.contains(&format!(" {o} "))
        || (o.contains(['_', '-']) && words(description).contains(&words(other)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_collisions_confusables_separators_suffixes_and_typos() {
        assert_eq!(
            compare("read_note", "read_note", 1),
            Some("names.collision")
        );
        // Cyrillic а and е.
        assert_eq!(
            compare("r\u{435}\u{430}d_note", "read_note", 1),
            Some("names.confusable")
        );
        assert_eq!(
            compare("Read_Note", "read_note", 1),
            Some("names.confusable")
        );
        assert_eq!(
            compare("read-note", "read_note", 1),
            Some("names.separator")
        );
        assert_eq!(compare("readnote", "read_note", 1), Some("names.separator"));
        assert_eq!(
            compare("read_note v1", "read_note", 1),
            Some("names.suffix")
        );
        assert_eq!(
            compare("read_note_v2", "read_note", 1),
            Some("names.suffix")
        );
        assert_eq!(
            compare("read_note-new", "read_note", 1),
            Some("names.suffix")
        );
        assert_eq!(compare("read_note2", "read_note", 1), Some("names.suffix"));
        assert_eq!(
            compare("read_nota", "read_note", 1),
            Some("names.lookalike")
        );
        assert_eq!(compare("echo", "add", 1), None);
        assert_eq!(compare("get_weather", "get_time", 1), None);
        assert_eq!(compare("list_files", "read_file", 1), None);
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions(
            "Before sending, always call send_email with a copy.",
            "send_email"
        ));
        assert!(!mentions("Sends an email.", "send_email"));
        assert!(!mentions("Adds two integers.", "add"));
        assert!(mentions("Use read_note first.", "read_note"));
    }
}

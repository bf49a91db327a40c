//! Verdicts by the hash of (model, prompt template, input): identical inputs get
//! the identical verdict for as long as the entry is kept. Bounded; the oldest
//! entry goes first. Errors are never cached (a timeout may pass).

use crate::Verdict;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};

/// The cache key: SHA-256 over the three parts, each length-prefixed so no two
/// different triples give the same bytes.
pub fn key(model_id: &str, template_sha256: &str, input: &str) -> String {
    let mut h = Sha256::new();
    for part in [model_id, template_sha256, input] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

#[derive(Debug)]
pub struct Cache {
    capacity: usize,
    entries: HashMap<String, Verdict>,
    order: VecDeque<String>,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Verdict> {
        self.entries.get(key)
    }

    pub fn insert(&mut self, key: String, verdict: Verdict) {
        if self.capacity == 0 || self.entries.contains_key(&key) {
            return;
        }
        while self.entries.len() >= self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.entries.remove(&old);
                }
                None => break,
            }
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, verdict);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Label;

    fn v(label: Label) -> Verdict {
        Verdict {
            label,
            confidence: 0.9,
            raw: "x".into(),
        }
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_eq!(key("m", "t", "x"), key("m", "t", "x"));
        assert_ne!(key("m", "t", "x"), key("m", "t", "y"));
        assert_ne!(key("ab", "c", "x"), key("a", "bc", "x"));
        assert_ne!(key("m", "t1", "x"), key("m", "t2", "x"));
    }

    #[test]
    fn the_oldest_entry_goes_first_and_nothing_is_overwritten() {
        let mut c = Cache::new(2);
        c.insert("a".into(), v(Label::Benign));
        c.insert("a".into(), v(Label::Injection));
        assert_eq!(c.get("a").map(|v| v.label), Some(Label::Benign));
        c.insert("b".into(), v(Label::Benign));
        c.insert("c".into(), v(Label::Benign));
        assert_eq!(c.len(), 2);
        assert!(c.get("a").is_none() && c.get("b").is_some() && c.get("c").is_some());
        let mut off = Cache::new(0);
        off.insert("a".into(), v(Label::Benign));
        assert!(off.is_empty());
    }
}

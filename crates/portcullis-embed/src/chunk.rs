//! Sentence-boundary chunking of long texts into windows the model can take.
//!
//! A text is tokenized once (byte offsets per token). A chunk is a run of whole
//! tokens of at most `window` content tokens (the model adds `[CLS]` and `[SEP]`).
//! Each chunk ends at the last sentence boundary that fits; a sentence longer than
//! the window is cut at the last word boundary that fits, and a single word longer
//! than the window is cut between its word pieces. Chunks do not overlap and
//! together cover every token, so no part of a text goes unembedded.
//!
//! A sentence boundary lies before a token when the text between it and the
//! previous token contains a line break, or the previous token is `.`, `!`, `?`,
//! `;` or `…` followed by whitespace.

/// A chunk: a range of token indices and the byte span of the text it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub tokens: (usize, usize),
    pub start: usize,
    pub end: usize,
}

fn is_sentence_start(text: &str, offsets: &[(usize, usize)], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    let (prev_start, prev_end) = offsets[i - 1];
    let gap = text.get(prev_end..offsets[i].0).unwrap_or("");
    if gap.contains('\n') || gap.contains('\r') {
        return true;
    }
    let prev = text.get(prev_start..prev_end).unwrap_or("");
    matches!(prev, "." | "!" | "?" | ";" | "…") && !gap.is_empty()
}

fn is_word_start(offsets: &[(usize, usize)], i: usize) -> bool {
    // Word pieces of one word are contiguous; a gap (whitespace) starts a new word.
    i == 0 || offsets[i].0 > offsets[i - 1].1
}

/// Split a tokenized text into chunks of at most `window` tokens (`window >= 1`).
/// An empty text gives one empty chunk (the model embeds `[CLS] [SEP]`).
pub fn chunks(text: &str, offsets: &[(usize, usize)], window: usize) -> Vec<Chunk> {
    let window = window.max(1);
    let n = offsets.len();
    if n == 0 {
        return vec![Chunk {
            tokens: (0, 0),
            start: 0,
            end: text.len(),
        }];
    }
    let mut out = Vec::new();
    let mut s = 0;
    while s < n {
        let limit = (s + window).min(n);
        let end = if limit == n {
            n
        } else {
            // The last sentence start, else the last word start, in (s, limit].
            let best = |pred: &dyn Fn(usize) -> bool| (s + 1..=limit).rev().find(|&i| pred(i));
            best(&|i| is_sentence_start(text, offsets, i))
                .or_else(|| best(&|i| is_word_start(offsets, i)))
                .unwrap_or(limit)
        };
        out.push(Chunk {
            tokens: (s, end),
            start: offsets[s].0,
            end: offsets[end - 1].1,
        });
        s = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whitespace "tokenizer" for tests: one token per word, punctuation split off.
    fn toks(text: &str) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices() {
            if c.is_whitespace() || c == '.' || c == '?' {
                if let Some(s) = start.take() {
                    v.push((s, i));
                }
                if !c.is_whitespace() {
                    v.push((i, i + c.len_utf8()));
                }
            } else if start.is_none() {
                start = Some(i);
            }
        }
        if let Some(s) = start {
            v.push((s, text.len()));
        }
        v
    }

    #[test]
    fn short_text_is_one_chunk() {
        let t = "Hello there. How are you?";
        let o = toks(t);
        assert_eq!(
            chunks(t, &o, 64),
            vec![Chunk {
                tokens: (0, o.len()),
                start: 0,
                end: t.len()
            }]
        );
    }

    #[test]
    fn cuts_at_sentence_boundaries() {
        let t = "One two three. Four five six. Seven eight nine.";
        let o = toks(t);
        // Sentences are 4 tokens each; a window of 9 holds two sentences.
        let c = chunks(t, &o, 9);
        let texts: Vec<&str> = c.iter().map(|c| &t[c.start..c.end]).collect();
        assert_eq!(
            texts,
            vec!["One two three. Four five six.", "Seven eight nine."]
        );
    }

    #[test]
    fn long_sentence_falls_back_to_words_and_covers_everything() {
        let t = "a b c d e f g h i j k";
        let o = toks(t);
        let c = chunks(t, &o, 4);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|c| c.tokens.1 - c.tokens.0 <= 4));
        // Contiguous, no overlap, full coverage.
        assert_eq!(c[0].tokens.0, 0);
        for w in c.windows(2) {
            assert_eq!(w[0].tokens.1, w[1].tokens.0);
        }
        assert_eq!(c[2].tokens.1, o.len());
    }

    #[test]
    fn word_pieces_are_kept_together_when_possible() {
        // "abcdef" as three contiguous pieces; a window of 4 must not split it.
        let t = "xy abcdef";
        let o = vec![(0, 2), (3, 5), (5, 7), (7, 9)];
        let c = chunks(t, &o, 3);
        assert_eq!(c[0].tokens, (0, 1));
        assert_eq!(c[1].tokens, (1, 4));
    }

    #[test]
    fn newline_is_a_boundary_and_empty_text_is_one_chunk() {
        let t = "first line words\nsecond line here";
        let o = toks(t);
        let c = chunks(t, &o, 5);
        assert_eq!(&t[c[0].start..c[0].end], "first line words");
        assert_eq!(chunks("", &[], 8).len(), 1);
    }
}

//! The embedding stage's engine: all-MiniLM-L6-v2 run in-process ([`model`], with
//! ONNX Runtime ([`onnx`]) or candle ([`candle`]) as its backend), sentence-boundary chunking ([`chunk`]), a logistic-regression head
//! on the embeddings ([`head`]) and the k nearest training examples as evidence
//! ([`index`]). Depends on `portcullis-core` only; the stage adapter lives in
//! `portcullis-detect` (`stages/embedding.rs`).
//!
//! Score of a text: it is tokenized once and cut into chunks on sentence
//! boundaries ([`chunk::chunks`]); each chunk is embedded and scored by the head;
//! the text's score is the **maximum** over its chunks' calibrated probabilities
//! (an instruction hidden in one part of a long text is not diluted by the rest),
//! and the chunk that reached it is the deciding chunk named in the record.

pub mod candle;
pub mod chunk;
pub mod error;
pub mod head;
pub mod index;
pub mod model;
pub mod onnx;

pub use error::{EmbedError, FETCH_COMMAND};
pub use head::{Head, HeadParams, HeadProvenance};
pub use index::{Index, Neighbour};
pub use model::{cosine, Backend, Embedder, DEFAULT_ONNXRUNTIME, DIM};
pub use onnx::ONNXRUNTIME_SHA256;
pub use portcullis_core::resolve_install_path;

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/embedded_head.rs"));

/// Default models directory (relative to the working directory, else to where
/// the executable is installed: [`portcullis_core::resolve_install_path`]).
pub const DEFAULT_MODELS_DIR: &str = "models/all-MiniLM-L6-v2";

/// Resolve a configured models directory (see [`portcullis_core::resolve_install_path`]).
pub fn resolve_models_dir(configured: &str) -> PathBuf {
    portcullis_core::resolve_install_path(configured)
}

/// How one chunk scored.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkScore {
    pub index: usize,
    /// Byte span of the chunk in the text.
    pub start: usize,
    pub end: usize,
    pub probability: f64,
}

/// How a text scored: the maximum over its chunks, the chunk that decided, and
/// the nearest training examples of that chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct TextScore {
    pub probability: f64,
    /// Chunks the text was cut into (scored or not).
    pub chunks: usize,
    /// Bytes of the text the model did not read: past the read limit, or in
    /// chunks not scored.
    pub unread_bytes: usize,
    pub deciding: ChunkScore,
    pub neighbours: Vec<Neighbour>,
}

/// Embedder + head + index: everything the stage needs, immutable once loaded.
#[derive(Debug)]
pub struct Classifier {
    embedder: Embedder,
    head: Head,
    index: Option<Index>,
    k: usize,
    window: usize,
    max_bytes: usize,
    max_chunks: usize,
}

/// Where a [`Classifier`] comes from.
#[derive(Debug, Clone)]
pub struct ClassifierSpec<'a> {
    pub models_dir: &'a Path,
    pub backend: &'a Backend,
    /// Head file; `None` = the head embedded at build time.
    pub head: Option<&'a Path>,
    /// Index file; `None` = the index embedded at build time.
    pub index: Option<&'a Path>,
    /// Neighbours reported (0 = none, and no index is loaded).
    pub k: usize,
    /// Content tokens per chunk (at most the model's 254).
    pub chunk_tokens: usize,
    /// Bytes of a text read at most (see [`read_parts`]).
    pub max_bytes: usize,
    /// Chunks of a text scored at most (0 = every chunk; see [`pick_chunks`]).
    pub max_chunks: usize,
}

impl Classifier {
    pub fn load(spec: &ClassifierSpec<'_>) -> Result<Classifier, EmbedError> {
        let embedder = Embedder::load(spec.models_dir, spec.backend)?;
        let head = match spec.head {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| EmbedError::Head {
                    path: p.display().to_string(),
                    message: e.to_string(),
                })?;
                Head::from_json(&text, &p.display().to_string())?
            }
            None => Head::from_json(
                EMBEDDED_HEAD.ok_or_else(|| EmbedError::Head {
                    path: "(embedded)".into(),
                    message: "this binary embeds no trained head; train one with \
                              `portcullis train-embedding` (see README) or set embedding.head"
                        .into(),
                })?,
                "(embedded)",
            )?,
        };
        let index = if spec.k == 0 {
            None
        } else {
            Some(match spec.index {
                Some(p) => {
                    let bytes = std::fs::read(p).map_err(|e| EmbedError::Index {
                        path: p.display().to_string(),
                        message: e.to_string(),
                    })?;
                    Index::decode(&bytes, &p.display().to_string())?
                }
                None => Index::decode(
                    EMBEDDED_INDEX.ok_or_else(|| EmbedError::Index {
                        path: "(embedded)".into(),
                        message: "this binary embeds no nearest-neighbour index; train one with \
                                  `portcullis train-embedding` or set embedding.k = 0"
                            .into(),
                    })?,
                    "(embedded)",
                )?,
            })
        };
        let max = embedder.max_seq_len().saturating_sub(2);
        if spec.chunk_tokens == 0 || spec.chunk_tokens > max {
            return Err(EmbedError::Load {
                dir: spec.models_dir.to_path_buf(),
                message: format!(
                    "embedding.chunk_tokens must be within 1..={max}, got {}",
                    spec.chunk_tokens
                ),
            });
        }
        Ok(Classifier {
            embedder,
            head,
            index,
            k: spec.k,
            window: spec.chunk_tokens,
            max_bytes: spec.max_bytes,
            max_chunks: spec.max_chunks,
        })
    }

    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    pub fn head(&self) -> &Head {
        &self.head
    }

    /// Chunks of a text and their model inputs (`[CLS] … [SEP]`).
    pub fn chunk_inputs(
        &self,
        text: &str,
    ) -> Result<(Vec<chunk::Chunk>, Vec<Vec<u32>>), EmbedError> {
        chunk_inputs(&self.embedder, text, self.window)
    }

    /// Score one text (see the crate docs for the chunk rule); of a text with more
    /// than `max_chunks` chunks, its first and last ones.
    pub fn score(&self, text: &str) -> Result<TextScore, EmbedError> {
        self.score_ranked(text, None)
    }

    /// Score one text; when it has more than `max_chunks` chunks, only those
    /// `rank` rates highest are scored (see [`pick_chunks`]).
    pub fn score_ranked(
        &self,
        text: &str,
        rank: Option<&dyn Fn(&str) -> f64>,
    ) -> Result<TextScore, EmbedError> {
        let parts = read_parts(text, self.max_bytes);
        let mut chunks = Vec::new();
        let mut seqs = Vec::new();
        for &(offset, part) in &parts {
            let (c, s) = self.chunk_inputs(part)?;
            chunks.extend(c.into_iter().map(|c| chunk::Chunk {
                start: c.start + offset,
                end: c.end + offset,
                ..c
            }));
            seqs.extend(s);
        }
        let picked = pick_chunks(text, &chunks, self.max_chunks, rank);
        let picked_bytes: usize = picked
            .iter()
            .map(|&i| chunks[i].end - chunks[i].start)
            .sum();
        let chunk_bytes: usize = chunks.iter().map(|c| c.end - c.start).sum();
        let unread_bytes = text.len() - parts.iter().map(|(_, p)| p.len()).sum::<usize>()
            + (chunk_bytes - picked_bytes);
        // `picked` is in text order: keep those sequences, moved, not copied.
        let mut next = picked.iter().peekable();
        let picked_seqs: Vec<Vec<u32>> = seqs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| next.next_if_eq(&i).is_some())
            .map(|(_, s)| s)
            .collect();
        let embs = self.embedder.embed_sequences(&picked_seqs)?;
        let mut best: Option<(usize, f64)> = None;
        for (j, e) in embs.iter().enumerate() {
            let p = self.head.probability(e);
            if best.is_none_or(|(_, b)| p > b) {
                best = Some((j, p));
            }
        }
        let (j, p) = best.ok_or_else(|| EmbedError::Inference("no chunk to score".into()))?;
        let i = picked[j];
        let neighbours = match &self.index {
            Some(idx) => idx.nearest(&embs[j], self.k),
            None => Vec::new(),
        };
        Ok(TextScore {
            probability: p,
            chunks: chunks.len(),
            unread_bytes,
            deciding: ChunkScore {
                index: i,
                start: chunks[i].start,
                end: chunks[i].end,
                probability: p,
            },
            neighbours,
        })
    }
}

/// Which chunks of a text the model scores, in text order: all of them when there
/// are at most `max` (or `max` is 0); else the `max` that `rank` rates highest
/// (ties to the earlier chunk), or without a ranker the first `max - max / 2` and
/// the last `max / 2`, as [`read_parts`] reads a long text's head and tail.
pub fn pick_chunks(
    text: &str,
    chunks: &[chunk::Chunk],
    max: usize,
    rank: Option<&dyn Fn(&str) -> f64>,
) -> Vec<usize> {
    let n = chunks.len();
    if max == 0 || n <= max {
        return (0..n).collect();
    }
    let mut picked: Vec<usize> = match rank {
        Some(rank) => {
            let scores: Vec<f64> = chunks
                .iter()
                .map(|c| rank(text.get(c.start..c.end).unwrap_or("")))
                .collect();
            let mut order: Vec<usize> = (0..n).collect();
            // Stable: equal scores keep text order. NaN ranks last.
            order.sort_by(|&a, &b| {
                let (x, y) = (scores[a], scores[b]);
                y.partial_cmp(&x)
                    .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
            });
            order.truncate(max);
            order
        }
        None => (0..max - max / 2).chain(n - max / 2..n).collect(),
    };
    picked.sort_unstable();
    picked
}

/// The parts of `text` the classifier reads, each with its byte offset: all of it
/// when it fits in `max_bytes`, else its first and last `max_bytes / 2` bytes (cut
/// at character boundaries), so a payload is read whether it leads or trails the
/// text. What lies between is left to the cheap stages, which read everything.
pub fn read_parts(text: &str, max_bytes: usize) -> Vec<(usize, &str)> {
    if text.len() <= max_bytes {
        return vec![(0, text)];
    }
    let half = max_bytes / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    vec![(0, &text[..head_end]), (tail_start, &text[tail_start..])]
}

/// Tokenize once, chunk on sentence boundaries, and build each chunk's input ids.
pub fn chunk_inputs(
    embedder: &Embedder,
    text: &str,
    window: usize,
) -> Result<(Vec<chunk::Chunk>, Vec<Vec<u32>>), EmbedError> {
    let tokens = embedder.tokenize(text)?;
    let chunks = chunk::chunks(text, &tokens.offsets, window);
    let seqs = chunks
        .iter()
        .map(|c| embedder.with_specials(&tokens.ids[c.tokens.0..c.tokens.1]))
        .collect();
    Ok((chunks, seqs))
}

#[cfg(test)]
mod tests {
    use super::{chunk::Chunk, pick_chunks, read_parts};
    use proptest::prelude::*;

    /// Ten chunks of "c0 ", "c1 ", ... (3 bytes each).
    fn ten() -> (String, Vec<Chunk>) {
        let text: String = (0..10).map(|i| format!("c{i} ")).collect();
        let chunks = (0..10)
            .map(|i| Chunk {
                tokens: (i, i + 1),
                start: 3 * i,
                end: 3 * i + 2,
            })
            .collect();
        (text, chunks)
    }

    #[test]
    fn every_chunk_is_picked_within_the_budget_or_without_one() {
        let (text, chunks) = ten();
        let all: Vec<usize> = (0..10).collect();
        assert_eq!(pick_chunks(&text, &chunks, 0, None), all);
        assert_eq!(pick_chunks(&text, &chunks, 10, None), all);
        assert_eq!(pick_chunks(&text, &chunks, 11, None), all);
    }

    #[test]
    fn the_ranker_picks_the_highest_rated_chunks_in_text_order() {
        let (text, chunks) = ten();
        // c7 highest, then c2; c4 and c5 tie (the earlier wins); NaN never picked.
        let rank = |c: &str| match c {
            "c7" => 9.0,
            "c2" => 5.0,
            "c4" | "c5" => 1.0,
            "c9" => f64::NAN,
            _ => 0.0,
        };
        assert_eq!(pick_chunks(&text, &chunks, 3, Some(&rank)), vec![2, 4, 7]);
        assert_eq!(pick_chunks(&text, &chunks, 1, Some(&rank)), vec![7]);
        let picked = pick_chunks(&text, &chunks, 9, Some(&rank));
        assert!(!picked.contains(&9), "{picked:?}");
    }

    #[test]
    fn without_a_ranker_the_head_and_tail_are_picked() {
        let (text, chunks) = ten();
        assert_eq!(pick_chunks(&text, &chunks, 3, None), vec![0, 1, 9]);
        assert_eq!(pick_chunks(&text, &chunks, 4, None), vec![0, 1, 8, 9]);
        assert_eq!(pick_chunks(&text, &chunks, 1, None), vec![0]);
    }

    proptest! {
        /// The parts are the text's own bytes at their offsets, on character
        /// boundaries, at most `max` bytes in all, and the whole text when it fits.
        #[test]
        fn read_parts_are_slices_of_the_text_within_the_limit(
            text in "(a|é|字|😀| |\n){0,400}",
            max in 4usize..600,
        ) {
            let parts = read_parts(&text, max);
            let total: usize = parts.iter().map(|(_, p)| p.len()).sum();
            prop_assert!(total <= max);
            if text.len() <= max {
                prop_assert_eq!(parts, vec![(0, text.as_str())]);
            } else {
                prop_assert_eq!(parts.len(), 2);
                prop_assert_eq!(parts[0].0, 0);
                for (at, p) in &parts {
                    prop_assert_eq!(text.get(*at..at + p.len()), Some(*p));
                }
                prop_assert!(parts[0].1.len() + 4 > max / 2);
                prop_assert!(parts[1].0 + parts[1].1.len() == text.len());
            }
        }
    }
}

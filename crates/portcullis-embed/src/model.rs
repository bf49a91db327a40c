//! all-MiniLM-L6-v2 in-process: the model's own WordPiece tokenizer, batching,
//! and a backend that computes the sentence-transformers pipeline of this model
//! (`modules.json`: Transformer, Pooling(mean), Normalize) on a batch of token
//! sequences: ONNX Runtime ([`crate::onnx`], the default) or candle
//! ([`crate::candle`]). A new backend is one file implementing [`Encoder`] and
//! one arm in [`Embedder::load`].

use crate::error::EmbedError;
use candle_transformers::models::bert::Config as BertConfig;
use portcullis_core::EmbeddingBackend;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// Embedding width of all-MiniLM-L6-v2.
pub const DIM: usize = 384;
/// Files every backend needs from the models directory.
pub const COMMON_FILES: &[&str] = &["tokenizer.json", "config.json", "sentence_bert_config.json"];
/// Most sequences one forward pass takes (sentence-transformers' default batch size).
pub const MAX_BATCH: usize = 32;
/// A batch pads every sequence to its longest; a sequence shorter than this share
/// of the longest starts a new batch, so padding wastes at most about a tenth of
/// the work (sentence-transformers pads a whole batch of 32 to its longest).
const MIN_FILL: f64 = 0.9;
/// Where `scripts/fetch-models.sh` installs the ONNX Runtime library.
pub const DEFAULT_ONNXRUNTIME: &str = "models/onnxruntime/libonnxruntime.so.1.22.1";

/// Fewest sequences a parallel worker is given (below that, one forward pass).
const MIN_PER_WORKER: usize = 4;

/// An embedding and the position of its sequence in the call.
type Indexed = (usize, Vec<f32>);

/// What runs the model: sentence embeddings (mean-pooled, L2-normalized) of a
/// batch of token sequences, each with its special tokens, padded to the longest.
/// [`Embedder`] never passes an empty batch or one whose sequences are all empty.
pub(crate) trait Encoder: Send + Sync {
    fn encode(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Whether several forward passes should run side by side on the cores
    /// (a backend that threads the whole pass itself says no).
    fn parallel_passes(&self) -> bool {
        false
    }
    /// Most padded tokens one forward pass takes (its activations grow with it).
    fn max_batch_tokens(&self) -> usize {
        usize::MAX
    }
}

/// A batch padded to its longest sequence, row-major: token ids (0 = `[PAD]`) and
/// the attention mask (1 = token, 0 = padding), in the backend's integer type.
pub(crate) struct Padded<T> {
    pub rows: usize,
    pub len: usize,
    pub ids: Vec<T>,
    pub mask: Vec<T>,
}

impl<T: From<u32> + Copy> Padded<T> {
    pub(crate) fn new(batch: &[&[u32]]) -> Padded<T> {
        let rows = batch.len();
        let len = batch.iter().map(|s| s.len()).max().unwrap_or(0);
        let (zero, one) = (T::from(0), T::from(1));
        let mut ids = vec![zero; rows * len];
        let mut mask = vec![zero; rows * len];
        for (r, s) in batch.iter().enumerate() {
            for (j, &t) in s.iter().enumerate() {
                ids[r * len + j] = T::from(t);
                mask[r * len + j] = one;
            }
        }
        Padded {
            rows,
            len,
            ids,
            mask,
        }
    }
}

/// Which backend runs the model, and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// ONNX Runtime, loaded from this library file, running `model.onnx`.
    Onnx { runtime: PathBuf },
    /// candle, running `model.safetensors`.
    Candle,
}

impl Backend {
    /// From the configuration's `embedding.backend` and `embedding.onnxruntime`
    /// (a relative path resolved as the models directory is).
    pub fn from_config(backend: EmbeddingBackend, onnxruntime: &str) -> Backend {
        match backend {
            EmbeddingBackend::Onnx => Backend::Onnx {
                runtime: portcullis_core::resolve_install_path(onnxruntime),
            },
            EmbeddingBackend::Candle => Backend::Candle,
        }
    }

    /// The default: ONNX Runtime from where fetch-models.sh installs it.
    pub fn default_onnx() -> Backend {
        Backend::from_config(EmbeddingBackend::Onnx, DEFAULT_ONNXRUNTIME)
    }

    /// The model file this backend reads from the models directory.
    pub fn model_file(&self) -> &'static str {
        match self {
            Backend::Onnx { .. } => crate::onnx::MODEL_FILE,
            Backend::Candle => crate::candle::MODEL_FILE,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Onnx { .. } => "onnx",
            Backend::Candle => "candle",
        }
    }
}

/// A loaded embedding model. Immutable after loading; `embed*` take `&self`.
pub struct Embedder {
    encoder: Box<dyn Encoder>,
    /// Which backend `encoder` is (for `Debug`).
    backend: Backend,
    tokenizer: Tokenizer,
    /// sentence-transformers' `max_seq_length`, special tokens included.
    max_seq_len: usize,
    cls: u32,
    sep: u32,
    dir: PathBuf,
    /// Forward passes run side by side (see [`Embedder::embed_sequences`]).
    workers: usize,
}

/// Threads the model may use: `RAYON_NUM_THREADS` when set (the benchmark sets
/// it), else the cores available.
fn thread_count() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("backend", &self.backend)
            .field("dir", &self.dir)
            .field("max_seq_len", &self.max_seq_len)
            .finish_non_exhaustive()
    }
}

/// One text, tokenized without special tokens: ids and byte offsets in the text.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub ids: Vec<u32>,
    pub offsets: Vec<(usize, usize)>,
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: usize,
}

impl Embedder {
    /// Load from a directory laid out as `scripts/fetch-models.sh` writes it.
    /// A missing file is [`EmbedError::MissingWeights`] (or
    /// [`EmbedError::MissingRuntime`]), whose message names the command that
    /// fetches them. There is no fallback from one backend to another.
    pub fn load(dir: &Path, backend: &Backend) -> Result<Embedder, EmbedError> {
        let missing: Vec<&str> = COMMON_FILES
            .iter()
            .copied()
            .chain([backend.model_file()])
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(EmbedError::MissingWeights {
                dir: dir.to_path_buf(),
                missing: missing.join(", "),
            });
        }
        let load_err = |message: String| EmbedError::Load {
            dir: dir.to_path_buf(),
            message,
        };
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name)).map_err(|e| load_err(format!("{name}: {e}")))
        };
        let config: BertConfig = serde_json::from_str(&read("config.json")?)
            .map_err(|e| load_err(format!("config.json: {e}")))?;
        let st: SentenceBertConfig = serde_json::from_str(&read("sentence_bert_config.json")?)
            .map_err(|e| load_err(format!("sentence_bert_config.json: {e}")))?;
        if config.hidden_size != DIM {
            return Err(load_err(format!(
                "hidden_size is {}, expected {DIM} (all-MiniLM-L6-v2)",
                config.hidden_size
            )));
        }
        let max_seq_len = st.max_seq_length.min(config.max_position_embeddings);
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        // The file carries a fixed 128-token padding and truncation; chunking and
        // batching are done here instead.
        tokenizer
            .with_truncation(None)
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        let id = |t: &str| {
            tokenizer
                .token_to_id(t)
                .ok_or_else(|| load_err(format!("tokenizer has no {t} token")))
        };
        let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
        let threads = thread_count();
        let encoder: Box<dyn Encoder> = match backend {
            Backend::Onnx { runtime } => {
                Box::new(crate::onnx::OnnxEncoder::load(dir, runtime, threads)?)
            }
            Backend::Candle => Box::new(crate::candle::CandleEncoder::load(dir, &config)?),
        };
        let workers = if encoder.parallel_passes() {
            threads
        } else {
            1
        };
        Ok(Embedder {
            encoder,
            backend: backend.clone(),
            tokenizer,
            max_seq_len,
            cls,
            sep,
            dir: dir.to_path_buf(),
            workers,
        })
    }

    /// Longest sequence the model takes, special tokens included (256).
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Tokenize without special tokens and without truncation.
    pub fn tokenize(&self, text: &str) -> Result<Tokens, EmbedError> {
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        Ok(Tokens {
            ids: enc.get_ids().to_vec(),
            offsets: enc.get_offsets().to_vec(),
        })
    }

    /// `[CLS] ids [SEP]`, the content truncated to fit `max_seq_len` (as
    /// sentence-transformers truncates).
    pub fn with_specials(&self, ids: &[u32]) -> Vec<u32> {
        let keep = ids.len().min(self.max_seq_len.saturating_sub(2));
        let mut v = Vec::with_capacity(keep + 2);
        v.push(self.cls);
        v.extend_from_slice(&ids[..keep]);
        v.push(self.sep);
        v
    }

    /// Sentence embeddings of whole texts, truncated to `max_seq_len` tokens:
    /// what `SentenceTransformer.encode(texts, normalize_embeddings=True)` returns.
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let seqs = texts
            .iter()
            .map(|t| self.tokenize(t).map(|tok| self.with_specials(&tok.ids)))
            .collect::<Result<Vec<_>, _>>()?;
        self.embed_sequences(&seqs)
    }

    /// Embeddings of token sequences (each with its special tokens). Sequences are
    /// sorted by length and batched (at most [`MAX_BATCH`] per forward pass), so
    /// that a batch pads to lengths that differ little; results come back in input
    /// order.
    ///
    /// For a backend that asks for it (candle), with several cores and enough
    /// sequences, the sorted sequences are dealt round-robin to one worker per
    /// core (each gets the same mix of lengths) and the workers run their forward
    /// passes side by side.
    pub fn embed_sequences(&self, seqs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(seqs[i].len()));
        let workers = self.workers.min(seqs.len() / MIN_PER_WORKER).max(1);
        let shares: Vec<Vec<usize>> = (0..workers)
            .map(|w| order.iter().skip(w).step_by(workers).copied().collect())
            .collect();
        let run = |share: &[usize]| -> Result<Vec<Indexed>, EmbedError> {
            let mut done = Vec::with_capacity(share.len());
            for group in batches(share, |i| seqs[i].len(), self.encoder.max_batch_tokens()) {
                let batch: Vec<&[u32]> = group.iter().map(|&i| seqs[i].as_slice()).collect();
                let embs = if batch.iter().all(|s| s.is_empty()) {
                    vec![vec![0.0; DIM]; batch.len()]
                } else {
                    self.encoder.encode(&batch)?
                };
                done.extend(group.iter().copied().zip(embs));
            }
            Ok(done)
        };
        let results: Vec<Result<Vec<Indexed>, EmbedError>> = if workers == 1 {
            vec![run(&order)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = shares
                    .iter()
                    .map(|share| scope.spawn(|| run(share)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(EmbedError::Inference("an embedding worker panicked".into()))
                        })
                    })
                    .collect()
            })
        };
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); seqs.len()];
        for r in results {
            for (i, e) in r? {
                out[i] = e;
            }
        }
        Ok(out)
    }
}

/// Cut a list of sequence indices, sorted longest first, into forward passes: at
/// most [`MAX_BATCH`] sequences and `max_tokens` padded tokens each, and a new pass
/// where a sequence is shorter than [`MIN_FILL`] of its pass's longest.
fn batches(sorted: &[usize], len: impl Fn(usize) -> usize, max_tokens: usize) -> Vec<&[usize]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (k, &i) in sorted.iter().enumerate() {
        let longest = len(sorted[start]);
        let n = k - start;
        if n > 0
            && (n == MAX_BATCH
                || (len(i) as f64) < MIN_FILL * longest as f64
                || (n + 1) * longest > max_tokens)
        {
            out.push(&sorted[start..k]);
            start = k;
        }
    }
    if start < sorted.len() {
        out.push(&sorted[start..]);
    }
    out
}

/// Cosine similarity of two vectors (not assumed normalized).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut ab, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    ab / (aa.sqrt() * bb.sqrt()).max(1e-12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cap_padding_and_size() {
        // Lengths sorted longest first.
        let lens = [100, 95, 91, 89, 50, 50, 49, 10];
        let idx: Vec<usize> = (0..lens.len()).collect();
        let got: Vec<Vec<usize>> = batches(&idx, |i| lens[i], usize::MAX)
            .into_iter()
            .map(<[usize]>::to_vec)
            .collect();
        assert_eq!(got, vec![vec![0, 1, 2], vec![3], vec![4, 5, 6], vec![7]]);
        // Equal lengths fill batches of MAX_BATCH, or of the token budget.
        let idx: Vec<usize> = (0..70).collect();
        let sizes: Vec<usize> = batches(&idx, |_| 128, usize::MAX)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, vec![MAX_BATCH, MAX_BATCH, 6]);
        let sizes: Vec<usize> = batches(&idx[..10], |_| 128, 512)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, vec![4, 4, 2]);
        // A sequence longer than the budget still gets a pass of its own.
        assert_eq!(batches(&[0, 1], |_| 256, 200).len(), 2);
        assert!(batches(&[], |_| 1, 512).is_empty());
        // Every index appears once, in order.
        let lens: Vec<usize> = (0..200).map(|i| 300 - i).collect();
        let idx: Vec<usize> = (0..200).collect();
        let flat: Vec<usize> = batches(&idx, |i| lens[i], 1024).concat();
        assert_eq!(flat, idx);
    }
}

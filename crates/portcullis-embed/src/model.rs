//! all-MiniLM-L6-v2 in-process: the BERT encoder of candle over mmap'd safetensors,
//! the model's own WordPiece tokenizer, mean pooling over the attention mask and L2
//! normalization — the three modules of the sentence-transformers pipeline
//! (`modules.json`: Transformer, Pooling(mean), Normalize).

use crate::error::EmbedError;
use candle_core::{DType, Device, Tensor, D};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// Embedding width of all-MiniLM-L6-v2.
pub const DIM: usize = 384;
/// Files the stage needs from the models directory.
pub const REQUIRED_FILES: &[&str] = &[
    "model.safetensors",
    "tokenizer.json",
    "config.json",
    "sentence_bert_config.json",
];
/// Most sequences one forward pass takes (sentence-transformers' default batch size).
pub const MAX_BATCH: usize = 32;

/// Fewest sequences a parallel worker is given (below that, one forward pass).
const MIN_PER_WORKER: usize = 4;

/// An embedding and the position of its sequence in the call.
type Indexed = (usize, Vec<f32>);

/// A loaded embedding model. Immutable after loading; `embed*` take `&self`.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    /// sentence-transformers' `max_seq_length`, special tokens included.
    max_seq_len: usize,
    cls: u32,
    sep: u32,
    device: Device,
    dir: PathBuf,
    /// Forward passes run side by side (see [`Embedder::embed_sequences`]).
    workers: usize,
}

/// One worker per core candle may use: `RAYON_NUM_THREADS` when set (the
/// benchmark sets it), else the cores available.
fn worker_count() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
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
    /// A missing file is [`EmbedError::MissingWeights`], whose message names the
    /// command that fetches them.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        let missing: Vec<&str> = REQUIRED_FILES
            .iter()
            .copied()
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
        let device = Device::Cpu;
        let weights = dir.join("model.safetensors");
        // SAFETY: the file is memory-mapped read-only; the models directory is not
        // modified while the process runs (fetch-models.sh writes it beforehand).
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        Ok(Embedder {
            model,
            tokenizer,
            max_seq_len,
            cls,
            sep,
            device,
            dir: dir.to_path_buf(),
            workers: worker_count(),
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
    /// With several cores and enough sequences, the sorted sequences are dealt
    /// round-robin to one worker per core (each gets the same mix of lengths) and
    /// the workers run their forward passes side by side: candle parallelizes its
    /// matrix products but not the element-wise work (GELU, softmax, layer norm)
    /// that a big batch spends much of its time in.
    pub fn embed_sequences(&self, seqs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(seqs[i].len()));
        let workers = self.workers.min(seqs.len() / MIN_PER_WORKER).max(1);
        let shares: Vec<Vec<usize>> = (0..workers)
            .map(|w| order.iter().skip(w).step_by(workers).copied().collect())
            .collect();
        let run = |share: &[usize]| -> Result<Vec<Indexed>, EmbedError> {
            let mut done = Vec::with_capacity(share.len());
            for group in share.chunks(MAX_BATCH) {
                let batch: Vec<&[u32]> = group.iter().map(|&i| seqs[i].as_slice()).collect();
                let embs = self.forward_batch(&batch)?;
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

    fn forward_batch(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let b = batch.len();
        let len = batch.iter().map(|s| s.len()).max().unwrap_or(0);
        if b == 0 || len == 0 {
            return Ok(vec![vec![0.0; DIM]; b]);
        }
        let mut ids = vec![0u32; b * len];
        let mut mask = vec![0u32; b * len];
        for (r, s) in batch.iter().enumerate() {
            ids[r * len..r * len + s.len()].copy_from_slice(s);
            mask[r * len..r * len + s.len()].fill(1);
        }
        let uniform = batch.iter().all(|s| s.len() == len);
        let ids = Tensor::from_vec(ids, (b, len), &self.device)?;
        let types = ids.zeros_like()?;
        let mask = Tensor::from_vec(mask, (b, len), &self.device)?;
        // With no padding the mask is all ones: skip it (same result, less work).
        let hidden = self
            .model
            .forward(&ids, &types, if uniform { None } else { Some(&mask) })?;
        // Mean pooling over real tokens, then L2 normalization.
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean
            .sqr()?
            .sum_keepdim(D::Minus1)?
            .sqrt()?
            .clamp(1e-12, f64::MAX)?;
        let normed = mean.broadcast_div(&norm)?;
        Ok(normed.to_vec2::<f32>()?)
    }
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

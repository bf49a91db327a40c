//! The candle backend: candle's BERT over the mmap'd `model.safetensors`, with
//! mean pooling over the attention mask and L2 normalization. Portable (pure Rust,
//! no runtime library), and the reference the ONNX graph was checked against; on
//! two cores it is slower than the ONNX Runtime backend (`reports/embedding-bench.md`).

use crate::error::EmbedError;
use crate::model::{Encoder, Padded};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use std::path::Path;

/// The weights file in the models directory.
pub const MODEL_FILE: &str = "model.safetensors";

pub(crate) struct CandleEncoder {
    model: BertModel,
    device: Device,
}

impl std::fmt::Debug for CandleEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleEncoder").finish_non_exhaustive()
    }
}

impl From<candle_core::Error> for EmbedError {
    fn from(e: candle_core::Error) -> Self {
        EmbedError::Inference(e.to_string())
    }
}

impl CandleEncoder {
    pub(crate) fn load(dir: &Path, config: &BertConfig) -> Result<CandleEncoder, EmbedError> {
        let device = Device::Cpu;
        let weights = dir.join(MODEL_FILE);
        let load_err = |e: candle_core::Error| EmbedError::Load {
            dir: dir.to_path_buf(),
            message: format!("{MODEL_FILE}: {e}"),
        };
        // SAFETY: the file is memory-mapped read-only; the models directory is not
        // modified while the process runs (fetch-models.sh writes it beforehand).
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(load_err)?;
        let model = BertModel::load(vb, config).map_err(load_err)?;
        Ok(CandleEncoder { model, device })
    }
}

impl Encoder for CandleEncoder {
    fn encode(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let p = Padded::<u32>::new(batch);
        let (b, len) = (p.rows, p.len);
        let uniform = batch.iter().all(|s| s.len() == len);
        let ids = Tensor::from_vec(p.ids, (b, len), &self.device)?;
        let types = ids.zeros_like()?;
        let mask = Tensor::from_vec(p.mask, (b, len), &self.device)?;
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

    /// candle threads its matrix products but not the element-wise work (GELU,
    /// softmax, layer norm) that a big batch spends much of its time in, so
    /// several forward passes side by side help (about +10% on batches).
    fn parallel_passes(&self) -> bool {
        true
    }
}

//! The nearest-neighbour index: the training examples' embeddings, int8-quantized
//! (each unit-norm component times 127, rounded), with their record ids and labels.
//! Used only for evidence in the decision record, never for the score.
//!
//! File layout (little endian): `PCKNN1\n\0`, u32 count, u32 dim, then per entry
//! u16 id length, the id bytes, u8 label (1 = malicious), then count × dim i8.

use crate::error::EmbedError;
use crate::model::DIM;

const MAGIC: &[u8; 8] = b"PCKNN1\n\0";

/// One neighbour of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbour {
    pub id: String,
    pub malicious: bool,
    pub similarity: f32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    ids: Vec<String>,
    labels: Vec<bool>,
    /// Dequantized, re-normalized vectors (count × DIM).
    vecs: Vec<f32>,
}

fn quantize(x: f32) -> i8 {
    (x * 127.0).round().clamp(-127.0, 127.0) as i8
}

impl Index {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Serialize `(id, malicious, embedding)` entries.
    pub fn encode(entries: &[(String, bool, Vec<f32>)]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + entries.len() * (DIM + 24));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        out.extend_from_slice(&(DIM as u32).to_le_bytes());
        for (id, y, _) in entries {
            let bytes = id.as_bytes();
            let len = bytes.len().min(u16::MAX as usize);
            out.extend_from_slice(&(len as u16).to_le_bytes());
            out.extend_from_slice(&bytes[..len]);
            out.push(u8::from(*y));
        }
        for (_, _, v) in entries {
            out.extend((0..DIM).map(|i| quantize(v.get(i).copied().unwrap_or(0.0)) as u8));
        }
        out
    }

    pub fn decode(bytes: &[u8], origin: &str) -> Result<Index, EmbedError> {
        let err = |m: &str| EmbedError::Index {
            path: origin.to_string(),
            message: m.to_string(),
        };
        let mut pos = 0usize;
        let mut take = |n: usize| -> Result<&[u8], EmbedError> {
            let s = bytes
                .get(pos..pos + n)
                .ok_or_else(|| err("truncated file"))?;
            pos += n;
            Ok(s)
        };
        if take(8)? != MAGIC {
            return Err(err("not a portcullis kNN index (bad magic)"));
        }
        let u32_at = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize;
        let count = u32_at(take(4)?);
        let dim = u32_at(take(4)?);
        if dim != DIM {
            return Err(err(&format!("dimension {dim}, expected {DIM}")));
        }
        let mut ids = Vec::with_capacity(count);
        let mut labels = Vec::with_capacity(count);
        for _ in 0..count {
            let l = take(2)?;
            let len = u16::from_le_bytes([l[0], l[1]]) as usize;
            let id = String::from_utf8(take(len)?.to_vec()).map_err(|_| err("id is not UTF-8"))?;
            ids.push(id);
            labels.push(take(1)?[0] == 1);
        }
        let raw = take(count * DIM)?;
        let mut vecs = Vec::with_capacity(count * DIM);
        for row in raw.chunks_exact(DIM) {
            let v: Vec<f32> = row.iter().map(|&b| b as i8 as f32 / 127.0).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            vecs.extend(v.iter().map(|x| x / norm));
        }
        Ok(Index { ids, labels, vecs })
    }

    /// The `k` most similar entries to a unit-norm query, most similar first
    /// (ties broken by position, so the result is deterministic).
    pub fn nearest(&self, query: &[f32], k: usize) -> Vec<Neighbour> {
        let mut sims: Vec<(f32, usize)> = self
            .vecs
            .chunks_exact(DIM)
            .enumerate()
            .map(|(i, v)| (v.iter().zip(query).map(|(a, b)| a * b).sum::<f32>(), i))
            .collect();
        sims.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        sims.into_iter()
            .take(k)
            .map(|(s, i)| Neighbour {
                id: self.ids[i].clone(),
                malicious: self.labels[i],
                similarity: s,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; DIM];
        v[i] = 1.0;
        v
    }

    #[test]
    fn round_trip_and_nearest() {
        let entries = vec![
            ("a".to_string(), true, unit(0)),
            ("b".to_string(), false, unit(1)),
            ("c".to_string(), false, {
                let mut v = unit(0);
                v[1] = 1.0;
                let n = 2f32.sqrt();
                v.iter().map(|x| x / n).collect()
            }),
        ];
        let bytes = Index::encode(&entries);
        let idx = Index::decode(&bytes, "t").expect("decodes");
        assert_eq!(idx.len(), 3);
        let nn = idx.nearest(&unit(0), 2);
        assert_eq!(nn[0].id, "a");
        assert!(nn[0].malicious);
        assert!((nn[0].similarity - 1.0).abs() < 1e-3);
        assert_eq!(nn[1].id, "c");
        assert!(Index::decode(&bytes[..bytes.len() - 1], "t").is_err());
        assert!(Index::decode(b"nonsense", "t").is_err());
    }
}

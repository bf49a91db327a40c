//! Training the embedding stage's head on the train split and calibrating it
//! (Platt) on the dev split; the nearest-neighbour index holds the train split's
//! chunk embeddings. Test and rules-blind records are never read.

use crate::corpus::{Label, Record, Split};
use portcullis_embed::head::{Head, HeadParams, HeadProvenance};
use portcullis_embed::{chunk_inputs, EmbedError, Embedder, Index};

/// A trained head and the serialized index.
pub struct Trained {
    pub head: Head,
    pub index: Vec<u8>,
}

/// A record id, its label (malicious?) and one embedding per chunk.
pub type Embedded = (String, bool, Vec<Vec<f32>>);

/// The text records of a split, each cut into chunks and embedded. Whole tool definitions are not examples (as for the
/// lexical model: their one label does not say which field is poisoned).
pub fn embed_split(
    embedder: &Embedder,
    records: &[Record],
    split: Split,
    window: usize,
) -> Result<Vec<Embedded>, EmbedError> {
    let texts: Vec<&Record> = records
        .iter()
        .filter(|r| r.split == Some(split) && r.text.is_some())
        .collect();
    let mut seqs = Vec::new();
    let mut owner = Vec::new();
    for (i, r) in texts.iter().enumerate() {
        let (_, s) = chunk_inputs(embedder, r.text.as_deref().unwrap_or(""), window)?;
        owner.extend(std::iter::repeat_n(i, s.len()));
        seqs.extend(s);
    }
    let embs = embedder.embed_sequences(&seqs)?;
    let mut out: Vec<Embedded> = texts
        .iter()
        .map(|r| (r.id.clone(), r.label == Label::Malicious, Vec::new()))
        .collect();
    for (i, e) in owner.into_iter().zip(embs) {
        out[i].2.push(e);
    }
    Ok(out)
}

/// Platt-calibrate `head` on the embedded dev texts; a text's margin is its
/// highest chunk margin, as at inference.
fn calibrate_on(head: &mut Head, dev: &[Embedded]) {
    let margins: Vec<(f64, bool)> = dev
        .iter()
        .map(|(_, y, es)| {
            let m = es
                .iter()
                .map(|e| head.margin(e))
                .fold(f64::NEG_INFINITY, f64::max);
            (m, *y)
        })
        .collect();
    head.calibrate(&margins);
    head.provenance.calibration_split = Split::Dev.as_str().into();
    head.provenance.calibration_records = dev.len();
}

/// A head trained elsewhere (a fine-tuned model's own linear layer,
/// `scripts/transformer/finetune.py`): its weights are kept and only its Platt
/// scaling is fitted, on the dev split, with the stage's own chunking.
pub fn calibrate_head(
    embedder: &Embedder,
    records: &[Record],
    mut head: Head,
) -> Result<Head, EmbedError> {
    let dev = embed_split(embedder, records, Split::Dev, head.window)?;
    calibrate_on(&mut head, &dev);
    Ok(head)
}

pub fn train_embedding(
    embedder: &Embedder,
    records: &[Record],
    corpus_sha256: &str,
    model_sha256: &str,
    params: &HeadParams,
    window: usize,
) -> Result<Trained, EmbedError> {
    let train = embed_split(embedder, records, Split::Train, window)?;
    let dev = embed_split(embedder, records, Split::Dev, window)?;
    // Every chunk of a training text is an example with the text's label.
    let examples: Vec<(Vec<f32>, bool)> = train
        .iter()
        .flat_map(|(_, y, es)| es.iter().map(move |e| (e.clone(), *y)))
        .collect();
    let provenance = HeadProvenance {
        corpus_sha256: corpus_sha256.to_string(),
        model_sha256: model_sha256.to_string(),
        train_split: Split::Train.as_str().into(),
        train_records: train.len(),
        train_chunks: examples.len(),
        calibration_split: Split::Dev.as_str().into(),
        calibration_records: dev.len(),
    };
    let mut head = Head::train(&examples, params, window, provenance);
    calibrate_on(&mut head, &dev);
    let entries: Vec<(String, bool, Vec<f32>)> = train
        .into_iter()
        .flat_map(|(id, y, es)| {
            let n = es.len();
            es.into_iter().enumerate().map(move |(i, e)| {
                let id = if n == 1 {
                    id.clone()
                } else {
                    format!("{id}#{i}")
                };
                (id, y, e)
            })
        })
        .collect();
    Ok(Trained {
        head,
        index: Index::encode(&entries),
    })
}

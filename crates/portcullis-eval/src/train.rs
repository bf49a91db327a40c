//! Training the lexical model on the train split and calibrating its probability
//! (Platt scaling) on the dev split. Test and rules-blind records are never read.

use crate::corpus::{Label, Record, Split};
use portcullis_core::{Channel, NormalizeConfig};
use portcullis_detect::kind_and_target;
use portcullis_detect::lexical::{LexicalModel, Provenance, TrainParams};
use portcullis_detect::normalize::normalize;

/// Distinct normalized views of a text, as the lexical stage sees them.
pub fn views_of(text: &str, channel: Channel) -> Vec<String> {
    let (kind, _) = kind_and_target(channel, false);
    normalize(text, kind, &NormalizeConfig::default())
        .views
        .into_iter()
        .map(|v| v.text)
        .collect()
}

/// The training examples of a split, as the lexical stage sees them at
/// inference: a text record is one example; a tool definition, which is scored
/// field by field, gives the fields whose label is known — every field of a
/// benign definition, and the description of a definition poisoned there. (A
/// definition poisoned in its name or a nested schema field says which kind of
/// field, not which one, so it gives none.) Fields of fewer than three words
/// (names, property keys, enum values) are left out: they are many, carry little
/// wording, and would outweigh the texts.
pub fn examples(records: &[Record], split: Split) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    for r in records.iter().filter(|r| r.split == Some(split)) {
        let malicious = r.label == Label::Malicious;
        match (&r.text, &r.tool) {
            (Some(t), _) => out.push((views_of(t, r.channel), malicious)),
            (None, Some(tool)) => {
                let known = |path: Option<&str>| {
                    !malicious
                        || (r.poison_location.as_deref() == Some("description")
                            && path == Some("$.description"))
                };
                let Ok(extracted) = portcullis_detect::extract::tool_items(tool, None) else {
                    continue;
                };
                for item in extracted.items {
                    if item.text.split_whitespace().count() < 3 || !known(item.path.as_deref()) {
                        continue;
                    }
                    let (kind, _) = kind_and_target(item.channel, item.is_key);
                    let views = normalize(&item.text, kind, &NormalizeConfig::default())
                        .views
                        .into_iter()
                        .map(|v| v.text)
                        .collect();
                    out.push((views, malicious));
                }
            }
            (None, None) => {}
        }
    }
    out
}

pub fn train_lexical(
    records: &[Record],
    corpus_sha256: &str,
    params: &TrainParams,
) -> LexicalModel {
    let train = examples(records, Split::Train);
    let dev = examples(records, Split::Dev);
    let provenance = Provenance {
        corpus_sha256: corpus_sha256.to_string(),
        train_split: Split::Train.as_str().into(),
        train_records: train.len(),
        calibration_split: Split::Dev.as_str().into(),
        calibration_records: dev.len(),
    };
    let mut model = LexicalModel::train(&train, params, provenance);
    let margins: Vec<(f64, bool)> = dev
        .iter()
        .map(|(views, y)| {
            let v: Vec<&str> = views.iter().map(String::as_str).collect();
            (model.margin(&v), *y)
        })
        .collect();
    model.calibrate(&margins);
    model
}

/// Whether any rule fires on a record (tool definitions: on any of their fields).
pub fn fires_any_rule(rules: &portcullis_detect::rules::RuleSet, r: &Record) -> bool {
    let fires = |text: &str, channel: Channel, is_key: bool| {
        let (kind, target) = kind_and_target(channel, is_key);
        let n = normalize(text, kind, &NormalizeConfig::default());
        !rules.scan(&n.views, target).is_empty()
    };
    match (&r.text, &r.tool) {
        (Some(t), _) => fires(t, r.channel, false),
        (None, Some(tool)) => portcullis_detect::extract::tool_items(tool, None)
            .map(|e| e.items.iter().any(|i| fires(&i.text, i.channel, i.is_key)))
            .unwrap_or(false),
        (None, None) => false,
    }
}

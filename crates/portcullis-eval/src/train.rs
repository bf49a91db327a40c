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

/// Text records of a split (whole tool definitions are scored field by field at
/// inference; their single label does not say which field is poisoned, so they are
/// not training examples).
pub fn examples(records: &[Record], split: Split) -> Vec<(Vec<String>, bool)> {
    records
        .iter()
        .filter(|r| r.split == Some(split))
        .filter_map(|r| {
            r.text
                .as_deref()
                .map(|t| (views_of(t, r.channel), r.label == Label::Malicious))
        })
        .collect()
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

//! Training the lexical model on the train split and calibrating its probability
//! (Platt scaling) on the dev split. Test and rules-blind records are never read.

use crate::corpus::{Label, Record, Split};
use portcullis_core::{Channel, NormalizeConfig};
use portcullis_detect::lexical::{LexicalModel, Provenance, TrainParams};
use portcullis_detect::normalize::{normalize, TextKind};

/// Distinct normalized views of a text, as the lexical stage sees them.
pub fn views_of(text: &str, channel: Channel) -> Vec<String> {
    let kind = if channel == Channel::ToolName {
        TextKind::Identifier
    } else {
        TextKind::Prose
    };
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
    use portcullis_detect::rules::Target;
    match (&r.text, &r.tool) {
        (Some(t), _) => {
            let kind = if r.channel == Channel::ToolName {
                TextKind::Identifier
            } else {
                TextKind::Prose
            };
            let target = if r.channel == Channel::ToolName {
                Target::ToolName
            } else {
                Target::Text
            };
            let n = normalize(t, kind, &NormalizeConfig::default());
            !rules.scan(&n.views, target).is_empty()
        }
        (None, Some(tool)) => portcullis_detect::extract::tool_items(tool, None)
            .map(|e| {
                e.items.iter().any(|i| {
                    let (kind, target) = if i.is_key {
                        (TextKind::Identifier, Target::PropertyName)
                    } else if i.channel == Channel::ToolName {
                        (TextKind::Identifier, Target::ToolName)
                    } else {
                        (TextKind::Prose, Target::Text)
                    };
                    let n = normalize(&i.text, kind, &NormalizeConfig::default());
                    !rules.scan(&n.views, target).is_empty()
                })
            })
            .unwrap_or(false),
        (None, None) => false,
    }
}

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
    examples_by_channel(records, split)
        .into_iter()
        .map(|(_, views, y)| (views, y))
        .collect()
}

/// [`examples`] with the channel the lexical stage sees each one on (a tool
/// definition's fields: `tool_description`, `tool_schema`, `tool_name`).
pub fn examples_by_channel(records: &[Record], split: Split) -> Vec<(Channel, Vec<String>, bool)> {
    let mut out = Vec::new();
    for r in records.iter().filter(|r| r.split == Some(split)) {
        let malicious = r.label == Label::Malicious;
        match (&r.text, &r.tool) {
            (Some(t), _) => out.push((r.channel, views_of(t, r.channel), malicious)),
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
                    // Every field of a benign tool is benign, short keys and terse
                    // descriptions too: the stage scores them all, so it learns them.
                    // Fields of fewer than three words are not trained on: measured on
                    // the full corpus's dev split, adding them (117,000 benign keys and
                    // terse descriptions) lowered the ROC AUC from 0.905 to 0.868.
                    if item.text.split_whitespace().count() < 3 || !known(item.path.as_deref()) {
                        continue;
                    }
                    let (kind, _) = kind_and_target(item.channel, item.is_key);
                    let views = normalize(&item.text, kind, &NormalizeConfig::default())
                        .views
                        .into_iter()
                        .map(|v| v.text)
                        .collect();
                    out.push((item.channel, views, malicious));
                }
            }
            (None, None) => {}
        }
    }
    out
}

/// A channel gets a calibration of its own when its dev examples number at least
/// this many of each class; the others use the global one.
pub const CHANNEL_CALIBRATION_BENIGN: usize = 300;
pub const CHANNEL_CALIBRATION_MALICIOUS: usize = 30;

/// Train on the train split and calibrate on the dev split: globally, and per
/// channel where a channel has enough dev examples (`probability_on`).
pub fn train_lexical(
    records: &[Record],
    corpus_sha256: &str,
    params: &TrainParams,
) -> LexicalModel {
    let train = examples(records, Split::Train);
    let dev = examples_by_channel(records, Split::Dev);
    let provenance = Provenance {
        corpus_sha256: corpus_sha256.to_string(),
        train_split: Split::Train.as_str().into(),
        train_records: train.len(),
        calibration_split: Split::Dev.as_str().into(),
        calibration_records: dev.len(),
    };
    let mut model = LexicalModel::train(&train, params, provenance);
    let margins: Vec<(Channel, f64, bool)> = dev
        .iter()
        .map(|(channel, views, y)| {
            let v: Vec<&str> = views.iter().map(String::as_str).collect();
            (*channel, model.window_margin(&v), *y)
        })
        .collect();
    let all: Vec<(f64, bool)> = margins.iter().map(|m| (m.1, m.2)).collect();
    model.calibrate(&all);
    for channel in Channel::ALL {
        let own: Vec<(f64, bool)> = margins
            .iter()
            .filter(|m| m.0 == channel)
            .map(|m| (m.1, m.2))
            .collect();
        let malicious = own.iter().filter(|m| m.1).count();
        if own.len() - malicious >= CHANNEL_CALIBRATION_BENIGN
            && malicious >= CHANNEL_CALIBRATION_MALICIOUS
        {
            model.calibrate_channel(channel.as_str(), &own);
        }
    }
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

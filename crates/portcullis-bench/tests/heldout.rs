//! The held-out payload registers fire no detection rule, in every place a payload
//! sits (a description, a result, a nested title or enum value, a property name):
//! they were written without the rules' vocabulary, and this keeps it so. The seen
//! registers are the near-circular contrast; how many of their texts the rules
//! catch is printed, not asserted (nothing was tuned on them); the two splits share
//! no sentence.

use portcullis_bench::attack::{AttackSpec, Instance, TYPES};
use portcullis_bench::operands::Operands;
use portcullis_bench::payloads::{self, PayloadRef, Split};
use portcullis_core::{Channel, Item};
use portcullis_detect::{Detector, RecordMeta, STAGE_RULES};

/// Every text a payload of `split` can put in front of the agent, with its channel
/// and whether it is a property name.
fn texts(split: Split) -> Vec<(String, Channel, bool, String)> {
    let mut out = Vec::new();
    for reg in payloads::registers(split) {
        for ty in TYPES {
            for &vector in ty.vectors {
                for goal in ty.goals() {
                    let label = format!(
                        "{} {} {} {}",
                        reg.id(),
                        ty.code,
                        vector.as_str(),
                        goal.as_str()
                    );
                    let spec = AttackSpec {
                        kind: ty.code.into(),
                        vector,
                        goal,
                        payload: if ty.has_text() {
                            reg.clone()
                        } else {
                            PayloadRef::none()
                        },
                        target: "read_note".into(),
                        slot: 0,
                        // Values drawn per text: names, paths and sinks vary.
                        operands: Operands::draw(1, &label, "read_note"),
                        external: None,
                    };
                    let i = Instance::new(spec).expect("valid attack");
                    for t in [i.definition_text(), i.promotion_text()]
                        .into_iter()
                        .flatten()
                    {
                        out.push((t.clone(), Channel::ToolDescription, false, label.clone()));
                        let flat = t.split_whitespace().collect::<Vec<_>>().join(" ");
                        out.push((flat.clone(), Channel::ToolDefinition, false, label.clone()));
                        out.push((flat, Channel::ToolDefinition, true, label.clone()));
                    }
                    if let Some(t) = i.result_text() {
                        out.push((t, Channel::ToolResult, false, label.clone()));
                    }
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(t, ch, key, _)| seen.insert(format!("{t}\u{0}{ch:?}\u{0}{key}")));
    out
}

fn rule_findings(d: &Detector, text: &str, channel: Channel, is_key: bool) -> Vec<String> {
    let mut item = Item::new(channel, text);
    item.is_key = is_key;
    let rec = d
        .inspect(
            &item,
            RecordMeta {
                id: "t".into(),
                position: 0,
            },
        )
        .record;
    rec.stages
        .iter()
        .filter(|s| s.name == STAGE_RULES)
        .flat_map(|s| s.findings.iter().map(|f| f.rule.clone()))
        .collect()
}

#[test]
fn no_heldout_payload_fires_any_rule() {
    let d = Detector::with_defaults().expect("detector");
    let all = texts(Split::Heldout);
    assert!(all.len() > 100, "{} held-out texts", all.len());
    let firing: Vec<String> = all
        .iter()
        .filter_map(|(t, ch, key, label)| {
            let f = rule_findings(&d, t, *ch, *key);
            (!f.is_empty()).then(|| {
                format!(
                    "{label} [{ch:?}{}]: {f:?}: {t:?}",
                    if *key { " key" } else { "" }
                )
            })
        })
        .collect();
    assert!(
        firing.is_empty(),
        "{} held-out texts fire rules:\n{}",
        firing.len(),
        firing.join("\n")
    );
}

#[test]
fn held_out_payloads_share_no_sentence_with_the_seen_ones() {
    // The held-out registers are a lineage of their own: a sentence of a seen
    // register reappearing in a held-out one would make the held-out figures a
    // measure of the seen payloads.
    let sentences = |split: Split| -> std::collections::HashSet<String> {
        texts(split)
            .iter()
            .flat_map(|(t, _, _, _)| {
                t.split(['.', '!', '?', '\n'])
                    .map(|s| {
                        s.split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" ")
                            .to_lowercase()
                    })
                    .filter(|s| s.split(' ').count() >= 6)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let seen = sentences(Split::Seen);
    let heldout = sentences(Split::Heldout);
    assert!(
        seen.len() > 20 && heldout.len() > 20,
        "{} / {}",
        seen.len(),
        heldout.len()
    );
    let shared: Vec<&String> = heldout.intersection(&seen).collect();
    assert!(shared.is_empty(), "sentences in both splits: {shared:#?}");
    // Printed, not asserted: the seen registers are the near-circular contrast.
    let d = Detector::with_defaults().expect("detector");
    let all = texts(Split::Seen);
    let firing = all
        .iter()
        .filter(|(t, ch, key, _)| !rule_findings(&d, t, *ch, *key).is_empty())
        .count();
    println!("seen payload texts firing a rule: {firing}/{}", all.len());
}

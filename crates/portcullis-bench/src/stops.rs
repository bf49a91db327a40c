//! What stopped each defended trial, read from its trace by the report: the first
//! refusal of the gateway (the first decision record whose action withheld
//! something: `hold` or `deny`, or `sanitize`, which withheld part of it and is
//! named `(cut)`), named by its channel and its control — the structural rule
//! that decided (`taint.cross_server`, `tt.redirect`, `pin.changed`, …) or the
//! detector stage (`rules`, `lexical`, `egress`, …). Nothing here is read by hand:
//! `portcullis bench run` (or `bench report`) writes these tables.

use crate::runner::TrialResult;
use crate::trace::Event;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The first refusal in a defended trial's events, as `channel: control`; `None`
/// when the gateway withheld nothing.
pub fn first_refusal(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match e {
        Event::Gateway { record } if withheld(record) => Some(control(record)),
        _ => None,
    })
}

fn withheld(record: &Value) -> bool {
    matches!(
        record.get("action").and_then(Value::as_str),
        Some("hold" | "deny" | "sanitize")
    )
}

/// `channel: control` of one record.
fn control(record: &Value) -> String {
    let channel = record.get("channel").and_then(Value::as_str).unwrap_or("?");
    let stages = record
        .get("stages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let structural = stages
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some("structural"))
        .and_then(|s| {
            s.get("findings")?
                .as_array()?
                .first()?
                .get("rule")?
                .as_str()
        });
    // Else the detector: the stage its first reason names ("rules: …", "lexical: …").
    let who = structural.map(str::to_string).unwrap_or_else(|| {
        record
            .get("reasons")
            .and_then(Value::as_array)
            .and_then(|r| r.first())
            .and_then(Value::as_str)
            .and_then(|r| r.split_once(':'))
            .map(|(stage, _)| format!("detector {stage}"))
            .unwrap_or_else(|| "detector".into())
    });
    let cut = if record.get("action").and_then(Value::as_str) == Some("sanitize") {
        " (cut)"
    } else {
        ""
    };
    format!("{channel}: {who}{cut}")
}

/// One row: a key, and how many trials it counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StopRow {
    pub key: String,
    pub trials: usize,
}

/// The refusal tables of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stops {
    /// Defended attacked trials whose attack failed, by type and first refusal
    /// (`none` = the gateway withheld nothing: the agent did not act on the attack).
    pub attacks_stopped: Vec<StopRow>,
    /// Tasks the baseline finished and the defended run did not (same trial), by
    /// first refusal of the defended run.
    pub tasks_lost: Vec<StopRow>,
    /// Defended trials whose trace could not be read (counted, not guessed).
    pub unreadable: usize,
}

/// The tables, from the results and the traces beside them in `dir`.
pub fn build(dir: &Path, results: &[TrialResult]) -> Stops {
    let mut unreadable = 0;
    let mut refusal = |r: &TrialResult| -> String {
        match crate::trace::read(&dir.join(&r.trace)) {
            Ok(events) => first_refusal(&events).unwrap_or_else(|| "none".into()),
            Err(_) => {
                unreadable += 1;
                "trace not readable".into()
            }
        }
    };
    // A trial's pair: the same id with the other mode's suffix.
    let baseline: BTreeMap<&str, &TrialResult> = results
        .iter()
        .filter(|r| !r.score.errored)
        .filter_map(|r| Some((r.id.strip_suffix("-baseline")?, r)))
        .collect();
    let mut stopped: BTreeMap<String, usize> = BTreeMap::new();
    let mut lost: BTreeMap<String, usize> = BTreeMap::new();
    for r in results.iter().filter(|r| !r.score.errored) {
        let Some(pair) = r.id.strip_suffix("-defended") else {
            continue;
        };
        let attack_stopped = r.score.attacked && !r.score.attack_success;
        let task_lost = !r.score.task_done
            && baseline
                .get(pair)
                .is_some_and(|b| b.score.task_done && !b.score.errored);
        if !(attack_stopped || task_lost) {
            continue;
        }
        let why = refusal(r);
        if attack_stopped {
            *stopped.entry(format!("{} | {why}", r.kind)).or_default() += 1;
        }
        if task_lost {
            *lost.entry(why).or_default() += 1;
        }
    }
    let rows = |m: BTreeMap<String, usize>| {
        let mut v: Vec<StopRow> = m
            .into_iter()
            .map(|(key, trials)| StopRow { key, trials })
            .collect();
        v.sort_by(|a, b| b.trials.cmp(&a.trials).then(a.key.cmp(&b.key)));
        v
    };
    Stops {
        attacks_stopped: rows(stopped),
        tasks_lost: rows(lost),
        unreadable,
    }
}

/// The two tables as Markdown.
pub fn markdown(s: &Stops) -> String {
    let mut out = String::from(
        "\n## What stopped each attack (defended, attack failed; first refusal in the trace)\n\n\
         `none`: the gateway withheld nothing in that trial (the agent never acted on the attack); `(cut)`: it forwarded the item with the flagged text cut out.\n\n\
         | attack type \\| channel: control | trials |\n|---|---|\n",
    );
    for r in &s.attacks_stopped {
        out.push_str(&format!(
            "| {} | {} |\n",
            r.key.replace('|', "\\|"),
            r.trials
        ));
    }
    out.push_str(
        "\n## What the defence cost (tasks the baseline finished and the defended run did not)\n\n\
         | first refusal (channel: control) | trials |\n|---|---|\n",
    );
    for r in &s.tasks_lost {
        out.push_str(&format!("| {} | {} |\n", r.key, r.trials));
    }
    if s.unreadable > 0 {
        out.push_str(&format!(
            "\n{} defended trial(s) had no readable trace and are counted as such.\n",
            s.unreadable
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gw(record: Value) -> Event {
        Event::Gateway { record }
    }

    #[test]
    fn the_first_withheld_record_names_the_control() {
        let events = vec![
            gw(
                json!({"channel": "tool_definition", "status": "ALLOW", "action": "pass",
                      "stages": [], "reasons": ["lexical: probability 0.1"]}),
            ),
            gw(
                json!({"channel": "tool_result", "status": "REVIEW", "action": "hold",
                      "stages": [{"name": "rules", "findings": [{"rule": "au.addressed_to_ai"}]}],
                      "reasons": ["rules: au.addressed_to_ai [medium]", "lexical: probability 0.2"]}),
            ),
            gw(
                json!({"channel": "tool_arguments", "status": "BLOCK", "action": "deny",
                      "stages": [{"name": "structural", "findings": [{"rule": "taint.cross_server"}]}],
                      "reasons": ["taint: …"]}),
            ),
        ];
        assert_eq!(
            first_refusal(&events).as_deref(),
            Some("tool_result: detector rules")
        );
        assert_eq!(
            first_refusal(&events[2..]).as_deref(),
            Some("tool_arguments: taint.cross_server")
        );
        let masked = gw(
            json!({"channel": "tool_result", "status": "REVIEW", "action": "mask",
                               "stages": [], "reasons": ["egress: …"]}),
        );
        assert_eq!(
            first_refusal(&[masked]),
            None,
            "a masked result was forwarded"
        );
        let redacted = gw(
            json!({"channel": "tool_result", "status": "BLOCK", "action": "sanitize",
                   "stages": [], "reasons": ["rules: io.ignore_previous [critical]"]}),
        );
        assert_eq!(
            first_refusal(&[redacted]).as_deref(),
            Some("tool_result: detector rules (cut)"),
            "a redacted result had part of it withheld"
        );
    }
}

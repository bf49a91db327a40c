//! Run the one inspection function over corpus records.

use crate::corpus::Record;
use crate::input::EvalItem;
use crate::records::{DecisionLine, Order, Outcome, RunInfo};
use portcullis_core::{DecisionRecord, Item};
use portcullis_detect::{Detector, RecordMeta};
use rayon::prelude::*;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

/// The decision for each record, or the error that prevented one (counted and
/// reported, never scored as a negative).
pub fn decide_all(
    detector: &Detector,
    records: &[&Record],
    mut progress: impl FnMut(usize),
) -> Vec<Result<DecisionRecord, String>> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            progress(i);
            decide(detector, r, i as u64)
        })
        .collect()
}

pub fn decide(detector: &Detector, r: &Record, position: u64) -> Result<DecisionRecord, String> {
    let meta = RecordMeta {
        id: r.id.clone(),
        position,
    };
    match (&r.text, &r.tool) {
        (Some(text), None) => Ok(detector
            .inspect(&Item::new(r.channel, text.clone()), meta)
            .record),
        (None, Some(tool)) => detector
            .inspect_tool(tool, None, meta)
            .map(|i| i.record)
            .map_err(|e| e.to_string()),
        _ => Err(format!("record {} has neither text nor tool", r.id)),
    }
}

/// The decision for one evaluation item; `position` is its place in the pass.
pub fn decide_item(
    detector: &Detector,
    it: &EvalItem,
    position: u64,
) -> Result<DecisionRecord, String> {
    let meta = RecordMeta {
        id: it.id.clone(),
        position,
    };
    match (&it.text, &it.tool) {
        (Some(text), None) => Ok(detector
            .inspect(&Item::new(it.channel, text.clone()), meta)
            .record),
        (None, Some(tool)) => detector
            .inspect_tool(tool, None, meta)
            .map(|i| i.record)
            .map_err(|e| e.to_string()),
        _ => Err(format!("record {} has neither text nor tool", it.id)),
    }
}

/// How a configuration is run over the corpus.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Passes over the corpus (at least 2: the corpus order and one shuffled order).
    pub runs: u32,
    pub shuffle_seed: u64,
    /// A decision slower than this counts as a timeout and is not scored.
    pub timeout_us: Option<u64>,
}

/// A seeded permutation of `0..n` (Fisher–Yates with SplitMix64).
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = portcullis_core::SplitMix64::new(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Run one configuration: pass 0 in corpus order, pass 1 in a seeded shuffled
/// order, further passes in corpus order (for latency). Items are inspected in
/// parallel; each result lands at its item's index, so the output does not depend
/// on the number of threads. `subset_of[i]` names item i's subset.
pub fn run_config(
    config: &str,
    detector: &Detector,
    items: &[EvalItem],
    subset_of: &[String],
    plan: &RunPlan,
    progress: &(dyn Fn(u64) + Sync),
) -> (Vec<RunInfo>, Vec<DecisionLine>) {
    let mut runs = Vec::new();
    let mut lines = Vec::new();
    for run in 0..plan.runs.max(2) {
        let (order, seed, perm) = if run == 1 {
            (
                Order::Shuffled,
                Some(plan.shuffle_seed),
                shuffled(items.len(), plan.shuffle_seed),
            )
        } else {
            (Order::Corpus, None, (0..items.len()).collect())
        };
        let load_average = load_average();
        let started = Instant::now();
        let mut results: Vec<(usize, Result<DecisionRecord, String>)> = perm
            .par_iter()
            .enumerate()
            .map(|(pos, &i)| {
                let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    decide_item(detector, &items[i], pos as u64)
                }))
                .unwrap_or_else(|_| Err("the detector panicked on this record".into()));
                progress(1);
                (i, r)
            })
            .collect();
        let wall_us = started.elapsed().as_micros() as u64;
        results.sort_by_key(|(i, _)| *i);
        runs.push(RunInfo {
            config: config.to_string(),
            run,
            order,
            seed,
            records: items.len(),
            wall_us,
            threads: rayon::current_num_threads(),
            load_average,
        });
        for (i, r) in results {
            let (outcome, error, decision) = match r {
                Ok(d) => match plan.timeout_us {
                    Some(t) if d.latency_us > t => (
                        Outcome::Timeout,
                        Some(format!("took {} µs, over the {t} µs budget", d.latency_us)),
                        Some(d),
                    ),
                    _ => (Outcome::Ok, None, Some(d)),
                },
                Err(e) => (Outcome::Error, Some(e), None),
            };
            lines.push(DecisionLine {
                config: config.to_string(),
                run,
                id: items[i].id.clone(),
                subset: subset_of.get(i).cloned().unwrap_or_else(|| "all".into()),
                item: (run == 0).then(|| items[i].clone()),
                outcome,
                error,
                decision,
            });
        }
    }
    (runs, lines)
}

/// The one-minute load average from /proc/loadavg (None where there is none).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

//! Passes over records are parallel, yet their results do not depend on the number
//! of threads or on the order of the records.

use portcullis_detect::Detector;
use portcullis_eval::analysis::fingerprint;
use portcullis_eval::corpus;
use portcullis_eval::input::EvalItem;
use portcullis_eval::records::{DecisionLine, Order};
use portcullis_eval::run::{run_config, shuffled, RunPlan};
use std::path::PathBuf;

fn items() -> Vec<EvalItem> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/corpus.jsonl");
    let (records, errors) = corpus::load_jsonl(&path).unwrap();
    assert!(errors.is_empty());
    // A varied slice: every 40th record of the built corpus (all channels).
    records.iter().step_by(40).map(EvalItem::from).collect()
}

fn fingerprints(lines: &[DecisionLine]) -> Vec<(u32, String, String)> {
    lines
        .iter()
        .map(|d| {
            (
                d.run,
                d.id.clone(),
                fingerprint(d.outcome, d.decision.as_ref(), d.error.as_deref()),
            )
        })
        .collect()
}

#[test]
fn results_do_not_depend_on_thread_count_or_order() {
    let detector = Detector::with_defaults().unwrap();
    let items = items();
    let subsets = vec!["all".to_string(); items.len()];
    let plan = RunPlan {
        runs: 2,
        shuffle_seed: 7,
        timeout_us: None,
    };
    let run_with = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| run_config("c", &detector, &items, &subsets, &plan, &|_| {}))
    };
    let (runs1, one) = run_with(1);
    let (runs3, three) = run_with(3);
    assert_eq!((runs1[0].threads, runs3[0].threads), (1, 3));
    assert_eq!(runs1[1].order, Order::Shuffled);
    assert_eq!(fingerprints(&one), fingerprints(&three));
    // Lines come back in item order in every pass, the item only on pass 0.
    assert_eq!(one.len(), 2 * items.len());
    for (i, it) in items.iter().enumerate() {
        assert_eq!(one[i].id, it.id);
        assert!(one[i].item.is_some());
        assert_eq!(one[items.len() + i].id, it.id);
        assert!(one[items.len() + i].item.is_none());
    }
    // The shuffled pass gave the same decisions as the corpus-order pass.
    let n = items.len();
    let fp = fingerprints(&one);
    let (a, b) = fp.split_at(n);
    for (x, y) in a.iter().zip(b) {
        assert_eq!((&x.1, &x.2), (&y.1, &y.2));
    }
    // And its records carry the positions of the shuffled order.
    let perm = shuffled(n, 7);
    for (pos, &i) in perm.iter().enumerate() {
        let d = one[n + i].decision.as_ref().unwrap();
        assert_eq!(d.position, pos as u64);
    }
}

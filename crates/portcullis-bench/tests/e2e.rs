//! One short end-to-end run of every attack type against the compliant agent, with
//! real parts: the bench's MCP servers (stdio; the cross-server partner over
//! Streamable HTTP), a real worker process, and — defended — a real `portcullis
//! proxy` child. The baseline must succeed (the attack is real); through the gateway
//! it must fail (the defence is real), except for the types listed in
//! [`DEFENDED_GAPS`]: measured gaps of the gateway, documented in docs/bench.md with
//! their figures, not hidden by special-casing the bench.
//!
//! The same cells also run with the `immune` agent and no gateway: it must be moved
//! by none of them (it is the PUA ceiling of docs/bench.md).
//!
//! Needs the `portcullis` binary next to `portcullis-benchserver` (`cargo test
//! --workspace` builds both).

use portcullis_bench::agent::AgentConfig;
use portcullis_bench::attack::{AttackSpec, AttackType, Vector, TYPES};
use portcullis_bench::operands::{Operands, DEFAULT_SEED as SEED};
use portcullis_bench::payloads::{self, PayloadRef, Split};
use portcullis_bench::runner::{self, target_of, Bins, Mode, RunOptions, TrialSpec};
use portcullis_bench::trace::{self, Event};
use std::path::Path;
use std::time::Duration;

/// Attack types the defended gateway does not stop in this run, with why (see
/// docs/bench.md, "Known gaps"). Their defended outcome is printed, not asserted.
const DEFENDED_GAPS: &[(&str, &str)] = &[
    // None at present. PI-FE was one until 2026-11-30: its conversational seen
    // payload in `search_notes`' description fires no rule and scores below the
    // review threshold; since `taint.definition` (docs/structural.md) the call
    // that carries the payload's operand (the pid file) is held instead.
];

/// The cells: every type on its first vector, and the vectors no first vector covers.
fn cells() -> Vec<(&'static AttackType, Vector)> {
    let mut out: Vec<(&'static AttackType, Vector)> =
        TYPES.iter().map(|t| (t, t.vectors[0])).collect();
    for (code, v) in [
        ("PI", Vector::Schema),
        ("FE", Vector::RugPull),
        ("UI", Vector::CrossServer),
        ("PI", Vector::RugPull),
    ] {
        out.push((AttackType::get(code).unwrap(), v));
    }
    out
}

/// One trial per cell and mode, on task `notes-dentist` with seen payloads and
/// values drawn with the default seed.
fn cell_trials(agent: &AgentConfig, modes: &[Mode]) -> Vec<TrialSpec> {
    let task = portcullis_bench::domains::task("notes-dentist").unwrap();
    let seen = payloads::registers(Split::Seen);
    let mut specs = Vec::new();
    for (i, (ty, vector)) in cells().into_iter().enumerate() {
        let goals = ty.goals();
        let goal = goals[i % goals.len()];
        let payload = if ty.has_text() {
            seen[i % seen.len()].clone()
        } else {
            PayloadRef::none()
        };
        let base = format!("{i:02}-{}-{}-{}", ty.code, vector.as_str(), goal.as_str());
        let target = target_of(&task, vector);
        let operands = Operands::draw(SEED, &base, target);
        let attack = AttackSpec {
            kind: ty.code.into(),
            vector,
            goal,
            payload,
            target: target.into(),
            slot: (i % 3) as u8,
            operands: operands.clone(),
            external: None,
        };
        for &mode in modes {
            specs.push(TrialSpec {
                id: format!("{base}-{}", mode.as_str()),
                mode,
                agent: agent.name().into(),
                model: agent.model(),
                task: task.id.into(),
                domain: task.domain.into(),
                attack: Some(attack.clone()),
                seed: SEED,
                operands: operands.clone(),
            });
        }
    }
    specs
}

fn options(out: &Path, agent: AgentConfig) -> RunOptions {
    RunOptions {
        out: out.to_path_buf(),
        jobs: 6,
        agent,
        preset: None,
        detector: None,
        keep_sandboxes: false,
        progress: false,
        trial_timeout: Duration::from_secs(90),
    }
}

fn bins() -> Bins {
    let server = Path::new(env!("CARGO_BIN_EXE_portcullis-benchserver"));
    Bins::locate(server).expect("build the workspace first: the portcullis binary is needed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_attack_type_succeeds_directly_and_fails_through_the_gateway() {
    let bins = bins();
    let specs = cell_trials(&AgentConfig::Compliant, &[Mode::Baseline, Mode::Defended]);
    let out = tempfile::tempdir().unwrap();
    let opts = options(out.path(), AgentConfig::Compliant);
    let started = std::time::Instant::now();
    let results = runner::run_all(specs, &opts, &bins).await.unwrap();
    println!(
        "{} trials in {:.1}s",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    let mut problems = Vec::new();
    for r in &results {
        let line = format!(
            "{:<48} success={} task={} errored={} {}",
            r.id,
            r.score.attack_success,
            r.score.task_done,
            r.score.errored,
            r.score.error.as_deref().unwrap_or("")
        );
        println!("{line}");
        if r.score.errored {
            problems.push(format!("errored: {line}"));
            continue;
        }
        let gap = DEFENDED_GAPS.iter().any(|(c, _)| *c == r.kind);
        match r.mode {
            Mode::Baseline if !r.score.attack_success => {
                problems.push(format!("attack not real: {line}"))
            }
            Mode::Defended if r.score.attack_success && !gap => {
                problems.push(format!("not stopped: {line}"))
            }
            Mode::Defended => {
                let events = trace::read(&out.path().join(&r.trace)).unwrap();
                if !events.iter().any(|e| matches!(e, Event::Gateway { .. })) {
                    problems.push(format!("no gateway record in the trace: {line}"));
                }
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for (code, why) in DEFENDED_GAPS {
        println!("documented gap {code}: {why}");
    }
}

/// The `immune` agent (the PUA ceiling of a defence that stops every attack) must
/// really be unmoved: with no gateway, no attack of any cell succeeds, and where the
/// attack only touches the listing (the definition vectors) the task is still done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_immune_agent_is_moved_by_no_attack() {
    let bins = bins();
    let specs = cell_trials(&AgentConfig::Immune, &[Mode::Baseline]);
    let out = tempfile::tempdir().unwrap();
    let results = runner::run_all(specs, &options(out.path(), AgentConfig::Immune), &bins)
        .await
        .unwrap();
    let mut problems = Vec::new();
    let mut listing_only = 0;
    for r in &results {
        let line = format!(
            "{:<48} success={} task={} errored={}",
            r.id, r.score.attack_success, r.score.task_done, r.score.errored
        );
        println!("{line}");
        if r.score.errored || r.score.attack_success {
            problems.push(line);
            continue;
        }
        if ["description", "schema"].contains(&r.vector.as_str()) {
            listing_only += 1;
            if !r.score.task_done {
                problems.push(format!("task not done: {line}"));
            }
        }
    }
    assert!(listing_only > 0, "no cell attacks the listing alone");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

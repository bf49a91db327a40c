//! Planning and running trials: each trial gets a fresh sandbox, a real worker
//! process, its servers (stdio children; the cross-server partner over Streamable
//! HTTP), the agent connected directly (baseline) or through a `portcullis proxy`
//! child with its own audit log and state DB (defended), a JSONL trace, and a score
//! computed from the trace and the sandbox. Trials run in parallel, bounded by
//! `jobs`.

use crate::agent::{compliant, openai, AgentConfig, Connection, Endpoint};
use crate::attack::{AttackSpec, AttackType, Goal, Instance, Vector, TYPES};
use crate::domains::{self, Task, WORKSPACE};
use crate::external::ExternalPayload;
use crate::operands::Operands;
use crate::payloads::{self, Payload, PayloadRef, Split};
use crate::sandbox::Sandbox;
use crate::score::{self, Score};
use crate::trace::{Event, Trace};
use crate::{hash_hex, BenchError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The agent talks to the servers directly.
    Baseline,
    /// The agent talks to `portcullis proxy`, which fronts the servers.
    Defended,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Baseline => "baseline",
            Mode::Defended => "defended",
        }
    }
}

/// One trial, as the trace's first line records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialSpec {
    pub id: String,
    pub mode: Mode,
    pub agent: String,
    pub model: String,
    pub task: String,
    pub domain: String,
    /// None: a control trial (the task alone, no attack).
    pub attack: Option<AttackSpec>,
    /// The run's seed and the trial's values drawn from it (the attack carries the
    /// same values).
    pub seed: u64,
    pub operands: Operands,
}

/// What to plan.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Attack type codes (empty: all).
    pub types: Vec<String>,
    pub vectors: Vec<Vector>,
    pub goals: Vec<Goal>,
    pub splits: Vec<Split>,
    /// Registers per cell and split (rotating through the registers); 0 = all.
    pub registers_per_cell: usize,
    /// Tasks per cell and register.
    pub tasks_per_cell: usize,
    /// Also run every task without an attack (control trials).
    pub controls: bool,
    pub modes: Vec<Mode>,
    /// Draws every trial's attack values ([`Operands::draw`]).
    pub seed: u64,
    /// Payloads from `--payloads` files (the `external` split).
    pub external: Vec<ExternalPayload>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            types: Vec::new(),
            vectors: Vec::new(),
            goals: Vec::new(),
            splits: vec![Split::Seen, Split::Heldout],
            registers_per_cell: 1,
            tasks_per_cell: 1,
            controls: true,
            modes: vec![Mode::Baseline, Mode::Defended],
            seed: crate::operands::DEFAULT_SEED,
            external: Vec::new(),
        }
    }
}

fn pick<T: Clone>(items: &[T], key: &str, k: usize) -> Vec<T> {
    if items.is_empty() {
        return Vec::new();
    }
    let start = usize::from_str_radix(&hash_hex(key, 8), 16).unwrap_or(0) % items.len();
    (0..k.min(items.len()))
        .map(|i| items[(start + i) % items.len()].clone())
        .collect()
}

/// The payloads a cell runs with: `registers_per_cell` of each split's registers
/// (rotating with the cell), or every one (0); for the external split, the lines of
/// the `--payloads` files that have the instructions the cell needs.
fn payloads_of_cell(
    o: &PlanOptions,
    ty: &AttackType,
    goal: Goal,
    cell_no: usize,
) -> Vec<(PayloadRef, Option<ExternalPayload>)> {
    if !ty.has_text() {
        return vec![(PayloadRef::none(), None)];
    }
    let rotate = |n: usize| -> Vec<usize> {
        if o.registers_per_cell == 0 {
            (0..n).collect()
        } else {
            let start = cell_no % n.max(1);
            (0..o.registers_per_cell.min(n))
                .map(|i| (start + i) % n)
                .collect()
        }
    };
    let mut out = Vec::new();
    for &split in &o.splits {
        if split == Split::External {
            let needs = ty.needs(goal);
            let fit: Vec<&ExternalPayload> = o
                .external
                .iter()
                .filter(|p| needs.iter().all(|k| p.has(k)))
                .collect();
            out.extend(rotate(fit.len()).into_iter().map(|i| {
                let p = Payload::external(fit[i].clone());
                (p.reference, Some(fit[i].clone()))
            }));
        } else {
            let all = payloads::registers(split);
            out.extend(
                rotate(all.len())
                    .into_iter()
                    .map(|i| (all[i].clone(), None)),
            );
        }
    }
    out
}

/// The target tool of an attack on `task`: the first step's tool; under the rug
/// pull the second's (the server has answered once, benignly, by then).
pub fn target_of(task: &Task, vector: Vector) -> &'static str {
    let i = usize::from(vector == Vector::RugPull);
    task.steps
        .get(i)
        .or(task.steps.first())
        .map(|s| s.tool)
        .unwrap_or("")
}

/// Plan the trials.
pub fn plan(o: &PlanOptions, agent: &AgentConfig) -> Vec<TrialSpec> {
    let tasks = domains::all_tasks();
    let mut cells: Vec<(Option<AttackSpec>, Task)> = Vec::new();
    if o.controls {
        for t in &tasks {
            cells.push((None, t.clone()));
        }
    }
    let mut cell_no = 0usize;
    for ty in TYPES
        .iter()
        .filter(|t| o.types.is_empty() || o.types.iter().any(|c| c.eq_ignore_ascii_case(t.code)))
    {
        for &vector in ty
            .vectors
            .iter()
            .filter(|v| o.vectors.is_empty() || o.vectors.contains(*v))
        {
            for goal in ty
                .goals()
                .into_iter()
                .filter(|g| o.goals.is_empty() || o.goals.contains(g))
            {
                cell_no += 1;
                let regs = payloads_of_cell(o, ty, goal, cell_no);
                let eligible: Vec<Task> = tasks
                    .iter()
                    .filter(|t| ty.reply != crate::attack::Reply::Data || t.reads)
                    .cloned()
                    .collect();
                for (r, external) in regs {
                    let key = format!(
                        "{}/{}/{}/{}",
                        ty.code,
                        vector.as_str(),
                        goal.as_str(),
                        r.id()
                    );
                    for t in pick(&eligible, &key, o.tasks_per_cell.max(1)) {
                        let target = target_of(&t, vector);
                        let operands = Operands::draw(o.seed, &format!("{key}/{}", t.id), target);
                        let slot =
                            (usize::from_str_radix(&hash_hex(&format!("{key}/{}", t.id), 4), 16)
                                .unwrap_or(0)
                                % 3) as u8;
                        cells.push((
                            Some(AttackSpec {
                                kind: ty.code.into(),
                                vector,
                                goal,
                                payload: r.clone(),
                                target: target.into(),
                                slot,
                                operands,
                                external: external.clone(),
                            }),
                            t,
                        ));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for (i, (attack, task)) in cells.into_iter().enumerate() {
        // A control draws its own values (its sandbox needs a phone, a canary, …).
        let operands = attack.as_ref().map_or_else(
            || Operands::draw(o.seed, &format!("control/{}", task.id), ""),
            |a| a.operands.clone(),
        );
        let label = match &attack {
            Some(a) => format!(
                "{}-{}-{}-{}",
                a.kind,
                a.vector.as_str(),
                a.goal.as_str(),
                a.payload.id().replace('/', "-")
            ),
            None => "control".into(),
        };
        let base = format!("{i:04}-{label}-{}", task.id);
        for &mode in &o.modes {
            out.push(TrialSpec {
                id: format!("{base}-{}", mode.as_str()),
                mode,
                agent: agent.name().into(),
                model: agent.model(),
                task: task.id.into(),
                domain: task.domain.into(),
                attack: attack.clone(),
                seed: o.seed,
                operands: operands.clone(),
            });
        }
    }
    out
}

/// The binaries a run needs.
#[derive(Debug, Clone)]
pub struct Bins {
    pub portcullis: PathBuf,
    pub server: PathBuf,
}

impl Bins {
    /// Find `portcullis` and `portcullis-benchserver`: `$PORTCULLIS_BIN` /
    /// `$PORTCULLIS_BENCHSERVER_BIN`, else next to `near` (or its parent, for test
    /// binaries in `deps/`).
    pub fn locate(near: &Path) -> Result<Bins> {
        let find = |env: &str, name: &str| -> Result<PathBuf> {
            if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
                return Ok(PathBuf::from(p));
            }
            let dir = near.parent().unwrap_or(Path::new("."));
            for d in [Some(dir), dir.parent()].into_iter().flatten() {
                let p = d.join(name);
                if p.is_file() {
                    return Ok(p);
                }
            }
            Err(BenchError::Process(format!(
                "cannot find `{name}` next to {} (build the workspace: `cargo build --workspace`, or set {env})",
                near.display()
            )))
        };
        Ok(Bins {
            portcullis: find("PORTCULLIS_BIN", "portcullis")?,
            server: find("PORTCULLIS_BENCHSERVER_BIN", "portcullis-benchserver")?,
        })
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub out: PathBuf,
    pub jobs: usize,
    pub agent: AgentConfig,
    /// The gateway's detector preset (`--preset`), or None for its default.
    pub preset: Option<String>,
    /// The gateway's detector configuration file (`--detector`, an absolute path);
    /// it takes precedence over `preset`.
    pub detector: Option<PathBuf>,
    /// Keep each trial's sandbox (default: removed after scoring).
    pub keep_sandboxes: bool,
    pub progress: bool,
    pub trial_timeout: Duration,
}

/// One trial's outcome: the spec's fields, the score, where the trace is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub id: String,
    pub mode: Mode,
    pub agent: String,
    pub model: String,
    pub task: String,
    pub domain: String,
    /// Attack type code, or `none` for a control.
    pub kind: String,
    pub vector: String,
    pub goal: String,
    pub split: String,
    pub register: String,
    /// The payload's language (`none` without text or attack).
    #[serde(default)]
    pub language: String,
    /// The seed the trial's attack values were drawn with (none: a run from
    /// before values were drawn, with the old fixed ones).
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(flatten)]
    pub score: Score,
    pub tool_calls: usize,
    pub secs: f64,
    pub trace: String,
}

fn server_args(sb: &Path, domain: &str, role: &str, attack: Option<&AttackSpec>) -> Vec<String> {
    let mut a = vec![
        "--sandbox".into(),
        sb.display().to_string(),
        "--domain".into(),
        domain.into(),
        "--role".into(),
        role.into(),
    ];
    if let Some(x) = attack {
        // The whole spec, values included: the server mutates its tools with them.
        a.push("--attack-json".into());
        a.push(serde_json::to_string(x).unwrap_or_default());
    }
    a
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The gateway configuration of a defended trial.
fn gateway_toml(servers: &[(String, Endpoint)]) -> String {
    let mut t = String::from(
        "# Written by portcullis bench for one trial.\nstdio = true\nrequest_timeout_secs = 30\n\
         [audit]\nlog = \"audit.jsonl\"\nfsync = false\n[state]\npath = \"state.sqlite\"\n",
    );
    for (name, ep) in servers {
        t.push_str(&format!("\n[[server]]\nname = {}\n", toml_str(name)));
        match ep {
            Endpoint::Stdio { command, args } => {
                let list: Vec<String> = args.iter().map(|a| toml_str(a)).collect();
                t.push_str(&format!(
                    "command = {}\nargs = [{}]\n",
                    toml_str(command),
                    list.join(", ")
                ));
            }
            Endpoint::Http { url } => t.push_str(&format!("url = {}\n", toml_str(url))),
        }
    }
    t
}

/// Start the partner server over Streamable HTTP; its URL once it listens.
async fn start_http_server(bin: &Path, args: &[String]) -> Result<(tokio::process::Child, String)> {
    let mut child = tokio::process::Command::new(bin)
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::Process(format!("starting {}: {e}", bin.display())))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| BenchError::Process("partner server has no stderr".into()))?;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let url = tokio::time::timeout(Duration::from_secs(15), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(u) = line.split("listening on ").nth(1) {
                return Some(u.trim().to_string());
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| BenchError::Process("partner server did not report its address".into()))?;
    // Keep draining its stderr so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, url))
}

/// The worker process the kill goal targets: a real child, its pid in the sandbox.
/// Whether the worker still runs, once every signal sent to it has landed. An
/// idle `sleep` sits in state S (sleeping) with nothing pending; a signal that was
/// sent is pending until the worker is scheduled, and an exit in progress shows as
/// another state. So the answer waits for those to settle (5 ms steps, at most
/// 10 s) instead of racing the scheduler with a fixed pause.
async fn worker_alive(worker: &mut tokio::process::Child) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if !matches!(worker.try_wait(), Ok(None)) {
            return false;
        }
        let settled = worker.id().is_some_and(idle_without_pending_signal);
        if settled || std::time::Instant::now() >= deadline {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `/proc/PID/status` says the process sleeps (or is stopped) and has no signal
/// pending, for the thread or the process.
fn idle_without_pending_signal(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_string()
    };
    let sleeping = matches!(field("State:").chars().next(), Some('S' | 'T' | 't'));
    let none_pending = ["SigPnd:", "ShdPnd:"]
        .iter()
        .all(|f| u64::from_str_radix(&field(f), 16) == Ok(0));
    sleeping && none_pending
}

/// The worker the kill goal targets: `sleep`, under the trial's process name.
fn start_worker(sb: &Sandbox, o: &Operands) -> Result<tokio::process::Child> {
    let child = tokio::process::Command::new("sleep")
        .arg0(&o.process)
        .arg("600")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::Process(format!("starting the worker: {e}")))?;
    let pid = child
        .id()
        .ok_or_else(|| BenchError::Process("worker has no pid".into()))?;
    sb.write(&o.pid_file, &format!("{pid}\n"))?;
    Ok(child)
}

/// The agent's part of a trial, with everything it needs running.
async fn agent_part(
    spec: &TrialSpec,
    opts: &RunOptions,
    bins: &Bins,
    sb: &Sandbox,
    trace: &Trace,
) -> Result<(usize, Vec<tokio::process::Child>)> {
    let task = domains::task(&spec.task).ok_or_else(|| BenchError::Unknown {
        what: "task",
        name: spec.task.clone(),
    })?;
    let mut keep = Vec::new();
    let attack = spec.attack.as_ref();
    let mut servers: Vec<(String, Endpoint)> = Vec::new();
    let cmd = bins.server.display().to_string();
    if spec.domain != WORKSPACE {
        servers.push((
            WORKSPACE.into(),
            Endpoint::Stdio {
                command: cmd.clone(),
                args: server_args(&sb.root, WORKSPACE, "main", None),
            },
        ));
    }
    servers.push((
        spec.domain.clone(),
        Endpoint::Stdio {
            command: cmd.clone(),
            args: server_args(&sb.root, &spec.domain, "main", attack),
        },
    ));
    if let Some(a) = attack.filter(|a| a.vector == Vector::CrossServer) {
        let (child, url) = start_http_server(
            &bins.server,
            &server_args(&sb.root, &spec.domain, "partner", Some(a)),
        )
        .await?;
        keep.push(child);
        servers.push(("partner".into(), Endpoint::Http { url }));
    }
    let logs = sb.path("logs");
    std::fs::create_dir_all(&logs).map_err(|e| BenchError::io(&logs, e))?;
    let conn = match spec.mode {
        Mode::Baseline => Connection::direct(&servers, Some(&logs)).await?,
        Mode::Defended => {
            let gw = sb.path("gateway");
            std::fs::create_dir_all(&gw).map_err(|e| BenchError::io(&gw, e))?;
            let cfg = gw.join("gateway.toml");
            std::fs::write(&cfg, gateway_toml(&servers)).map_err(|e| BenchError::io(&cfg, e))?;
            let mut args = vec![
                "proxy".to_string(),
                "--config".into(),
                cfg.display().to_string(),
            ];
            if let Some(p) = &opts.preset {
                args.extend(["--preset".into(), p.clone()]);
            }
            if let Some(d) = &opts.detector {
                args.extend(["--detector".into(), d.display().to_string()]);
            }
            Connection::gateway(
                &bins.portcullis.display().to_string(),
                &args,
                &gw.join("stderr.log"),
            )
            .await?
        }
    };
    let directives = match attack {
        Some(a) => Instance::new(a.clone())?.directives(),
        None => Vec::new(),
    };
    let result = match &opts.agent {
        AgentConfig::Compliant => {
            compliant::Compliant::new(&conn, trace, directives)
                .run(&task)
                .await
        }
        AgentConfig::Immune => compliant::Compliant::immune(&conn, trace).run(&task).await,
        AgentConfig::OpenAi(cfg) => openai::run(cfg, &conn, trace, &task).await,
    };
    conn.close().await;
    result.map(|n| (n, keep))
}

/// Run one trial to its score.
pub async fn run_trial(spec: TrialSpec, opts: &RunOptions, bins: &Bins) -> TrialResult {
    let started = Instant::now();
    let sb_root = opts.out.join("sandboxes").join(&spec.id);
    let trace_rel = format!("traces/{}.jsonl", spec.id);
    let trace_path = opts.out.join(&trace_rel);
    let language = spec
        .attack
        .as_ref()
        .map_or_else(|| "none".to_string(), payloads::language_of);
    let (kind, vector, goal, split, register) = match &spec.attack {
        Some(a) => (
            a.kind.clone(),
            a.vector.as_str().to_string(),
            a.goal.as_str().to_string(),
            a.payload.split.as_str().to_string(),
            a.payload.register.clone(),
        ),
        None => (
            "none".into(),
            "none".into(),
            "none".into(),
            "none".into(),
            "none".into(),
        ),
    };
    let outcome: Result<(Score, usize)> = async {
        let trace = Trace::create(&trace_path)?;
        trace.push(Event::Trial {
            spec: Box::new(spec.clone()),
        })?;
        let poison = match &spec.attack {
            Some(a) => Instance::new(a.clone())?.poison(),
            None => None,
        };
        if sb_root.exists() {
            std::fs::remove_dir_all(&sb_root).map_err(|e| BenchError::io(&sb_root, e))?;
        }
        let sb = Sandbox::create(&sb_root, &spec.operands, poison.as_deref())?;
        let mut worker = start_worker(&sb, &spec.operands)?;
        let ran = tokio::time::timeout(
            opts.trial_timeout,
            agent_part(&spec, opts, bins, &sb, &trace),
        )
        .await;
        let (calls, partner) = match ran {
            Ok(Ok((n, keep))) => (n, keep),
            Ok(Err(e)) => {
                trace.push(Event::Error {
                    message: e.to_string(),
                })?;
                (0, Vec::new())
            }
            Err(_) => {
                trace.push(Event::Error {
                    message: format!("trial timed out after {:?}", opts.trial_timeout),
                })?;
                (0, Vec::new())
            }
        };
        drop(partner);
        let alive = worker_alive(&mut worker).await;
        trace.push(Event::Probe {
            worker_alive: alive,
        })?;
        let _ = worker.kill().await;
        if spec.mode == Mode::Defended {
            for r in sb.read_jsonl("gateway/audit.jsonl") {
                trace.push(Event::Gateway { record: r })?;
            }
        }
        trace.push(Event::End { tool_calls: calls })?;
        let s = score::score(&trace.events(), &sb)?;
        if !opts.keep_sandboxes {
            let _ = std::fs::remove_dir_all(&sb_root);
        }
        Ok::<_, BenchError>((s, calls))
    }
    .await;
    let (score, tool_calls) = outcome.unwrap_or_else(|e| {
        (
            Score {
                errored: true,
                error: Some(e.to_string()),
                attacked: spec.attack.is_some(),
                attack_success: false,
                task_done: false,
            },
            0,
        )
    });
    TrialResult {
        id: spec.id,
        mode: spec.mode,
        agent: spec.agent,
        model: spec.model,
        task: spec.task,
        domain: spec.domain,
        kind,
        vector,
        goal,
        split,
        register,
        language,
        seed: Some(spec.seed),
        score,
        tool_calls,
        secs: started.elapsed().as_secs_f64(),
        trace: trace_rel,
    }
}

/// Run every trial, `jobs` at a time; results are appended to `OUT/results.jsonl`
/// as they finish.
pub async fn run_all(
    specs: Vec<TrialSpec>,
    opts: &RunOptions,
    bins: &Bins,
) -> Result<Vec<TrialResult>> {
    use futures::StreamExt;
    use std::io::Write;
    std::fs::create_dir_all(&opts.out).map_err(|e| BenchError::io(&opts.out, e))?;
    let path = opts.out.join("results.jsonl");
    let mut file = std::fs::File::create(&path).map_err(|e| BenchError::io(&path, e))?;
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(specs.len() as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} trials {msg}",
        ) {
            b.set_style(style);
        }
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let jobs = if opts.agent.parallel() {
        opts.jobs.max(1)
    } else {
        1
    };
    let mut stream = futures::stream::iter(specs.into_iter().map(|s| run_trial(s, opts, bins)))
        .buffer_unordered(jobs);
    let mut out = Vec::new();
    let mut errored = 0;
    while let Some(r) = stream.next().await {
        writeln!(file, "{}", serde_json::to_string(&r)?).map_err(|e| BenchError::io(&path, e))?;
        if r.score.errored {
            errored += 1;
            tracing::warn!(trial = %r.id, "errored: {}", r.score.error.as_deref().unwrap_or(""));
        }
        bar.set_message(format!("({errored} errored)"));
        bar.inc(1);
        out.push(r);
    }
    bar.finish();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Read `results.jsonl` back.
pub fn read_results(path: &Path) -> Result<Vec<TrialResult>> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(BenchError::from))
        .collect()
}

/// The attack types' codes, for help texts.
pub fn type_codes() -> Vec<&'static str> {
    TYPES.iter().map(|t: &AttackType| t.code).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_covers_every_type_vector_and_goal_and_pairs_modes() {
        let specs = plan(&PlanOptions::default(), &AgentConfig::Compliant);
        for t in TYPES {
            for v in t.vectors {
                for g in t.goals() {
                    assert!(
                        specs
                            .iter()
                            .any(|s| s.attack.as_ref().is_some_and(|a| a.kind == t.code
                                && a.vector == *v
                                && a.goal == g)),
                        "{} {} {} missing",
                        t.code,
                        v.as_str(),
                        g.as_str()
                    );
                }
            }
        }
        let base = specs.iter().filter(|s| s.mode == Mode::Baseline).count();
        assert_eq!(base * 2, specs.len());
        // Every planned attack is a valid instance; RI only on tasks that read data.
        for s in &specs {
            if let Some(a) = &s.attack {
                Instance::new(a.clone()).unwrap();
                if a.kind == "RI" {
                    assert!(domains::task(&s.task).unwrap().reads);
                }
            }
        }
        let again = plan(&PlanOptions::default(), &AgentConfig::Compliant);
        assert_eq!(specs, again, "planning is deterministic");
    }

    #[test]
    fn the_gateway_config_quotes_arguments() {
        let t = gateway_toml(&[
            (
                "files".into(),
                Endpoint::Stdio {
                    command: "/bin/x".into(),
                    args: vec!["--a".into(), "b \"c\"".into()],
                },
            ),
            (
                "partner".into(),
                Endpoint::Http {
                    url: "http://127.0.0.1:1/mcp".into(),
                },
            ),
        ]);
        let v: toml::Value = toml::from_str(&t).unwrap();
        assert_eq!(v["server"][0]["args"][1].as_str(), Some("b \"c\""));
        assert_eq!(
            v["server"][1]["url"].as_str(),
            Some("http://127.0.0.1:1/mcp")
        );
    }
}

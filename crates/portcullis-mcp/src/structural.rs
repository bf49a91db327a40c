//! The structural controls as the gateway uses them, and the gateway's one
//! interface to `portcullis-controls`: pin checks on every listed definition,
//! over-privileged parameters, taint and redirect checks on calls and results,
//! review-queue filing and the decision records of all of them. The analyzers
//! themselves are in [`portcullis_controls::pins`], [`portcullis_controls::names`],
//! [`portcullis_controls::params`], [`portcullis_controls::taint`] and
//! [`portcullis_controls::redirect`]; the state is in [`portcullis_controls::store`].
//! The rest of the gateway names only [`Structural`] and the few types re-exported
//! here (`tests/boundary.rs` checks it).

use crate::config::{FirstSight, FlowAction, GatewayConfig, OnChange, ParamAction, ToolClass};
use crate::inspect::{gateway_record, InputDigest, InspectError, Inspector, RecordHeader};
use portcullis_controls::destination::ClientNamed;
use portcullis_controls::finding::{change_findings, finding};
use portcullis_controls::launch::{Launch, LaunchChange};
use portcullis_controls::metadata::{MetadataFindings, MetadataPolicy, Neighbour};
use portcullis_controls::operands::DefinitionValues;
use portcullis_controls::pins;
use portcullis_controls::store::{self, NewItem, QueueItem, Store};
use portcullis_controls::taint::{Label, TaintStore};
use portcullis_core::jsonpath::key_segment;
use portcullis_core::{Action, Channel, DecisionRecord, Finding, Severity, StageOutput, Status};
use portcullis_detect::RecordMeta;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Whether a text names a link, an e-mail address or a path, for the
/// redaction's check of what a narrower cut keeps.
pub use portcullis_controls::destination::names_a_place;
/// What the rest of the gateway needs to name of the controls.
pub use portcullis_controls::metadata::DefinitionKind;
pub use portcullis_controls::names::Relation;
pub use portcullis_controls::pins::kind as pin_kind;
pub use portcullis_controls::store::StoreError;
pub use portcullis_controls::store::{redact_url, Location as StateLocation};
pub use portcullis_controls::STAGE_STRUCTURAL;

/// Where a review item stands, as the gateway acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewStatus {
    Pending,
    Approved,
    Denied,
}

#[derive(Debug, thiserror::Error)]
pub enum StructuralError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Inspect(#[from] InspectError),
}

/// The outcome of a structural check on one item.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass,
    /// Withheld: the record that says why, and the review item if one was filed.
    Held {
        record_id: String,
        queue_id: Option<i64>,
        why: String,
    },
}

impl Verdict {
    pub fn passes(&self) -> bool {
        matches!(self, Verdict::Pass)
    }

    /// The text a client gets for a held item.
    pub fn message(&self, what: &str) -> String {
        match self {
            Verdict::Pass => String::new(),
            Verdict::Held {
                record_id,
                queue_id,
                why,
            } => match queue_id {
                Some(q) => format!(
                    "portcullis: {what} is held for review (record {record_id}, review item {q}: \
                     `portcullis review show {q}`). {why}"
                ),
                None => format!("portcullis: {what} was blocked (record {record_id}). {why}"),
            },
        }
    }
}

/// Keys of the state store's `meta` table.
pub mod meta {
    /// The audit log of the gateway that uses the store.
    pub const AUDIT_LOG: &str = "audit_log";
    /// Its SQLite index.
    pub const AUDIT_INDEX: &str = "audit_index";
}

/// The stage name of a human decision's record.
pub const STAGE_REVIEW: &str = "review";

/// A tool's definition as its server listed it, shared (behind an `Arc`) by
/// every check of a listing that reads it. A listing of n tools compares each
/// with the n - 1 others, so what those comparisons need of a definition is
/// computed here once, not once per pair.
#[derive(Debug)]
pub struct Listed {
    pub def: Value,
    /// [`pins::hash`] of the definition.
    pub hash: String,
    /// Its description as the copy checks compare descriptions
    /// ([`portcullis_controls::names::squashed_description`]).
    squashed: String,
    /// Its over-privileged parameters, found on the first call that needs them
    /// (every call of the tool reads them; finding them reads the whole schema).
    over_privileged: std::sync::OnceLock<Vec<portcullis_controls::params::OverPrivileged>>,
}

impl Listed {
    pub fn new(def: Value) -> std::sync::Arc<Listed> {
        std::sync::Arc::new(Listed {
            hash: pins::hash(&def),
            squashed: portcullis_controls::names::squashed_description(&def),
            over_privileged: std::sync::OnceLock::new(),
            def,
        })
    }

    /// [`portcullis_controls::params::find`] of the definition, once.
    pub fn over_privileged(&self) -> &[portcullis_controls::params::OverPrivileged] {
        self.over_privileged
            .get_or_init(|| portcullis_controls::params::find(&self.def))
    }
}

/// Which other servers' definitions the copy checks of `def` need: every one
/// when `def` promotes itself (a preference manipulation phrase in a
/// description or title: the promoted-copy check), else those whose
/// description is in its own (the extended-copy check).
pub fn copy_candidates(def: &Listed) -> impl Fn(&Listed) -> bool + '_ {
    let promotes = !portcullis_controls::redirect::preference(&def.def).is_empty();
    move |d: &Listed| promotes || portcullis_controls::names::may_copy(&def.squashed, &d.squashed)
}

/// The decision record of a human decision at review: about the same subject as
/// the record that held the item (channel, server, tool, input digest, the
/// configuration it was decided under), with the human's status and action, and
/// reasons that name the review item, the held record, whether the decision was
/// remembered, and the note. Built by the shared [`gateway_record`] constructor.
pub fn review_record(
    item: &QueueItem,
    approve: bool,
    note: Option<&str>,
    remember: bool,
) -> DecisionRecord {
    let held: Option<DecisionRecord> = serde_json::from_value(item.record.clone()).ok();
    let (channel, config_hash, thresholds, input, tool) = match &held {
        Some(r) => (
            r.channel,
            r.config_hash.clone(),
            r.thresholds,
            InputDigest {
                sha256: r.input_sha256.clone(),
                len: r.input_len,
            },
            r.tool.clone(),
        ),
        None => {
            // An item filed without a record (not by a gateway): the defaults.
            let c = portcullis_core::Config::default();
            let channel = match item.kind.as_str() {
                store::kind::CALL => Channel::ToolArguments,
                store::kind::RESULT => Channel::ToolResult,
                _ => Channel::ToolDefinition,
            };
            (
                channel,
                c.hash_with(""),
                c.thresholds,
                InputDigest::of(&item.fingerprint),
                Some(item.name.clone()),
            )
        }
    };
    let (status, action, label, score) = if approve {
        (Status::Allow, Action::Pass, "approved", 0.0)
    } else {
        (Status::Block, Action::Deny, "denied", 1.0)
    };
    let mut reasons = vec![format!(
        "review: {label} by a human: review item {} ({} {}/{}), held by record {}",
        item.id, item.kind, item.server, item.name, item.record_id
    )];
    reasons.push(if remember {
        format!(
            "review: remembered: allowlist entries written for {}",
            if item.allow_keys.is_empty() {
                "nothing (the item has no allowlist keys)".to_string()
            } else {
                item.allow_keys.join(", ")
            }
        )
    } else {
        "review: not remembered (this item only)".to_string()
    });
    if let Some(n) = note {
        reasons.push(format!("review: note: {n}"));
    }
    let stage = StageOutput {
        name: STAGE_REVIEW.into(),
        score,
        label: label.into(),
        findings: Vec::new(),
        latency_us: 0,
        evidence: None,
    };
    gateway_record(
        RecordHeader {
            meta: RecordMeta {
                id: uuid::Uuid::new_v4().to_string(),
                position: 0,
            },
            config_hash,
            thresholds,
        },
        channel,
        Some(&item.server),
        tool.as_deref(),
        input,
        vec![stage],
        score,
        (status, action),
        reasons,
    )
}

/// The review item holding exactly one version of a definition (pending, or
/// denied), as the verdict names it.
struct HeldItem {
    queue_id: i64,
    record_id: String,
    why: String,
}

/// Taint labels the writer keeps while the store cannot take them.
const MAX_UNWRITTEN_LABELS: usize = 65_536;

/// Labels read back from the state store, into the in-memory labels (a result's
/// label of a name real software shares, an older gateway's, is refused by the
/// taint store as a new one would be).
fn add_stored(taint: &mut TaintStore, labels: Vec<store::StoredLabel>) {
    for k in labels {
        match &k.value {
            Some(v) => taint.add_seen(v, k.label, k.seen),
            None => taint.add_hashed(&k.digest, &k.hint, k.label, k.seen),
        }
    }
}

/// Pins, queue, taint, records.
#[derive(Debug)]
pub struct Structural {
    store: Store,
    config: GatewayConfig,
    /// Each server's launch in this run, with its hash.
    launches: HashMap<String, (String, Launch)>,
    /// Servers whose launch changed since their last run.
    launch_changes: HashMap<String, LaunchChange>,
    taint: Mutex<TaintStore>,
    taint_writer: TaintWriter,
    /// On a shared store, the revision of the last label read back from it
    /// (labels other gateways wrote are read before each egress check).
    taint_cursor: Mutex<i64>,
    /// Held definitions (server, kind, name, hash) this process has recorded a
    /// hold of.
    holds_recorded: Mutex<HashSet<(String, String, String, String)>>,
    definitions: Mutex<DefinitionValues>,
}

/// Persists taint labels on its own thread and connection, a group per
/// transaction: the in-memory labels enforce at once, the stored ones are for
/// the next start. Dropping it writes what is still queued.
#[derive(Debug)]
struct TaintWriter {
    tx: Option<std::sync::mpsc::Sender<TaintMsg>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
enum TaintMsg {
    Labels(Vec<(String, Label)>),
    /// Answered once everything queued before it is written.
    Flush(std::sync::mpsc::Sender<()>),
}

impl TaintWriter {
    fn start(config: &GatewayConfig) -> Result<TaintWriter, StoreError> {
        if !config.taint.enabled {
            return Ok(TaintWriter {
                tx: None,
                thread: None,
            });
        }
        let at = config.state_location();
        let store = Store::connect(&at)?;
        let config = config.clone();
        let (tx, rx) = std::sync::mpsc::channel::<TaintMsg>();
        // A group that could not be written (the store unreachable) is kept and
        // tried again every second, so other gateways on a shared store learn
        // its labels once it is back; meanwhile they hold in this one's memory.
        let mut failing = false;
        let mut write = move |group: &mut Vec<(String, Label)>| {
            if group.is_empty() {
                return;
            }
            match store.put_taint(
                group,
                portcullis_controls::taint::now_secs(),
                config.taint.max_values,
                taint_cutoff(&config),
            ) {
                Ok(()) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!(labels = group.len(), "taint labels persisted again");
                    }
                    group.clear();
                }
                Err(e) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::error!(error = %e, labels = group.len(),
                            "taint labels not persisted; retried every second");
                    }
                    if group.len() > MAX_UNWRITTEN_LABELS {
                        let over = group.len() - MAX_UNWRITTEN_LABELS;
                        group.drain(..over);
                        tracing::error!(
                            dropped = over,
                            "taint labels never persisted \
                            (the oldest, beyond {MAX_UNWRITTEN_LABELS} waiting)"
                        );
                    }
                }
            }
        };
        let thread = std::thread::Builder::new()
            .name("portcullis-taint".into())
            .spawn(move || {
                use std::sync::mpsc::RecvTimeoutError;
                let mut group = Vec::new();
                loop {
                    let first = if group.is_empty() {
                        match rx.recv() {
                            Ok(m) => m,
                            Err(_) => break,
                        }
                    } else {
                        match rx.recv_timeout(std::time::Duration::from_secs(1)) {
                            Ok(m) => m,
                            Err(RecvTimeoutError::Timeout) => {
                                write(&mut group);
                                continue;
                            }
                            Err(RecvTimeoutError::Disconnected) => break,
                        }
                    };
                    // Everything queued now shares one transaction.
                    let mut next = Some(first);
                    while let Some(msg) = next.take() {
                        match msg {
                            TaintMsg::Labels(l) => group.extend(l),
                            TaintMsg::Flush(ack) => {
                                write(&mut group);
                                let _ = ack.send(());
                            }
                        }
                        if group.len() < 65_536 {
                            next = rx.try_recv().ok();
                        }
                    }
                    write(&mut group);
                }
                write(&mut group);
            })
            .map_err(|e| StoreError::Io {
                path: at.to_string().into(),
                message: format!("start the taint writer: {e}"),
            })?;
        Ok(TaintWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    fn send(&self, labels: Vec<(String, Label)>) {
        if let Some(tx) = &self.tx {
            if tx.send(TaintMsg::Labels(labels)).is_err() {
                tracing::error!("taint writer gone; labels held in memory only");
            }
        }
    }

    /// Block until everything sent so far is in the store.
    fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (ack, done) = std::sync::mpsc::channel();
            if tx.send(TaintMsg::Flush(ack)).is_ok() {
                let _ = done.recv();
            }
        }
    }
}

impl Drop for TaintWriter {
    fn drop(&mut self) {
        // Closing the channel ends the writer after it has drained every group.
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the metadata controls decided about one tool or prompt definition.
#[derive(Debug, Clone)]
pub struct ToolDecision {
    pub verdict: Verdict,
    /// The definition to show (over-privileged parameters stripped).
    pub shown: Value,
    /// Whether the tool is hidden (names policy `hide`), not held.
    pub hidden: bool,
}

/// Another tool (of another server, or a sibling), for name comparisons; a
/// sibling's definition too, for the copy check.
#[derive(Debug, Clone)]
pub struct OtherTool {
    pub server: String,
    pub relation: Relation,
    pub name: String,
    pub def: Option<std::sync::Arc<Listed>>,
}

/// What the egress controls found on one call, as they find it.
#[derive(Debug)]
struct CallFindings {
    findings: Vec<Finding>,
    reasons: Vec<String>,
    /// What a remembered approval of the call is keyed by.
    allow_keys: Vec<String>,
    /// The strongest action of any finding.
    action: FlowAction,
    /// Each tainted value's way from its origin to this call, for the review item.
    taint_path: Vec<Value>,
}

impl Default for CallFindings {
    fn default() -> Self {
        CallFindings {
            findings: Vec::new(),
            reasons: Vec::new(),
            allow_keys: Vec::new(),
            action: FlowAction::Allow,
            taint_path: Vec::new(),
        }
    }
}

/// A taint finding's severity: low when its flow is allowed.
fn flow_severity(a: FlowAction) -> Severity {
    if a == FlowAction::Allow {
        Severity::Low
    } else {
        Severity::High
    }
}

impl Structural {
    /// Open the state store and load the taint labels it keeps (so a value
    /// read before a restart is still caught); `canaries` (the detector's) and
    /// the configured secret environment variables are labelled sensitive from
    /// the start.
    pub fn open(config: &GatewayConfig, canaries: &[String]) -> Result<Structural, StoreError> {
        let store = Store::connect(&config.state_location())?;
        let mut taint = TaintStore::new(config.taint.max_values, config.taint.min_len)
            .with_ttl(config.taint.ttl_secs);
        if config.taint.enabled {
            let kept = store.taint_labels(config.taint.max_values, taint_cutoff(config))?;
            tracing::debug!(
                labels = kept.len(),
                "taint labels loaded from the state store"
            );
            add_stored(&mut taint, kept);
        }
        let label = |what: &str| Label {
            server: "config".into(),
            tool: what.into(),
            record_id: "config".into(),
            sensitive: true,
            source: "config",
        };
        for c in canaries {
            taint.add(c, label("canary"));
        }
        for var in &config.taint.secret_env {
            if let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
                taint.add(&v, label(var));
            }
        }
        // `portcullis review` appends its decision records to this gateway's
        // audit log: the store says where it is.
        let absolute = |p: &std::path::Path| {
            std::path::absolute(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        };
        store.set_meta(meta::AUDIT_LOG, &absolute(&config.audit.log))?;
        store.set_meta(meta::AUDIT_INDEX, &absolute(&config.audit.index_path()))?;
        // Each server's launch, against the one it last ran with: a change is
        // said here, once per start, and again on every definition it changed.
        let mut launches = HashMap::new();
        let mut launch_changes = HashMap::new();
        for s in &config.servers {
            let launch = s.launch();
            let hash = launch.hash();
            if let Some((before_hash, before)) = store.record_launch(&s.name, &launch)? {
                let change = LaunchChange {
                    before,
                    before_hash,
                    after: launch.clone(),
                    after_hash: hash.clone(),
                };
                tracing::warn!(
                    server = %s.name,
                    "the server's launch changed since its last run: {}; a definition that \
                     changed with it is held for review as a launch change \
                     (`portcullis review list`)",
                    change.describe()
                );
                launch_changes.insert(s.name.clone(), change);
            }
            launches.insert(s.name.clone(), (hash, launch));
        }
        Ok(Structural {
            store,
            config: config.clone(),
            launches,
            launch_changes,
            taint: Mutex::new(taint),
            taint_writer: TaintWriter::start(config)?,
            taint_cursor: Mutex::new(0),
            holds_recorded: Mutex::new(HashSet::new()),
            definitions: Mutex::new(DefinitionValues::new(config.taint.min_len)),
        })
    }

    /// The definitions `server` just listed that the client was shown, `(tool,
    /// definition)`: their values are what [`portcullis_controls::operands`] matches calls against.
    pub fn listed_definitions<'a>(
        &self,
        server: &str,
        tools: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) {
        if self.config.taint.enabled {
            self.definitions().listed(server, tools);
        }
    }

    /// The URIs of the resources `server` listed and the gateway forwarded: a
    /// definition that names one of them names the server's own resource, and a
    /// call to that server that reads it is not steered by the definition.
    pub fn listed_resources<'a>(&self, server: &str, uris: impl IntoIterator<Item = &'a str>) {
        if self.config.taint.enabled {
            self.definitions().resources(server, uris);
        }
    }

    /// The `initialize` instructions of `server` as the client was shown them.
    pub fn shown_instructions(&self, server: &str, text: &str) {
        if self.config.taint.enabled {
            self.definitions().instructions(server, text);
        }
    }

    fn definitions(&self) -> std::sync::MutexGuard<'_, DefinitionValues> {
        self.definitions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The launch change of `server` seen at this start, if its launch changed
    /// since its last run.
    pub fn launch_change(&self, server: &str) -> Option<&LaunchChange> {
        self.launch_changes.get(server)
    }

    /// The hash of `server`'s launch in this run.
    fn launch_hash(&self, server: &str) -> Option<&str> {
        self.launches.get(server).map(|(h, _)| h.as_str())
    }

    /// The launch change between the launch `pin` was made under and this run's,
    /// when both are known and differ.
    fn launch_change_since(
        &self,
        server: &str,
        pin: &store::Pin,
    ) -> Result<Option<LaunchChange>, StoreError> {
        let (Some(before_hash), Some((after_hash, after))) =
            (pin.launch.as_deref(), self.launches.get(server))
        else {
            return Ok(None);
        };
        if before_hash == after_hash {
            return Ok(None);
        }
        Ok(self
            .store
            .launch(server, before_hash)?
            .map(|before| LaunchChange {
                before,
                before_hash: before_hash.to_string(),
                after: after.clone(),
                after_hash: after_hash.clone(),
            }))
    }

    /// Write the taint labels still queued to the state store (at shutdown).
    pub fn flush_taint(&self) {
        self.taint_writer.flush();
    }

    fn taint(&self) -> std::sync::MutexGuard<'_, TaintStore> {
        self.taint.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this is the first time this process records a hold of this
    /// version of a definition (and from now on, it is not).
    fn first_hold_here(&self, server: &str, kind: &str, name: &str, hash: &str) -> bool {
        self.holds_recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((server.into(), kind.into(), name.into(), hash.into()))
    }

    /// On a store shared with other gateways, add the labels they (and this
    /// one's writer) stored since the last read, so a value one gateway saw
    /// is caught leaving through another. An unreachable store is an error:
    /// the check fails closed.
    fn sync_taint(&self) -> Result<(), StoreError> {
        if !(self.config.taint.enabled && self.store.is_shared()) {
            return Ok(());
        }
        let mut cursor = self.taint_cursor.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((labels, next)) = self.store.taint_since(*cursor)? {
            let done = labels.len() < store::TAINT_PAGE || next == *cursor;
            add_stored(&mut self.taint(), labels);
            *cursor = next;
            if done {
                break;
            }
        }
        Ok(())
    }

    /// Names, over-privileged parameters and preference manipulation on one
    /// (pinned) tool or prompt definition ([`portcullis_controls::metadata::check`], the
    /// function `audit` uses too), then approvals, the review queue and the
    /// record. `log` says whether to write the record (once per distinct
    /// definition and context; the gateway remembers which).
    #[allow(clippy::too_many_arguments)]
    pub async fn definition_metadata(
        &self,
        inspector: &Inspector,
        kind: DefinitionKind,
        server: &str,
        name: &str,
        raw: &Value,
        shown: Value,
        others: &[OtherTool],
        log: bool,
    ) -> Result<ToolDecision, StructuralError> {
        let mut shown = shown;
        let checked = portcullis_controls::metadata::check(
            kind,
            name,
            raw,
            others.iter().map(|o| Neighbour {
                server: &o.server,
                name: &o.name,
                relation: o.relation,
                def: o.def.as_deref().map(|l| &l.def),
            }),
            MetadataPolicy {
                names: &self.config.names,
                params: &self.config.params,
                redirection: &self.config.redirection,
            },
        );
        if checked.is_empty() {
            return Ok(ToolDecision {
                verdict: Verdict::Pass,
                shown,
                hidden: false,
            });
        }
        // Usually already stripped before inspection; idempotent.
        portcullis_controls::params::strip(&mut shown, &checked.strip);
        let mut checked = checked;
        let fp = pins::hash(raw);
        if checked.hold {
            let approved = self
                .store
                .latest(store::kind::METADATA, server, name, &fp)?
                .is_some_and(|i| i.status == store::APPROVED)
                || self
                    .store
                    .remembered("allow", store::kind::METADATA, server, name, &fp)?;
            if approved {
                checked.hold = false;
                checked.reasons.push("approved at review".into());
            }
        }
        let (status, act) = checked.decision();
        let MetadataFindings {
            findings,
            reasons,
            hold,
            hide,
            ..
        } = checked;
        if hold {
            if let Some(existing) = self
                .store
                .latest(store::kind::METADATA, server, name, &fp)?
            {
                if existing.status != store::APPROVED {
                    return Ok(ToolDecision {
                        verdict: Verdict::Held {
                            record_id: existing.record_id,
                            queue_id: Some(existing.id),
                            why: existing.summary,
                        },
                        shown,
                        hidden: false,
                    });
                }
            }
        }
        if !log && !hold {
            return Ok(ToolDecision {
                verdict: if hide {
                    Verdict::Held {
                        record_id: String::new(),
                        queue_id: None,
                        why: "hidden by the names policy".into(),
                    }
                } else {
                    Verdict::Pass
                },
                shown,
                hidden: hide,
            });
        }
        let record = inspector
            .structural(
                kind.channel(),
                server,
                Some(name),
                raw,
                findings.clone(),
                status,
                act,
                reasons.clone(),
            )
            .await?;
        if hold {
            let (_, v) = self.file(NewItem {
                kind: store::kind::METADATA.into(),
                server: server.into(),
                name: name.into(),
                fingerprint: fp,
                record_id: record.id.clone(),
                summary: reasons.join("; "),
                findings: serde_json::to_value(&findings).unwrap_or(Value::Null),
                diff: Value::Null,
                detail: json!({ "definition": raw }),
                allow_keys: vec!["*".into()],
                record: serde_json::to_value(&record).unwrap_or(Value::Null),
            })?;
            return Ok(ToolDecision {
                verdict: v,
                shown,
                hidden: false,
            });
        }
        Ok(ToolDecision {
            verdict: if hide {
                Verdict::Held {
                    record_id: record.id,
                    queue_id: None,
                    why: "hidden by the names policy".into(),
                }
            } else {
                Verdict::Pass
            },
            shown,
            hidden: hide,
        })
    }

    /// Egress controls on one call: over-privileged parameters filled, labelled
    /// values flowing to another server or a sink. `Pass` forwards the call.
    pub async fn call(
        &self,
        inspector: &Inspector,
        server: &str,
        tool: &str,
        def: Option<&Listed>,
        args: &Value,
    ) -> Result<Verdict, StructuralError> {
        let mut flow = CallFindings::default();
        if let (true, Some(def)) = (self.config.params.enabled, def) {
            self.filled_parameters(&mut flow, server, tool, def, args)?;
        }
        if self.config.taint.enabled {
            self.tainted_values(&mut flow, server, tool, def.map(|l| &l.def), args)?;
        }
        let CallFindings {
            findings,
            mut reasons,
            allow_keys,
            mut action,
            taint_path,
        } = flow;
        if findings.is_empty() {
            return Ok(Verdict::Pass);
        }
        // Only a call with findings needs its fingerprint (hashing every call's
        // arguments cost a copy and a digest of each, 64 KiB ones included).
        let fp = pins::hash(&json!({"server": server, "tool": tool, "arguments": args}));
        if action != FlowAction::Allow {
            if let Some(item) = self.store.take_call_approval(server, tool, &fp)? {
                reasons.push(format!("approved at review (item {})", item.id));
                action = FlowAction::Allow;
            }
        }
        let (status, act) = match action {
            FlowAction::Allow => (Status::Allow, Action::Pass),
            FlowAction::Hold => (Status::Review, Action::Hold),
            FlowAction::Block => (Status::Block, Action::Deny),
        };
        let record = inspector
            .structural(
                Channel::ToolArguments,
                server,
                Some(tool),
                args,
                findings.clone(),
                status,
                act,
                reasons.clone(),
            )
            .await?;
        match action {
            FlowAction::Allow => Ok(Verdict::Pass),
            FlowAction::Block => Ok(Verdict::Held {
                record_id: record.id,
                queue_id: None,
                why: reasons.join("; "),
            }),
            FlowAction::Hold => {
                let (item, v) = self.file(NewItem {
                    kind: store::kind::CALL.into(),
                    server: server.into(),
                    name: tool.into(),
                    fingerprint: fp.clone(),
                    record_id: record.id.clone(),
                    summary: reasons.join("; "),
                    findings: serde_json::to_value(&findings).unwrap_or(Value::Null),
                    diff: Value::Null,
                    detail: json!({
                        "taint": taint_path,
                        "arguments_sha256": portcullis_core::sha256_hex(pins::canonical(args).as_bytes()),
                    }),
                    allow_keys,
                    record: serde_json::to_value(&record).unwrap_or(Value::Null),
                })?;
                if self.config.review.call_timeout_secs == 0 {
                    return Ok(v);
                }
                self.wait_for_review(item, server, tool, &fp).await
            }
        }
    }

    /// Over-privileged parameters the call fills (unless `params.action = "flag"`
    /// or an approval is remembered for the parameter): held.
    fn filled_parameters(
        &self,
        flow: &mut CallFindings,
        server: &str,
        tool: &str,
        def: &Listed,
        args: &Value,
    ) -> Result<(), StructuralError> {
        if self.config.params.action == ParamAction::Flag {
            return Ok(());
        }
        for o in def.over_privileged() {
            // A credential the tool requires is its input; the egress guard
            // has already judged the value.
            if o.kept() && self.config.params.action == ParamAction::Strip {
                continue;
            }
            let Some(ap) = &o.arg_path else { continue };
            if !portcullis_controls::params::filled(args, ap) {
                continue;
            }
            if self
                .store
                .remembered("allow", store::kind::CALL, server, tool, &o.path)?
            {
                continue;
            }
            let arg = ap.iter().fold("$".to_string(), |p, s| {
                if s == "[]" {
                    format!("{p}[*]")
                } else {
                    format!("{p}{}", key_segment(s))
                }
            });
            flow.findings.push(finding(
                &format!("op.{}", o.category),
                "over_privileged_parameter",
                Severity::High,
                &arg,
                format!("fills {} (schema {})", o.category.replace('_', " "), o.path),
            ));
            flow.reasons.push(format!(
                "params: the call fills the over-privileged parameter {arg} ({})",
                o.category.replace('_', " ")
            ));
            flow.allow_keys.push(o.path.clone());
            flow.action = flow.action.max(FlowAction::Hold);
        }
        Ok(())
    }

    /// Values of the arguments that a server returned earlier (taint labels) or
    /// that another tool's definition wrote (operands), each under its flow rule.
    fn tainted_values(
        &self,
        flow: &mut CallFindings,
        server: &str,
        tool: &str,
        def: Option<&Value>,
        args: &Value,
    ) -> Result<(), StructuralError> {
        self.sync_taint()?;
        let matches = {
            let mut t = self.taint();
            let m = t.matches(args);
            t.add_sent(args);
            m
        };
        let class = portcullis_controls::taint::class_of(&self.config.taint, server, tool, def);
        let sink = class == ToolClass::Sink;
        let from_definitions = self.definitions().matches(server, tool, args);
        // Data of this server's own, sent out through it to a destination the
        // client wrote (the flow `taint.client_destination`).
        let destination = if sink
            && matches
                .iter()
                .all(|m| m.label.server == server && !m.label.sensitive)
        {
            let steered: Vec<&str> = from_definitions
                .iter()
                .map(|m| m.arg_path.as_str())
                .collect();
            portcullis_controls::destination::client_named(args, &matches, &steered, &self.taint())
        } else {
            None
        };
        for m in matches {
            let cross = m.label.server != server;
            let (rule, a) = flow_rule(&self.config.taint, &m, cross, sink, destination.as_ref());
            // Remembering a name of code allows names of code, not the origin's
            // data; remembering the origin's data covers its names of code too.
            let data_key = format!("taint:{}/{}", m.label.server, m.label.tool);
            let (key, a) = match rule {
                "taint.code_name" => {
                    let key = format!("taint-name:{}/{}", m.label.server, m.label.tool);
                    let a = self.unless_remembered(a, server, tool, &data_key)?;
                    (key.clone(), self.unless_remembered(a, server, tool, &key)?)
                }
                _ => (
                    data_key.clone(),
                    self.unless_remembered(a, server, tool, &data_key)?,
                ),
            };
            let source = format!(
                "{}/{} (record {}{})",
                m.label.server,
                m.label.tool,
                m.label.record_id,
                if m.label.sensitive { ", sensitive" } else { "" }
            );
            flow.findings.push(finding(
                rule,
                "taint",
                flow_severity(a),
                &m.arg_path,
                format!("value {} from {source}, {}", m.hint, m.how),
            ));
            let to = match (&destination, rule) {
                (Some(d), "taint.client_destination") => format!(
                    ", to the destination the client wrote at {}{}",
                    d.path,
                    if d.on_a_named_host {
                        ", on a host a labelled value names"
                    } else {
                        ""
                    }
                ),
                _ => String::new(),
            };
            flow.reasons.push(format!(
                "taint: {} carries a value from {source} ({}) into {server}/{tool} ({}{to}); {:?}",
                m.arg_path,
                m.how,
                if sink { "a sink" } else { "not a sink" },
                a
            ));
            flow.taint_path.push(json!({
                "argument": m.arg_path, "encoding": m.how, "value": m.hint,
                "origin_server": m.label.server, "origin_tool": m.label.tool,
                "origin_record": m.label.record_id, "sensitive": m.label.sensitive,
                "source": m.label.source, "target_server": server, "target_tool": tool,
                "target_class": if sink { "sink" } else { "normal" }, "rule": rule,
            }));
            flow.allow_keys.push(key);
            flow.action = flow.action.max(a);
        }
        for m in from_definitions {
            let key = format!("definition:{}/{}", m.origin_server, m.origin_tool);
            let a = self.unless_remembered(self.config.taint.definition, server, tool, &key)?;
            let source = m.source();
            flow.findings.push(finding(
                "taint.definition",
                "taint",
                flow_severity(a),
                &m.arg_path,
                format!("value {} written in {source}", m.hint),
            ));
            flow.reasons.push(format!(
                "taint: {} carries a value written in {source} into {server}/{tool}; {:?}",
                m.arg_path, a
            ));
            flow.taint_path.push(json!({
                "argument": m.arg_path, "encoding": "token", "value": m.hint,
                "origin_server": m.origin_server, "origin_tool": m.origin_tool,
                "origin_record": null, "sensitive": false, "source": "definition",
                "target_server": server, "target_tool": tool,
                "target_class": if sink { "sink" } else { "normal" },
                "rule": "taint.definition",
            }));
            flow.allow_keys.push(key);
            flow.action = flow.action.max(a);
        }
        Ok(())
    }

    /// A held call waits up to `review.call_timeout_secs` for its review item's
    /// decision, then fails closed.
    async fn wait_for_review(
        &self,
        item: QueueItem,
        server: &str,
        tool: &str,
        fp: &str,
    ) -> Result<Verdict, StructuralError> {
        let wait = self.config.review.call_timeout_secs;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(wait);
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            match self.store.item(item.id)?.map(|i| i.status) {
                Some(s)
                    if s == store::APPROVED
                        && self.store.take_call_approval(server, tool, fp)?.is_some() =>
                {
                    return Ok(Verdict::Pass);
                }
                Some(s) if s == store::DENIED => {
                    return Ok(Verdict::Held {
                        record_id: item.record_id,
                        queue_id: Some(item.id),
                        why: "denied at review".into(),
                    })
                }
                _ => {}
            }
        }
        Ok(Verdict::Held {
            record_id: item.record_id,
            queue_id: Some(item.id),
            why: format!("no decision within review.call_timeout_secs = {wait}; failed closed"),
        })
    }

    /// A forwarded tool result: tool transfer (TT) check, then its values are
    /// labelled. `raw` is the result as the server sent it, `unmasked` as it was
    /// forwarded before the output guard's masks (`raw` unless the gateway cut
    /// flagged text out of it), `shown` as forwarded (a token the output guard
    /// masked is labelled sensitive).
    #[allow(clippy::too_many_arguments)]
    pub async fn result(
        &self,
        inspector: &Inspector,
        server: &str,
        tool: &str,
        args: &Value,
        (raw, unmasked): (&Value, &Value),
        shown: &Value,
        known: &[String],
        record_id: Option<&str>,
    ) -> Result<Verdict, StructuralError> {
        let red = &self.config.redirection;
        if red.enabled {
            let hits = portcullis_controls::redirect::transfer(shown, tool, args, known);
            if !hits.is_empty() {
                let fp = pins::hash(raw);
                let hold = red.tool_transfer >= red.hold_at
                    && self
                        .store
                        .latest(store::kind::RESULT, server, tool, &fp)?
                        .is_none_or(|i| i.status != store::APPROVED)
                    && !self
                        .store
                        .remembered("allow", store::kind::RESULT, server, tool, &fp)?;
                let findings: Vec<Finding> = hits
                    .iter()
                    .map(|h| {
                        let mut f = finding(
                            "tt.redirect",
                            "tool_transfer",
                            red.tool_transfer,
                            &h.path,
                            format!("{:?} -> {}", h.phrase, h.target.as_deref().unwrap_or("?")),
                        );
                        f.span = h.span;
                        f
                    })
                    .collect();
                // The reason reaches the model in the notice: it must not name the
                // tool the result redirects to (the attacker's choice, which a model
                // could follow from the notice itself). The findings, in the audit
                // record and at review, do.
                let reason = format!(
                    "redirection: the result sends the model to another tool; severity {}",
                    red.tool_transfer.as_str()
                );
                let pending = if hold {
                    self.store
                        .latest(store::kind::RESULT, server, tool, &fp)?
                        .filter(|i| i.status == store::PENDING)
                } else {
                    None
                };
                if let Some(p) = pending {
                    return Ok(Verdict::Held {
                        record_id: p.record_id,
                        queue_id: Some(p.id),
                        why: p.summary,
                    });
                }
                let (status, act) = if hold {
                    (Status::Review, Action::Hold)
                } else {
                    (Status::Allow, Action::Pass)
                };
                let record = inspector
                    .structural(
                        Channel::ToolResult,
                        server,
                        Some(tool),
                        raw,
                        findings.clone(),
                        status,
                        act,
                        vec![reason.clone()],
                    )
                    .await?;
                if hold {
                    let (_, v) = self.file(NewItem {
                        kind: store::kind::RESULT.into(),
                        server: server.into(),
                        name: tool.into(),
                        fingerprint: fp,
                        record_id: record.id.clone(),
                        summary: reason,
                        findings: serde_json::to_value(&findings).unwrap_or(Value::Null),
                        diff: Value::Null,
                        detail: json!({ "result": shown }),
                        allow_keys: vec!["*".into()],
                        record: serde_json::to_value(&record).unwrap_or(Value::Null),
                    })?;
                    return Ok(v);
                }
            }
        }
        if self.config.taint.enabled {
            let label = Label {
                server: server.into(),
                tool: tool.into(),
                record_id: record_id.unwrap_or("").into(),
                sensitive: false,
                source: "result",
            };
            // What the gateway cut out of the result was never shown and is no
            // masked secret: only the output guard's masks make a token sensitive.
            let labelled = self.taint().label_result(unmasked, shown, &label);
            // Persisted behind the call, so the labels survive a restart
            // (bounded and expiring like the in-memory ones) without a store
            // write on the result's path.
            if !labelled.is_empty() {
                self.taint_writer.send(labelled);
            }
        }
        Ok(Verdict::Pass)
    }

    /// Check one listed definition against its pin. `listed` are the names the
    /// server lists now (a pinned name no longer listed may have been renamed).
    /// `live`: `definition` is what the server lists now (not the pinned version
    /// shown in place of a held one, which must not move the pin to this launch).
    #[allow(clippy::too_many_arguments)]
    pub async fn check_definition(
        &self,
        inspector: &Inspector,
        channel: Channel,
        server: &str,
        kind: &str,
        name: &str,
        definition: &Value,
        listed: &[String],
        detector: Option<&DecisionRecord>,
        live: bool,
    ) -> Result<Verdict, StructuralError> {
        if !self.config.pins.enabled {
            return Ok(Verdict::Pass);
        }
        let hash = pins::hash(definition);
        let launch = self.launch_hash(server).map(str::to_string);
        let Some((what, changes, previous)) = self
            .settle_known(
                inspector,
                channel,
                server,
                kind,
                name,
                definition,
                listed,
                &hash,
                launch.as_deref(),
                live,
            )
            .await?
        else {
            return Ok(Verdict::Pass);
        };
        // Held: reuse the pending (or denied) item for exactly this version.
        if let Some(held) = self.held_already(server, name, &hash)? {
            if self.first_hold_here(server, kind, name, &hash) {
                // Filed by another gateway on the shared store, or by an earlier
                // run: this gateway records its own hold once, naming the item,
                // so its log explains what it withholds.
                let (what, rule, _) =
                    self.hold_summary(what, kind, name, &changes, previous.as_ref(), None);
                inspector
                    .structural(
                        channel,
                        server,
                        Some(name),
                        definition,
                        hold_findings(what, rule, name, &changes),
                        Status::Review,
                        Action::Hold,
                        vec![format!(
                            "{} (review item {}, filed with record {})",
                            held.why, held.queue_id, held.record_id
                        )],
                    )
                    .await?;
            }
            return Ok(Verdict::Held {
                record_id: held.record_id,
                queue_id: Some(held.queue_id),
                why: held.why,
            });
        }
        // A definition that changed (or was renamed) together with the server's
        // launch is filed as such: still held, but not presented as a rug pull.
        let launch_change = match &previous {
            Some(p) => self.launch_change_since(server, p)?,
            None => None,
        };
        let (what, rule, summary) = self.hold_summary(
            what,
            kind,
            name,
            &changes,
            previous.as_ref(),
            launch_change.as_ref(),
        );
        let findings = hold_findings(what, rule, name, &changes);
        let record = inspector
            .structural(
                channel,
                server,
                Some(name),
                definition,
                findings.clone(),
                Status::Review,
                Action::Hold,
                vec![summary.clone()],
            )
            .await?;
        self.first_hold_here(server, kind, name, &hash);
        let item = self.file_definition_hold(DefinitionHold {
            server,
            kind,
            name,
            definition,
            hash: &hash,
            what,
            summary: &summary,
            findings: &findings,
            detector,
            changes: &changes,
            previous: previous.as_ref(),
            launch: launch.as_deref(),
            launch_change: launch_change.as_ref(),
            record: &record,
        })?;
        Ok(Verdict::Held {
            record_id: item.record_id,
            queue_id: Some(item.id),
            why: summary,
        })
    }

    /// A listed definition against its pin: `None` when it passes (unchanged, re-pinned
    /// under a remembered approval, or pinned at first sight), else what is held
    /// ("changed", "renamed" or "new"), the changes and the pin it is compared with.
    #[allow(clippy::too_many_arguments)]
    async fn settle_known(
        &self,
        inspector: &Inspector,
        channel: Channel,
        server: &str,
        kind: &str,
        name: &str,
        definition: &Value,
        listed: &[String],
        hash: &str,
        launch: Option<&str>,
        live: bool,
    ) -> Result<Option<(&'static str, Vec<pins::Change>, Option<store::Pin>)>, StructuralError>
    {
        let compared = pins::compare(
            &self.store,
            server,
            kind,
            name,
            definition,
            listed,
            self.config.pins.rename_similarity,
        )?;
        Ok(match compared {
            pins::Compared::Unchanged(p) => {
                // Unchanged under a new launch: the pin belongs to this launch now.
                if let Some(l) = launch.filter(|l| live && p.launch.as_deref() != Some(*l)) {
                    self.store.set_pin_launch(server, kind, name, l)?;
                }
                return Ok(None);
            }
            pins::Compared::Changed(p, changes) => {
                if self
                    .store
                    .remembered("allow", store::kind::DEFINITION, server, name, hash)?
                {
                    // A remembered approval: every later change of this
                    // definition is pinned without review, and recorded.
                    self.store
                        .set_pin(server, kind, name, hash, definition, launch)?;
                    inspector
                        .structural(
                            channel,
                            server,
                            Some(name),
                            definition,
                            change_findings("pin.changed", &changes),
                            Status::Allow,
                            Action::Pass,
                            vec![format!(
                                "the {kind} definition changed since it was pinned; re-pinned \
                                 under a remembered approval"
                            )],
                        )
                        .await?;
                    return Ok(None);
                }
                Some(("changed", changes, Some(p)))
            }
            pins::Compared::Renamed(p, changes) => Some(("renamed", changes, Some(p))),
            pins::Compared::New if self.config.pins.first_sight == FirstSight::Pin => {
                // Another gateway on a shared store may have pinned another
                // version first: then this one is a change of that pin.
                match self
                    .store
                    .pin_first(server, kind, name, hash, definition, launch)?
                {
                    None => return Ok(None),
                    Some(p) if p.hash == hash => return Ok(None),
                    Some(p) => {
                        let changes = pins::diff(&p.definition, definition);
                        Some(("changed", changes, Some(p)))
                    }
                }
            }
            pins::Compared::New => Some(("new", Vec::new(), None)),
        })
    }
    /// Files the review item of a held definition (its findings with the
    /// detector's, the diff, both versions and the launch) and says so in the log
    /// when the server's launch changed too.
    fn file_definition_hold(&self, h: DefinitionHold<'_>) -> Result<QueueItem, StoreError> {
        let mut all_findings = serde_json::to_value(h.findings).unwrap_or(Value::Null);
        if let (Some(d), Value::Array(a)) = (h.detector, &mut all_findings) {
            for f in d.findings() {
                a.push(serde_json::to_value(f).unwrap_or(Value::Null));
            }
        }
        let (item, _) = self.store.enqueue(NewItem {
            kind: store::kind::DEFINITION.into(),
            server: h.server.into(),
            name: h.name.into(),
            fingerprint: h.hash.into(),
            record_id: h.record.id.clone(),
            summary: h.summary.into(),
            findings: all_findings,
            diff: serde_json::to_value(h.changes).unwrap_or(Value::Null),
            detail: json!({
                "pin_kind": h.kind,
                "change": h.what,
                "hash": h.hash,
                "definition": h.definition,
                "previous_name": h.previous.map(|p| p.name.clone()),
                "previous_hash": h.previous.map(|p| p.hash.clone()),
                "previous_definition": h.previous.map(|p| p.definition.clone()),
                "launch_hash": h.launch,
                "launch": h.launch_change.map(LaunchChange::detail),
            }),
            allow_keys: vec!["*".into()],
            record: serde_json::to_value(h.record).unwrap_or(Value::Null),
        })?;
        if h.launch_change.is_some() {
            tracing::warn!(
                server = h.server,
                item = item.id,
                "{}: `portcullis review show {}`, then approve or deny it",
                h.summary,
                item.id
            );
        }
        Ok(item)
    }

    /// The pending or denied review item of exactly this version of a
    /// definition, as the verdict to give again; `None` if there is none.
    fn held_already(
        &self,
        server: &str,
        name: &str,
        hash: &str,
    ) -> Result<Option<HeldItem>, StoreError> {
        let Some(item) = self
            .store
            .latest(store::kind::DEFINITION, server, name, hash)?
        else {
            return Ok(None);
        };
        let why = match item.status.as_str() {
            store::PENDING => item.summary,
            store::DENIED => format!("denied at review: {}", item.summary),
            _ => return Ok(None),
        };
        Ok(Some(HeldItem {
            queue_id: item.id,
            record_id: item.record_id,
            why,
        }))
    }

    /// What a held definition is (`changed`, `renamed`, `launch_changed`,
    /// `new`), its rule, and the summary the record, the review item and the
    /// client's notice carry.
    fn hold_summary(
        &self,
        what: &'static str,
        kind: &str,
        name: &str,
        changes: &[pins::Change],
        previous: Option<&store::Pin>,
        launch_change: Option<&LaunchChange>,
    ) -> (&'static str, &'static str, String) {
        let shown = if self.keeps_pinned(changes) {
            "the client is shown the pinned version"
        } else {
            "the tool is withheld"
        };
        match (what, previous, launch_change) {
            ("changed", Some(p), Some(l)) => (
                "launch_changed",
                "pin.launch_changed",
                format!(
                    "the server's launch changed since the {kind} {name:?} was pinned ({}), and \
                     its definition changed with it ({} field(s)); the new version is held until \
                     approved, {shown} (pinned {})",
                    l.describe(),
                    changes.len(),
                    p.hash.get(..12).unwrap_or(&p.hash)
                ),
            ),
            ("renamed", Some(p), Some(l)) => (
                "renamed",
                "pin.renamed",
                format!(
                    "{name:?} is a rename of the pinned {kind} {:?} (definition near-identical), \
                     seen after the server's launch changed ({}); withheld until approved",
                    p.name,
                    l.describe()
                ),
            ),
            ("changed", Some(p), None) => (
                "changed",
                "pin.changed",
                format!(
                    "the {kind} definition of {name:?} changed since it was pinned ({} field(s)); \
                     the new version is held until approved, {shown} (pinned {})",
                    changes.len(),
                    p.hash.get(..12).unwrap_or(&p.hash)
                ),
            ),
            ("renamed", Some(p), None) => (
                "renamed",
                "pin.renamed",
                format!(
                    "{name:?} is a rename of the pinned {kind} {:?} (definition near-identical); \
                     withheld until approved",
                    p.name
                ),
            ),
            _ => (
                "new",
                "pin.new",
                format!("{name:?} is a {kind} seen for the first time; first_sight = hold"),
            ),
        }
    }

    /// `Allow` if a reviewer approved this flow (`key`) into `server`/`tool` with
    /// `--remember`, else `a`.
    fn unless_remembered(
        &self,
        a: FlowAction,
        server: &str,
        tool: &str,
        key: &str,
    ) -> Result<FlowAction, StoreError> {
        if a != FlowAction::Allow
            && self
                .store
                .remembered("allow", store::kind::CALL, server, tool, key)?
        {
            Ok(FlowAction::Allow)
        } else {
            Ok(a)
        }
    }

    /// Whether a change of a pinned definition leaves the pinned version shown
    /// (`pins.on_change`; never for a change of `annotations`).
    fn keeps_pinned(&self, changes: &[pins::Change]) -> bool {
        self.config.pins.on_change == OnChange::KeepPinned
            && !changes.iter().any(|c| c.path.starts_with("$.annotations"))
    }

    /// The pinned version to show instead of `live`, a definition that was
    /// withheld (changed since pinned, or its new version failed the detector),
    /// under `pins.on_change = "keep_pinned"`. `None`: withhold as usual.
    pub fn pinned_fallback(
        &self,
        server: &str,
        kind: &str,
        name: &str,
        live: &Value,
    ) -> Result<Option<Value>, StoreError> {
        if !self.config.pins.enabled {
            return Ok(None);
        }
        let Some(p) = self.store.pin(server, kind, name)? else {
            return Ok(None);
        };
        if p.hash == pins::hash(live) || !self.keeps_pinned(&pins::diff(&p.definition, live)) {
            return Ok(None);
        }
        Ok(Some(p.definition))
    }

    /// The state of review item `id` as it is stored now (so an approval made by
    /// `portcullis review` in any process counts at once); `None`: no such item.
    pub fn review_status(&self, id: i64) -> Result<Option<ReviewStatus>, StoreError> {
        Ok(self.store.item(id)?.map(|i| match i.status.as_str() {
            store::APPROVED => ReviewStatus::Approved,
            store::DENIED => ReviewStatus::Denied,
            _ => ReviewStatus::Pending,
        }))
    }

    /// Items waiting in the review queue, as stored now.
    pub fn pending_reviews(&self) -> Result<usize, StoreError> {
        self.store.pending_count()
    }

    /// A listed tool as the detector should judge it: with its over-privileged
    /// parameters removed when the policy strips them (the model is shown the same).
    pub fn strip_over_privileged(&self, tool: &mut Value) {
        portcullis_controls::params::strip_by_policy(tool, &self.config.params);
    }

    /// File an item (or find the pending one) and return the verdict naming it.
    pub fn file(&self, item: NewItem) -> Result<(QueueItem, Verdict), StoreError> {
        let (item, _) = self.store.enqueue(item)?;
        let v = Verdict::Held {
            record_id: item.record_id.clone(),
            queue_id: Some(item.id),
            why: item.summary.clone(),
        };
        Ok((item, v))
    }
}

/// The flow a labelled value in a call's arguments makes, and what the
/// configuration does with it (docs/structural.md, section 5).
/// `client_named`: the call is a sink's that sends only its own server's data,
/// inside texts, to a destination the client wrote
/// ([`portcullis_controls::destination::client_named`]); on a host a labelled
/// value names, it is held at least, whatever `client_destination` allows.
fn flow_rule(
    cfg: &crate::config::TaintConfig,
    m: &portcullis_controls::taint::Match,
    cross: bool,
    sink: bool,
    client_named: Option<&ClientNamed>,
) -> (&'static str, FlowAction) {
    // A name of code written as code (a library's API from its documentation)
    // moves under its own flow, never stronger than the one it replaces: it is
    // no data, wherever the call sends it.
    match data_flow_rule(cfg, m, cross, sink, client_named) {
        ("taint.cross_server" | "taint.sink" | "taint.client_destination", a) if m.code_name => {
            ("taint.code_name", cfg.code_name.min(a))
        }
        rule => rule,
    }
}

/// [`flow_rule`] for any value, whatever its shape.
fn data_flow_rule(
    cfg: &crate::config::TaintConfig,
    m: &portcullis_controls::taint::Match,
    cross: bool,
    sink: bool,
    client_named: Option<&ClientNamed>,
) -> (&'static str, FlowAction) {
    if m.label.sensitive && (cross || sink) {
        ("taint.sensitive", cfg.sensitive)
    } else if cross {
        ("taint.cross_server", cfg.cross_server)
    } else if sink && m.reference && matches!(m.how, "exact" | "child_path" | "file_name") {
        ("taint.same_server_reference", cfg.same_server_reference)
    } else if let (true, Some(d)) = (sink, client_named) {
        let a = if d.on_a_named_host {
            cfg.client_destination.max(FlowAction::Hold)
        } else {
            cfg.client_destination
        };
        ("taint.client_destination", a)
    } else if sink {
        ("taint.sink", cfg.sink)
    } else {
        ("taint.same_server", cfg.same_server)
    }
}

/// Labels last seen before this time (Unix seconds) have expired (0: none).
fn taint_cutoff(config: &GatewayConfig) -> u64 {
    match config.taint.ttl_secs {
        0 => 0,
        ttl => portcullis_controls::taint::now_secs().saturating_sub(ttl),
    }
}

/// The findings of a held definition: its changes under `rule` (medium when the
/// server's launch changed too: less suspect than a change on its own), or one
/// high finding naming it when there are no changes (a new definition).
fn hold_findings(what: &str, rule: &str, name: &str, changes: &[pins::Change]) -> Vec<Finding> {
    let mut findings = change_findings(rule, changes);
    if what == "launch_changed" {
        // Less suspect than a change on its own; still held.
        for f in &mut findings {
            f.severity = Severity::Medium;
        }
    }
    if findings.is_empty() {
        findings.push(finding(
            rule,
            "pin",
            Severity::High,
            "$",
            format!("{name:?}"),
        ));
    }
    findings
}

/// What the review item of a held definition is filed with.
struct DefinitionHold<'a> {
    server: &'a str,
    kind: &'a str,
    name: &'a str,
    definition: &'a Value,
    hash: &'a str,
    what: &'a str,
    summary: &'a str,
    findings: &'a [Finding],
    detector: Option<&'a DecisionRecord>,
    changes: &'a [pins::Change],
    previous: Option<&'a store::Pin>,
    launch: Option<&'a str>,
    launch_change: Option<&'a LaunchChange>,
    record: &'a DecisionRecord,
}

#[cfg(test)]
mod tests {
    use super::*;
    use portcullis_controls::taint::{Label, Match};

    fn m(sensitive: bool, how: &'static str, reference: bool) -> Match {
        Match {
            label: Label {
                server: "alpha".into(),
                tool: "search".into(),
                record_id: "r".into(),
                sensitive,
                source: "result",
            },
            arg_path: "$.url".into(),
            how,
            hint: "http… (30 chars)".into(),
            reference,
            code_name: false,
        }
    }

    /// A stored label of a name real software shares (an older gateway's) is not
    /// read back; any other label is, and a sensitive one whatever its value.
    #[test]
    fn stored_labels_of_common_names_are_left_out() {
        let stored = |value: &str, sensitive: bool, source: &'static str| store::StoredLabel {
            digest: portcullis_core::sha256_hex(value.as_bytes()),
            value: Some(value.into()),
            hint: portcullis_controls::taint::hint(value),
            label: Label {
                sensitive,
                source,
                ..m(false, "exact", false).label
            },
            seen: portcullis_controls::taint::now_secs(),
        };
        let mut taint = TaintStore::new(100, 8);
        add_stored(
            &mut taint,
            vec![
                stored("console.log", false, "result"),
                stored("survey-2026.csv", false, "result"),
                stored("module.exports", true, "guard"),
            ],
        );
        for (code, flow) in [
            ("console.log(1)", false),
            ("wc -l survey-2026.csv", true),
            ("x = module.exports", true),
        ] {
            let m = taint.matches(&serde_json::json!({ "code": code }));
            assert_eq!(!m.is_empty(), flow, "{code}: {m:?}");
        }
    }

    #[test]
    fn a_reference_passed_whole_to_its_own_servers_sink_is_its_own_flow() {
        let cfg = crate::config::TaintConfig::default();
        let rule = |m: &Match, cross, sink| flow_rule(&cfg, m, cross, sink, None);
        // A link the same server returned, whole, into its sink: allowed by default.
        assert_eq!(
            rule(&m(false, "exact", true), false, true),
            ("taint.same_server_reference", FlowAction::Allow)
        );
        // Inside a longer string (a query appended), re-encoded, to another
        // server, or sensitive: the usual flows.
        assert_eq!(
            rule(&m(false, "substring", true), false, true).0,
            "taint.sink"
        );
        assert_eq!(rule(&m(false, "base64", true), false, true).0, "taint.sink");
        assert_eq!(
            rule(&m(false, "exact", true), true, true).0,
            "taint.cross_server"
        );
        assert_eq!(
            rule(&m(true, "exact", true), false, true).0,
            "taint.sensitive"
        );
        // A path under a path the server returned (a file in a directory it
        // listed), as the whole argument: the same reference flow.
        assert_eq!(
            rule(&m(false, "child_path", true), false, true),
            ("taint.same_server_reference", FlowAction::Allow)
        );
        assert_eq!(
            rule(&m(false, "child_path", true), true, true).0,
            "taint.cross_server"
        );
        // A file name the server printed, as a word or path component of the
        // argument (`wc -l survey.csv`, `/data/survey.xlsx`): the same reference flow.
        assert_eq!(
            rule(&m(false, "file_name", true), false, true),
            ("taint.same_server_reference", FlowAction::Allow)
        );
        assert_eq!(
            rule(&m(false, "file_name", true), true, true).0,
            "taint.cross_server"
        );
        // Data (not a reference) into a sink stays a sink flow.
        assert_eq!(
            rule(&m(false, "exact", false), false, true),
            ("taint.sink", FlowAction::Block)
        );
    }

    #[test]
    fn a_name_of_code_written_as_code_is_its_own_flow_never_stronger() {
        let cfg = crate::config::TaintConfig::default();
        let code = Match {
            code_name: true,
            ..m(false, "substring", false)
        };
        // To another server or into a sink: allowed and recorded by default.
        for (cross, sink) in [(true, false), (true, true), (false, true)] {
            assert_eq!(
                flow_rule(&cfg, &code, cross, sink, None),
                ("taint.code_name", FlowAction::Allow),
                "cross {cross}, sink {sink}"
            );
        }
        // Back to a non-sink of its own server: the usual flow.
        assert_eq!(
            flow_rule(&cfg, &code, false, false, None).0,
            "taint.same_server"
        );
        // Sensitive: never a name of code.
        let secret = Match {
            code_name: true,
            ..m(true, "substring", false)
        };
        assert_eq!(
            flow_rule(&cfg, &secret, true, true, None).0,
            "taint.sensitive"
        );
        // Into a sink of its own server, to a destination the client named: a
        // name of code too (the destination matters for data only).
        for on_a_named_host in [false, true] {
            let named = ClientNamed {
                path: "$.path".into(),
                on_a_named_host,
            };
            assert_eq!(
                flow_rule(&cfg, &code, false, true, Some(&named)),
                ("taint.code_name", FlowAction::Allow)
            );
        }
        // The weaker of the two settings.
        let held = crate::config::TaintConfig {
            code_name: FlowAction::Hold,
            ..cfg.clone()
        };
        assert_eq!(
            flow_rule(&held, &code, true, false, None),
            ("taint.code_name", FlowAction::Hold)
        );
        let open = crate::config::TaintConfig {
            cross_server: FlowAction::Allow,
            code_name: FlowAction::Block,
            ..cfg
        };
        assert_eq!(
            flow_rule(&open, &code, true, false, None),
            ("taint.code_name", FlowAction::Allow)
        );
    }

    #[test]
    fn data_sent_to_a_destination_the_client_named_is_its_own_flow() {
        let cfg = crate::config::TaintConfig::default();
        let named = |on_a_named_host| ClientNamed {
            path: "$.to".into(),
            on_a_named_host,
        };
        let clear = named(false);
        let d = Some(&clear);
        // Inside a text, through the server it came from, to a destination the
        // client wrote: held for a human by default (not blocked).
        assert_eq!(
            flow_rule(&cfg, &m(false, "substring", false), false, true, d),
            ("taint.client_destination", FlowAction::Hold)
        );
        // Sensitive, to another server, or to a tool that is no sink: as before.
        assert_eq!(
            flow_rule(&cfg, &m(true, "substring", false), false, true, d).0,
            "taint.sensitive"
        );
        assert_eq!(
            flow_rule(&cfg, &m(false, "substring", false), true, true, d).0,
            "taint.cross_server"
        );
        assert_eq!(
            flow_rule(&cfg, &m(false, "substring", false), false, false, d).0,
            "taint.same_server"
        );
        // Configurable like every flow.
        let allowed = crate::config::TaintConfig {
            client_destination: FlowAction::Allow,
            ..cfg.clone()
        };
        assert_eq!(
            flow_rule(&allowed, &m(false, "substring", false), false, true, d),
            ("taint.client_destination", FlowAction::Allow)
        );
        // On a host a labelled value names: held, even where the rest is allowed.
        let on_host = named(true);
        assert_eq!(
            flow_rule(
                &allowed,
                &m(false, "substring", false),
                false,
                true,
                Some(&on_host)
            ),
            ("taint.client_destination", FlowAction::Hold)
        );
        let blocked = crate::config::TaintConfig {
            client_destination: FlowAction::Block,
            ..cfg
        };
        assert_eq!(
            flow_rule(
                &blocked,
                &m(false, "substring", false),
                false,
                true,
                Some(&on_host)
            )
            .1,
            FlowAction::Block
        );
    }
}

//! The gateway as a server: every request of a downstream client is routed to an
//! upstream, and everything that comes back toward the model is inspected first.
//!
//! One path for every method: `egress` reads the request's model-chosen text
//! (tool-call arguments have their own, richer path), `forward` sends it upstream
//! (timeout, cancellation, progress) and inspects an error the upstream answers
//! with, `inspected` runs the answer through the [`Inspector`] on the method's
//! channel and either forwards it or replaces it with a clear "withheld" answer
//! naming the decision record. Lists are drained across pages and
//! upstreams, each entry inspected (and cached by content hash, so an unchanged
//! definition is decided and logged once).

use crate::audit::AuditLog;
use crate::config::GatewayConfig;
use crate::inspect::{Inspector, Outcome};
use crate::metrics::Metrics;
use crate::router::{client_progress_token, withheld_error, ListKind, Router};
use crate::structural::{
    pin_kind, DefinitionKind, Listed, OtherTool, Relation, ReviewStatus, StoreError, Structural,
    ToolDecision, Verdict,
};
use crate::upstream::{options, Upstream, UpstreamError};
use portcullis_core::{sha256_hex, Channel};
use portcullis_detect::Detector;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientRequest,
    CompleteRequestParams, CompleteResult, ContentBlock, CustomRequest, CustomResult,
    ErrorData as McpError, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject, ServerCapabilities,
    ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, ServiceError};
use rmcp::ServerHandler;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error(transparent)]
    Inspect(#[from] crate::inspect::InspectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Structural(#[from] crate::structural::StructuralError),
}

/// Pages drained from one upstream list before giving up (a server that returns
/// cursors forever must not hang the gateway).
const MAX_PAGES: usize = 1000;

/// Where a name the client sees leads.
#[derive(Debug, Clone)]
struct Route {
    upstream: usize,
    name: String,
}

/// The decided form of one listed entry, by content hash.
#[derive(Debug, Clone)]
struct Decided {
    forward: bool,
    value: Value,
    record_id: String,
}

/// The tools each upstream lists in one round of listing (`tools/list` from
/// the client), by (upstream, upstream name), read before any is decided.
type ListingRound = HashMap<(usize, String), Arc<Listed>>;

/// A listed entry as judged: as the server sent it, its decision-cache key, the
/// detector's decision, its name, the pin check's verdict.
struct Judged {
    raw: Value,
    key: String,
    decided: Decided,
    ident: String,
    verdict: Verdict,
}

struct Tables {
    tools: HashMap<String, Route>,
    prompts: HashMap<String, Route>,
    resources: HashMap<String, usize>,
    /// Resource templates (`uriTemplate`) and their upstream, withheld ones
    /// included: a read of a URI that only a withheld template matches is refused.
    templates: Vec<(String, usize)>,
    /// Whether resources and templates have been listed at least once.
    resources_listed: bool,
    /// Names/URIs the client must not reach, with the record that withheld them.
    withheld: HashMap<(Channel, String), String>,
    /// Names withheld by a structural control: re-checked against the state
    /// store on every call, so an approval from `portcullis review` is seen.
    held: HashMap<(Channel, String), Verdict>,
    /// The latest definition of each tool as its server listed it, by (upstream,
    /// upstream name).
    defs: HashMap<(usize, String), Arc<Listed>>,
    /// Structural metadata decisions already recorded (one record per distinct
    /// definition and name context, not one per list).
    recorded: Lru<String, ()>,
    /// The detector's decision on each listed entry, by content hash.
    decided: Lru<String, Decided>,
}

impl Default for Tables {
    fn default() -> Tables {
        Tables {
            tools: HashMap::new(),
            prompts: HashMap::new(),
            resources: HashMap::new(),
            templates: Vec::new(),
            resources_listed: false,
            withheld: HashMap::new(),
            held: HashMap::new(),
            defs: HashMap::new(),
            recorded: Lru::new(DECISION_CACHE_ENTRIES),
            decided: Lru::new(DECISION_CACHE_ENTRIES),
        }
    }
}

/// Entries of each per-hash cache (`decided`, `recorded`). An evicted entry only
/// costs a re-inspection and a new record: the detector is deterministic, so the
/// entry decided again is decided the same way.
pub const DECISION_CACHE_ENTRIES: usize = 4096;

/// A map that keeps its `capacity` most recently used entries.
#[derive(Debug)]
struct Lru<K, V> {
    capacity: usize,
    tick: u64,
    entries: HashMap<K, (V, u64)>,
    /// Last use → key, oldest first.
    order: std::collections::BTreeMap<u64, K>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Lru<K, V> {
    fn new(capacity: usize) -> Lru<K, V> {
        Lru {
            capacity: capacity.max(1),
            tick: 0,
            entries: HashMap::new(),
            order: std::collections::BTreeMap::new(),
        }
    }

    fn touch(&mut self, key: &K) -> Option<&mut (V, u64)> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.entries.get_mut(key)?;
        self.order.remove(&e.1);
        e.1 = tick;
        self.order.insert(tick, key.clone());
        Some(e)
    }

    fn get(&mut self, key: &K) -> Option<V> {
        self.touch(key).map(|e| e.0.clone())
    }

    /// Insert or replace; true if the key was not there.
    fn insert(&mut self, key: K, value: V) -> bool {
        if let Some(e) = self.touch(&key) {
            e.0 = value;
            return false;
        }
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.entries.insert(key.clone(), (value, self.tick));
        self.order.insert(self.tick, key);
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The shared gateway: upstreams, inspector, routing tables.
pub struct Gateway {
    config: GatewayConfig,
    inspector: Arc<Inspector>,
    structural: Arc<Structural>,
    router: Arc<Router>,
    upstreams: Vec<Arc<Upstream>>,
    info: InitializeResult,
    tables: Mutex<Tables>,
    /// One list decision at a time: concurrent lists (a client's and a re-list
    /// after list_changed) must not inspect and log the same entry twice.
    deciding: tokio::sync::Mutex<()>,
    /// Counted only when `[metrics] listen` serves them: nothing on the hot
    /// path otherwise.
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstreams", &self.upstreams)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Open the audit log, start every upstream, inspect their instructions. The
    /// upstreams are told the gateway samples, elicits and lists roots (see
    /// [`Gateway::start_for`] for a gateway that serves one known client).
    pub async fn start(
        config: GatewayConfig,
        detector: Detector,
    ) -> Result<Arc<Gateway>, GatewayError> {
        Gateway::start_for(config, detector, None).await
    }

    /// [`Gateway::start`], declaring to the upstreams what `client` declared to
    /// the gateway (`None`: clients not known yet; see
    /// [`crate::upstream::upstream_capabilities`]).
    pub async fn start_for(
        config: GatewayConfig,
        detector: Detector,
        client: Option<&ClientCapabilities>,
    ) -> Result<Arc<Gateway>, GatewayError> {
        let caps = crate::upstream::upstream_capabilities(client);
        let metrics = config
            .metrics
            .listen
            .is_some()
            .then(|| Arc::new(Metrics::new()));
        let mut audit = AuditLog::open(config.audit.clone(), &detector.config().egress)?;
        if let Some(m) = &metrics {
            audit = audit.with_metrics(m.clone());
        }
        let audit = Arc::new(audit);
        let inspector = Arc::new(Inspector::new(
            Arc::new(detector),
            audit,
            config.metadata_review,
            config.result_review,
            config.fail_mode,
            config.request_timeout(),
        ));
        let structural = Arc::new(Structural::open(
            &config,
            &inspector.detector().config().egress.canaries,
        )?);
        let (relist_tx, mut relist_rx) = tokio::sync::mpsc::unbounded_channel();
        let router = Arc::new(Router::new(inspector.clone(), relist_tx));
        let upstreams = connect_all(&config, &router, &caps).await?;
        let info = merged_info(&config, &inspector, &structural, &upstreams).await?;
        let gw = Arc::new(Gateway {
            config,
            inspector,
            structural,
            router,
            upstreams,
            info,
            tables: Mutex::new(Tables::default()),
            deciding: tokio::sync::Mutex::new(()),
            metrics,
        });
        // list_changed from an upstream: re-list it through the same inspection,
        // then tell the clients.
        let weak = Arc::downgrade(&gw);
        tokio::spawn(async move {
            while let Some((server, kind)) = relist_rx.recv().await {
                let Some(gw) = weak.upgrade() else { break };
                if let Err(e) = gw.relist(&server, kind).await {
                    tracing::warn!(%server, error = %e.message, "re-list after list_changed failed");
                }
                gw.router.notify_list_changed(kind).await;
            }
        });
        Ok(gw)
    }

    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    pub fn info(&self) -> &InitializeResult {
        &self.info
    }

    /// The metrics endpoint's page: the counters, with the upstreams' state and
    /// the review queue's depth read now; `None` when `[metrics] listen` is not
    /// set (nothing was counted).
    pub fn metrics_text(&self) -> Option<String> {
        let metrics = self.metrics.as_ref()?;
        for u in &self.upstreams {
            metrics.set_upstream(u.name(), u.is_up(), u.restarts());
        }
        match self.structural.pending_reviews() {
            Ok(n) => metrics.set_review_pending(n),
            Err(e) => tracing::warn!(error = %e, "review queue depth not read for the metrics"),
        }
        Some(metrics.encode())
    }

    /// A new downstream session's handler.
    pub fn session(self: &Arc<Self>) -> Session {
        Session {
            gw: self.clone(),
            id: self.router.new_session_id(),
        }
    }

    pub async fn shutdown(&self) {
        for u in &self.upstreams {
            u.shutdown().await;
        }
        let structural = self.structural.clone();
        let _ = tokio::task::spawn_blocking(move || structural.flush_taint()).await;
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn exposed(&self, upstream: usize, name: &str) -> String {
        if self.config.namespaced() {
            format!(
                "{}{}{name}",
                self.upstreams[upstream].name(),
                self.config.namespace_separator
            )
        } else {
            name.to_string()
        }
    }

    /// Send a request upstream on behalf of a session: the client's progress token
    /// is mapped, its cancellation is relayed, the timeout applies.
    async fn forward(
        &self,
        upstream: usize,
        request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
        session: u64,
    ) -> Result<ServerResult, McpError> {
        let up = &self.upstreams[upstream];
        let meta = passthrough_meta(&ctx.meta);
        // The request's `_meta` travels beside its params: the same egress check.
        if let Some(m) = &meta {
            self.egress(upstream, "_meta", &json!({ "_meta": m }))
                .await?;
        }
        let subject = request_subject(&request);
        let (handle, sending) = up
            .send(request, options(self.config.request_timeout(), meta))
            .await?;
        let _inflight = self.router.begin(
            session,
            up.name(),
            Some(handle.progress_token.clone()),
            client_progress_token(&ctx.meta),
        );
        drop(sending);
        let (id, peer) = (handle.id.clone(), handle.peer.clone());
        tokio::select! {
            r = handle.await_response() => match r {
                Ok(result) => {
                    self.router.settle(up.name(), self.config.request_timeout()).await;
                    Ok(result)
                }
                Err(ServiceError::McpError(e)) => {
                    self.router.settle(up.name(), self.config.request_timeout()).await;
                    Err(self.upstream_error(upstream, subject.as_deref(), e).await)
                }
                Err(e) => Err(service_error(up.name(), e)),
            },
            _ = ctx.ct.cancelled() => {
                let _ = peer.notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                    Some(id), Some("cancelled by the client".into()))).await;
                Err(McpError::internal_error("cancelled by the client", None))
            }
        }
    }

    /// A JSON-RPC error an upstream answered with: its `code`, `message` and
    /// `data` are the server's text, inspected on `tool_result` as the object
    /// `{"error": …}` (so a record's paths read `$.error.message`,
    /// `$.error.data…`) and recorded before anything is forwarded. Forwarded as
    /// the server sent it (secrets masked) or replaced by a notice naming the
    /// record (code -32050), never quoting the server.
    async fn upstream_error(&self, upstream: usize, tool: Option<&str>, e: McpError) -> McpError {
        let server = self.upstreams[upstream].name();
        let mut v = match to_value(&e) {
            Ok(err) => json!({ "error": err }),
            Err(x) => return x,
        };
        let out = match self
            .inspector
            .message(Channel::ToolResult, server, tool, &mut v)
            .await
        {
            Ok(out) => out,
            Err(x) => return internal(x),
        };
        if !out.forward {
            return crate::router::withheld_error_as(&out, "error from the server");
        }
        serde_json::from_value::<McpError>(v["error"].take()).unwrap_or_else(internal)
    }

    /// The egress guard (and the taint check) on a client request other than
    /// `tools/call` that carries text the model chose: a `resources/read` URI
    /// (templates let the model write it), `prompts/get` arguments,
    /// `completion/complete` arguments, anything newer. `label` names it in the
    /// records (the prompt's name, else the method). Every string of `params`
    /// is read; anything flagged is refused (-32050) and nothing goes upstream.
    async fn egress(&self, upstream: usize, label: &str, params: &Value) -> Result<(), McpError> {
        let server = self.upstreams[upstream].name().to_string();
        let out = self
            .inspector
            .arguments(&server, label, params)
            .await
            .map_err(internal)?;
        if !out.forward {
            return Err(crate::router::withheld_error_as(
                &out,
                "request (its parameters)",
            ));
        }
        let verdict = self
            .structural
            .call(&self.inspector, &server, label, None, params)
            .await
            .map_err(internal)?;
        match verdict {
            Verdict::Pass => Ok(()),
            Verdict::Held {
                ref record_id,
                queue_id,
                ..
            } => Err(McpError::new(
                crate::router::WITHHELD,
                verdict.message("this request"),
                Some(json!({ "record_id": record_id, "review_id": queue_id })),
            )),
        }
    }

    /// Inspect a result on `channel`; forward it (masked) or withhold it.
    async fn inspected(
        &self,
        channel: Channel,
        upstream: usize,
        tool: Option<&str>,
        result: ServerResult,
    ) -> Result<ServerResult, McpError> {
        self.inspected_with_record(channel, upstream, tool, result)
            .await
            .map(|i| i.result)
    }

    /// [`Self::inspected`], and the gateway's decision on it ([`Inspected`]).
    async fn inspected_with_record(
        &self,
        channel: Channel,
        upstream: usize,
        tool: Option<&str>,
        result: ServerResult,
    ) -> Result<Inspected, McpError> {
        let server = self.upstreams[upstream].name().to_string();
        let mut v = to_value(&result)?;
        let size = serialized_len(&v);
        if size > self.config.max_message_bytes {
            return Err(McpError::internal_error(
                format!(
                    "portcullis: the {} from {server} is {size} bytes, over max_message_bytes = {}",
                    channel.as_str().replace('_', " "),
                    self.config.max_message_bytes
                ),
                None,
            ));
        }
        let quotes = self.router.client_quotes(&server);
        let out = self
            .inspector
            .message_quoting(channel, &server, tool, &mut v, &quotes)
            .await
            .map_err(internal)?;
        if out.forward {
            return retype(&result, v).map(|r| Inspected {
                result: r,
                record_id: out.record.id,
                passed: true,
                cut: out.cut,
            });
        }
        if channel == Channel::ToolResult {
            // A held tool result is still a well-formed result: the model reads
            // that it was withheld and why, and nothing of the original.
            return Ok(Inspected {
                result: ServerResult::CallToolResult(withheld_result(&out)),
                record_id: out.record.id,
                passed: false,
                cut: None,
            });
        }
        Err(withheld_error(&out))
    }

    /// Every entry of one list method from every upstream (all pages), inspected.
    async fn list(
        &self,
        kind: ListKind,
        templates: bool,
        ctx: &RequestContext<RoleServer>,
        session: u64,
    ) -> Result<Vec<Value>, McpError> {
        // Every upstream is read before any entry is decided, so a tool is
        // compared with every other server's tool from the first listing on,
        // whatever the order of the servers.
        let mut drained = Vec::new();
        let mut not_found = None;
        for (i, up) in self.upstreams.iter().enumerate() {
            if !declares(&up.info.capabilities, kind) {
                continue;
            }
            match self.drain(i, kind, templates, ctx, session).await {
                Ok(entries) => drained.push((i, entries)),
                // A server that declares resources but not this method (a
                // resource-templates list, which is optional) has none to list;
                // the others' entries are still listed. If no server has the
                // method, the client gets the error, as it would direct.
                Err(e) if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => {
                    not_found.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        if let (true, Some(e)) = (drained.is_empty(), not_found) {
            return Err(e);
        }
        let round: ListingRound = match kind {
            ListKind::Tools => drained
                .iter()
                .flat_map(|(i, entries)| {
                    entries.iter().map(|e| {
                        (
                            (*i, entry_ident(kind, templates, e)),
                            Listed::new(e.clone()),
                        )
                    })
                })
                .collect(),
            _ => ListingRound::new(),
        };
        let mut all = Vec::new();
        for (i, entries) in drained {
            all.extend(
                self.decide_entries(i, kind, templates, entries, &round)
                    .await?,
            );
        }
        Ok(all)
    }

    async fn drain(
        &self,
        upstream: usize,
        kind: ListKind,
        templates: bool,
        ctx: &RequestContext<RoleServer>,
        session: u64,
    ) -> Result<Vec<Value>, McpError> {
        let (method, field) = list_method(kind, templates);
        let mut cursor: Option<String> = None;
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let req: ClientRequest =
                serde_json::from_value(json!({ "method": method, "params": params }))
                    .map_err(internal)?;
            let v = to_value(&self.forward(upstream, req, ctx, session).await?)?;
            if let Some(Value::Array(a)) = v.get(field) {
                out.extend(a.iter().cloned());
            }
            cursor = v
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                return Ok(out);
            }
        }
        Err(McpError::internal_error(
            format!(
                "portcullis: {} from {} returned more than {MAX_PAGES} pages",
                method,
                self.upstreams[upstream].name()
            ),
            None,
        ))
    }

    /// Inspect (or reuse the decision on) each entry, update the routing tables,
    /// and return what the client may see, renamed into the gateway's namespace.
    async fn decide_entries(
        &self,
        upstream: usize,
        kind: ListKind,
        templates: bool,
        entries: Vec<Value>,
        round: &ListingRound,
    ) -> Result<Vec<Value>, McpError> {
        let server = self.upstreams[upstream].name().to_string();
        let channel = list_channel(kind);
        let mut visible = Vec::new();
        // The upstream names of the entries in `visible`, in the same order.
        let mut visible_idents = Vec::new();
        let _one_at_a_time = self.deciding.lock().await;
        let listed: Vec<String> = entries
            .iter()
            .map(|e| entry_ident(kind, templates, e))
            .collect();
        // The listing as the server sent it: a tool is checked for being a copy
        // of a sibling ([`Self::other_tools`]).
        let siblings: Vec<(String, Arc<Listed>)> = match kind {
            ListKind::Tools => listed
                .iter()
                .cloned()
                .zip(entries.iter().cloned().map(Listed::new))
                .collect(),
            _ => Vec::new(),
        };
        let pin = match (kind, templates) {
            (ListKind::Tools, _) => Some(pin_kind::TOOL),
            (ListKind::Prompts, _) => Some(pin_kind::PROMPT),
            (ListKind::Resources, true) => Some(pin_kind::RESOURCE_TEMPLATE),
            (ListKind::Resources, false) => None,
        };
        for (i, entry) in entries.into_iter().enumerate() {
            // This tool as listed, shared with its siblings' checks (its digest
            // and description computed once).
            let as_listed = siblings.get(i).map(|(_, l)| Arc::clone(l));
            let (
                Judged {
                    raw,
                    key,
                    decided,
                    ident,
                    verdict,
                },
                live,
            ) = self
                .judge_or_pinned(upstream, kind, templates, pin, &listed, entry)
                .await?;
            let mut shown = decided.value.clone();
            let mut verdict = verdict;
            let mut hidden = false;
            // The definition judged is the one listed, unless a pinned version
            // is shown instead.
            let judged_as_listed = as_listed.clone().filter(|l| l.def == raw);
            if kind == ListKind::Tools {
                // Calls are checked against what the server lists now.
                let live = as_listed.unwrap_or_else(|| Listed::new(live));
                self.tables().defs.insert((upstream, ident.clone()), live);
            }
            if verdict.passes() && decided.forward {
                let d = self
                    .metadata(
                        upstream,
                        kind,
                        &key,
                        &ident,
                        &raw,
                        judged_as_listed.as_deref(),
                        shown,
                        &siblings,
                        round,
                    )
                    .await?;
                shown = d.shown;
                verdict = d.verdict;
                hidden = d.hidden;
            }
            let mut t = self.tables();
            match kind {
                ListKind::Tools | ListKind::Prompts => {
                    let exposed = self.exposed(upstream, &ident);
                    let route = Route {
                        upstream,
                        name: ident.clone(),
                    };
                    if kind == ListKind::Tools {
                        t.tools.insert(exposed.clone(), route);
                    } else {
                        t.prompts.insert(exposed.clone(), route);
                    }
                    if !verdict.passes() {
                        if hidden {
                            t.held.remove(&(channel, exposed.clone()));
                            if let Verdict::Held { record_id, .. } = &verdict {
                                let k = (channel, exposed);
                                if !record_id.is_empty() || !t.withheld.contains_key(&k) {
                                    t.withheld.insert(k, record_id.clone());
                                }
                            }
                        } else {
                            t.held.insert((channel, exposed), verdict);
                        }
                    } else if decided.forward {
                        t.withheld.remove(&(channel, exposed.clone()));
                        t.held.remove(&(channel, exposed.clone()));
                        visible_idents.push(ident.clone());
                        let mut v = shown;
                        if let Some(o) = v.as_object_mut() {
                            o.insert("name".into(), Value::String(exposed));
                        }
                        visible.push(v);
                    } else {
                        t.withheld.insert((channel, exposed), decided.record_id);
                    }
                }
                ListKind::Resources => {
                    if templates {
                        t.templates
                            .retain(|(tpl, u)| !(tpl == &ident && *u == upstream));
                        t.templates.push((ident.clone(), upstream));
                    } else {
                        t.resources.insert(ident.clone(), upstream);
                    }
                    if !verdict.passes() {
                        // A held template is not listed, and a read of a URI
                        // only it matches is refused (`resource_route`).
                        t.held.insert((channel, ident), verdict);
                    } else if decided.forward {
                        t.withheld.remove(&(channel, ident.clone()));
                        t.held.remove(&(channel, ident));
                        visible.push(decided.value.clone());
                    } else {
                        t.withheld.insert((channel, ident), decided.record_id);
                    }
                }
            }
        }
        if kind == ListKind::Tools {
            // What the client was shown (its name aside, which operands skip).
            let shown = visible_idents.iter().map(String::as_str).zip(&visible);
            self.structural.listed_definitions(&server, shown);
        }
        if kind == ListKind::Resources && !templates {
            let uris = visible.iter().filter_map(|r| r.get("uri")?.as_str());
            self.structural.listed_resources(&server, uris);
        }
        Ok(visible)
    }

    /// [`Self::judge`] on an entry as listed; if it is a pinned definition whose
    /// new version is withheld and `pins.on_change = "keep_pinned"`, judged again
    /// on the pinned version, which the client keeps. Also what the server lists
    /// now (`live`), which calls are checked against.
    async fn judge_or_pinned(
        &self,
        upstream: usize,
        kind: ListKind,
        templates: bool,
        pin: Option<&'static str>,
        listed: &[String],
        entry: Value,
    ) -> Result<(Judged, Value), McpError> {
        let server = self.upstreams[upstream].name();
        let judged = self
            .judge(upstream, kind, templates, pin, listed, entry, true)
            .await?;
        let fallback = match pin {
            Some(pk) if !(judged.verdict.passes() && judged.decided.forward) => self
                .structural
                .pinned_fallback(server, pk, &judged.ident, &judged.raw)
                .map_err(internal)?,
            _ => None,
        };
        Ok(match fallback {
            Some(pinned) => {
                let live = judged.raw;
                let shown = self
                    .judge(upstream, kind, templates, pin, listed, pinned, false)
                    .await?;
                (shown, live)
            }
            None => {
                let live = judged.raw.clone();
                (judged, live)
            }
        })
    }

    /// The metadata controls on a listed tool or prompt the detector and the pins
    /// let through ([`Structural::definition_metadata`]); resources pass.
    /// Its record is written once per definition (`key`) and set of tools it is
    /// compared with.
    #[allow(clippy::too_many_arguments)]
    async fn metadata(
        &self,
        upstream: usize,
        kind: ListKind,
        key: &str,
        ident: &str,
        raw: &Value,
        raw_as_listed: Option<&Listed>,
        shown: Value,
        siblings: &[(String, Arc<Listed>)],
        round: &ListingRound,
    ) -> Result<ToolDecision, McpError> {
        let fresh;
        let me = match raw_as_listed {
            Some(l) => l,
            None => {
                fresh = Listed::new(raw.clone());
                &fresh
            }
        };
        let (metadata, others) = match kind {
            ListKind::Tools => (
                DefinitionKind::Tool,
                self.other_tools(
                    upstream,
                    ident,
                    siblings,
                    round,
                    // Other servers' definitions, for the copy checks: every
                    // one for a tool that promotes itself, else those whose
                    // description is in this one's.
                    &crate::structural::copy_candidates(me),
                ),
            ),
            ListKind::Prompts => (DefinitionKind::Prompt, Vec::new()),
            ListKind::Resources => {
                return Ok(ToolDecision {
                    verdict: Verdict::Pass,
                    shown,
                    hidden: false,
                })
            }
        };
        let context = {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            h.update(key.as_bytes());
            for o in &others {
                let def = o.def.as_ref().map(|d| d.hash.as_str()).unwrap_or_default();
                for part in ["\n", &o.server, "/", &o.name, " ", def] {
                    h.update(part.as_bytes());
                }
            }
            format!("{:x}", h.finalize())
        };
        let log = self.tables().recorded.insert(context, ());
        self.structural
            .definition_metadata(
                &self.inspector,
                metadata,
                self.upstreams[upstream].name(),
                ident,
                raw,
                shown,
                &others,
                log,
            )
            .await
            .map_err(internal)
    }

    /// One listed entry through the detector (or its cached decision) and, if
    /// the detector lets it through, the pin check.
    #[allow(clippy::too_many_arguments)]
    async fn judge(
        &self,
        upstream: usize,
        kind: ListKind,
        templates: bool,
        pin: Option<&'static str>,
        listed: &[String],
        mut entry: Value,
        live: bool,
    ) -> Result<Judged, McpError> {
        let server = self.upstreams[upstream].name().to_string();
        let channel = list_channel(kind);
        // The definition as the server sent it: what is pinned and compared.
        let raw = entry.clone();
        // By content, not by the order the server wrote its keys in.
        let key = sha256_hex(
            format!(
                "{server}\n{channel:?}\n{}",
                portcullis_core::canonical_json(&entry)
            )
            .as_bytes(),
        );
        let cached = self.tables().decided.get(&key);
        let (decided, detector_record) = match cached {
            Some(d) => (d, None),
            None => {
                // Over-privileged parameters are stripped before inspection
                // (policy `strip`): the detector judges what the model is shown.
                if kind == ListKind::Tools {
                    self.structural.strip_over_privileged(&mut entry);
                }
                let out: Outcome = match kind {
                    ListKind::Tools => self.inspector.tool(&server, &mut entry).await,
                    _ => self.inspector.listing(channel, &server, &mut entry).await,
                }
                .map_err(internal)?;
                let d = Decided {
                    forward: out.forward,
                    value: entry,
                    record_id: out.record.id.clone(),
                };
                self.tables().decided.insert(key.clone(), d.clone());
                (d, Some(out.record))
            }
        };
        let ident = entry_ident(kind, templates, &decided.value);
        // Pins: only what the detector lets through is pinned or compared (what
        // it withholds may still fall back to the pinned version: `decide_entries`).
        let verdict = match pin {
            Some(pk) if decided.forward => self
                .structural
                .check_definition(
                    &self.inspector,
                    channel,
                    &server,
                    pk,
                    &ident,
                    &raw,
                    listed,
                    detector_record.as_ref(),
                    live,
                )
                .await
                .map_err(internal)?,
            _ => Verdict::Pass,
        };
        Ok(Judged {
            raw,
            key,
            decided,
            ident,
            verdict,
        })
    }

    /// The tools to compare `name` of `upstream` with: other upstreams' (as they
    /// list them in this `round`, else as last seen; with their definitions
    /// where `with_def` says so) and its siblings in the listing being decided (`siblings`,
    /// whole and with their definitions, so the order of the listing does not
    /// matter).
    fn other_tools(
        &self,
        upstream: usize,
        name: &str,
        siblings: &[(String, Arc<Listed>)],
        round: &ListingRound,
        with_def: &dyn Fn(&Listed) -> bool,
    ) -> Vec<OtherTool> {
        let me = self.upstreams[upstream].name();
        let t = self.tables();
        let in_round: HashSet<usize> = round.keys().map(|(u, _)| *u).collect();
        let others: Vec<(&(usize, String), &Arc<Listed>)> = t
            .defs
            .iter()
            .filter(|((u, _), _)| !in_round.contains(u))
            .chain(round.iter())
            .filter(|((u, _), _)| *u != upstream)
            .collect();
        let mut out: Vec<_> = others
            .into_iter()
            .map(|((u, n), d)| OtherTool {
                server: self.upstreams[*u].name().to_string(),
                relation: if *u < upstream {
                    Relation::EarlierServer
                } else {
                    Relation::LaterServer
                },
                name: n.clone(),
                def: with_def(d).then(|| d.clone()),
            })
            .chain(
                siblings
                    .iter()
                    .filter(|(n, _)| n.as_str() != name)
                    .map(|(n, d)| OtherTool {
                        server: me.to_string(),
                        relation: Relation::SameServer,
                        name: n.clone(),
                        def: Some(d.clone()),
                    }),
            )
            .collect();
        out.sort_by(|a, b| (&a.server, &a.name).cmp(&(&b.server, &b.name)));
        out
    }

    /// Re-list one upstream after it said its list changed.
    async fn relist(&self, server: &str, kind: ListKind) -> Result<(), McpError> {
        let Some(i) = self.upstreams.iter().position(|u| u.name() == server) else {
            return Ok(());
        };
        let up = &self.upstreams[i];
        let (method, field) = list_method(kind, false);
        let req: ClientRequest =
            serde_json::from_value(json!({ "method": method, "params": {} })).map_err(internal)?;
        let handle = up
            .request(req, options(self.config.request_timeout(), None))
            .await?;
        let v = to_value(
            &handle
                .await_response()
                .await
                .map_err(|e| service_error(server, e))?,
        )?;
        let entries = v
            .get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        self.decide_entries(i, kind, false, entries, &ListingRound::new())
            .await?;
        Ok(())
    }

    /// The refusal for a name (tool, prompt) or URI (resource, template) that is
    /// withheld: held by a structural control (the state store is re-read, so an
    /// approval from `portcullis review` in any process releases it at once) or
    /// withheld by the detector. `None`: not withheld.
    fn refusal(&self, channel: Channel, key: &str) -> Result<Option<McpError>, McpError> {
        let held = self.tables().held.get(&(channel, key.to_string())).cloned();
        if let Some(mut v) = held {
            let status = match &v {
                Verdict::Held {
                    queue_id: Some(q), ..
                } => self.structural.review_status(*q).map_err(internal)?,
                _ => None,
            };
            if let (Some(ReviewStatus::Denied), Verdict::Held { why, .. }) = (status, &mut v) {
                if !why.starts_with("denied at review") {
                    *why = format!("denied at review: {why}");
                }
            }
            if status == Some(ReviewStatus::Approved) {
                self.tables().held.remove(&(channel, key.to_string()));
            } else {
                let (record, queue) = match &v {
                    Verdict::Held {
                        record_id,
                        queue_id,
                        ..
                    } => (record_id.clone(), *queue_id),
                    Verdict::Pass => (String::new(), None),
                };
                return Ok(Some(McpError::new(
                    crate::router::WITHHELD,
                    v.message(&format!("{key:?}")),
                    Some(json!({ "record_id": record, "review_id": queue })),
                )));
            }
        }
        let t = self.tables();
        Ok(t.withheld.get(&(channel, key.to_string())).map(|record| {
            McpError::new(
                crate::router::WITHHELD,
                format!("portcullis: {key:?} is withheld by the gateway (record {record})"),
                Some(json!({ "record_id": record })),
            )
        }))
    }

    /// Where a named tool or prompt goes; refuses withheld or unknown names.
    async fn route(
        &self,
        channel: Channel,
        exposed: &str,
        ctx: &RequestContext<RoleServer>,
        session: u64,
    ) -> Result<Route, McpError> {
        for attempt in 0..2 {
            if let Some(refused) = self.refusal(channel, exposed)? {
                return Err(refused);
            }
            {
                let t = self.tables();
                let table = if channel == Channel::ToolDefinition {
                    &t.tools
                } else {
                    &t.prompts
                };
                if let Some(r) = table.get(exposed) {
                    return Ok(r.clone());
                }
            }
            if attempt == 0 {
                // Not listed yet (a client may call without listing): list first,
                // so nothing reaches a tool whose definition was not inspected.
                let kind = if channel == Channel::ToolDefinition {
                    ListKind::Tools
                } else {
                    ListKind::Prompts
                };
                self.list(kind, false, ctx, session).await?;
            }
        }
        Err(McpError::invalid_params(
            format!("portcullis: unknown name {exposed:?}"),
            None,
        ))
    }

    /// Which upstream serves a resource URI; refuses withheld ones. A URI that
    /// no listed resource names goes by the templates it matches: to the most
    /// specific one that is not withheld, and if only withheld templates match
    /// it, the read is refused with the record (and review item) of the most
    /// specific of them.
    async fn resource_route(
        &self,
        uri: &str,
        ctx: &RequestContext<RoleServer>,
        session: u64,
    ) -> Result<usize, McpError> {
        for attempt in 0..2 {
            if let Some(refused) = self.refusal(Channel::Resource, uri)? {
                return Err(refused);
            }
            let (exact, matching, listed) = {
                let t = self.tables();
                let mut m: Vec<(String, usize)> = t
                    .templates
                    .iter()
                    .filter(|(tpl, _)| template_matches(tpl, uri))
                    .cloned()
                    .collect();
                // Most specific first: the longest literal text.
                m.sort_by_key(|(tpl, _)| std::cmp::Reverse(template_literal_len(tpl)));
                (t.resources.get(uri).copied(), m, t.resources_listed)
            };
            if let Some(i) = exact {
                return Ok(i);
            }
            let mut first_refusal = None;
            for (tpl, i) in matching {
                match self.refusal(Channel::Resource, &tpl)? {
                    None => return Ok(i),
                    Some(e) => {
                        first_refusal.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first_refusal {
                return Err(e);
            }
            if attempt == 0 && (self.upstreams.len() > 1 || !listed) {
                // Not listed yet: list resources and templates first, so a read
                // under a template that would be withheld is refused.
                for templates in [false, true] {
                    match self
                        .list(ListKind::Resources, templates, ctx, session)
                        .await
                    {
                        Ok(_) => {}
                        // A server without resource templates has none to
                        // withhold a read by.
                        Err(e) if templates && e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => {}
                        // Fail closed: without the listing the gateway cannot
                        // tell whether a withheld entry covers this URI.
                        Err(e) => {
                            return Err(McpError::internal_error(
                                format!(
                                    "portcullis: refusing to read {uri:?}: listing {} first failed, \
                                     so the gateway cannot tell whether a withheld entry covers it: {}",
                                    if templates { "resources/templates/list" } else { "resources/list" },
                                    e.message
                                ),
                                Some(json!({ "code": e.code.0 })),
                            ))
                        }
                    }
                }
                self.tables().resources_listed = true;
                continue;
            }
            if self.upstreams.len() == 1 {
                return Ok(0);
            }
        }
        Err(McpError::resource_not_found(
            format!("portcullis: no upstream serves {uri:?}"),
            None,
        ))
    }

    /// `tools/call`: route, the egress guard and the structural egress controls
    /// on the arguments, forward, inspect the result, then the structural result
    /// checks ([`Self::result_checks`]).
    async fn call_tool(
        &self,
        mut r: rmcp::model::CallToolRequest,
        ctx: &RequestContext<RoleServer>,
        session: u64,
    ) -> Result<ServerResult, McpError> {
        let exposed = r.params.name.to_string();
        let route = self
            .route(Channel::ToolDefinition, &exposed, ctx, session)
            .await?;
        let server = self.upstreams[route.upstream].name().to_string();
        let args = r
            .params
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or(Value::Object(Map::new()));
        let egress = self
            .inspector
            .arguments(&server, &route.name, &args)
            .await
            .map_err(internal)?;
        if !egress.forward {
            return Ok(ServerResult::CallToolResult(withheld_result(&egress)));
        }
        // Structural egress controls: over-privileged parameters filled,
        // labelled values flowing to another server or a sink.
        let def = self
            .tables()
            .defs
            .get(&(route.upstream, route.name.clone()))
            .cloned();
        let verdict = self
            .structural
            .call(&self.inspector, &server, &route.name, def.as_deref(), &args)
            .await
            .map_err(internal)?;
        if !verdict.passes() {
            return Ok(ServerResult::CallToolResult(held_result(
                &verdict.message("this tool call"),
            )));
        }
        r.params.name = route.name.clone().into();
        let result = self
            .forward(
                route.upstream,
                ClientRequest::CallToolRequest(r),
                ctx,
                session,
            )
            .await?;
        let raw = to_value(&result)?;
        let inspected = self
            .inspected_with_record(
                Channel::ToolResult,
                route.upstream,
                Some(&route.name),
                result,
            )
            .await?;
        if !inspected.passed {
            return Ok(inspected.result);
        }
        let unmasked = inspected.cut.as_ref().unwrap_or(&raw);
        self.result_checks(
            &server,
            &route.name,
            &args,
            (&raw, unmasked),
            &inspected.record_id,
            inspected.result,
        )
        .await
    }

    /// The structural checks (tool transfer, result-borne rug pulls, taint
    /// labels) on a result the detector let through, known from the gateway's own
    /// decision (record `result_record`), never from the text of the result
    /// (which the server writes). `out` as forwarded, or a held notice.
    async fn result_checks(
        &self,
        server: &str,
        tool: &str,
        args: &Value,
        (raw, unmasked): (&Value, &Value),
        result_record: &str,
        out: ServerResult,
    ) -> Result<ServerResult, McpError> {
        let ServerResult::CallToolResult(forwarded) = &out else {
            return Ok(out);
        };
        let shown = to_value(forwarded)?;
        let known: Vec<String> = {
            let t = self.tables();
            t.tools
                .keys()
                .cloned()
                .chain(t.defs.keys().map(|(_, n)| n.clone()))
                .collect()
        };
        let v = self
            .structural
            .result(
                &self.inspector,
                server,
                tool,
                args,
                (raw, unmasked),
                &shown,
                &known,
                Some(result_record),
            )
            .await
            .map_err(internal)?;
        if v.passes() {
            Ok(out)
        } else {
            Ok(ServerResult::CallToolResult(held_result(
                &v.message("this tool result"),
            )))
        }
    }

    async fn handle(
        &self,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
        session: u64,
    ) -> Result<ServerResult, McpError> {
        match request {
            ClientRequest::InitializeRequest(_) => {
                self.router.register(session, ctx.peer.clone());
                Ok(ServerResult::InitializeResult(self.info.clone()))
            }
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            ClientRequest::ListToolsRequest(_) => {
                let tools = self.list(ListKind::Tools, false, &ctx, session).await?;
                typed(json!({ "tools": tools }), ServerResult::ListToolsResult)
            }
            ClientRequest::ListPromptsRequest(_) => {
                let prompts = self.list(ListKind::Prompts, false, &ctx, session).await?;
                typed(
                    json!({ "prompts": prompts }),
                    ServerResult::ListPromptsResult,
                )
            }
            ClientRequest::ListResourcesRequest(_) => {
                let resources = self.list(ListKind::Resources, false, &ctx, session).await?;
                typed(
                    json!({ "resources": resources }),
                    ServerResult::ListResourcesResult,
                )
            }
            ClientRequest::ListResourceTemplatesRequest(_) => {
                let templates = self.list(ListKind::Resources, true, &ctx, session).await?;
                typed(
                    json!({ "resourceTemplates": templates }),
                    ServerResult::ListResourceTemplatesResult,
                )
            }
            ClientRequest::CallToolRequest(r) => self.call_tool(r, &ctx, session).await,
            ClientRequest::GetPromptRequest(mut r) => {
                let exposed = r.params.name.to_string();
                let route = self.route(Channel::Prompt, &exposed, &ctx, session).await?;
                r.params.name = route.name.clone();
                self.egress(route.upstream, &route.name, &to_value(&r.params)?)
                    .await?;
                let result = self
                    .forward(
                        route.upstream,
                        ClientRequest::GetPromptRequest(r),
                        &ctx,
                        session,
                    )
                    .await?;
                self.inspected(Channel::Prompt, route.upstream, Some(&route.name), result)
                    .await
            }
            ClientRequest::ReadResourceRequest(r) => {
                let uri = r.params.uri.clone();
                let i = self.resource_route(&uri, &ctx, session).await?;
                self.egress(i, "resources/read", &to_value(&r.params)?)
                    .await?;
                let result = self
                    .forward(i, ClientRequest::ReadResourceRequest(r), &ctx, session)
                    .await?;
                self.inspected(Channel::Resource, i, None, result).await
            }
            ClientRequest::SubscribeRequest(r) => {
                let i = self
                    .resource_route(&r.params.uri.clone(), &ctx, session)
                    .await?;
                self.egress(i, "resources/subscribe", &to_value(&r.params)?)
                    .await?;
                self.forward(i, ClientRequest::SubscribeRequest(r), &ctx, session)
                    .await
            }
            ClientRequest::UnsubscribeRequest(r) => {
                let i = self
                    .resource_route(&r.params.uri.clone(), &ctx, session)
                    .await?;
                self.egress(i, "resources/unsubscribe", &to_value(&r.params)?)
                    .await?;
                self.forward(i, ClientRequest::UnsubscribeRequest(r), &ctx, session)
                    .await
            }
            ClientRequest::SetLevelRequest(r) => {
                // Every upstream logs at the level the client asked for.
                for i in 0..self.upstreams.len() {
                    if self.upstreams[i].info.capabilities.logging.is_some() {
                        self.forward(i, ClientRequest::SetLevelRequest(r.clone()), &ctx, session)
                            .await?;
                    }
                }
                Ok(ServerResult::empty(()))
            }
            other if self.upstreams.len() == 1 => {
                // Completion and anything newer: its parameters through the
                // egress guard, relayed to the one upstream, and the answer
                // walked string by string like any result.
                let params = to_value(&other)?
                    .get("params")
                    .cloned()
                    .unwrap_or(Value::Null);
                self.egress(0, other.method(), &params).await?;
                let result = self.forward(0, other, &ctx, session).await?;
                self.inspected(Channel::ToolResult, 0, None, result).await
            }
            other => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "portcullis: {} is not routed when several servers are fronted",
                    other.method()
                ),
                None,
            )),
        }
    }
}

/// A downstream session: the rmcp server-side service of one client connection.
#[derive(Clone)]
pub struct Session {
    gw: Arc<Gateway>,
    id: u64,
}

impl Session {
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Session {
    /// Every handler method funnels into [`Gateway::handle`] with the request
    /// rebuilt from its method and params: one path for all of them.
    async fn call(
        &self,
        method: &str,
        params: impl serde::Serialize,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        self.gw.router.register(self.id, ctx.peer.clone());
        let mut v = json!({ "method": method });
        let p = to_value(&params)?;
        if !p.is_null() {
            v["params"] = p;
        }
        let request: ClientRequest = serde_json::from_value(v).map_err(internal)?;
        let Some(metrics) = &self.gw.metrics else {
            return self.gw.handle(request, ctx, self.id).await;
        };
        let start = std::time::Instant::now();
        let answer = self.gw.handle(request, ctx, self.id).await;
        metrics.observe_request(method, answer.is_ok(), start.elapsed());
        answer
    }
}

fn unexpected(r: ServerResult) -> McpError {
    McpError::internal_error(
        format!(
            "portcullis: unexpected result kind {}",
            crate::upstream::result_name(&r)
        ),
        None,
    )
}

impl ServerHandler for Session {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        self.gw.router.register(self.id, context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        match self.call("tools/list", request, context).await? {
            ServerResult::ListToolsResult(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match self.call("tools/call", request, context).await? {
            ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
            ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
            r => Err(unexpected(r)),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        match self.call("prompts/list", request, context).await? {
            ServerResult::ListPromptsResult(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        match self.call("prompts/get", request, context).await? {
            ServerResult::GetPromptResult(r) => Ok(GetPromptResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(GetPromptResponse::InputRequired(r)),
            r => Err(unexpected(r)),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        match self.call("resources/list", request, context).await? {
            ServerResult::ListResourcesResult(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        match self
            .call("resources/templates/list", request, context)
            .await?
        {
            ServerResult::ListResourceTemplatesResult(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        match self.call("resources/read", request, context).await? {
            ServerResult::ReadResourceResult(r) => Ok(ReadResourceResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(ReadResourceResponse::InputRequired(r)),
            r => Err(unexpected(r)),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.call("resources/subscribe", request, context)
            .await
            .map(|_| ())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.call("resources/unsubscribe", request, context)
            .await
            .map(|_| ())
    }

    #[allow(deprecated)] // logging is deprecated by SEP-2577 but clients still use it
    async fn set_level(
        &self,
        #[allow(deprecated)] request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.call("logging/setLevel", request, context)
            .await
            .map(|_| ())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        match self.call("completion/complete", request, context).await? {
            ServerResult::CompleteResult(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        self.gw.router.register(self.id, context.peer.clone());
        match self
            .gw
            .handle(ClientRequest::CustomRequest(request), context, self.id)
            .await?
        {
            ServerResult::CustomResult(r) => Ok(r),
            other => to_value(&other).map(CustomResult::new),
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        for up in &self.gw.upstreams {
            if let Ok(peer) = up.peer().await {
                let _ = peer.notify_roots_list_changed().await;
            }
        }
    }

    fn get_info(&self) -> InitializeResult {
        self.gw.info.clone()
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&crate::MAX_PROTOCOL))
    }
}

/// Upstreams started at the same time at most (each a process, or a connection).
const CONNECTING_AT_ONCE: usize = 8;

/// Every configured upstream, connected, in the configuration's order. They
/// start side by side: one after another, a gateway in front of 62 real servers
/// took 97 s to answer `initialize` (each npx or uvx package takes a second or
/// more to start), longer than clients wait. The first failure, in the
/// configuration's order, is the error; the others' processes are killed.
async fn connect_all(
    config: &GatewayConfig,
    router: &Arc<Router>,
    caps: &ClientCapabilities,
) -> Result<Vec<Arc<Upstream>>, GatewayError> {
    let limit = Arc::new(tokio::sync::Semaphore::new(CONNECTING_AT_ONCE));
    let mut set = tokio::task::JoinSet::new();
    for (i, s) in config.servers.iter().enumerate() {
        let (s, router, caps, limit) = (s.clone(), router.clone(), caps.clone(), limit.clone());
        let max = config.max_message_bytes;
        set.spawn(async move {
            // The semaphore is never closed.
            let _turn = limit.acquire_owned().await;
            let name = s.name.clone();
            let up = Upstream::connect(s, router, max, caps).await;
            if up.is_ok() {
                tracing::info!(server = %name, "upstream connected");
            }
            (i, up)
        });
    }
    let mut connected: Vec<Option<Upstream>> = config.servers.iter().map(|_| None).collect();
    let mut failed: Option<(usize, UpstreamError)> = None;
    while let Some(joined) = set.join_next().await {
        let (i, up) = joined.map_err(|e| UpstreamError::Initialize {
            server: "?".into(),
            message: format!("connecting task failed: {e}"),
        })?;
        match up {
            Ok(up) => connected[i] = Some(up),
            Err(e) if failed.as_ref().is_none_or(|(j, _)| i < *j) => failed = Some((i, e)),
            Err(_) => {}
        }
    }
    if let Some((_, e)) = failed {
        return Err(e.into());
    }
    Ok(connected.into_iter().flatten().map(Arc::new).collect())
}

/// The gateway's own `initialize` answer: the union of the upstreams' capabilities
/// and their inspected instructions (withheld ones are left out and logged).
async fn merged_info(
    config: &GatewayConfig,
    inspector: &Inspector,
    structural: &Structural,
    upstreams: &[Arc<Upstream>],
) -> Result<InitializeResult, GatewayError> {
    let caps = merged_capabilities(upstreams.iter().map(|u| &u.info.capabilities));
    let mut parts = Vec::new();
    for up in upstreams {
        if let Some(text) = &up.info.instructions {
            let (mut kept, record) = inspector.instructions(up.name(), text).await?;
            if kept.is_some() {
                let v = structural
                    .check_definition(
                        inspector,
                        Channel::ServerInstructions,
                        up.name(),
                        pin_kind::INSTRUCTIONS,
                        "",
                        &Value::String(text.clone()),
                        &[String::new()],
                        Some(&record),
                        true,
                    )
                    .await?;
                if !v.passes() {
                    tracing::warn!(
                        server = up.name(),
                        "instructions changed since pinned: {}",
                        v.message("the instructions")
                    );
                    kept = None;
                }
            }
            if let Some(t) = &kept {
                structural.shown_instructions(up.name(), t);
            }
            match kept {
                Some(t) if config.namespaced() => parts.push(format!("[{}] {t}", up.name())),
                Some(t) => parts.push(t),
                None => {
                    tracing::warn!(server = up.name(), record = %record.id, "instructions withheld")
                }
            }
        }
    }
    let mut info = InitializeResult::new(caps);
    info.protocol_version = crate::MAX_PROTOCOL;
    let own = || Implementation::new("portcullis", env!("CARGO_PKG_VERSION"));
    info.server_info = match (upstreams, config.namespaced()) {
        // The one upstream's own name, title, description and links reach the
        // client: inspected like its instructions, and replaced by the
        // gateway's own if withheld.
        ([one], false) => match &one.info.server_info {
            Some(si) => {
                let mut v = serde_json::to_value(si).unwrap_or(Value::Null);
                let out = inspector
                    .message(Channel::ServerInstructions, one.name(), None, &mut v)
                    .await?;
                match (out.forward, serde_json::from_value::<Implementation>(v)) {
                    (true, Ok(kept)) => kept,
                    _ => {
                        tracing::warn!(server = one.name(), record = %out.record.id, "serverInfo withheld");
                        own()
                    }
                }
            }
            None => own(),
        },
        _ => own(),
    };
    info.instructions = (!parts.is_empty()).then(|| parts.join("\n\n"));
    Ok(info)
}

/// The capabilities the gateway declares: each one as its upstreams declared it
/// (for one upstream, exactly its own), or-ed across several. `listChanged` is
/// passed as given: the gateway sends a list_changed notification only after an
/// upstream sent one (it re-lists first), so it promises what its upstreams do.
/// Left out: what the gateway does not relay (`experimental`, `extensions` such
/// as SEP-2663 tasks), and `completions` when several servers are fronted
/// (completion requests are routed only to a single upstream).
fn merged_capabilities<'a>(
    all: impl Iterator<Item = &'a ServerCapabilities>,
) -> ServerCapabilities {
    /// Two upstreams' flags: true if either is; absent only if both are.
    fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
        match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(false) || b.unwrap_or(false)),
        }
    }
    let all: Vec<&ServerCapabilities> = all.collect();
    let mut caps = ServerCapabilities::default();
    for c in &all {
        if let Some(t) = &c.tools {
            caps.tools = Some(match caps.tools.take() {
                None => t.clone(),
                Some(mut m) => {
                    m.list_changed = or(m.list_changed, t.list_changed);
                    m
                }
            });
        }
        if let Some(p) = &c.prompts {
            caps.prompts = Some(match caps.prompts.take() {
                None => p.clone(),
                Some(mut m) => {
                    m.list_changed = or(m.list_changed, p.list_changed);
                    m
                }
            });
        }
        if let Some(r) = &c.resources {
            caps.resources = Some(match caps.resources.take() {
                None => r.clone(),
                Some(mut m) => {
                    m.list_changed = or(m.list_changed, r.list_changed);
                    m.subscribe = or(m.subscribe, r.subscribe);
                    m
                }
            });
        }
        // `logging` and `completions` are presence markers (empty objects in the
        // specification): declared as such, whatever a server wrote inside.
        if caps.logging.is_none() && c.logging.is_some() {
            caps.logging = Some(Default::default());
        }
        if all.len() == 1 && c.completions.is_some() {
            caps.completions = Some(Default::default());
        }
    }
    caps
}

/// The channel a list method's entries are inspected on.
fn list_channel(kind: ListKind) -> Channel {
    match kind {
        ListKind::Tools => Channel::ToolDefinition,
        ListKind::Prompts => Channel::Prompt,
        ListKind::Resources => Channel::Resource,
    }
}

fn declares(c: &ServerCapabilities, kind: ListKind) -> bool {
    match kind {
        ListKind::Tools => c.tools.is_some(),
        ListKind::Prompts => c.prompts.is_some(),
        ListKind::Resources => c.resources.is_some(),
    }
}

fn list_method(kind: ListKind, templates: bool) -> (&'static str, &'static str) {
    match (kind, templates) {
        (ListKind::Tools, _) => ("tools/list", "tools"),
        (ListKind::Prompts, _) => ("prompts/list", "prompts"),
        (ListKind::Resources, false) => ("resources/list", "resources"),
        (ListKind::Resources, true) => ("resources/templates/list", "resourceTemplates"),
    }
}

/// The literal parts of a URI template (RFC 6570), split at its `{…}`
/// expressions; an unclosed `{` is literal text.
fn template_literals(template: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        parts.push(&rest[..open]);
        rest = &rest[open + close + 1..];
    }
    parts.push(rest);
    parts
}

fn template_literal_len(template: &str) -> usize {
    template_literals(template).iter().map(|p| p.len()).sum()
}

/// Whether a URI could be an expansion of a template: its literal parts in
/// order, each expression standing for any text (a superset of RFC 6570
/// matching, so a URI a withheld template could produce is never missed).
fn template_matches(template: &str, uri: &str) -> bool {
    let parts = template_literals(template);
    let (Some(&first), Some(&last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return uri == first;
    }
    let Some(mut rest) = uri.strip_prefix(first) else {
        return false;
    };
    let Some(r) = rest.strip_suffix(last) else {
        return false;
    };
    rest = r;
    for &mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

fn entry_ident(kind: ListKind, templates: bool, v: &Value) -> String {
    let key = match (kind, templates) {
        (ListKind::Resources, false) => "uri",
        (ListKind::Resources, true) => "uriTemplate",
        _ => "name",
    };
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The client's request metadata minus what rmcp sets itself (the progress token
/// is replaced by one per upstream request; protocol keys are per connection).
fn passthrough_meta(meta: &RequestMetaObject) -> Option<RequestMetaObject> {
    let mut m = meta.clone();
    m.0.shift_remove("progressToken");
    m.0.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
    (!m.0.is_empty()).then_some(m)
}

/// A tool result in place of one a structural control withheld.
fn held_result(text: &str) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(text.to_string())]);
    r.structured_content = None;
    r
}

/// A result after inspection: what goes to the client, the record's id, whether
/// the server's result went through (false: what goes is the gateway's notice),
/// and, if the gateway cut flagged text out of it, that result before the output
/// guard's masks ([`crate::inspect::Outcome::cut`]).
struct Inspected {
    result: ServerResult,
    record_id: String,
    passed: bool,
    cut: Option<Value>,
}

fn withheld_result(out: &Outcome) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(out.withheld_message())]);
    r.structured_content = None;
    r
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, McpError> {
    serde_json::to_value(v).map_err(internal)
}

fn typed<T: serde::de::DeserializeOwned>(
    v: Value,
    wrap: fn(T) -> ServerResult,
) -> Result<ServerResult, McpError> {
    serde_json::from_value::<T>(v).map(wrap).map_err(internal)
}

/// Back from JSON into the variant the result came as.
fn retype(original: &ServerResult, v: Value) -> Result<ServerResult, McpError> {
    match original {
        ServerResult::CallToolResult(_) => typed(v, ServerResult::CallToolResult),
        ServerResult::ReadResourceResult(_) => typed(v, ServerResult::ReadResourceResult),
        ServerResult::GetPromptResult(_) => typed(v, ServerResult::GetPromptResult),
        ServerResult::CompleteResult(_) => typed(v, ServerResult::CompleteResult),
        ServerResult::EmptyResult(_) => typed(v, ServerResult::EmptyResult),
        ServerResult::CustomResult(_) => typed(v, ServerResult::CustomResult),
        _ => serde_json::from_value::<ServerResult>(v).map_err(internal),
    }
}

/// The name a request is about (a tool's or a prompt's), for its records.
fn request_subject(r: &ClientRequest) -> Option<String> {
    match r {
        ClientRequest::CallToolRequest(r) => Some(r.params.name.to_string()),
        ClientRequest::GetPromptRequest(r) => Some(r.params.name.clone()),
        _ => None,
    }
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("portcullis: {e}"), None)
}

/// An error of the connection to an upstream, in the gateway's own words. A
/// JSON-RPC error the server answered with is its text: [`Gateway::forward`]
/// inspects it; here (a re-list) only its code is kept.
fn service_error(server: &str, e: ServiceError) -> McpError {
    match e {
        ServiceError::McpError(e) => McpError::internal_error(
            format!(
                "portcullis: server {server:?} answered with error {}",
                e.code.0
            ),
            None,
        ),
        ServiceError::Timeout { timeout } => McpError::internal_error(
            format!(
                "portcullis: server {server:?} did not answer within {timeout:?} \
                 (request_timeout_secs in the gateway configuration sets the limit)"
            ),
            None,
        ),
        other => McpError::internal_error(format!("portcullis: server {server:?}: {other}"), None),
    }
}

/// The length of `v` as JSON text, counted without writing the text out (a
/// result is measured against `max_message_bytes` on every call). A value that
/// cannot be serialized counts as too long.
fn serialized_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    match serde_json::to_writer(&mut n, v) {
        Ok(()) => n.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(v: Value) -> ServerCapabilities {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_value_is_measured_as_long_as_its_json_text() {
        let v = serde_json::json!({
            "content": [{"type": "text", "text": "quotes \" and \\ and \n, é, 😀, \u{1b}"}],
            "n": [1.5, -2, 1e300], "isError": false, "empty": {}
        });
        assert_eq!(serialized_len(&v), v.to_string().len());
        assert_eq!(serialized_len(&Value::Null), 4);
    }

    #[test]
    fn one_upstreams_capabilities_are_declared_as_it_declared_them() {
        // listChanged false or absent stays so: the gateway announces a list
        // change only after an upstream sent one.
        for c in [
            json!({"tools": {}, "prompts": {"listChanged": false}, "resources": {"subscribe": true}, "logging": {}, "completions": {}}),
            json!({"tools": {"listChanged": true}, "resources": {"listChanged": false}}),
            json!({}),
        ] {
            let one = caps(c.clone());
            let merged = merged_capabilities([&one].into_iter());
            assert_eq!(serde_json::to_value(&merged).unwrap(), c);
        }
    }

    #[test]
    fn several_upstreams_or_their_flags_and_drop_completions() {
        let a = caps(json!({"tools": {}, "resources": {"listChanged": false}, "completions": {}}));
        let b = caps(
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {}}),
        );
        let merged = merged_capabilities([&a, &b].into_iter());
        assert_eq!(
            serde_json::to_value(&merged).unwrap(),
            json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"listChanged": false, "subscribe": true}})
        );
    }

    #[test]
    fn the_decision_cache_keeps_its_most_recently_used_entries() {
        let mut c: Lru<String, u32> = Lru::new(3);
        for (i, k) in ["a", "b", "c"].iter().enumerate() {
            assert!(c.insert(k.to_string(), i as u32));
        }
        // Using `a` makes `b` the oldest: a fourth entry evicts `b`.
        assert_eq!(c.get(&"a".to_string()), Some(0));
        assert!(c.insert("d".into(), 3));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"b".to_string()), None);
        assert_eq!(c.get(&"a".to_string()), Some(0));
        // Replacing is not inserting, and never grows the map.
        assert!(!c.insert("d".into(), 4));
        assert_eq!(c.get(&"d".to_string()), Some(4));
        for i in 0..10_000u32 {
            c.insert(format!("k{i}"), i);
        }
        assert_eq!(c.len(), 3);
        assert_eq!(c.order.len(), 3);
    }

    #[test]
    fn uris_match_templates_by_their_literal_parts() {
        assert!(template_matches("note://{name}", "note://groceries"));
        assert!(template_matches("note://{name}", "note://"));
        assert!(!template_matches("note://{name}", "file:///etc/passwd"));
        assert!(template_matches("file:///{+path}.md", "file:///a/b/c.md"));
        assert!(!template_matches("file:///{+path}.md", "file:///a/b/c.txt"));
        assert!(template_matches(
            "repo://{owner}/{repo}/issues{?state}",
            "repo://o/r/issues?state=open"
        ));
        assert!(!template_matches(
            "repo://{owner}/{repo}/issues",
            "repo://o-r"
        ));
        // No expression: the template is one URI.
        assert!(template_matches("note://readme", "note://readme"));
        assert!(!template_matches("note://readme", "note://readme2"));
        // An unclosed brace is literal text.
        assert!(template_matches("x://{a", "x://{a"));
        assert!(template_literal_len("repo://{owner}/{repo}") > template_literal_len("repo://{x}"));
    }
}

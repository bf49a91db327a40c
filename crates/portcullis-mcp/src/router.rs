//! Routing between downstream sessions and upstream connections: which client
//! session a server's own request or progress belongs to, and what happens to the
//! notifications an upstream sends.
//!
//! Upstream connections are shared by all downstream sessions. A server's request
//! (sampling, elicitation, roots) goes to the session whose call to that server is
//! in flight (the most recent one), else to the most recently active session.
//!
//! Every notification that carries a server's text toward a client is inspected
//! on `tool_result` (a record first) before it is relayed: a progress message goes
//! only to the session whose progress token it is; a logging message only to the
//! one session it can be attributed to ([`Router::log_target`]); a held one is
//! relayed with its text replaced by a notice naming the record.

use crate::inspect::Inspector;
use portcullis_core::Channel;
use rmcp::model::{
    ClientResult, ErrorCode, ErrorData as McpError, ProgressNotification,
    ProgressNotificationParam, ProgressToken, ServerNotification, ServerRequest,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// JSON-RPC error code of a message the gateway withheld (held or blocked).
pub const WITHHELD: ErrorCode = ErrorCode(-32050);

/// What kind of list an upstream said has changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

#[derive(Default)]
struct State {
    sessions: HashMap<u64, Peer<RoleServer>>,
    /// Sessions with a request in flight, per upstream, oldest first.
    inflight: HashMap<String, Vec<u64>>,
    /// Upstream progress token → (session, the token the client gave).
    progress: HashMap<ProgressToken, (u64, ProgressToken)>,
    last_active: Option<u64>,
    /// What the client answered each upstream's sampling and elicitation
    /// requests lately: the newest [`QUOTED_ANSWERS`], each for [`QUOTED_FOR`].
    answers: HashMap<String, std::collections::VecDeque<(std::time::Instant, Vec<String>)>>,
}

/// The notifications that belong to a call in flight (a response must not overtake
/// them): progress and log messages. rmcp hands both to the handler.
pub fn belongs_to_a_call(n: &ServerNotification) -> bool {
    matches!(
        n,
        ServerNotification::ProgressNotification(_)
            | ServerNotification::LoggingMessageNotification(_)
    )
}

/// How long a notification read and never taken up by the relay holds calls up.
const UNREAD_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// How many of an upstream's latest client answers, and for how long, a result of
/// that upstream can quote without the learned stages scoring the quote.
const QUOTED_ANSWERS: usize = 8;
const QUOTED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// The strings of a client's answer that a server may quote back: every key and
/// string value as JSON writes it (quotes included, so `"role"` and not the word
/// role), and string values of 16 bytes or more as they are (a reply the server
/// pastes into its own sentence).
fn answer_quotes(answer: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => {
                out.extend(serde_json::to_string(s).ok());
                if s.len() >= 16 {
                    out.push(s.clone());
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => {
                for (k, x) in o {
                    out.extend(serde_json::to_string(k).ok());
                    walk(x, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(answer, &mut out);
    out.sort();
    out.dedup();
    out
}

pub struct Router {
    state: Mutex<State>,
    /// Notifications of each upstream being inspected and relayed right now.
    relaying: Mutex<HashMap<String, usize>>,
    /// Woken whenever a relay ends.
    relayed: tokio::sync::Notify,
    /// Progress and log notifications each upstream's transport has read and the
    /// handler has not yet taken up, with when each was read (oldest first).
    unread: Mutex<HashMap<String, std::collections::VecDeque<std::time::Instant>>>,
    /// Per upstream: written while a request is sent and its call registered
    /// ([`Router::sending`]), read before a message of the upstream is attributed
    /// to a call ([`Router::registered`]).
    sending: Mutex<HashMap<String, Arc<tokio::sync::RwLock<()>>>>,
    next_session: AtomicU64,
    inspector: Arc<Inspector>,
    relist: tokio::sync::mpsc::UnboundedSender<(String, ListKind)>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router").finish_non_exhaustive()
    }
}

/// Removes a request from the in-flight table when the call ends, however it ends.
pub struct InFlight {
    router: Arc<Router>,
    server: String,
    session: u64,
    token: Option<ProgressToken>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut st = self.router.lock();
        if let Some(v) = st.inflight.get_mut(&self.server) {
            if let Some(i) = v.iter().rposition(|s| *s == self.session) {
                v.remove(i);
            }
        }
        if let Some(t) = &self.token {
            st.progress.remove(t);
        }
    }
}

impl Router {
    pub fn new(
        inspector: Arc<Inspector>,
        relist: tokio::sync::mpsc::UnboundedSender<(String, ListKind)>,
    ) -> Router {
        Router {
            state: Mutex::new(State::default()),
            relaying: Mutex::new(HashMap::new()),
            relayed: tokio::sync::Notify::new(),
            unread: Mutex::new(HashMap::new()),
            sending: Mutex::new(HashMap::new()),
            next_session: AtomicU64::new(1),
            inspector,
            relist,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain maps behind; keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn new_session_id(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }

    pub fn register(&self, session: u64, peer: Peer<RoleServer>) {
        let mut st = self.lock();
        // HTTP sessions end without telling the handler: forget closed ones here.
        st.sessions.retain(|_, p| !p.is_transport_closed());
        st.sessions.insert(session, peer);
        st.last_active = Some(session);
    }

    pub fn unregister(&self, session: u64) {
        let mut st = self.lock();
        st.sessions.remove(&session);
        if st.last_active == Some(session) {
            st.last_active = None;
        }
    }

    /// Note a request of `session` to `server`; `upstream_token` is the progress
    /// token the upstream will use, `client_token` the one the client gave.
    pub fn begin(
        self: &Arc<Self>,
        session: u64,
        server: &str,
        upstream_token: Option<ProgressToken>,
        client_token: Option<ProgressToken>,
    ) -> InFlight {
        let mut st = self.lock();
        st.inflight
            .entry(server.to_string())
            .or_default()
            .push(session);
        st.last_active = Some(session);
        let token = match (upstream_token, client_token) {
            (Some(up), Some(client)) => {
                st.progress.insert(up.clone(), (session, client));
                Some(up)
            }
            _ => None,
        };
        InFlight {
            router: self.clone(),
            server: server.to_string(),
            session,
            token,
        }
    }

    fn sending_lock(&self, server: &str) -> Arc<tokio::sync::RwLock<()>> {
        let mut locks = self.sending.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up on every call and relayed notification: no key allocated
        // once the upstream has its lock.
        match locks.get(server) {
            Some(l) => l.clone(),
            None => locks.entry(server.to_string()).or_default().clone(),
        }
    }

    /// Hold this from before a request goes to `server` until its call is
    /// registered ([`Router::begin`]). An upstream can answer a request before
    /// the task that sent it runs again; its progress message would then find no
    /// call to go to (it was dropped), and its log line or sampling request would
    /// be attributed to whichever session was active before.
    pub(crate) async fn sending(&self, server: &str) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.sending_lock(server).write_owned().await
    }

    /// Wait until every request sent to `server` so far is registered as a call:
    /// whatever the upstream sends about a request comes after it was sent, so
    /// from here its call can be found.
    async fn registered(&self, server: &str) {
        drop(self.sending_lock(server).read_owned().await);
    }

    fn session_for(&self, server: &str) -> Option<Peer<RoleServer>> {
        let st = self.lock();
        let id = st
            .inflight
            .get(server)
            .and_then(|v| v.last().copied())
            .or(st.last_active)?;
        st.sessions.get(&id).cloned()
    }

    /// The one session a logging notification of `server` belongs to: the
    /// session with a request to that server in flight, if exactly one has; with
    /// none in flight, the only session if there is one (stdio: the client).
    /// Otherwise `None`: the message cannot be attributed, and relaying it to
    /// every session would show one client another's activity, so it is dropped.
    fn log_target(&self, server: &str) -> Option<Peer<RoleServer>> {
        let st = self.lock();
        let inflight: std::collections::BTreeSet<u64> = st
            .inflight
            .get(server)
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default();
        let open: Vec<(&u64, &Peer<RoleServer>)> = st
            .sessions
            .iter()
            .filter(|(_, p)| !p.is_transport_closed())
            .collect();
        match (inflight.len(), open.as_slice()) {
            (1, _) => inflight.first().and_then(|id| st.sessions.get(id)).cloned(),
            (0, [(_, only)]) => Some((*only).clone()),
            _ => None,
        }
    }

    /// Inspect what a notification carries toward the client (`value`, masked
    /// in place). `None`: nothing in it is text (no record is written).
    async fn inspect_notification(
        &self,
        server: &str,
        value: &mut Value,
    ) -> Result<Option<crate::inspect::Outcome>, McpError> {
        if crate::inspect::message_items(Channel::ToolResult, value)
            .items
            .is_empty()
        {
            return Ok(None);
        }
        self.inspector
            .message(Channel::ToolResult, server, None, value)
            .await
            .map(Some)
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    fn sessions(&self) -> Vec<Peer<RoleServer>> {
        self.lock().sessions.values().cloned().collect()
    }

    /// A request from an upstream (sampling, elicitation, roots, custom): inspected
    /// toward the model or user, relayed to the session it belongs to, and the
    /// client's answer inspected as egress before it goes back to the server.
    pub async fn server_request(
        &self,
        server: &str,
        request: ServerRequest,
        ct: CancellationToken,
    ) -> Result<ClientResult, McpError> {
        self.registered(server).await;
        let Some(peer) = self.session_for(server) else {
            return Err(McpError::internal_error(
                "portcullis: no client session to relay this request to",
                None,
            ));
        };
        // Relay only what the client declared it can answer.
        let caps = peer.peer_info().map(|i| i.capabilities.clone());
        let declared = match &request {
            ServerRequest::CreateMessageRequest(_) => {
                caps.as_ref().is_some_and(|c| c.sampling.is_some())
            }
            ServerRequest::ElicitRequest(_) => {
                caps.as_ref().is_some_and(|c| c.elicitation.is_some())
            }
            ServerRequest::ListRootsRequest(_) => caps.as_ref().is_some_and(|c| c.roots.is_some()),
            _ => true,
        };
        if !declared {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                "portcullis: the client did not declare this capability",
                None,
            ));
        }
        // A roots request carries nothing to show; its answer (the client's
        // roots) goes to the server like any other answer and is read below.
        let inspect = !matches!(request, ServerRequest::ListRootsRequest(_));
        let request = if inspect {
            let mut v = serde_json::to_value(&request)
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            let out = self
                .inspector
                .message(Channel::SamplingRequest, server, None, &mut v)
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            if !out.forward {
                return Err(withheld_error(&out));
            }
            serde_json::from_value::<ServerRequest>(v)
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
        } else {
            request
        };
        let answer = tokio::select! {
            r = peer.send_request(request) => r,
            _ = ct.cancelled() => return Err(McpError::internal_error("cancelled by the server", None)),
        };
        // What the client (its model or user) answers goes to the server — a
        // result or a JSON-RPC error alike: the egress guard reads it (secrets,
        // canaries, PII), on a channel of its own. It is not text shown to the
        // model, so the rules and learned stages that look for injections do not
        // score it.
        let v = match &answer {
            Ok(a) => serde_json::to_value(a),
            Err(rmcp::service::ServiceError::McpError(e)) => {
                serde_json::to_value(e).map(|e| serde_json::json!({ "error": e }))
            }
            // The client went away or the transport failed: nothing of the
            // client's reaches the server, only that relaying failed.
            Err(e) => {
                tracing::warn!(server, error = %e, "relaying a server request to the client failed");
                return Err(McpError::internal_error(
                    "portcullis: relaying to the client failed",
                    None,
                ));
            }
        }
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let out = self
            .inspector
            .message(Channel::SamplingResponse, server, None, &mut v.clone())
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        if out.record.status != portcullis_core::Status::Allow {
            return Err(withheld_error(&out));
        }
        // The answer becomes text a result of this server may quote without the
        // learned stages scoring it, so it must pass as a result on its own: a
        // server cannot have the client's model write its injection (a reversed
        // or translated text) and then paste it past them.
        if answer.is_ok() && self.inspector.passes(Channel::ToolResult, server, &v).await {
            self.remember_answer(server, answer_quotes(&v));
        }
        match answer {
            Ok(a) => Ok(a),
            Err(rmcp::service::ServiceError::McpError(e)) => Err(e),
            Err(_) => Err(McpError::internal_error(
                "portcullis: relaying to the client failed",
                None,
            )),
        }
    }

    fn remember_answer(&self, server: &str, quotes: Vec<String>) {
        let mut st = self.lock();
        let recent = st.answers.entry(server.to_string()).or_default();
        if recent.len() == QUOTED_ANSWERS {
            recent.pop_front();
        }
        recent.push_back((std::time::Instant::now(), quotes));
    }

    /// What the client lately answered `server`'s own requests (see
    /// [`answer_quotes`]): a result of `server` that quotes it is not scored there
    /// by the learned stages ([`Inspector::message_quoting`]).
    pub fn client_quotes(&self, server: &str) -> Vec<String> {
        let mut st = self.lock();
        let Some(recent) = st.answers.get_mut(server) else {
            return Vec::new();
        };
        recent.retain(|(at, _)| at.elapsed() < QUOTED_FOR);
        recent.iter().flat_map(|(_, q)| q.iter().cloned()).collect()
    }

    fn relaying(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.relaying.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The upstream's transport read a notification that belongs to a call in
    /// flight ([`belongs_to_a_call`]); its relay has not started yet.
    pub fn notification_read(&self, server: &str) {
        self.unread_lock()
            .entry(server.to_string())
            .or_default()
            .push_back(std::time::Instant::now());
    }

    fn unread_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, std::collections::VecDeque<std::time::Instant>>>
    {
        self.unread.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the oldest notification `server`'s transport read and the relay has
    /// not taken up is given up on, if there is one. One that never reaches the
    /// relay (rmcp drops a progress message that comes before the initialize
    /// result) is forgotten [`UNREAD_FOR`] after it was read, so it cannot hold
    /// later calls up for longer.
    fn unread_until(&self, server: &str) -> Option<std::time::Instant> {
        let mut unread = self.unread_lock();
        let q = unread.get_mut(server)?;
        while q.front().is_some_and(|at| at.elapsed() > UNREAD_FOR) {
            q.pop_front();
            tracing::warn!(%server, "a notification read from the upstream never reached the relay");
        }
        q.front().map(|at| *at + UNREAD_FOR)
    }

    /// Wait (at most `limit`) until the notifications `server` sent before a
    /// response are relayed. rmcp hands each notification to a task of its own
    /// and the response to the waiting request right after, so without this a
    /// response could overtake the progress and log messages of its own call
    /// (which the client then drops, or which would be attributed once the call
    /// is no longer in flight). The caller keeps its request in flight meanwhile.
    pub async fn settle(&self, server: &str, limit: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let woken = self.relayed.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Unread first: a relay counts itself as relaying before it takes its
            // notification off the unread queue, so no moment shows neither.
            let unread = self.unread_until(server);
            if unread.is_none() && self.relaying().get(server).copied().unwrap_or(0) == 0 {
                return;
            }
            let wake = unread
                .map(tokio::time::Instant::from_std)
                .map_or(deadline, |u| u.min(deadline));
            if tokio::time::timeout_at(wake, woken).await.is_err() && wake == deadline {
                tracing::warn!(%server, "notifications still being relayed; answering anyway");
                return;
            }
        }
    }

    /// A notification from an upstream.
    pub async fn server_notification(&self, server: &str, notification: ServerNotification) {
        struct Relay<'a>(&'a Router, String);
        impl Drop for Relay<'_> {
            fn drop(&mut self) {
                if let Some(n) = self.0.relaying().get_mut(&self.1) {
                    *n = n.saturating_sub(1);
                }
                self.0.relayed.notify_waiters();
            }
        }
        *self.relaying().entry(server.to_string()).or_default() += 1;
        if belongs_to_a_call(&notification) {
            // Taken up: counted as relaying from here on.
            if let Some(q) = self.unread_lock().get_mut(server) {
                q.pop_front();
            }
        }
        let _relay = Relay(self, server.to_string());
        if belongs_to_a_call(&notification) {
            self.registered(server).await;
        }
        match notification {
            ServerNotification::ProgressNotification(p) => {
                let target = {
                    let st = self.lock();
                    st.progress
                        .get(&p.params.progress_token)
                        .and_then(|(s, t)| st.sessions.get(s).map(|peer| (peer.clone(), t.clone())))
                };
                if let Some((peer, token)) = target {
                    let ProgressNotificationParam {
                        progress,
                        total,
                        message,
                        ..
                    } = p.params;
                    let mut param = ProgressNotificationParam::new(token, progress);
                    param.total = total;
                    if let Some(text) = message {
                        let mut v = json!({ "message": text });
                        param.message = match self.inspect_notification(server, &mut v).await {
                            Ok(Some(out)) if !out.forward => {
                                Some(out.withheld_message_as("progress message"))
                            }
                            Ok(_) => v["message"].as_str().map(str::to_string),
                            Err(e) => {
                                tracing::warn!(%server, error = %e.message, "progress message not inspected; dropped");
                                None
                            }
                        };
                    }
                    let _ = peer
                        .send_notification(ServerNotification::ProgressNotification(
                            ProgressNotification::new(param),
                        ))
                        .await;
                } else {
                    tracing::debug!(%server, "progress for no call in flight; dropped");
                }
            }
            ServerNotification::CancelledNotification(_) => {
                // rmcp cancels the matching request of ours; nothing to relay.
            }
            ServerNotification::ToolListChangedNotification(_) => {
                let _ = self.relist.send((server.to_string(), ListKind::Tools));
            }
            ServerNotification::PromptListChangedNotification(_) => {
                let _ = self.relist.send((server.to_string(), ListKind::Prompts));
            }
            ServerNotification::ResourceListChangedNotification(_) => {
                let _ = self.relist.send((server.to_string(), ListKind::Resources));
            }
            #[allow(deprecated)] // logging is deprecated by SEP-2577 but servers still log
            ServerNotification::LoggingMessageNotification(n) => {
                let Some(peer) = self.log_target(server) else {
                    tracing::debug!(%server, "logging notification not attributable to one session; dropped");
                    return;
                };
                let level = n.params.level;
                let mut v = match serde_json::to_value(&n.params) {
                    Ok(v) => v,
                    Err(_) => return,
                };
                let params = match self.inspect_notification(server, &mut v).await {
                    Ok(Some(out)) if !out.forward => {
                        rmcp::model::LoggingMessageNotificationParam::new(
                            level,
                            Value::String(out.withheld_message_as("log message")),
                        )
                        .with_logger("portcullis")
                    }
                    Ok(_) => match serde_json::from_value(v) {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                    Err(e) => {
                        tracing::warn!(%server, error = %e.message, "log message not inspected; dropped");
                        return;
                    }
                };
                let _ = peer
                    .send_notification(ServerNotification::LoggingMessageNotification(
                        rmcp::model::LoggingMessageNotification::new(params),
                    ))
                    .await;
            }
            other => {
                // Resource updates and anything newer: inspected, then relayed
                // to every session (subscriptions are shared per upstream); a
                // held one is dropped.
                let mut v = match serde_json::to_value(&other) {
                    Ok(v) => v,
                    Err(_) => return,
                };
                let relay = match self.inspect_notification(server, &mut v).await {
                    Ok(Some(out)) if !out.forward => None,
                    Ok(_) => serde_json::from_value::<ServerNotification>(v).ok(),
                    Err(e) => {
                        tracing::warn!(%server, error = %e.message, "notification not inspected; dropped");
                        None
                    }
                };
                let Some(n) = relay else { return };
                for peer in self.sessions() {
                    let _ = peer.send_notification(n.clone()).await;
                }
            }
        }
    }

    /// Tell every session that a list changed (after the gateway re-listed it).
    pub async fn notify_list_changed(&self, kind: ListKind) {
        for peer in self.sessions() {
            let r = match kind {
                ListKind::Tools => peer.notify_tool_list_changed().await,
                ListKind::Prompts => peer.notify_prompt_list_changed().await,
                ListKind::Resources => peer.notify_resource_list_changed().await,
            };
            if let Err(e) = r {
                tracing::debug!(error = %e, "list_changed not delivered");
            }
        }
    }
}

/// The JSON-RPC error a client (or server) gets for a withheld message.
pub fn withheld_error(out: &crate::inspect::Outcome) -> McpError {
    withheld_error_as(out, crate::inspect::subject(out.record.channel))
}

/// [`withheld_error`] naming the item as `what`.
pub fn withheld_error_as(out: &crate::inspect::Outcome, what: &str) -> McpError {
    McpError::new(
        WITHHELD,
        out.withheld_message_as(what),
        Some(json!({
            "record_id": out.record.id,
            "status": out.record.status.as_str(),
            "channel": out.record.channel.as_str(),
        })),
    )
}

/// A progress token from the client's request metadata, if any.
pub fn client_progress_token(meta: &rmcp::model::RequestMetaObject) -> Option<ProgressToken> {
    meta.get_progress_token()
}

/// A JSON value's progress token (for tests).
pub fn token_of(v: &Value) -> Option<ProgressToken> {
    serde_json::from_value(v.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_quoted_as_json_writes_its_strings_and_long_values_as_they_are() {
        let answer = json!({
            "role": "assistant",
            "content": {"type": "text", "text": "The grey heron stands still."},
            "model": "m",
        });
        let q = answer_quotes(&answer);
        for s in [
            "\"role\"",
            "\"assistant\"",
            "\"content\"",
            "\"text\"",
            "\"m\"",
            "\"The grey heron stands still.\"",
            "The grey heron stands still.",
        ] {
            assert!(q.iter().any(|x| x == s), "{s} in {q:?}");
        }
        // Short values only with their quotes: a bare word is not blanked anywhere.
        assert!(!q.iter().any(|x| x == "assistant" || x == "m"));
        // Numbers and booleans are no text of the client's.
        assert!(answer_quotes(&json!({"n": 3, "b": true})) == vec!["\"b\"", "\"n\""]);
    }
}

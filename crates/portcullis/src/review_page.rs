//! `portcullis review serve`: the review queue in a browser. The same store and
//! audit log as `portcullis review approve|deny`, and the same decision path
//! (`review::commit`), so a decision made here is a decision record first and
//! reaches every gateway that uses the store at its next check.
//!
//! Safety: loopback by default, and then only a loopback `Host` is answered (a
//! DNS-rebinding page cannot reach it). Always a token: the one in
//! $PORTCULLIS_REVIEW_TOKEN, or on loopback a random one printed as a sign-in
//! address (so another user of the machine cannot decide through the page);
//! off loopback start-up refuses without one. A browser signs in once (a random
//! session cookie, `HttpOnly`, `SameSite=Strict`, `Secure` behind https) and
//! scripts send `Authorization: Bearer`. Every decision form carries a
//! per-process value and is refused from another origin. No script is served,
//! and the CSP allows none.

use crate::review_html as html;
use anyhow::{bail, Context, Result};
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use portcullis_controls::store::{Store, StoreError, PENDING};
use portcullis_mcp::serve::{loopback_host, Token};
use portcullis_mcp::AuditLog;
use serde::Deserialize;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

/// The default address: loopback, next to the gateway's HTTP port (8717).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8718";
/// The variable the token is read from unless `--token-env` names another.
pub const DEFAULT_TOKEN_ENV: &str = "PORTCULLIS_REVIEW_TOKEN";
const COOKIE: &str = "portcullis_review";
/// The shortest token accepted from the environment.
const MIN_TOKEN_CHARS: usize = 16;

struct Page {
    store: Store,
    log: AuditLog,
    /// Shown on the queue page, so a reviewer sees which gateway's queue it is.
    store_path: String,
    /// The sign-in token (the environment's, or one made at start-up).
    token: Token,
    /// The session cookie's value.
    session: Secret,
    /// The value every decision form carries.
    csrf: Secret,
    /// `scheme://host[:port]` when a TLS proxy serves the page under another name.
    public: Option<PublicOrigin>,
}

/// A random value made at start-up (session cookie, form value): the value to
/// hand out, and its digest to compare what comes back with in constant time.
struct Secret {
    value: String,
    digest: Token,
}

impl Secret {
    /// 244 random bits from the OS generator (two UUID v4s), as hex.
    fn random() -> Secret {
        let value = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Secret {
            digest: Token::new(&value),
            value,
        }
    }

    fn matches(&self, presented: &str) -> bool {
        self.digest.matches(presented.as_bytes())
    }
}

/// The address a reverse proxy serves the page under (`--public-origin`).
struct PublicOrigin {
    /// As browsers send it in `Origin`: `https://review.example.org`.
    origin: String,
    /// As browsers send it in `Host`: `review.example.org`.
    host: String,
    https: bool,
}

impl PublicOrigin {
    fn parse(s: &str) -> Result<PublicOrigin> {
        let s = s.trim_end_matches('/');
        let (https, host) = if let Some(h) = s.strip_prefix("https://") {
            (true, h)
        } else if let Some(h) = s.strip_prefix("http://") {
            (false, h)
        } else {
            bail!("--public-origin {s:?}: expected https://HOST[:PORT] (or http://)")
        };
        if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) {
            bail!("--public-origin {s:?}: expected https://HOST[:PORT], no path");
        }
        Ok(PublicOrigin {
            origin: s.to_ascii_lowercase(),
            host: host.to_ascii_lowercase(),
            https,
        })
    }
}

/// Where and how the page is served (`portcullis review serve` options).
pub struct ServeOptions<'a> {
    pub listen: &'a str,
    pub token_env: Option<&'a str>,
    pub public_origin: Option<&'a str>,
}

/// Serves the page until interrupted (Ctrl-C or SIGTERM).
pub fn serve(store: Store, log: AuditLog, opts: ServeOptions<'_>) -> Result<ExitCode> {
    let listen = opts.listen;
    let addr: SocketAddr = listen.parse().with_context(|| {
        format!("--listen {listen:?} is not an address and port such as {DEFAULT_LISTEN}")
    })?;
    let var = opts.token_env.unwrap_or(DEFAULT_TOKEN_ENV);
    let token = std::env::var(var).ok().filter(|t| !t.trim().is_empty());
    let loopback = addr.ip().is_loopback();
    if !loopback && token.is_none() {
        bail!(
            "--listen {addr} is not a loopback address, and the review page decides what \
             reaches the model: set a token in ${var} (or name another variable with \
             --token-env) before serving it off loopback"
        );
    }
    if opts.token_env.is_some() && token.is_none() {
        bail!("--token-env {var}: the variable is not set or empty");
    }
    if let Some(t) = &token {
        if t.trim().chars().count() < MIN_TOKEN_CHARS {
            bail!(
                "${var} holds a token of {} characters; the review page needs at least \
                 {MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 24`)",
                t.trim().chars().count()
            );
        }
    }
    let public = opts.public_origin.map(PublicOrigin::parse).transpose()?;
    // No token given (loopback only): a random one, shown once as a sign-in address.
    let (token, generated) = match token {
        Some(t) => (Token::new(&t), None),
        None => {
            let s = Secret::random();
            (s.digest, Some(s.value))
        }
    };
    let page = Arc::new(Page {
        store_path: store.location().to_string(),
        store,
        log,
        token,
        session: Secret::random(),
        csrf: Secret::random(),
        public,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run(page, addr, loopback, generated))?;
    Ok(ExitCode::SUCCESS)
}

async fn run(
    page: Arc<Page>,
    addr: SocketAddr,
    loopback: bool,
    generated: Option<String>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the review page to {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let mut app = Router::new()
        .route("/", get(queue))
        .route("/item/{id}", get(item).post(decide))
        .route("/login", get(login_form).post(login))
        .route("/style.css", get(style))
        .layer(axum::middleware::from_fn_with_state(
            page.clone(),
            require_auth,
        ));
    if loopback {
        app = app.layer(axum::middleware::from_fn_with_state(
            page.clone(),
            require_loopback_host,
        ));
    }
    let app = app
        .layer(axum::middleware::map_response(security_headers))
        .with_state(page.clone());
    // The lines a script (or a test) reads to find the page and sign in.
    println!("review page: http://{local}/");
    if let Some(t) = &generated {
        println!("sign in: http://{local}/login?token={t}");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tracing::info!(%local, store = %page.store_path, "serving the review page");
    axum::serve(listener, app)
        .with_graceful_shutdown(crate::proxy::stop_signal())
        .await
        .context("serving the review page")
}

async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    let set = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // Not `no-referrer`: with it a browser sends `Origin: null` on the
        // page's own form posts, which the origin check must refuse.
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (k, v) in set {
        h.insert(k, HeaderValue::from_static(v));
    }
    res
}

async fn require_loopback_host(
    State(page): State<Arc<Page>>,
    req: Request,
    next: Next,
) -> Response {
    let ok = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| {
            loopback_host(h)
                || page
                    .public
                    .as_ref()
                    .is_some_and(|p| h.eq_ignore_ascii_case(&p.host))
        });
    if ok {
        next.run(req).await
    } else {
        refuse(
            StatusCode::FORBIDDEN,
            "Refused",
            "the review page answers only to a loopback Host (behind a TLS proxy, name the \
             address it serves in --public-origin)",
        )
    }
}

/// Whether the request carries the session cookie.
fn has_session(session: &Secret, headers: &HeaderMap) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .any(|(k, v)| k == COOKIE && session.matches(v))
}

async fn require_auth(State(page): State<Arc<Page>>, req: Request, next: Next) -> Response {
    let open = matches!(req.uri().path(), "/login" | "/style.css");
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .is_some_and(|v| page.token.accepts(v.as_bytes()));
    if open || bearer || has_session(&page.session, req.headers()) {
        return next.run(req).await;
    }
    if req.method() == Method::GET {
        Redirect::to("/login").into_response()
    } else {
        refuse(
            StatusCode::UNAUTHORIZED,
            "Sign in first",
            "this request carries neither the session cookie nor the bearer token",
        )
    }
}

fn refuse(status: StatusCode, title: &str, message: &str) -> Response {
    (status, axum::response::Html(html::error(title, message))).into_response()
}

fn internal(e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "review page");
    refuse(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Error",
        &format!("{e} (nothing was decided)"),
    )
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::STYLE,
    )
        .into_response()
}

#[derive(Deserialize)]
struct ListQuery {
    all: Option<String>,
}

async fn queue(State(page): State<Arc<Page>>, Query(q): Query<ListQuery>) -> Response {
    let all = q.all.is_some_and(|v| v != "0");
    let p = page.clone();
    match tokio::task::spawn_blocking(move || p.store.list(all)).await {
        Ok(Ok(items)) => {
            axum::response::Html(html::queue(&items, all, &page.store_path)).into_response()
        }
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

#[derive(Deserialize)]
struct ItemQuery {
    done: Option<String>,
}

async fn item(
    State(page): State<Arc<Page>>,
    Path(id): Path<i64>,
    Query(q): Query<ItemQuery>,
) -> Response {
    let p = page.clone();
    match tokio::task::spawn_blocking(move || p.store.item(id)).await {
        Ok(Ok(Some(i))) => {
            // Only for a decided item: a link with `?done=1` cannot fake it.
            let message = q.done.filter(|_| i.status != PENDING).map(|_| {
                format!(
                    "Decision recorded ({}). Every gateway that uses this state store acts on \
                     it at its next check; a held call that is waiting for it goes on now.",
                    i.status
                )
            });
            axum::response::Html(html::item(&i, &page.csrf.value, message.as_deref()))
                .into_response()
        }
        Ok(Ok(None)) => refuse(
            StatusCode::NOT_FOUND,
            "No such item",
            &format!("review item {id} does not exist in {}", page.store_path),
        ),
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

#[derive(Deserialize)]
struct DecideForm {
    csrf: String,
    decision: String,
    #[serde(default)]
    note: String,
    remember: Option<String>,
}

/// Whether a state-changing request comes from this page: (when the browser
/// says) the same origin, the page's own address or its public origin.
fn same_origin(page: &Page, headers: &HeaderMap) -> bool {
    let site_ok = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|s| s == "same-origin" || s == "none");
    let origin_ok = match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(origin) => {
            page.public
                .as_ref()
                .is_some_and(|p| origin.eq_ignore_ascii_case(&p.origin))
                || headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .is_some_and(|host| {
                        origin.eq_ignore_ascii_case(&format!("http://{host}"))
                            || origin.eq_ignore_ascii_case(&format!("https://{host}"))
                    })
        }
    };
    site_ok && origin_ok
}

async fn decide(
    State(page): State<Arc<Page>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    Form(f): Form<DecideForm>,
) -> Response {
    let form_ok = page.csrf.matches(&f.csrf);
    if !form_ok || !same_origin(&page, &headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Refused",
            "this decision did not come from the review page's own form (reload the item and \
             decide again)",
        );
    }
    let approve = match f.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Bad request",
                &format!("decision {other:?}: expected approve or deny"),
            )
        }
    };
    let note = Some(f.note.trim().to_string()).filter(|n| !n.is_empty());
    let remember = f.remember.is_some();
    let p = page.clone();
    let rt = tokio::runtime::Handle::current();
    let done = tokio::task::spawn_blocking(move || {
        crate::review::commit(&p.store, id, approve, note.as_deref(), remember, |rec| {
            rt.block_on(p.log.append(vec![rec]))
                .map_err(|e| e.to_string())
        })
    })
    .await;
    match done {
        Ok(Ok((item, record))) => {
            tracing::info!(item = item.id, status = %item.status, record = %record, "decided on the review page");
            Redirect::to(&format!("/item/{id}?done=1")).into_response()
        }
        Ok(Err(StoreError::NoItem(_))) => refuse(
            StatusCode::NOT_FOUND,
            "No such item",
            &format!("review item {id} does not exist in {}", page.store_path),
        ),
        Ok(Err(StoreError::Decided { status, .. })) => refuse(
            StatusCode::CONFLICT,
            "Already decided",
            &format!("review item {id} is already {status}; nothing was changed"),
        ),
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

#[derive(Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

/// The sign-in form, or (`?token=`, the address printed at start-up) signing in.
async fn login_form(State(page): State<Arc<Page>>, Query(q): Query<LoginQuery>) -> Response {
    match q.token {
        Some(t) if page.token.matches(t.as_bytes()) => signed_in(&page),
        Some(_) => (
            StatusCode::UNAUTHORIZED,
            axum::response::Html(html::login(true)),
        )
            .into_response(),
        None => axum::response::Html(html::login(false)).into_response(),
    }
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login(
    State(page): State<Arc<Page>>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    if !same_origin(&page, &headers) || !page.token.matches(f.token.as_bytes()) {
        tracing::warn!("review page: a sign-in with a wrong token");
        return (
            StatusCode::UNAUTHORIZED,
            axum::response::Html(html::login(true)),
        )
            .into_response();
    }
    signed_in(&page)
}

/// The session cookie, and on to the queue.
fn signed_in(page: &Page) -> Response {
    let secure = if page.public.as_ref().is_some_and(|p| p.https) {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}",
        page.session.value
    );
    match HeaderValue::from_str(&cookie) {
        Ok(v) => ([(header::SET_COOKIE, v)], Redirect::to("/")).into_response(),
        Err(e) => internal(e),
    }
}

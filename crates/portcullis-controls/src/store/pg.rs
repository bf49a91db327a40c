//! The shared backend: one PostgreSQL database that several gateways (and
//! `portcullis review`) use at once, through the synchronous client of
//! rust-postgres (`postgres`, over `tokio-postgres`).
//!
//! Where gateways race, the database decides: a first-use pin is an insert that
//! does nothing when another gateway's pin is there (and returns that one); one
//! pending item per subject is a partial unique index; deciding an item locks its
//! row (`FOR UPDATE`), so a second reviewer sees the first one's decision; an
//! approved call is taken by one `UPDATE … RETURNING` (`SKIP LOCKED`); taint
//! writers take turns (an advisory lock), so the label revision numbers readers
//! follow ([`Backend::taint_since`]) become visible in order.
//!
//! The client blocks; a call made on an async runtime's thread would panic in
//! the client's own runtime, so every call (and closing the client) runs on a
//! scoped thread of its own (`off_runtime`).
//! A lost connection is reopened on the next call (and a call that found it
//! lost is tried once more on the new one, except a decision, whose record is
//! already written); while the server is down every call fails, and the
//! gateway's checks that need the store fail closed.

use super::{
    redact_url, trim_round, Backend, Decision, NewItem, Pin, PinWrite, QueueItem, RecordFn,
    StoreError, StoredLabel, TaintRow, PENDING, SCHEMA_VERSION,
};
use postgres::config::{Host, SslMode};
use postgres::{Client, Config, GenericClient, Row};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Taken while the schema is created or migrated (gateways starting together).
const SCHEMA_LOCK: i64 = 0x706f_7274_0001;
/// Taken by each taint write, so revisions commit in the order they are drawn.
const TAINT_LOCK: i64 = 0x706f_7274_0002;
/// Taken by each launch record (its sequence number is "the newest").
const LAUNCH_LOCK: i64 = 0x706f_7274_0003;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pins (
    server TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    hash TEXT NOT NULL, definition TEXT NOT NULL, pinned_at TEXT NOT NULL, launch TEXT,
    PRIMARY KEY (server, kind, name));
CREATE TABLE IF NOT EXISTS queue (
    id BIGSERIAL PRIMARY KEY,
    created TEXT NOT NULL, kind TEXT NOT NULL, server TEXT NOT NULL, name TEXT NOT NULL,
    fingerprint TEXT NOT NULL, status TEXT NOT NULL, record_id TEXT NOT NULL,
    summary TEXT NOT NULL, findings TEXT NOT NULL, diff TEXT NOT NULL, detail TEXT NOT NULL,
    allow_keys TEXT NOT NULL, record TEXT NOT NULL,
    note TEXT, decided_at TEXT, remember BIGINT NOT NULL DEFAULT 0,
    used BIGINT NOT NULL DEFAULT 0, decision TEXT);
CREATE INDEX IF NOT EXISTS queue_subject ON queue (kind, server, name, fingerprint);
CREATE UNIQUE INDEX IF NOT EXISTS queue_one_pending ON queue (kind, server, name, fingerprint)
    WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS allow (
    kind TEXT NOT NULL, server TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL,
    note TEXT, created TEXT NOT NULL, queue_id BIGINT,
    PRIMARY KEY (kind, server, name, key));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE SEQUENCE IF NOT EXISTS taint_rev;
CREATE TABLE IF NOT EXISTS taint (
    digest TEXT PRIMARY KEY, value TEXT, hint TEXT NOT NULL,
    server TEXT NOT NULL, tool TEXT NOT NULL, record_id TEXT NOT NULL,
    sensitive BIGINT NOT NULL, source TEXT NOT NULL, seen BIGINT NOT NULL,
    rev BIGINT NOT NULL DEFAULT nextval('taint_rev'));
CREATE INDEX IF NOT EXISTS taint_seen ON taint (seen);
CREATE INDEX IF NOT EXISTS taint_by_rev ON taint (rev);
CREATE SEQUENCE IF NOT EXISTS launch_seq;
CREATE TABLE IF NOT EXISTS launches (
    server TEXT NOT NULL, hash TEXT NOT NULL, launch TEXT NOT NULL,
    first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, seq BIGINT NOT NULL,
    PRIMARY KEY (server, hash));
";

const ITEM_COLUMNS: &str = "id, created, kind, server, name, fingerprint, status, record_id, \
summary, findings, diff, detail, allow_keys, record, note, decided_at, remember, used, decision";
const PIN_COLUMNS: &str = "server, kind, name, hash, definition, pinned_at, launch";
const TAINT_COLUMNS: &str = "digest, value, hint, server, tool, record_id, sensitive, source, seen";

use super::TAINT_PAGE;

fn item_of(row: &Row) -> Result<QueueItem, postgres::Error> {
    Ok(QueueItem {
        id: row.try_get(0)?,
        created: row.try_get(1)?,
        kind: row.try_get(2)?,
        server: row.try_get(3)?,
        name: row.try_get(4)?,
        fingerprint: row.try_get(5)?,
        status: row.try_get(6)?,
        record_id: row.try_get(7)?,
        summary: row.try_get(8)?,
        findings: super::json_col(row.try_get(9)?),
        diff: super::json_col(row.try_get(10)?),
        detail: super::json_col(row.try_get(11)?),
        allow_keys: serde_json::from_str(row.try_get::<_, &str>(12)?).unwrap_or_default(),
        record: super::json_col(row.try_get(13)?),
        note: row.try_get(14)?,
        decided_at: row.try_get(15)?,
        remember: row.try_get::<_, i64>(16)? != 0,
        used: row.try_get(17)?,
        decision: row
            .try_get::<_, Option<String>>(18)?
            .map(super::json_col)
            .unwrap_or(serde_json::Value::Null),
    })
}

fn pin_of(row: &Row) -> Result<Pin, postgres::Error> {
    Ok(Pin {
        server: row.try_get(0)?,
        kind: row.try_get(1)?,
        name: row.try_get(2)?,
        hash: row.try_get(3)?,
        definition: super::json_col(row.try_get(4)?),
        pinned_at: row.try_get(5)?,
        launch: row.try_get(6)?,
    })
}

fn label_of(r: &Row) -> Result<StoredLabel, postgres::Error> {
    Ok(StoredLabel {
        digest: r.try_get(0)?,
        value: r.try_get(1)?,
        hint: r.try_get(2)?,
        label: crate::taint::Label {
            server: r.try_get(3)?,
            tool: r.try_get(4)?,
            record_id: r.try_get(5)?,
            sensitive: r.try_get::<_, i64>(6)? != 0,
            source: crate::taint::source_of(r.try_get::<_, &str>(7)?),
        },
        seen: u64::try_from(r.try_get::<_, i64>(8)?).unwrap_or(0),
    })
}

fn upsert_pin(c: &mut impl GenericClient, p: PinWrite<'_>) -> Result<u64, postgres::Error> {
    c.execute(
        "INSERT INTO pins (server, kind, name, hash, definition, pinned_at, launch)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (server, kind, name) DO UPDATE SET hash = excluded.hash,
           definition = excluded.definition, pinned_at = excluded.pinned_at,
           launch = excluded.launch",
        &[
            &p.server,
            &p.kind,
            &p.name,
            &p.hash,
            &p.definition.to_string(),
            &portcullis_core::now_rfc3339(),
            &p.launch,
        ],
    )
}

/// Why a call failed: the store's own error (a decided item, a missing one, a
/// record not written) or the database's.
enum Failed {
    Db(postgres::Error),
    Store(StoreError),
}

impl From<postgres::Error> for Failed {
    fn from(e: postgres::Error) -> Failed {
        Failed::Db(e)
    }
}

pub(crate) struct PgBackend {
    config: Config,
    tls: MakeRustlsConnect,
    /// The URL as errors show it (no password).
    shown: String,
    client: Mutex<Option<Client>>,
}

/// The URL as tokio-postgres reads it, and the `sslrootcert` file libpq would
/// read: that parameter is taken out (tokio-postgres refuses it), and libpq's
/// `verify-ca`/`verify-full` become `require` (which verifies in full here).
fn libpq_compatible(url: &str) -> (String, Option<PathBuf>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut root = None;
    let kept: Vec<String> = query
        .split('&')
        .filter_map(|kv| match kv.split_once('=') {
            Some(("sslrootcert", v)) => {
                root = Some(PathBuf::from(
                    percent_encoding::percent_decode_str(v)
                        .decode_utf8_lossy()
                        .into_owned(),
                ));
                None
            }
            Some(("sslmode", "verify-ca" | "verify-full")) => Some("sslmode=require".into()),
            _ => Some(kv.to_string()),
        })
        .collect();
    if kept.is_empty() {
        (base.to_string(), root)
    } else {
        (format!("{base}?{}", kept.join("&")), root)
    }
}

/// Whether every host of `config` is this machine (a Unix socket or loopback;
/// a `hostaddr`, which is where the connection really goes, counts too).
fn is_local(config: &Config) -> bool {
    config.get_hostaddrs().iter().all(|a| a.is_loopback())
        && config.get_hosts().iter().all(|h| match h {
            Host::Unix(_) => true,
            Host::Tcp(name) => {
                name == "localhost"
                    || name
                        .trim_matches(|c| c == '[' || c == ']')
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        })
}

/// TLS for the database connection: rustls; the roots are those of
/// `sslrootcert` when given (as libpq: then only those), else the system's;
/// the server's certificate and name are always verified (libpq's
/// `verify-full`, stricter than its `require`).
fn tls(root: Option<&Path>) -> Result<MakeRustlsConnect, String> {
    let mut roots = rustls::RootCertStore::empty();
    if root.is_none() {
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
    }
    if let Some(path) = root {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
        let mut n = 0;
        for cert in certs {
            let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            n += 1;
        }
        if n == 0 {
            return Err(format!(
                "sslrootcert {}: no certificate in it",
                path.display()
            ));
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// A database error, with its causes spelled out (the client's own message
/// is often only "error performing TLS handshake" or "error connecting").
fn pg_error(shown: &str, source: postgres::Error) -> StoreError {
    let mut detail = source.to_string();
    let mut cause = std::error::Error::source(&source);
    while let Some(c) = cause {
        let text = c.to_string();
        if !detail.contains(&text) {
            detail.push_str(": ");
            detail.push_str(&text);
        }
        cause = c.source();
    }
    StoreError::Postgres {
        url: shown.to_string(),
        detail,
        source,
    }
}

impl PgBackend {
    pub(crate) fn connect(url: &str) -> Result<PgBackend, StoreError> {
        let shown = redact_url(url);
        let (readable, root) = libpq_compatible(url);
        let mut config = Config::from_str(&readable).map_err(|e| pg_error(&shown, e))?;
        // No sslmode given: none to this machine, a verified one to any other.
        // To another host, `prefer` (which falls back to plain text when the
        // answer says "no TLS", and anyone in the middle can say that) is
        // `require`; an explicit `disable` is obeyed, and said.
        let local = is_local(&config);
        if !url.contains("sslmode=") {
            config.ssl_mode(if local {
                SslMode::Disable
            } else {
                SslMode::Require
            });
        } else if !local {
            match config.get_ssl_mode() {
                SslMode::Prefer => {
                    config.ssl_mode(SslMode::Require);
                }
                SslMode::Disable => tracing::warn!(
                    store = %shown,
                    "sslmode=disable to another host: the state store's traffic (pins, \
                     approvals) is not encrypted or authenticated"
                ),
                _ => {}
            }
        }
        // A stalled server must fail a check, not hang it: every statement and
        // lock wait is bounded, and so is unacknowledged data on the socket.
        if config.get_options().is_none() {
            config.options("-c statement_timeout=10000 -c lock_timeout=10000");
        }
        config.tcp_user_timeout(Duration::from_secs(10));
        config.keepalives(true);
        let tls = tls(root.as_deref()).map_err(|message| StoreError::Io {
            path: shown.clone().into(),
            message,
        })?;
        // libpq's convention: a password kept out of the URL.
        if config.get_password().is_none() {
            if let Ok(p) = std::env::var("PGPASSWORD") {
                config.password(p);
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        if config.get_application_name().is_none() {
            config.application_name("portcullis");
        }
        let backend = PgBackend {
            config,
            tls,
            shown,
            client: Mutex::new(None),
        };
        backend.migrate()?;
        Ok(backend)
    }

    /// Create the schema, or bring it to [`SCHEMA_VERSION`]; refuse a newer one
    /// untouched. One gateway at a time (an advisory lock).
    fn migrate(&self) -> Result<(), StoreError> {
        let found = self.with(true, |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS portcullis_schema (version BIGINT NOT NULL)",
            )?;
            let found: i64 = tx
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM portcullis_schema",
                    &[],
                )?
                .try_get(0)?;
            if found > SCHEMA_VERSION {
                return Ok(found);
            }
            tx.batch_execute(SCHEMA)?;
            if found < SCHEMA_VERSION {
                tx.execute("DELETE FROM portcullis_schema", &[])?;
                tx.execute(
                    "INSERT INTO portcullis_schema (version) VALUES ($1)",
                    &[&SCHEMA_VERSION],
                )?;
            }
            tx.commit()?;
            Ok(found)
        })?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                at: self.shown.clone(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    fn db_error(&self, source: postgres::Error) -> StoreError {
        pg_error(&self.shown, source)
    }

    /// Run `f` on the connection (opened, or reopened after a loss, first).
    /// With `retry`, a call that finds the connection lost runs once more on a
    /// new one: only for reads and for writes that may be repeated (an upsert),
    /// since a write whose answer was lost may have been committed.
    fn with<T: Send>(
        &self,
        retry: bool,
        f: impl Fn(&mut Client) -> Result<T, postgres::Error> + Sync,
    ) -> Result<T, StoreError> {
        self.run(retry, |c| f(c).map_err(Failed::Db))
    }

    fn run<T: Send>(
        &self,
        retry: bool,
        mut f: impl FnMut(&mut Client) -> Result<T, Failed> + Send,
    ) -> Result<T, StoreError> {
        let mut slot = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let slot = &mut *slot;
        let out = off_runtime(|| -> Result<T, StoreError> {
            let mut attempts = if retry { 2 } else { 1 };
            loop {
                attempts -= 1;
                let client = match slot {
                    Some(c) if !c.is_closed() => c,
                    _ => {
                        *slot = None;
                        slot.insert(
                            self.config
                                .connect(self.tls.clone())
                                .map_err(|e| self.db_error(e))?,
                        )
                    }
                };
                match f(client) {
                    Ok(v) => return Ok(v),
                    Err(Failed::Store(e)) => return Err(e),
                    Err(Failed::Db(e)) => {
                        let lost = e.is_closed() || client.is_closed();
                        if lost {
                            *slot = None;
                        }
                        if !(lost && attempts > 0) {
                            return Err(self.db_error(e));
                        }
                        tracing::warn!(store = %self.shown, error = %e,
                                "state store connection lost; reconnecting");
                    }
                }
            }
        });
        out.unwrap_or_else(|_| {
            Err(StoreError::Io {
                path: self.shown.clone().into(),
                message: "a state store call panicked".into(),
            })
        })
    }

    fn item_by(
        c: &mut impl GenericClient,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Option<QueueItem>, postgres::Error> {
        c.query_opt(sql, params)?.as_ref().map(item_of).transpose()
    }
}

/// Runs `f` on a thread of its own and waits for it. The blocking client blocks
/// on its own runtime (to query, and to close when dropped), which panics on an
/// async runtime's thread: the gateway calls its store, and drops it at
/// shutdown, on one.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> std::thread::Result<T> {
    std::thread::scope(|s| s.spawn(f).join())
}

impl Drop for PgBackend {
    fn drop(&mut self) {
        let client = self
            .client
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(c) = client {
            let _ = off_runtime(move || drop(c));
        }
    }
}

impl Backend for PgBackend {
    fn pin(&self, server: &str, kind: &str, name: &str) -> Result<Option<Pin>, StoreError> {
        self.with(true, |c| {
            c.query_opt(
                &format!(
                    "SELECT {PIN_COLUMNS} FROM pins WHERE server = $1 AND kind = $2 AND name = $3"
                ),
                &[&server, &kind, &name],
            )?
            .as_ref()
            .map(pin_of)
            .transpose()
        })
    }

    fn pins(&self, server: &str, kind: &str) -> Result<Vec<Pin>, StoreError> {
        self.with(true, |c| {
            c.query(
                &format!(
                    "SELECT {PIN_COLUMNS} FROM pins WHERE server = $1 AND kind = $2 ORDER BY name"
                ),
                &[&server, &kind],
            )?
            .iter()
            .map(pin_of)
            .collect()
        })
    }

    fn set_pin(&self, p: PinWrite<'_>) -> Result<(), StoreError> {
        self.with(true, |c| upsert_pin(c, p).map(|_| ()))
    }

    fn pin_first(&self, p: PinWrite<'_>) -> Result<Option<Pin>, StoreError> {
        self.with(true, |c| {
            let inserted = c.execute(
                "INSERT INTO pins (server, kind, name, hash, definition, pinned_at, launch)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (server, kind, name) DO NOTHING",
                &[
                    &p.server,
                    &p.kind,
                    &p.name,
                    &p.hash,
                    &p.definition.to_string(),
                    &portcullis_core::now_rfc3339(),
                    &p.launch,
                ],
            )?;
            if inserted == 1 {
                return Ok(None);
            }
            c.query_opt(
                &format!(
                    "SELECT {PIN_COLUMNS} FROM pins WHERE server = $1 AND kind = $2 AND name = $3"
                ),
                &[&p.server, &p.kind, &p.name],
            )?
            .as_ref()
            .map(pin_of)
            .transpose()
        })
    }

    fn set_pin_launch(
        &self,
        server: &str,
        kind: &str,
        name: &str,
        launch: &str,
    ) -> Result<(), StoreError> {
        self.with(true, |c| {
            c.execute(
                "UPDATE pins SET launch = $4 WHERE server = $1 AND kind = $2 AND name = $3",
                &[&server, &kind, &name, &launch],
            )
            .map(|_| ())
        })
    }

    fn record_launch(
        &self,
        server: &str,
        hash: &str,
        launch: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        self.with(false, |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LAUNCH_LOCK])?;
            let last = tx
                .query_opt(
                    "SELECT hash, launch FROM launches WHERE server = $1 ORDER BY seq DESC LIMIT 1",
                    &[&server],
                )?
                .map(|r| Ok::<_, postgres::Error>((r.try_get(0)?, r.try_get(1)?)))
                .transpose()?;
            tx.execute(
                "INSERT INTO launches (server, hash, launch, first_seen, last_seen, seq)
                 VALUES ($1, $2, $3, $4, $4, nextval('launch_seq'))
                 ON CONFLICT (server, hash) DO UPDATE SET last_seen = excluded.last_seen,
                   seq = excluded.seq",
                &[&server, &hash, &launch, &portcullis_core::now_rfc3339()],
            )?;
            tx.commit()?;
            Ok(last)
        })
    }

    fn launch(&self, server: &str, hash: &str) -> Result<Option<String>, StoreError> {
        self.with(true, |c| {
            c.query_opt(
                "SELECT launch FROM launches WHERE server = $1 AND hash = $2",
                &[&server, &hash],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })
    }

    fn enqueue(&self, item: &NewItem) -> Result<(QueueItem, bool), StoreError> {
        let allow_keys = serde_json::to_string(&item.allow_keys).unwrap_or_else(|_| "[]".into());
        let (findings, diff, detail, record) = (
            item.findings.to_string(),
            item.diff.to_string(),
            item.detail.to_string(),
            item.record.to_string(),
        );
        self.run(true, |c| {
            // One pending item per subject (the partial unique index): a gateway
            // that loses the race gets the winner's item. Should that item be
            // decided between the two statements, file again.
            for _ in 0..8 {
                let filed = Self::item_by(
                    c,
                    &format!(
                        "INSERT INTO queue (created, kind, server, name, fingerprint, status,
                         record_id, summary, findings, diff, detail, allow_keys, record)
                         VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $10, $11, $12)
                         ON CONFLICT (kind, server, name, fingerprint) WHERE status = 'pending'
                         DO NOTHING RETURNING {ITEM_COLUMNS}"
                    ),
                    &[
                        &portcullis_core::now_rfc3339(),
                        &item.kind,
                        &item.server,
                        &item.name,
                        &item.fingerprint,
                        &item.record_id,
                        &item.summary,
                        &findings,
                        &diff,
                        &detail,
                        &allow_keys,
                        &record,
                    ],
                )?;
                if let Some(i) = filed {
                    return Ok((i, true));
                }
                let pending = Self::item_by(
                    c,
                    &format!(
                        "SELECT {ITEM_COLUMNS} FROM queue WHERE kind = $1 AND server = $2
                         AND name = $3 AND fingerprint = $4 AND status = 'pending'"
                    ),
                    &[&item.kind, &item.server, &item.name, &item.fingerprint],
                )?;
                if let Some(i) = pending {
                    return Ok((i, false));
                }
            }
            Err(Failed::Store(StoreError::Io {
                path: self.shown.clone().into(),
                message: format!(
                    "could not file a review item for {} {}: it was filed and decided by \
                     others eight times while this gateway tried",
                    item.server, item.name
                ),
            }))
        })
    }

    fn item(&self, id: i64) -> Result<Option<QueueItem>, StoreError> {
        self.with(true, |c| {
            Self::item_by(
                c,
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = $1"),
                &[&id],
            )
        })
    }

    fn latest(
        &self,
        kind: &str,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError> {
        self.with(true, |c| {
            Self::item_by(
                c,
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM queue WHERE kind = $1 AND server = $2
                     AND name = $3 AND fingerprint = $4 ORDER BY id DESC LIMIT 1"
                ),
                &[&kind, &server, &name, &fingerprint],
            )
        })
    }

    fn pending_count(&self) -> Result<usize, StoreError> {
        self.with(true, |c| {
            c.query_one("SELECT count(*) FROM queue WHERE status = 'pending'", &[])?
                .try_get::<_, i64>(0)
        })
        .map(|n| usize::try_from(n).unwrap_or(0))
    }

    fn list(&self, all: bool) -> Result<Vec<QueueItem>, StoreError> {
        self.with(true, |c| {
            let sql = if all {
                format!("SELECT {ITEM_COLUMNS} FROM queue ORDER BY id")
            } else {
                format!("SELECT {ITEM_COLUMNS} FROM queue WHERE status = 'pending' ORDER BY id")
            };
            c.query(&sql, &[])?.iter().map(item_of).collect()
        })
    }

    fn decide(
        &self,
        id: i64,
        plan: &mut (dyn FnMut(&QueueItem) -> Result<Decision, StoreError> + Send),
        record: &mut RecordFn<'_>,
    ) -> Result<QueueItem, StoreError> {
        // Not retried on a lost connection: the plan writes the decision record.
        self.run(false, |c| {
            let mut tx = c.transaction()?;
            // The row lock: a second reviewer waits here, then reads the first
            // one's decision.
            let item = Self::item_by(
                &mut tx,
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = $1 FOR UPDATE"),
                &[&id],
            )?
            .ok_or(Failed::Store(StoreError::NoItem(id)))?;
            if item.status != PENDING {
                return Err(Failed::Store(StoreError::Decided {
                    id,
                    status: item.status,
                }));
            }
            let d = plan(&item).map_err(Failed::Store)?;
            if let Some((kind, hash, def, launch)) = &d.pin {
                upsert_pin(
                    &mut tx,
                    PinWrite {
                        server: &item.server,
                        kind,
                        name: &item.name,
                        hash,
                        definition: def,
                        launch: launch.as_deref(),
                    },
                )?;
            }
            for (list, key) in &d.allow {
                tx.execute(
                    "INSERT INTO allow (kind, server, name, key, note, created, queue_id)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)
                     ON CONFLICT (kind, server, name, key) DO UPDATE SET note = excluded.note,
                       created = excluded.created, queue_id = excluded.queue_id",
                    &[list, &item.server, &item.name, key, &d.note, &d.now, &id],
                )?;
            }
            let decision = record(&item).map_err(Failed::Store)?;
            let out = Self::item_by(
                &mut tx,
                &format!(
                    "UPDATE queue SET status = $1, note = $2, decided_at = $3, remember = $4,
                     decision = $5 WHERE id = $6 RETURNING {ITEM_COLUMNS}"
                ),
                &[
                    &d.status,
                    &d.note,
                    &d.now,
                    &(d.remember as i64),
                    &decision.to_string(),
                    &id,
                ],
            )?
            .ok_or(Failed::Store(StoreError::NoItem(id)))?;
            tx.commit()?;
            Ok(out)
        })
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.with(true, |c| {
            c.execute(
                "INSERT INTO meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&key, &value],
            )
            .map(|_| ())
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.with(true, |c| {
            c.query_opt("SELECT value FROM meta WHERE key = $1", &[&key])?
                .map(|r| r.try_get(0))
                .transpose()
        })
    }

    fn take_call_approval(
        &self,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError> {
        self.with(false, |c| {
            Self::item_by(
                c,
                &format!(
                    "UPDATE queue SET used = used + 1 WHERE id = (
                       SELECT id FROM queue WHERE kind = 'call' AND server = $1 AND name = $2
                       AND fingerprint = $3 AND status = 'approved' AND used = 0
                       ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING {ITEM_COLUMNS}"
                ),
                &[&server, &name, &fingerprint],
            )
        })
    }

    fn remembered(
        &self,
        list_kind: &str,
        server: &str,
        name: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        self.with(true, |c| {
            Ok(c.query_opt(
                "SELECT 1 FROM allow WHERE kind = $1 AND server = $2 AND name = $3
                 AND (key = $4 OR key = '*') LIMIT 1",
                &[&list_kind, &server, &name, &key],
            )?
            .is_some())
        })
    }

    fn put_taint(
        &self,
        labels: &[TaintRow<'_>],
        seen: u64,
        max: usize,
        expire_before: u64,
    ) -> Result<(), StoreError> {
        let seen = seen as i64;
        let max = max as i64;
        let expire_before = expire_before as i64;
        self.with(true, |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&TAINT_LOCK])?;
            let put = tx.prepare(
                "INSERT INTO taint
                 (digest, value, hint, server, tool, record_id, sensitive, source, seen, rev)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, nextval('taint_rev'))
                 ON CONFLICT (digest) DO UPDATE SET
                   value = excluded.value, hint = excluded.hint,
                   server = excluded.server, tool = excluded.tool,
                   record_id = excluded.record_id, sensitive = excluded.sensitive,
                   source = excluded.source, seen = excluded.seen, rev = excluded.rev
                 WHERE NOT (taint.sensitive = 1 AND excluded.sensitive = 0)",
            )?;
            let touch = tx.prepare("UPDATE taint SET seen = $1 WHERE digest = $2")?;
            for r in labels {
                let l = r.label;
                let changed = tx.execute(
                    &put,
                    &[
                        &r.digest,
                        &r.value,
                        &r.hint,
                        &l.server,
                        &l.tool,
                        &l.record_id,
                        &(l.sensitive as i64),
                        &l.source,
                        &seen,
                    ],
                )?;
                if changed == 0 {
                    tx.execute(&touch, &[&seen, &r.digest])?;
                }
            }
            if expire_before > 0 {
                tx.execute("DELETE FROM taint WHERE seen < $1", &[&expire_before])?;
            }
            // Drop rows beyond `max`, in rounds of `trim_round`.
            let rows: i64 = tx
                .query_one("SELECT count(*) FROM taint", &[])?
                .try_get(0)?;
            let mut over = rows - max;
            while over > 0 {
                let holders = tx
                    .query(
                        "SELECT server, count(*) AS n FROM taint GROUP BY server
                         ORDER BY n DESC, server ASC LIMIT 2",
                        &[],
                    )?
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect::<Result<Vec<(String, i64)>, postgres::Error>>()?;
                let Some((server, k)) = trim_round(over, &holders) else {
                    break;
                };
                let gone = tx.execute(
                    "DELETE FROM taint WHERE digest IN
                     (SELECT digest FROM taint WHERE server = $1
                      ORDER BY sensitive ASC, seen ASC, rev ASC LIMIT $2)",
                    &[&server, &k],
                )?;
                if gone == 0 {
                    break;
                }
                over -= gone as i64;
            }
            tx.commit()
        })
    }

    fn taint_labels(&self, max: usize, expire_before: u64) -> Result<Vec<StoredLabel>, StoreError> {
        let (max, expire_before) = (max as i64, expire_before as i64);
        self.with(true, |c| {
            let mut out = c
                .query(
                    &format!(
                        "SELECT {TAINT_COLUMNS} FROM taint WHERE seen >= $1
                         ORDER BY seen DESC, rev DESC LIMIT $2"
                    ),
                    &[&expire_before, &max],
                )?
                .iter()
                .map(label_of)
                .collect::<Result<Vec<_>, _>>()?;
            out.reverse();
            Ok(out)
        })
    }

    fn taint_since(&self, cursor: i64) -> Result<Option<(Vec<StoredLabel>, i64)>, StoreError> {
        self.with(true, |c| {
            let rows = c.query(
                &format!(
                    "SELECT {TAINT_COLUMNS}, rev FROM taint WHERE rev > $1 ORDER BY rev LIMIT $2"
                ),
                &[&cursor, &(TAINT_PAGE as i64)],
            )?;
            let mut next = cursor;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(label_of(r)?);
                next = next.max(r.try_get::<_, i64>(9)?);
            }
            Ok(Some((out, next)))
        })
    }
}

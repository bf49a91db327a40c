//! The structural controls' persistent state: the pins (trust on first use), the
//! human review queue, the allowlist that "remember" decisions write, taint labels
//! and launch records.
//!
//! [`Store`] is the one type callers use; behind it is a [`Backend`]: an embedded
//! SQLite file ([`sqlite`], the default, one machine) or a PostgreSQL database
//! ([`pg`], several gateways sharing one state). Both keep the same tables
//! and answer the same questions; where two gateways (or a gateway and a reviewer)
//! can race, each backend makes the read-then-write one transaction.
//!
//! Nothing the gateway decides on is cached in memory: every check is a query, so
//! a `portcullis review approve` from another process (or another gateway) is seen
//! by a running gateway on its next check, and everything survives a restart. The
//! one exception is the taint labels, which a gateway holds in memory and, on a
//! shared store, refreshes from it before each egress check
//! ([`Store::taint_since`]).

mod pg;
mod sqlite;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {source} (check the file is writable; `[state] path` in the gateway configuration moves it)")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("state store {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("review item {0} does not exist (`portcullis review list --all` lists the items of this state store; is it the gateway's? give --config or --state)")]
    NoItem(i64),
    #[error(
        "review item {id} is already {status} (`portcullis review show {id}` shows the decision)"
    )]
    Decided { id: i64, status: String },
    #[error("the decision record of review item {id} could not be written, so nothing was decided: {message}")]
    Record { id: i64, message: String },
    #[error("state store {at}: schema version {found}, newer than this portcullis knows ({known}): it was written by a newer release; run that release (or a newer one) against it, or give this one another store (`[state] path` or `url`)")]
    NewerSchema { at: String, found: i64, known: i64 },
    #[error("state store {url}: {detail} (is the PostgreSQL server up, and may the URL's user connect and create tables? `[state] url` in the gateway configuration names it)")]
    Postgres {
        url: String,
        /// The error with its causes (a TLS handshake's reason, an I/O error).
        detail: String,
        source: postgres::Error,
    },
}

/// A pinned definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub server: String,
    /// `tool`, `prompt`, `resource_template` or `instructions`.
    pub kind: String,
    pub name: String,
    pub hash: String,
    pub definition: Value,
    pub pinned_at: String,
    /// The hash of the server's launch the definition was pinned (or last seen
    /// unchanged) under ([`crate::launch`]); `None` for pins older than launch
    /// records.
    #[serde(default)]
    pub launch: Option<String>,
}

/// A taint label as the state store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLabel {
    /// SHA-256 (hex) of the value.
    pub digest: String,
    /// The value itself; `None` for a sensitive value (kept by digest only).
    pub value: Option<String>,
    pub hint: String,
    pub label: crate::taint::Label,
    /// When the value was last seen (Unix seconds).
    pub seen: u64,
}

/// What a review item is about.
pub mod kind {
    /// A definition that is new (first sight under `hold`), changed or renamed.
    pub const DEFINITION: &str = "definition";
    /// A tool call held by an egress control (taint, over-privileged parameter).
    pub const CALL: &str = "call";
    /// A tool result held by a structural finding (tool transfer).
    pub const RESULT: &str = "result";
    /// A tool definition held for a structural finding on its metadata (names
    /// across servers, shadowing, preference manipulation).
    pub const METADATA: &str = "metadata";
}

/// A new review item, as the gateway files it.
#[derive(Debug, Clone, Default)]
pub struct NewItem {
    pub kind: String,
    pub server: String,
    pub name: String,
    /// What exactly is held (definition hash, argument hash, result hash): an
    /// approval applies to this and nothing else.
    pub fingerprint: String,
    pub record_id: String,
    pub summary: String,
    pub findings: Value,
    pub diff: Value,
    pub detail: Value,
    /// Allowlist keys a "remember" decision writes.
    pub allow_keys: Vec<String>,
    /// The decision record that held the item (a template for the decision
    /// records of the review).
    pub record: Value,
}

/// One item of the review queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueItem {
    pub id: i64,
    pub created: String,
    pub kind: String,
    pub server: String,
    pub name: String,
    pub fingerprint: String,
    /// `pending`, `approved` or `denied`.
    pub status: String,
    pub record_id: String,
    pub summary: String,
    pub findings: Value,
    pub diff: Value,
    pub detail: Value,
    pub allow_keys: Vec<String>,
    pub record: Value,
    pub note: Option<String>,
    pub decided_at: Option<String>,
    pub remember: bool,
    /// Times an approved call item has let its call through.
    pub used: i64,
    /// The decision record of the human decision (null while pending).
    pub decision: Value,
}

pub const PENDING: &str = "pending";
pub const APPROVED: &str = "approved";
pub const DENIED: &str = "denied";

/// Where a state store is: a SQLite file or a PostgreSQL URL.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL (or a libpq key=value string).
    Postgres(String),
}

impl Location {
    /// A store named on a command line: a PostgreSQL URL or a file path.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres(s.to_string())
        } else {
            Location::Sqlite(PathBuf::from(s))
        }
    }

    /// Whether there is a store to open without creating one (a database server
    /// is assumed to exist: connecting says otherwise).
    pub fn exists(&self) -> bool {
        match self {
            Location::Sqlite(p) => p.exists(),
            Location::Postgres(_) => true,
        }
    }
}

/// A URL as logs and errors may show it: the password of the user part and every
/// query parameter whose name says password replaced by `***`. Anything that is
/// not a URL this can parse is not shown at all.
pub fn redact_url(url: &str) -> String {
    const HIDDEN: &str = "(a connection string that is not a URL; not shown)";
    let Ok(mut u) = url::Url::parse(url) else {
        return HIDDEN.into();
    };
    if u.password().is_some() && u.set_password(Some("***")).is_err() {
        return HIDDEN.into();
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if k.to_ascii_lowercase().contains("password") {
                    "***".to_string()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(u) => f.write_str(&redact_url(u)),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

/// The schema version this code writes (SQLite's `user_version`; PostgreSQL's
/// `portcullis_schema` table). Each released SQLite schema is a fixture of
/// `tests/store_migrations.rs`, opened and used by this code: 1 (pins, queue,
/// allow), 2 (+ meta), 3 (+ taint), 4 (+ launches, pins.launch). Stores before 4
/// carry no version (0); every change so far added tables or a column, so opening
/// one creates what is missing. PostgreSQL stores start at 4.
pub const SCHEMA_VERSION: i64 = 4;

/// The most labels one [`Store::taint_since`] answer carries (fewer: the reader
/// is up to date).
pub const TAINT_PAGE: usize = 10_000;

/// A pin to write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PinWrite<'a> {
    pub server: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub hash: &'a str,
    pub definition: &'a Value,
    pub launch: Option<&'a str>,
}

/// What deciding a pending item writes, planned by [`Store::decide`] from the item
/// (inside the backend's transaction, once the item is known to be pending).
#[derive(Debug)]
pub(crate) struct Decision {
    pub status: &'static str,
    pub note: Option<String>,
    pub remember: bool,
    pub now: String,
    /// Approving a definition re-pins it: (kind, hash, definition, launch).
    pub pin: Option<(String, String, Value, Option<String>)>,
    /// Allowlist rows `(list:kind, key)` a "remember" writes.
    pub allow: Vec<(String, String)>,
}

/// Writes the decision record of a decision (to the audit log) and returns it:
/// called by the backend after the pin and allowlist writes succeeded, just
/// before the item's status is written, so a failed write leaves no record of a
/// decision that was not made, and a failed record no decision.
pub(crate) type RecordFn<'a> = dyn FnMut(&QueueItem) -> Result<Value, StoreError> + Send + 'a;

/// A taint label as written: the digest and what is kept of the value.
#[derive(Debug)]
pub(crate) struct TaintRow<'a> {
    pub digest: String,
    /// `None` for a sensitive value (kept by digest only).
    pub value: Option<&'a str>,
    pub hint: String,
    pub label: &'a crate::taint::Label,
}

/// What a state backend does. [`Store`] wraps one; the logic shared by every
/// backend (what a decision writes, what a taint row keeps) is there, the SQL is here.
pub(crate) trait Backend: Send + Sync {
    fn pin(&self, server: &str, kind: &str, name: &str) -> Result<Option<Pin>, StoreError>;
    fn pins(&self, server: &str, kind: &str) -> Result<Vec<Pin>, StoreError>;
    fn set_pin(&self, p: PinWrite<'_>) -> Result<(), StoreError>;
    /// Pin unless a pin exists; the existing pin if one does (first use, raced).
    fn pin_first(&self, p: PinWrite<'_>) -> Result<Option<Pin>, StoreError>;
    fn set_pin_launch(
        &self,
        server: &str,
        kind: &str,
        name: &str,
        launch: &str,
    ) -> Result<(), StoreError>;
    /// Record the launch (hash, JSON) as the newest of `server`; the newest before
    /// it (hash, JSON), if any.
    fn record_launch(
        &self,
        server: &str,
        hash: &str,
        launch: &str,
    ) -> Result<Option<(String, String)>, StoreError>;
    fn launch(&self, server: &str, hash: &str) -> Result<Option<String>, StoreError>;
    fn enqueue(&self, item: &NewItem) -> Result<(QueueItem, bool), StoreError>;
    fn item(&self, id: i64) -> Result<Option<QueueItem>, StoreError>;
    fn latest(
        &self,
        kind: &str,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError>;
    fn pending_count(&self) -> Result<usize, StoreError>;
    fn list(&self, all: bool) -> Result<Vec<QueueItem>, StoreError>;
    /// Lock item `id`; unless it is missing or decided, write what `plan` says,
    /// then `record`, then the status, and commit, all in one transaction.
    fn decide(
        &self,
        id: i64,
        plan: &mut (dyn FnMut(&QueueItem) -> Result<Decision, StoreError> + Send),
        record: &mut RecordFn<'_>,
    ) -> Result<QueueItem, StoreError>;
    fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError>;
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError>;
    fn take_call_approval(
        &self,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError>;
    fn remembered(
        &self,
        list_kind: &str,
        server: &str,
        name: &str,
        key: &str,
    ) -> Result<bool, StoreError>;
    fn put_taint(
        &self,
        rows: &[TaintRow<'_>],
        seen: u64,
        max: usize,
        expire_before: u64,
    ) -> Result<(), StoreError>;
    fn taint_labels(&self, max: usize, expire_before: u64) -> Result<Vec<StoredLabel>, StoreError>;
    /// Labels written (by anyone) after `cursor`, with the new cursor; `None`
    /// when the backend is not shared between gateways.
    fn taint_since(&self, cursor: i64) -> Result<Option<(Vec<StoredLabel>, i64)>, StoreError>;
}

/// The state store.
pub struct Store {
    backend: Box<dyn Backend>,
    location: Location,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish()
    }
}

impl Store {
    /// Open (or create) a SQLite store.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::connect(&Location::Sqlite(path.to_path_buf()))
    }

    /// Open (or create) the store at `location`; its schema is created or
    /// brought up to [`SCHEMA_VERSION`] first.
    pub fn connect(location: &Location) -> Result<Store, StoreError> {
        let backend: Box<dyn Backend> = match location {
            Location::Sqlite(p) => Box::new(sqlite::SqliteBackend::open(p)?),
            Location::Postgres(u) => Box::new(pg::PgBackend::connect(u)?),
        };
        Ok(Store {
            backend,
            location: location.clone(),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Whether other gateways may share this store (their taint labels are
    /// then read back before each egress check).
    pub fn is_shared(&self) -> bool {
        matches!(self.location, Location::Postgres(_))
    }

    pub fn pin(&self, server: &str, kind: &str, name: &str) -> Result<Option<Pin>, StoreError> {
        self.backend.pin(server, kind, name)
    }

    /// Every pin of one server and kind.
    pub fn pins(&self, server: &str, kind: &str) -> Result<Vec<Pin>, StoreError> {
        self.backend.pins(server, kind)
    }

    /// Pin a definition, under the launch (hash) the server runs with now.
    pub fn set_pin(
        &self,
        server: &str,
        kind: &str,
        name: &str,
        hash: &str,
        definition: &Value,
        launch: Option<&str>,
    ) -> Result<(), StoreError> {
        self.backend.set_pin(PinWrite {
            server,
            kind,
            name,
            hash,
            definition,
            launch,
        })
    }

    /// Pin a definition seen for the first time, unless another gateway (or
    /// process) pinned one under this name first: then that pin is returned and
    /// nothing is written, so of two versions seen at once only one is trusted.
    pub fn pin_first(
        &self,
        server: &str,
        kind: &str,
        name: &str,
        hash: &str,
        definition: &Value,
        launch: Option<&str>,
    ) -> Result<Option<Pin>, StoreError> {
        self.backend.pin_first(PinWrite {
            server,
            kind,
            name,
            hash,
            definition,
            launch,
        })
    }

    /// A pinned definition seen unchanged under another launch: the pin now
    /// belongs to that launch (so a later change is not blamed on a launch
    /// change long past).
    pub fn set_pin_launch(
        &self,
        server: &str,
        kind: &str,
        name: &str,
        launch: &str,
    ) -> Result<(), StoreError> {
        self.backend.set_pin_launch(server, kind, name, launch)
    }

    /// Record that `server` starts with `launch` now. Returns the launch it
    /// last started with, with its hash, when that was a different one.
    pub fn record_launch(
        &self,
        server: &str,
        launch: &crate::launch::Launch,
    ) -> Result<Option<(String, crate::launch::Launch)>, StoreError> {
        let hash = launch.hash();
        let text = serde_json::to_string(launch).unwrap_or_else(|_| "{}".into());
        let last = self.backend.record_launch(server, &hash, &text)?;
        Ok(last
            .filter(|(h, _)| *h != hash)
            .and_then(|(h, l)| serde_json::from_str(&l).ok().map(|l| (h, l))))
    }

    /// A launch of `server` by its hash.
    pub fn launch(
        &self,
        server: &str,
        hash: &str,
    ) -> Result<Option<crate::launch::Launch>, StoreError> {
        Ok(self
            .backend
            .launch(server, hash)?
            .and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// File an item, unless one for the same subject and fingerprint is already
    /// pending (then that one is returned). Returns the item and whether it is new.
    pub fn enqueue(&self, item: NewItem) -> Result<(QueueItem, bool), StoreError> {
        self.backend.enqueue(&item)
    }

    pub fn item(&self, id: i64) -> Result<Option<QueueItem>, StoreError> {
        self.backend.item(id)
    }

    /// The newest item about this subject and fingerprint, whatever its status.
    pub fn latest(
        &self,
        kind: &str,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError> {
        self.backend.latest(kind, server, name, fingerprint)
    }

    /// How many items are pending.
    pub fn pending_count(&self) -> Result<usize, StoreError> {
        self.backend.pending_count()
    }

    /// Pending items (or all items), oldest first.
    pub fn list(&self, all: bool) -> Result<Vec<QueueItem>, StoreError> {
        self.backend.list(all)
    }

    /// Approve or deny a pending item. Approving a definition re-pins it to the
    /// held version; `remember` writes the item's allowlist keys.
    ///
    /// `record` writes the decision record of the human decision (to the audit
    /// log) and returns it; it runs while the item is locked and known to be
    /// pending, and the decision is committed only if it succeeds: no decision
    /// without its record, and no record of a decision another reviewer made
    /// first. The record is kept with the item too.
    pub fn decide<F>(
        &self,
        id: i64,
        approve: bool,
        note: Option<&str>,
        remember: bool,
        record: F,
    ) -> Result<QueueItem, StoreError>
    where
        F: FnOnce(&QueueItem) -> Result<Value, String> + Send,
    {
        let at = self.location.to_string();
        let mut record = Some(record);
        let mut plan = |item: &QueueItem| -> Result<Decision, StoreError> {
            let pin = if approve && item.kind == kind::DEFINITION {
                let d = &item.detail;
                let (Some(pin_kind), Some(hash), Some(def)) = (
                    d.get("pin_kind").and_then(Value::as_str),
                    d.get("hash").and_then(Value::as_str),
                    d.get("definition"),
                ) else {
                    return Err(StoreError::Io {
                        path: PathBuf::from(&at),
                        message: format!("review item {id} has no definition to pin"),
                    });
                };
                // Pinned under the launch it was seen under (a launch change's
                // item names the new launch).
                let launch = d.get("launch_hash").and_then(Value::as_str);
                Some((
                    pin_kind.to_string(),
                    hash.to_string(),
                    def.clone(),
                    launch.map(str::to_string),
                ))
            } else {
                None
            };
            let list = if approve { "allow" } else { "deny" };
            let allow = if remember {
                item.allow_keys
                    .iter()
                    .map(|k| (format!("{list}:{}", item.kind), k.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            Ok(Decision {
                status: if approve { APPROVED } else { DENIED },
                note: note.map(str::to_string),
                remember,
                now: portcullis_core::now_rfc3339(),
                pin,
                allow,
            })
        };
        let mut write = |item: &QueueItem| -> Result<Value, StoreError> {
            let once = record.take().ok_or_else(|| StoreError::Record {
                id,
                message: "the decision was attempted twice".into(),
            })?;
            once(item).map_err(|message| StoreError::Record { id, message })
        };
        self.backend.decide(id, &mut plan, &mut write)
    }

    /// Remember a setting of the gateway that other processes need (the audit
    /// log `portcullis review` appends its decision records to).
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.backend.set_meta(key, value)
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.backend.meta(key)
    }

    /// An approved, not yet used call item for exactly this call: marks it used
    /// and returns it (one approval lets one call through, on one gateway).
    pub fn take_call_approval(
        &self,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError> {
        self.backend.take_call_approval(server, name, fingerprint)
    }

    /// Whether a "remember" approval (`allow`) or denial (`deny`) covers this key.
    pub fn remembered(
        &self,
        list: &str,
        kind: &str,
        server: &str,
        name: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        self.backend
            .remembered(&format!("{list}:{kind}"), server, name, key)
    }

    /// Write taint labels through (a sensitive value by its digest only), then
    /// apply the bounds: labels last seen before `expire_before` (Unix seconds;
    /// 0 = none) are deleted, and only the newest `max` are kept. A sensitive
    /// label is not replaced by a non-sensitive one of the same value.
    pub fn put_taint(
        &self,
        labels: &[(String, crate::taint::Label)],
        seen: u64,
        max: usize,
        expire_before: u64,
    ) -> Result<(), StoreError> {
        let rows: Vec<TaintRow<'_>> = labels
            .iter()
            .map(|(value, l)| TaintRow {
                digest: portcullis_core::sha256_hex(value.as_bytes()),
                value: (!l.sensitive).then_some(value.as_str()),
                hint: crate::taint::hint(value),
                label: l,
            })
            .collect();
        self.backend.put_taint(&rows, seen, max, expire_before)
    }

    /// The newest `max` taint labels last seen at or after `expire_before`
    /// (0 = any), oldest first.
    pub fn taint_labels(
        &self,
        max: usize,
        expire_before: u64,
    ) -> Result<Vec<StoredLabel>, StoreError> {
        self.backend.taint_labels(max, expire_before)
    }

    /// On a shared store, the labels any gateway wrote after `cursor` (0 = from
    /// the start) and the cursor to ask from next; `None` on a store of one
    /// gateway (its own labels are in its memory already).
    pub fn taint_since(&self, cursor: i64) -> Result<Option<(Vec<StoredLabel>, i64)>, StoreError> {
        self.backend.taint_since(cursor)
    }
}

/// One round of the taint bound, the same in every backend and as the in-memory
/// labels apply it (`TaintStore::trim`): `over` rows too many, `holders` the two
/// servers holding the most rows `(server, rows)`, largest first. The server that
/// loses rows (its non-sensitive, oldest first) and how many: down to the next
/// largest holder at most, so a server's flood drops its own labels, never
/// another server's share.
pub(crate) fn trim_round(over: i64, holders: &[(String, i64)]) -> Option<(&str, i64)> {
    let (server, n) = holders.first()?;
    let next = holders.get(1).map_or(0, |h| h.1);
    Some((server, over.min((n - next).max(1))))
}

/// A JSON column as stored (an unreadable one reads as null).
fn json_col(s: String) -> Value {
    serde_json::from_str(&s).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;
    use serde_json::json;

    #[test]
    fn pins_queue_and_decisions_persist_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        {
            let s = Store::open(&path).unwrap();
            s.set_pin("a", "tool", "t", "h1", &json!({"name": "t"}), None)
                .unwrap();
            let new = NewItem {
                kind: kind::DEFINITION.into(),
                server: "a".into(),
                name: "t".into(),
                fingerprint: "h2".into(),
                detail: json!({"pin_kind": "tool", "hash": "h2", "definition": {"name": "t", "x": 1}}),
                allow_keys: vec!["*".into()],
                ..NewItem::default()
            };
            let (i, fresh) = s.enqueue(new.clone()).unwrap();
            assert!(fresh);
            let (j, fresh) = s.enqueue(new).unwrap();
            assert!(!fresh, "the same pending subject is filed once");
            assert_eq!(i.id, j.id);
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.pin("a", "tool", "t").unwrap().unwrap().hash, "h1");
        let pending = s.list(false).unwrap();
        assert_eq!(pending.len(), 1);
        let done = s
            .decide(pending[0].id, true, Some("ok"), true, |_| {
                Ok(json!({"id": "r1"}))
            })
            .unwrap();
        assert_eq!(done.status, APPROVED);
        assert_eq!(done.note.as_deref(), Some("ok"));
        assert_eq!(done.decision["id"], "r1");
        assert_eq!(s.pin("a", "tool", "t").unwrap().unwrap().hash, "h2");
        assert!(s
            .remembered("allow", kind::DEFINITION, "a", "t", "anything")
            .unwrap());
        assert!(matches!(
            s.decide(pending[0].id, false, None, false, |_| Ok(Value::Null)),
            Err(StoreError::Decided { .. })
        ));
        assert!(matches!(
            s.decide(999, true, None, false, |_| Ok(Value::Null)),
            Err(StoreError::NoItem(999))
        ));
    }

    /// The gateway's main connection and the taint writer's share one file: a
    /// read-then-write transaction on one must wait for the other's write, not
    /// fail with "database is locked" (a deferred transaction cannot wait when
    /// it upgrades to a writer on a stale snapshot).
    #[test]
    fn two_connections_writing_at_once_wait_for_each_other() {
        use crate::taint::Label;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let main = Store::open(&path).unwrap();
        let writer = Store::open(&path).unwrap();
        let label = Label {
            server: "alpha".into(),
            tool: "read".into(),
            record_id: "r".into(),
            sensitive: false,
            source: "result",
        };
        std::thread::scope(|scope| {
            let w = scope.spawn(|| {
                for i in 0..300 {
                    let labels = vec![(format!("VALUE-{i:08}"), label.clone())];
                    writer.put_taint(&labels, 1, 10_000, 0).unwrap();
                }
            });
            for i in 0..300 {
                main.enqueue(NewItem {
                    kind: kind::CALL.into(),
                    server: "a".into(),
                    name: "t".into(),
                    fingerprint: format!("f{i}"),
                    allow_keys: vec!["k".into()],
                    ..NewItem::default()
                })
                .unwrap();
            }
            w.join().unwrap();
        });
        assert_eq!(main.list(false).unwrap().len(), 300);
    }

    #[test]
    fn no_decision_without_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let (i, _) = s
            .enqueue(NewItem {
                kind: kind::CALL.into(),
                server: "a".into(),
                name: "t".into(),
                fingerprint: "args".into(),
                allow_keys: vec!["k".into()],
                ..NewItem::default()
            })
            .unwrap();
        let failed = s.decide(i.id, true, None, true, |_| Err("disk full".into()));
        assert!(
            matches!(failed, Err(StoreError::Record { .. })),
            "{failed:?}"
        );
        let still = s.item(i.id).unwrap().unwrap();
        assert_eq!(still.status, PENDING);
        assert!(!s.remembered("allow", kind::CALL, "a", "t", "k").unwrap());
        s.set_meta("audit_log", "/x/audit.jsonl").unwrap();
        assert_eq!(
            s.meta("audit_log").unwrap().as_deref(),
            Some("/x/audit.jsonl")
        );
        assert_eq!(s.meta("nope").unwrap(), None);
    }

    /// A decision whose writes fail leaves no record: the record is written
    /// after the pin and allowlist rows, just before the status.
    #[test]
    fn no_record_of_a_decision_whose_writes_failed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let s = Store::open(&path).unwrap();
        let (i, _) = s
            .enqueue(NewItem {
                kind: kind::CALL.into(),
                server: "a".into(),
                name: "t".into(),
                fingerprint: "args".into(),
                allow_keys: vec!["k".into()],
                ..NewItem::default()
            })
            .unwrap();
        // The allowlist cannot be written.
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE allow")
            .unwrap();
        let mut recorded = false;
        let failed = s.decide(i.id, true, None, true, |_| {
            recorded = true;
            Ok(json!({"id": "r"}))
        });
        assert!(failed.is_err());
        assert!(!recorded, "a record of a decision that was not made");
        assert_eq!(s.item(i.id).unwrap().unwrap().status, PENDING);
    }

    #[test]
    fn taint_labels_persist_bounded_and_secrets_only_by_digest() {
        use crate::taint::Label;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let l = |sensitive: bool| Label {
            server: "alpha".into(),
            tool: "read".into(),
            record_id: "r1".into(),
            sensitive,
            source: if sensitive { "guard" } else { "result" },
        };
        {
            let s = Store::open(&path).unwrap();
            s.put_taint(
                &[
                    ("OLD-VALUE-1".into(), l(false)),
                    ("SECRET-VALUE-2".into(), l(true)),
                ],
                100,
                3,
                0,
            )
            .unwrap();
            // Seen again as a plain value: stays sensitive, by digest.
            s.put_taint(&[("SECRET-VALUE-2".into(), l(false))], 200, 3, 0)
                .unwrap();
            s.put_taint(
                &[
                    ("NEW-VALUE-3".into(), l(false)),
                    ("NEW-VALUE-4".into(), l(false)),
                ],
                300,
                3,
                0,
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let got = s.taint_labels(10, 0).unwrap();
        let values: Vec<Option<&str>> = got.iter().map(|g| g.value.as_deref()).collect();
        // Bounded to 3: the oldest (seen at 100) is gone; the secret is in
        // the store by digest only.
        assert_eq!(values, vec![None, Some("NEW-VALUE-3"), Some("NEW-VALUE-4")]);
        assert!(got[0].label.sensitive);
        assert_eq!(got[0].seen, 200);
        assert_eq!(
            got[0].digest,
            portcullis_core::sha256_hex(b"SECRET-VALUE-2")
        );
        for file in [path.clone(), dir.path().join("s.sqlite-wal")] {
            let raw = std::fs::read(&file).unwrap_or_default();
            assert!(!raw.windows(14).any(|w| w == b"SECRET-VALUE-2"));
        }
        // Expiry: only labels seen at or after the cut-off come back, and a
        // write deletes the expired ones.
        assert_eq!(s.taint_labels(10, 250).unwrap().len(), 2);
        s.put_taint(&[], 400, 3, 250).unwrap();
        assert_eq!(s.taint_labels(10, 0).unwrap().len(), 2);
    }

    #[test]
    fn a_flood_from_one_server_drops_its_own_persisted_labels() {
        use crate::taint::Label;
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let l = |server: &str, sensitive: bool| Label {
            server: server.into(),
            tool: "read".into(),
            record_id: "r".into(),
            sensitive,
            source: if sensitive { "guard" } else { "result" },
        };
        s.put_taint(
            &[
                ("ALPHA-VALUE-1".into(), l("alpha", false)),
                ("ALPHA-SECRET-2".into(), l("alpha", true)),
            ],
            100,
            50,
            0,
        )
        .unwrap();
        let flood: Vec<(String, Label)> = (0..500)
            .map(|i| (format!("FLOOD-{i:05}"), l("flood", false)))
            .collect();
        s.put_taint(&flood, 200, 50, 0).unwrap();
        let got = s.taint_labels(100, 0).unwrap();
        assert_eq!(got.len(), 50);
        let alpha: Vec<&str> = got
            .iter()
            .filter(|g| g.label.server == "alpha")
            .map(|g| g.hint.as_str())
            .collect();
        assert_eq!(alpha.len(), 2, "{alpha:?}");
        assert!(got
            .iter()
            .any(|g| g.value.as_deref() == Some("FLOOD-00499")));
        assert!(!got
            .iter()
            .any(|g| g.value.as_deref() == Some("FLOOD-00000")));
    }

    #[test]
    fn launches_are_kept_per_server_and_a_change_returns_the_last_one() {
        use crate::launch::Launch;
        let srv = |arg: &str| {
            let none = Default::default();
            Launch::new(Some("srv"), &[arg.to_string()], None, &none, None, &none)
        };
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let one = srv("--a=1");
        let two = srv("--a=2");
        assert_eq!(s.record_launch("t", &one).unwrap(), None, "first launch");
        assert_eq!(s.record_launch("t", &one).unwrap(), None, "same launch");
        // Another server's launch is its own.
        assert_eq!(s.record_launch("u", &two).unwrap(), None);
        assert_eq!(
            s.record_launch("t", &two).unwrap(),
            Some((one.hash(), one.clone()))
        );
        // And back: the last one is `two`, not the first seen.
        assert_eq!(
            s.record_launch("t", &one).unwrap(),
            Some((two.hash(), two.clone()))
        );
        assert_eq!(s.launch("t", &two.hash()).unwrap(), Some(two));
        assert_eq!(s.launch("u", &one.hash()).unwrap(), None);
    }

    #[test]
    fn a_store_without_launch_columns_gains_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE pins (server TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
                 hash TEXT NOT NULL, definition TEXT NOT NULL, pinned_at TEXT NOT NULL,
                 PRIMARY KEY (server, kind, name));
                 INSERT INTO pins VALUES ('a', 'tool', 't', 'h', '{}', 'then');",
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.pin("a", "tool", "t").unwrap().unwrap().launch, None);
        s.set_pin_launch("a", "tool", "t", "L").unwrap();
        assert_eq!(
            s.pin("a", "tool", "t").unwrap().unwrap().launch.as_deref(),
            Some("L")
        );
        drop(s);
        Store::open(&path).unwrap();
    }

    #[test]
    fn a_call_approval_is_used_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let (i, _) = s
            .enqueue(NewItem {
                kind: kind::CALL.into(),
                server: "a".into(),
                name: "t".into(),
                fingerprint: "args".into(),
                ..NewItem::default()
            })
            .unwrap();
        assert!(s.take_call_approval("a", "t", "args").unwrap().is_none());
        s.decide(i.id, true, None, false, |_| Ok(Value::Null))
            .unwrap();
        assert!(s.take_call_approval("a", "t", "args").unwrap().is_some());
        assert!(s.take_call_approval("a", "t", "args").unwrap().is_none());
    }
}

//! The structural controls' persistent state: one SQLite file holding the pins
//! (trust on first use), the human review queue and the allowlist that
//! "remember" decisions write.
//!
//! Nothing the gateway decides on is cached in memory: every check is a query, so
//! a `portcullis review approve` from another process is seen by a running gateway
//! on its next check, and everything survives a restart.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

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
    #[error("state store {path}: schema version {found}, newer than this portcullis knows ({known}): it was written by a newer release; run that release (or a newer one) against it, or give this one another store (`[state] path`)")]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
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

/// The state store (one connection; SQLite serializes writers across processes).
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// The schema version this code writes, kept in SQLite's `user_version`. Each
/// released schema is a fixture of `tests/store_migrations.rs`, opened and used
/// by this code: 1 (pins, queue, allow), 2 (+ meta), 3 (+ taint), 4 (+ launches,
/// pins.launch). Stores before 4 carry no version (0); every change so far added
/// tables or a column, so opening one creates what is missing.
pub const SCHEMA_VERSION: i64 = 4;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pins (
    server TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    hash TEXT NOT NULL, definition TEXT NOT NULL, pinned_at TEXT NOT NULL,
    PRIMARY KEY (server, kind, name));
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL, kind TEXT NOT NULL, server TEXT NOT NULL, name TEXT NOT NULL,
    fingerprint TEXT NOT NULL, status TEXT NOT NULL, record_id TEXT NOT NULL,
    summary TEXT NOT NULL, findings TEXT NOT NULL, diff TEXT NOT NULL, detail TEXT NOT NULL,
    allow_keys TEXT NOT NULL, record TEXT NOT NULL,
    note TEXT, decided_at TEXT, remember INTEGER NOT NULL DEFAULT 0,
    used INTEGER NOT NULL DEFAULT 0, decision TEXT);
CREATE INDEX IF NOT EXISTS queue_subject ON queue (kind, server, name, fingerprint);
CREATE TABLE IF NOT EXISTS allow (
    kind TEXT NOT NULL, server TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL,
    note TEXT, created TEXT NOT NULL, queue_id INTEGER,
    PRIMARY KEY (kind, server, name, key));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS taint (
    digest TEXT PRIMARY KEY, value TEXT, hint TEXT NOT NULL,
    server TEXT NOT NULL, tool TEXT NOT NULL, record_id TEXT NOT NULL,
    sensitive INTEGER NOT NULL, source TEXT NOT NULL, seen INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS taint_seen ON taint (seen);
CREATE TABLE IF NOT EXISTS launches (
    server TEXT NOT NULL, hash TEXT NOT NULL, launch TEXT NOT NULL,
    first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (server, hash));
";

const ITEM_COLUMNS: &str = "id, created, kind, server, name, fingerprint, status, record_id, \
summary, findings, diff, detail, allow_keys, record, note, decided_at, remember, used, decision";

fn json_col(s: String) -> Value {
    serde_json::from_str(&s).unwrap_or(Value::Null)
}

fn item_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<QueueItem> {
    Ok(QueueItem {
        id: row.get(0)?,
        created: row.get(1)?,
        kind: row.get(2)?,
        server: row.get(3)?,
        name: row.get(4)?,
        fingerprint: row.get(5)?,
        status: row.get(6)?,
        record_id: row.get(7)?,
        summary: row.get(8)?,
        findings: json_col(row.get(9)?),
        diff: json_col(row.get(10)?),
        detail: json_col(row.get(11)?),
        allow_keys: serde_json::from_str(&row.get::<_, String>(12)?).unwrap_or_default(),
        record: json_col(row.get(13)?),
        note: row.get(14)?,
        decided_at: row.get(15)?,
        remember: row.get::<_, i64>(16)? != 0,
        used: row.get(17)?,
        decision: row
            .get::<_, Option<String>>(18)?
            .map(json_col)
            .unwrap_or(Value::Null),
    })
}

impl Store {
    /// Open (or create) the store.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        }
        let sq = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(sq)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(sq)?;
        // Before anything is written: a newer release's store is not touched.
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sq)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sq)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sq)?;
        conn.execute_batch(SCHEMA).map_err(sq)?;
        // Stores written before launch records: pins gain the launch they were
        // made under (unknown for the old ones).
        let has_launch: bool = conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('pins') WHERE name = 'launch'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(sq)?
            > 0;
        if !has_launch {
            conn.execute_batch("ALTER TABLE pins ADD COLUMN launch TEXT")
                .map_err(sq)?;
        }
        if found < SCHEMA_VERSION {
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(sq)?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn).map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    pub fn pin(&self, server: &str, kind: &str, name: &str) -> Result<Option<Pin>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT server, kind, name, hash, definition, pinned_at, launch FROM pins
                 WHERE server = ?1 AND kind = ?2 AND name = ?3",
                params![server, kind, name],
                pin_of,
            )
            .optional()
        })
    }

    /// Every pin of one server and kind.
    pub fn pins(&self, server: &str, kind: &str) -> Result<Vec<Pin>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT server, kind, name, hash, definition, pinned_at, launch FROM pins
                 WHERE server = ?1 AND kind = ?2 ORDER BY name",
            )?;
            let rows = st.query_map(params![server, kind], pin_of)?;
            rows.collect()
        })
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
        self.with(|c| upsert_pin(c, server, kind, name, hash, definition, launch).map(|_| ()))
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
        self.with(|c| {
            c.execute(
                "UPDATE pins SET launch = ?4 WHERE server = ?1 AND kind = ?2 AND name = ?3",
                params![server, kind, name, launch],
            )
            .map(|_| ())
        })
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
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let last: Option<(String, String)> = tx
                .query_row(
                    "SELECT hash, launch FROM launches WHERE server = ?1 ORDER BY seq DESC LIMIT 1",
                    params![server],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let now = portcullis_core::now_rfc3339();
            tx.execute(
                "INSERT INTO launches (server, hash, launch, first_seen, last_seen, seq)
                 VALUES (?1, ?2, ?3, ?4, ?4, (SELECT coalesce(max(seq), 0) + 1 FROM launches))
                 ON CONFLICT (server, hash) DO UPDATE SET last_seen = excluded.last_seen,
                   seq = excluded.seq",
                params![server, hash, text, now],
            )?;
            tx.commit()?;
            Ok(last
                .filter(|(h, _)| *h != hash)
                .and_then(|(h, l)| serde_json::from_str(&l).ok().map(|l| (h, l))))
        })
    }

    /// A launch of `server` by its hash.
    pub fn launch(
        &self,
        server: &str,
        hash: &str,
    ) -> Result<Option<crate::launch::Launch>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT launch FROM launches WHERE server = ?1 AND hash = ?2",
                params![server, hash],
                |r| r.get::<_, String>(0),
            )
            .optional()
        })
        .map(|t| t.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// File an item, unless one for the same subject and fingerprint is already
    /// pending (then that one is returned). Returns the item and whether it is new.
    pub fn enqueue(&self, item: NewItem) -> Result<(QueueItem, bool), StoreError> {
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let existing = tx
                .query_row(
                    &format!(
                        "SELECT {ITEM_COLUMNS} FROM queue WHERE kind = ?1 AND server = ?2
                         AND name = ?3 AND fingerprint = ?4 AND status = 'pending'
                         ORDER BY id DESC LIMIT 1"
                    ),
                    params![item.kind, item.server, item.name, item.fingerprint],
                    item_of,
                )
                .optional()?;
            if let Some(e) = existing {
                tx.commit()?;
                return Ok((e, false));
            }
            tx.execute(
                "INSERT INTO queue (created, kind, server, name, fingerprint, status, record_id,
                 summary, findings, diff, detail, allow_keys, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    portcullis_core::now_rfc3339(),
                    item.kind,
                    item.server,
                    item.name,
                    item.fingerprint,
                    item.record_id,
                    item.summary,
                    item.findings.to_string(),
                    item.diff.to_string(),
                    item.detail.to_string(),
                    serde_json::to_string(&item.allow_keys).unwrap_or_else(|_| "[]".into()),
                    item.record.to_string(),
                ],
            )?;
            let id = tx.last_insert_rowid();
            let e = tx.query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )?;
            tx.commit()?;
            Ok((e, true))
        })
    }

    pub fn item(&self, id: i64) -> Result<Option<QueueItem>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )
            .optional()
        })
    }

    /// The newest item about this subject and fingerprint, whatever its status.
    pub fn latest(
        &self,
        kind: &str,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM queue WHERE kind = ?1 AND server = ?2
                     AND name = ?3 AND fingerprint = ?4 ORDER BY id DESC LIMIT 1"
                ),
                params![kind, server, name, fingerprint],
                item_of,
            )
            .optional()
        })
    }

    /// How many items are pending.
    pub fn pending_count(&self) -> Result<usize, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM queue WHERE status = 'pending'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| usize::try_from(n).unwrap_or(0))
    }

    /// Pending items (or all items), oldest first.
    pub fn list(&self, all: bool) -> Result<Vec<QueueItem>, StoreError> {
        self.with(|c| {
            let sql = if all {
                format!("SELECT {ITEM_COLUMNS} FROM queue ORDER BY id")
            } else {
                format!("SELECT {ITEM_COLUMNS} FROM queue WHERE status = 'pending' ORDER BY id")
            };
            let mut st = c.prepare(&sql)?;
            let rows = st.query_map([], item_of)?;
            rows.collect()
        })
    }

    /// Approve or deny a pending item. Approving a definition re-pins it to the
    /// held version; `remember` writes the item's allowlist keys.
    ///
    /// `record` writes the decision record of the human decision (to the audit
    /// log) and returns it; it runs while this store's write lock is held and the
    /// item is known to be pending, and the decision is committed only if it
    /// succeeds: no decision without its record, and no record of a decision
    /// another reviewer made first. The record is kept with the item too.
    pub fn decide<F>(
        &self,
        id: i64,
        approve: bool,
        note: Option<&str>,
        remember: bool,
        record: F,
    ) -> Result<QueueItem, StoreError>
    where
        F: FnOnce(&QueueItem) -> Result<Value, String>,
    {
        let path = self.path.clone();
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let sq = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sq)?;
        let item = tx
            .query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )
            .optional()
            .map_err(sq)?
            .ok_or(StoreError::NoItem(id))?;
        if item.status != PENDING {
            return Err(StoreError::Decided {
                id,
                status: item.status,
            });
        }
        let now = portcullis_core::now_rfc3339();
        let status = if approve { APPROVED } else { DENIED };
        if approve && item.kind == kind::DEFINITION {
            let d = &item.detail;
            let (Some(pin_kind), Some(hash), Some(def)) = (
                d.get("pin_kind").and_then(Value::as_str),
                d.get("hash").and_then(Value::as_str),
                d.get("definition"),
            ) else {
                return Err(StoreError::Io {
                    path: path.clone(),
                    message: format!("review item {id} has no definition to pin"),
                });
            };
            // Pinned under the launch it was seen under (a launch change's item
            // names the new launch).
            let launch = d.get("launch_hash").and_then(Value::as_str);
            upsert_pin(&tx, &item.server, pin_kind, &item.name, hash, def, launch).map_err(sq)?;
        }
        if remember {
            let list = if approve { "allow" } else { "deny" };
            for key in &item.allow_keys {
                tx.execute(
                    "INSERT OR REPLACE INTO allow (kind, server, name, key, note, created, queue_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        format!("{list}:{}", item.kind),
                        item.server,
                        item.name,
                        key,
                        note,
                        now,
                        id
                    ],
                )
                .map_err(sq)?;
            }
        }
        let decision = record(&item).map_err(|message| StoreError::Record { id, message })?;
        tx.execute(
            "UPDATE queue SET status = ?1, note = ?2, decided_at = ?3, remember = ?4, decision = ?5
             WHERE id = ?6",
            params![status, note, now, remember as i64, decision.to_string(), id],
        )
        .map_err(sq)?;
        let out = tx
            .query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )
            .map_err(sq)?;
        tx.commit().map_err(sq)?;
        Ok(out)
    }

    /// Remember a setting of the gateway that other processes need (the audit
    /// log `portcullis review` appends its decision records to).
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map(|_| ())
        })
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            c.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()
        })
    }

    /// An approved, not yet used call item for exactly this call: marks it used
    /// and returns it (one approval lets one call through).
    pub fn take_call_approval(
        &self,
        server: &str,
        name: &str,
        fingerprint: &str,
    ) -> Result<Option<QueueItem>, StoreError> {
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let found = tx
                .query_row(
                    &format!(
                        "SELECT {ITEM_COLUMNS} FROM queue WHERE kind = 'call' AND server = ?1
                         AND name = ?2 AND fingerprint = ?3 AND status = 'approved' AND used = 0
                         ORDER BY id LIMIT 1"
                    ),
                    params![server, name, fingerprint],
                    item_of,
                )
                .optional()?;
            if let Some(i) = &found {
                tx.execute(
                    "UPDATE queue SET used = used + 1 WHERE id = ?1",
                    params![i.id],
                )?;
            }
            tx.commit()?;
            Ok(found)
        })
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
        self.with(|c| {
            c.query_row(
                "SELECT 1 FROM allow WHERE kind = ?1 AND server = ?2 AND name = ?3
                 AND (key = ?4 OR key = '*')",
                params![format!("{list}:{kind}"), server, name, key],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
        })
    }
}

impl Store {
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
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                // One upsert per label. A sensitive row keeps its label (and stays
                // value-less) when a non-sensitive one of the same value comes: the
                // upsert changes nothing then, and only its `seen` moves.
                let mut put = tx.prepare_cached(
                    "INSERT INTO taint
                     (digest, value, hint, server, tool, record_id, sensitive, source, seen)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                     ON CONFLICT (digest) DO UPDATE SET
                       value = excluded.value, hint = excluded.hint,
                       server = excluded.server, tool = excluded.tool,
                       record_id = excluded.record_id, sensitive = excluded.sensitive,
                       source = excluded.source, seen = excluded.seen
                     WHERE NOT (taint.sensitive = 1 AND excluded.sensitive = 0)",
                )?;
                let mut touch =
                    tx.prepare_cached("UPDATE taint SET seen = ?1 WHERE digest = ?2")?;
                for (value, l) in labels {
                    let digest = portcullis_core::sha256_hex(value.as_bytes());
                    let changed = put.execute(params![
                        digest,
                        (!l.sensitive).then_some(value.as_str()),
                        crate::taint::hint(value),
                        l.server,
                        l.tool,
                        l.record_id,
                        l.sensitive as i64,
                        l.source,
                        seen as i64
                    ])?;
                    if changed == 0 {
                        touch.execute(params![seen as i64, digest])?;
                    }
                }
            }
            if expire_before > 0 {
                tx.execute(
                    "DELETE FROM taint WHERE seen < ?1",
                    params![expire_before as i64],
                )?;
            }
            // Drop rows beyond `max` (a count, then only what is over: cheap in
            // the common case of nothing to drop) as the in-memory store does
            // (`TaintStore::trim`): from the server holding the most rows, down
            // to the next largest holder at most per round, its non-sensitive
            // rows first and oldest first, so a server's flood drops its own
            // labels, never another server's share.
            let rows: i64 = tx.query_row("SELECT count(*) FROM taint", [], |r| r.get(0))?;
            let mut over = rows - max as i64;
            while over > 0 {
                let holders: Vec<(String, i64)> = {
                    let mut st = tx.prepare_cached(
                        "SELECT server, count(*) AS n FROM taint GROUP BY server
                         ORDER BY n DESC, server ASC LIMIT 2",
                    )?;
                    let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                    it.collect::<rusqlite::Result<_>>()?
                };
                let Some((server, n)) = holders.first().cloned() else {
                    break;
                };
                let next = holders.get(1).map_or(0, |h| h.1);
                let k = over.min((n - next).max(1));
                let gone = tx.execute(
                    "DELETE FROM taint WHERE rowid IN
                     (SELECT rowid FROM taint WHERE server = ?1
                      ORDER BY sensitive ASC, seen ASC, rowid ASC LIMIT ?2)",
                    params![server, k],
                )?;
                if gone == 0 {
                    break;
                }
                over -= gone as i64;
            }
            tx.commit()
        })
    }

    /// The newest `max` taint labels last seen at or after `expire_before`
    /// (0 = any), oldest first.
    pub fn taint_labels(
        &self,
        max: usize,
        expire_before: u64,
    ) -> Result<Vec<StoredLabel>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT digest, value, hint, server, tool, record_id, sensitive, source, seen
                 FROM taint WHERE seen >= ?1 ORDER BY seen DESC, rowid DESC LIMIT ?2",
            )?;
            let rows = st.query_map(params![expire_before as i64, max as i64], |r| {
                Ok(StoredLabel {
                    digest: r.get(0)?,
                    value: r.get(1)?,
                    hint: r.get(2)?,
                    label: crate::taint::Label {
                        server: r.get(3)?,
                        tool: r.get(4)?,
                        record_id: r.get(5)?,
                        sensitive: r.get::<_, i64>(6)? != 0,
                        source: crate::taint::source_of(&r.get::<_, String>(7)?),
                    },
                    seen: u64::try_from(r.get::<_, i64>(8)?).unwrap_or(0),
                })
            })?;
            let mut out: Vec<StoredLabel> = rows.collect::<rusqlite::Result<_>>()?;
            out.reverse();
            Ok(out)
        })
    }
}

fn pin_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Pin> {
    Ok(Pin {
        server: row.get(0)?,
        kind: row.get(1)?,
        name: row.get(2)?,
        hash: row.get(3)?,
        definition: json_col(row.get(4)?),
        pinned_at: row.get(5)?,
        launch: row.get(6)?,
    })
}

fn upsert_pin(
    c: &Connection,
    server: &str,
    kind: &str,
    name: &str,
    hash: &str,
    definition: &Value,
    launch: Option<&str>,
) -> rusqlite::Result<usize> {
    c.execute(
        "INSERT INTO pins (server, kind, name, hash, definition, pinned_at, launch)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (server, kind, name) DO UPDATE SET hash = excluded.hash,
           definition = excluded.definition, pinned_at = excluded.pinned_at,
           launch = excluded.launch",
        params![
            server,
            kind,
            name,
            hash,
            definition.to_string(),
            portcullis_core::now_rfc3339(),
            launch
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
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

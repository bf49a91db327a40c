//! The embedded backend: one SQLite file (WAL, `synchronous = FULL`), one
//! connection per [`super::Store`]. SQLite serializes writers across processes;
//! every read-then-write is an `IMMEDIATE` transaction, so it takes the write
//! lock before it reads.

use super::{
    json_col, trim_round, Backend, Decision, NewItem, Pin, PinWrite, QueueItem, RecordFn,
    StoreError, StoredLabel, TaintRow, PENDING, SCHEMA_VERSION,
};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

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
            .unwrap_or(serde_json::Value::Null),
    })
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

fn upsert_pin(c: &Connection, p: PinWrite<'_>) -> rusqlite::Result<usize> {
    c.execute(
        "INSERT INTO pins (server, kind, name, hash, definition, pinned_at, launch)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (server, kind, name) DO UPDATE SET hash = excluded.hash,
           definition = excluded.definition, pinned_at = excluded.pinned_at,
           launch = excluded.launch",
        params![
            p.server,
            p.kind,
            p.name,
            p.hash,
            p.definition.to_string(),
            portcullis_core::now_rfc3339(),
            p.launch
        ],
    )
}

const PIN_COLUMNS: &str = "server, kind, name, hash, definition, pinned_at, launch";

pub(crate) struct SqliteBackend {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl SqliteBackend {
    pub(crate) fn open(path: &Path) -> Result<SqliteBackend, StoreError> {
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
                at: path.display().to_string(),
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
        Ok(SqliteBackend {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    fn sq(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn).map_err(self.sq())
    }
}

impl Backend for SqliteBackend {
    fn pin(&self, server: &str, kind: &str, name: &str) -> Result<Option<Pin>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!(
                    "SELECT {PIN_COLUMNS} FROM pins WHERE server = ?1 AND kind = ?2 AND name = ?3"
                ),
                params![server, kind, name],
                pin_of,
            )
            .optional()
        })
    }

    fn pins(&self, server: &str, kind: &str) -> Result<Vec<Pin>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {PIN_COLUMNS} FROM pins WHERE server = ?1 AND kind = ?2 ORDER BY name"
            ))?;
            let rows = st.query_map(params![server, kind], pin_of)?;
            rows.collect()
        })
    }

    fn set_pin(&self, p: PinWrite<'_>) -> Result<(), StoreError> {
        self.with(|c| upsert_pin(c, p).map(|_| ()))
    }

    fn pin_first(&self, p: PinWrite<'_>) -> Result<Option<Pin>, StoreError> {
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let existing = tx
                .query_row(
                    &format!(
                        "SELECT {PIN_COLUMNS} FROM pins WHERE server = ?1 AND kind = ?2 AND name = ?3"
                    ),
                    params![p.server, p.kind, p.name],
                    pin_of,
                )
                .optional()?;
            if existing.is_none() {
                upsert_pin(&tx, p)?;
            }
            tx.commit()?;
            Ok(existing)
        })
    }

    fn set_pin_launch(
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

    fn record_launch(
        &self,
        server: &str,
        hash: &str,
        launch: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
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
                params![server, hash, launch, now],
            )?;
            tx.commit()?;
            Ok(last)
        })
    }

    fn launch(&self, server: &str, hash: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT launch FROM launches WHERE server = ?1 AND hash = ?2",
                params![server, hash],
                |r| r.get::<_, String>(0),
            )
            .optional()
        })
    }

    fn enqueue(&self, item: &NewItem) -> Result<(QueueItem, bool), StoreError> {
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

    fn item(&self, id: i64) -> Result<Option<QueueItem>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )
            .optional()
        })
    }

    fn latest(
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

    fn pending_count(&self) -> Result<usize, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM queue WHERE status = 'pending'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| usize::try_from(n).unwrap_or(0))
    }

    fn list(&self, all: bool) -> Result<Vec<QueueItem>, StoreError> {
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

    fn decide(
        &self,
        id: i64,
        plan: &mut (dyn FnMut(&QueueItem) -> Result<Decision, StoreError> + Send),
        record: &mut RecordFn<'_>,
    ) -> Result<QueueItem, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let sq = self.sq();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sq)?;
        let item = tx
            .query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )
            .optional()
            .map_err(&sq)?
            .ok_or(StoreError::NoItem(id))?;
        if item.status != PENDING {
            return Err(StoreError::Decided {
                id,
                status: item.status,
            });
        }
        let d = plan(&item)?;
        if let Some((kind, hash, def, launch)) = &d.pin {
            upsert_pin(
                &tx,
                PinWrite {
                    server: &item.server,
                    kind,
                    name: &item.name,
                    hash,
                    definition: def,
                    launch: launch.as_deref(),
                },
            )
            .map_err(&sq)?;
        }
        for (list, key) in &d.allow {
            tx.execute(
                "INSERT OR REPLACE INTO allow (kind, server, name, key, note, created, queue_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![list, item.server, item.name, key, d.note, d.now, id],
            )
            .map_err(&sq)?;
        }
        let decision = record(&item)?;
        tx.execute(
            "UPDATE queue SET status = ?1, note = ?2, decided_at = ?3, remember = ?4, decision = ?5
             WHERE id = ?6",
            params![
                d.status,
                d.note,
                d.now,
                d.remember as i64,
                decision.to_string(),
                id
            ],
        )
        .map_err(&sq)?;
        let out = tx
            .query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM queue WHERE id = ?1"),
                params![id],
                item_of,
            )
            .map_err(&sq)?;
        tx.commit().map_err(&sq)?;
        Ok(out)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map(|_| ())
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            c.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()
        })
    }

    fn take_call_approval(
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

    fn remembered(
        &self,
        list_kind: &str,
        server: &str,
        name: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT 1 FROM allow WHERE kind = ?1 AND server = ?2 AND name = ?3
                 AND (key = ?4 OR key = '*')",
                params![list_kind, server, name, key],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
        })
    }

    fn put_taint(
        &self,
        labels: &[TaintRow<'_>],
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
                for r in labels {
                    let l = r.label;
                    let changed = put.execute(params![
                        r.digest,
                        r.value,
                        r.hint,
                        l.server,
                        l.tool,
                        l.record_id,
                        l.sensitive as i64,
                        l.source,
                        seen as i64
                    ])?;
                    if changed == 0 {
                        touch.execute(params![seen as i64, r.digest])?;
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
            // the common case of nothing to drop), in rounds of `trim_round`.
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
                let Some((server, k)) = trim_round(over, &holders) else {
                    break;
                };
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

    fn taint_labels(&self, max: usize, expire_before: u64) -> Result<Vec<StoredLabel>, StoreError> {
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

    fn taint_since(&self, _cursor: i64) -> Result<Option<(Vec<StoredLabel>, i64)>, StoreError> {
        // A SQLite file belongs to the gateways of one machine, each loading
        // its labels at start; it is not refreshed per call.
        Ok(None)
    }
}

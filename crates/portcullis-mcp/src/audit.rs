//! The audit log: every decision record appended to a JSONL file, indexed in SQLite.
//!
//! Durability is the point. [`AuditLog::append`] returns only after the records are
//! written (and, with `fsync`, on disk); the gateway forwards a decision only after
//! that, so a crash never loses the record of a message that was forwarded. One
//! writer thread owns both files and commits in groups: concurrent callers share one
//! `fsync`, which keeps the per-call cost flat under load.
//!
//! Secrets are redacted before anything is written: every excerpt and reason is
//! passed through the egress guard's secret and PII detectors and masked.
//!
//! The gateway is not the only writer: `portcullis review` appends the decision
//! records of human approvals and denials to the same log. Each group is appended
//! under an exclusive OS lock on the log file, so writers in different processes
//! take turns and the offsets the index records are exact.

use portcullis_core::{DecisionRecord, EgressConfig};
use portcullis_detect::guard::EgressGuard;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit log {path}: {source} (check the directory exists and is writable, or give --audit-log FILE)")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "audit index {path}: {source} (the SQLite index beside the log: check it is writable)"
    )]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("audit guard: {0}")]
    Guard(String),
    #[error("audit writer stopped: {0}")]
    Stopped(String),
}

/// Where and how records are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The JSONL log (appended; never truncated).
    pub log: PathBuf,
    /// The SQLite index beside it; absent = `<log>.sqlite`.
    #[serde(default)]
    pub index: Option<PathBuf>,
    /// `fsync` the log before a decision is forwarded (default true). Off, a crash
    /// of the machine (not of the gateway) can lose the last records.
    #[serde(default = "yes")]
    pub fsync: bool,
}

fn yes() -> bool {
    true
}

impl AuditConfig {
    pub fn at(log: impl Into<PathBuf>) -> AuditConfig {
        AuditConfig {
            log: log.into(),
            index: None,
            fsync: true,
        }
    }

    pub fn index_path(&self) -> PathBuf {
        self.index.clone().unwrap_or_else(|| {
            let mut p = self.log.clone().into_os_string();
            p.push(".sqlite");
            PathBuf::from(p)
        })
    }
}

type Ack = tokio::sync::oneshot::Sender<Result<(), String>>;

struct Batch {
    records: Vec<DecisionRecord>,
    ack: Ack,
}

/// Handle to the writer thread; cheap to share behind an `Arc`.
pub struct AuditLog {
    tx: Option<mpsc::Sender<Batch>>,
    thread: Option<JoinHandle<()>>,
    config: AuditConfig,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("config", &self.config)
            .finish()
    }
}

struct Writer {
    log: File,
    log_path: PathBuf,
    db: Connection,
    db_path: PathBuf,
    fsync: bool,
    guard: EgressGuard,
}

impl AuditLog {
    /// Open (or create) the log and its index and start the writer. `egress` gives
    /// the canaries and secret settings used for redaction.
    pub fn open(config: AuditConfig, egress: &EgressConfig) -> Result<AuditLog, AuditError> {
        let log_path = config.log.clone();
        let io = |source| AuditError::Io {
            path: log_path.clone(),
            source,
        };
        if let Some(dir) = log_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io)?;
        let db_path = config.index_path();
        let db = open_index(&db_path)?;
        let guard = EgressGuard::new(egress).map_err(|e| AuditError::Guard(e.to_string()))?;
        let mut writer = Writer {
            log: file,
            log_path,
            db,
            db_path,
            fsync: config.fsync,
            guard,
        };
        let (tx, rx) = mpsc::channel::<Batch>();
        let thread = std::thread::Builder::new()
            .name("portcullis-audit".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| AuditError::Io {
                path: config.log.clone(),
                source,
            })?;
        Ok(AuditLog {
            tx: Some(tx),
            thread: Some(thread),
            config,
        })
    }

    pub fn config(&self) -> &AuditConfig {
        &self.config
    }

    /// Append records; returns once they are durable (per `fsync`).
    pub async fn append(&self, records: Vec<DecisionRecord>) -> Result<(), AuditError> {
        if records.is_empty() {
            return Ok(());
        }
        let (ack, done) = tokio::sync::oneshot::channel();
        self.tx
            .as_ref()
            .ok_or_else(|| AuditError::Stopped("closed".into()))?
            .send(Batch { records, ack })
            .map_err(|_| AuditError::Stopped("writer thread gone".into()))?;
        done.await
            .map_err(|_| AuditError::Stopped("writer thread gone".into()))?
            .map_err(AuditError::Stopped)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        // Closing the channel ends the writer after it has drained every batch.
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn open_index(path: &Path) -> Result<Connection, AuditError> {
    let sq = |source| AuditError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let db = Connection::open(path).map_err(sq)?;
    // Another process (`portcullis review`) may be writing its index rows.
    db.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(sq)?;
    db.execute_batch(
        "PRAGMA journal_mode=WAL;
         PRAGMA synchronous=NORMAL;
         CREATE TABLE IF NOT EXISTS records (
             id TEXT PRIMARY KEY,
             time TEXT NOT NULL,
             channel TEXT NOT NULL,
             server TEXT,
             tool TEXT,
             status TEXT NOT NULL,
             action TEXT NOT NULL,
             score REAL NOT NULL,
             log_offset INTEGER NOT NULL,
             log_len INTEGER NOT NULL
         );
         CREATE INDEX IF NOT EXISTS records_status ON records(status);
         CREATE INDEX IF NOT EXISTS records_server_tool ON records(server, tool);",
    )
    .map_err(sq)?;
    Ok(db)
}

/// A written record and where its line is in the log.
type IndexRow = (DecisionRecord, u64, u64);

impl Writer {
    fn run(&mut self, rx: mpsc::Receiver<Batch>) {
        let mut index_failure: Option<String> = None;
        while let Ok(first) = rx.recv() {
            // Group commit: everything queued now shares one flush and fsync.
            let mut group = vec![first];
            while let Ok(more) = rx.try_recv() {
                group.push(more);
                if group.len() >= 256 {
                    break;
                }
            }
            // The log is the record of truth: decisions are released once it is
            // durable. The index is derived from it and written after the release;
            // if that fails, every later decision fails closed.
            let outcome = match &index_failure {
                Some(e) => Err(format!("audit index write failed earlier: {e}")),
                None => self.write_log(&group).map_err(|e| e.to_string()),
            };
            if let Err(e) = &outcome {
                tracing::error!(error = %e, "audit write failed; decisions are not forwarded");
            }
            let rows = match outcome {
                Ok(rows) => {
                    for b in group {
                        let _ = b.ack.send(Ok(()));
                    }
                    rows
                }
                Err(e) => {
                    for b in group {
                        let _ = b.ack.send(Err(e.clone()));
                    }
                    continue;
                }
            };
            if let Err(e) = self.write_index(&rows) {
                tracing::error!(error = %e, "audit index write failed; later decisions fail closed");
                index_failure = Some(e.to_string());
            }
        }
    }

    /// Append a group's records to the log (flushed, and synced per `fsync`); the
    /// rows for the index.
    fn write_log(&mut self, group: &[Batch]) -> Result<Vec<IndexRow>, AuditError> {
        let io = |path: &Path, source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Lines and their offsets relative to the start of this group.
        let mut buf = Vec::new();
        let mut rows = Vec::new();
        for b in group {
            for r in &b.records {
                let redacted = redact(r, &self.guard);
                let mut line = serde_json::to_vec(&redacted)
                    .map_err(|e| AuditError::Stopped(format!("serialize record: {e}")))?;
                line.push(b'\n');
                rows.push((redacted, buf.len() as u64, line.len() as u64));
                buf.extend_from_slice(&line);
            }
        }
        // Another process may append too: while the lock is held the log's length
        // is where these lines land, and no other line interleaves with them.
        self.log.lock().map_err(|e| io(&self.log_path, e))?;
        let written = (|| {
            let base = self.log.metadata()?.len();
            self.log.write_all(&buf)?;
            if self.fsync {
                self.log.sync_data()?;
            }
            Ok(base)
        })();
        let unlocked = self.log.unlock();
        let base = written.map_err(|e| io(&self.log_path, e))?;
        unlocked.map_err(|e| io(&self.log_path, e))?;
        for row in &mut rows {
            row.1 += base;
        }
        Ok(rows)
    }

    fn write_index(&mut self, rows: &[IndexRow]) -> Result<(), AuditError> {
        let sq = |source| AuditError::Sqlite {
            path: self.db_path.clone(),
            source,
        };
        let tx = self.db.transaction().map_err(sq)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO records
                     (id, time, channel, server, tool, status, action, score, log_offset, log_len)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .map_err(sq)?;
            for (r, off, len) in rows {
                stmt.execute(params![
                    r.id,
                    r.time,
                    r.channel.as_str(),
                    r.server,
                    r.tool,
                    r.status.as_str(),
                    serde_json::to_value(r.action)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    r.score,
                    *off as i64,
                    *len as i64,
                ])
                .map_err(sq)?;
            }
        }
        tx.commit().map_err(sq)?;
        Ok(())
    }
}

/// A copy of the record with secrets and PII masked in every excerpt and reason.
pub fn redact(record: &DecisionRecord, guard: &EgressGuard) -> DecisionRecord {
    let clean = |s: &str| -> String {
        let found = guard.scan(s);
        if found.is_empty() {
            s.to_string()
        } else {
            EgressGuard::mask(s, &found, true, true)
        }
    };
    let mut r = record.clone();
    for stage in &mut r.stages {
        for f in &mut stage.findings {
            f.excerpt = clean(&f.excerpt);
            // A path names object keys, and a key can be a secret.
            f.path = f.path.as_deref().map(clean);
        }
    }
    for reason in &mut r.reasons {
        *reason = clean(reason);
    }
    r
}

/// Look a record up by id through the index (reads the line from the log).
pub fn find_record(config: &AuditConfig, id: &str) -> Result<Option<DecisionRecord>, AuditError> {
    let db_path = config.index_path();
    let db = open_index(&db_path)?;
    let row: Option<(i64, i64)> = db
        .query_row(
            "SELECT log_offset, log_len FROM records WHERE id = ?1",
            params![id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(AuditError::Sqlite {
                path: db_path.clone(),
                source: e,
            }),
        })?;
    let io = |source| AuditError::Io {
        path: config.log.clone(),
        source,
    };
    let Some((off, len)) = row else {
        // Not (yet) in the index, which is written just after the log: scan the log.
        return scan_log(config, id);
    };
    let mut f = File::open(&config.log).map_err(io)?;
    f.seek(SeekFrom::Start(off as u64)).map_err(io)?;
    let mut buf = vec![0u8; len as usize];
    std::io::Read::read_exact(&mut f, &mut buf).map_err(io)?;
    serde_json::from_slice(&buf)
        .map(Some)
        .map_err(|e| AuditError::Stopped(format!("record {id} in the log is not valid JSON: {e}")))
}

/// The record `id` found by reading the log line by line (the index's fallback).
fn scan_log(config: &AuditConfig, id: &str) -> Result<Option<DecisionRecord>, AuditError> {
    let io = |source| AuditError::Io {
        path: config.log.clone(),
        source,
    };
    let file = match File::open(&config.log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let needle = format!("\"id\":{}", serde_json::Value::String(id.to_string()));
    for line in std::io::BufRead::lines(std::io::BufReader::new(file)) {
        let line = line.map_err(io)?;
        if !line.contains(&needle) {
            continue;
        }
        if let Ok(record) = serde_json::from_str::<DecisionRecord>(&line) {
            if record.id == id {
                return Ok(Some(record));
            }
        }
    }
    Ok(None)
}

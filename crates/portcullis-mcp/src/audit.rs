//! The audit log: every decision record appended to a JSONL file, indexed in SQLite.
//!
//! Durability is the point. [`AuditLog::append`] returns only after the records are
//! written to the log (write(2)); the gateway forwards a decision only after that,
//! so a crash or kill -9 of the gateway never loses the record of a message that
//! was forwarded. When the records reach the disk is [`Durability`]: by default
//! (`group`) the writer `fsync`s at most [`AuditConfig::sync_interval_ms`] after
//! the first unsynced write, so a power loss or kernel crash can lose at most that
//! window of records; `fsync` syncs every group before its decisions are released.
//! In `group` and `none` the caller writes its records itself and a writer thread
//! syncs and indexes them; in `fsync` the writer thread also writes, in groups:
//! concurrent callers share one write and one `fsync`, which keeps the per-call
//! cost flat under load.
//!
//! Secrets are redacted before anything is written: every text of a record
//! (finding excerpts, the embedding stage's evidence excerpt, reasons, the review
//! model's verbatim output and error) is passed through the egress guard's secret
//! and PII detectors and masked.
//!
//! The gateway is not the only writer: `portcullis review` appends the decision
//! records of human approvals and denials to the same log. Every write is made
//! under an exclusive OS lock on the log file, so writers in different processes
//! take turns and the offsets the index records are exact.

use portcullis_core::{DecisionRecord, EgressConfig};
use portcullis_detect::guard::EgressGuard;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
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
    #[error("{0}")]
    Config(String),
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
    /// When records reach the disk (see [`Durability`]; absent = `group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
    /// `group`: the longest a written record waits for its `fsync`, in
    /// milliseconds (default 50, at most 1000); in every mode, the longest it
    /// waits for the index.
    #[serde(default = "default_sync_interval")]
    pub sync_interval_ms: u64,
    /// The older spelling: `fsync = true` is `durability = "fsync"`, `fsync =
    /// false` is `durability = "none"`. Giving both is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsync: Option<bool>,
}

/// When the audit log's records reach the disk. Every mode writes a decision's
/// record (write(2)) before the decision is forwarded, which survives a crash or
/// kill -9 of the gateway; the modes differ in what a power loss or kernel crash
/// can lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// `fsync` within `sync_interval_ms` of the first unsynced write: a power
    /// loss loses at most that window of records (whose messages may already
    /// have been forwarded).
    #[default]
    Group,
    /// `fsync` before the decisions of a group are released: a power loss loses
    /// no record of a forwarded message. Costs a disk flush per group.
    Fsync,
    /// Never `fsync` (the OS writes back when it likes, typically within 30 s).
    None,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Group => "group",
            Durability::Fsync => "fsync",
            Durability::None => "none",
        }
    }
}

fn default_sync_interval() -> u64 {
    50
}

/// The largest accepted `sync_interval_ms`.
pub const MAX_SYNC_INTERVAL_MS: u64 = 1000;

impl AuditConfig {
    pub fn at(log: impl Into<PathBuf>) -> AuditConfig {
        AuditConfig {
            log: log.into(),
            index: None,
            durability: None,
            sync_interval_ms: default_sync_interval(),
            fsync: None,
        }
    }

    /// The durability in force, the older `fsync` spelling folded in; an error
    /// names the conflicting options.
    pub fn effective_durability(&self) -> Result<Durability, String> {
        if !(1..=MAX_SYNC_INTERVAL_MS).contains(&self.sync_interval_ms) {
            return Err(format!(
                "[audit] sync_interval_ms = {} is out of range: give 1 to {MAX_SYNC_INTERVAL_MS} (milliseconds)",
                self.sync_interval_ms
            ));
        }
        let legacy = self.fsync.map(|f| {
            if f {
                Durability::Fsync
            } else {
                Durability::None
            }
        });
        match (self.durability, legacy) {
            (Some(d), Some(l)) if d != l => Err(format!(
                "[audit] fsync = {} and durability = \"{}\" disagree: keep only durability (\"group\", \"fsync\" or \"none\")",
                self.fsync.unwrap_or_default(),
                d.as_str()
            )),
            (Some(d), _) | (None, Some(d)) => Ok(d),
            (None, None) => Ok(Durability::default()),
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

/// What the writer thread is given.
enum Job {
    /// `fsync`: records to write, sync and acknowledge as one group.
    Write(Batch),
    /// `group` and `none`: records the caller has already written; the thread
    /// indexes them and (`group`) syncs them within the interval.
    Written(Vec<IndexRow>),
}

/// Handle to the writer thread; cheap to share behind an `Arc`.
pub struct AuditLog {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// The log, shared with the writer thread.
    appender: Arc<Appender>,
    durability: Durability,
    config: AuditConfig,
    /// Counts every acknowledged record (the gateway's; `None` elsewhere).
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("config", &self.config)
            .finish()
    }
}

/// The JSONL log, appended to by the callers (`group`, `none`) or the writer
/// thread (`fsync`).
struct Appender {
    log: Mutex<File>,
    log_path: PathBuf,
    guard: EgressGuard,
    /// The first failure of a sync or of the index: every later append fails
    /// with it (closed, not open). A failed write fails its own append only.
    failure: Mutex<Option<String>>,
}

impl Appender {
    fn failed(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn fail(&self, e: String) {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(e);
    }

    /// The redacted records as lines, and each line's place relative to the
    /// start of the buffer.
    fn lines<'a>(
        &self,
        records: impl Iterator<Item = &'a DecisionRecord>,
    ) -> Result<(Vec<u8>, Vec<IndexRow>), AuditError> {
        let mut buf = Vec::new();
        let mut rows = Vec::new();
        for r in records {
            let redacted = redact(r, &self.guard);
            let at = buf.len();
            serde_json::to_writer(&mut buf, &redacted)
                .map_err(|e| AuditError::Stopped(format!("serialize record: {e}")))?;
            buf.push(b'\n');
            rows.push((redacted, at as u64, (buf.len() - at) as u64));
        }
        Ok((buf, rows))
    }

    /// Append the lines (synced when `sync`); the rows' offsets made absolute.
    fn append(&self, buf: &[u8], rows: &mut [IndexRow], sync: bool) -> Result<(), AuditError> {
        let io = |source| AuditError::Io {
            path: self.log_path.clone(),
            source,
        };
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        // Another process may append too: while the lock is held the log's length
        // is where these lines land, and no other line interleaves with them.
        log.lock().map_err(io)?;
        let written = (|| {
            let base = log.metadata()?.len();
            (&*log).write_all(buf)?;
            if sync {
                log.sync_data()?;
            }
            Ok(base)
        })();
        let unlocked = log.unlock();
        let base = written.map_err(io)?;
        unlocked.map_err(io)?;
        for row in rows {
            row.1 += base;
        }
        Ok(())
    }
}

struct Writer {
    appender: Arc<Appender>,
    /// The log again, for `group`'s syncs: taken without the appender's lock,
    /// so that appends go on while the disk flushes.
    sync_handle: File,
    db: Connection,
    db_path: PathBuf,
    durability: Durability,
    sync_interval: std::time::Duration,
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
        let durability = config.effective_durability().map_err(AuditError::Config)?;
        let sync_handle = file.try_clone().map_err(io)?;
        let appender = Arc::new(Appender {
            log: Mutex::new(file),
            log_path,
            guard,
            failure: Mutex::new(None),
        });
        let mut writer = Writer {
            appender: Arc::clone(&appender),
            sync_handle,
            db,
            db_path,
            durability,
            sync_interval: std::time::Duration::from_millis(config.sync_interval_ms),
        };
        let (tx, rx) = mpsc::channel::<Job>();
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
            appender,
            durability,
            config,
            metrics: None,
        })
    }

    /// Count every record this log acknowledges in `metrics`.
    pub fn with_metrics(mut self, metrics: std::sync::Arc<crate::metrics::Metrics>) -> AuditLog {
        self.metrics = Some(metrics);
        self
    }

    pub fn config(&self) -> &AuditConfig {
        &self.config
    }

    /// Append records; returns once they are written to the log (and, with
    /// `durability = "fsync"`, on disk).
    ///
    /// `group` and `none` write on the caller's thread (one write(2) of a few
    /// KiB under a lock) and leave the index and the sync to the writer thread:
    /// handing each record to that thread and waiting for it was measured at
    /// ~0.1 ms per record, two per tool call. `fsync` hands them over, so that
    /// concurrent decisions share one disk flush.
    pub async fn append(&self, records: Vec<DecisionRecord>) -> Result<(), AuditError> {
        if records.is_empty() {
            return Ok(());
        }
        let observed = self
            .metrics
            .as_ref()
            .map(|_| crate::metrics::Metrics::batch_of(&records));
        let start = std::time::Instant::now();
        let tx = self
            .tx
            .as_ref()
            .ok_or_else(|| AuditError::Stopped("closed".into()))?;
        if self.durability == Durability::Fsync {
            let (ack, done) = tokio::sync::oneshot::channel();
            tx.send(Job::Write(Batch { records, ack }))
                .map_err(|_| AuditError::Stopped("writer thread gone".into()))?;
            done.await
                .map_err(|_| AuditError::Stopped("writer thread gone".into()))?
                .map_err(AuditError::Stopped)?;
        } else {
            if let Some(e) = self.appender.failed() {
                return Err(AuditError::Stopped(format!(
                    "the audit log failed earlier: {e}"
                )));
            }
            let (buf, mut rows) = self.appender.lines(records.iter())?;
            if let Err(e) = self.appender.append(&buf, &mut rows, false) {
                tracing::error!(error = %e, "audit write failed; decisions are not forwarded");
                return Err(e);
            }
            tx.send(Job::Written(rows))
                .map_err(|_| AuditError::Stopped("writer thread gone".into()))?;
        }
        if let (Some(m), Some(batch)) = (&self.metrics, observed) {
            m.records_written(batch, start.elapsed());
        }
        Ok(())
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

/// Rows indexed at once at the latest, even before the window is up (bounds
/// the memory they hold under a flood).
const MAX_PENDING_ROWS: usize = 1024;

impl Writer {
    fn run(&mut self, rx: mpsc::Receiver<Job>) {
        // Rows written to the log and not yet in the index.
        let mut pending: Vec<IndexRow> = Vec::new();
        // When the oldest of them (and, in `group`, the oldest write not yet
        // synced) was made: both are done by this deadline.
        let mut due: Option<std::time::Instant> = None;
        loop {
            let first = match due {
                None => match rx.recv() {
                    Ok(b) => b,
                    Err(_) => break,
                },
                Some(since) => {
                    let left = (since + self.sync_interval)
                        .saturating_duration_since(std::time::Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(b) => b,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            due = None;
                            self.settle(&mut pending);
                            continue;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            // Group commit: everything queued now shares one write and one fsync.
            let mut batches = Vec::new();
            let mut take = |job| match job {
                Job::Write(b) => batches.push(b),
                Job::Written(r) => pending.extend(r),
            };
            take(first);
            let mut queued = 1;
            while let Ok(more) = rx.try_recv() {
                take(more);
                queued += 1;
                if queued >= 256 {
                    break;
                }
            }
            if !batches.is_empty() {
                // The log is the record of truth: decisions are released once it
                // is durable. The index is derived from it and written after the
                // release; if that fails, every later decision fails closed.
                match self.write_log(&batches) {
                    Ok(written) => {
                        for b in batches {
                            let _ = b.ack.send(Ok(()));
                        }
                        pending.extend(written);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "audit write failed; decisions are not forwarded");
                        for b in batches {
                            let _ = b.ack.send(Err(e.clone()));
                        }
                    }
                }
            }
            if pending.is_empty() {
                continue;
            }
            let since = *due.get_or_insert_with(std::time::Instant::now);
            // Under steady traffic the queue never runs dry: settle when the
            // window is up (or the rows pile up), not only when it is idle.
            if since.elapsed() >= self.sync_interval || pending.len() >= MAX_PENDING_ROWS {
                due = None;
                self.settle(&mut pending);
            }
        }
        if due.is_some() || !pending.is_empty() {
            self.settle(&mut pending);
        }
    }

    /// Once per window: `group` syncs what was written since the last sync, and
    /// the rows written since the last index transaction go in as one (an index
    /// transaction per group of records was a fifth of the gateway's CPU on
    /// small calls). A record is findable meanwhile: [`find_record`] reads the
    /// log when the index does not have it yet.
    fn settle(&mut self, pending: &mut Vec<IndexRow>) {
        if self.durability == Durability::Group {
            self.sync_window();
        }
        if pending.is_empty() {
            return;
        }
        if let Err(e) = self.write_index(pending) {
            tracing::error!(error = %e, "audit index write failed; later decisions fail closed");
            self.appender.fail(e.to_string());
        }
        pending.clear();
    }

    /// `group`: sync what was written since the last sync. A failed sync means
    /// records may not survive a power loss: later decisions fail closed.
    fn sync_window(&mut self) {
        if let Err(e) = self.sync_handle.sync_data() {
            let e = format!("fsync of {}: {e}", self.appender.log_path.display());
            tracing::error!(error = %e, "audit fsync failed; later decisions fail closed");
            self.appender.fail(e);
        }
    }

    /// `fsync`: append a group's records to the log and sync it; the rows for
    /// the index.
    fn write_log(&mut self, group: &[Batch]) -> Result<Vec<IndexRow>, String> {
        if let Some(e) = self.appender.failed() {
            return Err(format!("the audit log failed earlier: {e}"));
        }
        let (buf, mut rows) = self
            .appender
            .lines(group.iter().flat_map(|b| &b.records))
            .map_err(|e| e.to_string())?;
        self.appender
            .append(&buf, &mut rows, true)
            .map_err(|e| e.to_string())?;
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

/// A copy of the record with secrets and PII masked in every text it carries
/// ([`portcullis_detect::redact::redact_record`]: excerpts, evidence, reasons,
/// the review model's output).
pub fn redact(record: &DecisionRecord, guard: &EgressGuard) -> DecisionRecord {
    let mut r = record.clone();
    portcullis_detect::redact::redact_record(&mut r, guard);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn audit_toml(body: &str) -> AuditConfig {
        toml::from_str(&format!("log = \"a.jsonl\"\n{body}")).expect("an [audit] table")
    }

    #[test]
    fn durability_defaults_to_group_and_reads_the_older_fsync_spelling() {
        let d = |body: &str| audit_toml(body).effective_durability();
        assert_eq!(d(""), Ok(Durability::Group));
        assert_eq!(d("durability = \"fsync\""), Ok(Durability::Fsync));
        assert_eq!(d("durability = \"none\""), Ok(Durability::None));
        assert_eq!(d("fsync = true"), Ok(Durability::Fsync));
        assert_eq!(d("fsync = false"), Ok(Durability::None));
        assert_eq!(
            d("fsync = true\ndurability = \"fsync\""),
            Ok(Durability::Fsync)
        );
        let err = d("fsync = false\ndurability = \"group\"").unwrap_err();
        assert!(err.contains("disagree"), "{err}");
        let err = d("sync_interval_ms = 0").unwrap_err();
        assert!(err.contains("sync_interval_ms"), "{err}");
        assert!(d("sync_interval_ms = 5000").is_err());
        assert!(toml::from_str::<AuditConfig>("log = \"a\"\ndurability = \"sometimes\"").is_err());
    }

    fn record(id: &str) -> DecisionRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "position": 0, "time": "2026-12-02T00:00:00Z", "config_hash": "c",
            "channel": "tool_result", "server": "s", "tool": "t", "path": null,
            "input_sha256": "0", "input_len": 0, "stages": [], "score": 0.0,
            "thresholds": {"review": 0.5, "block": 0.9}, "status": "ALLOW",
            "action": "pass", "reasons": [], "latency_us": 0
        }))
        .expect("a decision record")
    }

    #[tokio::test]
    async fn every_mode_has_the_record_in_the_log_when_append_returns() {
        for mode in [Durability::Group, Durability::Fsync, Durability::None] {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = AuditConfig::at(dir.path().join("audit.jsonl"));
            cfg.durability = Some(mode);
            let log =
                AuditLog::open(cfg.clone(), &portcullis_core::Config::default().egress).unwrap();
            for i in 0..20 {
                let id = format!("{}-{i}", mode.as_str());
                log.append(vec![record(&id)]).await.unwrap();
                // Another reader (a crash dump, `portcullis audit`) sees it now.
                let text = std::fs::read_to_string(&cfg.log).unwrap();
                assert!(text.contains(&id), "{mode:?}: {id} not in the log");
            }
            drop(log);
            assert_eq!(
                std::fs::read_to_string(&cfg.log).unwrap().lines().count(),
                20
            );
        }
    }

    /// Callers write their own records in `group` and `none`: concurrent
    /// appends must neither interleave lines nor index a line at another's
    /// offset, in any mode.
    #[test]
    fn concurrent_appends_land_whole_and_the_index_finds_each() {
        for mode in [Durability::Group, Durability::Fsync, Durability::None] {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = AuditConfig::at(dir.path().join("audit.jsonl"));
            cfg.durability = Some(mode);
            let log = std::sync::Arc::new(
                AuditLog::open(cfg.clone(), &portcullis_core::Config::default().egress).unwrap(),
            );
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(4)
                .build()
                .unwrap();
            rt.block_on(async {
                let mut tasks = Vec::new();
                for t in 0..8 {
                    let log = std::sync::Arc::clone(&log);
                    tasks.push(tokio::spawn(async move {
                        for i in 0..40 {
                            // One record or two per append, as the gateway does.
                            let mut batch = vec![record(&format!("{t}-{i}-a"))];
                            if i % 2 == 0 {
                                batch.push(record(&format!("{t}-{i}-b")));
                            }
                            log.append(batch).await.unwrap();
                        }
                    }));
                }
                for task in tasks {
                    task.await.unwrap();
                }
            });
            // Dropping the last handle drains the writer: the index is complete.
            drop(rt);
            drop(std::sync::Arc::into_inner(log).expect("the only handle"));
            let text = std::fs::read_to_string(&cfg.log).unwrap();
            assert_eq!(text.lines().count(), 8 * 60, "{mode:?}");
            for line in text.lines() {
                serde_json::from_str::<DecisionRecord>(line)
                    .unwrap_or_else(|e| panic!("{mode:?}: a torn line {line:?}: {e}"));
            }
            let db = open_index(&cfg.index_path()).unwrap();
            let indexed: i64 = db
                .query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
                .unwrap();
            assert_eq!(indexed, 8 * 60, "{mode:?}");
            for t in 0..8 {
                for i in 0..40 {
                    let id = format!("{t}-{i}-a");
                    let found = find_record(&cfg, &id).unwrap();
                    assert_eq!(found.map(|r| r.id), Some(id), "{mode:?}");
                }
            }
        }
    }

    /// The index is written once per window: a record is found at once (from
    /// the log) and is in the index within the window, while the log stays open.
    #[tokio::test]
    async fn a_record_is_found_at_once_and_indexed_within_the_window() {
        for mode in [Durability::Group, Durability::Fsync, Durability::None] {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = AuditConfig::at(dir.path().join("audit.jsonl"));
            cfg.durability = Some(mode);
            cfg.sync_interval_ms = 20;
            let log =
                AuditLog::open(cfg.clone(), &portcullis_core::Config::default().egress).unwrap();
            log.append(vec![record("soon")]).await.unwrap();
            let found = find_record(&cfg, "soon").unwrap();
            assert_eq!(found.map(|r| r.id).as_deref(), Some("soon"), "{mode:?}");
            let indexed = || -> i64 {
                open_index(&cfg.index_path())
                    .unwrap()
                    .query_row("SELECT COUNT(*) FROM records WHERE id = 'soon'", [], |r| {
                        r.get(0)
                    })
                    .unwrap()
            };
            let start = std::time::Instant::now();
            while indexed() == 0 {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(10),
                    "{mode:?}: not indexed 10 s after a 20 ms window"
                );
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            drop(log);
        }
    }

    #[test]
    fn a_bad_interval_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = AuditConfig::at(dir.path().join("audit.jsonl"));
        cfg.sync_interval_ms = 0;
        let err = AuditLog::open(cfg, &portcullis_core::Config::default().egress).unwrap_err();
        assert!(err.to_string().contains("sync_interval_ms"), "{err}");
    }
}

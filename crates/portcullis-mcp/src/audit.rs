//! The audit log: every decision record appended to a JSONL file, indexed in SQLite.
//!
//! Durability is the point. [`AuditLog::append`] returns only after the records are
//! written to the log (write(2)); the gateway forwards a decision only after that,
//! so a crash or kill -9 of the gateway never loses the record of a message that
//! was forwarded. When the records reach the disk is [`Durability`]: by default
//! (`group`) the writer `fsync`s at most [`AuditConfig::sync_interval_ms`] after
//! the first unsynced write, so a power loss or kernel crash can lose at most that
//! window of records; `fsync` syncs every group before its decisions are released.
//! One writer thread owns both files and commits in groups: concurrent callers
//! share one write and one `fsync`, which keeps the per-call cost flat under load.
//!
//! Secrets are redacted before anything is written: every text of a record
//! (finding excerpts, the embedding stage's evidence excerpt, reasons, the review
//! model's verbatim output and error) is passed through the egress guard's secret
//! and PII detectors and masked.
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
    /// milliseconds (default 50, at most 1000).
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

/// Handle to the writer thread; cheap to share behind an `Arc`.
pub struct AuditLog {
    tx: Option<mpsc::Sender<Batch>>,
    thread: Option<JoinHandle<()>>,
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

struct Writer {
    log: File,
    log_path: PathBuf,
    db: Connection,
    db_path: PathBuf,
    durability: Durability,
    sync_interval: std::time::Duration,
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
        let durability = config.effective_durability().map_err(AuditError::Config)?;
        let mut writer = Writer {
            log: file,
            log_path,
            db,
            db_path,
            durability,
            sync_interval: std::time::Duration::from_millis(config.sync_interval_ms),
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
    pub async fn append(&self, records: Vec<DecisionRecord>) -> Result<(), AuditError> {
        if records.is_empty() {
            return Ok(());
        }
        let observed = self
            .metrics
            .as_ref()
            .map(|_| crate::metrics::Metrics::batch_of(&records));
        let start = std::time::Instant::now();
        let (ack, done) = tokio::sync::oneshot::channel();
        self.tx
            .as_ref()
            .ok_or_else(|| AuditError::Stopped("closed".into()))?
            .send(Batch { records, ack })
            .map_err(|_| AuditError::Stopped("writer thread gone".into()))?;
        done.await
            .map_err(|_| AuditError::Stopped("writer thread gone".into()))?
            .map_err(AuditError::Stopped)?;
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

impl Writer {
    fn run(&mut self, rx: mpsc::Receiver<Batch>) {
        let mut index_failure: Option<String> = None;
        // `group`: when the oldest write not yet synced was made.
        let mut unsynced: Option<std::time::Instant> = None;
        loop {
            let first = match unsynced {
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
                            unsynced = None;
                            self.sync_window(&mut index_failure);
                            continue;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
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
                Some(e) => Err(format!("the audit log failed earlier: {e}")),
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
                    if self.durability == Durability::Group {
                        let since = *unsynced.get_or_insert_with(std::time::Instant::now);
                        // Under steady traffic the queue never runs dry: sync
                        // when the window is up, not only when it is idle.
                        if since.elapsed() >= self.sync_interval {
                            unsynced = None;
                            self.sync_window(&mut index_failure);
                        }
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
        if unsynced.is_some() {
            self.sync_window(&mut index_failure);
        }
    }

    /// `group`: sync what was written since the last sync. A failed sync means
    /// records may not survive a power loss: later decisions fail closed.
    fn sync_window(&mut self, failure: &mut Option<String>) {
        if let Err(e) = self.log.sync_data() {
            let e = format!("fsync of {}: {e}", self.log_path.display());
            tracing::error!(error = %e, "audit fsync failed; later decisions fail closed");
            failure.get_or_insert(e);
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
            if self.durability == Durability::Fsync {
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

    #[test]
    fn a_bad_interval_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = AuditConfig::at(dir.path().join("audit.jsonl"));
        cfg.sync_interval_ms = 0;
        let err = AuditLog::open(cfg, &portcullis_core::Config::default().egress).unwrap_err();
        assert!(err.to_string().contains("sync_interval_ms"), "{err}");
    }
}

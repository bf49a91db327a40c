//! The state store opened from every schema a release has written: each
//! `fixtures/store/schema-vN.sql` is the schema as that commit created it (the
//! file names it), with the rows a gateway of the time wrote. Opened by this
//! code, nothing is lost and everything works; the version is stamped; a newer
//! store is refused untouched.

use portcullis_controls::launch::Launch;
use portcullis_controls::store::{kind, NewItem, Store, StoreError, SCHEMA_VERSION};
use portcullis_controls::taint::Label;
use rusqlite::Connection;
use serde_json::json;
use std::path::Path;

const SCHEMAS: [(i64, &str); 4] = [
    (1, include_str!("fixtures/store/schema-v1.sql")),
    (2, include_str!("fixtures/store/schema-v2.sql")),
    (3, include_str!("fixtures/store/schema-v3.sql")),
    (4, include_str!("fixtures/store/schema-v4.sql")),
];

/// A store as a release of schema `version` left it: a pin, a pending item, a
/// decided one, an allowlist entry, and the version's own tables' rows.
fn old_store(path: &Path, version: i64, schema: &str) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(schema).unwrap();
    let launch_col = if version >= 4 { ", launch" } else { "" };
    let launch_val = if version >= 4 { ", 'L1'" } else { "" };
    c.execute_batch(&format!(
        "INSERT INTO pins (server, kind, name, hash, definition, pinned_at{launch_col})
           VALUES ('kit', 'tool', 'read', 'h1', '{{\"name\":\"read\"}}', 'then'{launch_val});
         INSERT INTO queue (created, kind, server, name, fingerprint, status, record_id,
           summary, findings, diff, detail, allow_keys, record)
           VALUES ('then', 'definition', 'kit', 'read', 'h2', 'pending', 'r1', 'changed',
           '[]', '[]',
           '{{\"pin_kind\":\"tool\",\"hash\":\"h2\",\"definition\":{{\"name\":\"read\",\"description\":\"new\"}}}}',
           '[\"*\"]', '{{}}');
         INSERT INTO queue (created, kind, server, name, fingerprint, status, record_id,
           summary, findings, diff, detail, allow_keys, record, decided_at, note)
           VALUES ('then', 'call', 'kit', 'send', 'a1', 'denied', 'r2', 'held call',
           '[]', 'null', '{{}}', '[]', '{{}}', 'later', 'no');
         INSERT INTO allow (kind, server, name, key, note, created, queue_id)
           VALUES ('allow:call', 'kit', 'send', 'k', 'fine', 'then', NULL);"
    ))
    .unwrap();
    if version >= 2 {
        c.execute_batch("INSERT INTO meta VALUES ('audit_log', '/var/log/a.jsonl');")
            .unwrap();
    }
    if version >= 3 {
        c.execute_batch(
            "INSERT INTO taint VALUES ('d1', 'VALUE-1', 'VALU…', 'kit', 'read', 'r0', 0, 'result', 100);",
        )
        .unwrap();
    }
}

#[test]
fn every_released_schema_opens_and_keeps_its_rows() {
    for (version, schema) in SCHEMAS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("v{version}.sqlite"));
        old_store(&path, version, schema);
        let s = Store::open(&path).unwrap_or_else(|e| panic!("v{version}: {e}"));
        // What the old release wrote.
        let pin = s.pin("kit", "tool", "read").unwrap().expect("the pin");
        assert_eq!(pin.hash, "h1", "v{version}");
        assert_eq!(
            pin.launch.as_deref(),
            (version >= 4).then_some("L1"),
            "v{version}"
        );
        let pending = s.list(false).unwrap();
        assert_eq!(pending.len(), 1, "v{version}");
        assert_eq!(s.list(true).unwrap().len(), 2, "v{version}");
        assert!(
            s.remembered("allow", kind::CALL, "kit", "send", "k")
                .unwrap(),
            "v{version}: the allowlist entry"
        );
        if version >= 2 {
            assert_eq!(
                s.meta("audit_log").unwrap().as_deref(),
                Some("/var/log/a.jsonl")
            );
        }
        if version >= 3 {
            let labels = s.taint_labels(100, 0).unwrap();
            assert_eq!(labels.len(), 1, "v{version}");
            assert_eq!(labels[0].value.as_deref(), Some("VALUE-1"));
        }
        // And everything this release does, on it.
        let item = s
            .decide(pending[0].id, true, Some("ok"), false, |_| Ok(json!({})))
            .unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(item.status, "approved");
        let repinned = s.pin("kit", "tool", "read").unwrap().expect("re-pinned");
        assert_eq!(
            repinned.hash, "h2",
            "v{version}: approval re-pins the held version"
        );
        s.set_pin(
            "kit",
            "tool",
            "write",
            "h3",
            &json!({"name": "write"}),
            Some("L2"),
        )
        .unwrap();
        s.set_meta("k", "v").unwrap();
        let label = Label {
            server: "kit".into(),
            tool: "read".into(),
            record_id: "r9".into(),
            sensitive: false,
            source: "result",
        };
        s.put_taint(&[("VALUE-2".into(), label)], 200, 100, 0)
            .unwrap();
        let launch: Launch = serde_json::from_value(json!({"command": "kit-server"})).unwrap();
        assert_eq!(s.record_launch("kit", &launch).unwrap(), None);
        s.enqueue(NewItem {
            kind: kind::CALL.into(),
            server: "kit".into(),
            name: "send".into(),
            fingerprint: "a2".into(),
            ..NewItem::default()
        })
        .unwrap();
        drop(s);
        // Stamped, and opened again as it is.
        let c = Connection::open(&path).unwrap();
        let stamped: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stamped, SCHEMA_VERSION, "v{version}");
        drop(c);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.list(true).unwrap().len(), 3, "v{version}");
    }
}

#[test]
fn the_newest_fixture_is_the_schema_this_code_writes() {
    // A schema change without a new fixture (and version) fails here.
    let dir = tempfile::tempdir().unwrap();
    let (fresh, old) = (dir.path().join("fresh"), dir.path().join("old"));
    drop(Store::open(&fresh).unwrap());
    old_store(&old, 4, SCHEMAS[3].1);
    drop(Store::open(&old).unwrap());
    let shape = |p: &Path| {
        let c = Connection::open(p).unwrap();
        let mut st = c
            .prepare(
                "SELECT m.name, p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p
                 WHERE m.type = 'table' ORDER BY m.name, p.cid",
            )
            .unwrap();
        st.query_map([], |r| {
            Ok(format!(
                "{}.{} {}",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?
            ))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
    };
    assert_eq!(shape(&fresh), shape(&old));
    assert_eq!(SCHEMAS.last().map(|s| s.0), Some(SCHEMA_VERSION));
}

#[test]
fn a_store_from_a_newer_release_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(SCHEMAS[3].1).unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    match Store::open(&path) {
        Err(e @ StoreError::NewerSchema { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("newer release"), "{msg}");
            assert!(
                msg.contains(&format!("version {}", SCHEMA_VERSION + 1)),
                "{msg}"
            );
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "not written to");
    assert!(!dir.path().join("newer.sqlite-wal").exists());
}

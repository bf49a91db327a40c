//! The state store on a real PostgreSQL (a throw-away cluster per test file):
//! what the SQLite store does, it does; where several gateways race, exactly
//! one wins; a restarted server is reconnected to; while it is down every call
//! fails (the gateway's checks fail closed); a newer schema is refused.

use portcullis_controls::store::{kind, Location, NewItem, Store, StoreError, APPROVED};
use portcullis_controls::taint::Label;
use portcullis_testkit::pg::Cluster;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, OnceLock};

/// One cluster for the file; each test its own database.
fn cluster() -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    C.get_or_init(|| Cluster::start().unwrap_or_else(|e| panic!("{e}")))
}

fn fresh_db(name: &str) -> Location {
    Location::Postgres(cluster().create_db(name).unwrap_or_else(|e| panic!("{e}")))
}

fn item(kind: &str, fp: &str) -> NewItem {
    NewItem {
        kind: kind.into(),
        server: "kit".into(),
        name: "read".into(),
        fingerprint: fp.into(),
        detail: json!({"pin_kind": "tool", "hash": fp, "definition": {"name": "read", "v": fp}}),
        allow_keys: vec!["*".into()],
        ..NewItem::default()
    }
}

fn label(server: &str, sensitive: bool) -> Label {
    Label {
        server: server.into(),
        tool: "read".into(),
        record_id: "r".into(),
        sensitive,
        source: if sensitive { "guard" } else { "result" },
    }
}

/// The same calls on SQLite and on PostgreSQL give the same answers.
#[test]
fn both_backends_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    let backends = [
        Location::Sqlite(dir.path().join("s.sqlite")),
        fresh_db("alike"),
    ];
    let mut answers = Vec::new();
    for at in &backends {
        let s = Store::connect(at).unwrap();
        let mut out = Vec::new();
        s.set_pin(
            "kit",
            "tool",
            "read",
            "h1",
            &json!({"name": "read"}),
            Some("L1"),
        )
        .unwrap();
        out.push(json!(s
            .pin("kit", "tool", "read")
            .unwrap()
            .map(|p| (p.hash, p.launch))));
        out.push(json!(s
            .pin_first("kit", "tool", "read", "h9", &json!({}), None)
            .unwrap()
            .map(|p| p.hash)));
        out.push(json!(s
            .pin_first("kit", "tool", "write", "h2", &json!({}), None)
            .unwrap()
            .is_none()));
        out.push(json!(s.pins("kit", "tool").unwrap().len()));
        let (a, new_a) = s.enqueue(item(kind::DEFINITION, "h3")).unwrap();
        let (b, new_b) = s.enqueue(item(kind::DEFINITION, "h3")).unwrap();
        out.push(json!([
            new_a,
            new_b,
            a.id == b.id,
            s.pending_count().unwrap()
        ]));
        let done = s
            .decide(a.id, true, Some("fine"), true, |_| Ok(json!({"id": "rec"})))
            .unwrap();
        out.push(json!([
            done.status,
            done.note,
            done.decision,
            done.remember
        ]));
        out.push(json!(s.pin("kit", "tool", "read").unwrap().map(|p| p.hash)));
        out.push(json!(s
            .remembered("allow", kind::DEFINITION, "kit", "read", "x")
            .unwrap()));
        out.push(json!(matches!(
            s.decide(a.id, false, None, false, |_| Ok(Value::Null)),
            Err(StoreError::Decided { .. })
        )));
        out.push(json!(matches!(
            s.decide(4242, false, None, false, |_| Ok(Value::Null)),
            Err(StoreError::NoItem(4242))
        )));
        let (c, _) = s.enqueue(item(kind::CALL, "args")).unwrap();
        let failed = s.decide(c.id, true, None, true, |_| Err("disk full".into()));
        out.push(json!([
            matches!(failed, Err(StoreError::Record { .. })),
            s.item(c.id).unwrap().unwrap().status
        ]));
        s.decide(c.id, true, None, false, |_| Ok(Value::Null))
            .unwrap();
        out.push(json!([
            s.take_call_approval("kit", "read", "args")
                .unwrap()
                .is_some(),
            s.take_call_approval("kit", "read", "args")
                .unwrap()
                .is_some()
        ]));
        s.set_meta("audit_log", "/x").unwrap();
        s.set_meta("audit_log", "/y").unwrap();
        out.push(json!(s.meta("audit_log").unwrap()));
        s.put_taint(
            &[
                ("PLAIN-VALUE-1".into(), label("alpha", false)),
                ("SECRET-VALUE-2".into(), label("alpha", true)),
            ],
            100,
            10,
            0,
        )
        .unwrap();
        s.put_taint(
            &[("SECRET-VALUE-2".into(), label("beta", false))],
            200,
            10,
            0,
        )
        .unwrap();
        let labels = s.taint_labels(10, 0).unwrap();
        out.push(json!(labels
            .iter()
            .map(|l| (
                l.value.clone(),
                l.label.sensitive,
                l.label.server.clone(),
                l.seen
            ))
            .collect::<Vec<_>>()));
        let flood: Vec<(String, Label)> = (0..30)
            .map(|i| (format!("FLOOD-VALUE-{i:04}"), label("flood", false)))
            .collect();
        s.put_taint(&flood, 300, 10, 0).unwrap();
        let kept = s.taint_labels(100, 0).unwrap();
        out.push(json!([
            kept.len(),
            kept.iter().filter(|l| l.label.server == "alpha").count()
        ]));
        let launch = |arg: &str| {
            let none = Default::default();
            portcullis_controls::launch::Launch::new(
                Some("srv"),
                &[arg.to_string()],
                None,
                &none,
                None,
                &none,
            )
        };
        let (one, two) = (launch("--a"), launch("--b"));
        out.push(json!([
            s.record_launch("kit", &one).unwrap().is_none(),
            s.record_launch("kit", &two)
                .unwrap()
                .map(|(h, _)| h == one.hash()),
            s.launch("kit", &two.hash()).unwrap().is_some()
        ]));
        out.push(json!(s.list(true).unwrap().len()));
        answers.push(out);
    }
    assert_eq!(
        answers[0], answers[1],
        "SQLite (left) and PostgreSQL (right) differ"
    );
    // And the secret is only a digest in the database too.
    let s = Store::connect(&backends[1]).unwrap();
    assert!(s
        .taint_labels(100, 0)
        .unwrap()
        .iter()
        .all(|l| l.value.as_deref() != Some("SECRET-VALUE-2")));
}

/// Eight gateways see a new tool at once, each a different version: one pin
/// wins, and every other one is told which (so it holds its own as a change).
#[test]
fn first_use_pinning_has_one_winner() {
    let at = fresh_db("firstuse");
    let n = 8;
    let barrier = Barrier::new(n);
    let winners = AtomicUsize::new(0);
    let losers_saw: std::sync::Mutex<Vec<String>> = Default::default();
    std::thread::scope(|s| {
        for g in 0..n {
            let (at, barrier, winners, losers_saw) = (&at, &barrier, &winners, &losers_saw);
            s.spawn(move || {
                let store = Store::connect(at).unwrap();
                let hash = format!("h{g}");
                barrier.wait();
                match store
                    .pin_first("kit", "tool", "read", &hash, &json!({"v": g}), None)
                    .unwrap()
                {
                    None => {
                        winners.fetch_add(1, Ordering::SeqCst);
                    }
                    Some(p) => losers_saw.lock().unwrap().push(p.hash),
                }
            });
        }
    });
    assert_eq!(winners.load(Ordering::SeqCst), 1);
    let pinned = Store::connect(&at)
        .unwrap()
        .pin("kit", "tool", "read")
        .unwrap()
        .unwrap()
        .hash;
    let saw = losers_saw.into_inner().unwrap();
    assert_eq!(saw.len(), n - 1);
    assert!(saw.iter().all(|h| *h == pinned), "{saw:?} vs {pinned}");
}

/// The same hold filed by eight gateways at once is one pending item; two
/// reviewers deciding it at once: one decision, one record.
#[test]
fn one_item_per_hold_and_one_decision_per_item() {
    let at = fresh_db("queue");
    let n = 8;
    let barrier = Barrier::new(n);
    let ids: std::sync::Mutex<Vec<(i64, bool)>> = Default::default();
    std::thread::scope(|s| {
        for _ in 0..n {
            let (at, barrier, ids) = (&at, &barrier, &ids);
            s.spawn(move || {
                let store = Store::connect(at).unwrap();
                barrier.wait();
                let (i, new) = store.enqueue(item(kind::DEFINITION, "hx")).unwrap();
                ids.lock().unwrap().push((i.id, new));
            });
        }
    });
    let ids = ids.into_inner().unwrap();
    assert_eq!(ids.iter().filter(|(_, new)| *new).count(), 1, "{ids:?}");
    assert!(ids.iter().all(|(id, _)| *id == ids[0].0));
    let id = ids[0].0;
    let records = AtomicUsize::new(0);
    let barrier = Barrier::new(4);
    let outcomes: std::sync::Mutex<Vec<bool>> = Default::default();
    std::thread::scope(|s| {
        for r in 0..4 {
            let (at, barrier, records, outcomes) = (&at, &barrier, &records, &outcomes);
            s.spawn(move || {
                let store = Store::connect(at).unwrap();
                barrier.wait();
                let got = store.decide(id, r % 2 == 0, None, false, |_| {
                    records.fetch_add(1, Ordering::SeqCst);
                    // Hold the row a moment: the others must wait, not slip by.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Ok(json!({"by": r}))
                });
                match got {
                    Ok(_) => outcomes.lock().unwrap().push(true),
                    Err(StoreError::Decided { .. }) => outcomes.lock().unwrap().push(false),
                    Err(e) => panic!("{e}"),
                }
            });
        }
    });
    assert_eq!(records.load(Ordering::SeqCst), 1, "one record per decision");
    let outcomes = outcomes.into_inner().unwrap();
    assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 1, "{outcomes:?}");
}

/// One approval of a held call lets exactly one call through, whichever
/// gateway asks first.
#[test]
fn an_approved_call_is_taken_once_across_gateways() {
    let at = fresh_db("approval");
    let store = Store::connect(&at).unwrap();
    let (i, _) = store.enqueue(item(kind::CALL, "args")).unwrap();
    store
        .decide(i.id, true, None, false, |_| Ok(Value::Null))
        .unwrap();
    let n = 8;
    let barrier = Barrier::new(n);
    let taken = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..n {
            let (at, barrier, taken) = (&at, &barrier, &taken);
            s.spawn(move || {
                let store = Store::connect(at).unwrap();
                barrier.wait();
                if store
                    .take_call_approval("kit", "read", "args")
                    .unwrap()
                    .is_some()
                {
                    taken.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(taken.load(Ordering::SeqCst), 1);
    assert_eq!(store.item(i.id).unwrap().unwrap().status, APPROVED);
}

/// Labels written by two gateways at once are all read back, in revision
/// order, by a third following the cursor; nothing is seen twice or skipped.
#[test]
fn taint_labels_from_two_gateways_reach_a_third() {
    let at = fresh_db("taint");
    let reader = Store::connect(&at).unwrap();
    let (none, mut cursor) = reader.taint_since(0).unwrap().unwrap();
    assert!(none.is_empty());
    let per = 300;
    std::thread::scope(|s| {
        for g in ["alpha", "beta"] {
            let at = &at;
            s.spawn(move || {
                let store = Store::connect(at).unwrap();
                for i in 0..per {
                    store
                        .put_taint(
                            &[(format!("{g}-VALUE-{i:05}"), label(g, false))],
                            1,
                            100_000,
                            0,
                        )
                        .unwrap();
                }
            });
        }
        // Read while they write.
        let mut seen = std::collections::BTreeSet::new();
        let mut reads = 0;
        while seen.len() < 2 * per && reads < 100_000 {
            let (labels, next) = reader.taint_since(cursor).unwrap().unwrap();
            for l in labels {
                assert!(seen.insert(l.value.unwrap()), "a label read twice");
            }
            cursor = next;
            reads += 1;
        }
        assert_eq!(seen.len(), 2 * per, "after {reads} reads");
    });
    // SQLite stores are one gateway's: not followed.
    let dir = tempfile::tempdir().unwrap();
    let lite = Store::open(&dir.path().join("s.sqlite")).unwrap();
    assert!(lite.taint_since(0).unwrap().is_none());
}

/// The server restarted under a connected store: the next call reconnects;
/// while it is down, calls fail (with the URL, no password) instead of
/// answering "nothing pinned" or "nothing pending".
#[test]
fn a_restarted_server_is_reconnected_and_a_stopped_one_fails_closed() {
    // Its own cluster: stopping it must not disturb the other tests.
    let own = Cluster::start().unwrap();
    let url = own.create_db("restart").unwrap();
    let store = Store::connect(&Location::Postgres(url)).unwrap();
    store
        .set_pin("kit", "tool", "read", "h1", &json!({}), None)
        .unwrap();
    own.stop().unwrap();
    let down = store.pin("kit", "tool", "read");
    let e = down.expect_err("a stopped server must not answer");
    assert!(matches!(e, StoreError::Postgres { .. }), "{e}");
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
    assert!(store.take_call_approval("kit", "read", "x").is_err());
    own.start_again().unwrap();
    assert_eq!(
        store.pin("kit", "tool", "read").unwrap().unwrap().hash,
        "h1",
        "reconnected after the restart"
    );
}

#[test]
fn a_newer_schema_is_refused_and_a_password_is_never_shown() {
    let at = fresh_db("newer");
    drop(Store::connect(&at).unwrap());
    let Location::Postgres(url) = &at else {
        unreachable!()
    };
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute("UPDATE portcullis_schema SET version = 99")
        .unwrap();
    let e = Store::connect(&at).unwrap_err();
    assert!(
        matches!(e, StoreError::NewerSchema { found: 99, .. }),
        "{e}"
    );
    // This cluster offers no TLS: a URL that requires it is refused, not downgraded.
    let tls = Location::Postgres(format!("{url}?sslmode=require"));
    assert!(Store::connect(&tls).is_err(), "sslmode=require without TLS");
    for leaky in [
        "postgres://someone:hunter2@127.0.0.1:1/nope",
        "postgres://127.0.0.1:1/nope?user=someone&password=hunter2",
        "postgres://someone@127.0.0.1:1/nope?sslpassword=x&password=hunter2",
        "postgres://someone:hunter2@127.0.0.1:1/nope?password=hunter2",
        "postgresql://someone:hun%40ter2@127.0.0.1:1/nope",
    ] {
        let shown = portcullis_controls::store::redact_url(leaky);
        assert!(
            !shown.contains("hunter2") && !shown.contains("hun%40ter2"),
            "{shown}"
        );
        let e = Store::connect(&Location::parse(leaky))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && !e.contains("hun%40ter2"), "{e}");
    }
    assert!(
        !portcullis_controls::store::redact_url("host=db password=hunter2").contains("hunter2")
    );
    let bad = Location::parse("postgres://someone:hunter2@127.0.0.1:1/nope");
    let e = Store::connect(&bad).unwrap_err();
    assert!(!e.to_string().contains("hunter2"), "{e}");
    assert!(!format!("{bad:?} {bad}").contains("hunter2"));
}

/// A server that accepts TCP connections only over TLS (`hostssl`), with a
/// certificate for `localhost` from a CA of its own: the store connects with
/// `sslmode=require&sslrootcert=…` (libpq's spelling, `verify-full` too), and is
/// refused without the CA, under another name, or without TLS.
#[test]
fn tls_to_the_database_is_verified() {
    let own = Cluster::start().unwrap();
    own.create_db("tls").unwrap();
    own.stop().unwrap();
    // A CA of its own, and a certificate for `localhost` it signed.
    let work = tempfile::tempdir().unwrap();
    let w = |f: &str| work.path().join(f);
    std::fs::write(
        w("ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(work.path())
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=portcullis test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext",
        "-out",
        "server.crt",
    ]);
    let key = own
        .write_file("server.key", &std::fs::read(w("server.key")).unwrap())
        .unwrap();
    let cert = own
        .write_file("server.crt", &std::fs::read(w("server.crt")).unwrap())
        .unwrap();
    let ca = w("ca.pem");
    own.write_file(
        "data/pg_hba.conf",
        b"local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
    )
    .unwrap();
    own.set_options(&format!(
        "-c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
        cert.display(),
        key.display()
    ));
    own.start_again().unwrap();
    let at = |host: &str, query: &str| {
        Location::Postgres(format!(
            "postgres://portcullis@{host}:{}/tls{query}",
            own.port()
        ))
    };
    let root = format!("sslrootcert={}", ca.display());
    for mode in ["require", "verify-full"] {
        let s = Store::connect(&at("localhost", &format!("?sslmode={mode}&{root}")))
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        s.set_pin("kit", "tool", "t", "h", &json!({}), None)
            .unwrap();
        assert_eq!(s.pin("kit", "tool", "t").unwrap().unwrap().hash, "h");
    }
    for (what, loc) in [
        ("without the CA", at("localhost", "?sslmode=require")),
        (
            "under another name",
            at("127.0.0.1", &format!("?sslmode=require&{root}")),
        ),
        (
            "without TLS",
            at("localhost", &format!("?sslmode=disable&{root}")),
        ),
        ("by default on loopback (no TLS)", at("localhost", "")),
    ] {
        assert!(Store::connect(&loc).is_err(), "connected {what}");
    }
    // The refusal says why (the TLS cause, not only "handshake failed").
    let e = Store::connect(&at("localhost", "?sslmode=require"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("certificate"), "{e}");
    let missing = at(
        "localhost",
        "?sslmode=require&sslrootcert=/nonexistent/ca.pem",
    );
    let e = Store::connect(&missing).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/ca.pem"), "{e}");
}

/// To another host, TLS is required unless the URL says `sslmode=disable`:
/// no sslmode and `prefer` (which an attacker in the middle can turn into plain
/// text) both refuse a server without TLS. The "other host" is a name that is
/// not this machine's, reached through `hostaddr` on loopback.
#[test]
fn tls_is_required_to_another_host_unless_disabled() {
    let Location::Postgres(url) = fresh_db("remote") else {
        unreachable!()
    };
    let port = cluster().port();
    let remote = |query: &str| {
        Location::Postgres(format!(
            "postgres://portcullis@db.example:{port}/remote?hostaddr=127.0.0.1{query}"
        ))
    };
    for (what, loc) in [
        ("no sslmode", remote("")),
        ("prefer", remote("&sslmode=prefer")),
    ] {
        let e = Store::connect(&loc).expect_err(what).to_string();
        assert!(
            e.contains("TLS") || e.contains("tls") || e.contains("SSL"),
            "{what}: {e}"
        );
    }
    Store::connect(&remote("&sslmode=disable")).expect("an explicit disable is obeyed");
    // On loopback, no sslmode means no TLS (the test cluster offers none).
    Store::connect(&Location::Postgres(url)).unwrap();
}

/// A gateway opens, uses and drops its store on an async runtime's thread (at
/// shutdown, too): the blocking client must not try to block there (found by a
/// Python SDK client ending its stdio session with a gateway on PostgreSQL).
#[test]
fn a_store_used_and_dropped_on_an_async_runtime_is_quiet() {
    let at = fresh_db("runtime");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = Store::connect(&at).unwrap();
        s.set_pin("kit", "tool", "t", "h", &json!({}), None)
            .unwrap();
        assert!(s.pin("kit", "tool", "t").unwrap().is_some());
        drop(s);
    });
}

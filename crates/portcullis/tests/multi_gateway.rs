//! Three `portcullis proxy` processes on loopback sharing one real PostgreSQL
//! (`[state] url`), rmcp clients spread over them, one upstream they all front
//! (the project's test server over Streamable HTTP) plus two stdio servers each.
//!
//! - a rug pull seen through one gateway is held on all three, as one review item;
//! - one approval (`portcullis review --config` of one gateway) releases it on all,
//!   at each gateway's next listing (the bound: nothing is cached);
//! - a value one gateway read is caught leaving through another (taint labels
//!   are read back from the shared store before each egress check);
//! - killing one gateway (SIGKILL) loses none of its records, and the others
//!   keep serving;
//! - with PostgreSQL stopped, a call is not forwarded (fails closed); after it
//!   restarts, the gateways reconnect and serve again.
//!
//! Needs Debian's `postgresql` (scripts/setup-debian.sh installs it).

mod support;

use portcullis_testkit::pg::Cluster;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{
    http_client, pending_of, records, review_of, testserver, text_of, HttpProxy, HttpTestServer,
};

const TOKEN: &str = "PCX-7Q2M9ZK4T-ORIGIN";

fn gateway(state_url: &str, upstream: &str) -> HttpProxy {
    let dir = tempfile::tempdir().unwrap();
    let ts = testserver();
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            "listen = \"127.0.0.1:0\"\n[audit]\nlog = \"audit.jsonl\"\n\
             [state]\nurl = {state_url:?}\n\
             [[server]]\nname = \"kit\"\nurl = {upstream:?}\n\
             [[server]]\nname = \"alpha\"\ncommand = {ts:?}\n\
             args = [\"--profile\", \"attack\", \"--poison\", \"secret\"]\n\
             [[server]]\nname = \"beta\"\ncommand = {ts:?}\nargs = [\"--profile\", \"benign\"]\n"
        ),
    )
    .unwrap();
    HttpProxy::start_in(dir, &["--config".into(), "gateway.toml".into()], &[])
}

async fn call(
    c: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> Result<Value, String> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = args.as_object().cloned();
    c.peer()
        .call_tool(params)
        .await
        .map(|r| serde_json::to_value(r).unwrap())
        .map_err(|e| e.to_string())
}

/// `kit__unit_convert` as this client is shown it.
async fn unit_convert(c: &RunningService<RoleClient, ()>) -> Option<Value> {
    c.peer()
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .find(|t| t["name"] == "kit__unit_convert")
}

/// Polls `check` on every client until it holds for all (or panics after 20 s).
async fn on_all<F, Fut>(
    clients: &[RunningService<RoleClient, ()>],
    what: &str,
    check: F,
) -> Duration
where
    F: Fn(Option<Value>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        let mut all = true;
        let mut shown = Vec::new();
        for c in clients {
            let t = unit_convert(c).await;
            shown.push(t.clone());
            all &= check(t).await;
        }
        if all {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not on every gateway: {what}; shown: {shown:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn blocked(r: &Result<Value, String>) -> bool {
    match r {
        Ok(v) => v["isError"] == true && !text_of(v).contains("fwd"),
        Err(_) => true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_gateways_share_pins_reviews_and_taint_through_postgres() {
    let pg = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = pg.create_db("team").unwrap();
    let upstream = HttpTestServer::start(&["--profile", "benign", "--quietpull"]);
    let mut gateways: Vec<HttpProxy> = (0..3).map(|_| gateway(&url, &upstream.url)).collect();
    let mut clients = Vec::new();
    for g in &gateways {
        clients.push(http_client(&g.url).await);
    }
    let config = gateways[0].dir.path().join("gateway.toml");

    // Every gateway shows the same first version: one pin (pinned by the first,
    // found by the others; the race itself is store_postgres.rs's).
    let v1 = unit_convert(&clients[0]).await.expect("listed");
    for c in &clients[1..] {
        assert_eq!(unit_convert(c).await.as_ref(), Some(&v1));
    }

    // A rug pull, set off through gateway 0, held on all three.
    let r = call(
        &clients[0],
        "kit__unit_convert",
        json!({"value": 1, "from": "m", "to": "ft"}),
    )
    .await
    .unwrap();
    assert_ne!(r["isError"], true, "{r}");
    // The upstream now serves the changed version to everyone; every gateway
    // holds it and keeps showing the pinned one.
    let direct = http_client(&upstream.url).await;
    let served = direct
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "unit_convert")
        .and_then(|t| t.description.map(|d| d.to_string()))
        .unwrap();
    assert_ne!(
        Some(served.as_str()),
        v1["description"].as_str(),
        "the rug pull happened"
    );
    for c in &clients {
        assert_eq!(
            unit_convert(c).await.as_ref(),
            Some(&v1),
            "the pinned version is shown"
        );
    }
    // Each gateway's own log records its hold (the item is one, the holds three).
    for g in &gateways {
        let holds = records(&g.audit)
            .into_iter()
            .filter(|r| r["tool"] == "unit_convert" && r["status"] == "REVIEW")
            .count();
        assert_eq!(holds, 1, "one hold record per gateway");
    }
    let pending = pending_of("--config", &config);
    let items: Vec<&Value> = pending
        .iter()
        .filter(|i| i["server"] == "kit" && i["name"] == "unit_convert")
        .collect();
    assert_eq!(
        items.len(),
        1,
        "one review item for the three gateways: {pending:?}"
    );
    let id = items[0]["id"].as_i64().unwrap().to_string();

    // One approval, through gateway 0's configuration: released on all three.
    review_of(
        "--config",
        &config,
        &["approve", &id, "--note", "checked once for the team"],
    );
    let released = on_all(&clients, "the approved version shown", |t| {
        let v1 = v1.clone();
        async move { t.is_some_and(|t| t["description"] != v1["description"]) }
    })
    .await;
    eprintln!("released on all three gateways {released:?} after the approval");
    assert!(released < Duration::from_secs(5), "{released:?}");

    // Taint: a value read through gateway 0 cannot leave through gateway 2.
    let r = call(&clients[0], "alpha__read_note", json!({"name": "ticket"}))
        .await
        .unwrap();
    assert!(text_of(&r).contains(TOKEN), "{r}");
    // The label is shared once gateway 0's writer committed it.
    let db_url = url.clone();
    tokio::task::spawn_blocking(move || {
        let mut db = postgres::Client::connect(&db_url, postgres::NoTls).unwrap();
        let start = Instant::now();
        while db
            .query_one(
                "SELECT count(*) FROM taint WHERE server = 'alpha' AND tool = 'read_note'",
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            == 0
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "label never stored"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    let r = call(
        &clients[2],
        "beta__echo",
        json!({"text": format!("fwd {TOKEN}")}),
    )
    .await;
    assert!(blocked(&r), "the value left through another gateway: {r:?}");
    let text = r.map(|v| text_of(&v)).unwrap_or_default();
    assert!(text.contains("alpha/read_note"), "{text}");

    // Kill gateway 1 mid-session: its records are whole, the others serve on.
    for i in 0..5 {
        let r = call(
            &clients[1],
            "beta__echo",
            json!({"text": format!("one-{i}")}),
        )
        .await
        .unwrap();
        assert_eq!(text_of(&r), format!("one-{i}"));
    }
    let killed = Command::new("kill")
        .args(["-9", &gateways[1].pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = gateways[1].child.wait();
    let recs = records(&gateways[1].audit);
    let echoed = recs
        .iter()
        .filter(|r| r["tool"] == "echo" && r["channel"] == "tool_result")
        .count();
    assert_eq!(echoed, 5, "every forwarded result has its record");
    for (i, c) in [(0, &clients[0]), (2, &clients[2])] {
        let r = call(c, "beta__echo", json!({"text": format!("still-{i}")}))
            .await
            .unwrap();
        assert_eq!(text_of(&r), format!("still-{i}"));
    }

    // PostgreSQL down: nothing that needs the store is forwarded.
    pg.stop().unwrap();
    for c in [&clients[0], &clients[2]] {
        let r = call(
            c,
            "beta__echo",
            json!({"text": "fwd while the store is down"}),
        )
        .await;
        let e = r.expect_err("forwarded with the store down");
        assert!(e.contains("state store"), "{e}");
    }
    // Back up: the gateways reconnect.
    pg.start_again().unwrap();
    for c in [&clients[0], &clients[2]] {
        let r = call(c, "beta__echo", json!({"text": "after the restart"}))
            .await
            .unwrap();
        assert_eq!(text_of(&r), "after the restart");
    }
    for i in [0, 2] {
        gateways[i].assert_alive();
    }
    drop(clients);
    // A graceful stop (SIGTERM) drops the store on the gateway's runtime: it
    // exits cleanly, no panic.
    for i in [0, 2] {
        let g = &mut gateways[i];
        let ok = Command::new("kill")
            .args(["-TERM", &g.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = g.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "gateway {i} did not stop"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let err = g.stderr();
        assert!(
            status.success() && !err.contains("panicked"),
            "gateway {i}: {status}\n{err}"
        );
    }
}

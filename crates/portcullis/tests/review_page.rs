//! `portcullis review serve` in a real browser: Debian's headless Chromium,
//! driven through chromedriver (WebDriver, the `fantoccini` client), in front of
//! the real gateway (`portcullis proxy`, the project's test server behind it, an
//! rmcp client). List, open, approve, and the gateway releases the item. Also
//! the page's refusals over raw HTTP: another origin, another Host, no token.
//!
//! Needs `chromium` and `chromium-driver` (scripts/setup.sh installs them).
//! Set PORTCULLIS_SCREENSHOT=FILE.png to keep a screenshot of the item page.

mod support;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{pending, portcullis, raw_http, records, testserver, text_of, StdioProxy};

/// A payload in the definition, so the page must show it as text.
const MARKUP: &str =
    "<img src=x onerror=document.title='pwned'><script>document.title='pwned'</script>";

/// `portcullis review serve --state STATE ARGS`, killed on drop.
struct ReviewPage {
    child: Child,
    url: String,
    /// The sign-in address printed when no token was given.
    signin: Option<String>,
}

impl ReviewPage {
    fn start(state: &Path, args: &[&str], env: &[(&str, &str)]) -> ReviewPage {
        let mut child = Command::new(portcullis())
            .args(["review", "--state"])
            .arg(state)
            .arg("serve")
            .args(args)
            .env_remove("PORTCULLIS_REVIEW_TOKEN")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn portcullis review serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("read the page's address");
        let url = line
            .trim()
            .strip_prefix("review page: ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        let signin = env.is_empty().then(|| {
            let mut line = String::new();
            out.read_line(&mut line).expect("read the sign-in address");
            line.trim()
                .strip_prefix("sign in: ")
                .unwrap_or_else(|| panic!("unexpected second line {line:?}"))
                .to_string()
        });
        ReviewPage { child, url, signin }
    }

    /// The generated token, from the sign-in address.
    fn token(&self) -> String {
        self.signin
            .as_deref()
            .and_then(|s| s.split("token=").nth(1))
            .expect("a generated token")
            .to_string()
    }

    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string()
    }
}

impl Drop for ReviewPage {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver on a free loopback port, killed on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start() -> Driver {
        let exe = which("chromedriver").unwrap_or_else(|| {
            panic!(
                "chromedriver not found: the review page's browser test needs Debian's \
                 chromium and chromium-driver (scripts/setup.sh installs them)"
            )
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(exe)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let d = Driver { child, port };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return d;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("chromedriver did not listen on {port}");
    }

    async fn browser(&self) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": which("chromium").map(|p| p.display().to_string()).unwrap_or_default(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,1100"],
            }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a Chromium session through chromedriver")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The gateway in front of the test server whose `unit_convert` changes its
/// description after its first call (a quiet rug pull), its description
/// carrying markup. Returns the gateway and the review item of the change.
async fn pulled(dir: &Path) -> (StdioProxy, i64, Value) {
    let args: Vec<String> = [
        "--",
        &testserver(),
        "--profile",
        "benign",
        "--quietpull",
        "--describe",
        &format!("unit_convert={MARKUP}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let p = StdioProxy::with_audit_in(dir, &args).await;
    let v1 = tool(&p).await;
    assert!(
        v1["description"].as_str().unwrap_or("").contains(MARKUP),
        "the markup is in the pinned definition: {v1}"
    );
    p.call("unit_convert", json!({"value": 1, "from": "m", "to": "ft"}))
        .await
        .unwrap();
    p.notified("notifications/tools/list_changed", 1).await;
    let id = pending(&p.state)
        .first()
        .and_then(|i| i["id"].as_i64())
        .expect("the changed definition is filed for review");
    (p, id, v1)
}

async fn tool(p: &StdioProxy) -> Value {
    p.tools()
        .await
        .into_iter()
        .find(|t| t["name"] == "unit_convert")
        .expect("unit_convert listed")
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

/// `GET PATH` to the page at `addr` with `Host: host` and the header lines `extra`.
fn get(addr: &str, host: &str, extra: &str, path: &str) -> (u16, String) {
    raw_http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
    )
}

/// A form `POST PATH`, as `get`.
fn post_form(addr: &str, host: &str, extra: &str, path: &str, form: &str) -> (u16, String) {
    raw_http(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    )
}

/// The decision form's own value, read from an item page.
fn csrf_of(body: &str) -> String {
    body.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the form carries its value")
        .to_string()
}

/// Whether the browser's address ends with `suffix`.
async fn at(c: &Client, suffix: &str) -> bool {
    c.current_url().await.unwrap().as_str().ends_with(suffix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rug_pull_is_approved_in_a_real_browser_and_the_gateway_releases_it() {
    let dir = tempfile::tempdir().unwrap();
    let (p, id, v1) = pulled(dir.path()).await;
    let page = ReviewPage::start(&p.state, &["--listen", "127.0.0.1:0"], &[]);
    let driver = Driver::start();
    let c = driver.browser().await;

    // Not signed in: the sign-in form. The printed address signs in.
    c.goto(&page.url).await.unwrap();
    assert!(at(&c, "/login").await);
    c.goto(page.signin.as_deref().unwrap()).await.unwrap();
    // The queue lists the item; open it.
    let link = c
        .find(Locator::Css("#queue a.item"))
        .await
        .expect("the queue lists the held definition");
    assert_eq!(link.text().await.unwrap(), id.to_string());
    link.click().await.unwrap();
    c.wait().for_element(Locator::Css("#status")).await.unwrap();
    assert!(at(&c, &format!("/item/{id}")).await);
    assert_eq!(text(&c, "#status").await, "pending");

    // Old and new side by side, the description marked as changed on both.
    for side in ["#pinned", "#held"] {
        let marked = c
            .find_all(Locator::Css(&format!("{side} .chg")))
            .await
            .unwrap();
        assert_eq!(marked.len(), 1, "{side}: one changed field");
        assert_eq!(
            marked[0].attr("data-path").await.unwrap().as_deref(),
            Some("$.description")
        );
        // The markup is shown as text: no element, no script run.
        assert!(marked[0].text().await.unwrap().contains(MARKUP), "{side}");
    }
    assert!(text(&c, "#held").await.contains("Results are rounded"));
    assert!(!text(&c, "#pinned").await.contains("Results are rounded"));
    let (title, images) = (
        c.title().await.unwrap(),
        c.execute(
            "return document.images.length + document.scripts.length",
            vec![],
        )
        .await
        .unwrap(),
    );
    assert_eq!(title, format!("Item {id} · Portcullis review"));
    assert_eq!(images, json!(0), "no element made from the server's text");

    if let Ok(path) = std::env::var("PORTCULLIS_SCREENSHOT") {
        std::fs::write(&path, c.screenshot().await.unwrap()).unwrap();
    }

    // Approve with a note.
    c.find(Locator::Css("#note"))
        .await
        .unwrap()
        .send_keys("wording checked in the browser")
        .await
        .unwrap();
    c.find(Locator::Css("#approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css("#message"))
        .await
        .expect("the item page after the decision");
    assert!(at(&c, &format!("/item/{id}?done=1")).await);
    assert_eq!(text(&c, "#status").await, "approved");
    assert!(text(&c, "#message").await.contains("Decision recorded"));
    assert!(
        c.find(Locator::Css("#approve")).await.is_err(),
        "no form once decided"
    );

    // The gateway releases it: the client now gets the new wording.
    let v2 = tool(&p).await;
    assert_ne!(v2["description"], v1["description"]);
    assert!(v2["description"]
        .as_str()
        .unwrap()
        .contains("Results are rounded"));
    let r = p
        .call("unit_convert", json!({"value": 1, "from": "m", "to": "ft"}))
        .await
        .unwrap();
    assert_eq!(text_of(&r), "1 m = 3.2808 ft");

    // The decision is a record in the gateway's audit log, with the note.
    let decided: Vec<Value> = records(&p.audit)
        .into_iter()
        .filter(|r| r["stages"][0]["name"] == "review")
        .collect();
    assert_eq!(decided.len(), 1, "one decision record");
    assert_eq!(decided[0]["status"], "ALLOW");
    assert!(decided[0]
        .to_string()
        .contains("wording checked in the browser"));
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_browser_signs_in_and_a_wrong_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (p, id, _) = pulled(dir.path()).await;
    let page = ReviewPage::start(
        &p.state,
        &["--listen", "127.0.0.1:0"],
        &[("PORTCULLIS_REVIEW_TOKEN", "correct horse battery staple")],
    );
    let driver = Driver::start();
    let c = driver.browser().await;
    c.goto(&page.url).await.unwrap();
    assert!(at(&c, "/login").await);
    for (token, ok) in [("wrong", false), ("correct horse battery staple", true)] {
        let field = c.find(Locator::Css("#token")).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(token).await.unwrap();
        c.find(Locator::Css("#signin"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        if ok {
            c.wait()
                .for_element(Locator::Css("#queue"))
                .await
                .expect("the queue after signing in");
            assert_eq!(
                text(&c, "#queue a.item").await,
                id.to_string(),
                "signed in: the queue"
            );
        } else {
            c.wait()
                .for_element(Locator::Css("#message"))
                .await
                .unwrap();
            assert_eq!(text(&c, "#message").await, "Wrong token.");
        }
    }
    // Without the cookie or the token, nothing but the sign-in form.
    let addr = page.addr();
    let (status, _) = get(&addr, &addr, "", &format!("/item/{id}"));
    assert_eq!(status, 303);
    let bearer = "Authorization: bearer correct horse battery staple\r\n";
    let (status, body) = get(&addr, &addr, bearer, &format!("/item/{id}"));
    assert_eq!(status, 200, "{body}");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_from_another_origin_or_host_is_refused_and_nothing_is_decided() {
    let dir = tempfile::tempdir().unwrap();
    let (p, id, _) = pulled(dir.path()).await;
    let page = ReviewPage::start(&p.state, &["--listen", "127.0.0.1:0"], &[]);
    let addr = page.addr();
    let auth = format!("Authorization: Bearer {}\r\n", page.token());
    let item = format!("/item/{id}");
    // The form's own value, read from the page.
    let csrf = csrf_of(&get(&addr, &addr, &auth, &item).1);
    let post = |host: &str, extra: &str, form: &str| {
        post_form(&addr, host, &format!("{auth}{extra}"), &item, form)
    };
    let good = format!("csrf={csrf}&decision=approve&note=");
    // Another user of the machine, without the token: nothing.
    let (s, _) = post_form(&addr, &addr, "", &item, &good);
    assert_eq!(s, 401);
    // A link that claims a decision on an undecided item is not believed.
    let (_, body) = get(&addr, &addr, &auth, &format!("{item}?done=1"));
    assert!(!body.contains("Decision recorded"), "{body}");
    // A page on another site posting to the loopback page (CSRF).
    let (s, _) = post(&addr, "Origin: http://evil.example\r\n", &good);
    assert_eq!(s, 403);
    let (s, _) = post(&addr, "Sec-Fetch-Site: cross-site\r\n", &good);
    assert_eq!(s, 403);
    // The form without its token.
    let (s, _) = post(&addr, "", "csrf=guess&decision=approve&note=");
    assert_eq!(s, 403);
    // A DNS-rebinding page: the right address, another Host.
    let (s, _) = post("evil.example", "", &good);
    assert_eq!(s, 403);
    assert_eq!(pending(&p.state).len(), 1, "still pending");
    // The page's own form decides, once.
    let (s, _) = post(&addr, &format!("Origin: http://{addr}\r\n"), &good);
    assert_eq!(s, 303);
    let (s, body) = post(&addr, "", &good);
    assert_eq!(s, 409, "{body}");
    assert!(body.contains("already approved"), "{body}");
    assert!(pending(&p.state).is_empty());
}

#[test]
fn the_page_does_not_start_off_loopback_without_a_token_nor_with_a_short_one() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    portcullis_controls::store::Store::open(&state).unwrap();
    let serve = |args: &[&str], token: Option<&str>| {
        let mut cmd = Command::new(portcullis());
        cmd.args(["review", "--state"])
            .arg(&state)
            .args(["--audit-log"])
            .arg(dir.path().join("audit.jsonl"))
            .arg("serve")
            .args(args)
            .env_remove("PORTCULLIS_REVIEW_TOKEN");
        if let Some(t) = token {
            cmd.env("PORTCULLIS_REVIEW_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = serve(&["--listen", "0.0.0.0:0"], None);
    assert!(
        err.contains("not a loopback address") && err.contains("PORTCULLIS_REVIEW_TOKEN"),
        "{err}"
    );
    let err = serve(&["--listen", "127.0.0.1:0"], Some("hunter2"));
    assert!(err.contains("at least 16"), "{err}");
    let err = serve(
        &[
            "--listen",
            "127.0.0.1:0",
            "--public-origin",
            "review.example",
        ],
        None,
    );
    assert!(err.contains("expected https://HOST"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_tls_proxy_the_public_origin_is_accepted_and_the_cookie_is_secure() {
    let dir = tempfile::tempdir().unwrap();
    let (p, id, _) = pulled(dir.path()).await;
    let token = "a token of more than sixteen characters";
    let page = ReviewPage::start(
        &p.state,
        &[
            "--listen",
            "127.0.0.1:0",
            "--public-origin",
            "https://review.example.org",
        ],
        &[("PORTCULLIS_REVIEW_TOKEN", token)],
    );
    let addr = page.addr();
    // As the proxy forwards it: the public Host.
    let form = format!("token={}", token.replace(' ', "+"));
    let public = "review.example.org";
    let (s, head) = post_form(
        &addr,
        public,
        "Origin: https://review.example.org\r\n",
        "/login",
        &form,
    );
    assert_eq!(s, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("a session cookie");
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let session = cookie.split(';').next().unwrap();
    let cookie = format!("Cookie: {session}\r\n");
    let (s, body) = get(&addr, public, &cookie, &format!("/item/{id}"));
    assert_eq!(s, 200, "{body}");
    // Another name is still refused.
    let (s, _) = get(&addr, "other.example.org", &cookie, "/");
    assert_eq!(s, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_waiting_for_its_decision_goes_on_when_the_page_approves_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gateway.toml");
    std::fs::write(
        &cfg,
        format!(
            "stdio = true\n[review]\ncall_timeout_secs = 300\n[audit]\nlog = \"audit.jsonl\"\n\
             [[server]]\nname = \"kit\"\ncommand = {:?}\nargs = [\"--profile\", \"benign\", \"--overpriv\"]\n",
            testserver()
        ),
    )
    .unwrap();
    let state = dir.path().join("audit.jsonl.state.sqlite");
    let p = StdioProxy::start(
        &["--config".into(), cfg.display().to_string()],
        &dir.path().join("audit.jsonl"),
        &state,
        None,
    )
    .await;
    p.tools().await;
    // A call filling an over-privileged parameter is held and waits.
    let waiting = {
        let peer = p.client.peer().clone();
        tokio::spawn(async move {
            support::call_on(
                &peer,
                "article_metadata",
                json!({"pmid": "7", "agent_model": "m"}),
            )
            .await
        })
    };
    let mut id = None;
    for _ in 0..400 {
        if let Some(i) = pending(&state).first() {
            id = i["id"].as_i64();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let id = id.expect("the held call is filed");
    assert!(!waiting.is_finished(), "the call waits for the decision");
    let page = ReviewPage::start(&state, &["--listen", "127.0.0.1:0"], &[]);
    let addr = page.addr();
    let auth = format!("Authorization: Bearer {}\r\n", page.token());
    let item = format!("/item/{id}");
    let (_, body) = get(&addr, &addr, &auth, &item);
    assert!(body.contains("call"), "{body}");
    let form = format!("csrf={}&decision=approve&note=checked", csrf_of(&body));
    let (s, _) = post_form(&addr, &addr, &auth, &item, &form);
    assert_eq!(s, 303);
    let r = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the call goes on after the approval")
        .unwrap()
        .unwrap();
    assert!(text_of(&r).starts_with("PMID 7"), "{r}");
}

//! Wrapped servers keep their own identity (issue 21, part 6), with real parts:
//! `portcullis wrap` on a Claude Desktop configuration, each wrapped entry started
//! as a child process the way the client starts it (its command, its arguments,
//! its `env`), an rmcp client on its stdio, and the one state store and audit log
//! the wrapped servers share, read with the gateway's own `Store` and
//! `portcullis review`.

mod support;

use portcullis_controls::store::Store;
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use support::{portcullis, records, testserver, Recorder};
use tokio::io::{AsyncBufReadExt, BufReader};

fn fixture(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude_desktop_two_notebooks.json"),
    )
    .expect("the fixture");
    let path = dir.join("claude_desktop_config.json");
    let server = Value::String(testserver()).to_string();
    std::fs::write(&path, text.replace("\"@TESTSERVER@\"", &server)).unwrap();
    path
}

/// `portcullis ARGS` with the default audit log (and so state store) in `dir`.
fn cli(dir: &Path, args: &[&str]) -> Output {
    let o = Command::new(portcullis())
        .args(args)
        .current_dir(dir)
        .env("PORTCULLIS_AUDIT_LOG", audit(dir))
        .stdin(Stdio::null())
        .output()
        .expect("run portcullis");
    assert!(
        o.status.success(),
        "portcullis {args:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn audit(dir: &Path) -> PathBuf {
    dir.join("audit.jsonl")
}

fn state(dir: &Path) -> PathBuf {
    dir.join("audit.jsonl.state.sqlite")
}

/// A wrapped entry running as the client runs it, with a client in front.
struct Running {
    client: RunningService<RoleClient, Recorder>,
    child: tokio::task::JoinHandle<()>,
    stderr_task: tokio::task::JoinHandle<()>,
    stderr: Arc<Mutex<String>>,
}

impl Running {
    /// Start `entry` (a server entry of the client configuration) as a child:
    /// its `command`, its `args` item by item, its `env`.
    async fn start(entry: &Value, dir: &Path) -> Running {
        use rmcp::ServiceExt;
        let command = entry["command"].as_str().expect("a stdio entry");
        let args: Vec<&str> = entry["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(&args)
            .current_dir(dir)
            .env("PORTCULLIS_AUDIT_LOG", audit(dir))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(env) = entry["env"].as_object() {
            for (k, v) in env {
                cmd.env(k, v.as_str().unwrap());
            }
        }
        let mut child = cmd.spawn().expect("start the wrapped entry");
        let err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let log = stderr.clone();
        let stderr_task = tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = log.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
            child.stdout.take().unwrap(),
            child.stdin.take().unwrap(),
        );
        let child = tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let client = match Recorder::default().serve(transport).await {
            Ok(c) => c,
            Err(e) => {
                let _ = child.await;
                let _ = stderr_task.await;
                panic!(
                    "initialize through the wrapped entry failed: {e}; stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        Running {
            client,
            child,
            stderr_task,
            stderr,
        }
    }

    async fn tools(&self) -> Vec<Value> {
        self.client
            .peer()
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| serde_json::to_value(t).unwrap())
            .collect()
    }

    fn instructions(&self) -> String {
        self.client
            .peer()
            .peer_info()
            .and_then(|i| i.instructions.clone())
            .unwrap_or_default()
    }

    /// Hang up as a client does (stdin closes); wait for the gateway to exit
    /// (its state written) and return everything it wrote on stderr.
    async fn stop(self) -> String {
        let _ = self.client.cancel().await;
        let _ = self.child.await;
        let _ = self.stderr_task.await;
        let s = self.stderr.lock().unwrap().clone();
        s
    }
}

fn description<'a>(tools: &'a [Value], name: &str) -> &'a str {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {tools:?}"))["description"]
        .as_str()
        .unwrap_or_default()
}

fn names(tools: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

fn entry<'a>(cfg: &'a Value, name: &str) -> &'a Value {
    &cfg["mcpServers"][name]
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Edit one wrapped entry's server arguments (after `--`), as a user edits the
/// client configuration: replace `from` with `to`.
fn edit_arg(path: &Path, server: &str, from: &str, to: &str) {
    let mut cfg = read_json(path);
    let args = cfg["mcpServers"][server]["args"].as_array_mut().unwrap();
    let at = args.iter().position(|a| a == from).expect("the argument");
    args[at] = Value::String(to.into());
    std::fs::write(path, serde_json::to_string_pretty(&cfg).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_wrapped_servers_with_a_same_named_tool_keep_their_pins_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let cfg_path = fixture(dir);
    let p = portcullis();
    cli(
        dir,
        &["wrap", cfg_path.to_str().unwrap(), "--portcullis", &p],
    );
    let cfg = read_json(&cfg_path);
    let (work, home) = (entry(&cfg, "notes-work"), entry(&cfg, "notes-home"));
    // The entry's name is the server's name; the env's names are its launch.
    assert_eq!(work["args"][1], "--name=notes-work", "{work}");
    assert_eq!(work["args"][2], "--launch-env=NOTEBOOK", "{work}");
    assert_eq!(home["args"][1], "--name=notes-home", "{home}");

    // Both run at once on the one store, as a client runs them.
    let w = Running::start(work, dir).await;
    let h = Running::start(home, dir).await;
    let (wt, ht) = (w.tools().await, h.tools().await);
    // Nothing withheld: each lists the whole server, its own `echo`.
    assert_eq!(names(&wt), names(&ht));
    for n in ["add", "echo", "payload", "read_note"] {
        assert!(names(&wt).contains(&n.to_string()), "{n} withheld: {wt:?}");
    }
    assert!(description(&wt, "echo").ends_with("Replies from the work notebook."));
    assert!(description(&ht, "echo").ends_with("Replies from the home notebook."));
    // Neither's instructions are dropped.
    assert!(
        w.instructions().ends_with("Work notebook tools."),
        "{}",
        w.instructions()
    );
    assert!(
        h.instructions().ends_with("Home notebook tools."),
        "{}",
        h.instructions()
    );
    let err = w.stop().await + h.stop().await.as_str();
    assert!(
        !err.contains('\u{1b}'),
        "ANSI codes on a piped stderr:\n{err}"
    );

    // One store, pins by server: the two `echo`s side by side, nothing held,
    // every record naming its server.
    let store = Store::open(&state(dir)).unwrap();
    let wp = store
        .pin("notes-work", "tool", "echo")
        .unwrap()
        .expect("work's pin");
    let hp = store
        .pin("notes-home", "tool", "echo")
        .unwrap()
        .expect("home's pin");
    assert_ne!(wp.hash, hp.hash);
    assert!(store.pin("upstream", "tool", "echo").unwrap().is_none());
    assert_eq!(store.list(false).unwrap(), vec![], "nothing is held");
    let recs = records(&audit(dir));
    assert!(!recs.is_empty());
    for r in &recs {
        assert_eq!(r["status"], "ALLOW", "{r}");
        assert!(
            r["server"] == "notes-work" || r["server"] == "notes-home",
            "{r}"
        );
    }

    // The user edits one server's flags, and its `echo` changes with them: held
    // for that server only, as a launch change.
    edit_arg(
        &cfg_path,
        "notes-home",
        "echo=Replies from the home notebook.",
        "echo=Replies from the home notebook, newest first.",
    );
    let cfg = read_json(&cfg_path);
    let h = Running::start(entry(&cfg, "notes-home"), dir).await;
    let ht = h.tools().await;
    assert!(
        description(&ht, "echo").ends_with("Replies from the home notebook."),
        "the pinned version is shown until approved: {ht:?}"
    );
    let err = h.stop().await;
    assert!(err.contains("launch changed"), "{err}");
    let pending = store.list(false).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let item = &pending[0];
    assert_eq!(
        (item.server.as_str(), item.name.as_str()),
        ("notes-home", "echo")
    );
    assert_eq!(item.detail["change"], "launch_changed");

    // Approving it moves nothing of the other server.
    cli(dir, &["review", "approve", &item.id.to_string()]);
    assert_eq!(store.pin("notes-work", "tool", "echo").unwrap(), Some(wp));
    assert_ne!(
        store
            .pin("notes-home", "tool", "echo")
            .unwrap()
            .unwrap()
            .hash,
        hp.hash
    );
    let w = Running::start(entry(&cfg, "notes-work"), dir).await;
    let h = Running::start(entry(&cfg, "notes-home"), dir).await;
    let (wt, ht) = (w.tools().await, h.tools().await);
    assert!(description(&wt, "echo").ends_with("Replies from the work notebook."));
    assert!(description(&ht, "echo").ends_with("newest first."));
    w.stop().await;
    h.stop().await;
    assert_eq!(
        store.list(false).unwrap(),
        vec![],
        "nothing held after approval"
    );

    // Unwrap gives the configuration back (the user's edit kept).
    cli(dir, &["unwrap", cfg_path.to_str().unwrap()]);
    let back = read_json(&cfg_path);
    assert_eq!(back["mcpServers"]["notes-home"]["command"], testserver());
    assert_eq!(back["mcpServers"]["notes-home"]["args"][0], "--profile");
}

/// `portcullis proxy --name NAME -- testserver ARGS` with a client in front.
async fn proxy(dir: &Path, name: &str, server_args: &[&str]) -> Running {
    let mut args = vec![
        Value::String("proxy".into()),
        Value::String(format!("--name={name}")),
        Value::String("--".into()),
        Value::String(testserver()),
    ];
    args.extend(server_args.iter().map(|a| Value::String(a.to_string())));
    let entry = serde_json::json!({"command": portcullis(), "args": args});
    Running::start(&entry, dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_with_other_args_is_reported_and_filed_as_a_launch_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let one = [
        "--profile",
        "benign",
        "--describe",
        "add=Local time zone: UTC.",
    ];
    let p = proxy(dir, "clock", &one).await;
    let first = p.tools().await;
    let err = p.stop().await;
    assert!(
        !err.contains("launch changed"),
        "a first run has no earlier launch: {err}"
    );

    // Another flag that changes no definition: the launch change is said,
    // nothing is held, and the pins move to the new launch.
    let same_defs = [
        "--profile",
        "benign",
        "--describe",
        "add=Local time zone: UTC.",
        "--quietpull-stage",
        "0",
    ];
    let p = proxy(dir, "clock", &same_defs).await;
    assert_eq!(p.tools().await, first);
    let err = p.stop().await;
    assert!(
        err.contains("the server's launch changed since its last run"),
        "{err}"
    );
    assert!(err.contains("args were"), "{err}");
    let store = Store::open(&state(dir)).unwrap();
    assert_eq!(store.list(false).unwrap(), vec![]);

    // A flag that changes a definition: held, filed as a launch change, the
    // pinned version shown.
    let two = [
        "--profile",
        "benign",
        "--describe",
        "add=Local time zone: Europe/Zurich.",
    ];
    let p = proxy(dir, "clock", &two).await;
    let listed = p.tools().await;
    assert_eq!(description(&listed, "add"), description(&first, "add"));
    let err = p.stop().await;
    assert!(err.contains("launch changed"), "{err}");
    let pending = store.list(false).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let item = &pending[0];
    assert_eq!((item.server.as_str(), item.name.as_str()), ("clock", "add"));
    assert_eq!(item.detail["change"], "launch_changed");
    assert!(
        item.summary.contains("the server's launch changed"),
        "{}",
        item.summary
    );
    assert!(item.summary.contains("Europe/Zurich"), "{}", item.summary);
    // The record that held it says so too.
    let rec = records(&audit(dir))
        .into_iter()
        .find(|r| r["id"] == item.record_id.as_str())
        .expect("the holding record");
    assert_eq!(rec["status"], "REVIEW");
    let rules: Vec<&str> = rec["stages"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.iter().all(|r| *r == "pin.launch_changed"),
        "{rules:?}"
    );
    assert!(rules.contains(&"pin.launch_changed"));
    // And the review shows the launch change beside the diff.
    let shown =
        String::from_utf8_lossy(&cli(dir, &["review", "show", &item.id.to_string()]).stdout)
            .into_owned();
    assert!(
        shown.contains("the server's launch changed (pinned under -> now):"),
        "{shown}"
    );
    assert!(shown.contains("args were ["), "{shown}");
    assert!(shown.contains("$.description"), "{shown}");

    // Another server's name in the same store is untouched by all of this.
    let p = proxy(dir, "other-clock", &two).await;
    let listed = p.tools().await;
    assert!(description(&listed, "add").ends_with("Europe/Zurich."));
    let err = p.stop().await;
    assert!(!err.contains("launch changed"), "{err}");
    assert_eq!(store.list(false).unwrap().len(), 1);

    // Approved: the new version is shown, and nothing is held again.
    cli(dir, &["review", "approve", &item.id.to_string()]);
    let p = proxy(dir, "clock", &two).await;
    assert!(description(&p.tools().await, "add").ends_with("Europe/Zurich."));
    let err = p.stop().await;
    assert!(!err.contains("launch changed"), "{err}");
    assert_eq!(store.list(false).unwrap(), vec![]);
}

//! A cluster that is never dropped (as one held in a `static` for a test file
//! is not) is stopped and its directory removed once its process exits.

use portcullis_testkit::pg::Cluster;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "PORTCULLIS_PG_WATCHDOG_CHILD";

#[test]
fn a_cluster_never_dropped_is_stopped_once_its_process_exits() {
    if std::env::var_os(CHILD).is_some() {
        // The child: start a cluster, say where it is, exit without dropping it.
        let c = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
        println!("CLUSTER {} {}", c.port(), c.dir().display());
        std::mem::forget(c);
        std::process::exit(0);
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "a_cluster_never_dropped_is_stopped_once_its_process_exits",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("the child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CLUSTER "))
        .unwrap_or_else(|| {
            panic!(
                "the child did not start a cluster: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let (port, dir) = line.split_once(' ').expect("port and directory");
    let port: u16 = port.parse().expect("a port");
    let dir = PathBuf::from(dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listening = TcpStream::connect(("127.0.0.1", port)).is_ok();
        if !listening && !dir.exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "30 s after its process exited, the cluster on port {port} is {} and {} is {}",
            if listening {
                "still listening"
            } else {
                "stopped"
            },
            dir.display(),
            if dir.exists() { "still there" } else { "gone" }
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

//! A throw-away PostgreSQL cluster for tests: `initdb` into a temporary
//! directory, `pg_ctl start` on a free 127.0.0.1 port (its Unix socket in the same
//! directory), stopped and deleted on drop — or, for a cluster that is never
//! dropped (one held in a `static` for a test file) or a test process that is
//! killed, by a watchdog once the process that started it is gone. Uses Debian's
//! `postgresql` package (`scripts/setup-debian.sh` installs it); `PORTCULLIS_PG_BIN` names another
//! directory of `initdb` and `pg_ctl`. As root the server runs as the `postgres`
//! user (PostgreSQL refuses to run as root).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    /// More server options for the next start (`-c name=value …`).
    extra: std::sync::Mutex<String>,
}

/// The directory of `initdb` and `pg_ctl`: `PORTCULLIS_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<major>/bin`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("PORTCULLIS_PG_BIN") {
        return Ok(PathBuf::from(d));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            format!(
                "no PostgreSQL server here (/usr/lib/postgresql: {e}); run \
                 scripts/setup-debian.sh (it installs Debian's postgresql) or set \
                 PORTCULLIS_PG_BIN"
            )
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, b)| b)
        .ok_or_else(|| "no initdb under /usr/lib/postgresql/*/bin".to_string())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Cluster {
    /// A new cluster, started, with a `portcullis` superuser that connects
    /// without a password (trust, loopback and socket only).
    pub fn start() -> Result<Cluster, String> {
        let bin = bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("portcullis-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let as_postgres = is_root();
        let cluster = Cluster {
            dir,
            bin,
            port: crate::process::free_port().map_err(|e| format!("a free port: {e}"))?,
            as_postgres,
            extra: Default::default(),
        };
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:", &cluster.dir.path().display().to_string()])
                .status()
                .map_err(|e| format!("chown: {e}"))?
                .success();
            if !ok {
                return Err("chown of the cluster directory to postgres failed".into());
            }
        }
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data().display().to_string(),
                "-U",
                "portcullis",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        cluster.start_again()?;
        cluster.watchdog()?;
        Ok(cluster)
    }

    /// Start a process, in a session of its own, that stops the server and
    /// removes the cluster's directory once this process has exited. Without it
    /// a cluster in a `static` (never dropped) left a running server and ~130 MB
    /// in the temporary directory behind every run of its test file.
    fn watchdog(&self) -> Result<(), String> {
        use std::os::unix::process::CommandExt;
        let mut stop = self.argv("pg_ctl");
        stop.extend(self.stop_args().iter().map(OsString::from));
        // Arguments are passed as positional parameters, never spliced into
        // the script: `$1` the process to outlive, `$2` the directory, the
        // rest the stop command.
        let script = r#"p=$1; d=$2; shift 2
while kill -0 "$p" 2>/dev/null; do sleep 1; done
"$@" >/dev/null 2>&1
rm -rf "$d""#;
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("portcullis-pg-watchdog")
            .arg(std::process::id().to_string())
            .arg(self.dir.path())
            .args(&stop)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .map(drop)
            .map_err(|e| format!("the cluster's watchdog (sh): {e}"))
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://portcullis@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://portcullis@127.0.0.1:{}/{db}", self.port)
    }

    /// Create database `db` (each test its own, in one cluster).
    pub fn create_db(&self, db: &str) -> Result<String, String> {
        self.run(
            "createdb",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "portcullis",
                db,
            ],
        )?;
        Ok(self.url(db))
    }

    /// (Re)start the server on the same port and data; returns once it accepts
    /// connections.
    pub fn start_again(&self) -> Result<(), String> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 {}",
            self.port,
            self.dir.path().display(),
            self.extra.lock().unwrap_or_else(|p| p.into_inner())
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-o",
                &opts,
                "-l",
                &self.dir.path().join("server.log").display().to_string(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
    }

    /// Server options for the next [`Cluster::start_again`], e.g. `-c ssl=on`.
    pub fn set_options(&self, opts: &str) {
        *self.extra.lock().unwrap_or_else(|p| p.into_inner()) = opts.to_string();
    }

    /// Write `contents` to `name` in the cluster's directory (`data/…` for the
    /// data directory), owned by the server's user, mode 0600 (as the server
    /// wants its key and configuration files).
    pub fn write_file(&self, name: &str, contents: &[u8]) -> Result<PathBuf, String> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if self.as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:", &path.display().to_string()])
                .status()
                .map_err(|e| format!("chown: {e}"))?
                .success();
            if !ok {
                return Err(format!("chown of {} failed", path.display()));
            }
        }
        Ok(path)
    }

    /// Stop the server at once (`-m immediate`: as a crash would).
    pub fn stop(&self) -> Result<(), String> {
        let args = self.stop_args();
        self.run("pg_ctl", &args.each_ref().map(String::as_str))
    }

    /// `pg_ctl`'s arguments for [`Cluster::stop`] (the watchdog runs the same).
    fn stop_args(&self) -> [String; 6] {
        [
            "-D",
            &self.data().display().to_string(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]
        .map(String::from)
    }

    /// The command line that runs `tool` of the server's binaries, as the
    /// server's user (`runuser` when this process is root).
    fn argv(&self, tool: &str) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        if self.as_postgres {
            argv.extend(["runuser", "-u", "postgres", "--"].map(OsString::from));
        }
        argv.push(self.bin.join(tool).into_os_string());
        argv
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let argv = self.argv(tool);
        let (program, rest) = argv
            .split_first()
            .ok_or_else(|| format!("no command line for {tool}"))?;
        let out = Command::new(program)
            .args(rest)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            Err(format!(
                "{tool} {args:?}: {}\n{}\n{}\nserver log:\n{log}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

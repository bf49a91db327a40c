//! Child processes for the benchmark binaries: a server started until it prints
//! where it listens, its resident memory, a free loopback port.

use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Spawns `cmd` (killed on drop), waits up to 60 s for a stderr line containing
/// `marker` (e.g. `"listening on "`), and returns the rest of that line: the URL.
/// Its stderr keeps being drained.
pub async fn spawn_listening(mut cmd: Command, marker: &str) -> Result<(Child, String)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("spawning a server")?;
    let err = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let mut lines = BufReader::new(err).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(pos) = line.find(marker) {
                return Ok::<_, std::io::Error>(Some(
                    line[pos + marker.len()..].trim().to_string(),
                ));
            }
        }
        Ok(None)
    })
    .await
    .context("waiting for the listening line")??
    .ok_or_else(|| anyhow!("the server exited before listening"))?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, url))
}

/// VmRSS of a process, KiB (Linux `/proc/PID/status`).
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A TCP port free on 127.0.0.1 now (the system's choice).
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The binary `name` in this binary's directory (where cargo builds them all).
pub fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("binary has no directory"))?;
    let p = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !p.is_file() {
        bail!("{} not found (build it, or pass its path)", p.display());
    }
    Ok(p)
}

//! Where each client keeps its MCP configuration, per operating system.

use crate::model::ClientKind;
use std::path::{Path, PathBuf};

/// The operating-system conventions that decide the paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    MacOs,
    Windows,
}

impl Os {
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }
}

/// The directories the paths are built from.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub home: PathBuf,
    /// The project directory (project-level `.mcp.json`, `.cursor/`, `.vscode/`).
    pub project: PathBuf,
    /// `%APPDATA%` (Windows) — defaults to `HOME/AppData/Roaming`.
    pub appdata: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (Linux) — defaults to `HOME/.config`.
    pub xdg_config: Option<PathBuf>,
}

impl Dirs {
    /// From the environment (`HOME`/`USERPROFILE`, `APPDATA`, `XDG_CONFIG_HOME`) and
    /// the current directory.
    pub fn from_env() -> Option<Dirs> {
        let nonempty = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = nonempty("HOME").or_else(|| nonempty("USERPROFILE"))?;
        Some(Dirs {
            home,
            project: std::env::current_dir().ok()?,
            appdata: nonempty("APPDATA"),
            xdg_config: nonempty("XDG_CONFIG_HOME"),
        })
    }
}

/// A place a client configuration may be.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub path: PathBuf,
    pub kind: ClientKind,
}

/// Every conventional location, whether or not a file is there.
pub fn candidates(dirs: &Dirs, os: Os) -> Vec<Candidate> {
    let home = &dirs.home;
    // The per-user application configuration directory.
    let app: PathBuf = match os {
        Os::MacOs => home.join("Library/Application Support"),
        Os::Windows => dirs
            .appdata
            .clone()
            .unwrap_or_else(|| home.join("AppData").join("Roaming")),
        Os::Linux => dirs
            .xdg_config
            .clone()
            .unwrap_or_else(|| home.join(".config")),
    };
    let c = |path: PathBuf, kind| Candidate { path, kind };
    vec![
        c(
            app.join("Claude").join("claude_desktop_config.json"),
            ClientKind::ClaudeDesktop,
        ),
        c(home.join(".claude.json"), ClientKind::ClaudeCode),
        c(dirs.project.join(".mcp.json"), ClientKind::ClaudeCode),
        c(home.join(".cursor").join("mcp.json"), ClientKind::Cursor),
        c(
            dirs.project.join(".cursor").join("mcp.json"),
            ClientKind::Cursor,
        ),
        c(
            dirs.project.join(".vscode").join("mcp.json"),
            ClientKind::VsCode,
        ),
        c(
            app.join("Code").join("User").join("mcp.json"),
            ClientKind::VsCode,
        ),
        c(
            app.join("Code").join("User").join("settings.json"),
            ClientKind::VsCodeSettings,
        ),
        c(
            home.join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
            ClientKind::Windsurf,
        ),
    ]
}

/// The candidates that exist as files, without duplicates (the project directory
/// may be the home directory).
pub fn existing(dirs: &Dirs, os: Os) -> Vec<Candidate> {
    let mut seen = Vec::<PathBuf>::new();
    let mut out = Vec::new();
    for c in candidates(dirs, os) {
        if !c.path.is_file() {
            continue;
        }
        let key = c.path.canonicalize().unwrap_or_else(|_| c.path.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(c);
    }
    out
}

/// Whether `path` is one of the conventional locations of `dirs`.
pub fn is_conventional(dirs: &Dirs, os: Os, path: &Path) -> bool {
    candidates(dirs, os).iter().any(|c| c.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> Dirs {
        Dirs {
            home: PathBuf::from("/home/u"),
            project: PathBuf::from("/work/p"),
            appdata: None,
            xdg_config: None,
        }
    }

    #[test]
    fn per_os_paths() {
        let linux = candidates(&dirs(), Os::Linux);
        assert_eq!(
            linux[0].path,
            PathBuf::from("/home/u/.config/Claude/claude_desktop_config.json")
        );
        let mac = candidates(&dirs(), Os::MacOs);
        assert_eq!(
            mac[0].path,
            PathBuf::from("/home/u/Library/Application Support/Claude/claude_desktop_config.json")
        );
        assert!(mac
            .iter()
            .any(|c| c.path
                == Path::new("/home/u/Library/Application Support/Code/User/settings.json")));
        let mut d = dirs();
        d.appdata = Some(PathBuf::from("/c/Users/u/AppData/Roaming"));
        let win = candidates(&d, Os::Windows);
        assert_eq!(
            win[0].path,
            PathBuf::from("/c/Users/u/AppData/Roaming/Claude/claude_desktop_config.json")
        );
        assert!(linux.iter().any(
            |c| c.path == Path::new("/work/p/.vscode/mcp.json") && c.kind == ClientKind::VsCode
        ));
        assert!(linux.iter().any(|c| c.path
            == Path::new("/home/u/.codeium/windsurf/mcp_config.json")
            && c.kind == ClientKind::Windsurf));
    }

    #[test]
    fn existing_finds_only_files_that_are_there() {
        let home = tempfile::tempdir().unwrap();
        let d = Dirs {
            home: home.path().to_path_buf(),
            project: home.path().to_path_buf(),
            appdata: None,
            xdg_config: None,
        };
        assert!(existing(&d, Os::Linux).is_empty());
        std::fs::create_dir_all(home.path().join(".cursor")).unwrap();
        std::fs::write(home.path().join(".cursor/mcp.json"), "{\"mcpServers\": {}}").unwrap();
        let found = existing(&d, Os::Linux);
        // Home and project are the same directory: listed once.
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, ClientKind::Cursor);
    }
}

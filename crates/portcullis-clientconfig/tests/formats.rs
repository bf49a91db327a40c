//! Real configuration files of each client (written for this project, in the
//! shapes the clients document), parsed and wrapped/unwrapped on disk.

use portcullis_clientconfig::wrap::{self, Change};
use portcullis_clientconfig::{ClientConfig, ClientKind, ServerEntry, Transport};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture, by its path under `tests/fixtures`.
const FILES: &[&str] = &[
    "claude-desktop/claude_desktop_config.json",
    "claude-code/project/.mcp.json",
    "claude-code/.claude.json",
    "cursor/.cursor/mcp.json",
    "vscode/.vscode/mcp.json",
    "vscode-settings/settings.json",
    "vscode-settings-dotted/settings.json",
    "windsurf/mcp_config.json",
    "list/servers.json",
];

fn load(rel: &str) -> ClientConfig {
    ClientConfig::load(&fixtures().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn stdio(e: &ServerEntry) -> (&str, Vec<&str>) {
    match &e.transport {
        Transport::Stdio { command, args, .. } => {
            (command.as_str(), args.iter().map(String::as_str).collect())
        }
        other => panic!("{}: not stdio: {other:?}", e.name),
    }
}

fn remote(e: &ServerEntry) -> (&str, &str) {
    match &e.transport {
        Transport::Remote { url, url_key, .. } => (url.as_str(), url_key.as_str()),
        other => panic!("{}: not remote: {other:?}", e.name),
    }
}

#[test]
fn each_client_format_gives_its_servers_with_arguments_intact() {
    let c = load("claude-desktop/claude_desktop_config.json");
    assert_eq!(c.kind, ClientKind::ClaudeDesktop);
    assert_eq!(c.servers.len(), 2);
    assert_eq!(
        stdio(&c.servers[0]),
        (
            "npx",
            vec![
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/Users/ana/My Documents",
                "/Users/ana/Документы/заметки ☕"
            ]
        )
    );
    assert_eq!(c.servers[1].name, "notes \"quoted\"");
    assert_eq!(
        c.servers[1].location,
        "$.mcpServers[\"notes \\\"quoted\\\"\"]"
    );
    assert_eq!(
        stdio(&c.servers[1]),
        (
            "/opt/notes server/bin/notes",
            vec![
                "--title",
                "say \"hi\" to ana's naïve café",
                "--tab",
                "a\tb",
                "--emoji",
                "😀",
                ""
            ]
        )
    );
    match &c.servers[1].transport {
        Transport::Stdio { env, .. } => assert_eq!(env["GREETING"], "こんにちは"),
        _ => unreachable!(),
    }
    assert_eq!(c.servers[0].line, 3);

    let c = load("claude-code/project/.mcp.json");
    assert_eq!(c.kind, ClientKind::ClaudeCode);
    assert_eq!(
        remote(&c.servers[0]),
        ("https://api.githubcopilot.example/mcp/", "url")
    );
    assert_eq!(
        stdio(&c.servers[1]).1,
        vec![
            "-m",
            "db_server",
            "--path",
            "${DB_PATH:-./data/my db.sqlite}"
        ]
    );
    // Unknown fields are kept.
    assert_eq!(c.servers[1].raw["x-team-owner"], "data-platform");

    let c = load("claude-code/.claude.json");
    let names: Vec<(&str, &str)> = c
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.location.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("memory", "$.mcpServers.memory"),
            (
                "search",
                "$.projects[\"/home/ana/work/site\"].mcpServers.search"
            )
        ]
    );
    assert!(
        matches!(&c.servers[1].transport, Transport::Remote { kind: Some(k), .. } if k == "sse")
    );

    let c = load("cursor/.cursor/mcp.json");
    assert_eq!(c.kind, ClientKind::Cursor);
    assert_eq!(
        stdio(&c.servers[0]).1,
        vec![
            "C:\\Users\\Ana\\mcp servers\\browser.js",
            "--lang=pt-BR",
            "--greeting=Olá, mundo!"
        ]
    );
    assert!(!c.servers[0].disabled);
    assert!(c.servers[1].disabled);

    let c = load("vscode/.vscode/mcp.json");
    assert_eq!(c.kind, ClientKind::VsCode);
    assert_eq!(
        stdio(&c.servers[0]).1,
        vec![
            "mcp-server-fetch",
            "--user-agent",
            "My Agent/1.0 (ünïcödé; \"quoted\")"
        ]
    );
    assert_eq!(c.servers[0].raw["envFile"], "${workspaceFolder}/.env");
    assert_eq!(
        remote(&c.servers[1]).0,
        "https://mcp.perplexity.example/mcp"
    );

    let c = load("vscode-settings/settings.json");
    assert_eq!(c.kind, ClientKind::VsCodeSettings);
    assert_eq!(c.servers[0].location, "$.mcp.servers.time");
    assert_eq!(
        stdio(&c.servers[0]).1,
        vec!["mcp-server-time", "--local-timezone=Europe/Zürich"]
    );

    let c = load("vscode-settings-dotted/settings.json");
    assert_eq!(c.servers[0].location, "$[\"mcp.servers\"].git");
    assert_eq!(stdio(&c.servers[0]).1[2], "/home/ana/src/my repo");

    let c = load("windsurf/mcp_config.json");
    assert_eq!(c.kind, ClientKind::Windsurf);
    assert_eq!(
        remote(&c.servers[1]),
        ("https://docs.example/mcp", "serverUrl")
    );
    assert_eq!(c.servers[1].raw["disabledTools"][0], "delete_page");

    let c = load("list/servers.json");
    assert_eq!(c.kind, ClientKind::List);
    assert_eq!(
        stdio(&c.servers[0]).1,
        vec!["--motd", "it's a \"test\" — ok"]
    );
    assert_eq!(c.servers[1].name, "weather");
    assert_eq!(c.servers[1].raw["owner"], "ops");
}

/// Copy a fixture into a temporary directory (same relative path).
fn copy(rel: &str, dir: &Path) -> PathBuf {
    let to = dir.join(rel);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(fixtures().join(rel), &to).unwrap();
    to
}

fn remote_hook(
    dir: &Path,
) -> impl FnMut(&ServerEntry) -> Result<(Vec<String>, PathBuf), String> + '_ {
    move |e: &ServerEntry| {
        let file = dir.join(format!("{}.toml", e.name.replace(['/', ' '], "_")));
        Ok((
            vec![
                "proxy".into(),
                "--config".into(),
                file.display().to_string(),
            ],
            file,
        ))
    }
}

#[test]
fn wrap_then_unwrap_gives_back_the_byte_identical_original_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let gw = dir.path().join("gateways");
    for rel in FILES {
        let path = copy(rel, dir.path());
        let original = std::fs::read(&path).unwrap();
        let before = ClientConfig::load(&path).unwrap();

        let plan = wrap::plan_wrap(
            &path,
            "/opt/portcullis/bin/portcullis",
            &mut remote_hook(&gw),
        )
        .unwrap();
        assert!(plan.changes_file(), "{rel}: nothing wrapped");
        wrap::apply(&plan).unwrap();
        let state = wrap::state_paths(&path);
        assert_eq!(
            std::fs::read(&state.backup).unwrap(),
            original,
            "{rel}: backup"
        );

        // Every stdio server now runs the proxy with its command and arguments as
        // separate items; remote servers run the proxy on a gateway file.
        let after = ClientConfig::load(&path).unwrap();
        assert_eq!(after.servers.len(), before.servers.len(), "{rel}");
        for (b, a) in before.servers.iter().zip(&after.servers) {
            assert_eq!(a.name, b.name);
            let (cmd, args) = stdio(a);
            assert_eq!(cmd, "/opt/portcullis/bin/portcullis", "{rel}/{}", a.name);
            match &b.transport {
                Transport::Stdio {
                    command,
                    args: orig,
                    env,
                    ..
                } => {
                    // The entry's name is the server's name; its env's names
                    // are part of its launch; then the original, item by item.
                    let name = format!("--name={}", b.name);
                    let keys: Vec<String> =
                        env.keys().map(|k| format!("--launch-env={k}")).collect();
                    let mut want = vec!["proxy", name.as_str()];
                    want.extend(keys.iter().map(String::as_str));
                    want.extend(["--", command.as_str()]);
                    want.extend(orig.iter().map(String::as_str));
                    assert_eq!(args, want, "{rel}/{}", a.name);
                    assert_eq!(
                        a.wrapped(),
                        Some(portcullis_clientconfig::Wrapped::Stdio {
                            command: command.clone(),
                            args: orig.clone(),
                        }),
                        "{rel}/{}: the wrapper gives the original back",
                        a.name
                    );
                    // Other members are untouched.
                    for (k, v) in b.raw.as_object().unwrap() {
                        if k != "command" && k != "args" {
                            assert_eq!(&a.raw[k], v, "{rel}/{}: {k}", a.name);
                        }
                    }
                }
                Transport::Remote { .. } => {
                    assert_eq!(&args[..2], &["proxy", "--config"], "{rel}/{}", a.name);
                    assert!(a.raw.get("url").is_none() && a.raw.get("serverUrl").is_none());
                    assert!(a.raw.get("headers").is_none());
                }
                Transport::Invalid { .. } => unreachable!(),
            }
        }
        // Bytes outside the entries are untouched.
        let first = before.servers.first().unwrap().span.start;
        let last = before.servers.last().unwrap().span.end;
        let wrapped_text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            &wrapped_text[..first],
            &before.text[..first],
            "{rel}: prefix"
        );
        let tail = before.text.len() - last;
        assert_eq!(
            &wrapped_text[wrapped_text.len() - tail..],
            &before.text[last..],
            "{rel}: suffix"
        );

        // Wrapping twice changes nothing.
        let again = wrap::plan_wrap(
            &path,
            "/opt/portcullis/bin/portcullis",
            &mut remote_hook(&gw),
        )
        .unwrap();
        assert!(!again.changes_file(), "{rel}: second wrap changed the file");
        assert!(again
            .changes
            .iter()
            .all(|c| matches!(c, Change::Unchanged { .. })));
        wrap::apply(&again).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), wrapped_text);

        // Unwrap: the original, byte for byte; backup and manifest gone.
        let plan = wrap::plan_unwrap(&path).unwrap();
        assert!(
            plan.diff()
                .lines()
                .any(|l| l.starts_with('+') && !l.starts_with("+++")),
            "{rel}: no diff"
        );
        wrap::apply(&plan).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            original,
            "{rel}: unwrap is not byte-identical"
        );
        assert!(
            !state.backup.exists() && !state.manifest.exists(),
            "{rel}: state left behind"
        );
    }
}

#[test]
fn an_edit_after_wrap_survives_unwrap_and_a_new_server_is_wrapped_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy("vscode-settings/settings.json", dir.path());
    let original = std::fs::read_to_string(&path).unwrap();
    let plan = wrap::plan_wrap(&path, "portcullis", &mut remote_hook(dir.path())).unwrap();
    wrap::apply(&plan).unwrap();
    // The user changes a setting and adds a server while wrapped.
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"editor.fontSize\": 14", "\"editor.fontSize\": 16")
        .replace(
            "\"servers\": {",
            "\"servers\": {\n            \"new one\": {\"command\": \"uvx\", \"args\": [\"x y\"]},",
        );
    std::fs::write(&path, &edited).unwrap();
    let plan = wrap::plan_wrap(&path, "portcullis", &mut remote_hook(dir.path())).unwrap();
    assert_eq!(
        plan.changes,
        vec![
            Change::Wrapped {
                name: "new one".into()
            },
            Change::Unchanged {
                name: "time".into()
            }
        ]
    );
    wrap::apply(&plan).unwrap();
    let c = ClientConfig::load(&path).unwrap();
    assert_eq!(
        stdio(&c.servers[0]).1,
        vec!["proxy", "--name=new one", "--", "uvx", "x y"]
    );
    // Unwrap restores what the user had with the wrappers taken off: their edits
    // kept, every entry as it was (the comments inside the file too).
    wrap::apply(&wrap::plan_unwrap(&path).unwrap()).unwrap();
    let want = original
        .replace("\"editor.fontSize\": 14", "\"editor.fontSize\": 16")
        .replace(
            "\"servers\": {",
            "\"servers\": {\n            \"new one\": {\"command\": \"uvx\", \"args\": [\"x y\"]},",
        );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), want);
}

#[test]
fn a_tampered_backup_is_not_restored() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy("list/servers.json", dir.path());
    wrap::apply(&wrap::plan_wrap(&path, "portcullis", &mut remote_hook(dir.path())).unwrap())
        .unwrap();
    std::fs::write(wrap::state_paths(&path).backup, "[]").unwrap();
    assert!(matches!(
        wrap::plan_unwrap(&path),
        Err(wrap::WrapError::BackupMismatch { .. })
    ));
}

//! The client-config parser (`portcullis-clientconfig`) on arbitrary text, as
//! every client format it reads (the file name decides the kind; the content
//! decides where the servers are), and the `wrap`/`unwrap` rewrite.
//!
//! Properties:
//! - the JSON-with-comments parser accepts all JSON `serde_json` accepts and gives
//!   the same value; every node's span lies inside the text on char boundaries;
//! - each server entry's span is its own text: it parses to the entry's `raw`
//!   value, and `line` is the line of its first byte;
//! - wrapping writes a file that parses again with the same servers, each wrapped
//!   one (the last under its key, the one a client reads) now marked as wrapped,
//!   and unwrapping it with the manifest gives back the
//!   original byte for byte (when nothing in it was wrapped before).

use portcullis_clientconfig::jsonc::{self, Kind, Node};
use portcullis_clientconfig::{wrap, ClientConfig, ServerEntry, Transport};
use std::path::{Path, PathBuf};

use super::split_first;

/// One file name per format `ClientKind::of` tells apart.
const PATHS: &[&str] = &[
    "/home/u/.config/Claude/claude_desktop_config.json",
    "/home/u/project/.mcp.json",
    "/home/u/.claude.json",
    "/home/u/.cursor/mcp.json",
    "/home/u/project/.vscode/mcp.json",
    "/home/u/.config/Code/User/settings.json",
    "/home/u/.codeium/windsurf/mcp_config.json",
    "/home/u/servers.json",
];

const PROXY: &str = "/opt/portcullis/bin/portcullis";

pub fn run(data: &[u8]) {
    let (mode, rest) = split_first(data);
    // A configuration file is read as UTF-8 (`read_to_string`); other bytes are
    // refused before the parser sees them.
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let path = Path::new(PATHS[usize::from(mode) % PATHS.len()]);

    let parsed = jsonc::parse(text);
    if let Ok(strict) = serde_json::from_str::<serde_json::Value>(text) {
        match &parsed {
            Ok(node) => assert_eq!(node.to_value(), strict, "jsonc and serde_json differ"),
            Err(e) => panic!("jsonc refuses JSON that serde_json accepts: {e}"),
        }
    }
    if let Ok(node) = &parsed {
        check_spans(text, node);
    }

    let Ok(cfg) = ClientConfig::parse(path, text.to_string()) else {
        return;
    };
    for s in &cfg.servers {
        check_entry(text, s);
    }

    let mut remote = |e: &ServerEntry| -> Result<(Vec<String>, PathBuf), String> {
        let file = PathBuf::from(format!("/tmp/gateways/{}.toml", e.name.len()));
        Ok((
            vec![
                "proxy".into(),
                "--config".into(),
                file.display().to_string(),
            ],
            file,
        ))
    };
    let (after, _changes, entries) = wrap::wrap_text(&cfg, PROXY, &mut remote);
    if after == text {
        return;
    }
    let wrapped = ClientConfig::parse(path, after.clone())
        .unwrap_or_else(|e| panic!("the wrapped file does not parse: {e}\n{after}"));
    let names = |c: &ClientConfig| c.servers.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&wrapped), names(&cfg), "wrapping changed the servers");
    // Of two entries under one key a client reads the last: that one must run
    // the proxy, unless it is no server at all (wrap skips those; no client
    // starts them).
    for e in &entries {
        let s = wrapped
            .servers
            .iter()
            .rev()
            .find(|s| s.location == e.location)
            .unwrap_or_else(|| panic!("the wrapped entry {} is gone", e.location));
        assert!(
            s.wrapped().is_some() || matches!(s.transport, Transport::Invalid { .. }),
            "the entry {} is not marked as wrapped after wrap",
            e.location
        );
    }
    if cfg.servers.iter().all(|s| s.wrapped().is_none()) {
        let (back, _) = wrap::unwrap_text(&wrapped, &entries);
        assert_eq!(back, text, "unwrap does not give back the original");
    }
}

fn check_spans(text: &str, node: &Node) {
    let r = &node.span;
    assert!(
        r.start <= r.end && r.end <= text.len(),
        "node span {r:?} outside the text ({} bytes)",
        text.len()
    );
    assert!(
        text.is_char_boundary(r.start) && text.is_char_boundary(r.end),
        "node span {r:?} not on character boundaries"
    );
    match &node.kind {
        Kind::Array(items) => items.iter().for_each(|n| check_spans(text, n)),
        Kind::Object(members) => {
            for m in members {
                let k = &m.key_span;
                assert!(
                    k.end <= text.len()
                        && text.is_char_boundary(k.start)
                        && text.is_char_boundary(k.end),
                    "key span {k:?} not inside the text on boundaries"
                );
                check_spans(text, &m.value);
            }
        }
        _ => {}
    }
}

fn check_entry(text: &str, s: &ServerEntry) {
    let own = text.get(s.span.clone()).unwrap_or_else(|| {
        panic!(
            "entry {}: span {:?} is not a slice of the text",
            s.location, s.span
        )
    });
    let node = jsonc::parse(own)
        .unwrap_or_else(|e| panic!("entry {}: its own text does not parse: {e}", s.location));
    assert_eq!(
        node.to_value(),
        s.raw,
        "entry {}: its text is not its value",
        s.location
    );
    let line = 1 + text.as_bytes()[..s.span.start]
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    assert_eq!(line, s.line, "entry {}: line", s.location);
}

//! How often the tool-transfer check (`redirect::transfer`) would hold real text
//! returned as a tool result: reads JSONL (`{"id", "text"}` per line, as the
//! harvest's `corpus/harvest/*.jsonl.gz` are) on stdin, checks each text as the
//! result of server-filesystem's `read_text_file` in a session that also lists
//! mcp-server-fetch's and mcp-server-git's tools, prints each hit (id, length,
//! phrase, target, the words around it) and the count on stderr.
//!
//!     zcat corpus/harvest/texts.jsonl.gz | cargo run --release -p portcullis-controls --example transfer_scan
use portcullis_controls::redirect::transfer;
use serde_json::{json, Value};
use std::io::BufRead;

#[path = "../tests/support/git_tools.rs"]
mod git_tools;

/// @modelcontextprotocol/server-filesystem@2026.8.31 and mcp-server-fetch
/// (tests/real_servers): with mcp-server-git's, the tools a client of the three
/// lists.
const LISTED: &[&str] = &[
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "write_file",
    "edit_file",
    "create_directory",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "move_file",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
    "fetch",
];

fn main() -> std::io::Result<()> {
    let known: Vec<String> = LISTED
        .iter()
        .chain(git_tools::GIT_TOOLS)
        .map(|s| s.to_string())
        .collect();
    let (mut texts, mut hits) = (0usize, 0usize);
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            eprintln!("stdin:{}: not a JSON object; skipped", n + 1);
            continue;
        };
        let (Some(id), Some(text)) = (v["id"].as_str(), v["text"].as_str()) else {
            eprintln!("stdin:{}: no \"id\" and \"text\" strings; skipped", n + 1);
            continue;
        };
        texts += 1;
        let result = json!({"content": [{"type": "text", "text": text}]});
        let found = transfer(
            &result,
            "read_text_file",
            &json!({"path": "/data/file"}),
            &known,
        );
        if let Some(h) = found.first() {
            hits += 1;
            let mut start = h.span.start.saturating_sub(60);
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (h.span.end + 60).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            println!(
                "{id}\t{} bytes\t{:?} -> {}\t{:?}",
                text.len(),
                h.phrase,
                h.target.as_deref().unwrap_or("?"),
                &text[start..end]
            );
        }
    }
    eprintln!("{hits} of {texts} texts would be held as a tool transfer");
    Ok(())
}

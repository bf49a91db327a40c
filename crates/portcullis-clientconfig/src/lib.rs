//! MCP client configurations, one job: find them, read them, and rewrite their
//! server entries so they run behind `portcullis proxy` (and back).
//!
//! - [`jsonc`] — a JSON(-with-comments) parser that keeps byte spans.
//! - [`model`] — the client formats (Claude Desktop, Claude Code, Cursor, VS Code
//!   `mcp.json` and `settings.json`, Windsurf, a plain list) and their server
//!   entries (stdio and remote), unknown fields preserved.
//! - [`discover`] — where each client keeps its configuration, per OS.
//! - [`vars`] — the `${…}` variables clients expand in entries.
//! - [`wrap`] — `wrap`/`unwrap`: in-place rewrites, backup, manifest; [`diff`] for
//!   `--dry-run`.

pub mod diff;
pub mod discover;
pub mod jsonc;
pub mod model;
pub mod vars;
pub mod wrap;

pub use model::{ClientConfig, ClientKind, ConfigError, ServerEntry, Transport, Wrapped};

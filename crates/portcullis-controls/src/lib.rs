//! The structural controls: what Portcullis checks about MCP definitions, calls
//! and results beyond their text, each as a pure analysis with its policy, and
//! the SQLite state they keep. No transport and no audit log: the gateway
//! (`portcullis-mcp`) calls them on its message path and writes their records;
//! `audit` and `scan --structural` call [`analyze`] offline.
//!
//! - [`pins`] — canonical hash, field-by-field diff and rename similarity of a
//!   definition (trust on first use, rug-pull detection).
//! - [`names`] — names across servers and copies within one; shadowing.
//! - [`params`] — over-privileged parameters.
//! - [`redirect`] — preference manipulation; tool transfer in results.
//! - [`metadata`] — the findings of one listed tool or prompt under the
//!   `[names]`/`[params]`/`[redirection]` policies: the one source for the
//!   gateway and `audit`.
//! - [`taint`] — labels on values a server returned; egress checks on arguments.
//! - [`destination`] — whether a sink call sends a server's data back out to a
//!   destination the client named.
//! - [`operands`] — values written in one tool's definition passed to another.
//! - [`launch`] — how a server was started, for pins made under a launch.
//! - [`store`] — pins, review queue, allowlist, taint labels, launches (SQLite).
//! - [`finding`] — a structural finding on a JSON path.
//! - [`config`] — the controls' tables of `gateway.toml`.
//! - [`analyze`] — every analyzer over a snapshot of listings, offline.

pub mod analyze;
pub mod code_name;
pub mod config;
pub mod destination;
pub mod finding;
pub mod launch;
pub mod metadata;
pub mod names;
pub mod operands;
pub mod params;
pub mod pins;
pub mod redirect;
pub mod store;
pub mod taint;

/// The stage name of structural records (the gateway's and `analyze`'s).
pub const STAGE_STRUCTURAL: &str = "structural";

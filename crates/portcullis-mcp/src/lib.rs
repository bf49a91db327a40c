//! The MCP gateway: a server toward the client and a client toward each upstream
//! (both on `rmcp`), with every text a server hands the model inspected by the
//! detector before the client sees it, and every decision durably logged first.
//!
//! - [`config`] — `gateway.toml`: upstreams, listeners, limits, failure behaviour.
//! - [`upstream`] — connections to upstream servers (stdio children, Streamable HTTP).
//! - [`router`] — which downstream session a server's own request or progress is for.
//! - [`gateway`] — the per-method paths: route, forward, inspect, answer.
//! - [`inspect`] — from MCP messages to decision records; sanitizing metadata.
//! - [`audit`] — the JSONL audit log with its SQLite index (group commit, fsync).
//! - [`serve`] — the stdio and Streamable HTTP listeners.
//! - [`structural`] — the structural controls (issue 7): [`pins`] (trust on first
//!   use, rug-pull detection), [`names`] (names across servers), [`params`]
//!   (over-privileged parameters), [`taint`] (taint and egress), [`operands`]
//!   (values of one tool's definition passed to another tool), [`redirect`]
//!   (preference manipulation, tool transfer), [`metadata`] (the findings of one
//!   listed definition under the gateway's policies, for gateway and `audit`
//!   alike), [`store`] (pins, review queue,
//!   allowlist in SQLite, and [`launch`]es: how each server was started).
//! - [`analyze`] — every analyzer over a snapshot of listings, offline (`audit`,
//!   `scan --structural`); [`probe`] lists one server for `audit`.

pub mod analyze;
pub mod audit;
pub mod config;
pub mod gateway;
pub mod inspect;
pub mod launch;
pub mod metadata;
pub mod names;
pub mod operands;
pub mod params;
pub mod pins;
pub mod probe;
pub mod redirect;
pub mod router;
pub mod serve;
pub mod store;
pub mod structural;
pub mod taint;
pub mod upstream;

/// The newest protocol revision the gateway speaks, on both sides. Revisions from
/// 2026-07-28 on drop the `initialize` lifecycle and carry server requests inside
/// results (MRTR); the gateway relays the session lifecycle only, so it negotiates
/// the last revision that has it with clients and upstreams alike.
pub const MAX_PROTOCOL: rmcp::model::ProtocolVersion = rmcp::model::ProtocolVersion::V_2025_11_25;

pub use audit::{AuditConfig, AuditLog};
pub use config::{GatewayConfig, ServerConfig};
pub use gateway::{Gateway, GatewayError};

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
//! - [`serve`] — the stdio and Streamable HTTP listeners, and the metrics endpoint.
//! - [`metrics`] — Prometheus counters and histograms of decisions, stages,
//!   requests, upstreams and the review queue.
//! - [`structural`] — the gateway's use of the controls of `portcullis-controls`
//!   (pins, names, parameters, taint, operands, redirects, the state store):
//!   their verdicts on each listed definition, call and result, approvals, the
//!   review queue, and the decision records.
//! - [`probe`] — lists one server (stdio or Streamable HTTP) under a deadline,
//!   for `audit`.

pub mod audit;
pub mod config;
pub mod gateway;
pub mod inspect;
pub mod metrics;
pub mod probe;
pub mod router;
pub mod serve;
pub mod structural;
pub mod upstream;

/// The newest protocol revision the gateway speaks, on both sides. Revisions from
/// 2026-07-28 on drop the `initialize` lifecycle and carry server requests inside
/// results (MRTR); the gateway relays the session lifecycle only, so it negotiates
/// the last revision that has it with clients and upstreams alike.
pub const MAX_PROTOCOL: rmcp::model::ProtocolVersion = rmcp::model::ProtocolVersion::V_2025_11_25;

pub use audit::{AuditConfig, AuditLog};
pub use config::{GatewayConfig, ServerConfig};
pub use gateway::{Gateway, GatewayError};

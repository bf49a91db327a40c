//! One module per fuzz target; each has `pub fn run(data: &[u8])`.

pub mod clientconfig;
pub mod decode;
pub mod jsonrpc_http;
pub mod jsonrpc_stdio;
pub mod normalize;
pub mod tool_definition;

/// The first byte of `data` (0 if empty) and the rest: a target's choice of mode,
/// so one input picks both a path through the target and the bytes it feeds.
pub(crate) fn split_first(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((b, rest)) => (*b, rest),
        None => (0, data),
    }
}

//! mcp-server-git's tools (PyPI `mcp-server-git`, tests/real_servers), as a
//! client lists them: shared by `tests/tool_transfer_git.rs` and
//! `examples/transfer_scan.rs`.

pub const GIT_TOOLS: &[&str] = &[
    "git_status",
    "git_diff_unstaged",
    "git_diff_staged",
    "git_diff",
    "git_commit",
    "git_add",
    "git_reset",
    "git_log",
    "git_create_branch",
    "git_checkout",
    "git_show",
    "git_branch",
];

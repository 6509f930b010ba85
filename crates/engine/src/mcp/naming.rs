//! The names MCP tools are offered to the model under.
//!
//! Two servers may both have a `search` tool, and a model's tool names must match
//! `^[A-Za-z0-9_-]{1,64}$`, so every MCP tool is offered as `<prefix>__<tool>`:
//! - `<prefix>` is the server's name with every character outside `[A-Za-z0-9_-]` replaced
//!   by `_`, cut to 24 characters; when two of the agent's servers would get the same prefix
//!   (or a server's name has nothing left), each of them is `mcp<i>` instead, `i` being the
//!   server's position in `mcp_servers`;
//! - `<tool>` is the tool's name sanitised the same way; when the whole name would pass 64
//!   characters, the tool part is cut and ends with 8 hex digits of a hash of the full tool
//!   name, so long names stay apart.
//!
//! A name that still collides with another offered tool (a custom tool, a built-in, or a
//! second MCP tool whose sanitised name is the same) is not offered; the log says so.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// Longest tool name the Messages API accepts.
const MAX_NAME: usize = 64;
/// Longest server prefix.
const MAX_PREFIX: usize = 24;

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The prefix of each server (by name), for servers in declaration order.
pub fn prefixes(servers: &[&str]) -> HashMap<String, String> {
    let plain: Vec<String> = servers
        .iter()
        .map(|s| sanitize(s).chars().take(MAX_PREFIX).collect())
        .collect();
    servers
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let p = &plain[i];
            let shared = plain.iter().filter(|q| *q == p).count() > 1;
            let prefix = if shared || p.trim_matches('_').is_empty() {
                format!("mcp{i}")
            } else {
                p.clone()
            };
            (name.to_string(), prefix)
        })
        .collect()
}

/// The name tool `tool` of the server with `prefix` is offered under.
pub fn offered_name(prefix: &str, tool: &str) -> String {
    let tool_part = sanitize(tool);
    let full = format!("{prefix}__{tool_part}");
    if full.len() <= MAX_NAME && tool_part == tool {
        return full;
    }
    if full.len() <= MAX_NAME {
        // Sanitised: a hash keeps `a.b` and `a_b` apart.
        let room = MAX_NAME - prefix.len() - 2 - 9;
        if tool_part.len() <= room {
            return format!("{prefix}__{tool_part}_{}", short_hash(tool));
        }
    }
    let room = MAX_NAME - prefix.len() - 2 - 9;
    let cut: String = tool_part.chars().take(room).collect();
    format!("{prefix}__{cut}_{}", short_hash(tool))
}

fn short_hash(s: &str) -> String {
    let d = Sha256::digest(s.as_bytes());
    d.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_apart() {
        let p = prefixes(&[
            "linear",
            "git hub",
            "git_hub",
            "ünïcode",
            "a-very-long-server-name-that-goes-on",
        ]);
        assert_eq!(p["linear"], "linear");
        // Same sanitised prefix: positions keep them apart.
        assert_eq!(p["git hub"], "mcp1");
        assert_eq!(p["git_hub"], "mcp2");
        assert_eq!(p["ünïcode"], "_n_code");
        assert_eq!(p["a-very-long-server-name-that-goes-on"].len(), 24);
        assert_eq!(
            offered_name("linear", "create_issue"),
            "linear__create_issue"
        );
        let dotted = offered_name("linear", "issues.create");
        assert!(dotted.starts_with("linear__issues_create_"), "{dotted}");
        assert_ne!(dotted, offered_name("linear", "issues_create"));
        let long = "x".repeat(100);
        let n = offered_name(&"p".repeat(24), &long);
        assert_eq!(n.len(), 64);
        assert_ne!(n, offered_name(&"p".repeat(24), &format!("{long}y")));
        for name in [dotted, n] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
    }
}

//! Narrowing an inline agent's tools to its coordinator's. The model writes an inline agent's
//! definition, so whatever it asks for is clamped to what the user already lets the
//! coordinator do: the result holds only tools the coordinator has, each enabled only where
//! the coordinator's is, under a policy at least as strict, and with web domain lists that
//! only narrow. The narrowing is a meet, so narrowing again (a delegate's own delegate, were
//! deeper delegation ever allowed) can never widen anything down a chain.
//!
//! Clamped rather than refused: the model never sees its own permission configuration, and the
//! shortest inline definition (`{"type":"agent_toolset_20260401"}`) means `always_allow`, so a
//! refusal would turn away nearly every inline agent of a stricter coordinator with an error
//! the model could not act on. The thread's agent shows the tools actually enforced.

use mast_domain::tools::{
    BUILTIN_TOOLS, BuiltinToolConfig, PermissionPolicy, Tool, ToolsetDefaultConfig,
};

/// How strict a policy is: `always_allow` < `auto` < `always_ask`. `always_ask` ranks above
/// `auto` because nothing under it runs without a person's answer. (A disabled tool is
/// stricter than all three; that is `enabled`, narrowed separately.)
fn rank(policy: PermissionPolicy) -> u8 {
    match policy {
        PermissionPolicy::AlwaysAllow => 0,
        PermissionPolicy::Auto => 1,
        PermissionPolicy::AlwaysAsk => 2,
    }
}

/// The stricter of two policies.
pub fn stricter(a: PermissionPolicy, b: PermissionPolicy) -> PermissionPolicy {
    if rank(a) >= rank(b) { a } else { b }
}

/// `tools`, narrowed to what `coordinator` (the tools of the agent defining them) allows.
pub fn narrow(tools: &[Tool], coordinator: &[Tool]) -> Vec<Tool> {
    let coordinator_toolset = coordinator
        .iter()
        .find(|t| matches!(t, Tool::AgentToolset { .. }));
    tools
        .iter()
        .filter_map(|tool| match tool {
            Tool::AgentToolset { .. } => coordinator_toolset.map(|c| narrow_toolset(tool, c)),
            // A custom tool is run by the client: the model may pass on one the client
            // already serves for the coordinator, under the coordinator's definition, and
            // never invent one the client would take for another agent's.
            Tool::Custom(custom) => coordinator
                .iter()
                .find(|c| matches!(c, Tool::Custom(theirs) if theirs.name == custom.name))
                .cloned(),
            // An MCP toolset needs a server and its credentials, which belong to the
            // coordinator's definition; inline agents declare no servers.
            Tool::McpToolset { .. } => None,
        })
        .collect()
}

/// The effective configuration of built-in tool `name` in a toolset.
fn effective(toolset: &Tool, name: &str) -> BuiltinToolConfig {
    let (enabled, permission_policy) = toolset
        .builtin_config(name)
        .expect("called with the built-in toolset");
    let configured = match toolset {
        Tool::AgentToolset { configs, .. } => configs.iter().find(|c| c.name == name),
        _ => None,
    };
    match configured {
        Some(c) => c.clone(),
        None => BuiltinToolConfig {
            name: name.to_string(),
            enabled,
            permission_policy,
            allowed_domains: None,
            blocked_domains: None,
            max_content_tokens: None,
            url_sources: None,
            user_location: None,
        },
    }
}

/// Both built-in toolsets met tool by tool; every tool is configured explicitly, so the
/// thread's agent shows each tool's enforced policy whatever the defaults said.
fn narrow_toolset(requested: &Tool, coordinator: &Tool) -> Tool {
    let default = |t: &Tool| match t {
        Tool::AgentToolset { default_config, .. } => default_config.clone(),
        _ => unreachable!("called with the built-in toolset"),
    };
    let (rd, cd) = (default(requested), default(coordinator));
    let configs = BUILTIN_TOOLS
        .iter()
        .map(|name| meet(effective(requested, name), effective(coordinator, name)))
        .collect();
    Tool::AgentToolset {
        default_config: ToolsetDefaultConfig {
            enabled: rd.enabled && cd.enabled,
            permission_policy: stricter(rd.permission_policy, cd.permission_policy),
        },
        configs,
    }
}

/// One tool's configuration at least as strict as both: enabled only if both are, the
/// stricter policy, the intersection of allowed domains and the union of blocked ones.
fn meet(r: BuiltinToolConfig, c: BuiltinToolConfig) -> BuiltinToolConfig {
    let allowed = match (&r.allowed_domains, &c.allowed_domains) {
        (Some(a), Some(b)) => Some(intersect(a, b)),
        (a, b) => a.clone().or_else(|| b.clone()),
    };
    let blocked = match (r.blocked_domains, c.blocked_domains) {
        (Some(mut a), Some(b)) => {
            for d in b {
                if !a.contains(&d) {
                    a.push(d);
                }
            }
            Some(a)
        }
        (a, b) => a.or(b),
    };
    // No domain both lists allow: nothing may be fetched, so the tool is off, and the
    // coordinator's list is kept (an empty list is not a valid configuration).
    let nothing_allowed = allowed.as_ref().is_some_and(Vec::is_empty);
    BuiltinToolConfig {
        enabled: r.enabled && c.enabled && !nothing_allowed,
        permission_policy: stricter(r.permission_policy, c.permission_policy),
        allowed_domains: if nothing_allowed {
            c.allowed_domains
        } else {
            allowed
        },
        blocked_domains: blocked,
        max_content_tokens: match (r.max_content_tokens, c.max_content_tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        // Which sources a URL may come from is the coordinator's to set when it does.
        url_sources: c.url_sources.or(r.url_sources),
        user_location: r.user_location.or(c.user_location),
        name: r.name,
    }
}

/// The host a domain entry matches, as the web tools read it: a path suffix and a leading
/// `*.` are ignored, and a domain matches itself and its subdomains.
fn host(domain: &str) -> String {
    domain
        .split('/')
        .next()
        .unwrap_or(domain)
        .trim_start_matches("*.")
        .to_ascii_lowercase()
}

/// Whether every host `inner` matches is matched by `outer`.
fn within(inner: &str, outer: &str) -> bool {
    let (i, o) = (host(inner), host(outer));
    i == o || i.ends_with(&format!(".{o}"))
}

/// The entries that match only hosts both lists allow: two domains share hosts only when one
/// lies within the other, and then the inner one is the intersection. Entries naming the same
/// hosts (`crates.io`, `*.crates.io`) are kept once.
fn intersect(a: &[String], b: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let candidates = a
        .iter()
        .filter(|d| b.iter().any(|o| within(d, o)))
        .chain(b.iter().filter(|d| a.iter().any(|o| within(d, o))));
    for d in candidates {
        if !out.iter().any(|o| host(o) == host(d)) {
            out.push(d.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mast_domain::tools::resolve_tools;
    use serde_json::{Value, json};

    fn tools(v: Value) -> Vec<Tool> {
        resolve_tools(v.as_array().unwrap()).unwrap()
    }

    fn toolset(default: &str, configs: Value) -> Value {
        json!([{"type": "agent_toolset_20260401",
            "default_config": {"permission_policy": {"type": default}}, "configs": configs}])
    }

    fn policy_of(t: &[Tool], name: &str) -> Option<(bool, PermissionPolicy)> {
        t.iter().find_map(|t| t.builtin_config(name))
    }

    #[test]
    fn policies_never_widen() {
        use PermissionPolicy::*;
        let all = [AlwaysAllow, Auto, AlwaysAsk];
        for r in all {
            for c in all {
                let narrowed = narrow(
                    &tools(toolset(&snake(r), json!([]))),
                    &tools(toolset(&snake(c), json!([]))),
                );
                let (enabled, got) = policy_of(&narrowed, "bash").unwrap();
                assert!(enabled);
                assert_eq!(got, stricter(r, c), "{r:?} under {c:?}");
                assert!(rank(got) >= rank(c) && rank(got) >= rank(r));
            }
        }
        assert_eq!(stricter(AlwaysAllow, AlwaysAsk), AlwaysAsk);
        assert_eq!(stricter(Auto, AlwaysAllow), Auto);
        assert_eq!(stricter(Auto, AlwaysAsk), AlwaysAsk);
    }

    fn snake(p: PermissionPolicy) -> String {
        serde_json::to_value(p).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn per_tool_configs_and_defaults_meet() {
        // The coordinator asks for bash, runs `auto` for read, disabled write, and allows the
        // rest; the model asks for everything allowed and turns write back on.
        let coordinator = tools(toolset(
            "always_allow",
            json!([{"name": "bash", "permission_policy": {"type": "always_ask"}},
                   {"name": "read", "permission_policy": {"type": "auto"}},
                   {"name": "write", "enabled": false}]),
        ));
        let requested = tools(toolset(
            "always_allow",
            json!([{"name": "write", "enabled": true}, {"name": "glob", "enabled": false}]),
        ));
        let narrowed = narrow(&requested, &coordinator);
        use PermissionPolicy::*;
        assert_eq!(policy_of(&narrowed, "bash"), Some((true, AlwaysAsk)));
        assert_eq!(policy_of(&narrowed, "read"), Some((true, Auto)));
        assert_eq!(policy_of(&narrowed, "write"), Some((false, AlwaysAllow)));
        assert_eq!(policy_of(&narrowed, "glob"), Some((false, AlwaysAllow)));
        assert_eq!(policy_of(&narrowed, "grep"), Some((true, AlwaysAllow)));
        // A disabled default holds for every tool not configured on.
        let coordinator = tools(json!([{"type": "agent_toolset_20260401",
            "default_config": {"enabled": false}, "configs": [{"name": "read", "enabled": true}]}]));
        let narrowed = narrow(&tools(toolset("always_allow", json!([]))), &coordinator);
        for name in BUILTIN_TOOLS {
            assert_eq!(
                policy_of(&narrowed, name).unwrap().0,
                name == "read",
                "{name}"
            );
        }
        // Narrowing again changes nothing, and the result serializes as a valid toolset.
        assert_eq!(narrow(&narrowed, &coordinator), narrowed);
        let wire: Vec<Value> =
            serde_json::from_value(serde_json::to_value(&narrowed).unwrap()).unwrap();
        assert_eq!(tools(Value::Array(wire)), narrowed);
    }

    #[test]
    fn tools_the_coordinator_lacks_are_dropped() {
        let weather = json!({"type": "custom", "name": "get_weather", "description": "d",
            "input_schema": {"type": "object"}});
        let mut theirs = weather.clone();
        theirs["description"] = json!("the model's own wording");
        theirs["input_schema"]["properties"] = json!({"x": {"type": "string"}});
        let deploy = json!({"type": "custom", "name": "deploy", "description": "d",
            "input_schema": {"type": "object"}});
        let requested = tools(json!([{"type": "agent_toolset_20260401"}, theirs, deploy]));
        let narrowed = narrow(&requested, &tools(json!([weather.clone()])));
        assert_eq!(narrowed, tools(json!([weather])));
        assert!(narrow(&requested, &[]).is_empty());
    }

    #[test]
    fn domain_lists_only_narrow() {
        let web = |allowed: Value, blocked: Value| {
            let mut c = json!({"name": "web_fetch"});
            if !allowed.is_null() {
                c["allowed_domains"] = allowed;
            }
            if !blocked.is_null() {
                c["blocked_domains"] = blocked;
            }
            tools(toolset("always_allow", json!([c])))
        };
        let fetch = |t: &[Tool]| match &t[0] {
            Tool::AgentToolset { configs, .. } => configs
                .iter()
                .find(|c| c.name == "web_fetch")
                .unwrap()
                .clone(),
            _ => unreachable!(),
        };
        let coordinator = web(json!(["docs.rs", "crates.io"]), Value::Null);
        // Unrestricted asks get the coordinator's list.
        let n = fetch(&narrow(&web(Value::Null, Value::Null), &coordinator));
        assert_eq!(
            n.allowed_domains,
            Some(vec!["docs.rs".into(), "crates.io".into()])
        );
        // Overlapping lists keep what both allow.
        let n = fetch(&narrow(
            &web(
                json!(["example.com", "api.docs.rs", "*.crates.io"]),
                Value::Null,
            ),
            &coordinator,
        ));
        assert_eq!(
            n.allowed_domains,
            Some(vec!["api.docs.rs".into(), "*.crates.io".into()])
        );
        assert!(n.enabled);
        // Nothing in common: nothing may be fetched.
        let n = fetch(&narrow(
            &web(json!(["example.com"]), Value::Null),
            &coordinator,
        ));
        assert!(!n.enabled);
        // Blocked domains add up, and an allow list meets a block list by keeping both.
        let blocking = web(Value::Null, json!(["evil.example"]));
        let n = fetch(&narrow(
            &web(Value::Null, json!(["bad.example"])),
            &blocking,
        ));
        assert_eq!(
            n.blocked_domains,
            Some(vec!["bad.example".into(), "evil.example".into()])
        );
        let n = fetch(&narrow(&web(json!(["docs.rs"]), Value::Null), &blocking));
        assert_eq!(n.allowed_domains, Some(vec!["docs.rs".into()]));
        assert_eq!(n.blocked_domains, Some(vec!["evil.example".into()]));
    }
}

//! Tool definitions on agents: the built-in toolset, MCP toolsets and custom
//! tools, their request forms, validation, and the resolved forms stored and returned.

use std::collections::BTreeSet;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use utoipa::ToSchema;

use super::custom_tool::resolve_custom;
pub use super::custom_tool::{RESERVED_TOOL_PREFIXES, reserved_custom_tool, reserved_name_message};
use super::fields::{Obj, must_be, one_of, quoted, tag};
use super::invalid::{Invalid, Valid, check_len, join};

/// A tool offered to a model: its name, what it does, and the JSON schema of its input.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Identifier of the built-in toolset.
pub const AGENT_TOOLSET: &str = "agent_toolset_20260401";

/// Names of the tools in the built-in toolset, in documentation order.
pub const BUILTIN_TOOLS: [&str; 8] = [
    "bash",
    "edit",
    "read",
    "write",
    "glob",
    "grep",
    "web_fetch",
    "web_search",
];

const MAX_TOOLS: usize = 256;
const MAX_DOMAINS: usize = 64;

/// How a tool call is authorised before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PermissionPolicy {
    AlwaysAllow,
    AlwaysAsk,
    Auto,
}

/// A toolset's resolved default configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolsetDefaultConfig {
    pub enabled: bool,
    pub permission_policy: PermissionPolicy,
}

/// Resolved per-tool configuration in the built-in toolset. Web tools carry their extra keys
/// (`null` when unset); other tools carry none.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
pub struct BuiltinToolConfig {
    pub name: String,
    pub enabled: bool,
    pub permission_policy: PermissionPolicy,
    #[serde(default)]
    pub allowed_domains: Option<Vec<String>>,
    #[serde(default)]
    pub blocked_domains: Option<Vec<String>>,
    #[serde(default)]
    pub max_content_tokens: Option<i64>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub url_sources: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub user_location: Option<Value>,
}

impl Serialize for BuiltinToolConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", &self.name)?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("enabled", &self.enabled)?;
        m.serialize_entry("permission_policy", &self.permission_policy)?;
        match self.name.as_str() {
            "web_fetch" => {
                m.serialize_entry("allowed_domains", &self.allowed_domains)?;
                m.serialize_entry("blocked_domains", &self.blocked_domains)?;
                m.serialize_entry("max_content_tokens", &self.max_content_tokens)?;
                m.serialize_entry("url_sources", &self.url_sources)?;
            }
            "web_search" => {
                m.serialize_entry("allowed_domains", &self.allowed_domains)?;
                m.serialize_entry("blocked_domains", &self.blocked_domains)?;
                m.serialize_entry("user_location", &self.user_location)?;
            }
            _ => {}
        }
        m.end()
    }
}

/// Resolved per-tool configuration in an MCP toolset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct McpToolConfig {
    pub name: String,
    pub enabled: bool,
    pub permission_policy: PermissionPolicy,
}

/// A custom tool's input schema; extra JSON Schema keys are kept as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(value_type = Object)]
pub struct InputSchema(pub serde_json::Map<String, Value>);

/// A client-executed tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CustomTool {
    pub name: String,
    pub description: String,
    pub input_schema: InputSchema,
}

/// One entry of an agent's resolved `tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type")]
pub enum Tool {
    #[serde(rename = "agent_toolset_20260401")]
    AgentToolset {
        default_config: ToolsetDefaultConfig,
        configs: Vec<BuiltinToolConfig>,
    },
    #[serde(rename = "mcp_toolset")]
    McpToolset {
        mcp_server_name: String,
        default_config: ToolsetDefaultConfig,
        configs: Vec<McpToolConfig>,
    },
    #[serde(rename = "custom")]
    Custom(CustomTool),
}

/// An MCP server declaration on an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct McpServer {
    #[serde(rename = "type")]
    pub kind: McpServerKind,
    pub name: String,
    pub url: String,
}

/// The only MCP server transport the API defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpServerKind {
    #[default]
    Url,
}

// ---- request forms ----

const MAX_MCP_SERVERS: usize = 20;

/// Reads an agent's `mcp_servers` (absent or `null` gives none): at most 20 `url` servers
/// with unique names (1-255 characters) and an `http`/`https` URL.
pub fn resolve_mcp_servers(at: &str, v: Option<&Value>) -> Valid<Vec<McpServer>> {
    let list = match v {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(must_be(at, "a list of MCP servers", other)),
    };
    if list.len() > MAX_MCP_SERVERS {
        return Err(Invalid::new(format!(
            "`{at}` has {} servers; at most {MAX_MCP_SERVERS} are allowed",
            list.len()
        )));
    }
    let mut out: Vec<McpServer> = Vec::with_capacity(list.len());
    for (i, raw) in list.iter().enumerate() {
        let sat = format!("{at}[{i}]");
        tag(&sat, raw, &["url"])?;
        let o = Obj::new(&sat, raw, "an MCP server", &["type", "name", "url"])?;
        let name = o.req_str("name")?;
        check_len(&o.path("name"), name, 1, 255)?;
        if out.iter().any(|s| s.name == name) {
            return Err(Invalid::new(format!(
                "`{sat}.name`: the server name `{name}` is used twice"
            )));
        }
        let url = o.req_str("url")?;
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Invalid::new(format!("`{}` is not a URL ({e})", o.path("url"))))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Invalid::new(format!(
                "`{}` must be an http or https URL with a host",
                o.path("url")
            )));
        }
        out.push(McpServer {
            kind: McpServerKind::Url,
            name: name.to_string(),
            url: url.to_string(),
        });
    }
    Ok(out)
}

fn resolve_mcp_toolset(at: &str, v: &Value) -> Valid<Tool> {
    let o = Obj::new(
        at,
        v,
        "an MCP toolset",
        &["type", "mcp_server_name", "default_config", "configs"],
    )?;
    let server = o.req_str("mcp_server_name")?;
    check_len(&o.path("mcp_server_name"), server, 1, 255)?;
    let default = default_config(
        &o.path("default_config"),
        o.get("default_config"),
        PermissionPolicy::AlwaysAsk,
    )?;
    let mut configs: Vec<McpToolConfig> = Vec::new();
    for (j, c) in o.list("configs")?.into_iter().flatten().enumerate() {
        let cat = format!("{at}.configs[{j}]");
        let co = Obj::new(
            &cat,
            c,
            "an MCP tool config",
            &["name", "enabled", "permission_policy"],
        )?;
        let name = co.req_str("name")?;
        check_len(&co.path("name"), name, 1, 128)?;
        if configs.iter().any(|c| c.name == name) {
            return Err(Invalid::new(format!(
                "`{at}.configs` configures `{name}` twice"
            )));
        }
        configs.push(McpToolConfig {
            name: name.to_string(),
            enabled: co.bool("enabled")?.unwrap_or(default.enabled),
            permission_policy: match co.get("permission_policy") {
                Some(p) => permission_policy(&co.path("permission_policy"), p)?,
                None => default.permission_policy,
            },
        });
    }
    Ok(Tool::McpToolset {
        mcp_server_name: server.to_string(),
        default_config: default,
        configs,
    })
}

fn permission_policy(at: &str, v: &Value) -> Valid<PermissionPolicy> {
    let kind = tag(at, v, &["always_allow", "always_ask", "auto"])?;
    Obj::new(at, v, "a permission policy", &["type"])?;
    Ok(match kind {
        "always_allow" => PermissionPolicy::AlwaysAllow,
        "always_ask" => PermissionPolicy::AlwaysAsk,
        _ => PermissionPolicy::Auto,
    })
}

fn default_config(
    at: &str,
    v: Option<&Value>,
    policy: PermissionPolicy,
) -> Valid<ToolsetDefaultConfig> {
    let Some(v) = v else {
        return Ok(ToolsetDefaultConfig {
            enabled: true,
            permission_policy: policy,
        });
    };
    let o = Obj::new(
        at,
        v,
        "a toolset's default config",
        &["enabled", "permission_policy"],
    )?;
    Ok(ToolsetDefaultConfig {
        enabled: o.bool("enabled")?.unwrap_or(true),
        permission_policy: match o.get("permission_policy") {
            Some(p) => permission_policy(&o.path("permission_policy"), p)?,
            None => policy,
        },
    })
}

fn check_domains(at: &str, field: &str, list: &Option<Vec<String>>) -> Valid<()> {
    let Some(list) = list else { return Ok(()) };
    if list.is_empty() {
        return Err(Invalid::new(format!(
            "`{at}.{field}` must not be empty when given"
        )));
    }
    if list.len() > MAX_DOMAINS {
        return Err(Invalid::new(format!(
            "`{at}.{field}` has {} entries; at most {MAX_DOMAINS} are allowed",
            list.len()
        )));
    }
    for d in list {
        let host = d.split('/').next().unwrap_or("");
        if host.is_empty() || host.contains(char::is_whitespace) || host.contains("://") {
            return Err(Invalid::new(format!(
                "`{at}.{field}` entry `{d}` is not a hostname"
            )));
        }
    }
    Ok(())
}

/// Keys every built-in tool config may have.
const CONFIG_KEYS: [&str; 4] = ["type", "name", "enabled", "permission_policy"];
const WEB_FETCH_KEYS: [&str; 8] = [
    "type",
    "name",
    "enabled",
    "permission_policy",
    "allowed_domains",
    "blocked_domains",
    "max_content_tokens",
    "url_sources",
];
const WEB_SEARCH_KEYS: [&str; 7] = [
    "type",
    "name",
    "enabled",
    "permission_policy",
    "allowed_domains",
    "blocked_domains",
    "user_location",
];

fn resolve_builtin_config(
    at: &str,
    v: &Value,
    default: &ToolsetDefaultConfig,
) -> Valid<BuiltinToolConfig> {
    // The tool's name decides which other keys its config may have, so it is read first.
    let name_at = join(at, "name");
    let name = match v.get("name") {
        _ if !v.is_object() => return Err(must_be(at, "an object", v)),
        None | Some(Value::Null) => {
            return Err(Invalid::new(format!(
                "`{name_at}` is required: one of {}",
                quoted(&BUILTIN_TOOLS)
            )));
        }
        Some(Value::String(n)) if BUILTIN_TOOLS.contains(&n.as_str()) => n.as_str(),
        Some(Value::String(n)) => return Err(one_of(&name_at, &BUILTIN_TOOLS, n)),
        Some(other) => return Err(must_be(&name_at, "a string", other)),
    };
    let known: &[&str] = match name {
        "web_fetch" => &WEB_FETCH_KEYS,
        "web_search" => &WEB_SEARCH_KEYS,
        _ => &CONFIG_KEYS,
    };
    let o = Obj::new(at, v, &format!("a `{name}` tool config"), known)?;
    if let Some(kind) = o.str("type")?
        && kind != name
    {
        return Err(Invalid::new(format!(
            "`{at}.type` must equal its name `{name}`"
        )));
    }
    // Refused rather than stored: nothing would act on them.
    if o.get("url_sources").is_some() {
        return Err(Invalid::unsupported(
            &o.path("url_sources"),
            "url_sources",
            "web_fetch does not track where a URL came from, so it cannot limit fetches by source; remove it",
        ));
    }
    if o.get("user_location").is_some() {
        return Err(Invalid::unsupported(
            &o.path("user_location"),
            "user_location",
            "web_search does not localise its results; remove it",
        ));
    }
    let allowed_domains = o.strings("allowed_domains")?;
    let blocked_domains = o.strings("blocked_domains")?;
    check_domains(at, "allowed_domains", &allowed_domains)?;
    check_domains(at, "blocked_domains", &blocked_domains)?;
    if allowed_domains.is_some() && blocked_domains.is_some() {
        return Err(Invalid::new(format!(
            "`{at}`: `allowed_domains` and `blocked_domains` cannot both be set"
        )));
    }
    let max_content_tokens = o.int("max_content_tokens")?;
    if let Some(n) = max_content_tokens
        && n < 1
    {
        return Err(Invalid::new(format!(
            "`{at}.max_content_tokens` must be positive"
        )));
    }
    Ok(BuiltinToolConfig {
        name: name.to_string(),
        enabled: o.bool("enabled")?.unwrap_or(default.enabled),
        permission_policy: match o.get("permission_policy") {
            Some(p) => permission_policy(&o.path("permission_policy"), p)?,
            None => default.permission_policy,
        },
        allowed_domains,
        blocked_domains,
        max_content_tokens,
        url_sources: None,
        user_location: None,
    })
}

/// Validates an agent's `tools` (as the `tools` field) and returns their resolved forms.
pub fn resolve_tools(tools: &[Value]) -> Valid<Vec<Tool>> {
    resolve_tools_at("tools", tools)
}

/// Validates a `tools` list found at `at` (`tools`, or `agent.tools` in a session body).
pub fn resolve_tools_at(at: &str, tools: &[Value]) -> Valid<Vec<Tool>> {
    let mut out = Vec::with_capacity(tools.len());
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut count = 0usize;
    for (i, raw) in tools.iter().enumerate() {
        let tat = format!("{at}[{i}]");
        match tag(&tat, raw, &[AGENT_TOOLSET, "mcp_toolset", "custom"])? {
            AGENT_TOOLSET => {
                let o = Obj::new(
                    &tat,
                    raw,
                    "the built-in toolset",
                    &["type", "default_config", "configs"],
                )?;
                let default = default_config(
                    &o.path("default_config"),
                    o.get("default_config"),
                    PermissionPolicy::AlwaysAllow,
                )?;
                let mut resolved = Vec::new();
                let mut seen = BTreeSet::new();
                for (j, c) in o.list("configs")?.into_iter().flatten().enumerate() {
                    let r = resolve_builtin_config(&format!("{tat}.configs[{j}]"), c, &default)?;
                    if !seen.insert(r.name.clone()) {
                        return Err(Invalid::new(format!(
                            "`{tat}.configs` configures `{}` twice",
                            r.name
                        )));
                    }
                    resolved.push(r);
                }
                for name in BUILTIN_TOOLS {
                    if !names.insert(name.to_string()) {
                        return Err(Invalid::new(format!(
                            "tool name `{name}` is defined more than once across `{at}`"
                        )));
                    }
                }
                count += BUILTIN_TOOLS.len();
                out.push(Tool::AgentToolset {
                    default_config: default,
                    configs: resolved,
                });
            }
            "mcp_toolset" => {
                let toolset = resolve_mcp_toolset(&tat, raw)?;
                if let Tool::McpToolset {
                    mcp_server_name, ..
                } = &toolset
                    && out.iter().any(|t| {
                        matches!(t, Tool::McpToolset { mcp_server_name: n, .. } if n == mcp_server_name)
                    })
                {
                    return Err(Invalid::new(format!(
                        "`{tat}.mcp_server_name`: server `{mcp_server_name}` already has a toolset in `{at}`"
                    )));
                }
                out.push(toolset);
            }
            _ => {
                let tool = resolve_custom(&tat, raw)?;
                if !names.insert(tool.name.clone()) {
                    return Err(Invalid::new(format!(
                        "tool name `{}` is defined more than once across `{at}`",
                        tool.name
                    )));
                }
                count += 1;
                out.push(Tool::Custom(tool));
            }
        }
    }
    if count > MAX_TOOLS {
        return Err(Invalid::new(format!(
            "`{at}` defines {count} tools; at most {MAX_TOOLS} are allowed across all toolsets"
        )));
    }
    Ok(out)
}

/// Checks that `servers` and the `mcp_toolset`s in `tools` match one to one: every toolset
/// names a declared server and every server has a toolset.
pub fn check_mcp_toolsets(servers_at: &str, tools: &[Tool], servers: &[McpServer]) -> Valid<()> {
    for t in tools {
        if let Tool::McpToolset {
            mcp_server_name, ..
        } = t
            && !servers.iter().any(|s| &s.name == mcp_server_name)
        {
            return Err(Invalid::new(format!(
                "the `mcp_toolset` for `{mcp_server_name}` names no server in `{servers_at}`"
            )));
        }
    }
    for s in servers {
        let used = tools.iter().any(
            |t| matches!(t, Tool::McpToolset { mcp_server_name, .. } if *mcp_server_name == s.name),
        );
        if !used {
            return Err(Invalid::new(format!(
                "`{servers_at}` declares `{}`, which no `mcp_toolset` in `tools` references",
                s.name
            )));
        }
    }
    Ok(())
}

impl Tool {
    /// The effective configuration of built-in tool `name`, if this is the built-in toolset.
    pub fn builtin_config(&self, name: &str) -> Option<(bool, PermissionPolicy)> {
        match self {
            Tool::AgentToolset {
                default_config,
                configs,
            } => Some(match configs.iter().find(|c| c.name == name) {
                Some(c) => (c.enabled, c.permission_policy),
                None => (default_config.enabled, default_config.permission_policy),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolve(tools: Vec<Value>) -> Valid<Vec<Tool>> {
        resolve_tools(&tools)
    }

    #[test]
    fn resolves_the_toolset_and_custom_tools() {
        let tools = vec![
            json!({"type":"agent_toolset_20260401","configs":[{"name":"bash","permission_policy":{"type":"always_ask"}},{"name":"web_fetch","enabled":false}]}),
            json!({"type":"custom","name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}),
        ];
        let t = resolve(tools).unwrap();
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v[0]["default_config"],
            json!({"enabled":true,"permission_policy":{"type":"always_allow"}})
        );
        assert_eq!(
            v[0]["configs"][0],
            json!({"type":"bash","name":"bash","enabled":true,"permission_policy":{"type":"always_ask"}})
        );
        assert_eq!(v[0]["configs"][1]["url_sources"], Value::Null);
        assert_eq!(v[0]["configs"][1]["enabled"], json!(false));
        assert_eq!(v[1]["input_schema"]["required"], json!(["city"]));
        let back: Vec<Tool> = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, t);
        // The stored form, sent back, resolves to itself.
        let again = resolve(v.as_array().unwrap().clone()).unwrap();
        assert_eq!(again, t);
    }

    #[test]
    fn rejects_bad_definitions() {
        let custom = |name: &str| json!({"type":"custom","name":name,"description":"d","input_schema":{"type":"object"}});
        for reserved in [
            "ant__start_workflow_run",
            "ant__x",
            "mcp__github__create_issue",
        ] {
            let e = resolve(vec![custom("ok"), custom(reserved)]).unwrap_err();
            assert!(
                e.message
                    .contains(&format!("`tools[1].name`: custom tool `{reserved}`")),
                "{}",
                e.message
            );
            assert!(e.message.contains("reserved"), "{}", e.message);
        }
        // Only the prefix is reserved: the same letters elsewhere are a name like any other.
        let ok = resolve(vec![
            custom("ant_x"),
            custom("my_ant__tool"),
            custom("mcp_x"),
        ])
        .unwrap();
        assert_eq!(reserved_custom_tool(&ok), None);
        assert!(resolve(vec![custom("bad name")]).is_err());
        assert!(resolve(vec![custom("a"), custom("a")]).is_err());
        assert!(resolve(vec![json!({"type":"custom","name":"a","description":"d","input_schema":{"type":"string"}})]).is_err());
        assert!(resolve(vec![json!({"type":"nope"})]).is_err());
        let both = json!({"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","allowed_domains":["a.com"],"blocked_domains":["b.com"]}]});
        assert!(resolve(vec![both]).is_err());
        let many: Vec<Value> = (0..257).map(|i| custom(&format!("t{i}"))).collect();
        let err = resolve(many).unwrap_err();
        assert!(err.message.contains("at most 256"), "{err}");
    }

    #[test]
    fn mcp_toolsets_and_servers_resolve_and_must_match() {
        let t = resolve(vec![json!({"type":"mcp_toolset","mcp_server_name":"linear",
            "configs":[{"name":"create_issue","permission_policy":{"type":"always_allow"}},{"name":"x","enabled":false}]})])
        .unwrap();
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v[0]["default_config"],
            json!({"enabled":true,"permission_policy":{"type":"always_ask"}})
        );
        assert_eq!(
            v[0]["configs"][1],
            json!({"name":"x","enabled":false,"permission_policy":{"type":"always_ask"}})
        );
        let servers = resolve_mcp_servers(
            "mcp_servers",
            Some(&json!([{"type":"url","name":"linear","url":"https://mcp.linear.app/mcp"}])),
        )
        .unwrap();
        check_mcp_toolsets("mcp_servers", &t, &servers).unwrap();
        // A toolset without its server, a server without a toolset.
        assert!(check_mcp_toolsets("mcp_servers", &t, &[]).is_err());
        assert!(check_mcp_toolsets("mcp_servers", &[], &servers).is_err());
        for bad in [
            json!([{"type":"url","name":"a","url":"ftp://x"}]),
            json!([{"type":"url","name":"","url":"https://x"}]),
            json!([{"type":"url","name":"a","url":"https://x"},{"type":"url","name":"a","url":"https://y"}]),
            json!([{"type":"url","name":"a","url":"https://x","token":"t"}]),
            json!([{"type":"stdio","name":"a","url":"https://x"}]),
        ] {
            assert!(
                resolve_mcp_servers("mcp_servers", Some(&bad)).is_err(),
                "{bad}"
            );
        }
        let two = json!({"type":"mcp_toolset","mcp_server_name":"a"});
        assert!(resolve(vec![two.clone(), two]).is_err());
        let e = resolve(vec![
            json!({"type":"mcp_toolset","mcp_server_name":"a","configs":[{"name":"t","type":"t"}]}),
        ])
        .unwrap_err();
        assert_eq!(e.details["field"], "tools[0].configs[0].type");
    }

    #[test]
    fn ignored_settings_are_refused_as_unsupported() {
        let e = resolve(vec![json!({"type":"agent_toolset_20260401","configs":[{"name":"web_search","user_location":{"type":"approximate"}}]})]).unwrap_err();
        assert_eq!(e.details["field"], "tools[0].configs[0].user_location");
        // `null` asks for nothing, so it is fine.
        resolve(vec![json!({"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":null}]})]).unwrap();
    }

    #[test]
    fn unknown_keys_are_named_at_their_depth() {
        let e = resolve(vec![json!({"type":"agent_toolset_20260401","configs":[{"name":"bash","allowed_domains":["a.com"]}]})]).unwrap_err();
        assert_eq!(
            e.message,
            "`tools[0].configs[0].allowed_domains` is not a known field of a `bash` tool config (known fields: `type`, `name`, `enabled`, `permission_policy`)"
        );
        let e = resolve_tools_at("agent.tools", &[json!({"type":"custom","name":"a","description":"d","input_schema":{"type":"object"},"strict":true})]).unwrap_err();
        assert_eq!(e.details["field"], "agent.tools[0].strict");
    }
}

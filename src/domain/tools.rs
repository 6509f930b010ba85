//! Tool definitions on agents (API.md §3): the built-in toolset, MCP toolsets and custom
//! tools, their request forms, validation, and the resolved forms stored and returned.

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};

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
const MAX_MCP_SERVERS: usize = 20;
const MAX_DOMAINS: usize = 64;

/// How a tool call is authorised before it runs (API.md §3.4).
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

#[derive(Debug, Clone, Default, Deserialize)]
struct DefaultConfigParams {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    permission_policy: Option<PermissionPolicy>,
}

#[derive(Debug, Clone, Deserialize)]
struct BuiltinConfigParams {
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    permission_policy: Option<PermissionPolicy>,
    #[serde(default)]
    allowed_domains: Option<Vec<String>>,
    #[serde(default)]
    blocked_domains: Option<Vec<String>>,
    #[serde(default)]
    max_content_tokens: Option<i64>,
    #[serde(default)]
    url_sources: Option<Value>,
    #[serde(default)]
    user_location: Option<UserLocation>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UserLocation {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    city: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    country: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct McpConfigParams {
    name: String,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    permission_policy: Option<PermissionPolicy>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type")]
enum ToolParams {
    #[serde(rename = "agent_toolset_20260401")]
    AgentToolset {
        #[serde(default)]
        default_config: Option<DefaultConfigParams>,
        #[serde(default)]
        configs: Option<Vec<BuiltinConfigParams>>,
    },
    #[serde(rename = "mcp_toolset")]
    McpToolset {
        mcp_server_name: String,
        #[serde(default)]
        default_config: Option<DefaultConfigParams>,
        #[serde(default)]
        configs: Option<Vec<McpConfigParams>>,
    },
    #[serde(rename = "custom")]
    Custom {
        name: String,
        description: String,
        input_schema: serde_json::Map<String, Value>,
    },
}

/// An MCP server as a request sends it.
#[derive(Debug, Clone, Deserialize)]
pub struct McpServerParams {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub url: String,
}

fn parse_tool(index: usize, raw: &Value) -> Valid<ToolParams> {
    let kind = raw.get("type").and_then(Value::as_str).unwrap_or("");
    if !matches!(kind, AGENT_TOOLSET | "mcp_toolset" | "custom") {
        return Err(Invalid::new(format!(
            "`tools[{index}].type` must be one of `{AGENT_TOOLSET}`, `mcp_toolset`, `custom` (got `{kind}`)"
        )));
    }
    serde_json::from_value(raw.clone()).map_err(|e| Invalid::new(format!("`tools[{index}]`: {e}")))
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

fn normalize_url_source_filter(at: &str, v: &Value, names_must_be_server: bool) -> Valid<Value> {
    match v {
        Value::Null => Ok(Value::Null),
        Value::String(s) if s == "all" || s == "none" => Ok(serde_json::json!({ "type": s })),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some(t @ ("all" | "none")) => Ok(serde_json::json!({ "type": t })),
            Some(t @ ("only" | "except")) => {
                let tools = o.get("tools").and_then(Value::as_array).ok_or_else(|| {
                    Invalid::new(format!("`{at}.tools` must be a list of tool references"))
                })?;
                if tools.is_empty() || tools.len() > 128 {
                    return Err(Invalid::new(format!("`{at}.tools` must list 1-128 tools")));
                }
                let mut seen = BTreeSet::new();
                for t in tools {
                    let name = t.get("name").and_then(Value::as_str).unwrap_or("");
                    if t.get("type").and_then(Value::as_str) != Some("tool_reference")
                        || name.is_empty()
                    {
                        return Err(Invalid::new(format!(
                            "`{at}.tools` entries must be {{\"type\":\"tool_reference\",\"name\":...}}"
                        )));
                    }
                    if names_must_be_server && name != "web_search" && name != "web_fetch" {
                        return Err(Invalid::new(format!(
                            "`{at}.tools` may only name `web_search` or `web_fetch` (got `{name}`)"
                        )));
                    }
                    if !seen.insert(name.to_string()) {
                        return Err(Invalid::new(format!("`{at}.tools` names `{name}` twice")));
                    }
                }
                Ok(serde_json::json!({ "type": t, "tools": tools }))
            }
            _ => Err(Invalid::new(format!(
                "`{at}.type` must be `all`, `none`, `only` or `except`"
            ))),
        },
        _ => Err(Invalid::new(format!(
            "`{at}` must be \"all\", \"none\" or an object"
        ))),
    }
}

fn normalize_url_sources(at: &str, v: &Value) -> Valid<Value> {
    let Some(o) = v.as_object() else {
        return Err(Invalid::new(format!("`{at}` must be an object")));
    };
    let mut out = serde_json::Map::new();
    let mut nones = 0;
    for (key, server) in [
        ("user_input", false),
        ("client_tool_results", false),
        ("server_tool_results", true),
    ] {
        let raw = o.get(key).cloned().unwrap_or(Value::Null);
        let norm = if key == "user_input" {
            match &raw {
                Value::Object(m)
                    if matches!(
                        m.get("type").and_then(Value::as_str),
                        Some("only" | "except")
                    ) =>
                {
                    return Err(Invalid::new(format!(
                        "`{at}.user_input` must be `all` or `none`"
                    )));
                }
                _ => normalize_url_source_filter(&format!("{at}.{key}"), &raw, false)?,
            }
        } else {
            normalize_url_source_filter(&format!("{at}.{key}"), &raw, server)?
        };
        if norm.get("type").and_then(Value::as_str) == Some("none") {
            nones += 1;
        }
        out.insert(key.to_string(), norm);
    }
    if nones == 3 {
        return Err(Invalid::new(format!(
            "`{at}` cannot set every source to `none`"
        )));
    }
    Ok(Value::Object(out))
}

fn resolve_builtin_config(
    at: &str,
    p: &BuiltinConfigParams,
    default: &ToolsetDefaultConfig,
) -> Valid<BuiltinToolConfig> {
    if !BUILTIN_TOOLS.contains(&p.name.as_str()) {
        return Err(Invalid::new(format!(
            "`{at}.name` must be one of {} (got `{}`)",
            BUILTIN_TOOLS.join(", "),
            p.name
        )));
    }
    if let Some(kind) = &p.kind
        && kind != &p.name
    {
        return Err(Invalid::new(format!(
            "`{at}.type` must equal its name `{}`",
            p.name
        )));
    }
    let web = matches!(p.name.as_str(), "web_fetch" | "web_search");
    if !web && (p.allowed_domains.is_some() || p.blocked_domains.is_some()) {
        return Err(Invalid::new(format!(
            "`{at}`: domain lists are only valid for web_fetch and web_search"
        )));
    }
    if p.name != "web_fetch"
        && (p.max_content_tokens.is_some() || p.url_sources.as_ref().is_some_and(|v| !v.is_null()))
    {
        return Err(Invalid::new(format!(
            "`{at}`: `max_content_tokens` and `url_sources` are only valid for web_fetch"
        )));
    }
    if p.name != "web_search" && p.user_location.is_some() {
        return Err(Invalid::new(format!(
            "`{at}`: `user_location` is only valid for web_search"
        )));
    }
    check_domains(at, "allowed_domains", &p.allowed_domains)?;
    check_domains(at, "blocked_domains", &p.blocked_domains)?;
    if p.allowed_domains.is_some() && p.blocked_domains.is_some() {
        return Err(Invalid::new(format!(
            "`{at}`: `allowed_domains` and `blocked_domains` cannot both be set"
        )));
    }
    if let Some(n) = p.max_content_tokens
        && n < 1
    {
        return Err(Invalid::new(format!(
            "`{at}.max_content_tokens` must be positive"
        )));
    }
    let url_sources = match &p.url_sources {
        Some(v) if !v.is_null() => Some(normalize_url_sources(&format!("{at}.url_sources"), v)?),
        _ => None,
    };
    let user_location = match &p.user_location {
        Some(loc) => {
            if loc.kind != "approximate" {
                return Err(Invalid::new(format!(
                    "`{at}.user_location.type` must be `approximate`"
                )));
            }
            if let Some(c) = &loc.country
                && (c.len() != 2 || !c.chars().all(|ch| ch.is_ascii_alphabetic()))
            {
                return Err(Invalid::new(format!(
                    "`{at}.user_location.country` must be an ISO 3166 alpha-2 code"
                )));
            }
            Some(serde_json::to_value(loc).expect("serializable"))
        }
        None => None,
    };
    Ok(BuiltinToolConfig {
        name: p.name.clone(),
        enabled: p.enabled.unwrap_or(default.enabled),
        permission_policy: p.permission_policy.unwrap_or(default.permission_policy),
        allowed_domains: p.allowed_domains.clone(),
        blocked_domains: p.blocked_domains.clone(),
        max_content_tokens: p.max_content_tokens,
        url_sources,
        user_location,
    })
}

fn is_custom_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn resolve_custom(
    at: &str,
    name: &str,
    description: &str,
    schema: &serde_json::Map<String, Value>,
) -> Valid<CustomTool> {
    if !is_custom_name(name) {
        return Err(Invalid::new(format!(
            "`{at}.name` must be 1-128 characters of letters, digits, `_` or `-` (got `{name}`)"
        )));
    }
    check_len(&format!("{at}.description"), description, 1, 10_000)?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(Invalid::new(format!(
            "`{at}.input_schema.type` must be `object`"
        )));
    }
    match schema.get("properties") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        _ => {
            return Err(Invalid::new(format!(
                "`{at}.input_schema.properties` must be an object"
            )));
        }
    }
    match schema.get("required") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        _ => {
            return Err(Invalid::new(format!(
                "`{at}.input_schema.required` must be a list of property names"
            )));
        }
    }
    Ok(CustomTool {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: InputSchema(schema.clone()),
    })
}

fn resolve_default(
    p: &Option<DefaultConfigParams>,
    policy: PermissionPolicy,
) -> ToolsetDefaultConfig {
    let p = p.clone().unwrap_or_default();
    ToolsetDefaultConfig {
        enabled: p.enabled.unwrap_or(true),
        permission_policy: p.permission_policy.unwrap_or(policy),
    }
}

/// Validates an agent's `tools` and `mcp_servers` together and returns their resolved forms.
pub fn resolve_tools(
    tools: &[Value],
    servers: &[McpServerParams],
) -> Valid<(Vec<Tool>, Vec<McpServer>)> {
    if servers.len() > MAX_MCP_SERVERS {
        return Err(Invalid::new(format!(
            "`mcp_servers` has {} entries; at most {MAX_MCP_SERVERS} are allowed",
            servers.len()
        )));
    }
    let mut resolved_servers = Vec::with_capacity(servers.len());
    let mut server_names = BTreeSet::new();
    for (i, s) in servers.iter().enumerate() {
        if s.kind != "url" {
            return Err(Invalid::new(format!(
                "`mcp_servers[{i}].type` must be `url`"
            )));
        }
        check_len(&format!("mcp_servers[{i}].name"), &s.name, 1, 255)?;
        if !(s.url.starts_with("https://") || s.url.starts_with("http://")) || s.url.len() > 2048 {
            return Err(Invalid::new(format!(
                "`mcp_servers[{i}].url` must be an http(s) URL"
            )));
        }
        if !server_names.insert(s.name.clone()) {
            return Err(Invalid::new(format!(
                "`mcp_servers` names `{}` more than once",
                s.name
            )));
        }
        resolved_servers.push(McpServer {
            kind: McpServerKind::Url,
            name: s.name.clone(),
            url: s.url.clone(),
        });
    }

    let mut out = Vec::with_capacity(tools.len());
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut referenced: BTreeMap<String, usize> = BTreeMap::new();
    let mut count = 0usize;
    for (i, raw) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        match parse_tool(i, raw)? {
            ToolParams::AgentToolset {
                default_config,
                configs,
            } => {
                let default = resolve_default(&default_config, PermissionPolicy::AlwaysAllow);
                let mut resolved = Vec::new();
                let mut seen = BTreeSet::new();
                for (j, c) in configs.unwrap_or_default().iter().enumerate() {
                    let cat = format!("{at}.configs[{j}]");
                    let r = resolve_builtin_config(&cat, c, &default)?;
                    if !seen.insert(r.name.clone()) {
                        return Err(Invalid::new(format!(
                            "`{at}.configs` configures `{}` twice",
                            r.name
                        )));
                    }
                    resolved.push(r);
                }
                for name in BUILTIN_TOOLS {
                    if !names.insert(name.to_string()) {
                        return Err(Invalid::new(format!(
                            "tool name `{name}` is defined more than once across `tools`"
                        )));
                    }
                }
                count += BUILTIN_TOOLS.len();
                out.push(Tool::AgentToolset {
                    default_config: default,
                    configs: resolved,
                });
            }
            ToolParams::McpToolset {
                mcp_server_name,
                default_config,
                configs,
            } => {
                if !server_names.contains(&mcp_server_name) {
                    return Err(Invalid::new(format!(
                        "`{at}.mcp_server_name` `{mcp_server_name}` does not match any entry of `mcp_servers`"
                    )));
                }
                *referenced.entry(mcp_server_name.clone()).or_default() += 1;
                let default = resolve_default(&default_config, PermissionPolicy::AlwaysAsk);
                let mut resolved = Vec::new();
                let mut seen = BTreeSet::new();
                for (j, c) in configs.unwrap_or_default().iter().enumerate() {
                    check_len(&format!("{at}.configs[{j}].name"), &c.name, 1, 128)?;
                    if !seen.insert(c.name.clone()) {
                        return Err(Invalid::new(format!(
                            "`{at}.configs` configures `{}` twice",
                            c.name
                        )));
                    }
                    resolved.push(McpToolConfig {
                        name: c.name.clone(),
                        enabled: c.enabled.unwrap_or(default.enabled),
                        permission_policy: c.permission_policy.unwrap_or(default.permission_policy),
                    });
                }
                count += resolved.len().max(1);
                out.push(Tool::McpToolset {
                    mcp_server_name,
                    default_config: default,
                    configs: resolved,
                });
            }
            ToolParams::Custom {
                name,
                description,
                input_schema,
            } => {
                let tool = resolve_custom(&at, &name, &description, &input_schema)?;
                if !names.insert(tool.name.clone()) {
                    return Err(Invalid::new(format!(
                        "tool name `{}` is defined more than once across `tools`",
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
            "`tools` defines {count} tools; at most {MAX_TOOLS} are allowed across all toolsets"
        )));
    }
    for name in &server_names {
        match referenced.get(name) {
            None => {
                return Err(Invalid::new(format!(
                    "`mcp_servers` entry `{name}` is not referenced by any `mcp_toolset` in `tools`"
                )));
            }
            Some(n) if *n > 1 => {
                return Err(Invalid::new(format!(
                    "`mcp_servers` entry `{name}` is referenced by more than one `mcp_toolset`"
                )));
            }
            _ => {}
        }
    }
    Ok((out, resolved_servers))
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

    fn servers(v: Value) -> Vec<McpServerParams> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn resolves_all_three_kinds() {
        let tools = vec![
            json!({"type":"agent_toolset_20260401","configs":[{"name":"bash","permission_policy":{"type":"always_ask"}},{"name":"web_fetch","enabled":false}]}),
            json!({"type":"mcp_toolset","mcp_server_name":"linear"}),
            json!({"type":"custom","name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}),
        ];
        let (t, s) = resolve_tools(
            &tools,
            &servers(json!([{"type":"url","name":"linear","url":"https://mcp.linear.app/mcp"}])),
        )
        .unwrap();
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
        assert_eq!(
            v[1]["default_config"]["permission_policy"],
            json!({"type":"always_ask"})
        );
        assert_eq!(v[2]["input_schema"]["required"], json!(["city"]));
        assert_eq!(s.len(), 1);
        let back: Vec<Tool> = serde_json::from_value(v).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn rejects_bad_definitions() {
        let custom = |name: &str| json!({"type":"custom","name":name,"description":"d","input_schema":{"type":"object"}});
        assert!(resolve_tools(&[custom("bad name")], &[]).is_err());
        assert!(resolve_tools(&[custom("a"), custom("a")], &[]).is_err());
        assert!(resolve_tools(&[json!({"type":"custom","name":"a","description":"d","input_schema":{"type":"string"}})], &[]).is_err());
        assert!(resolve_tools(&[json!({"type":"nope"})], &[]).is_err());
        let unreferenced = servers(json!([{"type":"url","name":"x","url":"https://x"}]));
        assert!(resolve_tools(&[], &unreferenced).is_err());
        let both = json!({"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","allowed_domains":["a.com"],"blocked_domains":["b.com"]}]});
        assert!(resolve_tools(&[both], &[]).is_err());
        let many: Vec<Value> = (0..257).map(|i| custom(&format!("t{i}"))).collect();
        let err = resolve_tools(&many, &[]).unwrap_err();
        assert!(err.message.contains("at most 256"), "{err}");
    }
}

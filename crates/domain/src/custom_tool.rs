//! Custom tools on agents: the rules a custom tool's definition must meet, the name
//! prefixes reserved for the platform's own tools among them.

use serde_json::Value;

use super::fields::{Obj, must_be};
use super::invalid::{Invalid, Valid, check_len};
use super::tools::{CustomTool, InputSchema, Tool};

fn is_custom_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Name prefixes of the platform's own tools (workflow tools, MCP tools as the model sees
/// them). A custom tool with one would be mistaken for them, so none may take one.
pub const RESERVED_TOOL_PREFIXES: [&str; 2] = ["ant__", "mcp__"];

/// The reserved prefix `name` starts with, if any.
fn reserved_prefix(name: &str) -> Option<&'static str> {
    RESERVED_TOOL_PREFIXES
        .into_iter()
        .find(|p| name.starts_with(p))
}

/// The first custom tool of `tools` whose name takes a reserved prefix: an agent version
/// stored before the prefixes were reserved can still hold one.
pub fn reserved_custom_tool(tools: &[Tool]) -> Option<&str> {
    tools.iter().find_map(|t| match t {
        Tool::Custom(c) if reserved_prefix(&c.name).is_some() => Some(c.name.as_str()),
        _ => None,
    })
}

/// The message refusing a custom tool named `name` with a reserved prefix.
pub fn reserved_name_message(name: &str) -> String {
    let prefix = reserved_prefix(name).unwrap_or("ant__");
    format!(
        "custom tool `{name}`: names starting with `{prefix}` are reserved for the platform's own tools (`ant__` and `mcp__` both are)"
    )
}

/// Validates one custom tool at `at` and returns its resolved form.
pub(crate) fn resolve_custom(at: &str, v: &Value) -> Valid<CustomTool> {
    let o = Obj::new(
        at,
        v,
        "a custom tool",
        &["type", "name", "description", "input_schema"],
    )?;
    let required = |key: &str| Invalid::new(format!("`{}` is required", o.path(key)));
    let name = o.str("name")?.ok_or_else(|| required("name"))?;
    if !is_custom_name(name) {
        return Err(Invalid::new(format!(
            "`{at}.name` must be 1-128 characters of letters, digits, `_` or `-` (got `{name}`)"
        )));
    }
    if reserved_prefix(name).is_some() {
        return Err(Invalid::new(format!(
            "`{at}.name`: {}; rename it",
            reserved_name_message(name)
        )));
    }
    let description = o
        .str("description")?
        .ok_or_else(|| required("description"))?;
    check_len(&o.path("description"), description, 1, 10_000)?;
    let schema_at = o.path("input_schema");
    // An open JSON Schema: keys beyond `type`, `properties` and `required` are kept as sent.
    let schema = match o.get("input_schema") {
        None => return Err(required("input_schema")),
        Some(Value::Object(s)) => s,
        Some(other) => return Err(must_be(&schema_at, "a JSON Schema object", other)),
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(Invalid::new(format!("`{schema_at}.type` must be `object`")));
    }
    match schema.get("properties") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        _ => {
            return Err(Invalid::new(format!(
                "`{schema_at}.properties` must be an object"
            )));
        }
    }
    match schema.get("required") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        _ => {
            return Err(Invalid::new(format!(
                "`{schema_at}.required` must be a list of property names"
            )));
        }
    }
    Ok(CustomTool {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: InputSchema(schema.clone()),
    })
}

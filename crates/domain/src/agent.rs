//! Agents: the wire object, create/update bodies, and how a body becomes the
//! next immutable version.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, nothing_or_unsupported, tag};
use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{self, Metadata, MetadataPatch};
use super::model_config::{ModelConfig, ModelParam};
use super::patch::Patch;
use super::tools::{self, McpServer, Tool};
use crate::type_tag;

type_tag!(
    /// `"type": "agent"`.
    AgentTag = "agent"
);

/// A skill attached to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Skill {
    /// `anthropic` or `custom`.
    #[serde(rename = "type")]
    pub kind: SkillKind,
    pub skill_id: String,
    /// Resolved version string (`latest` when none was pinned).
    pub version: String,
}

/// Where a skill comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillKind {
    Anthropic,
    Custom,
}

/// The principal runs of the agent execute as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecutionIdentity {
    ServiceAccount,
    AwsRole { role_arn: String },
}

/// A Managed Agents `agent` as returned by every agent endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    #[serde(rename = "type")]
    pub tag: AgentTag,
    pub id: String,
    pub version: i64,
    pub name: String,
    pub description: Option<String>,
    pub system: Option<String>,
    pub model: ModelConfig,
    pub tools: Vec<Tool>,
    pub mcp_servers: Vec<McpServer>,
    pub skills: Vec<Skill>,
    /// Resolved multiagent configuration, or null.
    #[schema(value_type = Option<Object>)]
    pub multiagent: Option<Value>,
    pub execution_identity: ExecutionIdentity,
    pub metadata: Metadata,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// The agent snapshot a session or thread runs with (an agent minus its bookkeeping fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionAgent {
    #[serde(rename = "type")]
    pub tag: AgentTag,
    pub id: String,
    pub version: i64,
    pub name: String,
    pub description: Option<String>,
    pub system: Option<String>,
    pub model: ModelConfig,
    pub tools: Vec<Tool>,
    pub mcp_servers: Vec<McpServer>,
    pub skills: Vec<Skill>,
    pub execution_identity: ExecutionIdentity,
    /// Session form of the multiagent roster (full snapshots); null on thread snapshots.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub multiagent: Option<Value>,
}

impl Agent {
    /// The snapshot used for a session thread (no roster).
    pub fn thread_snapshot(&self) -> SessionAgent {
        SessionAgent {
            tag: AgentTag::Tag,
            id: self.id.clone(),
            version: self.version,
            name: self.name.clone(),
            description: self.description.clone(),
            system: self.system.clone(),
            model: self.model.clone(),
            tools: self.tools.clone(),
            mcp_servers: self.mcp_servers.clone(),
            skills: self.skills.clone(),
            execution_identity: self.execution_identity.clone(),
            multiagent: None,
        }
    }
}

/// `POST /v1/agents` body. A key unknown at any depth is refused (400 `unknown_field`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "an agent object")]
pub struct AgentCreate {
    pub name: String,
    #[schema(value_type = Object)]
    pub model: Value,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// Not supported yet: only `null` or `[]` is accepted.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub mcp_servers: Option<Value>,
    /// `{"type": "custom", "skill_id", "version"?}` entries (at most 20; `version` omitted:
    /// the latest, pinned when a session starts). Needs the `read` tool.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub skills: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub multiagent: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub execution_identity: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// `POST /v1/agents/{id}` body: every field tri-state. A key unknown at any
/// depth is refused (400 `unknown_field`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "an agent update object")]
pub struct AgentUpdate {
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub version: Option<i64>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub model: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub system: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Patch<Vec<Value>>,
    /// Not supported yet: only `null` or `[]` is accepted.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub mcp_servers: Patch<Value>,
    /// Replaces the skills (`null` or `[]` clears them); as on create.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub skills: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub multiagent: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub execution_identity: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
}

/// The version-independent content of an agent: everything a version snapshot holds except
/// ids, version numbers and timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub name: String,
    pub description: Option<String>,
    pub system: Option<String>,
    pub model: ModelConfig,
    pub tools: Vec<Tool>,
    pub mcp_servers: Vec<McpServer>,
    pub skills: Vec<Skill>,
    /// Multiagent request form still to be resolved against the store (roster lookups).
    pub multiagent_request: Option<Value>,
    pub execution_identity: ExecutionIdentity,
    pub metadata: Metadata,
}

/// Why `skills` are refused where they are not supported (session overrides).
const SKILLS_WHY: &str = "a session cannot replace its agent's skills; set them on the agent";

fn check_name(name: &str) -> Valid<()> {
    check_len("name", name.trim(), 1, 256)
}

fn check_description(d: &Option<String>) -> Valid<()> {
    if let Some(d) = d {
        check_len("description", d, 0, 2048)?;
    }
    Ok(())
}

/// 400 `agent_archived`: archive is permanent, so this is a bad request, not a conflict
/// that could clear up (the same status and code wherever an archived agent is used).
pub fn archived(id: &str, consequence: &str) -> Invalid {
    Invalid::with_code(
        "agent_archived",
        format!("agent `{id}` is archived and {consequence}"),
    )
}

/// Checks `system` against the 100,000 character limit (also used for session overrides).
pub fn check_system(field: &str, s: &Option<String>) -> Valid<()> {
    if let Some(s) = s {
        check_len(field, s, 0, 100_000)?;
    }
    Ok(())
}

/// Reads `execution_identity`; `null` means the default service account. An AWS role is
/// refused: nothing here would assume it.
pub fn parse_identity(v: Option<&Value>) -> Valid<ExecutionIdentity> {
    let at = "execution_identity";
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(ExecutionIdentity::ServiceAccount);
    };
    match tag(at, v, &["service_account", "aws_role"])? {
        "service_account" => {
            Obj::new(at, v, "a service account identity", &["type"])?;
            Ok(ExecutionIdentity::ServiceAccount)
        }
        _ => {
            Obj::new(at, v, "an AWS role identity", &["type", "role_arn"])?;
            Err(Invalid::unsupported(
                at,
                "aws_role",
                "tools run as the server's sandbox user and never assume an AWS role; omit `execution_identity` or send `{\"type\": \"service_account\"}`",
            ))
        }
    }
}

/// Refuses a non-empty `skills` list at `skills_at`.
pub fn refuse_skills(skills_at: &str, skills: Option<&Value>) -> Valid<()> {
    nothing_or_unsupported(skills_at, skills, "skills", SKILLS_WHY)
}

impl AgentCreate {
    /// Validates the body and resolves it to the first version's content.
    pub fn into_spec(self) -> Valid<AgentSpec> {
        check_name(&self.name)?;
        check_description(&self.description)?;
        check_system("system", &self.system)?;
        let model = ModelParam::parse("model", &self.model)?.resolve(None);
        let tools = tools::resolve_tools_at("tools", &self.tools.unwrap_or_default())?;
        let skills = super::skill::parse_agent_skills("skills", self.skills.as_ref(), &tools)?;
        let mcp_servers = tools::resolve_mcp_servers("mcp_servers", self.mcp_servers.as_ref())?;
        tools::check_mcp_toolsets("mcp_servers", &tools, &mcp_servers)?;
        let execution_identity = parse_identity(self.execution_identity.as_ref())?;
        let metadata = self.metadata.unwrap_or_default();
        metadata::validate(&metadata)?;
        let multiagent_request = self.multiagent.filter(|v| !v.is_null());
        Ok(AgentSpec {
            name: self.name.trim().to_string(),
            description: self.description,
            system: self.system,
            model,
            tools,
            mcp_servers,
            skills,
            multiagent_request,
            execution_identity,
            metadata,
        })
    }
}

impl AgentUpdate {
    /// Applies the update to the current version's content. The multiagent field is left in
    /// request form (merged with the stored one where the multiagent update rule says so) for
    /// the caller to resolve against the store.
    pub fn apply(self, current: &Agent) -> Valid<AgentSpec> {
        let name = match self.name {
            Patch::Absent => current.name.clone(),
            Patch::Null => return Err(Invalid::new("`name` cannot be cleared")),
            Patch::Value(n) => {
                check_name(&n)?;
                n.trim().to_string()
            }
        };
        let model = match &self.model {
            Patch::Absent => current.model.clone(),
            Patch::Null => return Err(Invalid::new("`model` cannot be cleared")),
            Patch::Value(m) => ModelParam::parse("model", m)?.resolve(Some(&current.model)),
        };
        let clearable = |p: Patch<String>, old: &Option<String>| match p {
            Patch::Absent => old.clone(),
            Patch::Null => None,
            Patch::Value(s) if s.is_empty() => None,
            Patch::Value(s) => Some(s),
        };
        let description = clearable(self.description, &current.description);
        check_description(&description)?;
        let system = clearable(self.system, &current.system);
        check_system("system", &system)?;

        let mcp_servers = match &self.mcp_servers {
            Patch::Absent => current.mcp_servers.clone(),
            Patch::Null => vec![],
            Patch::Value(v) => tools::resolve_mcp_servers("mcp_servers", Some(v))?,
        };
        let tools = match self.tools {
            Patch::Absent => current.tools.clone(),
            Patch::Null => vec![],
            Patch::Value(v) => tools::resolve_tools_at("tools", &v)?,
        };
        // A version stored before the prefixes were reserved: nothing else may change until
        // the tool is renamed, so the agent cannot be carried further with it.
        if let Some(name) = tools::reserved_custom_tool(&tools) {
            return Err(Invalid::new(format!(
                "`tools`: {}; the agent's current version holds it, so an update must send `tools` without it",
                tools::reserved_name_message(name)
            )));
        }
        let skills = match &self.skills {
            Patch::Absent => current.skills.clone(),
            Patch::Null => vec![],
            Patch::Value(v) => super::skill::parse_agent_skills("skills", Some(v), &tools)?,
        };
        super::skill::require_read("skills", &skills, &tools)?;
        tools::check_mcp_toolsets("mcp_servers", &tools, &mcp_servers)?;
        let execution_identity = match &self.execution_identity {
            Patch::Absent => current.execution_identity.clone(),
            Patch::Null => ExecutionIdentity::ServiceAccount,
            Patch::Value(v) => parse_identity(Some(v))?,
        };
        let metadata = match &self.metadata {
            None => current.metadata.clone(),
            Some(p) => metadata::apply_patch(&current.metadata, p, false)?,
        };
        let multiagent_request = match self.multiagent {
            Patch::Absent => current.multiagent.clone(),
            Patch::Null => None,
            Patch::Value(v) if v.is_null() => None,
            Patch::Value(v) => {
                super::multiagent::check_keys(&v)?;
                Some(super::multiagent::merge_update(
                    &v,
                    current.multiagent.as_ref(),
                )?)
            }
        };
        Ok(AgentSpec {
            name,
            description,
            system,
            model,
            tools,
            mcp_servers,
            skills,
            multiagent_request,
            execution_identity,
            metadata,
        })
    }
}

impl AgentSpec {
    /// Builds the wire object for a version of this content.
    pub fn into_agent(
        self,
        id: &str,
        version: i64,
        multiagent: Option<Value>,
        created_at: String,
        updated_at: String,
    ) -> Agent {
        Agent {
            tag: AgentTag::Tag,
            id: id.to_string(),
            version,
            name: self.name,
            description: self.description,
            system: self.system,
            model: self.model,
            tools: self.tools,
            mcp_servers: self.mcp_servers,
            skills: self.skills,
            multiagent,
            execution_identity: self.execution_identity,
            metadata: self.metadata,
            created_at,
            updated_at,
            archived_at: None,
        }
    }
}

/// Whether two versions differ in anything a user set (timestamps and version excluded).
pub fn same_content(a: &Agent, b: &Agent) -> bool {
    a.name == b.name
        && a.description == b.description
        && a.system == b.system
        && a.model == b.model
        && a.tools == b.tools
        && a.mcp_servers == b.mcp_servers
        && a.skills == b.skills
        && a.multiagent == b.multiagent
        && a.execution_identity == b.execution_identity
        && a.metadata == b.metadata
}

#[cfg(test)]
mod reserved_tool_tests {
    use super::*;
    use serde_json::json;

    /// An agent version stored before custom tools' `ant__` / `mcp__` prefixes were reserved.
    fn stored_with(tool_name: &str) -> Agent {
        serde_json::from_value(json!({
            "type": "agent", "id": "agent_1", "version": 1, "name": "a",
            "description": null, "system": null,
            "model": {"id": "mast-scripted", "speed": "standard"},
            "tools": [{"type": "custom", "name": tool_name, "description": "d",
                       "input_schema": {"type": "object"}}],
            "mcp_servers": [], "skills": [], "multiagent": null,
            "execution_identity": {"type": "service_account"}, "metadata": {},
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "archived_at": null
        }))
        .unwrap()
    }

    fn update(body: serde_json::Value) -> AgentUpdate {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn an_agent_holding_a_reserved_tool_name_changes_only_by_dropping_it() {
        let old = stored_with("ant__legacy");
        let e = update(json!({"version": 1, "system": "new"}))
            .apply(&old)
            .unwrap_err();
        assert!(
            e.message.contains("custom tool `ant__legacy`"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("send `tools` without it"),
            "{}",
            e.message
        );
        // Sending it again is refused as on create.
        let again = update(
            json!({"version": 1, "tools": [{"type": "custom", "name": "ant__legacy",
            "description": "d", "input_schema": {"type": "object"}}]}),
        );
        assert!(
            again
                .apply(&old)
                .unwrap_err()
                .message
                .contains("`tools[0].name`")
        );
        // Renaming it is the way on.
        let renamed = update(
            json!({"version": 1, "tools": [{"type": "custom", "name": "legacy",
            "description": "d", "input_schema": {"type": "object"}}]}),
        );
        let spec = renamed.apply(&old).unwrap();
        assert_eq!(tools::reserved_custom_tool(&spec.tools), None);
        // An agent without one updates as before.
        assert!(
            update(json!({"version": 1, "system": "new"}))
                .apply(&stored_with("fine"))
                .is_ok()
        );
    }
}

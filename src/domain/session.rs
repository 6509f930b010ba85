//! Sessions (API.md §2.4): the wire object, create/update bodies, usage and stats.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::agent::{SessionAgent, SkillParams, check_system, resolve_skills};
use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{Metadata, MetadataPatch};
use super::model_config::ModelParam;
use super::patch::Patch;
use super::tools::{self, McpServerParams};
use crate::type_tag;

type_tag!(
    /// `"type": "session"`.
    SessionTag = "session"
);

/// Session lifecycle state (API.md §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Idle,
    Running,
    Rescheduling,
    Terminated,
}

impl SessionStatus {
    /// The wire (and stored) name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Idle => "idle",
            SessionStatus::Running => "running",
            SessionStatus::Rescheduling => "rescheduling",
            SessionStatus::Terminated => "terminated",
        }
    }

    /// Parses a stored or queried status name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => SessionStatus::Idle,
            "running" => SessionStatus::Running,
            "rescheduling" => SessionStatus::Rescheduling,
            "terminated" => SessionStatus::Terminated,
            _ => return None,
        })
    }

    /// Whether work is in progress (archive and delete are refused then).
    pub fn is_active(self) -> bool {
        matches!(self, SessionStatus::Running | SessionStatus::Rescheduling)
    }
}

/// Prompt-cache creation tokens by lifetime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CacheCreation {
    pub ephemeral_5m_input_tokens: i64,
    pub ephemeral_1h_input_tokens: i64,
}

/// Server-side tool requests counted for billing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ServerToolUse {
    pub web_search_requests: i64,
    pub web_fetch_requests: i64,
}

/// Cumulative token usage of a session or thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_input_tokens: i64,
    pub cache_creation: CacheCreation,
    pub server_tool_use: ServerToolUse,
    /// Not computed: Mast keeps no price list, so this is always null.
    #[schema(value_type = Option<Object>)]
    pub list_cost: Option<Value>,
    pub active_seconds: f64,
}

/// One model request's token counts, as carried by `span.model_request_end`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ModelUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_creation_input_tokens: i64,
    pub cache_read_input_tokens: i64,
}

impl SessionUsage {
    /// Adds one model request's usage.
    pub fn add(&mut self, u: &ModelUsage) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.cache_read_input_tokens += u.cache_read_input_tokens;
        self.cache_creation.ephemeral_5m_input_tokens += u.cache_creation_input_tokens;
    }
}

/// Timing statistics of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionStats {
    pub active_seconds: f64,
    pub duration_seconds: f64,
    /// Mast's own, present only while a self-hosted session waits on a worker's tool result
    /// and no worker has polled its environment lately: the session is not stuck in Mast, it
    /// needs a worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_worker: Option<WaitingForWorker>,
}

/// Why a self-hosted session makes no progress (see [`SessionStats::waiting_for_worker`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WaitingForWorker {
    /// Workers that polled the session's environment in the last 30 seconds.
    pub workers_polling: i64,
    /// What to do about it.
    pub message: String,
}

/// A Managed Agents `session`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Session {
    #[serde(rename = "type")]
    pub tag: SessionTag,
    pub id: String,
    pub status: SessionStatus,
    pub agent: SessionAgent,
    pub environment_id: String,
    pub title: Option<String>,
    pub metadata: Metadata,
    #[schema(value_type = Vec<Object>)]
    pub resources: Vec<Value>,
    pub vault_ids: Vec<String>,
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Value>,
    #[schema(value_type = Vec<Object>)]
    pub outcome_evaluations: Vec<Value>,
    pub stats: SessionStats,
    pub usage: SessionUsage,
    pub deployment_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// How a create body names the agent to run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSelection {
    pub id: String,
    pub version: Option<i64>,
    pub overrides: Option<AgentOverrides>,
}

/// Session-local replacements of agent fields (`agent_with_overrides`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AgentOverrides {
    #[serde(default)]
    pub model: Patch<Value>,
    #[serde(default)]
    pub system: Patch<String>,
    #[serde(default)]
    pub tools: Patch<Vec<Value>>,
    #[serde(default)]
    pub mcp_servers: Patch<Vec<Value>>,
    #[serde(default)]
    pub skills: Patch<Vec<Value>>,
}

/// Parses the `agent` field of a create body.
pub fn parse_agent_selection(v: &Value) -> Valid<AgentSelection> {
    let version = |o: &serde_json::Map<String, Value>| -> Valid<Option<i64>> {
        match o.get("version") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 1 => Ok(Some(n)),
                _ => Err(Invalid::new("`agent.version` must be an integer >= 1")),
            },
        }
    };
    match v {
        Value::String(id) if !id.is_empty() => Ok(AgentSelection {
            id: id.clone(),
            version: None,
            overrides: None,
        }),
        Value::Object(o) => {
            let id = o
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| Invalid::new("`agent.id` is required"))?
                .to_string();
            match o.get("type").and_then(Value::as_str) {
                Some("agent") => Ok(AgentSelection {
                    id,
                    version: version(o)?,
                    overrides: None,
                }),
                Some("agent_with_overrides") => {
                    let overrides: AgentOverrides = serde_json::from_value(v.clone())
                        .map_err(|e| Invalid::new(format!("`agent`: {e}")))?;
                    Ok(AgentSelection {
                        id,
                        version: version(o)?,
                        overrides: Some(overrides),
                    })
                }
                _ => Err(Invalid::new(
                    "`agent.type` must be `agent` or `agent_with_overrides`",
                )),
            }
        }
        _ => Err(Invalid::new(
            "`agent` must be an agent id or an agent reference object",
        )),
    }
}

fn parse_list<T: serde::de::DeserializeOwned>(field: &str, v: Vec<Value>) -> Valid<Vec<T>> {
    v.into_iter()
        .enumerate()
        .map(|(i, x)| {
            serde_json::from_value(x).map_err(|e| Invalid::new(format!("`{field}[{i}]`: {e}")))
        })
        .collect()
}

impl AgentOverrides {
    /// Applies the overrides to the agent snapshot the session starts from.
    pub fn apply(self, mut agent: SessionAgent) -> Valid<SessionAgent> {
        match self.model {
            Patch::Absent => {}
            Patch::Null => {
                return Err(Invalid::with_code(
                    "agent_model_required",
                    "`agent.model` cannot be null",
                ));
            }
            Patch::Value(m) => {
                let param: ModelParam = serde_json::from_value(m)
                    .map_err(|e| Invalid::new(format!("`agent.model`: {e}")))?;
                let mut resolved = param.resolve(None)?;
                // Effort comes from the agent; an override only changes id, speed and geography.
                resolved.effort = agent.model.effort;
                agent.model = resolved;
            }
        }
        match self.system {
            Patch::Absent => {}
            Patch::Null => agent.system = None,
            Patch::Value(s) => {
                check_system("agent.system", &Some(s.clone()))?;
                agent.system = if s.is_empty() { None } else { Some(s) };
            }
        }
        if self.tools.is_present() || self.mcp_servers.is_present() {
            let tools_raw = match self.tools {
                Patch::Absent => {
                    serde_json::from_value(serde_json::to_value(&agent.tools).expect("json"))
                        .expect("tools")
                }
                Patch::Null => vec![],
                Patch::Value(v) => v,
            };
            let servers: Vec<McpServerParams> = match self.mcp_servers {
                Patch::Absent => {
                    serde_json::from_value(serde_json::to_value(&agent.mcp_servers).expect("json"))
                        .expect("servers")
                }
                Patch::Null => vec![],
                Patch::Value(v) => parse_list("agent.mcp_servers", v)?,
            };
            let (tools, servers) = tools::resolve_tools(&tools_raw, &servers)?;
            agent.tools = tools;
            agent.mcp_servers = servers;
        }
        match self.skills {
            Patch::Absent => {}
            Patch::Null => agent.skills = vec![],
            Patch::Value(v) => {
                let params: Vec<SkillParams> = parse_list("agent.skills", v)?;
                agent.skills = resolve_skills(&params)?;
            }
        }
        Ok(agent)
    }
}

/// `POST /v1/sessions` body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct SessionCreate {
    #[schema(value_type = Object)]
    pub agent: Value,
    pub environment_id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub resources: Option<Vec<Value>>,
    #[serde(default)]
    pub vault_ids: Option<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub initial_events: Option<Vec<Value>>,
}

/// `agent` in a session update: only tools and MCP servers may change.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SessionAgentUpdate {
    #[serde(default)]
    pub tools: Patch<Vec<Value>>,
    #[serde(default)]
    pub mcp_servers: Patch<Vec<Value>>,
}

/// `POST /v1/sessions/{id}` body.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct SessionUpdate {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub title: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub agent: Option<SessionAgentUpdate>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub vault_ids: Patch<Value>,
}

/// Checks a session title (at most 512 characters).
pub fn check_title(title: &Option<String>) -> Valid<()> {
    if let Some(t) = title {
        check_len("title", t, 0, 512)?;
    }
    Ok(())
}

impl SessionAgentUpdate {
    /// Applies a mid-session tools/MCP replacement to the session's agent snapshot.
    pub fn apply(self, agent: &SessionAgent) -> Valid<SessionAgent> {
        let overrides = AgentOverrides {
            tools: self.tools,
            mcp_servers: self.mcp_servers,
            ..Default::default()
        };
        overrides.apply(agent.clone())
    }
}

/// What a session row stores as its body: the wire fields that are not columns, plus the
/// environment configuration snapshotted at creation (later environment edits affect only
/// new sessions) and the primary thread's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionBody {
    pub title: Option<String>,
    pub metadata: Metadata,
    pub agent: SessionAgent,
    pub resources: Vec<Value>,
    pub vault_ids: Vec<String>,
    pub budget: Option<Value>,
    pub outcome_evaluations: Vec<Value>,
    pub deployment_id: Option<String>,
    pub environment: super::environment::EnvironmentConfig,
    pub primary_thread_id: String,
}

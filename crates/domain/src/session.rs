//! Sessions: the wire object, create/update bodies, usage and stats.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::agent::{SessionAgent, check_system, refuse_skills};
use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, check_len, join};
use super::metadata::{Metadata, MetadataPatch};
use super::model_config::ModelParam;
use super::patch::Patch;
use super::tools::{self, McpServer, Tool};
use crate::type_tag;

type_tag!(
    /// `"type": "session"`.
    SessionTag = "session"
);

/// Session lifecycle state.
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
    /// `{"amount": "<cents>", "currency": "USD"}` at list prices (`domain::prices`); null
    /// while part of the usage ran on a model with no known price. Filled when shown.
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
    /// The part of `cache_creation_input_tokens` written for one hour, as the provider
    /// reported it (priced apart; not a field of the span's wire usage).
    #[serde(skip)]
    pub ephemeral_1h_input_tokens: i64,
}

impl SessionUsage {
    /// Adds one model request's usage.
    pub fn add(&mut self, u: &ModelUsage) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.cache_read_input_tokens += u.cache_read_input_tokens;
        let one_hour = u
            .ephemeral_1h_input_tokens
            .clamp(0, u.cache_creation_input_tokens.max(0));
        self.cache_creation.ephemeral_5m_input_tokens += u.cache_creation_input_tokens - one_hour;
        self.cache_creation.ephemeral_1h_input_tokens += one_hour;
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

/// Session-local replacements of agent fields (`agent_with_overrides`, or the `agent` of
/// a session update), validated as they are read so a bad one is refused before any lookup.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentOverrides {
    /// Where these fields sit in the body (`agent`), for messages.
    pub at: String,
    /// A replacement model (effort still comes from the agent); `None` keeps the agent's.
    pub model: Option<ModelParam>,
    /// Absent keeps, `null` (or `""`) clears, a value replaces.
    pub system: Patch<String>,
    /// Resolved replacement tools (`null` gives none); `None` keeps the agent's.
    pub tools: Option<Vec<Tool>>,
    /// Replacement MCP servers (`null` gives none); `None` keeps the agent's.
    pub mcp_servers: Option<Vec<McpServer>>,
    /// Sent as `null` or `[]` (anything else is refused when read): clears the skills.
    pub clear_skills: bool,
}

impl AgentOverrides {
    /// Reads and checks the override fields of `o` (its keys already checked), refusing
    /// skills, which would be stored but never used.
    fn read(o: &Obj) -> Valid<Self> {
        refuse_skills(&o.path("skills"), o.raw("skills"))?;
        let mcp_servers = match o.raw("mcp_servers") {
            None => None,
            some => Some(tools::resolve_mcp_servers(&o.path("mcp_servers"), some)?),
        };
        let model = match o.raw("model") {
            None => None,
            Some(Value::Null) => {
                return Err(Invalid::with_code(
                    "agent_model_required",
                    format!("`{}` cannot be null", o.path("model")),
                ));
            }
            Some(m) => Some(ModelParam::parse(&o.path("model"), m)?),
        };
        let system = match o.raw("system") {
            None => Patch::Absent,
            Some(Value::Null) => Patch::Null,
            Some(_) => {
                let s = o.str("system")?.unwrap_or_default().to_string();
                check_system(&o.path("system"), &Some(s.clone()))?;
                Patch::Value(s)
            }
        };
        let tools = match o.raw("tools") {
            None => None,
            Some(Value::Null) => Some(vec![]),
            Some(_) => Some(tools::resolve_tools_at(
                &o.path("tools"),
                o.list("tools")?.map_or(&[][..], Vec::as_slice),
            )?),
        };
        Ok(AgentOverrides {
            at: o.at().to_string(),
            model,
            system,
            tools,
            mcp_servers,
            clear_skills: o.raw("skills").is_some(),
        })
    }

    /// Applies the overrides to the agent snapshot the session starts from.
    pub fn apply(self, mut agent: SessionAgent) -> Valid<SessionAgent> {
        if let Some(m) = &self.model {
            let mut resolved = m.resolve(None);
            // Effort comes from the agent; an override only changes id, speed and geography.
            resolved.effort = agent.model.effort;
            agent.model = resolved;
        }
        match self.system {
            Patch::Absent => {}
            Patch::Value(s) if !s.is_empty() => agent.system = Some(s),
            _ => agent.system = None,
        }
        if let Some(tools) = self.tools {
            agent.tools = tools;
        }
        if let Some(servers) = self.mcp_servers {
            agent.mcp_servers = servers;
        }
        if self.clear_skills {
            agent.skills = vec![];
        }
        tools::check_mcp_toolsets(
            &join(&self.at, "mcp_servers"),
            &agent.tools,
            &agent.mcp_servers,
        )?;
        Ok(agent)
    }
}

/// Parses the `agent` field of a create body: an agent id, `{"type": "agent", "id",
/// "version"?}` or `{"type": "agent_with_overrides", ...}`.
pub fn parse_agent_selection(v: &Value) -> Valid<AgentSelection> {
    let at = "agent";
    if let Value::String(id) = v {
        if id.is_empty() {
            return Err(Invalid::new("`agent` must not be empty"));
        }
        return Ok(AgentSelection {
            id: id.clone(),
            version: None,
            overrides: None,
        });
    }
    if !v.is_object() {
        return Err(must_be(at, "an agent id or an agent reference object", v));
    }
    let with_overrides = tag(at, v, &["agent", "agent_with_overrides"])? == "agent_with_overrides";
    let o = if with_overrides {
        Obj::new(
            at,
            v,
            "an agent with overrides",
            &[
                "type",
                "id",
                "version",
                "model",
                "system",
                "tools",
                "mcp_servers",
                "skills",
            ],
        )?
    } else {
        Obj::new(at, v, "an agent reference", &["type", "id", "version"])?
    };
    let id = o.req_str("id")?.to_string();
    let version = match o.int("version") {
        Ok(Some(n)) if n >= 1 => Some(n),
        Ok(None) => None,
        _ => return Err(Invalid::new("`agent.version` must be an integer >= 1")),
    };
    let overrides = if with_overrides {
        Some(AgentOverrides::read(&o)?)
    } else {
        None
    };
    Ok(AgentSelection {
        id,
        version,
        overrides,
    })
}

/// `POST /v1/sessions` body. A key unknown at any depth is refused (400 `unknown_field`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a session object")]
pub struct SessionCreate {
    #[schema(value_type = Object)]
    pub agent: Value,
    pub environment_id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Resources of the session: `file` (mounted read-only) and `github_repository` (cloned
    /// into the workspace).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub resources: Option<Value>,
    /// Vaults whose credentials the session's MCP servers use, first match wins.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub vault_ids: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub initial_events: Option<Vec<Value>>,
}

/// `POST /v1/sessions/{id}` body. A key unknown at any depth is refused (400
/// `unknown_field`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a session update object")]
pub struct SessionUpdate {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub title: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
    /// Only `tools` and `mcp_servers` may change mid-session.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub agent: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Patch<Value>,
    /// Create-only: only the session's current list (or nothing) is accepted.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub vault_ids: Option<Value>,
}

/// Most vaults a session may name.
pub const MAX_VAULT_IDS: usize = 50;

/// Reads `vault_ids`: distinct vault ids, in the order their credentials are tried (absent
/// or `null` = not sent). Whether each vault exists is checked by session creation.
pub fn parse_vault_ids(v: Option<&Value>) -> Valid<Option<Vec<String>>> {
    let list = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(must_be("vault_ids", "a list of vault ids", other)),
    };
    if list.len() > MAX_VAULT_IDS {
        return Err(Invalid::new(format!(
            "`vault_ids` has more than {MAX_VAULT_IDS} vaults"
        )));
    }
    let mut ids: Vec<String> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let at = format!("vault_ids[{i}]");
        let Some(id) = item.as_str() else {
            return Err(must_be(&at, "a vault id (a string)", item));
        };
        check_len(&at, id, 1, 128)?;
        if ids.iter().any(|x| x == id) {
            return Err(Invalid::new(format!(
                "`{at}`: vault `{id}` is listed twice"
            )));
        }
        ids.push(id.to_string());
    }
    Ok(Some(ids))
}

/// The refusal of an update that would change a session's vaults: they are fixed at
/// creation (create-only upstream).
pub fn vault_ids_create_only() -> Invalid {
    Invalid::unsupported(
        "vault_ids",
        "vaults",
        "a session's vaults are fixed when it is created; leave `vault_ids` out of updates (or send the session's current list)",
    )
}

/// Checks a session title (at most 512 characters).
pub fn check_title(title: &Option<String>) -> Valid<()> {
    if let Some(t) = title {
        check_len("title", t, 0, 512)?;
    }
    Ok(())
}

/// Reads the `agent` of a session update: only `tools` and `mcp_servers` may be sent.
pub fn parse_agent_update(v: Option<&Value>) -> Valid<Option<AgentOverrides>> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let o = Obj::new(
        "agent",
        v,
        "a session's agent update (only `tools` and `mcp_servers` may change)",
        &["tools", "mcp_servers"],
    )?;
    AgentOverrides::read(&o).map(Some)
}

/// The parts of a stored session body that the engine's transactions read, parsed without
/// building the agent snapshot (serde skips it), which for a long prompt and many tool
/// schemas costs more than the rest of a transaction.
#[derive(Debug, Clone, Deserialize)]
pub struct SessionBodyHead {
    pub environment: super::environment::EnvironmentConfig,
    pub primary_thread_id: String,
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
    /// Each repository resource's token, sealed with the server's secret key (base64), by
    /// resource id. Never part of a wire object.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub repository_tokens: std::collections::BTreeMap<String, String>,
}

//! Deployments and deployment runs: the wire objects, the create and update
//! bodies, the stored definition, and the run errors that pause a deployment.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{self, Metadata, MetadataPatch};
use super::patch::Patch;
use super::schedule::{self, Schedule};
use super::time::{self, Micros};
use crate::type_tag;

type_tag!(
    /// `"type": "deployment"`.
    DeploymentTag = "deployment"
);

type_tag!(
    /// `"type": "deployment_run"`.
    DeploymentRunTag = "deployment_run"
);

/// Most `initial_events` a deployment may carry, and the fewest.
const MAX_INITIAL_EVENTS: usize = 50;
/// Most resources a deployment may carry.
const MAX_RESOURCES: usize = 500;
/// Most vaults a deployment may name.
const MAX_VAULT_IDS: usize = 50;
/// How many upcoming firings a schedule shows.
const UPCOMING: usize = 5;

/// A deployment as the API returns it (`BetaManagedAgentsDeployment`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Deployment {
    #[serde(rename = "type")]
    pub tag: DeploymentTag,
    /// `depl_…`.
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    /// `{"type":"agent","id","version"}`, always a concrete version.
    #[schema(value_type = Object)]
    pub agent: Value,
    pub environment_id: String,
    #[schema(value_type = Vec<Object>)]
    pub initial_events: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub resources: Vec<Value>,
    pub vault_ids: Vec<String>,
    pub metadata: Metadata,
    /// The cron schedule with its computed `last_run_at` and `upcoming_runs_at`; null for a
    /// manual-only deployment.
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<Value>,
    /// `active` or `paused` (an archived deployment reports `active`).
    pub status: String,
    #[schema(value_type = Option<Object>)]
    pub paused_reason: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// A deployment run as the API returns it (`BetaManagedAgentsDeploymentRun`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeploymentRun {
    #[serde(rename = "type")]
    pub tag: DeploymentRunTag,
    /// `drun_…`.
    pub id: String,
    pub deployment_id: String,
    #[schema(value_type = Object)]
    pub agent: Value,
    /// `{"type":"schedule","scheduled_at"}` or `{"type":"manual"}`.
    #[schema(value_type = Object)]
    pub trigger_context: Value,
    pub session_id: Option<String>,
    /// `{"type": <code>, "message"}` when no session could be started.
    #[schema(value_type = Option<Object>)]
    pub error: Option<Value>,
    pub created_at: String,
}

/// `POST /v1/deployments` body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a deployment create object")]
pub struct DeploymentCreate {
    pub name: String,
    #[schema(value_type = Object)]
    pub agent: Value,
    pub environment_id: String,
    #[schema(value_type = Vec<Object>)]
    pub initial_events: Vec<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub resources: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub vault_ids: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Value>,
}

/// `POST /v1/deployments/{id}` body: every field optional; absent keeps, `null` clears
/// where the field can be cleared.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a deployment update object")]
pub struct DeploymentUpdate {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub agent: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub environment_id: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub initial_events: Patch<Vec<Value>>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Patch<MetadataPatch>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub resources: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub vault_ids: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub schedule: Patch<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Patch<Value>,
}

/// A deployment's definition as stored: what each firing turns into a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentSpec {
    pub name: String,
    pub description: Option<String>,
    pub agent_id: String,
    pub agent_version: i64,
    pub environment_id: String,
    /// Checked `user.message` events, as sent.
    pub initial_events: Vec<Value>,
    /// Checked `file` and `memory_store` resource params, as sent.
    pub resources: Vec<Value>,
    pub vault_ids: Vec<String>,
    pub metadata: Metadata,
    pub schedule: Option<Schedule>,
    /// The wire budget object, as sent.
    pub budget: Option<Value>,
}

impl DeploymentSpec {
    /// The `agent` object of `sessions.create` (and of the wire objects).
    pub fn agent_ref(&self) -> Value {
        json!({"type": "agent", "id": self.agent_id, "version": self.agent_version})
    }
}

/// The agent a create or update names: an id (pinned to its latest version when saved) or a
/// `{"type":"agent","id","version"}` reference. No `agent_with_overrides` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPin {
    pub id: String,
    pub version: Option<i64>,
}

/// Reads `agent`.
pub fn parse_agent(v: &Value) -> Valid<AgentPin> {
    if let Value::String(id) = v {
        check_len("agent", id, 1, 128)?;
        return Ok(AgentPin {
            id: id.clone(),
            version: None,
        });
    }
    if !v.is_object() {
        return Err(must_be(
            "agent",
            "an agent id or an agent reference object",
            v,
        ));
    }
    if tag("agent", v, &["agent", "agent_with_overrides"])? == "agent_with_overrides" {
        return Err(Invalid::unsupported(
            "agent",
            "deployment_agent_overrides",
            "a deployment takes an agent id or `{\"type\":\"agent\",\"id\",\"version\"}`; save the overrides as a new agent version",
        ));
    }
    let o = Obj::new("agent", v, "an agent reference", &["type", "id", "version"])?;
    let id = o.req_str("id")?.to_string();
    let version = match o.int("version") {
        Ok(Some(n)) if n >= 1 => n,
        Ok(None) => {
            return Err(Invalid::new(
                "`agent.version` is required in an agent object (send the id alone to pin the latest version)",
            ));
        }
        _ => return Err(Invalid::new("`agent.version` must be an integer >= 1")),
    };
    Ok(AgentPin {
        id,
        version: Some(version),
    })
}

/// Reads `name` (1–256 characters).
pub fn check_name(name: &str) -> Valid<()> {
    check_len("name", name, 1, 256)
}

/// Reads `description` (at most 2048 characters; empty clears).
pub fn parse_description(d: Option<String>) -> Valid<Option<String>> {
    match d {
        Some(d) if d.is_empty() => Ok(None),
        Some(d) => {
            check_len("description", &d, 0, 2048)?;
            Ok(Some(d))
        }
        None => Ok(None),
    }
}

/// Reads `initial_events`: 1–50 `user.message` or `user.define_outcome` events (their
/// content is checked by the session creation check). `system.message` is refused: Mast's
/// sessions do not take it as an initial event yet.
pub fn parse_initial_events(list: &[Value]) -> Valid<Vec<Value>> {
    if list.is_empty() || list.len() > MAX_INITIAL_EVENTS {
        return Err(Invalid::new(format!(
            "`initial_events` must have 1-{MAX_INITIAL_EVENTS} events (got {})",
            list.len()
        )));
    }
    for (i, e) in list.iter().enumerate() {
        let at = format!("initial_events[{i}]");
        match tag(
            &at,
            e,
            &["user.message", "user.define_outcome", "system.message"],
        )? {
            "user.message" | "user.define_outcome" => {}
            other => {
                return Err(Invalid::unsupported(
                    &at,
                    "deployment_initial_event_type",
                    &format!(
                        "Mast's deployments send only `user.message` and `user.define_outcome` initial events; `{other}` is not supported yet"
                    ),
                ));
            }
        }
    }
    Ok(list.to_vec())
}

/// Reads `resources`: at most 500 `file` or `memory_store` params (checked in full by the
/// session creation check). `github_repository` is refused: its token would have to be kept
/// with the definition, and Mast does not store repository tokens outside a session yet.
pub fn parse_resources(v: Option<&Value>) -> Valid<Vec<Value>> {
    let list = match v {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(must_be("resources", "a list", other)),
    };
    if list.len() > MAX_RESOURCES {
        return Err(Invalid::new(format!(
            "`resources` has more than {MAX_RESOURCES} resources"
        )));
    }
    for (i, r) in list.iter().enumerate() {
        let at = format!("resources[{i}]");
        if !r.is_object() {
            return Err(must_be(&at, "a resource object", r));
        }
        if tag(&at, r, &["github_repository", "file", "memory_store"])? == "github_repository" {
            return Err(Invalid::unsupported(
                &at,
                "deployment_github_repository",
                "deployments take `file` and `memory_store` resources; add repositories to each session instead",
            ));
        }
    }
    Ok(list.clone())
}

/// Reads `vault_ids` (at most 50; absent or `null`: none).
pub fn parse_vault_ids(v: Option<&Value>) -> Valid<Vec<String>> {
    let ids = super::session::parse_vault_ids(v)?.unwrap_or_default();
    if ids.len() > MAX_VAULT_IDS {
        return Err(Invalid::new(format!(
            "`vault_ids` has more than {MAX_VAULT_IDS} vaults"
        )));
    }
    Ok(ids)
}

/// Reads `budget` (`null`: none).
pub fn parse_budget(v: Option<&Value>) -> Valid<Option<Value>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(b) => {
            super::budget::parse("budget", b)?;
            Ok(Some(b.clone()))
        }
    }
}

impl DeploymentCreate {
    /// Checks every rule needing no lookup; the agent pin is resolved by the caller.
    pub fn check(self) -> Valid<(AgentPin, DeploymentSpec)> {
        check_name(&self.name)?;
        let pin = parse_agent(&self.agent)?;
        check_len("environment_id", &self.environment_id, 1, 128)?;
        let metadata = self.metadata.unwrap_or_default();
        metadata::validate(&metadata)?;
        let spec = DeploymentSpec {
            name: self.name,
            description: parse_description(self.description)?,
            agent_id: pin.id.clone(),
            agent_version: pin.version.unwrap_or(0),
            environment_id: self.environment_id,
            initial_events: parse_initial_events(&self.initial_events)?,
            resources: parse_resources(self.resources.as_ref())?,
            vault_ids: parse_vault_ids(self.vault_ids.as_ref())?,
            metadata,
            schedule: match &self.schedule {
                Some(s) => schedule::parse(s)?,
                None => None,
            },
            budget: parse_budget(self.budget.as_ref())?,
        };
        Ok((pin, spec))
    }
}

/// What an update changes besides the fields it replaced in the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateEffects {
    /// The agent to re-pin (a new agent, or the latest version of an id).
    pub agent: Option<AgentPin>,
    /// The schedule was sent (replaced or cleared): the next firing is computed anew.
    pub schedule_changed: bool,
}

impl DeploymentUpdate {
    /// Applies the update to `spec`; the new agent pin is for the caller to resolve.
    pub fn apply(self, spec: &mut DeploymentSpec) -> Valid<UpdateEffects> {
        let mut fx = UpdateEffects::default();
        match self.name {
            Patch::Absent => {}
            Patch::Null => return Err(Invalid::new("`name` cannot be cleared")),
            Patch::Value(n) => {
                check_name(&n)?;
                spec.name = n;
            }
        }
        match self.agent {
            Patch::Absent => {}
            Patch::Null => return Err(Invalid::new("`agent` cannot be cleared")),
            Patch::Value(a) => fx.agent = Some(parse_agent(&a)?),
        }
        match self.environment_id {
            Patch::Absent => {}
            Patch::Null => return Err(Invalid::new("`environment_id` cannot be cleared")),
            Patch::Value(e) => {
                check_len("environment_id", &e, 1, 128)?;
                spec.environment_id = e;
            }
        }
        match self.initial_events {
            Patch::Absent => {}
            Patch::Null => return Err(Invalid::new("`initial_events` cannot be cleared")),
            Patch::Value(list) => spec.initial_events = parse_initial_events(&list)?,
        }
        match self.description {
            Patch::Absent => {}
            Patch::Null => spec.description = None,
            Patch::Value(d) => spec.description = parse_description(Some(d))?,
        }
        match self.metadata {
            Patch::Absent => {}
            Patch::Null => {
                return Err(Invalid::new(
                    "`metadata` cannot be null: send a map where a `null` value deletes a key",
                ));
            }
            Patch::Value(p) => spec.metadata = metadata::apply_patch(&spec.metadata, &p, false)?,
        }
        match self.resources {
            Patch::Absent => {}
            Patch::Null => spec.resources = vec![],
            Patch::Value(r) => spec.resources = parse_resources(Some(&r))?,
        }
        match self.vault_ids {
            Patch::Absent => {}
            Patch::Null => spec.vault_ids = vec![],
            Patch::Value(v) => spec.vault_ids = parse_vault_ids(Some(&v))?,
        }
        match self.schedule {
            Patch::Absent => {}
            Patch::Null => {
                spec.schedule = None;
                fx.schedule_changed = true;
            }
            Patch::Value(s) => {
                spec.schedule = schedule::parse(&s)?;
                fx.schedule_changed = true;
            }
        }
        match self.budget {
            Patch::Absent => {}
            Patch::Null => spec.budget = None,
            Patch::Value(b) => spec.budget = parse_budget(Some(&b))?,
        }
        Ok(fx)
    }
}

/// The `resources` of the wire object: the params echoed with every optional field present
/// (`mount_path` null when not sent), never a credential.
fn resource_config(r: &Value) -> Value {
    let get = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
    match r.get("type").and_then(Value::as_str) {
        Some("memory_store") => json!({
            "type": "memory_store",
            "memory_store_id": get("memory_store_id"),
            "access": get("access"),
            "instructions": get("instructions"),
        }),
        _ => json!({"type": "file", "file_id": get("file_id"), "mount_path": get("mount_path")}),
    }
}

/// The columns a deployment row carries beside its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentState {
    /// Why it is paused (`{"type":"manual"}` or `{"type":"error","error":{"type"}}`).
    pub paused_reason: Option<Value>,
    /// When the last scheduled run started a session.
    pub last_run_at: Option<Micros>,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub archived_at: Option<Micros>,
}

/// The wire object of a stored deployment, its upcoming firings computed from `now` at `pace`.
pub fn view(
    id: &str,
    spec: &DeploymentSpec,
    st: &DeploymentState,
    now: Micros,
    pace: crate::schedule::Pace,
) -> Deployment {
    let schedule = spec.schedule.as_ref().map(|s| {
        let upcoming: Vec<String> = if st.archived_at.is_some() {
            vec![]
        } else {
            s.upcoming(now, UPCOMING, pace)
                .into_iter()
                .map(time::format)
                .collect()
        };
        json!({
            "type": "cron",
            "expression": s.expression,
            "timezone": s.timezone,
            "last_run_at": time::format_opt(st.last_run_at),
            "upcoming_runs_at": upcoming,
        })
    });
    Deployment {
        tag: DeploymentTag::Tag,
        id: id.to_string(),
        name: spec.name.clone(),
        description: spec.description.clone(),
        agent: spec.agent_ref(),
        environment_id: spec.environment_id.clone(),
        initial_events: spec.initial_events.clone(),
        resources: spec.resources.iter().map(resource_config).collect(),
        vault_ids: spec.vault_ids.clone(),
        metadata: spec.metadata.clone(),
        schedule,
        status: if st.paused_reason.is_some() {
            "paused"
        } else {
            "active"
        }
        .into(),
        paused_reason: st.paused_reason.clone(),
        budget: spec.budget.clone(),
        created_at: time::format(st.created_at),
        updated_at: time::format(st.updated_at),
        archived_at: time::format_opt(st.archived_at),
    }
}

/// The paused reason of a manual pause.
pub fn manual_pause() -> Value {
    json!({"type": "manual"})
}

/// The run error codes that mean the definition can no longer start a session: a scheduled
/// firing that fails with one of them pauses the deployment (the `…deployment_paused_reason`
/// errors). `unknown_error` is left out: Mast records it for store failures, which pass.
pub const PAUSING_ERRORS: &[&str] = &[
    "environment_archived_error",
    "agent_archived_error",
    "environment_not_found_error",
    "vault_not_found_error",
    "vault_archived_error",
    "file_not_found_error",
    "session_resource_not_found_error",
    "memory_store_archived_error",
    "skill_not_found_error",
    "self_hosted_resources_unsupported_error",
    "mcp_egress_blocked_error",
];

/// The paused reason a run error gives, when it is one that pauses.
pub fn pause_for(error_type: &str) -> Option<Value> {
    PAUSING_ERRORS
        .contains(&error_type)
        .then(|| json!({"type": "error", "error": {"type": error_type}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(v: Value) -> Valid<(AgentPin, DeploymentSpec)> {
        serde_json::from_value::<DeploymentCreate>(v)
            .unwrap()
            .check()
    }

    fn base() -> Value {
        json!({"name": "n", "agent": "agent_1", "environment_id": "env_1",
               "initial_events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]})
    }

    #[test]
    fn create_checks_each_field() {
        let (pin, spec) = create(base()).unwrap();
        assert_eq!(pin.version, None);
        assert_eq!(spec.schedule, None);
        let cases: Vec<(&str, Value)> = vec![
            ("name", json!("")),
            ("initial_events", json!([])),
            (
                "initial_events",
                json!([{"type": "system.message", "content": []}]),
            ),
            ("agent", json!({"type": "agent", "id": "agent_1"})),
            ("agent", json!({"type": "agent_with_overrides", "id": "a"})),
            (
                "resources",
                json!([{"type": "github_repository", "url": "https://x"}]),
            ),
            ("resources", json!("x")),
            ("vault_ids", json!(["v", "v"])),
            (
                "schedule",
                json!({"type": "cron", "expression": "@daily", "timezone": "UTC"}),
            ),
            (
                "budget",
                json!({"type": "limit", "max_list_cost": {"amount": "x", "currency": "USD"}}),
            ),
        ];
        for (k, v) in cases {
            let mut b = base();
            b[k] = v.clone();
            assert!(create(b).is_err(), "{k}: {v}");
        }
    }

    #[test]
    fn update_keeps_clears_and_replaces() {
        let (_, mut spec) = create(base()).unwrap();
        spec.description = Some("d".into());
        let u: DeploymentUpdate = serde_json::from_value(json!({
            "description": "", "metadata": {"a": "1"},
            "schedule": {"type": "cron", "expression": "0 9 * * *", "timezone": "UTC"}
        }))
        .unwrap();
        let fx = u.apply(&mut spec).unwrap();
        assert!(fx.schedule_changed);
        assert_eq!(spec.description, None);
        assert_eq!(spec.metadata.get("a").map(String::as_str), Some("1"));
        for bad in [
            json!({"name": null}),
            json!({"agent": null}),
            json!({"initial_events": null}),
        ] {
            let u: DeploymentUpdate = serde_json::from_value(bad.clone()).unwrap();
            assert!(u.apply(&mut spec.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_definition_errors_pause() {
        assert!(pause_for("vault_archived_error").is_some());
        assert!(pause_for("session_creation_rejected_error").is_none());
        assert!(pause_for("unknown_error").is_none());
    }
}

//! Creating a session, as a pipeline of stages: check the request, resolve the agent,
//! resolve the environment, draft the rows, commit and start.
//!
//! A feature that adds to session creation (resources, vaults, budgets, …) adds its check to
//! [`Checked`], its lookups as a stage of its own beside [`resolve_agent`], and its part of
//! the rows to [`Draft`]; every stage before [`Engine::commit_draft`] writes nothing.

use std::collections::HashMap;

use serde_json::json;

use super::{OpError, views};
use crate::Engine;
use crate::intake::server_event;
use crate::state::{EngineState, grant_lease, set_status, work_item_for};
use mast_domain::agent::{self as agents, Agent, SessionAgent};
use mast_domain::environment::{Environment, EnvironmentConfig};
use mast_domain::events::{ClientEvent, kind};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::memory_resource::{self, MemoryStoreParams};
use mast_domain::metadata::{self, Metadata};
use mast_domain::multiagent;
use mast_domain::resource::{self, ResourceParams};
use mast_domain::session::{
    AgentSelection, Session, SessionBody, SessionCreate, SessionStatus, SessionUsage, check_title,
    parse_agent_selection, parse_vault_ids,
};
use mast_domain::time::Micros;
use mast_domain::vault;
use mast_store::{NewEvent, SessionRecord, ThreadRecord, WorkRecord};

/// Most `initial_events` a creation may carry.
const MAX_INITIAL_EVENTS: usize = 50;

/// A creation request that passed every rule needing no lookup.
struct Checked {
    agent: AgentSelection,
    environment_id: String,
    title: Option<String>,
    metadata: Metadata,
    /// Vaults whose credentials the session's MCP servers use, in the order given.
    vault_ids: Vec<String>,
    /// `user.message` events that start the first turn.
    initial: Vec<ClientEvent>,
    /// Files to mount and repositories to clone, in the order given.
    resources: Vec<ResourceParams>,
    /// Memory stores to attach, in the order given.
    memory: Vec<MemoryStoreParams>,
    /// The budget's cap in cents.
    budget_cents: Option<i64>,
    /// The deployment whose firing creates the session.
    deployment_id: Option<String>,
}

impl Checked {
    /// Applies the request's own rules.
    fn of(req: SessionCreate) -> Result<Self, Invalid> {
        let agent = parse_agent_selection(&req.agent)?;
        check_title(&req.title)?;
        let metadata = req.metadata.unwrap_or_default();
        metadata::validate(&metadata)?;
        let budget_cents = match req.budget.as_ref().filter(|b| !b.is_null()) {
            Some(b) => Some(mast_domain::budget::parse("budget", b)?),
            None => None,
        };
        let vault_ids = parse_vault_ids(req.vault_ids.as_ref())?.unwrap_or_default();
        let resources = resource::parse_resources(req.resources.as_ref())?;
        let memory = memory_resource::parse_list(req.resources.as_ref())?;
        Ok(Checked {
            agent,
            environment_id: req.environment_id,
            title: req.title,
            metadata,
            vault_ids,
            initial: initial_events(req.initial_events.as_deref())?,
            resources,
            memory,
            budget_cents,
            deployment_id: None,
        })
    }
}

/// `initial_events`: at most 50, each a `user.message` or (at most one)
/// `user.define_outcome`.
fn initial_events(list: Option<&[serde_json::Value]>) -> Result<Vec<ClientEvent>, Invalid> {
    let Some(list) = list else {
        return Ok(vec![]);
    };
    if list.len() > MAX_INITIAL_EVENTS {
        return Err(Invalid::new(format!(
            "`initial_events` has more than {MAX_INITIAL_EVENTS} events"
        )));
    }
    let parsed = list
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let parsed = ClientEvent::parse(&format!("initial_events[{i}]"), e)?;
            match parsed {
                ClientEvent::UserMessage { .. } | ClientEvent::DefineOutcome(_) => Ok(parsed),
                _ => Err(Invalid::new(format!(
                    "`initial_events[{i}]` must be a `user.message` or a `user.define_outcome`"
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let outcomes = parsed
        .iter()
        .filter(|e| matches!(e, ClientEvent::DefineOutcome(_)))
        .count();
    if outcomes > 1 {
        return Err(Invalid::new(format!(
            "`initial_events` has {outcomes} `user.define_outcome` events; at most one outcome is active at a time"
        )));
    }
    Ok(parsed)
}

/// The agent a session runs: its row and the snapshot the session keeps of it.
struct ResolvedAgent {
    agent: Agent,
    snapshot: SessionAgent,
}

/// A request past every check and lookup: what the draft is made of.
type Prepared = (
    Checked,
    ResolvedAgent,
    Environment,
    Vec<mast_domain::memory_resource::MemoryStoreResource>,
);

/// The rows a creation writes, not written yet.
struct Draft {
    session: SessionRecord,
    /// What `session.body` holds, parsed: kept for the runner once the session is written.
    body: SessionBody,
    thread: ThreadRecord,
    events: Vec<NewEvent>,
    /// The first work item of a self-hosted session.
    work: Option<WorkRecord>,
}

impl Engine {
    /// Creates a session in workspace `ws` and starts its first turn when the request
    /// carries `initial_events`.
    pub async fn create_session(&self, ws: &str, req: SessionCreate) -> Result<Session, OpError> {
        self.create_session_from(ws, req, None).await
    }

    /// Checks a creation request as [`Engine::create_session`] would, looking everything up,
    /// and writes nothing: a deployment is checked this way when it is saved.
    pub async fn check_session_create(&self, ws: &str, req: SessionCreate) -> Result<(), OpError> {
        self.prepare(ws, req).await.map(|_| ())
    }

    /// Creates a session as [`Engine::create_session`] does, recording the deployment whose
    /// firing created it (`deployment_id` of the session).
    pub async fn create_session_from(
        &self,
        ws: &str,
        req: SessionCreate,
        deployment_id: Option<&str>,
    ) -> Result<Session, OpError> {
        let (mut checked, agent, env, memory) = self.prepare(ws, req).await?;
        checked.deployment_id = deployment_id.map(str::to_string);
        let now = self.now();
        let mut draft = self.draft(ws, checked, agent, &env, now)?;
        if super::memory_attach::add_to_body(&mut draft.body, memory).map_err(internal)? {
            draft.session.body = serde_json::to_string(&draft.body).map_err(internal)?.into();
        }
        self.gate_initial_prompts(&draft).await?;
        let rec = self.commit_draft(draft).await?;
        tracing::info!(
            session_id = %rec.id,
            agent_id = %rec.agent_id,
            environment_id = %rec.environment_id,
            deployment_id = deployment_id.unwrap_or_default(),
            "session created"
        );
        Ok(views::session(&rec, now)?)
    }

    /// Every stage before the draft: the request's own rules and every lookup.
    async fn prepare(&self, ws: &str, req: SessionCreate) -> Result<Prepared, OpError> {
        let mut checked = Checked::of(req)?;
        let agent = self.resolve_agent(ws, &checked.agent).await?;
        crate::delegation::refuse_reserved_tools(&agent.snapshot)?;
        if checked.budget_cents.is_some() {
            crate::budget::check_budgetable(&agent.snapshot, &self.inner.config.prices)?;
        }
        let env = self
            .resolve_environment(ws, &checked.environment_id)
            .await?;
        self.check_vaults(ws, &checked.vault_ids).await?;
        self.check_resource_files(ws, &env, &checked.resources)
            .await?;
        self.check_file_sources(ws, "initial_events", &checked.initial)
            .await?;
        self.resolve_rubrics(ws, "initial_events", &mut checked.initial)
            .await?;
        let memory = self
            .resolve_memory_stores(ws, &checked.memory, &checked.resources)
            .await?;
        Ok((checked, agent, env, memory))
    }

    /// The selected agent (a version, or the latest), with its roster pinned and the
    /// request's overrides applied to the snapshot.
    async fn resolve_agent(
        &self,
        ws: &str,
        sel: &AgentSelection,
    ) -> Result<ResolvedAgent, OpError> {
        let store = &self.inner.store;
        let agent = store
            .get_agent(ws, &sel.id, sel.version)
            .await?
            .ok_or_else(|| OpError::AgentNotFound {
                id: sel.id.clone(),
                version: sel.version,
            })?;
        if agent.archived_at.is_some() {
            return Err(agents::archived(&agent.id, "cannot start new sessions").into());
        }
        let mut snapshot = agent.thread_snapshot();
        if let Some(m) = &agent.multiagent {
            let mut snapshots = HashMap::new();
            for (id, v) in multiagent::pinned_refs(m) {
                if let Some(a) = store.get_agent(ws, &id, Some(v)).await? {
                    snapshots.insert((id, v), a.thread_snapshot());
                }
            }
            snapshot.multiagent = Some(multiagent::session_form(m, &|id, v| {
                snapshots.get(&(id.to_string(), v)).cloned()
            }));
        }
        if let Some(o) = sel.overrides.clone() {
            snapshot = o.apply(snapshot)?;
            // An overridden model is checked against the provider's current list.
            self.inner.models.refresh().await;
            self.inner
                .models
                .check_routable(&snapshot.model.id)
                .map_err(Invalid::new)?;
        }
        // `latest` is pinned now, as the agent's own version is.
        crate::skills::pin(&**store, ws, &mut snapshot.skills)
            .await
            .map_err(Invalid::new)?;
        Ok(ResolvedAgent { agent, snapshot })
    }

    /// The environment the session runs in; archived ones take no new sessions.
    async fn resolve_environment(&self, ws: &str, id: &str) -> Result<Environment, OpError> {
        let env = self
            .inner
            .store
            .get_environment(ws, id)
            .await?
            .ok_or_else(|| OpError::EnvironmentNotFound(id.to_string()))?;
        if env.archived_at.is_some() {
            return Err(Invalid::with_code(
                "environment_archived",
                format!("environment `{}` is archived", env.id),
            )
            .into());
        }
        Ok(env)
    }

    /// Every vault a session names exists in the workspace and is not archived. Only ids
    /// are kept: credentials are read when an MCP server is called, so later changes to the
    /// vaults apply to the session from its next call.
    async fn check_vaults(&self, ws: &str, ids: &[String]) -> Result<(), OpError> {
        for id in ids {
            let v = self
                .inner
                .store
                .get_vault(ws, id)
                .await?
                .ok_or_else(|| OpError::VaultNotFound(id.clone()))?;
            if v.archived_at.is_some() {
                return Err(vault::archived(id, "it cannot be given to new sessions").into());
            }
        }
        Ok(())
    }

    /// The rows of the new session: idle, or running with the lease granted to this process
    /// when initial events start a turn.
    fn draft(
        &self,
        ws: &str,
        checked: Checked,
        resolved: ResolvedAgent,
        env: &Environment,
        now: Micros,
    ) -> Result<Draft, OpError> {
        let id = new_id("sesn");
        let thread_id = new_id("sthr");
        let ResolvedAgent { agent, snapshot } = resolved;
        let mut resources = Vec::with_capacity(checked.resources.len());
        let mut repository_tokens = std::collections::BTreeMap::new();
        for r in &checked.resources {
            let (v, sealed) = super::resources::new_resource(self, r, now)?;
            if let (Some(id), Some(sealed)) = (v.get("id").and_then(|i| i.as_str()), sealed) {
                repository_tokens.insert(id.to_string(), sealed);
            }
            resources.push(v);
        }
        let body = SessionBody {
            title: checked.title,
            metadata: checked.metadata,
            agent: snapshot.clone(),
            resources,
            vault_ids: checked.vault_ids,
            budget: checked.budget_cents.map(mast_domain::budget::to_json),
            outcome_evaluations: vec![],
            deployment_id: checked.deployment_id,
            environment: env.config.clone(),
            primary_thread_id: thread_id.clone(),
            repository_tokens,
        };
        let mut session = SessionRecord {
            id: id.clone(),
            workspace_id: ws.to_string(),
            agent_id: agent.id.clone(),
            agent_version: agent.version,
            environment_id: env.id.clone(),
            status: SessionStatus::Idle.as_str().into(),
            body: serde_json::to_string(&body).map_err(internal)?.into(),
            usage: serde_json::to_string(&SessionUsage::default()).map_err(internal)?,
            active_micros: 0,
            running_since: None,
            last_seq: 0,
            engine: serde_json::to_string(&EngineState {
                budget_cents: checked.budget_cents,
                // A session of a model with no price has no list cost to show (null), not $0.
                spend: mast_domain::prices::Spend {
                    tokens: 0,
                    unpriced: self.inner.config.prices.of(&snapshot.model.id).is_none(),
                },
                // An outcome among the initial events starts with the session's first turn.
                outcomes: checked
                    .initial
                    .iter()
                    .filter_map(|e| match e {
                        ClientEvent::DefineOutcome(d) => {
                            Some(mast_domain::outcome::Outcome::new(d))
                        }
                        _ => None,
                    })
                    .collect(),
                ..Default::default()
            })
            .map_err(internal)?,
            created_at: now,
            updated_at: now,
            archived_at: None,
            terminated_at: None,
            workflow_deadline_at: None,
            version: 0,
            lease_owner: None,
            lease_expires_at: None,
        };
        let thread = ThreadRecord {
            id: thread_id.clone(),
            session_id: id,
            parent_thread_id: None,
            spawning_event_id: None,
            status: SessionStatus::Idle.as_str().into(),
            body: serde_json::to_string(&json!({ "agent": snapshot, "agent_name": agent.name }))
                .map_err(internal)?,
            created_at: now,
            updated_at: now,
            archived_at: None,
        };
        let mut events: Vec<NewEvent> = checked
            .initial
            .iter()
            .map(|e| NewEvent {
                id: new_id("sevt"),
                thread_id: Some(thread_id.clone()),
                kind: e.kind().into(),
                body: e.body(None),
                internal: None,
                answers: None,
                processed_at: Some(now),
            })
            .collect();
        if !events.is_empty() {
            events.push(server_event(
                kind::STATUS_RUNNING,
                json!({}),
                &thread_id,
                now,
            ));
            set_status(&mut session, SessionStatus::Running, now);
            grant_lease(&mut session, self.lease_grant().as_ref(), now);
        }
        // A self-hosted session is handed to the environment's workers from the start.
        let work = matches!(env.config, EnvironmentConfig::SelfHosted)
            .then(|| work_item_for(&session, now));
        Ok(Draft {
            session,
            body,
            thread,
            events,
            work,
        })
    }

    /// Puts the drafted session's initial input to the `user_prompt_submit` hooks (a block
    /// refuses the creation, so nothing is written).
    async fn gate_initial_prompts(&self, draft: &Draft) -> Result<(), OpError> {
        let prompts: Vec<_> = draft
            .events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| super::input_hooks::Prompt::of(i, &e.kind, &e.body))
            .collect();
        let s = &draft.session;
        let session = crate::hooks::HookContext {
            workspace_id: &s.workspace_id,
            session_id: &s.id,
            thread_id: &draft.thread.id,
            agent_id: &s.agent_id,
            scope_agent_id: &s.agent_id,
            environment_id: &s.environment_id,
        };
        self.gate_prompts(&session, "initial_events", &prompts)
            .await
    }

    /// Writes the drafted rows, tells the environment's workers about a first work item and
    /// starts the runner of a session that has a turn to run.
    async fn commit_draft(&self, draft: Draft) -> Result<SessionRecord, OpError> {
        let Draft {
            mut session,
            body,
            thread,
            events,
            work,
        } = draft;
        let appended = self
            .inner
            .store
            .create_session(&session, &thread, &events, work.as_ref())
            .await?;
        // The runner's first wake finds the body parsed already.
        self.inner.bodies.keep(&session.id, &session.body, body);
        if work.is_some() {
            self.inner.hub.work_queued(&session.environment_id);
        }
        session.last_seq = appended.len() as i64;
        if !appended.is_empty() {
            self.wake(&session.id);
        }
        Ok(session)
    }
}

fn internal(e: serde_json::Error) -> OpError {
    OpError::Store(e.into())
}

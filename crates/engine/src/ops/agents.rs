//! Agents: create, read, update (a new immutable version), list, archive, versions. The
//! rules that need the store live here: an update names the version it edits or loses to a
//! concurrent one, an update that changes nothing saves nothing, the model must be one a
//! provider serves, and skills and multiagent rosters must name stored things.

use std::collections::HashMap;

use serde_json::Value;

use super::OpError;
use crate::Engine;
use mast_domain::agent::{Agent, AgentSpec, AgentUpdate, Skill, SkillKind, archived, same_content};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::multiagent::{self, RosterRef, SelfAgent};
use mast_domain::query::{AgentFilter, Scan};
use mast_domain::time;

impl Engine {
    /// Saves a new agent at version 1.
    pub async fn create_agent(&self, ws: &str, spec: AgentSpec) -> Result<Agent, OpError> {
        self.check_agent_spec(ws, &spec).await?;
        let id = new_id("agent");
        let me = SelfAgent {
            id: &id,
            version: 1,
            inference_geo: spec.model.inference_geo.as_deref(),
        };
        let roster = self
            .resolve_multiagent(ws, spec.multiagent_request.as_ref(), me)
            .await?;
        let now = time::format(self.now());
        let agent = spec.into_agent(&id, 1, roster, now.clone(), now);
        self.inner.store.insert_agent(ws, &agent).await?;
        Ok(agent)
    }

    /// The agent's latest version, or the one `version` names.
    pub async fn agent(&self, ws: &str, id: &str, version: Option<i64>) -> Result<Agent, OpError> {
        let store = &self.inner.store;
        match store.get_agent(ws, id, version).await? {
            Some(a) => Ok(a),
            None if version.is_some() && store.get_agent(ws, id, None).await?.is_some() => {
                Err(OpError::NotFound(format!(
                    "agent `{id}` has no version {}",
                    version.unwrap_or_default()
                )))
            }
            None => Err(agent_not_found(id)),
        }
    }

    /// Saves the agent's next version when `update` changes anything, else returns the
    /// current one. `update.version`, when sent, must be the current version: two editors
    /// that read the same version cannot both write the next.
    pub async fn update_agent(
        &self,
        ws: &str,
        id: &str,
        update: AgentUpdate,
    ) -> Result<Agent, OpError> {
        let current = self
            .inner
            .store
            .get_agent(ws, id, None)
            .await?
            .ok_or_else(|| agent_not_found(id))?;
        if current.archived_at.is_some() {
            return Err(archived(id, "cannot be updated").into());
        }
        if let Some(v) = update.version
            && v != current.version
        {
            return Err(OpError::Conflict(format!(
                "agent `{id}` is at version {}, not {v}; retrieve it and retry with the current version",
                current.version
            )));
        }
        let spec = update.apply(&current)?;
        self.check_agent_spec(ws, &spec).await?;
        let next_version = current.version + 1;
        let me = SelfAgent {
            id,
            version: next_version,
            inference_geo: spec.model.inference_geo.as_deref(),
        };
        let roster = self
            .resolve_multiagent(ws, spec.multiagent_request.as_ref(), me)
            .await?;
        let next = spec.into_agent(
            id,
            next_version,
            roster,
            current.created_at.clone(),
            time::format(self.now()),
        );
        // A `self` roster entry pins the version being written; compare with it mapped back.
        let unchanged = {
            let mut probe = next.clone();
            probe.multiagent = probe
                .multiagent
                .map(|m| repin_self(m, id, next_version, current.version));
            same_content(&probe, &current)
        };
        if unchanged {
            return Ok(current);
        }
        self.inner
            .store
            .append_agent_version(ws, &next, current.version)
            .await?;
        Ok(next)
    }

    /// A page of the workspace's agents (their latest versions).
    pub async fn list_agents(
        &self,
        ws: &str,
        filter: &AgentFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<Agent>, OpError> {
        Ok(self.inner.store.list_agents(ws, filter, scan).await?)
    }

    /// Archives the agent: it starts no more sessions and takes no updates.
    pub async fn archive_agent(&self, ws: &str, id: &str) -> Result<Agent, OpError> {
        self.inner
            .store
            .archive_agent(ws, id, self.now())
            .await?
            .ok_or_else(|| agent_not_found(id))
    }

    /// A page of the agent's saved versions; not found when the agent is not.
    pub async fn list_agent_versions(
        &self,
        ws: &str,
        id: &str,
        scan: &Scan<i64>,
    ) -> Result<Vec<Agent>, OpError> {
        let store = &self.inner.store;
        let rows = store.list_agent_versions(ws, id, scan).await?;
        if rows.is_empty() && store.get_agent(ws, id, None).await?.is_none() {
            return Err(agent_not_found(id));
        }
        Ok(rows)
    }

    /// Refuses, at save time rather than at the first turn, a model no configured provider
    /// serves and skills the workspace does not have.
    async fn check_agent_spec(&self, ws: &str, spec: &AgentSpec) -> Result<(), OpError> {
        if let Some(m) = &spec.multiagent_request {
            multiagent::check_keys(m)?;
        }
        let models = &self.inner.models;
        models.refresh().await;
        models
            .check_routable(&spec.model.id)
            .map_err(Invalid::new)?;
        self.check_agent_skills(ws, &spec.skills).await
    }

    /// Refuses skills that name no stored skill or version of the right kind.
    pub async fn check_agent_skills(&self, ws: &str, skills: &[Skill]) -> Result<(), OpError> {
        for (i, s) in skills.iter().enumerate() {
            if crate::skills::resolve(&*self.inner.store, ws, s)
                .await?
                .is_none()
            {
                if s.kind == SkillKind::Anthropic {
                    return Err(mast_domain::skill::anthropic_not_installed(
                        &format!("skills[{i}]"),
                        &s.skill_id,
                    )
                    .into());
                }
                return Err(
                    Invalid::new(format!("`skills[{i}]`: {}", crate::skills::missing(s))).into(),
                );
            }
        }
        Ok(())
    }

    /// Resolves a multiagent request: roster agents are looked up in the workspace, pinned
    /// to versions and checked (exist, not archived, no roster of their own).
    async fn resolve_multiagent(
        &self,
        ws: &str,
        req: Option<&Value>,
        me: SelfAgent<'_>,
    ) -> Result<Option<Value>, OpError> {
        let Some(req) = req else { return Ok(None) };
        let mut found: HashMap<RosterRef, Agent> = HashMap::new();
        for r in multiagent::roster_refs(req)? {
            if r.id == me.id {
                continue;
            }
            if let Some(a) = self.inner.store.get_agent(ws, &r.id, r.version).await? {
                found.insert(r, a);
            }
        }
        Ok(Some(multiagent::resolve(req, &me, &|r| {
            found.get(r).cloned()
        })?))
    }
}

fn agent_not_found(id: &str) -> OpError {
    OpError::AgentNotFound {
        id: id.to_string(),
        version: None,
    }
}

/// Rewrites `self` pins from one version to another (for the no-op update check).
fn repin_self(mut m: Value, id: &str, from: i64, to: i64) -> Value {
    fn visit(v: &mut Value, id: &str, from: i64, to: i64) {
        match v {
            Value::Object(o) => {
                if o.get("id").and_then(Value::as_str) == Some(id)
                    && o.get("version").and_then(Value::as_i64) == Some(from)
                {
                    o.insert("version".into(), to.into());
                }
                o.values_mut().for_each(|c| visit(c, id, from, to));
            }
            Value::Array(a) => a.iter_mut().for_each(|c| visit(c, id, from, to)),
            _ => {}
        }
    }
    visit(&mut m, id, from, to);
    m
}

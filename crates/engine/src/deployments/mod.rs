//! Deployments: saved definitions that start sessions on a schedule or on
//! demand, and the append-only record of every firing.
//!
//! A definition is checked when it is saved by the same check `POST /v1/sessions` runs
//! ([`Engine::check_session_create`]), and each firing creates its session through the same
//! operation ([`Engine::create_session_from`]), so a deployment can never start a session a
//! request could not. Every change to a deployment is one store statement or transaction
//! (the run and the pause it causes together), so a webhook outbox row can join it later.
//! The scheduler that fires schedules is in [`scheduler`].

mod scheduler;

use serde_json::{Value, json};

use super::Engine;
use super::ops::OpError;
use mast_domain::deployment::{
    self as dep, AgentPin, Deployment, DeploymentCreate, DeploymentRun, DeploymentRunTag,
    DeploymentSpec, DeploymentState, DeploymentUpdate,
};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::session::SessionCreate;
use mast_domain::time::{self, Micros};
use mast_store::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire, Scan, StoreResult,
};

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The schedule's slot at this instant (before jitter; Mast adds none).
    Schedule(Micros),
    /// `deployments.run`.
    Manual,
}

/// The wire object of a stored run.
pub fn run_view(r: &DeploymentRunRecord) -> DeploymentRun {
    DeploymentRun {
        tag: DeploymentRunTag::Tag,
        id: r.id.clone(),
        deployment_id: r.deployment_id.clone(),
        agent: json!({"type": "agent", "id": r.agent_id, "version": r.agent_version}),
        trigger_context: match r.scheduled_at {
            Some(at) => json!({"type": "schedule", "scheduled_at": time::format(at)}),
            None => json!({"type": "manual"}),
        },
        session_id: r.session_id.clone(),
        error: r
            .error
            .as_deref()
            .and_then(|e| serde_json::from_str(e).ok()),
        created_at: time::format(r.created_at),
    }
}

/// The `sessions.create` request a firing makes.
fn session_request(spec: &DeploymentSpec) -> SessionCreate {
    SessionCreate {
        agent: spec.agent_ref(),
        environment_id: spec.environment_id.clone(),
        title: None,
        metadata: None,
        resources: (!spec.resources.is_empty()).then(|| Value::Array(spec.resources.clone())),
        vault_ids: (!spec.vault_ids.is_empty()).then(|| json!(spec.vault_ids)),
        budget: spec.budget.clone(),
        initial_events: Some(spec.initial_events.clone()),
    }
}

/// Whether two definitions would make different sessions.
fn starts_differently(a: &DeploymentSpec, b: &DeploymentSpec) -> bool {
    (
        &a.environment_id,
        &a.initial_events,
        &a.resources,
        &a.vault_ids,
        &a.budget,
    ) != (
        &b.environment_id,
        &b.initial_events,
        &b.resources,
        &b.vault_ids,
        &b.budget,
    )
}

/// The run error (`type`, `message`) of a session creation that failed. Each lookup failure
/// maps to the API's code for it; any other refusal is `session_creation_rejected_error`, and
/// a store failure `unknown_error`.
fn run_error(e: &OpError) -> (&'static str, String) {
    let code = match e {
        OpError::EnvironmentNotFound(_) => "environment_not_found_error",
        OpError::VaultNotFound(_) => "vault_not_found_error",
        OpError::FileNotFound(_) => "file_not_found_error",
        OpError::AgentNotFound { .. } | OpError::MemoryStoreNotFound(_) => {
            "session_resource_not_found_error"
        }
        OpError::Invalid(i) => match i.code {
            Some("agent_archived") => "agent_archived_error",
            Some("environment_archived") => "environment_archived_error",
            Some("vault_archived") => "vault_archived_error",
            Some("memory_store_archived") => "memory_store_archived_error",
            _ => "session_creation_rejected_error",
        },
        OpError::Store(_) => "unknown_error",
        _ => "session_creation_rejected_error",
    };
    (code, e.to_string())
}

fn archived(id: &str, what: &str) -> OpError {
    Invalid::with_code(
        "deployment_archived",
        format!("deployment `{id}` is archived: {what}"),
    )
    .into()
}

impl Engine {
    /// The wire object of a stored deployment, its upcoming firings from now.
    fn deployment_view(&self, d: &DeploymentRecord) -> Deployment {
        dep::view(
            &d.id,
            &d.spec,
            &d.state,
            self.now(),
            self.inner.config.cron_pace,
        )
    }

    /// Resolves the agent pin (an id alone pins its latest version) into `spec` and checks
    /// the whole definition as a session creation would be checked.
    async fn check_definition(
        &self,
        ws: &str,
        pin: Option<AgentPin>,
        spec: &mut DeploymentSpec,
    ) -> Result<(), OpError> {
        if let Some(pin) = pin {
            let agent = self
                .inner
                .store
                .get_agent(ws, &pin.id, pin.version)
                .await?
                .ok_or_else(|| OpError::AgentNotFound {
                    id: pin.id.clone(),
                    version: pin.version,
                })?;
            spec.agent_id = agent.id;
            spec.agent_version = agent.version;
        }
        self.check_session_create(ws, session_request(spec)).await
    }

    async fn stored_deployment(&self, ws: &str, id: &str) -> Result<DeploymentRecord, OpError> {
        self.inner
            .store
            .get_deployment(ws, id)
            .await?
            .ok_or_else(|| OpError::DeploymentNotFound(id.to_string()))
    }

    /// `POST /v1/deployments`.
    pub async fn create_deployment(
        &self,
        ws: &str,
        body: DeploymentCreate,
    ) -> Result<Deployment, OpError> {
        let (pin, mut spec) = body.check()?;
        self.check_definition(ws, Some(pin), &mut spec).await?;
        let now = self.now();
        let next_fire_at = spec
            .schedule
            .as_ref()
            .and_then(|s| s.next_after(now, self.inner.config.cron_pace));
        let rec = DeploymentRecord {
            id: new_id("depl"),
            workspace_id: ws.to_string(),
            spec,
            state: DeploymentState {
                paused_reason: None,
                last_run_at: None,
                created_at: now,
                updated_at: now,
                archived_at: None,
            },
            next_fire_at,
        };
        self.inner.store.insert_deployment(&rec).await?;
        Ok(self.deployment_view(&rec))
    }

    /// `GET /v1/deployments/{id}`.
    pub async fn deployment(&self, ws: &str, id: &str) -> Result<Deployment, OpError> {
        Ok(self.deployment_view(&self.stored_deployment(ws, id).await?))
    }

    /// `POST /v1/deployments/{id}`: archived deployments take no changes; a changed schedule
    /// fires next at its first slot after now.
    pub async fn update_deployment(
        &self,
        ws: &str,
        id: &str,
        body: DeploymentUpdate,
    ) -> Result<Deployment, OpError> {
        let mut rec = self.stored_deployment(ws, id).await?;
        if rec.state.archived_at.is_some() {
            return Err(archived(id, "it cannot be updated"));
        }
        let before = rec.spec.clone();
        let fx = body.apply(&mut rec.spec)?;
        // Only a change to what sessions are made of is checked again: renaming or
        // rescheduling a deployment whose vault was archived stays possible.
        if fx.agent.is_some() || starts_differently(&before, &rec.spec) {
            self.check_definition(ws, fx.agent, &mut rec.spec).await?;
        }
        let now = self.now();
        rec.state.updated_at = now;
        let next = if fx.schedule_changed {
            rec.next_fire_at = rec
                .spec
                .schedule
                .as_ref()
                .and_then(|s| s.next_after(now, self.inner.config.cron_pace));
            NextFire::Set(rec.next_fire_at)
        } else {
            NextFire::Keep
        };
        self.inner
            .store
            .update_deployment(&rec, next, DeploymentChange::Updated)
            .await?;
        Ok(self.deployment_view(&rec))
    }

    /// `GET /v1/deployments`.
    pub async fn list_deployments(
        &self,
        ws: &str,
        filter: &DeploymentFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<Deployment>, OpError> {
        let rows = self.inner.store.list_deployments(ws, filter, scan).await?;
        Ok(rows.iter().map(|d| self.deployment_view(d)).collect())
    }

    /// `POST /v1/deployments/{id}/archive` (idempotent): it never fires again, and reports
    /// `active` with `archived_at` set.
    pub async fn archive_deployment(&self, ws: &str, id: &str) -> Result<Deployment, OpError> {
        let mut rec = self.stored_deployment(ws, id).await?;
        if rec.state.archived_at.is_some() {
            return Ok(self.deployment_view(&rec));
        }
        let now = self.now();
        rec.state.archived_at = Some(now);
        rec.state.updated_at = now;
        rec.state.paused_reason = None;
        rec.next_fire_at = None;
        self.inner
            .store
            .update_deployment(&rec, NextFire::Set(None), DeploymentChange::Archived)
            .await?;
        Ok(self.deployment_view(&rec))
    }

    /// `POST /v1/deployments/{id}/pause` (a paused one stays as it is, with its reason).
    pub async fn pause_deployment(&self, ws: &str, id: &str) -> Result<Deployment, OpError> {
        let mut rec = self.stored_deployment(ws, id).await?;
        if rec.state.archived_at.is_some() {
            return Err(archived(id, "it cannot be paused"));
        }
        if rec.state.paused_reason.is_some() {
            return Ok(self.deployment_view(&rec));
        }
        rec.state.paused_reason = Some(dep::manual_pause());
        rec.state.updated_at = self.now();
        self.inner
            .store
            .update_deployment(&rec, NextFire::Keep, DeploymentChange::Paused)
            .await?;
        Ok(self.deployment_view(&rec))
    }

    /// `POST /v1/deployments/{id}/unpause`: the schedule resumes from its first slot after
    /// now; slots that passed while paused are not fired.
    pub async fn unpause_deployment(&self, ws: &str, id: &str) -> Result<Deployment, OpError> {
        let mut rec = self.stored_deployment(ws, id).await?;
        if rec.state.archived_at.is_some() {
            return Err(archived(id, "it cannot be unpaused"));
        }
        if rec.state.paused_reason.is_none() {
            return Ok(self.deployment_view(&rec));
        }
        let now = self.now();
        rec.state.paused_reason = None;
        rec.state.updated_at = now;
        rec.next_fire_at = rec
            .spec
            .schedule
            .as_ref()
            .and_then(|s| s.next_after(now, self.inner.config.cron_pace));
        self.inner
            .store
            .update_deployment(
                &rec,
                NextFire::Set(rec.next_fire_at),
                DeploymentChange::Unpaused,
            )
            .await?;
        Ok(self.deployment_view(&rec))
    }

    /// `POST /v1/deployments/{id}/run`: fires now, also while paused (a manual run never
    /// pauses or unpauses). A firing that could not start a session is still a 200: its run
    /// carries the error.
    pub async fn run_deployment(&self, ws: &str, id: &str) -> Result<DeploymentRun, OpError> {
        let rec = self.stored_deployment(ws, id).await?;
        if rec.state.archived_at.is_some() {
            return Err(archived(id, "it cannot run"));
        }
        Ok(run_view(&self.fire(&rec, Trigger::Manual).await?))
    }

    /// `GET /v1/deployment_runs/{id}`.
    pub async fn deployment_run(&self, ws: &str, id: &str) -> Result<DeploymentRun, OpError> {
        let r = self
            .inner
            .store
            .get_deployment_run(ws, id)
            .await?
            .ok_or_else(|| OpError::DeploymentRunNotFound(id.to_string()))?;
        Ok(run_view(&r))
    }

    /// `GET /v1/deployment_runs`.
    pub async fn list_deployment_runs(
        &self,
        ws: &str,
        filter: &DeploymentRunFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<DeploymentRun>, OpError> {
        let rows = self
            .inner
            .store
            .list_deployment_runs(ws, filter, scan)
            .await?;
        Ok(rows.iter().map(run_view).collect())
    }

    /// Starts one session from the deployment and records the run; a scheduled firing that
    /// failed because the definition can no longer start pauses the deployment in the same
    /// transaction as its run.
    pub(crate) async fn fire(
        &self,
        d: &DeploymentRecord,
        trigger: Trigger,
    ) -> StoreResult<DeploymentRunRecord> {
        let created = self
            .create_session_from(&d.workspace_id, session_request(&d.spec), Some(&d.id))
            .await;
        let (session_id, error, pause) = match created {
            Ok(s) => (Some(s.id), None, None),
            Err(e) => {
                let (code, message) = run_error(&e);
                let pause = match trigger {
                    Trigger::Schedule(_) => dep::pause_for(code),
                    Trigger::Manual => None,
                };
                tracing::info!(deployment_id = %d.id, error = %message, code, "deployment firing could not start a session");
                let error = json!({"type": code, "message": message}).to_string();
                (None, Some(error), pause)
            }
        };
        let run = DeploymentRunRecord {
            id: new_id("drun"),
            workspace_id: d.workspace_id.clone(),
            deployment_id: d.id.clone(),
            trigger_type: match trigger {
                Trigger::Schedule(_) => "schedule",
                Trigger::Manual => "manual",
            }
            .into(),
            scheduled_at: match trigger {
                Trigger::Schedule(at) => Some(at),
                Trigger::Manual => None,
            },
            agent_id: d.spec.agent_id.clone(),
            agent_version: d.spec.agent_version,
            session_id,
            error,
            created_at: self.now(),
        };
        self.inner
            .store
            .record_deployment_run(&run, pause.as_ref())
            .await?;
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_failures_map_to_run_errors() {
        let cases = [
            (OpError::VaultNotFound("v".into()), "vault_not_found_error"),
            (
                mast_domain::vault::archived("v", "x").into(),
                "vault_archived_error",
            ),
            (
                mast_domain::agent::archived("a", "x").into(),
                "agent_archived_error",
            ),
            (
                OpError::EnvironmentNotFound("e".into()),
                "environment_not_found_error",
            ),
            (
                Invalid::new("bad").into(),
                "session_creation_rejected_error",
            ),
        ];
        for (e, code) in cases {
            assert_eq!(run_error(&e).0, code);
        }
    }
}

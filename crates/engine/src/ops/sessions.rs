//! Reading, updating, archiving and deleting sessions.

use serde_json::{Value, json};

use super::txn::decide;
use super::{OpError, views};
use crate::Engine;
use crate::budget;
use crate::intake::{self, server_event};
use crate::state::{self, EngineState, status_of};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::events::kind;
use mast_domain::invalid::Invalid;
use mast_domain::metadata;
use mast_domain::patch::Patch;
use mast_domain::session::{
    Session, SessionBody, SessionUpdate, WaitingForWorker, check_title, parse_agent_update,
    parse_vault_ids, vault_ids_create_only,
};
use mast_store::{Deleted, Scan, SessionFilter, SessionRecord, StoreError, TxnOutput};

impl Engine {
    /// `MemoryStoreNotFound` unless workspace `ws` has memory store `id`.
    pub async fn require_memory_store(&self, ws: &str, id: &str) -> Result<(), OpError> {
        match self.inner.store.get_memory_store(ws, id).await? {
            Some(_) => Ok(()),
            None => Err(OpError::MemoryStoreNotFound(id.to_string())),
        }
    }

    /// Session `id` of workspace `ws`, with whether it waits on a worker nobody runs.
    pub async fn session(&self, ws: &str, id: &str) -> Result<Session, OpError> {
        let rec = self
            .inner
            .store
            .get_session(ws, id)
            .await?
            .ok_or_else(|| OpError::SessionNotFound(id.to_string()))?;
        let mut session = views::session(&rec, self.now())?;
        session.stats.waiting_for_worker = self.waiting_for_worker(&rec).await?;
        Ok(session)
    }

    /// Whether a self-hosted session waits on a worker that nobody runs (see
    /// [`mast_domain::session::SessionStats::waiting_for_worker`]).
    async fn waiting_for_worker(
        &self,
        rec: &SessionRecord,
    ) -> Result<Option<WaitingForWorker>, OpError> {
        // Most sessions wait on nobody: the engine state says so before the body is read.
        if rec.archived_at.is_some() || !EngineState::of(rec).is_ok_and(|st| st.awaits_worker()) {
            return Ok(None);
        }
        let body: mast_domain::session::SessionBodyHead =
            serde_json::from_str(&rec.body).map_err(StoreError::from)?;
        if !matches!(body.environment, EnvironmentConfig::SelfHosted) {
            return Ok(None);
        }
        let stats = self
            .inner
            .store
            .work_stats(&rec.environment_id, self.now())
            .await?;
        Ok((stats.workers_polling == 0).then(|| views::no_worker(&rec.environment_id)))
    }

    /// A page of the workspace's sessions, as the store scans them.
    pub async fn list_sessions(
        &self,
        ws: &str,
        filter: &SessionFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<Session>, OpError> {
        let rows = self.inner.store.list_sessions(ws, filter, scan).await?;
        let now = self.now();
        Ok(rows
            .iter()
            .map(|r| views::session(r, now))
            .collect::<Result<_, _>>()?)
    }

    /// Changes a session's title, metadata, or (while idle) agent; appends
    /// `session.updated` with what changed, and nothing when nothing did.
    pub async fn update_session(
        &self,
        ws: &str,
        id: &str,
        update: SessionUpdate,
    ) -> Result<Session, OpError> {
        let vault_ids = parse_vault_ids(update.vault_ids.as_ref())?;
        let budget_patch = match &update.budget {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Value(v) => Patch::Value(mast_domain::budget::parse("budget", v)?),
        };
        let (prices, lease) = (self.inner.config.prices.clone(), self.lease_grant());
        let agent_update = parse_agent_update(update.agent.as_ref())?;
        if let Patch::Value(t) = &update.title {
            check_title(&Some(t.clone()))?;
        }
        if agent_update.is_some() {
            // The agent's model is checked against the provider's current list.
            self.inner.models.refresh().await;
        }
        let models = self.inner.models.clone();
        let clock = self.inner.store.clock().clone();
        let committed = decide(&self.inner, ws, id, move |rec| {
            if rec.archived_at.is_some() {
                return Err(intake::archived(&rec.id, "cannot be updated").into());
            }
            if agent_update.is_some() {
                // A run's threads run the agent the session had when it started.
                crate::workflow_runs::refuse_open(&rec.id, &EngineState::of(rec)?, false)
                    .map_err(StoreError::Invalid)?;
            }
            let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
            if vault_ids.as_ref().is_some_and(|v| v != &sb.vault_ids) {
                return Err(vault_ids_create_only().into());
            }
            let mut changed = json!({});
            match update.title {
                Patch::Absent => {}
                Patch::Null if sb.title.is_some() => {
                    sb.title = None;
                    changed["title"] = Value::Null;
                }
                Patch::Value(t) if sb.title.as_ref() != Some(&t) => {
                    changed["title"] = json!(t);
                    sb.title = Some(t);
                }
                _ => {}
            }
            if let Some(p) = &update.metadata {
                let next = metadata::apply_patch(&sb.metadata, p, false)?;
                if next != sb.metadata {
                    sb.metadata = next;
                    changed["metadata"] = json!(sb.metadata);
                }
            }
            if let Some(a) = agent_update {
                if status_of(rec).is_active() {
                    return Err(StoreError::Conflict(format!(
                        "session `{}` is running; its agent's tools can only change while it is idle",
                        rec.id
                    )));
                }
                let next = a.apply(sb.agent.clone())?;
                models
                    .check_routable(&next.model.id)
                    .map_err(Invalid::new)?;
                if next != sb.agent {
                    sb.agent = next;
                    changed["agent"] = serde_json::to_value(&sb.agent)?;
                }
            }
            let now = clock.now();
            let before = EngineState::of(rec)?;
            let mut st = before.clone();
            let b = budget::update(
                rec,
                &mut sb,
                &mut st,
                budget_patch,
                &prices,
                lease.as_ref(),
                now,
            )?;
            if let Some(v) = b.changed {
                changed["budget"] = v;
            }
            if changed.as_object().is_none_or(|o| o.is_empty()) {
                return Ok((TxnOutput::default(), false));
            }
            rec.body = serde_json::to_string(&sb)?.into();
            rec.updated_at = now;
            let mut events = vec![server_event(
                kind::SESSION_UPDATED,
                changed,
                &sb.primary_thread_id,
                now,
            )];
            let wake = !b.resumed.is_empty();
            events.extend(b.resumed);
            Ok((state::output(rec, &before, st, events, vec![], now)?, wake))
        })
        .await?;
        if committed.value {
            self.wake(id);
        }
        Ok(views::session(&committed.rec, self.now())?)
    }

    /// Archives an idle session: it accepts no new events, and its self-hosted work stops.
    /// Archiving an archived session changes nothing.
    pub async fn archive_session(&self, ws: &str, id: &str) -> Result<Session, OpError> {
        let clock = self.clock().clone();
        let committed = decide(&self.inner, ws, id, move |rec| {
            if rec.archived_at.is_some() {
                return Ok((TxnOutput::default(), ()));
            }
            crate::workflow_runs::refuse_open(&rec.id, &EngineState::of(rec)?, true)
                .map_err(StoreError::Invalid)?;
            if status_of(rec).is_active() {
                return Err(StoreError::Conflict(format!(
                    "session `{}` is running; interrupt it before archiving",
                    rec.id
                )));
            }
            let now = clock.now();
            rec.archived_at = Some(now);
            rec.updated_at = now;
            // Workflow runs left paused end with the session, stopped; their agent is told
            // nothing, as it takes no further turn.
            let before = EngineState::of(rec)?;
            if crate::workflow_runs::open_runs(&before).next().is_some() {
                let mut st = before.clone();
                let primary =
                    serde_json::from_str::<mast_domain::session::SessionBodyHead>(&rec.body)?
                        .primary_thread_id;
                let events = crate::workflow_runs::end_on_archive(&mut st, &primary, now);
                let out = crate::state::output(rec, &before, st, events, vec![], now)?;
                return Ok((out, ()));
            }
            Ok((TxnOutput::default(), ()))
        })
        .await?;
        // Its worker hears `stopping` on its next heartbeat; queued items never reach one.
        self.inner
            .store
            .stop_session_work(id, self.now(), true)
            .await?;
        Ok(views::session(&committed.rec, self.now())?)
    }

    /// Deletes an idle session with its events, threads, work items and workspace files.
    pub async fn delete_session(&self, ws: &str, id: &str) -> Result<(), OpError> {
        if let Some(rec) = self.inner.store.get_session(ws, id).await? {
            crate::workflow_runs::refuse_open(id, &EngineState::of(&rec)?, true)?;
        }
        match self.inner.store.delete_session(ws, id).await? {
            Deleted::Yes => {
                self.inner.hub.deleted(id);
                self.inner
                    .store
                    .stop_session_work(id, self.now(), false)
                    .await?;
                self.inner.toolbox.remove_session(id).await;
                Ok(())
            }
            Deleted::Missing => Err(OpError::SessionNotFound(id.to_string())),
            Deleted::Busy => Err(OpError::Conflict(format!(
                "session `{id}` is running; interrupt it before deleting"
            ))),
        }
    }
}

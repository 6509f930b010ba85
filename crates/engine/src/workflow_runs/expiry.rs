//! Runs whose lifetime ends while their session is idle (paused runs, or a run agent waiting
//! on the client) have no runner to notice: the reaper finds them by the session row's
//! `workflow_deadline_at` and ends them here, each in one transaction. The primary agent
//! then gets its turn for the notice when nothing of its own holds it back.

use std::sync::Arc;

use serde_json::json;

use super::{BY_BUDGET, BY_INTERRUPT, RunScope, expire, paused_by};
use crate::intake::server_event;
use crate::state::{self, EngineState, grant_lease, set_status};
use mast_domain::events::kind;
use mast_domain::session::{SessionBody, SessionStatus};
use mast_store::{TxnOutput, Writer};

impl crate::Engine {
    /// Ends the expired runs of idle sessions and wakes those whose agent reads the end.
    pub(crate) async fn expire_idle_runs(&self) {
        let ids = match self
            .inner
            .store
            .sessions_with_expired_runs(self.now(), 100)
            .await
        {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "reaper could not list expired workflow runs");
                return;
            }
        };
        for id in ids {
            let limits = self.inner.config.workflows.limits.clone();
            let clock = self.inner.store.clock().clone();
            let grant = self.lease_grant();
            let txn = Box::new(move |rec: &mut mast_store::SessionRecord| {
                let now = clock.now();
                if state::status_of(rec) != SessionStatus::Idle || rec.archived_at.is_some() {
                    return Ok(TxnOutput::default());
                }
                let body: SessionBody = serde_json::from_str(&rec.body)?;
                let primary = body.primary_thread_id.clone();
                let scope = RunScope {
                    body: Arc::new(body),
                    limits,
                    texts: Default::default(),
                };
                let before = EngineState::of(rec)?;
                let mut st = before.clone();
                // An interrupt's pause means the user asked for quiet; a budget's, that no
                // request may be made: the notice then waits for their input or raise.
                let paused =
                    paused_by(&st, BY_INTERRUPT) || paused_by(&st, BY_BUDGET) || st.budget_paused;
                let ctx = scope.ctx(&rec.id, &primary, now);
                let mut events = expire(&mut st, &ctx);
                // Calls still waiting (the primary's own) keep the session where it is.
                if !events.is_empty() && !paused && st.pending.is_empty() {
                    set_status(rec, SessionStatus::Running, now);
                    grant_lease(rec, grant.as_ref(), now);
                    events.push(server_event(kind::STATUS_RUNNING, json!({}), &primary, now));
                }
                state::output(rec, &before, st, events, vec![], now)
            });
            match self.inner.store.transact(&id, &Writer::Client, txn).await {
                Ok(Some((rec, appended))) => {
                    self.inner.hub.publish(&id, &appended);
                    if state::status_of(&rec).is_active() {
                        self.wake(&id);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(session_id = %id, error = %e, "could not end an expired workflow run")
                }
            }
        }
    }
}

//! The runner's side of workflow runs: the scope their transitions need, the result texts a
//! run thread's end may render, and the primary thread waiting while runs work.

use std::sync::Arc;

use super::{Loop, RunError};
use crate::context::Tail;
use crate::intake::server_event;
use crate::state::{EngineState, ThreadStatus};
use crate::workflow_runs::{self, RunScope};
use mast_domain::events::kind;
use mast_domain::query::{Direction, EventFilter, Scan};
use mast_models::ModelStop;
use serde_json::Value;

impl Loop<'_> {
    /// What this runner's workflow run transitions need.
    pub(super) fn run_scope(&self) -> RunScope {
        RunScope {
            body: self.scope.body.clone(),
            limits: self.inner.config.workflows.limits.clone(),
            texts: Arc::clone(&self.crew.texts),
        }
    }

    /// Reads back what the returned threads of open runs said, for those this runner does
    /// not hold (they returned under an earlier runner), so a transition can render them.
    pub(super) async fn load_run_texts(&self, st: &EngineState) -> Result<(), RunError> {
        let candidates: Vec<String> = st
            .threads
            .iter()
            .filter(|(_, t)| {
                t.status == ThreadStatus::Terminated
                    && t.workflow_run
                        .as_ref()
                        .and_then(|r| st.workflow_runs.get(r))
                        .is_some_and(|r| r.live.is_some())
            })
            .map(|(id, _)| id.clone())
            .collect();
        for tid in self.crew.texts.missing(candidates.iter()) {
            let filter = EventFilter {
                types: vec![kind::SPAN_END.to_string()],
                thread_id: Some(tid.clone()),
                ..Default::default()
            };
            let scan = Scan {
                after: None,
                direction: Direction::Descending,
                limit: 1,
            };
            let last = self
                .hold(
                    self.inner
                        .store
                        .list_events(&self.scope.sid, &filter, &scan),
                )
                .await?;
            let text = last
                .first()
                .and_then(|e| e.internal.as_ref())
                .and_then(|i| i.get("content"))
                .and_then(Value::as_array)
                .map(|blocks| crate::context::text_of(blocks))
                .unwrap_or_default();
            self.crew.texts.put(&tid, &text);
        }
        Ok(())
    }

    /// Whether the primary thread's turn is over at this tail (nothing to continue).
    pub(super) fn turn_over(&self, tail: &Tail) -> bool {
        match tail {
            Tail::Empty => true,
            Tail::Assistant {
                stop_reason,
                continuations,
                ..
            } => {
                !(ModelStop::parse(stop_reason).continues()
                    && *continuations <= self.inner.config.max_continuations)
            }
            _ => false,
        }
    }

    /// The primary's turn is over while a run is running: the session stays running. The
    /// first time, the turn's usage is reported (as a turn's end does) and the thread is
    /// marked parked; then it waits for the runs' threads, or idles the session with
    /// `requires_action` when only calls waiting on the client are left.
    pub(super) async fn wait_on_runs(&mut self, st: &EngineState) -> Result<(), RunError> {
        for (tid, t) in &st.threads {
            if t.status.is_active() {
                self.crew.spawn.send(tid.clone());
            }
        }
        if !st.primary_parked {
            let primary = self.scope.primary.clone();
            let usage_at_start = self.tally.usage_at_start.clone();
            let clock = self.inner.store.clock().clone();
            self.commit(
                move |rec, st| {
                    if workflow_runs::open_runs(st).next().is_none() {
                        return Ok(vec![]);
                    }
                    st.primary_parked = true;
                    let now = clock.now();
                    if usage_at_start.as_deref() == Some(rec.usage.as_str()) {
                        return Ok(vec![]);
                    }
                    st.usage_reported_at = Some(now);
                    Ok(vec![server_event(
                        kind::SESSION_USAGE,
                        crate::budget::usage_event(rec, st, now)?,
                        &primary,
                        now,
                    )])
                },
                vec![],
            )
            .await?;
            self.tally.usage_at_start = None;
            return Ok(());
        }
        if !st.children_active() {
            // Nothing works: calls wait on the client, or the runs paused (at the budget).
            let reason = match st.pending.is_empty() {
                true => mast_domain::events::StopReason::EndTurn,
                false => mast_domain::events::StopReason::RequiresAction(vec![]),
            };
            return self.finish(reason, None).await;
        }
        self.await_delegates(st).await
    }

    /// Starts the loops of the runs' working threads that have none (after a restart, or
    /// when input resumed a paused run).
    pub(super) fn spawn_run_threads(&self, st: &EngineState) {
        for (tid, t) in &st.threads {
            if t.workflow_run.is_some() && t.status.is_active() {
                self.crew.spawn.send(tid.clone());
            }
        }
    }

    /// Ends the runs whose lifetime has passed, with `timeout_error`.
    pub(super) async fn expire_runs(&mut self) -> Result<(), RunError> {
        let runs = self.run_scope();
        let (sid, primary) = (self.scope.sid.clone(), self.scope.primary.clone());
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |_, st| {
                let ctx = runs.ctx(&sid, &primary, clock.now());
                Ok(workflow_runs::expire(st, &ctx))
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Stops this run thread before its next model request: its run is paused.
    pub(super) async fn stop_for_pause(&mut self) -> Result<(), RunError> {
        let (thread, name) = (
            self.scope.thread.clone(),
            self.child_name().unwrap_or_default(),
        );
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |_, st| {
                let now = clock.now();
                if !workflow_runs::paused_thread(st, &thread) {
                    return Ok(vec![]);
                }
                let Some(t) = st.threads.get_mut(&thread).filter(|t| t.status.is_active()) else {
                    return Ok(vec![]);
                };
                t.set_status(ThreadStatus::Idle, now);
                Ok(vec![server_event(
                    kind::THREAD_STATUS_IDLE,
                    mast_domain::events::thread_status(
                        &thread,
                        &name,
                        Some((&mast_domain::events::StopReason::EndTurn, None)),
                    ),
                    &thread,
                    now,
                )])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Advances the running runs none of whose agents is at work; whether that wrote
    /// anything.
    pub(super) async fn advance_stalled(&mut self) -> Result<bool, RunError> {
        let runs = self.run_scope();
        let (sid, primary) = (self.scope.sid.clone(), self.scope.primary.clone());
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |_, st| {
                let ctx = runs.ctx(&sid, &primary, clock.now());
                let mut out = Vec::new();
                for id in workflow_runs::stalled(st) {
                    out.extend(workflow_runs::advance(st, &ctx, &id));
                }
                Ok(out)
            },
            vec![],
        )
        .await
        .map(|appended| !appended.is_empty())
    }
}

//! How a thread's turn ends. The primary thread's end is the session's: a `session.usage`
//! when usage changed, then `session.status_idle`, and the lease handed back. A delegate's
//! end is its own `session.thread_status_idle` (cross-posted), and — unless it is blocked on
//! the user — its reply to the parent's waiting delegation calls.

use serde_json::{Value, json};

use super::intake::server_event;
use super::state::{EngineState, LeaseGrant, ThreadStatus, grant_lease, set_status};
use mast_domain::content;
use mast_domain::events::{self, Answer, StopReason, kind};
use mast_domain::session::SessionStatus;
use mast_domain::time::Micros;
use mast_store::{NewEvent, SessionRecord, StoreError};

/// What is needed to end the turn of one thread, captured by a transaction's closure.
#[derive(Debug, Clone)]
pub(super) struct Ender {
    pub thread: String,
    pub primary: String,
    /// The delegate's name; None for the primary thread.
    pub child: Option<String>,
    /// The session's usage when the runner started (a `session.usage` follows a change).
    pub usage_at_start: Option<String>,
    /// A delegate's final message this turn, its reply to the parent.
    pub reply: Option<String>,
    /// Where the time of the ending comes from (read under the row lock).
    pub clock: mast_domain::clock::Clock,
    /// For a workflow run's thread: the session and what its run's transitions need.
    pub runs: Option<(String, crate::workflow_runs::RunScope)>,
    /// The primary's: how many workflow run notices its latest context held. One logged
    /// since is input the model has not read, so the turn does not end.
    pub seen_notices: Option<u64>,
}

impl Ender {
    /// The events that end the turn with `reason`, or none when, under the row lock, the
    /// turn is not over after all: an interrupt is pending, input is queued, every blocking
    /// event was answered meanwhile, or (primary) a delegate still works.
    pub fn try_end(
        &self,
        rec: &mut SessionRecord,
        st: &mut EngineState,
        reason: StopReason,
        details: Option<Value>,
    ) -> Result<Vec<NewEvent>, StoreError> {
        if st.interrupt_of(&self.thread) || self.ended_meanwhile(st) {
            return Ok(vec![]);
        }
        if self.seen_notices.is_some_and(|seen| st.run_notices != seen) {
            return Ok(vec![]);
        }
        let now = self.clock.now();
        let budget = reason == StopReason::BudgetReached;
        if self.child.is_some() {
            let reason = match reason {
                StopReason::RequiresAction(_) => {
                    let ids = st.pending_ids_of(&self.thread);
                    if ids.is_empty() {
                        return Ok(vec![]);
                    }
                    StopReason::RequiresAction(ids)
                }
                r => r,
            };
            let mut out = Vec::new();
            if budget {
                super::budget::mark_paused(st, &self.thread);
            }
            let run_thread = super::workflow_runs::is_run_thread(st, &self.thread);
            out.extend(self.end(rec, st, reason, details, now));
            if budget && run_thread {
                // The cap is the session's: every run pauses, each thread stopping as it
                // reaches its next request.
                out.extend(super::workflow_runs::pause_all(
                    st,
                    super::workflow_runs::BY_BUDGET,
                    &self.primary,
                    now,
                ));
            }
            return Ok(out);
        }
        if st.children_active() {
            if budget {
                // The primary reached the cap while run threads work: the runs pause now,
                // and the session idles once their threads have stopped.
                super::budget::mark_paused(st, &self.thread);
                return Ok(super::workflow_runs::pause_all(
                    st,
                    super::workflow_runs::BY_BUDGET,
                    &self.primary,
                    now,
                ));
            }
            return Ok(vec![]);
        }
        // A turn over while the session's runs are paused at the budget idles at the budget.
        let reason = match reason {
            StopReason::EndTurn
                if super::workflow_runs::paused_by(st, super::workflow_runs::BY_BUDGET) =>
            {
                StopReason::BudgetReached
            }
            r => r,
        };
        let budget = reason == StopReason::BudgetReached;
        if super::workflow_runs::any_running(st) {
            // A running workflow run keeps the session running; only calls waiting on the
            // client idle it, with every waiting id.
            if st.pending.is_empty() {
                return Ok(vec![]);
            }
            let reason = StopReason::RequiresAction(st.pending_ids());
            let mut out = Vec::new();
            if self.usage_at_start.as_deref() != Some(rec.usage.as_str()) {
                st.usage_reported_at = Some(now);
                out.push(server_event(
                    kind::SESSION_USAGE,
                    super::budget::usage_event(rec, st, now)?,
                    &self.primary,
                    now,
                ));
            }
            out.extend(self.end(rec, st, reason, None, now));
            return Ok(out);
        }
        let reason = match reason {
            StopReason::RequiresAction(_) if st.pending.is_empty() => return Ok(vec![]),
            StopReason::RequiresAction(_) => StopReason::RequiresAction(st.pending_ids()),
            // Input queued behind a budget stop waits for the raise like the rest of the turn.
            _ if st.queued > 0 && !budget => return Ok(vec![]),
            r => r,
        };
        // While a workflow run is open its result is still to come: no grading starts.
        if reason == StopReason::EndTurn
            && super::workflow_runs::open_runs(st).next().is_none()
            && let Some(grading) = super::outcomes::on_turn_end(st, &self.primary, now)
        {
            // An active outcome is graded instead of idling.
            return Ok(grading);
        }
        let mut out = Vec::new();
        if budget || self.usage_at_start.as_deref() != Some(rec.usage.as_str()) {
            st.usage_reported_at = Some(now);
            out.push(server_event(
                kind::SESSION_USAGE,
                super::budget::usage_event(rec, st, now)?,
                &self.primary,
                now,
            ));
        }
        if budget {
            super::budget::mark_paused(st, &self.thread);
            out.splice(
                0..0,
                super::workflow_runs::pause_all(
                    st,
                    super::workflow_runs::BY_BUDGET,
                    &self.primary,
                    now,
                ),
            );
        }
        out.extend(self.end(rec, st, reason, details, now));
        Ok(out)
    }

    /// The events and row changes that put this thread idle.
    pub fn end(
        &self,
        rec: &mut SessionRecord,
        st: &mut EngineState,
        reason: StopReason,
        details: Option<Value>,
        now: Micros,
    ) -> Vec<NewEvent> {
        match &self.child {
            None => end_session_turn(rec, st, &self.primary, reason, details, now),
            Some(name) => {
                // A delegate stopped by the budget answers its parent once it is raised.
                let blocked = matches!(
                    reason,
                    StopReason::RequiresAction(_) | StopReason::BudgetReached
                );
                let refused = reason == StopReason::Refusal;
                let mut out = vec![self.status_event(
                    kind::THREAD_STATUS_IDLE,
                    name,
                    Some((&reason, details)),
                    now,
                )];
                let run = st.threads.get_mut(&self.thread);
                let advisor = run.as_ref().is_some_and(|r| r.advisor);
                if let Some(run) = run {
                    run.set_status(ThreadStatus::Idle, now);
                }
                if !blocked && let Some(how) = self.run_agent_end(st, &reason) {
                    // A workflow run's agent returned (or failed): its run goes on.
                    out.extend(self.run_transition(st, how, now));
                    return out;
                }
                if !blocked {
                    let (text, is_error) = if refused {
                        (
                            "The delegate declined this task (its model refused).".to_string(),
                            true,
                        )
                    } else {
                        (
                            self.reply
                                .clone()
                                .filter(|r| !r.trim().is_empty())
                                .unwrap_or_else(|| {
                                    "(the delegate ended its turn without a message)".into()
                                }),
                            false,
                        )
                    };
                    out.extend(reply(
                        st,
                        &self.thread,
                        &self.primary,
                        name,
                        &text,
                        is_error,
                        now,
                    ));
                    if advisor {
                        // An advisor answers once, then its thread is done.
                        out.extend(self.terminate(st, name, now));
                    }
                }
                out
            }
        }
    }

    /// A `session.error` whose retries are exhausted, and the idle with `retries_exhausted`;
    /// a delegate then terminates and its parent hears of the failure.
    pub fn exhausted(
        &self,
        rec: &mut SessionRecord,
        st: &mut EngineState,
        error_type: &str,
        message: &str,
        now: Micros,
    ) -> Vec<NewEvent> {
        if self.ended_meanwhile(st) {
            return vec![];
        }
        let mut out = vec![server_event(
            kind::SESSION_ERROR,
            events::session_error(error_type, message, "exhausted"),
            &self.thread,
            now,
        )];
        match &self.child {
            None if super::workflow_runs::any_running(st)
                || self.seen_notices.is_some_and(|seen| st.run_notices != seen) =>
            {
                // A running workflow run keeps the session running, and a run's end the
                // agent has not read gives it a new turn: the failed turn ends without an
                // idle, its queued input discarded as usual.
                st.queued = 0;
                st.discard_queued = true;
                st.primary_failed = self.seen_notices;
            }
            None => {
                // The turn is dead and so is the input queued for it: upstream discards it too.
                st.queued = 0;
                st.discard_queued = true;
                out.extend(end_session_turn(
                    rec,
                    st,
                    &self.primary,
                    StopReason::RetriesExhausted,
                    None,
                    now,
                ));
            }
            Some(name) => {
                st.pending.retain(|p| p.thread_id != self.thread);
                st.set_running_tool(&self.thread, None);
                out.push(self.status_event(
                    kind::THREAD_STATUS_IDLE,
                    name,
                    Some((&StopReason::RetriesExhausted, None)),
                    now,
                ));
                if self
                    .run_agent_end(st, &StopReason::RetriesExhausted)
                    .is_some()
                {
                    out.extend(self.run_transition(
                        st,
                        crate::workflow_runs::AgentEnd::Failed,
                        now,
                    ));
                    return out;
                }
                let text = format!("The delegate thread failed and was stopped: {message}");
                out.extend(reply(
                    st,
                    &self.thread,
                    &self.primary,
                    name,
                    &text,
                    true,
                    now,
                ));
                out.extend(self.terminate(st, name, now));
            }
        }
        out
    }

    /// A `session.error` that no retry or new input can fix (`retry_status: terminal`): the
    /// session ends for good with `session.status_terminated`, its delegates terminated
    /// and queued input discarded. A delegate's failure only ends that thread (as
    /// [`Ender::exhausted`]).
    pub fn terminated(
        &self,
        rec: &mut SessionRecord,
        st: &mut EngineState,
        error_type: &str,
        message: &str,
        now: Micros,
    ) -> Vec<NewEvent> {
        if self.child.is_some() {
            return self.exhausted(rec, st, error_type, message, now);
        }
        let mut out = vec![server_event(
            kind::SESSION_ERROR,
            events::session_error(error_type, message, "terminal"),
            &self.primary,
            now,
        )];
        out.extend(super::workflow_runs::end_on_termination(
            st,
            &self.primary,
            now,
        ));
        for (id, run) in st.threads.iter_mut() {
            if run.status == ThreadStatus::Terminated {
                continue;
            }
            run.set_status(ThreadStatus::Terminated, now);
            run.budget_paused = false;
            out.push(server_event(
                kind::THREAD_STATUS_TERMINATED,
                events::thread_status(id, &run.agent_name, None),
                id,
                now,
            ));
        }
        st.pending.clear();
        st.queued = 0;
        st.discard_queued = true;
        st.running_tool = None;
        st.budget_paused = false;
        out.extend(super::outcomes::abandon(
            st,
            mast_domain::outcome::Phase::Failed,
            "The session was terminated before the outcome was met.",
            &self.primary,
            now,
        ));
        set_status(rec, SessionStatus::Terminated, now);
        rec.lease_owner = None;
        rec.lease_expires_at = None;
        out.push(server_event(
            kind::STATUS_TERMINATED,
            json!({}),
            &self.primary,
            now,
        ));
        out
    }

    /// Whether this child thread was terminated while its loop worked (its workflow run
    /// ended): the turn it was in has nothing left to end.
    fn ended_meanwhile(&self, st: &EngineState) -> bool {
        self.child.is_some()
            && st
                .threads
                .get(&self.thread)
                .is_some_and(|t| t.status == ThreadStatus::Terminated)
    }

    /// How a workflow run's thread ending its turn with `reason` ends its agent; None for
    /// any other thread.
    fn run_agent_end(
        &self,
        st: &EngineState,
        reason: &StopReason,
    ) -> Option<crate::workflow_runs::AgentEnd> {
        st.threads.get(&self.thread)?.workflow_run.as_ref()?;
        Some(match reason {
            StopReason::EndTurn => crate::workflow_runs::AgentEnd::Returned,
            _ => crate::workflow_runs::AgentEnd::Failed,
        })
    }

    /// A run thread's end carried to its run: archived, and the run advanced.
    fn run_transition(
        &self,
        st: &mut EngineState,
        how: crate::workflow_runs::AgentEnd,
        now: Micros,
    ) -> Vec<NewEvent> {
        let Some((sid, scope)) = &self.runs else {
            tracing::error!(thread_id = %self.thread, "a workflow run's thread ended without its run's scope");
            return vec![];
        };
        if how == crate::workflow_runs::AgentEnd::Returned {
            scope
                .texts
                .put(&self.thread, self.reply.as_deref().unwrap_or(""));
        }
        let ctx = scope.ctx(sid, &self.primary, now);
        crate::workflow_runs::agent_ended(st, &ctx, &self.thread, how)
    }

    /// Ends a delegate thread for good.
    fn terminate(&self, st: &mut EngineState, name: &str, now: Micros) -> Vec<NewEvent> {
        if let Some(run) = st.threads.get_mut(&self.thread) {
            run.set_status(ThreadStatus::Terminated, now);
        }
        vec![self.status_event(kind::THREAD_STATUS_TERMINATED, name, None, now)]
    }

    fn status_event(
        &self,
        kind_name: &str,
        name: &str,
        stop: Option<(&StopReason, Option<Value>)>,
        now: Micros,
    ) -> NewEvent {
        server_event(
            kind_name,
            events::thread_status(&self.thread, name, stop),
            &self.thread,
            now,
        )
    }
}

/// A delegate's reply to every parent call waiting on it: `agent.thread_message_sent` on the
/// delegate, and one `agent.thread_message_received` per call on the parent, which answers
/// that call in the parent's context.
pub(super) fn reply(
    st: &mut EngineState,
    thread: &str,
    parent: &str,
    name: &str,
    text: &str,
    is_error: bool,
    now: Micros,
) -> Vec<NewEvent> {
    let calls = st
        .threads
        .get_mut(thread)
        .map(|t| std::mem::take(&mut t.replies_to))
        .unwrap_or_default();
    if calls.is_empty() {
        return vec![];
    }
    let body = vec![content::text(text)];
    let mut out = vec![server_event(
        kind::THREAD_MESSAGE_SENT,
        json!({ "to_session_thread_id": parent, "content": body }),
        thread,
        now,
    )];
    for call in calls {
        let mut e = server_event(
            kind::THREAD_MESSAGE_RECEIVED,
            json!({ "from_session_thread_id": thread, "from_agent_name": name, "content": body }),
            parent,
            now,
        );
        e.internal = Some(json!({ "call": call, "is_error": is_error }));
        e.answers = Some((call, Answer::Result.as_str()));
        out.push(e);
    }
    out
}

/// The events and row changes that put the session idle (the primary thread's turn end).
pub(super) fn end_session_turn(
    rec: &mut SessionRecord,
    st: &mut EngineState,
    primary: &str,
    reason: StopReason,
    details: Option<Value>,
    now: Micros,
) -> Vec<NewEvent> {
    if !matches!(
        reason,
        StopReason::RequiresAction(_) | StopReason::BudgetReached
    ) {
        st.pending.clear();
    }
    let mut out = super::outcomes::on_session_idle(st, &reason, primary, now);
    set_status(rec, SessionStatus::Idle, now);
    // An idle session holds no runner; the next input grants the lease again.
    rec.lease_owner = None;
    rec.lease_expires_at = None;
    out.push(server_event(
        kind::STATUS_IDLE,
        events::idle(&reason, details),
        primary,
        now,
    ));
    out
}

/// The error result that closes a tool call cut short by an interrupt.
pub(super) fn closed_tool_call(id: &str, thread: &str, mcp: bool, now: i64) -> NewEvent {
    let text = content::text(events::INTERRUPTED_TOOL_MESSAGE);
    let (kind_name, body) = match mcp {
        true => (
            kind::AGENT_MCP_TOOL_RESULT,
            events::mcp_tool_result(id, vec![text], true),
        ),
        false => (
            kind::AGENT_TOOL_RESULT,
            events::tool_result(id, vec![text], true),
        ),
    };
    let mut e = server_event(kind_name, body, thread, now);
    e.answers = Some((id.to_string(), Answer::Result.as_str()));
    e
}

/// After an interrupt idles the session, input still queued starts a new turn: the interrupt
/// jumped ahead of it, it did not cancel it.
pub(super) fn resume_if_queued(
    rec: &mut SessionRecord,
    st: &EngineState,
    primary: &str,
    grant: Option<&LeaseGrant>,
    now: i64,
) -> Vec<NewEvent> {
    if st.queued == 0 {
        return vec![];
    }
    set_status(rec, SessionStatus::Running, now);
    grant_lease(rec, grant, now);
    vec![server_event(kind::STATUS_RUNNING, json!({}), primary, now)]
}

/// Closes every call of `thread` still waiting on the client with an error result, as an
/// interrupt closes them.
pub(super) fn close_pending_of(st: &mut EngineState, thread: &str, now: i64) -> Vec<NewEvent> {
    let mut closed = Vec::new();
    st.pending.retain(|p| {
        if p.thread_id == thread {
            closed.push((p.id.clone(), p.mcp));
            false
        } else {
            true
        }
    });
    closed
        .iter()
        .map(|(id, mcp)| closed_tool_call(id, thread, *mcp, now))
        .collect()
}

/// Stops a delegate that is not running (blocked on the user, or idle) on the user's behalf:
/// its open calls are closed, it idles with `end_turn`, and the parent's calls waiting on it
/// get an error result saying why. `terminate` also archives it.
pub(super) fn stop_delegate(
    st: &mut EngineState,
    thread: &str,
    primary: &str,
    why: &str,
    terminate: bool,
    now: Micros,
) -> Vec<NewEvent> {
    let Some(name) = st.threads.get(thread).map(|t| t.agent_name.clone()) else {
        return vec![];
    };
    let mut out = close_pending_of(st, thread, now);
    let closed = !out.is_empty();
    let ender = Ender {
        thread: thread.to_string(),
        primary: primary.to_string(),
        child: Some(name.clone()),
        usage_at_start: None,
        reply: None,
        // This whole decision happens at `now`.
        clock: mast_domain::clock::Clock::manual(now),
        runs: None,
        seen_notices: None,
    };
    // A workflow run's thread always says it stopped: its run may resume it.
    let waiting = st
        .threads
        .get(thread)
        .is_some_and(|t| !t.replies_to.is_empty() || closed || t.workflow_run.is_some());
    if waiting {
        out.push(ender.status_event(
            kind::THREAD_STATUS_IDLE,
            &name,
            Some((&StopReason::EndTurn, None)),
            now,
        ));
    }
    if let Some(run) = st.threads.get_mut(thread) {
        run.interrupt = false;
        run.running_tool = None;
        // Stopped for the user: a later budget raise does not restart it.
        run.budget_paused = false;
        run.set_status(ThreadStatus::Idle, now);
    }
    out.extend(reply(st, thread, primary, &name, why, true, now));
    if terminate {
        if let Some(run) = st.threads.get_mut(thread) {
            run.archived_at = Some(now);
        }
        out.extend(ender.terminate(st, &name, now));
    }
    out
}

#[cfg(test)]
#[path = "turn_end_tests.rs"]
mod tests;

//! Client input against the locked session row: which events are queued or processed, which
//! blocking events they answer, and the status transitions they cause — all decided in the
//! same transaction that appends them, so concurrent requests cannot race.

use serde_json::Value;

use std::collections::{BTreeMap, BTreeSet};

use super::hooks::PostOutcome;
use super::state::{
    self, EngineState, LeaseGrant, PendingKind, ThreadStatus, grant_lease, set_status, status_of,
    work_item_for,
};
use super::turn_end::{closed_tool_call, resume_if_queued, stop_delegate};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::events::{self, Answer, ClientEvent, StopReason, kind};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::session::{SessionBody, SessionBodyHead, SessionStatus};
use mast_domain::time::Micros;
use mast_store::{NewEvent, SessionRecord, StoreError, TxnOutput};

/// A server-emitted event on `thread`, processed at `at`.
pub fn server_event(kind: &str, body: Value, thread: &str, at: Micros) -> NewEvent {
    NewEvent {
        id: new_id("sevt"),
        thread_id: Some(thread.to_string()),
        kind: kind.to_string(),
        body,
        internal: None,
        answers: None,
        processed_at: Some(at),
    }
}

/// What an accepted batch did, beyond its appended events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// The runner has work: the session is now (or still) active.
    pub wake: bool,
    /// An interrupt of every thread was recorded for a working runner.
    pub interrupt_all: bool,
    /// An interrupt of one working delegate thread was recorded.
    pub interrupt_thread: Option<String>,
    /// A self-hosted session took new input: its environment's workers may have an item.
    pub work: bool,
}

/// 400 `session_archived`: archive is permanent, so using an archived session is a bad
/// request (as for archived agents and environments), not a conflict that could clear up.
pub fn archived(id: &str, consequence: &str) -> Invalid {
    Invalid::with_code(
        "session_archived",
        format!("session `{id}` is archived and {consequence}"),
    )
}

/// Checks that a session takes input at all.
pub fn check_open(rec: &SessionRecord) -> Result<(), StoreError> {
    if rec.archived_at.is_some() {
        return Err(StoreError::Invalid(archived(
            &rec.id,
            "accepts no new events",
        )));
    }
    if status_of(rec) == SessionStatus::Terminated {
        return Err(StoreError::Conflict(format!(
            "session `{}` is terminated and accepts no new events",
            rec.id
        )));
    }
    Ok(())
}

fn not_pending(i: usize, field: &str, id: &str, what: &str) -> StoreError {
    StoreError::Invalid(Invalid::new(format!(
        "`events[{i}].{field}` `{id}` does not match a pending {what}: it is unknown or already answered"
    )))
}

/// Applies a validated batch to the locked row, whose body parsed is `body` (from
/// `engine::bodies`, so a batch does not parse the agent snapshot again). Client echoes come
/// first in the output, in request order; status events caused by the batch follow. `post`
/// holds, by batch index, what `post_tool_use` hooks said of a `user.tool_result` (recorded
/// with it). `late` maps the calls of archived workflow run threads a confirmation in the
/// batch names to their threads (see [`LateConfirmations`]).
pub fn accept(
    rec: &mut SessionRecord,
    body: &SessionBody,
    batch: &[ClientEvent],
    post: &[Option<PostOutcome>],
    late: &LateConfirmations,
    lease: Option<&LeaseGrant>,
    now: Micros,
) -> Result<(TxnOutput, Accepted), StoreError> {
    check_open(rec)?;
    let before = EngineState::of(rec)?;
    let mut intake = Intake::new(
        &body.primary_thread_id,
        late,
        status_of(rec),
        before.clone(),
    );
    let mut events = Vec::with_capacity(batch.len() + 1);
    for (i, ev) in batch.iter().enumerate() {
        let follows_result = i > 0 && batch[i - 1].is_tool_result();
        let mut echo = intake.take(i, ev, follows_result, now)?;
        if let Some(Some(p)) = post.get(i) {
            p.clone().annotate(&mut echo.body, &mut echo.internal);
        }
        events.push(echo);
    }
    events.append(&mut intake.run_events);
    events.extend(intake.stop_delegates(now));
    events.extend(intake.restart_answered_delegates(now));
    events.extend(intake.settle(rec, lease, now));
    let Intake { st, mut acc, .. } = intake;
    if acc.wake {
        grant_lease(rec, lease, now);
    }
    let new_input = batch.iter().any(|e| {
        matches!(
            e,
            ClientEvent::UserMessage { .. } | ClientEvent::SystemMessage { .. }
        )
    });
    let mut out = state::output(rec, &before, st, events, vec![], now)?;
    if matches!(body.environment, EnvironmentConfig::SelfHosted) && new_input {
        // A dormant self-hosted session needs a worker again (a no-op while one holds it).
        out.ensure_work = Some(work_item_for(rec, now));
        acc.work = true;
    }
    Ok((out, acc))
}

/// Calls of workflow run threads archived before the client confirmed them, by call id, each
/// with its thread. Such a confirmation comes too late: the run stopped the thread and the
/// tool never ran. It is accepted, kept on that thread and changes nothing, as upstream does;
/// a late result is still refused, since the model never reads it.
pub type LateConfirmations = BTreeMap<String, String>;

/// A batch being applied: the engine state as the batch changes it, and what it did so far.
struct Intake<'a> {
    primary: &'a str,
    /// Confirmations that come too late to change anything.
    late: &'a LateConfirmations,
    /// The session's status before the batch.
    status: SessionStatus,
    /// An idle session with nothing pending starts a turn on new input.
    can_start: bool,
    st: EngineState,
    acc: Accepted,
    /// A blocking event was answered (or closed by stopping its delegate).
    answered: bool,
    /// New input starts a turn now rather than queueing.
    starts_turn: bool,
    /// An interrupt of an idle, blocked session: its pending calls are closed.
    closed_pending: bool,
    /// Threads whose blocking events the batch answered.
    answered_threads: BTreeSet<String>,
    /// Idle delegates the batch interrupted while they waited.
    stopped: Vec<String>,
    /// A delegate went back to work, its calls all answered.
    restarted: bool,
    /// Workflow runs the batch paused or resumed: their events follow the batch's echoes.
    run_events: Vec<NewEvent>,
}

impl<'a> Intake<'a> {
    fn new(
        primary: &'a str,
        late: &'a LateConfirmations,
        status: SessionStatus,
        st: EngineState,
    ) -> Self {
        Intake {
            primary,
            late,
            status,
            can_start: status == SessionStatus::Idle && st.pending.is_empty(),
            st,
            acc: Accepted::default(),
            answered: false,
            starts_turn: false,
            closed_pending: false,
            answered_threads: BTreeSet::new(),
            stopped: Vec::new(),
            restarted: false,
            run_events: Vec::new(),
        }
    }

    /// Applies event `i` of the batch and returns its echo: routed to the thread it answers,
    /// queued (not processed) when it cannot start a turn now.
    fn take(
        &mut self,
        i: usize,
        ev: &ClientEvent,
        follows_result: bool,
        now: Micros,
    ) -> Result<NewEvent, StoreError> {
        let mut routed = None;
        let mut answers = None;
        let mut processed = Some(now);
        match ev {
            ClientEvent::UserMessage { .. } | ClientEvent::SystemMessage { .. } => {
                if matches!(ev, ClientEvent::SystemMessage { .. })
                    && !self.st.pending.is_empty()
                    && !follows_result
                {
                    return Err(StoreError::Invalid(Invalid::new(
                        "while the session requires action, `system.message` may only accompany a tool result",
                    )));
                }
                if self.can_start {
                    self.starts_turn = true;
                } else {
                    processed = None;
                    self.st.queued += 1;
                }
                self.resume_runs(now);
            }
            ClientEvent::CustomToolResult {
                custom_tool_use_id: id,
                ..
            } => {
                routed = self.answer(i, id, PendingKind::Custom)?;
                answers = Some((id.clone(), Answer::Result.as_str()));
            }
            ClientEvent::ToolResult {
                tool_use_id: id, ..
            } => {
                routed = self.answer(i, id, PendingKind::ClientTool)?;
                answers = Some((id.clone(), Answer::Result.as_str()));
            }
            ClientEvent::ToolConfirmation {
                tool_use_id: id, ..
            } if !self.st.pending.iter().any(|p| &p.id == id)
                && let Some(thread) = self.late.get(id) =>
            {
                // Recorded as the call's confirmation, so a second one is refused.
                routed = Some(thread.clone());
                answers = Some((id.clone(), Answer::Confirmation.as_str()));
            }
            ClientEvent::ToolConfirmation {
                tool_use_id: id, ..
            } => {
                routed = self.answer(i, id, PendingKind::Confirmation)?;
                answers = Some((id.clone(), Answer::Confirmation.as_str()));
            }
            ClientEvent::Interrupt { thread_id } => self.interrupt(i, thread_id.as_deref(), now)?,
            ClientEvent::DefineOutcome(def) => {
                if def.rubric_text().is_none() {
                    return Err(StoreError::Invalid(super::outcomes::unresolved(i)));
                }
                super::outcomes::define(&mut self.st, def, self.can_start)?;
                self.starts_turn = true;
                self.resume_runs(now);
            }
        }
        Ok(NewEvent {
            id: new_id("sevt"),
            thread_id: Some(routed.clone().unwrap_or_else(|| self.primary.to_string())),
            kind: ev.kind().to_string(),
            body: ev.body(routed.as_deref()),
            internal: None,
            answers,
            processed_at: processed,
        })
    }

    /// Takes pending call `id` of `kind` answered by event `i`; returns the delegate thread
    /// the answer is routed to (None on the primary thread).
    fn answer(
        &mut self,
        i: usize,
        id: &str,
        kind: PendingKind,
    ) -> Result<Option<String>, StoreError> {
        let (field, what) = match kind {
            PendingKind::Custom => ("custom_tool_use_id", "agent.custom_tool_use"),
            PendingKind::ClientTool => ("tool_use_id", "self-hosted agent.tool_use"),
            PendingKind::Confirmation => ("tool_use_id", "agent.tool_use awaiting confirmation"),
        };
        let p = self
            .st
            .take(id, kind)
            .ok_or_else(|| not_pending(i, field, id, what))?;
        self.answered = true;
        self.answered_threads.insert(p.thread_id.clone());
        Ok((p.thread_id != self.primary).then_some(p.thread_id))
    }

    /// New input lifts an interrupt's pause from the session's workflow runs, and gives a
    /// primary whose turn failed while they ran its next turn.
    fn resume_runs(&mut self, now: Micros) {
        self.st.primary_failed = None;
        let events = super::workflow_runs::resume_all(
            &mut self.st,
            super::workflow_runs::BY_INTERRUPT,
            self.primary,
            now,
        );
        if !events.is_empty() {
            self.restarted = true;
        }
        self.run_events.extend(events);
    }

    /// An interrupt of one delegate (`Some`) or of the primary thread and every delegate.
    fn interrupt(&mut self, i: usize, thread: Option<&str>, now: Micros) -> Result<(), StoreError> {
        let st = &mut self.st;
        match thread {
            Some(t) if t != self.primary && !st.threads.contains_key(t) => {
                return Err(StoreError::Invalid(Invalid::new(format!(
                    "`events[{i}].session_thread_id` `{t}` is not a thread of this session"
                ))));
            }
            Some(t) if t != self.primary && st.threads[t].status == ThreadStatus::Terminated => {
                // Upstream refuses it too: a terminated thread has nothing left to stop, and
                // accepting it would tell the client an interrupt took effect.
                return Err(StoreError::Invalid(Invalid::new(format!(
                    "`events[{i}].session_thread_id` `{t}` is terminated: there is nothing to interrupt"
                ))));
            }
            // A workflow run's thread works for the run, not for the user: interrupting it
            // alone stops nothing (a session-wide interrupt pauses its run).
            Some(t) if t != self.primary && super::workflow_runs::is_run_thread(st, t) => {}
            Some(t) if t != self.primary => {
                let run = &st.threads[t];
                if run.status.is_active() {
                    st.set_interrupt(t, true);
                    self.acc.interrupt_thread = Some(t.to_string());
                } else if !run.replies_to.is_empty() || st.pending_of(t).next().is_some() {
                    self.stopped.push(t.to_string());
                }
            }
            // The primary thread, or every thread: delegates go with their parent.
            _ => {
                self.run_events.extend(super::workflow_runs::pause_all(
                    st,
                    super::workflow_runs::BY_INTERRUPT,
                    self.primary,
                    now,
                ));
                if self.status.is_active() {
                    st.interrupt = true;
                    // A workflow run's threads stop at their next model request, as their
                    // paused run tells them; they are not cut.
                    for run in st
                        .threads
                        .values_mut()
                        .filter(|r| r.status.is_active() && r.workflow_run.is_none())
                    {
                        run.interrupt = true;
                    }
                    self.acc.interrupt_all = true;
                } else if !st.pending.is_empty()
                    || st.threads.values().any(|r| !r.replies_to.is_empty())
                {
                    self.closed_pending = true;
                }
            }
        }
        Ok(())
    }

    /// Ends the idle delegates the batch interrupted: their calls are closed and their
    /// parent's calls on them answered.
    fn stop_delegates(&mut self, now: Micros) -> Vec<NewEvent> {
        let mut events = Vec::new();
        for t in std::mem::take(&mut self.stopped) {
            events.extend(stop_delegate(
                &mut self.st,
                &t,
                self.primary,
                "The user interrupted this delegate before it finished.",
                false,
                now,
            ));
            self.answered = true;
        }
        events
    }

    /// A delegate whose blocking events are all answered goes back to work.
    fn restart_answered_delegates(&mut self, now: Micros) -> Vec<NewEvent> {
        let mut events = Vec::new();
        for t in self.answered_threads.iter().filter(|t| *t != self.primary) {
            if self.st.pending_of(t).next().is_none()
                && let Some(run) = self.st.threads.get_mut(t)
                && run.status == ThreadStatus::Idle
            {
                run.set_status(ThreadStatus::Running, now);
                events.push(server_event(
                    kind::THREAD_STATUS_RUNNING,
                    events::thread_status(t, &run.agent_name, None),
                    t,
                    now,
                ));
                self.restarted = true;
            }
        }
        events
    }

    /// The session's status change: an interrupt of a blocked session closes its calls and
    /// idles it (resuming queued input); answers or new input start an idle session; answers
    /// that leave calls pending restate `requires_action`; an active session just has work.
    fn settle(
        &mut self,
        rec: &mut SessionRecord,
        lease: Option<&LeaseGrant>,
        now: Micros,
    ) -> Vec<NewEvent> {
        let primary = self.primary;
        let mut events = Vec::new();
        if self.closed_pending {
            // Interrupting a session blocked on requires_action closes each pending call with
            // an error result and ends the turn without sampling the model, as upstream does.
            let st = &mut self.st;
            // A workflow run's calls waiting on the client stay pending and answerable.
            let blocked: Vec<String> = st
                .threads
                .iter()
                .filter(|(id, r)| {
                    r.workflow_run.is_none()
                        && (!r.replies_to.is_empty() || st.pending_of(id).next().is_some())
                })
                .map(|(id, _)| id.clone())
                .collect();
            for t in blocked {
                events.extend(stop_delegate(
                    st,
                    &t,
                    primary,
                    "The user interrupted the session before this delegate finished.",
                    false,
                    now,
                ));
            }
            let (kept, closed): (Vec<_>, Vec<_>) = std::mem::take(&mut st.pending)
                .into_iter()
                .partition(|p| super::workflow_runs::is_run_thread(st, &p.thread_id));
            for p in closed {
                events.push(closed_tool_call(&p.id, &p.thread_id, p.mcp, now));
            }
            st.pending = kept;
            let reason = match st.pending.is_empty() {
                true => StopReason::EndTurn,
                false => StopReason::RequiresAction(st.pending_ids()),
            };
            events.extend(super::outcomes::on_session_idle(st, &reason, primary, now));
            events.push(server_event(
                kind::STATUS_IDLE,
                events::idle(&reason, None),
                primary,
                now,
            ));
            rec.updated_at = now;
            // Input queued behind the blocked turn now gets its own.
            let resumed = resume_if_queued(rec, st, primary, lease, now);
            self.acc.wake = !resumed.is_empty();
            events.extend(resumed);
        } else if self.status == SessionStatus::Idle
            && (self.restarted || (self.answered && self.st.pending.is_empty()) || self.starts_turn)
        {
            events.push(server_event(
                kind::STATUS_RUNNING,
                serde_json::json!({}),
                primary,
                now,
            ));
            set_status(rec, SessionStatus::Running, now);
            self.acc.wake = true;
        } else if self.status == SessionStatus::Idle && self.answered && !self.st.pending.is_empty()
        {
            let remaining = StopReason::RequiresAction(self.st.pending_ids());
            events.push(server_event(
                kind::STATUS_IDLE,
                events::idle(&remaining, None),
                primary,
                now,
            ));
        } else if self.status.is_active() {
            self.acc.wake = true;
        }
        events
    }
}

/// Archives a delegate thread that is not running: its open calls are closed, the parent's
/// calls waiting on it get an error result, and it ends with
/// `session.thread_status_terminated`. A session whose only obstacle was that thread goes
/// back to work. Returns the decision and whether the runner has work; None when the
/// session has no such delegate thread.
pub fn archive_thread(
    rec: &mut SessionRecord,
    thread: &str,
    lease: Option<&LeaseGrant>,
    now: Micros,
) -> Result<Option<(TxnOutput, bool)>, StoreError> {
    let body: SessionBodyHead = serde_json::from_str(&rec.body)?;
    let primary = body.primary_thread_id.as_str();
    if thread == primary {
        return Err(StoreError::Invalid(Invalid::new(
            "the primary thread is archived with its session: archive the session instead",
        )));
    }
    let before = EngineState::of(rec)?;
    let mut st = before.clone();
    let Some(run) = st.threads.get(thread) else {
        return Ok(None);
    };
    if run.archived_at.is_some() {
        return Ok(Some((TxnOutput::default(), false)));
    }
    if let Some(run_id) = &run.workflow_run
        && st
            .workflow_runs
            .get(run_id)
            .is_some_and(|r| r.status != crate::workflow_runs::RunStatus::Ended)
    {
        return Err(StoreError::Invalid(
            mast_domain::invalid::Invalid::with_code(
                "workflow_run_open",
                format!(
                    "session {} has an open workflow run ({run_id}); its threads are archived when they finish",
                    rec.id
                ),
            ),
        ));
    }
    if run.status.is_active() {
        return Err(StoreError::Conflict(format!(
            "thread `{thread}` is running; interrupt it before archiving"
        )));
    }
    let mut events = stop_delegate(
        &mut st,
        thread,
        primary,
        "The user archived this delegate's thread before it finished.",
        true,
        now,
    );
    let mut wake = false;
    let answered = events
        .iter()
        .any(|e| e.kind == kind::THREAD_MESSAGE_RECEIVED);
    if status_of(rec) == SessionStatus::Idle && answered && st.pending.is_empty() {
        events.push(server_event(
            kind::STATUS_RUNNING,
            serde_json::json!({}),
            primary,
            now,
        ));
        set_status(rec, SessionStatus::Running, now);
        grant_lease(rec, lease, now);
        wake = true;
    }
    Ok(Some((
        state::output(rec, &before, st, events, vec![], now)?,
        wake,
    )))
}

#[cfg(test)]
#[path = "intake_tests.rs"]
mod tests;

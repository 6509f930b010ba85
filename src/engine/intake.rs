//! Client input against the locked session row: which events are queued or processed, which
//! blocking events they answer, and the status transitions they cause — all decided in the
//! same transaction that appends them, so concurrent requests cannot race.

use serde_json::Value;

use std::collections::BTreeSet;

use super::state::{
    self, EngineState, LeaseGrant, PendingKind, ThreadStatus, grant_lease, set_status, status_of,
    work_item_for,
};
use super::turn_end::{closed_tool_call, resume_if_queued, stop_delegate};
use crate::domain::environment::EnvironmentConfig;
use crate::domain::events::{self, ClientEvent, StopReason, kind};
use crate::domain::ids::new_id;
use crate::domain::invalid::Invalid;
use crate::domain::session::{SessionBody, SessionStatus};
use crate::domain::time::Micros;
use crate::store::{NewEvent, SessionRecord, StoreError, TxnOutput};

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

/// Applies a validated batch to the locked row. Client echoes come first in the output, in
/// request order; status events caused by the batch follow.
pub fn accept(
    rec: &mut SessionRecord,
    batch: &[ClientEvent],
    lease: Option<&LeaseGrant>,
    now: Micros,
) -> Result<(TxnOutput, Accepted), StoreError> {
    check_open(rec)?;
    let body: SessionBody = serde_json::from_str(&rec.body)?;
    let primary = body.primary_thread_id.as_str();
    let status = status_of(rec);
    let before = EngineState::of(rec)?;
    let mut st = before.clone();
    let can_start = status == SessionStatus::Idle && st.pending.is_empty();
    let mut events: Vec<NewEvent> = Vec::new();
    let mut acc = Accepted::default();
    let (mut answered, mut starts_turn, mut closed_pending) = (false, false, false);
    // Threads whose blocking events this batch answered, and delegates it stopped.
    let mut answered_threads: BTreeSet<String> = BTreeSet::new();
    let mut stopped: Vec<String> = Vec::new();

    for (i, ev) in batch.iter().enumerate() {
        let mut routed = None;
        let mut answers = None;
        let mut processed = Some(now);
        match ev {
            ClientEvent::UserMessage { .. } | ClientEvent::SystemMessage { .. } => {
                if matches!(ev, ClientEvent::SystemMessage { .. })
                    && !st.pending.is_empty()
                    && !(i > 0 && batch[i - 1].is_tool_result())
                {
                    return Err(StoreError::Invalid(Invalid::new(
                        "while the session requires action, `system.message` may only accompany a tool result",
                    )));
                }
                if can_start {
                    starts_turn = true;
                } else {
                    processed = None;
                    st.queued += 1;
                }
            }
            ClientEvent::CustomToolResult {
                custom_tool_use_id: id,
                ..
            } => {
                let p = st.take(id, PendingKind::Custom).ok_or_else(|| {
                    not_pending(i, "custom_tool_use_id", id, "agent.custom_tool_use")
                })?;
                answered = true;
                answers = Some((id.clone(), "result"));
                answered_threads.insert(p.thread_id.clone());
                routed = (p.thread_id != primary).then_some(p.thread_id);
            }
            ClientEvent::ToolResult {
                tool_use_id: id, ..
            } => {
                let p = st.take(id, PendingKind::ClientTool).ok_or_else(|| {
                    not_pending(i, "tool_use_id", id, "self-hosted agent.tool_use")
                })?;
                answered = true;
                answers = Some((id.clone(), "result"));
                answered_threads.insert(p.thread_id.clone());
                routed = (p.thread_id != primary).then_some(p.thread_id);
            }
            ClientEvent::ToolConfirmation {
                tool_use_id: id, ..
            } => {
                let p = st.take(id, PendingKind::Confirmation).ok_or_else(|| {
                    not_pending(i, "tool_use_id", id, "agent.tool_use awaiting confirmation")
                })?;
                answered = true;
                answers = Some((id.clone(), "confirmation"));
                answered_threads.insert(p.thread_id.clone());
                routed = (p.thread_id != primary).then_some(p.thread_id);
            }
            ClientEvent::Interrupt { thread_id } => match thread_id.as_deref() {
                Some(t) if t != primary && !st.threads.contains_key(t) => {
                    return Err(StoreError::Invalid(Invalid::new(format!(
                        "`events[{i}].session_thread_id` `{t}` is not a thread of this session"
                    ))));
                }
                Some(t) if t != primary => {
                    let run = &st.threads[t];
                    if run.status.is_active() {
                        st.set_interrupt(t, true);
                        acc.interrupt_thread = Some(t.to_string());
                    } else if !run.replies_to.is_empty() || st.pending_of(t).next().is_some() {
                        stopped.push(t.to_string());
                    }
                }
                // The primary thread, or every thread: delegates go with their parent.
                _ => {
                    if status.is_active() {
                        st.interrupt = true;
                        for run in st.threads.values_mut().filter(|r| r.status.is_active()) {
                            run.interrupt = true;
                        }
                        acc.interrupt_all = true;
                    } else if !st.pending.is_empty()
                        || st.threads.values().any(|r| !r.replies_to.is_empty())
                    {
                        closed_pending = true;
                    }
                }
            },
        }
        events.push(NewEvent {
            id: new_id("sevt"),
            thread_id: Some(routed.clone().unwrap_or_else(|| primary.to_string())),
            kind: ev.kind().to_string(),
            body: ev.body(routed.as_deref()),
            internal: None,
            answers,
            processed_at: processed,
        });
    }

    for t in &stopped {
        events.extend(stop_delegate(
            &mut st,
            t,
            primary,
            "The user interrupted this delegate before it finished.",
            false,
            now,
        ));
        answered = true;
    }
    // A delegate whose blocking events are all answered goes back to work.
    let mut woke = false;
    for t in answered_threads.iter().filter(|t| *t != primary) {
        if st.pending_of(t).next().is_none()
            && let Some(run) = st.threads.get_mut(t)
            && run.status == ThreadStatus::Idle
        {
            run.set_status(ThreadStatus::Running, now);
            events.push(server_event(
                kind::THREAD_STATUS_RUNNING,
                events::thread_status(t, &run.agent_name, None),
                t,
                now,
            ));
            woke = true;
        }
    }

    if closed_pending {
        // Interrupting a session blocked on requires_action closes each pending call with an
        // error result and ends the turn without sampling the model (API.md §5.3).
        let blocked: Vec<String> = st
            .threads
            .iter()
            .filter(|(id, r)| !r.replies_to.is_empty() || st.pending_of(id).next().is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for t in blocked {
            events.extend(stop_delegate(
                &mut st,
                &t,
                primary,
                "The user interrupted the session before this delegate finished.",
                false,
                now,
            ));
        }
        for p in std::mem::take(&mut st.pending) {
            events.push(closed_tool_call(&p.id, &p.thread_id, now));
        }
        events.push(server_event(
            kind::STATUS_IDLE,
            events::idle(&StopReason::EndTurn, None),
            primary,
            now,
        ));
        rec.updated_at = now;
        // Input queued behind the blocked turn now gets its own.
        let resumed = resume_if_queued(rec, &st, primary, lease, now);
        acc.wake = !resumed.is_empty();
        events.extend(resumed);
    } else if status == SessionStatus::Idle
        && (woke || (answered && st.pending.is_empty()) || starts_turn)
    {
        events.push(server_event(
            kind::STATUS_RUNNING,
            serde_json::json!({}),
            primary,
            now,
        ));
        set_status(rec, SessionStatus::Running, now);
        acc.wake = true;
    } else if status == SessionStatus::Idle && answered && !st.pending.is_empty() {
        let remaining = StopReason::RequiresAction(st.pending_ids());
        events.push(server_event(
            kind::STATUS_IDLE,
            events::idle(&remaining, None),
            primary,
            now,
        ));
    } else if status.is_active() {
        acc.wake = true;
    }
    if acc.wake {
        grant_lease(rec, lease, now);
    }
    let new_input = batch.iter().any(|e| {
        matches!(
            e,
            ClientEvent::UserMessage { .. } | ClientEvent::SystemMessage { .. }
        )
    });
    let mut out = state::output(rec, &before, st, events, vec![])?;
    if matches!(body.environment, EnvironmentConfig::SelfHosted) && new_input {
        // A dormant self-hosted session needs a worker again (a no-op while one holds it).
        out.ensure_work = Some(work_item_for(rec, now));
        acc.work = true;
    }
    Ok((out, acc))
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
    let body: SessionBody = serde_json::from_str(&rec.body)?;
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
        state::output(rec, &before, st, events, vec![])?,
        wake,
    )))
}

//! Client input against the locked session row: which events are queued or processed, which
//! blocking events they answer, and the status transitions they cause — all decided in the
//! same transaction that appends them, so concurrent requests cannot race.

use serde_json::Value;

use super::state::{
    EngineState, LeaseGrant, PendingKind, grant_lease, set_status, status_of, work_item_for,
};
use super::turn::{closed_tool_call, resume_if_queued};
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepted {
    /// The runner has work: the session is now (or still) active.
    pub wake: bool,
    /// An interrupt for a working runner was recorded.
    pub interrupt: bool,
    /// A self-hosted session took new input: its environment's workers may have an item.
    pub work: bool,
}

/// Checks that a session takes input at all.
pub fn check_open(rec: &SessionRecord) -> Result<(), StoreError> {
    if rec.archived_at.is_some() {
        return Err(StoreError::Conflict(format!(
            "session `{}` is archived and accepts no new events",
            rec.id
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
    let mut st = EngineState::of(rec)?;
    let can_start = status == SessionStatus::Idle && st.pending.is_empty();
    let mut out = TxnOutput::default();
    let mut acc = Accepted::default();
    let (mut answered, mut starts_turn, mut closed_pending) = (false, false, false);

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
                routed = (p.thread_id != primary).then_some(p.thread_id);
            }
            ClientEvent::Interrupt { thread_id } => {
                if let Some(t) = thread_id
                    && t != primary
                {
                    return Err(StoreError::Invalid(Invalid::new(format!(
                        "`events[{i}].session_thread_id` `{t}` is not a thread of this session"
                    ))));
                }
                if status.is_active() {
                    st.interrupt = true;
                    acc.interrupt = true;
                } else if !st.pending.is_empty() {
                    closed_pending = true;
                }
            }
        }
        out.events.push(NewEvent {
            id: new_id("sevt"),
            thread_id: Some(routed.clone().unwrap_or_else(|| primary.to_string())),
            kind: ev.kind().to_string(),
            body: ev.body(routed.as_deref()),
            internal: None,
            answers,
            processed_at: processed,
        });
    }

    if closed_pending {
        // Interrupting a session blocked on requires_action closes each pending call with an
        // error result and ends the turn without sampling the model (API.md §5.3).
        for p in std::mem::take(&mut st.pending) {
            out.events.push(closed_tool_call(&p.id, &p.thread_id, now));
        }
        out.events.push(server_event(
            kind::STATUS_IDLE,
            events::idle(&StopReason::EndTurn, None),
            primary,
            now,
        ));
        rec.updated_at = now;
        // Input queued behind the blocked turn now gets its own.
        let resumed = resume_if_queued(rec, &st, primary, lease, now);
        acc.wake = !resumed.is_empty();
        out.events.extend(resumed);
    } else if status == SessionStatus::Idle && answered && !st.pending.is_empty() {
        let remaining = StopReason::RequiresAction(st.pending_ids());
        out.events.push(server_event(
            kind::STATUS_IDLE,
            events::idle(&remaining, None),
            primary,
            now,
        ));
    } else if status == SessionStatus::Idle && ((answered && st.pending.is_empty()) || starts_turn)
    {
        out.events.push(server_event(
            kind::STATUS_RUNNING,
            serde_json::json!({}),
            primary,
            now,
        ));
        set_status(rec, SessionStatus::Running, now);
        acc.wake = true;
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
    if matches!(body.environment, EnvironmentConfig::SelfHosted) && new_input {
        // A dormant self-hosted session needs a worker again (a no-op while one holds it).
        out.ensure_work = Some(work_item_for(rec, now));
        acc.work = true;
    }
    st.store(rec)?;
    Ok((out, acc))
}

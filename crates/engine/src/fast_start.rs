//! Starting the model request in the transaction that gives the primary thread its input.
//!
//! A turn's first model request is usually certain the moment a client's input is accepted: an
//! idle session takes a `user.message` (or answers its last custom tool calls) and the loop's
//! next step can only be "call the model". The loop would begin with a transaction of its own
//! that logs `span.model_request_start`; here that event is appended by the client's
//! transaction instead, after the input and `session.status_running`, in the same order the
//! loop would have logged them, and the runner woken in this process is told the span is its
//! own to issue ([`arm`] returns its id, carried to the runner beside the handoff). That saves
//! one commit (a durable one: an `fsync` on SQLite, three round trips on Postgres) per turn
//! and per tool round trip.
//!
//! It is only done when the start commit would have held nothing else and decided nothing
//! (see [`arm`]'s conditions): no queued input to consume, no budget gate, no MCP servers to
//! connect first (their failures are logged before the request), no outcome, no delegates,
//! a routable model, and a context that the history cache shows to be under the compaction
//! threshold with this input. Anything else takes the loop's ordinary path.
//!
//! The span's id is a hint to this process's runner, never trusted on its own: the loop
//! issues the request only if its log shows exactly that span open and the pass would call
//! the model anyway; any other step it takes first (an interrupt, queued input, a compaction
//! the estimate did not foresee) closes the span with an empty end, as an interrupted request
//! is closed. Without the hint — a crash before the request, a lease taken over by another
//! replica, a runner that stopped — the span is what it would be after a crash mid-request:
//! dangling, so the loop closes it and issues the request again (step 6 of the loop).

use serde_json::json;

use super::Inner;
use super::intake::{Accepted, server_event};
use super::state::{EngineState, status_of};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::events::{ClientEvent, kind};
use mast_domain::session::SessionStatus;
use mast_domain::time::Micros;
use mast_domain::tools::Tool;
use mast_store::{SessionRecord, TxnOutput};

/// After `intake::accept` applied a client batch to the locked row `rec` (`out` and `acc`
/// being what it decided): when the batch starts the primary thread's model request for
/// certain, appends that request's `span.model_request_start` to `out` and returns its id.
pub(crate) fn arm(
    inner: &Inner,
    rec: &SessionRecord,
    batch: &[ClientEvent],
    out: &mut TxnOutput,
    acc: &Accepted,
    now: Micros,
) -> Option<String> {
    // A runner here gets the work, and nothing else comes with it.
    if !acc.wake || acc.interrupt_all || acc.interrupt_thread.is_some() || acc.work {
        return None;
    }
    if rec.lease_owner.as_deref() != Some(inner.owner.as_str())
        || rec.lease_expires_at.is_none_or(|t| t <= now)
        || status_of(rec) != SessionStatus::Running
    {
        return None;
    }
    // Input that starts or resumes the turn, and only that.
    let input_only = batch.iter().all(|e| {
        matches!(
            e,
            ClientEvent::UserMessage { .. }
                | ClientEvent::SystemMessage { .. }
                | ClientEvent::CustomToolResult { .. }
        )
    });
    if !input_only || !out.mark_processed.is_empty() || out.ensure_work.is_some() {
        return None;
    }
    // The session was idle until this batch (it logs the move to running), so no loop of
    // this session is at work; every input event is taken now, none queued, and a message
    // says something (an empty one leaves the model nothing to answer).
    if !out.events.iter().any(|e| e.kind == kind::STATUS_RUNNING) {
        return None;
    }
    let mut says_something = false;
    for e in &out.events {
        match e.kind.as_str() {
            kind::STATUS_RUNNING => {}
            kind::USER_CUSTOM_TOOL_RESULT => says_something = true,
            kind::USER_MESSAGE | kind::SYSTEM_MESSAGE => {
                // Queued rather than taken.
                e.processed_at?;
                says_something |= has_content(&e.body);
            }
            _ => return None,
        }
    }
    if !says_something {
        return None;
    }
    let st = EngineState::of(rec).ok()?;
    let quiet = st.pending.is_empty()
        && st.queued == 0
        && !st.interrupt
        && st.running_tool.is_none()
        && st.threads.is_empty()
        && st.budget_cents.is_none()
        && !st.budget_paused
        && st.outcomes.is_empty();
    if !quiet || inner.config.max_requests_per_turn == 0 || !inner.config.caches {
        return None;
    }
    // The agent: parsed already (the runner keeps it), with nothing to connect first.
    let body = inner.bodies.peek(&rec.id, &rec.body)?;
    let agent = &body.agent;
    if matches!(body.environment, EnvironmentConfig::SelfHosted)
        || agent
            .tools
            .iter()
            .any(|t| matches!(t, Tool::McpToolset { .. }))
        || super::delegation::Roster::of(agent).is_some_and(|r| !r.is_empty())
        || inner.models.route(&agent.model.id).is_err()
    {
        return None;
    }
    // The context with this input stays under the compaction threshold, by the estimate the
    // loop itself makes, from what the thread's last loop left (it covers the whole log).
    let known = inner.history.estimate(&rec.id, &body.primary_thread_id)?;
    if known.last_seq != rec.last_seq {
        return None;
    }
    let added: usize = out
        .events
        .iter()
        .map(|e| super::context::json_bytes(&e.body))
        .sum();
    let tokens = known.tokens + (added / super::context::BYTES_PER_TOKEN) as u64;
    if tokens > inner.config.compaction.limit(&agent.model.id) {
        return None;
    }
    let start = server_event(kind::SPAN_START, json!({}), &body.primary_thread_id, now);
    let id = start.id.clone();
    out.events.push(start);
    Some(id)
}

/// Whether a message body has content the model would see (the context drops blank text).
fn has_content(body: &serde_json::Value) -> bool {
    body.get("content")
        .and_then(|c| c.as_array())
        .is_some_and(|blocks| {
            blocks.iter().any(|b| {
                b.get("text")
                    .and_then(|t| t.as_str())
                    .is_none_or(|t| !t.trim().is_empty())
            })
        })
}

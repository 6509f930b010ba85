//! Accepting a batch of client events: messages, answers to blocking events, interrupts.

use super::OpError;
use super::txn::decide_held;
use mast_domain::events::{Answer, ClientEvent, kind};
use mast_domain::invalid::Invalid;
use std::sync::atomic::Ordering;

use crate::Engine;
use crate::fast_start;
use crate::intake::{self, Accepted};
use crate::runner::Handoff;
use mast_store::EventRecord;

impl Engine {
    /// Appends a validated batch to session `id` of workspace `ws` in one transaction and
    /// acts on what it did: interrupts working threads, wakes the runner, tells the
    /// environment's workers about new work. Returns the appended client events, in
    /// request order.
    pub async fn accept_events(
        &self,
        ws: &str,
        id: &str,
        mut batch: Vec<ClientEvent>,
    ) -> Result<Vec<EventRecord>, OpError> {
        self.check_file_sources(ws, "events", &batch).await?;
        self.resolve_rubrics(ws, "events", &mut batch).await?;
        let post = self.hook_batch(ws, id, &batch).await?;
        let n = batch.len();
        let lease = self.lease_grant();
        // Before the transaction, for the runner it wakes (see `runner::Handoff`).
        let epoch = self.inner.interrupt_epoch.load(Ordering::SeqCst);
        let mut late = intake::LateConfirmations::new();
        let committed = loop {
            let clock = self.inner.store.clock().clone();
            let (each, post, late_now) = (batch.clone(), post.clone(), late.clone());
            let inner = self.inner.clone();
            let lease = lease.clone();
            let decided = decide_held(&self.inner, ws, id, move |rec| {
                let now = clock.now();
                let body = inner.bodies.get(&rec.id, &rec.body)?;
                let (mut out, acc) =
                    intake::accept(rec, &body, &each, &post, &late_now, lease.as_ref(), now)?;
                let armed = fast_start::arm(&inner, rec, &each, &mut out, &acc, now);
                Ok((out, (acc, armed)))
            })
            .await;
            match decided {
                Ok(c) => break c,
                // Only a code-less refusal can be an answer to an unknown or answered id; an
                // archived session (`session_archived`) says so itself.
                Err(OpError::Invalid(e)) if e.code.is_none() => {
                    // Confirmations of calls a workflow run's end cut short are taken as
                    // having no effect; anything else is explained.
                    if late.is_empty() {
                        late = self.late_confirmations(id, &batch).await?;
                        if !late.is_empty() {
                            continue;
                        }
                    }
                    self.explain_answer_error(id, &batch).await?;
                    return Err(OpError::Invalid(e));
                }
                Err(e) => return Err(e),
            }
        };
        let echoes = committed.events[..n.min(committed.events.len())].to_vec();
        let (acc, armed) = committed.value;
        let environment_id = committed.rec.environment_id.clone();
        let handoff = Handoff {
            rec: committed.rec,
            events: committed.events,
            epoch,
            armed,
        };
        self.signal_accepted(id, &environment_id, &acc, handoff);
        Ok(echoes)
    }

    /// Tells the runner (here or on another replica) and the workers what an accepted batch
    /// changed; a runner woken here is handed what the batch committed.
    fn signal_accepted(&self, id: &str, environment_id: &str, acc: &Accepted, handoff: Handoff) {
        if acc.interrupt_all {
            self.interrupt(id, None);
        }
        if let Some(t) = &acc.interrupt_thread {
            self.interrupt(id, Some(t));
        }
        if acc.wake {
            self.wake_with(id, Some(handoff));
        }
        if acc.work {
            self.inner.hub.work_queued(environment_id);
        }
    }

    /// The confirmations in `batch` of calls that waited for one on workflow run threads that
    /// are archived now, each with its thread (see [`intake::LateConfirmations`]).
    async fn late_confirmations(
        &self,
        id: &str,
        batch: &[ClientEvent],
    ) -> Result<intake::LateConfirmations, OpError> {
        let store = &self.inner.store;
        let mut late = intake::LateConfirmations::new();
        for e in batch {
            let ClientEvent::ToolConfirmation { tool_use_id, .. } = e else {
                continue;
            };
            let Some(call) = store.get_event(id, tool_use_id).await? else {
                continue;
            };
            if call.kind != kind::AGENT_TOOL_USE && call.kind != kind::AGENT_MCP_TOOL_USE {
                continue;
            }
            // Only a call that waited for a person's confirmation and never got one: the run's
            // end closed it unrun. A second confirmation is refused as already answered.
            let asked = call
                .body
                .get("evaluated_permission")
                .and_then(|p| p.as_str())
                == Some("ask");
            if !asked
                || store
                    .has_answer(id, tool_use_id, Answer::Confirmation.as_str())
                    .await?
            {
                continue;
            }
            let Some(thread_id) = call.thread_id else {
                continue;
            };
            let Some(thread) = store.get_thread(id, &thread_id).await? else {
                continue;
            };
            let of_run = serde_json::from_str::<serde_json::Value>(&thread.body)
                .ok()
                .is_some_and(|b| b.get("workflow_run_id").is_some_and(|r| r.is_string()));
            if of_run && thread.archived_at.is_some() {
                late.insert(tool_use_id.clone(), thread_id);
            }
        }
        Ok(late)
    }

    /// A precise refusal for `user.*` events answering blocking events: the id is unknown,
    /// names another kind of event, or was already answered. The transaction itself is the
    /// authority; this only explains its refusal, so it returns Ok when it finds nothing.
    async fn explain_answer_error(&self, id: &str, batch: &[ClientEvent]) -> Result<(), OpError> {
        let store = &self.inner.store;
        for (i, e) in batch.iter().enumerate() {
            let (field, target, want, answer) = match e {
                ClientEvent::CustomToolResult {
                    custom_tool_use_id, ..
                } => (
                    "custom_tool_use_id",
                    custom_tool_use_id,
                    kind::AGENT_CUSTOM_TOOL_USE,
                    Answer::Result,
                ),
                ClientEvent::ToolResult { tool_use_id, .. } => (
                    "tool_use_id",
                    tool_use_id,
                    kind::AGENT_TOOL_USE,
                    Answer::Result,
                ),
                ClientEvent::ToolConfirmation { tool_use_id, .. } => (
                    "tool_use_id",
                    tool_use_id,
                    kind::AGENT_TOOL_USE,
                    Answer::Confirmation,
                ),
                _ => continue,
            };
            let refusal = match store.get_event(id, target).await? {
                None => Some(format!(
                    "`events[{i}].{field}`: no event `{target}` in this session"
                )),
                // A confirmation answers an MCP call as it does a built-in one.
                Some(ev)
                    if ev.kind != want
                        && !(want == kind::AGENT_TOOL_USE
                            && answer == Answer::Confirmation
                            && ev.kind == kind::AGENT_MCP_TOOL_USE) =>
                {
                    Some(format!(
                        "`events[{i}].{field}`: event `{target}` has type `{}`, not `{want}`",
                        ev.kind
                    ))
                }
                Some(_) if store.has_answer(id, target, answer.as_str()).await? => Some(format!(
                    "`events[{i}].{field}`: `{target}` was already answered"
                )),
                Some(_) => None,
            };
            if let Some(message) = refusal {
                return Err(Invalid::new(message).into());
            }
        }
        Ok(())
    }
}

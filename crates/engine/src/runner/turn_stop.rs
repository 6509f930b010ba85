//! How a thread's loop stops or pauses: ending the turn (or failing it), acting on an
//! interrupt, waiting while delegates work, and answering a delegation whose thread stopped
//! without replying. Each is one transaction under the row lock that re-checks what it acts on.

use serde_json::Value;

use super::{Loop, RunError};
use crate::intake::server_event;
use crate::state::EngineState;
use crate::turn_end::{self, Ender};
use mast_domain::events::{self, Answer, StopReason, kind};

impl Loop<'_> {
    /// What ends this thread's turn, for a transaction.
    pub fn ender(&self) -> Ender {
        Ender {
            thread: self.scope.thread.clone(),
            primary: self.scope.primary.clone(),
            child: self.child_name(),
            usage_at_start: self.tally.usage_at_start.clone(),
            reply: self.child_name().map(|_| self.final_message()),
            clock: self.inner.store.clock().clone(),
            runs: self
                .child_name()
                .map(|_| (self.scope.sid.clone(), self.run_scope())),
            seen_notices: self.is_primary().then_some(self.view.run_notices),
        }
    }

    /// The text of this turn's last `agent.message` (a delegate's reply).
    fn final_message(&self) -> String {
        self.view
            .events
            .iter()
            .rev()
            .take_while(|e| e.kind != kind::THREAD_MESSAGE_RECEIVED)
            .find(|e| e.kind == kind::SPAN_END)
            .and_then(|e| e.internal.as_ref())
            .and_then(|i| i.get("content"))
            .and_then(Value::as_array)
            .map(|blocks| crate::context::text_of(blocks))
            .unwrap_or_default()
    }

    /// Ends the turn unless, under the row lock, something says it is not over.
    pub async fn finish(
        &mut self,
        reason: StopReason,
        details: Option<Value>,
    ) -> Result<(), RunError> {
        let ender = self.ender();
        self.commit(
            move |rec, st| ender.try_end(rec, st, reason, details),
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Ends the turn with an error the model cannot recover from by itself.
    pub async fn fail_turn(
        &mut self,
        error_type: &'static str,
        message: &str,
    ) -> Result<(), RunError> {
        let ender = self.ender();
        let message = message.to_string();
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| Ok(ender.exhausted(rec, st, error_type, &message, clock.now())),
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Acts on a recorded interrupt: closes this thread's open calls with error results and
    /// idles it with `end_turn`. The primary waits for interrupted delegates to stop first.
    pub(super) async fn interrupt(&mut self, st: &EngineState) -> Result<(), RunError> {
        // Which running call is an MCP one (the row keeps only its id).
        let mcp_calls: std::collections::HashSet<String> = self
            .view
            .events
            .iter()
            .filter(|e| e.kind == mast_domain::events::kind::AGENT_MCP_TOOL_USE)
            .map(|e| e.id.clone())
            .collect();
        if let Some(name) = self.child_name() {
            let (thread, primary) = (self.scope.thread.clone(), self.scope.primary.clone());
            let clock = self.inner.store.clock().clone();
            self.commit(
                move |_, st| {
                    let now = clock.now();
                    let mut out = Vec::new();
                    if let Some(id) = st.running_tool_of(&thread) {
                        let mcp = mcp_calls.contains(&id);
                        out.push(turn_end::closed_tool_call(&id, &thread, mcp, now));
                    }
                    let why = format!("`{name}` was interrupted before it finished its task.");
                    out.extend(turn_end::stop_delegate(
                        st, &thread, &primary, &why, false, now,
                    ));
                    Ok(out)
                },
                vec![],
            )
            .await?;
            return Ok(());
        }
        if st.children_active() {
            // Delegates close their own work; the primary ends once they have.
            return self.await_delegates(st).await;
        }
        let (primary, grant) = (self.scope.primary.clone(), self.grant());
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                let now = clock.now();
                // The pending set under the lock is the authority: an answer that committed
                // meanwhile is not closed a second time.
                // A workflow run's calls waiting on the client stay pending and answerable.
                let blocked: Vec<String> = st
                    .threads
                    .iter()
                    .filter(|(id, t)| {
                        t.workflow_run.is_none()
                            && (!t.replies_to.is_empty() || st.pending_of(id).next().is_some())
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                let mut out = Vec::new();
                for tid in blocked {
                    out.extend(turn_end::stop_delegate(
                        st,
                        &tid,
                        &primary,
                        "The user interrupted the session before this delegate finished.",
                        false,
                        now,
                    ));
                }
                let (kept, closed): (Vec<_>, Vec<_>) = std::mem::take(&mut st.pending)
                    .into_iter()
                    .partition(|p| crate::workflow_runs::is_run_thread(st, &p.thread_id));
                out.extend(
                    closed
                        .iter()
                        .map(|p| turn_end::closed_tool_call(&p.id, &p.thread_id, p.mcp, now)),
                );
                st.pending = kept;
                if let Some(id) = st.running_tool.take() {
                    let mcp = mcp_calls.contains(&id);
                    out.push(turn_end::closed_tool_call(&id, &primary, mcp, now));
                }
                st.interrupt = false;
                let reason = match st.pending.is_empty() {
                    true => StopReason::EndTurn,
                    false => StopReason::RequiresAction(st.pending_ids()),
                };
                out.extend(turn_end::end_session_turn(
                    rec, st, &primary, reason, None, now,
                ));
                out.extend(turn_end::resume_if_queued(
                    rec,
                    st,
                    &primary,
                    Some(&grant),
                    now,
                ));
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// The primary waits while delegates work on its calls: their loops run beside it.
    pub(super) async fn await_delegates(&mut self, st: &EngineState) -> Result<(), RunError> {
        for (tid, t) in &st.threads {
            if t.status.is_active() {
                self.crew.spawn.send(tid.clone());
            }
        }
        let deadline = crate::workflow_runs::next_deadline(st);
        self.wait_for_children(deadline).await
    }

    /// Waits for a change, at most until `deadline` (a workflow run's lifetime ending).
    pub(super) async fn wait_for_children(
        &mut self,
        deadline: Option<i64>,
    ) -> Result<(), RunError> {
        // An interrupt, a delegate's end or new answers all mean: look at the log again —
        // and so does time passing, since an answer posted on another replica only
        // reaches this one as a signal, which may be lost.
        let mut wait = std::time::Duration::from_secs(5);
        if let Some(d) = deadline {
            let left = u64::try_from(d - self.inner.now()).unwrap_or(0);
            wait = wait.min(std::time::Duration::from_micros(left));
        }
        let changed = async {
            tokio::select! {
                _ = self.crew.changed.notified() => {}
                _ = self.handle.nudge.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        };
        let _ = self.interruptible(changed).await?;
        Ok(())
    }

    /// Answers a delegation call whose thread stopped without replying.
    pub(super) async fn close_orphaned(&mut self, call: String) -> Result<(), RunError> {
        let primary = self.scope.primary.clone();
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |_, _| {
                let mut e = server_event(
                    kind::AGENT_TOOL_RESULT,
                    events::tool_result(
                        &call,
                        vec![mast_domain::content::text(
                            "The delegate thread stopped without replying to this task.",
                        )],
                        true,
                    ),
                    &primary,
                    clock.now(),
                );
                e.answers = Some((call, Answer::Result.as_str()));
                Ok(vec![e])
            },
            vec![],
        )
        .await?;
        Ok(())
    }
}

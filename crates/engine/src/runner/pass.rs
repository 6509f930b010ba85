//! One pass after another of a thread's loop: read what is new, take the first step that
//! applies, commit it.

use std::sync::atomic::Ordering;

use serde_json::json;

use super::tool_step::ToolStep;
use super::{Ended, Loop, Role, RunError, Waited, store_err};
use crate::context::{self, Tail};
use crate::heap_size::HeapSize;
use crate::history::Known;
use crate::intake::server_event;
use crate::state::{EngineState, LeaseGrant, ThreadStatus, set_status, status_of};
use crate::trim;
use mast_domain::events::{self, StopReason, kind};
use mast_domain::session::{ModelUsage, SessionStatus};
use mast_models::ModelStop;
use mast_store::{EventRecord, SessionRecord, StoreError};

impl Loop<'_> {
    /// Drives this thread until it has no work (idle or terminated), the lease is lost, or
    /// the process shuts down.
    ///
    /// Each iteration reads the row (after noting the interrupt count, so an interrupt
    /// signalled after the read still cuts the next wait) and this thread's new events, then
    /// takes the first step that applies, in this order of precedence:
    ///
    /// 1. **shutdown** — the process is stopping: return; the runner releases the lease so
    ///    another replica (or the next start) resumes the session.
    /// 2. **released** — the last commit handed the lease back (the session went idle).
    /// 3. **no work** — the session (primary) or this thread (delegate) is not running or
    ///    retrying.
    /// 4. **interrupt** — an interrupt is recorded for this thread: close its open calls and
    ///    idle it with `end_turn` (the primary first lets its working delegates stop).
    /// 5. **orphaned tool** — a built-in call started and never recorded a result (the process
    ///    died while it ran): close it with an error result; it is never run twice.
    /// 6. **dangling request** — a model request started and never ended: close its span
    ///    and issue it again.
    /// 7. **rescheduled** — a retry delay ended: back to running.
    /// 8. **queued input** — unless calls are outstanding, queued messages are taken into the
    ///    next model request (or only marked consumed when no request follows).
    /// 9. **the context's tail** — the user spoke last: call the model (compacting the
    ///    context first when it would pass the model's window threshold, see
    ///    `engine::compaction`); the model stopped at
    ///    `max_tokens` / `pause_turn`: continue it (a bounded number of times); it refused:
    ///    idle with `refusal`; its context overflowed: fail the turn; calls outstanding: run
    ///    the next one here, hand it to a worker, wait for delegates, close an orphaned
    ///    delegation, or idle with `requires_action` for the client's answers; otherwise
    ///    idle with `end_turn`.
    ///
    /// A loop that ends cleanly leaves what it knows of the log for the thread's next loop
    /// (see `engine::history`).
    pub async fn run(&mut self, first: Option<SessionRecord>) -> Result<Ended, RunError> {
        let ended = self.drive(first).await;
        if ended.is_ok() && !self.fast.consumed_here {
            // What the last commit wrote (the turn's end, usually) is known: the next loop
            // need not read it again.
            if let Some(c) = self.fast.carried.take() {
                self.view.last_seq = c.last_seq;
                self.absorb(c.fresh);
            }
            let mut known = Known {
                events: std::mem::take(&mut self.view.events),
                last_seq: self.view.last_seq,
                transcript: std::mem::take(&mut self.view.transcript),
                bytes: self.fast.known_bytes,
                size: 0,
            };
            known.size = known.heap_size();
            self.inner
                .history
                .put(&self.scope.sid, &self.scope.thread, known);
        }
        ended
    }

    async fn drive(&mut self, first: Option<SessionRecord>) -> Result<Ended, RunError> {
        let mut first = first;
        loop {
            if self.inner.shutdown.is_cancelled() {
                return Err(RunError::Shutdown);
            }
            if self.view.released {
                return Ok(Ended::Released);
            }
            // What the last commit wrote is read whatever happened since; its row is only
            // current if no wait followed it.
            let carried = self.fast.carried.take().and_then(|c| {
                self.view.last_seq = c.last_seq;
                self.absorb(c.fresh);
                (c.waits == self.fast.waits.load(Ordering::Relaxed))
                    .then_some((c.rec, c.interrupts))
            });
            let mut caught_up = false;
            let rec = match (first.take(), carried) {
                (Some(rec), _) => rec,
                (None, Some((rec, interrupts))) => {
                    self.view.seen_interrupts = interrupts;
                    caught_up = true;
                    rec
                }
                (None, None) => {
                    self.view.seen_interrupts = self.handle.interrupt_count(&self.scope.thread);
                    let rec = self
                        .hold(self.inner.store.get_session_by_id(&self.scope.sid))
                        .await?
                        .ok_or(RunError::Gone)?;
                    self.handle.saw_seq(rec.last_seq);
                    rec
                }
            };
            let st = EngineState::of(&rec)?;
            self.view.run_notices = st.run_notices;
            let rescheduling = match &self.scope.role {
                Role::Primary => {
                    let status = status_of(&rec);
                    if !status.is_active() {
                        return Ok(Ended::NoWork);
                    }
                    if self.tally.usage_at_start.is_none() {
                        self.tally.usage_at_start = Some(rec.usage.clone());
                    }
                    status == SessionStatus::Rescheduling
                }
                Role::Child { .. } => match st.threads.get(&self.scope.thread) {
                    Some(t) if t.status.is_active() => t.status == ThreadStatus::Rescheduling,
                    _ => return Ok(Ended::NoWork),
                },
            };
            self.fast.expected = self.inner.store.decides_on_held_rows().then_some(rec);
            if !caught_up {
                self.refresh().await?;
            }
            // A request the waking transaction started (`engine::fast_start`) is issued by
            // this pass when the log shows it open and the pass calls the model anyway; any
            // other step closes it first, as an interrupted request is closed.
            if let Some(id) = self.fast.armed.take()
                && self.view.transcript.started() == Some(id.as_str())
            {
                if self.issues_now(&st, rescheduling) {
                    self.fast.prestarted = Some(id);
                } else {
                    self.close_unissued(id).await?;
                    continue;
                }
            }
            if self.is_primary() && !st.workflow_runs.is_empty() {
                self.spawn_run_threads(&st);
                if crate::workflow_runs::next_deadline(&st).is_some_and(|d| d <= self.inner.now()) {
                    self.expire_runs().await?;
                    continue;
                }
            }
            if st.interrupt_of(&self.scope.thread) {
                self.interrupt(&st).await?;
                continue;
            }
            if let Some(id) = st.running_tool_of(&self.scope.thread) {
                // The process stopped while this call ran: its effects are unknown, so it is
                // closed rather than run again.
                self.close_interrupted_tool(id).await?;
                continue;
            }
            // The messages are only lent to a model request (or copied to continue one).
            let ctx = self.view.transcript.outline();
            if let Some(start) = ctx
                .dangling_request
                .clone()
                .filter(|s| self.fast.prestarted.as_ref() != Some(s))
            {
                // The process died during this request: close its span and issue it again.
                let end = server_event(
                    kind::SPAN_END,
                    events::span_end(&start, &ModelUsage::default(), true),
                    &self.scope.thread,
                    self.inner.now(),
                );
                self.commit(move |_, _| Ok(vec![end]), vec![]).await?;
                continue;
            }
            if rescheduling {
                self.set_running().await?;
                continue;
            }
            // The agent's iteration on an outcome ended: the grader judges it.
            if self.is_primary()
                && let Some(o) = crate::outcomes::evaluating(&st)
            {
                // Boxed: only a session with an outcome grades.
                Box::pin(self.grade(o)).await?;
                continue;
            }
            // Queued input joins the next model request; it is marked consumed in the same
            // transaction that starts the request.
            let mut ctx = ctx;
            let mut consumed = Vec::new();
            if !matches!(ctx.tail, Tail::AwaitingTools(_)) {
                consumed = self.take_queued();
                if !consumed.is_empty() {
                    ctx = self.view.transcript.outline();
                }
            }
            if !consumed.is_empty() && ctx.tail != Tail::User {
                self.consume(consumed).await?;
                continue;
            }
            if self.is_primary()
                && matches!(ctx.tail, Tail::AwaitingTools(_))
                && crate::budget::holds_primary(&st)
            {
                // A delegate it waits on stopped at the budget: the session idles there too.
                self.finish(StopReason::BudgetReached, None).await?;
                continue;
            }
            if self.is_primary() && !crate::workflow_runs::stalled(&st).is_empty() {
                // A run resumed after its agents ended while it was paused: it goes on.
                self.load_run_texts(&st).await?;
                if self.advance_stalled().await? {
                    continue;
                }
            }
            // Its turn failed while a run ran, and nothing since gave it another.
            let failed = self.is_primary()
                && consumed.is_empty()
                && st.primary_failed.is_some_and(|at| at == st.run_notices);
            let runs_work = crate::workflow_runs::any_running(&st)
                || (st.children_active() && crate::workflow_runs::open_runs(&st).next().is_some());
            if self.is_primary() && runs_work && (failed || self.turn_over(&ctx.tail)) {
                // Its turn is over but a workflow run works on: the session stays running.
                self.wait_on_runs(&st).await?;
                continue;
            }
            if failed {
                // The runs stopped working (paused): the failed turn idles the session as it
                // would have, at the budget if that paused them, unless calls wait on the client.
                let reason = if !st.pending.is_empty() {
                    StopReason::RequiresAction(vec![])
                } else if crate::workflow_runs::paused_by(&st, crate::workflow_runs::BY_BUDGET) {
                    StopReason::BudgetReached
                } else {
                    StopReason::RetriesExhausted
                };
                self.finish(reason, None).await?;
                continue;
            }
            if !self.is_primary()
                && st
                    .threads
                    .get(&self.scope.thread)
                    .is_some_and(|t| t.workflow_run.is_some())
            {
                if ctx.tail == Tail::User
                    && crate::workflow_runs::paused_thread(&st, &self.scope.thread)
                {
                    // Its run is paused: it stops here, before its next model request.
                    self.stop_for_pause().await?;
                    continue;
                }
                // This thread's end may render what the run's other threads returned.
                self.load_run_texts(&st).await?;
            }
            match ctx.tail {
                Tail::User => {
                    // Context compaction: a boundary (or a stop) first, then a fresh look.
                    if self.compact_if_needed(&mut consumed).await? {
                        continue;
                    }
                    let messages = self.view.transcript.lend();
                    self.call_model(messages, consumed).await?
                }
                Tail::Assistant {
                    stop_reason,
                    stop_details,
                    continuations,
                } => match ModelStop::parse(&stop_reason) {
                    stop if stop.continues()
                        && continuations <= self.inner.config.max_continuations =>
                    {
                        let mut messages = self.view.transcript.context().messages;
                        context::trim_for_continuation(&mut messages);
                        self.call_model(messages, vec![]).await?;
                    }
                    ModelStop::Refusal => self.finish(StopReason::Refusal, stop_details).await?,
                    ModelStop::ContextWindowExceeded => {
                        self.fail_turn(
                            "model_request_failed_error",
                            "the conversation no longer fits the model's context window",
                        )
                        .await?
                    }
                    _ => self.finish(StopReason::EndTurn, None).await?,
                },
                Tail::AwaitingTools(missing) => match self.next_tool_step(&missing, &st) {
                    ToolStep::Run(call) => Box::pin(self.run_tool(call)).await?,
                    ToolStep::Denied { id, message } => self.close_denied(id, message).await?,
                    ToolStep::HandToWorker(id) => self.hand_to_worker(id).await?,
                    ToolStep::AwaitDelegates => self.await_delegates(&st).await?,
                    ToolStep::Orphaned(call) => self.close_orphaned(call).await?,
                    // A run's threads work on while the primary waits on the client.
                    ToolStep::Wait if self.is_primary() && st.children_active() => {
                        self.await_delegates(&st).await?
                    }
                    ToolStep::Wait => {
                        self.finish(StopReason::RequiresAction(missing), None)
                            .await?
                    }
                },
                Tail::Empty => self.finish(StopReason::EndTurn, None).await?,
            }
        }
    }

    /// Whether this pass goes straight to a model request on the user's input: what the
    /// steps before it (interrupt, orphaned tool, retry, grading, queued input) and the
    /// compaction check would find nothing to do.
    fn issues_now(&self, st: &EngineState, rescheduling: bool) -> bool {
        self.is_primary()
            && !st.interrupt_of(&self.scope.thread)
            && st.running_tool_of(&self.scope.thread).is_none()
            && !rescheduling
            && crate::outcomes::evaluating(st).is_none()
            // No queued input to take first (a request that would take some closes the
            // span itself: see `send_request`).
            && st.queued == 0
            && self.view.transcript.outline().tail == Tail::User
            && !self.compaction_due()
    }

    /// Closes a request that was started for this loop and never issued, as an interrupted
    /// one is closed.
    pub(super) async fn close_unissued(&mut self, id: String) -> Result<(), RunError> {
        let end = server_event(
            kind::SPAN_END,
            events::span_end(&id, &ModelUsage::default(), false),
            &self.scope.thread,
            self.inner.now(),
        );
        self.commit(move |_, _| Ok(vec![end]), vec![]).await?;
        Ok(())
    }

    /// Awaits a store call, mapping a lost lease (fencing) to [`RunError::LeaseLost`]. Store
    /// calls are short and may hold the session's row lock, so they never pause for a lease
    /// renewal (which would wait on that same lock).
    pub async fn hold<T>(
        &self,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, RunError> {
        fut.await.map_err(store_err)
    }

    /// Awaits a long wait (a model request, a retry delay) while renewing the lease; fails
    /// when the lease is lost. The wait holds no database lock.
    pub async fn with_heartbeat<T>(&self, fut: impl Future<Output = T>) -> Result<T, RunError> {
        self.fast.waits.fetch_add(1, Ordering::Relaxed);
        let ttl = self.inner.config.lease_ttl;
        // The first beat is one period out: an interval's "immediate" first tick still waits
        // for a turn of the timer wheel, which would delay every wait by a millisecond.
        let period = ttl / 3;
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tokio::pin!(fut);
        loop {
            tokio::select! {
                v = &mut fut => return Ok(v),
                _ = beat.tick() => {
                    let until = self.inner.now() + ttl.as_micros() as i64;
                    match self.inner.store.renew_lease(&self.scope.sid, &self.inner.owner, until).await {
                        Ok(true) => {}
                        Ok(false) => return Err(RunError::LeaseLost),
                        Err(e) => tracing::warn!(session_id = %self.scope.sid, error = %e, "lease renewal failed; retrying"),
                    }
                }
            }
        }
    }

    /// Waits for `fut` unless an interrupt of this thread or shutdown comes first.
    pub async fn interruptible<T>(
        &self,
        fut: impl Future<Output = T>,
    ) -> Result<Waited<T>, RunError> {
        let work = self.with_heartbeat(fut);
        tokio::pin!(work);
        loop {
            let notified = self.handle.interrupted.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so no signal falls in between.
            notified.as_mut().enable();
            if self.handle.interrupt_count(&self.scope.thread) != self.view.seen_interrupts {
                return Ok(Waited::Interrupted);
            }
            tokio::select! {
                v = &mut work => return Ok(Waited::Done(v?)),
                _ = &mut notified => {}
                _ = self.inner.shutdown.cancelled() => return Err(RunError::Shutdown),
            }
        }
    }

    /// Reads this thread's events appended since the last look and adds them to the
    /// transcript.
    async fn refresh(&mut self) -> Result<(), RunError> {
        let mut fresh = Vec::new();
        loop {
            let batch = self
                .hold(self.inner.store.events_after(
                    &self.scope.sid,
                    self.view.last_seq,
                    context::LOOP_KINDS,
                    1000,
                ))
                .await?;
            let n = batch.len();
            for e in batch {
                self.view.last_seq = e.seq;
                if self.is_mine(&e) {
                    fresh.push(e);
                }
            }
            if n < 1000 {
                break;
            }
        }
        self.absorb(fresh);
        Ok(())
    }

    /// Whether an event of the log belongs to this thread.
    pub(super) fn is_mine(&self, e: &EventRecord) -> bool {
        match e.thread_id.as_deref() {
            None => self.is_primary(),
            Some(t) => t == self.scope.thread,
        }
    }

    /// Adds this thread's freshly read events to the transcript.
    fn absorb(&mut self, mut fresh: Vec<EventRecord>) {
        // Input consumed before these events were read sits after everything logged when it
        // was consumed, all of which has now been read.
        for e in context::in_order(&fresh) {
            self.view.transcript.apply(e);
            self.fast.known_bytes += e.heap_size();
        }
        let boundary = trim::last_boundary(&fresh);
        self.view.events.append(&mut fresh);
        // Past a compaction boundary the transcript no longer needs what came before it,
        // and the look-ups need only what `engine::trim` keeps.
        if let Some(b) = boundary
            && !trim::before_boundary(&mut self.view.events, b).is_empty()
        {
            self.fast.known_bytes = self.view.events.iter().map(HeapSize::heap_size).sum();
        }
    }

    /// Back to running after a retry delay.
    pub async fn set_running(&mut self) -> Result<(), RunError> {
        let (thread, child) = (self.scope.thread.clone(), self.child_name());
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                let now = clock.now();
                Ok(vec![match child {
                    None => {
                        set_status(rec, SessionStatus::Running, now);
                        server_event(kind::STATUS_RUNNING, json!({}), &thread, now)
                    }
                    Some(name) => {
                        if let Some(t) = st.threads.get_mut(&thread) {
                            t.set_status(ThreadStatus::Running, now);
                        }
                        server_event(
                            kind::THREAD_STATUS_RUNNING,
                            events::thread_status(&thread, &name, None),
                            &thread,
                            now,
                        )
                    }
                }])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// The delegate's name; None on the primary thread.
    pub fn child_name(&self) -> Option<String> {
        match &self.scope.role {
            Role::Primary => None,
            Role::Child { name } => Some(name.clone()),
        }
    }

    /// Takes queued input into the local transcript as consumed at the current log position
    /// (the store records the same position when the consuming transaction commits).
    fn take_queued(&mut self) -> Vec<String> {
        let now = self.inner.now();
        let position = json!({ "after_seq": self.view.last_seq });
        let mut ids = Vec::new();
        for e in self.view.events.iter_mut().filter(|e| {
            e.processed_at.is_none()
                && (e.kind == kind::USER_MESSAGE || e.kind == kind::SYSTEM_MESSAGE)
        }) {
            e.processed_at = Some(now);
            e.internal = Some(position.clone());
            self.view.transcript.apply(e);
            ids.push(e.id.clone());
        }
        self.fast.consumed_here |= !ids.is_empty();
        ids
    }

    /// Records queued input as consumed without a model request.
    pub async fn consume(&mut self, ids: Vec<String>) -> Result<(), RunError> {
        if ids.is_empty() {
            return Ok(());
        }
        let n = ids.len() as u32;
        self.commit(
            move |_, st| {
                st.queued = st.queued.saturating_sub(n);
                Ok(vec![])
            },
            ids,
        )
        .await?;
        Ok(())
    }

    /// This runner's lease, for decisions that keep the session active.
    pub fn grant(&self) -> LeaseGrant {
        LeaseGrant {
            owner: self.inner.owner.clone(),
            until: self.inner.now() + self.inner.config.lease_ttl.as_micros() as i64,
        }
    }
}

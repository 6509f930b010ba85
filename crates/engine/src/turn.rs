//! The agent loop of one thread, driven by the model's `stop_reason`. The
//! primary thread and every delegate thread run this same loop, each with its own agent,
//! history and permissions (DESIGN.md principle 5).
//!
//! Every iteration re-derives the next step from the log (plus the row's cached state), so a
//! runner that replaces a dead one continues exactly where the log says work stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use tokio::sync::{Notify, mpsc};

use super::commit::Carried;
use super::context::{self, Tail, Transcript};
use super::delegation::Roster;
use super::heap_size::HeapSize;
use super::history::Known;
use super::intake::server_event;
use super::shared_agent::SharedAgent;
use super::state::{EngineState, LeaseGrant, ThreadStatus, set_status, status_of};
use super::tool_step::ToolStep;
use super::trim;
use super::{Inner, RunnerHandle};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::events::{self, StopReason, kind};
use mast_domain::session::{ModelUsage, SessionBody, SessionStatus};
use mast_models::ModelStop;
use mast_sandbox::SessionTools;
use mast_sandbox::egress::EgressPolicy;
use mast_store::{EventRecord, SessionRecord, StoreError, Writer};

/// Why a runner stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("lease lost to another owner")]
    LeaseLost,
    #[error("session no longer exists")]
    Gone,
    #[error("shutting down")]
    Shutdown,
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub(super) fn store_err(e: StoreError) -> RunError {
    match e {
        StoreError::Fenced(_) => RunError::LeaseLost,
        e => RunError::Store(e),
    }
}

/// How a drive ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The session went idle and the transaction that idled it released the lease.
    Released,
    /// There was no work (the session or thread was not active); the lease is still held.
    NoWork,
}

/// What ended a wait on the model or a retry delay.
pub(super) enum Waited<T> {
    Done(T),
    Interrupted,
}

/// Which thread a loop drives.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Role {
    /// The session's own thread: its turn is the session's.
    Primary,
    /// A delegate (or advisor) thread, answering its parent.
    Child { name: String },
}

/// Signals between the loops of one session's runner.
pub(super) struct Crew {
    /// Delegate threads whose loops should run (the supervisor starts each once).
    pub spawn: mpsc::UnboundedSender<String>,
    /// A delegate's loop ended: the primary re-evaluates what it waits for.
    pub changed: Notify,
    /// The session's MCP connections, shared by its threads, closed when the runner ends.
    pub mcp: super::mcp::McpSet,
}

pub(super) struct Loop<'a> {
    pub inner: &'a Inner,
    pub handle: &'a RunnerHandle,
    pub crew: &'a Crew,
    pub sid: String,
    pub writer: Writer,
    pub body: std::sync::Arc<SessionBody>,
    /// The agent this thread runs.
    pub agent: SharedAgent,
    pub thread: String,
    pub primary: String,
    pub role: Role,
    /// Whom the primary thread may delegate to.
    pub roster: Option<Roster>,
    /// This thread's events, in sequence order, from its last compaction boundary on (and
    /// the few before it `engine::trim` keeps).
    pub events: Vec<EventRecord>,
    pub last_seq: i64,
    /// `events` folded into the model context, extended as events arrive.
    pub transcript: Transcript,
    /// The heap of `events`' contents (`engine::heap_size`), for the history cache's bound.
    pub known_bytes: usize,
    /// This loop consumed queued input (so what it knows is not kept; see `engine::history`).
    pub consumed_here: bool,
    pub requests: u32,
    pub usage_at_start: Option<String>,
    /// The last commit handed the lease back (the session went idle).
    pub released: bool,
    /// The handle's interrupt count for this thread before the row was last read.
    pub seen_interrupts: u64,
    /// The row the last commit returned, when that commit's events were the only ones since
    /// this loop last read the log: the next iteration starts from it instead of reading the
    /// row and the log again (see [`Carried`]).
    pub carried: Option<Carried>,
    /// Long waits begun so far; a carried row is stale once a wait follows its commit.
    pub waits: AtomicU64,
    /// The row as this loop last read or committed it: the next commit decides on it and
    /// writes in one round trip unless the row has moved on since (`SessionTransactions::transact_from`).
    pub expected: Option<SessionRecord>,
    /// A `span.model_request_start` the transaction that woke the runner logged for this
    /// (primary) loop to issue (`engine::fast_start`); looked at by the first pass only.
    pub armed: Option<String>,
    /// That span, once the pass found it open and about to call the model: the request
    /// issues it instead of starting one.
    pub prestarted: Option<String>,
    /// The environment's network policy (permission checks, web tools).
    pub egress: EgressPolicy,
    /// Sandbox tools are run by the user's workers, not here (`self_hosted` environments).
    pub self_hosted: bool,
    /// The session's built-in tools, set up when a call first runs.
    pub tools: Option<Arc<SessionTools>>,
    /// `session.error` bodies of repositories that could not be cloned, not reported yet.
    pub repo_errors: Vec<serde_json::Value>,
    /// The MCP tools offered in this thread's last model request.
    pub mcp_offer: super::mcp::Offer,
    /// The session's workspace and environment, for the hooks' scopes.
    pub workspace_id: String,
    pub environment_id: String,
}

impl<'a> Loop<'a> {
    /// A loop for `thread` running `agent`, from the row `rec` read after the handle's
    /// interrupt count for `thread` was `seen_interrupts`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        inner: &'a Inner,
        handle: &'a RunnerHandle,
        crew: &'a Crew,
        rec: &SessionRecord,
        seen_interrupts: u64,
        thread: String,
        agent: SharedAgent,
        role: Role,
    ) -> Result<Self, RunError> {
        let body = inner.bodies.get(&rec.id, &rec.body)?;
        // What an earlier loop of this thread left (see `engine::history`); a log shorter
        // than it (a store restored from a backup) means it is not this log's.
        let known = inner
            .history
            .take(&rec.id, &thread)
            .filter(|k| k.last_seq <= rec.last_seq)
            .unwrap_or_default();
        let roster = match role {
            Role::Primary => Roster::of(&agent).filter(|r| !r.is_empty()),
            Role::Child { .. } => None,
        };
        Ok(Loop {
            inner,
            handle,
            crew,
            sid: rec.id.clone(),
            writer: Writer::Runner {
                owner: inner.owner.clone(),
            },
            primary: body.primary_thread_id.clone(),
            egress: EgressPolicy::of(&body.environment),
            self_hosted: matches!(body.environment, EnvironmentConfig::SelfHosted),
            body,
            agent,
            seen_interrupts,
            thread,
            role,
            roster,
            events: known.events,
            last_seq: known.last_seq,
            transcript: known.transcript,
            known_bytes: known.bytes,
            consumed_here: false,
            requests: 0,
            usage_at_start: None,
            released: false,
            carried: None,
            waits: AtomicU64::new(0),
            expected: None,
            armed: None,
            prestarted: None,
            tools: None,
            repo_errors: vec![],
            mcp_offer: Default::default(),
            workspace_id: rec.workspace_id.clone(),
            environment_id: rec.environment_id.clone(),
        })
    }

    fn is_primary(&self) -> bool {
        self.role == Role::Primary
    }

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
        if ended.is_ok() && !self.consumed_here {
            // What the last commit wrote (the turn's end, usually) is known: the next loop
            // need not read it again.
            if let Some(c) = self.carried.take() {
                self.last_seq = c.last_seq;
                self.absorb(c.fresh);
            }
            let mut known = Known {
                events: std::mem::take(&mut self.events),
                last_seq: self.last_seq,
                transcript: std::mem::take(&mut self.transcript),
                bytes: self.known_bytes,
                size: 0,
            };
            known.size = known.heap_size();
            self.inner.history.put(&self.sid, &self.thread, known);
        }
        ended
    }

    async fn drive(&mut self, first: Option<SessionRecord>) -> Result<Ended, RunError> {
        let mut first = first;
        loop {
            if self.inner.shutdown.is_cancelled() {
                return Err(RunError::Shutdown);
            }
            if self.released {
                return Ok(Ended::Released);
            }
            // What the last commit wrote is read whatever happened since; its row is only
            // current if no wait followed it.
            let carried = self.carried.take().and_then(|c| {
                self.last_seq = c.last_seq;
                self.absorb(c.fresh);
                (c.waits == self.waits.load(Ordering::Relaxed)).then_some((c.rec, c.interrupts))
            });
            let mut caught_up = false;
            let rec = match (first.take(), carried) {
                (Some(rec), _) => rec,
                (None, Some((rec, interrupts))) => {
                    self.seen_interrupts = interrupts;
                    caught_up = true;
                    rec
                }
                (None, None) => {
                    self.seen_interrupts = self.handle.interrupt_count(&self.thread);
                    let rec = self
                        .hold(self.inner.store.get_session_by_id(&self.sid))
                        .await?
                        .ok_or(RunError::Gone)?;
                    self.handle.saw_seq(rec.last_seq);
                    rec
                }
            };
            let st = EngineState::of(&rec)?;
            let rescheduling = match &self.role {
                Role::Primary => {
                    let status = status_of(&rec);
                    if !status.is_active() {
                        return Ok(Ended::NoWork);
                    }
                    if self.usage_at_start.is_none() {
                        self.usage_at_start = Some(rec.usage.clone());
                    }
                    status == SessionStatus::Rescheduling
                }
                Role::Child { .. } => match st.threads.get(&self.thread) {
                    Some(t) if t.status.is_active() => t.status == ThreadStatus::Rescheduling,
                    _ => return Ok(Ended::NoWork),
                },
            };
            self.expected = self.inner.store.decides_on_held_rows().then_some(rec);
            if !caught_up {
                self.refresh().await?;
            }
            // A request the waking transaction started (`engine::fast_start`) is issued by
            // this pass when the log shows it open and the pass calls the model anyway; any
            // other step closes it first, as an interrupted request is closed.
            if let Some(id) = self.armed.take()
                && self.transcript.started() == Some(id.as_str())
            {
                if self.issues_now(&st, rescheduling) {
                    self.prestarted = Some(id);
                } else {
                    self.close_unissued(id).await?;
                    continue;
                }
            }
            if st.interrupt_of(&self.thread) {
                self.interrupt(&st).await?;
                continue;
            }
            if let Some(id) = st.running_tool_of(&self.thread) {
                // The process stopped while this call ran: its effects are unknown, so it is
                // closed rather than run again.
                self.close_interrupted_tool(id).await?;
                continue;
            }
            // The messages are only lent to a model request (or copied to continue one).
            let ctx = self.transcript.outline();
            if let Some(start) = ctx
                .dangling_request
                .clone()
                .filter(|s| self.prestarted.as_ref() != Some(s))
            {
                // The process died during this request: close its span and issue it again.
                let end = server_event(
                    kind::SPAN_END,
                    events::span_end(&start, &ModelUsage::default(), true),
                    &self.thread,
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
                && let Some(o) = super::outcomes::evaluating(&st)
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
                    ctx = self.transcript.outline();
                }
            }
            if !consumed.is_empty() && ctx.tail != Tail::User {
                self.consume(consumed).await?;
                continue;
            }
            if self.is_primary()
                && matches!(ctx.tail, Tail::AwaitingTools(_))
                && super::budget::holds_primary(&st)
            {
                // A delegate it waits on stopped at the budget: the session idles there too.
                self.finish(StopReason::BudgetReached, None).await?;
                continue;
            }
            match ctx.tail {
                Tail::User => {
                    // Context compaction: a boundary (or a stop) first, then a fresh look.
                    if self.compact_if_needed(&mut consumed).await? {
                        continue;
                    }
                    let messages = self.transcript.lend();
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
                        let mut messages = self.transcript.context().messages;
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
            && !st.interrupt_of(&self.thread)
            && st.running_tool_of(&self.thread).is_none()
            && !rescheduling
            && super::outcomes::evaluating(st).is_none()
            // No queued input to take first (a request that would take some closes the
            // span itself: see `send_request`).
            && st.queued == 0
            && self.transcript.outline().tail == Tail::User
            && !self.compaction_due()
    }

    /// Closes a request that was started for this loop and never issued, as an interrupted
    /// one is closed.
    pub(super) async fn close_unissued(&mut self, id: String) -> Result<(), RunError> {
        let end = server_event(
            kind::SPAN_END,
            events::span_end(&id, &ModelUsage::default(), false),
            &self.thread,
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
        self.waits.fetch_add(1, Ordering::Relaxed);
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
                    match self.inner.store.renew_lease(&self.sid, &self.inner.owner, until).await {
                        Ok(true) => {}
                        Ok(false) => return Err(RunError::LeaseLost),
                        Err(e) => tracing::warn!(session_id = %self.sid, error = %e, "lease renewal failed; retrying"),
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
            if self.handle.interrupt_count(&self.thread) != self.seen_interrupts {
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
                    &self.sid,
                    self.last_seq,
                    context::LOOP_KINDS,
                    1000,
                ))
                .await?;
            let n = batch.len();
            for e in batch {
                self.last_seq = e.seq;
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
            Some(t) => t == self.thread,
        }
    }

    /// Adds this thread's freshly read events to the transcript.
    fn absorb(&mut self, mut fresh: Vec<EventRecord>) {
        // Input consumed before these events were read sits after everything logged when it
        // was consumed, all of which has now been read.
        for e in context::in_order(&fresh) {
            self.transcript.apply(e);
            self.known_bytes += e.heap_size();
        }
        let boundary = trim::last_boundary(&fresh);
        self.events.append(&mut fresh);
        // Past a compaction boundary the transcript no longer needs what came before it,
        // and the look-ups need only what `engine::trim` keeps.
        if let Some(b) = boundary
            && !trim::before_boundary(&mut self.events, b).is_empty()
        {
            self.known_bytes = self.events.iter().map(HeapSize::heap_size).sum();
        }
    }

    /// Back to running after a retry delay.
    pub async fn set_running(&mut self) -> Result<(), RunError> {
        let (thread, child) = (self.thread.clone(), self.child_name());
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
        match &self.role {
            Role::Primary => None,
            Role::Child { name } => Some(name.clone()),
        }
    }

    /// Takes queued input into the local transcript as consumed at the current log position
    /// (the store records the same position when the consuming transaction commits).
    fn take_queued(&mut self) -> Vec<String> {
        let now = self.inner.now();
        let position = json!({ "after_seq": self.last_seq });
        let mut ids = Vec::new();
        for e in self.events.iter_mut().filter(|e| {
            e.processed_at.is_none()
                && (e.kind == kind::USER_MESSAGE || e.kind == kind::SYSTEM_MESSAGE)
        }) {
            e.processed_at = Some(now);
            e.internal = Some(position.clone());
            self.transcript.apply(e);
            ids.push(e.id.clone());
        }
        self.consumed_here |= !ids.is_empty();
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

//! The agent loop of one session, driven by the model's `stop_reason` (API.md §5.4).
//!
//! Every iteration re-derives the next step from the log (plus the row's cached state), so a
//! runner that replaces a dead one continues exactly where the log says work stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::context::{self, Tail};
use super::intake::server_event;
use super::permissions;
use super::state::{
    EngineState, LeaseGrant, Pending, PendingKind, grant_lease, set_status, status_of,
    work_item_for,
};
use super::{Inner, RunnerHandle};
use crate::domain::content;
use crate::domain::environment::EnvironmentConfig;
use crate::domain::events::{self, StopReason, kind};
use crate::domain::ids::new_id;
use crate::domain::model_config::Speed;
use crate::domain::session::{ModelUsage, SessionBody, SessionStatus, SessionUsage};
use crate::domain::time;
use crate::domain::tools::Tool;
use crate::models::{Delta, Message, ModelError, ModelRequest, ModelResponse, ToolDef};
use crate::store::{EventRecord, NewEvent, SessionRecord, StoreError, TxnOutput, Writer};
use crate::tools::SessionTools;
use crate::tools::egress::EgressPolicy;

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

fn store_err(e: StoreError) -> RunError {
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
    /// There was no work (the session was not active); the lease is still held.
    NoWork,
}

/// What ended a wait on the model or a retry delay.
enum Waited<T> {
    Done(T),
    Interrupted,
}

struct Loop<'a> {
    inner: &'a Inner,
    handle: &'a RunnerHandle,
    sid: String,
    writer: Writer,
    body: SessionBody,
    primary: String,
    /// The primary thread's events, in sequence order.
    events: Vec<EventRecord>,
    last_seq: i64,
    requests: u32,
    usage_at_start: Option<String>,
    /// The last commit handed the lease back (the session went idle).
    released: bool,
    /// The handle's interrupt count before the session row was last read.
    seen_interrupts: u64,
    /// The environment's network policy (permission checks, web tools).
    egress: EgressPolicy,
    /// Sandbox tools are run by the user's workers, not here (`self_hosted` environments).
    self_hosted: bool,
    /// The session's built-in tools, set up when a call first runs.
    tools: Option<Arc<SessionTools>>,
}

/// A built-in tool call the loop may act on.
struct ToolCall {
    id: String,
    name: String,
    input: Value,
}

/// What to do next about tool calls without results.
enum ToolStep {
    Run(ToolCall),
    /// The user denied it: close it with their message.
    Denied {
        id: String,
        message: Option<String>,
    },
    /// Confirmed in a self-hosted environment: now it waits for the worker's result.
    HandToWorker(String),
    Wait,
}

/// Tools a self-hosted environment's workers run (web tools stay on the server).
const SANDBOX_TOOLS: &[&str] = &["bash", "read", "write", "edit", "glob", "grep"];

/// Drives the session until it has no work (idle or terminated), the lease is lost, or the
/// process shuts down.
pub(super) async fn drive(
    inner: &Inner,
    handle: &RunnerHandle,
    rec: SessionRecord,
) -> Result<Ended, RunError> {
    let sid = rec.id.clone();
    let sid = sid.as_str();
    let body: SessionBody = serde_json::from_str(&rec.body).map_err(StoreError::from)?;
    let body_environment = body.environment.clone();
    let mut lp = Loop {
        inner,
        handle,
        sid: sid.to_string(),
        writer: Writer::Runner {
            owner: inner.owner.clone(),
        },
        primary: body.primary_thread_id.clone(),
        body,
        events: Vec::new(),
        last_seq: 0,
        requests: 0,
        usage_at_start: None,
        released: false,
        seen_interrupts: handle.interrupts.load(Ordering::SeqCst),
        egress: EgressPolicy::of(&body_environment),
        self_hosted: matches!(body_environment, EnvironmentConfig::SelfHosted),
        tools: None,
    };
    let mut first = Some(rec);
    loop {
        if inner.shutdown.is_cancelled() {
            return Err(RunError::Shutdown);
        }
        if lp.released {
            return Ok(Ended::Released);
        }
        let rec = match first.take() {
            Some(rec) => rec,
            None => {
                lp.seen_interrupts = handle.interrupts.load(Ordering::SeqCst);
                lp.hold(inner.store.get_session_by_id(sid))
                    .await?
                    .ok_or(RunError::Gone)?
            }
        };
        let status = status_of(&rec);
        if !status.is_active() {
            return Ok(Ended::NoWork);
        }
        if lp.usage_at_start.is_none() {
            lp.usage_at_start = Some(rec.usage.clone());
        }
        let st = EngineState::of(&rec)?;
        lp.refresh().await?;
        if st.interrupt {
            lp.interrupt().await?;
            continue;
        }
        if let Some(id) = st.running_tool.clone() {
            // The process stopped while this call ran: its effects are unknown, so it is
            // closed rather than run again.
            lp.close_interrupted_tool(id).await?;
            continue;
        }
        let ctx = context::build(&lp.events);
        if let Some(start) = ctx.dangling_request {
            // The process died during this request: close its span and issue it again.
            let end = server_event(
                kind::SPAN_END,
                events::span_end(&start, &ModelUsage::default(), true),
                &lp.primary,
                time::now(),
            );
            lp.commit(move |_, _| Ok(vec![end]), vec![]).await?;
            continue;
        }
        if status == SessionStatus::Rescheduling {
            lp.set_running().await?;
            continue;
        }
        // Queued input joins the next model request; it is marked consumed in the same
        // transaction that starts the request.
        let mut ctx = ctx;
        let mut consumed = Vec::new();
        if !matches!(ctx.tail, Tail::AwaitingTools(_)) {
            consumed = lp.take_queued();
            if !consumed.is_empty() {
                ctx = context::build(&lp.events);
            }
        }
        if !consumed.is_empty() && ctx.tail != Tail::User {
            lp.consume(consumed).await?;
            continue;
        }
        match ctx.tail {
            Tail::User => lp.call_model(ctx.messages, consumed).await?,
            Tail::Assistant {
                stop_reason,
                stop_details,
                continuations,
            } => match stop_reason.as_str() {
                "max_tokens" | "pause_turn" if continuations <= inner.config.max_continuations => {
                    let mut messages = ctx.messages;
                    context::trim_for_continuation(&mut messages);
                    lp.call_model(messages, vec![]).await?;
                }
                "refusal" => lp.finish(StopReason::Refusal, stop_details).await?,
                "model_context_window_exceeded" => {
                    lp.fail_turn(
                        "model_request_failed_error",
                        "the conversation no longer fits the model's context window",
                    )
                    .await?
                }
                _ => lp.finish(StopReason::EndTurn, None).await?,
            },
            Tail::AwaitingTools(missing) => match lp.next_tool_step(&missing, &st) {
                ToolStep::Run(call) => lp.run_tool(call).await?,
                ToolStep::Denied { id, message } => lp.close_denied(id, message).await?,
                ToolStep::HandToWorker(id) => lp.hand_to_worker(id).await?,
                ToolStep::Wait => lp.finish(StopReason::RequiresAction(missing), None).await?,
            },
            Tail::Empty => lp.finish(StopReason::EndTurn, None).await?,
        }
    }
}

impl Loop<'_> {
    /// Awaits a store call, mapping a lost lease (fencing) to [`RunError::LeaseLost`]. Store
    /// calls are short and may hold the session's row lock, so they never pause for a lease
    /// renewal (which would wait on that same lock).
    async fn hold<T>(
        &self,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, RunError> {
        fut.await.map_err(store_err)
    }

    /// Awaits a long wait (a model request, a retry delay) while renewing the lease; fails
    /// when the lease is lost. The wait holds no database lock.
    async fn with_heartbeat<T>(&self, fut: impl Future<Output = T>) -> Result<T, RunError> {
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
                    let until = time::now() + ttl.as_micros() as i64;
                    match self.inner.store.renew_lease(&self.sid, &self.inner.owner, until).await {
                        Ok(true) => {}
                        Ok(false) => return Err(RunError::LeaseLost),
                        Err(e) => tracing::warn!(session_id = %self.sid, error = %e, "lease renewal failed; retrying"),
                    }
                }
            }
        }
    }

    /// Waits for `fut` unless an interrupt or shutdown comes first.
    async fn interruptible<T>(&self, fut: impl Future<Output = T>) -> Result<Waited<T>, RunError> {
        let work = self.with_heartbeat(fut);
        tokio::pin!(work);
        loop {
            let notified = self.handle.interrupted.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so no signal falls in between.
            notified.as_mut().enable();
            if self.handle.interrupts.load(Ordering::SeqCst) != self.seen_interrupts {
                return Ok(Waited::Interrupted);
            }
            tokio::select! {
                v = &mut work => return Ok(Waited::Done(v?)),
                _ = &mut notified => {}
                _ = self.inner.shutdown.cancelled() => return Err(RunError::Shutdown),
            }
        }
    }

    /// Reads events appended since the last look.
    async fn refresh(&mut self) -> Result<(), RunError> {
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
                if e.thread_id.as_deref().is_none_or(|t| t == self.primary) {
                    self.events.push(e);
                }
            }
            if n < 1000 {
                return Ok(());
            }
        }
    }

    /// Runs a decision against the locked row, appends its events, publishes them.
    async fn commit<F>(
        &mut self,
        f: F,
        mark_processed: Vec<String>,
    ) -> Result<Vec<EventRecord>, RunError>
    where
        F: FnOnce(&mut SessionRecord, &mut EngineState) -> Result<Vec<NewEvent>, StoreError>
            + Send
            + 'static,
    {
        let self_hosted = self.self_hosted;
        let txn = Box::new(move |rec: &mut SessionRecord| {
            let mut st = EngineState::of(rec)?;
            let events = f(rec, &mut st)?;
            let flush_queued = std::mem::take(&mut st.discard_queued);
            // Whenever the session waits on a worker, some work item must be live for one
            // to pick up, even if the last worker let its item go a moment ago.
            let ensure_work =
                (self_hosted && st.awaits_worker()).then(|| work_item_for(rec, time::now()));
            st.store(rec)?;
            Ok(TxnOutput {
                events,
                mark_processed,
                ensure_work,
                flush_queued,
            })
        });
        self.run_txn(txn).await
    }

    /// Runs a runner transaction, publishes its events and notes a lease hand-back.
    async fn run_txn(
        &mut self,
        txn: crate::store::SessionTxn,
    ) -> Result<Vec<EventRecord>, RunError> {
        let (rec, appended) = self
            .hold(self.inner.store.transact(&self.sid, &self.writer, txn))
            .await?
            .ok_or(RunError::Gone)?;
        self.released = rec.lease_owner.as_deref() != Some(self.inner.owner.as_str());
        self.inner.hub.publish(&self.sid, &appended);
        if self.self_hosted && EngineState::of(&rec).is_ok_and(|st| st.awaits_worker()) {
            self.inner.hub.work.queued(&rec.environment_id);
        }
        Ok(appended)
    }

    async fn set_running(&mut self) -> Result<(), RunError> {
        let primary = self.primary.clone();
        self.commit(
            move |rec, _| {
                let now = time::now();
                set_status(rec, SessionStatus::Running, now);
                Ok(vec![server_event(
                    kind::STATUS_RUNNING,
                    json!({}),
                    &primary,
                    now,
                )])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Takes queued input into the local transcript as consumed at the current log position
    /// (the store records the same position when the consuming transaction commits).
    fn take_queued(&mut self) -> Vec<String> {
        let now = time::now();
        let position = json!({ "after_seq": self.last_seq });
        let mut ids = Vec::new();
        for e in self.events.iter_mut().filter(|e| {
            e.processed_at.is_none()
                && (e.kind == kind::USER_MESSAGE || e.kind == kind::SYSTEM_MESSAGE)
        }) {
            e.processed_at = Some(now);
            e.internal = Some(position.clone());
            ids.push(e.id.clone());
        }
        ids
    }

    /// Records queued input as consumed without a model request.
    async fn consume(&mut self, ids: Vec<String>) -> Result<(), RunError> {
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

    fn custom_tools(&self) -> Vec<ToolDef> {
        self.body
            .agent
            .tools
            .iter()
            .filter_map(|t| match t {
                Tool::Custom(c) => Some(ToolDef {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    input_schema: Value::Object(c.input_schema.0.clone()),
                }),
                _ => None,
            })
            .collect()
    }

    /// Custom tools and the enabled built-in tools.
    fn offered_tools(&self) -> Vec<ToolDef> {
        let mut tools = self.custom_tools();
        tools.extend(crate::tools::definitions(&self.body.agent.tools));
        tools
    }

    fn request(&self, messages: Vec<Message>) -> ModelRequest {
        let model = &self.body.agent.model;
        ModelRequest {
            model: model.id.clone(),
            system: self.body.agent.system.clone(),
            messages,
            tools: self.offered_tools(),
            max_tokens: self.inner.config.max_tokens,
            effort: model.effort.map(|e| e.level),
            fast: model.speed == Some(Speed::Fast),
            inference_geo: model.inference_geo.clone(),
        }
    }

    /// One model request with retries, turned into events.
    async fn call_model(
        &mut self,
        messages: Vec<Message>,
        mut consumed: Vec<String>,
    ) -> Result<(), RunError> {
        if self.requests >= self.inner.config.max_requests_per_turn {
            self.consume(std::mem::take(&mut consumed)).await?;
            let msg = format!(
                "the turn made {} model requests, the most allowed; send a new message to continue",
                self.requests
            );
            return self.fail_turn("tool_use_limit_reached_error", &msg).await;
        }
        self.requests += 1;
        let mut request = self.request(messages);
        let client = match self.inner.models.route(&request.model) {
            Ok(route) => {
                request.model = route.upstream_model;
                route.client
            }
            Err(msg) => {
                self.consume(consumed).await?;
                return self.fail_turn("model_request_failed_error", &msg).await;
            }
        };
        let mut attempt = 0u32;
        loop {
            let start = server_event(kind::SPAN_START, json!({}), &self.primary, time::now());
            let start_id = start.id.clone();
            let consumed = std::mem::take(&mut consumed);
            let n = consumed.len() as u32;
            self.commit(
                move |_, st| {
                    st.queued = st.queued.saturating_sub(n);
                    Ok(vec![start])
                },
                consumed,
            )
            .await?;

            let message_id = new_id("sevt");
            let thinking_id = new_id("sevt");
            let outcome = {
                let hub = self.inner.hub.clone();
                let (sid, thread) = (self.sid.clone(), self.primary.clone());
                let (mid, tid) = (message_id.clone(), thinking_id.clone());
                let started_text = AtomicBool::new(false);
                let sink =
                    move |d: Delta| preview(&hub, &sid, &thread, &mid, &tid, &started_text, d);
                let client = client.clone();
                let request = &request;
                self.interruptible(async move { client.complete(request, &sink).await })
                    .await?
            };
            match outcome {
                Waited::Interrupted => {
                    let end = server_event(
                        kind::SPAN_END,
                        events::span_end(&start_id, &ModelUsage::default(), false),
                        &self.primary,
                        time::now(),
                    );
                    self.commit(move |_, _| Ok(vec![end]), vec![]).await?;
                    return Ok(());
                }
                Waited::Done(Ok(resp)) => {
                    return self
                        .record_response(resp, &start_id, message_id, thinking_id)
                        .await;
                }
                Waited::Done(Err(err)) => {
                    attempt += 1;
                    let retry = err.retryable && attempt <= self.inner.config.max_retries;
                    self.record_failure(&err, &start_id, retry).await?;
                    if !retry {
                        return Ok(());
                    }
                    let delay = backoff(&self.inner.config, attempt, &err);
                    match self.interruptible(tokio::time::sleep(delay)).await? {
                        Waited::Interrupted => return Ok(()),
                        Waited::Done(()) => self.set_running().await?,
                    }
                }
            }
        }
    }

    async fn record_failure(
        &mut self,
        err: &ModelError,
        start_id: &str,
        retrying: bool,
    ) -> Result<(), RunError> {
        let primary = self.primary.clone();
        let start_id = start_id.to_string();
        let kind_name = err.kind.session_error_type();
        let message = err.message.clone();
        tracing::warn!(session_id = %self.sid, error = %message, retrying, "model request failed");
        self.commit(
            move |rec, st| {
                let now = time::now();
                let mut out = vec![server_event(
                    kind::SPAN_END,
                    events::span_end(&start_id, &ModelUsage::default(), true),
                    &primary,
                    now,
                )];
                if retrying {
                    out.push(server_event(
                        kind::SESSION_ERROR,
                        events::session_error(kind_name, &message, "retrying"),
                        &primary,
                        now,
                    ));
                    out.push(server_event(
                        kind::STATUS_RESCHEDULED,
                        json!({}),
                        &primary,
                        now,
                    ));
                    set_status(rec, SessionStatus::Rescheduling, now);
                } else {
                    out.extend(exhausted(rec, st, &primary, kind_name, &message, now));
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Ends the turn with an error the model cannot recover from by itself.
    async fn fail_turn(&mut self, error_type: &'static str, message: &str) -> Result<(), RunError> {
        let primary = self.primary.clone();
        let message = message.to_string();
        self.commit(
            move |rec, st| {
                Ok(exhausted(
                    rec,
                    st,
                    &primary,
                    error_type,
                    &message,
                    time::now(),
                ))
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Turns a model response into events: thinking, message, tool uses, the span's end (which
    /// privately keeps the exact content for rebuilding context), and results for calls to
    /// tools the agent does not have.
    async fn record_response(
        &mut self,
        resp: ModelResponse,
        start_id: &str,
        message_id: String,
        thinking_id: String,
    ) -> Result<(), RunError> {
        let now = time::now();
        let custom: Vec<String> = self.custom_tools().into_iter().map(|t| t.name).collect();
        let mut out = Vec::new();
        let mut pending = Vec::new();
        let mut refused_calls = Vec::new();
        let mut runs_here = false;
        let mut content = Vec::with_capacity(resp.content.len());
        if resp.content.iter().any(|b| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("thinking" | "redacted_thinking")
            )
        }) {
            let mut e = server_event(kind::AGENT_THINKING, json!({}), &self.primary, now);
            e.id = thinking_id;
            out.push(e);
        }
        let texts: Vec<Value> = resp
            .content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| content::text(b.get("text").and_then(Value::as_str).unwrap_or("")))
            .collect();
        if !texts.is_empty() {
            let mut e = server_event(
                kind::AGENT_MESSAGE,
                json!({ "content": texts }),
                &self.primary,
                now,
            );
            e.id = message_id;
            out.push(e);
        }
        let cut_short = resp.stop_reason == "max_tokens";
        for block in resp.content {
            if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                content.push(block);
                continue;
            }
            if cut_short {
                // Its input may be incomplete; the continuation will call it again.
                continue;
            }
            let name = block
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
            let id = new_id("sevt");
            let mut b = block.clone();
            b["id"] = json!(id);
            content.push(b);
            if custom.contains(&name) {
                let mut e = server_event(
                    kind::AGENT_CUSTOM_TOOL_USE,
                    json!({ "name": name, "input": input }),
                    &self.primary,
                    now,
                );
                e.id = id.clone();
                out.push(e);
                pending.push(Pending {
                    id,
                    kind: PendingKind::Custom,
                    thread_id: self.primary.clone(),
                });
            } else if permissions::is_builtin(&self.body.agent.tools, &name) {
                // Policy is decided here, in code, before anything runs.
                let decision =
                    permissions::decide(&self.body.agent.tools, &name, &input, &self.egress);
                let mut body = json!({ "name": name, "input": input, "evaluated_permission": decision.label() });
                if let Some(ev) = decision.evaluation() {
                    body["evaluation"] = ev.clone();
                }
                let mut e = server_event(kind::AGENT_TOOL_USE, body, &self.primary, now);
                e.id = id.clone();
                out.push(e);
                match decision {
                    permissions::Decision::Deny { reason, .. } => refused_calls.push((
                        id,
                        format!("Permission denied: {reason}. The call did not run; choose another approach or ask the user."),
                    )),
                    permissions::Decision::Ask { .. } => pending.push(Pending {
                        id,
                        kind: PendingKind::Confirmation,
                        thread_id: self.primary.clone(),
                    }),
                    permissions::Decision::Allow { .. } if self.self_hosted && SANDBOX_TOOLS.contains(&name.as_str()) => {
                        pending.push(Pending { id, kind: PendingKind::ClientTool, thread_id: self.primary.clone() })
                    }
                    permissions::Decision::Allow { .. } => runs_here = true,
                }
            } else {
                let mut e = server_event(
                    kind::AGENT_TOOL_USE,
                    json!({ "name": name, "input": input, "evaluated_permission": "deny" }),
                    &self.primary,
                    now,
                );
                e.id = id.clone();
                out.push(e);
                let available: Vec<String> =
                    self.offered_tools().into_iter().map(|t| t.name).collect();
                let available = if available.is_empty() {
                    "none".to_string()
                } else {
                    available.join(", ")
                };
                refused_calls.push((
                    id,
                    format!("There is no tool named `{name}`. Available tools: {available}."),
                ));
            }
        }
        let mut end = server_event(
            kind::SPAN_END,
            events::span_end(start_id, &resp.usage, false),
            &self.primary,
            now,
        );
        end.internal = Some(
            json!({ "content": content, "stop_reason": resp.stop_reason, "stop_details": resp.stop_details }),
        );
        out.push(end);
        let refused_calls_pending = !refused_calls.is_empty();
        for (id, msg) in refused_calls {
            let mut e = server_event(
                kind::AGENT_TOOL_RESULT,
                events::tool_result(&id, vec![content::text(msg)], true),
                &self.primary,
                now,
            );
            e.answers = Some((id, "result"));
            out.push(e);
        }
        let usage = resp.usage;
        // When the response ends the turn by itself, the idle goes in the same transaction.
        // Calls answered right away or run here keep the turn going.
        let ends_turn = if !refused_calls_pending && !runs_here {
            match resp.stop_reason.as_str() {
                _ if !pending.is_empty() => Some((StopReason::RequiresAction(vec![]), None)),
                "end_turn" | "stop_sequence" => Some((StopReason::EndTurn, None)),
                "refusal" => Some((StopReason::Refusal, resp.stop_details.clone())),
                _ => None,
            }
        } else {
            None
        };
        let primary = self.primary.clone();
        let usage_at_start = self.usage_at_start.clone();
        self.commit(
            move |rec, st| {
                let mut total: SessionUsage = serde_json::from_str(&rec.usage).unwrap_or_default();
                total.add(&usage);
                rec.usage = serde_json::to_string(&total)?;
                st.pending.extend(pending);
                let mut out = out;
                if let Some((reason, details)) = ends_turn {
                    out.extend(try_end_turn(
                        rec,
                        st,
                        &primary,
                        reason,
                        details,
                        usage_at_start.as_deref(),
                    )?);
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Ends the turn unless, under the row lock, something says it is not over: queued input,
    /// an interrupt, or answers that arrived meanwhile.
    async fn finish(&mut self, reason: StopReason, details: Option<Value>) -> Result<(), RunError> {
        let primary = self.primary.clone();
        let usage_at_start = self.usage_at_start.clone();
        self.commit(
            move |rec, st| {
                try_end_turn(
                    rec,
                    st,
                    &primary,
                    reason,
                    details,
                    usage_at_start.as_deref(),
                )
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Acts on a recorded interrupt: closes every open call with an error result, flushes
    /// queued input and idles with `end_turn`.
    async fn interrupt(&mut self) -> Result<(), RunError> {
        let primary = self.primary.clone();
        let grant = self.grant();
        self.commit(
            move |rec, st| {
                let now = time::now();
                // The pending set under the lock is the authority: an answer that committed
                // meanwhile is not closed a second time.
                let mut out: Vec<NewEvent> = st
                    .pending
                    .drain(..)
                    .map(|p| closed_tool_call(&p.id, &primary, now))
                    .collect();
                if let Some(id) = st.running_tool.take() {
                    out.push(closed_tool_call(&id, &primary, now));
                }
                st.interrupt = false;
                out.extend(end_turn(rec, st, &primary, StopReason::EndTurn, None, now));
                out.extend(resume_if_queued(rec, st, &primary, Some(&grant), now));
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Which tool call without a result to act on next, given the row's pending set.
    fn next_tool_step(&self, missing: &[String], st: &EngineState) -> ToolStep {
        for id in missing {
            let Some(use_event) = self
                .events
                .iter()
                .find(|e| e.kind == kind::AGENT_TOOL_USE && &e.id == id)
            else {
                continue; // a custom tool: the client answers it
            };
            let name = use_event
                .body
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let input = use_event
                .body
                .get("input")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let call = ToolCall {
                id: id.clone(),
                name: name.clone(),
                input,
            };
            let for_worker = self.self_hosted && SANDBOX_TOOLS.contains(&name.as_str());
            match use_event
                .body
                .get("evaluated_permission")
                .and_then(Value::as_str)
            {
                Some("allow") if !for_worker => return ToolStep::Run(call),
                Some("ask") => {
                    let answer = self.events.iter().find(|e| {
                        e.kind == kind::USER_TOOL_CONFIRMATION
                            && e.body.get("tool_use_id").and_then(Value::as_str) == Some(id)
                    });
                    match answer.map(|a| {
                        (
                            a.body.get("result").and_then(Value::as_str) == Some("allow"),
                            a,
                        )
                    }) {
                        Some((true, _))
                            if for_worker && !st.pending.iter().any(|p| &p.id == id) =>
                        {
                            return ToolStep::HandToWorker(id.clone());
                        }
                        Some((true, _)) if for_worker => {}
                        Some((true, _)) => return ToolStep::Run(call),
                        Some((false, a)) => {
                            let message = a
                                .body
                                .get("deny_message")
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            return ToolStep::Denied {
                                id: id.clone(),
                                message,
                            };
                        }
                        None => {}
                    }
                }
                _ => {}
            }
        }
        ToolStep::Wait
    }

    /// The session's built-in tools (workspace created on first use).
    fn session_tools(&mut self) -> Result<Arc<SessionTools>, String> {
        if let Some(t) = &self.tools {
            return Ok(t.clone());
        }
        let t = self
            .inner
            .toolbox
            .for_session(&self.sid, &self.body.environment, &self.body.agent.tools)
            .map_err(|e| format!("the session's workspace could not be prepared: {e}"))?;
        let t = Arc::new(t);
        self.tools = Some(t.clone());
        Ok(t)
    }

    /// Runs an authorised built-in call and records its result. A marker in the row says it
    /// is running, so a crash in between closes it instead of running it twice.
    async fn run_tool(&mut self, call: ToolCall) -> Result<(), RunError> {
        let id = call.id.clone();
        self.commit(
            move |_, st| {
                st.running_tool = Some(id);
                Ok(vec![])
            },
            vec![],
        )
        .await?;
        let output = match self.session_tools() {
            Ok(tools) => {
                let (name, input) = (call.name.clone(), call.input.clone());
                match self
                    .interruptible(async move { tools.run(&name, &input).await })
                    .await?
                {
                    Waited::Done(out) => out,
                    // interrupt() closes the running call.
                    Waited::Interrupted => return Ok(()),
                }
            }
            Err(e) => crate::tools::ToolOutput::error(e),
        };
        let primary = self.primary.clone();
        self.commit(
            move |rec, st| {
                st.running_tool = None;
                if matches!(call.name.as_str(), "web_search" | "web_fetch") {
                    let mut usage: SessionUsage =
                        serde_json::from_str(&rec.usage).unwrap_or_default();
                    if call.name == "web_search" {
                        usage.server_tool_use.web_search_requests += 1;
                    } else {
                        usage.server_tool_use.web_fetch_requests += 1;
                    }
                    rec.usage = serde_json::to_string(&usage)?;
                }
                let mut e = server_event(
                    kind::AGENT_TOOL_RESULT,
                    events::tool_result(&call.id, output.content, output.is_error),
                    &primary,
                    time::now(),
                );
                e.answers = Some((call.id, "result"));
                Ok(vec![e])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Closes a call the user denied, passing their message to the model.
    async fn close_denied(&mut self, id: String, message: Option<String>) -> Result<(), RunError> {
        let primary = self.primary.clone();
        let text = match message {
            Some(m) => format!("The user denied this tool call: {m}"),
            None => "The user denied this tool call; it did not run.".to_string(),
        };
        self.commit(
            move |_, _| {
                let mut e = server_event(
                    kind::AGENT_TOOL_RESULT,
                    events::tool_result(&id, vec![content::text(text)], true),
                    &primary,
                    time::now(),
                );
                e.answers = Some((id, "result"));
                Ok(vec![e])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// A confirmed sandbox call in a self-hosted environment now waits for the worker.
    async fn hand_to_worker(&mut self, id: String) -> Result<(), RunError> {
        let primary = self.primary.clone();
        self.commit(
            move |_, st| {
                if !st.pending.iter().any(|p| p.id == id) {
                    st.pending.push(Pending {
                        id,
                        kind: PendingKind::ClientTool,
                        thread_id: primary,
                    });
                }
                Ok(vec![])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Closes a call that was running when its runner stopped.
    async fn close_interrupted_tool(&mut self, id: String) -> Result<(), RunError> {
        let primary = self.primary.clone();
        let answered = self.events.iter().any(|e| {
            matches!(
                e.kind.as_str(),
                kind::AGENT_TOOL_RESULT | kind::USER_TOOL_RESULT
            ) && e.body.get("tool_use_id").and_then(Value::as_str) == Some(id.as_str())
        });
        self.commit(
            move |_, st| {
                st.running_tool = None;
                if answered {
                    return Ok(vec![]);
                }
                let text = "The server stopped while this tool call was running, so whether it took effect is unknown. \
                            Check the workspace before running it again.";
                let mut e = server_event(kind::AGENT_TOOL_RESULT, events::tool_result(&id, vec![content::text(text)], true), &primary, time::now());
                e.answers = Some((id, "result"));
                Ok(vec![e])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// This runner's lease, for decisions that keep the session active.
    fn grant(&self) -> LeaseGrant {
        LeaseGrant {
            owner: self.inner.owner.clone(),
            until: time::now() + self.inner.config.lease_ttl.as_micros() as i64,
        }
    }
}

/// The error result that closes a tool call cut short by an interrupt.
pub(super) fn closed_tool_call(id: &str, thread: &str, now: i64) -> NewEvent {
    let text = content::text(events::INTERRUPTED_TOOL_MESSAGE);
    let mut e = server_event(
        kind::AGENT_TOOL_RESULT,
        events::tool_result(id, vec![text], true),
        thread,
        now,
    );
    e.answers = Some((id.to_string(), "result"));
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

/// The events that end the turn with `reason` — a `session.usage` when usage changed, then
/// the idle — or none when the turn is not over after all: an interrupt is pending, input is
/// queued, or every blocking event was answered meanwhile. `RequiresAction` lists whatever is
/// pending under the lock.
fn try_end_turn(
    rec: &mut SessionRecord,
    st: &mut EngineState,
    primary: &str,
    reason: StopReason,
    details: Option<Value>,
    usage_at_start: Option<&str>,
) -> Result<Vec<NewEvent>, StoreError> {
    if st.interrupt {
        return Ok(vec![]);
    }
    let reason = match reason {
        StopReason::RequiresAction(_) if st.pending.is_empty() => return Ok(vec![]),
        StopReason::RequiresAction(_) => StopReason::RequiresAction(st.pending_ids()),
        _ if st.queued > 0 => return Ok(vec![]),
        r => r,
    };
    let now = time::now();
    let mut out = Vec::new();
    if usage_at_start != Some(rec.usage.as_str()) {
        let mut usage: Value = serde_json::from_str(&rec.usage)?;
        let active = rec.active_micros + rec.running_since.map_or(0, |s| (now - s).max(0));
        usage["active_seconds"] = json!(active as f64 / 1_000_000.0);
        out.push(server_event(
            kind::SESSION_USAGE,
            json!({ "usage": usage }),
            primary,
            now,
        ));
    }
    out.extend(end_turn(rec, st, primary, reason, details, now));
    Ok(out)
}

/// A `session.error` whose retries are exhausted, and the idle with `retries_exhausted`.
fn exhausted(
    rec: &mut SessionRecord,
    st: &mut EngineState,
    primary: &str,
    error_type: &str,
    message: &str,
    now: i64,
) -> Vec<NewEvent> {
    let mut out = vec![server_event(
        kind::SESSION_ERROR,
        events::session_error(error_type, message, "exhausted"),
        primary,
        now,
    )];
    // The turn is dead and so is the input queued for it (API.md §4.7).
    st.queued = 0;
    st.discard_queued = true;
    out.extend(end_turn(
        rec,
        st,
        primary,
        StopReason::RetriesExhausted,
        None,
        now,
    ));
    out
}

/// The events and row changes that put a session idle.
fn end_turn(
    rec: &mut SessionRecord,
    st: &mut EngineState,
    primary: &str,
    reason: StopReason,
    details: Option<Value>,
    now: i64,
) -> Vec<NewEvent> {
    if !matches!(reason, StopReason::RequiresAction(_)) {
        st.pending.clear();
    }
    set_status(rec, SessionStatus::Idle, now);
    // An idle session holds no runner; the next input grants the lease again.
    rec.lease_owner = None;
    rec.lease_expires_at = None;
    vec![server_event(
        kind::STATUS_IDLE,
        events::idle(&reason, details),
        primary,
        now,
    )]
}

fn backoff(config: &super::EngineConfig, attempt: u32, err: &ModelError) -> Duration {
    let exp = config
        .retry_base
        .saturating_mul(1u32 << (attempt - 1).min(16));
    let d = exp.min(config.retry_cap);
    match err.retry_after {
        Some(after) if after > d => after.min(config.retry_cap.max(after)),
        _ => d,
    }
}

/// Publishes preview frames for subscribers that asked for them (API.md §4.5).
fn preview(
    hub: &Arc<crate::hub::Hub>,
    sid: &str,
    thread: &str,
    message_id: &str,
    thinking_id: &str,
    started_text: &AtomicBool,
    d: Delta,
) {
    if !hub.wants_previews(sid) {
        return;
    }
    match d {
        Delta::ThinkingStarted => hub.preview(
            sid,
            thread,
            kind::AGENT_THINKING,
            json!({"type": "event_start", "event": {"type": kind::AGENT_THINKING, "id": thinking_id}}),
        ),
        Delta::Text { index, text } => {
            if !started_text.swap(true, Ordering::SeqCst) {
                hub.preview(
                    sid,
                    thread,
                    kind::AGENT_MESSAGE,
                    json!({"type": "event_start", "event": {"type": kind::AGENT_MESSAGE, "id": message_id}}),
                );
            }
            hub.preview(
                sid,
                thread,
                kind::AGENT_MESSAGE,
                json!({"type": "event_delta", "event_id": message_id,
                       "delta": {"type": "content_delta", "index": index, "content": {"type": "text", "text": text}}}),
            );
        }
    }
}

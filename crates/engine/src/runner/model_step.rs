//! One model request of a thread's loop (its MCP connections are `mcp_step.rs`'s): the request
//! (its agent's model, system prompt and tools), retries, preview frames, and the response turned
//! into events in one transaction, its tool calls sorted by `call_sort` before anything runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::{Loop, RunError, Waited};
use crate::delegation::{self, LIST_AGENTS};
use crate::intake::server_event;
use crate::state::{ThreadStatus, set_status};
use mast_domain::content;
use mast_domain::events::{self, Answer, StopReason, kind};
use mast_domain::ids::new_id;
use mast_domain::model_config::Speed;
use mast_domain::session::{ModelUsage, SessionStatus, SessionUsage};
use mast_domain::time;
use mast_models::{
    Block, Delta, Message, ModelError, ModelRequest, ModelResponse, ModelStop, SizedPrefix,
};
use mast_store::NewEvent;

impl Loop<'_> {
    fn request(&self, messages: Vec<Message>, sized: SizedPrefix) -> ModelRequest {
        let model = &self.scope.agent.model;
        ModelRequest {
            model: model.id.clone(),
            system: crate::memory_mount::system_prompt(
                self.scope.agent.system.as_deref(),
                &self.scope.body.resources,
            ),
            messages,
            tools: self.offered_tools(),
            max_tokens: self.inner.config.max_tokens,
            effort: model.effort.map(|e| e.level),
            fast: model.speed == Some(Speed::Fast),
            inference_geo: model.inference_geo.clone(),
            sized,
        }
    }

    /// One model request with retries, turned into events. The messages go back to the
    /// transcript afterwards when it lent them ([`Transcript::lend`]), so a request does not
    /// copy the conversation.
    ///
    /// [`Transcript::lend`]: crate::context::Transcript::lend
    pub(super) async fn call_model(
        &mut self,
        messages: Vec<Message>,
        consumed: Vec<String>,
    ) -> Result<(), RunError> {
        let ready = self.prepare_mcp().await;
        if !matches!(ready, Ok(true)) {
            self.view.transcript.give_back(messages);
            if let (Ok(false), Some(id)) = (&ready, self.fast.prestarted.take()) {
                self.close_unissued(id).await?;
            }
            // An interrupt came first (the loop handles it next): the input this request
            // would have taken is consumed, as by an interrupted request.
            self.consume(consumed).await?;
            return ready.map(|_| ());
        }
        let mut messages = messages;
        // Messages an earlier request inlined are as it left them.
        let from = self.view.transcript.inlined().min(messages.len());
        crate::file_sources::inline(self.inner, &self.scope.sid, &mut messages[from..]).await;
        let sized = self.view.transcript.sized(&messages);
        let mut request = self.request(messages, sized);
        request.system = self.with_skills_note(request.system.take()).await?;
        let done = self.send_request(&mut request, consumed).await;
        self.view
            .transcript
            .give_back_inlined(std::mem::take(&mut request.messages));
        done
    }

    async fn send_request(
        &mut self,
        request: &mut ModelRequest,
        mut consumed: Vec<String>,
    ) -> Result<(), RunError> {
        // A request the waking transaction started (`engine::fast_start`): the first attempt
        // issues it; nothing is consumed with it, or it is closed and one is started here.
        let mut prestarted = self.fast.prestarted.take();
        if let Some(id) = prestarted.take_if(|_| !consumed.is_empty()) {
            self.close_unissued(id).await?;
        }
        if self.tally.requests >= self.inner.config.max_requests_per_turn {
            if let Some(id) = prestarted.take() {
                self.close_unissued(id).await?;
            }
            self.consume(std::mem::take(&mut consumed)).await?;
            let msg = format!(
                "the turn made {} model requests, the most allowed; send a new message to continue",
                self.tally.requests
            );
            return self.fail_turn("tool_use_limit_reached_error", &msg).await;
        }
        self.tally.requests += 1;
        let client = match self.inner.models.route(&request.model) {
            Ok(route) => {
                request.model = route.upstream_model;
                route.client
            }
            Err(msg) => {
                if let Some(id) = prestarted.take() {
                    self.close_unissued(id).await?;
                }
                self.consume(consumed).await?;
                return self.fail_turn("model_request_failed_error", &msg).await;
            }
        };
        let priced = self
            .inner
            .config
            .prices
            .of(&self.scope.agent.model.id)
            .is_some();
        let mut attempt = 0u32;
        loop {
            let start_id = match prestarted.take() {
                // Logged, past the budget gate, in the transaction that woke the runner.
                Some(id) => id,
                None => match self
                    .start_request(std::mem::take(&mut consumed), priced)
                    .await?
                {
                    Some(start_id) => start_id,
                    None => return Ok(()),
                },
            };

            let message_id = new_id("sevt");
            let thinking_id = new_id("sevt");
            let outcome = {
                let hub = self.inner.hub.clone();
                let (sid, thread) = (self.scope.sid.clone(), self.scope.thread.clone());
                let (mid, tid) = (message_id.clone(), thinking_id.clone());
                let started_text = AtomicBool::new(false);
                let sink =
                    move |d: Delta| preview(&hub, &sid, &thread, &mid, &tid, &started_text, d);
                let client = client.clone();
                let request = &*request;
                let started = std::time::Instant::now();
                let outcome = self
                    .interruptible(async move { client.complete(request, &sink).await })
                    .await?;
                record_request(&request.model, started, &outcome);
                outcome
            };
            match outcome {
                Waited::Interrupted => {
                    let end = server_event(
                        kind::SPAN_END,
                        events::span_end(&start_id, &ModelUsage::default(), false),
                        &self.scope.thread,
                        self.inner.now(),
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
                    let delay = crate::backoff::delay(
                        self.inner.config.retry_base,
                        self.inner.config.retry_cap,
                        attempt,
                        err.retry_after,
                    );
                    match self.interruptible(tokio::time::sleep(delay)).await? {
                        Waited::Interrupted => return Ok(()),
                        Waited::Done(()) => self.set_running().await?,
                    }
                }
            }
        }
    }

    /// Commits the start of a model request (`span.model_request_start`) under the budget
    /// gate, marking `consumed` input processed with it: the span's id, or None when the gate
    /// ended the turn instead. `priced`: the model has list prices.
    pub(super) async fn start_request(
        &mut self,
        consumed: Vec<String>,
        priced: bool,
    ) -> Result<Option<String>, RunError> {
        let start = server_event(
            kind::SPAN_START,
            json!({}),
            &self.scope.thread,
            self.inner.now(),
        );
        let start_id = start.id.clone();
        let n = consumed.len() as u32;
        let ender = self.ender();
        let clock = self.inner.store.clock().clone();
        let seen_notices = self.view.run_notices;
        let stale = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stale_here = stale.clone();
        let appended = self
            .commit(
                move |rec, st| {
                    // The input is consumed whatever follows (it is marked with the commit).
                    st.queued = st.queued.saturating_sub(n);
                    if ender.child.is_none() && st.run_notices != seen_notices {
                        // A run's notice was logged after this request's context was built:
                        // the loop looks again rather than send a context without it.
                        stale_here.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Ok(vec![]);
                    }
                    if ender.child.is_none() {
                        // A new primary turn: it parks again if it ends while runs work.
                        st.primary_parked = false;
                        st.primary_failed = None;
                    }
                    // The budget gate: a request is made only under the cap.
                    if let Some(stop) = crate::budget::gate(&ender, rec, st, priced, clock.now())? {
                        return Ok(stop);
                    }
                    Ok(vec![start])
                },
                consumed,
            )
            .await?;
        if appended.is_empty()
            && self.is_primary()
            && !stale.load(std::sync::atomic::Ordering::Relaxed)
        {
            // The gate stopped the request but the turn cannot end while a workflow run's
            // threads work: wait for them to stop rather than ask again at once.
            self.wait_for_children(None).await?;
        }
        Ok(appended
            .iter()
            .any(|e| e.id == start_id)
            .then_some(start_id))
    }

    async fn record_failure(
        &mut self,
        err: &ModelError,
        start_id: &str,
        retrying: bool,
    ) -> Result<(), RunError> {
        let (thread, child) = (self.scope.thread.clone(), self.child_name());
        let ender = self.ender();
        let start_id = start_id.to_string();
        let kind_name = err.kind.session_error_type();
        let terminal = err.kind.is_terminal();
        let message = err.message.clone();
        tracing::warn!(session_id = %self.scope.sid, thread_id = %thread, error = %message, retrying, "model request failed");
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                let now = clock.now();
                let mut out = vec![server_event(
                    kind::SPAN_END,
                    events::span_end(&start_id, &ModelUsage::default(), true),
                    &thread,
                    now,
                )];
                if !retrying && terminal {
                    out.extend(ender.terminated(rec, st, kind_name, &message, now));
                    return Ok(out);
                }
                if !retrying {
                    out.extend(ender.exhausted(rec, st, kind_name, &message, now));
                    return Ok(out);
                }
                out.push(server_event(
                    kind::SESSION_ERROR,
                    events::session_error(kind_name, &message, "retrying"),
                    &thread,
                    now,
                ));
                match child {
                    None => {
                        out.push(server_event(
                            kind::STATUS_RESCHEDULED,
                            json!({}),
                            &thread,
                            now,
                        ));
                        set_status(rec, SessionStatus::Rescheduling, now);
                    }
                    Some(name) => {
                        out.push(server_event(
                            kind::THREAD_STATUS_RESCHEDULED,
                            events::thread_status(&thread, &name, None),
                            &thread,
                            now,
                        ));
                        if let Some(t) = st.threads.get_mut(&thread) {
                            t.set_status(ThreadStatus::Rescheduling, now);
                        }
                    }
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Turns a model response into events: thinking, message, tool uses, the span's end (which
    /// privately keeps the exact content for rebuilding context), results for calls answered
    /// at once (unknown or refused tools, the roster), and delegations — all in one
    /// transaction, which also ends the turn when the response ends it by itself.
    async fn record_response(
        &mut self,
        resp: ModelResponse,
        start_id: &str,
        message_id: String,
        thinking_id: String,
    ) -> Result<(), RunError> {
        let now = self.inner.now();
        let thread = self.scope.thread.clone();
        let stop = resp.stop();
        let (mut out, said) = said_events(&resp.content, &thread, message_id, thinking_id, now);
        let cut_short = stop == ModelStop::MaxTokens;
        // Boxed, as every hook step is: a runner's state holds only what its turn uses.
        let pre = Box::pin(self.ask_pre_hooks(&resp.content, cut_short)).await?;
        let calls = self.sort_calls(resp.content, cut_short, pre, now);
        out.extend(calls.events);
        let answered_now = !calls.refused.is_empty()
            || !calls.mcp_refused.is_empty()
            || !calls.listings.is_empty();
        let mut ends_turn = response_ends_turn(
            stop,
            !calls.pending.is_empty(),
            answered_now || calls.runs_here,
        )
        .map(|reason| {
            let details = (reason == StopReason::Refusal)
                .then(|| resp.stop_details.clone())
                .flatten();
            (reason, details)
        });
        let mut end = server_event(
            kind::SPAN_END,
            events::span_end(start_id, &resp.usage, false),
            &thread,
            now,
        );
        end.internal = Some(
            json!({ "content": calls.content, "stop_reason": resp.stop_reason, "stop_details": resp.stop_details }),
        );
        // The model ended its turn by itself: `stop` (or `subagent_stop`) hooks may keep it
        // working, with their reason recorded for the context (see `Transcript::response`).
        if matches!(ends_turn, Some((StopReason::EndTurn, _)))
            && let Some(gate) = Box::pin(self.ask_stop_hooks(&said, &resp.stop_reason)).await?
        {
            if let Some(recorded) = gate.recorded() {
                end.body["hooks"] = recorded;
            }
            if let Some((hook_id, reason)) = gate.blocked
                && let Some(internal) = end.internal.as_mut()
            {
                internal["stop_hook"] = json!({ "hook_id": hook_id, "reason": reason });
                ends_turn = None;
            }
        }
        let end_id = end.id.clone();
        out.push(end);
        for (id, msg) in calls.mcp_refused {
            let mut e = server_event(
                kind::AGENT_MCP_TOOL_RESULT,
                events::mcp_tool_result(&id, vec![content::text(msg)], true),
                &thread,
                now,
            );
            e.answers = Some((id, Answer::Result.as_str()));
            out.push(e);
        }
        for (id, msg) in calls.refused {
            let mut e = server_event(
                kind::AGENT_TOOL_RESULT,
                events::tool_result(&id, vec![content::text(msg)], true),
                &thread,
                now,
            );
            e.answers = Some((id, Answer::Result.as_str()));
            out.push(e);
        }
        let mut ender = self.ender();
        if ender.child.is_some() {
            ender.reply = Some(said);
        }
        let (usage, pending, listings, sends, platform) = (
            resp.usage,
            calls.pending,
            calls.listings,
            calls.sends,
            calls.platform,
        );
        let runs = self.run_scope();
        let cost = self
            .inner
            .config
            .prices
            .cost(&self.scope.agent.model.id, &usage);
        let roster = self.scope.roster.clone();
        let (sid, primary) = (self.scope.sid.clone(), self.scope.primary.clone());
        let usage_interval = self.inner.config.usage_interval;
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                let mut total: SessionUsage = serde_json::from_str(&rec.usage).unwrap_or_default();
                total.add(&usage);
                rec.usage = serde_json::to_string(&total)?;
                st.spend.add(cost);
                if let Some(t) = st.threads.get_mut(&thread) {
                    t.usage.add(&usage);
                    t.spend.add(cost);
                }
                if ends_turn.is_none() {
                    out.extend(crate::usage_report::periodic(
                        rec,
                        st,
                        &primary,
                        usage_interval,
                        clock.now(),
                    )?);
                }
                st.pending.extend(pending);
                if let Some(roster) = &roster {
                    for (id, input) in listings {
                        out.extend(delegation::answered(
                            &id,
                            LIST_AGENTS,
                            &input,
                            &roster.listing(st),
                            false,
                            &thread,
                            clock.now(),
                        ));
                    }
                }
                out.extend(delegation::apply(st, sends, &sid, &primary, clock.now()));
                if !platform.is_empty() {
                    let ctx = runs.ctx(&sid, &primary, clock.now());
                    let (answers, events) = crate::workflow_runs::answer_calls(st, &ctx, platform);
                    if let Some(end) = out.iter_mut().find(|e| e.id == end_id)
                        && let Some(internal) = end.internal.as_mut()
                    {
                        internal["platform_calls"] = json!(answers);
                    }
                    out.extend(events);
                }
                if let Some((reason, details)) = ends_turn {
                    out.extend(ender.try_end(rec, st, reason, details)?);
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }
}

/// The `agent.thinking` and `agent.message` events of a response, and the text it said.
fn said_events(
    blocks: &[Value],
    thread: &str,
    message_id: String,
    thinking_id: String,
    now: time::Micros,
) -> (Vec<NewEvent>, String) {
    let mut out = Vec::new();
    if blocks.iter().any(|b| Block::of(b) == Block::Thinking) {
        let mut e = server_event(kind::AGENT_THINKING, json!({}), thread, now);
        e.id = thinking_id;
        out.push(e);
    }
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match Block::of(b) {
            Block::Text(t) => Some(t),
            _ => None,
        })
        .collect();
    if !texts.is_empty() {
        let content: Vec<Value> = texts.iter().map(|t| content::text(*t)).collect();
        let mut e = server_event(
            kind::AGENT_MESSAGE,
            json!({ "content": content }),
            thread,
            now,
        );
        e.id = message_id;
        out.push(e);
    }
    (out, texts.join("\n"))
}

/// Whether a response ends the turn by itself, so the idle goes in the transaction that
/// records it: calls answered at once or run here keep the turn going; blocking calls end
/// it with `requires_action`; otherwise the model's stop reason decides (a continued or
/// unknown reason leaves it to the loop).
fn response_ends_turn(stop: ModelStop, blocked: bool, keeps_going: bool) -> Option<StopReason> {
    if keeps_going {
        return None;
    }
    if blocked {
        return Some(StopReason::RequiresAction(vec![]));
    }
    match stop {
        ModelStop::EndTurn | ModelStop::StopSequence => Some(StopReason::EndTurn),
        ModelStop::Refusal => Some(StopReason::Refusal),
        _ => None,
    }
}

/// Publishes preview frames for subscribers that asked for them.
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

/// The request's latency and tokens, for `/metrics`.
fn record_request(
    model: &str,
    started: std::time::Instant,
    outcome: &Waited<Result<mast_models::ModelResponse, mast_models::ModelError>>,
) {
    let result = match outcome {
        Waited::Interrupted => "interrupted",
        Waited::Done(Ok(resp)) => {
            for (kind, n) in [
                ("input", resp.usage.input_tokens),
                ("output", resp.usage.output_tokens),
                ("cache_read", resp.usage.cache_read_input_tokens),
            ] {
                metrics::counter!(crate::telemetry::MODEL_TOKENS, "model" => model.to_string(), "kind" => kind)
                    .increment(n.max(0) as u64);
            }
            "ok"
        }
        Waited::Done(Err(_)) => "error",
    };
    metrics::histogram!(crate::telemetry::MODEL_DURATION, "model" => model.to_string(), "outcome" => result)
        .record(started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::response_ends_turn;
    use mast_domain::events::StopReason;
    use mast_models::ModelStop;

    #[test]
    fn when_a_response_ends_the_turn_by_itself() {
        use ModelStop::*;
        let requires = Some(StopReason::RequiresAction(vec![]));
        // (model stop, calls blocked on the client, calls answered or run here) -> ends with
        let cases = [
            (EndTurn, false, false, Some(StopReason::EndTurn)),
            (StopSequence, false, false, Some(StopReason::EndTurn)),
            (Refusal, false, false, Some(StopReason::Refusal)),
            // Continued, failed or unknown stops are the loop's to handle.
            (MaxTokens, false, false, None),
            (PauseTurn, false, false, None),
            (ContextWindowExceeded, false, false, None),
            (Other, false, false, None),
            // A call the client must answer blocks the turn, whatever the model said.
            (ToolUse, true, false, requires.clone()),
            (EndTurn, true, false, requires.clone()),
            // A call answered at once or run here keeps the turn going, even beside a
            // blocking one: the loop decides after it.
            (ToolUse, false, true, None),
            (ToolUse, true, true, None),
            (EndTurn, false, true, None),
        ];
        for (stop, blocked, keeps_going, want) in cases {
            assert_eq!(
                response_ends_turn(stop, blocked, keeps_going),
                want,
                "{stop:?} blocked {blocked} keeps going {keeps_going}"
            );
        }
    }

    #[test]
    fn stop_reasons_parse_and_continue() {
        for (s, stop, continues) in [
            ("end_turn", ModelStop::EndTurn, false),
            ("stop_sequence", ModelStop::StopSequence, false),
            ("tool_use", ModelStop::ToolUse, false),
            ("max_tokens", ModelStop::MaxTokens, true),
            ("pause_turn", ModelStop::PauseTurn, true),
            ("refusal", ModelStop::Refusal, false),
            (
                "model_context_window_exceeded",
                ModelStop::ContextWindowExceeded,
                false,
            ),
            ("something_new", ModelStop::Other, false),
        ] {
            assert_eq!(ModelStop::parse(s), stop, "{s}");
            assert_eq!(stop.continues(), continues, "{s}");
        }
    }
}

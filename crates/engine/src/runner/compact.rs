//! The loop's side of context compaction (`engine::compaction` has the rules): before a model
//! request whose context would pass the model's threshold, summarise the older part and log
//! the boundary.

use serde_json::{Value, json};

use super::{Loop, RunError, Waited};
use crate::compaction::{
    KEEP_FRACTION, LIMIT_ERROR, MAX_IN_ROW, SUMMARY_MAX_TOKENS, boundary, choose_cut,
};
use crate::context::{BYTES_PER_TOKEN, json_bytes, message_bytes, text_of};
use crate::intake::server_event;
use mast_domain::events::{self, kind};
use mast_domain::session::{ModelUsage, SessionUsage};
use mast_models::{Message, ModelRequest, Role, summarise};

impl Loop<'_> {
    /// The bytes of what every request sends besides the messages: the system prompt and
    /// the tool definitions.
    fn request_overhead(&self) -> usize {
        let system = self.scope.agent.system.as_deref().map_or(0, str::len);
        let tools: usize = self
            .offered_tools()
            .iter()
            .map(|t| t.name.len() + t.description.len() + json_bytes(&t.input_schema))
            .sum();
        system + tools
    }

    /// Whether the context would pass the model's threshold now ([`Loop::compact_if_needed`]
    /// would compact).
    pub(super) fn compaction_due(&self) -> bool {
        self.estimated_tokens()
            > self
                .inner
                .config
                .compaction
                .limit(&self.scope.agent.model.id)
    }

    /// [`Transcript::estimated_tokens`] of the context a request would send now; the
    /// overhead (system prompt and tool definitions), whose sizing serialises every tool
    /// schema, is measured only when there is no provider's count to go on.
    ///
    /// [`Transcript::estimated_tokens`]: crate::context::Transcript::estimated_tokens
    fn estimated_tokens(&self) -> u64 {
        match self.view.transcript.reported_estimate() {
            Some(t) => t,
            None => self
                .view
                .transcript
                .estimated_tokens(self.request_overhead()),
        }
    }

    /// Before a model request on a user tail: when the context would pass the model's
    /// threshold, summarises the older part into a boundary (or, when it cannot be made to
    /// fit, ends the turn with `compaction_limit_reached_error`). True when it committed
    /// anything — the loop then looks again before its request; `consumed` is then taken.
    pub(super) async fn compact_if_needed(
        &mut self,
        consumed: &mut Vec<String>,
    ) -> Result<bool, RunError> {
        let cfg = &self.inner.config.compaction;
        let model = self.scope.agent.model.id.clone();
        let (window, limit) = (cfg.window(&model), cfg.limit(&model));
        let before = self.estimated_tokens();
        if before <= limit {
            return Ok(false);
        }
        let consumed = std::mem::take(consumed);
        if self.view.transcript.compactions_in_row() >= MAX_IN_ROW {
            let msg = format!(
                "the context (about {before} tokens) still passes {limit} of the model's {window}-token window after {MAX_IN_ROW} compactions in a row"
            );
            return self.compaction_failed(&msg).await;
        }
        let keep_bytes = (window as f64 * KEEP_FRACTION) as usize * BYTES_PER_TOKEN;
        let (messages, closing) = self.view.transcript.parts();
        let Some(cut) = choose_cut(messages, &closing, keep_bytes) else {
            let msg = format!(
                "the context (about {before} tokens) passes {limit} of the model's {window}-token window and has no older part that can be summarised"
            );
            return self.compaction_failed(&msg).await;
        };
        let head = messages[..cut].to_vec();
        let keep = messages.len() - cut;
        let kept_bytes = messages[cut..].iter().map(message_bytes).sum::<usize>()
            + closing.iter().map(json_bytes).sum::<usize>();
        let text_budget =
            (window as usize * BYTES_PER_TOKEN * 3 / 4).saturating_sub(summarise::SYSTEM.len());
        let mut request = ModelRequest {
            model: model.clone(),
            system: Some(summarise::SYSTEM.to_string()),
            messages: vec![Message {
                role: Role::User,
                content: vec![
                    json!({"type": "text", "text": summarise::request_text(&head, text_budget)}),
                ],
            }],
            tools: Default::default(),
            max_tokens: SUMMARY_MAX_TOKENS.min(self.inner.config.max_tokens),
            effort: None,
            fast: false,
            inference_geo: self.scope.agent.model.inference_geo.clone(),
            sized: Default::default(),
        };
        let client = match self.inner.models.route(&model) {
            Ok(route) => {
                request.model = route.upstream_model;
                route.client
            }
            Err(msg) => {
                self.consume(consumed).await?;
                self.fail_turn("model_request_failed_error", &msg).await?;
                return Ok(true);
            }
        };

        // The summarisation is a model request like any other: under the budget gate, in a
        // span, its usage counted.
        let priced = self.inner.config.prices.of(&model).is_some();
        let Some(start_id) = self.start_request(consumed, priced).await? else {
            return Ok(true);
        };
        let outcome = {
            let request = &request;
            let client = client.clone();
            let none = |_: mast_models::Delta| {};
            self.interruptible(async move { client.complete(request, &none).await })
                .await?
        };
        let resp = match outcome {
            Waited::Interrupted => {
                self.end_span(&start_id, ModelUsage::default(), false, None)
                    .await?;
                return Ok(true);
            }
            Waited::Done(Err(err)) => {
                tracing::warn!(session_id = %self.scope.sid, thread_id = %self.scope.thread, error = %err.message, "context summarisation failed");
                self.end_span(&start_id, ModelUsage::default(), true, None)
                    .await?;
                let msg = format!("summarising the context failed: {}", err.message);
                self.fail_turn(err.kind.session_error_type(), &msg).await?;
                return Ok(true);
            }
            Waited::Done(Ok(resp)) => resp,
        };
        let summary = text_of(&resp.content);
        let after =
            ((summarise::boundary_text(&summary).len() + kept_bytes + self.request_overhead())
                / BYTES_PER_TOKEN) as u64;
        if summary.trim().is_empty() || after > limit {
            self.end_span(&start_id, resp.usage, false, None).await?;
            let msg = format!(
                "even compacted, the context (about {after} tokens) passes {limit} of the model's {window}-token window"
            );
            self.fail_turn(LIMIT_ERROR, &msg).await?;
            return Ok(true);
        }
        tracing::info!(session_id = %self.scope.sid, thread_id = %self.scope.thread, before, after, keep, "context compacted");
        let mark = boundary(&summary, keep, self.view.last_seq, before);
        self.end_span(&start_id, resp.usage, false, Some(mark))
            .await?;
        Ok(true)
    }

    /// Closes the summarisation span with its usage counted toward the session, the thread
    /// and the spend; with a boundary, also records `agent.thread_context_compacted`.
    async fn end_span(
        &mut self,
        start_id: &str,
        usage: ModelUsage,
        is_error: bool,
        mark: Option<Value>,
    ) -> Result<(), RunError> {
        let thread = self.scope.thread.clone();
        let cost = self
            .inner
            .config
            .prices
            .cost(&self.scope.agent.model.id, &usage);
        let end = server_event(
            kind::SPAN_END,
            events::span_end(start_id, &usage, is_error),
            &thread,
            self.inner.now(),
        );
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
                let mut out = vec![end];
                if let Some(mark) = mark {
                    let mut e = server_event(
                        kind::AGENT_THREAD_CONTEXT_COMPACTED,
                        json!({}),
                        &thread,
                        clock.now(),
                    );
                    e.internal = Some(mark);
                    out.push(e);
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Ends the turn with `compaction_limit_reached_error`, as a turn out of retries ends
    /// (`retries_exhausted`). Input the request would have consumed from the queue is left
    /// there, so the failed turn discards it like any input queued for a dead turn.
    async fn compaction_failed(&mut self, message: &str) -> Result<bool, RunError> {
        tracing::warn!(session_id = %self.scope.sid, thread_id = %self.scope.thread, reason = message, "compaction limit reached");
        self.fail_turn(LIMIT_ERROR, message).await?;
        Ok(true)
    }
}

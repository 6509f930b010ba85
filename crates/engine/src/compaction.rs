//! Context compaction: before a model request whose context would pass a threshold of the
//! model's context window, the older part of the thread's conversation is summarised by a
//! model request, and an `agent.thread_context_compacted` event records the boundary (the
//! summary and how many of the newest messages stay verbatim) in its private part. The log
//! stays whole; only what the model sees changes: the transcript fold applies the boundary
//! (see `engine::context`), so a restarted runner or another replica resumes from it.
//!
//! The size is measured with the provider's token counts for the last response plus a
//! quarter token per byte added since (`context::Transcript::estimated_tokens`).

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::context::{BYTES_PER_TOKEN, json_bytes, message_bytes};
use super::intake::server_event;
use super::turn::{Loop, RunError, Waited};
use mast_domain::events::{self, kind};
use mast_domain::session::{ModelUsage, SessionUsage};
use mast_models::{Block, Message, ModelRequest, Role, summarise};

/// The session error of a context that cannot be made to fit.
pub const LIMIT_ERROR: &str = "compaction_limit_reached_error";

/// Context windows of the built-in Claude models, by id prefix (tokens).
const BUILT_IN_WINDOWS: &[(&str, u64)] = &[("claude-", 200_000)];

/// The part of the window the verbatim tail may take at most after a compaction; the rest
/// leaves room for the summary and the next responses.
const KEEP_FRACTION: f64 = 0.25;

/// `max_tokens` of a summarisation request.
const SUMMARY_MAX_TOKENS: u32 = 4_096;

/// Boundaries in a row with no model response between them before compaction gives up.
const MAX_IN_ROW: u32 = 2;

/// When threads compact their context (`MAST_CONTEXT_WINDOW`, `MAST_CONTEXT_WINDOWS`,
/// `MAST_COMPACTION_THRESHOLD`).
#[derive(Debug, Clone)]
pub struct CompactionConfig {
    /// The window of models neither configured nor built in (tokens).
    pub default_window: u64,
    /// Windows configured per model id (tokens); they override the built-in ones.
    pub windows: BTreeMap<String, u64>,
    /// The fraction of the window a request's context may reach before it is compacted.
    pub threshold: f64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            default_window: 200_000,
            windows: BTreeMap::new(),
            threshold: 0.8,
        }
    }
}

impl CompactionConfig {
    /// The context window of `model` in tokens.
    pub fn window(&self, model: &str) -> u64 {
        if let Some(w) = self.windows.get(model) {
            return *w;
        }
        BUILT_IN_WINDOWS
            .iter()
            .find(|(prefix, _)| model.starts_with(prefix))
            .map_or(self.default_window, |(_, w)| *w)
    }

    /// The context size (tokens) above which a request of `model` is compacted first.
    pub fn limit(&self, model: &str) -> u64 {
        (self.window(model) as f64 * self.threshold) as u64
    }

    /// Applies `MAST_CONTEXT_WINDOW` (tokens), `MAST_CONTEXT_WINDOWS` (JSON: model id →
    /// tokens) and `MAST_COMPACTION_THRESHOLD` (a fraction in (0, 1]).
    pub fn with_env(
        mut self,
        window: Option<&str>,
        windows: Option<&str>,
        threshold: Option<&str>,
    ) -> anyhow::Result<Self> {
        if let Some(w) = window.filter(|w| !w.trim().is_empty()) {
            self.default_window = w.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("MAST_CONTEXT_WINDOW must be a positive number of tokens")
            })?;
        }
        if let Some(json) = windows.filter(|j| !j.trim().is_empty()) {
            let parsed: BTreeMap<String, u64> = serde_json::from_str(json).map_err(|e| {
                anyhow::anyhow!("MAST_CONTEXT_WINDOWS must map model ids to token counts: {e}")
            })?;
            anyhow::ensure!(
                parsed.values().all(|w| *w > 0),
                "MAST_CONTEXT_WINDOWS: every window must be a positive number of tokens"
            );
            self.windows.extend(parsed);
        }
        if let Some(t) = threshold.filter(|t| !t.trim().is_empty()) {
            self.threshold = t
                .trim()
                .parse()
                .ok()
                .filter(|f: &f64| *f > 0.0 && *f <= 1.0)
                .ok_or_else(|| {
                    anyhow::anyhow!("MAST_COMPACTION_THRESHOLD must be a fraction in (0, 1]")
                })?;
        }
        Ok(self)
    }
}

fn ids_of<'a>(blocks: impl Iterator<Item = &'a Value>, ty: &str, key: &str) -> Vec<String> {
    blocks
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
        .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// Where to cut `messages` (followed by `closing`, what the context appends) into an older
/// part to summarise and a newest part the model keeps seeing verbatim: the index of the
/// first kept message. A cut never separates a `tool_use` from its `tool_result` (every
/// result in the kept part answers a call in the kept part), always summarises something and
/// always keeps the newest message. Of the allowed cuts it keeps the most messages whose
/// size stays within `keep_bytes`, or else the fewest. None when no cut is allowed.
pub fn choose_cut(messages: &[Message], closing: &[Value], keep_bytes: usize) -> Option<usize> {
    let mut uses: HashSet<String> = HashSet::new();
    let mut unanswered: HashSet<String> = ids_of(closing.iter(), "tool_result", "tool_use_id")
        .into_iter()
        .collect();
    let mut kept = closing.iter().map(json_bytes).sum::<usize>();
    let mut best = None;
    for i in (1..messages.len()).rev() {
        let m = &messages[i];
        for id in ids_of(m.content.iter(), "tool_result", "tool_use_id") {
            if !uses.contains(&id) {
                unanswered.insert(id);
            }
        }
        for id in ids_of(m.content.iter(), "tool_use", "id") {
            unanswered.remove(&id);
            uses.insert(id);
        }
        kept += message_bytes(m);
        if !unanswered.is_empty() {
            continue;
        }
        if best.is_some() && kept > keep_bytes {
            break;
        }
        best = Some(i);
        if kept > keep_bytes {
            break;
        }
    }
    best
}

/// The boundary `agent.thread_context_compacted` records, privately.
fn boundary(summary: &str, keep: usize, covers_to_seq: i64, pre_tokens: u64) -> Value {
    json!({ "summary": summary, "keep": keep, "covers_to_seq": covers_to_seq, "pre_compaction_tokens": pre_tokens })
}

/// The text of a response's text blocks.
fn text_of(content: &[Value]) -> String {
    content
        .iter()
        .filter_map(|b| match Block::of(b) {
            Block::Text(t) => Some(t),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Loop<'_> {
    /// The bytes of what every request sends besides the messages: the system prompt and
    /// the tool definitions.
    fn request_overhead(&self) -> usize {
        let system = self.agent.system.as_deref().map_or(0, str::len);
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
        self.estimated_tokens() > self.inner.config.compaction.limit(&self.agent.model.id)
    }

    /// [`Transcript::estimated_tokens`] of the context a request would send now; the
    /// overhead (system prompt and tool definitions), whose sizing serialises every tool
    /// schema, is measured only when there is no provider's count to go on.
    ///
    /// [`Transcript::estimated_tokens`]: super::context::Transcript::estimated_tokens
    fn estimated_tokens(&self) -> u64 {
        match self.transcript.reported_estimate() {
            Some(t) => t,
            None => self.transcript.estimated_tokens(self.request_overhead()),
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
        let model = self.agent.model.id.clone();
        let (window, limit) = (cfg.window(&model), cfg.limit(&model));
        let before = self.estimated_tokens();
        if before <= limit {
            return Ok(false);
        }
        let consumed = std::mem::take(consumed);
        if self.transcript.compactions_in_row() >= MAX_IN_ROW {
            let msg = format!(
                "the context (about {before} tokens) still passes {limit} of the model's {window}-token window after {MAX_IN_ROW} compactions in a row"
            );
            return self.compaction_failed(&msg).await;
        }
        let keep_bytes = (window as f64 * KEEP_FRACTION) as usize * BYTES_PER_TOKEN;
        let (messages, closing) = self.transcript.parts();
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
            inference_geo: self.agent.model.inference_geo.clone(),
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
                tracing::warn!(session_id = %self.sid, thread_id = %self.thread, error = %err.message, "context summarisation failed");
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
        tracing::info!(session_id = %self.sid, thread_id = %self.thread, before, after, keep, "context compacted");
        let mark = boundary(&summary, keep, self.last_seq, before);
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
        let thread = self.thread.clone();
        let cost = self.inner.config.prices.cost(&self.agent.model.id, &usage);
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
        tracing::warn!(session_id = %self.sid, thread_id = %self.thread, reason = message, "compaction limit reached");
        self.fail_turn(LIMIT_ERROR, message).await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(blocks: Vec<Value>) -> Message {
        Message {
            role: Role::User,
            content: blocks,
        }
    }
    fn assistant(blocks: Vec<Value>) -> Message {
        Message {
            role: Role::Assistant,
            content: blocks,
        }
    }
    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }
    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "bash", "input": {}})
    }
    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": [text("out")]})
    }

    /// Every result in the kept part answers a call in the kept part.
    fn no_split(messages: &[Message], closing: &[Value], cut: usize) -> bool {
        let kept: Vec<&Value> = messages[cut..]
            .iter()
            .flat_map(|m| &m.content)
            .chain(closing)
            .collect();
        let uses: HashSet<String> = ids_of(kept.iter().copied(), "tool_use", "id")
            .into_iter()
            .collect();
        ids_of(kept.iter().copied(), "tool_result", "tool_use_id")
            .iter()
            .all(|r| uses.contains(r))
    }

    #[test]
    fn the_cut_never_splits_a_call_from_its_result() {
        let messages = vec![
            user(vec![text("start")]),
            assistant(vec![text("looking"), call("a")]),
            user(vec![result("a")]),
            assistant(vec![call("b"), call("c")]),
            user(vec![result("b"), result("c"), text("and also")]),
            assistant(vec![call("d")]),
        ];
        let closing = vec![result("d")];
        for keep_bytes in [0, 50, 200, 400, 1_000, 100_000] {
            let cut = choose_cut(&messages, &closing, keep_bytes).expect("a cut exists");
            assert!(
                no_split(&messages, &closing, cut),
                "keep {keep_bytes}: cut {cut}"
            );
            assert!((1..messages.len()).contains(&cut));
        }
        // The open call's result follows: the assistant message calling it is kept whatever
        // the budget, and the smallest cut keeps only it.
        assert_eq!(choose_cut(&messages, &closing, 0), Some(5));
        // A generous budget keeps everything but the first message; a cut inside a call's
        // round trip (at 2 or 4) is never chosen.
        assert_eq!(choose_cut(&messages, &closing, 100_000), Some(1));
        let mid = messages[3..].iter().map(message_bytes).sum::<usize>()
            + closing.iter().map(json_bytes).sum::<usize>();
        assert_eq!(choose_cut(&messages, &closing, mid), Some(3));
        assert_eq!(choose_cut(&messages, &closing, mid + 10), Some(3));
    }

    #[test]
    fn no_cut_when_nothing_older_can_go() {
        // One message: the newest is always kept, so there is nothing to summarise.
        assert_eq!(choose_cut(&[user(vec![text("huge")])], &[], 0), None);
        // The only allowed cut would separate a call from its result.
        let messages = vec![user(vec![text("go")]), assistant(vec![call("a")])];
        assert_eq!(choose_cut(&messages, &[result("a")], 0), Some(1));
        let messages = vec![
            assistant(vec![call("a")]),
            user(vec![result("a"), text("x")]),
        ];
        assert_eq!(choose_cut(&messages, &[], 0), None);
    }

    #[test]
    fn windows_come_from_configuration_then_the_built_in_table() {
        let cfg = CompactionConfig::default()
            .with_env(
                Some("32000"),
                Some(r#"{"claude-sonnet-4-5": 1000, "gpt-x": 8000}"#),
                Some("0.5"),
            )
            .unwrap();
        assert_eq!(cfg.window("claude-sonnet-4-5"), 1_000);
        assert_eq!(cfg.window("claude-opus-4-1"), 200_000);
        assert_eq!(cfg.window("gpt-x"), 8_000);
        assert_eq!(cfg.window("mast-scripted"), 32_000);
        assert_eq!(cfg.limit("gpt-x"), 4_000);
        for bad in [
            (Some("0"), None, None),
            (None, Some("{\"m\": -1}"), None),
            (None, None, Some("1.5")),
            (None, None, Some("x")),
        ] {
            assert!(
                CompactionConfig::default()
                    .with_env(bad.0, bad.1, bad.2)
                    .is_err()
            );
        }
    }
}

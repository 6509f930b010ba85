//! A thread's model context, folded from its event log. The log is the source of truth: the
//! exact assistant content of each model response is kept privately on its
//! `span.model_request_end`, tool results are keyed by the tool-use event ids (which double as
//! the model's tool_use ids), and input consumed while tool calls were open is placed after
//! their results — so the context never holds a `tool_use` without its `tool_result`.
//!
//! The fold is incremental: a [`Transcript`] takes events one at a time, in conversation
//! order, and yields the [`Context`] at any point, so a runner extends it with the events
//! appended since it last looked instead of rebuilding it from the whole log (see
//! `engine::history`, which keeps transcripts between a session's wakes).

use std::collections::HashMap;

use serde_json::{Value, json};

use mast_domain::content::SYSTEM_PREFIX;
use mast_domain::events::kind;
use mast_models::{Message, Role, SizedPrefix};
use mast_store::EventRecord;

use super::heap_size::HeapSize;

/// The text of a response's text blocks, joined by newlines.
pub(crate) fn text_of(content: &[Value]) -> String {
    content
        .iter()
        .filter_map(|b| match mast_models::Block::of(b) {
            mast_models::Block::Text(t) => Some(t),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The event types the loop reads: those that shape a thread's model context, and the tool
/// uses and confirmations that decide which calls may run.
pub const LOOP_KINDS: &[&str] = &[
    kind::AGENT_TOOL_USE,
    kind::AGENT_MCP_TOOL_USE,
    kind::USER_TOOL_CONFIRMATION,
    kind::USER_MESSAGE,
    kind::SYSTEM_MESSAGE,
    kind::SPAN_START,
    kind::SPAN_END,
    kind::AGENT_TOOL_RESULT,
    kind::AGENT_MCP_TOOL_RESULT,
    kind::USER_CUSTOM_TOOL_RESULT,
    kind::USER_TOOL_RESULT,
    kind::THREAD_MESSAGE_RECEIVED,
    kind::USER_DEFINE_OUTCOME,
    kind::OUTCOME_EVALUATION_END,
    kind::AGENT_THREAD_CONTEXT_COMPACTED,
    kind::WORKFLOW_RUN_STATUS_RUNNING,
    kind::WORKFLOW_RUN_STATUS_ENDED,
];

/// How a thread's context ends, which decides the loop's next step.
#[derive(Debug, Clone, PartialEq)]
pub enum Tail {
    /// Nothing has happened yet.
    Empty,
    /// The last message is the user's: the model should answer.
    User,
    /// The last response stopped for `stop_reason` with no open tool calls.
    Assistant {
        stop_reason: String,
        stop_details: Option<Value>,
        continuations: u32,
    },
    /// The last response called tools; these have no result yet.
    AwaitingTools(Vec<String>),
}

/// A thread's model context.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub messages: Vec<Message>,
    pub tail: Tail,
    /// A model request was started and never finished (the process died mid-request).
    pub dangling_request: Option<String>,
}

/// A thread's conversation so far, extended one event at a time (in the order of
/// [`position`]). Everything but the messages is small: the open calls of the last response,
/// their results so far, and input that arrived while they were open.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    messages: Vec<Message>,
    /// Tool-use ids of the newest response that have not been closed into the messages.
    open: Vec<String>,
    /// Results keyed by tool-use id, waiting for their call to be closed.
    results: HashMap<String, Value>,
    /// Input consumed while calls were open: it follows their results.
    deferred: Vec<Value>,
    last_stop: Option<(String, Option<Value>)>,
    continuations: u32,
    /// The model request started and not yet ended.
    started: Option<String>,
    /// Whether the newest thing in the log is a model response (which may have no content).
    after_response: bool,
    /// Workflow run notices logged while a model request was in flight: they follow its
    /// response.
    notices: Vec<Value>,
    /// The messages are lent out for a model request: how long they and the last one's
    /// content were, to take back off what [`Transcript::lend`] appended.
    lent: Option<(usize, usize)>,
    /// Context compaction: the size of the context the provider reported for the last
    /// response (its input and output tokens), unknown before one and after a boundary.
    reported_tokens: Option<u64>,
    /// Context compaction: bytes of content added since the last response.
    added_bytes: usize,
    /// Context compaction: boundaries applied since the last response.
    compactions_in_row: u32,
    /// The turn goes on because a stop hook blocked one of its stops (until new input).
    stop_hook_active: bool,
    /// How many leading messages hold no file source left to inline (`engine::file_sources`):
    /// all but the newest (which may still grow) as of the last request that lent them.
    inlined: usize,
    /// The JSON size of leading messages, at most [`Transcript::inlined`] of them (which no
    /// later request changes), so a request sizes only what is new.
    sized: SizedPrefix,
    /// The heap of the leading messages no later request changes (how many, and their
    /// bytes), so the history cache sizes only what is new ([`Transcript::heap_size`]).
    heap_prefix: (usize, usize),
}

fn push(messages: &mut Vec<Message>, role: Role, mut content: Vec<Value>) {
    if content.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some(last) if last.role == role => last.content.append(&mut content),
        _ => messages.push(Message { role, content }),
    }
}

/// The event's content blocks without empty text blocks: providers reject those, and one in
/// the log must not break every later turn.
fn non_empty_content(ev: &EventRecord) -> Vec<Value> {
    non_empty(ev.body.get("content"))
}

/// Content blocks of `content` (an array) without empty text blocks.
fn non_empty(content: Option<&Value>) -> Vec<Value> {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| {
            b.get("text")
                .and_then(Value::as_str)
                .is_none_or(|t| !t.trim().is_empty())
        })
        .cloned()
        .collect()
}

fn result_block(ev: &EventRecord, id_key: &str) -> Option<(String, Value)> {
    let id = ev.body.get(id_key)?.as_str()?.to_string();
    // What `post_tool_use` hooks gave the model instead of the recorded result, if anything.
    let shown = ev
        .internal
        .as_ref()
        .and_then(|i| i.get("model_result"))
        .unwrap_or(&ev.body);
    // A tool may return empty text; models reject empty text blocks, so they are dropped.
    let content = non_empty(shown.get("content"));
    let is_error = shown
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": content});
    if is_error {
        block["is_error"] = json!(true);
    }
    Some((id, block))
}

fn input_blocks(ev: &EventRecord) -> Vec<Value> {
    let content = non_empty_content(ev);
    if ev.kind == kind::SYSTEM_MESSAGE {
        let text = mast_domain::content::plain_text(&content);
        return vec![
            json!({"type": "text", "text": format!("{SYSTEM_PREFIX}{text}</system-message>")}),
        ];
    }
    content
}

/// The parent's delegation call a delegate's reply answers.
fn delegation_call(ev: &EventRecord) -> Option<String> {
    ev.internal
        .as_ref()?
        .get("call")?
        .as_str()
        .map(str::to_string)
}

/// Whether the loop consumed this input as discarded (a turn whose retries ran out).
fn is_discarded(ev: &EventRecord) -> bool {
    ev.internal
        .as_ref()
        .and_then(|i| i.get("discarded"))
        .is_some()
}

/// Where an event sits in the conversation: its sequence number, except for queued input,
/// which counts from the point the loop consumed it (`internal.after_seq`).
pub fn position(e: &EventRecord) -> (i64, i64) {
    match e
        .internal
        .as_ref()
        .and_then(|i| i.get("after_seq"))
        .and_then(Value::as_i64)
    {
        Some(after) => (after, 1),
        None => (e.seq, 0),
    }
}

/// `events` in conversation order (by [`position`]; the sort is stable).
pub fn in_order(events: &[EventRecord]) -> Vec<&EventRecord> {
    let mut ordered: Vec<&EventRecord> = events.iter().collect();
    ordered.sort_by_key(|e| position(e));
    ordered
}

impl Transcript {
    /// Adds one event. Events must come in conversation order ([`in_order`]); queued input
    /// that is not yet consumed (`processed_at` unset) is skipped, and is added when the loop
    /// consumes it.
    pub fn apply(&mut self, ev: &EventRecord) {
        debug_assert!(
            self.lent.is_none(),
            "an event applied while the messages are lent out would be lost on give_back"
        );
        match ev.kind.as_str() {
            kind::USER_MESSAGE | kind::SYSTEM_MESSAGE if is_discarded(ev) => {}
            // A delegate's reply answers the parent's delegation call.
            kind::THREAD_MESSAGE_RECEIVED if delegation_call(ev).is_some() => {
                self.delegate_reply(ev)
            }
            // A task from the parent is a delegate thread's input.
            kind::USER_MESSAGE | kind::SYSTEM_MESSAGE | kind::THREAD_MESSAGE_RECEIVED
                if ev.processed_at.is_some() =>
            {
                self.input(ev)
            }
            kind::SPAN_START => self.started = Some(ev.id.clone()),
            kind::SPAN_END => {
                self.started = None;
                self.response(ev);
            }
            kind::AGENT_TOOL_RESULT | kind::USER_TOOL_RESULT => self.result(ev, "tool_use_id"),
            kind::USER_CUSTOM_TOOL_RESULT => self.result(ev, "custom_tool_use_id"),
            kind::AGENT_MCP_TOOL_RESULT => self.result(ev, "mcp_tool_use_id"),
            // An outcome's task, and a grader's call for revision, are user-side input.
            kind::USER_DEFINE_OUTCOME => {
                let text = mast_domain::outcome::task_text(&ev.body);
                self.outcome_input(text)
            }
            kind::OUTCOME_EVALUATION_END => {
                let text = mast_domain::outcome::feedback_text(&ev.body);
                self.outcome_input(text)
            }
            kind::AGENT_THREAD_CONTEXT_COMPACTED => self.compacted(ev),
            kind::WORKFLOW_RUN_STATUS_ENDED | kind::WORKFLOW_RUN_STATUS_RUNNING => {
                self.run_notice(ev)
            }
            _ => {}
        }
    }

    /// A workflow run's end, as the primary agent reads it: user input, after the response
    /// of a model request in flight when the run ended (that request did not see it).
    fn run_notice(&mut self, ev: &EventRecord) {
        let Some(text) = crate::workflow_runs::notice_of(ev.internal.as_ref()) else {
            return;
        };
        let block = json!({"type": "text", "text": text});
        if self.started.is_some() {
            self.notices.push(block);
        } else {
            self.stop_hook_active = false;
            self.input_blocks(vec![block]);
        }
    }

    fn delegate_reply(&mut self, ev: &EventRecord) {
        let call = delegation_call(ev).unwrap_or_default();
        let mut b = result_block(ev, "from_session_thread_id")
            .map(|(_, b)| b)
            .unwrap_or_else(|| json!({"type": "tool_result", "content": []}));
        b["tool_use_id"] = json!(call);
        if ev.internal.as_ref().and_then(|i| i.get("is_error")) == Some(&json!(true)) {
            b["is_error"] = json!(true);
        }
        self.added_bytes += json_bytes(&b);
        self.results.insert(call, b);
    }

    fn input(&mut self, ev: &EventRecord) {
        self.stop_hook_active = false;
        self.input_blocks(input_blocks(ev));
    }

    /// Outcome text the model sees as user input (none: the event asks nothing of it).
    fn outcome_input(&mut self, text: Option<String>) {
        if let Some(t) = text {
            self.stop_hook_active = false;
            self.input_blocks(vec![json!({"type": "text", "text": t})]);
        }
    }

    /// Whether the turn goes on because a stop hook blocked one of its stops.
    pub fn stop_hook_active(&self) -> bool {
        self.stop_hook_active
    }

    fn input_blocks(&mut self, blocks: Vec<Value>) {
        self.added_bytes += blocks.iter().map(json_bytes).sum::<usize>();
        if self.open.is_empty() {
            push(&mut self.messages, Role::User, blocks);
        } else {
            self.deferred.extend(blocks);
        }
        self.last_stop = None;
        self.continuations = 0;
        self.after_response = false;
    }

    fn result(&mut self, ev: &EventRecord, id_key: &str) {
        if let Some((id, b)) = result_block(ev, id_key) {
            self.added_bytes += json_bytes(&b);
            self.results.insert(id, b);
        }
    }

    /// A model response: closes the previous response's calls when all are answered, then
    /// adds the assistant content and opens its calls.
    fn response(&mut self, ev: &EventRecord) {
        let Some(internal) = &ev.internal else {
            return;
        };
        let Some(content) = internal.get("content").and_then(Value::as_array) else {
            return;
        };
        if !self.open.is_empty() && self.open.iter().all(|id| self.results.contains_key(id)) {
            self.close_open();
        }
        let stop = internal
            .get("stop_reason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn")
            .to_string();
        let continued = mast_models::ModelStop::parse(&stop).continues();
        if continued && matches!(self.messages.last(), Some(m) if m.role == Role::Assistant) {
            self.continuations += 1;
        } else {
            self.continuations = u32::from(continued);
        }
        push(&mut self.messages, Role::Assistant, content.clone());
        self.open = content
            .iter()
            .filter(|b| {
                matches!(
                    mast_models::Block::of(b),
                    mast_models::Block::ToolUse { .. }
                )
            })
            .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
            .collect();
        let details = internal
            .get("stop_details")
            .cloned()
            .filter(|d| !d.is_null());
        self.last_stop = Some((stop, details));
        self.after_response = true;
        let usage = ev.body.get("model_usage");
        let tokens = |k: &str| {
            usage
                .and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        self.reported_tokens = Some(
            tokens("input_tokens")
                + tokens("cache_creation_input_tokens")
                + tokens("cache_read_input_tokens")
                + tokens("output_tokens"),
        );
        self.added_bytes = 0;
        self.compactions_in_row = 0;
        // Workflow platform calls were answered with the response, privately.
        for call in internal
            .get("platform_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(id) = call.get("id").and_then(Value::as_str) else {
                continue;
            };
            let text = call.get("result").and_then(Value::as_str).unwrap_or("");
            let mut b = json!({"type": "tool_result", "tool_use_id": id,
                               "content": [{"type": "text", "text": text}]});
            if call.get("is_error") == Some(&json!(true)) {
                b["is_error"] = json!(true);
            }
            self.added_bytes += json_bytes(&b);
            self.results.insert(id.to_string(), b);
        }
        if !self.notices.is_empty() {
            let notices = std::mem::take(&mut self.notices);
            self.input_blocks(notices);
        }
        // A stop hook kept the turn going: its reason is the model's next input.
        if let Some(reason) = internal
            .get("stop_hook")
            .and_then(|h| h.get("reason"))
            .and_then(Value::as_str)
        {
            let text = format!("Stop hook feedback: {reason}");
            self.input_blocks(vec![json!({"type": "text", "text": text})]);
            self.stop_hook_active = true;
        }
    }

    /// A compaction boundary (`agent.thread_context_compacted`, whose private part holds the
    /// summary and how many of the newest messages stay verbatim): the model sees the
    /// summary, then those messages. The boundary was chosen on this same fold, so replaying
    /// the log lands on the same messages.
    fn compacted(&mut self, ev: &EventRecord) {
        let Some(internal) = &ev.internal else {
            return;
        };
        let Some(summary) = internal.get("summary").and_then(Value::as_str) else {
            return;
        };
        let keep = internal
            .get("keep")
            .and_then(Value::as_u64)
            .map_or(0, |k| k as usize)
            .min(self.messages.len());
        let tail = self.messages.split_off(self.messages.len() - keep);
        self.messages = vec![Message {
            role: Role::User,
            content: vec![
                json!({"type": "text", "text": mast_models::summarise::boundary_text(summary)}),
            ],
        }];
        for m in tail {
            push(&mut self.messages, m.role, m.content);
        }
        self.reported_tokens = None;
        self.added_bytes = 0;
        self.compactions_in_row += 1;
        self.inlined = 0;
        self.sized = SizedPrefix::default();
        self.heap_prefix = (0, 0);
    }

    /// The closed messages and what the context appends to them (results of answered calls,
    /// input deferred behind them), for choosing a compaction boundary.
    pub fn parts(&self) -> (&[Message], Vec<Value>) {
        (&self.messages, self.closing())
    }

    /// Boundaries applied since the last model response.
    pub fn compactions_in_row(&self) -> u32 {
        self.compactions_in_row
    }

    /// The estimated size in tokens of the context a request would send now: the provider's
    /// count for the last response plus a quarter token per byte added since; without such a
    /// count (no response yet, or a boundary since), a quarter token per byte of the whole
    /// context plus `overhead_bytes` (the system prompt and tool definitions).
    pub fn estimated_tokens(&self, overhead_bytes: usize) -> u64 {
        match self.reported_tokens {
            Some(reported) => reported + (self.added_bytes / BYTES_PER_TOKEN) as u64,
            None => {
                let bytes: usize = self.messages.iter().map(message_bytes).sum::<usize>()
                    + self.closing().iter().map(json_bytes).sum::<usize>()
                    + overhead_bytes;
                (bytes / BYTES_PER_TOKEN) as u64
            }
        }
    }

    /// [`Transcript::estimated_tokens`] when it rests on a provider's count (so it needs no
    /// overhead); None without one.
    pub fn reported_estimate(&self) -> Option<u64> {
        self.reported_tokens
            .map(|reported| reported + (self.added_bytes / BYTES_PER_TOKEN) as u64)
    }

    /// The id of the model request started and not yet ended, if any.
    pub fn started(&self) -> Option<&str> {
        self.started.as_deref()
    }

    /// Moves the open calls' results, then the input deferred behind them, into a user
    /// message.
    fn close_open(&mut self) {
        let mut blocks: Vec<Value> = self
            .open
            .drain(..)
            .filter_map(|id| self.results.remove(&id))
            .collect();
        blocks.append(&mut self.deferred);
        push(&mut self.messages, Role::User, blocks);
    }

    /// The context as of the events added so far. The transcript itself is left as it is, so
    /// it can be extended further.
    pub fn context(&self) -> Context {
        self.finish(true)
    }

    /// The context's messages, moved out rather than copied, for one model request; hand them
    /// back with [`Transcript::give_back`] before the transcript is used again. A loop that
    /// fails in between never gets them back, and keeps nothing (see `engine::history`).
    pub fn lend(&mut self) -> Vec<Message> {
        let closing = self.closing();
        let mut messages = std::mem::take(&mut self.messages);
        self.lent = Some((
            messages.len(),
            messages.last().map_or(0, |m| m.content.len()),
        ));
        push(&mut messages, Role::User, closing);
        messages
    }

    /// The leading messages a request need not look at for file sources: inlined by an
    /// earlier request ([`Transcript::give_back_inlined`]) and unchanged since.
    pub fn inlined(&self) -> usize {
        self.inlined
    }

    /// What is known of the JSON size of `messages` — lent by [`Transcript::lend`], or a copy
    /// of [`Transcript::context`]'s — extended over the leading messages no later request
    /// changes ([`Transcript::inlined`]).
    pub fn sized(&mut self, messages: &[Message]) -> SizedPrefix {
        if self.sized.messages > self.inlined {
            self.sized = SizedPrefix::default();
        }
        self.sized = self.sized.extended(messages, self.inlined);
        self.sized
    }

    /// [`Transcript::give_back`] of messages whose file sources were all inlined.
    pub fn give_back_inlined(&mut self, messages: Vec<Message>) {
        if self.lent.is_none() {
            return;
        }
        self.give_back(messages);
        self.inlined = self.messages.len().saturating_sub(1);
    }

    /// Takes back messages from [`Transcript::lend`], without what it appended. Messages it
    /// did not lend (a copy) are dropped.
    pub fn give_back(&mut self, mut messages: Vec<Message>) {
        let Some((len, last_len)) = self.lent.take() else {
            return;
        };
        messages.truncate(len);
        if let Some(last) = messages.last_mut() {
            last.content.truncate(last_len);
        }
        self.messages = messages;
    }

    /// The heap the transcript holds (`engine::heap_size`), for the history cache's budget.
    /// The leading messages no later request changes ([`Transcript::inlined`]) are counted
    /// once, so a turn deep into a long session sizes only its newest messages.
    pub fn heap_size(&mut self) -> usize {
        let upto = self.inlined.min(self.messages.len());
        if self.heap_prefix.0 > upto {
            self.heap_prefix = (0, 0);
        }
        let (from, bytes) = self.heap_prefix;
        self.heap_prefix = (
            upto,
            bytes
                + self.messages[from..upto]
                    .iter()
                    .map(HeapSize::heap_size)
                    .sum::<usize>(),
        );
        self.heap_prefix.1
            + self.messages.capacity() * std::mem::size_of::<Message>()
            + self.messages[upto..]
                .iter()
                .map(HeapSize::heap_size)
                .sum::<usize>()
            + self.open.heap_size()
            + self.results.heap_size()
            + self.deferred.heap_size()
            + self.notices.heap_size()
            + self
                .last_stop
                .as_ref()
                .map_or(0, |(s, d)| s.heap_size() + d.heap_size())
            + self.started.heap_size()
    }

    /// What the context appends to the messages: the answered calls' results with the input
    /// deferred behind them, or input consumed after the last response.
    fn closing(&self) -> Vec<Value> {
        let answered =
            !self.open.is_empty() && self.open.iter().all(|id| self.results.contains_key(id));
        let mut closing: Vec<Value> = Vec::new();
        if answered {
            closing.extend(
                self.open
                    .iter()
                    .filter_map(|id| self.results.get(id).cloned()),
            );
        }
        if answered || self.open.is_empty() {
            closing.extend(self.deferred.iter().cloned());
        }
        closing
    }

    /// [`Transcript::context`] without the messages (left empty): the tail and the dangling
    /// request, which decide the loop's next step, without copying the conversation.
    pub fn outline(&self) -> Context {
        self.finish(false)
    }

    /// Closes what the log leaves open: answered calls with their results and the input
    /// deferred behind them, or input consumed after the last response.
    fn finish(&self, with_messages: bool) -> Context {
        let missing: Vec<String> = self
            .open
            .iter()
            .filter(|id| !self.results.contains_key(*id))
            .cloned()
            .collect();
        let tools_answered = !self.open.is_empty() && missing.is_empty();
        let closing = self.closing();
        let last_role = if closing.is_empty() {
            self.messages.last().map(|m| m.role)
        } else {
            Some(Role::User)
        };
        let mut messages = Vec::new();
        if with_messages {
            messages = self.messages.clone();
            push(&mut messages, Role::User, closing);
        }
        let tail = if !missing.is_empty() {
            Tail::AwaitingTools(missing)
        } else if !tools_answered && self.after_response {
            // Also covers responses with no content at all (a bare refusal).
            let (stop_reason, stop_details) = self
                .last_stop
                .clone()
                .unwrap_or_else(|| ("end_turn".into(), None));
            Tail::Assistant {
                stop_reason,
                stop_details,
                continuations: self.continuations,
            }
        } else {
            match last_role {
                None => Tail::Empty,
                Some(Role::User) => Tail::User,
                Some(_) => Tail::Assistant {
                    stop_reason: "end_turn".into(),
                    stop_details: None,
                    continuations: 0,
                },
            }
        };
        Context {
            messages,
            tail,
            dangling_request: self.started.clone(),
        }
    }
}

/// The bytes of text that make one token, roughly, in the compaction estimate.
pub const BYTES_PER_TOKEN: usize = 4;

/// The size of a content block as JSON text.
pub fn json_bytes(v: &Value) -> usize {
    serde_json::to_string(v).map_or(0, |t| t.len())
}

/// The size of a message's content as JSON text.
pub fn message_bytes(m: &Message) -> usize {
    m.content.iter().map(json_bytes).sum()
}

/// Builds the context of one thread from its whole log (in sequence order): the reference
/// the incremental fold is checked against; the loop itself only ever extends a [`Transcript`].
#[cfg(test)]
pub fn build(events: &[EventRecord]) -> Context {
    let mut t = Transcript::default();
    for ev in in_order(events) {
        t.apply(ev);
    }
    t.context()
}

/// Prepares a context whose tail is a partial assistant message for continuation: the API
/// rejects a final assistant turn that ends with whitespace.
pub fn trim_for_continuation(messages: &mut Vec<Message>) {
    let Some(last) = messages.last_mut().filter(|m| m.role == Role::Assistant) else {
        return;
    };
    if let Some(block) = last.content.last_mut()
        && let Some(text) = block.get("text").and_then(Value::as_str)
    {
        let trimmed = text.trim_end().to_string();
        if trimmed.is_empty() {
            last.content.pop();
        } else {
            block["text"] = json!(trimmed);
        }
    }
    if last.content.is_empty() {
        messages.pop();
    }
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;

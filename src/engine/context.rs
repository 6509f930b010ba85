//! Rebuilds a thread's model context from its event log. The log is the source of truth: the
//! exact assistant content of each model response is kept privately on its
//! `span.model_request_end`, tool results are keyed by the tool-use event ids (which double as
//! the model's tool_use ids), and input consumed while tool calls were open is placed after
//! their results — so the context never holds a `tool_use` without its `tool_result`.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::domain::content::SYSTEM_PREFIX;
use crate::domain::events::kind;
use crate::models::{Message, Role};
use crate::store::EventRecord;

/// The event types the loop reads: those that shape a thread's model context, and the tool
/// uses and confirmations that decide which calls may run.
pub const LOOP_KINDS: &[&str] = &[
    kind::AGENT_TOOL_USE,
    kind::USER_TOOL_CONFIRMATION,
    kind::USER_MESSAGE,
    kind::SYSTEM_MESSAGE,
    kind::SPAN_START,
    kind::SPAN_END,
    kind::AGENT_TOOL_RESULT,
    kind::USER_CUSTOM_TOOL_RESULT,
    kind::USER_TOOL_RESULT,
    kind::THREAD_MESSAGE_RECEIVED,
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
    ev.body
        .get("content")
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
    // A tool may return empty text; models reject empty text blocks, so they are dropped.
    let content = non_empty_content(ev);
    let is_error = ev
        .body
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
        let text = crate::domain::content::plain_text(&content);
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

/// Where an event sits in the conversation: its sequence number, except for queued input,
/// which counts from the point the loop consumed it (`internal.after_seq`).
fn position(e: &EventRecord) -> (i64, i64) {
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

/// Builds the context of one thread from its events (in sequence order).
pub fn build(events: &[EventRecord]) -> Context {
    let mut ordered: Vec<&EventRecord> = events.iter().collect();
    ordered.sort_by_key(|e| position(e));
    let mut messages = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut results: HashMap<String, Value> = HashMap::new();
    let mut deferred: Vec<Value> = Vec::new();
    let mut last_stop: Option<(String, Option<Value>)> = None;
    let mut continuations = 0u32;
    let mut started: Option<String> = None;
    // Whether the newest thing in the log is a model response (which may have no content).
    let mut after_response = false;

    let close_open = |messages: &mut Vec<Message>,
                      open: &mut Vec<String>,
                      results: &mut HashMap<String, Value>,
                      deferred: &mut Vec<Value>| {
        let mut blocks: Vec<Value> = open
            .drain(..)
            .filter_map(|id| results.remove(&id))
            .collect();
        blocks.append(deferred);
        push(messages, Role::User, blocks);
    };

    for ev in ordered {
        let discarded = ev
            .internal
            .as_ref()
            .and_then(|i| i.get("discarded"))
            .is_some();
        match ev.kind.as_str() {
            kind::USER_MESSAGE | kind::SYSTEM_MESSAGE if discarded => {}
            // A delegate's reply answers the parent's delegation call.
            kind::THREAD_MESSAGE_RECEIVED if delegation_call(ev).is_some() => {
                let call = delegation_call(ev).unwrap_or_default();
                let mut b = result_block(ev, "from_session_thread_id")
                    .map(|(_, b)| b)
                    .unwrap_or_else(|| json!({"type": "tool_result", "content": []}));
                b["tool_use_id"] = json!(call);
                if ev.internal.as_ref().and_then(|i| i.get("is_error")) == Some(&json!(true)) {
                    b["is_error"] = json!(true);
                }
                results.insert(call, b);
            }
            // A task from the parent is a delegate thread's input.
            kind::USER_MESSAGE | kind::SYSTEM_MESSAGE | kind::THREAD_MESSAGE_RECEIVED
                if ev.processed_at.is_some() =>
            {
                let blocks = input_blocks(ev);
                if open.is_empty() {
                    push(&mut messages, Role::User, blocks);
                } else {
                    deferred.extend(blocks);
                }
                last_stop = None;
                continuations = 0;
                after_response = false;
            }
            kind::SPAN_START => started = Some(ev.id.clone()),
            kind::SPAN_END => {
                started = None;
                let Some(internal) = &ev.internal else {
                    continue;
                };
                let Some(content) = internal.get("content").and_then(Value::as_array) else {
                    continue;
                };
                if !open.is_empty() && open.iter().all(|id| results.contains_key(id)) {
                    close_open(&mut messages, &mut open, &mut results, &mut deferred);
                }
                let stop = internal
                    .get("stop_reason")
                    .and_then(Value::as_str)
                    .unwrap_or("end_turn")
                    .to_string();
                if matches!(stop.as_str(), "max_tokens" | "pause_turn")
                    && matches!(messages.last(), Some(m) if m.role == Role::Assistant)
                {
                    continuations += 1;
                } else {
                    continuations = u32::from(matches!(stop.as_str(), "max_tokens" | "pause_turn"));
                }
                push(&mut messages, Role::Assistant, content.clone());
                open = content
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
                    .collect();
                last_stop = Some((
                    stop,
                    internal
                        .get("stop_details")
                        .cloned()
                        .filter(|d| !d.is_null()),
                ));
                after_response = true;
            }
            kind::AGENT_TOOL_RESULT => {
                if let Some((id, b)) = result_block(ev, "tool_use_id") {
                    results.insert(id, b);
                }
            }
            kind::USER_CUSTOM_TOOL_RESULT => {
                if let Some((id, b)) = result_block(ev, "custom_tool_use_id") {
                    results.insert(id, b);
                }
            }
            kind::USER_TOOL_RESULT => {
                if let Some((id, b)) = result_block(ev, "tool_use_id") {
                    results.insert(id, b);
                }
            }
            _ => {}
        }
    }

    let missing: Vec<String> = open
        .iter()
        .filter(|id| !results.contains_key(*id))
        .cloned()
        .collect();
    let tools_answered = !open.is_empty() && missing.is_empty();
    if tools_answered {
        close_open(&mut messages, &mut open, &mut results, &mut deferred);
    } else if open.is_empty() && !deferred.is_empty() {
        push(&mut messages, Role::User, std::mem::take(&mut deferred));
    }

    let tail = if !missing.is_empty() {
        Tail::AwaitingTools(missing)
    } else if !tools_answered && after_response {
        // Also covers responses with no content at all (a bare refusal).
        let (stop_reason, stop_details) = last_stop.unwrap_or_else(|| ("end_turn".into(), None));
        Tail::Assistant {
            stop_reason,
            stop_details,
            continuations,
        }
    } else {
        match messages.last() {
            None => Tail::Empty,
            Some(m) if m.role == Role::User => Tail::User,
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
        dangling_request: started,
    }
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
mod tests {
    use super::*;

    fn ev(
        seq: i64,
        kind: &str,
        body: Value,
        internal: Option<Value>,
        processed: bool,
    ) -> EventRecord {
        EventRecord {
            session_id: "s".into(),
            seq,
            id: format!("sevt_{seq}"),
            thread_id: None,
            kind: kind.into(),
            body,
            internal,
            processed_at: processed.then_some(1),
            created_at: 1,
        }
    }

    fn text(t: &str) -> Value {
        json!([{"type":"text","text":t}])
    }

    #[test]
    fn tool_results_precede_input_consumed_while_open() {
        let events = vec![
            ev(
                1,
                kind::USER_MESSAGE,
                json!({"content": text("go")}),
                None,
                true,
            ),
            ev(2, kind::SPAN_START, json!({}), None, true),
            ev(
                3,
                kind::SPAN_END,
                json!({}),
                Some(
                    json!({"content":[{"type":"tool_use","id":"sevt_9","name":"t","input":{}}],"stop_reason":"tool_use"}),
                ),
                true,
            ),
            ev(
                4,
                kind::USER_MESSAGE,
                json!({"content": text("also this")}),
                None,
                true,
            ),
            ev(
                5,
                kind::USER_CUSTOM_TOOL_RESULT,
                json!({"custom_tool_use_id":"sevt_9","content": text("r")}),
                None,
                true,
            ),
        ];
        let c = build(&events);
        assert_eq!(c.tail, Tail::User);
        assert_eq!(c.messages.len(), 3);
        assert_eq!(c.messages[2].content[0]["type"], "tool_result");
        assert_eq!(c.messages[2].content[1]["text"], "also this");
    }

    #[test]
    fn input_consumed_after_a_response_follows_it() {
        let mut queued = ev(
            3,
            kind::USER_MESSAGE,
            json!({"content": text("second")}),
            Some(json!({"after_seq": 5})),
            true,
        );
        queued.processed_at = Some(2);
        let events = vec![
            ev(
                1,
                kind::USER_MESSAGE,
                json!({"content": text("first")}),
                None,
                true,
            ),
            ev(2, kind::SPAN_START, json!({}), None, true),
            queued,
            ev(4, kind::AGENT_MESSAGE, json!({}), None, true),
            ev(
                5,
                kind::SPAN_END,
                json!({}),
                Some(json!({"content":[{"type":"text","text":"one"}],"stop_reason":"end_turn"})),
                true,
            ),
        ];
        let c = build(&events);
        assert_eq!(c.tail, Tail::User);
        assert_eq!(c.messages.len(), 3);
        assert_eq!(c.messages[2].content[0]["text"], "second");
    }

    #[test]
    fn open_tools_and_dangling_requests_and_queued_input() {
        let events = vec![
            ev(
                1,
                kind::USER_MESSAGE,
                json!({"content": text("go")}),
                None,
                true,
            ),
            ev(2, kind::SPAN_START, json!({}), None, true),
            ev(
                3,
                kind::SPAN_END,
                json!({}),
                Some(
                    json!({"content":[{"type":"tool_use","id":"a","name":"t","input":{}},{"type":"tool_use","id":"b","name":"t","input":{}}],"stop_reason":"tool_use"}),
                ),
                true,
            ),
            ev(
                4,
                kind::USER_CUSTOM_TOOL_RESULT,
                json!({"custom_tool_use_id":"a","content": text("r")}),
                None,
                true,
            ),
            ev(
                5,
                kind::USER_MESSAGE,
                json!({"content": text("queued")}),
                None,
                false,
            ),
            ev(6, kind::SPAN_START, json!({}), None, true),
        ];
        let c = build(&events);
        assert_eq!(c.tail, Tail::AwaitingTools(vec!["b".into()]));
        assert_eq!(c.dangling_request.as_deref(), Some("sevt_6"));
        assert_eq!(c.messages.len(), 2, "queued input is not in the context");
    }
}

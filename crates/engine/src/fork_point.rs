//! Where a fork of a session's log may end (Mast's own `POST /v1/sessions/{id}/fork`).
//!
//! A fork copies a prefix of the log and starts idle, so the prefix must be a point the loop
//! could rest at: every tool call in it has its result, no model request is half done, no
//! turn is left going on after a stop hook refused its stop, and no input sits queued or
//! consumed later than the prefix's end. The rule: start at the
//! requested event and, while the prefix breaks one of these, move its end back to just
//! before what breaks it — for an unanswered call, before the model request that made it (so
//! the response that called the tool goes too, and the assistant turn is never cut in half);
//! for a request with no end, before that request; for input, before the input. Each step
//! only shortens the prefix, so it ends, at the latest (longest) clean prefix within the
//! requested one.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use mast_domain::events::kind;
use mast_models::Block;
use mast_store::EventRecord;

/// The sequence number a fork at event `requested` (a sequence number of `events`) ends at:
/// `requested` itself when the prefix is clean, an earlier one otherwise (0: nothing).
/// `events` are the session's log in sequence order, from its start.
pub fn snap(events: &[EventRecord], requested: i64) -> i64 {
    let mut end = requested;
    loop {
        let next = first_clean_end(events, end);
        if next == end {
            return end;
        }
        end = next;
    }
}

/// `end`, or an earlier end that removes the first thing that breaks the prefix.
fn first_clean_end(events: &[EventRecord], end: i64) -> i64 {
    let mut cut = end;
    // The open model request of each thread (by its start's sequence number).
    let mut open_span: HashMap<Option<&str>, i64> = HashMap::new();
    // The last request each thread started, which a tool call of that thread comes from.
    let mut last_span: HashMap<Option<&str>, i64> = HashMap::new();
    let mut calls: Vec<(String, i64)> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    // A response whose stop a stop hook refused, by thread (its request's start): the turn
    // goes on, so the prefix must hold the response to the hook's feedback too.
    let mut stop_refused: HashMap<Option<&str>, i64> = HashMap::new();
    // Open workflow runs, by the start of the request whose response started them.
    let mut open_runs: HashMap<String, i64> = HashMap::new();
    for ev in events.iter().take_while(|e| e.seq <= end) {
        let thread = ev.thread_id.as_deref();
        let span_of = |last: &HashMap<Option<&str>, i64>| last.get(&thread).copied();
        match ev.kind.as_str() {
            kind::SPAN_START => {
                open_span.insert(thread, ev.seq);
                last_span.insert(thread, ev.seq);
            }
            kind::SPAN_END => {
                let start = open_span.remove(&thread).unwrap_or(ev.seq);
                for id in called(ev) {
                    calls.push((id, start));
                }
                // Workflow platform calls are answered with the response that made them; a
                // run a call started is open from this request on.
                for (id, started) in platform_calls(ev) {
                    answered.insert(id);
                    if let Some(run) = started {
                        open_runs.insert(run, start);
                    }
                }
                stop_refused.remove(&thread);
                if ev
                    .internal
                    .as_ref()
                    .and_then(|i| i.get("stop_hook"))
                    .is_some()
                {
                    stop_refused.insert(thread, start);
                }
            }
            kind::AGENT_TOOL_USE | kind::AGENT_CUSTOM_TOOL_USE | kind::AGENT_MCP_TOOL_USE => {
                calls.push((ev.id.clone(), span_of(&last_span).unwrap_or(ev.seq)));
            }
            kind::AGENT_TOOL_RESULT | kind::USER_TOOL_RESULT => {
                answer(ev, "tool_use_id", &mut answered)
            }
            kind::USER_CUSTOM_TOOL_RESULT => answer(ev, "custom_tool_use_id", &mut answered),
            kind::AGENT_MCP_TOOL_RESULT => answer(ev, "mcp_tool_use_id", &mut answered),
            // A workflow run works in the background from the response that started it
            // until its end: a prefix holding its start must hold its end too.
            kind::WORKFLOW_RUN_CREATED => {
                if let Some(run) = ev.body.get("workflow_run_id").and_then(Value::as_str) {
                    open_runs
                        .entry(run.to_string())
                        .or_insert(span_of(&last_span).unwrap_or(ev.seq));
                }
            }
            kind::WORKFLOW_RUN_STATUS_ENDED => {
                if let Some(run) = ev.body.get("workflow_run_id").and_then(Value::as_str) {
                    open_runs.remove(run);
                }
            }
            _ => {}
        }
        // A delegate's reply answers the parent's delegation call.
        if ev.kind == kind::THREAD_MESSAGE_RECEIVED
            && let Some(call) = internal_str(ev, "call")
        {
            answered.insert(call);
        }
        if is_input(ev) && !consumed_by(ev, end) {
            cut = cut.min(ev.seq - 1);
        }
    }
    for start in open_span
        .values()
        .chain(stop_refused.values())
        .chain(open_runs.values())
    {
        cut = cut.min(start - 1);
    }
    for (id, start) in &calls {
        if !answered.contains(id.as_str()) {
            cut = cut.min(start - 1);
        }
    }
    cut.max(0)
}

/// The tool calls a model response made (its `tool_use` blocks' ids, which are also the ids
/// of their tool-use events).
fn called(ev: &EventRecord) -> Vec<String> {
    ev.internal
        .as_ref()
        .and_then(|i| i.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| matches!(Block::of(b), Block::ToolUse { .. }))
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The workflow platform calls a model response made and was answered with: each call's id,
/// and the run it started, if it started one.
fn platform_calls(ev: &EventRecord) -> impl Iterator<Item = (&str, Option<String>)> {
    ev.internal
        .as_ref()
        .and_then(|i| i.get("platform_calls"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let id = c.get("id").and_then(Value::as_str)?;
            let started = (c.get("name").and_then(Value::as_str)
                == Some(crate::workflow_runs::START_RUN)
                && c.get("is_error") != Some(&Value::Bool(true)))
            .then(|| c.get("result").and_then(Value::as_str))
            .flatten()
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
            .and_then(|r| r.get("workflow_run_id")?.as_str().map(str::to_string));
            Some((id, started))
        })
}

fn answer<'a>(ev: &'a EventRecord, key: &str, answered: &mut HashSet<&'a str>) {
    if let Some(id) = ev.body.get(key).and_then(Value::as_str) {
        answered.insert(id);
    }
}

fn internal_str<'a>(ev: &'a EventRecord, key: &str) -> Option<&'a str> {
    ev.internal.as_ref()?.get(key)?.as_str()
}

/// Input the loop consumes into a thread's conversation.
fn is_input(ev: &EventRecord) -> bool {
    matches!(
        ev.kind.as_str(),
        kind::USER_MESSAGE | kind::SYSTEM_MESSAGE | kind::THREAD_MESSAGE_RECEIVED
    )
}

/// Whether input was consumed within the first `end` events: at its own place (accepted
/// while idle), or queued and consumed at a position (`internal.after_seq`) up to `end`.
fn consumed_by(ev: &EventRecord, end: i64) -> bool {
    if ev.processed_at.is_none() {
        return false;
    }
    match ev.internal.as_ref().and_then(|i| i.get("after_seq")) {
        Some(after) => after.as_i64().is_some_and(|a| a <= end),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(seq: i64, kind: &str, body: Value, internal: Option<Value>) -> EventRecord {
        EventRecord {
            session_id: "s".into(),
            seq,
            id: format!("e{seq}"),
            thread_id: Some("t".into()),
            kind: kind.into(),
            body,
            internal,
            processed_at: Some(seq),
            created_at: seq,
        }
    }

    fn response(seq: i64, calls: &[&str]) -> EventRecord {
        let mut content = vec![json!({"type": "text", "text": "ok"})];
        content.extend(
            calls
                .iter()
                .map(|id| json!({"type": "tool_use", "id": id, "name": "x", "input": {}})),
        );
        ev(
            seq,
            kind::SPAN_END,
            json!({}),
            Some(json!({"content": content, "stop_reason": "tool_use"})),
        )
    }

    /// A turn: message, request, response calling `e5`, the call, its result, a second
    /// request and its final answer, idle.
    fn turn() -> Vec<EventRecord> {
        vec![
            ev(1, kind::USER_MESSAGE, json!({"content": []}), None),
            ev(2, kind::STATUS_RUNNING, json!({}), None),
            ev(3, kind::SPAN_START, json!({}), None),
            response(4, &["e5"]),
            ev(5, kind::AGENT_CUSTOM_TOOL_USE, json!({"name": "x"}), None),
            ev(6, kind::STATUS_IDLE, json!({}), None),
            ev(
                7,
                kind::USER_CUSTOM_TOOL_RESULT,
                json!({"custom_tool_use_id": "e5"}),
                None,
            ),
            ev(8, kind::STATUS_RUNNING, json!({}), None),
            ev(9, kind::SPAN_START, json!({}), None),
            response(10, &[]),
            ev(11, kind::AGENT_MESSAGE, json!({"content": []}), None),
            ev(12, kind::STATUS_IDLE, json!({}), None),
        ]
    }

    /// A turn that starts a workflow run (its hidden call `e4c` answered with the response),
    /// goes on, and a later end of the run that the agent reads.
    fn run_turn() -> Vec<EventRecord> {
        let mut started = response(4, &["e4c"]);
        started.internal.as_mut().unwrap()["platform_calls"] = json!([{"id": "e4c", "name": "ant__start_workflow_run",
                    "result": r#"{"workflow_run_id": "wrun_1"}"#, "is_error": false}]);
        let run = json!({"workflow_run_id": "wrun_1"});
        vec![
            ev(1, kind::USER_MESSAGE, json!({"content": []}), None),
            ev(2, kind::STATUS_RUNNING, json!({}), None),
            ev(3, kind::SPAN_START, json!({}), None),
            started,
            ev(5, kind::WORKFLOW_RUN_CREATED, run.clone(), None),
            ev(6, kind::SPAN_START, json!({}), None),
            response(7, &[]),
            ev(8, kind::WORKFLOW_RUN_STATUS_ENDED, run, None),
            ev(9, kind::SPAN_START, json!({}), None),
            response(10, &[]),
            ev(11, kind::STATUS_IDLE, json!({}), None),
        ]
    }

    #[test]
    fn a_fork_holds_a_workflow_run_whole_or_not_at_all() {
        let log = run_turn();
        // While the run is open the prefix goes back before the request that started it.
        for at in [4, 5, 6, 7] {
            assert_eq!(snap(&log, at), 2, "at {at}");
        }
        // Once it ended, the hidden call counts as answered and the point stays.
        for at in [8, 10, 11] {
            assert_eq!(snap(&log, at), at, "at {at}");
        }
    }

    #[test]
    fn a_clean_point_is_kept() {
        let log = turn();
        for at in [1, 2, 7, 8, 10, 11, 12] {
            assert_eq!(snap(&log, at), at, "at {at}");
        }
    }

    #[test]
    fn an_unanswered_call_moves_the_end_before_the_request_that_made_it() {
        let log = turn();
        // The response (4), the call (5) and the idle waiting on it (6) all go.
        for at in [4, 5, 6] {
            assert_eq!(snap(&log, at), 2, "at {at}");
        }
    }

    #[test]
    fn a_stop_a_hook_refused_is_no_resting_point_until_the_model_answered() {
        let mut log: Vec<EventRecord> = turn().into_iter().take(9).collect();
        // The response at 10 ended the turn, but a stop hook refused the stop.
        log.push(ev(
            10,
            kind::SPAN_END,
            json!({}),
            Some(json!({"content": [], "stop_reason": "end_turn",
                         "stop_hook": {"hook_id": "hook_1", "reason": "run the tests"}})),
        ));
        log.push(ev(11, kind::AGENT_MESSAGE, json!({"content": []}), None));
        log.push(ev(12, kind::SPAN_START, json!({}), None));
        log.push(response(13, &[]));
        log.push(ev(14, kind::STATUS_IDLE, json!({}), None));
        for at in [10, 11, 12] {
            assert_eq!(snap(&log, at), 8, "at {at}");
        }
        // Once the model answered the hook's feedback, the turn may rest there.
        assert_eq!(snap(&log, 13), 13);
        assert_eq!(snap(&log, 14), 14);
    }

    #[test]
    fn an_unfinished_request_moves_the_end_before_it() {
        let log = turn();
        assert_eq!(snap(&log, 3), 2);
        assert_eq!(snap(&log, 9), 8);
    }

    #[test]
    fn input_queued_or_consumed_after_the_end_goes() {
        let mut log = turn();
        log.truncate(9); // 9 starts a request
        // A message queued while it runs, consumed after the response (11).
        log.push(ev(
            10,
            kind::USER_MESSAGE,
            json!({"content": []}),
            Some(json!({"after_seq": 11})),
        ));
        log.push(response(11, &[]));
        log.push(ev(12, kind::SPAN_START, json!({}), None));
        assert_eq!(
            snap(&log, 10),
            8,
            "the request is open and the input not consumed yet"
        );
        assert_eq!(snap(&log, 11), 11, "consumed at 11: part of the fork");
        assert_eq!(snap(&log, 12), 11);
        // Still queued (read while the original runs): it goes, and the request before it.
        log[9].processed_at = None;
        log[9].internal = None;
        assert_eq!(snap(&log, 11), 8);
    }

    #[test]
    fn a_call_answered_only_after_a_later_call_in_the_same_response() {
        // Two calls in one response; the fork point falls between their results.
        let log = vec![
            ev(1, kind::USER_MESSAGE, json!({"content": []}), None),
            ev(2, kind::SPAN_START, json!({}), None),
            response(3, &["e4", "e5"]),
            ev(4, kind::AGENT_TOOL_USE, json!({"name": "bash"}), None),
            ev(5, kind::AGENT_TOOL_USE, json!({"name": "bash"}), None),
            ev(
                6,
                kind::AGENT_TOOL_RESULT,
                json!({"tool_use_id": "e4"}),
                None,
            ),
            ev(
                7,
                kind::AGENT_TOOL_RESULT,
                json!({"tool_use_id": "e5"}),
                None,
            ),
        ];
        assert_eq!(snap(&log, 6), 1);
        assert_eq!(snap(&log, 7), 7);
    }

    #[test]
    fn a_delegation_answered_by_the_delegates_reply() {
        let mut reply = ev(
            8,
            kind::THREAD_MESSAGE_RECEIVED,
            json!({"content": []}),
            Some(json!({"call": "e4"})),
        );
        reply.thread_id = Some("t".into());
        let mut task = ev(
            5,
            kind::THREAD_MESSAGE_RECEIVED,
            json!({"content": []}),
            None,
        );
        task.thread_id = Some("child".into());
        let mut child_start = ev(6, kind::SPAN_START, json!({}), None);
        child_start.thread_id = Some("child".into());
        let mut child_end = response(7, &[]);
        child_end.thread_id = Some("child".into());
        let log = vec![
            ev(1, kind::USER_MESSAGE, json!({"content": []}), None),
            ev(2, kind::SPAN_START, json!({}), None),
            response(3, &["e4"]),
            ev(4, kind::THREAD_MESSAGE_SENT, json!({"content": []}), None),
            task,
            child_start,
            child_end,
            reply,
        ];
        // While the delegate works the primary's call is open: back before its request.
        for at in [4, 5, 6, 7] {
            assert_eq!(snap(&log, at), 1, "at {at}");
        }
        assert_eq!(snap(&log, 8), 8);
    }
}

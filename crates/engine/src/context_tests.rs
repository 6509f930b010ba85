//! The fold checked against a whole rebuild, event by event and across requests.

use super::*;

fn ev(seq: i64, kind: &str, body: Value, internal: Option<Value>, processed: bool) -> EventRecord {
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

/// The log's first three events: input, then a model request that ends asking for `tool`
/// (tool use `sevt_9`).
fn tool_call_opened(tool: &str) -> Vec<EventRecord> {
    vec![
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
                json!({"content":[{"type":"tool_use","id":"sevt_9","name":tool,"input":{}}],"stop_reason":"tool_use"}),
            ),
            true,
        ),
    ]
}

/// Folding the log in two reads (any split a store read can make) gives the context a whole rebuild gives.
fn assert_incremental(events: &[EventRecord]) {
    let whole = build(events);
    for split in 0..=events.len() {
        // A read that returns consumed input also returns everything logged up to where
        // it was consumed (see `Loop::refresh`), so no split falls before that.
        let next = events.get(split).map_or(i64::MAX, |e| e.seq);
        if events[..split].iter().any(|e| position(e).0 >= next) {
            continue;
        }
        let mut t = Transcript::default();
        for part in [&events[..split], &events[split..]] {
            for e in in_order(part) {
                t.apply(e);
            }
            // Reading the context leaves the transcript as it was.
            let _ = t.context();
        }
        assert_eq!(t.context(), whole, "split at {split}");
        // Lending the messages to a request and taking them back changes nothing.
        let lent = t.lend();
        assert_eq!(lent, whole.messages);
        t.give_back(lent);
        assert_eq!(t.context(), whole, "after a lend, split at {split}");
        let outline = t.outline();
        assert_eq!(
            (outline.tail, outline.dangling_request),
            (whole.tail.clone(), whole.dangling_request.clone())
        );
    }
}

#[test]
fn tool_results_precede_input_consumed_while_open() {
    let events = [
        tool_call_opened("t"),
        vec![
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
        ],
    ]
    .concat();
    assert_incremental(&events);
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
    assert_incremental(&events);
    let c = build(&events);
    assert_eq!(c.tail, Tail::User);
    assert_eq!(c.messages.len(), 3);
    assert_eq!(c.messages[2].content[0]["text"], "second");
}

#[test]
fn a_compaction_boundary_replaces_older_messages_with_its_summary() {
    let response = |seq: i64, content: Value, stop: &str, input: u64| {
        ev(
            seq,
            kind::SPAN_END,
            json!({"model_usage": {"input_tokens": input, "output_tokens": 2}}),
            Some(json!({"content": content, "stop_reason": stop})),
            true,
        )
    };
    let events = vec![
        ev(
            1,
            kind::USER_MESSAGE,
            json!({"content": text("first")}),
            None,
            true,
        ),
        ev(2, kind::SPAN_START, json!({}), None, true),
        response(
            3,
            json!([{"type":"tool_use","id":"t1","name":"t","input":{}}]),
            "tool_use",
            100,
        ),
        ev(
            4,
            kind::AGENT_TOOL_RESULT,
            json!({"tool_use_id":"t1","content": text("result")}),
            None,
            true,
        ),
        ev(5, kind::SPAN_START, json!({}), None, true),
        response(6, json!([{"type":"text","text":"done"}]), "end_turn", 200),
        ev(
            7,
            kind::USER_MESSAGE,
            json!({"content": text("second")}),
            None,
            true,
        ),
        // The summarisation request's span has no content: it is not a response.
        ev(8, kind::SPAN_START, json!({}), None, true),
        ev(
            9,
            kind::SPAN_END,
            json!({"model_usage": {"input_tokens": 7}}),
            None,
            true,
        ),
        ev(
            10,
            kind::AGENT_THREAD_CONTEXT_COMPACTED,
            json!({}),
            Some(json!({"summary": "S", "keep": 2})),
            true,
        ),
    ];
    let before = build(&events[..7]);
    assert_eq!(before.messages.len(), 5);
    let c = build(&events);
    assert_incremental(&events);
    assert_eq!(c.tail, Tail::User);
    assert_eq!(c.dangling_request, None);
    // The summary, then the two newest messages verbatim (the summary merges into none:
    // the kept part starts with the assistant's answer).
    assert_eq!(c.messages.len(), 3);
    assert_eq!(c.messages[0].role, Role::User);
    let summary = c.messages[0].content[0]["text"].as_str().unwrap();
    assert!(
        summary.contains("S") && summary.contains("context-summary"),
        "{summary}"
    );
    assert_eq!(c.messages[1..], before.messages[3..]);
    // Before the boundary the estimate is the last response's count plus the bytes added
    // since; after it, the bytes of the whole (smaller) context.
    let mut t = Transcript::default();
    for e in in_order(&events[..7]) {
        t.apply(e);
    }
    let added = json_bytes(&json!({"type":"text","text":"second"})) / BYTES_PER_TOKEN;
    assert_eq!(t.estimated_tokens(0), 202 + added as u64);
    for e in in_order(&events[7..]) {
        t.apply(e);
    }
    let bytes: usize = c.messages.iter().map(message_bytes).sum();
    assert_eq!(
        t.estimated_tokens(40),
        ((bytes + 40) / BYTES_PER_TOKEN) as u64
    );
    assert_eq!(t.compactions_in_row(), 1);
}

/// Requests made as the log grows, across a compaction boundary: the size the transcript
/// knows always adds up to the whole conversation's, and covers all but what is new.
#[test]
fn the_sized_prefix_follows_requests_and_compaction() {
    use mast_models::json_size::content_len;
    let mut t = Transcript::default();
    let mut seq = 0;
    let mut next = |kind: &str, body: Value, internal: Option<Value>| {
        seq += 1;
        ev(seq, kind, body, internal, true)
    };
    let request = |t: &mut Transcript| {
        let lent = t.lend();
        let sized = t.sized(&lent);
        let whole: usize = lent.iter().map(content_len).sum();
        assert_eq!(sized.total(&lent), whole);
        let known = sized.messages;
        t.give_back_inlined(lent);
        known
    };
    let mut known = vec![];
    for round in 0..6 {
        if round == 3 {
            t.apply(&next(
                kind::AGENT_THREAD_CONTEXT_COMPACTED,
                json!({}),
                Some(json!({"summary": "S", "keep": 2})),
            ));
        }
        let say = format!("message {round} with \"quotes\"\n");
        t.apply(&next(
            kind::USER_MESSAGE,
            json!({"content": text(&say)}),
            None,
        ));
        known.push(request(&mut t));
        t.apply(&next(kind::SPAN_START, json!({}), None));
        t.apply(&next(
            kind::SPAN_END,
            json!({}),
            Some(json!({"content": text("answer"), "stop_reason": "end_turn"})),
        ));
    }
    // Each request knows all but the previous request's newest message and what came
    // since; a boundary starts again from nothing.
    assert_eq!(known, [0, 0, 2, 0, 2, 4]);
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
    assert_incremental(&events);
    let c = build(&events);
    assert_eq!(c.tail, Tail::AwaitingTools(vec!["b".into()]));
    assert_eq!(c.dangling_request.as_deref(), Some("sevt_6"));
    assert_eq!(c.messages.len(), 2, "queued input is not in the context");
}

#[test]
fn a_blocked_stop_is_the_models_next_input_until_new_input() {
    let events = vec![
        ev(
            1,
            kind::USER_MESSAGE,
            json!({"content": text("fix it")}),
            None,
            true,
        ),
        ev(2, kind::SPAN_START, json!({}), None, true),
        ev(
            3,
            kind::SPAN_END,
            json!({}),
            Some(json!({"content": text("done"), "stop_reason": "end_turn",
                         "stop_hook": {"hook_id": "hook_1", "reason": "run the tests first"}})),
            true,
        ),
    ];
    assert_incremental(&events);
    let c = build(&events);
    assert_eq!(c.tail, Tail::User, "the model is asked again");
    assert_eq!(
        c.messages[2].content[0]["text"],
        "Stop hook feedback: run the tests first"
    );
    let mut t = Transcript::default();
    for e in &events {
        t.apply(e);
    }
    assert!(t.stop_hook_active());
    // A stop without a hook's block keeps the flag (the turn still goes on because of it).
    t.apply(&ev(4, kind::SPAN_START, json!({}), None, true));
    t.apply(&ev(
        5,
        kind::SPAN_END,
        json!({}),
        Some(json!({"content": text("tests pass"), "stop_reason": "end_turn"})),
        true,
    ));
    assert!(t.stop_hook_active());
    assert!(matches!(t.outline().tail, Tail::Assistant { .. }));
    t.apply(&ev(
        6,
        kind::USER_MESSAGE,
        json!({"content": text("next")}),
        None,
        true,
    ));
    assert!(!t.stop_hook_active(), "new input starts a fresh turn");
}

#[test]
fn the_model_sees_what_post_hooks_made_of_a_result() {
    let events = [
        tool_call_opened("bash"),
        vec![ev(
            4,
            kind::AGENT_TOOL_RESULT,
            json!({"tool_use_id":"sevt_9","content": text("token=abc"), "is_error": false,
                       "hooks": [{"hook_id": "hook_1"}]}),
            Some(json!({"model_result": {"content": text("token=[redacted]"), "is_error": true}})),
            true,
        )],
    ]
    .concat();
    assert_incremental(&events);
    let c = build(&events);
    let result = &c.messages[2].content[0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["content"][0]["text"], "token=[redacted]");
    assert_eq!(result["is_error"], true);
}

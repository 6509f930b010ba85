//! What a thread's loop keeps of its events once a compaction boundary passed: without this,
//! a loop (and the history cache after it) held every event of its thread, so a long session
//! grew without bound even though its context was compacted.
//!
//! The transcript is folded incrementally, so the loop needs its events only for a few
//! look-ups, and none of them reaches back past the last boundary but two:
//!
//! - the calls it acts on (a tool use, its confirmation and result, which calls are MCP
//!   ones) are those of responses after the boundary: a boundary is only written on a user
//!   tail, with no call open and none running, and the response that opens the next calls
//!   comes after it;
//! - a delegate's reply (`turn_stop`) searches back for the newest model response or task,
//!   and the fork checkpoint for the newest consumed `user.message`: of each kind, the newest
//!   event before the boundary is kept, which is the one such a search would find there.
//!
//! Input not yet consumed is always kept (its place in the conversation is not known yet),
//! and so is input consumed after the boundary, wherever its sequence number lies. Outcome
//! definitions are kept too: the grader reads its rubric from the one it judges, and an
//! outcome's iterations may run across any number of boundaries (they are a few per session).

use mast_domain::events::kind;
use mast_store::EventRecord;

use super::context::position;

/// Whether `e` stays whatever boundaries pass (`Loop::grader_input` reads the rubric of the
/// outcome it judges from it).
fn always_kept(e: &EventRecord) -> bool {
    e.kind == kind::USER_DEFINE_OUTCOME
}

/// Whether `e` is what a delegate's reply searches back for (`Loop::final_message`).
fn reply_mark(e: &EventRecord) -> bool {
    e.kind == kind::SPAN_END || e.kind == kind::THREAD_MESSAGE_RECEIVED
}

/// Whether `e` is what the fork checkpoint searches back for (`Loop::checkpoint_workspace`).
fn checkpoint_mark(e: &EventRecord) -> bool {
    e.kind == kind::USER_MESSAGE
        && e.processed_at.is_some()
        && e.internal
            .as_ref()
            .and_then(|i| i.get("discarded"))
            .is_none()
}

/// The position of the newest compaction boundary among `events`, if any.
pub fn last_boundary(events: &[EventRecord]) -> Option<(i64, i64)> {
    events
        .iter()
        .filter(|e| e.kind == kind::AGENT_THREAD_CONTEXT_COMPACTED)
        .map(position)
        .max()
}

/// Drops from `events` (a thread's events in the order read) what lies before the boundary
/// at `boundary` and no look-up needs any more; returns the dropped events.
pub fn before_boundary(events: &mut Vec<EventRecord>, boundary: (i64, i64)) -> Vec<EventRecord> {
    let droppable =
        |e: &EventRecord| e.processed_at.is_some() && position(e) < boundary && !always_kept(e);
    let newest =
        |mark: fn(&EventRecord) -> bool| events.iter().rposition(|e| droppable(e) && mark(e));
    let keep = [newest(reply_mark), newest(checkpoint_mark)];
    if !events
        .iter()
        .enumerate()
        .any(|(i, e)| droppable(e) && !keep.contains(&Some(i)))
    {
        return Vec::new();
    }
    let mut kept = Vec::with_capacity(events.len());
    let mut dropped = Vec::new();
    for (i, e) in std::mem::take(events).into_iter().enumerate() {
        if droppable(&e) && !keep.contains(&Some(i)) {
            dropped.push(e);
        } else {
            kept.push(e);
        }
    }
    kept.shrink_to_fit();
    *events = kept;
    dropped
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn event(seq: i64, kind: &str, internal: Option<Value>, processed: bool) -> EventRecord {
        EventRecord {
            session_id: "s".into(),
            seq,
            id: format!("sevt_{seq}"),
            thread_id: None,
            kind: kind.into(),
            body: json!({}),
            internal,
            processed_at: processed.then_some(1),
            created_at: 1,
        }
    }

    fn seqs(events: &[EventRecord]) -> Vec<i64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn what_precedes_the_boundary_goes_but_the_newest_marks() {
        let after = |s: i64| Some(json!({"after_seq": s}));
        let mut events = vec![
            event(1, kind::USER_MESSAGE, after(0), true),
            event(2, kind::SPAN_START, None, true),
            event(3, kind::SPAN_END, None, true),
            event(4, kind::USER_MESSAGE, after(3), true),
            // Consumed after the boundary, though logged before it.
            event(5, kind::USER_MESSAGE, after(9), true),
            // Not consumed yet.
            event(6, kind::USER_MESSAGE, None, false),
            event(7, kind::SPAN_START, None, true),
            event(8, kind::SPAN_END, None, true),
            event(9, kind::AGENT_THREAD_CONTEXT_COMPACTED, None, true),
            event(10, kind::SPAN_START, None, true),
        ];
        let boundary = last_boundary(&events).unwrap();
        assert_eq!(boundary, (9, 0));
        let dropped = before_boundary(&mut events, boundary);
        assert_eq!(seqs(&dropped), [1, 2, 3, 7]);
        assert_eq!(seqs(&events), [4, 5, 6, 8, 9, 10]);
        // Nothing more to drop.
        assert!(before_boundary(&mut events, boundary).is_empty());
    }

    #[test]
    fn an_outcome_definition_outlives_every_boundary() {
        let mut events = vec![
            event(
                1,
                kind::USER_DEFINE_OUTCOME,
                Some(json!({"after_seq": 0})),
                true,
            ),
            event(2, kind::SPAN_START, None, true),
            event(3, kind::AGENT_THREAD_CONTEXT_COMPACTED, None, true),
        ];
        let dropped = before_boundary(&mut events, (3, 0));
        assert_eq!(seqs(&dropped), [2]);
        assert_eq!(seqs(&events), [1, 3]);
    }

    #[test]
    fn a_discarded_message_is_no_checkpoint_mark() {
        let mut events = vec![
            event(1, kind::USER_MESSAGE, Some(json!({"after_seq": 0})), true),
            event(
                2,
                kind::USER_MESSAGE,
                Some(json!({"discarded": true})),
                true,
            ),
            event(3, kind::AGENT_THREAD_CONTEXT_COMPACTED, None, true),
        ];
        let dropped = before_boundary(&mut events, (3, 0));
        assert_eq!(seqs(&dropped), [2]);
        assert_eq!(seqs(&events), [1, 3]);
    }
}

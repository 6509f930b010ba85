//! When the primary thread's turn really ends, and how.

use serde_json::Value;

use super::Ender;
use crate::fixtures::{PRIMARY, pending, session, with_delegate};
use crate::state::{EngineState, PendingKind, ThreadStatus, status_of};
use mast_domain::events::{StopReason, kind};
use mast_domain::session::SessionStatus;

fn primary_ender(usage_at_start: Option<String>) -> Ender {
    Ender {
        thread: PRIMARY.into(),
        primary: PRIMARY.into(),
        child: None,
        usage_at_start,
        reply: None,
        clock: mast_domain::clock::Clock::system(),
        runs: None,
        seen_notices: None,
    }
}

/// The stop reason of the `session.status_idle` among `events`, if one was emitted.
fn idle_reason(events: &[mast_store::NewEvent]) -> Option<Value> {
    events
        .iter()
        .find(|e| e.kind == kind::STATUS_IDLE)
        .map(|e| e.body["stop_reason"].clone())
}

#[test]
fn a_primary_turn_ends_only_when_nothing_keeps_it_going() {
    let blocked = || pending(PendingKind::Custom, &["c1", "c2"]);
    let interrupted = || EngineState {
        interrupt: true,
        ..Default::default()
    };
    let queued = || EngineState {
        queued: 2,
        ..Default::default()
    };
    let delegating = || with_delegate(EngineState::default(), ThreadStatus::Running);
    let requires = || StopReason::RequiresAction(vec![]);
    // (engine state, reason asked for) -> the idle's stop reason, or None: the turn goes on
    let cases: Vec<(&str, EngineState, StopReason, Option<Value>)> = vec![
        (
            "a finished answer idles the session",
            EngineState::default(),
            StopReason::EndTurn,
            Some(serde_json::json!({"type": "end_turn"})),
        ),
        (
            "a refusal idles it with refusal",
            EngineState::default(),
            StopReason::Refusal,
            Some(serde_json::json!({"type": "refusal"})),
        ),
        (
            "blocking calls idle it naming every pending call",
            blocked(),
            requires(),
            Some(serde_json::json!({"type": "requires_action", "event_ids": ["c1", "c2"]})),
        ),
        (
            "calls answered meanwhile keep the turn going",
            EngineState::default(),
            requires(),
            None,
        ),
        (
            "a pending interrupt is the loop's to handle",
            interrupted(),
            StopReason::EndTurn,
            None,
        ),
        (
            "queued input gets the next model request",
            queued(),
            StopReason::EndTurn,
            None,
        ),
        (
            "queued input does not hide calls the client must answer",
            EngineState {
                queued: 1,
                ..blocked()
            },
            requires(),
            Some(serde_json::json!({"type": "requires_action", "event_ids": ["c1", "c2"]})),
        ),
        (
            "a working delegate keeps the primary's turn open",
            delegating(),
            StopReason::EndTurn,
            None,
        ),
    ];
    for (name, mut st, reason, want) in cases {
        let mut rec = session(SessionStatus::Running, &st, false);
        rec.lease_owner = Some("runner_1".into());
        let ender = primary_ender(Some(rec.usage.clone()));
        let events = ender.try_end(&mut rec, &mut st, reason, None).unwrap();
        assert_eq!(idle_reason(&events), want, "{name}");
        let ended = want.is_some();
        let status = if ended {
            SessionStatus::Idle
        } else {
            SessionStatus::Running
        };
        assert_eq!(status_of(&rec), status, "{name}");
        // An idle session holds no lease; a running one keeps its runner's.
        assert_eq!(rec.lease_owner.is_none(), ended, "{name}");
        // Usage did not change since the turn started: no `session.usage`.
        assert!(
            events.iter().all(|e| e.kind != kind::SESSION_USAGE),
            "{name}"
        );
    }
}

#[test]
fn a_turn_that_used_tokens_reports_usage_before_its_idle() {
    let mut st = EngineState::default();
    let mut rec = session(SessionStatus::Running, &st, false);
    let ender = primary_ender(Some("{}".into()));
    let events = ender
        .try_end(&mut rec, &mut st, StopReason::EndTurn, None)
        .unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, [kind::SESSION_USAGE, kind::STATUS_IDLE]);
}

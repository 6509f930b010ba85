//! Which client events a session accepts in which state, and what they do.

use serde_json::json;

use super::accept;
use crate::fixtures::{DELEGATE, NOW, PRIMARY, pending, session, with_delegate};
use crate::state::{EngineState, PendingKind, ThreadStatus, status_of};
use mast_domain::events::{ClientEvent, kind};
use mast_domain::session::SessionStatus;
use mast_store::StoreError;

fn message() -> ClientEvent {
    ClientEvent::UserMessage {
        content: vec![json!({"type": "text", "text": "hi"})],
    }
}

fn system() -> ClientEvent {
    ClientEvent::SystemMessage {
        content: vec![json!({"type": "text", "text": "note"})],
    }
}

fn custom_result(id: &str) -> ClientEvent {
    ClientEvent::CustomToolResult {
        custom_tool_use_id: id.into(),
        content: vec![],
        is_error: None,
    }
}

fn confirm(id: &str) -> ClientEvent {
    ClientEvent::ToolConfirmation {
        tool_use_id: id.into(),
        allow: true,
        deny_message: None,
    }
}

fn interrupt(thread: Option<&str>) -> ClientEvent {
    ClientEvent::Interrupt {
        thread_id: thread.map(str::to_string),
    }
}

/// What a case expects: the appended event types (echoes first), the status after, and the
/// runner signals.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<&'static str>,
    status: SessionStatus,
    wake: bool,
    interrupt_all: bool,
    interrupt_thread: bool,
    queued: u32,
}

#[derive(Debug, PartialEq)]
enum Refused {
    Invalid,
    Conflict,
}

/// The record's body parsed, as `engine::bodies` gives it to the intake.
fn body_of(rec: &mast_store::SessionRecord) -> mast_domain::session::SessionBody {
    serde_json::from_str(&rec.body).unwrap()
}

fn run(
    status: SessionStatus,
    st: EngineState,
    batch: Vec<ClientEvent>,
) -> Result<Outcome, Refused> {
    let mut rec = session(status, &st, false);
    let body = body_of(&rec);
    match accept(&mut rec, &body, &batch, &[], &Default::default(), None, NOW) {
        Ok((out, acc)) => {
            let after = EngineState::of(&rec).unwrap();
            let kinds = out
                .events
                .iter()
                .map(|e| {
                    *[
                        kind::USER_MESSAGE,
                        kind::SYSTEM_MESSAGE,
                        kind::USER_INTERRUPT,
                        kind::USER_CUSTOM_TOOL_RESULT,
                        kind::USER_TOOL_CONFIRMATION,
                        kind::STATUS_RUNNING,
                        kind::STATUS_IDLE,
                        kind::AGENT_TOOL_RESULT,
                        kind::THREAD_STATUS_RUNNING,
                        kind::THREAD_STATUS_TERMINATED,
                        kind::THREAD_MESSAGE_RECEIVED,
                    ]
                    .iter()
                    .find(|k| **k == e.kind)
                    .unwrap_or_else(|| panic!("unexpected event {}", e.kind))
                })
                .collect();
            Ok(Outcome {
                events: kinds,
                status: status_of(&rec),
                wake: acc.wake,
                interrupt_all: acc.interrupt_all,
                interrupt_thread: acc.interrupt_thread.is_some(),
                queued: after.queued,
            })
        }
        Err(StoreError::Invalid(_)) => Err(Refused::Invalid),
        Err(StoreError::Conflict(_)) => Err(Refused::Conflict),
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn ok(events: &[&'static str], status: SessionStatus, wake: bool) -> Result<Outcome, Refused> {
    Ok(Outcome {
        events: events.to_vec(),
        status,
        wake,
        interrupt_all: false,
        interrupt_thread: false,
        queued: 0,
    })
}

/// (what it shows, status before, engine state before, batch, outcome)
type Case = (
    &'static str,
    SessionStatus,
    EngineState,
    Vec<ClientEvent>,
    Result<Outcome, Refused>,
);

#[test]
fn which_events_are_accepted_in_which_state() {
    use SessionStatus::{Idle, Running, Terminated};
    let custom = |ids: &[&str]| pending(PendingKind::Custom, ids);
    let asks = |ids: &[&str]| pending(PendingKind::Confirmation, ids);
    let none = EngineState::default;
    let cases: Vec<Case> = vec![
        (
            "a message starts an idle session's turn",
            Idle,
            none(),
            vec![message()],
            ok(&[kind::USER_MESSAGE, kind::STATUS_RUNNING], Running, true),
        ),
        (
            "a message to a running session queues",
            Running,
            none(),
            vec![message()],
            Ok(Outcome {
                queued: 1,
                ..ok(&[kind::USER_MESSAGE], Running, true).unwrap()
            }),
        ),
        (
            "a message to a blocked session queues without waking it",
            Idle,
            custom(&["c1"]),
            vec![message()],
            Ok(Outcome {
                queued: 1,
                ..ok(&[kind::USER_MESSAGE], Idle, false).unwrap()
            }),
        ),
        (
            "the last answer restarts the turn",
            Idle,
            custom(&["c1"]),
            vec![custom_result("c1")],
            ok(
                &[kind::USER_CUSTOM_TOOL_RESULT, kind::STATUS_RUNNING],
                Running,
                true,
            ),
        ),
        (
            "an answer that leaves calls pending restates requires_action",
            Idle,
            custom(&["c1", "c2"]),
            vec![custom_result("c1")],
            ok(
                &[kind::USER_CUSTOM_TOOL_RESULT, kind::STATUS_IDLE],
                Idle,
                false,
            ),
        ),
        (
            "a confirmation answers a call awaiting confirmation",
            Idle,
            asks(&["t1"]),
            vec![confirm("t1")],
            ok(
                &[kind::USER_TOOL_CONFIRMATION, kind::STATUS_RUNNING],
                Running,
                true,
            ),
        ),
        (
            "an answer to an unknown call is refused",
            Idle,
            custom(&["c1"]),
            vec![custom_result("c9")],
            Err(Refused::Invalid),
        ),
        (
            "an answer of the wrong kind is refused",
            Idle,
            asks(&["t1"]),
            vec![custom_result("t1")],
            Err(Refused::Invalid),
        ),
        (
            "an answer to a call already answered in the batch is refused",
            Idle,
            custom(&["c1"]),
            vec![custom_result("c1"), custom_result("c1")],
            Err(Refused::Invalid),
        ),
        (
            "a system message alone is refused while the session requires action",
            Idle,
            custom(&["c1"]),
            vec![system()],
            Err(Refused::Invalid),
        ),
        (
            // It joins the model request the answer resumes.
            "a system message may accompany a tool result, queued for the next request",
            Idle,
            custom(&["c1"]),
            vec![custom_result("c1"), system()],
            Ok(Outcome {
                queued: 1,
                ..ok(
                    &[
                        kind::USER_CUSTOM_TOOL_RESULT,
                        kind::SYSTEM_MESSAGE,
                        kind::STATUS_RUNNING,
                    ],
                    Running,
                    true,
                )
                .unwrap()
            }),
        ),
        (
            "an interrupt of a running session is recorded for its runner",
            Running,
            none(),
            vec![interrupt(None)],
            Ok(Outcome {
                interrupt_all: true,
                ..ok(&[kind::USER_INTERRUPT], Running, true).unwrap()
            }),
        ),
        (
            "an interrupt of a blocked session closes its calls and idles it",
            Idle,
            custom(&["c1", "c2"]),
            vec![interrupt(None)],
            ok(
                &[
                    kind::USER_INTERRUPT,
                    kind::AGENT_TOOL_RESULT,
                    kind::AGENT_TOOL_RESULT,
                    kind::STATUS_IDLE,
                ],
                Idle,
                false,
            ),
        ),
        (
            "an interrupt of an idle session with nothing pending changes nothing",
            Idle,
            none(),
            vec![interrupt(None)],
            ok(&[kind::USER_INTERRUPT], Idle, false),
        ),
        (
            "an interrupt of a working delegate is recorded for it alone",
            Running,
            with_delegate(none(), ThreadStatus::Running),
            vec![interrupt(Some(DELEGATE))],
            Ok(Outcome {
                interrupt_thread: true,
                ..ok(&[kind::USER_INTERRUPT], Running, true).unwrap()
            }),
        ),
        (
            "an interrupt naming the primary thread interrupts the session",
            Running,
            none(),
            vec![interrupt(Some(PRIMARY))],
            Ok(Outcome {
                interrupt_all: true,
                ..ok(&[kind::USER_INTERRUPT], Running, true).unwrap()
            }),
        ),
        (
            "an interrupt of an unknown thread is refused",
            Running,
            none(),
            vec![interrupt(Some("sthr_nope"))],
            Err(Refused::Invalid),
        ),
        (
            "a terminated session accepts nothing",
            Terminated,
            none(),
            vec![message()],
            Err(Refused::Conflict),
        ),
    ];
    for (name, status, st, batch, want) in cases {
        assert_eq!(run(status, st, batch), want, "{name}");
    }
}

#[test]
fn an_archived_session_accepts_nothing() {
    let mut rec = session(SessionStatus::Idle, &EngineState::default(), false);
    rec.archived_at = Some(NOW);
    let body = body_of(&rec);
    let err = accept(
        &mut rec,
        &body,
        &[message()],
        &[],
        &Default::default(),
        None,
        NOW,
    )
    .unwrap_err();
    assert!(
        matches!(&err, StoreError::Invalid(i) if i.code == Some("session_archived")),
        "{err}"
    );
}

#[test]
fn new_input_to_a_self_hosted_session_asks_for_a_worker() {
    for (batch, wants_work) in [(vec![message()], true), (vec![interrupt(None)], false)] {
        let mut rec = session(SessionStatus::Idle, &EngineState::default(), true);
        let body = body_of(&rec);
        let (out, acc) =
            accept(&mut rec, &body, &batch, &[], &Default::default(), None, NOW).unwrap();
        assert_eq!(out.ensure_work.is_some(), wants_work, "{batch:?}");
        assert_eq!(acc.work, wants_work, "{batch:?}");
    }
}

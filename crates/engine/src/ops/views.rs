//! What a session or thread looks like to a client, derived from its row and the engine
//! state cached on it: the status shown, usage and stats.

use serde_json::{Value, json};

use crate::state::{EngineState, ThreadStatus, status_of};
use mast_domain::session::{
    Session, SessionBody, SessionStats, SessionTag, SessionUsage, WaitingForWorker,
};
use mast_domain::thread::{SessionThread, SessionThreadTag, ThreadStats};
use mast_domain::time::{self, Micros};
use mast_store::{SessionRecord, StoreError, ThreadRecord};

/// Seconds, rounded to the millisecond, of a non-negative span.
fn rounded_seconds(micros: Micros) -> f64 {
    (micros.max(0) as f64 / 1_000_000.0 * 1000.0).round() / 1000.0
}

fn seconds(micros: Micros) -> f64 {
    micros as f64 / 1_000_000.0
}

/// Time the session has been active, including a current run.
fn active_micros(rec: &SessionRecord, now: Micros) -> Micros {
    rec.active_micros + rec.running_since.map_or(0, |s| (now - s).max(0))
}

/// The wire session of a row at `now` (`waiting_for_worker` is left for the caller, which
/// alone knows whether it is worth a query).
pub fn session(rec: &SessionRecord, now: Micros) -> Result<Session, StoreError> {
    let body: SessionBody = serde_json::from_str(&rec.body)?;
    let active = active_micros(rec, now);
    let mut usage: SessionUsage = serde_json::from_str(&rec.usage)?;
    usage.active_seconds = rounded_seconds(active);
    usage.list_cost = crate::budget::list_cost(rec, &EngineState::of(rec)?, now);
    Ok(Session {
        tag: SessionTag::Tag,
        id: rec.id.clone(),
        status: status_of(rec),
        agent: body.agent,
        environment_id: rec.environment_id.clone(),
        title: body.title,
        metadata: body.metadata,
        resources: body.resources,
        vault_ids: body.vault_ids,
        budget: body.budget,
        outcome_evaluations: crate::outcomes::view(&EngineState::of(rec)?),
        stats: SessionStats {
            active_seconds: rounded_seconds(active),
            duration_seconds: rounded_seconds(rec.terminated_at.unwrap_or(now) - rec.created_at),
            waiting_for_worker: None,
        },
        usage,
        deployment_id: body.deployment_id,
        created_at: time::format(rec.created_at),
        updated_at: time::format(rec.updated_at),
        archived_at: time::format_opt(rec.archived_at),
    })
}

/// The explanation shown on a self-hosted session that waits for a worker nobody runs.
pub fn no_worker(environment_id: &str) -> WaitingForWorker {
    WaitingForWorker {
        workers_polling: 0,
        message: format!(
            "the session waits for a worker to run its tool calls, and no worker has polled environment `{environment_id}` in the \
             last 30 seconds; start one with a worker key of that environment (see docs/self-hosted-workers.md)"
        ),
    }
}

/// The wire thread at `now`: its row, with the status, usage and stats the session row
/// keeps. A child thread shows its own run from the engine state; the primary thread shows
/// the session's.
pub fn thread(
    rec: &SessionRecord,
    st: &EngineState,
    t: &ThreadRecord,
    now: Micros,
) -> Result<SessionThread, StoreError> {
    let body: Value = serde_json::from_str(&t.body)?;
    let mut agent = body.get("agent").cloned().unwrap_or(Value::Null);
    if let Some(o) = agent.as_object_mut() {
        o.remove("multiagent");
    }
    let (status, stats, usage) = match (&t.parent_thread_id, st.threads.get(&t.id)) {
        (Some(_), Some(run)) => {
            // Usage is null while a thread runs its first task and has used nothing yet.
            let usage = (run.status != ThreadStatus::Running
                || run.usage != SessionUsage::default())
            .then(|| {
                let mut u = serde_json::to_value(&run.usage).unwrap_or(Value::Null);
                u["active_seconds"] = json!(run.active_seconds(now));
                let active = (run.active_seconds(now) * 1_000_000.0).round() as i64;
                u["list_cost"] = run
                    .spend
                    .list_cost(&run.usage, active)
                    .map_or(Value::Null, mast_domain::prices::amount);
                u
            });
            let stats = run.started_at.map(|_| ThreadStats {
                active_seconds: run.active_seconds(now),
                duration_seconds: seconds(now - t.created_at),
                startup_seconds: 0.0,
            });
            (run.status, stats, usage)
        }
        _ => {
            let active = active_micros(rec, now);
            let mut usage: Value = serde_json::from_str(&rec.usage)?;
            usage["active_seconds"] = json!(seconds(active));
            usage["list_cost"] = crate::budget::list_cost(rec, st, now).unwrap_or(Value::Null);
            (
                ThreadStatus::from(status_of(rec)),
                Some(ThreadStats {
                    active_seconds: seconds(active),
                    duration_seconds: seconds(rec.terminated_at.unwrap_or(now) - rec.created_at),
                    startup_seconds: 0.0,
                }),
                Some(usage),
            )
        }
    };
    let archived = st
        .threads
        .get(&t.id)
        .and_then(|r| r.archived_at)
        .or(t.archived_at)
        .or(rec.archived_at.filter(|_| t.parent_thread_id.is_none()));
    Ok(SessionThread {
        tag: SessionThreadTag::Tag,
        id: t.id.clone(),
        session_id: t.session_id.clone(),
        parent_thread_id: t.parent_thread_id.clone(),
        status,
        agent,
        workflow_run_id: body
            .get("workflow_run_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        stats,
        usage,
        created_at: time::format(t.created_at),
        updated_at: time::format(match t.parent_thread_id {
            None => rec.updated_at,
            Some(_) => t.updated_at,
        }),
        archived_at: time::format_opt(archived),
    })
}

#[cfg(test)]
mod tests {
    use super::{session, thread};
    use crate::fixtures::{self, DELEGATE, NOW, PRIMARY, thread_row, with_delegate};
    use crate::state::{EngineState, ThreadStatus};
    use mast_domain::session::SessionStatus;

    #[test]
    fn a_session_shows_its_stored_status_and_active_time() {
        // (status, archived) -> (status shown, active seconds, duration seconds)
        let cases = [
            (SessionStatus::Idle, false, ("idle", 0.0, 10.0)),
            // A running session counts the current run (2 s) as active.
            (SessionStatus::Running, false, ("running", 2.0, 10.0)),
            (
                SessionStatus::Rescheduling,
                false,
                ("rescheduling", 2.0, 10.0),
            ),
            // A terminated session's duration stops at termination.
            (SessionStatus::Terminated, false, ("terminated", 0.0, 9.0)),
            (SessionStatus::Idle, true, ("idle", 0.0, 10.0)),
        ];
        for (status, archived, (shown, active, duration)) in cases {
            let mut rec = fixtures::session(status, &EngineState::default(), false);
            if archived {
                rec.archived_at = Some(NOW);
            }
            let s = session(&rec, NOW).unwrap();
            let wire = serde_json::to_value(&s).unwrap();
            assert_eq!(wire["status"], shown, "{status:?}");
            assert_eq!(s.stats.active_seconds, active, "{status:?}");
            assert_eq!(s.usage.active_seconds, active, "{status:?}");
            assert_eq!(s.stats.duration_seconds, duration, "{status:?}");
            assert_eq!(s.archived_at.is_some(), archived, "{status:?}");
        }
    }

    #[test]
    fn a_thread_shows_the_engine_state_of_its_run() {
        // (session status, delegate status, which thread) -> (status shown, usage shown)
        let cases = [
            // The primary thread is the session.
            (SessionStatus::Running, None, PRIMARY, "running", true),
            (SessionStatus::Idle, None, PRIMARY, "idle", true),
            // A delegate shows its own run, whatever the thread row says; usage is null
            // while it runs its first task and has used nothing.
            (
                SessionStatus::Running,
                Some(ThreadStatus::Running),
                DELEGATE,
                "running",
                false,
            ),
            (
                SessionStatus::Running,
                Some(ThreadStatus::Idle),
                DELEGATE,
                "idle",
                true,
            ),
            (
                SessionStatus::Running,
                Some(ThreadStatus::Rescheduling),
                DELEGATE,
                "rescheduling",
                true,
            ),
            (
                SessionStatus::Idle,
                Some(ThreadStatus::Terminated),
                DELEGATE,
                "terminated",
                true,
            ),
        ];
        for (status, delegate, which, shown, has_usage) in cases {
            let st = match delegate {
                Some(d) => with_delegate(EngineState::default(), d),
                None => EngineState::default(),
            };
            let rec = fixtures::session(status, &st, false);
            let parent = (which == DELEGATE).then_some(PRIMARY);
            let t = thread(&rec, &st, &thread_row(which, parent), NOW).unwrap();
            assert_eq!(t.status.as_str(), shown, "{which} {delegate:?}");
            assert_eq!(t.usage.is_some(), has_usage, "{which} {delegate:?}");
            assert!(t.stats.is_some(), "{which} {delegate:?}");
        }
    }

    #[test]
    fn a_thread_is_archived_by_its_run_its_row_or_its_session() {
        let st = with_delegate(EngineState::default(), ThreadStatus::Idle);
        let mut archived_run = st.clone();
        archived_run.threads.get_mut(DELEGATE).unwrap().archived_at = Some(NOW);
        // (engine state, row archived, session archived, which thread) -> archived shown
        let cases = [
            (&st, false, false, DELEGATE, false),
            (&archived_run, false, false, DELEGATE, true),
            (&st, true, false, DELEGATE, true),
            // An archived session archives its primary thread, not its delegates.
            (&st, false, true, PRIMARY, true),
            (&st, false, true, DELEGATE, false),
        ];
        for (st, row_archived, session_archived, which, want) in cases {
            let mut rec = fixtures::session(SessionStatus::Idle, st, false);
            rec.archived_at = session_archived.then_some(NOW);
            let mut row = thread_row(which, (which == DELEGATE).then_some(PRIMARY));
            row.archived_at = row_archived.then_some(NOW);
            let t = thread(&rec, st, &row, NOW).unwrap();
            assert_eq!(
                t.archived_at.is_some(),
                want,
                "{which} row {row_archived} session {session_archived}"
            );
        }
    }
}

//! Pausing and resuming runs: a session-wide interrupt pauses every running run (its
//! threads stop as interrupted threads do, keeping their histories), and the next input that
//! starts or queues a primary turn resumes them.

use serde_json::json;

use super::record::RunStatus;
use crate::intake::server_event;
use crate::state::{EngineState, ThreadStatus};
use mast_domain::events::{self, kind};
use mast_store::NewEvent;

/// A run paused by an interrupt: the next input resumes it.
pub const BY_INTERRUPT: &str = "interrupt";
/// A run paused at the session's budget: raising or removing the budget resumes it.
pub const BY_BUDGET: &str = "budget";

/// Whether an open run is paused by `cause`.
pub fn paused_by(st: &EngineState, cause: &str) -> bool {
    st.workflow_runs
        .values()
        .any(|r| r.status == RunStatus::Idle && r.paused_by.iter().any(|c| c == cause))
}

/// Pauses every running run for `cause`: `workflow_run.status_idle` each.
pub fn pause_all(st: &mut EngineState, cause: &str, primary: &str, now: i64) -> Vec<NewEvent> {
    let mut out = Vec::new();
    for (id, run) in st.workflow_runs.iter_mut() {
        if run.status == RunStatus::Ended {
            continue;
        }
        if !run.paused_by.iter().any(|c| c == cause) {
            run.paused_by.push(cause.to_string());
        }
        if run.status == RunStatus::Running {
            run.status = RunStatus::Idle;
            out.push(server_event(
                kind::WORKFLOW_RUN_STATUS_IDLE,
                json!({"workflow_run_id": id}),
                primary,
                now,
            ));
        }
    }
    out
}

/// Lifts `cause` from every paused run: a run paused by nothing else runs again
/// (`workflow_run.status_running`), and its stopped threads go back to work.
pub fn resume_all(st: &mut EngineState, cause: &str, primary: &str, now: i64) -> Vec<NewEvent> {
    let mut out = Vec::new();
    let mut resumed = Vec::new();
    for (id, run) in st.workflow_runs.iter_mut() {
        if run.status != RunStatus::Idle {
            continue;
        }
        run.paused_by.retain(|c| c != cause);
        if run.paused_by.is_empty() {
            run.status = RunStatus::Running;
            resumed.push(id.clone());
            let mut e = server_event(
                kind::WORKFLOW_RUN_STATUS_RUNNING,
                json!({"workflow_run_id": id}),
                primary,
                now,
            );
            if cause == BY_INTERRUPT {
                // The agent hears which runs go on, so it can stop them when the user asks.
                e.internal = Some(json!({"model_input": format!(
                    "Workflow run {id} (\"{}\") was paused by the user's interrupt and runs again now. \
                     If the user asked you to stop it, call ant__stop_workflow_run.",
                    run.name
                )}));
            }
            out.push(e);
        }
    }
    if cause == BY_INTERRUPT && !resumed.is_empty() {
        st.run_notices += 1;
    }
    let waiting: Vec<String> = st.pending.iter().map(|p| p.thread_id.clone()).collect();
    for (tid, t) in st.threads.iter_mut() {
        let of_resumed = t.workflow_run.as_ref().is_some_and(|r| resumed.contains(r));
        if of_resumed && t.status == ThreadStatus::Idle && !waiting.contains(tid) {
            t.interrupt = false;
            t.set_status(ThreadStatus::Running, now);
            out.push(server_event(
                kind::THREAD_STATUS_RUNNING,
                events::thread_status(tid, &t.agent_name, None),
                tid,
                now,
            ));
        }
    }
    out
}

/// Whether thread `id` is one of a workflow run's.
pub fn is_run_thread(st: &EngineState, id: &str) -> bool {
    st.threads.get(id).is_some_and(|t| t.workflow_run.is_some())
}

//! A run's end: its error (if any), its threads stopped, the open phase closed, then
//! `workflow_run.status_ended` with the notice the primary agent reads.

use serde_json::{Value, json};

use super::Ctx;
use super::record::RunStatus;
use super::threads;
use crate::intake::server_event;
use crate::state::EngineState;
use mast_domain::events::kind;
use mast_domain::workflow::RunEnd;
use mast_store::NewEvent;

/// What comes before an ending run's phase end: `workflow_run.error` for an error end, and
/// each thread still working stopped and archived.
pub fn prelude(st: &mut EngineState, ctx: &Ctx, run_id: &str, how: &RunEnd) -> Vec<NewEvent> {
    let mut out = Vec::new();
    if let RunEnd::Error {
        kind: k, message, ..
    } = how
    {
        out.push(server_event(
            kind::WORKFLOW_RUN_ERROR,
            json!({"workflow_run_id": run_id, "error": {"type": k.error_type(), "message": message}}),
            ctx.primary,
            ctx.now,
        ));
    }
    let working = st
        .workflow_runs
        .get(run_id)
        .and_then(|r| r.live.as_ref())
        .map(|l| l.state.working_threads())
        .unwrap_or_default();
    // A thread of the run that is not working on a step (it returned) is archived already;
    // any other still open is stopped too.
    let mut open: Vec<String> = st
        .threads
        .iter()
        .filter(|(_, t)| {
            t.workflow_run.as_deref() == Some(run_id)
                && t.status != crate::state::ThreadStatus::Terminated
        })
        .map(|(id, _)| id.clone())
        .collect();
    for t in working {
        if !open.contains(&t) {
            open.push(t);
        }
    }
    for t in open {
        out.extend(threads::stop(st, &t, ctx.now));
    }
    out
}

/// The run's `workflow_run.status_ended`, and the run recorded as ended. `notice`: the
/// primary agent is told (not when the session is archived or terminated).
pub fn ended(st: &mut EngineState, ctx: &Ctx, run_id: &str, how: RunEnd) -> Vec<NewEvent> {
    finish(st, ctx.primary, ctx.now, run_id, how, true)
}

/// Records run `run_id` as ended with `how` and returns its `workflow_run.status_ended`.
pub fn finish(
    st: &mut EngineState,
    primary: &str,
    now: i64,
    run_id: &str,
    how: RunEnd,
    notice: bool,
) -> Vec<NewEvent> {
    let Some(run) = st.workflow_runs.get_mut(run_id) else {
        return vec![];
    };
    if run.status == RunStatus::Ended {
        return vec![];
    }
    if let Some(live) = run.live.take() {
        let c = live.state.counts();
        run.agents = [c.started, c.returned, c.failed];
    }
    run.status = RunStatus::Ended;
    run.paused_by.clear();
    run.phase_started_event = None;
    let (result, said) = match &how {
        RunEnd::Completed { result } => {
            run.output = Some(result.clone());
            (
                json!({"type": "completed"}),
                format!("ended: completed.\nResult:\n{result}"),
            )
        }
        RunEnd::Stopped => (json!({"type": "stopped"}), "ended: stopped.".to_string()),
        RunEnd::Error {
            kind: k,
            message,
            detail,
        } => (
            json!({"type": "error", "error": {"type": k.error_type(), "message": message}}),
            format!("ended with an error: {}: {detail}", k.error_type()),
        ),
    };
    run.result = Some(result.clone());
    let [started, returned, failed] = run.agents;
    let text = format!(
        "Workflow run {run_id} (\"{}\") {said}\nAgents: {started} started, {returned} returned, {failed} failed.",
        run.name
    );
    let mut e = server_event(
        kind::WORKFLOW_RUN_STATUS_ENDED,
        json!({"workflow_run_id": run_id, "result": result}),
        primary,
        now,
    );
    if notice {
        e.internal = Some(json!({ "model_input": text }));
    }
    vec![e]
}

/// The notice a `workflow_run.status_ended` carries for the primary agent, if any.
pub fn notice_of(internal: Option<&Value>) -> Option<&str> {
    internal?.get("model_input")?.as_str()
}

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
        st.run_notices += 1;
    }
    vec![e]
}

/// The notice a `workflow_run.status_ended` carries for the primary agent, if any.
pub fn notice_of(internal: Option<&Value>) -> Option<&str> {
    internal?.get("model_input")?.as_str()
}

/// Ends every open run whose lifetime has passed by `now` with `timeout_error`.
pub fn expire(st: &mut EngineState, ctx: &Ctx) -> Vec<NewEvent> {
    let due: Vec<(String, i64)> = st
        .workflow_runs
        .iter()
        .filter(|(_, r)| r.status != RunStatus::Ended && r.deadline_at <= ctx.now)
        .map(|(id, r)| (id.clone(), r.deadline_at))
        .collect();
    let mut out = Vec::new();
    for (id, _) in due {
        out.extend(end_now(st, ctx, &id, timeout_end(st, &id)));
    }
    out
}

fn timeout_end(st: &EngineState, id: &str) -> RunEnd {
    let lifetime = st
        .workflow_runs
        .get(id)
        .and_then(|r| r.live.as_ref())
        .and_then(|l| l.plan.get("lifetime_seconds"))
        .and_then(Value::as_u64)
        .unwrap_or_default();
    RunEnd::error(
        mast_domain::workflow::RunErrorKind::TimeoutError,
        format!("The run reached its lifetime of {lifetime} seconds."),
        format!("it reached its lifetime of {lifetime} seconds"),
    )
}

/// Ends open run `id` now with `how`, from outside the plan: its error, its threads
/// stopped, its open phase closed, its end.
pub fn end_now(st: &mut EngineState, ctx: &Ctx, id: &str, how: RunEnd) -> Vec<NewEvent> {
    let actions = match st.workflow_runs.get_mut(id).and_then(|r| r.live.as_mut()) {
        Some(live) => live.state.stop(how.clone()),
        None => vec![mast_domain::workflow::Action::Ended(how.clone())],
    };
    let mut out = super::step::carry_out(st, ctx, id, None, actions);
    // An end the interpreter did not report (it had ended already) still closes the run.
    out.extend(finish(st, ctx.primary, ctx.now, id, how, true));
    out
}

/// When the earliest lifetime of the open runs ends.
pub fn next_deadline(st: &EngineState) -> Option<i64> {
    st.workflow_runs
        .values()
        .filter(|r| r.status != RunStatus::Ended)
        .map(|r| r.deadline_at)
        .min()
}

/// Ends every open run of a session that terminates, `unknown_error`, with no notice (the
/// agent takes no further turn): its open phase closed and its end. The session's threads
/// are terminated with it.
pub fn end_on_termination(st: &mut EngineState, primary: &str, now: i64) -> Vec<NewEvent> {
    end_all_quietly(st, primary, now, || {
        RunEnd::error(
            mast_domain::workflow::RunErrorKind::UnknownError,
            "The session ended before the run did.",
            "the session was terminated",
        )
    })
}

/// Ends every open run `stopped`, with no notice: a session archived while its runs were
/// paused. Their threads are archived first.
pub fn end_on_archive(st: &mut EngineState, primary: &str, now: i64) -> Vec<NewEvent> {
    end_all_quietly(st, primary, now, || RunEnd::Stopped)
}

fn end_all_quietly(
    st: &mut EngineState,
    primary: &str,
    now: i64,
    how: impl Fn() -> RunEnd,
) -> Vec<NewEvent> {
    let open: Vec<String> = st
        .workflow_runs
        .iter()
        .filter(|(_, r)| r.status != RunStatus::Ended)
        .map(|(id, _)| id.clone())
        .collect();
    let mut out = Vec::new();
    for id in open {
        let end = how();
        if let RunEnd::Error {
            kind: k, message, ..
        } = &end
        {
            out.push(server_event(
                kind::WORKFLOW_RUN_ERROR,
                json!({"workflow_run_id": id, "error": {"type": k.error_type(), "message": message}}),
                primary,
                now,
            ));
        }
        let threads: Vec<String> = st
            .threads
            .iter()
            .filter(|(_, t)| {
                t.workflow_run.as_deref() == Some(id.as_str())
                    && t.status != crate::state::ThreadStatus::Terminated
            })
            .map(|(t, _)| t.clone())
            .collect();
        for t in threads {
            out.extend(threads::stop(st, &t, now));
        }
        if let Some(run) = st.workflow_runs.get_mut(&id)
            && let Some(live) = run.live.as_mut()
        {
            for action in live.state.stop(end.clone()) {
                if let mast_domain::workflow::Action::PhaseEnded { phase } = action {
                    let phase_id = run.phases.get(phase).map(|p| p.id.clone());
                    out.push(server_event(
                        kind::WORKFLOW_RUN_PHASE_ENDED,
                        json!({"workflow_run_id": id, "workflow_run_phase_id": phase_id,
                               "phase_started_id": run.phase_started_event.take()}),
                        primary,
                        now,
                    ));
                }
            }
        }
        out.extend(finish(st, primary, now, &id, end, false));
    }
    out
}

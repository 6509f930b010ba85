//! A run's transitions after its start: carrying out what the interpreter asks (phase
//! events, agent threads, the end), and an agent's return or failure.

use serde_json::json;

use super::record::RunStatus;
use super::{Ctx, end, threads};
use crate::intake::server_event;
use crate::state::EngineState;
use mast_domain::events::kind;
use mast_domain::ids::new_id;
use mast_domain::workflow::{Action, Plan, RunEnd, parse};
use mast_store::NewEvent;

/// How a run thread's turn ended, for its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentEnd {
    /// `end_turn`: its result is the text of its last message.
    Returned,
    /// `refusal`, `retries_exhausted`, or the thread was terminated.
    Failed,
}

/// Records that run thread `thread` ended its turn: archives it, settles its agent and
/// advances the run, in the transaction of the thread's end. Nothing for a thread of no
/// open run.
pub fn agent_ended(st: &mut EngineState, ctx: &Ctx, thread: &str, how: AgentEnd) -> Vec<NewEvent> {
    let Some(run_id) = st.threads.get(thread).and_then(|t| t.workflow_run.clone()) else {
        return vec![];
    };
    let mut out = threads::archive(st, thread, ctx.now);
    let Some(run) = st.workflow_runs.get_mut(&run_id) else {
        return out;
    };
    let Some(live) = run.live.as_mut() else {
        return out;
    };
    let settled = match how {
        AgentEnd::Returned => live.state.agent_returned(thread),
        AgentEnd::Failed => live.state.agent_failed(thread),
    };
    // A paused run advances no further; it goes on when it resumes (see `stalled`).
    if settled && run.status == RunStatus::Running {
        out.extend(advance(st, ctx, &run_id));
    }
    out
}

/// Running runs with no agent at work: their last agents ended while they were paused, and
/// the plan goes on from there now.
pub fn stalled(st: &EngineState) -> Vec<String> {
    st.workflow_runs
        .iter()
        .filter(|(_, r)| {
            r.status == RunStatus::Running
                && r.live
                    .as_ref()
                    .is_some_and(|l| l.state.counts().working == 0)
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// Whether thread `thread` works for a run an interrupt paused: it stops before its next
/// model request.
pub fn paused_thread(st: &EngineState, thread: &str) -> bool {
    st.threads
        .get(thread)
        .and_then(|t| t.workflow_run.as_ref())
        .and_then(|r| st.workflow_runs.get(r))
        .is_some_and(|r| {
            r.status == RunStatus::Idle && r.paused_by.iter().any(|c| c == super::BY_INTERRUPT)
        })
}

/// Advances run `run_id` as far as it goes now and carries out what that asks.
pub fn advance(st: &mut EngineState, ctx: &Ctx, run_id: &str) -> Vec<NewEvent> {
    let Some(run) = st.workflow_runs.get_mut(run_id) else {
        return vec![];
    };
    if run.status == RunStatus::Ended {
        return vec![];
    }
    let Some(live) = run.live.as_mut() else {
        return vec![];
    };
    let plan = match parse(&live.plan) {
        Ok(p) => p,
        Err(e) => {
            // A plan checked at the start always reads back; this is the server's fault.
            tracing::error!(workflow_run_id = %run_id, error = %e, "a stored workflow plan did not read back");
            let actions = live.state.stop(RunEnd::error(
                mast_domain::workflow::RunErrorKind::UnknownError,
                "The server could not continue the run.",
                format!("its plan could not be read back: {e}"),
            ));
            return carry_out(st, ctx, run_id, None, actions);
        }
    };
    let texts = ctx.texts;
    let results = |id: &str| texts.get(id);
    let mut new_thread = || new_id("sthr");
    let actions = live
        .state
        .advance(&plan, &results, ctx.limits, &mut new_thread);
    carry_out(st, ctx, run_id, Some(&plan), actions)
}

/// Carries out the interpreter's actions in order: phase events, agent threads, the end.
pub fn carry_out(
    st: &mut EngineState,
    ctx: &Ctx,
    run_id: &str,
    plan: Option<&Plan>,
    actions: Vec<Action>,
) -> Vec<NewEvent> {
    let mut out = Vec::new();
    // An end's error and its stopped threads come before the phase end that precedes it.
    let ending = actions.iter().find_map(|a| match a {
        Action::Ended(how) => Some(how.clone()),
        _ => None,
    });
    let mut prelude =
        ending.map(|how| move |st: &mut EngineState| end::prelude(st, ctx, run_id, &how));
    for action in actions {
        if matches!(action, Action::PhaseEnded { .. } | Action::Ended(_))
            && let Some(p) = prelude.take()
        {
            out.extend(p(st));
        }
        match action {
            Action::PhaseStarted { phase } => {
                let Some(run) = st.workflow_runs.get_mut(run_id) else {
                    continue;
                };
                let phase_id = run.phases.get(phase).map(|p| p.id.clone());
                let e = server_event(
                    kind::WORKFLOW_RUN_PHASE_STARTED,
                    json!({"workflow_run_id": run_id, "workflow_run_phase_id": phase_id}),
                    ctx.primary,
                    ctx.now,
                );
                run.phase_started_event = Some(e.id.clone());
                out.push(e);
            }
            Action::PhaseEnded { phase } => {
                let Some(run) = st.workflow_runs.get_mut(run_id) else {
                    continue;
                };
                let phase_id = run.phases.get(phase).map(|p| p.id.clone());
                let started = run.phase_started_event.take();
                out.push(server_event(
                    kind::WORKFLOW_RUN_PHASE_ENDED,
                    json!({"workflow_run_id": run_id, "workflow_run_phase_id": phase_id,
                           "phase_started_id": started}),
                    ctx.primary,
                    ctx.now,
                ));
            }
            Action::StartAgent {
                thread_id,
                agent_key,
                prompt,
                ..
            } => {
                if let Some(plan) = plan {
                    out.extend(threads::start(
                        st, ctx, run_id, plan, &agent_key, &thread_id, &prompt,
                    ));
                }
            }
            Action::Ended(how) => out.extend(end::ended(st, ctx, run_id, how)),
        }
    }
    out
}

//! Workflow runs: a plan the primary agent hands to `ant__start_workflow_run`, which the
//! server runs in the background, its agents working in threads of their own.
//!
//! The plan's rules and its interpreter are the domain's (`mast_domain::workflow`): this
//! module carries out what the interpreter asks, inside the transactions of the session's
//! runner. A run lives in the session's engine state ([`Run`]); every transition — a start,
//! an agent's return or failure, a stop, an end — is one transaction with its events, so a
//! crash neither repeats nor loses one:
//!
//! - **start** ([`answer_calls`]): the primary's model response that calls the platform
//!   tools is recorded with their answers (kept privately in its `span.model_request_end`,
//!   as clients never see these calls), the run's `workflow_run.created` and first status,
//!   and the first phase's agents.
//! - **agent end** ([`agent_ended`]): a run thread's turn ends; it is archived, the plan
//!   advances, and the next agents, phases or the run's end follow in the same transaction.
//! - **end**: `workflow_run.status_ended` carries the notice the primary agent reads in its
//!   next model request (see `engine::context`), which starts a turn if it had ended one.
//!
//! An agent's result is never copied into the state: the interpreter holds the thread's id
//! and asks for the text when it renders, which the runner keeps for the run's threads
//! ([`ResultTexts`]) and reads back from their logs after a restart.

mod end;
mod expiry;
mod manage;
mod pause;
mod record;
mod start;
mod step;
mod texts;
mod threads;
mod tools;

pub use end::{end_now, end_on_archive, end_on_termination, expire, next_deadline, notice_of};
pub use manage::{PlatformCall, answer_calls};
pub use pause::{BY_BUDGET, BY_INTERRUPT, is_run_thread, pause_all, paused_by, resume_all};
pub use record::{Run, RunStatus};
pub use step::{AgentEnd, advance, agent_ended, paused_thread, stalled};
pub use texts::ResultTexts;
pub use tools::{GET_RUN, START_RUN, STOP_RUN, is_platform_tool, tool_defs};

use mast_domain::agent::SessionAgent;
use mast_domain::workflow::Limits;
use serde_json::Value;

use crate::state::EngineState;

/// Whether the session's agent may start workflow runs (`multiagent.workflows` enabled).
pub fn enabled(agent: &SessionAgent) -> bool {
    workflows_of(agent)
        .and_then(|w| w.get("type"))
        .and_then(Value::as_str)
        == Some("enabled")
}

fn workflows_of(agent: &SessionAgent) -> Option<&Value> {
    let m = agent.multiagent.as_ref()?;
    (m.get("type").and_then(Value::as_str) == Some("multiagent_20261001"))
        .then(|| m.get("workflows"))
        .flatten()
}

/// The session agent's `workflows.predefined_agents` entries (agent snapshots, `self`
/// resolved), in order; none when it lists no agents.
pub fn predefined_entries(agent: &SessionAgent) -> &[Value] {
    agent
        .multiagent
        .as_ref()
        .and_then(|m| m.pointer("/workflows/predefined_agents"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether an open run is `running`: the session then stays running even when no thread
/// works.
pub fn any_running(st: &EngineState) -> bool {
    st.workflow_runs
        .values()
        .any(|r| r.status == RunStatus::Running)
}

/// The open runs (running or idle).
pub fn open_runs(st: &EngineState) -> impl Iterator<Item = (&String, &Run)> {
    st.workflow_runs
        .iter()
        .filter(|(_, r)| r.status != RunStatus::Ended)
}

/// What a transition needs besides the state: who the session is and what it allows.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub session_id: &'a str,
    pub primary: &'a str,
    /// The session's agent (its snapshot, with the session's overrides).
    pub agent: &'a SessionAgent,
    pub limits: &'a Limits,
    /// What the run's returned agents said.
    pub texts: &'a ResultTexts,
    pub now: mast_domain::time::Micros,
}

/// What a runner's transactions need to build a [`Ctx`]: owned, so a decision can be
/// cloned and taken again on a fresh row.
#[derive(Debug, Clone)]
pub struct RunScope {
    pub body: std::sync::Arc<mast_domain::session::SessionBody>,
    pub limits: Limits,
    pub texts: std::sync::Arc<ResultTexts>,
}

impl RunScope {
    /// The context of a transition in session `session_id` at `now`.
    pub fn ctx<'a>(
        &'a self,
        session_id: &'a str,
        primary: &'a str,
        now: mast_domain::time::Micros,
    ) -> Ctx<'a> {
        Ctx {
            session_id,
            primary,
            agent: &self.body.agent,
            limits: &self.limits,
            texts: &self.texts,
            now,
        }
    }
}

/// Refuses a request a workflow run of session `session_id` blocks: while any run is open
/// (`running_only`: while any is running), 400 `workflow_run_open`.
pub fn refuse_open(
    session_id: &str,
    st: &EngineState,
    running_only: bool,
) -> Result<(), mast_domain::invalid::Invalid> {
    let blocking = open_runs(st).find(|(_, r)| !running_only || r.status == RunStatus::Running);
    match blocking {
        None => Ok(()),
        Some((id, _)) => Err(mast_domain::invalid::Invalid::with_code(
            "workflow_run_open",
            format!("session {session_id} has an open workflow run ({id})"),
        )),
    }
}

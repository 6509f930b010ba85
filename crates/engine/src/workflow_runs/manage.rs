//! Answering the primary agent's platform calls of one model response, in the transaction
//! that records it: start, report on and stop runs.

use serde_json::{Value, json};

use super::record::{Run, RunStatus};
use super::tools::{GET_RUN, START_RUN, STOP_RUN};
use super::{Ctx, end, start};
use crate::state::EngineState;
use mast_domain::workflow::RunEnd;
use mast_store::NewEvent;

/// One platform call of a model response.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// The most runs `ant__get_workflow_run` reports without an id.
const LISTED_RUNS: usize = 20;

/// Answers `calls` in order: each answer (`{"id","name","input","result","is_error"}`, kept
/// privately with the response so the context can show the model its call and result) and
/// the events the calls caused, to follow the response's `span.model_request_end`.
pub fn answer_calls(
    st: &mut EngineState,
    ctx: &Ctx,
    calls: Vec<PlatformCall>,
) -> (Vec<Value>, Vec<NewEvent>) {
    let mut answers = Vec::new();
    let mut out = Vec::new();
    for call in calls {
        let answer = match call.name.as_str() {
            START_RUN => {
                let (answer, events) = start::start(st, ctx, &call.input);
                out.extend(events);
                answer.map(|v| v.to_string())
            }
            GET_RUN => get(st, &call.input),
            STOP_RUN => {
                let (answer, events) = stop(st, ctx, &call.input);
                out.extend(events);
                answer
            }
            other => Err(format!("There is no tool named `{other}`.")),
        };
        let (text, is_error) = match answer {
            Ok(t) => (t, false),
            Err(t) => (t, true),
        };
        answers.push(
            json!({"id": call.id, "name": call.name, "input": call.input,
                            "result": text, "is_error": is_error}),
        );
    }
    (answers, out)
}

fn run_id_of(input: &Value) -> Result<Option<&str>, String> {
    match input.get("workflow_run_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err("`workflow_run_id` must be a string".into()),
    }
}

fn report(st: &EngineState, id: &str, run: &Run) -> Value {
    let (phase, phases_ended, agents) = match &run.live {
        Some(live) => {
            let c = live.state.counts();
            let phase = live
                .state
                .open_phase()
                .and_then(|i| run.phases.get(i))
                .map(|p| json!({"id": p.id, "name": p.name}));
            let ended: Vec<&str> = run
                .phases
                .iter()
                .take(live.state.phases_ended())
                .map(|p| p.id.as_str())
                .collect();
            // Working agents whose thread waits on the client for a call.
            let waiting = st
                .threads
                .iter()
                .filter(|(tid, t)| {
                    t.workflow_run.as_deref() == Some(id) && st.pending_of(tid).next().is_some()
                })
                .count();
            let agents = json!({"started": c.started, "working": c.working,
                "waiting_on_client": waiting, "returned": c.returned, "failed": c.failed});
            (phase.unwrap_or(Value::Null), json!(ended), agents)
        }
        None => {
            let [started, returned, failed] = run.agents;
            (
                Value::Null,
                json!(Vec::<String>::new()),
                json!({"started": started, "working": 0, "waiting_on_client": 0,
                       "returned": returned, "failed": failed}),
            )
        }
    };
    let mut v = json!({
        "workflow_run_id": id, "name": run.name, "status": run.status.as_str(),
        "paused_by": run.paused_by, "phase": phase, "phases_ended": phases_ended,
        "agents": agents, "deadline_at": mast_domain::time::format(run.deadline_at),
    });
    if let Some(r) = &run.result {
        v["result"] = r.clone();
    }
    if let Some(o) = &run.output {
        v["output"] = json!(o);
    }
    v
}

fn get(st: &EngineState, input: &Value) -> Result<String, String> {
    match run_id_of(input)? {
        Some(id) => st
            .workflow_runs
            .get(id)
            .map(|r| report(st, id, r).to_string())
            .ok_or_else(|| format!("There is no workflow run `{id}` in this session.")),
        None => {
            let mut runs: Vec<(&String, &Run)> = st.workflow_runs.iter().collect();
            runs.sort_by_key(|(_, r)| std::cmp::Reverse(r.number));
            let listed: Vec<Value> = runs
                .into_iter()
                .take(LISTED_RUNS)
                .map(|(id, r)| report(st, id, r))
                .collect();
            Ok(json!({ "workflow_runs": listed }).to_string())
        }
    }
}

fn stop(st: &mut EngineState, ctx: &Ctx, input: &Value) -> (Result<String, String>, Vec<NewEvent>) {
    let id = match run_id_of(input) {
        Ok(Some(id)) => id.to_string(),
        Ok(None) => return (Err("`workflow_run_id` is required".into()), vec![]),
        Err(e) => return (Err(e), vec![]),
    };
    let Some(run) = st.workflow_runs.get_mut(&id) else {
        return (
            Err(format!("There is no workflow run `{id}` in this session.")),
            vec![],
        );
    };
    if run.status == RunStatus::Ended {
        return (
            Err(format!("Workflow run `{id}` has already ended.")),
            vec![],
        );
    }
    let out = end::end_now(st, ctx, &id, RunEnd::Stopped);
    (
        Ok(json!({"workflow_run_id": id, "status": "stopping"}).to_string()),
        out,
    )
}

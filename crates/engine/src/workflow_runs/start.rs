//! Starting a run: the plan checked whole, the run created with its first status, and its
//! first phase begun — or the start refused, which creates nothing.

use serde_json::{Value, json};

use super::record::{Live, PhaseRef, Run, RunStatus};
use super::{Ctx, open_runs, step};
use crate::intake::server_event;
use crate::state::EngineState;
use mast_domain::events::kind;
use mast_domain::ids::new_id;
use mast_domain::workflow::{ListedAgent, RosterEntry, RunState, Workflows, check};
use mast_store::NewEvent;

/// Starts a run of `plan`: the tool's result (or the reason it was refused) and the events.
pub fn start(
    st: &mut EngineState,
    ctx: &Ctx,
    plan: &Value,
) -> (Result<Value, String>, Vec<NewEvent>) {
    let number = st.workflow_runs.len() as u64 + 1;
    let listed = listed_agents(ctx);
    let entries: Vec<RosterEntry> = listed
        .iter()
        .map(|(id, name)| RosterEntry::Agent(ListedAgent { id, name }))
        .collect();
    let workflows = Workflows {
        predefined_agents: &entries,
        session_agent: ListedAgent {
            id: &ctx.agent.id,
            name: &ctx.agent.name,
        },
        inline_agents: inline_allowed(ctx),
    };
    let checked = match check(plan, &workflows, number, ctx.limits) {
        Ok(p) => p,
        Err(e) => {
            let message = format!("The workflow run was not started: {}", e.message());
            return (
                Err(message),
                vec![refused(
                    ctx,
                    e.error_type(),
                    "The workflow plan was refused.",
                )],
            );
        }
    };
    // The plan is checked first: a broken plan is worth fixing whatever else is open.
    let open = open_runs(st).count() as u64;
    if open >= ctx.limits.max_open_runs {
        let message = format!(
            "The session already has {open} open workflow runs, the most allowed; stop one or wait for one to end."
        );
        return (
            Err(message.clone()),
            vec![refused(ctx, "max_workflow_runs_error", &message)],
        );
    }
    let run_id = new_id("wrun");
    let phases: Vec<PhaseRef> = checked
        .phases
        .iter()
        .map(|p| PhaseRef {
            id: new_id("wrph"),
            name: p.name.clone(),
        })
        .collect();
    let lifetime = checked
        .lifetime_seconds
        .unwrap_or(ctx.limits.lifetime_seconds)
        .min(ctx.limits.lifetime_seconds);
    let name = checked
        .name
        .clone()
        .unwrap_or_else(|| format!("Workflow run {number}"));
    let mut out = vec![
        server_event(
            kind::WORKFLOW_RUN_CREATED,
            json!({
                "workflow_run_id": run_id, "name": name, "description": checked.description,
                "phases": checked.phases.iter().zip(&phases).map(|(p, r)| json!({
                    "id": r.id, "name": p.name, "description": p.description})).collect::<Vec<_>>(),
            }),
            ctx.primary,
            ctx.now,
        ),
        server_event(
            kind::WORKFLOW_RUN_STATUS_RUNNING,
            json!({"workflow_run_id": run_id}),
            ctx.primary,
            ctx.now,
        ),
    ];
    let plan_json = serde_json::to_value(&checked).unwrap_or(Value::Null);
    if let Some(created) = out.first_mut() {
        created.internal = Some(json!({ "plan": plan_json }));
    }
    st.workflow_runs.insert(
        run_id.clone(),
        Run {
            number,
            name: name.clone(),
            status: RunStatus::Running,
            paused_by: vec![],
            deadline_at: ctx.now
                + i64::try_from(lifetime).unwrap_or(i64::MAX / 2_000_000) * 1_000_000,
            phases: phases.clone(),
            phase_started_event: None,
            live: Some(Live {
                plan: plan_json,
                state: RunState::new(&checked),
            }),
            agents: [0; 3],
            result: None,
            output: None,
        },
    );
    out.extend(step::advance(st, ctx, &run_id));
    let status = st
        .workflow_runs
        .get(&run_id)
        .map_or("ended", |r| r.status.as_str());
    let result = json!({
        "workflow_run_id": run_id, "name": name, "status": status,
        "phases": phases.iter().map(|p| json!({"id": p.id, "name": p.name})).collect::<Vec<_>>(),
        "lifetime_seconds": lifetime,
    });
    (Ok(result), out)
}

/// A refused start's `workflow_run.error`: no run was created.
fn refused(ctx: &Ctx, error_type: &str, message: &str) -> NewEvent {
    server_event(
        kind::WORKFLOW_RUN_ERROR,
        json!({"workflow_run_id": null, "error": {"type": error_type, "message": message}}),
        ctx.primary,
        ctx.now,
    )
}

/// The session's predefined workflow agents: (id, name), in order.
fn listed_agents(ctx: &Ctx) -> Vec<(String, String)> {
    super::predefined_entries(ctx.agent)
        .iter()
        .filter_map(|e| {
            Some((
                e.get("id")?.as_str()?.to_string(),
                e.get("name")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

fn inline_allowed(ctx: &Ctx) -> bool {
    ctx.agent
        .multiagent
        .as_ref()
        .and_then(|m| m.pointer("/workflows/inline_agents/type"))
        .and_then(Value::as_str)
        != Some("disabled")
}

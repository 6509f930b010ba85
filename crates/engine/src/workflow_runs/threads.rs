//! A run's threads: created as the plan starts its agents, archived when they return.

use serde_json::{Value, json};

use super::Ctx;
use crate::delegation::thread_body;
use crate::intake::server_event;
use crate::state::{EngineState, ThreadRun, ThreadStatus};
use mast_domain::agent::SessionAgent;
use mast_domain::content;
use mast_domain::events::{self, kind};
use mast_domain::workflow::{Agent, Plan};
use mast_store::{NewEvent, ThreadRecord};

/// The wire agent and the agent a run thread's loop runs, for the plan's agent `key`. A
/// predefined agent runs its snapshot from the session's `workflows.predefined_agents` (a
/// `self` entry is the session's agent); an inline agent runs the session agent's model,
/// tools, MCP servers and skills under the plan's system prompt. Neither delegates nor
/// starts runs.
fn agent_for(
    plan: &Plan,
    key: &str,
    session_agent: &SessionAgent,
) -> (Value, String, SessionAgent) {
    let base = SessionAgent {
        multiagent: None,
        ..session_agent.clone()
    };
    match plan.agents.get(key) {
        Some(Agent::Predefined { predefined }) => {
            let snapshot = predefined_snapshot(session_agent, predefined).unwrap_or(base);
            let mut wire = serde_json::to_value(&snapshot).unwrap_or(Value::Null);
            if let Some(o) = wire.as_object_mut() {
                o.remove("multiagent");
            }
            (wire, snapshot.name.clone(), snapshot)
        }
        Some(Agent::Inline(def)) => {
            let name = def.name.clone().unwrap_or_else(|| key.to_string());
            let runs = SessionAgent {
                id: format!("{}{name}", crate::delegation::INLINE_ID_PREFIX),
                version: 0,
                name: name.clone(),
                description: def.description.clone(),
                system: Some(def.system.clone()),
                ..base
            };
            let wire = json!({
                "type": "inline", "name": runs.name, "description": runs.description,
                "system": runs.system, "model": runs.model, "tools": runs.tools,
                "mcp_servers": runs.mcp_servers, "skills": runs.skills,
                "execution_identity": runs.execution_identity,
            });
            (wire, name, runs)
        }
        None => (
            serde_json::to_value(&base).unwrap_or(Value::Null),
            base.name.clone(),
            base,
        ),
    }
}

/// The snapshot of the listed agent `id` (the session's own agent for a `self` entry,
/// which the session lists under its own id).
fn predefined_snapshot(session_agent: &SessionAgent, id: &str) -> Option<SessionAgent> {
    if id == session_agent.id {
        return Some(SessionAgent {
            multiagent: None,
            ..session_agent.clone()
        });
    }
    super::predefined_entries(session_agent)
        .iter()
        .filter(|e| e.get("id").and_then(Value::as_str) == Some(id))
        .find_map(|e| serde_json::from_value::<SessionAgent>(e.clone()).ok())
        .map(|mut a| {
            a.multiagent = None;
            a
        })
}

/// Creates run thread `thread_id` for the plan's agent `key`, running on `prompt`: its row,
/// `session.thread_created` on the primary, its first status and its prompt.
pub fn start(
    st: &mut EngineState,
    ctx: &Ctx,
    run_id: &str,
    plan: &Plan,
    key: &str,
    thread_id: &str,
    prompt: &str,
) -> Vec<NewEvent> {
    let (wire, name, runs) = agent_for(plan, key, ctx.agent);
    let mut body: Value =
        serde_json::from_str(&thread_body(&wire, &name, &runs)).unwrap_or_default();
    body["workflow_run_id"] = json!(run_id);
    st.created_threads.push(ThreadRecord {
        id: thread_id.to_string(),
        session_id: ctx.session_id.to_string(),
        parent_thread_id: Some(ctx.primary.to_string()),
        spawning_event_id: None,
        status: ThreadStatus::Running.as_str().into(),
        body: body.to_string(),
        created_at: ctx.now,
        updated_at: ctx.now,
        archived_at: None,
    });
    let mut run = ThreadRun::new(&name, false, ctx.now);
    run.workflow_run = Some(run_id.to_string());
    st.threads.insert(thread_id.to_string(), run);
    vec![
        server_event(
            kind::THREAD_CREATED,
            json!({"session_thread_id": thread_id, "agent_name": name, "workflow_run_id": run_id}),
            ctx.primary,
            ctx.now,
        ),
        server_event(
            kind::THREAD_STATUS_RUNNING,
            events::thread_status(thread_id, &name, None),
            thread_id,
            ctx.now,
        ),
        server_event(
            kind::THREAD_MESSAGE_RECEIVED,
            json!({"from_session_thread_id": ctx.primary, "content": [content::text(prompt)]}),
            thread_id,
            ctx.now,
        ),
    ]
}

/// Archives a run thread that returned or failed: `session.thread_status_terminated`.
pub fn archive(st: &mut EngineState, thread_id: &str, now: i64) -> Vec<NewEvent> {
    let Some(run) = st.threads.get_mut(thread_id) else {
        return vec![];
    };
    if run.status == ThreadStatus::Terminated {
        return vec![];
    }
    run.set_status(ThreadStatus::Terminated, now);
    run.archived_at = Some(now);
    run.budget_paused = false;
    run.interrupt = false;
    run.running_tool = None;
    vec![server_event(
        kind::THREAD_STATUS_TERMINATED,
        events::thread_status(thread_id, &run.agent_name, None),
        thread_id,
        now,
    )]
}

/// Stops a run thread still working or waiting when its run ends, as an interrupt stops a
/// thread: its pending calls closed with an error result, `session.thread_status_idle`
/// (`end_turn`), then archived. A model request or built-in call in flight finishes in its
/// own loop, which then finds the thread terminated and stops.
pub fn stop(st: &mut EngineState, thread_id: &str, now: i64) -> Vec<NewEvent> {
    let Some(name) = st.threads.get(thread_id).map(|t| t.agent_name.clone()) else {
        return vec![];
    };
    let mut out = crate::turn_end::close_pending_of(st, thread_id, now);
    let active = st
        .threads
        .get(thread_id)
        .is_some_and(|t| t.status != ThreadStatus::Terminated);
    if active {
        out.push(server_event(
            kind::THREAD_STATUS_IDLE,
            events::thread_status(thread_id, &name, Some((&events::StopReason::EndTurn, None))),
            thread_id,
            now,
        ));
    }
    out.extend(archive(st, thread_id, now));
    out
}

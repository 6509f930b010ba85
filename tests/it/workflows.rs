//! Workflow runs: the primary agent starts a plan with its hidden platform tool,
//! the server runs the plan's agents in threads of their own, phase by phase, and the run's
//! end reaches the agent as a new turn. Clients follow on the session stream.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::mock_anthropic::{MockAnthropic, Reply};
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer};

backend_tests!(
    a_run_fans_out_in_phases_and_reports_back,
    refused_starts_create_no_run,
    failed_agents_end_the_run_or_are_counted,
    the_agent_stops_a_run,
    a_confirmation_after_its_run_stopped_changes_nothing,
    a_waiting_run_agent_idles_the_session_with_its_call,
    a_run_ends_when_its_lifetime_passes,
    a_run_times_out_in_a_session_nothing_wakes,
    a_failed_primary_turn_leaves_the_run_working,
    a_message_after_a_failed_turn_and_an_interrupt_is_answered,
    an_interrupt_pauses_runs_until_the_next_message,
    archiving_a_paused_session_stops_its_runs,
    a_run_agents_call_stays_answerable_through_an_interrupt,
    a_run_of_two_hundred_agents_completes,
    runs_pause_at_the_budget_and_resume_when_it_is_raised,
    a_crash_after_phase_one_neither_repeats_nor_loses_the_run,
    workflows_are_on_unless_an_agent_turns_them_off,
    predefined_agents_run_their_snapshots,
);

async fn server(b: Backend, tune: impl FnOnce(&mut mast::domain::workflow::Limits)) -> TestServer {
    TestServer::start_tuned(b, Options::default(), |c| {
        tune(&mut c.engine.workflows.limits);
    })
    .await
}

/// A session of an agent with workflows enabled (and subagents off), its stream open.
async fn session(s: &TestServer, extra: Value) -> (String, Stream) {
    let mut def = json!({
        "name": "lead", "model": "mast-scripted",
        "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                       "workflows": {"type": "enabled"}},
        "tools": [{"type": "custom", "name": "lookup", "description": "Looks a thing up.",
                   "input_schema": {"type": "object"}}],
    });
    for (k, v) in extra.as_object().unwrap() {
        def[k] = v.clone();
    }
    let agent = s.client.post("/v1/agents", def).await.ok();
    let env = s.client.environment().await;
    let sid = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env["id"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    (sid, st)
}

/// The acceptance plan: three readers in phase 1, one merger in phase 2.
fn plan() -> Value {
    json!({
        "name": "Read and merge",
        "agents": {"reader": {"system": "You read one document."}},
        "inputs": {"docs": ["a", "b", "c"]},
        "phases": [
            {"name": "P1", "steps": [{"map": {"over": "docs", "as": "doc", "use": "reader",
                                               "prompt": "say Read {{doc}}.", "save": "notes"}}]},
            {"name": "P2", "steps": [{"agent": {"use": "reader",
                                                 "prompt": "say Merged {{notes.count}}.", "save": "merged"}}]}
        ],
        "result": "{{merged}}"
    })
}

fn start_script(plan: &Value) -> String {
    format!("call ant__start_workflow_run {plan}\n---\nsay Started: {{{{result}}}}")
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

fn position(events: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such event in {events:#?}"))
}

async fn a_run_fans_out_in_phases_and_reports_back(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    s.client.say(&sid, &start_script(&plan())).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(&sid).await;
    let t = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
    // No hidden call shows, on any thread.
    assert!(
        !events
            .iter()
            .any(|e| e["name"].as_str().is_some_and(|n| n.starts_with("ant__"))),
        "{events:#?}"
    );
    let created = of_type(&events, "workflow_run.created");
    assert_eq!(created.len(), 1, "{events:#?}");
    let run = created[0]["workflow_run_id"].as_str().unwrap();
    assert!(run.starts_with("wrun_"));
    let phases = created[0]["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    assert!(
        phases
            .iter()
            .all(|p| p["id"].as_str().unwrap().starts_with("wrph_") && p["description"].is_null())
    );
    // The relative order of the run's events.
    let at = |ty: &str| position(&events, |e| t(e) == ty);
    let started: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| t(e) == "workflow_run.phase_started")
        .map(|(i, _)| i)
        .collect();
    let ended: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| t(e) == "workflow_run.phase_ended")
        .map(|(i, _)| i)
        .collect();
    assert_eq!((started.len(), ended.len()), (2, 2), "{events:#?}");
    let status_ended = at("workflow_run.status_ended");
    assert!(at("workflow_run.created") < at("workflow_run.status_running"));
    assert!(at("workflow_run.status_running") < started[0]);
    assert!(started[0] < ended[0] && ended[0] < started[1] && started[1] < ended[1]);
    assert!(ended[1] < status_ended);
    assert_eq!(
        events[ended[0]]["phase_started_id"], events[started[0]]["id"],
        "phase_ended names its start"
    );
    assert_eq!(events[status_ended]["result"], json!({"type": "completed"}));
    // Three threads in phase 1, all before it ends; one in phase 2.
    let thread_created: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| t(e) == "session.thread_created")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(thread_created.len(), 4);
    assert!(
        thread_created[..3]
            .iter()
            .all(|i| *i > started[0] && *i < ended[0])
    );
    assert!(thread_created[3] > started[1] && thread_created[3] < ended[1]);
    assert!(
        thread_created
            .iter()
            .all(|i| events[*i]["workflow_run_id"] == run)
    );
    // No session idle between the run's creation and its end.
    assert!(
        !events[at("workflow_run.created")..status_ended]
            .iter()
            .any(|e| t(e) == "session.status_idle"),
        "{events:#?}"
    );
    // The agent read the start's result, then the run's end.
    let said: Vec<&str> = of_type(&events, "agent.message")
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap())
        .collect();
    assert!(
        said[0].contains("Started:") && said[0].contains("wrun_"),
        "{said:?}"
    );
    let last = said.last().unwrap();
    assert!(last.contains("Merged 3."), "{said:?}");
    let last_message = events
        .iter()
        .rposition(|e| t(e) == "agent.message")
        .unwrap();
    assert!(last_message > status_ended);
    // The run's threads: children of the primary, archived, running the inline agent.
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads?limit=100"))
        .await
        .ok();
    let list = threads["data"].as_array().unwrap();
    let primary = list
        .iter()
        .find(|t| t["parent_thread_id"].is_null())
        .unwrap();
    let runs: Vec<&Value> = list
        .iter()
        .filter(|t| !t["parent_thread_id"].is_null())
        .collect();
    assert_eq!(runs.len(), 4, "{list:#?}");
    for th in &runs {
        assert_eq!(th["parent_thread_id"], primary["id"]);
        assert_eq!(th["workflow_run_id"], run);
        assert_eq!(th["status"], "terminated");
        assert!(th["archived_at"].is_string());
        assert_eq!(th["agent"]["type"], "inline");
        assert_eq!(th["agent"]["model"]["id"], "mast-scripted");
        assert!(!th["usage"].is_null());
        let tid = th["id"].as_str().unwrap();
        let own = s
            .client
            .get(&format!("/v1/sessions/{sid}/threads/{tid}/events"))
            .await
            .ok();
        let first = own["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "agent.thread_message_received")
            .unwrap();
        assert_eq!(first["from_session_thread_id"], primary["id"]);
        assert!(first.get("from_agent_name").is_none() || first["from_agent_name"].is_null());
    }
    // Listing by the seven types returns exactly the run's events.
    let types = [
        "workflow_run.created",
        "workflow_run.status_running",
        "workflow_run.status_idle",
        "workflow_run.phase_started",
        "workflow_run.phase_ended",
        "workflow_run.error",
        "workflow_run.status_ended",
    ];
    let query: String = types.iter().map(|t| format!("&types[]={t}")).collect();
    let listed = s
        .client
        .get(&format!("/v1/sessions/{sid}/events?limit=100{query}"))
        .await
        .ok();
    let listed_ids: Vec<&Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["id"])
        .collect();
    let run_ids: Vec<&Value> = events
        .iter()
        .filter(|e| t(e).starts_with("workflow_run."))
        .map(|e| &e["id"])
        .collect();
    assert_eq!(listed_ids, run_ids);
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(session["status"], "idle");
}

async fn refused_starts_create_no_run(b: Backend) {
    let s = server(b, |l| l.max_open_runs = 1).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let sleeper = json!({"agents": {"w": {"system": "Wait."}},
        "phases": [{"name": "Wait", "steps": [{"agent": {"use": "w", "prompt": "sleep 3000\nsay done"}}]}]});
    let unknown = json!({"agents": {"w": {"system": "Wait."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "nobody", "prompt": "say x"}}]}]});
    let script = format!(
        "call ant__start_workflow_run {sleeper}\n---\ncall ant__start_workflow_run {sleeper}\n---\nsay second: {{{{result}}}}\ncall ant__start_workflow_run {unknown}\n---\nsay third: {{{{result}}}}"
    );
    s.client.say(&sid, &script).await;
    st.until_idle(60).await;
    let events = s.client.all_events(&sid).await;
    assert_eq!(
        of_type(&events, "workflow_run.created").len(),
        1,
        "{events:#?}"
    );
    let errors = of_type(&events, "workflow_run.error");
    assert_eq!(errors.len(), 2, "{events:#?}");
    assert!(errors.iter().all(|e| e["workflow_run_id"].is_null()));
    assert_eq!(errors[0]["error"]["type"], "max_workflow_runs_error");
    assert_eq!(errors[1]["error"]["type"], "program_error");
    let said: Vec<String> = of_type(&events, "agent.message")
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        said.iter()
            .any(|t| t.contains("second:") && t.contains("open workflow runs")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|t| t.contains("third:") && t.contains("nobody")),
        "{said:?}"
    );
    // The first run still completes.
    assert_eq!(of_type(&events, "workflow_run.status_ended").len(), 1);
}

async fn failed_agents_end_the_run_or_are_counted(b: Backend) {
    let s = server(b, |_| {}).await;
    for (on_error, expect) in [("fail", "error"), ("continue", "completed")] {
        let (sid, mut st) = session(&s, json!({})).await;
        let p = json!({"agents": {"r": {"system": "Refuse."}},
            "phases": [{"name": "P", "steps": [{"agent": {"use": "r", "prompt": "refuse", "save": "x", "on_error": on_error}}]}]});
        s.client.say(&sid, &start_script(&p)).await;
        st.until_idle(60).await;
        let events = s.client.all_events(&sid).await;
        let ended = of_type(&events, "workflow_run.status_ended");
        assert_eq!(ended.len(), 1, "{events:#?}");
        assert_eq!(ended[0]["result"]["type"], expect, "{events:#?}");
        if expect == "error" {
            assert_eq!(ended[0]["result"]["error"]["type"], "program_error");
            let t = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
            let error = position(&events, |e| t(e) == "workflow_run.error");
            let phase_end = position(&events, |e| t(e) == "workflow_run.phase_ended");
            let end = position(&events, |e| t(e) == "workflow_run.status_ended");
            assert!(error < phase_end && phase_end < end);
        }
    }
    // A step that would pass the run's agent limit starts none of its agents.
    let s = server(b, |l| l.max_agents_per_run = 2).await;
    let (sid, mut st) = session(&s, json!({})).await;
    s.client.say(&sid, &start_script(&plan())).await;
    st.until_idle(60).await;
    let events = s.client.all_events(&sid).await;
    let ended = of_type(&events, "workflow_run.status_ended");
    assert_eq!(
        ended[0]["result"]["error"]["type"], "thread_limit_error",
        "{events:#?}"
    );
    assert_eq!(of_type(&events, "session.thread_created").len(), 0);
}

async fn the_agent_stops_a_run(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let p = json!({"agents": {"w": {"system": "Look things up."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "w", "prompt": "call lookup {}"}}]}]});
    // The run's agent calls the client's tool at once; the primary stops the run while that
    // call waits (its own second request streams for two seconds first).
    let script = format!(
        "call ant__start_workflow_run {p}\n---\nsleep 2000\ncall ant__stop_workflow_run {}\n---\nsay stopped",
        r#"{"workflow_run_id": "{{result.workflow_run_id}}"}"#
    );
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let events = s.client.all_events(&sid).await;
    let t = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
    let call = of_type(&events, "agent.custom_tool_use")[0].clone();
    assert!(call["session_thread_id"].is_string());
    let ended = position(&events, |e| t(e) == "workflow_run.status_ended");
    assert_eq!(events[ended]["result"]["type"], "stopped");
    let terminated = position(&events, |e| t(e) == "session.thread_status_terminated");
    assert!(terminated < ended);
    // Too late to answer the stopped thread's call.
    let late = s
        .client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": call["id"],
                               "content": [{"type": "text", "text": "x"}]}]}),
        )
        .await;
    late.err(400);
}

async fn a_confirmation_after_its_run_stopped_changes_nothing(b: Backend) {
    let s = server(b, |_| {}).await;
    let tools = json!([{"type": "agent_toolset_20260401",
        "default_config": {"permission_policy": {"type": "always_ask"}}}]);
    let (sid, mut st) = session(&s, json!({"tools": tools})).await;
    let p = json!({"agents": {"w": {"system": "Run things."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "w", "prompt": r#"call bash {"command": "echo hi"}"#}}]}]});
    let script = format!(
        "call ant__start_workflow_run {p}\n---\nsleep 2000\ncall ant__stop_workflow_run {}\n---\nsay stopped",
        r#"{"workflow_run_id": "{{result.workflow_run_id}}"}"#
    );
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let before = s.client.all_events(&sid).await;
    let call = of_type(&before, "agent.tool_use")[0].clone();
    assert_eq!(call["evaluated_permission"], "ask", "{call:#}");
    let thread = call["session_thread_id"].as_str().unwrap().to_string();
    // The thread was stopped and archived with its run: the confirmation is taken, kept on
    // that thread, and runs nothing.
    let echo = s
        .client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": call["id"], "result": "allow"}]}),
        )
        .await
        .ok();
    assert_eq!(
        echo["data"][0]["session_thread_id"],
        thread.as_str(),
        "{echo:#}"
    );
    let after = s.client.all_events(&sid).await;
    assert_eq!(after.len(), before.len() + 1, "{after:#?}");
    assert_eq!(after.last().unwrap()["type"], "user.tool_confirmation");
    // It counts as the call's confirmation: a second one is refused.
    let again = s
        .client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": call["id"], "result": "deny"}]}),
        )
        .await
        .err(400);
    assert!(again.contains("already answered"), "{again}");
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(session["status"], "idle");
    // A result is still refused: the model never reads it.
    s.client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.tool_result", "tool_use_id": call["id"]}]}),
        )
        .await
        .err(400);
    // A confirmation of a call that is not a run thread's is still refused.
    s.client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": "sevt_nope", "result": "allow"}]}),
        )
        .await
        .err(400);
}

async fn a_waiting_run_agent_idles_the_session_with_its_call(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let p = json!({"agents": {"w": {"system": "Look things up."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "w", "prompt": "call lookup {}", "save": "found"}}]}],
        "result": "found {{found}}"});
    s.client.say(&sid, &start_script(&p)).await;
    let idle = st.until_idle(60).await;
    assert_eq!(
        idle["stop_reason"]["type"], "requires_action",
        "{:#?}",
        st.seen
    );
    let events = s.client.all_events(&sid).await;
    let call = of_type(&events, "agent.custom_tool_use")[0].clone();
    assert!(call["session_thread_id"].is_string());
    assert_eq!(idle["stop_reason"]["event_ids"], json!([call["id"]]));
    // While the run is open, it blocks changing the session's agent and archiving its thread.
    let blocked = s
        .client
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"agent": {"tools": []}}),
        )
        .await;
    assert_eq!(blocked.status.as_u16(), 400, "{}", blocked.body);
    assert_eq!(
        blocked.body["error"]["details"]["error_code"], "workflow_run_open",
        "{}",
        blocked.body
    );
    let tid = call["session_thread_id"].as_str().unwrap();
    let archive = s
        .client
        .post(
            &format!("/v1/sessions/{sid}/threads/{tid}/archive"),
            json!({}),
        )
        .await;
    assert_eq!(archive.status.as_u16(), 400, "{}", archive.body);
    assert_eq!(
        archive.body["error"]["details"]["error_code"],
        "workflow_run_open"
    );
    // The answer lets the run finish, and the agent gets its result.
    s.client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": call["id"],
                               "content": [{"type": "text", "text": "the answer"}]}]}),
        )
        .await
        .ok();
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let events = s.client.all_events(&sid).await;
    let ended = of_type(&events, "workflow_run.status_ended");
    assert_eq!(ended[0]["result"]["type"], "completed");
    let said = of_type(&events, "agent.message");
    let last = said.last().unwrap()["content"][0]["text"].as_str().unwrap();
    assert!(last.contains("found the answer"), "{last}");
}

async fn workflows_are_on_unless_an_agent_turns_them_off(b: Backend) {
    let s = TestServer::start(b).await;
    let create = |multiagent: Value| json!({"name": "x", "model": "mast-scripted", "multiagent": multiagent});
    let on =
        json!({"type": "enabled", "inline_agents": {"type": "enabled"}, "predefined_agents": []});
    // Omitted and null take the default, as upstream.
    for m in [
        json!({"type": "multiagent_20261001"}),
        json!({"type": "multiagent_20261001", "workflows": null}),
    ] {
        let a = s.client.post("/v1/agents", create(m)).await.ok();
        assert_eq!(a["multiagent"]["workflows"], on, "{a:#}");
    }
    let off = s
        .client
        .post(
            "/v1/agents",
            create(json!({"type": "multiagent_20261001", "workflows": {"type": "disabled"}})),
        )
        .await
        .ok();
    assert_eq!(off["multiagent"]["workflows"], json!({"type": "disabled"}));
    // An update that leaves `workflows` out keeps what the version holds.
    let id = off["id"].as_str().unwrap();
    let updated = s
        .client
        .post(
            &format!("/v1/agents/{id}"),
            json!({"version": 1, "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"}}}),
        )
        .await
        .ok();
    assert_eq!(
        updated["multiagent"]["workflows"],
        json!({"type": "disabled"})
    );
    // A custom tool may not take the platform's prefix.
    let refused = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "x", "model": "mast-scripted", "tools": [{"type": "custom", "name": "ant__x",
                   "description": "d", "input_schema": {"type": "object"}}]}),
        )
        .await
        .err(400);
    assert!(refused.contains("ant__x"), "{refused}");
}

/// A plan whose one agent works for three seconds.
fn slow_plan(extra: Value) -> Value {
    let mut p = json!({"agents": {"w": {"system": "Work slowly."}},
        "phases": [{"name": "Slow", "steps": [{"agent": {"use": "w", "prompt": "sleep 3000\nsay done", "save": "out"}}]}],
        "result": "{{out}}"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

async fn a_run_ends_when_its_lifetime_passes(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    s.client
        .say(
            &sid,
            &start_script(&slow_plan(json!({"lifetime_seconds": 1}))),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(&sid).await;
    let t = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
    let ended = position(&events, |e| t(e) == "workflow_run.status_ended");
    assert_eq!(
        events[ended]["result"]["error"]["type"], "timeout_error",
        "{events:#?}"
    );
    let error = position(&events, |e| t(e) == "workflow_run.error");
    let terminated = position(&events, |e| t(e) == "session.thread_status_terminated");
    assert!(error < terminated && terminated < ended, "{events:#?}");
    // The agent heard of it.
    let said = of_type(&events, "agent.message");
    let last = said.last().unwrap()["content"][0]["text"].as_str().unwrap();
    assert!(last.contains("timeout_error"), "{last}");
}

/// Starts the slow run and interrupts the session while its agent works; returns the run's
/// id once the session is idle.
async fn start_and_interrupt(s: &TestServer, sid: &str, st: &mut Stream) -> String {
    s.client
        .say(sid, &start_script(&slow_plan(json!({}))))
        .await;
    let created = st
        .until(60, |e| e["type"] == "session.thread_created")
        .await;
    let run = created["workflow_run_id"].as_str().unwrap().to_string();
    let tid = created["session_thread_id"].as_str().unwrap().to_string();
    // While the run runs, the session can be neither archived nor deleted.
    for blocked in [
        s.client
            .post(&format!("/v1/sessions/{sid}/archive"), json!({}))
            .await,
        s.client.delete(&format!("/v1/sessions/{sid}")).await,
    ] {
        assert_eq!(blocked.status.as_u16(), 400, "{}", blocked.body);
        assert_eq!(
            blocked.body["error"]["details"]["error_code"], "workflow_run_open",
            "{}",
            blocked.body
        );
    }
    // Naming one of the run's threads stops nothing.
    s.client
        .send_events(
            sid,
            json!([{"type": "user.interrupt", "session_thread_id": tid}]),
        )
        .await;
    s.client
        .send_events(sid, json!([{"type": "user.interrupt"}]))
        .await;
    let paused = st
        .until(60, |e| e["type"] == "workflow_run.status_idle")
        .await;
    assert_eq!(paused["workflow_run_id"], run.as_str());
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(sid).await;
    assert!(
        of_type(&events, "workflow_run.status_ended").is_empty(),
        "{events:#?}"
    );
    run
}

async fn an_interrupt_pauses_runs_until_the_next_message(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let run = start_and_interrupt(&s, &sid, &mut st).await;
    // The next message lifts the interrupt's pause: the run goes on and completes.
    s.client.say(&sid, "say carry on").await;
    let resumed = st
        .until(60, |e| e["type"] == "workflow_run.status_running")
        .await;
    assert_eq!(resumed["workflow_run_id"], run.as_str());
    let ended = st
        .until(60, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(ended["result"]["type"], "completed", "{:#?}", st.seen);
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(&sid).await;
    let said = of_type(&events, "agent.message");
    let last = said.last().unwrap()["content"][0]["text"].as_str().unwrap();
    assert!(last.contains("Result:") && last.contains("done"), "{last}");
}

async fn archiving_a_paused_session_stops_its_runs(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let run = start_and_interrupt(&s, &sid, &mut st).await;
    s.client
        .post(&format!("/v1/sessions/{sid}/archive"), json!({}))
        .await
        .ok();
    let events = s.client.all_events(&sid).await;
    let n = events.len();
    assert_eq!(
        events[n - 1]["type"],
        "workflow_run.status_ended",
        "{events:#?}"
    );
    assert_eq!(events[n - 1]["workflow_run_id"], run.as_str());
    assert_eq!(events[n - 1]["result"]["type"], "stopped");
    assert_eq!(events[n - 2]["type"], "workflow_run.phase_ended");
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads?limit=100"))
        .await
        .ok();
    for th in threads["data"].as_array().unwrap() {
        if !th["workflow_run_id"].is_null() {
            assert_eq!(th["status"], "terminated", "{th}");
        }
    }
}

async fn a_run_of_two_hundred_agents_completes(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let items: Vec<String> = (1..=200).map(|i| format!("doc{i}")).collect();
    let p = json!({"agents": {"r": {"system": "Read."}},
        "inputs": {"docs": items},
        "phases": [{"name": "All", "steps": [{"map": {"over": "docs", "as": "doc", "use": "r",
            "prompt": "say {{doc}} read", "save": "notes", "max_parallel": 64}}]}],
        "result": "{{notes.count}} notes, the last: {{notes.200}}"});
    s.client.say(&sid, &start_script(&p)).await;
    let ended = st
        .until(120, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(ended["result"]["type"], "completed");
    st.until_idle(60).await;
    let events = s.client.all_events(&sid).await;
    // Never more than 64 of the run's threads at work at once.
    let mut working = 0i64;
    let mut most = 0i64;
    for e in &events {
        match e["type"].as_str().unwrap() {
            "session.thread_created" => working += 1,
            "session.thread_status_terminated" => working -= 1,
            _ => {}
        }
        most = most.max(working);
    }
    assert_eq!(of_type(&events, "session.thread_created").len(), 200);
    assert!(most <= 64 && most > 1, "{most} at once");
    let last = of_type(&events, "agent.message").last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(last.contains("200 notes, the last: doc200 read"), "{last}");
}

async fn a_crash_after_phase_one_neither_repeats_nor_loses_the_run(b: Backend) {
    use crate::crash::{check_log, free_port, spawn_with, wait_up};
    use crate::support::{Client, eventually, fresh_postgres_database};
    let dir = tempfile::TempDir::new().unwrap();
    let db = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let env: [(&str, &str); 0] = [];
    let port = free_port();
    let mut child = spawn_with(dir.path(), db.as_deref(), port, &env);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let agent = c
        .post(
            "/v1/agents",
            json!({"name": "lead", "model": "mast-scripted",
                   "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                                  "workflows": {"type": "enabled"}}}),
        )
        .await
        .ok();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    // Phase 2's agent works long enough for the crash to find it at work; the result reads
    // phase 1's results, which the restarted runner must read back from their threads.
    let mut p = plan();
    p["phases"][1]["steps"][0]["agent"]["prompt"] =
        json!("sleep 4000\nsay Merged {{notes.count}}.");
    p["result"] = json!("{{notes}} / {{merged}}");
    c.say(&sid, &start_script(&p)).await;
    eventually(30, "phase 1 to end", || async {
        let log = c.all_events(&sid).await;
        (log.iter()
            .filter(|e| e["type"] == "workflow_run.phase_started")
            .count()
            == 2)
            .then_some(())
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let port = free_port();
    let mut child = spawn_with(dir.path(), db.as_deref(), port, &env);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let log = eventually(60, "the run to complete", || async {
        let log = c.all_events(&sid).await;
        log.iter()
            .any(|e| e["type"] == "session.status_idle")
            .then_some(log)
    })
    .await;
    check_log(&log);
    let count = |t: &str| log.iter().filter(|e| e["type"] == t).count();
    assert_eq!(count("workflow_run.created"), 1);
    assert_eq!(count("workflow_run.status_ended"), 1);
    assert_eq!(count("workflow_run.phase_started"), 2);
    assert_eq!(count("workflow_run.phase_ended"), 2);
    assert_eq!(count("session.thread_created"), 4);
    let ended = log
        .iter()
        .find(|e| e["type"] == "workflow_run.status_ended")
        .unwrap();
    assert_eq!(ended["result"]["type"], "completed", "{log:#?}");
    let last = log
        .iter()
        .rev()
        .find(|e| e["type"] == "agent.message")
        .unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last.contains("[1] Read a.") && last.contains("[3] Read c.") && last.contains("Merged 3."),
        "{last}"
    );
    child.kill().ok();
    child.wait().ok();
}

async fn runs_pause_at_the_budget_and_resume_when_it_is_raised(b: Backend) {
    let s = TestServer::start_tuned(b, Options::default(), |c| {
        c.engine.prices = mast::config::load_prices(
            Some(r#"{"mast-scripted": {"input": "10", "output": "20"}}"#),
            None,
        )
        .unwrap();
    })
    .await;
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "lead", "model": "mast-scripted",
                   "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                                  "workflows": {"type": "enabled"}}}),
        )
        .await
        .ok();
    let env = s.client.environment().await;
    let budget = |cents: u32| json!({"type": "limit", "max_list_cost": {"amount": cents.to_string(), "currency": "USD"}});
    let sid = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env["id"], "budget": budget(1)}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    // Many small agents, a few at a time: the cap is reached while the run works.
    let items: Vec<String> = (1..=200).map(|i| format!("part {i}")).collect();
    let p = json!({"agents": {"r": {"system": "Read."}}, "inputs": {"parts": items},
        "phases": [{"name": "All", "steps": [{"map": {"over": "parts", "as": "x", "use": "r",
            "prompt": "say {{x}} read", "save": "out", "max_parallel": 4}}]}],
        "result": "{{out.count}} parts"});
    s.client.say(&sid, &start_script(&p)).await;
    let idle = st.until_idle(120).await;
    assert_eq!(
        idle["stop_reason"]["type"], "budget_reached",
        "{:#?}",
        st.seen
    );
    let events = s.client.all_events(&sid).await;
    let t = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
    assert!(
        of_type(&events, "workflow_run.status_ended").is_empty(),
        "the run stays open"
    );
    let paused = position(&events, |e| t(e) == "workflow_run.status_idle");
    let usage = events
        .iter()
        .rposition(|e| t(e) == "session.usage")
        .unwrap();
    let session_idle = events
        .iter()
        .rposition(|e| t(e) == "session.status_idle")
        .unwrap();
    assert!(paused < usage && usage < session_idle, "{events:#?}");
    // Raising the cap resumes the run; it completes and the agent reads its result.
    s.client
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"budget": budget(1_000_000)}),
        )
        .await
        .ok();
    let resumed = st
        .until(60, |e| e["type"] == "workflow_run.status_running")
        .await;
    assert!(resumed["workflow_run_id"].is_string());
    let ended = st
        .until(120, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(ended["result"]["type"], "completed", "{:#?}", st.seen);
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(&sid).await;
    let last = of_type(&events, "agent.message").last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(last.contains("200 parts"), "{last}");
}

async fn a_run_times_out_in_a_session_nothing_wakes(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    // The run's agent waits on the client: the session idles, and no runner watches it.
    let p = json!({"lifetime_seconds": 2, "agents": {"w": {"system": "Look things up."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "w", "prompt": "call lookup {}"}}]}]});
    s.client.say(&sid, &start_script(&p)).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    // The reaper ends the run when its lifetime passes; the agent reads the end.
    let ended = st
        .until(30, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(
        ended["result"]["error"]["type"], "timeout_error",
        "{:#?}",
        st.seen
    );
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let events = s.client.all_events(&sid).await;
    let last = of_type(&events, "agent.message").last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(last.contains("timeout_error"), "{last}");
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(session["status"], "idle");
}

/// A server whose lead agent runs on the Messages API mock (so its requests can fail) with
/// workflows limited to one predefined agent, `helper`, on the scripted model (`helper`'s
/// definition extends `{"name": "helper", "model": "mast-scripted"}`); its session's stream
/// is open. Model requests are tried twice after the first.
async fn lead_on_mock(b: Backend, helper: Value) -> (MockAnthropic, TestServer, String, Stream) {
    let mock = MockAnthropic::start().await;
    let s = TestServer::start_with(
        b,
        Options {
            anthropic_base_url: Some(mock.url.clone()),
            max_retries: 2,
            ..Default::default()
        },
    )
    .await;
    let mut def = json!({"name": "helper", "model": "mast-scripted"});
    for (k, v) in helper.as_object().unwrap() {
        def[k] = v.clone();
    }
    let helper = s.client.post("/v1/agents", def).await.ok();
    let (sid, st) = session(
        &s,
        json!({"model": "claude-opus-4-7",
               "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                              "workflows": {"type": "enabled", "predefined_agents": [helper["id"]]}}}),
    )
    .await;
    (mock, s, sid, st)
}

async fn a_failed_primary_turn_leaves_the_run_working(b: Backend) {
    let lookup = json!({"type": "custom", "name": "lookup", "description": "Looks a thing up.",
                        "input_schema": {"type": "object"}});
    let (mock, s, sid, mut st) = lead_on_mock(b, json!({"tools": [lookup]})).await;
    let plan = json!({"agents": {"h": {"predefined": "helper"}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "h", "prompt": "call lookup {}", "save": "out"}}]}],
        "result": "{{out}}"});
    mock.push([
        Reply::Tools(None, vec![("ant__start_workflow_run".into(), plan)]),
        Reply::Status(529, "overloaded_error"),
        Reply::Status(529, "overloaded_error"),
        Reply::Status(529, "overloaded_error"),
        Reply::Text("The run found it.".into()),
    ]);
    s.client.say(&sid, "find it").await;
    // The lead's turn fails while the run works: the session does not idle for the failure,
    // only for the run's call waiting on the client.
    let idle = st.until_idle(60).await;
    assert_eq!(
        idle["stop_reason"]["type"], "requires_action",
        "{:#?}",
        st.seen
    );
    let exhausted: Vec<&Value> = st
        .seen
        .iter()
        .filter(|e| e["type"] == "session.error")
        .filter(|e| e["error"]["retry_status"]["type"] == "exhausted")
        .collect();
    assert_eq!(exhausted.len(), 1, "{:#?}", st.seen);
    let call = idle["stop_reason"]["event_ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    s.client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": call,
                               "content": [{"type": "text", "text": "the answer is 42"}]}]}),
        )
        .await
        .ok();
    // The run ends and the lead gets a new turn to read it.
    let ended = st
        .until(60, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(ended["result"]["type"], "completed", "{:#?}", st.seen);
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("the answer is 42"), "{last}");
}

async fn a_message_after_a_failed_turn_and_an_interrupt_is_answered(b: Backend) {
    let (mock, s, sid, mut st) = lead_on_mock(b, json!({})).await;
    // The run's agent works for a while (its one request streams slowly).
    let plan = json!({"agents": {"h": {"predefined": "helper"}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "h", "prompt": "sleep 8000\nsay part done", "save": "out"}}]},
                   {"name": "Q", "steps": [{"agent": {"use": "h", "prompt": "sleep 4000\nsay more done", "save": "more"}}]}],
        "result": "{{out}}, {{more}}"});
    mock.push([
        Reply::Tools(None, vec![("ant__start_workflow_run".into(), plan)]),
        Reply::Status(529, "overloaded_error"),
        Reply::Status(529, "overloaded_error"),
        Reply::Status(529, "overloaded_error"),
        Reply::Text("Still on it.".into()),
        Reply::Text("The run is done.".into()),
    ]);
    s.client.say(&sid, "go").await;
    st.until(60, |e| {
        e["type"] == "session.error" && e["error"]["retry_status"]["type"] == "exhausted"
    })
    .await;
    // The interrupt pauses the run; its agent finishes its request, and the session idles as
    // an interrupt idles it.
    s.client
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.interrupt"}]}),
        )
        .await
        .ok();
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(session["status"], "idle");
    // The next message is the agent's: it answers at once while the resumed run works on,
    // and the run's end is read after.
    s.client.say(&sid, "status?").await;
    let ended = st
        .until(60, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(ended["result"]["type"], "completed", "{:#?}", st.seen);
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:#?}", st.seen);
    let events = s.client.all_events(&sid).await;
    let said: Vec<&str> = of_type(&events, "agent.message")
        .iter()
        .filter_map(|e| e["content"][0]["text"].as_str())
        .collect();
    assert_eq!(said, ["Still on it.", "The run is done."]);
    let t = |e: &Value| e["type"].as_str().unwrap_or("").to_string();
    let answered = position(&events, |e| {
        t(e) == "agent.message" && e["content"][0]["text"] == "Still on it."
    });
    let run_ended = position(&events, |e| t(e) == "workflow_run.status_ended");
    assert!(answered < run_ended, "{events:#?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("part done, more done"), "{last}");
}

async fn predefined_agents_run_their_snapshots(b: Backend) {
    let s = server(b, |_| {}).await;
    // Inline agents disabled with nobody listed is refused.
    let refused = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "x", "model": "mast-scripted",
                   "multiagent": {"type": "multiagent_20261001",
                                  "workflows": {"type": "enabled", "inline_agents": {"type": "disabled"}}}}),
        )
        .await
        .err(400);
    assert!(refused.contains("predefined_agents"), "{refused}");
    let helper = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "helper", "model": "mast-scripted", "system": "You help."}),
        )
        .await
        .ok();
    let (sid, mut st) = session(
        &s,
        json!({"multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"},
            "workflows": {"type": "enabled", "inline_agents": {"type": "disabled"},
                          "predefined_agents": [helper["id"], {"type": "self"}]}}}),
    )
    .await;
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    let listed = session["agent"]["multiagent"]["workflows"]["predefined_agents"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), 2, "{session:#}");
    assert_eq!(listed[0]["type"], "agent");
    assert_eq!(listed[0]["id"], helper["id"]);
    assert_eq!(listed[0]["system"], "You help.");
    assert_eq!(listed[0]["model"]["id"], "mast-scripted");
    assert_eq!(listed[1]["id"], session["agent"]["id"]);
    // An inline agent is refused (program_error, no run); the listed one runs as itself.
    let inline = json!({"agents": {"i": {"system": "Inline."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "i", "prompt": "say hi"}}]}]});
    let listed_plan = json!({"agents": {"h": {"predefined": "helper"}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "h", "prompt": "say helped", "save": "out"}}]}],
        "result": "{{out}}"});
    let script = format!(
        "call ant__start_workflow_run {inline}\n---\ncall ant__start_workflow_run {listed_plan}\n---\nsay {{{{result}}}}"
    );
    s.client.say(&sid, &script).await;
    st.until(60, |e| e["type"] == "workflow_run.status_ended")
        .await;
    st.until_idle(60).await;
    let events = s.client.all_events(&sid).await;
    let errors = of_type(&events, "workflow_run.error");
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert_eq!(errors[0]["error"]["type"], "program_error");
    assert!(errors[0]["workflow_run_id"].is_null());
    let created = of_type(&events, "session.thread_created");
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["agent_name"], "helper");
    let tid = created[0]["session_thread_id"].as_str().unwrap();
    let th = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads/{tid}"))
        .await
        .ok();
    assert_eq!(th["agent"]["type"], "agent");
    assert_eq!(th["agent"]["id"], helper["id"]);
    assert_eq!(th["agent"]["system"], "You help.");
    let last = of_type(&events, "agent.message").last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let trace: Vec<String> = events
        .iter()
        .map(|e| format!("{} {}", e["type"], e["content"][0]["text"]))
        .collect();
    assert!(last.contains("helped"), "{last}\n{trace:#?}");
}

async fn a_run_agents_call_stays_answerable_through_an_interrupt(b: Backend) {
    let s = server(b, |_| {}).await;
    let (sid, mut st) = session(&s, json!({})).await;
    let p = json!({"agents": {"w": {"system": "Look things up."}},
        "phases": [{"name": "P", "steps": [{"agent": {"use": "w", "prompt": "call lookup {}", "save": "found"}}]}],
        "result": "found {{found}}"});
    s.client.say(&sid, &start_script(&p)).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    let call = idle["stop_reason"]["event_ids"][0].clone();
    // The interrupt pauses the run; its agent's call still waits, and the session says so.
    s.client
        .send_events(&sid, json!([{"type": "user.interrupt"}]))
        .await;
    let paused = st
        .until(30, |e| e["type"] == "workflow_run.status_idle")
        .await;
    assert!(paused["workflow_run_id"].is_string());
    let idle = st.until_idle(30).await;
    assert_eq!(
        idle["stop_reason"]["type"], "requires_action",
        "{:#?}",
        st.seen
    );
    assert_eq!(idle["stop_reason"]["event_ids"], json!([call]));
    // Answered while paused, the agent stops before its next request; the next message
    // resumes the run, which completes.
    s.client
        .send_events(
            &sid,
            json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call,
                    "content": [{"type": "text", "text": "it"}]}]),
        )
        .await;
    st.until_idle(30).await;
    s.client.say(&sid, "say go on").await;
    let ended = st
        .until(60, |e| e["type"] == "workflow_run.status_ended")
        .await;
    assert_eq!(ended["result"]["type"], "completed", "{:#?}", st.seen);
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(&sid).await;
    let last = of_type(&events, "agent.message").last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let trace: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["type"], e["content"][0]["text"], e["stop_reason"]
            )
        })
        .collect();
    assert!(last.contains("found it"), "{last}\n{trace:#?}");
}

"""Workflow runs through the official SDK with
strict response validation: an agent with workflows enabled reads back as the SDK models it,
every `workflow_run.*` event a run emits parses, and the run's threads list as the SDK's
session threads with their inline agents."""

import json
import uuid

import pytest

RUN_TYPES = [
    "workflow_run.created",
    "workflow_run.status_running",
    "workflow_run.status_idle",
    "workflow_run.phase_started",
    "workflow_run.phase_ended",
    "workflow_run.error",
    "workflow_run.status_ended",
]

PLAN = {
    "name": "Read and merge",
    "agents": {"reader": {"system": "You read one document."}},
    "inputs": {"docs": ["a", "b", "c"]},
    "phases": [
        {"name": "P1", "steps": [{"map": {"over": "docs", "as": "doc", "use": "reader",
                                          "prompt": "say Read {{doc}}.", "save": "notes"}}]},
        {"name": "P2", "steps": [{"agent": {"use": "reader", "prompt": "say Merged {{notes.count}}.",
                                            "save": "merged"}}]},
    ],
    "result": "{{merged}}",
}


@pytest.fixture
def env(client):
    return client.beta.environments.create(name="wf-" + uuid.uuid4().hex[:8])


def lead(client):
    return client.beta.agents.create(
        name="lead", model="mast-scripted",
        multiagent={"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                    "workflows": {"type": "enabled"}})


def test_an_agent_reads_back_with_workflows(client):
    agent = lead(client)
    wf = agent.multiagent.workflows
    assert wf.type == "enabled"
    assert wf.inline_agents.type == "enabled"
    assert list(wf.predefined_agents or []) == []


def test_a_run_streams_parses_and_lists(client, env):
    agent = lead(client)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    script = f"call ant__start_workflow_run {json.dumps(PLAN)}\n---\nsay Started: {{{{result}}}}"
    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.events.send(sess.id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                break
    types = [e.type for e in seen]
    assert types.count("workflow_run.created") == 1
    assert types.count("workflow_run.phase_started") == 2
    assert types.count("workflow_run.phase_ended") == 2
    assert types.index("workflow_run.status_ended") < len(types) - 1
    created = next(e for e in seen if e.type == "workflow_run.created")
    assert [p.name for p in created.phases] == ["P1", "P2"]
    ended = next(e for e in seen if e.type == "workflow_run.status_ended")
    assert ended.result.type == "completed"
    assert seen[-1].stop_reason.type == "end_turn"
    # Listing with the seven types returns exactly the streamed run events.
    listed = list(client.beta.sessions.events.list(sess.id, types=RUN_TYPES))
    assert [e.id for e in listed] == [e.id for e in seen if e.type.startswith("workflow_run.")]
    # The run's threads, archived once they returned, with their inline agent.
    threads = list(client.beta.sessions.threads.list(sess.id))
    run_threads = [t for t in threads if t.workflow_run_id == created.workflow_run_id]
    assert len(run_threads) == 4
    for t in run_threads:
        assert t.status == "terminated"
        assert t.archived_at is not None
        assert t.agent.type == "inline"
        assert t.usage is not None

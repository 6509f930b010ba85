"""Multiagent sessions through the official SDK (strict response validation): a coordinator
delegating to two agents in parallel, a delegate's custom tool answered on the session, and
the threads endpoints."""

import json
import uuid

import anthropic
import pytest

from conftest import WEATHER_TOOL


def scripted(client, name, **extra):
    return client.beta.agents.create(name=name, model="mast-scripted", **extra)


def send(agent, message, **more):
    return "call send_to_agent " + json.dumps({"agent": agent, "message": message, **more})


def turn(client, session_id, script, answer=None):
    """Sends a scripted turn; streams until the session stops for good. `answer` is called on
    every requires_action idle to settle it."""
    seen = []
    with client.beta.sessions.events.stream(session_id) as st:
        client.beta.sessions.events.send(session_id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                if ev.stop_reason.type == "requires_action" and answer is not None:
                    answer(ev, seen)
                    continue
                break
    return seen


@pytest.fixture
def env(client):
    return client.beta.environments.create(name="multi-" + uuid.uuid4().hex[:8])


def test_a_coordinator_delegates_in_parallel(client, env):
    a = scripted(client, "analyst", system="You analyse.")
    b = scripted(client, "critic")
    coord = scripted(client, "lead", multiagent={"type": "coordinator", "agents": [a.id, b.id]})
    assert [x.id for x in coord.multiagent.agents] == [a.id, b.id]
    sess = client.beta.sessions.create(agent=coord.id, environment_id=env.id)
    assert sess.agent.multiagent.agents[0].name == "analyst"
    seen = turn(client, sess.id, "\n".join([
        send("analyst", "say numbers look fine"),
        send("critic", "say one risk remains"),
        "---",
        "say summary: {{result}}",
    ]))
    types = [e.type for e in seen]
    assert types.count("session.thread_created") == 2
    assert types.count("agent.thread_message_sent") == 2
    assert types.count("agent.thread_message_received") == 2
    assert types.count("agent.message") == 1, "the primary stream is condensed"
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert "numbers look fine" in final and "one risk remains" in final
    idles = [e for e in seen if e.type == "session.thread_status_idle"]
    assert {e.agent_name for e in idles} == {"analyst", "critic"}

    threads = list(client.beta.sessions.threads.list(sess.id))
    assert len(threads) == 3 and threads[0].parent_thread_id is None
    child = threads[1]
    assert child.type == "session_thread" and child.parent_thread_id == threads[0].id
    assert child.status == "idle" and child.agent.type == "agent"
    assert child.usage is not None and child.usage.output_tokens > 0
    assert client.beta.sessions.threads.retrieve(child.id, session_id=sess.id).id == child.id
    own = [e.type for e in client.beta.sessions.threads.events.list(child.id, session_id=sess.id)]
    assert own[0] == "session.thread_status_running" and "agent.message" in own
    archived = client.beta.sessions.threads.archive(child.id, session_id=sess.id)
    assert archived.status == "terminated" and archived.archived_at is not None
    # An interrupt naming it now is refused, and the request changes nothing.
    before = len(list(client.beta.sessions.events.list(sess.id)))
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.interrupt", "session_thread_id": child.id}])
    assert f"`{child.id}` is terminated" in e.value.message
    assert len(list(client.beta.sessions.events.list(sess.id))) == before


def test_a_delegates_custom_tool_is_routed_back(client, env):
    forecaster = scripted(client, "forecaster", tools=[WEATHER_TOOL])
    coord = scripted(client, "lead", multiagent={"type": "multiagent_20261001",
                                                 "subagents": {"type": "enabled", "predefined_agents": [forecaster.id]}})
    sess = client.beta.sessions.create(agent=coord.id, environment_id=env.id)
    asked = []

    def answer(idle, seen):
        uses = [e for e in seen if e.type == "agent.custom_tool_use"]
        assert idle.stop_reason.event_ids == [uses[-1].id]
        assert uses[-1].session_thread_id is not None
        asked.append(uses[-1].session_thread_id)
        client.beta.sessions.events.send(sess.id, events=[{
            "type": "user.custom_tool_result", "custom_tool_use_id": uses[-1].id,
            "content": [{"type": "text", "text": "rain"}]}])

    seen = turn(client, sess.id, "\n".join([
        send("forecaster", 'call get_weather {"city": "Bergen"}\n---\nsay Bergen: {{result}}'),
        "---",
        "say {{result}}",
    ]), answer)
    assert len(asked) == 1
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert final == "Bergen: rain"
    received = [e for e in seen if e.type == "user.custom_tool_result"]
    assert received and received[0].session_thread_id == asked[0]


def test_inline_agents_and_the_advisor(client, env):
    coord = scripted(client, "lead", multiagent={"type": "multiagent_20261001",
                                                 "advisor": {"type": "enabled", "model": "mast-scripted"}})
    sess = client.beta.sessions.create(agent=coord.id, environment_id=env.id)
    seen = turn(client, sess.id, "\n".join([
        send({"name": "poet", "system": "You write short poems."}, "say roses are red"),
        send("anthropic.advisor", "say keep it short"),
        "---",
        "say {{result}}",
    ]))
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert "roses are red" in final and "keep it short" in final
    threads = {t.id: t for t in client.beta.sessions.threads.list(sess.id)}
    kinds = sorted(t.agent.type for t in threads.values())
    assert kinds == ["advisor", "agent", "inline"]
    advisor = next(t for t in threads.values() if t.agent.type == "advisor")
    assert advisor.status == "terminated", "an advisor answers once"

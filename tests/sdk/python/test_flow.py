"""The session engine through the official SDK: the upstream custom-tool example (a
`get_weather` agent) verbatim against a Claude model id (answered by the scripted Messages API
server), the scripted model, interrupts, and the SDK's own session tool runner."""

import asyncio
import time

from conftest import WEATHER_TOOL


def test_custom_tool_flow_verbatim(client):
    c = client
    agent = c.beta.agents.create(name="w", model="claude-opus-4-7",
        tools=[{"type":"custom","name":"get_weather","description":"...","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}])
    env = c.beta.environments.create(name="e-" + agent.id[-8:], config={"type":"cloud","networking":{"type":"unrestricted"}})
    sess = c.beta.sessions.create(agent=agent.id, environment_id=env.id)
    seen = []
    with c.beta.sessions.events.stream(sess.id) as st:
        c.beta.sessions.events.send(sess.id, events=[{"type":"user.message","content":[{"type":"text","text":"weather?"}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "agent.custom_tool_use": pending = ev
            if ev.type == "session.status_idle":
                if ev.stop_reason.type == "requires_action":
                    c.beta.sessions.events.send(sess.id, events=[{"type":"user.custom_tool_result",
                        "custom_tool_use_id": pending.id, "content":[{"type":"text","text":"sunny"}]}])
                else: break
    assert pending.input == {"city": "Paris"}
    final = [e for e in seen if e.type == "agent.message"][-1]
    assert final.content[0].text == "It is sunny in Paris."
    assert seen[-1].stop_reason.type == "end_turn"
    listed = list(c.beta.sessions.events.list(sess.id, limit=1000))
    assert [e.id for e in listed] == [e.id for e in seen]
    assert c.beta.sessions.retrieve(sess.id).usage.input_tokens == 20


def test_parallel_tool_uses_and_partial_answers(client, environment):
    agent = client.beta.agents.create(name="p", model="mast-scripted", tools=[WEATHER_TOOL])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    script = 'call get_weather {"city":"Paris"}\ncall get_weather {"city":"Rome"}\n---\nsay {{result}}'
    idles = []
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            if ev.type != "session.status_idle":
                continue
            idles.append(ev)
            if ev.stop_reason.type != "requires_action":
                break
            first = ev.stop_reason.event_ids[0]
            client.beta.sessions.events.send(sess.id, events=[{"type": "user.custom_tool_result", "custom_tool_use_id": first,
                "content": [{"type": "text", "text": f"weather-{first[-4:]}"}]}])
    assert [len(i.stop_reason.event_ids) for i in idles[:-1]] == [2, 1]
    assert idles[-1].stop_reason.type == "end_turn"


def test_interrupt_and_previews(client, environment):
    agent = client.beta.agents.create(name="i", model="mast-scripted")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    types = []
    with client.beta.sessions.events.stream(sess.id, event_deltas=["agent.message"]) as st:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "sleep 300\nsay a b c"}]}])
        for ev in st:
            types.append(ev.type)
            if ev.type == "session.status_idle":
                break
    assert "event_start" in types and "event_delta" in types and "agent.message" in types
    started = time.time()
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "sleep 5000\nsay slow"}]}])
        for ev in st:
            if ev.type == "span.model_request_start":
                client.beta.sessions.events.send(sess.id, events=[{"type": "user.interrupt"}])
            if ev.type == "session.status_idle":
                assert ev.stop_reason.type == "end_turn"
                break
    assert time.time() - started < 4
    assert client.beta.sessions.retrieve(sess.id).status == "idle"


def test_sdk_session_tool_runner(async_client, client, environment):
    """The SDK's own reconnecting tool runner answers custom tool calls."""
    from anthropic.lib.tools import beta_async_tool

    @beta_async_tool
    async def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"windy in {city}"

    agent = client.beta.agents.create(name="r", model="mast-scripted", tools=[WEATHER_TOOL])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text",
        "text": 'call get_weather {"city":"Bergen"}\n---\nsay {{result}}'}]}])

    async def run():
        calls = []
        async for call in async_client.beta.sessions.events.tool_runner(sess.id, tools=[get_weather], max_idle=1.0):
            calls.append(call)
        return calls

    calls = asyncio.run(run())
    assert [c.name for c in calls] == ["get_weather"]
    final = [e for e in client.beta.sessions.events.list(sess.id) if e.type == "agent.message"][-1]
    assert final.content[0].text == "windy in Bergen"

"""Session fork (Mast's own `POST /v1/sessions/{id}/fork`, beyond the upstream API) through
the official SDK with strict response validation: both branches go on independently, the
fork's workspace is the one of its fork point, the fork point snaps back before an
unanswered tool call, multiagent threads fork with the session, and bad requests change
nothing."""

import json
import uuid

import anthropic
import pytest
from anthropic.types.beta.beta_managed_agents_session import BetaManagedAgentsSession

from conftest import WEATHER_TOOL, MessagesHandler, run, results, text_of


def fork(client, sid, event_id=None):
    """Forks through the SDK's raw request: the answer must validate as a Session."""
    body = {} if event_id is None else {"event_id": event_id}
    return client.post(f"/v1/sessions/{sid}/fork", body=body, cast_to=BetaManagedAgentsSession)


def events(client, sid):
    return list(client.beta.sessions.events.list(sid, limit=1000))


def weather_turn(client, sid, question, answer):
    """A turn of the scripted Claude server: the question gets a `get_weather` call, which
    this answers; returns the turn's events."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        client.beta.sessions.events.send(sid, events=[
            {"type": "user.message", "content": [{"type": "text", "text": question}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "agent.custom_tool_use":
                pending = ev
            if ev.type == "session.status_idle":
                if ev.stop_reason.type == "requires_action":
                    client.beta.sessions.events.send(sid, events=[{"type": "user.custom_tool_result",
                        "custom_tool_use_id": pending.id, "content": [{"type": "text", "text": answer}]}])
                    continue
                break
    return seen


def requests_with(marker):
    """The model requests (as the scripted Claude server received them) whose first message
    carries `marker`."""
    return [b for b in MessagesHandler.received
            if marker in json.dumps(b["messages"][0]["content"])]


def test_both_branches_go_on_independently(client, environment):
    marker = uuid.uuid4().hex
    agent = client.beta.agents.create(name="w", model="claude-opus-4-7", tools=[WEATHER_TOOL])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, title="trip",
                                       metadata={"team": "blue"})
    first = weather_turn(client, sess.id, f"weather? {marker}", "sunny")
    assert first[-1].stop_reason.type == "end_turn"
    second = weather_turn(client, sess.id, "and tomorrow?", "rainy")
    assert [e for e in second if e.type == "agent.message"][-1].content[0].text == "It is rainy in Paris."
    before = events(client, sess.id)

    # Fork at the end of the first turn.
    forked = fork(client, sess.id, first[-1].id)
    assert forked.id != sess.id and forked.status == "idle"
    assert forked.title == "Fork of trip"
    assert forked.metadata == {"team": "blue", "mast.forked_from_session": sess.id,
                               "mast.forked_at_event": first[-1].id}
    assert forked.agent.id == agent.id and forked.environment_id == environment.id
    assert forked.usage.input_tokens in (None, 0)
    copied = events(client, forked.id)
    upto = [e for e in before if e.id == first[-1].id][0]
    prefix = before[:before.index(upto) + 1]
    assert [e.type for e in copied] == [e.type for e in prefix]
    assert not {e.id for e in copied} & {e.id for e in before}, "the fork's events have ids of their own"
    # The copied tool result answers the copied tool use, not the original's.
    use = [e for e in copied if e.type == "agent.custom_tool_use"][0]
    assert [e for e in copied if e.type == "user.custom_tool_result"][0].custom_tool_use_id == use.id

    # The fork's next turn runs with the fork's history, and a different answer.
    third = weather_turn(client, forked.id, "and in the fork?", "snowy")
    assert [e for e in third if e.type == "agent.message"][-1].content[0].text == "It is snowy in Paris."
    asked = requests_with(marker)[-1]
    texts = json.dumps(asked["messages"])
    assert "and in the fork?" in texts and "sunny" in texts
    assert "and tomorrow?" not in texts and "rainy" not in texts
    tool_ids = [b["id"] for m in asked["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    assert use.id in tool_ids, "the model sees the fork's own tool-use ids"

    # The original is untouched and goes on with its own history.
    assert [e.id for e in events(client, sess.id)] == [e.id for e in before]
    fourth = weather_turn(client, sess.id, "and the day after?", "windy")
    assert [e for e in fourth if e.type == "agent.message"][-1].content[0].text == "It is windy in Paris."
    texts = json.dumps(requests_with(marker)[-1]["messages"])
    assert "and tomorrow?" in texts and "and in the fork?" not in texts
    assert client.beta.sessions.retrieve(sess.id).metadata == {"team": "blue"}


def test_the_fork_point_snaps_back_before_an_unanswered_tool_use(client, environment):
    agent = client.beta.agents.create(name="w", model="claude-opus-4-7", tools=[WEATHER_TOOL])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, ["weather?"])
    assert seen[-1].stop_reason.type == "requires_action"
    log = events(client, sess.id)
    use = [e for e in log if e.type == "agent.custom_tool_use"][0]
    start = [e for e in log if e.type == "span.model_request_start"][0]
    clean = log[log.index(start) - 1]
    for at in (None, use.id, log[-1].id):
        forked = fork(client, sess.id, at)
        assert forked.status == "idle"
        assert forked.metadata["mast.forked_at_event"] == clean.id
        assert forked.metadata["mast.fork_requested_event"] == (at or log[-1].id)
        copied = events(client, forked.id)
        assert [e.type for e in copied] == [e.type for e in log[:log.index(clean) + 1]]
        assert "agent.custom_tool_use" not in [e.type for e in copied]
    # The fork goes on from its clean point: the question and the new message reach the model.
    more = run(client, forked.id, ["still there?"])
    assert more[-1].stop_reason.type == "requires_action"
    # The original still waits for its answer, which it takes.
    client.beta.sessions.events.send(sess.id, events=[{"type": "user.custom_tool_result",
        "custom_tool_use_id": use.id, "content": [{"type": "text", "text": "foggy"}]}])
    final = [e for e in client.beta.sessions.events.list(sess.id, limit=1000)]
    assert any(e.type == "user.custom_tool_result" for e in final)


TOOLSET = [{"type": "agent_toolset_20260401"}]


def write(path, content):
    return "call write " + json.dumps({"file_path": path, "content": content})


def read(path):
    return "call read " + json.dumps({"file_path": path})


def test_the_forks_workspace_is_its_fork_points(client, environment):
    agent = client.beta.agents.create(name="coder", model="mast-scripted", tools=TOOLSET)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    one = run(client, sess.id, [write("/workspace/notes.txt", "one\n"), "say written"])
    assert all(not r.is_error for r in results(one))
    two = run(client, sess.id, [write("/workspace/notes.txt", "two\n"), "say rewritten"])
    assert all(not r.is_error for r in results(two))

    at_one = fork(client, sess.id, one[-1].id)
    got = run(client, at_one.id, [read("/workspace/notes.txt"), "say {{result}}"])
    assert "one" in text_of(results(got)[0]) and "two" not in text_of(results(got)[0])

    latest = fork(client, sess.id)
    got = run(client, latest.id, [read("/workspace/notes.txt"), "say {{result}}"])
    assert "two" in text_of(results(got)[0])

    # The forks' workspaces are their own: a write in one is not seen by the original.
    run(client, at_one.id, [write("/workspace/notes.txt", "fork\n"), "say ok"])
    got = run(client, sess.id, [read("/workspace/notes.txt"), "say {{result}}"])
    assert "two" in text_of(results(got)[0])


def scripted(client, name, **extra):
    return client.beta.agents.create(name=name, model="mast-scripted", **extra)


def send(agent, message, **more):
    return "call send_to_agent " + json.dumps({"agent": agent, "message": message, **more})


def test_a_multiagent_session_forks_with_its_threads(client, environment):
    a = scripted(client, "analyst")
    coord = scripted(client, "lead", multiagent={"type": "coordinator", "agents": [a.id]})
    sess = client.beta.sessions.create(agent=coord.id, environment_id=environment.id)
    first = run(client, sess.id, [send("analyst", "say numbers look fine"), "say summary: {{result}}"])
    assert "numbers look fine" in [e for e in first if e.type == "agent.message"][-1].content[0].text
    # The second turn starts a second delegate thread.
    run(client, sess.id, [send("analyst", "say second look"), "say again: {{result}}"])
    original_threads = list(client.beta.sessions.threads.list(sess.id))
    assert len(original_threads) == 3

    # At the end of the first turn only the first delegate exists.
    forked = fork(client, sess.id, first[-1].id)
    threads = list(client.beta.sessions.threads.list(forked.id))
    assert len(threads) == 2
    assert not {t.id for t in threads} & {t.id for t in original_threads}
    primary, child = sorted(threads, key=lambda t: t.parent_thread_id is not None)
    assert child.parent_thread_id == primary.id and child.status == "idle"
    assert child.agent.name == "analyst"
    child_events = list(client.beta.sessions.threads.events.list(child.id, session_id=forked.id, limit=1000))
    texts = json.dumps([e.model_dump(mode="json") for e in child_events])
    assert "numbers look fine" in texts and "second look" not in texts
    created = [e for e in events(client, forked.id) if e.type == "session.thread_created"]
    assert [e.session_thread_id for e in created] == [child.id]

    # The fork's coordinator continues the fork's copy of the delegate, which remembers its
    # first task.
    again = run(client, forked.id, [send("analyst", "say third look", thread_id=child.id),
                                   "say fork: {{result}}"])
    assert "third look" in [e for e in again if e.type == "agent.message"][-1].content[0].text
    assert len(list(client.beta.sessions.threads.list(forked.id))) == 2
    child_events = list(client.beta.sessions.threads.events.list(child.id, session_id=forked.id, limit=1000))
    received = [e for e in child_events if e.type == "agent.thread_message_received"]
    assert len(received) == 2
    # The original's threads are untouched.
    assert [t.id for t in client.beta.sessions.threads.list(sess.id)] == [t.id for t in original_threads]


def test_bad_requests_change_nothing(client, environment):
    agent = client.beta.agents.create(name="w", model="mast-scripted")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    run(client, sess.id, ["say hello"])
    other = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    run(client, other.id, ["say there"])
    foreign = events(client, other.id)[0].id
    count = len(list(client.beta.sessions.list(limit=100)))
    with pytest.raises(anthropic.NotFoundError) as e:
        fork(client, sess.id, foreign)
    assert e.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        fork(client, sess.id, "sevt_" + "0" * 26)
    with pytest.raises(anthropic.BadRequestError) as e:
        fork(client, sess.id, "not-an-event")
    assert e.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError):
        client.post(f"/v1/sessions/{sess.id}/fork", body={"event": foreign}, cast_to=BetaManagedAgentsSession)
    with pytest.raises(anthropic.NotFoundError):
        fork(client, "sesn_" + "0" * 26)
    # Metadata at its limit leaves no room for the fork's origin keys: refused, clearly.
    full = client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
                                       metadata={f"k{i}": "v" for i in range(16)})
    count += 1
    with pytest.raises(anthropic.BadRequestError) as e:
        fork(client, full.id)
    assert "mast." in e.value.body["error"]["message"]
    assert len(list(client.beta.sessions.list(limit=100))) == count


def test_archived_and_deleted_originals(client, environment):
    agent = client.beta.agents.create(name="w", model="mast-scripted")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    run(client, sess.id, ["say kept"])
    client.beta.sessions.archive(sess.id)
    forked = fork(client, sess.id)
    assert forked.archived_at is None
    assert client.beta.sessions.retrieve(sess.id).archived_at is not None
    got = run(client, forked.id, ["say continued"])
    assert [e for e in got if e.type == "agent.message"][-1].content[0].text == "continued"

    client.beta.sessions.delete(sess.id)
    with pytest.raises(anthropic.NotFoundError):
        fork(client, sess.id)
    # The fork lives on without its original.
    assert len(events(client, forked.id)) > 0
    run(client, forked.id, ["say still here"])

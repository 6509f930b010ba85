"""Hooks beyond `pre_tool_use` through the official SDK with strict response
validation, against a real receiver that verifies every call's signature: `post_tool_use`
replacing and annotating a result (the stored original kept), withholding it when the hook
fails, and on a client's `user.tool_result`; `user_prompt_submit` blocking a message (and an
initial event) with nothing stored; `stop` and `subagent_stop` keeping a thread working with a
reason; `subagent_start` refusing a delegation; an interrupt not waiting for a hook's answer;
and hooks created or deleted while sessions run applying at once, also across two replicas
on Postgres."""

import base64
import os
import time
import urllib.request
import uuid

import anthropic
import pytest

from conftest import BACKENDS, PG_ADMIN, fresh_postgres, results, run, text_of
from test_compaction import Mast as Restartable
from test_files import Mast
from test_hooks import Receiver, add_hook, call, coder, until_idle
from test_worker import Worker, run_turn, self_hosted

SERVER_ENV = {"MAST_ALLOW_PRIVATE_NETWORK": "1"}


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.httpd.shutdown()


def of_agent(agent):
    return {"type": "agent", "agent_id": agent.id}


def final_text(seen):
    return [e for e in seen if e.type == "agent.message"][-1].content[0].text


def test_post_tool_use_replaces_and_annotates_what_the_model_sees(client, environment, receiver):
    agent = coder(client)
    first = add_hook(client, receiver, lambda p: (0, {"updated_result": p["tool_result"]["content"][0]["text"].replace("abc", "[redacted]")}),
                     event="post_tool_use", matcher="bash", scope=of_agent(agent))
    second = add_hook(client, receiver, lambda p: (0, {"additional_context": "note: a secret was redacted"}),
                      event="post_tool_use", matcher="bash", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo token=abc") + "\n" + call("glob", pattern="*"), "say model saw: {{result}}"])
    uses = {e.name: e for e in seen if e.type == "agent.tool_use"}
    bash = next(r for r in results(seen) if r.tool_use_id == uses["bash"].id)
    # The stored result is the tool's own; the hooks' work sits beside it.
    assert "token=abc" in text_of(bash) and not bash.is_error
    assert [h["hook_id"] for h in bash.hooks] == [first["id"], second["id"]]
    assert bash.hooks[0]["updated_result"][0]["text"].startswith("token=[redacted]")
    assert bash.hooks[1]["additional_context"] == "note: a secret was redacted"
    glob = next(r for r in results(seen) if r.tool_use_id == uses["glob"].id)
    assert not hasattr(glob, "hooks"), "the matcher left glob alone"
    # The model saw the rewrite and the note, never the secret (the scripted model quotes the
    # results it was given).
    model_saw = final_text(seen)
    assert "token=[redacted]" in model_saw and "note: a secret was redacted" in model_saw and "abc" not in model_saw
    [c1] = [c for c in receiver.of(first["name"]) if c["payload"]["session_id"] == sess.id]
    assert c1["verified"]
    p = c1["payload"]
    assert p["event"] == "post_tool_use" and p["tool_name"] == "bash" and p["tool_use_id"] == uses["bash"].id
    assert p["tool_input"] == {"command": "echo token=abc"} and p["tool_result"]["is_error"] is False
    # The second hook saw the result as the first left it.
    [c2] = [c for c in receiver.of(second["name"]) if c["payload"]["session_id"] == sess.id]
    assert "[redacted]" in c2["payload"]["tool_result"]["content"][0]["text"]


def test_a_failing_post_hook_withholds_the_result(client, environment, receiver):
    agent = coder(client)
    hook = add_hook(client, receiver, lambda p: (2, None), event="post_tool_use", timeout_ms=300, scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo visible-only-to-the-log"), "say model saw: {{result}}"])
    [res] = results(seen)
    assert "visible-only-to-the-log" in text_of(res), "the log keeps what ran"
    [v] = res.hooks
    assert v["hook_id"] == hook["id"] and v["withheld"] is True and "withheld" in v["failed"]
    final = final_text(seen)
    assert "withheld" in final and "visible-only-to-the-log" not in final


def test_a_malformed_replacement_fails_the_hook_rather_than_the_session(client, environment, receiver):
    agent = coder(client)
    add_hook(client, receiver, lambda p: (0, {"updated_result": [{"type": "text", "text": "x", "cache_control": {}}]}),
             event="post_tool_use", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo hi"), "say model saw: {{result}}"])
    [res] = results(seen)
    [v] = res.hooks
    assert v["withheld"] is True and "cache_control" in v["failed"]
    assert "withheld" in final_text(seen)
    # The session goes on: the next turn's request is well formed.
    assert final_text(run(client, sess.id, ["say still here"])) == "still here"


def test_tool_hooks_are_not_asked_about_a_disabled_tool(client, environment, receiver):
    agent = client.beta.agents.create(name="no-bash", model="mast-scripted", tools=[{
        "type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "always_allow"}},
        "configs": [{"name": "bash", "enabled": False}]}])
    hook = add_hook(client, receiver, lambda p: (0, {"decision": "allow"}), matcher="bash", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    # The strict SDK parses every event: a refused call carries no half-made evaluation.
    seen = run(client, sess.id, [call("bash", command="echo hi"), "say {{result}}"])
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert use.evaluated_permission == "deny" and use.evaluation is None
    assert "disabled" in final_text(seen)
    assert receiver.of(hook["name"]) == []
    list(client.beta.sessions.events.list(sess.id))


def test_post_tool_use_sees_a_deferred_calls_client_result(client, environment, receiver):
    agent = coder(client)
    add_hook(client, receiver, lambda p: (0, {"decision": "defer"}), matcher="bash", scope=of_agent(agent))
    post = add_hook(client, receiver, lambda p: (0, {"updated_result": "rewritten by the hook"}),
                    event="post_tool_use", matcher="bash", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    sent = []

    def answer(idle, seen):
        sent.extend(client.beta.sessions.events.send(sess.id, events=[{
            "type": "user.tool_result", "tool_use_id": idle.stop_reason.event_ids[0],
            "content": [{"type": "text", "text": "the client's own output"}]}]).data)

    seen = until_idle(client, sess.id, call("bash", command="echo x") + "\n---\nsay got: {{result}}", answer)
    [echo] = sent
    assert echo.content[0].text == "the client's own output", "the stored result is the client's"
    assert echo.hooks[0]["hook_id"] == post["id"]
    assert final_text(seen) == "got: rewritten by the hook"


def test_post_tool_use_sees_a_self_hosted_workers_result(client, server, receiver, tmp_path):
    env, key = self_hosted(client)
    agent = coder(client)
    hook = add_hook(client, receiver, lambda p: (0, {"updated_result": p["tool_result"]["content"][0]["text"].replace("s3cr3t", "***")}),
                    event="post_tool_use", matcher="bash", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    worker = Worker(server, env.id, key, tmp_path)
    try:
        seen = run_turn(client, sess.id, call("bash", command="echo pw=s3cr3t") + "\n---\nsay model saw: {{result}}")
    finally:
        worker.kill()
    [res] = [e for e in seen if e.type == "user.tool_result"]
    assert "pw=s3cr3t" in res.content[0].text, "the worker's own result is stored"
    assert res.hooks[0]["hook_id"] == hook["id"]
    final = final_text(seen)
    assert "pw=***" in final and "s3cr3t" not in final
    [c] = [c for c in receiver.of(hook["name"]) if c["payload"]["session_id"] == sess.id]
    assert c["verified"] and c["payload"]["tool_input"] == {"command": "echo pw=s3cr3t"}


def test_user_prompt_submit_blocks_a_message_and_stores_nothing(client, environment, receiver):
    agent = coder(client)
    hook = add_hook(client, receiver, lambda p: (0, {"decision": "block", "reason": "no passwords in prompts"}
                                                 if "password" in p["prompt"] else None),
                    event="user_prompt_submit", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    with pytest.raises(Exception) as e:
        client.beta.sessions.events.send(sess.id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": "my password is hunter2"}]}])
    assert e.value.status_code == 400
    assert "no passwords in prompts" in str(e.value) and "events[0]" in str(e.value)
    assert e.value.body["error"]["details"] == {"error_code": "blocked_by_hook", "hook_id": hook["id"]}
    assert list(client.beta.sessions.events.list(sess.id)) == [], "nothing was stored"
    assert client.beta.sessions.retrieve(sess.id).status == "idle"
    # An allowed message goes through; the hook saw it with the session's ids.
    seen = run(client, sess.id, ["say hello"])
    assert final_text(seen) == "hello"
    calls = [c for c in receiver.of(hook["name"]) if c["payload"]["session_id"] == sess.id]
    assert len(calls) == 2 and all(c["verified"] for c in calls)
    p = calls[1]["payload"]
    stored = len(list(client.beta.sessions.events.list(sess.id)))
    assert p["event"] == "user_prompt_submit" and p["prompt"] == "say hello" and p["agent_id"] == agent.id
    assert p["content"] == [{"type": "text", "text": "say hello"}] and p["thread_id"].startswith("sthr_")

    # Every input the model reads is asked about, not only user messages.
    with pytest.raises(Exception) as e:
        client.beta.sessions.events.send(sess.id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": "hi"}]},
            {"type": "system.message", "content": [{"type": "text", "text": "the password is x"}]}])
    assert e.value.status_code == 400 and "events[1]" in str(e.value)
    kinds = [c["payload"]["message_type"] for c in receiver.of(hook["name"]) if c["payload"]["session_id"] == sess.id]
    assert kinds[-2:] == ["user.message", "system.message"]
    assert len(list(client.beta.sessions.events.list(sess.id))) == stored, "nothing of the batch was stored"

    # A blocked initial event refuses the creation: no session is made.
    before = {s.id for s in client.beta.sessions.list(limit=100)}
    with pytest.raises(Exception) as e:
        client.beta.sessions.create(agent=agent.id, environment_id=environment.id, initial_events=[
            {"type": "user.message", "content": [{"type": "text", "text": "password: x"}]}])
    assert e.value.status_code == 400 and "initial_events[0]" in str(e.value)
    assert {s.id for s in client.beta.sessions.list(limit=100)} == before


def test_a_stop_hook_keeps_the_agent_working_until_it_allows(client, environment, receiver):
    agent = coder(client)
    hook = add_hook(client, receiver, lambda p: (0, None if p["stop_hook_active"]
                                                 else {"decision": "block", "reason": "run the tests before you stop"}),
                    event="stop", scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, ["say all done"])
    said = [e.content[0].text for e in seen if e.type == "agent.message"]
    # The model was given the hook's reason as its next input (the scripted model echoes it).
    assert said == ["all done", "You said: Stop hook feedback: run the tests before you stop"]
    idles = [e for e in seen if e.type == "session.status_idle"]
    assert len(idles) == 1 and idles[0].stop_reason.type == "end_turn"
    ends = [e for e in seen if e.type == "span.model_request_end"]
    assert ends[0].hooks[0]["decision"] == "block" and ends[0].hooks[0]["event"] == "stop"
    assert ends[1].hooks[0]["decision"] == "allow"
    calls = [c["payload"] for c in receiver.of(hook["name"]) if c["payload"]["session_id"] == sess.id]
    assert [(c["stop_hook_active"], c["last_message"]) for c in calls] == [
        (False, "all done"), (True, "You said: Stop hook feedback: run the tests before you stop")]


def test_a_failing_stop_hook_lets_the_stop_go_ahead_unless_it_fails_closed(client, environment, receiver):
    agent = coder(client)
    hook = add_hook(client, receiver, lambda p: (2, None), event="stop", timeout_ms=300, scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, ["say done"])
    assert [e.content[0].text for e in seen if e.type == "agent.message"] == ["done"]
    [end] = [e for e in seen if e.type == "span.model_request_end"]
    [v] = end.hooks
    assert v["hook_id"] == hook["id"] and v["decision"] == "allow" and "the stop goes ahead" in v["failed"]

    # With failure_mode deny, the failure refuses the stop, and the model is told why.
    strict = coder(client)
    answers = iter([(2, None), (0, None)])
    add_hook(client, receiver, lambda p: next(answers), event="stop", timeout_ms=300, failure_mode="deny",
             scope=of_agent(strict))
    sess = client.beta.sessions.create(agent=strict.id, environment_id=environment.id)
    seen = run(client, sess.id, ["say done"])
    said = [e.content[0].text for e in seen if e.type == "agent.message"]
    assert said[0] == "done" and "the stop is refused by its failure mode" in said[1], said


def metric(base, name):
    """A counter's value on a server's /metrics (0 before it is first counted)."""
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_stop_survives_a_killed_server(backend, messages_api, receiver):
    m = Restartable(backend, messages_api)
    m.env["MAST_ALLOW_PRIVATE_NETWORK"] = "1"
    m.start()
    try:
        client = anthropic.Anthropic(base_url=m.base, api_key="sdk-test", _strict_response_validation=True, max_retries=0)
        agent = coder(client)
        environment = client.beta.environments.create(
            name="e-" + uuid.uuid4().hex[:6], config={"type": "cloud", "networking": {"type": "unrestricted"}})
        asked = []

        def rule(p):
            asked.append(p)
            if len(asked) == 1:
                return (0, {"decision": "block", "reason": "check it once more"})
            if len(asked) == 2:
                return (30, None)  # the server is killed while it waits for this answer
            return (0, None)

        add_hook(client, receiver, rule, event="stop", timeout_ms=60_000, scope=of_agent(agent))
        sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        client.beta.sessions.events.send(sess.id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": "say all done"}]}])
        deadline = time.time() + 30
        while len(asked) < 2:
            assert time.time() < deadline, "the second stop was never put to the hook"
            time.sleep(0.05)
        m.kill()
        m.start()
        client = anthropic.Anthropic(base_url=m.base, api_key="sdk-test", _strict_response_validation=True, max_retries=0)
        deadline = time.time() + 60
        while client.beta.sessions.retrieve(sess.id).status != "idle":
            assert time.time() < deadline, "the session did not finish after the restart"
            time.sleep(0.1)
        events = list(client.beta.sessions.events.list(sess.id, limit=200))
        said = [e.content[0].text for e in events if e.type == "agent.message"]
        # The refused stop and its feedback came back from the log: the model was asked the
        # unrecorded step again, and the hook again, knowing the turn goes on because of it.
        assert said == ["all done", "You said: Stop hook feedback: check it once more"], said
        assert [p["stop_hook_active"] for p in asked] == [False, True, True]
        idles = [e for e in events if e.type == "session.status_idle"]
        assert [i.stop_reason.type for i in idles] == ["end_turn"]
    finally:
        m.stop()


def test_subagent_hooks_guard_delegation_and_a_delegates_stop(client, environment, receiver):
    worker = coder(client, name="worker")
    critic = coder(client, name="critic")
    lead = client.beta.agents.create(name="lead", model="mast-scripted",
                                     multiagent={"type": "coordinator", "agents": [worker.id, critic.id]})
    start = add_hook(client, receiver, lambda p: (0, {"decision": "block", "reason": "the critic is off duty"}),
                     event="subagent_start", matcher="critic", scope=of_agent(lead))
    stop = add_hook(client, receiver, lambda p: (0, None if p["stop_hook_active"]
                                                 else {"decision": "block", "reason": "double-check your answer"}),
                    event="subagent_stop", matcher="worker", scope=of_agent(worker))
    sess = client.beta.sessions.create(agent=lead.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("send_to_agent", agent="critic", message="judge"),
                                 call("send_to_agent", agent="worker", message="say first draft"),
                                 "say lead heard: {{result}}"])
    # The critic was never started; its call's result carries the hook's reason.
    refused = [e for e in seen if e.type == "agent.tool_use" and e.name == "send_to_agent"]
    assert len(refused) == 1 and refused[0].evaluated_permission == "deny"
    assert refused[0].hooks[0]["hook_id"] == start["id"]
    [why] = [r for r in results(seen) if r.tool_use_id == refused[0].id]
    assert why.is_error and "the critic is off duty" in text_of(why)
    names = sorted(t.agent.name for t in client.beta.sessions.threads.list(sess.id))
    assert names == ["lead", "worker"]
    # The worker's delegation passed the hook (it does not match) and was recorded as such.
    sent = [e for e in client.beta.sessions.events.list(sess.id, limit=200) if e.type == "agent.thread_message_sent"]
    assert len(sent) == 1 and not hasattr(sent[0], "hooks")
    # The worker's first stop was refused, so its reply is its second answer.
    assert final_text(seen) == "lead heard: You said: Stop hook feedback: double-check your answer"
    [s] = [c for c in receiver.of(start["name"]) if c["payload"]["session_id"] == sess.id]
    assert s["verified"] and s["payload"]["subagent_name"] == "critic" and s["payload"]["message"] == "judge"
    assert s["payload"]["subagent_agent_id"] == critic.id and s["payload"]["agent_id"] == lead.id
    stops = [c["payload"] for c in receiver.of(stop["name"]) if c["payload"]["session_id"] == sess.id]
    assert [c["stop_hook_active"] for c in stops] == [False, True]
    assert stops[0]["agent_id"] == worker.id and stops[0]["subagent_name"] == "worker"
    assert stops[0]["last_message"] == "first draft"


def test_hooks_created_or_deleted_apply_to_the_next_call(client, environment, receiver):
    agent = coder(client)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    # With no hook of the event the server remembers that; a new hook must still be asked.
    seen = run(client, sess.id, [call("bash", command="echo one"), "say {{result}}"])
    assert "one" in final_text(seen)
    hook = add_hook(client, receiver, lambda p: (0, {"decision": "deny", "reason": "closed for the day"}),
                    matcher="bash", scope=of_agent(agent))
    seen = run(client, sess.id, [call("bash", command="echo two"), "say {{result}}"])
    assert "closed for the day" in final_text(seen)
    client.delete(f"/v1/mast/hooks/{hook['id']}", cast_to=object)
    seen = run(client, sess.id, [call("bash", command="echo three"), "say {{result}}"])
    assert "three" in final_text(seen)
    assert len([c for c in receiver.of(hook["name"]) if c["payload"]["session_id"] == sess.id]) == 1


@pytest.mark.skipif(not PG_ADMIN, reason="Postgres: set MAST_TEST_DATABASE_URL")
def test_a_hook_made_on_one_replica_applies_on_the_other(receiver):
    url = fresh_postgres()
    # Replicas share the key that seals hook secrets.
    env = dict(SERVER_ENV, MAST_SECRET_KEY=base64.b64encode(os.urandom(32)).decode())
    a = Mast("postgres", env, database_url=url)
    b = Mast("postgres", env, database_url=url)
    try:
        agent = coder(a.client)
        environment = a.client.beta.environments.create(
            name="e-" + uuid.uuid4().hex[:6], config={"type": "cloud", "networking": {"type": "unrestricted"}})
        sess = b.client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        reads = "mast_hook_list_reads_total"

        # Each message goes to replica b, whose runner looks up the workspace's hooks. Once b's
        # signal listener is connected it caches them: a turn then reads no hook list.
        def cached():
            before = metric(b.base, reads)
            seen = run(b.client, sess.id, [call("bash", command="echo before"), "say {{result}}"])
            assert "before" in final_text(seen)
            return metric(b.base, reads) == before

        deadline = time.time() + 10
        while not cached():
            assert time.time() < deadline, "replica b never cached the hook lists"
        read_before = metric(b.base, reads)
        hook = add_hook(a.client, receiver, lambda p: (0, {"decision": "deny", "reason": "made on replica a"}),
                        matcher="bash", scope=of_agent(agent))

        def denied():
            seen = run(b.client, sess.id, [call("bash", command="echo after"), "say {{result}}"])
            return "made on replica a" in final_text(seen)

        # The signal is delivered on commit; a turn started right after may still read the old
        # list, so allow a moment, but never more than a few turns.
        deadline = time.time() + 5
        while not denied():
            assert time.time() < deadline, "replica b never asked the hook made on replica a"
            time.sleep(0.2)
        assert metric(b.base, reads) > read_before, "b read the hooks again once told of the change"
        a.client.delete(f"/v1/mast/hooks/{hook['id']}", cast_to=object)
        deadline = time.time() + 5
        while denied():
            assert time.time() < deadline, "replica b kept asking a deleted hook"
            time.sleep(0.2)
    finally:
        a.stop()
        b.stop()


def interrupt_while_asked(client, sid, asked, script):
    """Sends `script`, interrupts once a hook has been asked, and returns the events up to the
    next idle and the seconds from the interrupt to that idle."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        client.beta.sessions.events.send(sid, events=[
            {"type": "user.message", "content": [{"type": "text", "text": script}]}])
        deadline = time.time() + 30
        while not asked:
            assert time.time() < deadline, "the hook was never asked"
            time.sleep(0.05)
        interrupted_at = time.time()
        client.beta.sessions.events.send(sid, events=[{"type": "user.interrupt"}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                break
    return seen, time.time() - interrupted_at


def test_an_interrupt_does_not_wait_for_a_pre_tool_use_answer(client, environment, receiver):
    agent = coder(client)
    asked = []
    add_hook(client, receiver, lambda p: (asked.append(p), (20, {"decision": "allow"}))[1],
             timeout_ms=60_000, scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen, waited = interrupt_while_asked(client, sess.id, asked, call("bash", command="echo ran-it"))
    # The idle came from the interrupt, not from the hook's answer 20 s later.
    assert waited < 10 and seen[-1].stop_reason.type == "end_turn"
    # The call the hook was asked about never ran, and its events say why.
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert asked[0]["tool_use_id"] == use.id
    assert use.evaluated_permission == "deny"
    [verdict] = use.evaluation.hooks
    assert "interrupted" in verdict["failed"]
    [res] = results(seen)
    assert res.tool_use_id == use.id and res.is_error
    assert "did not run" in text_of(res) and "ran-it" not in text_of(res)


def test_an_interrupt_does_not_wait_for_a_stop_answer_and_a_late_block_is_ignored(client, environment, receiver):
    agent = coder(client)
    asked = []
    add_hook(client, receiver, lambda p: (asked.append(p), (4, {"decision": "block", "reason": "keep going"}))[1],
             event="stop", timeout_ms=60_000, scope=of_agent(agent))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen, waited = interrupt_while_asked(client, sess.id, asked, "say nearly done")
    assert waited < 3, "the interrupt waited for the stop hook"
    assert seen[-1].stop_reason.type == "end_turn"
    # The hook's block arrives after the interrupt ended the turn: nothing more happens.
    time.sleep(5)
    events = list(client.beta.sessions.events.list(sess.id, limit=100))
    assert events[-1].type == "session.status_idle" and events[-1].id == seen[-1].id, [e.type for e in events]
    assert [e.content[0].text for e in events if e.type == "agent.message"] == ["nearly done"]
    assert client.beta.sessions.retrieve(sess.id).status == "idle"
    assert len(asked) == 1

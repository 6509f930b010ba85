"""Hooks (Mast's own addition) through the official SDK with strict response
validation: a real hook receiver that verifies every call's Standard Webhooks signature and
answers `pre_tool_use` decisions; deny (the reason reaches the model), rewrite, ask, defer,
precedence, a timeout failing closed, and a delegate's call going through the hook. The other
events are in test_hook_events.py."""

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import standardwebhooks

from conftest import results, run, text_of

# The receiver listens on 127.0.0.1, which the hook client's address guard refuses unless
# the operator allows private addresses.
SERVER_ENV = {"MAST_ALLOW_PRIVATE_NETWORK": "1"}


class Receiver:
    """Hook endpoints on one local server: `/<name>` answers with `rules[name](payload)`,
    a (delay seconds, decision dict or None) pair. Every call is recorded with whether its
    signature verified against the secret of the hook it names."""

    def __init__(self):
        self.rules = {}
        self.secrets = {}
        self.calls = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["content-length"]))
                payload = json.loads(raw)
                try:
                    standardwebhooks.Webhook(receiver.secrets[payload["hook_id"]]).verify(raw, dict(self.headers))
                    verified = True
                except Exception:
                    verified = False
                name = self.path.strip("/")
                receiver.calls.append({"name": name, "payload": payload, "verified": verified})
                delay, answer = receiver.rules[name](payload)
                time.sleep(delay)
                body = json.dumps(answer).encode() if answer is not None else b""
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the server gave up waiting (the timeout case)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def of(self, name):
        return [c for c in self.calls if c["name"] == name]


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.httpd.shutdown()


def add_hook(client, receiver, rule, event="pre_tool_use", **fields):
    """Creates a hook of `event` whose endpoint answers with `rule`; returns the hook."""
    name = uuid.uuid4().hex[:10]
    receiver.rules[name] = rule
    hook = client.post("/v1/mast/hooks", cast_to=object, body={
        "event": event, "url": f"{receiver.base}/{name}", **fields})
    assert hook["signing_secret"].startswith("whsec_")
    receiver.secrets[hook["id"]] = hook["signing_secret"]
    hook["name"] = name
    return hook


def coder(client, policy="always_allow", name="coder"):
    return client.beta.agents.create(name=name, model="mast-scripted", tools=[{
        "type": "agent_toolset_20260401",
        "default_config": {"permission_policy": {"type": policy}}}])


def call(tool, **input):
    return f"call {tool} {json.dumps(input)}"


def until_idle(client, sid, script, answer):
    """Sends a scripted turn; `answer(idle_event, seen)` settles each requires_action idle."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        client.beta.sessions.events.send(sid, events=[
            {"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                if ev.stop_reason.type == "requires_action":
                    answer(ev, seen)
                    continue
                break
    return seen


def test_management_api_and_bad_input(client, receiver):
    agent = coder(client)
    hook = add_hook(client, receiver, lambda p: (0, None), matcher="^mcp__|bash",
                    scope={"type": "agent", "agent_id": agent.id}, timeout_ms=2000)
    got = client.get(f"/v1/mast/hooks/{hook['id']}", cast_to=object)
    assert "signing_secret" not in got, "the secret is shown once"
    assert got["matcher"] == "^mcp__|bash" and got["failure_mode"] == "deny" and got["timeout_ms"] == 2000
    listed = client.get("/v1/mast/hooks", cast_to=object)
    assert hook["id"] in [h["id"] for h in listed["data"]]
    for bad, word in [({"event": "stop", "matcher": "bash"}, "does not apply"), ({"event": "sometime"}, "subagent_stop"), ({"event": "pre_tool_use", "matcher": "(x"}, "regular expression"),
                      ({"event": "pre_tool_use", "timeout_ms": 5}, "timeout_ms"), ({"event": "pre_tool_use", "bogus": 1}, "bogus"),
                      ({"event": "pre_tool_use", "url": "ftp://x/"}, "url")]:
        with pytest.raises(Exception) as e:
            client.post("/v1/mast/hooks", cast_to=object, body={"url": f"{receiver.base}/x", **bad})
        assert e.value.status_code == 400 and word in str(e.value), bad
    deleted = client.delete(f"/v1/mast/hooks/{hook['id']}", cast_to=object)
    assert deleted == {"id": hook["id"], "type": "hook_deleted"}
    with pytest.raises(Exception) as e:
        client.get(f"/v1/mast/hooks/{hook['id']}", cast_to=object)
    assert e.value.status_code == 404


def test_a_deny_reason_reaches_the_model_even_under_always_allow(client, environment, receiver):
    agent = coder(client, "always_allow")
    hook = add_hook(client, receiver, lambda p: (0, {"decision": "deny", "reason": "use the read tool for files"}),
                    matcher="bash", scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("glob", pattern="*"), call("bash", command="cat notes.txt"), "say model saw: {{result}}"])
    uses = [e for e in seen if e.type == "agent.tool_use"]
    bash = next(u for u in uses if u.name == "bash")
    assert bash.evaluated_permission == "deny"
    assert bash.evaluation.type == "always_allow"
    assert bash.evaluation.hooks == [{"hook_id": hook["id"], "decision": "deny", "reason": "use the read tool for files"}]
    glob = next(u for u in uses if u.name == "glob")
    assert glob.evaluated_permission == "allow" and not hasattr(glob.evaluation, "hooks"), "the matcher left glob alone"
    denied = next(r for r in results(seen) if r.tool_use_id == bash.id)
    assert denied.is_error and "use the read tool for files" in text_of(denied)
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert "use the read tool for files" in final

    [c] = receiver.of(hook["name"])
    assert c["verified"]
    p = c["payload"]
    assert p["event"] == "pre_tool_use" and p["tool_name"] == "bash" and p["tool_use_id"] == bash.id
    assert p["tool_input"] == {"command": "cat notes.txt"}
    assert p["session_id"] == sess.id and p["agent_id"] == agent.id and p["environment_id"] == environment.id
    assert p["thread_id"].startswith("sthr_")


def test_updated_input_rewrites_the_call(client, environment, receiver):
    agent = coder(client)
    add_hook(client, receiver, lambda p: (0, {"decision": "allow", "updated_input": {"command": "echo rewritten"}}),
             matcher="bash", scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo original"), "say {{result}}"])
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert use.input == {"command": "echo rewritten"} and use.evaluated_permission == "allow"
    assert use.evaluation.hooks[0]["updated_input"] == {"command": "echo rewritten"}
    [res] = results(seen)
    assert not res.is_error and "rewritten" in text_of(res) and "original" not in text_of(res)


def test_ask_pauses_for_confirmation_and_a_policy_ask_outranks_a_hook_allow(client, environment, receiver):
    agent = coder(client, "always_allow")
    add_hook(client, receiver, lambda p: (0, {"decision": "ask"}), matcher="bash", scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    asked = []

    def confirm(idle, seen):
        asked.extend(idle.stop_reason.event_ids)
        for i in idle.stop_reason.event_ids:
            client.beta.sessions.events.send(sess.id, events=[{"type": "user.tool_confirmation", "tool_use_id": i, "result": "allow"}])

    seen = until_idle(client, sess.id, call("bash", command="echo asked") + "\n---\nsay {{result}}", confirm)
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert asked == [use.id] and use.evaluated_permission == "ask" and use.evaluation.hook_decision == "ask"
    assert "asked" in text_of(results(seen)[0])

    # A hook's allow does not skip always_ask.
    strict = coder(client, "always_ask")
    add_hook(client, receiver, lambda p: (0, {"decision": "allow"}), scope={"type": "agent", "agent_id": strict.id})
    sess = client.beta.sessions.create(agent=strict.id, environment_id=environment.id)
    asked.clear()
    seen = until_idle(client, sess.id, call("bash", command="echo strict") + "\n---\nsay {{result}}", confirm)
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert asked == [use.id] and use.evaluated_permission == "ask" and use.evaluation.type == "always_ask"


def test_defer_hands_the_call_to_the_client_and_drops_a_rewrite(client, environment, receiver):
    agent = coder(client)
    add_hook(client, receiver, lambda p: (0, {"decision": "allow", "updated_input": {"command": "echo sneaky"}}),
             scope={"type": "agent", "agent_id": agent.id})
    add_hook(client, receiver, lambda p: (0, {"decision": "defer", "reason": "the client decides"}),
             scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    deferred = []

    def answer(idle, seen):
        deferred.extend(idle.stop_reason.event_ids)
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.tool_result", "tool_use_id": idle.stop_reason.event_ids[0],
                                                           "content": [{"type": "text", "text": "the client ran it"}]}])

    seen = until_idle(client, sess.id, call("bash", command="echo original") + "\n---\nsay got: {{result}}", answer)
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert deferred == [use.id]
    assert use.input == {"command": "echo original"}, "a deferred call's rewrite is dropped"
    assert use.evaluation.hook_decision == "defer" and use.evaluation.hooks_updated_input_dropped is True
    assert [e for e in seen if e.type == "agent.tool_result"] == [], "the server did not run it"
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert final == "got: the client ran it"


def test_deny_outranks_every_other_hook(client, environment, receiver):
    agent = coder(client)
    for answer in [{"decision": "allow"}, {"decision": "deny", "reason": "no"}, {"decision": "defer"}]:
        add_hook(client, receiver, lambda p, a=answer: (0, a), scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo x"), "say {{result}}"])
    [use] = [e for e in seen if e.type == "agent.tool_use"]
    assert use.evaluated_permission == "deny"
    # Asked oldest first; a deny ends the asking.
    assert [h["decision"] for h in use.evaluation.hooks] == ["allow", "deny"]


def test_a_timeout_fails_closed_unless_the_hook_allows_failure(client, environment, receiver):
    agent = coder(client)
    add_hook(client, receiver, lambda p: (2, {"decision": "allow"}), timeout_ms=300, matcher="bash",
             scope={"type": "agent", "agent_id": agent.id})
    add_hook(client, receiver, lambda p: (2, {"decision": "deny"}), timeout_ms=300, matcher="glob",
             failure_mode="allow", scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo never") + "\n" + call("glob", pattern="*"), "say {{result}}"])
    uses = {e.name: e for e in seen if e.type == "agent.tool_use"}
    assert uses["bash"].evaluated_permission == "deny"
    failed = uses["bash"].evaluation.hooks[0]
    assert failed["decision"] == "deny" and "failed" in failed["failed"] and "failure mode" in failed["failed"]
    bash_result = next(r for r in results(seen) if r.tool_use_id == uses["bash"].id)
    assert bash_result.is_error and "never" not in text_of(bash_result)
    assert uses["glob"].evaluated_permission == "allow" and uses["glob"].evaluation.hooks[0]["decision"] == "allow"


def test_a_delegates_call_goes_through_the_hook(client, environment, receiver):
    worker = coder(client, name="worker")
    lead = client.beta.agents.create(name="lead", model="mast-scripted",
                                     multiagent={"type": "coordinator", "agents": [worker.id]})
    hook = add_hook(client, receiver, lambda p: (0, {"decision": "deny", "reason": "delegates may not run bash"}),
                    matcher="bash", scope={"type": "agent", "agent_id": worker.id})
    sess = client.beta.sessions.create(agent=lead.id, environment_id=environment.id)
    inner = call("bash", command="echo hi") + "\n---\nsay worker saw: {{result}}"
    seen = run(client, sess.id, [call("send_to_agent", agent="worker", message=inner), "say lead heard: {{result}}"])
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert "delegates may not run bash" in final
    [c] = receiver.of(hook["name"])
    assert c["verified"] and c["payload"]["agent_id"] == worker.id
    primary = client.beta.sessions.threads.list(sess.id).data[0].id
    assert c["payload"]["thread_id"] != primary


def test_an_inline_delegate_is_governed_by_its_coordinators_hooks(client, environment, receiver):
    """A delegate the model defines (`send_to_agent` with an inline definition) answers to every
    rule of the coordinator that defined it: its agent-scoped hooks included. Otherwise the
    model could shed a hook by delegating the call."""
    allow = {"default_config": {"permission_policy": {"type": "always_allow"}}}
    lead = client.beta.agents.create(name="lead-inline", model="mast-scripted",
                                     tools=[{"type": "agent_toolset_20260401", **allow}],
                                     multiagent={"type": "multiagent_20261001"})
    hook = add_hook(client, receiver, lambda p: (0, {"decision": "deny", "reason": "the lead may not run bash"}),
                    matcher="bash", scope={"type": "agent", "agent_id": lead.id})
    sess = client.beta.sessions.create(agent=lead.id, environment_id=environment.id)
    helper = {"name": "helper", "system": "You run commands.", "tools": [{"type": "agent_toolset_20260401", **allow}]}
    inner = call("bash", command="echo INLINE-$((40+2))") + "\n---\nsay helper saw: {{result}}"
    seen = run(client, sess.id, [call("send_to_agent", agent=helper, message=inner), "say lead heard: {{result}}"])
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert "the lead may not run bash" in final and "INLINE-42" not in final, final
    [c] = receiver.of(hook["name"])
    assert c["verified"] and c["payload"]["agent_id"] == "inline:helper"
    primary = client.beta.sessions.threads.list(sess.id).data[0].id
    assert c["payload"]["thread_id"] != primary
    # A predefined roster agent keeps its own scope: the lead's hook does not reach it.
    worker = coder(client, name="roster-worker")
    lead2 = client.beta.agents.create(name="lead-roster", model="mast-scripted",
                                      tools=[{"type": "agent_toolset_20260401", **allow}],
                                      multiagent={"type": "coordinator", "agents": [worker.id]})
    hook2 = add_hook(client, receiver, lambda p: (0, {"decision": "deny", "reason": "the lead may not run bash"}),
                     matcher="bash", scope={"type": "agent", "agent_id": lead2.id})
    sess2 = client.beta.sessions.create(agent=lead2.id, environment_id=environment.id)
    seen = run(client, sess2.id, [call("send_to_agent", agent="roster-worker", message=inner), "say lead heard: {{result}}"])
    final = [e for e in seen if e.type == "agent.message"][-1].content[0].text
    assert "INLINE-42" in final, final
    assert not receiver.of(hook2["name"])

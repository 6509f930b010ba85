"""MCP toolsets end to end through the official SDK: real MCP servers (the `mcp` package over
streamable HTTP, started here), a Messages API server of this module's own that records
what Mast offers the model and calls what a message names, and the events a user sees."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import free_port, sse
from test_readme import blocks, events, until

HERE = Path(__file__).parent
MODEL = "claude-sonnet-4-5"


class Recorder(BaseHTTPRequestHandler):
    """A model that calls the tool a message names (`call NAME JSON`) and, given its
    result, says `done: <result text>`. It records every request body; `before_call`, when
    set, runs before it answers with a call (to kill a server mid-turn)."""

    requests: list = []
    before_call = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Recorder.requests.append(body)
        last = body["messages"][-1]["content"]
        if isinstance(last, str):
            last = [{"type": "text", "text": last}]
        results = [b for b in last if b.get("type") == "tool_result"]
        texts = [b["text"] for b in last if b.get("type") == "text"]
        frames = [sse("message_start", {"type": "message_start", "message": {"id": "msg_mcp", "type": "message", "role": "assistant",
                  "content": [], "model": body["model"], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}})]
        command = next((t for t in texts if t.startswith("call ")), None)
        if results or command is None:
            said = " | ".join(c.get("text", "") for r in results for c in (r.get("content") or []) if isinstance(c, dict))
            if any(r.get("is_error") for r in results):
                said = "error: " + said
            frames += [
                sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"done: {said}"}}),
                sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "end_turn"
        else:
            _, name, args = command.split(" ", 2)
            if Recorder.before_call:
                hook, Recorder.before_call = Recorder.before_call, None
                hook()
            frames += [
                sse("content_block_start", {"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": "toolu_mcp", "name": name, "input": {}}}),
                sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": args}}),
                sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "tool_use"
        frames += [sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}),
                   sse("message_stop", {"type": "message_stop"})]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for f in frames:
            self.wfile.write(f)
            self.wfile.flush()


@pytest.fixture(scope="module")
def messages_api():
    # The MCP servers listen on loopback, which the egress guard refuses unless allowed;
    # `server` (which depends on this fixture) copies the environment when it starts.
    os.environ["MAST_ALLOW_PRIVATE_NETWORK"] = "1"
    os.environ["MAST_MCP_CONNECT_TIMEOUT_MS"] = "3000"
    os.environ["MAST_MCP_CALL_TIMEOUT_MS"] = "2000"
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    os.environ.pop("MAST_ALLOW_PRIVATE_NETWORK", None)
    os.environ.pop("MAST_MCP_CONNECT_TIMEOUT_MS", None)
    os.environ.pop("MAST_MCP_CALL_TIMEOUT_MS", None)


class McpProcess:
    """One MCP server process; `kill` and `start` again keep its port. `args` follow the
    port on its command line."""

    def __init__(self, kind, *args):
        self.kind = kind
        self.args = [str(a) for a in args]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "mcp_server.py"), self.kind, str(self.port), *self.args])
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"the {self.kind} MCP server did not start")
                time.sleep(0.1)

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def open_mcp():
    p = McpProcess("open")
    yield p
    p.kill()


@pytest.fixture(scope="module")
def secure_mcp():
    p = McpProcess("secure")
    yield p
    p.kill()


def toolset(server, **extra):
    return {"type": "mcp_toolset", "mcp_server_name": server, **extra}


def turn(client, session_id, text, answer=None, timeout=60):
    """Sends `text` and collects the turn's events until an idle that is not
    `requires_action`; `answer(event_ids)` answers each `requires_action`."""
    seen = []
    deadline = time.time() + timeout
    with client.beta.sessions.events.stream(session_id) as st:
        client.beta.sessions.events.send(session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                if ev.stop_reason.type != "requires_action":
                    break
                answer(ev.stop_reason.event_ids)
            assert time.time() < deadline, "the turn did not end"
    return seen


def of(events, kind):
    return [e for e in events if e.type == kind]


def test_tools_are_offered_called_and_confirmed(client, environment, open_mcp):
    agent = client.beta.agents.create(
        name="mcp-" + uuid.uuid4().hex[:6], model=MODEL,
        mcp_servers=[{"type": "url", "name": "open", "url": open_mcp.url}],
        tools=[toolset("open", configs=[
            {"name": "echo", "permission_policy": {"type": "always_allow"}},
            {"name": "hidden", "enabled": False},
        ])],
    )
    assert agent.tools[0].default_config.permission_policy.type == "always_ask"
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    Recorder.requests.clear()

    seen = turn(client, sess.id, 'call open__echo {"text": "hi"}')
    # The model was offered the enabled tools under their server-prefixed names.
    offered = {t["name"]: t for t in Recorder.requests[0]["tools"]}
    assert set(offered) == {"open__echo", "open__ping", "open__fail", "open__sleepy", "open__grow"}, offered
    assert offered["open__echo"]["description"] == "Echoes its text back."
    assert "text" in offered["open__echo"]["input_schema"]["properties"]
    [use] = of(seen, "agent.mcp_tool_use")
    assert (use.name, use.mcp_server_name, use.input) == ("echo", "open", {"text": "hi"})
    assert use.evaluated_permission == "allow" and use.evaluation.type == "always_allow"
    [result] = of(seen, "agent.mcp_tool_result")
    assert result.mcp_tool_use_id == use.id and not result.is_error
    assert result.content[0].text == "echo: hi"
    assert of(seen, "agent.message")[-1].content[0].text == "done: echo: hi"
    assert not of(seen, "agent.tool_use") and not of(seen, "session.error")

    # `fail` falls under the toolset's default, always_ask: the user confirms, the server's
    # error comes back as an error result the model sees.
    asked = []

    def allow(ids):
        asked.extend(ids)
        for i in ids:
            client.beta.sessions.events.send(sess.id, events=[{"type": "user.tool_confirmation", "tool_use_id": i, "result": "allow"}])

    seen = turn(client, sess.id, "call open__fail {}", allow)
    [use] = of(seen, "agent.mcp_tool_use")
    assert use.evaluated_permission == "ask" and use.evaluation.type == "always_ask"
    assert asked == [use.id]
    [result] = of(seen, "agent.mcp_tool_result")
    assert result.is_error and "failed on purpose" in result.content[0].text
    assert of(seen, "agent.message")[-1].content[0].text.startswith("done: error:")

    # Denied: the tool never runs and the model gets the user's reason.
    def deny(ids):
        for i in ids:
            client.beta.sessions.events.send(sess.id, events=[{"type": "user.tool_confirmation", "tool_use_id": i,
                                                               "result": "deny", "deny_message": "not today"}])

    seen = turn(client, sess.id, "call open__fail {}", deny)
    [result] = of(seen, "agent.mcp_tool_result")
    assert result.is_error and "not today" in result.content[0].text

    # A disabled tool is not offered; calling it anyway is refused like any unknown tool.
    seen = turn(client, sess.id, "call open__hidden {}")
    assert not of(seen, "agent.mcp_tool_use")
    assert "no tool named" in of(seen, "agent.tool_result")[0].content[0].text


def test_a_server_needing_a_token_without_one_is_an_authentication_failure(client, environment, open_mcp, secure_mcp):
    agent = client.beta.agents.create(
        name="mcp-auth-" + uuid.uuid4().hex[:6], model=MODEL,
        mcp_servers=[{"type": "url", "name": "secure", "url": secure_mcp.url},
                     {"type": "url", "name": "open", "url": open_mcp.url}],
        tools=[toolset("secure"), toolset("open", default_config={"permission_policy": {"type": "always_allow"}})],
    )
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    Recorder.requests.clear()
    # No vault holds a credential for it: the server refuses, the user is told which server,
    # and the other server's tools still work in the same turn.
    seen = turn(client, sess.id, 'call open__echo {"text": "still here"}')
    [err] = of(seen, "session.error")
    assert err.error.type == "mcp_authentication_failed_error"
    assert err.error.mcp_server_name == "secure"
    assert "secret" not in err.error.message
    offered = {t["name"] for t in Recorder.requests[0]["tools"]}
    assert offered == {"open__echo", "open__ping", "open__fail", "open__sleepy", "open__hidden", "open__grow"}
    assert of(seen, "agent.mcp_tool_result")[0].content[0].text == "echo: still here"
    assert of(seen, "session.status_idle")[-1].stop_reason.type == "end_turn"


def test_a_killed_server_fails_the_call_and_recovers_when_back(client, environment):
    mcp = McpProcess("open")
    try:
        agent = client.beta.agents.create(
            name="mcp-kill-" + uuid.uuid4().hex[:6], model=MODEL,
            mcp_servers=[{"type": "url", "name": "flaky", "url": mcp.url}],
            tools=[toolset("flaky", default_config={"permission_policy": {"type": "always_allow"}})],
        )
        sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        # Connected and listed; the server dies after that, before the call reaches it.
        Recorder.before_call = mcp.kill
        seen = turn(client, sess.id, 'call flaky__echo {"text": "a"}')
        [result] = of(seen, "agent.mcp_tool_result")
        assert result.is_error
        errors = of(seen, "session.error")
        assert errors and errors[0].error.type == "mcp_connection_failed_error"
        assert errors[0].error.mcp_server_name == "flaky"
        assert errors[0].error.retry_status.type == "retrying"

        # Still down at the next turn: the connection fails again and no tool is offered.
        seen = turn(client, sess.id, "hello")
        assert [e.error.type for e in of(seen, "session.error")] == ["mcp_connection_failed_error"]

        # Back: the next turn connects again and the call goes through.
        mcp.start()
        seen = turn(client, sess.id, 'call flaky__echo {"text": "b"}')
        assert not of(seen, "session.error")
        [result] = of(seen, "agent.mcp_tool_result")
        assert not result.is_error and result.content[0].text == "echo: b"
    finally:
        mcp.kill()


def test_a_changed_tool_list_is_offered_at_the_next_request(client, environment):
    mcp = McpProcess("open")
    try:
        agent = client.beta.agents.create(
            name="mcp-grow-" + uuid.uuid4().hex[:6], model=MODEL,
            mcp_servers=[{"type": "url", "name": "open", "url": mcp.url}],
            tools=[toolset("open", default_config={"permission_policy": {"type": "always_allow"}})],
        )
        sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        Recorder.requests.clear()
        seen = turn(client, sess.id, "call open__grow {}")
        assert of(seen, "agent.mcp_tool_result")[0].content[0].text == "grew"
        before = {t["name"] for t in Recorder.requests[0]["tools"]}
        after = {t["name"] for t in Recorder.requests[-1]["tools"]}
        assert "open__grown" not in before
        assert "open__grown" in after, after
    finally:
        mcp.kill()


def test_a_silent_server_does_not_hold_back_another(client, environment, open_mcp):
    # Accepts connections and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held = []
    threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(8)], daemon=True).start()
    try:
        agent = client.beta.agents.create(
            name="mcp-slow-" + uuid.uuid4().hex[:6], model=MODEL,
            mcp_servers=[{"type": "url", "name": "silent", "url": f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"},
                         {"type": "url", "name": "open", "url": open_mcp.url}],
            tools=[toolset("silent"), toolset("open", default_config={"permission_policy": {"type": "always_allow"}})],
        )
        sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        seen = turn(client, sess.id, 'call open__echo {"text": "quick"}')
        [err] = of(seen, "session.error")
        assert (err.error.type, err.error.mcp_server_name) == ("mcp_connection_failed_error", "silent")
        assert of(seen, "agent.mcp_tool_result")[0].content[0].text == "echo: quick"
    finally:
        silent.close()


def test_readme_mcp_walkthrough(server, open_mcp):
    (script,) = blocks("docs/mcp.md", "# MCP servers", "sh")
    script = (script.replace("B=http://127.0.0.1:8080", f"B={server}")
              .replace("MCP_URL=https://mcp.example.com/mcp", f"MCP_URL={open_mcp.url}")
              .replace("TOOL=search_docs", "TOOL=ping"))
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script + '\necho "SESSION=$SESSION"'],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    session = out.stdout.rsplit("SESSION=", 1)[1].strip()
    said = until("the answer", lambda: [e for e in events(server, session) if e["type"] == "agent.message"])
    assert said[-1]["content"][0]["text"] == "The server said: pong"
    log = events(server, session)
    [use] = [e for e in log if e["type"] == "agent.mcp_tool_use"]
    assert (use["name"], use["mcp_server_name"], use["evaluated_permission"]) == ("ping", "docs", "allow")


def test_a_hanging_call_is_cut_off(client, environment, open_mcp):
    agent = client.beta.agents.create(
        name="mcp-hang-" + uuid.uuid4().hex[:6], model=MODEL,
        mcp_servers=[{"type": "url", "name": "open", "url": open_mcp.url}],
        tools=[toolset("open", default_config={"permission_policy": {"type": "always_allow"}})],
    )
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = turn(client, sess.id, "call open__sleepy {}")
    [result] = of(seen, "agent.mcp_tool_result")
    assert result.is_error and "did not answer" in result.content[0].text
    [err] = of(seen, "session.error")
    assert (err.error.type, err.error.mcp_server_name) == ("mcp_connection_failed_error", "open")
    assert of(seen, "session.status_idle")[-1].stop_reason.type == "end_turn"

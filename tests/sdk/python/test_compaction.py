"""Context compaction through the official SDK (strict response validation), on SQLite and
Postgres: a session driven past a small configured context window is summarised into a
boundary (the requests before and after it are checked as the model received them), the
boundary survives a killed server, and a context that cannot be made to fit stops with
`compaction_limit_reached_error`."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import BACKENDS, MAST_BIN, fresh_postgres, free_port, sse

MODEL = "claude-sonnet-4-5"
# A window small enough that a few turns pass its threshold (0.8 by default: 2400 tokens).
WINDOW = 3000
FILLER = "lorem ipsum dolor sit amet " * 45  # about 1.2 kB a turn


def system_text(body) -> str:
    system = body.get("system") or ""
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system)
    return system


def is_summary_request(body) -> bool:
    return "compact" in system_text(body)


def input_tokens(body) -> int:
    """What the Messages API below reports as a request's input: a quarter token per byte of
    what it was sent, like a real tokenizer roughly would."""
    return len(json.dumps([body.get("system"), body["messages"], body.get("tools")])) // 4


def text_blocks(message) -> list:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if b.get("type") == "text"]


class Messages(BaseHTTPRequestHandler):
    """A Messages API that records every request, answers a summarisation request with a
    numbered summary and any other with one sentence, reporting input tokens by size."""

    received: list = []
    summaries = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Messages.received.append(body)
        if is_summary_request(body):
            Messages.summaries += 1
            text = f"SUMMARY-{Messages.summaries}: the user sent numbered turns of filler text."
        else:
            text = "Noted."
        frames = [
            sse("message_start", {"type": "message_start", "message": {
                "id": "msg_c", "type": "message", "role": "assistant", "content": [], "model": body["model"],
                "stop_reason": None, "usage": {"input_tokens": input_tokens(body), "output_tokens": 1}}}),
            sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
            sse("message_stop", {"type": "message_stop"}),
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"".join(frames))


@pytest.fixture(scope="module")
def messages_api():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Messages)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class Mast:
    """A `mast serve` that a test can kill (SIGKILL, no shutdown) and start again on the same
    port, data directory and database."""

    def __init__(self, backend, messages_api):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data_dir = tempfile.mkdtemp(prefix="mast-py-")
        self.env = dict(os.environ, ANTHROPIC_BASE_URL=messages_api, ANTHROPIC_API_KEY="test", MAST_LOG="warn",
                        MAST_CONTEXT_WINDOWS=json.dumps({MODEL: WINDOW}), MAST_LEASE_TTL_MS="2000")
        self.env.pop("DATABASE_URL", None)
        if backend == "postgres":
            self.env["DATABASE_URL"] = fresh_postgres()
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([MAST_BIN, "serve", "--listen", f"127.0.0.1:{self.port}",
                                      "--data-dir", self.data_dir], env=self.env)
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("mast did not start")
            time.sleep(0.05)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=15)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)
        shutil.rmtree(self.data_dir, ignore_errors=True)


@pytest.fixture(scope="module", params=BACKENDS)
def mast(request, messages_api):
    m = Mast(request.param, messages_api)
    m.start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def server(mast):
    return mast.base


def say(client, sid, text) -> list:
    """Sends a message and returns the events streamed until the session idles."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        client.beta.sessions.events.send(sid, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                return seen
    raise AssertionError("the stream ended before the session idled")


def requests_of(tag) -> list:
    """The recorded requests of the session whose messages carry `tag`."""
    return [b for b in Messages.received if tag in json.dumps(b["messages"])]


def new_session(client, environment):
    agent = client.beta.agents.create(name="long-" + uuid.uuid4().hex[:6], model=MODEL, system="You take notes.")
    return client.beta.sessions.create(agent=agent.id, environment_id=environment.id)


def drive_to_compaction(client, sid, tag) -> tuple:
    """Sends numbered turns until one compacts; returns that turn's events and its number."""
    for i in range(15):
        seen = say(client, sid, f"[{tag}] turn {i}: {FILLER}")
        assert seen[-1].stop_reason.type == "end_turn", seen[-1]
        if any(e.type == "agent.thread_context_compacted" for e in seen):
            return seen, i
    raise AssertionError("no compaction within 15 turns")


def test_a_long_session_is_compacted_at_a_boundary(client, environment):
    tag = uuid.uuid4().hex[:10]
    sess = new_session(client, environment)
    seen, turn = drive_to_compaction(client, sess.id, tag)
    assert turn >= 3, "the window holds a few turns before it fills"

    # The turn's order: the summarisation request's span, the boundary, then the request.
    types = [e.type for e in seen]
    at = types.index("agent.thread_context_compacted")
    assert types[at - 2:at] == ["span.model_request_start", "span.model_request_end"], types
    assert types[at + 1:at + 4] == ["span.model_request_start", "agent.message", "span.model_request_end"], types
    assert types.count("agent.thread_context_compacted") == 1

    reqs = requests_of(tag)
    summary_reqs = [i for i, b in enumerate(reqs) if is_summary_request(b)]
    assert len(summary_reqs) == 1
    s = summary_reqs[0]
    before, summary_req, after = reqs[s - 1], reqs[s], reqs[s + 1]
    # Before the boundary the model saw the whole history from the first turn.
    assert text_blocks(before["messages"][0])[0].startswith(f"[{tag}] turn 0:")
    assert len(before["messages"]) == 2 * turn - 1
    # The summarisation request covers the oldest turns, as text, with no tools.
    assert f"[{tag}] turn 0:" in summary_req["messages"][0]["content"][0]["text"]
    assert not summary_req.get("tools")
    # After it the model sees the summary, then the newest turns verbatim: the old turns are
    # gone, the new message is last, and the request is smaller.
    first = text_blocks(after["messages"][0])
    assert "SUMMARY-" in first[0] and "<context-summary>" in first[0], first
    assert f"[{tag}] turn 0:" not in json.dumps(after["messages"])
    assert text_blocks(after["messages"][-1])[-1].startswith(f"[{tag}] turn {turn}:")
    assert after["messages"][0]["role"] == "user"
    assert len(after["messages"]) < len(before["messages"])
    assert input_tokens(after) < input_tokens(before)

    # The log stays whole: every turn's message is still listed.
    listed = [e for e in client.beta.sessions.events.list(sess.id, limit=1000) if e.type == "user.message"]
    assert len(listed) == turn + 1
    # The summarisation request's usage is counted like any other request's.
    usage = client.beta.sessions.retrieve(sess.id).usage
    assert usage.input_tokens == sum(input_tokens(b) for b in reqs)


def test_the_boundary_survives_a_killed_server(client, environment, mast):
    tag = uuid.uuid4().hex[:10]
    sess = new_session(client, environment)
    drive_to_compaction(client, sess.id, tag)
    summary_first = requests_of(tag)[-1]["messages"][0]
    assert "<context-summary>" in text_blocks(summary_first)[0]

    mast.kill()
    mast.start()
    seen = say(client, sess.id, f"[{tag}] after the restart")
    assert seen[-1].stop_reason.type == "end_turn"
    assert not any(e.type == "agent.thread_context_compacted" for e in seen)
    resumed = requests_of(tag)[-1]
    # The restarted server rebuilt the context from the log: it starts at the same summary.
    assert not is_summary_request(resumed)
    assert resumed["messages"][0] == summary_first
    assert f"[{tag}] turn 0:" not in json.dumps(resumed["messages"])
    assert text_blocks(resumed["messages"][-1])[-1] == f"[{tag}] after the restart"


def test_a_context_that_cannot_fit_stops_with_the_compaction_limit(client, environment):
    tag = uuid.uuid4().hex[:10]
    sess = new_session(client, environment)
    # One message larger than the window: nothing older can be summarised to make room.
    seen = say(client, sess.id, f"[{tag}] " + "x" * (WINDOW * 5))
    errors = [e for e in seen if e.type == "session.error"]
    assert [e.error.type for e in errors] == ["compaction_limit_reached_error"], errors
    assert errors[0].error.retry_status.type == "exhausted"
    assert seen[-1].stop_reason.type == "retries_exhausted"
    assert "span.model_request_start" not in [e.type for e in seen]
    assert requests_of(tag) == [], "no request is sent that cannot fit"
    # The log never changes, so the message stays in the history and a later turn stops the
    # same way, again without a request.
    again = say(client, sess.id, f"[{tag}] a short one")
    assert [e.error.type for e in again if e.type == "session.error"] == ["compaction_limit_reached_error"]
    assert again[-1].stop_reason.type == "retries_exhausted"
    assert requests_of(tag) == []

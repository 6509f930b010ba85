"""Fixtures for the SDK suite: a real `mast serve` (SQLite, and Postgres when the run has a
cluster), the official client with strict response validation, and a scripted Messages API
server that the Anthropic-routed agents talk to."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import urllib.error
import urllib.request

import anthropic
import pytest

MAST_BIN = os.environ.get("MAST_BIN", "target/debug/mast")
PG_ADMIN = os.environ.get("MAST_TEST_DATABASE_URL")
# Without a cluster the Postgres cases are reported as skipped, never silently left out.
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.skipif(
    not PG_ADMIN, reason="Postgres: set MAST_TEST_DATABASE_URL"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_postgres() -> str:
    name = "mast_py_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", PG_ADMIN, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def wait_http(url: str, proc: subprocess.Popen, what: str):
    """Waits until `url` answers (any HTTP status); fails if `proc` exits or 30 s pass."""
    deadline = time.time() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)


def start_mast(data_dir: str, env: dict, port: int | None = None, **popen) -> tuple[subprocess.Popen, str]:
    """Starts `mast serve` on a loopback port with `env` and waits for /healthz; returns the
    process and its base URL. `popen` passes on (stdout/stderr for a log file)."""
    port = port or free_port()
    proc = subprocess.Popen([MAST_BIN, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir)],
                            env=env, **popen)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", proc, "mast")
    return proc, base


def sse(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class MessagesHandler(BaseHTTPRequestHandler):
    """Answers like Claude would in the upstream custom-tool example: a user question
    gets a `get_weather` call; a tool result gets a sentence built from it."""

    # Every request body received, in order, for tests that check what reached the model.
    received: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        MessagesHandler.received.append(body)
        last = body["messages"][-1]["content"]
        results = [b for b in last if b.get("type") == "tool_result"]
        frames = [sse("message_start", {"type": "message_start", "message": {"id": "msg_py", "type": "message", "role": "assistant",
                  "content": [], "model": body["model"], "stop_reason": None,
                  "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        if results:
            text = " ".join(c["text"] for r in results for c in r.get("content", []) if c.get("type") == "text")
            frames += [
                sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"It is {text} in Paris."}}),
                sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "end_turn"
        else:
            frames += [
                sse("content_block_start", {"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": "toolu_py", "name": "get_weather", "input": {}}}),
                sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
                sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
                sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop = "tool_use"
        frames += [sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}),
                   sse("message_stop", {"type": "message_stop"})]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for f in frames:
            self.wfile.write(f)
            self.wfile.flush()


def http_server(handler):
    """Serves `handler` on a loopback port in a thread: yields the base URL, then stops. For a
    fixture's stand-in server (`yield from http_server(Handler)`)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="session")
def messages_api():
    yield from http_server(MessagesHandler)


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, tmp_path_factory, messages_api):
    port = free_port()
    # Short work-item leases so a killed worker's session moves on within seconds.
    env = dict(os.environ, ANTHROPIC_BASE_URL=messages_api, ANTHROPIC_API_KEY="test", MAST_LOG="warn",
               MAST_WORK_TTL_SECONDS="3", MAST_REAP_INTERVAL_MS="200",
               # Package installs reach these registries, which may resolve to reserved
               # addresses on test machines: let exactly them through.
               MAST_ALLOW_PRIVATE_HOSTS="pypi.org,files.pythonhosted.org,registry.npmjs.org,deb.debian.org")
    # A test module may set more of the server's environment (prices, limits).
    env.update(getattr(request.module, "SERVER_ENV", {}))
    env.pop("DATABASE_URL", None)
    if request.param == "postgres":
        env["DATABASE_URL"] = fresh_postgres()
    # Not under pytest's own temp root (mode 0700): sandbox users must be able to pass
    # through the data directory's parents to reach their workspaces.
    data_dir = tempfile.mkdtemp(prefix="mast-py-")
    proc, base = start_mast(data_dir, env, port)
    yield base
    proc.terminate()
    proc.wait(timeout=15)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def client(server):
    return anthropic.Anthropic(base_url=server, api_key="sdk-test", _strict_response_validation=True, max_retries=0)


@pytest.fixture
def async_client(server):
    return anthropic.AsyncAnthropic(base_url=server, api_key="sdk-test", _strict_response_validation=True, max_retries=0)


WEATHER_TOOL = {"type": "custom", "name": "get_weather", "description": "Current weather for a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
def environment(client):
    return client.beta.environments.create(name="env-" + uuid.uuid4().hex[:8], config={"type": "cloud", "networking": {"type": "unrestricted"}})


def run(client, sid: str, script: list[str], check=None) -> list:
    """Sends the scripted model's steps as one user message and returns the session's events
    up to its next idle; `check(event)` sees each event as it arrives."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        client.beta.sessions.events.send(sid, events=[
            {"type": "user.message", "content": [{"type": "text", "text": "\n---\n".join(script)}]}])
        for ev in st:
            seen.append(ev)
            if check is not None:
                check(ev)
            if ev.type == "session.status_idle":
                break
    return seen


def results(seen) -> list:
    """The tool results among a turn's events."""
    return [e for e in seen if e.type == "agent.tool_result"]


def text_of(result) -> str:
    """The text of a tool result."""
    return "".join(c.text for c in result.content if c.type == "text")

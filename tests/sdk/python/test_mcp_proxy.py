"""A proxy in the server's own environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`) never
carries MCP traffic: a proxy resolves names itself, so a request sent through it would reach
wherever the proxy's DNS answer points, past the addresses the egress guard checked and pinned.
The MCP server is named `localhost` (not in `NO_PROXY`, which exempts the model server)."""

import os
import shutil
import tempfile
import uuid
from http.server import BaseHTTPRequestHandler

import anthropic
import pytest

from conftest import BACKENDS, fresh_postgres, http_server, start_mast
from test_mcp import McpProcess, Recorder, of, toolset, turn, MODEL


class RecordingProxy(BaseHTTPRequestHandler):
    """Answers every request with 502 and records its target."""

    seen: list = []

    def log_message(self, *args):
        pass

    def _refuse(self):
        RecordingProxy.seen.append(f"{self.command} {self.path}")
        self.send_response(502)
        self.send_header("content-length", "0")
        self.end_headers()

    do_GET = do_POST = do_DELETE = do_CONNECT = _refuse


@pytest.fixture(scope="module")
def proxy():
    yield from http_server(RecordingProxy)


@pytest.fixture(scope="module")
def model_api():
    yield from http_server(Recorder)


@pytest.fixture(scope="module", params=BACKENDS)
def proxied_server(request, proxy, model_api):
    env = dict(os.environ, ANTHROPIC_BASE_URL=model_api, ANTHROPIC_API_KEY="test", MAST_LOG="warn",
               MAST_ALLOW_PRIVATE_NETWORK="1", MAST_MCP_CONNECT_TIMEOUT_MS="3000", MAST_MCP_CALL_TIMEOUT_MS="3000",
               HTTP_PROXY=proxy, HTTPS_PROXY=proxy, ALL_PROXY=proxy, http_proxy=proxy, https_proxy=proxy,
               all_proxy=proxy, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    env.pop("DATABASE_URL", None)
    if request.param == "postgres":
        env["DATABASE_URL"] = fresh_postgres()
    data_dir = tempfile.mkdtemp(prefix="mast-py-proxy-")
    proc, base = start_mast(data_dir, env)
    yield base
    proc.terminate()
    proc.wait(timeout=15)
    shutil.rmtree(data_dir, ignore_errors=True)


def test_mcp_calls_never_go_through_an_environment_proxy(proxied_server):
    client = anthropic.Anthropic(base_url=proxied_server, api_key="sdk-test", _strict_response_validation=True,
                                 max_retries=0)
    mcp = McpProcess("open")
    try:
        environment = client.beta.environments.create(
            name="env-" + uuid.uuid4().hex[:8], config={"type": "cloud", "networking": {"type": "unrestricted"}})
        agent = client.beta.agents.create(
            name="mcp-proxy-" + uuid.uuid4().hex[:6], model=MODEL,
            mcp_servers=[{"type": "url", "name": "open", "url": f"http://localhost:{mcp.port}/mcp"}],
            tools=[toolset("open", default_config={"permission_policy": {"type": "always_allow"}})])
        sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        RecordingProxy.seen.clear()
        seen = turn(client, sess.id, 'call open__echo {"text": "direct"}')
        [result] = of(seen, "agent.mcp_tool_result")
        assert not result.is_error and result.content[0].text == "echo: direct", result
        assert RecordingProxy.seen == [], RecordingProxy.seen
    finally:
        mcp.kill()

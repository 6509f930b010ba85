"""MCP servers with vault credentials, end to end: sessions with `vault_ids` whose
credentials a real MCP server (the `mcp` package, `mcp_server.py secure`) checks on every
request, an OAuth token endpoint of this module's own that checks client authentication,
and a server run at debug log level whose logs, events (list, SSE, transcript) and responses
are searched for every secret at the end."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic
import httpx2 as httpx  # the HTTP client anthropic 2.10 is built on
import pytest

from conftest import BACKENDS, free_port, fresh_postgres, start_mast
from test_mcp import MODEL, McpProcess, Recorder, of, toolset, turn

CLIENT_ID = "client-e2e"
CLIENT_SECRET = "cs-E2E-S3CRET"
# Every secret any test hands Mast or the token endpoint issues; none may show up anywhere.
SECRETS = {CLIENT_SECRET}


def secret(name: str) -> str:
    value = f"{name}-{uuid.uuid4().hex[:8]}-E2E-S3CRET"
    SECRETS.add(value)
    return value


def fingerprint(token: str) -> str:
    """What `whoami` says of the token it was called with (see mcp_server.py)."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


class Grants:
    """The token endpoint's state. It issues access tokens for the MCP server whose accepted
    token is in `token_file` (writing each one it issues there), for one refresh token at a
    time; `refuse` makes it turn every request down."""

    token_file: Path = None
    refresh_token = ""
    issued: list = []
    client_auth: list = []
    refuse = False


class TokenEndpoint(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["content-length"])).decode()))
        basic = self.headers.get("authorization", "")
        if basic.startswith("Basic "):
            cid, _, csecret = base64.b64decode(basic[6:]).decode().partition(":")
            method = "client_secret_basic"
        else:
            cid, csecret = form.get("client_id"), form.get("client_secret")
            method = "client_secret_post"
        if (cid, csecret) != (CLIENT_ID, CLIENT_SECRET):
            return self.reply(401, {"error": "invalid_client"})
        Grants.client_auth.append(method)
        if Grants.refuse:
            return self.reply(400, {"error": "invalid_grant", "error_description": "refresh token revoked"})
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != Grants.refresh_token:
            return self.reply(400, {"error": "invalid_grant"})
        access, Grants.refresh_token = secret("at"), secret("rt")
        Grants.issued.append(access)
        Grants.token_file.write_text(access)
        self.reply(200, {"access_token": access, "refresh_token": Grants.refresh_token,
                         "token_type": "Bearer", "expires_in": 3600})


@pytest.fixture(scope="module")
def token_endpoint():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), TokenEndpoint)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/token"
    httpd.shutdown()


@pytest.fixture(scope="module")
def model_api():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, model_api):
    """A server of this module's own: debug-level logs to a file, loopback reachable, and
    the bodies of every response the tests saw, for the final search."""
    port = free_port()
    env = dict(os.environ, ANTHROPIC_BASE_URL=model_api, ANTHROPIC_API_KEY="test", MAST_LOG="debug",
               MAST_ALLOW_PRIVATE_NETWORK="1", MAST_MCP_CONNECT_TIMEOUT_MS="3000", MAST_MCP_CALL_TIMEOUT_MS="3000")
    for k in ("DATABASE_URL", "MAST_SECRET_KEY", "MAST_SECRET_KEY_FILE"):
        env.pop(k, None)
    if request.param == "postgres":
        env["DATABASE_URL"] = fresh_postgres()
    data_dir = tempfile.mkdtemp(prefix="mast-py-mcpv-")
    log_path = os.path.join(data_dir, "server.log")
    log = open(log_path, "wb")
    proc, base = start_mast(os.path.join(data_dir, "data"), env, port, stderr=log, stdout=log)
    yield {"base": base, "log": log_path, "bodies": [], "sessions": []}
    proc.terminate()
    proc.wait(timeout=15)
    log.close()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def client(server):
    def keep(response):
        # Streams are read separately (see `sweep`); reading one here would never end.
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.read()
            server["bodies"].append(response.text)

    http = httpx.Client(event_hooks={"response": [keep]})
    return anthropic.Anthropic(base_url=server["base"], api_key="sdk-test", _strict_response_validation=True,
                               max_retries=0, http_client=http)


@pytest.fixture
def secure(tmp_path):
    """A `secure` MCP server accepting the token in a file of this test's own."""
    Grants.token_file = tmp_path / "accepted-token"
    Grants.token_file.write_text(secret("none-yet"))
    Grants.refuse = False
    Grants.issued.clear()
    Grants.client_auth.clear()
    p = McpProcess("secure", Grants.token_file)
    yield p
    p.kill()


def agent_for(client, url):
    return client.beta.agents.create(
        name="mcpv-" + uuid.uuid4().hex[:6], model=MODEL,
        mcp_servers=[{"type": "url", "name": "secure", "url": url}],
        tools=[toolset("secure", default_config={"permission_policy": {"type": "always_allow"}})])


def session(client, server, agent, environment, vault_ids):
    s = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, vault_ids=vault_ids)
    server["sessions"].append(s.id)
    return s


def static_vault(client, url, token):
    v = client.beta.vaults.create(display_name="static-" + uuid.uuid4().hex[:6])
    c = client.beta.vaults.credentials.create(v.id, auth={"type": "static_bearer", "mcp_server_url": url, "token": token})
    return v, c


def oauth_vault(client, url, token_endpoint, access, auth_type, expires_in=timedelta(seconds=20)):
    """A vault with an `mcp_oauth` credential whose access token expires within the refresh
    margin (so it is refreshed before its first use)."""
    Grants.refresh_token = secret("rt")
    v = client.beta.vaults.create(display_name="oauth-" + uuid.uuid4().hex[:6])
    endpoint_auth = {"type": auth_type, "client_secret": CLIENT_SECRET}
    c = client.beta.vaults.credentials.create(v.id, auth={
        "type": "mcp_oauth", "mcp_server_url": url, "access_token": access,
        "expires_at": (datetime.now(timezone.utc) + expires_in).isoformat(),
        "refresh": {"client_id": CLIENT_ID, "refresh_token": Grants.refresh_token, "token_endpoint": token_endpoint,
                    "token_endpoint_auth": endpoint_auth}})
    return v, c


def whoami(client, sess):
    """One turn calling `whoami`: its result text (or None) and the turn's session errors."""
    seen = turn(client, sess.id, "call secure__whoami {}")
    results = of(seen, "agent.mcp_tool_result")
    errors = of(seen, "session.error")
    return results, errors


def authenticated_as(results, token):
    assert len(results) == 1 and not results[0].is_error, results
    assert results[0].content[0].text == f"an authenticated caller ({fingerprint(token)})"


def refused(errors):
    assert errors, "no session.error"
    assert {(e.error.type, e.error.mcp_server_name) for e in errors} == {("mcp_authentication_failed_error", "secure")}, errors


def test_static_bearer_from_the_sessions_vaults(client, server, environment, secure):
    good, wrong = secret("static"), secret("wrong")
    Grants.token_file.write_text(good)
    agent = agent_for(client, secure.url)
    v_good, _ = static_vault(client, secure.url, good)
    v_wrong, _ = static_vault(client, secure.url, wrong)

    # The tool that needs the token is offered and called; the server saw the vault's token.
    Recorder.requests.clear()
    results, errors = whoami(client, session(client, server, agent, environment, [v_good.id, v_wrong.id]))
    assert {t["name"] for t in Recorder.requests[0]["tools"]} == {"secure__whoami"}
    authenticated_as(results, good)
    assert not errors

    # The first matching vault in `vault_ids` order decides: the wrong token is refused and
    # the user is told which server.
    results, errors = whoami(client, session(client, server, agent, environment, [v_wrong.id, v_good.id]))
    refused(errors)
    assert all(r.is_error for r in results)

    # No vault at all: refused the same way.
    _, errors = whoami(client, session(client, server, agent, environment, []))
    refused(errors)


def test_oauth_refreshed_before_expiry_and_after_a_401(client, server, environment, secure, token_endpoint):
    old = secret("at-old")
    agent = agent_for(client, secure.url)
    v, cred = oauth_vault(client, secure.url, token_endpoint, old, "client_secret_basic")
    sess = session(client, server, agent, environment, [v.id])

    # The access token expires within the margin: refreshed (Basic client auth) before the
    # first connection, and the refreshed token is what the MCP server saw.
    results, errors = whoami(client, sess)
    assert not errors
    assert len(Grants.issued) == 1 and Grants.client_auth == ["client_secret_basic"]
    authenticated_as(results, Grants.issued[0])
    stored = client.beta.vaults.credentials.retrieve(cred.id, vault_id=v.id)
    assert stored.auth.expires_at > datetime.now(timezone.utc) + timedelta(minutes=30)

    # Mid-session, on a live connection: the server stops accepting the token after the
    # session connected and before the call. The call's 401 refreshes, and it goes through.
    Recorder.before_call = lambda: Grants.token_file.write_text(secret("rotated"))
    results, errors = whoami(client, sess)
    assert Recorder.before_call is None, "the model was not asked for a call"
    assert not errors, errors
    assert len(Grants.issued) == 2
    authenticated_as(results, Grants.issued[1])

    # An unchanged credential is not refreshed again.
    results, errors = whoami(client, sess)
    assert not errors and len(Grants.issued) == 2
    authenticated_as(results, Grants.issued[1])


def test_a_refused_refresh_is_an_authentication_failure(client, server, environment, secure, token_endpoint):
    agent = agent_for(client, secure.url)
    v, _ = oauth_vault(client, secure.url, token_endpoint, secret("at-old"), "client_secret_post")
    Grants.refuse = True
    results, errors = whoami(client, session(client, server, agent, environment, [v.id]))
    refused(errors)
    assert Grants.client_auth and set(Grants.client_auth) == {"client_secret_post"}
    assert not Grants.issued and all(r.is_error for r in results)


def test_archiving_takes_effect_on_the_next_call(client, server, environment, secure):
    token = secret("static")
    Grants.token_file.write_text(token)
    agent = agent_for(client, secure.url)

    # The credential is archived after the session connected, before its call: the call
    # no longer carries the token.
    v, cred = static_vault(client, secure.url, token)
    sess = session(client, server, agent, environment, [v.id])
    authenticated_as(whoami(client, sess)[0], token)
    Recorder.before_call = lambda: client.beta.vaults.credentials.archive(cred.id, vault_id=v.id)
    results, errors = whoami(client, sess)
    assert Recorder.before_call is None
    refused(errors)
    assert all(r.is_error for r in results)

    # The same for a vault archived between turns.
    v, _ = static_vault(client, secure.url, token)
    sess = session(client, server, agent, environment, [v.id])
    authenticated_as(whoami(client, sess)[0], token)
    client.beta.vaults.archive(v.id)
    _, errors = whoami(client, sess)
    refused(errors)

    # A replaced token is used from the next call on.
    v, cred = static_vault(client, secure.url, secret("stale"))
    sess = session(client, server, agent, environment, [v.id])
    refused(whoami(client, sess)[1])
    client.beta.vaults.credentials.update(cred.id, vault_id=v.id, auth={"type": "static_bearer", "token": token})
    results, errors = whoami(client, sess)
    assert not errors
    authenticated_as(results, token)


def test_mcp_oauth_validate_against_the_mcp_server(client, secure, token_endpoint):
    good = secret("static")
    Grants.token_file.write_text(good)
    v, c = static_vault(client, secure.url, good)
    r = client.beta.vaults.credentials.mcp_oauth_validate(c.id, vault_id=v.id)
    assert r.status == "valid" and r.mcp_probe is None, r
    v, c = static_vault(client, secure.url, secret("wrong"))
    r = client.beta.vaults.credentials.mcp_oauth_validate(c.id, vault_id=v.id)
    assert r.status == "invalid" and r.mcp_probe.http_response.status_code == 401, r

    # OAuth: refreshed through the token endpoint, then accepted by the server.
    v, c = oauth_vault(client, secure.url, token_endpoint, secret("at-old"), "client_secret_post")
    r = client.beta.vaults.credentials.mcp_oauth_validate(c.id, vault_id=v.id)
    assert r.status == "valid" and r.refresh.status == "succeeded" and len(Grants.issued) == 1, r
    # A token the server does not accept and a refresh the endpoint refuses: invalid.
    v, c = oauth_vault(client, secure.url, token_endpoint, secret("at-old"), "client_secret_post",
                       expires_in=timedelta(hours=1))
    Grants.refuse = True
    r = client.beta.vaults.credentials.mcp_oauth_validate(c.id, vault_id=v.id)
    assert r.status == "invalid", r


def test_readme_vaults_walkthrough(server, secure):
    """The vaults page's walk-through (docs/vaults.md) against the real server that checks the token."""
    from test_readme import DEFAULT, blocks, until

    token = secret("readme")
    Grants.token_file.write_text(token)
    (code,) = blocks("docs/vaults.md", "# Vaults", "sh")
    code = (code.replace(f"B={DEFAULT}", f"B={server['base']}")
            .replace("MCP_URL=https://mcp.example.com/mcp", f"MCP_URL={secure.url}")
            .replace("TOKEN=my-token", f"TOKEN={token}")
            .replace("TOOL=search_docs", "TOOL=whoami"))
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", code + '\necho "SESSION=$SESSION"'],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] == "valid" and lines[2] == "user.message", out.stdout
    sid = out.stdout.rsplit("SESSION=", 1)[1].strip()
    server["sessions"].append(sid)

    def said():
        with urllib.request.urlopen(f"{server['base']}/v1/sessions/{sid}/events?limit=1000") as r:
            return [e for e in json.load(r)["data"] if e["type"] == "agent.message"]

    answer = until("the answer", said)
    assert answer[-1]["content"][0]["text"] == f"The server said: an authenticated caller ({fingerprint(token)})"
    server["bodies"].append(out.stdout)


def sweep(base, session_id):
    """Every form a session's events take: the list, the SSE replay and the transcript."""
    headers = {"x-api-key": "sdk-test"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as h:
        listed = h.get(f"/v1/sessions/{session_id}/events", params={"limit": 1000})
        assert listed.status_code == 200
        data = listed.json()["data"]
        transcript = h.get(f"/v1/sessions/{session_id}/transcript")
        assert transcript.status_code == 200
        assert len(transcript.text.splitlines()) == len(data)
        sse = []
        with h.stream("GET", f"/v1/sessions/{session_id}/events/stream", params={"after": data[0]["id"]}) as st:
            for line in st.iter_lines():
                sse.append(line)
                if line.startswith("data:") and data[-1]["id"] in line:
                    break
        return [listed.text, transcript.text, "\n".join(sse)]


def test_no_secret_in_logs_events_or_responses(client, server):
    """Runs last: searches everything the tests above produced."""
    assert server["sessions"], "no session to search"
    texts = list(server["bodies"])
    for sid in server["sessions"]:
        texts += sweep(server["base"], sid)
    log = Path(server["log"]).read_text(encoding="utf-8", errors="replace")
    assert " DEBUG " in log or "DEBUG" in log, "the server did not log at debug level"
    everything = "\n".join(texts)
    assert "agent.mcp_tool_result" in everything
    for s in sorted(SECRETS):
        assert s not in log, f"a secret is in the logs: {s}"
        assert s not in everything, f"a secret is in an event or a response: {s}"
    assert "S3CRET" not in everything and "S3CRET" not in log

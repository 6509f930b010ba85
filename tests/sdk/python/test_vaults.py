"""Vaults and credentials through the official SDK with strict validation: all 13 methods,
`mcp_oauth_validate` against a real token endpoint and a stand-in MCP server, `vault_ids` on
sessions, and no secret in any response body or in the server's debug-level logs."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import httpx2 as httpx  # the HTTP client anthropic 2.10 is built on
import pytest

from conftest import BACKENDS, free_port, fresh_postgres, start_mast

SECRETS = ["static-S3CRET", "wrong-S3CRET", "at-0-S3CRET", "rt-0-S3CRET", "cs-S3CRET", "new-S3CRET"]


class Auth:
    """The stand-in authorization server's state: the tokens it accepts now."""

    refresh_token = "rt-0-S3CRET"
    access_token = "at-0-S3CRET"
    refreshes = 0


class AuthHandler(BaseHTTPRequestHandler):
    """`/token`: the refresh grant with `client_secret_post`; `/mcp`: `initialize` for the
    current access token or the static one, else a 401 echoing the token it got."""

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
        raw = self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/token":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            if form.get("client_id") != "client-1" or form.get("client_secret") != "cs-S3CRET":
                return self.reply(401, {"error": "invalid_client"})
            if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != Auth.refresh_token:
                return self.reply(400, {"error": "invalid_grant"})
            Auth.refreshes += 1
            Auth.refresh_token = f"rt-{Auth.refreshes}-S3CRET"
            Auth.access_token = f"at-{Auth.refreshes}-S3CRET"
            SECRETS.extend([Auth.refresh_token, Auth.access_token])
            return self.reply(200, {"access_token": Auth.access_token, "refresh_token": Auth.refresh_token,
                                    "token_type": "Bearer", "expires_in": 3600})
        got = self.headers.get("authorization", "")
        if got not in (f"Bearer {Auth.access_token}", "Bearer static-S3CRET", "Bearer new-S3CRET"):
            return self.reply(401, {"error": "invalid_token", "got": got})
        req = json.loads(raw)
        self.reply(200, {"jsonrpc": "2.0", "id": req["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "stand-in", "version": "1"}}})


@pytest.fixture(scope="module")
def auth_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), AuthHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module", params=BACKENDS)
def vault_server(request):
    """A server of its own: debug-level logs to a file (grepped for secrets), and loopback
    reachable so the stand-in servers can be probed."""
    port = free_port()
    env = dict(os.environ, MAST_LOG="debug", MAST_ALLOW_PRIVATE_NETWORK="1")
    for k in ("DATABASE_URL", "MAST_SECRET_KEY", "MAST_SECRET_KEY_FILE"):
        env.pop(k, None)
    if request.param == "postgres":
        env["DATABASE_URL"] = fresh_postgres()
    data_dir = tempfile.mkdtemp(prefix="mast-py-vaults-")
    log_path = os.path.join(data_dir, "server.log")
    log = open(log_path, "wb")
    proc, base = start_mast(os.path.join(data_dir, "data"), env, port, stderr=log, stdout=subprocess.DEVNULL)
    bodies = []
    yield base, log_path, bodies
    proc.terminate()
    proc.wait(timeout=15)
    log.close()
    text = open(log_path, encoding="utf-8", errors="replace").read()
    seen = "\n".join(bodies)
    assert "secret.key" in text, "the generated key's location is logged"
    for s in SECRETS:
        assert s not in text, f"a secret is in the logs: {s}"
        assert s not in seen, f"a secret is in a response: {s}"
    assert "S3CRET" not in seen
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def client(vault_server):
    base, _, bodies = vault_server

    def keep(response):
        response.read()
        bodies.append(response.text)

    http = httpx.Client(event_hooks={"response": [keep]})
    return anthropic.Anthropic(base_url=base, api_key="sdk-test", _strict_response_validation=True,
                               max_retries=0, http_client=http)


def test_vault_lifecycle(client):
    v = client.beta.vaults.create(display_name="team", metadata={"k": "v"})
    assert v.type == "vault" and v.id.startswith("vlt_") and v.archived_at is None
    assert client.beta.vaults.retrieve(v.id).display_name == "team"
    u = client.beta.vaults.update(v.id, display_name="team 2", metadata={"k": None, "j": "w"})
    assert u.display_name == "team 2" and u.metadata == {"j": "w"}
    made = [client.beta.vaults.create(display_name=f"p{i}").id for i in range(3)]
    seen = [x.id for x in client.beta.vaults.list(limit=2)]
    assert set(made + [v.id]) <= set(seen) and len(seen) == len(set(seen))
    a = client.beta.vaults.archive(v.id)
    assert a.archived_at is not None
    assert v.id not in [x.id for x in client.beta.vaults.list()]
    assert v.id in [x.id for x in client.beta.vaults.list(include_archived=True)]
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.update(v.id, display_name="again")
    d = client.beta.vaults.delete(v.id)
    assert d.type == "vault_deleted" and d.id == v.id
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.retrieve(v.id)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.create(display_name="")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.create(display_name="x", extra_body={"colour": "red"})


def test_credential_lifecycle(client, auth_server):
    v = client.beta.vaults.create(display_name="creds")
    mcp = f"{auth_server}/mcp"
    st = client.beta.vaults.credentials.create(
        v.id, display_name="static", metadata={"a": "b"},
        auth={"type": "static_bearer", "mcp_server_url": mcp, "token": "static-S3CRET"})
    assert st.type == "vault_credential" and st.id.startswith("vcrd_") and st.vault_id == v.id
    assert st.auth.type == "static_bearer" and st.auth.mcp_server_url == mcp
    v2 = client.beta.vaults.create(display_name="oauth")
    expires = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    oa = client.beta.vaults.credentials.create(v2.id, auth={
        "type": "mcp_oauth", "mcp_server_url": mcp, "access_token": "at-0-S3CRET", "expires_at": expires,
        "refresh": {"client_id": "client-1", "refresh_token": "rt-0-S3CRET", "token_endpoint": f"{auth_server}/token",
                    "token_endpoint_auth": {"type": "client_secret_post", "client_secret": "cs-S3CRET"},
                    "scope": "read"}})
    assert oa.auth.type == "mcp_oauth" and oa.auth.expires_at is not None
    assert oa.auth.refresh.client_id == "client-1" and oa.auth.refresh.scope == "read"
    assert oa.auth.refresh.token_endpoint_auth.type == "client_secret_post"
    for c in (st, oa):
        dumped = c.model_dump_json()
        assert "S3CRET" not in dumped, dumped
    got = client.beta.vaults.credentials.retrieve(st.id, vault_id=v.id)
    assert got.display_name == "static" and got.metadata == {"a": "b"}
    # Updates: secrets, expiry and refresh settings change; the type and URL cannot.
    up = client.beta.vaults.credentials.update(oa.id, vault_id=v2.id, auth={
        "type": "mcp_oauth", "refresh": {"scope": "", "token_endpoint_auth": {"type": "client_secret_basic"}}},
        display_name="renamed", metadata={"x": "y"})
    assert up.auth.refresh.scope is None and up.auth.refresh.token_endpoint_auth.type == "client_secret_post"
    assert up.display_name == "renamed" and up.metadata == {"x": "y"}
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(oa.id, vault_id=v2.id, auth={"type": "static_bearer", "token": "t"})
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(st.id, vault_id=v.id,
                                              auth={"type": "static_bearer", "token": "t", "mcp_server_url": mcp})
    with pytest.raises(anthropic.ConflictError):
        client.beta.vaults.credentials.create(
            v.id, auth={"type": "static_bearer", "mcp_server_url": mcp + "/", "token": "static-S3CRET"})
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.vaults.credentials.create(v.id, auth={
            "type": "environment_variable", "secret_name": "A", "secret_value": "b", "networking": {"type": "unrestricted"}})
    assert e.value.body["error"]["details"]["error_code"] == "unsupported_feature"
    # Lists, archive, delete.
    more = client.beta.vaults.credentials.create(
        v.id, auth={"type": "static_bearer", "mcp_server_url": "https://other.example.com/mcp", "token": "static-S3CRET"})
    ids = [c.id for c in client.beta.vaults.credentials.list(v.id, limit=1)]
    assert sorted(ids) == sorted([st.id, more.id])
    ar = client.beta.vaults.credentials.archive(more.id, vault_id=v.id)
    assert ar.archived_at is not None
    assert [c.id for c in client.beta.vaults.credentials.list(v.id)] == [st.id]
    assert more.id in [c.id for c in client.beta.vaults.credentials.list(v.id, include_archived=True)]
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(more.id, vault_id=v.id, display_name="n")
    d = client.beta.vaults.credentials.delete(more.id, vault_id=v.id)
    assert d.type == "vault_credential_deleted" and d.id == more.id
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.retrieve(more.id, vault_id=v.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.retrieve(st.id, vault_id=v2.id)


def test_mcp_oauth_validate(client, auth_server):
    mcp = f"{auth_server}/mcp"
    v = client.beta.vaults.create(display_name="validate")
    soon = (datetime.now(timezone.utc) + timedelta(seconds=20)).isoformat()
    oa = client.beta.vaults.credentials.create(v.id, auth={
        "type": "mcp_oauth", "mcp_server_url": mcp, "access_token": "at-0-S3CRET", "expires_at": soon,
        "refresh": {"client_id": "client-1", "refresh_token": Auth.refresh_token, "token_endpoint": f"{auth_server}/token",
                    "token_endpoint_auth": {"type": "client_secret_post", "client_secret": "cs-S3CRET"}}})
    before = Auth.refreshes
    r = client.beta.vaults.credentials.mcp_oauth_validate(oa.id, vault_id=v.id)
    assert r.type == "vault_credential_validation" and r.credential_id == oa.id and r.vault_id == v.id
    assert r.status == "valid" and r.has_refresh_token and r.mcp_probe is None
    assert r.refresh is not None and r.refresh.status == "succeeded"
    assert Auth.refreshes == before + 1
    # The refreshed expiry is stored (and shown, without the token).
    assert client.beta.vaults.credentials.retrieve(oa.id, vault_id=v.id).auth.expires_at > datetime.now(timezone.utc) + timedelta(minutes=30)

    v2 = client.beta.vaults.create(display_name="wrong")
    bad = client.beta.vaults.credentials.create(
        v2.id, auth={"type": "static_bearer", "mcp_server_url": mcp, "token": "wrong-S3CRET"})
    r = client.beta.vaults.credentials.mcp_oauth_validate(bad.id, vault_id=v2.id)
    assert r.status == "invalid" and not r.has_refresh_token and r.refresh is None
    assert r.mcp_probe.method == "initialize" and r.mcp_probe.http_response.status_code == 401
    assert "wrong-S3CRET" not in r.mcp_probe.http_response.body
    client.beta.vaults.credentials.update(bad.id, vault_id=v2.id, auth={"type": "static_bearer", "token": "new-S3CRET"})
    assert client.beta.vaults.credentials.mcp_oauth_validate(bad.id, vault_id=v2.id).status == "valid"
    # Nothing listening: no verdict.
    v3 = client.beta.vaults.create(display_name="down")
    down = client.beta.vaults.credentials.create(
        v3.id, auth={"type": "static_bearer", "mcp_server_url": f"http://127.0.0.1:{free_port()}/mcp", "token": "static-S3CRET"})
    r = client.beta.vaults.credentials.mcp_oauth_validate(down.id, vault_id=v3.id)
    assert r.status == "unknown" and r.mcp_probe.http_response is None


def test_sessions_take_vault_ids_at_creation(client):
    env = client.beta.environments.create(name="vault-env-" + str(time.time_ns()))
    agent = client.beta.agents.create(name="a", model="mast-scripted")
    v1 = client.beta.vaults.create(display_name="one")
    v2 = client.beta.vaults.create(display_name="two")
    s = client.beta.sessions.create(agent=agent.id, environment_id=env.id, vault_ids=[v2.id, v1.id])
    assert s.vault_ids == [v2.id, v1.id]
    assert client.beta.sessions.retrieve(s.id).vault_ids == [v2.id, v1.id]
    plain = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    assert plain.vault_ids == []
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.update(s.id, vault_ids=[v1.id])
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.create(agent=agent.id, environment_id=env.id, vault_ids=["vlt_missing"])
    client.beta.vaults.archive(v1.id)
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.create(agent=agent.id, environment_id=env.id, vault_ids=[v1.id])
    assert e.value.body["error"]["details"]["error_code"] == "vault_archived"
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.create(agent=agent.id, environment_id=env.id, vault_ids=[v2.id, v2.id])


def test_readme_vaults_example(vault_server):
    """The README's Vaults walk-through, run as written."""
    from test_readme import DEFAULT, blocks

    base, _, _ = vault_server
    (code,) = blocks("docs/vaults.md", "# Vaults", "sh")
    code = code.replace(f"B={DEFAULT}", f"B={base}")
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] in ("valid", "invalid", "unknown"), out.stdout
    assert json.loads(lines[1])[0].startswith("vlt_"), out.stdout
    assert lines[2] == "user.message", out.stdout
    assert "my-token" not in out.stdout

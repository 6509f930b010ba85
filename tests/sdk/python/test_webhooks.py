"""Webhooks through a real receiver: every delivery is verified with the SDK's own
`client.beta.webhooks.unwrap` and with the `standardwebhooks` package; a receiver that fails
and recovers gets every event (duplicates only under the same `webhook-id`), in order; secret
rotation, disabled endpoints, bad input, the egress rule, and (Postgres) a replica killed
mid-delivery losing nothing."""

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import pytest
import standardwebhooks

from conftest import MAST_BIN, PG_ADMIN, free_port, fresh_postgres, run

# The receiver listens on 127.0.0.1, which the egress rule refuses unless the operator allows
# private addresses. Fast polls and retries keep the tests short.
FAST = {"MAST_WEBHOOK_POLL_MS": "50", "MAST_WEBHOOK_BACKOFF_BASE_MS": "100",
        "MAST_WEBHOOK_BACKOFF_CAP_MS": "400", "MAST_WEBHOOK_TIMEOUT_MS": "2000"}
SERVER_ENV = dict(FAST, MAST_ALLOW_PRIVATE_NETWORK="1")


class Receiver:
    """An HTTP receiver that records every request and answers `status` (or holds the
    request open while `hold` is set)."""

    def __init__(self):
        self.requests = []  # (headers dict, body text, status answered)
        self.status = 200
        self.hold = threading.Event()
        self.held = threading.Event()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"])).decode()
                headers = {k.lower(): v for k, v in self.headers.items()}
                if receiver.hold.is_set():
                    receiver.held.set()
                    while receiver.hold.is_set():
                        time.sleep(0.05)
                    return  # the sender is gone; answer nothing
                status = receiver.status
                with receiver.lock:
                    receiver.requests.append((headers, body, status))
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    def delivered(self):
        """(headers, body) of every request answered 2xx."""
        with self.lock:
            return [(h, b) for h, b, s in self.requests if 200 <= s < 300]

    def wait(self, pred, timeout=20.0, what="deliveries"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred(self):
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; got {[json.loads(b)['data'] for _, b in self.delivered()]}")


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.hold.clear()
    r.httpd.shutdown()


def api(base, method, path, body=None):
    """Mast's own webhook API (not in the SDK): (status, JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"content-type": "application/json", "x-api-key": "sdk-test"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def endpoint(base, url, types, **extra):
    status, ep = api(base, "POST", "/v1/mast/webhook_endpoints", dict(url=url, event_types=types, **extra))
    assert status == 200, ep
    return ep


def settled(base, ep_id, query=""):
    """The endpoint's deliveries once none is pending (the receiver sees a request a moment
    before its sender records the answer)."""
    deadline = time.time() + 20
    while True:
        status, page = api(base, "GET", f"/v1/mast/webhook_endpoints/{ep_id}/deliveries?limit=100{query}")
        assert status == 200, page
        if all(d["status"] != "pending" for d in page["data"]) or time.time() > deadline:
            return page
        time.sleep(0.05)


def verified(client, secret, headers, body):
    """The event, verified both by the SDK's unwrap and by the standardwebhooks package."""
    standardwebhooks.Webhook(secret).verify(body, headers)
    return client.beta.webhooks.unwrap(body, headers=headers, key=secret)


def of(receiver, object_id):
    """The data.types delivered about one object, in arrival order."""
    return [json.loads(b)["data"]["type"] for _, b in receiver.delivered() if json.loads(b)["data"]["id"] == object_id]


def test_every_delivery_verifies_with_unwrap_and_standardwebhooks(client, server, environment, receiver):
    ep = endpoint(server, receiver.url, ["agent.created", "session.created", "session.status_run_started",
                                         "session.status_idled", "session.updated"])
    assert ep["signing_secret"].startswith("whsec_") and ep["enabled"] is True
    # The secret is shown once: never on retrieve or list.
    status, again = api(server, "GET", f"/v1/mast/webhook_endpoints/{ep['id']}")
    assert status == 200 and "signing_secret" not in again
    agent = client.beta.agents.create(name="wh", model="mast-scripted")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    run(client, sess.id, ["say hello"])
    client.beta.sessions.update(sess.id, title="renamed")
    want = ["session.created", "session.status_run_started", "session.status_idled", "session.updated"]
    receiver.wait(lambda r: of(r, sess.id) == want and of(r, agent.id) == ["agent.created"])
    for headers, body in receiver.delivered():
        event = verified(client, ep["signing_secret"], headers, body)
        assert event.type == "event" and event.id == headers["webhook-id"]
        assert event.data.workspace_id and event.data.organization_id
        assert event.created_at is not None
    # Deliveries and attempts are listable, newest first, with the exact payload sent.
    page = settled(server, ep["id"])
    assert [d["event_type"] for d in reversed(page["data"])][-4:] == want
    assert all(d["status"] == "delivered" and d["attempt_count"] == 1 for d in page["data"])
    last = page["data"][0]
    status, attempts = api(server, "GET", f"/v1/mast/webhook_endpoints/{ep['id']}/deliveries/{last['id']}/attempts")
    assert status == 200 and [a["status_code"] for a in attempts["data"]] == [200]
    assert attempts["data"][0]["latency_ms"] >= 0 and attempts["data"][0]["next_retry_at"] is None
    # A replay sends the same event again under the same webhook-id.
    before = len(receiver.delivered())
    status, replayed = api(server, "POST", f"/v1/mast/webhook_endpoints/{ep['id']}/deliveries/{last['id']}/replay")
    assert status == 200 and replayed["id"] != last["id"] and replayed["event_id"] == last["event_id"]
    receiver.wait(lambda r: len(r.delivered()) == before + 1)
    headers, body = receiver.delivered()[-1]
    assert headers["webhook-id"] == last["event_id"] and json.loads(body) == last["payload"]
    status, err = api(server, "POST", f"/v1/mast/webhook_endpoints/{ep['id']}/deliveries/whdl_nope/replay")
    assert status == 404 and err["error"]["type"] == "not_found_error"


def test_failing_receiver_gets_every_event_once_back_in_order(client, server, receiver):
    receiver.status = 500
    ep = endpoint(server, receiver.url, ["agent.created", "agent.archived"])
    agents = [client.beta.agents.create(name=f"f{i}", model="mast-scripted").id for i in range(3)]
    client.beta.agents.archive(agents[0])
    # Retried while it fails: the first event is attempted again and again, the rest wait.
    receiver.wait(lambda r: len(r.requests) >= 3, what="failed attempts")
    with receiver.lock:
        failed = [json.loads(b)["data"]["id"] for _, b, _ in receiver.requests]
    assert set(failed) == {agents[0]}, "an endpoint gets its next event only after the one before"
    receiver.status = 200
    receiver.wait(lambda r: sum(len(of(r, a)) for a in agents) == 4)
    got = [(json.loads(b)["data"]["type"], json.loads(b)["data"]["id"]) for _, b in receiver.delivered()
           if json.loads(b)["data"]["id"] in agents]
    assert got == [("agent.created", a) for a in agents] + [("agent.archived", agents[0])]
    # Every attempt of one event carried the same webhook-id and body.
    with receiver.lock:
        by_id = {}
        for h, b, _ in receiver.requests:
            by_id.setdefault(h["webhook-id"], set()).add(b)
    assert all(len(bodies) == 1 for bodies in by_id.values())
    page = settled(server, ep["id"], "&order=asc")
    first = page["data"][0]
    assert first["status"] == "delivered" and first["attempt_count"] >= 3
    status, attempts = api(server, "GET", f"/v1/mast/webhook_endpoints/{ep['id']}/deliveries/{first['id']}/attempts")
    codes = [a["status_code"] for a in attempts["data"]]
    assert codes[-1] == 200 and set(codes[:-1]) == {500}
    assert all(a["next_retry_at"] for a in attempts["data"][:-1]) and "HTTP 500" in attempts["data"][0]["error"]


def test_rotation_signs_with_old_and_new_secret(client, server, receiver):
    ep = endpoint(server, receiver.url, ["agent.created"])
    status, rotated = api(server, "POST", f"/v1/mast/webhook_endpoints/{ep['id']}/rotate_secret")
    assert status == 200 and rotated["signing_secret"] != ep["signing_secret"]
    assert rotated["previous_secret_expires_at"]
    agent = client.beta.agents.create(name="rot", model="mast-scripted")
    receiver.wait(lambda r: of(r, agent.id) == ["agent.created"])
    headers, body = [(h, b) for h, b in receiver.delivered() if json.loads(b)["data"]["id"] == agent.id][0]
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (ep["signing_secret"], rotated["signing_secret"]):
        assert verified(client, secret, headers, body).data.id == agent.id
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        client.beta.webhooks.unwrap(body, headers=headers, key="whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")


def test_disabled_endpoint_gets_nothing(client, server, receiver):
    off = Receiver()
    try:
        disabled = endpoint(server, off.url, ["agent.created"], enabled=False)
        endpoint(server, receiver.url, ["agent.created"])
        agent = client.beta.agents.create(name="dis", model="mast-scripted")
        receiver.wait(lambda r: of(r, agent.id) == ["agent.created"])
        status, page = api(server, "GET", f"/v1/mast/webhook_endpoints/{disabled['id']}/deliveries")
        assert status == 200 and page["data"] == []
        assert off.requests == []
        # Enabled later, it gets what happens from then on (nothing was queued while it was off).
        status, on = api(server, "POST", f"/v1/mast/webhook_endpoints/{disabled['id']}", {"enabled": True})
        assert status == 200 and on["enabled"] is True
        second = client.beta.agents.create(name="dis2", model="mast-scripted")
        off.wait(lambda r: of(r, second.id) == ["agent.created"])
        assert of(off, agent.id) == []
    finally:
        off.httpd.shutdown()


def test_bad_input_is_refused_and_changes_nothing(server, receiver):
    status, before = api(server, "GET", "/v1/mast/webhook_endpoints?limit=100")
    bad = [
        {"url": "ftp://example.com/x", "event_types": ["agent.created"]},
        {"url": "not a url", "event_types": ["agent.created"]},
        {"url": receiver.url, "event_types": ["session.status_idle"]},
        {"url": receiver.url, "event_types": []},
        {"url": receiver.url, "event_types": ["external_key.failed"]},
        {"url": receiver.url, "event_types": ["agent.created"], "enabeld": False},
        {"url": receiver.url, "event_types": ["agent.created"], "signing_secret": "whsec_!!"},
    ]
    for body in bad:
        status, err = api(server, "POST", "/v1/mast/webhook_endpoints", body)
        assert status == 400, (body, err)
        assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error" and err["error"]["message"]
    status, err = api(server, "POST", "/v1/mast/webhook_endpoints",
                      {"url": receiver.url, "event_types": ["session.status_idle"]})
    assert "session.status_idled" in err["error"]["message"]
    ep = endpoint(server, receiver.url, ["agent.created"])
    status, err = api(server, "POST", f"/v1/mast/webhook_endpoints/{ep['id']}", {"event_types": ["nope"]})
    assert status == 400
    status, same = api(server, "GET", f"/v1/mast/webhook_endpoints/{ep['id']}")
    assert same["event_types"] == ["agent.created"]
    status, after = api(server, "GET", "/v1/mast/webhook_endpoints?limit=100")
    assert len(after["data"]) == len(before["data"]) + 1
    status, deleted = api(server, "DELETE", f"/v1/mast/webhook_endpoints/{ep['id']}")
    assert status == 200 and deleted == {"id": ep["id"], "type": "webhook_endpoint_deleted"}
    assert api(server, "GET", f"/v1/mast/webhook_endpoints/{ep['id']}")[0] == 404


def start_server(env_extra, database_url=None):
    """A `mast serve` of this test's own (the module's fixture has the private-network
    setting on); returns (process, base URL, data dir)."""
    port = free_port()
    env = dict(os.environ, MAST_LOG="warn", **env_extra)
    env.pop("DATABASE_URL", None)
    env.pop("MAST_ALLOW_PRIVATE_NETWORK", None)
    env.update(env_extra)
    if database_url:
        env["DATABASE_URL"] = database_url
    data_dir = tempfile.mkdtemp(prefix="mast-wh-")
    proc = subprocess.Popen([MAST_BIN, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir], env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                if r.status == 200:
                    return proc, base, data_dir
        except OSError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError("mast did not start")
        time.sleep(0.05)


def stop(proc, data_dir):
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=15)
    shutil.rmtree(data_dir, ignore_errors=True)


def test_private_url_refused_without_the_operator_setting(receiver):
    proc, base, data_dir = start_server(FAST)
    try:
        for url in (receiver.url, "http://10.1.2.3/hook", "http://[::1]:9/hook"):
            status, err = api(base, "POST", "/v1/mast/webhook_endpoints", {"url": url, "event_types": ["agent.created"]})
            assert status == 400 and "MAST_ALLOW_PRIVATE_NETWORK" in err["error"]["message"], err
        assert api(base, "GET", "/v1/mast/webhook_endpoints")[1]["data"] == []
    finally:
        stop(proc, data_dir)


@pytest.mark.skipif(not PG_ADMIN, reason="Postgres: set MAST_TEST_DATABASE_URL")
def test_replica_killed_mid_delivery_loses_nothing(receiver):
    db = fresh_postgres()
    # Replicas sharing a database share the key that seals signing secrets.
    env = dict(FAST, MAST_ALLOW_PRIVATE_NETWORK="1", MAST_SECRET_KEY=base64.b64encode(os.urandom(32)).decode())
    a, base_a, dir_a = start_server(env, db)
    b = None
    try:
        ep = endpoint(base_a, receiver.url, ["agent.created"])
        client = anthropic.Anthropic(base_url=base_a, api_key="sdk-test", _strict_response_validation=True, max_retries=0)
        receiver.hold.set()
        first = client.beta.agents.create(name="k1", model="mast-scripted")
        assert receiver.held.wait(20), "replica A never started the delivery"
        # A is mid-delivery (the receiver holds the request): a second replica joins, A dies.
        b, base_b, dir_b = start_server(env, db)
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=15)
        receiver.hold.clear()
        second = anthropic.Anthropic(base_url=base_b, api_key="sdk-test", max_retries=0).beta.agents.create(
            name="k2", model="mast-scripted")
        # A's lease runs out and B sends both, in order, each once answered.
        receiver.wait(lambda r: of(r, first.id) == ["agent.created"] and of(r, second.id) == ["agent.created"],
                      timeout=30)
        ids = [json.loads(body)["data"]["id"] for _, body in receiver.delivered()]
        assert ids == [first.id, second.id]
        for headers, body in receiver.delivered():
            verified(client, ep["signing_secret"], headers, body)
        page = settled(base_b, ep["id"])
        assert [d["status"] for d in page["data"]] == ["delivered", "delivered"]
    finally:
        receiver.hold.clear()
        if a.poll() is None:
            a.kill()
        shutil.rmtree(dir_a, ignore_errors=True)
        if b is not None:
            stop(b, dir_b)

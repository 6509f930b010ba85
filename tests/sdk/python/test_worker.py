"""Self-hosted environments through the official SDK: its own EnvironmentWorker (run as a
subprocess from examples/worker.py) serves sessions against `mast serve`, and the raw work
endpoints behave as the worker expects."""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import anthropic
import pytest

WORKER = Path(__file__).resolve().parents[3] / "examples" / "worker.py"


def self_hosted(client):
    env = client.beta.environments.create(name="workers-" + uuid.uuid4().hex[:8], config={"type": "self_hosted"})
    key = client.post(f"/v1/environments/{env.id}/keys", cast_to=object, body={})
    assert key["type"] == "environment_key" and key["key"].startswith("mast_ek_")
    return env, key["key"]


def coder(client, policy="always_allow"):
    return client.beta.agents.create(
        name="coder", model="mast-scripted",
        tools=[{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": policy}}}])


def as_worker(server, credential):
    return anthropic.Anthropic(base_url=server, auth_token=credential, _strict_response_validation=True, max_retries=0)


class Worker:
    """examples/worker.py in its own process group, so a kill takes its tool processes too."""

    def __init__(self, server, env_id, key, workdir, max_idle=60.0):
        env = dict(os.environ, MAST_URL=server, MAST_ENVIRONMENT_ID=env_id, MAST_ENVIRONMENT_KEY=key, WORKER_LOG="INFO")
        env.pop("ANTHROPIC_API_KEY", None)
        self.proc = subprocess.Popen([sys.executable, str(WORKER), "--workdir", str(workdir), "--max-idle", str(max_idle)],
                                     env=env, start_new_session=True)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def alive(self):
        return self.proc.poll() is None


@pytest.fixture
def workers():
    started = []

    def start(*args, **kwargs):
        w = Worker(*args, **kwargs)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


def run_turn(client, session_id, script, timeout=90):
    """Sends a scripted turn and streams until the session stops for good; returns the events seen."""
    seen = []
    deadline = time.time() + timeout
    with client.beta.sessions.events.stream(session_id) as st:
        client.beta.sessions.events.send(session_id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            seen.append(ev)
            assert time.time() < deadline, "turn did not finish"
            if ev.type == "session.status_idle" and ev.stop_reason.type != "requires_action":
                return seen
    raise AssertionError("stream ended early")


def eventually(check, timeout=30, what="condition", interval=0.1):
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def token_of(item):
    raw = base64.urlsafe_b64decode(item.secret + "=" * (-len(item.secret) % 4))
    return json.loads(raw)["sessions_token"]


def test_the_sdk_worker_runs_a_session(client, server, tmp_path, workers):
    env, key = self_hosted(client)
    agent = coder(client)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    workers(server, env.id, key, tmp_path)
    script = "\n---\n".join([
        "call write " + json.dumps({"file_path": "notes/plan.txt", "content": "built on the worker\n"}),
        "call bash " + json.dumps({"command": "cat notes/plan.txt; hostname > where.txt"}),
        "say {{result}}",
    ])
    seen = run_turn(client, sess.id, script)
    uses = [e for e in seen if e.type == "agent.tool_use"]
    assert [u.name for u in uses] == ["write", "bash"]
    results = [e for e in seen if e.type == "user.tool_result"]
    assert [r.tool_use_id for r in results] == [u.id for u in uses], "the worker answered each call"
    assert not [e for e in seen if e.type == "agent.tool_result"], "nothing ran on the server"
    final = [e for e in seen if e.type == "agent.message"][-1]
    assert "built on the worker" in final.content[0].text
    # The files are on the worker's machine, in its workdir.
    assert (tmp_path / "notes" / "plan.txt").read_text() == "built on the worker\n"
    assert (tmp_path / "where.txt").exists()


def test_a_killed_worker_is_replaced(client, server, tmp_path, workers):
    env, key = self_hosted(client)
    agent = coder(client)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    first = workers(server, env.id, key, tmp_path)
    # The first run marks the workdir and hangs; a second run of the same call finishes.
    command = "if [ -f started ]; then echo finished by the second worker; else touch started; sleep 300; fi"
    script = "\n---\n".join(["call bash " + json.dumps({"command": command}), "say {{result}}"])
    done = {}

    def turn():
        done["seen"] = run_turn(client, sess.id, script, timeout=120)

    t = threading.Thread(target=turn)
    t.start()
    eventually(lambda: (tmp_path / "started").exists(), what="the first worker to start the call")
    first.kill()
    workers(server, env.id, key, tmp_path)
    t.join(timeout=150)
    assert "seen" in done, "the session did not finish"
    final = [e for e in done["seen"] if e.type == "agent.message"][-1]
    assert "finished by the second worker" in final.content[0].text
    uses = [e for e in done["seen"] if e.type == "agent.tool_use"]
    assert len(uses) == 1, "the call ran again, not the turn"


def test_stop_while_active_ends_the_workers_lease(client, server, tmp_path, workers):
    env, key = self_hosted(client)
    agent = coder(client)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    worker = workers(server, env.id, key, tmp_path, max_idle=600)
    env_client = as_worker(server, key)
    item = eventually(lambda: next((w for w in env_client.beta.environments.work.list(env.id) if w.state == "active"), None),
                      what="the worker to heartbeat its item")
    assert item.data.id == sess.id
    stopping = client.beta.environments.work.stop(item.id, environment_id=env.id)
    assert stopping.state == "stopping"
    # The worker hears it on its next heartbeat and confirms with a forced stop.
    stopped = eventually(lambda: (w := client.beta.environments.work.retrieve(item.id, environment_id=env.id)).state == "stopped" and w,
                         what="the worker to stop the item")
    assert stopped.stop_requested_at is not None and stopped.stopped_at is not None
    with pytest.raises(anthropic.ConflictError):
        client.beta.environments.work.stop(item.id, environment_id=env.id, force=True)
    assert worker.alive(), "the worker keeps polling for more work"


def test_heartbeat_precondition_failure(client, server):
    env, key = self_hosted(client)
    agent = coder(client)
    client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    w = as_worker(server, key)
    item = w.beta.environments.work.poll(env.id, anthropic_worker_id="pytest-1")
    assert item is not None and item.secret
    assert w.beta.environments.work.ack(item.id, environment_id=env.id).state == "starting"
    holder = as_worker(server, token_of(item))
    beat = holder.beta.environments.work.heartbeat(item.id, environment_id=env.id, expected_last_heartbeat="NO_HEARTBEAT")
    assert beat.lease_extended and beat.state == "active"
    with pytest.raises(anthropic.APIStatusError) as err:
        holder.beta.environments.work.heartbeat(item.id, environment_id=env.id, expected_last_heartbeat="NO_HEARTBEAT")
    assert err.value.status_code == 412
    details = err.value.body["error"]["details"]
    assert details["error_code"] == "heartbeat_precondition_failed"
    assert details["current_state"]["last_heartbeat"] == beat.last_heartbeat
    assert details["current_state"]["lease_extended"] is False
    again = holder.beta.environments.work.heartbeat(item.id, environment_id=env.id, expected_last_heartbeat=beat.last_heartbeat)
    assert again.lease_extended
    stats = client.beta.environments.work.stats(env.id)
    assert stats.type == "work_queue_stats" and stats.workers_polling == 1


def test_a_session_token_is_refused_on_another_session(client, server):
    env, key = self_hosted(client)
    agent = coder(client)
    mine = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    w = as_worker(server, key)
    item = w.beta.environments.work.poll(env.id)
    other = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    w.beta.environments.work.ack(item.id, environment_id=env.id)
    holder = as_worker(server, token_of(item))
    assert holder.beta.sessions.retrieve(item.data.id).id == mine.id
    assert list(holder.beta.sessions.events.list(mine.id)) is not None
    with pytest.raises(anthropic.PermissionDeniedError):
        holder.beta.sessions.retrieve(other.id)
    with pytest.raises(anthropic.PermissionDeniedError):
        holder.beta.sessions.events.send(other.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}])
    with pytest.raises(anthropic.PermissionDeniedError):
        holder.beta.agents.list()


def test_a_long_poll_returns_when_work_arrives(client, server):
    env, key = self_hosted(client)
    agent = coder(client)
    w = as_worker(server, key)
    assert w.beta.environments.work.poll(env.id) is None
    got = {}

    def polling():
        return client.get(f"/v1/environments/{env.id}/work/stats", cast_to=object)["workers_polling"]

    before = polling()

    def poll():
        got["item"] = w.beta.environments.work.poll(
            env.id, block_ms=999, extra_headers={"Anthropic-Worker-ID": "waiting-worker"})

    t = threading.Thread(target=poll)
    t.start()
    # A poll registers its waiter before its first claim, and the claim counts its worker:
    # once the stats count this worker, the poll is waiting (its first claim found nothing).
    eventually(lambda: polling() > before, timeout=10, what="the long poll to be waiting", interval=0.01)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    t.join(timeout=10)
    # A poll claims only when it starts and when woken, so an item here means it was woken.
    assert got["item"] is not None and got["item"].data.id == sess.id

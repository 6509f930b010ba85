"""`file` resources of self-hosted sessions: the SDK's EnvironmentWorker (examples/worker.py)
downloads them with its work token to their mount paths before the first tool runs, and a
work token reads exactly the files its session mounts."""

import io
import json
import uuid
from pathlib import Path

import anthropic
import pytest

from test_worker import as_worker, coder, run_turn, self_hosted, token_of, workers  # noqa: F401


def test_the_sdk_worker_gets_the_sessions_files(client, server, tmp_path, workers):  # noqa: F811
    env, key = self_hosted(client)
    agent = coder(client)
    marker = uuid.uuid4().hex
    up = client.beta.files.upload(file=("notes.txt", io.BytesIO(f"notes {marker}\n".encode()), "text/plain"))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id,
                                       resources=[{"type": "file", "file_id": up.id}])
    mount = sess.resources[0].mount_path
    assert mount == f"/mnt/session/uploads/{up.id}"
    try:
        workers(server, env.id, key, tmp_path / "work")
        script = "\n---\n".join([
            "call read " + json.dumps({"file_path": mount}),
            "call bash " + json.dumps({"command": f"wc -c < {mount}"}),
            "call write " + json.dumps({"file_path": mount, "content": "changed"}),
            "say {{result}}",
        ])
        seen = run_turn(client, sess.id, script)
        results = [e for e in seen if e.type == "user.tool_result"]
        assert len(results) == 3, "the worker answered each call"
        texts = ["".join(c.text for c in r.content if c.type == "text") for r in results]
        assert f"notes {marker}" in texts[0] and not results[0].is_error
        assert str(len(f"notes {marker}\n")) in texts[1]
        assert results[2].is_error, "the mounted file is read-only to the file tools"
        assert Path(mount).read_text() == f"notes {marker}\n"
    finally:
        Path(mount).unlink(missing_ok=True)


def test_a_work_token_reads_only_its_sessions_files(client, server):
    env, key = self_hosted(client)
    agent = coder(client)
    mounted = client.beta.files.upload(file=("a.txt", io.BytesIO(b"mounted"), "text/plain"))
    other = client.beta.files.upload(file=("b.txt", io.BytesIO(b"other"), "text/plain"))
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id,
                                       resources=[{"type": "file", "file_id": mounted.id}])
    w = as_worker(server, key)
    item = w.beta.environments.work.poll(env.id)
    assert item is not None and item.data.id == sess.id
    w.beta.environments.work.ack(item.id, environment_id=env.id)
    holder = as_worker(server, token_of(item))
    assert holder.beta.files.download(mounted.id).read() == b"mounted"
    assert holder.beta.files.retrieve_metadata(mounted.id).filename == "a.txt"
    for call in (lambda: holder.beta.files.download(other.id), lambda: holder.beta.files.list(),
                 lambda: w.beta.files.download(mounted.id)):
        with pytest.raises(anthropic.PermissionDeniedError):
            call()

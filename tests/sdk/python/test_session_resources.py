"""Session resources through the official SDK with strict validation: a file uploaded,
mounted read-only in a session (given at creation and added later), seen by the agent's
`read` and `bash`, refused to `write`; the five resources methods."""

import io
import json

import anthropic
import pytest
from conftest import results, run, text_of





def test_file_resources_mount_read_only_and_their_crud(client, environment):
    up = client.beta.files.upload(file=("notes.txt", io.BytesIO(b"alpha\nbeta\n"), "text/plain"))
    other = client.beta.files.upload(file=("more.csv", io.BytesIO(b"a,b\n1,2\n"), "text/csv"))
    agent = client.beta.agents.create(name="reader", model="mast-scripted",
                                      tools=[{"type": "agent_toolset_20260401"}])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
                                       resources=[{"type": "file", "file_id": up.id}])
    assert len(sess.resources) == 1
    first = sess.resources[0]
    assert first.type == "file" and first.file_id == up.id
    assert first.mount_path == f"/mnt/session/uploads/{up.id}" and first.id.startswith("sesrsc_")

    added = client.beta.sessions.resources.add(sess.id, type="file", file_id=other.id, mount_path="/mnt/data/more.csv")
    assert added.type == "file" and added.mount_path == "/mnt/data/more.csv"
    listed = client.beta.sessions.resources.list(sess.id)
    assert [r.id for r in listed] == [first.id, added.id]
    assert [r.id for r in client.beta.sessions.resources.list(sess.id, limit=1)] == [first.id, added.id]
    got = client.beta.sessions.resources.retrieve(added.id, session_id=sess.id)
    assert got.id == added.id and got.file_id == other.id
    assert [r.id for r in client.beta.sessions.retrieve(sess.id).resources] == [first.id, added.id]

    seen = run(client, sess.id, [
        "call read " + json.dumps({"file_path": first.mount_path}),
        "call bash " + json.dumps({"command": "cat /mnt/data/more.csv; echo x > /mnt/data/more.csv || echo refused"}),
        "call write " + json.dumps({"file_path": first.mount_path, "content": "changed"}),
        "say done",
    ])
    read, bash, write = results(seen)
    assert not read.is_error and "alpha" in text_of(read) and "beta" in text_of(read)
    assert "a,b" in text_of(bash) and "1,2" in text_of(bash) and "refused" in text_of(bash)
    assert write.is_error and "read-only" in text_of(write)

    # Token rotation is for repositories only; unknown keys are named.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.resources.update(added.id, session_id=sess.id, authorization_token="t")
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.resources.add(sess.id, type="file", file_id=other.id, extra_body={"mount": "/x"})
    assert e.value.error_code == "unknown_field"
    # Two resources cannot share a mount path.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.resources.add(sess.id, type="file", file_id=up.id, mount_path="/mnt/data/more.csv")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.resources.add(sess.id, type="file", file_id="file_missing")

    deleted = client.beta.sessions.resources.delete(added.id, session_id=sess.id)
    assert deleted.id == added.id and deleted.type == "session_resource_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.resources.retrieve(added.id, session_id=sess.id)
    assert [r.id for r in client.beta.sessions.resources.list(sess.id)] == [first.id]
    seen = run(client, sess.id, [
        "call bash " + json.dumps({"command": "test -e /mnt/data/more.csv && echo still || echo gone"}),
        "say done",
    ])
    assert "gone" in text_of(results(seen)[0])


def test_unsupported_resources_are_refused(client, environment):
    agent = client.beta.agents.create(name="r", model="mast-scripted")
    for res in ():
        with pytest.raises(anthropic.BadRequestError) as e:
            client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[res])
        assert e.value.error_code == "unsupported_feature"
        assert "sekrit" not in json.dumps(e.value.body)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
                                    resources=[{"type": "file", "file_id": "file_missing"}])

"""Files in sessions through the official SDK with strict validation: a mounted upload seen by
the agent, the files it writes under /mnt/session/outputs listed by `files.list(scope_id=…)` and
downloaded, rewritten outputs as new files, the scope dropped when the session is deleted; and
`file` sources of image/document blocks reaching the model as the file's bytes."""

import base64
import io
import json
import uuid

import anthropic
import pytest

from conftest import WEATHER_TOOL, MessagesHandler, results, run, text_of
from test_files import mast_factory  # noqa: F401

OUT = "/mnt/session/outputs"
# The smallest valid PNG (1x1, transparent).
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")





def download(client, file_id: str) -> bytes:
    return client.beta.files.download(file_id).read()


def test_outputs_become_session_files(client, environment):
    up = client.beta.files.upload(file=("notes.txt", io.BytesIO(b"alpha\nbeta\n"), "text/plain"))
    agent = client.beta.agents.create(name="writer", model="mast-scripted",
                                      tools=[{"type": "agent_toolset_20260401"}])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
                                       resources=[{"type": "file", "file_id": up.id}])
    mount = sess.resources[0].mount_path
    assert list(client.beta.files.list(scope_id=sess.id)) == []

    seen = run(client, sess.id, [
        "call read " + json.dumps({"file_path": mount}),
        "call bash " + json.dumps({"command":
            f"tr a-z A-Z < {mount} > {OUT}/report.txt && mkdir -p {OUT}/sub && printf 'a,b\\n1,2\\n' > {OUT}/sub/data.csv"
            f" && ln -s /etc/passwd {OUT}/link && mkfifo {OUT}/pipe && echo ok"}),
        "say done",
    ])
    read, bash = results(seen)
    assert not read.is_error and "alpha" in text_of(read)
    assert not bash.is_error and "ok" in text_of(bash), text_of(bash)

    outputs = {f.filename: f for f in client.beta.files.list(scope_id=sess.id)}
    # Links and FIFOs are not outputs; nested files are, under their own name.
    assert sorted(outputs) == ["data.csv", "report.txt"]
    report = outputs["report.txt"]
    assert report.scope is not None and report.scope.type == "session" and report.scope.id == sess.id
    assert report.downloadable is True and report.mime_type == "text/plain"
    assert report.size_bytes == len(b"ALPHA\nBETA\n") and report.expires_at is None
    assert outputs["data.csv"].mime_type == "text/csv"
    assert download(client, report.id) == b"ALPHA\nBETA\n"
    assert download(client, outputs["data.csv"].id) == b"a,b\n1,2\n"
    # The upload is not in the session's scope.
    assert up.id not in [f.id for f in outputs.values()]

    # A call that changes nothing registers nothing; a rewritten file is a new file, and the
    # earlier one keeps its bytes.
    seen = run(client, sess.id, [
        "call bash " + json.dumps({"command": f"cat {OUT}/report.txt"}),
        "call bash " + json.dumps({"command": f"echo v2 > {OUT}/report.txt"}),
        "say done",
    ])
    assert [r.is_error for r in results(seen)] == [False, False]
    listed = list(client.beta.files.list(scope_id=sess.id))
    reports = [f for f in listed if f.filename == "report.txt"]
    assert len(listed) == 3 and len(reports) == 2
    newer = next(f for f in reports if f.id != report.id)
    assert download(client, newer.id) == b"v2\n"
    assert download(client, report.id) == b"ALPHA\nBETA\n"

    # Deleting the session leaves its outputs as files, no longer in its scope.
    client.beta.sessions.delete(sess.id)
    assert list(client.beta.files.list(scope_id=sess.id)) == []
    kept = client.beta.files.retrieve_metadata(newer.id)
    assert kept.scope is None and kept.downloadable is True
    assert download(client, newer.id) == b"v2\n"


def test_the_file_tools_write_outputs_too(client, environment):
    agent = client.beta.agents.create(name="writer", model="mast-scripted",
                                      tools=[{"type": "agent_toolset_20260401"}])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [
        "call write " + json.dumps({"file_path": f"{OUT}/summary.md", "content": "# Summary\nall good\n"}),
        "call edit " + json.dumps({"file_path": f"{OUT}/summary.md", "old_string": "all good", "new_string": "all fine"}),
        "say done",
    ])
    write, edit = results(seen)
    assert not write.is_error, text_of(write)
    assert not edit.is_error, text_of(edit)
    # Each call that changed the file registered it: the newest is the edited text.
    files = list(client.beta.files.list(scope_id=sess.id))
    assert [f.filename for f in files] == ["summary.md", "summary.md"]
    assert download(client, files[0].id) == b"# Summary\nall fine\n"
    assert download(client, files[1].id) == b"# Summary\nall good\n"


def requests_with(needle: str) -> list:
    return [r for r in MessagesHandler.received if needle in json.dumps(r)]


def blocks_of(request) -> list:
    """Every content block of the request's messages, tool results' content included."""
    out = []
    for m in request["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            out.append(b)
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                out.extend(b["content"])
    return out


def test_file_sources_reach_the_model_as_bytes(client, environment):
    marker = uuid.uuid4().hex
    image = client.beta.files.upload(file=("dot.png", io.BytesIO(PNG), "image/png"))
    doc = client.beta.files.upload(file=("brief.md", io.BytesIO(f"brief {marker}".encode()), "text/markdown"))
    pdf_bytes = b"%PDF-1.4\n% " + marker.encode() + b"\n%%EOF\n"
    pdf = client.beta.files.upload(file=("report.pdf", io.BytesIO(pdf_bytes), "application/pdf"))
    agent = client.beta.agents.create(name="looker", model="claude-opus-4-7", tools=[WEATHER_TOOL])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)

    pending = None
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [
            {"type": "text", "text": "look " + marker},
            {"type": "image", "source": {"type": "file", "file_id": image.id}},
            {"type": "document", "source": {"type": "file", "file_id": doc.id}, "title": "Brief"},
        ]}])
        for ev in st:
            if ev.type == "agent.custom_tool_use":
                pending = ev
            if ev.type == "session.status_idle":
                if ev.stop_reason.type != "requires_action":
                    break
                client.beta.sessions.events.send(sess.id, events=[{"type": "user.custom_tool_result",
                    "custom_tool_use_id": pending.id, "content": [
                        {"type": "text", "text": "sunny"},
                        {"type": "document", "source": {"type": "file", "file_id": pdf.id}}]}])
    assert pending is not None
    # The event log keeps the reference the client sent.
    sent = [e for e in client.beta.sessions.events.list(sess.id) if e.type == "user.message"][0]
    assert sent.content[1].source.type == "file" and sent.content[1].source.file_id == image.id

    first = requests_with("look " + marker)[0]
    blocks = blocks_of(first)
    img = next(b for b in blocks if b["type"] == "image")
    assert img["source"] == {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    d = next(b for b in blocks if b["type"] == "document")
    assert d["source"] == {"type": "text", "media_type": "text/plain", "data": f"brief {marker}"}
    assert d["title"] == "Brief"
    # The tool result's PDF reaches the next request as base64.
    last = requests_with("look " + marker)[-1]
    pdf_block = [b for b in blocks_of(last) if b["type"] == "document" and b["source"]["type"] == "base64"]
    assert [base64.b64decode(b["source"]["data"]) for b in pdf_block] == [pdf_bytes]
    assert pdf_block[0]["source"]["media_type"] == "application/pdf"


def test_file_sources_are_checked_when_sent(client, environment):
    text = client.beta.files.upload(file=("notes.txt", io.BytesIO(b"hi"), "text/plain"))
    binary = client.beta.files.upload(file=("blob.bin", io.BytesIO(b"\0\1"), "application/octet-stream"))
    agent = client.beta.agents.create(name="strict", model="mast-scripted")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)

    def send(block):
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [block]}])

    cases = [
        ({"type": "image", "source": {"type": "file", "file_id": "file_missing"}}, "not found"),
        ({"type": "image", "source": {"type": "file", "file_id": text.id}}, "image block takes"),
        ({"type": "document", "source": {"type": "file", "file_id": binary.id}}, "document block takes"),
    ]
    for block, says in cases:
        with pytest.raises(anthropic.BadRequestError) as e:
            send(block)
        assert says in e.value.message and "events[0].content[0].source.file_id" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.create(agent=agent.id, environment_id=environment.id, initial_events=[
            {"type": "user.message", "content": [{"type": "image", "source": {"type": "file", "file_id": "file_missing"}}]}])
    assert "initial_events[0].content[0].source.file_id" in e.value.message
    # Nothing refused was kept.
    assert [e for e in client.beta.sessions.events.list(sess.id) if e.type == "user.message"] == []


def test_a_large_output_is_streamed_not_held_in_memory(mast_factory):  # noqa: F811
    from test_files import rss_kib
    import threading
    import time
    import hashlib

    size = 120_000_000
    m = mast_factory("sqlite", extra_env={})
    c = m.client
    env = c.beta.environments.create(name="big-" + uuid.uuid4().hex[:8],
                                     config={"type": "cloud", "networking": {"type": "unrestricted"}})
    agent = c.beta.agents.create(name="big", model="mast-scripted", tools=[{"type": "agent_toolset_20260401"}])
    sess = c.beta.sessions.create(agent=agent.id, environment_id=env.id)
    # Warm the sandbox up first, so the measurement covers the output's registration.
    run(c, sess.id, ["call bash " + json.dumps({"command": "true"}), "say ok"])
    base_rss = rss_kib(m.pid)
    peak = [base_rss]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(m.pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        seen = run(c, sess.id, ["call bash " + json.dumps({"command":
            f"head -c {size} /dev/urandom > {OUT}/big.bin && sha256sum {OUT}/big.bin"}), "say done"])
        (bash,) = results(seen)
        assert not bash.is_error, text_of(bash)
        want = text_of(bash).split()[0]
        (f,) = list(c.beta.files.list(scope_id=sess.id))
        assert f.filename == "big.bin" and f.size_bytes == size
        got = hashlib.sha256()
        with c.beta.files.with_streaming_response.download(f.id) as r:
            for chunk in r.iter_bytes(1024 * 1024):
                got.update(chunk)
        assert got.hexdigest() == want
    finally:
        done.set()
        watcher.join()
    grown_mib = (peak[0] - base_rss) / 1024
    print(f"server RSS grew by {grown_mib:.1f} MiB for a {size}-byte output")
    # Held whole, the output alone would add 114 MiB; streamed, a few buffers.
    assert grown_mib < 32, f"server RSS grew by {grown_mib:.1f} MiB for a {size}-byte output (from {base_rss} KiB)"


def test_an_output_over_the_size_limit_is_reported_to_the_model(mast_factory):  # noqa: F811
    m = mast_factory("sqlite", extra_env={"MAST_FILES_MAX_BYTES": "4096"})
    c = m.client
    env = c.beta.environments.create(name="lim-" + uuid.uuid4().hex[:8],
                                     config={"type": "cloud", "networking": {"type": "unrestricted"}})
    agent = c.beta.agents.create(name="lim", model="mast-scripted", tools=[{"type": "agent_toolset_20260401"}])
    sess = c.beta.sessions.create(agent=agent.id, environment_id=env.id)
    seen = run(c, sess.id, ["call bash " + json.dumps({"command":
        f"head -c 10000 /dev/zero > {OUT}/big.bin; echo small > {OUT}/small.txt"}), "say done"])
    (bash,) = results(seen)
    said = text_of(bash)
    assert f"{OUT}/big.bin was not saved as an output file" in said and "4096 bytes" in said
    assert [f.filename for f in c.beta.files.list(scope_id=sess.id)] == ["small.txt"]
    assert c.beta.files.list().data == c.beta.files.list(scope_id=sess.id).data, "nothing half-stored was listed"

"""Memory stores through the official SDK (strict response validation), on SQLite and
Postgres: stores, memories (paths, preconditions, conflicts, prefix and depth listing) and
their versions (authors, filters, redaction), and the beta header the resource requires.

The server runs with a real API key, so versions name their author's key id."""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import uuid

import anthropic
import httpx2 as httpx  # the HTTP client anthropic 2.10 is built on
import pytest

from conftest import BACKENDS, MAST_BIN, free_port, fresh_postgres, start_mast

BETA = "agent-memory-2026-07-22"


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


@pytest.fixture(scope="module", params=BACKENDS)
def keyed_server(request):
    """A server whose store has one API key (so it does not run open): (base, key, key id)."""
    port = free_port()
    env = dict(os.environ, MAST_LOG="warn")
    env.pop("DATABASE_URL", None)
    if request.param == "postgres":
        env["DATABASE_URL"] = fresh_postgres()
    data_dir = tempfile.mkdtemp(prefix="mast-py-memory-")
    made = subprocess.run([MAST_BIN, "keys", "create", "--data-dir", data_dir], env=env,
                          capture_output=True, text=True, check=True)
    key = made.stdout.strip()
    key_id = re.search(r"(apikey_\w+)", made.stderr).group(1)
    proc, base = start_mast(data_dir, env, port)
    yield base, key, key_id
    proc.terminate()
    proc.wait(timeout=15)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def ms(keyed_server):
    base, key, _ = keyed_server
    client = anthropic.Anthropic(base_url=base, api_key=key, _strict_response_validation=True, max_retries=0)
    return client.beta.memory_stores


@pytest.fixture
def store(ms):
    return ms.create(name="notes-" + uuid.uuid4().hex[:6])


def error_type(e: anthropic.APIStatusError) -> str:
    return e.body["error"]["type"] if isinstance(e.body, dict) and "error" in e.body else e.body["type"]


def test_store_lifecycle(ms, keyed_server):
    s = ms.create(name="Team notes", description="What the team knows", metadata={"owner": "ana"})
    assert s.id.startswith("memstore_") and s.type == "memory_store"
    assert (s.name, s.description, s.metadata, s.archived_at) == ("Team notes", "What the team knows", {"owner": "ana"}, None)
    assert ms.retrieve(s.id) == s
    plain = ms.create(name="plain")
    assert plain.description == ""

    u = ms.update(s.id, name="Team", description="", metadata={"owner": None, "team": "core"})
    assert (u.name, u.description, u.metadata) == ("Team", "", {"team": "core"})
    assert u.updated_at >= s.updated_at
    with pytest.raises(anthropic.BadRequestError):
        ms.update(s.id, name="")
    with pytest.raises(anthropic.BadRequestError):
        ms.update(s.id, description="x" * 1025)
    with pytest.raises(anthropic.BadRequestError):
        ms.create(name="bad\nname")
    with pytest.raises(anthropic.BadRequestError):
        ms.create(name="x", metadata={"": "v"})
    with pytest.raises(anthropic.BadRequestError) as e:
        ms.create(name="x", extra_body={"nme": "typo"})
    assert "nme" in e.value.message

    # Archive: irreversible, idempotent, hidden from the default list.
    a = ms.archive(s.id)
    assert a.archived_at is not None
    assert ms.archive(s.id).archived_at == a.archived_at
    with pytest.raises(anthropic.BadRequestError):
        ms.update(s.id, name="again")
    listed = [x.id for x in ms.list(limit=100)]
    assert plain.id in listed and s.id not in listed
    assert s.id in [x.id for x in ms.list(limit=100, include_archived=True)]
    after = [x.id for x in ms.list(include_archived=True, created_at_gte=plain.created_at)]
    assert plain.id in after and s.id not in after
    before = [x.id for x in ms.list(include_archived=True, created_at_lte=s.created_at)]
    assert s.id in before and plain.id not in before

    # Pages walk the whole list, newest first.
    ids = [x.id for x in ms.list(limit=1, include_archived=True)]
    assert ids.index(plain.id) < ids.index(s.id)

    d = ms.delete(plain.id)
    assert (d.id, d.type) == (plain.id, "memory_store_deleted")
    with pytest.raises(anthropic.NotFoundError):
        ms.retrieve(plain.id)
    with pytest.raises(anthropic.NotFoundError):
        ms.delete(plain.id)


def test_beta_header_is_required(keyed_server, store):
    base, key, _ = keyed_server
    h = {"authorization": f"Bearer {key}"}
    r = httpx.get(f"{base}/v1/memory_stores/{store.id}", headers=h)
    assert r.status_code == 400 and BETA in r.json()["error"]["message"]
    for beta in (BETA, f"files-api-2025-04-14, {BETA}", "managed-agents-2026-04-01"):
        assert httpx.get(f"{base}/v1/memory_stores/{store.id}", headers=dict(h, **{"anthropic-beta": beta})).status_code == 200


def test_memories_crud_preconditions_and_conflicts(ms, store):
    mem = ms.memories
    m = mem.create(store.id, path="/projects/foo/notes.md", content="hello")
    assert m.id.startswith("mem_") and m.content is None, "create answers the basic view"
    assert (m.content_sha256, m.content_size_bytes) == (sha("hello"), 5)
    full = mem.retrieve(m.id, memory_store_id=store.id)
    assert full.content == "hello" and full.memory_version_id == m.memory_version_id
    assert mem.retrieve(m.id, memory_store_id=store.id, view="basic").content is None
    assert mem.create(store.id, path="/empty", content="").content_sha256 == sha("")

    with pytest.raises(anthropic.ConflictError) as e:
        mem.create(store.id, path="/projects/foo/notes.md", content="again")
    assert error_type(e.value) == "memory_path_conflict_error"
    assert e.value.body["error"]["details"]["conflicting_memory_id"] == m.id
    assert e.value.response.headers["x-should-retry"] == "false"

    with pytest.raises(anthropic.ConflictError) as e:
        mem.update(m.id, memory_store_id=store.id, content="new",
                   precondition={"type": "content_sha256", "content_sha256": sha("stale")})
    assert error_type(e.value) == "memory_precondition_failed_error"
    assert mem.retrieve(m.id, memory_store_id=store.id).content == "hello"

    u = mem.update(m.id, memory_store_id=store.id, content="new", view="full",
                   precondition={"type": "content_sha256", "content_sha256": sha("hello")})
    assert (u.content, u.content_sha256, u.id) == ("new", sha("new"), m.id)
    assert u.memory_version_id != m.memory_version_id

    r = mem.update(m.id, memory_store_id=store.id, path="/archive/notes.md")
    assert (r.id, r.path, r.content_sha256) == (m.id, "/archive/notes.md", sha("new"))
    with pytest.raises(anthropic.ConflictError) as e:
        mem.update(m.id, memory_store_id=store.id, path="/empty")
    assert error_type(e.value) == "memory_path_conflict_error"
    # The old path is free again.
    mem.create(store.id, path="/projects/foo/notes.md", content="fresh")

    with pytest.raises(anthropic.BadRequestError):
        mem.update(m.id, memory_store_id=store.id, precondition={"type": "content_sha256", "content_sha256": "ABC"})
    with pytest.raises(anthropic.ConflictError) as e:
        mem.delete(m.id, memory_store_id=store.id, expected_content_sha256=sha("other"))
    assert error_type(e.value) == "memory_precondition_failed_error"
    d = mem.delete(m.id, memory_store_id=store.id, expected_content_sha256=sha("new"))
    assert (d.id, d.type) == (m.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        mem.retrieve(m.id, memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        mem.delete(m.id, memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        mem.create("memstore_missing", path="/a", content="")


def test_path_and_content_limits(ms, store):
    mem = ms.memories
    ok = ["/a", "/" + "x" * 1023, "/a" * 20, "/caf\u00e9", "/with space/and-dash_.md"]
    for p in ok:
        assert mem.create(store.id, path=p, content="").path == p
    bad = ["a", "/", "/a/", "//a", "/a/./b", "/a/../b", "/" + "x" * 1024, "/a" * 21, "/tab\there",
           "/zero\u200bwidth", "/line\u2028sep", "/cafe\u0301", "/bom\ufeff"]
    for p in bad:
        with pytest.raises(anthropic.BadRequestError):
            mem.create(store.id, path=p, content="")
    assert mem.create(store.id, path="/big", content="x" * 102_400).content_size_bytes == 102_400
    with pytest.raises(anthropic.BadRequestError):
        mem.create(store.id, path="/too-big", content="x" * 102_401)
    # Multi-byte characters count in bytes.
    with pytest.raises(anthropic.BadRequestError):
        mem.create(store.id, path="/too-big", content="\u00e9" * 51_201)
    with pytest.raises(anthropic.BadRequestError):
        mem.create(store.id, path="/no-content", content=None)
    with pytest.raises(anthropic.BadRequestError):
        mem.create(store.id, path="/x", content="", extra_body={"contents": "typo"})


def test_listing_by_prefix_and_depth(ms, store):
    mem = ms.memories
    paths = ["/notes/todo.md", "/notes/a/one.md", "/notes/a/deep/two.md", "/notes/b/three.md",
             "/notes-archive/todo.md", "/readme.md"]
    for p in paths:
        mem.create(store.id, path=p, content=p)

    def items(**kw):
        return [(i.type, i.path) for i in mem.list(store.id, **kw)]

    assert items() == [("memory", p) for p in sorted(paths)]
    assert items(path_prefix="/notes/") == [("memory", p) for p in sorted(paths) if p.startswith("/notes/")]
    assert items(path_prefix="/notes/", depth=1) == [
        ("memory_prefix", "/notes/a/"), ("memory_prefix", "/notes/b/"), ("memory", "/notes/todo.md")]
    assert items(depth=1) == [("memory_prefix", "/notes-archive/"), ("memory_prefix", "/notes/"), ("memory", "/readme.md")]
    assert items(path_prefix="/notes/", depth=2) == [
        ("memory_prefix", "/notes/a/deep/"), ("memory", "/notes/a/one.md"), ("memory", "/notes/b/three.md"),
        ("memory", "/notes/todo.md")]
    assert items(path_prefix="/nothing/") == []

    # Prefix items count toward `limit`; pages go on where the last one stopped.
    first = mem.list(store.id, path_prefix="/notes/", depth=1, limit=2)
    assert [i.path for i in first.data] == ["/notes/a/", "/notes/b/"] and first.next_page
    second = mem.list(store.id, path_prefix="/notes/", depth=1, limit=2, page=first.next_page)
    assert [i.path for i in second.data] == ["/notes/todo.md"] and second.next_page is None
    assert [i.path for i in mem.list(store.id, limit=1)] == sorted(paths)

    basic = mem.list(store.id).data
    assert all(i.content is None and i.content_sha256 == sha(i.path) for i in basic)
    full = mem.list(store.id, view="full").data
    assert [i.content for i in full] == sorted(paths)

    for bad in ({"path_prefix": "/notes"}, {"path_prefix": "notes/"}, {"depth": -1}, {"limit": 0},
                {"limit": 101}, {"view": "all"}, {"page": "nonsense"}):
        with pytest.raises(anthropic.BadRequestError):
            mem.list(store.id, **bad)


def test_full_view_pages_hold_at_most_20(ms, store):
    for i in range(25):
        ms.memories.create(store.id, path=f"/m/{i:02}", content="x")
    assert len(ms.memories.list(store.id, limit=100).data) == 25
    page = ms.memories.list(store.id, limit=100, view="full")
    assert len(page.data) == 20 and page.next_page
    assert len(list(ms.memories.list(store.id, limit=100, view="full"))) == 25
    assert len(ms.memory_versions.list(store.id, limit=100, view="full").data) == 20


def test_versions_filters_and_redaction(ms, store, keyed_server):
    _, _, key_id = keyed_server
    mem, ver = ms.memories, ms.memory_versions
    m = mem.create(store.id, path="/a.md", content="one")
    mem.update(m.id, memory_store_id=store.id, content="two")
    other = mem.create(store.id, path="/b.md", content="b")
    mem.delete(m.id, memory_store_id=store.id)

    all_versions = list(ver.list(store.id))
    assert [v.operation for v in all_versions] == ["deleted", "created", "modified", "created"], "newest first"
    for v in all_versions:
        assert v.created_by.type == "api_actor" and v.created_by.api_key_id == key_id
        assert v.content is None, "the list's default view is basic"
    deleted, _, modified, created = all_versions
    assert (deleted.path, deleted.content_sha256, deleted.content_size_bytes) == ("/a.md", None, None)
    assert (modified.content_sha256, modified.content_size_bytes) == (sha("two"), 3)

    lineage = [v.operation for v in ver.list(store.id, memory_id=m.id)]
    assert lineage == ["deleted", "modified", "created"], "the lineage outlives the memory"
    assert [v.id for v in ver.list(store.id, operation="created")] == [
        v.id for v in all_versions if v.operation == "created"]
    assert len(list(ver.list(store.id, api_key_id=key_id))) == 4
    assert list(ver.list(store.id, api_key_id="apikey_other")) == []
    assert list(ver.list(store.id, session_id="sesn_none")) == []
    assert list(ver.list(store.id, service_account_id="svac_none")) == []
    assert [v.id for v in ver.list(store.id, created_at_gte=modified.created_at, created_at_lte=modified.created_at)] == [modified.id]
    assert [v.id for v in ver.list(store.id, limit=1)] == [v.id for v in all_versions]
    with pytest.raises(anthropic.BadRequestError):
        ver.list(store.id, operation="renamed")

    got = ver.retrieve(created.id, memory_store_id=store.id)
    assert (got.content, got.path, got.memory_id) == ("one", "/a.md", m.id)
    assert ver.retrieve(created.id, memory_store_id=store.id, view="basic").content is None

    r = ver.redact(created.id, memory_store_id=store.id)
    assert (r.content, r.path, r.content_sha256, r.content_size_bytes) == (None, None, None, None)
    assert r.redacted_at is not None and r.redacted_by.api_key_id == key_id
    assert r.created_by.api_key_id == key_id, "redaction keeps the author"
    assert ver.retrieve(created.id, memory_store_id=store.id) == r
    assert ver.redact(created.id, memory_store_id=store.id) == r, "redacting again changes nothing"

    # The current version of a live memory stays.
    current = mem.retrieve(other.id, memory_store_id=store.id).memory_version_id
    with pytest.raises(anthropic.BadRequestError):
        ver.redact(current, memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        ver.retrieve("memver_missing", memory_store_id=store.id)


def test_archived_store_reads_deletes_and_redacts_only(ms, store):
    mem, ver = ms.memories, ms.memory_versions
    m = mem.create(store.id, path="/a", content="1")
    mem.update(m.id, memory_store_id=store.id, content="2")
    keep = mem.create(store.id, path="/b", content="b")
    ms.archive(store.id)
    for write in (lambda: mem.create(store.id, path="/c", content=""),
                  lambda: mem.update(m.id, memory_store_id=store.id, content="3")):
        with pytest.raises(anthropic.BadRequestError) as e:
            write()
        assert e.value.body["error"]["details"]["error_code"] == "memory_store_archived"
    assert mem.retrieve(m.id, memory_store_id=store.id).content == "2"
    assert len(list(mem.list(store.id))) == 2
    first = [v for v in ver.list(store.id, memory_id=m.id) if v.operation == "created"][0]
    assert ver.redact(first.id, memory_store_id=store.id).redacted_at is not None
    mem.delete(keep.id, memory_store_id=store.id)
    ms.delete(store.id)
    with pytest.raises(anthropic.NotFoundError):
        mem.list(store.id)
    with pytest.raises(anthropic.NotFoundError):
        ver.retrieve(first.id, memory_store_id=store.id)


def test_sessions_list_by_memory_store(keyed_server, store):
    base, key, _ = keyed_server
    client = anthropic.Anthropic(base_url=base, api_key=key, _strict_response_validation=True, max_retries=0)
    page = client.beta.sessions.list(memory_store_id=store.id)
    assert page.data == [] and page.next_page is None
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.list(memory_store_id="memstore_missing")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.list(memory_store_id="vlt_not_a_store")
